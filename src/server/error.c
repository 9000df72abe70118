#include "server/error.h"

#include <stdarg.h>
#include <stdio.h>

int srv_error(srv_err *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}
