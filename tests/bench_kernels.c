/* Kernel throughput on the Qwen3.5-0.8B layer shapes (build: make bench-kernels; run:
 * build/bench_kernels [-r REPS] [-l LAYERS] [-n N] [-i ISA] [--head] [--per-product] [--overlap] [format...]; ISA: only
 * that one, default all; --head adds the LM head, 248320x1024 at n = 1 (with -i's ISA, else the best); --per-product times each n = 1
 * product alone and prints the six shapes' rates (docs/speed.md); --attn N instead: generation's
 * attention over an N-position fp32 / fp16 KV cache of the 0.8B shapes, 1 thread; --recur
 * instead: one token's delta rule over the 0.8B recurrent state, 1 thread; --probe N instead: N
 * readings in a row of the 2-thread read bandwidth, each the best of its loops, to see how steady
 * the host is; --overlap instead: each format's n = 1 rate on a matrix in L2 (what its instructions
 * allow) and, with AVX-512, the probe's read loop with 0-4 vpdpbusd per line, to see what
 * arithmetic costs a weight stream; docs/speed.md "What arithmetic costs a weight stream").
 * For each format, ISA and thread count (1, 2): n = 1 over LAYERS copies of one layer's six
 * matrices (in_qkv 6144x1024, in_z 2048x1024, out 1024x2048, gate/up 3584x1024, down 1024x3584),
 * distinct memory so the weights stream from DRAM as in generation: GB/s of weight bytes, median over
 * REPS; n = N (default 64, at most 512) over the same matrices, as in a prompt: GFLOP/s, best of REPS
 * (compute-bound: a slower repetition is time the host took, not the kernel's). Also the machine's read bandwidth (1 and 2
 * threads, a 1 GiB buffer) for comparison. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hugemem.h"
#include "core/pool.h"
#include "kernels/attention.h"
#include "kernels/membw.h"
#include "kernels/prefetch.h"
#include "kernels/unroll.h"
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
    uint8_t *mem; /* every copy, end to end, on huge pages (as the loader's arena) */
    int layers;
    size_t bytes; /* all copies */
} layer_set;

static int make_set(layer_set *s, q35_dtype dt, int layers) {
    s->layers = layers;
    s->bytes = 0;
    q35_tensor base[NSH];
    size_t sz[NSH], total = 0;
    int packed[NSH];
    for (int k = 0; k < NSH; k++) {
        const int64_t rows = SHAPES[k].rows, cols = SHAPES[k].cols;
        const size_t rb = q35_dtype_size(dt) ? q35_dtype_size(dt) * (size_t)cols : q35_row_bytes(dt, cols);
        uint8_t *raw = malloc(rb * (size_t)rows);
        float *row = malloc(sizeof(float) * (size_t)cols);
        if (!raw || !row) return -1;
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < cols; c++) row[c] = 0.05f * frand();
            q35_quantize_row(dt, row, raw + rb * (size_t)r, cols);
        }
        free(row);
        base[k] = (q35_tensor){.name = SHAPES[k].name, .dtype = dt, .ndim = 2, .shape = {rows, cols}, .data = raw, .nbytes = rb * (size_t)rows};
        const size_t rsz = q35_repack_size(&base[k]);
        packed[k] = rsz != 0;
        sz[k] = ((rsz ? rsz : base[k].nbytes) + 63) & ~(size_t)63;
        total += sz[k] * (size_t)layers;
    }
    s->mem = q35_huge_alloc(total);
    size_t off = 0;
    for (int l = 0; l < layers && s->mem; l++) /* in the order run_set reads them, as the loader's arena */
        for (int k = 0; k < NSH; k++) {
            uint8_t *m = s->mem + off;
            off += sz[k];
            if (packed[k]) q35_tensor_repack(&base[k], m, &s->t[l][k]);
            else {
                memcpy(m, base[k].data, base[k].nbytes);
                s->t[l][k] = base[k];
                s->t[l][k].data = m;
            }
            s->bytes += s->t[l][k].nbytes;
        }
    for (int k = 0; k < NSH; k++) free((void *)base[k].data);
    return s->mem ? 0 : -1;
}

