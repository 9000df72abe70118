/* llama.cpp's qwen35 GGUF <-> struct q35_model (see model_gguf.h for the converter's transforms). */
#include "model/model_gguf.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err.h"
#include "core/file.h"
#include "formats/json.h"
#include "model/model.h"

struct q35_gguf_model {
    q35_gguf g;                       /* the mapped file; every bound matrix points into it */
};

/* ---------------------------------------------------------------- which file */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

q35_status q35_gguf_model_path(const char *path, char *out, size_t cap, int *is_gguf) {
    *is_gguf = 0;
    struct stat st;
    if (stat(path, &st) != 0) { /* a missing .gguf is reported by the GGUF loader, anything else by the usual one */
        if (!ends_with(path, ".gguf")) return Q35_OK;
        if (strlen(path) + 1 > cap) return q35_fail(Q35_ERR_ARG, "path too long: %s", path);
        strcpy(out, path);
        *is_gguf = 1;
        return Q35_OK;
    }
    if (S_ISREG(st.st_mode)) {
        if (!ends_with(path, ".gguf")) return Q35_OK;
        if (strlen(path) + 1 > cap) return q35_fail(Q35_ERR_ARG, "path too long: %s", path);
        strcpy(out, path);
        *is_gguf = 1;
        return Q35_OK;
    }
    if (!S_ISDIR(st.st_mode)) return Q35_OK;
    char p[4096];
    q35_status s = q35_path_join(p, sizeof p, path, "config.json");
    if (s) return s;
    if (q35_file_exists(p)) return Q35_OK;
    DIR *d = opendir(path);
    if (!d) return Q35_OK;
    int n = 0;
    char first[256] = "", second[256] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".gguf") || e->d_name[0] == '.') continue;
        if (q35_path_join(p, sizeof p, path, e->d_name) || !q35_file_exists(p)) continue;
        if (n == 0) snprintf(first, sizeof first, "%s", e->d_name);
        else if (n == 1) snprintf(second, sizeof second, "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (n == 0) return Q35_OK;
    if (n > 1)
        return q35_fail(Q35_ERR_ARG, "%s: %d .gguf files (%s, %s%s) and no config.json: name the file to load", path, n, first, second,
                        n > 2 ? ", ..." : "");
    if ((s = q35_path_join(out, cap, path, first))) return s;
    *is_gguf = 1;
    return Q35_OK;
}

/* ---------------------------------------------------------------- metadata -> config */

#define ARCH "qwen35"

static q35_status get_int(const q35_gguf *g, const char *k, int required, int64_t lo, int64_t hi, int *out) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", k);
    int64_t v = *out;
    q35_status st = q35_gguf_get_int(g, key, required, lo, hi, &v);
    if (!st) *out = (int)v;
    return st;
}

/* A key llama.cpp reads with get_key_or_arr (one value or one per layer): the per-layer values of
 * the first n layers that are not 0 must agree. */
static q35_status get_int_or_arr(const q35_gguf *g, const char *k, int required, int64_t lo, int64_t hi, int n, int *out) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", k);
    const q35_gguf_kv *kv = q35_gguf_find_kv(g, key);
    if (!kv || kv->type != Q35_GGUF_ARRAY) return get_int(g, k, required, lo, hi, out);
    if (kv->arr_type > Q35_GGUF_I32 || kv->arr_type == Q35_GGUF_F32 || kv->n < (uint64_t)n)
        return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' must be an integer or an array of %d integers", g->path, key, n);
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        int64_t x = q35_gguf_arr_int(kv, (uint64_t)i);
        if (x == 0) continue;
        if (v && x != v) return q35_fail(Q35_ERR_UNSUPPORTED, "%s: metadata key '%s' differs between layers (%lld and %lld)", g->path, key, (long long)v, (long long)x);
        v = x;
    }
    if (v < lo || v > hi) return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' = %lld is out of range [%lld, %lld]", g->path, key, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return Q35_OK;
}

