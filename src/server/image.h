/* Images in requests: data: URLs (RFC 2397, base64) decoded with a size limit, and the one place
 * where a decoded image is handed to the model's vision side (not wired yet: it refuses with a
 * clear 400 until the vision encoder lands). */
#ifndef Q35_SERVER_IMAGE_H
#define Q35_SERVER_IMAGE_H
#include <stddef.h>
#include <stdint.h>
#include "server/error.h"

/* Decode "data:image/...;base64,..." into *bytes (malloc'd, [*n]). 0, or -1 with a 400 in err
 * naming param. Remote (http/https) URLs are refused: the server fetches nothing. */
int srv_image_decode_data_url(const char *url, size_t max_bytes, const char *param, uint8_t **bytes, size_t *n, srv_err *err);

/* The vision hook: accept one decoded image for the prompt. has_vision: the checkpoint has a
 * vision tower. Today always -1 with a 400 ("the model has no vision tower" / "images are not
 * supported yet"). */
int srv_image_accept(int has_vision, const uint8_t *bytes, size_t n, const char *param, srv_err *err);
#endif
