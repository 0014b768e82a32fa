/*
 * compactor.h — an external compactor of one shard (what `strata compact` runs): it
 * opens the shard's objects and manifest next to the shard's live writer, without its
 * WAL, its LOCK or its epoch, and folds flushed generations into base runs (and base
 * runs together) by committing manifest versions that carry the writer's epoch
 * unchanged. A commit that loses to the writer (the same inputs merged first, or a new
 * owner's epoch) is dropped, its run deleted, and the next pass plans again from the
 * newest manifest: the compactor never fences the writer and is never fenced for good.
 * It deletes nothing it merged; the writer deletes those objects when it sees the new
 * version (its next seal or merge), or its next open collects them.
 */
#ifndef STRATA_COMPACTOR_H
#define STRATA_COMPACTOR_H

#include <stdint.h>

struct compactor;

/** What a compactor works on and how. */
struct compactor_options {
	/** Store URL (azure://...), or NULL for the fs store in dir/objects. */
	const char *store;
	/** Data directory of the fs store (unused with a store URL). Its LOCK is not taken. */
	const char *dir;
	/** Shard number. */
	uint32_t shard;
	/** Generations one merge pass folds, oldest first (0 = up to merge_max_inputs). */
	uint32_t max_generations;
	/** Fold the base runs when there are more sorted runs than this (0 = never). */
	uint32_t base_max_runs;
	/** Most inputs of one pass (>= 2). */
	uint32_t merge_max_inputs;
	/** Run-file settings of the runs written (as strata_options). */
	uint32_t block_bytes;
	int zstd_level;
	uint32_t bloom_bits_per_key;
	/** Threads a pass writes its run on (as strata_options.merge_threads, but 0 = 1). */
	uint32_t merge_threads;
	/** A pass on merge_threads > 1 splits into parts of at least this many input bytes
	 *  (as strata_options.merge_part_min_bytes; 0: the default). */
	uint64_t merge_part_min_bytes;
};

/** What one compactor pass did. */
struct compactor_pass {
	/** Generations merged into a run (0: none pending, or the pass lost). */
	uint32_t merged;
	/** Base runs folded into one (0: none). */
	uint32_t compacted;
	/** Commits that lost to the writer (STRATA_ECONFLICT or a newer epoch) and were dropped. */
	uint32_t lost;
	/** Input and output bytes of what was committed. */
	uint64_t bytes_in, bytes_out;
	/** Manifest version and writer epoch after the pass. */
	uint64_t version, epoch;
	/** Generations and sorted base runs the manifest lists after the pass. */
	uint32_t generations, runs;
};

/** Open the shard for compaction (reads the manifest; writes nothing). STRATA_EINVAL
 *  naming what is wrong (a bad option, a shard with no manifest). */
int compactor_open(const struct compactor_options *o, struct compactor **out);
/** One pass: reload the manifest, merge up to max_generations flushed generations, then
 *  fold the base runs if there are more than base_max_runs. A lost commit is counted in
 *  r->lost and is not an error; other failures are (the message says which). */
int compactor_run(struct compactor *c, struct compactor_pass *r);
/** Release everything (deletes the compactor's own unpublished runs). Safe on NULL. */
void compactor_close(struct compactor *c);

#endif
