/*
 * fs.c — the local-directory object store. A key "a/b/c" is the file <dir>/a/b/c.
 * Writes go to a temp file ".tmp.<random>" in the key's directory, are fsynced,
 * then renamed (put, writer) or hard-linked (put_if_absent) over the key, and the
 * directory is fsynced. Temp files are never listed. A streamed write (the writer:
 * run files) starts the writeback of what it wrote every bytes_per_sync bytes
 * (fs_writer_range_sync), so its final fsync is small.
 */
#include "objstore.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/env.h"

/** Longest key accepted, in bytes. */
#define FS_KEY_MAX 1024
/** Longest full path (root dir + key + temp suffix), in bytes including the NUL. */
#define FS_PATH_MAX 4096
/** Deepest directory nesting walked by list. */
#define FS_LIST_MAX_DEPTH 64
/** Prefix of temp file names; keys may not have a component starting with it. */
#define FS_TMP_PREFIX ".tmp."
/** Attempts at finding an unused temp file name. */
#define FS_TMP_TRIES 16
/** bytes_per_sync of a new store (objstore_fs_set_bytes_per_sync changes it). */
#define FS_BYTES_PER_SYNC_DEFAULT (1u << 20)
/** Incremental writeback covers whole pages of this size only. */
#define FS_SYNC_ALIGN 4096u

/** Read descriptors an fs store keeps open by default (objstore_fs_set_read_fds). */
#define FS_READ_FDS_DEFAULT 64u

/** An object's read descriptor kept open (objects are immutable once published). */
struct fs_rfd {
	/** Full path (NULL: a free slot), and its hash. */
	char *path;
	uint64_t hash;
	/** The descriptor and the object's size. */
	int fd;
	uint64_t size;
	/** Reads using it now; when it was last used (the cache's clock). */
	unsigned refs;
	uint64_t used;
	/** Replaced or deleted: closed once its last read is done. */
	int dead;
};

/** A local-directory store. */
struct fs_store {
	/** Generic header; must be first. */
	struct objstore base;
	/** Root directory, without trailing '/'. */
	char *dir;
	/** Length of dir. */
	size_t dirlen;
	/** A writer starts writeback every this many bytes (0: never); read at writer_open. */
	atomic_uint_fast64_t bytes_per_sync;
	/** Nothing is fsynced (objstore_fs_set_sync): a store whose WAL never syncs. */
	atomic_int nosync;
	/** Guards the read-descriptor cache. */
	pthread_mutex_t rfd_mu;
	/** Its slots (nrfd of them, 0: no cache), its clock, and its counters. */
	struct fs_rfd *rfds;
	unsigned nrfd;
	uint64_t rfd_clock, rfd_hits, rfd_misses;
};

/** A streamed write in progress. */
struct fs_writer {
	/** Generic header; must be first. */
	struct objstore_writer base;
	/** Open temp file. */
	int fd;
	/** Bytes written so far. */
	uint64_t off;
	/** The store's bytes_per_sync when the write started (0: no incremental writeback). */
	uint64_t bytes_per_sync;
	/** The store's nosync when the write started. */
	int nosync;
	/** Start of the range handed to writeback last (its pages may still be in flight). */
	uint64_t sync_start;
	/** End of that range: everything below it was handed to writeback. */
	uint64_t sync_end;
	/** Full path of the temp file. */
	char tmp[FS_PATH_MAX];
	/** Full path of the key. */
	char path[FS_PATH_MAX];
};

/** Counter mixed into temp names so concurrent writers in one process differ. */
static atomic_uint_fast64_t fs_tmp_counter;

static const struct objstore_ops fs_ops;
static int fs_recover(struct objstore *os, uint64_t *removed, uint64_t *bytes);

static uint64_t
fs_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * Validate a key (is_prefix = 0) or a list prefix (is_prefix = 1). A prefix may be
 * empty, may end with '/', and its last component may be partial.
 */
static int
fs_check_key(struct fs_store *fs, const char *key, int is_prefix)
{
	const char *what = is_prefix ? "prefix" : "key";
	if (key == NULL)
		return diag_set(STRATA_EINVAL, "%s: NULL %s", fs->base.name, what);
	size_t len = strlen(key);
	if (len == 0 && !is_prefix)
		return diag_set(STRATA_EINVAL, "%s: empty key", fs->base.name);
	if (len > FS_KEY_MAX)
		return diag_set(STRATA_EINVAL, "%s: %s longer than %d bytes", fs->base.name, what,
				FS_KEY_MAX);
	if (key[0] == '/')
		return diag_set(STRATA_EINVAL, "%s: absolute %s '%s'", fs->base.name, what, key);
	if (strstr(key, "..") != NULL)
		return diag_set(STRATA_EINVAL, "%s: %s '%s' contains '..'", fs->base.name, what, key);
	if (strstr(key, "//") != NULL)
		return diag_set(STRATA_EINVAL, "%s: %s '%s' contains '//'", fs->base.name, what, key);
	if (is_prefix)
		return 0;
	if (key[len - 1] == '/')
		return diag_set(STRATA_EINVAL, "%s: key '%s' ends with '/'", fs->base.name, key);
	const char *c = key;
	while (*c != '\0') {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 1 && c[0] == '.')
			return diag_set(STRATA_EINVAL, "%s: key '%s' has a '.' component",
					fs->base.name, key);
		if (n >= strlen(FS_TMP_PREFIX) && memcmp(c, FS_TMP_PREFIX, strlen(FS_TMP_PREFIX)) == 0)
			return diag_set(STRATA_EINVAL, "%s: key '%s' has a component starting with '%s'",
					fs->base.name, key, FS_TMP_PREFIX);
		if (n > 255)
			return diag_set(STRATA_EINVAL, "%s: key '%s' has a component over 255 bytes",
					fs->base.name, key);
		c += n;
		if (*c == '/')
			c++;
	}
	return 0;
}

