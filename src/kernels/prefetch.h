/* Software prefetch for the weight streams of single-token products (generation). */
#ifndef Q35_KERNELS_PREFETCH_H
#define Q35_KERNELS_PREFETCH_H
#include <stdint.h>

/* Generation reads every weight once, in address order. A software prefetch Q35_PF_AHEAD bytes
 * ahead of the read keeps more cache-line misses in flight than the hardware prefetchers alone.
 * A kernel that reads `bytes` of weights in `units` steps (blocks, sub-blocks) takes
 * step = q35_pf_step(bytes, units) and at step i calls q35_pf(base + i * step, step), which
 * requests the lines that start in [p, p + step), AHEAD bytes on: every line of the stream once.
 * A prefetch never faults, so running past the end of the weights is harmless. Kernels prefetch
 * only in single-token tiles (prompt tiles are compute-bound; the hardware keeps up with them). */
/* Measured on the 0.8B Q4 generation (docs/speed.md): 2048 bytes into every cache level (T0,
 * __builtin_prefetch locality 3) beat 1024 and 3072-4096 bytes and beat T1 (locality 2).
 * -DQ35_PF_AHEAD=0 builds without software prefetch. */
#ifndef Q35_PF_AHEAD
#define Q35_PF_AHEAD 2048
#endif
#ifndef Q35_PF_LOCALITY
#define Q35_PF_LOCALITY 3
#endif
static inline int64_t q35_pf_step(int64_t bytes, int64_t units) { return (bytes + units - 1) / units; }
static inline __attribute__((always_inline)) void q35_pf(const uint8_t *p, int64_t step) {
    if (Q35_PF_AHEAD == 0) return; /* -DQ35_PF_AHEAD=0: no software prefetch */
    const uintptr_t lo = ((uintptr_t)p + Q35_PF_AHEAD + 63) & ~(uintptr_t)63, hi = (uintptr_t)p + Q35_PF_AHEAD + (uintptr_t)step;
    for (uintptr_t a = lo; a < hi; a += 64) __builtin_prefetch((const void *)a, 0, Q35_PF_LOCALITY);
}
#endif
