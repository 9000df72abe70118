/* An HTTP-facing error of q35 serve: the status code and the fields of the OpenAI error object
 * {"error": {"message", "type", "param", "code"}}. */
#ifndef Q35_SERVER_ERROR_H
#define Q35_SERVER_ERROR_H

typedef struct srv_err {
    int status;        /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
    const char *type;  /* "invalid_request_error", "authentication_error", "server_error", ... */
    const char *code;  /* NULL or a machine-readable code ("context_length_exceeded", ...) */
    char param[64];    /* the offending request field, "" when none */
    char message[512];
} srv_err;

/* Fill e and return -1 (for `return srv_error(...)`). */
int srv_error(srv_err *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
#endif
