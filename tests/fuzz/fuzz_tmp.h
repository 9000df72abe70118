/* A per-process scratch directory for the fuzz targets that must hand the library a file path.
 * It is made under $TMPDIR (or /tmp) with mkdtemp and removed, files and all, when the fuzzer
 * exits (libFuzzer leaves by exit() at -max_total_time, -runs and on a finding), so repeated runs
 * leave nothing behind. */
#ifndef Q35_FUZZ_TMP_H
#define Q35_FUZZ_TMP_H
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_tmp_dir[256];

static void fuzz_tmp_remove(void) {
    DIR *d = opendir(fuzz_tmp_dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_tmp_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(fuzz_tmp_dir);
}

/* Makes the directory (aborts when it cannot: the target cannot run without it) and returns it. */
static const char *fuzz_tmp_make(const char *name) {
    const char *root = getenv("TMPDIR");
    snprintf(fuzz_tmp_dir, sizeof fuzz_tmp_dir, "%s/q35-%s-XXXXXX", root && *root ? root : "/tmp", name);
    if (!mkdtemp(fuzz_tmp_dir)) {
        perror(fuzz_tmp_dir);
        abort();
    }
    atexit(fuzz_tmp_remove);
    return fuzz_tmp_dir;
}
#endif
