/* Exact greedy without the full logits: the argmax found through the bounded 4-bit scan equals the
 * argmax of exhaustive scoring, on random heads and hidden states, with planted near-ties, for
 * every scan variant this CPU runs; and the 4-bit scan's bound really holds. */
#include "kernels/headscan.h"
#include "kernels/kernels.h"
#include "runtime/lmhead.h"
#include "runtime/state.h"
#include "q35.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

static void run_case(int V, int H, float head_scale, int plant_ties, int *checked, int *max_rescored) {
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)V * H);
    for (int64_t i = 0; i < (int64_t)V * H; i++) w[i] = q35_f32_to_bf16(frand() * head_scale);
    if (plant_ties) /* rows that differ from row 0 by one unit in the last place here and there */
        for (int r = 1; r < V; r += 7)
            for (int k = 0; k < H; k++) w[(size_t)r * H + k] = (uint16_t)(w[k] + ((k * 31 + r) % 97 == 0));
    q35_tensor head = {.name = "head", .dtype = Q35_DT_BF16, .ndim = 2, .shape = {V, H}, .data = w, .nbytes = sizeof(uint16_t) * (size_t)V * H};
    q35_lmhead_approx ap;
    CHECK(q35_lmhead_build(&head, &ap) == Q35_OK, "%s", q35_last_error());
    q35_lmhead_scratch sc = {.a = malloc(4 * V), .e = malloc(4 * V), .exact = malloc(4 * V), .qh = malloc(H), .dh = malloc(H / 8), .g = malloc(H / 8), .c = malloc(H / 8)};
    float *h = malloc(sizeof(float) * H), *logits = malloc(sizeof(float) * V), *a = malloc(4 * V), *e = malloc(4 * V);
    for (int trial = 0; trial < 20; trial++) {
        for (int k = 0; k < H; k++) h[k] = frand() * (trial % 3 == 0 ? 10.0f : 1.0f);
        if (trial == 5) memcpy(h, w, 0); /* keep one ordinary */
        q35_matmul(&head, h, 1, logits);
        int32_t want = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[want]) want = i;
        int n = 0;
        int32_t got = q35_lmhead_argmax(&head, &ap, h, &sc, &n);
        CHECK(got == want, "V %d H %d trial %d: fast greedy %d, exhaustive %d", V, H, trial, got, want);
        if (n > *max_rescored) *max_rescored = n;
        (*checked)++;
        /* The bound of every row, for every scan variant. */
        q35_headscan_act act = {H / 32, sc.qh, sc.dh, sc.g, sc.c};
        q35_headscan_fn fns[] = {q35_headscan_ref, q35_headscan_best()};
        for (int f = 0; f < 2; f++) {
            fns[f](ap.data, ap.row_bytes, &act, 0, V, a, e);
            int bad = 0;
            for (int i = 0; i < V; i++) bad += fabsf(a[i] - logits[i]) > e[i];
            CHECK(bad == 0, "variant %d: %d rows outside their bound", f, bad);
        }
    }
    free(h); free(logits); free(a); free(e);
    free(sc.a); free(sc.e); free(sc.exact); free(sc.qh); free(sc.dh); free(sc.g); free(sc.c);
    q35_lmhead_free(&ap);
    free(w);
}

static void test_matches_exhaustive(void) {
    int checked = 0, max_rescored = 0;
    run_case(1000, 64, 0.1f, 0, &checked, &max_rescored);
    run_case(4099, 256, 1.0f, 0, &checked, &max_rescored);
    run_case(2000, 1024, 0.05f, 0, &checked, &max_rescored);
    run_case(3000, 96, 0.3f, 1, &checked, &max_rescored);
    printf("# %d argmaxes equal to exhaustive scoring; at most %d rows rescored\n", checked, max_rescored);
}

/* Greedy steps of q35_session_eval_argmax on m against argmax over full logits from a second
 * session; returns the steps that matched (stops at the first mismatch, a failed CHECK). rows[0]
 * gets the rows rescored for the prompt, rows[1] the most on any step, rows[2] the last step's. */
