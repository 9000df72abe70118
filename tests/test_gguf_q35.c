/* q35-layout GGUF files (formats/gguf.h "q35 layout"): written from a fixture converted at load
 * (--weights q8 / q4 / ...), they load with every matrix pointing into the mapped file in the
 * kernels' R16 layout (nothing repacked, nothing copied), hold byte for byte the tensors the load-time
 * conversion makes, and give bitwise the same logits; every corrupt variant is refused with a clear
 * error; the container round-trips every q35 tensor type. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err.h"
#include "formats/gguf.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/model_gguf.h"
#include "q35.h"
#include "test.h"

static char work[1024];

/* The layer matrices of m, in a fixed order ([*n] pointers into m). */
static int matrices(q35_model *m, q35_tensor **out) {
    int n = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        q35_layer_weights *L = &m->layers[i];
        q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o,
                            &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.out, &L->gdn.in_b, &L->gdn.in_a};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
            if (ts[k]->data) out[n++] = ts[k];
    }
    out[n++] = &m->lm_head;
    out[n++] = &m->embed;
    return n;
}

/* Logits of a fixed prompt at every position ([T][vocab], malloc'd). */
static float *logits(q35_model *m, int T) {
    float *all = malloc(sizeof(float) * (size_t)T * (size_t)m->cfg.vocab);
    int32_t ids[16];
    for (int t = 0; t < T; t++) ids[t] = (int32_t)((7 * t + 3) % m->cfg.vocab);
    q35_session *s;
    CHECK(q35_session_new(m, T + 1, &s) == Q35_OK, "%s", q35_last_error());
    CHECK(q35_session_eval(s, ids, T, NULL, all) == Q35_OK, "%s", q35_last_error());
    q35_session_free(s);
    return all;
}

/* What q35 quantize --layout q35 does: convert at load, export as bound, write. */
static q35_status write_q35(const char *src, const char *weights, const char *out) {
    q35_model *m;
    q35_load_opts lo = {.weights = weights};
    q35_status st = q35_model_load_ex(src, &lo, &m);
    if (st) return st;
    q35_gguf_export e;
    if (!(st = q35_gguf_export_bound(m, &e))) {
        int tiled = 0;
        for (int i = 0; i < m->cfg.n_layers; i++) tiled |= !m->layers[i].is_full && m->layers[i].gdn.v_tiled;
        q35_gguf_write_opts wo = {NULL, NULL, NULL, 1, tiled};
        st = q35_gguf_write_model(out, &m->cfg, e.v, e.n, &wo);
        q35_gguf_export_free(&e);
    }
    q35_model_free(m);
    return st;
}

