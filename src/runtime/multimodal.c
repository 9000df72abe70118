/* Prompts with images: image embeddings in place of the <|image_pad|> runs and their M-RoPE
 * positions (spec §5.6-5.7), checked against transformers 5.23 Qwen3_5Model.get_rope_index /
 * get_vision_position_ids / compute_3d_position_ids:
 *   - tokens are grouped into maximal runs of one type (text, image); a text run of length L takes
 *     positions (cur+i, cur+i, cur+i) and cur += L;
 *   - an image run takes the image's grid (t, h, w) merged to (t, h/m, w/m): token k = (ti, r, c) in
 *     raster order gets (cur + ti, cur + r, cur + c), then cur += max(h, w) / m (the temporal index
 *     does not advance cur);
 *   - after the prompt, rope_delta = max position + 1 - length (= cur - length), and every later
 *     token at sequence index i has all three components i + rope_delta.
 * The session keeps rope_delta, so evaluating this incrementally (text, then an image prompt, then
 * more text) gives the positions transformers computes for the whole sequence at once. */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "layers/vision.h"
#include "runtime/state.h"

int q35_model_has_vision(const q35_model *m, q35_vision_info *info) {
    if (!m || !m->has_vision) return 0;
    if (info) {
        const q35_vision_config *v = &m->cfg.vision;
        info->patch_size = v->patch, info->temporal_patch_size = v->temporal_patch, info->merge_size = v->merge;
        info->patch_dim = q35_vision_patch_dim(v);
        info->hidden = v->out_hidden;
        info->image_token_id = m->cfg.image_token_id;
        info->vision_start_token_id = m->cfg.vision_start_token_id;
        info->vision_end_token_id = m->cfg.vision_end_token_id;
    }
    return 1;
}

static q35_status no_vision(const q35_model *m) {
    return q35_fail(Q35_ERR_UNSUPPORTED, "%s: this model has no vision tower (%s); images cannot be used", m->dir ? m->dir : "model",
                    m->cfg.has_vision_config ? "config.json has a vision_config but the files hold no model.visual.* tensors"
                                             : "config.json has no vision_config");
}

q35_status q35_vision_encode(q35_model *m, const float *pixel_values, int grid_t, int grid_h, int grid_w, float *embeds) {
    if (!m->has_vision) return no_vision(m);
    if (!pixel_values || !embeds) return q35_fail(Q35_ERR_ARG, "vision_encode: pixel_values and embeds must not be NULL");
    return q35_vision_forward(&m->cfg.vision, &m->vision, pixel_values, grid_t, grid_h, grid_w, embeds);
}

q35_status q35_expand_image_tokens(const q35_model *m, const int32_t *tokens, int n, const int *n_tokens, int n_images, int32_t **out,
                                   int *n_out) {
    *out = NULL;
    *n_out = 0;
    if (n_images > 0 && !m->has_vision) return no_vision(m);
    if (n < 0 || (n > 0 && !tokens) || n_images < 0 || (n_images > 0 && !n_tokens))
        return q35_fail(Q35_ERR_ARG, "expand_image_tokens: bad arguments");
    const int32_t img = m->cfg.image_token_id;
    long long total = n;
    int found = 0;
    for (int i = 0; i < n; i++)
        if (tokens[i] == img) {
            if (found >= n_images) return q35_fail(Q35_ERR_ARG, "the prompt has more image tokens than the %d image(s) given", n_images);
            if (n_tokens[found] < 1) return q35_fail(Q35_ERR_ARG, "image %d has %d tokens", found, n_tokens[found]);
            total += n_tokens[found++] - 1;
        }
    if (found != n_images)
        return q35_fail(Q35_ERR_ARG, "the prompt has %d image token(s) (id %d) for %d image(s)", found, (int)img, n_images);
    if (total > (1 << 30)) return q35_fail(Q35_ERR_ARG, "the expanded prompt would have %lld tokens", total);
    int32_t *o = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
    if (!o) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    int k = 0;
    found = 0;
    for (int i = 0; i < n; i++) {
        if (tokens[i] != img) {
            o[k++] = tokens[i];
            continue;
        }
        for (int j = 0; j < n_tokens[found]; j++) o[k++] = img;
        found++;
    }
    *out = o;
    *n_out = k;
    return Q35_OK;
}

