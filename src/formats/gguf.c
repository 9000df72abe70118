/* GGUF reader and writer (see gguf.h). Layout (all little-endian):
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv x { string key; u32 type; value }          string = u64 len + bytes; array = u32 type, u64 n, n values
 *   n_tensors x { string name; u32 n_dims; u64 ne[n_dims]; u32 ggml_type; u64 offset }
 *   padding to the alignment, then the data section (each tensor at a multiple of the alignment). */
#include "formats/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "kernels/quant.h"

/* ---------------------------------------------------------------- types */

static const size_t scalar_size[Q35_GGUF_TYPE_COUNT] = {
    [Q35_GGUF_U8] = 1, [Q35_GGUF_I8] = 1, [Q35_GGUF_U16] = 2, [Q35_GGUF_I16] = 2, [Q35_GGUF_U32] = 4,
    [Q35_GGUF_I32] = 4, [Q35_GGUF_F32] = 4, [Q35_GGUF_BOOL] = 1, [Q35_GGUF_U64] = 8, [Q35_GGUF_I64] = 8,
    [Q35_GGUF_F64] = 8,
};

const char *q35_gguf_type_name(uint32_t type) {
    static const char *names[Q35_GGUF_TYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};
    return type < Q35_GGUF_TYPE_COUNT ? names[type] : "?";
}

static int is_int_type(uint32_t t) {
    return t == Q35_GGUF_U8 || t == Q35_GGUF_I8 || t == Q35_GGUF_U16 || t == Q35_GGUF_I16 || t == Q35_GGUF_U32 ||
           t == Q35_GGUF_I32 || t == Q35_GGUF_U64 || t == Q35_GGUF_I64;
}

/* ggml_type names, by number (ggml.c type_traits); NULL where the number is unused. */
static const char *const ggml_names[] = {
    "f32", "f16", "q4_0", "q4_1", NULL, NULL, "q5_0", "q5_1", "q8_0", "q8_1", "q2_k", "q3_k", "q4_k", "q5_k",
    "q6_k", "q8_k", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8", "i16",
    "i32", "i64", "f64", "iq1_m", "bf16", NULL, NULL, NULL, "tq1_0", "tq2_0", NULL, NULL, NULL, "mxfp4",
};

/* q35's own tensor types (gguf.h, "q35 layout"). */
static const struct {
    uint32_t type;
    q35_dtype dt;
    int layout;
    const char *name;
} q35_types[] = {
    {Q35_GGUF_T_Q4R, Q35_DT_Q4R, Q35_LAYOUT_ROWS, "q35_q4r"},
    {Q35_GGUF_T_R16_Q8_0, Q35_DT_Q8_0, Q35_LAYOUT_R16, "q35_r16_q8_0"},
    {Q35_GGUF_T_R16_Q4_0, Q35_DT_Q4_0, Q35_LAYOUT_R16, "q35_r16_q4_0"},
    {Q35_GGUF_T_R16_Q4_K, Q35_DT_Q4_K, Q35_LAYOUT_R16, "q35_r16_q4_k"},
    {Q35_GGUF_T_R16_Q6_K, Q35_DT_Q6_K, Q35_LAYOUT_R16, "q35_r16_q6_k"},
    {Q35_GGUF_T_R16_Q4R, Q35_DT_Q4R, Q35_LAYOUT_R16, "q35_r16_q4r"},
};
#define N_Q35_TYPES (int)(sizeof q35_types / sizeof q35_types[0])

static int q35_type_index(uint32_t t) {
    for (int i = 0; i < N_Q35_TYPES; i++)
        if (q35_types[i].type == t) return i;
    return -1;
}

const char *q35_ggml_type_name(uint32_t t) {
    const int q = q35_type_index(t);
    if (q >= 0) return q35_types[q].name;
    return t < sizeof ggml_names / sizeof ggml_names[0] && ggml_names[t] ? ggml_names[t] : "?";
}

size_t q35_gguf_q35_type_bytes(uint32_t type, int64_t rows, int64_t cols, q35_dtype *dt, int *layout) {
    const int q = q35_type_index(type);
    /* cols bounded first: the per-row byte counts below are computed in int64 */
    if (q < 0 || rows < 1 || cols < 1 || cols > ((int64_t)1 << 40) || !q35_quant_supports(q35_types[q].dt, cols)) return 0;
    *dt = q35_types[q].dt;
    *layout = q35_types[q].layout;
    const unsigned __int128 n = q35_types[q].layout == Q35_LAYOUT_R16
                                    ? (unsigned __int128)q35_r16_group_bytes(*dt, cols) * (unsigned __int128)((rows + 15) / 16)
                                    : (unsigned __int128)q35_row_bytes(*dt, cols) * (unsigned __int128)rows;
    return n > ((unsigned __int128)1 << 62) ? 0 : (size_t)n;
}

int64_t q35_gguf_type_of(const q35_tensor *t, int *q35_only) {
    *q35_only = 0;
    if (t->layout == Q35_LAYOUT_ROWS && q35_ggml_from_dtype(t->dtype) >= 0) return q35_ggml_from_dtype(t->dtype);
    for (int i = 0; i < N_Q35_TYPES; i++)
        if (q35_types[i].dt == t->dtype && q35_types[i].layout == t->layout) {
            *q35_only = 1;
            return q35_types[i].type;
        }
    return -1;
}

int q35_dtype_from_ggml(uint32_t t) {
    switch (t) {
    case Q35_GGML_F32: return Q35_DT_F32;
    case Q35_GGML_F16: return Q35_DT_F16;
    case Q35_GGML_BF16: return Q35_DT_BF16;
    case Q35_GGML_Q8_0: return Q35_DT_Q8_0;
    case Q35_GGML_Q4_0: return Q35_DT_Q4_0;
    case Q35_GGML_Q4_K: return Q35_DT_Q4_K;
    case Q35_GGML_Q6_K: return Q35_DT_Q6_K;
    case Q35_GGML_I8: return Q35_DT_I8;
    case Q35_GGML_I16: return Q35_DT_I16;
    case Q35_GGML_I32: return Q35_DT_I32;
    case Q35_GGML_I64: return Q35_DT_I64;
    case Q35_GGML_F64: return Q35_DT_F64;
    default: return -1;
    }
}

