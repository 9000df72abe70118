/* libFuzzer target: arbitrary bytes as model.safetensors next to a valid config.json, through the
 * whole loader (header parse, offset checks, tensor binding). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_tmp.h"
#include "q35.h"

static char dir[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *cfg = getenv("Q35_FUZZ_CONFIG");
    snprintf(dir, sizeof dir, "%s", fuzz_tmp_make("fuzz-model"));
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *in = fopen(cfg ? cfg : "tests/fuzz/micro/config.json", "rb"), *out = fopen(path, "wb");
    if (!in || !out) abort();
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    q35_model *m = NULL;
    if (q35_model_load(dir, &m) == Q35_OK) {
        q35_session *s;
        if (q35_session_new(m, 8, &s) == Q35_OK) {
            int32_t ids[2] = {0, 1};
            q35_session_eval(s, ids, 2, NULL, NULL);
            q35_session_free(s);
        }
        q35_model_free(m);
    }
    return 0;
}