long long q35_mm_positions(const q35_config *c, const int32_t *tokens, int n, const q35_image_embeds *images, long long cur, int *pos3,
                           const float **emb, int *next) {
    const int32_t img = c->image_token_id;
    const int mg = c->has_vision_config ? c->vision.merge : 1, H = c->hidden;
    for (int i = 0, k = 0; i < n;) {
        if (tokens[i] != img || !images) {
            if (emb) emb[i] = NULL;
            for (int j = 0; j < 3; j++) pos3[3 * i + j] = (int)cur;
            cur++;
            if (next) next[i] = (int)cur;
            i++;
            continue;
        }
        const q35_image_embeds *im = &images[k++];
        const int th = im->grid_h / mg, tw = im->grid_w / mg;
        const long long after = cur + (th > tw ? th : tw);
        for (int t = 0; t < im->n_tokens; t++, i++) {
            if (emb) emb[i] = im->embeds ? im->embeds + (size_t)t * H : NULL;
            pos3[3 * i + 0] = (int)(cur + t / (th * tw));
            pos3[3 * i + 1] = (int)(cur + (t / tw) % th);
            pos3[3 * i + 2] = (int)(cur + t % tw);
            if (next) next[i] = (int)after;
        }
        cur = after;
    }
    return cur;
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t fnv64(uint64_t h, const void *p, size_t len) {
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t image_key(const q35_image_embeds *im, int hidden) {
    const int32_t grid[4] = {im->n_tokens, im->grid_t, im->grid_h, im->grid_w};
    uint64_t h = fnv64(0xcbf29ce484222325ull, grid, sizeof grid);
    if (im->embeds && im->n_tokens > 0 && hidden > 0) h = fnv64(h, im->embeds, sizeof(float) * (size_t)im->n_tokens * (size_t)hidden);
    return h | (1ull << 63); /* never a token id */
}

/* The checks every image prompt passes: images on a model with a tower, the runs of image tokens
 * matching the images in order, ids in the vocabulary. */
static q35_status check_prompt(const q35_model *m, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images) {
    const q35_config *c = &m->cfg;
    if (n_images < 0 || (n_images > 0 && !images)) return q35_fail(Q35_ERR_ARG, "eval_mm: bad image list");
    if (n_images > 0 && !m->has_vision) return no_vision(m);
    if (n < 0 || (n > 0 && !tokens)) return q35_fail(Q35_ERR_ARG, "eval: bad token batch");
    if (n == 0) {
        if (n_images) return q35_fail(Q35_ERR_ARG, "eval_mm: %d image(s) given for an empty batch", n_images);
        return Q35_OK;
    }
    const int32_t img = c->image_token_id;
    const int mg = m->has_vision ? c->vision.merge : 1;
    /* The runs of image tokens must be the images, in order. */
    for (int i = 0, k = 0; i <= n; i++) {
        if (i < n && tokens[i] != img) continue;
        int run = 0;
        while (i + run < n && tokens[i + run] == img) run++;
        if (i == n) {
            if (k != n_images) return q35_fail(Q35_ERR_ARG, "the prompt has %d run(s) of image tokens (id %d) for %d image(s)", k, (int)img, n_images);
            break;
        }
        if (k >= n_images)
            return q35_fail(Q35_ERR_ARG, "the prompt has a run of %d image tokens (id %d) at index %d but only %d image(s) were given", run,
                            (int)img, i, n_images);
        const q35_image_embeds *im = &images[k];
        if (!im->embeds || im->grid_t < 1 || im->grid_h < 1 || im->grid_w < 1 || im->grid_h % mg || im->grid_w % mg ||
            (long long)im->grid_t * im->grid_h * im->grid_w / (mg * mg) != im->n_tokens)
            return q35_fail(Q35_ERR_ARG, "image %d: %d tokens do not match its grid %dx%dx%d (merge %d), or it has no embeddings", k,
                            im->n_tokens, im->grid_t, im->grid_h, im->grid_w, mg);
        if (run != im->n_tokens)
            return q35_fail(Q35_ERR_ARG, "image %d has %d tokens but its run of image tokens (id %d) at index %d has %d", k, im->n_tokens,
                            (int)img, i, run);
        k++;
        i += run - 1;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return q35_fail(Q35_ERR_ARG, "token id %d at index %d is outside the vocabulary [0, %d)", tokens[i], i, c->vocab);
    return Q35_OK;
}

/* keys [n] of a checked prompt: token ids, each image's key on its run. */
static void prompt_keys(const q35_config *c, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, uint64_t *keys) {
    for (int i = 0, k = 0; i < n;) {
        if (tokens[i] != c->image_token_id || k >= n_images) {
            keys[i] = (uint64_t)(uint32_t)tokens[i];
            i++;
            continue;
        }
        const uint64_t key = image_key(&images[k], c->hidden);
        for (int t = 0; t < images[k].n_tokens; t++) keys[i++] = key;
        k++;
    }
}

q35_status q35_mm_keys(const q35_model *m, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, uint64_t *keys) {
    q35_status st = check_prompt(m, tokens, n, images, n_images);
    if (st) return st;
    if (n > 0 && !keys) return q35_fail(Q35_ERR_ARG, "mm_keys: keys must not be NULL");
    prompt_keys(&m->cfg, tokens, n, images, n_images, keys);
    return Q35_OK;
}

/* Evaluate tokens[from, end) of a checked prompt tokens[0, n) whose positions start at cur (the
 * session holds the tokens before from), then key the new positions by content. */
static q35_status eval_images(q35_session *s, const int32_t *tokens, int n, int from, int end, const q35_image_embeds *images, long long cur,
                              const uint64_t *keys, float *logits, float *all_logits) {
    const q35_config *c = &s->m->cfg;
    const float **emb = malloc(sizeof *emb * (size_t)n); /* [n] image rows, NULL for text */
    int *pos3 = malloc(sizeof *pos3 * 3 * (size_t)n);    /* [n][3] */
    int *next = malloc(sizeof *next * (size_t)n);        /* [n] the text position after each token */
    if (!emb || !pos3 || !next) {
        free(emb), free(pos3), free(next);
        return q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    q35_mm_positions(c, tokens, n, images, cur, pos3, emb, next);
    const int pos0 = s->pos;
    q35_status st = q35_session_eval_ex(s, tokens + from, end - from, emb + from, pos3 + 3 * (size_t)from, next + from, logits, all_logits);
    if (!st) memcpy(s->keys + pos0, keys + from, sizeof(uint64_t) * (size_t)(end - from)); /* eval_ex left the rope delta at next[end - 1] */
    free(emb), free(pos3), free(next);
    return st;
}

q35_status q35_session_eval_mm(q35_session *s, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, float *logits,
                               float *all_logits) {
    q35_status st = check_prompt(s->m, tokens, n, images, n_images);
    if (st || n == 0) return st;
    if (n > s->n_ctx - s->pos)
        return q35_fail(Q35_ERR_CONTEXT, "the context holds %d tokens: %d already used, the %d tokens of this prompt (images included) do not fit",
                        s->n_ctx, s->pos, n);
    if (n_images == 0) return q35_session_eval(s, tokens, n, logits, all_logits);
    uint64_t *keys = malloc(sizeof *keys * (size_t)n); /* [n] */
    if (!keys) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    prompt_keys(&s->m->cfg, tokens, n, images, n_images, keys);
    st = eval_images(s, tokens, n, 0, n, images, (long long)s->pos + s->rope_delta, keys, logits, all_logits);
    free(keys);
    return st;
}

q35_status q35_session_eval_mm_rest(q35_session *s, const int32_t *tokens, int n, const q35_image_embeds *images, int n_images, int end,
                                    float *logits, float *all_logits) {
    q35_status st = check_prompt(s->m, tokens, n, images, n_images);
    if (st) return st;
    const int P = s->pos;
    if (end > n || P >= end)
        return q35_fail(Q35_ERR_ARG, "eval_mm_rest: the session holds %d tokens; [%d, %d) of a %d-token prompt is nothing to evaluate", P, P, end, n);
    if (end > s->n_ctx) return q35_fail(Q35_ERR_CONTEXT, "the context holds %d tokens, the prompt (images included) needs %d", s->n_ctx, end);
    uint64_t *keys = malloc(sizeof *keys * (size_t)n); /* [n] */
    if (!keys) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    prompt_keys(&s->m->cfg, tokens, n, images, n_images, keys);
    if (memcmp(keys, s->keys, sizeof(uint64_t) * (size_t)P)) {
        free(keys);
        return q35_fail(Q35_ERR_ARG, "eval_mm_rest: the session's %d tokens are not the start of this prompt", P);
    }
    if (n_images == 0) st = q35_session_eval(s, tokens + P, end - P, logits, all_logits);
    else st = eval_images(s, tokens, n, P, end, images, 0, keys, logits, all_logits);
    free(keys);
    return st;
}
