/* Body of the AVX2 kernels, included by mm_avx2.c (VNNI 0: vpmaddubsw) and mm_vnni_avx2.c
 * (VNNI 1: AVX-VNNI vpdpbusd). Same R16 layout and float steps as the AVX-512 file (bitwise equal
 * to ref.c for the integer formats): a 256-bit vector holds 4 quants of 8 rows, a tile is 8 rows
 * (half a group) x up to 4 tokens. Without VNNI the unsigned x signed byte products go through
 * vpmaddubsw into 16-bit sums (bounded below 2^15: at most 16 products of 15 x 127 for 4-bit codes),
 * and Q8_0 uses the sign trick (|w| x sign(a, w)), so its activation offset is 0. */
#include <immintrin.h>
#include <string.h>

#include "kernels/mm.h"

#ifndef VNNI
#error "define VNNI before including mm_avx2_impl.h"
#endif
#if VNNI
#define SUFFIX(x) x##_vnni
#define DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define DPWSSD(acc, u, s) _mm256_dpwssd_avx_epi32(acc, u, s)
#else
#define SUFFIX(x) x##_plain
#define DPWSSD(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(u, s))
#endif

#define INLINE static inline __attribute__((always_inline))
#include "kernels/unroll.h"
#define R16_NPART 2 /* halves of 8 rows */
#define R16_VEC __m256
#define R16_ZERO() _mm256_setzero_ps()
#define R16_STORE(y, v, rbase, r0, r1) SUFFIX(store8)(y, v, rbase, r0, r1)
#define R16_ALIGN 32
#define U_T 4
#define U_TILES TILES4
#define U_TT 8 /* the table's act_tile: tiles of 4 read as fast from tiles of 8 (docs/speed.md "Activations in token tiles") */
#include "kernels/r16_loops.h"

INLINE __m256i SUFFIX(bc32)(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Store 8 row results at rows rbase..rbase+7, keeping only [r0, r1). */
INLINE void SUFFIX(store8)(float *y, __m256 v, int64_t rbase, int64_t r0, int64_t r1) {
    if (rbase >= r0 && rbase + 8 <= r1) {
        _mm256_storeu_ps(y + rbase, v);
        return;
    }
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int i = 0; i < 8; i++)
        if (rbase + i >= r0 && rbase + i < r1) y[rbase + i] = t[i];
}

static int64_t SUFFIX(sbytes16)(int64_t nb) { return (nb * 32 + 63) & ~(int64_t)63; }

/* 16-bit sum of products u x s for one chunk and one token, summed into the int32 lanes. */
#if !VNNI
INLINE __m256i maddubs_pair(__m256i acc16, __m256i u, __m256i s) { return _mm256_add_epi16(acc16, _mm256_maddubs_epi16(u, s)); }
#endif


/* acc[j] += (dw * ad[j]) * float(s[j]) for tokens j < T of one block: the reference's float step. */
INLINE void SUFFIX(block_scale8)(__m256 *acc, __m256 dw, const float *ad, const __m256i *s, const int T) {
    UNROLL
    for (int j = 0; j < T; j++) {
        const __m256 f = _mm256_mul_ps(dw, _mm256_set1_ps(ad[j]));
        acc[j] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(s[j]), acc[j]);
    }
}

/* ---- Q4_0 / Q4R ---- */
/* One block's half (8 rows: scales sc, f16 d[8]; chunks cq) times T tokens: activation bytes
 * aq[T][32], their sums as[T] and scales ad[T]; added into acc[T]. With U (an unpacked block,
 * q4_unpack8) sc holds the 8 scales as floats and cq the chunks' low and high nibbles, 32 bytes
 * each in turn. */
INLINE void SUFFIX(q4_core)(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T,
                             __m256 *acc, const int U) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256 dw = U ? _mm256_load_ps((const float *)sc) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sc));
#define Q4_NIBBLES(c)                                                                                                  \
    const __m256i v = U ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(cq + 64 * c));             \
    const __m256i lo = U ? _mm256_load_si256((const __m256i *)(cq + 64 * c)) : _mm256_and_si256(v, m4);             \
    const __m256i hi = U ? _mm256_load_si256((const __m256i *)(cq + 64 * c + 32)) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4)
#if VNNI
    __m256i s[4];
    UNROLL
    for (int j = 0; j < T; j++) s[j] = _mm256_set1_epi32(as[j]);
    UNROLL
    for (int c = 0; c < 4; c++) {
        Q4_NIBBLES(c);
        UNROLL
        for (int j = 0; j < T; j++) {
            s[j] = DPBUSD(s[j], lo, SUFFIX(bc32)(aq + 32 * j + 4 * c));
            s[j] = DPBUSD(s[j], hi, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c));
        }
    }
#else
    __m256i p[4], s[4];
    UNROLL
    for (int j = 0; j < T; j++) p[j] = _mm256_setzero_si256();
    UNROLL
    for (int c = 0; c < 4; c++) {
        Q4_NIBBLES(c);
        UNROLL
        for (int j = 0; j < T; j++) {
            p[j] = maddubs_pair(p[j], lo, SUFFIX(bc32)(aq + 32 * j + 4 * c));
            p[j] = maddubs_pair(p[j], hi, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c));
        }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    UNROLL
    for (int j = 0; j < T; j++) s[j] = _mm256_add_epi32(_mm256_madd_epi16(p[j], ones), _mm256_set1_epi32(as[j]));
#endif
#undef Q4_NIBBLES
    SUFFIX(block_scale8)(acc, dw, ad, s, T);
}
INLINE void SUFFIX(q4_core_p)(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T,
                               __m256 *acc) {
    SUFFIX(q4_core)(sc, cq, aq, as, ad, T, acc, 0);
}

/* ---- Q8_0 ---- */
/* As q4_core; with U (plain only, q8_unpack8) sc holds float scales and cq each chunk's weights
 * w (codes ^ 0x80) then |w|, 32 bytes each. */
INLINE void SUFFIX(q8_core)(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T,
                             __m256 *acc, const int U) {
    const __m256 dw = U ? _mm256_load_ps((const float *)sc) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sc));
    __m256i s[4];
    UNROLL
    for (int j = 0; j < T; j++) s[j] = _mm256_set1_epi32(as[j]);
#if !VNNI
    const __m256i ones = _mm256_set1_epi16(1), x80 = _mm256_set1_epi8((char)0x80);
#endif
    UNROLL
    for (int c = 0; c < 8; c++) {
#if VNNI
        const __m256i u = _mm256_loadu_si256((const __m256i *)(cq + 64 * c));
        UNROLL
        for (int j = 0; j < T; j++) s[j] = DPBUSD(s[j], u, SUFFIX(bc32)(aq + 32 * j + 4 * c));
#else
        const __m256i w = U ? _mm256_load_si256((const __m256i *)(cq + 64 * c)) : _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(cq + 64 * c)), x80);
        const __m256i aw = U ? _mm256_load_si256((const __m256i *)(cq + 64 * c + 32)) : _mm256_abs_epi8(w);
        UNROLL
        for (int j = 0; j < T; j++) {
            const __m256i sa = _mm256_sign_epi8(SUFFIX(bc32)(aq + 32 * j + 4 * c), w);
            s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sa), ones));
        }
