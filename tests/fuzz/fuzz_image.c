/* libFuzzer target: JPEG/PNG decoding from arbitrary bytes (pixel limit 1 Mpx to keep runs fast), then
 * preprocessing of whatever decodes (Qwen3.5 defaults, at most 16 image tokens). */
#include <stddef.h>
#include <stdint.h>

#include "image/decode.h"
#include "q35.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    q35_image *img = NULL;
    if (q35_image_decode_limited(data, size, "fuzz.img", 1 << 20, &img) != Q35_OK) return 0;
    q35_image_proc *p = NULL;
    if (q35_image_proc_load(NULL, &p) == Q35_OK && q35_image_proc_set_limits(p, 0, 0, 16) == Q35_OK) {
        q35_pixels px;
        if (q35_image_preprocess(p, img, &px) == Q35_OK) q35_pixels_free(&px);
    }
    q35_image_proc_free(p);
    q35_image_free(img);
    return 0;
}
