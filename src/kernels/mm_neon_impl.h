/* Body of the NEON kernels, included by mm_neon.c (DOTPROD 0: armv8-a, the products of bytes
 * through smull + pairwise adds) and mm_dot_neon.c (DOTPROD 1: armv8.2-a sdot). Integer formats
 * read the R16 layout: a 128-bit quarter of a 64-byte chunk holds 4 quants of 4 rows, and a dot by
 * lane multiplies it by 4 activation bytes; a tile is 4 rows x up to 4 tokens. Integer sums are
 * exact either way and the float steps are ref.c's (fused multiply-add, same order), so
 * integer-format results are bitwise equal to the scalar reference. Q8_0 codes are turned back
 * into signed bytes (xor 0x80), so its activation offset is 0. Float formats, activation
 * quantization and the Q4R rotation need no dot product: they are built once, in mm_neon.c. */
#include <arm_neon.h>
#include <string.h>

#include "kernels/mm.h"

#ifndef DOTPROD
#error "define DOTPROD before including mm_neon_impl.h"
#endif
#if DOTPROD
#define SUFFIX(x) x##_dot
#else
#define SUFFIX(x) x##_plain
#endif

#define INLINE static inline __attribute__((always_inline))
#include "kernels/unroll.h"
#define R16_NPART 4 /* quarters of 4 rows */
#define R16_VEC float32x4_t
#define R16_ZERO() vdupq_n_f32(0.0f)
#define R16_STORE(y, v, rbase, r0, r1) store4(y, v, rbase, r0, r1)
#define R16_ALIGN 16
#include "kernels/r16_loops.h" /* U_DRIVER, K16_WALK; U_T and U_TILES below */

static int64_t sbytes16(int64_t nb) { return (nb * 32 + 63) & ~(int64_t)63; }

INLINE float32x4_t h4(const uint8_t *p) { /* 4 halves -> 4 floats */
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}
INLINE int32x4_t u8x4_s32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v)))));
}
INLINE int32x4_t s8x4_s32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vcreate_s8(v))));
}

INLINE void store4(float *y, float32x4_t v, int64_t rbase, int64_t r0, int64_t r1) {
    if (rbase >= r0 && rbase + 4 <= r1) {
        vst1q_f32(y + rbase, v);
        return;
    }
    float t[4];
    vst1q_f32(t, v);
    for (int i = 0; i < 4; i++)
        if (rbase + i >= r0 && rbase + i < r1) y[rbase + i] = t[i];
}

/* s += w[c] . (4 activation bytes c of a) for c = 0..3: lane i of s gains the 4 products of the
 * bytes 4i..4i+3 of w[c] (4 quants of row i) with bytes 4c..4c+3 of a (lanes must be constants). */
#if DOTPROD
#define DOT1(s, w, a, c) s = vdotq_laneq_s32(s, w, a, c)
#else
/* Without sdot: 16 byte products in two smull halves (rows 0-1, rows 2-3), pairs summed to 16
 * bits (each pair at most 2 x 128 x 127 = 32512 in magnitude, so exact), then the pairs of pairs
 * added into the 32-bit lanes. */
#define DOT1(s, w, a, c)                                                                                  \
    do {                                                                                                  \
        const int8x16_t bc_ = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(a), c));          \
        const int16x8_t p_ = vpaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(bc_)), vmull_high_s8(w, bc_)); \
        s = vpadalq_s16(s, p_);                                                                           \
    } while (0)
#endif
#define DOT4(s, w0, w1, w2, w3, a) \
    do {                           \
        DOT1(s, w0, a, 0);         \
        DOT1(s, w1, a, 1);         \
        DOT1(s, w2, a, 2);         \
        DOT1(s, w3, a, 3);         \
    } while (0)