static void free_set(layer_set *s) { q35_huge_free(s->mem); }

/* per[k] (when not NULL): seconds in shape k's products over all reps, each product timed alone */
static double run_set(layer_set *s, const float *X, float *Y, int n, int reps, int best, double *per) {
    double t[64];
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        for (int l = 0; l < s->layers; l++)
            for (int k = 0; k < NSH; k++) {
                const double a = per ? now() : 0;
                q35_matmul(&s->t[l][k], X, n, Y);
                if (per) per[k] += now() - a;
            }
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    return best ? t[0] : median(t, reps);
}

/* One generated token's attention over n_kv positions of the 0.8B cache (6 attention layers, 2 KV
 * heads of 256, GQA groups of 4; K and V in distinct memory on huge pages, as a session keeps
 * them), fp32 and fp16 caches, with each ISA's kernels on 1 thread: ms and GB/s of cache bytes. */
static int bench_attention(int n_kv, int reps) {
    enum { L = 6, NKV = 2, HD = 256, GROUP = 4, NH = NKV * GROUP, QH = 2 * HD };
    const size_t per = (size_t)n_kv * NKV * HD; /* elements of one layer's K (or V) */
    float *K = q35_huge_alloc(sizeof(float) * L * per), *V = q35_huge_alloc(sizeof(float) * L * per);
    uint16_t *K16 = q35_huge_alloc(sizeof(uint16_t) * L * per), *V16 = q35_huge_alloc(sizeof(uint16_t) * L * per);
    float *q = malloc(sizeof(float) * NH * QH), *o = malloc(sizeof(float) * NH * HD);
    float *parts = malloc(sizeof(float) * Q35_ATTN_SEG_MAX * q35_attn_part_floats(NH, HD)), *work = malloc(sizeof(float) * q35_attn_part_work(NKV, GROUP));
    if (!K || !V || !K16 || !V16 || !q || !o || !parts || !work) return 1;
    for (size_t i = 0; i < L * per; i++) K[i] = frand(), V[i] = frand(), K16[i] = q35_f32_to_f16(K[i]), V16[i] = q35_f32_to_f16(V[i]);
    for (int i = 0; i < NH * QH; i++) q[i] = frand();
    const int nseg = q35_attn_segments(n_kv);
    printf("attention of one token over %d positions (%d segments), %.0f MB of fp32 K and V (%.0f MB fp16), 1 thread\n", n_kv, nseg,
           2.0 * L * per * 4 / 1e6, 2.0 * L * per * 2 / 1e6);
    const char *isas[] = {"avx512", "avx2", "scalar"};
    for (int i = 0; i < 3; i++) {
        const q35_gdn_kernels *kn = q35_gdn_kernels_isa(isas[i]);
        if (!kn) continue;
        for (int f16 = 0; f16 < 2; f16++) {
            const size_t es = f16 ? 2 : 4;
            const char *k0 = f16 ? (const char *)K16 : (const char *)K, *v0 = f16 ? (const char *)V16 : (const char *)V;
            double t[32];
            for (int r = 0; r < reps; r++) {
                const double t0 = now();
                for (int l = 0; l < L; l++) {
                    for (int s = 0; s < nseg; s++)
                        q35_attend_part(kn, q, QH, NKV, GROUP, k0 + l * per * es, v0 + l * per * es, f16, NKV * HD, HD,
                                        q35_attn_seg_start(n_kv, nseg, s), q35_attn_seg_start(n_kv, nseg, s + 1), 1.0f / 16,
                                        parts + s * q35_attn_part_floats(NH, HD), work);
                    q35_attend_merge(kn, parts, nseg, NH, HD, o, HD);
                }
                t[r] = now() - t0;
            }
            const double tm = median(t, reps);
            printf("%-7s %s %8.2f ms  %6.1f GB/s\n", kn->name, f16 ? "f16" : "f32", tm * 1e3, 2.0 * L * per * es / tm / 1e9);
        }
    }
    q35_huge_free(K), q35_huge_free(V), q35_huge_free(K16), q35_huge_free(V16), free(q), free(o), free(parts), free(work);
    return 0;
}

