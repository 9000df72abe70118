/* q35 pull: download a Hugging Face model repository's files, each verified against the hash the
 * hub publishes, and write the directory's q35-manifest.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "hub/hub.h"
#include "hub/manifest.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 pull OWNER/NAME [--dir DIR] [--revision R] [--endpoint URL] [--all] [--retries N]\n"
            "Downloads the files q35 needs (config, *.safetensors and index, tokenizer, chat template, generation and\n"
            "preprocessor configs, README/LICENSE) into DIR (default ./NAME), verifying each against the hub's\n"
            "published SHA-256 (LFS files) or Git blob SHA-1 (small files) and size, and writes DIR/q35-manifest.json.\n"
            "An interrupted download resumes from DIR/.q35-tmp/ on the next run; files already right are kept.\n"
            "  --dir DIR        target directory (default: the repository's name under the current directory)\n"
            "  --revision R     branch, tag or commit (default main); files come from the commit it resolves to\n"
            "  --endpoint URL   hub address (default $HF_ENDPOINT, else https://huggingface.co)\n"
            "  --all            every file of the repository, not only the ones q35 needs\n"
            "  --retries N      resume a dropped transfer up to N times (default 3)\n"
            "HF_TOKEN, when set, is sent as a bearer token (gated or private repositories).\n");
}

static void on_progress(const char *path, uint64_t done, uint64_t total, void *user) {
    (void)path;
    cli_progress_update(user, done, total);
}

int cmd_pull(int argc, char **argv) {
    const char *repo = NULL, *dir = NULL, *revision = "main", *endpoint_arg = NULL;
    int all = 0;
    long retries = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--dir") && v) {
            dir = v, i++;
        } else if (!strcmp(a, "--revision") && v) {
            revision = v, i++;
        } else if (!strcmp(a, "--endpoint") && v) {
            endpoint_arg = v, i++;
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--retries") && v) {
            if (cli_parse_long(v, a, 0, 100, &retries)) return 2;
            i++;
        } else if (a[0] != '-' && !repo) {
            repo = a;
        } else {
            cli_error("pull: unknown or incomplete option '%s' (see q35 pull --help)", a);
            return 2;
        }
    }
    if (!repo) {
        cli_error("pull: need a repository, e.g. q35 pull Qwen/Qwen3.5-0.8B (see q35 pull --help)");
        return 2;
    }
    if (!q35_hub_repo_ok(repo)) {
        cli_error("pull: '%s' is not a repository name (expected OWNER/NAME of letters, digits, '-', '_', '.')", repo);
        return 2;
    }
    const char *env = getenv("HF_ENDPOINT");
    char endpoint[1024];
    snprintf(endpoint, sizeof endpoint, "%s", endpoint_arg ? endpoint_arg : env && *env ? env : "https://huggingface.co");
    for (size_t n = strlen(endpoint); n && endpoint[n - 1] == '/';) endpoint[--n] = 0;
    if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) {
        cli_error("pull: the endpoint must be an http:// or https:// URL, got '%s'", endpoint);
        return 2;
    }
    if (!dir) dir = strchr(repo, '/') ? strchr(repo, '/') + 1 : repo;

    q35_http *http = NULL;
    q35_hub_listing l = {0};
    q35_manifest_file *mf = NULL;
    int rc = 1;
    q35_status st = q35_http_new(getenv("HF_TOKEN"), &http);
    if (st) return cli_fail("pull", st);
    if ((st = q35_hub_list(http, endpoint, repo, revision, &l))) {
        rc = cli_fail("pull: listing the repository", st);
        goto done;
    }
    mf = calloc((size_t)(l.n ? l.n : 1), sizeof *mf);
    if (!mf) {
        cli_error("pull: out of memory");
        goto done;
    }
    int n_sel = 0, has_config = 0;
    uint64_t total = 0;
    for (int i = 0; i < l.n; i++) {
        q35_hub_file *f = &l.files[i];
        if (!all && !q35_hub_wanted(f->path)) continue;
        if (!strcmp(f->path, ".gitattributes")) continue;
        if (!q35_hub_path_ok(f->path)) {
            cli_error("pull: the listing names an unsafe path '%.200s'; nothing downloaded", f->path);
            goto done;
        }
        has_config |= !strcmp(f->path, "config.json");
        total += f->size;
        n_sel++;
    }
    if (!has_config) {
        cli_error("pull: %s@%s has no config.json: not a model repository q35 can run", repo, revision);
        goto done;
    }
    if ((st = q35_mkdirs(dir))) {
        rc = cli_fail("pull", st);
        goto done;
    }
    fprintf(stderr, "q35: %s@%s (commit %s): %d files, %.1f MB into %s\n", repo, revision, l.commit, n_sel, total / 1e6, dir);
    int k = 0;
    for (int i = 0; i < l.n; i++) {
        q35_hub_file *f = &l.files[i];
        if ((!all && !q35_hub_wanted(f->path)) || !strcmp(f->path, ".gitattributes")) continue;
        cli_progress bar;
        cli_progress_init(&bar, f->path);
        q35_hub_fetch_result res;
        st = q35_hub_fetch(http, endpoint, repo, l.commit, dir, f, (int)retries, on_progress, &bar, &res);
        cli_progress_end(&bar);
        if (st) {
            rc = cli_fail("pull", st);
            goto done;
        }
        const char *how = f->lfs ? "SHA-256" : "Git blob SHA-1";
        if (res.up_to_date)
            fprintf(stderr, "q35: %s: up to date (%llu bytes, %s verified)\n", f->path, (unsigned long long)f->size, how);
        else if (res.resumed_from)
            fprintf(stderr, "q35: %s: %llu bytes (resumed at %llu, fetched %llu), %s verified\n", f->path, (unsigned long long)f->size,
                    (unsigned long long)res.resumed_from, (unsigned long long)res.fetched, how);
        else
            fprintf(stderr, "q35: %s: %llu bytes, %s verified\n", f->path, (unsigned long long)f->size, how);
        mf[k].path = f->path;
        mf[k].size = f->size;
        memcpy(mf[k].sha256, f->sha256, sizeof f->sha256);
        k++;
    }
    if ((st = q35_manifest_write(dir, repo, l.commit, mf, k))) {
        rc = cli_fail("pull: writing the manifest", st);
        goto done;
    }
    fprintf(stderr, "q35: pulled %s into %s (%d files; %s/%s lists them, q35 verify %s checks them)\n", repo, dir, k, dir,
            Q35_MANIFEST_NAME, dir);
    rc = 0;
done:
    free(mf);
    q35_hub_listing_free(&l);
    q35_http_free(http);
    return rc;
}