#endif
    }
    SUFFIX(block_scale8)(acc, dw, ad, s, T);
}
INLINE void SUFFIX(q8_core_p)(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T,
                               __m256 *acc) {
    SUFFIX(q8_core)(sc, cq, aq, as, ad, T, acc, 0);
}

/* ---- Q4_K ---- */
/* Half hf of a super-block's min term for T tokens: ma[j] = sum_k m[k] S_k, in integers by 4
 * vpmaddwd (AVX-VNNI: vpdpwssd) on pairs of sub-blocks (the m's of a pair in each row's lane as two
 * 16-bit halves; sp: the token's pair sums, q35_act, at sp[2 q step + j]). Exact (below 2^22), so
 * it equals the reference's float sum of exact products (ref.c), as mm_avx512.c's q4k_mins: 4
 * multiplies where the float steps took 8. */
INLINE void SUFFIX(q4k_mins8)(const uint8_t *p, int hf, const int32_t *sp, size_t step, const int T, __m256 *ma) {
    __m256i mp[4];
    UNROLL
    for (int q = 0; q < 4; q++)
        mp[q] = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 192 + 32 * q + 8 * hf))),
                                _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 208 + 32 * q + 8 * hf))), 16));
    UNROLL
    for (int j = 0; j < T; j++) {
        __m256i mi = _mm256_setzero_si256();
        UNROLL
        for (int q = 0; q < 4; q++) mi = DPWSSD(mi, mp[q], _mm256_set1_epi32(sp[2 * q * step + (size_t)j]));
        ma[j] = _mm256_cvtepi32_ps(mi);
    }
}
/* u: the half group unpacked (q4k_unpack8: per sub-block, each chunk's low then high nibbles, 32
 * bytes each), or NULL to mask the nibbles apart here. TT: a's tile, U_TT for the unpacked tiles
 * (U_DRIVER), or 0 to read it from a. */
INLINE void SUFFIX(q4k_tile)(const uint8_t *grp, const uint8_t *u, int64_t nsb, int hf, const q35_act *a, int t0, const int T, float *Y,
                             int64_t rows, int64_t rbase, int64_t r0, int64_t r1, const int TT) {
    __m256 acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15);
    const size_t a0 = TT ? q35_act_in(a->nb, TT, 0, t0) : q35_act_at(a, 0, t0), tt = TT ? (size_t)TT : (size_t)a->tt;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = grp + 2368 * sb;
        __m256 sa[4]; /* the reference's super-block sums (ref.c) */
        UNROLL
        for (int j = 0; j < T; j++) sa[j] = _mm256_setzero_ps();
        for (int s = 0; s < 8; s++) {
            const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 64 + 16 * s + 8 * hf)));
#if VNNI
            const __m256 scf = _mm256_cvtepi32_ps(sc);
#else /* sc in both 16-bit halves of each row's lane: the widening vpmaddwd gives sc x dot itself */
            const __m256i sc2 = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
#endif
            const uint8_t *cq = p + 320 + 256 * s + 32 * hf;
            const size_t base = a0 + (size_t)(8 * sb + s) * tt;
            const int8_t *aq = a->q + base * 32;
            __m256i dot[4];
            UNROLL
            for (int j = 0; j < T; j++) dot[j] = _mm256_setzero_si256();
            const uint8_t *us = u ? u + 256 * (8 * sb + s) : NULL;
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m256i v = us ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(cq + 64 * c));
                const __m256i lo = us ? _mm256_load_si256((const __m256i *)(us + 64 * c)) : _mm256_and_si256(v, m4);
                const __m256i hi = us ? _mm256_load_si256((const __m256i *)(us + 64 * c + 32)) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                UNROLL
                for (int j = 0; j < T; j++) {
#if VNNI
                    dot[j] = DPBUSD(dot[j], lo, SUFFIX(bc32)(aq + 32 * j + 4 * c));
                    dot[j] = DPBUSD(dot[j], hi, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c));
#else
                    dot[j] = maddubs_pair(dot[j], lo, SUFFIX(bc32)(aq + 32 * j + 4 * c));
                    dot[j] = maddubs_pair(dot[j], hi, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c));
#endif
                }
            }
            /* sa += sc x dot (below 2^22, ref.c): with VNNI the fused product of the exact floats, as
             * mm_avx512.c's q4k_sub_any; without, the integer itself from the vpmaddwd that widens
             * the 16-bit sums, added (the same rounding) */
            UNROLL
            for (int j = 0; j < T; j++) {
#if VNNI
                sa[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[j]), scf, sa[j]);
#else
                sa[j] = _mm256_add_ps(sa[j], _mm256_cvtepi32_ps(_mm256_madd_epi16(dot[j], sc2)));
#endif
            }
        }
        /* the min term after the sub-blocks (it needs no product of the weights): fewer registers live in the loop */
        __m256 ma[4];
        SUFFIX(q4k_mins8)(p, hf, a->sp + a0 + (size_t)(8 * sb) * tt, tt, T, ma);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * hf)));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 32 + 16 * hf)));
        const float *da = a->d + a0 + (size_t)(8 * sb) * tt; /* the super-block's scale per token */
        UNROLL
        for (int j = 0; j < T; j++) acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(da[j]), _mm256_fnmadd_ps(dmin, ma[j], _mm256_mul_ps(d, sa[j])), acc[j]);
    }
    UNROLL
    for (int j = 0; j < T; j++) SUFFIX(store8)(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* ---- Q6_K ---- */
INLINE void SUFFIX(q6k_tile)(const uint8_t *grp, int64_t nsb, int hf, const q35_act *a, int t0, const int T, float *Y, int64_t rows,
                             int64_t rbase, int64_t r0, int64_t r1) {
    __m256 acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const size_t a0 = q35_act_at(a, 0, t0), tt = (size_t)a->tt;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = grp + 3360 * sb;
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * hf)));
        for (int s = 0; s < 8; s++) {
            const __m256 sc0f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 16 * (2 * s) + 8 * hf))));
            const __m256 sc1f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 16 * (2 * s + 1) + 8 * hf))));
            const uint8_t *L = p + 288 + 384 * s + 32 * hf, *H = p + 288 + 384 * s + 256 + 32 * hf;
            const size_t base = a0 + (size_t)(8 * sb + s) * tt;
            const int8_t *aq = a->q + base * 32;
            __m256i s0[4], s1[4];
            UNROLL
            for (int j = 0; j < T; j++) {
                s0[j] = _mm256_set1_epi32(-32 * a->h[2 * (base + j)]);
                s1[j] = _mm256_set1_epi32(-32 * a->h[2 * (base + j) + 1]);
            }
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)H), h1 = _mm256_loadu_si256((const __m256i *)(H + 64));
            if (VNNI || T == 1) { /* (T = 1, a prompt's last token: when generation came here, the paired loop below was 1-2% slower) */
                UNROLL
                for (int c = 0; c < 4; c++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(L + 64 * c));
                    /* top bits of value 4c+i: bits 2c of H0; of value 16+4c+i: bits 2c of H1 */
                    const __m256i tl = c == 0 ? _mm256_slli_epi16(h0, 4) : c == 1 ? _mm256_slli_epi16(h0, 2) : c == 2 ? h0 : _mm256_srli_epi16(h0, 2);
                    const __m256i th = c == 0 ? _mm256_slli_epi16(h1, 4) : c == 1 ? _mm256_slli_epi16(h1, 2) : c == 2 ? h1 : _mm256_srli_epi16(h1, 2);
                    const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(tl, m30));
                    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(th, m30));
                    UNROLL
                    for (int j = 0; j < T; j++) {
#if VNNI
                        s0[j] = DPBUSD(s0[j], lo, SUFFIX(bc32)(aq + 32 * j + 4 * c));
                        s1[j] = DPBUSD(s1[j], hi, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c));
