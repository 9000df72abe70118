/* Gated DeltaNet and attention kernels (kernels/gdn_chunk.h, kernels/attention.h), for every ISA
 * this CPU runs: the small products, exp and the element-wise ops against plain formulas; the
 * token recurrence against the reference step of ref.c; the chunkwise form against the recurrence
 * (outputs and final state within 1e-5 relative) for chunk sizes 1, 16, 64, 100, lengths that are
 * and are not multiples of the chunk, strong and weak decays; the layer with Hv > Hk batched vs
 * token by token; batched attention against per-token attention. */
#include <stdint.h>

#include "core/pool.h"
#include "kernels/attention.h"
#include "kernels/gdn_chunk.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "layers/layers.h"
#include "q35.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}
static void fill(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = s * frand();
}

static const q35_gdn_kernels *isas[4];
static int n_isas;

static void find_isas(void) {
    const char *names[] = {"scalar", "avx2", "avx512", "neon"};
    for (int i = 0; i < 4; i++)
        if (q35_gdn_kernels_isa(names[i])) isas[n_isas++] = q35_gdn_kernels_isa(names[i]);
}

/* max |a - b| / max(max |b|, floor) */
static double rel_err(const float *a, const float *b, size_t n, double floor_) {
    double d = 0, m = floor_;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        d = e > d || e != e ? e : d;
        m = fabs(b[i]) > m ? fabs(b[i]) : m;
    }
    return d / m;
}

static void test_gemm(void) {
    const int Ms[] = {1, 3, 4, 5, 17, 64}, Ns[] = {1, 7, 16, 31, 64, 65, 130}, Ks[] = {1, 5, 128};
    float *A = malloc(sizeof(float) * 200 * 200), *B = malloc(sizeof(float) * 200 * 200);
    float *C = malloc(sizeof(float) * 200 * 200), *C0 = malloc(sizeof(float) * 200 * 200);
    for (int s = 0; s < n_isas; s++) {
        const q35_gdn_kernels *kn = isas[s];
        double worst = 0;
        for (int mi = 0; mi < 6; mi++)
            for (int ni = 0; ni < 7; ni++)
                for (int ki = 0; ki < 3; ki++)
                    for (int tri = 0; tri < 3; tri++)
                        for (int acc = 0; acc < 2; acc++) {
                            const int M = Ms[mi], N = Ns[ni], K = tri == Q35_TRI_A ? M : Ks[ki];
                            const int lda = K + 3, ldb = N + 5, ldc = N + 2;
                            fill(A, (size_t)M * lda, 1);
                            fill(B, (size_t)K * ldb, 1);
                            fill(C, (size_t)M * ldc, 1);
                            if (tri == Q35_TRI_A)
                                for (int i = 0; i < M; i++)
                                    for (int k = i + 1; k < K; k++) A[(size_t)i * lda + k] = 0;
                            memcpy(C0, C, sizeof(float) * (size_t)M * ldc);
                            kn->gemm(M, N, K, A, lda, B, ldb, C, ldc, acc ? 0.75f : 0.0f, tri);
                            for (int i = 0; i < M; i++)
                                for (int j = 0; j < (tri == Q35_TRI_C ? (i + 1 < N ? i + 1 : N) : N); j++) {
                                    double r = acc ? 0.75 * C0[(size_t)i * ldc + j] : 0, mag = fabs(r);
                                    for (int k = 0; k < K; k++) {
                                        r += (double)A[(size_t)i * lda + k] * B[(size_t)k * ldb + j];
                                        mag += fabs((double)A[(size_t)i * lda + k] * B[(size_t)k * ldb + j]);
                                    }
                                    double e = fabs(C[(size_t)i * ldc + j] - r) / (mag + 1e-30);
                                    worst = e > worst ? e : worst;
                                }
                            /* padding between rows is never written */
                            int pad_ok = 1;
                            for (int i = 0; i < M; i++)
                                for (int j = N; j < ldc; j++) pad_ok &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
                            CHECK(pad_ok, "%s gemm %dx%dx%d tri %d wrote past N", kn->name, M, N, K, tri);
                        }
        /* the dot-product form: C = A B^T */
        for (int mi = 0; mi < 6; mi++)
            for (int ni = 0; ni < 7; ni++)
                for (int ki = 0; ki < 3; ki++) {
                    const int M = Ms[mi], N = Ns[ni], K = Ks[ki] + ki, lda = K + 3, ldb = K + 1, ldc = N + 2;
                    fill(A, (size_t)M * lda, 1), fill(B, (size_t)N * ldb, 1);
                    kn->gemm_nt(M, N, K, A, lda, B, ldb, C, ldc);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double r = 0, mag = 0;
                            for (int k = 0; k < K; k++) {
                                r += (double)A[(size_t)i * lda + k] * B[(size_t)j * ldb + k];
                                mag += fabs((double)A[(size_t)i * lda + k] * B[(size_t)j * ldb + k]);
                            }
                            double e = fabs(C[(size_t)i * ldc + j] - r) / (mag + 1e-30);
                            worst = e > worst ? e : worst;
                        }
                }
        CHECK(worst < 1e-6, "%s gemm: worst relative error %g", kn->name, worst);
        printf("# %s gemm: worst error %.2g (relative to sum |a b|)\n", kn->name, worst);
    }
    free(A), free(B), free(C), free(C0);
}

