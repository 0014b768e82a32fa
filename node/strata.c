/*
 * strata.c — the public API (strata.h, and strata_host.h for the programs that compose a
 * node themselves), in one place: a handle is a core store (node/core/store.h, which
 * checks the arguments and dispatches to the shards), the host it runs on and, with
 * options.policy, the policy runtime on that host's loop (or on a second host's).
 * strata_open creates its own host (a loop thread and a background executor when a
 * policy runs, an inline host without threads otherwise); `strata serve` and `strata
 * load --embedded` make two hosts, one whose loop serves their clients and one with a
 * loop thread for the runtime, and use strata_open_on (strata_host.h).
 *
 * Built with STRATA_CORE_ONLY (libstrata-core.a), it has neither host nor runtime and
 * needs neither libev nor LuaJIT; options.policy is then refused (handle_rt below).
 */
#include <xxhash.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/reaper.h"
#include "core/run.h"
#include "core/store.h"
#include "lib/buf.h"
#include "lib/diag.h"
#include "lib/env.h"
#include "lib/trace.h"
#include "lib/wtrace.h"
#include <pthread.h>
#include <sched.h>
#include "objstore/objstore.h"
#include "strata.h"
#ifndef STRATA_CORE_ONLY
#include "host/host.h"
#include "lib/pool.h"
#include "policy/runtime.h"
#include "strata_host.h"
#endif

struct host;
struct runtime;
struct strata_runtime_options;

/*
 * The environment of a handle with a manual clock or a seed: a copy of the caller's
 * table whose clocks, random source and hook-budget clock are the handle's. These run
 * only through the copy, which the handle enters in every call and its threads run in,
 * so env_tls points at ops whenever one of them runs and they find the rest from it.
 */
struct strata_env {
	/** The table (first: env_tls points here). */
	struct env_ops ops;
	/** The table it copies (options.env_ops, or the default): the real clock. */
	const struct env_ops *base;
	/** Manual clock: the time strata_tick set, ns. */
	_Atomic uint64_t now;
	/** Seed of the random source, and the draws taken from it. */
	uint64_t seed;
	_Atomic uint64_t draws;
	/** Manual clock: the hook-budget clock, advanced a fixed step per read. */
	_Atomic uint64_t cpu;
};

/** Manual clock: what one read of the hook-budget clock advances it by. Hooks count
 *  instructions then: the count hook reads it every POLICY_HOOK_INSTRUCTIONS (1000)
 *  instructions, so 1 ms of hook_budget_ms is 100 000 instructions on every machine. */
#define STRATA_MANUAL_CPU_STEP_NS 10000u

static struct strata_env *
senv_cur(void)
{
	return (struct strata_env *)env_tls;
}

static uint64_t
senv_now(void)
{
	return atomic_load(&senv_cur()->now);
}

static uint64_t
senv_random(void)
{
	struct strata_env *e = senv_cur();
	return trace_mix(e->seed ^ trace_mix(atomic_fetch_add(&e->draws, 1) + 0x9e3779b97f4a7c15ull));
}

static uint64_t
senv_cpu(void)
{
	return atomic_fetch_add(&senv_cur()->cpu, STRATA_MANUAL_CPU_STEP_NS);
}

/** The handle's own table when options ask for a manual clock or a seed, else NULL (0)
 *  and the caller's table serves. */
static int
senv_new(const strata_options *o, struct strata_env **out)
{
	*out = NULL;
	if (o->clock != STRATA_CLOCK_REAL && o->clock != STRATA_CLOCK_MANUAL)
		return diag_set(STRATA_EINVAL, "strata_open: unknown clock %d (STRATA_CLOCK_REAL or "
				"STRATA_CLOCK_MANUAL)", o->clock);
	if (o->step_meter < STRATA_STEP_AUTO || o->step_meter > STRATA_STEP_WORK)
		return diag_set(STRATA_EINVAL, "strata_open: unknown step_meter %d", o->step_meter);
	if (o->threads < STRATA_THREADS_DEFAULT || o->threads > 1024)
		return diag_set(STRATA_EINVAL, "strata_open: threads must be -1 (default), 0 (inline) "
				"or 1..1024, not %d", o->threads);
	if (o->clock == STRATA_CLOCK_REAL && o->seed == 0)
		return 0;
	const struct env_ops *base = o->env_ops != NULL ? o->env_ops : &env_default;
	struct strata_env *e = base->calloc(1, sizeof(*e));
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	e->ops = *base;
	e->base = base;
	e->seed = o->seed;
	if (o->seed != 0)
		e->ops.random = senv_random;
	if (o->clock == STRATA_CLOCK_MANUAL) {
		e->ops.mono_ns = senv_now;
		e->ops.wall_ns = senv_now;
		e->ops.cpu_ns = senv_cpu;
	}
	*out = e;
	return 0;
}

static void
senv_delete(struct strata_env *e)
{
	if (e != NULL)
		e->base->free(e);
}

