#include "server/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "server/stopstr.h"

struct srv_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* signalled when text grows or the job ends */
    int refs;
    int cancelled;
    int32_t *prompt;       /* [n_prompt] */
    int n_prompt;
    srv_gen_params p;
    /* output, under mu */
    char *text;            /* [text_len + 1] released answer text */
    size_t text_len, text_cap;
    srv_finish finish;
    int n_generated, n_cached;
    char error[256];
    srv_job *next;         /* queue link, under the engine's mutex */
};

typedef struct slot {
    q35_session *s;
    srv_job *job;          /* NULL: free */
    int prompt_done;
    int prompt_pos;        /* prompt tokens in the session (-1: not started) */
    int checkpoint_at;     /* grid point to checkpoint the stable part at (0: none) */
    q35_sampler *smp;
    q35_stream_decoder *dec;
    float *logits;         /* [n_vocab] logits of the last evaluated token (sampling path) */
    int32_t next_id;       /* argmax path: the token the last eval chose */
    int fast;              /* argmax without logits (greedy, no penalties) */
    int *counts;           /* [n_vocab] times each id was generated (frequency penalty), or NULL */
    char *pending;         /* [pending_len] decoded text held back while it may start a stop sequence */
    size_t pending_len, pending_cap;
    q35_image_embeds *im;  /* [job's n_images] the prompt's images encoded (embeds malloc'd), or NULL */
} slot;

struct srv_engine {
    q35_model *m;
    const q35_tokenizer *tok;
    int32_t stop_ids[16];
    int n_stop_ids;
    int n_vocab, n_ctx, parallel, max_queue;
    int reuse, prefill_step;
    q35_kv_type kv_type;
    q35_prefix_cache *cache; /* NULL: each session resumes only from its own exact point */
    slot *slots;           /* [parallel] */
    pthread_t worker;
    int worker_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* work arrived or stopping */
    srv_job *qhead, *qtail;
    int queued, stopping;
    int active;            /* slots with a job, under mu */
};

/* ------------------------------------------------------------------ jobs */

