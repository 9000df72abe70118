/* The q35 binary as a user runs it ($Q35_BIN): greedy ids and dumped logits equal the reference,
 * bad input gives one line on stderr and a non-zero status, every subcommand has --help. */
#include <cjson/cJSON.h>
#include <sys/wait.h>

#include "core/file.h"
#include "formats/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/mm.h"
#include "test.h"

static char bin[1024];

/* Run cmd (stdout to out_path, stderr to err_path); returns the exit status. */
static int run(const char *cmd, const char *out_path, const char *err_path) {
    char full[8192];
    snprintf(full, sizeof full, "(%s) > %s 2> %s < /dev/null", cmd, out_path, err_path);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static char *slurp(const char *path) {
    char *b;
    size_t n;
    if (q35_read_file(path, 1u << 26, &b, &n)) return strdup("");
    return b;
}

static char out_p[1100], err_p[1100];

static void test_generate_matches_reference(void) {
    char dir[1024], refp[1100], ids[4096] = "", cmd[8192];
    snprintf(dir, sizeof dir, "%s/models/tiny-vl", test_data_dir());
    snprintf(refp, sizeof refp, "%s/reference.safetensors", dir);
    q35_st_index ref;
    if (q35_st_open_file(refp, &ref)) { CHECK(0, "%s", q35_last_error()); return; }
    const q35_tensor *pi = q35_st_find(&ref, "prompt.0.ids"), *gr = q35_st_find(&ref, "prompt.0.greedy"),
                     *lg = q35_st_find(&ref, "prompt.0.logits");
    const int T = (int)pi->shape[0], G = (int)gr->shape[0], V = (int)lg->shape[1];
    for (int i = 0; i < T; i++) snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", ((const int32_t *)pi->data)[i]);
    char dump[1100];
    snprintf(dump, sizeof dump, "%s/cli-logits.bin", test_work_dir());
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids %s --print-ids --greedy -n %d --ctx 256 --dump-logits %s", bin, dir, ids, G, dump);
    int rc = run(cmd, out_p, err_p);
    CHECK(rc == 0, "exit %d: %s", rc, slurp(err_p));
    char *out = slurp(out_p), *p = out;
    int k = 0, ok = 1;
    for (; k < G; k++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v != ((const int32_t *)gr->data)[k]) ok = 0;
        p = end;
    }
    CHECK(ok && k == G, "greedy ids from the CLI differ from the reference (%d read): %s", k, out);
    free(out);
    char *err = slurp(err_p);
    CHECK(strstr(err, "tok/s") != NULL, "speed report expected on stderr: %s", err);
    free(err);
    /* --dump-logits: [steps][V] float32; step 0 = logits of the last prompt position. */
    char *d;
    size_t n;
    if (q35_read_file(dump, 1u << 28, &d, &n) == Q35_OK) {
        CHECK(n == (size_t)G * V * sizeof(float), "dump has %zu bytes, expected %zu", n, (size_t)G * V * sizeof(float));
        const float *got = (const float *)d, *want = (const float *)lg->data + (size_t)(T - 1) * V;
        float md = 0;
        for (int i = 0; i < V; i++) md = fabsf(got[i] - want[i]) > md ? fabsf(got[i] - want[i]) : md;
        CHECK(md < 1e-4f, "dumped logits differ from the reference by %g", md);
        free(d);
    } else {
        CHECK(0, "no dump written: %s", q35_last_error());
    }
    /* The prompt plus the generation must fit in --ctx: a clear error, no truncation. */
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids %s --print-ids --greedy -n 100 --ctx %d", bin, dir, ids, T + 10);
    rc = run(cmd, out_p, err_p);
    err = slurp(err_p);
    CHECK(rc != 0 && strstr(err, "context") && strstr(err, "q35: ") == err, "overflow: exit %d, stderr '%s'", rc, err);
    free(err);
    q35_st_close(&ref);
}

