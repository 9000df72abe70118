/* The hyper-parameters of a Qwen3.5 text decoder, read from config.json (the multimodal wrapper
 * with text_config, or a flat text-only config). Nothing about a model size is assumed. */
#ifndef Q35_MODEL_CONFIG_H
#define Q35_MODEL_CONFIG_H
#include "q35.h"

#define Q35_MAX_LAYERS 256
#define Q35_MAX_EOS 8

/* The vision tower (vision_config of the multimodal wrapper; spec §5.2). */
typedef struct q35_vision_config {
    int depth;                   /* transformer blocks */
    int hidden;                  /* D */
    int n_heads;                 /* head_dim = D / n_heads */
    int intermediate;            /* I, MLP width */
    int in_channels;             /* 3 */
    int patch;                   /* patch_size (16) */
    int temporal_patch;          /* temporal_patch_size (2) */
    int merge;                   /* spatial_merge_size (2) */
    int n_pos;                   /* num_position_embeddings: a side x side learned table */
    int pos_side;                /* sqrt(n_pos) */
    int out_hidden;              /* out_hidden_size: the merger's output width (= the text hidden size) */
    double rope_theta;           /* rope_parameters.rope_theta of the 2-D rotary (10000) */
    int act_exact;               /* block MLP activation: 0 gelu_pytorch_tanh (the checkpoints), 1 exact-erf gelu */
} q35_vision_config;

static inline int q35_vision_patch_dim(const q35_vision_config *v) { return v->in_channels * v->temporal_patch * v->patch * v->patch; }

typedef struct q35_config {
    char arch[64];               /* architectures[0] */
    int is_wrapper;              /* 1: Qwen3_5ForConditionalGeneration (text_config + vision_config) */
    int has_vision_config;
    q35_vision_config vision;    /* valid when has_vision_config */
    int image_token_id, vision_start_token_id, vision_end_token_id; /* -1 when the config has no vision_config */
    int hidden;                  /* H */
    int n_layers;
    int intermediate;            /* F, SwiGLU width */
    int vocab;                   /* V, rows of embed_tokens */
    float rms_eps;
    int tie_embeddings;
    int max_pos;                 /* max_position_embeddings */
    /* full attention */
    int n_heads, n_kv_heads, head_dim;
    int attn_output_gate;        /* q_proj also emits a per-head sigmoid gate */
    double rope_theta;
    int rope_dim;                /* rotary dims per head = head_dim * partial_rotary_factor (even) */
    int mrope_section[3];        /* frequencies per T/H/W component; sum = rope_dim / 2 */
    int mrope_interleaved;       /* component of frequency i is i % 3 (1) or sectioned (0) */
    /* Gated DeltaNet */
    int lin_k_heads, lin_v_heads;   /* Hk, Hv (Hv a multiple of Hk) */
    int lin_k_dim, lin_v_dim;       /* dk, dv */
    int conv_kernel;                /* K */
    unsigned char layer_full[Q35_MAX_LAYERS]; /* [n_layers] 1: full attention, 0: linear attention */
    int n_full, n_linear;
    int eos_ids[Q35_MAX_EOS];
    int n_eos;
} q35_config;

/* Parse dir/config.json. Errors name the file and the field. */
q35_status q35_config_load(const char *dir, q35_config *cfg);
/* Parse a config.json text (what names it in errors). */
q35_status q35_config_parse(const char *text, size_t len, const char *what, q35_config *cfg);

static inline int q35_cfg_conv_channels(const q35_config *c) {
    return 2 * c->lin_k_heads * c->lin_k_dim + c->lin_v_heads * c->lin_v_dim;
}
#endif
