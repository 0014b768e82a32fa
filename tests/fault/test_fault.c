/*
 * test_fault.c — fault injection through the env seams (node/lib/env.h). A small
 * workload (appends, seals, a merge, reads) runs once with every file syscall counted;
 * then, for every kind of fault and every N from 1 to the number of such calls in that
 * run, it runs again with the N-th call failing and asserts the documented outcome:
 *   - the operation that met the fault fails with an error (or succeeds, when the
 *     failure hit something retried or best-effort), never a crash or a hang;
 *   - a failed WAL write or sync is never retried as if the data were safe: that
 *     append and every later one fail with STRATA_EREADONLY until the store reopens;
 *   - nothing acknowledged is lost: after a simulated power loss (every file cut back
 *     to what its last successful fsync/fdatasync covered; data written before a failed
 *     sync is treated as lost even if a later sync succeeds, as Linux may drop it) or a
 *     simulated process crash (a torn write, then every call fails), the store reopens
 *     with faults off and every acknowledged row reads back with its value;
 *   - after the reopen no object is left that the manifest does not reference.
 * Object-store faults are injected through the syscalls the fs object store makes
 * (there is no seam to hand strata_open a custom object store). Hangs check that a
 * stuck object store stalls neither appends nor reads of the memtable.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../node/core/manifest.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "../unit/harness.h"

/** Seconds a test may take before the watchdog declares it hung. */
#define WATCHDOG_S 120
/** RUN under a watchdog of WATCHDOG_S for this test alone (a hang is a test's, the
 *  suite's length is not: it grows with the sweeps and with sanitizers). */
#define RUN_TIMED(fn)                                                                           \
	do {                                                                                    \
		alarm(WATCHDOG_S);                                                               \
		RUN(fn);                                                                        \
	} while (0)
/** Descriptors tracked by the fault layer. */
#define FD_MAX 4096
/** Files tracked for the power-loss model. */
#define MAX_INOS 8192
/** Keys of the workload. */
#define NKEYS 24
/** Values of the workload: the key, the op that wrote it, padding. */
#define VAL_CAP 2600
/** Most failures printed per sweep. */
#define MAX_REPORTS 8

/* ---------------------------------------------------------------- fault layer */

/** Kinds of call the layer counts and can fail. */
enum { K_OPEN, K_PREAD, K_PWRITE, K_FSYNC, K_FDATASYNC, K_FTRUNCATE, K_RENAME, K_LINK,
       K_UNLINK, K_MKDIR, K_OPENDIR, K_SFR, K_NKINDS };
static const char *const kind_names[K_NKINDS] = {
	"open", "pread", "pwrite", "fsync", "fdatasync", "ftruncate", "rename", "link",
	"unlink", "mkdir", "opendir", "sync_file_range",
};
/** Where a call goes: the WAL directory, the object store, elsewhere; D_ANY matches all. */
enum { D_OTHER, D_WAL, D_OBJ, D_NDOMAINS, D_ANY = D_NDOMAINS };
static const char *const domain_names[] = {"other", "wal", "objects", "any"};
/** What the armed call does. */
enum {
	M_FAIL,  /**< fail with err */
	M_TORN,  /**< pwrite: a prefix reaches the file, then the process "crashes" */
	M_SHORT, /**< pwrite/pread: do half of it and report that (legal; must be completed) */
	M_EINTR, /**< fail with EINTR (must be retried) */
	M_HANG,  /**< block until fault_release(), then proceed */
};
/** Actions decided for one call. */
enum { ACT_NONE, ACT_DEAD, ACT_FAIL, ACT_TORN, ACT_SHORT, ACT_EINTR, ACT_HANG };

/** A file as the power-loss model sees it. */
struct ino_rec {
	dev_t dev;
	ino_t ino;
	/** Size covered by the last successful fsync/fdatasync (or size when first seen). */
	off_t synced;
	/** Set once a sync of it failed: what was unsynced then is lost for good. */
	int poisoned;
	/** Length beyond which data is lost because of the failed sync. */
	off_t poison;
};

/** The armed fault and the counters. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/** Armed kind (-1 = none), domain, mode and errno. */
	int kind, domain, mode, err;
	/** Which matching call acts (1-based). */
	long nth;
	/** Matching calls so far. */
	long seen;
	/** Times the fault acted. */
	int fired;
	/** For M_TORN: 0 = nothing of the write reaches the file, 1 = half, 2 = all but a byte. */
	int torn_keep;
	/** Set after a torn write: the process is "dead", every file call fails with EIO. */
	int dead;
	/** M_HANG: a call is blocked / may go on. */
	int hung, release;
	/** Calls per kind and domain since fault_reset. */
	long count[K_NKINDS][D_NDOMAINS];
	/** Descriptor -> domain, device and inode. */
	signed char fd_domain[FD_MAX];
	dev_t fd_dev[FD_MAX];
	ino_t fd_ino[FD_MAX];
	/** Files seen. */
	struct ino_rec inos[MAX_INOS];
	int ninos;
} F = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, -1, 0, 0, 0, 0, 0, 0, 0, 0,
       0, 0, {{0}}, {0}, {0}, {0}, {{0}}, 0};

/** The libc table, called by the wrappers. */
static struct env_ops real;

static int
path_domain(const char *path)
{
	if (strstr(path, "/wal/") != NULL || (strlen(path) >= 4 && strcmp(path + strlen(path) - 4, "/wal") == 0))
		return D_WAL;
	if (strstr(path, "/objects") != NULL)
		return D_OBJ;
	return D_OTHER;
}

static int
fd_dom(int fd)
{
	if (fd < 0 || fd >= FD_MAX)
		return D_OTHER;
	pthread_mutex_lock(&F.mu);
	int d = F.fd_domain[fd];
	pthread_mutex_unlock(&F.mu);
	return d;
}