static void test_bad_input(void) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s generate -m /nonexistent/dir --prompt-ids 1,2 --print-ids", bin);
    int rc = run(cmd, out_p, err_p);
    char *err = slurp(err_p);
    CHECK(rc == 1 && strncmp(err, "q35: ", 5) == 0 && strstr(err, "/nonexistent/dir") && strchr(err, '\n') == err + strlen(err) - 1,
          "missing model: exit %d, stderr '%s'", rc, err);
    free(err);
    snprintf(cmd, sizeof cmd, "%s generate --bogus", bin);
    rc = run(cmd, out_p, err_p);
    CHECK(rc == 2, "unknown option: exit %d", rc);
    snprintf(cmd, sizeof cmd, "%s frobnicate", bin);
    rc = run(cmd, out_p, err_p);
    CHECK(rc == 2, "unknown command: exit %d", rc);
    snprintf(cmd, sizeof cmd, "%s generate -m %s/models/tiny-vl --prompt-ids 1,x --print-ids", bin, test_data_dir());
    rc = run(cmd, out_p, err_p);
    CHECK(rc != 0, "bad ids: exit %d", rc);
    snprintf(cmd, sizeof cmd, "%s generate -m %s/models/tiny-vl --prompt-ids 99999999 --print-ids -n 2", bin, test_data_dir());
    rc = run(cmd, out_p, err_p);
    err = slurp(err_p);
    CHECK(rc == 1 && strstr(err, "vocabulary"), "id outside the vocabulary: exit %d, '%s'", rc, err);
    free(err);
}

/* The demo model answers through the chat template, on a pipe, across /reset, /system and /think. */
static void test_chat_piped(void) {
    char cmd[4096], in_p[1100];
    snprintf(in_p, sizeof in_p, "%s/chat.in", test_work_dir());
    FILE *f = fopen(in_p, "w");
    fputs("Tell me a fortune.\n/think off\nSay something wise.\n/reset\n/system You are terse.\nGive me a quote.\n/bogus\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s chat -m %s/models/talker --greedy -n 40 < %s > %s 2> %s", bin, test_data_dir(), in_p, out_p, err_p);
    int st = system(cmd), rc = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
    char *out = slurp(out_p), *err = slurp(err_p);
    CHECK(rc == 0, "chat exit %d: %s", rc, err);
    /* Greedy answer of the first turn, as transformers gives it (tools/oracle, docs/talker.md). */
    CHECK(strstr(out, "The only thing that is not worth doing is worth doing.") == out, "first answer: '%.200s'", out);
    int lines = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    CHECK(lines >= 3, "three answers expected, got: %s", out);
    CHECK(strstr(err, "(conversation reset)") && strstr(err, "(thinking off)") && strstr(err, "unknown command"), "stderr: %s", err);
    free(out);
    free(err);
    /* The same first answer through generate, and through the tokenizer CLI round trip. */
    snprintf(cmd, sizeof cmd, "%s generate -m %s/models/talker -p 'Tell me a fortune.' --greedy -q", bin, test_data_dir());
    rc = run(cmd, out_p, err_p);
    out = slurp(out_p);
    CHECK(rc == 0 && strstr(out, "The only thing that is not worth doing is worth doing.") == out, "generate: %s", out);
    free(out);
}

/* q35 quantize writes a GGUF that loads and answers like the checkpoint (greedy, talker): --layout gguf
 * (llama.cpp's) answers the reference text; --layout q35 (the default) answers exactly what the
 * checkpoint answers with the same --weights converted at load. */
