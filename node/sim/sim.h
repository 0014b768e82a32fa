/*
 * sim.h — deterministic simulation of a store (`strata sim`). One thread, a simulated
 * file system and object store in an env table (node/lib/env.h) with seeded faults
 * (EIO, ENOSPC, torn writes, power loss at any IO or test point, object-store errors
 * and latency), a seeded workload and a model that checks the store after every
 * operation and every reopen.
 *
 *   sim_fs    the in-memory file system as an env_ops table (sim_fs.c)
 *   sim_run   one seed: workload, faults, model, checks (sim_run.c)
 */
#ifndef STRATA_SIM_H
#define STRATA_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../lib/env.h"

struct sim_fs;

/** Engine bugs the sim can plant through its seams, to show that it finds them. */
enum {
	/** None. */
	SIM_BUG_NONE = 0,
	/** WAL fdatasync reports success without making anything durable (as if the
	 *  engine acknowledged appends before syncing the WAL). */
	SIM_BUG_WAL_NOSYNC = 1,
	/** The fsync of a seal's generation file reports success without making it
	 *  durable (as if a seal published a generation it never synced). */
	SIM_BUG_GEN_NOSYNC = 2,
};

/** What --strict adds (sim_config.strict, a mask): faults the engine does not survive yet. */
enum {
	/** Failed directory opens and fsyncs. */
	SIM_STRICT_DIRS = 1,
	/** Unsynced tails that survive a power loss in part (as with TAILS) and end in zeros. */
	SIM_STRICT_ZEROS = 2,
	/** A failed test point between a commit's manifest write and its view swap. */
	SIM_STRICT_COMMIT_POINT = 4,
	/** A clean reopen (not a power loss) after a failed append; unsynced tails survive in
	 *  part as with TAILS, since the torn entry a later power loss leaves is how it fails. */
	SIM_STRICT_REOPEN = 8,
	/** A prefix of an unsynced tail survives a power loss (else it is lost whole). */
	SIM_STRICT_TAILS = 16,
	/** All of them. */
	SIM_STRICT_ALL = 31,
};

/** Fault rates of the simulated file system and object store, per million calls. */
struct sim_faults {
	/** A file call fails with EIO. */
	uint32_t eio_ppm;
	/** A write-like file call fails with ENOSPC. */
	uint32_t enospc_ppm;
	/** A pwrite writes a prefix of its bytes, then fails with EIO. */
	uint32_t torn_ppm;
	/** A test point fails its operation (STRATA_EINJECTED). */
	uint32_t point_ppm;
	/** An object-store call fails with STRATA_EIO (before doing anything). */
	uint32_t os_error_ppm;
	/** An object-store call takes up to this much simulated time, ns. */
	uint64_t os_latency_ns;
	/** At power loss, a prefix of an unsynced file tail survives (as on ext4 with
	 *  data=ordered). */
	uint32_t tail_survives_ppm;
	/** And the size may have grown to a block boundary before the data landed, so
	 *  the tail ends in zeros (XFS, ext4 data=writeback). */
	int zero_tails;
	/** Faults also hit directory opens and directory fsyncs. */
	int dir_faults;
	/** Test-point failures also at commit.manifest_updated. */
	int commit_point_faults;
};

/* ---------- the simulated file system ---------- */

/** A new, empty file system (only "/"), faults off; it becomes the calling thread's
 *  (one at a time per thread: the env calls find it there). NULL when out of memory. */
struct sim_fs *sim_fs_new(uint64_t seed);
/** Free everything. Safe on NULL. */
void sim_fs_delete(struct sim_fs *fs);
/** The env table of fs: a complete table (options.env_ops) whose calls act on fs. */
struct env_ops *sim_fs_env(struct sim_fs *fs);
/** Set the fault rates (all zero: no faults). */
void sim_fs_set_faults(struct sim_fs *fs, const struct sim_faults *f);
/** Plant an engine bug (SIM_BUG_*). */
void sim_fs_set_bug(struct sim_fs *fs, int bug);
/** Print every file call to f (NULL: stop). */
void sim_fs_set_log(struct sim_fs *fs, FILE *f);
/** Suspend faults and armed crashes (on nonzero; calls nest) or resume them: for the
 *  sim's own verification reads. */
