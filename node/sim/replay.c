/*
 * replay.c — a workload trace replayed in the simulator under a policy (replay.h).
 */
#include "replay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <time.h>
#include <xxhash.h>

#include "../core/shard.h"
#include "../core/store.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/trace.h"
#include "../lib/wtrace.h"
#include "../policy/runtime.h"
#include "../strata.h"
#include "../strata_host.h"
#include "sim.h"

#define REPLAY_DIR "/replay"
#define REPLAY_POLICY "/policy.lua"
#define REPLAY_POLICY_MAX (1u << 20)
/** Background work is run once this much of it (us, in the step's meter) is due. */
#define REPLAY_STEP_US 1000.0
/** The drain's steps of simulated time, ns. */
#define REPLAY_DRAIN_STEP_NS 10000000ull
/** The drain stops once the background has been quiet this long with the backlog unchanged
 *  (a policy that leaves generations pending until a later seal never drains), ns. */
#define REPLAY_QUIET_NS (600ull * 1000000000ull)
/** The series' first step, ns (it doubles each time the points run out). */
#define REPLAY_SERIES_STEP_NS 1000000000ull
/** Table counts per get above this are counted here. */
#define REPLAY_GET_HIST 1024u
/** An index partition, as the engine cuts them (run.h's default). */
#define REPLAY_PARTITION_BYTES (64u << 10)

struct replay {
	const struct replay_config *c;
	struct replay_result *r;
	struct sim_fs *fs;
	strata *db;
	uint64_t now;
	/** Background work due and not yet run, us. */
	double due_us;
	/** Scratch for the rows of a request. */
	uint8_t *keys, *vals;
	size_t keys_cap, vals_cap;
	strata_row *rows;
	size_t rows_cap;
	int rc;
	char err[600];
	/** Wall-clock deadline, ms of CLOCK_MONOTONIC (0: none), and records since it was read. */
	uint64_t deadline, since_check;
	/** The store's env table: the simulated file system's, its clock the cost model's. */
	struct env_ops ops;
	/** The store's block size (the merge memory estimate). */
	uint64_t block_bytes;
	/** Gets by flushed tables considered and searched (the last bin: that many or more). */
	uint64_t get_tables[REPLAY_GET_HIST + 1], get_searched[REPLAY_GET_HIST + 1];
	/** Bytes merges read, all shards, when the series last looked. */
	uint64_t merged_seen;
	/** The second of trace time being counted, and the bytes written in it. */
	uint64_t sec, sec_written;
	/** Sealed memtables waiting for their flush, all shards, when the backlog was last read. */
	uint64_t sealed_now;
	/** Background jobs queued after the last step. */
	uint64_t bg_pending;
};

/** The simulated file system of this thread's replay: the step meter's clock reads its
 *  model (a replay is one thread). */
static __thread struct sim_fs *replay_fs;

/** The step meter: the cost model's time so far. */
static uint64_t
replay_meter_ns(void)
{
	struct sim_io_stats io;
	sim_fs_io_stats(replay_fs, &io);
	return io.model_ns;
}

/** The series' point of time t (coarsening it when t is past its last point). */
static struct replay_point *
replay_point_at(struct replay_result *r, uint64_t t)
{
	if (r->step_ns == 0)
		r->step_ns = REPLAY_SERIES_STEP_NS;
	while (t / r->step_ns >= REPLAY_SERIES_MAX) {
		for (uint32_t i = 0; i < REPLAY_SERIES_MAX / 2; i++) {
			struct replay_point *a = &r->points[2 * i], *b = &r->points[2 * i + 1];
			struct replay_point m = {a->pending > b->pending ? a->pending : b->pending, a->merged + b->merged,
						 a->written + b->written, a->busy_ns + b->busy_ns, b->io_budget};
			r->points[i] = m;
		}
		memset(&r->points[REPLAY_SERIES_MAX / 2], 0, sizeof(r->points) / 2);
		r->step_ns *= 2;
		r->npoints = (r->npoints + 1) / 2;
	}
	uint32_t i = (uint32_t)(t / r->step_ns);
	if (i + 1 > r->npoints)
		r->npoints = i + 1;
	return &r->points[i];
}

