/* AVX-512 VNNI approximate LM-head scan: vpdpbusd on (q+8) nibbles x int8 activations, two blocks
 * per 512-bit register. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/headscan.h"
#include "kernels/prefetch.h"

void q35_headscan_avx512(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a,
                         float *e) {
    const int nb = act->nb;
    const __m512i low = _mm512_set1_epi8(15);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q4_0); /* Q4_0-like rows */
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        const uint8_t *nib = row + 2 * (size_t)nb;
        q35_pf(pd, row, (int64_t)row_bytes); /* rows lie end to end: one stream */
        __m512 acc = _mm512_setzero_ps(), acc_g = _mm512_setzero_ps(), acc_e = _mm512_setzero_ps();
        int b = 0;
        for (; b + 16 <= nb; b += 16) {
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * b)));
            acc_g = _mm512_fmadd_ps(d, _mm512_loadu_ps(act->g + b), acc_g);
            acc_e = _mm512_fmadd_ps(d, _mm512_loadu_ps(act->c + b), acc_e);
            float dd[16];
            _mm512_storeu_ps(dd, _mm512_mul_ps(d, _mm512_loadu_ps(act->dh + b)));
            for (int k = 0; k < 16; k += 2) {
                /* two blocks: 32 nibble bytes -> 64 unsigned values in block order */
                const __m256i v = _mm256_loadu_si256((const __m256i *)(nib + 16 * (b + k)));
                const __m256i lo = v, hi = _mm256_srli_epi16(v, 4);
                /* block k: [lo 0..15 | hi 0..15], block k+1: [lo 16..31 | hi 16..31] */
                const __m512i q = _mm512_and_si512(
                    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(lo, hi, 0x20)), _mm256_permute2x128_si256(lo, hi, 0x31), 1),
                    low);
                const __m512i x = _mm512_loadu_si512((const void *)(act->qh + 32 * (b + k)));
                const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, x);
                const __m512 scale = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(dd[k])), _mm256_set1_ps(dd[k + 1]), 1);
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc);
            }
        }
        float sa = _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(acc_g), se = _mm512_reduce_add_ps(acc_e);
        q35_headscan_blocks(row, b, act, &sa, &se); /* tail blocks */
        a[r] = sa;
        e[r] = se;
    }
}
#endif
