/* Scalar reference kernels: the truth every SIMD variant is tested against. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

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

void q35_matmul_rows(const q35_tensor *W, const float *X, int n, float *Y, int64_t r0, int64_t r1) {
    const int64_t rows = W->shape[0], cols = W->shape[1];
    for (int64_t r = r0; r < r1; r++) {
        switch (W->dtype) {
        case Q35_DT_F32: {
            const float *w = (const float *)W->data + r * cols;
            for (int t = 0; t < n; t++) Y[(int64_t)t * rows + r] = dot_f32(w, X + (int64_t)t * cols, cols);
            break;
        }
        case Q35_DT_BF16: {
            const uint16_t *w = (const uint16_t *)W->data + r * cols;
            for (int t = 0; t < n; t++) Y[(int64_t)t * rows + r] = dot_bf16(w, X + (int64_t)t * cols, cols);
            break;
        }
        case Q35_DT_F16: {
            const uint16_t *w = (const uint16_t *)W->data + r * cols;
            for (int t = 0; t < n; t++) Y[(int64_t)t * rows + r] = dot_f16(w, X + (int64_t)t * cols, cols);
            break;
        }
        default:
            for (int t = 0; t < n; t++) Y[(int64_t)t * rows + r] = 0;
        }
    }
}

void q35_matmul(const q35_tensor *W, const float *X, int n, float *Y) { q35_matmul_rows(W, X, n, Y, 0, W->shape[0]); }

void q35_tensor_row_f32(const q35_tensor *W, int64_t r, float *y) {
    const int64_t cols = W->shape[1];
    for (int64_t i = 0; i < cols; i++) y[i] = q35_tensor_get_f32(W, r * cols + i);
}

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