/* One generated token's delta rule over the 0.8B recurrent state (18 layers x 16 heads of 128 x
 * 128 fp32, 18.9 MB read and written) per ISA, 1 thread, with a 128 MiB read before each run so
 * the state comes from DRAM as in generation (it would fit in a large L3): GB/s read + written. */
static int bench_recur(int reps) {
    enum { L = 18, H = 16, DK = 128, DV = 128 };
    const size_t per = (size_t)DK * DV, flush = (size_t)128 << 20;
    float *S = q35_huge_alloc(sizeof(float) * L * H * per), *F = q35_huge_alloc(flush);
    if (!S || !F) return 1;
    for (size_t i = 0; i < (size_t)L * H * per; i++) S[i] = frand() * 0.01f;
    for (size_t i = 0; i < flush / 4; i++) F[i] = 1;
    float q[DK], k[DK], v[DV], o[DV], g = -0.1f, beta = 0.5f, sink = 0;
    for (int i = 0; i < DK; i++) q[i] = k[i] = frand() * 0.1f;
    for (int i = 0; i < DV; i++) v[i] = frand();
    printf("delta rule of one token over %d layers x %d heads (%.1f MB of fp32 state, read and written), 1 thread\n", L, H,
           L * H * per * 4 / 1e6);
    const char *isas[] = {"avx512", "avx2", "scalar"};
    for (int i = 0; i < 3; i++) {
        const q35_gdn_kernels *kn = q35_gdn_kernels_isa(isas[i]);
        if (!kn) continue;
        double t[32];
        for (int r = 0; r < reps; r++) {
            for (size_t x = 0; x < flush / 4; x += 16) sink += F[x];
            const double t0 = now();
            for (int l = 0; l < L; l++)
                for (int h = 0; h < H; h++) {
                    const q35_gdn_head hd = {q, k, v, DK, &g, &beta, o, DV, S + ((size_t)l * H + h) * per, 1, DK, DV,
                                             h + 1 < H ? S + ((size_t)l * H + h + 1) * per : NULL};
                    kn->recur(&hd);
                }
            t[r] = now() - t0;
        }
        const double tm = median(t, reps);
        printf("%-7s %8.3f ms  %6.1f GB/s\n", kn->name, tm * 1e3, 2.0 * L * H * per * 4 / tm / 1e9);
    }
    if (sink == -1.0f) printf("\n");
    q35_huge_free(S), q35_huge_free(F);
    return 0;
}

/* ---- --overlap: how much a product's arithmetic costs its weight stream ---- */

/* n = 1 products of one 1024 x 1024 matrix that stays in L2, called over and over on 1 thread:
 * the rate the kernel's instructions allow when memory is not the limit (GB/s of weight bytes). */
static double l2_rate(q35_dtype dt) {
    const int64_t rows = 1024, cols = 1024;
    const size_t rb = q35_dtype_size(dt) ? q35_dtype_size(dt) * (size_t)cols : q35_row_bytes(dt, cols);
    uint8_t *raw = malloc(rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)cols), *X = malloc(sizeof(float) * (size_t)cols), *Y = malloc(sizeof(float) * (size_t)rows);
    if (!raw || !row || !X || !Y) return 0;
    for (int64_t c = 0; c < cols; c++) X[c] = frand();
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = 0.05f * frand();
        q35_quantize_row(dt, row, raw + rb * (size_t)r, cols);
    }
    q35_tensor W = {.name = "l2", .dtype = dt, .ndim = 2, .shape = {rows, cols}, .data = raw, .nbytes = rb * (size_t)rows};
    const size_t rsz = q35_repack_size(&W);
    void *rp = rsz ? q35_huge_alloc(rsz) : NULL;
    if (rp) q35_tensor_repack(&W, rp, &W);
    double best = 1e9;
    for (int r = 0; r < 9; r++) {
        const double t0 = now();
        for (int i = 0; i < 200; i++) q35_matmul(&W, X, 1, Y);
        const double t = (now() - t0) / 200;
        best = t < best ? t : best;
    }
    const double gbs = (double)W.nbytes / best / 1e9;
    if (rp) q35_huge_free(rp);
    free(raw), free(row), free(X), free(Y);
    return gbs;
}