/* The 4 chunks of packed nibbles at cq + 64 c: low nibbles lo[c], high nibbles hi[c]. */
INLINE void nibbles_ld4(const uint8_t *cq, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t m4 = vdupq_n_u8(15);
    UNROLL
    for (int c = 0; c < 4; c++) {
        const uint8x16_t v = vld1q_u8(cq + 64 * c);
        lo[c] = vreinterpretq_s8_u8(vandq_u8(v, m4));
        hi[c] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
}

/* ---- Q4_0 / Q4R ---- */
INLINE void SUFFIX(q4_tile)(const uint8_t *grp, int64_t nb, int qt, const q35_act *a, int t0, const int T, float *Y, int64_t rows, int64_t rbase,
                    int64_t r0, int64_t r1) {
    float32x4_t acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const int64_t pfs = q35_pf_step(sbytes16(nb) + 256 * nb, nb);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q4_0);
    const size_t abase = q35_act_at(a, 0, t0), astep = (size_t)a->tt; /* t0's tile (mm.h) */
    for (int64_t b = 0; b < nb; b++) {
        if (T == 1 && !qt) q35_pf(pd, grp + b * pfs, pfs); /* later quarters read the group from cache */
        const float32x4_t dw = h4(q35_r16_scales(grp, b, 256) + 8 * qt);
        const uint8_t *cq = q35_r16_chunks(grp, nb, b, 256) + 16 * qt;
        int8x16_t lo[4], hi[4];
        nibbles_ld4(cq, lo, hi);
        const size_t base = abase + (size_t)b * astep;
        const int8_t *aq = a->q + base * 32;
        UNROLL
        for (int j = 0; j < T; j++) {
            const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
            int32x4_t s = vdupq_n_s32(a->s[base + j]);
            DOT4(s, lo[0], lo[1], lo[2], lo[3], a0);
            DOT4(s, hi[0], hi[1], hi[2], hi[3], a1);
            const float32x4_t f = vmulq_f32(dw, vdupq_n_f32(a->d[base + j]));
            acc[j] = vfmaq_f32(acc[j], f, vcvtq_f32_s32(s));
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* ---- Q8_0 ---- */
INLINE void SUFFIX(q8_tile)(const uint8_t *grp, int64_t nb, int qt, const q35_act *a, int t0, const int T, float *Y, int64_t rows, int64_t rbase,
                    int64_t r0, int64_t r1) {
    float32x4_t acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const uint8x16_t x80 = vdupq_n_u8(0x80);
    const int64_t pfs = q35_pf_step(sbytes16(nb) + 512 * nb, nb);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q8_0);
    const size_t abase = q35_act_at(a, 0, t0), astep = (size_t)a->tt; /* t0's tile (mm.h) */
    for (int64_t b = 0; b < nb; b++) {
        if (T == 1 && !qt) q35_pf(pd, grp + b * pfs, pfs);
        const float32x4_t dw = h4(q35_r16_scales(grp, b, 512) + 8 * qt);
        const uint8_t *cq = q35_r16_chunks(grp, nb, b, 512) + 16 * qt;
        int8x16_t w[8];
        UNROLL
        for (int c = 0; c < 8; c++) w[c] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(cq + 64 * c), x80));
        const size_t base = abase + (size_t)b * astep;
        const int8_t *aq = a->q + base * 32;
        UNROLL
        for (int j = 0; j < T; j++) {
            const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
            int32x4_t s = vdupq_n_s32(a->s[base + j]);
            DOT4(s, w[0], w[1], w[2], w[3], a0);
            DOT4(s, w[4], w[5], w[6], w[7], a1);
            const float32x4_t f = vmulq_f32(dw, vdupq_n_f32(a->d[base + j]));
            acc[j] = vfmaq_f32(acc[j], f, vcvtq_f32_s32(s));
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* ---- Q4_K ---- */
/* The min term in integers, as the x86 kernels: a token's 8 block sums S of a super-block as int16
 * lanes (sp, q35_act: block pairs at sp[0], sp[2 step], sp[4 step], sp[6 step], each holding S_2q
 * and S_2q+1 as its low and high halves, so the 4 int32 read as 8 int16 are S_0..S_7), and
 * ma = sum_k m[k] S_k for 4 rows (m: the mins, k at pm + 16 k) by 8 widening multiply-adds by
 * lane. Exact (below 2^22), so it equals the reference's float sum (ref.c). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "q4k_sums8 reads an int32's low half as the first int16 lane"
#endif
INLINE int16x8_t q4k_sums8(const int32_t *sp, size_t step) {
    const int32_t v[4] = {sp[0], sp[2 * step], sp[4 * step], sp[6 * step]};
    return vreinterpretq_s16_s32(vld1q_s32(v));
}
INLINE int16x4_t q4k_min4(const uint8_t *pm) {
    uint32_t v;
    memcpy(&v, pm, 4);
    return vreinterpret_s16_u16(vget_low_u16(vmovl_u8(vcreate_u8(v))));
}
INLINE float32x4_t q4k_mins(const int16x4_t m[8], int16x8_t S) {
    int32x4_t mi = vmull_laneq_s16(m[0], S, 0);
    mi = vmlal_laneq_s16(mi, m[1], S, 1);
    mi = vmlal_laneq_s16(mi, m[2], S, 2);
    mi = vmlal_laneq_s16(mi, m[3], S, 3);
    mi = vmlal_laneq_s16(mi, m[4], S, 4);
    mi = vmlal_laneq_s16(mi, m[5], S, 5);
    mi = vmlal_laneq_s16(mi, m[6], S, 6);
    mi = vmlal_laneq_s16(mi, m[7], S, 7);
    return vcvtq_f32_s32(mi);
}
INLINE void SUFFIX(q4k_tile)(const uint8_t *grp, int64_t nsb, int qt, const q35_act *a, int t0, const int T, float *Y, int64_t rows, int64_t rbase,
                     int64_t r0, int64_t r1) {
    float32x4_t acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const int64_t pfs = q35_pf_step(2368, 8);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q4_K);
    const size_t abase = q35_act_at(a, 0, t0), astep = (size_t)a->tt; /* t0's tile (mm.h) */
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = grp + 2368 * sb;
        const float32x4_t d = h4(p + 8 * qt), dmin = h4(p + 32 + 8 * qt);
        float32x4_t sa[4]; /* the reference's super-block sums (ref.c) */
        UNROLL
        for (int j = 0; j < T; j++) sa[j] = vdupq_n_f32(0.0f);
        for (int s = 0; s < 8; s++) {
            const int32x4_t sc = u8x4_s32(p + 64 + 16 * s + 4 * qt);
            const uint8_t *cq = p + 320 + 256 * s + 16 * qt;
            if (T == 1 && !qt) q35_pf(pd, grp + (8 * sb + s) * pfs, pfs);
            int8x16_t lo[4], hi[4];
            nibbles_ld4(cq, lo, hi);
            const size_t base = abase + (size_t)(8 * sb + s) * astep;
            const int8_t *aq = a->q + base * 32;
            UNROLL
            for (int j = 0; j < T; j++) {
                const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
                int32x4_t dot = vdupq_n_s32(0);
                DOT4(dot, lo[0], lo[1], lo[2], lo[3], a0);
                DOT4(dot, hi[0], hi[1], hi[2], hi[3], a1);
                sa[j] = vaddq_f32(sa[j], vcvtq_f32_s32(vmulq_s32(dot, sc))); /* sc x dot < 2^22: exact, as fma(sc, dot, sa) */
            }
        }
        int16x4_t m[8];
        UNROLL
        for (int k = 0; k < 8; k++) m[k] = q4k_min4(p + 192 + 16 * k + 4 * qt);
        const size_t a8 = abase + (size_t)(8 * sb) * astep;
        const float *da = a->d + a8; /* the super-block's scale per token */
        UNROLL
        for (int j = 0; j < T; j++)
            acc[j] = vfmaq_f32(acc[j], vdupq_n_f32(da[j]), vfmsq_f32(vmulq_f32(d, sa[j]), dmin, q4k_mins(m, q4k_sums8(a->sp + a8 + j, astep))));
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* ---- Q6_K ---- */
/* One sub-block's quarter: low bits L (chunk c at L + 64 c), high bits H: codes of values 4c..4c+3
 * (lo[c]) and 16+4c.. (hi[c]). */
INLINE void SUFFIX(q6k_codes)(const uint8_t *L, const uint8_t *H, uint8x16_t m4, uint8x16_t m30, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t h0 = vld1q_u8(H), h1 = vld1q_u8(H + 64);
    const uint8x16_t t0l = vshlq_n_u8(h0, 4), t1l = vshlq_n_u8(h0, 2), t3l = vshrq_n_u8(h0, 2);
    const uint8x16_t t0h = vshlq_n_u8(h1, 4), t1h = vshlq_n_u8(h1, 2), t3h = vshrq_n_u8(h1, 2);
    const uint8x16_t tl[4] = {t0l, t1l, h0, t3l}, th[4] = {t0h, t1h, h1, t3h};
    UNROLL
    for (int c = 0; c < 4; c++) {
        const uint8x16_t v = vld1q_u8(L + 64 * c);
        lo[c] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, m4), vandq_u8(tl[c], m30)));
        hi[c] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(th[c], m30)));
    }
}
INLINE void SUFFIX(q6k_tile)(const uint8_t *grp, int64_t nsb, int qt, const q35_act *a, int t0, const int T, float *Y, int64_t rows, int64_t rbase,
                     int64_t r0, int64_t r1) {
    float32x4_t acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
    const int64_t pfs = q35_pf_step(3360, 8);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q6_K);
    const size_t abase = q35_act_at(a, 0, t0), astep = (size_t)a->tt; /* t0's tile (mm.h) */
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = grp + 3360 * sb;
        const float32x4_t d = h4(p + 8 * qt);
        for (int s = 0; s < 8; s++) {
            const int32x4_t sc0 = s8x4_s32(p + 32 + 16 * (2 * s) + 4 * qt), sc1 = s8x4_s32(p + 32 + 16 * (2 * s + 1) + 4 * qt);
            const uint8_t *L = p + 288 + 384 * s + 16 * qt, *H = p + 288 + 384 * s + 256 + 16 * qt;
            if (T == 1 && !qt) q35_pf(pd, grp + (8 * sb + s) * pfs, pfs);
            int8x16_t lo[4], hi[4];
            SUFFIX(q6k_codes)(L, H, m4, m30, lo, hi);
            const size_t base = abase + (size_t)(8 * sb + s) * astep;
            const int8_t *aq = a->q + base * 32;
            UNROLL
            for (int j = 0; j < T; j++) {
                const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
                int32x4_t s0 = vdupq_n_s32(-32 * a->h[2 * (base + j)]), s1 = vdupq_n_s32(-32 * a->h[2 * (base + j) + 1]);
                DOT4(s0, lo[0], lo[1], lo[2], lo[3], a0);
                DOT4(s1, hi[0], hi[1], hi[2], hi[3], a1);
                const int32x4_t isum = vmlaq_s32(vmulq_s32(s0, sc0), s1, sc1);
                const float32x4_t f = vmulq_f32(d, vdupq_n_f32(a->d[base + j]));
                acc[j] = vfmaq_f32(acc[j], f, vcvtq_f32_s32(isum));
            }
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* ---- one token: whole groups ---- */
/* One token over whole 16-row groups, the 4 quarters of each block together: a block's activation
 * bytes, sum and scale are loaded once, not once per quarter, and the group is read in one pass
 * (the quarter tiles read it four times, the later ones from cache). Each run of 32 blocks is walked
 * by pointer and NL lines prefetched per block, as the x86 walks (docs/speed.md "Lean single-token
 * pairs"). The integer sums and float steps are the tiles', so the bits are. */
INLINE void SUFFIX(q4_core16)(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t as, const float ad, float32x4_t *acc) {
    const int8x16_t a0 = vld1q_s8(aq), a1 = vld1q_s8(aq + 16);
    const float32x4_t vad = vdupq_n_f32(ad);
    UNROLL
    for (int q = 0; q < 4; q++) {
        int8x16_t lo[4], hi[4];
        nibbles_ld4(cq + 16 * q, lo, hi);
        int32x4_t s = vdupq_n_s32(as);
        DOT4(s, lo[0], lo[1], lo[2], lo[3], a0);
        DOT4(s, hi[0], hi[1], hi[2], hi[3], a1);
        acc[q] = vfmaq_f32(acc[q], vmulq_f32(h4(sc + 8 * q), vad), vcvtq_f32_s32(s));
    }
}
INLINE void SUFFIX(q8_core16)(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t as, const float ad, float32x4_t *acc) {
    const uint8x16_t x80 = vdupq_n_u8(0x80);
    const int8x16_t a0 = vld1q_s8(aq), a1 = vld1q_s8(aq + 16);
    const float32x4_t vad = vdupq_n_f32(ad);
    UNROLL
    for (int q = 0; q < 4; q++) {
        int8x16_t w[8];
        UNROLL
        for (int c = 0; c < 8; c++) w[c] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(cq + 64 * c + 16 * q), x80));
        int32x4_t s = vdupq_n_s32(as);
        DOT4(s, w[0], w[1], w[2], w[3], a0);
        DOT4(s, w[4], w[5], w[6], w[7], a1);
        acc[q] = vfmaq_f32(acc[q], vmulq_f32(h4(sc + 8 * q), vad), vcvtq_f32_s32(s));
    }
}
#define G16_WALK(name, core, QB, NL, DT)                                                                       \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        _Static_assert(NL * 64 >= QB + 33, "q35_pf_lines must cover a step");                                  \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        const int64_t nb = j->cols / 32, pfs = q35_pf_step(sbytes16(nb) + QB * nb, nb);                        \
        const q35_pf_dist pd = q35_pf_for(DT);                                                                 \
        for (int64_t g = r0 / 16; g * 16 < r1; g++) {                                                          \
            const uint8_t *grp = j->w + (size_t)g * gb, *pf = grp;                                             \
            float32x4_t acc[4];                                                                                \
            UNROLL                                                                                             \
            for (int q = 0; q < 4; q++) acc[q] = vdupq_n_f32(0.0f);                                            \
            const int8_t *aq = j->a.q; /* [nb][32]: one token */                                               \
            const int32_t *as = j->a.s;                                                                        \
            const float *ad = j->a.d;                                                                          \
            for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {                                                 \
                const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, QB);                    \
                const uint8_t *sp = grp + off, *cp = grp + off + q35_r16_run_scale_bytes(len);                 \
                for (int64_t i = 0; i < len; i++, aq += 32, as++, ad++) {                                      \
                    q35_pf_lines(pd, pf, NL);                                                                  \
                    pf += pfs;                                                                                 \
                    core(sp + 32 * i, cp + QB * i, aq, *as, *ad, acc);                                         \
                }                                                                                              \
            }                                                                                                  \
            UNROLL                                                                                             \
            for (int q = 0; q < 4; q++) store4(j->Y, acc[q], 16 * g + 4 * q, r0, r1);                          \
        }                                                                                                      \
    }
