/* Synthetic checkpoints: deterministic seeded weights, bit-identical to tools/oracle/synth.py
 * (docs/synthetic-weights.md). Used by the parity tests for checkpoints too large to commit and by
 * benchmarks on full-size shapes. */
#ifndef Q35_MODEL_SYNTH_H
#define Q35_MODEL_SYNTH_H
#include <stdint.h>
#include "model/tensor.h"
#include "q35.h"

typedef struct q35_synth_tensor {
    char name[200];
    q35_dtype dtype;                /* F32 or BF16 */
    int ndim;
    int64_t shape[Q35_MAX_DIMS];
} q35_synth_tensor;

#define Q35_SYNTH_FORMAT 2 /* docs/synthetic-weights.md version */

uint64_t q35_fnv1a64(const void *data, size_t n, uint64_t h);
#define Q35_FNV_OFFSET 0xcbf29ce484222325ull

/* The (dtype, center, scale) rule of a tensor name; returns the dtype. */
q35_dtype q35_synth_rule(const char *name, int ndim, const int64_t *shape, float *center, float *scale);
/* Fill out[numel] with the tensor's values in its dtype. */
void q35_synth_fill(const char *name, uint64_t seed, q35_dtype dtype, float center, float scale, int64_t numel, void *out);
struct q35_config;
/* The text tensors of a config, named as a Hugging Face checkpoint stores them (prefix
 * "model.language_model." for the multimodal wrapper, "model." for a text-only config; lm_head.weight
 * when not tied). *list is malloc'd. */
q35_status q35_synth_list(const struct q35_config *c, q35_synth_tensor **list, int *n);
struct q35_vision_config;
/* The vision tower's tensors (model.visual.*, spec §2.3) for a vision config, in the order
 * transformers stores them. *list is malloc'd. */
q35_status q35_synth_vision_list(const struct q35_vision_config *v, q35_synth_tensor **list, int *n);
/* Write a safetensors file holding the tensors in list order (atomically: tmp file + rename). */
q35_status q35_synth_write(const char *path, uint64_t seed, const q35_synth_tensor *list, int n);
#endif
