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
} q35_scratch;

struct q35_session {
    const q35_model *m;
    int n_ctx;         /* KV positions available */
    int pos;           /* tokens evaluated so far (next sequence index) */
    int rope_delta;    /* M-RoPE position of the next token minus pos: 0 for text, moved by images (spec §5.7) */
    int *slot;         /* [n_layers] index of the layer among its kind (linear or full) */
    float *conv;       /* [n_linear][K-1][C] last K-1 pre-conv qkv rows, oldest first */
    float *conv_taps;  /* [n_linear][K][C] each linear layer's conv taps transposed (read-only) */
    float *rec;        /* [n_linear][Hv][dk][dv] recurrent state, fp32 */
    float *k_cache;    /* [n_full][n_ctx][n_kv*hd] post-norm, post-RoPE keys */
    float *v_cache;    /* [n_full][n_ctx][n_kv*hd] values */
    float *inv_freq;   /* [rope_dim/2] */
    q35_scratch sc;
    struct q35_lmhead_scratch *head_sc; /* fast greedy (greedy.c), allocated on first use */
    float *debug_hidden; /* [n_layers+1][n][H] when set (tests): residual stream after each layer, for one eval call */
};

void q35_greedy_free_scratch(struct q35_session *s); /* greedy.c */

/* q35_session_eval with optional per-token embedding rows emb [n] (NULL entries: the token's own
 * embedding) and M-RoPE positions pos3 [n][3] (NULL: text positions pos + t + rope_delta); both
 * indexed by the batch position, so they follow the tokens across prompt chunks (forward.c). */
q35_status q35_session_eval_ex(struct q35_session *s, const int32_t *tokens, int n, const float *const *emb, const int *pos3, float *logits,
                               float *all_logits);

/* Bytes the recurrent + KV state of one session takes. */
size_t q35_state_bytes(const q35_config *c, int n_ctx);
/* The M-RoPE positions pos3 [n][3] of a prompt whose image-token runs take images (already checked
 * to match, in order; NULL: no images) starting at position cur, and (when emb is not NULL) each
 * token's embedding row (emb [n], NULL for text). Returns the position after the prompt: the rope
 * delta afterwards is that minus the sequence index after the prompt. multimodal.c */
long long q35_mm_positions(const q35_config *c, const int32_t *tokens, int n, const q35_image_embeds *images, long long cur, int *pos3,
                           const float **emb);
#endif
