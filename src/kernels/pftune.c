/* Run-time choice of the prefetch distances of single-token products (pftune.h). */
#include "kernels/pftune.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/tensor.h"

/* The pairs tried after the static table's (T0, T1 bytes ahead), in order of preference (the
 * list is cut at Q35_PFTUNE_MAX). They span what measured best on the project's VMs: Intel wanted
 * 1 KiB / 4 KiB (0.5 / 3 KiB for Q6_K), one Zen 4 host 1-2 KiB / 16 KiB, another 0.25-0.5 KiB /
 * 1-2 KiB (docs/speed.md). */
static const q35_pf_dist fixed_list[] = {{512, 2048}, {256, 1024}, {1024, 4096}, {1024, 16384}, {2048, 8192}, {2048, 16384}};

void q35_pftune_init(q35_pftune *t, q35_pf_dist start) {
    memset(t, 0, sizeof *t);
    t->cand[t->n_cand++] = start;
    for (size_t i = 0; i < sizeof fixed_list / sizeof fixed_list[0] && t->n_cand < Q35_PFTUNE_MAX; i++) {
        int dup = 0;
        for (int k = 0; k < t->n_cand; k++) dup |= t->cand[k].near == fixed_list[i].near && t->cand[k].far == fixed_list[i].far;
        if (!dup) t->cand[t->n_cand++] = fixed_list[i];
    }
    t->final[0] = t->final[1] = -1;
    t->chosen = -1;
}

int q35_pftune_pick(q35_pftune *t) {
    if (t->chosen >= 0) return t->chosen;
    const uint32_t n = (uint32_t)t->n_cand, s = t->seq++;
    if (t->final[0] >= 0) return t->final[s & 1];
    return (int)((s % n + s / n) % n); /* round s / n visits every candidate, starting one later each round */
}

static double rate(const q35_pftune *t, int c) { return t->bytes[c] / t->ns[c]; }

int q35_pftune_record(q35_pftune *t, int c, int64_t bytes, double ns) {
    if (t->chosen >= 0 || c < 0 || c >= t->n_cand || bytes <= 0 || ns <= 0) return 0;
    t->calls[c]++, t->bytes[c] += (double)bytes, t->ns[c] += ns;
    if (t->final[0] < 0) { /* first stage: every candidate */
        for (int k = 0; k < t->n_cand; k++)
            if (t->calls[k] < Q35_PFTUNE_MIN_CALLS || t->bytes[k] < (double)Q35_PFTUNE_MIN_BYTES) return 0;
        int a = 0, b = -1;
        for (int k = 1; k < t->n_cand; k++) {
            if (rate(t, k) > rate(t, a)) b = a, a = k;
            else if (b < 0 || rate(t, k) > rate(t, b)) b = k;
        }
        if (b < 0) { /* one candidate only */
            t->chosen = a;
            return 1;
        }
        t->final[0] = a, t->final[1] = b;
        for (int i = 0; i < 2; i++) t->calls1[i] = t->calls[t->final[i]], t->bytes1[i] = t->bytes[t->final[i]];
        return 0;
    }
    for (int i = 0; i < 2; i++) { /* second stage: as much again for both finalists */
        const int k = t->final[i];
        if (t->calls[k] - t->calls1[i] < Q35_PFTUNE_MIN_CALLS || t->bytes[k] - t->bytes1[i] < (double)Q35_PFTUNE_MIN_BYTES) return 0;
    }
    t->chosen = rate(t, t->final[1]) > rate(t, t->final[0]) ? t->final[1] : t->final[0];
    return 1;
}

/* ---- process-wide state ---- */

enum { IDLE, SEARCHING, DONE }; /* a dtype's phase; DONE also for fixed dtypes and when the search is off */

