/*
 * store.c — the core's store (store.h): the shards of one data directory, its lock and
 * its shape; the options an open checks, the open and the close, and every operation's
 * argument checks and dispatch to its shard. Each entry point enters the store's
 * environment and calls the function of the same name with _in appended, which does the
 * work. The public API (node/strata.c) is built on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/bcache.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../strata_types.h"
#include "../lib/hist.h"
#include "../lib/mono.h"
#include "../lib/ratelimit.h"
#include "checkpoint.h"
#include "reaper.h"
#include "../lib/trace.h"
#include "shard.h"
#include "wal.h"
#include "store.h"

/** What an open of the lock file found, to undo it after a failed open. */
struct store_lock {
	/** The locked descriptor (-1: none). */
	int fd;
	/** The file did not exist before. */
	int created;
	/** Its previous contents (a pid line), restored after a failed open. */
	char prev[64];
	/** Bytes in prev. */
	ssize_t prev_len;
};

/** What was in a directory an open takes, so that a failed start removes exactly what the
 *  open added (a new store) and nothing that was there before. */
struct store_made {
	/** The directory (owned; NULL: none taken). */
	char *dir;
	/** The outermost directory of dir's path that the open created (owned; NULL: dir
	 *  existed). */
	char *top;
	/** Names of dir's entries once the open held dir's LOCK (owned), n of them; listed
	 *  is 0 until then, or when they could not be listed (then nothing in dir is
	 *  removed). */
	char **names;
	size_t n;
	int listed;
};

/** Stripes of the claim locks (store.claim_io_mu). */
#define STORE_CLAIM_STRIPES 64u

struct store {
	/** The options it was opened with (dir owned). */
	strata_options opt;
	/** Owned copy of opt.dir. */
	char *dir;
	/** Object store of every shard. */
	struct objstore *os;
	/** The shards (NULL: not opened by this handle: outside its serve range, until
	 *  claimed); an entry changes only under claim_mu, read with acquire. */
	struct shard **shards;
	uint32_t nshards;
	/** Guards shards[] changes, retired, mem_limit, merge_cap and the listener (short
	 *  holds, no IO). */
	pthread_mutex_t claim_mu;
	/** Serialise the claims and releases of a shard, held across a claim's IO (nothing
	 *  else takes them): shard i's is claim_io_mu[i % STORE_CLAIM_STRIPES], so the claims
	 *  of a failover's shards run side by side. */
	pthread_mutex_t claim_io_mu[STORE_CLAIM_STRIPES];
	/** Shards a claim replaced (fenced ones), kept until close: callers may hold them. */
	struct shard **retired;
	uint32_t nretired;
	/** What store_set_listener / store_set_memtable_limit / store_set_merge_cap gave
	 *  last, for shards claimed later. */
	uint64_t mem_limit;
	uint32_t merge_cap;
	/** What store_set_merge_threads gave (0: options.merge_threads). */
	uint32_t merge_threads;
	/** The listener installed by store_set_listener (copied; NULL = none). */
	struct store_listener *listener;
	/** Listeners replaced while shards might still be calling them; freed at close. */
	struct store_listener **old_listeners;
	uint32_t nold;
	/** <dir>/LOCK, flock'ed for the life of the handle (fd -1: none), and what it held. */
	struct store_lock lock;
	/** The WAL's root directory: <dir>/wal or the one STORE records (owned). */
	char *wal_root;
	/** <wal_root>/LOCK when the WAL lives outside dir (fd -1: none). */
	struct store_lock wal_lock;
	/** What the open found in dir and in an outside wal_root (store_close_discard). */
	struct store_made made, wal_made;
	/** The environment every call of the store runs in (options.env_ops; NULL: default). */
	struct env_ops *env_ops;
	/** Deletes of objects no manifest names any more, run as background work. */
	struct reaper *reaper;
	/** The budget every shard's background writes draw from. */
	struct ratelimit *io_limit;
	/** Holds of every shard's exclusive lock, ns. */
	struct hist *excl_hold_ns;
	/** Waits to take every shard's exclusive lock, ns. */
	struct hist *excl_wait_ns;
	/** Whether someone above runs the reaper (store_set_reaper_kick); else the store's
	 *  own seals and merges drain it after their commit. */
	atomic_int reaper_driven;
	/** Every engine event, hashed (strata_trace_hash). */
	struct trace trace;
	/** The budget of open WAL segment descriptors (options.max_open_wal_files). */
	struct wal_fdcache *wal_fds;
	/** The block cache every shard's readers share (NULL: block_cache_bytes 0). */
	struct bcache *bcache;
	/** STRATA_SYNC_INTERVAL with threads: the one thread that syncs every shard's WAL
	 *  (not one per shard), its stop flag and wakeup (CLOCK_MONOTONIC). */
	pthread_t syncer;
	int syncer_started, syncer_stop;
	pthread_mutex_t syncer_mu;
	pthread_cond_t syncer_cv;
};

/** File in the data directory whose flock marks the directory's one owner. */
#define STORE_LOCK_FILE "LOCK"

struct strata_plan {
	/** Store the plan was prepared on. */
	struct store *db;
	/** The shard it was prepared on (a claim may since have replaced db's entry). */
	struct shard *s;
	/** The shard-level plan. */
	struct shard_plan *p;
	/** Shard number. */
	uint32_t shard;
};

static int store_syncer_start(struct store *db);
static void store_close_in(struct store *db);

/* ---------- the directory lock ---------- */

/** Take <dir>/LOCK for this handle; STRATA_ELOCKED, naming the holder, when taken. */
static int
store_lock(const char *dir, const char *what, struct store_lock *lk)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/" STORE_LOCK_FILE, dir);
	lk->fd = -1;
	lk->created = 0;
	lk->prev_len = 0;
	int fd = env.open(path, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0 && errno == ENOENT) {
		fd = env.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		lk->created = fd >= 0;
		if (fd < 0 && errno == EEXIST)
			fd = env.open(path, O_RDWR | O_CLOEXEC, 0);
	}
	if (fd < 0)
		return diag_sys(errno, "strata_open: cannot open the lock file", path);
	ssize_t n = env_pread_full(fd, lk->prev, sizeof(lk->prev) - 1, 0);
	lk->prev_len = n > 0 ? n : 0;
	lk->prev[lk->prev_len] = '\0';
	if (env.flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;
		env.close(fd);
		if (err != EWOULDBLOCK)
			return diag_sys(err, "strata_open: cannot lock", path);
		char pid[64];
		snprintf(pid, sizeof(pid), "%s", lk->prev);
		pid[strcspn(pid, "\n")] = '\0';
		return diag_set(STRATA_ELOCKED, "strata_open: the %s %s is in use (pid %s holds "
				"%s); a directory has one owner at a time: close the other handle or stop "
				"that node (read-only tools such as `strata inspect` still work)",
				what, dir, pid[0] ? pid : "unknown", path);
	}
	char line[32];
	int len = snprintf(line, sizeof(line), "%ld\n", (long)(env.getpid != NULL ? env.getpid() : getpid()));
	if (env.ftruncate(fd, 0) != 0 || env.pwrite(fd, line, (size_t)len, 0) != len)
		diag_log(LOG_LVL_WARN, "could not write the pid into %s: %s", path, strerror(errno));
	lk->fd = fd;
	return 0;
}

/** After a failed open: put the lock file back as it was, and let it go. */
static void
store_unlock_undo(const char *dir, struct store_lock *lk)
{
	if (lk->fd < 0)
		return;
	char path[4096];
	snprintf(path, sizeof(path), "%s/" STORE_LOCK_FILE, dir);
	if (lk->created) {
		env.unlink(path);
	} else if (env.ftruncate(lk->fd, 0) != 0 ||
		   (lk->prev_len > 0 && env.pwrite(lk->fd, lk->prev, (size_t)lk->prev_len, 0) != lk->prev_len)) {
		diag_log(LOG_LVL_WARN, "could not restore %s: %s", path, strerror(errno));
	}
	env.close(lk->fd); /* releases the flock */
	lk->fd = -1;
}

