/* Exact-prefix reuse and session files: logits bitwise equal with reuse on and off across
 * multi-turn conversations (greedy and seeded sampling, edits, regenerations), the longest prefix
 * picked, LRU eviction under a small budget, truncation back to the exact point, position keys,
 * a session file round trip that continues identically, and every bad file refused with the
 * session left as it was. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "q35.h"
#include "test.h"

static q35_model *load(const char *name) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), name);
    q35_model *m = NULL;
    if (q35_model_load(dir, &m)) fprintf(stderr, "  %s: %s\n", name, q35_last_error());
    return m;
}

static int n_vocab(const q35_model *m) {
    q35_model_info info;
    q35_model_get_info(m, &info);
    return info.n_vocab;
}

static q35_kv_type kv_type = Q35_KV_F32; /* of the sessions new_session makes */

static q35_session *new_session(q35_model *m, int chunk, int n_ctx) {
    char v[16];
    snprintf(v, sizeof v, "%d", chunk);
    setenv("Q35_PROMPT_CHUNK", v, 1);
    q35_session *s = NULL;
    if (q35_session_new_ex(m, &(q35_session_opts){n_ctx, kv_type}, &s)) fprintf(stderr, "  session: %s\n", q35_last_error());
    unsetenv("Q35_PROMPT_CHUNK");
    return s;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static int32_t rand_tok(int V) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int32_t)(rng % (uint64_t)(V < 500 ? V : 500));
}

/* A conversation: each turn appends a user message to the history (or, for an edit, replaces the
 * last turn; for a regeneration, repeats it with another seed), evaluates the prompt and generates
 * G tokens. Reuse off: every prompt from the start. Reuse on: restore from the cache, evaluate the
 * rest in one call, save. Every logit of both runs is compared bitwise. */
static void conversation(q35_model *m, int chunk, int turns, int first_len, float temperature, const char *what) {
    const int V = n_vocab(m), G = 6, n_ctx = 2048;
    q35_session *off = new_session(m, chunk, n_ctx), *on = new_session(m, chunk, n_ctx);
    q35_prefix_cache *cache = NULL;
    CHECK(q35_prefix_cache_new(m, (size_t)64 << 20, &cache) == Q35_OK, "%s", q35_last_error());
    float *lo = malloc(sizeof(float) * (size_t)V), *ln = malloc(sizeof(float) * (size_t)V);
    int32_t *hist = malloc(sizeof(int32_t) * n_ctx), *prev = malloc(sizeof(int32_t) * n_ctx);
    int n_hist = 0, n_prev = 0, reused = 0, evaluated_on = 0, evaluated_off = 0;
    for (int i = 0; i < first_len; i++) hist[n_hist++] = rand_tok(V);
    for (int t = 0; t < turns && off && on && cache; t++) {
        const int kind = t >= 2 ? t % 4 : 0; /* 0, 1: a new turn; 2: edit the last turn; 3: regenerate it */
        if (kind == 2 || kind == 3) {
            memcpy(hist, prev, sizeof(int32_t) * (size_t)n_prev);
            n_hist = n_prev;
        }
        memcpy(prev, hist, sizeof(int32_t) * (size_t)n_hist);
        n_prev = n_hist;
        if (kind != 3)
            for (int i = 0, u = 3 + t % 7; i < u; i++) hist[n_hist++] = rand_tok(V);
        q35_sampler_params sp;
        q35_sampler_default_params(&sp);
        sp.temperature = temperature;
        sp.seed = 1000 + (uint64_t)t;
        q35_sampler *so = q35_sampler_new(&sp, V), *sn = q35_sampler_new(&sp, V);
        q35_session_reset(off);
        CHECK(q35_session_eval(off, hist, n_hist, lo, NULL) == Q35_OK, "%s", q35_last_error());
        int ready = -1;
        CHECK(q35_prefix_cache_restore(cache, on, hist, n_hist, &ready) == Q35_OK, "%s", q35_last_error());
        CHECK(ready >= 0 && ready < n_hist && ready % chunk == 0, "%s turn %d: ready %d of %d", what, t, ready, n_hist);
        if (t > 0 && ready > 0) reused++;
        CHECK(q35_session_eval(on, hist + ready, n_hist - ready, ln, NULL) == Q35_OK, "%s", q35_last_error());
        evaluated_on += n_hist - ready;
        evaluated_off += n_hist;
        CHECK(!memcmp(lo, ln, sizeof(float) * (size_t)V), "%s turn %d: prompt logits differ with reuse (resumed at %d of %d)", what, t, ready,
              n_hist);
        for (int g = 0; g < G; g++) {
            int32_t a = q35_sampler_sample(so, lo), b = q35_sampler_sample(sn, ln);
            CHECK(a == b, "%s turn %d step %d: token %d vs %d", what, t, g, a, b);
            q35_sampler_accept(so, a);
            q35_sampler_accept(sn, b);
            hist[n_hist++] = a;
            CHECK(q35_session_eval(off, &a, 1, lo, NULL) == Q35_OK, "%s", q35_last_error());
            CHECK(q35_session_eval(on, &a, 1, ln, NULL) == Q35_OK, "%s", q35_last_error());
            CHECK(!memcmp(lo, ln, sizeof(float) * (size_t)V), "%s turn %d step %d: logits differ with reuse", what, t, g);
        }
        CHECK(q35_prefix_cache_save(cache, on) == Q35_OK, "%s", q35_last_error());
        q35_sampler_free(so);
        q35_sampler_free(sn);
    }
    CHECK(reused >= turns - 2, "%s: only %d of %d later turns resumed from a checkpoint", what, reused, turns - 1);
    printf("# %s: %d turns, %d tokens evaluated with reuse, %d without\n", what, turns, evaluated_on, evaluated_off);
    free(lo);
    free(ln);
    free(hist);
    free(prev);
    q35_prefix_cache_free(cache);
    q35_session_free(off);
    q35_session_free(on);
}

