/*
 * sim_fs.c — an in-memory file system behind an env_ops table, for `strata sim`.
 *
 * Every file has a volatile image (what reads see) and a durable one (what survives a
 * power loss): a successful fsync/fdatasync copies the bytes written since the last
 * sync; a failed one drops them (Linux may lose those pages; a later successful sync
 * does not bring them back). Every directory has volatile and durable entries; a
 * directory fsync makes its entries durable. A power loss keeps only what is durable
 * (an unsynced tail may survive in part, its end torn) and closes every descriptor.
 *
 * The env calls take no context: the table is the first member of struct sim_fs, so
 * env_tls (the table the calling thread entered) leads back to the state. Directory
 * listings are in name order; temp files get canonical names (".tmp.simN") so that a
 * run's files and events depend on the seed only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <xxhash.h>

#include "../lib/diag.h"
#include "../objstore/objstore.h"
#include "sim.h"

/** Longest path the simulation handles. */
#define SIM_PATH_MAX 1024
/** Longest file name. */
#define SIM_NAME_MAX 256
/** Descriptors open at once. */
#define SIM_FD_MAX 1024
/** First descriptor number handed out (far from the process's real ones). */
#define SIM_FD_BASE 100000
/** Temp-file prefix of the fs object store (node/objstore/fs.c). */
#define SIM_TMP_PREFIX ".tmp."
/** Canonical temp names: SIM_TMP_PREFIX "sim" and a counter. */
#define SIM_TMP_CANON ".tmp.sim"
/** Live temp-name aliases at once. */
#define SIM_ALIAS_MAX 64
/** Simulated time one file call takes, ns. */
#define SIM_CALL_NS 2000ull

/** A directory entry. */
struct sim_ent {
	/** Name within the directory. */
	char *name;
	/** The inode it names. */
	uint32_t ino;
};

/** A file or a directory. */
struct sim_ino {
	/** 0 free, 1 file, 2 directory. */
	int kind;
	/** Volatile entries, durable entries and open descriptors that name it. */
	int refs;
	/** Volatile entries that name it (st_nlink). */
	int nlink;
	/** File: volatile bytes, length, capacity. */
	uint8_t *data;
	size_t len, cap;
	/** File: durable bytes and length. */
	uint8_t *dur;
	size_t dur_len;
	/** File: bytes written since the last sync: [dirty_lo, dirty_hi) (lo >= hi: none). */
	size_t dirty_lo, dirty_hi;
	/** Directory: volatile entries, sorted by name. */
	struct sim_ent *ents;
	size_t nents, cap_ents;
	/** Directory: durable entries. */
	struct sim_ent *dents;
	size_t ndents;
	/** The descriptor holding the flock (0: none). */
	int lock_fd;
	/** Canonical path at creation, for traces and bug seams. */
	char *path;
};

/** An open descriptor. */
struct sim_fd {
	/** 0 when free. */
	int used;
	/** The inode. */
	uint32_t ino;
	/** open(2) flags. */
	int flags;
};

/** A listing being read (handed out as DIR *). */
struct sim_dir {
	/** The entry readdir returns. */
	struct dirent de;
	/** Names and kinds, snapshot at opendir, in name order. */
	char **names;
	unsigned char *types;
	size_t n, i;
};

/** An alias of an engine temp name to its canonical one. */
struct sim_alias {
	/** The engine's path (empty: free slot). */
	char from[SIM_PATH_MAX];
	/** The canonical path. */
	char to[SIM_PATH_MAX];
};

struct sim_fs {
	/** The env table; first, so that env_tls leads back here. */
	struct env_ops ops;
	/** Inodes; 0 is "/". */
	struct sim_ino *inos;
	size_t ninos, cap_inos;
	/** Descriptors. */
	struct sim_fd fds[SIM_FD_MAX];
	/** Temp-name aliases. */
	struct sim_alias aliases[SIM_ALIAS_MAX];
	/** Canonical temp names handed out. */
	uint64_t tmp_counter;
	/** Fault decisions; the engine's random source. */
	uint64_t rng, engine_rng;
	/** Fault rates. */
	struct sim_faults faults;
	/** SIM_BUG_*. */
	int bug;
	/** Calls left before the armed crash (0: none armed). */
	uint64_t crash_in;
	/** A power loss happened; calls fail until revive. */
	int dead;
	/** Simulated clock, ns. */
	uint64_t now;
	/** Trace hash. */
	uint64_t trace;
	/** Counters. */
	struct sim_fs_stats st;
	/** Faults are suspended while nonzero (the sim's own reads). */
	int quiet;
	/** Where every file call is printed (NULL: nowhere). */
	FILE *log;
	/** The cost model (sim_fs_set_model) and what it counted. */
	struct sim_model model;
	struct sim_io_stats io;
	/** Inside an object-store request (its own file calls are the store's, not the disk's). */
	int in_os;
	/** No durable copies (sim_fs_set_volatile): a sync keeps nothing, a power loss aborts. */
	int no_dur;
};

/* ---------- small helpers ---------- */

static uint64_t
sim_mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t
sim_fs_rand(struct sim_fs *fs, uint64_t n)
{
	return n ? sim_mix(&fs->rng) % n : 0;
}

static int
sim_chance(struct sim_fs *fs, uint32_t ppm)
{
	return ppm > 0 && sim_fs_rand(fs, 1000000) < ppm;
}

/** The file system of this thread's run. A store with a manual clock or a seed runs in
 *  its own copy of the table it was given, so env_tls does not always lead here. */
static __thread struct sim_fs *sim_active;

static struct sim_fs *
sim_self(void)
{
	return env_tls == &sim_active->ops ? (struct sim_fs *)env_tls : sim_active;
}

/** ns of n bytes at mib_s MiB/s (0: free). */
static uint64_t
sim_model_bytes_ns(uint64_t n, double mib_s)
{
	return mib_s > 0 ? (uint64_t)((double)n * 1e9 / (mib_s * 1048576.0)) : 0;
}

/** A disk call: a read or write of n bytes, or a sync (n unused). */
static void
sim_model_disk(struct sim_fs *fs, int what, uint64_t n)
{
	if (fs->in_os && fs->model.store_remote)
		return;
	const struct sim_model *m = &fs->model;
	if (what == 's') {
		fs->io.disk_syncs++;
		fs->io.model_ns += m->disk_sync_ns;
		return;
	}
	if (what == 'w') {
		fs->io.disk_writes++;
		fs->io.disk_write_bytes += n;
		fs->io.model_ns += m->disk_op_ns + sim_model_bytes_ns(n, m->disk_write_mib_s) +
				   sim_model_bytes_ns(n, m->cpu_mib_s);
	} else {
		fs->io.disk_reads++;
		fs->io.disk_read_bytes += n;
		fs->io.model_ns += m->disk_op_ns + sim_model_bytes_ns(n, m->disk_read_mib_s);
	}
}

/** count object-store requests of a kind moving n payload bytes. */
static void
sim_model_os(struct sim_fs *fs, enum sim_os_kind kind, uint64_t count, uint64_t n)
{
	const struct sim_model *m = &fs->model;
	fs->io.os_requests[kind] += count;
	int write = kind == SIM_OS_PUT || kind == SIM_OS_PART || kind == SIM_OS_COMMIT || kind == SIM_OS_DELETE;
	if (write)
		fs->io.os_write_bytes += n;
	else
		fs->io.os_read_bytes += n;
	if (!m->store_remote)
		return;
	fs->io.model_ns += count * (write ? m->store_write_ns : m->store_read_ns) +
			   sim_model_bytes_ns(n, m->store_mib_s) +
			   (write ? sim_model_bytes_ns(n, m->cpu_mib_s) : 0);
}

