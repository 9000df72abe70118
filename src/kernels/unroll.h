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

/* tile(pre..., T, post...) for min(n, 4) or min(n, 8) tokens, T a constant in each copy (so the
 * tile's token loops unroll); pre in parentheses. The kernels' drivers share these. */
#define TILE_ARGS(...) __VA_ARGS__
#define TILES4(n, tile, pre, ...)                                \
    switch ((n) < 4 ? (n) : 4) {                                 \
    case 1: tile(TILE_ARGS pre, 1, __VA_ARGS__); break;          \
    case 2: tile(TILE_ARGS pre, 2, __VA_ARGS__); break;          \
    case 3: tile(TILE_ARGS pre, 3, __VA_ARGS__); break;          \
    default: tile(TILE_ARGS pre, 4, __VA_ARGS__); break;         \
    }
#define TILES8(n, tile, pre, ...)                                \
    switch ((n) < 8 ? (n) : 8) {                                 \
    case 1: tile(TILE_ARGS pre, 1, __VA_ARGS__); break;          \
    case 2: tile(TILE_ARGS pre, 2, __VA_ARGS__); break;          \
    case 3: tile(TILE_ARGS pre, 3, __VA_ARGS__); break;          \
    case 4: tile(TILE_ARGS pre, 4, __VA_ARGS__); break;          \
    case 5: tile(TILE_ARGS pre, 5, __VA_ARGS__); break;          \
    case 6: tile(TILE_ARGS pre, 6, __VA_ARGS__); break;          \
    case 7: tile(TILE_ARGS pre, 7, __VA_ARGS__); break;          \
    default: tile(TILE_ARGS pre, 8, __VA_ARGS__); break;         \
    }

#endif