/** Mutex held: the record of a file, created with `synced` = size when first seen. */
static struct ino_rec *
ino_find(dev_t dev, ino_t ino, off_t size, int create)
{
	for (int i = 0; i < F.ninos; i++)
		if (F.inos[i].dev == dev && F.inos[i].ino == ino)
			return &F.inos[i];
	if (!create || F.ninos == MAX_INOS)
		return NULL;
	struct ino_rec *r = &F.inos[F.ninos++];
	*r = (struct ino_rec){dev, ino, size, 0, 0};
	return r;
}

static int
fault_check(int kind, int domain)
{
	pthread_mutex_lock(&F.mu);
	if (F.dead) {
		pthread_mutex_unlock(&F.mu);
		return ACT_DEAD;
	}
	F.count[kind][domain]++;
	int act = ACT_NONE;
	if (F.kind == kind && (F.domain == D_ANY || F.domain == domain) && ++F.seen == F.nth) {
		F.fired++;
		act = F.mode == M_FAIL ? ACT_FAIL : F.mode == M_TORN ? ACT_TORN
			: F.mode == M_SHORT ? ACT_SHORT : F.mode == M_EINTR ? ACT_EINTR : ACT_HANG;
	}
	if (act == ACT_HANG) {
		F.hung = 1;
		pthread_cond_broadcast(&F.cv);
		while (!F.release)
			pthread_cond_wait(&F.cv, &F.mu);
		act = ACT_NONE;
	}
	pthread_mutex_unlock(&F.mu);
	return act;
}

/** errno for a call that fails with act. */
static int
fail_errno(int act)
{
	return act == ACT_DEAD ? EIO : act == ACT_EINTR ? EINTR : F.err;
}

static int
w_open(const char *path, int flags, mode_t mode)
{
	int d = path_domain(path);
	int act = fault_check(K_OPEN, d);
	if (act == ACT_DEAD || act == ACT_FAIL) {
		errno = fail_errno(act);
		return -1;
	}
	int fd = real.open(path, flags, mode);
	if (fd >= 0 && fd < FD_MAX) {
		struct stat st;
		pthread_mutex_lock(&F.mu);
		F.fd_domain[fd] = (signed char)d;
		if (fstat(fd, &st) == 0) {
			F.fd_dev[fd] = st.st_dev;
			F.fd_ino[fd] = st.st_ino;
			if (S_ISREG(st.st_mode))
				ino_find(st.st_dev, st.st_ino, st.st_size, 1);
		}
		pthread_mutex_unlock(&F.mu);
	}
	return fd;
}

static int
w_close(int fd)
{
	if (fd >= 0 && fd < FD_MAX) {
		pthread_mutex_lock(&F.mu);
		F.fd_domain[fd] = D_OTHER;
		F.fd_ino[fd] = 0;
		pthread_mutex_unlock(&F.mu);
	}
	return real.close(fd);
}

static ssize_t
w_pread(int fd, void *buf, size_t n, off_t off)
{
	int act = fault_check(K_PREAD, fd_dom(fd));
	if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {
		errno = fail_errno(act);
		return -1;
	}
	if (act == ACT_SHORT && n > 1)
		n /= 2;
	return real.pread(fd, buf, n, off);
}

/** Mutex not held: the process "crashes" now. */
static void
go_dead(void)
{
	pthread_mutex_lock(&F.mu);
	F.dead = 1;
	pthread_mutex_unlock(&F.mu);
}

static ssize_t
w_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	int act = fault_check(K_PWRITE, fd_dom(fd));
	if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {
		errno = fail_errno(act);
		return -1;
	}
	if (act == ACT_TORN) {
		size_t keep = F.torn_keep == 0 ? 0 : F.torn_keep == 1 ? n / 2 : (n > 0 ? n - 1 : 0);
		if (keep > 0 && real.pwrite(fd, buf, keep, off) < 0)
			fprintf(stderr, "  (torn write of %zu bytes failed: %s)\n", keep, strerror(errno));
		go_dead();
		errno = EIO;
		return -1;
	}
	if (act == ACT_SHORT && n > 1)
		n /= 2;
	return real.pwrite(fd, buf, n, off);
}

/** fsync and fdatasync: a failure poisons what the file had unsynced. */
static int
w_sync(int kind, int fd, int (*fn)(int))
{
	int act = fault_check(kind, fd_dom(fd));
	struct stat st;
	int have = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {
		if (have && act != ACT_DEAD) {
			pthread_mutex_lock(&F.mu);
			struct ino_rec *r = ino_find(st.st_dev, st.st_ino, 0, 1);
			if (r != NULL && (!r->poisoned || r->poison > r->synced)) {
				r->poisoned = 1;
				r->poison = r->synced;
			}
			pthread_mutex_unlock(&F.mu);
		}
		errno = fail_errno(act);
		return -1;
	}
	int rc = fn(fd);
	if (rc == 0 && have && fstat(fd, &st) == 0) {
		pthread_mutex_lock(&F.mu);
		struct ino_rec *r = ino_find(st.st_dev, st.st_ino, 0, 1);
		if (r != NULL)
			r->synced = st.st_size;
		pthread_mutex_unlock(&F.mu);
	}
	return rc;
}

static int
w_fsync(int fd)
{
	return w_sync(K_FSYNC, fd, real.fsync);
}

static int
w_fdatasync(int fd)
{
	return w_sync(K_FDATASYNC, fd, real.fdatasync);
}

/** Incremental writeback: makes nothing durable (the power-loss model ignores it), but
 *  a failure must fail the object's write. */
static int
w_sfr(int fd, off_t off, off_t n, unsigned int flags)
{
	int act = fault_check(K_SFR, fd_dom(fd));
	if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {
		errno = fail_errno(act);
		return -1;
	}
	return real.sync_file_range != NULL ? real.sync_file_range(fd, off, n, flags) : 0;
}