/* src converted at load with `weights` vs the q35-layout file written from it, loaded as stored. */
static void check_file(const char *src, const char *weights, const char *tag, int expect_r16) {
    char out[1200];
    snprintf(out, sizeof out, "%s/%s.%s.gguf", work, tag, weights);
    if (write_q35(src, weights, out)) { CHECK(0, "%s %s: %s", src, weights, q35_last_error()); return; }
    q35_model *a, *b;
    q35_load_opts lo = {.weights = weights};
    if (q35_model_load_ex(src, &lo, &a)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_load_opts mmap_opts = {.weights = NULL};
    if (q35_model_load_ex(out, &mmap_opts, &b)) { CHECK(0, "%s: %s", out, q35_last_error()); q35_model_free(a); return; }
    const q35_gguf *g = q35_model_gguf(b);
    CHECK(g && g->q35_version == Q35_GGUF_Q35_VERSION, "%s: not read as a q35-layout file", out);
    q35_tensor *ta[16 * Q35_MAX_LAYERS + 2], *tb[16 * Q35_MAX_LAYERS + 2];
    const int na = matrices(a, ta), nb = matrices(b, tb);
    CHECK(na == nb, "%s: %d vs %d matrices", out, na, nb);
    int r16 = 0, q4r = 0;
    for (int i = 0; g && i < na && i < nb; i++) {
        const q35_tensor *x = ta[i], *y = tb[i];
        CHECK(x->dtype == y->dtype && x->layout == y->layout && x->nbytes == y->nbytes && x->shape[0] == y->shape[0] && x->shape[1] == y->shape[1],
              "%s: matrix %d: %s/%d/%zu at load, %s/%d/%zu in the file", out, i, q35_dtype_name(x->dtype), x->layout, x->nbytes,
              q35_dtype_name(y->dtype), y->layout, y->nbytes);
        if (x->nbytes == y->nbytes) CHECK(memcmp(x->data, y->data, x->nbytes) == 0, "%s: matrix %d: bytes differ from the load-time conversion", out, i);
        const unsigned char *p = y->data, *lo_ = g->map.data, *hi = lo_ + g->map.size;
        CHECK(p >= lo_ && p + y->nbytes <= hi, "%s: matrix %d (%s) is not in the mapped file: repacked or copied at load", out, i, q35_dtype_name(y->dtype));
        CHECK(y->layout != Q35_LAYOUT_R16 || (uintptr_t)p % 64 == 0, "%s: matrix %d misaligned", out, i);
        r16 += y->layout == Q35_LAYOUT_R16;
        q4r += y->dtype == Q35_DT_Q4R;
    }
    CHECK(!expect_r16 || r16 > 0, "%s: no R16 matrix", out);
    CHECK(b->n_owned == 0, "%s: %d buffers allocated at load", out, b->n_owned);
    const int T = 6;
    float *la = logits(a, T), *lb = logits(b, T);
    CHECK(memcmp(la, lb, sizeof(float) * (size_t)T * (size_t)a->cfg.vocab) == 0, "%s: logits differ from the load-time conversion", out);
    printf("# %s: %d matrices (%d R16, %d Q4R) mapped from the file, logits bitwise equal to --weights %s at load\n", out, nb, r16, q4r, weights);
    free(la);
    free(lb);
    q35_model_free(a);
    q35_model_free(b);
}

static void test_from_checkpoint(void) {
    char dir[1100];
    const char *w[] = {"q8", "q4", "q8_0", "q4_0", "bf16"};
    snprintf(dir, sizeof dir, "%s/models/talker", test_data_dir());
    for (int i = 0; i < 5; i++) check_file(dir, w[i], "talker", i < 4);
    snprintf(dir, sizeof dir, "%s/models/hv-gt-hk", test_data_dir()); /* Hv > Hk: V heads in HF order */
    check_file(dir, "q4", "hv-gt-hk", 1);
}

/* From llama.cpp's GGUF (V heads tiled, rows of blocks): the blocks repacked once into the file. */
static void test_from_gguf(void) {
    char src[1100];
    snprintf(src, sizeof src, "%s/gguf/hv-gt-hk.q8_0.gguf", test_data_dir());
    check_file(src, "native", "hv-gt-hk-gguf", 1);
    check_file(src, "q4", "hv-gt-hk-gguf", 1);
}

/* Every q35 tensor type through the writer and the reader: sizes, offsets, bytes. */
static void test_container_types(void) {
    const q35_dtype dts[] = {Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4_K, Q35_DT_Q6_K, Q35_DT_Q4R};
    const int64_t rows = 37, cols = 256;
    void *bufs[2 * 5] = {0};
    q35_tensor ts[2 * 5];
    char names[2 * 5][32];
    q35_gguf_writer *w;
    CHECK(q35_gguf_writer_new(&w) == Q35_OK, "writer");
    /* Without the version key the q35 types are refused. */
    float *x = malloc(sizeof(float) * (size_t)(rows * cols)); /* [rows][cols] */
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)((i * 7919) % 201 - 100) / 37.0f;
    int n = 0;
    for (int k = 0; k < 5; k++) {
        q35_tensor r = {0};
        r.dtype = dts[k];
        r.ndim = 2;
        r.shape[0] = rows;
        r.shape[1] = cols;
        r.nbytes = q35_row_bytes(dts[k], cols) * (size_t)rows;
        unsigned char *rowbuf = aligned_alloc(64, (r.nbytes + 63) & ~(size_t)63);
        for (int64_t i = 0; i < rows; i++) q35_quantize_row(dts[k], x + i * cols, rowbuf + (size_t)i * q35_row_bytes(dts[k], cols), cols);
        r.data = rowbuf;
        const size_t pk = q35_repack_size(&r);
        void *packed = aligned_alloc(64, (pk + 63) & ~(size_t)63);
        CHECK(q35_tensor_repack(&r, packed, &ts[n]) == 0, "repack %s", q35_dtype_name(dts[k]));
        bufs[n] = packed;
        snprintf(names[n], sizeof names[n], "r16.%s", q35_dtype_name(dts[k]));
        n++;
        if (dts[k] == Q35_DT_Q4R) { /* Q4R rows too */
            ts[n] = r;
            bufs[n] = rowbuf;
            snprintf(names[n], sizeof names[n], "rows.q4r");
            n++;
        } else {
            free(rowbuf);
        }
    }
    free(x);
    CHECK(q35_gguf_add_tensor(w, names[0], &ts[0]) == Q35_ERR_ARG, "an R16 tensor accepted without q35.format_version");
    CHECK(q35_gguf_set_u32(w, "q35.format_version", Q35_GGUF_Q35_VERSION) == Q35_OK, "key");
    CHECK(q35_gguf_set_str(w, "q35.layout", "r16") == Q35_OK, "key");
    q35_tensor bad = ts[0];
    bad.nbytes -= 64;
    CHECK(q35_gguf_add_tensor(w, "bad", &bad) == Q35_ERR_ARG, "an R16 tensor of the wrong size accepted");
    for (int i = 0; i < n; i++) CHECK(q35_gguf_add_tensor(w, names[i], &ts[i]) == Q35_OK, "%s: %s", names[i], q35_last_error());
    char path[1100];
    snprintf(path, sizeof path, "%s/types.gguf", work);
    CHECK(q35_gguf_write(w, path) != Q35_OK, "q35 tensors written with alignment 32");
    CHECK(q35_gguf_set_u32(w, "general.alignment", 64) == Q35_OK, "alignment");
    CHECK(q35_gguf_write(w, path) == Q35_OK, "%s", q35_last_error());
    q35_gguf_writer_free(w);
    q35_gguf g;
    if (q35_gguf_open(path, 0, &g)) { CHECK(0, "%s", q35_last_error()); goto done; }
    CHECK(g.q35_version == Q35_GGUF_Q35_VERSION && g.n_tensors == n, "version %u, %d tensors", g.q35_version, g.n_tensors);
    for (int i = 0; i < n; i++) {
        const q35_gguf_tensor *t = q35_gguf_find_tensor(&g, names[i]);
        if (!t) { CHECK(0, "%s missing", names[i]); continue; }
        CHECK(t->t.dtype == ts[i].dtype && t->t.layout == ts[i].layout && t->t.nbytes == ts[i].nbytes && t->t.shape[0] == rows && t->t.shape[1] == cols,
              "%s: %s layout %d %zu bytes", names[i], q35_dtype_name(t->t.dtype), t->t.layout, t->t.nbytes);
        CHECK(t->t.nbytes == ts[i].nbytes && memcmp(t->t.data, ts[i].data, ts[i].nbytes) == 0, "%s: bytes differ", names[i]);
        CHECK((const unsigned char *)t->t.data >= g.map.data && (const unsigned char *)t->t.data < g.map.data + g.map.size, "%s: copied", names[i]);
    }
    q35_gguf_close(&g);
done:
    for (int i = 0; i < n; i++) free(bufs[i]);
}

