/* Quantizers, dequantizers and the R16 interleave (formats specified in quant.h). */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "kernels/mm.h"

uint16_t q35_f32_to_f16(float f) {
    union { float f; uint32_t u; } v = {f};
    const uint32_t sign = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                           /* >= 65520: inf */
    if (a < 0x38800000u) { /* subnormal half (or zero): value / 2^-24, rounded to nearest even */
        union { uint32_t u; float f; } m = {a};
        const float s = m.f * 16777216.0f; /* exact: a scaled by 2^24 */
        return (uint16_t)(sign | (uint32_t)nearbyintf(s));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round the 13 dropped bits, ties to even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float h2f(const uint8_t *p) { return q35_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline void f2h(uint8_t *p, float f) {
    const uint16_t h = q35_f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

int q35_quant_supports(q35_dtype dt, int64_t cols) {
    if (cols <= 0) return 0;
    switch (dt) {
    case Q35_DT_F32: case Q35_DT_F16: case Q35_DT_BF16: return 1;
    case Q35_DT_Q8_0: case Q35_DT_Q4_0: return cols % 32 == 0;
    case Q35_DT_Q4R: return cols % Q35_Q4R_GROUP == 0;
    case Q35_DT_Q4_K: case Q35_DT_Q6_K: return cols % 256 == 0;
    default: return 0;
    }
}

/* ---- Q4R rotation ---- */

static void fwht128(float *v) {
    for (int h = 1; h < 128; h <<= 1)
        for (int i = 0; i < 128; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                const float a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
}
static inline float q4r_sign(int j) { return (Q35_Q4R_SIGNS[j >> 5] >> (j & 31)) & 1u ? -1.0f : 1.0f; }

void q35_q4r_rotate(float *v) {
    for (int j = 0; j < 128; j++) v[j] *= q4r_sign(j);
    fwht128(v);
    for (int j = 0; j < 128; j++) v[j] *= Q35_Q4R_SCALE;
}

void q35_q4r_unrotate(float *v) { /* R^T = diag(s) H / sqrt(128) (H symmetric) */
    fwht128(v);
    for (int j = 0; j < 128; j++) v[j] *= Q35_Q4R_SCALE * q4r_sign(j);
}

/* ---- per-block quantizers (row-major block bytes) ---- */

static void quant_q8_0(const float *x, uint8_t *o) { /* as ggml's reference quantizer */
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(o, d);
    for (int j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void quant_q4_0(const float *x, uint8_t *o) { /* as ggml's reference quantizer */
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(o, d);
    for (int j = 0; j < 16; j++) {
        int a = (int)(int8_t)(x[j] * id + 8.5f), b = (int)(int8_t)(x[j + 16] * id + 8.5f);
        a = a > 15 ? 15 : a;
        b = b > 15 ? 15 : b;
        o[2 + j] = (uint8_t)(a | b << 4);
    }
}

/* Squared error of v[32] coded with scale d (q = clamp(round(v/d), -8, 7), halves away from
 * zero); fills q. Separate statements keep compilers from fusing (same bytes on every platform). */
static float q4_err(const float *v, float d, int *q) {
    const float id = 1.0f / d;
    float r2[32];
    for (int j = 0; j < 32; j++) { /* vectorizable: no reduction here */
        const float t = v[j] * id;
        int k = (int)(t + (t >= 0 ? 0.5f : -0.5f));
        k = k < -8 ? -8 : k;
        k = k > 7 ? 7 : k;
        q[j] = k;
        const float p = d * (float)k;
        const float r = v[j] - p;
        r2[j] = r * r;
    }
    float e = 0;
    for (int j = 0; j < 32; j++) e += r2[j];
    return e;
}

/* Q4R block: the f16 scale with the least squared error among max/-8 .. max/-10 (the extreme
 * value mapped to code -8, or clipped) and max/7 .. max/8 (mapped to +7), then up to two
 * least-squares refits d = <v, q> / <q, q> of the best one's codes. */
static void quant_q4r_block(const float *v, uint8_t *o) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(v[j])) { amax = fabsf(v[j]); max = v[j]; }
    int best_q[32], q[32];
    float best_e = INFINITY, best_d = 0;
    if (amax > 0) {
        static const float div[] = {-8.0f, -8.25f, -8.5f, -8.75f, -9.0f, -9.5f, -10.0f, 7.0f, 7.5f, 8.0f};
        for (size_t c = 0; c < sizeof div / sizeof div[0]; c++) {
            const float d = q35_f16_to_f32(q35_f32_to_f16(max / div[c]));
            if (!(d != 0.0f) || !isfinite(d)) continue;
            const float e = q4_err(v, d, q);
            if (e < best_e) { best_e = e; best_d = d; memcpy(best_q, q, sizeof q); }
        }
        for (int it = 0; it < 2 && best_e < INFINITY; it++) {
            float num = 0, den = 0;
            for (int j = 0; j < 32; j++) {
                const float p = v[j] * (float)best_q[j];
                num += p;
                den += (float)(best_q[j] * best_q[j]);
            }
            if (den == 0) break;
            const float d = q35_f16_to_f32(q35_f32_to_f16(num / den));
            if (!(d != 0.0f) || !isfinite(d) || d == best_d) break;
            const float e = q4_err(v, d, q);
            if (!(e < best_e)) break;
            best_e = e; best_d = d; memcpy(best_q, q, sizeof q);
        }
    }
    if (best_e == INFINITY) { best_d = 0; for (int j = 0; j < 32; j++) best_q[j] = 0; }
    f2h(o, best_d);
    for (int j = 0; j < 16; j++) o[2 + j] = (uint8_t)((best_q[j] + 8) | (best_q[j + 16] + 8) << 4);
}

/* Q4_K super-block (a simple min/max quantizer; GGUF-compatible bytes). */
static void quant_q4_k(const float *x, uint8_t *o) {
    float scale[8], mins[8], maxs = 0, maxm = 0;
    for (int s = 0; s < 8; s++) {
        float mn = 0, mx = 0;
        for (int k = 0; k < 32; k++) { mn = fminf(mn, x[32 * s + k]); mx = fmaxf(mx, x[32 * s + k]); }
        scale[s] = (mx - mn) / 15.0f;
        mins[s] = -mn;
        maxs = fmaxf(maxs, scale[s]);
        maxm = fmaxf(maxm, mins[s]);
    }
    f2h(o, maxs / 63.0f);
    f2h(o + 2, maxm / 63.0f);
    const float d = h2f(o), dmin = h2f(o + 2);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; s++) {
        const float a = d > 0 ? nearbyintf(scale[s] / d) : 0, b = dmin > 0 ? nearbyintf(mins[s] / dmin) : 0;
        sc[s] = (uint8_t)(a > 63 ? 63 : a);
        m[s] = (uint8_t)(b > 63 ? 63 : b);
    }
    uint8_t *scales = o + 4, *qs = o + 16;
    for (int j = 0; j < 4; j++) {
        scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    memset(qs, 0, 128);
    for (int e = 0; e < 256; e++) {
        const int s = e / 32, k = e / 64, h = (e / 32) & 1, l = e % 32;
        const float ds = d * (float)sc[s], ms = dmin * (float)m[s];
        float qf = ds > 0 ? nearbyintf((x[e] + ms) / ds) : 0;
        qf = qf < 0 ? 0 : qf > 15 ? 15 : qf;
        qs[32 * k + l] |= (uint8_t)((int)qf << (4 * h));
    }
}

/* Q6_K super-block (symmetric 6-bit codes per 16 values, 8-bit scales; GGUF-compatible bytes). */
static void quant_q6_k(const float *x, uint8_t *o) {
    float scale[16], amax_s = 0;
    for (int s = 0; s < 16; s++) {
        float amax = 0, max = 0;
        for (int k = 0; k < 16; k++)
            if (amax < fabsf(x[16 * s + k])) { amax = fabsf(x[16 * s + k]); max = x[16 * s + k]; }
        scale[s] = max / -32.0f;
        amax_s = fmaxf(amax_s, fabsf(scale[s]));
    }
    uint8_t *ql = o, *qh = o + 128;
    int8_t *sc = (int8_t *)(o + 192);
    f2h(o + 208, amax_s / 127.0f);
    const float d = h2f(o + 208);
    for (int s = 0; s < 16; s++) {
        const float a = d > 0 ? nearbyintf(scale[s] / d) : 0;
        sc[s] = (int8_t)(a > 127 ? 127 : a < -127 ? -127 : a);
    }
    memset(ql, 0, 128);
    memset(qh, 0, 64);
    for (int e = 0; e < 256; e++) {
        const float ds = d * (float)sc[e / 16];
        float qf = ds != 0 ? nearbyintf(x[e] / ds) : 0;
        qf = qf < -32 ? -32 : qf > 31 ? 31 : qf;
        const int u = (int)qf + 32, h = e / 128, p = (e / 32) & 3, l = e % 32;
        ql[64 * h + 32 * (p & 1) + l] |= (uint8_t)((u & 15) << (p < 2 ? 0 : 4));
        qh[32 * h + l] |= (uint8_t)((u >> 4) << (2 * p));
    }
}

int q35_quantize_row(q35_dtype dt, const float *x, void *dst, int64_t n) {
    if (!q35_quant_supports(dt, n)) return -1;
    uint8_t *o = dst;
    switch (dt) {
    case Q35_DT_F32: memcpy(dst, x, sizeof(float) * (size_t)n); break;
    case Q35_DT_F16:
        for (int64_t i = 0; i < n; i++) f2h(o + 2 * i, x[i]);
        break;
    case Q35_DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = q35_f32_to_bf16(x[i]);
            o[2 * i] = (uint8_t)h;
            o[2 * i + 1] = (uint8_t)(h >> 8);
        }
        break;
    case Q35_DT_Q8_0: for (int64_t b = 0; b < n / 32; b++) quant_q8_0(x + 32 * b, o + 34 * b); break;
    case Q35_DT_Q4_0: for (int64_t b = 0; b < n / 32; b++) quant_q4_0(x + 32 * b, o + 18 * b); break;
    case Q35_DT_Q4R:
        for (int64_t g = 0; g < n / 128; g++) {
            float v[128];
            memcpy(v, x + 128 * g, sizeof v);
            q35_q4r_rotate(v);
            for (int b = 0; b < 4; b++) quant_q4r_block(v + 32 * b, o + 18 * (4 * g + b));
        }
        break;
    case Q35_DT_Q4_K: for (int64_t b = 0; b < n / 256; b++) quant_q4_k(x + 256 * b, o + 144 * b); break;
    case Q35_DT_Q6_K: for (int64_t b = 0; b < n / 256; b++) quant_q6_k(x + 256 * b, o + 210 * b); break;
    default: return -1;
    }
    return 0;
}

/* ---- canonical block views, row-major layout ---- */

static void rows_b32(q35_dtype dt, const uint8_t *blk, float *d, int8_t q[32]) {
    *d = h2f(blk);
    if (dt == Q35_DT_Q8_0) {
        memcpy(q, blk + 2, 32);
    } else {
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((blk[2 + j] & 15) - 8);
            q[j + 16] = (int8_t)((blk[2 + j] >> 4) - 8);
        }
    }
}

static void rows_q4k(const uint8_t *blk, float *d, float *dmin, uint8_t sc[8], uint8_t m[8], uint8_t q[256]) {
    *d = h2f(blk);
    *dmin = h2f(blk + 2);
    const uint8_t *s = blk + 4, *qs = blk + 16;
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            sc[j] = s[j] & 63;
            m[j] = s[j + 4] & 63;
        } else {
            sc[j] = (uint8_t)((s[j + 4] & 15) | (s[j - 4] >> 6) << 4);
            m[j] = (uint8_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
        }
    }
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 32; l++) {
            q[64 * k + l] = qs[32 * k + l] & 15;
            q[64 * k + 32 + l] = qs[32 * k + l] >> 4;
        }
}

static void rows_q6k(const uint8_t *blk, float *d, int8_t sc[16], int8_t q[256]) {
    const uint8_t *ql = blk, *qh = blk + 128;
    memcpy(sc, blk + 192, 16);
    *d = h2f(blk + 208);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, p = (e / 32) & 3, l = e % 32;
        const uint8_t b = ql[64 * h + 32 * (p & 1) + l];
        const int lo = p < 2 ? b & 15 : b >> 4, hi = (qh[32 * h + l] >> (2 * p)) & 3;
        q[e] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* ---- R16 layout ---- */

size_t q35_r16_group_bytes(q35_dtype dt, int64_t cols) {
    switch (dt) {
    case Q35_DT_Q8_0: case Q35_DT_Q4_0: case Q35_DT_Q4R: {
        const int64_t nb = cols / 32, qb = dt == Q35_DT_Q8_0 ? 512 : 256, rem = nb % Q35_R16_RUN;
        return (size_t)(q35_r16_run_at(nb - rem, qb) + (rem ? q35_r16_run_scale_bytes(rem) + rem * qb : 0));
    }
    case Q35_DT_Q4_K: return (size_t)(cols / 256) * 2368;
    case Q35_DT_Q6_K: return (size_t)(cols / 256) * 3360;
    default: return 0;
    }
}

size_t q35_repack_size(const q35_tensor *W) {
    if (W->ndim != 2 || !q35_quant_supports(W->dtype, W->shape[1])) return 0;
    return q35_r16_group_bytes(W->dtype, W->shape[1]) * (size_t)(q35_ceil16(W->shape[0]) / 16);
}

/* Byte address of chunk c of the 32-value block b in a Q8_0/Q4 group, and of its scale. */
static uint8_t *r16_b32_chunk(uint8_t *g, q35_dtype dt, int64_t nb, int64_t b, int c) {
    const int64_t per = dt == Q35_DT_Q8_0 ? 512 : 256, b0 = b - b % Q35_R16_RUN;
    return g + q35_r16_run_at(b0, per) + q35_r16_run_scale_bytes(q35_r16_run_len(nb, b0)) + (b - b0) * per + 64 * c;
}
/* The f16 scale of row rr in block b */
static uint8_t *r16_b32_scale(uint8_t *g, q35_dtype dt, int64_t b, int rr) {
    const int64_t per = dt == Q35_DT_Q8_0 ? 512 : 256, b0 = b - b % Q35_R16_RUN;
    return g + q35_r16_run_at(b0, per) + 2 * (16 * (b - b0) + rr);
}

static void r16_get_b32(const q35_tensor *W, int64_t r, int64_t b, float *d, int8_t q[32]) {
    const int64_t nb = W->shape[1] / 32;
    uint8_t *g = (uint8_t *)W->data + (size_t)(r / 16) * q35_r16_group_bytes(W->dtype, W->shape[1]);
    const int rr = (int)(r % 16);
    *d = h2f(r16_b32_scale(g, W->dtype, b, rr));
    if (W->dtype == Q35_DT_Q8_0) {
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 4; i++) q[4 * c + i] = (int8_t)(r16_b32_chunk(g, W->dtype, nb, b, c)[4 * rr + i] ^ 0x80);
    } else {
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++) {
                const uint8_t v = r16_b32_chunk(g, W->dtype, nb, b, c)[4 * rr + i];
                q[4 * c + i] = (int8_t)((v & 15) - 8);
                q[16 + 4 * c + i] = (int8_t)((v >> 4) - 8);
            }
    }
}

