/* The algorithms of gdn_chunk.h, written once over vector primitives the including file defines:
 *   VL lanes, vec, VZERO(), VSET1(x), VLOAD(p), VSTORE(p, v), VLOADM(p, n), VSTOREM(p, v, n) (the
 *   first n lanes, the others read as 0 / left alone), VFMA(a, b, c) = a*b + c, VMUL, VADD, VSUB,
 *   VLOADH(p) / VLOADHM(p, n) (IEEE halves at uint16_t *p as floats), VSTOREH(p, v) / VSTOREHM(p, v, n)
 *   (rounded to nearest even), VDIV, VMAX, VMIN, VRCP(v) (1/v to ~fp32 precision), VHSUM(v), VHMAX(v), VEXP(v) (exp(x < -87.3)
 *   = 0), TRANSPOSE_VL(src, lds, dst, ldd) (one VL x VL block), FN(name) (the ISA's suffix),
 *   GEMM_MR (rows, <= 6) and GEMM_NV (vectors, <= 4) of the product's register tile, RNV (vectors
 *   per column block of the recurrence, <= 4 or 8).
 * Included by gdn_chunk.c (scalar), gdn_chunk_avx2.c and gdn_chunk_avx512.c only. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/gdn_chunk.h"

#define IMIN(a, b) ((a) < (b) ? (a) : (b))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define CONV_KMAX 16

static ALWAYS_INLINE vec FN(loadn)(const float *p, int n) { return n == VL ? VLOAD(p) : VLOADM(p, n); }
static ALWAYS_INLINE void FN(storen)(float *p, vec v, int n) {
    if (n == VL) VSTORE(p, v);
    else VSTOREM(p, v, n);
}
/* silu(x) = x / (1 + exp(-x)); exp's argument is capped at 80 so that 1 + exp stays finite for VRCP
 * (below x = -80 silu is ~1e-33 either way). */
static ALWAYS_INLINE vec FN(vsilu)(vec x) { return VMUL(x, VRCP(VADD(VSET1(1.0f), VEXP(VMIN(VSUB(VZERO(), x), VSET1(80.0f)))))); }

/* ---------------------------------------------------------------- small dense products */

/* C[mr][nv*VL] block: mr, nv, masked are constants after inlining (the accumulators stay in
 * registers); masked: the last vector holds `tail` columns. */
static ALWAYS_INLINE void FN(mk)(const int mr, const int nv, const int masked, int tail, int K, const float *A, int lda, const float *B,
                                 int ldb, float *C, int ldc, float beta) {
    vec c[6][4]; /* only [mr][nv] is used */
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) c[r][v] = VZERO();
    for (int k = 0; k < K; k++) {
        const float *b = B + (size_t)k * ldb;
        vec bv[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = (masked && v == nv - 1) ? VLOADM(b + v * VL, tail) : VLOAD(b + v * VL);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const vec a = VSET1(A[(size_t)r * lda + k]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) c[r][v] = VFMA(a, bv[v], c[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        float *cr = C + (size_t)r * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            if (masked && v == nv - 1) {
                vec x = c[r][v];
                if (beta != 0.0f) x = VFMA(VSET1(beta), VLOADM(cr + v * VL, tail), x);
                VSTOREM(cr + v * VL, x, tail);
            } else {
                vec x = c[r][v];
                if (beta != 0.0f) x = VFMA(VSET1(beta), VLOAD(cr + v * VL), x);
                VSTORE(cr + v * VL, x);
            }
        }
    }
}

#define MK_CASE(MR_, NV_)                                                                  \
    case MR_ * 8 + NV_:                                                                    \
        if (masked) FN(mk)(MR_, NV_, 1, tail, K, A, lda, B, ldb, C, ldc, beta);            \
        else FN(mk)(MR_, NV_, 0, VL, K, A, lda, B, ldb, C, ldc, beta);                     \
        break;

static void FN(mk_any)(int mr, int nv, int tail, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc, float beta) {
    const int masked = tail != VL;
    switch (mr * 8 + nv) {
        MK_CASE(1, 1) MK_CASE(1, 2) MK_CASE(1, 3) MK_CASE(1, 4)
        MK_CASE(2, 1) MK_CASE(2, 2) MK_CASE(2, 3) MK_CASE(2, 4)
        MK_CASE(3, 1) MK_CASE(3, 2) MK_CASE(3, 3) MK_CASE(3, 4)
        MK_CASE(4, 1) MK_CASE(4, 2) MK_CASE(4, 3) MK_CASE(4, 4)
#if GEMM_MR > 4
        MK_CASE(5, 1) MK_CASE(5, 2) MK_CASE(5, 3) MK_CASE(5, 4)
        MK_CASE(6, 1) MK_CASE(6, 2) MK_CASE(6, 3) MK_CASE(6, 4)
#endif
    default: break;
    }
}
#undef MK_CASE

/* Loops: column panels of NR, K blocks of KC (the KC x NR panel of B, 32 KB, stays in L1 while
 * every row block passes over it), row blocks of MR. */
#define GEMM_KC (8192 / (GEMM_NV * VL))
static void FN(gemm)(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc, float beta, int tri) {
    const int NR = GEMM_NV * VL;
    if (K <= 0) { /* empty sum: C = beta C */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < (tri == Q35_TRI_C ? IMIN(N, (i / GEMM_MR + 1) * GEMM_MR) : N); j++) {
                float *cj = C + (size_t)i * ldc + j;
                *cj = beta != 0.0f ? beta * *cj : 0.0f;
            }
        return;
    }
    for (int j0 = 0; j0 < N; j0 += NR)
        for (int k0 = 0; k0 < K; k0 += GEMM_KC)
            for (int i0 = 0; i0 < M; i0 += GEMM_MR) {
                const int mr = IMIN(GEMM_MR, M - i0);
                const int Kl = tri == Q35_TRI_A ? IMIN(K, i0 + mr) : K; /* >= 1 */
                const int Nl = tri == Q35_TRI_C ? IMIN(N, i0 + mr) : N;
                if (k0 >= Kl || j0 >= Nl) continue;
                const int kb = IMIN(Kl, k0 + GEMM_KC) - k0;
                const int nr = IMIN(NR, Nl - j0), nv = (nr + VL - 1) / VL, tail = nr - (nv - 1) * VL;
                FN(mk_any)(mr, nv, tail, kb, A + (size_t)i0 * lda + k0, lda, B + (size_t)k0 * ldb + j0, ldb, C + (size_t)i0 * ldc + j0, ldc,
                           k0 == 0 ? beta : 1.0f);
            }
}