#else /* codes up to 63: one product pair per 16-bit lane, widened at once */
                        const __m256i ones = _mm256_set1_epi16(1);
                        s0[j] = _mm256_add_epi32(s0[j], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, SUFFIX(bc32)(aq + 32 * j + 4 * c)), ones));
                        s1[j] = _mm256_add_epi32(s1[j], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c)), ones));
#endif
                    }
                }
            }
#if !VNNI
            else {
                /* codes up to 63 and |a| <= 127: a vpmaddubsw lane is at most 16002, so the lanes of two
                 * chunks (c, c + 1) add in 16 bits before one vpmaddwd widens them */
                const __m256i ones = _mm256_set1_epi16(1);
                UNROLL
                for (int half = 0; half < 2; half++) { /* values 0..15 (s0), then 16..31 (s1) */
                    const __m256i hh = half ? h1 : h0;
                    UNROLL
                    for (int c = 0; c < 4; c += 2) {
                        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(L + 64 * c)), v1 = _mm256_loadu_si256((const __m256i *)(L + 64 * c + 64));
                        const __m256i n0 = half ? _mm256_srli_epi16(v0, 4) : v0, n1 = half ? _mm256_srli_epi16(v1, 4) : v1;
                        /* top bits of value 4c+i (+16): bits 2c of H0 (H1), moved to bits 4..5 */
                        const __m256i tb0 = c == 0 ? _mm256_slli_epi16(hh, 4) : hh, tb1 = c == 0 ? _mm256_slli_epi16(hh, 2) : _mm256_srli_epi16(hh, 2);
                        const __m256i w0 = _mm256_or_si256(_mm256_and_si256(n0, m4), _mm256_and_si256(tb0, m30));
                        const __m256i w1 = _mm256_or_si256(_mm256_and_si256(n1, m4), _mm256_and_si256(tb1, m30));
                        UNROLL
                        for (int j = 0; j < T; j++) {
                            const int8_t *x = aq + 32 * j + 16 * half + 4 * c;
                            const __m256i pp = _mm256_add_epi16(_mm256_maddubs_epi16(w0, SUFFIX(bc32)(x)), _mm256_maddubs_epi16(w1, SUFFIX(bc32)(x + 4)));
                            if (half) s1[j] = _mm256_add_epi32(s1[j], _mm256_madd_epi16(pp, ones));
                            else s0[j] = _mm256_add_epi32(s0[j], _mm256_madd_epi16(pp, ones));
                        }
                    }
                }
            }
#endif
            UNROLL
            for (int j = 0; j < T; j++) {
                /* without vpmulld, as mm_avx512.c's q6k_unit: exact float products and sum */
                const __m256 isum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[j]), sc0f, _mm256_mul_ps(_mm256_cvtepi32_ps(s1[j]), sc1f));
                const __m256 f = _mm256_mul_ps(d, _mm256_set1_ps(a->d[base + j]));
                acc[j] = _mm256_fmadd_ps(f, isum, acc[j]);
            }
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) SUFFIX(store8)(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

/* Half hf (rows 8 hf .. 8 hf + 7) of a group: T tokens from t0 over every block. Each run of 32
 * blocks is walked by pointer (scales, chunks, and the tokens' activations a block apart), as the
 * single-token walks below: locating every block from its index took ~20 scalar operations a
 * block, which on Intel cores share ports 0, 1 and 5 with the vector work (docs/speed.md "AVX2
 * only"). One token goes through the walks below; T = 1 here is a prompt's last token. */
#define R8_TILE(name, core, QB)                                                                        \
    INLINE void name(const uint8_t *grp, int64_t nb, int hf, const q35_act *a, int t0, const int T, float *Y, int64_t rows, \
                     int64_t rbase, int64_t r0, int64_t r1) {                                                   \
        __m256 acc[4];                                                                                         \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();                                              \
        const size_t an = (size_t)a->tt, a0 = q35_act_at(a, 0, t0);                                             \
        const int8_t *aq = a->q + 32 * a0; /* t0's tile: [nb][tt][32] */                                        \
        const int32_t *as = a->s + a0;                                                                         \
        const float *ad = a->d + a0;                                                                           \
        for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {                                                     \
            const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, QB);                        \
            const uint8_t *sp = grp + off + 16 * hf, *cp = grp + off + q35_r16_run_scale_bytes(len) + 32 * hf; \
            for (int64_t i = 0; i < len; i++) {                                                                \
                core(sp + 32 * i, cp + QB * i, aq, as, ad, T, acc);                                            \
                aq += 32 * an, as += an, ad += an;                                                             \
            }                                                                                                  \
        }                                                                                                      \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) SUFFIX(store8)(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);       \
    }
/* One token over G (1 or 2) whole 16-row groups (ga's rows from ra, gb's from rb; gb unused when
 * G == 1) in lockstep: with two, two weight streams (mm_avx512.c). Both 8-row halves of a group go
 * in one pass over its blocks, so each 64-byte line is read once and the token's activations, sums
 * and scales are loaded once for 16 rows (the K formats' walks below, NEON's G16_WALK). Each run of
 * 32 blocks is walked by pointer with a fixed count of prefetched lines per block, as the AVX-512
 * walks (docs/speed.md, "Lean single-token pairs"). */
