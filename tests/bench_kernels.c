/* Kernel throughput on the Qwen3.5-0.8B layer shapes (build: make bench-kernels; run:
 * build/bench_kernels [-r REPS] [-l LAYERS] [-i ISA] [--head] [format...]; ISA: only that one,
 * default all; --head adds the LM head, 248320x1024 at n = 1).
 * For each format, ISA and thread count (1, 2): n = 1 over LAYERS copies of one layer's six
 * matrices (in_qkv 6144x1024, in_z 2048x1024, out 1024x2048, gate/up 3584x1024, down 1024x3584),
 * distinct memory so the weights stream from DRAM as in generation: GB/s of weight bytes; n = 64
 * over the same matrices: GFLOP/s. Medians over REPS. Also the machine's read bandwidth (1 and 2
 * threads, a 1 GiB buffer) for comparison. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "q35.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rs = 88172645463325252ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 - 0.5);
}

/* ---- read bandwidth ---- */
typedef struct bw_ctx {
    const uint8_t *p;
    size_t n;
    uint64_t sink[64];
} bw_ctx;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t read_range(const uint8_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
        c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
        d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#else
static uint64_t read_range(const uint8_t *p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    const uint64_t *q = (const uint64_t *)p;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) { a ^= q[i]; b ^= q[i + 1]; c ^= q[i + 2]; d ^= q[i + 3]; }
    return a ^ b ^ c ^ d;
}
#endif

static void bw_task(void *v, int i, int n) {
    bw_ctx *c = v;
    const size_t per = (c->n / (size_t)n) & ~(size_t)127;
    c->sink[i * 8] = read_range(c->p + per * (size_t)i, per);
}

static double read_bandwidth(int threads, int reps) {
    const size_t n = (size_t)1 << 30;
    uint8_t *p = NULL;
    if (posix_memalign((void **)&p, 64, n)) return 0;
    memset(p, 1, n);
    q35_set_threads(threads);
    bw_ctx c = {p, n, {0}};
    double t[32];
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        q35_pool_run(q35_global_pool(), threads, bw_task, &c);
        t[r] = now() - t0;
    }
    free(p);
    return (double)n / median(t, reps) / 1e9;
}

/* ---- products ---- */
typedef struct shape {
    const char *name;
    int64_t rows, cols;
} shape;
static const shape SHAPES[] = {{"in_qkv", 6144, 1024}, {"in_z", 2048, 1024}, {"out", 1024, 2048},
                               {"gate", 3584, 1024},   {"up", 3584, 1024},   {"down", 1024, 3584}};
enum { NSH = 6 };

typedef struct layer_set {
    q35_tensor t[64][NSH];
    void *mem[64][NSH];
    int layers;
    size_t bytes; /* all copies */
} layer_set;

static int make_set(layer_set *s, q35_dtype dt, int layers) {
    s->layers = layers;
    s->bytes = 0;
    for (int k = 0; k < NSH; k++) {
        const int64_t rows = SHAPES[k].rows, cols = SHAPES[k].cols;
        const size_t rb = q35_dtype_size(dt) ? q35_dtype_size(dt) * (size_t)cols : q35_row_bytes(dt, cols);
        uint8_t *raw = malloc(rb * (size_t)rows);
        float *row = malloc(sizeof(float) * (size_t)cols);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < cols; c++) row[c] = 0.05f * frand();
            q35_quantize_row(dt, row, raw + rb * (size_t)r, cols);
        }
        free(row);
        q35_tensor base = {.name = SHAPES[k].name, .dtype = dt, .ndim = 2, .shape = {rows, cols}, .data = raw, .nbytes = rb * (size_t)rows};
        const size_t rsz = q35_repack_size(&base), sz = rsz ? rsz : base.nbytes;
        for (int l = 0; l < layers; l++) {
            void *m = NULL;
            if (posix_memalign(&m, 64, sz)) return -1;
            if (rsz) q35_tensor_repack(&base, m, &s->t[l][k]);
            else {
                memcpy(m, raw, sz);
                s->t[l][k] = base;
                s->t[l][k].data = m;
            }
            s->mem[l][k] = m;
            s->bytes += sz;
        }
        free(raw);
    }
    return 0;
}

static void free_set(layer_set *s) {
    for (int l = 0; l < s->layers; l++)
        for (int k = 0; k < NSH; k++) free(s->mem[l][k]);
}

static double run_set(layer_set *s, const float *X, float *Y, int n, int reps) {
    double t[64];
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        for (int l = 0; l < s->layers; l++)
            for (int k = 0; k < NSH; k++) q35_matmul(&s->t[l][k], X, n, Y);
        t[r] = now() - t0;
    }
    return median(t, reps);
}

