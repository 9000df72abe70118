/* AVX2 + FMA (+ F16C) instantiation of the Gated DeltaNet / attention kernels (gdn_chunk_impl.h). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/gdn_chunk.h"

static const int32_t mask_tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline __m256i mask8(int n) { return _mm256_loadu_si256((const __m256i *)(mask_tbl + 8 - n)); }

/* exp(x): as exp512 (gdn_chunk_avx512.c), 2^n built in the exponent bits (x clamped so that
 * n is in [-126, 127]); x < -87.34 gives 0. */
static inline __m256 exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax256(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 1/x: rcp (12 bits) and one Newton step (~2^-23 relative) */
static inline __m256 rcp256(__m256 x) {
    const __m256 r = _mm256_rcp_ps(x);
    return _mm256_mul_ps(r, _mm256_fnmadd_ps(x, r, _mm256_set1_ps(2.0f)));
}

/* dst[c][r] = src[r][c] for one 8 x 8 block */
static inline void tr8(const float *src, int lds, float *dst, int ldd) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (size_t)i * lds);
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int b = 0; b < 2; b++) {
        u[4 * b] = _mm256_shuffle_ps(t[4 * b], t[4 * b + 2], 0x44);
        u[4 * b + 1] = _mm256_shuffle_ps(t[4 * b], t[4 * b + 2], 0xee);
        u[4 * b + 2] = _mm256_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0x44);
        u[4 * b + 3] = _mm256_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(dst + (size_t)c * ldd, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
        _mm256_storeu_ps(dst + (size_t)(4 + c) * ldd, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
}

/* n < 8 halves at p as floats (the rest 0); and the first n lanes of v stored as halves at p */
static inline __m256 loadh_n(const uint16_t *p, int n) {
    uint16_t b[8] = {0};
    memcpy(b, p, sizeof(uint16_t) * (size_t)n);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b));
}
static inline void storeh_n(uint16_t *p, __m256 v, int n) {
    uint16_t b[8];
    _mm_storeu_si128((__m128i *)b, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    memcpy(p, b, sizeof(uint16_t) * (size_t)n);
}

#define VL 8
typedef __m256 vec;
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VLOADM(p, n) _mm256_maskload_ps(p, mask8(n))
#define VSTOREM(p, v, n) _mm256_maskstore_ps(p, mask8(n), v)
#define VLOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define VLOADHM(p, n) loadh_n(p, n)
#define VSTOREH(p, v) _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VSTOREHM(p, v, n) storeh_n(p, v, n)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VMIN(a, b) _mm256_min_ps(a, b)
#define VRCP(a) rcp256(a)
#define VHMAX(v) hmax256(v)
#define TRANSPOSE_VL(src, lds, dst, ldd) tr8(src, lds, dst, ldd)
#define VHSUM(v) hsum256(v)
#define VEXP(x) exp256(x)
#define FN(name) name##_avx2
#define ISA_NAME "avx2"
#define GEMM_MR 6
#define GEMM_NV 2
#define RNV 4
#include "kernels/gdn_chunk_impl.h"
