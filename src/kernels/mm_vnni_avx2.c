/* AVX2 + AVX-VNNI matrix products for the integer formats (vpdpbusd on 256-bit vectors; body:
 * mm_avx2_impl.h). Chosen at run time only on CPUs with AVX-VNNI (dispatch.c). */
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avxvnni"))), apply_to = function)
#else
#pragma GCC target("avxvnni")
#endif
#define VNNI 1
#include "kernels/mm_avx2_impl.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif
