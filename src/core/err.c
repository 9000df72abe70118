#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

static q35_log_fn log_fn;
static void *log_user;

const char *q35_last_error(void) { return last_error; }

void q35_clear_error(void) { last_error[0] = 0; }

q35_status q35_fail(q35_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

q35_status q35_fail_prefix(q35_status code, const char *prefix) {
    char tmp[sizeof last_error];
    size_t n = strlen(prefix);
    if (n > 256) n = 256;
    memcpy(tmp, prefix, n);
    tmp[n] = ':', tmp[n + 1] = ' ';
    size_t rest = strnlen(last_error, sizeof tmp - n - 3);
    memcpy(tmp + n + 2, last_error, rest);
    tmp[n + 2 + rest] = 0;
    memcpy(last_error, tmp, sizeof tmp);
    return code;
}

const char *q35_status_name(q35_status s) {
    switch (s) {
    case Q35_OK: return "ok";
    case Q35_ERR_IO: return "i/o error";
    case Q35_ERR_FORMAT: return "malformed input";
    case Q35_ERR_MISSING: return "missing";
    case Q35_ERR_SHAPE: return "wrong shape";
    case Q35_ERR_DTYPE: return "wrong dtype";
    case Q35_ERR_UNSUPPORTED: return "unsupported";
    case Q35_ERR_NOMEM: return "out of memory";
    case Q35_ERR_ARG: return "bad argument";
    case Q35_ERR_CONTEXT: return "context full";
    case Q35_ERR_TEMPLATE: return "template error";
    }
    return "unknown";
}

void q35_set_log(q35_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void q35_log(q35_log_level level, const char *fmt, ...) {
    if (!log_fn) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_user);
}
