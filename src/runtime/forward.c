/* The forward pass: embeddings, a flat loop over layers (one forward function per layer kind),
 * final norm, LM head — for a batch of tokens, processed in chunks of the scratch capacity. Each
 * residual add is fused with the RMSNorm that follows it, over the chunk's tokens on the pool. */
#include <string.h>

#include "core/err.h"
#include "core/pool.h"
#include "kernels/gdn_chunk.h"
#include "kernels/kernels.h"
#include "layers/layers.h"
#include "runtime/state.h"

typedef struct norm_job {
    const q35_gdn_kernels *kn;
    float *x;           /* [n][H] residual stream */
    const float *add;   /* [n][H] added to x first, or NULL */
    const float *scale; /* [H] RMSNorm scale (x -> xn), or NULL */
    float *xn;          /* [n][H] */
    int n, H;
    float eps;
} norm_job;

static void norm_task(void *ctx, int i, int n_tasks) {
    const norm_job *j = ctx;
    const int t0 = (int)((long long)j->n * i / n_tasks), t1 = (int)((long long)j->n * (i + 1) / n_tasks);
    for (int t = t0; t < t1; t++) {
        float *x = j->x + (size_t)t * j->H;
        if (j->add) j->kn->axpy(x, 1.0f, j->add + (size_t)t * j->H, j->H);
        if (j->scale) j->kn->rmsnorm(x, j->scale, j->H, j->eps, j->xn + (size_t)t * j->H);
    }
}

/* x += add (when not NULL); xn = RMSNorm(x) * scale (when not NULL); over the tokens, on the pool. */
static void add_norm(q35_scratch *sc, const q35_config *c, const float *add, const float *scale, int n) {
    norm_job j = {q35_gdn_kernels_best(), sc->x, add, scale, sc->xn, n, c->hidden, c->rms_eps};
    q35_pool *pool = q35_global_pool();
    const int T = q35_pool_threads(pool);
    q35_pool_run(pool, n >= 8 ? (T < n ? T : n) : 1, norm_task, &j);
}

/* emb [n] (or NULL): row t replaces token t's embedding when not NULL (image tokens); pos3 [n][3]
 * (or NULL): the tokens' (T, H, W) M-RoPE positions; NULL: text, all three = index + rope delta. */
static void forward_chunk(q35_session *s, const int32_t *tokens, int n, int start, int total, const float *const *emb, const int *pos3) {
    const q35_model *m = s->m;
    const q35_config *c = &m->cfg;
    q35_scratch *sc = &s->sc;
    const int H = c->hidden;
    const size_t C = q35_cfg_conv_channels(c);
    const size_t rec_sz = (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim;

    for (int t = 0; t < n; t++) {
        if (emb && emb[t]) memcpy(sc->x + (size_t)t * H, emb[t], sizeof(float) * (size_t)H);
        else q35_tensor_row_f32(&m->embed, tokens[t], sc->x + (size_t)t * H);
        for (int j = 0; j < 3; j++) /* text: T = H = W = index + rope delta (0 until an image moved it) */
            sc->pos3[3 * t + j] = pos3 ? pos3[3 * t + j] : s->pos + t + s->rope_delta;
    }
#define DEBUG_CAPTURE(l)                                                                                  \
    if (s->debug_hidden)                                                                                \
        memcpy(s->debug_hidden + ((size_t)(l) * total + start) * H, sc->x, sizeof(float) * (size_t)n * H);
    DEBUG_CAPTURE(0);
    add_norm(sc, c, NULL, m->layers[0].in_norm, n);
    for (int il = 0; il < c->n_layers; il++) {
        const q35_layer_weights *L = &m->layers[il];
        const int slot = s->slot[il];
        if (L->is_full)
            q35_attn_forward(c, &L->attn, q35_kv_layer(s, s->k_cache, slot), q35_kv_layer(s, s->v_cache, slot), s->kv_f16, sc, n, s->pos,
                             sc->pos3, s->inv_freq);
        else
            q35_gdn_forward(c, &L->gdn, s->conv_taps + (size_t)slot * c->conv_kernel * C, s->conv + (size_t)slot * (c->conv_kernel - 1) * C,
                            s->rec + (size_t)slot * rec_sz, sc, n);
        add_norm(sc, c, sc->out, L->post_norm, n);
        q35_mlp_forward(c, L, sc, n);
        /* the residual add, fused with the next layer's input norm */
        add_norm(sc, c, sc->out, il + 1 < c->n_layers ? m->layers[il + 1].in_norm : NULL, n);
        DEBUG_CAPTURE(il + 1);
    }
#undef DEBUG_CAPTURE
    s->pos += n;
}

q35_status q35_session_eval(q35_session *s, const int32_t *tokens, int n, float *logits, float *all_logits) {
    return q35_session_eval_ex(s, tokens, n, NULL, NULL, NULL, logits, all_logits);
}

q35_status q35_session_eval_ex(q35_session *s, const int32_t *tokens, int n, const float *const *emb, const int *pos3, const int *next_pos,
                               float *logits, float *all_logits) {
    const q35_model *m = s->m;
    const q35_config *c = &m->cfg;
    if (n < 0 || (n > 0 && !tokens)) return q35_fail(Q35_ERR_ARG, "eval: bad token batch");
    if (n == 0) return Q35_OK;
    if (n > s->n_ctx - s->pos)
        return q35_fail(Q35_ERR_CONTEXT, "the context holds %d tokens: %d already used, %d more do not fit", s->n_ctx, s->pos, n);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return q35_fail(Q35_ERR_ARG, "token id %d at index %d is outside the vocabulary [0, %d)", tokens[i], i, c->vocab);
    const int H = c->hidden;
    q35_scratch *sc = &s->sc;
    for (int i = 0; i < n; i++) {
        s->tokens[s->pos + i] = tokens[i];
        s->keys[s->pos + i] = (uint64_t)(uint32_t)tokens[i];
    }
    /* Started on the exact grid, the chunks are those of a fresh evaluation: the last full one
     * moves the mark (state.h). */
    const int exact = q35_snapshot_exact_start(s);
    for (int start = 0; start < n; start += sc->cap) {
        const int nb = n - start < sc->cap ? n - start : sc->cap;
        forward_chunk(s, tokens + start, nb, start, n, emb ? emb + start : NULL, pos3 ? pos3 + 3 * (size_t)start : NULL);
        /* with images, the rope delta after this chunk (before the mark takes it) */
        if (next_pos) s->rope_delta = next_pos[start + nb - 1] - s->pos;
        if (exact && nb == sc->cap && n - start - nb < sc->cap) q35_snapshot_mark(s);
        if (all_logits) {
            add_norm(sc, c, NULL, m->final_norm, nb);
            q35_matmul(&m->lm_head, sc->xn, nb, all_logits + (size_t)start * c->vocab);
        }
        if (logits && start + nb == n) {
            q35_gdn_kernels_best()->rmsnorm(sc->x + (size_t)(nb - 1) * H, m->final_norm, H, c->rms_eps, sc->xn);
            q35_matmul(&m->lm_head, sc->xn, 1, logits);
        }
    }
    return Q35_OK;
}