/* ---------- what an open made, undone after a failed start ---------- */

/** mkdir -p dir, remembering whether it existed. 0, or an error (what was created stays
 *  recorded for store_made_finish). */
static int
store_made_mkdir(struct store_made *m, const char *dir)
{
	char top[4096];
	int rc = env_mkdir_p_new(dir, top, sizeof(top));
	m->dir = env_strdup(dir);
	if (m->dir == NULL && rc == 0)
		rc = diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	if (top[0] != '\0' && (m->top = env_strdup(top)) == NULL && rc == 0)
		rc = diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	return rc;
}

/** List dir's entries, once its LOCK is held. A listing that fails leaves listed 0:
 *  nothing in dir will be removed then. */
static void
store_made_list(struct store_made *m)
{
	DIR *d = m->dir != NULL ? env.opendir(m->dir) : NULL;
	if (d == NULL)
		return;
	struct dirent *de;
	size_t cap = 0;
	int ok = 1;
	while (ok && (de = env.readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (m->n == cap) {
			cap = cap ? 2 * cap : 8;
			char **names = env.realloc(m->names, cap * sizeof(*names));
			ok = names != NULL;
			if (ok)
				m->names = names;
		}
		if (ok && (m->names[m->n] = env_strdup(de->d_name)) != NULL)
			m->n++;
		else
			ok = 0;
	}
	env.closedir(d);
	m->listed = ok;
}

/** Whether name was in the listing. */
static int
store_made_had(const struct store_made *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->names[i], name) == 0)
			return 1;
	return 0;
}

/** Remove a tree the open created (best effort: logged, not returned). */
static void
store_rmtree(const char *path, int depth)
{
	if (env.unlink(path) == 0 || errno == ENOENT)
		return;
	DIR *d = depth < 16 ? env.opendir(path) : NULL;
	if (d != NULL) {
		struct dirent *de;
		char child[4096];
		while ((de = env.readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (snprintf(child, sizeof(child), "%s/%s", path, de->d_name) < (int)sizeof(child))
				store_rmtree(child, depth + 1);
		}
		env.closedir(d);
	}
	if (env.rmdir(path) != 0 && errno != ENOENT)
		diag_log(LOG_LVL_WARN, "could not remove %s after a failed start: %s", path, strerror(errno));
}

/** Remove the entries of m->dir that were not in the listing (with its LOCK still held). */
static void
store_made_undo(const struct store_made *m)
{
	if (!m->listed)
		return;
	DIR *d = env.opendir(m->dir);
	if (d == NULL)
		return;
	char **gone = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = env.readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, STORE_LOCK_FILE) == 0 || store_made_had(m, de->d_name))
			continue;
		if (n == cap) {
			char **g = env.realloc(gone, (cap = cap ? 2 * cap : 8) * sizeof(*g));
			if (g == NULL)
				break;
			gone = g;
		}
		if ((gone[n] = env_strdup(de->d_name)) != NULL)
			n++;
	}
	env.closedir(d);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		if (snprintf(path, sizeof(path), "%s/%s", m->dir, gone[i]) < (int)sizeof(path))
			store_rmtree(path, 0);
		env.free(gone[i]);
	}
	env.free(gone);
}

/** Remove the directories of m->dir's path that the open created, innermost first, and
 *  only while they are empty. */
static void
store_made_rmdirs(const struct store_made *m)
{
	if (m->dir == NULL || m->top == NULL)
		return;
	char p[4096];
	snprintf(p, sizeof(p), "%s", m->dir);
	for (;;) {
		size_t len = strlen(p);
		while (len > 1 && p[len - 1] == '/')
			p[--len] = '\0';
		if (len == 0 || strcmp(p, "/") == 0 || env.rmdir(p) != 0)
			return;
		if (strcmp(p, m->top) == 0)
			return;
		char *slash = strrchr(p, '/');
		if (slash == NULL)
			return;
		slash[slash == p] = '\0';
	}
}

static void
store_made_free(struct store_made *m)
{
	for (size_t i = 0; i < m->n; i++)
		env.free(m->names[i]);
	env.free(m->names);
	env.free(m->dir);
	env.free(m->top);
	memset(m, 0, sizeof(*m));
}

/** After a failed start: remove what the open added to m->dir while its lock lk is still
 *  held, put the lock file back as it was and let it go, then remove the directories
 *  the open created. Frees m. */
static void
store_made_finish(struct store_made *m, struct store_lock *lk)
{
	if (lk->fd >= 0)
		store_made_undo(m);
	if (m->dir != NULL)
		store_unlock_undo(m->dir, lk);
	store_made_rmdirs(m);
	store_made_free(m);
}

/* ---------- the store's shape (the STORE file: store_meta.c) ---------- */

int
store_stored_shards(const char *dir, uint32_t *shards)
{
	if (dir == NULL || shards == NULL)
		return diag_set(STRATA_EINVAL, "store_stored_shards: a directory and an output are required");
	return store_meta_read(dir, shards, NULL, 0, NULL);
}

/** Whether <dir>/wal holds a shard's WAL directory. */
static int
store_default_wal_used(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/wal", dir);
	DIR *d = env.opendir(path);
	if (d == NULL)
		return 0;
	int used = 0;
	struct dirent *de;
	while (!used && (de = env.readdir(d)) != NULL)
		used = strncmp(de->d_name, "shard-", 6) == 0;
	env.closedir(d);
	return used;
}

/** Where the store in o->dir keeps its WAL, from what STORE records and the option:
 *  root gets the directory, *external whether it is outside dir (then STORE records it). */
static int
store_resolve_wal(const strata_options *o, const char *recorded, char *root, size_t cap, int *external)
{
	char want[4096] = "";
	if (o->wal_dir != NULL && o->wal_dir[0] != '\0') {
		if (o->wal_dir[0] == '/') {
			snprintf(want, sizeof(want), "%s", o->wal_dir);
		} else {
			char cwd[2048];
			if (getcwd(cwd, sizeof(cwd)) == NULL)
				return diag_sys(errno, "strata_open: cannot resolve the relative wal_dir",
						o->wal_dir);
			snprintf(want, sizeof(want), "%s/%s", cwd, o->wal_dir);
		}
		size_t len = strlen(want);
		while (len > 1 && want[len - 1] == '/')
			want[--len] = '\0';
	}
	char def[4096];
	snprintf(def, sizeof(def), "%s/wal", o->dir);
	if (recorded[0] != '\0') {
		if (want[0] != '\0' && strcmp(want, recorded) != 0)
			return diag_set(STRATA_EINVAL, "strata_open: the store in %s keeps its WAL in %s (its "
					"STORE file says so), not in wal_dir %s: open it with that wal_dir, or "
					"none; to move the WAL, stop the node, move the directory and edit the "
					"\"wal\" line of STORE", o->dir, recorded, want);
		if (strlen(recorded) >= cap)
			return diag_set(STRATA_ECORRUPT, "strata_open: the WAL directory %s that STORE "
					"records is longer than %zu bytes", recorded, cap - 1);
		snprintf(root, cap, "%s", recorded);
		*external = 1;
		return 0;
	}
	if (want[0] == '\0' || strcmp(want, def) == 0) {
		if (strlen(def) >= cap)
			return diag_set(STRATA_EINVAL, "strata_open: the data directory %s is longer than "
					"%zu bytes", o->dir, cap - 6);
		memcpy(root, def, strlen(def) + 1);
		*external = 0;
		return 0;
	}
	if (store_default_wal_used(o->dir))
		return diag_set(STRATA_EINVAL, "strata_open: the store in %s keeps its WAL in %s, not in "
				"wal_dir %s: open it without wal_dir (a WAL moves only with the store "
				"stopped: move the directory, then record it with a \"wal\" line in STORE)",
				o->dir, def, want);
	if (strlen(want) >= cap)
		return diag_set(STRATA_EINVAL, "strata_open: wal_dir %s is longer than %zu bytes", want,
				cap - 1);
	snprintf(root, cap, "%s", want);
	*external = 1;
	return 0;
}

