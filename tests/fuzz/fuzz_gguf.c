/* libFuzzer target: arbitrary bytes as a .gguf model through the whole loader (header, metadata,
 * tensor infos, offsets, qwen35 config, binding) and, when it loads, two tokens of evaluation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_tmp.h"
#include "model/model.h"
#include "q35.h"

static char path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    snprintf(path, sizeof path, "%s/model.gguf", fuzz_tmp_make("fuzz-gguf"));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    q35_model *m = NULL;
    if (q35_model_load(path, &m) == Q35_OK) {
        /* A loaded file bounds the weights, not the recurrent state (Hv x dk x dv per layer): evaluate
         * only models whose state stays small. */
        const q35_config *c = &m->cfg;
        long long state = (long long)c->n_layers * c->lin_v_heads * c->lin_k_dim * c->lin_v_dim;
        q35_session *s;
#ifdef Q35_FUZZ_LOAD_ONLY
        state = 1LL << 40; /* loader only */
#endif
        if (state > (1 << 22) || (long long)c->n_layers * c->n_kv_heads * c->head_dim > (1 << 22)) {
            q35_model_free(m);
            return 0;
        }
        if (q35_session_new(m, 8, &s) == Q35_OK) {
            int32_t ids[2] = {0, 1};
            q35_session_eval(s, ids, 2, NULL, NULL);
            q35_session_free(s);
        }
        q35_model_free(m);
    }
    return 0;
}
