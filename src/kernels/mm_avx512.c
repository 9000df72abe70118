/* AVX-512 (F/BW/VL/DQ + VNNI, BF16 where present) matrix products.
 * Integer formats read the R16 layout (kernels/quant.h): one 512-bit vector holds 4 quants of each
 * of 16 rows, so vpdpbusd with a broadcast group of 4 activation bytes sums 4 products per row in
 * its 32-bit lanes; a tile is 16 rows x up to 8 tokens, each weight vector unpacked once per tile.
 * The float steps per row and block are the scalar reference's (ref.c), so results are bitwise
 * equal to it. Float formats: 4 rows x up to 4 tokens of fp32 FMA per tile, row-major weights. */
#include <immintrin.h>
#include <string.h>

#include "kernels/mm.h"
#include "kernels/q6k_avx512.h"

#define INLINE static inline __attribute__((always_inline))
#include "kernels/unroll.h"

/* Masked store of 16 row results at rows rbase..rbase+15, keeping only [r0, r1). */
INLINE void store16(float *y, __m512 v, int64_t rbase, int64_t r0, int64_t r1) {
    int64_t lo = r0 - rbase, hi = r1 - rbase;
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    const __mmask16 m = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
    _mm512_mask_storeu_ps(y + rbase, m, v);
}

/* acc += w . (4 bytes at p, broadcast): GCC 12 does not fold the broadcast into vpdpbusd's
 * {1to16} memory operand and issues one vpbroadcastd per product instead. */
INLINE __m512i dpbusd_bc(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int8_t(*)[4])p));
    return acc;
}

static int64_t scale_bytes16(int64_t nb) { return (nb * 32 + 63) & ~(int64_t)63; }

/* acc[j] += (dw * ad[j]) * float(s[j]) for tokens j < T of one block: the reference's float step. */
INLINE void block_scale(__m512 *acc, __m512 dw, const float *ad, const __m512i *s, const int T) {
    UNROLL
    for (int j = 0; j < T; j++) {
        const __m512 f = _mm512_mul_ps(dw, _mm512_set1_ps(ad[j]));
        acc[j] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(s[j]), acc[j]);
    }
}


/* ---- Q4_0 / Q4R, R16 ---- */

/* acc + one block of one token: the block's scales sc (f16 d[16]), its chunks cq, the token's 32
 * activation bytes aq, their sum as and scale ad (the units' T == 1 step). */
INLINE __m512 q4_step1(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, int32_t as, float ad, __m512 acc) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
    __m512i slo = _mm512_set1_epi32(as), shi = _mm512_setzero_si512();
    UNROLL
    for (int c = 0; c < 4; c++) { /* high nibbles kept in place (16x, still < 256): one shift per block, not four */
        const __m512i v = _mm512_loadu_si512((const void *)(cq + 64 * c));
        slo = dpbusd_bc(slo, _mm512_and_si512(v, m4), aq + 4 * c);
        shi = dpbusd_bc(shi, _mm512_andnot_si512(m4, v), aq + 16 + 4 * c);
    }
    const __m512i s = _mm512_add_epi32(slo, _mm512_srai_epi32(shi, 4));
    return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(ad)), _mm512_cvtepi32_ps(s), acc);
}
/* The same for a Q8_0 block. */
INLINE __m512 q8_step1(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, int32_t as, float ad, __m512 acc) {
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
    __m512i s = _mm512_set1_epi32(as);
    UNROLL
    for (int c = 0; c < 8; c++) s = dpbusd_bc(s, _mm512_loadu_si512((const void *)(cq + 64 * c)), aq + 4 * c);
    return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(ad)), _mm512_cvtepi32_ps(s), acc);
}

/* One Q4_0 / Q4R block (scales sc, chunks cq) times T > 1 tokens: their activation bytes aq[T][32],
 * sums as[T] and scales ad[T], added into acc[T]. */
INLINE void q4_blk_any(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T, __m512 *acc,
                       const int U) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512 dw = U ? _mm512_load_ps((const float *)sc) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
    __m512i lo[4], hi[4];
    UNROLL
    for (int c = 0; c < 4; c++) {
        if (U) { /* unpacked (q4_unpack): float scales at sc, each chunk's low then high nibbles at cq */
            lo[c] = _mm512_load_si512((const void *)(cq + 128 * c));
            hi[c] = _mm512_load_si512((const void *)(cq + 128 * c + 64));
            continue;
        }
        const __m512i v = _mm512_loadu_si512((const void *)(cq + 64 * c));
        lo[c] = _mm512_and_si512(v, m4);
        hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    __m512i s[8];
    UNROLL
    for (int j = 0; j < T; j++) s[j] = _mm512_set1_epi32(as[j]);
    UNROLL
    for (int c = 0; c < 4; c++) {
        UNROLL
        for (int j = 0; j < T; j++) s[j] = dpbusd_bc(s[j], lo[c], aq + 32 * j + 4 * c);
        UNROLL
        for (int j = 0; j < T; j++) s[j] = dpbusd_bc(s[j], hi[c], aq + 32 * j + 16 + 4 * c);
    }
    block_scale(acc, dw, ad, s, T);
}
INLINE void q4_blk(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T, __m512 *acc) {
    q4_blk_any(sc, cq, aq, as, ad, T, acc, 0);
}
#define Q4_UNITS(cols) ((cols) / 32)
#define Q4_PD q35_pf_for(Q35_DT_Q4_0)

/* ---- Q8_0, R16 ---- */

/* The same for a Q8_0 block. */
INLINE void q8_blk(const uint8_t *sc, const uint8_t *cq, const int8_t *aq, const int32_t *as, const float *ad, const int T, __m512 *acc) {
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
    __m512i w[8];
    UNROLL
    for (int c = 0; c < 8; c++) w[c] = _mm512_loadu_si512((const void *)(cq + 64 * c));
    __m512i s[8];
    UNROLL
    for (int j = 0; j < T; j++) s[j] = _mm512_set1_epi32(as[j]);
    UNROLL
    for (int c = 0; c < 8; c++) {
        UNROLL
        for (int j = 0; j < T; j++) s[j] = dpbusd_bc(s[j], w[c], aq + 32 * j + 4 * c);
    }
    block_scale(acc, dw, ad, s, T);
}
#define Q8_UNITS(cols) ((cols) / 32)
#define Q8_PD q35_pf_for(Q35_DT_Q8_0)

/* ---- Q4_K, R16 (per super-block: d[16] dmin[16] sc[8][16] m[8][16], 8 x 4 chunks) ---- */

/* Sub-block s (32 columns) of the Q4_K super-block at p times T tokens (activation bytes aq[T][32]):
 * sa[j] = fma(sc, dot, sa[j]), the reference's step (ref.c; the tokens' scales wait for q4k_fold:
 * a super-block's blocks share one). */
