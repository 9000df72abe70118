/* Gated full-attention layer, spec §3.3: q/gate split per head, (1+w) RMSNorm on q and k, partial
 * interleaved M-RoPE, GQA causal softmax attention over the KV cache, sigmoid output gate, o_proj.
 * Attention runs on the pool. A prompt chunk: one work item per (query heads, block of queries),
 * the block's queries attend together (tiled products, online softmax). One token (generation):
 * the cache's keys are cut into segments (a function of the position only), one partial softmax
 * per segment on the pool, merged in order. */
#include <math.h>
#include <string.h>

#include "core/pool.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "layers/layers.h"

#define Q35_ATTN_QB 64 /* queries per work item */

/* cos/sin [rot/2] of one token from its (T, H, W) positions. */
static void rope_angles(const q35_config *c, const int *p3, const float *inv_freq, float *cos_, float *sin_) {
    const int half = c->rope_dim / 2, *sec = c->mrope_section;
    for (int i = 0; i < half; i++) {
        int comp;
        if (c->mrope_interleaved)
            comp = (i % 3 == 1 && i < 3 * sec[1]) ? 1 : (i % 3 == 2 && i < 3 * sec[2]) ? 2 : 0;
        else
            comp = i < sec[0] ? 0 : i < sec[0] + sec[1] ? 1 : 2;
        const float theta = (float)p3[comp] * inv_freq[i];
        cos_[i] = cosf(theta);
        sin_[i] = sinf(theta);
    }
}

size_t q35_attn_work_floats(const q35_config *c, int cap) {
    const int nq = cap < Q35_ATTN_QB ? cap : Q35_ATTN_QB;
    const int G = c->n_heads / c->n_kv_heads;
    const size_t blk = q35_attn_block_work(G, nq, c->head_dim), one = q35_attn_part_work(c->n_kv_heads, G);
    return blk > one ? blk : one;
}

typedef struct attn_job {
    const q35_config *c;
    const q35_attn_weights *w;
    const q35_gdn_kernels *kn;
    q35_scratch *sc;
    const void *k_cache, *v_cache;  /* [n_ctx][n_kv*hd] fp32, or fp16 (f16) */
    int f16;
    int n, pos, n_qb;               /* tokens, first position, query blocks per head */
    int G;                          /* query heads per item: the GQA group, or 1 */
    int n_items;                    /* prompt: (n_heads / G) * n_qb items; generation: key segments */
} attn_job;

/* The (1+w) RMSNorm and RoPE of query row t of heads [h0, h1), in place. */
static void q_norm_rope(const attn_job *j, int h0, int h1, int t) {
    const q35_config *c = j->c;
    const int hd = c->head_dim, rot = c->rope_dim, qh = hd * (c->attn_output_gate ? 2 : 1);
    for (int h = h0; h < h1; h++) {
        float *qr = j->sc->proj + (size_t)t * c->n_heads * qh + (size_t)h * qh;
        j->kn->rmsnorm(qr, j->w->q_norm, hd, c->rms_eps, qr);
        q35_rope_neox(qr, rot, j->sc->rope_cos + (size_t)t * (rot / 2), j->sc->rope_sin + (size_t)t * (rot / 2));
    }
}

/* o *= sigmoid(gate) for query row t of heads [h0, h1). */
static void out_gate(const attn_job *j, int h0, int h1, int t) {
    const q35_config *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, qh = hd * 2;
    if (!c->attn_output_gate) return;
    for (int h = h0; h < h1; h++)
        j->kn->sigmoid_mul(j->sc->core + (size_t)t * nh * hd + (size_t)h * hd, j->sc->proj + (size_t)t * nh * qh + (size_t)h * qh + hd, hd);
}

/* Generation, task = a run of the key segments: each segment's partial into sc->attn_part. */
static void segment_task(void *ctx, int task, int n_tasks) {
    const attn_job *j = ctx;
    const q35_config *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qh = hd * (c->attn_output_gate ? 2 : 1);
    const int n_kv = j->pos + 1, nseg = j->n_items;
    float *work = j->sc->work + (size_t)task * j->sc->work_floats;
    const size_t pf = q35_attn_part_floats(nh, hd);
    for (int s = nseg * task / n_tasks; s < nseg * (task + 1) / n_tasks; s++)
        q35_attend_part(j->kn, j->sc->proj, qh, nkv, nh / nkv, j->k_cache, j->v_cache, j->f16, nkv * hd, hd, q35_attn_seg_start(n_kv, nseg, s),
                        q35_attn_seg_start(n_kv, nseg, s + 1), 1.0f / sqrtf((float)hd), j->sc->attn_part + (size_t)s * pf, work);
}

