/* The vision transformer (spec §5.2-5.5): pixel_values of one image -> its LLM-width embeddings. */
#ifndef Q35_LAYERS_VISION_H
#define Q35_LAYERS_VISION_H
#include "model/model.h"

/* Encode one image (or clip) whose pixel_values are pixels [gt*gh*gw][P] (P = q35_vision_patch_dim,
 * rows in the processor's patch order: 2x2 merge blocks contiguous, spec §5.1) into
 * out [gt*gh*gw / merge^2][out_hidden]. gh and gw must be multiples of merge. The work runs on the
 * global pool (call it from outside pool tasks); its scratch is allocated for the call. */
q35_status q35_vision_forward(const q35_vision_config *vc, const q35_vision_weights *w, const float *pixels, int gt, int gh, int gw,
                              float *out);
#endif
