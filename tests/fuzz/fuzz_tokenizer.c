/* libFuzzer target for the tokenizer. First byte even: the rest is a tokenizer.json to load (and,
 * if it loads, to encode and decode a fixed text with). Odd: the rest is text, encoded with the real
 * Qwen3 tokenizer ($Q35_FUZZ_TOKENIZER) with and without special-token parsing, then decoded, both
 * at once and through the streaming decoder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_tmp.h"
#include "q35.h"

static q35_tokenizer *qwen3;
static char tmp_path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *p = getenv("Q35_FUZZ_TOKENIZER");
    if (!p || q35_tokenizer_load_file(p, &qwen3) != Q35_OK) {
        fprintf(stderr, "fuzz_tokenizer: set Q35_FUZZ_TOKENIZER to a tokenizer.json (%s)\n", q35_last_error());
        abort();
    }
    snprintf(tmp_path, sizeof tmp_path, "%s/tokenizer.json", fuzz_tmp_make("fuzz-tok"));
    return 0;
}

static void exercise(const q35_tokenizer *t, const char *text, size_t len, int special) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (q35_tokenize(t, text, len, special, &ids, &n) == Q35_OK) {
        char *back = NULL;
        if (q35_detokenize(t, ids, n, &back) == Q35_OK) free(back);
        q35_stream_decoder *d = q35_stream_decoder_new(t);
        char out[8];
        for (size_t i = 0; d && i < n; i++) q35_stream_decoder_push(d, ids[i], out, sizeof out);
        while (d && q35_stream_decoder_flush(d, out, sizeof out) > 0) {}
        q35_stream_decoder_free(d);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 1) {
        exercise(qwen3, (const char *)data + 1, size - 1, 1);
        exercise(qwen3, (const char *)data + 1, size - 1, 0);
        return 0;
    }
    FILE *f = fopen(tmp_path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    q35_tokenizer *t = NULL;
    if (q35_tokenizer_load_file(tmp_path, &t) == Q35_OK) {
        static const char text[] = "Hello wörld 123 <|im_start|>user\n\xe4\xbd\xa0\xe5\xa5\xbd \xff\xfe!";
        exercise(t, text, sizeof text - 1, 1);
        int32_t id = 0;
        size_t len;
        q35_token_bytes(t, id, &len);
        q35_tokenizer_free(t);
    }
    return 0;
}
