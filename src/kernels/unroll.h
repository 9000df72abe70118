/* UNROLL: unroll the next loop fully. The tiles keep their accumulators in arrays indexed by a loop
 * over a compile-time count; only full unrolling turns them into registers. GCC takes a count
 * ("GCC unroll 16" unrolls any loop of up to 16 trips); clang 14 reads that pragma but left the
 * integer tiles' token loops rolled, with the accumulators on the stack (2.4x slower products). */
#ifndef Q35_KERNELS_UNROLL_H
#define Q35_KERNELS_UNROLL_H

#ifdef __clang__
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

#endif