/** Add to the message of a failed open what a user can do about a damaged store. */
static int
store_open_failed(int rc, const char *dir)
{
	if (rc != STRATA_ECORRUPT && rc != STRATA_EVERSION)
		return rc;
	char why[1024];
	snprintf(why, sizeof(why), "%s", diag_last());
	return diag_set(rc, "%s (nothing was changed; `strata repair %s` reports what can be repaired)",
			why, dir);
}

/* ---------- opening the shards ---------- */

/** Most automatic merge threads (options.merge_threads = 0). */
#define STORE_AUTO_MERGE_THREADS_MAX 8u

/** The threads of a merge pass the options ask for: 1 in inline mode (no thread at all);
 *  0 asks for half the online CPUs, 1..STORE_AUTO_MERGE_THREADS_MAX, leaving the other
 *  half to appends, gets and the loop. */
static uint32_t
store_merge_threads(const strata_options *o)
{
	if (o->threads == 0)
		return 1;
	if (o->merge_threads != 0)
		return o->merge_threads;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t n = cpus > 1 ? (uint32_t)(cpus / 2) : 1;
	return n < STORE_AUTO_MERGE_THREADS_MAX ? n : STORE_AUTO_MERGE_THREADS_MAX;
}

/** The configuration of shard i, from the store's options. */
static void
store_shard_config(struct store *db, uint32_t i, struct shard_config *cfg)
{
	const strata_options *o = &db->opt;
	memset(cfg, 0, sizeof(*cfg));
	cfg->os = db->os;
	cfg->id = i;
	snprintf(cfg->wal_dir, sizeof(cfg->wal_dir), "%.*s/shard-%04u", STORE_WAL_ROOT_MAX, db->wal_root,
		 i);
	snprintf(cfg->prefix, sizeof(cfg->prefix), "shard-%04u/", i);
	cfg->sync = o->sync;
	cfg->sync_interval_ms = o->sync_interval_ms;
	cfg->wal_segment_bytes = o->wal_segment_bytes;
	cfg->max_value_bytes = o->max_value_bytes;
	cfg->run.block_bytes = o->block_bytes;
	cfg->run.index_partition_bytes = o->index_partition_bytes;
	cfg->run.zstd_level = o->zstd_level;
	cfg->run.max_compressed_per_kib = o->compress_max_bytes_per_kib ? o->compress_max_bytes_per_kib
									: RUN_COMPRESS_OFF;
	cfg->run.sample_every = o->compress_sample_every;
	cfg->run.bloom_bits_per_key = o->bloom_bits_per_key ? o->bloom_bits_per_key : RUN_BLOOM_DISABLED;
	cfg->gen_bloom_bits_per_key = o->bloom_bits_per_key == 0 ? RUN_BLOOM_DISABLED
				      : o->generation_bloom_bits_per_key ? o->generation_bloom_bits_per_key
									 : o->bloom_bits_per_key;
	cfg->manifest_keep = o->manifest_keep;
	cfg->manifest.snapshot_edits = o->manifest_snapshot_edits;
	cfg->manifest.keep = o->manifest_keep;
	cfg->merge_max_inputs = o->merge_max_inputs;
	cfg->merge_threads = store_merge_threads(o);
	cfg->merge_min_part_bytes = o->merge_part_min_bytes ? o->merge_part_min_bytes
							    : STORE_MERGE_PART_MIN_DEFAULT;
	cfg->owner_check_ns = (uint64_t)o->owner_check_ms * 1000000ull;
	cfg->reaper = db->reaper;
	cfg->run.limiter = db->io_limit;
	/* The WALs start no sync thread: the store's one syncer (or, with no threads at all,
	 * strata_step) syncs them every interval. */
	cfg->external_sync = 1;
	cfg->group_commit_wait_us = o->group_commit_wait_us;
	cfg->memtable_huge_pages = o->memtable_huge_pages;
	cfg->replay_batch_rows = o->replay_batch_rows;
	cfg->replay_prefault = o->threads != 0;
	cfg->wal_fds = db->wal_fds;
	cfg->bcache = db->bcache;
	cfg->trace = &db->trace;
	cfg->excl_hold_ns = db->excl_hold_ns;
	cfg->excl_wait_ns = db->excl_wait_ns;
	cfg->wal_store = o->wal == STRATA_WAL_STORE;
	/* Also on the local fs store (no URL): rows a wal = store open acknowledged there must
	 * not be hidden by a wal = local open, whose next seal would move the cursor past them. */
	cfg->wal_check_store = !cfg->wal_store;
}

/** Whether this handle opens shard i at strata_open (its serve range). */
static int
store_serves(const struct store *db, uint32_t i)
{
	const strata_options *o = &db->opt;
	if (o->serve_first == STRATA_SERVE_NONE)
		return 0;
	return i >= o->serve_first && (o->serve_count == 0 || i - o->serve_first < o->serve_count);
}

/** A step of the open that every shard goes through. */
enum store_step { STORE_LOAD, STORE_START };

/** Shards shared out between the threads of one step. */
struct store_each {
	struct store *db;
	enum store_step step;
	/** Next shard to take. */
	atomic_uint next;
	/** Set by the first failure: no thread takes another shard. */
	atomic_int stop;
	/** Guards the first failure's record. */
	pthread_mutex_t mu;
	/** The first failure: its result, shard and message (diag is per thread). */
	int rc;
	uint32_t shard;
	char msg[1024];
};

static void
store_each_run(struct store_each *e)
{
	struct store *db = e->db;
	for (;;) {
		if (atomic_load(&e->stop))
			return;
		uint32_t i = atomic_fetch_add(&e->next, 1);
		if (i >= db->opt.shards)
			return;
		int rc;
		if (!store_serves(db, i)) {
			continue; /* not opened here (claimed later, perhaps) */
		} else if (e->step == STORE_LOAD) {
			struct shard_config cfg;
			store_shard_config(db, i, &cfg);
			rc = shard_load(&cfg, &db->shards[i]);
		} else {
			rc = shard_start(db->shards[i]);
		}
		if (rc != 0) {
			pthread_mutex_lock(&e->mu);
			if (e->rc == 0 || i < e->shard) {
				e->rc = rc;
				e->shard = i;
				snprintf(e->msg, sizeof(e->msg), "%s", diag_last());
			}
			pthread_mutex_unlock(&e->mu);
			atomic_store(&e->stop, 1);
			return;
		}
	}
}

static void *
store_each_main(void *arg)
{
	struct store_each *e = arg;
	struct env_ops *prev = env_enter(e->db->env_ops);
	store_each_run(e);
	env_leave(prev);
	return NULL;
}

/** Run step on every shard: on up to options.open_threads threads at once (the claims'
 *  syncs then share journal commits), on the caller's alone in inline mode. The first
 *  failure (the lowest shard's, among those that failed) is the result. */
static int
store_each_shard(struct store *db, enum store_step step)
{
	struct store_each e = {.db = db, .step = step};
	atomic_init(&e.next, 0);
	atomic_init(&e.stop, 0);
	pthread_mutex_init(&e.mu, NULL);
	uint32_t nthreads = db->opt.threads == 0 ? 1 : db->opt.open_threads;
	if (nthreads > db->opt.shards)
		nthreads = db->opt.shards;
	pthread_t *t = nthreads > 1 ? env.calloc(nthreads - 1, sizeof(*t)) : NULL;
	uint32_t started = 0;
	for (; t != NULL && started + 1 < nthreads; started++)
		if (pthread_create(&t[started], NULL, store_each_main, &e) != 0)
			break; /* fewer threads: the ones running take the rest */
	store_each_run(&e);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	env.free(t);
	pthread_mutex_destroy(&e.mu);
	if (step == STORE_LOAD)
		db->nshards = db->opt.shards; /* store_close skips the shards that did not load */
	if (e.rc != 0)
		return diag_set(e.rc, "%s", e.msg);
	return 0;
}

