/* Tokenizer tests: llama.cpp's reference vectors (ids from Hugging Face tokenizers), vectors made
 * with tools/oracle/make_tokenizer_vectors.py (tokenizers 0.23.3) for the Qwen3 tokenizer.json and
 * edited variants of it, decode / streaming round trips, the Oniguruma character classes over every
 * code point, and bad inputs. The Qwen3 tokenizer.json is unpacked by tests/run.sh into
 * $Q35_TEST_WORK/qwen3-tokenizer/. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "core/file.h"
#include "q35.h"
#include "test.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

static const char QWEN35_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------------------------------ fixtures */

static char *read_text(const char *path, size_t *len) {
    char *data = NULL;
    size_t n = 0;
    if (q35_read_file(path, (size_t)1 << 30, &data, &n)) {
        fprintf(stderr, "  cannot read %s: %s\n", path, q35_last_error());
        return NULL;
    }
    if (len) *len = n;
    return data;
}

static cJSON *read_json(const char *path) {
    char *text = read_text(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

static void data_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/tokenizer/%s", test_data_dir(), name);
}

static const char *qwen3_dir(void) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/qwen3-tokenizer", test_work_dir());
    return dir;
}

static q35_tokenizer *qwen3;    /* the Qwen3 tokenizer.json as shipped (with its tokenizer_config.json) */
static cJSON *qwen3_json;       /* the same file parsed, for the edited variants */
static q35_tokenizer *variants[4]; /* edited copies, by variant index */

static q35_tokenizer *get_qwen3(void) {
    if (!qwen3) {
        q35_status st = q35_tokenizer_load(qwen3_dir(), &qwen3);
        if (st) fprintf(stderr, "  loading %s: %s\n", qwen3_dir(), q35_last_error());
    }
    return qwen3;
}

static cJSON *added_by_content(cJSON *root, const char *content) {
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "added_tokens")) {
        cJSON *c = cJSON_GetObjectItem(it, "content");
        if (cJSON_IsString(c) && !strcmp(c->valuestring, content)) return it;
    }
    return NULL;
}

static void set_bool(cJSON *o, const char *k, int v) {
    cJSON_DeleteItemFromObject(o, k);
    cJSON_AddBoolToObject(o, k, v);
}

/* The edits of make_tokenizer_vectors.py apply_variant(). */
static void apply_variant(cJSON *root, const char *variant) {
    if (!strcmp(variant, "qwen35_pattern")) {
        cJSON_ReplaceItemInObject(root, "normalizer", cJSON_CreateNull());
        cJSON *split = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pre_tokenizer"), "pretokenizers"), 0);
        cJSON *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(pat, "Regex", QWEN35_PATTERN);
        cJSON_ReplaceItemInObject(split, "pattern", pat);
    } else if (!strcmp(variant, "flags")) {
        cJSON *pre = cJSON_CreateObject();
        cJSON_AddStringToObject(pre, "type", "ByteLevel");
        cJSON_AddBoolToObject(pre, "add_prefix_space", 1);
        cJSON_AddBoolToObject(pre, "trim_offsets", 1);
        cJSON_AddBoolToObject(pre, "use_regex", 1);
        cJSON_ReplaceItemInObject(root, "pre_tokenizer", pre);
        set_bool(cJSON_GetObjectItem(root, "model"), "ignore_merges", 1);
        set_bool(added_by_content(root, "<think>"), "lstrip", 1);
        set_bool(added_by_content(root, "</think>"), "rstrip", 1);
        set_bool(added_by_content(root, "<tool_call>"), "single_word", 1);
        set_bool(added_by_content(root, "<|fim_prefix|>"), "normalized", 1);
        set_bool(added_by_content(root, "<|im_end|>"), "lstrip", 1);
        set_bool(added_by_content(root, "<|im_end|>"), "rstrip", 1);
        int next = 0;
        cJSON *it, *list = cJSON_GetObjectItem(root, "added_tokens");
        cJSON_ArrayForEach(it, list) {
            int id = cJSON_GetObjectItem(it, "id")->valueint;
            if (id >= next) next = id + 1;
        }
        const char *contents[2] = {"caf\xC3\xA9", "e\xCC\x81x"};
        for (int i = 0; i < 2; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", next + i);
            cJSON_AddStringToObject(t, "content", contents[i]);
            cJSON_AddBoolToObject(t, "single_word", 0);
            cJSON_AddBoolToObject(t, "lstrip", 0);
            cJSON_AddBoolToObject(t, "rstrip", 0);
            cJSON_AddBoolToObject(t, "normalized", i == 0);
            cJSON_AddBoolToObject(t, "special", 0);
            cJSON_AddItemToArray(list, t);
        }
    }
}

static const char *variant_names[4] = {"file", "qwen35_pattern", "flags", NULL};

static q35_tokenizer *get_variant(const char *name) {
    if (!strcmp(name, "file")) return get_qwen3();
    int k = 0;
    while (variant_names[k] && strcmp(variant_names[k], name)) k++;
    if (!variant_names[k]) return NULL;
    if (variants[k]) return variants[k];
    if (!qwen3_json) {
        char path[1200];
        snprintf(path, sizeof path, "%s/tokenizer.json", qwen3_dir());
        qwen3_json = read_json(path);
        if (!qwen3_json) return NULL;
    }
    cJSON *copy = cJSON_Duplicate(qwen3_json, 1);
    apply_variant(copy, name);
    char *text = cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    q35_status st = q35_tokenizer_load_mem(text, strlen(text), name, NULL, 0, NULL, &variants[k]);
    if (st) fprintf(stderr, "  variant %s: %s\n", name, q35_last_error());
    free(text);
    return variants[k];
}

/* ------------------------------------------------------------------------------------- helpers */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A case's input: "text" (a JSON string) or "hex" (raw bytes). *out is malloc'd. */
static int case_input(const cJSON *c, char **out, size_t *len) {
    const cJSON *t = cJSON_GetObjectItem(c, "text"), *h = cJSON_GetObjectItem(c, "hex");
    if (cJSON_IsString(t)) {
        *len = strlen(t->valuestring);
        *out = malloc(*len + 1);
        memcpy(*out, t->valuestring, *len + 1);
        return 0;
    }
    if (!cJSON_IsString(h)) return -1;
    size_t n = strlen(h->valuestring) / 2;
    *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (char)(hexval(h->valuestring[2 * i]) * 16 + hexval(h->valuestring[2 * i + 1]));
    (*out)[n] = 0;
    *len = n;
    return 0;
}

