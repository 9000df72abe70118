/* Model loading: config.json + safetensors -> q35_model with every tensor checked by name,
 * shape and dtype. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/hugemem.h"
#include "model/model_gguf.h"

typedef struct {
    struct q35_model *m;
    const char *what;    /* directory, for messages */
    const char *prefix;  /* "model.language_model." or "model." */
    float *next;         /* bump pointer into m->small */
} binder;

q35_status q35_bind_float(const q35_st_index *st, const char *prefix, const char *name, int ndim, const int64_t *shape,
                          const char *what, const char *kind, q35_tensor *out) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const q35_tensor *t = q35_st_find(st, full);
    if (!t) return q35_fail(Q35_ERR_MISSING, "%s: missing %stensor '%s'", what, kind, full);
    const char *file = q35_st_path_of(st, t);
    if (t->dtype != Q35_DT_F32 && t->dtype != Q35_DT_BF16 && t->dtype != Q35_DT_F16)
        return q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s' has dtype %s, expected bf16, f16 or f32", file, full, q35_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[96] = "", got[96] = "";
        for (int i = 0; i < ndim; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)shape[i]);
        for (int i = 0; i < t->ndim; i++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        return q35_fail(Q35_ERR_SHAPE, "%s: tensor '%s' has shape [%s], expected [%s]", file, full, got, want);
    }
    *out = *t;
    return Q35_OK;
}

static q35_status find(binder *b, const char *name, int ndim, const int64_t *shape, q35_tensor *out) {
    const q35_status st = q35_bind_float(&b->m->st, b->prefix, name, ndim, shape, b->what, "", out);
    if (!st) b->m->weight_bytes += out->nbytes;
    return st;
}

static q35_status matrix(binder *b, const char *name, int64_t rows, int64_t cols, q35_tensor *out) {
    int64_t shape[2] = {rows, cols};
    return find(b, name, 2, shape, out);
}

/* A small vector copied to float32; plus_one adds 1 (zero-centred RMSNorm weights). */
static q35_status vec(binder *b, const char *name, int64_t n, int plus_one, float **out) {
    q35_tensor t;
    q35_status st = find(b, name, 1, &n, &t);
    if (st) return st;
    float *dst = b->next;
    b->next += n;
    for (int64_t i = 0; i < n; i++) dst[i] = q35_tensor_get_f32(&t, i) + (plus_one ? 1.0f : 0.0f);
    *out = dst;
    return Q35_OK;
}

static q35_status bind_layer(binder *b, int il, q35_layer_weights *L) {
    const q35_config *c = &b->m->cfg;
    const int64_t H = c->hidden, F = c->intermediate;
    char n[160];
    q35_status st;
#define NAME(fmt) (snprintf(n, sizeof n, "layers.%d." fmt, il), n)
    L->is_full = c->layer_full[il];
    if ((st = vec(b, NAME("input_layernorm.weight"), H, 1, &L->in_norm))) return st;
    if ((st = vec(b, NAME("post_attention_layernorm.weight"), H, 1, &L->post_norm))) return st;
    if ((st = matrix(b, NAME("mlp.gate_proj.weight"), F, H, &L->mlp_gate))) return st;
    if ((st = matrix(b, NAME("mlp.up_proj.weight"), F, H, &L->mlp_up))) return st;
    if ((st = matrix(b, NAME("mlp.down_proj.weight"), H, F, &L->mlp_down))) return st;
    if (L->is_full) {
        q35_attn_weights *a = &L->attn;
        const int64_t hd = c->head_dim, nq = (int64_t)c->n_heads * hd * (c->attn_output_gate ? 2 : 1), nkv = (int64_t)c->n_kv_heads * hd;
        if ((st = matrix(b, NAME("self_attn.q_proj.weight"), nq, H, &a->q))) return st;
        if ((st = matrix(b, NAME("self_attn.k_proj.weight"), nkv, H, &a->k))) return st;
        if ((st = matrix(b, NAME("self_attn.v_proj.weight"), nkv, H, &a->v))) return st;
        if ((st = matrix(b, NAME("self_attn.o_proj.weight"), H, (int64_t)c->n_heads * hd, &a->o))) return st;
        if ((st = vec(b, NAME("self_attn.q_norm.weight"), hd, 1, &a->q_norm))) return st;
        if ((st = vec(b, NAME("self_attn.k_norm.weight"), hd, 1, &a->k_norm))) return st;
    } else {
        q35_gdn_weights *g = &L->gdn;
        const int64_t Hv = c->lin_v_heads, kd = (int64_t)c->lin_k_heads * c->lin_k_dim, vd = Hv * c->lin_v_dim;
        const int64_t C = 2 * kd + vd, K = c->conv_kernel;
        if ((st = matrix(b, NAME("linear_attn.in_proj_qkv.weight"), C, H, &g->in_qkv))) return st;
        if ((st = matrix(b, NAME("linear_attn.in_proj_z.weight"), vd, H, &g->in_z))) return st;
        if ((st = matrix(b, NAME("linear_attn.in_proj_b.weight"), Hv, H, &g->in_b))) return st;
        if ((st = matrix(b, NAME("linear_attn.in_proj_a.weight"), Hv, H, &g->in_a))) return st;
        if ((st = matrix(b, NAME("linear_attn.out_proj.weight"), H, vd, &g->out))) return st;
        int64_t conv_shape[3] = {C, 1, K};
        q35_tensor conv;
        if ((st = find(b, NAME("linear_attn.conv1d.weight"), 3, conv_shape, &conv))) return st;
        g->conv = b->next;
        b->next += C * K;
        for (int64_t i = 0; i < C * K; i++) g->conv[i] = q35_tensor_get_f32(&conv, i);
        if ((st = vec(b, NAME("linear_attn.dt_bias"), Hv, 0, &g->dt_bias))) return st;
        if ((st = vec(b, NAME("linear_attn.A_log"), Hv, 0, &g->neg_exp_A))) return st;
        for (int64_t i = 0; i < Hv; i++) g->neg_exp_A[i] = -expf(g->neg_exp_A[i]);
        if ((st = vec(b, NAME("linear_attn.norm.weight"), c->lin_v_dim, 0, &g->norm))) return st;
    }
#undef NAME
    return Q35_OK;
}

