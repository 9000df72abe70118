/* The vision tower and image prompts against transformers (tools/oracle/make_vision_fixtures.py,
 * tests/data/models/tiny-vision/vision_reference.safetensors):
 *   - encoder output for several grids (smaller, larger, non-square against the 8x8 position table)
 *     within 1e-4 of its largest |value|, fed the same pixel_values (regenerated from their seed);
 *   - M-RoPE position ids and rope delta of each prompt equal;
 *   - prompt logits at every position within 1e-4 relative (as tests/test_parity.c) and the greedy
 *     continuation token for token, for several prompt chunk sizes (image runs straddling chunk
 *     boundaries, a last partial chunk made only of image tokens), through one call and through
 *     several calls split between images;
 *   - errors (no vision tower, runs not matching images, context overflow, bad grids) leave the
 *     session unchanged. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/file.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synth.h"
#include "q35.h"
#include "runtime/state.h"
#include "test.h"

static char model_dir[4096];
static q35_st_index ref;
static q35_model *M;
static uint64_t pixel_seed;
static q35_synth_tensor *syn_list; /* [syn_n] synthetic.json's tensors (transformers' save_pretrained order) */
static int syn_n;

/* Regenerate the checkpoint (not committed: the seeded generator rebuilds it bit for bit) into the
 * work directory and check it against synthetic.json's checksums. */
static int prepare(const char *src) {
    char path[4300];
    snprintf(path, sizeof path, "%s/synthetic.json", src);
    cJSON *syn;
    if (q35_json_load_file(path, 1u << 24, &syn)) {
        fprintf(stderr, "  %s\n", q35_last_error());
        return -1;
    }
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(syn, "tensors"), *seed_j = cJSON_GetObjectItemCaseSensitive(syn, "seed");
    const int n = cJSON_GetArraySize(tensors);
    q35_synth_tensor *list = calloc((size_t)n, sizeof *list);
    uint64_t *sums = calloc((size_t)n, sizeof *sums);
    const uint64_t seed = (uint64_t)cJSON_GetNumberValue(seed_j);
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(tensors, i), *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
        snprintf(list[i].name, sizeof list[i].name, "%s", cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring);
        list[i].dtype = strcmp(cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring, "F32") == 0 ? Q35_DT_F32 : Q35_DT_BF16;
        list[i].ndim = cJSON_GetArraySize(sh);
        for (int d = 0; d < list[i].ndim; d++) list[i].shape[d] = (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble;
        sums[i] = strtoull(cJSON_GetObjectItemCaseSensitive(t, "fnv1a64")->valuestring, NULL, 16);
    }
    cJSON_Delete(syn);
    mkdir(test_work_dir(), 0755);
    snprintf(model_dir, sizeof model_dir, "%s/tiny-vision", test_work_dir());
    mkdir(model_dir, 0755);
    char *cfg;
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", src);
    int rc = q35_read_file(path, 1u << 20, &cfg, &len) ? -1 : 0;
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!f || fwrite(cfg, 1, len, f) != len) rc = -1;
    if (f) fclose(f);
    if (!rc) free(cfg);
    snprintf(path, sizeof path, "%s/model.safetensors", model_dir);
    if (!rc && q35_synth_write(path, seed, list, n)) rc = -1;
    q35_st_index st;
    if (!rc && q35_st_open_file(path, &st) == 0) {
        for (int i = 0; i < n; i++) {
            const q35_tensor *t = q35_st_find(&st, list[i].name);
            if (!t || q35_fnv1a64(t->data, t->nbytes, Q35_FNV_OFFSET) != sums[i]) {
                fprintf(stderr, "  %s differs from synthetic.json\n", list[i].name);
                rc = -1;
            }
        }
        q35_st_close(&st);
    } else {
        rc = -1;
    }
    syn_list = list, syn_n = n;
    free(sums);
    return rc;
}

static const q35_tensor *get(const char *fmt, int i) {
    char key[128];
    snprintf(key, sizeof key, fmt, i);
    return q35_st_find(&ref, key);
}

/* pixel_values of reference image i: [t*h*w][patch_dim], uniform in [-1, 1) from the seed. */
static float *pixels(int i, const int32_t *g, int patch_dim) {
    char name[64];
    snprintf(name, sizeof name, "pixels.%d", i);
    const int64_t n = (int64_t)g[0] * g[1] * g[2] * patch_dim;
    float *px = malloc(sizeof(float) * (size_t)n);
    q35_synth_fill(name, pixel_seed, Q35_DT_F32, 0.0f, 1.0f, n, px);
    return px;
}

static float *emb_cache[16];  /* our encoder's output per reference image */
static int emb_tokens[16];

