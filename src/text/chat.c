/* The Qwen3.5 chat template, rendered directly in C (no Jinja engine).
 *
 * This follows chat_template.jinja of Qwen3.5 (docs/qwen35-spec.md §6.2) statement by statement, with the
 * data model transformers gives it: messages and tools are JSON as Python's json.loads sees them (ints of
 * any size, floats, dicts with their key order where a repeated key keeps its first place and its last
 * value), top-level message keys whose value is null are dropped, reasoning_content falls back to
 * 'thinking' then 'reasoning' (transformers 5 aliases them), `|trim` is Python str.strip(), `tojson` is
 * json.dumps(ensure_ascii=False) and `|string` is Python str().
 *
 * Errors: a conversation the template itself refuses (raise_exception) fails with Q35_ERR_TEMPLATE and the
 * template's own message; JSON of the wrong shape fails with Q35_ERR_FORMAT naming the field. The shape is
 * checked before rendering, so a FORMAT error wins over a TEMPLATE one.
 *
 * Extensions over the template (which would fail in transformers):
 *   - tool-call "arguments" given as a JSON string (OpenAI clients send them so) are parsed to an object
 *     first; an empty or all-blank string means {};
 *   - messages_json may also be an object {"messages": [...], "tools": [...]} (other keys ignored).
 */
#include "text/chat.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "formats/json.h"

/* ------------------------------------------------------------------------------------ growable buffer */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    if (n > SIZE_MAX / 4 - b->n) {
        b->oom = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_clear(sbuf *b) {
    b->n = 0;
    if (b->p) b->p[0] = 0;
}

/* -------------------------------------------------------------------------------- Python float repr */
/* Digits d[0..nd) and exponent e with |x| = d0.d1d2... * 10^e, the shortest that reads back as |x|
 * (and of those the nearest), as Python's repr (David Gay's mode 0) chooses. */
static int reads_back(const char *digits, int nd, int e, double ax) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*se%d", nd, digits, e - (nd - 1));
    return strtod(buf, NULL) == ax;
}

static void shortest_digits(double ax, char digits[20], int *ndigits, int *exp10) {
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, ax);
        /* buf: d[.ddd]e[+-]XX */
        char d[20];
        int nd = 0;
        const char *q = buf;
        for (; *q && *q != 'e'; q++)
            if (*q >= '0' && *q <= '9' && nd < 19) d[nd++] = *q;
        int e = (*q == 'e') ? atoi(q + 1) : 0;
        d[nd] = 0;
        int ok = reads_back(d, nd, e, ax);
        if (!ok && p > 1) {
            /* At a power of two the round-trip interval is lopsided: the correctly rounded p-digit
             * string may miss while its neighbour one unit away hits. */
            char up[21], dn[21];
            memcpy(up, d, (size_t)nd + 1);
            memcpy(dn, d, (size_t)nd + 1);
            int i = nd - 1;
            while (i >= 0 && up[i] == '9') up[i--] = '0';
            int upe = e;
            if (i >= 0) up[i]++;
            else {
                memmove(up + 1, up, (size_t)nd + 1);
                up[0] = '1';
                up[nd] = 0; /* one more leading digit, same length: drop the last (a zero) */
                upe = e + 1;
            }
            i = nd - 1;
            while (i >= 0 && dn[i] == '0') dn[i--] = '9';
            int dn_ok = 0, dne = e;
            if (i >= 0) {
                dn[i]--;
                if (dn[0] == '0') { /* 1000 - 1 = 0999: one digit fewer, exponent down */
                    memmove(dn, dn + 1, (size_t)nd);
                    dne = e - 1;
                    dn_ok = nd - 1 > 0 && reads_back(dn, nd - 1, dne, ax);
                    if (dn_ok) {
                        memcpy(d, dn, (size_t)nd);
                        nd = nd - 1;
                        e = dne;
                        ok = 1;
                    }
                } else if (reads_back(dn, nd, dne, ax)) {
                    memcpy(d, dn, (size_t)nd + 1);
                    ok = 1;
                }
            }
            if (!ok && reads_back(up, nd, upe, ax)) {
                memcpy(d, up, (size_t)nd + 1);
                e = upe;
                ok = 1;
            }
        }
        if (ok || p == 17) {
            while (nd > 1 && d[nd - 1] == '0') nd--;
            memcpy(digits, d, (size_t)nd);
            digits[nd] = 0;
            *ndigits = nd;
            *exp10 = e;
            return;
        }
    }
}