q35_status q35_model_bind(struct q35_model *m, const char *what) {
    const q35_config *c = &m->cfg;
    binder b = {m, what, "model.language_model.", NULL};
    char probe[128];
    snprintf(probe, sizeof probe, "%sembed_tokens.weight", b.prefix);
    if (!q35_st_find(&m->st, probe)) b.prefix = "model.";
    /* Float count of every small array, for one allocation. */
    size_t small = (size_t)c->hidden;
    for (int i = 0; i < c->n_layers; i++) {
        small += 2 * (size_t)c->hidden;
        if (c->layer_full[i]) small += 2 * (size_t)c->head_dim;
        else small += (size_t)q35_cfg_conv_channels(c) * c->conv_kernel + 2 * (size_t)c->lin_v_heads + c->lin_v_dim;
    }
    m->small = malloc(small * sizeof(float));
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->small || !m->layers) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory for the model's small weights", what);
    b.next = m->small;
    q35_status st;
    if ((st = matrix(&b, "embed_tokens.weight", c->vocab, c->hidden, &m->embed))) return st;
    if ((st = vec(&b, "norm.weight", c->hidden, 1, &m->final_norm))) return st;
    for (int i = 0; i < c->n_layers; i++)
        if ((st = bind_layer(&b, i, &m->layers[i]))) return st;
    /* LM head: stored lm_head.weight (top level, no prefix) unless the embeddings are tied. */
    const q35_tensor *head = q35_st_find(&m->st, "lm_head.weight");
    if (c->tie_embeddings || !head) {
        if (!c->tie_embeddings)
            return q35_fail(Q35_ERR_MISSING, "%s: missing tensor 'lm_head.weight' (tie_word_embeddings is false)", what);
        m->lm_head = m->embed;
    } else {
        binder hb = b;
        hb.prefix = "";
        if ((st = matrix(&hb, "lm_head.weight", c->vocab, c->hidden, &m->lm_head))) return st;
    }
    /* The vision tower, when the config has one and the files hold it (a text-only extract of a
     * multimodal checkpoint keeps its vision_config but drops model.visual.*: text works, images are
     * refused). A tower that is present must be complete. */
    if (c->has_vision_config) {
        if (q35_st_find(&m->st, "model.visual.patch_embed.proj.weight")) {
            if ((st = q35_vision_bind(&m->st, "model.visual.", &c->vision, what, &m->vision))) return st;
            m->has_vision = 1;
        } else {
            q35_log(Q35_LOG_INFO, "%s: config.json has a vision_config but the files hold no model.visual.* tensors; images are not available",
                    what);
        }
    }
    return Q35_OK;
}

q35_status q35_model_load(const char *dir, q35_model **out) { return q35_model_load_ex(dir, NULL, out); }

