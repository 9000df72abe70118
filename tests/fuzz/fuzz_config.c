/* libFuzzer target: config.json parsing from arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    q35_config c;
    q35_config_parse((const char *)data, size, "fuzz/config.json", &c);
    return 0;
}
