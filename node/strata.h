/*
 * strata.h — the public embedding API of strata, a log-structured storage node.
 *
 * A store holds numbered shards; each shard is an independent LSM (WAL, memtable,
 * generations, base runs, manifest). Every function returns 0 on success, a
 * positive STRATA_NOTFOUND where documented, or a negative STRATA_E* code; the
 * message with context for the last failure on the calling thread is returned by
 * strata_last_error(). strata_append, strata_get and strata_scan may be called from
 * many threads at once, concurrently with one thread preparing and committing merges.
 */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>

#include "strata_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** This build has the policy runtime (options.policy, strata_set_policy). */
#define STRATA_HAVE_POLICY 1

/** Replace the running policy with a file (when path_or_source names one) or with
 *  source text, validated first in a fresh Lua state. On failure the old policy stays
 *  and strata_last_error() gives every error, file:line each. Needs options.policy set. */
int strata_set_policy(strata *db, const char *path_or_source, size_t len);
/** The policy runtime's state, for stats. */
typedef struct strata_policy_info {
	uint64_t version;          /**< 1 for the first policy, +1 per successful reload */
	uint64_t reloads;          /**< successful reloads */
	uint64_t reload_failures;  /**< refused reloads (the old policy stayed) */
	uint64_t hook_runs;        /**< hook runs started */
	uint64_t hook_errors;      /**< hook runs that failed (error, time budget, memory limit) */
	uint64_t policy_seals;     /**< seals started by the policy */
	uint64_t policy_merges;    /**< merge passes started by the policy */
	uint64_t policy_compactions; /**< base compactions started by the policy */
	uint64_t flush_timer_fires; /**< flush timer expiries */
	uint64_t sweeps;           /**< sweeper runs */
	char last_error[1024];     /**< last reload or hook error, "" when none */
	char name[512];            /**< path or label of the running policy */
} strata_policy_info;
/** Fill *out from the running policy runtime. STRATA_EINVAL without one. */
int strata_policy_info_get(strata *db, strata_policy_info *out);
/** Fill *o with defaults: shards=0 (as stored; STRATA_DEFAULT_SHARDS for a new store),
 *  sync=STRATA_SYNC_FSYNC, dir=NULL. */
void strata_options_init(strata_options *o);
/** Open (or create) a store. The handle owns the directory until strata_close: a second
 *  opener, in this process or another, gets STRATA_ELOCKED. Everything is checked
 *  first (manifests, the WALs, every named object's existence and size, a policy file); a
 *  failed open writes nothing, and removes a new store it had begun to create (a directory
 *  it made, what it added to an empty one; never what was there before). A table's footer
 *  and index are read at its first use. Then it claims every shard's epoch (fencing any
 *  older writer of a shared store), replays the WALs and collects orphans. */
int strata_open(const strata_options *o, strata **out);
/** The shard count the store in dir records: 0, STRATA_NOTFOUND when dir holds no
 *  store, or an error. Read-only; works while the store is open elsewhere. */
int strata_stored_shards(const char *dir, uint32_t *shards);
/** Append n rows to a shard; returns once they are durable under the sync mode.
 *  All or nothing: a bad row rejects the whole batch and nothing is written.
 *  A row of kind STRATA_ROW_DELETE (value_len 0) is a delete: a tombstone that hides
 *  every older row of its key, so puts and deletes mix in one batch, applied in order
 *  (of two rows of one key in a batch the later wins). kind 0 is a put, so rows built
 *  with a positional or designated initialiser that names no kind stay puts; a row
 *  filled member by member must set kind (another value is STRATA_EINVAL). */
int strata_append(strata *db, uint32_t shard, const strata_row *rows, size_t n);
/** Check one row against the limits strata_append applies to it (key 1..STRATA_MAX_KEY
 *  bytes, value at most the store's max_value_bytes): 0, STRATA_EINVAL or STRATA_ETOOBIG
 *  with a message. For front ends that want to refuse a row before collecting a batch. */
int strata_check_row(const strata *db, size_t key_len, size_t value_len);
/** Like strata_append, and reports the sequence number of the last row. */
int strata_append_seq(strata *db, uint32_t shard, const strata_row *rows, size_t n, uint64_t *last_seq);
/** Delete n keys (keys[i] has key_lens[i] bytes): one tombstone each, appended as one
 *  batch like strata_append (all or nothing, durable on return). Deleting a key that
 *  has no row is not an error. A merge keeps a tombstone while an older run may hold
 *  its key; a base compaction that folds the oldest run drops it. */
