/*
 * strata_types.h — the vocabulary of strata: result codes, sync modes, rows, options
 * and statistics. The public API (strata.h) and every layer below it (lib, core)
 * include this header; none of them includes strata.h.
 */
#ifndef STRATA_TYPES_H
#define STRATA_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION "0.1.0"

/** Result codes. 0 is success; STRATA_NOTFOUND is the only positive code. */
enum {
	STRATA_OK = 0,
	STRATA_NOTFOUND = 1,   /**< get: no row for that key */
	STRATA_EINVAL = -1,    /**< bad argument: NULL data, empty key, bad option */
	STRATA_ENOMEM = -2,    /**< allocation failed */
	STRATA_EIO = -3,       /**< a file or object-store operation failed */
	STRATA_ECORRUPT = -4,  /**< a checksum or format check failed; the message names the file */
	STRATA_EFENCED = -5,   /**< another writer claimed a newer epoch for this shard: this
				    handle no longer owns it; no append on it succeeds again */
	STRATA_ECONFLICT = -6, /**< a merge plan no longer applies (its generations are gone) */
	STRATA_ETOOBIG = -7,   /**< key over 4 KiB or value over the configured maximum */
	STRATA_ERANGE = -8,    /**< shard number out of range */
	STRATA_ENOSPC = -9,    /**< no space left on the device */
	STRATA_EBUSY = -10,    /**< a merge (or compaction) of this shard is already prepared and
				    not yet committed or aborted; retry after it */
	STRATA_ECLOSED = -11,  /**< the store or shard is closed */
	STRATA_EREADONLY = -12,/**< a WAL sync failed; the shard refuses writes until reopened */
	STRATA_EEXIST = -13,   /**< the object already exists (lost a put-if-absent race) */
	STRATA_EINJECTED = -14,/**< a failure injected through the test seam */
	STRATA_EVERSION = -15, /**< a file has a format version this build cannot read */
	STRATA_ELOCKED = -16,  /**< the data directory is open elsewhere (the message names the
				    directory and the holder's pid) */
};

/** Sync modes for the WAL. */
enum {
	STRATA_SYNC_FSYNC = 0,    /**< fdatasync per group commit before acknowledging */
	STRATA_SYNC_NONE = 1,     /**< never sync (simulations, benchmarks of the CPU path) */
	STRATA_SYNC_INTERVAL = 2, /**< acknowledge after write; sync every sync_interval_ms */
};

/** Where a store keeps its WALs (strata_options.wal). */
enum {
	STRATA_WAL_LOCAL = 0, /**< segment files in the data directory */
	STRATA_WAL_STORE = 1, /**< one object per group commit on the object store */
};

/** Clocks (strata_options.clock). */
enum {
	STRATA_CLOCK_REAL = 0,   /**< the environment's clocks (CLOCK_MONOTONIC, the wall clock) */
	STRATA_CLOCK_MANUAL = 1, /**< time moves only when the embedder calls strata_tick */
};

/** Meters of strata_step's budget (strata_options.step_meter). */
enum {
	STRATA_STEP_AUTO = 0, /**< the work meter with a manual clock, else the time meter */
	STRATA_STEP_TIME = 1, /**< real elapsed time (the environment's monotonic clock) */
	STRATA_STEP_WORK = 2, /**< work done: 1 us per KiB of background IO, 1 us per loop turn,
				   at least 1 us per chunk; the same on every machine (deterministic) */
};

/** strata_options.threads: the default (threads when a policy runs, none otherwise). */
#define STRATA_THREADS_DEFAULT (-1)

/** Shards of a new store opened with strata_options.shards = 0: one default for
 *  strata_open, `strata serve`, `strata load --embedded` and the Lua module. */
#define STRATA_DEFAULT_SHARDS 4u
/** strata_options.serve_first that opens no shard at strata_open. */
#define STRATA_SERVE_NONE 0xffffffffu

/** Default of strata_options.merge_max_inputs (strata_options_init; every --help that
 *  shows it prints this). */
#define STRATA_DEFAULT_MERGE_MAX_INPUTS 8u

/** Largest key accepted, in bytes. */
#define STRATA_MAX_KEY 4096u

struct env_ops;

