/* Matrix kernels and weight formats: every ISA this CPU has against the scalar reference (bitwise
 * for the integer formats, whose float steps are fixed by ref.c; within 1e-5 of sum |w x| for the
 * float formats, whose summation order differs), the reference against double precision, known
 * answers for the GGUF block formats written from their definitions, quantization error bounds,
 * Q4R against Q4_0, the R16 interleave, activation quantization and the Q4R rotation. */
#include <stdint.h>

#include "kernels/headscan.h"
#include "kernels/kernels.h"
#include "kernels/mm.h"
#include "kernels/pftune.h"
#include "kernels/prefetch.h"
#include "kernels/quant.h"
#include "q35.h"
#include "test.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_unif(void) { return (float)((rng_u64() >> 40) + 0.5) / 16777216.0f; }
static float rng_gauss(void) { return sqrtf(-2.0f * logf(rng_unif())) * cosf(6.2831853f * rng_unif()); }

static void fill_gauss(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_gauss();
}

/* Activations with some edge blocks: a zero block, an outlier, tiny values. */
static void fill_acts(float *x, int n, int64_t cols) {
    fill_gauss(x, (int64_t)n * cols, 1.0f);
    for (int t = 0; t < n; t++) {
        float *r = x + (int64_t)t * cols;
        if (cols >= 64 && t % 3 == 0) memset(r + 32, 0, 32 * sizeof(float));
        if (t % 4 == 1) r[cols / 2] = 40.0f;
        if (cols >= 96 && t % 5 == 2)
            for (int k = 64; k < 96; k++) r[k] *= 1e-20f;
    }
}

typedef struct mat {
    q35_tensor rows;   /* row-major */
    q35_tensor r16;    /* interleaved copy (data NULL when the dtype has none) */
    void *buf, *rbuf;
    float *deq;        /* [rows][cols] dequantized values */
} mat;

static void mat_make(mat *m, q35_dtype dt, int64_t rows, int64_t cols) {
    memset(m, 0, sizeof *m);
    float *w = malloc(sizeof(float) * (size_t)(rows * cols));
    fill_gauss(w, rows * cols, 0.05f);
    const size_t rb = q35_dtype_size(dt) ? q35_dtype_size(dt) * (size_t)cols : q35_row_bytes(dt, cols);
    m->buf = malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) q35_quantize_row(dt, w + r * cols, (char *)m->buf + rb * (size_t)r, cols);
    m->rows = (q35_tensor){.name = "w", .dtype = dt, .ndim = 2, .shape = {rows, cols}, .data = m->buf, .nbytes = rb * (size_t)rows};
    m->deq = w;
    for (int64_t r = 0; r < rows; r++) q35_tensor_dequant_row(&m->rows, r, w + r * cols);
    const size_t rs = q35_repack_size(&m->rows);
    if (rs) {
        if (posix_memalign(&m->rbuf, 64, rs) != 0) abort();
        q35_tensor_repack(&m->rows, m->rbuf, &m->r16);
    }
}

static void mat_free(mat *m) {
    free(m->buf);
    free(m->rbuf);
    free(m->deq);
}

static int is_int(q35_dtype dt) { return dt >= Q35_DT_Q8_0 && dt <= Q35_DT_Q4R; }

/* The ISAs this CPU runs; AVX2 twice when the CPU has AVX-VNNI, AVX-512 once more when it has AMX,
 * and once more with the Q4 prompt tiles packed (q35_avx512_q4_unpack = 0, as on AMD; AMX off),
 * NEON twice when it has the dot-product extension (isa_use picks the variant). */
enum { AVX2_PLAIN = Q35_ISA_COUNT, AVX512_NOAMX, AVX512_PACKED, NEON_PLAIN };
static int emulated_only; /* emulated_amx_avxvnni: list only the levels whose tables it replaced */
static int isa_list(q35_isa *out) {
    int k = 0;
    if (emulated_only) {
        out[k++] = Q35_ISA_AVX2;
        out[k++] = Q35_ISA_AVX512;
        return k;
    }
    const q35_isa keep = q35_isa_get();
    for (int i = 0; i < Q35_ISA_COUNT; i++)
        if (q35_isa_set((q35_isa)i) == 0) out[k++] = (q35_isa)i;
    if (q35_isa_set(Q35_ISA_AVX2) == 0 && q35_cpu_has_avxvnni()) out[k++] = (q35_isa)AVX2_PLAIN;
#if defined(__x86_64__)
    if (q35_isa_set(Q35_ISA_AVX512) == 0 && q35_cpu_has_amx()) out[k++] = (q35_isa)AVX512_NOAMX;
    if (q35_isa_set(Q35_ISA_AVX512) == 0) out[k++] = (q35_isa)AVX512_PACKED;
#elif defined(__aarch64__)
    if (q35_isa_set(Q35_ISA_NEON) == 0 && q35_cpu_has_neondot()) out[k++] = (q35_isa)NEON_PLAIN;
#endif
    q35_isa_set(keep);
    return k;
}
static void isa_use(q35_isa i) {
    q35_kern_use_avxvnni(i != (q35_isa)AVX2_PLAIN);
#if defined(__x86_64__)
    q35_kern_use_amx(i != (q35_isa)AVX512_NOAMX && i != (q35_isa)AVX512_PACKED);
    q35_avx512_q4_unpack = i != (q35_isa)AVX512_PACKED;
#elif defined(__aarch64__)
    q35_kern_use_neondot(i != (q35_isa)NEON_PLAIN);
#endif
    q35_isa isa = i;
    if (i == (q35_isa)AVX2_PLAIN) isa = Q35_ISA_AVX2;
    else if (i == (q35_isa)AVX512_NOAMX || i == (q35_isa)AVX512_PACKED) isa = Q35_ISA_AVX512;
    else if (i == (q35_isa)NEON_PLAIN) isa = Q35_ISA_NEON;
    q35_isa_set(isa);
}
static const char *isa_str(q35_isa i) {
    if (i == (q35_isa)NEON_PLAIN) return "neon-armv8a";
    if (i == (q35_isa)Q35_ISA_NEON) return q35_cpu_has_neondot() ? "neon-dotprod" : "neon-armv8a";
    if (i == (q35_isa)AVX512_PACKED) return "avx512-q4packed";
    return i == (q35_isa)AVX2_PLAIN ? "avx2-maddubs" : i == (q35_isa)AVX512_NOAMX ? "avx512-vnni" : q35_isa_name(i);
}

/* AMX: tiles of 16 from 8 tokens; NEON with sdot: tiles of 8 from 8 tokens; every tail of 1-7 */
static const int NS[] = {1, 2, 3, 7, 8, 11, 12, 16, 23, 26, 30, 33, 45, 64};
static const int64_t ROWS[] = {1, 5, 16, 17, 31, 67};

static void cols_for(q35_dtype dt, int64_t *c) {
    switch (dt) {
    case Q35_DT_F32: case Q35_DT_F16: case Q35_DT_BF16: c[0] = 7; c[1] = 33; c[2] = 100; c[3] = 1024; break;
    case Q35_DT_Q8_0: case Q35_DT_Q4_0: c[0] = 32; c[1] = 96; c[2] = 1056; c[3] = 1024; break; /* 1056: a run of 32 blocks and one of 1 (quant.h) */
    case Q35_DT_Q4R: c[0] = 128; c[1] = 384; c[2] = 512; c[3] = 1024; break;
    default: c[0] = 256; c[1] = 512; c[2] = 768; c[3] = 1024; break;
    }
}

