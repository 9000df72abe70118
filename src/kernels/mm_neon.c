/* NEON matrix products for every armv8-a core (body: mm_neon_impl.h): byte products through smull
 * and pairwise adds, for cores without the dot-product extension (Cortex-A53, A72, A73: Raspberry
 * Pi 3 and 4). Also the float formats, activation quantization and rotation of both NEON tables. */
#define DOTPROD 0
#include "kernels/mm_neon_impl.h"