/** The local object store with writeback every 4 KiB, so the small runs of the workload
 *  call sync_file_range too. */
static int
w_objstore_new(const char *dir, struct objstore **out)
{
	int rc = objstore_fs_new(dir, out);
	if (rc == 0)
		rc = objstore_fs_set_bytes_per_sync(*out, 4096);
	return rc;
}

static int
w_ftruncate(int fd, off_t len)
{
	int act = fault_check(K_FTRUNCATE, fd_dom(fd));
	if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {
		errno = fail_errno(act);
		return -1;
	}
	return real.ftruncate(fd, len);
}

/** Before path loses a name: if it is the file's last one, forget the file (its inode
 *  number may be reused by a new file, which must not inherit its sync state). */
static void
ino_unlinking(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1)
		return;
	pthread_mutex_lock(&F.mu);
	for (int i = 0; i < F.ninos; i++) {
		if (F.inos[i].dev == st.st_dev && F.inos[i].ino == st.st_ino) {
			F.inos[i] = F.inos[--F.ninos];
			break;
		}
	}
	pthread_mutex_unlock(&F.mu);
}

/** A path call: rename, link, unlink, mkdir. */
#define PATH_WRAP(name, kind, proto, call, path)                                   \
	static int name proto                                                      \
	{                                                                          \
		int act = fault_check(kind, path_domain(path));                    \
		if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {      \
			errno = fail_errno(act);                                   \
			return -1;                                                 \
		}                                                                  \
		return call;                                                       \
	}
PATH_WRAP(w_rename, K_RENAME, (const char *a, const char *b),
	  (ino_unlinking(b), real.rename(a, b)), a)
PATH_WRAP(w_link, K_LINK, (const char *a, const char *b), real.link(a, b), a)
PATH_WRAP(w_unlink, K_UNLINK, (const char *a), (ino_unlinking(a), real.unlink(a)), a)
PATH_WRAP(w_mkdir, K_MKDIR, (const char *a, mode_t m), real.mkdir(a, m), a)

static DIR *
w_opendir(const char *path)
{
	int act = fault_check(K_OPENDIR, path_domain(path));
	if (act == ACT_DEAD || act == ACT_FAIL || act == ACT_EINTR) {
		errno = fail_errno(act);
		return NULL;
	}
	return real.opendir(path);
}

static struct dirent *
w_readdir(DIR *d)
{
	pthread_mutex_lock(&F.mu);
	int dead = F.dead;
	pthread_mutex_unlock(&F.mu);
	if (dead) {
		errno = EIO;
		return NULL;
	}
	return real.readdir(d);
}

/** Install the wrappers (once) and forget every count, file and armed fault. */
static void
fault_reset(void)
{
	pthread_mutex_lock(&F.mu);
	F.kind = -1;
	F.seen = 0;
	F.fired = 0;
	F.dead = 0;
	F.hung = 0;
	F.release = 0;
	memset(F.count, 0, sizeof(F.count));
	memset(F.fd_domain, 0, sizeof(F.fd_domain));
	F.ninos = 0;
	pthread_mutex_unlock(&F.mu);
	env.open = w_open;
	env.close = w_close;
	env.pread = w_pread;
	env.pwrite = w_pwrite;
	env.fsync = w_fsync;
	env.fdatasync = w_fdatasync;
	env.ftruncate = w_ftruncate;
	env.rename = w_rename;
	env.link = w_link;
	env.unlink = w_unlink;
	env.mkdir = w_mkdir;
	env.opendir = w_opendir;
	env.readdir = w_readdir;
	env.sync_file_range = w_sfr;
	env.objstore_new = w_objstore_new;
}

/** Arm: the nth call of kind in domain acts with mode (err for M_FAIL). Counts restart. */
static void
fault_arm(int kind, int domain, long nth, int mode, int err)
{
	pthread_mutex_lock(&F.mu);
	F.kind = kind;
	F.domain = domain;
	F.nth = nth;
	F.mode = mode;
	F.err = err;
	F.seen = 0;
	F.fired = 0;
	F.hung = 0;
	F.release = 0;
	memset(F.count, 0, sizeof(F.count));
	pthread_mutex_unlock(&F.mu);
}

/** Disarm, leave "dead" mode and let a hung call go. */
static void
fault_off(void)
{
	pthread_mutex_lock(&F.mu);
	F.kind = -1;
	F.dead = 0;
	F.release = 1;
	pthread_cond_broadcast(&F.cv);
	pthread_mutex_unlock(&F.mu);
}

static long
fault_count(int kind, int domain)
{
	pthread_mutex_lock(&F.mu);
	long n = 0;
	for (int d = 0; d < D_NDOMAINS; d++)
		if (domain == D_ANY || domain == d)
			n += F.count[kind][d];
	pthread_mutex_unlock(&F.mu);
	return n;
}

/** Power loss: cut every file the layer saw back to what its syncs covered. Returns the
 *  number of files cut. */
static int
power_loss(const char *dir)
{
	int cut = 0;
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct stat st;
		if (lstat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			cut += power_loss(p);
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		pthread_mutex_lock(&F.mu);
		struct ino_rec *r = ino_find(st.st_dev, st.st_ino, 0, 0);
		off_t keep = r == NULL ? st.st_size : r->poisoned && r->poison < r->synced ? r->poison
											: r->synced;
		pthread_mutex_unlock(&F.mu);
		if (st.st_size > keep) {
			if (truncate(p, keep) != 0)
				fprintf(stderr, "  power_loss: truncate %s: %s\n", p, strerror(errno));
			cut++;
		}
	}
	closedir(d);
	return cut;
}

/* ---------------------------------------------------------------- workload */

/** What the test knows about a key. */
struct mkey {
	/** Op that wrote the newest acknowledged value (0 = none). */
	int acked;
	/** Ops whose append failed after that (their rows may or may not have survived). */
	int maybe[16];
	int nmaybe;
};

