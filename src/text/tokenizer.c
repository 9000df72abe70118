/* Byte-level BPE built from a Hugging Face tokenizer.json, equal token for token to the `tokenizers`
 * package on Qwen2/Qwen3/Qwen3.5 files. An encode runs the same stages, in the same order:
 *   0. invalid UTF-8 becomes U+FFFD, one per maximal invalid subpart (bytes.decode('utf-8', 'replace'));
 *   1. added tokens with "normalized": false are cut out of the raw text (leftmost-longest, like the
 *      aho-corasick automaton of tokenizers), honouring lstrip / rstrip / single_word;
 *   2. every other piece is normalized (NFC, or nothing) and added tokens with "normalized": true
 *      are cut out of it;
 *   3. pre-tokenizer: each Split regex cuts pieces (behavior Isolated); ByteLevel maps bytes;
 *   4. BPE: inside each piece, adjacent symbols merge by merge rank (lowest first, leftmost first).
 * The regex is the file's own pattern translated from Oniguruma to PCRE2 (see translate_regex). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utf8proc.h>

#include "core/err.h"
#include "core/file.h"
#include "formats/json.h"
#include "text/utf8.h"

#define TOKENIZER_JSON_MAX ((size_t)1 << 30) /* refuse tokenizer.json files above 1 GiB */
#define CONFIG_JSON_MAX ((size_t)64 << 20)   /* and tokenizer_config.json above 64 MiB */
#define MAX_TOKEN_ID ((1L << 24) - 1)        /* ids above this are taken as a malformed file */
#define MAX_STEPS 8                          /* pre-tokenizer steps after flattening Sequences */

/* The pattern ByteLevel(use_regex = true) splits with (tokenizers' byte_level.rs, GPT-2's). */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------------------------------------ buffers */

typedef struct buf {
    unsigned char *p; /* [cap] bytes; p[0..n) hold data */
    size_t n;         /* bytes used */
    size_t cap;       /* bytes allocated */
} buf;

static int buf_reserve(buf *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->n) return -1;
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra) cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_put(buf *b, const void *s, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

static int buf_puts(buf *b, const char *s) { return buf_put(b, s, strlen(s)); }

/* ---------------------------------------------------------------------------------------- ByteLevel */
/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the 68 others (0..32,
 * 127..160, 173) for U+0100..U+0143 in byte order. */

static int bl_printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

static uint32_t bl_char(unsigned b) {
    if (bl_printable(b)) return b;
    if (b <= 32) return 256 + b;
    if (b <= 160) return 256 + 33 + (b - 127);
    return 256 + 67; /* 173 */
}

static int bl_byte(uint32_t cp) {
    if (cp < 256) return bl_printable(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

/* ------------------------------------------------------------------------------------------- tables */

typedef struct tok_info {
    uint32_t text_off;  /* the token's string as tokenizer.json writes it: pool + text_off (NUL-terminated) */
    uint32_t text_len;  /* its length in bytes */
    uint32_t bytes_off; /* the raw bytes it decodes to (ByteLevel): pool + bytes_off (NUL-terminated) */
    uint32_t bytes_len; /* their count */
    uint8_t in_vocab;   /* 1: a model.vocab entry */
    uint8_t added;      /* 1: listed in added_tokens */
    uint8_t special;    /* 1: an added token with "special": true */
} tok_info;

typedef struct map_key {
    uint32_t off; /* key string: pool + off */
    uint32_t len; /* its length */
    int32_t id;   /* the token id it maps to */
} map_key;

typedef struct str_map {
    int32_t *slot; /* [cap] index into key, -1 = empty (open addressing, linear probing) */
    size_t cap;    /* power of two, at least twice the key count */
    map_key *key;  /* [n_key] entries */
    size_t n_key;  /* entries used (capacity: cap / 2) */
} str_map;

typedef struct pair_slot {
    uint64_t key;  /* (left id << 32) | right id; PAIR_EMPTY when free */
    uint32_t rank; /* the merge's line in model.merges (lower merges first) */
    int32_t id;    /* the id of the merged token */
} pair_slot;
#define PAIR_EMPTY UINT64_MAX

typedef struct added_tok {
    int32_t id;          /* token id */
    uint8_t special;     /* "special" */
    uint8_t single_word; /* match only where no word character touches either end */
    uint8_t lstrip;      /* the match swallows whitespace on its left */
    uint8_t rstrip;      /* and on its right */
    uint8_t normalized;  /* matched in normalized text (else in the raw text) */
} added_tok;

typedef struct trie_node {
    int32_t child;   /* index of the first child, -1 when none */
    int32_t sibling; /* index of the next sibling, -1 when none */
    int32_t added;   /* index into added[] of the token that ends here, -1 when none */
    uint8_t byte;    /* the byte on the edge from the parent */
} trie_node;

typedef struct trie {
    trie_node *node;     /* [n] node[0] is the root */
    size_t n, cap;       /* nodes used / allocated */
    int32_t first[256];  /* root child for each first byte, -1 when no token starts with it */
    size_t n_tokens;     /* tokens inserted */
} trie;

typedef struct pre_step {
    pcre2_code *re;       /* Split regex (translated to PCRE2) or ByteLevel's GPT-2 regex; NULL: no split */
    int byte_level;       /* 1: this is the ByteLevel step (always the last) */
    int add_prefix_space; /* ByteLevel: prepend ' ' to a piece that does not start with one */
} pre_step;

struct q35_tokenizer {
    tok_info *tok;           /* [n_tok] by id; ids nothing names are all-zero (in_vocab = added = 0) */
    int32_t n_tok;           /* 1 + the largest id */
    buf pool;                /* token strings and bytes, each NUL-terminated */
    str_map map;             /* token string -> id; added tokens override vocab entries */
    pair_slot *pairs;        /* [pairs_cap] merges: (left, right) -> rank, merged id */
    size_t pairs_cap;        /* power of two */
    int32_t byte_id[256];    /* id of the token for each single byte, -1 if the vocabulary lacks it */
    int32_t unk_id;          /* model.unk_token's id, -1 when none (unknown bytes are then dropped) */
    int fuse_unk;            /* consecutive unknown bytes give one unk */
    int ignore_merges;       /* a piece that is a whole vocab token is emitted without merging */
    int nfc;                 /* normalizer: 1 = NFC, 0 = none */
    pre_step step[MAX_STEPS]; /* pre-tokenizer, flattened */
    int n_steps;             /* steps used */
    added_tok *added;        /* [n_added] added_tokens in file order */
    size_t n_added;          /* entries in added */
    trie raw_trie;           /* added tokens with normalized = false, matched on the raw text */
    trie norm_trie;          /* normalized = true, matched after normalization (contents normalized too) */
    cJSON *config;           /* tokenizer_config.json, or NULL */
    const char *chat_template, *eos, *pad, *bos; /* strings inside config (or NULL) */
    int32_t eos_id, pad_id, bos_id;               /* their ids, -1 when unknown */
};

static uint64_t fnv1a(const void *s, size_t n) {
    const unsigned char *p = s;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static int map_init(str_map *m, size_t n_keys) {
    m->cap = pow2_at_least(2 * n_keys + 2);
    m->slot = malloc(m->cap * sizeof *m->slot);
    m->key = malloc((m->cap / 2) * sizeof *m->key);
    m->n_key = 0;
    if (!m->slot || !m->key) return -1;
    memset(m->slot, 0xFF, m->cap * sizeof *m->slot);
    return 0;
}

/* Slot of s[0..n) (its key index) or of the empty slot where it would go. */
static size_t map_find(const str_map *m, const char *pool, const char *s, size_t n) {
    size_t mask = m->cap - 1, i = (size_t)fnv1a(s, n) & mask;
    for (;;) {
        int32_t k = m->slot[i];
        if (k < 0) return i;
        const map_key *e = &m->key[k];
        if (e->len == n && !memcmp(pool + e->off, s, n)) return i;
        i = (i + 1) & mask;
    }
}

static int32_t map_get(const q35_tokenizer *t, const char *s, size_t n) {
    size_t i = map_find(&t->map, (const char *)t->pool.p, s, n);
    return t->map.slot[i] < 0 ? -1 : t->map.key[t->map.slot[i]].id;
}

/* Insert key pool[off..off+len) -> id; an existing key gets the new id. Returns -1 when full. */
static int map_put(q35_tokenizer *t, uint32_t off, uint32_t len, int32_t id) {
    str_map *m = &t->map;
    size_t i = map_find(m, (const char *)t->pool.p, (const char *)t->pool.p + off, len);
    if (m->slot[i] >= 0) {
        m->key[m->slot[i]].id = id;
        return 0;
    }
    if (m->n_key >= m->cap / 2) return -1;
    m->key[m->n_key] = (map_key){off, len, id};
    m->slot[i] = (int32_t)m->n_key++;
    return 0;
}

static size_t pair_index(const q35_tokenizer *t, uint64_t key) {
    size_t mask = t->pairs_cap - 1, i = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 17) & mask;
    while (t->pairs[i].key != PAIR_EMPTY && t->pairs[i].key != key) i = (i + 1) & mask;
    return i;
}

static const pair_slot *pair_get(const q35_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    const pair_slot *p = &t->pairs[pair_index(t, key)];
    return p->key == key ? p : NULL;
}

/* ---------------------------------------------------------------------------------------- the trie */

static int trie_init(trie *tr) {
    tr->cap = 64;
    tr->node = malloc(tr->cap * sizeof *tr->node);
    if (!tr->node) return -1;
    tr->node[0] = (trie_node){-1, -1, -1, 0};
    tr->n = 1;
    tr->n_tokens = 0;
    for (int i = 0; i < 256; i++) tr->first[i] = -1;
    return 0;
}

static int trie_insert(trie *tr, const unsigned char *s, size_t n, int32_t added_index) {
    int32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = tr->node[cur].child;
        while (c >= 0 && tr->node[c].byte != s[i]) c = tr->node[c].sibling;
        if (c < 0) {
            if (tr->n == tr->cap) {
                trie_node *p = realloc(tr->node, 2 * tr->cap * sizeof *p);
                if (!p) return -1;
                tr->node = p;
                tr->cap *= 2;
            }
            c = (int32_t)tr->n++;
            tr->node[c] = (trie_node){-1, tr->node[cur].child, -1, s[i]};
            tr->node[cur].child = c;
            if (cur == 0) tr->first[s[i]] = c;
        }
        cur = c;
    }
    tr->node[cur].added = added_index; /* a later token with the same content wins, as in tokenizers */
    tr->n_tokens++;
    return 0;
}

/* Longest token starting at s[0..n): its added[] index (and *len), or -1. */
static int32_t trie_longest(const trie *tr, const unsigned char *s, size_t n, size_t *len) {
    int32_t cur = tr->first[s[0]], best = -1;
    size_t i = 0;
    while (cur >= 0) {
        if (tr->node[cur].added >= 0) best = tr->node[cur].added, *len = i + 1;
        if (++i >= n) break;
        int32_t c = tr->node[cur].child;
        while (c >= 0 && tr->node[c].byte != s[i]) c = tr->node[c].sibling;
        cur = c;
    }
    return best;
}

/* ---------------------------------------------------------------------------------- unicode helpers */

static int in_ranges(uint32_t cp, const q35_cp_range *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].lo && cp <= r[i].hi) return 1;
    return 0;
}

