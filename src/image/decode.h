/* JPEG (libjpeg) and PNG (libpng) decoding into 8-bit RGB, the way the Hugging Face reference sees a file:
 * PIL.Image.open, ImageOps.exif_transpose, then the image processor's convert_to_rgb (alpha composited
 * over white with PIL's alpha_composite rounding). Sizes are checked against limits before anything is
 * allocated. The public entry points are q35_image_load / q35_image_decode (include/q35.h). */
#ifndef Q35_IMAGE_DECODE_H
#define Q35_IMAGE_DECODE_H
#include <stddef.h>
#include <stdint.h>

#include "q35.h"

struct q35_image {
    int width, height;
    uint8_t *rgb; /* [height][width][3] */
};

enum {
    Q35_IMAGE_MAX_SIDE = 16384,          /* pixels along either side */
    Q35_IMAGE_MAX_PIXELS = 64 << 20,     /* width * height (64 Mpx: 192 MiB of RGB) */
    Q35_IMAGE_MAX_FILE = 256 << 20,      /* bytes of an image file */
};

/* q35_image_decode with a lower pixel limit (max_pixels <= Q35_IMAGE_MAX_PIXELS; the fuzz target uses it). */
q35_status q35_image_decode_limited(const void *data, size_t len, const char *name, int64_t max_pixels, q35_image **out);

/* PIL's Image.alpha_composite of (r,g,b,a) over opaque white, one channel: the integer rule of Pillow's
 * AlphaComposite.c (7 extra bits of precision, divisions by 255 rounded by shifts). */
uint8_t q35_alpha_over_white(uint8_t v, uint8_t a);
#endif