int main(int argc, char **argv) {
    int reps = 7, layers = 24, nfmt = 0, only = -1, head = 0;
    q35_dtype fmts[16];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--head")) head = 1;
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            ++i;
            for (int k = 0; k < Q35_ISA_COUNT; k++)
                if (!strcmp(argv[i], q35_isa_name((q35_isa)k))) only = k;
        }
        else
            for (int d = 0; d < Q35_DT_COUNT; d++)
                if (!strcmp(argv[i], q35_dtype_name((q35_dtype)d)) && nfmt < 16) fmts[nfmt++] = (q35_dtype)d;
    }
    if (reps > 31) reps = 31;
    if (layers > 64) layers = 64;
    if (!nfmt) {
        const q35_dtype all[] = {Q35_DT_BF16, Q35_DT_F16, Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R, Q35_DT_Q4_K, Q35_DT_Q6_K};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fmts[nfmt++] = all[i];
    }
    printf("read bandwidth (1 GiB, median of %d): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n", reps, read_bandwidth(1, reps), read_bandwidth(2, reps));
    float *X = malloc(sizeof(float) * 64 * 3584), *Y = malloc(sizeof(float) * 64 * 6144);
    for (int i = 0; i < 64 * 3584; i++) X[i] = frand();
    const q35_isa best = q35_isa_best();
    printf("%-6s %-7s %3s %10s %12s %12s\n", "format", "isa", "thr", "MB/layer", "n=1 GB/s", "n=64 GFLOP/s");
    for (int f = 0; f < nfmt; f++) {
        layer_set *s = calloc(1, sizeof *s);
        if (make_set(s, fmts[f], layers)) return 1;
        double flops = 0;
        for (int k = 0; k < NSH; k++) flops += 2.0 * (double)SHAPES[k].rows * (double)SHAPES[k].cols;
        flops *= layers;
        for (int isa = best; isa >= 0; isa--) {
            if ((only >= 0 && isa != only) || q35_isa_set((q35_isa)isa) != 0) continue;
            for (int th = 1; th <= 2; th++) {
                q35_set_threads(th);
                run_set(s, X, Y, 1, 1); /* warm up: pool, buffers */
                const double t1 = run_set(s, X, Y, 1, reps);
                const double t64 = isa == Q35_ISA_SCALAR ? 0 : run_set(s, X, Y, 64, reps < 3 ? reps : 3);
                printf("%-6s %-7s %3d %10.1f %12.1f %12.1f\n", q35_dtype_name(fmts[f]), q35_isa_name((q35_isa)isa), th, (double)s->bytes / layers / 1e6,
                       (double)s->bytes / t1 / 1e9, t64 > 0 ? 64 * flops / t64 / 1e9 : 0.0);
                fflush(stdout);
            }
        }
        q35_isa_set(best);
        free_set(s);
        free(s);
        if (head) { /* the LM head: one 248320 x 1024 matrix, n = 1 */
            const int64_t rows = 248320, cols = 1024;
            const size_t rb = q35_dtype_size(fmts[f]) ? q35_dtype_size(fmts[f]) * (size_t)cols : q35_row_bytes(fmts[f], cols);
            uint8_t *raw = malloc(rb * (size_t)rows);
            float *row = malloc(sizeof(float) * (size_t)cols), *Yh = malloc(sizeof(float) * (size_t)rows);
            for (int64_t r = 0; r < rows; r++) {
                for (int64_t c = 0; c < cols; c++) row[c] = 0.05f * frand();
                q35_quantize_row(fmts[f], row, raw + rb * (size_t)r, cols);
            }
            q35_tensor Wh = {.name = "lm_head", .dtype = fmts[f], .ndim = 2, .shape = {rows, cols}, .data = raw, .nbytes = rb * (size_t)rows};
            void *rp = NULL;
            const size_t rsz = q35_repack_size(&Wh);
            if (rsz && !posix_memalign(&rp, 64, rsz)) {
                q35_tensor_repack(&Wh, rp, &Wh);
                free(raw);
                raw = NULL;
            }
            for (int th = 1; th <= 2; th++) {
                q35_set_threads(th);
                double t[32];
                q35_matmul(&Wh, X, 1, Yh);
                for (int r = 0; r < reps; r++) {
                    const double t0 = now();
                    q35_matmul(&Wh, X, 1, Yh);
                    t[r] = now() - t0;
                }
                printf("%-6s %-7s %3d %10.1f %12.1f %12s  (LM head 248320x1024)\n", q35_dtype_name(fmts[f]), q35_isa_describe(), th, (double)Wh.nbytes / 1e6,
                       (double)Wh.nbytes / median(t, reps) / 1e9, "-");
            }
            free(raw);
            free(rp);
            free(row);
            free(Yh);
        }
    }
    free(X);
    free(Y);
    q35_matmul_release();
    return 0;
}
