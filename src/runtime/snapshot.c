/* Snapshots of a sequence's state: the session's history (tokens and keys), its exact mark (the
 * latest position on the chunk grid reached by exact evaluations, state.h), truncation back to it,
 * and the copies a prefix-cache checkpoint holds. Every copy of the scalar state goes through
 * q35_seq_scalars_get/set, so a field named in Q35_SEQ_SCALARS is carried everywhere. */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "runtime/state.h"

void q35_seq_scalars_get(const q35_session *s, q35_seq_scalars *v) {
    memset(v, 0, sizeof *v); /* padding too: the bytes go into files and checksums */
#define Q35_X_GET(type, name) v->name = s->name;
    Q35_SEQ_SCALARS(Q35_X_GET)
#undef Q35_X_GET
}

void q35_seq_scalars_set(q35_session *s, const q35_seq_scalars *v) {
#define Q35_X_SET(type, name) s->name = v->name;
    Q35_SEQ_SCALARS(Q35_X_SET)
#undef Q35_X_SET
}

size_t q35_conv_floats(const q35_config *c) { return (size_t)c->n_linear * (c->conv_kernel - 1) * q35_cfg_conv_channels(c); }
size_t q35_rec_floats(const q35_config *c) { return (size_t)c->n_linear * c->lin_v_heads * c->lin_k_dim * c->lin_v_dim; }
size_t q35_kv_row_floats(const q35_config *c) { return (size_t)c->n_kv_heads * c->head_dim; }

int q35_snapshot_exact_start(const q35_session *s) { return s->mark_scalars.pos == s->pos && s->pos % s->sc.cap == 0; }

void q35_snapshot_mark(q35_session *s) {
    const q35_config *c = &s->m->cfg;
    memcpy(s->mark_conv, s->conv, sizeof(float) * q35_conv_floats(c));
    memcpy(s->mark_rec, s->rec, sizeof(float) * q35_rec_floats(c));
    q35_seq_scalars_get(s, &s->mark_scalars);
}

const int32_t *q35_session_tokens(const q35_session *s) { return s->tokens; }
const uint64_t *q35_session_keys(const q35_session *s) { return s->keys; }
int q35_session_exact_pos(const q35_session *s) { return s->mark_scalars.pos; }
int q35_session_chunk(const q35_session *s) { return s->sc.cap; }

q35_status q35_session_set_keys(q35_session *s, int pos0, const uint64_t *keys, int n) {
    if (pos0 < 0 || n < 0 || n > s->pos - pos0 || (n > 0 && !keys))
        return q35_fail(Q35_ERR_ARG, "set_keys: positions [%d, %d) are not all evaluated (%d are)", pos0, pos0 + n, s->pos);
    memcpy(s->keys + pos0, keys, sizeof(uint64_t) * (size_t)n);
    return Q35_OK;
}

q35_status q35_session_truncate(q35_session *s, int pos) {
    if (pos == s->pos) return Q35_OK;
    if (pos == 0) {
        q35_session_reset(s);
        return Q35_OK;
    }
    if (pos != s->mark_scalars.pos)
        return q35_fail(Q35_ERR_ARG, "truncate: no checkpoint at position %d (the session holds %d; its exact point is %d)", pos, s->pos,
                        s->mark_scalars.pos);
    const q35_config *c = &s->m->cfg;
    memcpy(s->conv, s->mark_conv, sizeof(float) * q35_conv_floats(c));
    memcpy(s->rec, s->mark_rec, sizeof(float) * q35_rec_floats(c));
    q35_seq_scalars_set(s, &s->mark_scalars); /* the KV rows below the mark were never overwritten */
    return Q35_OK;
}

size_t q35_snapshot_bytes(const q35_config *c, int P, int kv_f16) {
    return sizeof(float) * (q35_conv_floats(c) + q35_rec_floats(c)) + q35_kv_elt(kv_f16) * 2 * (size_t)c->n_full * (size_t)P * q35_kv_row_floats(c) +
           (sizeof(uint64_t) + sizeof(int32_t)) * (size_t)P + sizeof(q35_snapshot);
}

void q35_snapshot_free(q35_snapshot *snap) {
    free(snap->conv);
    free(snap->rec);
    free(snap->kv);
    free(snap->keys);
    free(snap->tokens);
    memset(snap, 0, sizeof *snap);
}