G16_WALK(SUFFIX(q4_one16), SUFFIX(q4_core16), 256, 5, Q35_DT_Q4_0)
G16_WALK(SUFFIX(q8_one16), SUFFIX(q8_core16), 512, 9, Q35_DT_Q8_0)

/* One super-block p of a K-format group (16 rows), one token: aq, ad (and sp / h) its 8
 * sub-blocks' activations; pf the sub-blocks' prefetch base, pfs bytes apart. */
INLINE void SUFFIX(q4k_sb16)(const uint8_t *p, const int8_t *aq, const float *ad, const int32_t *sp, float32x4_t *acc, q35_pf_dist pd,
                             const uint8_t *pf, int64_t pfs) {
    float32x4_t sa[4], ma[4]; /* the reference's super-block sums (ref.c) */
    UNROLL
    for (int q = 0; q < 4; q++) sa[q] = vdupq_n_f32(0.0f);
    for (int s = 0; s < 8; s++) {
        q35_pf_lines(pd, pf + s * pfs, 5); /* 320 >= pfs = 296 */
        const int8x16_t a0 = vld1q_s8(aq + 32 * s), a1 = vld1q_s8(aq + 32 * s + 16);
        const uint8_t *cq = p + 320 + 256 * s;
        UNROLL
        for (int q = 0; q < 4; q++) {
            int8x16_t lo[4], hi[4];
            nibbles_ld4(cq + 16 * q, lo, hi);
            int32x4_t dot = vdupq_n_s32(0);
            DOT4(dot, lo[0], lo[1], lo[2], lo[3], a0);
            DOT4(dot, hi[0], hi[1], hi[2], hi[3], a1);
            sa[q] = vaddq_f32(sa[q], vcvtq_f32_s32(vmulq_s32(dot, u8x4_s32(p + 64 + 16 * s + 4 * q))));
        }
    }
    const int16x8_t S = q4k_sums8(sp, 1);
    UNROLL
    for (int q = 0; q < 4; q++) {
        int16x4_t m[8];
        UNROLL
        for (int k = 0; k < 8; k++) m[k] = q4k_min4(p + 192 + 16 * k + 4 * q);
        ma[q] = q4k_mins(m, S);
    }
    const float32x4_t vad = vdupq_n_f32(ad[0]); /* the super-block's scale */
    UNROLL
    for (int q = 0; q < 4; q++) acc[q] = vfmaq_f32(acc[q], vad, vfmsq_f32(vmulq_f32(h4(p + 8 * q), sa[q]), h4(p + 32 + 8 * q), ma[q]));
}
INLINE void SUFFIX(q6k_sb16)(const uint8_t *p, const int8_t *aq, const float *ad, const int16_t *ah, float32x4_t *acc, q35_pf_dist pd,
                             const uint8_t *pf, int64_t pfs) {
    const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
    for (int s = 0; s < 8; s++) {
        q35_pf_lines(pd, pf + s * pfs, 7); /* 448 >= pfs = 420 */
        const int8x16_t a0 = vld1q_s8(aq + 32 * s), a1 = vld1q_s8(aq + 32 * s + 16);
        const float32x4_t vad = vdupq_n_f32(ad[s]);
        const int32x4_t h0 = vdupq_n_s32(-32 * ah[2 * s]), h1 = vdupq_n_s32(-32 * ah[2 * s + 1]);
        UNROLL
        for (int q = 0; q < 4; q++) {
            const uint8_t *L = p + 288 + 384 * s + 16 * q;
            int8x16_t lo[4], hi[4];
            SUFFIX(q6k_codes)(L, L + 256, m4, m30, lo, hi);
            int32x4_t s0 = h0, s1 = h1;
            DOT4(s0, lo[0], lo[1], lo[2], lo[3], a0);
            DOT4(s1, hi[0], hi[1], hi[2], hi[3], a1);
            const int32x4_t sc0 = s8x4_s32(p + 32 + 16 * (2 * s) + 4 * q), sc1 = s8x4_s32(p + 32 + 16 * (2 * s + 1) + 4 * q);
            const int32x4_t isum = vmlaq_s32(vmulq_s32(s0, sc0), s1, sc1);
            acc[q] = vfmaq_f32(acc[q], vmulq_f32(h4(p + 8 * q), vad), vcvtq_f32_s32(isum));
        }
    }
}
K16_WALK(SUFFIX(q4k_one16), 2368, Q35_DT_Q4_K,
         SUFFIX(q4k_sb16)(grp + 2368 * sb, j->a.q + 256 * sb, j->a.d + 8 * sb, j->a.sp + 8 * sb, acc, pd, grp + 8 * sb * pfs, pfs))
