/* JPEG and PNG decoding into 8-bit RGB (see decode.h). Each decoder keeps everything it allocates in a
 * heap context, so the longjmp of a library error frees it all and nothing leaks. */
#include "image/decode.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* needs stdio.h first */
#include <jerror.h>
#include <libexif/exif-data.h>
#include <png.h>

#include "core/err.h"
#include "core/file.h"

uint8_t q35_alpha_over_white(uint8_t v, uint8_t a) {
    /* Pillow AlphaComposite.c with dst = (255, 255, 255, 255), src = (v, a). */
    if (a == 0) return 255;
    enum { PRECISION_BITS = 7 };
    uint32_t blend = 255u * (255u - a);
    uint32_t outa255 = a * 255u + blend;
    uint32_t coef1 = a * 255u * 255u * (1u << PRECISION_BITS) / outa255;
    uint32_t coef2 = 255u * (1u << PRECISION_BITS) - coef1;
    uint32_t tmp = v * coef1 + 255u * coef2 + (0x80u << PRECISION_BITS);
    return (uint8_t)((((tmp >> 8) + tmp) >> 8) >> PRECISION_BITS);
}

static q35_status check_size(const char *name, const char *fmt, uint32_t w, uint32_t h, int64_t max_pixels) {
    if (w == 0 || h == 0) return q35_fail(Q35_ERR_FORMAT, "%s: %s image has zero size (%ux%u)", name, fmt, w, h);
    if (w > Q35_IMAGE_MAX_SIDE || h > Q35_IMAGE_MAX_SIDE || (int64_t)w * h > max_pixels)
        return q35_fail(Q35_ERR_FORMAT, "%s: %s image is %ux%u, too large (at most %d pixels a side and %lld pixels)",
                        name, fmt, w, h, Q35_IMAGE_MAX_SIDE, (long long)max_pixels);
    return Q35_OK;
}

static q35_status new_image(const char *name, int w, int h, q35_image **out) {
    q35_image *im = calloc(1, sizeof *im);
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    if (!im || !rgb) {
        free(im);
        free(rgb);
        return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a %dx%d image", name, w, h);
    }
    im->width = w;
    im->height = h;
    im->rgb = rgb;
    *out = im;
    return Q35_OK;
}

void q35_image_free(q35_image *img) {
    if (!img) return;
    free(img->rgb);
    free(img);
}
int q35_image_width(const q35_image *img) { return img ? img->width : 0; }
int q35_image_height(const q35_image *img) { return img ? img->height : 0; }
const unsigned char *q35_image_rgb(const q35_image *img) { return img ? img->rgb : NULL; }

/* ------------------------------------------------------------------ EXIF orientation */

/* The EXIF orientation (1..8) of a TIFF-structured EXIF block that starts with "Exif\0\0"; 1 when absent
 * or unreadable. Like PIL's getexif(), only IFD0's Orientation counts. */
static int exif_orientation(const uint8_t *data, size_t len) {
    if (len < 6 || memcmp(data, "Exif\0\0", 6) != 0 || len > 0xFFFF + 6u) return 1;
    ExifData *ed = exif_data_new();
    if (!ed) return 1;
    /* No "fixing" of the data (that would add default tags). */
    exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
    exif_data_load_data(ed, data, (unsigned int)len);
    int o = 1;
    ExifEntry *e = ed->ifd[EXIF_IFD_0] ? exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION) : NULL;
    if (e && e->data && e->components >= 1) {
        ExifByteOrder bo = exif_data_get_byte_order(ed);
        if (e->format == EXIF_FORMAT_SHORT && e->size >= 2) o = exif_get_short(e->data, bo);
        else if (e->format == EXIF_FORMAT_LONG && e->size >= 4) o = (int)exif_get_long(e->data, bo);
    }
    exif_data_unref(ed);
    return o >= 1 && o <= 8 ? o : 1;
}

/* Apply an EXIF orientation like PIL.ImageOps.exif_transpose: 2 mirror, 3 rotate 180, 4 flip, 5 transpose,
 * 6 rotate 90 clockwise, 7 transverse, 8 rotate 90 counter-clockwise. Replaces img's pixels. */