/* Every ISA and layout against the scalar reference on row-major weights, for one format. */
static int compare_format(q35_dtype dt) {
    q35_isa isas[Q35_ISA_COUNT + 3];
    const int nisa = isa_list(isas);
    const q35_isa keep = q35_isa_get();
    int64_t C[4];
    cols_for(dt, C);
    int bad = 0;
    for (size_t in = 0; in < sizeof NS / sizeof NS[0]; in++)
        for (int sh = 0; sh < 4; sh++) {
            const int n = NS[in];
            const int64_t rows = ROWS[(in + sh * 2) % 6], cols = C[(in + sh) % 4];
            mat m;
            mat_make(&m, dt, rows, cols);
            float *X = malloc(sizeof(float) * (size_t)(n * cols));
            fill_acts(X, n, cols);
            float *ref = malloc(sizeof(float) * (size_t)(n * rows)), *Y = malloc(sizeof(float) * (size_t)(n * rows));
            q35_isa_set(Q35_ISA_SCALAR);
            q35_matmul(&m.rows, X, n, ref);
            const int keep_streams = q35_pf_streams;
            for (int ii = 0; ii < nisa; ii++)
                for (int lay = 0; lay < 2 * (n == 1 ? 2 : 1); lay++) { /* one token: each layout with 1 and 2 weight streams */
                    const q35_tensor *W = lay % 2 ? &m.r16 : &m.rows;
                    if (!W->data) continue;
                    isa_use(isas[ii]);
                    q35_pf_streams = lay < 2 ? 1 : 2;
                    for (int64_t i = 0; i < n * rows; i++) Y[i] = NAN;
                    q35_matmul(W, X, n, Y);
                    for (int t = 0; t < n && !bad; t++)
                        for (int64_t r = 0; r < rows; r++) {
                            const float y = Y[t * rows + r], e = ref[t * rows + r];
                            double mag = 0;
                            for (int64_t k = 0; k < cols; k++) mag += fabs((double)m.deq[r * cols + k] * X[t * cols + k]);
                            const int ok = is_int(dt) ? memcmp(&y, &e, 4) == 0 : fabs((double)y - e) <= 1e-5 * mag + 1e-30;
                            if (!ok) {
                                CHECK(0, "%s %s layout %d streams %d rows %lld cols %lld n %d: Y[%d][%lld] = %.9g, reference %.9g", q35_dtype_name(dt),
                                      isa_str(isas[ii]), lay % 2, q35_pf_streams, (long long)rows, (long long)cols, n, t, (long long)r, y, e);
                                bad = 1;
                                break;
                            }
                        }
                }
            q35_pf_streams = keep_streams;
            isa_use(keep);
            free(X);
            free(ref);
            free(Y);
            mat_free(&m);
        }
    return bad;
}

static void matmul_f32(void) { compare_format(Q35_DT_F32); }
static void matmul_f16(void) { compare_format(Q35_DT_F16); }
static void matmul_bf16(void) { compare_format(Q35_DT_BF16); }
static void matmul_q8_0(void) { compare_format(Q35_DT_Q8_0); }
static void matmul_q4_0(void) { compare_format(Q35_DT_Q4_0); }
static void matmul_q4r(void) { compare_format(Q35_DT_Q4R); }
static void matmul_q4_k(void) { compare_format(Q35_DT_Q4_K); }
static void matmul_q6_k(void) { compare_format(Q35_DT_Q6_K); }

/* The scalar reference against double precision: float formats within fp32 rounding; integer
 * formats within the error of 8-bit activations, sum over blocks of sum|w| * d_a / 2. */
static void reference_vs_double(void) {
    const q35_dtype dts[] = {Q35_DT_F32, Q35_DT_F16, Q35_DT_BF16, Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R, Q35_DT_Q4_K, Q35_DT_Q6_K};
    const q35_isa keep = q35_isa_get();
    q35_isa_set(Q35_ISA_SCALAR);
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const q35_dtype dt = dts[i];
        const int64_t rows = 9, cols = 512;
        const int n = 3;
        mat m;
        mat_make(&m, dt, rows, cols);
        float X[3 * 512], Y[3 * 9], xr[512];
        fill_acts(X, n, cols);
        q35_matmul(&m.rows, X, n, Y);
        for (int t = 0; t < n; t++) {
            const float *x = X + t * cols;
            memcpy(xr, x, sizeof xr);
            if (dt == Q35_DT_Q4R) q35_rot_ref(xr, cols);
            for (int64_t r = 0; r < rows; r++) {
                double exact = 0, mag = 0, bound = 0;
                for (int64_t k = 0; k < cols; k++) {
                    exact += (double)m.deq[r * cols + k] * x[k];
                    mag += fabs((double)m.deq[r * cols + k] * x[k]);
                }
                if (is_int(dt)) { /* in the rotated basis for Q4R: |w'| sums */
                    float wr[512];
                    memcpy(wr, m.deq + r * cols, sizeof wr);
                    if (dt == Q35_DT_Q4R) q35_rot_ref(wr, cols);
                    for (int b = 0; b < cols / 32; b++) {
                        double sw = 0, amax = 0;
                        for (int k = 0; k < 32; k++) {
                            sw += fabs(wr[32 * b + k]);
                            amax = fmax(amax, fabs(xr[32 * b + k]));
                        }
                        bound += sw * amax / 254.0;
                    }
                }
                bound = bound * 1.001 + 1e-5 * mag;
                CHECK(fabs(Y[t * rows + r] - exact) <= bound, "%s row %lld token %d: %.9g vs %.9g (bound %.3g)", q35_dtype_name(dt),
                      (long long)r, t, Y[t * rows + r], exact, bound);
            }
        }
        mat_free(&m);
    }
    isa_use(keep);
}

/* q35_matmul_rows on a range that starts and ends inside 16-row groups writes only that range. */
static void matmul_row_range(void) {
    q35_isa isas[Q35_ISA_COUNT + 3];
    const int nisa = isa_list(isas);
    const q35_isa keep = q35_isa_get();
    const q35_dtype dts[] = {Q35_DT_F16, Q35_DT_BF16, Q35_DT_F32, Q35_DT_Q8_0, Q35_DT_Q4R, Q35_DT_Q6_K};
    const size_t nd = sizeof dts / sizeof dts[0];
    const int keep_streams = q35_pf_streams;
    for (size_t i = 0; i < 3 * nd; i++) {
        const int64_t rows = 50, cols = 256;
        /* 8+ tokens: the AVX-512 float panels and AMX tiles too; then one token with 1 and 2 weight streams */
        const int n = i < nd ? 9 : 1;
        const q35_dtype dt = dts[i % nd];
        q35_pf_streams = i < 2 * nd ? 1 : 2;
        mat m;
        mat_make(&m, dt, rows, cols);
        float X[9 * 256], full[9 * 50], Y[9 * 50];
        fill_acts(X, n, cols);
        q35_isa_set(Q35_ISA_SCALAR);
        q35_matmul(&m.rows, X, n, full);
        for (int ii = 0; ii < nisa; ii++) {
            isa_use(isas[ii]);
            const q35_tensor *W = m.r16.data ? &m.r16 : &m.rows;
            for (int k = 0; k < n * 50; k++) Y[k] = -7.0f;
            q35_matmul_rows(W, X, n, Y, 5, 37);
            for (int t = 0; t < n; t++)
                for (int r = 0; r < 50; r++) {
                    const float y = Y[t * 50 + r];
                    if (r < 5 || r >= 37) CHECK(y == -7.0f, "%s %s n %d streams %d: row %d outside the range was written", q35_dtype_name(dt), isa_str(isas[ii]), n, q35_pf_streams, r);
                    else CHECK(fabsf(y - full[t * 50 + r]) <= 1e-4f * (1 + fabsf(full[t * 50 + r])), "%s %s n %d streams %d row %d: %g vs %g", q35_dtype_name(dt),
                               isa_str(isas[ii]), n, q35_pf_streams, r, y, full[t * 50 + r]);
                }
        }
        mat_free(&m);
    }
    q35_pf_streams = keep_streams;
    isa_use(keep);
}

/* q35_matmul_batch (float formats may use panels for 8+ tokens) against the scalar reference
 * within fp32 rounding, on every ISA; q35_matmul itself stays row-invariant (token t's bits do not
 * depend on n), which the runtime relies on. */
