/* q35 — inference runtime for Qwen3.5 hybrid (Gated DeltaNet + gated attention) models.
 *
 * The public C API. Everything is an opaque handle; every call that can fail returns a q35_status and
 * leaves a one-line message (file, field or tensor, what was expected) in q35_last_error(), which is
 * per thread. The library never exits and never prints; diagnostics go through the log callback.
 */
#ifndef Q35_H
#define Q35_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum q35_status {
    Q35_OK = 0,
    Q35_ERR_IO,          /* a file could not be opened, read or mapped */
    Q35_ERR_FORMAT,      /* malformed file: JSON syntax, header, offsets, truncation */
    Q35_ERR_MISSING,     /* a required file, field or tensor is absent */
    Q35_ERR_SHAPE,       /* a tensor has the wrong shape */
    Q35_ERR_DTYPE,       /* a tensor has a dtype this place does not accept */
    Q35_ERR_UNSUPPORTED, /* architecture or feature q35 does not implement */
    Q35_ERR_NOMEM,       /* allocation failed */
    Q35_ERR_ARG,         /* bad argument from the caller */
    Q35_ERR_CONTEXT,     /* the sequence would not fit in the context */
    Q35_ERR_TEMPLATE,    /* the chat template refused the conversation (raise_exception) */
} q35_status;

/* The message of the last failure on this thread ("" when none). */
const char *q35_last_error(void);
const char *q35_status_name(q35_status s);

typedef enum { Q35_LOG_ERROR = 0, Q35_LOG_WARN, Q35_LOG_INFO, Q35_LOG_DEBUG } q35_log_level;
typedef void (*q35_log_fn)(q35_log_level level, const char *msg, void *user);
/* Install a log sink (NULL: silence). Process-wide; set it before loading. */
void q35_set_log(q35_log_fn fn, void *user);

/* Threads for every later call (0: $Q35_THREADS if set, else the number of online CPUs).
 * Process-wide; call it while no evaluation runs. */
void q35_set_threads(int n);
int q35_get_threads(void);

/* ---------------------------------------------------------------- model */
typedef struct q35_model q35_model;

typedef struct q35_model_info {
    int n_layers, n_vocab, hidden, max_ctx;
    int n_linear_layers, n_full_layers;
    size_t weight_bytes;       /* bytes of the text weights as stored */
    size_t bytes_per_token;    /* weight bytes read to generate one token (layer matrices + LM head) */
    size_t state_bytes;        /* bytes of the fp32 recurrent state (conv + delta rule), read and written every token */
    size_t kv_bytes_per_pos;   /* bytes of the fp32 KV cache per position (every attention layer's K and V): a token
                                  at position p reads (p + 1) x this; half with Q35_KV_F16 */
    const char *weight_format; /* format of the layer matrices (of the first MLP; "bf16", "q4_0", ...) */
    const char *head_format;   /* format of the LM head */
    const char *arch;          /* architectures[0] of config.json */
} q35_model_info;

/* Load a Hugging Face checkpoint directory (config.json + safetensors). Weights are mmap'd. */
q35_status q35_model_load(const char *dir, q35_model **out);

typedef struct q35_load_opts {
    const char *weights;  /* NULL or "native": as stored; "bf16", "q8", "q4": converted at load (the
                             recurrent-path parameters and norms always stay in full precision) */
    int load;             /* 1: read the files into memory instead of mapping them */
    /* NULL, or called on the loading thread as the load advances: done of total bytes, first of the
     * weight files read into memory (load = 1; total grows as each file is opened), then of the
     * matrices converted (weights other than native). Zero-initialised options need no change. */
    void (*progress)(size_t done, size_t total, void *user);
    void *progress_user;
} q35_load_opts;
q35_status q35_model_load_ex(const char *path, const q35_load_opts *opts, q35_model **out);
void q35_model_free(q35_model *m);
void q35_model_get_info(const q35_model *m, q35_model_info *info);

/* ---------------------------------------------------------------- session (one sequence) */
typedef struct q35_session q35_session;

/* n_ctx: tokens of KV cache (0: 4096, capped at the model's max_position_embeddings). */
q35_status q35_session_new(q35_model *m, int n_ctx, q35_session **out);

