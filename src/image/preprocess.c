/* Image preprocessing (see preprocess.h).
 *
 * The reference. transformers 5.23 maps Qwen3.5 (model_type qwen3_5) to Qwen2VLImageProcessor with two
 * backends: "torchvision" (used when torchvision is installed; the checkpoints' config names the legacy
 * Qwen2VLImageProcessorFast, which resolves to it) and "pil" (Qwen2VLImageProcessorPil, used otherwise,
 * e.g. in tools/oracle's venv, which has no torchvision). We follow the PIL backend bit for bit: Pillow's
 * Image.resize(BICUBIC) on the uint8 RGB image (Resample.c: separable, two passes in Pillow 13's order, cubic
 * kernel a = -0.5 whose support widens by the scale when downscaling, coefficients normalised then
 * rounded to 22-bit fixed point, each pass rounded and clipped to uint8), then float32(v * rescale) and
 * (x - mean) / std in float32, as numpy does. The torchvision backend resizes the uint8 tensor with
 * antialiased bicubic, whose CPU kernel implements the same Pillow algorithm (a = -0.5, widened support,
 * fixed-point uint8 passes) with its own precision choices, so the two agree to about one 8-bit level at
 * some pixels (1/127.5 = 0.0078 in pixel_values). tests/test_image.c measures this file against the PIL
 * backend: equal pixel_values on every fixture. */
#include "image/preprocess.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/file.h"
#include "formats/json.h"
#include "image/decode.h"

/* No fused multiply-adds: the weights must round like Pillow's (gcc's -std=c11 already turns contraction off). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ------------------------------------------------------------------ config */

static void spec_defaults(q35_image_proc *p) {
    /* Qwen3.5's preprocessor_config.json (spec §5.1). */
    memset(p, 0, sizeof *p);
    p->patch_size = 16;
    p->temporal_patch_size = 2;
    p->merge_size = 2;
    p->min_pixels = 65536;
    p->max_pixels = 16777216;
    p->rescale_factor = 1.0 / 255.0;
    for (int c = 0; c < 3; c++) p->image_mean[c] = p->image_std[c] = 0.5;
    p->do_resize = p->do_rescale = p->do_normalize = 1;
}

static void class_defaults(q35_image_proc *p) {
    /* Qwen2VLImageProcessor's own defaults: what a key missing from a present file means. */
    static const double clip_mean[3] = {0.48145466, 0.4578275, 0.40821073};
    static const double clip_std[3] = {0.26862954, 0.26130258, 0.27577711};
    spec_defaults(p);
    p->patch_size = 14;
    p->min_pixels = 56 * 56;
    p->max_pixels = 28 * 28 * 1280;
    memcpy(p->image_mean, clip_mean, sizeof clip_mean);
    memcpy(p->image_std, clip_std, sizeof clip_std);
}

/* A number or an array of 3 numbers (std must be > 0). */
static q35_status read_triple(const cJSON *root, const char *field, const char *what, int positive, double out[3]) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, field);
    if (!v || cJSON_IsNull(v)) return Q35_OK;
    double t[3];
    if (cJSON_IsNumber(v)) {
        t[0] = t[1] = t[2] = v->valuedouble;
    } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 3) {
        for (int i = 0; i < 3; i++) {
            const cJSON *e = cJSON_GetArrayItem(v, i);
            if (!cJSON_IsNumber(e)) return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must hold 3 numbers", what, field);
            t[i] = e->valuedouble;
        }
    } else {
        return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must be a number or an array of 3 numbers", what, field);
    }
    for (int i = 0; i < 3; i++)
        if (!isfinite(t[i]) || (positive && !(t[i] > 0)))
            return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must hold finite%s numbers", what, field, positive ? " positive" : "");
    memcpy(out, t, sizeof t);
    return Q35_OK;
}

