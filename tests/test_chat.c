/* The Qwen3.5 chat template (src/text/chat.c) against transformers' own rendering
 * (tests/data/chat/vectors.json, made by tools/oracle/make_chat_vectors.py), plus malformed input. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/err.h"
#include "core/file.h"
#include "formats/json.h"
#include "q35.h"
#include "test.h"
#include "text/chat.h"

static char *read_text(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/chat/%s", test_data_dir(), name);
    char *buf = NULL;
    size_t len;
    if (q35_read_file(path, (size_t)64 << 20, &buf, &len)) return NULL;
    return buf;
}

static int default_of_variant(const char *variant) {
    char *t = read_text(strcmp(variant, "full") == 0 ? "qwen3.5-chat_template.jinja" : "qwen3.5-small-chat_template.jinja");
    int d = t ? q35_chat_template_default_thinking(t) : -1;
    free(t);
    return d;
}

/* First differing byte, for a readable failure. */
static void show_diff(const char *name, const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s: differs at byte %zu\n    want: %.80s\n    got:  %.80s\n", name, i, want + from, got + from);
}

static void test_default_thinking(void) {
    CHECK(default_of_variant("full") == 1, "full template: thinking on by default");
    CHECK(default_of_variant("small") == 0, "small-model template: thinking off by default");
    CHECK(q35_chat_template_default_thinking(NULL) == 0, "check");
    CHECK(q35_chat_template_default_thinking("") == 0, "check");
    /* Qwen3's form */
    CHECK(q35_chat_template_default_thinking("{%- if enable_thinking is defined and enable_thinking is false %}"
                                             "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}") == 1, "check");
    CHECK(q35_chat_template_default_thinking("{% if enable_thinking == true %}x{% endif %}") == 0, "check");
}

static int n_vectors, n_matched;

static void run_vectors(const char *path, int quiet) {
    cJSON *root = NULL;
    q35_status st = q35_json_load_file(path, (size_t)64 << 20, &root);
    CHECK(st == Q35_OK, "%s", q35_last_error());
    if (st) return;
    int def_full = default_of_variant("full"), def_small = default_of_variant("small");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(root, "vectors");
    CHECK(cJSON_IsArray(vs) && (quiet || cJSON_GetArraySize(vs) >= 40), "%s: vectors", path);
    const cJSON *v;
    cJSON_ArrayForEach(v, vs) {
        const char *name = cJSON_GetObjectItemCaseSensitive(v, "name")->valuestring;
        const char *variant = cJSON_GetObjectItemCaseSensitive(v, "variant")->valuestring;
        const cJSON *mj = cJSON_GetObjectItemCaseSensitive(v, "messages_json");
        const cJSON *tj = cJSON_GetObjectItemCaseSensitive(v, "tools_json");
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(v, "opts");
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(v, "expected");
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(v, "error");
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(op, "enable_thinking");
        q35_chat_opts o;
        o.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(op, "add_generation_prompt"));
        o.enable_thinking = cJSON_IsNull(th) ? -1 : cJSON_IsTrue(th);
        o.add_vision_id = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(op, "add_vision_id"));
        o.default_thinking = strcmp(variant, "full") == 0 ? def_full : def_small;
        char label[256];
        snprintf(label, sizeof label, "%s[%s,gen=%d,think=%d,vid=%d]", name, variant, o.add_generation_prompt,
                 o.enable_thinking, o.add_vision_id);
        char *out = NULL;
        st = q35_chat_render(mj->valuestring, cJSON_IsString(tj) ? tj->valuestring : NULL, &o, &out);
        int ok;
        if (exp) {
            ok = st == Q35_OK && out && strcmp(out, exp->valuestring) == 0;
            if (st) fprintf(stderr, "  %s: failed: %s\n", label, q35_last_error());
            else if (!ok) show_diff(label, exp->valuestring, out);
        } else {
            ok = st == Q35_ERR_TEMPLATE && out == NULL && strcmp(q35_last_error(), err->valuestring) == 0;
            if (!ok) fprintf(stderr, "  %s: want template error '%s', got status %d '%s'\n", label, err->valuestring,
                             (int)st, st ? q35_last_error() : "(rendered)");
        }
        free(out);
        n_vectors++;
        n_matched += ok;
        if (!quiet || !ok) printf("%s chat vector %s\n", ok ? "ok" : "not ok", label);
        if (!ok) t_fail_count++;
    }
    cJSON_Delete(root);
}