static void test_bitwise_greedy(void) {
    q35_model *m = load("tiny-vl");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    conversation(m, 8, 9, 21, 0.0f, "tiny-vl greedy, chunk 8");
    conversation(m, 128, 6, 300, 0.0f, "tiny-vl greedy, chunk 128");
    q35_model_free(m);
}

static void test_bitwise_sampled(void) {
    q35_model *m = load("narrow8");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    conversation(m, 8, 9, 13, 0.9f, "narrow8 seeded sampling, chunk 8");
    q35_model_free(m);
    m = load("talker");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    conversation(m, 16, 6, 40, 0.7f, "talker seeded sampling, chunk 16");
    q35_model_free(m);
}

/* Fresh evaluation of tokens[0..n): its last logits. */
static void fresh_logits(q35_model *m, int chunk, const int32_t *tokens, int n, float *out) {
    q35_session *s = new_session(m, chunk, 512);
    CHECK(s && q35_session_eval(s, tokens, n, out, NULL) == Q35_OK, "%s", q35_last_error());
    q35_session_free(s);
}

static void save_prefix(q35_model *m, q35_prefix_cache *c, const int32_t *tokens, int n) {
    q35_session *s = new_session(m, 8, 512);
    CHECK(s && q35_session_eval(s, tokens, n, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_exact_pos(s) == n / 8 * 8, "exact point %d after %d tokens", q35_session_exact_pos(s), n);
    CHECK(q35_prefix_cache_save(c, s) == Q35_OK, "%s", q35_last_error());
    q35_session_free(s);
}

static int restore_len(q35_model *m, q35_prefix_cache *c, const int32_t *tokens, int n, int check_logits) {
    q35_session *s = new_session(m, 8, 512);
    int ready = -1;
    CHECK(s && q35_prefix_cache_restore(c, s, tokens, n, &ready) == Q35_OK, "%s", q35_last_error());
    if (s && check_logits) {
        const int V = n_vocab(m);
        float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
        CHECK(q35_session_pos(s) == ready, "%s", q35_last_error());
        CHECK(ready == 0 || !memcmp(q35_session_tokens(s), tokens, sizeof(int32_t) * (size_t)ready), "%s", q35_last_error());
        CHECK(q35_session_eval(s, tokens + ready, n - ready, a, NULL) == Q35_OK, "%s", q35_last_error());
        fresh_logits(m, 8, tokens, n, b);
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "resumed at %d of %d: logits differ from a fresh evaluation", ready, n);
        free(a);
        free(b);
    }
    q35_session_free(s);
    return ready;
}