static q35_status parse_config(const cJSON *root, const char *what, q35_image_proc *p) {
    if (!cJSON_IsObject(root)) return q35_fail(Q35_ERR_FORMAT, "%s: expected a JSON object", what);
    class_defaults(p);
    q35_status st;
    long v;
    v = p->patch_size;
    if ((st = q35_json_int_opt(root, "patch_size", what, 1, 256, &v))) return st;
    p->patch_size = (int)v;
    v = p->temporal_patch_size;
    if ((st = q35_json_int_opt(root, "temporal_patch_size", what, 1, 16, &v))) return st;
    p->temporal_patch_size = (int)v;
    v = p->merge_size;
    if ((st = q35_json_int_opt(root, "merge_size", what, 1, 16, &v))) return st;
    p->merge_size = (int)v;
    const long max_px = 1L << 40;
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(root, "size");
    if (size && !cJSON_IsNull(size)) {
        if (!cJSON_IsObject(size)) return q35_fail(Q35_ERR_FORMAT, "%s: field 'size' must be an object", what);
        char sub[300];
        snprintf(sub, sizeof sub, "%s: size", what);
        long lo = -1, hi = -1;
        if ((st = q35_json_int_opt(size, "min_pixels", sub, 1, max_px, &lo))) return st;
        if ((st = q35_json_int_opt(size, "max_pixels", sub, 1, max_px, &hi))) return st;
        if ((st = q35_json_int_opt(size, "shortest_edge", sub, 1, max_px, &lo))) return st;
        if ((st = q35_json_int_opt(size, "longest_edge", sub, 1, max_px, &hi))) return st;
        if (lo < 0 || hi < 0)
            return q35_fail(Q35_ERR_FORMAT, "%s: field 'size' must hold 'shortest_edge' and 'longest_edge'", what);
        p->min_pixels = lo;
        p->max_pixels = hi;
    }
    long lo = p->min_pixels, hi = p->max_pixels; /* top-level min/max_pixels override size, as in __init__ */
    if ((st = q35_json_int_opt(root, "min_pixels", what, 1, max_px, &lo))) return st;
    if ((st = q35_json_int_opt(root, "max_pixels", what, 1, max_px, &hi))) return st;
    p->min_pixels = lo;
    p->max_pixels = hi;
    if ((st = q35_json_num_opt(root, "rescale_factor", what, &p->rescale_factor))) return st;
    if ((st = read_triple(root, "image_mean", what, 0, p->image_mean))) return st;
    if ((st = read_triple(root, "image_std", what, 1, p->image_std))) return st;
    if ((st = q35_json_bool_opt(root, "do_resize", what, &p->do_resize))) return st;
    if ((st = q35_json_bool_opt(root, "do_rescale", what, &p->do_rescale))) return st;
    if ((st = q35_json_bool_opt(root, "do_normalize", what, &p->do_normalize))) return st;
    long resample = 3;
    if ((st = q35_json_int_opt(root, "resample", what, 0, 5, &resample))) return st;
    if (resample != 3)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: resample %ld is not supported (only 3, bicubic)", what, resample);
    return Q35_OK;
}

q35_status q35_image_proc_load(const char *dir, q35_image_proc **out) {
    if (!out) return q35_fail(Q35_ERR_ARG, "q35_image_proc_load: out is NULL");
    *out = NULL;
    q35_image_proc *p = calloc(1, sizeof *p);
    if (!p) return q35_fail(Q35_ERR_NOMEM, "cannot allocate an image processor");
    spec_defaults(p);
    if (dir) {
        char path[4096];
        q35_status st = q35_path_join(path, sizeof path, dir, "preprocessor_config.json");
        if (!st && q35_file_exists(path)) {
            cJSON *root = NULL;
            st = q35_json_load_file(path, 1 << 20, &root);
            if (!st) st = parse_config(root, path, p);
            cJSON_Delete(root);
        }
        if (st) {
            free(p);
            return st;
        }
    }
    *out = p;
    return Q35_OK;
}