/* C[mr][nr] = A[mr][K] . B[nr][K]^T: mr x nr dot products in vector accumulators, reduced at the end. */
static ALWAYS_INLINE void FN(ntk)(const int mr, const int nr, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc) {
    vec acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) acc[r][j] = VZERO();
    int k = 0;
    for (; k + VL <= K; k += VL) {
        vec b[4];
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) b[j] = VLOAD(B + (size_t)j * ldb + k);
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            const vec a = VLOAD(A + (size_t)r * lda + k);
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) acc[r][j] = VFMA(a, b[j], acc[r][j]);
        }
    }
    if (k < K) {
        vec b[4];
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) b[j] = VLOADM(B + (size_t)j * ldb + k, K - k);
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            const vec a = VLOADM(A + (size_t)r * lda + k, K - k);
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) acc[r][j] = VFMA(a, b[j], acc[r][j]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) C[(size_t)r * ldc + j] = VHSUM(acc[r][j]);
}

#define NT_CASE(MR_, NR_) \
    case MR_ * 8 + NR_: FN(ntk)(MR_, NR_, K, Ai, lda, B + (size_t)j0 * ldb, ldb, Ci + j0, ldc); break;

static void FN(gemm_nt)(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc) {
    for (int i0 = 0; i0 < M; i0 += 4) {
        const int mr = IMIN(4, M - i0);
        const float *Ai = A + (size_t)i0 * lda;
        float *Ci = C + (size_t)i0 * ldc;
        for (int j0 = 0; j0 < N; j0 += 4) {
            switch (mr * 8 + IMIN(4, N - j0)) {
                NT_CASE(1, 1) NT_CASE(1, 2) NT_CASE(1, 3) NT_CASE(1, 4)
                NT_CASE(2, 1) NT_CASE(2, 2) NT_CASE(2, 3) NT_CASE(2, 4)
                NT_CASE(3, 1) NT_CASE(3, 2) NT_CASE(3, 3) NT_CASE(3, 4)
                NT_CASE(4, 1) NT_CASE(4, 2) NT_CASE(4, 3) NT_CASE(4, 4)
            default: break;
            }
        }
    }
}
#undef NT_CASE

/* ---------------------------------------------------------------- vector helpers */

static void FN(transpose)(const float *src, int lds, float *dst, int ldd, int rows, int cols) {
    int r0 = 0;
    for (; r0 + VL <= rows; r0 += VL) {
        int c0 = 0;
        for (; c0 + VL <= cols; c0 += VL) TRANSPOSE_VL(src + (size_t)r0 * lds + c0, lds, dst + (size_t)c0 * ldd + r0, ldd);
        for (int c = c0; c < cols; c++)
            for (int r = r0; r < r0 + VL; r++) dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
    }
    for (int c = 0; c < cols; c++)
        for (int r = r0; r < rows; r++) dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
}

static void FN(vexp)(float *x, int n) {
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(x + i, VEXP(VLOAD(x + i)));
    if (i < n) VSTOREM(x + i, VEXP(VLOADM(x + i, n - i)), n - i);
}

static float FN(dot)(const float *a, const float *b, int n) {
    vec s0 = VZERO(), s1 = VZERO();
    int i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        s0 = VFMA(VLOAD(a + i), VLOAD(b + i), s0);
        s1 = VFMA(VLOAD(a + i + VL), VLOAD(b + i + VL), s1);
    }
    for (; i + VL <= n; i += VL) s0 = VFMA(VLOAD(a + i), VLOAD(b + i), s0);
    if (i < n) s1 = VFMA(VLOADM(a + i, n - i), VLOADM(b + i, n - i), s1);
    return VHSUM(VADD(s0, s1));
}

static void FN(axpy)(float *y, float a, const float *x, int n) {
    const vec va = VSET1(a);
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(y + i, VFMA(va, VLOAD(x + i), VLOAD(y + i)));
    if (i < n) VSTOREM(y + i, VFMA(va, VLOADM(x + i, n - i), VLOADM(y + i, n - i)), n - i);
}

static void FN(scale)(float *y, float a, int n) {
    const vec va = VSET1(a);
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(y + i, VMUL(va, VLOAD(y + i)));
    if (i < n) VSTOREM(y + i, VMUL(va, VLOADM(y + i, n - i)), n - i);
}

/* y = a * x (y and x may alias) */
static void FN(scale_to)(float *y, float a, const float *x, int n) {
    const vec va = VSET1(a);
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(y + i, VMUL(va, VLOAD(x + i)));
    if (i < n) VSTOREM(y + i, VMUL(va, VLOADM(x + i, n - i)), n - i);
}

