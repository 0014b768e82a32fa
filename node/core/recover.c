/*
 * recover.c — a shard's load (read and check everything, write nothing), its start
 * (claim the epoch, fence the WAL, catch up, collect orphans) and its close.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "shard_int.h"

/* ---------- open / close ---------- */

static int
replay_row_cb(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n)
{
	struct mem *mem = ctx;
	for (size_t i = 0; i < n; i++) {
		int rc = mem_load_add(mem, rows[i].key, rows[i].key_len, first_seq + i,
				      rows[i].value, rows[i].value_len, rows[i].kind);
		if (rc)
			return rc;
	}
	return 0;
}

/** Bytes of the segment files in a WAL directory (0 when it cannot be listed). */
static uint64_t
wal_dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	uint64_t total = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		struct stat st;
		if (n > 4 && strcmp(e->d_name + n - 4, ".wal") == 0 &&
		    fstatat(dirfd(d), e->d_name, &st, 0) == 0)
			total += (uint64_t)st.st_size;
	}
	closedir(d);
	return total;
}

/** The shard's objects as one listing found them: keys (owned) and sizes, in key order. */
struct shard_listing {
	char **keys;
	uint64_t *sizes;
	size_t n, cap;
};

/** Context of the orphan collector's listing. */
struct orphan_ctx {
	/** The shard. */
	struct shard *s;
	/** Objects deleted. */
	uint64_t deleted;
	/** First error met (the collection goes on). */
	int rc;
};

static int
orphan_cb(void *ctx, const char *key, uint64_t size)
{
	struct orphan_ctx *oc = ctx;
	struct shard *s = oc->s;
	int kind;
	uint64_t id, epoch;
	const char *rel = key + strlen(s->cfg.prefix);
	if (strncmp(rel, "manifest/", 9) == 0 || strncmp(rel, "wal/", 4) == 0)
		return 0;
	if (manifest_parse_obj_key(rel, &kind, &id, &epoch) != 0) {
		diag_log(LOG_LVL_WARN, "shard %u: unknown object %s left alone", s->cfg.id, key);
		return 0;
	}
	int idx = kind == MANIFEST_GEN ? manifest_find_gen(&s->man, id) : manifest_find_run(&s->man, id);
	if (idx >= 0) {
		const struct manifest_obj *o = kind == MANIFEST_GEN ? &s->man.gens[idx] : &s->man.runs[idx];
		if (o->epoch == epoch)
			return 0;
	}
	int rc = objstore_del(s->cfg.os, key);
	if (rc) {
		if (oc->rc == 0)
			oc->rc = rc;
		return 0;
	}
	oc->deleted++;
	diag_log(LOG_LVL_INFO, "shard %u: collected orphan %s (%llu bytes)", s->cfg.id, key,
		 (unsigned long long)size);
	return 0;
}

static void shard_listing_free(struct shard *s);

/** Delete every generation/run object of the shard that the manifest does not name:
 *  those of the load's listing when it is kept (an object created since is a newer
 *  owner's, or is collected by the next open), else of a new listing. */
static int
collect_orphans(struct shard *s, uint64_t *deleted)
{
	struct orphan_ctx oc = {s, 0, 0};
	int rc = 0;
	if (s->listing != NULL) {
		for (size_t i = 0; rc == 0 && i < s->listing->n; i++)
			rc = orphan_cb(&oc, s->listing->keys[i], s->listing->sizes[i]);
		shard_listing_free(s);
	} else {
		rc = objstore_list(s->cfg.os, s->cfg.prefix, orphan_cb, &oc);
	}
	if (rc == 0)
		rc = oc.rc;
	if (rc == 0)
		rc = manifest_gc(s->cfg.os, s->cfg.prefix, &s->man, s->cfg.manifest_keep);
	if (deleted)
		*deleted = oc.deleted;
	return rc;
}

/** Drop what shard_load_state built (before a reload, or on failure). */
static void
shard_drop_state(struct shard *s)
{
	wal_close(s->wal);
	s->wal = NULL;
	view_unref(s->view);
	s->view = NULL;
	manifest_destroy(&s->man);
	shard_listing_free(s);
}


