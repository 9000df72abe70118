/* GGUF (llama.cpp's model format), versions 2 and 3, little-endian.
 *
 * Reader: the file is mapped (or read into anonymous memory), never copied tensor by tensor; every
 * count, length, offset and size is checked against the file size with overflow-safe arithmetic
 * before use, and errors are one line naming the file, the key or tensor, and what was expected.
 * Tensor shapes are converted from GGUF's fastest-first order (ne[0] = columns) to q35's
 * [rows, cols] (PyTorch) order.
 *
 * Writer: metadata + tensors, written atomically (tmp file + rename), default alignment 32, the
 * same layout gguf-py and llama.cpp write.
 *
 * q35 layout (format version 2; docs/quantization.md "File format"): still a valid GGUF container
 * (same header, metadata, tensor infos, alignment), marked by the metadata
 *   q35.format_version  u32 = 2      (1: an older q35's R16 groups, refused with "make it again with
 *                                     q35 quantize"; above 2: refused, "written by a newer q35")
 *   q35.layout          string "r16" (anything else, or absent: refused)
 *   general.alignment   u32, a multiple of 64 (the kernels read R16 groups with aligned vector loads)
 * and tensor types outside ggml's numbering for the encodings only q35 has (Q35_GGUF_T_*): Q4R rows,
 * and the 16-row interleave of kernels/quant.h (Q35_LAYOUT_R16) of Q8_0, Q4_0, Q4_K, Q6_K and Q4R.
 * Such a tensor has exactly 2 dimensions (ne = {cols, rows}), cols a whole number of blocks of its
 * format (Q4R: of 128), and holds exactly ceil(rows / 16) * q35_r16_group_bytes(dtype, cols) bytes
 * (Q4R rows: rows * q35_row_bytes). The q35 types are refused in a file without the two keys, and
 * llama.cpp refuses the q35 types ("invalid ggml type"): such a file is q35's own. Tensors of ggml
 * types may be mixed in (norms F32, a head as stored). */
#ifndef Q35_FORMATS_GGUF_H
#define Q35_FORMATS_GGUF_H
#include <stddef.h>
#include <stdint.h>

#include "core/file.h"
#include "model/tensor.h"
#include "q35.h"

/* Metadata value types (gguf_type). */
typedef enum q35_gguf_type {
    Q35_GGUF_U8 = 0,
    Q35_GGUF_I8 = 1,
    Q35_GGUF_U16 = 2,
    Q35_GGUF_I16 = 3,
    Q35_GGUF_U32 = 4,
    Q35_GGUF_I32 = 5,
    Q35_GGUF_F32 = 6,
    Q35_GGUF_BOOL = 7,
    Q35_GGUF_STRING = 8,
    Q35_GGUF_ARRAY = 9,
    Q35_GGUF_U64 = 10,
    Q35_GGUF_I64 = 11,
    Q35_GGUF_F64 = 12,
    Q35_GGUF_TYPE_COUNT
} q35_gguf_type;

/* ggml tensor types q35 knows by number (ggml.h's enum ggml_type). */
enum {
    Q35_GGML_F32 = 0, Q35_GGML_F16 = 1, Q35_GGML_Q4_0 = 2, Q35_GGML_Q8_0 = 8, Q35_GGML_Q4_K = 12,
    Q35_GGML_Q6_K = 14, Q35_GGML_I8 = 24, Q35_GGML_I16 = 25, Q35_GGML_I32 = 26, Q35_GGML_I64 = 27,
    Q35_GGML_F64 = 28, Q35_GGML_BF16 = 30,
};

/* q35's own tensor types (q35 layout files only; see above). */
enum {
    Q35_GGUF_T_Q4R = 0x3500,         /* Q4R, rows of blocks */
    Q35_GGUF_T_R16_Q8_0 = 0x3501,    /* Q8_0 in the R16 interleave */
    Q35_GGUF_T_R16_Q4_0 = 0x3502,
    Q35_GGUF_T_R16_Q4_K = 0x3503,
    Q35_GGUF_T_R16_Q6_K = 0x3504,
    Q35_GGUF_T_R16_Q4R = 0x3505,
};
#define Q35_GGUF_Q35_VERSION 2       /* the q35.format_version this build reads and writes (1: R16 Q8_0/Q4 groups
                                     * kept all their scales first, quant.h) */