#if defined(__x86_64__)
/* The read loop of the bandwidth probe's fastest mode (membw_read.h mode 3/4: T0 512 and T1 1 KiB
 * ahead; `streams` halves of p in lockstep) with k vpdpbusd per 64-byte line added, about what a
 * Q4_0 (k = 2: low and high nibbles) or Q8_0 (k = 1) single-token kernel spends on a line. */
#define OVERLAP_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
OVERLAP_TARGET static inline __attribute__((always_inline)) uint64_t read_dp_k(const uint8_t *p, size_t bytes, int streams, const int k) {
    static const int8_t act[64] __attribute__((aligned(64))) = {1, 2, 3, 4};
    __m512i acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_si512();
    const __m512i m4 = _mm512_set1_epi8(15);
    const size_t share = bytes / (size_t)streams;
    for (size_t o = 0; o < share; o += 256)
        for (int st = 0; st < streams; st++) {
            const uint8_t *q = p + (size_t)st * share + o;
            q35_pf((q35_pf_dist){512, 1024}, q, 256);
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m512i v = _mm512_loadu_si512((const void *)(q + 64 * c));
                if (!k) acc[c] = _mm512_add_epi32(acc[c], v);
                UNROLL
                for (int i = 0; i < k; i++) {
                    const __m512i w = i & 1 ? _mm512_andnot_si512(m4, v) : _mm512_and_si512(v, m4);
                    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc[(2 * c + i) & 7]) : "v"(w), "m"(*(const int8_t(*)[4])(act + 4 * (i & 15))));
                }
            }
        }
    __m512i a = acc[0];
    for (int i = 1; i < 8; i++) a = _mm512_add_epi32(a, acc[i]);
    return (uint64_t)(uint32_t)_mm512_reduce_add_epi32(a);
}
/* k a constant in each copy: the loops unrolled, no run-time branch per line */
OVERLAP_TARGET __attribute__((noinline)) static uint64_t read_dp(const uint8_t *p, size_t bytes, int streams, int k) {
    switch (k) {
    case 0: return read_dp_k(p, bytes, streams, 0);
    case 1: return read_dp_k(p, bytes, streams, 1);
    case 2: return read_dp_k(p, bytes, streams, 2);
    default: return read_dp_k(p, bytes, streams, 4);
    }
}
#endif

static int bench_overlap(const q35_dtype *fmts, int nfmt) {
    q35_set_threads(1);
    printf("n = 1 products of a 1024 x 1024 matrix in L2, 1 thread (%s; GB/s of weights, best of 9 x 200):\n", q35_isa_name(q35_isa_get()));
    for (int f = 0; f < nfmt; f++) printf("  %-6s %6.1f\n", q35_dtype_name(fmts[f]), l2_rate(fmts[f]));
#if defined(__x86_64__)
    if (q35_isa_best() < Q35_ISA_AVX512) return 0;
    const size_t bytes = (size_t)1 << 30;
    uint8_t *p = q35_huge_alloc(bytes);
    if (!p) return 1;
    memset(p, 1, bytes);
    uint64_t sink = 0;
    printf("1 GiB read loop (T0 512 B + T1 1 KiB ahead) with k vpdpbusd per 64-byte line, 1 thread, GB/s (best of 5):\n");
    for (int streams = 1; streams <= 2; streams++) {
        printf("  %d stream%s:", streams, streams > 1 ? "s" : " ");
        for (int k = 0; k <= 4; k++) {
            if (k == 3) continue;
            double best = 0;
            for (int r = 0; r < 5; r++) {
                const double t0 = now();
                sink += read_dp(p, bytes, streams, k);
                const double g = (double)bytes / (now() - t0) / 1e9;
                best = g > best ? g : best;
            }
            printf("  k=%d %5.1f", k, best);
        }
        printf("\n");
    }
    q35_huge_free(p);
    if (sink == 1) printf("\n");
#endif
    return 0;
}

