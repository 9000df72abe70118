/* Causal softmax attention of one query head over a KV cache, for a block of consecutive queries
 * (prompt chunks: tiled products with an online softmax) or one query (generation). */
#ifndef Q35_KERNELS_ATTENTION_H
#define Q35_KERNELS_ATTENTION_H
#include <stddef.h>

#include "kernels/gdn_chunk.h"

#define Q35_ATTN_BK 128 /* keys per tile */

/* Floats of work attend_block needs for G heads of nq queries of dimension hd. */
size_t q35_attn_block_work(int G, int nq, int hd);

/* G query heads that share one KV head (GQA), nq queries each: query r of head g at
 * q + g*qh + r*ldq ([hd], already normed and rotated), at absolute position qpos0 + r, attends to
 * keys 0 .. qpos0 + r (K, V rows at stride ldkv). Output row r of head g at o + g*oh + r*ldo
 * receives softmax(q K^T scale) V. Each tile of keys is transposed once for the G heads.
 * work: q35_attn_block_work(G, nq, hd) floats. */
void q35_attend_block(const q35_gdn_kernels *kn, const float *q, int ldq, int qh, int G, int nq, int qpos0, const float *K, const float *V,
                      int ldkv, int hd, float scale, float *o, int ldo, int oh, float *work);

/* One query of each of G <= 8 heads sharing a KV head (head g at q + g*qh) over n_kv keys; each
 * K and V row is read once for the G heads. o + g*oh receives head g's output; scores: [G][n_kv]
 * work. */
void q35_attend_one(const q35_gdn_kernels *kn, const float *q, int qh, int G, const float *K, const float *V, int ldkv, int n_kv, int hd,
                    float scale, float *o, int oh, float *scores);
#endif
