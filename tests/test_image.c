/* Image decoding and preprocessing against the Hugging Face reference (tests/data/images, made by
 * tools/oracle/make_image_fixtures.py with transformers' Qwen2VLImageProcessorPil), plus limits and bad
 * input. The reference pixel_values are matched exactly (measured max |diff| 0 on every fixture); the bound
 * asserted is 1e-6 so that any resampler or normalisation difference (one 8-bit level = 0.0078) fails. */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "core/err.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "image/decode.h"
#include "image/preprocess.h"
#include "q35.h"
#include "test.h"

static const double PIXEL_TOL = 1e-6;

static char g_images[1024];   /* tests/data/images */
static char g_ref_path[1024]; /* the unpacked reference.safetensors */
static q35_st_index g_ref;
static int g_ref_open;
static cJSON *g_cases;

static void path_of(char *out, size_t cap, const char *file) { snprintf(out, cap, "%s/%s", g_images, file); }

/* Unpack reference.safetensors.gz into the work directory (once). */
static int open_reference(void) {
    char gz[1200];
    path_of(gz, sizeof gz, "reference.safetensors.gz");
    mkdir(test_work_dir(), 0755);
    snprintf(g_ref_path, sizeof g_ref_path, "%s/images-reference.safetensors", test_work_dir());
    gzFile in = gzopen(gz, "rb");
    if (!in) {
        fprintf(stderr, "  cannot open %s\n", gz);
        return -1;
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_ref_path);
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        gzclose(in);
        return -1;
    }
    char buf[65536];
    int n, ok = 1;
    while ((n = gzread(in, buf, sizeof buf)) > 0)
        if (fwrite(buf, 1, (size_t)n, out) != (size_t)n) ok = 0;
    if (n < 0) ok = 0;
    gzclose(in);
    if (fclose(out) != 0) ok = 0;
    if (!ok || rename(tmp, g_ref_path) != 0) return -1;
    if (q35_st_open_file(g_ref_path, &g_ref) != Q35_OK) {
        fprintf(stderr, "  %s\n", q35_last_error());
        return -1;
    }
    g_ref_open = 1;
    return 0;
}

static const q35_tensor *ref(const char *name, const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", name, suffix);
    return g_ref_open ? q35_st_find(&g_ref, key) : NULL;
}

/* The name of a file less its extension. */
static void stem_of(const char *file, char *out, size_t cap) {
    snprintf(out, cap, "%s", file);
    char *dot = strrchr(out, '.');
    if (dot) *dot = 0;
}

static q35_image *load(const char *file) {
    char p[1200];
    path_of(p, sizeof p, file);
    q35_image *img = NULL;
    q35_status st = q35_image_load(p, &img);
    if (st) fprintf(stderr, "  %s: %s\n", file, q35_last_error());
    return img;
}

/* Every fixture decodes to exactly the RGB the reference sees (PIL + exif_transpose + convert_to_rgb). */
static void test_decode_matches_reference(void) {
    CHECK(g_ref_open && g_cases, "reference not loaded");
    if (!g_ref_open || !g_cases) return;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, g_cases) {
        const char *file = cJSON_GetObjectItem(c, "file")->valuestring;
        char stem[256];
        stem_of(file, stem, sizeof stem);
        const q35_tensor *t = ref(stem, "rgb");
        if (!t) continue;
        q35_image *img = load(file);
        CHECK(img, "%s: did not decode", file);
        if (!img) continue;
        CHECK(t->dtype == Q35_DT_U8 && t->ndim == 3 && t->shape[0] == img->height && t->shape[1] == img->width &&
                  t->shape[2] == 3,
              "%s: decoded %dx%d, reference %lldx%lld", file, img->width, img->height, (long long)t->shape[1],
              (long long)t->shape[0]);
        if (t->shape[0] == img->height && t->shape[1] == img->width) {
            const uint8_t *r = t->data;
            int maxd = 0;
            size_t nd = 0;
            for (size_t i = 0; i < (size_t)img->width * img->height * 3; i++) {
                int d = abs((int)img->rgb[i] - (int)r[i]);
                if (d) nd++;
                if (d > maxd) maxd = d;
            }
            CHECK(maxd == 0, "%s: %zu values differ, max by %d", file, nd, maxd);
        }
        q35_image_free(img);
        n++;
    }
    CHECK(n >= 24, "only %d decode cases", n);
}

