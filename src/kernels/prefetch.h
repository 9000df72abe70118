/* Software prefetch for the weight streams of single-token products (generation). */
#ifndef Q35_KERNELS_PREFETCH_H
#define Q35_KERNELS_PREFETCH_H
#include <stdint.h>

/* Generation reads every weight once, in address order. Software prefetches ahead of the read keep
 * more cache-line misses in flight than the hardware prefetchers alone: each line is requested
 * into L2 `far` bytes ahead (T1) and into L1 `near` bytes ahead (T0). A kernel that reads `bytes`
 * of weights in `units` steps (blocks, sub-blocks) takes d = q35_pf_for(its dtype) and step =
 * q35_pf_step(bytes, units), and at step i calls q35_pf(d, base + i * step, step), which requests
 * the lines that start in [p, p + step) at both distances: every line of the stream once each (or
 * q35_pf_lines with a constant line count, no loop, the x86 single-token kernels). A
 * prefetch never faults, so running past the end of the weights is harmless. Kernels prefetch only
 * in single-token tiles (prompt tiles are compute-bound; the hardware keeps up with them).
 * Measured on the Intel VM (docs/speed.md; 0.8B Q4 generation, 3 interleaved runs of 3
 * repetitions): none 25.4 / 46.6 tok/s (1 / 2 threads), T0 at 2 KiB 27.6-28.5 / 50-52, T0 at 1 KiB
 * + T1 at 4 KiB 31-32 / 60-62; T0 at 4 KiB alone, NTA, and a T2 at 8 KiB were slower. AMD's Zen 4
 * wants other distances, per format (dispatch.c), and two Zen 4 hosts wanted different ones: the
 * table is where a run starts, and pftune.h searches from there. */
#include "kernels/unroll.h"
#include "model/tensor.h"

/* Distances in bytes ahead of the read: T0 (into L1) `near`, T1 (into L2) `far`; 0: no prefetch at
 * that level. One pair per weight dtype, chosen once from the CPU (q35_pf_setup, dispatch.c): the
 * best pair depends on the core's prefetchers and on how much work a kernel does per byte
 * (docs/speed.md, "Prefetch distances"). Q35_PF overrides: "near,far" for every dtype, or
 * "q4_0=near,far;q6_k=near,far;..." per dtype. -DQ35_PF_NONE builds without software prefetch. */
typedef struct q35_pf_dist {
    int32_t near, far;
} __attribute__((aligned(8))) q35_pf_dist; /* 8-aligned: read and written as one word */
extern q35_pf_dist q35_pf_table[Q35_DT_COUNT];
/* Weight streams of a thread's single-token product in a block format (R16 layout), 1 or 2: with 2
 * the AVX-512 kernels (and AVX2's Q4_0/Q4R/Q8_0) walk the first and the second half of their row
 * groups in lockstep (the AVX2 K formats and NEON always walk one). q35_pf_setup: 2 except on AMD (Intel VM: +1-13% generation, docs/speed.md
 * "Two weight streams, again"; Zen 4: within noise, "Zen 4 again"); Q35_STREAMS=1|2 overrides. */
extern int q35_pf_streams;
/* dispatch.c: the table for this CPU (amd: AMD's cores), then Q35_PF and Q35_PF_TUNE; restarts the
 * run-time search of pftune.h, which then rewrites entries of the table while products run. Also
 * sets the CPU's other kernel choices: q35_pf_streams, and on x86 q35_avx512_q4_unpack (mm.h). */
void q35_pf_setup(int amd);
static inline q35_pf_dist q35_pf_for(q35_dtype dt) {
    q35_pf_dist d;
    __atomic_load(&q35_pf_table[dt], &d, __ATOMIC_RELAXED);
    return d;
}

static inline int64_t q35_pf_step(int64_t bytes, int64_t units) { return (bytes + units - 1) / units; }
static inline __attribute__((always_inline)) void q35_pf_at(const uint8_t *p, int64_t step, const int64_t ahead, const int locality) {
    const uintptr_t lo = ((uintptr_t)p + (uintptr_t)ahead + 63) & ~(uintptr_t)63, hi = (uintptr_t)p + (uintptr_t)ahead + (uintptr_t)step;
    for (uintptr_t a = lo; a < hi; a += 64) {
        if (locality == 3) __builtin_prefetch((const void *)a, 0, 3);
        else __builtin_prefetch((const void *)a, 0, 2);
    }
}
static inline __attribute__((always_inline)) void q35_pf(q35_pf_dist d, const uint8_t *p, int64_t step) {
#ifndef Q35_PF_NONE
    if (d.far) q35_pf_at(p, step, d.far, 2);
    if (d.near) q35_pf_at(p, step, d.near, 3);
#else
    (void)d, (void)p, (void)step;
#endif
}
/* As q35_pf with a constant count instead of a loop over the lines that start in the step: the nl
 * lines from p on at both distances, no branch per line (the x86 single-token kernels, docs/speed.md
 * "Lean single-token pairs"). With nl * 64 >= step, consecutive calls leave no line out; a few lines
 * are requested twice. */
static inline __attribute__((always_inline)) void q35_pf_lines(q35_pf_dist d, const uint8_t *p, const int nl) {
#ifndef Q35_PF_NONE
    if (d.far) {
        UNROLL
        for (int l = 0; l < nl; l++) __builtin_prefetch(p + d.far + 64 * l, 0, 2);
    }
    if (d.near) {
        UNROLL
        for (int l = 0; l < nl; l++) __builtin_prefetch(p + d.near + 64 * l, 0, 3);
    }
#else
    (void)d, (void)p, (void)nl;
#endif
}
#endif