int q35_ggml_from_dtype(q35_dtype t) {
    for (uint32_t g = 0; g < 64; g++)
        if (q35_dtype_from_ggml(g) == (int)t) return (int)g;
    return -1;
}

static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* ---------------------------------------------------------------- parser */

typedef struct {
    const unsigned char *d; /* [size] */
    size_t size, pos;
    const char *path;
} cursor;

static q35_status need(cursor *c, size_t n, const char *what) {
    if (n > c->size - c->pos)
        return q35_fail(Q35_ERR_FORMAT, "%s: truncated: %s needs %zu bytes at offset %zu, the file has %zu", c->path, what, n, c->pos,
                        c->size);
    return Q35_OK;
}
static q35_status rd_u32(cursor *c, uint32_t *v, const char *what) {
    q35_status st = need(c, 4, what);
    if (st) return st;
    *v = le32(c->d + c->pos);
    c->pos += 4;
    return Q35_OK;
}
static q35_status rd_u64(cursor *c, uint64_t *v, const char *what) {
    q35_status st = need(c, 8, what);
    if (st) return st;
    *v = le64(c->d + c->pos);
    c->pos += 8;
    return Q35_OK;
}
/* A string of at most max bytes; *s points into the file. */
static q35_status rd_str(cursor *c, const unsigned char **s, uint64_t *len, uint64_t max, const char *what) {
    size_t at = c->pos;
    q35_status st = rd_u64(c, len, what);
    if (st) return st;
    if (*len > max)
        return q35_fail(Q35_ERR_FORMAT, "%s: %s at offset %zu has length %llu, more than the limit %llu", c->path, what, at,
                        (unsigned long long)*len, (unsigned long long)max);
    if (*len > c->size - c->pos)
        return q35_fail(Q35_ERR_FORMAT, "%s: truncated: %s at offset %zu has length %llu, past the end of the file (%zu bytes)", c->path,
                        what, at, (unsigned long long)*len, c->size);
    *s = c->d + c->pos;
    c->pos += (size_t)*len;
    return Q35_OK;
}

/* A key or tensor name: non-empty, bounded, no NUL byte. */
static q35_status rd_name(cursor *c, const unsigned char **s, uint64_t *len, const char *what) {
    size_t at = c->pos;
    q35_status st = rd_str(c, s, len, Q35_GGUF_MAX_KEY, what);
    if (st) return st;
    if (*len == 0) return q35_fail(Q35_ERR_FORMAT, "%s: %s at offset %zu is empty", c->path, what, at);
    if (memchr(*s, 0, (size_t)*len)) return q35_fail(Q35_ERR_FORMAT, "%s: %s at offset %zu contains a NUL byte", c->path, what, at);
    return Q35_OK;
}

/* Skip one value of type t (not an array inside an array). */
static q35_status skip_value(cursor *c, uint32_t t, const char *key, int in_array) {
    if (t == Q35_GGUF_STRING) {
        const unsigned char *s;
        uint64_t len;
        char what[160];
        snprintf(what, sizeof what, "the string value of '%.100s'", key);
        return rd_str(c, &s, &len, Q35_GGUF_MAX_STRING, what);
    }
    if (t == Q35_GGUF_ARRAY) {
        if (in_array) return q35_fail(Q35_ERR_FORMAT, "%s: key '%s': arrays of arrays are not supported", c->path, key);
        uint32_t et;
        uint64_t n;
        q35_status st;
        if ((st = rd_u32(c, &et, "an array element type"))) return st;
        if ((st = rd_u64(c, &n, "an array length"))) return st;
        if (et >= Q35_GGUF_TYPE_COUNT) return q35_fail(Q35_ERR_FORMAT, "%s: key '%s': unknown array element type %u", c->path, key, et);
        if (et == Q35_GGUF_ARRAY) return q35_fail(Q35_ERR_FORMAT, "%s: key '%s': arrays of arrays are not supported", c->path, key);
        size_t min = et == Q35_GGUF_STRING ? 8 : scalar_size[et];
        if (n > (c->size - c->pos) / min)
            return q35_fail(Q35_ERR_FORMAT, "%s: key '%s': array of %llu %s elements does not fit in the %zu bytes left in the file", c->path,
                            key, (unsigned long long)n, q35_gguf_type_name(et), c->size - c->pos);
        if (et != Q35_GGUF_STRING) {
            c->pos += (size_t)n * min;
            return Q35_OK;
        }
        for (uint64_t i = 0; i < n; i++)
            if ((st = skip_value(c, et, key, 1))) return st;
        return Q35_OK;
    }
    if (t >= Q35_GGUF_TYPE_COUNT) return q35_fail(Q35_ERR_FORMAT, "%s: key '%s': unknown value type %u", c->path, key, t);
    char what[160];
    snprintf(what, sizeof what, "the value of '%.100s'", key);
    q35_status st = need(c, scalar_size[t], what);
    if (!st) c->pos += scalar_size[t];
    return st;
}

static int cmp_tensor_name(const q35_gguf *g, int a, int b) { return strcmp(g->tensors[a].t.name, g->tensors[b].t.name); }
static int cmp_tensor_offset(const q35_gguf *g, int a, int b) {
    const q35_gguf_tensor *x = &g->tensors[a], *y = &g->tensors[b];
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}
static int cmp_kv_key(const q35_gguf *g, int a, int b) { return strcmp(g->kv[a].key, g->kv[b].key); }

