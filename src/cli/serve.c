/* q35 serve: an OpenAI-compatible HTTP server (src/server/) for one model, until SIGINT/SIGTERM. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "server/engine.h"
#include "server/http.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 serve -m DIR [options]\n"
            "Serves the OpenAI API (POST /v1/chat/completions, POST /v1/completions, GET /v1/models), GET /health\n"
            "and a chat page at / until SIGINT or SIGTERM.\n\n"
            "  -m, --model DIR       checkpoint directory (config.json, *.safetensors, tokenizer.json)\n"
            "  --host ADDR           address to listen on (default 127.0.0.1)\n"
            "  --port N              port (default 8080; 0: any free port, printed at start)\n"
            "  --api-key KEY         require 'Authorization: Bearer KEY' on /v1/ routes\n"
            "  --ctx N               context per request in tokens (default 4096, at most the model's maximum)\n"
            "  --kv-cache T          f32 (default: the exact path) or f16 (half the KV cache memory)\n"
            "  --parallel N          requests decoding at once, interleaved token by token (default 4)\n"
            "  --max-body BYTES      largest request body accepted (default 16777216)\n"
            "  -t, --threads N       threads (default: all cores)\n"
            "  --weights W           native (as stored), bf16, q8 or q4: convert the matrices at load\n"
            "  --mmap                map the weight files (default: read them into memory)\n"
            "  --cache-mib N         memory for checkpoints of earlier prompts, shared by all requests, MiB\n"
            "                        (default 512; 0: each session resumes only from its own last prompt)\n"
            "  --no-reuse            evaluate every prompt from the start (the output is the same, bit for bit)\n"
            "  --image-size WxH      images (image_url data: URLs) resized to exactly W x H (multiples of 32)\n"
            "  --max-image-tokens N  at most N tokens per image (default: the preprocessor's sizing)\n"
            "  -v, --verbose         log every request on stderr\n");
}

static int verbose;
static void log_sink(q35_log_level level, const char *msg, void *user) {
    (void)user;
    if (level <= Q35_LOG_WARN || (verbose && level <= Q35_LOG_INFO)) fprintf(stderr, "q35: %s\n", msg);
}

/* The model id: the last component of the model path. */
static void model_id_of(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/') s--;
    snprintf(out, cap, "%.*s", (int)(n - s), path + s);
}

