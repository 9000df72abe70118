#include "image/preprocess.h"
#include "server/image.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Which image container the bytes start with, or NULL. */
static const char *image_kind(const uint8_t *b, size_t n) {
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return "png";
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return "jpeg";
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return "gif";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return "webp";
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return "bmp";
    return NULL;
}

int srv_image_decode_data_url(const char *url, size_t max_bytes, const char *param, uint8_t **bytes, size_t *n, srv_err *err) {
    *bytes = NULL;
    *n = 0;
    const char *bad = "invalid_image_url";
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0)
        return srv_error(err, 400, "invalid_request_error", bad, param,
                         "%s: remote image URLs are not fetched; send the image inline as a data:image/...;base64,... URL", param);
    if (strncasecmp(url, "data:", 5) != 0)
        return srv_error(err, 400, "invalid_request_error", bad, param, "%s: expected a data:image/...;base64,... URL", param);
    const char *comma = strchr(url, ',');
    if (!comma) return srv_error(err, 400, "invalid_request_error", bad, param, "%s: malformed data URL (no ',' before the data)", param);
    size_t meta_len = (size_t)(comma - (url + 5));
    const char *meta = url + 5;
    if (meta_len < 6 || strncasecmp(meta, "image/", 6) != 0)
        return srv_error(err, 400, "invalid_request_error", bad, param, "%s: the data URL's media type must be image/*", param);
    if (meta_len < 7 || strncasecmp(comma - 7, ";base64", 7) != 0)
        return srv_error(err, 400, "invalid_request_error", bad, param, "%s: the data URL must be base64-encoded (;base64,)", param);
    const char *src = comma + 1;
    size_t src_len = strlen(src);
    if (src_len / 4 * 3 > max_bytes + 3)
        return srv_error(err, 400, "invalid_request_error", "image_too_large", param, "%s: the image is larger than the limit of %zu bytes", param,
                         max_bytes);
    uint8_t *out = malloc(src_len / 4 * 3 + 3);
    if (!out) return srv_error(err, 500, "server_error", NULL, param, "out of memory decoding %s", param);
    size_t k = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < src_len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '=') {
            pad++;
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        int v = b64_value(c);
        if (v < 0 || pad) {
            free(out);
            return srv_error(err, 400, "invalid_request_error", bad, param, "%s: invalid base64 at byte %zu of the data", param, i);
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (uint8_t)(acc >> bits);
        }
    }
    if (pad > 2 || bits >= 6 || k == 0) {
        free(out);
        return srv_error(err, 400, "invalid_request_error", bad, param, "%s: the base64 data is empty or truncated", param);
    }
    if (!image_kind(out, k)) {
        free(out);
        return srv_error(err, 400, "invalid_request_error", "invalid_image", param,
                         "%s: the data is not a PNG, JPEG, GIF, WebP or BMP image", param);
    }
    *bytes = out;
    *n = k;
    return 0;
}

int srv_image_accept(int has_vision, const q35_image_proc *proc, const uint8_t *bytes, size_t n, int max_tokens, const char *param, q35_pixels *px,
                     srv_err *err) {
    memset(px, 0, sizeof *px);
    if (!has_vision)
        return srv_error(err, 400, "invalid_request_error", "model_not_multimodal", param,
                         "%s: the model has no vision tower, so it cannot take images", param);
    if (!proc)
        return srv_error(err, 400, "invalid_request_error", "images_not_supported", param,
                         "%s: images are not supported by this server (no image preprocessor)", param);
    q35_image *img = NULL;
    q35_status st = q35_image_decode(bytes, n, param, &img);
    if (st)
        return srv_error(err, st == Q35_ERR_NOMEM ? 500 : 400, st == Q35_ERR_NOMEM ? "server_error" : "invalid_request_error",
                         st == Q35_ERR_NOMEM ? NULL : "invalid_image", param, "%s", q35_last_error());
    /* the tokens the image will take, from its size alone: refused before the pixel values (up to
     * hundreds of MB for a large picture) are made */
    int th = 0, tw = 0;
    const int unit = proc->patch_size * proc->merge_size;
    st = q35_image_target_size(proc, q35_image_width(img), q35_image_height(img), &th, &tw);
    if (!st && unit > 0 && (int64_t)(th / unit) * (tw / unit) > max_tokens) {
        q35_image_free(img);
        return srv_error(err, 400, "invalid_request_error", "context_length_exceeded", param,
                         "%s: the image takes %lld tokens, more than the %d the context has left (use a smaller image or --max-image-tokens)",
                         param, (long long)(th / unit) * (tw / unit), max_tokens);
    }
    st = st ? st : q35_image_preprocess(proc, img, px);
    q35_image_free(img);
    if (st) {
        q35_pixels_free(px);
        memset(px, 0, sizeof *px);
        return srv_error(err, st == Q35_ERR_NOMEM ? 500 : 400, st == Q35_ERR_NOMEM ? "server_error" : "invalid_request_error",
                         st == Q35_ERR_NOMEM ? NULL : "invalid_image", param, "%s: %s", param, q35_last_error());
    }
    return 0;
}
