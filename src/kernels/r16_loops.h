/* Loops over R16 row groups (kernels/quant.h: 16 rows a group) shared by the SIMD files that hold a
 * group in parts: AVX2 in 2 halves of 8 rows (mm_avx2_impl.h), NEON in 4 quarters of 4
 * (mm_neon_impl.h); AVX-512 holds a whole group in a vector and has its own. The including file
 * defines, before including:
 *   R16_NPART                      parts per group (2 or 4)
 *   R16_VEC, R16_ZERO()            the accumulator of one part's rows (a vector of 16 / R16_NPART
 *                                  floats) and its zero
 *   R16_STORE(y, v, rbase, r0, r1) stores a part's results at rows rbase.., keeping only [r0, r1)
 *   R16_ALIGN                      the alignment of the prompt buffer
 *   U_T, U_TILES                   the prompt tile's token count and its TILES4 / TILES8 (unroll.h)
 *   U_TT                           the activation tile (mm.h, q35_act's tt) the prompt tiles are
 *                                  compiled for: the table's act_tile, a multiple of U_T
 * and INLINE, q35_pf_for / q35_pf_step (prefetch.h), q35_r16_group_bytes (quant.h). */
#ifndef Q35_KERNELS_R16_LOOPS_H
#define Q35_KERNELS_R16_LOOPS_H

#define R16_RP (16 / R16_NPART) /* rows of a part */
enum { U_MAX_COLS = 6144 };     /* the prompt buffer's longest row: every matrix of the 0.8B and 2B models */

/* Prompts of MIN_N tokens or more over rows of up to U_MAX_COLS columns unpack each part of a group
 * once into a stack buffer (UBLK bytes per 32 columns; unpack and tile take units of UNIT columns:
 * blocks, or the K formats' super-blocks), not again for every token tile; the rest go through
 * dec, whose tiles make the weights ready inline. The tiles step over the activations by the
 * constant U_TT (1.5-2% faster than by q35_act's tt in AVX2 Q4_0 / Q4_K); MIN_N >= U_TT makes
 * tt = U_TT, and any other tt goes through dec. */
#define U_DRIVER(name, dec, unpack, tile, UNIT, UBLK, MIN_N)                                                   \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        if (j->n < MIN_N || j->cols > U_MAX_COLS || j->a.tt != U_TT) {                                         \
            dec(j, r0, r1);                                                                                    \
            return;                                                                                            \
        }                                                                                                      \
        const int64_t nu = j->cols / UNIT;                                                                     \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        _Alignas(R16_ALIGN) uint8_t u[U_MAX_COLS / 32 * UBLK]; /* one part */                                 \
        for (int64_t h = r0 / R16_RP; h * R16_RP < r1; h++) {                                                  \
            const uint8_t *grp = j->w + (size_t)(h / R16_NPART) * gb;                                          \
            const int part = (int)(h % R16_NPART);                                                             \
            unpack(grp, nu, part, u);                                                                          \
            for (int t0 = 0; t0 < j->n; t0 += U_T) U_TILES(j->n - t0, tile, (grp, u, nu, part, &j->a, t0), j->Y, j->rows, R16_RP * h, r0, r1); \
        }                                                                                                      \
    }

/* One token over the groups of rows [r0, r1), all parts of a group in one pass over each
 * super-block of SBB bytes: `call` (which sees grp, sb, acc[R16_NPART], pd and pfs) adds one. */
#define K16_WALK(name, SBB, DT, call)                                                                          \
    static void name(const q35_mm_job *j, int64_t r0, int64_t r1) {                                            \
        const size_t gb = q35_r16_group_bytes(j->W->dtype, j->cols);                                           \
        const int64_t nsb = j->cols / 256, pfs = q35_pf_step(SBB, 8);                                          \
        const q35_pf_dist pd = q35_pf_for(DT);                                                                 \
        for (int64_t g = r0 / 16; g * 16 < r1; g++) {                                                          \
            const uint8_t *grp = j->w + (size_t)g * gb;                                                        \
            R16_VEC acc[R16_NPART];                                                                            \
            UNROLL                                                                                             \
            for (int q = 0; q < R16_NPART; q++) acc[q] = R16_ZERO();                                           \
            for (int64_t sb = 0; sb < nsb; sb++) call;                                                         \
            UNROLL                                                                                             \
            for (int q = 0; q < R16_NPART; q++) R16_STORE(j->Y, acc[q], 16 * g + R16_RP * q, r0, r1);          \
        }                                                                                                      \
    }

#endif
