/* Digests via libcrypto's EVP interface: no hand-rolled hash code. */
#include "core/hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/err.h"

struct q35_hasher {
    EVP_MD_CTX *ctx;
    const EVP_MD *md;
};

q35_hasher *q35_hasher_new(q35_hash_kind kind) {
    q35_hasher *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->md = kind == Q35_HASH_SHA256 ? EVP_sha256() : EVP_sha1();
    h->ctx = EVP_MD_CTX_new();
    if (!h->md || !h->ctx || EVP_DigestInit_ex(h->ctx, h->md, NULL) != 1) {
        q35_hasher_free(h);
        return NULL;
    }
    return h;
}

void q35_hasher_update(q35_hasher *h, const void *data, size_t n) {
    if (h && n) EVP_DigestUpdate(h->ctx, data, n);
}

void q35_hasher_reset(q35_hasher *h) {
    if (h) EVP_DigestInit_ex(h->ctx, h->md, NULL);
}

void q35_hasher_hex(q35_hasher *h, char *hex) {
    unsigned char md[EVP_MAX_MD_SIZE]; /* [len] raw digest */
    unsigned int len = 0;
    EVP_DigestFinal_ex(h->ctx, md, &len);
    for (unsigned i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[2 * len] = 0;
}

void q35_hasher_free(q35_hasher *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void q35_hasher_git_blob_header(q35_hasher *h, uint64_t size) {
    char head[40]; /* "blob " + decimal size + NUL, hashed with its NUL */
    int n = snprintf(head, sizeof head, "blob %llu", (unsigned long long)size);
    q35_hasher_update(h, head, (size_t)n + 1);
}

q35_status q35_hash_file_into(const char *path, size_t limit, q35_hasher *a, q35_hasher *b, size_t *n_read) {
    if (n_read) *n_read = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return q35_fail(errno == ENOENT ? Q35_ERR_MISSING : Q35_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK); /* [CHUNK] bytes of the file */
    if (!buf) {
        fclose(f);
        return q35_fail(Q35_ERR_NOMEM, "%s: out of memory to hash it", path);
    }
    size_t total = 0;
    q35_status st = Q35_OK;
    while (total < limit) {
        size_t want = limit - total < CHUNK ? limit - total : CHUNK;
        size_t got = fread(buf, 1, want, f);
        q35_hasher_update(a, buf, got);
        q35_hasher_update(b, buf, got);
        total += got;
        if (got < want) {
            if (ferror(f)) st = q35_fail(Q35_ERR_IO, "%s: read failed after %zu bytes", path, total);
            break;
        }
    }
    free(buf);
    fclose(f);
    if (n_read) *n_read = total;
    return st;
}

q35_status q35_sha256_file(const char *path, char sha256_hex[Q35_SHA256_HEX], uint64_t *size) {
    q35_hasher *h = q35_hasher_new(Q35_HASH_SHA256);
    if (!h) return q35_fail(Q35_ERR_NOMEM, "%s: cannot start a SHA-256 digest", path);
    size_t n = 0;
    q35_status st = q35_hash_file_into(path, SIZE_MAX, h, NULL, &n);
    if (!st) q35_hasher_hex(h, sha256_hex);
    q35_hasher_free(h);
    if (size) *size = n;
    return st;
}