static void test_vectors(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/chat/vectors.json", test_data_dir());
    run_vectors(path, 0);
}

/* Extra vectors, e.g. make_chat_vectors.py --random N (one line per failure only). */
static void test_extra_vectors(void) {
    const char *p = getenv("Q35_CHAT_VECTORS");
    if (p && *p) run_vectors(p, 1);
}

/* ------------------------------------------------------------------------------- malformed input */
static void expect_fail(const char *msgs, const char *tools, q35_status want, const char *msg_part) {
    q35_chat_opts o = {1, -1, 0, 0};
    char *out = (char *)1;
    q35_status st = q35_chat_render(msgs, tools, &o, &out);
    CHECK(st == want && out == NULL && strstr(q35_last_error(), msg_part), "%s -> status %d '%s' (want %d '%s')", msgs,
          (int)st, q35_last_error(), (int)want, msg_part);
    if (st == Q35_OK) free(out);
}

static void test_format_errors(void) {
    expect_fail("", NULL, Q35_ERR_FORMAT, "messages: malformed JSON");
    expect_fail("[{\"role\":\"user\",\"content\":\"hi\"}", NULL, Q35_ERR_FORMAT, "messages: malformed JSON");
    expect_fail("[] x", NULL, Q35_ERR_FORMAT, "trailing data");
    expect_fail("\"hello\"", NULL, Q35_ERR_FORMAT, "messages: expected an array");
    expect_fail("42", NULL, Q35_ERR_FORMAT, "messages: expected an array");
    expect_fail("{\"msgs\":[]}", NULL, Q35_ERR_FORMAT, "needs a \"messages\" array");
    expect_fail("{\"messages\":{}}", NULL, Q35_ERR_FORMAT, "messages: expected an array");
    expect_fail("[\"hi\"]", NULL, Q35_ERR_FORMAT, "messages[0]: expected an object");
    expect_fail("[{\"content\":\"hi\"}]", NULL, Q35_ERR_FORMAT, "messages[0].role: missing");
    expect_fail("[{\"role\":null,\"content\":\"hi\"}]", NULL, Q35_ERR_FORMAT, "messages[0].role: missing");
    expect_fail("[{\"role\":3,\"content\":\"hi\"}]", NULL, Q35_ERR_FORMAT, "messages[0].role: expected a string");
    expect_fail("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"},{\"role\":\"user\",\"content\":5}]",
                NULL, Q35_ERR_FORMAT, "messages[2].content: expected a string or a list of parts");
    expect_fail("[{\"role\":\"user\",\"content\":{\"text\":\"x\"}}]", NULL, Q35_ERR_FORMAT,
                "messages[0].content: expected a string or a list of parts");
    expect_fail("[{\"role\":\"user\",\"content\":true}]", NULL, Q35_ERR_FORMAT, "messages[0].content: expected a string");
    expect_fail("[{\"role\":\"user\",\"content\":[\"x\"]}]", NULL, Q35_ERR_FORMAT, "messages[0].content[0]: expected an object");
    expect_fail("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":[1]}]}]", NULL, Q35_ERR_FORMAT,
                "messages[0].content[0].text: expected a string");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":{}}]", NULL,
                Q35_ERR_FORMAT, "messages[1].tool_calls: expected an array");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[1]}]", NULL, Q35_ERR_FORMAT,
                "messages[1].tool_calls[0]: expected an object");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":null}]}]", NULL,
                Q35_ERR_FORMAT, "messages[1].tool_calls[0].function: expected an object");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]", NULL,
                Q35_ERR_FORMAT, "messages[1].tool_calls[0].function.name: missing");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"name\":7}]}]", NULL,
                Q35_ERR_FORMAT, "messages[1].tool_calls[0].name: expected a string");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":[1]}]}]",
                NULL, Q35_ERR_FORMAT, "messages[1].tool_calls[0].arguments: expected an object or a JSON string");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                "\"arguments\":\"{\\\"a\\\": \"}}]}]",
                NULL, Q35_ERR_FORMAT, "messages[1].tool_calls[0].function.arguments: malformed JSON");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                "\"arguments\":\"[1, 2]\"}}]}]",
                NULL, Q35_ERR_FORMAT, "does not hold an object");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"}]", "{}", Q35_ERR_FORMAT, "tools: expected an array");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"}]", "[{}, 3]", Q35_ERR_FORMAT, "tools[1]: expected an object");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\"}]", "[", Q35_ERR_FORMAT, "tools: malformed JSON");
    /* what json.loads refuses but cJSON lets through, and what a C string cannot carry */
    expect_fail("[{\"role\":\"user\",\"content\":\"q\",\"x\":01}]", NULL, Q35_ERR_FORMAT, "malformed number '01'");
    expect_fail("[{\"role\":\"user\",\"content\":\"q\",\"x\":1.}]", NULL, Q35_ERR_FORMAT, "malformed number '1.'");
    expect_fail("[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]", NULL, Q35_ERR_FORMAT, "\\u0000");
    expect_fail("[{\"role\":\"user\",\"content\":\"a\tb\"}]", NULL, Q35_ERR_FORMAT, "control character 0x09");
    /* template refusals come with the template's own message */
    expect_fail("[]", NULL, Q35_ERR_TEMPLATE, "No messages provided.");
    expect_fail("{\"messages\":[]}", NULL, Q35_ERR_TEMPLATE, "No messages provided.");
    expect_fail("[{\"role\":\"tool\",\"content\":\"x\"}]", NULL, Q35_ERR_TEMPLATE, "No user query found in messages.");
    /* bad arguments */
    char *out = (char *)1;
    CHECK(q35_chat_render(NULL, NULL, NULL, &out) == Q35_ERR_ARG && out == NULL, "check");
    CHECK(q35_chat_render("[]", NULL, NULL, NULL) == Q35_ERR_ARG, "check");
    q35_chat_opts o = {1, 2, 0, 0};
    CHECK(q35_chat_render("[{\"role\":\"user\",\"content\":\"q\"}]", NULL, &o, &out) == Q35_ERR_ARG && out == NULL, "check");
}

