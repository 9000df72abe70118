/* The math, knowing nothing of models. Every op has a scalar reference in ref.c; SIMD siblings
 * (added per CPU) are reached through the dispatch table, chosen once at start-up. */
#ifndef Q35_KERNELS_H
#define Q35_KERNELS_H
#include <stdint.h>
#include "model/tensor.h"

/* Y[n][rows] = X[n][cols] · W^T, W = [rows][cols] in its stored dtype (f32, f16, bf16). */
void q35_matmul(const q35_tensor *W, const float *X, int n, float *Y);
/* Same for a row range [r0, r1) of W only; Y keeps the full row stride `rows`. */
void q35_matmul_rows(const q35_tensor *W, const float *X, int n, float *Y, int64_t r0, int64_t r1);
/* y[cols] = row r of W as float32 (embedding lookup). */
void q35_tensor_row_f32(const q35_tensor *W, int64_t r, float *y);

/* y[n] = x / sqrt(mean(x^2) + eps) * scale  (scale already holds 1+w for zero-centred norms). */
void q35_rmsnorm(const float *x, const float *scale, int n, float eps, float *y);
/* x[n] *= 1 / sqrt(sum(x^2) + eps) */
void q35_l2norm(float *x, int n, float eps);
/* o[n] = w * (o / sqrt(mean(o^2) + eps)) * silu(z)   (gated RMSNorm, norm before gate) */
void q35_gated_rmsnorm(float *o, const float *z, const float *w, int n, float eps);

static inline float q35_sigmoid(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }
static inline float q35_silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
/* torch.nn.functional.softplus with threshold 20 */
static inline float q35_softplus(float x) { return x > 20.0f ? x : __builtin_log1pf(__builtin_expf(x)); }

/* x[n] -> softmax in place (max-subtracted, fp32). */
void q35_softmax(float *x, int n);

/* Partial NeoX RoPE on x[0..rot): pairs (i, i+rot/2) rotate by angle[i]; cos/sin are [rot/2]. */
void q35_rope_neox(float *x, int rot, const float *cos_, const float *sin_);

/* One gated-delta-rule step for one value head, state S [dk][dv] fp32:
 *   S = exp(g) S;  u = beta (v - S^T k);  S += k ⊗ u;  o = S^T q */
void q35_gdn_step(float *S, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o);

/* Causal attention of one query head over n_kv cached positions:
 * o[hd] = softmax(q·K^T * scale) V with K, V rows at stride `stride` floats. */
void q35_attend(const float *q, const float *K, const float *V, int n_kv, int hd, int stride, float scale, float *scores, float *o);
#endif
