/* Internal tokenizer accessors (the public API is in q35.h): what tokenizer_config.json said, token
 * kinds, loading from memory, and the Oniguruma-to-PCRE2 pattern translation (exposed for tests). */
#ifndef Q35_TEXT_TOKENIZER_H
#define Q35_TEXT_TOKENIZER_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "q35.h"

/* Load from tokenizer.json text in memory (len bytes); what names the source in errors.
 * config_text (may be NULL) is the text of tokenizer_config.json, config_what its name. */
q35_status q35_tokenizer_load_mem(const char *json_text, size_t len, const char *what, const char *config_text,
                                  size_t config_len, const char *config_what, q35_tokenizer **out);

/* The parsed tokenizer_config.json, or NULL when there was none. Owned by t. */
const cJSON *q35_tokenizer_config(const q35_tokenizer *t);
/* tokenizer_config.json's chat_template (the string, or the "default" entry of a list), or NULL. */
const char *q35_tokenizer_chat_template(const q35_tokenizer *t);
/* tokenizer_config.json's eos_token / pad_token / bos_token (a string or an {"content": ...} object),
 * or NULL when absent or null. */
const char *q35_tokenizer_eos_token(const q35_tokenizer *t);
const char *q35_tokenizer_pad_token(const q35_tokenizer *t);
const char *q35_tokenizer_bos_token(const q35_tokenizer *t);
/* The ids of those tokens (-1 when absent or not in the vocabulary). */
int32_t q35_tokenizer_eos_id(const q35_tokenizer *t);
int32_t q35_tokenizer_pad_id(const q35_tokenizer *t);
int32_t q35_tokenizer_bos_id(const q35_tokenizer *t);

enum {
    Q35_TOKEN_INVALID = 0, /* out of range, or an id nothing in the file names */
    Q35_TOKEN_REGULAR = 1, /* a model.vocab entry */
    Q35_TOKEN_ADDED = 2,   /* an added token with "special": false */
    Q35_TOKEN_SPECIAL = 3, /* an added token with "special": true */
};
int q35_tokenizer_token_kind(const q35_tokenizer *t, int32_t id);
/* The token's string exactly as tokenizer.json writes it (ByteLevel alphabet for regular tokens). */
const char *q35_tokenizer_token_text(const q35_tokenizer *t, int32_t id);

/* Translate an Oniguruma pattern (as tokenizers compiles it) to PCRE2 syntax, so that with
 * PCRE2_UTF|PCRE2_UCP|PCRE2_MULTILINE it matches the same text: \s, \p{L}, \p{N}, \p{M}, \d become
 * explicit classes with Oniguruma's (Unicode 16) members, \h is a hex digit, \v a vertical tab.
 * *out is malloc'd. what names the source in errors. */
q35_status q35_tokenizer_translate_regex(const char *pattern, const char *what, char **out);
#endif
