/* AMX-INT8 matrix-matrix products for the integer formats (Q8_0, Q4_0, Q4R, Q6_K) in the R16
 * layout, used for prompts (n >= Q35_AMX_MIN_N tokens) on CPUs with AMX tiles; fewer tokens go to
 * the AVX-512 VNNI kernels (mm_avx512.c).
 *
 * One TDPBSSD multiplies a token tile A (up to 16 tokens x 32 activation bytes of one block, as
 * q35_act stores them: [block][token][32]) by a weight tile B (the block's 32 quants of 16 rows in
 * VNNI order: B row kk holds quants 4kk..4kk+3 of each of the 16 rows) into C (int32
 * [token][row]). That B order is exactly the R16 layout's: a Q8_0 block is its 8 vectors, a Q4
 * block its 4 vectors' low nibbles (quants 0..15) then high nibbles (16..31). The weights are
 * unpacked once per 16-row group into signed bytes (Q8_0: code ^ 0x80 = q; Q4: nibble - 8 = q),
 * so C is the signed dot product sum_k q*a, the same integer the VNNI kernels reach by starting at
 * s = mult * sum(a) with unsigned codes. The float steps per block (f = dw * da; acc = fma(f,
 * float(C), acc)) are the reference's, so results are bitwise equal to it.
 *
 * Q6_K goes the same way: its codes minus 32 in the Q8_0 order; its scales cover 16 values, so
 * each block is two products of 16 (A tiles of 16 bytes a token, B tiles of 4 rows), C0 and C1,
 * and isum = sc0 C0 + sc1 C1. As in the VNNI kernels (mm_avx512.c), every integer product is below
 * 2^24, so exact float products stand in for the integer ones. (Q4_K's products ran 8-10% faster
 * on tiles alone, but prompts no faster: docs/speed.md "AMX for the K formats".)
 *
 * The tile state is per thread: every call loads its tile configuration and releases the tiles at
 * the end. Linux grants a process the AMX state only on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM), which q35_amx_init makes once.
 *
 * Built a second time with -DQ35_AMX_EMU for the tests (Makefile): the same kernels, named
 * q35_mm_amxemu_*, over a software tile unit (amx_emu.h), so they are checked where the CPU has
 * no AMX. */
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(Q35_AMX_EMU)
#include "kernels/amx_emu.h"
#define q35_mm_amx_q8 q35_mm_amxemu_q8
#define q35_mm_amx_q4 q35_mm_amxemu_q4
#define q35_mm_amx_q6k q35_mm_amxemu_q6k
#endif
#include "kernels/mm.h"
#include "kernels/q6k_avx512.h"

#define INLINE static inline __attribute__((always_inline))
#include "kernels/unroll.h"

/* Blocks of one 16-row group unpacked at a time: 192 x 512 bytes = 96 KiB on the stack, every
 * matrix of the 0.8B and 2B models in one chunk (cols <= 6144). */
enum { CHUNK_BLOCKS = 192 };

typedef struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

#if !defined(Q35_AMX_EMU)
int q35_amx_init(void) {
    /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 0 : -1;
}
#endif

/* The weight formats, as compile-time constants of the inlined steps below. */
enum { F_Q8, F_Q4, F_Q6K };

/* Tiles: C = 0, A = 1, B = 2 (T tokens); 3, 4, 5 the same shapes (the second set: odd blocks, or
 * Q6_K's second half of each block). Q6_K multiplies 16 values at a time (A: 16 bytes a token, B:
 * 4 rows), the other formats 32. */
static void configure(int T, int fmt) {
    const int K = fmt == F_Q6K ? 16 : 32;
    tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = c.rows[3] = (uint8_t)T;
    c.colsb[0] = c.colsb[3] = 64;
    c.rows[1] = c.rows[4] = (uint8_t)T;
    c.colsb[1] = c.colsb[4] = (uint16_t)K;
    c.rows[2] = c.rows[5] = (uint8_t)(K / 4);
    c.colsb[2] = c.colsb[5] = 64;
    /* gcc 12 does not see ldtilecfg read the whole struct and drops the stores above without this */
    __asm__ volatile("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
}

/* Signed weight bytes of blocks [b0, b0 + nbk) of one group into wq[nbk][8][64]. */
static void unpack_q8(const uint8_t *grp, int64_t nb, int64_t b0, int64_t nbk, int8_t *wq) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nbk; b++) {
        const uint8_t *qs = q35_r16_chunks(grp, nb, b0 + b, 512);
        UNROLL
        for (int c = 0; c < 8; c++)
            _mm512_store_si512((void *)(wq + 512 * b + 64 * c), _mm512_xor_si512(_mm512_loadu_si512((const void *)(qs + 64 * c)), flip));
    }
}