/* y = x * z element-wise */
static void FN(vmul)(float *y, const float *x, const float *z, int n) {
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(y + i, VMUL(VLOAD(x + i), VLOAD(z + i)));
    if (i < n) VSTOREM(y + i, VMUL(VLOADM(x + i, n - i), VLOADM(z + i, n - i)), n - i);
}

static void FN(swiglu)(float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + VL <= n; i += VL) VSTORE(g + i, VMUL(FN(vsilu)(VLOAD(g + i)), VLOAD(u + i)));
    if (i < n) VSTOREM(g + i, VMUL(FN(vsilu)(VLOADM(g + i, (int)(n - i))), VLOADM(u + i, (int)(n - i))), (int)(n - i));
}

static ALWAYS_INLINE vec FN(vsigmoid)(vec x) { return VRCP(VADD(VSET1(1.0f), VEXP(VMIN(VSUB(VZERO(), x), VSET1(80.0f))))); }

static void FN(sigmoid_mul)(float *o, const float *g, int n) {
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(o + i, VMUL(VLOAD(o + i), FN(vsigmoid)(VLOAD(g + i))));
    if (i < n) VSTOREM(o + i, VMUL(VLOADM(o + i, n - i), FN(vsigmoid)(VLOADM(g + i, n - i))), n - i);
}

static void FN(silu)(float *x, size_t n) {
    size_t i = 0;
    for (; i + VL <= n; i += VL) VSTORE(x + i, FN(vsilu)(VLOAD(x + i)));
    if (i < n) VSTOREM(x + i, FN(vsilu)(VLOADM(x + i, (int)(n - i))), (int)(n - i));
}

static void FN(rmsnorm)(const float *x, const float *scale, int n, float eps, float *y) {
    const float ss = FN(dot)(x, x, n);
    const vec inv = VSET1(1.0f / sqrtf(ss / (float)n + eps));
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(y + i, VMUL(VMUL(VLOAD(x + i), inv), VLOAD(scale + i)));
    if (i < n) VSTOREM(y + i, VMUL(VMUL(VLOADM(x + i, n - i), inv), VLOADM(scale + i, n - i)), n - i);
}

static void FN(gated_rmsnorm)(float *o, const float *z, const float *w, int n, float eps) {
    const float ss = FN(dot)(o, o, n);
    const vec inv = VSET1(1.0f / sqrtf(ss / (float)n + eps));
    int i = 0;
    for (; i + VL <= n; i += VL)
        VSTORE(o + i, VMUL(VMUL(VLOAD(w + i), VMUL(VLOAD(o + i), inv)), FN(vsilu)(VLOAD(z + i))));
    if (i < n) {
        const int r = n - i;
        VSTOREM(o + i, VMUL(VMUL(VLOADM(w + i, r), VMUL(VLOADM(o + i, r), inv)), FN(vsilu)(VLOADM(z + i, r))), r);
    }
}