static void test_transpose(void) {
    const int dims[] = {1, 7, 8, 15, 16, 17, 33, 64, 130};
    float *src = malloc(sizeof(float) * 140 * 150), *dst = malloc(sizeof(float) * 150 * 140);
    fill(src, 140 * 150, 1);
    for (int s = 0; s < n_isas; s++)
        for (int a = 0; a < 9; a++)
            for (int b = 0; b < 9; b++) {
                const int rows = dims[a], cols = dims[b], lds = cols + 3, ldd = rows + 1;
                for (int i = 0; i < 150 * 140; i++) dst[i] = -7;
                isas[s]->transpose(src, lds, dst, ldd, rows, cols);
                int bad = 0;
                for (int c = 0; c < cols; c++) {
                    for (int r = 0; r < rows; r++) bad += dst[(size_t)c * ldd + r] != src[(size_t)r * lds + c];
                    bad += dst[(size_t)c * ldd + rows] != -7;
                }
                CHECK(bad == 0, "%s transpose %dx%d: %d wrong", isas[s]->name, rows, cols, bad);
            }
    free(src), free(dst);
}

static void test_elementwise(void) {
    enum { N = 4000 };
    static float x[N], y[N], z[N], w[N], ref[N];
    for (int s = 0; s < n_isas; s++) {
        const q35_gdn_kernels *kn = isas[s];
        double worst = 0;
        for (int i = 0; i < N; i++) x[i] = -100.0f + 180.0f * (float)i / N;
        memcpy(y, x, sizeof x);
        kn->vexp(y, N);
        for (int i = 0; i < N; i++) {
            if (x[i] < -87.0f) {
                CHECK(y[i] >= 0 && y[i] < 1e-37f, "%s exp(%g) = %g", kn->name, x[i], y[i]);
                continue;
            }
            double e = fabs(y[i] - exp((double)x[i])) / exp((double)x[i]);
            worst = e > worst ? e : worst;
        }
        CHECK(worst < 3e-7, "%s exp: worst relative error %g", kn->name, worst);
        printf("# %s exp: worst relative error %.2g on [-87, 80]\n", kn->name, worst);
        for (int n = 1; n <= 67; n += 3) {
            fill(x, n, 3), fill(y, n, 3), fill(z, n, 3), fill(w, n, 1);
            double d = 0;
            for (int i = 0; i < n; i++) d += (double)x[i] * y[i];
            CHECK(fabs(kn->dot(x, y, n) - d) < 1e-5 * n, "%s dot n=%d", kn->name, n);
            memcpy(ref, y, sizeof(float) * n);
            kn->axpy(y, 0.7f, x, n);
            for (int i = 0; i < n; i++) CHECK(fabsf(y[i] - (ref[i] + 0.7f * x[i])) < 1e-6f, "%s axpy", kn->name);
            memcpy(ref, y, sizeof(float) * n);
            kn->scale(y, -1.5f, n);
            for (int i = 0; i < n; i++) CHECK(fabsf(y[i] + 1.5f * ref[i]) < 1e-6f, "%s scale", kn->name);
            memcpy(ref, x, sizeof(float) * n);
            kn->swiglu(x, z, (size_t)n);
            for (int i = 0; i < n; i++) CHECK(fabsf(x[i] - q35_silu(ref[i]) * z[i]) < 1e-5f, "%s swiglu", kn->name);
            memcpy(ref, z, sizeof(float) * n);
            kn->silu(z, (size_t)n);
            for (int i = 0; i < n; i++) CHECK(fabsf(z[i] - q35_silu(ref[i])) < 1e-6f, "%s silu", kn->name);
            memcpy(x, z, sizeof(float) * n);
            kn->sigmoid_mul(x, y, n);
            for (int i = 0; i < n; i++) CHECK(fabsf(x[i] - z[i] * q35_sigmoid(y[i])) < 1e-6f, "%s sigmoid_mul", kn->name);
            kn->rmsnorm(y, w, n, 1e-6f, x);
            q35_rmsnorm(y, w, n, 1e-6f, ref);
            CHECK(rel_err(x, ref, n, 1e-3) < 1e-5, "%s rmsnorm n=%d: %g", kn->name, n, rel_err(x, ref, n, 1e-3));
            /* two tiles of an online softmax equal the softmax of the row */
            for (int vis = 1; vis <= n; vis += 7) {
                fill(x, n, 5);
                memcpy(ref, x, sizeof(float) * n);
                float m = -INFINITY, sum = 0;
                const int a = vis / 2;
                kn->softmax_row(x, a, a, 0.5f, &m, &sum);
                const float corr = kn->softmax_row(x + a, vis - a, n - a, 0.5f, &m, &sum);
                for (int i = 0; i < a; i++) x[i] *= corr;
                for (int i = 0; i < vis; i++) ref[i] *= 0.5f;
                q35_softmax(ref, vis);
                for (int i = 0; i < vis; i++) x[i] /= sum;
                CHECK(rel_err(x, ref, vis, 1e-3) < 1e-6, "%s softmax_row n=%d vis=%d: %g", kn->name, n, vis, rel_err(x, ref, vis, 1e-3));
                int zero = 1;
                for (int i = vis; i < n; i++) zero &= x[i] == 0;
                CHECK(zero, "%s softmax_row: masked entries not zero", kn->name);
            }
            fill(x, n, 3);
            memcpy(ref, x, sizeof(float) * n);
            kn->gated_rmsnorm(x, y, w, n, 1e-6f);
            q35_gated_rmsnorm(ref, y, w, n, 1e-6f);
            CHECK(rel_err(x, ref, n, 1e-3) < 1e-5, "%s gated_rmsnorm n=%d: %g", kn->name, n, rel_err(x, ref, n, 1e-3));
        }
    }
}

/* argmax of every ISA equals the plain loop: random rows of many lengths, ties (the first wins),
 * NaNs (skipped; at 0: index 0), -inf, signed zeros, the maximum at either end. */