/** Full path of key under the root. */
static int
fs_path(struct fs_store *fs, const char *key, char *dst)
{
	int n = snprintf(dst, FS_PATH_MAX, "%s/%s", fs->dir, key);
	if (n < 0 || n >= FS_PATH_MAX - 32)
		return diag_set(STRATA_EINVAL, "%s: path of key '%s' too long", fs->base.name, key);
	return 0;
}

/** Length of the directory part of path (up to, not including, the last '/'). */
static size_t
fs_dirlen(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? (size_t)(s - path) : 0;
}

/** fsync the directory whose path is the first len bytes of path. */
static int
fs_sync_dir(int nosync, const char *path, size_t len)
{
	if (nosync)
		return 0;
	char d[FS_PATH_MAX];
	if (len == 0) {
		d[0] = '/';
		len = 1;
	} else {
		memcpy(d, path, len);
	}
	d[len] = '\0';
	int fd = env.open(d, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return diag_sys(errno, "open directory", d);
	if (env.fsync(fd) != 0) {
		int err = errno;
		env.close(fd);
		return diag_sys(err, "fsync directory", d);
	}
	env.close(fd);
	return 0;
}

/*
 * Create every missing directory of path's directory part below the root (root_len
 * bytes of path are the existing root). A new directory's parent is fsynced.
 */
static int
fs_mkdirs(int nosync, const char *path, size_t root_len)
{
	char d[FS_PATH_MAX];
	size_t end = fs_dirlen(path);
	if (end <= root_len)
		return 0;
	memcpy(d, path, end);
	d[end] = '\0';
	int fd = env.open(d, O_RDONLY | O_DIRECTORY, 0);
	if (fd >= 0) {
		env.close(fd);
		return 0;
	}
	for (size_t i = root_len + 1; i <= end; i++) {
		if (i != end && d[i] != '/')
			continue;
		char save = d[i];
		d[i] = '\0';
		if (env.mkdir(d, 0755) == 0) {
			int rc = fs_sync_dir(nosync, d, fs_dirlen(d));
			if (rc) {
				d[i] = save;
				return rc;
			}
		} else if (errno != EEXIST) {
			int rc = diag_sys(errno, "mkdir", d);
			d[i] = save;
			return rc;
		}
		d[i] = save;
	}
	return 0;
}

/** Create an unused temp file next to path; tmp receives its path. */
static int
fs_tmp_open(const char *path, char *tmp, int *fd_out)
{
	size_t dl = fs_dirlen(path);
	for (int i = 0; i < FS_TMP_TRIES; i++) {
		uint64_t seed = atomic_fetch_add(&fs_tmp_counter, 1);
		uint64_t r = fs_mix64(seed ^ fs_mix64(env.mono_ns()) ^ ((uint64_t)getpid() << 40) ^
				      (uint64_t)(uintptr_t)tmp);
		snprintf(tmp, FS_PATH_MAX, "%.*s/" FS_TMP_PREFIX "%016llx", (int)dl, path,
			 (unsigned long long)r);
		int fd = env.open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd >= 0) {
			*fd_out = fd;
			return 0;
		}
		if (errno != EEXIST) {
			/* diag_sys: out of descriptors names the limit. */
			char what[FS_PATH_MAX + 32];
			snprintf(what, sizeof(what), "create temp file for %s:", path);
			return diag_sys(errno, what, tmp);
		}
	}
	return diag_set(STRATA_EIO, "create temp file for %s: %d names taken", path, FS_TMP_TRIES);
}

/** Write all of data at off. */
static int
fs_write_all(int fd, const void *data, size_t len, uint64_t off, const char *tmp, const char *path)
{
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t n = env.pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return diag_set(diag_errno(errno), "write %s (temp %s) at %llu: %s", path, tmp,
					(unsigned long long)off, strerror(errno));
		}
		if (n == 0)
			return diag_set(STRATA_EIO, "write %s (temp %s) at %llu: no progress", path,
					tmp, (unsigned long long)off);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/** fsync and close a temp file; the fd is closed whatever happens. */
static int
fs_tmp_finish(int nosync, int fd, const char *tmp, const char *path)
{
	if (!nosync && env.fsync(fd) != 0) {
		int err = errno;
		env.close(fd);
		return diag_set(diag_errno(err), "fsync %s (temp %s): %s", path, tmp, strerror(err));
	}
	if (env.close(fd) != 0) {
		int err = errno;
		return diag_set(diag_errno(err), "close %s (temp %s): %s", path, tmp, strerror(err));
	}
	return 0;
}

