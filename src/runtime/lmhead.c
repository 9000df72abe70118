#include "runtime/lmhead.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/hugemem.h"
#include "core/pool.h"
#include "kernels/headscan.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

/* The smallest f16 >= f (f >= 0, finite, <= 65504); returns 0x7c00 (inf) when it does not fit. */
static uint16_t f16_round_up(float f) {
    if (f <= 0) return 0;
    if (f > 65504.0f) return 0x7c00;
    /* f16 values: subnormal k * 2^-24 (k < 1024), normal (1 + m/1024) * 2^(e-15). */
    int e;
    float m = frexpf(f, &e); /* f = m * 2^e, m in [0.5, 1) */
    int exp16 = e - 1 + 15;  /* f = (2m) * 2^(e-1) */
    uint16_t h;
    if (exp16 <= 0) {
        float k = ceilf(f * 16777216.0f); /* f / 2^-24 */
        h = (uint16_t)k;                  /* k <= 1024: 1024 is the smallest normal, encoded the same way */
    } else {
        float mant = ceilf((2.0f * m - 1.0f) * 1024.0f);
        if (mant >= 1024.0f) { mant = 0; exp16++; }
        if (exp16 >= 31) return 0x7c00;
        h = (uint16_t)((exp16 << 10) | (int)mant);
    }
    return h;
}

typedef struct {
    const q35_tensor *head;
    q35_lmhead_approx *ap;
    int failed;
} build_ctx;

/* Row r of head as a 4-bit row of the copy (layout of kernels/headscan.h); full: [H] scratch. */
static void build_row(const q35_tensor *head, int64_t r, int64_t H, uint8_t *row, float *full) {
    const int64_t nb = H / 32;
    uint8_t *nib = row + 2 * nb;
    q35_tensor_dequant_row(head, r, full);
    for (int64_t b = 0; b < nb; b++) {
        const float *w = full + 32 * b;
        float mx = 0;
        for (int k = 0; k < 32; k++) mx = fabsf(w[k]) > mx ? fabsf(w[k]) : mx;
        const uint16_t dbits = f16_round_up(mx / 7.0f);
        memcpy(row + 2 * b, &dbits, 2);
        const float d = q35_f16_to_f32(dbits), inv = d > 0 ? 1.0f / d : 0;
        for (int k = 0; k < 16; k++) {
            int q0 = (int)lrintf(w[k] * inv), q1 = (int)lrintf(w[k + 16] * inv);
            q0 = q0 < -7 ? -7 : q0 > 7 ? 7 : q0;
            q1 = q1 < -7 ? -7 : q1 > 7 ? 7 : q1;
            nib[16 * b + k] = (uint8_t)((q0 + 8) | ((q1 + 8) << 4));
        }
    }
}

static void build_task(void *vctx, int i, int n) {
    build_ctx *ctx = vctx;
    const int64_t V = ctx->ap->rows, H = ctx->ap->cols;
    const int64_t r0 = V * i / n, r1 = V * (i + 1) / n;
    float *full = malloc(sizeof(float) * (size_t)H);
    if (!full) { ctx->failed = 1; return; }
    for (int64_t r = r0; r < r1; r++) build_row(ctx->head, r, H, ctx->ap->data + (size_t)r * ctx->ap->row_bytes, full);
    free(full);
}

q35_status q35_lmhead_build(const q35_tensor *head, q35_lmhead_approx *out) {
    memset(out, 0, sizeof *out);
    if (head->ndim != 2 || head->shape[1] % 32 != 0)
        return q35_fail(Q35_ERR_UNSUPPORTED, "fast greedy head: needs a head with a multiple of 32 columns");
    out->quantized_exact = q35_dtype_block(head->dtype) > 1;
    out->rows = head->shape[0];
    out->cols = head->shape[1];
    const int64_t nb = out->cols / 32;
    out->row_bytes = (size_t)(2 * nb + 16 * nb);
    out->data = q35_huge_alloc(out->row_bytes * (size_t)out->rows);
    if (!out->data) return q35_fail(Q35_ERR_NOMEM, "fast greedy head: cannot allocate %.0f MB", out->row_bytes * (double)out->rows / 1e6);
    build_ctx ctx = {head, out, 0};
    q35_pool *pool = q35_global_pool();
    const int tasks = q35_pool_threads(pool) * 4;
    q35_pool_run(pool, tasks > 0 ? tasks : 1, build_task, &ctx);
    if (ctx.failed) {
        q35_lmhead_free(out);
        return q35_fail(Q35_ERR_NOMEM, "fast greedy head: out of memory");
    }
    /* A block scale that does not fit f16 (weights beyond 458,000) would break the bound. */
    for (int64_t r = 0; r < out->rows; r++) {
        const uint8_t *row = out->data + (size_t)r * out->row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            uint16_t d;
            memcpy(&d, row + 2 * b, 2);
            if ((d & 0x7c00) == 0x7c00) {
                q35_lmhead_free(out);
                return q35_fail(Q35_ERR_UNSUPPORTED, "fast greedy head: weights too large for the 4-bit copy");
            }
        }
    }
    return Q35_OK;
}

void q35_lmhead_free(q35_lmhead_approx *ap) {
    q35_huge_free(ap->data);
    memset(ap, 0, sizeof *ap);
}

typedef struct {
    q35_headscan_fn fn;
    const q35_lmhead_approx *ap;
    const q35_headscan_act *act;
    float *a, *e;
} scan_ctx;