static int
store_open_in(const strata_options *o, struct store **out)
{
	if (o == NULL || out == NULL || o->dir == NULL || o->dir[0] == '\0')
		return diag_set(STRATA_EINVAL, "strata_open: options and a data directory are required");
	*out = NULL;
	if (o->shards > 65536)
		return diag_set(STRATA_EINVAL, "strata_open: shards must be 1..65536 (0 = as stored), not %u",
				o->shards);
	if (o->sync != STRATA_SYNC_FSYNC && o->sync != STRATA_SYNC_NONE && o->sync != STRATA_SYNC_INTERVAL)
		return diag_set(STRATA_EINVAL, "strata_open: unknown sync mode %d", o->sync);
	if (o->max_value_bytes == 0 || o->wal_segment_bytes < 4096 || o->block_bytes < 256)
		return diag_set(STRATA_EINVAL, "strata_open: max_value_bytes must be > 0, "
				"wal_segment_bytes >= 4096 and block_bytes >= 256");
	if (o->manifest_snapshot_edits < 1 || o->manifest_snapshot_edits > MANIFEST_SNAPSHOT_EDITS_MAX)
		return diag_set(STRATA_EINVAL, "strata_open: manifest_snapshot_edits must be 1..%u, not %u",
				MANIFEST_SNAPSHOT_EDITS_MAX, o->manifest_snapshot_edits);
	if (o->compress_max_bytes_per_kib > 1024 || o->compress_sample_every < 1)
		return diag_set(STRATA_EINVAL, "strata_open: compress_max_bytes_per_kib must be 0..1024 "
				"(0: never compress), not %u, and compress_sample_every at least 1, not %u",
				o->compress_max_bytes_per_kib, o->compress_sample_every);
	if (o->merge_max_inputs < 2)
		return diag_set(STRATA_EINVAL, "strata_open: merge_max_inputs must be at least 2 (a pass "
				"folds at least two inputs), not %u", o->merge_max_inputs);
	if (o->index_partition_bytes != 0 && (o->index_partition_bytes < RUN_MIN_BLOCK_BYTES ||
					      o->index_partition_bytes > RUN_MAX_BLOCK_BYTES))
		return diag_set(STRATA_EINVAL, "strata_open: index_partition_bytes must be %u..%u (0: "
				"64 KiB), not %u", RUN_MIN_BLOCK_BYTES, RUN_MAX_BLOCK_BYTES,
				o->index_partition_bytes);
	if (o->merge_threads > RUN_MAX_THREADS)
		return diag_set(STRATA_EINVAL, "strata_open: merge_threads must be 0..%u (0: auto, half "
				"the online CPUs), not %u", RUN_MAX_THREADS, o->merge_threads);
	if (o->owner_check_ms > 3600000)
		return diag_set(STRATA_EINVAL, "strata_open: owner_check_ms must be 0..3600000 (0: read the "
				"epoch object on every read), not %u", o->owner_check_ms);
	if (o->wal != STRATA_WAL_LOCAL && o->wal != STRATA_WAL_STORE)
		return diag_set(STRATA_EINVAL, "strata_open: wal must be STRATA_WAL_LOCAL (%d) or "
				"STRATA_WAL_STORE (%d), not %d", STRATA_WAL_LOCAL, STRATA_WAL_STORE, o->wal);
	struct store *db = env.calloc(1, sizeof(*db));
	if (db == NULL)
		return diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	/* From here on a failure closes db (store_close_in frees what was made of it), then
	 * removes what the open made in the directories. */
	db->lock.fd = -1;
	db->wal_lock.fd = -1;
	trace_create(&db->trace);
	pthread_mutex_init(&db->claim_mu, NULL);
	for (unsigned i = 0; i < STORE_CLAIM_STRIPES; i++)
		pthread_mutex_init(&db->claim_io_mu[i], NULL);
	db->opt = *o;
	db->env_ops = (struct env_ops *)o->env_ops;
	db->merge_cap = o->merge_max_inputs;
	char path[4096], recorded_wal[4096], wal_root[STORE_WAL_ROOT_MAX];
	struct store_lock lk = {.fd = -1}, wal_lk = {.fd = -1};
	/* What the open makes, so that a failed one removes it again (never what was there). */
	struct store_made made = {0}, wal_made = {0};
	uint32_t stored = 0, nshards;
	int have_meta = 0, wal_external = 0, rc;
	if ((db->dir = env_strdup(o->dir)) == NULL) {
		rc = diag_set(STRATA_ENOMEM, "strata_open: out of memory");
		goto fail;
	}
	/* 1. Own the directory. */
	if ((rc = store_made_mkdir(&made, o->dir)) != 0 || (rc = store_lock(o->dir, "data directory", &lk)) != 0)
		goto fail;
	store_made_list(&made);
	/* 2. Its shape: the shard count and the WAL's place are part of the store. */
	rc = store_meta_read(o->dir, &stored, recorded_wal, sizeof(recorded_wal), &have_meta);
	if (rc == STRATA_NOTFOUND)
		rc = 0; /* a new store */
	else if (rc == 0 && o->shards != 0 && o->shards != stored)
		rc = diag_set(STRATA_EINVAL, "strata_open: %s holds a store of %u shards, not %u: the shard "
			      "count is part of the store (open it with %u shards, or 0 for the stored count)",
			      o->dir, stored, o->shards, stored);
	if (rc || (rc = store_resolve_wal(o, have_meta ? recorded_wal : "", wal_root, sizeof(wal_root),
					  &wal_external)) != 0)
		goto fail;
	if ((db->wal_root = env_strdup(wal_root)) == NULL) {
		rc = diag_set(STRATA_ENOMEM, "strata_open: out of memory");
		goto fail;
	}
	if (wal_external) {
		if ((rc = store_made_mkdir(&wal_made, wal_root)) != 0 ||
		    (rc = store_lock(wal_root, "WAL directory", &wal_lk)) != 0)
			goto fail;
		store_made_list(&wal_made);
	}
	nshards = o->shards ? o->shards : stored ? stored : STRATA_DEFAULT_SHARDS;
	db->opt.shards = nshards;
	if (o->serve_first != STRATA_SERVE_NONE &&
	    (o->serve_first >= nshards || o->serve_count > nshards - o->serve_first)) {
		rc = diag_set(STRATA_EINVAL, "strata_open: the serve range (%u shards from shard %u) is "
			      "outside the store's shards 0..%u", o->serve_count, o->serve_first, nshards - 1);
		goto fail;
	}
	if ((db->shards = env.calloc(nshards, sizeof(*db->shards))) == NULL) {
		rc = diag_set(STRATA_ENOMEM, "strata_open: out of memory");
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/objects", o->dir);
	if (o->store != NULL)
		rc = objstore_url_new(o->store, &db->os);
	else if (env.objstore_new != NULL)
		rc = env.objstore_new(path, &db->os);
	else
		rc = objstore_fs_new(path, &db->os);
	if (rc)
		goto fail;
	/* sync = none syncs nothing: neither the WAL nor the objects. */
	if (o->sync == STRATA_SYNC_NONE && objstore_fs_set_sync(db->os, 0) != 0)
		diag_clear();
	if (objstore_fs_set_read_fds(db->os, o->max_open_object_files) != 0)
		diag_clear(); /* another kind of store: its own business */
	if ((rc = reaper_new(db->os, o->delete_bytes_per_s, o->delete_chunk_bytes, &db->reaper)) != 0)
		goto fail;
	reaper_set_trace(db->reaper, &db->trace);
	if ((rc = ratelimit_new(o->background_io_bytes_per_s, &db->io_limit)) != 0 ||
	    (rc = hist_new(1, STORE_LOCK_HIST_HIGHEST_NS, 2, &db->excl_hold_ns)) != 0 ||
	    (rc = hist_new(1, STORE_LOCK_HIST_HIGHEST_NS, 2, &db->excl_wait_ns)) != 0)
		goto fail;
	if (o->max_open_wal_files != 0 && (rc = wal_fdcache_new(o->max_open_wal_files, &db->wal_fds)) != 0)
		goto fail;
	if (o->block_cache_bytes != 0 && (rc = bcache_new(o->block_cache_bytes, &db->bcache)) != 0)
		goto fail;
	if (o->background_io_auto)
		ratelimit_set_auto(db->io_limit, 1, o->background_io_bytes_per_s);
	/* 3. Read and check every shard before writing anything. */
	if ((rc = store_each_shard(db, STORE_LOAD)) != 0)
		goto fail;
	/* 4. Take ownership: record the shape, claim and fence each shard. */
	if (!have_meta && (rc = store_meta_write(o->dir, nshards, wal_external ? wal_root : NULL,
						 o->sync != STRATA_SYNC_NONE)) != 0)
		goto fail;
	if ((rc = store_each_shard(db, STORE_START)) != 0)
		goto fail;
	/* Temp files of object writes a crash interrupted are never published: every shard is
	 * ours now (older writers fenced), so they can go. */
	uint64_t n = 0, bytes = 0;
	if (objstore_recover(db->os, &n, &bytes) != 0)
		diag_log(LOG_LVL_WARN, "%s: sweeping temp files: %s", path, diag_last());
	if (n > 0)
		diag_log(LOG_LVL_INFO, "%s: removed %llu temp files of interrupted writes (%llu bytes)", path,
			 (unsigned long long)n, (unsigned long long)bytes);
	db->lock = lk;
	db->wal_lock = wal_lk;
	db->made = made;
	db->wal_made = wal_made;
	db->opt.dir = db->dir;
	if (o->sync == STRATA_SYNC_INTERVAL && o->threads != 0 && (rc = store_syncer_start(db)) != 0) {
		store_close_discard(db);
		return rc;
	}
	*out = db;
	return 0;
fail:
	/* A new store goes again: what this open added to the directories (under their locks),
	 * then the directories it created. The WAL root first: it may lie in dir. */
	rc = store_open_failed(rc, o->dir);
	store_close_in(db);
	store_made_finish(&wal_made, &wal_lk);
	store_made_finish(&made, &lk);
	return rc;
}

/** The interval sync of every shard's WAL, every sync_interval_ms. */
static void *
store_syncer_main(void *arg)
{
	struct store *db = arg;
	env_enter(db->env_ops);
	pthread_mutex_lock(&db->syncer_mu);
	while (!db->syncer_stop) {
		struct timespec dl = mono_deadline((uint64_t)db->opt.sync_interval_ms * 1000000ull);
		while (!db->syncer_stop &&
		       pthread_cond_timedwait(&db->syncer_cv, &db->syncer_mu, &dl) != ETIMEDOUT)
			;
		if (db->syncer_stop)
			break;
		pthread_mutex_unlock(&db->syncer_mu);
		for (uint32_t i = 0; i < db->nshards; i++) {
			struct shard *sh = __atomic_load_n(&db->shards[i], __ATOMIC_ACQUIRE);
			if (sh != NULL)
				shard_sync_written(sh);
		}
		pthread_mutex_lock(&db->syncer_mu);
	}
	pthread_mutex_unlock(&db->syncer_mu);
	return NULL;
}

/** Start the interval syncer (STRATA_SYNC_INTERVAL with threads). */
static int
store_syncer_start(struct store *db)
{
	pthread_mutex_init(&db->syncer_mu, NULL);
	mono_cond_init(&db->syncer_cv);
	int e = pthread_create(&db->syncer, NULL, store_syncer_main, db);
	if (e != 0)
		return diag_set(diag_errno(e), "strata_open: cannot start the WAL sync thread: %s",
				strerror(e));
	db->syncer_started = 1;
	return 0;
}

static void
store_syncer_stop(struct store *db)
{
	if (!db->syncer_started)
		return;
	pthread_mutex_lock(&db->syncer_mu);
	db->syncer_stop = 1;
	pthread_cond_broadcast(&db->syncer_cv);
	pthread_mutex_unlock(&db->syncer_mu);
	pthread_join(db->syncer, NULL);
	db->syncer_started = 0;
	pthread_cond_destroy(&db->syncer_cv);
	pthread_mutex_destroy(&db->syncer_mu);
}

static void
store_close_in(struct store *db)
{
	if (db == NULL)
		return;
	store_syncer_stop(db); /* before the shards: it syncs them */
	for (uint32_t i = 0; db->shards != NULL && i < db->nshards; i++)
		shard_close(db->shards[i]);
	for (uint32_t i = 0; i < db->nretired; i++)
		shard_close(db->retired[i]);
	env.free(db->retired);
	pthread_mutex_destroy(&db->claim_mu);
	for (unsigned i = 0; i < STORE_CLAIM_STRIPES; i++)
		pthread_mutex_destroy(&db->claim_io_mu[i]);
	reaper_delete(db->reaper); /* what the shards let go of last, and what was queued */
	wal_fdcache_delete(db->wal_fds);
	bcache_delete(db->bcache); /* after the shards: their readers give back what they reserved */
	ratelimit_delete(db->io_limit);
	hist_delete(db->excl_hold_ns);
	hist_delete(db->excl_wait_ns);
	env.free(db->listener);
	for (uint32_t i = 0; i < db->nold; i++)
		env.free(db->old_listeners[i]);
	env.free(db->old_listeners);
	objstore_destroy(db->os);
	env.free(db->shards);
	if (db->lock.fd >= 0)
		env.close(db->lock.fd); /* the directory is free for the next owner */
	if (db->wal_lock.fd >= 0)
		env.close(db->wal_lock.fd);
	store_made_free(&db->made);
	store_made_free(&db->wal_made);
	env.free(db->dir);
	env.free(db->wal_root);
	trace_destroy(&db->trace);
	env.free(db);
}

static void
store_set_listener_in(struct store *db, const struct store_listener *l, uint64_t memtable_max_bytes)
{
	struct store_listener *copy = NULL;
	if (l != NULL) {
		copy = env.malloc(sizeof(*copy));
		if (copy == NULL) {
			diag_log(LOG_LVL_ERROR, "out of memory installing a store listener");
			return;
		}
		*copy = *l;
	}
	pthread_mutex_lock(&db->claim_mu);
	db->mem_limit = memtable_max_bytes;
	for (uint32_t i = 0; i < db->nshards; i++)
		if (db->shards[i] != NULL)
			shard_set_listener(db->shards[i], copy, memtable_max_bytes);
	if (db->listener != NULL) {
		/* A shard may be inside a callback of the old one: keep it until close. */
		struct store_listener **old = env.realloc(db->old_listeners,
							  (db->nold + 1) * sizeof(*old));
		if (old != NULL) {
			db->old_listeners = old;
			db->old_listeners[db->nold++] = db->listener;
		}
	}
	db->listener = copy;
	pthread_mutex_unlock(&db->claim_mu);
}

void
store_set_memtable_limit(struct store *db, uint64_t memtable_max_bytes)
{
	pthread_mutex_lock(&db->claim_mu);
	db->mem_limit = memtable_max_bytes;
	for (uint32_t i = 0; i < db->nshards; i++)
		if (db->shards[i] != NULL)
			shard_set_memtable_limit(db->shards[i], memtable_max_bytes);
	pthread_mutex_unlock(&db->claim_mu);
}

void
store_set_merge_cap(struct store *db, uint32_t max_inputs)
{
	pthread_mutex_lock(&db->claim_mu);
	db->merge_cap = max_inputs;
	for (uint32_t i = 0; i < db->nshards; i++)
		if (db->shards[i] != NULL)
			shard_set_merge_cap(db->shards[i], max_inputs);
	pthread_mutex_unlock(&db->claim_mu);
}

void
store_set_merge_threads(struct store *db, uint32_t threads)
{
	pthread_mutex_lock(&db->claim_mu);
	db->merge_threads = threads;
	for (uint32_t i = 0; i < db->nshards; i++)
		if (db->shards[i] != NULL)
			shard_set_merge_threads(db->shards[i], threads);
	pthread_mutex_unlock(&db->claim_mu);
}

uint32_t
store_merge_threads_max(const struct store *db)
{
	return store_merge_threads(&db->opt);
}

const strata_options *
store_options(const struct store *db)
{
	return &db->opt;
}

uint32_t
store_shards(const struct store *db)
{
	return db ? db->nshards : 0;
}

static int
shard_of(struct store *db, uint32_t shard, struct shard **s)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	if (shard >= db->nshards)
		return diag_set(STRATA_ERANGE, "shard %u out of range (the store has %u shards)", shard,
				db->nshards);
	*s = __atomic_load_n(&db->shards[shard], __ATOMIC_ACQUIRE);
	if (*s == NULL) {
		const strata_options *o = &db->opt;
		if (o->serve_first == STRATA_SERVE_NONE)
			return diag_set(STRATA_ERANGE, "shard %u is not served by this node (it opened no "
					"shard and has not claimed this one); another node may own it", shard);
		uint32_t last = o->serve_count ? o->serve_first + o->serve_count - 1 : db->nshards - 1;
		return diag_set(STRATA_ERANGE, "shard %u is not served by this node (it serves shards "
				"%u..%u); another node may own it, or claim it here first", shard,
				o->serve_first, last);
	}
	return 0;
}