/* 16-bit grayscale keeps the high byte (PIL clips to 255 instead; see make_image_fixtures.py). */
static void test_gray16(void) {
    const q35_tensor *t = ref("gray16_40x30", "high_byte");
    CHECK(t && t->ndim == 2 && t->shape[0] == 30 && t->shape[1] == 40, " ");
    q35_image *img = load("gray16_40x30.png");
    CHECK(img && img->width == 40 && img->height == 30, " ");
    if (!t || !img || img->width != 40 || img->height != 30) {
        q35_image_free(img);
        return;
    }
    const uint8_t *hb = t->data;
    int bad = 0;
    for (int i = 0; i < 40 * 30; i++)
        for (int k = 0; k < 3; k++) bad += img->rgb[i * 3 + k] != hb[i];
    CHECK(bad == 0, "%d values differ", bad);
    q35_image_free(img);
}

static q35_status proc_for(const cJSON *c, q35_image_proc **out) {
    const cJSON *cfg = cJSON_GetObjectItem(c, "config");
    q35_status st = q35_image_proc_load(strcmp(cfg->valuestring, "test") == 0 ? g_images : NULL, out);
    if (st) return st;
    const cJSON *fixed = cJSON_GetObjectItem(c, "fixed");
    const cJSON *maxt = cJSON_GetObjectItem(c, "max_tokens");
    int fw = 0, fh = 0, mt = 0;
    if (fixed) {
        fw = cJSON_GetArrayItem(fixed, 0)->valueint;
        fh = cJSON_GetArrayItem(fixed, 1)->valueint;
    }
    if (maxt) mt = maxt->valueint;
    return q35_image_proc_set_limits(*out, fw, fh, mt);
}