static int is_space_cp(uint32_t cp) {
    size_t n;
    const q35_cp_range *r = q35_unicode_space(&n);
    return in_ranges(cp, r, n);
}

/* A word character as Rust's regex \w: alphabetic, marks, decimal digits, connector punctuation,
 * join controls (approximated by general categories). */
static int is_word_cp(uint32_t cp) {
    if (cp == 0x200C || cp == 0x200D) return 1;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

/* The code point that ends s[0..n) (valid UTF-8, n >= 1) and where it starts. */
static uint32_t last_cp(const unsigned char *s, size_t n, size_t *start) {
    size_t i = n - 1;
    while (i > 0 && (s[i] & 0xC0) == 0x80 && n - i < 4) i--;
    uint32_t cp = 0;
    size_t len;
    if (!q35_utf8_next(s + i, n - i, &cp, &len)) cp = s[n - 1];
    *start = i;
    return cp;
}

static uint32_t first_cp(const unsigned char *s, size_t n, size_t *len) {
    uint32_t cp = s[0];
    if (!q35_utf8_next(s, n, &cp, len)) *len = 1;
    return cp;
}

/* NFC as tokenizers computes it (utf8proc, with marks newer than Unicode 9 kept as barriers).
 * *out = NULL when the text does not change. */
static q35_status nfc_apply(const unsigned char *s, size_t n, unsigned char **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    size_t i = 0;
    while (i < n && s[i] < 0xCC) i++; /* no code point >= U+0300: NFC cannot change anything */
    if (i == n) return Q35_OK;
    buf b = {0};
    size_t seg = 0;
    i = 0;
    while (i <= n) {
        uint32_t cp = 0;
        size_t len = 1;
        int barrier = 0;
        if (i < n) {
            cp = first_cp(s + i, n - i, &len);
            barrier = cp >= 0x300 && q35_unicode_nfc_barrier(cp);
        }
        if (i == n || barrier) {
            if (i > seg) {
                utf8proc_uint8_t *dst = NULL;
                utf8proc_ssize_t r = utf8proc_map(s + seg, (utf8proc_ssize_t)(i - seg), &dst,
                                                  UTF8PROC_STABLE | UTF8PROC_COMPOSE);
                if (r < 0) {
                    free(b.p);
                    return q35_fail(r == UTF8PROC_ERROR_NOMEM ? Q35_ERR_NOMEM : Q35_ERR_ARG,
                                    "NFC normalization failed: %s", utf8proc_errmsg(r));
                }
                int bad = buf_put(&b, dst, (size_t)r);
                free(dst);
                if (bad) {
                    free(b.p);
                    return q35_fail(Q35_ERR_NOMEM, "NFC normalization: out of memory");
                }
            }
            if (i == n) break;
            if (buf_put(&b, s + i, len)) {
                free(b.p);
                return q35_fail(Q35_ERR_NOMEM, "NFC normalization: out of memory");
            }
            seg = i + len;
        }
        i += len;
    }
    *out = b.p ? b.p : malloc(1);
    *out_n = b.n;
    if (!*out) return q35_fail(Q35_ERR_NOMEM, "NFC normalization: out of memory");
    return Q35_OK;
}

/* ------------------------------------------------------------------------------ regex translation */

static int put_ranges(buf *b, const q35_cp_range *r, size_t n) {
    char tmp[48];
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo == r[i].hi) snprintf(tmp, sizeof tmp, "\\x{%X}", (unsigned)r[i].lo);
        else snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", (unsigned)r[i].lo, (unsigned)r[i].hi);
        if (buf_puts(b, tmp)) return -1;
    }
    return 0;
}

/* Class items for \p{cls} as Oniguruma has it: PCRE2's own table plus the newer members. */
static int put_class(buf *b, const char *cls) {
    size_t n;
    const q35_cp_range *extra = q35_unicode_class_extra(cls, &n);
    if (buf_puts(b, "\\p{") || buf_puts(b, cls) || buf_puts(b, "}")) return -1;
    return put_ranges(b, extra, n);
}

