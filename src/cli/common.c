#include "cli/common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "formats/json.h"

int cli_parse_long(const char *s, const char *opt, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        cli_error("%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_kv_type(const char *s, q35_kv_type *out) {
    if (s && !strcmp(s, "f32")) *out = Q35_KV_F32;
    else if (s && !strcmp(s, "f16")) *out = Q35_KV_F16;
    else {
        cli_error("--kv-cache expects f32 or f16, got '%s'", s ? s : "");
        return -1;
    }
    return 0;
}

int cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = s ? strtof(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        cli_error("%s expects a number in [%g, %g], got '%s'", opt, lo, hi, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_ids(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',' && *end != ' ')) {
            cli_error("bad token id list '%s': expected non-negative integers separated by commas", s);
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) { free(v); return -1; }
            v = nv;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

const char *cli_side_dir(const char *model_path, char *buf, size_t cap) {
    if (!model_path) return NULL;
    struct stat st;
    if (stat(model_path, &st) != 0 || !S_ISREG(st.st_mode)) return model_path;
    snprintf(buf, cap, "%s", model_path);
    char *slash = strrchr(buf, '/');
    if (!slash) return ".";
    if (slash == buf) slash[1] = 0;
    else *slash = 0;
    return buf;
}

int cli_template_default_thinking(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        static char buf[1 << 18];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        return q35_chat_template_default_thinking(buf);
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "rb");
    if (!f) return 0;
    char *buf = malloc(1 << 22);
    int r = 0;
    if (buf) {
        size_t n = fread(buf, 1, (1 << 22) - 1, f);
        buf[n] = 0;
        cJSON *j = cJSON_ParseWithLength(buf, n);
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
        if (cJSON_IsString(ct)) r = q35_chat_template_default_thinking(ct->valuestring);
        cJSON_Delete(j);
        free(buf);
    }
    fclose(f);
    return r;
}

static void add_stop(cli_stops *s, int32_t id) {
    if (id < 0 || cli_is_stop(s, id) || s->n >= 16) return;
    s->ids[s->n++] = id;
}

static void add_eos_of(cli_stops *s, const char *path, int text_config) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char *buf = malloc(1 << 20);
    if (buf) {
        size_t n = fread(buf, 1, (1 << 20) - 1, f);
        cJSON *j = cJSON_ParseWithLength(buf, n);
        for (int pass = 0; pass < 2 && j; pass++) {
            const cJSON *o = pass == 0 ? j : (text_config ? cJSON_GetObjectItemCaseSensitive(j, "text_config") : NULL);
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "eos_token_id"), *v;
            if (q35_json_is_int_in(e, 0, 1 << 30)) add_stop(s, (int32_t)e->valuedouble);
            else if (cJSON_IsArray(e)) cJSON_ArrayForEach(v, e) if (q35_json_is_int_in(v, 0, 1 << 30)) add_stop(s, (int32_t)v->valuedouble);
        }
        cJSON_Delete(j);
        free(buf);
    }
    fclose(f);
}

void cli_stops_init(cli_stops *s, const char *dir, const q35_tokenizer *tok) {
    s->n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    add_eos_of(s, path, 1);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    add_eos_of(s, path, 0);
    if (tok) {
        add_stop(s, q35_token_id(tok, "<|im_end|>"));
        add_stop(s, q35_token_id(tok, "<|endoftext|>"));
    }
}

int cli_is_stop(const cli_stops *s, int32_t id) {
    for (int i = 0; i < s->n; i++)
        if (s->ids[i] == id) return 1;
    return 0;
}

void cli_gen_defaults(cli_gen *g, const char *dir) {
    memset(g, 0, sizeof *g);
    q35_sampler_default_params(&g->sp);
    int found = 0;
    if (dir && q35_sampler_params_from_dir(dir, &g->sp, &found)) cli_error("warning: %s (using defaults)", q35_last_error());
    g->sp.seed = (uint64_t)time(NULL);
    g->n_predict = 256;
    g->n_ctx = 4096;
    g->think = -1;
    g->load.weights = NULL;
    g->load.load = 1;
    g->reuse = 1;
    g->cache_mib = 512;
}