K16_WALK(SUFFIX(q6k_one16), 3360, Q35_DT_Q6_K,
         SUFFIX(q6k_sb16)(grp + 3360 * sb, j->a.q + 256 * sb, j->a.d + 8 * sb, j->a.h + 16 * sb, acc, pd, grp + 8 * sb * pfs, pfs))

/* Quarters of groups (4 rows) in turn, token tiles of up to 4, the weights made ready in each tile;
 * one token through one (whole groups). */
#define R4_DRIVER(name, tile, one, NB)                                                                         \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        if (j->n == 1) {                                                                                       \
            one(j, r0, r1);                                                                                    \
            return;                                                                                            \
        }                                                                                                      \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        const int64_t nb = NB;                                                                                 \
        for (int64_t h = r0 / 4; h * 4 < r1; h++) {                                                            \
            const uint8_t *grp = j->w + (size_t)(h / 4) * gb;                                                  \
            const int qt = (int)(h & 3);                                                                       \
            for (int t0 = 0; t0 < j->n; t0 += 4) TILES4(j->n - t0, tile, (grp, nb, qt, &j->a, t0), j->Y, j->rows, 4 * h, r0, r1); \
        }                                                                                                      \
    }
R4_DRIVER(SUFFIX(mm_q4_r16_dec), SUFFIX(q4_tile), SUFFIX(q4_one16), j->cols / 32)
R4_DRIVER(SUFFIX(mm_q8_r16_dec), SUFFIX(q8_tile), SUFFIX(q8_one16), j->cols / 32)
R4_DRIVER(SUFFIX(mm_q4k_r16_dec), SUFFIX(q4k_tile), SUFFIX(q4k_one16), j->cols / 256)
R4_DRIVER(SUFFIX(mm_q6k_r16_dec), SUFFIX(q6k_tile), SUFFIX(q6k_one16), j->cols / 256)