#define R8_WALK(name, core, QB, NL, DT, G)                                                                     \
    static void name(const uint8_t *ga, const uint8_t *gb, int64_t nb, const q35_act *a, float *Y, int64_t ra, int64_t rb, \
                     int64_t r0, int64_t r1) {                                                                  \
        _Static_assert(NL * 64 >= QB + 33, "q35_pf_lines must cover a step");                                  \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  \
        const int64_t pfs = q35_pf_step(SUFFIX(sbytes16)(nb) + QB * nb, nb);                                   \
        const q35_pf_dist pd = q35_pf_for(DT);                                                                 \
        const int8_t *aq = a->q; /* [nb][32]: one token */                                                     \
        const int32_t *as = a->s;                                                                              \
        const float *ad = a->d;                                                                                \
        const uint8_t *pa = ga, *pb = gb;                                                                      \
        for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {                                                     \
            const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, QB);                        \
            const int64_t sbytes = q35_r16_run_scale_bytes(len);                                               \
            const uint8_t *sa = ga + off, *ca = ga + off + sbytes;                                             \
            const uint8_t *sb = G == 2 ? gb + off : NULL, *cb = G == 2 ? gb + off + sbytes : NULL;             \
            for (int64_t i = 0; i < len; i++) {                                                                \
                q35_pf_lines(pd, pa, NL);                                                                      \
                pa += pfs;                                                                                     \
                if (G == 2) q35_pf_lines(pd, pb, NL), pb += pfs;                                               \
                core(sa + 32 * i, ca + QB * i, aq, as, ad, 1, &acc[0]);                                        \
                core(sa + 32 * i + 16, ca + QB * i + 32, aq, as, ad, 1, &acc[1]);                              \
                if (G == 2) {                                                                                  \
                    core(sb + 32 * i, cb + QB * i, aq, as, ad, 1, &acc[2]);                                    \
                    core(sb + 32 * i + 16, cb + QB * i + 32, aq, as, ad, 1, &acc[3]);                          \
                }                                                                                              \
                aq += 32, as++, ad++;                                                                          \
            }                                                                                                  \
        }                                                                                                      \
        SUFFIX(store8)(Y, acc[0], ra, r0, r1);                                                                 \
        SUFFIX(store8)(Y, acc[1], ra + 8, r0, r1);                                                             \
        if (G == 2) {                                                                                          \
            SUFFIX(store8)(Y, acc[2], rb, r0, r1);                                                             \
            SUFFIX(store8)(Y, acc[3], rb + 8, r0, r1);                                                         \
        }                                                                                                      \
    }
/* Loop over 8-row halves of groups and token tiles of up to 4. One token (Q4_0/Q4R, Q8_0, with a
 * one-group walk `one`; the K formats have their own walks below): with q35_pf_streams == 2 and a
 * pair function, the first and the second half of the groups in pairs (the odd group left alone
 * through one); with one stream, the groups in turn through one. */
typedef void (*SUFFIX(pair_fn))(const uint8_t *, const uint8_t *, int64_t, const q35_act *, float *, int64_t, int64_t, int64_t, int64_t);
#define R8_DRIVER(name, tile, pair, one, NU)                                                                       \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        const int64_t nu = NU;                                                                                 \
        const SUFFIX(pair_fn) pairf = pair, onef = one;                                                        \
        if (j->n == 1 && onef) {                                                                               \
            const int64_t g0 = r0 / 16, ng = (r1 + 15) / 16 - g0, h = (ng + 1) / 2;                            \
            if (q35_pf_streams == 2 && pairf) {                                                                \
                for (int64_t k = 0; k < ng / 2; k++)                                                           \
                    pairf(j->w + (size_t)(g0 + k) * gb, j->w + (size_t)(g0 + h + k) * gb, nu, &j->a, j->Y, 16 * (g0 + k), \
                          16 * (g0 + h + k), r0, r1);                                                          \
                if (ng & 1) onef(j->w + (size_t)(g0 + h - 1) * gb, NULL, nu, &j->a, j->Y, 16 * (g0 + h - 1), 0, r0, r1); \
            } else                                                                                             \
                for (int64_t g = g0; g < g0 + ng; g++) onef(j->w + (size_t)g * gb, NULL, nu, &j->a, j->Y, 16 * g, 0, r0, r1); \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t h = r0 / 8; h * 8 < r1; h++) {                                                            \
            const uint8_t *grp = j->w + (size_t)(h / 2) * gb;                                                  \
            const int hf = (int)(h & 1);                                                                       \
            for (int t0 = 0; t0 < j->n; t0 += 4) TILES4(j->n - t0, tile, (grp, nu, hf, &j->a, t0), j->Y, j->rows, 8 * h, r0, r1); \
        }                                                                                                      \
    }
R8_TILE(SUFFIX(q4_tile), SUFFIX(q4_core_p), 256)
R8_TILE(SUFFIX(q8_tile), SUFFIX(q8_core_p), 512)
R8_WALK(SUFFIX(q4_pair), SUFFIX(q4_core_p), 256, 5, Q35_DT_Q4_0, 2)
R8_WALK(SUFFIX(q8_pair), SUFFIX(q8_core_p), 512, 9, Q35_DT_Q8_0, 2)
R8_WALK(SUFFIX(q4_one), SUFFIX(q4_core_p), 256, 5, Q35_DT_Q4_0, 1)
R8_WALK(SUFFIX(q8_one), SUFFIX(q8_core_p), 512, 9, Q35_DT_Q8_0, 1)
R8_DRIVER(SUFFIX(mm_q4_r16_dec), SUFFIX(q4_tile), SUFFIX(q4_pair), SUFFIX(q4_one), j->cols / 32)
R8_DRIVER(SUFFIX(mm_q8_r16_dec), SUFFIX(q8_tile), SUFFIX(q8_pair), SUFFIX(q8_one), j->cols / 32)

/* Block-32 prompts (n >= 8): each 8-row half group's blocks made ready once into a stack buffer,
 * not again for every 4-token tile, where it took 10-20% of the tile's work: Q4_0/Q4R's nibbles
 * masked apart (an and, a shift and an and per chunk), plain Q8_0's weights and their absolute
 * values (an xor and an abs). A block is UBLK bytes: its chunks as q4_core / q8_core read them
 * with U, then the 8 rows' scales as floats. AVX-VNNI Q8_0 multiplies the stored codes as they are. */

/* The 4 chunks of a 32-value block's half (chunk c at cq + 64 c) as low then high nibbles, 32
 * bytes each, at u + 64 c (Q4_0/Q4R blocks and Q4_K sub-blocks alike). */
INLINE void SUFFIX(nibbles4)(const uint8_t *cq, uint8_t *u) {
    const __m256i m4 = _mm256_set1_epi8(15);
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(cq + 64 * c));
        _mm256_store_si256((__m256i *)(u + 64 * c), _mm256_and_si256(v, m4));
        _mm256_store_si256((__m256i *)(u + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
}

static void SUFFIX(q4_unpack8)(const uint8_t *grp, int64_t nb, int hf, uint8_t *u) {
    for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {
        const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, 256);
        const uint8_t *sp = grp + off + 16 * hf, *cp = grp + off + q35_r16_run_scale_bytes(len) + 32 * hf;
        for (int64_t i = 0; i < len; i++, u += 288) {
            SUFFIX(nibbles4)(cp + 256 * i, u);
            _mm256_store_ps((float *)(u + 256), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sp + 32 * i))));
        }
    }
}