/** A percentile of a count histogram. */
static uint32_t
replay_pct(const uint64_t *h, double q)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i <= REPLAY_GET_HIST; i++)
		n += h[i];
	if (n == 0)
		return 0;
	uint64_t want = (uint64_t)(q * (double)n + 0.999999), seen = 0;
	if (want == 0)
		want = 1;
	for (uint32_t i = 0; i <= REPLAY_GET_HIST; i++) {
		seen += h[i];
		if (seen >= want)
			return i;
	}
	return REPLAY_GET_HIST;
}

static uint32_t
replay_hmax(const uint64_t *h)
{
	for (uint32_t i = REPLAY_GET_HIST + 1; i-- > 0;)
		if (h[i])
			return i;
	return 0;
}

/** What replay_rec returns to stop the read at the deadline. */
#define REPLAY_CUT 2

/** The store's engine events: the seals' bytes (lib/trace.h: a SEAL's fourth value). */
static void
replay_event(void *ctx, enum trace_event kind, const uint64_t *v, unsigned n)
{
	struct replay *p = ctx;
	struct replay_result *r = p->r;
	if (kind == TRACE_SEAL && n >= 4)
		r->sealed_bytes += v[3];
	if (kind == TRACE_PLAN && n >= 3 && v[2] > r->peak_merge_inputs) {
		r->peak_merge_inputs = v[2];
		/* Each input's block and partition, and the writer's (replay.h). */
		r->peak_merge_mem = (v[2] + 1) * (p->block_bytes + REPLAY_PARTITION_BYTES);
	}
}

static int
replay_grow(void **p, size_t *cap, size_t need)
{
	if (*cap >= need)
		return 0;
	size_t n = *cap ? *cap : 4096;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, n);
	if (q == NULL)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

/** The key of a recorded hash and length into k. */
static void
replay_key(uint8_t *k, uint64_t hash, uint32_t len)
{
	uint8_t h[8];
	for (int i = 0; i < 8; i++)
		h[i] = (uint8_t)(hash >> (8 * i));
	memcpy(k, h, len < 8 ? len : 8);
	if (len > 8)
		memset(k + 8, 0, len - 8);
}

/** Pseudo-random value bytes, from the key's hash (the same key, the same bytes). */
static void
replay_value(uint8_t *v, uint64_t hash, uint32_t len)
{
	uint64_t x = hash | 1;
	for (uint32_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		for (uint32_t j = 0; j < 8 && i + j < len; j++)
			v[i + j] = (uint8_t)(x >> (8 * j));
	}
}

/** Pending generations of every shard now: the peaks, and the series' point. */
static void
replay_backlog(struct replay *p, uint64_t *total_out)
{
	uint64_t total = 0, merged = 0, budget = 0, sealed = 0, mem = 0;
	for (uint32_t s = 0; s < p->r->shards; s++) {
		strata_stats st;
		memset(&st, 0, sizeof(st));
		strata_shard_stats(p->db, s, &st);
		total += st.generations;
		merged += st.merge_bytes_in;
		sealed += st.sealed_memtables;
		mem += st.memtable_bytes;
		budget = st.background_io_bytes_per_s;
		if (st.generations > p->r->peak_pending)
			p->r->peak_pending = st.generations;
		if (s < REPLAY_MAX_SHARDS && st.generations > p->r->peak_pending_shard[s])
			p->r->peak_pending_shard[s] = st.generations;
	}
	if (total > p->r->peak_pending_total)
		p->r->peak_pending_total = total;
	if (sealed > p->r->peak_sealed)
		p->r->peak_sealed = sealed;
	if (mem > p->r->peak_memtable_bytes)
		p->r->peak_memtable_bytes = mem;
	p->sealed_now = sealed;
	struct replay_point *pt = replay_point_at(p->r, p->now);
	if (total > pt->pending)
		pt->pending = total;
	pt->merged += merged - p->merged_seen;
	pt->io_budget = budget;
	p->merged_seen = merged;
	if (total_out != NULL)
		*total_out = total;
}

/** Pending generations of each shard now into out (REPLAY_MAX_SHARDS at most). */
static void
replay_shard_pending(struct replay *p, uint64_t *out)
{
	for (uint32_t s = 0; s < p->r->shards && s < REPLAY_MAX_SHARDS; s++) {
		strata_stats st;
		memset(&st, 0, sizeof(st));
		strata_shard_stats(p->db, s, &st);
		out[s] = st.generations;
	}
}

