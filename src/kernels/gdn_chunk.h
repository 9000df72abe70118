/* Kernels of the Gated DeltaNet layer (chunkwise prompt form and token recurrence), of batched
 * attention and of the element-wise activations, in one table per ISA. The algorithms are written
 * once (gdn_chunk_impl.h) over a small set of vector primitives; gdn_chunk.c instantiates them with
 * scalar code (the reference, libm expf), gdn_chunk_avx2.c / gdn_chunk_avx512.c with intrinsics.
 * Shapes are in floats; "ld" is the distance between consecutive rows. */
#ifndef Q35_KERNELS_GDN_CHUNK_H
#define Q35_KERNELS_GDN_CHUNK_H
#include <stddef.h>
#include <stdint.h>

enum {
    Q35_TRI_NONE = 0,
    Q35_TRI_A = 1, /* A is lower triangular (entries above the diagonal are zero): row i reads k <= i only */
    Q35_TRI_C = 2, /* only C[i][j], j <= i is wanted: columns past the diagonal block are not computed */
};

/* One value head over n consecutive tokens. */
typedef struct q35_gdn_head {
    const float *q;    /* row t at q + t*ld: [dk], l2-normed and scaled by dk^-0.5 */
    const float *k;    /* row t at k + t*ld: [dk], l2-normed */
    const float *v;    /* row t at v + t*ld: [dv] */
    int ld;            /* row distance of q, k, v (the conv channel count) */
    const float *g;    /* [n] log-decay of each token (<= 0) */
    const float *beta; /* [n] */
    float *o;          /* row t at o + t*ldo: [dv] output */
    int ldo;
    float *S;          /* [dk][dv] recurrent state, updated in place */
    int n, dk, dv;
    /* [dk][dv] the state the caller updates next, or NULL: recur prefetches it while it writes S
     * (a prefetch only: it is neither read nor written here) */
    const float *S_next;
} q35_gdn_head;

typedef struct q35_gdn_kernels {
    const char *name; /* "scalar", "avx2", "avx512", "neon" */
    /* C[M][N] = A[M][K] B[K][N] + beta C (beta = 0: C is not read); tri: Q35_TRI_* */
    void (*gemm)(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc, float beta, int tri);
    /* C[M][N] = A[M][K] B[N][K]^T (dot products of rows; for few rows of A) */
    void (*gemm_nt)(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc);
    /* Rows of K (row j at K + j*ld) hold nkv heads of [d] values (head kh at offset kh*d), each
     * shared by G <= 8 query heads. dot_rows: S[kh*skv + g*lds + j] = q_(kh,g) . K_j[kh], j < n,
     * with q_(kh,g) at q + kh*qkv + g*qh. axpy_rows: O[kh*okv + g*d ..] += sum_j S[kh*skv + g*lds
     * + j] V_j[kh]. Each row is read once, all its heads in order (one stream through memory),
     * with prefetch ahead. */
    void (*dot_rows)(int nkv, int G, int n, int d, const float *q, int qh, int qkv, const float *K, int ld, float *S, int lds, int skv);
    void (*axpy_rows)(int nkv, int G, int n, int d, const float *S, int lds, int skv, const float *V, int ld, float *O, int okv);
    /* The same over an fp16 cache (ld in halves): bitwise what dot_rows / axpy_rows give on the
     * rows converted to fp32. */
    void (*dot_rows_h)(int nkv, int G, int n, int d, const float *q, int qh, int qkv, const uint16_t *K, int ld, float *S, int lds, int skv);
    void (*axpy_rows_h)(int nkv, int G, int n, int d, const float *S, int lds, int skv, const uint16_t *V, int ld, float *O, int okv);
    void (*to_f16)(const float *x, uint16_t *y, int n);   /* y[n] = x as IEEE halves, nearest even (q35_f32_to_f16) */
    void (*from_f16)(const uint16_t *x, float *y, int n); /* y[n] = x (exact) */
    /* dst[c][r] = src[r][c], r < rows, c < cols */
    void (*transpose)(const float *src, int lds, float *dst, int ldd, int rows, int cols);
    void (*vexp)(float *x, int n);                      /* x = exp(x); exp(x < -87.3) = 0 */
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float *y, float a, const float *x, int n); /* y += a x */
    void (*scale)(float *y, float a, int n);
    void (*scale_to)(float *y, float a, const float *x, int n); /* y = a x */
    void (*swiglu)(float *g, const float *u, size_t n);  /* g = silu(g) * u */
    void (*silu)(float *x, size_t n);
    /* y[n] = x / sqrt(mean(x^2) + eps) * scale (y may be x) */
    void (*rmsnorm)(const float *x, const float *scale, int n, float eps, float *y);
    void (*sigmoid_mul)(float *o, const float *g, int n); /* o *= sigmoid(g) */
    /* One row of an online softmax tile: s[0..vis) *= scale; m' = max(*m, those); s = exp(s - m')
     * there and 0 on [vis, nk); *sum = *sum * exp(*m - m') + sum(s); *m = m'. Returns exp(*m - m')
     * (0 when *m was -inf), the factor the row's earlier output must be scaled by. */
    float (*softmax_row)(float *s, int vis, int nk, float scale, float *m, float *sum);
    /* The first index of the largest of x[0..n) (NaNs skipped; x[0] = NaN gives 0), as the plain
     * loop `best = 0; for i: if (x[i] > x[best]) best = i` */
    int64_t (*argmax)(const float *x, int64_t n);
    /* o[n] = w * (o / sqrt(mean(o^2) + eps)) * silu(z) */
    void (*gated_rmsnorm)(float *o, const float *z, const float *w, int n, float eps);
    /* Causal depthwise conv + SiLU over channels [c0, c1) of n tokens, in place: x row t at
     * x + t*ld; state [K-1][ld] holds the previous K-1 pre-conv rows (oldest first) and is
     * advanced; taps_t [K][ld]: tap j of channel c at taps_t[j*ld + c] (cross-correlation: row
     * K-1 multiplies the current token). */
    void (*conv_silu)(float *x, int ld, float *state, const float *taps_t, int K, int c0, int c1, int n);
    /* The gated delta rule token by token (the reference; used for generation). */
    void (*recur)(const q35_gdn_head *h);
    /* The chunkwise form, chunks of L tokens; work: q35_gdn_chunk_work(L, dk, dv) floats. */
    void (*chunk)(const q35_gdn_head *h, int L, float *work);
} q35_gdn_kernels;

/* Floats of scratch one chunk() call needs. */
size_t q35_gdn_chunk_work(int L, int dk, int dv);

/* The best table this CPU runs (Q35_ISA=scalar|avx2|avx512|neon caps it), chosen once. */
const q35_gdn_kernels *q35_gdn_kernels_best(void);
/* A table by name, or NULL when this CPU (or build) lacks it. */
const q35_gdn_kernels *q35_gdn_kernels_isa(const char *name);

extern const q35_gdn_kernels q35_gdn_kernels_scalar;
#if defined(__x86_64__)
extern const q35_gdn_kernels q35_gdn_kernels_avx2;
extern const q35_gdn_kernels q35_gdn_kernels_avx512;
#elif defined(__aarch64__)
extern const q35_gdn_kernels q35_gdn_kernels_neon;
#endif
#endif