#if !VNNI
static void q8_unpack8(const uint8_t *grp, int64_t nb, int hf, uint8_t *u) {
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {
        const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, 512);
        const uint8_t *sp = grp + off + 16 * hf, *cp = grp + off + q35_r16_run_scale_bytes(len) + 32 * hf;
        for (int64_t i = 0; i < len; i++, u += 544) {
            UNROLL
            for (int c = 0; c < 8; c++) {
                const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(cp + 512 * i + 64 * c)), x80);
                _mm256_store_si256((__m256i *)(u + 64 * c), w);
                _mm256_store_si256((__m256i *)(u + 64 * c + 32), _mm256_abs_epi8(w));
            }
            _mm256_store_ps((float *)(u + 512), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sp + 32 * i))));
        }
    }
}
#endif

/* T tokens from t0 over the nb unpacked blocks at u (UBLK bytes each, scales at QB). */
#define U_TILE(name, core, UBLK, QB)                                                                           \
    INLINE void name(const uint8_t *grp, const uint8_t *u, int64_t nb, int hf, const q35_act *a, int t0, const int T, float *Y,    \
                     int64_t rows, int64_t rbase, int64_t r0, int64_t r1) {                                     \
        (void)grp, (void)hf;                                                                                   \
        __m256 acc[4];                                                                                         \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();                                              \
        const size_t an = U_TT, a0 = q35_act_in(a->nb, U_TT, 0, t0);                                            \
        const int8_t *aq = a->q + 32 * a0; /* t0's tile: [nb][U_TT][32] */                                      \
        const int32_t *as = a->s + a0;                                                                         \
        const float *ad = a->d + a0;                                                                           \
        for (int64_t b = 0; b < nb; b++, u += UBLK, aq += 32 * an, as += an, ad += an) core(u + QB, u, aq, as, ad, T, acc, 1); \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) SUFFIX(store8)(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);       \
    }
/* U_DRIVER (r16_loops.h): MIN_N: bench_kernels -i avx2 -n 8, 1 thread, unpacked against packed tiles (GFLOP/s):
 * Q6_K 83 / 70 plain, 96 / 90 AVX-VNNI; Q4_K 109 / 113, 125 / 135 (n=16: 133 / 124, 158 / 154). */
U_TILE(SUFFIX(q4_tile_u), SUFFIX(q4_core), 288, 256)
U_DRIVER(SUFFIX(mm_q4_r16), SUFFIX(mm_q4_r16_dec), SUFFIX(q4_unpack8), SUFFIX(q4_tile_u), 32, 288, 8) /* 54 KiB */
#if !VNNI
U_TILE(q8_tile_u, q8_core_plain, 544, 512)
U_DRIVER(mm_q8_r16_plain, mm_q8_r16_dec_plain, q8_unpack8, q8_tile_u, 32, 544, 8) /* 102 KiB */
#else
#define mm_q8_r16_vnni mm_q8_r16_dec_vnni
#endif
INLINE void SUFFIX(q4k_tile_p)(const uint8_t *grp, int64_t nsb, int hf, const q35_act *a, int t0, const int T, float *Y, int64_t rows,
                               int64_t rbase, int64_t r0, int64_t r1) {
    SUFFIX(q4k_tile)(grp, NULL, nsb, hf, a, t0, T, Y, rows, rbase, r0, r1, 0);
}
INLINE void SUFFIX(q4k_tile_u)(const uint8_t *grp, const uint8_t *u, int64_t nsb, int hf, const q35_act *a, int t0, const int T, float *Y,
                               int64_t rows, int64_t rbase, int64_t r0, int64_t r1) {
    SUFFIX(q4k_tile)(grp, u, nsb, hf, a, t0, T, Y, rows, rbase, r0, r1, U_TT);
}
R8_DRIVER(SUFFIX(mm_q4k_r16_dec4), SUFFIX(q4k_tile_p), NULL, NULL, j->cols / 256)
R8_DRIVER(SUFFIX(mm_q6k_r16_dec4), SUFFIX(q6k_tile), NULL, NULL, j->cols / 256)

/* ---- K formats, one token: whole 16-row groups ----
 * Both halves of a group in one pass (as the NEON walks): each 64-byte line of codes is read once,
 * for 16 rows; the activations, their scales and sums are loaded once per sub-block; the group is
 * walked by pointer with a fixed count of prefetched lines per sub-block. Per half, the same float
 * steps as q4k_tile / q6k_tile with T = 1 (same bits). */
INLINE void SUFFIX(q4k_sb16)(const uint8_t *p, const int8_t *aq, const float *ad, const int32_t *sp, __m256 *acc, q35_pf_dist pd,
                             const uint8_t *pf, int64_t pfs) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 sa[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}; /* the reference's super-block sums (ref.c) */
    for (int s = 0; s < 8; s++, aq += 32) {
        q35_pf_lines(pd, pf + s * pfs, 5); /* 320 >= pfs = 296 */
        const uint8_t *cq = p + 320 + 256 * s;
        __m256i dot[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        UNROLL
        for (int c = 0; c < 4; c++) {
            const __m256i alo = SUFFIX(bc32)(aq + 4 * c), ahi = SUFFIX(bc32)(aq + 16 + 4 * c);
            UNROLL
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(cq + 64 * c + 32 * h));
                const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#if VNNI
                dot[h] = DPBUSD(DPBUSD(dot[h], lo, alo), hi, ahi);
#else
                dot[h] = maddubs_pair(maddubs_pair(dot[h], lo, alo), hi, ahi);
#endif
            }
        }
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 64 + 16 * s + 8 * h)));
#if VNNI
            sa[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h]), _mm256_cvtepi32_ps(sc), sa[h]);
#else
            sa[h] = _mm256_add_ps(sa[h], _mm256_cvtepi32_ps(_mm256_madd_epi16(dot[h], _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16)))));
#endif
        }
    }
    __m256 ma[2];
    UNROLL
    for (int h = 0; h < 2; h++) SUFFIX(q4k_mins8)(p, h, sp, 1, 1, &ma[h]);
    const __m256 vad = _mm256_set1_ps(ad[0]); /* the super-block's scale */
    UNROLL
    for (int h = 0; h < 2; h++) {
        const __m256 u = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * h))), sa[h]);
        acc[h] = _mm256_fmadd_ps(vad, _mm256_fnmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 32 + 16 * h))), ma[h], u), acc[h]);
    }
}
INLINE void SUFFIX(q6k_sb16)(const uint8_t *p, const int8_t *aq, const float *ad, const int16_t *ah, __m256 *acc, q35_pf_dist pd,
                             const uint8_t *pf, int64_t pfs) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
#if !VNNI
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    for (int s = 0; s < 8; s++, aq += 32) {
        q35_pf_lines(pd, pf + s * pfs, 7); /* 448 >= pfs = 420 */
        const uint8_t *L = p + 288 + 384 * s, *H = L + 256;
        const __m256 f = _mm256_set1_ps(ad[s]);
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i s0 = _mm256_set1_epi32(-32 * ah[2 * s]), s1 = _mm256_set1_epi32(-32 * ah[2 * s + 1]);
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)(H + 32 * h)), h1 = _mm256_loadu_si256((const __m256i *)(H + 64 + 32 * h));
#if !VNNI
            __m256i pl = _mm256_setzero_si256(), ph = pl; /* chunk c - 1's 16-bit products, c odd */
