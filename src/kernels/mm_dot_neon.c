/* NEON matrix products with the armv8.2-a dot-product extension (sdot by lane; body:
 * mm_neon_impl.h). Chosen at run time only on cores that have it (dispatch.c); built with
 * FLAGS_NEONDOT (Makefile). */
#define DOTPROD 1
#include "kernels/mm_neon_impl.h"
