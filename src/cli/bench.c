/* q35 bench: prompt and generation speed on a checkpoint or on a synthetic one with the real
 * Qwen3.5 shapes (deterministic random weights, made on the fly and cached), next to the read
 * bandwidth measured in the same run and the generation limit it implies. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "core/pool.h"
#include "kernels/kernels.h"
#include "kernels/membw.h"
#include "kernels/pftune.h"
#include "layers/vision.h"
#include "model/config.h"
#include "model/synth.h"

/* The text configs of the real checkpoints (spec §1), as presets for synthetic weights. */
static const char *preset_config(const char *name) {
    if (!strcmp(name, "0.8b"))
        return "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"model_type\": \"qwen3_5\", \"tie_word_embeddings\": true,"
               " \"text_config\": {\"model_type\": \"qwen3_5_text\", \"hidden_size\": 1024, \"intermediate_size\": 3584,"
               " \"num_hidden_layers\": 24, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 256,"
               " \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 16, \"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128,"
               " \"linear_conv_kernel_dim\": 4, \"full_attention_interval\": 4, \"vocab_size\": 248320, \"rms_norm_eps\": 1e-06,"
               " \"max_position_embeddings\": 262144, \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"attn_output_gate\": true,"
               " \"eos_token_id\": 248044, \"rope_parameters\": {\"mrope_interleaved\": true, \"mrope_section\": [11, 11, 10],"
               " \"rope_type\": \"default\", \"rope_theta\": 10000000, \"partial_rotary_factor\": 0.25}}}";
    if (!strcmp(name, "2b"))
        return "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"model_type\": \"qwen3_5\", \"tie_word_embeddings\": true,"
               " \"text_config\": {\"model_type\": \"qwen3_5_text\", \"hidden_size\": 2048, \"intermediate_size\": 6144,"
               " \"num_hidden_layers\": 24, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 256,"
               " \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 16, \"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128,"
               " \"linear_conv_kernel_dim\": 4, \"full_attention_interval\": 4, \"vocab_size\": 248320, \"rms_norm_eps\": 1e-06,"
               " \"max_position_embeddings\": 262144, \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"attn_output_gate\": true,"
               " \"eos_token_id\": 248044, \"rope_parameters\": {\"mrope_interleaved\": true, \"mrope_section\": [11, 11, 10],"
               " \"rope_type\": \"default\", \"rope_theta\": 10000000, \"partial_rotary_factor\": 0.25}}}";
    return NULL;
}

/* The vision towers of the real checkpoints (spec §1.1; the 2B tower is INFERRED in spec §1.2 /
 * §8: the Qwen3.5-4B tower with out_hidden_size = the 2B text width). */
static int preset_vision(const char *name, q35_vision_config *v) {
    memset(v, 0, sizeof *v);
    v->in_channels = 3, v->patch = 16, v->temporal_patch = 2, v->merge = 2, v->n_pos = 2304, v->pos_side = 48, v->rope_theta = 10000;
    if (!strcmp(name, "0.8b")) v->depth = 12, v->hidden = 768, v->n_heads = 12, v->intermediate = 3072, v->out_hidden = 1024;
    else if (!strcmp(name, "2b")) v->depth = 24, v->hidden = 1024, v->n_heads = 16, v->intermediate = 4096, v->out_hidden = 2048;
    else return -1;
    return 0;
}

static double now_s(void);
static int cmp_double(const void *a, const void *b);

/* q35 bench --synthetic NAME --image-encode: the time to encode one 1024x576 image (grid 36x64 ->
 * 576 LLM tokens) with the preset's vision shapes and deterministic synthetic bf16 weights (written
 * once to the cache as a vision-only safetensors file). */