static void test_encoder(void) {
    q35_vision_info vi;
    CHECK(q35_model_has_vision(M, &vi) == 1, "tiny-vision must have a vision tower");
    CHECK(vi.image_token_id == 250 && vi.vision_start_token_id == 248 && vi.vision_end_token_id == 249, "token ids %d %d %d",
          vi.image_token_id, vi.vision_start_token_id, vi.vision_end_token_id);
    CHECK(vi.patch_dim == 1536 && vi.hidden == 64 && vi.merge_size == 2, "vision info");
    double worst = 0;
    int n_img = 0;
    for (int i = 0; i < 16; i++) {
        const q35_tensor *gt = get("image.%d.grid", i), *et = get("image.%d.embeds", i);
        if (!gt || !et) break;
        n_img++;
        const int32_t *g = gt->data;
        const int nt = (int)et->shape[0], H = (int)et->shape[1];
        float *px = pixels(i, g, vi.patch_dim), *out = malloc(sizeof(float) * (size_t)nt * H);
        CHECK(nt == g[0] * g[1] * g[2] / 4 && H == vi.hidden, "image %d shape", i);
        q35_status st = q35_vision_encode(M, px, g[0], g[1], g[2], out);
        CHECK(st == Q35_OK, "%s", q35_last_error());
        const float *r = et->data;
        float mx = 0, d = 0;
        for (int k = 0; k < nt * H; k++) {
            mx = fabsf(r[k]) > mx ? fabsf(r[k]) : mx;
            d = fabsf(r[k] - out[k]) > d ? fabsf(r[k] - out[k]) : d;
        }
        CHECK(d <= 1e-4f * mx, "image %d (grid %dx%dx%d): max |embed - ref| = %g, largest |ref| %g", i, g[0], g[1], g[2], d, mx);
        if (d / mx > worst) worst = d / mx;
        free(px);
        emb_cache[i] = out;
        emb_tokens[i] = nt;
    }
    CHECK(n_img >= 4, "reference has %d images", n_img);
    printf("# encoder: %d images, worst max|diff| / max|ref| = %.3g\n", n_img, worst);
}

/* The images of prompt p as the API takes them (our encoder's embeddings). */
static int prompt_images(int p, q35_image_embeds *im) {
    const q35_tensor *it = get("prompt.%d.images", p);
    const int k = (int)it->shape[0];
    for (int j = 0; j < k; j++) {
        const int i = ((const int32_t *)it->data)[j];
        const int32_t *g = get("image.%d.grid", i)->data;
        im[j] = (q35_image_embeds){emb_cache[i], emb_tokens[i], g[0], g[1], g[2]};
    }
    return k;
}

/* The C list of vision tensors (used by q35 bench) is the checkpoint's: names, dtypes, shapes. */
static void test_synth_list(void) {
    q35_synth_tensor *l = NULL;
    int n = 0, k = 0;
    CHECK(q35_synth_vision_list(&M->cfg.vision, &l, &n) == Q35_OK, "%s", q35_last_error());
    for (int i = 0; i < syn_n; i++) {
        if (strncmp(syn_list[i].name, "model.visual.", 13) != 0) continue;
        int found = 0;
        for (int j = 0; j < n && !found; j++) {
            if (strcmp(l[j].name, syn_list[i].name) != 0) continue;
            found = l[j].dtype == syn_list[i].dtype && l[j].ndim == syn_list[i].ndim;
            for (int d = 0; found && d < l[j].ndim; d++) found = l[j].shape[d] == syn_list[i].shape[d];
        }
        CHECK(found, "%s: not in q35_synth_vision_list with the same dtype and shape", syn_list[i].name);
        k++;
    }
    CHECK(k == n, "checkpoint has %d vision tensors, q35_synth_vision_list %d", k, n);
    free(l);
}

static void test_positions(void) {
    for (int p = 0; get("prompt.%d.ids", p); p++) {
        const q35_tensor *ids_t = get("prompt.%d.ids", p), *pt = get("prompt.%d.position_ids", p), *dt = get("prompt.%d.rope_delta", p);
        const int T = (int)ids_t->shape[0];
        q35_image_embeds im[8];
        prompt_images(p, im);
        int *pos3 = malloc(sizeof(int) * 3 * (size_t)T);
        const long long end = q35_mm_positions(&M->cfg, ids_t->data, T, im, 0, pos3, NULL, NULL);
        const int32_t *rp = pt->data;
        int bad = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < 3; j++) bad += pos3[3 * t + j] != rp[(size_t)j * T + t];
        CHECK(bad == 0, "prompt %d: %d position components differ from get_rope_index", p, bad);
        CHECK(end - T == ((const int32_t *)dt->data)[0], "prompt %d: rope delta %lld, reference %d", p, end - T, ((const int32_t *)dt->data)[0]);
        free(pos3);
    }
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double worst_logit;

