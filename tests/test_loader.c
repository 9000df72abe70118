/* Bad input to the model loader: each case gets the right error code and a message that names the
 * file and the field or tensor; nothing crashes or leaks (the suite also runs under ASan). Also:
 * a sharded copy of a checkpoint loads and computes the same logits as the single file. */
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "q35.h"
#include "test.h"

static char src_dir[1024], work[1024];

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static char *slurp(const char *path, size_t *n) {
    char *b;
    if (q35_read_file(path, 1u << 28, &b, n)) return NULL;
    return b;
}

/* A fresh copy of the fixture in work/<name>; returns its path. */
static const char *fresh(const char *name) {
    static char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", work, name);
    mkdir(dir, 0755);
    const char *files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char a[2100], b[2100];
        size_t n;
        snprintf(a, sizeof a, "%s/%s", src_dir, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        char *d = slurp(a, &n);
        write_file(b, d, n);
        free(d);
    }
    char idx[2100];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    unlink(idx);
    return dir;
}

/* Load DIR and expect code with every needle in the message. */
static void expect(const char *dir, q35_status code, const char *needle1, const char *needle2) {
    q35_model *m = NULL;
    q35_status st = q35_model_load(dir, &m);
    const char *msg = q35_last_error();
    CHECK(st == code, "expected %s, got %s: %s", q35_status_name(code), q35_status_name(st), msg);
    CHECK(m == NULL, "a failed load must not return a model");
    if (needle1) CHECK(strstr(msg, needle1) != NULL, "message '%s' should mention '%s'", msg, needle1);
    if (needle2) CHECK(strstr(msg, needle2) != NULL, "message '%s' should mention '%s'", msg, needle2);
    CHECK(strchr(msg, '\n') == NULL, "message must be one line");
    q35_model_free(m);
}

/* Rewrite dir/model.safetensors with its header edited by fn (data section kept). */
static void edit_header(const char *dir, void (*fn)(cJSON *)) {
    char p[2100];
    size_t n;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unsigned char *d = (unsigned char *)slurp(p, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | d[i];
    cJSON *h = cJSON_ParseWithLength((char *)d + 8, hl);
    fn(h);
    char *txt = cJSON_PrintUnformatted(h);
    size_t tl = strlen(txt), pad = (8 - tl % 8) % 8, data = n - 8 - hl;
    unsigned char *out = malloc(8 + tl + pad + data);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((tl + pad) >> (8 * i));
    memcpy(out + 8, txt, tl);
    memset(out + 8 + tl, ' ', pad);
    memcpy(out + 8 + tl + pad, d + 8 + hl, data);
    write_file(p, out, 8 + tl + pad + data);
    free(out);
    free(txt);
    cJSON_Delete(h);
    free(d);
}

static void edit_config(const char *dir, const char *from, const char *to) {
    char p[2100];
    size_t n;
    snprintf(p, sizeof p, "%s/config.json", dir);
    char *d = slurp(p, &n);
    char *at = strstr(d, from);
    if (!at) { CHECK(0, "config has no '%s'", from); free(d); return; }
    size_t fl = strlen(from), tl = strlen(to);
    char *out = malloc(n - fl + tl + 1);
    memcpy(out, d, (size_t)(at - d));
    memcpy(out + (at - d), to, tl);
    memcpy(out + (at - d) + tl, at + fl, n - (size_t)(at - d) - fl);
    write_file(p, out, n - fl + tl);
    free(out);
    free(d);
}

#define T_EMBED "model.language_model.embed_tokens.weight"
#define T_QKV "model.language_model.layers.0.linear_attn.in_proj_qkv.weight"
#define T_NORM "model.language_model.layers.0.input_layernorm.weight"

static void h_dtype(cJSON *h) { cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, T_NORM), "dtype", cJSON_CreateString("I16")); }
static void h_unknown_dtype(cJSON *h) { cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, T_NORM), "dtype", cJSON_CreateString("Q9")); }
static void h_shape(cJSON *h) {
    cJSON *e = cJSON_GetObjectItem(h, T_QKV), *s = cJSON_GetObjectItem(e, "shape");
    double a = cJSON_GetArrayItem(s, 0)->valuedouble, b = cJSON_GetArrayItem(s, 1)->valuedouble;
    cJSON_ReplaceItemInArray(s, 0, cJSON_CreateNumber(b));
    cJSON_ReplaceItemInArray(s, 1, cJSON_CreateNumber(a));
}
static void h_missing(cJSON *h) { cJSON_DeleteItemFromObject(h, T_QKV); }
static void h_offsets(cJSON *h) {
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(h, T_EMBED), "data_offsets");
    cJSON_ReplaceItemInArray(o, 1, cJSON_CreateNumber(1e12));
}
static void h_offsets_huge(cJSON *h) { /* fuzz find: a begin of 1e88 was cast to an integer before the range check */
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(h, T_EMBED), "data_offsets");
    cJSON_ReplaceItemInArray(o, 0, cJSON_CreateNumber(1e88));
}
static void h_shape_huge(cJSON *h) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(cJSON_GetObjectItem(h, T_NORM), "shape"), 0, cJSON_CreateNumber(-1e88));
}
static void h_overlap(cJSON *h) {
    /* Point the norm at the first bytes of the embedding, same length as before. */
    cJSON *e = cJSON_GetObjectItem(h, T_EMBED), *n = cJSON_GetObjectItem(h, T_NORM);
    cJSON *eo = cJSON_GetObjectItem(e, "data_offsets"), *no = cJSON_GetObjectItem(n, "data_offsets");
    double len = cJSON_GetArrayItem(no, 1)->valuedouble - cJSON_GetArrayItem(no, 0)->valuedouble;
    double b = cJSON_GetArrayItem(eo, 0)->valuedouble;
    cJSON_ReplaceItemInArray(no, 0, cJSON_CreateNumber(b));
    cJSON_ReplaceItemInArray(no, 1, cJSON_CreateNumber(b + len));
}
static void h_size(cJSON *h) {
    cJSON *s = cJSON_GetObjectItem(cJSON_GetObjectItem(h, T_NORM), "shape");
    cJSON_ReplaceItemInArray(s, 0, cJSON_CreateNumber(cJSON_GetArrayItem(s, 0)->valuedouble * 2));
}

