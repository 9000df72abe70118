/* Images for generate and chat: each decoded, preprocessed the way the checkpoint's
 * preprocessor_config.json says (or --image-size / --max-image-tokens) and encoded once by the
 * vision tower; the prompt's <|image_pad|> tokens are expanded to the images' token counts. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"

int cli_images_add(cli_images *ci, q35_model *m, const char *dir, const cli_gen *g, const char *path) {
    q35_vision_info vi;
    if (!q35_model_has_vision(m, &vi)) {
        cli_error("image %s: this model has no vision tower (config.json without vision_config, or no model.visual.* tensors)", path);
        return 1;
    }
    q35_status st;
    if (!ci->proc) {
        if ((st = q35_image_proc_load(dir, &ci->proc))) return cli_fail("image preprocessor", st);
        if ((st = q35_image_proc_check(ci->proc, m)) || (st = q35_image_proc_set_limits(ci->proc, g->image_w, g->image_h, g->max_image_tokens))) {
            q35_image_proc_free(ci->proc);
            ci->proc = NULL;
            return cli_fail("image options", st);
        }
    }
    if (ci->n == ci->cap) {
        int cap = ci->cap ? 2 * ci->cap : 4;
        q35_image_embeds *im = realloc(ci->im, sizeof *im * (size_t)cap);
        if (!im) return cli_fail("", Q35_ERR_NOMEM);
        ci->im = im, ci->cap = cap;
    }
    q35_image *img = NULL;
    q35_pixels px;
    memset(&px, 0, sizeof px);
    if ((st = q35_image_load(path, &img))) return cli_fail("", st);
    st = q35_image_preprocess(ci->proc, img, &px);
    q35_image_free(img);
    if (st) return cli_fail(path, st);
    float *emb = malloc(sizeof(float) * (size_t)px.n_tokens * (size_t)vi.hidden);
    if (!emb) {
        q35_pixels_free(&px);
        return cli_fail("", Q35_ERR_NOMEM);
    }
    st = q35_vision_encode(m, px.data, px.grid_t, px.grid_h, px.grid_w, emb);
    if (st) {
        free(emb);
        q35_pixels_free(&px);
        return cli_fail(path, st);
    }
    ci->im[ci->n++] = (q35_image_embeds){emb, px.n_tokens, px.grid_t, px.grid_h, px.grid_w};
    q35_pixels_free(&px);
    return 0;
}

void cli_images_clear(cli_images *ci) {
    for (int i = 0; i < ci->n; i++) free((void *)ci->im[i].embeds);
    ci->n = 0;
}

void cli_images_free(cli_images *ci) {
    cli_images_clear(ci);
    free(ci->im);
    q35_image_proc_free(ci->proc);
    memset(ci, 0, sizeof *ci);
}

int cli_images_expand(const cli_images *ci, const q35_model *m, int32_t **ids, size_t *n_ids) {
    if (ci->n == 0) return 0;
    int *counts = malloc(sizeof(int) * (size_t)ci->n);
    if (!counts) return cli_fail("", Q35_ERR_NOMEM);
    for (int i = 0; i < ci->n; i++) counts[i] = ci->im[i].n_tokens;
    int32_t *out = NULL;
    int n_out = 0;
    q35_status st = q35_expand_image_tokens(m, *ids, (int)*n_ids, counts, ci->n, &out, &n_out);
    free(counts);
    if (st) return cli_fail("the prompt's images", st);
    free(*ids);
    *ids = out;
    *n_ids = (size_t)n_out;
    return 0;
}