/* logits [T][V] against the reference rows from..T-1 */
static void compare_logits(int p, const float *all, int from, int T, int V, const char *how) {
    const float *r0 = get("prompt.%d.logits", p)->data;
    for (int t = from; t < T; t++) {
        const float *r = r0 + (size_t)t * V, *o = all + (size_t)(t - from) * V;
        float mx = 1.0f, d = 0;
        for (int i = 0; i < V; i++) mx = fabsf(r[i]) > mx ? fabsf(r[i]) : mx;
        for (int i = 0; i < V; i++) d = fabsf(r[i] - o[i]) > d ? fabsf(r[i] - o[i]) : d;
        if (d / mx > worst_logit) worst_logit = d / mx;
        CHECK(d <= 1e-4f * mx, "prompt %d (%s) position %d: max |logit - ref| = %g (largest %g)", p, how, t, d, mx);
        if (d > 1e-4f * mx) return;
    }
}

/* Greedy continuation from the session's state (last logits given); argmax_api: through
 * q35_session_eval_argmax instead of the full logits. */
static void check_greedy(q35_session *s, int p, const float *last, int argmax_api, const char *how) {
    const q35_tensor *gt = get("prompt.%d.greedy", p);
    const int G = (int)gt->shape[0], V = M->cfg.vocab;
    const int32_t *want = gt->data;
    float *lg = malloc(sizeof(float) * V);
    int32_t tok = argmax(last, V);
    for (int g = 0; g < G; g++) {
        if (tok != want[g]) {
            CHECK(0, "prompt %d (%s) greedy step %d: got %d, reference %d", p, how, g, tok, want[g]);
            break;
        }
        if (g + 1 == G) break;
        if (argmax_api) {
            CHECK(q35_session_eval_argmax(s, &tok, 1, &tok, NULL) == Q35_OK, "%s", q35_last_error());
        } else {
            CHECK(q35_session_eval(s, &tok, 1, lg, NULL) == Q35_OK, "%s", q35_last_error());
            tok = argmax(lg, V);
        }
    }
    free(lg);
}

static q35_session *new_session(int chunk, int n_ctx) {
    char v[16];
    snprintf(v, sizeof v, "%d", chunk);
    setenv("Q35_PROMPT_CHUNK", v, 1);
    q35_session *s = NULL;
    CHECK(q35_session_new(M, n_ctx, &s) == Q35_OK, "%s", q35_last_error());
    unsetenv("Q35_PROMPT_CHUNK");
    return s;
}

static void test_prompts(void) {
    const int chunks[] = {128, 8, 5, 3, 16, 1};
    const int V = M->cfg.vocab;
    int runs = 0;
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        q35_session *s = new_session(chunks[ci], 96);
        if (!s) return;
        for (int p = 0; get("prompt.%d.ids", p); p++) {
            const q35_tensor *ids_t = get("prompt.%d.ids", p);
            const int T = (int)ids_t->shape[0];
            q35_image_embeds im[8];
            const int k = prompt_images(p, im);
            float *all = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
            char how[64];
            snprintf(how, sizeof how, "chunk %d", chunks[ci]);
            q35_session_reset(s);
            CHECK(q35_session_eval_mm(s, ids_t->data, T, im, k, last, all) == Q35_OK, "%s", q35_last_error());
            compare_logits(p, all, 0, T, V, how);
            for (int i = 0; i < V; i++) CHECK(last[i] == all[(size_t)(T - 1) * V + i], "last logits differ from all_logits");
            check_greedy(s, p, last, (int)(ci % 2), how);
            runs++;
            free(all);
            free(last);
        }
        q35_session_free(s);
    }
    printf("# prompts: %d runs (chunk sizes 128 8 5 3 16 1), worst logit error %.3g (relative to max(1, largest |logit|))\n", runs, worst_logit);
}