/* The class q35 corrects for a \p{NAME} (Oniguruma names are case-insensitive), or NULL. */
static const char *known_class(const char *name, size_t n) {
    static const struct {
        const char *name, *cls;
    } names[] = {{"l", "L"}, {"letter", "L"}, {"n", "N"}, {"number", "N"},
                 {"m", "M"}, {"mark", "M"},   {"combining_mark", "M"}, {"nd", "Nd"}, {"decimal_number", "Nd"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == n && !strncasecmp(names[i].name, name, n)) return names[i].cls;
    return NULL;
}

q35_status q35_tokenizer_translate_regex(const char *pat, const char *what, char **out) {
    *out = NULL;
    buf b = {0};
    size_t n = strlen(pat), nsp;
    const q35_cp_range *space = q35_unicode_space(&nsp);
    int in_class = 0;    /* inside [...] */
    int class_first = 0; /* the next character is the first of the class (']' is literal there) */
    int oom = 0;
    for (size_t i = 0; i < n && !oom;) {
        char c = pat[i];
        if (c == '\\') {
            if (i + 1 >= n) {
                free(b.p);
                return q35_fail(Q35_ERR_FORMAT, "%s: pattern ends with a lone backslash", what);
            }
            char d = pat[i + 1];
            class_first = 0;
            if (d == 's' || (d == 'S' && !in_class)) {
                oom |= buf_puts(&b, in_class ? "" : d == 's' ? "[" : "[^");
                oom |= put_ranges(&b, space, nsp);
                oom |= buf_puts(&b, in_class ? "" : "]");
                i += 2;
            } else if (d == 'h' || (d == 'H' && !in_class)) { /* Oniguruma: hex digit */
                oom |= buf_puts(&b, in_class ? "0-9a-fA-F" : d == 'h' ? "[0-9a-fA-F]" : "[^0-9a-fA-F]");
                i += 2;
            } else if (d == 'v') { /* Oniguruma: the vertical tab character */
                oom |= buf_puts(&b, "\\x{B}");
                i += 2;
            } else if (d == 'd' || (d == 'D' && !in_class)) {
                oom |= buf_puts(&b, in_class ? "" : d == 'd' ? "[" : "[^");
                oom |= put_class(&b, "Nd");
                oom |= buf_puts(&b, in_class ? "" : "]");
                i += 2;
            } else if (d == 'p' || d == 'P') {
                size_t name_at, name_len, end;
                if (i + 2 < n && pat[i + 2] == '{') {
                    const char *close = memchr(pat + i + 3, '}', n - i - 3);
                    if (!close) {
                        free(b.p);
                        return q35_fail(Q35_ERR_FORMAT, "%s: unterminated \\%c{ in the pattern", what, d);
                    }
                    name_at = i + 3;
                    name_len = (size_t)(close - (pat + name_at));
                    end = (size_t)(close - pat) + 1;
                } else {
                    name_at = i + 2;
                    name_len = i + 2 < n ? 1 : 0;
                    end = name_at + name_len;
                }
                int neg = d == 'P';
                if (name_len && pat[name_at] == '^') neg = !neg, name_at++, name_len--;
                const char *cls = known_class(pat + name_at, name_len);
                if (cls && !(in_class && neg)) {
                    oom |= buf_puts(&b, in_class ? "" : neg ? "[^" : "[");
                    oom |= put_class(&b, cls);
                    oom |= buf_puts(&b, in_class ? "" : "]");
                } else {
                    oom |= buf_put(&b, pat + i, end - i); /* PCRE2's own tables */
                }
                i = end;
            } else if (d == 'u' && i + 6 <= n && strspn(pat + i + 2, "0123456789abcdefABCDEF") >= 4) {
                oom |= buf_puts(&b, "\\x{") || buf_put(&b, pat + i + 2, 4) || buf_puts(&b, "}");
                i += 6;
            } else {
                oom |= buf_put(&b, pat + i, 2);
                i += 2;
            }
            continue;
        }
        if (in_class) {
            if (c == '[') {
                if (i + 1 < n && pat[i + 1] == ':') { /* POSIX bracket: copy through ":]" */
                    const char *close = strstr(pat + i + 2, ":]");
                    if (!close) {
                        free(b.p);
                        return q35_fail(Q35_ERR_FORMAT, "%s: unterminated [: in the pattern", what);
                    }
                    size_t end = (size_t)(close - pat) + 2;
                    oom |= buf_put(&b, pat + i, end - i);
                    i = end;
                    class_first = 0;
                    continue;
                }
                free(b.p);
                return q35_fail(Q35_ERR_UNSUPPORTED, "%s: nested character classes (Oniguruma set syntax) are not "
                                "supported, at offset %zu", what, i);
            }
            if (c == '&' && i + 1 < n && pat[i + 1] == '&') {
                free(b.p);
                return q35_fail(Q35_ERR_UNSUPPORTED, "%s: class intersection '&&' is not supported, at offset %zu",
                                what, i);
            }
            if (c == ']' && !class_first) in_class = 0;
            if (c == ']' && class_first) {
                oom |= buf_puts(&b, "\\]");
                i++;
                class_first = 0;
                continue;
            }
            class_first = 0;
            oom |= buf_put(&b, &c, 1);
            i++;
            continue;
        }
        oom |= buf_put(&b, &c, 1);
        i++;
        if (c == '[') {
            in_class = 1;
            class_first = 1;
            if (i < n && pat[i] == '^') oom |= buf_put(&b, "^", 1), i++;
        }
    }
    if (oom || buf_put(&b, "", 1)) {
        free(b.p);
        return q35_fail(Q35_ERR_NOMEM, "%s: out of memory translating the pattern", what);
    }
    *out = (char *)b.p;
    return Q35_OK;
}

static q35_status compile_regex(const char *pattern, int literal, const char *what, pcre2_code **out) {
    *out = NULL;
    char *tr = NULL;
    uint32_t opts = PCRE2_UTF;
    if (literal) {
        opts |= PCRE2_LITERAL;
    } else {
        opts |= PCRE2_NEVER_BACKSLASH_C; /* \C could split a UTF-8 character */
        q35_status st = q35_tokenizer_translate_regex(pattern, what, &tr);
        if (st) return st;
        opts |= PCRE2_UCP | PCRE2_MULTILINE; /* Oniguruma's Ruby syntax: ^ and $ are line anchors */
    }
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) {
        free(tr);
        return q35_fail(Q35_ERR_NOMEM, "%s: out of memory compiling the pattern", what);
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int err;
    PCRE2_SIZE off;
    const char *src = literal ? pattern : tr;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, strlen(src), opts, &err, &off, cc);
    pcre2_compile_context_free(cc);
    free(tr);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: the pattern does not compile with PCRE2: %s", what, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT the interpreter runs: same results */
    *out = re;
    return Q35_OK;
}

/* -------------------------------------------------------------------------------------- loading */

/* Append s[0..n) and a NUL to the pool; *off receives where it starts. */
static int pool_add(q35_tokenizer *t, const void *s, size_t n, uint32_t *off) {
    if (t->pool.n + n + 1 > UINT32_MAX) return -1;
    *off = (uint32_t)t->pool.n;
    if (buf_put(&t->pool, s, n) || buf_put(&t->pool, "", 1)) return -1;
    return 0;
}

/* Store the string and the ByteLevel-decoded bytes of token id (as tokenizers' ByteLevel decoder:
 * every character in the byte alphabet becomes its byte, else the string's own UTF-8 is used). */
static q35_status set_token(q35_tokenizer *t, int32_t id, const char *s, const char *what) {
    size_t n = strlen(s);
    if (!q35_utf8_valid((const unsigned char *)s, n))
        return q35_fail(Q35_ERR_FORMAT, "%s: token %d is not valid UTF-8", what, (int)id);
    tok_info *ti = &t->tok[id];
    if (pool_add(t, s, n, &ti->text_off)) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
    ti->text_len = (uint32_t)n;
    /* decode into the pool after the text; the bytes are never longer than the string */
    if (buf_reserve(&t->pool, n + 1) || t->pool.n + n + 1 > UINT32_MAX)
        return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
    unsigned char *dst = t->pool.p + t->pool.n;
    size_t m = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len;
        q35_utf8_next((const unsigned char *)s + i, n - i, &cp, &len);
        int b = bl_byte(cp);
        if (b < 0) { /* not all in the byte alphabet: the token stands for its own UTF-8 */
            ti->bytes_off = ti->text_off;
            ti->bytes_len = ti->text_len;
            return Q35_OK;
        }
        dst[m++] = (unsigned char)b;
        i += len;
    }
    dst[m] = 0;
    ti->bytes_off = (uint32_t)t->pool.n;
    ti->bytes_len = (uint32_t)m;
    t->pool.n += m + 1;
    return Q35_OK;
}