void q35_py_float_repr(double x, char out[32]) {
    if (isnan(x)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(x)) {
        strcpy(out, x < 0 ? "-inf" : "inf");
        return;
    }
    if (x == 0) {
        strcpy(out, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    char d[20];
    int nd, e;
    shortest_digits(fabs(x), d, &nd, &e);
    int decpt = e + 1; /* |x| = 0.d0d1... * 10^decpt */
    char *o = out;
    if (x < 0) *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            memcpy(o, d, (size_t)nd);
            o += nd;
        } else if (decpt >= nd) {
            memcpy(o, d, (size_t)nd);
            o += nd;
            for (int i = nd; i < decpt; i++) *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else {
            memcpy(o, d, (size_t)decpt);
            o += decpt;
            *o++ = '.';
            memcpy(o, d + decpt, (size_t)(nd - decpt));
            o += nd - decpt;
        }
        *o = 0;
    } else {
        *o++ = d[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)(nd - 1));
            o += nd - 1;
        }
        int ex = decpt - 1;
        char eb[16];
        snprintf(eb, sizeof eb, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        memcpy(o, eb, strlen(eb) + 1);
    }
}

/* ----------------------------------------------------------------------------------- JSON, Python's way */
typedef struct numtok {
    size_t off, len;
} numtok;

/* RFC 8259 number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int valid_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return 0;
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return 0;
    if (i < n && s[i] == '.') {
        i++;
        size_t st = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == st) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t st = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == st) return 0;
    }
    return i == n;
}

static int is_numchar(char c) { return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'; }

/* Collect the number tokens of a JSON text cJSON accepted, in source order, and refuse what Python's
 * json.loads refuses but cJSON lets through (sloppy numbers, raw control characters in strings) or what a
 * C string cannot hold (\u0000). */
static q35_status scan_numbers(const char *t, size_t len, const char *what, numtok **toks, size_t *ntok) {
    size_t cap = 0, n = 0;
    numtok *v = NULL;
    *toks = NULL;
    *ntok = 0;
    for (size_t i = 0; i < len;) {
        char c = t[i];
        if (c == '"') {
            i++;
            while (i < len && t[i] != '"') {
                unsigned char ch = (unsigned char)t[i];
                if (ch < 0x20) {
                    free(v);
                    return q35_fail(Q35_ERR_FORMAT, "%s: control character 0x%02x inside a string at byte %zu", what,
                                    ch, i);
                }
                if (ch == '\\') {
                    if (i + 5 < len && t[i + 1] == 'u' && memcmp(t + i + 2, "0000", 4) == 0) {
                        free(v);
                        return q35_fail(Q35_ERR_FORMAT, "%s: \\u0000 in a string (at byte %zu) is not supported",
                                        what, i);
                    }
                    i += 2;
                    continue;
                }
                i++;
            }
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t st = i;
            while (i < len && is_numchar(t[i])) i++;
            if (!valid_number(t + st, i - st)) {
                free(v);
                return q35_fail(Q35_ERR_FORMAT, "%s: malformed number '%.*s' at byte %zu", what,
                                (int)(i - st > 40 ? 40 : i - st), t + st, st);
            }
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 16;
                numtok *nv = realloc(v, nc * sizeof *nv);
                if (!nv) {
                    free(v);
                    return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
                }
                v = nv;
                cap = nc;
            }
            v[n].off = st;
            v[n].len = i - st;
            n++;
        } else {
            i++;
        }
    }
    *toks = v;
    *ntok = n;
    return Q35_OK;
}

static q35_status attach_numbers(cJSON *node, const char *t, const numtok *toks, size_t ntok, size_t *k) {
    for (; node; node = node->next) {
        if (cJSON_IsNumber(node)) {
            if (*k >= ntok) return Q35_ERR_FORMAT;
            char *s = cJSON_malloc(toks[*k].len + 1);
            if (!s) return Q35_ERR_NOMEM;
            memcpy(s, t + toks[*k].off, toks[*k].len);
            s[toks[*k].len] = 0;
            node->valuestring = s; /* cJSON_Delete frees valuestring of any non-reference node */
            (*k)++;
        } else if (node->child) {
            q35_status st = attach_numbers(node->child, t, toks, ntok, k);
            if (st) return st;
        }
    }
    return Q35_OK;
}

