/*
 * checkpoint.c — a consistent, openable copy of a running store (see checkpoint.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/buf.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "checkpoint.h"
#include "shard_int.h"
#include "store_meta.h"
#include "wal.h"

/** Longest path written, in bytes including the NUL. */
#define CKPT_PATH_MAX 4096
/** Bytes read and written per call when a file is copied. */
#define CKPT_COPY_CHUNK (1u << 20)
/** Bytes of a WAL segment header (wal.h): a copied last segment shorter than this holds
 *  no entry and is left out. */
#define CKPT_WAL_SEG_HDR 24u
/** Segments of one shard looked at per wal_inspect_dir call, to start with. */
#define CKPT_INSPECT_FIRST 64

/** A checkpoint being written. */
struct ckpt {
	/** Data directory of the store copied. */
	const char *src;
	/** Final directory (no trailing '/'). */
	char dst[CKPT_PATH_MAX];
	/** Where everything is written first: dst + CHECKPOINT_PARTIAL_SUFFIX. */
	char tmp[CKPT_PATH_MAX];
	/** Directories created under tmp (tmp first), fsynced before the rename. */
	char **dirs;
	/** Entries used in dirs. */
	uint32_t ndirs;
	/** Entries allocated in dirs. */
	uint32_t capdirs;
	/** Copy buffer of CKPT_COPY_CHUNK bytes. */
	uint8_t *buf;
	/** Objects hard-linked. */
	uint64_t linked;
	/** Files copied (objects the file system would not link, WAL segments). */
	uint64_t copied;
	/** Bytes of the copied files. */
	uint64_t copied_bytes;
};

/** A WAL segment opened under the manifest mutex. */
struct ckpt_seg {
	/** File name within the shard's WAL directory. */
	char name[64];
	/** Open read-only descriptor: the segment stays readable if a seal releases it. */
	int fd;
};