INLINE void q4k_sub_any(const uint8_t *p, int s, const int8_t *aq, const int T, __m512 *sa, const uint8_t *uc) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512 scf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 64 + 16 * s))));
    const uint8_t *cq = p + 320 + 256 * s;
    __m512i dots[8];
    UNROLL
    for (int j = 0; j < T; j++) dots[j] = _mm512_setzero_si512();
    UNROLL
    for (int c = 0; c < 4; c++) {
        /* uc: the sub-block unpacked (q4k_unpack), each chunk's low then high nibbles */
        const __m512i v = uc ? _mm512_setzero_si512() : _mm512_loadu_si512((const void *)(cq + 64 * c));
        const __m512i lo = uc ? _mm512_load_si512((const void *)(uc + 128 * c)) : _mm512_and_si512(v, m4);
        const __m512i hi = uc ? _mm512_load_si512((const void *)(uc + 128 * c + 64)) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        UNROLL
        for (int j = 0; j < T; j++) dots[j] = dpbusd_bc(dots[j], lo, aq + 32 * j + 4 * c);
        UNROLL
        for (int j = 0; j < T; j++) dots[j] = dpbusd_bc(dots[j], hi, aq + 32 * j + 16 + 4 * c);
    }
    UNROLL
    for (int j = 0; j < T; j++) sa[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[j]), scf, sa[j]);
}
INLINE void q4k_sub(const uint8_t *p, int s, const int8_t *aq, const int T, __m512 *sa) { q4k_sub_any(p, s, aq, T, sa, NULL); }
/* The super-block's min term for T tokens: ma[j] = sum_s m[s] S_s, in integers by 4 vpdpwssd on
 * pairs of sub-blocks (m's of a pair in each row's lane as two 16-bit halves; sp: the token's pair
 * sums, q35_act, at sp[2 q step + j]). Exact, so it equals the reference's float sum of exact
 * products (ref.c), for 4 multiplies where the float steps took 8. */
INLINE void q4k_mins(const uint8_t *p, const int32_t *sp, size_t step, const int T, __m512 *ma) {
    __m512i mp[4];
    UNROLL
    for (int q = 0; q < 4; q++)
        mp[q] = _mm512_or_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 192 + 32 * q))),
                                _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 208 + 32 * q))), 16));
    UNROLL
    for (int j = 0; j < T; j++) {
        __m512i mi = _mm512_setzero_si512();
        UNROLL
        for (int q = 0; q < 4; q++) mi = _mm512_dpwssd_epi32(mi, mp[q], _mm512_set1_epi32(sp[2 * q * step + (size_t)j]));
        ma[j] = _mm512_cvtepi32_ps(mi);
    }
}
/* After a super-block's sub-blocks, with the token's scale da for the super-block:
 * acc = fma(da, fma(-dmin, ma, d * sa), acc). */
INLINE __m512 q4k_fold(const uint8_t *p, __m512 sa, __m512 ma, float da, __m512 acc) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 32)));
    return _mm512_fmadd_ps(_mm512_set1_ps(da), _mm512_fnmadd_ps(dmin, ma, _mm512_mul_ps(d, sa)), acc);
}
/* Super-block u (256 columns) of a group times T tokens of the tile at a0 (q35_act_at(a, 0, t0)). */
INLINE void q4k_unit(const uint8_t *grp, int64_t nsb, int64_t u, const q35_act *a, size_t a0, const int T, __m512 *acc, int64_t pfs,
                     q35_pf_dist pd) {
    (void)nsb;
    const uint8_t *p = grp + 2368 * u;
    __m512 sa[8], ma[8];
    UNROLL
    for (int j = 0; j < T; j++) sa[j] = _mm512_setzero_ps();
    for (int s = 0; s < 8; s++) {
        if (T == 1) q35_pf_lines(pd, grp + (8 * u + s) * pfs, 5); /* 320 >= pfs = 296 */
        const size_t base = a0 + (size_t)(8 * u + s) * (size_t)a->tt;
        q4k_sub(p, s, a->q + base * 32, T, sa);
    }
    q4k_mins(p, a->sp + a0 + (size_t)(8 * u) * (size_t)a->tt, (size_t)a->tt, T, ma);
    const float *ad = a->d + a0 + (size_t)(8 * u) * (size_t)a->tt; /* the super-block's scale per token */
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = q4k_fold(p, sa[j], ma[j], ad[j], acc[j]);
}
#define Q4K_UNITS(cols) ((cols) / 256)
#define Q4K_PFS(nu) q35_pf_step(2368, 8)
#define Q4K_PD q35_pf_for(Q35_DT_Q4_K)

/* ---- Q6_K, R16 (per super-block: d[16], sc[16][16], 8 x (L0..L3, H0, H1)) ---- */

/* One block's products for T tokens: codes w[8] (q35_q6k_codes512), its scales sc0f, sc1f and the
 * super-block's d; activation bytes aq[T][32] with their 16-value sums ah[T][2] and scales ad[T]
 * (rows of the [nb][n][..] arrays, a token apart). */
INLINE void q6k_dots(const __m512i *w, __m512 sc0f, __m512 sc1f, __m512 d, const int8_t *aq, const int16_t *ah, const float *ad, const int T,
                     __m512 *acc) {
    UNROLL
    for (int j = 0; j < T; j++) {
        __m512i s0 = _mm512_set1_epi32(-32 * ah[2 * j]);
        __m512i s1 = _mm512_set1_epi32(-32 * ah[2 * j + 1]);
        UNROLL
        for (int c = 0; c < 4; c++) {
            s0 = dpbusd_bc(s0, w[c], aq + 32 * j + 4 * c);
            s1 = dpbusd_bc(s1, w[c + 4], aq + 32 * j + 16 + 4 * c);
        }
        /* (float)(sc0 x s0 + sc1 x s1) without vpmulld: both products and their sum are integers
         * below 2^24 (ref.c), so the float product and the fused add of exact values are exact */
        const __m512 isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), sc0f, _mm512_mul_ps(_mm512_cvtepi32_ps(s1), sc1f));
        const __m512 f = _mm512_mul_ps(d, _mm512_set1_ps(ad[j]));
        acc[j] = _mm512_fmadd_ps(f, isum, acc[j]);
    }
}
INLINE void q6k_unit(const uint8_t *grp, int64_t nsb, int64_t u, const q35_act *a, size_t a0, const int T, __m512 *acc, int64_t pfs,
                     q35_pf_dist pd) {
    (void)nsb;
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    const int64_t sb = u / 8, s = u % 8;
    const uint8_t *p = grp + 3360 * sb;
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    const __m512 sc0f = q35_q6k_scale512(p, s, 0);
    const __m512 sc1f = q35_q6k_scale512(p, s, 1);
    if (T == 1) q35_pf_lines(pd, grp + u * pfs, 7); /* 448 >= pfs = 420 */
    __m512i w[8];
    q35_q6k_codes512(p + 288 + 384 * s, m4, m30, w);
    const size_t base = a0 + (size_t)u * (size_t)a->tt;
    q6k_dots(w, sc0f, sc1f, d, a->q + base * 32, a->h + 2 * base, a->d + base, T, acc);
}
#define Q6K_UNITS(cols) ((cols) / 32)
#define Q6K_PFS(nu) q35_pf_step(3360, 8)
#define Q6K_PD q35_pf_for(Q35_DT_Q6_K)

