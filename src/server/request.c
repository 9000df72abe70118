#include "server/request.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/image.h"

#define BAD(err, param, ...) srv_error(err, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL; /* null means absent, as in the OpenAI API */
}

static int get_number(const cJSON *o, const char *name, double lo, double hi, double *out, srv_err *err) {
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return BAD(err, name, "'%s': expected a number", name);
    if (v->valuedouble < lo || v->valuedouble > hi) return BAD(err, name, "'%s': expected a number in [%g, %g], got %g", name, lo, hi, v->valuedouble);
    *out = v->valuedouble;
    return 1;
}

static int get_int(const cJSON *o, const char *name, double lo, double hi, long long *out, srv_err *err) {
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)) return BAD(err, name, "'%s': expected an integer", name);
    if (v->valuedouble < lo || v->valuedouble > hi) return BAD(err, name, "'%s': expected an integer in [%.0f, %.0f], got %.0f", name, lo, hi, v->valuedouble);
    *out = (long long)v->valuedouble;
    return 1;
}

static int get_bool(const cJSON *o, const char *name, int *out, srv_err *err) {
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return BAD(err, name, "'%s': expected true or false", name);
    *out = cJSON_IsTrue(v);
    return 1;
}

#define SRV_MAX_STOP_BYTES 256

static int parse_stop(const cJSON *o, srv_gen_params *g, srv_err *err) {
    const cJSON *v = field(o, "stop");
    if (!v) return 0;
    if (cJSON_IsString(v) && strlen(v->valuestring) > SRV_MAX_STOP_BYTES)
        return BAD(err, "stop", "'stop': a stop sequence may have at most %d bytes", SRV_MAX_STOP_BYTES);
    if (cJSON_IsString(v)) {
        if (!(g->stop[0] = strdup(v->valuestring))) return srv_error(err, 500, "server_error", NULL, "stop", "out of memory");
        g->n_stop = 1;
        return 0;
    }
    if (!cJSON_IsArray(v)) return BAD(err, "stop", "'stop': expected a string or an array of up to %d strings", SRV_MAX_STOPS);
    if (cJSON_GetArraySize(v) > SRV_MAX_STOPS) return BAD(err, "stop", "'stop': at most %d sequences, got %d", SRV_MAX_STOPS, cJSON_GetArraySize(v));
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        if (!cJSON_IsString(s)) return BAD(err, "stop", "'stop[%d]': expected a string", g->n_stop);
        if (strlen(s->valuestring) > SRV_MAX_STOP_BYTES)
            return BAD(err, "stop", "'stop[%d]': a stop sequence may have at most %d bytes", g->n_stop, SRV_MAX_STOP_BYTES);
        if (!(g->stop[g->n_stop] = strdup(s->valuestring))) return srv_error(err, 500, "server_error", NULL, "stop", "out of memory");
        g->n_stop++;
    }
    return 0;
}

static int parse_params(const cJSON *o, const srv_request_ctx *ctx, srv_request *r, srv_err *err) {
    srv_gen_params *g = &r->gen;
    g->sp = ctx->defaults;
    static uint64_t counter;
    g->sp.seed = (uint64_t)time(NULL) * 6364136223846793005ULL + __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    double d;
    long long ll;
    int b, rc;
    if ((rc = get_number(o, "temperature", 0, 2, &d, err)) < 0) return -1;
    if (rc) g->sp.temperature = (float)d;
    if ((rc = get_number(o, "top_p", 0, 1, &d, err)) < 0) return -1;
    if (rc) g->sp.top_p = d > 0 ? (float)d : 1e-6f;
    if ((rc = get_int(o, "top_k", 0, 1 << 30, &ll, err)) < 0) return -1; /* extension (llama.cpp, vLLM) */
    if (rc) g->sp.top_k = (int)ll;
    if ((rc = get_number(o, "min_p", 0, 1, &d, err)) < 0) return -1; /* extension */
    if (rc) g->sp.min_p = (float)d;
    if ((rc = get_number(o, "repetition_penalty", 0.01, 100, &d, err)) < 0) return -1; /* extension */
    if (rc) g->sp.repetition_penalty = (float)d;
    if ((rc = get_number(o, "presence_penalty", -2, 2, &d, err)) < 0) return -1;
    if (rc) g->sp.presence_penalty = (float)d;
    if ((rc = get_number(o, "frequency_penalty", -2, 2, &d, err)) < 0) return -1;
    if (rc) g->frequency_penalty = (float)d;
    if ((rc = get_int(o, "seed", -9.2e18, 9.2e18, &ll, err)) < 0) return -1;
    if (rc) g->sp.seed = (uint64_t)ll;
    if ((rc = get_int(o, "n", 1, 1e9, &ll, err)) < 0) return -1;
    if (rc && ll != 1) return BAD(err, "n", "'n': only n = 1 is supported, got %lld", ll);
    g->max_tokens = -1;
    if ((rc = get_int(o, "max_tokens", 1, 1e9, &ll, err)) < 0) return -1;
    if (rc) g->max_tokens = (int)ll;
    if ((rc = get_int(o, "max_completion_tokens", 1, 1e9, &ll, err)) < 0) return -1;
    if (rc) g->max_tokens = (int)ll;
    if (get_bool(o, "ignore_eos", &g->ignore_eos, err) < 0) return -1; /* extension (vLLM, llama.cpp) */
    if (parse_stop(o, g, err)) return -1;
    if (get_bool(o, "stream", &r->stream, err) < 0) return -1;
    const cJSON *so = field(o, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) return BAD(err, "stream_options", "'stream_options': expected an object");
        if (get_bool(so, "include_usage", &r->include_usage, err) < 0) return -1;
    }
    if ((rc = get_bool(o, "logprobs", &b, err)) < 0) return -1;
    if (rc && b) return BAD(err, "logprobs", "'logprobs': log probabilities are not supported");
    return 0;
}

