/* Hub listing and verified file fetches (see hub.h for the protocol). */
#include "hub/hub.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/json.h"

#include "core/err.h"

static int safe_char(int c) { return isalnum(c) || c == '-' || c == '_' || c == '.'; }

int q35_hub_repo_ok(const char *repo) {
    size_t n = repo ? strlen(repo) : 0;
    if (n == 0 || n > 96 || strstr(repo, "..") || strstr(repo, "--")) return 0;
    int slashes = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)repo[i];
        if (c == '/') {
            if (++slashes > 1 || i == 0 || i + 1 == n) return 0;
        } else if (!safe_char(c)) {
            return 0;
        }
    }
    /* Each part starts with a letter or digit (no ".", "-" prefixes). */
    const char *name = strchr(repo, '/');
    return isalnum((unsigned char)repo[0]) && (!name || isalnum((unsigned char)name[1]));
}

int q35_hub_path_ok(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n > 512 || path[0] == '/') return 0;
    const char *part = path;
    for (size_t i = 0; i <= n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == '/' || c == 0) {
            size_t len = (size_t)(path + i - part);
            if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && part[0] == '.' && part[1] == '.')) return 0;
            part = path + i + 1;
        } else if (!safe_char(c) && c != '+') {
            return 0;
        }
    }
    return 1;
}

int q35_hub_wanted(const char *path) {
    static const char *const patterns[] = {
        "config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json",
        "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json", "video_preprocessor_config.json",
        "special_tokens_map.json", "README.md", "LICENSE", "LICENSE.txt",
    };
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++)
        if (fnmatch(patterns[i], path, FNM_PATHNAME | FNM_PERIOD) == 0) return 1;
    return 0;
}

q35_status q35_mkdirs(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) return q35_fail(Q35_ERR_ARG, "directory name '%s' is empty or too long", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char keep = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return q35_fail(Q35_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
        struct stat sb;
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) return q35_fail(Q35_ERR_IO, "%s: exists and is not a directory", buf);
        buf[i] = keep;
    }
    return Q35_OK;
}

/* RFC 3986 percent-encoding of one URL part (a revision such as "refs/pr/1" becomes one segment). */
static void url_escape(const char *s, char *out, size_t cap) {
    size_t k = 0;
    for (; *s && k + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out[k++] = (char)c;
        else k += (size_t)snprintf(out + k, cap - k, "%%%02X", c);
    }
    out[k] = 0;
}

static int is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

static void lower(char *s) {
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static q35_status parse_listing(const char *text, size_t len, const char *url, q35_hub_listing *out) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return q35_fail(Q35_ERR_FORMAT, "%s: the listing is not a JSON object", url);
    }
    q35_status st = Q35_OK;
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(root, "sha");
    const cJSON *sib = cJSON_GetObjectItemCaseSensitive(root, "siblings");
    if (cJSON_IsString(sha)) {
        if (!is_hex(sha->valuestring, 40)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: 'sha' must be a 40-digit commit id, got '%.60s'", url, sha->valuestring);
            goto done;
        }
        snprintf(out->commit, sizeof out->commit, "%s", sha->valuestring);
        lower(out->commit);
    }
    if (!cJSON_IsArray(sib)) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: 'siblings' (the file list) is missing or not an array", url);
        goto done;
    }
    int n = cJSON_GetArraySize(sib);
    out->files = calloc((size_t)(n ? n : 1), sizeof *out->files);
    if (!out->files) {
        st = q35_fail(Q35_ERR_NOMEM, "out of memory");
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, sib) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "rfilename");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
        const cJSON *blob = cJSON_GetObjectItemCaseSensitive(e, "blobId");
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(e, "lfs");
        if (!cJSON_IsString(name)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: siblings[%d].rfilename must be a string", url, out->n);
            goto done;
        }
        const char *p = name->valuestring;
        /* Never a legitimate repository path: refuse the whole listing. */
        if (p[0] == '/' || strstr(p, "..") || strchr(p, '\\') || strlen(p) > 1024) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: the listing names an unsafe path '%.200s'", url, p);
            goto done;
        }
        q35_hub_file *f = &out->files[out->n];
        if (!(f->path = strdup(p))) {
            st = q35_fail(Q35_ERR_NOMEM, "out of memory");
            goto done;
        }
        out->n++;
        if (!q35_json_is_int_in(size, 0, 9.0e15)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: '%s' has no valid 'size' (the request asks for blobs=true)", url, p);
            goto done;
        }
        f->size = (uint64_t)size->valuedouble;
        if (cJSON_IsObject(lfs)) {
            const cJSON *s256 = cJSON_GetObjectItemCaseSensitive(lfs, "sha256");
            const cJSON *lsize = cJSON_GetObjectItemCaseSensitive(lfs, "size");
            if (!cJSON_IsString(s256) || !is_hex(s256->valuestring, 64)) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: '%s': lfs.sha256 must be 64 hex digits", url, p);
                goto done;
            }
            if (cJSON_IsNumber(lsize) && lsize->valuedouble != (double)f->size) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: '%s': lfs.size %.0f differs from size %llu", url, p, lsize->valuedouble,
                              (unsigned long long)f->size);
                goto done;
            }
            f->lfs = 1;
            snprintf(f->sha256, sizeof f->sha256, "%s", s256->valuestring);
            lower(f->sha256);
        } else {
            if (!cJSON_IsString(blob) || !is_hex(blob->valuestring, 40)) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: '%s': blobId must be a 40-digit Git blob id", url, p);
                goto done;
            }
            snprintf(f->git_sha1, sizeof f->git_sha1, "%s", blob->valuestring);
            lower(f->git_sha1);
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

