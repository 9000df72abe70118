/* The public matrix products: pick the kernel of the active ISA for W's dtype and layout, prepare
 * the activations once per call (8-bit blocks, Q4R rotation, or bf16), and split the output rows
 * across the global pool in contiguous ranges of whole 16-row groups. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "kernels/pftune.h"
#include "kernels/kernels.h"
#include "kernels/mm.h"

/* ---- the calling thread's activation buffer ---- */

typedef struct act_buf {
    void *p;      /* 64-byte aligned, cap bytes */
    size_t cap;
    int keyed;    /* registered with the thread-exit destructor */
} act_buf;

static _Thread_local act_buf tls_buf;
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static volatile int bf16_dot;       /* q35_matmul_set_bf16_dot; initially Q35_BF16_DOT=1 in the environment */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static void env_init(void) {
    const char *e = getenv("Q35_BF16_DOT");
    if (e && !strcmp(e, "1")) bf16_dot = 1;
}

static void buf_free(void *v) {
    act_buf *b = v;
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}
static void buf_key_init(void) { (void)pthread_key_create(&buf_key, buf_free); }

static void *buf_get(size_t bytes) {
    act_buf *b = &tls_buf;
    if (bytes <= b->cap) return b->p;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < bytes) cap *= 2;
    void *p = NULL;
    if (posix_memalign(&p, 64, cap) != 0) return NULL;
    free(b->p);
    b->p = p;
    b->cap = cap;
    if (!b->keyed) {
        pthread_once(&buf_once, buf_key_init);
        if (pthread_setspecific(buf_key, b) == 0) b->keyed = 1;
    }
    return p;
}

void q35_matmul_release(void) { buf_free(&tls_buf); }

static size_t al64(size_t x) { return (x + 63) & ~(size_t)63; }

/* q35_act's tile for n tokens with table K (mm.h). */
static int act_tile(const q35_kern *K, int n) { return K->act_tile > 0 && K->act_tile < n ? K->act_tile : n > 0 ? n : 1; }

/* Bytes for n tokens x cols of 8-bit activations in tiles of tt (the last one padded to tt), plus
 * one rotated row, and their carving. */
static size_t act_slots(int64_t cols, int n, int tt) { return (size_t)(cols / 32) * ((size_t)(n + tt - 1) / (size_t)tt * (size_t)tt); }
static size_t act_bytes(int64_t cols, int n, int tt) {
    const size_t nbn = act_slots(cols, n, tt);
    return al64(nbn * 32) + al64(nbn * 4) + al64(nbn * 4) + al64(nbn * 4) + al64(nbn * 4) + al64((size_t)cols * 4);
}
static float *act_carve(void *p, int64_t cols, int n, int tt, q35_act *a) {
    const size_t nbn = act_slots(cols, n, tt);
    char *c = p;
    a->nb = (int)(cols / 32);
    a->n = n;
    a->tt = tt;
    a->q = (int8_t *)c;
    c += al64(nbn * 32);
    a->d = (float *)c;
    c += al64(nbn * 4);
    a->s = (int32_t *)c;
    c += al64(nbn * 4);
    a->h = (int16_t *)c;
    c += al64(nbn * 4);
    a->sp = (int32_t *)c;
    c += al64(nbn * 4);
    return (float *)c;
}

int q35_matmul_reserve(int64_t cols, int n) {
    const size_t need = act_bytes(cols, n, act_tile(q35_kern_active(), n)), bf = al64((size_t)cols * (size_t)n * 2);
    return buf_get(need > bf ? need : bf) ? 0 : -1;
}

int q35_matmul_set_bf16_dot(int on) {
    pthread_once(&env_once, env_init);
    const int old = bf16_dot;
    bf16_dot = on != 0;
    return old;
}

/* ---- preparing a job ---- */

static int is_int_format(q35_dtype t) { return t >= Q35_DT_Q8_0 && t <= Q35_DT_Q4R; }

