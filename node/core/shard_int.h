/*
 * shard_int.h — what the files of one shard share (private to node/core): the
 * refcounted pieces of a view (view.c), the k-way merge (merge_iter.c), and the
 * shard itself, whose append/read/seal/merge paths live in shard.c and whose
 * loading, ownership and closing live in recover.c.
 *
 * The view (memtables + generations + base runs a reader sees) is an immutable,
 * refcounted snapshot; writers build a new one and swap the pointer under the
 * exclusive lock. Tables (open generation/run files) are refcounted too: once a
 * commit drops a generation from the view it is marked obsolete and its object is
 * deleted when the last view or plan holding it lets go.
 */
#ifndef STRATA_SHARD_INT_H
#define STRATA_SHARD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../lib/keycmp.h"
#include "manifest.h"
#include "mem.h"
#include "reaper.h"
#include "run.h"
#include "shard.h"
#include "wal.h"

/** A memtable plus what seal needs to know about it. */
struct slot {
	/** Holders: views and in-flight appends. */
	atomic_int refs;
	/** The rows. */
	struct mem *mem;
	/** Appends assigned positions in this memtable but not yet inserted. */
	atomic_int writers;
	/** Set once sealed: no new positions are assigned to it. */
	atomic_int sealed;
	/** Set once the listener was told this memtable reached the size limit. */
	atomic_int full_reported;
	/** Highest position assigned to it (valid once sealed). */
	uint64_t cut;
};

/** An open generation or base run. */
struct table {
	/** Holders: views and plans. */
	atomic_int refs;
	/** The reader. */
	struct run_reader *r;
	/** The manifest entry. */
	struct manifest_obj obj;
	/** MANIFEST_GEN or MANIFEST_RUN. */
	int kind;
	/** Set when no manifest references it any more: its object goes with its last ref. */
	atomic_int obsolete;
	/** Object store holding it. */
	struct objstore *os;
	/** Where it goes once obsolete and unreferenced. */
	struct reaper *reaper;
	/** Object key. */
	char key[160];
};

/** A generation's probe, cached in the view (see view.ghint). */
struct view_hint {
	const struct table *t;
	const struct run_probe *pr;
};

/** What readers see. Immutable once published. */
struct view {
	/** Holders. */
	atomic_int refs;
	/** Memtable receiving appends. */
	struct slot *active;
	/** Sealed memtables not yet published as generations, oldest first. */
	struct slot **sealed;
	uint32_t nsealed;
	/** Generations, oldest first. */
	struct table **gens;
	uint32_t ngens;
	/** Beside gens (same capacity; NULL: none): the resident probe of gens[i] when
	 *  hint[i].t is gens[i], so a get across a backlog reads two dense arrays and the
	 *  probes, not every table and reader. Filled by gets (atomics: probe first, then
	 *  the table), copied by view_clone where still valid, entries that no longer match
	 *  cleared by view_swap before the view is published (a seal publishes its clone
	 *  directly: it edits no generation). */
	struct view_hint *ghint;
	/** Base runs, oldest first. */
	struct table **runs;
	uint32_t nruns;
};

/** Kinds of plan. */
enum { PLAN_MERGE = 0, PLAN_COMPACT = 1 };

struct shard_plan {
	/** Shard it belongs to. */
	struct shard *s;
	/** PLAN_MERGE (generations -> run) or PLAN_COMPACT (runs -> run). */
	int kind;
	/** Ids of the inputs, oldest first. */
	uint64_t *ids;
	uint32_t nids;
	/** The inputs (held so their objects outlive the merge). */
	struct table **inputs;
	/** The runs written, in key order: one, or the parts of a split pass (their
	 *  manifest_obj.group set); none for an empty plan. */
	struct table **outs;
	uint32_t nouts;
	/** Input rows the pass's parts have read (its progress). */
	_Atomic(uint64_t) rows_read;
	/** Set when a part of a split pass failed: the others stop at their next block
	 *  (their work is lost anyway, and on a full disk it would only take more). */
	atomic_int parts_stop;
	/** Input bytes. */
	uint64_t bytes_in;
	/** A tombstone with a seq below this hides nothing outside the inputs, so the
	 *  written run drops it: the least min_seq of every table that is not an input
	 *  (0 keeps every tombstone). */
	uint64_t drop_below;
};

