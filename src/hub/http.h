/* HTTP(S) GETs with libcurl for the hub client: small bodies into memory, and resumable file
 * downloads that feed every byte of the file to digest contexts as it is written. */
#ifndef Q35_HUB_HTTP_H
#define Q35_HUB_HTTP_H
#include <stddef.h>
#include <stdint.h>
#include "core/hash.h"
#include "q35.h"

typedef struct q35_http q35_http;

/* token: a bearer token sent to the first host only (not across redirects), or NULL. */
q35_status q35_http_new(const char *token, q35_http **out);
void q35_http_free(q35_http *h);

/* GET url into a malloc'd NUL-terminated *body of at most max_bytes; a status other than 200 fails
 * with a message naming the URL, the status and the server's X-Error-Message. */
q35_status q35_http_get(q35_http *h, const char *url, size_t max_bytes, char **body, size_t *len);

typedef void (*q35_http_progress)(uint64_t done, uint64_t total, void *user);

typedef struct q35_download {
    const char *url;
    const char *part_path;       /* written here; an existing prefix is resumed with a Range request */
    const char *name;            /* the file's name in messages */
    uint64_t size;               /* the published size: more bytes than this fail */
    q35_hasher *h1, *h2;         /* reset, then fed every byte of the file (resumed prefix included); may be NULL */
    q35_http_progress progress;  /* may be NULL */
    void *user;
    uint64_t resumed_from;       /* out: bytes of an earlier partial file kept (0 when the server ignored the range) */
    uint64_t fetched;            /* out: body bytes received by this call */
    int transient;               /* out on failure: 1 when a retry may succeed (connection dropped, timeout) */
} q35_download;

/* Fetch d->url into d->part_path until it holds d->size bytes. On failure the part file stays for
 * a later resume (the caller deletes it when its content is known bad). */
q35_status q35_http_download(q35_http *h, q35_download *d);
#endif