int
store_check_row(uint64_t max_value_bytes, size_t key_len, size_t value_len)
{
	if (key_len == 0)
		return diag_set(STRATA_EINVAL, "empty key");
	if (key_len > STRATA_MAX_KEY)
		return diag_set(STRATA_ETOOBIG, "key of %zu bytes is over the limit of %u bytes", key_len,
				STRATA_MAX_KEY);
	if (value_len > max_value_bytes)
		return diag_set(STRATA_ETOOBIG, "value of %zu bytes is over the limit of %llu bytes",
				value_len, (unsigned long long)max_value_bytes);
	return 0;
}

/** store_check_row of a row that has pointers too, its message prefixed by what and i. */
static int
check_row_at(const struct store *db, const void *key, size_t klen, const void *val, size_t vlen,
	     const char *what, size_t i)
{
	int rc = store_check_row(db->opt.max_value_bytes, klen, vlen);
	if (rc == 0 && key == NULL)
		rc = diag_set(STRATA_EINVAL, "NULL key");
	if (rc == 0 && val == NULL && vlen > 0)
		rc = diag_set(STRATA_EINVAL, "NULL value");
	if (rc) {
		char why[256];
		snprintf(why, sizeof(why), "%s", diag_last());
		diag_set(rc, "%s %zu: %s", what, i, why);
	}
	return rc;
}

