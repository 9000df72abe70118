#include "server/http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/err.h"
#include "server/response.h"

struct srv_http {
    struct MHD_Daemon *d;
    srv_http_opts o;
    char *host, *api_key, *model_id; /* owned copies */
    int port;
    time_t started;
    atomic_int stopping;
    atomic_ulong next_id;
};

typedef enum { R_NONE = 0, R_PAGE, R_HEALTH, R_MODELS, R_MODEL, R_CHAT, R_COMPLETIONS } route;

typedef struct conn {
    srv_http *h;
    struct MHD_Connection *c;
    route r;
    int is_post;
    int error_status;        /* decided before the body: respond with it after discarding the body */
    char *body;              /* [len] request body so far */
    size_t len, cap;
    int too_large;
    /* streaming */
    srv_job *job;
    srv_reply_meta meta;
    char id[48];
    int include_usage;
    int stage;               /* 0: role chunk, 1: text, 2: finish sent, 3: done */
    size_t text_from;        /* answer bytes already sent */
    char *out;               /* [out_len] SSE bytes not yet handed to MHD, from out_off */
    size_t out_len, out_off, out_cap;
} conn;

static const char *CT_JSON = "application/json";

static void add_common_headers(struct MHD_Response *resp, const char *type) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
}

/* Queue text (malloc'd, taken over; NULL: out of memory) with status. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *text, const char *type) {
    if (!text) {
        static char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(oom), oom, MHD_RESPMEM_PERSISTENT);
        add_common_headers(r, CT_JSON);
        enum MHD_Result res = MHD_queue_response(c, MHD_HTTP_INTERNAL_SERVER_ERROR, r);
        MHD_destroy_response(r);
        return res;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    add_common_headers(r, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, POST, OPTIONS");
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result res = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return res;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, const srv_err *e) {
    q35_log(Q35_LOG_INFO, "serve: %d %s", e->status, e->message);
    return reply(c, (unsigned)e->status, srv_json_error(e), CT_JSON);
}

static enum MHD_Result reply_status(struct MHD_Connection *c, int status, const char *type, const char *code, const char *fmt,
                                    const char *arg) {
    srv_err e;
    srv_error(&e, status, type, code, NULL, fmt, arg);
    return reply_error(c, &e);
}

static route route_of(const char *url, const char **method_needed) {
    *method_needed = "GET";
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) return R_PAGE;
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/v1/models")) return R_MODELS;
    if (!strncmp(url, "/v1/models/", 11) && url[11]) return R_MODEL;
    *method_needed = "POST";
    if (!strcmp(url, "/v1/chat/completions")) return R_CHAT;
    if (!strcmp(url, "/v1/completions")) return R_COMPLETIONS;
    return R_NONE;
}

static int authorized(srv_http *h, struct MHD_Connection *c) {
    if (!h->api_key) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncasecmp(a, "Bearer ", 7)) return 0;
    a += 7;
    size_t n = strlen(a), k = strlen(h->api_key);
    unsigned char diff = (unsigned char)(n != k); /* compare in time independent of where they differ */
    for (size_t i = 0; i < k; i++) diff |= (unsigned char)(h->api_key[i] ^ (i < n ? a[i] : 0));
    return diff == 0;
}

