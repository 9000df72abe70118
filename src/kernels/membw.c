/* q35_read_bandwidth: the sums are kept (sink) so that the loads are not optimized away. */
#include "kernels/membw.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "core/hugemem.h"
#include "core/pool.h"
#include "kernels/kernels.h"

typedef struct membw_ctx {
    const uint8_t *buf; /* [bytes] */
    size_t bytes;
    int mode;           /* membw_read.h: 0 plain, 1 T0 1 KiB ahead, 2 the kernels' prefetch, 3 T0 512 + T1 1 KiB, 4 as 3 in two streams */
    int avx512;         /* read with the AVX-512 loop */
    uint64_t sink[64 * 8];
} membw_ctx;

#define MEMBW_READ q35_membw_read
#include "kernels/membw_read.h"
#if defined(__x86_64__)
uint64_t q35_membw_read_avx512(const uint8_t *p, size_t bytes, int mode);
#endif

static void read_task(void *vctx, int i, int n) {
    membw_ctx *c = vctx;
    const size_t per = c->bytes / (size_t)n / 512 * 512;
    const uint8_t *p = c->buf + per * (size_t)i;
#if defined(__x86_64__)
    if (c->avx512) {
        c->sink[8 * (i % 64)] += q35_membw_read_avx512(p, per, c->mode);
        return;
    }
#endif
    c->sink[8 * (i % 64)] += q35_membw_read(p, per, c->mode);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double q35_read_bandwidth(size_t bytes, int threads, int reps) {
    uint8_t *buf = q35_huge_alloc(bytes);
    if (!buf) return 0;
    memset(buf, 1, bytes);
    membw_ctx ctx = {.buf = buf, .bytes = bytes, .avx512 = q35_isa_get() == Q35_ISA_AVX512};
    const int tasks = threads < 1 ? 1 : threads;
    const size_t read = bytes / (size_t)tasks / 512 * 512 * (size_t)tasks; /* what the tasks' slices cover */
    double best = 0;
    for (int r = 0; r < Q35_MEMBW_LOOPS * reps; r++) {
        ctx.mode = r % Q35_MEMBW_LOOPS;
        const double t0 = now_s();
        q35_pool_run(q35_global_pool(), tasks, read_task, &ctx);
        const double gbs = (double)read / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    q35_huge_free(buf);
    return best;
}