static int
store_append_in(struct store *db, uint32_t shard, const strata_row *rows, size_t n, uint64_t *last_seq)
{
	struct shard *s = NULL;
	int rc = shard_of(db, shard, &s);
	if (rc)
		return rc;
	if (n == 0)
		return 0;
	if (rows == NULL)
		return diag_set(STRATA_EINVAL, "append: NULL rows");
	if (n > UINT32_MAX)
		return diag_set(STRATA_ETOOBIG, "append: %zu rows in one batch", n);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		rc = check_row_at(db, rows[i].key, rows[i].key_len, rows[i].value, rows[i].value_len, "row",
				  i);
		if (rc == 0 && rows[i].kind != STRATA_ROW_PUT && rows[i].kind != STRATA_ROW_DELETE)
			rc = diag_set(STRATA_EINVAL, "row %zu: unknown kind %u (put is %u, delete %u)", i,
				      (unsigned)rows[i].kind, STRATA_ROW_PUT, STRATA_ROW_DELETE);
		if (rc == 0 && rows[i].kind == STRATA_ROW_DELETE && rows[i].value_len > 0)
			rc = diag_set(STRATA_EINVAL, "row %zu: a delete has no value (%zu bytes given)",
				      i, rows[i].value_len);
		if (rc)
			return rc;
		total += rows[i].key_len + rows[i].value_len;
	}
	if (total > (1ull << 30))
		return diag_set(STRATA_ETOOBIG, "append: batch of %llu bytes is over the 1 GiB limit",
				(unsigned long long)total);
	return shard_append(s, rows, n, last_seq);
}

/** store_append of one tombstone per key. */
static int
store_delete_in(struct store *db, uint32_t shard, const void *const *keys, const size_t *key_lens,
		size_t n, uint64_t *last_seq)
{
	if (n > 0 && (keys == NULL || key_lens == NULL))
		return diag_set(STRATA_EINVAL, "delete: NULL keys or key lengths for %zu keys", n);
	if (n > UINT32_MAX)
		return diag_set(STRATA_ETOOBIG, "delete: %zu keys in one batch", n);
	strata_row *rows = env.calloc(n ? n : 1, sizeof(*rows));
	if (rows == NULL)
		return diag_set(STRATA_ENOMEM, "delete: out of memory for %zu keys", n);
	for (size_t i = 0; i < n; i++)
		rows[i] = (strata_row){.key = keys[i], .key_len = key_lens[i],
				       .kind = STRATA_ROW_DELETE};
	int rc = store_append_in(db, shard, rows, n, last_seq);
	env.free(rows);
	return rc;
}

static int
store_get_in(struct store *db, uint32_t shard, const void *key, size_t key_len, void **value, size_t *value_len)
{
	struct shard *s = NULL;
	int rc = shard_of(db, shard, &s);
	if (rc)
		return rc;
	if ((rc = check_row_at(db, key, key_len, "", 0, "get", 0)) != 0)
		return rc;
	if (value == NULL || value_len == NULL)
		return diag_set(STRATA_EINVAL, "get: NULL output pointer");
	return shard_get(s, key, key_len, value, value_len);
}

static int
store_scan_in(struct store *db, uint32_t shard, const void *start, size_t start_len, const void *end,
	    size_t end_len, int (*cb)(void *ctx, const strata_row *row), void *ctx)
{
	struct shard *s = NULL;
	int rc = shard_of(db, shard, &s);
	if (rc)
		return rc;
	if (cb == NULL)
		return diag_set(STRATA_EINVAL, "scan: NULL callback");
	if ((start != NULL && start_len > STRATA_MAX_KEY) || (end != NULL && end_len > STRATA_MAX_KEY))
		return diag_set(STRATA_ETOOBIG, "scan: bound over %u bytes", STRATA_MAX_KEY);
	return shard_scan(s, start, start ? start_len : 0, end, end ? end_len : 0, cb, ctx);
}

static int
store_seal_in(struct store *db, uint32_t shard)
{
	struct shard *s = NULL;
	int rc = shard_of(db, shard, &s);
	return rc ? rc : shard_seal(s);
}

static int
wrap_plan(struct store *db, uint32_t shard, struct shard_plan *p, strata_plan **plan)
{
	strata_plan *sp = env.calloc(1, sizeof(*sp));
	if (sp == NULL) {
		shard_abort(shard_plan_shard(p), p);
		return diag_set(STRATA_ENOMEM, "out of memory wrapping a plan");
	}
	sp->db = db;
	sp->p = p;
	sp->s = shard_plan_shard(p);
	sp->shard = shard;
	*plan = sp;
	return 0;
}

/** The shard a prepare call names, with its plan pointer checked and cleared. */
static int
prepare_shard(struct store *db, uint32_t shard, strata_plan **plan, struct shard **s)
{
	int rc = shard_of(db, shard, s);
	if (rc)
		return rc;
	if (plan == NULL)
		return diag_set(STRATA_EINVAL, "prepare: NULL plan pointer");
	*plan = NULL;
	return 0;
}

