/* Exact greedy decoding without the full logits (runtime/lmhead.h explains the bound). */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "kernels/kernels.h"
#include "runtime/lmhead.h"
#include "runtime/state.h"

void q35_greedy_free_head(struct q35_model *m) {
    if (m->head_approx) {
        q35_lmhead_free(m->head_approx);
        free(m->head_approx);
        m->head_approx = NULL;
    }
}

void q35_greedy_free_scratch(q35_session *s) {
    q35_lmhead_scratch *sc = s->head_sc;
    if (!sc) return;
    free(sc->a); free(sc->e); free(sc->exact); free(sc->qh); free(sc->dh); free(sc->g); free(sc->c);
    free(sc);
    s->head_sc = NULL;
}

/* Decided once per model, on its first greedy token (scored exhaustively): whether the 4-bit
 * head pays (lmhead.h's trial estimates under a tenth of the rows rescored), and then built and
 * shared by sessions. Random weights give flat logits: the copy would cost its memory (0.56 bytes
 * a weight) for no gain, so it is not built. */
static void decide_head(struct q35_model *m, const float *h, const float *logits, q35_lmhead_scratch *sc) {
    pthread_mutex_lock(&m->head_lock);
    if (!m->head_approx && !m->head_approx_failed) {
        const double frac = m->head_trial_off ? 0.0 : q35_lmhead_trial(&m->lm_head, h, logits, sc);
        q35_lmhead_approx *ap = frac <= 0.1 ? calloc(1, sizeof *ap) : NULL;
        if (ap && q35_lmhead_build(&m->lm_head, ap) == Q35_OK) {
            m->head_approx = ap;
        } else {
            free(ap);
            m->head_approx_failed = 1;
            if (frac > 0.1) q35_log(Q35_LOG_INFO, "fast greedy: about %.0f%% of the head's rows would be rescored; using full logits", 100 * frac);
            else q35_log(Q35_LOG_INFO, "fast greedy: %s; using full logits", q35_last_error());
        }
    }
    pthread_mutex_unlock(&m->head_lock);
}

static const q35_lmhead_approx *head_of(struct q35_model *m, int *decided) {
    pthread_mutex_lock(&m->head_lock);
    const q35_lmhead_approx *ap = m->head_approx;
    *decided = ap || m->head_approx_failed;
    pthread_mutex_unlock(&m->head_lock);
    return ap;
}

void q35_greedy_skip_trial(struct q35_model *m) { m->head_trial_off = 1; }

q35_status q35_session_eval_argmax(q35_session *s, const int32_t *tokens, int n, int32_t *next, int *n_rescored) {
    struct q35_model *m = (struct q35_model *)s->m;
    const q35_config *c = &m->cfg;
    if (n <= 0 || !next) return q35_fail(Q35_ERR_ARG, "eval_argmax: needs at least one token and an output");
    if (!s->head_sc) {
        const size_t V = (size_t)c->vocab, H = (size_t)c->hidden;
        q35_lmhead_scratch *sc = calloc(1, sizeof *sc);
        if (sc) {
            sc->a = malloc(sizeof(float) * V), sc->e = malloc(sizeof(float) * V), sc->exact = malloc(sizeof(float) * V);
            sc->qh = malloc(H), sc->dh = malloc(sizeof(float) * H / 32), sc->g = malloc(sizeof(float) * H / 32);
            sc->c = malloc(sizeof(float) * H / 32);
        }
        s->head_sc = sc;
        if (!sc || !sc->a || !sc->e || !sc->exact || !sc->qh || !sc->dh || !sc->g || !sc->c) {
            q35_greedy_free_scratch(s);
            return q35_fail(Q35_ERR_NOMEM, "out of memory for the greedy scratch");
        }
    }
    int decided;
    const q35_lmhead_approx *ap = head_of(m, &decided);
    if (!ap || s->head_sc->off) { /* exhaustive: full logits (into the scratch's exact[V]) */
        float *logits = s->head_sc->exact;
        q35_status st = q35_session_eval(s, tokens, n, logits, NULL);
        if (st) return st;
        *next = (int32_t)q35_argmax(logits, c->vocab);
        if (n_rescored) *n_rescored = c->vocab;
        if (!decided) decide_head(m, s->sc.xn, logits, s->head_sc); /* sc.xn: the last token's normed hidden state */
        return Q35_OK;
    }
    q35_status st = q35_session_eval(s, tokens, n, NULL, NULL);
    if (st) return st;
    /* The last token's residual is the row (n-1) % cap of the last chunk (forward.c). */
    const int H = c->hidden, last = (n - 1) % s->sc.cap;
    q35_rmsnorm(s->sc.x + (size_t)last * H, m->final_norm, H, c->rms_eps, s->sc.xn);
    int nr = 0;
    *next = q35_lmhead_argmax(&m->lm_head, ap, s->sc.xn, s->head_sc, &nr);
    if (n_rescored) *n_rescored = nr;
    /* When the bound prunes too little to pay for the scan (more than half the rows rescored over
     * the first 2 tokens, or a tenth on average over 16), this session goes back to exhaustive
     * scoring. (Random weights have flat logits: every row is rescored from the first token.) */
    q35_lmhead_scratch *hs = s->head_sc;
    hs->calls++;
    hs->rescored += nr;
    if ((hs->calls == 2 && hs->rescored / hs->calls > 0.5 * c->vocab) || (hs->calls == 16 && hs->rescored / hs->calls > 0.1 * c->vocab)) {
        hs->off = 1;
        q35_log(Q35_LOG_INFO, "fast greedy: %.0f of %d rows rescored per token; using full logits", hs->rescored / hs->calls, c->vocab);
    }
    return Q35_OK;
}
