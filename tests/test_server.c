/* The pieces of q35 serve below HTTP (src/server/): stop-sequence scanning, data: URL decoding,
 * OpenAI request validation (every bad field gives a 400 naming it), the response JSON shapes, and
 * the engine: concurrent jobs on the tiny talker checkpoint give exactly the greedy tokens a plain
 * session gives, and a cancelled job ends. tests/cli/serve.sh drives the HTTP side. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "q35.h"
#include "server/engine.h"
#include "server/image.h"
#include "server/request.h"
#include "server/response.h"
#include "server/stopstr.h"
#include "test.h"

static void test_stop_scan(void) {
    char *stops[] = {"END", "\n\n"};
    size_t safe;
    CHECK(srv_stop_scan("hello", 5, stops, 2, &safe) == -1 && safe == 5, "%s", "failed");
    CHECK(srv_stop_scan("hello E", 7, stops, 2, &safe) == -1 && safe == 6, "a possible start is held back (safe %zu)", safe);
    CHECK(srv_stop_scan("hello EN", 8, stops, 2, &safe) == -1 && safe == 6, "safe %zu", safe);
    CHECK(srv_stop_scan("hello ENX", 9, stops, 2, &safe) == -1 && safe == 9, "no longer a prefix: all released (safe %zu)", safe);
    CHECK(srv_stop_scan("ab\n\ncdEND", 9, stops, 2, &safe) == 2 && safe == 2, "the earliest stop wins");
    CHECK(srv_stop_scan("abEND\n\n", 7, stops, 2, &safe) == 2 && safe == 2, "%s", "failed");
    char *empty[] = {""};
    CHECK(srv_stop_scan("abc", 3, empty, 1, &safe) == -1 && safe == 3, "an empty stop is ignored");
    CHECK(srv_stop_scan("", 0, stops, 2, &safe) == -1 && safe == 0, "%s", "failed");
}

static void test_data_url(void) {
    static const char png[] = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    uint8_t *b;
    size_t n;
    srv_err e;
    CHECK(srv_image_decode_data_url(png, 1 << 20, "img", &b, &n, &e) == 0 && n == 70 && b[1] == 'P', "n %zu", n);
    free(b);
    CHECK(srv_image_decode_data_url(png, 16, "img", &b, &n, &e) == -1 && e.status == 400 && !strcmp(e.code, "image_too_large"), "%s", "failed");
    const char *bad[] = {"data:image/png;base64,@@@", "data:image/png;base64,", "data:image/png,abc", "data:text/plain;base64,aGk=",
                         "https://example.com/x.png", "image/png;base64,aGk=", "data:image/png;base64,aGVsbG8=", "data:image/png;base64,aGk=aGk=",
                         "data:image/png;base64"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = (uint8_t *)1;
        CHECK(srv_image_decode_data_url(bad[i], 1 << 20, "img", &b, &n, &e) == -1 && e.status == 400 && b == NULL && !strcmp(e.param, "img"),
              "%s", bad[i]);
    }
    q35_pixels px;
    CHECK(srv_image_accept(0, NULL, NULL, 0, 4096, "p", &px, &e) == -1 && e.status == 400 && !strcmp(e.code, "model_not_multimodal") &&
              strstr(e.message, "the model has no vision tower"),
          "%s", "failed");
    CHECK(srv_image_accept(1, NULL, NULL, 0, 4096, "p", &px, &e) == -1 && e.status == 400 && !strcmp(e.code, "images_not_supported"), "%s", "failed");
    /* an image that would take more tokens than the context has left is refused before its pixel
     * values are made; one that fits is accepted */
    const char *dir = getenv("Q35_TEST_DATA");
    char path[512];
    snprintf(path, sizeof path, "%s/images/bw_40x30.png", dir ? dir : "tests/data");
    FILE *f = fopen(path, "rb");
    uint8_t pngb[65536];
    const size_t pn = f ? fread(pngb, 1, sizeof pngb, f) : 0;
    if (f) fclose(f);
    q35_image_proc *proc = NULL;
    CHECK(pn > 0 && q35_image_proc_load(NULL, &proc) == Q35_OK, "%s", path);
    if (proc) {
        CHECK(srv_image_accept(1, proc, pngb, pn, 69, "p", &px, &e) == -1 && e.status == 400 && !strcmp(e.code, "context_length_exceeded"),
              "small budget: %d %s", e.status, e.message);
        CHECK(srv_image_accept(1, proc, pngb, pn, 4096, "p", &px, &e) == 0 && px.n_tokens == 70 && px.data, "fits: %s", e.message);
        q35_pixels_free(&px);
        q35_image_proc_free(proc);
    }
}