static q35_status apply_orientation(const char *name, q35_image *img, int orientation) {
    if (orientation <= 1 || orientation > 8) return Q35_OK;
    const int sw = img->width, sh = img->height;
    const int swap = orientation >= 5;
    const int ow = swap ? sh : sw, oh = swap ? sw : sh;
    uint8_t *dst = malloc((size_t)ow * (size_t)oh * 3); /* [oh][ow][3] */
    if (!dst) return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a %dx%d image", name, ow, oh);
    for (int y = 0; y < oh; y++) {
        for (int x = 0; x < ow; x++) {
            int sx, sy;
            switch (orientation) {
            case 2: sx = sw - 1 - x; sy = y; break;
            case 3: sx = sw - 1 - x; sy = sh - 1 - y; break;
            case 4: sx = x; sy = sh - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = sh - 1 - x; break;
            case 7: sx = sw - 1 - y; sy = sh - 1 - x; break;
            default: sx = sw - 1 - y; sy = x; break; /* 8 */
            }
            memcpy(dst + ((size_t)y * ow + x) * 3, img->rgb + ((size_t)sy * sw + sx) * 3, 3);
        }
    }
    free(img->rgb);
    img->rgb = dst;
    img->width = ow;
    img->height = oh;
    return Q35_OK;
}

/* ------------------------------------------------------------------ PNG */

typedef struct png_ctx {
    const uint8_t *data; /* [len] the file */
    size_t len, pos;
    const char *name;
    int64_t max_pixels;
    char msg[256];       /* libpng's error message */
    q35_status st;       /* set before a longjmp that is not a libpng error */
    uint8_t *pixels;     /* [h][w][channels] as libpng writes it */
    png_bytep *rows;     /* [h] */
    q35_image *img;
} png_ctx;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    if (msg != c->msg) snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}
static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* benign (e.g. an ancillary chunk's CRC): PIL ignores these too */
}
static void png_on_read(png_structp png, png_bytep out, size_t n) {
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->len - c->pos) {
        snprintf(c->msg, sizeof c->msg, "file is truncated (%zu bytes)", c->len);
        png_on_error(png, c->msg);
    }
    memcpy(out, c->data + c->pos, n);
    c->pos += n;
}