static struct {
    pthread_mutex_t mu;
    int enabled;
    int phase[Q35_DT_COUNT];  /* read without the lock on the fast path (atomic) */
    int fixed[Q35_DT_COUNT];  /* Q35_PF named it */
    int used[Q35_DT_COUNT];   /* a single-token product of this dtype, >= Q35_PFTUNE_MIN_PRODUCT, has run */
    int tuned[Q35_DT_COUNT];  /* its search has chosen */
    q35_pftune t[Q35_DT_COUNT];
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .enabled = 1};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void set_dist(int dt, q35_pf_dist d) { __atomic_store(&q35_pf_table[dt], &d, __ATOMIC_RELAXED); }

void q35_pftune_begin(int dt, int64_t bytes, q35_pftune_mark *m) {
    m->dt = -1;
    if (dt < 0 || dt >= Q35_DT_COUNT) return;
    if (bytes < Q35_PFTUNE_MIN_PRODUCT || __atomic_load_n(&S.phase[dt], __ATOMIC_ACQUIRE) == DONE) return;
    pthread_mutex_lock(&S.mu);
    S.used[dt] = 1;
    if (S.phase[dt] == IDLE) {
        if (!S.enabled || S.fixed[dt]) {
            __atomic_store_n(&S.phase[dt], DONE, __ATOMIC_RELEASE);
        } else {
            q35_pftune_init(&S.t[dt], q35_pf_for((q35_dtype)dt));
            __atomic_store_n(&S.phase[dt], SEARCHING, __ATOMIC_RELEASE);
        }
    }
    if (S.phase[dt] == SEARCHING) {
        m->cand = q35_pftune_pick(&S.t[dt]);
        set_dist(dt, S.t[dt].cand[m->cand]);
        m->dt = dt, m->bytes = bytes;
    }
    pthread_mutex_unlock(&S.mu);
    if (m->dt >= 0) m->t0_ns = now_ns();
}

void q35_pftune_end(const q35_pftune_mark *m) {
    if (m->dt < 0) return;
    const int64_t dt_ns = now_ns() - m->t0_ns;
    pthread_mutex_lock(&S.mu);
    q35_pftune *t = &S.t[m->dt];
    if (S.phase[m->dt] == SEARCHING && q35_pftune_record(t, m->cand, m->bytes, (double)dt_ns)) {
        set_dist(m->dt, t->cand[t->chosen]);
        S.tuned[m->dt] = 1;
        __atomic_store_n(&S.phase[m->dt], DONE, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&S.mu);
}

int q35_pftune_enable(int on) {
    pthread_mutex_lock(&S.mu);
    const int old = S.enabled;
    S.enabled = on != 0;
    pthread_mutex_unlock(&S.mu);
    return old;
}

void q35_pftune_fix(int dt) {
    if (dt < 0 || dt >= Q35_DT_COUNT) return;
    pthread_mutex_lock(&S.mu);
    S.fixed[dt] = 1;
    pthread_mutex_unlock(&S.mu);
}

void q35_pftune_reset(void) {
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < Q35_DT_COUNT; i++) {
        __atomic_store_n(&S.phase[i], IDLE, __ATOMIC_RELEASE);
        S.fixed[i] = S.used[i] = S.tuned[i] = 0;
    }
    pthread_mutex_unlock(&S.mu);
}

void q35_pftune_describe(char *buf, size_t cap) {
    if (!cap) return;
    buf[0] = 0;
    size_t len = 0;
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < Q35_DT_COUNT && len < cap; i++) {
        if (!S.used[i]) continue;
        const q35_pf_dist d = q35_pf_for((q35_dtype)i);
        const char *how = S.fixed[i] ? "set by Q35_PF" : S.tuned[i] ? "tuned" : S.phase[i] == SEARCHING ? "searching" : "static";
        const int w = snprintf(buf + len, cap - len, "%s%s %d/%d (%s)", len ? ", " : "", q35_dtype_name((q35_dtype)i), d.near, d.far, how);
        if (w < 0) break;
        len += (size_t)w;
    }
    pthread_mutex_unlock(&S.mu);
    if (len >= cap) buf[cap - 1] = 0;
}
