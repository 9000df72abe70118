/* The generation engine of q35 serve: one worker thread owns the model and a fixed number of
 * sessions (slots); requests wait in a FIFO queue for a free slot, and the worker round-robins one
 * decode step over every active request, so concurrent clients advance at the same pace and each
 * gets the answer it would get alone: a prompt is evaluated in pieces that begin on the chunk
 * grid, possibly resumed from an exact checkpoint of the prefix cache, which gives bitwise the
 * logits of one call over the whole prompt (what q35 generate does).
 * Only the worker thread computes, so the thread pool is never entered from two threads.
 * HTTP threads create jobs, submit them, and read their text as it grows. */
#ifndef Q35_SERVER_ENGINE_H
#define Q35_SERVER_ENGINE_H
#include <stddef.h>
#include <stdint.h>
#include "q35.h"

#define SRV_MAX_STOPS 4 /* OpenAI allows up to 4 stop sequences */

typedef struct srv_gen_params {
    q35_sampler_params sp;   /* temperature <= 0: argmax */
    float frequency_penalty; /* subtracted count(id) times from a generated token's logit */
    int max_tokens;          /* tokens to generate at most (clamped to the context) */
    int ignore_eos;          /* keep going past end-of-answer tokens (benchmarks, tests) */
    int stable;              /* prompt tokens a later request may share (a chat: up to the generation
                                prompt, which the next turn renders differently); checkpointed there */
    int n_stop;
    char *stop[SRV_MAX_STOPS]; /* malloc'd; the answer ends before the first occurrence */
    q35_pixels *images;      /* [n_images] malloc'd pixel_values of the prompt's images, in order (moved
                                into the job with the stop strings; the worker encodes them) */
    int n_images;
} srv_gen_params;

typedef enum { SRV_FINISH_NONE = 0, SRV_FINISH_STOP, SRV_FINISH_LENGTH, SRV_FINISH_CANCELLED, SRV_FINISH_ERROR } srv_finish;

typedef struct srv_job srv_job;
typedef struct srv_engine srv_engine;

typedef struct srv_engine_opts {
    int n_ctx;      /* tokens per session */
    int parallel;   /* sessions decoding at once (slots) */
    int max_queue;  /* requests waiting for a slot before new ones are refused */
    int reuse;      /* resume prompts from exact checkpoints (the output is bitwise the same) */
    q35_prefix_cache *cache; /* shared checkpoints (NULL: only each session's own); not owned */
    int prefill_step;        /* prompt tokens per step between other requests' decode steps
                                (rounded down to the chunk grid; 0: 512) */
    q35_kv_type kv_type;     /* the sessions' KV cache */
} srv_engine_opts;

/* Takes nothing over: model and tokenizer must outlive the engine. stop_ids: end-of-answer ids. */
q35_status srv_engine_new(q35_model *m, const q35_tokenizer *tok, const int32_t *stop_ids, int n_stop_ids,
                          const srv_engine_opts *o, srv_engine **out);
/* Cancels every job, joins the worker, frees the sessions (jobs still referenced stay valid). */
void srv_engine_free(srv_engine *e);
int srv_engine_ctx(const srv_engine *e);
/* Requests decoding now and waiting for a slot. */
void srv_engine_load(srv_engine *e, int *active, int *queued);

/* A job for prompt[n_prompt] (copied); params are moved in (their stop strings now belong to the
 * job). The caller holds one reference. */
srv_job *srv_job_new(const int32_t *prompt, int n_prompt, srv_gen_params *params);
/* Queue the job (the engine takes its own reference). Q35_ERR_ARG when the engine is shutting
 * down or the queue is full. */
q35_status srv_engine_submit(srv_engine *e, srv_job *j);
/* Ask the engine to stop the job (a client went away); safe at any time. */
void srv_job_cancel(srv_job *j);
void srv_job_release(srv_job *j);

typedef struct srv_job_view {
    char *text;        /* malloc'd copy of the answer text from `from` on (NUL-terminated), or NULL */
    size_t len;        /* its length */
    srv_finish finish; /* SRV_FINISH_NONE while running */
    int n_prompt, n_generated, n_cached;
    char error[256];   /* when finish == SRV_FINISH_ERROR */
} srv_job_view;
/* Wait up to timeout_ms for text beyond byte `from` or the end, then copy what there is.
 * Returns 0, or -1 when out of memory. */
int srv_job_wait(srv_job *j, size_t from, int timeout_ms, srv_job_view *v);
#endif