void q35_image_proc_free(q35_image_proc *p) { free(p); }

q35_status q35_image_proc_set_limits(q35_image_proc *p, int fixed_w, int fixed_h, int max_tokens) {
    if (!p) return q35_fail(Q35_ERR_ARG, "q35_image_proc_set_limits: no processor");
    const int factor = p->patch_size * p->merge_size;
    if (fixed_w < 0 || fixed_h < 0 || max_tokens < 0 || (fixed_w > 0) != (fixed_h > 0))
        return q35_fail(Q35_ERR_ARG, "image size %dx%d / max tokens %d: expected positive values (or 0 for none)",
                        fixed_w, fixed_h, max_tokens);
    if (fixed_w > 0) {
        if (fixed_w % factor || fixed_h % factor)
            return q35_fail(Q35_ERR_ARG, "image size %dx%d: width and height must be multiples of %d (patch %d x merge %d)",
                            fixed_w, fixed_h, factor, p->patch_size, p->merge_size);
        if ((int64_t)fixed_w * fixed_h > Q35_IMAGE_MAX_PIXELS)
            return q35_fail(Q35_ERR_ARG, "image size %dx%d: more than %d pixels", fixed_w, fixed_h, Q35_IMAGE_MAX_PIXELS);
        int64_t tokens = (int64_t)(fixed_w / factor) * (fixed_h / factor);
        if (max_tokens > 0 && tokens > max_tokens)
            return q35_fail(Q35_ERR_ARG, "image size %dx%d makes %lld image tokens, more than the %d allowed", fixed_w,
                            fixed_h, (long long)tokens, max_tokens);
    }
    p->fixed_w = fixed_w;
    p->fixed_h = fixed_h;
    p->max_tokens = max_tokens;
    return Q35_OK;
}

/* ------------------------------------------------------------------ sizes */

q35_status q35_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels, int *out_h,
                            int *out_w) {
    if (height <= 0 || width <= 0 || factor <= 0) return q35_fail(Q35_ERR_ARG, "smart_resize: bad size %dx%d", width, height);
    const double hd = height, wd = width, f = factor;
    if ((height > width ? hd / wd : wd / hd) > 200)
        return q35_fail(Q35_ERR_ARG, "image is %dx%d: aspect ratio above 200 (the reference refuses it)", width, height);
    /* Python's round() on a float rounds half to even: rint() in the default rounding mode. */
    double h_bar = rint(hd / f) * f, w_bar = rint(wd / f) * f;
    if (h_bar * w_bar > (double)max_pixels) {
        double beta = sqrt((hd * wd) / (double)max_pixels);
        h_bar = fmax(f, floor(hd / beta / f) * f);
        w_bar = fmax(f, floor(wd / beta / f) * f);
    } else if (h_bar * w_bar < (double)min_pixels) {
        double beta = sqrt((double)min_pixels / (hd * wd));
        h_bar = ceil(hd * beta / f) * f;
        w_bar = ceil(wd * beta / f) * f;
    }
    if (h_bar < f || w_bar < f || h_bar > 1e9 || w_bar > 1e9 || h_bar * w_bar > (double)Q35_IMAGE_MAX_PIXELS)
        return q35_fail(Q35_ERR_ARG, "image is %dx%d: resized to %.0fx%.0f, outside the supported range", width, height,
                        w_bar, h_bar);
    *out_h = (int)h_bar;
    *out_w = (int)w_bar;
    return Q35_OK;
}