/* Our pixel_values and grid vs the reference processor's, for every case that stores them. */
static void test_pixel_values_match_reference(void) {
    if (!g_ref_open || !g_cases) {
        CHECK(0, "reference not loaded");
        return;
    }
    const cJSON *c;
    int n_pixels = 0, n_grids = 0;
    cJSON_ArrayForEach(c, g_cases) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *file = cJSON_GetObjectItem(c, "file")->valuestring;
        const q35_tensor *grid = ref(name, "grid");
        CHECK(grid && grid->dtype == Q35_DT_I64 && q35_tensor_numel(grid) == 3, "%s: no grid", name);
        if (!grid) continue;
        q35_image_proc *p = NULL;
        q35_status st = proc_for(c, &p);
        CHECK(st == Q35_OK, "%s: %s", name, q35_last_error());
        q35_image *img = load(file);
        q35_pixels px = {0};
        if (!st && img) st = q35_image_preprocess(p, img, &px);
        CHECK(img && st == Q35_OK, "%s: %s", name, q35_last_error());
        if (img && st == Q35_OK) {
            const int64_t *g = grid->data;
            CHECK(px.grid_t == g[0] && px.grid_h == g[1] && px.grid_w == g[2], "%s: grid %d %d %d, reference %lld %lld %lld",
                  name, px.grid_t, px.grid_h, px.grid_w, (long long)g[0], (long long)g[1], (long long)g[2]);
            CHECK(px.patch_dim == 1536 && px.n_tokens == px.grid_t * px.grid_h * px.grid_w / 4, "%s", name);
            n_grids++;
            const size_t rows = (size_t)px.grid_t * px.grid_h * px.grid_w;
            const q35_tensor *pv = ref(name, "pixel_values");
            const q35_tensor *sample_rows = ref(name, "rows"), *pixel_rows = ref(name, "pixel_rows");
            const q35_tensor *sum = ref(name, "pixel_sum");
            double maxd = 0;
            if (pv && pv->dtype == Q35_DT_F32 && pv->shape[0] == (int64_t)rows && pv->shape[1] == px.patch_dim) {
                const float *r = pv->data;
                for (size_t i = 0; i < rows * px.patch_dim; i++) maxd = fmax(maxd, fabs((double)px.data[i] - r[i]));
                n_pixels++;
                printf("# %-22s grid %dx%d max |pixel_values diff| %.3g\n", name, px.grid_h, px.grid_w, maxd);
                CHECK(maxd <= PIXEL_TOL, "%s: max |diff| %g", name, maxd);
            } else if (pv) {
                CHECK(0, "%s: reference pixel_values shape [%lld][%lld], ours [%zu][%d]", name, (long long)pv->shape[0],
                      (long long)pv->shape[1], rows, px.patch_dim);
            } else if (sample_rows && pixel_rows && sum) {
                /* The real-config case: a sample of rows and the sum of all values. */
                const int64_t *ri = sample_rows->data;
                const float *r = pixel_rows->data;
                for (int64_t k = 0; k < sample_rows->shape[0]; k++) {
                    CHECK(ri[k] >= 0 && (size_t)ri[k] < rows, "%s: row %lld", name, (long long)ri[k]);
                    if (ri[k] < 0 || (size_t)ri[k] >= rows) continue;
                    for (int j = 0; j < px.patch_dim; j++)
                        maxd = fmax(maxd, fabs((double)px.data[(size_t)ri[k] * px.patch_dim + j] - r[k * px.patch_dim + j]));
                }
                double s = 0;
                for (size_t i = 0; i < rows * px.patch_dim; i++) s += px.data[i];
                const double rs = *(const double *)sum->data;
                printf("# %-22s grid %dx%d max |pixel_values diff| %.3g on %lld sampled rows, sum %.6f vs %.6f\n", name,
                       px.grid_h, px.grid_w, maxd, (long long)sample_rows->shape[0], s, rs);
                CHECK(maxd <= PIXEL_TOL, "%s: max |diff| %g", name, maxd);
                CHECK(fabs(s - rs) <= 1e-3, "%s: sum %.6f, reference %.6f", name, s, rs);
                n_pixels++;
            }
        }
        q35_pixels_free(&px);
        q35_image_free(img);
        q35_image_proc_free(p);
    }
    CHECK(n_pixels >= 11 && n_grids >= 30, "%d pixel cases, %d grids", n_pixels, n_grids);
}

/* EXIF orientations 2..8 equal orientation 1 transformed (an independent mapping: where pixel (x, y) of the
 * stored image lands). */
static void test_exif_orientation(void) {
    q35_image *base = load("exif1_48x32.jpg");
    CHECK(base && base->width == 48 && base->height == 32, " ");
    if (!base) return;
    const int W = base->width, H = base->height;
    for (int o = 2; o <= 8; o++) {
        char f[64];
        snprintf(f, sizeof f, "exif%d_48x32.jpg", o);
        q35_image *img = load(f);
        CHECK(img, "%s", f);
        if (!img) continue;
        const int swap = o >= 5;
        CHECK(img->width == (swap ? H : W) && img->height == (swap ? W : H), "%s: %dx%d", f, img->width, img->height);
        int bad = 0;
        if (img->width == (swap ? H : W) && img->height == (swap ? W : H)) {
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int dx, dy; /* destination of stored (x, y) */
                    switch (o) {
                    case 2: dx = W - 1 - x; dy = y; break;
                    case 3: dx = W - 1 - x; dy = H - 1 - y; break;
                    case 4: dx = x; dy = H - 1 - y; break;
                    case 5: dx = y; dy = x; break;                 /* transpose */
                    case 6: dx = H - 1 - y; dy = x; break;         /* 90 degrees clockwise */
                    case 7: dx = H - 1 - y; dy = W - 1 - x; break; /* transverse */
                    default: dx = y; dy = W - 1 - x; break;        /* 8: 90 degrees counter-clockwise */
                    }
                    bad += memcmp(img->rgb + ((size_t)dy * img->width + dx) * 3, base->rgb + ((size_t)y * W + x) * 3, 3) != 0;
                }
        }
        CHECK(bad == 0, "%s: %d pixels misplaced", f, bad);
        q35_image_free(img);
    }
    q35_image_free(base);
}

