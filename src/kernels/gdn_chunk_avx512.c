/* AVX-512 instantiation of the Gated DeltaNet / attention kernels (gdn_chunk_impl.h). Uses
 * AVX512F, and AVX512BW/VL for the masked loads and stores of halves (the dispatcher requires
 * BW/VL/DQ). */
#include <immintrin.h>

#include "kernels/gdn_chunk.h"

/* exp(x): Cody-Waite reduction by ln 2, Cephes' degree-6 polynomial (~1 ulp), 2^n by scalef;
 * x < -87.34 gives 0. */
static inline __m512 exp512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.72283f)), lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_mov_ps((__mmask16)~under, _mm512_scalef_ps(p, n));
}

/* 1/x: rcp14 and one Newton step (~2^-27 relative) */
static inline __m512 rcp512(__m512 x) {
    const __m512 r = _mm512_rcp14_ps(x);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(2.0f)));
}

/* dst[c][r] = src[r][c] for one 16 x 16 block: 32-bit, 64-bit, then 128-bit lane interleaves */
static inline void tr16(const float *src, int lds, float *dst, int ldd) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + (size_t)i * lds);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int b = 0; b < 4; b++) { /* r[4b + c]: column 4L + c of rows 4b..4b+3 in lane L */
        r[4 * b] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * b]), _mm512_castps_pd(t[4 * b + 2])));
        r[4 * b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * b]), _mm512_castps_pd(t[4 * b + 2])));
        r[4 * b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * b + 1]), _mm512_castps_pd(t[4 * b + 3])));
        r[4 * b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * b + 1]), _mm512_castps_pd(t[4 * b + 3])));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 x0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), y0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        const __m512 x1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), y1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        _mm512_storeu_ps(dst + (size_t)c * ldd, _mm512_shuffle_f32x4(x0, x1, 0x88));
        _mm512_storeu_ps(dst + (size_t)(8 + c) * ldd, _mm512_shuffle_f32x4(x0, x1, 0xdd));
        _mm512_storeu_ps(dst + (size_t)(4 + c) * ldd, _mm512_shuffle_f32x4(y0, y1, 0x88));
        _mm512_storeu_ps(dst + (size_t)(12 + c) * ldd, _mm512_shuffle_f32x4(y0, y1, 0xdd));
    }
}

#define VL 16
typedef __m512 vec;
#define MASK16(n) ((__mmask16)((1u << (n)) - 1u))
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VLOADM(p, n) _mm512_maskz_loadu_ps(MASK16(n), p)
#define VSTOREM(p, v, n) _mm512_mask_storeu_ps(p, MASK16(n), v)
#define VLOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define VLOADHM(p, n) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(MASK16(n), p))
#define VSTOREH(p, v) _mm256_storeu_si256((__m256i *)(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VSTOREHM(p, v, n) _mm256_mask_storeu_epi16(p, MASK16(n), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VMIN(a, b) _mm512_min_ps(a, b)
#define VRCP(a) rcp512(a)
#define TRANSPOSE_VL(src, lds, dst, ldd) tr16(src, lds, dst, ldd)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VHMAX(v) _mm512_reduce_max_ps(v)
#define VEXP(x) exp512(x)
#define FN(name) name##_avx512
#define ISA_NAME "avx512"
#define GEMM_MR 6
#define GEMM_NV 4
#define RNV 8
#include "kernels/gdn_chunk_impl.h"
