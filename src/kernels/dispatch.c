/* CPU feature detection and the choice of kernel table: cpuid + xgetbv on x86 (the OS must save
 * the YMM / ZMM state), getauxval(AT_HWCAP) on aarch64. Q35_ISA=scalar|avx2|avx512|neon picks a
 * lower level (tests, benchmarks). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/mm.h"
#include "kernels/pftune.h"
#include "kernels/prefetch.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

static struct {
    pthread_once_t once;
    q35_isa best;
    int avx512bf16, avxvnni;  /* optional features found */
    int neondot;              /* aarch64: the dot-product extension (sdot) */
    int amx;                  /* AMX-TILE + AMX-INT8, with the tile state granted by the OS */
    int use_avxvnni;          /* AVX2 level: use AVX-VNNI when present (tests turn it off) */
    int use_amx;              /* AVX-512 level: use AMX for prompts when present (tests turn it off) */
    int use_neondot;          /* NEON level: use sdot when present (tests turn it off) */
    volatile int active;      /* q35_isa in use */
    char desc[64];
} g = {PTHREAD_ONCE_INIT, Q35_ISA_SCALAR, 0, 0, 0, 0, 1, 1, 1, Q35_ISA_SCALAR, ""};

#if defined(__x86_64__)
static q35_kern kern_amx; /* q35_kern_avx512 with the AMX products (built in detect) */
static const q35_kern *kern_avx2vnni = &q35_kern_avx2vnni; /* (q35_kern_emulate swaps it) */
static struct { int saved, amx, avxvnni; q35_kern kern_amx; } detected; /* what q35_kern_emulate restores */

/* kern_amx: the AVX-512 table with AMX products for the block-32 formats and Q6_K. */
static void amx_table(q35_mm_fn q8, q35_mm_fn q4, q35_mm_fn q6k) {
    kern_amx = q35_kern_avx512;
    kern_amx.act_tile = 16; /* AMX token tiles of 16 (and the AVX-512 tiles of 8 below Q35_AMX_MIN_N) */
    kern_amx.mm[Q35_DT_Q8_0][1] = q8;
    kern_amx.mm[Q35_DT_Q4_0][1] = q4;
    kern_amx.mm[Q35_DT_Q4R][1] = q4;
    /* not Q4_K: on tiles its products ran 8-10% faster alone, prompts no faster (docs/speed.md "AMX for the K formats") */
    kern_amx.mm[Q35_DT_Q6_K][1] = q6k;
}
#endif

static const char *const names[Q35_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon"};

#if defined(__x86_64__)
static unsigned long long xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    const unsigned long long xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return; /* XMM and YMM state */
    unsigned b7 = 0, c7 = 0, a71 = 0;
    d = 0;
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d)) {
        unsigned a1, b1, c1, d1;
        if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) a71 = a1;
    }
    const int avx2 = (b7 >> 5) & 1;
    if (!(avx2 && fma && f16c)) return;
    g.best = Q35_ISA_AVX2;
    g.avxvnni = (a71 >> 4) & 1;
    /* Q35_AVXVNNI=0: the AVX2 level without AVX-VNNI even where the CPU has it, to run as the
     * AVX2 CPUs without it do (Zen 2/3, Intel before Alder Lake; docs/speed.md "AVX2 only") */
    const char *ev = getenv("Q35_AVXVNNI");
    if (ev && !strcmp(ev, "0")) g.use_avxvnni = 0;
    const int f = (b7 >> 16) & 1, dq = (b7 >> 17) & 1, bw = (b7 >> 30) & 1, vl = (b7 >> 31) & 1, vnni = (c7 >> 11) & 1;
    if (f && dq && bw && vl && vnni && (xcr0 & 0xe0) == 0xe0) { /* opmask, ZMM_Hi256, Hi16_ZMM */
        g.best = Q35_ISA_AVX512;
        g.avx512bf16 = (a71 >> 5) & 1;
        /* AMX-TILE (EDX bit 24) and AMX-INT8 (bit 25) of leaf 7, XTILECFG + XTILEDATA in XCR0,
         * and the OS granting this process the tile data state. Q35_AMX=0 turns it off. */
        const char *e = getenv("Q35_AMX");
        if (((d >> 24) & 3) == 3 && (xcr0 & 0x60000) == 0x60000 && !(e && !strcmp(e, "0")) && q35_amx_init() == 0) {
            g.amx = 1;
            amx_table(q35_mm_amx_q8, q35_mm_amx_q4, q35_mm_amx_q6k);
        }
    }
}
#elif defined(__aarch64__)
static void detect(void) {
    const unsigned long hw = getauxval(AT_HWCAP);
    if (!(hw & HWCAP_ASIMD)) return;
    g.best = Q35_ISA_NEON; /* armv8-a: mm_neon.c */
    g.neondot = (hw & HWCAP_ASIMDDP) != 0; /* armv8.2-a dot product: mm_dot_neon.c */
}
#else
static void detect(void) {}
#endif