static int
store_prepare_merge_in(struct store *db, uint32_t shard, uint32_t max_generations, strata_plan **plan)
{
	struct shard *s = NULL;
	int rc = prepare_shard(db, shard, plan, &s);
	if (rc)
		return rc;
	struct shard_plan *p;
	rc = shard_prepare_merge(s, max_generations, &p);
	return rc ? rc : wrap_plan(db, shard, p, plan);
}

static int
store_prepare_compact_in(struct store *db, uint32_t shard, uint32_t max_runs, strata_plan **plan)
{
	struct shard *s = NULL;
	int rc = prepare_shard(db, shard, plan, &s);
	if (rc)
		return rc;
	struct shard_plan *p;
	rc = shard_prepare_compact(s, max_runs, &p);
	return rc ? rc : wrap_plan(db, shard, p, plan);
}

uint32_t
store_plan_inputs(const strata_plan *plan)
{
	return plan ? shard_plan_inputs(plan->p) : 0;
}

uint32_t
store_plan_shard(const strata_plan *plan)
{
	return plan ? plan->shard : 0;
}

static int
store_commit_in(struct store *db, strata_plan *plan)
{
	if (plan == NULL)
		return diag_set(STRATA_EINVAL, "commit: NULL plan");
	if (plan->db != db) {
		/* Not ours to consume: leave it to the store it came from. */
		return diag_set(STRATA_EINVAL, "commit: the plan belongs to another store");
	}
	int rc = shard_commit(plan->s, plan->p);
	env.free(plan);
	return rc;
}

static void
store_abort_in(struct store *db, strata_plan *plan)
{
	if (plan == NULL)
		return;
	shard_abort(plan->s, plan->p);
	(void)db;
	env.free(plan);
}

static int
store_merge_in(struct store *db, uint32_t shard, uint32_t max_generations, uint32_t *merged)
{
	strata_plan *plan;
	if (merged)
		*merged = 0;
	int rc = store_prepare_merge(db, shard, max_generations, &plan);
	if (rc)
		return rc;
	uint32_t n = store_plan_inputs(plan);
	rc = store_commit(db, plan);
	if (rc == 0 && merged)
		*merged = n;
	return rc;
}

static int
store_shard_stats_in(struct store *db, uint32_t shard, strata_stats *out)
{
	struct shard *s = NULL;
	int rc = shard_of(db, shard, &s);
	if (rc)
		return rc;
	if (out == NULL)
		return diag_set(STRATA_EINVAL, "stats: NULL output");
	shard_stats(s, out);
	return 0;
}

int
store_serves_shard(const struct store *db, uint32_t shard)
{
	return db != NULL && shard < db->nshards &&
	       __atomic_load_n(&((struct store *)db)->shards[shard], __ATOMIC_ACQUIRE) != NULL;
}

/** Take shard over: open it here (claim its epoch in the manifest, put a fence at the next
 *  WAL position, replay), unless this handle owns it already. */
static int
store_claim_in(struct store *db, uint32_t shard)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	if (shard >= db->nshards)
		return diag_set(STRATA_ERANGE, "shard %u out of range (the store has %u shards)", shard,
				db->nshards);
	if (db->opt.wal != STRATA_WAL_STORE && db->opt.store != NULL)
		return diag_set(STRATA_EINVAL, "claim of shard %u: this node keeps its WAL locally (wal = "
				"local), so the rows another node acknowledged and has not sealed are on that "
				"node only; take shards over with wal = store", shard);
	pthread_mutex_lock(&db->claim_io_mu[shard % STORE_CLAIM_STRIPES]);
	struct shard *old = __atomic_load_n(&db->shards[shard], __ATOMIC_ACQUIRE);
	if (old != NULL && !shard_is_fenced(old)) {
		/* Owned as far as this handle knows; an idle one may have been fenced without
		 * hearing of it: ask the epoch object now, and never answer a claim without
		 * owning the shard. */
		int orc = shard_owner_check(old, 0);
		if (orc != STRATA_EFENCED) {
			pthread_mutex_unlock(&db->claim_io_mu[shard % STORE_CLAIM_STRIPES]);
			return orc;
		}
		diag_log(LOG_LVL_INFO, "shard %u: claim: %s; claiming it back", shard, diag_last());
	}
	struct shard_config cfg;
	store_shard_config(db, shard, &cfg);
	struct shard *s = NULL;
	int rc = shard_open(&cfg, &s);
	if (rc == 0) {
		pthread_mutex_lock(&db->claim_mu);
		struct shard **r = old != NULL ? env.realloc(db->retired, (db->nretired + 1) * sizeof(*r))
					       : db->retired;
		if (old != NULL && r == NULL) {
			rc = diag_set(STRATA_ENOMEM, "claim of shard %u: out of memory", shard);
		} else {
			db->retired = r;
			shard_set_listener(s, db->listener, db->mem_limit);
			shard_set_merge_cap(s, db->merge_cap);
			shard_set_merge_threads(s, db->merge_threads);
			__atomic_store_n(&db->shards[shard], s, __ATOMIC_RELEASE);
			if (old != NULL)
				db->retired[db->nretired++] = old;
		}
		pthread_mutex_unlock(&db->claim_mu);
		if (rc)
			shard_close(s);
		else
			diag_log(LOG_LVL_INFO, "shard %u: claimed (epoch %llu)", shard,
				 (unsigned long long)shard_epoch(s));
	}
	pthread_mutex_unlock(&db->claim_io_mu[shard % STORE_CLAIM_STRIPES]);
	return rc;
}

static int
store_checkpoint_in(struct store *db, const char *dir)
{
	if (db->opt.wal == STRATA_WAL_STORE)
		return diag_set(STRATA_EINVAL, "checkpoint: not supported with wal = store (the WAL is on "
				"the object store, not in %s)", db->dir);
	for (uint32_t i = 0; i < db->nshards; i++)
		if (db->shards[i] == NULL)
			return diag_set(STRATA_EINVAL, "checkpoint: shard %u is not open on this handle (a "
					"checkpoint copies every shard)", i);
	return checkpoint_write(db->dir, db->shards, db->nshards, dir);
}

static int
store_check_in(struct store *db, uint32_t shard)
{
	struct shard *s = NULL;
	int rc = shard_of(db, shard, &s);
	return rc ? rc : shard_check(s);
}

const char *
store_strerror(int rc)
{
	switch (rc) {
	case STRATA_OK: return "success";
	case STRATA_NOTFOUND: return "not found";
	case STRATA_EINVAL: return "invalid argument";
	case STRATA_ENOMEM: return "out of memory";
	case STRATA_EIO: return "input/output error";
	case STRATA_ECORRUPT: return "data corruption detected";
	case STRATA_EFENCED: return "fenced: another writer owns the shard";
	case STRATA_ECONFLICT: return "merge plan no longer applies";
	case STRATA_ETOOBIG: return "key or value too large";
	case STRATA_ERANGE: return "shard out of range";
	case STRATA_ENOSPC: return "no space left on device";
	case STRATA_EBUSY: return "resource busy";
	case STRATA_ECLOSED: return "store closed";
	case STRATA_EREADONLY: return "shard is read-only after a WAL sync failure";
	case STRATA_EEXIST: return "object already exists";
	case STRATA_EINJECTED: return "injected failure";
	case STRATA_EVERSION: return "unsupported format version";
	case STRATA_ELOCKED: return "the data directory is in use by another handle or node";
	default: return "unknown result code";
	}
}

/* ---------- entry points: every call runs in the store's environment ----------
 *
 * Each enters db's environment (options.env_ops), calls its _in function above and goes
 * back to the caller's. */

/** The refusal of a call without a store. */
static int
store_none(void)
{
	return diag_set(STRATA_EINVAL, "no store given");
}