static float FN(softmax_row)(float *s, int vis, int nk, float scale, float *m, float *sum) {
    if (vis <= 0) {
        memset(s, 0, sizeof(float) * (size_t)nk);
        return 1.0f;
    }
    float mx = *m;
    int j = 0;
    const vec vs = VSET1(scale);
    vec vmx = VSET1(mx);
    for (; j + VL <= vis; j += VL) {
        const vec x = VMUL(VLOAD(s + j), vs);
        VSTORE(s + j, x);
        vmx = VMAX(vmx, x);
    }
    mx = VHMAX(vmx);
    for (; j < vis; j++) {
        s[j] *= scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    const float corr = expf(*m - mx); /* 0 when *m = -inf */
    const vec vm = VSET1(mx);
    vec acc = VZERO();
    j = 0;
    for (; j + VL <= vis; j += VL) {
        const vec e = VEXP(VSUB(VLOAD(s + j), vm));
        VSTORE(s + j, e);
        acc = VADD(acc, e);
    }
    if (j < vis) {
        const vec e = VEXP(VSUB(VLOADM(s + j, vis - j), vm));
        VSTOREM(s + j, e, vis - j);
        acc = VADD(acc, VLOADM(s + j, vis - j));
    }
    if (vis < nk) memset(s + vis, 0, sizeof(float) * (size_t)(nk - vis));
    *sum = *sum * corr + VHSUM(acc);
    *m = mx;
    return corr;
}

/* ---------------------------------------------------------------- causal conv + SiLU */

/* Channels [cb, cb + cw), cw <= CONV_CB, every token in order: the raw (pre-conv) rows of the K-1
 * previous tokens of these channels live in a ring in L1 (seeded from the state, left there as the
 * new state), so each row of x is streamed once, read then overwritten in place. */
#define CONV_CB 512
static ALWAYS_INLINE void FN(conv_block)(const int K, float *x, int ld, float *state, const float *taps_t, int cb, int cw, int n) {
    if (n == 1) { /* one token (generation): straight from the state rows, shifted in place */
        for (int v = 0; v < cw; v += VL) {
            const int w = IMIN(VL, cw - v);
            float *xt = x + cb + v, *st = state + cb + v;
            const vec raw = FN(loadn)(xt, w);
            vec y = VMUL(FN(loadn)(taps_t + (size_t)(K - 1) * ld + cb + v, w), raw);
            for (int j = 0; j < K - 1; j++) {
                const vec sj = FN(loadn)(st + (size_t)j * ld, w);
                y = VFMA(FN(loadn)(taps_t + (size_t)j * ld + cb + v, w), sj, y);
                if (j > 0) FN(storen)(st + (size_t)(j - 1) * ld, sj, w);
            }
            if (K > 1) FN(storen)(st + (size_t)(K - 2) * ld, raw, w);
            FN(storen)(xt, FN(vsilu)(y), w);
        }
        return;
    }
    float ring[CONV_KMAX - 1][CONV_CB]; /* slot (head + j) % (K-1): raw row t-(K-1)+j */
    for (int j = 0; j < K - 1; j++) memcpy(ring[j], state + (size_t)j * ld + cb, sizeof(float) * (size_t)cw);
    int head = 0;
    for (int t = 0; t < n; t++) {
        float *xt = x + (size_t)t * ld + cb;
        const float *in[CONV_KMAX];
        for (int j = 0; j < K - 1; j++) in[j] = ring[(head + j) % (K - 1)];
        float *newest = ring[head]; /* the oldest slot takes this row's raw values */
        if (t + 2 < n) /* the rows are far apart (C floats): fetch two ahead, a line at a time */
            for (int v = 0; v < cw; v += 16) __builtin_prefetch(xt + 2 * (size_t)ld + v, 1, 3);
        const float *tl = taps_t + (size_t)(K - 1) * ld + cb;
        for (int v = 0; v < cw; v += VL) {
            const int w = IMIN(VL, cw - v);
            const vec raw = FN(loadn)(xt + v, w);
            vec y = VMUL(FN(loadn)(tl + v, w), raw);
            for (int j = 0; j < K - 1; j++) y = VFMA(FN(loadn)(taps_t + (size_t)j * ld + cb + v, w), FN(loadn)(in[j] + v, w), y);
            if (K > 1) FN(storen)(newest + v, raw, w);
            FN(storen)(xt + v, FN(vsilu)(y), w);
        }
        if (K > 1) head = (head + 1) % (K - 1);
    }
    for (int j = 0; j < K - 1; j++) memcpy(state + (size_t)j * ld + cb, ring[(head + j) % (K - 1)], sizeof(float) * (size_t)cw);
}

static void FN(conv_silu)(float *x, int ld, float *state, const float *taps_t, int K, int c0, int c1, int n) {
    if (K > CONV_KMAX || K < 1) { /* not a Qwen3.5 shape: plain loops */
        for (int c = c0; c < c1; c++) {
            float ns[CONV_KMAX + 1 > K ? CONV_KMAX + 1 : K]; /* the new state of this channel */
            for (int j = 0; j < K - 1; j++) {
                const int idx = n - (K - 1) + j;
                ns[j] = idx >= 0 ? x[(size_t)idx * ld + c] : state[(size_t)(K - 1 + idx) * ld + c];
            }
            for (int t = n - 1; t >= 0; t--) {
                float y = 0;
                for (int j = 0; j < K; j++) {
                    const int idx = t - (K - 1) + j;
                    y += taps_t[(size_t)j * ld + c] * (idx >= 0 ? x[(size_t)idx * ld + c] : state[(size_t)(K - 1 + idx) * ld + c]);
                }
                x[(size_t)t * ld + c] = y / (1.0f + expf(-y));
            }
            for (int j = 0; j < K - 1; j++) state[(size_t)j * ld + c] = ns[j];
        }
        return;
    }
    for (int cb = c0; cb < c1; cb += CONV_CB) {
        const int cw = IMIN(CONV_CB, c1 - cb);
        if (K == 4) FN(conv_block)(4, x, ld, state, taps_t, cb, cw, n);
        else FN(conv_block)(K, x, ld, state, taps_t, cb, cw, n);
    }
}

/* ---------------------------------------------------------------- token recurrence */

/* Columns [c0, c0 + (nv-1)*VL + tail) of the state, every token: the state block stays in L1. */
/* In generation the state streams from memory, 64 KB per head per token, in two passes over each
 * block: pass 1 reads it (u = S^T k), pass 2 rewrites it from L2 and reads nothing new. So the
 * prefetches run one block ahead: at row i both passes ask for row i of `next` (the block recur
 * reads after this one, when the caller says which), and pass 1 also for its own row i +
 * RECUR_PF_OWN (the first block of a call has no one before it to fetch it). Asking twice is what
 * makes it work: alone, pass 1's requests (a whole block ahead) are largely dropped, and alone,
 * pass 2's come too late. Measured on Zen 4 (`bench_kernels --recur`: 18 layers x 16 heads of 128 x
 * 128, one token, L3 flushed before each run; AVX-512 / AVX2, ms, three rounds): own rows 16 ahead
 * only (the old kernel) 1.48-1.53 / 1.28-1.33; next's rows in pass 1 only 1.48-1.59 / 1.15-1.19; in
 * pass 2 only 1.12-1.15 / 1.11; in both 0.76-0.81 / 0.74-0.81; in both and own rows 32 ahead
 * 0.74-0.76 / 0.71-0.75. */
#define RECUR_PF_OWN 32

/* Prefetch into L2 the w floats of row `row` of S or, past its dk rows, of next. */
static ALWAYS_INLINE void FN(recur_pf)(const float *S, const float *next, int dk, int dv, int w, int row) {
    const float *p = row < dk ? S + (size_t)row * dv : next && row < 2 * dk ? next + (size_t)(row - dk) * dv : NULL;
    if (p)
        for (int j = 0; j < w; j += 16) __builtin_prefetch(p + j, 0, 2);
}

static ALWAYS_INLINE void FN(recur_block)(const int nv, const int masked, int tail, const q35_gdn_head *h, int c0, const float *next) {
    const int dk = h->dk, dv = h->dv, ld = h->ld, w = (nv - 1) * VL + tail;
    float *S = h->S + c0;
    for (int t = 0; t < h->n; t++) {
        const float *q = h->q + (size_t)t * ld, *k = h->k + (size_t)t * ld, *v = h->v + (size_t)t * ld + c0;
        const float decay = expf(h->g[t]), beta = h->beta[t];
        vec a0[8], a1[8], u[8];
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) a0[j] = VZERO(), a1[j] = VZERO();
        int i = 0;
        for (; i + 1 < dk; i += 2) { /* u = S^T k (two accumulator sets: half the FMA chain) */
            const float *r0 = S + (size_t)i * dv, *r1 = r0 + dv;
            const vec k0 = VSET1(k[i]), k1 = VSET1(k[i + 1]);
            FN(recur_pf)(S, next, dk, dv, w, dk + i);
            FN(recur_pf)(S, next, dk, dv, w, dk + i + 1);
            if (i + RECUR_PF_OWN < dk) {
                FN(recur_pf)(S, next, dk, dv, w, i + RECUR_PF_OWN);
                FN(recur_pf)(S, next, dk, dv, w, i + 1 + RECUR_PF_OWN);
            }
#pragma GCC unroll 8
            for (int j = 0; j < nv; j++) {
                const int m = masked && j == nv - 1;
                a0[j] = VFMA(k0, m ? VLOADM(r0 + j * VL, tail) : VLOAD(r0 + j * VL), a0[j]);
                a1[j] = VFMA(k1, m ? VLOADM(r1 + j * VL, tail) : VLOAD(r1 + j * VL), a1[j]);
            }
        }
        if (i < dk) {
            const float *r0 = S + (size_t)i * dv;
            const vec k0 = VSET1(k[i]);
#pragma GCC unroll 8
            for (int j = 0; j < nv; j++)
                a0[j] = VFMA(k0, (masked && j == nv - 1) ? VLOADM(r0 + j * VL, tail) : VLOAD(r0 + j * VL), a0[j]);
        }
        const vec vdecay = VSET1(decay), vbeta = VSET1(beta);
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) { /* u = beta (v - decay S^T k) */
            const vec vv = (masked && j == nv - 1) ? VLOADM(v + j * VL, tail) : VLOAD(v + j * VL);
            u[j] = VMUL(vbeta, VSUB(vv, VMUL(vdecay, VADD(a0[j], a1[j]))));
            a0[j] = VZERO(), a1[j] = VZERO(); /* now the output accumulators */
        }
        for (i = 0; i < dk; i++) { /* S = decay S + k u^T;  o = S^T q */
            float *r = S + (size_t)i * dv;
            const vec ki = VSET1(k[i]), qi = VSET1(q[i]);
            FN(recur_pf)(S, next, dk, dv, w, dk + i); /* again: see above */
#pragma GCC unroll 8
            for (int j = 0; j < nv; j++) {
                const int m = masked && j == nv - 1;
                const vec s = VFMA(m ? VLOADM(r + j * VL, tail) : VLOAD(r + j * VL), vdecay, VMUL(ki, u[j]));
                if (m) VSTOREM(r + j * VL, s, tail);
                else VSTORE(r + j * VL, s);
                if (i & 1) a1[j] = VFMA(qi, s, a1[j]);
                else a0[j] = VFMA(qi, s, a0[j]);
            }
        }
        float *o = h->o + (size_t)t * h->ldo + c0;
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) {
            if (masked && j == nv - 1) VSTOREM(o + j * VL, VADD(a0[j], a1[j]), tail);
            else VSTORE(o + j * VL, VADD(a0[j], a1[j]));
        }
    }
}