q35_status q35_snapshot_of_mark(const q35_session *s, q35_snapshot *out) {
    const q35_config *c = &s->m->cfg;
    const int P = s->mark_scalars.pos;
    const size_t rows = (size_t)P * q35_kv_row_floats(c) * q35_kv_elt(s->kv_f16); /* bytes of one layer's K (or V) rows */
    memset(out, 0, sizeof *out);
    out->v = s->mark_scalars;
    out->cap = s->sc.cap;
    out->gdn_chunk = s->sc.gdn_chunk;
    out->kv_f16 = s->kv_f16;
    out->conv = malloc(sizeof(float) * q35_conv_floats(c));
    out->rec = malloc(sizeof(float) * q35_rec_floats(c));
    out->kv = malloc(2 * (size_t)c->n_full * rows + 1);
    out->keys = malloc(sizeof(uint64_t) * ((size_t)P + 1));
    out->tokens = malloc(sizeof(int32_t) * ((size_t)P + 1));
    if (!out->conv || !out->rec || !out->kv || !out->keys || !out->tokens) {
        q35_snapshot_free(out);
        return q35_fail(Q35_ERR_NOMEM, "out of memory for a checkpoint of %d positions", P);
    }
    memcpy(out->conv, s->mark_conv, sizeof(float) * q35_conv_floats(c));
    memcpy(out->rec, s->mark_rec, sizeof(float) * q35_rec_floats(c));
    for (int l = 0; l < c->n_full; l++) {
        memcpy((char *)out->kv + (2 * (size_t)l) * rows, q35_kv_layer(s, s->k_cache, l), rows);
        memcpy((char *)out->kv + (2 * (size_t)l + 1) * rows, q35_kv_layer(s, s->v_cache, l), rows);
    }
    memcpy(out->keys, s->keys, sizeof(uint64_t) * (size_t)P);
    memcpy(out->tokens, s->tokens, sizeof(int32_t) * (size_t)P);
    out->bytes = q35_snapshot_bytes(c, P, s->kv_f16);
    return Q35_OK;
}

void q35_snapshot_apply(q35_session *s, const q35_snapshot *snap) {
    const q35_config *c = &s->m->cfg;
    const int P = snap->v.pos;
    const size_t rows = (size_t)P * q35_kv_row_floats(c) * q35_kv_elt(s->kv_f16);
    memcpy(s->conv, snap->conv, sizeof(float) * q35_conv_floats(c));
    memcpy(s->rec, snap->rec, sizeof(float) * q35_rec_floats(c));
    for (int l = 0; l < c->n_full; l++) {
        memcpy(q35_kv_layer(s, s->k_cache, l), (const char *)snap->kv + (2 * (size_t)l) * rows, rows);
        memcpy(q35_kv_layer(s, s->v_cache, l), (const char *)snap->kv + (2 * (size_t)l + 1) * rows, rows);
    }
    memcpy(s->keys, snap->keys, sizeof(uint64_t) * (size_t)P);
    memcpy(s->tokens, snap->tokens, sizeof(int32_t) * (size_t)P);
    q35_seq_scalars_set(s, &snap->v);
    q35_snapshot_mark(s);
}

/* ---- model fingerprint: FNV-1a over the config, every tensor's format and shape, and a sample of values */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_INT(h, x)                 \
    do {                              \
        int64_t v_ = (int64_t)(x);    \
        h = fnv(h, &v_, sizeof v_);   \
    } while (0)

static uint64_t fnv_tensor(uint64_t h, const q35_tensor *t) {
    FNV_INT(h, t->dtype);
    FNV_INT(h, t->layout);
    FNV_INT(h, t->ndim);
    for (int i = 0; i < t->ndim; i++) FNV_INT(h, t->shape[i]);
    FNV_INT(h, t->nbytes);
    if (t->data && t->nbytes) { /* the first and last bytes: another checkpoint of the same shapes differs there */
        const size_t k = t->nbytes < 64 ? t->nbytes : 64;
        h = fnv(h, t->data, k);
        h = fnv(h, (const unsigned char *)t->data + t->nbytes - k, k);
    }
    return h;
}

uint64_t q35_model_fingerprint(const q35_model *m) {
    const q35_config *c = &m->cfg;
    uint64_t h = 0xcbf29ce484222325ull;
    const double rt = c->rope_theta;
    const float eps = c->rms_eps;
    const int ints[] = {c->hidden, c->n_layers, c->intermediate, c->vocab, c->tie_embeddings, c->n_heads, c->n_kv_heads, c->head_dim,
                        c->attn_output_gate, c->rope_dim, c->mrope_section[0], c->mrope_section[1], c->mrope_section[2],
                        c->mrope_interleaved, c->lin_k_heads, c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) FNV_INT(h, ints[i]);
    h = fnv(h, &rt, sizeof rt);
    h = fnv(h, &eps, sizeof eps);
    h = fnv(h, c->layer_full, (size_t)c->n_layers);
    h = fnv_tensor(h, &m->embed);
    h = fnv_tensor(h, &m->lm_head);
    h = fnv(h, m->final_norm, sizeof(float) * (size_t)c->hidden);
    for (int l = 0; l < c->n_layers; l++) {
        const q35_layer_weights *L = &m->layers[l];
        h = fnv(h, L->in_norm, sizeof(float) * (size_t)c->hidden);
        const q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                                  &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.in_b, &L->gdn.in_a, &L->gdn.out};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) /* the MLP, then attention (3..6) or GDN (7..) */
            if (i < 3 || (i < 7) == (L->is_full != 0)) h = fnv_tensor(h, ts[i]);
    }
    return h;
}