/* Element type of the attention layers' KV cache. F32 (the default) is the exact path. F16 holds
 * IEEE halves (rounded to nearest even; llama.cpp's default): half the memory, and half the bytes a
 * generated token reads at long contexts; the logits then differ from the reference's slightly. */
typedef enum { Q35_KV_F32 = 0, Q35_KV_F16 = 1 } q35_kv_type;
typedef struct q35_session_opts {
    int n_ctx;           /* as q35_session_new's */
    q35_kv_type kv_type; /* zero-initialised options: Q35_KV_F32 */
} q35_session_opts;
q35_status q35_session_new_ex(q35_model *m, const q35_session_opts *opts, q35_session **out);
q35_kv_type q35_session_kv_type(const q35_session *s);
void q35_session_free(q35_session *s);
void q35_session_reset(q35_session *s);
int q35_session_pos(const q35_session *s);  /* tokens evaluated so far */
int q35_session_ctx(const q35_session *s);
const q35_model *q35_session_model(const q35_session *s);

/* Evaluate n tokens at the current position. When logits is not NULL it receives the float32 logits
 * of the last token ([n_vocab]); all_logits (if not NULL) receives [n][n_vocab]. A batch that would
 * overflow the context fails with Q35_ERR_CONTEXT and leaves the session unchanged. */
q35_status q35_session_eval(q35_session *s, const int32_t *tokens, int n, float *logits, float *all_logits);

/* Evaluate like q35_session_eval and return the greedy next token (the argmax of the last logits,
 * lowest id on ties) without computing every logit: the LM head is scanned through a 4-bit copy
 * with a proven error bound and only the rows that can still win are scored exactly, so the token
 * equals exhaustive scoring's. The copy (about 0.56 bytes per head weight) is built on the first
 * call. *n_rescored (may be NULL) gets how many rows were scored exactly. */
q35_status q35_session_eval_argmax(q35_session *s, const int32_t *tokens, int n, int32_t *next, int *n_rescored);

/* ---------------------------------------------------------------- tokenizer */
typedef struct q35_tokenizer q35_tokenizer;

/* Load tokenizer.json (and tokenizer_config.json when present) from a directory. */
q35_status q35_tokenizer_load(const char *dir, q35_tokenizer **out);
/* Load from a tokenizer.json path directly. */
q35_status q35_tokenizer_load_file(const char *tokenizer_json_path, q35_tokenizer **out);
void q35_tokenizer_free(q35_tokenizer *t);
int q35_tokenizer_vocab_size(const q35_tokenizer *t);  /* 1 + the largest id */
/* Encode UTF-8 text (no BOS/EOS added). parse_special != 0: every added token in the text is matched;
 * 0: special added tokens (<|im_start|>, ...) are plain text, non-special ones (<think>, ...) still
 * match. Each maximal invalid UTF-8 subsequence reads as one U+FFFD (Python's decode 'replace').
 * *ids is malloc'd; free() it. */
q35_status q35_tokenize(const q35_tokenizer *t, const char *text, size_t len, int parse_special,
                        int32_t **ids, size_t *n_ids);
/* Id of an exact token string (added or regular), or -1. */
int32_t q35_token_id(const q35_tokenizer *t, const char *token);
/* The raw bytes a token stands for (ByteLevel decoded); NULL for an invalid id. */
const char *q35_token_bytes(const q35_tokenizer *t, int32_t id, size_t *len);
/* Decode ids to UTF-8 (malloc'd, NUL-terminated; free() it). Invalid sequences become U+FFFD. */
q35_status q35_detokenize(const q35_tokenizer *t, const int32_t *ids, size_t n, char **text);

/* Streaming decode: feed ids one at a time; only complete UTF-8 characters come out. */
typedef struct q35_stream_decoder q35_stream_decoder;
q35_stream_decoder *q35_stream_decoder_new(const q35_tokenizer *t);
/* Appends the printable text produced by id to out (NUL-terminated, at most cap-1 bytes); returns length. */
size_t q35_stream_decoder_push(q35_stream_decoder *d, int32_t id, char *out, size_t cap);
/* Flush what is left (an incomplete sequence becomes U+FFFD). */
size_t q35_stream_decoder_flush(q35_stream_decoder *d, char *out, size_t cap);
void q35_stream_decoder_free(q35_stream_decoder *d);

