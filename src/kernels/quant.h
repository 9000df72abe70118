/* Weight formats: quantizers (f32 -> format), dequantizers (format -> f32), and the interleaved
 * layout the matrix kernels read. Everything here is plain C (scalar), deterministic, and used at
 * load time or in tests; the products themselves live in matmul.c and the per-ISA files.
 *
 * ---- Row-major formats (Q35_LAYOUT_ROWS), one row = cols/block blocks, little-endian ----
 * Q8_0  block of 32, 34 bytes: f16 d; int8 q[32].             x[j] = d*q[j]        (GGUF Q8_0)
 * Q4_0  block of 32, 18 bytes: f16 d; u8 qs[16].              x[j] = d*((qs[j] & 15) - 8),
 *                                                              x[j+16] = d*((qs[j] >> 4) - 8), j < 16 (GGUF Q4_0)
 * Q4_K  super-block of 256, 144 bytes (GGUF block_q4_K): f16 d; f16 dmin; u8 scales[12]; u8 qs[128].
 *       Sub-block s (32 values, s = 0..7) has 6-bit scale sc_s and min m_s:
 *         s < 4: sc = scales[s] & 63, m = scales[s+4] & 63;
 *         s >= 4: sc = (scales[s+4] & 15) | (scales[s-4] >> 6) << 4, m = (scales[s+4] >> 4) | (scales[s] >> 6) << 4.
 *       Value e = 64k + 32h + l (k < 4, h < 2, l < 32): q = h ? qs[32k+l] >> 4 : qs[32k+l] & 15;
 *       x = (d*sc_s)*q - dmin*m_s with s = e/32.
 * Q6_K  super-block of 256, 210 bytes (GGUF block_q6_K): u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d.
 *       Value e = 128h + 32p + l (h < 2, p < 4, l < 32):
 *         lo = p < 2 ? ql[64h + 32(p&1) + l] & 15 : ql[64h + 32(p&1) + l] >> 4,
 *         hi = (qh[32h + l] >> 2p) & 3,  q = (lo | hi << 4) - 32  (-32..31),
 *         x = d*scales[e/16]*q.
 * Q4R   q35's 4-bit format, 18 bytes per 32 values; rows of cols % 128 == 0 only.
 *       Each 128-column group g of a row is rotated, v = R w[128g .. 128g+127], with
 *         R = (1/sqrt(128)) * H_128 * diag(s),
 *       H_128 the Sylvester Hadamard matrix (H[i][j] = (-1)^popcount(i & j)), s[j] = -1 where bit
 *       (j % 32) of Q35_Q4R_SIGNS[j / 32] is set, else +1. R is orthogonal, so W x = (W R^T)(R x):
 *       the kernels apply the same R to each 128-group of the activations once per product.
 *       v is stored as four Q4_0 blocks (same bytes, same order, same nibble convention as Q4_0),
 *       with d chosen per block by a small search minimising sum (v - d*(q-8))^2 over the f16-rounded
 *       candidates (see quant.c). Dequantization returns R^T v (the original basis).
 *       R is applied as: multiply by s, then the butterfly stages h = 1, 2, 4, ..., 64 in that order
 *       (pairs (i, i+h): (a, b) -> (a+b, a-b)), then multiply by Q35_Q4R_SCALE (float nearest to
 *       1/sqrt(128)). Every ISA runs exactly these float operations, so rotated activations are
 *       bitwise identical everywhere.
 *
 * ---- Interleaved layout Q35_LAYOUT_R16 (made by q35_tensor_repack; Q8_0, Q4_0, Q4R, Q4_K, Q6_K) ----
 * Rows go in groups of 16 (the last group padded with zero rows); group g starts at data + g*stride.
 * A "chunk" is 64 bytes: 16 rows x 4 bytes, row r at bytes 4r..4r+3, so one 512-bit vector (or two
 * 256-bit, four 128-bit) holds 4 consecutive quants of each of 16 rows in its 32-bit lanes.
 * Per 32-column block b of a group, Q4_0 / Q4R: chunks c = 0..3, chunk c byte 4r+i = qs[4c+i] of
 *   row r (low nibble: value 4c+i, high nibble: value 16+4c+i, both 0..15 with the -8 offset).
 *   Q8_0: chunks c = 0..7, chunk c byte 4r+i = q[4c+i] ^ 0x80 of row r (0..255, value q+128).
 * Group of Q8_0 / Q4_0 / Q4R (nb = cols/32 blocks): runs of Q35_R16_RUN = 32 blocks (the last one
 *   shorter), each f16 d[k][16] of its k blocks (padded to a multiple of 64 bytes), then the chunks
 *   of its blocks in order. (Until q35.format_version 2 a group kept all nb blocks' scales first:
 *   in a long row the kernels then read two places 3.5 KiB and more apart, and the 1024 x 3584 down
 *   projection streamed at 19 GB/s where 32-block rows streamed at 27; docs/speed.md.)
 * Group of Q4_K, per super-block: f16 d[16]; f16 dmin[16]; u8 sc[8][16]; u8 m[8][16]; then for
 *   sub-block s = 0..7 the 4 chunks of its 32 values in the Q4_0 arrangement above (q 0..15) —
 *   2368 bytes per super-block of 16 rows.
 * Group of Q6_K, per super-block: f16 d[16]; int8 sc[16 sub-blocks][16 rows]; then for each
 *   32-value block j = 0..7: 4 chunks L_c with the low 4 bits of (q+32) in the Q4_0 arrangement
 *   (value 4c+i low nibble, 16+4c+i high nibble), then 2 chunks H_k (k = 0, 1) whose byte 4r+i
 *   holds in bits 2m..2m+1 the top 2 bits of (q+32) of value 4(4k+m)+i — 3360 bytes per
 *   super-block of 16 rows, the same as 16 GGUF blocks.
 */