/* The prompt in several calls, split at every text token: the rope delta carries across calls. */
static void test_split_calls(void) {
    const int V = M->cfg.vocab, img = M->cfg.image_token_id;
    int splits = 0;
    for (int p = 0; get("prompt.%d.ids", p); p++) {
        const q35_tensor *ids_t = get("prompt.%d.ids", p);
        const int32_t *ids = ids_t->data;
        const int T = (int)ids_t->shape[0];
        q35_image_embeds im[8];
        const int k = prompt_images(p, im);
        q35_session *s = new_session(8, 96);
        if (!s) return;
        float *all = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
        for (int a = 1; a < T; a++) {
            if (ids[a] == img && ids[a - 1] == img) continue; /* a run is never split */
            int k1 = 0;                                     /* images in [0, a) */
            for (int t = 0; t < a; t++) k1 += ids[t] == img && (t == 0 || ids[t - 1] != img);
            q35_session_reset(s);
            CHECK(q35_session_eval_mm(s, ids, a, im, k1, NULL, all) == Q35_OK, "%s", q35_last_error());
            CHECK(q35_session_eval_mm(s, ids + a, T - a, im + k1, k - k1, last, all + (size_t)a * V) == Q35_OK, "%s", q35_last_error());
            char how[64];
            snprintf(how, sizeof how, "split at %d", a);
            compare_logits(p, all, 0, T, V, how);
            splits++;
        }
        check_greedy(s, p, last, 0, "after split calls");
        /* reset forgets the rope delta: a text prompt then equals a fresh session's */
        const int32_t text[4] = {5, 17, 99, 3};
        float *a1 = malloc(sizeof(float) * V);
        q35_session_reset(s);
        CHECK(q35_session_eval(s, text, 4, a1, NULL) == Q35_OK, "%s", q35_last_error());
        q35_session *f = new_session(8, 16);
        CHECK(q35_session_eval(f, text, 4, last, NULL) == Q35_OK, "%s", q35_last_error());
        for (int i = 0; i < V; i++) CHECK(a1[i] == last[i], "after reset, text logits differ from a fresh session's");
        q35_session_free(f);
        free(a1);
        free(all);
        free(last);
        q35_session_free(s);
    }
    printf("# split calls: %d splits equal the reference\n", splits);
}

/* Greedy tokens [G] and the logits after each, from a session holding a prompt (last: its logits). */
static void greedy_run(q35_session *s, const float *last, int G, int32_t *toks, float *lg_all) {
    const int V = M->cfg.vocab;
    int32_t tok = argmax(last, V);
    for (int g = 0; g < G; g++) {
        toks[g] = tok;
        CHECK(q35_session_eval(s, &tok, 1, lg_all + (size_t)g * V, NULL) == Q35_OK, "%s", q35_last_error());
        tok = argmax(lg_all + (size_t)g * V, V);
    }
}

/* Exact-prefix reuse with images: every prompt resumed from a checkpoint (and from a session file)
 * at each grid point, inside images too, gives bitwise the logits and greedy tokens of a fresh
 * evaluation; the same ids with another picture never take the first picture's checkpoint. */
