/* The hub client's pieces that need no network: digests (libcrypto) against published test
 * vectors, repository-name and path validation, the manifest round trip, and the load-progress
 * callback of q35_load_opts. tests/cli/hub.sh covers downloads against a local fake hub. */
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hash.h"
#include "hub/hub.h"
#include "hub/manifest.h"
#include "q35.h"
#include "test.h"

/* CHECKs without a message of their own print just the condition. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

static void test_digests(void) {
    char hex[Q35_SHA256_HEX];
    q35_hasher *h = q35_hasher_new(Q35_HASH_SHA256);
    CHECK(h != NULL);
    if (!h) return;
    q35_hasher_update(h, "abc", 3); /* FIPS 180-2 example */
    q35_hasher_hex(h, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", hex);
    q35_hasher_reset(h);
    q35_hasher_hex(h, hex); /* empty input */
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "%s", hex);
    q35_hasher_free(h);
    /* `git hash-object` of "hello\n" */
    char sha1[Q35_SHA1_HEX];
    q35_hasher *g = q35_hasher_new(Q35_HASH_SHA1);
    CHECK(g != NULL);
    if (!g) return;
    q35_hasher_git_blob_header(g, 6);
    q35_hasher_update(g, "hello\n", 6);
    q35_hasher_hex(g, sha1);
    CHECK(!strcmp(sha1, "ce013625030ba8dba906f756967f9e9ca394464a"), "%s", sha1);
    q35_hasher_free(g);
    /* A file's digest equals the in-memory one; a missing file is an error naming it. */
    char path[512];
    snprintf(path, sizeof path, "%s/hub_digest.txt", test_work_dir());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs("abc", f);
    fclose(f);
    uint64_t size = 0;
    CHECK(q35_sha256_file(path, hex, &size) == Q35_OK && size == 3);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", hex);
    unlink(path);
    CHECK(q35_sha256_file(path, hex, &size) == Q35_ERR_MISSING);
    CHECK(strstr(q35_last_error(), "hub_digest.txt") != NULL, "%s", q35_last_error());
}

static void test_names(void) {
    CHECK(q35_hub_repo_ok("Qwen/Qwen3.5-0.8B"));
    CHECK(q35_hub_repo_ok("gpt2"));
    CHECK(!q35_hub_repo_ok("../x"));
    CHECK(!q35_hub_repo_ok("a/b/c"));
    CHECK(!q35_hub_repo_ok("/abs"));
    CHECK(!q35_hub_repo_ok("a/"));
    CHECK(!q35_hub_repo_ok("a/..b"));
    CHECK(!q35_hub_repo_ok("a b/c"));
    CHECK(!q35_hub_repo_ok(""));
    CHECK(q35_hub_path_ok("config.json"));
    CHECK(q35_hub_path_ok("onnx/model.onnx"));
    CHECK(!q35_hub_path_ok("../evil"));
    CHECK(!q35_hub_path_ok("a/../../evil"));
    CHECK(!q35_hub_path_ok("/etc/passwd"));
    CHECK(!q35_hub_path_ok("a//b"));
    CHECK(!q35_hub_path_ok("./a"));
    CHECK(!q35_hub_path_ok("a\\b"));
    CHECK(!q35_hub_path_ok("a\nb"));
    CHECK(!q35_hub_path_ok(""));
    CHECK(q35_hub_wanted("model-00001-of-00002.safetensors"));
    CHECK(q35_hub_wanted("tokenizer.json") && q35_hub_wanted("chat_template.jinja") && q35_hub_wanted("preprocessor_config.json"));
    CHECK(!q35_hub_wanted("onnx/model.safetensors")); /* top level only */
    CHECK(!q35_hub_wanted(".gitattributes"));
    CHECK(!q35_hub_wanted("pytorch_model.bin"));
}

static void problem_count(const char *line, void *user) {
    (void)line;
    (*(int *)user)++;
}