/* A group's tile: T tokens from t0 over every unit. */
#define R16_TILE(name, unit, PFS, PD)                                                                           \
    INLINE void name(const uint8_t *grp, int64_t nu, const q35_act *a, int t0, const int T, float *Y, int64_t rows, \
                     int64_t rbase, int64_t r0, int64_t r1) {                                                   \
        __m512 acc[8];                                                                                         \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) acc[j] = _mm512_setzero_ps();                                              \
        const int64_t pfs = PFS(nu);                                                                           \
        const q35_pf_dist pd = PD;                                                                             \
        const size_t a0 = q35_act_at(a, 0, t0);                                                                 \
        for (int64_t u = 0; u < nu; u++) unit(grp, nu, u, a, a0, T, acc, pfs, pd);                              \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) store16(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);              \
    }
/* One token over two groups (ga's rows at ra, gb's at rb) in lockstep: two weight streams. */
#define R16_PAIR(name, unit, PFS, PD)                                                                           \
    static void name(const uint8_t *ga, const uint8_t *gb, int64_t nu, const q35_act *a, float *Y, int64_t ra, int64_t rb, \
                     int64_t r0, int64_t r1) {                                                                  \
        __m512 acca[1] = {_mm512_setzero_ps()}, accb[1] = {_mm512_setzero_ps()};                               \
        const int64_t pfs = PFS(nu);                                                                           \
        const q35_pf_dist pd = PD;                                                                             \
        for (int64_t u = 0; u < nu; u++) {                                                                     \
            unit(ga, nu, u, a, 0, 1, acca, pfs, pd);                                                           \
            unit(gb, nu, u, a, 0, 1, accb, pfs, pd);                                                           \
        }                                                                                                      \
        store16(Y, acca[0], ra, r0, r1);                                                                       \
        store16(Y, accb[0], rb, r0, r1);                                                                       \
    }
R16_TILE(q4k_tile, q4k_unit, Q4K_PFS, Q4K_PD)
R16_TILE(q6k_tile, q6k_unit, Q6K_PFS, Q6K_PD)
R16_PAIR(q6k_pair, q6k_unit, Q6K_PFS, Q6K_PD)

/* Q4_K, one token over G (1 or 2) groups in lockstep (ga's rows at ra, gb's at rb; gb unused when
 * G == 1): the sub-blocks of the groups alternate (a super-block of one group, then of the other,
 * generated 1-3% slower), the activations walked by pointer and a fixed count of lines prefetched
 * per sub-block, as LEAN_WALK below. With one stream (AMD) this replaces the tile's unit, which
 * located every sub-block's activations from its index. In L2 (bench_kernels --overlap, three
 * rounds) 46.0-47.6 -> 47.0-48.8 GB/s. (On the Intel VM Q6_K measured slower walked this way, 43-46
 * -> 38-40 GB/s, for no reason found, so its pair keeps the units; on Zen 4 its one-group walk is
 * faster: q6k_one below.) */
#define Q4K_WALK(name, G)                                                                                      \
    static void name(const uint8_t *ga, const uint8_t *gb, int64_t nsb, const q35_act *a, float *Y, int64_t ra, int64_t rb, \
                     int64_t r0, int64_t r1) {                                                                  \
        __m512 acca = _mm512_setzero_ps(), accb = _mm512_setzero_ps();                                         \
        const int64_t pfs = Q4K_PFS(nsb);                                                                      \
        const q35_pf_dist pd = Q4K_PD;                                                                         \
        const int8_t *aq = a->q; /* [nb][32]: one token */                                                     \
        const float *ad = a->d;                                                                                \
        const uint8_t *fa = ga, *fb = gb; /* the prefetch cursors: a sub-block's share of the stream each step */ \
        for (int64_t u = 0; u < nsb; u++) {                                                                    \
            const uint8_t *pa = ga + 2368 * u, *pb = G == 2 ? gb + 2368 * u : NULL;                            \
            __m512 saa = _mm512_setzero_ps(), maa, sab = saa, mab;                                             \
            for (int s = 0; s < 8; s++) {                                                                      \
                q35_pf_lines(pd, fa, 5); /* 320 >= pfs = 296 */                                                \
                fa += pfs;                                                                                     \
                if (G == 2) q35_pf_lines(pd, fb, 5), fb += pfs;                                                \
                q4k_sub(pa, s, aq, 1, &saa);                                                                   \
                if (G == 2) q4k_sub(pb, s, aq, 1, &sab);                                                       \
                aq += 32;                                                                                      \
            }                                                                                                  \
            q4k_mins(pa, a->sp + 8 * u, 1, 1, &maa);                                                           \
            if (G == 2) q4k_mins(pb, a->sp + 8 * u, 1, 1, &mab);                                               \
            acca = q4k_fold(pa, saa, maa, ad[8 * u], acca);                                                    \
            if (G == 2) accb = q4k_fold(pb, sab, mab, ad[8 * u], accb);                                        \
        }                                                                                                      \
        store16(Y, acca, ra, r0, r1);                                                                          \
        if (G == 2) store16(Y, accb, rb, r0, r1);                                                              \
    }
Q4K_WALK(q4k_pair, 2)
Q4K_WALK(q4k_one, 1)

/* Q6_K, one token over one group (AMD's one weight stream), walked as Q4K_WALK: the super-block's
 * d converted once, not per block, the activations by pointer, a fixed count of lines prefetched
 * per block. Zen 4, against the tile's unit (q6k_unit, which locates every block from its index):
 * in L2 (bench_kernels --overlap -i avx512 q6_k, three rounds) 38.8-48.9 -> 49.1-50.0 GB/s; the
 * LM head from memory (--head) 22.9-24.8 -> 24.6-28.0 GB/s. */
