/*
 * manifest.h — the per-shard manifest: which generations and base runs make up the
 * shard, the WAL replay cursor and the writer epoch.
 *
 * Versions are objects "<prefix>manifest/<version %020llu>", written with
 * put-if-absent so a lost race is detected; the highest version is current. The
 * encoding is binary, little-endian, with a magic, a format version and a CRC32C.
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
};

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
/** Object key of a manifest version. */
void manifest_version_key(char *dst, size_t n, const char *prefix, uint64_t version);

/** Encode m (appended to out). */
int manifest_encode(const struct manifest *m, struct buf *out);
/** Decode; STRATA_ECORRUPT (message naming `name`) on any inconsistency. */
int manifest_decode(const void *p, size_t n, const char *name, struct manifest *out);
/** Deep copy. */
int manifest_copy(struct manifest *dst, const struct manifest *src);
/** Release the arrays and zero the struct. */
void manifest_destroy(struct manifest *m);
/** Append a generation / a run. */
int manifest_add_gen(struct manifest *m, const struct manifest_obj *o);
int manifest_add_run(struct manifest *m, const struct manifest_obj *o);
/** Index of the generation / run with that id, or -1. */
int manifest_find_gen(const struct manifest *m, uint64_t id);
int manifest_find_run(const struct manifest *m, uint64_t id);
/** Remove exactly the generations / runs whose ids are listed (STRATA_ECONFLICT if one is missing;
 *  m is then unchanged). */
int manifest_remove_gens(struct manifest *m, const uint64_t *ids, uint32_t n);
int manifest_remove_runs(struct manifest *m, const uint64_t *ids, uint32_t n);

/** Load the highest version under prefix. STRATA_NOTFOUND if none exists; STRATA_ECORRUPT
 *  (naming the object) if the highest version does not decode: it never falls back silently. */
int manifest_load(struct objstore *os, const char *prefix, struct manifest *out);
/** Claim ownership: write version+1 with writer_epoch+1 (creating version 1 with epoch 1 if
 *  none exists), retrying on a lost race. *m receives what was written. */
int manifest_claim_epoch(struct objstore *os, const char *prefix, struct manifest *m);

/** Claim ownership of exactly *m (as loaded, or zeroed with next_generation 1 for a new
 *  shard): write version m->version+1 with writer_epoch+1 by put-if-absent. STRATA_EEXIST
 *  when that version exists (the manifest moved since it was read: load it again); on
 *  success *m is what was written. */
int manifest_claim_at(struct objstore *os, const char *prefix, struct manifest *m);

/** Mutation applied by manifest_commit_update to a copy of the current manifest; it may be
 *  called again after a lost race (on a fresh copy). Nonzero aborts the update. */
typedef int (*manifest_mutate_fn)(void *ctx, struct manifest *next);

/** Write version cur->version+1 = mutate(copy of *cur), keeping the stored writer_epoch.
 *  Fenced (STRATA_EFENCED) when the stored epoch is newer than local_epoch. On a lost
 *  put-if-absent race, reload the latest and retry. On success *cur is the written version. */
int manifest_commit_update(struct objstore *os, const char *prefix, uint64_t local_epoch,
			   struct manifest *cur, manifest_mutate_fn mutate, void *ctx);
/** Manifest puts, process-wide, that reported a failure and were read back: *landed
 *  those found stored intact (taken as written), *lost the others. */
void manifest_readbacks(uint64_t *landed, uint64_t *lost);
/** Delete manifest versions below current - keep. */
int manifest_gc(struct objstore *os, const char *prefix, uint64_t current, uint32_t keep);

#endif
