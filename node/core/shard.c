/*
 * shard.c — the data paths of one shard: append, get, scan, seal, prepare, commit,
 * fencing, and the manifest updates they make. The pieces they share are in
 * shard_int.h (view.c, merge_iter.c); loading and closing are in recover.c.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/bcache.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/fiber.h"
#include "../lib/trace.h"
#include "../lib/ratelimit.h"
#include "shard_int.h"
#include "store.h"

static int
fenced_error(struct shard *s)
{
	return diag_set(STRATA_EFENCED, "shard %u: fenced: another writer claimed a newer epoch "
			"(this writer's epoch %llu); this handle no longer owns the shard", s->cfg.id,
			(unsigned long long)s->epoch);
}

/** Turn the shard terminal after learning of a newer owner (message in diag). */
static void
shard_fence(struct shard *s)
{
	if (atomic_exchange(&s->fenced, 1) == 0) {
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		if (s->wal != NULL)
			wal_fence(s->wal, why);
	}
}

void
shard_fence_local(struct shard *s, const char *why)
{
	if (atomic_exchange(&s->fenced, 1) == 0 && s->wal != NULL) {
		char msg[512];
		snprintf(msg, sizeof(msg), "shard %u: %s; this node no longer serves it", s->cfg.id, why);
		wal_give_up(s->wal, msg);
	}
}

int
shard_is_fenced(struct shard *s)
{
	return atomic_load(&s->fenced) || (s->wal != NULL && wal_failed(s->wal) == STRATA_EFENCED);
}

int
shard_owner_check(struct shard *s, uint64_t max_age_ns)
{
	if (atomic_load(&s->fenced))
		return fenced_error(s);
	if (s->wal == NULL || !s->cfg.wal_store)
		return 0;
	int rc = wal_owner_check(s->wal, max_age_ns);
	if (rc == STRATA_EFENCED) {
		atomic_store(&s->fenced, 1);
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		rc = diag_set(STRATA_EFENCED, "shard %u: %s", s->cfg.id, why);
	} else if (rc) {
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		rc = diag_set(rc, "shard %u: %s", s->cfg.id, why);
	}
	return rc;
}

/** A get or scan: refused once the shard is fenced, or while this handle cannot be sure
 *  it still owns the shard (wal = store: its last look at the epoch object is older than
 *  owner_check_ns and a look now fails or finds a newer owner). */
static int
shard_read_check(struct shard *s)
{
	if (atomic_load(&s->fenced))
		return fenced_error(s);
	return s->cfg.wal_store ? shard_owner_check(s, s->cfg.owner_check_ns) : 0;
}

uint64_t
shard_epoch(struct shard *s)
{
	return s->epoch;
}

/** 1 when a failed manifest update surely wrote nothing (fenced, or the plan no longer
 *  applied); other failures may have published the new version. */
static int
manifest_update_not_written(int rc)
{
	return rc == STRATA_EFENCED || rc == STRATA_ECONFLICT || rc == STRATA_EINVAL ||
	       rc == STRATA_EINJECTED;
}

/** manifest_mu held: load the newest manifest and bring s->man and the view in line
 *  with it. A newer epoch fences a writer (another one claimed the shard); the same
 *  epoch at a newer version is an external compactor's commit: adopted, not a fence. A
 *  compactor's handle adopts a newer epoch too (it never owns the shard). */
static int
shard_reload(struct shard *s)
{
	struct manifest m;
	int rc = manifest_load(s->cfg.os, s->cfg.prefix, &m);
	if (rc)
		return rc;
	if (m.writer_epoch > s->epoch && !s->external) {
		manifest_destroy(&m);
		rc = fenced_error(s);
		shard_fence(s);
		return rc;
	}
	if (m.version < s->man.version) {
		manifest_destroy(&m);
		return diag_set(STRATA_ECORRUPT, "shard %u: the manifest went back from version %llu",
				s->cfg.id, (unsigned long long)s->man.version);
	}
	if (m.version == s->man.version && !s->man_uncertain) {
		manifest_destroy(&m);
		return 0;
	}
	if (s->external)
		s->epoch = m.writer_epoch;
	manifest_destroy(&s->man);
	s->man = m;
	rc = view_reconcile(s);
	if (rc == 0)
		s->man_uncertain = 0;
	return rc;
}

int
shard_resync(struct shard *s)
{
	if (!s->man_uncertain)
		return 0;
	return shard_reload(s);
}

int
shard_refresh(struct shard *s)
{
	pthread_mutex_lock(&s->manifest_mu);
	uint64_t before = s->man.version;
	int rc = atomic_load(&s->fenced) ? fenced_error(s) : shard_reload(s);
	if (rc == 0 && s->man.version != before)
		atomic_fetch_add(&s->foreign_versions, 1);
	pthread_mutex_unlock(&s->manifest_mu);
	return rc;
}

uint64_t
shard_foreign_versions(struct shard *s)
{
	return atomic_load(&s->foreign_versions);
}

/** Run a manifest update under manifest_mu (held by the caller) that publishes the
 *  tables mine[0..nmine). When the update found versions someone else wrote, the view
 *  is rebuilt from the written manifest, mine included, in one swap, and *published is
 *  set: the caller's own edit of the view is then done already. */
static int
shard_manifest_update(struct shard *s, manifest_mutate_fn fn, void *ctx, struct table *const *mine,
		      uint32_t nmine, int *published)
{
	*published = 0;
	int rc = shard_resync(s);
	if (rc)
		return rc;
	uint64_t before = s->man.version;
	rc = manifest_commit_update(s->cfg.os, s->cfg.prefix, &s->cfg.manifest, s->epoch, &s->man, fn, ctx);
	if (rc == STRATA_EFENCED) {
		if (s->external)
			s->man_uncertain = 1; /* the writer moved on: adopt its epoch at the reload */
		else
			shard_fence(s);
		return rc;
	}
	if (rc != 0 && !manifest_update_not_written(rc)) {
		s->man_uncertain = 1;
		return rc;
	}
	if (s->man.version != before + (rc == 0)) {
		/* The update found newer versions than ours: an external compactor's commit
		 * (or, for a compactor, the writer's), or one of our own writes that reported
		 * failure but had landed. What they changed is not in the view yet. Also when
		 * this update then lost (its plan no longer applied): the view must follow. */
		atomic_fetch_add(&s->foreign_versions, 1);
		diag_log(LOG_LVL_INFO, "shard %u: manifest moved from version %llu to %llu under us; "
			 "reconciling the view", s->cfg.id, (unsigned long long)before,
			 (unsigned long long)s->man.version - (rc == 0));
		char why[512];
		snprintf(why, sizeof(why), "%s", rc ? diag_last() : "");
		int vrc = view_reconcile_with(s, mine, rc == 0 ? nmine : 0);
		if (vrc == 0 && rc == 0)
			*published = 1;
		if (vrc) {
			s->man_uncertain = 1;
			diag_log(LOG_LVL_WARN, "shard %u: reconciling the view: %s (retried before the "
				 "next manifest update)", s->cfg.id, diag_last());
		}
		if (rc)
			diag_set(rc, "%s", why);
	}
	return rc;
}

/* ---------- append ---------- */