static void test_image_reuse(void) {
    const int V = M->cfg.vocab, img = M->cfg.image_token_id, CH = 8, G = 4;
    int resumes = 0, in_image = 0, text_tail = 0, other = 0;
    char file[4200];
    snprintf(file, sizeof file, "%s/vision-reuse.q35s", test_work_dir());
    for (int p = 0; get("prompt.%d.ids", p); p++) {
        const q35_tensor *ids_t = get("prompt.%d.ids", p);
        const int32_t *ids = ids_t->data;
        const int T = (int)ids_t->shape[0];
        q35_image_embeds im[8];
        const int k = prompt_images(p, im);
        if (k == 0 || T <= CH) continue;
        float *fresh = malloc(sizeof(float) * (size_t)T * V), *out = malloc(sizeof(float) * (size_t)T * V);
        float *ref_g = malloc(sizeof(float) * (size_t)G * V), *out_g = malloc(sizeof(float) * (size_t)G * V);
        int32_t ref_t[4], out_t[4];
        uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)T);
        q35_session *f = new_session(CH, 96), *s = new_session(CH, 96);
        q35_prefix_cache *cache = NULL;
        CHECK(q35_prefix_cache_new(M, 64u << 20, &cache) == Q35_OK, "%s", q35_last_error());
        /* reuse off: the whole prompt in one call */
        CHECK(q35_session_eval_mm(f, ids, T, im, k, NULL, fresh) == Q35_OK, "%s", q35_last_error());
        greedy_run(f, fresh + (size_t)(T - 1) * V, G, ref_t, ref_g);
        CHECK(q35_mm_keys(M, ids, T, im, k, keys) == Q35_OK, "%s", q35_last_error());
        for (int g = CH; g < T; g += CH) {
            /* a first request evaluates up to the grid point g and checkpoints it */
            q35_session_reset(s);
            CHECK(q35_session_eval_mm_rest(s, ids, T, im, k, g, NULL, NULL) == Q35_OK, "%s", q35_last_error());
            CHECK(q35_session_exact_pos(s) == g, "prompt %d: exact point %d after evaluating to %d", p, q35_session_exact_pos(s), g);
            CHECK(q35_prefix_cache_save(cache, s) == Q35_OK, "%s", q35_last_error());
            CHECK(q35_session_save(s, file) == Q35_OK, "%s", q35_last_error());
            for (int from_file = 0; from_file < 2; from_file++) {
                /* a later request with the same prompt resumes at g */
                q35_session_reset(s);
                int ready = -1;
                if (from_file) {
                    CHECK(q35_session_load(s, file) == Q35_OK, "%s", q35_last_error());
                    ready = q35_session_pos(s);
                } else {
                    CHECK(q35_prefix_cache_restore_keys(cache, s, keys, T, &ready) == Q35_OK, "%s", q35_last_error());
                }
                CHECK(ready == g, "prompt %d: resumed at %d, the checkpoint is at %d", p, ready, g);
                if (ready != g) continue;
                int tail_text = 1;
                for (int t = g; t < T; t++) tail_text &= ids[t] != img;
                if (tail_text && !from_file) { /* after every image: plain text evaluation, placed by the restored rope delta */
                    CHECK(q35_session_eval(s, ids + g, T - g, NULL, out) == Q35_OK, "%s", q35_last_error());
                    text_tail++;
                } else {
                    CHECK(q35_session_eval_mm_rest(s, ids, T, im, k, T, NULL, out) == Q35_OK, "%s", q35_last_error());
                }
                in_image += ids[g] == img && ids[g - 1] == img;
                CHECK(!memcmp(out, fresh + (size_t)g * V, sizeof(float) * (size_t)(T - g) * V),
                      "prompt %d resumed at %d (%s): logits differ from the fresh evaluation", p, g, from_file ? "session file" : "checkpoint");
                greedy_run(s, out + (size_t)(T - g - 1) * V, G, out_t, out_g);
                CHECK(!memcmp(out_t, ref_t, sizeof ref_t) && !memcmp(out_g, ref_g, sizeof(float) * (size_t)G * V),
                      "prompt %d resumed at %d: greedy continuation differs", p, g);
                resumes++;
            }
        }
        /* The same ids with another picture (the first image's embeddings changed in one value):
         * no checkpoint past the start of that image matches, and the answer is the fresh one. */
        int first = 0;
        while (ids[first] != img) first++;
        const size_t ne = (size_t)im[0].n_tokens * M->cfg.hidden;
        float *alt = malloc(sizeof(float) * ne);
        memcpy(alt, im[0].embeds, sizeof(float) * ne);
        alt[ne / 2] += 0.5f;
        q35_image_embeds im2[8];
        memcpy(im2, im, sizeof im2);
        im2[0].embeds = alt;
        uint64_t *keys2 = malloc(sizeof(uint64_t) * (size_t)T);
        CHECK(q35_mm_keys(M, ids, T, im2, k, keys2) == Q35_OK, "%s", q35_last_error());
        CHECK(keys2[first] != keys[first] && keys2[first] >> 63, "prompt %d: another picture has the same key", p);
        q35_session_reset(s);
        int ready = -1;
        CHECK(q35_prefix_cache_restore_keys(cache, s, keys2, T, &ready) == Q35_OK, "%s", q35_last_error());
        CHECK(ready <= first, "prompt %d: another picture resumed at %d, past its first image token %d", p, ready, first);
        CHECK(q35_session_eval_mm_rest(s, ids, T, im2, k, T, NULL, out) == Q35_OK, "%s", q35_last_error());
        q35_session_reset(f);
        CHECK(q35_session_eval_mm(f, ids, T, im2, k, NULL, fresh) == Q35_OK, "%s", q35_last_error());
        CHECK(ready >= 0 && !memcmp(out, fresh + (size_t)ready * V, sizeof(float) * (size_t)(T - ready) * V),
              "prompt %d with another picture: logits differ from its fresh evaluation", p);
        /* a session holding the first picture refuses to continue the second's prompt */
        q35_session_reset(s);
        CHECK(q35_session_eval_mm_rest(s, ids, T, im, k, T - 1, NULL, NULL) == Q35_OK, "%s", q35_last_error());
        CHECK(q35_session_eval_mm_rest(s, ids, T, im2, k, T, NULL, NULL) == Q35_ERR_ARG, "a session of another picture must not continue");
        other++;
        free(alt), free(keys2), free(keys), free(fresh), free(out), free(ref_g), free(out_g);
        q35_prefix_cache_free(cache);
        q35_session_free(f), q35_session_free(s);
    }
    remove(file);
    CHECK(resumes > 0 && in_image > 0 && other > 0, "resumes %d (inside an image %d), other pictures %d", resumes, in_image, other);
    printf("# image reuse: %d resumes bitwise equal (%d inside an image, %d text tails by the restored rope delta), %d prompts with another picture\n",
           resumes, in_image, text_tail, other);
}