static int bench_image_encode(const char *preset, long reps, int json) {
    q35_vision_config vc;
    if (preset_vision(preset, &vc)) {
        cli_error("bench: --synthetic takes 0.8b or 2b, not '%s'", preset);
        return 2;
    }
    const char *base = getenv("Q35_CACHE");
    if (!base) base = getenv("TMPDIR");
    if (!base) base = "/tmp";
    char path[4200];
    snprintf(path, sizeof path, "%s/q35-synth-vision-%s-v%d.safetensors", base, preset, Q35_SYNTH_FORMAT);
    q35_status st;
    if (access(path, R_OK) != 0) {
        q35_synth_tensor *list;
        int n;
        if ((st = q35_synth_vision_list(&vc, &list, &n))) return cli_fail("bench", st);
        fprintf(stderr, "q35 bench: writing synthetic %s vision weights to %s (once; set Q35_CACHE to move it)\n", preset, path);
        st = q35_synth_write(path, 0x5eed0000u + (uint64_t)vc.hidden, list, n);
        free(list);
        if (st) return cli_fail("bench", st);
    }
    q35_st_index sti;
    if ((st = q35_st_open_file(path, &sti))) return cli_fail("bench", st);
    q35_vision_weights w;
    if ((st = q35_vision_bind(&sti, "model.visual.", &vc, path, &w))) {
        q35_st_close(&sti);
        return cli_fail("bench", st);
    }
    const int gt = 1, gh = 36, gw = 64, N = gt * gh * gw, P = q35_vision_patch_dim(&vc), nt = N / 4;
    float *px = malloc(sizeof(float) * (size_t)N * P), *out = malloc(sizeof(float) * (size_t)nt * vc.out_hidden);
    double *t = calloc((size_t)reps + 1, sizeof(double)), *cpu = calloc((size_t)reps + 1, sizeof(double));
    int rc = 0;
    if (!px || !out || !t || !cpu) {
        cli_error("bench: out of memory");
        rc = 1;
    }
    if (!rc) q35_synth_fill("bench.pixels", 1, Q35_DT_F32, 0.0f, 1.0f, (int64_t)N * P, px);
    for (long r = 0; r <= reps && !rc; r++) { /* run 0 warms the mapping and the pool; not counted */
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        const double t0 = now_s();
        if ((st = q35_vision_forward(&vc, &w, px, gt, gh, gw, out))) rc = cli_fail("bench", st);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        if (r > 0) t[r - 1] = now_s() - t0, cpu[r - 1] = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    }
    if (!rc) {
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
        const double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        const double cmed = reps % 2 ? cpu[reps / 2] : 0.5 * (cpu[reps / 2 - 1] + cpu[reps / 2]);
        if (json)
            printf("{\"vision\": \"%s\", \"image\": \"1024x576\", \"grid\": [%d, %d, %d], \"tokens\": %d, \"threads\": %d, \"reps\": %ld,"
                   " \"encode_s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, \"cpu_s_median\": %.3f, \"weight_bytes\": %zu}\n",
                   preset, gt, gh, gw, nt, q35_get_threads(), reps, med, t[0], t[reps - 1], cmed, w.weight_bytes);
        else
            printf("vision         %s tower: depth %d, hidden %d, %d heads, mlp %d, out %d; %s weights, %.0f MB\n"
                   "threads        %d\n"
                   "image encode   1024x576 (grid %dx%d, %d patches -> %d tokens): %.2f s (median of %ld; %.2f .. %.2f); CPU time %.2f s\n",
                   preset, vc.depth, vc.hidden, vc.n_heads, vc.intermediate, vc.out_hidden, q35_dtype_name(w.blocks[0].qkv.dtype),
                   w.weight_bytes / 1e6, q35_get_threads(), gh, gw, N, nt, med, reps, t[0], t[reps - 1], cmed);
    }
    free(px);
    free(out);
    free(t);
    free(cpu);
    q35_vision_weights_free(&w);
    q35_st_close(&sti);
    return rc;
}

/* Make (or reuse) the synthetic checkpoint of a preset; returns its directory in dir. */
static int synthetic_dir(const char *preset, char *dir, size_t cap) {
    const char *cfg_text = preset_config(preset);
    if (!cfg_text) {
        cli_error("bench: --synthetic takes 0.8b or 2b, not '%s'", preset);
        return 2;
    }
    const char *base = getenv("Q35_CACHE");
    if (!base) base = getenv("TMPDIR");
    if (!base) base = "/tmp";
    snprintf(dir, cap, "%s/q35-synth-%s-v%d", base, preset, Q35_SYNTH_FORMAT);
    char cfg_path[4200], st_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    if (access(st_path, R_OK) == 0 && access(cfg_path, R_OK) == 0) return 0;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        cli_error("bench: cannot create %s", dir);
        return 1;
    }
    FILE *f = fopen(cfg_path, "wb");
    if (!f || fputs(cfg_text, f) < 0 || fclose(f) != 0) {
        cli_error("bench: cannot write %s", cfg_path);
        return 1;
    }
    q35_config c;
    q35_synth_tensor *list;
    int n;
    q35_status st = q35_config_parse(cfg_text, strlen(cfg_text), "preset", &c);
    if (!st) st = q35_synth_list(&c, &list, &n);
    if (st) return cli_fail("bench", st);
    fprintf(stderr, "q35 bench: writing synthetic %s weights to %s (once; set Q35_CACHE to move it)\n", preset, dir);
    st = q35_synth_write(st_path, 0x5eed0000u + (uint64_t)c.hidden, list, n);
    free(list);
    return st ? cli_fail("bench", st) : 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- peak memory: VmHWM of /proc/self/status, which the bandwidth probe resets after itself
 * (writing 5 to /proc/self/clear_refs); getrusage's maxrss where /proc is missing */
