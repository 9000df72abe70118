/* The read bandwidth generation can reach: the limit `q35 bench` and bench_kernels compare with. */
#ifndef Q35_KERNELS_MEMBW_H
#define Q35_KERNELS_MEMBW_H
#include <stddef.h>

/* Best GB/s (1e9 bytes/s) of the passes in which `threads` pool tasks each read their slice of a
 * `bytes` buffer (far larger than the caches) on huge pages: `reps` passes of each of five read
 * loops (membw_read.h): plain 64-byte loads; a software prefetch 1 KiB ahead; the kernels' prefetch;
 * prefetches 512 bytes (L1) and 1 KiB (L2) ahead; and those in two streams per task at once. 0 when
 * the buffer cannot be allocated. */
double q35_read_bandwidth(size_t bytes, int threads, int reps);
#define Q35_MEMBW_LOOPS 5 /* the read loops each of the `reps` rounds runs */

#endif
