#include "model/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"

uint64_t q35_fnv1a64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

q35_dtype q35_synth_rule(const char *name, int64_t in_features, float *center, float *scale) {
    *center = 0.0f;
    if (ends_with(name, "linear_attn.A_log")) { *scale = 1.0f; return Q35_DT_F32; }
    if (ends_with(name, "linear_attn.norm.weight")) { *center = 1.0f; *scale = 0.1f; return Q35_DT_F32; }
    if (ends_with(name, "linear_attn.dt_bias")) { *scale = 1.0f; return Q35_DT_BF16; }
    if (ends_with(name, "linear_attn.conv1d.weight")) { *scale = 0.5f; return Q35_DT_BF16; }
    if (ends_with(name, "norm.weight")) { *scale = 0.1f; return Q35_DT_BF16; }
    if (ends_with(name, "embed_tokens.weight") || ends_with(name, "lm_head.weight")) { *scale = 0.1f; return Q35_DT_BF16; }
    if (ends_with(name, ".bias")) { *scale = 0.02f; return Q35_DT_BF16; }
    *scale = (float)(1.0 / sqrt((double)(in_features > 0 ? in_features : 1)));
    return Q35_DT_BF16;
}

void q35_synth_fill(const char *name, uint64_t seed, q35_dtype dtype, float center, float scale, int64_t numel, void *out) {
    const uint64_t key = q35_fnv1a64(name, strlen(name), Q35_FNV_OFFSET) ^ seed;
    for (int64_t i = 0; i < numel; i++) {
        uint64_t z = key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z = z ^ (z >> 31);
        volatile float u = (float)(z >> 40) * (1.0f / 16777216.0f); /* volatile: no contraction into an FMA */
        volatile float r = 2.0f * u - 1.0f;
        volatile float v = scale * r;
        if (center != 0.0f) v = v + center;
        if (dtype == Q35_DT_F32) ((float *)out)[i] = v;
        else ((uint16_t *)out)[i] = q35_f32_to_bf16(v);
    }
}

q35_status q35_synth_write(const char *path, uint64_t seed, const q35_synth_tensor *list, int n) {
    /* Header: {"name": {"dtype": .., "shape": [..], "data_offsets": [b, e]}, ...} padded with spaces to 8 bytes. */
    size_t cap = 256 + (size_t)n * 320, len = 0;
    char *hdr = malloc(cap);
    if (!hdr) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const q35_synth_tensor *t = &list[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        uint64_t bytes = (uint64_t)numel * q35_dtype_size(t->dtype);
        len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t->name,
                                t->dtype == Q35_DT_F32 ? "F32" : "BF16");
        for (int d = 0; d < t->ndim; d++) len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(hdr);
        return q35_fail(Q35_ERR_IO, "%s: cannot create", tmp);
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((uint64_t)len >> (8 * i));
    int ok = fwrite(lenbuf, 1, 8, f) == 8 && fwrite(hdr, 1, len, f) == len;
    free(hdr);
    for (int i = 0; ok && i < n; i++) {
        const q35_synth_tensor *t = &list[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        float center, scale;
        q35_synth_rule(t->name, t->ndim >= 2 ? t->shape[t->ndim - 1] : 1, &center, &scale);
        size_t bytes = (size_t)numel * q35_dtype_size(t->dtype);
        void *buf = malloc(bytes ? bytes : 1);
        if (!buf) { ok = 0; break; }
        q35_synth_fill(t->name, seed, t->dtype, center, scale, numel, buf);
        ok = fwrite(buf, 1, bytes, f) == bytes;
        free(buf);
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return q35_fail(Q35_ERR_IO, "%s: write failed", path);
    }
    return Q35_OK;
}