int
shard_append(struct shard *s, const strata_row *rows, size_t n, uint64_t *last_seq)
{
	/* The rows were checked by the store (store_check_row); the WAL checks its entry. */
	if (atomic_load(&s->fenced))
		return fenced_error(s);
	/* The copies and checksums are made with no lock held; the shared lock covers only
	 * checking that the memtable is still the active one and taking positions. */
	struct wal_ticket t;
	struct mem_batch *mb = NULL;
	struct slot *sl = NULL;
	int rc = 0;
	for (;;) {
		pthread_rwlock_rdlock(&s->rw);
		sl = s->view->active;
		atomic_fetch_add(&sl->refs, 1);
		atomic_fetch_add(&sl->writers, 1);
		pthread_rwlock_unlock(&s->rw);
		/* Every allocation the memtable needs happens before the WAL write, so that once
		 * the rows are durable, making them visible cannot fail half way. */
		struct wal_entry *we = NULL;
		rc = mem_batch_new(sl->mem, rows, n, &mb);
		if (rc == 0)
			rc = wal_encode(s->wal, rows, n, &we);
		if (rc)
			break;
		pthread_rwlock_rdlock(&s->rw);
		int still_active = s->view->active == sl;
		if (still_active)
			rc = wal_submit_encoded(s->wal, we, &t);
		pthread_rwlock_unlock(&s->rw);
		if (still_active)
			break;
		/* A seal swapped the memtable meanwhile: prepare again for the new one. */
		wal_entry_free(we);
		mem_batch_free(mb);
		mb = NULL;
		if (atomic_fetch_sub(&sl->writers, 1) == 1) {
			pthread_mutex_lock(&s->writers_mu);
			pthread_cond_broadcast(&s->writers_cv);
			pthread_mutex_unlock(&s->writers_mu);
		}
		slot_unref(sl);
	}
	if (rc == 0)
		rc = wal_wait(s->wal, &t);
	if (rc == STRATA_EFENCED)
		atomic_store(&s->fenced, 1);
	if (rc == 0 && env_point(ENV_POINT_APPEND_DURABLE, s) != 0)
		rc = diag_set(STRATA_EINJECTED, "shard %u: injected failure at append.durable", s->cfg.id);
	if (rc == 0) {
		mem_batch_insert(mb, t.first_seq); /* consumes mb */
		mb = NULL;
	}
	mem_batch_free(mb);
	if (atomic_fetch_sub(&sl->writers, 1) == 1 && atomic_load(&sl->sealed)) {
		pthread_mutex_lock(&s->writers_mu);
		pthread_cond_broadcast(&s->writers_cv);
		pthread_mutex_unlock(&s->writers_mu);
	}
	if (rc == 0 && env_point(ENV_POINT_APPEND_INSERTED, s) != 0)
		rc = diag_set(STRATA_EINJECTED, "shard %u: injected failure at append.inserted", s->cfg.id);
	uint64_t limit = atomic_load(&s->mem_limit);
	if (rc == 0 && limit != 0 && mem_bytes(sl->mem) >= limit &&
	    atomic_exchange(&sl->full_reported, 1) == 0) {
		atomic_fetch_add(&s->cb_inflight, 1);
		const struct store_listener *l = atomic_load(&s->listener);
		if (l != NULL && l->on_memtable_full != NULL)
			l->on_memtable_full(l->ctx, s->cfg.id, mem_bytes(sl->mem));
		atomic_fetch_sub(&s->cb_inflight, 1);
	}
	slot_unref(sl);
	if (rc)
		return rc;
	atomic_fetch_add(&s->appends, 1);
	atomic_fetch_add(&s->rows_appended, n);
	TRACE(s->cfg.trace, APPEND, s->cfg.id, t.first_seq, t.last_seq, n);
	if (last_seq != NULL)
		*last_seq = t.last_seq;
	return 0;
}

/* ---------- reads ---------- */

static int
copy_value(const void *val, size_t vlen, void **out, size_t *out_len)
{
	void *p = env.malloc(vlen ? vlen : 1);
	if (p == NULL)
		return diag_set(STRATA_ENOMEM, "out of memory copying a value of %zu bytes", vlen);
	if (vlen)
		memcpy(p, val, vlen);
	*out = p;
	*out_len = vlen;
	return 0;
}

/** shard_last_get_cost's figures, per thread. */
static __thread struct shard_get_cost shard_get_last;

struct shard_get_cost
shard_last_get_cost(void)
{
	return shard_get_last;
}

int
shard_get(struct shard *s, const void *key, size_t klen, void **val, size_t *vlen)
{
	shard_get_last = (struct shard_get_cost){0, 0};
	int crc = shard_read_check(s);
	if (crc)
		return crc;
	struct view *v = view_pin(s);
	uint64_t seq;
	const void *mv;
	size_t ml;
	uint32_t kind = STRATA_ROW_PUT;
	int rc = mem_get_kind(v->active->mem, key, klen, &seq, &mv, &ml, &kind);
	for (uint32_t i = v->nsealed; rc == STRATA_NOTFOUND && i-- > 0;)
		rc = mem_get_kind(v->sealed[i]->mem, key, klen, &seq, &mv, &ml, &kind);
	if (rc == 0) {
		rc = kind == STRATA_ROW_DELETE ? STRATA_NOTFOUND : copy_value(mv, ml, val, vlen);
		view_unref(v);
		return rc;
	}
	/* Tables: take the highest seq over all of them (a compacted run may be
	 * listed after newer runs; correctness must not depend on list order). A table
	 * whose rows are all older than the best row found so far is not searched. */
	struct run_key rk;
	run_key_init(&rk, key, klen);
	uint64_t best_seq = 0;
	void *best = NULL;
	size_t best_len = 0;
	rc = STRATA_NOTFOUND;
	struct table **lists[2] = {v->gens, v->runs};
	uint32_t counts[2] = {v->ngens, v->nruns};
	shard_get_last.tables = v->ngens + v->nruns;
	for (int l = 0; l < 2; l++) {
		struct table **tabs = lists[l];
		struct view_hint *hint = l == 0 ? v->ghint : NULL;
		for (uint32_t i = counts[l]; i-- > 0;) {
			uint64_t floor = best == NULL ? 0 : best_seq;
			/* A backlog is thousands of tables: start the next ones' loads, through
			 * the hint where it names the table (no table or reader touched). */
			if (i >= 8 && hint != NULL &&
			    __atomic_load_n(&hint[i - 8].t, __ATOMIC_ACQUIRE) == tabs[i - 8]) {
				run_probe_prefetch(__atomic_load_n(&hint[i - 8].pr, __ATOMIC_RELAXED));
			} else {
				if (i >= 24)
					__builtin_prefetch(tabs[i - 24]);
				if (i >= 16)
					__builtin_prefetch(tabs[i - 16]->r);
				if (i >= 8)
					run_reader_prefetch(tabs[i - 8]->r);
			}
			struct table *t = tabs[i];
			if (hint != NULL) {
				if (__atomic_load_n(&hint[i].t, __ATOMIC_ACQUIRE) == t) {
					const struct run_probe *pr =
						__atomic_load_n(&hint[i].pr, __ATOMIC_RELAXED);
					if (!run_probe_may_hold(pr, &rk, floor))
						continue;
				} else {
					/* None yet: this lookup builds the probe, if it is ever built. */
					const struct run_probe *pr = run_reader_probe(t->r);
					if (pr != NULL) {
						__atomic_store_n(&hint[i].pr, pr, __ATOMIC_RELAXED);
						__atomic_store_n(&hint[i].t, t, __ATOMIC_RELEASE);
					}
				}
			}
			uint64_t tseq;
			void *tv;
			size_t tl;
			uint32_t tkind = STRATA_ROW_PUT;
			shard_get_last.searched++;
			int trc = run_reader_find(t->r, &rk, floor, &tseq, &tv, &tl, &tkind);
			if (trc == STRATA_NOTFOUND)
				continue;
			if (trc) {
				env.free(best);
				view_unref(v);
				return trc;
			}
			if (best == NULL || tseq > best_seq) {
				env.free(best);
				best = tv;
				best_len = tl;
				best_seq = tseq;
				kind = tkind;
			} else {
				env.free(tv);
			}
			rc = 0;
		}
	}
	view_unref(v);
	if (rc == 0 && kind == STRATA_ROW_DELETE) {
		env.free(best);
		rc = STRATA_NOTFOUND;
	}
	if (rc == 0) {
		*val = best;
		*vlen = best_len;
	}
	return rc;
}