static void r16_put_b32(uint8_t *g, q35_dtype dt, int64_t nb, int rr, int64_t b, uint16_t dh, const int8_t q[32]) {
    r16_b32_scale(g, dt, b, rr)[0] = (uint8_t)dh;
    r16_b32_scale(g, dt, b, rr)[1] = (uint8_t)(dh >> 8);
    if (dt == Q35_DT_Q8_0) {
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 4; i++) r16_b32_chunk(g, dt, nb, b, c)[4 * rr + i] = (uint8_t)q[4 * c + i] ^ 0x80;
    } else {
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++)
                r16_b32_chunk(g, dt, nb, b, c)[4 * rr + i] = (uint8_t)((q[4 * c + i] + 8) | (q[16 + 4 * c + i] + 8) << 4);
    }
}

/* Q4_K super-block sb of a group: d[16] dmin[16] sc[8][16] m[8][16] (320 bytes), then 8 x 256. */
static uint8_t *r16_q4k_sb(const q35_tensor *W, int64_t r, int64_t sb) {
    return (uint8_t *)W->data + (size_t)(r / 16) * q35_r16_group_bytes(W->dtype, W->shape[1]) + (size_t)sb * 2368;
}
static void r16_put_nib(uint8_t *chunks, int rr, const uint8_t *u) { /* u[32] 0..15 -> 4 chunks */
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < 4; i++) chunks[64 * c + 4 * rr + i] = (uint8_t)(u[4 * c + i] | u[16 + 4 * c + i] << 4);
}
static void r16_get_nib(const uint8_t *chunks, int rr, uint8_t *u) {
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < 4; i++) {
            u[4 * c + i] = chunks[64 * c + 4 * rr + i] & 15;
            u[16 + 4 * c + i] = chunks[64 * c + 4 * rr + i] >> 4;
        }
}