typedef struct keyref {
    const char *key;
    size_t pos;
    cJSON *item;
} keyref;

static int keyref_cmp(const void *a, const void *b) {
    const keyref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* A repeated key keeps its first place and takes its last value, as a Python dict built by json.loads. */
static q35_status dedupe_keys(cJSON *node) {
    for (; node; node = node->next) {
        if (cJSON_IsObject(node) && node->child && node->child->next) {
            size_t n = 0;
            for (cJSON *c = node->child; c; c = c->next) n++;
            keyref *r = malloc(n * sizeof *r);
            if (!r) return Q35_ERR_NOMEM;
            size_t i = 0;
            for (cJSON *c = node->child; c; c = c->next, i++) {
                r[i].key = c->string ? c->string : "";
                r[i].pos = i;
                r[i].item = c;
            }
            qsort(r, n, sizeof *r, keyref_cmp);
            for (i = 0; i < n;) {
                size_t j = i + 1;
                while (j < n && strcmp(r[j].key, r[i].key) == 0) j++;
                if (j - i > 1) {
                    cJSON *last = cJSON_DetachItemViaPointer(node, r[j - 1].item);
                    for (size_t m = i + 1; m + 1 < j; m++) cJSON_Delete(cJSON_DetachItemViaPointer(node, r[m].item));
                    cJSON_ReplaceItemViaPointer(node, r[i].item, last);
                }
                i = j;
            }
            free(r);
        }
        if (node->child) {
            q35_status st = dedupe_keys(node->child);
            if (st) return st;
        }
    }
    return Q35_OK;
}

q35_status q35_chat_json_parse(const char *text, size_t len, const char *what, cJSON **out) {
    *out = NULL;
    cJSON *root = NULL;
    q35_status st = q35_json_parse(text, len, what, &root);
    if (st) return st;
    numtok *toks;
    size_t ntok, k = 0;
    st = scan_numbers(text, len, what, &toks, &ntok);
    if (st) {
        cJSON_Delete(root);
        return st;
    }
    st = attach_numbers(root, text, toks, ntok, &k);
    free(toks);
    if (!st && k != ntok) st = Q35_ERR_FORMAT;
    if (!st) st = dedupe_keys(root);
    if (st) {
        cJSON_Delete(root);
        return st == Q35_ERR_NOMEM ? q35_fail(st, "%s: out of memory", what)
                                   : q35_fail(st, "%s: numbers do not line up with the parsed JSON", what);
    }
    *out = root;
    return Q35_OK;
}

/* ----------------------------------------------------------------------------- json.dumps / str() */
static void put_number(sbuf *b, const cJSON *n, int as_json) {
    const char *t = n->valuestring;
    if (t && !strpbrk(t, ".eE")) { /* a Python int: its digits ("-0" reads as 0) */
        sb_puts(b, strcmp(t, "-0") == 0 ? "0" : t);
        return;
    }
    double d = t ? strtod(t, NULL) : n->valuedouble;
    char buf[40];
    if (!t && d == floor(d) && fabs(d) < 9007199254740992.0) { /* built elsewhere: integral means int */
        snprintf(buf, sizeof buf, "%lld", (long long)d);
        sb_puts(b, buf);
        return;
    }
    if (as_json && isinf(d)) sb_puts(b, d < 0 ? "-Infinity" : "Infinity");
    else if (as_json && isnan(d)) sb_puts(b, "NaN");
    else {
        q35_py_float_repr(d, buf);
        sb_puts(b, buf);
    }
}

static void put_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *esc = NULL;
        char tmp[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", c);
                esc = tmp;
            }
        }
        if (esc) {
            sb_put(b, run, (size_t)(s - run));
            sb_puts(b, esc);
            run = s + 1;
        }
    }
    sb_put(b, run, (size_t)(s - run));
    sb_put(b, "\"", 1);
}