/** One run of the workload (one trial of a sweep). */
struct trial {
	/** Store directory. */
	char *dir;
	/** The store, while open. */
	strata *db;
	/** The model. */
	struct mkey keys[NKEYS];
	/** Set once an append failed because the WAL failed. */
	int readonly;
	/** Ops whose outcome contradicted the documented one (counted, first ones printed). */
	int violations;
	/** The fault that runs, for messages. */
	char what[128];
	/** Where the run is, for messages. */
	char phase[64];
	/** Append/seal/merge/get calls that failed. */
	int failed_ops;
};

/** Reports printed so far by the running sweep. */
static int reports;

static void
violation(struct trial *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
violation(struct trial *r, const char *fmt, ...)
{
	r->violations++;
	if (reports++ >= MAX_REPORTS)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "  [%s; %s] ", r->what, r->phase[0] ? r->phase : "workload");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void
key_name(char *dst, int k)
{
	snprintf(dst, 16, "key%03d", k);
}

/** Sweeps of the incremental writeback write values of about 2 KiB that compress
 *  badly, so that run files pass the 4 KiB writeback step. */
static int big_values;

/** Value written for key k by op: "<key>@<op>" padded; every 3rd op writes a long one. */
static size_t
value_of(char *dst, int k, int op)
{
	int n = snprintf(dst, VAL_CAP, "key%03d@%d:", k, op);
	size_t len = (size_t)n, want = (op % 3 == 0) ? 300 + (size_t)(k * 7) % 100 : 20 + (size_t)k;
	if (big_values)
		want = 2000 + (size_t)(k * 37) % 400;
	for (uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull + (uint64_t)op; len < want; len++) {
		h = h * 6364136223846793005ull + 1442695040888963407ull;
		dst[len] = big_values ? (char)('!' + (h >> 33) % 90)
				      : (char)('a' + (len * 31 + (size_t)op) % 26);
	}
	return len;
}

static strata_options
store_opts(const char *dir)
{
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1;
	o.sync = STRATA_SYNC_FSYNC;
	o.block_bytes = 256;
	o.wal_segment_bytes = 4096;
	/* Snapshots (and the collection behind them) within the workload, so the sweeps
	 * fail every write of the manifest log: entries, snapshots, deletes. */
	o.manifest_snapshot_edits = 2;
	return o;
}

/** Append op's rows (nrows keys from a pattern); checks the outcome. */
static void
do_append(struct trial *r, int op, int nrows)
{
	char keys[4][16], vals[4][VAL_CAP];
	strata_row rows[4];
	int ks[4];
	for (int i = 0; i < nrows; i++) {
		ks[i] = (op * 7 + i * 5) % NKEYS;
		key_name(keys[i], ks[i]);
		size_t vl = value_of(vals[i], ks[i], op);
		rows[i] = (strata_row){keys[i], strlen(keys[i]), vals[i], vl};
	}
	int rc = strata_append(r->db, 0, rows, (size_t)nrows);
	if (rc == 0) {
		if (r->readonly)
			violation(r, "append op %d acknowledged after an earlier append failed on the WAL "
				  "(the shard must stay read-only until reopened)", op);
		for (int i = 0; i < nrows; i++) {
			r->keys[ks[i]].acked = op;
			r->keys[ks[i]].nmaybe = 0;
		}
		return;
	}
	r->failed_ops++;
	if (getenv("FAULT_VERBOSE"))
		fprintf(stderr, "  [%s] append op %d: %s: %s\n", r->what, op, strata_strerror(rc),
			strata_last_error());
	if (rc != STRATA_EREADONLY)
		violation(r, "append op %d failed with %s (%s); a failed WAL write or sync must give "
			  "STRATA_EREADONLY", op, strata_strerror(rc), strata_last_error());
	else if (strstr(strata_last_error(), "/") == NULL)
		violation(r, "append op %d: the read-only message names no file: '%s'", op,
			  strata_last_error());
	r->readonly = 1;
	for (int i = 0; i < nrows; i++) {
		struct mkey *m = &r->keys[ks[i]];
		if (m->nmaybe < 16)
			m->maybe[m->nmaybe++] = op;
	}
}

/** A seal, merge or compaction outcome: 0 or an IO error code with a message. */
static void
check_maint(struct trial *r, const char *what, int rc, int enospc_ok)
{
	if (rc == 0)
		return;
	if (getenv("FAULT_VERBOSE"))
		fprintf(stderr, "  [%s] %s: %s: %s\n", r->what, what, strata_strerror(rc),
			strata_last_error());
	r->failed_ops++;
	if (rc != STRATA_EIO && !(enospc_ok && rc == STRATA_ENOSPC))
		violation(r, "%s failed with %s (%s); an IO fault must give STRATA_EIO%s", what,
			  strata_strerror(rc), strata_last_error(), enospc_ok ? " or STRATA_ENOSPC" : "");
	else if (strata_last_error()[0] == '\0')
		violation(r, "%s failed with %s and no message", what, strata_strerror(rc));
}

/** Whether value (v, n) is what the model allows for key k; sets *which to the op. */
static int
value_allowed(const struct mkey *m, int k, const void *v, size_t n)
{
	char want[VAL_CAP];
	if (m->acked) {
		size_t wl = value_of(want, k, m->acked);
		if (wl == n && memcmp(want, v, n) == 0)
			return 1;
	}
	for (int i = 0; i < m->nmaybe; i++) {
		size_t wl = value_of(want, k, m->maybe[i]);
		if (wl == n && memcmp(want, v, n) == 0)
			return 1;
	}
	return 0;
}

/** Read every key; during a faulty run a read may fail with EIO but never lie. */
static void
check_reads(struct trial *r, int faulty)
{
	for (int k = 0; k < NKEYS; k++) {
		struct mkey *m = &r->keys[k];
		char key[16];
		key_name(key, k);
		void *v = NULL;
		size_t n = 0;
		int rc = strata_get(r->db, 0, key, strlen(key), &v, &n);
		if (rc == 0) {
			if (!value_allowed(m, k, v, n))
				violation(r, "get %s: a value that is neither its last acknowledged one "
					  "nor a later failed write (%.*s)", key, (int)(n > 24 ? 24 : n),
					  (const char *)v);
			strata_free(v);
		} else if (rc == STRATA_NOTFOUND) {
			if (m->acked)
				violation(r, "get %s: not found, but op %d acknowledged it", key, m->acked);
		} else if (!faulty || rc != STRATA_EIO) {
			violation(r, "get %s: %s (%s)", key, strata_strerror(rc), strata_last_error());
		} else {
			r->failed_ops++;
		}
	}
}

/** Phase 1 (no faults): a store with a generation and rows in the WAL. */
static int
phase1(struct trial *r)
{
	strata_options o = store_opts(r->dir);
	int rc = strata_open(&o, &r->db);
	if (rc) {
		fprintf(stderr, "  phase 1 open: %s\n", strata_last_error());
		return rc;
	}
	for (int op = 1; op <= 6; op++)
		do_append(r, op, 1);
	rc = strata_seal(r->db, 0);
	do_append(r, 7, 2);
	do_append(r, 8, 1);
	strata_close(r->db);
	r->db = NULL;
	return rc || r->violations ? -1 : 0;
}

/** Phase 2, the run under test: open, ~20 appends, 2 seals, a merge, reads, close. */
static void
phase2(struct trial *r)
{
	strata_options o = store_opts(r->dir);
	int rc = strata_open(&o, &r->db);
	if (rc) {
		r->failed_ops++;
		if (rc != STRATA_EIO && rc != STRATA_ENOSPC)
			violation(r, "open failed with %s (%s); an IO fault must give STRATA_EIO or "
				  "STRATA_ENOSPC", strata_strerror(rc), strata_last_error());
		r->db = NULL;
		return;
	}
	for (int op = 10; op < 20; op++)
		do_append(r, op, op % 4 == 0 ? 3 : 1);
	check_maint(r, "seal", strata_seal(r->db, 0), 1);
	for (int op = 20; op < 28; op++)
		do_append(r, op, op % 5 == 0 ? 2 : 1);
	check_maint(r, "seal", strata_seal(r->db, 0), 1);
	uint32_t merged = 0;
	check_maint(r, "merge", strata_merge(r->db, 0, 0, &merged), 1);
	do_append(r, 30, 1);
	do_append(r, 31, 2);
	snprintf(r->phase, sizeof(r->phase), "reads of the faulty run");
	check_reads(r, 1);
	strata_close(r->db);
	r->db = NULL;
}

/** Context of the orphan check's listing. */
struct orphan_check {
	/** The manifest. */
	const struct manifest *m;
	/** Unreferenced objects and stale temp files found. */
	int unreferenced;
	/** First unreferenced key. */
	char first[256];
	/** Lowest manifest log position the reopen's collection keeps. */
	uint64_t log_floor;
};

static int
orphan_check_cb(void *ctx, const char *key, uint64_t size)
{
	struct orphan_check *oc = ctx;
	const char *rel = key + strlen("shard-0000/");
	int kind;
	uint64_t id, epoch, v;
	(void)size;
	int is_snap;
	if (strncmp(rel, "manifest/", 9) == 0) {
		/* Log entries and snapshots from the collection floor (the newest snapshot,
		 * or keep = 4 behind current if lower) up to the current position. */
		if (manifest_parse_log_key(rel, &v, &is_snap) == 0 && v >= oc->log_floor &&
		    v <= oc->m->version)
			return 0;
	} else if (manifest_parse_obj_key(rel, &kind, &id, &epoch) == 0) {
		int i = kind == MANIFEST_GEN ? manifest_find_gen(oc->m, id) : manifest_find_run(oc->m, id);
		const struct manifest_obj *o = i < 0 ? NULL : kind == MANIFEST_GEN ? &oc->m->gens[i]
										    : &oc->m->runs[i];
		if (o != NULL && o->epoch == epoch)
			return 0;
	}
	if (oc->unreferenced++ == 0)
		snprintf(oc->first, sizeof(oc->first), "%s", key);
	return 0;
}

/** Temp files of the object store under dir (recursively). */
static int
count_tmp(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			n += count_tmp(p);
		else if (strncmp(de->d_name, ".tmp.", 5) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/** Reopen with faults off and check the model, the invariants and the object store. */
static void
reopen_and_verify(struct trial *r, int expect_no_tmp)
{
	fault_off();
	snprintf(r->phase, sizeof(r->phase), "after the reopen");
	strata_options o = store_opts(r->dir);
	int rc = strata_open(&o, &r->db);
	if (rc) {
		violation(r, "reopen with faults off failed: %s: %s", strata_strerror(rc),
			  strata_last_error());
		r->db = NULL;
		return;
	}
	if (strata_check(r->db, 0) != 0)
		violation(r, "strata_check after reopen: %s", strata_last_error());
	check_reads(r, 0);
	/* The object store holds nothing the manifest does not reference. */
	char objdir[4096];
	snprintf(objdir, sizeof(objdir), "%s/objects", r->dir);
	struct objstore *os = NULL;
	if (objstore_fs_new(objdir, &os) == 0) {
		struct manifest m;
		if (manifest_load(os, "shard-0000/", &m) == 0) {
			struct orphan_check oc = {&m, 0, "", 0};
			uint64_t snap;
			if (manifest_gc_floor(os, "shard-0000/", m.version, o.manifest_keep, &oc.log_floor,
					      &snap) != 0)
				violation(r, "listing the manifest snapshots: %s", strata_last_error());
			objstore_list(os, "shard-0000/", orphan_check_cb, &oc);
			if (oc.unreferenced)
				violation(r, "%d unreferenced objects after the reopen's orphan collection, "
					  "first %s", oc.unreferenced, oc.first);
			manifest_destroy(&m);
		} else {
			violation(r, "manifest_load after reopen: %s", strata_last_error());
		}
		objstore_destroy(os);
	}
	int tmp = count_tmp(objdir);
	if (expect_no_tmp && tmp)
		violation(r, "%d temp files left in the object store after failed writes", tmp);
	/* The shard takes writes again. */
	char v[VAL_CAP];
	size_t vl = value_of(v, 0, 99);
	strata_row row = {"key000", 6, v, vl};
	rc = strata_append(r->db, 0, &row, 1);
	if (rc)
		violation(r, "append after reopen: %s: %s", strata_strerror(rc), strata_last_error());
	strata_close(r->db);
	r->db = NULL;
}

/* ---------------------------------------------------------------- sweeps */

/** How a sweep ends a faulty run. */
enum { END_POWER_LOSS, END_PROCESS_CRASH };

/** Totals of a clean run, per kind and domain. */
static long totals[K_NKINDS][D_NDOMAINS + 1];

/** Set once totals hold the counts of a clean run. */
static int measured;

/** Run the workload once without faults and record how many calls of each kind it makes. */
/** Manifest log entries and snapshots put during the clean run (its test points). */
static atomic_int clean_entries, clean_snapshots;

static int
count_manifest_point(const char *name, const void *arg)
{
	(void)arg;
	if (strcmp(name, "manifest.appended") == 0)
		atomic_fetch_add(&clean_entries, 1);
	else if (strcmp(name, "manifest.snapshot_written") == 0)
		atomic_fetch_add(&clean_snapshots, 1);
	return 0;
}

static int
measure(void)
{
	struct trial r;
	memset(&r, 0, sizeof(r));
	snprintf(r.what, sizeof(r.what), "clean run");
	r.dir = harness_tmpdir("fault");
	fault_reset();
	env_default.point = count_manifest_point;
	int rc = phase1(&r);
	fault_arm(-1, D_ANY, 0, M_FAIL, 0);
	if (rc == 0)
		phase2(&r);
	env_default.point = NULL;
	for (int k = 0; k < K_NKINDS; k++)
		for (int d = 0; d <= D_ANY; d++)
			totals[k][d] = fault_count(k, d);
	if (rc == 0 && r.failed_ops == 0 && r.violations == 0)
		reopen_and_verify(&r, 1);
	measured = rc == 0 && r.failed_ops == 0 && r.violations == 0;
	harness_rmrf(r.dir);
	free(r.dir);
	return rc || r.failed_ops || r.violations ? -1 : 0;
}

/** Outcome figures of one sweep. */
struct sweep {
	/** Runs, runs where the fault acted, runs where some operation failed. */
	int runs, fired, with_errors;
	/** Runs that broke a documented outcome. */
	int bad;
	/** Runs where an append hit the fault and the shard turned read-only. */
	int readonly;
};

/**
 * For N = 1 .. calls of kind in domain during the clean run: fail the N-th call with
 * mode/err, then end the run (power loss or process crash), reopen and verify.
 */
static struct sweep
sweep(int kind, int domain, int mode, int err, int end)
{
	struct sweep s = {0, 0, 0, 0, 0};
	if (!measured && measure() != 0)
		fprintf(stderr, "  the clean run failed: no sweep\n");
	long total = totals[kind][domain];
	reports = 0;
	/* FAULT_N=<n> runs only that call index of every sweep (to debug one case). */
	long only = getenv("FAULT_N") ? atol(getenv("FAULT_N")) : 0;
	for (long n = 1; n <= total; n++) {
		if (only > 0 && n != only)
			continue;
		struct trial r;
		memset(&r, 0, sizeof(r));
		snprintf(r.what, sizeof(r.what), "%s %s #%ld of %ld: %s", kind_names[kind],
			 domain_names[domain], n, total,
			 mode == M_FAIL ? strerror(err) : mode == M_TORN ? "torn, then crash"
			 : mode == M_SHORT ? "short transfer" : mode == M_EINTR ? "EINTR" : "hang");
		r.dir = harness_tmpdir("fault");
		fault_reset();
		if (phase1(&r) != 0) {
			violation(&r, "phase 1 failed without faults");
		} else {
			fault_arm(kind, domain, n, mode, err);
			phase2(&r);
			pthread_mutex_lock(&F.mu);
			int fired = F.fired;
			pthread_mutex_unlock(&F.mu);
			s.fired += fired > 0;
			s.with_errors += r.failed_ops > 0;
			s.readonly += r.readonly;
			if ((mode == M_SHORT || mode == M_EINTR) && r.failed_ops)
				violation(&r, "%d operations failed; a %s must be completed by the engine",
					  r.failed_ops, mode == M_SHORT ? "short transfer" : "EINTR");
			if (end == END_POWER_LOSS)
				power_loss(r.dir);
			reopen_and_verify(&r, mode == M_FAIL && kind != K_UNLINK);
		}
		s.runs++;
		s.bad += r.violations > 0;
		harness_rmrf(r.dir);
		free(r.dir);
	}
	printf("#   %-9s %-7s %-16s N=1..%-3ld fired %d, runs with a failed op %d, read-only %d, "
	       "broken %d\n", kind_names[kind], domain_names[domain],
	       mode == M_FAIL ? (err == ENOSPC ? "ENOSPC" : "EIO") : mode == M_TORN ? "torn+crash"
	       : mode == M_SHORT ? "short" : "EINTR", total, s.fired, s.with_errors, s.readonly, s.bad);
	return s;
}

/** Common assertions of a sweep: it ran over a non-trivial range, the fault acted every
 *  time, and no run broke a documented outcome. */
static void
check_sweep(struct sweep s, long total)
{
	CHECK(total > 0);
	if (getenv("FAULT_N") == NULL) {
		CHECK_EQ(s.runs, total);
		CHECK_EQ(s.fired, total);
	}
	CHECK_EQ(s.bad, 0);
}

TEST(clean_run_counts_calls)
{
	REQUIRE_EQ(measure(), 0);
	printf("#   clean run: pwrite %ld (wal %ld, objects %ld), fdatasync %ld, fsync %ld, open %ld, "
	       "pread %ld, opendir %ld, unlink %ld, rename %ld, link %ld\n", totals[K_PWRITE][D_ANY],
	       totals[K_PWRITE][D_WAL], totals[K_PWRITE][D_OBJ], totals[K_FDATASYNC][D_ANY],
	       totals[K_FSYNC][D_ANY], totals[K_OPEN][D_ANY], totals[K_PREAD][D_ANY],
	       totals[K_OPENDIR][D_ANY], totals[K_UNLINK][D_ANY], totals[K_RENAME][D_ANY],
	       totals[K_LINK][D_ANY]);
	CHECK(totals[K_PWRITE][D_WAL] >= 20);
	CHECK(totals[K_FDATASYNC][D_WAL] >= 20);
	CHECK(totals[K_PWRITE][D_OBJ] >= 3);
	/* The sweeps over the objects' writes, links and unlinks reach the manifest log's
	 * entries, its snapshots and the collection behind them. */
	printf("#   clean run: %d manifest log entries, %d snapshots\n", atomic_load(&clean_entries),
	       atomic_load(&clean_snapshots));
	CHECK(atomic_load(&clean_entries) >= 3);
	CHECK(atomic_load(&clean_snapshots) >= 1);
}

TEST(writeback_eio_fails_the_object_write_and_loses_nothing)
{
	/* Its own clean run, with values that make run files pass the writeback step. */
	big_values = 1;
	measured = 0;
	REQUIRE_EQ(measure(), 0);
	printf("#   clean run with 2 KiB values: sync_file_range %ld (objects %ld)\n",
	       totals[K_SFR][D_ANY], totals[K_SFR][D_OBJ]);
	CHECK(totals[K_SFR][D_OBJ] >= 3);
	struct sweep s = sweep(K_SFR, D_ANY, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_SFR][D_ANY]);
	/* The kernel reports a writeback error once: the write it hit must fail. */
	CHECK_EQ(s.with_errors, s.fired);
	big_values = 0;
	measured = 0;
	REQUIRE_EQ(measure(), 0);
}

TEST(wal_write_eio_turns_shard_readonly_and_loses_nothing)
{
	struct sweep s = sweep(K_PWRITE, D_WAL, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_PWRITE][D_WAL]);
	CHECK(s.readonly > 0);
}

TEST(wal_fdatasync_eio_is_never_retried_as_safe)
{
	struct sweep s = sweep(K_FDATASYNC, D_ANY, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_FDATASYNC][D_ANY]);
	CHECK(s.readonly > 0);
}