static void matmul_batch(void) {
    q35_isa isas[Q35_ISA_COUNT + 3];
    const int nisa = isa_list(isas);
    const q35_isa keep = q35_isa_get();
    const q35_dtype dts[] = {Q35_DT_F32, Q35_DT_F16, Q35_DT_BF16, Q35_DT_Q8_0};
    const int NB[] = {8, 23, 64};
    const int64_t RB[][2] = {{17, 33}, {67, 1024}, {16, 300}};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        for (int c = 0; c < 3; c++) {
            const int n = NB[c];
            const int64_t rows = RB[c][0], cols = dts[i] == Q35_DT_Q8_0 ? 1024 : RB[c][1];
            mat m;
            mat_make(&m, dts[i], rows, cols);
            float *X = malloc(sizeof(float) * (size_t)(n * cols)), *ref = malloc(sizeof(float) * (size_t)(n * rows)),
                  *Y = malloc(sizeof(float) * (size_t)(n * rows)), *one = malloc(sizeof(float) * (size_t)rows);
            fill_acts(X, n, cols);
            q35_isa_set(Q35_ISA_SCALAR);
            q35_matmul(&m.rows, X, n, ref);
            for (int ii = 0; ii < nisa; ii++) {
                isa_use(isas[ii]);
                const q35_tensor *W = m.r16.data ? &m.r16 : &m.rows;
                q35_matmul_batch(W, X, n, Y);
                int bad = 0;
                for (int t = 0; t < n && !bad; t++)
                    for (int64_t r = 0; r < rows && !bad; r++) {
                        double mag = 0;
                        for (int64_t k = 0; k < cols; k++) mag += fabs((double)m.deq[r * cols + k] * X[t * cols + k]);
                        if (!(fabs((double)Y[t * rows + r] - ref[t * rows + r]) <= 1e-5 * mag + 1e-30)) {
                            CHECK(0, "batch %s %s rows %lld cols %lld n %d: Y[%d][%lld] = %.9g, reference %.9g", q35_dtype_name(dts[i]),
                                  isa_str(isas[ii]), (long long)rows, (long long)cols, n, t, (long long)r, Y[t * rows + r], ref[t * rows + r]);
                            bad = 1;
                        }
                    }
                /* row invariance of q35_matmul: the last token alone gives the same bits as in the batch */
                q35_matmul(W, X, n, Y);
                q35_matmul(W, X + (size_t)(n - 1) * cols, 1, one);
                CHECK(!memcmp(one, Y + (size_t)(n - 1) * rows, sizeof(float) * (size_t)rows), "%s %s: q35_matmul is not row-invariant (n %d)",
                      q35_dtype_name(dts[i]), isa_str(isas[ii]), n);
            }
            free(X);
            free(ref);
            free(Y);
            free(one);
            mat_free(&m);
        }
    isa_use(keep);
}

/* q35_matmul_many: one dispatch for several matrices of one input gives bitwise the separate
 * products (rows not multiples of 16, mixed formats falling back), on every ISA and 1-2 threads. */
static void matmul_many(void) {
    q35_isa isas[Q35_ISA_COUNT + 3];
    const int nisa = isa_list(isas);
    const q35_isa keep = q35_isa_get();
    const int keep_threads = q35_get_threads();
    const q35_dtype dts[][3] = {{Q35_DT_Q8_0, Q35_DT_Q8_0, Q35_DT_Q8_0}, {Q35_DT_Q4_0, Q35_DT_Q4_0, Q35_DT_Q4_0},
                                {Q35_DT_Q4R, Q35_DT_Q4R, Q35_DT_Q4R}, {Q35_DT_Q4_0, Q35_DT_Q8_0, Q35_DT_BF16}};
    const int64_t rows[3] = {1040, 17, 520}, cols = 1024;
    const int NSM[] = {1, 5, 19};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        mat m[3];
        for (int k = 0; k < 3; k++) mat_make(&m[k], dts[d][k], rows[k], cols);
        const q35_tensor *W[3];
        for (int k = 0; k < 3; k++) W[k] = m[k].r16.data ? &m[k].r16 : &m[k].rows;
        for (int in = 0; in < 3; in++) {
            const int n = NSM[in];
            float *X = malloc(sizeof(float) * (size_t)(n * cols));
            fill_acts(X, n, cols);
            float *sep[3], *many[3];
            for (int k = 0; k < 3; k++) {
                sep[k] = malloc(sizeof(float) * (size_t)(n * rows[k]));
                many[k] = malloc(sizeof(float) * (size_t)(n * rows[k]));
            }
            for (int ii = 0; ii < nisa; ii++)
                for (int th = 1; th <= 2; th++) {
                    isa_use(isas[ii]);
                    q35_set_threads(th);
                    for (int k = 0; k < 3; k++) q35_matmul(W[k], X, n, sep[k]);
                    for (int k = 0; k < 3; k++) memset(many[k], 0x7f, sizeof(float) * (size_t)(n * rows[k]));
                    q35_matmul_many(W, many, 3, X, n);
                    for (int k = 0; k < 3; k++)
                        CHECK(!memcmp(sep[k], many[k], sizeof(float) * (size_t)(n * rows[k])), "%s %s/%s/%s n %d threads %d: matrix %d differs",
                              isa_str(isas[ii]), q35_dtype_name(dts[d][0]), q35_dtype_name(dts[d][1]), q35_dtype_name(dts[d][2]), n, th, k);
                }
            for (int k = 0; k < 3; k++) {
                free(sep[k]);
                free(many[k]);
            }
            free(X);
        }
        for (int k = 0; k < 3; k++) mat_free(&m[k]);
    }
    q35_set_threads(keep_threads);
    isa_use(keep);
}

/* Rows as long as the unpacking buffers (AMX and the unpacked tiles: 6144 columns) and longer,
 * and row ranges inside 16-row groups with a token tail: every ISA bitwise equal to the scalar
 * reference, rows outside the range untouched. */
static void matmul_long_rows(void) {
    q35_isa isas[Q35_ISA_COUNT + 3];
    const int nisa = isa_list(isas);
    const q35_isa keep = q35_isa_get();
    const q35_dtype dts[] = {Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R, Q35_DT_Q4_K, Q35_DT_Q6_K, Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4_K, Q35_DT_Q6_K};
    const int64_t rows = 40, cmax = 6400, ncols[] = {6400, 6400, 6400, 6400, 6400, 6144, 6144, 6144, 6144};
    const int n = 97; /* AMX: six tiles and a tail; the unpacked tiles (up to 96 tokens for Q4_K) */
    float *X = malloc(sizeof(float) * (size_t)(n * cmax)), *ref = malloc(sizeof(float) * n * rows), *Y = malloc(sizeof(float) * n * rows);
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const int64_t cols = ncols[i];
        fill_acts(X, n, cols);
        mat m;
        mat_make(&m, dts[i], rows, cols);
        q35_isa_set(Q35_ISA_SCALAR);
        q35_matmul(&m.rows, X, n, ref);
        for (int ii = 0; ii < nisa; ii++) {
            isa_use(isas[ii]);
            for (int pass = 0; pass < 2; pass++) {
                const int64_t r0 = pass ? 5 : 0, r1 = pass ? 37 : rows;
                for (int k = 0; k < n * rows; k++) Y[k] = -7.0f;
                q35_matmul_rows(&m.r16, X, n, Y, r0, r1);
                int bad = 0;
                for (int t = 0; t < n && !bad; t++)
                    for (int64_t r = 0; r < rows && !bad; r++) {
                        const float y = Y[t * rows + r], e = r >= r0 && r < r1 ? ref[t * rows + r] : -7.0f;
                        if (memcmp(&y, &e, 4)) {
                            CHECK(0, "%s %s cols %lld rows [%lld, %lld): Y[%d][%lld] = %.9g, expected %.9g", q35_dtype_name(dts[i]), isa_str(isas[ii]),
                                  (long long)cols, (long long)r0, (long long)r1, t, (long long)r, y, e);
                            bad = 1;
                        }
                    }
            }
        }
        mat_free(&m);
    }
    isa_use(keep);
    free(X);
    free(ref);
    free(Y);
}

#if defined(__x86_64__)
/* The AMX and AVX-VNNI kernels on any AVX-512 CPU (mm.h, q35_kern_emulate): the integer products'
 * checks again with the AMX products over the software tile unit (amx_emu.h) and the AVX-VNNI
 * table built with the EVEX encodings of its instructions. */