/* ---------------------------------------------------------------- corrupt variants */

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc(*n);
    if (fread(d, 1, *n, f) != *n) { free(d); d = NULL; }
    fclose(f);
    return d;
}
static void save(const char *path, const unsigned char *d, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(d, 1, n, f);
    fclose(f);
}
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }

/* The model loader refuses path with `code` and an error naming what1 (and what2). */
static void expect(const char *path, const char *what, q35_status code, const char *n1, const char *n2) {
    q35_model *m = NULL;
    q35_status st = q35_model_load(path, &m);
    const char *e = q35_last_error();
    CHECK(st == code && m == NULL, "%s: status %d (expected %d): %s", what, st, code, e);
    CHECK(strstr(e, n1) && (!n2 || strstr(e, n2)), "%s: error '%s' should name '%s'%s%s", what, e, n1, n2 ? " and " : "", n2 ? n2 : "");
    if (m) q35_model_free(m);
}

static void test_corrupt(void) {
    char good[1200], bad[1200];
    snprintf(good, sizeof good, "%s/talker.q4.gguf", work); /* written by test_from_checkpoint */
    snprintf(bad, sizeof bad, "%s/bad.gguf", work);
    size_t n;
    unsigned char *base = slurp(good, &n);
    if (!base) { CHECK(0, "%s missing (run test_from_checkpoint first)", good); return; }
    q35_gguf g;
    if (q35_gguf_open(good, 0, &g)) { CHECK(0, "%s", q35_last_error()); free(base); return; }
    unsigned char *d = malloc(n);
    /* A q35 tensor (R16) and its fields. */
    const q35_gguf_tensor *t = NULL;
    for (int i = 0; i < g.n_tensors && !t; i++)
        if (g.tensors[i].t.layout == Q35_LAYOUT_R16 && g.tensors[i].t.dtype == Q35_DT_Q4_0) t = &g.tensors[i];
    CHECK(t != NULL, "no R16 Q4_0 tensor in %s", good);
    const q35_gguf_kv *ver = q35_gguf_find_kv(&g, "q35.format_version"), *lay = q35_gguf_find_kv(&g, "q35.layout"),
                      *al = q35_gguf_find_kv(&g, "general.alignment");
    CHECK(ver && lay && al, "q35 keys missing");
    if (!t || !ver || !lay || !al) goto done;
    const size_t nl = strlen(t->t.name), type_pos = t->pos + 8 + nl + 4 + 8 * (size_t)t->n_dims, off_pos = type_pos + 4, ne_pos = t->pos + 8 + nl + 4;
    const size_t ver_at = (size_t)(ver->data - g.map.data), lay_at = (size_t)(lay->data - g.map.data), al_at = (size_t)(al->data - g.map.data);

    memcpy(d, base, n); /* the unchanged file loads */
    save(bad, d, n);
    q35_model *m;
    CHECK(q35_model_load(bad, &m) == Q35_OK, "%s", q35_last_error());
    if (m) q35_model_free(m);

    save(bad, base, n - 100); /* truncated in the data section */
    expect(bad, "truncated data", Q35_ERR_FORMAT, "out of range", NULL);
    save(bad, base, t->pos + 10); /* truncated in the tensor infos */
    expect(bad, "truncated infos", Q35_ERR_FORMAT, "truncated", NULL);

    memcpy(d, base, n); /* unknown version */
    put32(d + ver_at, Q35_GGUF_Q35_VERSION + 1);
    save(bad, d, n);
    expect(bad, "a newer version", Q35_ERR_UNSUPPORTED, "q35.format_version", "newer");
    memcpy(d, base, n); /* version 1: the R16 groups of an older q35 (all scales first) */
    put32(d + ver_at, 1);
    save(bad, d, n);
    expect(bad, "version 1", Q35_ERR_UNSUPPORTED, "q35.format_version 1", "q35 quantize");

    memcpy(d, base, n); /* another layout */
    memcpy(d + lay_at, "r32", 3);
    save(bad, d, n);
    expect(bad, "layout r32", Q35_ERR_UNSUPPORTED, "q35.layout", "r16");

    memcpy(d, base, n); /* no layout key (renamed) */
    d[lay_at - 4 - 8 - 1] = 'X'; /* last byte of the key "q35.layout" (before the u32 type and u64 length) */
    save(bad, d, n);
    expect(bad, "layout key missing", Q35_ERR_FORMAT, "q35.layout", NULL);

    memcpy(d, base, n); /* neither key: the q35 types are refused */
    d[lay_at - 4 - 8 - 1] = 'X';
    d[ver_at - 4 - 1] = 'X';
    save(bad, d, n);
    expect(bad, "plain GGUF with q35 types", Q35_ERR_DTYPE, "q35's type", "q35.format_version");

    memcpy(d, base, n); /* R16 Q4_0 declared R16 Q8_0: more bytes than it has */
    put32(d + type_pos, Q35_GGUF_T_R16_Q8_0);
    save(bad, d, n);
    expect(bad, "wrong size for a q35 type", Q35_ERR_FORMAT, t->t.name, NULL);

    memcpy(d, base, n); /* 16 more rows: one more group */
    put64(d + ne_pos + 8, (uint64_t)t->ne[1] + 16);
    save(bad, d, n);
    expect(bad, "rows added", Q35_ERR_FORMAT, t->t.name, NULL);

    memcpy(d, base, n); /* columns not whole blocks */
    put64(d + ne_pos, (uint64_t)t->ne[0] + 1);
    save(bad, d, n);
    expect(bad, "columns", Q35_ERR_FORMAT, t->t.name, "cannot be stored");

    memcpy(d, base, n); /* unknown q35 type */
    put32(d + type_pos, 0x35ff);
    save(bad, d, n);
    expect(bad, "unknown q35 type", Q35_ERR_DTYPE, t->t.name, "unknown type");

    memcpy(d, base, n); /* misaligned offset */
    {
        uint64_t off = 0;
        for (int i = 0; i < 8; i++) off |= (uint64_t)base[off_pos + i] << (8 * i);
        put64(d + off_pos, off + 32);
    }
    save(bad, d, n);
    expect(bad, "misaligned offset", Q35_ERR_FORMAT, t->t.name, "alignment");

    memcpy(d, base, n); /* alignment 32: too small for q35 tensors */
    put32(d + al_at, 32);
    save(bad, d, n);
    expect(bad, "alignment 32", Q35_ERR_FORMAT, "general.alignment", "64");

    memcpy(d, base, n); /* version key of the wrong type */
    put32(d + ver_at - 4, Q35_GGUF_I32);
    save(bad, d, n);
    expect(bad, "version type", Q35_ERR_FORMAT, "q35.format_version", "u32");
done:
    q35_gguf_close(&g);
    free(d);
    free(base);
}

int main(void) {
    snprintf(work, sizeof work, "%s/gguf-q35", test_work_dir());
    mkdir(test_work_dir(), 0755);
    mkdir(work, 0755);
    RUN(test_from_checkpoint);
    RUN(test_from_gguf);
    RUN(test_container_types);
    RUN(test_corrupt);
    TEST_EXIT();
}