q35_status q35_image_target_size(const q35_image_proc *p, int width, int height, int *out_h, int *out_w) {
    const int factor = p->patch_size * p->merge_size;
    if (p->fixed_w > 0) {
        *out_h = p->fixed_h;
        *out_w = p->fixed_w;
        return Q35_OK;
    }
    if (!p->do_resize) {
        if (width % factor || height % factor)
            return q35_fail(Q35_ERR_ARG, "image is %dx%d: with do_resize false both sides must be multiples of %d",
                            width, height, factor);
        *out_h = height;
        *out_w = width;
        return Q35_OK;
    }
    int64_t max_px = p->max_pixels, min_px = p->min_pixels;
    if (p->max_tokens > 0) {
        /* At most N tokens: N blocks of factor x factor pixels. */
        int64_t cap = (int64_t)p->max_tokens * factor * factor;
        if (cap < max_px) max_px = cap;
        if (min_px > max_px) min_px = max_px;
    }
    q35_status st = q35_smart_resize(height, width, factor, min_px, max_px, out_h, out_w);
    if (st) return st;
    if (p->max_tokens > 0) {
        /* smart_resize keeps at least one block a side and rounds up when enlarging: trim the longer side. */
        while ((int64_t)(*out_h / factor) * (*out_w / factor) > p->max_tokens) {
            if (*out_w >= *out_h && *out_w > factor) *out_w -= factor;
            else if (*out_h > factor) *out_h -= factor;
            else break;
        }
    }
    return Q35_OK;
}

/* ------------------------------------------------------------------ Pillow's bicubic resample */

enum { PRECISION_BITS = 32 - 8 - 2 };