/** Format a path into dst (CKPT_PATH_MAX bytes); STRATA_EINVAL when it does not fit. */
static int
ckpt_path(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
ckpt_path(char *dst, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(dst, CKPT_PATH_MAX, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= CKPT_PATH_MAX)
		return diag_set(STRATA_EINVAL, "checkpoint: a path is longer than %d bytes", CKPT_PATH_MAX - 1);
	return 0;
}

/** Create the directory path (under tmp) and remember it for the final fsync. */
static int
ckpt_mkdir(struct ckpt *ck, const char *path)
{
	if (env.mkdir(path, 0755) != 0)
		return diag_sys(errno, "checkpoint: cannot create the directory", path);
	if (ck->ndirs == ck->capdirs) {
		uint32_t cap = ck->capdirs ? ck->capdirs * 2 : 16;
		char **d = env.realloc(ck->dirs, cap * sizeof(*d));
		if (d == NULL)
			return diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
		ck->dirs = d;
		ck->capdirs = cap;
	}
	size_t n = strlen(path) + 1;
	char *copy = env.malloc(n);
	if (copy == NULL)
		return diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
	memcpy(copy, path, n);
	ck->dirs[ck->ndirs++] = copy;
	return 0;
}

/** fsync a directory. */
static int
ckpt_sync_dir(const char *path)
{
	int fd = env.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return diag_sys(errno, "checkpoint: cannot open the directory", path);
	int rc = env.fsync(fd) != 0 ? diag_sys(errno, "checkpoint: cannot fsync the directory", path) : 0;
	env.close(fd);
	return rc;
}

/** Write n bytes at off, completing short writes. */
static int
ckpt_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *path)
{
	const uint8_t *b = p;
	while (n > 0) {
		ssize_t w = env.pwrite(fd, b, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return diag_sys(w < 0 ? errno : EIO, "checkpoint: cannot write", path);
		b += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/** Copy the first len bytes of sfd (fewer if it ends first) into a new file dpath, fsynced. */
static int
ckpt_copy_fd(struct ckpt *ck, int sfd, const char *spath, const char *dpath, uint64_t len)
{
	int dfd = env.open(dpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (dfd < 0)
		return diag_sys(errno, "checkpoint: cannot create", dpath);
	int rc = 0;
	uint64_t off = 0;
	while (rc == 0 && off < len) {
		size_t want = len - off < CKPT_COPY_CHUNK ? (size_t)(len - off) : CKPT_COPY_CHUNK;
		ssize_t got = env_pread_full(sfd, ck->buf, want, (off_t)off);
		if (got < 0) {
			rc = diag_sys(errno, "checkpoint: cannot read", spath);
			break;
		}
		if (got == 0)
			break;
		rc = ckpt_pwrite_all(dfd, ck->buf, (size_t)got, off, dpath);
		off += (uint64_t)got;
		if ((size_t)got < want)
			break;
	}
	if (rc == 0 && env.fsync(dfd) != 0)
		rc = diag_sys(errno, "checkpoint: cannot fsync", dpath);
	env.close(dfd);
	if (rc == 0) {
		ck->copied++;
		ck->copied_bytes += off;
	}
	return rc;
}

/** Hard-link an immutable object spath as dpath; copy it where the file system refuses. */
static int
ckpt_link(struct ckpt *ck, const char *spath, const char *dpath)
{
	if (env.link(spath, dpath) == 0) {
		ck->linked++;
		return 0;
	}
	int err = errno;
	if (err != EXDEV && err != EPERM && err != EMLINK && err != ENOTSUP && err != EOPNOTSUPP &&
	    err != ENOSYS) {
		char what[CKPT_PATH_MAX + 64];
		snprintf(what, sizeof(what), "checkpoint: cannot hard-link %s as", spath);
		return diag_sys(err, what, dpath);
	}
	int sfd = env.open(spath, O_RDONLY | O_CLOEXEC, 0);
	if (sfd < 0)
		return diag_sys(errno, "checkpoint: cannot open", spath);
	struct stat st;
	int rc = env.fstat(sfd, &st) != 0 ? diag_sys(errno, "checkpoint: cannot stat", spath)
					 : ckpt_copy_fd(ck, sfd, spath, dpath, (uint64_t)st.st_size);
	env.close(sfd);
	return rc;
}

/** Write a whole new file, fsynced. */
static int
ckpt_write_file(const char *path, const void *p, size_t n)
{
	int fd = env.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return diag_sys(errno, "checkpoint: cannot create", path);
	int rc = ckpt_pwrite_all(fd, p, n, 0, path);
	if (rc == 0 && env.fsync(fd) != 0)
		rc = diag_sys(errno, "checkpoint: cannot fsync", path);
	env.close(fd);
	return rc;
}

/** Remove a tree written by a checkpoint (best effort: it is logged, not returned). */
static void
ckpt_rmtree(const char *path, int depth)
{
	DIR *d = env.opendir(path);
	if (d != NULL) {
		struct dirent *de;
		char child[CKPT_PATH_MAX];
		while ((de = env.readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (snprintf(child, sizeof(child), "%s/%s", path, de->d_name) >= (int)sizeof(child))
				continue;
			if (env.unlink(child) != 0 && (errno == EISDIR || errno == EPERM) && depth < 16)
				ckpt_rmtree(child, depth + 1);
		}
		env.closedir(d);
	}
	if (env.rmdir(path) != 0 && errno != ENOENT)
		diag_log(LOG_LVL_WARN, "checkpoint: could not remove %s: %s", path, strerror(errno));
}

/** Open every segment of a WAL directory (a missing directory has none). */
static int
ckpt_open_segs(const char *dir, struct ckpt_seg **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	DIR *d = env.opendir(dir);
	if (d == NULL)
		return errno == ENOENT ? 0 : diag_sys(errno, "checkpoint: cannot list", dir);
	struct ckpt_seg *segs = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	char path[CKPT_PATH_MAX];
	while (rc == 0 && (de = env.readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (len < 5 || len >= sizeof(segs->name) || strcmp(de->d_name + len - 4, ".wal") != 0)
			continue;
		if ((rc = ckpt_path(path, "%s/%s", dir, de->d_name)) != 0)
			break;
		int fd = env.open(path, O_RDONLY | O_CLOEXEC, 0);
		if (fd < 0) {
			/* Released by a seal whose cursor this checkpoint's manifest already has. */
			if (errno != ENOENT)
				rc = diag_sys(errno, "checkpoint: cannot open", path);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct ckpt_seg *g = env.realloc(segs, cap * sizeof(*g));
			if (g == NULL) {
				env.close(fd);
				rc = diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
				break;
			}
			segs = g;
		}
		memcpy(segs[n].name, de->d_name, len + 1);
		segs[n++].fd = fd;
	}
	env.closedir(d);
	*out = segs;
	*nout = n;
	return rc;
}

/** Cut the copied WAL of dir back to its last whole entry: the segment the shard was
 *  appending to may have been copied in the middle of a write. */
static int
ckpt_wal_tail(const char *dir)
{
	int max = CKPT_INSPECT_FIRST;
	struct wal_segment_info *infos = NULL;
	int n;
	for (;;) {
		infos = env.calloc((size_t)max, sizeof(*infos));
		if (infos == NULL)
			return diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
		n = wal_inspect_dir(dir, infos, max);
		if (n <= max)
			break;
		env.free(infos);
		max = n;
	}
	int rc = n < 0 ? n : 0;
	int last = -1;
	for (int i = 0; i < n; i++)
		if (last < 0 || infos[i].first_seq > infos[last].first_seq)
			last = i;
	if (rc == 0 && last >= 0 && infos[last].torn) {
		char path[CKPT_PATH_MAX];
		rc = ckpt_path(path, "%s/%s", dir, infos[last].name);
		if (rc == 0 && infos[last].valid_bytes < CKPT_WAL_SEG_HDR) {
			if (env.unlink(path) != 0)
				rc = diag_sys(errno, "checkpoint: cannot remove", path);
		} else if (rc == 0) {
			int fd = env.open(path, O_WRONLY | O_CLOEXEC, 0);
			if (fd < 0)
				rc = diag_sys(errno, "checkpoint: cannot open", path);
			else if (env.ftruncate(fd, (off_t)infos[last].valid_bytes) != 0)
				rc = diag_sys(errno, "checkpoint: cannot truncate", path);
			else if (env.fsync(fd) != 0)
				rc = diag_sys(errno, "checkpoint: cannot fsync", path);
			if (fd >= 0)
				env.close(fd);
		}
	}
	env.free(infos);
	return rc;
}

/** 1 when the view holds a table for the manifest entry o. */
static int
ckpt_view_has(struct table *const *tabs, uint32_t n, const struct manifest_obj *o)
{
	for (uint32_t i = 0; i < n; i++)
		if (tabs[i]->obj.id == o->id && tabs[i]->obj.epoch == o->epoch)
			return 1;
	return 0;
}

/** Link the generations (kind MANIFEST_GEN) or runs of man, each pinned by v. */
static int
ckpt_objects(struct ckpt *ck, struct shard *s, const struct manifest *man, const struct view *v, int kind)
{
	const struct manifest_obj *objs = kind == MANIFEST_GEN ? man->gens : man->runs;
	uint32_t n = kind == MANIFEST_GEN ? man->ngens : man->nruns;
	char key[160], spath[CKPT_PATH_MAX], dpath[CKPT_PATH_MAX];
	for (uint32_t i = 0; i < n; i++) {
		manifest_obj_key(key, sizeof(key), s->cfg.prefix, kind, &objs[i]);
		if (!ckpt_view_has(kind == MANIFEST_GEN ? v->gens : v->runs,
				   kind == MANIFEST_GEN ? v->ngens : v->nruns, &objs[i]))
			return diag_set(STRATA_ECORRUPT, "checkpoint: shard %u: the manifest names %s, which "
					"its view does not hold", s->cfg.id, key);
		int rc = ckpt_path(spath, "%s/objects/%s", ck->src, key);
		if (rc == 0)
			rc = ckpt_path(dpath, "%s/objects/%s", ck->tmp, key);
		if (rc == 0)
			rc = ckpt_link(ck, spath, dpath);
		if (rc)
			return rc;
	}
	return 0;
}

/** Copy one shard: pin under the manifest mutex, then link, copy and write with no lock. */
static int
ckpt_shard(struct ckpt *ck, struct shard *s)
{
	struct manifest man;
	memset(&man, 0, sizeof(man));
	struct view *v = NULL;
	struct ckpt_seg *segs = NULL;
	size_t nsegs = 0;
	pthread_mutex_lock(&s->manifest_mu);
	int rc = atomic_load(&s->fenced)
			 ? diag_set(STRATA_EFENCED, "checkpoint: shard %u is fenced: another writer owns it",
				    s->cfg.id)
			 : shard_resync(s);
	if (rc == 0)
		rc = manifest_copy(&man, &s->man);
	if (rc == 0) {
		v = view_pin(s);
		rc = ckpt_open_segs(s->cfg.wal_dir, &segs, &nsegs);
	}
	pthread_mutex_unlock(&s->manifest_mu);

	char dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX];
	const char *sub[] = {"", "gen", "run", "manifest"};
	for (int i = 0; rc == 0 && i < 4; i++) {
		rc = ckpt_path(dir, "%s/objects/%.*s%s%s", ck->tmp, (int)strlen(s->cfg.prefix) - 1,
			       s->cfg.prefix, i ? "/" : "", sub[i]);
		if (rc == 0)
			rc = ckpt_mkdir(ck, dir);
	}
	if (rc == 0)
		rc = ckpt_objects(ck, s, &man, v, MANIFEST_GEN);
	if (rc == 0)
		rc = ckpt_objects(ck, s, &man, v, MANIFEST_RUN);
	if (rc == 0)
		rc = ckpt_path(dir, "%s/wal/shard-%04u", ck->tmp, s->cfg.id);
	if (rc == 0)
		rc = ckpt_mkdir(ck, dir);
	for (size_t i = 0; rc == 0 && i < nsegs; i++) {
		struct stat st;
		char spath[CKPT_PATH_MAX];
		rc = ckpt_path(spath, "%s/%s", s->cfg.wal_dir, segs[i].name);
		if (rc == 0)
			rc = ckpt_path(path, "%s/%s", dir, segs[i].name);
		if (rc == 0 && env.fstat(segs[i].fd, &st) != 0)
			rc = diag_sys(errno, "checkpoint: cannot stat", spath);
		if (rc == 0)
			rc = ckpt_copy_fd(ck, segs[i].fd, spath, path, (uint64_t)st.st_size);
	}
	if (rc == 0)
		rc = ckpt_wal_tail(dir);
	if (rc == 0)
		rc = wal_check_dir(dir, man.replay_after, 0);
	if (rc == 0) {
		struct buf b = {0};
		char key[160];
		manifest_version_key(key, sizeof(key), s->cfg.prefix, man.version);
		rc = manifest_encode(&man, &b);
		if (rc == 0)
			rc = ckpt_path(path, "%s/objects/%s", ck->tmp, key);
		if (rc == 0)
			rc = ckpt_write_file(path, b.data, b.len);
		buf_destroy(&b);
	}
	for (size_t i = 0; i < nsegs; i++)
		env.close(segs[i].fd);
	env.free(segs);
	view_unref(v); /* objects a merge folded meanwhile may go now */
	manifest_destroy(&man);
	return rc;
}

static int
ckpt_run(struct ckpt *ck, struct shard *const *shards, uint32_t n)
{
	char path[CKPT_PATH_MAX];
	int rc = ckpt_path(path, "%s/objects", ck->tmp);
	if (rc == 0)
		rc = ckpt_mkdir(ck, path);
	if (rc == 0)
		rc = ckpt_path(path, "%s/wal", ck->tmp);
	if (rc == 0)
		rc = ckpt_mkdir(ck, path);
	for (uint32_t i = 0; rc == 0 && i < n; i++)
		rc = ckpt_shard(ck, shards[i]);
	if (rc == 0 && (rc = store_meta_write(ck->tmp, n, NULL, 1)) != 0) {
		char why[1024];
		snprintf(why, sizeof(why), "%s", diag_last());
		diag_set(rc, "checkpoint: writing the store's shape: %s", why);
	}
	/* Deepest first: every name is durable in its directory before the rename. */
	for (uint32_t i = ck->ndirs; rc == 0 && i > 0; i--)
		rc = ckpt_sync_dir(ck->dirs[i - 1]);
	return rc;
}

int
checkpoint_write(const char *src_dir, struct shard *const *shards, uint32_t n, const char *dst)
{
	if (dst == NULL || dst[0] == '\0')
		return diag_set(STRATA_EINVAL, "checkpoint: a target directory is required");
	size_t len = strlen(dst);
	while (len > 1 && dst[len - 1] == '/')
		len--;
	if (len + sizeof(CHECKPOINT_PARTIAL_SUFFIX) + 256 > CKPT_PATH_MAX)
		return diag_set(STRATA_EINVAL, "checkpoint: the target directory's path is longer than %zu "
				"bytes", CKPT_PATH_MAX - sizeof(CHECKPOINT_PARTIAL_SUFFIX) - 256);
	struct ckpt *ck = env.calloc(1, sizeof(*ck));
	if (ck == NULL)
		return diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
	ck->src = src_dir;
	memcpy(ck->dst, dst, len);
	ck->dst[len] = '\0';
	memcpy(ck->tmp, ck->dst, len);
	memcpy(ck->tmp + len, CHECKPOINT_PARTIAL_SUFFIX, sizeof(CHECKPOINT_PARTIAL_SUFFIX));
	int rc = 0;
	int fd = env.open(ck->dst, O_RDONLY | O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd >= 0) {
		env.close(fd);
		rc = diag_set(STRATA_EEXIST, "checkpoint: %s already exists; a checkpoint goes into a new "
			      "directory", ck->dst);
	} else if (errno != ENOENT) {
		rc = diag_sys(errno, "checkpoint: cannot look at the target", ck->dst);
	}
	int made = 0;
	if (rc == 0 && env.mkdir(ck->tmp, 0755) != 0) {
		int err = errno;
		if (err == EEXIST)
			rc = diag_set(STRATA_EEXIST, "checkpoint: %s exists: another checkpoint into %s is "
				      "running, or one was interrupted (remove it)", ck->tmp, ck->dst);
		else if (err == ENOENT)
			rc = diag_set(STRATA_NOTFOUND, "checkpoint: the parent directory of %s does not "
				      "exist", ck->dst);
		else
			rc = diag_sys(err, "checkpoint: cannot create", ck->tmp);
	} else if (rc == 0) {
		made = 1;
		/* Recorded for the final fsync, first: synced last. */
		char **d = env.malloc(16 * sizeof(*d));
		char *copy = env.malloc(strlen(ck->tmp) + 1);
		if (d == NULL || copy == NULL) {
			env.free(d);
			env.free(copy);
			rc = diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
		} else {
			strcpy(copy, ck->tmp);
			d[0] = copy;
			ck->dirs = d;
			ck->ndirs = 1;
			ck->capdirs = 16;
		}
	}
	if (rc == 0 && (ck->buf = env.malloc(CKPT_COPY_CHUNK)) == NULL)
		rc = diag_set(STRATA_ENOMEM, "checkpoint: out of memory");
	if (rc == 0)
		rc = ckpt_run(ck, shards, n);
	if (rc == 0 && env.rename(ck->tmp, ck->dst) != 0)
		rc = diag_sys(errno, "checkpoint: cannot rename the finished checkpoint to", ck->dst);
	if (rc == 0) {
		char parent[CKPT_PATH_MAX];
		const char *slash = strrchr(ck->dst, '/');
		if (slash == NULL)
			snprintf(parent, sizeof(parent), ".");
		else
			snprintf(parent, sizeof(parent), "%.*s", slash == ck->dst ? 1 : (int)(slash - ck->dst),
				 ck->dst);
		rc = ckpt_sync_dir(parent);
		if (rc) {
			/* Not known to be durable: take it back rather than return a doubt. */
			char why[1024];
			snprintf(why, sizeof(why), "%s", diag_last());
			ckpt_rmtree(ck->dst, 0);
			rc = diag_set(rc, "%s (the checkpoint was removed)", why);
		}
	} else if (made) {
		char why[1024];
		snprintf(why, sizeof(why), "%s", diag_last());
		ckpt_rmtree(ck->tmp, 0);
		diag_set(rc, "%s", why);
	}
	if (rc == 0)
		diag_log(LOG_LVL_INFO, "checkpoint %s: %u shards, %llu objects linked, %llu files copied "
			 "(%llu bytes)", ck->dst, n, (unsigned long long)ck->linked,
			 (unsigned long long)ck->copied, (unsigned long long)ck->copied_bytes);
	for (uint32_t i = 0; i < ck->ndirs; i++)
		env.free(ck->dirs[i]);
	env.free(ck->dirs);
	env.free(ck->buf);
	env.free(ck);
	return rc;
}