int main(int argc, char **argv) {
    int reps = 7, layers = 24, nb = 64, nfmt = 0, only = -1, head = 0, attn = 0, recur = 0, per_product = 0, probe = 0, overlap = 0;
    q35_dtype fmts[16];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) nb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--head")) head = 1;
        else if (!strcmp(argv[i], "--recur")) recur = 1;
        else if (!strcmp(argv[i], "--overlap")) overlap = 1;
        else if (!strcmp(argv[i], "--per-product")) per_product = 1;
        else if (!strcmp(argv[i], "--attn") && i + 1 < argc) attn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--probe") && i + 1 < argc) probe = atoi(argv[++i]);
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
    if (nb < 2 || nb > 512) nb = 64;
    if (!nfmt) {
        const q35_dtype all[] = {Q35_DT_BF16, Q35_DT_F16, Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R, Q35_DT_Q4_K, Q35_DT_Q6_K};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fmts[nfmt++] = all[i];
    }
    if (overlap) return bench_overlap(fmts, nfmt);
    q35_set_threads(2);
    if (probe > 0) {
        printf("2-thread read bandwidth, %d readings (GB/s):", probe);
        for (int i = 0; i < probe; i++) printf(" %.1f", q35_read_bandwidth((size_t)1 << 30, 2, 1));
        printf("\n");
        return 0;
    }
    const double bw1 = q35_read_bandwidth((size_t)1 << 30, 1, reps), bw2 = q35_read_bandwidth((size_t)1 << 30, 2, reps);
    printf("read bandwidth (1 GiB on huge pages, best of %d): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n", Q35_MEMBW_LOOPS * reps, bw1, bw2);
    if (attn > 0) return bench_attention(attn, reps);
    if (recur) return bench_recur(reps);
    float *X = malloc(sizeof(float) * nb * 3584), *Y = malloc(sizeof(float) * nb * 6144);
    for (int i = 0; i < nb * 3584; i++) X[i] = frand();
    const q35_isa best = q35_isa_best();
    char nbh[32];
    snprintf(nbh, sizeof nbh, "n=%d GFLOP/s", nb);
    printf("%-6s %-7s %3s %10s %12s %12s\n", "format", "isa", "thr", "MB/layer", "n=1 GB/s", nbh);
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
                run_set(s, X, Y, 1, 1, 0, NULL); /* warm up: pool, buffers */
                double per[NSH] = {0};
                const double t1 = run_set(s, X, Y, 1, reps, 0, per_product ? per : NULL);
                const double tn = isa == Q35_ISA_SCALAR ? 0 : run_set(s, X, Y, nb, reps, 1, NULL);
                printf("%-6s %-7s %3d %10.1f %12.1f %12.1f\n", q35_dtype_name(fmts[f]), q35_isa_name((q35_isa)isa), th, (double)s->bytes / layers / 1e6,
                       (double)s->bytes / t1 / 1e9, tn > 0 ? nb * flops / tn / 1e9 : 0.0);
                for (int k = 0; per_product && k < NSH; k++)
                    printf("    %-7s %5lldx%-5lld %8.1f us %8.1f GB/s (mean of every rep and layer)\n", SHAPES[k].name, (long long)SHAPES[k].rows,
                           (long long)SHAPES[k].cols, per[k] / reps / layers * 1e6, (double)s->t[0][k].nbytes * layers * reps / per[k] / 1e9);
                fflush(stdout);
            }
        }
        q35_isa_set(best);
        free_set(s);
        free(s);
        if (head) { /* the LM head: one 248320 x 1024 matrix, n = 1, with the ISA -i names (else the best) */
            if (only >= 0) q35_isa_set((q35_isa)only);
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
            if (rsz && (rp = q35_huge_alloc(rsz))) {
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
            q35_huge_free(rp);
            free(row);
            free(Yh);
            q35_isa_set(best);
        }
    }
    free(X);
    free(Y);
    q35_matmul_release();
    return 0;
}
