/* Run-time choice of the prefetch distances (prefetch.h) of single-token products.
 *
 * The best distances depend on the host, not only on the CPU vendor: two AMD Zen 4 VMs of this
 * project wanted opposite ones (docs/speed.md, "Prefetch distances chosen at run time"). So each
 * weight format starts on the static table (dispatch.c) and, during its first single-token
 * products, tries a few candidate pairs in turn, timing each product; once every candidate has
 * enough calls and bytes, the fastest one (weight bytes per second over all its calls) stays for
 * the rest of the process. Prefetches never change results, so this changes speed only.
 * Q35_PF (prefetch.h) fixes the dtypes it names; Q35_PF_TUNE=0 turns the search off. */
#ifndef Q35_KERNELS_PFTUNE_H
#define Q35_KERNELS_PFTUNE_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/prefetch.h"

#define Q35_PFTUNE_MAX 6          /* candidate pairs per dtype */
#define Q35_PFTUNE_MIN_CALLS 3    /* calls per candidate and stage */
#define Q35_PFTUNE_MIN_BYTES (192LL << 20) /* weight bytes per candidate and stage */
#define Q35_PFTUNE_MIN_PRODUCT (1LL << 20) /* smaller products are not timed (call overhead dominates) */

/* One dtype's search: pure bookkeeping, no clock and no globals (tests drive it directly). */
typedef struct q35_pftune {
    int n_cand;                        /* candidates in cand[] */
    q35_pf_dist cand[Q35_PFTUNE_MAX];  /* [n_cand]; cand[0] is the static table's pair */
    int64_t calls[Q35_PFTUNE_MAX];     /* [n_cand] timed calls */
    double bytes[Q35_PFTUNE_MAX];      /* [n_cand] weight bytes of those calls */
    double ns[Q35_PFTUNE_MAX];         /* [n_cand] their time */
    uint32_t seq;                      /* calls handed out so far */
    int final[2];                      /* the two best of the first stage; -1 before it ends */
    int64_t calls1[2];                 /* their calls ... */
    double bytes1[2];                  /* ... and bytes at the end of the first stage */
    int chosen;                        /* index into cand once decided; -1 while searching */
} q35_pftune;

/* Candidates: `start` first, then the fixed list without duplicates. */
void q35_pftune_init(q35_pftune *t, q35_pf_dist start);
/* The candidate for the next call, or the chosen one. First stage: rounds of n_cand calls, each
 * round in a rotated order, until every candidate has Q35_PFTUNE_MIN_CALLS calls and
 * Q35_PFTUNE_MIN_BYTES bytes. Second stage: the two fastest so far alternate until each has as
 * much again; the faster over both stages is chosen (a noisy first stage can only pick between
 * finalists, and the finalists are measured twice as long). */
int q35_pftune_pick(q35_pftune *t);
/* Records a call of candidate c; returns 1 when this call completes the search (t->chosen set). */
int q35_pftune_record(q35_pftune *t, int c, int64_t bytes, double ns);

/* ---- the process-wide search behind the products (matmul.c) ---- */

typedef struct q35_pftune_mark {
    int dt;          /* dtype being timed; -1: this call is not timed */
    int cand;        /* candidate it runs with */
    int64_t bytes;   /* weight bytes it reads */
    int64_t t0_ns;   /* start */
} q35_pftune_mark;

/* Before a single-token product over `bytes` of weights of dtype dt: sets the dtype's distances
 * for this call and starts its clock (m->dt = -1 when the dtype is not searching). */
void q35_pftune_begin(int dt, int64_t bytes, q35_pftune_mark *m);
void q35_pftune_end(const q35_pftune_mark *m);
/* Turns the search on or off (q35_pf_setup's default: on unless Q35_PF_TUNE=0); returns the old state. */
int q35_pftune_enable(int on);
/* Marks dtype dt fixed (Q35_PF named it). */
void q35_pftune_fix(int dt);
/* Restarts every dtype's search from the current table (dispatch.c, after q35_pf_setup). */
void q35_pftune_reset(void);
/* "q4_0 512/2048, q6_k 2048/8192 (searching)" for the dtypes that have run products. */
void q35_pftune_describe(char *buf, size_t cap);
#endif
