/* Error reporting and logging inside the library: a failing call records a one-line message
 * (per thread) and returns its q35_status; nothing here prints unless a log sink is installed. */
#ifndef Q35_CORE_ERR_H
#define Q35_CORE_ERR_H
#include "q35.h"

#if defined(__GNUC__)
#define Q35_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define Q35_PRINTF(a, b)
#endif

/* Record "fmt..." as this thread's last error and return code. */
q35_status q35_fail(q35_status code, const char *fmt, ...) Q35_PRINTF(2, 3);
/* Prefix the current message with "prefix: " (keeps the code). */
q35_status q35_fail_prefix(q35_status code, const char *prefix);
void q35_clear_error(void);

void q35_log(q35_log_level level, const char *fmt, ...) Q35_PRINTF(2, 3);
#endif