int
shard_scan(struct shard *s, const void *start, size_t start_len, const void *end, size_t end_len,
	   int (*cb)(void *ctx, const strata_row *row), void *ctx)
{
	int crc = shard_read_check(s);
	if (crc)
		return crc;
	struct view *v = view_pin(s);
	struct merge_cursor c = {.win = NULL};
	int rc = merger_create(&c.m, 1 + v->nsealed + v->ngens + v->nruns);
	if (rc) {
		view_unref(v);
		return rc;
	}
	merger_add_mem(&c.m, v->active->mem, start, start_len);
	for (uint32_t i = 0; i < v->nsealed; i++)
		merger_add_mem(&c.m, v->sealed[i]->mem, start, start_len);
	for (uint32_t i = 0; rc == 0 && i < v->ngens; i++)
		rc = merger_add_run(&c.m, v->gens[i]->r, start, start_len);
	if (rc == 0)
		rc = merger_add_runs(&c.m, v->runs, v->nruns, start, start_len);
	if (rc == 0) {
		merger_build(&c.m);
		struct source row;
		while ((rc = merge_cursor_next(&c, &row)) == 1) {
			if (end != NULL && key_cmp(row.key, row.klen, end, end_len) >= 0) {
				rc = 0;
				break;
			}
			if (row.kind == STRATA_ROW_DELETE)
				continue;
			strata_row r = {row.key, row.klen, row.val, row.vlen};
			rc = cb(ctx, &r);
			if (rc)
				break;
		}
	}
	merger_destroy(&c.m);
	view_unref(v);
	return rc;
}

/* ---------- seal ---------- */

/** Context of the manifest mutation that publishes a generation. */
struct seal_update {
	/** The new generation. */
	struct manifest_obj obj;
	/** New replay cursor. */
	uint64_t cut;
};

static int
seal_mutate(void *ctx, struct manifest *next)
{
	struct seal_update *u = ctx;
	int rc = manifest_add_gen(next, &u->obj);
	if (rc)
		return rc;
	if (u->cut > next->replay_after)
		next->replay_after = u->cut;
	if (next->next_generation <= u->obj.id)
		next->next_generation = u->obj.id + 1;
	return 0;
}

/** Write a run from a memtable (newest version of each key). */
static int
write_mem_run(struct shard *s, struct mem *mem, const char *key, struct run_meta *meta)
{
	struct run_writer *w;
	struct run_writer_options ro = s->cfg.run;
	ro.pow2_filters = 1;
	/* Generations are what a backlog is made of: denser filters, probed without a
	 * division (see run.c's format). */
	ro.bloom_bits_per_key = s->cfg.gen_bloom_bits_per_key ? s->cfg.gen_bloom_bits_per_key
							      : s->cfg.run.bloom_bits_per_key;
	ro.bloom_k_bits_per_key = s->cfg.run.bloom_bits_per_key;
	int rc = run_writer_open(s->cfg.os, key, &ro, &w);
	if (rc)
		return rc;
	struct mem_iter it;
	const void *prev = NULL;
	size_t prev_len = 0;
	uint64_t blocks = 0, bytes = 0;
	for (mem_iter_seek(&it, mem, NULL, 0); mem_iter_valid(&it); mem_iter_next(&it)) {
		const void *k, *v;
		size_t kl, vl;
		uint64_t seq;
		mem_iter_entry(&it, &k, &kl, &seq, &v, &vl);
		if (prev != NULL && key_cmp(prev, prev_len, k, kl) == 0)
			continue; /* an older version of the key just written */
		rc = run_writer_add_kind(w, k, kl, seq, v, vl, mem_iter_kind(&it));
		if (rc) {
			run_writer_abort(w);
			return rc;
		}
		prev = k;
		prev_len = kl;
		bytes += kl + vl;
		/* A block written is a chunk of the flush (inline mode: lib/fiber.h). */
		if (run_writer_blocks(w) != blocks) {
			blocks = run_writer_blocks(w);
			fiber_yield(bytes);
			bytes = 0;
		}
	}
	return run_writer_finish(w, meta);
}

/** Flush the oldest sealed memtable as a generation and publish it. seal_mu held. */
static int
flush_one(struct shard *s, struct slot *sl)
{
	/* Every append assigned a position in this memtable must have inserted. */
	if (atomic_load(&sl->writers) > 0)
		env_point(ENV_POINT_SEAL_WAITING, s);
	pthread_mutex_lock(&s->writers_mu);
	while (atomic_load(&sl->writers) > 0)
		pthread_cond_wait(&s->writers_cv, &s->writers_mu);
	pthread_mutex_unlock(&s->writers_mu);

	/* After a publish that reported failure but may have landed, learn first whether
	 * this memtable is in a generation already (rewriting it would only duplicate). */
	pthread_mutex_lock(&s->manifest_mu);
	int rc = shard_resync(s);
	int still_sealed = 0;
	for (uint32_t i = 0; rc == 0 && i < s->view->nsealed; i++)
		still_sealed |= s->view->sealed[i] == sl;
	pthread_mutex_unlock(&s->manifest_mu);
	if (rc || !still_sealed)
		return rc;

	struct table *t = NULL;
	int published = 0;
	struct seal_update u = {.cut = sl->cut};
	if (mem_rows(sl->mem) > 0) {
		u.obj.id = atomic_fetch_add(&s->next_id, 1);
		u.obj.epoch = s->epoch;
		char key[160];
		manifest_obj_key(key, sizeof(key), s->cfg.prefix, MANIFEST_GEN, &u.obj);
		struct run_meta meta;
		rc = write_mem_run(s, sl->mem, key, &meta);
		if (rc)
			return rc;
		u.obj.bytes = meta.bytes;
		u.obj.rows = meta.rows;
		u.obj.min_seq = meta.min_seq;
		u.obj.max_seq = meta.max_seq;
		fiber_yield(FIBER_SYNC_COST); /* the run's end (index, footer, syncs) was a chunk */
		if ((rc = env_point(ENV_POINT_SEAL_FLUSHED, s)) != 0) {
			objstore_del(s->cfg.os, key);
			return diag_set(STRATA_EINJECTED, "shard %u: injected failure at seal.flushed",
					s->cfg.id);
		}
		rc = table_open(s, MANIFEST_GEN, &u.obj, &t);
		if (rc) {
			objstore_del(s->cfg.os, key);
			return rc;
		}
	}
	if (t != NULL)
		fiber_yield(FIBER_SYNC_COST); /* opening the new table read its index: a chunk */
	pthread_mutex_lock(&s->manifest_mu);
	/* An empty memtable (its appends all failed) publishes nothing: the cursor stays
	 * and the unacknowledged entries may reappear on replay, which is allowed. */
	if (t != NULL)
		rc = shard_manifest_update(s, seal_mutate, &u, &t, 1, &published);
	if (rc) {
		pthread_mutex_unlock(&s->manifest_mu);
		if (t != NULL) {
			/* Delete the generation only when the manifest surely does not name it;
			 * after an indeterminate failure the orphan collector decides at open. */
			if (manifest_update_not_written(rc))
				atomic_store(&t->obsolete, 1);
			table_unref(t);
		}
		return rc;
	}
	/* Publish: replace the sealed memtable by its generation (done already when the
	 * update had to follow someone else's versions: the reconciled view holds t). */
	struct view *old = NULL;
	if (published) {
		table_unref(t);
	} else {
		struct view *v = view_clone(s->view, 1);
		if (v == NULL) {
			pthread_mutex_unlock(&s->manifest_mu);
			table_unref(t); /* referenced by the manifest now: never delete it here */
			return diag_set(STRATA_ENOMEM, "shard %u: out of memory publishing a generation",
					s->cfg.id);
		}
		uint32_t j = 0;
		for (uint32_t i = 0; i < v->nsealed; i++) {
			if (v->sealed[i] == sl)
				slot_unref(sl);
			else
				v->sealed[j++] = v->sealed[i];
		}
		v->nsealed = j;
		if (t != NULL)
			v->gens[v->ngens++] = t;
		old = view_swap(s, v);
	}
	if (u.cut > s->last_cut)
		s->last_cut = u.cut;
	uint64_t version = s->man.version; /* a commit may replace s->man once we unlock */
	pthread_mutex_unlock(&s->manifest_mu);
	view_unref(old);
	if (t != NULL) {
		TRACE(s->cfg.trace, SEAL, s->cfg.id, u.obj.id, u.obj.rows, u.obj.bytes, u.cut,
		      version);
		atomic_fetch_add(&s->seals, 1);
		atomic_fetch_add(&s->cb_inflight, 1);
		const struct store_listener *l = atomic_load(&s->listener);
		if (l != NULL && l->on_seal != NULL)
			l->on_seal(l->ctx, s->cfg.id, u.obj.id, u.obj.rows, u.obj.bytes);
		atomic_fetch_sub(&s->cb_inflight, 1);
	}
	if ((rc = env_point(ENV_POINT_SEAL_PUBLISHED, s)) != 0)
		return diag_set(STRATA_EINJECTED, "shard %u: injected failure at seal.published",
				s->cfg.id);
	rc = wal_release(s->wal, u.cut);
	if (rc)
		diag_log(LOG_LVL_WARN, "shard %u: releasing WAL segments up to %llu: %s", s->cfg.id,
			 (unsigned long long)u.cut, diag_last());
	return 0;
}

