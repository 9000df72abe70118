/* A tensor as the engine sees it: dtype + shape + a pointer into a mapped file (or owned memory).
 * Precision is data: kernels dispatch on `dtype`, layer code never looks at element bytes. */
#ifndef Q35_MODEL_TENSOR_H
#define Q35_MODEL_TENSOR_H
#include <stddef.h>
#include <stdint.h>

typedef enum q35_dtype {
    Q35_DT_F32 = 0,
    Q35_DT_F16,
    Q35_DT_BF16,
    Q35_DT_F64,
    Q35_DT_I64,
    Q35_DT_I32,
    Q35_DT_I16,
    Q35_DT_I8,
    Q35_DT_U8,
    Q35_DT_BOOL,
    /* Block-quantized weights (rows are whole blocks; shape counts elements, nbytes counts blocks). */
    Q35_DT_Q8_0,    /* GGUF Q8_0: blocks of 32 {f16 d; int8 q[32]}, x = d*q (34 bytes / 32) */
    Q35_DT_Q4_0,    /* GGUF Q4_0: blocks of 32 {f16 d; u8 qs[16]}, x = d*(nibble-8); low nibbles = 0..15 (18 bytes / 32) */
    Q35_DT_Q4_K,    /* GGUF Q4_K: super-blocks of 256 (144 bytes) */
    Q35_DT_Q6_K,    /* GGUF Q6_K: super-blocks of 256 (210 bytes) */
    Q35_DT_Q4R,     /* q35 4-bit: each 128-column group Hadamard-rotated, then Q4_0-like blocks with MSE scales (see kernels/quant.h) */
    Q35_DT_COUNT
} q35_dtype;

#define Q35_MAX_DIMS 6

typedef struct q35_tensor {
    const char *name;              /* as stored in the file (owned by the file index) */
    q35_dtype dtype;
    int ndim;
    int64_t shape[Q35_MAX_DIMS];   /* PyTorch order: shape[0] is the slowest axis ([out, in] for Linear) */
    const void *data;              /* [numel] elements of dtype, little-endian */
    size_t nbytes;
    int layout;                    /* Q35_LAYOUT_ROWS (0): rows of blocks as in the file; Q35_LAYOUT_R16: 16-row interleave (kernels/quant.h) */
} q35_tensor;

enum { Q35_LAYOUT_ROWS = 0, Q35_LAYOUT_R16 = 1 };

size_t q35_dtype_size(q35_dtype t);       /* bytes per element of a plain type; 0 for block-quantized ones */
int q35_dtype_block(q35_dtype t);         /* elements per block (1 for plain types) */
size_t q35_dtype_block_bytes(q35_dtype t);
size_t q35_row_bytes(q35_dtype t, int64_t n); /* bytes of n elements (n a multiple of the block); 0 if not */
const char *q35_dtype_name(q35_dtype t);
/* Parses a safetensors dtype string ("BF16", "F32", ...); returns -1 if unknown. */
int q35_dtype_from_safetensors(const char *s);
int64_t q35_tensor_numel(const q35_tensor *t);

/* Element conversions. */
static inline float q35_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}
static inline uint16_t q35_f32_to_bf16(float f) { /* round to nearest, ties to even; NaN stays NaN */
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40);
    uint32_t lsb = (v.u >> 16) & 1u;
    return (uint16_t)((v.u + 0x7fffu + lsb) >> 16);
}
float q35_f16_to_f32(uint16_t h);

/* Element i of a float tensor (F32, F16, BF16) as float32; used for small vectors at load time. */
float q35_tensor_get_f32(const q35_tensor *t, int64_t i);
#endif