void sim_fs_quiet(struct sim_fs *fs, int on);
/** Crash (power loss) at the n-th file call or test point from now (0: disarm). */
void sim_fs_arm_crash(struct sim_fs *fs, uint64_t n);
/** Power loss now: every file back to its last sync, every directory to its last
 *  directory sync, unsynced tails torn, every descriptor gone; then every call fails
 *  (the process is dead) until sim_fs_revive. */
void sim_fs_power_loss(struct sim_fs *fs);
/** Nonzero once a power loss happened and before sim_fs_revive. */
int sim_fs_dead(const struct sim_fs *fs);
/** The next process starts: calls work again. */
void sim_fs_revive(struct sim_fs *fs);
/** The simulated monotonic clock, ns; sim_fs_advance moves it forward. */
uint64_t sim_fs_now(const struct sim_fs *fs);
void sim_fs_advance(struct sim_fs *fs, uint64_t ns);
/** Fold an event of the caller's (an operation and its result) into the trace hash. */
void sim_fs_trace(struct sim_fs *fs, const char *what, int64_t a, int64_t b);
/** Hash of every event so far: each file call with its canonical path, arguments,
 *  result and written bytes, each object-store call, each sim_fs_trace. */
uint64_t sim_fs_trace_hash(const struct sim_fs *fs);
/** Checksum of the file tree as it stands (names, kinds and contents, in name order). */
uint64_t sim_fs_tree_hash(const struct sim_fs *fs);
/** Temp files (".tmp." names) anywhere under path. */
unsigned sim_fs_count_tmp(const struct sim_fs *fs, const char *path);
/** Counters. */
struct sim_fs_stats {
	/** File calls made. */
	uint64_t calls;
	/** Faults injected: EIO, ENOSPC, torn writes, failed test points, object-store errors. */
	uint64_t eio, enospc, torn, points_failed, os_errors;
	/** Power losses. */
	uint64_t power_losses;
	/** Unsynced tails that survived a power loss in part. */
	uint64_t tails_torn;
	/** Times a planted bug fired (a sync skipped). */
	uint64_t bug_fired;
};
void sim_fs_stats(const struct sim_fs *fs, struct sim_fs_stats *out);

/**
 * A cost model of the simulated disk and object store (sim_fs_set_model): what each file
 * call and each object-store request would cost in time on the hardware it describes, summed
 * in sim_fs_io_stats.model_ns. It costs nothing in the simulation itself; a caller meters
 * work with it (node/sim/replay.c charges each chunk of background work the modelled time of
 * the IO it made). The model is serial: one request at a time, CPU and IO never overlap, the
 * page cache never hits. Zero members cost nothing.
 */
struct sim_model {
	/** Sequential read and write bandwidth of the disk, MiB/s. */
	double disk_read_mib_s, disk_write_mib_s;
	/** Each pread and pwrite call, ns (seek, queue, the syscall). */
	uint64_t disk_op_ns;
	/** Each fsync and fdatasync, ns. */
	uint64_t disk_sync_ns;
	/** The objects live on a remote store: their requests cost the store's figures below and
	 *  none of the disk's (else the objects are files on the disk). */
	int store_remote;
	/** A streamed write is sent in parts of this many bytes (0: 8 MiB), as the Azure and S3
	 *  stores do; a write of one part is one put. */
	uint64_t store_part_bytes;
	/** A multipart write's extra requests besides its parts (Azure: 1, the block list; S3:
	 *  2, create and complete). */
	uint32_t store_commit_requests;
	/** Time to the first byte of a read request and of a write request, ns. */
	uint64_t store_read_ns, store_write_ns;
	/** Payload bandwidth of one request, MiB/s. */
	double store_mib_s;
	/** Background CPU: bytes written (to the disk or the store) per second of encoding,
	 *  MiB/s (merging, compressing, checksumming). */
	double cpu_mib_s;
};
/** Object-store requests by kind, as a remote store would send them. */
enum sim_os_kind {
	SIM_OS_GET,    /**< a whole or ranged read */
	SIM_OS_HEAD,   /**< a size */
	SIM_OS_PUT,    /**< a write of one request (put, put_if_absent, a one-part stream) */
	SIM_OS_PART,   /**< a part of a streamed write */
	SIM_OS_COMMIT, /**< a streamed write's closing requests */
	SIM_OS_LIST,   /**< a page of a listing (1000 keys) */
	SIM_OS_DELETE, /**< a delete (one per key) */
	SIM_OS_KINDS
};
/** The kind's name ("get", "head", "put", "part", "commit", "list", "delete"). */
const char *sim_os_kind_name(int kind);
/** IO counters and the model's time. */
struct sim_io_stats {
	/** Disk calls and bytes (object files included unless the model says remote). */
	uint64_t disk_reads, disk_read_bytes, disk_writes, disk_write_bytes, disk_syncs;
	/** Object-store requests by enum sim_os_kind, and their payload bytes. */
	uint64_t os_requests[SIM_OS_KINDS];
	uint64_t os_read_bytes, os_write_bytes;
	/** The model's time of everything so far, ns. */
	uint64_t model_ns;
};
/** Keep no durable copy of anything (a replay, which never loses power): syncs copy nothing,
 *  and sim_fs_power_loss must not be called. */
