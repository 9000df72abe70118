/* GGUF: llama.cpp's Qwen3.5 files (tests/data/gguf, made by tools/oracle/make_gguf_fixtures.py with the
 * converter's transforms) read to the values gguf-py dequantizes; the BF16 file (and an F32 copy) give
 * the logits of the safetensors checkpoint it came from and of the HF reference; the V-head reorder is
 * undone; q35's writer round-trips every fixture and writes what the converter writes; bad files fail
 * with the right code and a one-line message naming the problem. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "formats/gguf.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/model_gguf.h"
#include "model/synth.h"
#include "q35.h"
#include "test.h"

static char data_dir[1024], work[1024];

static const char *gguf_path(const char *name) {
    static char p[2][2048];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", data_dir, name);
    return p[k];
}

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static unsigned char *slurp(const char *path, size_t *n) {
    char *b;
    if (q35_read_file(path, 1u << 28, &b, n)) return NULL;
    return (unsigned char *)b;
}

/* ---------------------------------------------------------------- reading the fixtures */

/* Every tensor of NAME.gguf: type and shape as gguf-py wrote them, values (dequantized by q35) equal
 * bit for bit to gguf-py's dequantization (hash in NAME.json). */
static void check_values(const char *name) {
    char gp[2048], jp[2048];
    snprintf(gp, sizeof gp, "%s/%s.gguf", data_dir, name);
    snprintf(jp, sizeof jp, "%s/%s.json", data_dir, name);
    cJSON *side;
    if (q35_json_load_file(jp, 1u << 24, &side)) { CHECK(0, "%s", q35_last_error()); return; }
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(side, "tensors");
    q35_gguf g;
    if (q35_gguf_open(gp, 0, &g)) { CHECK(0, "%s", q35_last_error()); cJSON_Delete(side); return; }
    CHECK(g.n_tensors == cJSON_GetArraySize(tensors), "%s: %d tensors, gguf-py wrote %d", name, g.n_tensors, cJSON_GetArraySize(tensors));
    CHECK(g.version == 3 && g.alignment == 32, "%s: version %u alignment %zu", name, g.version, g.alignment);
    int bad = 0;
    for (int i = 0; i < g.n_tensors && bad < 5; i++) {
        const q35_gguf_tensor *t = &g.tensors[i];
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(tensors, t->t.name);
        if (!e) { CHECK(0, "%s: tensor %s not in the sidecar", name, t->t.name); bad++; continue; }
        const char *type = cJSON_GetObjectItemCaseSensitive(e, "type")->valuestring;
        CHECK(strcmp(type, q35_ggml_type_name(t->ggml_type)) == 0, "%s: %s type %s, gguf-py %s", name, t->t.name, q35_ggml_type_name(t->ggml_type), type);
        const cJSON *ne = cJSON_GetObjectItemCaseSensitive(e, "ne");
        int ok = cJSON_GetArraySize(ne) == t->n_dims;
        for (int d = 0; ok && d < t->n_dims; d++) ok = (int64_t)cJSON_GetArrayItem(ne, d)->valuedouble == t->ne[d];
        CHECK(ok, "%s: %s shape differs from gguf-py's", name, t->t.name);
        /* q35 order: shape[0] = ne[n-1] */
        CHECK(t->t.shape[t->t.ndim - 1] == t->ne[0], "%s: %s: q35 shape must be ne reversed", name, t->t.name);
        const int64_t cols = t->t.shape[t->t.ndim - 1], rows = q35_tensor_numel(&t->t) / cols;
        float *row = malloc(sizeof(float) * (size_t)cols);
        uint64_t h = Q35_FNV_OFFSET;
        for (int64_t r = 0; r < rows; r++) {
            q35_dequantize_row(t->t.dtype, (const unsigned char *)t->t.data + (size_t)r * q35_row_bytes(t->t.dtype, cols), row, cols);
            h = q35_fnv1a64(row, sizeof(float) * (size_t)cols, h);
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        const char *want = cJSON_GetObjectItemCaseSensitive(e, "fnv1a64_f32")->valuestring;
        if (strcmp(hex, want) != 0) {
            q35_dequantize_row(t->t.dtype, t->t.data, row, cols);
            const cJSON *first = cJSON_GetObjectItemCaseSensitive(e, "first");
            CHECK(0, "%s: %s (%s) dequantized to hash %s, gguf-py %s; first value %.9g vs %.9g", name, t->t.name, type, hex, want, row[0],
                  cJSON_GetArrayItem(first, 0)->valuedouble);
            bad++;
        }
        free(row);
    }
    q35_gguf_close(&g);
    cJSON_Delete(side);
}

static void test_fixture_values(void) {
    const char *names[] = {"hv-gt-hk.bf16", "hv-gt-hk.q8_0", "hv-gt-hk.q4_0", "narrow8.q4_0", "kquants"};
    for (int i = 0; i < 5; i++) check_values(names[i]);
}

/* The GGUF config equals the safetensors config (MTP layers skipped, tie from a missing output). */
static void same_config(const q35_config *a, const q35_config *b, const char *what) {
    CHECK(a->hidden == b->hidden && a->n_layers == b->n_layers && a->intermediate == b->intermediate && a->vocab == b->vocab, "%s: sizes", what);
    CHECK(a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim, "%s: attention heads", what);
    CHECK(a->rms_eps == b->rms_eps && a->rope_theta == b->rope_theta && a->rope_dim == b->rope_dim, "%s: eps %g/%g theta %g/%g rope %d/%d", what,
          a->rms_eps, b->rms_eps, a->rope_theta, b->rope_theta, a->rope_dim, b->rope_dim);
    CHECK(memcmp(a->mrope_section, b->mrope_section, sizeof a->mrope_section) == 0 && a->mrope_interleaved == b->mrope_interleaved, "%s: mrope", what);
    CHECK(a->lin_k_heads == b->lin_k_heads && a->lin_v_heads == b->lin_v_heads && a->lin_k_dim == b->lin_k_dim && a->lin_v_dim == b->lin_v_dim &&
              a->conv_kernel == b->conv_kernel, "%s: linear attention", what);
    CHECK(memcmp(a->layer_full, b->layer_full, (size_t)a->n_layers) == 0 && a->n_full == b->n_full, "%s: layer types", what);
    CHECK(a->tie_embeddings == b->tie_embeddings && a->attn_output_gate == b->attn_output_gate, "%s: tie %d/%d", what, a->tie_embeddings, b->tie_embeddings);
}

static void test_config(void) {
    const char *files[] = {"hv-gt-hk.bf16.gguf", "hv-gt-hk.q4_0.gguf", "narrow8.q4_0.gguf"};
    const char *models[] = {"hv-gt-hk", "hv-gt-hk", "narrow8"};
    for (int i = 0; i < 3; i++) {
        q35_gguf g;
        q35_config a, b;
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), models[i]);
        if (q35_gguf_open(gguf_path(files[i]), 0, &g)) { CHECK(0, "%s", q35_last_error()); continue; }
        CHECK(q35_gguf_config(&g, &a) == Q35_OK, "%s", q35_last_error());
        CHECK(q35_config_load(dir, &b) == Q35_OK, "%s", q35_last_error());
        same_config(&a, &b, files[i]);
        if (i == 1) {
            int64_t blocks = 0;
            q35_gguf_get_int(&g, "qwen35.block_count", 1, 0, 100, &blocks);
            CHECK(blocks == a.n_layers + 1 && q35_gguf_find_tensor(&g, "blk.4.nextn.eh_proj.weight"), "the MTP block must be skipped");
        }
        q35_gguf_close(&g);
    }
}