/** An open store. */
typedef struct strata strata;
/** A prepared merge: the generations it folds and the run it wrote. */
typedef struct strata_plan strata_plan;

/** How to open a store. Initialise with strata_options_init, then set fields. */
typedef struct strata_options {
	/** Data directory: WAL segments and (for the fs object store) objects live here. */
	const char *dir;
	/** Directory of the WAL (node/core/DESIGN.md, "The WAL directory"), e.g. on a device of its own; NULL = the
	 *  one the store records, <dir>/wal for a new store. A new store records it in
	 *  <dir>/STORE; opening with another one is refused. It gets a LOCK of its own. */
	const char *wal_dir;
	/** Object store URL (azure://ACCOUNT/CONTAINER[/PREFIX]?endpoint=... or
	 *  s3://BUCKET[/PREFIX]?region=...; node/core/DESIGN.md, "Object stores"); NULL = the data
	 *  directory's objects/. The WAL stays local (wal_dir) unless wal is STRATA_WAL_STORE. */
	const char *store;
	/** Where the WALs are: STRATA_WAL_LOCAL (default: segment files in dir) or
	 *  STRATA_WAL_STORE (each group commit one object on the store, so a shard survives
	 *  the loss of its node and another node can take it over). */
	int wal;
	/** The shards this handle opens: serve_count shards from serve_first (0 = every
	 *  shard from serve_first on). The others are not opened and answer STRATA_ERANGE
	 *  until claimed (strata_shard_claim). serve_first = STRATA_SERVE_NONE opens none (a
	 *  cluster member claims the shards it is given). */
	uint32_t serve_first;
	uint32_t serve_count;
	/** Number of shards, numbered 0..shards-1. The count is part of the store: opening
	 *  it with another count is refused. 0 = the count the store has (STRATA_DEFAULT_SHARDS,
	 *  4, for a new one). */
	uint32_t shards;
	/** STRATA_SYNC_FSYNC, STRATA_SYNC_NONE or STRATA_SYNC_INTERVAL. */
	int sync;
	/** For STRATA_SYNC_INTERVAL: milliseconds between background syncs. */
	uint32_t sync_interval_ms;
	/** Largest value accepted, in bytes (default 64 MiB). */
	uint64_t max_value_bytes;
	/** WAL segment size at which a new segment starts (default 64 MiB). */
	uint64_t wal_segment_bytes;
	/** Uncompressed target size of a run-file block (default 64 KiB). */
	uint32_t block_bytes;
	/** Uncompressed target size of a run file's index partitions (the blocks' keys,
	 *  positions and filters; default 64 KiB, 0 = the default, 64 B..64 MiB). Smaller
	 *  ones let a point lookup read less and a split merge cut finer. */
	uint32_t index_partition_bytes;
	/** zstd compression level for run-file blocks (default 1). */
	int zstd_level;
	/** A compressed block is kept only when it is at most this many bytes per KiB of its
	 *  raw bytes, 1..1024 (default 896: it saves at least 1/8, as RocksDB's option
	 *  max_compressed_bytes_per_kb does; 1024: any saving); 0 never compresses. Others
	 *  are stored raw, and cost nothing to read back. */
	uint32_t compress_max_bytes_per_kib;
	/** Once 4 blocks in a row of one run did not pay for their compression, only one
	 *  block in this many is tried until one pays again (default 16; 1 tries every block). */
	uint32_t compress_sample_every;
	/** Bloom filter bits per key (default 10; 0 disables filters). */
	uint32_t bloom_bits_per_key;
	/** Manifest versions kept behind the current one (default 4). */
	uint32_t manifest_keep;
	/** Manifest log entries after which the writer puts a snapshot of the whole manifest
	 *  (default 128, 1..1000000): a load reads the newest snapshot and at most about
	 *  this many entries; each update writes only its edit. */
	uint32_t manifest_snapshot_edits;
	/** Most inputs (generations, or runs for a base compaction) one merge pass folds:
	 *  what bounds a merge's memory and time however large the backlog (default
	 *  STRATA_DEFAULT_MERGE_MAX_INPUTS, 8; at least 2). A policy may narrow it; a call asking for 0 or more gets this. */
	uint32_t merge_max_inputs;
	/** Rate at which objects folded by merges and compactions are deleted, bytes per
	 *  second (default 256 MiB/s; 0 = unlimited); a large object is cut down in
	 *  delete_chunk_bytes steps first. Deletes are background work: never done by a
	 *  reader or a commit. */
	uint64_t delete_bytes_per_s;
	/** Budget of background writes (seals, merges, compactions), bytes per second, shared
	 *  by every shard (default 0 = unlimited); a policy's background_io_mib_per_s
	 *  replaces it while that policy runs. */
	uint64_t background_io_bytes_per_s;
	/** The background IO budget's automatic mode: the rate starts at
	 *  background_io_bytes_per_s (0: 1 GiB/s), halves (from what the background wrote, when
	 *  that is lower) while the WAL's fdatasyncs (a window's median of 8) take over 2x their
	 *  baseline and over 0.5 ms, and climbs back (doubling per second) once they are under
	 *  1.5x (floor: 1/64 of the ceiling, at least 4 MiB/s). A policy's background_io_mib_per_s =
	 *  "auto" turns it on, a number fixes the rate. */
	int background_io_auto;
	/** Merge policy: NULL = none (nothing seals or merges by itself); "" = the built-in
	 *  default policy; otherwise a policy file's path. With a policy, strata_open runs
	 *  the policy runtime on a libev loop on a thread of its own. */
	const char *policy;
	/** The environment of the store: clock, file syscalls, allocator, random source,
	 *  log sink, object-store factory and test points (struct env_ops, node/lib/env.h;
	 *  a complete table, e.g. a modified copy of env_default, that outlives the store).
	 *  NULL = the process default. Every call on the store and every thread the store
	 *  or its host starts run in it, so stores of one process may differ. */
	const struct env_ops *env_ops;
	/** Threads of the handle: STRATA_THREADS_DEFAULT (-1) = with a policy, a loop thread
	 *  and two background workers, without one none; 0 = inline mode: no thread at all
	 *  (not even the WAL's interval sync), timers, seals, merges, compactions, deletes and
	 *  policy hooks run only inside strata_step, in chunks; n > 0 = a loop thread and n
	 *  background workers. */
	int threads;
	/** STRATA_CLOCK_REAL (default) or STRATA_CLOCK_MANUAL (time moves only by strata_tick;
	 *  it starts at 0). */
	int clock;
	/** Seed of the engine's random source (memtable tower heights; 0 = the environment's
	 *  source, unseeded). With a manual clock, inline mode and a seed, the same calls give
	 *  the same files and the same strata_trace_hash. */
	uint64_t seed;
	/** How strata_step measures its budget: STRATA_STEP_AUTO, _TIME or _WORK. */
	int step_meter;
	/** STRATA_SYNC_FSYNC group commit: the longest a group waits for the writers the
	 *  previous group carried before it is written, so that one fdatasync acknowledges
	 *  them all (at most half the last fdatasync's time; default 200 us; 0 = never
	 *  waits). The writer whose append completes the group writes it at once. */
	uint32_t group_commit_wait_us;
	/** Most WAL segment files held open at once over all shards (default 512; 0 = one
	 *  per shard, unbounded): the least recently appended idle shard's is closed to make
	 *  room and reopened by its next append, so 10 000 shards fit the default limit of
	 *  1024 descriptors. */
	uint32_t max_open_wal_files;
	/** Run and generation files the local object store keeps open for reads (default 64;
	 *  0 = open and close the file on every block read). */
	uint32_t max_open_object_files;
	/** Memtable arenas beyond their first MiB in 16 MiB chunks advised as transparent huge
	 *  pages (default 1; 0 = 1 MiB chunks of normal pages): one page fault per 2 MiB, not
	 *  per 4 KiB, when a memtable fills (5x faster WAL replay measured here); a replay of
	 *  over 32 MiB of WAL also has a thread fault the next chunks in ahead of it. */
	int memtable_huge_pages;
	/** Rows WAL replay holds, sorts and links into the memtable at a time (default
	 *  1048576, 24 bytes each: 24 MiB at most; 0 = one insert per row): a sorted batch
	 *  is linked with each search starting where the one before it ended, instead of a
	 *  descent through the whole memtable per row (1 GiB of random keys replayed in
	 *  1.8-2.3 s instead of 4.8-5.3 s here). */
	uint32_t replay_batch_rows;
	/** Threads that load and claim the shards at open (default 64; 0 or 1 = the caller's
	 *  alone, as always in inline mode): claims sync, and concurrent syncs share journal
	 *  commits, so many shards open in a fraction of the time. */
	uint32_t open_threads;
	/** Bytes of the block cache every reader of the store shares (default 64 MiB; 0 = none:
	 *  every get reads its block from the object store, and a reader keeps the index
	 *  partitions it loaded). It holds decompressed data blocks and index partitions,
	 *  least recently used evicted first; a quarter of it is the budget of the index
	 *  and filter partitions pending generations keep resident. */
	uint64_t block_cache_bytes;
	/** Bloom filter bits per key of generations (default 16; 0 = bloom_bits_per_key;
	 *  none when bloom_bits_per_key is 0), rounded up to a power of two bits, with the
	 *  number of probes of bloom_bits_per_key. Every get probes every pending
	 *  generation, so a backlog of N of them costs N x the false-positive rate in block
	 *  lookups per get: at 10 000 pending generations of 100 rows, 10 bits made ~55 per
	 *  get (a miss took 1.35 ms), 16 bits make under one (0.18 ms), for 256 bytes of
	 *  resident filter per 100 rows. */
	uint32_t generation_bloom_bits_per_key;
	/** Step by which the deletes cut a large object down before unlinking it, bytes
	 *  (default 1 MiB; 0 = the default), and the burst of delete_bytes_per_s. On ext4
	 *  mounted with discard, an fdatasync that commits the journal waits for the discard
	 *  of the blocks freed in that commit: the WAL's syncs wait for one step at most
	 *  (8 MiB steps put a WAL fdatasync p99 at 1.7 ms while deletes ran here, 1 MiB steps
	 *  at 0.3 ms). */
	uint64_t delete_chunk_bytes;
	/** Threads one merge or compaction pass writes its run on (default 0 = auto: half the
	 *  online CPUs, 1..8; 1 = the thread running the pass alone; at most 64; always 1 in
	 *  inline mode). The pass's thread reads and merges its inputs and cuts the blocks;
	 *  the others compress and checksum the blocks, up to 2 x threads (at most 8) blocks
	 *  at once, and the pass's thread writes them in order: the run is the same,
	 *  byte for byte, for any count, and it goes through the background IO budget as one
	 *  stream. Seals write on one thread. A policy's merge_threads may only narrow it.
	 *  A pass with at least 2 x merge_part_min_bytes of input is split too (see there). */
	uint32_t merge_threads;
	/** A merge or compaction pass with merge_threads > 1 splits its key range into up to
	 *  merge_threads parts, each of at least this many input bytes (default 64 MiB;
	 *  0 = the default; UINT64_MAX: never split), cut at the inputs' index partitions so
	 *  the parts hold about equal bytes. The parts are written at once, each on its own
	 *  thread with its own merge of every input (one block per input each) and
	 *  merge_threads / parts writer threads, all through the one background IO budget,
	 *  and commit as one sorted run of key-range parts (the manifest's run groups): a
	 *  policy's base_runs counts it once. */
	uint64_t merge_part_min_bytes;
	/** With wal = STRATA_WAL_STORE: a get or scan is served only while this handle's last
	 *  read of the shard's epoch object, at most this many ms old, found it the owner;
	 *  older, the read reads the epoch object first (one GET), and a newer owner there
	 *  fences the shard (STRATA_EFENCED) instead of serving a stale row. The longest a
	 *  fenced, idle node can serve reads after another node claimed the shard (default
	 *  1000, at most 3600000, and 0 reads it on every read). strata_shard_claim always
	 *  reads it. */
	uint32_t owner_check_ms;
} strata_options;