/** Open key for reading; STRATA_NOTFOUND if absent or not a regular file. */
static int
fs_open_read(struct fs_store *fs, const char *key, char *path, int *fd_out, uint64_t *size)
{
	int rc = fs_check_key(fs, key, 0);
	if (rc)
		return rc;
	if ((rc = fs_path(fs, key, path)) != 0)
		return rc;
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return STRATA_NOTFOUND;
		return diag_sys(errno, "open", path);
	}
	struct stat st;
	if (env.fstat(fd, &st) != 0) {
		int err = errno;
		env.close(fd);
		return diag_sys(err, "fstat", path);
	}
	if (!S_ISREG(st.st_mode)) {
		env.close(fd);
		return STRATA_NOTFOUND;
	}
	*fd_out = fd;
	*size = (uint64_t)st.st_size;
	return 0;
}

/** Read up to len bytes at off; *got receives the count (short only at end of file). */
static uint64_t
fs_path_hash(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	return h;
}

/** rfd_mu held: close a slot's descriptor and free it (no read uses it). */
static void
fs_rfd_drop(struct fs_rfd *e)
{
	env.close(e->fd);
	env.free(e->path);
	memset(e, 0, sizeof(*e));
	e->fd = -1;
}

/** Open key for a ranged read through the cache: *slot is the cache slot holding fd
 *  (give it back with fs_rfd_put), or -1 for a descriptor the caller closes. */
static int
fs_rfd_get(struct fs_store *fs, const char *key, char *path, int *fd, uint64_t *size, int *slot)
{
	*slot = -1;
	int rc = fs_check_key(fs, key, 0);
	if (rc == 0)
		rc = fs_path(fs, key, path);
	if (rc)
		return rc;
	uint64_t h = fs_path_hash(path);
	if (fs->nrfd > 0) {
		pthread_mutex_lock(&fs->rfd_mu);
		for (unsigned i = 0; i < fs->nrfd; i++) {
			struct fs_rfd *e = &fs->rfds[i];
			if (e->path != NULL && !e->dead && e->hash == h && strcmp(e->path, path) == 0) {
				e->refs++;
				e->used = ++fs->rfd_clock;
				fs->rfd_hits++;
				*fd = e->fd;
				*size = e->size;
				*slot = (int)i;
				pthread_mutex_unlock(&fs->rfd_mu);
				return 0;
			}
		}
		fs->rfd_misses++;
		pthread_mutex_unlock(&fs->rfd_mu);
	}
	if ((rc = fs_open_read(fs, key, path, fd, size)) != 0 || fs->nrfd == 0)
		return rc;
	/* Keep it: a free slot, else the least recently used one no read is using. */
	char *copy = env.malloc(strlen(path) + 1);
	if (copy == NULL)
		return 0;
	strcpy(copy, path);
	pthread_mutex_lock(&fs->rfd_mu);
	struct fs_rfd *victim = NULL;
	for (unsigned i = 0; i < fs->nrfd; i++) {
		struct fs_rfd *e = &fs->rfds[i];
		if (e->path == NULL) {
			victim = e;
			break;
		}
		if (e->refs == 0 && (victim == NULL || e->used < victim->used))
			victim = e;
	}
	if (victim == NULL) {
		pthread_mutex_unlock(&fs->rfd_mu);
		env.free(copy);
		return 0;
	}
	if (victim->path != NULL)
		fs_rfd_drop(victim);
	*victim = (struct fs_rfd){copy, h, *fd, *size, 1, ++fs->rfd_clock, 0};
	*slot = (int)(victim - fs->rfds);
	pthread_mutex_unlock(&fs->rfd_mu);
	return 0;
}

/** A read through fs_rfd_get is done. */
static void
fs_rfd_put(struct fs_store *fs, int slot, int fd)
{
	if (slot < 0) {
		env.close(fd);
		return;
	}
	pthread_mutex_lock(&fs->rfd_mu);
	struct fs_rfd *e = &fs->rfds[slot];
	if (--e->refs == 0 && e->dead)
		fs_rfd_drop(e);
	pthread_mutex_unlock(&fs->rfd_mu);
}

/** The object at path is replaced or deleted: forget its descriptor. */
static void
fs_rfd_forget(struct fs_store *fs, const char *path)
{
	if (fs->nrfd == 0)
		return;
	uint64_t h = fs_path_hash(path);
	pthread_mutex_lock(&fs->rfd_mu);
	for (unsigned i = 0; i < fs->nrfd; i++) {
		struct fs_rfd *e = &fs->rfds[i];
		if (e->path != NULL && !e->dead && e->hash == h && strcmp(e->path, path) == 0) {
			if (e->refs == 0)
				fs_rfd_drop(e);
			else
				e->dead = 1;
		}
	}
	pthread_mutex_unlock(&fs->rfd_mu);
}

