#include "diag.h"

#include <errno.h>
#include <sys/resource.h>

#include "env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static __thread char diag_msg[1024];

int
diag_set(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(diag_msg, sizeof(diag_msg), fmt, ap);
	va_end(ap);
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

static void
diag_default_sink(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	if (level < diag_log_level)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[32];
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "ts=%s.%03ldZ level=%s msg=\"%s\"\n", when, ts.tv_nsec / 1000000,
		names[level & 3], msg);
}

void (*diag_log_sink)(int level, const char *msg) = diag_default_sink;
int diag_log_level = LOG_LVL_INFO;

void
diag_log(int level, const char *fmt, ...)
{
	char buf[1024];
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
