/* Approximate LM-head scoring with a proven error bound, for exact greedy decoding without the
 * full-precision logits (src/runtime/lmhead.c). The approximate head is 4-bit: per row, the block
 * scales come first, then the nibbles:
 *   row = [d_0 .. d_{nb-1}: f16][nib_0 .. nib_{nb-1}: 16 bytes each]      (nb = cols / 32)
 *   nibble byte j of block b holds element j (low 4 bits) and j+16 (high 4 bits) as q + 8, q in [-7, 7]
 *   weight ~= d_b * q; d_b = the f16 value >= max|w in block| / 7, so |w - d_b q| <= d_b / 2 (+ rounding).
 * The activation is quantized to int8 blocks: h ~= dh_b * qh, |h - dh_b qh| <= dh_b / 2. */
#ifndef Q35_KERNELS_HEADSCAN_H
#define Q35_KERNELS_HEADSCAN_H
#include <stddef.h>
#include <stdint.h>

#include "model/tensor.h"

typedef struct q35_headscan_act {
    int nb;              /* blocks per row */
    const int8_t *qh;    /* [nb][32] quantized activation */
    const float *dh;     /* [nb] activation block scales */
    const float *g;      /* [nb] 8 * dh_b * sum(qh_b): removes the +8 offset of the nibbles */
    const float *c;      /* [nb] per-block bound weight: |exact - approx| <= sum_b d_b c_b */
} q35_headscan_act;

/* Blocks [b0, nb) of one row, scalar: the reference's inner loop and the SIMD variants' tail. */
static inline void q35_headscan_blocks(const uint8_t *row, int b0, const q35_headscan_act *act, float *sa, float *se) {
    const int nb = act->nb;
    const uint8_t *nib = row + 2 * (size_t)nb;
    for (int b = b0; b < nb; b++) {
        uint16_t dbits = (uint16_t)(row[2 * b] | row[2 * b + 1] << 8);
        const float d = q35_f16_to_f32(dbits);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) s += (nib[16 * b + j] & 15) * act->qh[32 * b + j] + (nib[16 * b + j] >> 4) * act->qh[32 * b + j + 16];
        *sa += d * (act->dh[b] * (float)s - act->g[b]);
        *se += d * act->c[b];
    }
}

/* For rows [r0, r1): a[r] = sum_b d_b dh_b (sum_k q qh), e[r] = sum_b d_b c_b. */
typedef void (*q35_headscan_fn)(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1,
                                float *a, float *e);
void q35_headscan_ref(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e);
void q35_headscan_avx2(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e);
void q35_headscan_avx512(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a,
                         float *e);
void q35_headscan_neon(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e);
/* The best variant this CPU runs (Q35_ISA=scalar forces the reference). */
q35_headscan_fn q35_headscan_best(void);
#endif
