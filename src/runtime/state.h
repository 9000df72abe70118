/* Per-sequence runtime state and the scratch activations of one chunk of tokens. Everything is
 * allocated at session creation: the token loop never allocates. */
#ifndef Q35_RUNTIME_STATE_H
#define Q35_RUNTIME_STATE_H
#include "model/model.h"

typedef struct q35_scratch {
    int cap;           /* B: tokens per chunk these buffers hold */
    float *x;          /* [B][H] residual stream */
    float *xn;         /* [B][H] normed input of the current sub-layer */
    float *proj;       /* [B][P] main projection: GDN qkv (C) or attention q(+gate) ; P = max of both */
    float *proj2;      /* [B][P2] GDN z (Hv*dv) or attention k|v (2*n_kv*hd) */
    float *ba;         /* [B][2*Hv] GDN beta and decay logits */
    float *core;       /* [B][Q] core output before out/o_proj: GDN Hv*dv or attention n_heads*hd */
    float *ff;         /* [B][2F] MLP gate | up */
    float *out;        /* [B][H] sub-layer output */
    float *rope_cos;   /* [B][rope_dim/2] */
    float *rope_sin;   /* [B][rope_dim/2] */
    int *pos3;         /* [B][3] (T, H, W) M-RoPE positions of the chunk's tokens */
    float *gdn_gb;     /* [Hv][2][B] per value head: the log-decays g, then beta, of the chunk's tokens */
    int gdn_chunk;     /* L: tokens per chunk of the chunkwise Gated DeltaNet (0: token recurrence) */
    int n_slots;       /* work slots: the most tasks a layer dispatch uses */
    size_t work_floats;/* W: floats per slot */
    float *work;       /* [n_slots][W] per-task scratch: GDN chunk matrices, attention tiles / scores */
    float *attn_part;  /* [Q35_ATTN_SEG_MAX][n_heads][hd + 2] one query's attention partials per key segment */
} q35_scratch;

/* The scalar fields of q35_session that are part of a sequence's state, as X(type, name). Every
 * snapshot (the exact mark, prefix-cache checkpoints, session files) copies each one: a new field
 * (e.g. a rope position delta) is added to the struct below and named here, nothing else. */
#define Q35_SEQ_SCALARS(X) X(int, pos) X(int, rope_delta)

typedef struct q35_seq_scalars {
#define Q35_X_FIELD(type, name) type name;
    Q35_SEQ_SCALARS(Q35_X_FIELD)
#undef Q35_X_FIELD
} q35_seq_scalars;

struct q35_session {
    const q35_model *m;
    int n_ctx;         /* KV positions available */
    int pos;           /* tokens evaluated so far (next sequence index) */
    int rope_delta;    /* M-RoPE position of the next token minus pos: 0 for text, moved by images (spec §5.7) */
    int *slot;         /* [n_layers] index of the layer among its kind (linear or full) */
    float *conv;       /* [n_linear][K-1][C] last K-1 pre-conv qkv rows, oldest first */
    float *conv_taps;  /* [n_linear][K][C] each linear layer's conv taps transposed (read-only) */
    float *rec;        /* [n_linear][Hv][dk][dv] recurrent state, fp32 */
    int kv_f16;        /* the KV cache holds IEEE halves (Q35_KV_F16), else fp32 */
    void *k_cache;     /* [n_full][n_ctx][n_kv*hd] post-norm, post-RoPE keys (fp32 or fp16) */
    void *v_cache;     /* [n_full][n_ctx][n_kv*hd] values (fp32 or fp16) */
    float *inv_freq;   /* [rope_dim/2] */
    q35_scratch sc;
    struct q35_lmhead_scratch *head_sc; /* fast greedy (greedy.c), allocated on first use */
    float *debug_hidden; /* [n_layers+1][n][H] when set (tests): residual stream after each layer, for one eval call */
    /* History and the exact point (runtime/snapshot.c). A state is exact at a position that is a
     * multiple of the chunk size sc.cap reached by evaluations that each began at such a position:
     * evaluating the rest from there repeats exactly the chunks a fresh evaluation would run, so
     * the results are bitwise those of a fresh evaluation. */
    int32_t *tokens;   /* [n_ctx] ids evaluated at positions [0, pos) */
    uint64_t *keys;    /* [n_ctx] what each position holds: its token id, or a caller's content key (images) */
    float *mark_conv;  /* [n_linear][K-1][C] conv at the mark */
    float *mark_rec;   /* [n_linear][Hv][dk][dv] recurrent state at the mark */
    q35_seq_scalars mark_scalars; /* the scalar fields (Q35_SEQ_SCALARS) at the mark; mark_scalars.pos is the
                                     latest exact position (<= pos; == pos: the current state is exact) */
};