q35_status q35_gguf_config(const q35_gguf *g, q35_config *c) {
    memset(c, 0, sizeof *c);
    const char *arch;
    size_t alen;
    q35_status st;
    if ((st = q35_gguf_get_str(g, "general.architecture", 1, &arch, &alen))) return st;
    if (alen == 9 && memcmp(arch, "qwen35moe", 9) == 0)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: architecture 'qwen35moe': mixture-of-experts models are not supported", g->path);
    if (alen != 6 || memcmp(arch, ARCH, 6) != 0)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported (expected qwen35)", g->path, (int)(alen < 64 ? alen : 64), arch);
    snprintf(c->arch, sizeof c->arch, ARCH);

    int blocks = 0, nextn = 0;
    if ((st = get_int(g, "block_count", 1, 1, Q35_MAX_LAYERS + 64, &blocks))) return st;
    if ((st = get_int(g, "nextn_predict_layers", 0, 0, blocks - 1, &nextn))) return st;
    c->n_layers = blocks - nextn;
    if (c->n_layers > Q35_MAX_LAYERS)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: %d layers, q35 supports at most %d", g->path, c->n_layers, Q35_MAX_LAYERS);
    const int L = c->n_layers;
    if ((st = get_int(g, "context_length", 1, 1, 1L << 30, &c->max_pos))) return st;
    if ((st = get_int(g, "embedding_length", 1, 1, 1 << 16, &c->hidden))) return st;
    if ((st = get_int_or_arr(g, "feed_forward_length", 1, 1, 1 << 20, L, &c->intermediate))) return st;
    if ((st = get_int_or_arr(g, "attention.head_count", 1, 1, 1024, L, &c->n_heads))) return st;
    c->n_kv_heads = c->n_heads;
    if ((st = get_int_or_arr(g, "attention.head_count_kv", 0, 1, 1024, L, &c->n_kv_heads))) return st;
    if (c->n_heads % c->n_kv_heads)
        return q35_fail(Q35_ERR_FORMAT, "%s: attention.head_count (%d) must be a multiple of attention.head_count_kv (%d)", g->path, c->n_heads, c->n_kv_heads);
    c->head_dim = c->hidden / c->n_heads;
    if ((st = get_int(g, "attention.key_length", 0, 1, 4096, &c->head_dim))) return st;
    int vlen = c->head_dim;
    if ((st = get_int(g, "attention.value_length", 0, 1, 4096, &vlen))) return st;
    if (vlen != c->head_dim)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: attention.value_length %d differs from attention.key_length %d", g->path, vlen, c->head_dim);
    double eps = 0;
    if ((st = q35_gguf_get_float(g, ARCH ".attention.layer_norm_rms_epsilon", 1, &eps))) return st;
    if (!(eps > 0 && eps < 1)) return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".attention.layer_norm_rms_epsilon must be in (0, 1)", g->path);
    c->rms_eps = (float)eps;
    c->rope_theta = 10000.0; /* llama.cpp's default when the key is absent */
    if ((st = q35_gguf_get_float(g, ARCH ".rope.freq_base", 0, &c->rope_theta))) return st;
    if (!(c->rope_theta > 0)) return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".rope.freq_base must be positive", g->path);
    c->rope_dim = c->head_dim;
    if ((st = get_int(g, "rope.dimension_count", 0, 2, c->head_dim, &c->rope_dim))) return st;
    if (c->rope_dim % 2) return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".rope.dimension_count %d must be even", g->path, c->rope_dim);
    const q35_gguf_kv *sec = q35_gguf_find_kv(g, ARCH ".rope.dimension_sections");
    if (!sec) return q35_fail(Q35_ERR_MISSING, "%s: missing metadata key '" ARCH ".rope.dimension_sections'", g->path);
    if (sec->type != Q35_GGUF_ARRAY || sec->n < 3 || sec->n > 4 || sec->arr_type == Q35_GGUF_F32 || sec->arr_type > Q35_GGUF_I32)
        return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".rope.dimension_sections must be an array of 4 integers", g->path);
    for (int i = 0; i < 3; i++) {
        int64_t v = q35_gguf_arr_int(sec, (uint64_t)i);
        if (v < 0 || v > 4096) return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".rope.dimension_sections[%d] = %lld is out of range", g->path, i, (long long)v);
        c->mrope_section[i] = (int)v;
    }
    if (sec->n == 4 && q35_gguf_arr_int(sec, 3) != 0)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: " ARCH ".rope.dimension_sections[3] must be 0", g->path);
    if (c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2] != c->rope_dim / 2)
        return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".rope.dimension_sections [%d, %d, %d] must sum to rope.dimension_count / 2 = %d", g->path,
                        c->mrope_section[0], c->mrope_section[1], c->mrope_section[2], c->rope_dim / 2);
    c->mrope_interleaved = 1; /* LLAMA_ROPE_TYPE_IMROPE */
    c->attn_output_gate = 1;

    int inner = 0;
    if ((st = get_int(g, "ssm.conv_kernel", 1, 1, 64, &c->conv_kernel))) return st;
    if ((st = get_int(g, "ssm.state_size", 1, 1, 4096, &c->lin_k_dim))) return st;
    if ((st = get_int(g, "ssm.group_count", 1, 1, 1024, &c->lin_k_heads))) return st;
    if ((st = get_int(g, "ssm.time_step_rank", 1, 1, 1024, &c->lin_v_heads))) return st;
    if ((st = get_int(g, "ssm.inner_size", 1, 1, 1 << 22, &inner))) return st;
    if (inner % c->lin_v_heads || inner / c->lin_v_heads > 4096)
        return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".ssm.inner_size %d must be ssm.time_step_rank (%d) x the value head size", g->path, inner, c->lin_v_heads);
    c->lin_v_dim = inner / c->lin_v_heads;
    if (c->lin_v_heads % c->lin_k_heads)
        return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".ssm.time_step_rank (%d) must be a multiple of ssm.group_count (%d)", g->path, c->lin_v_heads, c->lin_k_heads);

    /* Layer types: the per-layer recurrent mask when present, else every interval-th layer is attention. */
    const q35_gguf_kv *mask = q35_gguf_find_kv(g, ARCH ".attention.recurrent_layers");
    if (mask) {
        if (mask->type != Q35_GGUF_ARRAY || mask->n < (uint64_t)L || (mask->arr_type != Q35_GGUF_BOOL && (mask->arr_type == Q35_GGUF_F32 || mask->arr_type > Q35_GGUF_I32)))
            return q35_fail(Q35_ERR_FORMAT, "%s: " ARCH ".attention.recurrent_layers must be an array of %d bools", g->path, L);
        for (int i = 0; i < L; i++) c->layer_full[i] = q35_gguf_arr_int(mask, (uint64_t)i) == 0;
    } else {
        int interval = 4;
        if ((st = get_int(g, "full_attention_interval", 0, 1, Q35_MAX_LAYERS, &interval))) return st;
        for (int i = 0; i < L; i++) c->layer_full[i] = (i + 1) % interval == 0;
    }
    for (int i = 0; i < L; i++) c->layer_full[i] ? c->n_full++ : c->n_linear++;

    const q35_gguf_tensor *emb = q35_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return q35_fail(Q35_ERR_MISSING, "%s: missing tensor 'token_embd.weight'", g->path);
    if (emb->n_dims != 2 || emb->ne[0] != c->hidden || emb->ne[1] > (1 << 24))
        return q35_fail(Q35_ERR_SHAPE, "%s: tensor 'token_embd.weight' must have shape {%d, n_vocab}", g->path, c->hidden);
    c->vocab = (int)emb->ne[1];
    c->tie_embeddings = q35_gguf_find_tensor(g, "output.weight") == NULL;

    const char *eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2; i++) {
        int64_t id = -1;
        if ((st = q35_gguf_get_int(g, eos_keys[i], 0, 0, (1 << 24) - 1, &id))) return st;
        if (id >= 0 && (c->n_eos == 0 || c->eos_ids[0] != id)) c->eos_ids[c->n_eos++] = (int)id;
    }
    return Q35_OK;
}