q35_status q35_hub_list(q35_http *h, const char *endpoint, const char *repo, const char *revision, q35_hub_listing *out) {
    memset(out, 0, sizeof *out);
    if (!q35_hub_repo_ok(repo)) return q35_fail(Q35_ERR_ARG, "'%s' is not a repository name (expected owner/name)", repo);
    if (!revision || !*revision || strlen(revision) > 200) return q35_fail(Q35_ERR_ARG, "bad revision '%s'", revision ? revision : "");
    char rev[700], url[2048];
    url_escape(revision, rev, sizeof rev);
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s?blobs=true", endpoint, repo, rev);
    char *body;
    size_t len;
    q35_status st = q35_http_get(h, url, 64u << 20, &body, &len);
    if (st) return st;
    snprintf(out->commit, sizeof out->commit, "%s", revision);
    st = parse_listing(body, len, url, out);
    free(body);
    if (st) q35_hub_listing_free(out);
    return st;
}

void q35_hub_listing_free(q35_hub_listing *l) {
    for (int i = 0; i < l->n; i++) free(l->files[i].path);
    free(l->files);
    l->files = NULL;
    l->n = 0;
}

typedef struct {
    q35_hub_progress fn;
    void *user;
    const char *path;
} progress_ctx;

static void on_progress(uint64_t done, uint64_t total, void *user) {
    progress_ctx *p = user;
    p->fn(p->path, done, total, p->user);
}

/* SHA-256 and Git blob SHA-1 of a file on disk, when it has the expected size. */
static q35_status hash_local(const char *path, uint64_t size, char *sha256, char *git_sha1) {
    q35_hasher *a = q35_hasher_new(Q35_HASH_SHA256), *b = q35_hasher_new(Q35_HASH_SHA1);
    q35_status st = Q35_OK;
    size_t got = 0;
    if (!a || !b) st = q35_fail(Q35_ERR_NOMEM, "cannot start a digest");
    else {
        q35_hasher_git_blob_header(b, size);
        st = q35_hash_file_into(path, SIZE_MAX, a, b, &got);
    }
    if (!st && got != size) st = q35_fail(Q35_ERR_IO, "%s: size changed while hashing", path);
    if (!st) {
        q35_hasher_hex(a, sha256);
        q35_hasher_hex(b, git_sha1);
    }
    q35_hasher_free(a);
    q35_hasher_free(b);
    return st;
}

/* Whether the digests match what the listing publishes; else a message naming the file. */
static q35_status check(const q35_hub_file *f, const char *sha256, const char *git_sha1) {
    if (f->lfs && strcmp(sha256, f->sha256))
        return q35_fail(Q35_ERR_FORMAT, "%s: SHA-256 mismatch: expected %s, got %s", f->path, f->sha256, sha256);
    if (!f->lfs && strcmp(git_sha1, f->git_sha1))
        return q35_fail(Q35_ERR_FORMAT, "%s: Git blob SHA-1 mismatch: expected %s, got %s", f->path, f->git_sha1, git_sha1);
    return Q35_OK;
}