/* Column blocks of RNV vectors: the whole row (dv = 128) on AVX-512, so each pass reads the
 * state contiguously (it streams from L3 / memory in generation: 64 KB per head per token). */
static void FN(recur)(const q35_gdn_head *h) {
    const int B = RNV * VL;
    for (int c0 = 0; c0 < h->dv; c0 += B) {
        const int w = IMIN(B, h->dv - c0), nv = (w + VL - 1) / VL, tail = w - (nv - 1) * VL;
        const int masked = tail != VL;
        /* the block read next: this state's next columns, or the next state's first ones */
        const float *next = c0 + B < h->dv ? h->S + c0 + B : h->S_next;
        switch (nv * 2 + masked) {
        case 2: FN(recur_block)(1, 0, VL, h, c0, next); break;
        case 3: FN(recur_block)(1, 1, tail, h, c0, next); break;
#if RNV >= 2
        case 4: FN(recur_block)(2, 0, VL, h, c0, next); break;
        case 5: FN(recur_block)(2, 1, tail, h, c0, next); break;
#endif
#if RNV >= 3
        case 6: FN(recur_block)(3, 0, VL, h, c0, next); break;
        case 7: FN(recur_block)(3, 1, tail, h, c0, next); break;
#endif
#if RNV >= 4
        case 8: FN(recur_block)(4, 0, VL, h, c0, next); break;
        case 9: FN(recur_block)(4, 1, tail, h, c0, next); break;
#endif
#if RNV >= 8
        case 10: FN(recur_block)(5, 0, VL, h, c0, next); break;
        case 11: FN(recur_block)(5, 1, tail, h, c0, next); break;
        case 12: FN(recur_block)(6, 0, VL, h, c0, next); break;
        case 13: FN(recur_block)(6, 1, tail, h, c0, next); break;
        case 14: FN(recur_block)(7, 0, VL, h, c0, next); break;
        case 15: FN(recur_block)(7, 1, tail, h, c0, next); break;
        case 16: FN(recur_block)(8, 0, VL, h, c0, next); break;
        case 17: FN(recur_block)(8, 1, tail, h, c0, next); break;
#endif
        default: break;
        }
    }
}