static int render_eq(const char *msgs, const char *tools, const q35_chat_opts *o, const char *want) {
    char *out = NULL;
    q35_status st = q35_chat_render(msgs, tools, o, &out);
    int ok = st == Q35_OK && strcmp(out, want) == 0;
    if (!ok) {
        if (st) fprintf(stderr, "  render failed: %s\n", q35_last_error());
        else show_diff(msgs, want, out);
    }
    free(out);
    return ok;
}

static void test_extensions(void) {
    q35_chat_opts o = {0, -1, 0, 0};
    /* NULL opts: generation prompt on, the small-model default (thinking off) */
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\" Hello \"}]", NULL, NULL,
                    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"), "check");
    /* OpenAI arguments as a JSON string, empty string, whitespace; null message keys dropped */
    const char *want = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
                       "<function=f>\n<parameter=a>\n1.0\n</parameter>\n<parameter=b>\n{\"c\": [true, null, 2]}\n"
                       "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>\n"
                       "<tool_call>\n<function=h>\n</function>\n</tool_call><|im_end|>\n";
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":null,"
                    "\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
                    "\"{\\\"a\\\": 1.0, \\\"b\\\": {\\\"c\\\": [true, null, 2]}}\"}},"
                    "{\"function\":{\"name\":\"g\",\"arguments\":\"\"}},{\"name\":\"h\",\"arguments\":\" \\n\"}]}]",
                    NULL, &o, want), "check");
    /* object form; --tools overrides its tools; tools: null and [] mean none */
    const char *plain = "<|im_start|>user\nq<|im_end|>\n";
    CHECK(render_eq("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":null,\"x\":1}", NULL, &o, plain), "check");
    CHECK(render_eq("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"a\":1}]}", "[]", &o, plain), "check");
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\"q\"}]", "null", &o, plain), "check");
    char *out = NULL;
    CHECK(q35_chat_render("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"b\":1.50}]}", NULL, &o, &out) ==
          Q35_OK, "check");
    CHECK(out && strstr(out, "<tools>\n{\"b\": 1.5}\n</tools>"), "%s", out ? out : "");
    free(out);
    /* text parts that are not strings print as Python str() */
    CHECK(render_eq("[{\"role\":\"user\",\"content\":[{\"text\":1.0},{\"text\":null},{\"text\":false},{\"text\":7}]}]", NULL, &o,
                    "<|im_start|>user\n1.0NoneFalse7<|im_end|>\n"), "check");
    /* thinking on/off explicitly, either default */
    q35_chat_opts on = {1, 1, 0, 0}, off = {1, 0, 0, 1}, def_on = {1, -1, 0, 1};
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\"q\"}]", NULL, &on, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n"), "check");
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\"q\"}]", NULL, &def_on, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n"), "check");
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\"q\"}]", NULL, &off,
                    "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"), "check");
    /* invalid UTF-8 is passed through, trim only strips real whitespace */
    CHECK(render_eq("[{\"role\":\"user\",\"content\":\"\\u00a0\xff\xe3\x80 \"}]", NULL, &o, "<|im_start|>user\n\xff\xe3\x80<|im_end|>\n"), "check");
}

