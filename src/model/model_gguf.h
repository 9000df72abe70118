/* llama.cpp's Qwen3.5 GGUF (arch "qwen35") <-> struct q35_model.
 *
 * What llama.cpp's converter (conversion/qwen.py: Qwen3_5TextModel = _LinearAttentionVReorderBase +
 * Qwen3NextModel.modify_tensors) does to a Hugging Face checkpoint, and what q35 undoes at load:
 *   - every zero-centred RMSNorm weight is stored as 1 + w (q35 keeps the effective scale: no +1 here);
 *     linear_attn.norm (ssm_norm) is stored as is;
 *   - A_log is stored as ssm_a = -exp(A_log) (= q35's neg_exp_A); dt_bias as ssm_dt.bias;
 *   - conv1d [C, 1, K] is squeezed to [C, K] (ssm_conv1d, GGUF ne {K, C});
 *   - when Hv > Hk the value heads are reordered from grouped (HF: head k*r + v, r = Hv/Hk, uses
 *     q/k head k) to tiled (position v*Hk + k) in: the V rows of attn_qkv, attn_gate rows, ssm_beta
 *     and ssm_alpha rows, ssm_dt.bias, ssm_a, the V channels of ssm_conv1d and the columns of
 *     ssm_out. q35 keeps that order (nothing is copied, K-quant rows stay whole) and maps the head
 *     index instead: q35_gdn_weights.v_tiled = 1 makes value position p read q/k head p % Hk, which
 *     is the q/k head of the HF head stored there, (p % Hk)*r + p / Hk;
 *   - attn_q keeps HF's per-head [query | gate] rows; lm_head is absent when tied (token_embd reused);
 *   - block_count counts the MTP layers (nextn_predict_layers), which q35 skips. */
#ifndef Q35_MODEL_MODEL_GGUF_H
#define Q35_MODEL_MODEL_GGUF_H
#include <stddef.h>

#include "formats/gguf.h"
#include "model/config.h"
#include "model/tensor.h"
#include "q35.h"

struct q35_model;

/* *is_gguf = 1 and the file's path in out when path is a .gguf file, or a directory holding no
 * config.json and exactly one *.gguf; *is_gguf = 0 otherwise. A directory with no config.json and
 * several .gguf files is an error (Q35_ERR_ARG naming them). */
q35_status q35_gguf_model_path(const char *path, char *out, size_t cap, int *is_gguf);

/* The config of a qwen35 GGUF's metadata (vocab from token_embd's rows). */
q35_status q35_gguf_config(const q35_gguf *g, q35_config *c);

/* Open path (load = 1: read it into memory), fill m->cfg and bind every tensor (model.c calls this). */
q35_status q35_model_open_gguf(struct q35_model *m, const char *path, int load);
void q35_model_close_gguf(struct q35_model *m);
/* The GGUF file a model was loaded from (NULL for safetensors): its mapping, tensors and metadata. */
const q35_gguf *q35_model_gguf(const struct q35_model *m);

/* ---------------------------------------------------------------- writing */
typedef struct q35_gguf_named_tensor {
    char name[64];                   /* llama.cpp's name, "blk.3.attn_q.weight" */
    q35_tensor t;                    /* q35 order shape; t.name points at name */
} q35_gguf_named_tensor;

typedef struct q35_gguf_export {
    q35_gguf_named_tensor *v;        /* [n] */
    int n;
    void **owned;                    /* [n_owned] buffers of transformed tensors */
    int n_owned;
} q35_gguf_export;

/* The model's text tensors under llama.cpp's names and layouts (the converter's transforms
 * applied: V heads tiled, small parameters as F32). Matrices reference the model's memory unless
 * they had to be reordered. A caller may replace any tensor (e.g. by a quantized copy of the same
 * shape) before writing. */
q35_status q35_gguf_export_model(const struct q35_model *m, q35_gguf_export *e);
/* The same names, with every tensor as the model holds it (the kernels' R16 interleave, Q4R, V heads
 * in the model's order): what a q35-layout file stores (write with opts.q35_layout). */
q35_status q35_gguf_export_bound(const struct q35_model *m, q35_gguf_export *e);
void q35_gguf_export_free(q35_gguf_export *e);

typedef struct q35_gguf_write_opts {
    const char *name;                /* general.name (NULL: "qwen35") */
    const char *tokenizer_dir;       /* NULL, or a directory with tokenizer.json (+ tokenizer_config.json,
                                        chat_template.jinja): written as tokenizer.ggml.* like the converter */
    const q35_gguf *tokenizer_gguf;  /* NULL, or a GGUF file whose tokenizer.* metadata is copied (instead of tokenizer_dir) */
    int q35_layout;                  /* 1: a q35-layout file (gguf.h): q35.format_version, q35.layout = "r16",
                                        general.alignment 64; tensors from q35_gguf_export_bound */
    int v_heads_tiled;               /* q35_layout: the model's V-head order (q35_gdn_weights.v_tiled) */
} q35_gguf_write_opts;

/* Write arch qwen35 metadata of cfg and the tensors to path (atomically). */
q35_status q35_gguf_write_model(const char *path, const q35_config *cfg, const q35_gguf_named_tensor *t, int n,
                                const q35_gguf_write_opts *opts);
#endif
