/* Software prefetch for the weight streams of single-token products (generation). */
#ifndef Q35_KERNELS_PREFETCH_H
#define Q35_KERNELS_PREFETCH_H
#include <stdint.h>

/* Generation reads every weight once, in address order. Software prefetches ahead of the read keep
 * more cache-line misses in flight than the hardware prefetchers alone: each line is requested
 * into L2 Q35_PF_FAR bytes ahead (T1) and into L1 Q35_PF_NEAR bytes ahead (T0). A kernel that
 * reads `bytes` of weights in `units` steps (blocks, sub-blocks) takes step = q35_pf_step(bytes,
 * units) and at step i calls q35_pf(base + i * step, step), which requests the lines that start in
 * [p, p + step) at both distances: every line of the stream once each. A prefetch never faults,
 * so running past the end of the weights is harmless. Kernels prefetch only in single-token tiles
 * (prompt tiles are compute-bound; the hardware keeps up with them).
 * Measured (docs/speed.md; 0.8B Q4 generation, 3 interleaved runs of 3 repetitions): none 25.4 /
 * 46.6 tok/s (1 / 2 threads), T0 at 2 KiB 27.6-28.5 / 50-52, T0 at 1 KiB + T1 at 4 KiB 31-32 /
 * 60-62; T0 at 4 KiB alone, NTA, and a T2 at 8 KiB were slower. Q8_0 did not change between the
 * last two. -DQ35_PF_NEAR=0 builds without software prefetch. */
#ifndef Q35_PF_NEAR
#define Q35_PF_NEAR 1024
#endif
#ifndef Q35_PF_FAR
#define Q35_PF_FAR 4096
#endif
static inline int64_t q35_pf_step(int64_t bytes, int64_t units) { return (bytes + units - 1) / units; }
static inline __attribute__((always_inline)) void q35_pf_at(const uint8_t *p, int64_t step, const int ahead, const int locality) {
    const uintptr_t lo = ((uintptr_t)p + (uintptr_t)ahead + 63) & ~(uintptr_t)63, hi = (uintptr_t)p + (uintptr_t)ahead + (uintptr_t)step;
    for (uintptr_t a = lo; a < hi; a += 64) {
        if (locality == 3) __builtin_prefetch((const void *)a, 0, 3);
        else __builtin_prefetch((const void *)a, 0, 2);
    }
}
static inline __attribute__((always_inline)) void q35_pf(const uint8_t *p, int64_t step) {
    if (Q35_PF_NEAR == 0) return;
    q35_pf_at(p, step, Q35_PF_FAR, 2);
    q35_pf_at(p, step, Q35_PF_NEAR, 3);
}
#endif