/* Quantize tokens [t0, t1) of X into a (rotating a copy first for Q4R, in tmp[cols]). */
static void quantize_range(const q35_kern *K, q35_dtype dt, const float *X, int64_t cols, int t0, int t1, q35_act *a, float *tmp) {
    const int mult = K->act_mult[dt];
    for (int t = t0; t < t1; t++) {
        const float *x = X + (int64_t)t * cols;
        if (dt == Q35_DT_Q4R) {
            memcpy(tmp, x, sizeof(float) * (size_t)cols);
            K->rot(tmp, cols);
            x = tmp;
        }
        K->actq(x, t, mult, dt == Q35_DT_Q4_K ? 8 : 1, a); /* Q4_K: a super-block's 8 blocks share a scale */
        if (dt == Q35_DT_Q4_K) /* the min term's block sums S in pairs (mm.h; Q4_K rows: whole super-blocks) */
            for (int64_t b = 0; b + 1 < a->nb; b += 2) {
                const size_t i0 = q35_act_at(a, b, t), i1 = q35_act_at(a, b + 1, t);
                const int S0 = a->h[2 * i0] + a->h[2 * i0 + 1], S1 = a->h[2 * i1] + a->h[2 * i1 + 1];
                a->sp[i0] = (int32_t)((uint32_t)(uint16_t)S0 | (uint32_t)S1 << 16);
            }
    }
}

typedef struct actq_ctx {
    const q35_kern *K;
    q35_dtype dt;
    const float *X;
    int64_t cols;
    int n;
    q35_act *a;
} actq_ctx;

enum { ACTQ_STACK_COLS = 8192 }; /* a task rotates one row on its stack: 32 KiB */

/* Task i quantizes whole token tiles [nt i / n_tasks, nt (i + 1) / n_tasks) of the nt tiles (no
 * cache line written by two threads). */
static void actq_task(void *vctx, int i, int n_tasks) {
    const actq_ctx *c = vctx;
    float tmp[ACTQ_STACK_COLS];
    const int tt = c->a->tt, nt = (c->n + tt - 1) / tt;
    const int t0 = (int)((long long)nt * i / n_tasks) * tt, t1 = (int)((long long)nt * (i + 1) / n_tasks) * tt;
    quantize_range(c->K, c->dt, c->X, c->cols, t0, t1 < c->n ? t1 : c->n, c->a, tmp);
}

/* Quantize tokens [0, n) of X into a; a prompt's tokens are split across the pool. */
static void quantize_acts(const q35_kern *K, q35_dtype dt, const float *X, int64_t cols, int n, q35_act *a, float *tmp, int parallel) {
    q35_pool *pool = parallel && n >= 16 && cols <= ACTQ_STACK_COLS ? q35_global_pool() : NULL;
    const int T = pool ? q35_pool_threads(pool) : 1;
    if (T <= 1) {
        quantize_range(K, dt, X, cols, 0, n, a, tmp);
        return;
    }
    actq_ctx c = {K, dt, X, cols, n, a};
    const int nt = (n + a->tt - 1) / a->tt;
    q35_pool_run(pool, T < nt ? T : nt, actq_task, &c);
}

typedef struct run_ctx {
    q35_mm_fn fn;
    const q35_mm_job *job;
    int64_t r0, r1;     /* rows to compute */
} run_ctx;

static void run_task(void *vctx, int i, int n) {
    const run_ctx *c = vctx;
    const int64_t g0 = c->r0 / 16, g1 = (c->r1 + 15) / 16, ng = g1 - g0;
    int64_t a = (g0 + ng * i / n) * 16, b = (g0 + ng * (i + 1) / n) * 16;
    if (a < c->r0) a = c->r0;
    if (b > c->r1) b = c->r1;
    if (a < b) c->fn(c->job, a, b);
}

static void zero_rows(float *Y, int64_t rows, int n, int64_t r0, int64_t r1) {
    for (int t = 0; t < n; t++) memset(Y + (int64_t)t * rows + r0, 0, sizeof(float) * (size_t)(r1 - r0));
}

