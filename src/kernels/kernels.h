/* The math, knowing nothing of models. Every op has a scalar reference in ref.c; SIMD siblings
 * (added per CPU) are reached through the dispatch table, chosen once at start-up. */
#ifndef Q35_KERNELS_H
#define Q35_KERNELS_H
#include <stdint.h>
#include "model/tensor.h"

/* ---- Matrix products (matmul.c; formats in kernels/quant.h) ----
 * Y[n][rows] = X[n][cols] · W^T, W = [rows][cols] in any dtype the kernels read (F32, F16, BF16,
 * Q8_0, Q4_0, Q4R, Q4_K, Q6_K) and layout (row-major, or Q35_LAYOUT_R16 from q35_tensor_repack:
 * integer formats are fast only in R16). Output rows are split across the global thread pool
 * (src/core/pool.h), the caller working too: call it from outside pool tasks. For integer formats
 * the activations are quantized once per call to 8-bit blocks (and rotated for Q4R) into a buffer
 * of the calling thread that grows on first use and is reused after: no allocation per call once
 * the largest n x cols has been seen (q35_matmul_reserve pre-grows it). */
void q35_matmul(const q35_tensor *W, const float *X, int n, float *Y);
/* Same product for batch-only callers (the vision encoder): a token's result may depend on n (on
 * AVX-512, float weights then run through transposed 16-row panels, ~1.5x faster for 8+ tokens).
 * q35_matmul is row-invariant: token t's output is the same bits whatever n is, which the
 * text runtime relies on (prompt chunks vs single tokens, exact prefix reuse). */
void q35_matmul_batch(const q35_tensor *W, const float *X, int n, float *Y);
/* Y[k] = X · W[k]^T for count (2..4) matrices of one input in one pool dispatch, the activations
 * quantized once: bitwise what count q35_matmul calls give. Integer formats sharing dtype, layout and
 * columns; anything else falls back to one call each. */
void q35_matmul_many(const q35_tensor *const *W, float *const *Y, int count, const float *X, int n);
/* Same for a row range [r0, r1) of W only, on the calling thread alone (usable inside pool tasks);
 * Y keeps the full row stride `rows`. */
void q35_matmul_rows(const q35_tensor *W, const float *X, int n, float *Y, int64_t r0, int64_t r1);
/* Grows the calling thread's activation buffer for products up to n tokens x cols columns.
 * Returns 0, or -1 when out of memory (q35_matmul then still works, more slowly, token by token). */
int q35_matmul_reserve(int64_t cols, int n);
/* Frees the calling thread's activation buffer (threads that exit free theirs automatically). */
void q35_matmul_release(void);
/* BF16 weights: 0 (default) = exact: bf16 weights widened to fp32, fp32 activations, fp32 FMA;
 * 1 = where the CPU has AVX-512 BF16, activations are rounded to bf16 once per call (relative error
 * up to 2^-9 each) and products use vdpbf16ps. Measured: on the first AVX-512 test VM no faster
 * than the exact path (~90 GFLOP/s either way at n = 64); on a Zen 4 VM, where one vdpbf16ps does
 * twice an FMA's multiply-adds in the same slot, the 0.8B prompt 88.5 -> 136.3 tok/s with 1 thread
 * (docs/speed.md, "BF16 weights: at the FMA bound"). Logits move by up to 2-6% of the largest
 * logit on the random parity fixtures (test_parity fails at 1e-4), so it stays off.
 * Q35_BF16_DOT=1 in the environment turns it on at start. Returns the previous value. */
int q35_matmul_set_bf16_dot(int on);
/* y[cols] = row r of W as float32 (embedding lookup), any dtype and layout. */
void q35_tensor_row_f32(const q35_tensor *W, int64_t r, float *y);

/* ---- CPU features and dispatch (dispatch.c) ----
 * The instruction set the kernels use is chosen once, at first use, from the CPU and OS:
 * AVX512 = AVX-512 F/BW/VL/DQ + VNNI with the OS saving ZMM state (BF16 used when present);
 * AVX2 = AVX2 + FMA + F16C (AVX-VNNI used when present); NEON = aarch64 with dotprod and fp16.
 * The environment variable Q35_ISA=scalar|avx2|avx512|neon selects a lower one. */
typedef enum q35_isa { Q35_ISA_SCALAR = 0, Q35_ISA_AVX2, Q35_ISA_AVX512, Q35_ISA_NEON, Q35_ISA_COUNT } q35_isa;
q35_isa q35_isa_best(void);             /* the best level this CPU and OS support */
q35_isa q35_isa_get(void);              /* the level in use */
/* Use `isa` from now on (tests, benchmarks; not while products run). Returns 0, or -1 when the
 * CPU lacks it. */
int q35_isa_set(q35_isa isa);
const char *q35_isa_name(q35_isa isa);
/* "avx512 (vnni bf16)" and the like: the level in use and the optional features it exploits. */
const char *q35_isa_describe(void);

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
/* The first index of the largest of x[0..n) (NaNs skipped; x[0] = NaN gives 0): greedy decoding's
 * choice, vectorised (gdn_chunk.h's argmax of the best ISA). */
int64_t q35_argmax(const float *x, int64_t n);

/* Partial NeoX RoPE on x[0..rot): pairs (i, i+rot/2) rotate by angle[i]; cos/sin are [rot/2]. */
void q35_rope_neox(float *x, int rot, const float *cos_, const float *sin_);

/* One gated-delta-rule step for one value head, state S [dk][dv] fp32:
 *   S = exp(g) S;  u = beta (v - S^T k);  S += k ⊗ u;  o = S^T q */
void q35_gdn_step(float *S, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o);

/* Causal attention of one query head over n_kv cached positions:
 * o[hd] = softmax(q·K^T * scale) V with K, V rows at stride `stride` floats. */
void q35_attend(const float *q, const float *K, const float *V, int n_kv, int hd, int stride, float scale, float *scores, float *o);
#endif
