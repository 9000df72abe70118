/* The read loop of q35_read_bandwidth (membw.c), included by membw.c (baseline ISA) and
 * membw_avx512.c (512-bit loads) with MEMBW_READ naming the function. Reads p[0, bytes) in
 * 256-byte steps (bytes % 512 == 0) and returns a sum of what it read; mode 0: plain loads, 1: a
 * T0 prefetch 1 KiB ahead, 2: the kernels' prefetch (q35_pf, kernels/prefetch.h), 3: T0 512 bytes
 * and T1 1 KiB ahead, 4: as 3 but two streams at once, the two halves of p step by step (measured
 * on the Intel VM, docs/speed.md: the fastest way one core found to read, 10-15% above the others). */
#include <stddef.h>
#include <stdint.h>

#include "kernels/prefetch.h"

uint64_t MEMBW_READ(const uint8_t *p, size_t bytes, int mode) {
    typedef uint64_t line __attribute__((vector_size(64), aligned(64)));
    line a = {0}, b = {0}, d = {0}, e = {0};
    const int streams = mode == 4 ? 2 : 1;
    const size_t share = bytes / (size_t)streams;
    for (size_t o = 0; o < share; o += 256) {
        for (int st = 0; st < streams; st++) {
            const uint8_t *q = p + (size_t)st * share + o;
            if (mode == 1) q35_pf_at(q, 256, 1024, 3);
            else if (mode == 2) q35_pf(q35_pf_for(Q35_DT_Q4_0), q, 256);
            else if (mode >= 3) q35_pf((q35_pf_dist){512, 1024}, q, 256);
            a += *(const line *)q, b += *(const line *)(q + 64);
            d += *(const line *)(q + 128), e += *(const line *)(q + 192);
        }
    }
    a += b + d + e;
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += a[k];
    return s;
}
