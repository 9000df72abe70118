/* Causal attention kernels (attention.h) over the products and exp of a gdn_chunk.h table. */
#include "kernels/attention.h"

#include <math.h>
#include <string.h>

size_t q35_attn_block_work(int G, int nq, int hd) {
    return (size_t)hd * Q35_ATTN_BK + (size_t)G * ((size_t)nq * Q35_ATTN_BK + (size_t)nq * hd + 2 * (size_t)nq);
}

void q35_attend_block(const q35_gdn_kernels *kn, const float *q, int ldq, int qh, int G, int nq, int qpos0, const float *K, const float *V,
                      int ldkv, int hd, float scale, float *o, int ldo, int oh, float *work) {
    float *Kt = work;                                   /* [hd][nk] keys of the tile, transposed */
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
        kn->transpose(K + (size_t)j0 * ldkv, ldkv, Kt, nk, nk, hd);
        for (int g = 0; g < G; g++) {
            float *S = HEAD_S(g), *O = HEAD_O(g);
            kn->gemm(nq - r0, nk, hd, q + (size_t)g * qh + (size_t)r0 * ldq, ldq, Kt, nk, S + (size_t)r0 * nk, nk, 0.0f, Q35_TRI_NONE);
            for (int r = r0; r < nq; r++) {
                const int vis = qpos0 + r + 1 - j0 < nk ? qpos0 + r + 1 - j0 : nk; /* keys j0 .. qpos0 + r */
                const float corr = kn->softmax_row(S + (size_t)r * nk, vis, nk, scale, &HEAD_MX(g)[r], &HEAD_SUM(g)[r]);
                if (corr != 1.0f) kn->scale(O + (size_t)r * hd, corr, hd);
            }
            kn->gemm(nq - r0, hd, nk, S + (size_t)r0 * nk, nk, V + (size_t)j0 * ldkv, ldkv, O + (size_t)r0 * hd, hd, 1.0f, Q35_TRI_NONE);
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

void q35_attend_one(const q35_gdn_kernels *kn, const float *q, int qh, int G, const float *K, const float *V, int ldkv, int n_kv, int hd,
                    float scale, float *o, int oh, float *scores) {
    kn->gemm_nt(G, n_kv, hd, q, qh, K, ldkv, scores, n_kv); /* scores [G][n_kv] */
    float sum[8];
    for (int g = 0; g < G; g++) {
        float m = -INFINITY;
        sum[g] = 0;
        kn->softmax_row(scores + (size_t)g * n_kv, n_kv, n_kv, scale, &m, &sum[g]);
    }
    kn->gemm(G, hd, n_kv, scores, n_kv, V, ldkv, o, oh, 0.0f, Q35_TRI_NONE);
    for (int g = 0; g < G; g++) kn->scale(o + (size_t)g * oh, 1.0f / sum[g], hd);
}
