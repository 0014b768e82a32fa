/*
 * store_meta.c — the STORE file of a data directory (store_meta.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "store_meta.h"

int
store_meta_read(const char *dir, uint32_t *shards, char *wal, size_t wal_cap, int *recorded)
{
	if (wal != NULL && wal_cap > 0)
		wal[0] = '\0';
	if (recorded != NULL)
		*recorded = 0;
	char path[4096];
	snprintf(path, sizeof(path), "%s/" STORE_META_FILE, dir);
	int fd = env.open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd >= 0) {
		char text[4608];
		ssize_t n = env_pread_full(fd, text, sizeof(text) - 1, 0);
		env.close(fd);
		if (n < 0)
			return diag_sys(errno, "strata_open: cannot read", path);
		text[n] = '\0';
		const char *p = strstr(text, "\nshards ");
		unsigned long v = 0;
		char *end = NULL;
		if (strncmp(text, "strata store\n", 13) == 0 && p != NULL)
			v = strtoul(p + 8, &end, 10);
		if (v == 0 || v > 65536 || end == NULL || *end != '\n')
			return diag_set(STRATA_ECORRUPT, "strata_open: %s does not say how many shards the "
					"store has (expected \"strata store\" and a \"shards N\" line)", path);
		*shards = (uint32_t)v;
		const char *w = strstr(text, "\nwal ");
		if (w != NULL && wal != NULL) {
			w += 5;
			size_t len = strcspn(w, "\n");
			if (w[len] != '\n' || len == 0 || len >= wal_cap || w[0] != '/')
				return diag_set(STRATA_ECORRUPT, "strata_open: %s has a \"wal\" line that is not "
						"an absolute directory", path);
			memcpy(wal, w, len);
			wal[len] = '\0';
		}
		if (recorded != NULL)
			*recorded = 1;
		return 0;
	}
	if (errno != ENOENT)
		return diag_sys(errno, "strata_open: cannot open", path);
	snprintf(path, sizeof(path), "%s/wal", dir);
	DIR *d = env.opendir(path);
	if (d == NULL)
		return errno == ENOENT ? STRATA_NOTFOUND : diag_sys(errno, "strata_open: cannot list", path);
	uint32_t count = 0;
	struct dirent *de;
	while ((de = env.readdir(d)) != NULL) {
		unsigned idx;
		char tail;
		if (sscanf(de->d_name, "shard-%4u%c", &idx, &tail) == 1 && strlen(de->d_name) == 10 &&
		    idx + 1 > count)
			count = idx + 1;
	}
	env.closedir(d);
	if (count == 0)
		return STRATA_NOTFOUND;
	*shards = count;
	return 0;
}

int
store_meta_write(const char *dir, uint32_t shards, const char *wal_root, int sync)
{
	char path[4096], tmp[4200], text[4400];
	snprintf(path, sizeof(path), "%s/" STORE_META_FILE, dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int len = snprintf(text, sizeof(text), "strata store\nformat 1\nshards %u\n", shards);
	if (wal_root != NULL)
		len += snprintf(text + len, sizeof(text) - (size_t)len, "wal %s\n", wal_root);
	int fd = env.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return diag_sys(errno, "strata_open: cannot create", tmp);
	int rc = 0;
	if (env.pwrite(fd, text, (size_t)len, 0) != len)
		rc = diag_sys(errno, "strata_open: cannot write", tmp);
	else if (sync && env.fsync(fd) != 0)
		rc = diag_sys(errno, "strata_open: cannot fsync", tmp);
	env.close(fd);
	if (rc == 0 && env.rename(tmp, path) != 0)
		rc = diag_sys(errno, "strata_open: cannot rename into", path);
	if (rc == 0 && sync) {
		int dfd = env.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		if (dfd < 0 || env.fsync(dfd) != 0)
			rc = diag_sys(errno, "strata_open: cannot fsync the directory", dir);
		if (dfd >= 0)
			env.close(dfd);
	}
	if (rc)
		env.unlink(tmp);
	return rc;
}

int
store_wal_root(const char *dir, char *out, size_t cap)
{
	uint32_t shards;
	char wal[4096];
	int rc = store_meta_read(dir, &shards, wal, sizeof(wal), NULL);
	if (rc != 0 && rc != STRATA_NOTFOUND)
		return rc;
	if (rc == 0 && wal[0] != '\0')
		snprintf(out, cap, "%s", wal);
	else
		snprintf(out, cap, "%s/wal", dir);
	return 0;
}