static q35_tokenizer *tok;
static q35_model *model;

static srv_request_ctx req_ctx(void) {
    srv_request_ctx c;
    memset(&c, 0, sizeof c);
    q35_sampler_default_params(&c.defaults);
    c.defaults.presence_penalty = 0;
    c.defaults.repetition_penalty = 1;
    c.tok = tok;
    c.n_ctx = 64;
    c.max_image_bytes = 1 << 20;
    c.has_vision = 1;
    return c;
}

static int parse(const char *body, srv_kind kind, srv_request *r, srv_err *e) {
    srv_request_ctx c = req_ctx();
    return srv_request_parse(body, strlen(body), kind, &c, r, e);
}

static void test_request_ok(void) {
    srv_request r;
    srv_err e;
    int rc = parse("{\"model\":\"x\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                   "\"text\":\"hi\"}]}],\"temperature\":0.5,\"top_p\":0.9,\"max_tokens\":7,\"stop\":[\"a\",\"b\"],\"seed\":3,"
                   "\"presence_penalty\":1,\"frequency_penalty\":-1,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"n\":1,"
                   "\"user\":\"ignored\",\"logprobs\":false}",
                   SRV_KIND_CHAT, &r, &e);
    CHECK(rc == 0, "%s", e.message);
    if (rc) return;
    CHECK(r.stream == 1 && r.include_usage == 1, "%s", "failed");
    CHECK(r.gen.sp.temperature == 0.5f && r.gen.sp.top_p == 0.9f && r.gen.max_tokens == 7 && r.gen.sp.seed == 3, "%s", "failed");
    CHECK(r.gen.sp.presence_penalty == 1 && r.gen.frequency_penalty == -1, "%s", "failed");
    CHECK(r.gen.n_stop == 2 && !strcmp(r.gen.stop[1], "b"), "%s", "failed");
    CHECK(strstr(r.prompt, "<|im_start|>system\nBe brief.<|im_end|>") != NULL, "developer is the system role: %s", r.prompt);
    CHECK(strstr(r.prompt, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n") != NULL, "%s", r.prompt);
    CHECK(r.n_tokens > 5 && r.tokens[0] == q35_token_id(tok, "<|im_start|>"), "%s", "failed");
    srv_request_free(&r);
    /* max_tokens defaults to (and is capped at) what the context has left */
    CHECK(parse("{\"prompt\":\"Once upon\",\"max_tokens\":1000}", SRV_KIND_COMPLETION, &r, &e) == 0, "%s", e.message);
    CHECK(r.gen.max_tokens == 64 - r.n_tokens && !strcmp(r.prompt, "Once upon"), "max_tokens %d", r.gen.max_tokens);
    srv_request_free(&r);
    CHECK(parse("{\"prompt\":[\"Once upon\"],\"stop\":\"x\"}", SRV_KIND_COMPLETION, &r, &e) == 0, "%s", e.message);
    CHECK(r.gen.n_stop == 1 && !strcmp(r.gen.stop[0], "x"), "%s", "failed");
    srv_request_free(&r);
}

static void test_request_errors(void) {
    static const struct {
        const char *body, *param, *code;
        int kind;
    } cases[] = {
        {"{\"messages\": [", "", NULL, 0},
        {"[]", "", NULL, 0},
        {"{}", "messages", NULL, 0},
        {"{\"messages\":[]}", "messages", NULL, 0},
        {"{\"messages\":{}}", "messages", NULL, 0},
        {"{\"messages\":[5]}", "messages[0]", NULL, 0},
        {"{\"messages\":[{\"content\":\"x\"}]}", "messages[0]", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\"}]}", "messages[0]", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"audio\"}]}]}", "messages[0].content[0]", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":3}]}]}", "messages[0].content[0]", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,%%\"}}]}]}",
         "messages[0].content[0].image_url", "invalid_image_url", 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}", "messages[0].content[0].image_url", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"1\"}", "temperature", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", "temperature", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":-1}", "top_p", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", "max_tokens", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2.5}", "max_tokens", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":{}}", "stop", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":\"0123456789012345678901234567890123456789012345678901234567890123"
         "0123456789012345678901234567890123456789012345678901234567890123012345678901234567890123456789012345678901234567890123456789012301234"
         "56789012345678901234567890123456789012345678901234567890123x\"}", "stop", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}", "n", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", "stream", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":true}", "stream_options", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":\"7\"}", "seed", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"presence_penalty\":5}", "presence_penalty", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":7}", "model", NULL, 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true}", "logprobs", NULL, 0},
        {"{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"image_url\",\"image_url\":\"x\"}]}]}", "messages[0].content[0].image_url",
         "invalid_image_url", 0},
        {"{\"prompt\":5}", "prompt", NULL, 1},
        {"{\"prompt\":\"\"}", "prompt", NULL, 1},
        {"{}", "prompt", NULL, 1},
        {"{\"prompt\":\"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen "
         "nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five twenty-six twenty-seven twenty-eight twenty-nine\"}",
         "prompt", "context_length_exceeded", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        srv_request r;
        srv_err e;
        memset(&e, 0, sizeof e);
        int rc = parse(cases[i].body, cases[i].kind ? SRV_KIND_COMPLETION : SRV_KIND_CHAT, &r, &e);
        CHECK(rc == -1 && e.status == 400 && e.message[0] && !strcmp(e.param, cases[i].param) &&
                  (!cases[i].code || (e.code && !strcmp(e.code, cases[i].code))),
              "%s: rc %d status %d param '%s' code %s: %s", cases[i].body, rc, e.status, e.param, e.code ? e.code : "null", e.message);
        CHECK(r.prompt == NULL && r.tokens == NULL && r.gen.n_stop == 0, "nothing left allocated");
    }
}