struct strata {
	/** The engine. */
	struct store *store;
	/** The environment the handle was opened in (options.env_ops, or senv's; NULL: default). */
	struct env_ops *env_ops;
	/** The handle's own environment (manual clock, seed), or NULL. */
	struct strata_env *senv;
	/** The clock of the time meter: the real one (the environment's before senv). */
	uint64_t (*real_ns)(void);
	/** strata_step measures in work (1) or in time (0). */
	int work_meter;
	/** Inline mode with STRATA_SYNC_INTERVAL: the step syncs the WALs; when it last did. */
	int step_syncs;
	uint64_t synced_at;
	uint32_t sync_interval_ms;
	/** The host the handle runs on (NULL in libstrata-core). */
	struct host *host;
	/** The handle created host and deletes it at close. */
	int own_host;
	/** The host the policy runtime runs on (host, or strata_runtime_options.host). */
	struct host *rt_host;
	/** The policy runtime on rt_host's loop, or NULL. */
	struct runtime *rt;
	/** A threaded handle without a runtime: its background executor runs the deletes of
	 *  merged objects (reap_kick). A reap job is queued or running; deletes were queued
	 *  since the job last looked; reap jobs not finished (the last thing a job touches:
	 *  the close waits for 0). */
	int reaps;
	atomic_int reap_active, reap_wanted, reap_jobs;
	/** The workload trace being recorded (strata_trace_start), or NULL; tracing says
	 *  whether to look (no read-modify-write on the fast path when not); wt_users are the
	 *  callers recording into it now (a stop waits for them before it frees it). */
	_Atomic(struct wtrace *) wt;
	atomic_int tracing, wt_users;
	/** Serialises strata_trace_start and _stop. */
	pthread_mutex_t wt_mu;
	/** The last trace stopped (kept for strata_trace_status until the next start). */
	struct wtrace *wt_last;
};

/* ---------- the workload trace (lib/wtrace.h) ---------- */

/** The trace to record into, or NULL; wt_leave after recording when not NULL. */
static struct wtrace *
wt_enter(strata *db)
{
	if (!atomic_load_explicit(&db->tracing, memory_order_relaxed))
		return NULL;
	atomic_fetch_add(&db->wt_users, 1);
	struct wtrace *w = atomic_load(&db->wt);
	if (w == NULL)
		atomic_fetch_sub(&db->wt_users, 1);
	return w;
}

static void
wt_leave(strata *db)
{
	atomic_fetch_sub(&db->wt_users, 1);
}

/** Record n rows of an append (or, kind WTRACE_DELETE, keys of a delete). */
static void
wt_rows(strata *db, enum wtrace_kind kind, uint32_t shard, const strata_row *rows, const void *const *keys,
	const size_t *key_lens, size_t n)
{
	struct wtrace *w = wt_enter(db);
	if (w == NULL)
		return;
	struct wtrace_row one[64], *r = n <= 64 ? one : env.malloc(n * sizeof(*r));
	if (r != NULL) {
		for (size_t i = 0; i < n; i++) {
			const void *k = rows ? rows[i].key : keys[i];
			size_t kl = rows ? rows[i].key_len : key_lens[i];
			r[i] = (struct wtrace_row){XXH3_64bits(k, kl), (uint32_t)kl, rows ? (uint32_t)rows[i].value_len : 0};
		}
		/* A batch with deletes in it is recorded as it was sent: puts and deletes alike as rows. */
		wtrace_rows(w, kind, shard, r, n);
		if (r != one)
			env.free(r);
	}
	wt_leave(db);
}

/** lib/trace.h's sink: the engine's events into the workload trace (appends are the
 *  requests' records already). */
static void
wt_engine_event(void *ctx, enum trace_event kind, const uint64_t *v, unsigned n)
{
	if (kind == TRACE_APPEND)
		return;
	strata *db = ctx;
	struct wtrace *w = wt_enter(db);
	if (w == NULL)
		return;
	wtrace_engine(w, (unsigned)kind, v, n);
	wt_leave(db);
}

/** Stop and free the trace being recorded (wt_mu held). */
static void
wt_retire(strata *db)
{
	struct wtrace *w = atomic_exchange(&db->wt, NULL);
	atomic_store(&db->tracing, 0);
	if (w == NULL)
		return;
	while (atomic_load(&db->wt_users) > 0)
		sched_yield();
	wtrace_stop(w);
	wtrace_close(db->wt_last);
	db->wt_last = w;
}

int
strata_trace_start(strata *db, const struct wtrace_options *o)
{
	struct wtrace_options wo = *o;
	wo.shards = store_shards(db->store);
	pthread_mutex_lock(&db->wt_mu);
	wt_retire(db);
	struct wtrace *w;
	int rc = wtrace_open(&wo, &w);
	if (rc == 0) {
		trace_set_sink(store_trace(db->store), wt_engine_event, db);
		atomic_store(&db->wt, w);
		atomic_store(&db->tracing, 1);
		diag_log(LOG_LVL_INFO, "trace: recording into %s (at most %llu bytes%s)", wtrace_path(w),
			 (unsigned long long)wo.max_bytes, wo.rotate ? ", then it moves to .1 and goes on" : "");
	}
	pthread_mutex_unlock(&db->wt_mu);
	return rc;
}