/* ---------------------------------------------------------------- chat template */
typedef struct q35_chat_opts {
    int add_generation_prompt;  /* 1: end with '<|im_start|>assistant\n' + the thinking prefix */
    int enable_thinking;        /* -1: the template's default (off for the small models), 0 off, 1 on */
    int add_vision_id;          /* 'Picture N: ' before each image */
    int default_thinking;       /* what enable_thinking = -1 means: 0 for the small models' template
                                   (0.8B/2B/4B: thinking off unless asked), 1 for the larger models' */
} q35_chat_opts;

/* Which default a chat_template.jinja text has (0: thinking off by default, 1: on). */
int q35_chat_template_default_thinking(const char *template_text);

/* Render the Qwen3.5 chat template. messages_json: a JSON array of {role, content, ...} in the
 * transformers / OpenAI shape; tools_json: a JSON array of tools or NULL. *out is malloc'd. */
q35_status q35_chat_render(const char *messages_json, const char *tools_json, const q35_chat_opts *opts,
                           char **out);

/* ---------------------------------------------------------------- sampling */
typedef struct q35_sampler_params {
    float temperature;        /* <= 0: greedy */
    int top_k;                /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float presence_penalty;   /* 0: off; subtracted once from every token already seen */
    float repetition_penalty; /* 1: off; CTRL-style: positive logits divided, negative multiplied */
    uint64_t seed;
} q35_sampler_params;

typedef struct q35_sampler q35_sampler;
/* The Qwen3.5 recommendation (temperature 1.0, top_p 1.0, top_k 20, presence 2.0? see README). */
void q35_sampler_default_params(q35_sampler_params *p);
/* Read temperature/top_k/top_p/min_p/repetition_penalty from DIR/generation_config.json when present. */
q35_status q35_sampler_params_from_dir(const char *dir, q35_sampler_params *p, int *found);
q35_sampler *q35_sampler_new(const q35_sampler_params *p, int n_vocab);
void q35_sampler_free(q35_sampler *s);
void q35_sampler_reset(q35_sampler *s);
/* Tell the sampler a token is part of the context (for the penalties). */
void q35_sampler_accept(q35_sampler *s, int32_t id);
/* Pick the next token from logits[n_vocab] (logits are modified in place). */
int32_t q35_sampler_sample(q35_sampler *s, float *logits);

/* ---------------------------------------------------------------- images */
typedef struct q35_image q35_image;            /* a decoded 8-bit RGB image */
q35_status q35_image_load(const char *path, q35_image **out);
q35_status q35_image_decode(const void *data, size_t len, const char *name /* for messages */, q35_image **out);
void q35_image_free(q35_image *img);
int q35_image_width(const q35_image *img);
int q35_image_height(const q35_image *img);
/* The pixels, [height][width][3] RGB bytes (alpha already composited over white, EXIF orientation applied). */
const unsigned char *q35_image_rgb(const q35_image *img);
typedef struct q35_image_proc q35_image_proc;  /* preprocessor_config.json of a checkpoint */
/* dir: a checkpoint directory (reads preprocessor_config.json when present; the spec's defaults otherwise), or NULL */
q35_status q35_image_proc_load(const char *dir, q35_image_proc **out);
void q35_image_proc_free(q35_image_proc *p);
/* fixed_w/fixed_h > 0: resize to exactly that size (multiples of patch*merge); max_tokens > 0: at most that many LLM tokens per image */
q35_status q35_image_proc_set_limits(q35_image_proc *p, int fixed_w, int fixed_h, int max_tokens);
/* Q35_ERR_SHAPE unless p's patch, temporal patch and merge sizes are those of m's vision tower (a
 * preprocessor_config.json that disagrees with config.json would make pixel rows of the wrong width). */
