/* Scalar reference of the approximate LM-head scan (see headscan.h) and its dispatch. */
#include "kernels/headscan.h"

#include <stdlib.h>
#include "kernels/kernels.h"
#include <string.h>

#include "model/tensor.h"

void q35_headscan_ref(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e) {
    const int nb = act->nb;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        const uint8_t *nib = row + 2 * (size_t)nb;
        float sa = 0, se = 0;
        for (int b = 0; b < nb; b++) {
            uint16_t dbits;
            memcpy(&dbits, row + 2 * b, 2);
            const float d = q35_f16_to_f32(dbits);
            const int8_t *qh = act->qh + 32 * b;
            int32_t s = 0;
            for (int j = 0; j < 16; j++) {
                s += (nib[16 * b + j] & 15) * qh[j];
                s += (nib[16 * b + j] >> 4) * qh[j + 16];
            }
            sa += d * (act->dh[b] * (float)s - act->g[b]);
            se += d * act->c[b];
        }
        a[r] = sa;
        e[r] = se;
    }
}

q35_headscan_fn q35_headscan_best(void) {
    switch (q35_isa_get()) { /* kernels/dispatch.c: the CPU's level, or a lower one forced by Q35_ISA */
#if defined(__x86_64__)
    case Q35_ISA_AVX512: return q35_headscan_avx512; /* implies BW, VL, VNNI */
    case Q35_ISA_AVX2: return q35_headscan_avx2;     /* implies FMA, F16C */
#endif
    default: return q35_headscan_ref;
    }
}