/* ---------------------------------------------------------------- logits */

/* All-position logits of prompt p of models/<ref>/reference.safetensors (malloc'd [T][V]; NULL when
 * there is no prompt p). */
static float *logits_of(const char *path, const char *ref_model, int p, int *T_out, int *V_out) {
    char rp[2048];
    snprintf(rp, sizeof rp, "%s/models/%s/reference.safetensors", test_data_dir(), ref_model);
    q35_st_index ref;
    if (q35_st_open_file(rp, &ref)) { CHECK(0, "%s", q35_last_error()); return NULL; }
    char key[64];
    snprintf(key, sizeof key, "prompt.%d.ids", p);
    const q35_tensor *ids = q35_st_find(&ref, key);
    if (!ids) {
        q35_st_close(&ref);
        return NULL;
    }
    q35_model *m;
    if (q35_model_load(path, &m)) {
        CHECK(0, "%s: %s", path, q35_last_error());
        q35_st_close(&ref);
        return NULL;
    }
    const int T = (int)ids->shape[0], V = m->cfg.vocab;
    float *all = malloc(sizeof(float) * (size_t)T * V);
    q35_session *s;
    CHECK(q35_session_new(m, T + 1, &s) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_eval(s, ids->data, T, NULL, all) == Q35_OK, "%s", q35_last_error());
    q35_session_free(s);
    q35_model_free(m);
    q35_st_close(&ref);
    *T_out = T;
    *V_out = V;
    return all;
}

/* max |a - b| over [n], and max |b| (at least 1). */
static double max_diff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0, mx = 1;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        d = x > d ? x : d;
        mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
    }
    *scale = mx;
    return d;
}

static void compare_logits(const char *gguf, const char *model, double tol) {
    char dir[2048], rp[2100];
    snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), model);
    snprintf(rp, sizeof rp, "%s/reference.safetensors", dir);
    q35_st_index ref;
    if (q35_st_open_file(rp, &ref)) { CHECK(0, "%s", q35_last_error()); return; }
    double worst = 0, worst_ref = 0, scale = 1;
    int p = 0, T1, V1, T2, V2;
    for (;; p++) {
        float *a = logits_of(gguf, model, p, &T1, &V1), *b = a ? logits_of(dir, model, p, &T2, &V2) : NULL;
        if (!a) break;
        if (b && T1 == T2 && V1 == V2) {
            double s1, d = max_diff(a, b, (size_t)T1 * V1, &s1);
            CHECK(d <= tol * s1, "%s prompt %d: logits differ from the safetensors load by %g (limit %g x largest |logit| %g)", gguf, p, d, tol, s1);
            worst = d > worst ? d : worst;
            scale = s1 > scale ? s1 : scale;
            char key[64];
            snprintf(key, sizeof key, "prompt.%d.logits", p);
            const q35_tensor *lg = q35_st_find(&ref, key);
            double s2, d2 = max_diff(a, lg->data, (size_t)T1 * V1, &s2);
            CHECK(d2 <= 1e-4 * s2, "%s prompt %d: logits differ from the HF reference by %g", gguf, p, d2);
            worst_ref = d2 / s2 > worst_ref ? d2 / s2 : worst_ref;
        } else {
            CHECK(0, "%s: could not evaluate prompt %d", gguf, p);
        }
        free(a);
        free(b);
    }
    CHECK(p > 0, "%s: no prompts", model);
    printf("# %s: %d prompts, max |logit - safetensors logit| %.3g (largest |logit| %.3g), vs HF reference %.3g relative\n", gguf, p, worst,
           scale, worst_ref);
    q35_st_close(&ref);
}

/* hv-gt-hk has Hv > Hk: the GGUF load keeps the tiled V-head order, so out_proj sums its columns in
 * another order than the safetensors load: ~2e-6 relative of the largest logit (measured), not bit-equal. With
 * Hv == Hk (0.8B, 2B) nothing is reordered and the logits are equal (test_roundtrip). */
#define TILED_TOL 1e-5
static void test_parity_bf16(void) { compare_logits(gguf_path("hv-gt-hk.bf16.gguf"), "hv-gt-hk", TILED_TOL); }