static void r16_get_q4k(const q35_tensor *W, int64_t r, int64_t sb, float *d, float *dmin, uint8_t sc[8], uint8_t m[8], uint8_t q[256]) {
    const uint8_t *p = r16_q4k_sb(W, r, sb);
    const int rr = (int)(r % 16);
    *d = h2f(p + 2 * rr);
    *dmin = h2f(p + 32 + 2 * rr);
    for (int s = 0; s < 8; s++) {
        sc[s] = p[64 + 16 * s + rr];
        m[s] = p[192 + 16 * s + rr];
        r16_get_nib(p + 320 + 256 * s, rr, q + 32 * s);
    }
}

static void r16_put_q4k(uint8_t *p, int rr, uint16_t dh, uint16_t dminh, const uint8_t sc[8], const uint8_t m[8], const uint8_t q[256]) {
    p[2 * rr] = (uint8_t)dh;
    p[2 * rr + 1] = (uint8_t)(dh >> 8);
    p[32 + 2 * rr] = (uint8_t)dminh;
    p[32 + 2 * rr + 1] = (uint8_t)(dminh >> 8);
    for (int s = 0; s < 8; s++) {
        p[64 + 16 * s + rr] = sc[s];
        p[192 + 16 * s + rr] = m[s];
        r16_put_nib(p + 320 + 256 * s, rr, q + 32 * s);
    }
}