static void test_alpha_composite(void) {
    for (int v = 0; v < 256; v++) {
        CHECK(q35_alpha_over_white((uint8_t)v, 255) == v, "opaque %d", v);
        CHECK(q35_alpha_over_white((uint8_t)v, 0) == 255, "transparent %d", v);
    }
    /* Half transparent black over white is mid gray; the fixture rgba_all_alpha checks all 256 alphas. */
    CHECK(abs(q35_alpha_over_white(0, 128) - 127) <= 1, "%d", q35_alpha_over_white(0, 128));
    q35_image *img = load("rgba_all_alpha.png");
    CHECK(img && img->width == 256 && img->height == 16, " ");
    /* x = 0 is alpha 0: white whatever the colour. */
    if (img)
        for (int y = 0; y < 16; y++) CHECK(img->rgb[(size_t)y * 256 * 3] == 255 && img->rgb[(size_t)y * 256 * 3 + 2] == 255, " ");
    q35_image_free(img);
}

static void test_smart_resize(void) {
    int h, w;
    CHECK(q35_smart_resize(1024, 1024, 32, 65536, 16777216, &h, &w) == Q35_OK && h == 1024 && w == 1024, " ");
    CHECK(q35_smart_resize(480, 640, 32, 65536, 16777216, &h, &w) == Q35_OK && h == 480 && w == 640, " ");
    /* Python round(): 48/32 = 1.5 -> 2, 80/32 = 2.5 -> 2 (half to even). */
    CHECK(q35_smart_resize(48, 80, 32, 1024, 1 << 20, &h, &w) == Q35_OK && h == 64 && w == 64, "%d %d", h, w);
    /* A tiny image grows to at least min_pixels. */
    CHECK(q35_smart_resize(20, 30, 32, 65536, 16777216, &h, &w) == Q35_OK && (int64_t)h * w >= 65536 && h % 32 == 0 &&
              w % 32 == 0, "%d %d", h, w);
    /* A huge one shrinks below max_pixels. */
    CHECK(q35_smart_resize(9000, 12000, 32, 65536, 16777216, &h, &w) == Q35_OK && (int64_t)h * w <= 16777216, "%d %d", h, w);
    CHECK(q35_smart_resize(10, 2010, 32, 65536, 16777216, &h, &w) == Q35_ERR_ARG && strstr(q35_last_error(), "aspect"), " ");
}