static void unpack_q4(const uint8_t *grp, int64_t nb, int64_t b0, int64_t nbk, int8_t *wq) {
    const __m512i m4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    for (int64_t b = 0; b < nbk; b++) {
        const uint8_t *qs = q35_r16_chunks(grp, nb, b0 + b, 256);
        UNROLL
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(qs + 64 * c));
            _mm512_store_si512((void *)(wq + 512 * b + 64 * c), _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
            _mm512_store_si512((void *)(wq + 512 * b + 64 * (c + 4)), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
        }
    }
}

/* Q6_K blocks: the codes (q35_q6k_codes512) minus 32, values 4c..4c+3 of the 16 rows in wq row c. */
static void unpack_q6k(const uint8_t *grp, int64_t b0, int64_t nbk, int8_t *wq) {
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
    for (int64_t b = 0; b < nbk; b++) {
        const int64_t u = b0 + b;
        __m512i w[8];
        q35_q6k_codes512(grp + 3360 * (u / 8) + 288 + 384 * (u % 8), m4, m30, w);
        UNROLL
        for (int c = 0; c < 8; c++) _mm512_store_si512((void *)(wq + 512 * b + 64 * c), _mm512_sub_epi8(w[c], k32));
    }
}

INLINE void unpack(const int fmt, const uint8_t *grp, int64_t nb, int64_t b0, int64_t nbk, int8_t *wq) {
    if (fmt == F_Q8) unpack_q8(grp, nb, b0, nbk, wq);
    else if (fmt == F_Q4) unpack_q4(grp, nb, b0, nbk, wq);
    else unpack_q6k(grp, b0, nbk, wq);
}

/* acc[t] += (dw * da[t]) * float(C[t]) for the T tokens of one block's product. */
INLINE void scale_add(__m512 *acc, const int32_t *C, __m512 dw, const float *da, const int T) {
    UNROLL
    for (int t = 0; t < T; t++) {
        const __m512 f = _mm512_mul_ps(dw, _mm512_set1_ps(da[t]));
        acc[t] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(C + 16 * t))), acc[t]);
    }
}

/* Block b (i-th of the chunk) multiplied into tile c, with at and wt as its A and B tiles; for
 * Q6_K, values [16h, 16h + 16) of the block only. */
#define BLOCK_DP(c, at, wt, b, i)                                                               \
    do {                                                                                     \
        _tile_zero(c);                                                                       \
        _tile_loadd(at, a->q + (a0 + (size_t)(b) * (size_t)a->tt) * 32, 32);                 \
        _tile_loadd(wt, wq + 512 * (i), 64);                                                 \
        _tile_dpbssd(c, at, wt);                                                             \
    } while (0)
#define HALF_DP(c, at, wt, b, i, h)                                                             \
    do {                                                                                     \
        _tile_zero(c);                                                                       \
        _tile_loadd(at, a->q + (a0 + (size_t)(b) * (size_t)a->tt) * 32 + 16 * (h), 32);      \
        _tile_loadd(wt, wq + 512 * (i) + 256 * (h), 64);                                     \
        _tile_dpbssd(c, at, wt);                                                             \
    } while (0)

/* Q6_K block b: C0, C1 the products of its two halves. */
INLINE void scale_q6k(__m512 *acc, const int32_t *C0, const int32_t *C1, const uint8_t *grp, int64_t b, const q35_act *a, size_t a0, const int T) {
    const uint8_t *p = grp + 3360 * (b / 8);
    const int64_t s = b % 8;
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    const __m512 sc0f = q35_q6k_scale512(p, s, 0);
    const __m512 sc1f = q35_q6k_scale512(p, s, 1);
    const size_t base = a0 + (size_t)b * (size_t)a->tt;
    /* 16 trips, the body under t < T: the tail copy's run-time T left clang -O1 unable to unroll
     * a loop to T fully (the other formats' scale_add it could) */
    UNROLL
    for (int t = 0; t < 16; t++) {
        if (t < T) {
            const __m512 c0 = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(C0 + 16 * t)));
            const __m512 c1 = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(C1 + 16 * t)));
            const __m512 isum = _mm512_fmadd_ps(c0, sc0f, _mm512_mul_ps(c1, sc1f));
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a->d[base + t])), isum, acc[t]);
        }
    }
}

