/*
 * manifest.h — the per-shard manifest: which generations and base runs make up the
 * shard, the WAL replay cursor and the writer epoch.
 *
 * The manifest is a log. Position v is the object "<prefix>manifest/<v %020llu>",
 * written once by put-if-absent (a lost race or a fenced writer gets STRATA_EEXIST):
 * an edit ("STRMEDIT": generations and runs out and in, the scalars, and the CRC of
 * the entry before it) or a whole manifest ("STRMANIF" format 1: what every version
 * was before the log, and what a checkpoint writes). Every so many edits the writer
 * also puts a snapshot, the whole state at position S, at
 * "<prefix>manifest/snap/<S %020llu>" (STRMANIF format 2, which adds the CRC of entry
 * S). Loading is the newest snapshot and the entries after it in order; entries and
 * snapshots at or below the newest snapshot (and below current - keep) are collected.
 * A base run split by key range lists its parts with a group (manifest_obj.group);
 * a manifest or edit that holds one is written in the grouped format (whole 3 and 4,
 * edit 2), every other one exactly as before, so a store that never split reads
 * with older builds.
 * Everything is little-endian and checksummed with CRC32C; puts are atomic (a torn
 * object is never visible), so a corrupt entry is corruption, never a half-written tail.
 * writer_epoch is an ownership token: an update is fenced only when the stored epoch
 * is newer than the writer's own (stored > local => STRATA_EFENCED).
 */
#ifndef STRATA_MANIFEST_H
#define STRATA_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "../objstore/objstore.h"

/** A generation or base run named by the manifest. */
struct manifest_obj {
	/** Id, unique within the shard (allocated from next_generation). */
	uint64_t id;
	/** Epoch of the writer that created it (part of its object key). */
	uint64_t epoch;
	/** Object size in bytes. */
	uint64_t bytes;
	/** Rows in it. */
	uint64_t rows;
	/** Seq range of its rows. */
	uint64_t min_seq, max_seq;
	/** 0: a run (or generation) of its own. Otherwise this base run is one part of a
	 *  sorted run split by key range, and group is the id of its first part: the parts
	 *  are consecutive in the run list, in ascending and disjoint key order, and are
	 *  removed only together (manifest_remove_runs). Generations are never grouped. */
	uint64_t group;
};

/** Log positions whose entry CRCs a state (and its snapshot) remembers. */
#define MANIFEST_RECENT 64

/** One manifest version. */
struct manifest {
	/** Version number; the object key's suffix. */
	uint64_t version;
	/** Ownership token of the shard's writer. */
	uint64_t writer_epoch;
	/** WAL position up to which every row is in a generation or the base. */
	uint64_t replay_after;
	/** Next id for a generation or run. */
	uint64_t next_generation;
	/** Flushed generations waiting to be merged, oldest first. */
	struct manifest_obj *gens;
	/** Number of gens. */
	uint32_t ngens;
	/** Base runs, oldest first. */
	struct manifest_obj *runs;
	/** Number of runs. */
	uint32_t nruns;
	/** CRC32C of the log entry at version (what the next entry names as its predecessor). */
	uint32_t tip_crc;
	/** Position of the snapshot this state was built on or last wrote (0: none). */
	uint64_t snap_version;
	/** Log entries after snap_version. */
	uint32_t snap_edits;
	/** Bytes of those entries. */
	uint64_t snap_bytes;
	/** Lowest position whose entry CRC is in recent (0: none); at most MANIFEST_RECENT
	 *  behind version. */
	uint64_t recent_from;
	/** CRC32C of the entries at recent_from..version, at index position % MANIFEST_RECENT
	 *  (a snapshot carries them: it tells which entry held a position it covers). */
	uint32_t recent[MANIFEST_RECENT];
};

/** When a writer puts a snapshot and what it keeps (NULL or 0 members: the defaults). */
struct manifest_opts {
	/** Log entries after the newest snapshot that make the writer put a new one
	 *  (default MANIFEST_SNAPSHOT_EDITS). */
	uint32_t snapshot_edits;
	/** Bytes of those entries that make it put one sooner (default MANIFEST_SNAPSHOT_BYTES). */
	uint64_t snapshot_bytes;
	/** Positions kept behind the current one when collecting (as manifest_gc's keep). */
	uint32_t keep;
};

/** Default manifest_opts.snapshot_edits. */
#define MANIFEST_SNAPSHOT_EDITS 128
/** Default manifest_opts.snapshot_bytes. */
#define MANIFEST_SNAPSHOT_BYTES (1u << 20)
/** Largest manifest_opts.snapshot_edits accepted. */
#define MANIFEST_SNAPSHOT_EDITS_MAX 1000000