/* Below this many multiply-adds a product runs on the calling thread alone. */
#define PARALLEL_MIN_MACS (3 << 17) /* measured: 256x1024 at n = 1 is slower on 2 threads, 512x1024 faster */

static void matmul_impl(const q35_tensor *W, const float *X, int n, float *Y, int64_t r0, int64_t r1, int parallel, int batch) {
    if (n <= 0 || r0 >= r1) return;
    const int64_t rows = W->shape[0], cols = W->shape[1];
    const q35_dtype dt = W->dtype;
    const int layout = W->layout == Q35_LAYOUT_R16;
    if (W->ndim != 2 || (unsigned)dt >= Q35_DT_COUNT || !q35_quant_supports(dt, cols)) {
        zero_rows(Y, rows, n, r0, r1);
        return;
    }
    const q35_kern *K = q35_kern_active();
    q35_mm_fn fn = K->mm[dt][layout];
    if (!fn) {
        K = &q35_kern_scalar;
        fn = K->mm[dt][layout];
    }
    if (!fn) {
        zero_rows(Y, rows, n, r0, r1);
        return;
    }
    q35_mm_job job = {.W = W, .w = W->data, .rows = rows, .cols = cols, .n = n, .X = X, .Y = Y, .batch = batch};
    if (dt == Q35_DT_BF16) pthread_once(&env_once, env_init);
    if (dt == Q35_DT_BF16 && bf16_dot && K->mm_bf16dot && q35_cpu_has_avx512bf16()) {
        uint16_t *xb = buf_get((size_t)cols * (size_t)n * 2);
        if (xb) {
            for (int64_t i = 0; i < cols * n; i++) xb[i] = q35_f32_to_bf16(X[i]);
            job.xb = xb;
            fn = K->mm_bf16dot;
        }
    }
    if (is_int_format(dt)) {
        const int tt = act_tile(K, n);
        void *p = buf_get(act_bytes(cols, n, tt));
        if (!p) { /* out of memory: one token at a time through buffers on the stack */
            enum { MAXC = 8192 };
            if (cols > MAXC) {
                zero_rows(Y, rows, n, r0, r1);
                return;
            }
            int8_t q[MAXC];
            float d[MAXC / 32], tmp[MAXC];
            int32_t s[MAXC / 32];
            int16_t h[MAXC / 16];
            int32_t sp[MAXC / 32];
            for (int t = 0; t < n; t++) {
                q35_mm_job one = job;
                one.n = 1;
                one.X = X + (int64_t)t * cols;
                one.Y = Y + (int64_t)t * rows;
                one.a = (q35_act){q, d, s, h, sp, (int)(cols / 32), 1, 1};
                quantize_acts(K, dt, one.X, cols, 1, &one.a, tmp, 0);
                fn(&one, r0, r1);
            }
            return;
        }
        float *tmp = act_carve(p, cols, n, tt, &job.a);
        quantize_acts(K, dt, X, cols, n, &job.a, tmp, parallel);
    }
    run_ctx ctx = {fn, &job, r0, r1};
    int tasks = 1;
    q35_pool *pool = NULL;
    if (parallel && (double)(r1 - r0) * (double)cols * n >= PARALLEL_MIN_MACS) {
        pool = q35_global_pool();
        const int64_t groups = (r1 + 15) / 16 - r0 / 16;
        tasks = pool ? q35_pool_threads(pool) : 1;
        if (tasks > groups) tasks = (int)groups;
    }
    q35_pftune_mark mark = {.dt = -1};
    if (n == 1 && parallel) q35_pftune_begin(dt, (int64_t)q35_row_bytes(dt, cols) * (r1 - r0), &mark);
    if (tasks <= 1) fn(&job, r0, r1);
    else q35_pool_run(pool, tasks, run_task, &ctx);
    q35_pftune_end(&mark);
}

void q35_matmul(const q35_tensor *W, const float *X, int n, float *Y) { matmul_impl(W, X, n, Y, 0, W->shape[0], 1, 0); }
void q35_matmul_batch(const q35_tensor *W, const float *X, int n, float *Y) { matmul_impl(W, X, n, Y, 0, W->shape[0], 1, 1); }