static void test_response_json(void) {
    srv_err e;
    srv_error(&e, 400, "invalid_request_error", NULL, "n", "'n': only 1");
    char *s = srv_json_error(&e);
    cJSON *j = cJSON_Parse(s);
    cJSON *in = cJSON_GetObjectItem(j, "error");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(in, "message")) && cJSON_IsNull(cJSON_GetObjectItem(in, "code")) &&
              !strcmp(cJSON_GetObjectItem(in, "param")->valuestring, "n"),
          "%s", s);
    cJSON_Delete(j);
    free(s);
    srv_reply_meta m = {"chatcmpl-1", "talker", 1700000000, SRV_KIND_CHAT};
    srv_job_view v;
    memset(&v, 0, sizeof v);
    v.finish = SRV_FINISH_LENGTH;
    v.n_prompt = 10;
    v.n_generated = 3;
    s = srv_json_completion(&m, "a\"b", &v);
    j = cJSON_Parse(s);
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "message"), "content")->valuestring, "a\"b"), "%s", "failed");
    CHECK(!strcmp(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "length"), "%s", "failed");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valuedouble == 13, "%s", s);
    cJSON_Delete(j);
    free(s);
    s = srv_json_chunk(&m, 0, "x", SRV_FINISH_NONE);
    j = cJSON_Parse(s);
    c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion.chunk") && cJSON_IsNull(cJSON_GetObjectItem(c0, "finish_reason")) &&
              !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "delta"), "content")->valuestring, "x"),
          "%s", s);
    cJSON_Delete(j);
    free(s);
}

/* Greedy tokens of a plain session, the reference for the engine. */
static int greedy_ref(const int32_t *prompt, int n, int steps, int32_t *out) {
    q35_session *s;
    if (q35_session_new(model, 512, &s)) return -1;
    int32_t next;
    int k = 0;
    if (q35_session_eval_argmax(s, prompt, n, &next, NULL) == Q35_OK)
        for (; k < steps; k++) {
            out[k] = next;
            if (k + 1 < steps && q35_session_eval_argmax(s, &next, 1, &next, NULL)) break;
        }
    q35_session_free(s);
    return k;
}