static int64_t argmax_loop(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
static void test_argmax(void) {
    enum { N = 5000 };
    static float x[N];
    uint64_t st = 12345;
    for (int k = 0; k < n_isas; k++) {
        const q35_gdn_kernels *kn = isas[k];
        for (int trial = 0; trial < 400; trial++) {
            const int n = trial < 40 ? trial + 1 : 1 + (int)((st = st * 6364136223846793005ull + 1442695040888963407ull) >> 33) % N;
            const int kind = trial % 8;
            for (int i = 0; i < n; i++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                const int r = (int)(st >> 40);
                x[i] = kind == 1 ? (float)(r % 7) : kind == 2 ? 0.0f * ((r & 1) ? 1 : -1) : (float)(r % 100000) / 1000.0f - 50.0f;
                if (kind == 3 && r % 50 == 0) x[i] = NAN;
                if (kind == 4) x[i] = -INFINITY;
            }
            if (kind == 5) x[0] = NAN;
            if (kind == 6) x[n - 1] = 1e30f;
            if (kind == 7) x[0] = 1e30f, x[n - 1] = 1e30f;
            const int64_t want = argmax_loop(x, n), got = kn->argmax(x, n);
            CHECK(got == want, "%s argmax n=%d kind %d: %lld, the loop %lld", kn->name, n, kind, (long long)got, (long long)want);
        }
    }
    CHECK(q35_argmax(x, 1) == 0, "n = 1");
}

/* The conv of the original per-token code: taps [C][K], state [K-1][C]. */
static void conv_ref(float *x, int C, float *state, const float *taps, int K, int n) {
    for (int t = 0; t < n; t++) {
        float *row = x + (size_t)t * C;
        for (int ch = 0; ch < C; ch++) {
            const float *tap = taps + (size_t)ch * K;
            const float raw = row[ch];
            double y = (double)tap[K - 1] * raw;
            for (int j = 0; j < K - 1; j++) y += (double)tap[j] * state[(size_t)j * C + ch];
            for (int j = 0; j + 1 < K - 1; j++) state[(size_t)j * C + ch] = state[(size_t)(j + 1) * C + ch];
            if (K > 1) state[(size_t)(K - 2) * C + ch] = raw;
            row[ch] = (float)(y / (1.0 + exp(-y)));
        }
    }
}

static void test_conv(void) {
    const int Ks[] = {4, 2, 1, 17}, ns[] = {1, 2, 3, 5, 64};
    const int C = 77 + 256; /* more than one block of channels */
    for (int s = 0; s < n_isas; s++)
        for (int ki = 0; ki < 4; ki++)
            for (int ni = 0; ni < 5; ni++) {
                const int K = Ks[ki], n = ns[ni];
                float *x = malloc(sizeof(float) * n * C), *xr = malloc(sizeof(float) * n * C), *taps = malloc(sizeof(float) * C * K);
                float *st = malloc(sizeof(float) * (K + 1) * C), *str = malloc(sizeof(float) * (K + 1) * C);
                fill(x, (size_t)n * C, 2), fill(taps, (size_t)C * K, 1), fill(st, (size_t)(K + 1) * C, 2);
                memcpy(xr, x, sizeof(float) * n * C);
                memcpy(str, st, sizeof(float) * (K + 1) * C);
                conv_ref(xr, C, str, taps, K, n);
                /* two uneven channel ranges, as two tasks would do; taps transposed to [K][C] */
                float *taps_t = malloc(sizeof(float) * C * K);
                for (int ch = 0; ch < C; ch++)
                    for (int j = 0; j < K; j++) taps_t[(size_t)j * C + ch] = taps[(size_t)ch * K + j];
                isas[s]->conv_silu(x, C, st, taps_t, K, 0, 29, n);
                isas[s]->conv_silu(x, C, st, taps_t, K, 29, C, n);
                free(taps_t);
                CHECK(rel_err(x, xr, (size_t)n * C, 1) < 1e-6, "%s conv K=%d n=%d: out %g", isas[s]->name, K, n, rel_err(x, xr, (size_t)n * C, 1));
                CHECK(K == 1 || rel_err(st, str, (size_t)(K - 1) * C, 1) == 0, "%s conv K=%d n=%d: state", isas[s]->name, K, n);
                free(x), free(xr), free(taps), free(st), free(str);
            }
}

typedef struct gdn_case {
    int n, dk, dv;
    float *qkv;   /* [n][2dk+dv] q | k | v per token */
    float *g, *beta;
    float *S0;    /* [dk][dv] initial state */
} gdn_case;

static void make_case(gdn_case *c, int n, int dk, int dv, float gmin, float gmax) {
    c->n = n, c->dk = dk, c->dv = dv;
    const int ld = 2 * dk + dv;
    c->qkv = malloc(sizeof(float) * n * ld);
    c->g = malloc(sizeof(float) * n), c->beta = malloc(sizeof(float) * n);
    c->S0 = malloc(sizeof(float) * dk * dv);
    fill(c->qkv, (size_t)n * ld, 1);
    for (int t = 0; t < n; t++) {
        float *q = c->qkv + (size_t)t * ld, *k = q + dk;
        q35_l2norm(q, dk, 1e-6f), q35_l2norm(k, dk, 1e-6f);
        for (int i = 0; i < dk; i++) q[i] /= sqrtf((float)dk);
        /* log-uniform |g| in [|gmax|, |gmin|] */
        const float u = 0.5f * (frand() + 1);
        c->g[t] = -expf(logf(-gmax) + u * (logf(-gmin) - logf(-gmax)));
        c->beta[t] = 0.5f * (frand() + 1);
    }
    fill(c->S0, (size_t)dk * dv, 0.5f);
}

static void free_case(gdn_case *c) { free(c->qkv), free(c->g), free(c->beta), free(c->S0); }

static q35_gdn_head head_of(const gdn_case *c, float *S, float *o) {
    const int ld = 2 * c->dk + c->dv;
    return (q35_gdn_head){c->qkv, c->qkv + c->dk, c->qkv + 2 * c->dk, ld, c->g, c->beta, o, c->dv, S, c->n, c->dk, c->dv, NULL};
}

/* The reference: q35_gdn_step (ref.c) token by token. */
static void run_ref(const gdn_case *c, float *S, float *o) {
    const int ld = 2 * c->dk + c->dv;
    memcpy(S, c->S0, sizeof(float) * c->dk * c->dv);
    for (int t = 0; t < c->n; t++) {
        const float *q = c->qkv + (size_t)t * ld;
        q35_gdn_step(S, q, q + c->dk, q + 2 * c->dk, c->g[t], c->beta[t], c->dk, c->dv, o + (size_t)t * c->dv);
    }
}

static void test_recur(void) {
    const int shapes[][2] = {{128, 128}, {16, 24}, {7, 33}, {32, 70}};
    for (int s = 0; s < n_isas; s++)
        for (int si = 0; si < 4; si++) {
            gdn_case c;
            make_case(&c, 37, shapes[si][0], shapes[si][1], -5, -1e-3f);
            const size_t ns = (size_t)c.dk * c.dv, no = (size_t)c.n * c.dv;
            float *S = malloc(sizeof(float) * ns), *Sr = malloc(sizeof(float) * ns), *o = malloc(sizeof(float) * no),
                  *orf = malloc(sizeof(float) * no);
            run_ref(&c, Sr, orf);
            memcpy(S, c.S0, sizeof(float) * ns);
            q35_gdn_head h = head_of(&c, S, o);
            isas[s]->recur(&h);
            const double eo = rel_err(o, orf, no, 1e-3), es = rel_err(S, Sr, ns, 1e-3);
            CHECK(eo < 1e-5 && es < 1e-5, "%s recur dk=%d dv=%d: out %g state %g", isas[s]->name, c.dk, c.dv, eo, es);
            /* with the next head named (prefetched only): bitwise the same, the next head untouched */
            float *S2 = malloc(sizeof(float) * ns), *o2 = malloc(sizeof(float) * no), *nx = malloc(sizeof(float) * ns);
            memcpy(S2, c.S0, sizeof(float) * ns);
            for (size_t i = 0; i < ns; i++) nx[i] = (float)i;
            h = head_of(&c, S2, o2);
            h.S_next = nx;
            isas[s]->recur(&h);
            int same = !memcmp(S2, S, sizeof(float) * ns) && !memcmp(o2, o, sizeof(float) * no), kept = 1;
            for (size_t i = 0; i < ns; i++) kept &= nx[i] == (float)i;
            CHECK(same && kept, "%s recur dk=%d dv=%d with S_next: same %d, next untouched %d", isas[s]->name, c.dk, c.dv, same, kept);
            free(S2), free(o2), free(nx);
            free(S), free(Sr), free(o), free(orf);
            free_case(&c);
        }
}

static void test_chunk_vs_recurrence(void) {
    const int Ls[] = {1, 16, 64, 100};
    const int ns[] = {1, 16, 63, 64, 100, 150, 200};
    const float decays[][2] = {{-20, -1}, {-1e-3f, -1e-4f}, {-20, -1e-4f}}; /* strong, weak, mixed */
    const int shapes[][2] = {{128, 128}, {32, 48}};
    double worst[3] = {0};
    for (int s = 0; s < n_isas; s++) {
        const q35_gdn_kernels *kn = isas[s];
        for (int di = 0; di < 3; di++)
            for (int si = 0; si < 2; si++)
                for (int ni = 0; ni < 7; ni++) {
                    gdn_case c;
                    make_case(&c, ns[ni], shapes[si][0], shapes[si][1], decays[di][0], decays[di][1]);
                    const size_t nS = (size_t)c.dk * c.dv, no = (size_t)c.n * c.dv;
                    float *Sr = malloc(sizeof(float) * nS), *orf = malloc(sizeof(float) * no);
                    float *S = malloc(sizeof(float) * nS), *o = malloc(sizeof(float) * no);
                    run_ref(&c, Sr, orf);
                    for (int li = 0; li < 4; li++) {
                        const int L = Ls[li];
                        float *work = malloc(sizeof(float) * q35_gdn_chunk_work(L, c.dk, c.dv));
                        memcpy(S, c.S0, sizeof(float) * nS);
                        q35_gdn_head h = head_of(&c, S, o);
                        kn->chunk(&h, L, work);
                        const double eo = rel_err(o, orf, no, 1e-3), es = rel_err(S, Sr, nS, 1e-3);
                        worst[di] = eo > worst[di] ? eo : worst[di];
                        worst[di] = es > worst[di] ? es : worst[di];
                        CHECK(eo < 1e-5 && es < 1e-5, "%s chunk L=%d n=%d dk=%d dv=%d decays [%g, %g]: out %g state %g", kn->name, L, c.n, c.dk,
                              c.dv, decays[di][0], decays[di][1], eo, es);
                        free(work);
                    }
                    free(Sr), free(orf), free(S), free(o);
                    free_case(&c);
                }
    }
    printf("# chunked vs token recurrence, worst relative error (outputs, final state): strong decays %.2g, weak %.2g, mixed %.2g\n",
           worst[0], worst[1], worst[2]);
}

/* The layer with Hv = 2 Hk on the pool: a batch of tokens (chunked) equals the same tokens one by one. */
static q35_tensor f32_tensor(int64_t rows, int64_t cols, float s) {
    float *d = malloc(sizeof(float) * rows * cols);
    fill(d, (size_t)(rows * cols), s);
    return (q35_tensor){.name = "t", .dtype = Q35_DT_F32, .ndim = 2, .shape = {rows, cols}, .data = d, .nbytes = sizeof(float) * rows * cols};
}

static void alloc_scratch(q35_scratch *sc, const q35_config *c, int B, int gdn_chunk) {
    const int C = q35_cfg_conv_channels(c), vd = c->lin_v_heads * c->lin_v_dim;
    memset(sc, 0, sizeof *sc);
    sc->cap = B;
    sc->xn = calloc((size_t)B * c->hidden, sizeof(float));
    sc->proj = calloc((size_t)B * C, sizeof(float));
    sc->proj2 = calloc((size_t)B * vd, sizeof(float));
    sc->ba = calloc((size_t)B * 2 * c->lin_v_heads, sizeof(float));
    sc->core = calloc((size_t)B * vd, sizeof(float));
    sc->out = calloc((size_t)B * c->hidden, sizeof(float));
    sc->gdn_gb = calloc((size_t)c->lin_v_heads * 2 * B, sizeof(float));
    sc->gdn_chunk = gdn_chunk;
    sc->n_slots = q35_get_threads();
    sc->work_floats = q35_gdn_work_floats(c, gdn_chunk) + 1;
    sc->work = calloc((size_t)sc->n_slots * sc->work_floats, sizeof(float));
}

static void free_scratch(q35_scratch *sc) {
    free(sc->xn), free(sc->proj), free(sc->proj2), free(sc->ba), free(sc->core), free(sc->out), free(sc->gdn_gb), free(sc->work);
}

static void test_layer_hv_gt_hk(void) {
    q35_config c;
    memset(&c, 0, sizeof c);
    c.hidden = 48, c.lin_k_heads = 2, c.lin_v_heads = 4, c.lin_k_dim = 32, c.lin_v_dim = 40, c.conv_kernel = 4, c.rms_eps = 1e-6f;
    const int C = q35_cfg_conv_channels(&c), Hv = c.lin_v_heads, vd = Hv * c.lin_v_dim, n = 90;
    q35_gdn_weights w;
    memset(&w, 0, sizeof w);
    w.in_qkv = f32_tensor(C, c.hidden, 0.3f);
    w.in_z = f32_tensor(vd, c.hidden, 0.3f);
    w.in_b = f32_tensor(Hv, c.hidden, 0.3f);
    w.in_a = f32_tensor(Hv, c.hidden, 0.3f);
    w.out = f32_tensor(c.hidden, vd, 0.2f);
    float conv_taps[2000], taps_t[2000], dt_bias[4], nea[4], norm[40];
    fill(conv_taps, (size_t)C * c.conv_kernel, 0.5f), fill(dt_bias, 4, 1), fill(norm, 40, 1);
    for (int h = 0; h < Hv; h++) nea[h] = -expf(frand());
    w.conv = conv_taps, w.dt_bias = dt_bias, w.neg_exp_A = nea, w.norm = norm;
    q35_gdn_conv_taps(&c, &w, taps_t);
    float *x = malloc(sizeof(float) * n * c.hidden);
    fill(x, (size_t)n * c.hidden, 1);
    const size_t nconv = (size_t)(c.conv_kernel - 1) * C, nrec = (size_t)Hv * c.lin_k_dim * c.lin_v_dim;
    const int threads[] = {1, 2, 3};
    for (int ti = 0; ti < 3; ti++) {
        q35_set_threads(threads[ti]);
        for (int L = 16; L <= 64; L += 48) {
            q35_scratch a, b;
            alloc_scratch(&a, &c, n, L);
            alloc_scratch(&b, &c, 1, L);
            float *conv_a = calloc(nconv, sizeof(float)), *conv_b = calloc(nconv, sizeof(float));
            float *rec_a = calloc(nrec, sizeof(float)), *rec_b = calloc(nrec, sizeof(float));
            float *out_b = malloc(sizeof(float) * n * c.hidden);
            memcpy(a.xn, x, sizeof(float) * n * c.hidden);
            q35_gdn_forward(&c, &w, taps_t, conv_a, rec_a, &a, n);
            for (int t = 0; t < n; t++) {
                memcpy(b.xn, x + (size_t)t * c.hidden, sizeof(float) * c.hidden);
                q35_gdn_forward(&c, &w, taps_t, conv_b, rec_b, &b, 1);
                memcpy(out_b + (size_t)t * c.hidden, b.out, sizeof(float) * c.hidden);
            }
            const double eo = rel_err(a.out, out_b, (size_t)n * c.hidden, 1e-3), es = rel_err(rec_a, rec_b, nrec, 1e-3);
            const double ec = rel_err(conv_a, conv_b, nconv, 1e-3);
            CHECK(eo < 1e-5 && es < 1e-5 && ec == 0, "%d threads, L=%d: out %g, state %g, conv state %g", threads[ti], L, eo, es, ec);
            free(conv_a), free(conv_b), free(rec_a), free(rec_b), free(out_b);
            free_scratch(&a), free_scratch(&b);
        }
    }
    q35_set_threads(0);
    free((void *)w.in_qkv.data), free((void *)w.in_z.data), free((void *)w.in_b.data), free((void *)w.in_a.data), free((void *)w.out.data);
    free(x);
}

/* x[n] as IEEE halves h (q35_f32_to_f16) and those halves back as floats r. */
static void to_halves(const float *x, uint16_t *h, float *r, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = q35_f32_to_f16(x[i]), r[i] = q35_f16_to_f32(h[i]);
}

/* to_f16 / from_f16 of every ISA against the scalar conversions: every half back to float, and
 * floats at the edges (zeros, half subnormals, ties, the overflow bound 65520, inf, NaN) and at
 * random, in lengths with vector tails. */
static void test_f16_convert(void) {
    enum { N = 65536 };
    uint16_t *h = malloc(sizeof(uint16_t) * N), *h2 = malloc(sizeof(uint16_t) * N);
    float *f = malloc(sizeof(float) * N), *f2 = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    for (int s = 0; s < n_isas; s++) {
        for (int n = 1; n <= 19; n++) { /* tails */
            isas[s]->from_f16(h + 1000, f2, n);
            int ok = 1;
            for (int i = 0; i < n; i++) ok &= f2[i] == q35_f16_to_f32(h[1000 + i]);
            CHECK(ok, "%s from_f16 of %d halves", isas[s]->name, n);
        }
        isas[s]->from_f16(h, f2, N);
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++) {
            const float r = q35_f16_to_f32(h[i]); /* NaNs: the hardware sets the quiet bit of signalling ones */
            if (memcmp(&r, f2 + i, 4) && !(isnan(r) && isnan(f2[i]))) bad = i;
        }
        CHECK(bad < 0, "%s from_f16 of %04x", isas[s]->name, bad < 0 ? 0 : bad);
    }
    const float edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65519.996f, 65520.0f, -65520.0f, 1e9f, INFINITY, -INFINITY, NAN,
                           -NAN, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 8.940697e-8f, 6.1035156e-5f, 6.0975552e-5f, 1e-10f,
                           1.00048828125f, 1.00146484375f, 3.14159265f, -2.71828f};
    const int ne = (int)(sizeof edges / sizeof edges[0]);
    for (int i = 0; i < N; i++) f[i] = i < ne ? edges[i] : ldexpf(frand(), (i % 40) - 26);
    for (int s = 0; s < n_isas; s++) {
        isas[s]->to_f16(f, h2, N);
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (h2[i] != q35_f32_to_f16(f[i])) bad = i;
        CHECK(bad < 0, "%s to_f16(%.9g) = %04x, expected %04x", isas[s]->name, bad < 0 ? 0.0 : f[bad], bad < 0 ? 0 : h2[bad],
              bad < 0 ? 0 : q35_f32_to_f16(f[bad]));
        for (int n = 1; n <= 19; n++) {
            for (int i = 0; i < 20; i++) h2[i] = 0xabcd;
            isas[s]->to_f16(f + 7, h2, n);
            int ok = h2[n] == 0xabcd;
            for (int i = 0; i < n; i++) ok &= h2[i] == q35_f32_to_f16(f[7 + i]);
            CHECK(ok, "%s to_f16 of %d floats (or it wrote past them)", isas[s]->name, n);
        }
    }
    free(h), free(h2), free(f), free(f2);
}