static void test_limits(void) {
    q35_image_proc *p = NULL;
    CHECK(q35_image_proc_load(NULL, &p) == Q35_OK && p, " ");
    if (!p) return;
    q35_image *img = load("real_520x360.jpg");
    CHECK(img, " ");
    if (!img) {
        q35_image_proc_free(p);
        return;
    }
    q35_pixels px = {0};
    /* The phone profile: 1024x576 -> 64x36 patches -> 576 tokens. */
    CHECK(q35_image_proc_set_limits(p, 1024, 576, 0) == Q35_OK, " ");
    CHECK(q35_image_preprocess(p, img, &px) == Q35_OK && px.grid_h == 36 && px.grid_w == 64 && px.n_tokens == 576,
          "%d %d %d", px.grid_h, px.grid_w, px.n_tokens);
    q35_pixels_free(&px);
    CHECK(px.data == NULL, " ");
    CHECK(q35_image_proc_set_limits(p, 1000, 576, 0) == Q35_ERR_ARG && strstr(q35_last_error(), "multiples of 32"), " ");
    CHECK(q35_image_proc_set_limits(p, 1024, 0, 0) == Q35_ERR_ARG, " ");
    CHECK(q35_image_proc_set_limits(p, 1024, 576, 100) == Q35_ERR_ARG && strstr(q35_last_error(), "576"), " ");
    CHECK(q35_image_proc_set_limits(p, 0, 0, -1) == Q35_ERR_ARG, " ");
    /* max_tokens bounds the tokens and keeps the aspect ratio as smart_resize does. */
    const int caps[] = {1, 4, 50, 256, 1000, 100000};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        CHECK(q35_image_proc_set_limits(p, 0, 0, caps[i]) == Q35_OK, " ");
        q35_status st = q35_image_preprocess(p, img, &px);
        CHECK(st == Q35_OK && px.n_tokens <= caps[i] && px.n_tokens >= 1, "cap %d: %d tokens", caps[i], px.n_tokens);
        if (caps[i] >= 50 && st == Q35_OK) {
            double ar = (double)px.grid_w / px.grid_h;
            CHECK(fabs(ar - 520.0 / 360.0) < 0.25, "cap %d: grid %dx%d", caps[i], px.grid_w, px.grid_h);
        }
        if (caps[i] == 100000) CHECK(px.n_tokens == 176, "%d", px.n_tokens); /* unbounded: 512x352 */
        q35_pixels_free(&px);
    }
    q35_image_free(img);
    /* A 1x200 strip with one token at most. */
    q35_image strip = {200, 1, calloc(200 * 3, 1)};
    CHECK(q35_image_proc_set_limits(p, 0, 0, 1) == Q35_OK, " ");
    CHECK(q35_image_preprocess(p, &strip, &px) == Q35_OK && px.n_tokens == 1, "%d", px.n_tokens);
    q35_pixels_free(&px);
    free(strip.rgb);
    q35_image_proc_free(p);
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

