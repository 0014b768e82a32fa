/*
 * reaper.h — the objects a store no longer names (generations folded by a merge,
 * runs folded by a compaction, the run of an aborted plan), waiting to be deleted.
 *
 * Whoever drops the last reference to such an object (a reader's unref, a commit)
 * only queues it: O(1), no IO. The deletes themselves run later as background work
 * (reaper_run): at most bytes_per_s (0 = unlimited) with a burst of one chunk, a large
 * object cut down in chunk_bytes steps first (on ext4 with discard, unlinking one 32 MiB
 * file took 383 ms; freeing it in chunks spreads that), several objects per batch with
 * one directory sync per batch. On a store that cannot cut objects down, a larger one
 * is deleted whole and the bytes it had over the bucket delay the deletes after it.
 * RocksDB's DeleteScheduler does the same for the same reason.
 */
#ifndef STRATA_REAPER_H
#define STRATA_REAPER_H

#include <stdint.h>

#include "../objstore/objstore.h"

struct reaper;
struct trace;

/** Called (from any thread, once per empty-to-pending change) when work is queued. */
typedef void (*reaper_kick_fn)(void *ctx);

/** Step by which a large object is cut down when none is given: 1 MiB. On ext4 with
 *  discard, a journal commit (so a growing WAL segment's fdatasync) waits for the
 *  discard of what the commit freed; 8 MiB steps held WAL syncs for 5x longer at p99. */
#define REAPER_CHUNK_DEFAULT (1u << 20)

/** Create a reaper deleting from os, cutting large objects down by chunk_bytes (0:
 *  REAPER_CHUNK_DEFAULT). */
int reaper_new(struct objstore *os, uint64_t bytes_per_s, uint64_t chunk_bytes, struct reaper **out);
/** Delete what is still queued (unpaced) and free. Safe on NULL. */
void reaper_delete(struct reaper *r);
/** Trace every delete batch into t (lib/trace.h). */
void reaper_set_trace(struct reaper *r, struct trace *t);
/** Queue key (bytes long) for deletion. Thread-safe, no IO; on ENOMEM the object is
 *  left to the orphan collection of the next open (logged). */
void reaper_add(struct reaper *r, const char *key, uint64_t bytes);
/** Who to tell when work is queued (NULL: nobody; whoever calls reaper_run polls). */
void reaper_set_kick(struct reaper *r, reaper_kick_fn fn, void *ctx);
/** Change the rate (0 = unlimited). */
void reaper_set_rate(struct reaper *r, uint64_t bytes_per_s);
/** Delete queued objects, oldest first, within the rate. When the rate asks to wait,
 *  wait up to max_wait_ns (sleeping, through env.mono_ns) and go on, else return.
 *  Returns the objects still queued. One caller at a time (others return at once). */
uint64_t reaper_run(struct reaper *r, uint64_t max_wait_ns);
/** What is queued, and what was deleted since the start. */
void reaper_stats(struct reaper *r, uint64_t *pending, uint64_t *pending_bytes, uint64_t *deleted,
		  uint64_t *deleted_bytes);

#endif