static char *wait_all(srv_job *j, srv_job_view *v) {
    for (;;) {
        if (srv_job_wait(j, 0, 1000, v)) return NULL;
        if (v->finish != SRV_FINISH_NONE) return v->text ? v->text : strdup("");
        free(v->text);
    }
}

static void test_engine(void) {
    srv_engine *e;
    srv_engine_opts o = {256, 2, 8, 0, NULL, 0, Q35_KV_F32};
    CHECK(srv_engine_new(model, tok, NULL, 0, &o, &e) == Q35_OK, "%s", q35_last_error());
    if (!e) return;
    const char *prompts[3] = {"The meaning of", "Once upon a time", "Computers are"};
    enum { STEPS = 12 };
    srv_job *jobs[3];
    int32_t *ids[3];
    size_t n_ids[3];
    for (int i = 0; i < 3; i++) {
        CHECK(q35_tokenize(tok, prompts[i], strlen(prompts[i]), 0, &ids[i], &n_ids[i]) == Q35_OK, "%s", "failed");
        srv_gen_params p;
        memset(&p, 0, sizeof p);
        q35_sampler_default_params(&p.sp);
        p.sp.temperature = 0;
        p.sp.presence_penalty = 0;
        p.sp.repetition_penalty = 1;
        p.max_tokens = STEPS;
        jobs[i] = srv_job_new(ids[i], (int)n_ids[i], &p);
        CHECK(jobs[i] && srv_engine_submit(e, jobs[i]) == Q35_OK, "%s", "failed"); /* 3 jobs, 2 slots: one waits */
    }
    for (int i = 0; i < 3; i++) {
        srv_job_view v;
        char *text = wait_all(jobs[i], &v);
        int32_t ref[STEPS];
        int k = greedy_ref(ids[i], (int)n_ids[i], STEPS, ref);
        char *want = NULL;
        CHECK(k == STEPS && q35_detokenize(tok, ref, (size_t)k, &want) == Q35_OK, "%s", "failed");
        CHECK(text && want && !strcmp(text, want) && v.finish == SRV_FINISH_LENGTH && v.n_generated == STEPS,
              "job %d: '%s' vs '%s' (finish %d, %d tokens)", i, text ? text : "", want ? want : "", v.finish, v.n_generated);
        free(text);
        free(want);
        srv_job_release(jobs[i]);
        free(ids[i]);
    }
    /* a cancelled job ends early and frees its slot */
    int32_t one = 1;
    srv_gen_params p;
    memset(&p, 0, sizeof p);
    p.max_tokens = 200;
    p.ignore_eos = 1;
    srv_job *j = srv_job_new(&one, 1, &p);
    CHECK(srv_engine_submit(e, j) == Q35_OK, "%s", "failed");
    srv_job_cancel(j);
    srv_job_view v;
    char *text = wait_all(j, &v);
    CHECK(v.finish == SRV_FINISH_CANCELLED && v.n_generated < 200, "finish %d after %d tokens", v.finish, v.n_generated);
    free(text);
    srv_job_release(j);
    int active = -1, queued = -1;
    srv_engine_load(e, &active, &queued);
    CHECK(active == 0 && queued == 0, "active %d queued %d", active, queued);
    srv_engine_free(e);
}

/* Two requests sharing a long prefix: the second resumes from the first one's checkpoint (cached
 * tokens = the last grid point of the shared, stable part) and still gives the plain session's
 * greedy tokens. */