static uint8_t *read_all(const char *file, size_t *len) {
    char p[1200];
    path_of(p, sizeof p, file);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A PNG signature + IHDR (valid CRC) claiming w x h, then a tiny IDAT and IEND. */
static size_t png_header(uint8_t *b, uint32_t w, uint32_t h) {
    memcpy(b, "\x89PNG\r\n\x1a\n", 8);
    put_be32(b + 8, 13);
    memcpy(b + 12, "IHDR", 4);
    put_be32(b + 16, w);
    put_be32(b + 20, h);
    b[24] = 8; b[25] = 2; b[26] = 0; b[27] = 0; b[28] = 0;
    put_be32(b + 29, (uint32_t)crc32(0, b + 12, 17));
    static const uint8_t tail[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    memcpy(b + 33, tail, sizeof tail);
    return 33 + sizeof tail;
}

static void expect_fail(const void *data, size_t len, q35_status want, const char *needle, const char *what) {
    q35_image *img = (q35_image *)1;
    q35_status st = q35_image_decode(data, len, "test.img", &img);
    CHECK(st == want && img == NULL, "%s: status %s (want %s), %s", what, q35_status_name(st), q35_status_name(want),
          st ? q35_last_error() : "decoded");
    if (st && needle) CHECK(strstr(q35_last_error(), needle), "%s: message '%s' lacks '%s'", what, q35_last_error(), needle);
    if (st == Q35_OK) q35_image_free(img);
}

static void test_bad_input(void) {
    /* Unsupported formats and junk. */
    expect_fail("GIF89a\x01\x00\x01\x00\x00\x00\x00", 13, Q35_ERR_UNSUPPORTED, "test.img: not a JPEG or PNG image", "GIF");
    expect_fail("BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00", 14, Q35_ERR_UNSUPPORTED, "not a JPEG or PNG", "BMP");
    uint8_t junk[512];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 24);
    junk[0] = 0x42;
    expect_fail(junk, sizeof junk, Q35_ERR_UNSUPPORTED, "not a JPEG or PNG", "random bytes");
    expect_fail("", 0, Q35_ERR_FORMAT, "empty", "empty buffer");
    expect_fail("\xFF\xD8\xFF", 3, Q35_ERR_FORMAT, "bad JPEG", "JPEG magic only");
    expect_fail("\x89PNG\r\n\x1a\n", 8, Q35_ERR_FORMAT, "bad PNG", "PNG signature only");

    /* Decompression bombs: refused from the header, fast, before any pixel buffer exists. */
    uint8_t b[64];
    size_t n = png_header(b, 100000, 100000);
    clock_t t0 = clock();
    expect_fail(b, n, Q35_ERR_FORMAT, "too large", "PNG 100000x100000");
    n = png_header(b, 16384, 16384); /* each side allowed, 256 Mpx is not */
    expect_fail(b, n, Q35_ERR_FORMAT, "too large", "PNG 16384x16384");
    n = png_header(b, 0, 10);
    expect_fail(b, n, Q35_ERR_FORMAT, "bad PNG", "PNG zero width");
    size_t jl;
    uint8_t *jpg = read_all("baseline_120x80.jpg", &jl);
    CHECK(jpg && jl > 200, " ");
    if (jpg) {
        /* Patch the SOF0 frame header's height and width. */
        size_t sof = 0;
        for (size_t i = 2; i + 9 < jl; i++)
            if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
                sof = i;
                break;
            }
        CHECK(sof, " ");
        if (sof) {
            uint8_t *big = malloc(jl);
            memcpy(big, jpg, jl);
            big[sof + 5] = 0xFD, big[sof + 6] = 0xE8; /* height 65000 */
            big[sof + 7] = 0xFD, big[sof + 8] = 0xE8; /* width 65000 */
            expect_fail(big, jl, Q35_ERR_FORMAT, "too large", "JPEG 65000x65000");
            big[sof + 5] = 0, big[sof + 6] = 0; /* height 0 */
            expect_fail(big, jl, Q35_ERR_FORMAT, "bad JPEG", "JPEG height 0");
            free(big);
        }
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        CHECK(secs < 0.5, "bomb headers took %.2f s", secs);
        /* Truncated: half the file, and all but the EOI marker's last bytes of data. */
        expect_fail(jpg, jl / 2, Q35_ERR_FORMAT, "bad JPEG", "JPEG truncated at half");
        expect_fail(jpg, 400, Q35_ERR_FORMAT, "bad JPEG", "JPEG truncated in the header");
        /* Corrupt: the SOF marker turned into garbage. */
        uint8_t *bad = malloc(jl);
        memcpy(bad, jpg, jl);
        if (sof) bad[sof + 1] = 0x01;
        expect_fail(bad, jl, Q35_ERR_FORMAT, "bad JPEG", "JPEG corrupt marker");
        free(bad);
        free(jpg);
    }
    size_t pl;
    uint8_t *png = read_all("rgb_97x61.png", &pl);
    CHECK(png && pl > 200, " ");
    if (png) {
        expect_fail(png, pl / 2, Q35_ERR_FORMAT, "truncated", "PNG truncated at half");
        expect_fail(png, pl - 12, Q35_ERR_FORMAT, "bad PNG", "PNG without IEND");
        uint8_t *bad = malloc(pl);
        memcpy(bad, png, pl);
        bad[29] ^= 0x55; /* the IHDR CRC */
        expect_fail(bad, pl, Q35_ERR_FORMAT, "bad PNG", "PNG IHDR CRC");
        memcpy(bad, png, pl);
        for (size_t i = pl / 2; i < pl / 2 + 64; i++) bad[i] ^= 0xA5; /* IDAT data */
        expect_fail(bad, pl, Q35_ERR_FORMAT, "bad PNG", "PNG corrupt IDAT");
        free(bad);
        free(png);
    }

    /* Files: missing, empty, a directory. */
    q35_image *img = NULL;
    char p[1200];
    snprintf(p, sizeof p, "%s/no-such-image.png", test_work_dir());
    CHECK(q35_image_load(p, &img) == Q35_ERR_MISSING && !img && strstr(q35_last_error(), "no-such-image.png"), " ");
    snprintf(p, sizeof p, "%s/empty-image.jpg", test_work_dir());
    write_file(p, "", 0);
    CHECK(q35_image_load(p, &img) == Q35_ERR_FORMAT && !img && strstr(q35_last_error(), "empty-image.jpg: empty"),
          "%s", q35_last_error());
    CHECK(q35_image_load(test_work_dir(), &img) != Q35_OK && !img, " ");
    CHECK(q35_image_decode(NULL, 10, "x", &img) == Q35_ERR_ARG, " ");
}

