/* Gated DeltaNet (linear attention) layer, spec §3.2: projections, causal depthwise conv + SiLU,
 * L2-normed q/k, beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), the delta rule per value
 * head on an fp32 state, gated RMSNorm, out_proj. The projections are batched over the chunk; the
 * conv runs over channel blocks (vectorised across channels, all tokens of the chunk); the delta
 * rule runs per value head in parallel on the pool: the chunkwise form for prompts (sc->gdn_chunk
 * tokens per chunk), the token recurrence for generation (n = 1) or when gdn_chunk is 0. */
#include <math.h>
#include <string.h>

#include "core/pool.h"
#include "kernels/gdn_chunk.h"
#include "kernels/kernels.h"
#include "layers/layers.h"

typedef struct gdn_job {
    const q35_config *c;
    const q35_gdn_weights *w;
    const q35_gdn_kernels *kn;
    q35_scratch *sc;
    const float *taps_t; /* [K][C] */
    float *conv_state; /* [K-1][C] */
    float *rec_state;  /* [Hv][dk][dv] */
    int n;             /* tokens */
    int n_items;       /* work items of the current stage */
} gdn_job;

/* Stage 1, item = one head's channels (q heads, then k heads, then v heads): conv + SiLU over the
 * chunk, then l2norm (and the dk^-0.5 scale of q) per token. */
static void conv_task(void *ctx, int task, int n_tasks) {
    const gdn_job *j = ctx;
    const q35_config *c = j->c;
    const int Hk = c->lin_k_heads, dk = c->lin_k_dim, dv = c->lin_v_dim, kd = Hk * dk, C = q35_cfg_conv_channels(c);
    const int i0 = (int)((long long)j->n_items * task / n_tasks), i1 = (int)((long long)j->n_items * (task + 1) / n_tasks);
    if (i0 >= i1) return;
    /* item i covers channels [ch(i), ch(i+1)) */
#define ITEM_CH(i) ((i) <= 2 * Hk ? (i) * dk : 2 * kd + ((i) - 2 * Hk) * dv)
    float *qkv = j->sc->proj;
    j->kn->conv_silu(qkv, C, j->conv_state, j->taps_t, c->conv_kernel, ITEM_CH(i0), ITEM_CH(i1), j->n);
#undef ITEM_CH
    const float q_scale = 1.0f / sqrtf((float)dk);
    for (int i = i0; i < i1 && i < 2 * Hk; i++) {
        for (int t = 0; t < j->n; t++) {
            float *x = qkv + (size_t)t * C + (size_t)i * dk; /* q head i, or k head i - Hk */
            const float ss = j->kn->dot(x, x, dk);
            j->kn->scale(x, (1.0f / sqrtf(ss + 1e-6f)) * (i < Hk ? q_scale : 1.0f), dk);
        }
    }
}

/* Stage 2, item = one value head: beta and g of each token, the delta rule over the chunk, the
 * gated RMSNorm of each output row. Task i uses work slot i. */
static void head_task(void *ctx, int task, int n_tasks) {
    const gdn_job *j = ctx;
    const q35_config *c = j->c;
    const q35_gdn_weights *w = j->w;
    q35_scratch *sc = j->sc;
    const int Hk = c->lin_k_heads, Hv = c->lin_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim;
    const int kd = Hk * dk, vd = Hv * dv, C = q35_cfg_conv_channels(c), group = Hv / Hk, n = j->n;
    const int h0 = (int)((long long)Hv * task / n_tasks), h1 = (int)((long long)Hv * (task + 1) / n_tasks);
    float *work = sc->work + (size_t)task * sc->work_floats;
    const float *b = sc->ba, *a = sc->ba + (size_t)n * Hv; /* [n][Hv] each */
    for (int h = h0; h < h1; h++) {
        const int kh = w->v_tiled ? h % Hk : h / group; /* GGUF files keep llama.cpp's tiled V-head order */
        float *g = sc->gdn_gb + (size_t)h * 2 * sc->cap, *beta = g + sc->cap; /* [n] each */
        for (int t = 0; t < n; t++) {
            beta[t] = q35_sigmoid(b[(size_t)t * Hv + h]);
            g[t] = w->neg_exp_A[h] * q35_softplus(a[(size_t)t * Hv + h] + w->dt_bias[h]);
        }
        q35_gdn_head hd = {
            .q = sc->proj + (size_t)kh * dk,
            .k = sc->proj + kd + (size_t)kh * dk,
            .v = sc->proj + 2 * kd + (size_t)h * dv,
            .ld = C,
            .g = g,
            .beta = beta,
            .o = sc->core + (size_t)h * dv,
            .ldo = vd,
            .S = j->rec_state + (size_t)h * dk * dv,
            .n = n,
            .dk = dk,
            .dv = dv,
            .S_next = h + 1 < h1 ? j->rec_state + (size_t)(h + 1) * dk * dv : NULL, /* this task's next head */
        };
        if (n == 1 || sc->gdn_chunk <= 0) j->kn->recur(&hd);
        else j->kn->chunk(&hd, sc->gdn_chunk, work);
        for (int t = 0; t < n; t++)
            j->kn->gated_rmsnorm(sc->core + (size_t)t * vd + (size_t)h * dv, sc->proj2 + (size_t)t * vd + (size_t)h * dv, w->norm, dv,
                                 c->rms_eps);
    }
}

size_t q35_gdn_work_floats(const q35_config *c, int gdn_chunk) {
    return gdn_chunk > 0 ? q35_gdn_chunk_work(gdn_chunk, c->lin_k_dim, c->lin_v_dim) : 0;
}

void q35_gdn_conv_taps(const q35_config *c, const q35_gdn_weights *w, float *taps_t) {
    const int C = q35_cfg_conv_channels(c), K = c->conv_kernel;
    for (int ch = 0; ch < C; ch++)
        for (int j = 0; j < K; j++) taps_t[(size_t)j * C + ch] = w->conv[(size_t)ch * K + j];
}

void q35_gdn_forward(const q35_config *c, const q35_gdn_weights *w, const float *conv_taps_t, float *conv_state, float *rec_state,
                     q35_scratch *sc, int n) {
    const int Hk = c->lin_k_heads, Hv = c->lin_v_heads;
    q35_pool *pool = q35_global_pool();
    const int T = q35_pool_threads(pool);
    gdn_job j = {c, w, q35_gdn_kernels_best(), sc, conv_taps_t, conv_state, rec_state, n, 0};

    const q35_tensor *qz[2] = {&w->in_qkv, &w->in_z}; /* one dispatch for both */
    float *qz_out[2] = {sc->proj, sc->proj2};         /* [n][C] q | k | v (conv+SiLU in place below), [n][vd] z */
    q35_matmul_many(qz, qz_out, 2, sc->xn, n);
    q35_matmul(&w->in_b, sc->xn, n, sc->ba);     /* [n][Hv] */
    q35_matmul(&w->in_a, sc->xn, n, sc->ba + (size_t)n * Hv);

    j.n_items = 2 * Hk + Hv;
    q35_pool_run(pool, T < j.n_items ? T : j.n_items, conv_task, &j);
    j.n_items = Hv;
    int tasks = T < Hv ? T : Hv;
    if (tasks > sc->n_slots) tasks = sc->n_slots;
    q35_pool_run(pool, tasks, head_task, &j);

    q35_matmul(&w->out, sc->core, n, sc->out);
}
