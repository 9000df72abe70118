/* The thread pool: every task runs exactly once per dispatch (also when tasks stall their thread),
 * parallel reductions equal the serial ones, many tiny dispatches, nested and concurrent
 * dispatches run inline, 1/2/3/8 threads, the process-wide pool follows q35_set_threads. Prints
 * the median dispatch latency (not checked: it depends on the host's load). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "core/pool.h"
#include "q35.h"
#include "test.h"

static const int thread_counts[] = {1, 2, 3, 8};

typedef struct {
    atomic_int *hits;   /* [n_tasks] */
    int n_expected;     /* n argument every call must see */
    atomic_int bad_n;
} count_ctx;

static void count_task(void *vctx, int i, int n) {
    count_ctx *c = vctx;
    if (n != c->n_expected) atomic_fetch_add(&c->bad_n, 1);
    atomic_fetch_add(&c->hits[i], 1);
}

/* Every task index 0..n-1 runs exactly once, for task counts around the thread count. */
static void test_each_task_once(void) {
    for (size_t k = 0; k < sizeof thread_counts / sizeof *thread_counts; k++) {
        q35_pool *p = q35_pool_new(thread_counts[k]);
        CHECK(p && q35_pool_threads(p) == thread_counts[k], "pool of %d threads", thread_counts[k]);
        if (!p) continue;
        const int sizes[] = {0, 1, 2, 3, 5, 7, 8, 9, 16, 17, 100, 1000};
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            const int n = sizes[s];
            atomic_int hits[1000];
            for (int i = 0; i < 1000; i++) atomic_init(&hits[i], 0);
            count_ctx c = {hits, n, 0};
            q35_pool_run(p, n, count_task, &c);
            int bad = 0;
            for (int i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
            CHECK(bad == 0 && atomic_load(&c.bad_n) == 0, "%d threads, %d tasks: %d tasks not run exactly once", thread_counts[k], n, bad);
        }
        { /* more tasks than a share's claim word counts (run inline) */
            const int n = 70000;
            atomic_int *hits = malloc(sizeof(atomic_int) * n);
            for (int i = 0; i < n; i++) atomic_init(&hits[i], 0);
            count_ctx c = {hits, n, 0};
            q35_pool_run(p, n, count_task, &c);
            int bad = 0;
            for (int i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
            CHECK(bad == 0, "%d threads, %d tasks: %d tasks not run exactly once", thread_counts[k], n, bad);
            free(hits);
        }
        q35_pool_free(p);
    }
}

typedef struct {
    const double *x;    /* [len] */
    int64_t len;
    double *partial;    /* [n_tasks] */
} sum_ctx;

static void sum_task(void *vctx, int i, int n) {
    sum_ctx *c = vctx;
    const int64_t a = c->len * i / n, b = c->len * (i + 1) / n;
    double s = 0;
    for (int64_t j = a; j < b; j++) s += c->x[j];
    c->partial[i] = s;
}

/* A parallel reduction (partials per task, combined in order) equals the same partition summed
 * serially, bit for bit; and is close to the plain serial sum. */
static void test_reduction(void) {
    const int64_t len = 1 << 20;
    double *x = malloc(sizeof(double) * len);
    uint64_t r = 12345;
    for (int64_t i = 0; i < len; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (double)(r >> 11) / (double)(1ull << 53) - 0.3;
    }
    double serial = 0;
    for (int64_t i = 0; i < len; i++) serial += x[i];
    for (size_t k = 0; k < sizeof thread_counts / sizeof *thread_counts; k++) {
        q35_pool *p = q35_pool_new(thread_counts[k]);
        for (int n_tasks = 1; n_tasks <= 37; n_tasks += 6) {
            double part[64], ref[64];
            sum_ctx c = {x, len, part};
            for (int rep = 0; rep < 3; rep++) {
                q35_pool_run(p, n_tasks, sum_task, &c);
                sum_ctx cr = {x, len, ref};
                for (int i = 0; i < n_tasks; i++) sum_task(&cr, i, n_tasks);
                double a = 0, b = 0;
                for (int i = 0; i < n_tasks; i++) a += part[i], b += ref[i];
                CHECK(a == b, "%d threads, %d tasks: parallel %.17g serial %.17g", thread_counts[k], n_tasks, a, b);
                CHECK(fabs(a - serial) <= 1e-9 * fabs(serial) + 1e-9, "sum %.17g vs %.17g", a, serial);
            }
        }
        q35_pool_free(p);
    }
    free(x);
}

static void add_task(void *vctx, int i, int n) {
    atomic_long *acc = vctx;
    atomic_fetch_add_explicit(&acc[i], (long)i + 1, memory_order_relaxed);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Many tiny dispatches in a row (the generation pattern: ~100 per token). */
static void test_tiny_dispatches(void) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (size_t k = 0; k < sizeof thread_counts / sizeof *thread_counts; k++) {
        const int T = thread_counts[k];
        const int reps = T <= cpus ? 3000 : 500; /* oversubscribed: every dispatch sleeps and wakes */
        q35_pool *p = q35_pool_new(T);
        atomic_long acc[8];
        for (int i = 0; i < 8; i++) atomic_init(&acc[i], 0);
        for (int r = 0; r < reps; r++) q35_pool_run(p, T, add_task, acc);
        int bad = 0;
        for (int i = 0; i < T; i++) bad += atomic_load(&acc[i]) != (long)reps * (i + 1);
        CHECK(bad == 0, "%d threads: %d task slots with wrong counts after %d dispatches", T, bad, reps);
        q35_pool_free(p);
    }
}

/* Median time of an empty dispatch over all threads, with workers awake (spinning) and after they
 * fell asleep. */
static void test_latency(void) {
    for (int T = 2; T <= 3; T++) {
        q35_pool *p = q35_pool_new(T);
        atomic_long acc[8];
        for (int i = 0; i < 8; i++) atomic_init(&acc[i], 0);
        enum { N = 2001 };
        static double hot[N], cold[25];
        for (int r = 0; r < N; r++) {
            double t0 = now_s();
            q35_pool_run(p, T, add_task, acc);
            hot[r] = now_s() - t0;
        }
        for (int r = 0; r < 25; r++) {
            struct timespec ts = {0, 2000000}; /* 2 ms: workers go to sleep */
            nanosleep(&ts, NULL);
            double t0 = now_s();
            q35_pool_run(p, T, add_task, acc);
            cold[r] = now_s() - t0;
        }
        qsort(hot, N, sizeof(double), cmp_double);
        qsort(cold, 25, sizeof(double), cmp_double);
        printf("# %d threads: dispatch latency median %.2f us (p90 %.2f us) with workers spinning, %.1f us after they sleep\n", T,
               hot[N / 2] * 1e6, hot[N * 9 / 10] * 1e6, cold[12] * 1e6);
        /* no bound checked: the figure depends on the host's load */
        q35_pool_free(p);
    }
}

static void slow_task(void *vctx, int i, int n) {
    atomic_int *hits = vctx;
    if (i % 5 == 1) { /* a task that stalls its thread (as if descheduled) */
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_add(&hits[i], 1);
}

/* Tasks that stall their thread: every task still runs exactly once (the others take the rest of
 * the stalled thread's share). */
static void test_stalled_tasks(void) {
    for (size_t k = 0; k < sizeof thread_counts / sizeof *thread_counts; k++) {
        q35_pool *p = q35_pool_new(thread_counts[k]);
        atomic_int hits[40];
        for (int i = 0; i < 40; i++) atomic_init(&hits[i], 0);
        for (int r = 0; r < 3; r++) q35_pool_run(p, 40, slow_task, hits);
        int bad = 0;
        for (int i = 0; i < 40; i++) bad += atomic_load(&hits[i]) != 3;
        CHECK(bad == 0, "%d threads: %d tasks not run exactly 3 times", thread_counts[k], bad);
        q35_pool_free(p);
    }
}

typedef struct {
    q35_pool *p;
    atomic_long *acc; /* [64] */
} nest_ctx;

static void nest_task(void *vctx, int i, int n) {
    nest_ctx *c = vctx;
    q35_pool_run(c->p, 4, add_task, c->acc + 4 * i); /* runs inline: the pool is busy */
}

/* A task that dispatches on its own pool runs the inner job inline instead of deadlocking. */
static void test_nested(void) {
    q35_pool *p = q35_pool_new(3);
    atomic_long acc[64];
    for (int i = 0; i < 64; i++) atomic_init(&acc[i], 0);
    nest_ctx c = {p, acc};
    for (int r = 0; r < 100; r++) q35_pool_run(p, 5, nest_task, &c);
    int bad = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) bad += atomic_load(&acc[4 * i + j]) != 100L * (j + 1);
    CHECK(bad == 0, "nested dispatch: %d wrong counts", bad);
    q35_pool_free(p);
}

typedef struct {
    q35_pool *p;
    atomic_long acc[6];
} conc_ctx;

static void *conc_thread(void *arg) {
    conc_ctx *c = arg;
    for (int r = 0; r < 1000; r++) q35_pool_run(c->p, 6, add_task, c->acc);
    return NULL;
}

/* Two application threads dispatching on one pool at once: each job completes exactly. */
static void test_concurrent_callers(void) {
    q35_pool *p = q35_pool_new(2);
    conc_ctx a = {.p = p}, b = {.p = p};
    for (int i = 0; i < 6; i++) atomic_init(&a.acc[i], 0), atomic_init(&b.acc[i], 0);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, conc_thread, &a);
    pthread_create(&tb, NULL, conc_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    int bad = 0;
    for (int i = 0; i < 6; i++) bad += (atomic_load(&a.acc[i]) != 1000L * (i + 1)) + (atomic_load(&b.acc[i]) != 1000L * (i + 1));
    CHECK(bad == 0, "concurrent dispatchers: %d wrong counts", bad);
    q35_pool_free(p);
}

/* The process-wide pool: q35_set_threads(n) gives n threads, 0 the online CPUs; NULL pool runs inline. */
static void test_global(void) {
    q35_set_threads(3);
    CHECK(q35_get_threads() == 3, "got %d threads", q35_get_threads());
    CHECK(q35_pool_threads(q35_global_pool()) == 3, "global pool threads");
    atomic_long acc[8];
    for (int i = 0; i < 8; i++) atomic_init(&acc[i], 0);
    q35_pool_run(q35_global_pool(), 8, add_task, acc);
    CHECK(atomic_load(&acc[7]) == 8, "global pool dispatch");
    q35_set_threads(1);
    CHECK(q35_get_threads() == 1, "got %d threads", q35_get_threads());
    q35_set_threads(0);
    CHECK(q35_get_threads() >= 1, "online CPUs");
    printf("# default threads (online CPUs): %d\n", q35_get_threads());
    q35_pool_run(NULL, 8, add_task, acc);
    CHECK(atomic_load(&acc[7]) == 16, "inline dispatch");
    q35_set_threads(2);
}

int main(void) {
    RUN(test_each_task_once);
    RUN(test_reduction);
    RUN(test_tiny_dispatches);
    RUN(test_stalled_tasks);
    RUN(test_nested);
    RUN(test_concurrent_callers);
    RUN(test_global);
    RUN(test_latency);
    TEST_EXIT();
}
