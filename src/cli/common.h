/* Pieces shared by the generating subcommands (generate, chat). */
#ifndef Q35_CLI_COMMON_H
#define Q35_CLI_COMMON_H
#include <cjson/cJSON.h>
#include <stdio.h>
#include "q35.h"

int cli_parse_long(const char *s, const char *opt, long lo, long hi, long *out);
/* --kv-cache's value: "f32" or "f16". Returns 0, or -1 after an error line. */
int cli_parse_kv_type(const char *s, q35_kv_type *out);
int cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out);
/* Parse "1,2,3" (or spaces) into a malloc'd id array. */
int cli_parse_ids(const char *s, int32_t **ids, size_t *n);

/* The thinking default of DIR's chat template (chat_template.jinja or tokenizer_config.json's
 * chat_template); 0 (small-model default, off) when there is none. */
int cli_template_default_thinking(const char *dir);

/* The directory holding tokenizer.json, chat_template.jinja, generation_config.json for a model
 * path: the path itself, or the directory of a .gguf file. */
const char *cli_side_dir(const char *model_path, char *buf, size_t cap);

typedef struct cli_stops {
    int32_t ids[16];
    int n;
} cli_stops;
/* eos ids of config.json / generation_config.json, <|im_end|> and <|endoftext|>. */
void cli_stops_init(cli_stops *s, const char *dir, const q35_tokenizer *tok);
int cli_is_stop(const cli_stops *s, int32_t id);

/* Generation options shared by generate and chat. */
typedef struct cli_gen {
    q35_sampler_params sp;
    int n_predict;        /* max new tokens */
    int n_ctx;
    q35_kv_type kv_type;  /* --kv-cache f32|f16 */
    int think;            /* -1 template default, 0 off, 1 on */
    int print_ids;
    FILE *dump_logits;
    q35_load_opts load;   /* --weights, --mmap */
    int image_w, image_h; /* --image-size WxH (0: the preprocessor's own sizing) */
    int max_image_tokens; /* --max-image-tokens N (0: no bound beyond the preprocessor's) */
    const q35_image_embeds *images; /* the images whose <|image_pad|> runs the prompt holds (then cli_generate's prompt is
                                       the whole prompt from position 0, of which the session holds the start) */
    int n_images;
    int reuse;            /* 1: resume from exact checkpoints (default); 0: --no-reuse, every prompt from the start */
    long cache_mib;       /* --cache-mib: the prefix cache's budget */
    const char *session;  /* --session FILE or NULL */
} cli_gen;

/* Parse one sampling / context option at argv[*i] (advancing *i past its value). Returns 1 if it
 * was one, 0 if not, -1 on a bad value. */
int cli_gen_option(cli_gen *g, int argc, char **argv, int *i);
void cli_gen_help(FILE *f);
void cli_gen_defaults(cli_gen *g, const char *dir);
/* cli_gen_defaults with the side directory of the model named by -m/--model in argv (before the
 * options are parsed, so that they override generation_config.json). */
void cli_gen_defaults_for_args(cli_gen *g, int argc, char **argv);

/* Evaluate prompt ids then generate until a stop id, n_predict or *interrupt; streams text (or
 * ids) to out. Reports speed on stderr when verbose. Returns 0 or the exit status. The generated
 * ids are appended to *gen (malloc'd) when gen is not NULL. */
int cli_generate(q35_session *s, const q35_tokenizer *tok, const cli_gen *g, const cli_stops *stops, const int32_t *prompt,
                 size_t n_prompt, FILE *out, volatile int *interrupt, int32_t **gen, size_t *n_gen, int verbose);
/* Images for generate / chat (src/cli/images.c): each loaded, preprocessed (with cli_gen's image
 * options and DIR's preprocessor_config.json) and encoded once. */
typedef struct cli_images {
    q35_image_embeds *im; /* [n] embeddings owned here */
    int n, cap;
    q35_image_proc *proc; /* made on the first image */
} cli_images;
/* Append the image at path; on failure prints the error and returns non-zero (ci unchanged). */
int cli_images_add(cli_images *ci, q35_model *m, const char *dir, const cli_gen *g, const char *path);
void cli_images_clear(cli_images *ci); /* forget the images, keep the preprocessor */
void cli_images_free(cli_images *ci);
/* Expand each <|image_pad|> of *ids (one per image, in order) to its image's tokens. */
int cli_images_expand(const cli_images *ci, const q35_model *m, int32_t **ids, size_t *n_ids);

/* The prefix cache of --cache-mib for a model (NULL with --no-reuse, --cache-mib 0, or on failure). */
q35_prefix_cache *cli_prefix_cache(const cli_gen *g, const q35_model *m);
/* cli_generate for a whole prompt: resume s at the longest exact prefix of prompt it holds or the
 * cache has (with --no-reuse, start over), evaluate the rest, generate, and checkpoint. stable:
 * how many leading prompt tokens later prompts are expected to share (a chat: up to the
 * generation prompt); a checkpoint is also taken at the last grid point within them. */
int cli_generate_reuse(q35_session *s, q35_prefix_cache *cache, const q35_tokenizer *tok, const cli_gen *g, const cli_stops *stops,
                       const int32_t *prompt, size_t n_prompt, size_t stable, FILE *out, volatile int *interrupt, int32_t **gen,
                       size_t *n_gen, int verbose);
/* The tokens before the last <|im_start|> of a rendered prompt (what the next turn renders the same). */
size_t cli_stable_prefix(const q35_tokenizer *tok, const int32_t *ids, size_t n);

/* --session files. The library stores the state and an opaque blob; the CLI's blob is a JSON
 * object: {"format": "q35-chat", "messages": [...]} (chat, and generate with the template) or
 * {"format": "q35-raw", "tokens": [...]} (generate --raw / --prompt-ids: every token so far).
 * cli_session_load: *conv NULL when path does not exist yet; 1 (after a message) on a bad file. */
int cli_session_load(q35_session *s, const char *path, cJSON **conv);
int cli_session_save(const q35_session *s, const char *path, const cJSON *conv);
#endif
