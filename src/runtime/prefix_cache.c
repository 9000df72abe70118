/* The prefix cache: checkpoints of exact sequence states (state.h), keyed by the positions' keys,
 * within a byte budget with least-recently-used eviction. A request resumes from the longest
 * checkpoint (or the session's own exact point) whose keys are a prefix of its keys. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "runtime/state.h"

typedef struct cache_entry {
    q35_snapshot snap;
    uint64_t last_use; /* tick of the last save or restore that touched it */
} cache_entry;

struct q35_prefix_cache {
    const q35_model *m;
    size_t budget;      /* bytes the checkpoints may take */
    size_t used;        /* bytes they take */
    cache_entry *e;     /* [n] (capacity cap) */
    int n, cap;
    uint64_t tick;
    pthread_mutex_t lock;
};

q35_status q35_prefix_cache_new(const q35_model *m, size_t budget_bytes, q35_prefix_cache **out) {
    *out = NULL;
    if (!m) return q35_fail(Q35_ERR_ARG, "prefix cache: no model");
    q35_prefix_cache *c = calloc(1, sizeof *c);
    if (!c) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    c->m = m;
    c->budget = budget_bytes;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return Q35_OK;
}

void q35_prefix_cache_free(q35_prefix_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) q35_snapshot_free(&c->e[i].snap);
    free(c->e);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void q35_prefix_cache_stats(q35_prefix_cache *c, int *n_checkpoints, size_t *bytes) {
    pthread_mutex_lock(&c->lock);
    if (n_checkpoints) *n_checkpoints = c->n;
    if (bytes) *bytes = c->used;
    pthread_mutex_unlock(&c->lock);
}

/* 1: the snapshot is exact on the session's chunk grid and holds a KV cache of the session's type. */
static int same_grid(const q35_snapshot *e, const q35_session *s) {
    return e->cap == s->sc.cap && e->gdn_chunk == s->sc.gdn_chunk && e->kv_f16 == s->kv_f16;
}

/* Index of the entry holding exactly keys[0..P) on s's grid, or -1 (lock held). */
static int find_exact(const q35_prefix_cache *c, const uint64_t *keys, int P, const q35_session *s) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].snap.v.pos == P && same_grid(&c->e[i].snap, s) && !memcmp(c->e[i].snap.keys, keys, sizeof(uint64_t) * (size_t)P)) return i;
    return -1;
}

static void drop(q35_prefix_cache *c, int i) {
    c->used -= c->e[i].snap.bytes;
    q35_snapshot_free(&c->e[i].snap);
    c->e[i] = c->e[--c->n];
}

q35_status q35_prefix_cache_save(q35_prefix_cache *c, const q35_session *s) {
    if (!c || !s || s->m != c->m) return q35_fail(Q35_ERR_ARG, "prefix cache save: the session is not of the cache's model");
    const int P = s->mark_scalars.pos;
    if (P == 0) return Q35_OK;
    const size_t bytes = q35_snapshot_bytes(&s->m->cfg, P, s->kv_f16);
    if (bytes > c->budget) return Q35_OK; /* would evict everything and still not fit */
    pthread_mutex_lock(&c->lock);
    int i = find_exact(c, s->keys, P, s);
    if (i >= 0) c->e[i].last_use = ++c->tick;
    pthread_mutex_unlock(&c->lock);
    if (i >= 0) return Q35_OK;
    q35_snapshot snap;
    q35_status st = q35_snapshot_of_mark(s, &snap);
    if (st) return st;
    pthread_mutex_lock(&c->lock);
    if (find_exact(c, snap.keys, P, s) >= 0) { /* another thread stored the same meanwhile */
        pthread_mutex_unlock(&c->lock);
        q35_snapshot_free(&snap);
        return Q35_OK;
    }
    while (c->n > 0 && c->used + bytes > c->budget) {
        int lru = 0;
        for (int k = 1; k < c->n; k++)
            if (c->e[k].last_use < c->e[lru].last_use) lru = k;
        drop(c, lru);
    }
    if (c->n == c->cap) {
        const int nc = c->cap ? 2 * c->cap : 8;
        cache_entry *ne = realloc(c->e, sizeof *ne * (size_t)nc);
        if (!ne) {
            pthread_mutex_unlock(&c->lock);
            q35_snapshot_free(&snap);
            return q35_fail(Q35_ERR_NOMEM, "out of memory");
        }
        c->e = ne;
        c->cap = nc;
    }
    c->e[c->n].snap = snap;
    c->e[c->n].last_use = ++c->tick;
    c->n++;
    c->used += bytes;
    pthread_mutex_unlock(&c->lock);
    return Q35_OK;
}

q35_status q35_prefix_cache_restore_keys(q35_prefix_cache *c, q35_session *s, const uint64_t *keys, int n, int *n_ready) {
    if (n_ready) *n_ready = 0;
    if (!s || !n_ready || n < 0 || (n > 0 && !keys)) return q35_fail(Q35_ERR_ARG, "prefix cache restore: bad arguments");
    if (c && s->m != c->m) return q35_fail(Q35_ERR_ARG, "prefix cache restore: the session is not of the cache's model");
    /* The session's own exact point first. */
    const int own = s->mark_scalars.pos;
    int best = 0;
    if (own > 0 && own < n && !memcmp(s->keys, keys, sizeof(uint64_t) * (size_t)own)) best = own;
    if (c) {
        pthread_mutex_lock(&c->lock);
        int pick = -1;
        for (int i = 0; i < c->n; i++) {
            const q35_snapshot *e = &c->e[i].snap;
            if (e->v.pos > best && e->v.pos < n && e->v.pos <= s->n_ctx && same_grid(e, s) &&
                !memcmp(e->keys, keys, sizeof(uint64_t) * (size_t)e->v.pos)) {
                best = e->v.pos;
                pick = i;
            }
        }
        if (pick >= 0) {
            c->e[pick].last_use = ++c->tick;
            q35_snapshot_apply(s, &c->e[pick].snap);
        }
        pthread_mutex_unlock(&c->lock);
        if (pick >= 0) {
            *n_ready = best;
            return Q35_OK;
        }
    }
    q35_status st = q35_session_truncate(s, best); /* best is the exact point or 0 */
    if (st) return st;
    *n_ready = best;
    return Q35_OK;
}

q35_status q35_prefix_cache_restore(q35_prefix_cache *c, q35_session *s, const int32_t *tokens, int n, int *n_ready) {
    if (n_ready) *n_ready = 0;
    if (n < 0 || (n > 0 && !tokens)) return q35_fail(Q35_ERR_ARG, "prefix cache restore: bad token batch");
    uint64_t *keys = malloc(sizeof(uint64_t) * ((size_t)n + 1));
    if (!keys) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) keys[i] = (uint64_t)(uint32_t)tokens[i];
    q35_status st = q35_prefix_cache_restore_keys(c, s, keys, n, n_ready);
    free(keys);
    return st;
}
