/*
 * trial.c — a policy's trial: compile and validate it, then run every hook once against
 * a simulated node under the real budgets (trial.h).
 *
 * The simulated node is a loop of the trial's own (driven by the calling thread with
 * EVRUN_ONCE and a 10 ms guard timer), a host on it, a store in a temporary directory
 * (sync none) filled with trial_gens[] generations per shard, and a policy runtime on
 * them. The calling thread enters an environment of its own whose log member captures
 * the lines into the report (the host's threads inherit it), so nothing the trial's
 * runtime logs reaches the process's sink.
 */
#include "trial.h"

#include <errno.h>
#include <ev.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/store.h"
#include "../host/host.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "runtime.h"

const unsigned trial_gens[TRIAL_SHARDS] = {4, 2, 0};

/** The environment a trial runs in: the caller's table with the log captured. */
struct trial_env {
	/** The table (first: env_tls points here on every thread of the trial). */
	struct env_ops ops;
	/** Guards where. */
	pthread_mutex_t mu;
	/** The log a captured line is appended to (a run's, or the trial's). */
	char **where;
};

/** Append line and a newline to the env.malloc'ed text *dst. */
static void
trial_append(char **dst, const char *line)
{
	size_t have = *dst ? strlen(*dst) : 0, add = strlen(line);
	char *q = env.realloc(*dst, have + add + 2);
	if (q == NULL)
		return;
	memcpy(q + have, line, add);
	q[have + add] = '\n';
	q[have + add + 1] = '\0';
	*dst = q;
}

/** The log member of a trial's environment: keep the line in the report. The runtime's
 *  own line about a failed hook is left out (the run's error says it). */
static void
trial_log(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	struct trial_env *e = (struct trial_env *)env_tls;
	if (level < diag_log_level || strncmp(msg, "policy hook ", 12) == 0)
		return;
	char text[4 * DIAG_LOG_MAX + 1], line[sizeof(text) + 16];
	diag_logfmt_escape(msg, text, sizeof(text));
	snprintf(line, sizeof(line), "%s: %s", names[level & 3], text);
	pthread_mutex_lock(&e->mu);
	if (e->where != NULL)
		trial_append(e->where, line);
	pthread_mutex_unlock(&e->mu);
}

static void
trial_capture(struct trial_env *e, char **where)
{
	pthread_mutex_lock(&e->mu);
	e->where = where;
	pthread_mutex_unlock(&e->mu);
}

static uint64_t
trial_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- the simulated node */

/** The simulated node: a loop, a host on it, a store with generations pending. */
struct trial_sim {
	/** Temporary data directory ("" when none was made). */
	char dir[512];
	/** The loop the trial drives. */
	struct ev_loop *loop;
	/** Keeps EVRUN_ONCE from blocking longer than 10 ms. */
	ev_timer guard;
	/** The host on loop. */
	struct host *host;
	/** The store. */
	struct store *db;
};

static void
trial_guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