TEST(enospc_on_any_write_fails_cleanly)
{
	struct sweep s = sweep(K_PWRITE, D_ANY, M_FAIL, ENOSPC, END_POWER_LOSS);
	check_sweep(s, totals[K_PWRITE][D_ANY]);
}

TEST(fsync_eio_fails_the_operation_and_loses_nothing)
{
	struct sweep s = sweep(K_FSYNC, D_ANY, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_FSYNC][D_ANY]);
}

TEST(torn_write_at_crash_keeps_acknowledged_rows)
{
	F.torn_keep = 1;
	struct sweep s = sweep(K_PWRITE, D_ANY, M_TORN, EIO, END_PROCESS_CRASH);
	check_sweep(s, totals[K_PWRITE][D_ANY]);
	F.torn_keep = 2;
	s = sweep(K_PWRITE, D_WAL, M_TORN, EIO, END_PROCESS_CRASH);
	check_sweep(s, totals[K_PWRITE][D_WAL]);
}

TEST(crash_before_any_write_keeps_acknowledged_rows)
{
	F.torn_keep = 0;
	struct sweep s = sweep(K_PWRITE, D_ANY, M_TORN, EIO, END_PROCESS_CRASH);
	check_sweep(s, totals[K_PWRITE][D_ANY]);
}