static void test_proc_config(void) {
    char dir[1100], p[1200];
    snprintf(dir, sizeof dir, "%s/image-proc", test_work_dir());
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/preprocessor_config.json", dir);
    q35_image_proc *proc = NULL;
    struct {
        const char *json;
        q35_status want;
        const char *needle;
    } cases[] = {
        {"{\"resample\": 2}", Q35_ERR_UNSUPPORTED, "resample"},
        {"{\"patch_size\": 0}", Q35_ERR_FORMAT, "patch_size"},
        {"{\"image_std\": [0.5, 0, 0.5]}", Q35_ERR_FORMAT, "image_std"},
        {"{\"image_mean\": [0.5, 0.5]}", Q35_ERR_FORMAT, "image_mean"},
        {"{\"size\": {\"shortest_edge\": 10}}", Q35_ERR_FORMAT, "longest_edge"},
        {"[1, 2]", Q35_ERR_FORMAT, "object"},
        {"{\"size\": ", Q35_ERR_FORMAT, "preprocessor_config.json"},
        {"{\"min_pixels\": 100, \"max_pixels\": 200, \"patch_size\": 14, \"image_mean\": 0.25}", Q35_OK, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(p, cases[i].json, strlen(cases[i].json));
        q35_status st = q35_image_proc_load(dir, &proc);
        CHECK(st == cases[i].want, "%s: %s", cases[i].json, st ? q35_last_error() : "ok");
        if (st && cases[i].needle)
            CHECK(strstr(q35_last_error(), cases[i].needle), "%s: '%s'", cases[i].json, q35_last_error());
        if (!st) {
            CHECK(proc->min_pixels == 100 && proc->max_pixels == 200 && proc->patch_size == 14 && proc->image_mean[2] == 0.25, " ");
            /* Keys the file lacks take Qwen2VLImageProcessor's defaults. */
            CHECK(fabs(proc->image_std[0] - 0.26862954) < 1e-12 && proc->merge_size == 2 && proc->temporal_patch_size == 2, " ");
        }
        q35_image_proc_free(proc);
        proc = NULL;
    }
    /* No file: the spec's values. */
    remove(p);
    CHECK(q35_image_proc_load(dir, &proc) == Q35_OK && proc->patch_size == 16 && proc->min_pixels == 65536 &&
          proc->max_pixels == 16777216 && proc->image_mean[0] == 0.5 && proc->image_std[1] == 0.5, " ");
    q35_image_proc_free(proc);
    /* The committed test config. */
    CHECK(q35_image_proc_load(g_images, &proc) == Q35_OK && proc->min_pixels == 1024 && proc->max_pixels == 4096, " ");
    q35_image_proc_free(proc);
}

int main(void) {
    snprintf(g_images, sizeof g_images, "%s/images", test_data_dir());
    char cases[1200];
    path_of(cases, sizeof cases, "cases.json");
    if (q35_json_load_file(cases, 1 << 20, &g_cases) != Q35_OK || !cJSON_IsArray(g_cases)) {
        fprintf(stderr, "  %s\n", q35_last_error());
        cJSON_Delete(g_cases);
        g_cases = NULL;
    }
    open_reference();
    RUN(test_decode_matches_reference);
    RUN(test_gray16);
    RUN(test_pixel_values_match_reference);
    RUN(test_exif_orientation);
    RUN(test_alpha_composite);
    RUN(test_smart_resize);
    RUN(test_limits);
    RUN(test_bad_input);
    RUN(test_proc_config);
    if (g_ref_open) q35_st_close(&g_ref);
    remove(g_ref_path);
    cJSON_Delete(g_cases);
    TEST_EXIT();
}
