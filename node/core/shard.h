/*
 * shard.h — one shard: an independent LSM with its own WAL, memtables,
 * generations, base runs, manifest and locks.
 *
 * Locks (enforced here; the order and the rules: node/core/DESIGN.md, "Locks"):
 *   rw (shared)     append's position assignment; get/scan, seal and prepare
 *                   take it just long enough to pin a refcounted view, and
 *                   work from that pinned view (their "shared hold") without
 *                   ever blocking the exclusive swap or an append;
 *   rw (exclusive)  swapping the view (seal's memtable switch, publishing a
 *                   generation, committing a merge): O(1) work, no IO;
 *                   writer-preferring, so a swap never starves;
 *   manifest_mu     every manifest update (seal, commit); appends never take it;
 *   seal_mu         one seal/flush at a time.
 */
#ifndef STRATA_SHARD_H
#define STRATA_SHARD_H

#include <stdint.h>

#include "../objstore/objstore.h"
#include "../strata_types.h"
#include "manifest.h"
#include "run.h"

struct shard;
struct shard_plan;
struct reaper;
struct trace;
struct wal_fdcache;
struct bcache;

/** What a shard needs from its store. */
struct shard_config {
	/** The store's object store (shared by all shards). */
	struct objstore *os;
	/** Shard number. */
	uint32_t id;
	/** Directory of this shard's WAL segments. */
	char wal_dir[4096];
	/** Object key prefix of this shard ("shard-0000/"). */
	char prefix[32];
	/** The WAL is objects under prefix + "wal/" on os (wal = store), not files in wal_dir. */
	int wal_store;
	/** wal = local (on any store, the fs store included): refuse to open while WAL objects
	 *  on the store hold rows after the cursor (the shard was written with wal = store). */
	int wal_check_store;
	/** WAL sync mode and interval. */
	int sync;
	uint32_t sync_interval_ms;
	/** WAL segment roll size. */
	uint64_t wal_segment_bytes;
	/** Largest value accepted. */
	uint64_t max_value_bytes;
	/** Run-file writer settings. */
	struct run_writer_options run;
	/** Bloom bits per key of the generations seals write (RUN_BLOOM_DISABLED: none). */
	uint32_t gen_bloom_bits_per_key;
	/** Manifest versions kept behind the current one. */
	uint32_t manifest_keep;
	/** When the manifest log puts snapshots, and what it keeps. */
	struct manifest_opts manifest;
	/** Most inputs one merge or compaction pass folds (>= 2). */
	uint32_t merge_max_inputs;
	/** Threads a merge or compaction pass writes its run on (run_writer_options.threads;
	 *  0 or 1: the pass's own alone). */
	uint32_t merge_threads;
	/** A pass with merge_threads > 1 splits its key range into up to merge_threads parts
	 *  of at least this many input bytes each, written at once (0: never split). */
	uint64_t merge_min_part_bytes;
	/** With wal_store: a get or scan is served only while a read of the epoch object at
	 *  most this old found this writer the owner; older, it reads the object first
	 *  (strata_options.owner_check_ms; 0: every read). */
	uint64_t owner_check_ns;
	/** Where objects the manifest no longer names go to be deleted (the store's). */
	struct reaper *reaper;
	/** The store's budget of open WAL descriptors (NULL: none). */
	struct wal_fdcache *wal_fds;
	/** Longest a group commit waits for the previous group's writers, us (0: never). */
	uint32_t group_commit_wait_us;
	/** Memtables grow in huge-page chunks (strata_options.memtable_huge_pages). */
	int memtable_huge_pages;
	/** A replay of a large WAL may start a thread that faults the memtable in ahead of
	 *  it (mem_prefault_start); 0 in inline mode, which starts no threads. */
	int replay_prefault;
	/** Rows WAL replay sorts and links at a time (strata_options.replay_batch_rows; 0 =
	 *  one insert per row). */
	uint32_t replay_batch_rows;
	/** STRATA_SYNC_INTERVAL without a WAL thread: the store calls shard_sync_written. */
	int external_sync;
	/** The store's event trace. */
	struct trace *trace;
	/** The store's block cache, shared by its shards (NULL: none). */
	struct bcache *bcache;
	/** Holds of the exclusive lock, ns (the store's, shared by its shards; NULL: none). */
	struct hist *excl_hold_ns;
	/** Waits to take the exclusive lock, ns (the store's; NULL: none). */
	struct hist *excl_wait_ns;
};

/** Load a shard, writing nothing: read its manifest, open (and so check) every table it
 *  names, validate its WAL and replay it into a memtable. The shard serves nothing until
 *  shard_start; shard_close discards it. */