static const cJSON *obj_field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static q35_status parse_normalizer(q35_tokenizer *t, const cJSON *n, const char *what, int depth) {
    if (!n || cJSON_IsNull(n)) return Q35_OK;
    const char *type;
    q35_status st = q35_json_str_opt(n, "type", what, &type);
    if (st) return st;
    if (!type) return q35_fail(Q35_ERR_FORMAT, "%s: normalizer without a 'type'", what);
    if (!strcmp(type, "NFC")) {
        t->nfc = 1;
        return Q35_OK;
    }
    if (!strcmp(type, "Sequence") && depth < 4) {
        const cJSON *list = obj_field(n, "normalizers");
        if (!cJSON_IsArray(list))
            return q35_fail(Q35_ERR_FORMAT, "%s: normalizer Sequence: 'normalizers' must be an array", what);
        const cJSON *it;
        cJSON_ArrayForEach(it, list) {
            if ((st = parse_normalizer(t, it, what, depth + 1))) return st;
        }
        return Q35_OK;
    }
    return q35_fail(Q35_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported (q35 implements none, NFC, and "
                    "Sequence of those)", what, type);
}

static q35_status parse_pretokenizer(q35_tokenizer *t, const cJSON *p, const char *what, int depth) {
    const char *type;
    q35_status st = q35_json_str_opt(p, "type", what, &type);
    if (st) return st;
    if (!type) return q35_fail(Q35_ERR_FORMAT, "%s: pre_tokenizer without a 'type'", what);
    if (t->n_steps > 0 && t->step[t->n_steps - 1].byte_level)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: pre_tokenizer '%s' after ByteLevel is not supported", what, type);
    if (t->n_steps == MAX_STEPS)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: more than %d pre_tokenizer steps", what, MAX_STEPS);
    if (!strcmp(type, "Sequence") && depth < 4) {
        const cJSON *list = obj_field(p, "pretokenizers");
        if (!cJSON_IsArray(list))
            return q35_fail(Q35_ERR_FORMAT, "%s: pre_tokenizer Sequence: 'pretokenizers' must be an array", what);
        const cJSON *it;
        cJSON_ArrayForEach(it, list) {
            if ((st = parse_pretokenizer(t, it, what, depth + 1))) return st;
        }
        return Q35_OK;
    }
    pre_step *s = &t->step[t->n_steps];
    char field[64];
    snprintf(field, sizeof field, "%s: pre_tokenizer %s", what, type);
    if (!strcmp(type, "Split")) {
        const char *behavior;
        int invert = 0;
        if ((st = q35_json_str_opt(p, "behavior", field, &behavior)) ||
            (st = q35_json_bool_opt(p, "invert", field, &invert)))
            return st;
        if (!behavior || strcmp(behavior, "Isolated"))
            return q35_fail(Q35_ERR_UNSUPPORTED, "%s: behavior '%s' is not supported (only Isolated)", field,
                            behavior ? behavior : "(none)");
        if (invert) return q35_fail(Q35_ERR_UNSUPPORTED, "%s: invert = true is not supported", field);
        const cJSON *pat = obj_field(p, "pattern");
        const char *regex = NULL, *literal = NULL;
        if (cJSON_IsObject(pat)) {
            if ((st = q35_json_str_opt(pat, "Regex", field, &regex)) ||
                (st = q35_json_str_opt(pat, "String", field, &literal)))
                return st;
        }
        if (!regex && !literal)
            return q35_fail(Q35_ERR_FORMAT, "%s: 'pattern' must be {\"Regex\": ...} or {\"String\": ...}", field);
        if (literal && !*literal) return q35_fail(Q35_ERR_FORMAT, "%s: empty String pattern", field);
        if ((st = compile_regex(regex ? regex : literal, !regex, field, &s->re))) return st;
        t->n_steps++;
        return Q35_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        int prefix = 1, use_regex = 1; /* tokenizers' defaults */
        if ((st = q35_json_bool_opt(p, "add_prefix_space", field, &prefix)) ||
            (st = q35_json_bool_opt(p, "use_regex", field, &use_regex)))
            return st;
        s->byte_level = 1;
        s->add_prefix_space = prefix;
        if (use_regex && (st = compile_regex(GPT2_PATTERN, 0, field, &s->re))) return st;
        t->n_steps++;
        return Q35_OK;
    }
    return q35_fail(Q35_ERR_UNSUPPORTED, "%s: pre_tokenizer '%s' is not supported (q35 implements Sequence, "
                    "Split, ByteLevel)", what, type);
}

static q35_status check_decoder(const cJSON *d, const char *what, int depth) {
    const char *type = NULL;
    if (!d) return q35_fail(Q35_ERR_UNSUPPORTED, "%s: no decoder (q35 needs ByteLevel)", what);
    q35_status st = q35_json_str_opt(d, "type", what, &type);
    if (st) return st;
    if (type && !strcmp(type, "ByteLevel")) return Q35_OK;
    if (type && !strcmp(type, "Sequence") && depth < 4) {
        const cJSON *list = obj_field(d, "decoders"), *it;
        int n = 0;
        if (!cJSON_IsArray(list))
            return q35_fail(Q35_ERR_FORMAT, "%s: decoder Sequence: 'decoders' must be an array", what);
        cJSON_ArrayForEach(it, list) {
            if ((st = check_decoder(it, what, depth + 1))) return st;
            n++;
        }
        if (n) return Q35_OK;
    }
    return q35_fail(Q35_ERR_UNSUPPORTED, "%s: decoder '%s' is not supported (q35 implements ByteLevel)", what,
                    type ? type : "(none)");
}

/* One line of model.merges: "a b" or ["a", "b"]. */
static q35_status merge_parts(const cJSON *m, size_t rank, const char *what, char *tmp, size_t tmp_cap,
                              const char **a, const char **b) {
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return q35_fail(Q35_ERR_FORMAT, "%s: model.merges[%zu] must be two tokens separated by one space", what,
                            rank);
        if (strlen(s) >= tmp_cap)
            return q35_fail(Q35_ERR_FORMAT, "%s: model.merges[%zu] is longer than %zu bytes", what, rank, tmp_cap - 1);
        memcpy(tmp, s, strlen(s) + 1);
        tmp[sp - s] = 0;
        *a = tmp;
        *b = tmp + (sp - s) + 1;
        return Q35_OK;
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
        cJSON_IsString(m->child->next)) {
        *a = m->child->valuestring;
        *b = m->child->next->valuestring;
        return Q35_OK;
    }
    return q35_fail(Q35_ERR_FORMAT, "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", what, rank);
}