static int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
static double peak_rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb >= 0) return kb / 1024.0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* ---- read bandwidth (kernels/membw.c): 1 GiB, beyond what this machine's caches hold (a 256 MiB
 * buffer read 5-10% faster here, partly from the L3), with the peak memory reset after it; 256
 * MiB when the peak cannot be reset, so that the reported peak stays the model's */
static double measure_bandwidth(void) {
    const int can_reset = reset_peak_rss() == 0;
    const double bw = q35_read_bandwidth((size_t)(can_reset ? 1024 : 256) << 20, q35_get_threads(), 5);
    if (can_reset) reset_peak_rss();
    return bw;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { double median, lo, hi; } stat3;
static stat3 stats(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stat3 s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 bench [-m DIR | --synthetic 0.8b|2b] [options]\n"
            "Prompt processing and generation speed, the read bandwidth measured in the same run, the\n"
            "generation limit it implies (bandwidth / weight bytes per token) and the fraction reached.\n\n"
            "  -m, --model DIR       a checkpoint directory\n"
            "  --synthetic NAME      real 0.8b or 2b shapes with deterministic random weights (cached in\n"
            "                        $Q35_CACHE or $TMPDIR, default /tmp)\n"
            "  --weights W           native (as stored), bf16, q8 or q4 (converted at load)\n"
            "  --load | --mmap       read the weights into memory (default) or map the files\n"
            "  --kv-cache T          the KV cache in f32 (default) or f16\n"
            "  -t, --threads N       threads (default: all cores)\n"
            "  -p N                  prompt tokens (default 512; 0 skips)\n"
            "  -n N                  generated tokens (default 128; 0 skips)\n"
            "  --reps R              repetitions; the median and the spread are reported (default 3)\n"
            "  --exhaustive          greedy from the full logits instead of the bounded LM-head scan\n"
            "  --image-encode        instead: the time to encode one 1024x576 image (576 tokens) with the\n"
            "                        preset's vision tower (with --synthetic; synthetic bf16 weights)\n"
            "  --json                one JSON object on stdout\n"
            "  --turns T             instead: time to first token of T chat turns with exact prefix reuse and\n"
            "                        without (random ids: --history H tokens, then per turn --user U tokens\n"
            "                        and an answer of -n tokens, default 2000, 40, 32); --cache-mib N (512)\n");
}