static void
sim_hash(struct sim_fs *fs, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		fs->trace ^= b[i];
		fs->trace *= 0x100000001b3ull;
	}
}

static void
sim_hash_u64(struct sim_fs *fs, uint64_t v)
{
	sim_hash(fs, &v, sizeof(v));
}

static const char *
sim_base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/** One file call into the trace: kind, path, two numbers, result. */
static void
sim_ev(struct sim_fs *fs, const char *kind, const char *path, int64_t a, int64_t b, int64_t rc)
{
	if (fs->log)
		fprintf(fs->log, "fs: %s %s %lld %lld -> %lld\n", kind, path ? path : "-", (long long)a,
			(long long)b, (long long)rc);
	sim_hash(fs, kind, strlen(kind) + 1);
	if (path) {
		/* An engine temp name that got no canonical one (its create failed) is random. */
		const char *bn = sim_base(path);
		size_t n = strncmp(bn, SIM_TMP_PREFIX, strlen(SIM_TMP_PREFIX)) == 0 &&
				   strncmp(bn, SIM_TMP_CANON, strlen(SIM_TMP_CANON)) != 0
			   ? (size_t)(bn - path) : strlen(path) + 1;
		sim_hash(fs, path, n);
	}
	sim_hash_u64(fs, (uint64_t)a);
	sim_hash_u64(fs, (uint64_t)b);
	sim_hash_u64(fs, (uint64_t)rc);
}

/** The lock file holds the opener's pid: its bytes are left out of hashes. */
static int
sim_is_lockfile(const char *path)
{
	return path && strcmp(sim_base(path), "LOCK") == 0;
}

static int
sim_fail(int err)
{
	errno = err;
	return -1;
}

/* ---------- inodes and entries ---------- */

static uint32_t
sim_ino_new(struct sim_fs *fs, int kind, const char *path)
{
	size_t i = fs->ninos;
	for (size_t k = 1; k < fs->ninos; k++)
		if (fs->inos[k].kind == 0) {
			i = k;
			break;
		}
	if (i == fs->ninos) {
		if (fs->ninos == fs->cap_inos) {
			size_t nc = fs->cap_inos ? fs->cap_inos * 2 : 64;
			struct sim_ino *v = realloc(fs->inos, nc * sizeof(*v));
			if (v == NULL)
				return 0;
			fs->inos = v;
			fs->cap_inos = nc;
		}
		fs->ninos++;
	}
	struct sim_ino *in = &fs->inos[i];
	memset(in, 0, sizeof(*in));
	in->kind = kind;
	in->path = strdup(path);
	return (uint32_t)i;
}

static void
sim_ino_unref(struct sim_fs *fs, uint32_t ino)
{
	struct sim_ino *in = &fs->inos[ino];
	if (--in->refs > 0 || ino == 0)
		return;
	for (size_t i = 0; i < in->nents; i++) {
		uint32_t c = in->ents[i].ino;
		free(in->ents[i].name);
		fs->inos[c].nlink--;
		sim_ino_unref(fs, c);
		in = &fs->inos[ino];
	}
	for (size_t i = 0; i < in->ndents; i++) {
		uint32_t c = in->dents[i].ino;
		free(in->dents[i].name);
		sim_ino_unref(fs, c);
		in = &fs->inos[ino];
	}
	free(in->ents);
	free(in->dents);
	free(in->data);
	free(in->dur);
	free(in->path);
	memset(in, 0, sizeof(*in));
}