INLINE void scale_block(__m512 *acc, const int32_t *C, const uint8_t *grp, int64_t qb, int64_t b, const q35_act *a, size_t a0,
                        const int T) {
    scale_add(acc, C, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)q35_r16_scales(grp, b, qb))), a->d + a0 + (size_t)b * (size_t)a->tt, T);
}

/* Tokens [t0, t0 + T) (their tile at a0) x blocks [b0, b0 + nbk) of one group; acc holds the running sums. Tiles
 * are not renamed and a tile store waits for its product: consecutive blocks alternate between
 * two tile sets, block i+1's product is issued before block i's is stored, and the products
 * stored two blocks earlier are scaled meanwhile (a load right after the tile store it reads
 * waits for the store to complete). */
INLINE void tile_blocks(__m512 *acc, const uint8_t *grp, int64_t qb, const int8_t *wq, int64_t b0, int64_t nbk, const q35_act *a,
                        size_t a0, const int T) {
    _Alignas(64) int32_t C[4][16 * 16]; /* [4 blocks][token][row]: block i's products in C[i % 4] */
    BLOCK_DP(0, 1, 2, b0, 0); /* (nbk >= 1) */
    int64_t i = 0;
    for (; i + 2 <= nbk; i += 2) {
        BLOCK_DP(3, 4, 5, b0 + i + 1, i + 1);
        _tile_stored(0, C[i & 3], 64);
        if (i >= 2) scale_block(acc, C[(i - 2) & 3], grp, qb, b0 + i - 2, a, a0, T);
        if (i + 2 < nbk) BLOCK_DP(0, 1, 2, b0 + i + 2, i + 2);
        _tile_stored(3, C[(i + 1) & 3], 64);
        if (i >= 2) scale_block(acc, C[(i - 1) & 3], grp, qb, b0 + i - 1, a, a0, T);
    }
    if (i < nbk) _tile_stored(0, C[i & 3], 64);
    for (int64_t k = i >= 2 ? i - 2 : 0; k < nbk; k++) scale_block(acc, C[k & 3], grp, qb, b0 + k, a, a0, T);
}

/* Q6_K: both halves of block i issued (tiles 0 and 3), then block i-1's stored products scaled,
 * then block i's stored. */
INLINE void tile_blocks_q6k(__m512 *acc, const uint8_t *grp, const int8_t *wq, int64_t b0, int64_t nbk, const q35_act *a, size_t a0, const int T) {
    _Alignas(64) int32_t C[2][2][16 * 16]; /* [block parity][half][token][row] */
    for (int64_t i = 0; i < nbk; i++) {
        HALF_DP(0, 1, 2, b0 + i, i, 0);
        HALF_DP(3, 4, 5, b0 + i, i, 1);
        if (i) scale_q6k(acc, C[(i - 1) & 1][0], C[(i - 1) & 1][1], grp, b0 + i - 1, a, a0, T);
        _tile_stored(0, C[i & 1][0], 64);
        _tile_stored(3, C[i & 1][1], 64);
    }
    scale_q6k(acc, C[(nbk - 1) & 1][0], C[(nbk - 1) & 1][1], grp, b0 + nbk - 1, a, a0, T);
}

/* Masked store of 16 row results at rows rbase..rbase+15, keeping only [r0, r1). */
INLINE void store16(float *y, __m512 v, int64_t rbase, int64_t r0, int64_t r1) {
    int64_t lo = r0 - rbase, hi = r1 - rbase;
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    const __mmask16 m = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
    _mm512_mask_storeu_ps(y + rbase, m, v);
}

/* Bytes of chunks per block of the block-32 formats (their scales' place in a run depends on it). */
#define QB(fmt) ((fmt) == F_Q8 ? 512 : 256)

/* One token tile of T tokens over every block of a group (a group with more blocks than one chunk
 * is unpacked chunk by chunk for each token tile). */