static void test_expand(void) {
    /* prompt 1 with each image run collapsed to one token expands back to the reference ids */
    const q35_tensor *ids_t = get("prompt.%d.ids", 1);
    const int32_t *ids = ids_t->data, img = M->cfg.image_token_id;
    const int T = (int)ids_t->shape[0];
    int32_t *col = malloc(sizeof(int32_t) * T);
    int n = 0, counts[8], k = 0;
    for (int t = 0; t < T; t++) {
        if (ids[t] == img && t > 0 && ids[t - 1] == img) {
            counts[k - 1]++;
            continue;
        }
        if (ids[t] == img) counts[k++] = 1;
        col[n++] = ids[t];
    }
    int32_t *out = NULL;
    int n_out = 0;
    CHECK(q35_expand_image_tokens(M, col, n, counts, k, &out, &n_out) == Q35_OK, "%s", q35_last_error());
    CHECK(n_out == T && out && memcmp(out, ids, sizeof(int32_t) * T) == 0, "expanded prompt differs from the reference ids");
    free(out);
    CHECK(q35_expand_image_tokens(M, col, n, counts, k - 1, &out, &n_out) == Q35_ERR_ARG && !out, "one image too few must fail");
    CHECK(q35_expand_image_tokens(M, col, n, counts, k + 1, &out, &n_out) == Q35_ERR_ARG && !out, "one image too many must fail");
    free(col);
}