void cli_gen_defaults_for_args(cli_gen *g, int argc, char **argv) {
    const char *model = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) model = argv[i + 1];
    char side_buf[4096];
    cli_gen_defaults(g, cli_side_dir(model, side_buf, sizeof side_buf));
}

void cli_gen_help(FILE *f) {
    fprintf(f,
            "  -n N                  max tokens to generate (default 256)\n"
            "  --temp T              temperature; 0 = argmax after penalties (default: generation_config.json, else 1.0)\n"
            "  --top-k K             keep the K most likely tokens; 0 = off (default 20)\n"
            "  --top-p P             nucleus sampling; 1 = off (default 1.0)\n"
            "  --min-p P             drop tokens below P x the best probability; 0 = off (default 0)\n"
            "  --presence-penalty X  subtract X from every token already generated (default 2.0)\n"
            "  --repeat-penalty X    CTRL repetition penalty over generated tokens; 1 = off (default 1.0)\n"
            "  --greedy              argmax decoding with no penalties (what transformers' greedy search does)\n"
            "  --seed S              random seed (default: time); the same seed repeats a run\n"
            "  --ctx N               context size in tokens (default 4096, at most the model's maximum)\n"
            "  --kv-cache T          f32 (default: the exact path) or f16: the attention KV cache in halves,\n"
            "                        half the memory and faster generation at long contexts\n"
            "  -t, --threads N       threads (default: all cores)\n"
            "  --weights W           native (as stored), bf16, q8 or q4: convert the matrices at load\n"
            "  --mmap                map the weight files (default: read them into memory)\n"
            "  --image-size WxH      images resized to exactly W x H (multiples of 32; 1024x576 = 576 tokens)\n"
            "  --max-image-tokens N  at most N tokens per image (scaled down to fit)\n"
            "  --think | --no-think  thinking mode on / off (default: the chat template's; off for 0.8B/2B)\n"
            "  --session FILE        load the conversation (state, tokens, messages) from FILE when it exists\n"
            "                        and save it there after every answer\n"
            "  --cache-mib N         memory for checkpoints of earlier prompts, MiB (default 512; 0 = only\n"
            "                        the session's own latest exact point)\n"
            "  --no-reuse            evaluate every prompt from the start (the output is the same, bit for bit)\n");
}