/** Move the clock to t and run the background work that time pays for. */
static int
replay_time(struct replay *p, uint64_t t)
{
	if (t > p->now) {
		double speed = p->c->speed > 0 ? p->c->speed : 1.0;
		p->due_us += (double)(t - p->now) / 1e3 * speed;
		p->now = t;
		uint64_t fs_now = sim_fs_now(p->fs);
		if (t > fs_now)
			sim_fs_advance(p->fs, t - fs_now);
		if (strata_tick(p->db, t) != 0)
			return -1;
	}
	while (p->due_us >= REPLAY_STEP_US) {
		strata_step_info info;
		memset(&info, 0, sizeof(info));
		struct sim_io_stats a, b;
		sim_fs_io_stats(p->fs, &a);
		if (strata_step(p->db, (uint64_t)p->due_us, &info) != 0)
			return -1;
		sim_fs_io_stats(p->fs, &b);
		/* Local objects are files: their bytes are the disk's already. */
		int remote = p->c->store != REPLAY_STORE_LOCAL;
		uint64_t wrote = b.disk_write_bytes - a.disk_write_bytes + (remote ? b.os_write_bytes - a.os_write_bytes : 0);
		uint64_t read = b.disk_read_bytes - a.disk_read_bytes + (remote ? b.os_read_bytes - a.os_read_bytes : 0);
		p->r->bg_written += wrote;
		p->r->bg_read += read;
		p->r->bg_busy_ns += b.model_ns - a.model_ns;
		struct replay_point *pt = replay_point_at(p->r, p->now);
		pt->written += wrote;
		pt->busy_ns += b.model_ns - a.model_ns;
		if (p->now / 1000000000ull != p->sec) {
			p->sec = p->now / 1000000000ull;
			p->sec_written = 0;
		}
		p->sec_written += wrote;
		if (p->sec_written > p->r->bg_peak_written_per_s)
			p->r->bg_peak_written_per_s = p->sec_written;
		p->r->steps++;
		p->r->chunks += info.chunks;
		p->bg_pending = info.pending;
		p->due_us -= info.spent_us > 0 ? (double)info.spent_us : p->due_us;
		if (info.pending == 0 || info.blocked)
			p->due_us = p->due_us > REPLAY_STEP_US ? REPLAY_STEP_US - 1 : p->due_us;
	}
	replay_backlog(p, NULL);
	return 0;
}

/** A merge request's answer (the policy's on_merge_request ran). */
static void
replay_merge_done(void *ctx, int rc, uint64_t reclaimed, uint64_t pending, const char *err)
{
}