/* Q6_K super-block of a group: d[16] (32 bytes), sc[16][16] (256 bytes), then per 32-block j:
 * L0..L3 (256 bytes) H0, H1 (128 bytes). */
static uint8_t *r16_q6k_sb(const q35_tensor *W, int64_t r, int64_t sb) {
    return (uint8_t *)W->data + (size_t)(r / 16) * q35_r16_group_bytes(W->dtype, W->shape[1]) + (size_t)sb * 3360;
}

static void r16_get_q6k(const q35_tensor *W, int64_t r, int64_t sb, float *d, int8_t sc[16], int8_t q[256]) {
    const uint8_t *p = r16_q6k_sb(W, r, sb);
    const int rr = (int)(r % 16);
    *d = h2f(p + 2 * rr);
    for (int s = 0; s < 16; s++) sc[s] = (int8_t)p[32 + 16 * s + rr];
    for (int j = 0; j < 8; j++) {
        const uint8_t *L = p + 288 + 384 * j, *H = L + 256;
        uint8_t u[32];
        r16_get_nib(L, rr, u);
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 4; i++) {
                const int hi = (H[64 * (c >> 2) + 4 * rr + i] >> (2 * (c & 3))) & 3;
                q[32 * j + 4 * c + i] = (int8_t)((u[4 * c + i] | hi << 4) - 32);
            }
    }
}