/* Prompts: each quarter group's weights made ready once into a stack buffer, not again for every
 * token tile (U_DRIVER, r16_loops.h, as AVX2): Q4_0/Q4R's and Q4_K's nibbles masked apart, Q6_K's
 * codes put together, Q8_0's codes made signed. Block-32 formats: a block is 144 bytes, its 8
 * vectors of 16 codes (Q4: the 4 chunks' low nibbles, then their high ones; Q8_0: the 8 chunks)
 * then the 4 rows' scales as floats; K formats: 128 bytes per sub-block, the codes alone. */
#ifndef U_MIN_N
#define U_MIN_N 8
#endif
#if DOTPROD
#define U_T 8
#define U_TILES TILES8
#else
#define U_T 4
#define U_TILES TILES4
#endif
#define U_TT 8 /* the table's act_tile (mm.h; r16_loops.h): U_MIN_N >= U_TT */

/* The block-32 runs of a quarter group, by pointer: chunk(cq, u) makes one block's 128 code bytes
 * (chunk c at cq + 64 c) at u. */
#define B32_UNPACK(name, QB, chunk)                                                                            \
    static void name(const uint8_t *grp, int64_t nb, int qt, uint8_t *u) {                                     \
        for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {                                                     \
            const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, QB);                        \
            const uint8_t *sp = grp + off + 8 * qt, *cp = grp + off + q35_r16_run_scale_bytes(len) + 16 * qt;  \
            for (int64_t i = 0; i < len; i++, u += 144) {                                                      \
                chunk(cp + QB * i, u);                                                                         \
                vst1q_f32((float *)(void *)(u + 128), h4(sp + 32 * i));                                        \
            }                                                                                                  \
        }                                                                                                      \
    }
/* 4 chunks of packed nibbles (chunk c at cq + 64 c): low nibbles at u + 16 c, high at u + 64 + 16 c. */
INLINE void nibbles4(const uint8_t *cq, uint8_t *u) {
    int8x16_t lo[4], hi[4];
    nibbles_ld4(cq, lo, hi);
    UNROLL
    for (int c = 0; c < 4; c++) vst1q_s8((int8_t *)u + 16 * c, lo[c]), vst1q_s8((int8_t *)u + 64 + 16 * c, hi[c]);
}
INLINE void q8_signed8(const uint8_t *cq, uint8_t *u) {
    UNROLL
    for (int c = 0; c < 8; c++) vst1q_u8(u + 16 * c, veorq_u8(vld1q_u8(cq + 64 * c), vdupq_n_u8(0x80)));
}
B32_UNPACK(SUFFIX(q4_unpack4), 256, nibbles4)
B32_UNPACK(SUFFIX(q8_unpack4), 512, q8_signed8)
static void SUFFIX(q4k_unpack4)(const uint8_t *grp, int64_t nsb, int qt, uint8_t *u) {
    for (int64_t k = 0; k < 8 * nsb; k++, u += 128) nibbles4(grp + 2368 * (k / 8) + 320 + 256 * (k % 8) + 16 * qt, u);
}
static void SUFFIX(q6k_unpack4)(const uint8_t *grp, int64_t nsb, int qt, uint8_t *u) {
    const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
    for (int64_t k = 0; k < 8 * nsb; k++, u += 128) {
        const uint8_t *L = grp + 3360 * (k / 8) + 288 + 384 * (k % 8) + 16 * qt;
        int8x16_t lo[4], hi[4];
        SUFFIX(q6k_codes)(L, L + 256, m4, m30, lo, hi);
        UNROLL
        for (int c = 0; c < 4; c++) vst1q_s8((int8_t *)u + 16 * c, lo[c]), vst1q_s8((int8_t *)u + 64 + 16 * c, hi[c]);
    }
}

/* T tokens from t0 over the nb unpacked blocks at u (Q4_0/Q4R and Q8_0 alike: codes 0..3 meet the
 * activation bytes 0..15, codes 4..7 the bytes 16..31). */