static int
listing_cb(void *ctx, const char *key, uint64_t size)
{
	struct shard_listing *l = ctx;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		char **k = env.realloc(l->keys, cap * sizeof(*k));
		if (k == NULL)
			return diag_set(STRATA_ENOMEM, "out of memory listing objects");
		l->keys = k;
		uint64_t *sz = env.realloc(l->sizes, cap * sizeof(*sz));
		if (sz == NULL)
			return diag_set(STRATA_ENOMEM, "out of memory listing objects");
		l->sizes = sz;
		l->cap = cap;
	}
	size_t kl = strlen(key);
	if ((l->keys[l->n] = env.malloc(kl + 1)) == NULL)
		return diag_set(STRATA_ENOMEM, "out of memory listing objects");
	memcpy(l->keys[l->n], key, kl + 1);
	l->sizes[l->n++] = size;
	return 0;
}

static void
listing_destroy(struct shard_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		env.free(l->keys[i]);
	env.free(l->keys);
	env.free(l->sizes);
}

static void
shard_listing_free(struct shard *s)
{
	if (s->listing != NULL) {
		listing_destroy(s->listing);
		env.free(s->listing);
		s->listing = NULL;
	}
}

/** Every object the manifest names exists, with the size it records: what an open
 *  checks of the tables, from one listing, before claiming anything. Their footers,
 *  indexes and filters are read (and checked) at their first use. */
static int
shard_check_objects(struct shard *s)
{
	struct shard_listing l = {0};
	int rc = objstore_list(s->cfg.os, s->cfg.prefix, listing_cb, &l);
	for (int kind = 0; rc == 0 && kind < 2; kind++) {
		const struct manifest_obj *objs = kind == 0 ? s->man.gens : s->man.runs;
		uint32_t n = kind == 0 ? s->man.ngens : s->man.nruns;
		for (uint32_t i = 0; rc == 0 && i < n; i++) {
			char key[160];
			manifest_obj_key(key, sizeof(key), s->cfg.prefix, kind == 0 ? MANIFEST_GEN : MANIFEST_RUN,
					 &objs[i]);
			size_t lo = 0, hi = l.n;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (strcmp(l.keys[mid], key) < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo == l.n || strcmp(l.keys[lo], key) != 0)
				rc = diag_set(STRATA_EIO, "run %s (%s): object not found (the manifest, version "
					      "%llu, names it)", key, s->cfg.os->name,
					      (unsigned long long)s->man.version);
			else if (objs[i].bytes != 0 && l.sizes[lo] != objs[i].bytes)
				rc = diag_set(STRATA_ECORRUPT, "run %s (%s): %llu bytes, the manifest (version "
					      "%llu) records %llu: truncated or replaced", key, s->cfg.os->name,
					      (unsigned long long)l.sizes[lo], (unsigned long long)s->man.version,
					      (unsigned long long)objs[i].bytes);
		}
	}
	/* Kept for the orphan collection at the start (a compactor collects none). */
	shard_listing_free(s);
	if (rc == 0 && !s->external && (s->listing = env.malloc(sizeof(l))) != NULL) {
		*s->listing = l;
		return 0;
	}
	listing_destroy(&l);
	return rc;
}

/** Read the manifest, check every table it names exists with its size, and replay the
 *  WAL after its cursor into a fresh memtable. Writes nothing. */
