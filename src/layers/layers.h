/* One forward function per layer kind. Each reads the normed input sc->xn [n][H] of n consecutive
 * tokens starting at position pos and writes its output to sc->out [n][H]. The work inside a layer
 * runs on the process-wide pool (core/pool.h); task i of a dispatch uses work slot i of sc->work. */
#ifndef Q35_LAYERS_H
#define Q35_LAYERS_H
#include "runtime/state.h"

/* Gated DeltaNet: conv_state [K-1][C], rec_state [Hv][dk][dv] are updated in place; conv_taps_t
 * [K][C] is w->conv transposed (q35_gdn_conv_taps). Prompt chunks use the chunkwise form with
 * sc->gdn_chunk tokens per chunk (0: the token recurrence). */
void q35_gdn_forward(const q35_config *c, const q35_gdn_weights *w, const float *conv_taps_t, float *conv_state, float *rec_state,
                     q35_scratch *sc, int n);
/* taps_t [K][C] = w->conv [C][K] transposed (the layout the vectorised conv reads). */
void q35_gdn_conv_taps(const q35_config *c, const q35_gdn_weights *w, float *taps_t);
/* Gated attention: writes K/V of the n tokens into k_cache/v_cache [n_ctx][n_kv*hd] at pos.. (fp32,
 * or IEEE halves rounded to nearest even when kv_f16) and attends causally. pos3 [n][3] are the
 * (T, H, W) M-RoPE positions of each token. */
void q35_attn_forward(const q35_config *c, const q35_attn_weights *w, void *k_cache, void *v_cache, int kv_f16, q35_scratch *sc, int n,
                      int pos, const int *pos3, const float *inv_freq);
/* SwiGLU MLP: out = down(silu(gate(xn)) * up(xn)). */
void q35_mlp_forward(const q35_config *c, const q35_layer_weights *w, q35_scratch *sc, int n);

/* Floats of one work slot: the GDN chunk scratch for chunks of gdn_chunk tokens; the attention
 * tiles of a chunk of cap tokens, or the key-block scores and output of one query. */
size_t q35_gdn_work_floats(const q35_config *c, int gdn_chunk);
size_t q35_attn_work_floats(const q35_config *c, int cap);
#endif