static int
replay_rec(void *ctx, const struct wtrace_rec *rec)
{
	struct replay *p = ctx;
	struct replay_result *r = p->r;
	if (p->deadline && (++p->since_check & 255) == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 >= p->deadline) {
			r->cut_short = 1;
			return REPLAY_CUT;
		}
	}
	if (rec->kind == WTRACE_ENGINE) {
		if (rec->event == TRACE_SEAL) {
			r->rec_seals++;
			if (rec->nv >= 4)
				r->rec_sealed_bytes += rec->v[3];
		} else if (rec->event == TRACE_PLAN) {
			r->rec_plans++;
		} else if (rec->event == TRACE_COMMIT) {
			r->rec_commits++;
		}
		return 0;
	}
	if (replay_time(p, rec->t_ns) != 0)
		goto failed;
	r->trace_ns = rec->t_ns;
	if (rec->shard >= r->shards)
		return 0; /* a record of a shard the trace's header does not have: skipped */
	r->requests++;
	int rc = 0;
	switch (rec->kind) {
	case WTRACE_APPEND:
	case WTRACE_DELETE: {
		size_t kb = 0, vb = 0;
		for (size_t i = 0; i < rec->nrows; i++) {
			kb += rec->rows[i].key_len;
			vb += rec->rows[i].value_len;
		}
		if (replay_grow((void **)&p->keys, &p->keys_cap, kb + 1) || replay_grow((void **)&p->vals, &p->vals_cap, vb + 1) ||
		    replay_grow((void **)&p->rows, &p->rows_cap, (rec->nrows + 1) * sizeof(strata_row))) {
			p->rc = STRATA_ENOMEM;
			snprintf(p->err, sizeof(p->err), "replay: out of memory");
			return -1;
		}
		size_t ko = 0, vo = 0;
		for (size_t i = 0; i < rec->nrows; i++) {
			const struct wtrace_row *w = &rec->rows[i];
			replay_key(p->keys + ko, w->hash, w->key_len);
			replay_value(p->vals + vo, w->hash, w->value_len);
			p->rows[i] = (strata_row){p->keys + ko, w->key_len, p->vals + vo, w->value_len,
						  rec->kind == WTRACE_DELETE ? STRATA_ROW_DELETE : STRATA_ROW_PUT};
			ko += w->key_len;
			vo += w->value_len;
		}
		rc = strata_append(p->db, rec->shard, p->rows, rec->nrows);
		if (rec->kind == WTRACE_APPEND) {
			r->rows += rec->nrows;
			r->user_bytes += kb + vb;
		} else {
			r->deletes += rec->nrows;
		}
		break;
	}
	case WTRACE_GET: {
		uint8_t k[STRATA_MAX_KEY];
		uint32_t kl = rec->rows[0].key_len <= STRATA_MAX_KEY ? rec->rows[0].key_len : STRATA_MAX_KEY;
		replay_key(k, rec->rows[0].hash, kl);
		void *v = NULL;
		size_t vl = 0;
		rc = strata_get(p->db, rec->shard, k, kl, &v, &vl);
		if (rc == STRATA_NOTFOUND)
			rc = 0;
		struct shard_get_cost gc = shard_last_get_cost();
		p->get_tables[gc.tables < REPLAY_GET_HIST ? gc.tables : REPLAY_GET_HIST]++;
		p->get_searched[gc.searched < REPLAY_GET_HIST ? gc.searched : REPLAY_GET_HIST]++;
		strata_free(v);
		r->gets++;
		break;
	}
	case WTRACE_SEAL:
		rc = strata_seal(p->db, rec->shard);
		r->seal_requests++;
		break;
	case WTRACE_MERGE: {
		struct runtime *rt = strata_runtime(p->db);
		if (rt != NULL && runtime_merge_request(rt, rec->shard, replay_merge_done, r) == 0)
			r->merge_requests++;
		break;
	}
	default:
		r->scans++;
		break;
	}
	if (rc != 0)
		goto failed;
	return 0;
failed:
	p->rc = STRATA_EIO;
	snprintf(p->err, sizeof(p->err), "replay: the store failed at %.3f s of the trace: %s",
		 (double)rec->t_ns / 1e9, strata_last_error());
	return -1;
}