/* Check one message's content parts; images are decoded and preprocessed by the vision hook
 * (appended to r->gen.images) and their parts become {"type": "image"} for the chat template. */
static int check_parts(cJSON *content, int i, const srv_request_ctx *ctx, srv_request *r, srv_err *err) {
    char param[64];
    int j = 0;
    for (cJSON *part = content->child, *next; part; part = next) {
        next = part->next;
        snprintf(param, sizeof param, "messages[%d].content[%d]", i, j);
        if (!cJSON_IsObject(part)) return BAD(err, param, "'%s': expected an object (a content part)", param);
        const cJSON *type = field(part, "type");
        if (!cJSON_IsString(type)) return BAD(err, param, "'%s.type': expected \"text\" or \"image_url\"", param);
        if (!strcmp(type->valuestring, "text")) {
            if (!cJSON_IsString(field(part, "text"))) return BAD(err, param, "'%s.text': expected a string", param);
        } else if (!strcmp(type->valuestring, "image_url")) {
            const cJSON *iu = field(part, "image_url");
            const cJSON *url = cJSON_IsObject(iu) ? field(iu, "url") : iu;
            snprintf(param, sizeof param, "messages[%d].content[%d].image_url", i, j);
            if (!cJSON_IsString(url)) return BAD(err, param, "'%s': expected {\"url\": \"data:image/...;base64,...\"} or a URL string", param);
            uint8_t *bytes;
            size_t n;
            if (srv_image_decode_data_url(url->valuestring, ctx->max_image_bytes, param, &bytes, &n, err)) return -1;
            enum { MAX_IMAGES = 16 };
            int used = 0; /* tokens of the images so far: the next one gets what the context has left */
            for (int k = 0; k < r->gen.n_images; k++) used += r->gen.images[k].n_tokens;
            if (r->gen.n_images >= MAX_IMAGES) {
                free(bytes);
                return BAD(err, param, "'%s': at most %d images per request", param, MAX_IMAGES);
            }
            q35_pixels px;
            int rc = srv_image_accept(ctx->has_vision, ctx->model ? ctx->image_proc : NULL, bytes, n, ctx->n_ctx - used, param, &px, err);
            free(bytes);
            if (rc) return -1;
            q35_pixels *grown = realloc(r->gen.images, sizeof *grown * (size_t)(r->gen.n_images + 1));
            cJSON *image = cJSON_CreateObject();
            if (!grown || !image || !cJSON_AddStringToObject(image, "type", "image")) {
                if (grown) r->gen.images = grown;
                q35_pixels_free(&px);
                cJSON_Delete(image);
                return srv_error(err, 500, "server_error", NULL, param, "out of memory");
            }
            r->gen.images = grown;
            r->gen.images[r->gen.n_images++] = px;
            cJSON_ReplaceItemViaPointer(content, part, image); /* the template's image part: one <|image_pad|> */
        } else {
            return BAD(err, param, "'%s.type': expected \"text\" or \"image_url\", got \"%.40s\"", param, type->valuestring);
        }
        j++;
    }
    return 0;
}