/** An object added by an edit: where it goes in the resulting list. */
struct manifest_edit_add {
	/** Index in the resulting generations (or runs). */
	uint32_t pos;
	/** The object. */
	struct manifest_obj obj;
};

/** One log entry of kind edit: what turns the state at version-1 into the state at version. */
struct manifest_edit {
	/** Log position. */
	uint64_t version;
	/** CRC32C of the entry at version-1 (0 when version is 1 or the first after a migration). */
	uint32_t prev_crc;
	/** Scalars after the edit. */
	uint64_t writer_epoch, replay_after, next_generation;
	/** Numbers of generations and runs after the edit. */
	uint32_t ngens, nruns;
	/** Ids of the generations removed. */
	uint64_t *del_gens;
	/** Number of del_gens. */
	uint32_t ndel_gens;
	/** Ids of the runs removed. */
	uint64_t *del_runs;
	/** Number of del_runs. */
	uint32_t ndel_runs;
	/** Generations added, by ascending resulting position. */
	struct manifest_edit_add *add_gens;
	/** Number of add_gens. */
	uint32_t nadd_gens;
	/** Runs added, by ascending resulting position. */
	struct manifest_edit_add *add_runs;
	/** Number of add_runs. */
	uint32_t nadd_runs;
};

/** Set in the id of a run an external compactor wrote (strata compact): such ids come
 *  from outside the writer's sequence, so they never collide with the ids the writer
 *  hands out, and they are exempt from the "below next_generation" rule. */
#define MANIFEST_EXTERNAL_ID (1ull << 63)

/** Kinds of object for manifest_obj_key. */
enum { MANIFEST_GEN = 0, MANIFEST_RUN = 1 };

/** Object key of a generation or run: "<prefix>gen/<id %016llx>-<epoch %08llx>.sst" or run/. */
void manifest_obj_key(char *dst, size_t n, const char *prefix, int kind, const struct manifest_obj *o);
/** Parse a key made by manifest_obj_key (prefix already stripped or not). 0 or STRATA_EINVAL. */
int manifest_parse_obj_key(const char *key, int *kind, uint64_t *id, uint64_t *epoch);
/** Object key of a manifest log position. */
void manifest_version_key(char *dst, size_t n, const char *prefix, uint64_t version);
/** Parse a key relative to the shard prefix: "manifest/<v>" (a log entry, *is_snap 0) or
 *  "manifest/snap/<v>" (*is_snap 1). 0, or -1 for any other name. */
int manifest_parse_log_key(const char *rel, uint64_t *v, int *is_snap);
/** Object key of the snapshot at a log position. */
void manifest_snapshot_key(char *dst, size_t n, const char *prefix, uint64_t version);

/** Encode m (appended to out). */
int manifest_encode(const struct manifest *m, struct buf *out);
/** Decode; STRATA_ECORRUPT (message naming `name`) on any inconsistency. */
int manifest_decode(const void *p, size_t n, const char *name, struct manifest *out);
/** Encode m as a snapshot (format 2: with m->tip_crc and the recent entry CRCs). */
int manifest_encode_snapshot(const struct manifest *m, struct buf *out);

/** The edit that turns cur into next (a fresh one in *e, version next->version, prev_crc
 *  cur->tip_crc): 0, 1 when the change is not an edit (objects kept in another order:
 *  write the whole manifest), or STRATA_EINVAL (a duplicate id, an id not below
 *  next_generation) / STRATA_ENOMEM. */
int manifest_diff(const struct manifest *cur, const struct manifest *next, struct manifest_edit *e);
/** Encode an edit (appended to out). */
int manifest_edit_encode(const struct manifest_edit *e, struct buf *out);
/** Decode an edit; STRATA_ECORRUPT (naming `name`) on any inconsistency. */
int manifest_edit_decode(const void *p, size_t n, const char *name, struct manifest_edit *out);
/** Apply e to m (whose version must be e->version - 1); all or nothing: STRATA_ECORRUPT
 *  naming `name` when it does not apply. m's log fields are left to the caller. */
int manifest_edit_apply(struct manifest *m, const struct manifest_edit *e, const char *name);
/** Release an edit's arrays. */
void manifest_edit_destroy(struct manifest_edit *e);

/** Called by manifest_walk for each entry of the log that a load reads, oldest first:
 *  the snapshot (edit NULL, is_snapshot 1) or a whole-manifest entry (edit NULL) with
 *  the state in m, or an edit with the state after it in m. */
typedef int (*manifest_walk_fn)(void *ctx, uint64_t version, int is_snapshot,
				const struct manifest_edit *edit, const struct manifest *m, size_t bytes);
/** Load as manifest_load does, calling fn (if not NULL) for each snapshot and entry read. */
int manifest_walk(struct objstore *os, const char *prefix, manifest_walk_fn fn, void *ctx,
		  struct manifest *out);