#define Q35_GGUF_Q35_ALIGN 64        /* q35 tensors: general.alignment a multiple of this */

/* Limits (beyond "fits in the file"): refused with a message, never allocated. */
#define Q35_GGUF_MAX_KEY 65535u          /* bytes of a key or tensor name */
#define Q35_GGUF_MAX_STRING (1u << 30)   /* bytes of one string value */
#define Q35_GGUF_MAX_KV (1u << 20)       /* metadata entries */
#define Q35_GGUF_MAX_TENSORS (1u << 20)
#define Q35_GGUF_MAX_DIMS 4              /* GGML_MAX_DIMS */
#define Q35_GGUF_MAX_ALIGN (1u << 16)
#define Q35_GGUF_DEFAULT_ALIGN 32

typedef struct q35_gguf_kv {
    const char *key;                 /* NUL-terminated copy */
    uint32_t type;                   /* q35_gguf_type */
    uint32_t arr_type;               /* element type when type == ARRAY */
    uint64_t n;                      /* ARRAY: element count; STRING: byte length; else 1 */
    const unsigned char *data;       /* into the mapping: the scalar, the string bytes, or the array payload */
    size_t nbytes;                   /* bytes of the value as stored (after the type field; arrays: from the element type) */
    size_t pos;                      /* file offset of the entry (its key length field) */
} q35_gguf_kv;

typedef struct q35_gguf_tensor {
    q35_tensor t;                    /* name (NUL-terminated copy), q35 dtype, shape [rows, cols] order, data, nbytes */
    uint32_t ggml_type;
    int n_dims;
    int64_t ne[Q35_GGUF_MAX_DIMS];   /* [n_dims] GGUF order: ne[0] is the fastest axis */
    uint64_t offset;                 /* in the data section */
    size_t pos;                      /* file offset of the tensor info (its name length field) */
} q35_gguf_tensor;

typedef struct q35_gguf {
    q35_mapping map;
    char *path;
    uint32_t version;
    size_t alignment;
    size_t data_start;               /* file offset of the data section */
    q35_gguf_kv *kv;                 /* [n_kv] file order */
    int n_kv;
    q35_gguf_tensor *tensors;        /* [n_tensors] file order */
    int n_tensors;
    int *by_name;                    /* [n_tensors] indices into tensors, sorted by name */
    char *strings;                   /* storage of every key and tensor name */
    void **owned;                    /* [n_owned] aligned copies of tensors whose data was misaligned in memory */
    int n_owned;
    uint32_t q35_version;            /* q35.format_version (0: a plain GGUF file) */
} q35_gguf;

/* Map path (load = 1: read it into anonymous memory) and parse it. */
q35_status q35_gguf_open(const char *path, int load, q35_gguf *g);
/* Parse a file already mapped; takes ownership of map (unmapped by q35_gguf_close, or here on error). */
q35_status q35_gguf_parse(const char *path, q35_mapping map, q35_gguf *g);
void q35_gguf_close(q35_gguf *g);

const q35_gguf_kv *q35_gguf_find_kv(const q35_gguf *g, const char *key);
const q35_gguf_tensor *q35_gguf_find_tensor(const q35_gguf *g, const char *name);

/* Typed metadata reads. Absent and required: Q35_ERR_MISSING; absent and optional: Q35_OK with
 * *out unchanged; wrong type or out of [lo, hi]: Q35_ERR_FORMAT. Integers accept any integer type. */