static void q6k_one(const uint8_t *ga, const uint8_t *gb, int64_t nb, const q35_act *a, float *Y, int64_t ra, int64_t rb, int64_t r0,
                    int64_t r1) {
    (void)gb, (void)rb;
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    __m512 acc = _mm512_setzero_ps();
    const int64_t pfs = Q6K_PFS(nb);
    const q35_pf_dist pd = Q6K_PD;
    const int8_t *aq = a->q; /* [nb][32]: one token */
    const int16_t *ah = a->h; /* [nb][2] */
    const float *ad = a->d;
    const uint8_t *fa = ga; /* the prefetch cursor: a block's share of the stream each step */
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        const uint8_t *p = ga + 3360 * sb;
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
        for (int s = 0; s < 8; s++, aq += 32, ah += 2, ad++) {
            q35_pf_lines(pd, fa, 7); /* 448 >= pfs = 420 */
            fa += pfs;
            const __m512 sc0f = q35_q6k_scale512(p, s, 0);
            const __m512 sc1f = q35_q6k_scale512(p, s, 1);
            __m512i w[8];
            q35_q6k_codes512(p + 288 + 384 * s, m4, m30, w);
            q6k_dots(w, sc0f, sc1f, d, aq, ah, ad, 1, &acc);
        }
    }
    store16(Y, acc, ra, r0, r1);
}

/* One token of Q4_0 / Q4R and Q8_0 walks each run of 32 blocks by pointer (kernels/quant.h) instead
 * of locating every block from its index (as Q6_K's pair still does), and prefetches a fixed count of lines per
 * block: a third fewer instructions per block. Same steps, same bits. Matrices in L2
 * (bench_kernels --overlap, 1 thread, two streams): Q4_0 35 -> 48-51 GB/s, Q8_0 57-61 -> 74; from
 * DRAM the stream is the limit, and generation gained 0-10% (docs/speed.md, "Lean single-token
 * pairs"). */

/* One token over G (1 or 2) groups of nb blocks of QB quant bytes in lockstep (ga's rows at ra, gb's
 * at rb; gb unused when G == 1). */
#define LEAN_WALK(name, step, QB, NL, PD, G)                                                                      \
    static void name(const uint8_t *ga, const uint8_t *gb, int64_t nb, const q35_act *a, float *Y, int64_t ra, int64_t rb, \
                     int64_t r0, int64_t r1) {                                                                  \
        _Static_assert(NL * 64 >= QB + 33, "q35_pf_lines must cover a step");                                  \
        __m512 acca = _mm512_setzero_ps(), accb = _mm512_setzero_ps();                                         \
        const int64_t pfs = q35_pf_step(scale_bytes16(nb) + QB * nb, nb); /* QB + 32, or QB + 33 */            \
        const q35_pf_dist pd = PD;                                                                             \
        const int8_t *aq = a->q; /* [nb][32]: one token */                                                     \
        const int32_t *as = a->s;                                                                              \
        const float *ad = a->d;                                                                                \
        const uint8_t *pa = ga, *pb = gb; /* the prefetch cursors: a block's share of the stream each step */  \
        for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {                                                     \
            const int64_t len = q35_r16_run_len(nb, b0), off = q35_r16_run_at(b0, QB);                        \
            const uint8_t *sa = ga + off, *sb = G == 2 ? gb + off : NULL; /* the run's scales: [len][16] f16 */ \
            const uint8_t *ca = sa + q35_r16_run_scale_bytes(len), *cb = G == 2 ? sb + q35_r16_run_scale_bytes(len) : NULL; \
            for (int64_t i = 0; i < len; i++) {                                                                \
                q35_pf_lines(pd, pa, NL);                                                                          \
                pa += pfs;                                                                                     \
                if (G == 2) q35_pf_lines(pd, pb, NL), pb += pfs;                                                   \
                acca = step(sa + 32 * i, ca + QB * i, aq, *as, *ad, acca);                                     \
                if (G == 2) accb = step(sb + 32 * i, cb + QB * i, aq, *as, *ad, accb);                         \
                aq += 32, as++, ad++;                                                                          \
            }                                                                                                  \
        }                                                                                                      \
        store16(Y, acca, ra, r0, r1);                                                                          \
        if (G == 2) store16(Y, accb, rb, r0, r1);                                                              \
    }
LEAN_WALK(q4_pair, q4_step1, 256, 5, Q4_PD, 2)
LEAN_WALK(q8_pair, q8_step1, 512, 9, Q8_PD, 2)
LEAN_WALK(q4_one, q4_step1, 256, 5, Q4_PD, 1)
LEAN_WALK(q8_one, q8_step1, 512, 9, Q8_PD, 1)
/* A group's tile of Q4_0 / Q4R or Q8_0: T tokens from t0, each run of 32 blocks walked by pointer
 * (scales, chunks, and the tokens' activations a block apart) as the walks above; locating every
 * block from its index took ~20 scalar operations a block, which on Intel cores share ports with the
 * vector work (docs/speed.md "AVX2 only"). One token (the tail of a prompt's tokens) takes the
 * single-token step, without prefetch. */
#define LEAN_TILE(name, blk, step, QB)                                                                         \
    INLINE void name(const uint8_t *grp, int64_t nb, const q35_act *a, int t0, const int T, float *Y, int64_t rows, \
                     int64_t rbase, int64_t r0, int64_t r1) {                                                   \
        __m512 acc[8];                                                                                         \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) acc[j] = _mm512_setzero_ps();                                              \
        const size_t an = (size_t)a->tt, a0 = q35_act_at(a, 0, t0);                                             \
        const int8_t *aq = a->q + 32 * a0; /* t0's tile: [nb][tt][32] */                                        \
        const int32_t *as = a->s + a0;                                                                         \
        const float *ad = a->d + a0;                                                                           \
        for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {                                                     \
            const int64_t len = q35_r16_run_len(nb, b0);                                                       \
            const uint8_t *sp = grp + q35_r16_run_at(b0, QB), *cp = sp + q35_r16_run_scale_bytes(len);         \
            for (int64_t i = 0; i < len; i++) {                                                                \
                if (T == 1) acc[0] = step(sp + 32 * i, cp + QB * i, aq, *as, *ad, acc[0]);                     \
                else blk(sp + 32 * i, cp + QB * i, aq, as, ad, T, acc);                                        \
                aq += 32 * an, as += an, ad += an;                                                             \
            }                                                                                                  \
        }                                                                                                      \
        UNROLL                                                                                                 \
        for (int j = 0; j < T; j++) store16(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);              \
    }
LEAN_TILE(q4_tile, q4_blk, q4_step1, 256)
LEAN_TILE(q8_tile, q8_blk, q8_step1, 512)
typedef void (*one_token_fn)(const uint8_t *, const uint8_t *, int64_t, const q35_act *, float *, int64_t, int64_t, int64_t, int64_t);

