/* libFuzzer target for q35 serve's request validation (src/server/request.c, image.c): the input
 * is an HTTP body for POST /v1/chat/completions (first byte even) or /v1/completions (odd). Every
 * body must either parse into a request whose fields are in range, or fail with a 400/413/500
 * error carrying a message; nothing may leak. Tokenizes with the real Qwen3 tokenizer
 * ($Q35_FUZZ_TOKENIZER). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q35.h"
#include "server/request.h"

static q35_tokenizer *qwen3;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *p = getenv("Q35_FUZZ_TOKENIZER");
    if (!p || q35_tokenizer_load_file(p, &qwen3) != Q35_OK) {
        fprintf(stderr, "fuzz_request: set Q35_FUZZ_TOKENIZER to a tokenizer.json (%s)\n", q35_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv_request_ctx c;
    memset(&c, 0, sizeof c);
    q35_sampler_default_params(&c.defaults);
    c.tok = qwen3;
    c.n_ctx = 256;
    c.max_image_bytes = 4096;
    c.has_vision = data[0] & 2;
    srv_request r;
    srv_err e;
    if (srv_request_parse((const char *)data + 1, size - 1, data[0] & 1 ? SRV_KIND_COMPLETION : SRV_KIND_CHAT, &c, &r, &e) == 0) {
        if (r.n_tokens < 1 || r.n_tokens >= c.n_ctx || r.gen.max_tokens < 1 || r.gen.max_tokens > c.n_ctx - r.n_tokens || !r.prompt ||
            r.gen.n_stop < 0 || r.gen.n_stop > SRV_MAX_STOPS)
            abort();
        srv_request_free(&r);
    } else if ((e.status != 400 && e.status != 500) || !e.message[0]) {
        abort();
    }
    return 0;
}
