/* Weight conversion at load: the large matrices of a bound model re-encoded in another format. */
#include <string.h>

#include "core/err.h"
#include "model/model.h"

q35_status q35_model_convert_weights(struct q35_model *m, const char *weights) {
    if (!strcmp(weights, "native")) return Q35_OK;
    return q35_fail(Q35_ERR_UNSUPPORTED, "--weights %s: conversion at load is not implemented yet", weights);
}