/* Whole-file reads of the weights mapped onto the caller's progress: bytes of the files finished
 * before plus this one's (the total grows as files open). */
typedef struct {
    const q35_load_opts *opts;
    size_t before;       /* bytes of files read completely */
    size_t current_size; /* size of the file last reported */
    int finished;        /* the last report ended that file (every file's last report has done == size) */
} read_progress;

static void on_read(const char *path, size_t done, size_t size, void *user) {
    read_progress *r = user;
    if (r->finished) r->before += r->current_size;
    r->current_size = size;
    r->finished = done == size;
    r->opts->progress(r->before + done, r->before + size, r->opts->progress_user);
}

q35_status q35_model_load_ex(const char *dir, const q35_load_opts *opts, q35_model **out) {
    *out = NULL;
    struct q35_model *m = calloc(1, sizeof *m);
    if (!m) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&m->head_lock, NULL);
    /* A .gguf file, or a directory holding one and no config.json: model_gguf.c. */
    char gguf_path[4096];
    int is_gguf = 0;
    q35_status st = q35_gguf_model_path(dir, gguf_path, sizeof gguf_path, &is_gguf);
    /* Weights converted at load end up in memory anyway: map the source, then drop it tensor by tensor. */
    const int converting = opts && opts->weights && strcmp(opts->weights, "native") != 0;
    const int load = opts && opts->load && !converting;
    read_progress rp = {opts, 0, 0, 0};
    if (opts && opts->progress && load) q35_file_set_read_progress(on_read, &rp);
    m->load_opts = opts;
    if (!st && is_gguf) {
        st = q35_model_open_gguf(m, gguf_path, load);
    } else if (!st) {
        st = q35_config_load(dir, &m->cfg);
        if (!st) st = q35_st_open_dir_ex(dir, load, &m->st);
        if (!st) {
            m->dir = strdup(dir);
            if (!m->dir) st = q35_fail(Q35_ERR_NOMEM, "out of memory");
        }
        if (!st) st = q35_model_bind(m, dir);
    }
    q35_file_set_read_progress(NULL, NULL);
    if (!st) st = q35_model_convert_weights(m, opts ? opts->weights : NULL);
    m->load_opts = NULL;
    if (st) {
        q35_model_free(m);
        return st;
    }
    q35_log(Q35_LOG_INFO, "loaded %s: %d layers (%d linear, %d full), hidden %d, vocab %d, %.1f MB of weights", dir, m->cfg.n_layers,
            m->cfg.n_linear, m->cfg.n_full, m->cfg.hidden, m->cfg.vocab, m->weight_bytes / 1e6);
    *out = m;
    return Q35_OK;
}

void q35_model_free(q35_model *m) {
    if (!m) return;
    q35_st_close(&m->st);
    q35_model_close_gguf(m);
    q35_greedy_free_head(m);
    pthread_mutex_destroy(&m->head_lock);
    for (int i = 0; i < m->n_owned; i++) q35_huge_free(m->owned[i]);
    free(m->owned);
    free(m->small);
    free(m->layers);
    q35_vision_weights_free(&m->vision);
    free(m->dir);
    free(m);
}

void q35_model_get_info(const q35_model *m, q35_model_info *info) {
    memset(info, 0, sizeof *info);
    info->n_layers = m->cfg.n_layers;
    info->n_vocab = m->cfg.vocab;
    info->hidden = m->cfg.hidden;
    info->max_ctx = m->cfg.max_pos;
    info->n_linear_layers = m->cfg.n_linear;
    info->n_full_layers = m->cfg.n_full;
    info->weight_bytes = m->weight_bytes;
    size_t per_token = m->lm_head.nbytes;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const q35_layer_weights *L = &m->layers[i];
        const q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                                  &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.in_b, &L->gdn.in_a, &L->gdn.out};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
            if (!ts[k]->data) continue;
            per_token += ts[k]->nbytes;
        }
    }
    info->bytes_per_token = per_token;
    const q35_config *c = &m->cfg; /* runtime/state.h's q35_conv_floats + q35_rec_floats */
    info->state_bytes = sizeof(float) * (size_t)c->n_linear *
                        ((size_t)(c->conv_kernel - 1) * q35_cfg_conv_channels(c) + (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim);
    info->kv_bytes_per_pos = sizeof(float) * 2 * (size_t)c->n_full * c->n_kv_heads * c->head_dim;
    info->weight_format = q35_dtype_name(m->layers[0].mlp_gate.dtype);
    info->head_format = q35_dtype_name(m->lm_head.dtype);
    info->arch = m->cfg.arch;
}
