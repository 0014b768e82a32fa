/*
 * rt_jobs.c — the policy runtime's jobs: seal, prepare, commit, abort, merge and
 * compaction IO on the host's background executor, counted per runtime.
 */
#include "runtime_int.h"

void
rt_copy(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

const char *
rt_reason(int rc)
{
	switch (rc) {
	case STRATA_ECONFLICT: return "conflict";
	case STRATA_EBUSY: return "busy";
	case STRATA_EFENCED: return "fenced";
	case STRATA_EIO: return "io";
	case STRATA_ENOSPC: return "nospace";
	case STRATA_ECORRUPT: return "corrupt";
	case STRATA_ECLOSED: return "closed";
	case STRATA_EREADONLY: return "readonly";
	case STRATA_EINJECTED: return "injected";
	case STRATA_ENOMEM: return "nomem";
	case STRATA_ERANGE: return "range";
	case STRATA_EINVAL: return "invalid";
	default: return "error";
	}
}

void
rt_set_error(struct runtime *rt, const char *msg)
{
	rt_copy(rt->stats.last_error, sizeof(rt->stats.last_error), msg);
}

/* ---------------------------------------------------------------- pool jobs */

struct rt_job *
rt_job_new(struct runtime *rt, int kind, uint32_t shard)
{
	struct rt_job *j = env.calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	j->rt = rt;
	j->kind = kind;
	j->shard = shard;
	return j;
}

void
rt_job_work(void *arg)
{
	struct rt_job *j = arg;
	struct store *db = j->rt->db;
	int rc = 0;
	switch (j->kind) {
	case RT_JOB_SEAL:
		rc = store_seal(db, j->shard);
		break;
	case RT_JOB_PREPARE:
		rc = store_prepare_merge(db, j->shard, j->max, &j->plan);
		if (rc == 0)
			j->count = store_plan_inputs(j->plan);
		break;
	case RT_JOB_COMMIT:
		j->count = store_plan_inputs(j->plan);
		rc = store_commit(db, j->plan);
		j->plan = NULL;
		break;
	case RT_JOB_ABORT:
		store_abort(db, j->plan);
		j->plan = NULL;
		break;
	case RT_JOB_MERGE:
		rc = store_merge(db, j->shard, j->max, &j->count);
		break;
	case RT_JOB_REAP:
		/* Deletes at the store's rate; a job sleeps 100 ms at most, then makes room. */
		j->count = (uint32_t)store_reap(db, 100000000ull);
		break;
	case RT_JOB_COMPACT: {
		strata_plan *p = NULL;
		rc = store_prepare_compact(db, j->shard, j->max, &p);
		if (rc == 0) {
			j->count = store_plan_inputs(p);
			rc = store_commit(db, p);
		}
		break;
	}
	}
	j->rc = rc;
	if (rc != 0)
		rt_copy(j->err, sizeof(j->err), diag_last());
}


/** Queue j on the background executor, counted until its completion ran. */
int
rt_pool_submit(struct runtime *rt, struct rt_job *j)
{
	int rc = pool_submit(rt->pool, rt_job_work, rt->job_done, j);
	if (rc == 0)
		rt->jobs++;
	return rc;
}

/** Submit j; on failure free it and return the code (message in diag). */
int
rt_submit(struct runtime *rt, struct rt_job *j)
{
	int rc = rt_pool_submit(rt, j);
	if (rc != 0)
		env.free(j);
	return rc;
}

/** A merge plan of shard was committed or aborted. */
void
rt_plan_consumed(struct runtime *rt, uint32_t shard)
{
	if (rt->shards[shard].plans > 0)
		rt->shards[shard].plans--;
}

/** Abort a plan without waiting: on a worker, or here when the pool refuses. */
void
rt_abort_plan(struct runtime *rt, strata_plan *plan, uint32_t shard)
{
	if (plan == NULL)
		return;
	struct rt_job *j = rt->closing ? NULL : rt_job_new(rt, RT_JOB_ABORT, shard);
	if (j != NULL) {
		j->plan = plan;
		if (rt_pool_submit(rt, j) == 0)
			return;
		env.free(j);
	}
	store_abort(rt->db, plan);
	rt_plan_consumed(rt, shard);
}