static void test_missing_files(void) {
    expect("/nonexistent-q35-dir", Q35_ERR_MISSING, "config.json", NULL);
    const char *d = fresh("nomodel");
    char p[2100];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    expect(d, Q35_ERR_MISSING, "model.safetensors", NULL);
}

static void test_bad_config(void) {
    static const struct {
        const char *from, *to; /* one edit of config.json */
        q35_status code;
        const char *needle; /* in the error, besides "config.json" */
    } cases[] = {
        {"\"hidden_size\": 64", "\"hidden_size\": 64,,", Q35_ERR_FORMAT, "malformed JSON"},
        {"Qwen3_5ForConditionalGeneration", "LlamaForCausalLM", Q35_ERR_UNSUPPORTED, "LlamaForCausalLM"},
        {"\"hidden_size\"", "\"hidden_sizeX\"", Q35_ERR_MISSING, "hidden_size"},
        {"\"hidden_size\": 64", "\"hidden_size\": \"64\"", Q35_ERR_FORMAT, "hidden_size"},
        {"\"linear_attention\",", "\"mamba\",", Q35_ERR_FORMAT, "layer_types"},
        {"\"eos_token_id\": null", "\"eos_token_id\": 1e88", Q35_ERR_FORMAT, "eos_token_id"}, /* no cast before the range check */
        {"\"eos_token_id\": null", "\"eos_token_id\": [2, -7]", Q35_ERR_FORMAT, "eos_token_id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *d = fresh("cfg");
        edit_config(d, cases[i].from, cases[i].to);
        expect(d, cases[i].code, "config.json", cases[i].needle);
    }
}

static void test_bad_tensors(void) {
    const char *d;
    d = fresh("t"); edit_header(d, h_dtype); expect(d, Q35_ERR_DTYPE, "model.safetensors", T_NORM);
    d = fresh("t"); edit_header(d, h_unknown_dtype); expect(d, Q35_ERR_DTYPE, "model.safetensors", "Q9");
    d = fresh("t"); edit_header(d, h_shape); expect(d, Q35_ERR_SHAPE, T_QKV, "expected");
    d = fresh("t"); edit_header(d, h_missing); expect(d, Q35_ERR_MISSING, T_QKV, NULL);
    d = fresh("t"); edit_header(d, h_offsets); expect(d, Q35_ERR_FORMAT, T_EMBED, "data_offsets");
    d = fresh("t"); edit_header(d, h_offsets_huge); expect(d, Q35_ERR_FORMAT, T_EMBED, "data_offsets");
    d = fresh("t"); edit_header(d, h_shape_huge); expect(d, Q35_ERR_FORMAT, T_NORM, "shape[0]");
    d = fresh("t"); edit_header(d, h_overlap); expect(d, Q35_ERR_FORMAT, "overlap", NULL);
    d = fresh("t"); edit_header(d, h_size); expect(d, Q35_ERR_FORMAT, T_NORM, "need");
}

static void test_bad_files(void) {
    char p[2100];
    size_t n;
    const char *d = fresh("f");
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    char *data = slurp(p, &n);
    write_file(p, data, n - 100); /* truncated data section */
    expect(d, Q35_ERR_FORMAT, "model.safetensors", NULL);
    write_file(p, data, 5); /* shorter than the length prefix */
    expect(d, Q35_ERR_FORMAT, "truncated", NULL);
    unsigned char bad[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    write_file(p, bad, sizeof bad); /* header length out of range */
    expect(d, Q35_ERR_FORMAT, "header length", NULL);
    unsigned char big[16] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    write_file(p, big, sizeof big); /* header longer than the file */
    expect(d, Q35_ERR_FORMAT, "truncated", NULL);
    memcpy(data + 8, "{\"x\":[1,2", 9); /* malformed header JSON */
    write_file(p, data, n);
    expect(d, Q35_ERR_FORMAT, "malformed JSON", NULL);
    write_file(p, "", 0);
    expect(d, Q35_ERR_FORMAT, "empty", NULL);
    free(data);
}

static void test_lm_head(void) {
    /* tie_word_embeddings false and no lm_head.weight: a missing tensor. */
    const char *d = fresh("head");
    edit_config(d, "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    edit_config(d, "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    expect(d, Q35_ERR_MISSING, "lm_head.weight", NULL);
}

/* Split the fixture into two shards + index; it must load and give the same logits. */
typedef struct {
    size_t done, total;
    int calls, backwards;
} load_progress;
static void on_load_progress(size_t done, size_t total, void *user) {
    load_progress *p = user;
    p->backwards |= done < p->done || done > total;
    p->done = done;
    p->total = total;
    p->calls++;
}

static void test_sharded(void) {
    const char *d = fresh("sharded");
    char p[2100], single[2100];
    snprintf(single, sizeof single, "%s", src_dir);
    q35_st_index st;
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(q35_st_open_file(p, &st) == Q35_OK, "%s", q35_last_error());
    cJSON *idx = cJSON_CreateObject(), *wm = cJSON_AddObjectToObject(idx, "weight_map");
    for (int shard = 0; shard < 2; shard++) {
        cJSON *h = cJSON_CreateObject();
        size_t off = 0;
        for (int i = shard; i < st.n_tensors; i += 2) {
            const q35_tensor *t = &st.tensors[i];
            cJSON *e = cJSON_AddObjectToObject(h, t->name);
            const char *dt = t->dtype == Q35_DT_F32 ? "F32" : t->dtype == Q35_DT_BF16 ? "BF16" : "F16";
            cJSON_AddStringToObject(e, "dtype", dt);
            cJSON *s = cJSON_AddArrayToObject(e, "shape");
            for (int k = 0; k < t->ndim; k++) cJSON_AddItemToArray(s, cJSON_CreateNumber((double)t->shape[k]));
            cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
            cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
            cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + t->nbytes)));
            off += t->nbytes;
            cJSON_AddStringToObject(wm, t->name, shard ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors");
        }
        char *txt = cJSON_PrintUnformatted(h);
        size_t tl = strlen(txt);
        unsigned char *out = malloc(8 + tl + off);
        for (int i = 0; i < 8; i++) out[i] = (unsigned char)(tl >> (8 * i));
        memcpy(out + 8, txt, tl);
        size_t at = 8 + tl;
        for (int i = shard; i < st.n_tensors; i += 2) {
            memcpy(out + at, st.tensors[i].data, st.tensors[i].nbytes);
            at += st.tensors[i].nbytes;
        }
        snprintf(p, sizeof p, "%s/model-0000%d-of-00002.safetensors", d, shard + 1);
        write_file(p, out, at);
        free(out);
        free(txt);
        cJSON_Delete(h);
    }
    q35_st_close(&st);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    char *txt = cJSON_PrintUnformatted(idx);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    write_file(p, txt, strlen(txt));
    free(txt);

    q35_model *a = NULL, *b = NULL;
    CHECK(q35_model_load(single, &a) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_model_load(d, &b) == Q35_OK, "%s", q35_last_error());
    if (a && b) {
        q35_model_info ia;
        q35_model_get_info(a, &ia);
        q35_session *sa, *sb;
        q35_session_new(a, 64, &sa);
        q35_session_new(b, 64, &sb);
        int32_t ids[5] = {1, 7, 42, 3, 99};
        float *la = malloc(sizeof(float) * ia.n_vocab), *lb = malloc(sizeof(float) * ia.n_vocab);
        q35_session_eval(sa, ids, 5, la, NULL);
        q35_session_eval(sb, ids, 5, lb, NULL);
        CHECK(memcmp(la, lb, sizeof(float) * ia.n_vocab) == 0, "sharded logits differ");
        free(la);
        free(lb);
        q35_session_free(sa);
        q35_session_free(sb);
    }
    q35_model_free(a);
    q35_model_free(b);
    /* Load progress over the two shards read into memory: never backwards, ending at their sum. */
    load_progress pr = {0, 0, 0, 0};
    q35_load_opts lo = {.load = 1, .progress = on_load_progress, .progress_user = &pr};
    CHECK(q35_model_load_ex(d, &lo, &b) == Q35_OK, "%s", q35_last_error());
    q35_model_free(b);
    struct stat s1, s2;
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", d);
    int have = stat(p, &s1) == 0;
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    have = have && stat(p, &s2) == 0;
    CHECK(have && pr.calls >= 2 && !pr.backwards && pr.done == (size_t)(s1.st_size + s2.st_size) && pr.total == pr.done,
          "progress: %d calls, done %zu of %zu, backwards %d", pr.calls, pr.done, pr.total, pr.backwards);
    /* A shard the index names but that is absent, and a name that escapes the directory. */
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    rename(p, "/tmp/q35-moved-shard");
    expect(d, Q35_ERR_MISSING, "model-00002-of-00002.safetensors", NULL);
    rename("/tmp/q35-moved-shard", p);
    cJSON_ReplaceItemInObject(wm, T_EMBED, cJSON_CreateString("../x.safetensors"));
    txt = cJSON_PrintUnformatted(idx);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    write_file(p, txt, strlen(txt));
    free(txt);
    expect(d, Q35_ERR_FORMAT, "weight_map", NULL);
    cJSON_Delete(idx);
}

static void test_context_and_tokens(void) {
    q35_model *m;
    if (q35_model_load(src_dir, &m)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_session *s;
    CHECK(q35_session_new(m, 4, &s) == Q35_OK, "%s", q35_last_error());
    int32_t ids[5] = {1, 2, 3, 4, 5};
    CHECK(q35_session_eval(s, ids, 5, NULL, NULL) == Q35_ERR_CONTEXT, "5 tokens in a context of 4 must fail");
    CHECK(q35_session_pos(s) == 0, "a refused batch must leave the session unchanged");
    CHECK(q35_session_eval(s, ids, 3, NULL, NULL) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_eval(s, ids, 2, NULL, NULL) == Q35_ERR_CONTEXT, "overflow after 3 must fail");
    int32_t bad = 1 << 30;
    CHECK(q35_session_eval(s, &bad, 1, NULL, NULL) == Q35_ERR_ARG, "an id outside the vocabulary must fail");
    q35_session_free(s);
    q35_session *s2 = NULL;
    CHECK(q35_session_new(m, 1 << 30, &s2) == Q35_ERR_ARG, "a context over max_position_embeddings must fail");
    q35_model_free(m);
}

int main(void) {
    snprintf(src_dir, sizeof src_dir, "%s/models/tiny-vl", test_data_dir());
    snprintf(work, sizeof work, "%s/loader", test_work_dir());
    mkdir(test_work_dir(), 0755);
    mkdir(work, 0755);
    RUN(test_missing_files);
    RUN(test_bad_config);
    RUN(test_bad_tensors);
    RUN(test_bad_files);
    RUN(test_lm_head);
    RUN(test_sharded);
    RUN(test_context_and_tokens);
    TEST_EXIT();
}