static void emulated_amx_avxvnni(void) {
    const q35_mm_fn amx[3] = {q35_mm_amxemu_q8, q35_mm_amxemu_q4, q35_mm_amxemu_q6k};
    const q35_isa keep = q35_isa_get();
    CHECK(q35_kern_emulate(&q35_kern_avx2vnni_evex, amx) == 0, "an AVX-512 CPU");
    q35_isa isas[Q35_ISA_COUNT + 3];
    CHECK(isa_list(isas) == 6, "scalar, avx2, avx512 and the avx2-maddubs, avx512-vnni and avx512-q4packed variants");
    isa_use(Q35_ISA_AVX512);
    CHECK(q35_kern_active()->mm[Q35_DT_Q6_K][1] == q35_mm_amxemu_q6k && strstr(q35_isa_describe(), "amx"), "%s", q35_isa_describe());
    isa_use(Q35_ISA_AVX2);
    CHECK(q35_kern_active() == &q35_kern_avx2vnni_evex && strstr(q35_isa_describe(), "avx-vnni"), "%s", q35_isa_describe());
    isa_use(keep);
    /* the other variants were checked natively above: only the two emulated ones again */
    emulated_only = 1;
    const q35_dtype dts[] = {Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R, Q35_DT_Q4_K, Q35_DT_Q6_K};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) compare_format(dts[i]);
    matmul_row_range();
    matmul_long_rows();
    matmul_batch();
    matmul_many();
    emulated_only = 0;
    CHECK(q35_kern_emulate(NULL, NULL) == 0, "restored");
    isa_use(Q35_ISA_AVX512);
    CHECK(q35_kern_active()->mm[Q35_DT_Q6_K][1] != q35_mm_amxemu_q6k, "the emulated AMX products left in use");
    isa_use(Q35_ISA_AVX2);
    CHECK(q35_kern_active() != &q35_kern_avx2vnni_evex, "the EVEX AVX-VNNI table left in use");
    isa_use(keep);
}
#endif

/* ---- activation quantization and rotation, every ISA bitwise equal to the scalar one ---- */

static void actq_and_rotation(void) {
    const int64_t cols = 1024;
    const int n = 3;
    float X[3 * 1024], R[1024], Rref[1024];
    fill_acts(X, n, cols);
    X[5] = 1e-38f; /* a block whose max is near the threshold of a zero block */
    X[cols + 67] = INFINITY; /* blocks with inf / NaN quantize to zero on every ISA */
    X[cols + 200] = NAN;
    X[2 * cols + 300] = -INFINITY;
    const int nb = (int)(cols / 32);
    /* in tiles of 2 tokens (mm.h): the second tile holds token 2 and a padding token */
    int8_t q0[4 * 1024], q1[4 * 1024];
    float d0[4 * 32], d1[4 * 32];
    int32_t s0[4 * 32], s1[4 * 32];
    int16_t h0[8 * 32], h1[8 * 32];
    memset(q0, 0, sizeof q0), memset(d0, 0, sizeof d0), memset(s0, 0, sizeof s0), memset(h0, 0, sizeof h0);
    memset(d1, 0, sizeof d1), memset(s1, 0, sizeof s1), memset(h1, 0, sizeof h1);
    q35_act a0 = {q0, d0, s0, h0, NULL, nb, n, 2}, a1 = {q1, d1, s1, h1, NULL, nb, n, 2};
    for (int group = 1; group <= 8; group += 7) { /* per block, and per Q4_K super-block (mm.h) */
        for (int t = 0; t < n; t++) q35_actq_ref(X + t * cols, t, -8, group, &a0);
        const int nonfinite[3][2] = {{1, 67 / 32}, {1, 200 / 32}, {2, 300 / 32}}; /* token, block */
        for (int k = 0; k < 3; k++) /* the whole group */
            for (int b = nonfinite[k][1] / group * group; b < (nonfinite[k][1] / group + 1) * group; b++) {
                const size_t i = q35_act_at(&a0, b, nonfinite[k][0]);
                int zero = d0[i] == 0.0f && s0[i] == 0;
                for (int j = 0; j < 32; j++) zero &= q0[32 * i + j] == 0;
                CHECK(zero, "group %d: token %d block %d holds inf/NaN but did not quantize to zero", group, nonfinite[k][0], b);
            }
        q35_isa isas[Q35_ISA_COUNT + 3];
        const int nisa = isa_list(isas);
        const q35_isa keep = q35_isa_get();
        for (int ii = 0; ii < nisa; ii++) {
            isa_use(isas[ii]);
            const q35_kern *K = q35_kern_active();
            memset(q1, 0x55, sizeof q1);
            for (int i = 0; i < nb; i++) memset(q1 + 32 * q35_act_at(&a1, i, 3), 0, 32); /* the padding token */
            for (int t = 0; t < n; t++) K->actq(X + t * cols, t, -8, group, &a1);
            CHECK(!memcmp(q0, q1, sizeof q0) && !memcmp(d0, d1, sizeof d0) && !memcmp(s0, s1, sizeof s0) && !memcmp(h0, h1, sizeof h0),
                  "%s, group %d: 8-bit activations differ from the reference", isa_str(isas[ii]), group);
            memcpy(R, X, sizeof R);
            memcpy(Rref, X, sizeof R);
            K->rot(R, cols);
            q35_rot_ref(Rref, cols);
            CHECK(!memcmp(R, Rref, sizeof R), "%s: Q4R rotation differs from the reference", isa_str(isas[ii]));
        }
        isa_use(keep);
        /* the quantized values themselves: within half a step of the group's scale */
        for (int b = 0; b < nb; b++) {
            float amax = 0;
            for (int k = 0; k < 32 * group; k++) amax = fmaxf(amax, fabsf(X[32 * (b / group * group) + k]));
            const size_t i = q35_act_at(&a0, b, 0);
            CHECK(d0[i] == amax / 127.0f, "group %d block %d: scale %g, not the group's max %g / 127", group, b, d0[i], amax);
            for (int k = 0; k < 32; k++) {
                const float err = fabsf(X[32 * b + k] - d0[i] * q0[i * 32 + k]);
                CHECK(err <= amax / 254.0f * 1.0001f + 1e-30f, "group %d block %d value %d: error %g (max %g)", group, b, k, err, amax);
            }
        }
    }
    /* R is orthogonal: R^T R x = x, and |R x| = |x| */
    float v[128], w[128];
    fill_gauss(v, 128, 1.0f);
    memcpy(w, v, sizeof v);
    q35_q4r_rotate(w);
    double n0 = 0, n1 = 0;
    for (int k = 0; k < 128; k++) { n0 += (double)v[k] * v[k]; n1 += (double)w[k] * w[k]; }
    CHECK(fabs(n0 - n1) < 1e-4 * n0, "rotation changes the norm: %g -> %g", n0, n1);
    q35_q4r_unrotate(w);
    for (int k = 0; k < 128; k++) CHECK(fabsf(w[k] - v[k]) < 1e-5f, "R^T R x != x at %d: %g vs %g", k, w[k], v[k]);
    /* R e_0 = s_0 H[:, 0] / sqrt(128): every entry +-1/sqrt(128) with the sign of s_0 */
    memset(v, 0, sizeof v);
    v[0] = 1.0f;
    q35_q4r_rotate(v);
    const float s0v = (Q35_Q4R_SIGNS[0] & 1u) ? -1.0f : 1.0f;
    for (int k = 0; k < 128; k++) CHECK(v[k] == s0v * Q35_Q4R_SCALE, "R e0 [%d] = %g", k, v[k]);
}

/* ---- known answers, from the GGUF block definitions ---- */

static void kat_q8_0(void) {
    uint8_t blk[34] = {0x00, 0x38}; /* d = 0.5 */
    const int8_t q[32] = {1, -2, 127, -128, 0, 5};
    memcpy(blk + 2, q, 32);
    float y[32];
    CHECK(q35_dequantize_row(Q35_DT_Q8_0, blk, y, 32) == 0, "failed");
    CHECK(y[0] == 0.5f && y[1] == -1.0f && y[2] == 63.5f && y[3] == -64.0f && y[4] == 0.0f && y[5] == 2.5f && y[31] == 0.0f,
          "%g %g %g %g %g %g", y[0], y[1], y[2], y[3], y[4], y[5]);
}

static void kat_q4_0(void) {
    uint8_t blk[18] = {0x00, 0x40}; /* d = 2 */
    blk[2] = 0x9F;                  /* x0 = 2*(15-8) = 14, x16 = 2*(9-8) = 2 */
    blk[3] = 0x08;                  /* x1 = 0, x17 = 2*(0-8) = -16 */
    blk[17] = 0x88;                 /* x15 = x31 = 0; the others: nibble 0 -> -16 */
    float y[32];
    CHECK(q35_dequantize_row(Q35_DT_Q4_0, blk, y, 32) == 0, "failed");
    CHECK(y[0] == 14 && y[16] == 2 && y[1] == 0 && y[17] == -16 && y[2] == -16 && y[15] == 0 && y[31] == 0, "%g %g %g %g %g %g %g", y[0], y[16], y[1],
          y[17], y[2], y[15], y[31]);
}