/* ---------------------------------------------------------------- V-head order */

/* llama.cpp's converter moves value head h = k*r + v (HF, grouped by q/k head k, r = Hv/Hk) to
 * position v*Hk + k (tiled). Position p of a GGUF file therefore holds HF head (p % Hk)*r + p / Hk,
 * which reads q/k head p % Hk: the layer keeps that order (q35_gdn_weights.v_tiled) and computes the
 * same result, with every tensor left in the mapping. */
static int64_t hf_head_at(int64_t p, int64_t Hk, int64_t r) { return (p % Hk) * r + p / Hk; }

/* A copy of t with rows [row0, row0 + Hv*d) (heads of d rows) put in tiled order. */
static void *tile_rows(const q35_tensor *t, int64_t row0, int64_t Hv, int64_t Hk, int64_t d) {
    const size_t rb = q35_row_bytes(t->dtype, t->shape[1]);
    unsigned char *dst = aligned_alloc(64, (t->nbytes + 63) & ~(size_t)63);
    if (!dst) return NULL;
    const unsigned char *src = t->data;
    memcpy(dst, src, t->nbytes);
    for (int64_t h = 0; h < Hv; h++)
        memcpy(dst + (size_t)(row0 + h * d) * rb, src + (size_t)(row0 + hf_head_at(h, Hk, Hv / Hk) * d) * rb, (size_t)d * rb);
    return dst;
}

/* A copy of t with every row's columns (heads of d columns, whole blocks) put in tiled order. */
static void *tile_cols(const q35_tensor *t, int64_t Hv, int64_t Hk, int64_t d) {
    const size_t rb = q35_row_bytes(t->dtype, t->shape[1]), cb = q35_row_bytes(t->dtype, d);
    unsigned char *dst = aligned_alloc(64, (t->nbytes + 63) & ~(size_t)63);
    if (!dst) return NULL;
    const unsigned char *src = t->data;
    for (int64_t r = 0; r < t->shape[0]; r++)
        for (int64_t h = 0; h < Hv; h++)
            memcpy(dst + (size_t)r * rb + (size_t)h * cb, src + (size_t)r * rb + (size_t)hf_head_at(h, Hk, Hv / Hk) * cb, cb);
    return dst;
}

/* ---------------------------------------------------------------- binding */

typedef struct {
    struct q35_model *m;
    struct q35_gguf_model *gm;
    float *next;          /* bump pointer into m->small */
    int v_tiled;          /* q35.v_heads_tiled: 1 (llama.cpp's files) unless a q35-layout file says 0 */
} gbind;

static void fmt_shape(char *out, size_t cap, int ndim, const int64_t *shape_q35) {
    out[0] = 0;
    for (int i = ndim - 1; i >= 0; i--) /* GGUF order, fastest axis first */
        snprintf(out + strlen(out), cap - strlen(out), "%s%lld", i == ndim - 1 ? "" : ", ", (long long)shape_q35[i]);
}

/* Tensor name with the expected q35-order shape; small: a vector converted to float (float types only). */
static q35_status gfind(gbind *b, const char *name, int ndim, const int64_t *shape, int small, q35_tensor *out) {
    const q35_gguf *g = &b->gm->g;
    const q35_gguf_tensor *gt = q35_gguf_find_tensor(g, name);
    if (!gt) return q35_fail(Q35_ERR_MISSING, "%s: missing tensor '%s'", g->path, name);
    const q35_tensor *t = &gt->t;
    const int is_float = t->dtype == Q35_DT_F32 || t->dtype == Q35_DT_F16 || t->dtype == Q35_DT_BF16;
    const int is_quant = t->dtype == Q35_DT_Q8_0 || t->dtype == Q35_DT_Q4_0 || t->dtype == Q35_DT_Q4_K || t->dtype == Q35_DT_Q6_K ||
                         t->dtype == Q35_DT_Q4R; /* Q4R: q35-layout files only (gguf.c) */
    if (small && !is_float)
        return q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s' has type %s, expected f32, f16 or bf16", g->path, name, q35_dtype_name(t->dtype));
    if (!small && !is_float && !is_quant)
        return q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s' has type %s, expected f32, f16, bf16, q8_0, q4_0, q4_k or q6_k", g->path, name,
                        q35_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[96], got[96];
        fmt_shape(want, sizeof want, ndim, shape);
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        return q35_fail(Q35_ERR_SHAPE, "%s: tensor '%s' has shape {%s}, expected {%s}", g->path, name, got, want);
    }
    *out = *t;
    b->m->weight_bytes += t->nbytes;
    return Q35_OK;
}

static q35_status gmatrix(gbind *b, const char *name, int64_t rows, int64_t cols, q35_tensor *out) {
    int64_t shape[2] = {rows, cols};
    return gfind(b, name, 2, shape, 0, out);
}

