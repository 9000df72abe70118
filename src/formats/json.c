#include "formats/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/file.h"

q35_status q35_json_parse(const char *text, size_t len, const char *what, cJSON **out) {
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*out) {
        size_t off = (end && end >= text && end <= text + len) ? (size_t)(end - text) : 0;
        return q35_fail(Q35_ERR_FORMAT, "%s: malformed JSON near byte %zu", what, off);
    }
    /* Only whitespace (or a NUL terminator) may follow the value. */
    if (end) {
        for (const char *p = end; p < text + len; p++) {
            if (*p == 0 && p == text + len - 1) break;
            if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
                cJSON_Delete(*out);
                *out = NULL;
                return q35_fail(Q35_ERR_FORMAT, "%s: malformed JSON: trailing data at byte %zu", what,
                                (size_t)(p - text));
            }
        }
    }
    return Q35_OK;
}

q35_status q35_json_load_file(const char *path, size_t max_bytes, cJSON **out) {
    char *buf;
    size_t len;
    *out = NULL;
    q35_status st = q35_read_file(path, max_bytes, &buf, &len);
    if (st) return st;
    st = q35_json_parse(buf, len, path, out);
    free(buf);
    return st;
}

int q35_json_is_int_in(const cJSON *v, double lo, double hi) {
    if (!cJSON_IsNumber(v)) return 0;
    const double d = v->valuedouble;
    return d >= lo && d <= hi && d == floor(d); /* NaN fails the comparisons */
}

static const cJSON *field_of(const cJSON *obj, const char *field) {
    if (!obj || !cJSON_IsObject(obj)) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (v && cJSON_IsNull(v)) return NULL;
    return v;
}

q35_status q35_json_int_opt(const cJSON *obj, const char *field, const char *what, long lo, long hi, long *out) {
    const cJSON *v = field_of(obj, field);
    if (!v) return Q35_OK;
    if (!q35_json_is_int_in(v, (double)lo, (double)hi))
        return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must be an integer in [%ld, %ld]", what, field, lo, hi);
    *out = (long)v->valuedouble;
    return Q35_OK;
}

q35_status q35_json_int(const cJSON *obj, const char *field, const char *what, long lo, long hi, long *out) {
    if (!field_of(obj, field)) return q35_fail(Q35_ERR_MISSING, "%s: missing field '%s'", what, field);
    return q35_json_int_opt(obj, field, what, lo, hi, out);
}

q35_status q35_json_num_opt(const cJSON *obj, const char *field, const char *what, double *out) {
    const cJSON *v = field_of(obj, field);
    if (!v) return Q35_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must be a finite number", what, field);
    *out = v->valuedouble;
    return Q35_OK;
}

q35_status q35_json_bool_opt(const cJSON *obj, const char *field, const char *what, int *out) {
    const cJSON *v = field_of(obj, field);
    if (!v) return Q35_OK;
    if (!cJSON_IsBool(v)) return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must be true or false", what, field);
    *out = cJSON_IsTrue(v);
    return Q35_OK;
}

q35_status q35_json_str_opt(const cJSON *obj, const char *field, const char *what, const char **out) {
    const cJSON *v = field_of(obj, field);
    *out = NULL;
    if (!v) return Q35_OK;
    if (!cJSON_IsString(v)) return q35_fail(Q35_ERR_FORMAT, "%s: field '%s' must be a string", what, field);
    *out = v->valuestring;
    return Q35_OK;
}
