/* Sampler: greedy is argmax; a seed repeats a run; top-k / top-p / min-p cut where they should;
 * penalties move the choice; sampled frequencies follow softmax(logits / T). */
#include "q35.h"
#include "test.h"

#define V 8

static q35_sampler *make(float temp, int top_k, float top_p, float min_p, float presence, float rep, uint64_t seed) {
    q35_sampler_params p = {temp, top_k, top_p, min_p, presence, rep, seed};
    return q35_sampler_new(&p, V);
}

static const float base[V] = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, -3.0f, 0.5f};

static int draw(q35_sampler *s) {
    float l[V];
    memcpy(l, base, sizeof l);
    return q35_sampler_sample(s, l);
}

static void test_greedy(void) {
    q35_sampler *s = make(0, 0, 1, 0, 0, 1, 1);
    CHECK(draw(s) == 1, "greedy must pick the largest logit");
    q35_sampler_free(s);
    s = make(1, 1, 1, 0, 0, 1, 1);
    for (int i = 0; i < 50; i++) CHECK(draw(s) == 1, "top_k = 1 is greedy");
    q35_sampler_free(s);
    s = make(1, 0, 1e-6f, 0, 0, 1, 1);
    for (int i = 0; i < 50; i++) CHECK(draw(s) == 1, "a tiny top_p keeps only the best");
    q35_sampler_free(s);
    s = make(1, 0, 1, 1.0f, 0, 1, 1);
    for (int i = 0; i < 50; i++) CHECK(draw(s) == 1, "min_p = 1 keeps only the best");
    q35_sampler_free(s);
}

static void test_seed(void) {
    q35_sampler *a = make(1, 0, 1, 0, 0, 1, 42), *b = make(1, 0, 1, 0, 0, 1, 42), *c = make(1, 0, 1, 0, 0, 1, 43);
    int same = 1, diff = 0;
    for (int i = 0; i < 200; i++) {
        int x = draw(a), y = draw(b), z = draw(c);
        same &= x == y;
        diff += x != z;
    }
    CHECK(same, "the same seed must repeat the same tokens");
    CHECK(diff > 0, "another seed should give another run");
    q35_sampler_free(a); q35_sampler_free(b); q35_sampler_free(c);
}

static void test_cuts(void) {
    /* top_k = 3 keeps {1, 5, 2}. */
    q35_sampler *s = make(1, 3, 1, 0, 0, 1, 7);
    for (int i = 0; i < 500; i++) {
        int t = draw(s);
        CHECK(t == 1 || t == 5 || t == 2, "top_k 3 drew %d", t);
    }
    q35_sampler_free(s);
    /* min_p 0.5: p(5)/p(1) = e^-0.1 and p(2)/p(1) = e^-0.5 = 0.61 stay, 0 (e^-2) goes. */
    s = make(1, 0, 1, 0.5f, 0, 1, 7);
    for (int i = 0; i < 500; i++) {
        int t = draw(s);
        CHECK(t == 1 || t == 5 || t == 2, "min_p 0.5 drew %d", t);
    }
    q35_sampler_free(s);
}

static void test_penalties(void) {
    q35_sampler *s = make(0, 0, 1, 0, 2.0f, 1, 1);
    q35_sampler_accept(s, 1);
    CHECK(draw(s) == 5, "presence penalty 2 on token 1 makes 5 the best");
    q35_sampler_accept(s, 5);
    CHECK(draw(s) == 2, "then 2");
    q35_sampler_reset(s);
    CHECK(draw(s) == 1, "reset forgets the history");
    q35_sampler_free(s);
    s = make(0, 0, 1, 0, 0, 1.5f, 1);
    q35_sampler_accept(s, 1);
    CHECK(draw(s) == 5, "repetition penalty 1.5: 3/1.5 = 2 < 2.9");
    q35_sampler_free(s);
}

static void test_distribution(void) {
    const float T = 0.7f;
    double p[V], z = 0;
    for (int i = 0; i < V; i++) z += p[i] = exp(base[i] / T);
    int count[V] = {0};
    const int N = 40000;
    q35_sampler *s = make(T, 0, 1, 0, 0, 1, 123);
    for (int i = 0; i < N; i++) count[draw(s)]++;
    q35_sampler_free(s);
    for (int i = 0; i < V; i++) {
        double want = p[i] / z, got = (double)count[i] / N, sd = sqrt(want * (1 - want) / N);
        CHECK(fabs(got - want) < 5 * sd + 1e-4, "token %d: frequency %.4f, softmax %.4f", i, got, want);
    }
}

int main(void) {
    RUN(test_greedy);
    RUN(test_seed);
    RUN(test_cuts);
    RUN(test_penalties);
    RUN(test_distribution);
    TEST_EXIT();
}