/* Validate messages and render them with the chat template into r->prompt. */
static int render_chat(cJSON *o, const srv_request_ctx *ctx, srv_request *r, srv_err *err) {
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!msgs || cJSON_IsNull(msgs)) return BAD(err, "messages", "'messages' is required: an array of {\"role\", \"content\"}");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) return BAD(err, "messages", "'messages': expected a non-empty array");
    int i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) return BAD(err, param, "'%s': expected an object with role and content", param);
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) return BAD(err, param, "'%s.role': expected a string", param);
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) cJSON_SetValuestring(role, "system"); /* the newer name of system */
        else if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool"))
            return BAD(err, param, "'%s.role': expected system, developer, user, assistant or tool, got \"%.40s\"", param, rs);
        cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsArray(c)) {
            if (check_parts(c, i, ctx, r, err)) return -1;
        } else if (!cJSON_IsString(c) && !(cJSON_IsNull(c) || !c)) {
            return BAD(err, param, "'%s.content': expected a string or an array of content parts", param);
        } else if (!cJSON_IsString(c) && strcmp(role->valuestring, "assistant")) {
            return BAD(err, param, "'%s.content' is required", param);
        }
        i++;
    }
    int think = ctx->default_thinking;
    const cJSON *kw = field(o, "chat_template_kwargs");
    if (kw) {
        if (!cJSON_IsObject(kw)) return BAD(err, "chat_template_kwargs", "'chat_template_kwargs': expected an object");
        if (get_bool(kw, "enable_thinking", &think, err) < 0) return -1;
    }
    const cJSON *tools = field(o, "tools");
    if (tools && !cJSON_IsArray(tools)) return BAD(err, "tools", "'tools': expected an array");
    char *msgs_json = cJSON_PrintUnformatted(msgs);
    char *tools_json = tools ? cJSON_PrintUnformatted(tools) : NULL;
    if (!msgs_json || (tools && !tools_json)) {
        free(msgs_json);
        free(tools_json);
        return srv_error(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    q35_chat_opts co = {1, think, 0, ctx->default_thinking};
    q35_status st = q35_chat_render(msgs_json, tools_json, &co, &r->prompt);
    free(msgs_json);
    free(tools_json);
    if (st) return BAD(err, "messages", "the chat template refused the conversation: %s", q35_last_error());
    return 0;
}

int srv_request_parse(const char *body, size_t len, srv_kind kind, const srv_request_ctx *ctx, srv_request *r, srv_err *err) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!o) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return BAD(err, NULL, "the request body is not valid JSON (error near byte %zu)", at);
    }
    int rc = -1;
    if (!cJSON_IsObject(o)) {
        BAD(err, NULL, "the request body must be a JSON object");
        goto done;
    }
    const cJSON *model = field(o, "model");
    if (model && !cJSON_IsString(model)) {
        BAD(err, "model", "'model': expected a string");
        goto done;
    }
    if (parse_params(o, ctx, r, err)) goto done;
    if (kind == SRV_KIND_CHAT) {
        if (render_chat(o, ctx, r, err)) goto done;
    } else {
        const cJSON *p = field(o, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
        if (!p) {
            BAD(err, "prompt", "'prompt' is required: a string");
            goto done;
        }
        if (!cJSON_IsString(p)) {
            BAD(err, "prompt", "'prompt': expected a string (or an array of one string)");
            goto done;
        }
        if (!(r->prompt = strdup(p->valuestring))) {
            srv_error(err, 500, "server_error", NULL, NULL, "out of memory");
            goto done;
        }
    }
    size_t n = 0;
    /* chat: the rendered template's special tokens are real; completions: the text as written */
    if (q35_tokenize(ctx->tok, r->prompt, strlen(r->prompt), kind == SRV_KIND_CHAT, &r->tokens, &n)) {
        srv_error(err, 500, "server_error", NULL, NULL, "tokenizing the prompt: %s", q35_last_error());
        goto done;
    }
    r->n_tokens = (int)n;
    if (r->gen.n_images > 0) { /* each image's <|image_pad|> becomes its tokens */
        int *counts = malloc(sizeof(int) * (size_t)r->gen.n_images);
        int32_t *expanded = NULL;
        int n_expanded = 0;
        if (!counts) {
            srv_error(err, 500, "server_error", NULL, NULL, "out of memory");
            goto done;
        }
        for (int i = 0; i < r->gen.n_images; i++) counts[i] = r->gen.images[i].n_tokens;
        q35_status st = q35_expand_image_tokens(ctx->model, r->tokens, r->n_tokens, counts, r->gen.n_images, &expanded, &n_expanded);
        free(counts);
        if (st) {
            BAD(err, "messages", "the prompt's images: %s", q35_last_error());
            goto done;
        }
        free(r->tokens);
        r->tokens = expanded;
        r->n_tokens = n_expanded;
        n = (size_t)n_expanded;
    }
    if (n == 0) {
        BAD(err, "prompt", "the prompt is empty");
        goto done;
    }
    if (n >= (size_t)ctx->n_ctx) {
        srv_error(err, 400, "invalid_request_error", "context_length_exceeded", kind == SRV_KIND_CHAT ? "messages" : "prompt",
                  "the prompt is %zu tokens but the context holds %d (the answer needs at least one more); shorten it or start the server with a larger --ctx",
                  n, ctx->n_ctx);
        goto done;
    }
    /* what a later request can share: a chat up to its generation prompt (the last <|im_start|>) */
    r->gen.stable = r->n_tokens;
    const int32_t im_start = kind == SRV_KIND_CHAT ? q35_token_id(ctx->tok, "<|im_start|>") : -1;
    for (int i = r->n_tokens; im_start >= 0 && i-- > 0;)
        if (r->tokens[i] == im_start) {
            r->gen.stable = i;
            break;
        }
    int room = ctx->n_ctx - (int)n;
    if (r->gen.max_tokens < 0 || r->gen.max_tokens > room) r->gen.max_tokens = room;
    rc = 0;
done:
    cJSON_Delete(o);
    if (rc) srv_request_free(r);
    return rc;
}

void srv_request_free(srv_request *r) {
    free(r->prompt);
    free(r->tokens);
    for (int i = 0; i < r->gen.n_stop; i++) free(r->gen.stop[i]);
    for (int i = 0; i < r->gen.n_images; i++) q35_pixels_free(&r->gen.images[i]);
    free(r->gen.images);
    memset(r, 0, sizeof *r);
}
