/* JSON through cJSON (Debian libcjson), with lookups whose errors name the file and the field. */
#ifndef Q35_FORMATS_JSON_H
#define Q35_FORMATS_JSON_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include "q35.h"

/* Parse text (len bytes, need not be NUL-terminated); what names the source in errors. */
q35_status q35_json_parse(const char *text, size_t len, const char *what, cJSON **out);
/* Read and parse a file (at most max_bytes). */
q35_status q35_json_load_file(const char *path, size_t max_bytes, cJSON **out);

/* Typed field lookups. *_opt: absent (or null) leaves *out untouched and returns Q35_OK;
 * a present field of the wrong type/range is an error naming what.field. */
q35_status q35_json_int(const cJSON *obj, const char *field, const char *what, long lo, long hi, long *out);
q35_status q35_json_int_opt(const cJSON *obj, const char *field, const char *what, long lo, long hi, long *out);
q35_status q35_json_num_opt(const cJSON *obj, const char *field, const char *what, double *out);
q35_status q35_json_bool_opt(const cJSON *obj, const char *field, const char *what, int *out);
/* 1 if v is a JSON number holding an integer in [lo, hi], so a cast to an integer type that holds that range
 * is defined (a bare (int)v->valuedouble of 1e88 is undefined behaviour). */
int q35_json_is_int_in(const cJSON *v, double lo, double hi);
/* Returns the string (owned by obj) or NULL if absent; wrong type is an error. */
q35_status q35_json_str_opt(const cJSON *obj, const char *field, const char *what, const char **out);
#endif