#endif
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(L + 64 * c + 32 * h));
                /* top bits of value 4c+i: bits 2c of H0; of value 16+4c+i: bits 2c of H1 */
                const __m256i tl = c == 0 ? _mm256_slli_epi16(h0, 4) : c == 1 ? _mm256_slli_epi16(h0, 2) : c == 2 ? h0 : _mm256_srli_epi16(h0, 2);
                const __m256i th = c == 0 ? _mm256_slli_epi16(h1, 4) : c == 1 ? _mm256_slli_epi16(h1, 2) : c == 2 ? h1 : _mm256_srli_epi16(h1, 2);
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(tl, m30));
                const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(th, m30));
#if VNNI
                s0 = DPBUSD(s0, lo, SUFFIX(bc32)(aq + 4 * c));
                s1 = DPBUSD(s1, hi, SUFFIX(bc32)(aq + 16 + 4 * c));
#else /* codes up to 63: two chunks' 16-bit products (each lane <= 16002) add before one vpmaddwd */
                const __m256i ml = _mm256_maddubs_epi16(lo, SUFFIX(bc32)(aq + 4 * c)), mh = _mm256_maddubs_epi16(hi, SUFFIX(bc32)(aq + 16 + 4 * c));
                if (c & 1) {
                    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_add_epi16(pl, ml), ones));
                    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_add_epi16(ph, mh), ones));
                } else
                    pl = ml, ph = mh;
#endif
            }
            const __m256 sc0f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 16 * (2 * s) + 8 * h))));
            const __m256 sc1f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 16 * (2 * s + 1) + 8 * h))));
            const __m256 isum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), sc0f, _mm256_mul_ps(_mm256_cvtepi32_ps(s1), sc1f));
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * h)));
            acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, f), isum, acc[h]);
        }
    }
}
K16_WALK(SUFFIX(q4k_one16), 2368, Q35_DT_Q4_K,
         SUFFIX(q4k_sb16)(grp + 2368 * sb, j->a.q + 256 * sb, j->a.d + 8 * sb, j->a.sp + 8 * sb, acc, pd, grp + 8 * sb * pfs, pfs))
K16_WALK(SUFFIX(q6k_one16), 3360, Q35_DT_Q6_K,
         SUFFIX(q6k_sb16)(grp + 3360 * sb, j->a.q + 256 * sb, j->a.d + 8 * sb, j->a.h + 16 * sb, acc, pd, grp + 8 * sb * pfs, pfs))
static void SUFFIX(mm_q4k_r16_dec)(const q35_mm_job *j, int64_t r0, int64_t r1) {
    if (j->n == 1) SUFFIX(q4k_one16)(j, r0, r1);
    else SUFFIX(mm_q4k_r16_dec4)(j, r0, r1);
}
static void SUFFIX(mm_q6k_r16_dec)(const q35_mm_job *j, int64_t r0, int64_t r1) {
    if (j->n == 1) SUFFIX(q6k_one16)(j, r0, r1);
    else SUFFIX(mm_q6k_r16_dec4)(j, r0, r1);
}

/* Q6_K prompts: each 8-row half group's codes decoded once, not once per token tile. The
 * decoding (two loads, shifts, masks and an or per chunk, ~5 vector operations) was about a third
 * of the tile's work with 4 tokens. A sub-block of the half is 352 bytes of the buffer: its codes
 * as the tiles read them, [half 0/1][chunk 0..3] 32 bytes each (values 16 half + 4 c + i of the 8
 * rows), then its scales: plain, sc[2s] and sc[2s+1] in both 16-bit halves of each row's lane and
 * (-32 sc[2s], -32 sc[2s+1]) as a 16-bit pair; with VNNI, sc[2s] and sc[2s+1] as floats. */
enum { Q6K_USUB = 352 };

static void SUFFIX(q6k_unpack8)(const uint8_t *grp, int64_t nsb, int hf, uint8_t *u) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
#if !VNNI
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
#endif
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = grp + 3360 * sb;
        for (int s = 0; s < 8; s++, u += Q6K_USUB) {
            const uint8_t *L = p + 288 + 384 * s + 32 * hf, *H = p + 288 + 384 * s + 256 + 32 * hf;
            UNROLL
            for (int half = 0; half < 2; half++) {
                const __m256i hh = _mm256_loadu_si256((const __m256i *)(H + 64 * half));
                UNROLL
                for (int c = 0; c < 4; c++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(L + 64 * c));
                    const __m256i n = half ? _mm256_srli_epi16(v, 4) : v;
                    /* top bits of value 4c+i (+16): bits 2c of H0 (H1), moved to bits 4..5 */
                    const __m256i tb = c == 0 ? _mm256_slli_epi16(hh, 4) : c == 1 ? _mm256_slli_epi16(hh, 2) : c == 2 ? hh : _mm256_srli_epi16(hh, 2);
                    _mm256_store_si256((__m256i *)(u + 32 * (4 * half + c)), _mm256_or_si256(_mm256_and_si256(n, m4), _mm256_and_si256(tb, m30)));
                }
            }
            const __m256i sc0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 16 * (2 * s) + 8 * hf)));
            const __m256i sc1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 16 * (2 * s + 1) + 8 * hf)));
#if VNNI
            _mm256_store_ps((float *)(u + 256), _mm256_cvtepi32_ps(sc0));
            _mm256_store_ps((float *)(u + 288), _mm256_cvtepi32_ps(sc1));
#else
            _mm256_store_si256((__m256i *)(u + 256), _mm256_or_si256(_mm256_and_si256(sc0, lo16), _mm256_slli_epi32(sc0, 16)));
            _mm256_store_si256((__m256i *)(u + 288), _mm256_or_si256(_mm256_and_si256(sc1, lo16), _mm256_slli_epi32(sc1, 16)));
            const __m256i z = _mm256_setzero_si256();
            const __m256i n0 = _mm256_sub_epi32(z, _mm256_slli_epi32(sc0, 5)), n1 = _mm256_sub_epi32(z, _mm256_slli_epi32(sc1, 5));
            _mm256_store_si256((__m256i *)(u + 320), _mm256_or_si256(_mm256_and_si256(n0, lo16), _mm256_slli_epi32(n1, 16)));
#endif
        }
    }
}

/* T tokens from t0 over a half group unpacked into u (q6k_unpack8); the per-block float step is
 * q6k_tile's. Without VNNI the whole block's integer, isum = sc0 (dot0 - 32 h0) + sc1 (dot1 - 32
 * h1), comes from vpmaddwd: (-32 sc0, -32 sc1) . (h0, h1) (|32 sc| <= 4096 and |h| <= 2032 fit
 * 16 bits), then each pair of chunks' 16-bit sums (<= 2 x 16002) times the half's scale in both
 * halves. It is the reference's integer (below 2^24), so one conversion gives its float. */