int cli_gen_option(cli_gen *g, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    long l;
#define TAKE() ((*i)++, val)
    if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (cli_parse_long(TAKE(), a, 0, 1 << 30, &l)) return -1;
        g->n_predict = (int)l;
    } else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
        if (cli_parse_float(TAKE(), a, 0, 100, &g->sp.temperature)) return -1;
    } else if (!strcmp(a, "--top-k")) {
        if (cli_parse_long(TAKE(), a, 0, 1 << 30, &l)) return -1;
        g->sp.top_k = (int)l;
    } else if (!strcmp(a, "--top-p")) {
        if (cli_parse_float(TAKE(), a, 0, 1, &g->sp.top_p)) return -1;
    } else if (!strcmp(a, "--min-p")) {
        if (cli_parse_float(TAKE(), a, 0, 1, &g->sp.min_p)) return -1;
    } else if (!strcmp(a, "--presence-penalty")) {
        if (cli_parse_float(TAKE(), a, -100, 100, &g->sp.presence_penalty)) return -1;
    } else if (!strcmp(a, "--repeat-penalty") || !strcmp(a, "--repetition-penalty")) {
        if (cli_parse_float(TAKE(), a, 0.01f, 100, &g->sp.repetition_penalty)) return -1;
    } else if (!strcmp(a, "--greedy")) { /* the exact path: argmax, no penalties */
        g->sp.temperature = 0;
        g->sp.presence_penalty = 0;
        g->sp.repetition_penalty = 1;
    } else if (!strcmp(a, "--seed")) {
        if (cli_parse_long(TAKE(), a, 0, 0x7fffffffffffffffL, &l)) return -1;
        g->sp.seed = (uint64_t)l;
    } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
        if (cli_parse_long(TAKE(), a, 1, 1 << 30, &l)) return -1;
        g->n_ctx = (int)l;
    } else if (!strcmp(a, "--kv-cache")) {
        if (cli_parse_kv_type(TAKE(), &g->kv_type)) return -1;
    } else if (!strcmp(a, "--weights")) {
        if (!val) { cli_error("--weights needs native, bf16, q8 or q4"); return -1; }
        g->load.weights = TAKE();
    } else if (!strcmp(a, "--mmap")) {
        g->load.load = 0;
    } else if (!strcmp(a, "--image-size")) {
        const char *v = TAKE();
        char *x = NULL, *end = NULL;
        long w = v ? strtol(v, &x, 10) : 0, h = x && (*x == 'x' || *x == 'X') ? strtol(x + 1, &end, 10) : 0;
        if (!v || !end || *end || w < 32 || h < 32 || w > 16384 || h > 16384) {
            cli_error("--image-size needs WxH (e.g. 1024x576), each side 32 .. 16384, not '%s'", v ? v : "");
            return -1;
        }
        g->image_w = (int)w, g->image_h = (int)h;
    } else if (!strcmp(a, "--max-image-tokens")) {
        if (cli_parse_long(TAKE(), a, 1, 1 << 20, &l)) return -1;
        g->max_image_tokens = (int)l;
    } else if (!strcmp(a, "--no-reuse")) {
        g->reuse = 0;
    } else if (!strcmp(a, "--cache-mib")) {
        if (cli_parse_long(TAKE(), a, 0, 1L << 30, &g->cache_mib)) return -1;
    } else if (!strcmp(a, "--session")) {
        if (!val) { cli_error("--session needs a file name"); return -1; }
        g->session = TAKE();
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (cli_parse_long(TAKE(), a, 0, 1024, &l)) return -1;
        q35_set_threads((int)l);
    } else if (!strcmp(a, "--think")) {
        g->think = 1;
    } else if (!strcmp(a, "--no-think")) {
        g->think = 0;
    } else {
        return 0;
    }