static int
trial_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void
trial_sim_close(struct trial_sim *s)
{
	store_close(s->db);
	host_delete(s->host);
	if (s->loop != NULL) {
		ev_timer_stop(s->loop, &s->guard);
		ev_loop_destroy(s->loop);
	}
	if (s->dir[0] != '\0')
		nftw(s->dir, trial_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	memset(s, 0, sizeof(*s));
}

/** Build the simulated node; 0, or -1 with the reason in err. */
static int
trial_sim_open(struct trial_sim *s, const struct trial_options *o, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	const char *tmp = o->tmpdir ? o->tmpdir : getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/strata-policy-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(s->dir) == NULL) {
		snprintf(err, errlen, "cannot create a temporary store in %s: %s", s->dir, strerror(errno));
		s->dir[0] = '\0';
		return -1;
	}
	strata_options so = *o->store;
	so.dir = s->dir;
	so.wal_dir = NULL;
	so.store = NULL;
	so.wal = STRATA_WAL_LOCAL;
	so.serve_first = so.serve_count = 0;
	so.shards = TRIAL_SHARDS;
	so.sync = STRATA_SYNC_NONE;
	so.policy = NULL;
	so.env_ops = NULL;
	so.clock = STRATA_CLOCK_REAL;
	s->loop = ev_loop_new(EVFLAG_AUTO);
	struct host_options ho = {.mode = HOST_THREADED, .loop = s->loop};
	if (s->loop == NULL || host_new(&ho, &s->host) != 0 || store_open(&so, &s->db) != 0) {
		snprintf(err, errlen, "cannot open a temporary store in %s: %s", s->dir,
			 s->loop ? diag_last() : "no event loop");
		trial_sim_close(s);
		return -1;
	}
	ev_timer_init(&s->guard, trial_guard_cb, 0.01, 0.01);
	ev_timer_start(s->loop, &s->guard);
	for (uint32_t shard = 0; shard < TRIAL_SHARDS; shard++) {
		for (unsigned g = 0; g < trial_gens[shard]; g++) {
			strata_row rows[TRIAL_ROWS];
			char keys[TRIAL_ROWS][32], vals[TRIAL_ROWS][32];
			for (unsigned i = 0; i < TRIAL_ROWS; i++) {
				snprintf(keys[i], sizeof(keys[i]), "key-%02u-%04u", g, i);
				snprintf(vals[i], sizeof(vals[i]), "value-%u-%u-%u", shard, g, i);
				rows[i] = (strata_row){keys[i], strlen(keys[i]), vals[i], strlen(vals[i])};
			}
			if (store_append(s->db, shard, rows, TRIAL_ROWS, NULL) != 0 || store_seal(s->db, shard) != 0) {
				snprintf(err, errlen, "cannot fill the temporary store: %s", diag_last());
				trial_sim_close(s);
				return -1;
			}
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- runs */

/** Completion of one hook run (ctx: its trial_run, which lives as long as the report,
 *  longer than the runtime that calls this). */
static void
trial_hook_done(void *ctx, const char *err, const char *result, uint64_t cpu_ns)
{
	struct trial_run *run = ctx;
	run->done = 1;
	if (run->abandoned)
		return;
	run->outcome = err != NULL ? TRIAL_RUN_FAILED : TRIAL_RUN_OK;
	snprintf(run->err, sizeof(run->err), "%s", err ? err : "");
	snprintf(run->result, sizeof(run->result), "%s", result ? result : "");
	run->cpu_ns = cpu_ns;
}

/** Run hook h (on shard) once into run. */
static void
trial_run_one(struct trial *t, struct trial_env *e, struct trial_sim *s, struct runtime *rt, enum policy_hook h,
	      uint32_t shard)
{
	struct trial_run *run = &t->runs[t->nruns++];
	run->hook = h;
	run->shard = shard;
	run->scripted = t->has_hook[h];
	trial_capture(e, &run->log);
	uint64_t t0 = trial_now_ns(), deadline = t0 + (uint64_t)(TRIAL_WALL_S * 1e9);
	int rc;
	/* A run the runtime started by itself (a trigger) goes first. */
	while ((rc = runtime_run_hook(rt, h, shard, trial_hook_done, run)) == STRATA_EBUSY &&
	       trial_now_ns() < deadline)
		ev_run(s->loop, EVRUN_ONCE);
	if (rc != 0) {
		run->outcome = TRIAL_RUN_NOT_STARTED;
		snprintf(run->err, sizeof(run->err), "cannot start it: %s", diag_last());
	} else {
		while (!run->done && trial_now_ns() < deadline)
			ev_run(s->loop, EVRUN_ONCE);
		if (!run->done) {
			run->abandoned = 1;
			run->outcome = TRIAL_RUN_STUCK;
			snprintf(run->err, sizeof(run->err), "still running after %.0f s of wall time (parked on IO "
				 "that never finished?)", TRIAL_WALL_S);
		}
	}
	run->wall_ns = trial_now_ns() - t0;
	trial_capture(e, &t->log);
	if (run->outcome != TRIAL_RUN_OK)
		t->failed++;
	t->counted++;
}

/** The hook runs and the checks after them on the simulated node s. */
static void
trial_runs(struct trial *t, struct trial_env *e, struct trial_sim *s, const char *src, size_t len)
{
	struct runtime_options ro = {.db = s->db,
				     .host = s->host,
				     .policy_path = t->name,
				     .policy_source = src,
				     .hook_budget_ms = t->limits.budget_ms,
				     .policy_mem_bytes = t->limits.mem_bytes};
	(void)len;
	struct runtime *rt = NULL;
	/* What the runtime logs as it loads the policy (its clamps) the report says already. */
	trial_capture(e, NULL);
	int rc = runtime_new(&ro, &rt);
	if (rc != 0)
		snprintf(t->runtime_err, sizeof(t->runtime_err), "%s", diag_last());
	trial_capture(e, &t->log);
	if (rc != 0) {
		t->failed++;
		t->counted = 1;
		return;
	}
	for (uint32_t shard = 0; shard < TRIAL_SHARDS; shard++)
		trial_run_one(t, e, s, rt, POLICY_ON_SEAL, shard);
	trial_run_one(t, e, s, rt, POLICY_ON_MERGE_REQUEST, 0);
	trial_run_one(t, e, s, rt, POLICY_ON_SWEEP, 0);
	/* What the runs started (merges, seals) finishes before the store closes. */
	uint64_t deadline = trial_now_ns() + (uint64_t)(TRIAL_WALL_S * 1e9);
	while (runtime_busy(rt) > 0 && trial_now_ns() < deadline)
		ev_run(s->loop, EVRUN_ONCE);
	runtime_delete(rt);
	for (uint32_t shard = 0; shard < TRIAL_SHARDS; shard++)
		if (store_check(s->db, shard) != 0) {
			if (t->bad_shards++ == 0)
				snprintf(t->check_err, sizeof(t->check_err), "the invariants of shard %u after the runs: %s",
					 shard, diag_last());
			t->failed++;
		}
}

/* ---------------------------------------------------------------- API */

int
trial_new(const char *name, const char *src, size_t len, const struct trial_options *o, struct trial **out)
{
	*out = NULL;
	struct trial *t = env.calloc(1, sizeof(*t));
	if (t == NULL)
		return diag_set(STRATA_ENOMEM, "policy trial: out of memory");
	snprintf(t->name, sizeof(t->name), "%s", name ? name : "policy");
	t->limits.budget_ms = o->limits.budget_ms ? o->limits.budget_ms : POLICY_DEFAULT_BUDGET_MS;
	t->limits.mem_bytes = o->limits.mem_bytes ? o->limits.mem_bytes : POLICY_DEFAULT_MEM_BYTES;
	t->engine.merge_max_inputs = o->store->merge_max_inputs;
	t->engine.merge_threads = o->store->merge_threads;
	*out = t;
	struct policy *p = NULL;
	t->compile_rc = policy_new(t->name, src, len, &t->limits, &p);
	if (t->compile_rc != 0) {
		snprintf(t->errors, sizeof(t->errors), "%s", diag_last());
		return STRATA_EINVAL;
	}
	t->settings = *policy_settings(p);
	t->nclamps = policy_clamps(&t->settings, &t->engine, t->clamps, POLICY_MAX_CLAMPS);
	if (t->nclamps > POLICY_MAX_CLAMPS)
		t->nclamps = POLICY_MAX_CLAMPS;
	for (int h = 0; h < POLICY_HOOK_COUNT; h++)
		t->has_hook[h] = policy_has_hook(p, (enum policy_hook)h);
	policy_describe(p, &t->engine, t->describe, sizeof(t->describe));
	policy_delete(p);
	if (!o->run)
		return 0;
	/* The trial's own environment: the caller's, its log kept in the report. */
	struct trial_env e;
	memset(&e, 0, sizeof(e));
	e.ops = *env_current();
	e.ops.log = trial_log;
	pthread_mutex_init(&e.mu, NULL);
	e.where = &t->log;
	struct env_ops *prev = env_enter(&e.ops);
	struct trial_sim s;
	int rc = 0;
	if (trial_sim_open(&s, o, t->setup_err, sizeof(t->setup_err)) != 0) {
		rc = STRATA_EIO;
	} else {
		t->ran = 1;
		trial_runs(t, &e, &s, src, len);
		trial_sim_close(&s);
	}
	env_leave(prev);
	pthread_mutex_destroy(&e.mu);
	if (rc != 0)
		return diag_set(rc, "policy trial: %s", t->setup_err);
	return t->failed ? STRATA_EINVAL : 0;
}

void
trial_delete(struct trial *t)
{
	if (t == NULL)
		return;
	for (unsigned i = 0; i < t->nruns; i++)
		env.free(t->runs[i].log);
	env.free(t->log);
	env.free(t);
}

const struct trial_run *
trial_first_failure(const struct trial *t)
{
	for (unsigned i = 0; i < t->nruns; i++)
		if (t->runs[i].outcome != TRIAL_RUN_OK)
			return &t->runs[i];
	return NULL;
}

int
trial_msg_line(const struct trial *t, const char *msg)
{
	size_t nl = strlen(t->name);
	if (strncmp(msg, t->name, nl) != 0 || msg[nl] != ':')
		return 0;
	char *end;
	long line = strtol(msg + nl + 1, &end, 10);
	return end != msg + nl + 1 && *end == ':' && line > 0 ? (int)line : 0;
}