INLINE void SUFFIX(q6k_tile_u)(const uint8_t *grp, const uint8_t *u, int64_t nsb, int hf, const q35_act *a, int t0, const int T, float *Y,
                               int64_t rows, int64_t rbase, int64_t r0, int64_t r1) {
    __m256 acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();
    const size_t an = U_TT, a0 = q35_act_in(a->nb, U_TT, 0, t0);
    const int8_t *aq = a->q + 32 * a0; /* t0's tile: [nb][U_TT][32] */
    const int16_t *ah = a->h + 2 * a0; /* [nb][U_TT][2] */
    const float *ad = a->d + a0;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(grp + 3360 * sb + 16 * hf)));
        for (int s = 0; s < 8; s++, u += Q6K_USUB, aq += 32 * an, ah += 2 * an, ad += an) {
            __m256i isum[4];
#if VNNI
            __m256i s1[4];
            UNROLL
            for (int j = 0; j < T; j++) {
                isum[j] = _mm256_set1_epi32(-32 * ah[2 * j]);
                s1[j] = _mm256_set1_epi32(-32 * ah[2 * j + 1]);
            }
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m256i w0 = _mm256_load_si256((const __m256i *)(u + 32 * c)), w1 = _mm256_load_si256((const __m256i *)(u + 32 * (4 + c)));
                UNROLL
                for (int j = 0; j < T; j++) {
                    isum[j] = DPBUSD(isum[j], w0, SUFFIX(bc32)(aq + 32 * j + 4 * c));
                    s1[j] = DPBUSD(s1[j], w1, SUFFIX(bc32)(aq + 32 * j + 16 + 4 * c));
                }
            }
            const __m256 sc0f = _mm256_load_ps((const float *)(u + 256)), sc1f = _mm256_load_ps((const float *)(u + 288));
            UNROLL
            for (int j = 0; j < T; j++) {
                const __m256 is = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), sc0f, _mm256_mul_ps(_mm256_cvtepi32_ps(s1[j]), sc1f));
                acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(ad[j])), is, acc[j]);
            }
#else
            const __m256i off = _mm256_load_si256((const __m256i *)(u + 320));
            UNROLL
            for (int j = 0; j < T; j++) isum[j] = _mm256_madd_epi16(off, SUFFIX(bc32)((const int8_t *)(ah + 2 * j)));
            UNROLL
            for (int half = 0; half < 2; half++) {
                const __m256i sc2 = _mm256_load_si256((const __m256i *)(u + 256 + 32 * half));
                UNROLL
                for (int c = 0; c < 4; c += 2) {
                    const __m256i w0 = _mm256_load_si256((const __m256i *)(u + 32 * (4 * half + c)));
                    const __m256i w1 = _mm256_load_si256((const __m256i *)(u + 32 * (4 * half + c + 1)));
                    UNROLL
                    for (int j = 0; j < T; j++) {
                        const int8_t *x = aq + 32 * j + 16 * half + 4 * c;
                        const __m256i pp = _mm256_add_epi16(_mm256_maddubs_epi16(w0, SUFFIX(bc32)(x)), _mm256_maddubs_epi16(w1, SUFFIX(bc32)(x + 4)));
                        isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(pp, sc2));
                    }
                }
            }
            UNROLL
            for (int j = 0; j < T; j++) acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(ad[j])), _mm256_cvtepi32_ps(isum[j]), acc[j]);
#endif
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) SUFFIX(store8)(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

static void SUFFIX(q4k_unpack8)(const uint8_t *grp, int64_t nsb, int hf, uint8_t *u) {
    for (int64_t b = 0; b < 8 * nsb; b++, u += 256) SUFFIX(nibbles4)(grp + 2368 * (b / 8) + 320 + 256 * (b % 8) + 32 * hf, u);
}

U_DRIVER(SUFFIX(mm_q6k_r16), SUFFIX(mm_q6k_r16_dec), SUFFIX(q6k_unpack8), SUFFIX(q6k_tile_u), 256, Q6K_USUB, 8) /* 66 KiB */
U_DRIVER(SUFFIX(mm_q4k_r16), SUFFIX(mm_q4k_r16_dec), SUFFIX(q4k_unpack8), SUFFIX(q4k_tile_u), 256, 256, 16)       /* 48 KiB */

/* ---- float formats (row-major): 4 rows x up to 2 tokens ---- */
#if !VNNI
enum { WF32, WF16, WBF16 };

INLINE __m256 wload8(const void *w, int64_t i, const int kind) {
    if (kind == WF32) return _mm256_loadu_ps((const float *)w + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (kind == WF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
static float wscalar(const void *w, int64_t i, int kind) {
    if (kind == WF32) return ((const float *)w)[i];
    const uint16_t h = ((const uint16_t *)w)[i];
    return kind == WF16 ? q35_f16_to_f32(h) : q35_bf16_to_f32(h);
}
INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE void fp_tile(const q35_mm_job *jb, int64_t r, const int R, int t0, const int T, const int kind) {
    const int64_t cols = jb->cols;
    const size_t esz = kind == WF32 ? 4 : 2;
    const q35_pf_dist pd = q35_pf_for(kind == WF32 ? Q35_DT_F32 : kind == WF16 ? Q35_DT_F16 : Q35_DT_BF16);
    __m256 acc[4][2];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int t = 0; t < T; t++) acc[i][t] = _mm256_setzero_ps();
    const uint8_t *w0 = jb->w + (size_t)r * cols * esz;
    const float *x0 = jb->X + (int64_t)t0 * cols;
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        __m256 x[2], w[4];
        if (T == 1) /* the tile's R rows lie end to end: one stream of R * cols * esz bytes */
            q35_pf_lines(pd, w0 + (size_t)k * R * esz, (int)((8 * R * esz + 63) / 64));
        UNROLL
        for (int t = 0; t < T; t++) x[t] = _mm256_loadu_ps(x0 + (int64_t)t * cols + k);
        UNROLL
        for (int i = 0; i < R; i++) w[i] = wload8(w0 + (size_t)i * cols * esz, k, kind);
        UNROLL
        for (int i = 0; i < R; i++)
            UNROLL
            for (int t = 0; t < T; t++) acc[i][t] = _mm256_fmadd_ps(w[i], x[t], acc[i][t]);
    }
    for (int i = 0; i < R; i++)
        for (int t = 0; t < T; t++) {
            float s = hsum8(acc[i][t]);
            for (int64_t kk = k; kk < cols; kk++) s += wscalar(w0 + (size_t)i * cols * esz, kk, kind) * x0[(int64_t)t * cols + kk];
            jb->Y[(int64_t)(t0 + t) * jb->rows + r + i] = s;
        }
}

#define FP_T(R, kind)                                                            \
    if (j->n - t0 >= 2) fp_tile(j, r, R, t0, 2, kind);                          \
    else fp_tile(j, r, R, t0, 1, kind);
/* Rows per tile for one token: 3, as in mm_avx512.c (Zen 4, bench_kernels -i avx2 at n = 1: f16
 * 27-29 -> 31-32 GB/s, bf16 and f32 unchanged). The same bits whatever the tile height. */
#define FP_ROWS_ONE 3
#define FP_DRIVER(name, kind)                                                    \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {              \
        const int64_t RM = j->n == 1 ? FP_ROWS_ONE : 4;                          \
        for (int64_t r = r0; r < r1; r += RM) {                                  \
            const int64_t R = r1 - r < RM ? r1 - r : RM;                         \
            for (int t0 = 0; t0 < j->n; t0 += 2) {                               \
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
INLINE int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

INLINE float amax32(const float *x, int *bad) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4]; /* the loops unrolled: rolled, gcc 12 kept the arrays on the stack (16-byte stores
                  * read back as 32 bytes, which cannot forward): 44-51 ns a block, unrolled 10-14 */
    UNROLL
    for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 8 * i);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    /* v * 0 is NaN exactly for inf and NaN: such a group quantizes to zero, as in ref.c */
    const __m256 zero = _mm256_setzero_ps();
    const __m256 z = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(v[0], zero), _mm256_mul_ps(v[1], zero)),
                                   _mm256_add_ps(_mm256_mul_ps(v[2], zero), _mm256_mul_ps(v[3], zero)));
    *bad |= _mm256_movemask_ps(_mm256_cmp_ps(z, z, _CMP_UNORD_Q)) != 0;
    return _mm_cvtss_f32(m4);
}
INLINE void q32(const float *x, float idf, int8_t *q, int s[2]) {
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 id = _mm256_set1_ps(idf);
    __m256i qi[4];
    UNROLL
    for (int k = 0; k < 4; k++) qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id));
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, perm));
    s[0] = hsum_i32(_mm256_add_epi32(qi[0], qi[1]));
    s[1] = hsum_i32(_mm256_add_epi32(qi[2], qi[3]));
}
static void actq(const float *x, int t, int mult, int group, q35_act *a) { q35_actq_drive(x, t, mult, group, a, amax32, q32); }