int cmd_serve(int argc, char **argv) {
    const char *dir = NULL, *host = "127.0.0.1", *api_key = NULL;
    long port = 8080, parallel = 4, max_body = 16 << 20;
    char side_buf[4096];
    cli_gen g;
    cli_gen_defaults_for_args(&g, argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads") || !strcmp(a, "--ctx") || !strcmp(a, "-c") || !strcmp(a, "--kv-cache") ||
                   !strcmp(a, "--weights") ||
                   !strcmp(a, "--mmap") || !strcmp(a, "--cache-mib") || !strcmp(a, "--no-reuse") || !strcmp(a, "--image-size") ||
                   !strcmp(a, "--max-image-tokens")) {
            if (cli_gen_option(&g, argc, argv, &i) < 0) return 2;
        } else if (val && (!strcmp(a, "-m") || !strcmp(a, "--model"))) {
            dir = argv[++i];
        } else if (val && !strcmp(a, "--host")) {
            host = argv[++i];
        } else if (!strcmp(a, "--port")) {
            if (cli_parse_long(val, a, 0, 65535, &port)) return 2;
            i++;
        } else if (val && !strcmp(a, "--api-key")) {
            api_key = argv[++i];
        } else if (!strcmp(a, "--parallel")) {
            if (cli_parse_long(val, a, 1, 64, &parallel)) return 2;
            i++;
        } else if (!strcmp(a, "--max-body")) {
            if (cli_parse_long(val, a, 1024, 1L << 30, &max_body)) return 2;
            i++;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = 1;
        } else {
            cli_error("serve: unknown or incomplete option '%s' (see q35 serve --help)", a);
            return 2;
        }
    }
    if (!dir) {
        cli_error("serve: need -m DIR (see q35 serve --help)");
        return 2;
    }
    if (api_key && !*api_key) {
        cli_error("serve: --api-key must not be empty");
        return 2;
    }
    q35_set_log(log_sink, NULL);
    const char *model_path = dir;
    dir = cli_side_dir(model_path, side_buf, sizeof side_buf);
    int rc = 1;
    q35_tokenizer *tok = NULL;
    q35_model *model = NULL;
    srv_engine *engine = NULL;
    srv_http *http = NULL;
    q35_prefix_cache *cache = NULL;
    q35_image_proc *image_proc = NULL;
    q35_status st;
    /* every thread started from here on inherits the blocked signals; main waits for them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((st = q35_tokenizer_load(dir, &tok))) { rc = cli_fail("", st); goto done; }
    if ((st = cli_load_model(model_path, &g.load, &model))) { rc = cli_fail("", st); goto done; }
    /* images: the checkpoint's preprocessor (the same sizing as q35 generate --image) */
    if (q35_model_has_vision(model, NULL)) {
        if ((st = q35_image_proc_load(dir, &image_proc))) { rc = cli_fail("image preprocessor", st); goto done; }
        if ((st = q35_image_proc_check(image_proc, model))) { rc = cli_fail(dir, st); goto done; }
        if ((st = q35_image_proc_set_limits(image_proc, g.image_w, g.image_h, g.max_image_tokens))) { rc = cli_fail("image options", st); goto done; }
    }
    q35_model_info info;
    q35_model_get_info(model, &info);
    if (g.n_ctx > info.max_ctx) {
        cli_error("--ctx %d is more than the model's maximum of %d tokens", g.n_ctx, info.max_ctx);
        goto done;
    }
    cli_stops stops;
    cli_stops_init(&stops, dir, tok);
    cache = cli_prefix_cache(&g, model);
    srv_engine_opts eo = {g.n_ctx, (int)parallel, 64, g.reuse, cache, 512, g.kv_type};
    if ((st = srv_engine_new(model, tok, stops.ids, stops.n, &eo, &engine))) { rc = cli_fail("", st); goto done; }
    char model_id[256];
    model_id_of(model_path, model_id, sizeof model_id);
    srv_http_opts ho = {0};
    ho.host = host;
    ho.port = (int)port;
    ho.api_key = api_key;
    ho.max_body = (size_t)max_body;
    ho.max_connections = 64;
    ho.model_id = model_id;
    ho.engine = engine;
    ho.req.defaults = g.sp; /* generation_config.json's sampling, with the OpenAI penalty defaults */
    ho.req.defaults.presence_penalty = 0;
    ho.req.defaults.repetition_penalty = 1;
    ho.req.default_thinking = cli_template_default_thinking(dir);
    ho.req.has_vision = q35_model_has_vision(model, NULL);
    ho.req.image_proc = image_proc;
    ho.req.model = model;
    ho.req.max_image_bytes = (size_t)max_body;
    ho.req.tok = tok;
    ho.req.n_ctx = srv_engine_ctx(engine);
    if ((st = srv_http_start(&ho, &http))) { rc = cli_fail("serve", st); goto done; }
    fprintf(stderr, "q35 serve: %s on http://%s%s%s:%d/ (context %d, %ld parallel); Ctrl-C stops\n", model_id, strchr(host, ':') ? "[" : "",
            host, strchr(host, ':') ? "]" : "", srv_http_port(http), ho.req.n_ctx, parallel);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "q35 serve: %s, stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    rc = 0;
done:
    srv_http_stop(http);
    srv_engine_free(engine);
    q35_prefix_cache_free(cache);
    q35_image_proc_free(image_proc);
    q35_model_free(model);
    q35_tokenizer_free(tok);
    q35_set_log(NULL, NULL);
    return rc;
}
