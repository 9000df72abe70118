/* Scalar reference kernels: the truth every SIMD variant is tested against. */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/mm.h"

static float dot_f32(const float *w, const float *x, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += w[i + j] * x[i + j];
    for (; i < n; i++) acc[0] += w[i] * x[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float dot_bf16(const uint16_t *w, const float *x, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += q35_bf16_to_f32(w[i + j]) * x[i + j];
    for (; i < n; i++) acc[0] += q35_bf16_to_f32(w[i]) * x[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float dot_f16(const uint16_t *w, const float *x, int64_t n) {
    float acc = 0;
    for (int64_t i = 0; i < n; i++) acc += q35_f16_to_f32(w[i]) * x[i];
    return acc;
}

/* ---- scalar matrix products (the reference every SIMD kernel is compared with) ----
 * Integer formats: the activations arrive quantized (mm.h, q35_act); per row r and token t,
 *   Q8_0/Q4_0/Q4R: acc = 0; for each block b in order: acc = fmaf(dw*da, (float)isum, acc),
 *     isum = sum_k qw[k]*qa[k] exactly (int32);
 *   Q4_K: the activations' 8 blocks of a super-block share one scale da (group 8, mm.h), so for
 *     each super-block (d, dmin; sub-blocks s = 0..7 = activation blocks b):
 *     sa = 0; ma = 0; for s in order: sa = fmaf((float)sc, (float)dot, sa); ma = fmaf((float)m, (float)S, ma);
 *     acc = fmaf(da, fmaf(-dmin, ma, d * sa), acc)
 *     (S = sum qa, the block's two h; sc x dot < 2^22 and every partial sum of ma < 2^24 are exact,
 *     sa rounds only past 2^24. Per sub-block and token 2 multiplies, where per-block activation
 *     scales took 3: fmaf(da, (float)(sc*dot), sa) and the min term scaled by each block's da);
 *   Q6_K: for each block b: isum = sc[2b']*dot(first 16) + sc[2b'+1]*dot(last 16);
 *     acc = fmaf(d*da, (float)isum, acc).
 * Every integer is below 2^24, so each conversion to float is exact and a SIMD kernel doing the
 * same per-row sequence of float operations gives bitwise the same result. */

static void mm_f32(const q35_mm_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)j->w + r * j->cols;
        for (int t = 0; t < j->n; t++) j->Y[(int64_t)t * j->rows + r] = dot_f32(w, j->X + (int64_t)t * j->cols, j->cols);
    }
}
static void mm_bf16(const q35_mm_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *w = (const uint16_t *)j->w + r * j->cols;
        for (int t = 0; t < j->n; t++) j->Y[(int64_t)t * j->rows + r] = dot_bf16(w, j->X + (int64_t)t * j->cols, j->cols);
    }
}
static void mm_f16(const q35_mm_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *w = (const uint16_t *)j->w + r * j->cols;
        for (int t = 0; t < j->n; t++) j->Y[(int64_t)t * j->rows + r] = dot_f16(w, j->X + (int64_t)t * j->cols, j->cols);
    }
}

static inline const int8_t *aq(const q35_act *a, int64_t b, int t) { return a->q + q35_act_at(a, b, t) * 32; }
static inline float ad(const q35_act *a, int64_t b, int t) { return a->d[q35_act_at(a, b, t)]; }
static inline int32_t idot(const int8_t *w, const int8_t *x, int k) {
    int32_t s = 0;
    for (int i = 0; i < k; i++) s += (int32_t)w[i] * x[i];
    return s;
}

static void mm_b32(const q35_mm_job *j, int64_t r0, int64_t r1) {
    const int64_t nb = j->cols / 32;
    for (int64_t r = r0; r < r1; r++) {
        for (int t = 0; t < j->n; t++) j->Y[(int64_t)t * j->rows + r] = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            float dw;
            int8_t q[32];
            q35_get_b32(j->W, r, b, &dw, q);
            for (int t = 0; t < j->n; t++) {
                float *y = &j->Y[(int64_t)t * j->rows + r];
                const float s = dw * ad(&j->a, b, t);
                *y = fmaf(s, (float)idot(q, aq(&j->a, b, t), 32), *y);
            }
        }
    }
}

static void mm_q4k(const q35_mm_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        for (int t = 0; t < j->n; t++) j->Y[(int64_t)t * j->rows + r] = 0.0f;
        for (int64_t sb = 0; sb < j->cols / 256; sb++) {
            float d, dmin;
            uint8_t sc[8], m[8], q[256];
            int8_t qs[256];
            q35_get_q4k(j->W, r, sb, &d, &dmin, sc, m, q);
            for (int e = 0; e < 256; e++) qs[e] = (int8_t)q[e];
            for (int t = 0; t < j->n; t++) {
                float sa = 0.0f, ma = 0.0f;
                for (int s = 0; s < 8; s++) {
                    const int64_t b = 8 * sb + s;
                    sa = fmaf((float)sc[s], (float)idot(qs + 32 * s, aq(&j->a, b, t), 32), sa);
                    const size_t i = q35_act_at(&j->a, b, t);
                    ma = fmaf((float)m[s], (float)(j->a.h[2 * i] + j->a.h[2 * i + 1]), ma);
                }
                float *y = &j->Y[(int64_t)t * j->rows + r];
                *y = fmaf(ad(&j->a, 8 * sb, t), fmaf(-dmin, ma, d * sa), *y);
            }
        }
    }
}

