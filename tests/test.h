/* A tiny test harness: each TEST prints "ok NAME" or "not ok NAME"; tests/run.sh counts them. */
#ifndef Q35_TEST_H
#define Q35_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_fail_count;   /* failed checks in the current test */
static int t_total_failed; /* failed tests in this binary */

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            t_fail_count++;                                                   \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, "" __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

#define RUN(fn)                                                               \
    do {                                                                      \
        t_fail_count = 0;                                                     \
        fn();                                                                 \
        printf("%s %s\n", t_fail_count ? "not ok" : "ok", #fn);               \
        fflush(stdout);                                                       \
        if (t_fail_count) t_total_failed++;                                   \
    } while (0)

#define TEST_EXIT() return t_total_failed ? 1 : 0

/* Directory of committed fixtures and of fixtures unpacked at test time (set by tests/run.sh). */
static inline const char *test_data_dir(void) {
    const char *d = getenv("Q35_TEST_DATA");
    return d ? d : "tests/data";
}
static inline const char *test_work_dir(void) {
    const char *d = getenv("Q35_TEST_WORK");
    return d ? d : "build/testwork";
}
#endif