#undef TAKE
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cli_generate(q35_session *s, const q35_tokenizer *tok, const cli_gen *g, const cli_stops *stops, const int32_t *prompt,
                 size_t n_prompt, FILE *out, volatile int *interrupt, int32_t **gen, size_t *n_gen, int verbose) {
    q35_model_info info;
    q35_model_get_info(q35_session_model(s), &info);
    const int V = info.n_vocab;
    /* with images the prompt is the whole sequence (the session already holds its start) */
    const size_t held = g->n_images > 0 ? 0 : (size_t)q35_session_pos(s);
    if (held + n_prompt + (size_t)g->n_predict > (size_t)q35_session_ctx(s)) {
        cli_error("%zu prompt tokens + %d to generate do not fit in the context of %d tokens (%d already used); raise --ctx or lower -n",
                  n_prompt, g->n_predict, q35_session_ctx(s), q35_session_pos(s));
        return 1;
    }
    float *logits = malloc(sizeof(float) * (size_t)V);
    q35_sampler *smp = q35_sampler_new(&g->sp, V);
    q35_stream_decoder *dec = tok ? q35_stream_decoder_new(tok) : NULL;
    if (!logits || !smp || (tok && !dec)) {
        free(logits);
        q35_sampler_free(smp);
        q35_stream_decoder_free(dec);
        cli_error("out of memory");
        return 1;
    }
    int rc = 0;
    double t0 = now_s();
    /* Plain greedy needs no logits: the bounded LM-head scan finds the same token (q35.h). */
    const int fast = g->sp.temperature <= 0 && g->sp.presence_penalty == 0 && g->sp.repetition_penalty == 1 && !g->dump_logits;
    int32_t fast_next = 0;
    q35_status st;
    const size_t n_eval = g->n_images > 0 ? n_prompt - (size_t)q35_session_pos(s) : n_prompt; /* prompt tokens evaluated here */
    if (g->n_images > 0) { /* the whole prompt with images, the session holding its start (the logits are needed either way) */
        st = q35_session_eval_mm_rest(s, prompt, (int)n_prompt, g->images, g->n_images, (int)n_prompt, logits, NULL);
        for (int i = 1; !st && fast && i < V; i++) fast_next = logits[i] > logits[fast_next] ? i : fast_next;
    } else {
        st = fast ? q35_session_eval_argmax(s, prompt, (int)n_prompt, &fast_next, NULL) : q35_session_eval(s, prompt, (int)n_prompt, logits, NULL);
    }
    double t1 = now_s(), t2 = t1;
    int produced = 0;
    if (st) {
        rc = cli_fail("evaluating the prompt", st);
        goto done;
    }
    char piece[512];
    for (; produced < g->n_predict && !(interrupt && *interrupt); produced++) {
        if (g->dump_logits && fwrite(logits, sizeof(float), (size_t)V, g->dump_logits) != (size_t)V) {
            rc = 1;
            cli_error("--dump-logits: write failed");
            break;
        }
        int32_t id = fast ? fast_next : q35_sampler_sample(smp, logits);
        q35_sampler_accept(smp, id);
        if (gen) {
            int32_t *ng = realloc(*gen, sizeof(int32_t) * (*n_gen + 1));
            if (ng) {
                *gen = ng;
                ng[(*n_gen)++] = id;
            }
        }
        if (cli_is_stop(stops, id)) {
            produced++;
            break;
        }
        if (g->print_ids || !dec) {
            fprintf(out, "%s%d", produced ? " " : "", id);
        } else {
            size_t k = q35_stream_decoder_push(dec, id, piece, sizeof piece);
            fwrite(piece, 1, k, out);
        }
        fflush(out);
        if (produced + 1 < g->n_predict && !(interrupt && *interrupt)) {
            if ((st = fast ? q35_session_eval_argmax(s, &id, 1, &fast_next, NULL) : q35_session_eval(s, &id, 1, logits, NULL))) {
                rc = cli_fail("generating", st);
                break;
            }
        }
    }
    if (dec && !g->print_ids) {
        size_t k = q35_stream_decoder_flush(dec, piece, sizeof piece);
        fwrite(piece, 1, k, out);
    }
    if (g->print_ids && produced) fputc('\n', out);
    fflush(out);
    t2 = now_s();
    if (verbose)
        fprintf(stderr, "\nq35: prompt %zu tokens in %.2f s (%.1f tok/s); generated %d tokens in %.2f s (%.1f tok/s)\n", n_eval,
                t1 - t0, n_eval / (t1 - t0 > 1e-9 ? t1 - t0 : 1e-9), produced, t2 - t1, produced / (t2 - t1 > 1e-9 ? t2 - t1 : 1e-9));
done:
    free(logits);
    q35_sampler_free(smp);
    q35_stream_decoder_free(dec);
    return rc;
}

q35_prefix_cache *cli_prefix_cache(const cli_gen *g, const q35_model *m) {
    q35_prefix_cache *c = NULL;
    if (!g->reuse || g->cache_mib <= 0) return NULL;
    if (q35_prefix_cache_new(m, (size_t)g->cache_mib << 20, &c)) cli_error("warning: no prefix cache: %s", q35_last_error());
    return c;
}