static int greedy_vs_exhaustive(q35_model *m, const int32_t *prompt, int n, int steps, const char *label, int rows[3]) {
    q35_model_info info;
    q35_model_get_info(m, &info);
    q35_session *a, *b;
    q35_session_new(m, 128, &a);
    q35_session_new(m, 128, &b);
    float *logits = malloc(sizeof(float) * info.n_vocab);
    int32_t ta = 0, tb = 0;
    int n_r = 0, done = 0;
    CHECK(q35_session_eval_argmax(a, prompt, n, &ta, &n_r) == Q35_OK, "%s", q35_last_error());
    rows[0] = rows[1] = n_r;
    q35_session_eval(b, prompt, n, logits, NULL);
    for (; done < steps; done++) {
        tb = (int32_t)q35_argmax(logits, info.n_vocab);
        CHECK(ta == tb, "%s step %d: fast greedy %d, exhaustive %d", label, done, ta, tb);
        if (ta != tb) break;
        q35_session_eval_argmax(a, &ta, 1, &ta, &n_r);
        q35_session_eval(b, &tb, 1, logits, NULL);
        if (n_r > rows[1]) rows[1] = n_r;
    }
    rows[2] = n_r;
    free(logits);
    q35_session_free(a);
    q35_session_free(b);
    return done;
}

/* Through whole models: 48 greedy steps with q35_session_eval_argmax equal argmax over full logits,
 * for stored, q8 and q4 weights (a quantized head is rescored with its own kernel). */
static void test_sessions(void) {
    const char *models[] = {"talker", "narrow8", "tiny-vl"};
    const char *weights[] = {"native", "q8", "q4"};
    const int32_t prompt[5] = {11, 200, 37, 5, 90};
    int steps = 0, max_rescored = 0;
    for (size_t mi = 0; mi < 3; mi++)
        for (size_t wi = 0; wi < 3; wi++) {
            char dir[1024], label[64];
            snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), models[mi]);
            snprintf(label, sizeof label, "%s %s", models[mi], weights[wi]);
            q35_load_opts o = {.weights = weights[wi]};
            q35_model *m;
            if (q35_model_load_ex(dir, &o, &m)) { CHECK(0, "%s", q35_last_error()); continue; }
            q35_greedy_skip_trial(m); /* the scan on every fixture, flat logits included */
            int rows[3];
            steps += greedy_vs_exhaustive(m, prompt, 5, 48, label, rows);
            if (rows[1] > max_rescored) max_rescored = rows[1];
            q35_model_free(m);
        }
    printf("# %d greedy steps through whole models equal exhaustive scoring; at most %d rows rescored\n", steps, max_rescored);
}

/* The trial on a model's first greedy token builds the 4-bit head for the trained talker (it prunes
 * all but ~1% of the rows) and not for a random-weight fixture (flat logits: nearly every row
 * would be rescored), and the tokens are those of exhaustive scoring either way. */
static void test_trial(void) {
    const char *models[] = {"talker", "narrow8"};
    const int32_t prompt[4] = {7, 300, 21, 64};
    for (int mi = 0; mi < 2; mi++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), models[mi]);
        q35_model *m;
        if (q35_model_load(dir, &m)) { CHECK(0, "%s", q35_last_error()); continue; }
        q35_model_info info;
        q35_model_get_info(m, &info);
        int rows[3];
        CHECK(greedy_vs_exhaustive(m, prompt, 4, 8, models[mi], rows) == 8, "%s: a token differs from exhaustive scoring", models[mi]);
        CHECK(rows[0] == info.n_vocab, "%s: the first token is scored exhaustively (%d rows)", models[mi], rows[0]);
        if (mi == 0) CHECK(m->head_approx != NULL && rows[2] < info.n_vocab / 10, "talker: the 4-bit head was not used (%d rows rescored)", rows[2]);
        else CHECK(m->head_approx == NULL && m->head_approx_failed, "narrow8: the 4-bit head was built for flat logits");
        q35_model_free(m);
    }
}

int main(void) {
    RUN(test_matches_exhaustive);
    RUN(test_sessions);
    RUN(test_trial);
    TEST_EXIT();
}
