/* Sessions: one sequence's state (conv FIFO, recurrent state, KV cache) and its chunk scratch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/hugemem.h"
#include "core/pool.h"
#include "kernels/attention.h"
#include "layers/layers.h"
#include "runtime/state.h"

/* Tokens per forward chunk (prompt processing). The weights are streamed once per chunk: 128 halves
 * that traffic against 64, and measured as fast as 64 on the 0.8B shapes (512-token prompt, the
 * layer code alone and with the products). Q35_PROMPT_CHUNK overrides. */
#define Q35_CHUNK 128
/* Tokens per chunk of the chunkwise Gated DeltaNet (0: the token recurrence for prompts too).
 * Measured per token and value head (dk = dv = 128, AVX-512, best of 40): 16 0.95 us, 32 1.0 us,
 * 64 1.15-1.2 us, 128 1.55 us, the token recurrence 1.8-1.9 us: the work of A, P and the solve
 * grows with the chunk, while smaller chunks give smaller products. Q35_GDN_CHUNK overrides. */
#define Q35_GDN_CHUNK 32

static int env_int(const char *name, int def, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < lo || x > hi ? def : (int)x;
}

size_t q35_state_bytes(const q35_config *c, int n_ctx, int kv_f16) {
    const size_t C = (size_t)q35_cfg_conv_channels(c);
    return sizeof(float) * (size_t)c->n_linear * ((size_t)(c->conv_kernel - 1) * C + (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim) +
           q35_kv_elt(kv_f16) * 2 * (size_t)c->n_full * n_ctx * c->n_kv_heads * c->head_dim;
}

static float *alloc_f(size_t n, int *fail) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) *fail = 1;
    return p;
}
/* The recurrent state and the KV cache: read (and the state written) every token, on huge pages. */
static void *alloc_big(size_t bytes, int *fail) {
    void *p = q35_huge_alloc(bytes);
    if (!p) *fail = 1;
    return p;
}

q35_status q35_session_new(q35_model *m, int n_ctx, q35_session **out) {
    const q35_session_opts o = {.n_ctx = n_ctx};
    return q35_session_new_ex(m, &o, out);
}