srv_job *srv_job_new(const int32_t *prompt, int n_prompt, srv_gen_params *params) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->prompt = malloc(sizeof(int32_t) * (size_t)(n_prompt > 0 ? n_prompt : 1));
    j->text = malloc(64);
    if (!j->prompt || !j->text) {
        free(j->prompt);
        free(j->text);
        free(j);
        return NULL;
    }
    memcpy(j->prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
    j->n_prompt = n_prompt;
    j->p = *params;
    memset(params->stop, 0, sizeof params->stop);
    params->n_stop = 0;
    params->images = NULL;
    params->n_images = 0;
    j->text[0] = 0;
    j->text_cap = 64;
    j->refs = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

void srv_job_release(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    for (int i = 0; i < j->p.n_stop; i++) free(j->p.stop[i]);
    for (int i = 0; i < j->p.n_images; i++) q35_pixels_free(&j->p.images[i]);
    free(j->p.images);
    free(j->prompt);
    free(j->text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void srv_job_cancel(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = 1;
    pthread_mutex_unlock(&j->mu);
}

static int job_cancelled(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    int c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

/* Append released text (under the job's lock) and wake readers. */
static int job_emit(srv_job *j, const char *s, size_t n) {
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    if (j->text_len + n + 1 > j->text_cap) {
        size_t cap = j->text_cap * 2;
        while (cap < j->text_len + n + 1) cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) rc = -1;
        else {
            j->text = t;
            j->text_cap = cap;
        }
    }
    if (!rc) {
        memcpy(j->text + j->text_len, s, n);
        j->text_len += n;
        j->text[j->text_len] = 0;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

static void job_finish(srv_job *j, srv_finish f, const char *error) {
    pthread_mutex_lock(&j->mu);
    j->finish = f;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

int srv_job_wait(srv_job *j, size_t from, int timeout_ms, srv_job_view *v) {
    memset(v, 0, sizeof *v);
    pthread_mutex_lock(&j->mu);
    if (j->text_len <= from && j->finish == SRV_FINISH_NONE && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (j->text_len <= from && j->finish == SRV_FINISH_NONE)
            if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    }
    int rc = 0;
    if (j->text_len > from) {
        v->len = j->text_len - from;
        v->text = malloc(v->len + 1);
        if (v->text) {
            memcpy(v->text, j->text + from, v->len);
            v->text[v->len] = 0;
        } else {
            v->len = 0;
            rc = -1;
        }
    }
    v->finish = j->finish;
    v->n_prompt = j->n_prompt;
    v->n_generated = j->n_generated;
    v->n_cached = j->n_cached;
    memcpy(v->error, j->error, sizeof v->error);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* ------------------------------------------------------------------ engine */

q35_status srv_engine_submit(srv_engine *e, srv_job *j) {
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->queued >= e->max_queue) {
        int stopping = e->stopping;
        pthread_mutex_unlock(&e->mu);
        return q35_fail(Q35_ERR_ARG, stopping ? "the server is shutting down" : "too many requests are waiting (%d queued)", e->max_queue);
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (e->qtail) e->qtail->next = j;
    else e->qhead = j;
    e->qtail = j;
    e->queued++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return Q35_OK;
}

int srv_engine_ctx(const srv_engine *e) { return e->n_ctx; }

void srv_engine_load(srv_engine *e, int *active, int *queued) {
    pthread_mutex_lock(&e->mu);
    *active = e->active;
    *queued = e->queued;
    pthread_mutex_unlock(&e->mu);
}

static void slot_clear(srv_engine *e, slot *sl, srv_finish f, const char *error) {
    if (!sl->job) return;
    q35_status st;
    if ((f == SRV_FINISH_STOP || f == SRV_FINISH_LENGTH) && e->cache && (st = q35_prefix_cache_save(e->cache, sl->s)))
        q35_log(Q35_LOG_WARN, "serve: no checkpoint: %s", q35_last_error()); /* after each answer */
    if (f == SRV_FINISH_STOP || f == SRV_FINISH_LENGTH)
        q35_log(Q35_LOG_INFO, "serve: answered: %d prompt tokens (%d reused), %d generated, %s", sl->job->n_prompt, sl->job->n_cached,
                sl->job->n_generated, f == SRV_FINISH_STOP ? "stop" : "length");
    else if (f == SRV_FINISH_CANCELLED)
        q35_log(Q35_LOG_INFO, "serve: request cancelled after %d of at most %d tokens", sl->job->n_generated, sl->job->p.max_tokens);
    else if (f == SRV_FINISH_ERROR)
        q35_log(Q35_LOG_WARN, "serve: request failed: %s", error ? error : "?");
    pthread_mutex_lock(&e->mu);
    e->active--;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; sl->im && i < sl->job->p.n_images; i++) free((void *)sl->im[i].embeds);
    free(sl->im);
    sl->im = NULL;
    job_finish(sl->job, f, error);
    srv_job_release(sl->job);
    sl->job = NULL;
    q35_sampler_free(sl->smp);
    sl->smp = NULL;
    q35_stream_decoder_free(sl->dec);
    sl->dec = NULL;
    free(sl->counts);
    sl->counts = NULL;
    sl->pending_len = 0;
}

/* One step of a prompt: the first restores the longest exact prefix the session or the prefix
 * cache holds; each evaluates at most prefill_step tokens, stopping at the last grid point of the
 * stable part to checkpoint it. Every piece begins on the chunk grid, so the result is bitwise that
 * of one call over the whole prompt, while other requests get their decode steps in between. The
 * last piece gives the first token's logits (or argmax). Returns 1 when the prompt is done, 0 when
 * more remains, -1 on failure. */
/* The job's images through the vision tower (on the worker: the encoder uses the thread pool). */
static int slot_encode_images(srv_engine *e, slot *sl, srv_job *j) {
    q35_vision_info vi;
    if (!q35_model_has_vision(e->m, &vi)) {
        q35_fail(Q35_ERR_UNSUPPORTED, "the model has no vision tower");
        return -1;
    }
    if (!(sl->im = calloc((size_t)j->p.n_images, sizeof *sl->im))) {
        q35_fail(Q35_ERR_NOMEM, "out of memory");
        return -1;
    }
    for (int i = 0; i < j->p.n_images; i++) {
        const q35_pixels *px = &j->p.images[i];
        float *emb = malloc(sizeof(float) * (size_t)px->n_tokens * (size_t)vi.hidden); /* [n_tokens][hidden] */
        if (!emb) {
            q35_fail(Q35_ERR_NOMEM, "out of memory");
            return -1;
        }
        sl->im[i] = (q35_image_embeds){emb, px->n_tokens, px->grid_t, px->grid_h, px->grid_w};
        if (q35_vision_encode(e->m, px->data, px->grid_t, px->grid_h, px->grid_w, emb)) return -1;
    }
    return 0;
}

/* Evaluate prompt positions [session pos, end): with images, through their embeddings and
 * positions (the whole prompt given, the session holding its start). */
static q35_status slot_eval(slot *sl, srv_job *j, int end, float *logits) {
    if (j->p.n_images > 0) return q35_session_eval_mm_rest(sl->s, j->prompt, j->n_prompt, sl->im, j->p.n_images, end, logits, NULL);
    return q35_session_eval(sl->s, j->prompt + sl->prompt_pos, end - sl->prompt_pos, logits, NULL);
}

static int slot_prefill(srv_engine *e, slot *sl, srv_job *j) {
    q35_status st;
    const int chunk = q35_session_chunk(sl->s) > 0 ? q35_session_chunk(sl->s) : 1;
    if (sl->prompt_pos < 0) {
        int ready = 0;
        if (j->p.n_images > 0 && slot_encode_images(e, sl, j)) return -1;
        if (!e->reuse) {
            q35_session_reset(sl->s);
        } else if (j->p.n_images > 0) { /* image positions are keyed by their pictures */
            uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)j->n_prompt); /* [n_prompt] */
            if (!keys) {
                q35_fail(Q35_ERR_NOMEM, "out of memory");
                return -1;
            }
            st = q35_mm_keys(e->m, j->prompt, j->n_prompt, sl->im, j->p.n_images, keys);
            if (!st) st = q35_prefix_cache_restore_keys(e->cache, sl->s, keys, j->n_prompt, &ready);
            free(keys);
            if (st) return -1;
        } else if ((st = q35_prefix_cache_restore(e->cache, sl->s, j->prompt, j->n_prompt, &ready))) {
            return -1;
        }
        pthread_mutex_lock(&j->mu);
        j->n_cached = ready;
        pthread_mutex_unlock(&j->mu);
        const int stable = j->p.stable > 0 && j->p.stable < j->n_prompt ? j->p.stable : j->n_prompt - 1;
        sl->prompt_pos = ready;
        sl->checkpoint_at = e->reuse && e->cache ? stable / chunk * chunk : 0;
    }
    const int step = e->prefill_step > chunk ? e->prefill_step / chunk * chunk : chunk;
    int end = sl->prompt_pos + step;
    if (sl->checkpoint_at > sl->prompt_pos && end >= sl->checkpoint_at) end = sl->checkpoint_at;
    if (end < j->n_prompt) {
        if ((st = slot_eval(sl, j, end, NULL))) return -1;
        if (end == sl->checkpoint_at && (st = q35_prefix_cache_save(e->cache, sl->s)))
            q35_log(Q35_LOG_WARN, "serve: no checkpoint: %s", q35_last_error());
        sl->prompt_pos = end;
        return 0;
    }
    const int32_t *rest = j->prompt + sl->prompt_pos;
    int n = j->n_prompt - sl->prompt_pos;
    if (j->p.n_images > 0) { /* the logits are needed either way (as q35 generate --image does) */
        if ((st = slot_eval(sl, j, j->n_prompt, sl->logits))) return -1;
        sl->next_id = 0;
        for (int i = 1; i < e->n_vocab; i++) sl->next_id = sl->logits[i] > sl->logits[sl->next_id] ? i : sl->next_id;
    } else {
        st = sl->fast ? q35_session_eval_argmax(sl->s, rest, n, &sl->next_id, NULL) : q35_session_eval(sl->s, rest, n, sl->logits, NULL);
        if (st) return -1;
    }
    if (e->cache && (st = q35_prefix_cache_save(e->cache, sl->s))) q35_log(Q35_LOG_WARN, "serve: no checkpoint: %s", q35_last_error());
    sl->prompt_pos = j->n_prompt;
    return 1;
}

static int slot_start(srv_engine *e, slot *sl, srv_job *j) {
    sl->job = j;
    sl->prompt_done = 0;
    sl->prompt_pos = -1;
    sl->pending_len = 0;
    const q35_sampler_params *sp = &j->p.sp;
    sl->fast = sp->temperature <= 0 && sp->presence_penalty == 0 && sp->repetition_penalty == 1 && j->p.frequency_penalty == 0;
    sl->smp = q35_sampler_new(sp, e->n_vocab);
    sl->dec = q35_stream_decoder_new(e->tok);
    sl->counts = j->p.frequency_penalty != 0 ? calloc((size_t)e->n_vocab, sizeof(int)) : NULL;
    if (!sl->s && q35_session_new_ex(e->m, &(q35_session_opts){e->n_ctx, e->kv_type}, &sl->s)) {
        slot_clear(e, sl, SRV_FINISH_ERROR, q35_last_error());
        return -1;
    }
    if (!sl->smp || !sl->dec || (j->p.frequency_penalty != 0 && !sl->counts)) {
        slot_clear(e, sl, SRV_FINISH_ERROR, "out of memory");
        return -1;
    }
    return 0;
}

static int is_stop_id(const srv_engine *e, int32_t id) {
    for (int i = 0; i < e->n_stop_ids; i++)
        if (e->stop_ids[i] == id) return 1;
    return 0;
}

/* Release decoded text through the stop-sequence filter; returns 1 when a stop sequence ended it. */
static int slot_push_text(slot *sl, const char *s, size_t n, int final) {
    if (sl->pending_len + n > sl->pending_cap) {
        size_t cap = sl->pending_cap ? sl->pending_cap : 256;
        while (cap < sl->pending_len + n) cap *= 2;
        char *p = realloc(sl->pending, cap);
        if (!p) return -1;
        sl->pending = p;
        sl->pending_cap = cap;
    }
    memcpy(sl->pending + sl->pending_len, s, n);
    sl->pending_len += n;
    size_t safe;
    long at = srv_stop_scan(sl->pending, sl->pending_len, sl->job->p.stop, sl->job->p.n_stop, &safe);
    if (final && at < 0) safe = sl->pending_len;
    if (safe && job_emit(sl->job, sl->pending, safe)) return -1;
    memmove(sl->pending, sl->pending + safe, sl->pending_len - safe);
    sl->pending_len -= safe;
    return at >= 0;
}

/* One step of an active slot: the prompt, or one generated token. */
static void slot_step(srv_engine *e, slot *sl) {
    srv_job *j = sl->job;
    q35_status st;
    if (job_cancelled(j)) {
        slot_clear(e, sl, SRV_FINISH_CANCELLED, NULL);
        return;
    }
    if (!sl->prompt_done) {
        int done = slot_prefill(e, sl, j);
        if (done < 0) {
            slot_clear(e, sl, SRV_FINISH_ERROR, q35_last_error());
            return;
        }
        if (!done) return; /* more of the prompt at this slot's next turn */
        sl->prompt_done = 1;
        if (j->p.max_tokens <= 0) {
            slot_clear(e, sl, SRV_FINISH_LENGTH, NULL);
            return;
        }
        /* the first token is sampled right away below */
    }
    int32_t id;
    if (sl->fast) {
        id = sl->next_id;
    } else {
        if (sl->counts)
            for (int v = 0; v < e->n_vocab; v++)
                if (sl->counts[v]) sl->logits[v] -= j->p.frequency_penalty * (float)sl->counts[v];
        id = q35_sampler_sample(sl->smp, sl->logits);
        q35_sampler_accept(sl->smp, id);
        if (sl->counts && id >= 0 && id < e->n_vocab) sl->counts[id]++;
    }
    pthread_mutex_lock(&j->mu);
    int produced = ++j->n_generated;
    pthread_mutex_unlock(&j->mu);
    if (!j->p.ignore_eos && is_stop_id(e, id)) {
        char tail[64];
        size_t k = q35_stream_decoder_flush(sl->dec, tail, sizeof tail);
        int r = slot_push_text(sl, tail, k, 1);
        slot_clear(e, sl, r < 0 ? SRV_FINISH_ERROR : SRV_FINISH_STOP, r < 0 ? "out of memory" : NULL);
        return;
    }
    char piece[512];
    size_t k = q35_stream_decoder_push(sl->dec, id, piece, sizeof piece);
    int at_end = produced >= j->p.max_tokens || q35_session_pos(sl->s) >= q35_session_ctx(sl->s);
    if (at_end) k += q35_stream_decoder_flush(sl->dec, piece + k, sizeof piece - k);
    int r = slot_push_text(sl, piece, k, at_end);
    if (r != 0) {
        slot_clear(e, sl, r < 0 ? SRV_FINISH_ERROR : SRV_FINISH_STOP, r < 0 ? "out of memory" : NULL);
        return;
    }
    if (at_end) {
        slot_clear(e, sl, SRV_FINISH_LENGTH, NULL);
        return;
    }
    st = sl->fast ? q35_session_eval_argmax(sl->s, &id, 1, &sl->next_id, NULL) : q35_session_eval(sl->s, &id, 1, sl->logits, NULL);
    if (st) slot_clear(e, sl, SRV_FINISH_ERROR, q35_last_error());
}

static void *worker_main(void *arg) {
    srv_engine *e = arg;
    int rr = 0; /* round-robin start */
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int active = 0;
        for (int i = 0; i < e->parallel; i++) active += e->slots[i].job != NULL;
        while (!e->stopping && !active && !e->qhead) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stopping) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        /* admit waiting jobs into free slots, oldest first */
        srv_job *admit[64];
        int n_admit = 0;
        for (int i = 0; i < e->parallel && n_admit < 64; i++)
            if (!e->slots[i].job && e->qhead) {
                srv_job *j = e->qhead;
                e->qhead = j->next;
                if (!e->qhead) e->qtail = NULL;
                e->queued--;
                admit[n_admit++] = j;
                e->slots[i].job = j; /* reserve */
                e->active++;
            }
        pthread_mutex_unlock(&e->mu);
        for (int i = 0, a = 0; i < e->parallel && a < n_admit; i++)
            if (e->slots[i].job == admit[a] && !e->slots[i].smp) {
                slot_start(e, &e->slots[i], admit[a]);
                a++;
            }
        /* one step for every active slot, starting after the one that went first last time */
        for (int k = 0; k < e->parallel; k++) {
            slot *sl = &e->slots[(rr + k) % e->parallel];
            if (sl->job) slot_step(e, sl);
        }
        rr = (rr + 1) % e->parallel;
    }
    return NULL;
}

q35_status srv_engine_new(q35_model *m, const q35_tokenizer *tok, const int32_t *stop_ids, int n_stop_ids,
                          const srv_engine_opts *o, srv_engine **out) {
    *out = NULL;
    if (o->parallel < 1 || o->parallel > 64) return q35_fail(Q35_ERR_ARG, "parallel sessions: expected 1..64, got %d", o->parallel);
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    q35_model_info info;
    q35_model_get_info(m, &info);
    e->m = m;
    e->tok = tok;
    e->n_vocab = info.n_vocab;
    e->n_ctx = o->n_ctx > 0 && o->n_ctx < info.max_ctx ? o->n_ctx : info.max_ctx;
    e->parallel = o->parallel;
    e->max_queue = o->max_queue > 0 ? o->max_queue : 64;
    e->reuse = o->reuse;
    e->prefill_step = o->prefill_step > 0 ? o->prefill_step : 512;
    e->cache = o->cache;
    e->kv_type = o->kv_type;
    for (int i = 0; i < n_stop_ids && e->n_stop_ids < 16; i++) e->stop_ids[e->n_stop_ids++] = stop_ids[i];
    e->slots = calloc((size_t)e->parallel, sizeof *e->slots);
    if (!e->slots) {
        free(e);
        return q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < e->parallel; i++)
        if (!(e->slots[i].logits = malloc(sizeof(float) * (size_t)e->n_vocab))) {
            srv_engine_free(e);
            return q35_fail(Q35_ERR_NOMEM, "out of memory");
        }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (pthread_create(&e->worker, NULL, worker_main, e) != 0) {
        srv_engine_free(e);
        return q35_fail(Q35_ERR_NOMEM, "cannot start the engine thread");
    }
    e->worker_started = 1;
    *out = e;
    return Q35_OK;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    if (e->worker_started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = 1;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->worker, NULL);
    }
    while (e->qhead) {
        srv_job *j = e->qhead;
        e->qhead = j->next;
        job_finish(j, SRV_FINISH_CANCELLED, NULL);
        srv_job_release(j);
    }
    for (int i = 0; e->slots && i < e->parallel; i++) {
        slot_clear(e, &e->slots[i], SRV_FINISH_CANCELLED, NULL);
        q35_session_free(e->slots[i].s);
        free(e->slots[i].logits);
        free(e->slots[i].pending);
    }
    free(e->slots);
    if (e->worker_started) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    }
    free(e);
}
