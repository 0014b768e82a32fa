#include "env.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
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
	.rename = rename, \
	.link = link, \
	.unlink = unlink, \
	.mkdir = mkdir, \
	.opendir = opendir, \
	.readdir = readdir, \
	.closedir = closedir, \
	.malloc = malloc, \
	.calloc = calloc, \
	.realloc = realloc, \
	.free = free, \
	.point = NULL, \
}

static const struct env_ops env_defaults = ENV_DEFAULTS;


struct env_ops env = ENV_DEFAULTS;

void
env_reset(void)
{
	env = env_defaults;
}
