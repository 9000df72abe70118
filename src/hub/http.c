/* libcurl transfers for the hub client. Redirects are followed (the hub sends large files to a
 * CDN); the bearer token goes to the first host only, which is libcurl's rule for its own auth. */
#include "hub/http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "core/err.h"

struct q35_http {
    CURL *curl;
    char *token;
};

/* What the header callback saw in the latest response (redirects reset it). */
typedef struct {
    long status;
    int has_range;            /* Content-Range present */
    uint64_t range_start;     /* its first byte */
    char error_msg[256];      /* X-Error-Message */
} response_head;

static size_t on_header(char *line, size_t size, size_t n, void *user) {
    response_head *r = user;
    size_t len = size * n;
    char buf[512]; /* [len] one header line, NUL-terminated and trimmed */
    size_t k = len < sizeof buf - 1 ? len : sizeof buf - 1;
    memcpy(buf, line, k);
    buf[k] = 0;
    while (k && (buf[k - 1] == '\r' || buf[k - 1] == '\n' || buf[k - 1] == ' ')) buf[--k] = 0;
    if (!strncmp(buf, "HTTP/", 5)) {
        memset(r, 0, sizeof *r);
        const char *sp = strchr(buf, ' ');
        if (sp) r->status = strtol(sp + 1, NULL, 10);
    } else if (!strncasecmp(buf, "Content-Range:", 14)) {
        const char *p = buf + 14;
        while (*p == ' ') p++;
        if (!strncasecmp(p, "bytes ", 6) && isdigit((unsigned char)p[6])) {
            r->has_range = 1;
            r->range_start = strtoull(p + 6, NULL, 10);
        }
    } else if (!strncasecmp(buf, "X-Error-Message:", 16)) {
        const char *p = buf + 16;
        while (*p == ' ') p++;
        snprintf(r->error_msg, sizeof r->error_msg, "%s", p);
    }
    return len;
}

q35_status q35_http_new(const char *token, q35_http **out) {
    *out = NULL;
    static int global_done = 0; /* the CLI makes one client; curl_global_init is idempotent-safe enough for that */
    if (!global_done) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return q35_fail(Q35_ERR_IO, "libcurl failed to initialise");
        global_done = 1;
    }
    q35_http *h = calloc(1, sizeof *h);
    if (!h) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    h->curl = curl_easy_init();
    if (!h->curl || (token && *token && !(h->token = strdup(token)))) {
        q35_http_free(h);
        return q35_fail(Q35_ERR_NOMEM, "libcurl: cannot create a transfer handle");
    }
    *out = h;
    return Q35_OK;
}

void q35_http_free(q35_http *h) {
    if (!h) return;
    if (h->curl) curl_easy_cleanup(h->curl);
    free(h->token);
    free(h);
}

/* Options every request shares. */
static void setup(q35_http *h, const char *url, response_head *head) {
    CURL *c = h->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a transfer stalled for 60 s fails (and may be resumed) */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "q35/1 (libcurl)");
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, head);
    if (h->token) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, h->token);
    }
    memset(head, 0, sizeof *head);
}

static q35_status status_error(const char *what, const response_head *r) {
    const char *hint = r->status == 401 || r->status == 403 ? " (a gated or private repository needs HF_TOKEN)"
                       : r->status == 404                   ? " (not found)"
                                                            : "";
    return q35_fail(r->status == 404 ? Q35_ERR_MISSING : Q35_ERR_IO, "%s: HTTP %ld%s%s%s", what, r->status, hint,
                    r->error_msg[0] ? ": " : "", r->error_msg);
}

typedef struct {
    char *data; /* [len + 1] */
    size_t len, cap, max;
    int too_big;
    response_head *head;
} mem_sink;

static size_t on_body_mem(char *p, size_t size, size_t n, void *user) {
    mem_sink *s = user;
    size_t len = size * n;
    if (s->head->status != 200) return len; /* an error page: ignored, the status says it */
    if (s->len + len > s->max) {
        s->too_big = 1;
        return 0;
    }
    if (s->len + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + len + 1) cap *= 2;
        char *d = realloc(s->data, cap);
        if (!d) return 0;
        s->data = d;
        s->cap = cap;
    }
    memcpy(s->data + s->len, p, len);
    s->len += len;
    s->data[s->len] = 0;
    return len;
}

q35_status q35_http_get(q35_http *h, const char *url, size_t max_bytes, char **body, size_t *len) {
    *body = NULL;
    *len = 0;
    response_head head;
    setup(h, url, &head);
    mem_sink s = {NULL, 0, 0, max_bytes, 0, &head};
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body_mem);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(h->curl);
    q35_status st = Q35_OK;
    if (s.too_big) st = q35_fail(Q35_ERR_FORMAT, "%s: response larger than %zu bytes", url, max_bytes);
    else if (rc != CURLE_OK) st = q35_fail(Q35_ERR_IO, "%s: %s", url, curl_easy_strerror(rc));
    else if (head.status != 200) st = status_error(url, &head);
    else if (!s.data && !(s.data = calloc(1, 1))) st = q35_fail(Q35_ERR_NOMEM, "out of memory");
    if (st) {
        free(s.data);
        return st;
    }
    *body = s.data;
    *len = s.len;
    return Q35_OK;
}