int cli_generate_reuse(q35_session *s, q35_prefix_cache *cache, const q35_tokenizer *tok, const cli_gen *g, const cli_stops *stops,
                       const int32_t *prompt, size_t n_prompt, size_t stable, FILE *out, volatile int *interrupt, int32_t **gen,
                       size_t *n_gen, int verbose) {
    int ready = 0;
    q35_status st;
    if (!g->reuse) {
        q35_session_reset(s);
    } else if (g->n_images > 0) { /* image positions are keyed by their pictures */
        uint64_t *keys = malloc(sizeof(uint64_t) * (n_prompt + 1)); /* [n_prompt] */
        if (!keys) return cli_fail("resuming the session", Q35_ERR_NOMEM);
        st = q35_mm_keys(q35_session_model(s), prompt, (int)n_prompt, g->images, g->n_images, keys);
        if (!st) st = q35_prefix_cache_restore_keys(cache, s, keys, (int)n_prompt, &ready);
        free(keys);
        if (st) return cli_fail("resuming the session", st);
    } else if ((st = q35_prefix_cache_restore(cache, s, prompt, (int)n_prompt, &ready))) {
        return cli_fail("resuming the session", st);
    }
    /* Stop at the last grid point of the stable part and checkpoint it (exact: both pieces begin on the grid). */
    const int reused = ready, chunk = q35_session_chunk(s);
    const int grid = n_prompt ? (int)(stable < n_prompt ? stable : n_prompt - 1) / chunk * chunk : 0;
    if (g->reuse && cache && grid > ready) {
        if ((size_t)grid + (size_t)g->n_predict > (size_t)q35_session_ctx(s)) goto whole; /* cli_generate reports it */
        st = g->n_images > 0 ? q35_session_eval_mm_rest(s, prompt, (int)n_prompt, g->images, g->n_images, grid, NULL, NULL)
                             : q35_session_eval(s, prompt + ready, grid - ready, NULL, NULL);
        if (st) return cli_fail("evaluating the prompt", st);
        if ((st = q35_prefix_cache_save(cache, s))) cli_error("warning: no checkpoint: %s", q35_last_error());
        if (verbose) fprintf(stderr, "q35: %d prompt tokens evaluated up to a checkpoint\n", grid - ready);
        ready = grid;
    }
whole:;
    /* with images cli_generate takes the whole prompt (the session holds its start) */
    const size_t skip = g->n_images > 0 ? 0 : (size_t)ready;
    int rc = cli_generate(s, tok, g, stops, prompt + skip, n_prompt - skip, out, interrupt, gen, n_gen, verbose);
    if (cache && (st = q35_prefix_cache_save(cache, s))) cli_error("warning: no checkpoint: %s", q35_last_error());
    if (verbose && g->reuse) fprintf(stderr, "q35: %d of %zu prompt tokens reused from an exact checkpoint\n", reused, n_prompt);
    return rc;
}

size_t cli_stable_prefix(const q35_tokenizer *tok, const int32_t *ids, size_t n) {
    const int32_t start = tok ? q35_token_id(tok, "<|im_start|>") : -1;
    for (size_t i = n; start >= 0 && i-- > 0;)
        if (ids[i] == start) return i;
    return 0;
}

int cli_session_load(q35_session *s, const char *path, cJSON **conv) {
    *conv = NULL;
    if (!path || access(path, F_OK) != 0) return 0; /* a new conversation */
    void *blob = NULL;
    size_t len = 0;
    q35_status st = q35_session_load_ex(s, path, &blob, &len);
    if (st) return cli_fail("", st);
    cJSON *j = blob ? cJSON_ParseWithLength(blob, len) : NULL;
    free(blob);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!j || !cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "q35-chat") && strcmp(fmt->valuestring, "q35-raw"))) {
        cJSON_Delete(j);
        q35_session_reset(s);
        cli_error("--session %s: no conversation in the file (expected the JSON object q35 chat and generate write)", path);
        return 1;
    }
    *conv = j;
    return 0;
}

int cli_session_save(const q35_session *s, const char *path, const cJSON *conv) {
    char *text = cJSON_PrintUnformatted(conv);
    if (!text) {
        cli_error("--session %s: out of memory", path);
        return 1;
    }
    q35_status st = q35_session_save_ex(s, path, text, strlen(text));
    free(text);
    return st ? cli_fail("", st) : 0;
}
