/* Private to src/kernels: the matrix-product job the per-ISA kernels receive, the 8-bit activation
 * blocks they read, the per-ISA kernel table, and canonical (layout-free) views of weight blocks. */
#ifndef Q35_KERNELS_MM_H
#define Q35_KERNELS_MM_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/prefetch.h"
#include "kernels/quant.h"

/* Activations quantized to 8 bits per block of 32 columns (x[t][32b + k] ~= d * q, below), stored
 * in token tiles of tt tokens: tile by tile, block-major inside a tile, so a kernel's token tile
 * (tt a multiple of its token count) reads the tokens of one block at fixed offsets and the blocks
 * one after another. Element (b, t) is at q35_act_at(a, b, t) = ((t / tt) nb + b) tt + t % tt:
 *   x[t][32b + k] ~= d[i] * q[32 i + k],   |q| <= 127 (never -128),   i = q35_act_at(a, b, t),
 *   d = max|x over the block's group| / 127, q = nearest-even(x * (127 / max|x|)) (0 when the
 *   group is 0 or holds an inf / NaN); a group is 1 block, or for Q4_K products 8 (a super-block
 *   shares one scale, as llama.cpp's Q8_K: the sub-blocks' sums combine before any scale),
 *   s[i] = mult * sum_k q[32 i + k] (mult chosen per weight format and ISA: the kernels start
 *   their integer accumulators at s to undo the offset of unsigned weight codes),
 *   h[2 i + j] = sum of q[32 i + 16 j .. 32 i + 16 j + 15] (plain sums: Q6_K's 16-value sub-blocks, Q4_K's block sums).
 *   sp[i] (Q4_K products only, at even blocks): the block sums S = sum_k q[32 i + k] of blocks i
 *   and i + 1 as the two 16-bit halves of an int32, for the SIMD kernels' min term (pairs by
 *   vpdpwssd / vpmaddwd, or read as 8 int16 lanes on NEON); ref.c takes S from h.
 * With tt = n (one tile) this is [nb][n]; one token is [nb] whatever tt. Block-major over all n
 * tokens, a 4-token tile read 128 bytes per block 32 n bytes apart (4 KB at a 128-token chunk),
 * which the hardware prefetchers do not follow: in tiles of 8, the AVX2 Q4_0 / Q4_K prompt
 * products run 9-14% faster (docs/speed.md, "Activations in token tiles").
 * For Q4R weights, x is first rotated per 128-column group (quant.h). */
typedef struct q35_act {
    int8_t *q;    /* [ceil(n / tt)][nb][tt][32] */
    float *d;     /* [ceil(n / tt)][nb][tt] */
    int32_t *s;   /* [ceil(n / tt)][nb][tt] */
    int16_t *h;   /* [ceil(n / tt)][nb][tt][2] */
    int32_t *sp;  /* [ceil(n / tt)][nb][tt] (Q4_K products; else unset): at even blocks b,
                   * (uint16_t)S_b | S_(b+1) << 16, S the block's sum of q */
    int nb;       /* blocks per row: cols / 32 */
    int n;        /* tokens */
    int tt;       /* tokens per tile (1 <= tt <= n, or 1 when n = 0) */
} q35_act;

/* Where block b of token t sits in a's arrays (h: twice this); q35_act_in for a tile tt known
 * where it is called (a constant: no division). */
static inline size_t q35_act_in(int nb, int tt, int64_t b, int t) {
    return ((size_t)(t / tt) * (size_t)nb + (size_t)b) * (size_t)tt + (size_t)(t % tt);
}
static inline size_t q35_act_at(const q35_act *a, int64_t b, int t) { return q35_act_in(a->nb, a->tt, b, t); }

/* One product Y[n][rows] = X[n][cols] · W^T, as the kernels see it. */
typedef struct q35_mm_job {
    const q35_tensor *W;
    const uint8_t *w;       /* W->data */
    int64_t rows, cols;     /* of W; Y's row stride is `rows` */
    int n;                  /* tokens */
    const float *X;         /* [n][cols] float activations (float formats) */
    const uint16_t *xb;     /* [n][cols] activations rounded to bf16 (bf16 dot mode), else NULL */
    q35_act a;              /* 8-bit activations (integer formats) */
    float *Y;               /* [n][rows] */
    int batch;              /* 1: no row invariance needed (q35_matmul_batch): results may depend on n */
} q35_mm_job;