static void kat_q4_k(void) {
    /* d = 1, dmin = 0.5; sub-block scales 1 2 3 4 33 45 63 17, mins 5 6 7 8 50 20 1 63, packed by hand:
     * scales[0..3] = sc | (sc[j+4] >> 4) << 6, scales[4..7] = m | (m[j+4] >> 4) << 6,
     * scales[8..11] = (sc[j+4] & 15) | (m[j+4] & 15) << 4 */
    uint8_t blk[144] = {0x00, 0x3C, 0x00, 0x38, 129, 130, 195, 68, 197, 70, 7, 200, 33, 77, 31, 241};
    uint8_t *qs = blk + 16;
    qs[0] = 0x3A;  /* value 0: q 10 (sub-block 0); value 32: q 3 (sub-block 1) */
    qs[69] = 0xF0; /* value 133: q 0 (sub-block 4); value 165: q 15 (sub-block 5) */
    float y[256];
    CHECK(q35_dequantize_row(Q35_DT_Q4_K, blk, y, 256) == 0, "failed");
    CHECK(y[0] == 1 * 10 - 0.5f * 5, "y0 %g", y[0]);       /* 7.5 */
    CHECK(y[32] == 2 * 3 - 0.5f * 6, "y32 %g", y[32]);     /* 3 */
    CHECK(y[133] == 33 * 0 - 0.5f * 50, "y133 %g", y[133]); /* -25 */
    CHECK(y[165] == 45 * 15 - 0.5f * 20, "y165 %g", y[165]); /* 665 */
    CHECK(y[200] == -0.5f * 1, "y200 %g", y[200]);          /* sub-block 6 */
    CHECK(y[255] == -0.5f * 63, "y255 %g", y[255]);         /* sub-block 7 */
    CHECK(y[100] == -0.5f * 8, "y100 %g", y[100]);          /* sub-block 3, q 0: -m*dmin */
}

static void kat_q6_k(void) {
    uint8_t blk[210] = {0};
    uint8_t *ql = blk, *qh = blk + 128;
    int8_t *sc = (int8_t *)(blk + 192);
    blk[208] = 0x00;
    blk[209] = 0x40; /* d = 2 */
    sc[0] = 3; sc[1] = -2; sc[2] = 9; sc[4] = 4; sc[6] = 5; sc[15] = -1;
    ql[0] = 0x5A;  /* value 0: low 10; value 64: low 5 */
    qh[0] = 0xE4;  /* top bits: value 0 -> 0, value 32 -> 1, value 64 -> 2, value 96 -> 3 */
    ql[32] = 0x0F; /* value 32: low 15; value 96: low 0 */
    ql[127] = 0x70; qh[63] = 0x40; /* value 255: low 7, top 1 */
    float y[256];
    CHECK(q35_dequantize_row(Q35_DT_Q6_K, blk, y, 256) == 0, "failed");
    CHECK(y[0] == 2 * 3 * (10 - 32), "y0 %g", y[0]);          /* -132 */
    CHECK(y[64] == 2 * 4 * (5 + 32 - 32), "y64 %g", y[64]);   /* 40 */
    CHECK(y[32] == 2 * 9 * (15 + 16 - 32), "y32 %g", y[32]);  /* -18 */
    CHECK(y[96] == 2 * 5 * (0 + 48 - 32), "y96 %g", y[96]);   /* 160 */
    CHECK(y[16] == 2 * -2 * -32, "y16 %g", y[16]);             /* 128 */
    CHECK(y[255] == 2 * -1 * (7 + 16 - 32), "y255 %g", y[255]); /* 18 */
    CHECK(y[1] == 2 * 3 * -32, "y1 %g", y[1]);                 /* -192 */
}

/* ---- quantization error ---- */

static double rel_rms(q35_dtype dt, const float *x, int64_t n) {
    void *buf = malloc(q35_row_bytes(dt, n) + 4 * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n);
    q35_quantize_row(dt, x, buf, n);
    q35_dequantize_row(dt, buf, y, n);
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    free(buf);
    free(y);
    return sqrt(e / s);
}

/* Q4_K products quantize their activations per super-block (one scale for 256 values, mm.h), not
 * per block of 32: the error that adds, against the dequantized weights times the float
 * activations, on Gaussian activations and on ones with an outlier channel per token, next to
 * what per-block scales give (printed; bounds from the measured values). And q35_matmul's Q4_K
 * product is within rounding of the dequantized weights times the activations it quantized. */
static double act_err(const mat *m, const float *X, int n, int64_t cols, int group, float *Yq) {
    const int nb = (int)(cols / 32);
    int8_t *q = malloc((size_t)n * cols);
    float *d = malloc(sizeof(float) * (size_t)n * nb);
    int32_t *sm = malloc(sizeof(int32_t) * (size_t)n * nb);
    int16_t *h = malloc(sizeof(int16_t) * 2 * (size_t)n * nb);
    q35_act a = {q, d, sm, h, NULL, nb, n, n};
    double e = 0, s = 0;
    for (int t = 0; t < n; t++) q35_actq_ref(X + t * cols, t, 1, group, &a);
    const int64_t rows = m->rows.shape[0];
    for (int t = 0; t < n; t++)
        for (int64_t r = 0; r < rows; r++) {
            double exact = 0, deq = 0;
            for (int64_t k = 0; k < cols; k++) {
                const size_t i = q35_act_at(&a, k / 32, t);
                exact += (double)m->deq[r * cols + k] * X[t * cols + k];
                deq += (double)m->deq[r * cols + k] * ((double)d[i] * q[32 * i + k % 32]);
            }
            e += (deq - exact) * (deq - exact);
            s += exact * exact;
            if (Yq) Yq[t * rows + r] = (float)deq;
        }
    free(q), free(d), free(sm), free(h);
    return sqrt(e / s);
}
static void q4k_activation_error(void) {
    const int64_t rows = 64, cols = 1024;
    const int n = 8;
    mat m;
    mat_make(&m, Q35_DT_Q4_K, rows, cols);
    float *X = malloc(sizeof(float) * n * cols), *Y = malloc(sizeof(float) * n * rows), *E = malloc(sizeof(float) * n * rows);
    fill_gauss(X, n * cols, 1.0f);
    const double g1 = act_err(&m, X, n, cols, 1, NULL), g8 = act_err(&m, X, n, cols, 8, E);
    q35_matmul(&m.r16, X, n, Y);
    double worst = 0;
    for (int i = 0; i < n * rows; i++) {
        const double e = fabs((double)Y[i] - E[i]) / (fabs((double)E[i]) + 1e-3);
        worst = e > worst ? e : worst;
    }
    for (int t = 0; t < n; t++) X[t * cols + 100 + t] = 20.0f; /* an outlier channel, 20 sigma */
    const double o1 = act_err(&m, X, n, cols, 1, NULL), o8 = act_err(&m, X, n, cols, 8, NULL);
    fprintf(stderr, "  Q4_K product, activation quantization's relative RMS error: per block / per super-block %.4f / %.4f, "
                    "with a 20-sigma outlier %.4f / %.4f (the weights' own: ~0.077)\n", g1, g8, o1, o8);
    CHECK(worst < 1e-4, "q35_matmul's Q4_K product %g from the dequantized one", worst);
    CHECK(g1 < g8 && g8 < 0.012, "Gaussian: per block %g, per super-block %g", g1, g8);
    CHECK(o8 < 0.03, "outlier: per super-block %g", o8);
    mat_free(&m);
    free(X), free(Y), free(E);
}

/* dequantize(quantize(x)) on Gaussian rows: relative RMS error under a bound per format (measured:
 * q8_0 0.0052, q4_0 0.084, q4r 0.080, q4_k 0.078, q6_k 0.019, f16 2.1e-4, bf16 1.6e-3), and Q4R below Q4_0 at the same 18 bytes per 32 values. */
