#include "diag.h"

#include <errno.h>
#include <sys/resource.h>

#include "env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static __thread char diag_msg[DIAG_MSG_MAX];

int
diag_set(int rc, const char *fmt, ...)
{
	/* Format aside first: an argument may be diag_last() itself ("...: %s", diag_last()). */
	char msg[sizeof(diag_msg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(diag_msg, msg, strlen(msg) + 1);
	return rc;
}

int
diag_errno(int err)
{
	switch (err) {
	case ENOSPC:
	case EDQUOT:
		return STRATA_ENOSPC;
	case ENOMEM:
		return STRATA_ENOMEM;
	case EEXIST:
		return STRATA_EEXIST;
	default:
		return STRATA_EIO;
	}
}

int
diag_sys(int err, const char *what, const char *path)
{
	struct rlimit rl;
	if ((err == EMFILE || err == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		return diag_set(diag_errno(err), "%s %s: %s: the process may hold %llu descriptors "
				"(ulimit -n; fewer shards, a lower max_open_wal_files, or a higher limit)",
				what, path, strerror(err), (unsigned long long)rl.rlim_cur);
	return diag_set(diag_errno(err), "%s %s: %s", what, path, strerror(err));
}

const char *
diag_last(void)
{
	return diag_msg;
}

void
diag_clear(void)
{
	diag_msg[0] = '\0';
}

void
diag_logfmt_escape(const char *msg, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)msg; *p != '\0' && o + 5 < len; p++) {
		unsigned char c = *p;
		if (c == '\n' || c == '\r' || c == '\t' || c == '\\' || c == '"') {
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	if (len > 0)
		out[o < len ? o : len - 1] = '\0';
}

static void
diag_default_sink(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	if (level < diag_log_level)
		return;
	char text[4 * DIAG_LOG_MAX + 1];
	diag_logfmt_escape(msg, text, sizeof(text));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[32];
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "ts=%s.%03ldZ level=%s msg=\"%s\"\n", when, ts.tv_nsec / 1000000,
		names[level & 3], text);
}

void (*diag_log_sink)(int level, const char *msg) = diag_default_sink;
int diag_log_level = LOG_LVL_INFO;

void
diag_log(int level, const char *fmt, ...)
{
	char buf[DIAG_LOG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (char *p = buf; *p; p++)
		if (*p == '"')
			*p = '\'';
	void (*sink)(int, const char *) = env.log != NULL ? env.log : diag_log_sink;
	sink(level, buf);
}