static int32_t *json_ids(const cJSON *a, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(a);
    int32_t *v = malloc((*n ? *n : 1) * sizeof *v);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) v[i++] = (int32_t)it->valuedouble;
    return v;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb, size_t *first_diff) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    *first_diff = i;
    return na == nb && i == na;
}

static void print_ids(const char *label, const int32_t *v, size_t n, size_t from) {
    fprintf(stderr, "    %s (%zu ids) from [%zu]:", label, n, from);
    for (size_t i = from; i < n && i < from + 12; i++) fprintf(stderr, " %d", (int)v[i]);
    fprintf(stderr, "\n");
}

/* Tokenize text and compare with want; prints the difference. Returns 1 on a match. */
static int check_encode(const q35_tokenizer *t, const char *name, const char *text, size_t len, int parse_special,
                        const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0, d;
    q35_status st = q35_tokenize(t, text, len, parse_special, &ids, &n);
    if (st) {
        fprintf(stderr, "  %s: q35_tokenize failed: %s\n", name, q35_last_error());
        return 0;
    }
    int ok = same_ids(ids, n, want, n_want, &d);
    if (!ok) {
        fprintf(stderr, "  %s (parse_special %d): ids differ\n", name, parse_special);
        print_ids("want", want, n_want, d);
        print_ids("got ", ids, n, d);
    }
    free(ids);
    return ok;
}

/* llama.cpp .inp/.out: strings separated by "\n__ggml_vocab_test__\n", one id line each. */
static void run_llama_vectors(const q35_tokenizer *t, const char *name, int *n_ok, int *n_total, int verbose) {
    char ip[1024], op[1024];
    snprintf(ip, sizeof ip, "%s/tokenizer/ggml-vocab-%s.gguf.inp", test_data_dir(), name);
    snprintf(op, sizeof op, "%s/tokenizer/ggml-vocab-%s.gguf.out", test_data_dir(), name);
    char *in = read_text(ip, NULL), *out = read_text(op, NULL);
    *n_ok = *n_total = 0;
    if (!in || !out || !t) {
        free(in);
        free(out);
        return;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = in, *o = out;
    for (;;) {
        char *e = strstr(p, sep), *oe = strchr(o, '\n');
        if (!e || !oe) break;
        *e = 0;
        *oe = 0;
        int32_t want[4096];
        size_t nw = 0;
        for (char *q = o; *q && nw < 4096;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)v;
            q = end;
        }
        char label[64];
        snprintf(label, sizeof label, "%s[%d]", name, *n_total);
        ++*n_total;
        if (verbose ? check_encode(t, label, p, strlen(p), 1, want, nw) : 0) ++*n_ok;
        if (!verbose) {
            int32_t *ids;
            size_t n, d;
            if (!q35_tokenize(t, p, strlen(p), 1, &ids, &n)) {
                if (same_ids(ids, n, want, nw, &d)) ++*n_ok;
                free(ids);
            }
        }
        p = e + strlen(sep);
        o = oe + 1;
    }
    free(in);
    free(out);
}

/* An oracle vector file: every encode case and every decode case. */
static void run_oracle_file(const char *file, int *enc_ok, int *enc_total, int *dec_ok, int *dec_total) {
    char path[1024];
    data_path(path, sizeof path, file);
    cJSON *doc = read_json(path);
    *enc_ok = *enc_total = *dec_ok = *dec_total = 0;
    CHECK(doc != NULL, "%s", path);
    if (!doc) return;
    const char *variant = cJSON_GetObjectItem(doc, "variant")->valuestring;
    const q35_tokenizer *t = get_variant(variant);
    CHECK(t != NULL, "variant %s", variant);
    const cJSON *c, *enc = t ? cJSON_GetObjectItem(doc, "encode") : NULL, *dec = t ? cJSON_GetObjectItem(doc, "decode") : NULL;
    cJSON_ArrayForEach(c, enc) {
        char *text;
        size_t len, n_want;
        if (case_input(c, &text, &len)) continue;
        int32_t *want = json_ids(cJSON_GetObjectItem(c, "ids"), &n_want);
        char label[160];
        snprintf(label, sizeof label, "%s:%s", file, cJSON_GetObjectItem(c, "name")->valuestring);
        ++*enc_total;
        *enc_ok += check_encode(t, label, text, len, cJSON_GetObjectItem(c, "parse_special")->valueint, want, n_want);
        free(want);
        free(text);
    }
    cJSON_ArrayForEach(c, dec) {
        char *want, *got = NULL;
        size_t want_len, n;
        if (case_input(c, &want, &want_len)) continue;
        int32_t *ids = json_ids(cJSON_GetObjectItem(c, "ids"), &n);
        ++*dec_total;
        /* q35_detokenize returns a C string: compare through the stream decoder when NUL is inside */
        if (!q35_detokenize(t, ids, n, &got)) {
            if (strlen(want) == want_len ? !strcmp(got, want) : !memcmp(got, want, strlen(got))) ++*dec_ok;
            else fprintf(stderr, "  %s:%s: decoded text differs\n", file, cJSON_GetObjectItem(c, "name")->valuestring);
        } else {
            fprintf(stderr, "  %s: detokenize failed: %s\n", cJSON_GetObjectItem(c, "name")->valuestring, q35_last_error());
        }
        free(got);
        free(ids);
        free(want);
    }
    cJSON_Delete(doc);
}

/* ----------------------------------------------------------------------------------- the tests */

static void test_llama_qwen2_vectors(void) {
    int ok, total;
    run_llama_vectors(get_qwen3(), "qwen2", &ok, &total, 1);
    fprintf(stderr, "  qwen2 vectors with the Qwen3 tokenizer.json: %d/%d\n", ok, total);
    CHECK(total == 46 && ok == total, "%d of %d", ok, total);
}

static void test_llama_qwen35_vectors_on_qwen3_vocab(void) {
    int ok, total;
    /* Qwen3 vocabulary + the Qwen3.5 pattern, no normalizer: every vector only uses ids below
     * 151643, where Qwen3.5 and Qwen3 agree, so all 50 match */
    run_llama_vectors(get_variant("qwen35_pattern"), "qwen35", &ok, &total, 1);
    fprintf(stderr, "  qwen35 vectors with Qwen3 vocab + Qwen3.5 pattern: %d/%d\n", ok, total);
    CHECK(total == 50 && ok == total, "%d of %d", ok, total);
    /* with the Qwen3 file as is (NFC, Qwen2 pattern) the three decomposed-accent vectors differ */
    run_llama_vectors(get_qwen3(), "qwen35", &ok, &total, 0);
    fprintf(stderr, "  qwen35 vectors with the unchanged Qwen3 file: %d/%d\n", ok, total);
    CHECK(total == 50 && ok == 47, "%d of %d", ok, total);
}

