/* Weight conversion at load (--weights bf16|q8|q4): the large matrices of a bound model re-encoded
 * in memory, in the layout the kernels read fastest. What stays in full precision: every norm,
 * A_log, dt_bias and the conv taps (they were already copied to float32 arrays by the binder).
 *   q8:  every layer matrix Q8_0 (8.5 bits per weight); the LM head and the embedding stay as stored:
 *        quantizing them is what moved greedy continuations at near-ties (docs/quantization.md), and
 *        greedy decoding reads the head through its bounded 4-bit scan anyway (runtime/lmhead.h).
 *   q8_0: every matrix Q8_0, head included (the bytes of a GGUF Q8_0 file).
 *   q4:  every layer matrix in 4.5 bits: Q4R (q35's rotated 4-bit) or Q4_0, per tensor whichever
 *        reconstructs a sample of its rows better (Q4R needs a multiple of 128 columns); Q8_0 when
 *        the columns are not a multiple of 32; the small beta/decay projections (in_proj_b,
 *        in_proj_a: Hv rows, a few KB, and sensitive: docs/quantization.md) stay Q8_0; the LM head
 *        is Q6_K (6.56 bits; Q8_0 when its columns are not a multiple of 256), as llama.cpp's Q4_0
 *        files do.
 *   q4_0: as q4 with GGUF's Q4_0 instead of Q4R (the same bytes; for quality comparisons).
 *   bf16: every matrix BF16.
 * When every matrix was converted, the mapped files are released: memory is then the converted
 * weights alone. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/err.h"
#include "core/hugemem.h"
#include "core/pool.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "model/model.h"


/* Rows [row0, row0 + n_rows) of src, converted into dst ([n_rows][row_bytes], row-major). */
typedef struct {
    const q35_tensor *src;
    q35_dtype dt;
    int64_t row0, n_rows;
    uint8_t *dst;
    size_t row_bytes;
    int failed;
} convert_ctx;

static void convert_task(void *vctx, int i, int n) {
    convert_ctx *ctx = vctx;
    const int64_t cols = ctx->src->shape[1];
    const int64_t r0 = ctx->n_rows * i / n, r1 = ctx->n_rows * (i + 1) / n;
    float *row = malloc(sizeof(float) * (size_t)cols);
    if (!row) {
        ctx->failed = 1;
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        q35_tensor_dequant_row(ctx->src, ctx->row0 + r, row);
        uint8_t *out = ctx->dst + (size_t)r * ctx->row_bytes;
        if (ctx->dt == Q35_DT_BF16) {
            for (int64_t k = 0; k < cols; k++) ((uint16_t *)out)[k] = q35_f32_to_bf16(row[k]);
        } else if (ctx->dt == Q35_DT_F32) {
            memcpy(out, row, sizeof(float) * (size_t)cols);
        } else if (q35_quantize_row(ctx->dt, row, out, cols) != 0) {
            ctx->failed = 1;
        }
    }
    free(row);
}

/* The source bytes of a converted tensor are not needed any more: drop their pages (file pages
 * of a mapping, or the anonymous copy of a loaded file), so converting never holds two copies of
 * the model at once. Only whole pages inside the range are dropped. */
static void drop_source(const void *data, size_t nbytes) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)data + page - 1) & ~(page - 1), hi = ((uintptr_t)data + nbytes) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static q35_status own(struct q35_model *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **v = realloc(m->owned, sizeof *v * (size_t)cap);
        if (!v) return q35_fail(Q35_ERR_NOMEM, "out of memory");
        m->owned = v;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return Q35_OK;
}

/* Converted tensors are carved end to end (64-byte aligned) from 64 MiB chunks of huge pages, so
 * that the small matrices share huge pages too and no page is half used; a tensor larger than a
 * chunk gets its own. Only written pages count: a chunk's unused tail costs nothing. */