static void quant_error_bounds(void) {
    const int64_t n = 4096;
    float *x = malloc(sizeof(float) * n);
    fill_gauss(x, n, 0.02f);
    const double q8 = rel_rms(Q35_DT_Q8_0, x, n), q40 = rel_rms(Q35_DT_Q4_0, x, n), q4r = rel_rms(Q35_DT_Q4R, x, n);
    const double q4k = rel_rms(Q35_DT_Q4_K, x, n), q6k = rel_rms(Q35_DT_Q6_K, x, n), f16 = rel_rms(Q35_DT_F16, x, n), bf16 = rel_rms(Q35_DT_BF16, x, n);
    fprintf(stderr, "  relative RMS error: q8_0 %.5f q4_0 %.5f q4r %.5f q4_k %.5f q6_k %.5f f16 %.2e bf16 %.2e\n", q8, q40, q4r, q4k, q6k, f16, bf16);
    CHECK(q8 < 0.0085, "q8_0 %g", q8);
    CHECK(q40 < 0.125, "q4_0 %g", q40);
    CHECK(q4r < 0.105, "q4r %g", q4r);
    CHECK(q4k < 0.12, "q4_k %g", q4k);
    CHECK(q6k < 0.035, "q6_k %g", q6k);
    CHECK(f16 < 4e-4, "f16 %g", f16);
    CHECK(bf16 < 3e-3, "bf16 %g", bf16);
    CHECK(q4r < q40, "q4r %g is not below q4_0 %g", q4r, q40); /* Gaussian: only the scale search helps (~5%) */
    /* heavy-tailed rows (outliers are where rotation helps most) */
    for (int64_t i = 0; i < n; i += 97) x[i] *= 12.0f;
    const double o40 = rel_rms(Q35_DT_Q4_0, x, n), o4r = rel_rms(Q35_DT_Q4R, x, n);
    fprintf(stderr, "  with outliers: q4_0 %.5f q4r %.5f\n", o40, o4r);
    CHECK(o4r < 0.6 * o40, "with outliers q4r %g is not well below q4_0 %g", o4r, o40); /* measured 0.071 vs 0.160 */
    CHECK(q35_quantize_row(Q35_DT_Q4R, x, x, 96) == -1, "Q4R accepted 96 columns");
    CHECK(q35_quantize_row(Q35_DT_Q4_K, x, x, 128) == -1, "Q4_K accepted 128 columns");
    free(x);
}

/* Our Q4_0 and Q8_0 quantizers reproduce GGUF's reference rounding on a hand-checked block. */
static void quantizer_known_answers(void) {
    float x[32] = {0};
    x[0] = -1.0f; /* the extreme: d = -1/-8 = 0.125, code 0 */
    x[1] = 0.5f;  /* 0.5/0.125 + 8.5 = 12.5 -> 12 */
    x[2] = 0.3f;  /* 2.4 + 8.5 = 10.9 -> 10 */
    x[17] = 0.9f; /* 7.2 + 8.5 = 15.7 -> 15 */
    uint8_t b[18];
    q35_quantize_row(Q35_DT_Q4_0, x, b, 32);
    CHECK(b[0] == 0x00 && b[1] == 0x30, "d %02x %02x", b[0], b[1]); /* f16 0.125 = 0x3000 */
    CHECK(b[2] == (0 | 8 << 4) && b[3] == (12 | 15 << 4) && b[4] == (10 | 8 << 4), "%02x %02x %02x", b[2], b[3], b[4]);
    uint8_t c[34];
    x[0] = 31.75f;  /* amax: d = 31.75/127 = 0.25 (f16 0x3400), 1/d = 4 */
    x[1] = -0.375f; /* -1.5 rounds half away from zero: -2 */
    x[2] = 0.3f;    /* 1.2 -> 1 */
    q35_quantize_row(Q35_DT_Q8_0, x, c, 32);
    CHECK(c[0] == 0x00 && c[1] == 0x34, "d %02x %02x", c[0], c[1]);
    CHECK((int8_t)c[2] == 127 && (int8_t)c[3] == -2 && (int8_t)c[4] == 1 && (int8_t)c[19] == 4, "%d %d %d %d", (int8_t)c[2], (int8_t)c[3],
          (int8_t)c[4], (int8_t)c[19]);
}

/* The R16 interleave keeps every value (dequantized rows are bitwise equal). */
static void repack_round_trip(void) {
    const q35_dtype dts[] = {Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R, Q35_DT_Q4_K, Q35_DT_Q6_K};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const int64_t rows = 37, cols = 512;
        mat m;
        mat_make(&m, dts[i], rows, cols);
        CHECK(m.r16.data && m.r16.layout == Q35_LAYOUT_R16 && m.r16.nbytes == q35_r16_group_bytes(dts[i], cols) * 3, "%s", q35_dtype_name(dts[i]));
        float a[512], b[512];
        for (int64_t r = 0; r < rows; r++) {
            q35_tensor_dequant_row(&m.rows, r, a);
            q35_tensor_row_f32(&m.r16, r, b);
            CHECK(!memcmp(a, b, sizeof a), "%s row %lld differs after repacking", q35_dtype_name(dts[i]), (long long)r);
        }
        if (dts[i] == Q35_DT_Q6_K) CHECK(q35_r16_group_bytes(dts[i], 256) == 16 * 210, "q6_k r16 bytes");
        mat_free(&m);
    }
    q35_tensor f = {.dtype = Q35_DT_F16, .ndim = 2, .shape = {4, 64}};
    CHECK(q35_repack_size(&f) == 0, "f16 has no r16 layout");
}

static void f16_conversion(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = q35_f16_to_f32((uint16_t)h);
        if (f != f) continue;
        if (q35_f32_to_f16(f) != h) bad++;
    }
    CHECK(bad == 0, "%d halves do not survive f16 -> f32 -> f16", bad);
    CHECK(q35_f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00, "tie to even down");
    CHECK(q35_f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02, "tie to even up");
    CHECK(q35_f32_to_f16(65520.0f) == 0x7C00 && q35_f32_to_f16(65519.0f) == 0x7BFF, "overflow");
    CHECK(q35_f32_to_f16(5.960464477539063e-08f) == 0x0001 && q35_f32_to_f16(2.9e-08f) == 0x0000, "subnormal");
}

/* bf16 dot mode (AVX-512 BF16): activations rounded to bf16, so each product carries up to
 * 2^-8 relative error; the exact mode stays the default. */
static void bf16_dot_mode(void) {
    CHECK(q35_matmul_set_bf16_dot(0) == 0, "bf16 dot mode is on by default");
    const int64_t rows = 21, cols = 1000;
    const int n = 6;
    mat m;
    mat_make(&m, Q35_DT_BF16, rows, cols);
    float *X = malloc(sizeof(float) * n * cols), Y[6 * 21], E[6 * 21];
    fill_acts(X, n, cols);
    q35_matmul(&m.rows, X, n, E);
    q35_matmul_set_bf16_dot(1);
    q35_matmul(&m.rows, X, n, Y);
    q35_matmul_set_bf16_dot(0);
    double worst = 0;
    for (int t = 0; t < n; t++)
        for (int64_t r = 0; r < rows; r++) {
            double mag = 0;
            for (int64_t k = 0; k < cols; k++) mag += fabs((double)m.deq[r * cols + k] * X[t * cols + k]);
            const double e = fabs((double)Y[t * rows + r] - E[t * rows + r]) / mag;
            worst = fmax(worst, e);
            CHECK(e <= 1.0 / 256, "bf16 dot row %lld token %d: %g vs %g", (long long)r, t, Y[t * rows + r], E[t * rows + r]);
        }
    fprintf(stderr, "  bf16 dot (%s): worst |error| / sum|w x| = %.2e\n", q35_cpu_has_avx512bf16() && q35_isa_get() == Q35_ISA_AVX512 ? "vdpbf16ps" : "exact fallback", worst);
    free(X);
    mat_free(&m);
}

/* The approximate LM-head scan (headscan.h) of every ISA against the reference: the same integer
 * sums per block, so a and e differ only by float rounding (relative to the sum of the terms'
 * magnitudes), on row counts and block counts with and without a SIMD tail. */