/* Prompt chunk, item = G query heads (of one KV head) x one block of up to Q35_ATTN_QB queries. */
static void attn_task(void *ctx, int task, int n_tasks) {
    const attn_job *j = ctx;
    const q35_config *c = j->c;
    q35_scratch *sc = j->sc;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, group = nh / nkv;
    const int gate = c->attn_output_gate, qh = hd * (gate ? 2 : 1), qstride = nh * qh, kvw = nkv * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *work = sc->work + (size_t)task * sc->work_floats;
    const int i0 = (int)((long long)j->n_items * task / n_tasks), i1 = (int)((long long)j->n_items * (task + 1) / n_tasks);
    for (int it = i0; it < i1; it++) {
        const int h0 = (it / j->n_qb) * j->G, qb = it % j->n_qb, t0 = qb * Q35_ATTN_QB;
        const int nq = j->n - t0 < Q35_ATTN_QB ? j->n - t0 : Q35_ATTN_QB;
        const int kvh = h0 / group;
        for (int t = t0; t < t0 + nq; t++) q_norm_rope(j, h0, h0 + j->G, t);
        const float *q0 = sc->proj + (size_t)t0 * qstride + (size_t)h0 * qh;
        float *o0 = sc->core + (size_t)t0 * nh * hd + (size_t)h0 * hd;
        const size_t off = (size_t)kvh * hd * (j->f16 ? 2 : 4);
        const void *K = (const char *)j->k_cache + off, *V = (const char *)j->v_cache + off;
        q35_attend_block(j->kn, q0, qstride, qh, j->G, nq, j->pos + t0, K, V, j->f16, kvw, hd, scale, o0, nh * hd, hd, work);
        for (int t = t0; t < t0 + nq; t++) out_gate(j, h0, h0 + j->G, t);
    }
}

void q35_attn_forward(const q35_config *c, const q35_attn_weights *w, void *k_cache, void *v_cache, int kv_f16, q35_scratch *sc, int n,
                      int pos, const int *pos3, const float *inv_freq) {
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, rot = c->rope_dim;
    const int kvw = nkv * hd;
    float *kk = sc->proj2;                      /* [n][kvw] */
    float *vv = sc->proj2 + (size_t)n * kvw;    /* [n][kvw] */
    const q35_gdn_kernels *kn = q35_gdn_kernels_best();

    const q35_tensor *qkv[3] = {&w->q, &w->k, &w->v}; /* one dispatch for the three */
    float *qkv_out[3] = {sc->proj, kk, vv};           /* [n][qstride] per head: query (hd) then gate (hd); k; v */
    q35_matmul_many(qkv, qkv_out, 3, sc->xn, n);

    for (int t = 0; t < n; t++) {
        float *cs = sc->rope_cos + (size_t)t * (rot / 2), *sn = sc->rope_sin + (size_t)t * (rot / 2);
        rope_angles(c, pos3 + 3 * t, inv_freq, cs, sn);
        float *kt = kk + (size_t)t * kvw, *vt = vv + (size_t)t * kvw; /* [kvw] this token's key, value */
        for (int g = 0; g < nkv; g++) {
            kn->rmsnorm(kt + g * hd, w->k_norm, hd, c->rms_eps, kt + g * hd);
            q35_rope_neox(kt + g * hd, rot, cs, sn);
        }
        const size_t row = (size_t)(pos + t) * kvw;
        if (kv_f16) {
            kn->to_f16(kt, (uint16_t *)k_cache + row, kvw);
            kn->to_f16(vt, (uint16_t *)v_cache + row, kvw);
        } else {
            memcpy((float *)k_cache + row, kt, sizeof(float) * kvw);
            memcpy((float *)v_cache + row, vt, sizeof(float) * kvw);
        }
    }
    q35_pool *pool = q35_global_pool();
    attn_job j = {c, w, kn, sc, k_cache, v_cache, kv_f16, n, pos, (n + Q35_ATTN_QB - 1) / Q35_ATTN_QB, 1, 0};
    const int T = q35_pool_threads(pool);
    if (n == 1) {
        q_norm_rope(&j, 0, nh, 0);
        j.n_items = q35_attn_segments(pos + 1);
        int tasks = T < j.n_items ? T : j.n_items;
        if (tasks > sc->n_slots) tasks = sc->n_slots;
        q35_pool_run(pool, tasks, segment_task, &j);
        q35_attend_merge(kn, sc->attn_part, j.n_items, nh, hd, sc->core, hd);
        out_gate(&j, 0, nh, 0);
        q35_matmul(&w->o, sc->core, n, sc->out);
        return;
    }
    /* whole GQA groups per item (each key tile read once for the group) when that still gives
     * every thread an item; else one head per item */
    const int group = nh / nkv;
    if (nkv * j.n_qb >= T) j.G = group;
    j.n_items = nh / j.G * j.n_qb;
    int tasks = T;
    if (tasks > j.n_items) tasks = j.n_items;
    if (tasks > sc->n_slots) tasks = sc->n_slots;
    if ((long long)(pos + n) * n * nh * hd < 32768) tasks = 1; /* too little work to wake the pool */
    q35_pool_run(pool, tasks, attn_task, &j);
    q35_matmul(&w->o, sc->core, n, sc->out);
}
