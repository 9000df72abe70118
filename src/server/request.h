/* OpenAI request bodies (POST /v1/chat/completions and /v1/completions): every field read is
 * type- and range-checked; a bad one gives a 400 naming it. The result is the prompt text (the
 * chat template applied to the messages), its tokens, and the generation parameters. */
#ifndef Q35_SERVER_REQUEST_H
#define Q35_SERVER_REQUEST_H
#include <stddef.h>
#include "q35.h"
#include "server/engine.h"
#include "server/error.h"

typedef enum { SRV_KIND_CHAT = 0, SRV_KIND_COMPLETION } srv_kind;

typedef struct srv_request_ctx {
    q35_sampler_params defaults; /* generation_config.json's, with presence 0 and repetition 1 */
    int default_thinking;        /* what the chat template does without enable_thinking */
    int has_vision;              /* the checkpoint has a vision tower */
    size_t max_image_bytes;      /* per image, decoded */
    const q35_image_proc *image_proc; /* the checkpoint's image preprocessor (NULL: images refused) */
    const q35_model *model;      /* for the image token counts (NULL: images refused) */
    const q35_tokenizer *tok;
    int n_ctx;                   /* tokens per session */
} srv_request_ctx;

typedef struct srv_request {
    srv_kind kind;
    int stream;
    int include_usage;       /* stream_options.include_usage */
    char *prompt;            /* malloc'd prompt text */
    int32_t *tokens;         /* [n_tokens] malloc'd */
    int n_tokens;
    srv_gen_params gen;      /* stop strings malloc'd (moved into the job by srv_job_new) */
} srv_request;

/* Parse, validate, render and tokenize body[len]. 0, or -1 with err filled and nothing left to free. */
int srv_request_parse(const char *body, size_t len, srv_kind kind, const srv_request_ctx *ctx, srv_request *out, srv_err *err);
void srv_request_free(srv_request *r);
#endif