static void test_llama_qwen35_vectors_on_qwen35(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/qwen35-tokenizer", test_work_dir());
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!q35_file_exists(path)) {
        fprintf(stderr, "  no %s: skipped (no Qwen3.5 tokenizer.json is committed)\n", path);
        return;
    }
    q35_tokenizer *t = NULL;
    CHECK(q35_tokenizer_load(dir, &t) == Q35_OK, "%s", q35_last_error());
    int ok, total;
    run_llama_vectors(t, "qwen35", &ok, &total, 1);
    CHECK(total == 50 && ok == total, "%d of %d", ok, total);
    q35_tokenizer_free(t);
}

static void oracle_test(const char *file) {
    int eo, et, dok, dt;
    run_oracle_file(file, &eo, &et, &dok, &dt);
    fprintf(stderr, "  %s: encode %d/%d, decode %d/%d\n", file, eo, et, dok, dt);
    CHECK(et > 100 && eo == et, "encode %d of %d", eo, et);
    CHECK(dt > 100 && dok == dt, "decode %d of %d", dok, dt);
}

static void test_oracle_qwen3_file(void) { oracle_test("qwen3_file.json"); }
static void test_oracle_qwen3_qwen35_pattern(void) { oracle_test("qwen3_qwen35_pattern.json"); }
static void test_oracle_qwen3_flags(void) { oracle_test("qwen3_flags.json"); }

static void test_token_api(void) {
    q35_tokenizer *t = get_qwen3();
    CHECK(t != NULL, "%s", "");
    if (!t) return;
    CHECK(q35_tokenizer_vocab_size(t) == 151669, "%d", q35_tokenizer_vocab_size(t));
    CHECK(q35_token_id(t, "<|im_start|>") == 151644, "%s", "");
    CHECK(q35_token_id(t, "<|im_end|>") == 151645, "%s", "");
    CHECK(q35_token_id(t, "<think>") == 151667, "%s", "");
    CHECK(q35_token_id(t, "Hello") == 9707, "%s", "");
    CHECK(q35_token_id(t, "\xC4\xA0Hello") == 21927, "%s", ""); /* "ĠHello" */
    CHECK(q35_token_id(t, " Hello") == -1, "%s", "");           /* token strings are in the ByteLevel alphabet */
    CHECK(q35_token_id(t, "no-such-token-here") == -1, "%s", "");
    CHECK(q35_token_id(t, NULL) == -1, "%s", "");
    size_t len;
    const char *b = q35_token_bytes(t, 21927, &len);
    CHECK(b && len == 6 && !memcmp(b, " Hello", 6), "%s", "");
    b = q35_token_bytes(t, 151644, &len);
    CHECK(b && len == 12 && !memcmp(b, "<|im_start|>", 12), "%s", "");
    b = q35_token_bytes(t, q35_token_id(t, "\xC4\x80"), &len); /* "Ā" is byte 0 */
    CHECK(b && len == 1 && b[0] == 0, "%s", "");
    CHECK(q35_token_bytes(t, -1, &len) == NULL && len == 0, "%s", "");
    CHECK(q35_token_bytes(t, 151669, &len) == NULL, "%s", "");
    CHECK(q35_tokenizer_token_kind(t, 9707) == Q35_TOKEN_REGULAR, "%s", "");
    CHECK(q35_tokenizer_token_kind(t, 151644) == Q35_TOKEN_SPECIAL, "%s", "");
    CHECK(q35_tokenizer_token_kind(t, 151667) == Q35_TOKEN_ADDED, "%s", "");
    CHECK(q35_tokenizer_token_kind(t, 151669) == Q35_TOKEN_INVALID, "%s", "");
    CHECK(!strcmp(q35_tokenizer_token_text(t, 21927), "\xC4\xA0Hello"), "%s", "");
    /* tokenizer_config.json */
    CHECK(q35_tokenizer_config(t) != NULL, "%s", "");
    CHECK(q35_tokenizer_eos_token(t) && !strcmp(q35_tokenizer_eos_token(t), "<|im_end|>"), "%s", "");
    CHECK(q35_tokenizer_eos_id(t) == 151645, "%s", "");
    CHECK(q35_tokenizer_pad_token(t) && !strcmp(q35_tokenizer_pad_token(t), "<|endoftext|>"), "%s", "");
    CHECK(q35_tokenizer_pad_id(t) == 151643, "%s", "");
    CHECK(q35_tokenizer_bos_token(t) == NULL && q35_tokenizer_bos_id(t) == -1, "%s", "");
    CHECK(q35_tokenizer_chat_template(t) && strstr(q35_tokenizer_chat_template(t), "<|im_start|>"), "%s", "");
    /* the file alone (no tokenizer_config.json) */
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer.json", qwen3_dir());
    q35_tokenizer *f = NULL;
    CHECK(q35_tokenizer_load_file(path, &f) == Q35_OK, "%s", q35_last_error());
    CHECK(f && q35_tokenizer_config(f) == NULL && q35_tokenizer_eos_token(f) == NULL && q35_tokenizer_eos_id(f) == -1, "%s", "");
    CHECK(f && q35_tokenizer_chat_template(f) == NULL, "%s", "");
    q35_tokenizer_free(f);
}

static void test_parse_special(void) {
    q35_tokenizer *t = get_qwen3();
    if (!t) return;
    const char *s = "<|im_start|>user\n<think>hi</think><|endoftext|>";
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(q35_tokenize(t, s, strlen(s), 1, &a, &na) == Q35_OK, "%s", "");
    CHECK(q35_tokenize(t, s, strlen(s), 0, &b, &nb) == Q35_OK, "%s", "");
    CHECK(na >= 6 && a[0] == 151644 && a[na - 1] == 151643, "%s", "");
    int has_special = 0, has_think_a = 0, has_think_b = 0;
    for (size_t i = 0; i < na; i++) has_think_a += a[i] == 151667 || a[i] == 151668;
    for (size_t i = 0; i < nb; i++) {
        has_special |= q35_tokenizer_token_kind(t, b[i]) == Q35_TOKEN_SPECIAL;
        has_think_b += b[i] == 151667 || b[i] == 151668;
    }
    CHECK(!has_special, "parse_special 0 must not produce special tokens");
    CHECK(has_think_a == 2 && has_think_b == 2, "non-special added tokens match either way");
    char *back = NULL;
    CHECK(q35_detokenize(t, b, nb, &back) == Q35_OK && back && !strcmp(back, s), "text round trip");
    free(back);
    free(a);
    free(b);
}