typedef struct {
    q35_download *d;
    FILE *f;
    response_head *head;
    uint64_t have;       /* bytes of the file now in the part file */
    uint64_t asked_from; /* the Range start requested (0: none) */
    int started;         /* the body's first bytes were checked */
    char err[512];       /* why the write callback stopped the transfer */
} file_sink;

static size_t on_body_file(char *p, size_t size, size_t n, void *user) {
    file_sink *s = user;
    q35_download *d = s->d;
    size_t len = size * n;
    if (!s->started) {
        s->started = 1;
        const long code = s->head->status;
        if (code == 206 && s->asked_from && s->head->has_range && s->head->range_start == s->asked_from) {
            d->resumed_from = s->asked_from;
        } else if (code == 200) { /* the whole file: the server ignored the range, start over */
            if (s->have && (fflush(s->f) || ftruncate(fileno(s->f), 0) || fseek(s->f, 0, SEEK_SET))) {
                snprintf(s->err, sizeof s->err, "%s: cannot truncate the partial file %s", d->name, d->part_path);
                return 0;
            }
            s->have = 0;
            d->resumed_from = 0;
            q35_hasher_reset(d->h1);
            q35_hasher_reset(d->h2);
        } else if (code == 206) {
            snprintf(s->err, sizeof s->err, "%s: the server answered a range request from byte %llu with another range", d->name,
                     (unsigned long long)s->asked_from);
            return 0;
        } else {
            return len; /* an error page: the status is reported after the transfer */
        }
    }
    if (s->head->status != 200 && s->head->status != 206) return len;
    if (s->have + len > d->size) {
        snprintf(s->err, sizeof s->err, "%s: size mismatch: expected %llu bytes, the server sent more", d->name,
                 (unsigned long long)d->size);
        return 0;
    }
    if (fwrite(p, 1, len, s->f) != len) {
        snprintf(s->err, sizeof s->err, "%s: cannot write %s: %s", d->name, d->part_path, strerror(errno));
        return 0;
    }
    q35_hasher_update(d->h1, p, len);
    q35_hasher_update(d->h2, p, len);
    s->have += len;
    d->fetched += len;
    if (d->progress) d->progress(s->have, d->size, d->user);
    return len;
}

q35_status q35_http_download(q35_http *h, q35_download *d) {
    d->resumed_from = d->fetched = 0;
    d->transient = 0;
    q35_hasher_reset(d->h1);
    q35_hasher_reset(d->h2);
    struct stat sb;
    uint64_t have = 0;
    if (stat(d->part_path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size <= d->size) have = (uint64_t)sb.st_size;
    FILE *f = fopen(d->part_path, have ? "r+b" : "wb");
    if (!f) return q35_fail(Q35_ERR_IO, "%s: cannot open %s: %s", d->name, d->part_path, strerror(errno));
    if (have) { /* the kept prefix goes through the digests first */
        size_t got = 0;
        q35_status st = q35_hash_file_into(d->part_path, have, d->h1, d->h2, &got);
        if (st || got != have || fseek(f, (long)have, SEEK_SET)) {
            fclose(f);
            return st ? st : q35_fail(Q35_ERR_IO, "%s: cannot read the partial file %s", d->name, d->part_path);
        }
        if (d->progress) d->progress(have, d->size, d->user);
    }
    if (have == d->size) { /* complete already: nothing to ask for */
        d->resumed_from = have;
        fclose(f);
        return Q35_OK;
    }
    response_head head;
    setup(h, d->url, &head);
    file_sink s = {d, f, &head, have, have, 0, ""};
    char range[48];
    if (have) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)have);
        curl_easy_setopt(h->curl, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body_file);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(h->curl);
    int close_failed = fflush(f) != 0 || fsync(fileno(f)) != 0;
    close_failed |= fclose(f) != 0;
    if (s.err[0]) return q35_fail(Q35_ERR_IO, "%s", s.err);
    if (head.status && head.status != 200 && head.status != 206) return status_error(d->name, &head);
    if (rc != CURLE_OK) {
        d->transient = rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_OPERATION_TIMEDOUT ||
                       rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR || rc == CURLE_COULDNT_CONNECT;
        return q35_fail(Q35_ERR_IO, "%s: transfer failed after %llu of %llu bytes: %s", d->name, (unsigned long long)s.have,
                        (unsigned long long)d->size,
                        rc == CURLE_PARTIAL_FILE ? "the connection closed before the end" : curl_easy_strerror(rc));
    }
    if (close_failed) return q35_fail(Q35_ERR_IO, "%s: cannot write %s", d->name, d->part_path);
    if (s.have != d->size) {
        d->transient = 1;
        return q35_fail(Q35_ERR_IO, "%s: transfer ended early: got %llu of %llu bytes", d->name, (unsigned long long)s.have,
                        (unsigned long long)d->size);
    }
    return Q35_OK;
}