static void test_restore_longest(void) {
    q35_model *m = load("tiny-vl");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    const int V = n_vocab(m);
    int32_t base[64], other[64];
    for (int i = 0; i < 64; i++) base[i] = rand_tok(V);
    memcpy(other, base, sizeof other);
    for (int i = 24; i < 64; i++) other[i] = (base[i] + 1) % V;
    q35_prefix_cache *c = NULL;
    CHECK(q35_prefix_cache_new(m, (size_t)64 << 20, &c) == Q35_OK, "%s", q35_last_error());
    save_prefix(m, c, base, 19);  /* checkpoint at 16 */
    save_prefix(m, c, base, 40);  /* at 40 */
    save_prefix(m, c, other, 50); /* at 48, shares 24 tokens with base */
    int n_cp = 0;
    q35_prefix_cache_stats(c, &n_cp, NULL);
    CHECK(n_cp == 3, "%d checkpoints", n_cp);
    int r;
    CHECK((r = restore_len(m, c, base, 64, 1)) == 40, "base[0..64): resumed at %d, expected 40", r);
    CHECK((r = restore_len(m, c, base, 40, 1)) == 16, "base[0..40): resumed at %d, expected 16 (never all the tokens)", r);
    CHECK((r = restore_len(m, c, other, 60, 1)) == 48, "other[0..60): resumed at %d, expected 48", r);
    CHECK((r = restore_len(m, c, other, 30, 1)) == 16, "other[0..30): resumed at %d, expected 16 (the shared prefix)", r);
    CHECK((r = restore_len(m, c, base, 16, 0)) == 0, "base[0..16): resumed at %d, expected 0", r);
    int32_t x[20];
    for (int i = 0; i < 20; i++) x[i] = (base[i] + 7) % V;
    CHECK((r = restore_len(m, c, x, 20, 1)) == 0, "unrelated: resumed at %d", r);
    /* A session of another chunk size is never given these checkpoints (they are not exact on its grid). */
    q35_session *s16 = new_session(m, 16, 512);
    CHECK(s16 && q35_prefix_cache_restore(c, s16, base, 64, &r) == Q35_OK && r == 0, "chunk 16 session resumed at %d", r);
    q35_session_free(s16);
    setenv("Q35_GDN_CHUNK", "4", 1); /* nor one whose Gated DeltaNet runs other sub-chunks */
    q35_session *g4 = new_session(m, 8, 512);
    unsetenv("Q35_GDN_CHUNK");
    CHECK(g4 && q35_prefix_cache_restore(c, g4, base, 64, &r) == Q35_OK && r == 0, "GDN chunk 4 session resumed at %d", r);
    q35_session_free(g4);
    q35_prefix_cache_free(c);
    q35_model_free(m);
}

