#include "model/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "model/config.h"

uint64_t q35_fnv1a64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

q35_dtype q35_synth_rule(const char *name, int ndim, const int64_t *shape, float *center, float *scale) {
    const int vision = strncmp(name, "model.visual.", 13) == 0 || strstr(name, ".visual.") != NULL;
    *center = 0.0f;
    if (ends_with(name, "linear_attn.A_log")) { *center = -2.0f; *scale = 1.0f; return Q35_DT_F32; }
    if (ends_with(name, "linear_attn.norm.weight")) { *center = 1.0f; *scale = 0.1f; return Q35_DT_F32; }
    if (ends_with(name, "linear_attn.dt_bias")) { *scale = 1.0f; return Q35_DT_BF16; }
    if (ends_with(name, "linear_attn.conv1d.weight")) { *scale = 0.5f; return Q35_DT_BF16; }
    if (ends_with(name, "norm.weight") && !vision) { *scale = 0.1f; return Q35_DT_BF16; }
    if (ends_with(name, ".bias")) { *scale = 0.02f; return Q35_DT_BF16; }
    if (ndim == 1) { *center = 1.0f; *scale = 0.1f; return Q35_DT_BF16; } /* vision LayerNorm weights */
    int64_t fan_in = 1; /* [out, in, ...]: every axis after the first */
    for (int d = 1; d < ndim; d++) fan_in *= shape[d];
    *scale = (float)(1.0 / sqrt((double)fan_in));
    return Q35_DT_BF16;
}

void q35_synth_fill(const char *name, uint64_t seed, q35_dtype dtype, float center, float scale, int64_t numel, void *out) {
    const uint64_t key = q35_fnv1a64(name, strlen(name), Q35_FNV_OFFSET) ^ seed;
    for (int64_t i = 0; i < numel; i++) {
        uint64_t z = key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z = z ^ (z >> 31);
        volatile float u = (float)(z >> 40) * (1.0f / 16777216.0f); /* volatile: no contraction into an FMA */
        volatile float r = 2.0f * u - 1.0f;
        volatile float v = scale * r;
        if (center != 0.0f) v = v + center;
        if (dtype == Q35_DT_F32) ((float *)out)[i] = v;
        else ((uint16_t *)out)[i] = q35_f32_to_bf16(v);
    }
}

q35_status q35_synth_write(const char *path, uint64_t seed, const q35_synth_tensor *list, int n) {
    /* Header: {"name": {"dtype": .., "shape": [..], "data_offsets": [b, e]}, ...} padded with spaces to 8 bytes. */
    size_t cap = 256 + (size_t)n * 320, len = 0;
    char *hdr = malloc(cap);
    if (!hdr) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const q35_synth_tensor *t = &list[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        uint64_t bytes = (uint64_t)numel * q35_dtype_size(t->dtype);
        len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t->name,
                                t->dtype == Q35_DT_F32 ? "F32" : "BF16");
        for (int d = 0; d < t->ndim; d++) len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(hdr);
        return q35_fail(Q35_ERR_IO, "%s: cannot create", tmp);
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((uint64_t)len >> (8 * i));
    int ok = fwrite(lenbuf, 1, 8, f) == 8 && fwrite(hdr, 1, len, f) == len;
    free(hdr);
    for (int i = 0; ok && i < n; i++) {
        const q35_synth_tensor *t = &list[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        float center, scale;
        q35_synth_rule(t->name, t->ndim, t->shape, &center, &scale);
        size_t bytes = (size_t)numel * q35_dtype_size(t->dtype);
        void *buf = malloc(bytes ? bytes : 1);
        if (!buf) { ok = 0; break; }
        q35_synth_fill(t->name, seed, t->dtype, center, scale, numel, buf);
        ok = fwrite(buf, 1, bytes, f) == bytes;
        free(buf);
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return q35_fail(Q35_ERR_IO, "%s: write failed", path);
    }
    return Q35_OK;
}

static void add(q35_synth_tensor *l, int *n, const char *prefix, const char *name, int layer, int64_t d0, int64_t d1, int64_t d2) {
    q35_synth_tensor *t = &l[(*n)++];
    char nm[160];
    if (layer >= 0) snprintf(nm, sizeof nm, "layers.%d.%s", layer, name);
    else snprintf(nm, sizeof nm, "%s", name);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, nm);
    float center, scale;
    t->ndim = d2 ? 3 : d1 ? 2 : 1;
    t->shape[0] = d0, t->shape[1] = d1, t->shape[2] = d2;
    t->dtype = q35_synth_rule(t->name, t->ndim, t->shape, &center, &scale);
}