static void test_invalid_utf8(void) {
    q35_tokenizer *t = get_variant("qwen35_pattern");
    if (!t) return;
    /* each maximal invalid subpart is one U+FFFD, as bytes.decode('utf-8', 'replace') */
    static const struct {
        const char *in, *same_as;
    } cases[] = {
        {"a\x80" "b", "a\xEF\xBF\xBD" "b"},
        {"\xE4\xB8", "\xEF\xBF\xBD"},
        {"\xE4\xB8" "x", "\xEF\xBF\xBDx"},
        {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
        {"\xE0\x80\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xFF\xFE", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xC3", "\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *a, *b;
        size_t na, nb, d;
        CHECK(q35_tokenize(t, cases[i].in, strlen(cases[i].in), 1, &a, &na) == Q35_OK, "%s", "");
        CHECK(q35_tokenize(t, cases[i].same_as, strlen(cases[i].same_as), 1, &b, &nb) == Q35_OK, "%s", "");
        CHECK(same_ids(a, na, b, nb, &d), "case %zu", i);
        char *back;
        CHECK(q35_detokenize(t, a, na, &back) == Q35_OK && !strcmp(back, cases[i].same_as), "case %zu", i);
        free(back);
        free(a);
        free(b);
    }
    /* decoding ids whose bytes are an incomplete sequence */
    int32_t e4 = q35_token_id(t, "\xC3\xA4"), b8 = q35_token_id(t, "\xC2\xB8"); /* bytes E4 and B8 */
    CHECK(e4 >= 0 && b8 >= 0, "%s", "");
    int32_t ids[3] = {e4, b8, q35_token_id(t, "x")};
    char *s;
    CHECK(q35_detokenize(t, ids, 3, &s) == Q35_OK && !strcmp(s, "\xEF\xBF\xBDx"), "%s", "");
    free(s);
    CHECK(q35_detokenize(t, ids, 0, &s) == Q35_OK && s && s[0] == 0, "%s", "");
    free(s);
    int32_t bad = 999999;
    CHECK(q35_detokenize(t, &bad, 1, &s) == Q35_ERR_ARG && s == NULL, "%s", "");
    CHECK(strstr(q35_last_error(), "999999") != NULL, "%s", q35_last_error());
    /* empty input: no tokens, a freeable array */
    int32_t *none = NULL;
    size_t nn = 7;
    CHECK(q35_tokenize(t, "", 0, 1, &none, &nn) == Q35_OK && nn == 0, "%s", "");
    free(none);
    CHECK(q35_tokenize(t, NULL, 0, 1, &none, &nn) == Q35_OK && nn == 0, "%s", "");
    free(none);
    CHECK(q35_tokenize(t, NULL, 3, 1, &none, &nn) == Q35_ERR_ARG, "%s", "");
}

/* Push ids one by one with an output buffer of cap bytes; the chunks must be whole characters and
 * their concatenation must equal q35_detokenize. */
static int stream_matches(const q35_tokenizer *t, const int32_t *ids, size_t n, size_t cap) {
    q35_stream_decoder *d = q35_stream_decoder_new(t);
    char *want = NULL;
    if (!d || q35_detokenize(t, ids, n, &want)) {
        q35_stream_decoder_free(d);
        return 0;
    }
    size_t cap_all = strlen(want) + 64, got_n = 0;
    char *got = malloc(cap_all), *out = malloc(cap);
    int ok = 1;
    for (size_t i = 0; i <= n; i++) {
        for (;;) {
            size_t w = i < n ? q35_stream_decoder_push(d, ids[i], out, cap) : q35_stream_decoder_flush(d, out, cap);
            if (w >= cap || out[w] != 0 || !q35_utf8_valid((unsigned char *)out, w)) ok = 0;
            if (got_n + w > cap_all) ok = 0;
            else memcpy(got + got_n, out, w), got_n += w;
            if (i < n || w == 0) break; /* flush until nothing is left */
        }
    }
    ok = ok && got_n == strlen(want) && !memcmp(got, want, got_n);
    free(got);
    free(out);
    free(want);
    q35_stream_decoder_free(d);
    return ok;
}

static void test_stream_decoder(void) {
    q35_tokenizer *t = get_variant("qwen35_pattern");
    if (!t) return;
    /* multibyte characters split across tokens: byte tokens of "中" (E4 B8 AD), an emoji, then text */
    const char *texts[] = {"\xE4\xB8\xAD\xE6\x96\x87 caf\xC3\xA9 \xF0\x9F\x9A\x80\xF0\x9F\x98\xB6\xE2\x80\x8D",
                           "plain ascii", "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        int32_t *ids;
        size_t n;
        CHECK(q35_tokenize(t, texts[k], strlen(texts[k]), 1, &ids, &n) == Q35_OK, "%s", "");
        /* and the same text as one id per byte, so every multibyte character is split */
        int32_t *bytes = malloc(strlen(texts[k]) * sizeof *bytes);
        for (size_t i = 0; i < strlen(texts[k]); i++) {
            unsigned char u[4];
            unsigned c = (unsigned char)texts[k][i];
            /* the ByteLevel character for byte c */
            uint32_t cp = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174 ? c
                          : c <= 32 ? 256 + c : c <= 160 ? 256 + 33 + (c - 127) : 256 + 67;
            size_t ul = q35_utf8_encode(cp, u);
            char key[5] = {0};
            memcpy(key, u, ul);
            bytes[i] = q35_token_id(t, key);
        }
        size_t caps[] = {5, 6, 8, 64, 4096};
        for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
            CHECK(stream_matches(t, ids, n, caps[ci]), "text %zu cap %zu", k, caps[ci]);
            CHECK(stream_matches(t, bytes, strlen(texts[k]), caps[ci]), "bytes of text %zu cap %zu", k, caps[ci]);
        }
        free(bytes);
        free(ids);
    }
    /* a dangling incomplete sequence comes out as U+FFFD at flush, and only then */
    q35_stream_decoder *d = q35_stream_decoder_new(t);
    char out[64];
    int32_t e4 = q35_token_id(t, "\xC3\xA4"), b8 = q35_token_id(t, "\xC2\xB8"), ad = q35_token_id(t, "\xC5\x83"); /* byte AD is U+0143 */
    CHECK(q35_stream_decoder_push(d, q35_token_id(t, "a"), out, sizeof out) == 1 && !strcmp(out, "a"), "%s", "");
    CHECK(q35_stream_decoder_push(d, e4, out, sizeof out) == 0 && out[0] == 0, "%s", "");
    CHECK(q35_stream_decoder_push(d, b8, out, sizeof out) == 0, "%s", "");
    CHECK(q35_stream_decoder_push(d, ad, out, sizeof out) == 3 && !strcmp(out, "\xE4\xB8\xAD"), "%s", "");
    CHECK(q35_stream_decoder_push(d, e4, out, sizeof out) == 0, "%s", "");
    CHECK(q35_stream_decoder_push(d, -5, out, sizeof out) == 0, "%s", ""); /* invalid ids are ignored */
    CHECK(q35_stream_decoder_flush(d, out, sizeof out) == 3 && !strcmp(out, "\xEF\xBF\xBD"), "%s", "");
    CHECK(q35_stream_decoder_flush(d, out, sizeof out) == 0, "%s", "");
    /* an incomplete sequence followed by a non-continuation byte: U+FFFD then the byte */
    q35_stream_decoder_push(d, e4, out, sizeof out);
    CHECK(q35_stream_decoder_push(d, q35_token_id(t, "x"), out, sizeof out) == 4 && !strcmp(out, "\xEF\xBF\xBDx"), "%s", "");
    q35_stream_decoder_free(d);
    q35_stream_decoder_free(NULL);
    CHECK(q35_stream_decoder_new(NULL) == NULL, "%s", "");
}

/* Random texts over a tricky alphabet: detokenize(tokenize(x)) == x with U+FFFD substitution (no
 * normalizer in this variant, so the round trip is exact). */
static void test_roundtrip_random(void) {
    q35_tokenizer *t = get_variant("qwen35_pattern");
    if (!t) return;
    static const char *atoms[] = {"a", "Z", "0", "9", " ", "  ", "\t", "\n", "\r\n", "'", "'s", "'LL", ".", "!!",
                                  "\xC2\xA0", "\xE3\x80\x80", "\xC3\xA9", "e\xCC\x81", "\xCC\x81", "\xE6\x97\xA5",
                                  "\xF0\x9F\x98\x80", "\xE2\x80\x8D", "<|im_start|>", "<think>", "<|im_end", "\x80",
                                  "\xE4\xB8", "\xFF", "\xF0\x9F", "\x00", "\xD9\xA1", "\xE0\xB8\x81"};
    uint64_t rng = 12345;
    int bad = 0;
    for (int iter = 0; iter < 400; iter++) {
        char text[512];
        size_t len = 0;
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int k = (int)((rng >> 33) % 40);
        for (int j = 0; j < k; j++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *a = atoms[(rng >> 33) % (sizeof atoms / sizeof atoms[0])];
            size_t al = a[0] ? strlen(a) : 1;
            memcpy(text + len, a, al);
            len += al;
        }
        int32_t *ids;
        size_t n;
        if (q35_tokenize(t, text, len, (int)(iter & 1), &ids, &n)) {
            bad++;
            continue;
        }
        unsigned char want[2048];
        size_t wl = q35_utf8_sanitize((unsigned char *)text, len, want);
        /* compare through the stream decoder, which keeps NUL bytes */
        q35_stream_decoder *d = q35_stream_decoder_new(t);
        unsigned char got[2048];
        size_t gl = 0;
        char out[256];
        for (size_t i = 0; i <= n; i++) {
            size_t w = i < n ? q35_stream_decoder_push(d, ids[i], out, sizeof out) : q35_stream_decoder_flush(d, out, sizeof out);
            if (gl + w <= sizeof got) memcpy(got + gl, out, w);
            gl += w;
        }
        q35_stream_decoder_free(d);
        if (gl != wl || memcmp(got, want, wl)) bad++;
        free(ids);
    }
    CHECK(bad == 0, "%d of 400 random texts did not round-trip", bad);
}

/* Long inputs stay fast: about 100 KB of each kind, including the regex's worst shapes. */
static void test_long_inputs(void) {
    q35_tokenizer *t = get_qwen3();
    if (!t) return;
    const size_t n = 100 * 1024;
    char *s = malloc(n + 1);
    const char *fills[] = {" ", "a", "\n", " \t", "1", "!", "\xE4\xB8\xAD", "Hello, world! It's 42. ", "\r\n  x"};
    for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
        size_t fl = strlen(fills[f]), len = 0;
        while (len + fl <= n) memcpy(s + len, fills[f], fl), len += fl;
        s[len] = 0;
        clock_t c0 = clock();
        int32_t *ids;
        size_t nid;
        q35_status st = q35_tokenize(t, s, len, 1, &ids, &nid);
        double sec = (double)(clock() - c0) / CLOCKS_PER_SEC;
        CHECK(st == Q35_OK, "%s", "");
        if (st) continue;
        char *back = NULL;
        CHECK(q35_detokenize(t, ids, nid, &back) == Q35_OK && back && strlen(back) == len && !memcmp(back, s, len),
              "fill %zu round trip", f);
        fprintf(stderr, "  %zu KB of '%s'...: %zu tokens in %.3f s\n", len / 1024, f == 6 ? "CJK" : fills[f], nid, sec);
        CHECK(sec < 10, "too slow: %.2f s", sec);
        free(back);
        free(ids);
    }
    free(s);
}