TEST(short_writes_and_reads_are_completed)
{
	struct sweep s = sweep(K_PWRITE, D_ANY, M_SHORT, 0, END_POWER_LOSS);
	check_sweep(s, totals[K_PWRITE][D_ANY]);
	CHECK_EQ(s.with_errors, 0);
	s = sweep(K_PREAD, D_ANY, M_SHORT, 0, END_POWER_LOSS);
	check_sweep(s, totals[K_PREAD][D_ANY]);
	CHECK_EQ(s.with_errors, 0);
}

TEST(eintr_is_retried)
{
	struct sweep s = sweep(K_PWRITE, D_ANY, M_EINTR, 0, END_POWER_LOSS);
	check_sweep(s, totals[K_PWRITE][D_ANY]);
	CHECK_EQ(s.with_errors, 0);
	s = sweep(K_PREAD, D_ANY, M_EINTR, 0, END_POWER_LOSS);
	check_sweep(s, totals[K_PREAD][D_ANY]);
	CHECK_EQ(s.with_errors, 0);
}

TEST(object_put_failure_fails_the_operation)
{
	/* A put creates a temp file, writes it, renames or links it over the key. */
	struct sweep s = sweep(K_OPEN, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_OPEN][D_OBJ]);
	s = sweep(K_PWRITE, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_PWRITE][D_OBJ]);
	s = sweep(K_RENAME, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_RENAME][D_OBJ]);
	s = sweep(K_LINK, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_LINK][D_OBJ]);
}

