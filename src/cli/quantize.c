/* q35 quantize: write a checkpoint's (or a GGUF file's) text model as a GGUF file.
 *   --layout q35 (default): q35's own GGUF flavour (formats/gguf.h "q35 layout"): the model exactly as
 *     a load with the same --weights converts it (model/quantize.c: Q4R or Q4_0 per tensor, Q6_K head,
 *     ...), matrices already in the kernels' R16 interleave, so loading it maps the file and does no
 *     work. llama.cpp cannot read it.
 *   --layout gguf: llama.cpp's names and layout (rows of blocks; q4 -> Q4_0), readable by both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "core/file.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/model_gguf.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 quantize -m DIR|FILE.gguf -o OUT.gguf --weights q8|q8_0|q4|q4_0|bf16|native [--layout q35|gguf] [-t N]\n"
            "Writes the text model as GGUF (arch qwen35) with the tokenizer and chat template of the source.\n"
            "  --layout q35   (default) q35's own GGUF: every matrix exactly as `--weights W` converts it at load,\n"
            "                 stored in the kernels' interleaved layout (and q35's rotated 4-bit Q4R), so the file\n"
            "                 loads by mmap with no conversion and no copy. llama.cpp cannot read these files.\n"
            "  --layout gguf  llama.cpp-compatible GGUF (rows of Q8_0/Q4_0/Q6_K blocks); repacked at each load.\n"
            "  q8    layer matrices Q8_0; token embedding / LM head as stored\n"
            "  q8_0  every matrix Q8_0\n"
            "  q4    layer matrices 4.5 bits: q35 layout: Q4R or Q4_0 per tensor, as --weights q4 at load;\n"
            "        gguf layout: Q4_0 (GGUF has no Q4R). ssm_alpha/ssm_beta Q8_0, token embedding / LM head\n"
            "        Q6_K (Q8_0 if columns %% 256 != 0)\n"
            "  q4_0  as q4 with Q4_0 layer matrices in both layouts\n"
            "  bf16  every matrix BF16\n"
            "  native  (q35 layout) the source's formats as stored, repacked once into the file\n"
            "Norms, A_log, dt_bias and the conv taps stay float32.\n");
}

static int is_small_projection(const char *name) { return strstr(name, "ssm_alpha") || strstr(name, "ssm_beta"); }
static int is_embedding(const char *name) { return !strncmp(name, "token_embd", 10) || !strncmp(name, "output.", 7); }

/* --layout gguf: the model's row-major tensors re-encoded one by one (the llama.cpp-compatible file). */
static int requantize_rows(q35_gguf_export *e, const char *weights, void **bufs) {
    q35_dtype layer, small, embed;
    if (!strcmp(weights, "q8")) layer = small = Q35_DT_Q8_0, embed = Q35_DT_COUNT;
    else if (!strcmp(weights, "q8_0")) layer = small = embed = Q35_DT_Q8_0;
    else if (!strcmp(weights, "q4") || !strcmp(weights, "q4_0")) layer = Q35_DT_Q4_0, small = Q35_DT_Q8_0, embed = Q35_DT_Q6_K;
    else if (!strcmp(weights, "bf16")) layer = small = embed = Q35_DT_BF16;
    else {
        cli_error("quantize: --layout gguf: --weights must be q8, q8_0, q4, q4_0 or bf16, not '%s'", weights);
        return 2;
    }
    float *row = NULL;
    int rc = 0;
    for (int i = 0; i < e->n && !rc; i++) {
        q35_tensor *t = &e->v[i].t;
        if (t->ndim != 2 || t->shape[0] < 2 || strstr(e->v[i].name, "norm") || strstr(e->v[i].name, "ssm_conv")) continue;
        q35_dtype dt = is_embedding(e->v[i].name) ? embed : is_small_projection(e->v[i].name) ? small : layer;
        if (dt == Q35_DT_COUNT || dt == t->dtype) continue;
        const int64_t rows = t->shape[0], cols = t->shape[1];
        if (!q35_quant_supports(dt, cols)) dt = q35_quant_supports(Q35_DT_Q8_0, cols) && dt != Q35_DT_BF16 ? Q35_DT_Q8_0 : Q35_DT_BF16;
        if (dt == t->dtype) continue;
        const size_t rb = dt == Q35_DT_BF16 ? 2 * (size_t)cols : q35_row_bytes(dt, cols);
        uint8_t *buf = malloc(rb * (size_t)rows); /* [rows][rb] */
        free(row);
        row = malloc(sizeof(float) * (size_t)cols); /* [cols] */
        if (!buf || !row) {
            free(buf);
            cli_error("quantize: out of memory");
            rc = 1;
            break;
        }
        for (int64_t r = 0; r < rows; r++) {
            q35_tensor_dequant_row(t, r, row);
            if (dt == Q35_DT_BF16)
                for (int64_t k = 0; k < cols; k++) ((uint16_t *)(buf + r * rb))[k] = q35_f32_to_bf16(row[k]);
            else
                q35_quantize_row(dt, row, buf + r * rb, cols);
        }
        bufs[i] = buf;
        t->dtype = dt;
        t->data = buf;
        t->nbytes = rb * (size_t)rows;
    }
    free(row);
    return rc;
}