/* ---- prefetch distances (prefetch.h) ---- */
#define PF_DEFAULT {1024, 4096}
q35_pf_dist q35_pf_table[Q35_DT_COUNT] = {
    [0 ... Q35_DT_COUNT - 1] = PF_DEFAULT,
};
int q35_pf_streams = 1;
#if defined(__x86_64__)
int q35_avx512_q4_unpack = 1;
#endif

/* "near,far" into *d; returns the characters read, or 0. */
static int parse_pf(const char *s, q35_pf_dist *d) {
    char *end;
    const long n = strtol(s, &end, 10);
    if (end == s || *end != ',') return 0;
    const char *f = end + 1;
    const long fa = strtol(f, &end, 10);
    if (end == f || n < 0 || fa < 0 || n > (1 << 20) || fa > (1 << 20)) return 0;
    d->near = (int32_t)n, d->far = (int32_t)fa;
    return (int)(end - s);
}

void q35_pf_setup(int amd) {
    for (int i = 0; i < Q35_DT_COUNT; i++) q35_pf_table[i] = (q35_pf_dist)PF_DEFAULT;
    /* Every CPU but AMD's (measured on Intel, docs/speed.md "Back on the Intel VM"; ARM untuned):
     * the Q6_K kernel, the most work per byte, streams 4% faster alone and 0.3-3.7% end to end
     * with both distances shorter. */
    q35_pf_table[Q35_DT_Q6_K] = (q35_pf_dist){512, 3072};
    if (amd) {
        /* Zen 4 (docs/speed.md, "Prefetch distances"): the block formats and bf16 stream best with
         * the T1 prefetch further ahead (Q8_0 and bf16 measured end to end; the Q8_0 kernel alone
         * preferred 4 KiB); f16 and f32, not measured there, keep Intel's distances. */
        q35_pf_table[Q35_DT_Q6_K] = (q35_pf_dist){2048, 8192};
        q35_pf_table[Q35_DT_Q8_0] = q35_pf_table[Q35_DT_BF16] = (q35_pf_dist){2048, 16384};
        q35_pf_table[Q35_DT_Q4_0] = q35_pf_table[Q35_DT_Q4R] = q35_pf_table[Q35_DT_Q4_K] = (q35_pf_dist){1024, 16384};
    }
    /* Two weight streams per thread (prefetch.h): measured faster on Intel, within noise on Zen 4 */
    q35_pf_streams = amd ? 1 : 2;
    const char *st = getenv("Q35_STREAMS");
    if (st && (!strcmp(st, "1") || !strcmp(st, "2"))) q35_pf_streams = st[0] - '0';
#if defined(__x86_64__)
    /* AVX-512's Q4 prompt tiles (mm.h): packed on AMD, unpacked elsewhere */
    q35_avx512_q4_unpack = !amd;
    const char *u = getenv("Q35_UNPACK");
    if (u && (!strcmp(u, "0") || !strcmp(u, "1"))) q35_avx512_q4_unpack = u[0] - '0';
#endif
    int fixed[Q35_DT_COUNT] = {0};
    const char *e = getenv("Q35_PF");
    for (const char *s = e; s && *s;) { /* "near,far" or "dtype=near,far", separated by ';' */
        q35_pf_dist d;
        const char *eq = strchr(s, '='), *semi = strchr(s, ';');
        if (eq && (!semi || eq < semi)) {
            char name[16] = "";
            const size_t n = (size_t)(eq - s);
            if (n < sizeof name) memcpy(name, s, n), name[n] = 0;
            const int k = parse_pf(eq + 1, &d);
            for (int i = 0; k && i < Q35_DT_COUNT; i++)
                if (!strcmp(name, q35_dtype_name((q35_dtype)i))) q35_pf_table[i] = d, fixed[i] = 1;
        } else if (parse_pf(s, &d)) {
            for (int i = 0; i < Q35_DT_COUNT; i++) q35_pf_table[i] = d, fixed[i] = 1;
        }
        s = semi ? semi + 1 : NULL;
    }
    /* The run-time search (pftune.h) starts from this table; what Q35_PF set stays. */
    q35_pftune_reset();
    const char *tune = getenv("Q35_PF_TUNE");
    q35_pftune_enable(!(tune && !strcmp(tune, "0")));
    for (int i = 0; i < Q35_DT_COUNT; i++)
        if (fixed[i]) q35_pftune_fix(i);
}