static q35_status decode_png(png_ctx *c, q35_image **out) {
    /* The IHDR must be the first chunk: check its size before libpng reads on (it would otherwise stop at a
     * later chunk first, and this way nothing at all is allocated for a bomb). */
    if (c->len >= 24 && memcmp(c->data + 12, "IHDR", 4) == 0) {
        const uint8_t *d = c->data + 16;
        uint32_t w = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        uint32_t h = (uint32_t)d[4] << 24 | (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
        if (w && h) {
            q35_status st = check_size(c->name, "PNG", w, h, c->max_pixels);
            if (st) return st;
        }
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a PNG decoder", c->name);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(c->rows);
        free(c->pixels);
        q35_image_free(c->img);
        return c->st ? c->st : q35_fail(Q35_ERR_FORMAT, "%s: bad PNG: %s", c->name, c->msg);
    }
    png_set_user_limits(png, 0x7fffffffu, 0x7fffffffu); /* our check_size speaks instead */
    png_set_chunk_malloc_max(png, 16u << 20);
    png_set_read_fn(png, c, png_on_read);
    png_read_info(png, info);
    png_uint_32 w, h;
    int bit_depth, color_type, interlace;
    png_get_IHDR(png, info, &w, &h, &bit_depth, &color_type, &interlace, NULL, NULL);
    if ((c->st = check_size(c->name, "PNG", w, h, c->max_pixels))) png_longjmp(png, 1);

    /* To 8-bit RGB(A) the way PIL reads it: 16-bit samples keep their high byte (PIL's "RGB;16B" rawmodes;
     * for 16-bit grayscale PIL clips to 255 instead, which we do not copy), palettes and low bit depths
     * expand, tRNS becomes an alpha channel. */
    if (bit_depth == 16) png_set_strip_16(png);
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (!(color_type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int channels = png_get_channels(png, info);
    const size_t rowbytes = png_get_rowbytes(png, info);
    if ((channels != 3 && channels != 4) || png_get_bit_depth(png, info) != 8 || rowbytes != (size_t)w * channels) {
        snprintf(c->msg, sizeof c->msg, "unexpected layout after conversion (%d channels)", channels);
        png_on_error(png, c->msg);
    }
    c->pixels = malloc(rowbytes * h);
    c->rows = malloc(sizeof *c->rows * h);
    if (!c->pixels || !c->rows) {
        c->st = q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a %ux%u image", c->name, w, h);
        png_longjmp(png, 1);
    }
    for (png_uint_32 y = 0; y < h; y++) c->rows[y] = c->pixels + rowbytes * y;
    png_read_image(png, c->rows);
    png_read_end(png, info);
    int orientation = 1;
#ifdef PNG_eXIf_SUPPORTED
    png_uint_32 exif_len = 0;
    png_bytep exif = NULL;
    if (png_get_eXIf_1(png, info, &exif_len, &exif) && exif && exif_len > 0 && exif_len <= 0xFFFF) {
        uint8_t *buf = malloc(exif_len + 6); /* [6 + exif_len] "Exif\0\0" + the TIFF block */
        if (buf) {
            memcpy(buf, "Exif\0\0", 6);
            memcpy(buf + 6, exif, exif_len);
            orientation = exif_orientation(buf, exif_len + 6);
            free(buf);
        }
    }
#endif
    if ((c->st = new_image(c->name, (int)w, (int)h, &c->img))) png_longjmp(png, 1);
    uint8_t *dst = c->img->rgb;
    const size_t n = (size_t)w * h;
    if (channels == 4) {
        for (size_t i = 0; i < n; i++) {
            const uint8_t *s = c->pixels + i * 4;
            for (int k = 0; k < 3; k++) dst[i * 3 + k] = q35_alpha_over_white(s[k], s[3]);
        }
    } else {
        memcpy(dst, c->pixels, n * 3);
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(c->rows);
    free(c->pixels);
    q35_image *img = c->img;
    q35_status st = apply_orientation(c->name, img, orientation);
    if (st) {
        q35_image_free(img);
        return st;
    }
    *out = img;
    return Q35_OK;
}

/* ------------------------------------------------------------------ JPEG */

typedef struct jpg_ctx {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr err;
    struct jpeg_progress_mgr progress;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    const char *name;
    int64_t max_pixels;
    q35_status st;       /* set before a longjmp that is not a libjpeg error */
    uint8_t *row;        /* [width * components] one decoded scanline */
    q35_image *img;
} jpg_ctx;

static jpg_ctx *jpg_of(j_common_ptr ci) { return (jpg_ctx *)((char *)ci->err - offsetof(jpg_ctx, err)); }

static void jpg_error_exit(j_common_ptr ci) {
    jpg_ctx *c = jpg_of(ci);
    ci->err->format_message(ci, c->msg);
    longjmp(c->jb, 1);
}
/* Warnings that mean the picture is incomplete or garbled are errors (PIL refuses a truncated file too);
 * the benign ones (extra bytes between markers, unknown JFIF versions) are ignored like PIL does. */
static void jpg_emit_message(j_common_ptr ci, int level) {
    if (level >= 0) return;
    switch (ci->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_HIT_MARKER:
        jpg_error_exit(ci);
        break;
    default:
        ci->err->num_warnings++;
    }
}
static void jpg_output_message(j_common_ptr ci) { (void)ci; }
/* A progressive file may hold any number of scans; a few hundred is already absurd. */
static void jpg_progress(j_common_ptr ci) {
    if (!ci->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)ci;
    if (d->input_scan_number > 1000) {
        jpg_ctx *c = jpg_of(ci);
        snprintf(c->msg, sizeof c->msg, "more than 1000 scans");
        longjmp(c->jb, 1);
    }
}

static q35_status decode_jpeg(jpg_ctx *c, const uint8_t *data, size_t len, q35_image **out) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    ci->err = jpeg_std_error(&c->err);
    c->err.error_exit = jpg_error_exit;
    c->err.emit_message = jpg_emit_message;
    c->err.output_message = jpg_output_message;
    c->progress.progress_monitor = jpg_progress;
    if (setjmp(c->jb)) {
        jpeg_destroy_decompress(ci);
        free(c->row);
        q35_image_free(c->img);
        return c->st ? c->st : q35_fail(Q35_ERR_FORMAT, "%s: bad JPEG: %s", c->name, c->msg);
    }
    jpeg_create_decompress(ci);
    ci->progress = &c->progress;
    jpeg_mem_src(ci, data, (unsigned long)len);
    jpeg_save_markers(ci, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(ci, TRUE);
    if ((c->st = check_size(c->name, "JPEG", ci->image_width, ci->image_height, c->max_pixels))) longjmp(c->jb, 1);
    /* The saved markers live until jpeg_finish_decompress: read the orientation now. */
    int orientation = 1;
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) {
            orientation = exif_orientation(m->data, m->data_length); /* the first EXIF block, as PIL */
            break;
        }
    }
    /* PIL's modes: 1 component "L", 3 "RGB" (libjpeg's YCbCr->RGB), 4 "CMYK" (Adobe files inverted). */
    int cmyk = 0;
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: ci->out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK: ci->out_color_space = JCS_CMYK; cmyk = 1; break;
    default: ci->out_color_space = JCS_RGB; break;
    }
    jpeg_start_decompress(ci);
    const int w = (int)ci->output_width, h = (int)ci->output_height, comps = ci->output_components;
    if (w != (int)ci->image_width || h != (int)ci->image_height || (comps != 1 && comps != 3 && comps != 4) ||
        (cmyk && comps != 4)) {
        c->st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: JPEG with %d output components", c->name, comps);
        longjmp(c->jb, 1);
    }
    if ((c->st = new_image(c->name, w, h, &c->img))) longjmp(c->jb, 1);
    c->row = malloc((size_t)w * comps);
    if (!c->row) {
        c->st = q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a JPEG scanline", c->name);
        longjmp(c->jb, 1);
    }
    const int inverted = cmyk && ci->saw_Adobe_marker;
    while (ci->output_scanline < ci->output_height) {
        const int y = (int)ci->output_scanline;
        JSAMPROW rows[1] = {c->row};
        if (jpeg_read_scanlines(ci, rows, 1) != 1) {
            snprintf(c->msg, sizeof c->msg, "no data for row %d", y);
            longjmp(c->jb, 1);
        }
        uint8_t *dst = c->img->rgb + (size_t)y * w * 3;
        if (comps == 3) {
            memcpy(dst, c->row, (size_t)w * 3);
        } else if (comps == 1) {
            for (int x = 0; x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = c->row[x];
        } else {
            /* Pillow Convert.c cmyk2rgb: v = nk - nk*c/255 (rounded), nk = 255 - k. */
            for (int x = 0; x < w; x++) {
                uint8_t p[4];
                for (int k = 0; k < 4; k++) p[k] = inverted ? (uint8_t)(255 - c->row[4 * x + k]) : c->row[4 * x + k];
                int nk = 255 - p[3];
                for (int k = 0; k < 3; k++) {
                    int t = p[k] * nk + 128;
                    int v = nk - (((t >> 8) + t) >> 8);
                    dst[3 * x + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
        }
    }
    jpeg_finish_decompress(ci);
    jpeg_destroy_decompress(ci);
    free(c->row);
    q35_image *img = c->img;
    q35_status st = apply_orientation(c->name, img, orientation);
    if (st) {
        q35_image_free(img);
        return st;
    }
    *out = img;
    return Q35_OK;
}

/* ------------------------------------------------------------------ entry points */

q35_status q35_image_decode_limited(const void *data, size_t len, const char *name, int64_t max_pixels, q35_image **out) {
    if (!out) return q35_fail(Q35_ERR_ARG, "q35_image_decode: out is NULL");
    *out = NULL;
    if (!name) name = "image";
    if (!data && len) return q35_fail(Q35_ERR_ARG, "%s: data is NULL", name);
    if (max_pixels <= 0 || max_pixels > Q35_IMAGE_MAX_PIXELS) max_pixels = Q35_IMAGE_MAX_PIXELS;
    const uint8_t *d = data;
    if (len == 0) return q35_fail(Q35_ERR_FORMAT, "%s: empty file, not a JPEG or PNG image", name);
    if (len >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) {
        png_ctx *c = calloc(1, sizeof *c);
        if (!c) return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a PNG decoder", name);
        c->data = d;
        c->len = len;
        c->name = name;
        c->max_pixels = max_pixels;
        q35_status st = decode_png(c, out);
        free(c);
        return st;
    }
    if (len >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
        jpg_ctx *c = calloc(1, sizeof *c);
        if (!c) return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate a JPEG decoder", name);
        c->name = name;
        c->max_pixels = max_pixels;
        q35_status st = decode_jpeg(c, d, len, out);
        free(c);
        return st;
    }
    return q35_fail(Q35_ERR_UNSUPPORTED, "%s: not a JPEG or PNG image", name);
}

q35_status q35_image_decode(const void *data, size_t len, const char *name, q35_image **out) {
    return q35_image_decode_limited(data, len, name, Q35_IMAGE_MAX_PIXELS, out);
}

q35_status q35_image_load(const char *path, q35_image **out) {
    if (!out) return q35_fail(Q35_ERR_ARG, "q35_image_load: out is NULL");
    *out = NULL;
    if (!path) return q35_fail(Q35_ERR_ARG, "q35_image_load: path is NULL");
    char *data;
    size_t len;
    q35_status st = q35_read_file(path, Q35_IMAGE_MAX_FILE, &data, &len);
    if (st) return st;
    st = q35_image_decode(data, len, path, out);
    free(data);
    return st;
}