int strata_delete(strata *db, uint32_t shard, const void *const *keys, const size_t *key_lens, size_t n);
/** Read the newest value of key. STRATA_NOTFOUND if absent or deleted. *value is released
 *  with strata_free. */
int strata_get(strata *db, uint32_t shard, const void *key, size_t key_len, void **value, size_t *value_len);
/** Visit rows with start <= key < end in key order (NULL bound = unbounded); deleted
 *  keys are skipped (every row passed has kind STRATA_ROW_PUT).
 *  A nonzero return from cb stops the scan and is returned. */
int strata_scan(strata *db, uint32_t shard, const void *start, size_t start_len, const void *end,
		size_t end_len, int (*cb)(void *ctx, const strata_row *row), void *ctx);
/** Seal the active memtable and flush it as a generation. A no-op when empty. */
int strata_seal(strata *db, uint32_t shard);
/** Seal, then stream-merge the oldest max_generations (0 = all) generations into a new base run.
 *  Runs under the shared lock; appends and reads continue. *plan is consumed by commit or abort. */
int strata_prepare_merge(strata *db, uint32_t shard, uint32_t max_generations, strata_plan **plan);
/** Number of generations a plan folds. */
uint32_t strata_plan_generations(const strata_plan *plan);
/** Shard a plan belongs to. */
uint32_t strata_plan_shard(const strata_plan *plan);
/** Publish a plan: O(1) work under the exclusive lock. Consumes the plan. STRATA_ECONFLICT
 *  if its generations are no longer all in the manifest (its run is then deleted). */
int strata_commit_merge(strata *db, strata_plan *plan);
/** Drop a plan and delete its run. Consumes the plan. */
void strata_abort_merge(strata *db, strata_plan *plan);
/** prepare + commit; *merged (may be NULL) receives the number of generations folded.
 *  Every prepare folds at most merge_max_inputs inputs (0 = up to that cap). */
int strata_merge(strata *db, uint32_t shard, uint32_t max_generations, uint32_t *merged);
/** Prepare a base compaction of the oldest max_runs runs (0 = all); commit/abort as a merge. */
int strata_prepare_compact(strata *db, uint32_t shard, uint32_t max_runs, strata_plan **plan);
/** Write a consistent, openable copy of the store into dir, which must not exist (its
 *  parent must), while appends, seals and merges go on: every row acknowledged before
 *  the call is in it; rows of appends in flight during the call are in it or not, whole
 *  batches only (as after a crash); rows appended after it returns are not. Generations
 *  and runs are hard links where the file system allows (copies otherwise); the WAL
 *  after each shard's replay cursor is copied. Written into "dir.partial", fsynced, and
 *  renamed to dir at the end: a failure leaves no dir (STRATA_EEXIST when dir or
 *  dir.partial exists). Open the copy with strata_open like any store. */
int strata_checkpoint(strata *db, const char *dir);
/** Fill *out with the shard's statistics. They are read while the shard goes on, not
 *  as one snapshot, but a merge or compaction is counted before its view is published:
 *  a read that finds its inputs gone finds them counted (generations + merged_generations
 *  does not fall below what was sealed; after a manifest write that reported failure
 *  but had landed, it may for a moment). */
int strata_shard_stats(strata *db, uint32_t shard, strata_stats *out);
/** Figures of the whole store (every shard together), for monitoring. */
typedef struct strata_store_stats {
	uint64_t deletes_pending_objects; /**< objects no manifest names any more (merged generations,
					       compacted runs), queued for the paced deletes */
	uint64_t deletes_pending_bytes;   /**< bytes still to free of the queued deletes */
	uint64_t deleted_objects;         /**< objects the paced deletes removed since the open */
	uint64_t deleted_bytes;           /**< bytes they freed since the open */
} strata_store_stats;
/** Fill *out; any thread. */
int strata_store_stats_get(strata *db, strata_store_stats *out);
struct hist;
/** Histograms (nanoseconds, 2 significant digits) of every shard's exclusive-lock holds
 *  and of the waits to take it, since the open: live, read from any thread with the
 *  hist_* functions of node/lib/hist.h while the handle is open. */
int strata_lock_hists(strata *db, const struct hist **hold_ns, const struct hist **wait_ns);
struct objstore_op_stats;
/** The object store's request counters, one per operation kind (node/objstore/objstore.h),
 *  up to cap into out: the number of kinds, 0 for a store that keeps none (the local
 *  directory's) or for a NULL handle. Any thread. */