/** Copy the policy file into the simulated file system. */
static int
replay_put_policy(const struct replay_config *c)
{
	if (c->policy_src != NULL) {
		if (c->policy_len >= REPLAY_POLICY_MAX)
			return diag_set(STRATA_EINVAL, "the policy is larger than %u bytes", REPLAY_POLICY_MAX);
		int fd = env.open(REPLAY_POLICY, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int ok = fd >= 0 && env.pwrite(fd, c->policy_src, c->policy_len, 0) == (ssize_t)c->policy_len &&
			 env.fsync(fd) == 0;
		if (fd >= 0)
			env.close(fd);
		return ok ? 0 : diag_set(STRATA_EIO, "cannot write the policy into the simulated file system");
	}
	const char *path = c->policy;
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return diag_set(STRATA_EINVAL, "cannot read the policy %s: %s", path, strerror(errno));
	char *src = malloc(REPLAY_POLICY_MAX);
	size_t n = src ? fread(src, 1, REPLAY_POLICY_MAX, f) : 0;
	fclose(f);
	if (src == NULL || n == REPLAY_POLICY_MAX) {
		free(src);
		return diag_set(STRATA_EINVAL, "the policy %s is larger than %u bytes", path, REPLAY_POLICY_MAX);
	}
	int fd = env.open(REPLAY_POLICY, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int ok = fd >= 0 && env.pwrite(fd, src, n, 0) == (ssize_t)n && env.fsync(fd) == 0;
	if (fd >= 0)
		env.close(fd);
	free(src);
	return ok ? 0 : diag_set(STRATA_EIO, "cannot write the policy into the simulated file system");
}

/** What the store did up to the trace's end. */
static void
replay_trace_totals(struct replay *p)
{
	struct replay_result *r = p->r;
	for (uint32_t s = 0; s < r->shards; s++) {
		strata_stats st;
		memset(&st, 0, sizeof(st));
		strata_shard_stats(p->db, s, &st);
		r->trace_seals += st.seals;
		r->trace_merges += st.merges + st.compactions;
		r->trace_merge_bytes_in += st.merge_bytes_in;
	}
	r->trace_sealed_bytes = r->sealed_bytes;
}

static int replay_run_on(struct replay *pp, const struct replay_config *c, struct replay_result *r);

static void
replay_hash(struct replay_result *r)
{
	r->hash = 0;
	r->hash = XXH3_64bits(r, offsetof(struct replay_result, hash));
}

int
replay_run(const struct replay_config *c, struct replay_result *r)
{
	memset(r, 0, sizeof(*r));
	struct timespec w0;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	struct replay *pp = calloc(1, sizeof(*pp));
	if (pp == NULL)
		return diag_set(STRATA_ENOMEM, "replay: out of memory");
	int rc = replay_run_on(pp, c, r);
	free(pp);
	struct timespec w1;
	clock_gettime(CLOCK_MONOTONIC, &w1);
	r->wall_ns = (uint64_t)(w1.tv_sec - w0.tv_sec) * 1000000000ull + (uint64_t)w1.tv_nsec - (uint64_t)w0.tv_nsec;
	return rc;
}

/** replay_run on a zeroed struct replay. */
static int
replay_run_on(struct replay *pp, const struct replay_config *c, struct replay_result *r)
{
	pp->c = c;
	pp->r = r;
	struct replay_prices prices;
	replay_prices_of(c, &prices);
	/* The header first (and a refusal of a file that is no trace, before any store). */
	struct wtrace_info info;
	int rc = wtrace_read(c->trace, NULL, NULL, &info);
	if (rc == 0 && replay_store_name(c->store)[0] == '?')
		rc = diag_set(STRATA_EINVAL, "replay: unknown store kind %d", c->store);
	if (rc == 0 && (info.shards == 0 || info.shards > 65536))
		rc = diag_set(STRATA_EINVAL, "trace %s: %u shards", c->trace, info.shards);
	if (rc != 0)
		return rc;
	r->shards = info.shards;
	pp->fs = sim_fs_new(1);
	if (pp->fs == NULL)
		return diag_set(STRATA_ENOMEM, "replay: out of memory");
	struct sim_model model;
	replay_model_of(c, &model);
	sim_fs_set_model(pp->fs, &model);
	sim_fs_set_volatile(pp->fs);
	replay_fs = pp->fs;
	pp->ops = *sim_fs_env(pp->fs);
	pp->ops.mono_ns = replay_meter_ns;
	struct env_ops *prev = env_enter(sim_fs_env(pp->fs));
	if (env.mkdir(REPLAY_DIR, 0755) != 0)
		rc = diag_set(STRATA_EIO, "replay: cannot make the simulated data directory");
	if (rc == 0 && (c->policy != NULL || c->policy_src != NULL))
		rc = replay_put_policy(c);
	env_leave(prev);
	strata_options o;
	strata_options_init(&o);
	o.dir = REPLAY_DIR;
	o.shards = info.shards;
	o.sync = STRATA_SYNC_NONE;
	o.env_ops = &pp->ops;
	/* The step's budget is metered by the cost model (replay_meter_ns). */
	o.step_meter = STRATA_STEP_TIME;
	o.policy = c->policy != NULL || c->policy_src != NULL ? REPLAY_POLICY : "";
	o.clock = STRATA_CLOCK_MANUAL;
	o.threads = 0;
	o.seed = 1;
	o.delete_bytes_per_s = 0;
	if (c->merge_max_inputs)
		o.merge_max_inputs = c->merge_max_inputs;
	pp->block_bytes = o.block_bytes;
	if (rc == 0 && (rc = strata_open(&o, &pp->db)) != 0)
		rc = diag_set(rc, "replay: the simulated store does not open: %s", strata_last_error());
	if (rc == 0) {
		trace_set_sink(store_trace(strata_store(pp->db)), replay_event, pp);
		struct wtrace_info ri;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		pp->deadline = c->deadline_ms ? (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + c->deadline_ms : 0;
		rc = wtrace_read(c->trace, replay_rec, pp, &ri);
		r->torn_at = ri.torn_at;
		if (rc == REPLAY_CUT)
			rc = 0;
		else if (rc != 0 && pp->rc != 0)
			rc = diag_set(pp->rc, "%s", pp->err);
	}
	if (rc == 0 && r->cut_short) {
		uint64_t total = 0;
		replay_backlog(pp, &total);
		r->end_pending_total = total;
		replay_shard_pending(pp, r->end_pending_shard);
		replay_trace_totals(pp);
	}
	if (rc == 0 && !r->cut_short) {
		/* After the trace: time goes on, no requests, until nothing is pending. */
		uint64_t end = pp->now, limit = c->drain_limit_ns ? c->drain_limit_ns : 3600ull * 1000000000ull;
		uint64_t total = 0, quiet_since = 0;
		int quiet = 0;
		replay_backlog(pp, &total);
		r->end_pending_total = total;
		replay_shard_pending(pp, r->end_pending_shard);
		replay_trace_totals(pp);
		for (uint64_t t = end; rc == 0; t += REPLAY_DRAIN_STEP_NS) {
			if (replay_time(pp, t) != 0) {
				rc = diag_set(STRATA_EIO, "replay: the store failed draining: %s", strata_last_error());
				break;
			}
			replay_backlog(pp, &total);
			if (total == 0 && pp->sealed_now == 0) {
				r->drained = 1;
				r->drain_ns = r->quiet_ns = t - end;
				r->quiet_pending = 0;
				break;
			}
			/* Quiet: nothing queued, nothing sealed waiting; the last time it became so. */
			if (pp->bg_pending == 0 && pp->sealed_now == 0) {
				if (!quiet || total != r->quiet_pending) {
					quiet = 1;
					quiet_since = t;
					r->quiet_ns = t - end;
					r->quiet_pending = total;
				} else if (t - quiet_since >= REPLAY_QUIET_NS) {
					break;
				}
			} else {
				quiet = 0;
			}
			if (t - end >= limit)
				break;
		}
	}
	/* The series ends where the background went quiet (not at the end of the quiet wait). */
	if (r->step_ns > 0 && !r->cut_short) {
		uint64_t keep = (r->trace_ns + r->quiet_ns) / r->step_ns + 2;
		if (keep < r->npoints) {
			memset(&r->points[keep], 0, (r->npoints - keep) * sizeof(r->points[0]));
			r->npoints = (uint32_t)keep;
		}
	}
	if (pp->db != NULL) {
		replay_shard_pending(pp, r->final_pending_shard);
		for (uint32_t s = 0; s < r->shards; s++) {
			strata_stats st;
			memset(&st, 0, sizeof(st));
			strata_shard_stats(pp->db, s, &st);
			r->seals += st.seals;
			r->merges += st.merges;
			r->merged_generations += st.merged_generations;
			r->merge_bytes_in += st.merge_bytes_in;
			r->merge_bytes_out += st.merge_bytes_out;
			r->compactions += st.compactions;
		}
		strata_policy_info pi;
		if (strata_policy_info_get(pp->db, &pi) == 0) {
			r->hook_runs = pi.hook_runs;
			r->hook_errors = pi.hook_errors;
			snprintf(r->last_error, sizeof(r->last_error), "%s", pi.last_error);
		}
		r->write_amp = r->user_bytes ? (double)(r->sealed_bytes + r->merge_bytes_out) / (double)r->user_bytes : 0;
		struct runtime *rt = strata_runtime(pp->db);
		if (rt != NULL) {
			struct runtime_stats rs;
			runtime_stats(rt, &rs);
			r->hook_cpu_ns = rs.hook_cpu_ns;
		}
		trace_set_sink(store_trace(strata_store(pp->db)), NULL, NULL);
		strata_close(pp->db);
	}
	r->get_tables_p50 = replay_pct(pp->get_tables, 0.50);
	r->get_tables_p99 = replay_pct(pp->get_tables, 0.99);
	r->get_tables_max = replay_hmax(pp->get_tables);
	r->get_searched_p50 = replay_pct(pp->get_searched, 0.50);
	r->get_searched_p99 = replay_pct(pp->get_searched, 0.99);
	r->get_searched_max = replay_hmax(pp->get_searched);
	struct sim_io_stats io;
	sim_fs_io_stats(pp->fs, &io);
	r->os_usd = 0;
	for (int k = 0; k < SIM_OS_KINDS; k++) {
		r->os_requests[k] = io.os_requests[k];
		r->os_usd += (double)io.os_requests[k] / 1000.0 * prices.usd_per_1000[k];
	}
	if (c->store == REPLAY_STORE_LOCAL)
		r->os_usd = 0;
	replay_fs = NULL;
	sim_fs_delete(pp->fs);
	free(pp->keys);
	free(pp->vals);
	free(pp->rows);
	if (rc == 0)
		replay_hash(r);
	return rc;
}

json_t *
replay_result_json(const char *name, const struct replay_result *r, int machine)
{
	json_t *peaks = json_array(), *ends = json_array(), *finals = json_array();
	for (uint32_t s = 0; s < r->shards && s < REPLAY_MAX_SHARDS; s++) {
		json_array_append_new(peaks, json_integer((json_int_t)r->peak_pending_shard[s]));
		json_array_append_new(ends, json_integer((json_int_t)r->end_pending_shard[s]));
		json_array_append_new(finals, json_integer((json_int_t)r->final_pending_shard[s]));
	}
	char hash[24];
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)r->hash);
	json_t *during = json_pack("{s:I, s:I, s:I, s:I}", "seals", (json_int_t)r->trace_seals, "sealed_bytes",
				   (json_int_t)r->trace_sealed_bytes, "merges", (json_int_t)r->trace_merges,
				   "merge_bytes_in", (json_int_t)r->trace_merge_bytes_in);
	json_t *reqs = json_object();
	for (int k = 0; k < SIM_OS_KINDS; k++)
		json_object_set_new(reqs, sim_os_kind_name(k), json_integer((json_int_t)r->os_requests[k]));
	double trace_s = (double)r->trace_ns / 1e9;
	json_t *gets = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "tables_p50", (json_int_t)r->get_tables_p50,
				 "tables_p99", (json_int_t)r->get_tables_p99, "tables_max", (json_int_t)r->get_tables_max,
				 "searched_p50", (json_int_t)r->get_searched_p50, "searched_p99",
				 (json_int_t)r->get_searched_p99, "searched_max", (json_int_t)r->get_searched_max);
	json_t *bg = json_pack("{s:I, s:I, s:f, s:I, s:f}", "written_bytes", (json_int_t)r->bg_written, "read_bytes",
			       (json_int_t)r->bg_read, "busy_s", (double)r->bg_busy_ns / 1e9,
			       "peak_written_bytes_per_s", (json_int_t)r->bg_peak_written_per_s,
			       "mean_written_bytes_per_s", trace_s > 0 ? (double)r->bg_written / trace_s : 0.0);
	json_t *pend = json_array(), *merged = json_array(), *written = json_array(), *budget = json_array();
	for (uint32_t i = 0; i < r->npoints; i++) {
		json_array_append_new(pend, json_integer((json_int_t)r->points[i].pending));
		json_array_append_new(merged, json_integer((json_int_t)r->points[i].merged));
		json_array_append_new(written, json_integer((json_int_t)r->points[i].written));
		json_array_append_new(budget, json_integer((json_int_t)r->points[i].io_budget));
	}
	json_t *series = json_pack("{s:f, s:o, s:o, s:o, s:o}", "step_s", (double)r->step_ns / 1e9, "pending", pend,
				   "merged_bytes", merged, "written_bytes", written, "io_budget_bytes_per_s", budget);
	json_t *o = json_pack("{s:o, s:{s:I, s:I}, s:o, s:{s:o, s:f}, s:o}", "gets", gets, "merge",
			      "peak_inputs", (json_int_t)r->peak_merge_inputs, "peak_memory_bytes_estimated",
			      (json_int_t)r->peak_merge_mem, "background_io", bg, "object_store", "requests", reqs,
			      "usd", r->os_usd, "series", series);
	if (o != NULL && machine) {
		json_object_set_new(o, "hook_cpu_s", json_real((double)r->hook_cpu_ns / 1e9));
		json_object_set_new(o, "wall_s", json_real((double)r->wall_ns / 1e9));
	}
	if (o != NULL)
		json_object_set_new(o, "peak_sealed_memtables", json_integer((json_int_t)r->peak_sealed));
	if (o != NULL)
		json_object_set_new(o, "peak_memtable_bytes", json_integer((json_int_t)r->peak_memtable_bytes));
	if (o == NULL) {
		json_decref(ends);
		json_decref(finals);
	} else {
		json_object_set_new(o, "end_pending_by_shard", ends);
		json_object_set_new(o, "final_pending_by_shard", finals);
		json_object_set_new(o, "quiet_s", json_real((double)r->quiet_ns / 1e9));
		json_object_set_new(o, "pending_when_quiet", json_integer((json_int_t)r->quiet_pending));
	}
	json_t *base = json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:o,"
			 " s:b, s:f, s:I, s:I, s:s}",
			 "policy", name, "hash", hash, "during_trace", during, "requests", (json_int_t)r->requests, "rows", (json_int_t)r->rows,
			 "user_bytes", (json_int_t)r->user_bytes, "seals", (json_int_t)r->seals, "sealed_bytes",
			 (json_int_t)r->sealed_bytes, "merges", (json_int_t)r->merges, "merged_generations",
			 (json_int_t)r->merged_generations, "merge_bytes_in", (json_int_t)r->merge_bytes_in,
			 "merge_bytes_out", (json_int_t)r->merge_bytes_out, "compactions", (json_int_t)r->compactions,
			 "write_amp", r->write_amp, "peak_pending", (json_int_t)r->peak_pending, "peak_pending_total",
			 (json_int_t)r->peak_pending_total, "end_pending_total", (json_int_t)r->end_pending_total,
			 "peak_pending_by_shard", peaks, "drained", r->drained, "drain_s", (double)r->drain_ns / 1e9,
			 "hook_runs", (json_int_t)r->hook_runs, "hook_errors", (json_int_t)r->hook_errors, "last_error",
			 r->last_error);
	if (base != NULL && o != NULL)
		json_object_update(base, o);
	json_decref(o);
	return base;
}