static double bicubic_filter(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* Pillow precompute_coeffs + normalize_coeffs_8bpc for in_size -> out_size (box 0..in_size).
 * bounds [out_size][2] = (first input index, count); kk [out_size][*ksize] fixed-point weights. */
static int precompute(int in_size, int out_size, int **bounds_out, int32_t **kk_out, int *ksize_out) {
    const double support0 = 2.0;
    double scale = (double)((float)in_size - 0.0f) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = support0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc(sizeof(int) * 2 * (size_t)out_size);
    int32_t *kk = malloc(sizeof(int32_t) * (size_t)ksize * out_size);
    double *k = malloc(sizeof(double) * (size_t)ksize);
    if (!bounds || !kk || !k) {
        free(bounds);
        free(kk);
        free(k);
        return -1;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = 0.0 + (xx + 0.5) * scale;
        double ww = 0.0;
        double ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        int x;
        for (x = 0; x < xmax; x++) {
            double w = bicubic_filter((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        for (x = 0; x < ksize; x++)
            kk[(size_t)xx * ksize + x] = k[x] < 0 ? (int32_t)(-0.5 + k[x] * (1 << PRECISION_BITS))
                                                  : (int32_t)(0.5 + k[x] * (1 << PRECISION_BITS));
        bounds[xx * 2] = xmin;
        bounds[xx * 2 + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *kk_out = kk;
    *ksize_out = ksize;
    return 0;
}

static inline uint8_t clip8(int64_t v) {
    if (v < 0) return 0;
    v >>= PRECISION_BITS;
    return v > 255 ? 255 : (uint8_t)v;
}

/* out[r][xx] (r < rows, xx < out_w) from in[r][bounds[xx].first - shift + i], rows of in_w RGB pixels. */
static void pass_h(const uint8_t *in, int in_w, int rows, const int *bounds, int shift, const int32_t *kk, int ks,
                   uint8_t *out, int out_w) {
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = in + (size_t)r * in_w * 3;
        uint8_t *o = out + (size_t)r * out_w * 3;
        for (int xx = 0; xx < out_w; xx++) {
            const int xmin = bounds[xx * 2] - shift, n = bounds[xx * 2 + 1];
            const int32_t *k = kk + (size_t)xx * ks;
            int64_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int x = 0; x < n; x++) {
                const uint8_t *px = row + (size_t)(x + xmin) * 3;
                s0 += px[0] * (int64_t)k[x];
                s1 += px[1] * (int64_t)k[x];
                s2 += px[2] * (int64_t)k[x];
            }
            o[xx * 3] = clip8(s0);
            o[xx * 3 + 1] = clip8(s1);
            o[xx * 3 + 2] = clip8(s2);
        }
    }
}

/* out[yy][c] (yy < out_h, c < cols) from in[bounds[yy].first - shift + i][col0 + c], rows of in_w RGB pixels;
 * out rows are cols pixels wide. */
static void pass_v(const uint8_t *in, int in_w, int col0, int cols, const int *bounds, int shift, const int32_t *kk,
                   int ks, uint8_t *out, int out_h) {
    for (int yy = 0; yy < out_h; yy++) {
        const int ymin = bounds[yy * 2] - shift, n = bounds[yy * 2 + 1];
        const int32_t *k = kk + (size_t)yy * ks;
        uint8_t *o = out + (size_t)yy * cols * 3;
        for (int c = 0; c < cols * 3; c++) {
            int64_t s = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < n; y++) s += in[((size_t)(y + ymin) * in_w + col0) * 3 + c] * (int64_t)k[y];
            o[c] = clip8(s);
        }
    }
}

int q35_resize_bicubic_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    int *bh = NULL, *bv = NULL;
    int32_t *kh = NULL, *kv = NULL;
    int ksh = 0, ksv = 0;
    uint8_t *tmp = NULL; /* the first pass's output, over the rows (or columns) the second pass reads */
    int rc = -1;
    if (precompute(sw, dw, &bh, &kh, &ksh) || precompute(sh, dh, &bv, &kv, &ksv)) goto done;
    const int need_h = dw != sw, need_v = dh != sh;
    if (need_h && need_v) {
        /* Pillow >= 13 (python-pillow/Pillow#9549) runs the vertical pass first when the height shrinks by
         * more than twice as many pixels as the width; the order changes the uint8 rounding in between. */
        if (dh < sh && (sh - dh) > 2 * (sw - dw)) {
            const int first = bh[0], last = bh[(dw - 1) * 2] + bh[(dw - 1) * 2 + 1];
            tmp = malloc((size_t)dh * (last - first) * 3); /* [dh][last - first][3] */
            if (!tmp) goto done;
            pass_v(src, sw, first, last - first, bv, 0, kv, ksv, tmp, dh);
            pass_h(tmp, last - first, dh, bh, first, kh, ksh, dst, dw);
        } else {
            const int first = bv[0], last = bv[(dh - 1) * 2] + bv[(dh - 1) * 2 + 1];
            tmp = malloc((size_t)(last - first) * dw * 3); /* [last - first][dw][3] */
            if (!tmp) goto done;
            pass_h(src + (size_t)first * sw * 3, sw, last - first, bh, 0, kh, ksh, tmp, dw);
            pass_v(tmp, dw, 0, dw, bv, first, kv, ksv, dst, dh);
        }
    } else if (need_h) {
        pass_h(src, sw, sh, bh, 0, kh, ksh, dst, dw);
    } else if (need_v) {
        pass_v(src, sw, 0, sw, bv, 0, kv, ksv, dst, dh);
    } else {
        memcpy(dst, src, (size_t)sh * sw * 3);
    }
    rc = 0;
done:
    free(bh);
    free(bv);
    free(kh);
    free(kv);
    free(tmp);
    return rc;
}

/* ------------------------------------------------------------------ pixel values */

q35_status q35_image_preprocess(const q35_image_proc *p, const q35_image *img, q35_pixels *out) {
    if (!out) return q35_fail(Q35_ERR_ARG, "q35_image_preprocess: out is NULL");
    memset(out, 0, sizeof *out);
    if (!p || !img || !img->rgb || img->width <= 0 || img->height <= 0)
        return q35_fail(Q35_ERR_ARG, "q35_image_preprocess: no processor or no image");
    int th, tw;
    q35_status st = q35_image_target_size(p, img->width, img->height, &th, &tw);
    if (st) return st;
    const int P = p->patch_size, M = p->merge_size, T = p->temporal_patch_size, factor = P * M;
    if (th % factor || tw % factor || (int64_t)th * tw > Q35_IMAGE_MAX_PIXELS)
        return q35_fail(Q35_ERR_ARG, "image target size %dx%d is not a multiple of %d", tw, th, factor);
    const uint8_t *rgb = img->rgb; /* [th][tw][3] once resized */
    uint8_t *resized = NULL;
    if (th != img->height || tw != img->width) {
        resized = malloc((size_t)th * tw * 3);
        if (!resized || q35_resize_bicubic_u8(img->rgb, img->width, img->height, resized, tw, th)) {
            free(resized);
            return q35_fail(Q35_ERR_NOMEM, "cannot allocate a %dx%d resized image", tw, th);
        }
        rgb = resized;
    }
    /* lut[c][v]: numpy's float32(float64(v) * rescale), then (x - mean) / std in float32. */
    float lut[3][256];
    for (int c = 0; c < 3; c++) {
        const float mean = (float)p->image_mean[c], sd = (float)p->image_std[c];
        for (int v = 0; v < 256; v++) {
            float x = p->do_rescale ? (float)((double)v * p->rescale_factor) : (float)v;
            lut[c][v] = p->do_normalize ? (x - mean) / sd : x;
        }
    }
    const int gh = th / P, gw = tw / P;
    const int patch_dim = 3 * T * P * P;
    const size_t n_patches = (size_t)gh * gw;
    float *data = malloc(n_patches * patch_dim * sizeof(float)); /* [gh*gw][3][T][P][P] */
    if (!data) {
        free(resized);
        return q35_fail(Q35_ERR_NOMEM, "cannot allocate pixel values for %zu patches", n_patches);
    }
    /* Rows in (block_row, block_col, in_row, in_col) order: each merge block's M*M patches are adjacent. */
    size_t row = 0;
    for (int br = 0; br < gh / M; br++)
        for (int bc = 0; bc < gw / M; bc++)
            for (int mr = 0; mr < M; mr++)
                for (int mc = 0; mc < M; mc++, row++) {
                    const int y0 = (br * M + mr) * P, x0 = (bc * M + mc) * P;
                    float *o = data + row * patch_dim;
                    for (int c = 0; c < 3; c++) {
                        float *oc = o + (size_t)c * T * P * P;
                        for (int py = 0; py < P; py++)
                            for (int px = 0; px < P; px++)
                                oc[py * P + px] = lut[c][rgb[((size_t)(y0 + py) * tw + x0 + px) * 3 + c]];
                        for (int t = 1; t < T; t++) memcpy(oc + (size_t)t * P * P, oc, sizeof(float) * P * P);
                    }
                }
    free(resized);
    out->grid_t = 1;
    out->grid_h = gh;
    out->grid_w = gw;
    out->patch_dim = patch_dim;
    out->n_tokens = (int)(n_patches / ((size_t)M * M));
    out->data = data;
    return Q35_OK;
}

void q35_pixels_free(q35_pixels *px) {
    if (!px) return;
    free(px->data);
    memset(px, 0, sizeof *px);
}

q35_status q35_image_proc_check(const q35_image_proc *p, const q35_model *m) {
    q35_vision_info vi;
    if (!p || !m) return q35_fail(Q35_ERR_ARG, "image preprocessor check: no preprocessor or model");
    if (!q35_model_has_vision(m, &vi)) return q35_fail(Q35_ERR_UNSUPPORTED, "the model has no vision tower");
    if (p->patch_size != vi.patch_size || p->temporal_patch_size != vi.temporal_patch_size || p->merge_size != vi.merge_size)
        return q35_fail(Q35_ERR_SHAPE,
                        "preprocessor_config.json: patch_size %d, temporal_patch_size %d, merge_size %d, but the vision tower of "
                        "config.json expects %d, %d, %d",
                        p->patch_size, p->temporal_patch_size, p->merge_size, vi.patch_size, vi.temporal_patch_size, vi.merge_size);
    return Q35_OK;
}