static void r16_put_q6k(uint8_t *p, int rr, uint16_t dh, const int8_t sc[16], const int8_t q[256]) {
    p[2 * rr] = (uint8_t)dh;
    p[2 * rr + 1] = (uint8_t)(dh >> 8);
    for (int s = 0; s < 16; s++) p[32 + 16 * s + rr] = (uint8_t)sc[s];
    for (int j = 0; j < 8; j++) {
        uint8_t *L = p + 288 + 384 * j, *H = L + 256, u[32];
        for (int k = 0; k < 32; k++) u[k] = (uint8_t)((q[32 * j + k] + 32) & 15);
        r16_put_nib(L, rr, u);
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 4; i++) {
                uint8_t *h = &H[64 * (c >> 2) + 4 * rr + i];
                const int hi = (q[32 * j + 4 * c + i] + 32) >> 4;
                *h = (uint8_t)((*h & ~(3 << (2 * (c & 3)))) | hi << (2 * (c & 3)));
            }
    }
}

/* ---- canonical views, any layout ---- */

void q35_get_b32(const q35_tensor *W, int64_t r, int64_t b, float *d, int8_t q[32]) {
    if (W->layout == Q35_LAYOUT_R16) {
        r16_get_b32(W, r, b, d, q);
        return;
    }
    const size_t bb = q35_dtype_block_bytes(W->dtype);
    rows_b32(W->dtype, (const uint8_t *)W->data + (size_t)r * q35_row_bytes(W->dtype, W->shape[1]) + (size_t)b * bb, d, q);
}