void q35_greedy_free_scratch(struct q35_session *s); /* greedy.c */
/* Tests: build the 4-bit greedy head without the trial that decides whether it pays (greedy.c). */
void q35_greedy_skip_trial(struct q35_model *m);

/* q35_session_eval with optional per-token embedding rows emb [n] (NULL entries: the token's own
 * embedding) and M-RoPE positions pos3 [n][3] (NULL: text positions pos + t + rope_delta); both
 * indexed by the batch position, so they follow the tokens across prompt chunks (forward.c).
 * next_pos [n] (with pos3, or NULL): the M-RoPE position a text token after batch index i would
 * take; the rope delta follows it chunk by chunk, so the exact mark holds the right one. */
q35_status q35_session_eval_ex(struct q35_session *s, const int32_t *tokens, int n, const float *const *emb, const int *pos3,
                               const int *next_pos, float *logits, float *all_logits);
/* Snapshot helpers (runtime/snapshot.c). */
void q35_seq_scalars_get(const struct q35_session *s, q35_seq_scalars *v);
void q35_seq_scalars_set(struct q35_session *s, const q35_seq_scalars *v);
size_t q35_conv_floats(const q35_config *c); /* floats of conv (and mark_conv) */
size_t q35_rec_floats(const q35_config *c);  /* floats of rec (and mark_rec) */
size_t q35_kv_row_floats(const q35_config *c); /* elements of one position's K (or V) row in one full layer */
/* Bytes of one element of a KV cache: 2 (fp16) or 4 (fp32). */
static inline size_t q35_kv_elt(int kv_f16) { return kv_f16 ? 2 : 4; }
/* Full layer `slot`'s rows [n_ctx][n_kv*hd] in a session's K or V cache. */
static inline void *q35_kv_layer(const struct q35_session *s, void *cache, int slot) {
    return (char *)cache + (size_t)slot * (size_t)s->n_ctx * q35_kv_row_floats(&s->m->cfg) * q35_kv_elt(s->kv_f16);
}
/* Called by the evaluation: whether an evaluation starting now runs on the exact grid, and the
 * mark update after each chunk of it. */
int q35_snapshot_exact_start(const struct q35_session *s);
void q35_snapshot_mark(struct q35_session *s);
/* A copy of a session's state at its mark: what a prefix-cache checkpoint holds. */
typedef struct q35_snapshot {
    q35_seq_scalars v; /* v.pos = P, the positions it holds */
    int cap;           /* the chunk grid it is exact on (with gdn_chunk: the chunks a fresh evaluation runs) */
    int gdn_chunk;     /* the Gated DeltaNet sub-chunk it was evaluated with */
    float *conv;       /* [n_linear][K-1][C] */
    float *rec;        /* [n_linear][Hv][dk][dv] */
    int kv_f16;        /* kv holds IEEE halves (the session's KV cache type) */
    void *kv;          /* [n_full][2][P][n_kv*hd] each full layer's key rows, then its value rows */
    uint64_t *keys;    /* [P] */
    int32_t *tokens;   /* [P] */
    size_t bytes;      /* bytes of all the above */
} q35_snapshot;
q35_status q35_snapshot_of_mark(const struct q35_session *s, q35_snapshot *out);
/* Make snap the session's current state and its mark (the caller checked that it fits n_ctx and
 * that its KV cache type is the session's). */
void q35_snapshot_apply(struct q35_session *s, const q35_snapshot *snap);
void q35_snapshot_free(q35_snapshot *snap);
size_t q35_snapshot_bytes(const q35_config *c, int P, int kv_f16);

/* A checkpoint fingerprint of the model (config, tensor formats and shapes, a sample of the values). */
uint64_t q35_model_fingerprint(const q35_model *m);

/* Bytes the recurrent + KV state of one session takes. */
size_t q35_state_bytes(const q35_config *c, int n_ctx, int kv_f16);
/* The M-RoPE positions pos3 [n][3] of a prompt whose image-token runs take images (already checked
 * to match, in order; NULL: no images) starting at position cur, and (when emb is not NULL) each
 * token's embedding row (emb [n], NULL for text), and (when next is not NULL) next [n]: the position a
 * text token after index i would take (inside an image: the one after the image). Returns the position after the prompt: the rope
 * delta afterwards is that minus the sequence index after the prompt. multimodal.c */
long long q35_mm_positions(const q35_config *c, const int32_t *tokens, int n, const q35_image_embeds *images, long long cur, int *pos3,
                           const float **emb, int *next);
#endif