static void test_errors(void) {
    const q35_tensor *ids_t = get("prompt.%d.ids", 0);
    const int32_t *ids = ids_t->data;
    const int T = (int)ids_t->shape[0];
    q35_image_embeds im[8];
    const int k = prompt_images(0, im);
    q35_session *s = new_session(8, 64);
    if (!s) return;
    const int32_t pre[3] = {1, 2, 3};
    CHECK(q35_session_eval(s, pre, 3, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    /* too few / too many images, a run of the wrong length, a grid that does not give n_tokens */
    CHECK(q35_session_eval_mm(s, ids, T, im, 0, NULL, NULL) == Q35_ERR_ARG, "no images for an image run must fail");
    q35_image_embeds two[2] = {im[0], im[0]};
    CHECK(q35_session_eval_mm(s, ids, T, two, 2, NULL, NULL) == Q35_ERR_ARG, "an extra image must fail");
    q35_image_embeds wrong = im[0];
    wrong.n_tokens -= 1, wrong.grid_w -= 2;
    CHECK(q35_session_eval_mm(s, ids, T, &wrong, 1, NULL, NULL) == Q35_ERR_ARG, "a run longer than the image must fail");
    wrong = im[0];
    wrong.grid_h = 3;
    CHECK(q35_session_eval_mm(s, ids, T, &wrong, 1, NULL, NULL) == Q35_ERR_ARG, "an odd grid must fail");
    printf("# error message: %s\n", q35_last_error());
    CHECK(q35_session_pos(s) == 3, "refused prompts must leave the session unchanged (pos %d)", q35_session_pos(s));
    /* more tokens than the context holds */
    q35_session *small = new_session(8, T - 1);
    CHECK(q35_session_eval_mm(small, ids, T, im, k, NULL, NULL) == Q35_ERR_CONTEXT, "a prompt over the context must fail");
    CHECK(q35_session_pos(small) == 0, "and leave the session unchanged");
    q35_session_free(small);
    /* the session still works after the refusals: the prompt after 3 text tokens */
    CHECK(q35_session_eval_mm(s, ids, T, im, k, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    q35_session_free(s);
    /* bad grids for the encoder */
    float *px = calloc((size_t)4 * 6 * 1536, sizeof(float)), *out = calloc((size_t)6 * 64, sizeof(float));
    CHECK(q35_vision_encode(M, px, 1, 3, 6, out) == Q35_ERR_ARG, "odd grid height must fail");
    CHECK(q35_vision_encode(M, px, 0, 4, 6, out) == Q35_ERR_ARG, "zero frames must fail");
    CHECK(q35_vision_encode(M, NULL, 1, 4, 6, out) == Q35_ERR_ARG, "NULL pixels must fail");
    /* a model without a vision tower */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/models/narrow8", test_data_dir());
    q35_model *tm = NULL;
    CHECK(q35_model_load(dir, &tm) == Q35_OK, "%s", q35_last_error());
    if (tm) {
        CHECK(q35_model_has_vision(tm, NULL) == 0, "narrow8 has no vision tower");
        CHECK(q35_vision_encode(tm, px, 1, 4, 6, out) == Q35_ERR_UNSUPPORTED, "encode without a tower must fail");
        printf("# error message: %s\n", q35_last_error());
        q35_session *ts = NULL;
        CHECK(q35_session_new(tm, 64, &ts) == Q35_OK, "%s", q35_last_error());
        CHECK(q35_session_eval_mm(ts, ids, T, im, k, NULL, NULL) == Q35_ERR_UNSUPPORTED, "images without a tower must fail");
        CHECK(q35_session_pos(ts) == 0, "and leave the session unchanged");
        q35_session_free(ts);
        q35_model_free(tm);
    }
    free(px);
    free(out);
}

/* Run a shell command; its stdout (at most cap-1 bytes) in out; returns the exit status. */
static int run_cmd(const char *cmd, char *out, size_t cap) {
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* q35 generate --image on the committed PNG: decoding, preprocessing at its own size (no resampling),
 * encoding and the expanded prompt give transformers' greedy continuation. */
/* A preprocessor_config.json whose patch sizes disagree with the vision tower is refused (its pixel
 * rows would have the wrong width); the defaults (16, 2, 2) match the tower. */
static void test_proc_check(void) {
    if (!M) return;
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/proc-check", test_work_dir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/preprocessor_config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "%s", path);
    if (!f) return;
    fputs("{\"patch_size\": 14, \"temporal_patch_size\": 2, \"merge_size\": 2}\n", f);
    fclose(f);
    q35_image_proc *p = NULL;
    CHECK(q35_image_proc_load(NULL, &p) == Q35_OK && q35_image_proc_check(p, M) == Q35_OK, "defaults: %s", q35_last_error());
    q35_image_proc_free(p);
    p = NULL;
    CHECK(q35_image_proc_load(dir, &p) == Q35_OK, "%s", q35_last_error());
    CHECK(p && q35_image_proc_check(p, M) == Q35_ERR_SHAPE && strstr(q35_last_error(), "patch_size 14"), "mismatch: %s", q35_last_error());
    q35_image_proc_free(p);
}

static void test_cli_image(void) {
    const char *bin = getenv("Q35_BIN") ? getenv("Q35_BIN") : "build/q35";
    const q35_tensor *pt = q35_st_find(&ref, "cli.prompt_ids"), *gt = q35_st_find(&ref, "cli.greedy");
    CHECK(pt && gt, "vision_reference.safetensors has no cli.* entries");
    if (!pt || !gt) return;
    char ids[512] = "", cmd[8192], out[4096];
    for (int i = 0; i < (int)pt->shape[0]; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", ((const int32_t *)pt->data)[i]);
    char png[4200];
    snprintf(png, sizeof png, "%s/models/tiny-vision/cli_image.png", test_data_dir());
    snprintf(cmd, sizeof cmd, "%s generate -m %s --image %s --image-size 96x64 --prompt-ids %s --print-ids --greedy -n %d -q", bin,
             model_dir, png, ids, (int)gt->shape[0]);
    CHECK(run_cmd(cmd, out, sizeof out) == 0, "%s failed", cmd);
    char want[512] = "";
    for (int i = 0; i < (int)gt->shape[0]; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? " " : "", ((const int32_t *)gt->data)[i]);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' ')) out[--n] = 0;
    CHECK(strcmp(out, want) == 0, "q35 generate --image printed '%s', transformers '%s'", out, want);
    printf("# cli: q35 generate --image cli_image.png -> %s (reference %s)\n", out, want);
    /* errors: a missing file, a prompt without an image token, a model without a vision tower */
    snprintf(cmd, sizeof cmd, "%s generate -m %s --image %s/nonexistent.png --prompt-ids %s --print-ids -n 2 2>&1", bin, model_dir,
             test_work_dir(), ids);
    CHECK(run_cmd(cmd, out, sizeof out) == 1 && strstr(out, "nonexistent.png"), "missing image: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s generate -m %s --image %s --prompt-ids 1,2,3 --print-ids -n 2 2>&1", bin, model_dir, png);
    CHECK(run_cmd(cmd, out, sizeof out) == 1 && strstr(out, "image token"), "no image token: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s generate -m %s/models/narrow8 --image %s --prompt-ids 1,2,3 --print-ids -n 2 2>&1", bin, test_data_dir(),
             png);
    CHECK(run_cmd(cmd, out, sizeof out) == 1 && strstr(out, "no vision tower"), "model without a tower: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s generate -m %s --image %s --image-size 96 --prompt-ids %s -n 2 2>&1", bin, model_dir, png, ids);
    CHECK(run_cmd(cmd, out, sizeof out) == 2 && strstr(out, "--image-size"), "bad --image-size: '%s'", out);
}

/* The talker checkpoint (a real tokenizer and chat template, a random tiny vision tower): the prompt
 * q35 renders and tokenizes for an image question equals transformers', and q35 generate --image /
 * q35 chat with /image answer as transformers does. */
static void test_cli_talker(void) {
    const char *bin = getenv("Q35_BIN") ? getenv("Q35_BIN") : "build/q35";
    const q35_tensor *pt = q35_st_find(&ref, "talker.prompt_ids"), *gt = q35_st_find(&ref, "talker.greedy");
    CHECK(pt && gt, "vision_reference.safetensors has no talker.* entries");
    if (!pt || !gt) return;
    char talker[4200], png[4200], cmd[12000], out[4096];
    snprintf(talker, sizeof talker, "%s/models/talker", test_data_dir());
    snprintf(png, sizeof png, "%s/models/tiny-vision/cli_image.png", test_data_dir());
    /* the prompt */
    q35_tokenizer *tok = NULL;
    CHECK(q35_tokenizer_load(talker, &tok) == Q35_OK, "%s", q35_last_error());
    if (!tok) return;
    q35_chat_opts o = {1, -1, 0, 0};
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(q35_chat_render("[{\"role\": \"user\", \"content\": [{\"type\": \"image\"}, {\"type\": \"text\", \"text\": \"What is in the picture?\"}]}]",
                          NULL, &o, &text) == Q35_OK, "%s", q35_last_error());
    if (text) CHECK(q35_tokenize(tok, text, strlen(text), 1, &ids, &n) == Q35_OK, "%s", q35_last_error());
    CHECK(n == (size_t)pt->shape[0] && ids && memcmp(ids, pt->data, n * sizeof(int32_t)) == 0, "rendered prompt differs from transformers'");
    free(text);
    free(ids);
    /* the answer: the greedy ids up to the first stop (<|im_end|> 3002, <|endoftext|> 3000) */
    const int32_t *g = gt->data;
    int G = 0;
    while (G < (int)gt->shape[0] && g[G] != 3002 && g[G] != 3000) G++;
    char want[512] = "";
    for (int i = 0; i < G; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? " " : "", g[i]);
    snprintf(cmd, sizeof cmd, "%s generate -m %s --image %s --image-size 96x64 -p 'What is in the picture?' --greedy -n 12 --print-ids -q", bin,
             talker, png);
    CHECK(run_cmd(cmd, out, sizeof out) == 0, "%s failed", cmd);
    size_t k = strlen(out);
    while (k && (out[k - 1] == '\n' || out[k - 1] == ' ')) out[--k] = 0;
    CHECK(strcmp(out, want) == 0, "q35 generate -m talker --image printed '%s', transformers '%s'", out, want);
    /* chat: /image attaches it to the next message; the answer is the same text */
    char *answer = NULL;
    CHECK(q35_detokenize(tok, g, (size_t)G, &answer) == Q35_OK, "%s", q35_last_error());
    char in[4300];
    snprintf(in, sizeof in, "%s/chat-image.txt", test_work_dir());
    FILE *f = fopen(in, "w");
    if (f) {
        fprintf(f, "/image %s\nWhat is in the picture?\n/quit\n", png);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s chat -m %s --image-size 96x64 --greedy -n 12 -q < %s 2>/dev/null", bin, talker, in);
    CHECK(run_cmd(cmd, out, sizeof out) == 0, "%s failed", cmd);
    k = strlen(out);
    while (k && out[k - 1] == '\n') out[--k] = 0;
    CHECK(answer && strcmp(out, answer) == 0, "q35 chat with /image answered '%s', transformers '%s'", out, answer ? answer : "");
    printf("# talker: q35 generate --image and q35 chat /image answer '%s' as transformers does\n", answer ? answer : "");
    free(answer);
    q35_tokenizer_free(tok);
}

int main(void) {
    char src[4096], path[4200];
    snprintf(src, sizeof src, "%s/models/tiny-vision", test_data_dir());
    snprintf(path, sizeof path, "%s/vision_reference.safetensors", src);
    int ok = prepare(src) == 0 && q35_st_open_file(path, &ref) == 0;
    if (ok) {
        const q35_tensor *g = q35_st_find(&ref, "image.0.grid");
        ok = g != NULL;
        pixel_seed = 3510; /* make_vision_fixtures.py SEED (also the weights' seed in synthetic.json) */
    }
    if (ok && q35_model_load(model_dir, &M) != Q35_OK) {
        fprintf(stderr, "  %s\n", q35_last_error());
        ok = 0;
    }
    if (!ok) {
        printf("not ok vision_fixture (%s)\n", q35_last_error());
        return 1;
    }
    RUN(test_encoder);
    RUN(test_synth_list);
    RUN(test_positions);
    RUN(test_prompts);
    RUN(test_split_calls);
    RUN(test_image_reuse);
    RUN(test_expand);
    RUN(test_errors);
    RUN(test_proc_check);
    RUN(test_cli_image);
    RUN(test_cli_talker);
    for (int i = 0; i < 16; i++) free(emb_cache[i]);
    q35_model_free(M);
    q35_st_close(&ref);
    free(syn_list);
    TEST_EXIT();
}