/* A vector of n floats, copied as stored. */
static q35_status gvec(gbind *b, const char *name, int64_t n, float **out) {
    q35_tensor t;
    q35_status st = gfind(b, name, 1, &n, 1, &t);
    if (st) return st;
    float *dst = b->next;
    b->next += n;
    for (int64_t i = 0; i < n; i++) dst[i] = q35_tensor_get_f32(&t, i);
    *out = dst;
    return Q35_OK;
}

static q35_status bind_layer(gbind *b, int il, q35_layer_weights *L) {
    const q35_config *c = &b->m->cfg;
    const int64_t H = c->hidden, F = c->intermediate;
    char n[96];
    q35_status st;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    L->is_full = c->layer_full[il];
    if ((st = gvec(b, NAME("attn_norm.weight"), H, &L->in_norm))) return st;
    if ((st = gvec(b, NAME("post_attention_norm.weight"), H, &L->post_norm))) return st;
    if ((st = gmatrix(b, NAME("ffn_gate.weight"), F, H, &L->mlp_gate))) return st;
    if ((st = gmatrix(b, NAME("ffn_up.weight"), F, H, &L->mlp_up))) return st;
    if ((st = gmatrix(b, NAME("ffn_down.weight"), H, F, &L->mlp_down))) return st;
    if (L->is_full) {
        q35_attn_weights *a = &L->attn;
        const int64_t hd = c->head_dim, nq = (int64_t)c->n_heads * hd, nkv = (int64_t)c->n_kv_heads * hd;
        if ((st = gmatrix(b, NAME("attn_q.weight"), 2 * nq, H, &a->q))) return st;
        if ((st = gmatrix(b, NAME("attn_k.weight"), nkv, H, &a->k))) return st;
        if ((st = gmatrix(b, NAME("attn_v.weight"), nkv, H, &a->v))) return st;
        if ((st = gmatrix(b, NAME("attn_output.weight"), H, nq, &a->o))) return st;
        if ((st = gvec(b, NAME("attn_q_norm.weight"), hd, &a->q_norm))) return st;
        if ((st = gvec(b, NAME("attn_k_norm.weight"), hd, &a->k_norm))) return st;
        return Q35_OK;
    }
    q35_gdn_weights *gw = &L->gdn;
    const int64_t Hk = c->lin_k_heads, Hv = c->lin_v_heads, dv = c->lin_v_dim, kd = Hk * c->lin_k_dim, vd = Hv * dv;
    const int64_t C = 2 * kd + vd, K = c->conv_kernel;
    gw->v_tiled = Hv != Hk && b->v_tiled; /* V heads in llama.cpp's tiled order (see hf_head_at) */
    if ((st = gmatrix(b, NAME("attn_qkv.weight"), C, H, &gw->in_qkv))) return st;
    if ((st = gmatrix(b, NAME("attn_gate.weight"), vd, H, &gw->in_z))) return st;
    if ((st = gmatrix(b, NAME("ssm_beta.weight"), Hv, H, &gw->in_b))) return st;
    if ((st = gmatrix(b, NAME("ssm_alpha.weight"), Hv, H, &gw->in_a))) return st;
    if ((st = gmatrix(b, NAME("ssm_out.weight"), H, vd, &gw->out))) return st;
    int64_t conv_shape[2] = {C, K};
    q35_tensor conv;
    if ((st = gfind(b, NAME("ssm_conv1d.weight"), 2, conv_shape, 1, &conv))) return st;
    gw->conv = b->next;
    b->next += C * K;
    for (int64_t i = 0; i < C * K; i++) gw->conv[i] = q35_tensor_get_f32(&conv, i);
    if ((st = gvec(b, NAME("ssm_dt.bias"), Hv, &gw->dt_bias))) return st;
    if ((st = gvec(b, NAME("ssm_a"), Hv, &gw->neg_exp_A))) return st;
    if ((st = gvec(b, NAME("ssm_norm.weight"), dv, &gw->norm))) return st;
#undef NAME
    return Q35_OK;
}

static q35_status bind(struct q35_model *m) {
    const q35_config *c = &m->cfg;
    gbind b = {m, m->gguf, NULL, 1};
    /* q35-layout files (gguf.h) hold the model as q35 binds it after conversion: matrices in the R16
     * interleave point straight into the mapping (nothing repacked or copied at load), and the V heads
     * in the order the converted model had (q35.v_heads_tiled; absent: llama.cpp's tiled order). */
    q35_status st = m->gguf->g.q35_version ? q35_gguf_get_bool(&m->gguf->g, "q35.v_heads_tiled", 0, &b.v_tiled) : Q35_OK;
    if (st) return st;
    size_t small = (size_t)c->hidden;
    for (int i = 0; i < c->n_layers; i++) {
        small += 2 * (size_t)c->hidden;
        if (c->layer_full[i]) small += 2 * (size_t)c->head_dim;
        else small += (size_t)q35_cfg_conv_channels(c) * c->conv_kernel + 2 * (size_t)c->lin_v_heads + c->lin_v_dim;
    }
    /* Each of these floats is stored in the file in at least 2 bytes: refuse metadata that asks for more
     * before allocating (the binding would fail on a missing or short tensor anyway). */
    if (small > m->gguf->g.map.size / 2)
        return q35_fail(Q35_ERR_FORMAT, "%s: the metadata describes %zu norm/conv/decay weights, more than the file can hold", m->gguf->g.path, small);
    m->small = malloc(small * sizeof(float));
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->small || !m->layers) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory for the model's small weights", m->gguf->g.path);
    b.next = m->small;
    if ((st = gmatrix(&b, "token_embd.weight", c->vocab, c->hidden, &m->embed))) return st;
    if ((st = gvec(&b, "output_norm.weight", c->hidden, &m->final_norm))) return st;
    for (int i = 0; i < c->n_layers; i++)
        if ((st = bind_layer(&b, i, &m->layers[i]))) return st;
    if (c->tie_embeddings) m->lm_head = m->embed;
    else if ((st = gmatrix(&b, "output.weight", c->vocab, c->hidden, &m->lm_head))) return st;
    return Q35_OK;
}