static void test_quantize(void) {
    char cmd[8192];
    const char *w[] = {"q8", "q4"}, *layout[] = {"gguf", "q35"};
    for (int i = 0; i < 2; i++)
        for (int l = 0; l < 2; l++) {
            snprintf(cmd, sizeof cmd,
                     "mkdir -p %s/gguf-%s-%s && cp %s/models/talker/tokenizer.json %s/models/talker/chat_template.jinja %s/gguf-%s-%s/ && "
                     "%s quantize -m %s/models/talker -o %s/gguf-%s-%s/talker.gguf --weights %s --layout %s && "
                     "%s generate -m %s/gguf-%s-%s/talker.gguf -p 'Tell me a fortune.' --greedy -q",
                     test_work_dir(), w[i], layout[l], test_data_dir(), test_data_dir(), test_work_dir(), w[i], layout[l], bin, test_data_dir(),
                     test_work_dir(), w[i], layout[l], w[i], layout[l], bin, test_work_dir(), w[i], layout[l]);
            int rc = run(cmd, out_p, err_p);
            char *out = slurp(out_p), *err = slurp(err_p);
            if (l == 0) {
                CHECK(rc == 0 && strstr(out, "The only thing that is not worth doing is worth doing.") == out, "quantize %s: exit %d, '%s' %s", w[i], rc,
                      out, err);
            } else {
                snprintf(cmd, sizeof cmd, "%s generate -m %s/models/talker --weights %s -p 'Tell me a fortune.' --greedy -q", bin, test_data_dir(), w[i]);
                int rc2 = run(cmd, out_p, err_p);
                char *want = slurp(out_p);
                CHECK(rc == 0 && rc2 == 0 && strcmp(out, want) == 0 && strlen(out) > 10, "quantize %s --layout q35: exit %d, '%s', expected '%s' %s", w[i], rc,
                      out, want, err);
                free(want);
            }
            free(out);
            free(err);
        }
    /* From a GGUF file: llama.cpp's layout -> q35's, same answer. */
    snprintf(cmd, sizeof cmd,
             "%s quantize -m %s/gguf-q8-gguf/talker.gguf -o %s/gguf-q8-gguf/talker.q35.gguf --weights native && "
             "%s generate -m %s/gguf-q8-gguf/talker.q35.gguf -p 'Tell me a fortune.' --greedy -q",
             bin, test_work_dir(), test_work_dir(), bin, test_work_dir());
    int rc = run(cmd, out_p, err_p);
    char *out = slurp(out_p), *err = slurp(err_p);
    CHECK(rc == 0 && strstr(out, "The only thing that is not worth doing is worth doing.") == out, "quantize GGUF -> q35: exit %d, '%s' %s", rc, out, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s quantize -m %s/models/talker -o /nonexistent/x.gguf --weights q4", bin, test_data_dir());
    CHECK(run(cmd, out_p, err_p) == 1, "an unwritable output must fail");
    snprintf(cmd, sizeof cmd, "%s quantize -m %s/models/talker -o %s/x.gguf --weights q4 --layout llama", bin, test_data_dir(), test_work_dir());
    CHECK(run(cmd, out_p, err_p) == 2, "--layout llama must be refused");
    snprintf(cmd, sizeof cmd, "%s quantize -m %s/models/talker -o %s/x.gguf --weights native --layout gguf", bin, test_data_dir(), test_work_dir());
    CHECK(run(cmd, out_p, err_p) == 2, "--weights native --layout gguf must be refused");
    snprintf(cmd, sizeof cmd, "%s quantize -m %s/gguf-q8-gguf/talker.q35.gguf -o %s/x.gguf --weights q8 --layout gguf", bin, test_work_dir(), test_work_dir());
    CHECK(run(cmd, out_p, err_p) == 2, "a q35-layout source for --layout gguf must be refused");
}

/* q35 bench --json on a tiny checkpoint: one JSON object whose counts are the arguments, speeds
 * positive, and byte counts those of the model (the KV cache a generated token reads: the mean
 * over positions n_prompt .. n_prompt + n_gen - 1 of (p + 1) rows). */
static void test_bench_json(void) {
    char dir[1024], cmd[8192];
    snprintf(dir, sizeof dir, "%s/models/tiny-vl", test_data_dir());
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 4 --reps 2 -t 1 --json", bin, dir);
    int rc = run(cmd, out_p, err_p);
    CHECK(rc == 0, "exit %d: %s", rc, slurp(err_p));
    char *out = slurp(out_p);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL, "not one JSON object: %s", out);
    q35_model *m = NULL;
    q35_model_info info = {0};
    if (q35_model_load(dir, &m) == Q35_OK) q35_model_get_info(m, &info);
    q35_model_free(m);
    if (j) {
        const double pt = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "prompt_tokens")), gt = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "gen_tokens"));
        const double pm = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "prompt_tps"), "median"));
        const double gm = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "gen_tps"), "median"));
        const double kv = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "kv_bytes_per_token"));
        const double bpt = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "bytes_per_token"));
        const double st = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "state_bytes"));
        CHECK(pt == 8 && gt == 4, "token counts %g %g", pt, gt);
        CHECK(pm > 0 && gm > 0, "speeds %g %g", pm, gm);
        CHECK(info.kv_bytes_per_pos > 0 && kv == info.kv_bytes_per_pos * (8 + 2.5), "kv bytes per token %g, per position %zu", kv,
              info.kv_bytes_per_pos);
        CHECK(bpt == (double)info.bytes_per_token && st == (double)info.state_bytes, "bytes per token %g, state %g", bpt, st);
        const char *kern = cJSON_GetStringValue(cJSON_GetObjectItem(j, "kernels"));
        CHECK(kern && !strcmp(kern, q35_isa_describe()), "kernels \"%s\", this process uses \"%s\"", kern ? kern : "(none)", q35_isa_describe());
        cJSON_Delete(j);
    }
    free(out);
