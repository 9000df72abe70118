/* A Hugging Face Hub model repository as the hub publishes it: the file listing of a revision
 * (GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true: the commit "sha" and "siblings"
 * with rfilename, size, blobId = Git blob SHA-1, and lfs {sha256, size} for LFS files), files from
 * {endpoint}/{repo}/resolve/{commit}/{path}, each verified before it takes its final name. */
#ifndef Q35_HUB_HUB_H
#define Q35_HUB_HUB_H
#include <stdint.h>
#include "core/hash.h"
#include "hub/http.h"

typedef struct q35_hub_file {
    char *path;                     /* relative path in the repository, validated */
    uint64_t size;                  /* bytes of the file itself (the LFS object's size for LFS files) */
    int lfs;                        /* 1: stored in LFS, sha256 published */
    char sha256[Q35_SHA256_HEX];    /* LFS files: published; others: computed on download ("" until then) */
    char git_sha1[Q35_SHA1_HEX];    /* non-LFS files: the published Git blob id */
} q35_hub_file;

typedef struct q35_hub_listing {
    char commit[Q35_SHA1_HEX + 24]; /* the revision's commit id (the revision itself when the server gives none) */
    q35_hub_file *files;            /* [n] */
    int n;
} q35_hub_listing;

/* "owner/name" or "name": letters, digits, '-', '_', '.', no "..", at most 96 characters. */
int q35_hub_repo_ok(const char *repo);
/* A relative path a repository may hold: '/'-separated parts of [A-Za-z0-9._+-], no empty, '.'
 * or '..' part, no leading '/', at most 512 characters. */
int q35_hub_path_ok(const char *path);
/* The files q35 needs to run a model: config, weights and their index, tokenizer, templates,
 * preprocessor and generation configs, README/LICENSE (top level only). */
int q35_hub_wanted(const char *path);

q35_status q35_hub_list(q35_http *h, const char *endpoint, const char *repo, const char *revision, q35_hub_listing *out);
void q35_hub_listing_free(q35_hub_listing *l);

typedef void (*q35_hub_progress)(const char *path, uint64_t done, uint64_t total, void *user);

typedef struct q35_hub_fetch_result {
    int up_to_date;                 /* the file was already there with the published content */
    uint64_t resumed_from;          /* bytes kept from an earlier partial download */
    uint64_t fetched;               /* bytes transferred */
} q35_hub_fetch_result;

/* Make dir/f->path hold the published file: kept when already right, else downloaded through
 * dir/.q35-tmp/<path>.part (resumed with a Range request when one is there; up to `retries`
 * more attempts after a dropped connection), checked against the published size and SHA-256
 * (LFS) or Git blob SHA-1 (others), then renamed into place. A mismatch deletes the partial file
 * and fails with "<path>: SHA-256 mismatch: expected X, got Y". Fills f->sha256. */
q35_status q35_hub_fetch(q35_http *h, const char *endpoint, const char *repo, const char *commit, const char *dir, q35_hub_file *f,
                         int retries, q35_hub_progress progress, void *user, q35_hub_fetch_result *res);

/* mkdir -p of dir (mode 0755). */
q35_status q35_mkdirs(const char *dir);
#endif
