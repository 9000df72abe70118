/* The read bandwidth generation can reach: the limit `q35 bench` and bench_kernels compare with. */
#ifndef Q35_KERNELS_MEMBW_H
#define Q35_KERNELS_MEMBW_H
#include <stddef.h>

/* Best GB/s (1e9 bytes/s) of the passes in which `threads` pool tasks each read their slice of a
 * `bytes` buffer (far larger than the caches) on huge pages: `reps` passes of each of three read
 * loops: plain 64-byte loads, with a software prefetch 1 KiB ahead, and with the kernels' prefetch. 0 when the
 * buffer cannot be allocated. */
double q35_read_bandwidth(size_t bytes, int threads, int reps);

#endif
