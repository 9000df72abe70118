/* Binding the vision tower (model.visual.*, spec §2.3): every tensor checked by name, shape and
 * dtype (bf16, f16 or f32, as stored; the matrices stay in the mapping and are read by the
 * project's matmul kernels); LayerNorm weights, biases and the position table are copied to float32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "model/model.h"

typedef struct {
    const q35_st_index *st;
    const char *prefix, *what;
    q35_vision_weights *w;
    float *next; /* bump pointer into w->small */
} vbinder;

static q35_status vfind(vbinder *b, const char *name, int ndim, const int64_t *shape, q35_tensor *out) {
    const q35_status st = q35_bind_float(b->st, b->prefix, name, ndim, shape, b->what, "vision ", out);
    if (!st) b->w->weight_bytes += out->nbytes;
    return st;
}

static q35_status vmatrix(vbinder *b, const char *name, int64_t rows, int64_t cols, q35_tensor *out) {
    int64_t shape[2] = {rows, cols};
    return vfind(b, name, 2, shape, out);
}

/* A float32 copy of a tensor of n elements (given shape). */
static q35_status vcopy(vbinder *b, const char *name, int ndim, const int64_t *shape, int64_t n, float **out) {
    q35_tensor t;
    q35_status st = vfind(b, name, ndim, shape, &t);
    if (st) return st;
    float *dst = b->next;
    b->next += n;
    for (int64_t i = 0; i < n; i++) dst[i] = q35_tensor_get_f32(&t, i);
    *out = dst;
    return Q35_OK;
}

static q35_status vvec(vbinder *b, const char *name, int64_t n, float **out) { return vcopy(b, name, 1, &n, n, out); }

q35_status q35_vision_bind(const q35_st_index *st, const char *prefix, const q35_vision_config *vc, const char *what, q35_vision_weights *w) {
    memset(w, 0, sizeof *w);
    const int64_t D = vc->hidden, I = vc->intermediate, P = q35_vision_patch_dim(vc), M = (int64_t)vc->merge * vc->merge * D;
    const int64_t O = vc->out_hidden, NP = vc->n_pos;
    const size_t small = (size_t)D + (size_t)NP * D + (size_t)vc->depth * (4 * D + 3 * D + D + I + D) + 2 * D + M + O;
    w->small = malloc(small * sizeof(float));
    w->blocks = calloc((size_t)vc->depth, sizeof *w->blocks);
    if (!w->small || !w->blocks) {
        q35_vision_weights_free(w);
        return q35_fail(Q35_ERR_NOMEM, "%s: out of memory for the vision weights", what);
    }
    vbinder b = {st, prefix, what, w, w->small};
    q35_status s;
    /* Conv3d(C -> D, kernel = stride = (Tp, p, p)): its [D][C][Tp][p][p] kernel is a [D][P] matrix whose
     * columns are in the order of a pixel_values row ([c][t][y][x], spec §5.1). */
    int64_t conv_shape[5] = {D, vc->in_channels, vc->temporal_patch, vc->patch, vc->patch};
    if ((s = vfind(&b, "patch_embed.proj.weight", 5, conv_shape, &w->patch))) goto fail;
    w->patch.ndim = 2, w->patch.shape[0] = D, w->patch.shape[1] = P;
    if ((s = vvec(&b, "patch_embed.proj.bias", D, &w->patch_b))) goto fail;
    int64_t pos_shape[2] = {NP, D};
    if ((s = vcopy(&b, "pos_embed.weight", 2, pos_shape, NP * D, &w->pos))) goto fail;
    for (int j = 0; j < vc->depth; j++) {
        q35_vision_block *B = &w->blocks[j];
        char n[128];
#define NAME(fmt) (snprintf(n, sizeof n, "blocks.%d." fmt, j), n)
        if ((s = vvec(&b, NAME("norm1.weight"), D, &B->norm1_w))) goto fail;
        if ((s = vvec(&b, NAME("norm1.bias"), D, &B->norm1_b))) goto fail;
        if ((s = vvec(&b, NAME("norm2.weight"), D, &B->norm2_w))) goto fail;
        if ((s = vvec(&b, NAME("norm2.bias"), D, &B->norm2_b))) goto fail;
        if ((s = vmatrix(&b, NAME("attn.qkv.weight"), 3 * D, D, &B->qkv))) goto fail;
        if ((s = vvec(&b, NAME("attn.qkv.bias"), 3 * D, &B->qkv_b))) goto fail;
        if ((s = vmatrix(&b, NAME("attn.proj.weight"), D, D, &B->proj))) goto fail;
        if ((s = vvec(&b, NAME("attn.proj.bias"), D, &B->proj_b))) goto fail;
        if ((s = vmatrix(&b, NAME("mlp.linear_fc1.weight"), I, D, &B->fc1))) goto fail;
        if ((s = vvec(&b, NAME("mlp.linear_fc1.bias"), I, &B->fc1_b))) goto fail;
        if ((s = vmatrix(&b, NAME("mlp.linear_fc2.weight"), D, I, &B->fc2))) goto fail;
        if ((s = vvec(&b, NAME("mlp.linear_fc2.bias"), D, &B->fc2_b))) goto fail;
#undef NAME
    }
    if ((s = vvec(&b, "merger.norm.weight", D, &w->merge_norm_w))) goto fail;
    if ((s = vvec(&b, "merger.norm.bias", D, &w->merge_norm_b))) goto fail;
    if ((s = vmatrix(&b, "merger.linear_fc1.weight", M, M, &w->fc1))) goto fail;
    if ((s = vvec(&b, "merger.linear_fc1.bias", M, &w->fc1_b))) goto fail;
    if ((s = vmatrix(&b, "merger.linear_fc2.weight", O, M, &w->fc2))) goto fail;
    if ((s = vvec(&b, "merger.linear_fc2.bias", O, &w->fc2_b))) goto fail;
    return Q35_OK;
fail:
    q35_vision_weights_free(w);
    return s;
}

void q35_vision_weights_free(q35_vision_weights *w) {
    free(w->small);
    free(w->blocks);
    memset(w, 0, sizeof *w);
}
