/* The q35 command line: one file per subcommand, each `int cmd_NAME(int argc, char **argv)` where
 * argv[0] is the subcommand name; returns the process exit status. Only the CLI prints. */
#ifndef Q35_CLI_H
#define Q35_CLI_H
#include "q35.h"

int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_serve(int argc, char **argv);
/* q35 bench --turns (bench_turns.c): time to first token per chat turn, prefix reuse on and off. */
int cli_bench_turns(q35_model *m, int turns, int history, int user, int answer, int reps, size_t cache_bytes, int json);

/* "q35: <message>" on stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* "q35: <what>: <q35_last_error()>" on stderr; returns 1 (the exit status to use). */
int cli_fail(const char *what, q35_status st);
#endif
