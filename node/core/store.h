/*
 * store.h — the core's store: a set of shards in one data directory, with the
 * argument checks and the dispatch to shards. The public API (node/strata.c) and
 * the policy runtime are built on it; the core knows nothing of either.
 */
#ifndef STRATA_STORE_H
#define STRATA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../strata_types.h"
#include "store_meta.h"

struct store;
struct trace;

/** Events a store reports, on the thread that caused them. Keep them short and
 *  non-blocking (e.g. ev_async_send). */
struct store_listener {
	/** A generation was published by a seal. */
	void (*on_seal)(void *ctx, uint32_t shard, uint64_t generation_id, uint64_t rows, uint64_t bytes);
	/** The active memtable of shard reached the memtable limit (once per memtable). */
	void (*on_memtable_full)(void *ctx, uint32_t shard, uint64_t bytes);
	/** Passed back to the callbacks. */
	void *ctx;
};

/** Open (or create) a store; see strata_open for what it checks, owns and writes. */
int store_open(const strata_options *o, struct store **out);
/** Close every shard, free the store and release its directory. Safe on NULL. */
void store_close(struct store *db);
/** store_close for a start that failed after the open: what the open created goes again
 *  (a directory it made, entries it added to the data directory or an outside WAL
 *  directory, a LOCK file; a LOCK that existed gets its old content back), removed while
 *  the locks are still held. Nothing that existed before the open is removed: an
 *  existing store keeps what the open wrote into it (claimed epochs, a new WAL segment).
 *  A failed store_open does the same by itself. Safe on NULL. */
void store_close_discard(struct store *db);
/** The shard count the store in dir records: 0, STRATA_NOTFOUND, or an error. */
int store_stored_shards(const char *dir, uint32_t *shards);
/** Install (or with NULL remove) the listener and the memtable size limit (0 = none).
 *  Returns once no callback of the previous listener is running (never call it from one). */
void store_set_listener(struct store *db, const struct store_listener *l, uint64_t memtable_max_bytes);
/** Change only the memtable size limit. */
void store_set_memtable_limit(struct store *db, uint64_t memtable_max_bytes);
/** Narrow every shard's per-pass input cap (0 = options.merge_max_inputs; larger values
 *  are clamped to it): how a policy's merge_max_generations reaches the engine. */
void store_set_merge_cap(struct store *db, uint32_t max_inputs);
/** Narrow every shard's threads of a merge or compaction pass (0 = as the options give;
 *  larger values are clamped to it): how a policy's merge_threads reaches the engine. */
void store_set_merge_threads(struct store *db, uint32_t threads);
/** The threads of a pass the options give (merge_threads resolved: auto, inline mode). */
uint32_t store_merge_threads_max(const struct store *db);
/** The options the store was opened with. */
const strata_options *store_options(const struct store *db);
/** Number of shards (0 for NULL). */
uint32_t store_shards(const struct store *db);

/** The limits an append checks for each row: the key 1..STRATA_MAX_KEY bytes, the value
 *  at most max_value_bytes. 0, STRATA_EINVAL or STRATA_ETOOBIG with a message. */
int store_check_row(uint64_t max_value_bytes, size_t key_len, size_t value_len);

/* The operations, as documented for their strata_* counterparts in strata.h. */
int store_append(struct store *db, uint32_t shard, const strata_row *rows, size_t n, uint64_t *last_seq);
/** Append one STRATA_ROW_DELETE row per key (keys[i] of key_lens[i] bytes) as one batch. */
int store_delete(struct store *db, uint32_t shard, const void *const *keys, const size_t *key_lens,
		 size_t n, uint64_t *last_seq);
int store_get(struct store *db, uint32_t shard, const void *key, size_t key_len, void **value,
	      size_t *value_len);
int store_scan(struct store *db, uint32_t shard, const void *start, size_t start_len, const void *end,
	       size_t end_len, int (*cb)(void *ctx, const strata_row *row), void *ctx);
int store_seal(struct store *db, uint32_t shard);
int store_prepare_merge(struct store *db, uint32_t shard, uint32_t max_generations, strata_plan **plan);
int store_prepare_compact(struct store *db, uint32_t shard, uint32_t max_runs, strata_plan **plan);
/** Inputs (generations, or runs of a compaction) a plan folds. */
uint32_t store_plan_inputs(const strata_plan *plan);
/** Shard a plan belongs to. */
uint32_t store_plan_shard(const strata_plan *plan);
int store_commit(struct store *db, strata_plan *plan);
void store_abort(struct store *db, strata_plan *plan);
int store_merge(struct store *db, uint32_t shard, uint32_t max_generations, uint32_t *merged);
int store_shard_stats(struct store *db, uint32_t shard, strata_stats *out);
int store_check(struct store *db, uint32_t shard);
/** Write a consistent, openable copy of the store into dir (see strata_checkpoint). */
int store_checkpoint(struct store *db, const char *dir);
/** Whether shard is open on this handle (strata_shard_served). */
int store_serves_shard(const struct store *db, uint32_t shard);
/** strata_shard_claim. */
int store_claim(struct store *db, uint32_t shard);
/** strata_shard_release. */
int store_release(struct store *db, uint32_t shard, const char *why);
/** Change the budget of background writes, bytes per second (0 = unlimited). */
void store_set_io_rate(struct store *db, uint64_t bytes_per_s);
/** Longest lock hold or wait the histograms of store_lock_hists tell apart, ns. */
#define STORE_LOCK_HIST_HIGHEST_NS (60ull * 1000000000ull)
/** Default strata_options.merge_part_min_bytes: a pass splits into parts of 64 MiB or more. */
#define STORE_MERGE_PART_MIN_DEFAULT (64ull << 20)
struct hist;
/** Histograms (2 significant digits, ns) of every shard's exclusive-lock holds and of the
 *  waits to take it, since the open; read them from any thread. */
void store_lock_hists(struct store *db, const struct hist **hold_ns, const struct hist **wait_ns);
struct objstore;
/** The store's object store (its request counters: objstore_request_stats). */
struct objstore *store_objstore(struct store *db);
/** Put the budget of background writes in its automatic mode under ceiling (bytes per
 *  second, 0: 1 GiB/s): it backs off while the WAL's syncs slow down (ratelimit.h). */
void store_set_io_auto(struct store *db, uint64_t ceiling);
/** Hand the deletes of merged objects to someone above (the host's background
 *  executor): kick is called, from any thread, when deletes are queued, and that
 *  someone calls store_reap. NULL: the store's own seals and merges run them. */
void store_set_reaper_kick(struct store *db, void (*kick)(void *ctx), void *ctx);
/** Change the rate of the deletes of merged objects (bytes per second, 0 = unlimited). */
void store_set_delete_rate(struct store *db, uint64_t bytes_per_s);
/** Run the queued deletes within the store's rate, waiting up to max_wait_ns in all;
 *  returns the objects still queued. */
uint64_t store_reap(struct store *db, uint64_t max_wait_ns);
/** Deletes queued (objects, bytes) and done since the open. */
void store_reaper_stats(struct store *db, uint64_t *pending, uint64_t *pending_bytes, uint64_t *deleted,
			uint64_t *deleted_bytes);
/** Words for a result code; every code has some. */
const char *store_strerror(int rc);
/** STRATA_SYNC_INTERVAL's periodic WAL sync of every shard, for a store opened with
 *  threads = 0 (no sync threads): the owner calls it every sync_interval_ms. */
void store_sync_written(struct store *db);
/** The store's event trace (lib/trace.h). */
struct trace *store_trace(struct store *db);

#endif