/* Tiled attention of a block of queries (G heads sharing the keys) equals the reference
 * q35_attend query by query; over an fp16 cache it gives the bits of the fp32 path over the
 * rounded values. */
static void test_attention(void) {
    const int hds[] = {256, 24}, nqs[] = {1, 5, 64}, pos0s[] = {0, 3, 200}, Gs[] = {1, 3, 8};
    for (int s = 0; s < n_isas; s++)
        for (int hi = 0; hi < 2; hi++)
            for (int qi = 0; qi < 3; qi++)
                for (int pi = 0; pi < 3; pi++)
                    for (int gi = 0; gi < 3; gi++) {
                        const int hd = hds[hi], nq = nqs[qi], pos0 = pos0s[pi], G = Gs[gi], nk = pos0 + nq, ldkv = 2 * hd + 8;
                        const int qh = hd + 4, ldq = G * qh + 3, oh = hd, ldo = G * hd;
                        float *K = malloc(sizeof(float) * nk * ldkv), *V = malloc(sizeof(float) * nk * ldkv), *q = malloc(sizeof(float) * nq * ldq);
                        float *o = malloc(sizeof(float) * nq * ldo), *o2 = malloc(sizeof(float) * nq * ldo);
                        float *work = malloc(sizeof(float) * (q35_attn_block_work(G, nq, hd) + (size_t)nk));
                        fill(K, (size_t)nk * ldkv, 2), fill(V, (size_t)nk * ldkv, 1), fill(q, (size_t)nq * ldq, 2);
                        const float sc = 1.0f / sqrtf((float)hd);
                        q35_attend_block(isas[s], q, ldq, qh, G, nq, pos0, K, V, 0, ldkv, hd, sc, o, ldo, oh, work);
                        for (int r = 0; r < nq; r++)
                            for (int g = 0; g < G; g++)
                                q35_attend(q + (size_t)g * qh + (size_t)r * ldq, K, V, pos0 + r + 1, hd, ldkv, sc, work, o2 + (size_t)r * ldo + g * oh);
                        const double e = rel_err(o, o2, (size_t)nq * ldo, 1e-3);
                        CHECK(e < 1e-5, "%s attention hd=%d nq=%d pos0=%d G=%d: block vs ref %g", isas[s]->name, hd, nq, pos0, G, e);
                        /* fp16 cache: the fp32 path over the rounded rows, bit for bit */
                        uint16_t *K16 = malloc(sizeof(uint16_t) * nk * ldkv), *V16 = malloc(sizeof(uint16_t) * nk * ldkv);
                        to_halves(K, K16, K, (size_t)nk * ldkv), to_halves(V, V16, V, (size_t)nk * ldkv);
                        q35_attend_block(isas[s], q, ldq, qh, G, nq, pos0, K, V, 0, ldkv, hd, sc, o, ldo, oh, work);
                        q35_attend_block(isas[s], q, ldq, qh, G, nq, pos0, K16, V16, 1, ldkv, hd, sc, o2, ldo, oh, work);
                        CHECK(memcmp(o, o2, sizeof(float) * nq * ldo) == 0, "%s attention hd=%d nq=%d pos0=%d G=%d: fp16 cache != fp32 of its values",
                              isas[s]->name, hd, nq, pos0, G);
                        free(K), free(V), free(q), free(o), free(o2), free(work), free(K16), free(V16);
                    }
}