/* ---- several products of one input in one dispatch ---- */

typedef struct many_ctx {
    q35_mm_fn fn;
    const q35_mm_job *jobs;
    const int64_t *g_end;  /* [count] cumulative 16-row groups */
    int count;
} many_ctx;

/* Task i computes groups [G*i/n, G*(i+1)/n) of the products' groups laid end to end. */
static void many_task(void *vctx, int i, int n) {
    const many_ctx *c = vctx;
    const int64_t G = c->g_end[c->count - 1], a = G * i / n, b = G * (i + 1) / n;
    int64_t g0 = 0;
    for (int k = 0; k < c->count; g0 = c->g_end[k], k++) {
        const int64_t lo = a > g0 ? a : g0, hi = b < c->g_end[k] ? b : c->g_end[k];
        if (lo >= hi) continue;
        const int64_t r0 = (lo - g0) * 16, r1 = (hi - g0) * 16 < c->jobs[k].rows ? (hi - g0) * 16 : c->jobs[k].rows;
        c->fn(&c->jobs[k], r0, r1);
    }
}

void q35_matmul_many(const q35_tensor *const *W, float *const *Y, int count, const float *X, int n) {
    enum { MAX_MANY = 4 };
    int same = count >= 2 && count <= MAX_MANY && n > 0;
    for (int k = 0; same && k < count; k++)
        same = W[k]->ndim == 2 && W[k]->dtype == W[0]->dtype && W[k]->layout == W[0]->layout && W[k]->shape[1] == W[0]->shape[1];
    const q35_dtype dt = W[0]->dtype;
    const int64_t cols = W[0]->shape[1];
    const q35_kern *K = q35_kern_active();
    q35_mm_fn fn = same && is_int_format(dt) && q35_quant_supports(dt, cols) ? K->mm[dt][W[0]->layout == Q35_LAYOUT_R16] : NULL;
    const int tt = act_tile(K, n);
    void *p = fn ? buf_get(act_bytes(cols, n, tt)) : NULL;
    if (!p) { /* different formats, float weights, or no buffer: one product at a time */
        for (int k = 0; k < count; k++) q35_matmul(W[k], X, n, Y[k]);
        return;
    }
    q35_mm_job jobs[MAX_MANY];
    int64_t g_end[MAX_MANY], G = 0;
    double macs = 0;
    q35_act a;
    float *tmp = act_carve(p, cols, n, tt, &a);
    quantize_acts(K, dt, X, cols, n, &a, tmp, 1);
    for (int k = 0; k < count; k++) {
        jobs[k] = (q35_mm_job){.W = W[k], .w = W[k]->data, .rows = W[k]->shape[0], .cols = cols, .n = n, .X = X, .Y = Y[k], .a = a};
        g_end[k] = G += (W[k]->shape[0] + 15) / 16;
        macs += (double)W[k]->shape[0] * (double)cols * n;
    }
    many_ctx ctx = {fn, jobs, g_end, count};
    q35_pool *pool = macs >= PARALLEL_MIN_MACS ? q35_global_pool() : NULL;
    int tasks = pool ? q35_pool_threads(pool) : 1;
    if (tasks > G) tasks = (int)G;
    q35_pftune_mark mark = {.dt = -1};
    if (n == 1) {
        int64_t bytes = 0;
        for (int k = 0; k < count; k++) bytes += (int64_t)q35_row_bytes(dt, cols) * jobs[k].rows;
        q35_pftune_begin(dt, bytes, &mark);
    }
    if (tasks <= 1) many_task(&ctx, 0, 1);
    else q35_pool_run(pool, tasks, many_task, &ctx);
    q35_pftune_end(&mark);
}

void q35_matmul_rows(const q35_tensor *W, const float *X, int n, float *Y, int64_t r0, int64_t r1) {
    matmul_impl(W, X, n, Y, r0 < 0 ? 0 : r0, r1 > W->shape[0] ? W->shape[0] : r1, 0, 0);
}