q35_status q35_session_new_ex(q35_model *m, const q35_session_opts *opts, q35_session **out) {
    if (!out) return q35_fail(Q35_ERR_ARG, "session: bad arguments");
    *out = NULL;
    if (!m || !opts) return q35_fail(Q35_ERR_ARG, "session: bad arguments");
    const q35_config *c = &m->cfg;
    int n_ctx = opts->n_ctx;
    if (opts->kv_type != Q35_KV_F32 && opts->kv_type != Q35_KV_F16)
        return q35_fail(Q35_ERR_ARG, "KV cache type %d: expected Q35_KV_F32 or Q35_KV_F16", (int)opts->kv_type);
    if (n_ctx < 0) return q35_fail(Q35_ERR_ARG, "context size %d must be positive", n_ctx);
    if (n_ctx == 0) n_ctx = 4096 < c->max_pos ? 4096 : c->max_pos;
    if (n_ctx > c->max_pos)
        return q35_fail(Q35_ERR_ARG, "context size %d is more than the model's max_position_embeddings (%d)", n_ctx, c->max_pos);
    q35_session *s = calloc(1, sizeof *s);
    if (!s) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
    s->kv_f16 = opts->kv_type == Q35_KV_F16;
    const size_t H = c->hidden, C = q35_cfg_conv_channels(c), vd = (size_t)c->lin_v_heads * c->lin_v_dim;
    const size_t hd = c->head_dim, nq = (size_t)c->n_heads * hd * (c->attn_output_gate ? 2 : 1), kvw = (size_t)c->n_kv_heads * hd;
    const size_t B = (size_t)env_int("Q35_PROMPT_CHUNK", Q35_CHUNK, 1, 4096);
    int fail = 0;
    s->slot = calloc((size_t)c->n_layers, sizeof *s->slot);
    if (!s->slot) fail = 1;
    for (int i = 0, nl = 0, nf = 0; s->slot && i < c->n_layers; i++) s->slot[i] = c->layer_full[i] ? nf++ : nl++;
    s->conv = alloc_f((size_t)c->n_linear * (c->conv_kernel - 1) * C, &fail);
    s->conv_taps = alloc_f((size_t)c->n_linear * c->conv_kernel * C, &fail);
    s->rec = alloc_big(sizeof(float) * c->n_linear * c->lin_v_heads * c->lin_k_dim * c->lin_v_dim, &fail);
    s->k_cache = alloc_big(q35_kv_elt(s->kv_f16) * c->n_full * n_ctx * kvw, &fail);
    s->v_cache = alloc_big(q35_kv_elt(s->kv_f16) * c->n_full * n_ctx * kvw, &fail);
    s->inv_freq = alloc_f((size_t)c->rope_dim / 2, &fail);
    s->mark_conv = alloc_f(q35_conv_floats(c), &fail);
    s->mark_rec = alloc_f(q35_rec_floats(c), &fail);
    s->tokens = calloc((size_t)n_ctx + 1, sizeof *s->tokens);
    s->keys = calloc((size_t)n_ctx + 1, sizeof *s->keys);
    if (!s->tokens || !s->keys) fail = 1;
    q35_scratch *sc = &s->sc;
    sc->cap = (int)B;
    sc->x = alloc_f(B * H, &fail);
    sc->xn = alloc_f(B * H, &fail);
    sc->proj = alloc_f(B * (C > nq ? C : nq), &fail);
    sc->proj2 = alloc_f(B * (vd > 2 * kvw ? vd : 2 * kvw), &fail);
    sc->ba = alloc_f(B * 2 * (size_t)c->lin_v_heads, &fail);
    const size_t q = vd > (size_t)c->n_heads * hd ? vd : (size_t)c->n_heads * hd;
    sc->core = alloc_f(B * q, &fail);
    sc->ff = alloc_f(B * 2 * (size_t)c->intermediate, &fail);
    sc->out = alloc_f(B * H, &fail);
    sc->rope_cos = alloc_f(B * (size_t)c->rope_dim / 2, &fail);
    sc->rope_sin = alloc_f(B * (size_t)c->rope_dim / 2, &fail);
    sc->pos3 = calloc(B * 3, sizeof(int));
    if (!sc->pos3) fail = 1;
    sc->gdn_gb = alloc_f((size_t)c->lin_v_heads * 2 * B, &fail);
    sc->gdn_chunk = env_int("Q35_GDN_CHUNK", Q35_GDN_CHUNK, 0, 4096);
    sc->n_slots = q35_get_threads();
    if (sc->n_slots < 1) sc->n_slots = 1;
    const size_t wg = q35_gdn_work_floats(c, sc->gdn_chunk), wa = q35_attn_work_floats(c, (int)B);
    sc->work_floats = ((wg > wa ? wg : wa) + 15) & ~(size_t)15; /* 64-byte multiples: slots on their own lines */
    sc->work = alloc_f((size_t)sc->n_slots * sc->work_floats, &fail);
    sc->attn_part = alloc_f(Q35_ATTN_SEG_MAX * q35_attn_part_floats(c->n_heads, hd), &fail);
    if (fail) {
        q35_session_free(s);
        return q35_fail(Q35_ERR_NOMEM, "out of memory for a session of %d tokens (%.1f MB of state)", n_ctx,
                        q35_state_bytes(c, n_ctx, s->kv_f16) / 1e6);
    }
    for (int i = 0; i < c->n_layers; i++)
        if (!c->layer_full[i]) q35_gdn_conv_taps(c, &m->layers[i].gdn, s->conv_taps + (size_t)s->slot[i] * c->conv_kernel * C);
    for (int i = 0; i < c->rope_dim / 2; i++)
        s->inv_freq[i] = 1.0f / powf((float)c->rope_theta, (float)(2 * i) / (float)c->rope_dim);
    *out = s;
    return Q35_OK;
}

void q35_session_free(q35_session *s) {
    if (!s) return;
    q35_scratch *sc = &s->sc;
    free(sc->x); free(sc->xn); free(sc->proj); free(sc->proj2); free(sc->ba); free(sc->core); free(sc->ff);
    free(sc->out); free(sc->rope_cos); free(sc->rope_sin); free(sc->pos3); free(sc->gdn_gb); free(sc->work); free(sc->attn_part);
    q35_greedy_free_scratch(s);
    free(s->slot); free(s->conv); free(s->conv_taps); q35_huge_free(s->rec); q35_huge_free(s->k_cache); q35_huge_free(s->v_cache); free(s->inv_freq);
    free(s->mark_conv); free(s->mark_rec); free(s->tokens); free(s->keys);
    free(s);
}

void q35_session_reset(q35_session *s) {
    const q35_config *c = &s->m->cfg;
    const size_t C = q35_cfg_conv_channels(c);
    memset(s->conv, 0, sizeof(float) * (size_t)c->n_linear * (c->conv_kernel - 1) * C);
    memset(s->rec, 0, sizeof(float) * (size_t)c->n_linear * c->lin_v_heads * c->lin_k_dim * c->lin_v_dim);
    s->pos = 0; /* the KV cache beyond pos is never read */
    s->rope_delta = 0;
    q35_snapshot_mark(s); /* the empty state is exact */
}

int q35_session_pos(const q35_session *s) { return s->pos; }
int q35_session_ctx(const q35_session *s) { return s->n_ctx; }
q35_kv_type q35_session_kv_type(const q35_session *s) { return s->kv_f16 ? Q35_KV_F16 : Q35_KV_F32; }
const q35_model *q35_session_model(const q35_session *s) { return s->m; }