static void mm_q6k(const q35_mm_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        for (int t = 0; t < j->n; t++) j->Y[(int64_t)t * j->rows + r] = 0.0f;
        for (int64_t sb = 0; sb < j->cols / 256; sb++) {
            float d;
            int8_t sc[16], q[256];
            q35_get_q6k(j->W, r, sb, &d, sc, q);
            for (int s = 0; s < 8; s++) {
                const int64_t b = 8 * sb + s;
                for (int t = 0; t < j->n; t++) {
                    float *y = &j->Y[(int64_t)t * j->rows + r];
                    const int8_t *x = aq(&j->a, b, t);
                    const int32_t isum = sc[2 * s] * idot(q + 32 * s, x, 16) + sc[2 * s + 1] * idot(q + 32 * s + 16, x + 16, 16);
                    const float s1 = d * ad(&j->a, b, t);
                    *y = fmaf(s1, (float)isum, *y);
                }
            }
        }
    }
}

static inline float amax32_ref(const float *v, int *bad) {
    float amax = 0;
    for (int k = 0; k < 32; k++) {
        amax = fmaxf(amax, fabsf(v[k]));
        *bad |= !isfinite(v[k]);
    }
    return amax;
}
static inline void q32_ref(const float *v, float id, int8_t *q, int s[2]) {
    for (int k = 0; k < 32; k++) {
        q[k] = (int8_t)(int)nearbyintf(v[k] * id);
        s[k >= 16] += q[k];
    }
}
void q35_actq_ref(const float *x, int t, int mult, int group, q35_act *a) { q35_actq_drive(x, t, mult, group, a, amax32_ref, q32_ref); }

void q35_rot_ref(float *x, int64_t n) {
    for (int64_t g = 0; g < n / Q35_Q4R_GROUP; g++) q35_q4r_rotate(x + Q35_Q4R_GROUP * g);
}

const q35_kern q35_kern_scalar = {
    .mm = {[Q35_DT_F32] = {mm_f32, NULL}, [Q35_DT_F16] = {mm_f16, NULL}, [Q35_DT_BF16] = {mm_bf16, NULL},
           [Q35_DT_Q8_0] = {mm_b32, mm_b32}, [Q35_DT_Q4_0] = {mm_b32, mm_b32}, [Q35_DT_Q4R] = {mm_b32, mm_b32},
           [Q35_DT_Q4_K] = {mm_q4k, mm_q4k}, [Q35_DT_Q6_K] = {mm_q6k, mm_q6k}},
    .actq = q35_actq_ref,
    .rot = q35_rot_ref,
    .act_tile = 3, /* any tile works here: 3, unlike every SIMD table's, so tests compare across layouts */
};

void q35_tensor_row_f32(const q35_tensor *W, int64_t r, float *y) { q35_tensor_dequant_row(W, r, y); }

void q35_rmsnorm(const float *x, const float *scale, int n, float eps, float *y) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * scale[i];
}

void q35_l2norm(float *x, int n, float eps) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss + eps);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void q35_gated_rmsnorm(float *o, const float *z, const float *w, int n, float eps) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += o[i] * o[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) o[i] = w[i] * (o[i] * inv) * q35_silu(z[i]);
}

void q35_softmax(float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void q35_rope_neox(float *x, int rot, const float *cos_, const float *sin_) {
    const int half = rot / 2;
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half];
        x[i] = a * cos_[i] - b * sin_[i];
        x[i + half] = b * cos_[i] + a * sin_[i];
    }
}

void q35_gdn_step(float *S, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o) {
    const float decay = expf(g);
    /* u = beta * (v - (decay S)^T k), computed as decay * (S^T k) before S is scaled. */
    float u[dv];
    for (int j = 0; j < dv; j++) u[j] = 0;
    for (int i = 0; i < dk; i++) {
        const float ki = k[i];
        const float *row = S + (int64_t)i * dv;
        for (int j = 0; j < dv; j++) u[j] += row[j] * ki;
    }
    for (int j = 0; j < dv; j++) u[j] = beta * (v[j] - decay * u[j]);
    for (int j = 0; j < dv; j++) o[j] = 0;
    for (int i = 0; i < dk; i++) {
        float *row = S + (int64_t)i * dv;
        const float ki = k[i], qi = q[i];
        for (int j = 0; j < dv; j++) {
            row[j] = decay * row[j] + ki * u[j];
            o[j] += row[j] * qi;
        }
    }
}

void q35_attend(const float *q, const float *K, const float *V, int n_kv, int hd, int stride, float scale, float *scores, float *o) {
    for (int t = 0; t < n_kv; t++) scores[t] = dot_f32(q, K + (int64_t)t * stride, hd) * scale;
    q35_softmax(scores, n_kv);
    for (int j = 0; j < hd; j++) o[j] = 0;
    for (int t = 0; t < n_kv; t++) {
        const float p = scores[t], *vr = V + (int64_t)t * stride;
        for (int j = 0; j < hd; j++) o[j] += p * vr[j];
    }
}