struct shard_listing;

struct shard {
	/** Settings. */
	struct shard_config cfg;
	/** The objects the load's check listed, kept for the start's orphan collection (so
	 *  an open lists a shard's objects once); NULL once used or dropped. */
	struct shard_listing *listing;
	/** The shard lock (see shard.h). */
	pthread_rwlock_t rw;
	/** Serialises manifest updates and every change of view (whoever clones the view
	 *  to edit it holds this, so no edit is lost to a concurrent swap). */
	pthread_mutex_t manifest_mu;
	/** One seal/flush at a time. */
	pthread_mutex_t seal_mu;
	/** Waits for a sealed memtable's in-flight appends. */
	pthread_mutex_t writers_mu;
	pthread_cond_t writers_cv;
	/** Current view; replaced under rw exclusive. */
	struct view *view;
	/** Latest manifest this writer knows (under manifest_mu). */
	struct manifest man;
	/** This writer's ownership token. */
	uint64_t epoch;
	/** Next generation/run id. */
	atomic_uint_fast64_t next_id;
	/** The WAL. */
	struct wal *wal;
	/** An external compactor's handle (shard_load_external): no WAL, no memtable, the
	 *  writer's epoch adopted and never claimed, runs with MANIFEST_EXTERNAL_ID ids,
	 *  and nothing it merged deleted by it (the shard's writer does that). */
	int external;
	/** Manifest versions this handle found written by someone else (a compactor, or
	 *  for a compactor the writer) and reconciled its view with. */
	atomic_uint_fast64_t foreign_versions;
	/** Set once this writer learned that another one claimed the shard: terminal,
	 *  appends and reads are refused with STRATA_EFENCED. */
	atomic_int fenced;
	/** Per plan kind (PLAN_MERGE, PLAN_COMPACT): a plan is being prepared or awaits
	 *  commit; a second prepare of that kind gets STRATA_EBUSY before any IO. */
	atomic_int busy[2];
	/** Effective per-pass input cap: merge_max_inputs, possibly narrowed by a policy. */
	atomic_uint merge_cap;
	/** Effective threads of a merge or compaction pass: merge_threads, possibly narrowed
	 *  by a policy. */
	atomic_uint merge_threads;
	/** A manifest write failed in a way that may have landed: the manifest is reloaded
	 *  and the view reconciled before the next manifest operation (under manifest_mu). */
	int man_uncertain;
	/** Highest position covered by a seal. */
	uint64_t last_cut;
	/** Who hears about seals and full memtables (NULL = nobody). */
	_Atomic(const struct store_listener *) listener;
	/** Memtable size that triggers on_memtable_full (0 = none). */
	atomic_uint_fast64_t mem_limit;
	/** Threads between loading the listener and returning from its callback. */
	atomic_int cb_inflight;
	/** Counters for stats. */
	atomic_uint_fast64_t appends, rows_appended, seals, merges, conflicts, merged_gens,
		merge_in, merge_out, compactions, max_excl_ns, max_excl_wait_ns;
	/** The merge or compaction being written (plan_write): its input bytes (0: none) and
	 *  the part read so far, estimated from the rows read. */
	_Atomic(uint64_t) prog_total, prog_done;
	/** Time this shard's background writes waited on the store's IO budget. */
	_Atomic(uint64_t) io_wait_ns;
	/** How the shard's run writers stored their data blocks. */
	struct run_codec_stats codec;
	/** Runs written as the parts of split passes. */
	_Atomic(uint64_t) split_parts;
	/** Lookups of this shard's readers that found (hits) or missed (misses) their block or
	 *  partition in the block cache. */
	_Atomic(uint64_t) cache_hits, cache_misses;
};