/* The BF16 file with every BF16 tensor widened to F32 (values unchanged), written by q35's writer. */
static void test_parity_f32(void) {
    q35_gguf g;
    if (q35_gguf_open(gguf_path("hv-gt-hk.bf16.gguf"), 0, &g)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_gguf_writer *w;
    q35_gguf_writer_new(&w);
    for (int i = 0; i < g.n_kv; i++) CHECK(q35_gguf_copy_kv(w, &g.kv[i]) == Q35_OK, "%s", q35_last_error());
    float **bufs = calloc((size_t)g.n_tensors, sizeof *bufs);
    for (int i = 0; i < g.n_tensors; i++) {
        q35_tensor t = g.tensors[i].t;
        if (t.dtype == Q35_DT_BF16) {
            int64_t n = q35_tensor_numel(&t);
            bufs[i] = malloc(sizeof(float) * (size_t)n);
            for (int64_t k = 0; k < n; k++) bufs[i][k] = q35_tensor_get_f32(&t, k);
            t.dtype = Q35_DT_F32;
            t.data = bufs[i];
            t.nbytes = sizeof(float) * (size_t)n;
        }
        CHECK(q35_gguf_add_tensor(w, g.tensors[i].t.name, &t) == Q35_OK, "%s", q35_last_error());
    }
    char out[2100];
    snprintf(out, sizeof out, "%s/hv-gt-hk.f32.gguf", work);
    CHECK(q35_gguf_write(w, out) == Q35_OK, "%s", q35_last_error());
    q35_gguf_writer_free(w);
    for (int i = 0; i < g.n_tensors; i++) free(bufs[i]);
    free(bufs);
    q35_gguf_close(&g);
    compare_logits(out, "hv-gt-hk", TILED_TOL);
}

/* The GGUF load keeps llama.cpp's tiled V-head order (v_tiled): position p of every per-value-head
 * tensor holds HF head (p % Hk)*r + p / Hk of the safetensors load; everything else is equal. */
static void test_v_heads(void) {
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/models/hv-gt-hk", test_data_dir());
    q35_model *a = NULL, *b = NULL;
    CHECK(q35_model_load(gguf_path("hv-gt-hk.bf16.gguf"), &a) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_model_load(dir, &b) == Q35_OK, "%s", q35_last_error());
    if (!a || !b) goto done;
    const q35_config *c = &a->cfg;
    const int Hk = c->lin_k_heads, Hv = c->lin_v_heads, r = Hv / Hk, dv = c->lin_v_dim, kd = Hk * c->lin_k_dim, K = c->conv_kernel;
    CHECK(Hv > Hk, "the fixture must have Hv > Hk");
    for (int il = 0; il < c->n_layers; il++) {
        const q35_layer_weights *x = &a->layers[il], *y = &b->layers[il];
        CHECK(memcmp(x->in_norm, y->in_norm, sizeof(float) * (size_t)c->hidden) == 0, "layer %d: input norm (1 + w)", il);
        CHECK(memcmp(x->mlp_down.data, y->mlp_down.data, x->mlp_down.nbytes) == 0, "layer %d: ffn_down", il);
        if (x->is_full) {
            CHECK(memcmp(x->attn.q.data, y->attn.q.data, x->attn.q.nbytes) == 0, "layer %d: attn_q (query | gate rows)", il);
            continue;
        }
        const q35_gdn_weights *p = &x->gdn, *q = &y->gdn;
        CHECK(p->v_tiled == 1 && q->v_tiled == 0, "layer %d: v_tiled %d/%d", il, p->v_tiled, q->v_tiled);
        const size_t rb = q35_row_bytes(p->in_qkv.dtype, c->hidden), cb = q35_row_bytes(p->out.dtype, dv), orb = q35_row_bytes(p->out.dtype, (int64_t)Hv * dv);
        const unsigned char *P, *Q;
        CHECK(memcmp(p->in_qkv.data, q->in_qkv.data, 2 * (size_t)kd * rb) == 0, "layer %d: q/k rows", il);
        for (int pos = 0; pos < Hv; pos++) {
            const int h = (pos % Hk) * r + pos / Hk;
            P = (const unsigned char *)p->in_qkv.data + (2 * (size_t)kd + (size_t)pos * dv) * rb;
            Q = (const unsigned char *)q->in_qkv.data + (2 * (size_t)kd + (size_t)h * dv) * rb;
            CHECK(memcmp(P, Q, (size_t)dv * rb) == 0, "layer %d: V rows of position %d != HF head %d", il, pos, h);
            CHECK(memcmp((const unsigned char *)p->in_z.data + (size_t)pos * dv * rb, (const unsigned char *)q->in_z.data + (size_t)h * dv * rb, (size_t)dv * rb) == 0,
                  "layer %d: z rows %d", il, pos);
            CHECK(memcmp((const unsigned char *)p->in_b.data + (size_t)pos * rb, (const unsigned char *)q->in_b.data + (size_t)h * rb, rb) == 0, "layer %d: beta row %d", il, pos);
            CHECK(memcmp((const unsigned char *)p->in_a.data + (size_t)pos * rb, (const unsigned char *)q->in_a.data + (size_t)h * rb, rb) == 0, "layer %d: alpha row %d", il, pos);
            for (int row = 0; row < c->hidden; row++)
                CHECK(memcmp((const unsigned char *)p->out.data + row * orb + (size_t)pos * cb, (const unsigned char *)q->out.data + row * orb + (size_t)h * cb, cb) == 0,
                      "layer %d: ssm_out row %d columns of position %d", il, row, pos);
            CHECK(memcmp(p->conv + (2 * (size_t)kd + (size_t)pos * dv) * K, q->conv + (2 * (size_t)kd + (size_t)h * dv) * K, sizeof(float) * (size_t)dv * K) == 0,
                  "layer %d: conv V channels %d", il, pos);
            CHECK(p->dt_bias[pos] == q->dt_bias[h], "layer %d: dt_bias %d", il, pos);
            CHECK(fabsf(p->neg_exp_A[pos] - q->neg_exp_A[h]) <= 1.2e-7f * fabsf(q->neg_exp_A[h]), "layer %d: A %d: %.9g vs %.9g", il, pos, p->neg_exp_A[pos], q->neg_exp_A[h]);
        }
        CHECK(memcmp(p->norm, q->norm, sizeof(float) * (size_t)dv) == 0, "layer %d: gated norm (no +1)", il);
    }
done:
    q35_model_free(a);
    q35_model_free(b);
}

/* Quantized files load with their types and shapes and evaluate to finite logits. */
static void test_quantized_load(void) {
    struct { const char *file; q35_dtype mat, head, out0; } cases[] = {
        {"hv-gt-hk.q8_0.gguf", Q35_DT_Q8_0, Q35_DT_Q8_0, Q35_DT_Q8_0},
        {"hv-gt-hk.q4_0.gguf", Q35_DT_Q4_0, Q35_DT_Q4_0, Q35_DT_Q4_0},
        {"narrow8.q4_0.gguf", Q35_DT_Q4_0, Q35_DT_Q4_0, Q35_DT_F16}, /* out_proj rows of 48: F16 fallback */
    };
    for (int i = 0; i < 3; i++) {
        q35_model *m;
        if (q35_model_load(gguf_path(cases[i].file), &m)) { CHECK(0, "%s", q35_last_error()); continue; }
        CHECK(m->layers[0].mlp_gate.dtype == cases[i].mat, "%s: ffn_gate is %s", cases[i].file, q35_dtype_name(m->layers[0].mlp_gate.dtype));
        CHECK(m->lm_head.dtype == cases[i].head, "%s: output is %s", cases[i].file, q35_dtype_name(m->lm_head.dtype));
        CHECK(m->layers[0].gdn.out.dtype == cases[i].out0, "%s: ssm_out is %s", cases[i].file, q35_dtype_name(m->layers[0].gdn.out.dtype));
        CHECK(m->layers[0].gdn.in_qkv.shape[0] == q35_cfg_conv_channels(&m->cfg) && m->layers[0].gdn.in_qkv.shape[1] == m->cfg.hidden,
              "%s: attn_qkv shape", cases[i].file);
        CHECK((i == 2) == !m->cfg.tie_embeddings, "%s: tie", cases[i].file);
        q35_session *s;
        float *lg = malloc(sizeof(float) * (size_t)m->cfg.vocab);
        int32_t ids[3] = {1, 5, 9};
        CHECK(q35_session_new(m, 8, &s) == Q35_OK, "%s", q35_last_error());
        CHECK(q35_session_eval(s, ids, 3, lg, NULL) == Q35_OK, "%s", q35_last_error());
        int finite = 1;
        for (int k = 0; k < m->cfg.vocab; k++) finite &= isfinite(lg[k]) != 0;
        CHECK(finite, "%s: logits not finite", cases[i].file);
        free(lg);
        q35_session_free(s);
        q35_model_free(m);
    }
}

/* ---------------------------------------------------------------- writer */

/* safetensors fixture -> q35 GGUF writer -> loader: same config, same bound bytes (V-head tensors in
 * tiled order when Hv > Hk), same logits; and GGUF -> export -> GGUF gives the same tensors again. */
static void roundtrip(const char *model) {
    char dir[2048], out[2100], out2[2100];
    snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), model);
    snprintf(out, sizeof out, "%s/%s.q35.gguf", work, model);
    snprintf(out2, sizeof out2, "%s/%s.q35-again.gguf", work, model);
    q35_model *a = NULL, *b = NULL;
    if (q35_model_load(dir, &a)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_gguf_export e;
    CHECK(q35_gguf_export_model(a, &e) == Q35_OK, "%s", q35_last_error());
    q35_gguf_write_opts o = {.name = model};
    CHECK(q35_gguf_write_model(out, &a->cfg, e.v, e.n, &o) == Q35_OK, "%s", q35_last_error());
    q35_gguf_export_free(&e);
    CHECK(q35_model_load(out, &b) == Q35_OK, "%s", q35_last_error());
    if (!b) goto done;
    same_config(&b->cfg, &a->cfg, out);
    CHECK(b->cfg.max_pos == a->cfg.max_pos, "%s: context", model);
    const q35_config *c = &a->cfg;
    const int tiled = c->lin_v_heads != c->lin_k_heads;
    CHECK(memcmp(a->embed.data, b->embed.data, a->embed.nbytes) == 0 && memcmp(a->lm_head.data, b->lm_head.data, a->lm_head.nbytes) == 0, "%s: embed/head", model);
    for (int il = 0; il < c->n_layers; il++) {
        const q35_layer_weights *x = &a->layers[il], *y = &b->layers[il];
        const q35_tensor *tx[] = {&x->mlp_gate, &x->mlp_up, &x->mlp_down, &x->attn.q, &x->attn.k, &x->attn.v, &x->attn.o,
                                  &x->gdn.in_qkv, &x->gdn.in_z, &x->gdn.in_b, &x->gdn.in_a, &x->gdn.out};
        const q35_tensor *ty[] = {&y->mlp_gate, &y->mlp_up, &y->mlp_down, &y->attn.q, &y->attn.k, &y->attn.v, &y->attn.o,
                                  &y->gdn.in_qkv, &y->gdn.in_z, &y->gdn.in_b, &y->gdn.in_a, &y->gdn.out};
        for (int k = 0; k < 12; k++) {
            if (!tx[k]->data) continue;
            CHECK(tx[k]->dtype == ty[k]->dtype && tx[k]->nbytes == ty[k]->nbytes && tx[k]->shape[0] == ty[k]->shape[0], "%s layer %d: tensor %d", model, il, k);
            if (!(tiled && k >= 7)) CHECK(memcmp(tx[k]->data, ty[k]->data, tx[k]->nbytes) == 0, "%s layer %d: tensor %d differs", model, il, k);
        }
        CHECK(memcmp(x->in_norm, y->in_norm, sizeof(float) * (size_t)c->hidden) == 0 && memcmp(x->post_norm, y->post_norm, sizeof(float) * (size_t)c->hidden) == 0,
              "%s layer %d: norms", model, il);
        if (!x->is_full && !tiled) {
            CHECK(memcmp(x->gdn.conv, y->gdn.conv, sizeof(float) * (size_t)q35_cfg_conv_channels(c) * c->conv_kernel) == 0, "%s layer %d: conv", model, il);
            CHECK(memcmp(x->gdn.neg_exp_A, y->gdn.neg_exp_A, sizeof(float) * (size_t)c->lin_v_heads) == 0, "%s layer %d: A", model, il);
        }
    }
    int32_t ids[6] = {3, 1, 4, 1, 5, 9};
    float *la = malloc(sizeof(float) * 6 * (size_t)c->vocab), *lb = malloc(sizeof(float) * 6 * (size_t)c->vocab);
    q35_session *sa, *sb;
    q35_session_new(a, 8, &sa);
    q35_session_new(b, 8, &sb);
    q35_session_eval(sa, ids, 6, NULL, la);
    q35_session_eval(sb, ids, 6, NULL, lb);
    double scale, d = max_diff(lb, la, 6 * (size_t)c->vocab, &scale);
    CHECK(tiled ? d <= TILED_TOL * scale : d == 0, "%s: logits of the round trip differ by %g", model, d);
    q35_session_free(sa);
    q35_session_free(sb);
    free(la);
    free(lb);
    /* The GGUF-loaded model exported again: the same tensors, byte for byte. */
    CHECK(q35_gguf_export_model(b, &e) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_gguf_write_model(out2, &b->cfg, e.v, e.n, &o) == Q35_OK, "%s", q35_last_error());
    q35_gguf_export_free(&e);
    q35_gguf g1, g2;
    if (!q35_gguf_open(out, 0, &g1)) {
        if (!q35_gguf_open(out2, 0, &g2)) {
            CHECK(g1.n_tensors == g2.n_tensors && g1.n_kv == g2.n_kv, "%s: counts", model);
            for (int i = 0; i < g1.n_tensors && i < g2.n_tensors; i++) {
                const q35_gguf_tensor *p = &g1.tensors[i], *q = &g2.tensors[i];
                CHECK(strcmp(p->t.name, q->t.name) == 0 && p->t.nbytes == q->t.nbytes && memcmp(p->t.data, q->t.data, p->t.nbytes) == 0,
                      "%s: %s differs after GGUF -> GGUF", model, p->t.name);
            }
            q35_gguf_close(&g2);
        }
        q35_gguf_close(&g1);
    }
done:
    q35_model_free(a);
    q35_model_free(b);
}