/** Flush every sealed memtable, oldest first. seal_mu held. */
static int
flush_sealed(struct shard *s)
{
	for (;;) {
		pthread_rwlock_rdlock(&s->rw);
		struct slot *sl = s->view->nsealed ? s->view->sealed[0] : NULL;
		if (sl != NULL)
			atomic_fetch_add(&sl->refs, 1);
		pthread_rwlock_unlock(&s->rw);
		if (sl == NULL)
			return 0;
		int rc = flush_one(s, sl);
		slot_unref(sl);
		if (rc)
			return rc;
	}
}

int
shard_seal(struct shard *s)
{
	if (atomic_load(&s->fenced))
		return fenced_error(s);
	/* In inline mode a flush suspended between two of its blocks holds seal_mu. */
	fiber_mutex_lock(&s->seal_mu);
	/* Finish any earlier seal whose flush failed, so generations stay in order. */
	int rc = flush_sealed(s);
	if (rc) {
		pthread_mutex_unlock(&s->seal_mu);
		return rc;
	}
	struct slot *fresh = slot_new(s->cfg.memtable_huge_pages);
	struct view *v = NULL;
	if (fresh == NULL) {
		pthread_mutex_unlock(&s->seal_mu);
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory sealing", s->cfg.id);
	}
	/* Every change of s->view holds manifest_mu, so a commit or a flush that
	 * clones the view under it never works from a view this swap replaced. */
	pthread_mutex_lock(&s->manifest_mu);
	/* s->view cannot change while manifest_mu is held: build the new view here, so
	 * the exclusive section below is only the cut and the pointer swap. */
	struct view *cur = s->view;
	v = view_clone(cur, 1);
	if (v == NULL) {
		pthread_mutex_unlock(&s->manifest_mu);
		slot_unref(fresh);
		pthread_mutex_unlock(&s->seal_mu);
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory sealing", s->cfg.id);
	}
	uint64_t t0;
	excl_lock(s, &t0);
	uint64_t cut = wal_next_seq(s->wal) - 1;
	if (cut == s->last_cut && mem_rows(cur->active->mem) == 0 &&
	    atomic_load(&cur->active->writers) == 0) {
		excl_unlock(s, t0);
		pthread_mutex_unlock(&s->manifest_mu);
		view_unref(v);
		slot_unref(fresh);
		pthread_mutex_unlock(&s->seal_mu);
		return 0; /* nothing appended since the last seal */
	}
	struct slot *old_active = v->active;
	old_active->cut = cut;
	atomic_store(&old_active->sealed, 1);
	v->sealed[v->nsealed++] = old_active; /* takes over the clone's reference */
	v->active = fresh;
	s->view = v;
	excl_unlock(s, t0);
	pthread_mutex_unlock(&s->manifest_mu);
	view_unref(cur);
	if (env_point(ENV_POINT_SEAL_SWAPPED, s) != 0) {
		pthread_mutex_unlock(&s->seal_mu);
		return diag_set(STRATA_EINJECTED, "shard %u: injected failure at seal.swapped", s->cfg.id);
	}
	rc = flush_sealed(s);
	pthread_mutex_unlock(&s->seal_mu);
	return rc;
}

/* ---------- prepare / commit ---------- */

static void
plan_free(struct shard_plan *p)
{
	if (p == NULL)
		return;
	atomic_store(&p->s->busy[p->kind], 0);
	for (uint32_t i = 0; i < p->nids; i++)
		table_unref(p->inputs ? p->inputs[i] : NULL);
	for (uint32_t i = 0; i < p->nouts; i++)
		table_unref(p->outs[i]);
	env.free(p->outs);
	env.free(p->inputs);
	env.free(p->ids);
	env.free(p);
}

/** A plan folding the first n gens (PLAN_MERGE) or runs of man: the least min_seq of the
 *  other tables that hold rows. Memtables hold only rows above every table's. */
static uint64_t
plan_drop_below(const struct manifest *man, int kind, uint32_t n)
{
	uint64_t floor = UINT64_MAX;
	for (int l = 0; l < 2; l++) {
		const struct manifest_obj *o = l == 0 ? man->gens : man->runs;
		uint32_t cnt = l == 0 ? man->ngens : man->nruns;
		uint32_t skip = (l == 0) == (kind == PLAN_MERGE) ? n : 0;
		for (uint32_t i = skip; i < cnt; i++)
			if (o[i].rows > 0 && o[i].min_seq < floor)
				floor = o[i].min_seq;
	}
	return floor;
}

/** Pick the inputs (oldest first) from the manifest and pin their tables. */
static int
plan_pick(struct shard *s, int kind, uint32_t max, struct shard_plan **out)
{
	struct shard_plan *p = env.calloc(1, sizeof(*p));
	if (p == NULL)
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory preparing", s->cfg.id);
	p->s = s;
	p->kind = kind;
	pthread_mutex_lock(&s->manifest_mu);
	/* Read the manifest anew: an external compactor may have merged what s->man still
	 * lists (picking it again would cost the whole merge and then lose at commit). */
	uint64_t before = s->man.version;
	int rc = shard_reload(s);
	if (rc == 0 && s->man.version != before)
		atomic_fetch_add(&s->foreign_versions, 1);
	if (rc) {
		pthread_mutex_unlock(&s->manifest_mu);
		plan_free(p);
		return rc;
	}
	const struct manifest_obj *objs = kind == PLAN_MERGE ? s->man.gens : s->man.runs;
	uint32_t n = kind == PLAN_MERGE ? s->man.ngens : s->man.nruns;
	/* The engine's cap binds whatever the caller asked for: 0 means "up to the cap". */
	uint32_t cap = atomic_load(&s->merge_cap);
	if (max == 0 || max > cap)
		max = cap;
	if (kind == PLAN_MERGE && n > max)
		n = max;
	if (kind == PLAN_COMPACT) {
		/* The cap counts sorted runs, and a split run's parts go together (a part
		 * left behind would lose the keys its siblings hold). */
		uint32_t take = 0, sorted = 0;
		for (; take < n && sorted < max; sorted++)
			take += manifest_run_parts(objs, n, take);
		n = sorted < 2 ? 0 : take; /* folding one sorted run into one gains nothing */
	}
	p->ids = env.calloc(n + 1, sizeof(*p->ids));
	p->inputs = env.calloc(n + 1, sizeof(*p->inputs));
	if (p->ids == NULL || p->inputs == NULL) {
		pthread_mutex_unlock(&s->manifest_mu);
		plan_free(p);
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory preparing", s->cfg.id);
	}
	for (uint32_t i = 0; i < n; i++)
		p->ids[i] = objs[i].id;
	p->drop_below = plan_drop_below(&s->man, kind, n);
	pthread_mutex_unlock(&s->manifest_mu);
	/* Pin the tables from the view; a commit that raced us may have removed them. */
	struct view *v = view_pin(s);
	struct table **tabs = kind == PLAN_MERGE ? v->gens : v->runs;
	uint32_t ntabs = kind == PLAN_MERGE ? v->ngens : v->nruns;
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < ntabs; j++) {
			if (tabs[j]->obj.id == p->ids[i]) {
				p->inputs[i] = tabs[j];
				atomic_fetch_add(&tabs[j]->refs, 1);
				p->bytes_in += tabs[j]->obj.bytes;
				break;
			}
		}
		p->nids = i + 1;
		if (p->inputs[i] == NULL) {
			uint64_t gone = p->ids[i];
			view_unref(v);
			plan_free(p);
			return diag_set(STRATA_ECONFLICT, "shard %u: %s %llu was merged by a concurrent "
					"plan", s->cfg.id, kind == PLAN_MERGE ? "generation" : "run",
					(unsigned long long)gone);
		}
	}
	view_unref(v);
	TRACE(s->cfg.trace, PLAN, s->cfg.id, (uint64_t)kind, p->nids, n ? p->ids[0] : 0,
	      n ? p->ids[n - 1] : 0);
	*out = p;
	return 0;
}