static void rot(float *x, int64_t n) {
    __m256 sg[3], signs[16];
    for (int s = 0; s < 3; s++) {
        float f[8];
        for (int l = 0; l < 8; l++) f[l] = (l >> s) & 1 ? -1.0f : 1.0f;
        sg[s] = _mm256_loadu_ps(f);
    }
    for (int v = 0; v < 16; v++) {
        float f[8];
        for (int l = 0; l < 8; l++) {
            const int jj = 8 * v + l;
            f[l] = (Q35_Q4R_SIGNS[jj >> 5] >> (jj & 31)) & 1u ? -1.0f : 1.0f;
        }
        signs[v] = _mm256_loadu_ps(f);
    }
    const __m256 scale = _mm256_set1_ps(Q35_Q4R_SCALE);
    for (int64_t g = 0; g < n / 128; g++) {
        float *p = x + 128 * g;
        __m256 v[16];
        for (int i = 0; i < 16; i++) {
            v[i] = _mm256_mul_ps(_mm256_loadu_ps(p + 8 * i), signs[i]);
            v[i] = _mm256_fmadd_ps(v[i], sg[0], _mm256_permute_ps(v[i], 0xB1));
            v[i] = _mm256_fmadd_ps(v[i], sg[1], _mm256_permute_ps(v[i], 0x4E));
            v[i] = _mm256_fmadd_ps(v[i], sg[2], _mm256_permute2f128_ps(v[i], v[i], 1));
        }
        for (int h = 1; h < 16; h <<= 1)
            for (int i = 0; i < 16; i += 2 * h)
                for (int k = i; k < i + h; k++) {
                    const __m256 a = v[k], b = v[k + h];
                    v[k] = _mm256_add_ps(a, b);
                    v[k + h] = _mm256_sub_ps(a, b);
                }
        for (int i = 0; i < 16; i++) _mm256_storeu_ps(p + 8 * i, _mm256_mul_ps(v[i], scale));
    }
}

const q35_kern q35_kern_avx2 = {
    .mm = {[Q35_DT_F32] = {mm_f32, NULL}, [Q35_DT_F16] = {mm_f16, NULL}, [Q35_DT_BF16] = {mm_bf16, NULL},
           [Q35_DT_Q8_0] = {NULL, mm_q8_r16_plain}, [Q35_DT_Q4_0] = {NULL, mm_q4_r16_plain}, [Q35_DT_Q4R] = {NULL, mm_q4_r16_plain},
           [Q35_DT_Q4_K] = {NULL, mm_q4k_r16_plain}, [Q35_DT_Q6_K] = {NULL, mm_q6k_r16_plain}},
    .act_mult = {[Q35_DT_Q8_0] = 0, [Q35_DT_Q4_0] = -8, [Q35_DT_Q4R] = -8, [Q35_DT_Q4_K] = 1, [Q35_DT_Q6_K] = 1},
    .actq = actq,
    .act_tile = U_TT,
    .rot = rot,
};
/* for the AVX-VNNI table (mm_vnni_avx2.c) */
void q35_avx2_actq(const float *x, int t, int mult, int group, q35_act *a) { actq(x, t, mult, group, a); }
void q35_avx2_rot(float *x, int64_t n) { rot(x, n); }
void q35_avx2_mm_f32(const q35_mm_job *j, int64_t r0, int64_t r1) { mm_f32(j, r0, r1); }
void q35_avx2_mm_f16(const q35_mm_job *j, int64_t r0, int64_t r1) { mm_f16(j, r0, r1); }
void q35_avx2_mm_bf16(const q35_mm_job *j, int64_t r0, int64_t r1) { mm_bf16(j, r0, r1); }
#else
void q35_avx2_actq(const float *x, int t, int mult, int group, q35_act *a);
void q35_avx2_rot(float *x, int64_t n);
void q35_avx2_mm_f32(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_avx2_mm_f16(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_avx2_mm_bf16(const q35_mm_job *j, int64_t r0, int64_t r1);
const q35_kern q35_kern_avx2vnni = {
    .mm = {[Q35_DT_F32] = {q35_avx2_mm_f32, NULL}, [Q35_DT_F16] = {q35_avx2_mm_f16, NULL}, [Q35_DT_BF16] = {q35_avx2_mm_bf16, NULL},
           [Q35_DT_Q8_0] = {NULL, mm_q8_r16_vnni}, [Q35_DT_Q4_0] = {NULL, mm_q4_r16_vnni}, [Q35_DT_Q4R] = {NULL, mm_q4_r16_vnni},
           [Q35_DT_Q4_K] = {NULL, mm_q4k_r16_vnni}, [Q35_DT_Q6_K] = {NULL, mm_q6k_r16_vnni}},
    .act_mult = {[Q35_DT_Q8_0] = -128, [Q35_DT_Q4_0] = -8, [Q35_DT_Q4R] = -8, [Q35_DT_Q4_K] = 1, [Q35_DT_Q6_K] = 1},
    .actq = q35_avx2_actq,
    .act_tile = U_TT,
    .rot = q35_avx2_rot,
};
#endif
