/* q35 command line: dispatch to one file per subcommand. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("q35: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_fail(const char *what, q35_status st) {
    const char *msg = q35_last_error();
    if (what && *what) cli_error("%s: %s", what, msg[0] ? msg : q35_status_name(st));
    else cli_error("%s", msg[0] ? msg : q35_status_name(st));
    return 1;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"generate", cmd_generate, "generate text from a prompt (chat template applied unless --raw)"},
    {"chat", cmd_chat, "interactive multi-turn chat (also reads piped stdin)"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"detokenize", cmd_detokenize, "print the text of token ids"},
    {"render", cmd_render, "print the prompt the chat template makes for a conversation"},
    {"bench", cmd_bench, "prompt and generation speed against the measured memory bandwidth"},
    {"quantize", cmd_quantize, "write a checkpoint as GGUF with 8- or 4-bit matrices"},
    {"pull", cmd_pull, "download a Hugging Face model repository, verified against the hub's hashes"},
    {"verify", cmd_verify, "check a model directory against its q35-manifest.json"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (chat completions, completions, models) with a chat page"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: q35 COMMAND [options]   (q35 COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nq35 runs Qwen3.5 checkpoints (Hugging Face directories: config.json, *.safetensors, tokenizer.json).\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    cli_error("unknown command '%s' (try q35 --help)", argv[1]);
    return 2;
}