/** A fresh id for an external compactor's run: MANIFEST_EXTERNAL_ID, then the wall
 *  clock's microseconds and a random byte (two compactors of one shard would have to
 *  start a run in the same microsecond and draw the same byte to collide). */
static uint64_t
external_id(void)
{
	static atomic_uint_fast64_t last;
	uint64_t r = env.random != NULL ? env.random() : (uint64_t)rand();
	uint64_t id = ((env.wall_ns() / 1000) << 8 | (r & 0xff)) & ~MANIFEST_EXTERNAL_ID;
	uint_fast64_t prev = atomic_load(&last);
	do {
		if (id <= prev)
			id = prev + 1;
	} while (!atomic_compare_exchange_weak(&last, &prev, id));
	return id | MANIFEST_EXTERNAL_ID;
}

/** One key range of a pass, written to a run of its own (by the pass's thread, or by a
 *  thread of the part's own when the pass is split). */
struct plan_part {
	struct shard *s;
	struct shard_plan *p;
	/** The range: keys >= lo (NULL: from the first) and < hi (NULL: to the last). */
	const void *lo, *hi;
	size_t lo_len, hi_len;
	/** run_writer_options.threads of the part's writer. */
	uint32_t threads;
	/** The run (id and epoch set before the write; sizes after). */
	struct manifest_obj obj;
	/** What went wrong on the part's thread (diag is per thread); stopped: only that
	 *  another part failed first. */
	int rc, stopped;
	char err[512];
	pthread_t th;
	int started;
};

/** Stream a k-way merge of the plan's inputs, from pt->lo to pt->hi, into a new run.
 *  O(k x block) memory. */
static int
part_write(struct plan_part *pt)
{
	struct shard *s = pt->s;
	struct shard_plan *p = pt->p;
	char key[160];
	manifest_obj_key(key, sizeof(key), s->cfg.prefix, MANIFEST_RUN, &pt->obj);
	struct merge_cursor c = {.win = NULL};
	int rc = merger_create(&c.m, p->nids);
	if (rc)
		return rc;
	rc = merger_add_runs(&c.m, p->inputs, p->nids, pt->lo, pt->lo_len);
	struct run_writer *w = NULL;
	struct run_writer_options ro = s->cfg.run;
	ro.threads = pt->threads;
	if (rc == 0)
		rc = run_writer_open(s->cfg.os, key, &ro, &w);
	if (rc) {
		merger_destroy(&c.m);
		return rc;
	}
	merger_build(&c.m);
	uint64_t blocks = 0, bytes = 0, rows_total = 0, rows_read = 0;
	for (uint32_t i = 0; i < p->nids; i++)
		rows_total += p->inputs[i]->obj.rows;
	struct source row;
	while ((rc = merge_cursor_next(&c, &row)) == 1) {
		if (pt->hi != NULL && key_cmp(row.key, row.klen, pt->hi, pt->hi_len) >= 0) {
			rc = 0; /* the next part's */
			break;
		}
		rows_read++;
		if (row.kind == STRATA_ROW_DELETE && row.seq < p->drop_below)
			continue; /* nothing older outside the inputs for it to hide */
		rc = run_writer_add_kind(w, row.key, row.klen, row.seq, row.val, row.vlen, row.kind);
		if (rc)
			break;
		bytes += row.klen + row.vlen;
		if (run_writer_blocks(w) != blocks) {
			blocks = run_writer_blocks(w);
			uint64_t all = atomic_fetch_add(&p->rows_read, rows_read) + rows_read;
			rows_read = 0;
			if (rows_total > 0)
				atomic_store(&s->prog_done, (uint64_t)((double)p->bytes_in *
								  (double)(all < rows_total ? all : rows_total) /
								  (double)rows_total));
			/* A block written is a chunk of the merge (inline mode: lib/fiber.h). */
			fiber_yield(bytes);
			bytes = 0;
			if (env_point(ENV_POINT_PREPARE_BLOCK, s) != 0) {
				rc = diag_set(STRATA_EINJECTED, "shard %u: injected failure at prepare.block",
					      s->cfg.id);
				break;
			}
			if (atomic_load(&p->parts_stop)) {
				pt->stopped = 1;
				rc = diag_set(STRATA_EIO, "shard %u: a part of the pass stopped: another "
					      "one failed", s->cfg.id);
				break;
			}
		}
	}
	if (rc)
		atomic_store(&p->parts_stop, 1); /* at once: the others stop at their next block */
	merger_destroy(&c.m);
	if (rc) {
		run_writer_abort(w);
		return rc;
	}
	struct run_meta meta;
	rc = run_writer_finish(w, &meta);
	if (rc) {
		atomic_store(&p->parts_stop, 1);
		return rc;
	}
	pt->obj.bytes = meta.bytes;
	pt->obj.rows = meta.rows;
	pt->obj.min_seq = meta.min_seq;
	pt->obj.max_seq = meta.max_seq;
	return 0;
}

static void *
part_thread(void *arg)
{
	struct plan_part *pt = arg;
	pt->rc = part_write(pt);
	if (pt->rc)
		snprintf(pt->err, sizeof(pt->err), "%s", diag_last());
	return NULL;
}

/** A candidate key to split at: an input's index partition, with the bytes before it. */
struct split_key {
	const void *key;
	size_t klen;
	uint64_t bytes;
};

static int
split_key_cmp(const void *a, const void *b)
{
	const struct split_key *x = a, *y = b;
	return key_cmp(x->key, x->klen, y->key, y->klen);
}

/** Cut the plan's key range into at most *nparts ranges of about equal input bytes, from
 *  the inputs' index partitions (their last keys and the bytes of their blocks): part i
 *  starts at parts[i].lo. No block is read. *nparts may come back smaller (too few keys
 *  to cut at). */
