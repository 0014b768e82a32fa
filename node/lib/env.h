/*
 * env.h — the seams. Every clock read, file syscall, allocation, random number, log
 * line, object store and test point of the engine goes through the table `env`.
 *
 * `env` is the calling thread's current table: the process default (env_default,
 * which tests replace member by member) unless the thread entered another one. A
 * store opened with options.env_ops enters its table in every call it serves, and
 * the threads a store or its host start run with the table of the thread that
 * created them; so two stores in one process can live in different environments
 * (a simulation of several nodes).
 */
#ifndef STRATA_ENV_H
#define STRATA_ENV_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct objstore;

/** The replaceable operations. Each member has the signature of its libc namesake. A
 *  table given to a store is complete: start from a copy of env_default. */
struct env_ops {
	/** Monotonic clock, nanoseconds. */
	uint64_t (*mono_ns)(void);
	/** Wall clock, nanoseconds since the Unix epoch. */
	uint64_t (*wall_ns)(void);
	int (*open)(const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*fstat)(int fd, struct stat *st);
	/** lstat(2): what a listing learns of each entry without opening it (NULL: open,
	 *  fstat and close it instead — a table that replaces open should replace both). */
	int (*lstat)(const char *path, struct stat *st);
	int (*rename)(const char *from, const char *to);
	int (*link)(const char *from, const char *to);
	int (*unlink)(const char *path);
	int (*mkdir)(const char *path, mode_t mode);
	/** Remove an empty directory (a checkpoint that failed midway cleans up with it). */
	int (*rmdir)(const char *path);
	/** Advisory lock of a whole file (flock(2)): how a store owns its directory. */
	int (*flock)(int fd, int op);
	DIR *(*opendir)(const char *path);
	struct dirent *(*readdir)(DIR *d);
	int (*closedir)(DIR *d);
	void *(*malloc)(size_t n);
	void *(*calloc)(size_t n, size_t size);
	void *(*realloc)(void *p, size_t n);
	void (*free)(void *p);
	/** Where diag_log lines go (NULL: diag_log_sink, the process's). */
	void (*log)(int level, const char *msg);
	/** CPU time of the calling thread, ns: what policy hook budgets are measured in
	 *  (NULL: CLOCK_THREAD_CPUTIME_ID through policy_cpu_ns). */
	uint64_t (*cpu_ns)(void);
	/** A random 64-bit number (NULL: a per-thread xorshift). Memtable tower heights
	 *  draw from it; a seeded source makes them reproducible. */
	uint64_t (*random)(void);
	/** Open the object store of a data directory's objects/ (NULL: the local-directory
	 *  store, objstore_fs_new). */
	int (*objstore_new)(const char *dir, struct objstore **out);
	/** sync_file_range(2): start, or wait for, the writeback of a byte range of a file;
	 *  makes nothing durable. The fs object store's incremental writeback of run files
	 *  (NULL: none). */
	int (*sync_file_range)(int fd, off_t off, off_t n, unsigned int flags);
	/** Test point, called at named places in the engine (ENV_POINTS below). It may
	 *  block (to pause an operation) or _exit (to crash there). Returning nonzero makes
	 *  the operation fail at that point with STRATA_EINJECTED through its normal error
	 *  path. NULL = no points. */
	int (*point)(const char *name, const void *arg);
	/** getpid(2): the id a store writes into its LOCK file (NULL: getpid). A simulation
	 *  returns a constant, so that its file contents do not depend on the process. */
	pid_t (*getpid)(void);
};

/** The process default table. Tests may overwrite members before starting the engine. */
extern struct env_ops env_default;
/** The table the calling thread entered (NULL: env_default). */
extern __thread struct env_ops *env_tls;

/** The calling thread's current table. */
static inline struct env_ops *
env_current(void)
{
	return env_tls != NULL ? env_tls : &env_default;
}

/** The current table, as an lvalue: env.open(...), env.point = f. */
#define env (*env_current())

/** Make e (NULL: the default) current on this thread; returns the previous one. */
static inline struct env_ops *
env_enter(struct env_ops *e)
{
	struct env_ops *prev = env_tls;
	env_tls = e;
	return prev;
}

/** Go back to the table env_enter returned. */
static inline void
env_leave(struct env_ops *prev)
{
	env_tls = prev;
}