static void headscan_variants(void) {
    const int NBS[] = {1, 3, 4, 16, 17, 32, 35};
    const int64_t R = 37;
    q35_isa isas[8];
    const int nisa = isa_list(isas);
    const q35_isa keep = q35_isa_get();
    for (size_t t = 0; t < sizeof NBS / sizeof NBS[0]; t++) {
        const int nb = NBS[t];
        const size_t row_bytes = 18 * (size_t)nb;
        uint8_t *rows = malloc(row_bytes * (size_t)R);
        int8_t *qh = malloc(32 * (size_t)nb);
        float *dh = malloc(sizeof(float) * (size_t)nb), *g = malloc(sizeof(float) * (size_t)nb), *c = malloc(sizeof(float) * (size_t)nb);
        float *a0 = malloc(sizeof(float) * (size_t)R), *e0 = malloc(sizeof(float) * (size_t)R), *a1 = malloc(sizeof(float) * (size_t)R),
              *e1 = malloc(sizeof(float) * (size_t)R), *mag = malloc(sizeof(float) * (size_t)R);
        for (int64_t r = 0; r < R; r++) {
            uint8_t *row = rows + row_bytes * (size_t)r;
            for (int b = 0; b < nb; b++) {
                const uint16_t h = q35_f32_to_f16(0.01f + 0.05f * rng_unif());
                row[2 * b] = (uint8_t)(h & 0xff), row[2 * b + 1] = (uint8_t)(h >> 8);
            }
            for (size_t k = 2 * (size_t)nb; k < row_bytes; k++) row[k] = (uint8_t)(rng_u64() >> 56);
        }
        for (int k = 0; k < 32 * nb; k++) qh[k] = (int8_t)lrintf(127.0f * (2.0f * rng_unif() - 1.0f));
        for (int b = 0; b < nb; b++) dh[b] = 0.02f * rng_unif(), g[b] = rng_gauss(), c[b] = rng_unif();
        const q35_headscan_act act = {nb, qh, dh, g, c};
        q35_headscan_ref(rows, row_bytes, &act, 0, R, a0, e0);
        for (int64_t r = 0; r < R; r++) { /* the sum of the terms' magnitudes, for the rounding allowance */
            const uint8_t *row = rows + row_bytes * (size_t)r;
            double m = 0;
            for (int b = 0; b < nb; b++) {
                const double d = q35_f16_to_f32((uint16_t)(row[2 * b] | row[2 * b + 1] << 8));
                double sq = 0;
                for (int j = 0; j < 16; j++)
                    sq += (row[2 * nb + 16 * b + j] & 15) * fabs((double)qh[32 * b + j]) + (row[2 * nb + 16 * b + j] >> 4) * fabs((double)qh[32 * b + j + 16]);
                m += d * (dh[b] * sq + fabs((double)g[b]) + c[b]);
            }
            mag[r] = (float)m;
        }
        for (int ii = 0; ii < nisa; ii++) {
            isa_use(isas[ii]);
            const q35_headscan_fn fn = q35_headscan_best();
            for (int64_t r = 0; r < R; r++) a1[r] = e1[r] = -1e30f;
            fn(rows, row_bytes, &act, 2, R - 1, a1, e1); /* rows [2, R-1): the others must stay untouched */
            for (int64_t r = 0; r < R; r++) {
                if (r < 2 || r >= R - 1) {
                    CHECK(a1[r] == -1e30f && e1[r] == -1e30f, "%s nb %d: row %lld outside the range was written", isa_str(isas[ii]), nb, (long long)r);
                    continue;
                }
                CHECK(fabsf(a1[r] - a0[r]) <= 1e-5f * mag[r] && fabsf(e1[r] - e0[r]) <= 1e-5f * mag[r],
                      "%s nb %d row %lld: a %.9g e %.9g, reference a %.9g e %.9g", isa_str(isas[ii]), nb, (long long)r, a1[r], e1[r], a0[r], e0[r]);
            }
        }
        free(rows); free(qh); free(dh); free(g); free(c); free(a0); free(e0); free(a1); free(e1); free(mag);
    }
    isa_use(keep);
}

static void isa_selection(void) {
    const q35_isa best = q35_isa_best(), keep = q35_isa_get();
    CHECK(q35_isa_set(Q35_ISA_SCALAR) == 0, "failed");
    CHECK(q35_isa_get() == Q35_ISA_SCALAR, "failed");
    CHECK(q35_isa_set(Q35_ISA_COUNT) == -1, "failed");
#if defined(__x86_64__)
    CHECK(q35_isa_set(Q35_ISA_NEON) == -1, "neon on x86");
    if (best == Q35_ISA_AVX512) CHECK(q35_isa_set(Q35_ISA_AVX2) == 0, "avx2 below avx512");
#elif defined(__aarch64__)
    CHECK(q35_isa_set(Q35_ISA_AVX2) == -1, "avx2 on arm");
    CHECK(best == Q35_ISA_NEON, "every aarch64 core has NEON (AdvSIMD), best is %s", q35_isa_name(best));
    /* make test-neon says which emulated CPU runs this: Q35_EXPECT_NEONDOT=1 (qemu's default) or 0 (Cortex-A72) */
    const char *want = getenv("Q35_EXPECT_NEONDOT");
    if (want && *want) CHECK(q35_cpu_has_neondot() == (*want == '1'), "dot-product extension found: %d, expected %s", q35_cpu_has_neondot(), want);
    q35_isa_set(Q35_ISA_NEON);
    const int old = q35_kern_use_neondot(0);
    CHECK(!strcmp(q35_isa_describe(), "neon"), "armv8-a table described as %s", q35_isa_describe());
    q35_kern_use_neondot(1);
    CHECK(!strcmp(q35_isa_describe(), q35_cpu_has_neondot() ? "neon (dotprod)" : "neon"), "NEON table described as %s", q35_isa_describe());
    q35_kern_use_neondot(old);
#endif
    isa_use(keep);
    fprintf(stderr, "  best %s, in use %s\n", q35_isa_name(best), q35_isa_describe());
}

/* The prefetch table: each vendor's differs from the default only where measured; Q35_PF sets every dtype
 * or named ones, and a malformed entry changes nothing. */
static void prefetch_table(void) {
    unsetenv("Q35_PF");
    unsetenv("Q35_STREAMS");
    unsetenv("Q35_UNPACK");
    q35_pf_setup(0);
    CHECK(q35_pf_for(Q35_DT_Q4_0).near == 1024 && q35_pf_for(Q35_DT_Q4_0).far == 4096 && q35_pf_for(Q35_DT_Q6_K).near == 512 &&
              q35_pf_for(Q35_DT_Q6_K).far == 3072,
          "default distances");
    q35_pf_setup(1);
    CHECK(q35_pf_for(Q35_DT_Q6_K).far == 8192 && q35_pf_for(Q35_DT_Q4_0).far == 16384 && q35_pf_for(Q35_DT_Q8_0).far == 16384 &&
              q35_pf_for(Q35_DT_BF16).far == 16384 && q35_pf_for(Q35_DT_F16).far == 4096,
          "AMD distances");
    CHECK(q35_pf_streams == 1, "AMD: one weight stream");
#if defined(__x86_64__)
    CHECK(q35_avx512_q4_unpack == 0, "AMD: AVX-512's Q4 prompt tiles packed");
    setenv("Q35_UNPACK", "1", 1);
    q35_pf_setup(1);
    CHECK(q35_avx512_q4_unpack == 1, "Q35_UNPACK=1");
    unsetenv("Q35_UNPACK");
#endif
    q35_pf_setup(0);
    CHECK(q35_pf_streams == 2, "Intel: two weight streams");
#if defined(__x86_64__)
    CHECK(q35_avx512_q4_unpack == 1, "Intel: AVX-512's Q4 prompt tiles unpacked");
#endif
    setenv("Q35_STREAMS", "1", 1);
    q35_pf_setup(0);
    CHECK(q35_pf_streams == 1, "Q35_STREAMS=1");
    setenv("Q35_STREAMS", "3", 1);
    q35_pf_setup(1);
    CHECK(q35_pf_streams == 1, "Q35_STREAMS=3 changed the stream count");
    unsetenv("Q35_STREAMS");
    setenv("Q35_PF", "0,0;q6_k=256,512;bogus=1,2;q8_0=x", 1);
    q35_pf_setup(1);
    CHECK(q35_pf_for(Q35_DT_Q4_0).near == 0 && q35_pf_for(Q35_DT_Q4_0).far == 0, "Q35_PF for every dtype");
    CHECK(q35_pf_for(Q35_DT_Q6_K).near == 256 && q35_pf_for(Q35_DT_Q6_K).far == 512, "Q35_PF per dtype");
    CHECK(q35_pf_for(Q35_DT_Q8_0).near == 0, "a malformed entry changed a dtype");
    unsetenv("Q35_PF");
    q35_pf_setup(0); /* back to a plain table for the other tests */
}