static void test_engine_reuse(void) {
    q35_prefix_cache *cache = NULL;
    CHECK(q35_prefix_cache_new(model, 64 << 20, &cache) == Q35_OK, "%s", q35_last_error());
    srv_engine *e = NULL;
    srv_engine_opts o = {512, 2, 8, 1, cache, 128, Q35_KV_F32}; /* prompts in pieces of one chunk */
    CHECK(srv_engine_new(model, tok, NULL, 0, &o, &e) == Q35_OK, "%s", q35_last_error());
    if (!e || !cache) {
        srv_engine_free(e);
        q35_prefix_cache_free(cache);
        return;
    }
    char text[4096] = "";
    for (int i = 0; i < 40; i++) strcat(text, "The cat sat on the mat and looked at the moon. ");
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(q35_tokenize(tok, text, strlen(text), 0, &ids, &n) == Q35_OK && n > 300, "%zu tokens", n);
    if (n <= 300) {
        free(ids);
        srv_engine_free(e);
        q35_prefix_cache_free(cache);
        return;
    }
    const int chunk = 128;
    const int lens[2] = {200, 300}; /* request 2 extends request 1's prompt */
    int cached[2] = {-1, -1};
    for (int r = 0; r < 2; r++) {
        srv_gen_params p;
        memset(&p, 0, sizeof p);
        q35_sampler_default_params(&p.sp);
        p.sp.temperature = 0;
        p.sp.presence_penalty = 0;
        p.sp.repetition_penalty = 1;
        p.max_tokens = 8;
        p.stable = lens[r] - 4;
        srv_job *j = srv_job_new(ids, lens[r], &p);
        CHECK(j && srv_engine_submit(e, j) == Q35_OK, "submit");
        srv_job_view v;
        char *got = wait_all(j, &v);
        cached[r] = v.n_cached;
        int32_t ref[8];
        char *want = NULL;
        int k = greedy_ref(ids, lens[r], 8, ref);
        CHECK(k == 8 && q35_detokenize(tok, ref, 8, &want) == Q35_OK, "reference");
        CHECK(got && want && !strcmp(got, want), "request %d: '%s' vs '%s'", r, got ? got : "", want ? want : "");
        free(got);
        free(want);
        srv_job_release(j);
    }
    CHECK(cached[0] == 0 && cached[1] == (lens[0] - 4) / chunk * chunk, "cached %d then %d tokens", cached[0], cached[1]);
    free(ids);
    srv_engine_free(e);
    q35_prefix_cache_free(cache);
}

/* The engine's assumption: a prompt evaluated in pieces that begin on the chunk grid gives bitwise
 * the logits of one call (memcmp). */
static void test_prefill_pieces_bitwise(void) {
    char text[8192] = "";
    for (int i = 0; i < 60; i++) strcat(text, "A fortune cookie says the sea is calm and the code compiles. ");
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(q35_tokenize(tok, text, strlen(text), 0, &ids, &n) == Q35_OK && n > 400, "%zu tokens", n);
    if (n > 500) n = 500;
    q35_model_info info;
    q35_model_get_info(model, &info);
    float *one = malloc(sizeof(float) * (size_t)info.n_vocab), *pieces = malloc(sizeof(float) * (size_t)info.n_vocab);
    q35_session *a = NULL, *b = NULL;
    CHECK(q35_session_new(model, 512, &a) == Q35_OK && q35_session_new(model, 512, &b) == Q35_OK, "sessions");
    if (a && b && one && pieces && n > 400) {
        CHECK(q35_session_eval(a, ids, (int)n, one, NULL) == Q35_OK, "one call");
        const int chunk = q35_session_chunk(b);
        int pos = 0;
        while (pos + chunk < (int)n) {
            CHECK(q35_session_eval(b, ids + pos, chunk, NULL, NULL) == Q35_OK, "piece at %d", pos);
            pos += chunk;
        }
        CHECK(q35_session_eval(b, ids + pos, (int)n - pos, pieces, NULL) == Q35_OK, "last piece");
        CHECK(memcmp(one, pieces, sizeof(float) * (size_t)info.n_vocab) == 0, "logits differ (chunk %d, %zu tokens)", chunk, n);
    }
    q35_session_free(a);
    q35_session_free(b);
    free(one);
    free(pieces);
    free(ids);
}

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/talker", test_data_dir());
    RUN(test_stop_scan);
    RUN(test_data_url);
    if (q35_tokenizer_load(dir, &tok) || q35_model_load(dir, &model)) {
        printf("not ok load_talker: %s\n", q35_last_error());
        return 1;
    }
    RUN(test_request_ok);
    RUN(test_request_errors);
    RUN(test_response_json);
    RUN(test_engine);
    RUN(test_prefill_pieces_bitwise);
    if (!getenv("Q35_PROMPT_CHUNK")) RUN(test_engine_reuse); /* its numbers assume the default grid of 128 */
    q35_model_free(model);
    q35_tokenizer_free(tok);
    TEST_EXIT();
}