static struct sim_ent *
sim_find(struct sim_ino *d, const char *name, size_t *pos)
{
	size_t lo = 0, hi = d->nents;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(d->ents[mid].name, name);
		if (c == 0) {
			if (pos)
				*pos = mid;
			return &d->ents[mid];
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return NULL;
}

static int
sim_ent_add(struct sim_fs *fs, uint32_t dir, const char *name, uint32_t ino)
{
	struct sim_ino *d = &fs->inos[dir];
	size_t pos;
	if (sim_find(d, name, &pos))
		return sim_fail(EEXIST);
	if (d->nents == d->cap_ents) {
		size_t nc = d->cap_ents ? d->cap_ents * 2 : 8;
		struct sim_ent *v = realloc(d->ents, nc * sizeof(*v));
		if (v == NULL)
			return sim_fail(ENOMEM);
		d->ents = v;
		d->cap_ents = nc;
	}
	char *nm = strdup(name);
	if (nm == NULL)
		return sim_fail(ENOMEM);
	memmove(&d->ents[pos + 1], &d->ents[pos], (d->nents - pos) * sizeof(*d->ents));
	d->ents[pos].name = nm;
	d->ents[pos].ino = ino;
	d->nents++;
	fs->inos[ino].refs++;
	fs->inos[ino].nlink++;
	return 0;
}

static void
sim_ent_del(struct sim_fs *fs, uint32_t dir, size_t pos)
{
	struct sim_ino *d = &fs->inos[dir];
	uint32_t ino = d->ents[pos].ino;
	free(d->ents[pos].name);
	memmove(&d->ents[pos], &d->ents[pos + 1], (d->nents - pos - 1) * sizeof(*d->ents));
	d->nents--;
	fs->inos[ino].nlink--;
	sim_ino_unref(fs, ino);
}

/** Split path into its parent directory's inode and its last name. 0 or -1/errno. */
static int
sim_resolve_parent(struct sim_fs *fs, const char *path, uint32_t *dir, char *name)
{
	if (path == NULL || path[0] != '/')
		return sim_fail(ENOENT);
	char buf[SIM_PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof(buf))
		return sim_fail(ENAMETOOLONG);
	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	uint32_t cur = 0;
	char *p = buf + 1;
	for (;;) {
		char *slash = strchr(p, '/');
		if (slash == NULL)
			break;
		*slash = '\0';
		if (*p != '\0' && strcmp(p, ".") != 0) {
			struct sim_ino *d = &fs->inos[cur];
			if (d->kind != 2)
				return sim_fail(ENOTDIR);
			struct sim_ent *e = sim_find(d, p, NULL);
			if (e == NULL)
				return sim_fail(ENOENT);
			cur = e->ino;
		}
		p = slash + 1;
	}
	if (fs->inos[cur].kind != 2)
		return sim_fail(ENOTDIR);
	if (strlen(p) >= SIM_NAME_MAX)
		return sim_fail(ENAMETOOLONG);
	strcpy(name, p);
	*dir = cur;
	return 0;
}

/** The inode path names, or -1/errno. */
static int
sim_resolve(struct sim_fs *fs, const char *path, uint32_t *ino)
{
	uint32_t dir;
	char name[SIM_NAME_MAX];
	if (sim_resolve_parent(fs, path, &dir, name) != 0)
		return -1;
	if (name[0] == '\0' || strcmp(name, ".") == 0) {
		*ino = dir;
		return 0;
	}
	struct sim_ent *e = sim_find(&fs->inos[dir], name, NULL);
	if (e == NULL)
		return sim_fail(ENOENT);
	*ino = e->ino;
	return 0;
}

/* ---------- temp-name aliases ---------- */

/** path, or the canonical name it is an alias of (copied into out). */
static const char *
sim_canon(struct sim_fs *fs, const char *path, char *out)
{
	if (path == NULL || strncmp(sim_base(path), SIM_TMP_PREFIX, strlen(SIM_TMP_PREFIX)) != 0)
		return path;
	for (int i = 0; i < SIM_ALIAS_MAX; i++)
		if (fs->aliases[i].from[0] && strcmp(fs->aliases[i].from, path) == 0) {
			strcpy(out, fs->aliases[i].to);
			return out;
		}
	return path;
}

/** A new engine temp path: give it a canonical name (copied into out). */
static const char *
sim_alias_new(struct sim_fs *fs, const char *path, char *out)
{
	const char *b = sim_base(path);
	if (strncmp(b, SIM_TMP_CANON, strlen(SIM_TMP_CANON)) == 0 || strlen(path) >= SIM_PATH_MAX - 32)
		return path;
	int slot = -1;
	for (int i = 0; i < SIM_ALIAS_MAX && slot < 0; i++)
		if (fs->aliases[i].from[0] == '\0')
			slot = i;
	if (slot < 0)
		slot = (int)(fs->tmp_counter % SIM_ALIAS_MAX);
	snprintf(out, SIM_PATH_MAX, "%.*s" SIM_TMP_CANON "%llu", (int)(b - path), path,
		 (unsigned long long)fs->tmp_counter++);
	snprintf(fs->aliases[slot].from, SIM_PATH_MAX, "%s", path);
	snprintf(fs->aliases[slot].to, SIM_PATH_MAX, "%s", out);
	return out;
}

static void
sim_alias_drop(struct sim_fs *fs, const char *path)
{
	for (int i = 0; i < SIM_ALIAS_MAX; i++)
		if (fs->aliases[i].from[0] && strcmp(fs->aliases[i].from, path) == 0)
			fs->aliases[i].from[0] = '\0';
}

/* ---------- faults ---------- */

/** Before a call: the clock moves, a dead process fails, an armed crash fires.
 *  0 to go on, or -1 with errno set. */
static int
sim_enter(struct sim_fs *fs)
{
	fs->now += SIM_CALL_NS;
	fs->st.calls++;
	if (fs->dead)
		return sim_fail(EIO);
	if (fs->crash_in > 0 && !fs->quiet && --fs->crash_in == 0) {
		sim_fs_power_loss(fs);
		return sim_fail(EIO);
	}
	return 0;
}

/** A seeded fault for a call of this kind: 0 or an errno. */
static int
sim_fault(struct sim_fs *fs, int writes)
{
	if (fs->quiet)
		return 0;
	if (sim_chance(fs, fs->faults.eio_ppm)) {
		fs->st.eio++;
		return EIO;
	}
	if (writes && sim_chance(fs, fs->faults.enospc_ppm)) {
		fs->st.enospc++;
		return ENOSPC;
	}
	return 0;
}

static struct sim_fd *
sim_fd_get(struct sim_fs *fs, int fd)
{
	int i = fd - SIM_FD_BASE;
	if (i < 0 || i >= SIM_FD_MAX || !fs->fds[i].used)
		return NULL;
	return &fs->fds[i];
}

/** sim_enter for a call on fd: its open file, or NULL with errno set (EBADF: fd is not open). */
static struct sim_fd *
sim_enter_fd(struct sim_fs *fs, int fd)
{
	if (sim_enter(fs) != 0)
		return NULL;
	struct sim_fd *f = sim_fd_get(fs, fd);
	if (f == NULL)
		sim_fail(EBADF);
	return f;
}

/* ---------- the env calls ---------- */

static uint64_t
sim_mono_ns(void)
{
	return sim_self()->now;
}

static uint64_t
sim_wall_ns(void)
{
	return 1700000000ull * 1000000000ull + sim_self()->now;
}

static uint64_t
sim_random(void)
{
	return sim_mix(&sim_self()->engine_rng);
}

static int
sim_open(const char *path, int flags, mode_t mode)
{
	struct sim_fs *fs = sim_self();
	char cb[SIM_PATH_MAX];
	const char *p = sim_canon(fs, path, cb);
	if (sim_enter(fs) != 0)
		return -1;
	int creat = (flags & O_CREAT) != 0;
	int err = (flags & O_DIRECTORY) && !fs->faults.dir_faults ? 0 : sim_fault(fs, creat);
	if (err) {
		sim_ev(fs, "open", p, flags, 0, -err);
		return sim_fail(err);
	}
	uint32_t dir, ino;
	char name[SIM_NAME_MAX];
	if (sim_resolve_parent(fs, p, &dir, name) != 0) {
		err = errno;
		sim_ev(fs, "open", p, flags, 0, -err);
		return sim_fail(err);
	}
	struct sim_ent *e = name[0] ? sim_find(&fs->inos[dir], name, NULL) : NULL;
	if (name[0] == '\0')
		ino = dir;
	else if (e != NULL)
		ino = e->ino;
	else
		ino = 0;
	if (name[0] && e == NULL) {
		if (!creat) {
			sim_ev(fs, "open", p, flags, 0, -ENOENT);
			return sim_fail(ENOENT);
		}
		if (p == path && strncmp(sim_base(path), SIM_TMP_PREFIX, strlen(SIM_TMP_PREFIX)) == 0)
			p = sim_alias_new(fs, path, cb);
		sim_resolve_parent(fs, p, &dir, name);
		ino = sim_ino_new(fs, 1, p);
		if (ino == 0 || sim_ent_add(fs, dir, name, ino) != 0) {
			sim_ev(fs, "open", p, flags, 0, -ENOMEM);
			return sim_fail(ENOMEM);
		}
	} else if (creat && (flags & O_EXCL)) {
		sim_ev(fs, "open", p, flags, 0, -EEXIST);
		return sim_fail(EEXIST);
	}
	struct sim_ino *in = &fs->inos[ino];
	int acc = flags & O_ACCMODE;
	if (in->kind == 2 && acc != O_RDONLY) {
		sim_ev(fs, "open", p, flags, 0, -EISDIR);
		return sim_fail(EISDIR);
	}
	if (in->kind != 2 && (flags & O_DIRECTORY)) {
		sim_ev(fs, "open", p, flags, 0, -ENOTDIR);
		return sim_fail(ENOTDIR);
	}
	int slot = -1;
	for (int i = 0; i < SIM_FD_MAX && slot < 0; i++)
		if (!fs->fds[i].used)
			slot = i;
	if (slot < 0) {
		sim_ev(fs, "open", p, flags, 0, -EMFILE);
		return sim_fail(EMFILE);
	}
	if ((flags & O_TRUNC) && in->kind == 1 && acc != O_RDONLY) {
		in->len = 0;
		if (in->dirty_hi > 0)
			in->dirty_hi = in->dirty_lo = 0;
	}
	fs->fds[slot].used = 1;
	fs->fds[slot].ino = ino;
	fs->fds[slot].flags = flags;
	in->refs++;
	sim_ev(fs, "open", p, flags, 0, slot);
	return SIM_FD_BASE + slot;
}

static int
sim_close(int fd)
{
	struct sim_fs *fs = sim_self();
	fs->now += SIM_CALL_NS;
	struct sim_fd *f = sim_fd_get(fs, fd);
	if (f == NULL)
		return fs->dead ? 0 : sim_fail(EBADF);
	struct sim_ino *in = &fs->inos[f->ino];
	if (in->lock_fd == fd)
		in->lock_fd = 0;
	f->used = 0;
	sim_ev(fs, "close", fs->log ? in->path : NULL, fd - SIM_FD_BASE, 0, 0);
	sim_ino_unref(fs, f->ino);
	return 0;
}

static ssize_t
sim_pread(int fd, void *buf, size_t n, off_t off)
{
	struct sim_fs *fs = sim_self();
	struct sim_fd *f = sim_enter_fd(fs, fd);
	if (f == NULL)
		return -1;
	struct sim_ino *in = &fs->inos[f->ino];
	if (in->kind != 1)
		return sim_fail(EISDIR);
	int err = sim_fault(fs, 0);
	if (err) {
		sim_ev(fs, "pread", in->path, n, off, -err);
		return sim_fail(err);
	}
	size_t got = 0;
	if (off >= 0 && (size_t)off < in->len) {
		got = in->len - (size_t)off;
		if (got > n)
			got = n;
		memcpy(buf, in->data + off, got);
	}
	sim_ev(fs, "pread", fs->log ? in->path : NULL, n, off, (int64_t)got);
	sim_model_disk(fs, 'r', got);
	return (ssize_t)got;
}

static int
sim_grow(struct sim_ino *in, size_t len)
{
	if (len <= in->cap)
		return 0;
	size_t nc = in->cap ? in->cap : 4096;
	while (nc < len)
		nc *= 2;
	uint8_t *v = realloc(in->data, nc);
	if (v == NULL)
		return -1;
	in->data = v;
	in->cap = nc;
	return 0;
}

static void
sim_dirty(struct sim_ino *in, size_t lo, size_t hi)
{
	if (in->dirty_lo >= in->dirty_hi) {
		in->dirty_lo = lo;
		in->dirty_hi = hi;
		return;
	}
	if (lo < in->dirty_lo)
		in->dirty_lo = lo;
	if (hi > in->dirty_hi)
		in->dirty_hi = hi;
}

/** Set a file's volatile length, zero-filling a growth. */
static int
sim_set_len(struct sim_ino *in, size_t len)
{
	if (len > in->len) {
		if (sim_grow(in, len) != 0)
			return -1;
		memset(in->data + in->len, 0, len - in->len);
		sim_dirty(in, in->len, len);
	}
	in->len = len;
	return 0;
}

static ssize_t
sim_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct sim_fs *fs = sim_self();
	struct sim_fd *f = sim_enter_fd(fs, fd);
	if (f == NULL)
		return -1;
	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return sim_fail(EBADF);
	struct sim_ino *in = &fs->inos[f->ino];
	int lock = sim_is_lockfile(in->path);
	int err = sim_fault(fs, 1);
	size_t k = n;
	if (err == 0 && n > 1 && !fs->quiet && sim_chance(fs, fs->faults.torn_ppm)) {
		fs->st.torn++;
		k = 1 + (size_t)sim_fs_rand(fs, n - 1);
		err = EIO;
	} else if (err) {
		k = 0;
	}
	if (k > 0) {
		size_t end = (size_t)off + k;
		if (end > in->len) {
			/* Zero only the hole before off: the write covers the rest of the growth. */
			if (sim_grow(in, end) != 0)
				return sim_fail(ENOMEM);
			if ((size_t)off > in->len) {
				memset(in->data + in->len, 0, (size_t)off - in->len);
				sim_dirty(in, in->len, (size_t)off);
			}
			in->len = end;
		}
		memcpy(in->data + off, buf, k);
		sim_dirty(in, (size_t)off, end);
	}
	sim_ev(fs, "pwrite", in->path, n, off, err ? -err : (int64_t)k);
	sim_model_disk(fs, 'w', k);
	if (!lock) {
		uint64_t dh = XXH3_64bits(buf, k);
		if (fs->log)
			fprintf(fs->log, "fs: data %016llx\n", (unsigned long long)dh);
		sim_hash_u64(fs, dh);
	}
	if (err)
		return sim_fail(err);
	return (ssize_t)n;
}

