/* Exact greedy decoding without the full logits. The LM head (V x H, a third of the 0.8B model's
 * bytes) is first scored with a 4-bit copy whose error is bounded per row (kernels/headscan.h); only
 * the rows whose bound interval reaches the best lower bound are rescored with the stored head, and
 * the best of those is the token exhaustive scoring would choose: for the exhaustive argmax j,
 * a_j + e_j >= t_j >= t_i >= a_i - e_i for every i, so j is always among the rescored rows. */
#ifndef Q35_RUNTIME_LMHEAD_H
#define Q35_RUNTIME_LMHEAD_H
#include <stdint.h>
#include "model/model.h"

typedef struct q35_lmhead_approx {
    int64_t rows, cols;  /* V, H (H a multiple of 32) */
    size_t row_bytes;    /* 2*nb + 16*nb */
    uint8_t *data;       /* [rows][row_bytes], layout of kernels/headscan.h */
    int quantized_exact; /* 1: the stored head is block-quantized (its kernel rounds activations to 8 bits) */
} q35_lmhead_approx;

/* Build the 4-bit copy of a head of any dtype/layout (Q35_ERR_UNSUPPORTED when H % 32). */
q35_status q35_lmhead_build(const q35_tensor *head, q35_lmhead_approx *out);
void q35_lmhead_free(q35_lmhead_approx *ap);

typedef struct q35_lmhead_scratch {
    float *a, *e;        /* [V] approximate scores and their bounds */
    float *exact;        /* [V] rescored rows (only candidates are written) */
    int8_t *qh;          /* [H] */
    float *dh, *g, *c;   /* [H/32] */
    int calls;           /* greedy.c: scans so far, rows rescored in them, and whether the scan was */
    double rescored;     /* given up (flat logits, as with random weights, leave nothing to prune) */
    int off;
} q35_lmhead_scratch;

/* The fraction of rows the scan would rescore for the hidden state h whose exact logits (head·h)
 * are known, estimated on every (V / 4096)-th row with a 4-bit copy of those rows and of the
 * exhaustive winner j only (best_low is taken as a_j - e_j, a lower bound: the estimate errs
 * high): greedy.c
 * builds the full copy only when this is small (flat logits, as random weights give, leave nothing
 * to prune and would cost the copy's memory for no gain). Uses sc's activation buffers (qh, dh, g, c). */
double q35_lmhead_trial(const q35_tensor *head, const float *h, const float *logits, q35_lmhead_scratch *sc);

/* The argmax of head·h (ties: the lowest id) as exhaustive scoring with q35_matmul would give it.
 * *n_rescored (if not NULL) gets the number of rows scored exactly. */
int32_t q35_lmhead_argmax(const q35_tensor *head, const q35_lmhead_approx *ap, const float *h, q35_lmhead_scratch *sc, int *n_rescored);
#endif
