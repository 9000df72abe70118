/* The persistent thread pool (pool.h). One dispatch = the caller publishes (fn, ctx, n_tasks) and
 * bumps a generation counter; share t of the T shares is the contiguous task range
 * [t*n/T, (t+1)*n/T), share 0 is the caller's. Thread t takes the tasks of its own share one at a
 * time, in order (a CAS on the share's slot: job tag | next task | end), then takes the tasks
 * left in the other shares the same way: a worker that is asleep or descheduled (a busy host)
 * delays only the task it is running, the rest of its share runs on whoever is awake. Each finished
 * task decrements a counter the caller waits on. Waiting threads spin (pause, and sched_yield now
 * and then) for a short time, then sleep on a futex (Linux) or a condition variable. The atomics
 * carry the happens-before edges: the job fields are written before the release stores of the
 * slots and read only after a successful (acquire) claim of a task, which also proves the job is
 * still running; the futex / condvar only parks threads. */
#include "core/pool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "q35.h"

#if defined(__linux__) && !defined(Q35_POOL_CONDVAR)
#include <linux/futex.h>
#include <sys/syscall.h>
#define POOL_FUTEX 1
#else
#define POOL_FUTEX 0
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define POOL_MAX_THREADS 256
/* How long a waiting thread spins before it sleeps: long enough to cover the gaps between the
 * dispatches of a token (waking a sleeping thread costs 25-400 us on a VM whose idle vCPU halted).
 * Spinners call sched_yield every SPIN_YIELD pauses: when the host is busy (or there are more
 * threads than CPUs) the thread being waited for may share the spinner's CPU, and without the yield
 * every dispatch would cost two spin budgets. Q35_POOL_SPIN_US overrides the budget. */
#define POOL_SPIN_NS_DEFAULT 200000
#define SPIN_YIELD 128

/* A share's claim word, alone on its cache line: job tag (32 bits: a claim that stalls for 2^32
 * dispatches could be taken for a new one) | next task (16) | end (16). */
#define TASK_BITS 16
#define TASK_MASK ((1u << TASK_BITS) - 1)
#define POOL_MAX_TASKS ((int)TASK_MASK)
typedef struct pool_slot {
    _Atomic uint64_t w;
    char pad[64 - sizeof(uint64_t)];
} pool_slot;

static uint64_t slot_pack(uint64_t job, unsigned next, unsigned end) {
    return (job & 0xffffffffu) << (2 * TASK_BITS) | (uint64_t)next << TASK_BITS | end;
}

typedef struct pool_worker {
    q35_pool *p;
    int id; /* 1..n-1 (0 is the caller) */
} pool_worker;

struct q35_pool {
    int n;                     /* threads, the caller included */
    int n_started;             /* workers created (n - 1 unless creation failed) */
    pthread_t *th;             /* [n-1] worker threads */
    pool_worker *wk;           /* [n-1] their arguments */
    long spin_ns;              /* how long a waiting thread spins before it sleeps */
    /* the current job, written by the dispatcher before `gen` is released */
    q35_pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int stop;           /* 1: workers exit at the next generation */
    uint64_t job;              /* dispatches so far (written by the dispatcher only) */
    pool_slot *slot;           /* [n] share t's claim word */
    atomic_uint gen;           /* job generation; workers wait for it to change (futex word) */
    atomic_uint pending;       /* tasks not finished yet (futex word) */
    atomic_int sleepers;       /* workers sleeping on gen */
    atomic_int caller_sleeps;  /* 1: the dispatcher sleeps on pending */
    atomic_int busy;           /* 1 while a dispatch is in flight (a second dispatcher runs inline) */
#if !POOL_FUTEX
    pthread_mutex_t mu;
    pthread_cond_t cv_gen, cv_done;
#endif
};

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