/** Restore the libc defaults. */
void env_reset(void);

/** mkdir -p through env.mkdir, syncing the parent of every directory it creates (so
 *  that the new entry survives a power loss): 0, or the mapped code with a message
 *  naming the component that could not be created or synced. */
int env_mkdir_p(const char *path);
/** env_mkdir_p that also tells what it created: first (cap bytes) gets the outermost
 *  directory of path it created, "" when path existed (also after a failure: what was
 *  created before it stays, for the caller to remove). */
int env_mkdir_p_new(const char *path, char *first, size_t cap);

/** A copy of s in memory from env.malloc (release it with env.free); NULL when out of
 *  memory. */
char *env_strdup(const char *s);

/** env.pread until n bytes, end of file or an error: retries EINTR and completes short
 *  reads. The bytes read, or -1 with errno set. */
ssize_t env_pread_full(int fd, void *buf, size_t n, off_t off);

/*
 * ENV_POINTS(X) — the test points, once: X(ID, "name", arg, what). The engine calls
 * env_point(ENV_POINT_ID, arg); env.point receives the name. A misspelt id does not
 * compile, and tests check the names they arm with env_point_lookup.
 */
#define ENV_POINTS(X)                                                                              \
	X(APPEND_DURABLE, "append.durable", "shard*",                                                 \
	  "an append's rows are durable, not yet in the memtable")                                    \
	X(SEAL_WAITING, "seal.waiting", "shard*", "a flush waits for in-flight appends of its memtable") \
	X(APPEND_INSERTED, "append.inserted", "shard*",                                               \
	  "an append's rows are durable and in the memtable, not yet acknowledged")                   \
	X(SEAL_SWAPPED, "seal.swapped", "shard*", "active memtable sealed, nothing flushed yet")       \
	X(SEAL_FLUSHED, "seal.flushed", "shard*", "generation object written, manifest not updated")   \
	X(SEAL_PUBLISHED, "seal.published", "shard*", "manifest updated and view swapped")             \
	X(PREPARE_SEALED, "prepare.sealed", "shard*", "prepare's seal done, manifest not yet read")    \
	X(PREPARE_BLOCK, "prepare.block", "shard*", "prepare wrote one output block (mid-IO)")         \
	X(PREPARE_RUN_WRITTEN, "prepare.run_written", "shard*",                                       \
	  "the new run is complete in the object store")                                              \
	X(COMMIT_MANIFEST_UPDATED, "commit.manifest_updated", "shard*",                               \
	  "manifest written, view not yet swapped")                                                   \
	X(COMMIT_SWAPPED, "commit.swapped", "shard*", "view swapped, exclusive lock released")         \
	X(COMMIT_BEFORE_DELETE, "commit.before_delete", "shard*", "about to delete the merged objects") \
	X(WAL_BEFORE_SYNC, "wal.before_sync", "wal*", "group commit written, fdatasync not yet called") \
	X(MANIFEST_BEFORE_APPEND, "manifest.before_append", "manifest*",                              \
	  "a manifest log entry is encoded from what was read, not yet put")                          \
	X(MANIFEST_APPENDED, "manifest.appended", "manifest*",                                        \
	  "a manifest log entry is put and checked, no snapshot yet (nonzero: none this time)")       \
	X(MANIFEST_SNAPSHOT_WRITTEN, "manifest.snapshot_written", "manifest*",                        \
	  "a manifest snapshot is put, the log behind it not yet collected (nonzero: not now)")       \
	X(WAL_BEFORE_ACK, "wal.before_ack", "wal*", "group commit written and synced, fence not read")

/** Ids of the test points. */
enum env_point_id {
#define ENV_POINT_ENUM(id, name, arg, what) ENV_POINT_##id,
	ENV_POINTS(ENV_POINT_ENUM)
#undef ENV_POINT_ENUM
	ENV_POINT_COUNT
};

/** Names of the test points, by id. */
extern const char *const env_point_names[ENV_POINT_COUNT];

/** The id of a test point's name, or -1 when there is no such point. */
int env_point_lookup(const char *name);

/** Call env.point with the point's name if set; 0 when unset. */
static inline int
env_point(enum env_point_id id, const void *arg)
{
	return env.point != NULL ? env.point(env_point_names[id], arg) : 0;
}

#endif
