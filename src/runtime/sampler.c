/* Token sampling: penalties, then greedy or temperature + top-k + top-p + min-p (the order of
 * transformers' logits processors), with a seeded generator so runs repeat. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "kernels/kernels.h"
#include "core/file.h"
#include "formats/json.h"
#include "q35.h"

struct q35_sampler {
    q35_sampler_params p;
    int n_vocab;
    uint32_t *count;     /* [n_vocab] times each token was accepted */
    int32_t *seen;       /* [n_vocab] distinct accepted tokens, in order */
    int n_seen;
    int32_t *cand;       /* [n_vocab] candidate ids */
    float *prob;         /* [n_vocab] */
    uint64_t rng[4];     /* xoshiro256** state */
};

void q35_sampler_default_params(q35_sampler_params *p) {
    /* Qwen3.5 small models, non-thinking general tasks: temperature 1.0, top_p 1.0, top_k 20,
     * presence_penalty 2.0 (model card, as republished; see README). */
    p->temperature = 1.0f;
    p->top_k = 20;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->presence_penalty = 2.0f;
    p->repetition_penalty = 1.0f;
    p->seed = 0;
}

q35_status q35_sampler_params_from_dir(const char *dir, q35_sampler_params *p, int *found) {
    char path[4096];
    *found = 0;
    q35_status st = q35_path_join(path, sizeof path, dir, "generation_config.json");
    if (st || !q35_file_exists(path)) return st;
    cJSON *j;
    if ((st = q35_json_load_file(path, 1u << 20, &j))) return st;
    double v;
    long k;
    int do_sample = 1;
    v = p->temperature; if ((st = q35_json_num_opt(j, "temperature", path, &v))) goto done; p->temperature = (float)v;
    v = p->top_p; if ((st = q35_json_num_opt(j, "top_p", path, &v))) goto done; p->top_p = (float)v;
    v = p->min_p; if ((st = q35_json_num_opt(j, "min_p", path, &v))) goto done; p->min_p = (float)v;
    v = p->repetition_penalty; if ((st = q35_json_num_opt(j, "repetition_penalty", path, &v))) goto done; p->repetition_penalty = (float)v;
    v = p->presence_penalty; if ((st = q35_json_num_opt(j, "presence_penalty", path, &v))) goto done; p->presence_penalty = (float)v;
    k = p->top_k; if ((st = q35_json_int_opt(j, "top_k", path, 0, 1L << 30, &k))) goto done; p->top_k = (int)k;
    if ((st = q35_json_bool_opt(j, "do_sample", path, &do_sample))) goto done;
    if (!do_sample) p->temperature = 0.0f;
    *found = 1;
done:
    cJSON_Delete(j);
    return st;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t next_u64(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

static void seed_rng(q35_sampler *s) {
    uint64_t z = s->p.seed;
    for (int i = 0; i < 4; i++) { /* splitmix64 */
        z += 0x9E3779B97F4A7C15ull;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        s->rng[i] = x ^ (x >> 31);
    }
}

q35_sampler *q35_sampler_new(const q35_sampler_params *p, int n_vocab) {
    if (n_vocab <= 0) return NULL;
    q35_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->seen = malloc(sizeof *s->seen * (size_t)n_vocab);
    s->cand = malloc(sizeof *s->cand * (size_t)n_vocab);
    s->prob = malloc(sizeof *s->prob * (size_t)n_vocab);
    if (!s->count || !s->seen || !s->cand || !s->prob) {
        q35_sampler_free(s);
        return NULL;
    }
    seed_rng(s);
    return s;
}

void q35_sampler_free(q35_sampler *s) {
    if (!s) return;
    free(s->count); free(s->seen); free(s->cand); free(s->prob);
    free(s);
}

void q35_sampler_reset(q35_sampler *s) {
    for (int i = 0; i < s->n_seen; i++) s->count[s->seen[i]] = 0;
    s->n_seen = 0;
}

void q35_sampler_accept(q35_sampler *s, int32_t id) {
    if (id < 0 || id >= s->n_vocab) return;
    if (s->count[id]++ == 0) s->seen[s->n_seen++] = id;
}

static const float *sort_keys;
static int by_logit_desc(const void *a, const void *b) {
    float x = sort_keys[*(const int32_t *)a], y = sort_keys[*(const int32_t *)b];
    if (x != y) return x > y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b; /* ties: lower id first, as argmax does */
}

int32_t q35_sampler_sample(q35_sampler *s, float *logits) {
    const int V = s->n_vocab;
    const q35_sampler_params *p = &s->p;
    for (int i = 0; i < s->n_seen; i++) {
        const int32_t id = s->seen[i];
        if (p->repetition_penalty != 1.0f && p->repetition_penalty > 0)
            logits[id] = logits[id] > 0 ? logits[id] / p->repetition_penalty : logits[id] * p->repetition_penalty;
        logits[id] -= p->presence_penalty;
    }
    if (p->temperature <= 0.0f) {
        return (int32_t)q35_argmax(logits, V);
    }
    /* Candidates: the top_k best (all when off), sorted by logit. */
    int n = 0;
    if (p->top_k > 0 && p->top_k < V) {
        /* Keep a sorted list of the k best (k is small in practice). */
        const int k = p->top_k;
        for (int i = 0; i < V; i++) {
            if (n == k && logits[i] <= logits[s->cand[n - 1]]) continue;
            int j = n < k ? n++ : n - 1;
            while (j > 0 && logits[s->cand[j - 1]] < logits[i]) {
                s->cand[j] = s->cand[j - 1];
                j--;
            }
            s->cand[j] = i;
        }
    } else {
        for (int i = 0; i < V; i++) s->cand[n++] = i;
        sort_keys = logits;
        qsort(s->cand, (size_t)n, sizeof *s->cand, by_logit_desc);
    }
    /* Temperature, softmax over the candidates. */
    const float inv_t = 1.0f / p->temperature, mx = logits[s->cand[0]] * inv_t;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        s->prob[i] = expf(logits[s->cand[i]] * inv_t - mx);
        sum += s->prob[i];
    }
    for (int i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
    /* top-p: the smallest prefix whose mass reaches top_p (at least one). */
    if (p->top_p < 1.0f) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += s->prob[i];
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    /* min-p: drop candidates below min_p times the best probability. */
    if (p->min_p > 0.0f) {
        const float floor_p = p->min_p * s->prob[0];
        int keep = 1;
        while (keep < n && s->prob[keep] >= floor_p) keep++;
        n = keep;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += s->prob[i];
    const double r = (double)(next_u64(s->rng) >> 11) * (1.0 / 9007199254740992.0) * total;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += s->prob[i];
        if (r < acc) return s->cand[i];
    }
    return s->cand[n - 1];
}
