/* NEON (armv8-a) instantiation of the Gated DeltaNet / attention kernels (gdn_chunk_impl.h): 4
 * lanes, 32 vector registers (the product tile is 6 rows x 4 vectors, as on AVX-512). */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels/gdn_chunk.h"

/* exp(x): as exp256 (gdn_chunk_avx2.c): Cody-Waite reduction by ln 2, Cephes' degree-6
 * polynomial, 2^n built in the exponent bits (x clamped so that n is in [-126, 127]); x < -87.34
 * gives 0. */
static inline float32x4_t exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f);
    const uint32x4_t under = vcltq_f32(x, lo);
    x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.0f)), lo);
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    const float32x4_t v = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), under));
}

/* max / min as the scalar reference writes them (a > b ? a : b), NaN included */
static inline float32x4_t max4(float32x4_t a, float32x4_t b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
static inline float32x4_t min4(float32x4_t a, float32x4_t b) { return vbslq_f32(vcltq_f32(a, b), a, b); }

/* dst[c][r] = src[r][c] for one 4 x 4 block */
static inline void tr4(const float *src, int lds, float *dst, int ldd) {
    const float32x4_t r0 = vld1q_f32(src), r1 = vld1q_f32(src + lds), r2 = vld1q_f32(src + 2 * (size_t)lds), r3 = vld1q_f32(src + 3 * (size_t)lds);
    const float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1), t2 = vtrn1q_f32(r2, r3), t3 = vtrn2q_f32(r2, r3);
    vst1q_f32(dst, vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2))));
    vst1q_f32(dst + ldd, vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3))));
    vst1q_f32(dst + 2 * (size_t)ldd, vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2))));
    vst1q_f32(dst + 3 * (size_t)ldd, vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3))));
}

/* the first n < 4 lanes (the others read as 0 / left alone) */
static inline float32x4_t loadm4(const float *p, int n) {
    float b[4] = {0};
    memcpy(b, p, sizeof(float) * (size_t)n);
    return vld1q_f32(b);
}
static inline void storem4(float *p, float32x4_t v, int n) {
    float b[4];
    vst1q_f32(b, v);
    memcpy(p, b, sizeof(float) * (size_t)n);
}
/* IEEE halves as floats, and floats rounded to nearest even as halves */
static inline float32x4_t loadh4(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline void storeh4(uint16_t *p, float32x4_t v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
static inline float32x4_t loadhm4(const uint16_t *p, int n) {
    uint16_t b[4] = {0};
    memcpy(b, p, sizeof(uint16_t) * (size_t)n);
    return loadh4(b);
}
static inline void storehm4(uint16_t *p, float32x4_t v, int n) {
    uint16_t b[4];
    storeh4(b, v);
    memcpy(p, b, sizeof(uint16_t) * (size_t)n);
}

#define VL 4
typedef float32x4_t vec;
#define VZERO() vdupq_n_f32(0.0f)
#define VSET1(x) vdupq_n_f32(x)
#define VLOAD(p) vld1q_f32(p)
#define VSTORE(p, v) vst1q_f32(p, v)
#define VLOADM(p, n) loadm4(p, n)
#define VSTOREM(p, v, n) storem4(p, v, n)
#define VLOADH(p) loadh4(p)
#define VLOADHM(p, n) loadhm4(p, n)
#define VSTOREH(p, v) storeh4(p, v)
#define VSTOREHM(p, v, n) storehm4(p, v, n)
#define VFMA(a, b, c) vfmaq_f32(c, a, b)
#define VMUL(a, b) vmulq_f32(a, b)
#define VADD(a, b) vaddq_f32(a, b)
#define VSUB(a, b) vsubq_f32(a, b)
#define VDIV(a, b) vdivq_f32(a, b)
#define VMAX(a, b) max4(a, b)
#define VMIN(a, b) min4(a, b)
#define VRCP(a) vdivq_f32(vdupq_n_f32(1.0f), a)
#define VHMAX(v) vmaxvq_f32(v)
#define TRANSPOSE_VL(src, lds, dst, ldd) tr4(src, lds, dst, ldd)
#define VHSUM(v) vaddvq_f32(v)
#define VEXP(x) exp4(x)
#define FN(name) name##_neon
#define ISA_NAME "neon"
#define GEMM_MR 6
#define GEMM_NV 4
#define RNV 8
#include "kernels/gdn_chunk_impl.h"
