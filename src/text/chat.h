/* Internals of the Qwen3.5 chat template renderer (text/chat.c), exposed for tests and the CLI. */
#ifndef Q35_TEXT_CHAT_H
#define Q35_TEXT_CHAT_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include "q35.h"

/* Python's repr(float) (shortest round-trip digits; 'inf', '-inf', 'nan'); out needs 32 bytes. */
void q35_py_float_repr(double x, char out[32]);

/* Parse JSON the way Python's json.loads sees it, with cJSON: every number node keeps its source
 * spelling in valuestring (freed by cJSON_Delete), which tells ints (no '.', 'e', 'E'; any size) from
 * floats. Numbers must follow RFC 8259 exactly; raw control characters in strings and \u0000 are
 * refused (Q35_ERR_FORMAT naming what). */
q35_status q35_chat_json_parse(const char *text, size_t len, const char *what, cJSON **out);
#endif