/* The client closed its end (or the server is stopping). */
static int client_gone(conn *x) {
    if (atomic_load(&x->h->stopping)) return 1;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(x->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ------------------------------------------------------------------ streaming */

static int out_append_event(conn *x, char *json) {
    if (!json) return -1;
    size_t n = strlen(json), need = x->out_len + n + 8;
    if (need > x->out_cap) {
        size_t cap = x->out_cap ? x->out_cap : 1024;
        while (cap < need) cap *= 2;
        char *o = realloc(x->out, cap);
        if (!o) {
            free(json);
            return -1;
        }
        x->out = o;
        x->out_cap = cap;
    }
    memcpy(x->out + x->out_len, "data: ", 6);
    memcpy(x->out + x->out_len + 6, json, n);
    memcpy(x->out + x->out_len + 6 + n, "\n\n", 2);
    x->out_len += n + 8;
    free(json);
    return 0;
}

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    conn *x = cls;
    (void)pos;
    while (x->out_off == x->out_len) {
        x->out_off = x->out_len = 0;
        if (x->stage == 3) return MHD_CONTENT_READER_END_OF_STREAM;
        if (x->stage == 0) {
            if (out_append_event(x, srv_json_chunk(&x->meta, 1, NULL, SRV_FINISH_NONE))) return MHD_CONTENT_READER_END_WITH_ERROR;
            x->stage = 1;
            continue;
        }
        srv_job_view v;
        if (srv_job_wait(x->job, x->text_from, 200, &v)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (v.len) {
            x->text_from += v.len;
            int bad = out_append_event(x, srv_json_chunk(&x->meta, 0, v.text, SRV_FINISH_NONE));
            free(v.text);
            if (bad) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        if (v.finish == SRV_FINISH_NONE) {
            if (client_gone(x)) {
                srv_job_cancel(x->job);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            continue;
        }
        if (v.finish == SRV_FINISH_CANCELLED || v.finish == SRV_FINISH_ERROR) {
            srv_err e;
            srv_error(&e, 500, "server_error", NULL, NULL, "%s",
                      v.finish == SRV_FINISH_ERROR ? v.error : "the request was cancelled (the server is stopping)");
            if (out_append_event(x, srv_json_error(&e))) return MHD_CONTENT_READER_END_WITH_ERROR;
        } else {
            if (out_append_event(x, srv_json_chunk(&x->meta, 0, NULL, v.finish))) return MHD_CONTENT_READER_END_WITH_ERROR;
            if (x->include_usage && out_append_event(x, srv_json_usage_chunk(&x->meta, &v))) return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        static const char done[] = "data: [DONE]\n\n";
        if (x->out_len + sizeof done > x->out_cap) {
            char *o = realloc(x->out, x->out_len + sizeof done);
            if (!o) return MHD_CONTENT_READER_END_WITH_ERROR;
            x->out = o;
            x->out_cap = x->out_len + sizeof done;
        }
        memcpy(x->out + x->out_len, done, sizeof done - 1);
        x->out_len += sizeof done - 1;
        x->stage = 3;
    }
    size_t n = x->out_len - x->out_off < max ? x->out_len - x->out_off : max;
    memcpy(buf, x->out + x->out_off, n);
    x->out_off += n;
    return (ssize_t)n;
}

/* ------------------------------------------------------------------ completions */

static enum MHD_Result handle_generate(conn *x) {
    srv_http *h = x->h;
    struct MHD_Connection *c = x->c;
    srv_err e;
    srv_request req;
    if (srv_request_parse(x->body ? x->body : "", x->len, x->r == R_CHAT ? SRV_KIND_CHAT : SRV_KIND_COMPLETION, &h->o.req, &req, &e))
        return reply_error(c, &e);
    free(x->body);
    x->body = NULL;
    x->len = x->cap = 0;
    srv_job *job = srv_job_new(req.tokens, req.n_tokens, &req.gen);
    int stream = req.stream, usage = req.include_usage;
    srv_request_free(&req);
    if (!job) return reply_status(c, 500, "server_error", NULL, "%s", "out of memory");
    if (srv_engine_submit(h->o.engine, job)) {
        srv_job_release(job);
        return reply_status(c, 503, "server_error", "server_busy", "%s", q35_last_error());
    }
    x->job = job;
    snprintf(x->id, sizeof x->id, "%s-%lx%lx", x->r == R_CHAT ? "chatcmpl" : "cmpl", (unsigned long)time(NULL),
             (unsigned long)atomic_fetch_add(&h->next_id, 1));
    x->meta.id = x->id;
    x->meta.model = h->model_id;
    x->meta.created = time(NULL);
    x->meta.kind = x->r == R_CHAT ? SRV_KIND_CHAT : SRV_KIND_COMPLETION;
    x->include_usage = usage;
    if (stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_reader, x, NULL);
        if (!r) return MHD_NO;
        add_common_headers(r, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result res = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return res;
    }
    srv_job_view v;
    size_t seen = 0; /* text bytes already seen: waiting from there blocks until more comes or the job ends */
    for (;;) { /* this connection's own thread waits; a client that hangs up cancels the job */
        if (srv_job_wait(job, seen, 200, &v)) return reply_status(c, 500, "server_error", NULL, "%s", "out of memory");
        if (v.finish != SRV_FINISH_NONE) break;
        seen += v.len;
        free(v.text);
        if (client_gone(x)) {
            srv_job_cancel(job);
            return MHD_NO;
        }
    }
    free(v.text); /* the tail from `seen`; the answer is the whole text */
    if (srv_job_wait(job, 0, 0, &v)) return reply_status(c, 500, "server_error", NULL, "%s", "out of memory");
    enum MHD_Result res;
    if (v.finish == SRV_FINISH_ERROR) res = reply_status(c, 500, "server_error", NULL, "generation failed: %s", v.error);
    else if (v.finish == SRV_FINISH_CANCELLED) res = reply_status(c, 503, "server_error", NULL, "%s", "the server is stopping");
    else res = reply(c, MHD_HTTP_OK, srv_json_completion(&x->meta, v.text, &v), CT_JSON);
    free(v.text);
    return res;
}

/* ------------------------------------------------------------------ dispatch */

static enum MHD_Result handle_get(conn *x) {
    srv_http *h = x->h;
    switch (x->r) {
    case R_PAGE: return reply(x->c, MHD_HTTP_OK, strdup(srv_chat_page), "text/html; charset=utf-8");
    case R_HEALTH: {
        int active, queued;
        srv_engine_load(h->o.engine, &active, &queued);
        char *s = malloc(96);
        if (s) snprintf(s, 96, "{\"status\":\"ok\",\"active\":%d,\"queued\":%d}", active, queued);
        return reply(x->c, MHD_HTTP_OK, s, CT_JSON);
    }
    case R_MODELS: return reply(x->c, MHD_HTTP_OK, srv_json_models(h->model_id, h->started, 0), CT_JSON);
    default: break;
    }
    return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size, void **con_cls) {
    srv_http *h = cls;
    (void)version;
    conn *x = *con_cls;
    if (!x) { /* first call: only the headers are known */
        if (!(x = calloc(1, sizeof *x))) return MHD_NO;
        x->h = h;
        x->c = c;
        *con_cls = x;
        const char *needed;
        x->r = route_of(url, &needed);
        x->is_post = !strcmp(method, "POST");
        if (!strcmp(method, "OPTIONS")) {
            x->error_status = 204;
        } else if (x->r == R_NONE) {
            x->error_status = 404;
        } else if (strcmp(method, needed) && !(x->r == R_PAGE && !strcmp(method, "HEAD"))) {
            x->error_status = 405;
        } else if ((x->r == R_MODELS || x->r == R_MODEL || x->r == R_CHAT || x->r == R_COMPLETIONS) && !authorized(h, c)) {
            x->error_status = 401;
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->o.max_body) {
            srv_err e;
            srv_error(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "the request body is %s bytes; the limit is %zu (--max-body)", cl, h->o.max_body);
            return reply_error(c, &e);
        }
        return MHD_YES;
    }
    if (*upload_data_size) { /* a piece of the body */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (x->error_status || x->too_large || x->r == R_NONE) return MHD_YES; /* discarded */
        if (x->len + n > h->o.max_body) {
            x->too_large = 1;
            free(x->body);
            x->body = NULL;
            x->len = x->cap = 0;
            return MHD_YES;
        }
        if (x->len + n + 1 > x->cap) {
            size_t cap = x->cap ? x->cap : 4096;
            while (cap < x->len + n + 1) cap *= 2;
            char *b = realloc(x->body, cap);
            if (!b) return MHD_NO;
            x->body = b;
            x->cap = cap;
        }
        memcpy(x->body + x->len, upload_data, n);
        x->len += n;
        x->body[x->len] = 0;
        return MHD_YES;
    }
    /* the whole request is in */
    switch (x->error_status) {
    case 204: {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        add_common_headers(r, "text/plain");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        enum MHD_Result res = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
        MHD_destroy_response(r);
        return res;
    }
    case 404: return reply_status(c, 404, "invalid_request_error", "not_found", "no route %s", url);
    case 405: return reply_status(c, 405, "invalid_request_error", "method_not_allowed", "%s is not allowed here", method);
    case 401:
        return reply_status(c, 401, "authentication_error", "invalid_api_key", "%s",
                            "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
    default: break;
    }
    if (x->too_large) {
        srv_err e;
        srv_error(&e, 413, "invalid_request_error", "request_too_large", NULL, "the request body is over the limit of %zu bytes (--max-body)",
                  h->o.max_body);
        return reply_error(c, &e);
    }
    if (x->r == R_MODEL) {
        const char *id = url + 11;
        if (strcmp(id, h->model_id)) return reply_status(c, 404, "invalid_request_error", "model_not_found", "no model '%s'", id);
        return reply(c, MHD_HTTP_OK, srv_json_models(h->model_id, h->started, 1), CT_JSON);
    }
    if (x->r == R_CHAT || x->r == R_COMPLETIONS) return handle_generate(x);
    return handle_get(x);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    conn *x = *con_cls;
    if (!x) return;
    if (x->job) {
        srv_job_cancel(x->job); /* no-op when it finished; stops it when the client went away */
        srv_job_release(x->job);
    }
    free(x->body);
    free(x->out);
    free(x);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    q35_log(Q35_LOG_DEBUG, "serve: libmicrohttpd: %s", msg);
}

q35_status srv_http_start(const srv_http_opts *o, srv_http **out) {
    *out = NULL;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    h->o = *o;
    h->host = strdup(o->host ? o->host : "127.0.0.1");
    h->api_key = o->api_key ? strdup(o->api_key) : NULL;
    h->model_id = strdup(o->model_id ? o->model_id : "model");
    h->started = time(NULL);
    if (!h->host || !h->model_id || (o->api_key && !h->api_key)) {
        srv_http_stop(h);
        return q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(h->host, port, &hints, &ai);
    if (gai) {
        q35_status st = q35_fail(Q35_ERR_ARG, "--host %s: %s", h->host, gai_strerror(gai));
        srv_http_stop(h);
        return st;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)(o->max_connections > 0 ? o->max_connections : 64), MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        srv_http_stop(h);
        return q35_fail(Q35_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine?)", o->host ? o->host : "127.0.0.1",
                        o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : o->port;
    *out = h;
    return Q35_OK;
}

int srv_http_port(const srv_http *h) { return h->port; }

void srv_http_stop(srv_http *h) {
    if (!h) return;
    atomic_store(&h->stopping, 1);
    if (h->d) MHD_stop_daemon(h->d);
    free(h->host);
    free(h->api_key);
    free(h->model_id);
    free(h);
}