/* Indices 0..n-1 sorted by cmp (a stable merge sort; qsort has no context argument in C11). */
static int *sorted_index(const q35_gguf *g, int n, int (*cmp)(const q35_gguf *, int, int)) {
    int *ix = malloc((size_t)(n > 0 ? n : 1) * sizeof *ix), *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    if (!ix || !tmp) {
        free(ix);
        free(tmp);
        return NULL;
    }
    for (int i = 0; i < n; i++) ix[i] = i;
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(g, ix[i], ix[j]) <= 0 ? ix[i++] : ix[j++];
            while (i < mid) tmp[k++] = ix[i++];
            while (j < hi) tmp[k++] = ix[j++];
        }
        memcpy(ix, tmp, (size_t)n * sizeof *ix);
    }
    free(tmp);
    return ix;
}

q35_status q35_gguf_parse(const char *path, q35_mapping map, q35_gguf *g) {
    memset(g, 0, sizeof *g);
    g->map = map;
    g->path = strdup(path);
    if (!g->path) {
        q35_unmap_file(&g->map);
        return q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    cursor c = {map.data, map.size, 0, path};
    q35_status st;
    const unsigned char **key_ptr = NULL, **name_ptr = NULL;
    size_t *key_len = NULL, *name_len = NULL;
    int *by_offset = NULL, *by_key = NULL;

    if (c.size < 4 || memcmp(c.d, "GGUF", 4) != 0) {
        if (c.size < 4) st = q35_fail(Q35_ERR_FORMAT, "%s: truncated: %zu bytes, not a GGUF file", path, c.size);
        else st = q35_fail(Q35_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x, expected \"GGUF\")", path, c.d[0], c.d[1], c.d[2], c.d[3]);
        goto fail;
    }
    c.pos = 4;
    if ((st = rd_u32(&c, &g->version, "the version"))) goto fail;
    if (g->version != 2 && g->version != 3) {
        if (g->version >= (1u << 16) && (g->version >> 24) >= 1 && (g->version >> 24) <= 3)
            st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: big-endian GGUF is not supported", path);
        else st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (expected 2 or 3)", path, g->version);
        goto fail;
    }
    uint64_t n_tensors, n_kv;
    if ((st = rd_u64(&c, &n_tensors, "the tensor count"))) goto fail;
    if ((st = rd_u64(&c, &n_kv, "the metadata count"))) goto fail;
    /* Every entry takes at least 13 (metadata) or 29 (tensor info) bytes: bound the counts by the file first. */
    if (n_kv > Q35_GGUF_MAX_KV || n_tensors > Q35_GGUF_MAX_TENSORS) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: %llu metadata entries and %llu tensors: absurd counts (limits %u and %u)", path,
                      (unsigned long long)n_kv, (unsigned long long)n_tensors, Q35_GGUF_MAX_KV, Q35_GGUF_MAX_TENSORS);
        goto fail;
    }
    if (n_kv * 13 + n_tensors * 29 > c.size - c.pos) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: truncated: %llu metadata entries and %llu tensor infos cannot fit in the %zu bytes left", path,
                      (unsigned long long)n_kv, (unsigned long long)n_tensors, c.size - c.pos);
        goto fail;
    }
    g->n_kv = (int)n_kv;
    g->n_tensors = (int)n_tensors;
    size_t nk = n_kv ? (size_t)n_kv : 1, nt = n_tensors ? (size_t)n_tensors : 1;
    g->kv = calloc(nk, sizeof *g->kv);
    g->tensors = calloc(nt, sizeof *g->tensors);
    key_ptr = calloc(nk, sizeof *key_ptr);
    key_len = calloc(nk, sizeof *key_len);
    name_ptr = calloc(nt, sizeof *name_ptr);
    name_len = calloc(nt, sizeof *name_len);
    g->owned = calloc(nt, sizeof *g->owned);
    if (!g->kv || !g->tensors || !key_ptr || !key_len || !name_ptr || !name_len || !g->owned) {
        st = q35_fail(Q35_ERR_NOMEM, "%s: out of memory for %llu tensors", path, (unsigned long long)n_tensors);
        goto fail;
    }

    /* Metadata. */
    size_t blob = 0;
    for (int i = 0; i < g->n_kv; i++) {
        q35_gguf_kv *kv = &g->kv[i];
        kv->pos = c.pos;
        uint64_t len;
        char what[64];
        snprintf(what, sizeof what, "metadata key %d", i);
        if ((st = rd_name(&c, &key_ptr[i], &len, what))) goto fail;
        key_len[i] = (size_t)len;
        blob += key_len[i] + 1;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(key_len[i] < 200 ? key_len[i] : 200), (const char *)key_ptr[i]);
        if ((st = rd_u32(&c, &kv->type, "a metadata value type"))) goto fail;
        if (kv->type >= Q35_GGUF_TYPE_COUNT) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: key '%s': unknown value type %u", path, key, kv->type);
            goto fail;
        }
        size_t start = c.pos;
        if ((st = skip_value(&c, kv->type, key, 0))) goto fail;
        kv->nbytes = c.pos - start;
        if (kv->type == Q35_GGUF_STRING) {
            kv->n = le64(map.data + start);
            kv->data = map.data + start + 8;
        } else if (kv->type == Q35_GGUF_ARRAY) {
            kv->arr_type = le32(map.data + start);
            kv->n = le64(map.data + start + 4);
            kv->data = map.data + start + 12;
        } else {
            kv->n = 1;
            kv->data = map.data + start;
        }
    }

    /* q35 layout (gguf.h): q35.format_version and q35.layout, read before any tensor type. */
    int has_layout = 0;
    for (int i = 0; i < g->n_kv; i++) {
        const q35_gguf_kv *kv = &g->kv[i];
        if (key_len[i] == 18 && memcmp(key_ptr[i], "q35.format_version", 18) == 0) {
            if (kv->type != Q35_GGUF_U32) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: key 'q35.format_version' must be a u32", path);
                goto fail;
            }
            g->q35_version = le32(kv->data);
            if (g->q35_version != Q35_GGUF_Q35_VERSION) {
                st = q35_fail(Q35_ERR_UNSUPPORTED,
                              g->q35_version < Q35_GGUF_Q35_VERSION
                                  ? "%s: q35.format_version %u is not supported (this build reads version %d; an older q35 wrote it: make it again with q35 quantize)"
                                  : "%s: q35.format_version %u is not supported (this build reads version %d; was it written by a newer q35?)",
                              path, g->q35_version, Q35_GGUF_Q35_VERSION);
                goto fail;
            }
        } else if (key_len[i] == 10 && memcmp(key_ptr[i], "q35.layout", 10) == 0) {
            if (kv->type != Q35_GGUF_STRING || kv->n != 3 || memcmp(kv->data, "r16", 3) != 0) {
                st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: key 'q35.layout' must be the string \"r16\" (the only layout this build reads)", path);
                goto fail;
            }
            has_layout = 1;
        }
    }
    if ((g->q35_version != 0) != has_layout) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: a q35-layout file needs both 'q35.format_version' and 'q35.layout', this one has only '%s'", path,
                      has_layout ? "q35.layout" : "q35.format_version");
        goto fail;
    }
    int has_q35_types = 0;

    /* Tensor infos. */
    for (int i = 0; i < g->n_tensors; i++) {
        q35_gguf_tensor *t = &g->tensors[i];
        t->pos = c.pos;
        uint64_t len;
        char what[64];
        snprintf(what, sizeof what, "the name of tensor %d", i);
        if ((st = rd_name(&c, &name_ptr[i], &len, what))) goto fail;
        name_len[i] = (size_t)len;
        blob += name_len[i] + 1;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(name_len[i] < 200 ? name_len[i] : 200), (const char *)name_ptr[i]);
        uint32_t nd;
        if ((st = rd_u32(&c, &nd, "a tensor's dimension count"))) goto fail;
        if (nd < 1 || nd > Q35_GGUF_MAX_DIMS) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': %u dimensions, expected 1 to %d", path, name, nd, Q35_GGUF_MAX_DIMS);
            goto fail;
        }
        t->n_dims = (int)nd;
        unsigned __int128 numel = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ne;
            if ((st = rd_u64(&c, &ne, "a tensor dimension"))) goto fail;
            if (ne == 0 || ne > ((uint64_t)1 << 60)) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': dimension %u is %llu, expected 1 to 2^60", path, name, d, (unsigned long long)ne);
                goto fail;
            }
            t->ne[d] = (int64_t)ne;
            numel *= ne;
            if (numel > ((unsigned __int128)1 << 60)) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': more than 2^60 elements", path, name);
                goto fail;
            }
        }
        if ((st = rd_u32(&c, &t->ggml_type, "a tensor type"))) goto fail;
        if ((st = rd_u64(&c, &t->offset, "a tensor offset"))) goto fail;
        if (q35_type_index(t->ggml_type) >= 0) { /* q35's own type: 2-D, size from type, shape and layout */
            if (!g->q35_version) {
                st = q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s' has q35's type %s (%u), but the file has no 'q35.format_version': not a q35-layout file",
                              path, name, q35_ggml_type_name(t->ggml_type), t->ggml_type);
                goto fail;
            }
            if (nd != 2) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s' of type %s has %u dimensions, expected 2", path, name, q35_ggml_type_name(t->ggml_type), nd);
                goto fail;
            }
            q35_dtype qdt;
            int layout;
            const size_t nb = q35_gguf_q35_type_bytes(t->ggml_type, t->ne[1], t->ne[0], &qdt, &layout);
            if (!nb) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': rows of %lld elements cannot be stored as %s", path, name, (long long)t->ne[0],
                              q35_ggml_type_name(t->ggml_type));
                goto fail;
            }
            t->t.dtype = qdt;
            t->t.layout = layout;
            t->t.nbytes = nb;
            t->t.ndim = 2;
            t->t.shape[0] = t->ne[1];
            t->t.shape[1] = t->ne[0];
            has_q35_types = 1;
            continue;
        }
        int dt = q35_dtype_from_ggml(t->ggml_type);
        if (dt < 0) {
            if (strcmp(q35_ggml_type_name(t->ggml_type), "?") != 0)
                st = q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s' has type %s (%u), which q35 does not read (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)",
                              path, name, q35_ggml_type_name(t->ggml_type), t->ggml_type);
            else st = q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s' has unknown type %u", path, name, t->ggml_type);
            goto fail;
        }
        t->t.dtype = (q35_dtype)dt;
        const int blk = q35_dtype_block(t->t.dtype);
        if (t->ne[0] % blk) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': rows of %lld elements are not whole %s blocks of %d", path, name,
                          (long long)t->ne[0], q35_dtype_name(t->t.dtype), blk);
            goto fail;
        }
        unsigned __int128 nbytes = numel / (unsigned)blk * q35_dtype_block_bytes(t->t.dtype);
        if (nbytes > ((unsigned __int128)1 << 62)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s' is too large", path, name);
            goto fail;
        }
        t->t.nbytes = (size_t)nbytes;
        t->t.ndim = t->n_dims;
        for (int d = 0; d < t->n_dims; d++) t->t.shape[d] = t->ne[t->n_dims - 1 - d];
    }

    /* Alignment and the data section. */
    g->alignment = Q35_GGUF_DEFAULT_ALIGN;
    for (int i = 0; i < g->n_kv; i++) {
        if (key_len[i] != 17 || memcmp(key_ptr[i], "general.alignment", 17) != 0) continue;
        const q35_gguf_kv *kv = &g->kv[i];
        uint64_t a = kv->type == Q35_GGUF_U32 ? le32(kv->data) : 0;
        if (kv->type != Q35_GGUF_U32 || a == 0 || (a & (a - 1)) || a > Q35_GGUF_MAX_ALIGN) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: key 'general.alignment' must be a u32 power of two up to %u", path, Q35_GGUF_MAX_ALIGN);
            goto fail;
        }
        g->alignment = (size_t)a;
    }
    if (has_q35_types && g->alignment % Q35_GGUF_Q35_ALIGN) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: q35-layout tensors need general.alignment a multiple of %d, the file has %zu", path, Q35_GGUF_Q35_ALIGN,
                      g->alignment);
        goto fail;
    }
    size_t data_start = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
    if (data_start > c.size) {
        if (g->n_tensors > 0) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: truncated: the data section would start at offset %zu, the file has %zu bytes", path, data_start, c.size);
            goto fail;
        }
        data_start = c.size;
    }
    g->data_start = data_start;
    const size_t data_size = c.size - data_start;

    /* Names and keys into one blob. */
    g->strings = malloc(blob ? blob : 1);
    if (!g->strings) {
        st = q35_fail(Q35_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    char *p = g->strings;
    for (int i = 0; i < g->n_kv; i++) {
        memcpy(p, key_ptr[i], key_len[i]);
        p[key_len[i]] = 0;
        g->kv[i].key = p;
        p += key_len[i] + 1;
    }
    for (int i = 0; i < g->n_tensors; i++) {
        memcpy(p, name_ptr[i], name_len[i]);
        p[name_len[i]] = 0;
        g->tensors[i].t.name = p;
        p += name_len[i] + 1;
    }

    /* Offsets: aligned, inside the data section, no two tensors sharing bytes. */
    for (int i = 0; i < g->n_tensors; i++) {
        q35_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %zu", path, t->t.name,
                          (unsigned long long)t->offset, g->alignment);
            goto fail;
        }
        if (t->offset > data_size || t->t.nbytes > data_size - t->offset) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': bytes [%llu, %llu) of the data section are out of range (it has %zu bytes)", path,
                          t->t.name, (unsigned long long)t->offset, (unsigned long long)t->offset + (unsigned long long)t->t.nbytes, data_size);
            goto fail;
        }
        t->t.data = map.data + data_start + t->offset;
    }
    by_offset = sorted_index(g, g->n_tensors, cmp_tensor_offset);
    g->by_name = sorted_index(g, g->n_tensors, cmp_tensor_name);
    by_key = sorted_index(g, g->n_kv, cmp_kv_key);
    if (!by_offset || !g->by_name || !by_key) {
        st = q35_fail(Q35_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (int i = 1; i < g->n_tensors; i++) {
        const q35_gguf_tensor *a = &g->tensors[by_offset[i - 1]], *b = &g->tensors[by_offset[i]];
        if (b->offset < a->offset + a->t.nbytes) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", path, a->t.name, b->t.name);
            goto fail;
        }
    }
    for (int i = 1; i < g->n_tensors; i++) {
        const char *a = g->tensors[g->by_name[i - 1]].t.name, *b = g->tensors[g->by_name[i]].t.name;
        if (strcmp(a, b) == 0) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s' appears twice", path, a);
            goto fail;
        }
    }
    for (int i = 1; i < g->n_kv; i++) {
        const char *a = g->kv[by_key[i - 1]].key, *b = g->kv[by_key[i]].key;
        if (strcmp(a, b) == 0) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' appears twice", path, a);
            goto fail;
        }
    }
    /* Data the kernels read as whole elements must be aligned in memory (a file may declare an
     * alignment below the element size): copy those few. */
    for (int i = 0; i < g->n_tensors; i++) {
        q35_tensor *t = &g->tensors[i].t;
        size_t need_align = t->layout == Q35_LAYOUT_R16 ? Q35_GGUF_Q35_ALIGN : q35_dtype_size(t->dtype) ? q35_dtype_size(t->dtype) : 4;
        if (((uintptr_t)t->data % need_align) == 0) continue;
        void *copy = aligned_alloc(64, (t->nbytes + 63) & ~(size_t)63);
        if (!copy) {
            st = q35_fail(Q35_ERR_NOMEM, "%s: out of memory copying tensor '%s'", path, t->name);
            goto fail;
        }
        memcpy(copy, t->data, t->nbytes);
        g->owned[g->n_owned++] = copy;
        t->data = copy;
    }
    free(key_ptr);
    free(key_len);
    free(name_ptr);
    free(name_len);
    free(by_offset);
    free(by_key);
    return Q35_OK;
