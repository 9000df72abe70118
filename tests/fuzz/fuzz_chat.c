/* libFuzzer target for the chat template: arbitrary bytes as the messages JSON (and, after a NUL,
 * as the tools JSON), with options taken from the first byte. */
#include <stdlib.h>
#include <string.h>

#include "q35.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    q35_chat_opts o = {data[0] & 1, (int)((data[0] >> 1) % 3) - 1, (data[0] >> 3) & 1, (data[0] >> 4) & 1};
    char *buf = malloc(size);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    const char *tools = NULL;
    size_t msg_len = strlen(buf);
    if (msg_len + 1 < size - 1) tools = buf + msg_len + 1;
    char *out = NULL;
    if (q35_chat_render(buf, tools, &o, &out) == Q35_OK) free(out);
    free(buf);
    return 0;
}