/* json.dumps(v, ensure_ascii=False): separators ', ' and ': ', key order kept. */
static void put_json(sbuf *b, const cJSON *v) {
    if (cJSON_IsNull(v)) sb_puts(b, "null");
    else if (cJSON_IsTrue(v)) sb_puts(b, "true");
    else if (cJSON_IsFalse(v)) sb_puts(b, "false");
    else if (cJSON_IsNumber(v)) put_number(b, v, 1);
    else if (cJSON_IsString(v)) put_json_string(b, v->valuestring ? v->valuestring : "");
    else if (cJSON_IsArray(v)) {
        sb_put(b, "[", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) sb_put(b, ", ", 2);
            put_json(b, c);
        }
        sb_put(b, "]", 1);
    } else if (cJSON_IsObject(v)) {
        sb_put(b, "{", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) sb_put(b, ", ", 2);
            put_json_string(b, c->string ? c->string : "");
            sb_put(b, ": ", 2);
            put_json(b, c);
        }
        sb_put(b, "}", 1);
    } else sb_puts(b, "null"); /* cJSON_Raw / invalid: not produced by the parser */
}

/* Python str() of a scalar (strings as they are; True/False/None; ints; float repr). */
static void put_pystr(sbuf *b, const cJSON *v) {
    if (cJSON_IsString(v)) sb_puts(b, v->valuestring ? v->valuestring : "");
    else if (cJSON_IsNumber(v)) put_number(b, v, 0);
    else if (cJSON_IsTrue(v)) sb_puts(b, "True");
    else if (cJSON_IsFalse(v)) sb_puts(b, "False");
    else if (cJSON_IsNull(v)) sb_puts(b, "None");
    else put_json(b, v);
}

/* ---------------------------------------------------------------------------------- Python str ops */
/* Code point at s[i] (n bytes), its length in *l; -1 (length 1) for a malformed sequence. */
static long utf8_at(const unsigned char *s, size_t n, size_t i, size_t *l) {
    unsigned char c = s[i];
    *l = 1;
    if (c < 0x80) return c;
    size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (k == 0 || c >= 0xF8 || i + k > n) return -1;
    long cp = c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
        if ((s[i + j] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[i + j] & 0x3F);
    }
    *l = k;
    return cp;
}

/* str.isspace(): the characters Python's str.strip() removes by default. */
static int py_isspace(long c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

typedef struct span {
    const char *p;
    size_t n;
} span;

static span py_strip(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t a = 0, e = n, l;
    while (a < e) {
        long c = utf8_at(s, e, a, &l);
        if (!py_isspace(c)) break;
        a += l;
    }
    while (e > a) {
        size_t st = e - 1;
        while (st > a && e - st < 4 && (s[st] & 0xC0) == 0x80) st--;
        long c = utf8_at(s, e, st, &l);
        if (st + l != e || !py_isspace(c)) break;
        e = st;
    }
    return (span){p + a, e - a};
}

static const char *memfind(const char *h, size_t hn, const char *nd) {
    size_t nn = strlen(nd);
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}
static const char *memfind_last(const char *h, size_t hn, const char *nd) {
    size_t nn = strlen(nd);
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}
static int starts_with(span s, const char *x) {
    size_t n = strlen(x);
    return s.n >= n && memcmp(s.p, x, n) == 0;
}
static int ends_with(span s, const char *x) {
    size_t n = strlen(x);
    return s.n >= n && memcmp(s.p + s.n - n, x, n) == 0;
}

/* ------------------------------------------------------------------------------------- data access */
/* A message key: absent or null both mean undefined (apply_chat_template drops None-valued keys). */
static const cJSON *mget(const cJSON *m, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, k);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}
static int has_key(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k) != NULL; }
static int str_is(const cJSON *v, const char *s) { return v && cJSON_IsString(v) && v->valuestring && strcmp(v->valuestring, s) == 0; }
static const char *role_of(const cJSON *m) { return mget(m, "role")->valuestring; }

static int part_is_image(const cJSON *it) {
    return has_key(it, "image") || has_key(it, "image_url") || str_is(cJSON_GetObjectItemCaseSensitive(it, "type"), "image");
}
static int part_is_video(const cJSON *it) {
    return has_key(it, "video") || str_is(cJSON_GetObjectItemCaseSensitive(it, "type"), "video");
}

