/* Session files: a session's whole sequence state on disk.
 *
 * Layout (version 2, the scalars hold pos and the rope delta of images; native byte order,
 * little-endian on every supported CPU, checked by a probe):
 *   header, 72 bytes:
 *     0  char[8]  magic "Q35SESS\0"
 *     8  u32      format version (2)
 *    12  u32      header bytes (72)
 *    16  u64      model fingerprint (q35_model_fingerprint: config, tensor formats and shapes, samples)
 *    24  u64      layout hash of the scalar state (the Q35_SEQ_SCALARS list and its size)
 *    32  i32      pos: positions held (P)
 *    36  i32      exact point (the mark)
 *    40  i32      chunk grid the mark is exact on
 *    44  u32      byte-order probe 0x01020304
 *    48  u64      state bytes (the sections below)
 *    56  u64      blob bytes (the caller's opaque data)
 *    64  i32      Gated DeltaNet sub-chunk the state was evaluated with
 *    68  u32      KV cache element type: 0 fp32, 1 fp16 (q35_kv_type; 0 in files from before it existed)
 *   sections: scalars at pos | scalars at the mark | tokens i32[P] | keys u64[P] | conv | rec |
 *             mark conv | mark rec | per full layer: key rows [P][n_kv*hd], value rows [P][n_kv*hd]
 *             (fp32 or fp16)
 *   blob
 *   u32 CRC-32 (zlib) of every byte before it
 * Saving writes a temporary file next to the target and renames it; loading reads and checks the
 * whole file into memory before copying anything into the session. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/err.h"
#include "runtime/state.h"

#define SESS_MAGIC "Q35SESS"
#define SESS_VERSION 2u
#define SESS_HEADER 72
#define SESS_PROBE 0x01020304u

#define Q35_X_NAME(type, name) #type " " #name ";"
static const char scalars_layout[] = Q35_SEQ_SCALARS(Q35_X_NAME);
#undef Q35_X_NAME

static uint64_t layout_hash(void) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = scalars_layout; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return (h ^ sizeof(q35_seq_scalars)) * 0x100000001b3ull;
}

typedef struct section {
    void *p;      /* where the bytes live in the session (or the scalar copies) */
    size_t bytes;
} section;

/* The sections of a session holding P positions; out has room for 8 + 2 * n_full. Returns the count. */
static int list_sections(const q35_session *s, int P, q35_seq_scalars *cur, q35_seq_scalars *mark, section *out) {
    const q35_config *c = &s->m->cfg;
    const size_t kvw = q35_kv_row_floats(c), rows = (size_t)P * kvw;
    int n = 0;
    out[n++] = (section){cur, sizeof *cur};
    out[n++] = (section){mark, sizeof *mark};
    out[n++] = (section){s->tokens, sizeof(int32_t) * (size_t)P};
    out[n++] = (section){s->keys, sizeof(uint64_t) * (size_t)P};
    out[n++] = (section){s->conv, sizeof(float) * q35_conv_floats(c)};
    out[n++] = (section){s->rec, sizeof(float) * q35_rec_floats(c)};
    out[n++] = (section){s->mark_conv, sizeof(float) * q35_conv_floats(c)};
    out[n++] = (section){s->mark_rec, sizeof(float) * q35_rec_floats(c)};
    for (int l = 0; l < c->n_full; l++) {
        out[n++] = (section){q35_kv_layer(s, s->k_cache, l), q35_kv_elt(s->kv_f16) * rows};
        out[n++] = (section){q35_kv_layer(s, s->v_cache, l), q35_kv_elt(s->kv_f16) * rows};
    }
    return n;
}

static uint32_t crc_update(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n > 0) {
        const uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, k);
        b += k, n -= k;
    }
    return crc;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

