/* Parity against the Hugging Face reference (tools/oracle): for every fixture under
 * tests/data/models/ with a reference.safetensors, logits at every prompt position within 1e-4
 * (absolute, or relative to the largest logit), 32 greedy tokens equal, and a prompt evaluated at
 * once equal to the same prompt evaluated token by token (1e-4 relative). Checkpoints too large to commit are
 * regenerated from their seed (synthetic.json) and checked against the recorded checksums. */
#include <dirent.h>
#include <sys/stat.h>

#include "core/file.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synth.h"
#include "q35.h"
#include "synth_fixture.h"
#include "test.h"

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void check_fixture(const char *name) {
    char src[4096], dir[4096], path[4200];
    snprintf(src, sizeof src, "%s/models/%s", test_data_dir(), name);
    snprintf(path, sizeof path, "%s/reference.safetensors", src);
    CHECK(prepare_model(src, name, dir, sizeof dir) == 0, "%s: synthetic checkpoint does not match the oracle", name);
    q35_st_index ref;
    if (q35_st_open_file(path, &ref)) {
        CHECK(0, "%s", q35_last_error());
        return;
    }
    q35_model *m;
    q35_status st = q35_model_load(dir, &m);
    CHECK(st == Q35_OK, "%s: %s", name, q35_last_error());
    if (st) {
        q35_st_close(&ref);
        return;
    }
    const int V = m->cfg.vocab;
    double worst = 0, worst_tbt = 0;
    int n_prompts = 0, greedy_ok = 0;
    for (int p = 0;; p++) {
        char key[128];
        snprintf(key, sizeof key, "prompt.%d.ids", p);
        const q35_tensor *ids_t = q35_st_find(&ref, key);
        if (!ids_t) break;
        n_prompts++;
        snprintf(key, sizeof key, "prompt.%d.logits", p);
        const q35_tensor *lg_t = q35_st_find(&ref, key);
        snprintf(key, sizeof key, "prompt.%d.greedy", p);
        const q35_tensor *gr_t = q35_st_find(&ref, key);
        CHECK(lg_t && gr_t && lg_t->dtype == Q35_DT_F32 && ids_t->dtype == Q35_DT_I32, "%s: prompt %d reference incomplete", name, p);
        if (!lg_t || !gr_t) continue;
        const int T = (int)ids_t->shape[0], G = (int)gr_t->shape[0];
        const int32_t *ids = ids_t->data, *greedy = gr_t->data;
        const float *ref_logits = lg_t->data;
        CHECK(lg_t->shape[1] == V, "%s: reference vocab %lld != model vocab %d", name, (long long)lg_t->shape[1], V);
        q35_session *s;
        CHECK(q35_session_new(m, T + G + 1, &s) == Q35_OK, "%s", q35_last_error());
        float *all = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
        CHECK(q35_session_eval(s, ids, T, NULL, all) == Q35_OK, "%s", q35_last_error());
        for (int t = 0; t < T; t++) {
            const float *r = ref_logits + (size_t)t * V, *o = all + (size_t)t * V;
            float mx = 1.0f, diff = 0;
            for (int i = 0; i < V; i++) mx = fabsf(r[i]) > mx ? fabsf(r[i]) : mx;
            for (int i = 0; i < V; i++) diff = fabsf(r[i] - o[i]) > diff ? fabsf(r[i] - o[i]) : diff;
            if (diff / mx > worst) worst = diff / mx;
            CHECK(diff <= 1e-4f * mx, "%s prompt %d position %d: max |logit - ref| = %g (largest logit %g)", name, p, t, diff, mx);
        }
        /* Greedy continuation from the prompt's state; where the oracle stored the logits of every
         * greedy step (the decode path), they must match too. */
        snprintf(key, sizeof key, "prompt.%d.greedy_logits", p);
        const q35_tensor *gl_t = q35_st_find(&ref, key);
        const float *gl = gl_t && gl_t->dtype == Q35_DT_F32 && gl_t->shape[1] == V ? gl_t->data : NULL;
        int tok = argmax(all + (size_t)(T - 1) * V, V), ok = 1;
        for (int g = 0; g < G; g++) {
            if (gl && g > 0) {
                const float *r = gl + (size_t)g * V;
                float mx = 1.0f, diff = 0;
                for (int i = 0; i < V; i++) mx = fabsf(r[i]) > mx ? fabsf(r[i]) : mx;
                for (int i = 0; i < V; i++) diff = fabsf(r[i] - last[i]) > diff ? fabsf(r[i] - last[i]) : diff;
                if (diff / mx > worst) worst = diff / mx;
                CHECK(diff <= 1e-4f * mx, "%s prompt %d greedy step %d: max |logit - ref| = %g", name, p, g, diff);
            }
            if (tok != greedy[g]) {
                CHECK(0, "%s prompt %d greedy step %d: got %d, reference %d", name, p, g, tok, greedy[g]);
                ok = 0;
                break;
            }
            if (q35_session_eval(s, &tok, 1, last, NULL)) { CHECK(0, "%s", q35_last_error()); ok = 0; break; }
            tok = argmax(last, V);
        }
        greedy_ok += ok;
        /* The same prompt token by token must give the same logits, within 1e-4 relative to
         * max(1, largest |logit|): the batched path (chunkwise Gated DeltaNet, tiled attention,
         * matrix-matrix products) sums in another order than the token path. */
        q35_session_reset(s);
        float maxd = 0;
        for (int t = 0; t < T; t++) {
            q35_session_eval(s, ids + t, 1, last, NULL);
            float mx = 1.0f, d = 0;
            for (int i = 0; i < V; i++) {
                mx = fabsf(all[(size_t)t * V + i]) > mx ? fabsf(all[(size_t)t * V + i]) : mx;
                d = fabsf(last[i] - all[(size_t)t * V + i]) > d ? fabsf(last[i] - all[(size_t)t * V + i]) : d;
            }
            maxd = d / mx > maxd ? d / mx : maxd;
        }
        if (maxd > worst_tbt) worst_tbt = maxd;
        CHECK(maxd <= 1e-4f, "%s prompt %d: token-by-token differs from batched by %g (relative)", name, p, maxd);
        free(all);
        free(last);
        q35_session_free(s);
    }
    CHECK(n_prompts > 0, "%s: no prompts in the reference", name);
    printf("# %s: %d prompts, worst logit error %.3g (relative to max(1, largest |logit|)), greedy equal on %d/%d, token by token vs "
           "batched %.3g\n", name, n_prompts, worst, greedy_ok, n_prompts, worst_tbt);
    q35_model_free(m);
    q35_st_close(&ref);
}

static char fixtures[32][256];
static int n_fixtures;

static void list_fixtures(void) {
    char d[4096];
    snprintf(d, sizeof d, "%s/models", test_data_dir());
    DIR *dir = opendir(d);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir)) && n_fixtures < 32) {
        if (e->d_name[0] == '.') continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s/reference.safetensors", d, e->d_name);
        if (q35_file_exists(p)) snprintf(fixtures[n_fixtures++], 256, "%s", e->d_name);
    }
    closedir(dir);
    qsort(fixtures, (size_t)n_fixtures, sizeof fixtures[0], (int (*)(const void *, const void *))strcmp);
}

int main(int argc, char **argv) {
    list_fixtures();
    if (n_fixtures == 0) {
        printf("not ok parity (no fixtures under %s/models)\n", test_data_dir());
        return 1;
    }
    for (int i = 0; i < n_fixtures; i++) {
        if (argc > 1 && strcmp(argv[1], fixtures[i]) != 0) continue;
        t_fail_count = 0;
        check_fixture(fixtures[i]);
        printf("%s parity_%s\n", t_fail_count ? "not ok" : "ok", fixtures[i]);
        if (t_fail_count) t_total_failed++;
    }
    TEST_EXIT();
}