/* The translated \s, \p{L}, \p{N}, \p{M}, \d agree with Oniguruma on every code point. */
static void test_unicode_classes(void) {
    char path[1024];
    data_path(path, sizeof path, "unicode_classes.json");
    cJSON *doc = read_json(path);
    CHECK(doc != NULL, "%s", "");
    if (!doc) return;
    static const struct {
        const char *cls, *pattern;
    } cases[] = {{"s", "\\s"}, {"L", "\\p{L}"}, {"N", "\\p{N}"}, {"M", "\\p{M}"}, {"Nd", "\\d"},
                 {"s", "[\\s]"}, {"L", "[x\\p{L}]"}, {"M", "[\\p{M}]"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const cJSON *ranges = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "classes"), cases[k].cls);
        char *pcre = NULL;
        CHECK(q35_tokenizer_translate_regex(cases[k].pattern, "test", &pcre) == Q35_OK, "%s", "");
        char anchored[16384];
        snprintf(anchored, sizeof anchored, "^(?:%s)$", pcre ? pcre : "");
        free(pcre);
        int err;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)anchored, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
        CHECK(re != NULL, "%s", "");
        if (!re) continue;
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        const cJSON *r = ranges ? ranges->child : NULL;
        int mismatches = 0;
        for (uint32_t cp = 0; cp < 0x110000; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            while (r && (uint32_t)cJSON_GetArrayItem(r, 1)->valuedouble < cp) r = r->next;
            int want = r && (uint32_t)cJSON_GetArrayItem(r, 0)->valuedouble <= cp;
            if (cases[k].pattern[1] == 'x' && cp == 'x') want = 1;
            unsigned char u[4];
            size_t ul = q35_utf8_encode(cp, u);
            int got = pcre2_match(re, u, ul, 0, 0, md, NULL) >= 0;
            if (got != want && mismatches++ < 5) fprintf(stderr, "  %s: U+%04X want %d got %d\n", cases[k].pattern, cp, want, got);
        }
        CHECK(mismatches == 0, "%s: %d code points differ from Oniguruma", cases[k].pattern, mismatches);
        pcre2_match_data_free(md);
        pcre2_code_free(re);
    }
    cJSON_Delete(doc);
    /* other Oniguruma spellings */
    char *p = NULL;
    CHECK(q35_tokenizer_translate_regex("\\h+\\v\\u00e9[\\h]", "t", &p) == Q35_OK, "%s", "");
    CHECK(p && !strcmp(p, "[0-9a-fA-F]+\\x{B}\\x{00e9}[0-9a-fA-F]"), "%s", p ? p : "");
    free(p);
    CHECK(q35_tokenizer_translate_regex("[]a]", "t", &p) == Q35_OK && p && !strcmp(p, "[\\]a]"), "%s", p ? p : "");
    free(p);
    CHECK(q35_tokenizer_translate_regex("[a-z&&[^aeiou]]", "t", &p) == Q35_ERR_UNSUPPORTED && p == NULL, "%s", "");
    CHECK(q35_tokenizer_translate_regex("[[:alpha:]]", "t", &p) == Q35_OK && p && !strcmp(p, "[[:alpha:]]"), "%s", "");
    free(p);
    CHECK(q35_tokenizer_translate_regex("abc\\", "t", &p) == Q35_ERR_FORMAT, "%s", "");
}