static void test_float_repr(void) {
    static const struct {
        double x;
        const char *s;
    } t[] = {
        {1.0, "1.0"}, {0.1, "0.1"}, {-0.0, "-0.0"}, {0.0, "0.0"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
        {1234567890123456.0, "1234567890123456.0"}, {12345678901234567.0, "1.2345678901234568e+16"},
        {0.0001, "0.0001"}, {0.00001, "1e-05"}, {1.5e-7, "1.5e-07"}, {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {1e22, "1e+22"}, {1e23, "1e+23"}, {0.3, "0.3"}, {0.1 + 0.2, "0.30000000000000004"}, {2.5, "2.5"},
        {100.0, "100.0"}, {123456.789e3, "123456789.0"}, {9007199254740993.0, "9007199254740992.0"},
        {-1.25e-300, "-1.25e-300"}, {1.0 / 3, "0.3333333333333333"}, {2.0 / 3, "0.6666666666666666"},
        {8.98846567431158e307, "8.98846567431158e+307"}, {4.35e-05, "4.35e-05"}, {1e-4, "0.0001"},
        {9.999999999999999e22, "1e+23"}, {0x1p-1017, "7.120236347223045e-307"},
        {0x1p-1007, "7.291122019556398e-304"}, {5e-310, "5e-310"}, {2.0, "2.0"}, {1024.0, "1024.0"},
        {0.5, "0.5"}, {2.220446049250313e-16, "2.220446049250313e-16"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        q35_py_float_repr(t[i].x, buf);
        CHECK(strcmp(buf, t[i].s) == 0, "repr(%.17g): want %s, got %s", t[i].x, t[i].s, buf);
    }
    q35_py_float_repr(1.0 / 0.0, buf);
    CHECK(strcmp(buf, "inf") == 0, "check");
    q35_py_float_repr(-1.0 / 0.0, buf);
    CHECK(strcmp(buf, "-inf") == 0, "check");
}

/* Random doubles (all bit patterns) must read back to themselves from the shortest repr. */
static void test_float_repr_roundtrip(void) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    char buf[32];
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double x;
        memcpy(&x, &s, sizeof x);
        if (isnan(x) || isinf(x)) continue;
        q35_py_float_repr(x, buf);
        if (strtod(buf, NULL) != x) {
            CHECK(0, "repr(%.17g) = %s does not read back", x, buf);
            break;
        }
    }
}

/* q35 render, when the CLI binary is there (make test sets Q35_BIN). */
static void test_cli(void) {
    const char *bin = getenv("Q35_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        printf("# test_cli: skipped, no q35 binary (Q35_BIN)\n");
        return;
    }
    char dir[1024], path[1200], cmd[4096];
    snprintf(dir, sizeof dir, "%s/chat-render", test_work_dir());
    mkdir(test_work_dir(), 0755);
    mkdir(dir, 0755);
    /* a checkpoint dir with the full (thinking-on) template */
    snprintf(path, sizeof path, "%s/ckpt-full", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/ckpt-full/chat_template.jinja", dir);
    char *tpl = read_text("qwen3.5-chat_template.jinja");
    FILE *f = fopen(path, "wb");
    CHECK(tpl && f, "check");
    if (!tpl || !f) {
        free(tpl);
        if (f) fclose(f);
        return;
    }
    fputs(tpl, f);
    fclose(f);
    free(tpl);
    const char *msgs = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"What?\"}]}],"
                       "\"tools\":[{\"name\":\"f\",\"x\":1.0}]}";
    snprintf(path, sizeof path, "%s/messages.json", dir);
    f = fopen(path, "wb");
    CHECK(f != NULL, "check");
    if (!f) return;
    fputs(msgs, f);
    fclose(f);
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"--messages %s/messages.json", "ckpt-less: small-model default (off)"},
        {"-m %s/ckpt-full --messages %s/messages.json", "full template: on"},
        {"-m %s/ckpt-full --no-think --add-vision-id --messages %s/messages.json", "off + vision id"},
        {"--no-generation-prompt --messages %s/messages.json", "no gen"},
    };
    const char *tools_block = "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
                              "{\"name\": \"f\", \"x\": 1.0}\n</tools>";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048];
        if (i == 0 || i == 3) snprintf(args, sizeof args, cases[i].args, dir);
        else snprintf(args, sizeof args, cases[i].args, dir, dir);
        snprintf(cmd, sizeof cmd, "'%s' render %s", bin, args);
        FILE *p = popen(cmd, "r");
        CHECK(p != NULL, "check");
        if (!p) continue;
        char out[8192];
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = 0;
        int rc = pclose(p);
        CHECK(rc == 0, "%s: exit %d", cmd, rc);
        CHECK(strncmp(out, tools_block, strlen(tools_block)) == 0, "%s", cases[i].want);
        const char *user = i == 2 ? "<|im_start|>user\nPicture 1: <|vision_start|><|image_pad|><|vision_end|>What?<|im_end|>\n"
                                  : "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What?<|im_end|>\n";
        const char *tail = i == 1 ? "<|im_start|>assistant\n<think>\n"
                           : i == 3 ? ""
                                    : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
        char want[512];
        snprintf(want, sizeof want, "%s%s", user, tail);
        size_t wl = strlen(want);
        CHECK(n >= wl && strcmp(out + n - wl, want) == 0, "%s: output ends with '%s'", cases[i].want, n >= 80 ? out + n - 80 : out);
    }
    /* errors: exit status 1 with the message on stderr; usage errors 2 */
    snprintf(cmd, sizeof cmd, "'%s' render --messages %s/nope.json 2>/dev/null", bin, dir);
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "check");
    snprintf(cmd, sizeof cmd, "'%s' render --bogus 2>/dev/null", bin);
    rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "check");
    snprintf(cmd, sizeof cmd, "echo '[{\"role\":\"system\",\"content\":[{\"image\":\"x\"}]},{\"role\":\"user\",\"content\":\"q\"}]' | '%s' render --messages - 2>&1", bin);
    FILE *p = popen(cmd, "r");
    if (p) {
        char out[1024];
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = 0;
        rc = pclose(p);
        CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && strstr(out, "System message cannot contain images."), "%s", out);
    }
}

int main(void) {
    RUN(test_default_thinking);
    RUN(test_vectors);
    printf("# chat vectors: %d of %d match transformers\n", n_matched, n_vectors);
    if (getenv("Q35_CHAT_VECTORS")) {
        n_matched = n_vectors = 0;
        RUN(test_extra_vectors);
        printf("# extra chat vectors (%s): %d of %d match\n", getenv("Q35_CHAT_VECTORS"), n_matched, n_vectors);
    }
    RUN(test_format_errors);
    RUN(test_extensions);
    RUN(test_float_repr);
    RUN(test_float_repr_roundtrip);
    RUN(test_cli);
    TEST_EXIT();
}