void q35_get_q4k(const q35_tensor *W, int64_t r, int64_t sb, float *d, float *dmin, uint8_t sc[8], uint8_t m[8], uint8_t q[256]) {
    if (W->layout == Q35_LAYOUT_R16) {
        r16_get_q4k(W, r, sb, d, dmin, sc, m, q);
        return;
    }
    rows_q4k((const uint8_t *)W->data + (size_t)r * q35_row_bytes(W->dtype, W->shape[1]) + (size_t)sb * 144, d, dmin, sc, m, q);
}

void q35_get_q6k(const q35_tensor *W, int64_t r, int64_t sb, float *d, int8_t sc[16], int8_t q[256]) {
    if (W->layout == Q35_LAYOUT_R16) {
        r16_get_q6k(W, r, sb, d, sc, q);
        return;
    }
    rows_q6k((const uint8_t *)W->data + (size_t)r * q35_row_bytes(W->dtype, W->shape[1]) + (size_t)sb * 210, d, sc, q);
}

/* ---- dequantization ---- */

static void deq_b32(float d, const int8_t *q, float *y) {
    for (int k = 0; k < 32; k++) y[k] = d * (float)q[k];
}
static void deq_q4k(float d, float dmin, const uint8_t *sc, const uint8_t *m, const uint8_t *q, float *y) {
    for (int s = 0; s < 8; s++) {
        const float ds = d * (float)sc[s], ms = dmin * (float)m[s];
        for (int k = 0; k < 32; k++) y[32 * s + k] = ds * (float)q[32 * s + k] - ms;
    }
}
static void deq_q6k(float d, const int8_t *sc, const int8_t *q, float *y) {
    for (int e = 0; e < 256; e++) y[e] = d * (float)sc[e / 16] * (float)q[e];
}

int q35_dequantize_row(q35_dtype dt, const void *src, float *y, int64_t n) {
    if (!q35_quant_supports(dt, n)) return -1;
    const uint8_t *p = src;
    switch (dt) {
    case Q35_DT_F32: memcpy(y, src, sizeof(float) * (size_t)n); break;
    case Q35_DT_F16: for (int64_t i = 0; i < n; i++) y[i] = h2f(p + 2 * i); break;
    case Q35_DT_BF16: for (int64_t i = 0; i < n; i++) y[i] = q35_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
    case Q35_DT_Q8_0: case Q35_DT_Q4_0: case Q35_DT_Q4R:
        for (int64_t b = 0; b < n / 32; b++) {
            float d;
            int8_t q[32];
            rows_b32(dt, p + (dt == Q35_DT_Q8_0 ? 34 : 18) * b, &d, q);
            deq_b32(d, q, y + 32 * b);
        }
        if (dt == Q35_DT_Q4R)
            for (int64_t g = 0; g < n / 128; g++) q35_q4r_unrotate(y + 128 * g);
        break;
    case Q35_DT_Q4_K:
        for (int64_t b = 0; b < n / 256; b++) {
            float d, dmin;
            uint8_t sc[8], m[8], q[256];
            rows_q4k(p + 144 * b, &d, &dmin, sc, m, q);
            deq_q4k(d, dmin, sc, m, q, y + 256 * b);
        }
        break;
    case Q35_DT_Q6_K:
        for (int64_t b = 0; b < n / 256; b++) {
            float d;
            int8_t sc[16], q[256];
            rows_q6k(p + 210 * b, &d, sc, q);
            deq_q6k(d, sc, q, y + 256 * b);
        }
        break;
    default: return -1;
    }
    return 0;
}

