/* Gated full-attention layer, spec §3.3: q/gate split per head, (1+w) RMSNorm on q and k, partial
 * interleaved M-RoPE, GQA causal softmax attention over the KV cache, sigmoid output gate, o_proj. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "layers/layers.h"

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

void q35_attn_forward(const q35_config *c, const q35_attn_weights *w, float *k_cache, float *v_cache, q35_scratch *sc, int n, int pos,
                      const int *pos3, const float *inv_freq) {
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, group = nh / nkv, rot = c->rope_dim;
    const int qstride = nh * hd * (c->attn_output_gate ? 2 : 1), kvw = nkv * hd;
    float *qg = sc->proj;                       /* [n][qstride] per head: query (hd) then gate (hd) */
    float *kk = sc->proj2;                      /* [n][kvw] */
    float *vv = sc->proj2 + (size_t)n * kvw;    /* [n][kvw] */
    float *core = sc->core;                     /* [n][nh*hd] */
    const float scale = 1.0f / sqrtf((float)hd);

    q35_matmul(&w->q, sc->xn, n, qg);
    q35_matmul(&w->k, sc->xn, n, kk);
    q35_matmul(&w->v, sc->xn, n, vv);

    for (int t = 0; t < n; t++) {
        float *cs = sc->rope_cos + (size_t)t * (rot / 2), *sn = sc->rope_sin + (size_t)t * (rot / 2);
        rope_angles(c, pos3 + 3 * t, inv_freq, cs, sn);
        float *kc = k_cache + (size_t)(pos + t) * kvw, *vc = v_cache + (size_t)(pos + t) * kvw;
        for (int g = 0; g < nkv; g++) {
            q35_rmsnorm(kk + (size_t)t * kvw + g * hd, w->k_norm, hd, c->rms_eps, kc + g * hd);
            q35_rope_neox(kc + g * hd, rot, cs, sn);
        }
        memcpy(vc, vv + (size_t)t * kvw, sizeof(float) * kvw);
    }
    for (int t = 0; t < n; t++) {
        const float *cs = sc->rope_cos + (size_t)t * (rot / 2), *sn = sc->rope_sin + (size_t)t * (rot / 2);
        for (int h = 0; h < nh; h++) {
            float *qh = qg + (size_t)t * qstride + (size_t)h * hd * (c->attn_output_gate ? 2 : 1);
            float *o = core + (size_t)t * nh * hd + (size_t)h * hd;
            q35_rmsnorm(qh, w->q_norm, hd, c->rms_eps, qh);
            q35_rope_neox(qh, rot, cs, sn);
            const int g = h / group;
            q35_attend(qh, k_cache + g * hd, v_cache + g * hd, pos + t + 1, hd, kvw, scale, sc->scores, o);
            if (c->attn_output_gate)
                for (int j = 0; j < hd; j++) o[j] *= q35_sigmoid(qh[hd + j]);
        }
    }
    q35_matmul(&w->o, core, n, sc->out);
}