static void scan_task(void *vctx, int i, int n) {
    scan_ctx *ctx = vctx;
    const int64_t V = ctx->ap->rows, r0 = V * i / n, r1 = V * (i + 1) / n;
    ctx->fn(ctx->ap->data, ctx->ap->row_bytes, ctx->act, r0, r1, ctx->a, ctx->e);
}

/* The scan's 8-bit activation blocks of h and each block's bound weight c_b (headscan.h). */
static void prep_act(int64_t H, int quantized_exact, const float *h, q35_lmhead_scratch *sc) {
    const int nb = (int)(H / 32);
    const float u = FLT_EPSILON / 2;               /* unit roundoff of float32 */
    const float r = 0.5f * (1.0f + 16.0f * u);      /* rounding to the nearest step, plus the division's error */
    const float eps_exact = 1.0f / 256.0f + (float)H * u * 1.01f; /* exact kernel: bf16 activations at worst + fp32 sums */
    const float fp_scan = u * (200000.0f + 60000.0f * (float)nb);  /* rounding inside the scan itself (see headscan.h) */
    for (int b = 0; b < nb; b++) {
        const float *x = h + 32 * b;
        float mx = 0, l1 = 0;
        for (int k = 0; k < 32; k++) {
            mx = fabsf(x[k]) > mx ? fabsf(x[k]) : mx;
            l1 += fabsf(x[k]);
        }
        l1 *= 1.0f + 64.0f * u;
        const float dh = mx / 127.0f, inv = dh > 0 ? 1.0f / dh : 0;
        int32_t sum = 0;
        for (int k = 0; k < 32; k++) {
            int q = (int)lrintf(x[k] * inv);
            q = q < -127 ? -127 : q > 127 ? 127 : q;
            sc->qh[32 * b + k] = (int8_t)q;
            sum += q;
        }
        sc->dh[b] = dh;
        sc->g[b] = 8.0f * dh * (float)sum;
        /* |exact - approx| per unit of d_b: weight rounding r*||h||_1, activation rounding
         * 7*32*r*dh (|q| <= 7), the exact kernel's own error (|w| <= 7.5 d_b), the scan's rounding. */
        /* A block-quantized exact head is scored with 8-bit activations: |h - h'| <= max|h_b| / 254. */
        const float act8 = quantized_exact ? 7.5f * 32.0f * (0.5f / 127.0f) * 1.01f * mx : 0.0f;
        sc->c[b] = (r * l1 + 224.0f * r * dh + 7.5f * eps_exact * l1 + act8 + fp_scan * dh) * (1.0f + 4.0f * (float)nb * u) * 1.001f;
    }
}

double q35_lmhead_trial(const q35_tensor *head, const float *h, const float *logits, q35_lmhead_scratch *sc) {
    if (head->ndim != 2 || head->shape[1] % 32 != 0) return 1.0;
    const int64_t V = head->shape[0], H = head->shape[1], nb = H / 32, stride = V > 4096 ? V / 4096 : 1, ns = (V + stride - 1) / stride;
    const size_t row_bytes = (size_t)(18 * nb);
    uint8_t *rows = malloc(row_bytes * (size_t)(ns + 1));
    float *full = malloc(sizeof(float) * (size_t)H), *a = malloc(sizeof(float) * (size_t)(ns + 1)), *e = malloc(sizeof(float) * (size_t)(ns + 1));
    double frac = 1.0;
    if (rows && full && a && e) {
        /* the sample, then the exhaustive winner j: a_j - e_j <= best_low, so the estimate errs high */
        const int64_t j = q35_argmax(logits, V);
        for (int64_t k = 0; k < ns; k++) build_row(head, k * stride, H, rows + (size_t)k * row_bytes, full);
        build_row(head, j, H, rows + (size_t)ns * row_bytes, full);
        prep_act(H, q35_dtype_block(head->dtype) > 1, h, sc);
        const q35_headscan_act act = {(int)nb, sc->qh, sc->dh, sc->g, sc->c};
        q35_headscan_best()(rows, row_bytes, &act, 0, ns + 1, a, e); /* row k's score and bound: a[k], e[k] */
        const float best_low = a[ns] - e[ns];
        int64_t hit = 0;
        for (int64_t k = 0; k < ns; k++) hit += a[k] + e[k] >= best_low;
        frac = (double)hit / (double)ns;
    }
    free(rows);
    free(full);
    free(a);
    free(e);
    return frac;
}

int32_t q35_lmhead_argmax(const q35_tensor *head, const q35_lmhead_approx *ap, const float *h, q35_lmhead_scratch *sc, int *n_rescored) {
    const int64_t V = ap->rows, H = ap->cols;
    const int nb = (int)(H / 32);
    prep_act(H, ap->quantized_exact, h, sc);
    q35_headscan_act act = {nb, sc->qh, sc->dh, sc->g, sc->c};
    scan_ctx ctx = {q35_headscan_best(), ap, &act, sc->a, sc->e};
    q35_pool *pool = q35_global_pool();
    const int tasks = q35_pool_threads(pool) * 4;
    q35_pool_run(pool, tasks > 0 ? tasks : 1, scan_task, &ctx);
    float best_low = -INFINITY;
    for (int64_t i = 0; i < V; i++) best_low = fmaxf(best_low, sc->a[i] - sc->e[i]);
    int32_t best = -1;
    int n = 0;
    for (int64_t i = 0; i < V; i++) {
        if (!(sc->a[i] + sc->e[i] >= best_low)) continue;
        q35_matmul_rows(head, h, 1, sc->exact, i, i + 1);
        n++;
        if (best < 0 || sc->exact[i] > sc->exact[best]) best = (int32_t)i;
    }
    if (n_rescored) *n_rescored = n;
    return best;
}