/* Loop over 16-row groups and token tiles of up to 8. A single token with q35_pf_streams == 2
 * walks the first and the second half of the groups in lockstep (pair), so the memory sees two
 * weight streams (docs/speed.md, "Two weight streams, again"); with one stream, a format with a
 * one-group walk (one, else NULL) takes the groups in turn through it. */
#define R16_DRIVER(name, tile, pair, one, UNITS)                                                                   \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        const int64_t nu = UNITS(j->cols);                                                                     \
        int64_t g = r0 / 16;                                                                                   \
        const one_token_fn onef = one;                                                                         \
        if (j->n == 1 && q35_pf_streams == 2) {                                                                \
            const int64_t ng = (r1 + 15) / 16 - g, h = (ng + 1) / 2;                                           \
            for (int64_t k = 0; k < ng / 2; k++)                                                               \
                pair(j->w + (size_t)(g + k) * gb, j->w + (size_t)(g + h + k) * gb, nu, &j->a, j->Y, 16 * (g + k), \
                     16 * (g + h + k), r0, r1);                                                                \
            if (!(ng & 1)) return;                                                                             \
            g += h - 1; /* the first half's last group, unpaired */                                            \
            if (onef) onef(j->w + (size_t)g * gb, NULL, nu, &j->a, j->Y, 16 * g, 0, r0, r1);                   \
            else tile(j->w + (size_t)g * gb, nu, &j->a, 0, 1, j->Y, j->rows, 16 * g, r0, r1);                   \
            return;                                                                                            \
        }                                                                                                      \
        if (j->n == 1 && onef) {                                                                               \
            for (; g * 16 < r1; g++) onef(j->w + (size_t)g * gb, NULL, nu, &j->a, j->Y, 16 * g, 0, r0, r1);    \
            return;                                                                                            \
        }                                                                                                      \
        for (; g * 16 < r1; g++) {                                                                             \
            const uint8_t *grp = j->w + (size_t)g * gb;                                                        \
            for (int t0 = 0; t0 < j->n; t0 += 8) TILES8(j->n - t0, tile, (grp, nu, &j->a, t0), j->Y, j->rows, 16 * g, r0, r1); \
        }                                                                                                      \
    }
R16_DRIVER(mm_q4_r16_dec, q4_tile, q4_pair, q4_one, Q4_UNITS)
R16_DRIVER(mm_q8_r16, q8_tile, q8_pair, q8_one, Q8_UNITS)
R16_DRIVER(mm_q4k_r16_dec, q4k_tile, q4k_pair, q4k_one, Q4K_UNITS)
R16_DRIVER(mm_q6k_r16_dec, q6k_tile, q6k_pair, q6k_one, Q6K_UNITS)

/* Prompts of MIN_N tokens or more over rows of up to U_MAX_COLS columns: each
 * group's weights made ready once into a stack buffer (at most 110 KiB), not again for every 8-token
 * tile, where it took 10-15% of the tile's vector operations: Q4_0/Q4R and Q4_K nibbles masked
 * apart (an and, a shift and an and per chunk), Q6_K codes decoded (q35_q6k_codes512). The tiles
 * walk the unpacked blocks, the activations and the packed scales by pointer; their steps are the
 * packed tiles'. Shorter prompts and longer rows take those (mm_*_r16_dec). */
enum { U_MAX_COLS = 6144 };

/* A block's 4 chunks (chunk c at cq + 64 c) as low then high nibbles, 64 bytes each, at u + 128 c
 * (Q4_0/Q4R blocks and Q4_K sub-blocks alike). */
INLINE void nibbles4(const uint8_t *cq, uint8_t *u) {
    const __m512i m4 = _mm512_set1_epi8(15);
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_loadu_si512((const void *)(cq + 64 * c));
        _mm512_store_si512((void *)(u + 128 * c), _mm512_and_si512(v, m4));
        _mm512_store_si512((void *)(u + 128 * c + 64), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
}
static void q4_unpack(const uint8_t *grp, int64_t nb, uint8_t *u) { /* [block][576]: 4 x (lo, hi) chunks, float scales */
    for (int64_t b0 = 0; b0 < nb; b0 += Q35_R16_RUN) {
        const int64_t len = q35_r16_run_len(nb, b0);
        const uint8_t *sp = grp + q35_r16_run_at(b0, 256), *cp = sp + q35_r16_run_scale_bytes(len);
        for (int64_t i = 0; i < len; i++, u += 576) {
            nibbles4(cp + 256 * i, u);
            _mm512_store_ps((float *)(u + 512), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sp + 32 * i))));
        }
    }
}
static void q4k_unpack(const uint8_t *grp, int64_t nb, uint8_t *u) { /* [sub-block][512]: 4 x (lo, hi) chunks */
    for (int64_t b = 0; b < nb; b++, u += 512) nibbles4(grp + 2368 * (b / 8) + 320 + 256 * (b % 8), u);
}
static void q6k_unpack(const uint8_t *grp, int64_t nb, uint8_t *u) { /* [block][512]: w[8] codes 0..63 */
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    for (int64_t b = 0; b < nb; b++, u += 512) {
        __m512i w[8];
        q35_q6k_codes512(grp + 3360 * (b / 8) + 288 + 384 * (b % 8), m4, m30, w);
        UNROLL
        for (int c = 0; c < 8; c++) _mm512_store_si512((void *)(u + 64 * c), w[c]);
    }
}

