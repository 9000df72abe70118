#include "model/tensor.h"

#include <string.h>

static const struct {
    const char *st_name; /* safetensors dtype string (NULL: not a safetensors dtype) */
    const char *name;
    int block;           /* elements per block (1 for plain types) */
    size_t block_bytes;  /* bytes per block */
} dtype_info[Q35_DT_COUNT] = {
    [Q35_DT_F32] = {"F32", "f32", 1, 4},    [Q35_DT_F16] = {"F16", "f16", 1, 2},   [Q35_DT_BF16] = {"BF16", "bf16", 1, 2},
    [Q35_DT_F64] = {"F64", "f64", 1, 8},    [Q35_DT_I64] = {"I64", "i64", 1, 8},   [Q35_DT_I32] = {"I32", "i32", 1, 4},
    [Q35_DT_I16] = {"I16", "i16", 1, 2},    [Q35_DT_I8] = {"I8", "i8", 1, 1},      [Q35_DT_U8] = {"U8", "u8", 1, 1},
    [Q35_DT_BOOL] = {"BOOL", "bool", 1, 1}, [Q35_DT_Q8_0] = {NULL, "q8_0", 32, 34}, [Q35_DT_Q4_0] = {NULL, "q4_0", 32, 18},
    [Q35_DT_Q4_K] = {NULL, "q4_k", 256, 144}, [Q35_DT_Q6_K] = {NULL, "q6_k", 256, 210}, [Q35_DT_Q4R] = {NULL, "q4r", 32, 18},
};

size_t q35_dtype_size(q35_dtype t) { return (unsigned)t < Q35_DT_COUNT && dtype_info[t].block == 1 ? dtype_info[t].block_bytes : 0; }
int q35_dtype_block(q35_dtype t) { return (unsigned)t < Q35_DT_COUNT ? dtype_info[t].block : 0; }
size_t q35_dtype_block_bytes(q35_dtype t) { return (unsigned)t < Q35_DT_COUNT ? dtype_info[t].block_bytes : 0; }
size_t q35_row_bytes(q35_dtype t, int64_t n) {
    const int b = q35_dtype_block(t);
    return b > 0 && n % b == 0 ? (size_t)(n / b) * dtype_info[t].block_bytes : 0;
}
const char *q35_dtype_name(q35_dtype t) { return (unsigned)t < Q35_DT_COUNT ? dtype_info[t].name : "?"; }

int q35_dtype_from_safetensors(const char *s) {
    for (int i = 0; i < Q35_DT_COUNT; i++)
        if (dtype_info[i].st_name && strcmp(s, dtype_info[i].st_name) == 0) return i;
    return -1;
}

int64_t q35_tensor_numel(const q35_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

float q35_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    union { uint32_t u; float f; } v = {u};
    return v.f;
}

float q35_tensor_get_f32(const q35_tensor *t, int64_t i) {
    switch (t->dtype) {
    case Q35_DT_F32: { float f; memcpy(&f, (const char *)t->data + 4 * i, 4); return f; }
    case Q35_DT_BF16: { uint16_t h; memcpy(&h, (const char *)t->data + 2 * i, 2); return q35_bf16_to_f32(h); }
    case Q35_DT_F16: { uint16_t h; memcpy(&h, (const char *)t->data + 2 * i, 2); return q35_f16_to_f32(h); }
    default: return 0.0f;
    }
}
