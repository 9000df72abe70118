/* q35 verify: check a model directory against its q35-manifest.json. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hub/manifest.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 verify DIR           check DIR against DIR/q35-manifest.json (sizes and SHA-256)\n"
            "       q35 verify --write DIR   write DIR/q35-manifest.json for the model files now in DIR\n"
            "Prints one line per problem (missing file, size or hash mismatch); files the manifest does not\n"
            "list are ignored. Exit status 0 when everything matches, 1 otherwise.\n");
}

static void print_problem(const char *line, void *user) {
    (void)user;
    printf("%s\n", line);
}

int cmd_verify(int argc, char **argv) {
    const char *dir = NULL;
    int write = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--write")) {
            write = 1;
        } else if (argv[i][0] != '-' && !dir) {
            dir = argv[i];
        } else {
            cli_error("verify: unknown option '%s' (see q35 verify --help)", argv[i]);
            return 2;
        }
    }
    if (!dir) {
        cli_error("verify: need a model directory (see q35 verify --help)");
        return 2;
    }
    q35_status st;
    if (write) {
        int n = 0;
        if ((st = q35_manifest_write_dir(dir, &n))) return cli_fail("verify --write", st);
        fprintf(stderr, "q35: wrote %s/%s (%d files)\n", dir, Q35_MANIFEST_NAME, n);
        return 0;
    }
    int bad = 0, n = 0;
    if ((st = q35_manifest_verify(dir, print_problem, NULL, &bad, &n))) return cli_fail("verify", st);
    fflush(stdout);
    if (bad) {
        cli_error("verify: %s: %d of %d files do not match the manifest", dir, bad, n);
        return 1;
    }
    fprintf(stderr, "q35: verify: %s: %d files match the manifest\n", dir, n);
    return 0;
}