static q35_status parse_model(q35_tokenizer *t, const cJSON *root, const cJSON *model, const char *what) {
    q35_status st;
    const char *type, *unk = NULL, *prefix = NULL, *suffix = NULL;
    int byte_fallback = 0;
    if ((st = q35_json_str_opt(model, "type", what, &type))) return st;
    if (type && strcmp(type, "BPE"))
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: model.type '%s' is not supported (q35 implements BPE)", what, type);
    const cJSON *vocab = obj_field(model, "vocab"), *merges = obj_field(model, "merges");
    if (!cJSON_IsObject(vocab)) return q35_fail(Q35_ERR_MISSING, "%s: model.vocab must be an object", what);
    if (!cJSON_IsArray(merges)) return q35_fail(Q35_ERR_MISSING, "%s: model.merges must be an array", what);
    if ((st = q35_json_str_opt(model, "unk_token", "model", &unk)) ||
        (st = q35_json_str_opt(model, "continuing_subword_prefix", "model", &prefix)) ||
        (st = q35_json_str_opt(model, "end_of_word_suffix", "model", &suffix)) ||
        (st = q35_json_bool_opt(model, "byte_fallback", "model", &byte_fallback)) ||
        (st = q35_json_bool_opt(model, "fuse_unk", "model", &t->fuse_unk)) ||
        (st = q35_json_bool_opt(model, "ignore_merges", "model", &t->ignore_merges)))
        return q35_fail_prefix(st, what);
    if (obj_field(model, "dropout"))
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: model.dropout is not supported (must be null)", what);
    if ((prefix && *prefix) || (suffix && *suffix))
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: model.continuing_subword_prefix / end_of_word_suffix are not "
                        "supported (must be empty)", what);
    if (byte_fallback)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: model.byte_fallback = true is not supported", what);

    /* ids: the largest over vocab and added_tokens sizes the table */
    const cJSON *added = obj_field(root, "added_tokens"), *it;
    if (added && !cJSON_IsArray(added)) return q35_fail(Q35_ERR_FORMAT, "%s: added_tokens must be an array", what);
    long max_id = -1;
    size_t n_vocab = 0, n_added = 0;
    cJSON_ArrayForEach(it, vocab) {
        if (!q35_json_is_int_in(it, 0, MAX_TOKEN_ID))
            return q35_fail(Q35_ERR_FORMAT, "%s: model.vocab['%.40s'] must be an integer id in [0, %ld]", what,
                            it->string ? it->string : "", MAX_TOKEN_ID);
        if ((long)it->valuedouble > max_id) max_id = (long)it->valuedouble;
        n_vocab++;
    }
    cJSON_ArrayForEach(it, added) {
        long id = -1;
        const char *content = NULL;
        if ((st = q35_json_int(it, "id", "added_tokens[]", 0, MAX_TOKEN_ID, &id)) ||
            (st = q35_json_str_opt(it, "content", "added_tokens[]", &content)))
            return q35_fail_prefix(st, what);
        if (!content || !*content)
            return q35_fail(Q35_ERR_FORMAT, "%s: added_tokens[]: token %ld needs a non-empty 'content'", what, id);
        if (id > max_id) max_id = id;
        n_added++;
    }
    if (max_id < 0) return q35_fail(Q35_ERR_FORMAT, "%s: model.vocab is empty", what);
    t->n_tok = (int32_t)(max_id + 1);
    t->tok = calloc((size_t)t->n_tok, sizeof *t->tok);
    t->added = calloc(n_added ? n_added : 1, sizeof *t->added);
    if (!t->tok || !t->added || map_init(&t->map, n_vocab + n_added) ||
        buf_reserve(&t->pool, (size_t)n_vocab * 16))
        return q35_fail(Q35_ERR_NOMEM, "%s: out of memory for %ld tokens", what, max_id + 1);

    cJSON_ArrayForEach(it, vocab) {
        int32_t id = (int32_t)it->valuedouble;
        if (t->tok[id].in_vocab)
            return q35_fail(Q35_ERR_FORMAT, "%s: model.vocab: id %d is given to both '%.40s' and '%.40s'", what,
                            (int)id, (const char *)t->pool.p + t->tok[id].text_off, it->string);
        if ((st = set_token(t, id, it->string, what))) return st;
        t->tok[id].in_vocab = 1;
        if (map_put(t, t->tok[id].text_off, t->tok[id].text_len, id))
            return q35_fail(Q35_ERR_NOMEM, "%s: token map full", what);
    }
    cJSON_ArrayForEach(it, added) {
        long id = 0;
        const char *content = NULL;
        added_tok *a = &t->added[t->n_added];
        int special = 0, single_word = 0, lstrip = 0, rstrip = 0, normalized = 0;
        q35_json_int(it, "id", "added_tokens[]", 0, MAX_TOKEN_ID, &id);
        q35_json_str_opt(it, "content", "added_tokens[]", &content);
        if ((st = q35_json_bool_opt(it, "special", "added_tokens[]", &special)) ||
            (st = q35_json_bool_opt(it, "single_word", "added_tokens[]", &single_word)) ||
            (st = q35_json_bool_opt(it, "lstrip", "added_tokens[]", &lstrip)) ||
            (st = q35_json_bool_opt(it, "rstrip", "added_tokens[]", &rstrip)))
            return q35_fail_prefix(st, what);
        normalized = !special; /* tokenizers' default when the field is absent */
        if ((st = q35_json_bool_opt(it, "normalized", "added_tokens[]", &normalized))) return q35_fail_prefix(st, what);
        *a = (added_tok){(int32_t)id, (uint8_t)special, (uint8_t)single_word, (uint8_t)lstrip, (uint8_t)rstrip,
                         (uint8_t)normalized};
        tok_info *ti = &t->tok[id];
        int same = ti->in_vocab && !strcmp((const char *)t->pool.p + ti->text_off, content);
        if (!same) {
            if (ti->in_vocab)
                q35_log(Q35_LOG_WARN, "%s: added token '%.40s' reuses id %ld of vocab token '%.40s'", what, content,
                        id, (const char *)t->pool.p + ti->text_off);
            if ((st = set_token(t, (int32_t)id, content, what))) return st;
        }
        ti->added = 1;
        ti->special = (uint8_t)special;
        if (map_put(t, ti->text_off, ti->text_len, (int32_t)id))
            return q35_fail(Q35_ERR_NOMEM, "%s: token map full", what);
        t->n_added++;
    }

    /* the one-byte symbols BPE starts from */
    for (int b = 0; b < 256; b++) {
        unsigned char u[4];
        size_t len = q35_utf8_encode(bl_char((unsigned)b), u);
        int32_t id = map_get(t, (const char *)u, len);
        t->byte_id[b] = id >= 0 && t->tok[id].in_vocab ? id : -1;
    }
    t->unk_id = -1;
    if (unk) {
        t->unk_id = map_get(t, unk, strlen(unk));
        if (t->unk_id < 0)
            return q35_fail(Q35_ERR_FORMAT, "%s: model.unk_token '%.40s' is not in model.vocab", what, unk);
    }

    /* merges: (left id, right id) -> (rank, merged id) */
    size_t n_merges = (size_t)cJSON_GetArraySize(merges);
    t->pairs_cap = pow2_at_least(2 * n_merges + 2);
    t->pairs = malloc(t->pairs_cap * sizeof *t->pairs);
    if (!t->pairs) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory for %zu merges", what, n_merges);
    for (size_t i = 0; i < t->pairs_cap; i++) t->pairs[i].key = PAIR_EMPTY;
    buf cat = {0};
    char line[1024];
    size_t rank = 0;
    cJSON_ArrayForEach(it, merges) {
        const char *a = NULL, *b = NULL;
        if ((st = merge_parts(it, rank, what, line, sizeof line, &a, &b))) break;
        int32_t ia = map_get(t, a, strlen(a)), ib = map_get(t, b, strlen(b));
        const char *missing = ia < 0 ? a : ib < 0 ? b : NULL;
        if (missing) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: model.merges[%zu] names '%.40s', which is not in model.vocab", what,
                          rank, missing);
            break;
        }
        cat.n = 0;
        if (buf_puts(&cat, a) || buf_puts(&cat, b)) {
            st = q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
            break;
        }
        int32_t im = map_get(t, (const char *)cat.p, cat.n);
        if (im < 0) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: model.merges[%zu]: the merged token '%.40s%.40s' is not in model.vocab",
                          what, rank, a, b);
            break;
        }
        uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        pair_slot *p = &t->pairs[pair_index(t, key)];
        *p = (pair_slot){key, (uint32_t)rank, im}; /* a repeated pair keeps its last rank, as tokenizers */
        rank++;
    }
    free(cat.p);
    return st;
}

static void trie_free(trie *tr) { free(tr->node); }

static q35_status build_tries(q35_tokenizer *t, const char *what) {
    if (trie_init(&t->raw_trie) || trie_init(&t->norm_trie)) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
    for (size_t i = 0; i < t->n_added; i++) {
        const added_tok *a = &t->added[i];
        const tok_info *ti = &t->tok[a->id];
        const unsigned char *s = t->pool.p + ti->text_off;
        size_t n = ti->text_len;
        if (!a->normalized) {
            if (trie_insert(&t->raw_trie, s, n, (int32_t)i)) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
            continue;
        }
        unsigned char *norm = NULL;
        size_t nn = 0;
        q35_status st = t->nfc ? nfc_apply(s, n, &norm, &nn) : Q35_OK;
        if (st) return q35_fail_prefix(st, what);
        int bad = trie_insert(&t->norm_trie, norm ? norm : s, norm ? nn : n, (int32_t)i);
        free(norm);
        if (bad) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
    }
    return Q35_OK;
}