static int
fs_read_all(int fd, void *dst, size_t len, uint64_t off, size_t *got, const char *path)
{
	uint8_t *p = dst;
	size_t done = 0;
	while (done < len) {
		ssize_t n = env.pread(fd, p + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return diag_set(diag_errno(errno), "read %s at %llu: %s", path,
					(unsigned long long)(off + done), strerror(errno));
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

static int
fs_get(struct objstore *os, const char *key, struct buf *out)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX];
	int fd;
	uint64_t size;
	int rc = fs_open_read(fs, key, path, &fd, &size);
	if (rc)
		return rc;
	if (size == 0) {
		env.close(fd);
		return 0;
	}
	if (size > SIZE_MAX / 2) {
		env.close(fd);
		return diag_set(STRATA_ENOMEM, "read %s: %llu bytes do not fit in memory", path,
				(unsigned long long)size);
	}
	if (buf_reserve(out, (size_t)size) != 0) {
		env.close(fd);
		return diag_set(STRATA_ENOMEM, "read %s: no memory for %llu bytes", path,
				(unsigned long long)size);
	}
	size_t got;
	rc = fs_read_all(fd, out->data + out->len, (size_t)size, 0, &got, path);
	env.close(fd);
	if (rc)
		return rc;
	if (got != size)
		return diag_set(STRATA_EIO, "read %s: %zu of %llu bytes (file shrank)", path, got,
				(unsigned long long)size);
	out->len += got;
	return 0;
}

static int
fs_get_range(struct objstore *os, const char *key, uint64_t off, size_t len, void *dst, size_t *got)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX];
	int fd, slot;
	uint64_t size;
	*got = 0;
	int rc = fs_rfd_get(fs, key, path, &fd, &size, &slot);
	if (rc)
		return rc;
	if (off < size && len > 0) {
		if (len > size - off)
			len = (size_t)(size - off);
		rc = fs_read_all(fd, dst, len, off, got, path);
	}
	fs_rfd_put(fs, slot, fd);
	return rc;
}

static int
fs_size(struct objstore *os, const char *key, uint64_t *size)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX];
	int fd;
	int rc = fs_open_read(fs, key, path, &fd, size);
	if (rc)
		return rc;
	env.close(fd);
	return 0;
}

/** Write data to a fresh fsynced temp file next to key's path (directories created). */
static int
fs_write_tmp(struct fs_store *fs, const char *key, const void *data, size_t len, char *path,
	     char *tmp)
{
	int rc = fs_check_key(fs, key, 0);
	if (rc)
		return rc;
	if (data == NULL && len > 0)
		return diag_set(STRATA_EINVAL, "%s: put of key '%s' with NULL data", fs->base.name,
				key);
	if ((rc = fs_path(fs, key, path)) != 0)
		return rc;
	if ((rc = fs_mkdirs(atomic_load(&fs->nosync), path, fs->dirlen)) != 0)
		return rc;
	int fd;
	if ((rc = fs_tmp_open(path, tmp, &fd)) != 0)
		return rc;
	rc = fs_write_all(fd, data, len, 0, tmp, path);
	if (rc) {
		env.close(fd);
		env.unlink(tmp);
		return rc;
	}
	rc = fs_tmp_finish(atomic_load(&fs->nosync), fd, tmp, path);
	if (rc) {
		env.unlink(tmp);
		return rc;
	}
	return 0;
}

static int
fs_put(struct objstore *os, const char *key, const void *data, size_t len)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX], tmp[FS_PATH_MAX];
	int rc = fs_write_tmp(fs, key, data, len, path, tmp);
	if (rc)
		return rc;
	fs_rfd_forget(fs, path);
	if (env.rename(tmp, path) != 0) {
		int err = errno;
		env.unlink(tmp);
		return diag_set(diag_errno(err), "rename %s to %s: %s", tmp, path, strerror(err));
	}
	return fs_sync_dir(atomic_load(&fs->nosync), path, fs_dirlen(path));
}

static int
fs_put_if_absent(struct objstore *os, const char *key, const void *data, size_t len)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX], tmp[FS_PATH_MAX];
	int rc = fs_write_tmp(fs, key, data, len, path, tmp);
	if (rc)
		return rc;
	if (env.link(tmp, path) != 0) {
		int err = errno;
		env.unlink(tmp);
		if (err == EEXIST)
			return diag_set(STRATA_EEXIST, "put-if-absent %s: object exists", path);
		return diag_set(diag_errno(err), "link %s to %s: %s", tmp, path, strerror(err));
	}
	/* The object is published: a leftover temp file is harmless (never listed), but
	 * the directory entry must still be made durable. */
	if (env.unlink(tmp) != 0 && errno != ENOENT)
		diag_log(LOG_LVL_WARN, "put-if-absent %s: could not remove the temp file %s: %s", path,
			 tmp, strerror(errno));
	return fs_sync_dir(atomic_load(&fs->nosync), path, fs_dirlen(path));
}