static void test_manifest(void) {
    char dir[512], src[512], cmd[2048];
    snprintf(dir, sizeof dir, "%s/hub_manifest", test_work_dir());
    snprintf(src, sizeof src, "%s/models/tiny-vl", test_data_dir());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s/config.json' '%s/model.safetensors' '%s/'", dir, dir, src, src, dir);
    CHECK(system(cmd) == 0);
    int n = 0, bad = -1, lines = 0;
    CHECK(q35_manifest_write_dir(dir, &n) == Q35_OK && n == 2, "%s", q35_last_error());
    CHECK(q35_manifest_verify(dir, problem_count, &lines, &bad, &n) == Q35_OK && bad == 0 && n == 2 && lines == 0);
    /* The shape summary comes from config.json. */
    char path[600];
    snprintf(path, sizeof path, "%s/q35-manifest.json", dir);
    char *text = NULL;
    FILE *f = fopen(path, "rb");
    if (f) {
        text = calloc(1, 1 << 16);
        if (text) fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
    }
    CHECK(text && strstr(text, "\"layers\":\t4") && strstr(text, "\"vocab\":\t512"), "%s", text ? text : "(unreadable)");
    free(text);
    /* One byte changed, same size: a hash mismatch; a removed file: missing. */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 1000, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 1000, SEEK_SET);
        fputc(c ^ 1, f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    lines = 0;
    CHECK(q35_manifest_verify(dir, problem_count, &lines, &bad, &n) == Q35_OK && bad == 2 && lines == 2, "bad %d lines %d", bad, lines);
    /* No manifest: an error, not a crash. */
    snprintf(path, sizeof path, "%s/q35-manifest.json", dir);
    unlink(path);
    CHECK(q35_manifest_verify(dir, NULL, NULL, &bad, &n) != Q35_OK);
}

typedef struct {
    int calls, monotone;
    size_t last_done, last_total;
} progress_log;

static void on_progress(size_t done, size_t total, void *user) {
    progress_log *p = user;
    if (p->calls && total == p->last_total && done < p->last_done) p->monotone = 0;
    if (done > total) p->monotone = 0;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
}

static void test_load_progress(void) {
    char dir[512], file[600];
    snprintf(dir, sizeof dir, "%s/models/tiny-vl", test_data_dir());
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    struct stat sb;
    CHECK(stat(file, &sb) == 0);
    /* Reading into memory: ends at the file's size. */
    progress_log log = {0, 1, 0, 0};
    q35_load_opts o = {.load = 1, .progress = on_progress, .progress_user = &log};
    q35_model *m = NULL;
    CHECK(q35_model_load_ex(dir, &o, &m) == Q35_OK, "%s", q35_last_error());
    q35_model_free(m);
    CHECK(log.calls >= 1 && log.monotone && log.last_done == (size_t)sb.st_size && log.last_total == (size_t)sb.st_size,
          "calls %d done %zu total %zu size %lld", log.calls, log.last_done, log.last_total, (long long)sb.st_size);
    /* Converting: one call per layer, ending at done == total. */
    progress_log conv = {0, 1, 0, 0};
    q35_load_opts c = {.weights = "q8", .progress = on_progress, .progress_user = &conv};
    CHECK(q35_model_load_ex(dir, &c, &m) == Q35_OK, "%s", q35_last_error());
    q35_model_info info;
    if (m) q35_model_get_info(m, &info);
    q35_model_free(m);
    CHECK(conv.calls == info.n_layers && conv.monotone && conv.last_done == conv.last_total && conv.last_total > 0,
          "calls %d done %zu total %zu", conv.calls, conv.last_done, conv.last_total);
    /* Zero-initialised options (no callback) still load. */
    q35_load_opts z = {0};
    CHECK(q35_model_load_ex(dir, &z, &m) == Q35_OK);
    q35_model_free(m);
}

int main(void) {
    RUN(test_digests);
    RUN(test_names);
    RUN(test_manifest);
    RUN(test_load_progress);
    TEST_EXIT();
}