/* ---------------------------------------------------------------- chunkwise form (spec §3.2) */

/* Per chunk of m <= L tokens, with G the cumulative log-decay inside the chunk (every exp below is
 * of a difference G_i - G_j, j <= i, or of G_i itself: never positive, never overflowing):
 *   A[i][j] = -beta_i (k_i.k_j) exp(G_i - G_j), j < i    X = [beta_i v_i | -beta_i exp(G_i) k_i]
 *   (I - A) [U | -W] = X   by blocked forward substitution, in place
 *   Vn = U - W S;  O = diag(exp(G)) Q S + P Vn,  P[i][j] = (q_i.k_j) exp(G_i - G_j), j <= i
 *   S = exp(G_{m-1}) S + sum_j exp(G_{m-1} - G_j) k_j (x) Vn_j */
static void FN(chunk)(const q35_gdn_head *h, int L, float *work) {
    const int dk = h->dk, dv = h->dv, ld = h->ld, W = dv + dk;
    /* G in double: G_i - G_j of two large sums (|G| ~ 1e3 under strong decays) would lose ~1e-4
     * absolute in float, and exp would carry it as a relative error. */
    const int mis = (int)(((uintptr_t)work / sizeof(float)) & 1); /* G on an 8-byte boundary */
    double *G = (double *)(void *)(work + mis); /* [m] */
    float *Kt = work + 2 * (size_t)L + 2;       /* [dk][m] keys transposed (then scaled by exp(G_last - G_j)) */
    float *A = Kt + (size_t)dk * L;       /* [m][m] */
    float *P = A + (size_t)L * L;         /* [m][m] */
    float *X = P + (size_t)L * L;         /* [m][W]  U | -W, then Vn | -W */
    float *Qs = X + (size_t)L * W;        /* [m][dk] exp(G_i) q_i */
    float *eG = Qs + (size_t)L * dk;      /* [m] exp(G_i) */
    float *eGl = eG + L;                  /* [m] exp(G_{m-1} - G_i) */
    float *d = eGl + L;                   /* [m] exp(G_i - G_j) of one row */
    float *S = h->S;
    for (int t0 = 0; t0 < h->n; t0 += L) {
        const int m = IMIN(L, h->n - t0);
        const float *q = h->q + (size_t)t0 * ld, *k = h->k + (size_t)t0 * ld, *v = h->v + (size_t)t0 * ld;
        const float *g = h->g + t0, *beta = h->beta + t0;
        float *o = h->o + (size_t)t0 * h->ldo;
        double acc = 0;
        for (int i = 0; i < m; i++) G[i] = acc += g[i];
        for (int i = 0; i < m; i++) eG[i] = (float)G[i], eGl[i] = (float)(G[m - 1] - G[i]);
        FN(vexp)(eG, m);
        FN(vexp)(eGl, m);
        FN(transpose)(k, ld, Kt, m, m, dk);
        FN(gemm)(m, m, dk, k, ld, Kt, m, A, m, 0.0f, Q35_TRI_C);
        FN(gemm)(m, m, dk, q, ld, Kt, m, P, m, 0.0f, Q35_TRI_C);
        for (int i = 0; i < m; i++) {
            float *ai = A + (size_t)i * m, *pi = P + (size_t)i * m;
            for (int j = 0; j <= i; j++) d[j] = (float)(G[i] - G[j]);
            FN(vexp)(d, i + 1);
            FN(vmul)(pi, pi, d, i + 1); /* d[i] = 1 */
            FN(vmul)(ai, ai, d, i);
            FN(scale)(ai, -beta[i], i);
            memset(ai + i, 0, sizeof(float) * (size_t)(m - i));
            if (i + 1 < m) memset(pi + i + 1, 0, sizeof(float) * (size_t)(m - i - 1));
        }
        for (int i = 0; i < m; i++) {
            FN(scale_to)(X + (size_t)i * W, beta[i], v + (size_t)i * ld, dv);
            FN(scale_to)(X + (size_t)i * W + dv, -beta[i] * eG[i], k + (size_t)i * ld, dk);
            FN(scale_to)(Qs + (size_t)i * dk, eG[i], q + (size_t)i * ld, dk);
        }
        for (int b0 = 0; b0 < m; b0 += 16) { /* forward substitution, blocks of 16 rows */
            const int b1 = IMIN(m, b0 + 16);
            if (b0 > 0) FN(gemm)(b1 - b0, W, b0, A + (size_t)b0 * m, m, X, W, X + (size_t)b0 * W, W, 1.0f, Q35_TRI_NONE);
            for (int i = b0 + 1; i < b1; i++)
                for (int j = b0; j < i; j++) FN(axpy)(X + (size_t)i * W, A[(size_t)i * m + j], X + (size_t)j * W, W);
        }
        FN(gemm)(m, dv, dk, X + dv, W, S, dv, X, W, 1.0f, Q35_TRI_NONE);   /* Vn = U - W S */
        FN(gemm)(m, dv, dk, Qs, dk, S, dv, o, h->ldo, 0.0f, Q35_TRI_NONE); /* O = diag(e^G) Q S */
        FN(gemm)(m, dv, m, P, m, X, W, o, h->ldo, 1.0f, Q35_TRI_A);        /*   + P Vn */
        for (int c = 0; c < dk; c++) FN(vmul)(Kt + (size_t)c * m, Kt + (size_t)c * m, eGl, m);
        FN(gemm)(dk, dv, m, Kt, m, X, W, S, dv, eG[m - 1], Q35_TRI_NONE);  /* S = e^G_last S + K~^T Vn */
    }
}