/* The row kernels of generation against double sums: dot_rows (S = q K^T) and axpy_rows
 * (O += S V) for 1-3 KV heads per row, every head count 1..8 per KV head, dimensions with and
 * without a vector tail, odd row counts; the gaps between S rows stay untouched. */
static void test_attention_rows(void) {
    const int ds[] = {256, 24, 5}, ns[] = {1, 2, 7, 64};
    for (int s = 0; s < n_isas; s++) {
        double worst = 0;
        for (int nkv = 1; nkv <= 3; nkv++)
            for (int di = 0; di < 3; di++)
                for (int ni = 0; ni < 4; ni++)
                    for (int G = 1; G <= 8; G++) {
                        const int d = ds[di], n = ns[ni], ld = nkv * d + 3, qh = d + 1, qkv = G * qh + 2, lds = n + 2, skv = G * lds + 1;
                        const int okv = G * d + 4;
                        float *q = malloc(sizeof(float) * nkv * qkv), *K = malloc(sizeof(float) * n * ld), *S = malloc(sizeof(float) * nkv * skv);
                        float *O = malloc(sizeof(float) * nkv * okv), *O0 = malloc(sizeof(float) * nkv * okv);
                        fill(q, (size_t)nkv * qkv, 1), fill(K, (size_t)n * ld, 1), fill(O, (size_t)nkv * okv, 1);
                        for (int i = 0; i < nkv * skv; i++) S[i] = -7.0f; /* the gaps between S rows must stay */
                        isas[s]->dot_rows(nkv, G, n, d, q, qh, qkv, K, ld, S, lds, skv);
                        int gaps = 1;
                        for (int kh = 0; kh < nkv; kh++)
                            for (int g = 0; g < G; g++) {
                                const float *qg = q + kh * qkv + g * qh, *Sg = S + kh * skv + g * lds;
                                for (int j = 0; j < n; j++) {
                                    double r = 0, mag = 0;
                                    for (int c = 0; c < d; c++) {
                                        r += (double)qg[c] * K[(size_t)j * ld + kh * d + c];
                                        mag += fabs((double)qg[c] * K[(size_t)j * ld + kh * d + c]);
                                    }
                                    const double e = fabs(Sg[j] - r) / (mag + 1e-30);
                                    worst = e > worst ? e : worst;
                                }
                                gaps &= Sg[n] == -7.0f && Sg[n + 1] == -7.0f;
                            }
                        CHECK(gaps, "%s dot_rows nkv=%d G=%d n=%d d=%d wrote between rows", isas[s]->name, nkv, G, n, d);
                        memcpy(O0, O, sizeof(float) * nkv * okv);
                        isas[s]->axpy_rows(nkv, G, n, d, S, lds, skv, K, ld, O, okv);
                        int pad = 1;
                        for (int kh = 0; kh < nkv; kh++) {
                            for (int g = 0; g < G; g++)
                                for (int c = 0; c < d; c++) {
                                    double r = O0[kh * okv + g * d + c], mag = fabs(r);
                                    for (int j = 0; j < n; j++) {
                                        const double t = (double)S[kh * skv + g * lds + j] * K[(size_t)j * ld + kh * d + c];
                                        r += t, mag += fabs(t);
                                    }
                                    const double e = fabs(O[kh * okv + g * d + c] - r) / (mag + 1e-30);
                                    worst = e > worst ? e : worst;
                                }
                            for (int c = G * d; c < okv; c++) pad &= O[kh * okv + c] == O0[kh * okv + c];
                        }
                        CHECK(pad, "%s axpy_rows nkv=%d G=%d wrote between heads", isas[s]->name, nkv, G);
                        /* fp16 rows: the bits of the fp32 kernels over the rounded values */
                        uint16_t *K16 = malloc(sizeof(uint16_t) * n * ld);
                        float *S2 = malloc(sizeof(float) * nkv * skv), *O2 = malloc(sizeof(float) * nkv * okv);
                        to_halves(K, K16, K, (size_t)n * ld);
                        memcpy(S2, S, sizeof(float) * nkv * skv);
                        isas[s]->dot_rows(nkv, G, n, d, q, qh, qkv, K, ld, S, lds, skv);
                        isas[s]->dot_rows_h(nkv, G, n, d, q, qh, qkv, K16, ld, S2, lds, skv);
                        CHECK(memcmp(S, S2, sizeof(float) * nkv * skv) == 0, "%s dot_rows_h nkv=%d G=%d n=%d d=%d != dot_rows of its values",
                              isas[s]->name, nkv, G, n, d);
                        memcpy(O, O0, sizeof(float) * nkv * okv), memcpy(O2, O0, sizeof(float) * nkv * okv);
                        isas[s]->axpy_rows(nkv, G, n, d, S, lds, skv, K, ld, O, okv);
                        isas[s]->axpy_rows_h(nkv, G, n, d, S, lds, skv, K16, ld, O2, okv);
                        CHECK(memcmp(O, O2, sizeof(float) * nkv * okv) == 0, "%s axpy_rows_h nkv=%d G=%d n=%d d=%d != axpy_rows of its values",
                              isas[s]->name, nkv, G, n, d);
                        free(q), free(K), free(S), free(O), free(O0), free(K16), free(S2), free(O2);
                    }
        CHECK(worst < 1e-6, "%s dot_rows / axpy_rows: worst relative error %g", isas[s]->name, worst);
        printf("# %s dot_rows / axpy_rows: worst error %.2g (relative to sum |a b|)\n", isas[s]->name, worst);
    }
}