static int
plan_split(struct shard_plan *p, struct plan_part *parts, uint32_t *nparts)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < p->nids; i++)
		n += run_reader_partitions(p->inputs[i]->r);
	struct split_key *k = n ? env.calloc(n, sizeof(*k)) : NULL;
	if (n == 0 || k == NULL) {
		*nparts = 1; /* nothing to cut at (or no memory to: one part then) */
		return 0;
	}
	uint64_t total = 0, m = 0;
	for (uint32_t i = 0; i < p->nids; i++) {
		uint64_t np = run_reader_partitions(p->inputs[i]->r);
		for (uint64_t j = 0; j < np; j++, m++) {
			int rc = run_reader_partition(p->inputs[i]->r, j, &k[m].key, &k[m].klen,
						      &k[m].bytes);
			if (rc) {
				env.free(k);
				return rc;
			}
			total += k[m].bytes;
		}
	}
	qsort(k, n, sizeof(*k), split_key_cmp);
	/* Part j starts at the first key whose partitions before it (all inputs) hold
	 * j/P of the bytes; a key equal to the last cut cuts nothing. */
	uint32_t want = *nparts, got = 1;
	uint64_t sum = 0;
	for (uint64_t i = 0; i + 1 < n && got < want; i++) {
		sum += k[i].bytes;
		if (sum * want < total * got)
			continue;
		if (got > 1 && key_cmp(k[i].key, k[i].klen, parts[got - 1].lo,
					     parts[got - 1].lo_len) <= 0)
			continue;
		parts[got].lo = k[i].key;
		parts[got].lo_len = k[i].klen;
		parts[got - 1].hi = k[i].key;
		parts[got - 1].hi_len = k[i].klen;
		got++;
	}
	*nparts = got;
	env.free(k); /* the cuts point into the inputs' readers: k only ordered them */
	return 0;
}

/** Write the plan's run: one part, or (merge_threads > 1 and input enough) up to
 *  merge_threads key-range parts at once, each its own merge of every input (so
 *  O(k x block) memory per part), drawing on the one background IO budget. They
 *  become the parts of one sorted run (manifest_obj.group) at commit. */
static int
plan_write(struct shard *s, struct shard_plan *p)
{
	uint32_t threads = atomic_load(&s->merge_threads);
	if (threads == 0)
		threads = 1;
	uint32_t want = 1;
	if (threads > 1 && s->cfg.merge_min_part_bytes > 0) {
		uint64_t by_size = p->bytes_in / s->cfg.merge_min_part_bytes;
		want = by_size < threads ? (uint32_t)(by_size ? by_size : 1) : threads;
	}
	struct plan_part *parts = env.calloc(want, sizeof(*parts));
	p->outs = env.calloc(want, sizeof(*p->outs));
	if (parts == NULL || p->outs == NULL) {
		env.free(parts);
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory preparing", s->cfg.id);
	}
	uint32_t n = want;
	int rc = n > 1 ? plan_split(p, parts, &n) : 0;
	if (rc) {
		env.free(parts);
		return rc;
	}
	/* Ids in key order: the parts list in the manifest as they are written. */
	uint64_t base = s->external ? 0 : atomic_fetch_add(&s->next_id, n);
	for (uint32_t i = 0; i < n; i++) {
		parts[i].s = s;
		parts[i].p = p;
		parts[i].threads = threads / n > 1 ? threads / n : 1;
		parts[i].obj.id = s->external ? external_id() : base + i;
		parts[i].obj.epoch = s->epoch;
	}
	atomic_store(&p->rows_read, 0);
	atomic_store(&p->parts_stop, 0);
	atomic_store(&s->prog_done, 0);
	atomic_store(&s->prog_total, p->bytes_in);
	/* Part 0 on this thread, the others on threads of their own; a part whose thread
	 * could not start runs here after part 0. */
	for (uint32_t i = 1; i < n; i++)
		parts[i].started = pthread_create(&parts[i].th, NULL, part_thread, &parts[i]) == 0;
	parts[0].rc = part_write(&parts[0]);
	if (parts[0].rc)
		snprintf(parts[0].err, sizeof(parts[0].err), "%s", diag_last());
	for (uint32_t i = 1; i < n; i++) {
		if (parts[i].started) {
			pthread_join(parts[i].th, NULL);
		} else if (parts[0].rc == 0) {
			part_thread(&parts[i]);
		} else {
			parts[i].rc = parts[0].rc; /* not written: nothing to delete */
			parts[i].stopped = 1;
		}
	}
	/* The pass's error is the first part's that failed of itself, not one stopped. */
	rc = 0;
	char why[512] = "";
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		for (uint32_t i = 0; i < n && rc == 0; i++) {
			if (parts[i].rc != 0 && (pass == 1 || !parts[i].stopped)) {
				rc = parts[i].rc;
				snprintf(why, sizeof(why), "%s", parts[i].err);
			}
		}
	}
	atomic_store(&s->prog_total, 0);
	atomic_store(&s->prog_done, 0);
	/* A part that holds no row (a range of tombstones all dropped) is left out, unless
	 * every part is empty: the pass then writes one empty run, as an unsplit one does. */
	uint32_t kept = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (parts[i].rc != 0)
			continue; /* its writer was aborted: nothing of it is left */
		if (rc != 0 || (parts[i].obj.rows == 0 && (kept > 0 || i + 1 < n))) {
			char key[160];
			manifest_obj_key(key, sizeof(key), s->cfg.prefix, MANIFEST_RUN, &parts[i].obj);
			objstore_del(s->cfg.os, key);
			continue;
		}
		parts[kept++] = parts[i];
	}
	if (rc) {
		env.free(parts);
		return diag_set(rc, "%s", why);
	}
	fiber_yield(FIBER_SYNC_COST); /* the run's end (index, footer, syncs) was a chunk */
	for (uint32_t i = 0; i < kept; i++) {
		parts[i].obj.group = kept > 1 ? parts[0].obj.id : 0;
		char key[160];
		manifest_obj_key(key, sizeof(key), s->cfg.prefix, MANIFEST_RUN, &parts[i].obj);
		if (rc == 0)
			rc = table_open(s, MANIFEST_RUN, &parts[i].obj, &p->outs[p->nouts]);
		if (rc) {
			objstore_del(s->cfg.os, key);
			continue;
		}
		/* Until commit publishes it, the run is ours to delete. */
		atomic_store(&p->outs[p->nouts++]->obsolete, 1);
	}
	env.free(parts);
	if (rc)
		return rc;
	if (kept > 1)
		atomic_fetch_add(&s->split_parts, kept);
	if (env_point(ENV_POINT_PREPARE_RUN_WRITTEN, s) != 0)
		return diag_set(STRATA_EINJECTED, "shard %u: injected failure at prepare.run_written",
				s->cfg.id);
	return 0;
}

static void
plan_discard(struct shard_plan *p)
{
	for (uint32_t i = 0; i < p->nouts; i++)
		atomic_store(&p->outs[i]->obsolete, 1);
	plan_free(p);
}

/** The plan keeps its runs no more: once the manifest names them, or may. */
static void
plan_release_outs(struct shard_plan *p)
{
	for (uint32_t i = 0; i < p->nouts; i++)
		table_unref(p->outs[i]);
	p->nouts = 0;
}