/* ---------------------------------------------------------------- argmax */
/* The first index of the largest of x[0..n): what `best = 0; if (x[i] > x[best]) best = i` gives,
 * NaNs included (skipped; x[0] = NaN gives 0). Maxima of blocks of 1024 in vectors, then the first
 * block holding the largest value is searched for its first occurrence. */
static int64_t FN(argmax)(const float *x, int64_t n) {
    enum { BLK = 1024 };
    if (n <= 1 || x[0] != x[0]) return 0;
    float best = x[0];
    int64_t best_b0 = 0;
    for (int64_t b0 = 0; b0 < n; b0 += BLK) {
        const int64_t len = n - b0 < BLK ? n - b0 : BLK;
        const float *p = x + b0;
        int64_t i = 0;
        float m = -__builtin_inff();
        if (len >= VL) {
            vec mv = VSET1(m);
            for (; i + VL <= len; i += VL) mv = VMAX(VLOAD(p + i), mv); /* a NaN in x keeps mv */
            m = VHMAX(mv);
        }
        for (; i < len; i++)
            if (p[i] > m) m = p[i];
        if (m > best) best = m, best_b0 = b0;
    }
    for (int64_t i = best_b0; i < n; i++)
        if (x[i] == best) return i;
    return 0; /* not reached: best is x[0] or an element of block best_b0 */
}

/* ---------------------------------------------------------------- one query over a KV cache */

/* Generation reads every K and V row of the cache once; on a long context that is hundreds of MB a
 * token, so these two read the rows strictly in order (row j at p + j*ld), a row at a time, and
 * request the rows ATT_PF_NEAR (into L1) and ATT_PF_FAR (into L2) ahead as they go, one line per
 * line read (rows past the end are harmless: a prefetch never faults). */
#define ATT_PF_NEAR 1
#define ATT_PF_FAR 4
/* Prefetch the lines of row+NEAR and row+FAR rows (ld elements of es bytes apart) at column c,
 * once per 64-byte line. */
#define ATT_PF(row, c, ld, es)                                                                         \
    do {                                                                                               \
        if ((((c) * (es)) & 63) == 0) {                                                                \
            __builtin_prefetch((const char *)(row) + ((size_t)ATT_PF_NEAR * (size_t)(ld) + (size_t)(c)) * (es), 0, 3); \
            __builtin_prefetch((const char *)(row) + ((size_t)ATT_PF_FAR * (size_t)(ld) + (size_t)(c)) * (es), 0, 2);  \
        }                                                                                              \
    } while (0)
/* VL (or the first n) cache elements at element c of row p: fp32 (h = 0) or fp16 (h = 1). */
#define KV_LOAD(h, p, c) ((h) ? VLOADH((const uint16_t *)(p) + (c)) : VLOAD((const float *)(p) + (c)))
#define KV_LOADM(h, p, c, n) ((h) ? VLOADHM((const uint16_t *)(p) + (c), n) : VLOADM((const float *)(p) + (c), n))

/* The cache rows as fp32 (h = 0) or fp16 (h = 1): the same operations on the converted values, so
 * an fp16 cache gives bitwise what the fp32 kernel gives on the rounded values. */
static ALWAYS_INLINE void FN(dot_rows_g)(const int h, const int G, int nkv, int n, int d, const float *q, int qh, int qkv, const void *K,
                                          int ld, float *S, int lds, int skv) {
    const size_t es = h ? 2 : 4;
    for (int j = 0; j < n; j++) {
        for (int kh = 0; kh < nkv; kh++) {
            const char *kr = (const char *)K + ((size_t)j * ld + (size_t)kh * d) * es;
            const float *qk = q + (size_t)kh * qkv;
            vec acc[8];
#pragma GCC unroll 8
            for (int g = 0; g < G; g++) acc[g] = VZERO();
            int c = 0;
            for (; c + VL <= d; c += VL) {
                ATT_PF(kr, c, ld, es);
                const vec kv = KV_LOAD(h, kr, c);
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) acc[g] = VFMA(VLOAD(qk + (size_t)g * qh + c), kv, acc[g]);
            }
            if (c < d) {
                const vec kv = KV_LOADM(h, kr, c, d - c);
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) acc[g] = VFMA(VLOADM(qk + (size_t)g * qh + c, d - c), kv, acc[g]);
            }
#pragma GCC unroll 8
            for (int g = 0; g < G; g++) S[(size_t)kh * skv + (size_t)g * lds + j] = VHSUM(acc[g]);
        }
    }
}

#define ROWS_SWITCH(fn, h, ...)                                                                        \
    switch (G) {                                                                                       \
    case 1: fn(h, 1, __VA_ARGS__); break;                                                              \
    case 2: fn(h, 2, __VA_ARGS__); break;                                                              \
    case 3: fn(h, 3, __VA_ARGS__); break;                                                              \
    case 4: fn(h, 4, __VA_ARGS__); break;                                                              \
    case 5: fn(h, 5, __VA_ARGS__); break;                                                              \
    case 6: fn(h, 6, __VA_ARGS__); break;                                                              \
    case 7: fn(h, 7, __VA_ARGS__); break;                                                              \
    case 8: fn(h, 8, __VA_ARGS__); break;                                                              \
    default: break;                                                                                    \
    }

