/* The Q6_K codes of one 32-value block of a 16-row R16 group (quant.h: 4 chunks L of low nibbles,
 * then 2 chunks H of top bits), for AVX-512 code (mm_avx512.c, mm_amx.c): w[c] gets values
 * 4c..4c+3 of the 16 rows (c < 4: values 0..15 of the block, c >= 4: 16..31) as codes q + 32,
 * 0..63. m4 and m30: the caller's set1_epi8(15) and set1_epi8(0x30). */
#ifndef Q35_KERNELS_Q6K_AVX512_H
#define Q35_KERNELS_Q6K_AVX512_H
#include <immintrin.h>
#include <stdint.h>

#include "kernels/unroll.h"

static inline __attribute__((always_inline)) void q35_q6k_codes512(const uint8_t *L, __m512i m4, __m512i m30, __m512i w[8]) {
    const __m512i h0 = _mm512_loadu_si512((const void *)(L + 256)), h1 = _mm512_loadu_si512((const void *)(L + 320));
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_loadu_si512((const void *)(L + 64 * c));
        w[c] = _mm512_and_si512(v, m4);
        w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    /* top bits of value 4c+i: bits 2(c&3) of H_{c>>2}, moved to bits 4..5 */
    w[0] = _mm512_ternarylogic_epi32(w[0], _mm512_slli_epi16(h0, 4), m30, 0xF8);
    w[1] = _mm512_ternarylogic_epi32(w[1], _mm512_slli_epi16(h0, 2), m30, 0xF8);
    w[2] = _mm512_ternarylogic_epi32(w[2], h0, m30, 0xF8);
    w[3] = _mm512_ternarylogic_epi32(w[3], _mm512_srli_epi16(h0, 2), m30, 0xF8);
    w[4] = _mm512_ternarylogic_epi32(w[4], _mm512_slli_epi16(h1, 4), m30, 0xF8);
    w[5] = _mm512_ternarylogic_epi32(w[5], _mm512_slli_epi16(h1, 2), m30, 0xF8);
    w[6] = _mm512_ternarylogic_epi32(w[6], h1, m30, 0xF8);
    w[7] = _mm512_ternarylogic_epi32(w[7], _mm512_srli_epi16(h1, 2), m30, 0xF8);
}
/* The scales of half `half` (values 16 half .. 16 half + 15) of block s of the Q6_K R16 super-block
 * at sb (quant.h: sc[16][16] int8 at sb + 32), as 16 row floats. */
static inline __attribute__((always_inline)) __m512 q35_q6k_scale512(const uint8_t *sb, int s, int half) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sb + 32 + 16 * (2 * s + half)))));
}
#endif