void sim_fs_set_volatile(struct sim_fs *fs);
/** Set the cost model (NULL: none, everything free). Counters run either way. */
void sim_fs_set_model(struct sim_fs *fs, const struct sim_model *m);
void sim_fs_io_stats(const struct sim_fs *fs, struct sim_io_stats *out);
/** Faults injected so far, of every kind but power loss. */
uint64_t sim_fs_faults(const struct sim_fs *fs);
/** A PRNG draw of fs's own stream (fault decisions), below n (n > 0). */
uint64_t sim_fs_rand(struct sim_fs *fs, uint64_t n);

/* ---------- one run ---------- */

/** What to run. */
struct sim_config {
	/** The seed: workload, faults and engine random source all derive from it. */
	uint64_t seed;
	/** Operations of the workload. */
	uint32_t steps;
	/** A policy file reloaded now and then (NULL: none). */
	const char *policy;
	/** SIM_BUG_*. */
	int bug;
	/** Faults the engine is known not to survive yet (SIM_STRICT_*; tests/README.md, "Simulation"). */
	int strict;
	/** Print every operation as it runs (to stderr); 2: every file call too. */
	int verbose;
	/** Keep the log of operations (for printing a failing prefix). */
	int keep_log;
};

/** What a run did and found. */
struct sim_result {
	/** 0 when every check passed. */
	int failed;
	/** The step at which the first check failed (0-based; steps when at the final check). */
	uint32_t fail_step;
	/** The first failure, with context. */
	char why[1024];
	/** Operations run, by kind, and totals. */
	uint64_t ops, appends, rows, gets, scans, seals, merges, compactions, aborts, reloads;
	uint64_t checkpoints, crashes, reopens, failed_ops, checks;
	/** The engine's trace: strata_trace_hash of every handle of the run, folded in order. */
	uint64_t trace_hash;
	/** Engine events hashed. */
	uint64_t trace_events;
	/** Hash of the sim's own events: every file and object-store call (canonical path,
	 *  arguments, result, written bytes), every operation and its result. */
	uint64_t io_hash;
	/** strata_step calls, and chunks of background work they ran. */
	uint64_t steps_run, chunks;
	/** Checksum of the final file tree after the last clean close. */
	uint64_t tree_hash;
	/** Temp files (".tmp.") left in the tree at the end: the fs object store sweeps them
	 *  at open with lstat(2), which bypasses env, so in the sim they stay. */
	unsigned tmp_left;
	/** Simulated time at the end, ns. */
	uint64_t sim_ns;
	/** Counters of the file system. */
	struct sim_fs_stats fs;
	/** With keep_log: one line per operation, "step N: ..." (malloc'd; free it). */
	char *log;
	/** Length of log. */
	size_t log_len;
};

/** Run one seed. Returns 0 when it ran (failed or not: see r->failed), or a negative
 *  code when it could not run at all (out of memory, a bad policy file). */
int sim_run(const struct sim_config *c, struct sim_result *r);

#endif