INLINE void token_tile(const int fmt, const q35_mm_job *j, const uint8_t *grp, int64_t nb, int8_t *wq, int single_chunk, int64_t g, int64_t r0,
                       int64_t r1, int t0, const int T) {
    __m512 acc[16] = {0}; /* (all set: the tail copy has a run-time T) */
    const size_t a0 = q35_act_at(&j->a, 0, t0); /* t0's tile (mm.h): tt is 16 or n, so it holds all T tokens */
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK_BLOCKS) {
        const int64_t nbk = nb - b0 < CHUNK_BLOCKS ? nb - b0 : CHUNK_BLOCKS;
        if (!single_chunk) unpack(fmt, grp, nb, b0, nbk, wq);
        if (fmt == F_Q6K) tile_blocks_q6k(acc, grp, wq, b0, nbk, &j->a, a0, T);
        else tile_blocks(acc, grp, QB(fmt), wq, b0, nbk, &j->a, a0, T);
    }
    UNROLL
    for (int t = 0; t < T; t++) store16(j->Y + (int64_t)(t0 + t) * j->rows, acc[t], 16 * g, r0, r1);
}

/* The last tile of fewer than 16 tokens: one copy per format with a run-time token count (a copy
 * per count made the sanitizer builds take minutes for little speed). */
#define TAIL(name, fmt)                                                                                                                   \
    static __attribute__((noinline)) void name(const q35_mm_job *j, const uint8_t *grp, int64_t nb, int8_t *wq, int single_chunk, int64_t g, \
                                               int64_t r0, int64_t r1, int t0, int T) {                                                  \
        token_tile(fmt, j, grp, nb, wq, single_chunk, g, r0, r1, t0, T);                                                                   \
    }
TAIL(tail_q8, F_Q8)
TAIL(tail_q4, F_Q4)
TAIL(tail_q6k, F_Q6K)

INLINE void amx_driver(const q35_mm_job *j, int64_t r0, int64_t r1, const int fmt) {
    const q35_kern *vnni = &q35_kern_avx512;
    const q35_dtype dt = j->W->dtype;
    if (j->n < Q35_AMX_MIN_N) {
        vnni->mm[dt][1](j, r0, r1);
        return;
    }
    const size_t gb = q35_r16_group_bytes(dt, j->cols);
    const int64_t nb = j->cols / 32;
    const int single_chunk = nb <= CHUNK_BLOCKS;
    _Alignas(64) int8_t wq[CHUNK_BLOCKS * 512]; /* [block][8][64] signed weights of one group */
    const int nfull = j->n / 16 * 16, tail = j->n - nfull;
    int cfg = 0; /* tokens per tile of the loaded configuration (0: none) */
    for (int64_t g = r0 / 16; g * 16 < r1; g++) {
        const uint8_t *grp = j->w + (size_t)g * gb;
        if (single_chunk) unpack(fmt, grp, nb, 0, nb, wq);
        /* the next group streams in from memory while this one's tiles run */
        if ((g + 1) * 16 < r1)
            for (size_t off = 0; off < gb; off += 64) _mm_prefetch((const char *)grp + gb + off, _MM_HINT_T1);
        if (nfull) {
            if (cfg != 16) configure(cfg = 16, fmt);
            for (int t0 = 0; t0 < nfull; t0 += 16) token_tile(fmt, j, grp, nb, wq, single_chunk, g, r0, r1, t0, 16);
        }
        if (tail) {
            if (cfg != tail) configure(cfg = tail, fmt);
            void (*tf)(const q35_mm_job *, const uint8_t *, int64_t, int8_t *, int, int64_t, int64_t, int64_t, int, int) =
                fmt == F_Q8 ? tail_q8 : fmt == F_Q4 ? tail_q4 : tail_q6k;
            tf(j, grp, nb, wq, single_chunk, g, r0, r1, nfull, tail);
        }
    }
    if (cfg) _tile_release();
}

void q35_mm_amx_q8(const q35_mm_job *j, int64_t r0, int64_t r1) { amx_driver(j, r0, r1, F_Q8); }
void q35_mm_amx_q4(const q35_mm_job *j, int64_t r0, int64_t r1) { amx_driver(j, r0, r1, F_Q4); }
void q35_mm_amx_q6k(const q35_mm_job *j, int64_t r0, int64_t r1) { amx_driver(j, r0, r1, F_Q6K); }