static int
fs_writer_open(struct objstore *os, const char *key, struct objstore_writer **out)
{
	struct fs_store *fs = (struct fs_store *)os;
	int rc = fs_check_key(fs, key, 0);
	if (rc)
		return rc;
	struct fs_writer *w = env.malloc(sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "%s: no memory for a writer of '%s'", fs->base.name,
				key);
	w->base.os = os;
	w->off = 0;
	w->bytes_per_sync = atomic_load_explicit(&fs->bytes_per_sync, memory_order_relaxed);
	w->nosync = atomic_load(&fs->nosync);
	if (w->nosync)
		w->bytes_per_sync = 0; /* no final fsync to keep small */
	w->sync_start = 0;
	w->sync_end = 0;
	if ((rc = fs_path(fs, key, w->path)) != 0 || (rc = fs_mkdirs(w->nosync, w->path, fs->dirlen)) != 0 ||
	    (rc = fs_tmp_open(w->path, w->tmp, &w->fd)) != 0) {
		env.free(w);
		return rc;
	}
	*out = &w->base;
	return 0;
}

/*
 * Incremental writeback: wait for the writeback of the range handed over last time,
 * then start the writeback of every whole page written since (one sync_file_range,
 * SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE, over [sync_start, end)). So
 * about two bytes_per_sync of the file at most are dirty or in flight, the final fsync
 * has little left to write, and an ext4 journal commit (a WAL fdatasync's) never waits
 * behind a whole run's writeback. It makes nothing durable; the commit's fsync does.
 * A failure fails the write: the kernel reports a writeback error to an open file
 * once, so the final fsync might not report it again. A kernel or file system without
 * sync_file_range turns it off for this writer.
 */
static int
fs_writer_range_sync(struct fs_writer *w)
{
	uint64_t end = w->off - w->off % FS_SYNC_ALIGN;
	if (env.sync_file_range == NULL) {
		w->bytes_per_sync = 0;
		return 0;
	}
	int r;
	do {
		r = env.sync_file_range(w->fd, (off_t)w->sync_start, (off_t)(end - w->sync_start),
					SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
	} while (r != 0 && errno == EINTR);
	if (r != 0) {
		if (errno == ENOSYS || errno == EINVAL || errno == ESPIPE || errno == EOPNOTSUPP) {
			w->bytes_per_sync = 0;
			return 0;
		}
		return diag_set(diag_errno(errno), "writeback of %s (temp %s) up to %llu: %s",
				w->path, w->tmp, (unsigned long long)end, strerror(errno));
	}
	w->sync_start = w->sync_end;
	w->sync_end = end;
	return 0;
}

static int
fs_writer_write(struct objstore_writer *base, const void *data, size_t len)
{
	struct fs_writer *w = (struct fs_writer *)base;
	if (len == 0)
		return 0;
	if (data == NULL)
		return diag_set(STRATA_EINVAL, "write %s: NULL data", w->path);
	int rc = fs_write_all(w->fd, data, len, w->off, w->tmp, w->path);
	if (rc)
		return rc;
	w->off += len;
	if (w->bytes_per_sync != 0 && w->off - w->sync_end >= w->bytes_per_sync)
		return fs_writer_range_sync(w);
	return 0;
}

static int
fs_writer_commit(struct objstore_writer *base)
{
	struct fs_writer *w = (struct fs_writer *)base;
	int rc = fs_tmp_finish(w->nosync, w->fd, w->tmp, w->path);
	if (rc == 0)
		fs_rfd_forget((struct fs_store *)w->base.os, w->path);
	if (rc == 0 && env.rename(w->tmp, w->path) != 0) {
		int err = errno;
		rc = diag_set(diag_errno(err), "rename %s to %s: %s", w->tmp, w->path,
			      strerror(err));
	}
	if (rc) {
		env.unlink(w->tmp);
		env.free(w);
		return rc;
	}
	rc = fs_sync_dir(w->nosync, w->path, fs_dirlen(w->path));
	env.free(w);
	return rc;
}

static void
fs_writer_abort(struct objstore_writer *base)
{
	struct fs_writer *w = (struct fs_writer *)base;
	if (w == NULL)
		return;
	env.close(w->fd);
	env.unlink(w->tmp);
	env.free(w);
}

static int
fs_del(struct objstore *os, const char *key)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX];
	int rc = fs_check_key(fs, key, 0);
	if (rc)
		return rc;
	if ((rc = fs_path(fs, key, path)) != 0)
		return rc;
	fs_rfd_forget(fs, path);
	if (env.unlink(path) != 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return diag_sys(errno, "unlink", path);
	}
	return fs_sync_dir(atomic_load(&fs->nosync), path, fs_dirlen(path));
}

/** Unlink every key, then fsync each directory that lost an entry once. */
static int
fs_del_batch(struct objstore *os, const char *const *keys, size_t n)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX], last[FS_PATH_MAX] = "";
	size_t last_len = 0;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		int krc = fs_check_key(fs, keys[i], 0);
		if (krc == 0)
			krc = fs_path(fs, keys[i], path);
		if (krc == 0)
			fs_rfd_forget(fs, path);
		if (krc == 0 && env.unlink(path) != 0 && errno != ENOENT && errno != ENOTDIR)
			krc = diag_sys(errno, "unlink", path);
		if (krc) {
			if (rc == 0)
				rc = krc;
			continue;
		}
		size_t dl = fs_dirlen(path);
		if (last_len != 0 && (dl != last_len || memcmp(path, last, dl) != 0)) {
			int drc = fs_sync_dir(atomic_load(&fs->nosync), last, last_len);
			if (rc == 0)
				rc = drc;
		}
		memcpy(last, path, dl);
		last[dl] = '\0';
		last_len = dl;
	}
	if (last_len != 0) {
		int drc = fs_sync_dir(atomic_load(&fs->nosync), last, last_len);
		if (rc == 0)
			rc = drc;
	}
	return rc;
}