static void test_eviction(void) {
    q35_model *m = load("tiny-vl");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    const int V = n_vocab(m);
    int32_t a[40], b[40], d[40];
    for (int i = 0; i < 40; i++) a[i] = rand_tok(V), b[i] = rand_tok(V), d[i] = rand_tok(V);
    /* Size of one 32-position checkpoint, from an empty cache with a large budget. */
    q35_prefix_cache *c = NULL;
    CHECK(q35_prefix_cache_new(m, (size_t)64 << 20, &c) == Q35_OK, "%s", q35_last_error());
    save_prefix(m, c, a, 32);
    size_t one = 0;
    q35_prefix_cache_stats(c, NULL, &one);
    CHECK(one > 0, "%s", q35_last_error());
    q35_prefix_cache_free(c);
    /* Room for two: a, b stored; a used again; d evicts b, the least recently used. */
    CHECK(q35_prefix_cache_new(m, 2 * one + one / 2, &c) == Q35_OK, "%s", q35_last_error());
    save_prefix(m, c, a, 32);
    save_prefix(m, c, b, 32);
    int r, n = 0;
    size_t used = 0;
    CHECK((r = restore_len(m, c, a, 40, 0)) == 32, "a: %d", r);
    save_prefix(m, c, d, 32);
    q35_prefix_cache_stats(c, &n, &used);
    CHECK(n == 2 && used <= 2 * one + one / 2, "%d checkpoints, %zu bytes", n, used);
    CHECK((r = restore_len(m, c, a, 40, 1)) == 32, "a after eviction: %d", r);
    CHECK((r = restore_len(m, c, d, 40, 1)) == 32, "d: %d", r);
    CHECK((r = restore_len(m, c, b, 40, 0)) == 0, "b should have been evicted: %d", r);
    /* Saving the same prefix twice stores it once. */
    save_prefix(m, c, d, 35);
    q35_prefix_cache_stats(c, &n, NULL);
    CHECK(n == 2, "%d checkpoints after a duplicate save", n);
    q35_prefix_cache_free(c);
    /* A checkpoint bigger than the budget is not stored. */
    CHECK(q35_prefix_cache_new(m, one / 2, &c) == Q35_OK, "%s", q35_last_error());
    save_prefix(m, c, a, 32);
    q35_prefix_cache_stats(c, &n, &used);
    CHECK(n == 0 && used == 0, "%d checkpoints, %zu bytes under a budget of %zu", n, used, one / 2);
    q35_prefix_cache_free(c);
    q35_model_free(m);
}

static void test_truncate(void) {
    q35_model *m = load("narrow8");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    const int V = n_vocab(m);
    int32_t t[30];
    for (int i = 0; i < 30; i++) t[i] = rand_tok(V);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    q35_session *s = new_session(m, 8, 256);
    CHECK(q35_session_eval(s, t, 20, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_exact_pos(s) == 16, "exact point %d", q35_session_exact_pos(s));
    for (int i = 20; i < 23; i++) CHECK(q35_session_eval(s, t + i, 1, NULL, NULL) == Q35_OK, "%s", q35_last_error()); /* one by one: not exact */
    CHECK(q35_session_exact_pos(s) == 16 && q35_session_pos(s) == 23, "%s", q35_last_error());
    CHECK(q35_session_truncate(s, 5) == Q35_ERR_ARG && strstr(q35_last_error(), "no checkpoint"), "%s", q35_last_error());
    CHECK(q35_session_pos(s) == 23, "%s", q35_last_error());
    CHECK(q35_session_truncate(s, 16) == Q35_OK && q35_session_pos(s) == 16, "%s", q35_last_error());
    CHECK(q35_session_eval(s, t + 16, 14, a, NULL) == Q35_OK, "%s", q35_last_error());
    fresh_logits(m, 8, t, 30, b);
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "after truncation: logits differ from a fresh evaluation");
    CHECK(q35_session_exact_pos(s) == 24, "exact point %d after resuming", q35_session_exact_pos(s));
    CHECK(q35_session_truncate(s, 0) == Q35_OK && q35_session_pos(s) == 0 && q35_session_exact_pos(s) == 0, "%s", q35_last_error());
    q35_session_free(s);
    free(a);
    free(b);
    q35_model_free(m);
}