fail:
    free(key_ptr);
    free(key_len);
    free(name_ptr);
    free(name_len);
    free(by_offset);
    free(by_key);
    q35_gguf_close(g);
    return st;
}

q35_status q35_gguf_open(const char *path, int load, q35_gguf *g) {
    memset(g, 0, sizeof *g);
    q35_mapping map;
    q35_status st = load ? q35_load_file(path, &map) : q35_map_file(path, &map);
    if (st) return st;
    return q35_gguf_parse(path, map, g);
}

void q35_gguf_close(q35_gguf *g) {
    q35_unmap_file(&g->map);
    for (int i = 0; i < g->n_owned; i++) free(g->owned[i]);
    free(g->owned);
    free(g->path);
    free(g->kv);
    free(g->tensors);
    free(g->by_name);
    free(g->strings);
    memset(g, 0, sizeof *g);
}

const q35_gguf_kv *q35_gguf_find_kv(const q35_gguf *g, const char *key) {
    for (int i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const q35_gguf_tensor *q35_gguf_find_tensor(const q35_gguf *g, const char *name) {
    int lo = 0, hi = g->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const q35_gguf_tensor *t = &g->tensors[g->by_name[mid]];
        int c = strcmp(t->t.name, name);
        if (c == 0) return t;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* ---------------------------------------------------------------- typed metadata */

static int64_t int_at(uint32_t type, const unsigned char *p, int *neg_u64) {
    *neg_u64 = 0;
    switch (type) {
    case Q35_GGUF_U8: return p[0];
    case Q35_GGUF_BOOL: return p[0] != 0;
    case Q35_GGUF_I8: return (int8_t)p[0];
    case Q35_GGUF_U16: return (uint16_t)(p[0] | p[1] << 8);
    case Q35_GGUF_I16: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    case Q35_GGUF_U32: return le32(p);
    case Q35_GGUF_I32: return (int32_t)le32(p);
    case Q35_GGUF_I64: return (int64_t)le64(p);
    case Q35_GGUF_U64: {
        uint64_t v = le64(p);
        if (v > (uint64_t)INT64_MAX) *neg_u64 = 1;
        return (int64_t)(v & (uint64_t)INT64_MAX);
    }
    default: return 0;
    }
}

int64_t q35_gguf_arr_int(const q35_gguf_kv *kv, uint64_t i) {
    int big;
    if (kv->type != Q35_GGUF_ARRAY || kv->arr_type >= Q35_GGUF_TYPE_COUNT || !scalar_size[kv->arr_type] || i >= kv->n) return 0;
    return int_at(kv->arr_type, kv->data + i * scalar_size[kv->arr_type], &big);
}

int q35_gguf_arr_next_str(const q35_gguf_kv *kv, size_t *at, const char **s, size_t *len) {
    /* *at is a byte offset into the payload; the parser checked every length against the file. */
    if (kv->type != Q35_GGUF_ARRAY || kv->arr_type != Q35_GGUF_STRING || *at + 20 > kv->nbytes) return 0;
    uint64_t n = le64(kv->data + *at);
    *s = (const char *)kv->data + *at + 8;
    *len = (size_t)n;
    *at += 8 + (size_t)n;
    return 1;
}

static q35_status lookup(const q35_gguf *g, const char *key, int required, const q35_gguf_kv **kv) {
    *kv = q35_gguf_find_kv(g, key);
    if (!*kv && required) return q35_fail(Q35_ERR_MISSING, "%s: missing metadata key '%s'", g->path, key);
    return Q35_OK;
}

q35_status q35_gguf_get_int(const q35_gguf *g, const char *key, int required, int64_t lo, int64_t hi, int64_t *out) {
    const q35_gguf_kv *kv;
    q35_status st = lookup(g, key, required, &kv);
    if (st || !kv) return st;
    if (!is_int_type(kv->type))
        return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' is a %s, expected an integer", g->path, key, q35_gguf_type_name(kv->type));
    int big;
    int64_t v = int_at(kv->type, kv->data, &big);
    if (big || v < lo || v > hi)
        return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' = %s%lld is out of range [%lld, %lld]", g->path, key, big ? "2^63+" : "",
                        (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return Q35_OK;
}

q35_status q35_gguf_get_float(const q35_gguf *g, const char *key, int required, double *out) {
    const q35_gguf_kv *kv;
    q35_status st = lookup(g, key, required, &kv);
    if (st || !kv) return st;
    if (kv->type == Q35_GGUF_F32) {
        uint32_t u = le32(kv->data);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
    } else if (kv->type == Q35_GGUF_F64) {
        uint64_t u = le64(kv->data);
        memcpy(out, &u, 8);
    } else {
        return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' is a %s, expected f32", g->path, key, q35_gguf_type_name(kv->type));
    }
    return Q35_OK;
}

q35_status q35_gguf_get_bool(const q35_gguf *g, const char *key, int required, int *out) {
    const q35_gguf_kv *kv;
    q35_status st = lookup(g, key, required, &kv);
    if (st || !kv) return st;
    if (kv->type != Q35_GGUF_BOOL)
        return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' is a %s, expected bool", g->path, key, q35_gguf_type_name(kv->type));
    *out = kv->data[0] != 0;
    return Q35_OK;
}

q35_status q35_gguf_get_str(const q35_gguf *g, const char *key, int required, const char **s, size_t *len) {
    const q35_gguf_kv *kv;
    q35_status st = lookup(g, key, required, &kv);
    if (st || !kv) return st;
    if (kv->type != Q35_GGUF_STRING)
        return q35_fail(Q35_ERR_FORMAT, "%s: metadata key '%s' is a %s, expected a string", g->path, key, q35_gguf_type_name(kv->type));
    *s = (const char *)kv->data;
    *len = (size_t)kv->n;
    return Q35_OK;
}

/* ---------------------------------------------------------------- writer */

typedef struct {
    const char *name;
    q35_tensor t;
} w_tensor;

struct q35_gguf_writer {
    unsigned char *kv;   /* [kv_len] serialized metadata entries */
    size_t kv_len, kv_cap;
    char **keys;         /* [n_kv] copies, for duplicate checks */
    int n_kv, keys_cap;
    w_tensor *tensors;   /* [n_tensors] */
    int n_tensors, tensors_cap;
    size_t alignment;
    int q35;             /* q35.format_version was set: q35's own tensor types allowed */
};

q35_status q35_gguf_writer_new(q35_gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    (*out)->alignment = Q35_GGUF_DEFAULT_ALIGN;
    return Q35_OK;
}

void q35_gguf_writer_free(q35_gguf_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    free(w->kv);
    free(w->tensors);
    free(w);
}

static q35_status put(q35_gguf_writer *w, const void *p, size_t n) {
    if (n > w->kv_cap - w->kv_len) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap - w->kv_len < n) {
            if (cap > SIZE_MAX / 2) return q35_fail(Q35_ERR_NOMEM, "GGUF writer: metadata too large");
            cap *= 2;
        }
        unsigned char *b = realloc(w->kv, cap);
        if (!b) return q35_fail(Q35_ERR_NOMEM, "GGUF writer: out of memory");
        w->kv = b;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return Q35_OK;
}
static q35_status put_u32(q35_gguf_writer *w, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    return put(w, b, 4);
}
static q35_status put_u64(q35_gguf_writer *w, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return put(w, b, 8);
}
static q35_status put_str(q35_gguf_writer *w, const char *s, size_t n) {
    q35_status st = put_u64(w, n);
    return st ? st : put(w, s, n);
}

/* Starts an entry: checks the key, appends key + type. */
static q35_status begin_kv(q35_gguf_writer *w, const char *key, uint32_t type) {
    size_t n = strlen(key);
    if (n == 0 || n > Q35_GGUF_MAX_KEY) return q35_fail(Q35_ERR_ARG, "GGUF writer: bad metadata key '%.100s'", key);
    for (int i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return q35_fail(Q35_ERR_ARG, "GGUF writer: metadata key '%s' set twice", key);
    if (w->n_kv == w->keys_cap) {
        int cap = w->keys_cap ? 2 * w->keys_cap : 32;
        char **k = realloc(w->keys, (size_t)cap * sizeof *k);
        if (!k) return q35_fail(Q35_ERR_NOMEM, "GGUF writer: out of memory");
        w->keys = k;
        w->keys_cap = cap;
    }
    char *copy = strdup(key);
    if (!copy) return q35_fail(Q35_ERR_NOMEM, "GGUF writer: out of memory");
    w->keys[w->n_kv++] = copy;
    q35_status st = put_str(w, key, n);
    return st ? st : put_u32(w, type);
}

q35_status q35_gguf_set_u32(q35_gguf_writer *w, const char *key, uint32_t v) {
    if (strcmp(key, "q35.format_version") == 0) w->q35 = 1;
    if (strcmp(key, "general.alignment") == 0) {
        if (v == 0 || (v & (v - 1)) || v > Q35_GGUF_MAX_ALIGN)
            return q35_fail(Q35_ERR_ARG, "GGUF writer: general.alignment %u is not a power of two up to %u", v, Q35_GGUF_MAX_ALIGN);
        w->alignment = v;
    }
    q35_status st = begin_kv(w, key, Q35_GGUF_U32);
    return st ? st : put_u32(w, v);
}
q35_status q35_gguf_set_i32(q35_gguf_writer *w, const char *key, int32_t v) {
    q35_status st = begin_kv(w, key, Q35_GGUF_I32);
    return st ? st : put_u32(w, (uint32_t)v);
}
q35_status q35_gguf_set_u64(q35_gguf_writer *w, const char *key, uint64_t v) {
    q35_status st = begin_kv(w, key, Q35_GGUF_U64);
    return st ? st : put_u64(w, v);
}
q35_status q35_gguf_set_f32(q35_gguf_writer *w, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    q35_status st = begin_kv(w, key, Q35_GGUF_F32);
    return st ? st : put_u32(w, u);
}
q35_status q35_gguf_set_bool(q35_gguf_writer *w, const char *key, int v) {
    unsigned char b = v ? 1 : 0;
    q35_status st = begin_kv(w, key, Q35_GGUF_BOOL);
    return st ? st : put(w, &b, 1);
}
q35_status q35_gguf_set_strn(q35_gguf_writer *w, const char *key, const char *s, size_t len) {
    q35_status st = begin_kv(w, key, Q35_GGUF_STRING);
    return st ? st : put_str(w, s, len);
}
q35_status q35_gguf_set_str(q35_gguf_writer *w, const char *key, const char *s) { return q35_gguf_set_strn(w, key, s, strlen(s)); }
q35_status q35_gguf_set_arr_i32(q35_gguf_writer *w, const char *key, const int32_t *v, size_t n) {
    q35_status st = begin_kv(w, key, Q35_GGUF_ARRAY);
    if (!st) st = put_u32(w, Q35_GGUF_I32);
    if (!st) st = put_u64(w, n);
    for (size_t i = 0; !st && i < n; i++) st = put_u32(w, (uint32_t)v[i]);
    return st;
}
q35_status q35_gguf_set_arr_f32(q35_gguf_writer *w, const char *key, const float *v, size_t n) {
    q35_status st = begin_kv(w, key, Q35_GGUF_ARRAY);
    if (!st) st = put_u32(w, Q35_GGUF_F32);
    if (!st) st = put_u64(w, n);
    for (size_t i = 0; !st && i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        st = put_u32(w, u);
    }
    return st;
}
q35_status q35_gguf_set_arr_bool(q35_gguf_writer *w, const char *key, const unsigned char *v, size_t n) {
    q35_status st = begin_kv(w, key, Q35_GGUF_ARRAY);
    if (!st) st = put_u32(w, Q35_GGUF_BOOL);
    if (!st) st = put_u64(w, n);
    for (size_t i = 0; !st && i < n; i++) {
        unsigned char b = v[i] ? 1 : 0;
        st = put(w, &b, 1);
    }
    return st;
}
q35_status q35_gguf_set_arr_str(q35_gguf_writer *w, const char *key, const char *const *s, const size_t *len, size_t n) {
    q35_status st = begin_kv(w, key, Q35_GGUF_ARRAY);
    if (!st) st = put_u32(w, Q35_GGUF_STRING);
    if (!st) st = put_u64(w, n);
    for (size_t i = 0; !st && i < n; i++) st = put_str(w, s[i], len ? len[i] : strlen(s[i]));
    return st;
}
q35_status q35_gguf_copy_kv(q35_gguf_writer *w, const q35_gguf_kv *kv) {
    if (strcmp(kv->key, "general.alignment") == 0 && kv->type == Q35_GGUF_U32) return q35_gguf_set_u32(w, kv->key, le32(kv->data));
    q35_status st = begin_kv(w, kv->key, kv->type);
    if (st) return st;
    /* The stored value starts before kv->data for strings (length) and arrays (type + count). */
    const unsigned char *start = kv->type == Q35_GGUF_STRING ? kv->data - 8 : kv->type == Q35_GGUF_ARRAY ? kv->data - 12 : kv->data;
    return put(w, start, kv->nbytes);
}

q35_status q35_gguf_add_tensor(q35_gguf_writer *w, const char *name, const q35_tensor *t) {
    size_t n = strlen(name);
    if (n == 0 || n > Q35_GGUF_MAX_KEY) return q35_fail(Q35_ERR_ARG, "GGUF writer: bad tensor name '%.100s'", name);
    int q35_only;
    const int64_t type = q35_gguf_type_of(t, &q35_only);
    if (type < 0)
        return q35_fail(Q35_ERR_DTYPE, "GGUF writer: tensor '%s' has dtype %s in layout %d, which GGUF cannot hold", name, q35_dtype_name(t->dtype), t->layout);
    if (q35_only && !w->q35)
        return q35_fail(Q35_ERR_ARG, "GGUF writer: tensor '%s' (%s%s) needs q35's own tensor types: only a q35-layout file (q35.format_version set first) holds it",
                        name, q35_dtype_name(t->dtype), t->layout == Q35_LAYOUT_R16 ? ", interleaved" : "");
    if (q35_only) {
        q35_dtype dt;
        int layout;
        if (t->ndim != 2 || q35_gguf_q35_type_bytes((uint32_t)type, t->shape[0], t->shape[1], &dt, &layout) != t->nbytes)
            return q35_fail(Q35_ERR_ARG, "GGUF writer: tensor '%s': %zu bytes do not match its shape and type %s", name, t->nbytes, q35_ggml_type_name((uint32_t)type));
    } else {
        if (t->ndim < 1 || t->ndim > Q35_GGUF_MAX_DIMS)
            return q35_fail(Q35_ERR_SHAPE, "GGUF writer: tensor '%s' has %d dimensions, GGUF holds 1 to %d", name, t->ndim, Q35_GGUF_MAX_DIMS);
        unsigned __int128 numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 1) return q35_fail(Q35_ERR_SHAPE, "GGUF writer: tensor '%s' has an empty dimension", name);
            numel *= (unsigned __int128)t->shape[d];
        }
        const int64_t cols = t->shape[t->ndim - 1];
        const int blk = q35_dtype_block(t->dtype);
        if (cols % blk) return q35_fail(Q35_ERR_SHAPE, "GGUF writer: tensor '%s': %lld columns are not whole %s blocks", name, (long long)cols, q35_dtype_name(t->dtype));
        if (numel / (unsigned)blk * q35_dtype_block_bytes(t->dtype) != (unsigned __int128)t->nbytes)
            return q35_fail(Q35_ERR_ARG, "GGUF writer: tensor '%s': %zu bytes do not match its shape and dtype %s", name, t->nbytes, q35_dtype_name(t->dtype));
    }
    for (int i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return q35_fail(Q35_ERR_ARG, "GGUF writer: tensor '%s' added twice", name);
    if (w->n_tensors == w->tensors_cap) {
        int cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
        w_tensor *v = realloc(w->tensors, (size_t)cap * sizeof *v);
        if (!v) return q35_fail(Q35_ERR_NOMEM, "GGUF writer: out of memory");
        w->tensors = v;
        w->tensors_cap = cap;
    }
    w->tensors[w->n_tensors].name = name;
    w->tensors[w->n_tensors].t = *t;
    w->n_tensors++;
    return Q35_OK;
}

static int wr(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }
static int wr_u32(FILE *f, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    return wr(f, b, 4);
}
static int wr_u64(FILE *f, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return wr(f, b, 8);
}
static int wr_pad(FILE *f, uint64_t at, size_t align) {
    static const unsigned char zeros[64];
    size_t pad = (size_t)((align - at % align) % align);
    while (pad) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        if (!wr(f, zeros, k)) return 0;
        pad -= k;
    }
    return 1;
}

q35_status q35_gguf_write(q35_gguf_writer *w, const char *path) {
    char tmp[4200];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) return q35_fail(Q35_ERR_ARG, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return q35_fail(errno == ENOENT ? Q35_ERR_MISSING : Q35_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    const size_t align = w->alignment;
    for (int i = 0; i < w->n_tensors; i++) {
        int q35_only;
        q35_gguf_type_of(&w->tensors[i].t, &q35_only);
        if (q35_only && align % Q35_GGUF_Q35_ALIGN) {
            fclose(f);
            unlink(tmp);
            return q35_fail(Q35_ERR_ARG, "GGUF writer: tensor '%s' needs general.alignment a multiple of %d (it is %zu)", w->tensors[i].name, Q35_GGUF_Q35_ALIGN, align);
        }
    }
    int ok = wr(f, "GGUF", 4) && wr_u32(f, 3) && wr_u64(f, (uint64_t)w->n_tensors) && wr_u64(f, (uint64_t)w->n_kv) && wr(f, w->kv, w->kv_len);
    uint64_t at = 24 + w->kv_len, off = 0;
    for (int i = 0; ok && i < w->n_tensors; i++) {
        const w_tensor *t = &w->tensors[i];
        size_t nl = strlen(t->name);
        ok = wr_u64(f, nl) && wr(f, t->name, nl) && wr_u32(f, (uint32_t)t->t.ndim);
        for (int d = t->t.ndim - 1; ok && d >= 0; d--) ok = wr_u64(f, (uint64_t)t->t.shape[d]);
        int q35_only;
        ok = ok && wr_u32(f, (uint32_t)q35_gguf_type_of(&t->t, &q35_only)) && wr_u64(f, off);
        at += 8 + nl + 4 + 8 * (uint64_t)t->t.ndim + 4 + 8;
        off += t->t.nbytes;
        off += (align - off % align) % align;
    }
    ok = ok && wr_pad(f, at, align);
    for (int i = 0; ok && i < w->n_tensors; i++) {
        const w_tensor *t = &w->tensors[i];
        ok = wr(f, t->t.data, t->t.nbytes) && wr_pad(f, t->t.nbytes, align);
    }
    int err = errno;
    if (ok && fflush(f) != 0) ok = 0, err = errno;
    if (ok && fsync(fileno(f)) != 0) ok = 0, err = errno;
    if (fclose(f) != 0 && ok) ok = 0, err = errno;
    if (!ok) {
        unlink(tmp);
        return q35_fail(Q35_ERR_IO, "%s: write failed: %s", tmp, strerror(err));
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        return q35_fail(Q35_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(err));
    }
    return Q35_OK;
}