q35_status q35_model_open_gguf(struct q35_model *m, const char *path, int load) {
    m->gguf = calloc(1, sizeof *m->gguf);
    if (!m->gguf) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    q35_status st = q35_gguf_open(path, load, &m->gguf->g);
    if (!st) st = q35_gguf_config(&m->gguf->g, &m->cfg);
    if (!st) {
        m->dir = strdup(path);
        if (!m->dir) st = q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    if (!st) st = bind(m);
    return st;
}

const q35_gguf *q35_model_gguf(const struct q35_model *m) { return m->gguf ? &m->gguf->g : NULL; }

void q35_model_close_gguf(struct q35_model *m) {
    struct q35_gguf_model *gm = m->gguf;
    if (!gm) return;
    q35_gguf_close(&gm->g);
    free(gm);
    m->gguf = NULL;
}

/* ---------------------------------------------------------------- export */

static q35_status ex_add(q35_gguf_export *e, int as_bound, const char *name, const q35_tensor *t) {
    if (t->layout != Q35_LAYOUT_ROWS && !as_bound)
        return q35_fail(Q35_ERR_UNSUPPORTED, "tensor '%s' is in the interleaved layout of the kernels: export the model before repacking", name);
    q35_gguf_named_tensor *v = realloc(e->v, (size_t)(e->n + 1) * sizeof *v);
    if (!v) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    e->v = v;
    q35_gguf_named_tensor *x = &e->v[e->n++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->t = *t;
    x->t.name = x->name;
    return Q35_OK;
}

static q35_status ex_own(q35_gguf_export *e, void *p) {
    if (!p) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    void **v = realloc(e->owned, (size_t)(e->n_owned + 1) * sizeof *v);
    if (!v) {
        free(p);
        return q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    e->owned = v;
    e->owned[e->n_owned++] = p;
    return Q35_OK;
}

/* An F32 tensor of shape [n] or [rows, cols] over floats (copied only when permuted). */
static q35_tensor f32_tensor(const float *data, int ndim, int64_t d0, int64_t d1) {
    q35_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = Q35_DT_F32;
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = d1;
    t.data = data;
    t.nbytes = (size_t)(ndim == 1 ? d0 : d0 * d1) * sizeof(float);
    return t;
}

/* Permuted float copy: n heads of d floats, tiled order. */
static float *tiled_floats(const float *src, int64_t n_heads, int64_t Hk, int64_t d) {
    float *dst = malloc((size_t)(n_heads * d) * sizeof *dst);
    if (!dst) return NULL;
    for (int64_t h = 0; h < n_heads; h++) memcpy(dst + h * d, src + hf_head_at(h, Hk, n_heads / Hk) * d, (size_t)d * sizeof *dst);
    return dst;
}

static q35_status export_model(const struct q35_model *m, int as_bound, q35_gguf_export *e);
q35_status q35_gguf_export_model(const struct q35_model *m, q35_gguf_export *e) { return export_model(m, 0, e); }
q35_status q35_gguf_export_bound(const struct q35_model *m, q35_gguf_export *e) { return export_model(m, 1, e); }

static q35_status export_model(const struct q35_model *m, int as_bound, q35_gguf_export *e) {
    memset(e, 0, sizeof *e);
    const q35_config *c = &m->cfg;
    const int64_t H = c->hidden;
    char n[96];
    q35_status st;
    q35_tensor t;
#define ADD(name, tensor) do { if ((st = ex_add(e, as_bound, (name), (tensor)))) goto fail; } while (0)
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    ADD("token_embd.weight", &m->embed);
    t = f32_tensor(m->final_norm, 1, H, 0);
    ADD("output_norm.weight", &t);
    if (!c->tie_embeddings) ADD("output.weight", &m->lm_head);
    for (int il = 0; il < c->n_layers; il++) {
        const q35_layer_weights *L = &m->layers[il];
        t = f32_tensor(L->in_norm, 1, H, 0);
        ADD(NAME("attn_norm.weight"), &t);
        t = f32_tensor(L->post_norm, 1, H, 0);
        ADD(NAME("post_attention_norm.weight"), &t);
        if (L->is_full) {
            const q35_attn_weights *a = &L->attn;
            ADD(NAME("attn_q.weight"), &a->q);
            ADD(NAME("attn_k.weight"), &a->k);
            ADD(NAME("attn_v.weight"), &a->v);
            ADD(NAME("attn_output.weight"), &a->o);
            t = f32_tensor(a->q_norm, 1, c->head_dim, 0);
            ADD(NAME("attn_q_norm.weight"), &t);
            t = f32_tensor(a->k_norm, 1, c->head_dim, 0);
            ADD(NAME("attn_k_norm.weight"), &t);
        } else {
            const q35_gdn_weights *gw = &L->gdn;
            const int64_t Hk = c->lin_k_heads, Hv = c->lin_v_heads, dv = c->lin_v_dim, kd = Hk * c->lin_k_dim;
            const int64_t C = q35_cfg_conv_channels(c), K = c->conv_kernel;
            q35_tensor qkv = gw->in_qkv, z = gw->in_z, bb = gw->in_b, aa = gw->in_a, out = gw->out;
            const float *conv = gw->conv, *dt = gw->dt_bias, *A = gw->neg_exp_A;
            if (Hv != Hk && !gw->v_tiled && !as_bound) { /* grouped -> tiled, as _LinearAttentionVReorderBase */
                const q35_tensor *mats[] = {&gw->in_qkv, &gw->in_z, &gw->in_b, &gw->in_a, &gw->out};
                for (int k = 0; k < 5; k++)
                    if (mats[k]->layout != Q35_LAYOUT_ROWS) {
                        st = q35_fail(Q35_ERR_UNSUPPORTED, "layer %d: tensors in the interleaved layout of the kernels: export the model before repacking", il);
                        goto fail;
                    }
                void *p;
#define OWN(dst, expr) do { p = (expr); if ((st = ex_own(e, p))) goto fail; (dst) = p; } while (0)
                OWN(qkv.data, tile_rows(&gw->in_qkv, 2 * kd, Hv, Hk, dv));
                OWN(z.data, tile_rows(&gw->in_z, 0, Hv, Hk, dv));
                OWN(bb.data, tile_rows(&gw->in_b, 0, Hv, Hk, 1));
                OWN(aa.data, tile_rows(&gw->in_a, 0, Hv, Hk, 1));
                if (q35_row_bytes(out.dtype, dv) == 0) {
                    st = q35_fail(Q35_ERR_UNSUPPORTED, "layer %d: out_proj in %s with value heads of %lld columns (not whole blocks) cannot be reordered for GGUF",
                                  il, q35_dtype_name(out.dtype), (long long)dv);
                    goto fail;
                }
                OWN(out.data, tile_cols(&gw->out, Hv, Hk, dv));
#undef OWN
                float *cv = malloc((size_t)(C * K) * sizeof *cv);
                if ((st = ex_own(e, cv))) goto fail;
                memcpy(cv, gw->conv, (size_t)(2 * kd * K) * sizeof *cv);
                float *vpart = tiled_floats(gw->conv + 2 * kd * K, Hv, Hk, dv * K);
                if ((st = ex_own(e, vpart))) goto fail;
                memcpy(cv + 2 * kd * K, vpart, (size_t)(Hv * dv * K) * sizeof *cv);
                conv = cv;
                float *dtc = tiled_floats(gw->dt_bias, Hv, Hk, 1), *Ac = tiled_floats(gw->neg_exp_A, Hv, Hk, 1);
                if ((st = ex_own(e, dtc))) { free(Ac); goto fail; }
                if ((st = ex_own(e, Ac))) goto fail;
                dt = dtc, A = Ac;
            }
            ADD(NAME("attn_qkv.weight"), &qkv);
            ADD(NAME("attn_gate.weight"), &z);
            ADD(NAME("ssm_beta.weight"), &bb);
            ADD(NAME("ssm_alpha.weight"), &aa);
            ADD(NAME("ssm_out.weight"), &out);
            t = f32_tensor(conv, 2, C, K);
            ADD(NAME("ssm_conv1d.weight"), &t);
            t = f32_tensor(dt, 1, Hv, 0);
            ADD(NAME("ssm_dt.bias"), &t);
            t = f32_tensor(A, 1, Hv, 0);
            ADD(NAME("ssm_a"), &t);
            t = f32_tensor(gw->norm, 1, dv, 0);
            ADD(NAME("ssm_norm.weight"), &t);
        }
        ADD(NAME("ffn_gate.weight"), &L->mlp_gate);
        ADD(NAME("ffn_up.weight"), &L->mlp_up);
        ADD(NAME("ffn_down.weight"), &L->mlp_down);
    }
#undef ADD
#undef NAME
    return Q35_OK;
fail:
    q35_gguf_export_free(e);
    return st;
}

void q35_gguf_export_free(q35_gguf_export *e) {
    for (int i = 0; i < e->n_owned; i++) free(e->owned[i]);
    free(e->owned);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* ---------------------------------------------------------------- writing */

/* tokenizer.ggml.* from a Hugging Face tokenizer directory, as the converter writes them
 * (TextModel._set_vocab_gpt2 + gguf.SpecialVocab): vocab rows without a token are "[PAD<i>]"
 * (UNUSED), added tokens CONTROL when special (or "<|...|>"), else USER_DEFINED. */
enum { TOK_NORMAL = 1, TOK_UNUSED = 5, TOK_CONTROL = 3, TOK_USER_DEFINED = 4 };

static q35_status write_tokenizer(q35_gguf_writer *w, const char *dir, int vocab) {
    char path[4096];
    q35_status st = q35_path_join(path, sizeof path, dir, "tokenizer.json");
    if (st) return st;
    cJSON *tj = NULL, *tc = NULL;
    if ((st = q35_json_load_file(path, 1u << 28, &tj))) return st;
    const char **tok = calloc((size_t)vocab, sizeof *tok);
    size_t *len = calloc((size_t)vocab, sizeof *len);
    int32_t *type = calloc((size_t)vocab, sizeof *type);
    char *pads = malloc((size_t)vocab * 16);
    const char **merges = NULL;
    size_t *merge_len = NULL;
    char *merge_buf = NULL;
    if (!tok || !len || !type || !pads) { st = q35_fail(Q35_ERR_NOMEM, "out of memory"); goto done; }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model"), *v = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *mg = cJSON_GetObjectItemCaseSensitive(model, "merges"), *added = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsObject(v) || !cJSON_IsArray(mg) || !cJSON_IsString(mtype) || strcmp(mtype->valuestring, "BPE") != 0) {
        st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: expected a BPE model with 'vocab' and 'merges'", path);
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= vocab) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: token '%.60s' has id %g, outside the model's %d rows", path, it->string, it->valuedouble, vocab);
            goto done;
        }
        tok[it->valueint] = it->string;
        type[it->valueint] = TOK_NORMAL;
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id"), *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || id->valuedouble < 0 || id->valuedouble >= vocab) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: added_tokens: an entry without a valid id and content (the model has %d rows)", path, vocab);
            goto done;
        }
        const char *c = content->valuestring;
        size_t n = strlen(c);
        const int looks = n >= 4 && strncmp(c, "<|", 2) == 0 && strcmp(c + n - 2, "|>") == 0;
        tok[id->valueint] = c;
        type[id->valueint] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) || looks ? TOK_CONTROL : TOK_USER_DEFINED;
    }
    for (int i = 0; i < vocab; i++) {
        if (!tok[i]) {
            snprintf(pads + (size_t)i * 16, 16, "[PAD%d]", i);
            tok[i] = pads + (size_t)i * 16;
            type[i] = TOK_UNUSED;
        }
        len[i] = strlen(tok[i]);
    }
    /* merges: "a b" strings, or [a, b] pairs (newer tokenizers) joined with a space. */
    const int nm = cJSON_GetArraySize(mg);
    size_t total = 0;
    cJSON_ArrayForEach(it, mg) {
        if (cJSON_IsString(it)) total += strlen(it->valuestring) + 1;
        else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) && cJSON_IsString(cJSON_GetArrayItem(it, 1)))
            total += strlen(cJSON_GetArrayItem(it, 0)->valuestring) + strlen(cJSON_GetArrayItem(it, 1)->valuestring) + 2;
        else { st = q35_fail(Q35_ERR_FORMAT, "%s: model.merges: each entry must be \"a b\" or [a, b]", path); goto done; }
    }
    merges = calloc((size_t)(nm ? nm : 1), sizeof *merges);
    merge_len = calloc((size_t)(nm ? nm : 1), sizeof *merge_len);
    merge_buf = malloc(total ? total : 1);
    if (!merges || !merge_len || !merge_buf) { st = q35_fail(Q35_ERR_NOMEM, "out of memory"); goto done; }
    char *mp = merge_buf;
    int k = 0;
    cJSON_ArrayForEach(it, mg) {
        if (cJSON_IsString(it)) merges[k] = it->valuestring, merge_len[k] = strlen(it->valuestring);
        else {
            int n = sprintf(mp, "%s %s", cJSON_GetArrayItem(it, 0)->valuestring, cJSON_GetArrayItem(it, 1)->valuestring);
            merges[k] = mp, merge_len[k] = (size_t)n, mp += n + 1;
        }
        k++;
    }
