/* q35 quantize: write a checkpoint's text model as a GGUF file (arch qwen35, llama.cpp's names and
 * layout) with its matrices re-encoded, so it loads by mmap in q35 and in llama.cpp alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/model_gguf.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 quantize -m DIR -o OUT.gguf --weights q8|q8_0|q4|bf16 [-t N]\n"
            "Writes the text model as GGUF (arch qwen35) with the tokenizer and chat template of DIR.\n"
            "  q8    layer matrices Q8_0; token embedding / LM head as stored\n"
            "  q8_0  every matrix Q8_0\n"
            "  q4    layer matrices Q4_0 (GGUF has no Q4R: use --weights q4 at load for q35's rotated format),\n"
            "        ssm_alpha/ssm_beta Q8_0, token embedding / LM head Q6_K (Q8_0 if columns %% 256 != 0)\n"
            "  bf16  every matrix BF16\n"
            "Norms, A_log, dt_bias and the conv taps stay float32.\n");
}

static int is_small_projection(const char *name) { return strstr(name, "ssm_alpha") || strstr(name, "ssm_beta"); }
static int is_embedding(const char *name) { return !strncmp(name, "token_embd", 10) || !strncmp(name, "output.", 7); }

int cmd_quantize(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *weights = NULL;
    long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            dir = v, i++;
        } else if (!strcmp(a, "-o") && v) {
            out = v, i++;
        } else if (!strcmp(a, "--weights") && v) {
            weights = v, i++;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (cli_parse_long(v, a, 0, 1024, &threads)) return 2;
            i++;
        } else {
            cli_error("quantize: unknown or incomplete option '%s' (see q35 quantize --help)", a);
            return 2;
        }
    }
    if (!dir || !out || !weights) {
        cli_error("quantize: need -m DIR, -o OUT.gguf and --weights (see q35 quantize --help)");
        return 2;
    }
    q35_dtype layer, small, embed;
    if (!strcmp(weights, "q8")) layer = small = Q35_DT_Q8_0, embed = Q35_DT_COUNT;
    else if (!strcmp(weights, "q8_0")) layer = small = embed = Q35_DT_Q8_0;
    else if (!strcmp(weights, "q4")) layer = Q35_DT_Q4_0, small = Q35_DT_Q8_0, embed = Q35_DT_Q6_K;
    else if (!strcmp(weights, "bf16")) layer = small = embed = Q35_DT_BF16;
    else {
        cli_error("quantize: --weights must be q8, q8_0, q4 or bf16, not '%s'", weights);
        return 2;
    }
    q35_set_threads((int)threads);
    q35_model *m = NULL;
    q35_load_opts lo = {.weights = "native"};
    q35_status st = cli_load_model(dir, &lo, &m);
    if (st) return cli_fail("", st);
    q35_gguf_export e;
    if ((st = q35_gguf_export_model(m, &e))) {
        q35_model_free(m);
        return cli_fail("quantize", st);
    }
    int rc = 0;
    void **bufs = calloc((size_t)e.n, sizeof *bufs);
    float *row = NULL;
    cli_progress bar;
    cli_progress_init(&bar, "quantizing");
    size_t bytes_total = 0, bytes_done = 0;
    for (int i = 0; i < e.n; i++) bytes_total += e.v[i].t.nbytes;
    for (int i = 0; i < e.n && !rc; i++) {
        q35_tensor *t = &e.v[i].t;
        bytes_done += t->nbytes;
        cli_progress_update(&bar, bytes_done, bytes_total);
        if (t->ndim != 2 || t->shape[0] < 2 || strstr(e.v[i].name, "norm") || strstr(e.v[i].name, "ssm_conv")) continue;
        q35_dtype dt = is_embedding(e.v[i].name) ? embed : is_small_projection(e.v[i].name) ? small : layer;
        if (dt == Q35_DT_COUNT || dt == t->dtype) continue;
        const int64_t rows = t->shape[0], cols = t->shape[1];
        if (!q35_quant_supports(dt, cols)) dt = q35_quant_supports(Q35_DT_Q8_0, cols) && dt != Q35_DT_BF16 ? Q35_DT_Q8_0 : Q35_DT_BF16;
        if (dt == t->dtype) continue;
        const size_t rb = dt == Q35_DT_BF16 ? 2 * (size_t)cols : q35_row_bytes(dt, cols);
        uint8_t *buf = malloc(rb * (size_t)rows);
        free(row);
        row = malloc(sizeof(float) * (size_t)cols);
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
    cli_progress_end(&bar);
    if (!rc) {
        q35_gguf_write_opts wo = {NULL, dir};
        if ((st = q35_gguf_write_model(out, &m->cfg, e.v, e.n, &wo))) rc = cli_fail("quantize", st);
        else fprintf(stderr, "q35: wrote %s (%s)\n", out, weights);
    }
    free(row);
    for (int i = 0; i < e.n; i++) free(bufs[i]);
    free(bufs);
    q35_gguf_export_free(&e);
    q35_model_free(m);
    return rc;
}
