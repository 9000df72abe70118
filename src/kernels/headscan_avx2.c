/* AVX2 approximate LM-head scan: maddubs on (q+8) nibbles x int8 activations. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/headscan.h"
#include "kernels/prefetch.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void q35_headscan_avx2(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e) {
    const int nb = act->nb;
    const __m256i low = _mm256_set1_epi8(15);
    const __m256i ones = _mm256_set1_epi16(1);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q4_0); /* Q4_0-like rows */
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        const uint8_t *nib = row + 2 * (size_t)nb;
        q35_pf(pd, row, (int64_t)row_bytes); /* rows lie end to end: one stream */
        __m256 acc = _mm256_setzero_ps(), acc_g = _mm256_setzero_ps(), acc_e = _mm256_setzero_ps();
        int b = 0;
        for (; b + 8 <= nb; b += 8) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * b)));
            acc_g = _mm256_fmadd_ps(d, _mm256_loadu_ps(act->g + b), acc_g);
            acc_e = _mm256_fmadd_ps(d, _mm256_loadu_ps(act->c + b), acc_e);
            float dd[8];
            _mm256_storeu_ps(dd, _mm256_mul_ps(d, _mm256_loadu_ps(act->dh + b)));
            for (int k = 0; k < 8; k++) {
                const __m128i v = _mm_loadu_si128((const __m128i *)(nib + 16 * (b + k)));
                const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), low);
                const __m256i x = _mm256_loadu_si256((const __m256i *)(act->qh + 32 * (b + k)));
                const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), ones);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dd[k]), acc);
            }
        }
        float sa = hsum8(acc) - hsum8(acc_g), se = hsum8(acc_e);
        q35_headscan_blocks(row, b, act, &sa, &se); /* tail blocks */
        a[r] = sa;
        e[r] = se;
    }
}
#endif