#if POOL_FUTEX
static void futex_wait(atomic_uint *w, unsigned val) { syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
static void futex_wake(atomic_uint *w) { syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }
#endif

/* Spin until *w != val or the spin budget is spent; returns the last value read. */
static unsigned spin_while_eq(const q35_pool *p, atomic_uint *w, unsigned val) {
    unsigned cur = atomic_load_explicit(w, memory_order_acquire);
    if (cur != val || p->spin_ns <= 0) return cur;
    const long t0 = now_ns();
    for (int i = 1;; i++) {
        CPU_RELAX();
        cur = atomic_load_explicit(w, memory_order_acquire);
        if (cur != val) return cur;
        if ((i & (SPIN_YIELD - 1)) == 0) {
            if (now_ns() - t0 > p->spin_ns) return cur;
            sched_yield(); /* lets a thread sharing this CPU (a busy host) run */
        }
    }
}

/* A task is done: the last one wakes a sleeping dispatcher. */
static void task_done(q35_pool *p) {
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeps)) {
#if POOL_FUTEX
        futex_wake(&p->pending);
#else
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
#endif
    }
}

/* Run the tasks of share t, one claim at a time, while they belong to job `tag`. */
static void drain(q35_pool *p, int t, uint64_t tag) {
    _Atomic uint64_t *w = &p->slot[t].w;
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        const unsigned next = (unsigned)(v >> TASK_BITS) & TASK_MASK, end = (unsigned)v & TASK_MASK;
        if (v >> (2 * TASK_BITS) != tag || next >= end) return;
        if (!atomic_compare_exchange_weak_explicit(w, &v, v + ((uint64_t)1 << TASK_BITS), memory_order_acquire, memory_order_relaxed))
            continue; /* v holds the current word */
        p->fn(p->ctx, (int)next, p->n_tasks);
        task_done(p);
        v = atomic_load_explicit(w, memory_order_relaxed);
    }
}

/* Thread `self` runs its own share, then whatever the others have not started. */
static void participate(q35_pool *p, int self, uint64_t tag) {
    for (int k = 0; k < p->n; k++) drain(p, (self + k) % p->n, tag);
}

static void *worker_main(void *arg) {
    pool_worker *w = arg;
    q35_pool *p = w->p;
    unsigned seen = 0;
    for (;;) {
        unsigned g = spin_while_eq(p, &p->gen, seen);
        if (g == seen) { /* sleep until the next job */
            atomic_fetch_add(&p->sleepers, 1);
#if POOL_FUTEX
            while ((g = atomic_load(&p->gen)) == seen) futex_wait(&p->gen, seen);
#else
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv_gen, &p->mu);
            pthread_mutex_unlock(&p->mu);
#endif
            atomic_fetch_sub(&p->sleepers, 1);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
        /* the job tag of this thread's slot: the newest job (a later dispatch rewrites the slot) */
        participate(p, w->id, atomic_load_explicit(&p->slot[w->id].w, memory_order_relaxed) >> (2 * TASK_BITS));
    }
    return NULL;
}

static int online_cpus(void) {
#if defined(__linux__) && POOL_FUTEX
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

/* n <= 0: Q35_THREADS when set to a positive count, else the online CPUs */
static int resolve_threads(int n) {
    if (n <= 0) {
        const char *e = getenv("Q35_THREADS");
        n = e ? atoi(e) : 0;
    }
    if (n <= 0) n = online_cpus();
    return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
}

/* Publish a new generation and wake sleeping workers. */
static void publish(q35_pool *p) {
    atomic_fetch_add(&p->gen, 1); /* seq_cst: ordered before the read of sleepers below */
    if (atomic_load(&p->sleepers) > 0) {
#if POOL_FUTEX
        futex_wake(&p->gen);
#else
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_gen);
        pthread_mutex_unlock(&p->mu);
#endif
    }
}

q35_pool *q35_pool_new(int n_threads) {
    q35_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = resolve_threads(n_threads);
    const char *spin = getenv("Q35_POOL_SPIN_US");
    p->spin_ns = spin ? atol(spin) * 1000L : POOL_SPIN_NS_DEFAULT;
#if !POOL_FUTEX
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_gen, NULL);
    pthread_cond_init(&p->cv_done, NULL);
#endif
    if (p->n > 1) {
        p->th = calloc((size_t)p->n - 1, sizeof *p->th);
        p->wk = calloc((size_t)p->n - 1, sizeof *p->wk);
        p->slot = aligned_alloc(64, sizeof *p->slot * (size_t)p->n);
        if (!p->th || !p->wk || !p->slot) {
            free(p->th);
            free(p->wk);
            free((void *)p->slot);
            p->th = NULL, p->wk = NULL, p->slot = NULL, p->n = 1;
        }
        for (int i = 0; p->slot && i < p->n; i++) atomic_init(&p->slot[i].w, slot_pack(0, 0, 0)); /* job 0: nothing to run */
    }
    for (int i = 1; i < p->n; i++) {
        p->wk[i - 1] = (pool_worker){p, i};
        if (pthread_create(&p->th[i - 1], NULL, worker_main, &p->wk[i - 1]) != 0) break;
        p->n_started = i;
    }
    p->n = p->n_started + 1; /* fewer threads if creation failed part way */
    return p;
}