static void test_roundtrip(void) {
    roundtrip("hv-gt-hk");
    roundtrip("narrow8");
    roundtrip("tiny-vl");
}

/* q35's writer from the safetensors checkpoint == the converter's file (tensor by tensor): same names,
 * types, shapes and bytes; ssm_a (-exp(A_log)) within one ulp of torch's exp. */
static void test_writer_matches_converter(void) {
    char dir[2048], out[2100];
    snprintf(dir, sizeof dir, "%s/models/hv-gt-hk", test_data_dir());
    snprintf(out, sizeof out, "%s/hv-gt-hk.q35-conv.gguf", work);
    q35_model *m;
    if (q35_model_load(dir, &m)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_gguf_export e;
    CHECK(q35_gguf_export_model(m, &e) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_gguf_write_model(out, &m->cfg, e.v, e.n, NULL) == Q35_OK, "%s", q35_last_error());
    q35_gguf_export_free(&e);
    q35_model_free(m);
    q35_gguf a, b;
    if (q35_gguf_open(out, 0, &a)) { CHECK(0, "%s", q35_last_error()); return; }
    if (q35_gguf_open(gguf_path("hv-gt-hk.bf16.gguf"), 0, &b)) { CHECK(0, "%s", q35_last_error()); q35_gguf_close(&a); return; }
    CHECK(a.n_tensors == b.n_tensors, "%d tensors, the converter wrote %d", a.n_tensors, b.n_tensors);
    for (int i = 0; i < b.n_tensors; i++) {
        const q35_gguf_tensor *y = &b.tensors[i], *x = q35_gguf_find_tensor(&a, y->t.name);
        if (!x) { CHECK(0, "q35 did not write %s", y->t.name); continue; }
        CHECK(x->ggml_type == y->ggml_type && x->n_dims == y->n_dims && memcmp(x->ne, y->ne, sizeof x->ne) == 0, "%s: type or shape", y->t.name);
        if (x->t.nbytes != y->t.nbytes) continue;
        if (strstr(y->t.name, "ssm_a")) {
            for (int64_t k = 0; k < q35_tensor_numel(&y->t); k++) {
                float u = q35_tensor_get_f32(&x->t, k), v = q35_tensor_get_f32(&y->t, k);
                CHECK(fabsf(u - v) <= 1.2e-7f * fabsf(v), "%s[%lld]: %.9g vs %.9g", y->t.name, (long long)k, u, v);
            }
        } else {
            CHECK(memcmp(x->t.data, y->t.data, x->t.nbytes) == 0, "%s: bytes differ from the converter's", y->t.name);
        }
    }
    const char *keys[] = {"qwen35.block_count", "qwen35.embedding_length", "qwen35.ssm.inner_size", "qwen35.rope.dimension_count",
                          "qwen35.full_attention_interval", "qwen35.attention.key_length", "qwen35.context_length"};
    for (int k = 0; k < 7; k++) {
        int64_t u = -1, v = -2;
        q35_gguf_get_int(&a, keys[k], 1, 0, 1L << 40, &u);
        q35_gguf_get_int(&b, keys[k], 1, 0, 1L << 40, &v);
        CHECK(u == v, "%s: %lld, converter %lld", keys[k], (long long)u, (long long)v);
    }
    q35_gguf_close(&a);
    q35_gguf_close(&b);
}

/* tokenizer.ggml.* from a tokenizer directory (the Qwen3 tokenizer unpacked by tests/run.sh), as the
 * converter's _set_vocab_gpt2 + SpecialVocab write them. */
static void test_writer_tokenizer(void) {
    char tdir[2048], p[2100], out[2100];
    snprintf(tdir, sizeof tdir, "%s/qwen3-tokenizer", test_work_dir());
    snprintf(p, sizeof p, "%s/tokenizer.json", tdir);
    if (!q35_file_exists(p)) { CHECK(0, "%s missing (tests/run.sh unpacks it)", p); return; }
    snprintf(out, sizeof out, "%s/tok.gguf", work);
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/models/hv-gt-hk", test_data_dir());
    q35_model *m;
    if (q35_model_load(dir, &m)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_gguf_export e;
    CHECK(q35_gguf_export_model(m, &e) == Q35_OK, "%s", q35_last_error());
    q35_config c = m->cfg;
    c.vocab = 151936; /* the Qwen3 checkpoints' rows (the tensors here stay small: only the metadata is read back) */
    q35_gguf_write_opts o = {.name = "tok", .tokenizer_dir = tdir};
    CHECK(q35_gguf_write_model(out, &c, e.v, e.n, &o) == Q35_OK, "%s", q35_last_error());
    q35_gguf_export_free(&e);
    q35_model_free(m);
    q35_gguf g;
    if (q35_gguf_open(out, 0, &g)) { CHECK(0, "%s", q35_last_error()); return; }
    const char *s;
    size_t n;
    CHECK(q35_gguf_get_str(&g, "tokenizer.ggml.model", 1, &s, &n) == Q35_OK && n == 4 && !memcmp(s, "gpt2", 4), "model");
    CHECK(q35_gguf_get_str(&g, "tokenizer.ggml.pre", 1, &s, &n) == Q35_OK && n == 6 && !memcmp(s, "qwen35", 6), "pre");
    const q35_gguf_kv *toks = q35_gguf_find_kv(&g, "tokenizer.ggml.tokens"), *types = q35_gguf_find_kv(&g, "tokenizer.ggml.token_type");
    const q35_gguf_kv *merges = q35_gguf_find_kv(&g, "tokenizer.ggml.merges");
    CHECK(toks && toks->n == 151936 && types && types->n == 151936 && merges && merges->n == 151387, "counts");
    if (toks && types && toks->n == 151936) {
        size_t at = 0;
        int i = 0, ok = 1;
        while (q35_gguf_arr_next_str(toks, &at, &s, &n)) {
            if (i == 0) ok &= n == 1 && s[0] == '!' && q35_gguf_arr_int(types, 0) == 1;
            if (i == 151643) ok &= n == 13 && !memcmp(s, "<|endoftext|>", 13) && q35_gguf_arr_int(types, 151643) == 3;
            if (i == 151935) ok &= n == 11 && !memcmp(s, "[PAD151935]", 11) && q35_gguf_arr_int(types, 151935) == 5;
            i++;
        }
        CHECK(ok && i == 151936, "token list (%d entries)", i);
    }
    if (merges) {
        size_t at = 0;
        CHECK(q35_gguf_arr_next_str(merges, &at, &s, &n) && n == 5 && !memcmp(s, "\xc4\xa0 \xc4\xa0", 5), "first merge");
    }
    int64_t id = -1;
    int b = 1;
    CHECK(q35_gguf_get_int(&g, "tokenizer.ggml.eos_token_id", 1, 0, 1 << 20, &id) == Q35_OK && id == 151645, "eos %lld", (long long)id);
    CHECK(q35_gguf_get_int(&g, "tokenizer.ggml.padding_token_id", 1, 0, 1 << 20, &id) == Q35_OK && id == 151643, "pad %lld", (long long)id);
    CHECK(q35_gguf_get_bool(&g, "tokenizer.ggml.add_bos_token", 1, &b) == Q35_OK && b == 0, "add_bos_token");
    CHECK(q35_gguf_get_str(&g, "tokenizer.chat_template", 1, &s, &n) == Q35_OK && n > 100, "chat template");
    CHECK(q35_gguf_find_kv(&g, "tokenizer.ggml.bos_token_id") == NULL, "bos_token is null");
    q35_gguf_close(&g);
}

/* Every metadata type through the writer and back; general.alignment honoured. */
static void test_writer_types(void) {
    char out[2100];
    snprintf(out, sizeof out, "%s/types.gguf", work);
    q35_gguf_writer *w;
    q35_gguf_writer_new(&w);
    int32_t arr[3] = {-1, 2, 70000};
    const char *strs[3] = {"a", "", "\xe2\x9c\x85"};
    unsigned char bools[2] = {1, 0};
    float f4[1] = {0.5f};
    CHECK(q35_gguf_set_u32(w, "general.alignment", 64) == Q35_OK, "%s", q35_last_error());
    q35_gguf_set_i32(w, "t.i32", -7);
    q35_gguf_set_u64(w, "t.u64", 1ull << 40);
    q35_gguf_set_f32(w, "t.f32", 1.5f);
    q35_gguf_set_bool(w, "t.bool", 1);
    q35_gguf_set_str(w, "t.str", "hello");
    q35_gguf_set_arr_i32(w, "t.ai", arr, 3);
    q35_gguf_set_arr_str(w, "t.as", strs, NULL, 3);
    q35_gguf_set_arr_bool(w, "t.ab", bools, 2);
    q35_gguf_set_arr_f32(w, "t.af", f4, 1);
    CHECK(q35_gguf_set_i32(w, "t.i32", 1) == Q35_ERR_ARG, "a key set twice must fail");
    float v[96];
    for (int i = 0; i < 96; i++) v[i] = (float)i;
    q35_tensor t = {.dtype = Q35_DT_F32, .ndim = 2, .shape = {3, 32}, .data = v, .nbytes = sizeof v};
    CHECK(q35_gguf_add_tensor(w, "x", &t) == Q35_OK, "%s", q35_last_error());
    q35_tensor t1 = {.dtype = Q35_DT_F32, .ndim = 1, .shape = {5}, .data = v, .nbytes = 20};
    CHECK(q35_gguf_add_tensor(w, "y", &t1) == Q35_OK, "%s", q35_last_error());
    t1.nbytes = 24;
    CHECK(q35_gguf_add_tensor(w, "z", &t1) == Q35_ERR_ARG, "a size that does not match the shape must fail");
    CHECK(q35_gguf_write(w, out) == Q35_OK, "%s", q35_last_error());
    q35_gguf_writer_free(w);
    q35_gguf g;
    if (q35_gguf_open(out, 0, &g)) { CHECK(0, "%s", q35_last_error()); return; }
    int64_t i64 = 0;
    double f = 0;
    int b = 0;
    const char *s;
    size_t n;
    CHECK(g.alignment == 64 && g.data_start % 64 == 0, "alignment %zu", g.alignment);
    CHECK(q35_gguf_get_int(&g, "t.i32", 1, -10, 10, &i64) == Q35_OK && i64 == -7, "i32");
    CHECK(q35_gguf_get_int(&g, "t.u64", 1, 0, 1LL << 50, &i64) == Q35_OK && i64 == 1LL << 40, "u64");
    CHECK(q35_gguf_get_int(&g, "t.u64", 1, 0, 10, &i64) == Q35_ERR_FORMAT, "range");
    CHECK(q35_gguf_get_float(&g, "t.f32", 1, &f) == Q35_OK && f == 1.5, "f32");
    CHECK(q35_gguf_get_bool(&g, "t.bool", 1, &b) == Q35_OK && b == 1, "bool");
    CHECK(q35_gguf_get_str(&g, "t.str", 1, &s, &n) == Q35_OK && n == 5 && memcmp(s, "hello", 5) == 0, "str");
    CHECK(q35_gguf_get_int(&g, "t.str", 1, 0, 1, &i64) == Q35_ERR_FORMAT && strstr(q35_last_error(), "t.str"), "type mismatch names the key");
    CHECK(q35_gguf_get_int(&g, "t.none", 1, 0, 1, &i64) == Q35_ERR_MISSING && strstr(q35_last_error(), "t.none"), "missing names the key");
    const q35_gguf_kv *ai = q35_gguf_find_kv(&g, "t.ai"), *as = q35_gguf_find_kv(&g, "t.as"), *ab = q35_gguf_find_kv(&g, "t.ab");
    CHECK(ai && ai->n == 3 && q35_gguf_arr_int(ai, 0) == -1 && q35_gguf_arr_int(ai, 2) == 70000, "int array");
    CHECK(ab && ab->n == 2 && q35_gguf_arr_int(ab, 0) == 1 && q35_gguf_arr_int(ab, 1) == 0, "bool array");
    size_t at = 0;
    int k = 0, ok = as != NULL;
    while (ok && q35_gguf_arr_next_str(as, &at, &s, &n)) ok = k < 3 && n == strlen(strs[k]) && memcmp(s, strs[k], n) == 0, k++;
    CHECK(ok && k == 3, "string array");
    const q35_gguf_tensor *x = q35_gguf_find_tensor(&g, "x"), *y = q35_gguf_find_tensor(&g, "y");
    CHECK(x && x->ne[0] == 32 && x->ne[1] == 3 && x->t.shape[0] == 3 && memcmp(x->t.data, v, sizeof v) == 0, "tensor x");
    CHECK(y && y->offset % 64 == 0 && memcmp(y->t.data, v, 20) == 0, "tensor y");
    q35_gguf_close(&g);
}

/* ---------------------------------------------------------------- bad input */

static void expect(const char *path, q35_status code, const char *n1, const char *n2) {
    q35_model *m = NULL;
    q35_status st = q35_model_load(path, &m);
    const char *msg = q35_last_error();
    CHECK(st == code, "expected %s, got %s: %s", q35_status_name(code), q35_status_name(st), msg);
    CHECK(m == NULL, "a failed load must not return a model");
    if (n1) CHECK(strstr(msg, n1) != NULL, "message '%s' should mention '%s'", msg, n1);
    if (n2) CHECK(strstr(msg, n2) != NULL, "message '%s' should mention '%s'", msg, n2);
    CHECK(strchr(msg, '\n') == NULL, "message must be one line");
    q35_model_free(m);
}

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }

static unsigned char *base;  /* the BF16 fixture's bytes */
static size_t base_n;
static q35_gguf base_g;       /* parsed, for field positions */
static char bad_path[2100];

static unsigned char *fresh(void) {
    unsigned char *d = malloc(base_n);
    memcpy(d, base, base_n);
    return d;
}
static void save(unsigned char *d, size_t n) {
    write_file(bad_path, d, n);
    free(d);
}
/* File offsets of a tensor info's fields. */
static const q35_gguf_tensor *tinfo(const char *name, size_t *type_pos, size_t *off_pos, size_t *ne_pos) {
    const q35_gguf_tensor *t = q35_gguf_find_tensor(&base_g, name);
    size_t p = t->pos + 8 + strlen(name) + 4;
    *ne_pos = p;
    *type_pos = p + 8 * (size_t)t->n_dims;
    *off_pos = *type_pos + 4;
    return t;
}

/* A copy of the fixture through the writer, without the key or tensor named `drop`. */
static void save_without(const char *drop) {
    q35_gguf_writer *w;
    q35_gguf_writer_new(&w);
    for (int i = 0; i < base_g.n_kv; i++)
        if (strcmp(base_g.kv[i].key, drop) != 0 && strcmp(base_g.kv[i].key, "general.architecture") != 0) q35_gguf_copy_kv(w, &base_g.kv[i]);
    if (strcmp(drop, "general.architecture") != 0) {
        const char *s;
        size_t n;
        q35_gguf_get_str(&base_g, "general.architecture", 1, &s, &n);
        q35_gguf_set_strn(w, "general.architecture", s, n);
    }
    for (int i = 0; i < base_g.n_tensors; i++)
        if (strcmp(base_g.tensors[i].t.name, drop) != 0) q35_gguf_add_tensor(w, base_g.tensors[i].t.name, &base_g.tensors[i].t);
    CHECK(q35_gguf_write(w, bad_path) == Q35_OK, "%s", q35_last_error());
    q35_gguf_writer_free(w);
}

static void test_bad_input(void) {
    base = slurp(gguf_path("hv-gt-hk.bf16.gguf"), &base_n);
    if (!base || q35_gguf_open(gguf_path("hv-gt-hk.bf16.gguf"), 0, &base_g)) { CHECK(0, "fixture"); free(base); return; }
    snprintf(bad_path, sizeof bad_path, "%s/bad.gguf", work);
    unsigned char *d;
    size_t tp, op, np;
    const char *QKV = "blk.0.attn_qkv.weight", *NORM = "blk.1.attn_norm.weight";

    save(fresh(), base_n - 1000); /* truncated data section */
    expect(bad_path, Q35_ERR_FORMAT, "bad.gguf", "out of range");
    save(fresh(), 200); /* truncated inside the metadata */
    expect(bad_path, Q35_ERR_FORMAT, "truncated", NULL);
    save(fresh(), 10);
    expect(bad_path, Q35_ERR_FORMAT, "truncated", NULL);
    d = fresh(), memcpy(d, "GGML", 4), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, "not a GGUF file", NULL);
    d = fresh(), put32(d + 4, 1), save(d, base_n);
    expect(bad_path, Q35_ERR_UNSUPPORTED, "version 1", NULL);
    d = fresh(), put32(d + 4, 0x03000000u), save(d, base_n);
    expect(bad_path, Q35_ERR_UNSUPPORTED, "big-endian", NULL);
    d = fresh(), put64(d + 8, 1ull << 40), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, "1099511627776 tensors", "absurd");
    d = fresh(), put64(d + 16, ~0ull), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, "metadata entries", "absurd");
    d = fresh(), put64(d + 8, 20000), save(d, base_n); /* fits the limit, not the file */
    expect(bad_path, Q35_ERR_FORMAT, "20000 tensor infos", "cannot fit");
    d = fresh(), put64(d + base_g.kv[0].pos, 1ull << 40), save(d, base_n); /* first key: absurd length */
    expect(bad_path, Q35_ERR_FORMAT, "metadata key 0", "length 1099511627776");
    { /* a string value's length past EOF */
        const q35_gguf_kv *kv = q35_gguf_find_kv(&base_g, "general.name");
        d = fresh(), put64(d + (size_t)(kv->data - base_g.map.data) - 8, (uint64_t)base_n), save(d, base_n);
        expect(bad_path, Q35_ERR_FORMAT, "general.name", "past the end");
    }
    { /* an unknown value type */
        const q35_gguf_kv *kv = q35_gguf_find_kv(&base_g, "general.name");
        d = fresh(), put32(d + kv->pos + 8 + strlen(kv->key), 77), save(d, base_n);
        expect(bad_path, Q35_ERR_FORMAT, "general.name", "unknown value type");
    }
    tinfo(QKV, &tp, &op, &np);
    d = fresh(), put64(d + op, 1ull << 40), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, QKV, "out of range");
    d = fresh(), put64(d + op, q35_gguf_find_tensor(&base_g, QKV)->offset + 4), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, QKV, "alignment");
    {
        size_t tp2, op2, np2;
        tinfo(NORM, &tp2, &op2, &np2);
        d = fresh(), put64(d + op2, q35_gguf_find_tensor(&base_g, QKV)->offset), save(d, base_n);
        expect(bad_path, Q35_ERR_FORMAT, "overlap", NORM);
    }
    d = fresh(), put32(d + tp, 99), save(d, base_n);
    expect(bad_path, Q35_ERR_DTYPE, QKV, "unknown type 99");
    d = fresh(), put32(d + tp, 13), save(d, base_n); /* q5_k: known to ggml, not read by q35 */
    expect(bad_path, Q35_ERR_DTYPE, QKV, "q5_k");
    d = fresh(), put32(d + np - 4, 7), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, QKV, "dimensions");
    { /* wrong shape, same byte count: swap ne[0] and ne[1] */
        const q35_gguf_tensor *t = q35_gguf_find_tensor(&base_g, QKV);
        d = fresh(), put64(d + np, (uint64_t)t->ne[1]), put64(d + np + 8, (uint64_t)t->ne[0]), save(d, base_n);
        expect(bad_path, Q35_ERR_SHAPE, QKV, "expected");
    }
    d = fresh(), put64(d + np, ~0ull >> 1), save(d, base_n);
    expect(bad_path, Q35_ERR_FORMAT, QKV, "dimension 0");
    save_without(QKV);
    expect(bad_path, Q35_ERR_MISSING, QKV, NULL);
    save_without("blk.2.ssm_a");
    expect(bad_path, Q35_ERR_MISSING, "blk.2.ssm_a", NULL);
    save_without("qwen35.ssm.state_size");
    expect(bad_path, Q35_ERR_MISSING, "qwen35.ssm.state_size", NULL);
    save_without("qwen35.rope.dimension_sections");
    expect(bad_path, Q35_ERR_MISSING, "rope.dimension_sections", NULL);
    save_without("general.architecture");
    expect(bad_path, Q35_ERR_MISSING, "general.architecture", NULL);
    { /* another architecture */
        const q35_gguf_kv *kv = q35_gguf_find_kv(&base_g, "general.architecture");
        d = fresh(), memcpy(d + (kv->data - base_g.map.data), "llama3", 6), save(d, base_n);
        expect(bad_path, Q35_ERR_UNSUPPORTED, "llama3", "qwen35");
    }
    { /* a metadata value of the wrong type */
        const q35_gguf_kv *kv = q35_gguf_find_kv(&base_g, "qwen35.block_count");
        d = fresh(), put32(d + kv->pos + 8 + strlen(kv->key), Q35_GGUF_F32), save(d, base_n);
        expect(bad_path, Q35_ERR_FORMAT, "qwen35.block_count", "integer");
    }
    { /* a tensor named twice: rename blk.1.attn_norm to blk.0.attn_norm */
        size_t tp2, op2, np2;
        tinfo(NORM, &tp2, &op2, &np2);
        d = fresh(), d[q35_gguf_find_tensor(&base_g, NORM)->pos + 8 + 4] = '0', save(d, base_n);
        expect(bad_path, Q35_ERR_FORMAT, "blk.0.attn_norm.weight", "twice");
    }
    write_file(bad_path, "", 0);
    expect(bad_path, Q35_ERR_FORMAT, "empty", NULL);
    q35_gguf_close(&base_g);
    free(base);
}