/** fsync/fdatasync: a file's written bytes, or a directory's entries, become durable. */
static int
sim_sync(int fd, const char *kind)
{
	struct sim_fs *fs = sim_self();
	struct sim_fd *f = sim_enter_fd(fs, fd);
	if (f == NULL)
		return -1;
	uint32_t ino = f->ino;
	struct sim_ino *in = &fs->inos[ino];
	int err = in->kind == 2 && !fs->faults.dir_faults ? 0 : sim_fault(fs, 1);
	sim_ev(fs, kind, in->path, 0, 0, -err);
	sim_model_disk(fs, 's', 0);
	if (in->kind == 2) {
		if (err)
			return sim_fail(err);
		struct sim_ent *nd = in->nents ? malloc(in->nents * sizeof(*nd)) : NULL;
		if (in->nents && nd == NULL)
			return sim_fail(ENOMEM);
		for (size_t i = 0; i < in->nents; i++) {
			nd[i].name = strdup(in->ents[i].name);
			nd[i].ino = in->ents[i].ino;
			fs->inos[nd[i].ino].refs++;
		}
		struct sim_ent *old = in->dents;
		size_t nold = in->ndents;
		in->dents = nd;
		in->ndents = in->nents;
		for (size_t i = 0; i < nold; i++) {
			free(old[i].name);
			sim_ino_unref(fs, old[i].ino);
		}
		free(old);
		return 0;
	}
	if (err) {
		/* The pages written since the last sync are lost to the disk. */
		in->dirty_lo = in->dirty_hi = 0;
		return sim_fail(err);
	}
	if (in->path && ((fs->bug == SIM_BUG_WAL_NOSYNC && strcmp(kind, "fdatasync") == 0 &&
			  strstr(in->path, "/wal/") != NULL) ||
			 (fs->bug == SIM_BUG_GEN_NOSYNC && strstr(in->path, "/gen/") != NULL))) {
		fs->st.bug_fired++;
		return 0;
	}
	if (fs->no_dur) {
		in->dur_len = in->len;
		in->dirty_lo = in->dirty_hi = 0;
		return 0;
	}
	if (in->len > in->dur_len || in->dur == NULL) {
		uint8_t *v = realloc(in->dur, in->len ? in->len : 1);
		if (v == NULL)
			return sim_fail(ENOMEM);
		memset(v + in->dur_len, 0, in->len - in->dur_len);
		in->dur = v;
	}
	if (in->dirty_lo < in->dirty_hi) {
		size_t hi = in->dirty_hi < in->len ? in->dirty_hi : in->len;
		if (in->dirty_lo < hi)
			memcpy(in->dur + in->dirty_lo, in->data + in->dirty_lo, hi - in->dirty_lo);
	}
	in->dur_len = in->len;
	in->dirty_lo = in->dirty_hi = 0;
	return 0;
}

static int
sim_fsync(int fd)
{
	return sim_sync(fd, "fsync");
}

static int
sim_fdatasync(int fd)
{
	return sim_sync(fd, "fdatasync");
}

static int
sim_ftruncate(int fd, off_t len)
{
	struct sim_fs *fs = sim_self();
	struct sim_fd *f = sim_enter_fd(fs, fd);
	if (f == NULL)
		return -1;
	if ((f->flags & O_ACCMODE) == O_RDONLY || len < 0)
		return sim_fail(EINVAL);
	struct sim_ino *in = &fs->inos[f->ino];
	int err = sim_fault(fs, 1);
	sim_ev(fs, "ftruncate", in->path, len, 0, -err);
	if (err)
		return sim_fail(err);
	if (sim_set_len(in, (size_t)len) != 0)
		return sim_fail(ENOMEM);
	if (in->dirty_hi > in->len)
		in->dirty_hi = in->len;
	/* A shrink is metadata: durable at the next sync, like the growth. */
	if (in->dirty_lo >= in->dirty_hi)
		in->dirty_lo = in->dirty_hi = in->len;
	return 0;
}

static void
sim_fill_stat(struct sim_fs *fs, uint32_t ino, struct stat *st)
{
	struct sim_ino *in = &fs->inos[ino];
	memset(st, 0, sizeof(*st));
	st->st_mode = in->kind == 2 ? S_IFDIR | 0755 : S_IFREG | 0644;
	st->st_size = (off_t)in->len;
	st->st_ino = ino + 1;
	st->st_nlink = in->nlink > 0 ? (nlink_t)in->nlink : 1;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((in->len + 511) / 512);
}

