/* q35 render: print the prompt the Qwen3.5 chat template makes for a conversation, byte for byte. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "core/file.h"

#define MAX_JSON_BYTES ((size_t)256 << 20)

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 render [-m DIR] --messages FILE.json [options]\n"
            "\n"
            "Prints exactly the prompt the Qwen3.5 chat template renders (no trailing newline added).\n"
            "\n"
            "  -m, --model DIR          checkpoint directory; its chat_template.jinja (or tokenizer_config.json's\n"
            "                           chat_template) decides the thinking default. Without one: off (0.8B/2B/4B)\n"
            "  --messages FILE          a JSON array of messages (transformers / OpenAI shape), or an object\n"
            "                           {\"messages\": [...], \"tools\": [...]}; '-' reads stdin\n"
            "  --tools FILE             a JSON array of tools (JSON schemas); overrides the messages file's \"tools\"\n"
            "  --think, --no-think      end the generation prompt with '<think>\\n' / an empty think block\n"
            "                           (default: the template's)\n"
            "  --no-generation-prompt   do not end with '<|im_start|>assistant\\n...'\n"
            "  --add-vision-id          label media 'Picture N: ' / 'Video N: '\n"
            "  -h, --help               this help\n");
}

static int read_input(const char *path, char **text) {
    size_t len;
    *text = NULL;
    if (strcmp(path, "-") != 0) {
        q35_status st = q35_read_file(path, MAX_JSON_BYTES, text, &len);
        if (st) return cli_fail("render", st);
        if (strlen(*text) != len) {
            cli_error("render: %s: contains a NUL byte", path);
            free(*text);
            *text = NULL;
            return 1;
        }
        return 0;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 == cap) {
            if (cap >= MAX_JSON_BYTES) {
                free(buf);
                cli_error("render: stdin: more than %zu bytes", MAX_JSON_BYTES);
                return 1;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, stdin);
        n += r;
        if (r == 0) {
            if (ferror(stdin)) {
                free(buf);
                cli_error("render: stdin: read error");
                return 1;
            }
            buf[n] = 0;
            if (strlen(buf) != n) {
                free(buf);
                cli_error("render: stdin: contains a NUL byte");
                return 1;
            }
            *text = buf;
            return 0;
        }
    }
    free(buf);
    cli_error("render: out of memory reading stdin");
    return 1;
}

int cmd_render(int argc, char **argv) {
    const char *dir = NULL, *messages_path = NULL, *tools_path = NULL;
    int think = -1, gen = 1, vision_id = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (i + 1 < argc && (!strcmp(a, "-m") || !strcmp(a, "--model"))) {
            dir = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--messages")) {
            messages_path = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--tools")) {
            tools_path = argv[++i];
        } else if (!strcmp(a, "--think")) {
            think = 1;
        } else if (!strcmp(a, "--no-think")) {
            think = 0;
        } else if (!strcmp(a, "--no-generation-prompt")) {
            gen = 0;
        } else if (!strcmp(a, "--add-vision-id")) {
            vision_id = 1;
        } else {
            cli_error("render: unknown or incomplete option '%s' (see q35 render --help)", a);
            return 2;
        }
    }
    if (!messages_path) {
        cli_error("render: need --messages FILE (see q35 render --help)");
        return 2;
    }
    if (dir) {
        struct stat sb;
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            cli_error("render: %s: not a directory", dir);
            return 1;
        }
    }
    q35_chat_opts o = {gen, think, vision_id, dir ? cli_template_default_thinking(dir) : 0};
    char *messages = NULL, *tools = NULL, *out = NULL;
    int rc = read_input(messages_path, &messages);
    if (rc) return rc;
    if (tools_path) {
        if (!strcmp(tools_path, "-") && !strcmp(messages_path, "-")) {
            cli_error("render: --messages and --tools cannot both read stdin");
            free(messages);
            return 2;
        }
        rc = read_input(tools_path, &tools);
        if (rc) {
            free(messages);
            return rc;
        }
    }
    q35_status st = q35_chat_render(messages, tools, &o, &out);
    if (st) rc = cli_fail("render", st);
    else {
        size_t n = strlen(out);
        if (fwrite(out, 1, n, stdout) != n || fflush(stdout) != 0) {
            cli_error("render: write error: %s", strerror(errno));
            rc = 1;
        }
    }
    free(out);
    free(messages);
    free(tools);
    return rc;
}