void q35_tensor_dequant_row(const q35_tensor *W, int64_t r, float *y) {
    const int64_t cols = W->shape[1];
    if (W->layout != Q35_LAYOUT_R16) {
        if (q35_dequantize_row(W->dtype, (const uint8_t *)W->data + (size_t)r * q35_row_bytes(W->dtype, cols), y, cols) != 0)
            memset(y, 0, sizeof(float) * (size_t)cols);
        return;
    }
    switch (W->dtype) {
    case Q35_DT_Q8_0: case Q35_DT_Q4_0: case Q35_DT_Q4R:
        for (int64_t b = 0; b < cols / 32; b++) {
            float d;
            int8_t q[32];
            r16_get_b32(W, r, b, &d, q);
            deq_b32(d, q, y + 32 * b);
        }
        if (W->dtype == Q35_DT_Q4R)
            for (int64_t g = 0; g < cols / 128; g++) q35_q4r_unrotate(y + 128 * g);
        break;
    case Q35_DT_Q4_K:
        for (int64_t b = 0; b < cols / 256; b++) {
            float d, dmin;
            uint8_t sc[8], m[8], q[256];
            r16_get_q4k(W, r, b, &d, &dmin, sc, m, q);
            deq_q4k(d, dmin, sc, m, q, y + 256 * b);
        }
        break;
    case Q35_DT_Q6_K:
        for (int64_t b = 0; b < cols / 256; b++) {
            float d;
            int8_t sc[16], q[256];
            r16_get_q6k(W, r, b, &d, sc, q);
            deq_q6k(d, sc, q, y + 256 * b);
        }
        break;
    default: memset(y, 0, sizeof(float) * (size_t)cols);
    }
}

/* ---- repack ---- */

int q35_tensor_repack(const q35_tensor *W, void *dst, q35_tensor *out) {
    const size_t size = q35_repack_size(W);
    if (!size || W->layout != Q35_LAYOUT_ROWS) return -1;
    const q35_dtype dt = W->dtype;
    const int64_t rows = W->shape[0], cols = W->shape[1];
    const size_t gb = q35_r16_group_bytes(dt, cols), rb = q35_row_bytes(dt, cols);
    memset(dst, 0, size);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *g = (uint8_t *)dst + (size_t)(r / 16) * gb;
        const uint8_t *row = (const uint8_t *)W->data + (size_t)r * rb;
        const int rr = (int)(r % 16);
        if (dt == Q35_DT_Q4_K) {
            for (int64_t sb = 0; sb < cols / 256; sb++) {
                float d, dmin;
                uint8_t sc[8], m[8], q[256];
                const uint8_t *blk = row + 144 * sb;
                rows_q4k(blk, &d, &dmin, sc, m, q);
                r16_put_q4k(g + sb * 2368, rr, (uint16_t)(blk[0] | blk[1] << 8), (uint16_t)(blk[2] | blk[3] << 8), sc, m, q);
            }
        } else if (dt == Q35_DT_Q6_K) {
            for (int64_t sb = 0; sb < cols / 256; sb++) {
                float d;
                int8_t sc[16], q[256];
                const uint8_t *blk = row + 210 * sb;
                rows_q6k(blk, &d, sc, q);
                r16_put_q6k(g + sb * 3360, rr, (uint16_t)(blk[208] | blk[209] << 8), sc, q);
            }
        } else {
            const size_t bb = q35_dtype_block_bytes(dt);
            for (int64_t b = 0; b < cols / 32; b++) {
                float d;
                int8_t q[32];
                const uint8_t *blk = row + bb * b;
                rows_b32(dt, blk, &d, q);
                r16_put_b32(g, dt, cols / 32, rr, b, (uint16_t)(blk[0] | blk[1] << 8), q);
            }
        }
    }
    q35_tensor t = *W;
    t.data = dst;
    t.nbytes = size;
    t.layout = Q35_LAYOUT_R16;
    *out = t;
    return 0;
}