/* ---------------------------------------------------------------------------------- bad inputs */

/* A small valid byte-level tokenizer: the 256 byte symbols (ids 0..255 in byte order), "ab" = 256,
 * "abc" = 257, merges "a b" then "ab c", and one special token. */
static cJSON *mini_json(void) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? b
                      : b <= 32 ? 256 + b : b <= 160 ? 256 + 33 + (b - 127) : 256 + 67;
        unsigned char u[5] = {0};
        q35_utf8_encode(cp, u);
        cJSON_AddNumberToObject(vocab, (char *)u, b);
    }
    cJSON_AddNumberToObject(vocab, "ab", 256);
    cJSON_AddNumberToObject(vocab, "abc", 257);
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON *merges = cJSON_CreateArray();
    cJSON_AddItemToArray(merges, cJSON_CreateString("a b"));
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateString("ab"));
    cJSON_AddItemToArray(pair, cJSON_CreateString("c"));
    cJSON_AddItemToArray(merges, pair);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "model", model);
    cJSON *added = cJSON_CreateArray(), *tok = cJSON_CreateObject();
    cJSON_AddNumberToObject(tok, "id", 258);
    cJSON_AddStringToObject(tok, "content", "<s>");
    cJSON_AddBoolToObject(tok, "special", 1);
    cJSON_AddItemToArray(added, tok);
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON_AddItemToObject(root, "normalizer", cJSON_CreateNull());
    cJSON *pre = cJSON_CreateObject();
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
    cJSON_AddBoolToObject(pre, "use_regex", 1);
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    cJSON *dec = cJSON_CreateObject();
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddItemToObject(root, "decoder", dec);
    return root;
}

static q35_status load_json_obj(cJSON *root, q35_tokenizer **t) {
    char *text = cJSON_PrintUnformatted(root);
    q35_status st = q35_tokenizer_load_mem(text, strlen(text), "mini.json", NULL, 0, NULL, t);
    free(text);
    return st;
}