TEST(object_get_failure_is_an_error_never_a_wrong_answer)
{
	struct sweep s = sweep(K_PREAD, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_PREAD][D_OBJ]);
}

TEST(object_list_failure_fails_or_is_retried_later)
{
	struct sweep s = sweep(K_OPENDIR, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_OPENDIR][D_OBJ]);
}

TEST(object_delete_failure_is_best_effort)
{
	struct sweep s = sweep(K_UNLINK, D_OBJ, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_UNLINK][D_OBJ]);
}

TEST(wal_open_and_directory_failures_fail_cleanly)
{
	struct sweep s = sweep(K_OPEN, D_WAL, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_OPEN][D_WAL]);
	s = sweep(K_OPENDIR, D_WAL, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_OPENDIR][D_WAL]);
	s = sweep(K_UNLINK, D_WAL, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_UNLINK][D_WAL]);
	s = sweep(K_MKDIR, D_ANY, M_FAIL, EIO, END_POWER_LOSS);
	check_sweep(s, totals[K_MKDIR][D_ANY]);
}

/* ---------------------------------------------------------------- hangs */

/** Arguments of a background seal or merge. */
struct bg_op {
	/** The store. */
	strata *db;
	/** 0 = seal, 1 = merge. */
	int merge;
	/** Its result. */
	int rc;
};