enum { ARENA_CHUNK = 64 << 20 };
static void *arena_take(struct q35_model *m, size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes > m->arena_left) {
        const size_t chunk = bytes > ARENA_CHUNK ? bytes : ARENA_CHUNK;
        uint8_t *p = q35_huge_alloc(chunk);
        if (!p) return NULL;
        if (own(m, p)) {
            q35_huge_free(p);
            return NULL;
        }
        if (bytes == chunk) return p; /* a tensor of its own: keep the current chunk's rest */
        m->arena_next = p;
        m->arena_left = chunk;
    }
    void *p = m->arena_next;
    m->arena_next += bytes;
    m->arena_left -= bytes;
    return p;
}

/* Convert t in place to dt (when dt can encode its rows; else fallback), straight into the
 * interleaved layout when the kernels have one for dt. Works in slices of rows, dropping the
 * source pages of each slice once converted, so memory never holds two copies of a tensor. */
#define SLICE_ROWS 2048 /* a multiple of 16 (the interleave) */

/* Q4R or Q4_0 for this tensor: whichever reconstructs a sample of its rows with the smaller squared
 * error. The rotation makes any distribution near-Gaussian: a clear gain for the heavy-tailed rows
 * of trained weights, a loss for uniform ones (synthetic checkpoints). Same bytes either way. */
static q35_dtype pick_q4(const q35_tensor *t) {
    const int64_t rows = t->shape[0], cols = t->shape[1];
    if (!q35_quant_supports(Q35_DT_Q4R, cols)) return Q35_DT_Q4_0;
    float *x = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)cols);
    uint8_t *q = malloc(q35_row_bytes(Q35_DT_Q4_0, cols));
    double err_r = 0, err_0 = 0;
    const int64_t samples = rows < 64 ? rows : 64;
    for (int64_t i = 0; x && y && q && i < samples; i++) {
        q35_tensor_dequant_row(t, i * rows / samples, x);
        q35_quantize_row(Q35_DT_Q4R, x, q, cols);
        q35_dequantize_row(Q35_DT_Q4R, q, y, cols);
        for (int64_t k = 0; k < cols; k++) err_r += (double)(x[k] - y[k]) * (x[k] - y[k]);
        q35_quantize_row(Q35_DT_Q4_0, x, q, cols);
        q35_dequantize_row(Q35_DT_Q4_0, q, y, cols);
        for (int64_t k = 0; k < cols; k++) err_0 += (double)(x[k] - y[k]) * (x[k] - y[k]);
    }
    free(x);
    free(y);
    free(q);
    return err_r <= err_0 ? Q35_DT_Q4R : Q35_DT_Q4_0;
}
static q35_status convert(struct q35_model *m, q35_tensor *t, q35_dtype dt, q35_dtype fallback) {
    if (!t->data || t->ndim != 2) return Q35_OK;
    const int64_t rows = t->shape[0], cols = t->shape[1];
    if (dt == Q35_DT_Q4R) dt = pick_q4(t);
    if (!q35_quant_supports(dt, cols)) dt = fallback;
    if (!q35_quant_supports(dt, cols)) dt = Q35_DT_BF16;
    const size_t row_bytes = dt == Q35_DT_BF16 ? 2 * (size_t)cols : dt == Q35_DT_F32 ? 4 * (size_t)cols : q35_row_bytes(dt, cols);
    q35_tensor target = *t; /* the result, row-major, to ask the kernels about the interleave */
    target.dtype = dt;
    target.layout = Q35_LAYOUT_ROWS;
    target.nbytes = row_bytes * (size_t)rows;
    const size_t packed_bytes = q35_repack_size(&target);
    if (t->dtype == dt && (t->layout != Q35_LAYOUT_ROWS || !packed_bytes)) return Q35_OK; /* nothing to gain */
    const size_t total = packed_bytes ? packed_bytes : target.nbytes;
    uint8_t *dst = arena_take(m, total); /* given back only with the model, also on failure */
    uint8_t *slice = packed_bytes && t->dtype != dt ? aligned_alloc(64, (row_bytes * SLICE_ROWS + 63) & ~(size_t)63) : NULL;
    if (!dst || (packed_bytes && t->dtype != dt && !slice)) {
        free(slice);
        return q35_fail(Q35_ERR_NOMEM, "cannot allocate %.1f MB to convert %s", total / 1e6, t->name);
    }
    const size_t group_bytes = packed_bytes ? q35_r16_group_bytes(dt, cols) : 0;
    const size_t src_row_bytes = t->nbytes / (size_t)rows;
    q35_pool *pool = q35_global_pool();
    for (int64_t r0 = 0; r0 < rows; r0 += SLICE_ROWS) {
        const int64_t n = rows - r0 < SLICE_ROWS ? rows - r0 : SLICE_ROWS;
        /* The slice in dt, row-major: converted from the source, or the source itself. */
        const uint8_t *rowmajor;
        if (t->dtype != dt) {
            uint8_t *out = packed_bytes ? slice : dst + (size_t)r0 * row_bytes;
            convert_ctx ctx = {t, dt, r0, n, out, row_bytes, 0};
            int tasks = 4 * q35_pool_threads(pool);
            if (tasks > n) tasks = (int)n;
            q35_pool_run(pool, tasks > 0 ? tasks : 1, convert_task, &ctx);
            if (ctx.failed) {
                free(slice);
                return q35_fail(Q35_ERR_NOMEM, "converting %s to %s failed", t->name, q35_dtype_name(dt));
            }
            rowmajor = out;
        } else {
            rowmajor = (const uint8_t *)t->data + (size_t)r0 * row_bytes;
        }
        if (packed_bytes) {
            q35_tensor part = target, packed;
            part.shape[0] = n;
            part.data = rowmajor;
            part.nbytes = row_bytes * (size_t)n;
            if (q35_tensor_repack(&part, dst + (size_t)(r0 / 16) * group_bytes, &packed) != 0) {
                free(slice);
                return q35_fail(Q35_ERR_UNSUPPORTED, "repacking %s as %s failed", t->name, q35_dtype_name(dt));
            }
        }
        if (t->layout == Q35_LAYOUT_ROWS) drop_source((const uint8_t *)t->data + (size_t)r0 * src_row_bytes, (size_t)n * src_row_bytes);
    }
    free(slice);
    *t = target;
    t->data = dst;
    if (packed_bytes) {
        t->layout = Q35_LAYOUT_R16;
        t->nbytes = packed_bytes;
    }
    return Q35_OK;
}

