/* The model directory manifest (format in manifest.h). */
#include "hub/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/json.h"

#include "core/err.h"
#include "core/file.h"
#include "hub/hub.h"
#include "model/config.h"

static cJSON *model_summary(const char *dir) {
    q35_config c;
    if (q35_config_load(dir, &c)) {
        q35_clear_error();
        return cJSON_CreateNull();
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "architecture", c.arch);
    cJSON_AddNumberToObject(m, "layers", c.n_layers);
    cJSON_AddNumberToObject(m, "linear_layers", c.n_linear);
    cJSON_AddNumberToObject(m, "full_layers", c.n_full);
    cJSON_AddNumberToObject(m, "hidden", c.hidden);
    cJSON_AddNumberToObject(m, "intermediate", c.intermediate);
    cJSON_AddNumberToObject(m, "vocab", c.vocab);
    cJSON_AddNumberToObject(m, "heads", c.n_heads);
    cJSON_AddNumberToObject(m, "kv_heads", c.n_kv_heads);
    cJSON_AddNumberToObject(m, "head_dim", c.head_dim);
    cJSON_AddNumberToObject(m, "linear_k_heads", c.lin_k_heads);
    cJSON_AddNumberToObject(m, "linear_v_heads", c.lin_v_heads);
    cJSON_AddNumberToObject(m, "linear_k_dim", c.lin_k_dim);
    cJSON_AddNumberToObject(m, "linear_v_dim", c.lin_v_dim);
    cJSON_AddNumberToObject(m, "max_position", c.max_pos);
    cJSON_AddBoolToObject(m, "tie_embeddings", c.tie_embeddings);
    cJSON_AddBoolToObject(m, "vision", c.has_vision_config);
    return m;
}

q35_status q35_manifest_write(const char *dir, const char *repo, const char *revision, const q35_manifest_file *files, int n) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(root, "format", "q35-manifest");
    cJSON_AddNumberToObject(root, "version", Q35_MANIFEST_VERSION);
    if (repo) cJSON_AddStringToObject(root, "repo", repo);
    if (revision) cJSON_AddStringToObject(root, "revision", revision);
    cJSON *arr = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < n && arr; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", files[i].path);
        cJSON_AddNumberToObject(f, "size", (double)files[i].size);
        cJSON_AddStringToObject(f, "sha256", files[i].sha256);
        cJSON_AddItemToArray(arr, f);
    }
    cJSON_AddItemToObject(root, "model", model_summary(dir));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return q35_fail(Q35_ERR_NOMEM, "out of memory writing the manifest");
    char path[4096], tmp[4096 + 8];
    q35_status st = q35_path_join(path, sizeof path, dir, Q35_MANIFEST_NAME);
    if (st) {
        free(text);
        return st;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(text);
        return q35_fail(Q35_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    size_t len = strlen(text);
    int bad = fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF || fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    free(text);
    if (bad || rename(tmp, path) != 0) {
        st = q35_fail(Q35_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return st;
    }
    return Q35_OK;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const q35_manifest_file *)a)->path, ((const q35_manifest_file *)b)->path);
}

q35_status q35_manifest_write_dir(const char *dir, int *n_files) {
    *n_files = 0;
    DIR *d = opendir(dir);
    if (!d) return q35_fail(Q35_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    q35_manifest_file *files = NULL; /* [n] */
    int n = 0;
    q35_status st = Q35_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        char path[4096];
        struct stat sb;
        if (!q35_hub_wanted(e->d_name) || q35_path_join(path, sizeof path, dir, e->d_name) || stat(path, &sb) || !S_ISREG(sb.st_mode))
            continue;
        q35_manifest_file *nf = realloc(files, (size_t)(n + 1) * sizeof *files);
        if (!nf) {
            st = q35_fail(Q35_ERR_NOMEM, "out of memory");
            break;
        }
        files = nf;
        if (!(files[n].path = strdup(e->d_name))) {
            st = q35_fail(Q35_ERR_NOMEM, "out of memory");
            break;
        }
        n++;
        st = q35_sha256_file(path, files[n - 1].sha256, &files[n - 1].size);
    }
    closedir(d);
    if (!st) {
        qsort(files, (size_t)n, sizeof *files, by_path);
        st = q35_manifest_write(dir, NULL, NULL, files, n);
    }
    for (int i = 0; i < n; i++) free((char *)files[i].path);
    free(files);
    if (!st) *n_files = n;
    return st;
}

static void report(void (*problem)(const char *, void *), void *user, int *count, const char *fmt, ...) Q35_PRINTF(4, 5);
static void report(void (*problem)(const char *, void *), void *user, int *count, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    (*count)++;
    if (problem) problem(line, user);
}

q35_status q35_manifest_verify(const char *dir, void (*problem)(const char *line, void *user), void *user, int *n_problems,
                               int *n_files) {
    if (n_problems) *n_problems = 0;
    if (n_files) *n_files = 0;
    char path[4096];
    q35_status st = q35_path_join(path, sizeof path, dir, Q35_MANIFEST_NAME);
    if (st) return st;
    char *text;
    size_t len;
    if ((st = q35_read_file(path, 64u << 20, &text, &len))) return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "q35-manifest") || !cJSON_IsArray(files)) {
        cJSON_Delete(root);
        return q35_fail(Q35_ERR_FORMAT, "%s: not a q35 manifest (expected an object with format \"q35-manifest\" and a files array)", path);
    }
    if (!cJSON_IsNumber(ver) || ver->valuedouble != Q35_MANIFEST_VERSION) {
        cJSON_Delete(root);
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: manifest version must be %d", path, Q35_MANIFEST_VERSION);
    }
    int bad = 0, count = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, files) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "path");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
        const cJSON *sha = cJSON_GetObjectItemCaseSensitive(e, "sha256");
        if (!cJSON_IsString(p) || !q35_hub_path_ok(p->valuestring) || !q35_json_is_int_in(size, 0, 9.0e15) ||
            !cJSON_IsString(sha) || strlen(sha->valuestring) != 64) {
            cJSON_Delete(root);
            return q35_fail(Q35_ERR_FORMAT, "%s: files[%d] needs a safe relative path, a size and a 64-digit sha256", path, count);
        }
        count++;
        const uint64_t want = (uint64_t)size->valuedouble;
        char file[4096];
        struct stat sb;
        if (q35_path_join(file, sizeof file, dir, p->valuestring)) {
            q35_clear_error();
            report(problem, user, &bad, "%s: path too long", p->valuestring);
            continue;
        }
        if (stat(file, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            report(problem, user, &bad, "%s: missing", file);
            continue;
        }
        if ((uint64_t)sb.st_size != want) {
            report(problem, user, &bad, "%s: size mismatch: expected %llu bytes, got %llu", file, (unsigned long long)want,
                   (unsigned long long)sb.st_size);
            continue;
        }
        char got[Q35_SHA256_HEX];
        if (q35_sha256_file(file, got, NULL)) {
            report(problem, user, &bad, "%s", q35_last_error());
            q35_clear_error();
            continue;
        }
        if (strcasecmp(got, sha->valuestring))
            report(problem, user, &bad, "%s: SHA-256 mismatch: expected %s, got %s", file, sha->valuestring, got);
    }
    cJSON_Delete(root);
    if (n_problems) *n_problems = bad;
    if (n_files) *n_files = count;
    return Q35_OK;
}
