/* SwiGLU MLP: down(silu(gate(x)) * up(x)). */
#include "kernels/kernels.h"
#include "layers/layers.h"

void q35_mlp_forward(const q35_config *c, const q35_layer_weights *w, q35_scratch *sc, int n) {
    const int F = c->intermediate;
    float *gate = sc->ff;                 /* [n][F] */
    float *up = sc->ff + (size_t)n * F;   /* [n][F] */
    q35_matmul(&w->mlp_gate, sc->xn, n, gate);
    q35_matmul(&w->mlp_up, sc->xn, n, up);
    for (size_t i = 0; i < (size_t)n * F; i++) gate[i] = q35_silu(gate[i]) * up[i];
    q35_matmul(&w->mlp_down, gate, n, sc->out);
}