#define S(call) do { if (!st) st = (call); } while (0)
    S(q35_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    S(q35_gguf_set_str(w, "tokenizer.ggml.pre", "qwen35"));
    S(q35_gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, len, (size_t)vocab));
    S(q35_gguf_set_arr_i32(w, "tokenizer.ggml.token_type", type, (size_t)vocab));
    S(q35_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, merge_len, (size_t)nm));
    if (st) goto done;
    /* Special tokens, add_*_token and the chat template from tokenizer_config.json (SpecialVocab). */
    if ((st = q35_path_join(path, sizeof path, dir, "tokenizer_config.json"))) goto done;
    if (q35_file_exists(path) && (st = q35_json_load_file(path, 1u << 26, &tc))) goto done;
    static const char *const typ[7] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
    static const char *const key[7] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                                       "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
                                       "tokenizer.ggml.mask_token_id"};
    for (int t = 0; tc && t < 7; t++) {
        char f[32];
        snprintf(f, sizeof f, "%s_token", typ[t]);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(tc, f);
        if (cJSON_IsObject(e)) e = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (cJSON_IsString(e)) {
            cJSON_ArrayForEach(it, added) {
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
                if (cJSON_IsString(c) && strcmp(c->valuestring, e->valuestring) == 0) {
                    S(q35_gguf_set_u32(w, key[t], (uint32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valueint));
                    break;
                }
            }
        }
    }
    for (int t = 0; tc && t < 7; t++) {
        char f[32];
        snprintf(f, sizeof f, "add_%s_token", typ[t]);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(tc, f);
        char k2[64];
        snprintf(k2, sizeof k2, "tokenizer.ggml.add_%s_token", typ[t]);
        if (cJSON_IsBool(e)) S(q35_gguf_set_bool(w, k2, cJSON_IsTrue(e)));
    }
    const cJSON *tmpl = tc ? cJSON_GetObjectItemCaseSensitive(tc, "chat_template") : NULL;
    if (cJSON_IsString(tmpl)) {
        S(q35_gguf_set_str(w, "tokenizer.chat_template", tmpl->valuestring));
    } else if (!st && !q35_path_join(path, sizeof path, dir, "chat_template.jinja") && q35_file_exists(path)) {
        char *text;
        size_t n;
        if (!(st = q35_read_file(path, 1u << 24, &text, &n))) {
            st = q35_gguf_set_strn(w, "tokenizer.chat_template", text, n);
            free(text);
        }
    }
#undef S
done:
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    free(tok);
    free(len);
    free(type);
    free(pads);
    free(merges);
    free(merge_len);
    free(merge_buf);
    return st;
}

