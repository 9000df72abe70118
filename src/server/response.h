/* OpenAI response bodies as JSON text (each malloc'd, NULL when out of memory): errors, chat
 * completions and their stream chunks, text completions, the model list. */
#ifndef Q35_SERVER_RESPONSE_H
#define Q35_SERVER_RESPONSE_H
#include <time.h>
#include "server/engine.h"
#include "server/error.h"
#include "server/request.h"

typedef struct srv_reply_meta {
    const char *id;     /* "chatcmpl-..." / "cmpl-..." */
    const char *model;  /* the model id (directory name) */
    time_t created;
    srv_kind kind;
} srv_reply_meta;

/* "stop", "length", or NULL (still running / cancelled / failed). */
const char *srv_finish_name(srv_finish f);

char *srv_json_error(const srv_err *e);
/* The whole answer: chat.completion or text_completion, with usage. */
char *srv_json_completion(const srv_reply_meta *m, const char *text, const srv_job_view *v);
/* One stream chunk: the role-only opening delta (role = 1), a text delta, or the closing chunk
 * (finish != NONE). text may be NULL. */
char *srv_json_chunk(const srv_reply_meta *m, int role, const char *text, srv_finish finish);
/* The usage-only chunk sent last when stream_options.include_usage is set. */
char *srv_json_usage_chunk(const srv_reply_meta *m, const srv_job_view *v);
/* GET /v1/models and /v1/models/ID. */
char *srv_json_models(const char *model_id, time_t created, int one);
#endif
