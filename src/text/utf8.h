/* UTF-8 helpers for the tokenizer: decoding with the "maximal subpart" rule (what Python's
 * bytes.decode('utf-8', 'replace') and Rust's String::from_utf8_lossy do), U+FFFD substitution,
 * and incomplete-sequence detection for the streaming decoder. */
#ifndef Q35_TEXT_UTF8_H
#define Q35_TEXT_UTF8_H
#include <stddef.h>
#include <stdint.h>

/* The replacement character U+FFFD as UTF-8. */
#define Q35_UTF8_REPLACEMENT "\xEF\xBF\xBD"

/* Decode one character at s[0..n) (n >= 1). Returns 1 and sets *cp, *len for a valid character;
 * returns 0 for an invalid sequence, with *len = the length of its maximal subpart (>= 1): the
 * bytes that one U+FFFD replaces. */
int q35_utf8_next(const unsigned char *s, size_t n, uint32_t *cp, size_t *len);

/* 1 when s[0..n) (n >= 1) is a proper prefix of a valid sequence, i.e. more bytes could complete it. */
int q35_utf8_incomplete(const unsigned char *s, size_t n);

/* Bytes of the longest prefix of s[0..n) that ends on a boundary the decoder can commit to: n, less
 * a trailing incomplete (but so far valid) sequence. */
size_t q35_utf8_complete_prefix(const unsigned char *s, size_t n);

/* 1 when s[0..n) is entirely valid UTF-8. */
int q35_utf8_valid(const unsigned char *s, size_t n);

/* Length of the output q35_utf8_sanitize writes for s[0..n) (each maximal invalid subpart counts 3). */
size_t q35_utf8_sanitized_len(const unsigned char *s, size_t n);

/* Write s[0..n) to out with every maximal invalid subpart replaced by U+FFFD; out must hold
 * q35_utf8_sanitized_len(s, n) bytes. Returns the bytes written. */
size_t q35_utf8_sanitize(const unsigned char *s, size_t n, unsigned char *out);

/* Encode cp (<= 0x10FFFF) into out[4]; returns 1..4, or 0 for an invalid code point. */
size_t q35_utf8_encode(uint32_t cp, unsigned char *out);

/* ---- Unicode tables: where tokenizers (Oniguruma, Unicode 16; NFC with Unicode 9 tables) differs
 * from the libraries q35 uses (PCRE2 10.42, Unicode 14; utf8proc, Unicode 15). */
typedef struct q35_cp_range {
    uint32_t lo, hi; /* an inclusive code point range */
} q35_cp_range;

/* Oniguruma's \s: the 25 White_Space characters. */
const q35_cp_range *q35_unicode_space(size_t *n);
/* Members of Oniguruma's \p{L} / \p{N} / \p{M} / \d (cls "L", "N", "M", "Nd") that Unicode 14
 * lacks; NULL (and *n = 0) for any other cls. */
const q35_cp_range *q35_unicode_class_extra(const char *cls, size_t *n);
/* 1 for a combining mark newer than Unicode 9 (tokenizers' NFC sees it as an inert starter). */
int q35_unicode_nfc_barrier(uint32_t cp);

#endif