/** Record that the entry at position v (m->version) has CRC crc. */
void manifest_note_entry(struct manifest *m, uint64_t v, uint32_t crc);
/** The remembered CRC of the entry at position v into *crc: 1, or 0 when not known. */
int manifest_recent_crc(const struct manifest *m, uint64_t v, uint32_t *crc);

/** Deep copy. */
int manifest_copy(struct manifest *dst, const struct manifest *src);
/** Release the arrays and zero the struct. */
void manifest_destroy(struct manifest *m);
/** Append a generation / a run. */
int manifest_add_gen(struct manifest *m, const struct manifest_obj *o);
int manifest_add_run(struct manifest *m, const struct manifest_obj *o);
/** Sorted runs (a group of parts counts once) among the first n base runs of m. */
uint32_t manifest_sorted_runs(const struct manifest *m, uint32_t n);
/** Parts of the sorted run that starts at runs[i] of runs[0..n): 1 for a run of its own,
 *  else its group's consecutive parts from i. */
uint32_t manifest_run_parts(const struct manifest_obj *runs, uint32_t n, uint32_t i);
/** Index of the generation / run with that id, or -1. */
int manifest_find_gen(const struct manifest *m, uint64_t id);
int manifest_find_run(const struct manifest *m, uint64_t id);
/** Remove exactly the generations / runs whose ids are listed (STRATA_ECONFLICT if one is missing,
 *  STRATA_EINVAL if a part of a grouped run is listed without all of its group; m is then
 *  unchanged). */
int manifest_remove_gens(struct manifest *m, const uint64_t *ids, uint32_t n);
int manifest_remove_runs(struct manifest *m, const uint64_t *ids, uint32_t n);

/** Load the current state: the newest snapshot and every log entry after it (or, with no
 *  snapshot, the entries back to the newest whole manifest). STRATA_NOTFOUND if the log is
 *  empty; STRATA_ECORRUPT (naming the object) if an entry it needs does not decode, is
 *  missing, or does not follow its predecessor: it never falls back silently. */
int manifest_load(struct objstore *os, const char *prefix, struct manifest *out);
/** Claim ownership: write version+1 with writer_epoch+1 (creating version 1 with epoch 1 if
 *  none exists), retrying on a lost race. *m receives what was written. */
int manifest_claim_epoch(struct objstore *os, const char *prefix, const struct manifest_opts *o,
			 struct manifest *m);

/** Claim ownership of exactly *m (as loaded, or zeroed with next_generation 1 for a new
 *  shard): write version m->version+1 with writer_epoch+1 by put-if-absent. STRATA_EEXIST
 *  when that version exists (the manifest moved since it was read: load it again); on
 *  success *m is what was written. */
int manifest_claim_at(struct objstore *os, const char *prefix, const struct manifest_opts *o,
		      struct manifest *m);

/** Mutation applied by manifest_commit_update to a copy of the current manifest; it may be
 *  called again after a lost race (on a fresh copy). Nonzero aborts the update. */
typedef int (*manifest_mutate_fn)(void *ctx, struct manifest *next);

/** Append position cur->version+1 = mutate(copy of *cur), keeping the stored writer_epoch.
 *  Fenced (STRATA_EFENCED) when the stored epoch is newer than local_epoch. On a lost
 *  put-if-absent race, reload the latest and retry. After a create it checks that no
 *  snapshot at or above the position supersedes it (a writer stalled past a collection
 *  re-creating a collected position): STRATA_EFENCED when the position's history is
 *  another entry, STRATA_EIO (may be written) when it cannot tell. On success *cur is
 *  the written state; a snapshot follows when o says so (its failure only logs). */
int manifest_commit_update(struct objstore *os, const char *prefix, const struct manifest_opts *o,
			   uint64_t local_epoch, struct manifest *cur, manifest_mutate_fn mutate,
			   void *ctx);
/** Manifest puts, process-wide, that reported a failure and were read back: *landed
 *  those found stored intact (taken as written), *lost the others. */
void manifest_readbacks(uint64_t *landed, uint64_t *lost);
/** Collect the log behind cur: with no snapshot, put one of *cur first; then delete
 *  entries and snapshots below both the newest snapshot and cur->version - keep. */
int manifest_gc(struct objstore *os, const char *prefix, const struct manifest *cur, uint32_t keep);
/** Lowest log position manifest_gc(cur, keep) keeps, given the newest snapshot; the
 *  newest snapshot position in *snap (0: none). For leak checks. */
int manifest_gc_floor(struct objstore *os, const char *prefix, uint64_t current, uint32_t keep,
		      uint64_t *floor, uint64_t *snap);

#endif
