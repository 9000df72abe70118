/* Causal attention kernels (attention.h) over the products and exp of a gdn_chunk.h table. */
#include "kernels/attention.h"

#include <math.h>
#include <string.h>

size_t q35_attn_block_work(int G, int nq, int hd) {
    return 2 * (size_t)hd * Q35_ATTN_BK + (size_t)G * ((size_t)nq * Q35_ATTN_BK + (size_t)nq * hd + 2 * (size_t)nq);
}

/* rows [j0, j0 + nk) of an fp16 cache (ld halves apart) as fp32 rows of hd into F */
static void tile_f32(const q35_gdn_kernels *kn, const void *X, int ld, int j0, int nk, int hd, float *F) {
    for (int j = 0; j < nk; j++) kn->from_f16((const uint16_t *)X + (size_t)(j0 + j) * ld, F + (size_t)j * hd, hd);
}

void q35_attend_block(const q35_gdn_kernels *kn, const float *q, int ldq, int qh, int G, int nq, int qpos0, const void *K, const void *V,
                      int f16, int ldkv, int hd, float scale, float *o, int ldo, int oh, float *work) {
    float *F = work;                                    /* [nk][hd] fp16 cache rows of the tile as fp32 (f16) */
    float *Kt = work + (size_t)hd * Q35_ATTN_BK;        /* [hd][nk] keys of the tile, transposed */
    const size_t per = (size_t)nq * Q35_ATTN_BK + (size_t)nq * hd + 2 * (size_t)nq;
    /* per head g at Kt + hd*BK + g*per:  S [nq][nk] scores, then probabilities;  O [nq][hd]
     * unnormalised output;  mx [nq] running max;  sum [nq] running sum of exp */
#define HEAD_S(g) (Kt + (size_t)hd * Q35_ATTN_BK + (size_t)(g) * per)
#define HEAD_O(g) (HEAD_S(g) + (size_t)nq * Q35_ATTN_BK)
#define HEAD_MX(g) (HEAD_O(g) + (size_t)nq * hd)
#define HEAD_SUM(g) (HEAD_MX(g) + nq)
    const int n_keys = qpos0 + nq;
    for (int g = 0; g < G; g++) {
        for (int r = 0; r < nq; r++) HEAD_MX(g)[r] = -INFINITY, HEAD_SUM(g)[r] = 0;
        memset(HEAD_O(g), 0, sizeof(float) * (size_t)nq * hd);
    }
    for (int j0 = 0; j0 < n_keys; j0 += Q35_ATTN_BK) {
        const int nk = n_keys - j0 < Q35_ATTN_BK ? n_keys - j0 : Q35_ATTN_BK;
        /* rows whose first visible key is past this tile see nothing here (nor in later tiles) */
        const int r0 = j0 - qpos0 > 0 ? j0 - qpos0 : 0;
        if (r0 >= nq) break;
        const float *Vt = (const float *)V + (size_t)j0 * ldkv; /* the tile's values, ldv apart */
        int ldv = ldkv;
        if (f16) {
            tile_f32(kn, K, ldkv, j0, nk, hd, F);
            kn->transpose(F, hd, Kt, nk, nk, hd);
            tile_f32(kn, V, ldkv, j0, nk, hd, F);
            Vt = F, ldv = hd;
        } else {
            kn->transpose((const float *)K + (size_t)j0 * ldkv, ldkv, Kt, nk, nk, hd);
        }
        for (int g = 0; g < G; g++) {
            float *S = HEAD_S(g), *O = HEAD_O(g);
            kn->gemm(nq - r0, nk, hd, q + (size_t)g * qh + (size_t)r0 * ldq, ldq, Kt, nk, S + (size_t)r0 * nk, nk, 0.0f, Q35_TRI_NONE);
            for (int r = r0; r < nq; r++) {
                const int vis = qpos0 + r + 1 - j0 < nk ? qpos0 + r + 1 - j0 : nk; /* keys j0 .. qpos0 + r */
                const float corr = kn->softmax_row(S + (size_t)r * nk, vis, nk, scale, &HEAD_MX(g)[r], &HEAD_SUM(g)[r]);
                if (corr != 1.0f) kn->scale(O + (size_t)r * hd, corr, hd);
            }
            kn->gemm(nq - r0, hd, nk, S + (size_t)r0 * nk, nk, Vt, ldv, O + (size_t)r0 * hd, hd, 1.0f, Q35_TRI_NONE);
        }
    }
    for (int g = 0; g < G; g++)
        for (int r = 0; r < nq; r++)
            kn->scale_to(o + (size_t)g * oh + (size_t)r * ldo, 1.0f / HEAD_SUM(g)[r], HEAD_O(g) + (size_t)r * hd, hd);
#undef HEAD_S
#undef HEAD_O
#undef HEAD_MX
#undef HEAD_SUM
}