int shard_load(const struct shard_config *cfg, struct shard **out);
/** Open a shard as an external compactor does (strata compact): read its manifest and
 *  open its tables, without its WAL, without claiming the epoch and without writing
 *  anything. Such a handle only prepares (a merge seals nothing), commits and aborts:
 *  its commits carry the writer's current epoch unchanged (a newer epoch than the one
 *  it read refuses the commit, STRATA_EFENCED, and the handle adopts it at its next
 *  shard_refresh; it is never terminal), its runs take MANIFEST_EXTERNAL_ID ids, and it
 *  never deletes what it merged: the writer does, once it sees the new version.
  STRATA_EINVAL when the shard has no manifest yet. */
int shard_load_external(const struct shard_config *cfg, struct shard **out);
/** Bring the handle's manifest and view up to the newest version in the store: a newer
 *  version of the same epoch (an external compactor's commit) is adopted; a newer epoch
 *  fences a writer (STRATA_EFENCED) and is adopted by a compactor's handle. */
int shard_refresh(struct shard *s);
/** Manifest versions this handle found written by someone else and followed. */
uint64_t shard_foreign_versions(struct shard *s);
/** Take ownership of a loaded shard: claim its epoch (reloading first if the manifest
 *  moved since shard_load), fence the WAL's older writers and catch up with what they
 *  wrote, check no newer owner appeared, then collect orphans. */
int shard_start(struct shard *s);
/** shard_load then shard_start. */
int shard_open(const struct shard_config *cfg, struct shard **out);
/** Whether this writer learned that a newer owner claimed the shard (terminal). */
int shard_is_fenced(struct shard *s);
/** Make the shard terminal on this handle without a newer owner (a release): every later
 *  append, read, seal and merge on it answers STRATA_EFENCED with why. */
void shard_fence_local(struct shard *s, const char *why);
/** 0 while this handle still owns the shard, as a read of the WAL's epoch object at most
 *  max_age_ns old found (0: read it now); STRATA_EFENCED (and the shard fenced) when a
 *  newer owner took it; another code when ownership cannot be confirmed. 0 with a local
 *  WAL. Any thread. */
int shard_owner_check(struct shard *s, uint64_t max_age_ns);
/** The epoch this writer owns the shard with. */
uint64_t shard_epoch(struct shard *s);
/** Sync the WAL and free everything. Sealed-but-unflushed rows stay in the WAL. */
void shard_close(struct shard *s);
int shard_append(struct shard *s, const strata_row *rows, size_t n, uint64_t *last_seq);
int shard_get(struct shard *s, const void *key, size_t klen, void **val, size_t *vlen);
/** What the calling thread's last shard_get looked at: the flushed tables (generations and
 *  base runs) it considered, and those it handed to the run reader (a generation's resident
 *  probe had not ruled the key out; a base run's filter is checked inside the reader). Both 0
 *  when a memtable answered. */
struct shard_get_cost {
	uint32_t tables, searched;
};
struct shard_get_cost shard_last_get_cost(void);
int shard_scan(struct shard *s, const void *start, size_t start_len, const void *end, size_t end_len,
	       int (*cb)(void *ctx, const strata_row *row), void *ctx);
int shard_seal(struct shard *s);
/** Seal, then merge the oldest max_gens generations (0 = all) into a new run. */
int shard_prepare_merge(struct shard *s, uint32_t max_gens, struct shard_plan **out);
/** Fold the oldest max_runs base runs (0 = all) into one run. */
int shard_prepare_compact(struct shard *s, uint32_t max_runs, struct shard_plan **out);
/** Publish a plan (consumes it). STRATA_ECONFLICT if it no longer applies. */
int shard_commit(struct shard *s, struct shard_plan *p);
/** Drop a plan and delete its run (consumes it). */
void shard_abort(struct shard *s, struct shard_plan *p);
/** Generations (or runs, for a compaction) a plan folds. */
uint32_t shard_plan_inputs(const struct shard_plan *p);
/** The shard a plan belongs to. */
struct shard *shard_plan_shard(const struct shard_plan *p);
void shard_stats(struct shard *s, strata_stats *out);
struct store_listener;
/** Install the store's listener (NULL = none) and memtable size limit (0 = none). The
 *  listener must stay valid until the shard closes or another one is installed. */
void shard_set_listener(struct shard *s, const struct store_listener *l, uint64_t memtable_max_bytes);
void shard_set_memtable_limit(struct shard *s, uint64_t memtable_max_bytes);
/** Narrow the per-pass input cap (0 = the configured merge_max_inputs; a larger value
 *  than that is clamped to it). */
void shard_set_merge_cap(struct shard *s, uint32_t max_inputs);
/** Narrow the threads of a merge or compaction pass (0 = the configured merge_threads; a
 *  larger value than that is clamped to it). The next pass takes it. */
void shard_set_merge_threads(struct shard *s, uint32_t threads);
/** Walk the shard's invariants (view vs manifest, ordering); 0 or STRATA_ECORRUPT with a message. */
int shard_check(struct shard *s);
/** STRATA_SYNC_INTERVAL's periodic sync of the WAL, for a shard opened with
 *  external_sync. */
void shard_sync_written(struct shard *s);

#endif
