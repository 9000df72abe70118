/* Scalar instantiation of the Gated DeltaNet / attention kernels (gdn_chunk_impl.h): the reference
 * the SIMD variants are tested against (libm expf, plain float arithmetic); and the choice of the
 * table for this CPU. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gdn_chunk.h"
#include "kernels/quant.h"
#include "model/tensor.h"

#define VL 1
typedef float vec;
#define VZERO() 0.0f
#define VSET1(x) (x)
#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VLOADM(p, n) ((void)(n), *(p))
#define VSTOREM(p, v, n) ((void)(n), *(p) = (v))
#define VLOADH(p) q35_f16_to_f32(*(p))
#define VLOADHM(p, n) ((void)(n), q35_f16_to_f32(*(p)))
#define VSTOREH(p, v) (*(p) = q35_f32_to_f16(v))
#define VSTOREHM(p, v, n) ((void)(n), *(p) = q35_f32_to_f16(v))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VMUL(a, b) ((a) * (b))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VDIV(a, b) ((a) / (b))
#define VMAX(a, b) ((a) > (b) ? (a) : (b))
#define VMIN(a, b) ((a) < (b) ? (a) : (b))
#define VRCP(a) (1.0f / (a))
#define TRANSPOSE_VL(src, lds, dst, ldd) (*(dst) = *(src))
#define VHSUM(v) (v)
#define VHMAX(v) (v)
#define VEXP(x) expf(x)
#define FN(name) name##_scalar
#define ISA_NAME "scalar"
#define GEMM_MR 4
#define GEMM_NV 4
#define RNV 4
#include "kernels/gdn_chunk_impl.h"

size_t q35_gdn_chunk_work(int L, int dk, int dv) {
    const size_t l = (size_t)L;
    return 2 * l + 2 + (size_t)dk * l + 2 * l * l + l * (size_t)(dv + dk) + l * (size_t)dk + 3 * l;
}

const q35_gdn_kernels *q35_gdn_kernels_isa(const char *name) {
    if (!strcmp(name, "scalar")) return &q35_gdn_kernels_scalar;
#if defined(__x86_64__)
    if (!strcmp(name, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &q35_gdn_kernels_avx2;
    if (!strcmp(name, "avx512") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return &q35_gdn_kernels_avx512;
#elif defined(__aarch64__)
    if (!strcmp(name, "neon")) return &q35_gdn_kernels_neon; /* AdvSIMD: every aarch64 core */
#endif
    return NULL;
}

const q35_gdn_kernels *q35_gdn_kernels_best(void) {
    static const q35_gdn_kernels *_Atomic best;
    const q35_gdn_kernels *k = atomic_load_explicit(&best, memory_order_acquire);
    if (k) return k;
    const char *isa = getenv("Q35_ISA");
    const char *order[] = {"avx512", "neon", "avx2", "scalar"};
    int start = 0;
    if (isa && !strcmp(isa, "avx2")) start = 2;
    if (isa && !strcmp(isa, "scalar")) start = 3;
    for (int i = start; i < 4 && !k; i++) k = q35_gdn_kernels_isa(order[i]);
    atomic_store_explicit(&best, k, memory_order_release);
    return k;
}

int64_t q35_argmax(const float *x, int64_t n) { return q35_gdn_kernels_best()->argmax(x, n); }
