/* Scalar reference of the approximate LM-head scan (see headscan.h) and its dispatch. */
#include "kernels/headscan.h"

#include <stdlib.h>
#include "kernels/kernels.h"
#include <string.h>

#include "model/tensor.h"

void q35_headscan_ref(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e) {
    for (int64_t r = r0; r < r1; r++) {
        float sa = 0, se = 0;
        q35_headscan_blocks(rows + (size_t)r * row_bytes, 0, act, &sa, &se);
        a[r] = sa;
        e[r] = se;
    }
}

q35_headscan_fn q35_headscan_best(void) {
    switch (q35_isa_get()) { /* kernels/dispatch.c: the CPU's level, or a lower one forced by Q35_ISA */
#if defined(__x86_64__)
    case Q35_ISA_AVX512: return q35_headscan_avx512; /* implies BW, VL, VNNI */
    case Q35_ISA_AVX2: return q35_headscan_avx2;     /* implies FMA, F16C */
#elif defined(__aarch64__)
    case Q35_ISA_NEON: return q35_headscan_neon;
#endif
    default: return q35_headscan_ref;
    }
}