/** With nobody running the reaper, the calls that do background work drain it, after
 *  their commit and outside every lock. */
static void
store_reap_if_undriven(struct store *db)
{
	if (!atomic_load(&db->reaper_driven))
		reaper_run(db->reaper, UINT64_MAX);
}

int
store_open(const strata_options *o, struct store **out)
{
	struct env_ops *prev = env_enter(o != NULL ? (struct env_ops *)o->env_ops : NULL);
	int rc = store_open_in(o, out);
	env_leave(prev);
	return rc;
}

void
store_close(struct store *db)
{
	if (db == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	store_close_in(db);
	env_leave(prev);
}

void
store_close_discard(struct store *db)
{
	if (db == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	/* The locks stay held over the removal: the handle lets go of them last. */
	struct store_lock lk = db->lock, wal_lk = db->wal_lock;
	struct store_made made = db->made, wal_made = db->wal_made;
	db->lock.fd = db->wal_lock.fd = -1;
	memset(&db->made, 0, sizeof(db->made));
	memset(&db->wal_made, 0, sizeof(db->wal_made));
	store_close_in(db);
	store_made_finish(&wal_made, &wal_lk);
	store_made_finish(&made, &lk);
	env_leave(prev);
}

void
store_set_listener(struct store *db, const struct store_listener *l, uint64_t memtable_max_bytes)
{
	struct env_ops *prev = env_enter(db->env_ops);
	store_set_listener_in(db, l, memtable_max_bytes);
	env_leave(prev);
}

int
store_append(struct store *db, uint32_t shard, const strata_row *rows, size_t n, uint64_t *last_seq)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_append_in(db, shard, rows, n, last_seq);
	env_leave(prev);
	return rc;
}

int
store_delete(struct store *db, uint32_t shard, const void *const *keys, const size_t *key_lens, size_t n,
	     uint64_t *last_seq)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_delete_in(db, shard, keys, key_lens, n, last_seq);
	env_leave(prev);
	return rc;
}

int
store_get(struct store *db, uint32_t shard, const void *key, size_t key_len, void **value, size_t *value_len)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_get_in(db, shard, key, key_len, value, value_len);
	env_leave(prev);
	return rc;
}

int
store_scan(struct store *db, uint32_t shard, const void *start, size_t start_len, const void *end,
	   size_t end_len, int (*cb)(void *ctx, const strata_row *row), void *ctx)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_scan_in(db, shard, start, start_len, end, end_len, cb, ctx);
	env_leave(prev);
	return rc;
}

int
store_seal(struct store *db, uint32_t shard)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_seal_in(db, shard);
	store_reap_if_undriven(db);
	env_leave(prev);
	return rc;
}

int
store_prepare_merge(struct store *db, uint32_t shard, uint32_t max_generations, strata_plan **plan)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_prepare_merge_in(db, shard, max_generations, plan);
	env_leave(prev);
	return rc;
}

int
store_prepare_compact(struct store *db, uint32_t shard, uint32_t max_runs, strata_plan **plan)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_prepare_compact_in(db, shard, max_runs, plan);
	env_leave(prev);
	return rc;
}

int
store_commit(struct store *db, strata_plan *plan)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_commit_in(db, plan);
	env_leave(prev);
	return rc;
}

void
store_abort(struct store *db, strata_plan *plan)
{
	if (plan == NULL)
		return;
	struct store *owner = plan->db;
	struct env_ops *prev = env_enter(owner->env_ops);
	store_abort_in(db, plan);
	store_reap_if_undriven(owner); /* an abort ends a merge: background work too */
	env_leave(prev);
}

int
store_merge(struct store *db, uint32_t shard, uint32_t max_generations, uint32_t *merged)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_merge_in(db, shard, max_generations, merged);
	store_reap_if_undriven(db);
	env_leave(prev);
	return rc;
}

int
store_shard_stats(struct store *db, uint32_t shard, strata_stats *out)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_shard_stats_in(db, shard, out);
	env_leave(prev);
	return rc;
}

int
store_check(struct store *db, uint32_t shard)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_check_in(db, shard);
	env_leave(prev);
	return rc;
}

int
store_checkpoint(struct store *db, const char *dir)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_checkpoint_in(db, dir);
	env_leave(prev);
	return rc;
}

int
store_release(struct store *db, uint32_t shard, const char *why)
{
	if (db == NULL)
		return store_none();
	if (shard >= db->nshards)
		return diag_set(STRATA_ERANGE, "shard %u out of range (the store has %u shards)", shard,
				db->nshards);
	struct env_ops *prev = env_enter(db->env_ops);
	pthread_mutex_lock(&db->claim_io_mu[shard % STORE_CLAIM_STRIPES]);
	int rc = 0;
	struct shard *old = __atomic_load_n(&db->shards[shard], __ATOMIC_ACQUIRE);
	if (old != NULL) {
		pthread_mutex_lock(&db->claim_mu);
		struct shard **r = env.realloc(db->retired, (db->nretired + 1) * sizeof(*r));
		if (r == NULL) {
			rc = diag_set(STRATA_ENOMEM, "release of shard %u: out of memory", shard);
		} else {
			/* Fenced first: an operation that loaded the pointer before it went answers
			 * STRATA_EFENCED; the shard object lives on (retired) until the close. */
			shard_fence_local(old, why != NULL ? why : "released by this node");
			db->retired = r;
			db->retired[db->nretired++] = old;
			__atomic_store_n(&db->shards[shard], NULL, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&db->claim_mu);
		if (rc == 0)
			diag_log(LOG_LVL_INFO, "shard %u: released (%s)", shard, why != NULL ? why : "by this node");
	}
	pthread_mutex_unlock(&db->claim_io_mu[shard % STORE_CLAIM_STRIPES]);
	env_leave(prev);
	return rc;
}

int
store_claim(struct store *db, uint32_t shard)
{
	if (db == NULL)
		return store_none();
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = store_claim_in(db, shard);
	env_leave(prev);
	return rc;
}

uint64_t
store_reap(struct store *db, uint64_t max_wait_ns)
{
	struct env_ops *prev = env_enter(db->env_ops);
	uint64_t n = reaper_run(db->reaper, max_wait_ns);
	env_leave(prev);
	return n;
}

void
store_sync_written(struct store *db)
{
	struct env_ops *prev = env_enter(db->env_ops);
	for (uint32_t i = 0; i < db->nshards; i++) {
		struct shard *sh = __atomic_load_n(&db->shards[i], __ATOMIC_ACQUIRE);
		if (sh != NULL)
			shard_sync_written(sh);
	}
	env_leave(prev);
}

/* ---------- settings and figures: no IO, any thread ---------- */

struct objstore *
store_objstore(struct store *db)
{
	return db->os;
}

void
store_lock_hists(struct store *db, const struct hist **hold_ns, const struct hist **wait_ns)
{
	*hold_ns = db->excl_hold_ns;
	*wait_ns = db->excl_wait_ns;
}

void
store_reaper_stats(struct store *db, uint64_t *pending, uint64_t *pending_bytes, uint64_t *deleted,
		   uint64_t *deleted_bytes)
{
	reaper_stats(db->reaper, pending, pending_bytes, deleted, deleted_bytes);
}

void
store_set_io_rate(struct store *db, uint64_t bytes_per_s)
{
	ratelimit_set(db->io_limit, bytes_per_s);
}

void
store_set_io_auto(struct store *db, uint64_t ceiling)
{
	ratelimit_set_auto(db->io_limit, 1, ceiling);
}

void
store_set_reaper_kick(struct store *db, void (*kick)(void *ctx), void *ctx)
{
	atomic_store(&db->reaper_driven, kick != NULL);
	reaper_set_kick(db->reaper, kick, ctx);
}

void
store_set_delete_rate(struct store *db, uint64_t bytes_per_s)
{
	reaper_set_rate(db->reaper, bytes_per_s);
}

struct trace *
store_trace(struct store *db)
{
	return &db->trace;
}
