/*
 * view.c — the refcounted pieces of a shard's view: memtable slots, open tables,
 * views, their swap under the exclusive lock, and rebuilding a view from a newer
 * manifest.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/hist.h"
#include "shard_int.h"

/* ---------- refcounted pieces ---------- */

struct slot *
slot_new(int huge_pages)
{
	struct slot *sl = env.calloc(1, sizeof(*sl));
	if (sl == NULL)
		return NULL;
	sl->mem = mem_new(huge_pages);
	if (sl->mem == NULL) {
		env.free(sl);
		return NULL;
	}
	atomic_init(&sl->refs, 1);
	return sl;
}

void
slot_unref(struct slot *sl)
{
	if (sl != NULL && atomic_fetch_sub(&sl->refs, 1) == 1) {
		mem_unref(sl->mem);
		env.free(sl);
	}
}

void
table_unref(struct table *t)
{
	if (t == NULL || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	run_reader_close(t->r);
	/* Whoever lets go last (a reader, a commit) only queues the delete: no IO here. */
	if (atomic_load(&t->obsolete)) {
		if (t->reaper != NULL) {
			reaper_add(t->reaper, t->key, t->obj.bytes);
		} else if (objstore_del(t->os, t->key) != 0) {
			diag_log(LOG_LVL_WARN, "delete of merged object %s failed: %s (orphan collection "
				 "will retry)", t->key, diag_last());
		}
	}
	env.free(t);
}

/** table_open, reading the object now (eager) or at its first read (lazy). */
static int
table_open_as(struct shard *s, int kind, const struct manifest_obj *o, int lazy, struct table **out)
{
	struct table *t = env.calloc(1, sizeof(*t));
	if (t == NULL)
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory opening a table", s->cfg.id);
	t->obj = *o;
	t->kind = kind;
	t->os = s->cfg.os;
	t->reaper = s->cfg.reaper;
	atomic_init(&t->refs, 1);
	manifest_obj_key(t->key, sizeof(t->key), s->cfg.prefix, kind, o);
	struct run_read_options ro = {
		.cache = s->cfg.bcache,
		.resident_index = kind == MANIFEST_GEN,
		.hits = &s->cache_hits,
		.misses = &s->cache_misses,
	};
	int rc = run_reader_open_with(s->cfg.os, t->key, &ro, lazy, &t->r);
	if (rc) {
		env.free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int
table_open(struct shard *s, int kind, const struct manifest_obj *o, struct table **out)
{
	return table_open_as(s, kind, o, 0, out);
}

int
table_open_lazy(struct shard *s, int kind, const struct manifest_obj *o, struct table **out)
{
	return table_open_as(s, kind, o, 1, out);
}

void
view_unref(struct view *v)
{
	if (v == NULL || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	slot_unref(v->active);
	for (uint32_t i = 0; i < v->nsealed; i++)
		slot_unref(v->sealed[i]);
	for (uint32_t i = 0; i < v->ngens; i++)
		table_unref(v->gens[i]);
	for (uint32_t i = 0; i < v->nruns; i++)
		table_unref(v->runs[i]);
	env.free(v->sealed);
	env.free(v->gens);
	env.free(v->ghint);
	env.free(v->runs);
	env.free(v);
}

/** A new view sharing (and referencing) everything of old, with room to edit. */
struct view *
view_clone(const struct view *old, uint32_t extra)
{
	struct view *v = env.calloc(1, sizeof(*v));
	if (v == NULL)
		return NULL;
	atomic_init(&v->refs, 1);
	v->sealed = env.calloc(old->nsealed + extra + 1, sizeof(*v->sealed));
	v->gens = env.calloc(old->ngens + extra + 1, sizeof(*v->gens));
	v->runs = env.calloc(old->nruns + extra + 1, sizeof(*v->runs));
	if (v->sealed == NULL || v->gens == NULL || v->runs == NULL) {
		env.free(v->sealed);
		env.free(v->gens);
		env.free(v->runs);
		env.free(v);
		return NULL;
	}
	v->active = old->active;
	atomic_fetch_add(&v->active->refs, 1);
	for (uint32_t i = 0; i < old->nsealed; i++) {
		v->sealed[v->nsealed++] = old->sealed[i];
		atomic_fetch_add(&old->sealed[i]->refs, 1);
	}
	for (uint32_t i = 0; i < old->ngens; i++) {
		v->gens[v->ngens++] = old->gens[i];
		atomic_fetch_add(&old->gens[i]->refs, 1);
	}
	/* The hints come along where they still name their table (no memory: none, gets
	 * take the long way). */
	v->ghint = env.calloc(old->ngens + extra + 1, sizeof(*v->ghint));
	for (uint32_t i = 0; v->ghint != NULL && old->ghint != NULL && i < old->ngens; i++) {
		const struct table *t = __atomic_load_n(&old->ghint[i].t, __ATOMIC_ACQUIRE);
		if (t == old->gens[i]) {
			v->ghint[i].pr = __atomic_load_n(&old->ghint[i].pr, __ATOMIC_RELAXED);
			v->ghint[i].t = t;
		}
	}
	for (uint32_t i = 0; i < old->nruns; i++) {
		v->runs[v->nruns++] = old->runs[i];
		atomic_fetch_add(&old->runs[i]->refs, 1);
	}
	return v;
}

/** Pin the current view (shared lock held just long enough to take a reference). */
struct view *
view_pin(struct shard *s)
{
	pthread_rwlock_rdlock(&s->rw);
	struct view *v = s->view;
	atomic_fetch_add(&v->refs, 1);
	pthread_rwlock_unlock(&s->rw);
	return v;
}

void
excl_lock(struct shard *s, uint64_t *t0)
{
	uint64_t w0 = env.mono_ns();
	pthread_rwlock_wrlock(&s->rw);
	*t0 = env.mono_ns();
	/* The wait is what readers and appends ahead of the swap cost it. */
	uint64_t waited = *t0 - w0;
	uint_fast64_t cur = atomic_load(&s->max_excl_wait_ns);
	while (waited > cur && !atomic_compare_exchange_weak(&s->max_excl_wait_ns, &cur, waited))
		;
	if (s->cfg.excl_wait_ns != NULL)
		hist_record(s->cfg.excl_wait_ns, waited);
}

/** Release the exclusive lock and record the longest hold. */
void
excl_unlock(struct shard *s, uint64_t t0)
{
	uint64_t held = env.mono_ns() - t0;
	pthread_rwlock_unlock(&s->rw);
	uint_fast64_t cur = atomic_load(&s->max_excl_ns);
	while (held > cur && !atomic_compare_exchange_weak(&s->max_excl_ns, &cur, held))
		;
	if (s->cfg.excl_hold_ns != NULL)
		hist_record(s->cfg.excl_hold_ns, held);
}

/** Swap in v (consumes the caller's reference to v); returns the old view to unref. */
struct view *
view_swap(struct shard *s, struct view *v)
{
	/* Hints that an edit since view_clone moved off their table are cleared before
	 * anyone reads them: a table freed later cannot come back at the same address and
	 * index with a stale probe, since nothing is added to a published view. */
	for (uint32_t i = 0; v->ghint != NULL && i < v->ngens; i++)
		if (v->ghint[i].t != v->gens[i])
			v->ghint[i] = (struct view_hint){0};
	uint64_t t0;
	excl_lock(s, &t0);
	struct view *old = s->view;
	s->view = v;
	excl_unlock(s, t0);
	return old;
}

/** The table of tabs with o's id and epoch, or NULL. */
static struct table *
view_find(struct table **tabs, uint32_t n, const struct manifest_obj *o)
{
	for (uint32_t i = 0; i < n; i++)
		if (tabs[i]->obj.id == o->id && tabs[i]->obj.epoch == o->epoch)
			return tabs[i];
	return NULL;
}

/** Fill list with a table per manifest entry, reusing the current view's. */
static int
view_fill(struct shard *s, int kind, const struct manifest_obj *objs, uint32_t n, struct table **cur,
	  uint32_t ncur, struct table **list, uint32_t *count, struct table *const *mine,
	  uint32_t nmine)
{
	for (uint32_t i = 0; i < n; i++) {
		struct table *t = view_find(cur, ncur, &objs[i]);
		for (uint32_t j = 0; t == NULL && j < nmine; j++)
			if (mine[j]->kind == kind && mine[j]->obj.id == objs[i].id &&
			    mine[j]->obj.epoch == objs[i].epoch)
				t = mine[j];
		if (t != NULL) {
			atomic_fetch_add(&t->refs, 1);
		} else {
			int rc = table_open_lazy(s, kind, &objs[i], &t);
			if (rc)
				return rc;
		}
		list[(*count)++] = t;
	}
	return 0;
}

/** manifest_mu held: rebuild the view's generations and runs from s->man (which is newer
 *  than the view after a write that reported failure but landed); sealed memtables
 *  the manifest's replay cursor covers are published already and leave the view. */
int
view_reconcile(struct shard *s)
{
	return view_reconcile_with(s, NULL, 0);
}

int
view_reconcile_with(struct shard *s, struct table *const *mine, uint32_t nmine)
{
	struct view *cur = s->view;
	struct view *v = env.calloc(1, sizeof(*v));
	if (v == NULL)
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory reconciling the view", s->cfg.id);
	atomic_init(&v->refs, 1);
	v->sealed = env.calloc(cur->nsealed + 1, sizeof(*v->sealed));
	v->gens = env.calloc(s->man.ngens + 1, sizeof(*v->gens));
	v->ghint = env.calloc(s->man.ngens + 1, sizeof(*v->ghint));
	v->runs = env.calloc(s->man.nruns + 1, sizeof(*v->runs));
	v->active = cur->active;
	atomic_fetch_add(&v->active->refs, 1);
	int rc = (v->sealed && v->gens && v->runs)
			 ? 0
			 : diag_set(STRATA_ENOMEM, "shard %u: out of memory reconciling the view", s->cfg.id);
	if (rc == 0)
		rc = view_fill(s, MANIFEST_GEN, s->man.gens, s->man.ngens, cur->gens, cur->ngens, v->gens,
			       &v->ngens, mine, nmine);
	if (rc == 0)
		rc = view_fill(s, MANIFEST_RUN, s->man.runs, s->man.nruns, cur->runs, cur->nruns, v->runs,
			       &v->nruns, mine, nmine);
	if (rc) {
		view_unref(v);
		return rc;
	}
	for (uint32_t i = 0; i < cur->nsealed; i++) {
		if (cur->sealed[i]->cut > s->man.replay_after) {
			v->sealed[v->nsealed++] = cur->sealed[i];
			atomic_fetch_add(&cur->sealed[i]->refs, 1);
		}
	}
	/* What the manifest no longer names is ours to delete once nothing holds it (not a
	 * compactor's: the writer deletes what leaves its view). */
	for (uint32_t i = 0; i < cur->ngens && !s->external; i++)
		if (view_find(v->gens, v->ngens, &cur->gens[i]->obj) == NULL)
			atomic_store(&cur->gens[i]->obsolete, 1);
	for (uint32_t i = 0; i < cur->nruns && !s->external; i++)
		if (view_find(v->runs, v->nruns, &cur->runs[i]->obj) == NULL)
			atomic_store(&cur->runs[i]->obsolete, 1);
	if (s->man.replay_after > s->last_cut)
		s->last_cut = s->man.replay_after;
	uint_fast64_t next = atomic_load(&s->next_id);
	while (next < s->man.next_generation &&
	       !atomic_compare_exchange_weak(&s->next_id, &next, s->man.next_generation))
		;
	view_unref(view_swap(s, v));
	return 0;
}