void
strata_trace_stop(strata *db)
{
	pthread_mutex_lock(&db->wt_mu);
	wt_retire(db);
	pthread_mutex_unlock(&db->wt_mu);
}

void
strata_trace_request(strata *db, int merge, uint32_t shard)
{
	struct wtrace *w = wt_enter(db);
	if (w == NULL)
		return;
	wtrace_request(w, merge ? WTRACE_MERGE : WTRACE_SEAL, shard);
	wt_leave(db);
}

int
strata_trace_status(strata *db, struct wtrace_status *out, char *path, size_t cap)
{
	pthread_mutex_lock(&db->wt_mu);
	struct wtrace *w = atomic_load(&db->wt);
	if (w == NULL)
		w = db->wt_last;
	if (w != NULL) {
		wtrace_status(w, out);
		snprintf(path, cap, "%s", wtrace_path(w));
	}
	pthread_mutex_unlock(&db->wt_mu);
	return w != NULL ? 0 : STRATA_NOTFOUND;
}

/** Fill the handle's clock and meter fields from the options. */
static void
handle_setup(strata *db, const strata_options *o, struct strata_env *senv)
{
	db->senv = senv;
	const struct env_ops *base = senv != NULL ? senv->base : o->env_ops != NULL ? o->env_ops
										   : &env_default;
	db->real_ns = base->mono_ns;
	db->work_meter = o->step_meter == STRATA_STEP_WORK ||
			 (o->step_meter == STRATA_STEP_AUTO && o->clock == STRATA_CLOCK_MANUAL);
	db->step_syncs = o->threads == 0 && o->sync == STRATA_SYNC_INTERVAL;
	db->sync_interval_ms = o->sync_interval_ms;
}

/** The options a handle opens with: o, in the handle's own environment when it needs one
 *  (*senv, NULL otherwise). */
static int
options_with_env(const strata_options *o, strata_options *o2, struct strata_env **senv)
{
	int rc = senv_new(o, senv);
	if (rc)
		return rc;
	*o2 = *o;
	if (*senv != NULL)
		o2->env_ops = &(*senv)->ops;
	return 0;
}

/** Inline mode with STRATA_SYNC_INTERVAL: the WAL sync a step owes, in the handle's
 *  environment (entered by the caller). */
static void
step_sync(strata *db)
{
	if (!db->step_syncs)
		return;
	uint64_t now = env.mono_ns();
	if (now - db->synced_at >= (uint64_t)db->sync_interval_ms * 1000000u) {
		store_sync_written(db->store);
		db->synced_at = now;
	}
}

void
strata_options_init(strata_options *o)
{
	memset(o, 0, sizeof(*o));
	o->shards = 0;
	o->sync = STRATA_SYNC_FSYNC;
	o->sync_interval_ms = 100;
	o->max_value_bytes = 64ull << 20;
	o->wal_segment_bytes = 64ull << 20;
	o->block_bytes = 64u << 10;
	o->zstd_level = 1;
	o->compress_max_bytes_per_kib = RUN_DEFAULT_MAX_PER_KIB;
	o->compress_sample_every = RUN_DEFAULT_SAMPLE_EVERY;
	o->bloom_bits_per_key = 10;
	o->generation_bloom_bits_per_key = 16;
	o->manifest_keep = 4;
	o->manifest_snapshot_edits = 128;
	o->merge_max_inputs = STRATA_DEFAULT_MERGE_MAX_INPUTS;
	o->delete_bytes_per_s = 256ull << 20;
	o->threads = STRATA_THREADS_DEFAULT;
	o->group_commit_wait_us = 200;
	o->max_open_wal_files = 512;
	o->max_open_object_files = 64;
	o->memtable_huge_pages = 1;
	o->replay_batch_rows = 1u << 20;
	o->open_threads = 64;
	o->block_cache_bytes = 64ull << 20;
	o->delete_chunk_bytes = REAPER_CHUNK_DEFAULT;
	o->merge_threads = 0; /* auto: store_merge_threads */
	o->merge_part_min_bytes = STORE_MERGE_PART_MIN_DEFAULT;
	o->owner_check_ms = 1000;
}

/*
 * The host and the policy runtime. libstrata has both: a handle runs on a host (its loop,
 * its executors) and, with options.policy, the runtime on that host's loop (or a second
 * host's). libstrata-core (STRATA_CORE_ONLY) has neither and needs neither libev nor
 * LuaJIT. That is the one difference between the two builds: handle_rt points at the
 * functions below, or is NULL; the public functions after it are written once.
 */