int q35_attn_segments(int n_kv) {
    const int n = n_kv / Q35_ATTN_SEG_MIN;
    return n < 1 ? 1 : n > Q35_ATTN_SEG_MAX ? Q35_ATTN_SEG_MAX : n;
}

int q35_attn_seg_start(int n_kv, int nseg, int s) {
    if (s >= nseg) return n_kv;
    return (int)((long long)n_kv * s / nseg / Q35_ATTN_DECODE_BK * Q35_ATTN_DECODE_BK);
}

size_t q35_attn_part_floats(int n_heads, int hd) { return (size_t)n_heads * ((size_t)hd + 2); }

size_t q35_attn_part_work(int n_kv_heads, int group) { return (size_t)n_kv_heads * (group < 8 ? group : 8) * Q35_ATTN_DECODE_BK; }

void q35_attend_part(const q35_gdn_kernels *kn, const float *q, int qh, int n_kv_heads, int group, const void *K, const void *V, int f16,
                     int ldkv, int hd, int k0, int k1, float scale, float *part, float *work) {
    enum { BK = Q35_ATTN_DECODE_BK };
    const int nh = n_kv_heads * group;
    float *O = part, *mx = part + (size_t)nh * hd, *sum = mx + nh; /* [nh][hd], [nh], [nh] */
    float *S = work; /* [n_kv_heads][<= 8][BK] scores of a block, then weights */
    for (int h = 0; h < nh; h++) mx[h] = -INFINITY, sum[h] = 0;
    memset(O, 0, sizeof(float) * (size_t)nh * hd);
    for (int j0 = k0; j0 < k1; j0 += BK) {
        const int nk = k1 - j0 < BK ? k1 - j0 : BK;
        const size_t off = (size_t)j0 * ldkv * (f16 ? 2 : 4);
        const void *Kb = (const char *)K + off, *Vb = (const char *)V + off;
        for (int g0 = 0; g0 < group; g0 += 8) { /* groups of more than 8 heads: the rows again, from cache */
            const int G = group - g0 < 8 ? group - g0 : 8;
            /* S[kh][g][j] = q_(kh*group + g0 + g) . k_(j0+j) of KV head kh */
            if (f16) kn->dot_rows_h(n_kv_heads, G, nk, hd, q + (size_t)g0 * qh, qh, group * qh, Kb, ldkv, S, BK, G * BK);
            else kn->dot_rows(n_kv_heads, G, nk, hd, q + (size_t)g0 * qh, qh, group * qh, Kb, ldkv, S, BK, G * BK);
            for (int kh = 0; kh < n_kv_heads; kh++)
                for (int g = 0; g < G; g++) {
                    const int h = kh * group + g0 + g;
                    const float corr = kn->softmax_row(S + (size_t)(kh * G + g) * BK, nk, nk, scale, &mx[h], &sum[h]);
                    if (corr != 1.0f && j0 > k0) kn->scale(O + (size_t)h * hd, corr, hd);
                }
            if (f16) kn->axpy_rows_h(n_kv_heads, G, nk, hd, S, BK, G * BK, Vb, ldkv, O + (size_t)g0 * hd, group * hd); /* O += S V */
            else kn->axpy_rows(n_kv_heads, G, nk, hd, S, BK, G * BK, Vb, ldkv, O + (size_t)g0 * hd, group * hd);
        }
    }
}

void q35_attend_merge(const q35_gdn_kernels *kn, const float *parts, int nseg, int n_heads, int hd, float *o, int oh) {
    const size_t pf = q35_attn_part_floats(n_heads, hd);
    for (int h = 0; h < n_heads; h++) {
        float *oh_ = o + (size_t)h * oh;
        float M = -INFINITY;
        for (int s = 0; s < nseg; s++) {
            const float m = parts[(size_t)s * pf + (size_t)n_heads * hd + h];
            M = m > M ? m : M;
        }
        float total = 0;
        for (int s = 0; s < nseg; s++) {
            const float *p = parts + (size_t)s * pf;
            const float w = expf(p[(size_t)n_heads * hd + h] - M); /* 1 for the segment holding the max */
            total += w * p[(size_t)n_heads * hd + n_heads + h];
            if (s == 0) kn->scale_to(oh_, w, p + (size_t)h * hd, hd);
            else kn->axpy(oh_, w, p + (size_t)h * hd, hd);
        }
        kn->scale(oh_, 1.0f / total, hd);
    }
}
