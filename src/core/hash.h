/* SHA-256 and SHA-1 digests through OpenSSL's libcrypto (EVP): streaming contexts, whole files,
 * and Git's blob id (SHA-1 of "blob <size>\0" + content), as lowercase hex. */
#ifndef Q35_CORE_HASH_H
#define Q35_CORE_HASH_H
#include <stddef.h>
#include <stdint.h>
#include "q35.h"

#define Q35_SHA256_HEX 65 /* 64 hex digits + NUL */
#define Q35_SHA1_HEX 41   /* 40 hex digits + NUL */

typedef enum { Q35_HASH_SHA256, Q35_HASH_SHA1 } q35_hash_kind;

typedef struct q35_hasher q35_hasher;
/* NULL when out of memory or libcrypto lacks the digest. */
q35_hasher *q35_hasher_new(q35_hash_kind kind);
void q35_hasher_update(q35_hasher *h, const void *data, size_t n);
/* Restart as a fresh digest of nothing. */
void q35_hasher_reset(q35_hasher *h);
/* Writes the hex digest (Q35_SHA256_HEX or Q35_SHA1_HEX bytes incl. NUL); the hasher may then be reset or freed. */
void q35_hasher_hex(q35_hasher *h, char *hex);
void q35_hasher_free(q35_hasher *h);

/* Hash the first `limit` bytes of a file (all of it when limit is SIZE_MAX) into every non-NULL
 * hasher; *n_read (may be NULL) gets the bytes read. Errors name the path. */
q35_status q35_hash_file_into(const char *path, size_t limit, q35_hasher *a, q35_hasher *b, size_t *n_read);
/* SHA-256 of a whole file; *size (may be NULL) gets its size. */
q35_status q35_sha256_file(const char *path, char sha256_hex[Q35_SHA256_HEX], uint64_t *size);
/* The blob header Git hashes before the content: "blob <size>\0". */
void q35_hasher_git_blob_header(q35_hasher *h, uint64_t size);
#endif