/* --------------------------------------------------------------------------------- shape validation */
static q35_status check_content(const cJSON *m, size_t i) {
    const cJSON *c = mget(m, "content");
    if (!c || cJSON_IsString(c)) return Q35_OK;
    if (!cJSON_IsArray(c))
        return q35_fail(Q35_ERR_FORMAT, "messages[%zu].content: expected a string or a list of parts", i);
    size_t j = 0;
    for (const cJSON *it = c->child; it; it = it->next, j++) {
        if (!cJSON_IsObject(it))
            return q35_fail(Q35_ERR_FORMAT, "messages[%zu].content[%zu]: expected an object (a content part)", i, j);
        if (!part_is_image(it) && !part_is_video(it)) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "text");
            if (t && (cJSON_IsArray(t) || cJSON_IsObject(t)))
                return q35_fail(Q35_ERR_FORMAT, "messages[%zu].content[%zu].text: expected a string", i, j);
        }
    }
    return Q35_OK;
}

static q35_status check_tool_calls(cJSON *m, size_t i) {
    cJSON *tcs = (cJSON *)mget(m, "tool_calls");
    if (!tcs) return Q35_OK;
    if (!cJSON_IsArray(tcs)) return q35_fail(Q35_ERR_FORMAT, "messages[%zu].tool_calls: expected an array", i);
    size_t k = 0;
    for (cJSON *tc = tcs->child; tc; tc = tc->next, k++) {
        char path[96];
        if (!cJSON_IsObject(tc))
            return q35_fail(Q35_ERR_FORMAT, "messages[%zu].tool_calls[%zu]: expected an object", i, k);
        cJSON *f = tc;
        snprintf(path, sizeof path, "messages[%zu].tool_calls[%zu]", i, k);
        if (has_key(tc, "function")) {
            f = cJSON_GetObjectItemCaseSensitive(tc, "function");
            if (!cJSON_IsObject(f)) return q35_fail(Q35_ERR_FORMAT, "%s.function: expected an object", path);
            snprintf(path, sizeof path, "messages[%zu].tool_calls[%zu].function", i, k);
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!name) return q35_fail(Q35_ERR_FORMAT, "%s.name: missing", path);
        if (!cJSON_IsString(name)) return q35_fail(Q35_ERR_FORMAT, "%s.name: expected a string", path);
        cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (!args || cJSON_IsObject(args)) continue;
        if (!cJSON_IsString(args))
            return q35_fail(Q35_ERR_FORMAT, "%s.arguments: expected an object or a JSON string holding one", path);
        /* OpenAI shape: arguments is JSON text. Parse it (an empty string means no arguments). */
        const char *s = args->valuestring ? args->valuestring : "";
        span sp = py_strip(s, strlen(s));
        cJSON *parsed = NULL;
        char what[128];
        snprintf(what, sizeof what, "%s.arguments", path);
        if (sp.n == 0) {
            parsed = cJSON_CreateObject();
            if (!parsed) return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
        } else {
            q35_status st = q35_chat_json_parse(s, strlen(s), what, &parsed);
            if (st) return st;
            if (!cJSON_IsObject(parsed)) {
                cJSON_Delete(parsed);
                return q35_fail(Q35_ERR_FORMAT, "%s: the JSON string does not hold an object", what);
            }
        }
        if (!cJSON_ReplaceItemInObjectCaseSensitive(f, "arguments", parsed)) {
            cJSON_Delete(parsed);
            return q35_fail(Q35_ERR_NOMEM, "%s: out of memory", what);
        }
    }
    return Q35_OK;
}

static q35_status check_messages(cJSON *msgs) {
    size_t i = 0;
    for (cJSON *m = msgs->child; m; m = m->next, i++) {
        if (!cJSON_IsObject(m)) return q35_fail(Q35_ERR_FORMAT, "messages[%zu]: expected an object", i);
        const cJSON *role = mget(m, "role");
        if (!role) return q35_fail(Q35_ERR_FORMAT, "messages[%zu].role: missing", i);
        if (!cJSON_IsString(role)) return q35_fail(Q35_ERR_FORMAT, "messages[%zu].role: expected a string", i);
        q35_status st = check_content(m, i);
        if (st) return st;
        if (strcmp(role->valuestring, "assistant") == 0) {
            st = check_tool_calls(m, i);
            if (st) return st;
        }
    }
    return Q35_OK;
}

/* ------------------------------------------------------------------------------------------ render */
typedef struct render_ctx {
    sbuf out;     /* the prompt */
    sbuf tmp;     /* render_content scratch */
    int add_vision_id;
    long image_count, video_count;
} render_ctx;