q35_status q35_synth_list(const q35_config *c, q35_synth_tensor **list, int *n) {
    q35_synth_tensor *l = calloc((size_t)c->n_layers * 16 + 4, sizeof *l);
    if (!l) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    const char *p = c->is_wrapper ? "model.language_model." : "model.";
    const int64_t H = c->hidden, F = c->intermediate, hd = c->head_dim;
    const int64_t kd = (int64_t)c->lin_k_heads * c->lin_k_dim, vd = (int64_t)c->lin_v_heads * c->lin_v_dim;
    int k = 0;
    add(l, &k, p, "embed_tokens.weight", -1, c->vocab, H, 0);
    for (int i = 0; i < c->n_layers; i++) {
        add(l, &k, p, "input_layernorm.weight", i, H, 0, 0);
        add(l, &k, p, "post_attention_layernorm.weight", i, H, 0, 0);
        add(l, &k, p, "mlp.gate_proj.weight", i, F, H, 0);
        add(l, &k, p, "mlp.up_proj.weight", i, F, H, 0);
        add(l, &k, p, "mlp.down_proj.weight", i, H, F, 0);
        if (c->layer_full[i]) {
            add(l, &k, p, "self_attn.q_proj.weight", i, c->n_heads * hd * (c->attn_output_gate ? 2 : 1), H, 0);
            add(l, &k, p, "self_attn.k_proj.weight", i, c->n_kv_heads * hd, H, 0);
            add(l, &k, p, "self_attn.v_proj.weight", i, c->n_kv_heads * hd, H, 0);
            add(l, &k, p, "self_attn.o_proj.weight", i, H, c->n_heads * hd, 0);
            add(l, &k, p, "self_attn.q_norm.weight", i, hd, 0, 0);
            add(l, &k, p, "self_attn.k_norm.weight", i, hd, 0, 0);
        } else {
            add(l, &k, p, "linear_attn.in_proj_qkv.weight", i, 2 * kd + vd, H, 0);
            add(l, &k, p, "linear_attn.in_proj_z.weight", i, vd, H, 0);
            add(l, &k, p, "linear_attn.in_proj_b.weight", i, c->lin_v_heads, H, 0);
            add(l, &k, p, "linear_attn.in_proj_a.weight", i, c->lin_v_heads, H, 0);
            add(l, &k, p, "linear_attn.conv1d.weight", i, 2 * kd + vd, 1, c->conv_kernel);
            add(l, &k, p, "linear_attn.dt_bias", i, c->lin_v_heads, 0, 0);
            add(l, &k, p, "linear_attn.A_log", i, c->lin_v_heads, 0, 0);
            add(l, &k, p, "linear_attn.norm.weight", i, c->lin_v_dim, 0, 0);
            add(l, &k, p, "linear_attn.out_proj.weight", i, H, vd, 0);
        }
    }
    add(l, &k, p, "norm.weight", -1, H, 0, 0);
    if (!c->tie_embeddings) add(l, &k, "", "lm_head.weight", -1, c->vocab, H, 0);
    *list = l;
    *n = k;
    return Q35_OK;
}

static void vadd(q35_synth_tensor *l, int *n, const char *name, int ndim, const int64_t *shape) {
    q35_synth_tensor *t = &l[(*n)++];
    float center, scale;
    snprintf(t->name, sizeof t->name, "model.visual.%s", name);
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->dtype = q35_synth_rule(t->name, t->ndim, t->shape, &center, &scale);
}

q35_status q35_synth_vision_list(const q35_vision_config *v, q35_synth_tensor **list, int *n) {
    q35_synth_tensor *l = calloc((size_t)v->depth * 12 + 16, sizeof *l);
    if (!l) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    const int64_t D = v->hidden, I = v->intermediate, M = (int64_t)v->merge * v->merge * D, O = v->out_hidden;
    int k = 0;
    char nm[128];
    const int64_t conv[5] = {D, v->in_channels, v->temporal_patch, v->patch, v->patch};
    vadd(l, &k, "patch_embed.proj.weight", 5, conv);
    vadd(l, &k, "patch_embed.proj.bias", 1, &D);
    const int64_t pos[2] = {v->n_pos, D};
    vadd(l, &k, "pos_embed.weight", 2, pos);
    for (int j = 0; j < v->depth; j++) {
#define V1(s, a) (snprintf(nm, sizeof nm, "blocks.%d." s, j), vadd(l, &k, nm, 1, (const int64_t[]){a}))
#define V2(s, a, b) (snprintf(nm, sizeof nm, "blocks.%d." s, j), vadd(l, &k, nm, 2, (const int64_t[]){a, b}))
        V1("norm1.weight", D);
        V1("norm1.bias", D);
        V1("norm2.weight", D);
        V1("norm2.bias", D);
        V2("attn.qkv.weight", 3 * D, D);
        V1("attn.qkv.bias", 3 * D);
        V2("attn.proj.weight", D, D);
        V1("attn.proj.bias", D);
        V2("mlp.linear_fc1.weight", I, D);
        V1("mlp.linear_fc1.bias", I);
        V2("mlp.linear_fc2.weight", D, I);
        V1("mlp.linear_fc2.bias", D);
#undef V1
#undef V2
    }
    vadd(l, &k, "merger.norm.weight", 1, &D);
    vadd(l, &k, "merger.norm.bias", 1, &D);
    vadd(l, &k, "merger.linear_fc1.weight", 2, (const int64_t[]){M, M});
    vadd(l, &k, "merger.linear_fc1.bias", 1, &M);
    vadd(l, &k, "merger.linear_fc2.weight", 2, (const int64_t[]){O, M});
    vadd(l, &k, "merger.linear_fc2.bias", 1, &O);
    *list = l;
    *n = k;
    return Q35_OK;
}