/* Computes Y rows [r0, r1) for all n tokens. Kernels for R16 weights may be called with r0 not a
 * multiple of 16: they compute whole groups and store only rows in [r0, r1). */
typedef void (*q35_mm_fn)(const q35_mm_job *j, int64_t r0, int64_t r1);
/* Quantizes token t of x[cols] (already rotated for Q4R) into a (nb blocks), with offset mult,
 * `group` blocks sharing a scale (1, or 8 for Q4_K; nb % group == 0). Each ISA's is
 * q35_actq_drive with its own two block helpers. */
typedef void (*q35_actq_fn)(const float *x, int t, int mult, int group, q35_act *a);
/* x[n] = rotate each 128-group of x (the Q4R rotation) in place; n % 128 == 0. */
typedef void (*q35_rot_fn)(float *x, int64_t n);

typedef struct q35_kern {
    q35_mm_fn mm[Q35_DT_COUNT][2];  /* [dtype][layout] (NULL: fall back to the scalar table) */
    q35_mm_fn mm_bf16dot;           /* bf16 weights x bf16-rounded activations (NULL: none) */
    int act_mult[Q35_DT_COUNT];     /* s = mult * sum q for this dtype in R16 layout */
    int act_tile;                   /* q35_act's tt for n >= act_tile tokens (else n): a multiple
                                     * of every token tile the table's products take */
    q35_actq_fn actq;
    q35_rot_fn rot;
} q35_kern;

extern const q35_kern q35_kern_scalar;
#if defined(__x86_64__)
extern const q35_kern q35_kern_avx2;
extern const q35_kern q35_kern_avx2vnni;
extern const q35_kern q35_kern_avx512;
/* AMX-INT8 products for Q8_0 / Q4_0 / Q4R / Q6_K in the R16 layout (mm_amx.c); fewer than Q35_AMX_MIN_N
 * tokens go to the AVX-512 kernels. q35_amx_init asks the OS for the tile state (0: granted). */
#define Q35_AMX_MIN_N 8
/* AVX-512 prompt products of Q4_0 / Q4R / Q4_K: 1 unpacks each row group's nibbles once for a whole
 * prompt (U_DRIVER, mm_avx512.c; measured faster on Intel), 0 masks them apart in every token tile,
 * which Zen 4 runs beside the multiplies: prompts +2-4% there (docs/speed.md, "Zen 4 again"). Set
 * from the CPU's vendor by q35_pf_setup (prefetch.h; Q35_UNPACK=0|1 overrides). */