static int
shard_load_state(struct shard *s)
{
	const struct shard_config *cfg = &s->cfg;
	int rc = manifest_load(cfg->os, cfg->prefix, &s->man);
	if (rc == STRATA_NOTFOUND) {
		memset(&s->man, 0, sizeof(s->man)); /* a new shard: its first claim writes v1 */
		s->man.next_generation = 1;
		rc = 0;
	}
	if (rc)
		return rc;
	struct view *v = env.calloc(1, sizeof(*v));
	if (v == NULL)
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory", cfg->id);
	atomic_init(&v->refs, 1);
	s->view = v;
	v->active = slot_new(s->cfg.memtable_huge_pages);
	v->sealed = env.calloc(1, sizeof(*v->sealed));
	v->gens = env.calloc(s->man.ngens + 1, sizeof(*v->gens));
	v->ghint = env.calloc(s->man.ngens + 1, sizeof(*v->ghint));
	v->runs = env.calloc(s->man.nruns + 1, sizeof(*v->runs));
	if (v->active == NULL || v->sealed == NULL || v->gens == NULL || v->runs == NULL)
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory", cfg->id);
	if ((rc = shard_check_objects(s)) != 0)
		return rc;
	for (uint32_t i = 0; i < s->man.ngens; i++) {
		rc = table_open_lazy(s, MANIFEST_GEN, &s->man.gens[i], &v->gens[i]);
		if (rc)
			return rc;
		v->ngens++;
	}
	for (uint32_t i = 0; i < s->man.nruns; i++) {
		rc = table_open_lazy(s, MANIFEST_RUN, &s->man.runs[i], &v->runs[i]);
		if (rc)
			return rc;
		v->nruns++;
	}
	if (s->external)
		return 0; /* a compactor reads no WAL: it folds only what is flushed */
	/* Replay after the cursor (never from flushed_generations: an external compactor
	 * may have drained that list). */
	struct wal_options wo = {
		.dir = cfg->wal_dir,
		.sync = cfg->sync,
		.sync_interval_ms = cfg->sync_interval_ms,
		.segment_bytes = cfg->wal_segment_bytes,
		.max_entry_bytes = 0,
		.external_sync = cfg->external_sync,
		.group_wait_us = cfg->group_commit_wait_us,
		.observe = cfg->run.limiter,
		.fdcache = cfg->wal_fds,
	};
	char wal_prefix[64];
	snprintf(wal_prefix, sizeof(wal_prefix), "%swal/", cfg->prefix);
	if (cfg->wal_store) {
		wo.os = cfg->os;
		wo.prefix = wal_prefix;
		wo.reaper = cfg->reaper;
	} else if (cfg->wal_check_store) {
		int has = 0;
		rc = wal_store_has_rows(cfg->os, wal_prefix, s->man.replay_after, &has);
		if (rc)
			return rc;
		if (has)
			return diag_set(STRATA_EINVAL, "shard %u: its WAL is on the store (%s%s holds rows "
					"after the cursor %llu): open it with wal = store", cfg->id,
					cfg->os->name, wal_prefix, (unsigned long long)s->man.replay_after);
	}
	/* A large WAL: fault the memtable's next chunks in on another core while this one
	 * decodes (the kernel zeroing fresh pages took over 40% of a 1 GiB replay). */
	if (!cfg->wal_store && cfg->memtable_huge_pages && cfg->replay_prefault)
		(void)mem_prefault_start(v->active->mem, wal_dir_bytes(cfg->wal_dir));
	/* Replayed rows are linked in sorted batches (nothing reads the memtable yet). A
	 * failure to start one only makes each row an insert of its own. */
	if (cfg->replay_batch_rows > 0)
		(void)mem_load_begin(v->active->mem, cfg->replay_batch_rows);
	rc = wal_scan_open(&wo, s->man.replay_after, replay_row_cb, v->active->mem, &s->wal);
	mem_load_end(v->active->mem);
	mem_prefault_stop(v->active->mem);
	return rc;
}

/** shard_load, or with external set shard_load_external. */
static int
shard_load_as(const struct shard_config *cfg, int external, struct shard **out)
{
	*out = NULL;
	if (cfg->merge_max_inputs < 2)
		return diag_set(STRATA_EINVAL, "shard %u: merge_max_inputs must be at least 2, not %u",
				cfg->id, cfg->merge_max_inputs);
	struct shard *s = env.calloc(1, sizeof(*s));
	if (s == NULL)
		return diag_set(STRATA_ENOMEM, "shard %u: out of memory", cfg->id);
	s->cfg = *cfg;
	s->external = external;
	s->cfg.run.waited_ns = &s->io_wait_ns;
	s->cfg.run.codec = &s->codec;
	atomic_init(&s->merge_cap, cfg->merge_max_inputs);
	atomic_init(&s->merge_threads, cfg->merge_threads > 1 ? cfg->merge_threads : 1);
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->rw, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&s->manifest_mu, NULL);
	pthread_mutex_init(&s->seal_mu, NULL);
	pthread_mutex_init(&s->writers_mu, NULL);
	pthread_cond_init(&s->writers_cv, NULL);
	int rc = shard_load_state(s);
	if (rc == 0 && external && s->man.version == 0)
		rc = diag_set(STRATA_EINVAL, "shard %u (%s/%s): no manifest: nothing to compact (a "
			      "node creates it when it first opens the shard)", cfg->id, cfg->os->name,
			      cfg->prefix);
	if (rc) {
		shard_close(s);
		return rc;
	}
	if (external) {
		s->epoch = s->man.writer_epoch;
		atomic_store(&s->next_id, s->man.next_generation);
		s->last_cut = s->man.replay_after;
	}
	*out = s;
	return 0;
}