q35_status q35_image_proc_check(const q35_image_proc *p, const q35_model *m);
typedef struct q35_pixels {
    int grid_t, grid_h, grid_w;  /* patches along time, rows, columns */
    int patch_dim;               /* 3 * temporal_patch_size * patch_size^2 (1536) */
    int n_tokens;                /* LLM tokens: grid_t*grid_h*grid_w / merge_size^2 */
    float *data;                 /* [grid_t*grid_h*grid_w][patch_dim], malloc'd */
} q35_pixels;
q35_status q35_image_preprocess(const q35_image_proc *p, const q35_image *img, q35_pixels *out);
void q35_pixels_free(q35_pixels *px);

/* ---------------------------------------------------------------- vision tower: images in prompts */
/* Multimodal checkpoints (Qwen3_5ForConditionalGeneration with model.visual.* tensors) turn an
 * image's pixel_values (from the image preprocessor) into embeddings that take the place of the
 * prompt's <|image_pad|> tokens (spec §5). */
typedef struct q35_vision_info {
    int patch_size, temporal_patch_size, merge_size; /* 16, 2, 2 */
    int patch_dim;          /* values per pixel_values row: channels * temporal_patch_size * patch_size^2 */
    int hidden;             /* width of the embeddings (= the text hidden size) */
    int32_t image_token_id, vision_start_token_id, vision_end_token_id; /* from config.json */
} q35_vision_info;
/* 1 when the model has a vision tower (and fills info when not NULL), else 0. */
int q35_model_has_vision(const q35_model *m, q35_vision_info *info);

/* Encode one image's pixel_values [grid_t*grid_h*grid_w][patch_dim] (rows in the processor's patch
 * order) into embeds [n_tokens][hidden], n_tokens = grid_t*grid_h*grid_w / merge_size^2. Runs on the
 * thread pool; allocates its scratch for the call. */
q35_status q35_vision_encode(q35_model *m, const float *pixel_values, int grid_t, int grid_h, int grid_w, float *embeds);

typedef struct q35_image_embeds {
    const float *embeds;    /* [n_tokens][hidden] from q35_vision_encode */
    int n_tokens;
    int grid_t, grid_h, grid_w; /* the patch grid it was encoded from (gives its M-RoPE positions) */
} q35_image_embeds;

/* Like q35_session_eval for a prompt holding images: each maximal run of image_token_id takes the
 * next image's embeddings (one run of exactly n_tokens per image, in order) and the image's M-RoPE
 * positions (spec §5.7); text after an image, and every later token of the session (q35_session_eval,
 * q35_session_eval_argmax), is placed by the rope delta the images leave. Errors leave the session
 * unchanged: images for a model without a vision tower, runs that do not match the images, a batch
 * that does not fit the context. */
q35_status q35_session_eval_mm(q35_session *s, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, float *logits,
                               float *all_logits);

/* Replace the i-th image_token_id of tokens (a rendered, tokenized prompt holds one <|image_pad|>
 * per image) by n_tokens[i] copies. *out is malloc'd (free() it); fails when the count of image
 * tokens is not n_images. */
q35_status q35_expand_image_tokens(const q35_model *m, const int32_t *tokens, int n, const int *n_tokens, int n_images, int32_t **out,
                                   int *n_out);
/* ---------------------------------------------------------------- prefix reuse and session files */
/* A session remembers what it evaluated. Every position has a 64-bit key naming its content: the
 * token id for text; a caller that evaluates other content at a position (an image's pad tokens)
 * sets a key naming that content, e.g. a hash of the picture with the top bit set, so that two
 * histories with the same ids but other pictures never match. */
const int32_t *q35_session_tokens(const q35_session *s); /* [q35_session_pos] the ids evaluated */
const uint64_t *q35_session_keys(const q35_session *s);  /* [q35_session_pos] */
/* Set the keys of evaluated positions [pos0, pos0 + n). */
q35_status q35_session_set_keys(q35_session *s, int pos0, const uint64_t *keys, int n);

/* Exact points. A prompt is evaluated in chunks of a fixed size (128 tokens; Q35_PROMPT_CHUNK) and
 * the batched path sums in another order than the one-token path, so a state is only reused where
 * it is bitwise the state a fresh evaluation would pass through: at a multiple of the chunk size,
 * reached by evaluations that each began at such a point. The session keeps its latest exact
 * point (the mark): resuming there, or from a checkpoint (each is one), and evaluating the rest in
 * one call gives bitwise the logits of evaluating everything from the start. */
