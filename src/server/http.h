/* The HTTP side of q35 serve (libmicrohttpd, one thread per connection): routing, the API key,
 * the body limit, and turning engine jobs into JSON or server-sent-event responses. */
#ifndef Q35_SERVER_HTTP_H
#define Q35_SERVER_HTTP_H
#include <stddef.h>
#include "q35.h"
#include "server/engine.h"
#include "server/request.h"

typedef struct srv_http_opts {
    const char *host;      /* numeric address or name to bind ("127.0.0.1") */
    int port;              /* 0: any free port (srv_http_port tells which) */
    const char *api_key;   /* NULL: no authentication */
    size_t max_body;       /* request bodies larger than this get 413 */
    int max_connections;
    const char *model_id;  /* what /v1/models lists and responses name */
    srv_engine *engine;
    srv_request_ctx req;   /* request validation (tokenizer, context, defaults) */
} srv_http_opts;

typedef struct srv_http srv_http;
/* Bind and start serving (the strings in o are copied). */
q35_status srv_http_start(const srv_http_opts *o, srv_http **out);
int srv_http_port(const srv_http *h);
/* Stop accepting, end the open responses, join every connection thread, free. */
void srv_http_stop(srv_http *h);

/* The built-in chat page (page.c). */
extern const char srv_chat_page[];
#endif
