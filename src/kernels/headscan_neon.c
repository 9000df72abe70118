/* NEON (armv8-a) approximate LM-head scan: smull / smlal of the (q+8) nibbles by the int8
 * activations, 16-bit lanes of at most 4 products (4 x 15 x 128 < 2^15), widened once per block. */
#if defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/headscan.h"
#include "kernels/prefetch.h"

void q35_headscan_neon(const uint8_t *rows, size_t row_bytes, const q35_headscan_act *act, int64_t r0, int64_t r1, float *a, float *e) {
    const int nb = act->nb;
    const uint8x16_t low = vdupq_n_u8(15);
    const q35_pf_dist pd = q35_pf_for(Q35_DT_Q4_0); /* Q4_0-like rows */
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        const uint8_t *nib = row + 2 * (size_t)nb;
        q35_pf(pd, row, (int64_t)row_bytes); /* rows lie end to end: one stream */
        float32x4_t acc = vdupq_n_f32(0.0f), acc_g = acc, acc_e = acc;
        int b = 0;
        for (; b + 4 <= nb; b += 4) {
            const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(row + 2 * b)));
            acc_g = vfmaq_f32(acc_g, d, vld1q_f32(act->g + b));
            acc_e = vfmaq_f32(acc_e, d, vld1q_f32(act->c + b));
            const float32x4_t dd = vmulq_f32(d, vld1q_f32(act->dh + b));
            int32_t s[4];
            for (int k = 0; k < 4; k++) {
                const uint8x16_t v = vld1q_u8(nib + 16 * (b + k));
                const int8x16_t qlo = vreinterpretq_s8_u8(vandq_u8(v, low)), qhi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                const int8x16_t xlo = vld1q_s8(act->qh + 32 * (b + k)), xhi = vld1q_s8(act->qh + 32 * (b + k) + 16);
                int16x8_t p = vmull_s8(vget_low_s8(qlo), vget_low_s8(xlo));
                p = vmlal_high_s8(p, qlo, xlo);
                p = vmlal_s8(p, vget_low_s8(qhi), vget_low_s8(xhi));
                p = vmlal_high_s8(p, qhi, xhi);
                s[k] = vaddlvq_s16(p);
            }
            acc = vfmaq_f32(acc, vcvtq_f32_s32(vld1q_s32(s)), dd);
        }
        float sa = vaddvq_f32(acc) - vaddvq_f32(acc_g), se = vaddvq_f32(acc_e);
        q35_headscan_blocks(row, b, act, &sa, &se); /* tail blocks */
        a[r] = sa;
        e[r] = se;
    }
}
#endif