INLINE void SUFFIX(b32_tile_u)(const uint8_t *grp, const uint8_t *u, int64_t nb, int qt, const q35_act *a, int t0, const int T, float *Y,
                               int64_t rows, int64_t rbase, int64_t r0, int64_t r1) {
    (void)grp, (void)qt;
    float32x4_t acc[U_T];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const size_t an = U_TT, abase = q35_act_in(a->nb, U_TT, 0, t0);
    const int8_t *aq = a->q + 32 * abase; /* t0's tile: [nb][U_TT][32] */
    const int32_t *as = a->s + abase;
    const float *ad = a->d + abase;
    for (int64_t b = 0; b < nb; b++, u += 144, aq += 32 * an, as += an, ad += an) {
        const float32x4_t dw = vld1q_f32((const float *)(const void *)(u + 128));
        int8x16_t w[8];
        UNROLL
        for (int c = 0; c < 8; c++) w[c] = vld1q_s8((const int8_t *)u + 16 * c);
        UNROLL
        for (int j = 0; j < T; j++) {
            const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
            int32x4_t s = vdupq_n_s32(as[j]);
            DOT4(s, w[0], w[1], w[2], w[3], a0);
            DOT4(s, w[4], w[5], w[6], w[7], a1);
            const float32x4_t f = vmulq_f32(dw, vdupq_n_f32(ad[j]));
            acc[j] = vfmaq_f32(acc[j], f, vcvtq_f32_s32(s));
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* T tokens from t0 over the nsb super-blocks of a quarter group, their codes unpacked at u
 * (q4k_unpack4), the rest read from grp; tokens' activations walked by pointer. The min term comes
 * after the sub-blocks, as in mm_avx2_impl.h: fewer registers live in the loop. */
INLINE void SUFFIX(q4k_tile_u)(const uint8_t *grp, const uint8_t *u, int64_t nsb, int qt, const q35_act *a, int t0, const int T, float *Y,
                               int64_t rows, int64_t rbase, int64_t r0, int64_t r1) {
    float32x4_t acc[U_T];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const size_t an = U_TT, abase = q35_act_in(a->nb, U_TT, 0, t0);
    const int8_t *aq = a->q + 32 * abase; /* t0's tile: [8 nsb][U_TT][32] */
    const float *ad = a->d + abase;
    const int32_t *sp = a->sp + abase;
    for (int64_t sb = 0; sb < nsb; sb++, sp += 8 * an) {
        const uint8_t *p = grp + 2368 * sb;
        const float *da = ad; /* block 8 sb: the super-block's scale per token */
        float32x4_t sa[U_T]; /* the reference's super-block sums (ref.c) */
        UNROLL
        for (int j = 0; j < T; j++) sa[j] = vdupq_n_f32(0.0f);
        for (int s = 0; s < 8; s++, u += 128, aq += 32 * an, ad += an) {
            const int32x4_t sc = u8x4_s32(p + 64 + 16 * s + 4 * qt);
            int8x16_t lo[4], hi[4];
            UNROLL
            for (int c = 0; c < 4; c++) lo[c] = vld1q_s8((const int8_t *)u + 16 * c), hi[c] = vld1q_s8((const int8_t *)u + 64 + 16 * c);
            UNROLL
            for (int j = 0; j < T; j++) {
                const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
                int32x4_t dot = vdupq_n_s32(0);
                DOT4(dot, lo[0], lo[1], lo[2], lo[3], a0);
                DOT4(dot, hi[0], hi[1], hi[2], hi[3], a1);
                sa[j] = vaddq_f32(sa[j], vcvtq_f32_s32(vmulq_s32(dot, sc)));
            }
        }
        float32x4_t ma[U_T];
        int16x4_t m[8];
        UNROLL
        for (int k = 0; k < 8; k++) m[k] = q4k_min4(p + 192 + 16 * k + 4 * qt);
        UNROLL
        for (int j = 0; j < T; j++) ma[j] = q4k_mins(m, q4k_sums8(sp + j, an));
        const float32x4_t d = h4(p + 8 * qt), dmin = h4(p + 32 + 8 * qt);
        UNROLL
        for (int j = 0; j < T; j++) acc[j] = vfmaq_f32(acc[j], vdupq_n_f32(da[j]), vfmsq_f32(vmulq_f32(d, sa[j]), dmin, ma[j]));
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* As q4k_tile_u, for Q6_K (codes from q6k_unpack4). */
INLINE void SUFFIX(q6k_tile_u)(const uint8_t *grp, const uint8_t *u, int64_t nsb, int qt, const q35_act *a, int t0, const int T, float *Y,
                               int64_t rows, int64_t rbase, int64_t r0, int64_t r1) {
    float32x4_t acc[U_T];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = vdupq_n_f32(0.0f);
    const size_t an = U_TT, abase = q35_act_in(a->nb, U_TT, 0, t0);
    const int8_t *aq = a->q + 32 * abase; /* t0's tile: [8 nsb][U_TT][32] */
    const float *ad = a->d + abase;
    const int16_t *ah = a->h + 2 * abase;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = grp + 3360 * sb;
        const float32x4_t d = h4(p + 8 * qt);
        for (int s = 0; s < 8; s++, u += 128, aq += 32 * an, ad += an, ah += 2 * an) {
            const int32x4_t sc0 = s8x4_s32(p + 32 + 16 * (2 * s) + 4 * qt), sc1 = s8x4_s32(p + 32 + 16 * (2 * s + 1) + 4 * qt);
            int8x16_t lo[4], hi[4];
            UNROLL
            for (int c = 0; c < 4; c++) lo[c] = vld1q_s8((const int8_t *)u + 16 * c), hi[c] = vld1q_s8((const int8_t *)u + 64 + 16 * c);
            UNROLL
            for (int j = 0; j < T; j++) {
                const int8x16_t a0 = vld1q_s8(aq + 32 * j), a1 = vld1q_s8(aq + 32 * j + 16);
                int32x4_t s0 = vdupq_n_s32(-32 * ah[2 * j]), s1 = vdupq_n_s32(-32 * ah[2 * j + 1]);
                DOT4(s0, lo[0], lo[1], lo[2], lo[3], a0);
                DOT4(s1, hi[0], hi[1], hi[2], hi[3], a1);
                const int32x4_t isum = vmlaq_s32(vmulq_s32(s0, sc0), s1, sc1);
                const float32x4_t f = vmulq_f32(d, vdupq_n_f32(ad[j]));
                acc[j] = vfmaq_f32(acc[j], f, vcvtq_f32_s32(isum));
            }
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) store4(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

U_DRIVER(SUFFIX(mm_q4_r16), SUFFIX(mm_q4_r16_dec), SUFFIX(q4_unpack4), SUFFIX(b32_tile_u), 32, 144, U_MIN_N) /* 27 KiB */
U_DRIVER(SUFFIX(mm_q8_r16), SUFFIX(mm_q8_r16_dec), SUFFIX(q8_unpack4), SUFFIX(b32_tile_u), 32, 144, U_MIN_N)
U_DRIVER(SUFFIX(mm_q4k_r16), SUFFIX(mm_q4k_r16_dec), SUFFIX(q4k_unpack4), SUFFIX(q4k_tile_u), 256, 128, U_MIN_N) /* 24 KiB */
U_DRIVER(SUFFIX(mm_q6k_r16), SUFFIX(mm_q6k_r16_dec), SUFFIX(q6k_unpack4), SUFFIX(q6k_tile_u), 256, 128, U_MIN_N)

#if !DOTPROD

/* ---- float formats (row-major): 4 rows x up to 4 tokens ---- */
enum { WF32, WF16, WBF16 };

INLINE float32x4_t wload4(const void *w, int64_t i, const int kind) {
    if (kind == WF32) return vld1q_f32((const float *)w + i);
    const uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    if (kind == WF16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}
static float wscalar(const void *w, int64_t i, int kind) {
    if (kind == WF32) return ((const float *)w)[i];
    const uint16_t h = ((const uint16_t *)w)[i];
    return kind == WF16 ? q35_f16_to_f32(h) : q35_bf16_to_f32(h);
}

INLINE void fp_tile(const q35_mm_job *jb, int64_t r, const int R, int t0, const int T, const int kind) {
    const int64_t cols = jb->cols;
    const size_t esz = kind == WF32 ? 4 : 2;
    const q35_pf_dist pd = q35_pf_for(kind == WF32 ? Q35_DT_F32 : kind == WF16 ? Q35_DT_F16 : Q35_DT_BF16);
    float32x4_t acc[4][4];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int t = 0; t < T; t++) acc[i][t] = vdupq_n_f32(0.0f);
    const uint8_t *w0 = jb->w + (size_t)r * cols * esz;
    const float *x0 = jb->X + (int64_t)t0 * cols;
    int64_t k = 0;
    for (; k + 4 <= cols; k += 4) {
        float32x4_t x[4], w[4];
        if (T == 1) /* the tile's R rows lie end to end: one stream of R * cols * esz bytes */
            q35_pf(pd, w0 + (size_t)k * R * esz, (int64_t)(4 * R * esz));
        UNROLL
        for (int t = 0; t < T; t++) x[t] = vld1q_f32(x0 + (int64_t)t * cols + k);
        UNROLL
        for (int i = 0; i < R; i++) w[i] = wload4(w0 + (size_t)i * cols * esz, k, kind);
        UNROLL
        for (int i = 0; i < R; i++)
            UNROLL
            for (int t = 0; t < T; t++) acc[i][t] = vfmaq_f32(acc[i][t], w[i], x[t]);
    }
    for (int i = 0; i < R; i++)
        for (int t = 0; t < T; t++) {
            float s = vaddvq_f32(acc[i][t]);
            for (int64_t kk = k; kk < cols; kk++) s += wscalar(w0 + (size_t)i * cols * esz, kk, kind) * x0[(int64_t)t * cols + kk];
            jb->Y[(int64_t)(t0 + t) * jb->rows + r + i] = s;
        }
}

#define FP_T(R, kind)                                                            \
    switch (j->n - t0 < 4 ? j->n - t0 : 4) {                                     \
    case 1: fp_tile(j, r, R, t0, 1, kind); break;                                \
    case 2: fp_tile(j, r, R, t0, 2, kind); break;                                \
    case 3: fp_tile(j, r, R, t0, 3, kind); break;                                \
    default: fp_tile(j, r, R, t0, 4, kind); break;                               \
    }
#define FP_DRIVER(name, kind)                                                    \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {              \
        for (int64_t r = r0; r < r1; r += 4) {                                   \
            const int64_t R = r1 - r < 4 ? r1 - r : 4;                           \
            for (int t0 = 0; t0 < j->n; t0 += 4) {                               \
                if (R == 4) { FP_T(4, kind) }                                    \
                else if (R == 3) { FP_T(3, kind) }                               \
                else if (R == 2) { FP_T(2, kind) }                               \
                else { FP_T(1, kind) }                                           \
            }                                                                    \
        }                                                                        \
    }
FP_DRIVER(mm_f32, WF32)
FP_DRIVER(mm_f16, WF16)
FP_DRIVER(mm_bf16, WBF16)

/* ---- activation quantization and rotation (bitwise equal to ref.c) ---- */
INLINE float amax32(const float *x, int *bad) {
    float32x4_t m = vdupq_n_f32(0.0f), z = vdupq_n_f32(0.0f);
    UNROLL
    for (int k = 0; k < 8; k++) {
        const float32x4_t v = vld1q_f32(x + 4 * k);
        m = vmaxq_f32(m, vabsq_f32(v));
        z = vaddq_f32(z, vmulq_n_f32(v, 0.0f)); /* v * 0 is NaN exactly for inf and NaN: such a group quantizes to zero, as in ref.c */
    }
    *bad |= vminvq_u32(vceqq_f32(z, z)) == 0;
    return vmaxvq_f32(m);
}
INLINE void q32(const float *x, float idf, int8_t *q, int s[2]) {
    const float32x4_t id = vdupq_n_f32(idf);
    int32x4_t qi[8]; /* the loops unrolled: rolled, gcc kept qi on the stack */
    UNROLL
    for (int k = 0; k < 8; k++) qi[k] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * k), id));
    UNROLL
    for (int k = 0; k < 4; k++) {
        const int16x8_t p = vcombine_s16(vmovn_s32(qi[2 * k]), vmovn_s32(qi[2 * k + 1]));
        vst1_s8(q + 8 * k, vmovn_s16(p));
    }
    s[0] = vaddvq_s32(vaddq_s32(vaddq_s32(qi[0], qi[1]), vaddq_s32(qi[2], qi[3])));
    s[1] = vaddvq_s32(vaddq_s32(vaddq_s32(qi[4], qi[5]), vaddq_s32(qi[6], qi[7])));
}
static void actq(const float *x, int t, int mult, int group, q35_act *a) { q35_actq_drive(x, t, mult, group, a, amax32, q32); }

static void rot(float *x, int64_t n) {
    const float32x4_t sg0 = {1.0f, -1.0f, 1.0f, -1.0f}, sg1 = {1.0f, 1.0f, -1.0f, -1.0f};
    float32x4_t signs[32];
    for (int v = 0; v < 32; v++) {
        float f[4];
        for (int l = 0; l < 4; l++) {
            const int jj = 4 * v + l;
            f[l] = (Q35_Q4R_SIGNS[jj >> 5] >> (jj & 31)) & 1u ? -1.0f : 1.0f;
        }
        signs[v] = vld1q_f32(f);
    }
    const float32x4_t scale = vdupq_n_f32(Q35_Q4R_SCALE);
    for (int64_t g = 0; g < n / 128; g++) {
        float *p = x + 128 * g;
        float32x4_t v[32];
        for (int i = 0; i < 32; i++) {
            v[i] = vmulq_f32(vld1q_f32(p + 4 * i), signs[i]);
            v[i] = vfmaq_f32(vrev64q_f32(v[i]), v[i], sg0);
            v[i] = vfmaq_f32(vextq_f32(v[i], v[i], 2), v[i], sg1);
        }
        for (int h = 1; h < 32; h <<= 1)
            for (int i = 0; i < 32; i += 2 * h)
                for (int k = i; k < i + h; k++) {
                    const float32x4_t a = v[k], b = v[k + h];
                    v[k] = vaddq_f32(a, b);
                    v[k + h] = vsubq_f32(a, b);
                }
        for (int i = 0; i < 32; i++) vst1q_f32(p + 4 * i, vmulq_f32(v[i], scale));
    }
}

const q35_kern q35_kern_neon = {
    .mm = {[Q35_DT_F32] = {mm_f32, NULL}, [Q35_DT_F16] = {mm_f16, NULL}, [Q35_DT_BF16] = {mm_bf16, NULL},
           [Q35_DT_Q8_0] = {NULL, mm_q8_r16_plain}, [Q35_DT_Q4_0] = {NULL, mm_q4_r16_plain}, [Q35_DT_Q4R] = {NULL, mm_q4_r16_plain},
           [Q35_DT_Q4_K] = {NULL, mm_q4k_r16_plain}, [Q35_DT_Q6_K] = {NULL, mm_q6k_r16_plain}},
    .act_mult = {[Q35_DT_Q8_0] = 0, [Q35_DT_Q4_0] = -8, [Q35_DT_Q4R] = -8, [Q35_DT_Q4_K] = 1, [Q35_DT_Q6_K] = 1},
    .actq = actq,
    .act_tile = U_TT,
    .rot = rot,
};
/* for the dotprod table (mm_dot_neon.c) */
void q35_neon_actq(const float *x, int t, int mult, int group, q35_act *a) { actq(x, t, mult, group, a); }
void q35_neon_rot(float *x, int64_t n) { rot(x, n); }
void q35_neon_mm_f32(const q35_mm_job *j, int64_t r0, int64_t r1) { mm_f32(j, r0, r1); }
void q35_neon_mm_f16(const q35_mm_job *j, int64_t r0, int64_t r1) { mm_f16(j, r0, r1); }
void q35_neon_mm_bf16(const q35_mm_job *j, int64_t r0, int64_t r1) { mm_bf16(j, r0, r1); }
#else
void q35_neon_actq(const float *x, int t, int mult, int group, q35_act *a);
void q35_neon_rot(float *x, int64_t n);
void q35_neon_mm_f32(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_neon_mm_f16(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_neon_mm_bf16(const q35_mm_job *j, int64_t r0, int64_t r1);
const q35_kern q35_kern_neondot = {
    .mm = {[Q35_DT_F32] = {q35_neon_mm_f32, NULL}, [Q35_DT_F16] = {q35_neon_mm_f16, NULL}, [Q35_DT_BF16] = {q35_neon_mm_bf16, NULL},
           [Q35_DT_Q8_0] = {NULL, mm_q8_r16_dot}, [Q35_DT_Q4_0] = {NULL, mm_q4_r16_dot}, [Q35_DT_Q4R] = {NULL, mm_q4_r16_dot},
           [Q35_DT_Q4_K] = {NULL, mm_q4k_r16_dot}, [Q35_DT_Q6_K] = {NULL, mm_q6k_r16_dot}},
    .act_mult = {[Q35_DT_Q8_0] = 0, [Q35_DT_Q4_0] = -8, [Q35_DT_Q4R] = -8, [Q35_DT_Q4_K] = 1, [Q35_DT_Q6_K] = 1},
    .actq = q35_neon_actq,
    .act_tile = U_TT,
    .rot = q35_neon_rot,
};
#endif
