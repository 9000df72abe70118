#include "server/response.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

const char *srv_finish_name(srv_finish f) {
    return f == SRV_FINISH_STOP ? "stop" : f == SRV_FINISH_LENGTH ? "length" : NULL;
}

static char *print_delete(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_json_error(const srv_err *e) {
    cJSON *o = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(in, "message", e->message);
    cJSON_AddStringToObject(in, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) cJSON_AddStringToObject(in, "param", e->param);
    else cJSON_AddNullToObject(in, "param");
    if (e->code) cJSON_AddStringToObject(in, "code", e->code);
    else cJSON_AddNullToObject(in, "code");
    return print_delete(o);
}

static cJSON *head(const srv_reply_meta *m, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", m->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)m->created);
    cJSON_AddStringToObject(o, "model", m->model);
    cJSON_AddStringToObject(o, "system_fingerprint", "q35");
    return o;
}

static void add_usage(cJSON *o, const srv_job_view *v) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", v->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", v->n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", v->n_prompt + v->n_generated);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", v->n_cached);
}

static void add_finish(cJSON *c, srv_finish f) {
    const char *name = srv_finish_name(f);
    if (name) cJSON_AddStringToObject(c, "finish_reason", name);
    else cJSON_AddNullToObject(c, "finish_reason");
}

char *srv_json_completion(const srv_reply_meta *m, const char *text, const srv_job_view *v) {
    int chat = m->kind == SRV_KIND_CHAT;
    cJSON *o = head(m, chat ? "chat.completion" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", text ? text : "");
    } else {
        cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    cJSON_AddNullToObject(c, "logprobs");
    add_finish(c, v->finish);
    add_usage(o, v);
    return print_delete(o);
}

char *srv_json_chunk(const srv_reply_meta *m, int role, const char *text, srv_finish finish) {
    int chat = m->kind == SRV_KIND_CHAT;
    cJSON *o = head(m, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (role || text) cJSON_AddStringToObject(d, "content", text ? text : "");
    } else {
        cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    cJSON_AddNullToObject(c, "logprobs");
    add_finish(c, finish);
    return print_delete(o);
}

char *srv_json_usage_chunk(const srv_reply_meta *m, const srv_job_view *v) {
    cJSON *o = head(m, m->kind == SRV_KIND_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    add_usage(o, v);
    return print_delete(o);
}

static cJSON *model_obj(const char *model_id, time_t created) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", model_id);
    cJSON_AddStringToObject(o, "object", "model");
    cJSON_AddNumberToObject(o, "created", (double)created);
    cJSON_AddStringToObject(o, "owned_by", "q35");
    return o;
}

char *srv_json_models(const char *model_id, time_t created, int one) {
    if (one) return print_delete(model_obj(model_id, created));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), model_obj(model_id, created));
    return print_delete(o);
}
