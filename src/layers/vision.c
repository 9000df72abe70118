/* The Qwen3.5 vision transformer, spec §5.2-5.5, checked line by line against transformers 5.23
 * (models/qwen3_5/modeling_qwen3_5.py: Qwen3_5VisionModel and its parts; vision_utils.py:
 * get_vision_interpolation_indices_and_weights, get_vision_position_ids, get_vision_cu_seqlens).
 *
 *   x = pixels · patch^T + b                     Conv3d with kernel = stride == one matmul [N][P] x [D][P]^T
 *   x += bilinear(pos table)                     §5.3, align_corners, float32 tap weights (see pos_embed)
 *   per block: x += proj(attn(LN1(x)))           2-D rotary on q and k (§5.4), bidirectional within each frame
 *              x += fc2(gelu_tanh(fc1(LN2(x))))
 *   out = fc2(gelu_erf(fc1(LN(x) viewed as [N/4][4D])))   the 2x2 merger (§5.5)
 *
 * Everything runs in float32 with the weights as stored (bf16/f16/f32 read by q35_matmul_batch). The
 * products use the project's matmul kernels on the global pool; the element-wise steps are split
 * over the pool by rows. */
#include "layers/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/pool.h"
#include "kernels/gdn_chunk.h"
#include "kernels/kernels.h"

#define VIS_QB 256 /* queries per attention block: the scores of a block are [VIS_QB][frame patches] */

/* ---- row-parallel element-wise steps ---- */

typedef struct rows_job rows_job;
typedef void (*row_fn)(const rows_job *j, int r);
struct rows_job {
    row_fn fn;
    const q35_gdn_kernels *kn;
    float *x;              /* [rows][ld] */
    const float *a, *b;    /* per-op vectors */
    float *y;              /* [rows][ldy] (some ops) */
    int n, ld, ldy;        /* row length, strides of x and y */
    float eps, scale;
};

typedef struct rows_dispatch {
    const rows_job *j;
    int rows;
} rows_dispatch;

static void dispatch_task(void *ctx, int i, int n_tasks) {
    const rows_dispatch *d = ctx;
    const int r0 = (int)((long long)d->rows * i / n_tasks), r1 = (int)((long long)d->rows * (i + 1) / n_tasks);
    for (int r = r0; r < r1; r++) d->j->fn(d->j, r);
}

static void run_rows(const rows_job *j, int rows) {
    q35_pool *pool = q35_global_pool();
    const int T = q35_pool_threads(pool);
    rows_dispatch d = {j, rows};
    q35_pool_run(pool, rows >= 8 ? (T < rows ? T : rows) : 1, dispatch_task, &d);
}

