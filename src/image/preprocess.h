/* Image preprocessing for the Qwen3.5 vision tower (spec §5.1): smart_resize, bicubic resize, rescale +
 * normalize, temporal duplication and the patch order. The public entry points are q35_image_proc_* and
 * q35_image_preprocess (include/q35.h); the pieces are here for the tests. */
#ifndef Q35_IMAGE_PREPROCESS_H
#define Q35_IMAGE_PREPROCESS_H
#include <stdint.h>

#include "q35.h"

struct q35_image_proc {
    int patch_size;            /* 16 */
    int temporal_patch_size;   /* 2: a still image is repeated to this many frames */
    int merge_size;            /* 2: merge_size^2 patches make one LLM token */
    int64_t min_pixels;        /* size.shortest_edge: 65536 */
    int64_t max_pixels;        /* size.longest_edge: 16777216 */
    double rescale_factor;     /* 1/255 */
    double image_mean[3], image_std[3];
    int do_resize, do_rescale, do_normalize;
    int fixed_w, fixed_h;      /* > 0: the fixed size profile */
    int max_tokens;            /* > 0: at most this many LLM tokens */
};

/* transformers' smart_resize (Qwen2-VL image processor, 5.23): the (h, w) an image of height x width is
 * resized to. Fails (Q35_ERR_ARG) when the aspect ratio is above 200, as the reference raises. */
q35_status q35_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels, int *out_h,
                            int *out_w);

/* The (h, w) q35_image_preprocess resizes a width x height image to, with the limits of p applied. */
q35_status q35_image_target_size(const q35_image_proc *p, int width, int height, int *out_h, int *out_w);

/* Pillow's Image.resize(BICUBIC) of an 8-bit RGB image: src [sh][sw][3] -> dst [dh][dw][3]. Returns 0, or
 * -1 when out of memory. */
int q35_resize_bicubic_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh);
#endif
