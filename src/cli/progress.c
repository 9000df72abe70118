#include "cli/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, const char *label) {
    memset(p, 0, sizeof *p);
    const char *force = getenv("Q35_PROGRESS");
    p->enabled = force && *force ? strcmp(force, "0") != 0 : isatty(2);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->t_start = now_s();
    p->t_last = -1;
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total) {
    if (!p->enabled) return;
    double t = now_s();
    if (p->t_last >= 0 && t - p->t_last < 0.1 && done < total) return;
    p->t_last = t;
    enum { WIDTH = 30 };
    char bar[WIDTH + 1]; /* [WIDTH] '#' done, '.' to go */
    const double frac = total ? (double)done / (double)total : 0;
    int fill = (int)(frac * WIDTH + 0.5);
    if (fill > WIDTH) fill = WIDTH;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = 0;
    const double secs = t - p->t_start > 1e-3 ? t - p->t_start : 1e-3;
    fprintf(stderr, "\r\033[K%s [%s] %3d%% %.1f/%.1f MB %.1f MB/s", p->label, bar, (int)(frac * 100), done / 1e6, total / 1e6,
            done / 1e6 / secs);
    fflush(stderr);
    p->drawn = 1;
}

void cli_progress_end(cli_progress *p) {
    if (!p->drawn) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->drawn = 0;
}

void cli_progress_load_cb(size_t done, size_t total, void *user) { cli_progress_update(user, done, total); }

q35_status cli_load_model(const char *path, const q35_load_opts *opts, q35_model **out) {
    q35_load_opts o = {0};
    if (opts) o = *opts;
    cli_progress bar;
    cli_progress_init(&bar, "loading");
    if (bar.enabled && !o.progress) {
        o.progress = cli_progress_load_cb;
        o.progress_user = &bar;
    }
    q35_status st = q35_model_load_ex(path, &o, out);
    cli_progress_end(&bar);
    return st;
}