/** One input of a k-way merge: a memtable or a run iterator. */
struct source {
	/** Run iterator, or NULL for a memtable source. */
	struct run_iter *it;
	/** The parts of a grouped run still to read after it's (merger_add_runs): read in
	 *  turn, one iterator at a time, so a split run costs one block like any other. */
	struct table *const *chain;
	uint32_t chain_left;
	/** Where the chain's iterators start. */
	const void *start;
	size_t start_len;
	/** Memtable iterator (when it == NULL). */
	struct mem_iter mi;
	/** Current row. */
	const void *key, *val;
	size_t klen, vlen;
	uint64_t seq;
	/** Kind of the current row: STRATA_ROW_PUT or STRATA_ROW_DELETE (a tombstone). */
	uint32_t kind;
};

/** A min-heap of sources. */
struct merger {
	/** Live sources, heap-ordered. */
	struct source **heap;
	uint32_t n;
	/** All sources (for freeing). */
	struct source *all;
	uint32_t nall;
};

/*
 * A merge cursor yields each distinct key once, with its newest version (a tombstone
 * too: the caller skips or keeps it). The
 * winning source is advanced only at the next call, so the returned row stays
 * valid until then.
 */
struct merge_cursor {
	/** The heap. */
	struct merger m;
	/** The source whose row was returned last, advanced at the next call. */
	struct source *win;
};

/* shard.c */
/** manifest_mu held: if an earlier manifest write may have landed unseen, reload the
 *  manifest and bring the view in line with it before anything builds on either. */
int shard_resync(struct shard *s);

/* view.c */
/** A fresh empty memtable slot with one reference; NULL on ENOMEM. */
struct slot *slot_new(int huge_pages);
void slot_unref(struct slot *sl);
/** Open the table of a manifest entry (kind MANIFEST_GEN or MANIFEST_RUN). */
int table_open(struct shard *s, int kind, const struct manifest_obj *o, struct table **out);
/** table_open that reads the object at its first use (footer, index, filter). */
int table_open_lazy(struct shard *s, int kind, const struct manifest_obj *o, struct table **out);
/** Drop a reference; the last one closes the reader and deletes an obsolete object. */
void table_unref(struct table *t);
void view_unref(struct view *v);
/** A new view sharing (and referencing) everything of old, with room for extra more. */
struct view *view_clone(const struct view *old, uint32_t extra);
/** Pin the current view (shared lock held just long enough to take a reference). */
struct view *view_pin(struct shard *s);
/** Take / release the exclusive lock (the release records the longest hold). */
void excl_lock(struct shard *s, uint64_t *t0);
void excl_unlock(struct shard *s, uint64_t t0);
/** Swap in v (consumes the caller's reference); returns the old view to unref. */
struct view *view_swap(struct shard *s, struct view *v);
/** manifest_mu held: rebuild the view's tables from s->man (see view.c). */
int view_reconcile(struct shard *s);
/** view_reconcile where the manifest names mine[0..nmine) (the tables the caller's own
 *  update just published): those are used, not opened again, so one swap shows the
 *  foreign change and the caller's at once. nmine 0: view_reconcile. */
int view_reconcile_with(struct shard *s, struct table *const *mine, uint32_t nmine);

/* merge_iter.c */
/** A heap for up to cap sources. */
int merger_create(struct merger *m, uint32_t cap);
/** Add a memtable / a run, positioned at the first key >= start. */
void merger_add_mem(struct merger *m, struct mem *mem, const void *start, size_t start_len);
int merger_add_run(struct merger *m, struct run_reader *r, const void *start, size_t start_len);
/** Add the runs tabs[0..n) (a view's or a plan's, oldest first) as sources: the parts of
 *  a grouped run (manifest_obj.group) make one source that reads them in key order.
 *  The tables must outlive the merger. */
int merger_add_runs(struct merger *m, struct table *const *tabs, uint32_t n, const void *start,
		    size_t start_len);
/** Order the heap once every source is added. */
void merger_build(struct merger *m);
void merger_destroy(struct merger *m);
/** 1 and the next row (newest version of the next key), 0 at the end, <0 on error. */
int merge_cursor_next(struct merge_cursor *c, struct source *row);

#endif
