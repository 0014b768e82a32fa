#include "env.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "diag.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/file.h>
#include <unistd.h>

static uint64_t
env_default_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t
env_default_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int
env_default_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags | O_CLOEXEC, mode);
}

#define ENV_DEFAULTS { \
	.mono_ns = env_default_mono_ns, \
	.wall_ns = env_default_wall_ns, \
	.open = env_default_open, \
	.close = close, \
	.pread = pread, \
	.pwrite = pwrite, \
	.fsync = fsync, \
	.fdatasync = fdatasync, \
	.ftruncate = ftruncate, \
	.fstat = fstat, \
	.lstat = lstat, \
	.rename = rename, \
	.link = link, \
	.unlink = unlink, \
	.flock = flock, \
	.mkdir = mkdir, \
	.rmdir = rmdir, \
	.opendir = opendir, \
	.readdir = readdir, \
	.closedir = closedir, \
	.malloc = malloc, \
	.calloc = calloc, \
	.realloc = realloc, \
	.free = free, \
	.sync_file_range = sync_file_range, \
	.point = NULL, \
	.getpid = getpid, \
}

static const struct env_ops env_defaults = ENV_DEFAULTS;


struct env_ops env_default = ENV_DEFAULTS;
__thread struct env_ops *env_tls;

void
env_reset(void)
{
	env_default = env_defaults;
}

int
env_mkdir_p(const char *path)
{
	return env_mkdir_p_new(path, NULL, 0);
}

int
env_mkdir_p_new(const char *path, char *first, size_t cap)
{
	if (first != NULL && cap > 0)
		first[0] = '\0';
	char p[PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof(p))
		return diag_set(STRATA_EINVAL, "path too long: %s", path);
	memcpy(p, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		if (env.mkdir(p, 0755) != 0) {
			if (errno != EEXIST)
				return diag_sys(errno, "mkdir", p);
		} else {
			if (first != NULL && cap > 0 && first[0] == '\0')
				snprintf(first, cap, "%s", p);
			/* The new directory's entry is durable only once its parent is synced. */
			char *slash = strrchr(p, '/');
			char keep = slash ? slash[slash == p] : 0;
			if (slash)
				slash[slash == p] = '\0';
			int fd = env.open(slash ? p : ".", O_RDONLY | O_DIRECTORY, 0);
			int rc = fd < 0 || env.fsync(fd) != 0 ? diag_sys(errno, "fsync directory", p) : 0;
			if (fd >= 0)
				env.close(fd);
			if (slash)
				slash[slash == p] = keep;
			if (rc)
				return rc;
		}
		p[i] = c;
	}
	return 0;
}

char *
env_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = env.malloc(n);
	if (p != NULL)
		memcpy(p, s, n);
	return p;
}

ssize_t
env_pread_full(int fd, void *buf, size_t n, off_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = env.pread(fd, (char *)buf + got, n - got, off + (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

const char *const env_point_names[ENV_POINT_COUNT] = {
#define ENV_POINT_NAME(id, name, arg, what) name,
	ENV_POINTS(ENV_POINT_NAME)
#undef ENV_POINT_NAME
};

int
env_point_lookup(const char *name)
{
	for (int i = 0; name != NULL && i < ENV_POINT_COUNT; i++)
		if (strcmp(env_point_names[i], name) == 0)
			return i;
	return -1;
}