/* llama_ftype of the layer matrices (general.file_type). */
static uint32_t file_type(const q35_gguf_named_tensor *t, int n) {
    for (int i = 0; i < n; i++) {
        if (strcmp(t[i].name, "blk.0.ffn_up.weight") != 0) continue;
        switch (t[i].t.dtype) {
        case Q35_DT_F32: return 0;
        case Q35_DT_F16: return 1;
        case Q35_DT_Q4_0: case Q35_DT_Q4R: return 2; /* Q4R: same bits (q35-layout files only) */
        case Q35_DT_Q8_0: return 7;
        case Q35_DT_Q4_K: return 15; /* Q4_K_M */
        case Q35_DT_Q6_K: return 18;
        case Q35_DT_BF16: return 32;
        default: return 0;
        }
    }
    return 0;
}

q35_status q35_gguf_write_model(const char *path, const q35_config *c, const q35_gguf_named_tensor *t, int n, const q35_gguf_write_opts *opts) {
    q35_gguf_writer *w;
    q35_status st = q35_gguf_writer_new(&w);
    if (st) return st;
    /* full_attention_interval when the layer pattern is one; else the per-layer recurrent mask. */
    int interval = 0;
    for (int k = 1; k <= c->n_layers && !interval; k++) {
        int ok = 1;
        for (int i = 0; i < c->n_layers && ok; i++) ok = c->layer_full[i] == ((i + 1) % k == 0);
        if (ok) interval = k;
    }
    const int32_t sections[4] = {c->mrope_section[0], c->mrope_section[1], c->mrope_section[2], 0};
#define S(call) do { if (!st) st = (call); } while (0)
    S(q35_gguf_set_str(w, "general.architecture", ARCH));
    S(q35_gguf_set_str(w, "general.type", "model"));
    S(q35_gguf_set_str(w, "general.name", opts && opts->name ? opts->name : ARCH));
    S(q35_gguf_set_u32(w, ARCH ".block_count", (uint32_t)c->n_layers));
    S(q35_gguf_set_u32(w, ARCH ".context_length", (uint32_t)c->max_pos));
    S(q35_gguf_set_u32(w, ARCH ".embedding_length", (uint32_t)c->hidden));
    S(q35_gguf_set_u32(w, ARCH ".feed_forward_length", (uint32_t)c->intermediate));
    S(q35_gguf_set_u32(w, ARCH ".attention.head_count", (uint32_t)c->n_heads));
    S(q35_gguf_set_u32(w, ARCH ".attention.head_count_kv", (uint32_t)c->n_kv_heads));
    S(q35_gguf_set_arr_i32(w, ARCH ".rope.dimension_sections", sections, 4));
    S(q35_gguf_set_f32(w, ARCH ".rope.freq_base", (float)c->rope_theta));
    S(q35_gguf_set_f32(w, ARCH ".attention.layer_norm_rms_epsilon", c->rms_eps));
    S(q35_gguf_set_u32(w, ARCH ".attention.key_length", (uint32_t)c->head_dim));
    S(q35_gguf_set_u32(w, ARCH ".attention.value_length", (uint32_t)c->head_dim));
    S(q35_gguf_set_u32(w, "general.file_type", file_type(t, n)));
    S(q35_gguf_set_u32(w, ARCH ".ssm.conv_kernel", (uint32_t)c->conv_kernel));
    S(q35_gguf_set_u32(w, ARCH ".ssm.state_size", (uint32_t)c->lin_k_dim));
    S(q35_gguf_set_u32(w, ARCH ".ssm.group_count", (uint32_t)c->lin_k_heads));
    S(q35_gguf_set_u32(w, ARCH ".ssm.time_step_rank", (uint32_t)c->lin_v_heads));
    S(q35_gguf_set_u32(w, ARCH ".ssm.inner_size", (uint32_t)(c->lin_v_dim * c->lin_v_heads)));
    if (interval) {
        S(q35_gguf_set_u32(w, ARCH ".full_attention_interval", (uint32_t)interval));
    } else {
        unsigned char rec[Q35_MAX_LAYERS];
        for (int i = 0; i < c->n_layers; i++) rec[i] = !c->layer_full[i];
        S(q35_gguf_set_arr_bool(w, ARCH ".attention.recurrent_layers", rec, (size_t)c->n_layers));
    }
    S(q35_gguf_set_u32(w, ARCH ".rope.dimension_count", (uint32_t)c->rope_dim));
    S(q35_gguf_set_u32(w, "general.quantization_version", 2));
    if (opts && opts->q35_layout) { /* gguf.h: q35's own file; q35_gguf_add_tensor accepts its types after this */
        S(q35_gguf_set_u32(w, "q35.format_version", Q35_GGUF_Q35_VERSION));
        S(q35_gguf_set_str(w, "q35.layout", "r16"));
        S(q35_gguf_set_bool(w, "q35.v_heads_tiled", opts->v_heads_tiled));
        S(q35_gguf_set_u32(w, "general.alignment", Q35_GGUF_Q35_ALIGN));
    }
    if (opts && opts->tokenizer_gguf) {
        const q35_gguf *src = opts->tokenizer_gguf;
        for (int i = 0; i < src->n_kv; i++)
            if (strncmp(src->kv[i].key, "tokenizer.", 10) == 0) S(q35_gguf_copy_kv(w, &src->kv[i]));
    } else if (opts && opts->tokenizer_dir) S(write_tokenizer(w, opts->tokenizer_dir, c->vocab));
    else if (c->n_eos > 0) S(q35_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_ids[0]));
#undef S
    for (int i = 0; !st && i < n; i++) st = q35_gguf_add_tensor(w, t[i].name, &t[i].t);
    if (!st) st = q35_gguf_write(w, path);
    q35_gguf_writer_free(w);
    return st;
}