/* The template's render_content macro, into c->tmp. */
static q35_status render_content(render_ctx *c, const cJSON *content, int do_vision_count, int is_system) {
    sbuf *b = &c->tmp;
    sb_clear(b);
    if (!content) return Q35_OK;
    if (cJSON_IsString(content)) {
        sb_puts(b, content->valuestring ? content->valuestring : "");
        return Q35_OK;
    }
    char num[48];
    for (const cJSON *it = content->child; it; it = it->next) {
        if (part_is_image(it)) {
            if (is_system) return q35_fail(Q35_ERR_TEMPLATE, "System message cannot contain images.");
            if (do_vision_count) c->image_count++;
            if (c->add_vision_id) {
                snprintf(num, sizeof num, "Picture %ld: ", c->image_count);
                sb_puts(b, num);
            }
            sb_puts(b, "<|vision_start|><|image_pad|><|vision_end|>");
        } else if (part_is_video(it)) {
            if (is_system) return q35_fail(Q35_ERR_TEMPLATE, "System message cannot contain videos.");
            if (do_vision_count) c->video_count++;
            if (c->add_vision_id) {
                snprintf(num, sizeof num, "Video %ld: ", c->video_count);
                sb_puts(b, num);
            }
            sb_puts(b, "<|vision_start|><|video_pad|><|vision_end|>");
        } else if (has_key(it, "text")) {
            put_pystr(b, cJSON_GetObjectItemCaseSensitive(it, "text"));
        } else {
            return q35_fail(Q35_ERR_TEMPLATE, "Unexpected item type in content.");
        }
    }
    return Q35_OK;
}

static const char TOOLS_HEAD[] = "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
static const char TOOLS_TAIL[] =
    "\n</tools>"
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested "
    "within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
    "but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge and "
    "do not tell the user about function calls\n"
    "</IMPORTANT>";