/** What a handle does with its host and its policy runtime. */
struct handle_rt_ops {
	/** Create the host strata_open runs a handle on (threads as the options ask). */
	int (*host_new)(const strata_options *o, struct host **out);
	/** Delete a host strata_open created. */
	void (*host_delete)(struct host *h);
	/** Compile and validate a policy file, before the store is touched. */
	int (*check_policy)(const char *path);
	/** Once the store is open: start the policy runtime (options.policy), or hand the
	 *  deletes of merged objects to the background executor. */
	int (*start)(strata *db, const strata_options *o, const struct strata_runtime_options *ro);
	/** Before the store closes: stop the runtime and the deletes. */
	void (*stop)(strata *db);
	/** strata_step's work, in the handle's environment. */
	int (*step)(strata *db, uint64_t budget_us, strata_step_info *out);
	/** Swap in a policy (src, named name) on the runtime's loop. */
	int (*reload)(strata *db, const char *src, size_t len, const char *name);
	/** The runtime's counters, read on its loop. */
	void (*info)(strata *db, strata_policy_info *out);
	/** The manual clock moved: wake the runtime's loop when it runs on a thread of its own. */
	void (*tick)(strata *db);
};

static int open_on(const strata_options *o, struct host *h, const struct strata_runtime_options *ro,
		   struct strata_env *senv, strata **out);
static void close_handle(strata *db, int discard);

#ifndef STRATA_CORE_ONLY
/** A policy the open refuses (msg: why), named as the open reports it. */
static int
open_policy_refused(int rc, const char *name, const char *msg)
{
	return diag_set(rc < 0 ? rc : STRATA_EINVAL, "policy %s: %s", name, msg);
}

static int
handle_host_new(const strata_options *o, struct host **out)
{
	/* Threads only where asked for, or where a policy runs by default; an inline host
	 * has none and its work runs in strata_step. */
	struct host_options ho;
	memset(&ho, 0, sizeof(ho));
	int threaded = o->threads > 0 || (o->threads == STRATA_THREADS_DEFAULT && o->policy != NULL);
	ho.mode = threaded ? HOST_THREADED : HOST_INLINE;
	ho.loop_thread = threaded;
	ho.threads[HOST_FG] = 1;
	ho.threads[HOST_BG] = o->threads > 0 ? (unsigned)o->threads : 0;
	return host_new(&ho, out);
}

