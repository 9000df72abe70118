/* SwiGLU MLP: down(silu(gate(x)) * up(x)); the activation is vectorised and split over the pool
 * for prompt chunks. */
#include "core/pool.h"
#include "kernels/gdn_chunk.h"
#include "kernels/kernels.h"
#include "layers/layers.h"

typedef struct mlp_job {
    const q35_gdn_kernels *kn;
    float *gate;      /* [len] */
    const float *up;  /* [len] */
    size_t len;
} mlp_job;

static void swiglu_task(void *ctx, int i, int n) {
    const mlp_job *j = ctx;
    size_t a = j->len * (size_t)i / (size_t)n, b = j->len * (size_t)(i + 1) / (size_t)n;
    a &= ~(size_t)63, b = i + 1 == n ? j->len : b & ~(size_t)63; /* splits at multiples of 64 floats */
    if (b > a) j->kn->swiglu(j->gate + a, j->up + a, b - a);
}

void q35_mlp_forward(const q35_config *c, const q35_layer_weights *w, q35_scratch *sc, int n) {
    const int F = c->intermediate;
    float *gate = sc->ff;                 /* [n][F] */
    float *up = sc->ff + (size_t)n * F;   /* [n][F] */
    const q35_tensor *gu[2] = {&w->mlp_gate, &w->mlp_up}; /* one dispatch for both */
    float *gu_out[2] = {gate, up};
    q35_matmul_many(gu, gu_out, 2, sc->xn, n);
    mlp_job j = {q35_gdn_kernels_best(), gate, up, (size_t)n * F};
    q35_pool *pool = q35_global_pool();
    const int T = q35_pool_threads(pool);
    q35_pool_run(pool, j.len >= 65536 ? T : 1, swiglu_task, &j);
    q35_matmul(&w->mlp_down, gate, n, sc->out);
}