/* The run-time prefetch search (pftune.h), driven with made-up timings: every round visits every
 * candidate once, the fastest candidate wins through +-10% noise, and the choice then stays. */
static void prefetch_search(void) {
    q35_pftune t;
    q35_pftune_init(&t, (q35_pf_dist){1024, 4096}); /* also in the fixed list: not twice */
    CHECK(t.n_cand == Q35_PFTUNE_MAX && t.cand[0].near == 1024 && t.cand[0].far == 4096 && t.chosen == -1, "candidates from a listed start");
    for (int a = 0; a < t.n_cand; a++)
        for (int b = a + 1; b < t.n_cand; b++) CHECK(t.cand[a].near != t.cand[b].near || t.cand[a].far != t.cand[b].far, "duplicate candidate");
    q35_pftune_init(&t, (q35_pf_dist){128, 768});
    CHECK(t.n_cand == Q35_PFTUNE_MAX && t.cand[0].near == 128, "an unlisted start comes first");
    int seen[Q35_PFTUNE_MAX] = {0}, order_differs = 0, first[Q35_PFTUNE_MAX];
    for (int r = 0; r < 3; r++) {
        int in_round[Q35_PFTUNE_MAX] = {0};
        for (int i = 0; i < t.n_cand; i++) {
            const int c = q35_pftune_pick(&t);
            CHECK(c >= 0 && c < t.n_cand, "pick in range");
            in_round[c]++, seen[c]++;
            if (r == 0) first[i] = c;
            else order_differs |= first[i] != c;
        }
        for (int c = 0; c < t.n_cand; c++) CHECK(in_round[c] == 1, "a round visits every candidate once");
    }
    CHECK(order_differs, "rounds rotate their order");
    const int64_t bytes = 3 << 20, need = (Q35_PFTUNE_MIN_BYTES + bytes - 1) / bytes, per = need > Q35_PFTUNE_MIN_CALLS ? need : Q35_PFTUNE_MIN_CALLS;
    for (int fastest = 0; fastest < Q35_PFTUNE_MAX; fastest++) {
        q35_pftune_init(&t, (q35_pf_dist){128, 768});
        uint64_t x = 0x1234567u + (uint64_t)fastest;
        int calls = 0, done = 0, outside = 0, second = 0;
        while (!done && calls < 100000) {
            const int c = q35_pftune_pick(&t);
            if (t.final[0] >= 0) second++, outside |= c != t.final[0] && c != t.final[1];
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const double noise = 0.9 + 0.2 * (double)(x % 1000) / 1000.0, gbs = (c == fastest ? 23.0 : 20.0) * noise;
            done = q35_pftune_record(&t, c, bytes, (double)bytes / gbs);
            calls++;
        }
        CHECK(done && t.chosen == fastest, "the fastest candidate (%d) wins, not %d", fastest, t.chosen);
        CHECK(calls == (t.n_cand + 2) * per && second == 2 * per, "%d calls of 3 MiB in the first stage, %d in the second (took %d, %d)",
              (int)(t.n_cand * per), (int)(2 * per), calls - second, second);
        CHECK(!outside && (t.final[0] == fastest || t.final[1] == fastest), "the second stage runs the two finalists only");
        CHECK(q35_pftune_pick(&t) == fastest && !q35_pftune_record(&t, fastest, 1 << 20, 1e3), "the choice stays");
    }
    q35_pftune_init(&t, (q35_pf_dist){128, 768});
    for (int i = 0; i < 1000; i++) CHECK(!q35_pftune_record(&t, q35_pftune_pick(&t), 1 << 10, 100.0), "small calls never decide");
    CHECK(!q35_pftune_record(&t, -1, 1 << 20, 1.0) && !q35_pftune_record(&t, 99, 1 << 20, 1.0) && !q35_pftune_record(&t, 0, 1 << 20, 0.0),
          "bad records are ignored");
}

/* Enough single-token products of W for a search to end (were it on), then the search's state. */
static void run_and_describe(const q35_tensor *W, const float *X, float *Y, char *desc, size_t cap) {
    for (int i = 0; i < 2000; i++) q35_matmul(W, X, 1, Y);
    q35_pftune_describe(desc, cap);
}

/* The search behind q35_matmul: single-token products of a 1.2 MB Q4_0 matrix end on a candidate
 * and the output stays bitwise the same under every candidate; Q35_PF and Q35_PF_TUNE=0 keep the
 * table. */
static void prefetch_search_live(void) {
    mat m;
    const int64_t rows = 2048, cols = 1024;
    mat_make(&m, Q35_DT_Q4_0, rows, cols);
    float *X = malloc(sizeof(float) * cols), *Y0 = malloc(sizeof(float) * rows), *Y = malloc(sizeof(float) * rows);
    fill_acts(X, 1, cols);
    char desc[256];
    unsetenv("Q35_PF");
    unsetenv("Q35_PF_TUNE");
    q35_pf_setup(1);
    q35_matmul(&m.rows, X, 1, Y0);
    int same = 1, calls = 1;
    for (; calls < 4000 && !strstr((q35_pftune_describe(desc, sizeof desc), desc), "(tuned)"); calls++) {
        q35_matmul(&m.rows, X, 1, Y);
        same &= !memcmp(Y, Y0, sizeof(float) * rows);
    }
    CHECK(same, "every candidate computes the same product");
    CHECK(strstr(desc, "q4_0 ") && strstr(desc, "(tuned)"), "the search ends (%d calls): '%s'", calls, desc);
    setenv("Q35_PF", "q4_0=256,512", 1);
    q35_pf_setup(1);
    run_and_describe(&m.rows, X, Y, desc, sizeof desc);
    CHECK(q35_pf_for(Q35_DT_Q4_0).near == 256 && q35_pf_for(Q35_DT_Q4_0).far == 512 && strstr(desc, "q4_0 256/512 (set by Q35_PF)"),
          "Q35_PF holds: '%s'", desc);
    unsetenv("Q35_PF");
    setenv("Q35_PF_TUNE", "0", 1);
    q35_pf_setup(0);
    run_and_describe(&m.rows, X, Y, desc, sizeof desc);
    CHECK(q35_pf_for(Q35_DT_Q4_0).near == 1024 && q35_pf_for(Q35_DT_Q4_0).far == 4096 && strstr(desc, "q4_0 1024/4096 (static)"),
          "Q35_PF_TUNE=0 keeps the table: '%s'", desc);
    unsetenv("Q35_PF_TUNE");
    q35_pf_setup(0);
    free(X), free(Y0), free(Y);
    mat_free(&m);
}

int main(void) {
    RUN(isa_selection);
    RUN(prefetch_table);
    RUN(prefetch_search);
    RUN(prefetch_search_live);
    RUN(f16_conversion);
    RUN(kat_q8_0);
    RUN(kat_q4_0);
    RUN(kat_q4_k);
    RUN(kat_q6_k);
    RUN(quantizer_known_answers);
    RUN(quant_error_bounds);
    RUN(q4k_activation_error);
    RUN(repack_round_trip);
    RUN(actq_and_rotation);
    RUN(reference_vs_double);
    RUN(matmul_f32);
    RUN(matmul_f16);
    RUN(matmul_bf16);
    RUN(matmul_q8_0);
    RUN(matmul_q4_0);
    RUN(matmul_q4r);
    RUN(matmul_q4_k);
    RUN(matmul_q6_k);
    RUN(matmul_row_range);
    RUN(matmul_long_rows);
    RUN(matmul_batch);
    RUN(matmul_many);
    RUN(bf16_dot_mode);
    RUN(headscan_variants);
#if defined(__x86_64__)
    if (q35_isa_best() == Q35_ISA_AVX512) RUN(emulated_amx_avxvnni);
    else printf("# not run: emulated_amx_avxvnni (the emulated kernels need an AVX-512 CPU)\n");
#endif
    q35_matmul_release();
    TEST_EXIT();
}