static int
handle_check_policy(const char *path)
{
	int rc = runtime_check_policy(path, NULL, 0, NULL);
	if (rc == 0)
		return 0;
	char msg[DIAG_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", diag_last());
	return open_policy_refused(rc, path, msg);
}

/** Arguments of the runtime's start on the loop thread. */
struct rt_start {
	/** In. */
	const strata_options *o;
	const struct strata_runtime_options *ro;
	strata *db;
	/** Out: the result and, on the loop's thread, its message. */
	int rc;
	char err[DIAG_MSG_MAX];
};

static void
rt_start_on_loop(void *arg)
{
	struct rt_start *c = arg;
	struct runtime_options ro;
	memset(&ro, 0, sizeof(ro));
	ro.db = c->db->store;
	ro.host = c->db->rt_host;
	ro.policy_path = c->o->policy[0] ? c->o->policy : NULL;
	/* A manual clock's store changes only by its embedder's calls: no file watching. */
	ro.watch_file = c->ro != NULL ? c->ro->watch_file
				      : c->o->policy[0] != '\0' && c->o->clock != STRATA_CLOCK_MANUAL;
	ro.watch_settle_ms = c->ro != NULL ? c->ro->watch_settle_ms : 0;
	ro.watch_poll_ms = c->ro != NULL ? c->ro->watch_poll_ms : 0;
	c->rc = runtime_new(&ro, &c->db->rt);
	if (c->rc)
		snprintf(c->err, sizeof(c->err), "%s", diag_last());
}

static void
rt_stop_on_loop(void *arg)
{
	strata *db = arg;
	runtime_delete(db->rt);
	db->rt = NULL;
}

/** The reap job on the background executor: drain the queue (at delete_bytes_per_s)
 *  until no kick came while it ran. */
static void
reap_work(void *arg)
{
	strata *db = arg;
	struct env_ops *prev = env_enter(db->env_ops);
	for (;;) {
		atomic_store(&db->reap_wanted, 0);
		(void)store_reap(db->store, UINT64_MAX);
		atomic_store(&db->reap_active, 0);
		int idle = 0;
		if (!atomic_load(&db->reap_wanted) ||
		    !atomic_compare_exchange_strong(&db->reap_active, &idle, 1))
			break; /* nothing new, or a kick queued a job of its own */
	}
	env_leave(prev);
	atomic_fetch_sub(&db->reap_jobs, 1); /* db may be freed from here on */
}

/** The store queued deletes (any thread, no lock of the store's held): queue the reap
 *  job unless one is queued or running, which then sees reap_wanted. */
static void
reap_kick(void *ctx)
{
	strata *db = ctx;
	atomic_store(&db->reap_wanted, 1);
	int idle = 0;
	if (!atomic_compare_exchange_strong(&db->reap_active, &idle, 1))
		return;
	atomic_fetch_add(&db->reap_jobs, 1);
	if (pool_submit(host_exec(db->host, HOST_BG), reap_work, NULL, db) != 0) {
		atomic_fetch_sub(&db->reap_jobs, 1);
		atomic_store(&db->reap_active, 0);
		diag_log(LOG_LVL_WARN, "deletes of merged objects stay queued until the next kick or the "
			 "close: %s", diag_last());
	}
}

/** Stop handing deletes to the background executor and wait out the reap job. The
 *  store's close deletes what is left unpaced, so the job need not keep the pace either:
 *  the rate change wakes it from its wait for tokens and it ends. */
static void
reaps_stop(strata *db)
{
	if (!db->reaps)
		return;
	store_set_reaper_kick(db->store, NULL, NULL); /* no kick runs or comes after this */
	store_set_delete_rate(db->store, 0);
	while (atomic_load(&db->reap_jobs) != 0)
		usleep(1000);
	db->reaps = 0;
}

static int
handle_start(strata *db, const strata_options *o, const struct strata_runtime_options *ro)
{
	db->rt_host = ro != NULL && ro->host != NULL ? ro->host : db->host;
	if (o->policy != NULL) {
		/* The runtime's watchers live on the loop: start it from the loop's thread. */
		struct rt_start c = {.o = o, .ro = ro, .db = db};
		host_invoke(db->rt_host, rt_start_on_loop, &c);
		return c.rc ? open_policy_refused(c.rc, o->policy[0] ? o->policy : "(built-in)", c.err) : 0;
	}
	/* Without a runtime, a threaded handle's background executor still runs the deletes,
	 * off the callers' threads. A manual clock's pacing moves only with its embedder's
	 * ticks: there the next seal or merge runs them, as in inline mode. */
	if (host_mode(db->host) == HOST_THREADED && o->clock != STRATA_CLOCK_MANUAL) {
		db->reaps = 1;
		store_set_reaper_kick(db->store, reap_kick, db);
	}
	return 0;
}

static void
handle_stop(strata *db)
{
	if (db->rt != NULL)
		host_invoke(db->rt_host, rt_stop_on_loop, db);
	reaps_stop(db);
}

static int
handle_step(strata *db, uint64_t budget_us, strata_step_info *out)
{
	if (host_mode(db->host) != HOST_INLINE)
		return diag_set(STRATA_EINVAL, "strata_step: this handle runs its own threads "
				"(options.threads); only an inline handle (threads = 0) steps");
	step_sync(db);
	struct host_step_info info;
	int rc = host_step(db->host, budget_us, db->work_meter ? NULL : db->real_ns, &info);
	if (rc == 0 && out != NULL) {
		struct host_exec_stats st;
		host_exec_stats(db->host, HOST_BG, &st);
		out->chunks = info.chunks;
		out->turns = info.turns;
		out->spent_us = info.spent_us;
		out->max_chunk_us = info.max_chunk_us;
		out->blocked = info.blocked;
		out->pending = st.pending;
	}
	return rc;
}

/** Arguments of a reload run on the loop thread. */
struct reload_call {
	/** In: the runtime, the source and its name. */
	struct runtime *rt;
	const char *src;
	size_t len;
	const char *name;
	/** Out: the result and, on the loop's thread, its message. */
	int rc;
	char err[DIAG_MSG_MAX];
};

static void
reload_on_loop(void *arg)
{
	struct reload_call *c = arg;
	c->rc = runtime_reload_source(c->rt, c->src, c->len, c->name);
	if (c->rc)
		snprintf(c->err, sizeof(c->err), "%s", diag_last());
}

static int
handle_reload(strata *db, const char *src, size_t len, const char *name)
{
	struct reload_call c = {.rt = db->rt, .src = src, .len = len, .name = name};
	host_invoke(db->rt_host, reload_on_loop, &c);
	return c.rc ? diag_set(STRATA_EINVAL, "%s", c.err) : 0;
}

/** Arguments of a stats read run on the loop thread. */
struct info_call {
	/** The runtime. */
	struct runtime *rt;
	/** Filled on the loop thread. */
	struct runtime_stats st;
};

static void
info_on_loop(void *arg)
{
	struct info_call *c = arg;
	runtime_stats(c->rt, &c->st);
}

static void
handle_info(strata *db, strata_policy_info *out)
{
	struct info_call c;
	memset(&c, 0, sizeof(c));
	c.rt = db->rt;
	host_invoke(db->rt_host, info_on_loop, &c);
	memset(out, 0, sizeof(*out));
	out->version = c.st.policy_version;
	out->reloads = c.st.reloads;
	out->reload_failures = c.st.reload_failures;
	out->hook_runs = c.st.hook_runs;
	out->hook_errors = c.st.hook_errors;
	out->policy_seals = c.st.policy_seals;
	out->policy_merges = c.st.policy_merges;
	out->policy_compactions = c.st.policy_compactions;
	out->flush_timer_fires = c.st.flush_timer_fires;
	out->sweeps = c.st.sweeps;
	snprintf(out->last_error, sizeof(out->last_error), "%s", c.st.last_error);
	snprintf(out->name, sizeof(out->name), "%s", c.st.policy_name);
}

static void
tick_noop(void *arg)
{
	(void)arg;
}

static void
handle_tick(strata *db)
{
	/* A loop on a thread of its own checks its deadlines when it next turns: now. */
	if (host_mode(db->rt_host) == HOST_THREADED && !host_on_loop(db->rt_host)) {
		struct env_ops *prev = env_enter(db->env_ops);
		host_invoke(db->rt_host, tick_noop, NULL);
		env_leave(prev);
	}
}

static const struct handle_rt_ops handle_rt_libstrata = {
	.host_new = handle_host_new,
	.host_delete = host_delete,
	.check_policy = handle_check_policy,
	.start = handle_start,
	.stop = handle_stop,
	.step = handle_step,
	.reload = handle_reload,
	.info = handle_info,
	.tick = handle_tick,
};
static const struct handle_rt_ops *const handle_rt = &handle_rt_libstrata;

/* ---------- strata_host.h: for the programs that compose a node themselves ---------- */

int
strata_open_on(const strata_options *o, struct host *h, const struct strata_runtime_options *ro,
	       strata **out)
{
	if (out == NULL || h == NULL || o == NULL)
		return diag_set(STRATA_EINVAL, "strata_open: options, an output and a host are required");
	*out = NULL;
	struct strata_env *senv = NULL;
	strata_options o2;
	int rc = options_with_env(o, &o2, &senv);
	if (rc)
		return rc;
	rc = open_on(&o2, h, ro, senv, out);
	if (rc)
		senv_delete(senv);
	return rc;
}

struct host *
strata_host(strata *db)
{
	return db->host;
}

struct host *
strata_runtime_host(strata *db)
{
	return db->rt_host;
}

struct runtime *
strata_runtime(strata *db)
{
	return db->rt;
}

void
strata_runtime_stop(strata *db)
{
	if (db == NULL || db->rt == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	host_invoke(db->rt_host, rt_stop_on_loop, db);
	env_leave(prev);
}

struct store *
strata_store(strata *db)
{
	return db->store;
}

void
strata_close_discard(strata *db)
{
	close_handle(db, 1);
}
#else
static const struct handle_rt_ops *const handle_rt = NULL;
#endif /* STRATA_CORE_ONLY */

/* ---------- open, step, close, policy: each written once ---------- */

/** strata_open_on with the handle's environment made (o->env_ops is senv's when set). */
static int
open_on(const strata_options *o, struct host *h, const struct strata_runtime_options *ro,
	struct strata_env *senv, strata **out)
{
	struct env_ops *prev = env_enter((struct env_ops *)o->env_ops);
	strata *db = env.calloc(1, sizeof(*db));
	if (db == NULL) {
		env_leave(prev);
		return diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	}
	db->host = h;
	db->env_ops = (struct env_ops *)o->env_ops;
	pthread_mutex_init(&db->wt_mu, NULL);
	handle_setup(db, o, senv);
	/* A policy file is compiled and validated (as a reload would) before the store is
	 * touched: a bad one leaves the directory as it was. */
	int rc = 0;
	if (handle_rt != NULL && o->policy != NULL && o->policy[0] != '\0' &&
	    (rc = handle_rt->check_policy(o->policy)) != 0)
		goto fail;
	if ((rc = store_open(o, &db->store)) != 0)
		goto fail;
	db->synced_at = env.mono_ns();
	TRACE(store_trace(db->store), OPEN, store_shards(db->store));
	if (handle_rt != NULL && (rc = handle_rt->start(db, o, ro)) != 0)
		goto fail;
	env_leave(prev);
	*out = db;
	return 0;
fail:
	store_close_discard(db->store); /* a store this open created goes again */
	pthread_mutex_destroy(&db->wt_mu);
	env.free(db);
	env_leave(prev);
	return rc;
}

int
strata_open(const strata_options *o, strata **out)
{
	if (o == NULL || out == NULL)
		return diag_set(STRATA_EINVAL, "strata_open: options and an output are required");
	*out = NULL;
	if (handle_rt == NULL && o->policy != NULL)
		return diag_set(STRATA_EINVAL, "strata_open: this build (libstrata-core) has no policy "
				"runtime; link libstrata for options.policy");
	struct strata_env *senv = NULL;
	strata_options o2;
	int rc = options_with_env(o, &o2, &senv);
	if (rc)
		return rc;
	/* The host's threads run in the store's environment. */
	struct env_ops *prev = env_enter((struct env_ops *)o2.env_ops);
	struct host *h = NULL;
	if (handle_rt != NULL)
		rc = handle_rt->host_new(&o2, &h);
	if (rc == 0)
		rc = open_on(&o2, h, NULL, senv, out);
	if (rc && h != NULL)
		handle_rt->host_delete(h);
	env_leave(prev);
	if (rc) {
		senv_delete(senv);
		return rc;
	}
	(*out)->own_host = h != NULL;
	return 0;
}

int
strata_step(strata *db, uint64_t budget_us, strata_step_info *out)
{
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	struct env_ops *prev = env_enter(db->env_ops);
	int rc = 0;
	if (handle_rt != NULL)
		rc = handle_rt->step(db, budget_us, out);
	else
		step_sync(db); /* no host: nothing else runs in the background */
	env_leave(prev);
	return rc;
}

/** strata_close, or with discard strata_close_discard. */
static void
close_handle(strata *db, int discard)
{
	if (db == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	if (handle_rt != NULL)
		handle_rt->stop(db);
	pthread_mutex_lock(&db->wt_mu);
	wt_retire(db);
	wtrace_close(db->wt_last);
	db->wt_last = NULL;
	pthread_mutex_unlock(&db->wt_mu);
	trace_set_sink(store_trace(db->store), NULL, NULL);
	if (discard)
		store_close_discard(db->store);
	else
		store_close(db->store);
	if (handle_rt != NULL && db->own_host)
		handle_rt->host_delete(db->host);
	struct strata_env *senv = db->senv;
	pthread_mutex_destroy(&db->wt_mu);
	env.free(db);
	env_leave(prev);
	senv_delete(senv);
}

void
strata_close(strata *db)
{
	close_handle(db, 0);
}

int
strata_set_policy(strata *db, const char *path_or_source, size_t len)
{
	if (handle_rt == NULL)
		return diag_set(STRATA_EINVAL, "set_policy: this build (libstrata-core) has no policy runtime");
	if (db == NULL || path_or_source == NULL)
		return diag_set(STRATA_EINVAL, "set_policy: a store and a policy are required");
	if (db->rt == NULL)
		return diag_set(STRATA_EINVAL, "set_policy: the store was opened without a policy runtime "
				"(set options.policy, \"\" for the built-in default)");
	/* A path if it names a file, else source text. */
	struct buf b = {0};
	const char *name = "(source)";
	struct stat st;
	char path[4096];
	if (len < sizeof(path) && memchr(path_or_source, '\n', len) == NULL) {
		memcpy(path, path_or_source, len);
		path[len] = '\0';
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			FILE *f = fopen(path, "rb");
			if (f == NULL)
				return diag_sys(errno, "open", path);
			char chunk[8192];
			size_t n;
			while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
				buf_append(&b, chunk, n);
			fclose(f);
			name = path;
		}
	}
	int rc = handle_rt->reload(db, b.data ? (const char *)b.data : path_or_source, b.data ? b.len : len, name);
	buf_destroy(&b);
	return rc;
}

int
strata_policy_info_get(strata *db, strata_policy_info *out)
{
	if (handle_rt == NULL)
		return diag_set(STRATA_EINVAL, "policy_info: this build (libstrata-core) has no policy runtime");
	if (db == NULL || out == NULL)
		return diag_set(STRATA_EINVAL, "policy_info: a store and an output are required");
	if (db->rt == NULL)
		return diag_set(STRATA_EINVAL, "policy_info: the store was opened without a policy runtime");
	handle_rt->info(db, out);
	return 0;
}

/* ---------- the operations: the core store checks the arguments (a NULL store too) and
 * dispatches them to the shards ---------- */

/** The core store of a handle (NULL for none: the store's calls refuse it). */
static struct store *
store_of(const strata *db)
{
	return db != NULL ? db->store : NULL;
}

int
strata_stored_shards(const char *dir, uint32_t *shards)
{
	return store_stored_shards(dir, shards);
}

uint32_t
strata_shards(const strata *db)
{
	return store_shards(store_of(db));
}

int
strata_append_seq(strata *db, uint32_t shard, const strata_row *rows, size_t n, uint64_t *last_seq)
{
	int rc = store_append(store_of(db), shard, rows, n, last_seq);
	if (rc == 0 && db->tracing)
		wt_rows(db, WTRACE_APPEND, shard, rows, NULL, NULL, n);
	return rc;
}

int
strata_check_row(const strata *db, size_t key_len, size_t value_len)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_check_row(store_options(db->store)->max_value_bytes, key_len, value_len);
}

int
strata_append(strata *db, uint32_t shard, const strata_row *rows, size_t n)
{
	return strata_append_seq(db, shard, rows, n, NULL);
}

int
strata_delete(strata *db, uint32_t shard, const void *const *keys, const size_t *key_lens, size_t n)
{
	int rc = store_delete(store_of(db), shard, keys, key_lens, n, NULL);
	if (rc == 0 && db->tracing)
		wt_rows(db, WTRACE_DELETE, shard, NULL, keys, key_lens, n);
	return rc;
}

int
strata_get(strata *db, uint32_t shard, const void *key, size_t key_len, void **value, size_t *value_len)
{
	int rc = store_get(store_of(db), shard, key, key_len, value, value_len);
	struct wtrace *w;
	if ((rc == 0 || rc == STRATA_NOTFOUND) && db->tracing && (w = wt_enter(db)) != NULL) {
		wtrace_get(w, shard, XXH3_64bits(key, key_len), (uint32_t)key_len, rc == 0, rc == 0 ? *value_len : 0);
		wt_leave(db);
	}
	return rc;
}

/** A scan's callback counting what it returns (for the workload trace). */
struct wt_scan {
	int (*cb)(void *ctx, const strata_row *row);
	void *ctx;
	uint64_t rows, bytes;
};

static int
wt_scan_row(void *ctx, const strata_row *row)
{
	struct wt_scan *c = ctx;
	c->rows++;
	c->bytes += row->key_len + row->value_len;
	return c->cb(c->ctx, row);
}

int
strata_scan(strata *db, uint32_t shard, const void *start, size_t start_len, const void *end,
	    size_t end_len, int (*cb)(void *ctx, const strata_row *row), void *ctx)
{
	if (!db->tracing)
		return store_scan(store_of(db), shard, start, start_len, end, end_len, cb, ctx);
	struct wt_scan c = {cb, ctx, 0, 0};
	int rc = store_scan(store_of(db), shard, start, start_len, end, end_len, wt_scan_row, &c);
	struct wtrace *w = wt_enter(db);
	if (w != NULL) {
		wtrace_scan(w, shard, c.rows, c.bytes);
		wt_leave(db);
	}
	return rc;
}

int
strata_seal(strata *db, uint32_t shard)
{
	if (db->tracing)
		strata_trace_request(db, 0, shard);
	return store_seal(store_of(db), shard);
}

int
strata_prepare_merge(strata *db, uint32_t shard, uint32_t max_generations, strata_plan **plan)
{
	return store_prepare_merge(store_of(db), shard, max_generations, plan);
}

int
strata_prepare_compact(strata *db, uint32_t shard, uint32_t max_runs, strata_plan **plan)
{
	return store_prepare_compact(store_of(db), shard, max_runs, plan);
}

uint32_t
strata_plan_generations(const strata_plan *plan)
{
	return store_plan_inputs(plan);
}

uint32_t
strata_plan_shard(const strata_plan *plan)
{
	return store_plan_shard(plan);
}

int
strata_commit_merge(strata *db, strata_plan *plan)
{
	return store_commit(store_of(db), plan);
}

void
strata_abort_merge(strata *db, strata_plan *plan)
{
	store_abort(store_of(db), plan);
}

int
strata_merge(strata *db, uint32_t shard, uint32_t max_generations, uint32_t *merged)
{
	return store_merge(store_of(db), shard, max_generations, merged);
}

int
strata_checkpoint(strata *db, const char *dir)
{
	return store_checkpoint(store_of(db), dir);
}

uint32_t
strata_shard_of(const void *key, size_t key_len, uint32_t shards)
{
	return shards ? (uint32_t)(XXH3_64bits(key, key_len) % shards) : 0;
}

int
strata_shard_served(const strata *db, uint32_t shard)
{
	return store_serves_shard(store_of(db), shard);
}

int
strata_shard_claim(strata *db, uint32_t shard)
{
	return store_claim(store_of(db), shard);
}

int
strata_shard_release(strata *db, uint32_t shard, const char *why)
{
	return store_release(store_of(db), shard, why);
}

int
strata_shard_stats(strata *db, uint32_t shard, strata_stats *out)
{
	return store_shard_stats(store_of(db), shard, out);
}

int
strata_store_stats_get(strata *db, strata_store_stats *out)
{
	if (db == NULL || out == NULL)
		return diag_set(STRATA_EINVAL, "store_stats: a store and an output are required");
	memset(out, 0, sizeof(*out));
	store_reaper_stats(db->store, &out->deletes_pending_objects, &out->deletes_pending_bytes,
			   &out->deleted_objects, &out->deleted_bytes);
	return 0;
}

int
strata_lock_hists(strata *db, const struct hist **hold_ns, const struct hist **wait_ns)
{
	if (db == NULL || hold_ns == NULL || wait_ns == NULL)
		return diag_set(STRATA_EINVAL, "lock_hists: a store and two outputs are required");
	store_lock_hists(db->store, hold_ns, wait_ns);
	return 0;
}

size_t
strata_objstore_stats(strata *db, struct objstore_op_stats *out, size_t cap)
{
	return db != NULL ? objstore_request_stats(store_objstore(db->store), out, cap) : 0;
}

int
strata_check(strata *db, uint32_t shard)
{
	return store_check(store_of(db), shard);
}

int
strata_tick(strata *db, uint64_t now_ns)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	if (db->senv == NULL || db->senv->ops.mono_ns != senv_now)
		return diag_set(STRATA_EINVAL, "strata_tick: this store runs on the real clock (open it "
				"with options.clock = STRATA_CLOCK_MANUAL)");
	uint64_t cur = atomic_load(&db->senv->now);
	if (now_ns < cur)
		return diag_set(STRATA_EINVAL, "strata_tick: time cannot go backwards: the clock is at "
				"%llu ns, asked for %llu ns (unchanged)", (unsigned long long)cur,
				(unsigned long long)now_ns);
	if (now_ns == cur)
		return 0;
	atomic_store(&db->senv->now, now_ns);
	TRACE(store_trace(db->store), TICK, now_ns);
	if (handle_rt != NULL)
		handle_rt->tick(db);
	return 0;
}

uint64_t
strata_trace_hash(strata *db, uint64_t *events)
{
	if (db == NULL) {
		if (events != NULL)
			*events = 0;
		return 0;
	}
	return trace_hash(store_trace(db->store), events);
}

void
strata_free(void *p)
{
	env.free(p);
}

const char *
strata_strerror(int rc)
{
	return store_strerror(rc);
}

const char *
strata_last_error(void)
{
	return diag_last();
}