/* Generation's attention: the segments' partials, merged, equal the reference for every head of a
 * query, across the segment counts (1 .. Q35_ATTN_SEG_MAX), GQA groups of 1, 3, 8 and 12 (> 8,
 * two kernel calls) and a head dimension with a vector tail; computing the segments in reverse
 * order gives the same bits (threads may take them in any order). */
static void test_attention_decode(void) {
    const int nkvs[] = {1, 63, 64, 65, 300, 513, 1100, 2500}, groups[] = {1, 3, 8, 12}, hds[] = {256, 40};
    for (int s = 0; s < n_isas; s++)
        for (int hi = 0; hi < 2; hi++)
            for (int gi = 0; gi < 4; gi++)
                for (int ki = 0; ki < 8; ki++) {
                    const int hd = hds[hi], group = groups[gi], n_kv = nkvs[ki], nkvh = 2, nh = nkvh * group, ldkv = nkvh * hd + 8, qh = 2 * hd;
                    float *K = malloc(sizeof(float) * n_kv * ldkv), *V = malloc(sizeof(float) * n_kv * ldkv), *q = malloc(sizeof(float) * nh * qh);
                    const size_t pf = q35_attn_part_floats(nh, hd);
                    float *parts = malloc(sizeof(float) * Q35_ATTN_SEG_MAX * pf), *parts2 = malloc(sizeof(float) * Q35_ATTN_SEG_MAX * pf);
                    float *work = malloc(sizeof(float) * (q35_attn_part_work(nkvh, group) + (size_t)n_kv));
                    float *o = malloc(sizeof(float) * nh * hd), *o2 = malloc(sizeof(float) * nh * hd);
                    fill(K, (size_t)n_kv * ldkv, 3), fill(V, (size_t)n_kv * ldkv, 1), fill(q, (size_t)nh * qh, 3);
                    const float sc = 1.0f / sqrtf((float)hd);
                    const int nseg = q35_attn_segments(n_kv);
                    CHECK(nseg >= 1 && nseg <= Q35_ATTN_SEG_MAX && q35_attn_seg_start(n_kv, nseg, 0) == 0 && q35_attn_seg_start(n_kv, nseg, nseg) == n_kv,
                          "segments of %d keys: %d", n_kv, nseg);
                    for (int g = 0; g < nseg; g++)
                        CHECK(q35_attn_seg_start(n_kv, nseg, g) < q35_attn_seg_start(n_kv, nseg, g + 1), "segment %d of %d keys is empty", g, n_kv);
                    for (int g = 0; g < nseg; g++)
                        q35_attend_part(isas[s], q, qh, nkvh, group, K, V, 0, ldkv, hd, q35_attn_seg_start(n_kv, nseg, g),
                                        q35_attn_seg_start(n_kv, nseg, g + 1), sc, parts + (size_t)g * pf, work);
                    for (int g = nseg - 1; g >= 0; g--)
                        q35_attend_part(isas[s], q, qh, nkvh, group, K, V, 0, ldkv, hd, q35_attn_seg_start(n_kv, nseg, g),
                                        q35_attn_seg_start(n_kv, nseg, g + 1), sc, parts2 + (size_t)g * pf, work);
                    CHECK(memcmp(parts, parts2, sizeof(float) * nseg * pf) == 0, "%s: partials depend on their order", isas[s]->name);
                    q35_attend_merge(isas[s], parts, nseg, nh, hd, o, hd);
                    for (int h = 0; h < nh; h++)
                        q35_attend(q + (size_t)h * qh, K + (size_t)(h / group) * hd, V + (size_t)(h / group) * hd, n_kv, hd, ldkv, sc, work, o2 + (size_t)h * hd);
                    const double e = rel_err(o, o2, (size_t)nh * hd, 1e-3);
                    CHECK(e < 1e-5, "%s decode attention hd=%d group=%d n_kv=%d (%d segments): vs ref %g", isas[s]->name, hd, group, n_kv, nseg, e);
                    /* fp16 cache: the partials of the fp32 path over the rounded rows, bit for bit */
                    uint16_t *K16 = malloc(sizeof(uint16_t) * n_kv * ldkv), *V16 = malloc(sizeof(uint16_t) * n_kv * ldkv);
                    to_halves(K, K16, K, (size_t)n_kv * ldkv), to_halves(V, V16, V, (size_t)n_kv * ldkv);
                    for (int g = 0; g < nseg; g++) {
                        const int k0 = q35_attn_seg_start(n_kv, nseg, g), k1 = q35_attn_seg_start(n_kv, nseg, g + 1);
                        q35_attend_part(isas[s], q, qh, nkvh, group, K, V, 0, ldkv, hd, k0, k1, sc, parts + (size_t)g * pf, work);
                        q35_attend_part(isas[s], q, qh, nkvh, group, K16, V16, 1, ldkv, hd, k0, k1, sc, parts2 + (size_t)g * pf, work);
                    }
                    CHECK(memcmp(parts, parts2, sizeof(float) * nseg * pf) == 0, "%s decode hd=%d group=%d n_kv=%d: fp16 partials != fp32 of its values",
                          isas[s]->name, hd, group, n_kv);
                    free(K), free(V), free(q), free(parts), free(parts2), free(work), free(o), free(o2), free(K16), free(V16);
                }
}

int main(void) {
    find_isas();
    printf("# ISAs: %d (best: %s)\n", n_isas, q35_gdn_kernels_best()->name);
    RUN(test_gemm);
    RUN(test_transpose);
    RUN(test_elementwise);
    RUN(test_argmax);
    RUN(test_conv);
    RUN(test_recur);
    RUN(test_chunk_vs_recurrence);
    RUN(test_layer_hv_gt_hk);
    RUN(test_f16_convert);
    RUN(test_attention);
    RUN(test_attention_rows);
    RUN(test_attention_decode);
    TEST_EXIT();
}
