/* DIR/q35-manifest.json: what a model directory should hold, written by `q35 pull` and checked by
 * `q35 verify`:
 *   {"format": "q35-manifest", "version": 1, "repo": "...", "revision": "<commit>",
 *    "files": [{"path": "...", "size": N, "sha256": "<64 hex>"}, ...],
 *    "model": {"architecture", "layers", "linear_layers", "full_layers", "hidden", "intermediate",
 *              "vocab", "heads", "kv_heads", "head_dim", "linear_k_heads", "linear_v_heads",
 *              "linear_k_dim", "linear_v_dim", "max_position", "tie_embeddings", "vision"} or null} */
#ifndef Q35_HUB_MANIFEST_H
#define Q35_HUB_MANIFEST_H
#include <stdint.h>
#include "core/hash.h"
#include "q35.h"

#define Q35_MANIFEST_NAME "q35-manifest.json"
#define Q35_MANIFEST_VERSION 1

typedef struct q35_manifest_file {
    const char *path;            /* relative to the directory */
    uint64_t size;
    char sha256[Q35_SHA256_HEX];
} q35_manifest_file;

/* Write dir/q35-manifest.json atomically (temporary name, then rename). repo / revision may be
 * NULL. The model summary comes from dir/config.json (null when it does not parse as Qwen3.5). */
q35_status q35_manifest_write(const char *dir, const char *repo, const char *revision, const q35_manifest_file *files, int n);

/* Hash every regular file of dir that q35 needs to run (the names `q35 pull` fetches, top level)
 * and write the manifest for them. *n_files gets how many. */
q35_status q35_manifest_write_dir(const char *dir, int *n_files);

/* Check dir against its manifest: each problem (missing file, size or SHA-256 mismatch) goes to
 * problem() as one line ("<path>: ..."). *n_problems / *n_files (may be NULL) get the counts.
 * Fails (without calling problem) only when the manifest itself is missing or malformed. */
q35_status q35_manifest_verify(const char *dir, void (*problem)(const char *line, void *user), void *user, int *n_problems,
                               int *n_files);
#endif