static int parse_isa(const char *s) {
    for (int i = 0; i < Q35_ISA_COUNT; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

static int allowed(q35_isa isa) {
    if (isa == Q35_ISA_SCALAR) return 1;
    if (isa == g.best) return 1;
    return isa == Q35_ISA_AVX2 && g.best == Q35_ISA_AVX512;
}

static void init(void) {
    detect();
    int amd = 0;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
#endif
    q35_pf_setup(amd);
    g.active = g.best;
    const char *e = getenv("Q35_ISA");
    if (e && *e) {
        const int i = parse_isa(e);
        if (i >= 0 && allowed((q35_isa)i)) g.active = i;
    }
}

q35_isa q35_isa_best(void) {
    pthread_once(&g.once, init);
    return g.best;
}

q35_isa q35_isa_get(void) {
    pthread_once(&g.once, init);
    return (q35_isa)g.active;
}

int q35_isa_set(q35_isa isa) {
    pthread_once(&g.once, init);
    if ((unsigned)isa >= Q35_ISA_COUNT || !allowed(isa)) return -1;
    g.active = isa;
    return 0;
}

const char *q35_isa_name(q35_isa isa) { return (unsigned)isa < Q35_ISA_COUNT ? names[isa] : "?"; }

const char *q35_isa_describe(void) {
    const q35_isa isa = q35_isa_get();
    const int bf16 = isa == Q35_ISA_AVX512 && g.avx512bf16, vnni = isa == Q35_ISA_AVX512 || (isa == Q35_ISA_AVX2 && g.avxvnni && g.use_avxvnni);
    const int amx = isa == Q35_ISA_AVX512 && g.amx && g.use_amx;
    snprintf(g.desc, sizeof g.desc, "%s%s%s%s%s%s", names[isa], vnni || bf16 ? " (" : "", vnni ? (isa == Q35_ISA_AVX2 ? "avx-vnni" : "vnni") : "",
             bf16 ? (vnni ? " bf16" : "bf16") : "", amx ? " amx" : "", vnni || bf16 ? ")" : "");
    if (isa == Q35_ISA_NEON) snprintf(g.desc, sizeof g.desc, "%s", g.neondot && g.use_neondot ? "neon (dotprod)" : "neon");
    return g.desc;
}

int q35_cpu_has_avx512bf16(void) {
    pthread_once(&g.once, init);
    return g.avx512bf16;
}

int q35_kern_use_avxvnni(int on) {
    pthread_once(&g.once, init);
    const int old = g.use_avxvnni;
    g.use_avxvnni = on != 0;
    return old;
}

int q35_kern_use_amx(int on) {
    pthread_once(&g.once, init);
    const int old = g.use_amx;
    g.use_amx = on != 0;
    return old;
}

int q35_cpu_has_amx(void) {
    pthread_once(&g.once, init);
    return g.amx;
}

int q35_kern_use_neondot(int on) {
    pthread_once(&g.once, init);
    const int old = g.use_neondot;
    g.use_neondot = on != 0;
    return old;
}

int q35_cpu_has_neondot(void) {
    pthread_once(&g.once, init);
    return g.neondot;
}

int q35_cpu_has_avxvnni(void) {
    pthread_once(&g.once, init);
    return g.avxvnni;
}

#if defined(__x86_64__)
int q35_kern_emulate(const q35_kern *avx2vnni, const q35_mm_fn amx[3]) {
    pthread_once(&g.once, init);
    if (g.best != Q35_ISA_AVX512) return -1;
    if (!avx2vnni && !amx) { /* restore */
        if (detected.saved) g.amx = detected.amx, g.avxvnni = detected.avxvnni, kern_amx = detected.kern_amx;
        kern_avx2vnni = &q35_kern_avx2vnni;
        detected.saved = 0;
        return 0;
    }
    if (!avx2vnni || !amx) return -1;
    if (!detected.saved) detected.amx = g.amx, detected.avxvnni = g.avxvnni, detected.kern_amx = kern_amx, detected.saved = 1;
    kern_avx2vnni = avx2vnni;
    g.avxvnni = 1;
    amx_table(amx[0], amx[1], amx[2]);
    g.amx = 1;
    return 0;
}
#endif

const q35_kern *q35_kern_active(void) {
    switch (q35_isa_get()) {
#if defined(__x86_64__)
    case Q35_ISA_AVX512: return g.amx && g.use_amx ? &kern_amx : &q35_kern_avx512;
    case Q35_ISA_AVX2: return g.avxvnni && g.use_avxvnni ? kern_avx2vnni : &q35_kern_avx2;
#elif defined(__aarch64__)
    case Q35_ISA_NEON: return g.neondot && g.use_neondot ? &q35_kern_neondot : &q35_kern_neon;
#endif
    default: return &q35_kern_scalar;
    }
}