static void FN(dot_rows)(int nkv, int G, int n, int d, const float *q, int qh, int qkv, const float *K, int ld, float *S, int lds, int skv) {
    ROWS_SWITCH(FN(dot_rows_g), 0, nkv, n, d, q, qh, qkv, K, ld, S, lds, skv)
}
static void FN(dot_rows_h)(int nkv, int G, int n, int d, const float *q, int qh, int qkv, const uint16_t *K, int ld, float *S, int lds,
                           int skv) {
    ROWS_SWITCH(FN(dot_rows_g), 1, nkv, n, d, q, qh, qkv, K, ld, S, lds, skv)
}

/* Rows j and j+1 (two: half the passes over O) or j alone (two = 0), KV head kh's part. */
static ALWAYS_INLINE void FN(axpy_rows_step)(const int h, const int G, const int two, int j, int d, const float *S, int lds, const void *V,
                                             int ld, float *O) {
    const size_t es = h ? 2 : 4;
    const char *v0 = (const char *)V + (size_t)j * ld * es, *v1 = v0 + (size_t)ld * es;
    vec p0[8], p1[8];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        p0[g] = VSET1(S[(size_t)g * lds + j]);
        if (two) p1[g] = VSET1(S[(size_t)g * lds + j + 1]);
    }
    int c = 0;
    for (; c + VL <= d; c += VL) {
        ATT_PF(v0, c, ld, es);
        if (two) ATT_PF(v1, c, ld, es);
        const vec a = KV_LOAD(h, v0, c), b = two ? KV_LOAD(h, v1, c) : VZERO();
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            vec o = VFMA(p0[g], a, VLOAD(O + (size_t)g * d + c));
            if (two) o = VFMA(p1[g], b, o);
            VSTORE(O + (size_t)g * d + c, o);
        }
    }
    if (c < d) {
        const vec a = KV_LOADM(h, v0, c, d - c), b = two ? KV_LOADM(h, v1, c, d - c) : VZERO();
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            vec o = VFMA(p0[g], a, VLOADM(O + (size_t)g * d + c, d - c));
            if (two) o = VFMA(p1[g], b, o);
            VSTOREM(O + (size_t)g * d + c, o, d - c);
        }
    }
}

static ALWAYS_INLINE void FN(axpy_rows_g)(const int h, const int G, int nkv, int n, int d, const float *S, int lds, int skv, const void *V,
                                          int ld, float *O, int okv) {
    const size_t es = h ? 2 : 4;
    int j = 0;
    for (; j + 1 < n; j += 2)
        for (int kh = 0; kh < nkv; kh++)
            FN(axpy_rows_step)(h, G, 1, j, d, S + (size_t)kh * skv, lds, (const char *)V + (size_t)kh * d * es, ld, O + (size_t)kh * okv);
    if (j < n)
        for (int kh = 0; kh < nkv; kh++)
            FN(axpy_rows_step)(h, G, 0, j, d, S + (size_t)kh * skv, lds, (const char *)V + (size_t)kh * d * es, ld, O + (size_t)kh * okv);
}

static void FN(axpy_rows)(int nkv, int G, int n, int d, const float *S, int lds, int skv, const float *V, int ld, float *O, int okv) {
    ROWS_SWITCH(FN(axpy_rows_g), 0, nkv, n, d, S, lds, skv, V, ld, O, okv)
}
static void FN(axpy_rows_h)(int nkv, int G, int n, int d, const float *S, int lds, int skv, const uint16_t *V, int ld, float *O, int okv) {
    ROWS_SWITCH(FN(axpy_rows_g), 1, nkv, n, d, S, lds, skv, V, ld, O, okv)
}
#undef ROWS_SWITCH
#undef KV_LOAD
#undef KV_LOADM
#undef ATT_PF

/* y[n] = x as IEEE halves, rounded to nearest even; and back */
static void FN(to_f16)(const float *x, uint16_t *y, int n) {
    int i = 0;
    for (; i + VL <= n; i += VL) VSTOREH(y + i, VLOAD(x + i));
    if (i < n) VSTOREHM(y + i, VLOADM(x + i, n - i), n - i);
}
static void FN(from_f16)(const uint16_t *x, float *y, int n) {
    int i = 0;
    for (; i + VL <= n; i += VL) VSTORE(y + i, VLOADH(x + i));
    if (i < n) VSTOREM(y + i, VLOADHM(x + i, n - i), n - i);
}

/* ---------------------------------------------------------------- the table */
const q35_gdn_kernels FN(q35_gdn_kernels) = {
    .name = ISA_NAME,
    .gemm = FN(gemm),
    .vexp = FN(vexp),
    .dot = FN(dot),
    .axpy = FN(axpy),
    .gemm_nt = FN(gemm_nt),
    .dot_rows = FN(dot_rows),
    .axpy_rows = FN(axpy_rows),
    .dot_rows_h = FN(dot_rows_h),
    .axpy_rows_h = FN(axpy_rows_h),
    .to_f16 = FN(to_f16),
    .from_f16 = FN(from_f16),
    .scale = FN(scale),
    .scale_to = FN(scale_to),
    .swiglu = FN(swiglu),
    .silu = FN(silu),
    .rmsnorm = FN(rmsnorm),
    .sigmoid_mul = FN(sigmoid_mul),
    .softmax_row = FN(softmax_row),
    .argmax = FN(argmax),
    .transpose = FN(transpose),
    .gated_rmsnorm = FN(gated_rmsnorm),
    .conv_silu = FN(conv_silu),
    .recur = FN(recur),
    .chunk = FN(chunk),
};