#ifndef Q35_KERNELS_QUANT_H
#define Q35_KERNELS_QUANT_H
#include <stddef.h>
#include <stdint.h>

#include "model/tensor.h"

/* Sign pattern of the Q4R rotation: s[j] = -1 where bit j%32 of word j/32 is set (the first 128
 * fraction bits of sqrt(2), sqrt(3), sqrt(5), sqrt(7): no structure to align with H_128). */
static const uint32_t Q35_Q4R_SIGNS[4] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au};
#define Q35_Q4R_SCALE 0.0883883476483184405f /* 1/sqrt(128) */
#define Q35_Q4R_GROUP 128

/* IEEE half from float, round to nearest even (overflow -> inf, NaN kept). */
uint16_t q35_f32_to_f16(float f);

/* Does dtype `dt` encode rows of `cols` values? (Q4R: cols % 128; k-quants: % 256; Q8_0/Q4_0: % 32;
 * F32/F16/BF16: any.) */
int q35_quant_supports(q35_dtype dt, int64_t cols);

/* One row: x[n] -> dst (q35_row_bytes(dt, n) bytes). Returns 0, or -1 when !q35_quant_supports. */
int q35_quantize_row(q35_dtype dt, const float *x, void *dst, int64_t n);
/* One row: src (q35_row_bytes(dt, n) bytes) -> y[n]. Returns 0, or -1 when !q35_quant_supports. */
int q35_dequantize_row(q35_dtype dt, const void *src, float *y, int64_t n);

/* The Q4R rotation of 128 values in place (v = R v) and its inverse (v = R^T v). */
void q35_q4r_rotate(float *v);
void q35_q4r_unrotate(float *v);

/* Q8_0 / Q4_0 / Q4R groups hold their blocks in runs of Q35_R16_RUN: a run of k blocks is their
 * scales (f16 d[k][16], padded to a multiple of 64 bytes), then their chunks; qb = 256 (Q4) or 512
 * (Q8_0) bytes of chunks a block. Offsets in a group: */
#define Q35_R16_RUN 32
static inline int64_t q35_r16_run_scale_bytes(int64_t k) { return (k * 32 + 63) & ~(int64_t)63; }
static inline int64_t q35_r16_run_at(int64_t b0, int64_t qb) { return (b0 / Q35_R16_RUN) * (Q35_R16_RUN * (32 + qb)); } /* run starting at block b0 */
static inline int64_t q35_r16_run_len(int64_t nb, int64_t b0) { return nb - b0 < Q35_R16_RUN ? nb - b0 : Q35_R16_RUN; }
/* Block b's scales (f16 d[16]) and its chunks, in a group of nb blocks */
static inline const uint8_t *q35_r16_scales(const uint8_t *grp, int64_t b, int64_t qb) {
    return grp + q35_r16_run_at(b, qb) + 32 * (b % Q35_R16_RUN);
}
static inline const uint8_t *q35_r16_chunks(const uint8_t *grp, int64_t nb, int64_t b, int64_t qb) {
    const int64_t b0 = b - b % Q35_R16_RUN;
    return grp + q35_r16_run_at(b0, qb) + q35_r16_run_scale_bytes(q35_r16_run_len(nb, b0)) + qb * (b - b0);
}

/* Bytes of the Q35_LAYOUT_R16 copy of row-major W (0: no interleaved layout for W's dtype). */
size_t q35_repack_size(const q35_tensor *W);
/* Bytes between groups of 16 rows in the R16 layout of dtype dt with `cols` columns. */
size_t q35_r16_group_bytes(q35_dtype dt, int64_t cols);
/* Writes the R16 copy of row-major W into dst (q35_repack_size(W) bytes, 64-byte aligned) and sets
 * *out = *W with data = dst, nbytes, layout = Q35_LAYOUT_R16 (out may be W). Returns 0, or -1 when
 * W has no R16 layout or is not row-major. */
int q35_tensor_repack(const q35_tensor *W, void *dst, q35_tensor *out);
/* y[cols] = row r of W (any dtype and layout the kernels read) as float32. */
void q35_tensor_dequant_row(const q35_tensor *W, int64_t r, float *y);
#endif