static const char *token_string(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "content") : NULL;
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static q35_status parse_config(q35_tokenizer *t, const char *text, size_t len, const char *what) {
    q35_status st = q35_json_parse(text, len, what, &t->config);
    if (st) return st;
    if (!cJSON_IsObject(t->config)) return q35_fail(Q35_ERR_FORMAT, "%s: must be a JSON object", what);
    const cJSON *ct = obj_field(t->config, "chat_template");
    if (cJSON_IsString(ct)) {
        t->chat_template = ct->valuestring;
    } else if (cJSON_IsArray(ct)) { /* [{"name": ..., "template": ...}]: the "default" one */
        const cJSON *it;
        cJSON_ArrayForEach(it, ct) {
            const cJSON *name = obj_field(it, "name"), *tpl = obj_field(it, "template");
            if (cJSON_IsString(name) && cJSON_IsString(tpl) && !strcmp(name->valuestring, "default"))
                t->chat_template = tpl->valuestring;
        }
    } else if (ct) {
        return q35_fail(Q35_ERR_FORMAT, "%s: chat_template must be a string or a list of {name, template}", what);
    }
    static const char *names[3] = {"eos_token", "pad_token", "bos_token"};
    const char **dst[3] = {&t->eos, &t->pad, &t->bos};
    int32_t *ids[3] = {&t->eos_id, &t->pad_id, &t->bos_id};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = obj_field(t->config, names[i]);
        *dst[i] = v ? token_string(v) : NULL;
        if (v && !*dst[i])
            return q35_fail(Q35_ERR_FORMAT, "%s: %s must be a string or an object with 'content'", what, names[i]);
        *ids[i] = *dst[i] ? q35_token_id(t, *dst[i]) : -1;
    }
    return Q35_OK;
}

q35_status q35_tokenizer_load_mem(const char *json_text, size_t len, const char *what, const char *config_text,
                                  size_t config_len, const char *config_what, q35_tokenizer **out) {
    if (!out || (!json_text && len)) return q35_fail(Q35_ERR_ARG, "q35_tokenizer_load: NULL argument");
    *out = NULL;
    if (!what) what = "tokenizer.json";
    q35_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
    t->eos_id = t->pad_id = t->bos_id = -1;
    cJSON *root = NULL;
    q35_status st = q35_json_parse(json_text ? json_text : "", len, what, &root);
    if (!st && !cJSON_IsObject(root)) st = q35_fail(Q35_ERR_FORMAT, "%s: must be a JSON object", what);
    const cJSON *model = st ? NULL : obj_field(root, "model");
    if (!st && !cJSON_IsObject(model)) st = q35_fail(Q35_ERR_MISSING, "%s: missing object 'model'", what);
    if (!st) st = parse_model(t, root, model, what);
    if (!st) st = parse_normalizer(t, obj_field(root, "normalizer"), what, 0);
    if (!st) {
        const cJSON *pre = obj_field(root, "pre_tokenizer");
        if (!pre) st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: no pre_tokenizer (q35 needs ByteLevel)", what);
        else st = parse_pretokenizer(t, pre, what, 0);
        if (!st && (t->n_steps == 0 || !t->step[t->n_steps - 1].byte_level))
            st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: the pre_tokenizer must end with ByteLevel", what);
    }
    if (!st) st = check_decoder(obj_field(root, "decoder"), what, 0);
    if (!st) st = build_tries(t, what);
    cJSON_Delete(root);
    if (!st && config_text) st = parse_config(t, config_text, config_len, config_what ? config_what : "tokenizer_config.json");
    if (st) {
        q35_tokenizer_free(t);
        return st;
    }
    *out = t;
    return Q35_OK;
}

static q35_status load_paths(const char *json_path, const char *config_path, q35_tokenizer **out) {
    char *text = NULL, *cfg = NULL;
    size_t len = 0, cfg_len = 0;
    q35_status st = q35_read_file(json_path, TOKENIZER_JSON_MAX, &text, &len);
    if (st) return st;
    if (config_path && q35_file_exists(config_path)) {
        st = q35_read_file(config_path, CONFIG_JSON_MAX, &cfg, &cfg_len);
        if (st) {
            free(text);
            return st;
        }
    }
    st = q35_tokenizer_load_mem(text, len, json_path, cfg, cfg_len, config_path, out);
    free(text);
    free(cfg);
    return st;
}

q35_status q35_tokenizer_load(const char *dir, q35_tokenizer **out) {
    if (!dir || !out) return q35_fail(Q35_ERR_ARG, "q35_tokenizer_load: NULL argument");
    *out = NULL;
    char json_path[4096], cfg_path[4096];
    q35_status st;
    if ((st = q35_path_join(json_path, sizeof json_path, dir, "tokenizer.json")) ||
        (st = q35_path_join(cfg_path, sizeof cfg_path, dir, "tokenizer_config.json")))
        return st;
    return load_paths(json_path, cfg_path, out);
}

q35_status q35_tokenizer_load_file(const char *path, q35_tokenizer **out) {
    if (!path || !out) return q35_fail(Q35_ERR_ARG, "q35_tokenizer_load_file: NULL argument");
    *out = NULL;
    return load_paths(path, NULL, out);
}

void q35_tokenizer_free(q35_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_steps; i++) pcre2_code_free(t->step[i].re);
    free(t->tok);
    free(t->pool.p);
    free(t->map.slot);
    free(t->map.key);
    free(t->pairs);
    free(t->added);
    trie_free(&t->raw_trie);
    trie_free(&t->norm_trie);
    cJSON_Delete(t->config);
    free(t);
}

/* ------------------------------------------------------------------------------------- accessors */

int q35_tokenizer_vocab_size(const q35_tokenizer *t) { return t ? t->n_tok : 0; }

int32_t q35_token_id(const q35_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    return map_get(t, token, strlen(token));
}

const char *q35_token_bytes(const q35_tokenizer *t, int32_t id, size_t *len) {
    if (len) *len = 0;
    if (!t || id < 0 || id >= t->n_tok || !(t->tok[id].in_vocab || t->tok[id].added)) return NULL;
    if (len) *len = t->tok[id].bytes_len;
    return (const char *)t->pool.p + t->tok[id].bytes_off;
}

int q35_tokenizer_token_kind(const q35_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_tok) return Q35_TOKEN_INVALID;
    const tok_info *ti = &t->tok[id];
    if (ti->added) return ti->special ? Q35_TOKEN_SPECIAL : Q35_TOKEN_ADDED;
    return ti->in_vocab ? Q35_TOKEN_REGULAR : Q35_TOKEN_INVALID;
}

const char *q35_tokenizer_token_text(const q35_tokenizer *t, int32_t id) {
    if (q35_tokenizer_token_kind(t, id) == Q35_TOKEN_INVALID) return NULL;
    return (const char *)t->pool.p + t->tok[id].text_off;
}

const cJSON *q35_tokenizer_config(const q35_tokenizer *t) { return t ? t->config : NULL; }
const char *q35_tokenizer_chat_template(const q35_tokenizer *t) { return t ? t->chat_template : NULL; }
const char *q35_tokenizer_eos_token(const q35_tokenizer *t) { return t ? t->eos : NULL; }
const char *q35_tokenizer_pad_token(const q35_tokenizer *t) { return t ? t->pad : NULL; }
const char *q35_tokenizer_bos_token(const q35_tokenizer *t) { return t ? t->bos : NULL; }
int32_t q35_tokenizer_eos_id(const q35_tokenizer *t) { return t ? t->eos_id : -1; }
int32_t q35_tokenizer_pad_id(const q35_tokenizer *t) { return t ? t->pad_id : -1; }
int32_t q35_tokenizer_bos_id(const q35_tokenizer *t) { return t ? t->bos_id : -1; }

/* ---------------------------------------------------------------------------------------- encoding */

typedef struct heap_item {
    uint32_t rank; /* merge rank (lower first) */
    int32_t pos;   /* left symbol index (lower first on equal rank) */
    int32_t id;    /* the merged id this entry expects */
} heap_item;