/** Cut an object to size bytes (a large delete goes in chunks); an absent key is fine. */
static int
fs_shrink(struct objstore *os, const char *key, uint64_t size)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX];
	int rc = fs_check_key(fs, key, 0);
	if (rc == 0)
		rc = fs_path(fs, key, path);
	if (rc)
		return rc;
	fs_rfd_forget(fs, path);
	int fd = env.open(path, O_WRONLY, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : diag_sys(errno, "open for truncation", path);
	struct stat st;
	if (env.fstat(fd, &st) == 0 && st.st_nlink > 1) {
		/* Hard-linked elsewhere (a checkpoint): cutting it would cut the other name too. */
		env.close(fd);
		return 0;
	}
	if (env.ftruncate(fd, (off_t)size) != 0)
		rc = diag_sys(errno, "truncate", path);
	env.close(fd);
	return rc;
}

/** One key found by list. */
struct fs_entry {
	/** The key (owned). */
	char *key;
	/** Object size. */
	uint64_t size;
};

/** Keys collected by a list walk. */
struct fs_listing {
	/** The entries. */
	struct fs_entry *v;
	/** Number used. */
	size_t n;
	/** Number allocated. */
	size_t cap;
};

static int
fs_listing_add(struct fs_listing *l, const char *key, uint64_t size)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct fs_entry *v = env.realloc(l->v, cap * sizeof(*v));
		if (v == NULL)
			return diag_set(STRATA_ENOMEM, "list: no memory for %zu keys", cap);
		l->v = v;
		l->cap = cap;
	}
	size_t len = strlen(key);
	char *k = env.malloc(len + 1);
	if (k == NULL)
		return diag_set(STRATA_ENOMEM, "list: no memory for key '%s'", key);
	memcpy(k, key, len + 1);
	l->v[l->n].key = k;
	l->v[l->n].size = size;
	l->n++;
	return 0;
}

static void
fs_listing_destroy(struct fs_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		env.free(l->v[i].key);
	env.free(l->v);
	memset(l, 0, sizeof(*l));
}

static int
fs_entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fs_entry *)a)->key, ((const struct fs_entry *)b)->key);
}

/*
 * Walk the directory holding keys that start with rel (a key prefix ending in '/'
 * or empty). At the top level only names starting with part are taken.
 */
static int
fs_walk(struct fs_store *fs, char *rel, size_t rel_len, const char *part, int depth,
	struct fs_listing *l)
{
	char path[FS_PATH_MAX];
	if (depth > FS_LIST_MAX_DEPTH)
		return diag_set(STRATA_EIO, "list %s/%.*s: nested deeper than %d directories",
				fs->dir, (int)rel_len, rel, FS_LIST_MAX_DEPTH);
	int pn = snprintf(path, sizeof(path), "%s/%.*s", fs->dir, (int)rel_len, rel);
	if (pn < 0 || pn >= FS_PATH_MAX)
		return diag_set(STRATA_EINVAL, "list %s: path too long", fs->dir);
	DIR *d = env.opendir(path);
	if (d == NULL) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return diag_sys(errno, "opendir", path);
	}
	size_t part_len = part ? strlen(part) : 0;
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = env.readdir(d);
		if (de == NULL) {
			if (errno != 0)
				rc = diag_sys(errno, "readdir", path);
			break;
		}
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (strncmp(name, FS_TMP_PREFIX, strlen(FS_TMP_PREFIX)) == 0)
			continue;
		if (part_len > 0 && strncmp(name, part, part_len) != 0)
			continue;
		size_t nl = strlen(name);
		if (rel_len + nl + 2 > FS_KEY_MAX + 1)
			continue;
		memcpy(rel + rel_len, name, nl + 1);
		int is_dir = de->d_type == DT_DIR;
		uint64_t size = 0;
		if (de->d_type == DT_REG || de->d_type == DT_UNKNOWN) {
			char fp[FS_PATH_MAX];
			snprintf(fp, sizeof(fp), "%s/%s", fs->dir, rel);
			struct stat st;
			if (env.lstat != NULL) {
				/* One call per entry; a symlink is neither a file nor a directory. */
				if (env.lstat(fp, &st) != 0) {
					if (errno == ENOENT)
						continue;
					rc = diag_sys(errno, "lstat", fp);
					break;
				}
			} else {
				int fd = env.open(fp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
				if (fd < 0) {
					if (errno == ENOENT || errno == ELOOP)
						continue;
					rc = diag_sys(errno, "open", fp);
					break;
				}
				if (env.fstat(fd, &st) != 0) {
					rc = diag_sys(errno, "fstat", fp);
					env.close(fd);
					break;
				}
				env.close(fd);
			}
			is_dir = S_ISDIR(st.st_mode);
			if (!is_dir && !S_ISREG(st.st_mode))
				continue;
			size = (uint64_t)st.st_size;
		} else if (!is_dir) {
			continue;
		}
		if (is_dir) {
			rel[rel_len + nl] = '/';
			rel[rel_len + nl + 1] = '\0';
			rc = fs_walk(fs, rel, rel_len + nl + 1, NULL, depth + 1, l);
		} else {
			rc = fs_listing_add(l, rel, size);
		}
		rel[rel_len] = '\0';
		if (rc)
			break;
	}
	env.closedir(d);
	return rc;
}