/* The unpacked tiles: T tokens from t0 over the nb blocks at u. */
INLINE void q4_tile_u(const uint8_t *grp, const uint8_t *u, int64_t nb, const q35_act *a, int t0, const int T, float *Y, int64_t rows,
                      int64_t rbase, int64_t r0, int64_t r1) {
    (void)grp;
    __m512 acc[8] = {0}; /* (all set: gcc 12 cannot see that only acc[0..T) are read) */
    const size_t an = (size_t)a->tt, a0 = q35_act_at(a, 0, t0);
    const int8_t *aq = a->q + 32 * a0; /* t0's tile: [nb][tt][32] */
    const int32_t *as = a->s + a0;
    const float *ad = a->d + a0;
    for (int64_t b = 0; b < nb; b++, u += 576, aq += 32 * an, as += an, ad += an) q4_blk_any(u + 512, u, aq, as, ad, T, acc, 1);
    UNROLL
    for (int j = 0; j < T; j++) store16(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}
INLINE void q4k_tile_u(const uint8_t *grp, const uint8_t *u, int64_t nb, const q35_act *a, int t0, const int T, float *Y, int64_t rows,
                       int64_t rbase, int64_t r0, int64_t r1) {
    __m512 acc[8] = {0};
    const size_t an = (size_t)a->tt, a0 = q35_act_at(a, 0, t0);
    const int8_t *aq = a->q + 32 * a0;
    const float *ad = a->d + a0;
    const int32_t *sp = a->sp + a0;
    for (int64_t sb = 0; sb < nb / 8; sb++, sp += 8 * an) {
        const uint8_t *p = grp + 2368 * sb;
        __m512 sa[8], ma[8];
        float das[8];
        UNROLL
        for (int j = 0; j < T; j++) sa[j] = _mm512_setzero_ps();
        UNROLL
        for (int j = 0; j < T; j++) das[j] = ad[j]; /* the super-block's scale per token (block 8 sb) */
        for (int s = 0; s < 8; s++, u += 512, aq += 32 * an, ad += an) q4k_sub_any(p, s, aq, T, sa, u);
        q4k_mins(p, sp, an, T, ma);
        UNROLL
        for (int j = 0; j < T; j++) acc[j] = q4k_fold(p, sa[j], ma[j], das[j], acc[j]);
    }
    UNROLL
    for (int j = 0; j < T; j++) store16(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}
INLINE void q6k_tile_u(const uint8_t *grp, const uint8_t *u, int64_t nb, const q35_act *a, int t0, const int T, float *Y, int64_t rows,
                       int64_t rbase, int64_t r0, int64_t r1) {
    __m512 acc[8] = {0};
    const size_t an = (size_t)a->tt, a0 = q35_act_at(a, 0, t0);
    const int8_t *aq = a->q + 32 * a0; /* t0's tile: [nb][tt][32] */
    const int16_t *ah = a->h + 2 * a0; /* [nb][tt][2] */
    const float *ad = a->d + a0;
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        const uint8_t *p = grp + 3360 * sb;
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
        for (int s = 0; s < 8; s++, u += 512, aq += 32 * an, ah += 2 * an, ad += an) {
            const __m512 sc0f = q35_q6k_scale512(p, s, 0);
            const __m512 sc1f = q35_q6k_scale512(p, s, 1);
            __m512i w[8];
            UNROLL
            for (int c = 0; c < 8; c++) w[c] = _mm512_load_si512((const void *)(u + 64 * c));
            q6k_dots(w, sc0f, sc1f, d, aq, ah, ad, T, acc);
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) store16(Y + (int64_t)(t0 + j) * rows, acc[j], rbase, r0, r1);
}

#define U_DRIVER(name, dec, unpack, tile, UBLK, MIN_N, ON)                                                     \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        if (!(ON) || j->n < MIN_N || j->cols > U_MAX_COLS) {                                                   \
            dec(j, r0, r1);                                                                                    \
            return;                                                                                            \
        }                                                                                                      \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        const int64_t nb = j->cols / 32;                                                                       \
        _Alignas(64) uint8_t u[U_MAX_COLS / 32 * UBLK]; /* [block][UBLK] of one group */                      \
        for (int64_t g = r0 / 16; g * 16 < r1; g++) {                                                          \
            const uint8_t *grp = j->w + (size_t)g * gb;                                                        \
            unpack(grp, nb, u);                                                                                \
            for (int t0 = 0; t0 < j->n; t0 += 8) TILES8(j->n - t0, tile, (grp, u, nb, &j->a, t0), j->Y, j->rows, 16 * g, r0, r1); \
        }                                                                                                      \
    }
/* MIN_N: bench_kernels -i avx512 with Q35_AMX=0, 1 thread, unpacked against packed tiles (GFLOP/s):
 * Q4_0 n=32 306-313 / 315-320, n=48 341 / 329-331; Q4_K n=48 298 / 310-312, n=64 308-321 /
 * 306-315, n=128 318-330 / 299-304; Q6_K n=24 197-199 / 192-198, n=32 214-218 / 207-212 (Intel VM).
 * ON: on Zen 4 the Q4 formats' packed tiles are faster at every n (q35_avx512_q4_unpack, mm.h):
 * n=128 Q4_0 318-328 / 334-340, Q4_K 282-293 / 298-305; Q6_K's unpacked tiles stay faster there,
 * 264-266 / 252-253. */
U_DRIVER(mm_q4_r16, mm_q4_r16_dec, q4_unpack, q4_tile_u, 576, 48, q35_avx512_q4_unpack)
U_DRIVER(mm_q4k_r16, mm_q4k_r16_dec, q4k_unpack, q4k_tile_u, 512, 96, q35_avx512_q4_unpack)
U_DRIVER(mm_q6k_r16, mm_q6k_r16_dec, q6k_unpack, q6k_tile_u, 512, 32, 1)

/* ---- float formats, row-major: 4 rows x up to 4 tokens per tile ---- */

enum { WF32, WF16, WBF16 };

INLINE __m512 wload(const void *w, int64_t i, const int kind, __mmask16 m) {
    if (kind == WF32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    if (kind == WF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE void fp_tile(const q35_mm_job *jb, int64_t r, const int R, int t0, const int T, const int kind) {
    const int64_t cols = jb->cols;
    const size_t esz = kind == WF32 ? 4 : 2;
    const q35_pf_dist pd = q35_pf_for(kind == WF32 ? Q35_DT_F32 : kind == WF16 ? Q35_DT_F16 : Q35_DT_BF16);
    __m512 acc[4][4];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int t = 0; t < T; t++) acc[i][t] = _mm512_setzero_ps();
    const uint8_t *w0 = jb->w + (size_t)r * cols * esz;
    const float *x0 = jb->X + (int64_t)t0 * cols;
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16) {
        __m512 x[4], w[4];
        if (T == 1) /* the tile's R rows lie end to end: one stream of R * cols * esz bytes */
            q35_pf_lines(pd, w0 + (size_t)k * R * esz, (int)((16 * R * esz + 63) / 64));
        UNROLL
        for (int t = 0; t < T; t++) x[t] = _mm512_loadu_ps(x0 + (int64_t)t * cols + k);
        UNROLL
        for (int i = 0; i < R; i++) w[i] = wload(w0 + (size_t)i * cols * esz, k, kind, 0xffff);
        UNROLL
        for (int i = 0; i < R; i++)
            UNROLL
            for (int t = 0; t < T; t++) acc[i][t] = _mm512_fmadd_ps(w[i], x[t], acc[i][t]);
    }
    if (k < cols) {
        const __mmask16 m = (__mmask16)((1u << (cols - k)) - 1u);
        __m512 x[4], w[4];
        UNROLL
        for (int t = 0; t < T; t++) x[t] = _mm512_maskz_loadu_ps(m, x0 + (int64_t)t * cols + k);
        UNROLL
        for (int i = 0; i < R; i++) w[i] = wload(w0 + (size_t)i * cols * esz, k, kind, m);
        UNROLL
        for (int i = 0; i < R; i++)
            UNROLL
            for (int t = 0; t < T; t++) acc[i][t] = _mm512_fmadd_ps(w[i], x[t], acc[i][t]);
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int t = 0; t < T; t++) jb->Y[(int64_t)(t0 + t) * jb->rows + r + i] = _mm512_reduce_add_ps(acc[i][t]);
}

#define FP_T(R, kind)                                                            \
    switch (j->n - t0 < 4 ? j->n - t0 : 4) {                                     \
    case 1: fp_tile(j, r, R, t0, 1, kind); break;                                \
    case 2: fp_tile(j, r, R, t0, 2, kind); break;                                \
    case 3: fp_tile(j, r, R, t0, 3, kind); break;                                \
    default: fp_tile(j, r, R, t0, 4, kind); break;                               \
    }
/* Rows per tile for one token (generation). Each row is its own stream; on Zen 4 four of them
 * read 22 GB/s where three read 31 (0.8B bf16 generation at 1 thread 14.8 -> 20.4 tok/s; 2B within
 * 3%; docs/speed.md). A row's sums do not depend on the tile height: results are the same bits. */
#define FP_ROWS_ONE 3
#define FP_DRIVER(name, kind)                                                    \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {              \
        const int64_t RM = j->n == 1 ? FP_ROWS_ONE : 4;                          \
        for (int64_t r = r0; r < r1; r += RM) {                                  \
            const int64_t R = r1 - r < RM ? r1 - r : RM;                         \
            for (int t0 = 0; t0 < j->n; t0 += 4) {                               \
                if (R == 4) { FP_T(4, kind) }                                    \
                else if (R == 3) { FP_T(3, kind) }                               \
                else if (R == 2) { FP_T(2, kind) }                               \
                else { FP_T(1, kind) }                                           \
            }                                                                    \
        }                                                                        \
    }