typedef struct enc_ctx {
    const q35_tokenizer *t;
    int parse_special;      /* 0: special added tokens are not matched (tokenizers' encode_special_tokens) */
    int32_t *ids;           /* [cap] output ids, n used */
    size_t n, cap;
    pcre2_match_data *md;   /* match data for every regex step (one ovector pair) */
    int32_t *sym;           /* [sym_cap] BPE symbol ids; -2 marks a symbol merged into its left neighbour */
    int32_t *prev, *next;   /* [sym_cap] neighbours in the symbol list, -1 at the ends */
    size_t sym_cap;
    heap_item *heap;        /* [heap_cap] pending merges, a binary min-heap */
    size_t heap_n, heap_cap;
    buf prefixed;           /* ByteLevel add_prefix_space copy of a piece */
    buf word;               /* a piece in the ByteLevel alphabet (ignore_merges lookups) */
    q35_status st;          /* first failure; stops all work */
} enc_ctx;

static void emit(enc_ctx *c, int32_t id) {
    if (c->st) return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        int32_t *p = realloc(c->ids, cap * sizeof *p);
        if (!p) {
            c->st = q35_fail(Q35_ERR_NOMEM, "q35_tokenize: out of memory");
            return;
        }
        c->ids = p;
        c->cap = cap;
    }
    c->ids[c->n++] = id;
}

static int heap_less(const heap_item *a, const heap_item *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(enc_ctx *c, heap_item it) {
    size_t i = c->heap_n++; /* capacity is reserved by bpe() */
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = it;
}

static heap_item heap_pop(enc_ctx *c) {
    heap_item top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l >= n) break;
        m = l;
        if (l + 1 < n && heap_less(&c->heap[l + 1], &c->heap[l])) m = l + 1;
        if (!heap_less(&c->heap[m], &last)) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

static void push_pair(enc_ctx *c, int32_t pos) {
    int32_t nx = c->next[pos];
    if (nx < 0) return;
    const pair_slot *p = pair_get(c->t, c->sym[pos], c->sym[nx]);
    if (p) heap_push(c, (heap_item){p->rank, pos, p->id});
}

/* BPE over one pre-tokenized piece (raw bytes). */
static void bpe(enc_ctx *c, const unsigned char *s, size_t n) {
    const q35_tokenizer *t = c->t;
    if (c->st || n == 0) return;
    if (n == 1 && t->byte_id[s[0]] >= 0) {
        emit(c, t->byte_id[s[0]]);
        return;
    }
    if (t->ignore_merges) {
        c->word.n = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char u[4];
            if (buf_put(&c->word, u, q35_utf8_encode(bl_char(s[i]), u))) {
                c->st = q35_fail(Q35_ERR_NOMEM, "q35_tokenize: out of memory");
                return;
            }
        }
        int32_t id = map_get(t, (const char *)c->word.p, c->word.n);
        if (id >= 0 && t->tok[id].in_vocab) {
            emit(c, id);
            return;
        }
    }
    if (n > c->sym_cap) {
        size_t cap = n < 64 ? 64 : n;
        free(c->sym);
        free(c->prev);
        free(c->next);
        free(c->heap);
        c->sym = malloc(cap * sizeof *c->sym);
        c->prev = malloc(cap * sizeof *c->prev);
        c->next = malloc(cap * sizeof *c->next);
        c->heap = malloc(3 * cap * sizeof *c->heap);
        c->sym_cap = c->sym && c->prev && c->next && c->heap ? cap : 0;
        c->heap_cap = 3 * c->sym_cap;
        if (!c->sym_cap) {
            c->st = q35_fail(Q35_ERR_NOMEM, "q35_tokenize: out of memory for a %zu-byte piece", n);
            return;
        }
    }
    /* initial symbols: one per byte; bytes the vocabulary lacks become unk, or vanish without one */
    int32_t m = 0;
    int last_unk = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[s[i]];
        if (id < 0) {
            if (t->unk_id < 0) continue;
            if (t->fuse_unk && last_unk) continue;
            id = t->unk_id;
            last_unk = 1;
        } else {
            last_unk = 0;
        }
        c->sym[m] = id;
        c->prev[m] = m - 1;
        c->next[m] = m + 1;
        m++;
    }
    if (m == 0) return;
    c->next[m - 1] = -1;
    c->heap_n = 0;
    for (int32_t i = 0; i + 1 < m; i++) push_pair(c, i);
    /* at most m - 1 merges, each pushing at most 2 entries: the heap never exceeds 3m */
    while (c->heap_n) {
        heap_item top = heap_pop(c);
        int32_t pos = top.pos;
        if (c->sym[pos] < 0) continue;
        int32_t nx = c->next[pos];
        if (nx < 0) continue;
        const pair_slot *p = pair_get(t, c->sym[pos], c->sym[nx]);
        if (!p || p->id != top.id) continue; /* stale entry */
        c->sym[pos] = p->id;
        c->sym[nx] = -2;
        c->next[pos] = c->next[nx];
        if (c->next[nx] >= 0) c->prev[c->next[nx]] = pos;
        if (c->prev[pos] >= 0) push_pair(c, c->prev[pos]);
        push_pair(c, pos);
    }
    for (int32_t i = 0; i >= 0; i = c->next[i]) emit(c, c->sym[i]);
}

static void pretokenize(enc_ctx *c, const unsigned char *s, size_t n, int k);

/* Split s[0..n) with re (behavior Isolated): matches and the text between them are pieces; an
 * empty match only marks a split point, and the search then resumes one character later. */
static void split_regex(enc_ctx *c, const pcre2_code *re, const unsigned char *s, size_t n, int next_k) {
    size_t pos = 0, last = 0;
    while (!c->st && pos <= n) {
        int rc = pcre2_match(re, s, n, pos, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            c->st = q35_fail(Q35_ERR_ARG, "q35_tokenize: the pre-tokenizer regex failed at byte %zu: %s", pos,
                             (char *)msg);
            return;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms || me > n) { /* \K in a lookahead can do this; treat as a split point */
            me = ms;
        }
        if (ms > last) pretokenize(c, s + last, ms - last, next_k);
        if (me > ms) {
            pretokenize(c, s + ms, me - ms, next_k);
            last = pos = me;
        } else {
            if (ms > last) last = ms;
            if (ms >= n) break;
            size_t len;
            first_cp(s + ms, n - ms, &len);
            pos = ms + len;
        }
    }
    if (last < n) pretokenize(c, s + last, n - last, next_k);
}

/* Pre-tokenizer step k on a piece; after the last step, BPE. */
static void pretokenize(enc_ctx *c, const unsigned char *s, size_t n, int k) {
    const q35_tokenizer *t = c->t;
    if (c->st || n == 0) return;
    if (k == t->n_steps) {
        bpe(c, s, n);
        return;
    }
    const pre_step *st = &t->step[k];
    if (st->byte_level && st->add_prefix_space && s[0] != ' ') {
        /* the last step: BPE below never touches c->prefixed, so one buffer serves every piece */
        c->prefixed.n = 0;
        if (buf_put(&c->prefixed, " ", 1) || buf_put(&c->prefixed, s, n)) {
            c->st = q35_fail(Q35_ERR_NOMEM, "q35_tokenize: out of memory");
            return;
        }
        s = c->prefixed.p;
        n = c->prefixed.n;
    }
    if (st->re) split_regex(c, st->re, s, n, k + 1);
    else pretokenize(c, s, n, k + 1);
}

static int ends_with_word(const unsigned char *s, size_t n) {
    size_t at;
    return n > 0 && is_word_cp(last_cp(s, n, &at));
}

static int starts_with_word(const unsigned char *s, size_t n) {
    size_t len;
    return n > 0 && is_word_cp(first_cp(s, n, &len));
}

/* Start of the whitespace run that ends s[0..n). */
static size_t space_run_start(const unsigned char *s, size_t n) {
    while (n > 0) {
        size_t at;
        if (!is_space_cp(last_cp(s, n, &at))) break;
        n = at;
    }
    return n;
}

/* Length of the whitespace run that starts s[0..n). */
static size_t space_run_len(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t len;
        if (!is_space_cp(first_cp(s + i, n - i, &len))) break;
        i += len;
    }
    return i;
}

static void normalized_stage(enc_ctx *c, const unsigned char *s, size_t n);

/* Cut the added tokens of tr out of s[0..n) (tokenizers' find_matches), passing the text between
 * them on: stage 1 to normalization, stage 2 to the pre-tokenizer. */
