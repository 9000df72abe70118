/* A software model of the AMX tile unit, for test builds only: mm_amx.c compiled with
 * -DQ35_AMX_EMU (Makefile, linked into tests/test_kernels alone) runs its AMX kernels through it,
 * so CI checks them against the scalar reference on CPUs without AMX (AMD, older Intel).
 *
 * It models what mm_amx.c uses: palette 1 (8 tiles of up to 16 rows x 64 bytes), LDTILECFG,
 * TILERELEASE, TILEZERO, TILELOADD, TILESTORED and TDPBSSD, per thread as the hardware keeps it.
 * A configuration or shape that the hardware refuses (#UD / #GP) aborts with a message naming the
 * instruction and tile instead: rows or bytes per row out of range, reserved bytes set, a tile
 * used before it is configured, or a product whose tiles' shapes do not match. Load and store
 * touch only the configured rows and bytes of each row (what an out-of-bounds access would hit);
 * loads clear the rest of the tile, as the hardware does.
 *
 * Included after <immintrin.h>: the intrinsics' names are macros of the functions below from here
 * on (gcc and clang declare _tile_loadconfig / _tile_release as inline functions, the rest as
 * macros). */
#ifndef Q35_KERNELS_AMX_EMU_H
#define Q35_KERNELS_AMX_EMU_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct amx_emu_unit {
    int configured;
    uint8_t rows[8];       /* configured rows of each tile (0: unused) */
    uint16_t colsb[8];     /* configured bytes per row */
    uint8_t t[8][16][64];  /* [tile][row][byte] */
} amx_emu_unit;

static _Thread_local amx_emu_unit amx_emu;

static void amx_emu_fail(const char *insn, int tile, const char *what) {
    fprintf(stderr, "amx emulator: %s tile %d: %s\n", insn, tile, what);
    abort();
}

static void amx_emu_loadconfig(const void *config) {
    const uint8_t *p = config; /* palette, start_row, 14 reserved, colsb[16] (u16), rows[16] */
    if (p[0] != 1) amx_emu_fail("ldtilecfg", -1, "palette is not 1");
    for (int i = 2; i < 16; i++)
        if (p[i]) amx_emu_fail("ldtilecfg", -1, "a reserved byte is not 0");
    if (p[1]) amx_emu_fail("ldtilecfg", -1, "start_row is not 0 (restarts are not modelled)");
    memset(&amx_emu, 0, sizeof amx_emu);
    for (int t = 0; t < 16; t++) {
        const unsigned colsb = (unsigned)p[16 + 2 * t] | (unsigned)p[17 + 2 * t] << 8, rows = p[48 + t];
        if (t >= 8) {
            if (colsb || rows) amx_emu_fail("ldtilecfg", t, "palette 1 has 8 tiles");
            continue;
        }
        if (rows > 16 || colsb > 64 || (colsb & 3) || (!rows != !colsb)) amx_emu_fail("ldtilecfg", t, "rows > 16, bytes > 64, bytes not a multiple of 4, or one of them 0");
        amx_emu.rows[t] = (uint8_t)rows;
        amx_emu.colsb[t] = (uint16_t)colsb;
    }
    amx_emu.configured = 1;
}

static void amx_emu_release(void) { memset(&amx_emu, 0, sizeof amx_emu); }

static void amx_emu_need(const char *insn, int t) {
    if (!amx_emu.configured) amx_emu_fail(insn, t, "no tile configuration loaded");
    if (t < 0 || t >= 8 || !amx_emu.rows[t]) amx_emu_fail(insn, t, "tile not configured");
}

static void amx_emu_zero(int t) {
    amx_emu_need("tilezero", t);
    memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
}

static void amx_emu_loadd(int t, const void *base, size_t stride) {
    amx_emu_need("tileloadd", t);
    memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
    for (int r = 0; r < amx_emu.rows[t]; r++) memcpy(amx_emu.t[t][r], (const uint8_t *)base + (size_t)r * stride, amx_emu.colsb[t]);
}

static void amx_emu_stored(int t, void *base, size_t stride) {
    amx_emu_need("tilestored", t);
    for (int r = 0; r < amx_emu.rows[t]; r++) memcpy((uint8_t *)base + (size_t)r * stride, amx_emu.t[t][r], amx_emu.colsb[t]);
}

/* C[m][n] += sum over k, i < 4 of A[m][4k + i] * B[k][4n + i], signed bytes into int32 lanes
 * (wrapping, as the hardware's adds do). */
static void amx_emu_dpbssd(int c, int a, int b) {
    amx_emu_need("tdpbssd", c);
    amx_emu_need("tdpbssd", a);
    amx_emu_need("tdpbssd", b);
    if (c == a || c == b || a == b) amx_emu_fail("tdpbssd", c, "the three tiles are not distinct");
    const int M = amx_emu.rows[c], N = amx_emu.colsb[c] / 4, K = amx_emu.colsb[a] / 4;
    if (amx_emu.rows[a] != M || amx_emu.rows[b] != K || amx_emu.colsb[b] != amx_emu.colsb[c])
        amx_emu_fail("tdpbssd", c, "tile shapes do not match (C: M x 4N, A: M x 4K, B: K x 4N bytes)");
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            uint32_t acc;
            memcpy(&acc, amx_emu.t[c][m] + 4 * n, 4);
            for (int k = 0; k < K; k++)
                for (int i = 0; i < 4; i++)
                    acc += (uint32_t)((int32_t)(int8_t)amx_emu.t[a][m][4 * k + i] * (int32_t)(int8_t)amx_emu.t[b][k][4 * n + i]);
            memcpy(amx_emu.t[c][m] + 4 * n, &acc, 4);
        }
}

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbssd
#define _tile_loadconfig(config) amx_emu_loadconfig(config)
#define _tile_release() amx_emu_release()
#define _tile_zero(t) amx_emu_zero(t)
#define _tile_loadd(t, base, stride) amx_emu_loadd(t, base, (size_t)(stride))
#define _tile_stored(t, base, stride) amx_emu_stored(t, base, (size_t)(stride))
#define _tile_dpbssd(c, a, b) amx_emu_dpbssd(c, a, b)
#endif