static q35_status with_suffix(q35_status st, const char *suffix) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", q35_last_error());
    return q35_fail(st, "%s (%s)", msg, suffix);
}

q35_status q35_hub_fetch(q35_http *h, const char *endpoint, const char *repo, const char *commit, const char *dir, q35_hub_file *f,
                         int retries, q35_hub_progress progress, void *user, q35_hub_fetch_result *res) {
    memset(res, 0, sizeof *res);
    if (!q35_hub_path_ok(f->path)) return q35_fail(Q35_ERR_FORMAT, "the listing names an unsafe path '%.200s'", f->path);
    if (!q35_hub_repo_ok(repo)) return q35_fail(Q35_ERR_ARG, "'%s' is not a repository name", repo);
    char final[4096], tmpdir[4096], part[4096], url[4096], rev[200];
    if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, f->path) >= sizeof final ||
        (size_t)snprintf(tmpdir, sizeof tmpdir, "%s/.q35-tmp", dir) >= sizeof tmpdir)
        return q35_fail(Q35_ERR_ARG, "%s: path too long", f->path);
    /* Partial files live flat in .q35-tmp: '/' becomes '%', which no validated path holds. */
    int k = snprintf(part, sizeof part, "%s/", tmpdir);
    for (const char *p = f->path; *p && k + 16 < (int)sizeof part; p++) part[k++] = *p == '/' ? '%' : *p;
    snprintf(part + k, sizeof part - (size_t)k, ".part");
    url_escape(commit, rev, sizeof rev);
    if ((size_t)snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", endpoint, repo, rev, f->path) >= sizeof url)
        return q35_fail(Q35_ERR_ARG, "%s: URL too long", f->path);
    char sha256[Q35_SHA256_HEX] = "", git_sha1[Q35_SHA1_HEX] = "";
    /* Already there with the published content: keep it. */
    struct stat sb;
    if (stat(final, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == f->size &&
        !hash_local(final, f->size, sha256, git_sha1) && !check(f, sha256, git_sha1)) {
        memcpy(f->sha256, sha256, sizeof sha256);
        res->up_to_date = 1;
        return Q35_OK;
    }
    q35_clear_error();
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", final);
    *strrchr(parent, '/') = 0;
    q35_status st = q35_mkdirs(parent);
    if (!st) st = q35_mkdirs(tmpdir);
    if (st) return st;
    q35_hasher *h256 = q35_hasher_new(Q35_HASH_SHA256);
    if (!h256) return q35_fail(Q35_ERR_NOMEM, "cannot start a digest");
    progress_ctx pc = {progress, user, f->path};
    q35_download d = {url, part, f->path, f->size, h256, NULL, progress ? on_progress : NULL, &pc, 0, 0, 0};
    for (int attempt = 0;; attempt++) {
        st = q35_http_download(h, &d);
        if (attempt == 0) res->resumed_from = d.resumed_from;
        res->fetched += d.fetched;
        if (!st || !d.transient || attempt >= retries) break;
    }
    if (st) {
        if (!d.transient) unlink(part); /* a refused or oversized transfer: nothing worth resuming */
        else st = with_suffix(st, "partial file kept: run again to resume");
        q35_hasher_free(h256);
        rmdir(tmpdir);
        return st;
    }
    q35_hasher_hex(h256, sha256);
    q35_hasher_free(h256);
    /* Git's blob id covers a header with the size, so it is computed over the finished file. */
    if (!f->lfs && (st = hash_local(part, f->size, sha256, git_sha1))) return st;
    if (stat(part, &sb) != 0 || (uint64_t)sb.st_size != f->size) {
        unlink(part);
        rmdir(tmpdir);
        return q35_fail(Q35_ERR_FORMAT, "%s: size mismatch: expected %llu bytes, got %llu (deleted the download)", f->path,
                        (unsigned long long)f->size, (unsigned long long)sb.st_size);
    }
    if ((st = check(f, sha256, git_sha1))) {
        unlink(part);
        rmdir(tmpdir);
        return with_suffix(st, "deleted the download");
    }
    if (rename(part, final) != 0) {
        st = q35_fail(Q35_ERR_IO, "%s: cannot rename %s to %s: %s", f->path, part, final, strerror(errno));
        unlink(part);
        rmdir(tmpdir);
        return st;
    }
    memcpy(f->sha256, sha256, sizeof sha256);
    rmdir(tmpdir); /* only when empty */
    return Q35_OK;
}