static int
sim_fstat(int fd, struct stat *st)
{
	struct sim_fs *fs = sim_self();
	struct sim_fd *f = sim_enter_fd(fs, fd);
	if (f == NULL)
		return -1;
	sim_fill_stat(fs, f->ino, st);
	return 0;
}

static int
sim_lstat(const char *path, struct stat *st)
{
	struct sim_fs *fs = sim_self();
	char cb[SIM_PATH_MAX];
	const char *p = sim_canon(fs, path, cb);
	if (sim_enter(fs) != 0)
		return -1;
	int err = sim_fault(fs, 0);
	uint32_t ino = 0;
	if (!err && sim_resolve(fs, p, &ino) != 0)
		err = errno;
	sim_ev(fs, "lstat", p, 0, 0, -err);
	if (err)
		return sim_fail(err);
	sim_fill_stat(fs, ino, st);
	return 0;
}

static int
sim_rename(const char *from, const char *to)
{
	struct sim_fs *fs = sim_self();
	char cf[SIM_PATH_MAX], ct[SIM_PATH_MAX];
	const char *pf = sim_canon(fs, from, cf), *pt = sim_canon(fs, to, ct);
	if (sim_enter(fs) != 0)
		return -1;
	int err = sim_fault(fs, 1);
	uint32_t fd_, td;
	char fnm[SIM_NAME_MAX], tnm[SIM_NAME_MAX];
	size_t fpos, tpos;
	struct sim_ent *fe = NULL;
	if (!err && (sim_resolve_parent(fs, pf, &fd_, fnm) != 0 || sim_resolve_parent(fs, pt, &td, tnm) != 0))
		err = errno;
	if (!err && (fe = sim_find(&fs->inos[fd_], fnm, &fpos)) == NULL)
		err = ENOENT;
	sim_ev(fs, "rename", pf, 0, 0, -err);
	if (!err)
		sim_ev(fs, "rename.to", pt, 0, 0, 0);
	if (err)
		return sim_fail(err);
	uint32_t ino = fe->ino;
	fs->inos[ino].refs++; /* held across the move */
	sim_ent_del(fs, fd_, fpos);
	struct sim_ent *te = sim_find(&fs->inos[td], tnm, &tpos);
	if (te != NULL)
		sim_ent_del(fs, td, tpos);
	sim_ent_add(fs, td, tnm, ino);
	sim_ino_unref(fs, ino);
	sim_alias_drop(fs, from);
	return 0;
}

static int
sim_link(const char *from, const char *to)
{
	struct sim_fs *fs = sim_self();
	char cf[SIM_PATH_MAX], ct[SIM_PATH_MAX];
	const char *pf = sim_canon(fs, from, cf), *pt = sim_canon(fs, to, ct);
	if (sim_enter(fs) != 0)
		return -1;
	int err = sim_fault(fs, 1);
	uint32_t ino = 0, td;
	char tnm[SIM_NAME_MAX];
	if (!err && (sim_resolve(fs, pf, &ino) != 0 || sim_resolve_parent(fs, pt, &td, tnm) != 0))
		err = errno;
	if (!err && fs->inos[ino].kind == 2)
		err = EPERM;
	if (!err && sim_ent_add(fs, td, tnm, ino) != 0)
		err = errno;
	sim_ev(fs, "link", pf, 0, 0, -err);
	sim_ev(fs, "link.to", pt, 0, 0, 0);
	return err ? sim_fail(err) : 0;
}

static int
sim_unlink(const char *path)
{
	struct sim_fs *fs = sim_self();
	char cb[SIM_PATH_MAX];
	const char *p = sim_canon(fs, path, cb);
	if (sim_enter(fs) != 0)
		return -1;
	int err = sim_fault(fs, 0);
	uint32_t dir;
	char name[SIM_NAME_MAX];
	size_t pos;
	struct sim_ent *e = NULL;
	if (!err && sim_resolve_parent(fs, p, &dir, name) != 0)
		err = errno;
	if (!err && (e = sim_find(&fs->inos[dir], name, &pos)) == NULL)
		err = ENOENT;
	if (!err && fs->inos[e->ino].kind == 2)
		err = EISDIR;
	sim_ev(fs, "unlink", p, 0, 0, -err);
	if (err)
		return sim_fail(err);
	sim_ent_del(fs, dir, pos);
	sim_alias_drop(fs, path);
	return 0;
}

/** rmdir(2) of an empty directory (its entry goes as an unlink's does). */
static int
sim_rmdir(const char *p)
{
	struct sim_fs *fs = sim_self();
	if (sim_enter(fs) != 0)
		return -1;
	int err = sim_fault(fs, 0);
	uint32_t dir;
	char name[SIM_NAME_MAX];
	size_t pos;
	struct sim_ent *e = NULL;
	if (!err && sim_resolve_parent(fs, p, &dir, name) != 0)
		err = errno;
	if (!err && (e = sim_find(&fs->inos[dir], name, &pos)) == NULL)
		err = ENOENT;
	if (!err && fs->inos[e->ino].kind != 2)
		err = ENOTDIR;
	if (!err && fs->inos[e->ino].nents > 0)
		err = ENOTEMPTY;
	sim_ev(fs, "rmdir", p, 0, 0, -err);
	if (err)
		return sim_fail(err);
	sim_ent_del(fs, dir, pos);
	return 0;
}

/** The process id the engine sees (written into LOCK): the same in every process. */
static pid_t
sim_getpid(void)
{
	return 4242;
}

static int
sim_mkdir(const char *path, mode_t mode)
{
	struct sim_fs *fs = sim_self();
	if (sim_enter(fs) != 0)
		return -1;
	int err = sim_fault(fs, 1);
	uint32_t dir;
	char name[SIM_NAME_MAX];
	if (!err && sim_resolve_parent(fs, path, &dir, name) != 0)
		err = errno;
	if (!err && (name[0] == '\0' || sim_find(&fs->inos[dir], name, NULL) != NULL))
		err = EEXIST;
	if (!err) {
		uint32_t ino = sim_ino_new(fs, 2, path);
		if (ino == 0 || sim_ent_add(fs, dir, name, ino) != 0)
			err = ENOMEM;
	}
	sim_ev(fs, "mkdir", path, 0, 0, -err);
	return err ? sim_fail(err) : 0;
}

static int
sim_flock(int fd, int op)
{
	struct sim_fs *fs = sim_self();
	struct sim_fd *f = sim_enter_fd(fs, fd);
	if (f == NULL)
		return -1;
	struct sim_ino *in = &fs->inos[f->ino];
	if (op & LOCK_UN) {
		if (in->lock_fd == fd)
			in->lock_fd = 0;
		return 0;
	}
	if (in->lock_fd != 0 && in->lock_fd != fd)
		return sim_fail(EWOULDBLOCK);
	in->lock_fd = fd;
	return 0;
}