int cmd_quantize(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *weights = NULL, *layout = "q35";
    long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            src = v, i++;
        } else if (!strcmp(a, "-o") && v) {
            out = v, i++;
        } else if (!strcmp(a, "--weights") && v) {
            weights = v, i++;
        } else if (!strcmp(a, "--layout") && v) {
            layout = v, i++;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (cli_parse_long(v, a, 0, 1024, &threads)) return 2;
            i++;
        } else {
            cli_error("quantize: unknown or incomplete option '%s' (see q35 quantize --help)", a);
            return 2;
        }
    }
    if (!src || !out || !weights) {
        cli_error("quantize: need -m DIR|FILE.gguf, -o OUT.gguf and --weights (see q35 quantize --help)");
        return 2;
    }
    const int q35_layout = !strcmp(layout, "q35");
    if (!q35_layout && strcmp(layout, "gguf") != 0) {
        cli_error("quantize: --layout must be q35 or gguf, not '%s'", layout);
        return 2;
    }
    static const char *const q35_weights[] = {"q8", "q8_0", "q4", "q4_0", "bf16", "native"};
    int known = 0;
    for (size_t k = 0; k < sizeof q35_weights / sizeof q35_weights[0]; k++) known |= !strcmp(weights, q35_weights[k]);
    if (!known || (!q35_layout && !strcmp(weights, "native"))) {
        cli_error("quantize: --weights must be q8, q8_0, q4, q4_0, bf16%s, not '%s'", q35_layout ? " or native" : "", weights);
        return 2;
    }
    q35_set_threads((int)threads);

    /* The tokenizer: tokenizer.* of a GGUF source, or tokenizer.json (+ config, template) of a directory. */
    char gguf_path[4096];
    int is_gguf = 0;
    q35_status st = q35_gguf_model_path(src, gguf_path, sizeof gguf_path, &is_gguf);
    if (st) return cli_fail("quantize", st);
    q35_gguf tok_src;
    memset(&tok_src, 0, sizeof tok_src);
    if (is_gguf && (st = q35_gguf_open(gguf_path, 0, &tok_src))) return cli_fail("quantize", st);
    if (!q35_layout && tok_src.q35_version) {
        cli_error("quantize: %s is a q35-layout file: --layout gguf needs a checkpoint or a llama.cpp GGUF file as the source", gguf_path);
        q35_gguf_close(&tok_src);
        return 2;
    }
    char tok_json[4200];
    const int has_tok_dir = !is_gguf && !q35_path_join(tok_json, sizeof tok_json, src, "tokenizer.json") && q35_file_exists(tok_json);

    /* q35 layout: the load-time conversion itself (bit-for-bit what `--weights W` makes at load);
     * gguf layout: the source as stored, re-encoded row by row below. */
    q35_model *m = NULL;
    q35_load_opts lo = {.weights = q35_layout ? weights : "rows"};
    if ((st = cli_load_model(src, &lo, &m))) {
        q35_gguf_close(&tok_src);
        return cli_fail("", st);
    }
    q35_gguf_export e;
    if ((st = q35_layout ? q35_gguf_export_bound(m, &e) : q35_gguf_export_model(m, &e))) {
        q35_model_free(m);
        q35_gguf_close(&tok_src);
        return cli_fail("quantize", st);
    }
    void **bufs = calloc((size_t)e.n, sizeof *bufs); /* [e.n] re-encoded copies (gguf layout) */
    int rc = bufs ? 0 : 1;
    if (!bufs) cli_error("quantize: out of memory");
    if (!rc && !q35_layout) rc = requantize_rows(&e, weights, bufs);
    if (!rc) {
        int tiled = 0;
        for (int i = 0; i < m->cfg.n_layers; i++) tiled |= !m->layers[i].is_full && m->layers[i].gdn.v_tiled;
        q35_gguf_write_opts wo = {NULL, has_tok_dir ? src : NULL, is_gguf ? &tok_src : NULL, q35_layout, tiled};
        if ((st = q35_gguf_write_model(out, &m->cfg, e.v, e.n, &wo))) rc = cli_fail("quantize", st);
        else fprintf(stderr, "q35: wrote %s (%s, %s layout%s)\n", out, weights, q35_layout ? "q35" : "gguf",
                     q35_layout ? "; q35 reads it by mmap, llama.cpp cannot read it" : "");
    }
    for (int i = 0; bufs && i < e.n; i++) free(bufs[i]);
    free(bufs);
    q35_gguf_export_free(&e);
    q35_model_free(m);
    q35_gguf_close(&tok_src);
    return rc;
}