int q35_session_exact_pos(const q35_session *s);
/* The grid: tokens per prompt chunk. Evaluating [a, b) with a and b multiples of it (or b the end)
 * keeps exactness, so a caller can stop at a grid point to checkpoint a prefix it expects to see
 * again (a chat stops before the generation prompt, which the next turn renders differently). */
int q35_session_chunk(const q35_session *s);
/* Back to position pos: the current one, the exact point, or 0. Anything else: Q35_ERR_ARG. */
q35_status q35_session_truncate(q35_session *s, int pos);

/* Checkpoints of exact states (state, KV rows up to the position, keys) within a memory budget,
 * least recently used first out; a checkpoint bigger than the budget is not stored. Thread-safe:
 * one cache may serve many sessions of its model. */
typedef struct q35_prefix_cache q35_prefix_cache;
q35_status q35_prefix_cache_new(const q35_model *m, size_t budget_bytes, q35_prefix_cache **out);
void q35_prefix_cache_free(q35_prefix_cache *c);
/* Store a checkpoint of the session's exact point (a no-op when it is 0 or already stored). Call it
 * after each prompt or turn. */
q35_status q35_prefix_cache_save(q35_prefix_cache *c, const q35_session *s);
/* Bring s to the longest prefix of tokens[0..n) it can have without evaluating: its own exact point
 * or the longest matching checkpoint (c may be NULL), else the empty state; never all n tokens (the
 * last is evaluated so the caller gets logits). *n_ready = tokens now in s; the caller evaluates
 * tokens[*n_ready..n) in one q35_session_eval call. */
q35_status q35_prefix_cache_restore(q35_prefix_cache *c, q35_session *s, const int32_t *tokens, int n, int *n_ready);
/* The same with position keys (see q35_session_set_keys). */
q35_status q35_prefix_cache_restore_keys(q35_prefix_cache *c, q35_session *s, const uint64_t *keys, int n, int *n_ready);
/* Checkpoints held and their bytes. */
void q35_prefix_cache_stats(q35_prefix_cache *c, int *n_checkpoints, size_t *bytes);

/* Session files: the whole sequence state (current and exact point, KV rows, tokens, keys) in a
 * versioned binary file with the model's fingerprint and a CRC-32, written atomically (a temporary
 * file, then rename). Loading checks everything before touching the session: a file of another
 * model or format version, a corrupt or truncated one fails with a one-line error and leaves the
 * session unchanged. The _ex forms carry an opaque caller blob (the CLI keeps the conversation's
 * messages JSON there); *blob is malloc'd (free() it), NULL when empty. */
q35_status q35_session_save(const q35_session *s, const char *path);
q35_status q35_session_load(q35_session *s, const char *path);
q35_status q35_session_save_ex(const q35_session *s, const char *path, const void *blob, size_t blob_len);
q35_status q35_session_load_ex(q35_session *s, const char *path, void **blob, size_t *blob_len);

/* Prefix reuse with images. The keys [n] of a prompt holding images (checked as q35_session_eval_mm
 * checks it): the token id for text; on each image's run of image tokens a hash of the image's
 * embeddings and grid with the top bit set, so the same ids with another picture never match.
 * q35_session_eval_mm keys what it evaluates this way (and the rope delta the images leave is part
 * of every checkpoint and session file). */
q35_status q35_mm_keys(const q35_model *m, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, uint64_t *keys);
/* Evaluate positions [q35_session_pos(s), end) of a whole prompt tokens[0..n) (from sequence
 * position 0, images included) of which the session holds the start, e.g. after
 * q35_prefix_cache_restore_keys with q35_mm_keys' keys; either end may fall inside an image.
 * logits: of token end-1; all_logits [end-pos][n_vocab]. Fails (session unchanged) when the
 * session's keys are not the prompt's start or [pos, end) is empty. */
q35_status q35_session_eval_mm_rest(q35_session *s, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, int end,
                                    float *logits, float *all_logits);

#ifdef __cplusplus
}
#endif
#endif
