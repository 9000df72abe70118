/* AVX2 + FMA + F16C matrix products, vpmaddubsw for the integer formats (body: mm_avx2_impl.h). */
#define VNNI 0
#include "kernels/mm_avx2_impl.h"