q35_status q35_gguf_get_int(const q35_gguf *g, const char *key, int required, int64_t lo, int64_t hi, int64_t *out);
q35_status q35_gguf_get_float(const q35_gguf *g, const char *key, int required, double *out); /* f32 or f64 */
q35_status q35_gguf_get_bool(const q35_gguf *g, const char *key, int required, int *out);
/* The string's bytes (not NUL-terminated) and length. */
q35_status q35_gguf_get_str(const q35_gguf *g, const char *key, int required, const char **s, size_t *len);
/* Element i of an integer or bool array (0 when i >= kv->n or the elements are not integers). */
int64_t q35_gguf_arr_int(const q35_gguf_kv *kv, uint64_t i);
/* Walk an array of strings: *at starts at 0; returns 0 after the last one. */
int q35_gguf_arr_next_str(const q35_gguf_kv *kv, size_t *at, const char **s, size_t *len);

const char *q35_gguf_type_name(uint32_t type);
const char *q35_ggml_type_name(uint32_t ggml_type);   /* "q4_k", ...; "?" when unknown */
/* q35 dtype of a ggml type; -1 when q35 does not read it. */
int q35_dtype_from_ggml(uint32_t ggml_type);
/* ggml type of a q35 dtype; -1 when GGUF has none (q35's own formats). */
int q35_ggml_from_dtype(q35_dtype t);
/* Tensor type (ggml's, or Q35_GGUF_T_*) that stores t's dtype in t's layout; -1 when none.
 * *q35_only = 1 when it is one of q35's own types. */
int64_t q35_gguf_type_of(const q35_tensor *t, int *q35_only);
/* Bytes of a 2-D tensor of a q35 type (Q35_GGUF_T_*) with rows x cols, and its dtype and layout;
 * 0 when the type is not one of q35's or cols is not whole blocks of it. */
size_t q35_gguf_q35_type_bytes(uint32_t type, int64_t rows, int64_t cols, q35_dtype *dt, int *layout);

/* ---------------------------------------------------------------- writer */
typedef struct q35_gguf_writer q35_gguf_writer;

q35_status q35_gguf_writer_new(q35_gguf_writer **out);
void q35_gguf_writer_free(q35_gguf_writer *w);
/* Metadata, in the order added; a key given twice is an error. */
q35_status q35_gguf_set_u32(q35_gguf_writer *w, const char *key, uint32_t v);
q35_status q35_gguf_set_i32(q35_gguf_writer *w, const char *key, int32_t v);
q35_status q35_gguf_set_u64(q35_gguf_writer *w, const char *key, uint64_t v);
q35_status q35_gguf_set_f32(q35_gguf_writer *w, const char *key, float v);
q35_status q35_gguf_set_bool(q35_gguf_writer *w, const char *key, int v);
q35_status q35_gguf_set_str(q35_gguf_writer *w, const char *key, const char *s);
q35_status q35_gguf_set_strn(q35_gguf_writer *w, const char *key, const char *s, size_t len);
q35_status q35_gguf_set_arr_i32(q35_gguf_writer *w, const char *key, const int32_t *v, size_t n);
q35_status q35_gguf_set_arr_f32(q35_gguf_writer *w, const char *key, const float *v, size_t n);
q35_status q35_gguf_set_arr_bool(q35_gguf_writer *w, const char *key, const unsigned char *v, size_t n);
/* An array of n strings, s[i] of len[i] bytes (len NULL: NUL-terminated). */
q35_status q35_gguf_set_arr_str(q35_gguf_writer *w, const char *key, const char *const *s, const size_t *len, size_t n);
/* A metadata entry of another file, as stored. */
q35_status q35_gguf_copy_kv(q35_gguf_writer *w, const q35_gguf_kv *kv);
/* A tensor: shape in q35 order (t->shape[0] slowest); name and data are referenced, not copied,
 * and must stay valid until q35_gguf_write. t->nbytes must match dtype and shape. */
q35_status q35_gguf_add_tensor(q35_gguf_writer *w, const char *name, const q35_tensor *t);
/* Write everything to path atomically (path.tmp.<pid>, fsync, rename). Alignment: the u32
 * general.alignment when it was set, else 32. */
q35_status q35_gguf_write(q35_gguf_writer *w, const char *path);
#endif