/* y = LayerNorm(x) * a + b over n values (torch: biased variance, eps inside the sqrt). */
static void layernorm_row(const rows_job *j, int r) {
    const float *x = j->x + (size_t)r * j->ld;
    float *y = j->y + (size_t)r * j->ldy;
    double mean = 0, var = 0;
    for (int i = 0; i < j->n; i++) mean += x[i];
    mean /= j->n;
    for (int i = 0; i < j->n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= j->n;
    const float m = (float)mean, inv = (float)(1.0 / sqrt(var + j->eps));
    for (int i = 0; i < j->n; i++) y[i] = (x[i] - m) * inv * j->a[i] + j->b[i];
}

/* x += a (a bias of n values) */
static void bias_row(const rows_job *j, int r) {
    float *x = j->x + (size_t)r * j->ld;
    for (int i = 0; i < j->n; i++) x[i] += j->a[i];
}

/* x = gelu_pytorch_tanh(x + a) = (x+a) * sigmoid(2 sqrt(2/pi) (u + 0.044715 u^3)): 0.5 (1 + tanh(z)) = sigmoid(2z) */
static void bias_gelu_tanh_row(const rows_job *j, int r) {
    float *x = j->x + (size_t)r * j->ld;
    float g[256];
    const float k = 2.0f * 0.7978845608028654f;
    for (int i0 = 0; i0 < j->n; i0 += 256) {
        const int m = j->n - i0 < 256 ? j->n - i0 : 256;
        for (int i = 0; i < m; i++) {
            const float u = x[i0 + i] + j->a[i0 + i];
            x[i0 + i] = u;
            g[i] = k * (u + 0.044715f * u * u * u);
        }
        j->kn->sigmoid_mul(x + i0, g, m);
    }
}

/* x = gelu(x + a) with the exact erf (nn.GELU()) */
static void bias_gelu_erf_row(const rows_job *j, int r) {
    float *x = j->x + (size_t)r * j->ld;
    for (int i = 0; i < j->n; i++) {
        const float u = x[i] + j->a[i];
        x[i] = 0.5f * u * (1.0f + erff(u * 0.70710678118654752f));
    }
}

/* x += y + a (y: [rows][ldy] a projection's output, a: its bias [n]): the residual add */
static void residual_row(const rows_job *j, int r) {
    float *x = j->x + (size_t)r * j->ld;
    const float *y = j->y + (size_t)r * j->ldy;
    for (int i = 0; i < j->n; i++) x[i] += y[i] + j->a[i];
}

/* softmax(scale * s) over n scores, in place (the vectorised online-softmax row of the kernels) */
static void softmax_row(const rows_job *j, int r) {
    float *s = j->x + (size_t)r * j->ld, m = -INFINITY, sum = 0;
    j->kn->softmax_row(s, j->n, j->n, j->scale, &m, &sum);
    j->kn->scale(s, 1.0f / sum, j->n);
}

/* A float32 matrix [rows][cols] as a tensor the matmul kernels read. */
static q35_tensor f32_matrix(const float *data, int64_t rows, int64_t cols) {
    q35_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "vision scratch";
    t.dtype = Q35_DT_F32;
    t.ndim = 2;
    t.shape[0] = rows, t.shape[1] = cols;
    t.data = data;
    t.nbytes = (size_t)rows * (size_t)cols * sizeof(float);
    return t;
}

/* Patch coordinates of patch i of a frame in the processor's order (spec §5.1: rows ordered
 * block_row, block_col, in_row, in_col), as vision_utils decodes it. */
static void patch_rc(int within, int gw, int m, int *row, int *col) {
    const int blocks_w = gw / m, in_col = within % m, in_row = (within / m) % m;
    const int block_col = (within / (m * m)) % blocks_w, block_row = within / (m * m * blocks_w);
    *row = block_row * m + in_row;
    *col = block_col * m + in_col;
}

/* The two taps and weights of one axis (vision_utils._interpolation_axis_taps_weights, bilinear,
 * align_corners=True, border padding), in its float32 arithmetic: src = index*(side-1)/max(size-1,1),
 * weight of tap floor+o is max(0, 1 - |(src - floor) - o|). transformers 5.23 keeps these weights in
 * float32 and multiplies them with the table rows in float32 (the release code rounded them to the
 * table dtype first; with a float32 table both agree). */
static void axis_taps(int index, int size, int side, int tap[2], float wt[2]) {
    const float src = (float)(index * (side - 1)) / (float)(size - 1 > 1 ? size - 1 : 1);
    const float fl = floorf(src), d = src - fl;
    for (int o = 0; o < 2; o++) {
        int t = (int)fl + o;
        tap[o] = t > side - 1 ? side - 1 : t;
        const float w = 1.0f - fabsf(d - (float)o);
        wt[o] = w > 0 ? w : 0;
    }
}

q35_status q35_vision_forward(const q35_vision_config *vc, const q35_vision_weights *w, const float *pixels, int gt, int gh, int gw,
                              float *out) {
    const int m = vc->merge, D = vc->hidden, I = vc->intermediate, nh = vc->n_heads, hd = D / nh;
    if (gt < 1 || gh < 1 || gw < 1 || gh % m || gw % m || (long long)gt * gh * gw > (1 << 24))
        return q35_fail(Q35_ERR_ARG, "vision: grid %dx%dx%d must be positive with height and width multiples of the merge size %d", gt, gh,
                        gw, m);
    const int F = gh * gw, N = gt * F; /* patches per frame, in all */
    const int wide = I > 3 * D ? I : 3 * D;
    const int qb = F < VIS_QB ? F : VIS_QB;
    const size_t nf = (size_t)N * D * 3 + (size_t)N * wide + (size_t)N * hd /* cos+sin */ + (size_t)F * hd * 2 /* K, V^T */ +
                      (size_t)qb * F /* scores */ + (size_t)qb * hd * 2 /* q block, o block */;
    float *buf = malloc(nf * sizeof(float));
    if (!buf) return q35_fail(Q35_ERR_NOMEM, "vision: out of memory for an image of %d patches (%.0f MB of scratch)", N, nf * 4e-6);
    float *x = buf;                          /* [N][D] residual stream */
    float *xn = x + (size_t)N * D;           /* [N][D] normed input / attention output */
    float *tmp = xn + (size_t)N * D;         /* [N][D] projection output */
    float *big = tmp + (size_t)N * D;        /* [N][wide] qkv (3D) or MLP hidden (I) */
    float *rc = big + (size_t)N * wide;      /* [N][hd/2] cos, then [N][hd/2] sin */
    float *rs = rc + (size_t)N * hd / 2;
    float *Kh = rs + (size_t)N * hd / 2;     /* [F][hd] keys of one head of one frame */
    float *VhT = Kh + (size_t)F * hd;        /* [hd][F] its values, transposed */
    float *S = VhT + (size_t)F * hd;         /* [qb][F] scores */
    float *Qb = S + (size_t)qb * F;          /* [qb][hd] */
    float *Ob = Qb + (size_t)qb * hd;        /* [qb][hd] */
    const q35_gdn_kernels *kn = q35_gdn_kernels_best();

    /* 1. patch embedding */
    q35_matmul_batch(&w->patch, pixels, N, x);
    rows_job j = {bias_row, kn, x, w->patch_b, NULL, NULL, D, D, 0, 0, 0};
    run_rows(&j, N);

    /* 2. interpolated learned positions and the 2-D rotary angles, per patch */
    const int side = vc->pos_side, S4 = hd / 4;
    float inv_freq[1024];
    for (int i = 0; i < S4 && i < 1024; i++) /* Qwen3_5VisionRotaryEmbedding: dim = head_dim / 2, inv = 1 / theta^(2i / dim) */
        inv_freq[i] = 1.0f / powf((float)vc->rope_theta, (float)(2 * i) / (float)(hd / 2));
    for (int p = 0; p < N; p++) {
        int row, col;
        patch_rc(p % F, gw, m, &row, &col);
        int th[2], tw[2];
        float wh[2], ww[2];
        axis_taps(row, gh, side, th, wh);
        axis_taps(col, gw, side, tw, ww);
        float *xp = x + (size_t)p * D, *pe = tmp; /* [D] */
        for (int d = 0; d < D; d++) pe[d] = 0;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const float wgt = wh[a] * ww[b];
                const float *tr = w->pos + ((size_t)th[a] * side + tw[b]) * D;
                for (int d = 0; d < D; d++) pe[d] += tr[d] * wgt;
            }
        for (int d = 0; d < D; d++) xp[d] += pe[d];
        /* angles: dims i < hd/4 rotate by row * inv[i], the next hd/4 by col * inv[i - hd/4] (§5.4) */
        for (int i = 0; i < S4; i++) {
            const float ar = (float)row * inv_freq[i], ac = (float)col * inv_freq[i];
            rc[(size_t)p * (hd / 2) + i] = cosf(ar), rs[(size_t)p * (hd / 2) + i] = sinf(ar);
            rc[(size_t)p * (hd / 2) + S4 + i] = cosf(ac), rs[(size_t)p * (hd / 2) + S4 + i] = sinf(ac);
        }
    }

    /* 3. blocks */
    const float scale = 1.0f / sqrtf((float)hd);
    for (int l = 0; l < vc->depth; l++) {
        const q35_vision_block *B = &w->blocks[l];
        rows_job ln = {layernorm_row, kn, x, B->norm1_w, B->norm1_b, xn, D, D, D, 1e-6f, 0};
        run_rows(&ln, N);
        q35_matmul_batch(&B->qkv, xn, N, big); /* [N][3D]: q | k | v */
        rows_job bq = {bias_row, kn, big, B->qkv_b, NULL, NULL, 3 * D, 3 * D, 0, 0, 0};
        run_rows(&bq, N);
        for (int p = 0; p < N; p++) /* rotary on q and k of every head (apply_rotary_pos_emb_vision, float32) */
            for (int h = 0; h < 2 * nh; h++) q35_rope_neox(big + (size_t)p * 3 * D + (size_t)h * hd, hd, rc + (size_t)p * (hd / 2), rs + (size_t)p * (hd / 2));
        /* bidirectional attention within each frame (cu_seqlens: one segment of gh*gw per frame) */
        for (int f = 0; f < gt; f++) {
            const float *seg = big + (size_t)f * F * 3 * D;
            for (int h = 0; h < nh; h++) {
                for (int t = 0; t < F; t++) {
                    memcpy(Kh + (size_t)t * hd, seg + (size_t)t * 3 * D + D + (size_t)h * hd, sizeof(float) * hd);
                    const float *v = seg + (size_t)t * 3 * D + 2 * D + (size_t)h * hd;
                    for (int e = 0; e < hd; e++) VhT[(size_t)e * F + t] = v[e];
                }
                const q35_tensor Kt = f32_matrix(Kh, F, hd), Vt = f32_matrix(VhT, hd, F);
                for (int q0 = 0; q0 < F; q0 += qb) {
                    const int nq = F - q0 < qb ? F - q0 : qb;
                    for (int r = 0; r < nq; r++) memcpy(Qb + (size_t)r * hd, seg + (size_t)(q0 + r) * 3 * D + (size_t)h * hd, sizeof(float) * hd);
                    q35_matmul_batch(&Kt, Qb, nq, S); /* [nq][F] */
                    rows_job sm = {softmax_row, kn, S, NULL, NULL, NULL, F, F, 0, 0, scale};
                    run_rows(&sm, nq);
                    q35_matmul_batch(&Vt, S, nq, Ob); /* [nq][hd] */
                    for (int r = 0; r < nq; r++)
                        memcpy(xn + ((size_t)f * F + q0 + r) * D + (size_t)h * hd, Ob + (size_t)r * hd, sizeof(float) * hd);
                }
            }
        }
        q35_matmul_batch(&B->proj, xn, N, tmp);
        rows_job ra = {residual_row, kn, x, B->proj_b, NULL, tmp, D, D, D, 0, 0};
        run_rows(&ra, N);
        rows_job ln2 = {layernorm_row, kn, x, B->norm2_w, B->norm2_b, xn, D, D, D, 1e-6f, 0};
        run_rows(&ln2, N);
        q35_matmul_batch(&B->fc1, xn, N, big); /* [N][I] */
        rows_job act = {vc->act_exact ? bias_gelu_erf_row : bias_gelu_tanh_row, kn, big, B->fc1_b, NULL, NULL, I, I, 0, 0, 0};
        run_rows(&act, N);
        q35_matmul_batch(&B->fc2, big, N, tmp);
        rows_job rm = {residual_row, kn, x, B->fc2_b, NULL, tmp, D, D, D, 0, 0};
        run_rows(&rm, N);
    }

    /* 4. merger: LayerNorm per patch, 2x2 blocks (contiguous rows) as one vector of m*m*D */
    const int Nm = N / (m * m), M = m * m * D;
    rows_job lm = {layernorm_row, kn, x, w->merge_norm_w, w->merge_norm_b, xn, D, D, D, 1e-6f, 0};
    run_rows(&lm, N);
    q35_matmul_batch(&w->fc1, xn, Nm, big); /* [Nm][M], big holds N*wide >= Nm*M floats */
    rows_job ge = {bias_gelu_erf_row, kn, big, w->fc1_b, NULL, NULL, M, M, 0, 0, 0};
    run_rows(&ge, Nm);
    q35_matmul_batch(&w->fc2, big, Nm, out);
    rows_job bo = {bias_row, kn, out, w->fc2_b, NULL, NULL, vc->out_hidden, vc->out_hidden, 0, 0, 0};
    run_rows(&bo, Nm);
    free(buf);
    return Q35_OK;
}
