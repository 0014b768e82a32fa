/*
 * compactor.c — an external compactor of one shard (see compactor.h): a shard handle
 * in external mode (shard_load_external), passes of prepare + commit on it, and the
 * back-off when the writer committed the same inputs first.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "compactor.h"
#include "reaper.h"
#include "shard_int.h"
#include "store.h"

/** An open compactor. */
struct compactor {
	/** Its options (strings not owned). */
	struct compactor_options opt;
	/** The store. */
	struct objstore *os;
	/** Deletes the compactor's own dropped runs. */
	struct reaper *reaper;
	/** The shard, in external mode. */
	struct shard *s;
};

int
compactor_open(const struct compactor_options *o, struct compactor **out)
{
	*out = NULL;
	if (o->store == NULL && (o->dir == NULL || o->dir[0] == '\0'))
		return diag_set(STRATA_EINVAL, "a store URL or a data directory is required");
	if (o->shard > 65535)
		return diag_set(STRATA_EINVAL, "shard must be 0..65535, not %u", o->shard);
	if (o->merge_max_inputs < 2)
		return diag_set(STRATA_EINVAL, "merge_max_inputs must be at least 2, not %u",
				o->merge_max_inputs);
	if (o->merge_threads > RUN_MAX_THREADS)
		return diag_set(STRATA_EINVAL, "merge_threads must be 0..%u, not %u", RUN_MAX_THREADS,
				o->merge_threads);
	if (o->base_max_runs == 1)
		return diag_set(STRATA_EINVAL, "base_max_runs must be 0 (never fold the base) or "
				"at least 2, not 1");
	struct compactor *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "out of memory");
	c->opt = *o;
	int rc;
	if (o->store != NULL) {
		rc = objstore_url_new(o->store, &c->os);
	} else {
		char path[4096];
		snprintf(path, sizeof(path), "%s/objects", o->dir);
		int fd = env.open(path, O_RDONLY | O_DIRECTORY, 0);
		if (fd >= 0)
			env.close(fd);
		if (fd < 0)
			rc = diag_set(STRATA_EINVAL, "%s is not a store's object directory (no "
				      "node has opened %s)", path, o->dir);
		else
			rc = objstore_fs_new(path, &c->os);
	}
	if (rc == 0)
		rc = reaper_new(c->os, 0, 0, &c->reaper);
	if (rc == 0) {
		struct shard_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.os = c->os;
		cfg.id = o->shard;
		snprintf(cfg.prefix, sizeof(cfg.prefix), "shard-%04u/", o->shard);
		cfg.run.block_bytes = o->block_bytes;
		cfg.run.zstd_level = o->zstd_level;
		cfg.run.bloom_bits_per_key = o->bloom_bits_per_key ? o->bloom_bits_per_key
								    : RUN_BLOOM_DISABLED;
		cfg.merge_max_inputs = o->merge_max_inputs;
		cfg.merge_threads = o->merge_threads;
		cfg.merge_min_part_bytes = o->merge_part_min_bytes ? o->merge_part_min_bytes
								    : STORE_MERGE_PART_MIN_DEFAULT;
		cfg.reaper = c->reaper;
		rc = shard_load_external(&cfg, &c->s);
	}
	if (rc) {
		compactor_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

/** 1 when a failed prepare or commit lost to the writer rather than failed. */
static int
compactor_lost(int rc)
{
	return rc == STRATA_ECONFLICT || rc == STRATA_EFENCED || rc == STRATA_EEXIST;
}

/** Prepare and commit one plan of kind (PLAN_MERGE or PLAN_COMPACT); *folded receives
 *  its inputs when it committed. */
static int
compactor_step(struct compactor *c, int kind, uint32_t max, struct compactor_pass *r, uint32_t *folded)
{
	struct shard *s = c->s;
	struct shard_plan *p = NULL;
	uint64_t version = s->man.version;
	int rc = kind == PLAN_MERGE ? shard_prepare_merge(s, max, &p) : shard_prepare_compact(s, max, &p);
	if (rc) {
		/* An input the writer merged (and deleted) under us reads as missing: that is a
		 * lost race when the manifest moved meanwhile. */
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		int frc = shard_refresh(s);
		if (compactor_lost(rc) || (frc == 0 && s->man.version != version)) {
			diag_log(LOG_LVL_INFO, "shard %u: the %s lost to the writer: %s",
				 s->cfg.id, kind == PLAN_MERGE ? "merge" : "compaction", why);
			r->lost++;
			return 0;
		}
		return diag_set(rc, "%s", why);
	}
	uint32_t n = shard_plan_inputs(p);
	uint64_t in = p->bytes_in, out = 0;
	for (uint32_t i = 0; i < p->nouts; i++)
		out += p->outs[i]->obj.bytes;
	rc = shard_commit(s, p);
	if (rc && compactor_lost(rc)) {
		diag_log(LOG_LVL_INFO, "shard %u: the %s's commit lost to the writer and was "
			 "dropped: %s", s->cfg.id, kind == PLAN_MERGE ? "merge" : "compaction", diag_last());
		r->lost++;
		return 0;
	}
	if (rc)
		return rc;
	*folded = n;
	if (n > 0) {
		r->bytes_in += in;
		r->bytes_out += out;
	}
	return 0;
}

int
compactor_run(struct compactor *c, struct compactor_pass *r)
{
	memset(r, 0, sizeof(*r));
	struct shard *s = c->s;
	int rc = shard_refresh(s);
	if (rc == 0 && s->man.ngens > 0)
		rc = compactor_step(c, PLAN_MERGE, c->opt.max_generations, r, &r->merged);
	if (rc == 0 && c->opt.base_max_runs != 0 &&
	    manifest_sorted_runs(&s->man, s->man.nruns) > c->opt.base_max_runs)
		rc = compactor_step(c, PLAN_COMPACT, 0, r, &r->compacted);
	reaper_run(c->reaper, 0);
	pthread_mutex_lock(&s->manifest_mu);
	r->version = s->man.version;
	r->epoch = s->man.writer_epoch;
	r->generations = s->man.ngens;
	r->runs = manifest_sorted_runs(&s->man, s->man.nruns);
	pthread_mutex_unlock(&s->manifest_mu);
	return rc;
}

void
compactor_close(struct compactor *c)
{
	if (c == NULL)
		return;
	shard_close(c->s);
	reaper_delete(c->reaper);
	objstore_destroy(c->os);
	env.free(c);
}