/** Kinds of row (strata_row.kind). */
enum {
	STRATA_ROW_PUT = 0,    /**< key gets value: the row a zero-initialised strata_row is */
	STRATA_ROW_DELETE = 1, /**< a tombstone: key has no value from this row on (value empty) */
};

/** One row as passed to append and returned by scan. A row built field by field must
 *  set kind too; an initialiser that names only the first four members leaves it 0 (put). */
typedef struct strata_row {
	/** Key bytes, 1..STRATA_MAX_KEY of them. */
	const void *key;
	/** Length of key. */
	size_t key_len;
	/** Value bytes (NULL with value_len 0 for an empty value or a delete). */
	const void *value;
	/** Length of value; 0 for a delete. */
	size_t value_len;
	/** STRATA_ROW_PUT or STRATA_ROW_DELETE; scan returns puts only. */
	uint32_t kind;
} strata_row;

/*
 * STRATA_STATS_FIELDS(X) — every per-shard statistic, once. X(field, kind, metric,
 * scale, help): the strata_stats member, "gauge" or "counter", its Prometheus name,
 * the divisor that turns it into the metric's unit, and what it means. Every list of
 * statistics (the struct, JSON views, the Lua module, /metrics) is generated from it.
 */
#define STRATA_STATS_FIELDS(X)                                                                       \
	X(memtable_rows, "gauge", "strata_memtable_rows", 1, "Rows in the active and sealed memtables.") \
	X(memtable_bytes, "gauge", "strata_memtable_bytes", 1,                                        \
	  "Bytes accounted to the active and sealed memtables.")                                      \
	X(sealed_memtables, "gauge", "strata_sealed_memtables", 1,                                    \
	  "Memtables sealed and not yet published as generations.")                                  \
	X(generations, "gauge", "strata_pending_generations", 1,                                      \
	  "Flushed generations waiting to be merged into the base.")                                 \
	X(base_runs, "gauge", "strata_base_runs", 1, "Sorted runs in the base (a split run counts once).") \
	X(wal_bytes, "gauge", "strata_wal_bytes", 1, "Bytes in live WAL segments.")                    \
	X(wal_segments, "gauge", "strata_wal_segments", 1, "Live WAL segment files.")                  \
	X(writer_epoch, "gauge", "strata_writer_epoch", 1, "This writer's ownership epoch of the shard.") \
	X(manifest_version, "gauge", "strata_manifest_version", 1,                                    \
	  "Version of the manifest this writer last wrote or read.")                                 \
	X(replay_after, "gauge", "strata_replay_after", 1,                                            \
	  "WAL position up to which rows are in generations or the base.")                           \
	X(last_seq, "gauge", "strata_last_seq", 1, "Highest sequence number assigned.")                \
	X(next_generation, "gauge", "strata_next_generation", 1, "Next generation or run id.")         \
	X(appends, "counter", "strata_appends_total", 1, "Append calls acknowledged.")                 \
	X(rows_appended, "counter", "strata_rows_appended_total", 1, "Rows acknowledged.")             \
	X(wal_syncs, "counter", "strata_wal_syncs_total", 1, "WAL fdatasync calls (group commits).")   \
	X(seals, "counter", "strata_seals_total", 1, "Generations flushed by seals.")                  \
	X(merges, "counter", "strata_merge_passes_total", 1, "Merge passes committed.")                \
	X(merge_conflicts, "counter", "strata_merge_conflicts_total", 1,                              \
	  "Merge plans refused at commit because they no longer applied.")                           \
	X(foreign_manifest_versions, "counter", "strata_foreign_manifest_versions_total", 1,          \
	  "Manifest versions another process wrote (strata compact) that this writer followed.")    \
	X(merged_generations, "counter", "strata_merged_generations_total", 1,                        \
	  "Generations folded into the base by merges.")                                             \
	X(merge_bytes_in, "counter", "strata_merge_read_bytes_total", 1,                              \
	  "Generation bytes read by committed merges.")                                              \
	X(merge_bytes_out, "counter", "strata_merge_written_bytes_total", 1,                          \
	  "Run bytes written by committed merges.")                                                  \
	X(compactions, "counter", "strata_compactions_total", 1, "Base compactions committed.")        \
	X(max_exclusive_ns, "gauge", "strata_exclusive_lock_max_seconds", 1e9,                        \
	  "Longest hold of the shard's exclusive lock (merge commit) since the store opened.")       \
	X(max_exclusive_wait_ns, "gauge", "strata_exclusive_lock_wait_max_seconds", 1e9,              \
	  "Longest wait to take the shard's exclusive lock (behind appends and readers).")          \
	X(background_io_bytes_per_s, "gauge", "strata_background_io_limit_bytes_per_second", 1,       \
	  "Budget of the store's background writes (0 = unlimited).")                               \
	X(background_io_wait_ns, "counter", "strata_background_io_wait_seconds_total", 1e9,           \
	  "Time this shard's seals, merges and compactions waited on the background IO budget.") \
	X(background_io_stalls, "counter", "strata_background_io_stalls_total", 1,                   \
	  "WAL syncs the store's automatic background IO budget took as stalls and halved at.")     \
	X(background_io_bytes, "counter", "strata_background_io_bytes_total", 1,                     \
	  "Bytes the store's seals, merges and compactions wrote through the background IO budget.") \
	X(blocks_compressed, "counter", "strata_blocks_compressed_total", 1,                         \
	  "Run-file data blocks written compressed.")                                                 \
	X(blocks_raw, "counter", "strata_blocks_raw_total", 1,                                       \
	  "Run-file data blocks written raw: compression did not pay, or was not tried.")            \
	X(blocks_compress_untried, "counter", "strata_blocks_compress_untried_total", 1,             \
	  "Raw data blocks written without trying to compress them (a stream that did not pay).")    \
	X(compress_saved_bytes, "counter", "strata_compress_saved_bytes_total", 1,                   \
	  "Bytes compression saved in the data blocks it was kept for.")                             \
	X(merge_threads, "gauge", "strata_merge_threads", 1,                                         \
	  "Threads the shard's next merge or compaction pass writes its run on.")                    \
	X(merge_blocks_helped, "counter", "strata_merge_blocks_helped_total", 1,                     \
	  "Data blocks of merge and compaction runs a helper thread compressed (merge_threads > 1).") \
	X(merge_split_parts, "counter", "strata_merge_split_parts_total", 1,                         \
	  "Runs written as key-range parts of split merge and compaction passes.")                   \
	X(merge_in_flight_bytes, "gauge", "strata_merge_in_flight_bytes", 1,                         \
	  "Input bytes of the merge or compaction this shard is writing now (0: none in flight).")   \
	X(merge_in_flight_done_bytes, "gauge", "strata_merge_in_flight_done_bytes", 1,               \
	  "Of those input bytes, the part read so far (estimated from the rows read).")              \
	X(generation_bytes, "gauge", "strata_generation_bytes", 1, "Bytes in flushed generations.")    \
	X(base_bytes, "gauge", "strata_base_bytes", 1, "Bytes in base runs.")                         \
	X(block_cache_hits, "counter", "strata_block_cache_hits_total", 1,                            \
	  "Gets of this shard that found their data block or index partition in the block cache.")   \
	X(block_cache_misses, "counter", "strata_block_cache_misses_total", 1,                        \
	  "Gets of this shard that read their data block or index partition from the object store.") \
	X(block_cache_evictions, "counter", "strata_block_cache_evictions_total", 1,                  \
	  "Entries the store's block cache (shared by its shards) evicted to make room.")           \
	X(block_cache_bytes, "gauge", "strata_block_cache_bytes", 1,                                  \
	  "Bytes held by the store's block cache (shared by its shards), overhead included.")       \
	X(block_cache_capacity, "gauge", "strata_block_cache_capacity_bytes", 1,                      \
	  "Evicting capacity of the store's block cache (block_cache_bytes less the resident budget).") \
	X(resident_filter_bytes, "gauge", "strata_resident_filter_bytes", 1,                          \
	  "Bytes of index and filter partitions this shard's pending generations keep resident.")

/** Per-shard statistics: one uint64_t per STRATA_STATS_FIELDS entry, in that order. */
typedef struct strata_stats {
#define STRATA_STATS_MEMBER(field, kind, metric, scale, help) uint64_t field;
	STRATA_STATS_FIELDS(STRATA_STATS_MEMBER)
#undef STRATA_STATS_MEMBER
} strata_stats;

#ifdef __cplusplus
}
#endif
#endif /* STRATA_TYPES_H */