static int
shard_prepare(struct shard *s, int kind, uint32_t max, struct shard_plan **out)
{
	*out = NULL;
	if (atomic_load(&s->fenced))
		return fenced_error(s);
	/* One plan of a kind at a time: the next one would pick the same oldest inputs
	 * and lose at commit after doing all the IO. Refuse it before any. */
	if (atomic_exchange(&s->busy[kind], 1) != 0)
		return diag_set(STRATA_EBUSY, "shard %u: a %s is already in flight on this shard (prepared "
				"and not yet committed or aborted); retry once it is done", s->cfg.id,
				kind == PLAN_MERGE ? "merge" : "compaction");
	/* Seal first, then read the manifest: with no time-based sealing nothing else
	 * would move the memtable's rows into a generation this merge can see. */
	int rc = 0;
	if (kind == PLAN_MERGE && !s->external) {
		rc = shard_seal(s);
		if (rc == 0 && env_point(ENV_POINT_PREPARE_SEALED, s) != 0)
			rc = diag_set(STRATA_EINJECTED, "shard %u: injected failure at prepare.sealed",
				      s->cfg.id);
		if (rc) {
			atomic_store(&s->busy[kind], 0);
			return rc;
		}
	}
	struct shard_plan *p = NULL;
	rc = plan_pick(s, kind, max, &p);
	if (rc) {
		atomic_store(&s->busy[kind], 0);
		return rc;
	}
	if (p->nids > 0) {
		rc = plan_write(s, p);
		if (rc) {
			plan_discard(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

int
shard_prepare_merge(struct shard *s, uint32_t max_gens, struct shard_plan **out)
{
	return shard_prepare(s, PLAN_MERGE, max_gens, out);
}

int
shard_prepare_compact(struct shard *s, uint32_t max_runs, struct shard_plan **out)
{
	return shard_prepare(s, PLAN_COMPACT, max_runs, out);
}

/** Context of the manifest mutation that commits a plan. */
struct commit_update {
	/** The plan. */
	struct shard_plan *p;
};

static int
commit_mutate(void *ctx, struct manifest *next)
{
	struct shard_plan *p = ((struct commit_update *)ctx)->p;
	int rc = p->kind == PLAN_MERGE ? manifest_remove_gens(next, p->ids, p->nids)
				       : manifest_remove_runs(next, p->ids, p->nids);
	for (uint32_t i = 0; rc == 0 && i < p->nouts; i++)
		rc = manifest_add_run(next, &p->outs[i]->obj);
	if (rc)
		return diag_set(STRATA_ECONFLICT, "shard %u: plan no longer applies: its inputs are not "
				"all in the manifest", p->s->cfg.id);
	if (p->kind == PLAN_COMPACT) {
		/* The folded runs hold the oldest data: they go first, in key order. */
		uint32_t first = next->nruns - p->nouts;
		for (uint32_t i = 0; i < p->nouts; i++) {
			struct manifest_obj o = next->runs[first + i];
			memmove(next->runs + i + 1, next->runs + i, first * sizeof(o));
			next->runs[i] = o;
		}
	}
	for (uint32_t i = 0; i < p->nouts; i++) {
		uint64_t id = p->outs[i]->obj.id;
		if (next->next_generation <= id && !(id & MANIFEST_EXTERNAL_ID))
			next->next_generation = id + 1;
	}
	return 0;
}

/** Count the committed plan p (out_bytes written) in s's stats, before its view is
 *  published: whoever sees the view without the merged generations also sees them
 *  counted (a stats read takes the view first, then the counters). The one exception is
 *  a manifest write that reported failure but had landed: view_reconcile_with published
 *  it inside shard_manifest_update, and it is counted just after. */
static void
commit_count(struct shard *s, const struct shard_plan *p, uint64_t out_bytes)
{
	if (p->kind == PLAN_MERGE) {
		atomic_fetch_add(&s->merges, 1);
		atomic_fetch_add(&s->merged_gens, p->nids);
	} else {
		atomic_fetch_add(&s->compactions, 1);
	}
	atomic_fetch_add(&s->merge_in, p->bytes_in);
	atomic_fetch_add(&s->merge_out, out_bytes);
}

int
shard_commit(struct shard *s, struct shard_plan *p)
{
	if (p->nids == 0) {
		plan_free(p);
		return 0;
	}
	pthread_mutex_lock(&s->manifest_mu);
	struct commit_update u = {p};
	int published = 0;
	int rc = atomic_load(&s->fenced) ? fenced_error(s) : 0;
	uint64_t epoch = p->outs[0]->obj.epoch;
	if (rc == 0 && s->external && epoch != s->epoch)
		/* Written under an epoch the handle has since left: a new owner's open may
		 * have collected it as an orphan. */
		rc = diag_set(STRATA_EFENCED, "shard %u: the plan's run was written under epoch %llu, "
			      "the writer's is now %llu: dropped", s->cfg.id, (unsigned long long)epoch,
			      (unsigned long long)s->epoch);
	if (rc == 0)
		rc = shard_manifest_update(s, commit_mutate, &u, p->outs, p->nouts, &published);
	if (rc) {
		pthread_mutex_unlock(&s->manifest_mu);
		if (rc == STRATA_ECONFLICT)
			atomic_fetch_add(&s->conflicts, 1);
		if (!manifest_update_not_written(rc)) {
			/* The manifest may name the runs after all: keep them for the orphan
			 * collector to judge at the next open. */
			for (uint32_t i = 0; i < p->nouts; i++)
				atomic_store(&p->outs[i]->obsolete, 0);
			plan_release_outs(p);
		}
		plan_discard(p);
		return rc;
	}
	/* The manifest references the runs now: they must never be deleted by us. */
	uint64_t out_bytes = 0;
	for (uint32_t i = 0; i < p->nouts; i++) {
		atomic_store(&p->outs[i]->obsolete, 0);
		out_bytes += p->outs[i]->obj.bytes;
	}
	uint64_t out_id = p->outs[0]->obj.id;
	if (env_point(ENV_POINT_COMMIT_MANIFEST_UPDATED, s) != 0) {
		pthread_mutex_unlock(&s->manifest_mu);
		plan_release_outs(p);
		plan_free(p);
		return diag_set(STRATA_EINJECTED, "shard %u: injected failure at commit.manifest_updated",
				s->cfg.id);
	}
	struct view *old = NULL;
	if (published) {
		/* The reconciled view shows the commit already (it holds its own references). */
		commit_count(s, p, out_bytes);
		TRACE(s->cfg.trace, COMMIT, s->cfg.id, (uint64_t)p->kind, out_id, p->nids,
		      s->man.version);
		plan_release_outs(p);
		pthread_mutex_unlock(&s->manifest_mu);
		goto published;
	}
	/* Build the new view outside the exclusive section; the swap itself is O(1). */
	struct view *v = view_clone(s->view, p->nouts);
	if (v == NULL) {
		pthread_mutex_unlock(&s->manifest_mu);
		plan_release_outs(p);
		plan_free(p);
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory committing (the manifest is "
				"updated; reopen to load it)", s->cfg.id);
	}
	struct table **list = p->kind == PLAN_MERGE ? v->gens : v->runs;
	uint32_t *count = p->kind == PLAN_MERGE ? &v->ngens : &v->nruns;
	uint32_t j = 0;
	for (uint32_t i = 0; i < *count; i++) {
		int merged = 0;
		for (uint32_t k = 0; k < p->nids; k++)
			merged |= list[i] == p->inputs[k];
		if (merged) {
			/* A compactor never deletes what it merged: the writer may still read it
			 * until it reconciles, and deletes it then. */
			if (!s->external)
				atomic_store(&list[i]->obsolete, 1);
			table_unref(list[i]);
		} else {
			list[j++] = list[i];
		}
	}
	*count = j;
	/* The view takes over the plan's references to its runs. */
	if (p->kind == PLAN_MERGE) {
		memcpy(v->runs + v->nruns, p->outs, p->nouts * sizeof(*v->runs));
	} else {
		memmove(v->runs + p->nouts, v->runs, v->nruns * sizeof(*v->runs));
		memcpy(v->runs, p->outs, p->nouts * sizeof(*v->runs));
	}
	v->nruns += p->nouts;
	p->nouts = 0;
	TRACE(s->cfg.trace, COMMIT, s->cfg.id, (uint64_t)p->kind, out_id, p->nids, s->man.version);
	commit_count(s, p, out_bytes);
	old = view_swap(s, v);
	pthread_mutex_unlock(&s->manifest_mu);
published:
	atomic_store(&s->busy[p->kind], 0); /* published: the next plan picks what is left */
	if (env_point(ENV_POINT_COMMIT_SWAPPED, s) != 0 || env_point(ENV_POINT_COMMIT_BEFORE_DELETE, s) != 0) {
		view_unref(old);
		plan_free(p);
		return diag_set(STRATA_EINJECTED, "shard %u: injected failure after commit", s->cfg.id);
	}
	/* Dropping the old view and the plan releases the merged tables; the last
	 * reference deletes each object. */
	view_unref(old);
	plan_free(p);
	return 0;
}

void
shard_abort(struct shard *s, struct shard_plan *p)
{
	(void)s;
	if (p == NULL)
		return;
	/* The shard is free for the next plan at once; deleting the run is not its business. */
	TRACE(p->s->cfg.trace, ABORT, p->s->cfg.id, (uint64_t)p->kind, p->nids);
	atomic_store(&p->s->busy[p->kind], 0);
	plan_discard(p);
}

uint32_t
shard_plan_inputs(const struct shard_plan *p)
{
	return p->nids;
}

struct shard *
shard_plan_shard(const struct shard_plan *p)
{
	return p->s;
}

void
shard_stats(struct shard *s, strata_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct view *v = view_pin(s);
	out->memtable_rows = mem_rows(v->active->mem);
	out->memtable_bytes = mem_bytes(v->active->mem);
	for (uint32_t i = 0; i < v->nsealed; i++) {
		out->memtable_rows += mem_rows(v->sealed[i]->mem);
		out->memtable_bytes += mem_bytes(v->sealed[i]->mem);
	}
	out->sealed_memtables = v->nsealed;
	out->generations = v->ngens;
	out->base_runs = 0;
	for (uint32_t i = 0; i < v->nruns; i++)
		out->base_runs += v->runs[i]->obj.group == 0 || i == 0 ||
				  v->runs[i - 1]->obj.group != v->runs[i]->obj.group;
	for (uint32_t i = 0; i < v->ngens; i++)
		out->generation_bytes += v->gens[i]->obj.bytes;
	for (uint32_t i = 0; i < v->ngens; i++)
		out->resident_filter_bytes += run_reader_resident_bytes(v->gens[i]->r);
	for (uint32_t i = 0; i < v->nruns; i++)
		out->base_bytes += v->runs[i]->obj.bytes;
	view_unref(v);
	if (s->wal != NULL)
		wal_usage(s->wal, &out->wal_segments, &out->wal_bytes, &out->wal_syncs);
	pthread_mutex_lock(&s->manifest_mu);
	out->writer_epoch = s->epoch;
	out->manifest_version = s->man.version;
	out->replay_after = s->man.replay_after;
	out->next_generation = atomic_load(&s->next_id);
	pthread_mutex_unlock(&s->manifest_mu);
	out->last_seq = s->wal != NULL ? wal_next_seq(s->wal) - 1 : s->man.replay_after;
	out->appends = atomic_load(&s->appends);
	out->rows_appended = atomic_load(&s->rows_appended);
	out->seals = atomic_load(&s->seals);
	out->merges = atomic_load(&s->merges);
	out->merge_conflicts = atomic_load(&s->conflicts);
	out->foreign_manifest_versions = atomic_load(&s->foreign_versions);
	out->merged_generations = atomic_load(&s->merged_gens);
	out->merge_bytes_in = atomic_load(&s->merge_in);
	out->merge_bytes_out = atomic_load(&s->merge_out);
	out->compactions = atomic_load(&s->compactions);
	out->max_exclusive_ns = atomic_load(&s->max_excl_ns);
	out->max_exclusive_wait_ns = atomic_load(&s->max_excl_wait_ns);
	out->background_io_wait_ns = atomic_load(&s->io_wait_ns);
	out->blocks_compressed = atomic_load(&s->codec.compressed);
	out->blocks_raw = atomic_load(&s->codec.raw);
	out->blocks_compress_untried = atomic_load(&s->codec.untried);
	out->compress_saved_bytes = atomic_load(&s->codec.saved_bytes);
	out->merge_threads = atomic_load(&s->merge_threads);
	out->merge_blocks_helped = atomic_load(&s->codec.helped);
	out->merge_split_parts = atomic_load(&s->split_parts);
	out->merge_in_flight_bytes = atomic_load(&s->prog_total);
	out->merge_in_flight_done_bytes = out->merge_in_flight_bytes ? atomic_load(&s->prog_done) : 0;
	out->background_io_bytes_per_s = s->cfg.run.limiter ? ratelimit_rate(s->cfg.run.limiter) : 0;
	out->background_io_stalls = 0;
	out->background_io_bytes = 0;
	if (s->cfg.run.limiter)
		ratelimit_stats(s->cfg.run.limiter, &out->background_io_bytes, NULL,
				&out->background_io_stalls);
	out->block_cache_hits = atomic_load(&s->cache_hits);
	out->block_cache_misses = atomic_load(&s->cache_misses);
	if (s->cfg.bcache != NULL) {
		struct bcache_stats cs;
		bcache_get_stats(s->cfg.bcache, &cs);
		out->block_cache_evictions = cs.evictions;
		out->block_cache_bytes = cs.bytes;
		out->block_cache_capacity = cs.capacity;
	}
}

int
shard_check(struct shard *s)
{
	int rc = 0;
	pthread_mutex_lock(&s->manifest_mu);
	struct view *v = view_pin(s);
	if (v->ngens != s->man.ngens || v->nruns != s->man.nruns)
		rc = diag_set(STRATA_ECORRUPT, "shard %u: view has %u gens/%u runs, manifest %u/%u",
			      s->cfg.id, v->ngens, v->nruns, s->man.ngens, s->man.nruns);
	for (uint32_t i = 0; rc == 0 && i < v->ngens; i++)
		if (v->gens[i]->obj.id != s->man.gens[i].id)
			rc = diag_set(STRATA_ECORRUPT, "shard %u: view generation %u is %llu, manifest "
				      "says %llu", s->cfg.id, i, (unsigned long long)v->gens[i]->obj.id,
				      (unsigned long long)s->man.gens[i].id);
	for (uint32_t i = 0; rc == 0 && i < v->nruns; i++)
		if (v->runs[i]->obj.id != s->man.runs[i].id)
			rc = diag_set(STRATA_ECORRUPT, "shard %u: view run %u differs from the manifest",
				      s->cfg.id, i);
	for (uint32_t i = 1; rc == 0 && i < v->ngens; i++)
		if (v->gens[i]->obj.min_seq <= v->gens[i - 1]->obj.max_seq)
			rc = diag_set(STRATA_ECORRUPT, "shard %u: generations %u and %u overlap in seq",
				      s->cfg.id, i - 1, i);
	for (uint32_t i = 0; rc == 0 && i < v->ngens; i++)
		if (v->gens[i]->obj.max_seq > s->man.replay_after)
			rc = diag_set(STRATA_ECORRUPT, "shard %u: generation %llu holds seq %llu above the "
				      "replay cursor %llu", s->cfg.id, (unsigned long long)v->gens[i]->obj.id,
				      (unsigned long long)v->gens[i]->obj.max_seq,
				      (unsigned long long)s->man.replay_after);
	view_unref(v);
	pthread_mutex_unlock(&s->manifest_mu);
	return rc;
}

void
shard_set_listener(struct shard *s, const struct store_listener *l, uint64_t memtable_max_bytes)
{
	atomic_store(&s->mem_limit, memtable_max_bytes);
	atomic_store(&s->listener, l);
	/* Callers may free the old listener's context once this returns. */
	while (atomic_load(&s->cb_inflight) > 0)
		sched_yield();
}

void
shard_set_memtable_limit(struct shard *s, uint64_t memtable_max_bytes)
{
	atomic_store(&s->mem_limit, memtable_max_bytes);
}

void
shard_set_merge_cap(struct shard *s, uint32_t max_inputs)
{
	uint32_t cap = s->cfg.merge_max_inputs;
	atomic_store(&s->merge_cap, max_inputs != 0 && max_inputs < cap ? max_inputs : cap);
}

void
shard_set_merge_threads(struct shard *s, uint32_t threads)
{
	uint32_t most = s->cfg.merge_threads > 1 ? s->cfg.merge_threads : 1;
	atomic_store(&s->merge_threads, threads != 0 && threads < most ? threads : most);
}

void
shard_sync_written(struct shard *s)
{
	if (s->wal != NULL && s->cfg.sync == STRATA_SYNC_INTERVAL)
		wal_sync_written(s->wal);
}