q35_status q35_session_save_ex(const q35_session *s, const char *path, const void *blob, size_t blob_len) {
    if (!s || !path || (blob_len && !blob)) return q35_fail(Q35_ERR_ARG, "session save: bad arguments");
    const q35_config *c = &s->m->cfg;
    q35_seq_scalars cur, mark;
    q35_seq_scalars_get(s, &cur);
    mark = s->mark_scalars;
    section *sec = malloc(sizeof *sec * (8 + 2 * (size_t)c->n_full));
    if (!sec) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    const int n_sec = list_sections(s, s->pos, &cur, &mark, sec);
    uint64_t state_bytes = 0;
    for (int i = 0; i < n_sec; i++) state_bytes += sec[i].bytes;
    unsigned char h[SESS_HEADER] = {0};
    memcpy(h, SESS_MAGIC, 8);
    put32(h + 8, SESS_VERSION);
    put32(h + 12, SESS_HEADER);
    put64(h + 16, q35_model_fingerprint(s->m));
    put64(h + 24, layout_hash());
    put32(h + 32, (uint32_t)s->pos);
    put32(h + 36, (uint32_t)mark.pos);
    put32(h + 40, (uint32_t)s->sc.cap);
    put32(h + 44, SESS_PROBE);
    put64(h + 48, state_bytes);
    put64(h + 56, blob_len);
    put32(h + 64, (uint32_t)s->sc.gdn_chunk);
    put32(h + 68, s->kv_f16 ? 1u : 0u);
    const size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(sec);
        return q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        q35_status st = q35_fail(Q35_ERR_IO, "session file %s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        free(sec);
        return st;
    }
    uint32_t crc = crc_update((uint32_t)crc32(0, Z_NULL, 0), h, sizeof h);
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (int i = 0; ok && i < n_sec; i++) {
        crc = crc_update(crc, sec[i].p, sec[i].bytes);
        ok = fwrite(sec[i].p, 1, sec[i].bytes, f) == sec[i].bytes;
    }
    if (ok && blob_len) {
        crc = crc_update(crc, blob, blob_len);
        ok = fwrite(blob, 1, blob_len, f) == blob_len;
    }
    unsigned char tail[4];
    put32(tail, crc);
    ok = ok && fwrite(tail, 1, 4, f) == 4;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    q35_status st = Q35_OK;
    if (!ok) st = q35_fail(Q35_ERR_IO, "session file %s: write failed: %s", tmp, strerror(errno));
    else if (rename(tmp, path) != 0) st = q35_fail(Q35_ERR_IO, "session file %s: cannot rename %s to it: %s", path, tmp, strerror(errno));
    if (st) unlink(tmp);
    free(tmp);
    free(sec);
    return st;
}

q35_status q35_session_save(const q35_session *s, const char *path) { return q35_session_save_ex(s, path, NULL, 0); }

