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
};

/** What replay_rec returns to stop the read at the deadline. */
#define REPLAY_CUT 2

/** The store's engine events: the seals' bytes (lib/trace.h: a SEAL's fourth value). */
static void
replay_event(void *ctx, enum trace_event kind, const uint64_t *v, unsigned n)
{
	struct replay_result *r = ctx;
	if (kind == TRACE_SEAL && n >= 4)
		r->sealed_bytes += v[3];
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

/** Pending generations of every shard now: the peaks. */
static void
replay_backlog(struct replay *p, uint64_t *total_out)
{
	uint64_t total = 0;
	for (uint32_t s = 0; s < p->r->shards; s++) {
		strata_stats st;
		memset(&st, 0, sizeof(st));
		strata_shard_stats(p->db, s, &st);
		total += st.generations;
		if (st.generations > p->r->peak_pending)
			p->r->peak_pending = st.generations;
		if (s < REPLAY_MAX_SHARDS && st.generations > p->r->peak_pending_shard[s])
			p->r->peak_pending_shard[s] = st.generations;
	}
	if (total > p->r->peak_pending_total)
		p->r->peak_pending_total = total;
	if (total_out != NULL)
		*total_out = total;
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
		if (strata_step(p->db, (uint64_t)p->due_us, &info) != 0)
			return -1;
		p->r->steps++;
		p->r->chunks += info.chunks;
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
	struct replay p = {.c = c, .r = r};
	/* The header first (and a refusal of a file that is no trace, before any store). */
	struct wtrace_info info;
	int rc = wtrace_read(c->trace, NULL, NULL, &info);
	if (rc == 0 && (info.shards == 0 || info.shards > 65536))
		rc = diag_set(STRATA_EINVAL, "trace %s: %u shards", c->trace, info.shards);
	if (rc != 0)
		return rc;
	r->shards = info.shards;
	p.fs = sim_fs_new(1);
	if (p.fs == NULL)
		return diag_set(STRATA_ENOMEM, "replay: out of memory");
	struct env_ops *prev = env_enter(sim_fs_env(p.fs));
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
	o.env_ops = sim_fs_env(p.fs);
	o.policy = c->policy != NULL || c->policy_src != NULL ? REPLAY_POLICY : "";
	o.clock = STRATA_CLOCK_MANUAL;
	o.threads = 0;
	o.seed = 1;
	o.delete_bytes_per_s = 0;
	if (c->merge_max_inputs)
		o.merge_max_inputs = c->merge_max_inputs;
	if (rc == 0 && (rc = strata_open(&o, &p.db)) != 0)
		rc = diag_set(rc, "replay: the simulated store does not open: %s", strata_last_error());
	if (rc == 0) {
		trace_set_sink(store_trace(strata_store(p.db)), replay_event, r);
		struct wtrace_info ri;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		p.deadline = c->deadline_ms ? (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + c->deadline_ms : 0;
		rc = wtrace_read(c->trace, replay_rec, &p, &ri);
		r->torn_at = ri.torn_at;
		if (rc == REPLAY_CUT)
			rc = 0;
		else if (rc != 0 && p.rc != 0)
			rc = diag_set(p.rc, "%s", p.err);
	}
	if (rc == 0 && r->cut_short) {
		uint64_t total = 0;
		replay_backlog(&p, &total);
		r->end_pending_total = total;
		replay_trace_totals(&p);
	}
	if (rc == 0 && !r->cut_short) {
		/* After the trace: time goes on, no requests, until nothing is pending. */
		uint64_t end = p.now, limit = c->drain_limit_ns ? c->drain_limit_ns : 3600ull * 1000000000ull;
		uint64_t total = 0;
		replay_backlog(&p, &total);
		r->end_pending_total = total;
		replay_trace_totals(&p);
		for (uint64_t t = end; rc == 0; t += REPLAY_DRAIN_STEP_NS) {
			if (replay_time(&p, t) != 0) {
				rc = diag_set(STRATA_EIO, "replay: the store failed draining: %s", strata_last_error());
				break;
			}
			replay_backlog(&p, &total);
			if (total == 0) {
				r->drained = 1;
				r->drain_ns = t - end;
				break;
			}
			if (t - end >= limit)
				break;
		}
	}
	if (p.db != NULL) {
		for (uint32_t s = 0; s < r->shards; s++) {
			strata_stats st;
			memset(&st, 0, sizeof(st));
			strata_shard_stats(p.db, s, &st);
			r->seals += st.seals;
			r->merges += st.merges;
			r->merged_generations += st.merged_generations;
			r->merge_bytes_in += st.merge_bytes_in;
			r->merge_bytes_out += st.merge_bytes_out;
			r->compactions += st.compactions;
		}
		strata_policy_info pi;
		if (strata_policy_info_get(p.db, &pi) == 0) {
			r->hook_runs = pi.hook_runs;
			r->hook_errors = pi.hook_errors;
			snprintf(r->last_error, sizeof(r->last_error), "%s", pi.last_error);
		}
		r->write_amp = r->user_bytes ? (double)(r->sealed_bytes + r->merge_bytes_out) / (double)r->user_bytes : 0;
		trace_set_sink(store_trace(strata_store(p.db)), NULL, NULL);
		strata_close(p.db);
	}
	sim_fs_delete(p.fs);
	free(p.keys);
	free(p.vals);
	free(p.rows);
	if (rc == 0)
		replay_hash(r);
	return rc;
}

json_t *
replay_result_json(const char *name, const struct replay_result *r)
{
	json_t *peaks = json_array();
	for (uint32_t s = 0; s < r->shards && s < REPLAY_MAX_SHARDS; s++)
		json_array_append_new(peaks, json_integer((json_int_t)r->peak_pending_shard[s]));
	char hash[24];
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)r->hash);
	json_t *during = json_pack("{s:I, s:I, s:I, s:I}", "seals", (json_int_t)r->trace_seals, "sealed_bytes",
				   (json_int_t)r->trace_sealed_bytes, "merges", (json_int_t)r->trace_merges,
				   "merge_bytes_in", (json_int_t)r->trace_merge_bytes_in);
	return json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:o,"
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
}


json_t *
replay_report_json(const struct replay_config *c, const struct replay_result *r0, json_t *policies)
{
	return json_pack("{s:s, s:I, s:f, s:f, s:I, s:b, s:{s:I, s:I, s:I, s:I}, s:o}", "trace", c->trace, "shards",
			 (json_int_t)r0->shards, "trace_s", (double)r0->trace_ns / 1e9, "speed",
			 c->speed > 0 ? c->speed : 1.0, "torn_at", (json_int_t)r0->torn_at, "cut_short", r0->cut_short,
			 "recorded", "seals", (json_int_t)r0->rec_seals, "sealed_bytes", (json_int_t)r0->rec_sealed_bytes,
			 "merge_plans", (json_int_t)r0->rec_plans, "commits", (json_int_t)r0->rec_commits, "policies",
			 policies);
}