static q35_status render_assistant(render_ctx *c, const cJSON *m, span content, int after_last_query) {
    sbuf *o = &c->out;
    /* reasoning_content, or (transformers 5) the first non-null of thinking / reasoning */
    const cJSON *rc = mget(m, "reasoning_content");
    if (!rc) rc = mget(m, "thinking");
    if (!rc) rc = mget(m, "reasoning");
    span reasoning = {"", 0};
    if (rc && cJSON_IsString(rc)) {
        reasoning.p = rc->valuestring ? rc->valuestring : "";
        reasoning.n = strlen(reasoning.p);
    } else if (memfind(content.p, content.n, "</think>")) {
        /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        const char *close = memfind(content.p, content.n, "</think>");
        span r = {content.p, (size_t)(close - content.p)};
        while (r.n && r.p[r.n - 1] == '\n') r.n--;
        const char *open = memfind_last(r.p, r.n, "<think>");
        if (open) {
            size_t skip = (size_t)(open - r.p) + 7;
            r.p += skip;
            r.n -= skip;
        }
        while (r.n && r.p[0] == '\n') r.p++, r.n--;
        reasoning = r;
        /* content.split('</think>')[-1].lstrip('\n') */
        const char *last = memfind_last(content.p, content.n, "</think>") + 8;
        content.n -= (size_t)(last - content.p);
        content.p = last;
        while (content.n && content.p[0] == '\n') content.p++, content.n--;
    }
    reasoning = py_strip(reasoning.p, reasoning.n);
    sb_puts(o, "<|im_start|>assistant\n");
    if (after_last_query) {
        sb_puts(o, "<think>\n");
        sb_put(o, reasoning.p, reasoning.n);
        sb_puts(o, "\n</think>\n\n");
    }
    sb_put(o, content.p, content.n);

    const cJSON *tcs = mget(m, "tool_calls");
    if (tcs && cJSON_IsArray(tcs)) {
        for (const cJSON *tc = tcs->child; tc; tc = tc->next) {
            const cJSON *f = has_key(tc, "function") ? cJSON_GetObjectItemCaseSensitive(tc, "function") : tc;
            const char *name = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
            if (tc == tcs->child) sb_puts(o, py_strip(content.p, content.n).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
            else sb_puts(o, "\n<tool_call>\n<function=");
            sb_puts(o, name ? name : "");
            sb_puts(o, ">\n");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
            if (args) {
                for (const cJSON *a = args->child; a; a = a->next) {
                    sb_puts(o, "<parameter=");
                    sb_puts(o, a->string ? a->string : "");
                    sb_puts(o, ">\n");
                    if (cJSON_IsObject(a) || cJSON_IsArray(a)) put_json(o, a);
                    else put_pystr(o, a);
                    sb_puts(o, "\n</parameter>\n");
                }
            }
            sb_puts(o, "</function>\n</tool_call>");
        }
    }
    sb_puts(o, "<|im_end|>\n");
    return Q35_OK;
}

static q35_status render(render_ctx *c, const cJSON *msgs, const cJSON *tools, int gen_prompt, int thinking) {
    sbuf *o = &c->out;
    size_t n = (size_t)cJSON_GetArraySize(msgs);
    if (n == 0) return q35_fail(Q35_ERR_TEMPLATE, "No messages provided.");
    const cJSON **m = malloc(n * sizeof *m);
    if (!m) return q35_fail(Q35_ERR_NOMEM, "chat template: out of memory");
    size_t i = 0;
    for (const cJSON *it = msgs->child; it && i < n; it = it->next) m[i++] = it;
    q35_status st = Q35_OK;
    span content;

    int first_is_system = strcmp(role_of(m[0]), "system") == 0;
    if (tools && cJSON_IsArray(tools) && tools->child) {
        sb_puts(o, TOOLS_HEAD);
        for (const cJSON *t = tools->child; t; t = t->next) {
            sb_puts(o, "\n");
            put_json(o, t);
        }
        sb_puts(o, TOOLS_TAIL);
        if (first_is_system) {
            if ((st = render_content(c, mget(m[0], "content"), 0, 1))) goto done;
            content = py_strip(c->tmp.p ? c->tmp.p : "", c->tmp.n);
            if (content.n) {
                sb_puts(o, "\n\n");
                sb_put(o, content.p, content.n);
            }
        }
        sb_puts(o, "<|im_end|>\n");
    } else if (first_is_system) {
        if ((st = render_content(c, mget(m[0], "content"), 0, 1))) goto done;
        content = py_strip(c->tmp.p ? c->tmp.p : "", c->tmp.n);
        sb_puts(o, "<|im_start|>system\n");
        sb_put(o, content.p, content.n);
        sb_puts(o, "<|im_end|>\n");
    }

    /* The last user message that is not a wrapped tool response: assistant turns after it keep their
     * reasoning. */
    int multi_step_tool = 1;
    size_t last_query = n - 1;
    for (i = n; i-- > 0 && multi_step_tool;) {
        if (strcmp(role_of(m[i]), "user") != 0) continue;
        if ((st = render_content(c, mget(m[i], "content"), 0, 0))) goto done;
        content = py_strip(c->tmp.p ? c->tmp.p : "", c->tmp.n);
        if (!(starts_with(content, "<tool_response>") && ends_with(content, "</tool_response>"))) {
            multi_step_tool = 0;
            last_query = i;
        }
    }
    if (multi_step_tool) {
        st = q35_fail(Q35_ERR_TEMPLATE, "No user query found in messages.");
        goto done;
    }

    for (i = 0; i < n; i++) {
        const char *role = role_of(m[i]);
        if ((st = render_content(c, mget(m[i], "content"), 1, 0))) goto done;
        content = py_strip(c->tmp.p ? c->tmp.p : "", c->tmp.n);
        if (strcmp(role, "system") == 0) {
            if (i != 0) {
                st = q35_fail(Q35_ERR_TEMPLATE, "System message must be at the beginning.");
                goto done;
            }
        } else if (strcmp(role, "user") == 0) {
            sb_puts(o, "<|im_start|>user\n");
            sb_put(o, content.p, content.n);
            sb_puts(o, "<|im_end|>\n");
        } else if (strcmp(role, "assistant") == 0) {
            if ((st = render_assistant(c, m[i], content, i > last_query))) goto done;
        } else if (strcmp(role, "tool") == 0) {
            /* loop.previtem is undefined for the first message: no header then */
            if (i > 0 && strcmp(role_of(m[i - 1]), "tool") != 0) sb_puts(o, "<|im_start|>user");
            sb_puts(o, "\n<tool_response>\n");
            sb_put(o, content.p, content.n);
            sb_puts(o, "\n</tool_response>");
            if (i + 1 == n || strcmp(role_of(m[i + 1]), "tool") != 0) sb_puts(o, "<|im_end|>\n");
        } else {
            st = q35_fail(Q35_ERR_TEMPLATE, "Unexpected message role.");
            goto done;
        }
    }
    if (gen_prompt) {
        sb_puts(o, "<|im_start|>assistant\n");
        sb_puts(o, thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
done:
    free(m);
    return st;
}

/* ------------------------------------------------------------------------------------------ public */
int q35_chat_template_default_thinking(const char *t) {
    /* The generation-prompt conditional: 'enable_thinking is true' (or == true) opens <think> only when
     * asked (the small models: default off); 'enable_thinking is false' closes it only when asked (on). */
    if (!t) return 0;
    for (const char *p = strstr(t, "enable_thinking"); p; p = strstr(p + 1, "enable_thinking")) {
        const char *q = p + strlen("enable_thinking");
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "is", 2) == 0 && (q[2] == ' ' || q[2] == '\t')) q += 2;
        else if (strncmp(q, "==", 2) == 0) q += 2;
        else continue;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "true", 4) == 0 || strncmp(q, "True", 4) == 0) return 0;
        if (strncmp(q, "false", 5) == 0 || strncmp(q, "False", 5) == 0) return 1;
    }
    return 0;
}

