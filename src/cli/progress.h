/* A one-line progress bar on stderr, drawn only when stderr is a terminal (or Q35_PROGRESS=1),
 * at most ten times a second. */
#ifndef Q35_CLI_PROGRESS_H
#define Q35_CLI_PROGRESS_H
#include <stddef.h>
#include <stdint.h>

typedef struct cli_progress {
    int enabled;
    int drawn;         /* a bar is on the line now */
    double t_start, t_last;
    char label[96];
} cli_progress;

void cli_progress_init(cli_progress *p, const char *label);
/* done of total bytes (total 0: unknown). */
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
/* Clear the bar's line (when one was drawn). */
void cli_progress_end(cli_progress *p);
/* The load-progress callback of q35_load_opts: user is a cli_progress. */
void cli_progress_load_cb(size_t done, size_t total, void *user);

#include "q35.h"
/* q35_model_load_ex with a "loading" bar on stderr when it is a terminal. */
q35_status cli_load_model(const char *path, const q35_load_opts *opts, q35_model **out);
#endif