#if defined(__x86_64__)
    /* Q35_AVXVNNI=0 leaves AVX-VNNI out of the AVX2 level (to run as the AVX2 CPUs without it) */
    if (q35_isa_best() >= Q35_ISA_AVX2)
        for (int off = 0; off < 2; off++) {
            snprintf(cmd, sizeof cmd, "Q35_ISA=avx2 Q35_AVXVNNI=%d %s bench -m %s -p 4 -n 2 --reps 1 -t 1 --json", !off, bin, dir);
            rc = run(cmd, out_p, err_p);
            CHECK(rc == 0, "exit %d: %s", rc, slurp(err_p));
            out = slurp(out_p);
            j = cJSON_Parse(out);
            const char *kern = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "kernels")) : NULL;
            const char *want = !off && q35_cpu_has_avxvnni() ? "avx2 (avx-vnni)" : "avx2";
            CHECK(kern && !strcmp(kern, want), "Q35_AVXVNNI=%d: kernels \"%s\", expected \"%s\"", !off, kern ? kern : "(none)", want);
            cJSON_Delete(j);
            free(out);
        }
#endif
}

/* --kv-cache f16: the talker's greedy answer is the fp32 one; bench counts half the cache bytes;
 * any other value is refused with a one-line error. */
static void test_kv_cache_option(void) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s generate -m %s/models/talker -p 'Tell me a fortune.' --greedy -q --kv-cache f16", bin, test_data_dir());
    int rc = run(cmd, out_p, err_p);
    char *out = slurp(out_p);
    CHECK(rc == 0 && strstr(out, "The only thing that is not worth doing is worth doing.") == out, "generate --kv-cache f16: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s generate -m %s/models/talker -p hi --kv-cache f8", bin, test_data_dir());
    rc = run(cmd, out_p, err_p);
    char *err = slurp(err_p);
    CHECK(rc == 2 && strstr(err, "--kv-cache expects f32 or f16, got 'f8'"), "exit %d: %s", rc, err);
    free(err);
    snprintf(cmd, sizeof cmd, "%s bench -m %s/models/tiny-vl -p 8 -n 4 --reps 1 -t 1 --json --kv-cache f16", bin, test_data_dir());
    rc = run(cmd, out_p, err_p);
    out = slurp(out_p);
    cJSON *j = cJSON_Parse(out);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/tiny-vl", test_data_dir());
    q35_model *m = NULL;
    q35_model_info info = {0};
    if (q35_model_load(dir, &m) == Q35_OK) q35_model_get_info(m, &info);
    q35_model_free(m);
    CHECK(rc == 0 && j, "exit %d: %s", rc, out);
    if (j) {
        const cJSON *kc = cJSON_GetObjectItem(j, "kv_cache");
        const double kv = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "kv_bytes_per_token"));
        CHECK(cJSON_IsString(kc) && !strcmp(kc->valuestring, "f16"), "kv_cache field");
        CHECK(info.kv_bytes_per_pos > 0 && kv == info.kv_bytes_per_pos / 2 * (8 + 2.5), "f16 kv bytes per token %g, fp32 per position %zu", kv,
              info.kv_bytes_per_pos);
        cJSON_Delete(j);
    }
    free(out);
}

static void test_help(void) {
    const char *cmds[] = {"", "generate", "chat", "tokenize", "detokenize", "render", "bench", "quantize"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s %s --help", bin, cmds[i]);
        int rc = run(cmd, out_p, err_p);
        char *out = slurp(out_p);
        CHECK(rc == 0 && strstr(out, "usage") != NULL, "q35 %s --help: exit %d", cmds[i], rc);
        free(out);
    }
}

int main(void) {
    const char *b = getenv("Q35_BIN");
    snprintf(bin, sizeof bin, "%s", b ? b : "build/q35");
    snprintf(out_p, sizeof out_p, "%s/cli.out", test_work_dir());
    snprintf(err_p, sizeof err_p, "%s/cli.err", test_work_dir());
    RUN(test_generate_matches_reference);
    RUN(test_bad_input);
    RUN(test_chat_piped);
    RUN(test_quantize);
    RUN(test_bench_json);
    RUN(test_kv_cache_option);
    RUN(test_help);
    TEST_EXIT();
}
