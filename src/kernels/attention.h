/* Causal softmax attention of one query head over a KV cache, for a block of consecutive queries
 * (prompt chunks: tiled products with an online softmax) or one query (generation). */
#ifndef Q35_KERNELS_ATTENTION_H
#define Q35_KERNELS_ATTENTION_H
#include <stddef.h>

#include "kernels/gdn_chunk.h"

#define Q35_ATTN_BK 128 /* keys per tile */

/* Floats of work attend_block needs for G heads of nq queries of dimension hd. */
size_t q35_attn_block_work(int G, int nq, int hd);

/* The KV cache is fp32 (f16 = 0) or IEEE halves (f16 = 1), rows ldkv elements apart; an fp16
 * cache gives bitwise what the fp32 path gives on the rounded values (its rows are converted to
 * fp32 and go through the same kernels).
 *
 * G query heads that share one KV head (GQA), nq queries each: query r of head g at
 * q + g*qh + r*ldq ([hd], already normed and rotated), at absolute position qpos0 + r, attends to
 * keys 0 .. qpos0 + r (K, V rows at stride ldkv). Output row r of head g at o + g*oh + r*ldo
 * receives softmax(q K^T scale) V. Each tile of keys is transposed once for the G heads.
 * work: q35_attn_block_work(G, nq, hd) floats. */
void q35_attend_block(const q35_gdn_kernels *kn, const float *q, int ldq, int qh, int G, int nq, int qpos0, const void *K, const void *V,
                      int f16, int ldkv, int hd, float scale, float *o, int ldo, int oh, float *work);

/* Generation: one query of every head over the whole cache. The keys [0, n_kv) are cut into
 * segments (q35_attn_segments: a function of n_kv only, so the result does not depend on how many
 * threads share them), each segment gives a partial softmax (q35_attend_part), and the partials
 * are merged in segment order (q35_attend_merge). */
#define Q35_ATTN_DECODE_BK 64 /* keys per block inside a segment */
#define Q35_ATTN_SEG_MIN 256  /* keys per segment at least (segments are dispatched to threads) */
#define Q35_ATTN_SEG_MAX 8    /* segments at most */

/* Segments of a query over n_kv >= 1 keys; segment s covers [q35_attn_seg_start(n_kv, nseg, s),
 * q35_attn_seg_start(n_kv, nseg, s + 1)), each start a multiple of Q35_ATTN_DECODE_BK. */
int q35_attn_segments(int n_kv);
int q35_attn_seg_start(int n_kv, int nseg, int s);

/* Floats of one partial of n_heads heads of dimension hd: O [n_heads][hd] (unnormalised output),
 * m [n_heads] (largest scaled score), sum [n_heads] (sum of exp(score - m)). */
size_t q35_attn_part_floats(int n_heads, int hd);
/* Floats of work q35_attend_part needs for n_kv_heads GQA groups of `group` heads. */
size_t q35_attn_part_work(int n_kv_heads, int group);

/* The partial of keys [k0, k1) for one query of n_heads = n_kv_heads * group heads: head h at
 * q + h*qh ([hd], normed and rotated) reads KV head h / group, whose rows are at K + (h/group)*hd
 * + j*ldkv (V likewise). Blocks of keys in order; the kernels (dot_rows / axpy_rows) read each K
 * and V row once, every KV head of it in turn, so the cache streams through memory in order. */
void q35_attend_part(const q35_gdn_kernels *kn, const float *q, int qh, int n_kv_heads, int group, const void *K, const void *V, int f16,
                     int ldkv, int hd, int k0, int k1, float scale, float *part, float *work);
/* Head h of the result at o + h*oh: the nseg partials at parts + s * q35_attn_part_floats(...),
 * merged in order s = 0, 1, ... */
void q35_attend_merge(const q35_gdn_kernels *kn, const float *parts, int nseg, int n_heads, int hd, float *o, int oh);
#endif
