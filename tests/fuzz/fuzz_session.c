/* libFuzzer target: arbitrary bytes as a session file for the micro model (tests/fuzz/micro with
 * the fuzz_model seed's weights), loaded twice: as they are (mostly stopped by the header checks or
 * the checksum) and with a correct CRC-32 appended, so that every check after the checksum is
 * reached too. A load that succeeds must leave a session that evaluates and saves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz_tmp.h"
#include "q35.h"

static char dir[256], file[300];
static q35_model *model;

static int copy(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    fclose(in);
    return fclose(out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    snprintf(dir, sizeof dir, "%s", fuzz_tmp_make("fuzz-session"));
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (copy("tests/fuzz/micro/config.json", path)) abort();
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (copy("tests/fuzz/corpus/fuzz_model/micro.safetensors", path)) abort();
    if (q35_model_load(dir, &model)) abort();
    snprintf(file, sizeof file, "%s/session.q35s", dir);
    return 0;
}

static void try_load(const uint8_t *data, size_t size, int fix_crc) {
    FILE *f = fopen(file, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    if (fix_crc) {
        uint32_t crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), data, (uInt)size);
        fwrite(&crc, 1, 4, f);
    }
    fclose(f);
    q35_session *s = NULL;
    if (q35_session_new(model, 32, &s)) return;
    void *blob = NULL;
    size_t blob_len = 0;
    if (q35_session_load_ex(s, file, &blob, &blob_len) == Q35_OK) {
        int32_t ids[2] = {1, 2};
        q35_session_eval(s, ids, 2, NULL, NULL);
        q35_session_save(s, file);
        int ready = 0;
        q35_prefix_cache_restore(NULL, s, ids, 2, &ready);
    }
    free(blob);
    q35_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try_load(data, size, 0);
    try_load(data, size, 1);
    return 0;
}