size_t strata_objstore_stats(strata *db, struct objstore_op_stats *out, size_t cap);
/** Walk a shard's invariants (view against manifest, seq order, replay cursor);
 *  0 or STRATA_ECORRUPT with a message. Meant for tests and `strata inspect`. */
int strata_check(strata *db, uint32_t shard);
/** Take shard over on this handle: claim its epoch in the manifest (fencing the writer
 *  that owned it, on whatever node), put a fence at the next WAL position, replay the WAL.
 *  0 at once when this handle owns it already; a shard this handle was fenced out of is
 *  opened afresh. Needs wal = STRATA_WAL_STORE on a remote store (a local WAL's rows are
 *  on the node that wrote them). Does IO: never call it from a loop thread. */
int strata_shard_claim(strata *db, uint32_t shard);
/** Stop serving shard on this handle (the opposite of a claim, for a handoff): every
 *  operation on it after this, and any in flight that has not acknowledged, answers
 *  STRATA_EFENCED (why names the reason) or STRATA_ERANGE; nothing is written. With wal =
 *  STRATA_WAL_STORE its acknowledged rows are in the WAL on the store, which the next
 *  owner's claim replays. The shard's memory stays until strata_close. 0 when it is not
 *  open here. */
int strata_shard_release(strata *db, uint32_t shard, const char *why);
/** 1 when this handle has shard open (in its serve range, or claimed since), else 0. */
int strata_shard_served(const strata *db, uint32_t shard);
/** The shard a key belongs to in a store of shards shards: XXH3_64bits(key) (xxHash's
 *  64-bit XXH3, seed 0, a frozen format) modulo shards. Stable across versions and nodes:
 *  a client, a node and the Lua module (db:shard_of) route the same key to the same
 *  shard. 0 when shards is 0. */
uint32_t strata_shard_of(const void *key, size_t key_len, uint32_t shards);
/** Number of shards of an open store. */
uint32_t strata_shards(const strata *db);
/** Release memory returned by strata_get. */
void strata_free(void *p);
/*
 * Simulation and frame loops. A store opened with options.clock = STRATA_CLOCK_MANUAL
 * reads time only from strata_tick; with options.threads = 0 it starts no thread at
 * all and its background work (timers, the interval WAL sync, seals, merges,
 * compactions, deletes, policy hooks) runs only inside strata_step, in chunks; appends,
 * gets and scans stay synchronous calls the embedder makes. With a manual clock, inline
 * mode and options.seed, the same calls give the same files byte for byte and the same
 * strata_trace_hash.
 */
/** What one strata_step did. */
typedef struct strata_step_info {
	unsigned chunks;       /**< chunks of background work run (see strata_step) */
	unsigned turns;        /**< loop turns: due timers, completions, policy hooks */
	uint64_t spent_us;     /**< budget spent, in the step's meter (options.step_meter) */
	uint64_t max_chunk_us; /**< the largest chunk, in the meter */
	int blocked;           /**< a job waits for time (a rate budget): tick to move it */
	unsigned pending;      /**< background jobs queued or part done after the step */
} strata_step_info;
/** Manual clock: set the time to now_ns (nanoseconds from the clock's start, 0). Never
 *  backwards: an earlier time gets STRATA_EINVAL and the clock stays. Timers due by the
 *  new time fire in the next strata_step (threaded: at once). STRATA_EINVAL with the
 *  real clock. */
int strata_tick(strata *db, uint64_t now_ns);
/** Inline mode (options.threads = 0, or no policy and the default): run due timers and
 *  background work until budget_us is spent or nothing is due. The budget is checked
 *  after each chunk, so a step overruns it by at most one chunk: one block of a run
 *  being written by a seal, merge or compaction (options.block_bytes before
 *  compression), the end of a run (its index, filter, footer and sync) with its
 *  manifest update, one commit, one batch of up to 64 deletes, or one policy hook run
 *  (at most the policy's hook_budget_ms). A step with nothing due costs microseconds.
 *  out may be NULL. STRATA_EINVAL when the handle runs threads. */
int strata_step(strata *db, uint64_t budget_us, strata_step_info *out);
/** The hash over every engine event so far (appends, seals, merge plans, commits,
 *  aborts, deletes, policy decisions, ticks), in order; events counts them (may be NULL). */
uint64_t strata_trace_hash(strata *db, uint64_t *events);
/** Flush nothing, sync the WALs, release everything. Safe on NULL. */
void strata_close(strata *db);
/** Words for a result code; every code has some. */
const char *strata_strerror(int rc);
/** The message with context (file, shard, offset) of the last failure on this thread. */
const char *strata_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_H */
