/* A persistent thread pool: one per process, static contiguous partitions, the calling thread
 * works too, workers spin briefly then sleep. ~100 dispatches per generated token, so dispatch
 * latency matters. */
#ifndef Q35_CORE_POOL_H
#define Q35_CORE_POOL_H

typedef struct q35_pool q35_pool;

/* fn(ctx, i, n): task i of n. */
typedef void (*q35_pool_fn)(void *ctx, int i, int n);

/* n_threads <= 0: the number of online CPUs. Returns NULL on failure. */
q35_pool *q35_pool_new(int n_threads);
void q35_pool_free(q35_pool *p);
int q35_pool_threads(const q35_pool *p);
/* The process-wide pool the kernels and layers use (created on first use with q35_set_threads'
 * count, default: online CPUs). */
q35_pool *q35_global_pool(void);

/* Run fn for i = 0..n_tasks-1 across the pool (caller included) and wait for all. p may be NULL
 * (runs inline). A nested or concurrent call runs inline; idle workers take the unstarted
 * tasks of a stalled one. */
void q35_pool_run(q35_pool *p, int n_tasks, q35_pool_fn fn, void *ctx);
#endif
