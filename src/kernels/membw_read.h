/* The read loop of q35_read_bandwidth (membw.c), included by membw.c (baseline ISA) and
 * membw_avx512.c (512-bit loads) with MEMBW_READ naming the function. Reads p[0, bytes) in
 * 256-byte steps (bytes % 256 == 0) and returns a sum of what it read; mode 0: plain loads, 1: a
 * T0 prefetch 1 KiB ahead, 2: the kernels' prefetch (q35_pf, kernels/prefetch.h). */
#include <stddef.h>
#include <stdint.h>

#include "kernels/prefetch.h"

uint64_t MEMBW_READ(const uint8_t *p, size_t bytes, int mode) {
    typedef uint64_t line __attribute__((vector_size(64), aligned(64)));
    line a = {0}, b = {0}, d = {0}, e = {0};
    for (size_t o = 0; o < bytes; o += 256) {
        if (mode == 1) q35_pf_at(p + o, 256, 1024, 3);
        else if (mode == 2) q35_pf(q35_pf_for(Q35_DT_Q4_0), p + o, 256);
        a += *(const line *)(p + o), b += *(const line *)(p + o + 64);
        d += *(const line *)(p + o + 128), e += *(const line *)(p + o + 192);
    }
    a += b + d + e;
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += a[k];
    return s;
}