extern int q35_avx512_q4_unpack;
void q35_mm_amx_q8(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_mm_amx_q4(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_mm_amx_q6k(const q35_mm_job *j, int64_t r0, int64_t r1);
int q35_amx_init(void);
/* Test builds only (Makefile: linked into tests/test_kernels, not the library): the AMX kernels
 * over a software tile unit (mm_amx.c with -DQ35_AMX_EMU, amx_emu.h), and the AVX-VNNI table with
 * the AVX512-VNNI encodings of its two instructions (mm_vnni_avx2.c with -DQ35_AVXVNNI_EVEX), to
 * check both against the reference on CPUs without AMX or AVX-VNNI (q35_kern_emulate). */
void q35_mm_amxemu_q8(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_mm_amxemu_q4(const q35_mm_job *j, int64_t r0, int64_t r1);
void q35_mm_amxemu_q6k(const q35_mm_job *j, int64_t r0, int64_t r1);
extern const q35_kern q35_kern_avx2vnni_evex;
/* Tests: the AVX2 level's AVX-VNNI table and the AVX-512 level's AMX products (q8, q4, q6k) taken
 * from these as if the CPU had the features; NULL, NULL restores what detection found. Needs an
 * AVX-512 CPU (-1 otherwise). */
int q35_kern_emulate(const q35_kern *avx2vnni, const q35_mm_fn amx[3]);
#elif defined(__aarch64__)
extern const q35_kern q35_kern_neon;    /* armv8-a (mm_neon.c) */
extern const q35_kern q35_kern_neondot; /* armv8.2-a dot product (mm_dot_neon.c) */
#endif
/* The table of the active ISA (dispatch.c). */
const q35_kern *q35_kern_active(void);
int q35_cpu_has_avx512bf16(void);
int q35_cpu_has_avxvnni(void);
/* AVX2 level: 1 (default) uses AVX-VNNI where present, 0 the vpmaddubsw kernels; returns the old value. */
int q35_kern_use_avxvnni(int on);
/* AVX-512 level: 1 (default) uses AMX tiles for prompts where present, 0 the VNNI kernels; returns the old value. */
int q35_kern_use_amx(int on);
int q35_cpu_has_amx(void);
/* NEON level: 1 (default) uses the dot-product kernels where present, 0 the armv8-a ones; returns the old value. */
int q35_kern_use_neondot(int on);
int q35_cpu_has_neondot(void);

/* Scalar pieces shared by all tables (ref.c). */
void q35_actq_ref(const float *x, int t, int mult, int group, q35_act *a);
void q35_rot_ref(float *x, int64_t n);

/* Canonical views of one block of row r in any layout (quant.c). */
/* Q8_0 / Q4_0 / Q4R block b (32 values): x[k] = d * q[k]  (Q4: q = nibble - 8). */
void q35_get_b32(const q35_tensor *W, int64_t r, int64_t b, float *d, int8_t q[32]);
/* Q4_K super-block sb: x[32s+k] = (d*sc[s])*q[32s+k] - dmin*m[s], q 0..15. */
void q35_get_q4k(const q35_tensor *W, int64_t r, int64_t sb, float *d, float *dmin, uint8_t sc[8], uint8_t m[8], uint8_t q[256]);
/* Q6_K super-block sb: x[e] = d*sc[e/16]*q[e], q -32..31. */
void q35_get_q6k(const q35_tensor *W, int64_t r, int64_t sb, float *d, int8_t sc[16], int8_t q[256]);

/* The activation quantizer every ISA shares (q35_actq_fn): amax32(x) = max |x[0..31]|, setting
 * *bad when one is inf or NaN; q32(x, id, q, s) writes q[k] = nearest-even(x[k] * id) for k < 32
 * and s[0], s[1] = the sums of q[0..15], q[16..31]. Both inline into the caller. */
typedef float (*q35_amax32_fn)(const float *x, int *bad);
typedef void (*q35_q32_fn)(const float *x, float id, int8_t *q, int s[2]);
static inline __attribute__((always_inline)) void q35_actq_group(const float *x, int t, int mult, int64_t b0, const int G, q35_act *a,
                                                                 q35_amax32_fn amax32, q35_q32_fn q32) {
    float amax = 0.0f;
    int bad = 0;
    for (int g = 0; g < G; g++) {
        const float m = amax32(x + 32 * (b0 + g), &bad);
        amax = m > amax ? m : amax;
    }
    const int zero = bad || !(amax >= 1e-30f); /* a zero group, or one with an inf / NaN: codes 0 */
    const float id = zero ? 0.0f : 127.0f / amax, d = zero ? 0.0f : amax / 127.0f;
    for (int g = 0; g < G; g++) {
        const size_t i = q35_act_at(a, b0 + g, t);
        int s[2] = {0, 0};
        if (zero) memset(a->q + 32 * i, 0, 32);
        else q32(x + 32 * (b0 + g), id, a->q + 32 * i, s);
        a->d[i] = d;
        a->s[i] = mult * (s[0] + s[1]);
        a->h[2 * i] = (int16_t)s[0];
        a->h[2 * i + 1] = (int16_t)s[1];
    }
}
static inline __attribute__((always_inline)) void q35_actq_drive(const float *x, int t, int mult, int group, q35_act *a, q35_amax32_fn amax32,
                                                                 q35_q32_fn q32) {
    int64_t b = 0;
    if (group == 8)
        for (; b + 8 <= a->nb; b += 8) q35_actq_group(x, t, mult, b, 8, a, amax32, q32);
    for (; b < a->nb; b++) q35_actq_group(x, t, mult, b, 1, a, amax32, q32); /* (and blocks past the last whole group) */
}

/* Half-float helpers usable from any file. */
static inline int64_t q35_ceil16(int64_t x) { return (x + 15) & ~(int64_t)15; }
#endif