static void *
bg_main(void *arg)
{
	struct bg_op *b = arg;
	uint32_t merged;
	int rc = b->merge ? strata_merge(b->db, 0, 0, &merged) : strata_seal(b->db, 0);
	__atomic_store_n(&b->rc, rc, __ATOMIC_SEQ_CST);
	return NULL;
}

/** Wait until the armed hang blocks a call; 0 if it never did (the op finished first). */
static int
wait_hung(pthread_t t, struct bg_op *b)
{
	(void)t;
	(void)b;
	pthread_mutex_lock(&F.mu);
	while (!F.hung)
		pthread_cond_wait(&F.cv, &F.mu);
	pthread_mutex_unlock(&F.mu);
	return 1;
}

/** With a seal or merge stuck in object IO (kind), appends and memtable reads go on. */
static void
hang_case(int kind, int merge)
{
	struct trial r;
	memset(&r, 0, sizeof(r));
	snprintf(r.what, sizeof(r.what), "%s hang during %s", kind_names[kind], merge ? "merge" : "seal");
	reports = 0;
	r.dir = harness_tmpdir("fault");
	fault_reset();
	REQUIRE_EQ(phase1(&r), 0);
	strata_options o = store_opts(r.dir);
	REQUIRE_EQ(strata_open(&o, &r.db), 0);
	for (int op = 10; op < 14; op++)
		do_append(&r, op, 1);
	if (merge)
		REQUIRE_EQ(strata_seal(r.db, 0), 0);
	/* The first object call of that kind in the seal or merge blocks. */
	fault_arm(kind, D_OBJ, 1, M_HANG, 0);
	struct bg_op b = {r.db, merge, -99};
	pthread_t t;
	REQUIRE_EQ(pthread_create(&t, NULL, bg_main, &b), 0);
	wait_hung(t, &b);
	for (int op = 40; op < 60; op++)
		do_append(&r, op, 1);
	check_reads(&r, 0);
	CHECK_EQ(r.failed_ops, 0);
	CHECK_EQ(__atomic_load_n(&b.rc, __ATOMIC_SEQ_CST), -99); /* still stuck */
	fault_off();
	pthread_join(t, NULL);
	CHECK_EQ(b.rc, 0);
	strata_close(r.db);
	r.db = NULL;
	reopen_and_verify(&r, 1);
	CHECK_EQ(r.violations, 0);
	harness_rmrf(r.dir);
	free(r.dir);
}

TEST(object_put_hang_does_not_stall_appends)
{
	hang_case(K_PWRITE, 0);
	hang_case(K_PWRITE, 1);
}

TEST(object_get_hang_does_not_stall_appends)
{
	hang_case(K_PREAD, 1);
}

static void
watchdog_fire(int sig)
{
	(void)sig;
	static const char msg[] = "  watchdog: a test_fault test ran over 120 s (a fault hung "
				  "the engine)\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(2);
}

/** Engine log lines go nowhere: the faults make the engine log on purpose. */
static void
quiet_sink(int level, const char *msg)
{
	(void)level;
	(void)msg;
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	alarm(WATCHDOG_S);
	if (getenv("FAULT_VERBOSE") == NULL)
		diag_log_sink = quiet_sink;
	/* The layer models durability itself (power_loss), so a tmpfs loses nothing of the
	 * test and spares the disk a few thousand fsyncs. */
	if (getenv("TMPDIR") == NULL && access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 0);
	real = env;
	RUN_TIMED(clean_run_counts_calls);
	RUN_TIMED(wal_write_eio_turns_shard_readonly_and_loses_nothing);
	RUN_TIMED(wal_fdatasync_eio_is_never_retried_as_safe);
	RUN_TIMED(enospc_on_any_write_fails_cleanly);
	RUN_TIMED(fsync_eio_fails_the_operation_and_loses_nothing);
	RUN_TIMED(writeback_eio_fails_the_object_write_and_loses_nothing);
	RUN_TIMED(torn_write_at_crash_keeps_acknowledged_rows);
	RUN_TIMED(crash_before_any_write_keeps_acknowledged_rows);
	RUN_TIMED(short_writes_and_reads_are_completed);
	RUN_TIMED(eintr_is_retried);
	RUN_TIMED(object_put_failure_fails_the_operation);
	RUN_TIMED(object_get_failure_is_an_error_never_a_wrong_answer);
	RUN_TIMED(object_list_failure_fails_or_is_retried_later);
	RUN_TIMED(object_delete_failure_is_best_effort);
	RUN_TIMED(wal_open_and_directory_failures_fail_cleanly);
	RUN_TIMED(object_put_hang_does_not_stall_appends);
	RUN_TIMED(object_get_hang_does_not_stall_appends);
	env_reset();
	return HARNESS_END("test_fault");
}