static DIR *
sim_opendir(const char *path)
{
	struct sim_fs *fs = sim_self();
	if (sim_enter(fs) != 0)
		return NULL;
	int err = sim_fault(fs, 0);
	uint32_t ino = 0;
	if (!err && sim_resolve(fs, path, &ino) != 0)
		err = errno;
	if (!err && fs->inos[ino].kind != 2)
		err = ENOTDIR;
	sim_ev(fs, "opendir", path, 0, 0, -err);
	if (err) {
		errno = err;
		return NULL;
	}
	struct sim_ino *in = &fs->inos[ino];
	struct sim_dir *d = calloc(1, sizeof(*d));
	if (d == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	d->n = in->nents;
	d->names = calloc(d->n + 1, sizeof(*d->names));
	d->types = calloc(d->n + 1, 1);
	for (size_t i = 0; i < d->n; i++) {
		d->names[i] = strdup(in->ents[i].name);
		d->types[i] = fs->inos[in->ents[i].ino].kind == 2 ? DT_DIR : DT_REG;
	}
	return (DIR *)d;
}

static struct dirent *
sim_readdir(DIR *dp)
{
	struct sim_dir *d = (struct sim_dir *)dp;
	if (d->i >= d->n)
		return NULL;
	memset(&d->de, 0, sizeof(d->de));
	size_t nl = strlen(d->names[d->i]);
	if (nl >= sizeof(d->de.d_name))
		nl = sizeof(d->de.d_name) - 1;
	memcpy(d->de.d_name, d->names[d->i], nl);
	d->de.d_type = d->types[d->i];
	d->de.d_ino = d->i + 1;
	d->i++;
	return &d->de;
}

static int
sim_closedir(DIR *dp)
{
	struct sim_dir *d = (struct sim_dir *)dp;
	for (size_t i = 0; i < d->n; i++)
		free(d->names[i]);
	free(d->names);
	free(d->types);
	free(d);
	return 0;
}

static int
sim_sync_file_range(int fd, off_t off, off_t n, unsigned int flags)
{
	struct sim_fs *fs = sim_self();
	return sim_enter_fd(fs, fd) != NULL ? 0 : -1;
}

/** Engine log lines: printed with --trace, else dropped (a run is judged by its checks). */
static void
sim_log(int level, const char *msg)
{
	struct sim_fs *fs = sim_self();
	if (fs->log)
		fprintf(fs->log, "log: %d %s\n", level, msg);
}

static uint64_t
sim_cpu_ns(void)
{
	return sim_self()->now;
}

static int
sim_point(const char *name, const void *arg)
{
	struct sim_fs *fs = sim_self();
	sim_hash(fs, name, strlen(name) + 1);
	if (fs->dead)
		return 1;
	if (fs->crash_in > 0 && !fs->quiet && --fs->crash_in == 0) {
		sim_fs_power_loss(fs);
		return 1;
	}
	/* Between a commit's manifest write and its view swap nothing real can fail. */
	if (!fs->faults.commit_point_faults && strcmp(name, "commit.manifest_updated") == 0)
		return 0;
	if (!fs->quiet && sim_chance(fs, fs->faults.point_ppm)) {
		fs->st.points_failed++;
		return 1;
	}
	return 0;
}

/* ---------- the object store's errors and latency ---------- */

/** A wrapping store: the fs object store over the simulated file system. */
struct sim_os {
	/** The wrapper as seen by the engine. */
	struct objstore base;
	/** The fs store it wraps. */
	struct objstore *inner;
};

/** A streamed write through the wrapper. */
struct sim_os_writer {
	/** The wrapper's header. */
	struct objstore_writer base;
	/** The inner writer. */
	struct objstore_writer *inner;
	/** Bytes written and not yet sent as a part; parts sent. */
	uint64_t pending, parts;
};

/** A streamed write's part size under the model. */
static uint64_t
sim_part_bytes(const struct sim_fs *fs)
{
	return fs->model.store_part_bytes ? fs->model.store_part_bytes : 8u << 20;
}

/** Around an inner store call: its file calls are the store's. */
#define SIM_OS_CALL(fs, expr)                                                                        \
	({                                                                                           \
		(fs)->in_os++;                                                                      \
		int rc_ = (expr);                                                                   \
		(fs)->in_os--;                                                                      \
		rc_;                                                                                \
	})

/** An inner listing's callback, counting the keys (a page per 1000). */
struct sim_list_ctx {
	objstore_list_cb cb;
	void *ctx;
	uint64_t keys;
};

static int
sim_list_cb(void *ctx, const char *key, uint64_t size)
{
	struct sim_list_ctx *l = ctx;
	l->keys++;
	return l->cb(l->ctx, key, size);
}

/** Before an object-store call: latency, and maybe an error. 0 or STRATA_EIO. */
static int
sim_os_enter(const char *what, const char *key)
{
	struct sim_fs *fs = sim_self();
	sim_hash(fs, what, strlen(what) + 1);
	if (key)
		sim_hash(fs, key, strlen(key) + 1);
	if (fs->faults.os_latency_ns)
		fs->now += sim_fs_rand(fs, fs->faults.os_latency_ns);
	if (!fs->dead && !fs->quiet && sim_chance(fs, fs->faults.os_error_ppm)) {
		fs->st.os_errors++;
		return diag_set(STRATA_EIO, "sim: object store %s %s: injected error", what, key ? key : "");
	}
	return 0;
}

#define SIM_INNER(os) (((struct sim_os *)(os))->inner)

static int
sim_os_get(struct objstore *os, const char *key, struct buf *out)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("get", key);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->get(SIM_INNER(os), key, out));
	sim_model_os(fs, SIM_OS_GET, 1, rc == 0 ? out->len : 0);
	return rc;
}

static int
sim_os_get_range(struct objstore *os, const char *key, uint64_t off, size_t len, void *dst, size_t *got)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("get_range", key);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->get_range(SIM_INNER(os), key, off, len, dst, got));
	sim_model_os(fs, SIM_OS_GET, 1, rc == 0 ? *got : 0);
	return rc;
}

static int
sim_os_size(struct objstore *os, const char *key, uint64_t *size)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("size", key);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->size(SIM_INNER(os), key, size));
	sim_model_os(fs, SIM_OS_HEAD, 1, 0);
	return rc;
}

static int
sim_os_put(struct objstore *os, const char *key, const void *d, size_t n)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("put", key);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->put(SIM_INNER(os), key, d, n));
	sim_model_os(fs, SIM_OS_PUT, 1, n);
	return rc;
}

static int
sim_os_put_if_absent(struct objstore *os, const char *key, const void *d, size_t n)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("put_if_absent", key);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->put_if_absent(SIM_INNER(os), key, d, n));
	sim_model_os(fs, SIM_OS_PUT, 1, n);
	return rc;
}

static int
sim_os_writer_open(struct objstore *os, const char *key, struct objstore_writer **w)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("writer_open", key);
	if (rc)
		return rc;
	struct sim_os_writer *sw = env.calloc(1, sizeof(*sw));
	if (sw == NULL)
		return diag_set(STRATA_ENOMEM, "sim: out of memory");
	rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->writer_open(SIM_INNER(os), key, &sw->inner));
	if (rc) {
		env.free(sw);
		return rc;
	}
	sw->base.os = os;
	*w = &sw->base;
	return 0;
}

static int
sim_os_writer_write(struct objstore_writer *w, const void *d, size_t n)
{
	struct sim_fs *fs = sim_self();
	struct sim_os_writer *sw = (struct sim_os_writer *)w;
	int rc = sim_os_enter("writer_write", NULL);
	if (rc)
		return rc;
	rc = SIM_OS_CALL(fs, sw->inner->os->ops->writer_write(sw->inner, d, n));
	/* What a remote store sends: a part each time a part's worth is buffered. */
	uint64_t part = sim_part_bytes(fs);
	sw->pending += n;
	while (rc == 0 && sw->pending > part) {
		sim_model_os(fs, SIM_OS_PART, 1, part);
		sw->pending -= part;
		sw->parts++;
	}
	return rc;
}

