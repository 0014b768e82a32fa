/*
 * diag.h — result codes with context. A failure is recorded once, where it
 * happens, in a thread-local message; callers propagate the code.
 */
#ifndef STRATA_DIAG_H
#define STRATA_DIAG_H

#include <stddef.h>

#include "../strata_types.h"

/** Room for a message, bytes with its NUL: enough for every error of a refused policy,
 *  one per line (policy_new), which reaches its callers through diag like any other. */
#define DIAG_MSG_MAX 8192

/** Record a message for rc on this thread and return rc. printf-style. */
int diag_set(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Map an errno value to a STRATA_E* code (ENOSPC -> STRATA_ENOSPC, else STRATA_EIO). */
int diag_errno(int err);
/** Record "<what> <path>: <strerror(err)>" and return the mapped code. */
int diag_sys(int err, const char *what, const char *path);
/** The last message on this thread ("" when none). */
const char *diag_last(void);
/** Forget the last message. */
void diag_clear(void);

/** Log levels for diag_log. */
enum { LOG_LVL_DEBUG, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };
/** Log sink: the default writes logfmt lines to stderr. */
extern void (*diag_log_sink)(int level, const char *msg);
/** Minimum level written by the default sink (default LOG_LVL_INFO; env STRATA_LOG_LEVEL). */
extern int diag_log_level;
/** Longest log message, bytes (longer ones are cut). */
#define DIAG_LOG_MAX 2048
/** Escape msg for a quoted logfmt value into out: a newline, tab or carriage return
 *  becomes \n, \t or \r, a backslash or quote is preceded by a backslash and other
 *  control bytes become \xNN, so a record stays one line. */
void diag_logfmt_escape(const char *msg, char *out, size_t len);
/** Log a formatted message. */
void diag_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