/* Keys name content: the same ids with another key at one position do not match. */
static void test_keys(void) {
    q35_model *m = load("tiny-vl");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    const int V = n_vocab(m);
    int32_t t[40];
    uint64_t k[40];
    for (int i = 0; i < 40; i++) t[i] = rand_tok(V), k[i] = (uint64_t)t[i];
    k[10] = 0x8000000000000000ull | 12345; /* "an image" at position 10 */
    q35_prefix_cache *c = NULL;
    CHECK(q35_prefix_cache_new(m, (size_t)64 << 20, &c) == Q35_OK, "%s", q35_last_error());
    q35_session *s = new_session(m, 8, 256);
    CHECK(q35_session_eval(s, t, 33, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_set_keys(s, 10, k + 10, 1) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_set_keys(s, 30, k, 5) == Q35_ERR_ARG, "%s", q35_last_error());
    CHECK(q35_session_keys(s)[10] == k[10] && q35_session_tokens(s)[10] == t[10], "%s", q35_last_error());
    CHECK(q35_prefix_cache_save(c, s) == Q35_OK, "%s", q35_last_error());
    q35_session *s2 = new_session(m, 8, 256);
    int r = -1;
    CHECK(q35_prefix_cache_restore(c, s2, t, 40, &r) == Q35_OK && r == 0, "plain ids matched the keyed checkpoint: %d", r);
    CHECK(q35_prefix_cache_restore_keys(c, s2, k, 40, &r) == Q35_OK && r == 32, "keys: resumed at %d", r);
    CHECK(q35_session_keys(s2)[10] == k[10], "%s", q35_last_error());
    /* The session's own exact point is checked against its keys too. */
    CHECK(q35_prefix_cache_restore(NULL, s, t, 40, &r) == Q35_OK && r == 0, "own exact point matched plain ids: %d", r);
    q35_session_free(s);
    q35_session_free(s2);
    q35_prefix_cache_free(c);
    q35_model_free(m);
}

static void path_in_work(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/prefix-%ld-%s", test_work_dir(), (long)getpid(), name);
}

static long file_size(const char *p) {
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void patch_byte(const char *p, long off, int xor_mask) {
    FILE *f = fopen(p, "r+b");
    if (!f) return;
    fseek(f, off, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(ch ^ xor_mask, f);
    fclose(f);
}

static void copy(const char *from, const char *to, long n) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    for (long i = 0; a && b && i < n; i++) {
        int ch = fgetc(a);
        if (ch == EOF) break;
        fputc(ch, b);
    }
    if (a) fclose(a);
    if (b) fclose(b);
}

static void test_session_file(void) {
    q35_model *m = load("tiny-vl"), *other = load("narrow8");
    CHECK(m && other, "%s", q35_last_error());
    if (!m || !other) {
        q35_model_free(m);
        q35_model_free(other);
        return;
    }
    const int V = n_vocab(m);
    int32_t t[40];
    for (int i = 0; i < 40; i++) t[i] = rand_tok(V);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    char path[4096], bad[4096];
    path_in_work(path, sizeof path, "good.q35s");
    path_in_work(bad, sizeof bad, "bad.q35s");
    q35_session *s = new_session(m, 8, 256);
    CHECK(q35_session_eval(s, t, 27, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    for (int i = 27; i < 30; i++) CHECK(q35_session_eval(s, t + i, 1, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    const char blob[] = "[{\"role\":\"user\",\"content\":\"hi\"}]";
    CHECK(q35_session_save_ex(s, path, blob, sizeof blob - 1) == Q35_OK, "%s", q35_last_error());
    /* Round trip: same position, history and exact point; the continuation is bitwise the same. */
    q35_session *l = new_session(m, 8, 256);
    void *got = NULL;
    size_t got_len = 0;
    CHECK(q35_session_load_ex(l, path, &got, &got_len) == Q35_OK, "%s", q35_last_error());
    CHECK(got && got_len == sizeof blob - 1 && !memcmp(got, blob, got_len), "blob");
    free(got);
    CHECK(q35_session_pos(l) == 30 && q35_session_exact_pos(l) == 24, "loaded pos %d exact %d", q35_session_pos(l), q35_session_exact_pos(l));
    CHECK(!memcmp(q35_session_tokens(l), t, sizeof(int32_t) * 30), "%s", q35_last_error());
    for (int i = 30; i < 33; i++) {
        CHECK(q35_session_eval(s, t + i, 1, a, NULL) == Q35_OK, "%s", q35_last_error());
        CHECK(q35_session_eval(l, t + i, 1, b, NULL) == Q35_OK, "%s", q35_last_error());
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "step %d after load: logits differ", i);
    }
    int r = -1;
    CHECK(q35_prefix_cache_restore(NULL, l, t, 40, &r) == Q35_OK && r == 24, "loaded exact point: %d", r);
    CHECK(q35_session_eval(l, t + 24, 16, a, NULL) == Q35_OK, "%s", q35_last_error());
    fresh_logits(m, 8, t, 40, b);
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "resuming a loaded session's exact point: logits differ");
    /* q35_session_load ignores the blob; a session file without one loads too. */
    CHECK(q35_session_save(l, bad) == Q35_OK && q35_session_load(s, bad) == Q35_OK && q35_session_pos(s) == 40, "%s", q35_last_error());
    q35_session_free(l);

    /* Bad files. The victim holds 30 tokens; after each failed load it still continues like a control. */
    q35_session *victim = new_session(m, 8, 256), *control = new_session(m, 8, 256);
    CHECK(q35_session_eval(victim, t, 30, NULL, NULL) == Q35_OK && q35_session_eval(control, t, 30, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    const long size = file_size(path);
    CHECK(size > 200, "file of %ld bytes", size);
    struct {
        const char *what, *expect;
    } cases[] = {{"a flipped byte in the state", "checksum"},
                 {"a flipped byte in the checksum", "checksum"},
                 {"truncated", "truncated"},
                 {"header only", "truncated"},
                 {"empty", "truncated"},
                 {"another format version", "format version"},
                 {"bad magic", "magic"},
                 {"another model", "another model"},
                 {"context too small", "context"},
                 {"missing", "cannot open"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        q35_session *target = victim;
        q35_session *small = NULL;
        unlink(bad);
        switch (k) {
        case 0: copy(path, bad, size); patch_byte(bad, size / 2, 0x10); break;
        case 1: copy(path, bad, size); patch_byte(bad, size - 2, 0x01); break;
        case 2: copy(path, bad, size - 100); break;
        case 3: copy(path, bad, 64); break;
        case 4: copy(path, bad, 0); break;
        case 5: copy(path, bad, size); patch_byte(bad, 8, 0x02); break;
        case 6: copy(path, bad, size); patch_byte(bad, 0, 0x20); break;
        case 7: {
            q35_session *o = new_session(other, 8, 256);
            CHECK(q35_session_eval(o, t, 10, NULL, NULL) == Q35_OK && q35_session_save(o, bad) == Q35_OK, "%s", q35_last_error());
            q35_session_free(o);
            break;
        }
        case 8: copy(path, bad, size); target = small = new_session(m, 8, 20); break;
        default: break;
        }
        q35_status st = q35_session_load(target, bad);
        CHECK(st != Q35_OK && strstr(q35_last_error(), cases[k].expect) && strstr(q35_last_error(), bad), "%s: status %s, '%s'", cases[k].what,
              q35_status_name(st), q35_last_error());
        if (small) CHECK(q35_session_pos(small) == 0, "%s: the session moved", cases[k].what);
        q35_session_free(small);
        CHECK(q35_session_pos(victim) == 30 && q35_session_exact_pos(victim) == 24, "%s: the session moved", cases[k].what);
    }
    CHECK(q35_session_eval(victim, t + 30, 5, a, NULL) == Q35_OK && q35_session_eval(control, t + 30, 5, b, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "a failed load changed the session's state");
    CHECK(!memcmp(q35_session_tokens(victim), t, sizeof(int32_t) * 35), "%s", q35_last_error());
    /* Saving over an unwritable path fails cleanly and leaves no temporary file behind. */
    char nodir[4200];
    snprintf(nodir, sizeof nodir, "%s/no-such-dir/x.q35s", test_work_dir());
    CHECK(q35_session_save(victim, nodir) == Q35_ERR_IO && strstr(q35_last_error(), "no-such-dir"), "%s", q35_last_error());
    unlink(path);
    unlink(bad);
    q35_session_free(victim);
    q35_session_free(control);
    q35_session_free(s);
    free(a);
    free(b);
    q35_model_free(m);
    q35_model_free(other);
}

/* An f16 KV cache: reuse is as exact as with fp32 (a conversation, logits bitwise equal with reuse
 * on and off); a session file holds halves (smaller) and round-trips bitwise; a file or a
 * checkpoint of the other cache type is refused or not used, and the session stays as it was. */
static void test_f16_kv(void) {
    q35_model *m = load("tiny-vl");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    kv_type = Q35_KV_F16;
    conversation(m, 8, 8, 21, 0.0f, "f16 KV cache, greedy, chunk 8");
    const int V = n_vocab(m);
    int32_t t[40];
    for (int i = 0; i < 40; i++) t[i] = rand_tok(V);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    char p16[4096], p32[4096];
    path_in_work(p16, sizeof p16, "kv16.q35s");
    path_in_work(p32, sizeof p32, "kv32.q35s");
    q35_session *h = new_session(m, 8, 256), *h2 = new_session(m, 8, 256);
    kv_type = Q35_KV_F32;
    q35_session *f = new_session(m, 8, 256);
    CHECK(h && h2 && f && q35_session_kv_type(h) == Q35_KV_F16 && q35_session_kv_type(f) == Q35_KV_F32, "sessions");
    if (!h || !h2 || !f) goto done;
    CHECK(q35_session_eval(h, t, 30, NULL, NULL) == Q35_OK && q35_session_eval(f, t, 30, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_save(h, p16) == Q35_OK && q35_session_save(f, p32) == Q35_OK, "%s", q35_last_error());
    CHECK(file_size(p16) < file_size(p32), "f16 session file %ld bytes, f32 %ld", file_size(p16), file_size(p32));
    /* round trip */
    CHECK(q35_session_load(h2, p16) == Q35_OK && q35_session_pos(h2) == 30, "%s", q35_last_error());
    for (int i = 30; i < 34; i++) {
        CHECK(q35_session_eval(h, t + i, 1, a, NULL) == Q35_OK && q35_session_eval(h2, t + i, 1, b, NULL) == Q35_OK, "%s", q35_last_error());
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "f16 session, step %d after load: logits differ", i);
    }
    /* the other type: refused, nothing moves */
    CHECK(q35_session_load(f, p16) == Q35_ERR_ARG && strstr(q35_last_error(), "fp16 KV cache") && strstr(q35_last_error(), "--kv-cache f16"),
          "%s", q35_last_error());
    CHECK(q35_session_load(h2, p32) == Q35_ERR_ARG && strstr(q35_last_error(), "fp32 KV cache"), "%s", q35_last_error());
    CHECK(q35_session_pos(f) == 30 && q35_session_pos(h2) == 34, "a refused load moved a session");
    /* an unknown type in the header */
    char bad[4096];
    path_in_work(bad, sizeof bad, "kvbad.q35s");
    copy(p16, bad, file_size(p16));
    patch_byte(bad, 68, 0x02);
    CHECK(q35_session_load(h2, bad) == Q35_ERR_FORMAT && strstr(q35_last_error(), "KV cache type 3"), "%s", q35_last_error());
    /* checkpoints of the other type are not used */
    q35_prefix_cache *c = NULL;
    CHECK(q35_prefix_cache_new(m, (size_t)16 << 20, &c) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_prefix_cache_save(c, f) == Q35_OK, "%s", q35_last_error());
    q35_session_reset(h2);
    int r = -1;
    CHECK(c && q35_prefix_cache_restore(c, h2, t, 40, &r) == Q35_OK && r == 0, "an f16 session resumed from an fp32 checkpoint at %d", r);
    CHECK(q35_prefix_cache_save(c, h) == Q35_OK && q35_prefix_cache_restore(c, h2, t, 40, &r) == Q35_OK && r == 24,
          "an f16 session did not resume from an f16 checkpoint (%d)", r);
    q35_prefix_cache_free(c);
    unlink(bad);
done:
    unlink(p16);
    unlink(p32);
    q35_session_free(h);
    q35_session_free(h2);
    q35_session_free(f);
    free(a);
    free(b);
    q35_model_free(m);
}

/* Two threads, each with its own session, share one small cache (evictions included): every
 * resumed evaluation equals the fresh one computed beforehand. */
typedef struct share_job {
    q35_model *m;
    q35_prefix_cache *c;
    const int32_t *seqs; /* [4][48] four sequences sharing their first 20 ids; requests use 45 */
    const float *fresh;  /* [4][V] last logits of each sequence, fresh */
    int first, V, bad, resumed;
} share_job;

static void *share_worker(void *arg) {
    share_job *j = arg;
    q35_session *s = new_session(j->m, 8, 128);
    float *l = malloc(sizeof(float) * (size_t)j->V);
    for (int k = 0; s && l && k < 24; k++) {
        const int q = j->first == 0 ? k % 2 : k % 6 == 5 ? 3 : 1 + k % 2; /* 0,1 | 1,2 and now and then 3 */
        int r = 0;
        if (q35_prefix_cache_restore(j->c, s, j->seqs + q * 48, 45, &r) || q35_session_eval(s, j->seqs + q * 48 + r, 45 - r, l, NULL) ||
            memcmp(l, j->fresh + (size_t)q * j->V, sizeof(float) * (size_t)j->V))
            j->bad++;
        j->resumed += r > 0;
        if (q35_prefix_cache_save(j->c, s)) j->bad++;
    }
    free(l);
    q35_session_free(s);
    return NULL;
}

static void test_threads_share_cache(void) {
    q35_model *m = load("tiny-vl");
    CHECK(m != NULL, "%s", q35_last_error());
    if (!m) return;
    const int V = n_vocab(m);
    int32_t seqs[4 * 48];
    for (int i = 0; i < 4 * 48; i++) seqs[i] = i % 48 < 20 ? seqs[i % 48] : rand_tok(V);
    for (int i = 0; i < 20; i++) seqs[i] = rand_tok(V), seqs[48 + i] = seqs[96 + i] = seqs[144 + i] = seqs[i];
    float *fresh = malloc(sizeof(float) * 4 * (size_t)V);
    for (int q = 0; q < 4; q++) fresh_logits(m, 8, seqs + q * 48, 45, fresh + (size_t)q * V); /* 45 tokens: checkpoints at 40 */
    /* A budget of three and a half 40-position checkpoints: sequence 3 evicts the others now and then. */
    q35_prefix_cache *c = NULL;
    q35_session *probe = new_session(m, 8, 128);
    size_t one = 0;
    CHECK(probe && q35_session_eval(probe, seqs, 47, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_prefix_cache_new(m, (size_t)64 << 20, &c) == Q35_OK && q35_prefix_cache_save(c, probe) == Q35_OK, "%s", q35_last_error());
    q35_prefix_cache_stats(c, NULL, &one);
    q35_prefix_cache_free(c);
    q35_session_free(probe);
    const size_t budget = 3 * one + one / 2;
    CHECK(q35_prefix_cache_new(m, budget, &c) == Q35_OK, "%s", q35_last_error());
    share_job jobs[2] = {{m, c, seqs, fresh, 0, V, 0, 0}, {m, c, seqs, fresh, 1, V, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, share_worker, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(jobs[0].bad == 0 && jobs[1].bad == 0, "%d + %d resumed evaluations differ from the fresh ones", jobs[0].bad, jobs[1].bad);
    CHECK(jobs[0].resumed > 10 && jobs[1].resumed > 10, "resumed %d and %d times of 24", jobs[0].resumed, jobs[1].resumed);
    int n = 0;
    size_t used = 0;
    q35_prefix_cache_stats(c, &n, &used);
    CHECK(n <= 3 && used <= budget, "%d checkpoints, %zu bytes", n, used);
    printf("# two threads: %d checkpoints kept, %zu bytes\n", n, used);
    q35_prefix_cache_free(c);
    free(fresh);
    q35_model_free(m);
}

int main(void) {
    q35_set_threads(2);
    RUN(test_bitwise_greedy);
    RUN(test_bitwise_sampled);
    RUN(test_restore_longest);
    RUN(test_eviction);
    RUN(test_truncate);
    RUN(test_keys);
    RUN(test_session_file);
    RUN(test_f16_kv);
    RUN(test_threads_share_cache);
    TEST_EXIT();
}
