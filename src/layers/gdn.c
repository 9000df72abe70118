/* Gated DeltaNet (linear attention) layer, spec §3.2: projections, causal depthwise conv + SiLU,
 * L2-normed q/k, beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), the delta rule per value
 * head on an fp32 state, gated RMSNorm, out_proj. Tokens of the chunk run through the recurrence in
 * order; the projections are batched over the chunk. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "layers/layers.h"

void q35_gdn_forward(const q35_config *c, const q35_gdn_weights *w, float *conv_state, float *rec_state, q35_scratch *sc, int n) {
    const int Hk = c->lin_k_heads, Hv = c->lin_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim, K = c->conv_kernel;
    const int kd = Hk * dk, vd = Hv * dv, C = 2 * kd + vd, group = Hv / Hk;
    float *qkv = sc->proj;           /* [n][C]  q | k | v, then conv+SiLU in place */
    float *z = sc->proj2;            /* [n][vd] */
    float *b = sc->ba;               /* [n][Hv] */
    float *a = sc->ba + (size_t)n * Hv; /* [n][Hv] */
    float *core = sc->core;          /* [n][vd] */

    q35_matmul(&w->in_qkv, sc->xn, n, qkv);
    q35_matmul(&w->in_z, sc->xn, n, z);
    q35_matmul(&w->in_b, sc->xn, n, b);
    q35_matmul(&w->in_a, sc->xn, n, a);

    const float q_scale = 1.0f / sqrtf((float)dk);
    for (int t = 0; t < n; t++) {
        float *row = qkv + (size_t)t * C;
        /* Causal conv over the K-1 previous pre-conv rows (conv_state, oldest first) and this one. */
        for (int ch = 0; ch < C; ch++) {
            const float *tap = w->conv + (size_t)ch * K;
            const float raw = row[ch];
            float y = tap[K - 1] * raw;
            for (int j = 0; j < K - 1; j++) y += tap[j] * conv_state[(size_t)j * C + ch];
            for (int j = 0; j + 1 < K - 1; j++) conv_state[(size_t)j * C + ch] = conv_state[(size_t)(j + 1) * C + ch];
            if (K > 1) conv_state[(size_t)(K - 2) * C + ch] = raw;
            row[ch] = q35_silu(y);
        }
        float *q = row, *k = row + kd, *v = row + 2 * kd;
        for (int h = 0; h < Hk; h++) {
            q35_l2norm(q + h * dk, dk, 1e-6f);
            q35_l2norm(k + h * dk, dk, 1e-6f);
            for (int i = 0; i < dk; i++) q[h * dk + i] *= q_scale;
        }
        for (int h = 0; h < Hv; h++) {
            const int kh = h / group;
            const float beta = q35_sigmoid(b[(size_t)t * Hv + h]);
            const float g = w->neg_exp_A[h] * q35_softplus(a[(size_t)t * Hv + h] + w->dt_bias[h]);
            float *o = core + (size_t)t * vd + (size_t)h * dv;
            q35_gdn_step(rec_state + (size_t)h * dk * dv, q + kh * dk, k + kh * dk, v + h * dv, g, beta, dk, dv, o);
            q35_gated_rmsnorm(o, z + (size_t)t * vd + (size_t)h * dv, w->norm, dv, c->rms_eps);
        }
    }
    q35_matmul(&w->out, core, n, sc->out);
}