/* Every block-quantized matrix as loaded (e.g. from GGUF, row-major in the file) repacked into the
 * interleaved layout the fast kernels read; other formats untouched. */
static q35_status repack_all(struct q35_model *m) {
    q35_status st;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        q35_layer_weights *L = &m->layers[i];
        q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                            &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.out, &L->gdn.in_b, &L->gdn.in_a};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
            if (q35_dtype_block(ts[k]->dtype) > 1 && (st = convert(m, ts[k], ts[k]->dtype, ts[k]->dtype))) return st;
    }
    const int tied = m->lm_head.data == m->embed.data;
    if (q35_dtype_block(m->lm_head.dtype) > 1 && (st = convert(m, &m->lm_head, m->lm_head.dtype, m->lm_head.dtype))) return st;
    if (tied) m->embed = m->lm_head;
    else if (q35_dtype_block(m->embed.dtype) > 1 && (st = convert(m, &m->embed, m->embed.dtype, m->embed.dtype))) return st;
    return Q35_OK;
}

q35_status q35_model_convert_weights(struct q35_model *m, const char *weights) {
    q35_dtype layer, small, head;
    if (!weights || !strcmp(weights, "native")) return repack_all(m);
    if (!strcmp(weights, "rows")) return Q35_OK; /* internal (q35 quantize --layout gguf): as stored, nothing repacked */
    if (!strcmp(weights, "bf16")) layer = small = head = Q35_DT_BF16;
    else if (!strcmp(weights, "q8")) layer = small = Q35_DT_Q8_0, head = Q35_DT_COUNT; /* head as stored */
    else if (!strcmp(weights, "q8_0")) layer = small = head = Q35_DT_Q8_0;
    else if (!strcmp(weights, "q4")) layer = Q35_DT_Q4R, small = Q35_DT_Q8_0, head = Q35_DT_Q6_K;
    else if (!strcmp(weights, "q4_0")) layer = Q35_DT_Q4_0, small = Q35_DT_Q8_0, head = Q35_DT_Q6_K; /* GGUF Q4_0 layers, same bytes as q4: for comparisons */
    else return q35_fail(Q35_ERR_ARG, "--weights: expected native, bf16, q8, q8_0, q4 or q4_0, got '%s'", weights);
    const q35_dtype layer_fallback = layer == Q35_DT_Q4R ? Q35_DT_Q4_0 : layer;
    const int tied = m->lm_head.data == m->embed.data;
    q35_status st;
    size_t bytes = 0;
    /* Progress: source bytes of the layer matrices converted so far, of all of them. */
    void (*progress)(size_t, size_t, void *) = m->load_opts ? m->load_opts->progress : NULL;
    size_t todo = 0, done = 0;
    for (int i = 0; progress && i < m->cfg.n_layers; i++) {
        const q35_layer_weights *L = &m->layers[i];
        const q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                                  &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.out, &L->gdn.in_b, &L->gdn.in_a};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) todo += ts[k]->data ? ts[k]->nbytes : 0;
    }
    for (int i = 0; i < m->cfg.n_layers; i++) {
        q35_layer_weights *L = &m->layers[i];
        q35_tensor *big[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                             &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.out, &L->gdn.in_b, &L->gdn.in_a};
        for (size_t k = 0; progress && k < sizeof big / sizeof big[0]; k++) done += big[k]->data ? big[k]->nbytes : 0;
        for (size_t k = 0; k < sizeof big / sizeof big[0] - 2; k++)
            if ((st = convert(m, big[k], layer, layer_fallback))) return st;
        if ((st = convert(m, &L->gdn.in_b, small, Q35_DT_BF16))) return st;
        if ((st = convert(m, &L->gdn.in_a, small, Q35_DT_BF16))) return st;
        if (progress) progress(done, todo, m->load_opts->progress_user);
    }
    if (head != Q35_DT_COUNT && (st = convert(m, &m->lm_head, head, head == Q35_DT_Q6_K ? Q35_DT_Q8_0 : Q35_DT_BF16))) return st;
    if (head == Q35_DT_COUNT) {
        /* keep head and embedding as stored */
    } else if (tied) {
        m->embed = m->lm_head; /* the embedding rows are read through the same (dequantizing) row reader */
    } else if ((st = convert(m, &m->embed, head, Q35_DT_BF16))) {
        return st;
    }
    /* Files no tensor points into any more can go (all of them, unless a matrix kept its format). */
    const q35_tensor *all[16 * Q35_MAX_LAYERS + 2];
    int n_all = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const q35_layer_weights *L = &m->layers[i];
        const q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                                  &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.out, &L->gdn.in_b, &L->gdn.in_a};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
            if (ts[k]->data) all[n_all++] = ts[k];
    }
    all[n_all++] = &m->lm_head;
    if (!tied) all[n_all++] = &m->embed;
    for (int k = 0; k < n_all; k++) bytes += all[k]->nbytes;
    m->weight_bytes = bytes;
    for (int f = 0; f < m->st.n_files; f++) {
        const unsigned char *lo = m->st.maps[f].data, *hi = lo + m->st.maps[f].size;
        int used = 0;
        for (int k = 0; k < n_all && !used; k++) used = (const unsigned char *)all[k]->data >= lo && (const unsigned char *)all[k]->data < hi;
        if (!used) q35_unmap_file(&m->st.maps[f]); /* tensor names stay until the model is freed */
    }
    q35_log(Q35_LOG_INFO, "weights converted to %s: %.1f MB", weights, bytes / 1e6);
    return Q35_OK;
}