static int
fs_list(struct objstore *os, const char *prefix, objstore_list_cb cb, void *ctx)
{
	struct fs_store *fs = (struct fs_store *)os;
	int rc = fs_check_key(fs, prefix, 1);
	if (rc)
		return rc;
	char rel[FS_KEY_MAX + 2];
	size_t dl = strrchr(prefix, '/') ? fs_dirlen(prefix) + 1 : 0;
	memcpy(rel, prefix, dl);
	rel[dl] = '\0';
	struct fs_listing l = {0};
	rc = fs_walk(fs, rel, dl, prefix + dl, 0, &l);
	if (rc == 0) {
		if (l.n > 1)
			qsort(l.v, l.n, sizeof(*l.v), fs_entry_cmp);
		for (size_t i = 0; i < l.n; i++) {
			rc = cb(ctx, l.v[i].key, l.v[i].size);
			if (rc)
				break;
		}
	}
	fs_listing_destroy(&l);
	return rc;
}

static void
fs_destroy(struct objstore *os)
{
	struct fs_store *fs = (struct fs_store *)os;
	for (unsigned i = 0; i < fs->nrfd; i++)
		if (fs->rfds[i].path != NULL)
			fs_rfd_drop(&fs->rfds[i]);
	env.free(fs->rfds);
	pthread_mutex_destroy(&fs->rfd_mu);
	env.free(fs->dir);
	env.free(fs);
}

static const struct objstore_ops fs_ops = {
	.get = fs_get,
	.get_range = fs_get_range,
	.size = fs_size,
	.put = fs_put,
	.put_if_absent = fs_put_if_absent,
	.writer_open = fs_writer_open,
	.writer_write = fs_writer_write,
	.writer_commit = fs_writer_commit,
	.writer_abort = fs_writer_abort,
	.del = fs_del,
	.list = fs_list,
	.del_batch = fs_del_batch,
	.shrink = fs_shrink,
	.recover = fs_recover,
	.destroy = fs_destroy,
};

/** mkdir -p of the store's root, which must end up a directory. */
static int
fs_mkdir_p(const char *d)
{
	int rc = env_mkdir_p(d);
	if (rc)
		return rc;
	DIR *dd = env.opendir(d);
	if (dd == NULL)
		return diag_sys(errno, "opendir", d);
	env.closedir(dd);
	return 0;
}

int
objstore_fs_new(const char *dir, struct objstore **out)
{
	if (dir == NULL || dir[0] == '\0')
		return diag_set(STRATA_EINVAL, "fs object store: empty directory name");
	size_t len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len + FS_KEY_MAX + 64 >= FS_PATH_MAX)
		return diag_set(STRATA_EINVAL, "fs object store: directory name over %d bytes",
				FS_PATH_MAX - FS_KEY_MAX - 64);
	struct fs_store *fs = env.calloc(1, sizeof(*fs));
	char *d = env.malloc(len + 1);
	if (fs == NULL || d == NULL) {
		env.free(fs);
		env.free(d);
		return diag_set(STRATA_ENOMEM, "fs object store %s: no memory", dir);
	}
	memcpy(d, dir, len);
	d[len] = '\0';
	if (len == 1 && d[0] == '/') {
		/* The root itself: paths are built as "<dir>/<key>", so keep it empty. */
		d[0] = '\0';
		len = 0;
	}
	int rc = len > 0 ? fs_mkdir_p(d) : 0;
	if (rc) {
		env.free(fs);
		env.free(d);
		return rc;
	}
	fs->base.ops = &fs_ops;
	snprintf(fs->base.name, sizeof(fs->base.name), "fs:%s", len ? d : "/");
	fs->dir = d;
	fs->dirlen = len;
	atomic_init(&fs->bytes_per_sync, FS_BYTES_PER_SYNC_DEFAULT);
	pthread_mutex_init(&fs->rfd_mu, NULL);
	fs->rfds = env.calloc(FS_READ_FDS_DEFAULT, sizeof(*fs->rfds));
	fs->nrfd = fs->rfds != NULL ? FS_READ_FDS_DEFAULT : 0; /* no cache is slower, not wrong */
	*out = &fs->base;
	return 0;
}

