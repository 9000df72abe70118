/* q35_huge_alloc: mmap of bytes + 2 MiB + one page; the data starts at the first 2 MiB boundary
 * past the first page, and a header just before it records the mapping for q35_huge_free. */
#include "core/hugemem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { HUGE_ALIGN = 2 << 20 };

typedef struct huge_hdr {
    void *base;     /* the mapping */
    size_t length;  /* its length */
    uint64_t magic;
} huge_hdr;
#define HUGE_MAGIC 0x7135687567656d31ull /* "q5hugem1" */

void *q35_huge_alloc(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - HUGE_ALIGN - 2 * page) return NULL;
    const size_t length = bytes + HUGE_ALIGN + page;
    void *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    const uintptr_t data = ((uintptr_t)base + page + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    /* the pages before data other than the header's, and those past data + bytes, stay untouched */
    if (bytes) (void)madvise((void *)data, (bytes + page - 1) & ~(page - 1), MADV_HUGEPAGE);
    huge_hdr h = {base, length, HUGE_MAGIC};
    memcpy((char *)data - sizeof h, &h, sizeof h);
    return (void *)data;
}

void q35_huge_free(void *p) {
    if (!p) return;
    huge_hdr h;
    memcpy(&h, (char *)p - sizeof h, sizeof h);
    if (h.magic != HUGE_MAGIC) abort(); /* not from q35_huge_alloc: a bug, never input-driven */
    munmap(h.base, h.length);
}