static int
sim_os_writer_commit(struct objstore_writer *w)
{
	struct sim_fs *fs = sim_self();
	struct sim_os_writer *sw = (struct sim_os_writer *)w;
	int rc = sim_os_enter("writer_commit", NULL);
	if (rc) {
		(void)SIM_OS_CALL(fs, (sw->inner->os->ops->writer_abort(sw->inner), 0));
	} else {
		rc = SIM_OS_CALL(fs, sw->inner->os->ops->writer_commit(sw->inner));
		if (sw->parts == 0) {
			sim_model_os(fs, SIM_OS_PUT, 1, sw->pending);
		} else {
			sim_model_os(fs, SIM_OS_PART, 1, sw->pending);
			sim_model_os(fs, SIM_OS_COMMIT,
				     fs->model.store_commit_requests ? fs->model.store_commit_requests : 1, 0);
		}
	}
	env.free(sw);
	return rc;
}

static void
sim_os_writer_abort(struct objstore_writer *w)
{
	struct sim_fs *fs = sim_self();
	struct sim_os_writer *sw = (struct sim_os_writer *)w;
	(void)SIM_OS_CALL(fs, (sw->inner->os->ops->writer_abort(sw->inner), 0));
	env.free(sw);
}

static int
sim_os_del(struct objstore *os, const char *key)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("del", key);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->del(SIM_INNER(os), key));
	sim_model_os(fs, SIM_OS_DELETE, 1, 0);
	return rc;
}

static int
sim_os_del_batch(struct objstore *os, const char *const *keys, size_t n)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("del_batch", n ? keys[0] : NULL);
	if (rc == 0)
		rc = SIM_OS_CALL(fs, objstore_del_batch(SIM_INNER(os), keys, n));
	sim_model_os(fs, SIM_OS_DELETE, n, 0);
	return rc;
}

static int
sim_os_shrink(struct objstore *os, const char *key, uint64_t size)
{
	struct sim_fs *fs = sim_self();
	struct objstore *in = SIM_INNER(os);
	int rc = sim_os_enter("shrink", key);
	if (rc)
		return rc;
	rc = in->ops->shrink ? SIM_OS_CALL(fs, in->ops->shrink(in, key, size)) : 0;
	sim_model_os(fs, SIM_OS_PUT, 1, 0);
	return rc;
}

static int
sim_os_list(struct objstore *os, const char *prefix, objstore_list_cb cb, void *ctx)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("list", prefix);
	if (rc)
		return rc;
	struct sim_list_ctx l = {cb, ctx, 0};
	rc = SIM_OS_CALL(fs, SIM_INNER(os)->ops->list(SIM_INNER(os), prefix, sim_list_cb, &l));
	sim_model_os(fs, SIM_OS_LIST, 1 + l.keys / 1000, 0);
	return rc;
}

static int
sim_os_recover(struct objstore *os, uint64_t *removed, uint64_t *bytes)
{
	struct sim_fs *fs = sim_self();
	int rc = sim_os_enter("recover", NULL);
	if (rc)
		return rc;
	return SIM_OS_CALL(fs, objstore_recover(SIM_INNER(os), removed, bytes));
}

static void
sim_os_destroy(struct objstore *os)
{
	objstore_destroy(SIM_INNER(os));
	env.free(os);
}

static const struct objstore_ops sim_os_ops = {
	.get = sim_os_get,
	.get_range = sim_os_get_range,
	.size = sim_os_size,
	.put = sim_os_put,
	.put_if_absent = sim_os_put_if_absent,
	.writer_open = sim_os_writer_open,
	.writer_write = sim_os_writer_write,
	.writer_commit = sim_os_writer_commit,
	.writer_abort = sim_os_writer_abort,
	.del = sim_os_del,
	.del_batch = sim_os_del_batch,
	.shrink = sim_os_shrink,
	.list = sim_os_list,
	.recover = sim_os_recover,
	.destroy = sim_os_destroy,
};

static int
sim_objstore_new(const char *dir, struct objstore **out)
{
	struct objstore *inner = NULL;
	int rc = objstore_fs_new(dir, &inner);
	if (rc)
		return rc;
	struct sim_os *s = env.calloc(1, sizeof(*s));
	if (s == NULL) {
		objstore_destroy(inner);
		return diag_set(STRATA_ENOMEM, "sim: out of memory");
	}
	s->base.ops = &sim_os_ops;
	snprintf(s->base.name, sizeof(s->base.name), "sim:%.200s", inner->name);
	s->inner = inner;
	*out = &s->base;
	return 0;
}

/* ---------- the public side ---------- */

struct sim_fs *
sim_fs_new(uint64_t seed)
{
	struct sim_fs *fs = calloc(1, sizeof(*fs));
	if (fs == NULL)
		return NULL;
	fs->ops = env_default;
	fs->ops.mono_ns = sim_mono_ns;
	fs->ops.wall_ns = sim_wall_ns;
	fs->ops.open = sim_open;
	fs->ops.close = sim_close;
	fs->ops.pread = sim_pread;
	fs->ops.pwrite = sim_pwrite;
	fs->ops.fsync = sim_fsync;
	fs->ops.fdatasync = sim_fdatasync;
	fs->ops.ftruncate = sim_ftruncate;
	fs->ops.fstat = sim_fstat;
	fs->ops.lstat = sim_lstat;
	fs->ops.rename = sim_rename;
	fs->ops.link = sim_link;
	fs->ops.unlink = sim_unlink;
	fs->ops.mkdir = sim_mkdir;
	fs->ops.rmdir = sim_rmdir;
	fs->ops.getpid = sim_getpid;
	fs->ops.flock = sim_flock;
	fs->ops.opendir = sim_opendir;
	fs->ops.readdir = sim_readdir;
	fs->ops.closedir = sim_closedir;
	fs->ops.malloc = malloc;
	fs->ops.calloc = calloc;
	fs->ops.realloc = realloc;
	fs->ops.free = free;
	fs->ops.cpu_ns = sim_cpu_ns;
	fs->ops.log = sim_log;
	fs->ops.random = sim_random;
	fs->ops.objstore_new = sim_objstore_new;
	fs->ops.sync_file_range = sim_sync_file_range;
	fs->ops.point = sim_point;
	fs->rng = seed ^ 0x5eed5eed5eed5eedull;
	fs->engine_rng = seed * 0x2545f4914f6cdd1dull + 1;
	fs->trace = 0xcbf29ce484222325ull;
	fs->now = 1000000000ull;
	if (sim_ino_new(fs, 2, "/") != 0 && fs->inos == NULL) {
		free(fs);
		return NULL;
	}
	if (fs->inos == NULL) {
		free(fs);
		return NULL;
	}
	fs->inos[0].refs = 1;
	sim_active = fs;
	return fs;
}

void
sim_fs_delete(struct sim_fs *fs)
{
	if (fs == NULL)
		return;
	for (size_t i = 0; i < fs->ninos; i++) {
		struct sim_ino *in = &fs->inos[i];
		if (in->kind == 0)
			continue;
		for (size_t k = 0; k < in->nents; k++)
			free(in->ents[k].name);
		for (size_t k = 0; k < in->ndents; k++)
			free(in->dents[k].name);
		free(in->ents);
		free(in->dents);
		free(in->data);
		free(in->dur);
		free(in->path);
	}
	free(fs->inos);
	if (sim_active == fs)
		sim_active = NULL;
	free(fs);
}

struct env_ops *
sim_fs_env(struct sim_fs *fs)
{
	return &fs->ops;
}

void
sim_fs_set_faults(struct sim_fs *fs, const struct sim_faults *f)
{
	if (f)
		fs->faults = *f;
	else
		memset(&fs->faults, 0, sizeof(fs->faults));
}