/* Which file q35_model_load picks. */
static void test_paths(void) {
    char d[2100], p[2300];
    snprintf(d, sizeof d, "%s/onegguf", work);
    mkdir(d, 0755);
    size_t n;
    unsigned char *b = slurp(gguf_path("hv-gt-hk.q4_0.gguf"), &n);
    snprintf(p, sizeof p, "%s/model-Q4_0.gguf", d);
    write_file(p, b, n);
    q35_model *m = NULL;
    CHECK(q35_model_load(d, &m) == Q35_OK, "a directory with one .gguf: %s", q35_last_error());
    q35_model_free(m);
    snprintf(p, sizeof p, "%s/second.gguf", d);
    write_file(p, b, n);
    m = NULL;
    CHECK(q35_model_load(d, &m) == Q35_ERR_ARG && strstr(q35_last_error(), "name the file"), "two .gguf files: %s", q35_last_error());
    q35_model_free(m);
    unlink(p);
    free(b);
    expect("/nonexistent-q35/x.gguf", Q35_ERR_MISSING, "x.gguf", "cannot open");
}

static const char *only; /* argv[1]: run the tests whose name contains it */
#undef RUN
#define RUN(fn) do { if (!only || strstr(#fn, only)) { t_fail_count = 0; fn(); printf("%s %s\n", t_fail_count ? "not ok" : "ok", #fn); fflush(stdout); if (t_fail_count) t_total_failed++; } } while (0)

int main(int argc, char **argv) {
    only = argc > 1 ? argv[1] : NULL;
    snprintf(data_dir, sizeof data_dir, "%s/gguf", test_data_dir());
    snprintf(work, sizeof work, "%s/gguf", test_work_dir());
    mkdir(test_work_dir(), 0755);
    mkdir(work, 0755);
    RUN(test_fixture_values);
    RUN(test_config);
    RUN(test_parity_bf16);
    RUN(test_parity_f32);
    RUN(test_v_heads);
    RUN(test_quantized_load);
    RUN(test_roundtrip);
    RUN(test_writer_matches_converter);
    RUN(test_writer_types);
    RUN(test_writer_tokenizer);
    RUN(test_bad_input);
    RUN(test_paths);
    TEST_EXIT();
}
