/*
 * fuzz_util.h — shared by the libFuzzer targets: a private scratch directory (on
 * /dev/shm when there is one: the targets write a file per input), emptied between
 * inputs, and a quiet engine log.
 */
#ifndef STRATA_FUZZ_UTIL_H
#define STRATA_FUZZ_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../node/lib/buf.h"
#include "../../node/lib/crc.h"
#include "../../node/lib/diag.h"

/** Longest path the targets build. */
#define FUZZ_PATH_MAX 4096

/** Engine log lines are dropped: corrupt inputs make the engine log on purpose. */
static __attribute__((unused)) void
fuzz_quiet_sink(int level, const char *msg)
{
	(void)level;
	(void)msg;
}

/** Remove a scratch directory's contents (one level of subdirectories). */
static __attribute__((unused)) void
fuzz_clean(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char p[FUZZ_PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (depth < 4)
				fuzz_clean(p, depth + 1);
			rmdir(p);
		} else {
			unlink(p);
		}
	}
	closedir(d);
}

static char fuzz_dir_path[FUZZ_PATH_MAX];

static __attribute__((unused)) void
fuzz_dir_remove(void)
{
	fuzz_clean(fuzz_dir_path, 0);
	rmdir(fuzz_dir_path);
}

/** The process's scratch directory (created on first use, removed at exit). */
static __attribute__((unused)) const char *
fuzz_dir(const char *tag)
{
	if (fuzz_dir_path[0] != '\0')
		return fuzz_dir_path;
	const char *base = getenv("TMPDIR");
	if (base == NULL)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/strata-fuzz-%s-XXXXXX", base, tag);
	if (mkdtemp(fuzz_dir_path) == NULL) {
		fprintf(stderr, "fuzz: mkdtemp %s: %s\n", fuzz_dir_path, strerror(errno));
		abort();
	}
	diag_log_sink = fuzz_quiet_sink;
	atexit(fuzz_dir_remove);
	return fuzz_dir_path;
}

/** Write a whole file (no fsync: nothing here needs durability). */
static __attribute__((unused)) void
fuzz_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "fuzz: create %s: %s\n", path, strerror(errno));
		abort();
	}
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n <= 0) {
			fprintf(stderr, "fuzz: write %s: %s\n", path, strerror(errno));
			abort();
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

/** Name of a result code (the targets do not link store.c, home of strata_strerror). */
static __attribute__((unused)) const char *
fuzz_code(int rc)
{
	switch (rc) {
	case STRATA_OK: return "OK";
	case STRATA_NOTFOUND: return "NOTFOUND";
	case STRATA_EINVAL: return "EINVAL";
	case STRATA_ENOMEM: return "ENOMEM";
	case STRATA_EIO: return "EIO";
	case STRATA_ECORRUPT: return "ECORRUPT";
	case STRATA_ETOOBIG: return "ETOOBIG";
	case STRATA_ERANGE: return "ERANGE";
	case STRATA_ENOSPC: return "ENOSPC";
	case STRATA_EREADONLY: return "EREADONLY";
	case STRATA_EVERSION: return "EVERSION";
	default: return "another code";
	}
}

/** Bounded LEB128 read at *off (below end); 0 on success. */
static __attribute__((unused)) int
fuzz_varint(const uint8_t *b, size_t end, size_t *off, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64 && *off < end; shift += 7) {
		uint8_t c = b[(*off)++];
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

/** A copy of data that the target may rewrite (fix checksums of); free with free(). */
static __attribute__((unused)) uint8_t *
fuzz_copy(const uint8_t *data, size_t size)
{
	uint8_t *c = malloc(size ? size : 1);
	if (c == NULL)
		abort();
	if (size)
		memcpy(c, data, size);
	return c;
}

/** Stop with a message: libFuzzer reports the input as a crash. */
#define FUZZ_FAIL(...)                                                                  \
	do {                                                                            \
		fprintf(stderr, "fuzz oracle failed: " __VA_ARGS__);                    \
		fputc('\n', stderr);                                                    \
		if (fuzz_dir_path[0] != '\0')                                          \
			fuzz_dir_remove();                                              \
		abort();                                                                \
	} while (0)

#endif
