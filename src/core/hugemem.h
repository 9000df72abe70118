/* Large, long-lived buffers (converted weights, the fast-greedy head copy, the recurrent state):
 * anonymous mappings aligned to 2 MiB and advised for transparent huge pages, so that streaming
 * them each token does not also walk 4 KiB page tables. Measured: the 0.8B Q4 generation read
 * from 4 KiB pages ran at 22.2 tok/s, from huge pages at 28.6 (1 thread; docs/speed.md).
 * Pages are touched only when written, like malloc. */
#ifndef Q35_CORE_HUGEMEM_H
#define Q35_CORE_HUGEMEM_H
#include <stddef.h>

/* bytes of zeroed memory, 2 MiB aligned (64-byte aligned where mmap is missing); NULL when out of memory. */
void *q35_huge_alloc(size_t bytes);
/* Frees a q35_huge_alloc result; NULL is ignored. */
void q35_huge_free(void *p);

#endif