int
shard_load(const struct shard_config *cfg, struct shard **out)
{
	return shard_load_as(cfg, 0, out);
}

int
shard_load_external(const struct shard_config *cfg, struct shard **out)
{
	return shard_load_as(cfg, 1, out);
}

/** Claim attempts before giving up on a manifest that keeps moving under the load. */
#define SHARD_CLAIM_ATTEMPTS 8

int
shard_start(struct shard *s)
{
	const struct shard_config *cfg = &s->cfg;
	/* 1. Claim the epoch of exactly the version we loaded: from here on an older
	 *    writer's manifest updates are fenced. If it moved since (an older writer
	 *    still at work), what we loaded is stale: load again. */
	int rc = 0;
	for (int attempt = 0;; attempt++) {
		rc = manifest_claim_at(cfg->os, cfg->prefix, &cfg->manifest, &s->man);
		if (rc != STRATA_EEXIST)
			break;
		if (attempt + 1 == SHARD_CLAIM_ATTEMPTS)
			return diag_set(STRATA_EBUSY, "shard %u: its manifest changed %d times while it was "
					"being opened: another writer is active", cfg->id, attempt + 1);
		shard_drop_state(s);
		rc = shard_load_state(s);
		if (rc)
			return rc;
	}
	if (rc)
		return rc;
	s->epoch = s->man.writer_epoch;
	atomic_store(&s->next_id, s->man.next_generation);
	s->last_cut = s->man.replay_after;

	/* 2. Fence the WAL and replay what an older writer appended since the load. */
	rc = wal_start(s->wal, s->epoch, s->man.replay_after + 1);
	if (rc)
		return rc;

	/* 3. A newer owner that claimed after us may have fenced the WAL before we did
	 *    (our fence then hides theirs): the manifest tells. */
	struct manifest now;
	rc = manifest_load(cfg->os, cfg->prefix, &now);
	if (rc)
		return rc;
	uint64_t stored = now.writer_epoch;
	manifest_destroy(&now);
	if (stored > s->epoch)
		return diag_set(STRATA_EFENCED, "shard %u: a newer owner (epoch %llu) claimed the shard "
				"while it was being opened (epoch %llu)", cfg->id,
				(unsigned long long)stored, (unsigned long long)s->epoch);

	/* 4. Collect orphans: runs of interrupted merges, generations of interrupted
	 *    flushes, objects of merged generations whose delete did not happen. */
	uint64_t deleted = 0;
	rc = collect_orphans(s, &deleted);
	if (rc)
		diag_log(LOG_LVL_WARN, "shard %u: orphan collection incomplete: %s", cfg->id, diag_last());
	diag_log(LOG_LVL_DEBUG, "shard %u: open: epoch %llu, %u generations, %u runs, replayed %llu "
		 "rows after %llu, %llu orphans collected", cfg->id, (unsigned long long)s->epoch,
		 s->view->ngens, s->view->nruns, (unsigned long long)mem_rows(s->view->active->mem),
		 (unsigned long long)s->man.replay_after, (unsigned long long)deleted);
	return 0;
}

int
shard_open(const struct shard_config *cfg, struct shard **out)
{
	int rc = shard_load(cfg, out);
	if (rc)
		return rc;
	rc = shard_start(*out);
	if (rc) {
		shard_close(*out);
		*out = NULL;
	}
	return rc;
}

void
shard_close(struct shard *s)
{
	if (s == NULL)
		return;
	wal_close(s->wal);
	view_unref(s->view);
	manifest_destroy(&s->man);
	shard_listing_free(s);
	pthread_rwlock_destroy(&s->rw);
	pthread_mutex_destroy(&s->manifest_mu);
	pthread_mutex_destroy(&s->seal_mu);
	pthread_mutex_destroy(&s->writers_mu);
	pthread_cond_destroy(&s->writers_cv);
	env.free(s);
}