static void test_mini_tokenizer(void) {
    cJSON *root = mini_json();
    q35_tokenizer *t = NULL;
    CHECK(load_json_obj(root, &t) == Q35_OK, "%s", q35_last_error());
    cJSON_Delete(root);
    if (!t) return;
    int32_t *ids;
    size_t n;
    CHECK(q35_tokenize(t, "abc ab<s>a", 10, 1, &ids, &n) == Q35_OK, "%s", "");
    int32_t want[] = {257, ' ', 256, 258, 'a'};
    size_t d;
    CHECK(same_ids(ids, n, want, 5, &d), "first difference at %zu", d);
    free(ids);
    CHECK(q35_tokenizer_vocab_size(t) == 259, "%s", "");
    q35_tokenizer_free(t);

    /* Split semantics as tokenizers (values from its pre_tokenize_str): an empty match is a split
     * point, '$' is a line anchor (Oniguruma's Ruby syntax), String patterns are literal */
    static const struct {
        const char *kind, *pattern, *text;
        int32_t want[8];
        size_t n;
    } cases[] = {
        {"Regex", "b*", "aab", {'a', 'a', 'b'}, 3},
        {"Regex", "(?=b)", "aab", {'a', 'a', 'b'}, 3},
        {"Regex", "x", "aab", {'a', 256}, 2},
        {"Regex", "$", "ab\nab", {256, '\n', 256}, 3},
        {"Regex", "\\h+", "ab12zab", {256, '1', '2', 'z', 256}, 5},
        {"String", " ", "ab ab  c", {256, ' ', 256, ' ', ' ', 'c'}, 6},
        {"String", ".*", "ab.*ab", {256, '.', '*', 256}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        root = mini_json();
        cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray(), *split = cJSON_CreateObject(),
              *pat = cJSON_CreateObject(), *bl = cJSON_CreateObject();
        cJSON_AddStringToObject(pat, cases[i].kind, cases[i].pattern);
        cJSON_AddStringToObject(split, "type", "Split");
        cJSON_AddItemToObject(split, "pattern", pat);
        cJSON_AddStringToObject(split, "behavior", "Isolated");
        cJSON_AddFalseToObject(split, "invert");
        cJSON_AddStringToObject(bl, "type", "ByteLevel");
        cJSON_AddFalseToObject(bl, "add_prefix_space");
        cJSON_AddFalseToObject(bl, "use_regex");
        cJSON_AddItemToArray(list, split);
        cJSON_AddItemToArray(list, bl);
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddItemToObject(seq, "pretokenizers", list);
        cJSON_ReplaceItemInObject(root, "pre_tokenizer", seq);
        t = NULL;
        CHECK(load_json_obj(root, &t) == Q35_OK, "case %zu: %s", i, q35_last_error());
        cJSON_Delete(root);
        if (!t) continue;
        char label[32];
        snprintf(label, sizeof label, "split case %zu", i);
        CHECK(check_encode(t, label, cases[i].text, strlen(cases[i].text), 1, cases[i].want, cases[i].n), "%s", label);
        q35_tokenizer_free(t);
    }
}

/* Load root after edit(root) and expect code with a message containing needle. */
static void expect_load_error(const char *label, void (*edit)(cJSON *), q35_status code, const char *needle) {
    cJSON *root = mini_json();
    edit(root);
    q35_tokenizer *t = (q35_tokenizer *)1;
    q35_status st = load_json_obj(root, &t);
    cJSON_Delete(root);
    CHECK(st == code, "%s: status %s, want %s (%s)", label, q35_status_name(st), q35_status_name(code), q35_last_error());
    CHECK(t == NULL, "%s", label);
    CHECK(strstr(q35_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", label, q35_last_error(), needle);
    CHECK(strstr(q35_last_error(), "mini.json") != NULL, "%s: message '%s' does not name the file", label, q35_last_error());
    q35_tokenizer_free(t != (q35_tokenizer *)1 ? t : NULL);
}

static cJSON *model_of(cJSON *r) { return cJSON_GetObjectItem(r, "model"); }
static void e_model_type(cJSON *r) { cJSON_ReplaceItemInObject(model_of(r), "type", cJSON_CreateString("WordPiece")); }
static void e_no_model(cJSON *r) { cJSON_DeleteItemFromObject(r, "model"); }
static void e_no_vocab(cJSON *r) { cJSON_DeleteItemFromObject(model_of(r), "vocab"); }
static void e_normalizer(cJSON *r) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddStringToObject(n, "type", "Lowercase");
    cJSON_ReplaceItemInObject(r, "normalizer", n);
}
static void e_normalizer_seq(cJSON *r) {
    cJSON *n = cJSON_CreateObject(), *l = cJSON_CreateArray(), *a = cJSON_CreateObject(), *b = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "type", "NFC");
    cJSON_AddStringToObject(b, "type", "NFKD");
    cJSON_AddItemToArray(l, a);
    cJSON_AddItemToArray(l, b);
    cJSON_AddStringToObject(n, "type", "Sequence");
    cJSON_AddItemToObject(n, "normalizers", l);
    cJSON_ReplaceItemInObject(r, "normalizer", n);
}
static void e_pretok(cJSON *r) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "Whitespace");
    cJSON_ReplaceItemInObject(r, "pre_tokenizer", p);
}
static void e_no_pretok(cJSON *r) { cJSON_DeleteItemFromObject(r, "pre_tokenizer"); }
static void e_decoder(cJSON *r) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "WordPiece");
    cJSON_ReplaceItemInObject(r, "decoder", p);
}
static void e_merge_unknown(cJSON *r) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(model_of(r), "merges"), 0, cJSON_CreateString("a zzz"));
}
static void e_merge_result_unknown(cJSON *r) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(model_of(r), "merges"), 0, cJSON_CreateString("x y"));
}
static void e_merge_form(cJSON *r) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(model_of(r), "merges"), 0, cJSON_CreateString("a b c"));
}
static void e_merge_type(cJSON *r) { cJSON_ReplaceItemInArray(cJSON_GetObjectItem(model_of(r), "merges"), 0, cJSON_CreateNumber(3)); }
static void e_vocab_id(cJSON *r) { cJSON_AddNumberToObject(cJSON_GetObjectItem(model_of(r), "vocab"), "neg", -4); }
static void e_vocab_frac(cJSON *r) { cJSON_AddNumberToObject(cJSON_GetObjectItem(model_of(r), "vocab"), "frac", 2.5); }
static void e_vocab_dup(cJSON *r) { cJSON_AddNumberToObject(cJSON_GetObjectItem(model_of(r), "vocab"), "dup", 7); }
static void e_vocab_huge(cJSON *r) { cJSON_AddNumberToObject(cJSON_GetObjectItem(model_of(r), "vocab"), "huge", 1e12); }
static void e_added_content(cJSON *r) {
    cJSON_DeleteItemFromObject(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "added_tokens"), 0), "content");
}
static void e_added_id(cJSON *r) {
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "added_tokens"), 0), "id", cJSON_CreateString("x"));
}
static void e_bad_regex(cJSON *r) {
    cJSON *p = cJSON_CreateObject(), *pat = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "Split");
    cJSON_AddStringToObject(pat, "Regex", "(unclosed");
    cJSON_AddItemToObject(p, "pattern", pat);
    cJSON_AddStringToObject(p, "behavior", "Isolated");
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON_AddItemToArray(list, p);
    cJSON_AddItemToArray(list, cJSON_Duplicate(cJSON_GetObjectItem(r, "pre_tokenizer"), 1));
    cJSON_AddItemToObject(seq, "pretokenizers", list);
    cJSON_ReplaceItemInObject(r, "pre_tokenizer", seq);
}
static void e_split_behavior(cJSON *r) {
    e_bad_regex(r);
    cJSON *split = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "pre_tokenizer"), "pretokenizers"), 0);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(split, "pattern"), "Regex", cJSON_CreateString("\\s+"));
    cJSON_ReplaceItemInObject(split, "behavior", cJSON_CreateString("Removed"));
}
static void e_bytelevel_first(cJSON *r) {
    e_split_behavior(r);
    cJSON *list = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "pre_tokenizer"), "pretokenizers");
    cJSON *split = cJSON_DetachItemFromArray(list, 0);
    cJSON_ReplaceItemInObject(split, "behavior", cJSON_CreateString("Isolated"));
    cJSON_AddItemToArray(list, split);
}
static void e_dropout(cJSON *r) { cJSON_AddNumberToObject(model_of(r), "dropout", 0.1); }
static void e_byte_fallback(cJSON *r) { cJSON_AddTrueToObject(model_of(r), "byte_fallback"); }
static void e_unk(cJSON *r) { cJSON_AddStringToObject(model_of(r), "unk_token", "<unk>"); }
static void e_bool_type(cJSON *r) { cJSON_AddStringToObject(model_of(r), "ignore_merges", "yes"); }