void q35_pool_free(q35_pool *p) {
    if (!p) return;
    if (p->n_started > 0) {
        atomic_store_explicit(&p->stop, 1, memory_order_relaxed);
        publish(p);
        for (int i = 0; i < p->n_started; i++) pthread_join(p->th[i], NULL);
    }
#if !POOL_FUTEX
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_gen);
    pthread_cond_destroy(&p->cv_done);
#endif
    free(p->th);
    free(p->wk);
    free((void *)p->slot);
    free(p);
}

int q35_pool_threads(const q35_pool *p) { return p ? p->n : 1; }

void q35_pool_run(q35_pool *p, int n_tasks, q35_pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    int expect = 0;
    if (!p || p->n == 1 || n_tasks == 1 || n_tasks > POOL_MAX_TASKS || !atomic_compare_exchange_strong(&p->busy, &expect, 1)) {
        /* inline: no pool, one task, or a dispatch already in flight (a nested or concurrent call) */
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, n_tasks);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    const uint64_t job = ++p->job, tag = job & 0xffffffffu;
    atomic_store_explicit(&p->pending, (unsigned)n_tasks, memory_order_relaxed);
    for (int t = 0; t < p->n; t++) {
        const unsigned i0 = (unsigned)((long long)n_tasks * t / p->n), i1 = (unsigned)((long long)n_tasks * (t + 1) / p->n);
        atomic_store_explicit(&p->slot[t].w, slot_pack(job, i0, i1), memory_order_release);
    }
    publish(p);
    participate(p, 0, tag);
    /* wait for the tasks others are running: spin while the budget lasts, then sleep until the
     * last one wakes us */
    unsigned left = atomic_load_explicit(&p->pending, memory_order_acquire);
    if (left != 0 && p->spin_ns > 0) {
        const long t0 = now_ns();
        for (int i = 1; left != 0; i++) {
            CPU_RELAX();
            left = atomic_load_explicit(&p->pending, memory_order_acquire);
            if ((i & (SPIN_YIELD - 1)) == 0) {
                if (now_ns() - t0 > p->spin_ns) break;
                sched_yield();
            }
        }
    }
    if (left != 0) {
        atomic_store(&p->caller_sleeps, 1);
#if POOL_FUTEX
        while ((left = atomic_load(&p->pending)) != 0) futex_wait(&p->pending, left);
#else
        pthread_mutex_lock(&p->mu);
        while ((left = atomic_load(&p->pending)) != 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
#endif
        atomic_store(&p->caller_sleeps, 0);
    }
    atomic_thread_fence(memory_order_acquire);
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}

/* ---------------------------------------------------------------- the process-wide pool */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static q35_pool *_Atomic g_pool; /* created on first use */
static int g_want;               /* q35_set_threads' argument (0: online CPUs) */

q35_pool *q35_global_pool(void) {
    q35_pool *p = atomic_load_explicit(&g_pool, memory_order_acquire);
    if (p) return p;
    pthread_mutex_lock(&g_mu);
    p = atomic_load_explicit(&g_pool, memory_order_relaxed);
    if (!p) {
        p = q35_pool_new(g_want);
        atomic_store_explicit(&g_pool, p, memory_order_release);
    }
    pthread_mutex_unlock(&g_mu);
    return p;
}

void q35_set_threads(int n) {
    pthread_mutex_lock(&g_mu);
    g_want = n < 0 ? 0 : n;
    q35_pool *p = atomic_load_explicit(&g_pool, memory_order_relaxed);
    if (p && p->n != resolve_threads(g_want)) {
        atomic_store_explicit(&g_pool, NULL, memory_order_release);
        q35_pool_free(p);
    }
    pthread_mutex_unlock(&g_mu);
}

int q35_get_threads(void) { return q35_pool_threads(q35_global_pool()); }