FP_DRIVER(mm_f32_tiles, WF32)
FP_DRIVER(mm_f16_tiles, WF16)
FP_DRIVER(mm_bf16_tiles, WBF16)

/* ---- float formats, many tokens (q35_matmul_batch only): 16-row panels ----
 * For FP_PANEL_MIN_N tokens or more, 16 weight rows x PANEL_K columns are converted to fp32 and
 * transposed once into P[k][row] (16 KiB, in L1), then every token tile of up to 16 tokens runs
 * one weight load and T broadcast FMAs per column: acc[t][row] += P[k][row] * x[t][k]. The sums
 * run over k in order and pass through Y between column chunks (exactly). */
enum { PANEL_K = 256, PANEL_T = 16 };
#define FP_PANEL_MIN_N 8

/* The 16 rows of v, transposed, stored at dst[c][16] for c < 16. */
INLINE void tr16_store(__m512 *r, float *dst) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int b = 0; b < 4; b++) {
        r[4 * b] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * b]), _mm512_castps_pd(t[4 * b + 2])));
        r[4 * b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * b]), _mm512_castps_pd(t[4 * b + 2])));
        r[4 * b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * b + 1]), _mm512_castps_pd(t[4 * b + 3])));
        r[4 * b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * b + 1]), _mm512_castps_pd(t[4 * b + 3])));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 x0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), y0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        const __m512 x1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), y1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        _mm512_store_ps(dst + 16 * c, _mm512_shuffle_f32x4(x0, x1, 0x88));
        _mm512_store_ps(dst + 16 * (8 + c), _mm512_shuffle_f32x4(x0, x1, 0xdd));
        _mm512_store_ps(dst + 16 * (4 + c), _mm512_shuffle_f32x4(y0, y1, 0x88));
        _mm512_store_ps(dst + 16 * (12 + c), _mm512_shuffle_f32x4(y0, y1, 0xdd));
    }
}

/* P[k][i] = W[r + i][k0 + k] for k < kc, i < nr; 0 for the rows past nr. */
INLINE void panel_fill(const q35_mm_job *jb, int64_t r, int nr, int64_t k0, int kc, const int kind, float *P) {
    const size_t esz = kind == WF32 ? 4 : 2;
    for (int kb = 0; kb < kc; kb += 16) {
        const int m = kc - kb < 16 ? kc - kb : 16;
        const __mmask16 mk = (__mmask16)((1u << m) - 1u);
        __m512 v[16];
        for (int i = 0; i < 16; i++)
            v[i] = i < nr ? wload(jb->w + (size_t)(r + i) * (size_t)jb->cols * esz, k0 + kb, kind, mk) : _mm512_setzero_ps();
        tr16_store(v, P + 16 * kb);
    }
}

INLINE void panel_tile(const q35_mm_job *jb, const float *P, int64_t r, __mmask16 mr, int64_t k0, int kc, int t0, const int T) {
    const int64_t cols = jb->cols, rows = jb->rows;
    const float *x = jb->X + (int64_t)t0 * cols + k0;
    float *y = jb->Y + (int64_t)t0 * rows + r;
    __m512 acc[PANEL_T] = {0}; /* (all set: the tail copy has a run-time T) */
    UNROLL
    for (int t = 0; t < T; t++) acc[t] = k0 ? _mm512_maskz_loadu_ps(mr, y + (int64_t)t * rows) : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const __m512 w = _mm512_load_ps(P + 16 * k);
        UNROLL
        for (int t = 0; t < T; t++) acc[t] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[(int64_t)t * cols + k]), acc[t]);
    }
    UNROLL
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (int64_t)t * rows, mr, acc[t]);
}

/* The last tile of fewer than PANEL_T tokens, with a run-time count (one copy, not one per count). */
static __attribute__((noinline)) void panel_tile_tail(const q35_mm_job *jb, const float *P, int64_t r, __mmask16 mr, int64_t k0, int kc, int t0,
                                                      int T) {
    panel_tile(jb, P, r, mr, k0, kc, t0, T);
}

INLINE void fp_panel(const q35_mm_job *j, int64_t r0, int64_t r1, const int kind) {
    _Alignas(64) float P[PANEL_K * 16]; /* [k][16 rows] */
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        const __mmask16 mr = (__mmask16)((1u << nr) - 1u);
        for (int64_t k0 = 0; k0 < j->cols; k0 += PANEL_K) {
            const int kc = j->cols - k0 < PANEL_K ? (int)(j->cols - k0) : PANEL_K;
            panel_fill(j, r, nr, k0, kc, kind, P);
            for (int t0 = 0; t0 < j->n; t0 += PANEL_T) {
                if (j->n - t0 >= PANEL_T) panel_tile(j, P, r, mr, k0, kc, t0, PANEL_T);
                else panel_tile_tail(j, P, r, mr, k0, kc, t0, j->n - t0);
            }
        }
    }
}

