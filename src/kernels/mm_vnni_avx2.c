/* AVX2 + AVX-VNNI matrix products for the integer formats (vpdpbusd on 256-bit vectors; body:
 * mm_avx2_impl.h). Chosen at run time only on CPUs with AVX-VNNI (dispatch.c).
 *
 * Built a second time with -DQ35_AVXVNNI_EVEX and the AVX-512 flags for the tests (Makefile): the
 * same kernels with the AVX512-VNNI (EVEX, 256-bit) encodings of vpdpbusd / vpdpwssd, whose results
 * are the same, as q35_kern_avx2vnni_evex, so they are checked on AVX-512 CPUs without AVX-VNNI. */
#include <immintrin.h>
#if defined(Q35_AVXVNNI_EVEX)
#define _mm256_dpbusd_avx_epi32 _mm256_dpbusd_epi32
#define _mm256_dpwssd_avx_epi32 _mm256_dpwssd_epi32
#define q35_kern_avx2vnni q35_kern_avx2vnni_evex
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avxvnni"))), apply_to = function)
#else
#pragma GCC target("avxvnni")
#endif
#define VNNI 1
#include "kernels/mm_avx2_impl.h"
#if defined(__clang__) && !defined(Q35_AVXVNNI_EVEX)
#pragma clang attribute pop
#endif