int cmd_bench(int argc, char **argv) {
    const char *dir = NULL, *synthetic = NULL, *weights = "native";
    long threads = 0, n_prompt = 512, n_gen = 128, reps = 3;
    int json = 0, load = 1, exhaustive = 0, image_encode = 0, n_set = 0;
    long turns = 0, history = 2000, user = 40, cache_mib = 512;
    q35_kv_type kv_type = Q35_KV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            dir = v, i++;
        } else if (!strcmp(a, "--synthetic") && v) {
            synthetic = v, i++;
        } else if (!strcmp(a, "--weights") && v) {
            weights = v, i++;
        } else if (!strcmp(a, "--kv-cache")) {
            if (cli_parse_kv_type(v, &kv_type)) return 2;
            i++;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (cli_parse_long(v, a, 0, 1024, &threads)) return 2;
            i++;
        } else if (!strcmp(a, "-p") && v) {
            if (cli_parse_long(v, a, 0, 1 << 20, &n_prompt)) return 2;
            i++;
        } else if (!strcmp(a, "-n") && v) {
            if (cli_parse_long(v, a, 0, 1 << 20, &n_gen)) return 2;
            n_set = 1;
            i++;
        } else if (!strcmp(a, "--turns") && v) {
            if (cli_parse_long(v, a, 1, 1000, &turns)) return 2;
            i++;
        } else if (!strcmp(a, "--history") && v) {
            if (cli_parse_long(v, a, 0, 1 << 20, &history)) return 2;
            i++;
        } else if (!strcmp(a, "--user") && v) {
            if (cli_parse_long(v, a, 1, 1 << 20, &user)) return 2;
            i++;
        } else if (!strcmp(a, "--cache-mib") && v) {
            if (cli_parse_long(v, a, 0, 1L << 30, &cache_mib)) return 2;
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            if (cli_parse_long(v, a, 1, 1000, &reps)) return 2;
            i++;
        } else if (!strcmp(a, "--image-encode")) {
            image_encode = 1;
        } else if (!strcmp(a, "--exhaustive")) {
            exhaustive = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--load")) {
            load = 1;
        } else if (!strcmp(a, "--mmap")) {
            load = 0;
        } else {
            cli_error("bench: unknown or incomplete option '%s' (see q35 bench --help)", a);
            return 2;
        }
    }
    if (!dir == !synthetic) {
        cli_error("bench: need exactly one of -m DIR or --synthetic 0.8b|2b");
        return 2;
    }
    if (image_encode) {
        if (!synthetic) {
            cli_error("bench: --image-encode needs --synthetic 0.8b|2b");
            return 2;
        }
        q35_set_threads((int)threads);
        return bench_image_encode(synthetic, reps, json);
    }
    char syn_dir[4096];
    if (synthetic) {
        int rc = synthetic_dir(synthetic, syn_dir, sizeof syn_dir);
        if (rc) return rc;
        dir = syn_dir;
    }
    q35_set_threads((int)threads);
    const double bw = measure_bandwidth();
    q35_model *m = NULL;
    q35_load_opts lo = {.weights = weights, .load = load};
    double t0 = now_s();
    q35_status st = cli_load_model(dir, &lo, &m);
    if (st) return cli_fail("", st);
    const double load_s = now_s() - t0;
    q35_model_info info;
    q35_model_get_info(m, &info);
    if (turns > 0) {
        int rc = cli_bench_turns(m, (int)turns, (int)history, (int)user, n_set ? (int)(n_gen > 0 ? n_gen : 1) : 32, (int)reps,
                                 (size_t)cache_mib << 20, json);
        q35_model_free(m);
        return rc;
    }
    q35_session *s = NULL;
    if ((st = q35_session_new_ex(m, &(q35_session_opts){(int)(n_prompt + n_gen + 1), kv_type}, &s))) {
        q35_model_free(m);
        return cli_fail("", st);
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_prompt > 0 ? n_prompt : 1));
    float *logits = malloc(sizeof(float) * (size_t)info.n_vocab);
    double *pp = calloc((size_t)reps, sizeof(double)), *tg = calloc((size_t)reps, sizeof(double));
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (long i = 0; i < n_prompt; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)info.n_vocab);
    }
    int rc = 0;
    double rescored = 0, n_steps = 0;
    if (!exhaustive && n_gen > 0) { /* build the 4-bit head copy outside the timed loop */
        int32_t t0k = 0;
        q35_session_eval_argmax(s, &t0k, 1, &t0k, NULL);
    }
    for (long r = 0; r < reps && !rc; r++) {
        q35_session_reset(s);
        int32_t tok = 0;
        if (n_prompt > 0) {
            t0 = now_s();
            if ((st = q35_session_eval(s, ids, (int)n_prompt, logits, NULL))) { rc = cli_fail("", st); break; }
            pp[r] = n_prompt / (now_s() - t0);
            for (int i = 1; i < info.n_vocab; i++)
                if (logits[i] > logits[tok]) tok = i;
        }
        if (n_gen > 0) {
            t0 = now_s();
            for (long k = 0; k < n_gen; k++) {
                if (!exhaustive) {
                    int nr = 0;
                    if ((st = q35_session_eval_argmax(s, &tok, 1, &tok, &nr))) { rc = cli_fail("", st); break; }
                    rescored += nr, n_steps++;
                    continue;
                }
                if ((st = q35_session_eval(s, &tok, 1, logits, NULL))) { rc = cli_fail("", st); break; }
                tok = (int32_t)q35_argmax(logits, info.n_vocab);
            }
            tg[r] = n_gen / (now_s() - t0);
        }
    }
    if (!rc) {
        stat3 p = stats(pp, (int)reps), g = stats(tg, (int)reps);
        const double rss_mb = peak_rss_mb(), per_tok_mb = info.bytes_per_token / 1e6, state_mb = info.state_bytes / 1e6;
        /* the KV cache a generated token reads, on average: the token at position p reads p + 1
         * rows, and the generated tokens sit at positions n_prompt .. n_prompt + n_gen - 1 */
        const int kv16 = kv_type == Q35_KV_F16;
        const char *kv_name = kv16 ? "f16" : "f32";
        const double kv_mb = info.kv_bytes_per_pos * (kv16 ? 0.5 : 1.0) * (n_prompt + (n_gen + 1) / 2.0) / 1e6;
        const double limit = bw > 0 ? bw * 1e3 / per_tok_mb : 0;
        /* every token also reads and writes the fp32 recurrent state and reads the KV cache: the limit with those bytes too */
        const double limit_all = bw > 0 ? bw * 1e3 / (per_tok_mb + 2 * state_mb + kv_mb) : 0;
        char pf[256]; /* the prefetch distances the single-token products ended on (kernels/pftune.h) */
        q35_pftune_describe(pf, sizeof pf);
        if (json) {
            printf("{\"model\": \"%s\", \"weights\": \"%s\", \"head\": \"%s\", \"load\": \"%s\", \"threads\": %d, \"prompt_tokens\": %ld,"
                   " \"gen_tokens\": %ld, \"reps\": %ld, \"prompt_tps\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f},"
                   " \"gen_tps\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, \"weight_bytes\": %zu, \"bytes_per_token\": %zu,"
                   " \"state_bytes\": %zu, \"kv_cache\": \"%s\", \"kv_bytes_per_token\": %.0f, \"peak_rss_mb\": %.1f, \"read_bandwidth_gbs\": %.2f, \"gen_limit_tps\": %.2f,"
                   " \"gen_fraction_of_limit\": %.3f, \"gen_limit_with_state_tps\": %.2f, \"gen_fraction_of_limit_with_state\": %.3f,"
                   " \"load_s\": %.2f, \"prefetch\": \"%s\", \"kernels\": \"%s\"}\n",
                   synthetic ? synthetic : dir, info.weight_format, info.head_format, load ? "memory" : "mmap", q35_get_threads(), n_prompt,
                   n_gen, reps, p.median, p.lo, p.hi, g.median, g.lo, g.hi, info.weight_bytes, info.bytes_per_token, info.state_bytes,
                   kv_name, kv_mb * 1e6, rss_mb, bw,
                   limit, limit > 0 ? g.median / limit : 0, limit_all, limit_all > 0 ? g.median / limit_all : 0, load_s, pf, q35_isa_describe());
        } else {
            printf("model          %s (%d layers, hidden %d, vocab %d)\n", synthetic ? synthetic : dir, info.n_layers, info.hidden,
                   info.n_vocab);
            printf("weights        %s layers, %s head, %s; %.0f MB in all, %.0f MB read per generated token\n", info.weight_format,
                   info.head_format, load ? "in memory" : "mmap'd", info.weight_bytes / 1e6, per_tok_mb);
            printf("threads        %d\n", q35_get_threads());
            printf("kernels        %s\n", q35_isa_describe());
            if (n_gen > 0)
                printf("greedy head    %s\n", exhaustive                   ? "exhaustive (full logits)"
                                               : rescored < n_steps * 0.5 * info.n_vocab ? "bounded 4-bit scan + exact rescoring"
                                                                                         : "full logits (the bounded 4-bit scan would not prune them)");
            if (n_gen > 0 && !exhaustive) printf("rescored rows  %.1f per token (of %d)\n", n_steps ? rescored / n_steps : 0, info.n_vocab);
            if (n_prompt > 0) printf("prompt %-6ld  %8.1f tok/s  (median of %ld; %.1f .. %.1f)\n", n_prompt, p.median, reps, p.lo, p.hi);
            if (n_gen > 0) printf("generate %-4ld  %8.2f tok/s  (median of %ld; %.2f .. %.2f)\n", n_gen, g.median, reps, g.lo, g.hi);
            printf("bandwidth      %.1f GB/s read (%d threads) -> generation limit %.1f tok/s; reached %.0f%%\n", bw, q35_get_threads(),
                   limit, limit > 0 ? 100 * g.median / limit : 0);
            printf("with state     + %.0f MB recurrent state read and written + %.0f MB %s KV cache read per token -> limit %.1f tok/s; "
                   "reached %.0f%%\n",
                   state_mb, kv_mb, kv_name, limit_all, limit_all > 0 ? 100 * g.median / limit_all : 0);
            printf("peak RSS       %.0f MB (weights %.0f MB); load %.2f s\n", rss_mb, info.weight_bytes / 1e6, load_s);
            if (*pf) printf("prefetch       %s\n", pf);
        }
    }
    free(ids);
    free(logits);
    free(pp);
    free(tg);
    q35_session_free(s);
    q35_model_free(m);
    return rc;
}