#define FP_CHOOSE(name, kind)                                                    \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {              \
        if (j->batch && j->n >= FP_PANEL_MIN_N) fp_panel(j, r0, r1, kind);       \
        else name##_tiles(j, r0, r1);                                            \
    }
FP_CHOOSE(mm_f32, WF32)
FP_CHOOSE(mm_f16, WF16)
FP_CHOOSE(mm_bf16, WBF16)

/* ---- bf16 weights x bf16 activations (vdpbf16ps), row-major: 4 rows x up to 4 tokens ---- */

INLINE void bfd_tile(const q35_mm_job *jb, int64_t r, const int R, int t0, const int T) {
    const int64_t cols = jb->cols;
    __m512 acc[4][4];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int t = 0; t < T; t++) acc[i][t] = _mm512_setzero_ps();
    const uint16_t *w0 = (const uint16_t *)jb->w + (size_t)r * cols, *x0 = jb->xb + (size_t)t0 * cols;
    for (int64_t k = 0; k < cols; k += 32) {
        const __mmask32 m = cols - k >= 32 ? 0xffffffffu : (__mmask32)((1u << (cols - k)) - 1u);
        __m512i x[4], w[4];
        UNROLL
        for (int t = 0; t < T; t++) x[t] = _mm512_maskz_loadu_epi16(m, x0 + (size_t)t * cols + k);
        UNROLL
        for (int i = 0; i < R; i++) w[i] = _mm512_maskz_loadu_epi16(m, w0 + (size_t)i * cols + k);
        UNROLL
        for (int i = 0; i < R; i++)
            UNROLL
            for (int t = 0; t < T; t++) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], (__m512bh)w[i], (__m512bh)x[t]);
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int t = 0; t < T; t++) jb->Y[(int64_t)(t0 + t) * jb->rows + r + i] = _mm512_reduce_add_ps(acc[i][t]);
}

#define BFD_T(R)                                                                 \
    switch (j->n - t0 < 4 ? j->n - t0 : 4) {                                     \
    case 1: bfd_tile(j, r, R, t0, 1); break;                                     \
    case 2: bfd_tile(j, r, R, t0, 2); break;                                     \
    case 3: bfd_tile(j, r, R, t0, 3); break;                                     \
    default: bfd_tile(j, r, R, t0, 4); break;                                    \
    }
static void mm_bf16dot(const q35_mm_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r += 4) {
        const int64_t R = r1 - r < 4 ? r1 - r : 4;
        for (int t0 = 0; t0 < j->n; t0 += 4) {
            if (R == 4) { BFD_T(4) }
            else if (R == 3) { BFD_T(3) }
            else if (R == 2) { BFD_T(2) }
            else { BFD_T(1) }
        }
    }
}

/* ---- activation quantization and rotation (bitwise equal to ref.c) ---- */

INLINE float amax32(const float *x, int *bad) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    /* 0x99: QNaN, +Inf, -Inf, SNaN — such a group quantizes to zero, as in ref.c */
    *bad |= (_mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99)) != 0;
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
}
INLINE void q32(const float *x, float idf, int8_t *q, int s[2]) {
    const __m512 id = _mm512_set1_ps(idf);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16), id));
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(q1));
    s[0] = _mm512_reduce_add_epi32(q0);
    s[1] = _mm512_reduce_add_epi32(q1);
}
static void actq(const float *x, int t, int mult, int group, q35_act *a) { q35_actq_drive(x, t, mult, group, a, amax32, q32); }

static void rot(float *x, int64_t n) {
    __m512 sg[4];
    for (int s = 0; s < 4; s++) {
        float f[16];
        for (int l = 0; l < 16; l++) f[l] = (l >> s) & 1 ? -1.0f : 1.0f;
        sg[s] = _mm512_loadu_ps(f);
    }
    __m512 signs[8];
    for (int v = 0; v < 8; v++) {
        float f[16];
        for (int l = 0; l < 16; l++) {
            const int jj = 16 * v + l;
            f[l] = (Q35_Q4R_SIGNS[jj >> 5] >> (jj & 31)) & 1u ? -1.0f : 1.0f;
        }
        signs[v] = _mm512_loadu_ps(f);
    }
    const __m512 scale = _mm512_set1_ps(Q35_Q4R_SCALE);
    for (int64_t g = 0; g < n / 128; g++) {
        float *p = x + 128 * g;
        __m512 v[8];
        UNROLL
        for (int i = 0; i < 8; i++) {
            v[i] = _mm512_mul_ps(_mm512_loadu_ps(p + 16 * i), signs[i]);
            v[i] = _mm512_fmadd_ps(v[i], sg[0], _mm512_permute_ps(v[i], 0xB1));
            v[i] = _mm512_fmadd_ps(v[i], sg[1], _mm512_permute_ps(v[i], 0x4E));
            v[i] = _mm512_fmadd_ps(v[i], sg[2], _mm512_shuffle_f32x4(v[i], v[i], 0xB1));
            v[i] = _mm512_fmadd_ps(v[i], sg[3], _mm512_shuffle_f32x4(v[i], v[i], 0x4E));
        }
        for (int h = 1; h < 8; h <<= 1)
            for (int i = 0; i < 8; i += 2 * h)
                for (int k = i; k < i + h; k++) {
                    const __m512 a = v[k], b = v[k + h];
                    v[k] = _mm512_add_ps(a, b);
                    v[k + h] = _mm512_sub_ps(a, b);
                }
        UNROLL
        for (int i = 0; i < 8; i++) _mm512_storeu_ps(p + 16 * i, _mm512_mul_ps(v[i], scale));
    }
}

const q35_kern q35_kern_avx512 = {
    .mm = {[Q35_DT_F32] = {mm_f32, NULL}, [Q35_DT_F16] = {mm_f16, NULL}, [Q35_DT_BF16] = {mm_bf16, NULL},
           [Q35_DT_Q8_0] = {NULL, mm_q8_r16}, [Q35_DT_Q4_0] = {NULL, mm_q4_r16}, [Q35_DT_Q4R] = {NULL, mm_q4_r16},
           [Q35_DT_Q4_K] = {NULL, mm_q4k_r16}, [Q35_DT_Q6_K] = {NULL, mm_q6k_r16}},
    .mm_bf16dot = mm_bf16dot,
    .act_mult = {[Q35_DT_Q8_0] = -128, [Q35_DT_Q4_0] = -8, [Q35_DT_Q4R] = -8, [Q35_DT_Q4_K] = 1, [Q35_DT_Q6_K] = 1},
    .actq = actq,
    .act_tile = 8, /* token tiles of 8 */
    .rot = rot,
};