json_t *
replay_report_json(const struct replay_config *c, const struct replay_result *r0, json_t *policies)
{
	struct sim_model m;
	replay_model_of(c, &m);
	struct replay_prices pr;
	replay_prices_of(c, &pr);
	json_t *prices = json_object();
	for (int k = 0; k < SIM_OS_KINDS; k++)
		json_object_set_new(prices, sim_os_kind_name(k), json_real(pr.usd_per_1000[k]));
	json_t *model = json_pack("{s:f, s:f, s:I, s:I, s:I, s:I, s:f, s:f}", "disk_read_mib_s", m.disk_read_mib_s,
				  "disk_write_mib_s", m.disk_write_mib_s, "disk_op_ns", (json_int_t)m.disk_op_ns,
				  "disk_sync_ns", (json_int_t)m.disk_sync_ns, "store_read_ns", (json_int_t)m.store_read_ns,
				  "store_write_ns", (json_int_t)m.store_write_ns, "store_mib_s", m.store_mib_s,
				  "cpu_mib_s", m.cpu_mib_s);
	json_t *head = json_pack("{s:s, s:o, s:{s:s, s:o}}", "store", replay_store_name(c->store), "model", model,
				 "prices", "name", pr.name, "usd_per_1000", prices);
	json_t *rep = json_pack("{s:s, s:I, s:f, s:f, s:I, s:b, s:{s:I, s:I, s:I, s:I}, s:o}", "trace", c->trace, "shards",
			 (json_int_t)r0->shards, "trace_s", (double)r0->trace_ns / 1e9, "speed",
			 c->speed > 0 ? c->speed : 1.0, "torn_at", (json_int_t)r0->torn_at, "cut_short", r0->cut_short,
			 "recorded", "seals", (json_int_t)r0->rec_seals, "sealed_bytes", (json_int_t)r0->rec_sealed_bytes,
			 "merge_plans", (json_int_t)r0->rec_plans, "commits", (json_int_t)r0->rec_commits, "policies",
			 policies);
	if (rep != NULL && head != NULL)
		json_object_update(rep, head);
	json_decref(head);
	return rep;
}
