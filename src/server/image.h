/* Images in requests: data: URLs (RFC 2397, base64) decoded with a size limit, and the one place
 * where a decoded image is handed to the model's vision side: decoded (q35_image_decode) and
 * preprocessed (the checkpoint's preprocessor_config.json) into the pixel_values the engine's
 * worker encodes with the vision tower. */
#ifndef Q35_SERVER_IMAGE_H
#define Q35_SERVER_IMAGE_H
#include <stddef.h>
#include <stdint.h>
#include "q35.h"
#include "server/error.h"

/* Decode "data:image/...;base64,..." into *bytes (malloc'd, [*n]). 0, or -1 with a 400 in err
 * naming param. Remote (http/https) URLs are refused: the server fetches nothing. */
int srv_image_decode_data_url(const char *url, size_t max_bytes, const char *param, uint8_t **bytes, size_t *n, srv_err *err);

/* The vision hook: one image file's bytes[n] for the prompt, decoded and preprocessed by proc into
 * *px (free with q35_pixels_free). has_vision: the checkpoint has a vision tower (else a 400 "the
 * model has no vision tower"); proc NULL: a 400 "images are not supported" (no preprocessor). 0,
 * or -1 with a 400 naming param (an image that does not decode) and *px empty. */
int srv_image_accept(int has_vision, const q35_image_proc *proc, const uint8_t *bytes, size_t n, int max_tokens, const char *param, q35_pixels *px,
                     srv_err *err);
#endif