q35_status q35_chat_render(const char *messages_json, const char *tools_json, const q35_chat_opts *opts,
                           char **out) {
    if (out) *out = NULL;
    if (!messages_json || !out) return q35_fail(Q35_ERR_ARG, "q35_chat_render: messages_json and out must not be NULL");
    q35_chat_opts o = {1, -1, 0, 0};
    if (opts) o = *opts;
    if (o.enable_thinking < -1 || o.enable_thinking > 1)
        return q35_fail(Q35_ERR_ARG, "q35_chat_render: enable_thinking must be -1, 0 or 1 (got %d)", o.enable_thinking);
    int thinking = o.enable_thinking < 0 ? (o.default_thinking != 0) : o.enable_thinking;

    cJSON *root = NULL, *troot = NULL;
    render_ctx c = {0};
    q35_status st = q35_chat_json_parse(messages_json, strlen(messages_json), "messages", &root);
    if (st) return st;
    cJSON *msgs = root, *tools = NULL;
    if (cJSON_IsObject(root)) {
        msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!msgs) {
            st = q35_fail(Q35_ERR_FORMAT, "messages: an object needs a \"messages\" array");
            goto done;
        }
        tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    }
    if (!cJSON_IsArray(msgs)) {
        st = q35_fail(Q35_ERR_FORMAT, "messages: expected an array of messages (or {\"messages\": [...]})");
        goto done;
    }
    if (tools_json) {
        if ((st = q35_chat_json_parse(tools_json, strlen(tools_json), "tools", &troot))) goto done;
        tools = troot;
    }
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (tools) {
        if (!cJSON_IsArray(tools)) {
            st = q35_fail(Q35_ERR_FORMAT, "tools: expected an array of tools");
            goto done;
        }
        size_t k = 0;
        for (const cJSON *t = tools->child; t; t = t->next, k++)
            if (!cJSON_IsObject(t)) {
                st = q35_fail(Q35_ERR_FORMAT, "tools[%zu]: expected an object (a JSON schema)", k);
                goto done;
            }
    }
    if ((st = check_messages(msgs))) goto done;

    c.add_vision_id = o.add_vision_id != 0;
    if ((st = render(&c, msgs, tools, o.add_generation_prompt != 0, thinking))) goto done;
    if (c.out.oom || c.tmp.oom) {
        st = q35_fail(Q35_ERR_NOMEM, "chat template: out of memory");
        goto done;
    }
    if (!c.out.p) { /* nothing written (cannot happen: every path writes) */
        c.out.p = calloc(1, 1);
        if (!c.out.p) {
            st = q35_fail(Q35_ERR_NOMEM, "chat template: out of memory");
            goto done;
        }
    }
    *out = c.out.p;
    c.out.p = NULL;
done:
    free(c.out.p);
    free(c.tmp.p);
    cJSON_Delete(root);
    cJSON_Delete(troot);
    return st;
}
