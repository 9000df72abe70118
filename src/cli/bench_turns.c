/* q35 bench --turns T --history H: time to first token of each turn of a conversation, with exact
 * prefix reuse and without. A conversation of random ids: H tokens of history, then per turn a
 * user message of U tokens, the answer (A greedy tokens) appended for the next turn. Reuse on:
 * resume from the session's exact point or a prefix-cache checkpoint, evaluate the rest, checkpoint;
 * reuse off: every prompt from the start. Both runs must give the same answers (bitwise equal
 * logits make equal argmaxes); the medians over the repetitions are reported per turn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One conversation; ttft[t] and evaluated[t] per turn; answers[t][A] the greedy tokens. */
static int run_conversation(q35_model *m, int reuse, int turns, int history, int user, int answer, size_t cache_bytes, double *ttft,
                            int *evaluated, int32_t *answers) {
    q35_model_info info;
    q35_model_get_info(m, &info);
    const int n_ctx = history + turns * (user + answer) + 1;
    q35_session *s = NULL;
    q35_prefix_cache *cache = NULL;
    q35_status st = q35_session_new(m, n_ctx, &s);
    if (!st && reuse) st = q35_prefix_cache_new(m, cache_bytes, &cache);
    int32_t *conv = malloc(sizeof(int32_t) * (size_t)n_ctx); /* [n_ctx] the conversation's ids */
    if (!st && !conv) st = Q35_ERR_NOMEM;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int n = 0;
    for (; !st && n < history; n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        conv[n] = (int32_t)(x % (uint64_t)info.n_vocab);
    }
    for (int t = 0; t < turns && !st; t++) {
        for (int i = 0; i < user; i++, n++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            conv[n] = (int32_t)(x % (uint64_t)info.n_vocab);
        }
        const double t0 = now_s();
        int ready = 0;
        if (reuse) st = q35_prefix_cache_restore(cache, s, conv, n, &ready);
        else q35_session_reset(s);
        int32_t next = 0;
        if (!st) st = q35_session_eval_argmax(s, conv + ready, n - ready, &next, NULL);
        ttft[t] = now_s() - t0;
        evaluated[t] = n - ready;
        for (int k = 0; k < answer && !st; k++) {
            answers[(size_t)t * answer + k] = next;
            conv[n++] = next;
            if (k + 1 < answer) st = q35_session_eval_argmax(s, &next, 1, &next, NULL);
        }
        if (!st && cache) st = q35_prefix_cache_save(cache, s);
    }
    int rc = st ? cli_fail("bench --turns", st) : 0;
    free(conv);
    q35_prefix_cache_free(cache);
    q35_session_free(s);
    return rc;
}

int cli_bench_turns(q35_model *m, int turns, int history, int user, int answer, int reps, size_t cache_bytes, int json) {
    double *on = calloc((size_t)turns * reps, sizeof(double)), *off = calloc((size_t)turns * reps, sizeof(double));
    int *ev_on = calloc((size_t)turns, sizeof(int)), *ev_off = calloc((size_t)turns, sizeof(int));
    int32_t *ans_on = calloc((size_t)turns * answer + 1, sizeof(int32_t)), *ans_off = calloc((size_t)turns * answer + 1, sizeof(int32_t));
    double *col = calloc((size_t)reps, sizeof(double));
    int rc = !on || !off || !ev_on || !ev_off || !ans_on || !ans_off || !col;
    if (rc) cli_error("out of memory");
    int same = 1;
    /* Reuse off and on alternate, so that load from elsewhere on the machine falls on both. */
    for (int r = 0; r < reps && !rc; r++) {
        double *t_on = calloc((size_t)turns, sizeof(double)), *t_off = calloc((size_t)turns, sizeof(double));
        rc = !t_on || !t_off;
        if (!rc) rc = run_conversation(m, 0, turns, history, user, answer, cache_bytes, t_off, ev_off, ans_off);
        if (!rc) rc = run_conversation(m, 1, turns, history, user, answer, cache_bytes, t_on, ev_on, ans_on);
        for (int t = 0; !rc && t < turns; t++) on[(size_t)t * reps + r] = t_on[t], off[(size_t)t * reps + r] = t_off[t];
        if (!rc && memcmp(ans_on, ans_off, sizeof(int32_t) * (size_t)turns * answer)) same = 0;
        free(t_on);
        free(t_off);
    }
    if (!rc) {
        if (json) printf("{\"threads\": %d, \"history\": %d, \"user\": %d, \"answer\": %d, \"reps\": %d, \"same_answers\": %s, \"turns\": [", q35_get_threads(),
                         history, user, answer, reps, same ? "true" : "false");
        else {
            printf("conversation   %d tokens of history, then per turn %d user + %d answer tokens; %d threads, medians of %d\n", history, user,
                   answer, q35_get_threads(), reps);
            printf("turn  prompt  | reuse off: evaluated  TTFT s | reuse on: evaluated  TTFT s | speed-up\n");
        }
        for (int t = 0; t < turns; t++) {
            memcpy(col, on + (size_t)t * reps, sizeof(double) * reps);
            const double mon = median(col, reps);
            memcpy(col, off + (size_t)t * reps, sizeof(double) * reps);
            const double moff = median(col, reps);
            const int prompt = history + (t + 1) * user + t * answer;
            if (json)
                printf("%s{\"turn\": %d, \"prompt\": %d, \"off\": {\"evaluated\": %d, \"ttft_s\": %.4f}, \"on\": {\"evaluated\": %d, \"ttft_s\": %.4f}}",
                       t ? ", " : "", t + 1, prompt, ev_off[t], moff, ev_on[t], mon);
            else
                printf("%4d  %6d  | %19d  %6.3f | %18d  %6.3f | %7.1fx\n", t + 1, prompt, ev_off[t], moff, ev_on[t], mon, mon > 0 ? moff / mon : 0);
        }
        if (json) printf("]}\n");
        else printf("answers        %s with reuse on and off\n", same ? "identical" : "DIFFERENT");
        if (!same) rc = 1;
    }
    free(on);
    free(off);
    free(ev_on);
    free(ev_off);
    free(ans_on);
    free(ans_off);
    free(col);
    return rc;
}