static void split_added(enc_ctx *c, const trie *tr, const unsigned char *s, size_t n, int stage) {
    const q35_tokenizer *t = c->t;
    size_t i = 0, start_offset = 0;
    while (i < n && !c->st) {
        size_t len = 0;
        int32_t k = trie_longest(tr, s + i, n - i, &len);
        if (k < 0) {
            i++;
            continue;
        }
        size_t start = i, stop = i + len;
        i = stop; /* the automaton resumes after the match even when the match is then discarded */
        const added_tok *a = &t->added[k];
        if (!c->parse_special && a->special) continue;
        if (a->single_word && ((start > 0 && ends_with_word(s, start)) || (stop < n && starts_with_word(s + stop, n - stop))))
            continue;
        if (a->lstrip) {
            size_t ns = space_run_start(s, start);
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) stop += space_run_len(s + stop, n - stop);
        if (start_offset < start) {
            if (stage == 1) normalized_stage(c, s + start_offset, start - start_offset);
            else pretokenize(c, s + start_offset, start - start_offset, 0);
        }
        emit(c, a->id);
        start_offset = stop;
    }
    if (start_offset < n) {
        if (stage == 1) normalized_stage(c, s + start_offset, n - start_offset);
        else pretokenize(c, s + start_offset, n - start_offset, 0);
    }
}

static void normalized_stage(enc_ctx *c, const unsigned char *s, size_t n) {
    const q35_tokenizer *t = c->t;
    if (c->st || n == 0) return;
    unsigned char *norm = NULL;
    size_t nn = 0;
    if (t->nfc) {
        q35_status st = nfc_apply(s, n, &norm, &nn);
        if (st) {
            c->st = st;
            return;
        }
        if (norm) s = norm, n = nn;
    }
    if (t->norm_trie.n_tokens) split_added(c, &t->norm_trie, s, n, 2);
    else pretokenize(c, s, n, 0);
    free(norm);
}

q35_status q35_tokenize(const q35_tokenizer *t, const char *text, size_t len, int parse_special, int32_t **ids,
                        size_t *n_ids) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!t || !ids || !n_ids || (!text && len)) return q35_fail(Q35_ERR_ARG, "q35_tokenize: NULL argument");
    enc_ctx c = {.t = t, .parse_special = parse_special};
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    unsigned char *clean = NULL;
    if (!q35_utf8_valid(s, len)) {
        size_t cl = q35_utf8_sanitized_len(s, len);
        clean = malloc(cl ? cl : 1);
        if (!clean) return q35_fail(Q35_ERR_NOMEM, "q35_tokenize: out of memory for %zu bytes", cl);
        len = q35_utf8_sanitize(s, len, clean);
        s = clean;
    }
    c.md = pcre2_match_data_create(1, NULL);
    if (!c.md) c.st = q35_fail(Q35_ERR_NOMEM, "q35_tokenize: out of memory");
    if (!c.st && len) {
        if (t->raw_trie.n_tokens) split_added(&c, &t->raw_trie, s, len, 1);
        else normalized_stage(&c, s, len);
    }
    if (!c.st && !c.ids) emit(&c, 0), c.n = 0; /* an empty result is still a malloc'd array */
    pcre2_match_data_free(c.md);
    free(c.sym);
    free(c.prev);
    free(c.next);
    free(c.heap);
    free(c.prefixed.p);
    free(c.word.p);
    free(clean);
    if (c.st) {
        free(c.ids);
        return c.st;
    }
    *ids = c.ids;
    *n_ids = c.n;
    return Q35_OK;
}

/* ---------------------------------------------------------------------------------------- decoding */

q35_status q35_detokenize(const q35_tokenizer *t, const int32_t *ids, size_t n, char **text) {
    if (text) *text = NULL;
    if (!t || !text || (!ids && n)) return q35_fail(Q35_ERR_ARG, "q35_detokenize: NULL argument");
    buf raw = {0};
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *b = q35_token_bytes(t, ids[i], &len);
        if (!b) {
            free(raw.p);
            return q35_fail(Q35_ERR_ARG, "q35_detokenize: ids[%zu] = %d is not a token id (vocabulary size %d)", i,
                            (int)ids[i], (int)t->n_tok);
        }
        if (buf_put(&raw, b, len)) {
            free(raw.p);
            return q35_fail(Q35_ERR_NOMEM, "q35_detokenize: out of memory");
        }
    }
    size_t cl = q35_utf8_sanitized_len(raw.p ? raw.p : (const unsigned char *)"", raw.n);
    char *out = malloc(cl + 1);
    if (!out) {
        free(raw.p);
        return q35_fail(Q35_ERR_NOMEM, "q35_detokenize: out of memory");
    }
    size_t w = q35_utf8_sanitize(raw.p ? raw.p : (const unsigned char *)"", raw.n, (unsigned char *)out);
    out[w] = 0;
    free(raw.p);
    *text = out;
    return Q35_OK;
}

struct q35_stream_decoder {
    const q35_tokenizer *t;
    unsigned char tail[4]; /* bytes of a UTF-8 sequence still incomplete (at most 3) */
    size_t n_tail;
    buf ready;             /* decoded text not yet handed out (the caller's buffer was too small) */
    size_t ready_at;       /* ready.p[ready_at..ready.n) is still to hand out */
};

q35_stream_decoder *q35_stream_decoder_new(const q35_tokenizer *t) {
    if (!t) return NULL;
    q35_stream_decoder *d = calloc(1, sizeof *d);
    if (d) d->t = t;
    return d;
}

void q35_stream_decoder_free(q35_stream_decoder *d) {
    if (!d) return;
    free(d->ready.p);
    free(d);
}

/* Move as much ready text as fits (whole characters) into out[cap]. */
static size_t drain(q35_stream_decoder *d, char *out, size_t cap) {
    if (!out || cap == 0) return 0;
    size_t avail = d->ready.n - d->ready_at, w = avail < cap - 1 ? avail : cap - 1;
    if (w < avail) /* do not cut a character: back up to the start of one */
        while (w > 0 && (d->ready.p[d->ready_at + w] & 0xC0) == 0x80) w--;
    if (w) memcpy(out, d->ready.p + d->ready_at, w);
    out[w] = 0;
    d->ready_at += w;
    if (d->ready_at == d->ready.n) d->ready.n = d->ready_at = 0;
    return w;
}

/* Append the sanitized form of s[0..n) to ready. */
static int ready_add(q35_stream_decoder *d, const unsigned char *s, size_t n) {
    if (d->ready_at && d->ready_at == d->ready.n) d->ready.n = d->ready_at = 0;
    size_t cl = q35_utf8_sanitized_len(s, n);
    if (cl == 0) return 0;
    if (buf_reserve(&d->ready, cl)) return -1;
    d->ready.n += q35_utf8_sanitize(s, n, d->ready.p + d->ready.n);
    return 0;
}

size_t q35_stream_decoder_push(q35_stream_decoder *d, int32_t id, char *out, size_t cap) {
    if (out && cap) out[0] = 0;
    if (!d) return 0;
    size_t len;
    const unsigned char *b = (const unsigned char *)q35_token_bytes(d->t, id, &len);
    if (b && len) {
        unsigned char stack[256];
        size_t total = d->n_tail + len;
        unsigned char *joined = total <= sizeof stack ? stack : malloc(total);
        if (!joined) return drain(d, out, cap);
        memcpy(joined, d->tail, d->n_tail);
        memcpy(joined + d->n_tail, b, len);
        size_t k = q35_utf8_complete_prefix(joined, total);
        if (ready_add(d, joined, k) == 0) {
            d->n_tail = total - k;
            memcpy(d->tail, joined + k, d->n_tail);
        }
        if (joined != stack) free(joined);
    }
    return drain(d, out, cap);
}

size_t q35_stream_decoder_flush(q35_stream_decoder *d, char *out, size_t cap) {
    if (out && cap) out[0] = 0;
    if (!d) return 0;
    if (d->n_tail && ready_add(d, d->tail, d->n_tail) == 0) d->n_tail = 0;
    return drain(d, out, cap);
}