static void test_bad_inputs(void) {
    expect_load_error("model type", e_model_type, Q35_ERR_UNSUPPORTED, "WordPiece");
    expect_load_error("no model", e_no_model, Q35_ERR_MISSING, "model");
    expect_load_error("no vocab", e_no_vocab, Q35_ERR_MISSING, "model.vocab");
    expect_load_error("normalizer", e_normalizer, Q35_ERR_UNSUPPORTED, "Lowercase");
    expect_load_error("normalizer in a sequence", e_normalizer_seq, Q35_ERR_UNSUPPORTED, "NFKD");
    expect_load_error("pre_tokenizer", e_pretok, Q35_ERR_UNSUPPORTED, "Whitespace");
    expect_load_error("no pre_tokenizer", e_no_pretok, Q35_ERR_UNSUPPORTED, "pre_tokenizer");
    expect_load_error("decoder", e_decoder, Q35_ERR_UNSUPPORTED, "WordPiece");
    expect_load_error("merge of an unknown token", e_merge_unknown, Q35_ERR_FORMAT, "'zzz'");
    expect_load_error("merge result not in vocab", e_merge_result_unknown, Q35_ERR_FORMAT, "merges[0]");
    expect_load_error("merge with two spaces", e_merge_form, Q35_ERR_FORMAT, "merges[0]");
    expect_load_error("merge of the wrong type", e_merge_type, Q35_ERR_FORMAT, "merges[0]");
    expect_load_error("negative id", e_vocab_id, Q35_ERR_FORMAT, "neg");
    expect_load_error("fractional id", e_vocab_frac, Q35_ERR_FORMAT, "frac");
    expect_load_error("huge id", e_vocab_huge, Q35_ERR_FORMAT, "huge");
    expect_load_error("duplicate id", e_vocab_dup, Q35_ERR_FORMAT, "id 7");
    expect_load_error("added token without content", e_added_content, Q35_ERR_FORMAT, "content");
    expect_load_error("added token id", e_added_id, Q35_ERR_FORMAT, "'id'");
    expect_load_error("bad regex", e_bad_regex, Q35_ERR_UNSUPPORTED, "PCRE2");
    expect_load_error("split behavior", e_split_behavior, Q35_ERR_UNSUPPORTED, "Removed");
    expect_load_error("split after ByteLevel", e_bytelevel_first, Q35_ERR_UNSUPPORTED, "after ByteLevel");
    expect_load_error("dropout", e_dropout, Q35_ERR_UNSUPPORTED, "dropout");
    expect_load_error("byte_fallback", e_byte_fallback, Q35_ERR_UNSUPPORTED, "byte_fallback");
    expect_load_error("unknown unk_token", e_unk, Q35_ERR_FORMAT, "<unk>");
    expect_load_error("bool of the wrong type", e_bool_type, Q35_ERR_FORMAT, "ignore_merges");

    q35_tokenizer *t = (q35_tokenizer *)1;
    /* malformed JSON text */
    const char *texts[] = {"", "{", "[1,2]", "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                           "{\"model\": 7}", "{} trailing"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        t = (q35_tokenizer *)1;
        q35_status st = q35_tokenizer_load_mem(texts[i], strlen(texts[i]), "bad.json", NULL, 0, NULL, &t);
        CHECK(st != Q35_OK && t == NULL, "text %zu", i);
        CHECK(strstr(q35_last_error(), "bad.json") != NULL, "text %zu: %s", i, q35_last_error());
    }
    /* files: missing directory, missing tokenizer.json, malformed tokenizer_config.json */
    t = (q35_tokenizer *)1;
    CHECK(q35_tokenizer_load("/nonexistent/q35-dir", &t) == Q35_ERR_MISSING && t == NULL, "%s", "");
    CHECK(strstr(q35_last_error(), "tokenizer.json") != NULL, "%s", q35_last_error());
    CHECK(q35_tokenizer_load_file("/nonexistent/tokenizer.json", &t) == Q35_ERR_MISSING, "%s", "");
    CHECK(q35_tokenizer_load(NULL, &t) == Q35_ERR_ARG, "%s", "");
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/tokenizer-bad", test_work_dir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    cJSON *root = mini_json();
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "%s", "");
    if (f) fputs(text, f), fclose(f);
    free(text);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "wb");
    if (f) fputs("{\"eos_token\": ", f), fclose(f);
    CHECK(q35_tokenizer_load(dir, &t) == Q35_ERR_FORMAT && t == NULL, "%s", "");
    CHECK(strstr(q35_last_error(), "tokenizer_config.json") != NULL, "%s", q35_last_error());
    f = fopen(path, "wb");
    if (f) fputs("{\"eos_token\": 5}", f), fclose(f);
    CHECK(q35_tokenizer_load(dir, &t) == Q35_ERR_FORMAT && t == NULL, "%s", "");
    CHECK(strstr(q35_last_error(), "eos_token") != NULL, "%s", q35_last_error());
    f = fopen(path, "wb");
    if (f) fputs("{\"eos_token\": {\"content\": \"<s>\"}, \"chat_template\": [{\"name\": \"default\", \"template\": \"T\"}]}", f), fclose(f);
    CHECK(q35_tokenizer_load(dir, &t) == Q35_OK, "%s", q35_last_error());
    CHECK(t && q35_tokenizer_eos_id(t) == 258 && !strcmp(q35_tokenizer_chat_template(t), "T"), "%s", "");
    q35_tokenizer_free(t);
    /* API misuse */
    int32_t *ids = (int32_t *)1;
    size_t n = 5;
    CHECK(q35_tokenize(NULL, "a", 1, 1, &ids, &n) == Q35_ERR_ARG && ids == NULL && n == 0, "%s", "");
    char *s = (char *)1;
    CHECK(q35_detokenize(NULL, NULL, 0, &s) == Q35_ERR_ARG && s == NULL, "%s", "");
    CHECK(q35_tokenizer_vocab_size(NULL) == 0, "%s", "");
    q35_tokenizer_free(NULL);
}

int main(void) {
    RUN(test_llama_qwen2_vectors);
    RUN(test_llama_qwen35_vectors_on_qwen3_vocab);
    RUN(test_llama_qwen35_vectors_on_qwen35);
    RUN(test_oracle_qwen3_file);
    RUN(test_oracle_qwen3_qwen35_pattern);
    RUN(test_oracle_qwen3_flags);
    RUN(test_token_api);
    RUN(test_parse_special);
    RUN(test_invalid_utf8);
    RUN(test_stream_decoder);
    RUN(test_roundtrip_random);
    RUN(test_long_inputs);
    RUN(test_unicode_classes);
    RUN(test_mini_tokenizer);
    RUN(test_bad_inputs);
    q35_tokenizer_free(qwen3);
    for (int i = 0; i < 4; i++) q35_tokenizer_free(variants[i]);
    cJSON_Delete(qwen3_json);
    TEST_EXIT();
}