int
objstore_fs_set_read_fds(struct objstore *os, unsigned n)
{
	if (os == NULL || os->ops != &fs_ops)
		return diag_set(STRATA_EINVAL, "read_fds: %s is not a local-directory store",
				os != NULL ? os->name : "(null)");
	struct fs_store *fs = (struct fs_store *)os;
	struct fs_rfd *next = n ? env.calloc(n, sizeof(*next)) : NULL;
	if (n && next == NULL)
		return diag_set(STRATA_ENOMEM, "%s: no memory for %u read descriptors", os->name, n);
	pthread_mutex_lock(&fs->rfd_mu);
	for (unsigned i = 0; i < fs->nrfd; i++) {
		if (fs->rfds[i].path != NULL && fs->rfds[i].refs > 0) {
			pthread_mutex_unlock(&fs->rfd_mu);
			env.free(next);
			return diag_set(STRATA_EBUSY, "%s: reads are in flight", os->name);
		}
	}
	for (unsigned i = 0; i < fs->nrfd; i++)
		if (fs->rfds[i].path != NULL)
			fs_rfd_drop(&fs->rfds[i]);
	env.free(fs->rfds);
	fs->rfds = next;
	fs->nrfd = n;
	pthread_mutex_unlock(&fs->rfd_mu);
	return 0;
}

void
objstore_fs_read_fd_stats(struct objstore *os, unsigned *open, uint64_t *hits, uint64_t *misses)
{
	struct fs_store *fs = (struct fs_store *)os;
	unsigned n = 0;
	pthread_mutex_lock(&fs->rfd_mu);
	for (unsigned i = 0; i < fs->nrfd; i++)
		n += fs->rfds[i].path != NULL;
	if (hits)
		*hits = fs->rfd_hits;
	if (misses)
		*misses = fs->rfd_misses;
	pthread_mutex_unlock(&fs->rfd_mu);
	if (open)
		*open = n;
}

int
objstore_fs_set_sync(struct objstore *os, int on)
{
	if (os == NULL || os->ops != &fs_ops)
		return diag_set(STRATA_EINVAL, "set_sync: %s is not a local-directory store",
				os != NULL ? os->name : "(null)");
	atomic_store(&((struct fs_store *)os)->nosync, !on);
	return 0;
}

int
objstore_fs_set_bytes_per_sync(struct objstore *os, uint64_t bytes)
{
	if (os == NULL || os->ops != &fs_ops)
		return diag_set(STRATA_EINVAL, "bytes_per_sync: %s is not a local-directory store",
				os != NULL ? os->name : "(null)");
	if (bytes != 0 && bytes < FS_SYNC_ALIGN)
		return diag_set(STRATA_EINVAL, "%s: bytes_per_sync %llu is under %u (0 turns it off)",
				os->name, (unsigned long long)bytes, FS_SYNC_ALIGN);
	struct fs_store *fs = (struct fs_store *)os;
	atomic_store_explicit(&fs->bytes_per_sync, bytes, memory_order_relaxed);
	return 0;
}

/** Remove temp files under path (recursive); counts into *n and *bytes. */
static int
fs_sweep_dir(char *path, size_t len, uint64_t *n, uint64_t *bytes, int depth)
{
	if (depth > 16)
		return 0;
	DIR *d = env.opendir(path);
	if (d == NULL)
		return errno == ENOENT ? 0 : diag_sys(errno, "opendir", path);
	int rc = 0;
	struct dirent *e;
	while ((e = env.readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		size_t nl = strlen(e->d_name);
		if (len + 1 + nl + 1 > FS_PATH_MAX)
			continue;
		/* Only directories and temp files matter: a store of 10 000 generations need
		 * not stat every one (the entry's type comes with it on most file systems). */
		int tmp = nl > strlen(FS_TMP_PREFIX) &&
			  memcmp(e->d_name, FS_TMP_PREFIX, strlen(FS_TMP_PREFIX)) == 0;
		if (!tmp && e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
			continue;
		path[len] = '/';
		memcpy(path + len + 1, e->d_name, nl + 1);
		struct stat st;
		if (lstat(path, &st) != 0) {
			path[len] = '\0';
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int r = fs_sweep_dir(path, len + 1 + nl, n, bytes, depth + 1);
			if (r && rc == 0)
				rc = r;
		} else if (S_ISREG(st.st_mode) && tmp) {
			if (env.unlink(path) == 0) {
				(*n)++;
				*bytes += (uint64_t)st.st_size;
			} else if (rc == 0) {
				rc = diag_sys(errno, "unlink", path);
			}
		}
		path[len] = '\0';
	}
	env.closedir(d);
	return rc;
}

/** The temp files of writes a crash interrupted are never published: remove them. */
static int
fs_recover(struct objstore *os, uint64_t *removed, uint64_t *bytes)
{
	struct fs_store *fs = (struct fs_store *)os;
	char path[FS_PATH_MAX];
	uint64_t n = 0, b = 0;
	snprintf(path, sizeof(path), "%s", fs->dirlen ? fs->dir : "/");
	int rc = fs_sweep_dir(path, fs->dirlen ? fs->dirlen : 0, &n, &b, 0);
	if (removed)
		*removed = n;
	if (bytes)
		*bytes = b;
	return rc;
}