q35_status q35_session_load_ex(q35_session *s, const char *path, void **blob, size_t *blob_len) {
    if (blob) *blob = NULL;
    if (blob_len) *blob_len = 0;
    if (!s || !path) return q35_fail(Q35_ERR_ARG, "session load: bad arguments");
    const q35_config *c = &s->m->cfg;
    FILE *f = fopen(path, "rb");
    if (!f) return q35_fail(Q35_ERR_IO, "session file %s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return q35_fail(Q35_ERR_IO, "session file %s: not a regular file", path);
    }
    const uint64_t size = (uint64_t)sb.st_size;
    unsigned char h[SESS_HEADER];
    if (size < SESS_HEADER + 4 || fread(h, 1, SESS_HEADER, f) != SESS_HEADER) {
        fclose(f);
        return q35_fail(Q35_ERR_FORMAT, "session file %s: truncated (%llu bytes; the header alone is %d)", path, (unsigned long long)size,
                        SESS_HEADER);
    }
    q35_status st = Q35_OK;
    const uint64_t state_bytes = get64(h + 48), n_blob = get64(h + 56);
    const int P = (int)get32(h + 32), mark_pos = (int)get32(h + 36), cap = (int)get32(h + 40), gdn_chunk = (int)get32(h + 64);
    if (memcmp(h, SESS_MAGIC, 8) != 0)
        st = q35_fail(Q35_ERR_FORMAT, "session file %s: not a q35 session file (bad magic)", path);
    else if (get32(h + 8) != SESS_VERSION)
        st = q35_fail(Q35_ERR_UNSUPPORTED, "session file %s: format version %u; this q35 reads version %u", path, get32(h + 8), SESS_VERSION);
    else if (get32(h + 12) != SESS_HEADER || get32(h + 44) != SESS_PROBE)
        st = q35_fail(Q35_ERR_FORMAT, "session file %s: bad header (size %u, byte-order probe %08x)", path, get32(h + 12), get32(h + 44));
    else if (get64(h + 16) != q35_model_fingerprint(s->m))
        st = q35_fail(Q35_ERR_ARG, "session file %s: made with another model (fingerprint %016llx, this model %016llx)", path,
                      (unsigned long long)get64(h + 16), (unsigned long long)q35_model_fingerprint(s->m));
    else if (get64(h + 24) != layout_hash())
        st = q35_fail(Q35_ERR_UNSUPPORTED, "session file %s: made by a q35 with another session state layout (expected '%s')", path,
                      scalars_layout);
    else if (P < 0 || mark_pos < 0 || mark_pos > P || cap <= 0)
        st = q35_fail(Q35_ERR_FORMAT, "session file %s: bad positions (pos %d, exact point %d, grid %d)", path, P, mark_pos, cap);
    else if (get32(h + 68) > 1)
        st = q35_fail(Q35_ERR_FORMAT, "session file %s: KV cache type %u (expected 0 for fp32 or 1 for fp16)", path, get32(h + 68));
    else if ((int)get32(h + 68) != s->kv_f16)
        st = q35_fail(Q35_ERR_ARG, "session file %s: holds an %s KV cache; this session's is %s (--kv-cache %s)", path,
                      get32(h + 68) ? "fp16" : "fp32", s->kv_f16 ? "fp16" : "fp32", get32(h + 68) ? "f16" : "f32");
    section *sec = NULL;
    int n_sec = 0;
    q35_seq_scalars cur, mark;
    uint64_t want = 0;
    if (!st) {
        sec = malloc(sizeof *sec * (8 + 2 * (size_t)c->n_full));
        if (!sec) st = q35_fail(Q35_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        n_sec = list_sections(s, P, &cur, &mark, sec);
        want = 0;
        for (int i = 0; i < n_sec; i++) want += sec[i].bytes;
        if (want != state_bytes)
            st = q35_fail(Q35_ERR_FORMAT, "session file %s: state of %llu bytes, expected %llu for %d positions of this model", path,
                          (unsigned long long)state_bytes, (unsigned long long)want, P);
        else if (n_blob > size || size != SESS_HEADER + state_bytes + n_blob + 4)
            st = q35_fail(Q35_ERR_FORMAT, "session file %s: truncated or padded (%llu bytes; the header says %llu)", path,
                          (unsigned long long)size, (unsigned long long)(SESS_HEADER + state_bytes + n_blob + 4));
        else if (P > s->n_ctx)
            st = q35_fail(Q35_ERR_CONTEXT, "session file %s: holds %d tokens; this session's context is %d (raise --ctx)", path, P, s->n_ctx);
        else if (cap != s->sc.cap || gdn_chunk != s->sc.gdn_chunk)
            st = q35_fail(Q35_ERR_ARG,
                          "session file %s: saved with prompt chunks of %d and %d tokens; this session uses %d and %d (Q35_PROMPT_CHUNK, "
                          "Q35_GDN_CHUNK)", path, cap, gdn_chunk, s->sc.cap, s->sc.gdn_chunk);
    }
    /* Read everything into one buffer and check the sum before touching the session. */
    unsigned char *body = NULL;
    const size_t body_len = st ? 0 : (size_t)(state_bytes + n_blob + 4);
    if (!st && !(body = malloc(body_len))) st = q35_fail(Q35_ERR_NOMEM, "session file %s: out of memory for %zu bytes", path, body_len);
    if (!st && fread(body, 1, body_len, f) != body_len) st = q35_fail(Q35_ERR_IO, "session file %s: read failed", path);
    fclose(f);
    if (!st) {
        uint32_t crc = crc_update((uint32_t)crc32(0, Z_NULL, 0), h, sizeof h);
        crc = crc_update(crc, body, body_len - 4);
        if (crc != get32(body + body_len - 4))
            st = q35_fail(Q35_ERR_FORMAT, "session file %s: checksum mismatch (the file is corrupt)", path);
    }
    if (!st) {
        memcpy(&cur, body, sizeof cur);
        memcpy(&mark, body + sizeof cur, sizeof mark);
        const int32_t *toks = (const int32_t *)(void *)(body + 2 * sizeof cur); /* copied below; only read here */
        if (cur.pos != P || mark.pos != mark_pos || mark_pos % cap != 0)
            st = q35_fail(Q35_ERR_FORMAT, "session file %s: the state's positions (%d, %d) disagree with the header", path, cur.pos, mark.pos);
        /* the M-RoPE position of the next token (pos + rope delta) is in [0, n_ctx] (inside an image
         * it is the one after the image; images otherwise only pull positions back) */
        else if (cur.rope_delta < -cur.pos || cur.rope_delta > s->n_ctx || mark.rope_delta < -mark.pos || mark.rope_delta > s->n_ctx)
            st = q35_fail(Q35_ERR_FORMAT, "session file %s: rope delta %d (exact point: %d) outside [-positions, context]", path,
                          cur.rope_delta, mark.rope_delta);
        for (int i = 0; !st && i < P; i++) {
            int32_t t;
            memcpy(&t, toks + i, sizeof t);
            if (t < 0 || t >= c->vocab) st = q35_fail(Q35_ERR_FORMAT, "session file %s: token %d at position %d is outside the vocabulary", path, t, i);
        }
    }
    if (!st && blob && n_blob) {
        if (!(*blob = malloc((size_t)n_blob + 1))) st = q35_fail(Q35_ERR_NOMEM, "out of memory");
        else {
            memcpy(*blob, body + state_bytes, (size_t)n_blob);
            ((char *)*blob)[n_blob] = 0;
            if (blob_len) *blob_len = (size_t)n_blob;
        }
    }
    if (!st) { /* commit: nothing below can fail */
        size_t off = 0;
        for (int i = 0; i < n_sec; i++) {
            memcpy(sec[i].p, body + off, sec[i].bytes);
            off += sec[i].bytes;
        }
        q35_seq_scalars_set(s, &cur);
        s->mark_scalars = mark;
    }
    free(body);
    free(sec);
    return st;
}

q35_status q35_session_load(q35_session *s, const char *path) { return q35_session_load_ex(s, path, NULL, NULL); }
