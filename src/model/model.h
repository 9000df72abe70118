/* A loaded model: config + tensors bound by name to per-layer structs. Large matrices point into
 * the mmap'd safetensors; the small full-precision parameters (norms, A_log, dt_bias, conv taps)
 * are converted to float32 arrays at load, without loss. */
#ifndef Q35_MODEL_MODEL_H
#define Q35_MODEL_MODEL_H
#include <pthread.h>

#include "formats/safetensors.h"
#include "model/config.h"
#include "model/tensor.h"

typedef struct q35_gdn_weights {      /* Gated DeltaNet (linear attention) */
    q35_tensor in_qkv;                /* [2*Hk*dk + Hv*dv, H]  rows: q | k | v */
    q35_tensor in_z;                  /* [Hv*dv, H] output gate */
    q35_tensor in_b;                  /* [Hv, H] beta logits */
    q35_tensor in_a;                  /* [Hv, H] decay input */
    q35_tensor out;                   /* [H, Hv*dv] */
    float *conv;                      /* [C][K] depthwise causal conv taps, C = conv channels */
    float *dt_bias;                   /* [Hv] */
    float *neg_exp_A;                 /* [Hv] -exp(A_log) */
    float *norm;                      /* [dv] gated RMSNorm weight (plain scale, not 1+w) */
    int v_tiled;                      /* 1: value head h reads q/k head h % Hk (llama.cpp's GGUF order, V heads tiled);
                                         0: h / (Hv/Hk) (Hugging Face, grouped) */
} q35_gdn_weights;

typedef struct q35_attn_weights {     /* gated full attention */
    q35_tensor q;                     /* [n_heads*head_dim*(gate?2:1), H]; per head: query rows then gate rows */
    q35_tensor k;                     /* [n_kv*head_dim, H] */
    q35_tensor v;                     /* [n_kv*head_dim, H] */
    q35_tensor o;                     /* [H, n_heads*head_dim] */
    float *q_norm;                    /* [head_dim] effective scale 1+w */
    float *k_norm;                    /* [head_dim] effective scale 1+w */
} q35_attn_weights;

typedef struct q35_layer_weights {
    int is_full;                      /* 1: attention, 0: Gated DeltaNet */
    float *in_norm;                   /* [H] effective scale 1+w */
    float *post_norm;                 /* [H] effective scale 1+w */
    q35_gdn_weights gdn;
    q35_attn_weights attn;
    q35_tensor mlp_gate;              /* [F, H] */
    q35_tensor mlp_up;                /* [F, H] */
    q35_tensor mlp_down;              /* [H, F] */
} q35_layer_weights;

typedef struct q35_vision_block {     /* one ViT block (spec §5.2); LayerNorm eps 1e-6 */
    float *norm1_w, *norm1_b;         /* [D] */
    float *norm2_w, *norm2_b;         /* [D] */
    q35_tensor qkv;                   /* [3D, D] rows: q | k | v, each head contiguous */
    float *qkv_b;                     /* [3D] */
    q35_tensor proj;                  /* [D, D] */
    float *proj_b;                    /* [D] */
    q35_tensor fc1;                   /* [I, D] */
    float *fc1_b;                     /* [I] */
    q35_tensor fc2;                   /* [D, I] */
    float *fc2_b;                     /* [D] */
} q35_vision_block;

typedef struct q35_vision_weights {   /* model.visual.* (spec §2.3) */
    q35_tensor patch;                 /* [D, P] the Conv3d kernel [D][C][Tp][p][p] viewed as a matrix, P = C*Tp*p*p */
    float *patch_b;                   /* [D] */
    float *pos;                       /* [side*side][D] learned position table, float32 */
    q35_vision_block *blocks;         /* [depth] */
    float *merge_norm_w, *merge_norm_b; /* [D] LayerNorm before the 2x2 merge */
    q35_tensor fc1;                   /* [4D, 4D] */
    float *fc1_b;                     /* [4D] */
    q35_tensor fc2;                   /* [O, 4D] */
    float *fc2_b;                     /* [O] */
    float *small;                     /* one allocation holding every float array above */
    size_t weight_bytes;              /* bytes of the bound tensors as stored */
} q35_vision_weights;

/* Bind the tower stored under prefix ("model.visual.") in st to w, shapes checked against vc;
 * what names the source in errors. Float arrays are copied to w->small (free with
 * q35_vision_weights_free); matrices point into st. src/model/vision_weights.c */
/* The float tensor prefix+name of st (bf16, f16 or f32) with exactly the given shape, into *out; a
 * missing ("missing <kind>tensor"), wrong-dtype or wrong-shape tensor fails with a one-line message. */
q35_status q35_bind_float(const q35_st_index *st, const char *prefix, const char *name, int ndim, const int64_t *shape,
                          const char *what, const char *kind, q35_tensor *out);
q35_status q35_vision_bind(const q35_st_index *st, const char *prefix, const q35_vision_config *vc, const char *what, q35_vision_weights *w);
void q35_vision_weights_free(q35_vision_weights *w);

struct q35_model {
    q35_config cfg;
    q35_st_index st;                  /* the mapped safetensors files */
    q35_tensor embed;                 /* [V, H] */
    q35_tensor lm_head;               /* [V, H] (the embedding when tied) */
    float *final_norm;                /* [H] effective scale 1+w */
    q35_layer_weights *layers;        /* [n_layers] */
    float *small;                     /* one allocation holding every float array above */
    size_t weight_bytes;              /* bytes of the bound text tensors */
    char *dir;
    struct q35_lmhead_approx *head_approx; /* 4-bit bounded copy of the LM head for exact greedy (runtime/greedy.c), built on first use */
    pthread_mutex_t head_lock;        /* guards building head_approx */
    int head_approx_failed;           /* 1: no copy (it would not pay, or the head cannot have one); greedy uses full logits */
    int head_trial_off;               /* 1: build the copy without the trial (q35_greedy_skip_trial, tests) */
    void **owned;                     /* [n_owned] huge-page chunks holding converted weights (quantize.c), freed with the model */
    int n_owned, cap_owned;
    uint8_t *arena_next;              /* the free rest of the last chunk: arena_left bytes */
    size_t arena_left;
    int has_vision;                   /* 1: the vision tower is bound (cfg.vision, vision) */
    q35_vision_weights vision;
    struct q35_gguf_model *gguf;      /* the mapped GGUF file the tensors point into (model_gguf.c); NULL for safetensors */
    const q35_load_opts *load_opts;   /* during q35_model_load_ex only (its progress callback); NULL after */
};

void q35_greedy_free_head(struct q35_model *m); /* runtime/greedy.c */
/* Convert the large matrices to "bf16", "q8" or "q4" in memory (src/model/quantize.c); "rows": as
 * stored, not even repacked (q35 quantize --layout gguf exports the rows). */
q35_status q35_model_convert_weights(struct q35_model *m, const char *weights);
/* Bind tensors of an opened index to a model (used by q35_model_load and tests). */
q35_status q35_model_bind(struct q35_model *m, const char *what);
#endif