void
sim_fs_set_bug(struct sim_fs *fs, int bug)
{
	fs->bug = bug;
}

void
sim_fs_set_log(struct sim_fs *fs, FILE *f)
{
	fs->log = f;
}

void
sim_fs_quiet(struct sim_fs *fs, int on)
{
	fs->quiet += on ? 1 : -1;
}

void
sim_fs_arm_crash(struct sim_fs *fs, uint64_t n)
{
	fs->crash_in = n;
}

/** After a power loss: ino's contents and entries as the disk had them. */
static void
sim_cut(struct sim_fs *fs, uint32_t ino, uint8_t *seen)
{
	if (seen[ino])
		return;
	seen[ino] = 1;
	struct sim_ino *in = &fs->inos[ino];
	if (in->kind == 1) {
		size_t keep = in->dur_len;
		size_t extra = 0;
		if (in->len > in->dur_len && sim_chance(fs, fs->faults.tail_survives_ppm)) {
			extra = (size_t)sim_fs_rand(fs, in->len - in->dur_len + 1);
			fs->st.tails_torn++;
		}
		/* Either a prefix of what was written landed, or the size grew to a block
		 * boundary before the last block's data did (it reads as zeros). */
		size_t zeros = 0;
		if (extra && fs->faults.zero_tails) {
			size_t end = (keep + extra + 4095) / 4096 * 4096;
			zeros = end - (keep + extra);
			if (zeros > in->len - keep - extra)
				zeros = in->len - keep - extra;
		}
		uint8_t *nd = malloc(keep + extra + zeros + 1);
		if (nd == NULL)
			abort();
		if (keep)
			memcpy(nd, in->dur, keep);
		if (extra)
			memcpy(nd + keep, in->data + keep, extra);
		memset(nd + keep + extra, 0, zeros);
		extra += zeros;
		free(in->data);
		in->data = nd;
		in->len = in->cap = keep + extra;
		if (in->cap == 0)
			in->cap = 1;
		in->dirty_lo = in->dirty_hi = 0;
		if (extra) {
			in->dirty_lo = keep;
			in->dirty_hi = keep + extra;
		}
		in->lock_fd = 0;
		return;
	}
	/* Directories: the durable entries become the entries. */
	for (size_t i = 0; i < in->ndents; i++) {
		fs->inos[in->dents[i].ino].refs++;
		fs->inos[in->dents[i].ino].nlink++;
	}
	struct sim_ent *old = in->ents;
	size_t nold = in->nents;
	in->ents = NULL;
	in->nents = in->cap_ents = 0;
	if (in->ndents) {
		in->ents = malloc(in->ndents * sizeof(*in->ents));
		if (in->ents == NULL)
			abort();
		for (size_t i = 0; i < in->ndents; i++) {
			in->ents[i].name = strdup(in->dents[i].name);
			in->ents[i].ino = in->dents[i].ino;
		}
		in->nents = in->cap_ents = in->ndents;
	}
	for (size_t i = 0; i < nold; i++) {
		free(old[i].name);
		fs->inos[old[i].ino].nlink--;
		sim_ino_unref(fs, old[i].ino);
	}
	free(old);
	in = &fs->inos[ino];
	for (size_t i = 0; i < in->nents; i++)
		sim_cut(fs, in->ents[i].ino, seen);
}

void
sim_fs_power_loss(struct sim_fs *fs)
{
	if (fs->no_dur) {
		fprintf(stderr, "sim_fs_power_loss on a volatile file system (sim_fs_set_volatile)\n");
		abort();
	}
	fs->st.power_losses++;
	sim_hash(fs, "power_loss", 11);
	/* Every descriptor is gone with the process. */
	for (int i = 0; i < SIM_FD_MAX; i++)
		if (fs->fds[i].used) {
			fs->fds[i].used = 0;
			sim_ino_unref(fs, fs->fds[i].ino);
		}
	uint8_t *seen = calloc(fs->ninos + 1, 1);
	if (seen == NULL)
		abort();
	sim_cut(fs, 0, seen);
	free(seen);
	memset(fs->aliases, 0, sizeof(fs->aliases));
	fs->crash_in = 0;
	fs->dead = 1;
}

int
sim_fs_dead(const struct sim_fs *fs)
{
	return fs->dead;
}

void
sim_fs_revive(struct sim_fs *fs)
{
	fs->dead = 0;
	sim_hash(fs, "revive", 7);
}

uint64_t
sim_fs_now(const struct sim_fs *fs)
{
	return fs->now;
}

void
sim_fs_advance(struct sim_fs *fs, uint64_t ns)
{
	fs->now += ns;
}

void
sim_fs_trace(struct sim_fs *fs, const char *what, int64_t a, int64_t b)
{
	sim_ev(fs, what, NULL, a, b, 0);
}

uint64_t
sim_fs_trace_hash(const struct sim_fs *fs)
{
	return fs->trace;
}

static uint64_t
sim_tree_walk(const struct sim_fs *fs, uint32_t ino, uint64_t h)
{
	const struct sim_ino *in = &fs->inos[ino];
	for (size_t i = 0; i < in->nents; i++) {
		const struct sim_ino *c = &fs->inos[in->ents[i].ino];
		h = XXH3_64bits_withSeed(in->ents[i].name, strlen(in->ents[i].name), h ^ (uint64_t)c->kind);
		if (c->kind == 2)
			h = sim_tree_walk(fs, in->ents[i].ino, h);
		else if (strcmp(in->ents[i].name, "LOCK") != 0)
			h = XXH3_64bits_withSeed(c->data, c->len, h ^ c->len);
	}
	return h;
}

uint64_t
sim_fs_tree_hash(const struct sim_fs *fs)
{
	return sim_tree_walk(fs, 0, 0x7472656531ull);
}

static unsigned
sim_tmp_walk(const struct sim_fs *fs, uint32_t ino)
{
	unsigned n = 0;
	const struct sim_ino *in = &fs->inos[ino];
	for (size_t i = 0; i < in->nents; i++) {
		if (fs->inos[in->ents[i].ino].kind == 2)
			n += sim_tmp_walk(fs, in->ents[i].ino);
		else if (strncmp(in->ents[i].name, SIM_TMP_PREFIX, strlen(SIM_TMP_PREFIX)) == 0)
			n++;
	}
	return n;
}

unsigned
sim_fs_count_tmp(const struct sim_fs *fs, const char *path)
{
	uint32_t ino;
	struct sim_fs *w = (struct sim_fs *)fs;
	if (sim_resolve(w, path, &ino) != 0 || fs->inos[ino].kind != 2)
		return 0;
	return sim_tmp_walk(fs, ino);
}

uint64_t
sim_fs_faults(const struct sim_fs *fs)
{
	return fs->st.eio + fs->st.enospc + fs->st.torn + fs->st.points_failed + fs->st.os_errors;
}

void
sim_fs_stats(const struct sim_fs *fs, struct sim_fs_stats *out)
{
	*out = fs->st;
}

void
sim_fs_set_volatile(struct sim_fs *fs)
{
	fs->no_dur = 1;
}

void
sim_fs_set_model(struct sim_fs *fs, const struct sim_model *m)
{
	if (m != NULL)
		fs->model = *m;
	else
		memset(&fs->model, 0, sizeof(fs->model));
}

void
sim_fs_io_stats(const struct sim_fs *fs, struct sim_io_stats *out)
{
	*out = fs->io;
}

const char *
sim_os_kind_name(int kind)
{
	static const char *const names[SIM_OS_KINDS] = {"get", "head", "put", "part", "commit", "list", "delete"};
	return kind >= 0 && kind < SIM_OS_KINDS ? names[kind] : "?";
}
