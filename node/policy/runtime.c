/*
 * runtime.c — the policy runtime: a LuaJIT merge policy driving seals, merges and
 * base compactions of one store from a libev loop.
 *
 * Threads. Everything runs on the loop thread except the IO, which runs on the
 * worker pool (seal, prepare, commit, abort, merge, compaction), and the store
 * listener callbacks, which arrive on whatever thread sealed or appended; they
 * only record the event per shard (coalesced) under a mutex and ev_async_send.
 * Commit runs on a worker too: it is O(1) in data size but writes the manifest
 * (a file rename and sync), which the loop thread never waits for.
 *
 * Clock. Timer deadlines are env.mono_ns() instants. An ev_prepare watcher checks
 * them on every loop iteration and an ev_timer wakes the loop when the next one
 * is due, so a manual clock (tests, simulations) drives the timers: advance it
 * and turn the loop once. node:now() is env.wall_ns() / 1e9.
 *
 * Triggers, all through the policy (the cap binds on each: a prepare or merge
 * asks for at most merge_max_generations, max_generations = 0 meaning the cap):
 *   flush timer    every flush_interval_s per shard: seal a non-empty memtable
 *   size trigger   the store reports memtable_max_bytes reached: seal
 *   on_seal        after every published generation (coalesced per shard; one
 *                  run per shard at a time, re-run if seals arrived meanwhile);
 *                  info = {shard, generation (last id), seals, rows, bytes (summed
 *                  over the coalesced seals), generations (waiting now), now}
 *   sweeper        every sweep_interval_s: on_sweep(node) (skipped while the
 *                  previous sweep still runs)
 *   merge request  runtime_merge_request: on_merge_request(shard, req), req =
 *                  {shard, max_generations = 0}; the hook returns the number
 *                  merged or nil, reason (the request then fails with that reason)
 * Intervals re-arm when a reload changes them (the new deadline is now + the
 * new interval).
 *
 * Hooks run as coroutines (one per run). A primitive that does IO submits a job
 * to the pool and yields; the completion resumes the coroutine with the result.
 * Primitives and their misuse:
 *   shard:seal()                          true | nil, reason
 *   shard:prepare{max_generations = n}    plan | nil, reason
 *   shard:commit(plan)                    generations (runs) folded | nil, reason
 *   shard:abort(plan)                     true | nil, reason (the run is deleted on a worker)
 *   shard:merge{max_generations = n}      generations merged | nil, reason
 *   shard:compact{max_runs = n}           runs folded | nil, reason (0 = all runs)
 *   shard:stats(), shard:id(), node:shards(), node:now(), strata.log.*
 *   plan.generations, plan.shard, plan.state ("ready" or "done")
 * reason is "<word>: <message>": "conflict: ..." when a plan no longer applies
 * (STRATA_ECONFLICT), "busy: ..." when a prepare, merge or compaction is already
 * in flight on the shard (or the pool queue is full), "consumed: ..." when a plan
 * is committed or aborted a second time, "wrong shard: ..." when a plan is given
 * to another shard, else the engine's error ("io: ...", "fenced: ...").
 * A yielding primitive called outside a hook run (or through a C function such as
 * table.sort or string.gsub, which cannot yield) is a Lua error. Plans a run
 * neither committed nor aborted are aborted when the run ends. A bad option
 * (max_generations = -1, a plan argument that is not a plan) is a Lua error.
 *
 * Limits (policy.c has the details). Time: LuaJIT's compiled traces never call a
 * debug hook, so the JIT is switched off for every policy state
 * (luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF)) and a count hook
 * (lua_sethook LUA_MASKCOUNT, every POLICY_HOOK_INSTRUCTIONS instructions) compares
 * the CPU time the hook run has used while resumed with hook_budget_ms; time
 * parked in a primitive waiting for IO does not count. Over budget it raises
 * "hook exceeded its time budget of N ms" (loading the file: "policy exceeded
 * ..."), and the sandbox's pcall/xpcall cannot swallow it. The clock is the
 * thread's CPU clock (policy_cpu_ns), not env.mono_ns: a frozen manual clock must
 * not switch the budget off. Memory: each state's allocator refuses allocations
 * over policy_mem_bytes ("not enough memory"). A failed hook (Lua error, budget,
 * memory) is logged with diag_log(LOG_LVL_WARN), counted in hook_errors and kept
 * in last_error; the store keeps working and the next trigger runs the hook again.
 *
 * Reload: the new script is compiled and validated in a fresh state; on success
 * it becomes current for new runs, while runs already started finish on the old
 * state, which is closed when its last run ends. Appends never touch the loop. A
 * policy a PUT /v1/policy accepted (after its trial, node/policy/trial.h) is kept in
 * the policy file: runtime_stage_file writes and syncs a temporary file beside it on
 * the caller's thread, runtime_reload_persist compiles it here, renames it over the
 * file and swaps it in, and takes the renamed file as the watcher's last look, so the
 * watcher does not load it a second time.
 *
 * Clamps: the engine caps every merge pass at the store's merge_max_inputs, so a
 * merge_max_generations over it (or 0, no cap) runs at merge_max_inputs.
 * runtime_settings reports what runs, runtime_clamps what the policy asked and why,
 * and each clamp is logged as a warning when the policy loads.
 *
 * Lifetime: the runtime runs on a host it is given (its loop, its background
 * executor) and on a store it does not own; whoever composed them (node/strata.c)
 * deletes the runtime on the loop thread before closing the store and the host.
 * runtime_delete waits out the runtime's own jobs on the executor.
 */
#include "runtime_int.h"

#include "../lib/crc.h"

static void rt_run_resume(struct rt_run *run, int nargs);
static void rt_log_clamps(struct runtime *rt);
static int rt_refused(struct runtime *rt, int rc);
static int rt_reload(struct runtime *rt, const char *src, size_t len, const char *name, const char *source_path);
static void rt_start_seal_run(struct runtime *rt, uint32_t id, runtime_hook_cb done, void *done_ctx);


/** Loop thread: start a reap job when deletes are wanted and none runs. */
static void
rt_maybe_reap(struct runtime *rt)
{
	if (rt->closing || rt->reaping || !atomic_exchange(&rt->reap_wanted, 0))
		return;
	struct rt_job *j = rt_job_new(rt, RT_JOB_REAP, 0);
	if (j != NULL && rt_pool_submit(rt, j) == 0) {
		rt->reaping = 1;
		return;
	}
	env.free(j);
	atomic_store(&rt->reap_wanted, 1); /* try again at the next event */
}

/** The store queued deletes (any thread): wake the loop. */
static void
rt_reap_kick(void *ctx)
{
	struct runtime *rt = ctx;
	atomic_store(&rt->reap_wanted, 1);
	ev_async_send(rt->loop, &rt->events);
}

static void
rt_job_done(void *arg)
{
	struct rt_job *j = arg;
	struct runtime *rt = j->rt;
	struct rt_shard *sh = &rt->shards[j->shard];
	rt->jobs--;
	if (j->kind == RT_JOB_REAP) {
		rt->reaping = 0;
		if (j->count > 0)
			atomic_store(&rt->reap_wanted, 1); /* more to delete: the next job goes on */
		env.free(j);
		rt_maybe_reap(rt);
		return;
	}
	if (j->kind == RT_JOB_PREPARE || j->kind == RT_JOB_MERGE || j->kind == RT_JOB_COMPACT)
		sh->busy = 0;
	if (j->kind == RT_JOB_PREPARE && j->rc == 0 && j->plan != NULL)
		sh->plans++;
	if (j->kind == RT_JOB_COMMIT || j->kind == RT_JOB_ABORT)
		rt_plan_consumed(rt, j->shard);
	if (j->trigger)
		sh->sealing = 0;
	if (j->kind == RT_JOB_ABORT && j->run == NULL) {
		env.free(j);
		return;
	}
	if (j->cb != NULL) {
		j->cb(j->ctx, j->rc, j->rc ? j->err : NULL);
		env.free(j);
		return;
	}
	struct rt_run *run = j->run;
	if (run == NULL) {
		if (j->rc != 0 && !rt->closing)
			diag_log(LOG_LVL_WARN, "policy: seal of shard %u failed: %s", j->shard, j->err);
		env.free(j);
		return;
	}
	run->waiting = 0;
	if (rt->closing) {
		/* The run is abandoned by runtime_delete; only the plan needs an owner. */
		if (j->plan != NULL) {
			store_abort(rt->db, j->plan);
			rt_plan_consumed(rt, j->shard);
		}
		env.free(j);
		return;
	}
	lua_State *co = policy_run_thread(run->pr);
	int n = rt_push_result(run, j, co);
	env.free(j);
	rt_run_resume(run, n);
}

/* ---------------------------------------------------------------- states */

static int
rt_state_new(struct runtime *rt, const char *name, const char *src, size_t len, struct rt_state **out)
{
	*out = NULL;
	struct policy *pol;
	int rc = policy_new(name, src, len, &rt->limits, &pol);
	if (rc != 0)
		return rc;
	struct rt_state *st = env.calloc(1, sizeof(*st));
	if (st == NULL) {
		policy_delete(pol);
		return diag_set(STRATA_ENOMEM, "%s: out of memory", name);
	}
	st->pol = pol;
	st->rt = rt;
	policy_set_host(pol, rt);
	rt_bind(st);
	*out = st;
	return 0;
}

static void
rt_state_free(struct rt_state *st)
{
	policy_delete(st->pol);
	env.free(st);
}

/** A retired state whose last run ended: unlink and close it. */
static void
rt_state_release(struct runtime *rt, struct rt_state *st)
{
	if (!st->retired || st->live > 0)
		return;
	for (struct rt_state **pp = &rt->retired; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	}
	rt_state_free(st);
}

/* ---------------------------------------------------------------- runs */

/** Abort the plans a run left open and forget them. */
static void
rt_run_drop_plans(struct rt_run *run)
{
	lua_State *L = policy_lua(run->st->pol);
	lua_rawgeti(L, LUA_REGISTRYINDEX, run->plans_ref);
	lua_pushnil(L);
	while (lua_next(L, -2) != 0) {
		lua_pop(L, 1);
		struct rt_plan *lp = lua_touserdata(L, -1);
		if (lp != NULL && lp->plan != NULL) {
			strata_plan *plan = lp->plan;
			lp->plan = NULL;
			lp->state = RT_PLAN_DONE;
			rt_abort_plan(run->rt, plan, lp->shard);
		}
	}
	lua_pop(L, 1);
	luaL_unref(L, LUA_REGISTRYINDEX, run->plans_ref);
	run->plans_ref = LUA_NOREF;
}

/** The values on a finished run's stack as text ("4", "nil, busy: ..."; "" for none). */
static void
rt_results_text(lua_State *co, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 1; i <= lua_gettop(co) && used + 1 < len; i++) {
		const char *v;
		char num[64];
		switch (lua_type(co, i)) {
		case LUA_TNUMBER:
			snprintf(num, sizeof(num), "%.14g", lua_tonumber(co, i));
			v = num;
			break;
		case LUA_TSTRING:
			v = lua_tostring(co, i);
			break;
		case LUA_TBOOLEAN:
			v = lua_toboolean(co, i) ? "true" : "false";
			break;
		case LUA_TNIL:
			v = "nil";
			break;
		default:
			v = lua_typename(co, lua_type(co, i));
		}
		int n = snprintf(buf + used, len - used, "%s%s", i > 1 ? ", " : "", v);
		if (n < 0)
			break;
		used += (size_t)n < len - used ? (size_t)n : len - used - 1;
	}
}

/** End a run: abort its open plans, account, report, free. err NULL = success. */
static void
rt_run_finish(struct rt_run *run, const char *err)
{
	struct runtime *rt = run->rt;
	struct rt_state *st = run->st;
	rt_run_drop_plans(run);
	TRACE(store_trace(rt->db), POLICY, TRACE_POLICY_HOOK_END, run->hook, run->shard, err != NULL);
	char ctxname[64] = "";
	if (run->hook != POLICY_ON_SWEEP)
		snprintf(ctxname, sizeof(ctxname), " (shard %u)", run->shard);
	if (err != NULL) {
		rt->stats.hook_errors++;
		char msg[sizeof(rt->stats.last_error)];
		snprintf(msg, sizeof(msg), "%s%s: %s", policy_hook_name(run->hook), ctxname, err);
		rt_set_error(rt, msg);
		diag_log(LOG_LVL_WARN, "policy hook %s failed: %s", policy_hook_name(run->hook), msg);
	}
	/* The result of a merge request: (n) or (nil, reason). */
	int rc = 0;
	char reason[512] = "";
	if (run->cb != NULL) {
		if (err != NULL) {
			rc = STRATA_EINVAL;
			rt_copy(reason, sizeof(reason), err);
		} else {
			lua_State *co = policy_run_thread(run->pr);
			if (lua_gettop(co) >= 1 && lua_isnil(co, 1) && !rt->closing) {
				rc = run->last_rc ? run->last_rc : STRATA_EINVAL;
				const char *m = lua_gettop(co) >= 2 ? lua_tostring(co, 2) : NULL;
				rt_copy(reason, sizeof(reason), m ? m : "the merge request hook returned nil");
			}
		}
	}
	char result[256] = "";
	uint64_t cpu_ns = policy_run_cpu_ns(run->pr);
	rt->stats.hook_cpu_ns += policy_run_thread_cpu_ns(run->pr);
	if (run->done != NULL && err == NULL)
		rt_results_text(policy_run_thread(run->pr), result, sizeof(result));
	if (run->prev != NULL)
		run->prev->next = run->next;
	else
		rt->runs = run->next;
	if (run->next != NULL)
		run->next->prev = run->prev;
	if (run->hook == POLICY_ON_SEAL && rt->shards[run->shard].seal_run == run)
		rt->shards[run->shard].seal_run = NULL;
	if (rt->sweep_run == run)
		rt->sweep_run = NULL;
	policy_run_delete(run->pr);
	st->live--;
	rt_state_release(rt, st);
	runtime_merge_cb cb = run->cb;
	void *ctx = run->ctx;
	uint32_t shard = run->shard;
	uint64_t merged = run->merged;
	enum policy_hook hook = run->hook;
	int closing = rt->closing;
	runtime_hook_cb done = run->done;
	void *done_ctx = run->done_ctx;
	env.free(run);
	if (done != NULL)
		done(done_ctx, err, result, cpu_ns);
	if (cb != NULL) {
		strata_stats s;
		uint64_t pending = 0;
		if (store_shard_stats(rt->db, shard, &s) == 0)
			pending = s.generations;
		if (closing && rc == 0 && err == NULL)
			rc = STRATA_ECLOSED, rt_copy(reason, sizeof(reason), "the policy runtime stopped");
		cb(ctx, rc, merged, pending, rc ? reason : NULL);
	}
	if (!closing && hook == POLICY_ON_SEAL && rt->shards[shard].seal_run == NULL &&
	    rt->shards[shard].seals > 0)
		rt_start_seal_run(rt, shard, NULL, NULL);
}

static void
rt_run_resume(struct rt_run *run, int nargs)
{
	int rc = policy_run_resume(run->pr, nargs);
	if (rc == POLICY_RUN_YIELD) {
		if (run->waiting)
			return;
		rt_run_finish(run, "the hook yielded outside a primitive");
		return;
	}
	char err[1024];
	if (rc == POLICY_RUN_ERROR)
		snprintf(err, sizeof(err), "%s", diag_last()); /* the finish records messages of its own */
	rt_run_finish(run, rc == POLICY_RUN_ERROR ? err : NULL);
}

/** Create a run of hook h on the current state; the caller pushes the arguments. */
static struct rt_run *
rt_run_new(struct runtime *rt, enum policy_hook h, uint32_t shard)
{
	struct rt_state *st = rt->cur;
	struct rt_run *run = env.calloc(1, sizeof(*run));
	if (run == NULL) {
		diag_log(LOG_LVL_ERROR, "policy: out of memory starting hook %s", policy_hook_name(h));
		return NULL;
	}
	if (policy_run_new(st->pol, h, &run->pr) != 0) {
		diag_log(LOG_LVL_ERROR, "policy: cannot start hook %s: %s", policy_hook_name(h), diag_last());
		env.free(run);
		return NULL;
	}
	run->rt = rt;
	run->st = st;
	run->hook = h;
	run->shard = shard;
	policy_run_set_data(run->pr, run);
	lua_State *L = policy_lua(st->pol);
	lua_newtable(L);
	run->plans_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	st->live++;
	run->next = rt->runs;
	if (rt->runs != NULL)
		rt->runs->prev = run;
	rt->runs = run;
	rt->stats.hook_runs++;
	TRACE(store_trace(rt->db), POLICY, TRACE_POLICY_HOOK_START, h, shard);
	return run;
}

/** rt_run_new, with done (may be NULL) to call when the run ends, or now if it cannot start. */
static struct rt_run *
rt_run_start(struct runtime *rt, enum policy_hook h, uint32_t shard, runtime_hook_cb done, void *done_ctx)
{
	struct rt_run *run = rt_run_new(rt, h, shard);
	if (run == NULL) {
		if (done != NULL)
			done(done_ctx, "cannot start the hook (out of memory)", "", 0);
		return NULL;
	}
	run->done = done;
	run->done_ctx = done_ctx;
	return run;
}

static void
rt_start_seal_run(struct runtime *rt, uint32_t id, runtime_hook_cb done, void *done_ctx)
{
	struct rt_shard *sh = &rt->shards[id];
	struct rt_run *run = rt_run_start(rt, POLICY_ON_SEAL, id, done, done_ctx);
	if (run == NULL)
		return;
	sh->seal_run = run;
	strata_stats s;
	uint64_t gens = store_shard_stats(rt->db, id, &s) == 0 ? s.generations : 0;
	lua_State *co = policy_run_thread(run->pr);
	rt_push_shard(run->st, co, id);
	lua_createtable(co, 0, 7);
	lua_pushnumber(co, id);
	lua_setfield(co, -2, "shard");
	lua_pushnumber(co, (lua_Number)sh->last_gen);
	lua_setfield(co, -2, "generation");
	lua_pushnumber(co, (lua_Number)sh->seals);
	lua_setfield(co, -2, "seals");
	lua_pushnumber(co, (lua_Number)sh->rows);
	lua_setfield(co, -2, "rows");
	lua_pushnumber(co, (lua_Number)sh->bytes);
	lua_setfield(co, -2, "bytes");
	lua_pushnumber(co, (lua_Number)gens);
	lua_setfield(co, -2, "generations");
	lua_pushnumber(co, (lua_Number)env.wall_ns() / 1e9);
	lua_setfield(co, -2, "now");
	sh->seals = sh->rows = sh->bytes = 0;
	rt_run_resume(run, 2);
}

static void
rt_start_sweep(struct runtime *rt, runtime_hook_cb done, void *done_ctx)
{
	if (rt->sweep_run != NULL) {
		diag_log(LOG_LVL_DEBUG, "policy: sweep skipped, the previous one still runs");
		return;
	}
	struct rt_run *run = rt_run_start(rt, POLICY_ON_SWEEP, 0, done, done_ctx);
	if (run == NULL)
		return;
	rt->sweep_run = run;
	lua_State *co = policy_run_thread(run->pr);
	lua_rawgeti(co, LUA_REGISTRYINDEX, run->st->node_ref);
	rt_run_resume(run, 1);
}

static void
rt_start_merge_request(struct runtime *rt, uint32_t id, runtime_merge_cb cb, void *ctx, runtime_hook_cb done,
		       void *done_ctx)
{
	struct rt_run *run = rt_run_new(rt, POLICY_ON_MERGE_REQUEST, id);
	if (run == NULL) {
		if (cb != NULL)
			cb(ctx, STRATA_ENOMEM, 0, 0, "cannot start the merge request hook");
		if (done != NULL)
			done(done_ctx, "cannot start the hook (out of memory)", "", 0);
		return;
	}
	run->cb = cb;
	run->ctx = ctx;
	run->done = done;
	run->done_ctx = done_ctx;
	lua_State *co = policy_run_thread(run->pr);
	rt_push_shard(run->st, co, id);
	lua_createtable(co, 0, 2);
	lua_pushnumber(co, id);
	lua_setfield(co, -2, "shard");
	lua_pushnumber(co, 0);
	lua_setfield(co, -2, "max_generations");
	rt_run_resume(run, 2);
}

/* ---------------------------------------------------------------- timers */

static uint64_t
rt_interval_ns(double s)
{
	return s > 0 ? (uint64_t)(s * 1e9) : 0;
}

static void
rt_rearm(struct runtime *rt, uint64_t now)
{
	uint64_t next = rt->sweep_due ? rt->sweep_due : UINT64_MAX;
	if (rt->pending_since != 0 && rt->pending_since + rt->settle_ns < next)
		next = rt->pending_since + rt->settle_ns;
	for (uint32_t i = 0; i < rt->nshards; i++)
		if (rt->shards[i].flush_due && rt->shards[i].flush_due < next)
			next = rt->shards[i].flush_due;
	rt->next_due = next;
	ev_timer_stop(rt->loop, &rt->timer);
	if (next == UINT64_MAX)
		return;
	double after = next > now ? (double)(next - now) / 1e9 : 0.;
	ev_timer_set(&rt->timer, after, 0.);
	ev_timer_start(rt->loop, &rt->timer);
}

/** Seal a shard for a timer or the size trigger, unless one is already on its way. */
static void
rt_trigger_seal(struct runtime *rt, uint32_t id)
{
	struct rt_shard *sh = &rt->shards[id];
	if (sh->sealing)
		return;
	struct rt_job *j = rt_job_new(rt, RT_JOB_SEAL, id);
	if (j == NULL)
		return;
	j->trigger = 1;
	if (rt_submit(rt, j) != 0) {
		diag_log(LOG_LVL_WARN, "policy: cannot queue a seal of shard %u: %s", id, diag_last());
		return;
	}
	sh->sealing = 1;
	rt->stats.policy_seals++;
	TRACE(store_trace(rt->db), POLICY, TRACE_POLICY_TRIGGER_SEAL, id);
}

static void rt_watch_check(struct runtime *rt);

static void
rt_tick(struct runtime *rt)
{
	if (rt->closing)
		return;
	uint64_t now = env.mono_ns();
	if (now < rt->next_due)
		return;
	uint64_t flush = rt_interval_ns(rt->armed.flush_interval_s);
	for (uint32_t i = 0; i < rt->nshards; i++) {
		struct rt_shard *sh = &rt->shards[i];
		if (sh->flush_due == 0 || now < sh->flush_due)
			continue;
		sh->flush_due = now + flush;
		rt->stats.flush_timer_fires++;
		strata_stats s;
		if (store_shard_stats(rt->db, i, &s) == 0 && s.memtable_rows > 0)
			rt_trigger_seal(rt, i);
	}
	if (rt->sweep_due != 0 && now >= rt->sweep_due) {
		rt->sweep_due = now + rt_interval_ns(rt->armed.sweep_interval_s);
		rt->stats.sweeps++;
		rt_start_sweep(rt, NULL, NULL);
	}
	if (rt->pending_since != 0 && now >= rt->pending_since + rt->settle_ns)
		rt_watch_check(rt);
	rt_rearm(rt, now);
}

static void
rt_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	struct runtime *rt = w->data;
	rt_tick(rt);
	/* libev may fire before the env.mono_ns() deadline (its loop time lags): re-arm. */
	if (!rt->closing && !ev_is_active(&rt->timer) && rt->next_due != UINT64_MAX)
		rt_rearm(rt, env.mono_ns());
}

static void
rt_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	rt_tick(w->data);
}

/** Arm the timers and the size limit for the current state's settings. */
static void
rt_apply_settings(struct runtime *rt, int first)
{
	const struct runtime_settings *s = policy_settings(rt->cur->pol);
	uint64_t now = env.mono_ns();
	if (first || s->flush_interval_s != rt->armed.flush_interval_s) {
		uint64_t iv = rt_interval_ns(s->flush_interval_s);
		for (uint32_t i = 0; i < rt->nshards; i++)
			rt->shards[i].flush_due = iv ? now + iv : 0;
	}
	if (first || s->sweep_interval_s != rt->armed.sweep_interval_s) {
		uint64_t iv = rt_interval_ns(s->sweep_interval_s);
		rt->sweep_due = iv ? now + iv : 0;
	}
	if (!first && s->memtable_max_bytes != rt->armed.memtable_max_bytes)
		store_set_memtable_limit(rt->db, s->memtable_max_bytes);
	/* The engine enforces the per-pass cap; the policy may only narrow it. */
	if (first || s->merge_max_generations != rt->armed.merge_max_generations)
		store_set_merge_cap(rt->db, s->merge_max_generations);
	/* The threads of a pass, too: the engine's merge_threads at most. */
	if (first || s->merge_threads != rt->armed.merge_threads)
		store_set_merge_threads(rt->db, s->merge_threads);
	/* The background IO budget follows the policy live; unset, the store's option. */
	if (first || s->background_io_mib_per_s != rt->armed.background_io_mib_per_s)
	{
		const strata_options *so = store_options(rt->db);
		if (s->background_io_mib_per_s == POLICY_IO_AUTO ||
		    (s->background_io_mib_per_s < 0 && so->background_io_auto))
			store_set_io_auto(rt->db, so->background_io_bytes_per_s);
		else
			store_set_io_rate(rt->db, s->background_io_mib_per_s < 0
							  ? so->background_io_bytes_per_s
							  : (uint64_t)(s->background_io_mib_per_s * 1048576.0));
	}
	rt->armed = *s;
	rt_rearm(rt, now);
}

/* ---------------------------------------------------------------- events */

/**
 * Enter a listener callback for shard: the shard's pending event with ev_mu held, or NULL
 * (and no lock) when the sink is closed or the shard is out of range. rt_event_post ends it.
 */
static struct rt_event *
rt_event_open(struct runtime *rt, uint32_t shard)
{
	atomic_fetch_add(&rt->in_callback, 1);
	if (atomic_load(&rt->sink_closed) || shard >= rt->nshards)
		return NULL;
	pthread_mutex_lock(&rt->ev_mu);
	return &rt->ev[shard];
}

/** End a callback rt_event_open entered: queue e (if any) for the loop, unlock and wake it. */
static void
rt_event_post(struct runtime *rt, uint32_t shard, struct rt_event *e)
{
	if (e != NULL) {
		if (!e->queued) {
			e->queued = 1;
			rt->dirty[rt->ndirty++] = shard;
		}
		pthread_mutex_unlock(&rt->ev_mu);
		ev_async_send(rt->loop, &rt->events);
	}
	atomic_fetch_sub(&rt->in_callback, 1);
}

static void
rt_listener_seal(void *ctx, uint32_t shard, uint64_t generation_id, uint64_t rows, uint64_t bytes)
{
	struct runtime *rt = ctx;
	struct rt_event *e = rt_event_open(rt, shard);
	if (e != NULL) {
		e->seals++;
		e->last_gen = generation_id;
		e->rows += rows;
		e->bytes += bytes;
	}
	rt_event_post(rt, shard, e);
}

static void
rt_listener_full(void *ctx, uint32_t shard, uint64_t bytes)
{
	(void)bytes;
	struct runtime *rt = ctx;
	struct rt_event *e = rt_event_open(rt, shard);
	if (e != NULL)
		e->full = 1;
	rt_event_post(rt, shard, e);
}


static void
rt_events_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	struct runtime *rt = w->data;
	if (rt->closing)
		return;
	rt_maybe_reap(rt);
	/* Take the events; act on them outside the lock. */
	pthread_mutex_lock(&rt->ev_mu);
	uint32_t n = rt->ndirty;
	uint32_t *ids = rt->taken;
	uint8_t *full = rt->taken_full;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = rt->dirty[i];
		struct rt_event *e = &rt->ev[id];
		struct rt_shard *sh = &rt->shards[id];
		ids[i] = id;
		full[i] = e->full;
		if (e->seals) {
			sh->seals += e->seals;
			sh->last_gen = e->last_gen;
			sh->rows += e->rows;
			sh->bytes += e->bytes;
		}
		memset(e, 0, sizeof(*e));
	}
	rt->ndirty = 0;
	pthread_mutex_unlock(&rt->ev_mu);
	for (uint32_t i = 0; i < n && !rt->closing; i++) {
		if (full[i])
			rt_trigger_seal(rt, ids[i]);
		if (rt->shards[ids[i]].seals > 0 && rt->shards[ids[i]].seal_run == NULL)
			rt_start_seal_run(rt, ids[i], NULL, NULL);
	}
	while (rt->mreq_head != NULL && !rt->closing) {
		struct rt_mreq *m = rt->mreq_head;
		rt->mreq_head = m->next;
		if (rt->mreq_head == NULL)
			rt->mreq_tail = NULL;
		runtime_merge_cb cb = m->cb;
		void *ctx = m->ctx;
		uint32_t id = m->shard;
		env.free(m);
		rt_start_merge_request(rt, id, cb, ctx, NULL, NULL);
	}
}

static void
rt_stat_cb(struct ev_loop *loop, ev_stat *w, int revents)
{
	(void)loop;
	(void)revents;
	rt_watch_check(w->data);
}

static void
rt_poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	rt_watch_check(w->data);
}

/* ---------------------------------------------------------------- files */

/** Read a policy file through the env seams into a new buffer (env.free it); fp (may be
 *  NULL) gets its fingerprint. A file that cannot be opened leaves its errno in errno. */
static int
rt_read_file(const char *path, char **out, size_t *len, struct rt_fileprint *fp)
{
	*out = NULL;
	if (fp != NULL)
		memset(fp, 0, sizeof(*fp));
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0) {
		int e = errno;
		int rc = diag_set(diag_errno(e), "%s: cannot open: %s", path, strerror(e));
		errno = e;
		return rc;
	}
	struct stat st;
	if (env.fstat(fd, &st) != 0) {
		int rc = diag_set(STRATA_EIO, "%s: cannot stat: %s", path, strerror(errno));
		env.close(fd);
		return rc;
	}
	if (st.st_size > (off_t)POLICY_MAX_SOURCE_BYTES) {
		env.close(fd);
		return diag_set(STRATA_ETOOBIG, "%s: policy of %lld bytes is over the limit of %u bytes", path,
				(long long)st.st_size, POLICY_MAX_SOURCE_BYTES);
	}
	size_t n = (size_t)st.st_size;
	char *buf = env.malloc(n + 1);
	if (buf == NULL) {
		env.close(fd);
		return diag_set(STRATA_ENOMEM, "%s: out of memory", path);
	}
	size_t got = 0;
	while (got < n) {
		ssize_t r = env.pread(fd, buf + got, n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int rc = diag_set(STRATA_EIO, "%s: cannot read: %s", path,
					  r < 0 ? strerror(errno) : "short file");
			env.free(buf);
			env.close(fd);
			return rc;
		}
		got += (size_t)r;
	}
	env.close(fd);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	if (fp != NULL) {
		fp->ok = 1;
		fp->size = n;
		fp->ino = (uint64_t)st.st_ino;
		fp->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
		fp->crc = crc32c(0, buf, n);
	}
	return 0;
}

static int
rt_print_eq(const struct rt_fileprint *a, const struct rt_fileprint *b)
{
	return a->ok == b->ok && a->size == b->size && a->ino == b->ino && a->mtime_ns == b->mtime_ns &&
	       a->crc == b->crc;
}

/**
 * The watcher (ev_stat, the poll and the settle deadline all end here): a file that
 * differs from the one last loaded waits until two looks at least the settle interval
 * apart find it the same (size, inode, mtime and content hash), then that content is
 * reloaded, once. So a file written in pieces (cp, an editor, git checkout) is never
 * read half-written unless a writer pauses longer than the settle interval; a rename
 * over the file is always safe. A missing file keeps the running policy.
 */
static void
rt_watch_check(struct runtime *rt)
{
	if (!rt->watching || rt->closing)
		return;
	char *src = NULL;
	size_t len = 0;
	struct rt_fileprint fp;
	int rc = rt_read_file(rt->policy_path, &src, &len, &fp);
	int missing = rc != 0 && errno == ENOENT;
	uint64_t now = env.mono_ns();
	if (missing) {
		rt->pending_since = 0; /* removed (or between an unlink and a create): keep the policy */
		return;
	}
	if (rc == 0 && rt_print_eq(&fp, &rt->seen)) {
		rt->pending_since = 0;
		env.free(src);
		return;
	}
	if (rt->pending_since == 0 || !rt_print_eq(&fp, &rt->pending) ||
	    now - rt->pending_since < rt->settle_ns) {
		if (rt->pending_since == 0 || !rt_print_eq(&fp, &rt->pending)) {
			rt->pending = fp;
			rt->pending_since = now ? now : 1;
			rt->stats.policy_file_changes++;
		}
		env.free(src);
		rt_rearm(rt, now);
		return;
	}
	rt->pending_since = 0;
	rt->seen = fp;
	if (rc != 0) {
		(void)rt_refused(rt, rc);
	} else if (rt_reload(rt, src, len, rt->policy_path, rt->policy_path) == 0) {
		diag_log(LOG_LVL_INFO, "policy: reloaded %s (version %llu)", rt->policy_path,
			 (unsigned long long)rt->stats.policy_version);
	}
	env.free(src);
	rt_rearm(rt, env.mono_ns());
}

/* ---------------------------------------------------------------- API */

/** Free rt itself, its lock and its per-shard arrays (its states are freed already). */
static void
rt_free(struct runtime *rt)
{
	pthread_mutex_destroy(&rt->ev_mu);
	free(rt->policy_path);
	env.free(rt->shards);
	env.free(rt->ev);
	env.free(rt->dirty);
	env.free(rt->taken);
	env.free(rt->taken_full);
	env.free(rt);
}

int
runtime_new(const struct runtime_options *o, struct runtime **out)
{
	*out = NULL;
	if (o == NULL || o->db == NULL || o->host == NULL)
		return diag_set(STRATA_EINVAL, "runtime: a store and a host are required");
	if (o->watch_file && o->policy_path == NULL)
		return diag_set(STRATA_EINVAL, "runtime: watch_file needs a policy_path");
	struct runtime *rt = env.calloc(1, sizeof(*rt));
	if (rt == NULL)
		return diag_set(STRATA_ENOMEM, "runtime: out of memory");
	rt->db = o->db;
	rt->job_done = rt_job_done;
	rt->host = o->host;
	rt->loop = host_loop(o->host);
	rt->pool = host_exec(o->host, HOST_BG);
	rt->limits.mem_bytes = o->policy_mem_bytes;
	rt->limits.budget_ms = o->hook_budget_ms;
	rt->nshards = store_shards(o->db);
	rt->next_due = UINT64_MAX;
	pthread_mutex_init(&rt->ev_mu, NULL);
	ev_timer_init(&rt->timer, rt_timer_cb, 0., 0.);
	rt->timer.data = rt;
	ev_prepare_init(&rt->prep, rt_prepare_cb);
	rt->prep.data = rt;
	ev_async_init(&rt->events, rt_events_cb);
	rt->events.data = rt;
	rt->shards = env.calloc(rt->nshards ? rt->nshards : 1, sizeof(*rt->shards));
	rt->ev = env.calloc(rt->nshards ? rt->nshards : 1, sizeof(*rt->ev));
	rt->dirty = env.calloc(rt->nshards ? rt->nshards : 1, sizeof(*rt->dirty));
	rt->taken = env.calloc(rt->nshards ? rt->nshards : 1, sizeof(*rt->taken));
	rt->taken_full = env.calloc(rt->nshards ? rt->nshards : 1, sizeof(*rt->taken_full));
	if (o->policy_path != NULL)
		rt->policy_path = strdup(o->policy_path);
	if (rt->shards == NULL || rt->ev == NULL || rt->dirty == NULL || rt->taken == NULL ||
	    rt->taken_full == NULL || (o->policy_path != NULL && rt->policy_path == NULL)) {
		rt_free(rt);
		return diag_set(STRATA_ENOMEM, "runtime: out of memory");
	}
	/* The policy: source text, a file, or the built-in default. */
	char *file = NULL;
	const char *src = o->policy_source, *name = o->policy_path;
	size_t len = src ? strlen(src) : 0;
	int rc = 0;
	if (src == NULL && o->policy_path != NULL) {
		rc = rt_read_file(o->policy_path, &file, &len, &rt->seen);
		src = file;
		rt->from_file = 1;
	} else if (src == NULL) {
		src = policy_builtin_source;
		len = strlen(src);
		name = POLICY_BUILTIN_NAME;
	} else if (name == NULL) {
		name = "policy";
	}
	if (rc == 0)
		rc = rt_state_new(rt, name, src, len, &rt->cur);
	env.free(file);
	if (rc != 0) {
		rt_free(rt);
		return rc;
	}
	rt->stats.policy_version = 1;
	rt_copy(rt->stats.policy_name, sizeof(rt->stats.policy_name), policy_name(rt->cur->pol));
	if (o->policy_source == NULL && o->policy_path != NULL)
		rt_copy(rt->stats.source_path, sizeof(rt->stats.source_path), o->policy_path);
	rt_log_clamps(rt);
	ev_async_start(rt->loop, &rt->events);
	ev_prepare_start(rt->loop, &rt->prep);
	ev_unref(rt->loop); /* the deadline check alone does not keep the loop running */
	if (o->watch_file) {
		ev_stat_init(&rt->stat, rt_stat_cb, rt->policy_path, 0.);
		rt->stat.data = rt;
		ev_stat_start(rt->loop, &rt->stat);
		double poll = (o->watch_poll_ms ? o->watch_poll_ms : RUNTIME_WATCH_POLL_MS) / 1000.;
		ev_timer_init(&rt->poll, rt_poll_cb, poll, poll);
		rt->poll.data = rt;
		ev_timer_start(rt->loop, &rt->poll);
		ev_unref(rt->loop); /* the poll alone does not keep the loop running */
		rt->settle_ns = (uint64_t)(o->watch_settle_ms ? o->watch_settle_ms : RUNTIME_WATCH_SETTLE_MS) *
				1000000ull;
		rt->watching = 1;
	}
	rt_apply_settings(rt, 1);
	struct store_listener l = {
		.on_seal = rt_listener_seal,
		.on_memtable_full = rt_listener_full,
		.ctx = rt,
	};
	store_set_listener(rt->db, &l, rt->armed.memtable_max_bytes);
	/* Deletes of merged objects become background work on the executor. */
	store_set_reaper_kick(rt->db, rt_reap_kick, rt);
	*out = rt;
	return 0;
}

void
runtime_delete(struct runtime *rt)
{
	if (rt == NULL)
		return;
	rt->closing = 1;
	/* No more events: remove the listener, then wait out callbacks already inside it. */
	store_set_listener(rt->db, NULL, 0);
	store_set_merge_cap(rt->db, 0);
	store_set_merge_threads(rt->db, 0);
	store_set_io_rate(rt->db, store_options(rt->db)->background_io_bytes_per_s);
	store_set_reaper_kick(rt->db, NULL, NULL);
	atomic_store(&rt->sink_closed, 1);
	while (atomic_load(&rt->in_callback) != 0)
		sched_yield();
	ev_timer_stop(rt->loop, &rt->timer);
	ev_ref(rt->loop);
	ev_prepare_stop(rt->loop, &rt->prep);
	if (rt->watching) {
		ev_stat_stop(rt->loop, &rt->stat);
		ev_ref(rt->loop);
		ev_timer_stop(rt->loop, &rt->poll);
	}
	/* Wait out this runtime's jobs; their completions see closing and abandon runs. */
	while (rt->jobs > 0)
		host_drain(rt->host, HOST_BG);
	while (rt->runs != NULL) {
		struct rt_run *run = rt->runs;
		rt_run_finish(run, NULL);
	}
	while (rt->mreq_head != NULL) {
		struct rt_mreq *m = rt->mreq_head;
		rt->mreq_head = m->next;
		m->cb(m->ctx, STRATA_ECLOSED, 0, 0, "the policy runtime stopped");
		env.free(m);
	}
	ev_async_stop(rt->loop, &rt->events);
	while (rt->retired != NULL) {
		struct rt_state *st = rt->retired;
		rt->retired = st->next;
		rt_state_free(st);
	}
	rt_state_free(rt->cur);
	rt_free(rt);
}

/** Count a refused reload: the running policy stays; the message (diag_last) says why.
 *  Returns rc. */
static int
rt_refused(struct runtime *rt, int rc)
{
	rt->stats.reload_failures++;
	rt_set_error(rt, diag_last());
	diag_log(LOG_LVL_WARN, "policy: reload refused, the running policy stays: %s", diag_last());
	return rc;
}

/** Make st (a fresh state) the running policy, named name, read from source_path (NULL:
 *  source text). */
static void
rt_swap(struct runtime *rt, struct rt_state *st, const char *name, const char *source_path)
{
	struct rt_state *old = rt->cur;
	rt->cur = st;
	old->retired = 1;
	if (old->live > 0) {
		old->next = rt->retired;
		rt->retired = old;
	} else {
		rt_state_free(old);
	}
	rt->stats.reloads++;
	rt->stats.policy_version++;
	rt_set_error(rt, "");
	rt_copy(rt->stats.policy_name, sizeof(rt->stats.policy_name), name);
	rt_copy(rt->stats.source_path, sizeof(rt->stats.source_path), source_path ? source_path : "");
	rt_apply_settings(rt, 0);
	rt_log_clamps(rt);
	if (rt->swap_fn != NULL) {
		size_t len;
		const char *src = runtime_policy_source(rt, &len);
		rt->swap_fn(rt->swap_ctx, &rt->stats, src, len);
	}
}

void
runtime_set_swap_hook(struct runtime *rt, runtime_swap_fn fn, void *ctx)
{
	rt->swap_fn = fn;
	rt->swap_ctx = ctx;
	if (fn != NULL) {
		size_t len;
		const char *src = runtime_policy_source(rt, &len);
		fn(ctx, &rt->stats, src, len);
	}
}

/** runtime_reload_source, with the file the source was read from (NULL: text). */
static int
rt_reload(struct runtime *rt, const char *src, size_t len, const char *name, const char *source_path)
{
	if (name == NULL)
		name = "policy";
	struct rt_state *st;
	int rc = rt_state_new(rt, name, src, len, &st);
	if (rc != 0)
		return rt_refused(rt, rc);
	rt_swap(rt, st, name, source_path);
	return 0;
}

void
runtime_reload_refused(struct runtime *rt, const char *err)
{
	(void)rt_refused(rt, diag_set(STRATA_EINVAL, "%s", err));
}

int
runtime_reload_source(struct runtime *rt, const char *src, size_t len, const char *name)
{
	return rt_reload(rt, src, len, name, NULL);
}

int
runtime_reload_file(struct runtime *rt)
{
	if (rt->policy_path == NULL) {
		int rc = diag_set(STRATA_EINVAL, "runtime: no policy file to reload (the policy was given as text)");
		rt->stats.reload_failures++;
		rt_set_error(rt, diag_last());
		return rc;
	}
	char *src;
	size_t len;
	struct rt_fileprint fp;
	int rc = rt_read_file(rt->policy_path, &src, &len, &fp);
	/* What the watcher would reload next is what this reload saw. */
	rt->seen = fp;
	rt->pending_since = 0;
	if (rc != 0)
		return rt_refused(rt, rc);
	rc = rt_reload(rt, src, len, rt->policy_path, rt->policy_path);
	env.free(src);
	return rc;
}

/** The directory part of path into dir ("." when it has none). */
static void
rt_dirname(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		snprintf(dir, len, ".");
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

int
runtime_stage_file(const char *file, const char *src, size_t len, char *tmp, size_t tmplen)
{
	static atomic_uint seq;
	int n = snprintf(tmp, tmplen, "%s.put-%ld-%u.tmp", file, (long)getpid(), atomic_fetch_add(&seq, 1));
	if (n < 0 || (size_t)n >= tmplen)
		return diag_set(STRATA_EINVAL, "%s: the path is too long for a temporary file beside it", file);
	int fd = env.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		return diag_set(diag_errno(e), "%s: cannot create the temporary file %s: %s", file, tmp,
				strerror(e));
	}
	const char *what = NULL;
	int e = 0;
	size_t done = 0;
	while (done < len && what == NULL) {
		ssize_t w = env.pwrite(fd, src + done, len - done, (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			e = w < 0 ? errno : EIO;
			what = "write";
		} else {
			done += (size_t)w;
		}
	}
	if (what == NULL && env.fsync(fd) != 0) {
		e = errno;
		what = "fsync";
	}
	if (env.close(fd) != 0 && what == NULL) {
		e = errno;
		what = "close";
	}
	if (what != NULL) {
		env.unlink(tmp);
		return diag_set(diag_errno(e), "%s: cannot %s the temporary file %s: %s", file, what, tmp,
				strerror(e));
	}
	return 0;
}

int
runtime_reload_persist(struct runtime *rt, const char *src, size_t len, const char *name, const char *tmp,
		       const char *file)
{
	struct rt_state *st;
	int rc = rt_state_new(rt, name, src, len, &st);
	if (rc != 0) {
		env.unlink(tmp);
		return rt_refused(rt, rc);
	}
	char *path = NULL;
	if (rt->policy_path == NULL || strcmp(rt->policy_path, file) != 0) {
		path = strdup(file);
		if (path == NULL) {
			rt_state_free(st);
			env.unlink(tmp);
			return rt_refused(rt, diag_set(STRATA_ENOMEM, "%s: out of memory", file));
		}
	}
	if (env.rename(tmp, file) != 0) {
		int e = errno;
		rt_state_free(st);
		free(path);
		env.unlink(tmp);
		return rt_refused(rt, diag_set(diag_errno(e), "%s: cannot rename %s over it: %s; the policy is "
					       "not kept there", file, tmp, strerror(e)));
	}
	/* The rename is the commit; a failed sync of the directory leaves it in place but
	 * perhaps not durable: said, not undone. */
	char dir[4096];
	rt_dirname(file, dir, sizeof(dir));
	int dfd = env.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (dfd < 0 || env.fsync(dfd) != 0)
		diag_log(LOG_LVL_WARN, "policy: kept in %s, but the directory %s could not be synced: %s", file, dir,
			 strerror(errno));
	if (dfd >= 0)
		env.close(dfd);
	if (path != NULL) {
		free(rt->policy_path);
		rt->policy_path = path;
	}
	rt->from_file = 1;
	/* What the watcher compares the file with is what was just written: it must not load
	 * the same content a second time. */
	char *back = NULL;
	size_t blen = 0;
	struct rt_fileprint fp;
	if (rt_read_file(file, &back, &blen, &fp) == 0) {
		rt->seen = fp;
		env.free(back);
	}
	rt->pending_since = 0;
	rt_swap(rt, st, name, file);
	return 0;
}

const char *
runtime_policy_source(struct runtime *rt, size_t *len)
{
	return policy_source(rt->cur->pol, len);
}

/** What the store's engine allows a policy. */
static void
rt_engine(struct runtime *rt, struct policy_engine *e)
{
	e->merge_max_inputs = store_options(rt->db)->merge_max_inputs;
	e->merge_threads = store_merge_threads_max(rt->db);
}

void
runtime_settings(struct runtime *rt, struct runtime_settings *out)
{
	struct policy_engine e;
	rt_engine(rt, &e);
	policy_effective(policy_settings(rt->cur->pol), &e, out);
}

unsigned
runtime_clamps(struct runtime *rt, struct policy_clamp *out, unsigned max)
{
	struct policy_engine e;
	rt_engine(rt, &e);
	return policy_clamps(policy_settings(rt->cur->pol), &e, out, max);
}

/** Log each clamp of the running policy (when it loads): one warning per setting. */
static void
rt_log_clamps(struct runtime *rt)
{
	struct policy_clamp c[POLICY_MAX_CLAMPS];
	unsigned n = runtime_clamps(rt, c, POLICY_MAX_CLAMPS);
	for (unsigned i = 0; i < n && i < POLICY_MAX_CLAMPS; i++)
		diag_log(LOG_LVL_WARN, "policy %s: %s = %.0f (the policy asks %.0f; %s)", policy_name(rt->cur->pol),
			 c[i].setting, c[i].effective, c[i].asked, c[i].why);
}

void
runtime_limits(struct runtime *rt, struct policy_limits *out)
{
	*out = rt->limits;
}

const char *
runtime_policy_file(struct runtime *rt)
{
	return rt->from_file ? rt->policy_path : NULL;
}

void
runtime_stats(struct runtime *rt, struct runtime_stats *out)
{
	*out = rt->stats;
	out->pool_pending = rt->jobs;
}

int
runtime_merge_request(struct runtime *rt, uint32_t shard, runtime_merge_cb cb, void *ctx)
{
	if (cb == NULL)
		return diag_set(STRATA_EINVAL, "merge request: a completion callback is required");
	if (shard >= rt->nshards)
		return diag_set(STRATA_ERANGE, "shard %u out of range (the store has %u shards)", shard,
				rt->nshards);
	if (rt->closing)
		return diag_set(STRATA_ECLOSED, "merge request: the policy runtime is stopping");
	struct rt_mreq *m = env.calloc(1, sizeof(*m));
	if (m == NULL)
		return diag_set(STRATA_ENOMEM, "merge request: out of memory");
	m->shard = shard;
	m->cb = cb;
	m->ctx = ctx;
	if (rt->mreq_tail != NULL)
		rt->mreq_tail->next = m;
	else
		rt->mreq_head = m;
	rt->mreq_tail = m;
	/* Start on the next loop iteration, never inside the caller. */
	ev_async_send(rt->loop, &rt->events);
	return 0;
}

int
runtime_seal_request(struct runtime *rt, uint32_t shard, runtime_done_cb cb, void *ctx)
{
	if (cb == NULL)
		return diag_set(STRATA_EINVAL, "seal request: a completion callback is required");
	if (shard >= rt->nshards)
		return diag_set(STRATA_ERANGE, "shard %u out of range (the store has %u shards)", shard,
				rt->nshards);
	struct rt_job *j = rt_job_new(rt, RT_JOB_SEAL, shard);
	if (j == NULL)
		return diag_set(STRATA_ENOMEM, "seal request: out of memory");
	j->cb = cb;
	j->ctx = ctx;
	return rt_submit(rt, j);
}

/** Record the outcome of q's request and, unless still inside it, hand it back. */
static void
runtime_req_result(struct runtime_req *q, int rc, const char *err)
{
	q->rc = rc;
	snprintf(q->err, sizeof(q->err), "%s", err ? err : "");
	q->done = 1;
	if (!q->submitting)
		q->back(q->arg);
}

static void
runtime_req_seal_cb(void *ctx, int rc, const char *err)
{
	runtime_req_result(ctx, rc, err);
}

static void
runtime_req_merge_cb(void *ctx, int rc, uint64_t reclaimed, uint64_t pending, const char *err)
{
	struct runtime_req *q = ctx;
	q->reclaimed = reclaimed;
	q->pending = pending;
	runtime_req_result(q, rc, err);
}

void
runtime_req_run(struct runtime *rt, struct runtime_req *q, int merge, uint32_t shard, void (*back)(void *arg),
		void *arg)
{
	q->back = back;
	q->arg = arg;
	q->submitting = 1;
	int rc = merge ? runtime_merge_request(rt, shard, runtime_req_merge_cb, q)
		       : runtime_seal_request(rt, shard, runtime_req_seal_cb, q);
	q->submitting = 0;
	if (!q->done && rc == 0)
		return; /* the completion hands it back */
	if (!q->done) {
		q->rc = rc;
		snprintf(q->err, sizeof(q->err), "%s", diag_last());
	}
	back(arg);
}

int
runtime_run_hook(struct runtime *rt, enum policy_hook h, uint32_t shard, runtime_hook_cb done, void *ctx)
{
	if (done == NULL || (unsigned)h >= POLICY_HOOK_COUNT)
		return diag_set(STRATA_EINVAL, "run hook: a hook and a completion callback are required");
	if (shard >= rt->nshards)
		return diag_set(STRATA_ERANGE, "shard %u out of range (the store has %u shards)", shard,
				rt->nshards);
	if (rt->closing)
		return diag_set(STRATA_ECLOSED, "run hook: the policy runtime is stopping");
	switch (h) {
	case POLICY_ON_SEAL: {
		struct rt_shard *sh = &rt->shards[shard];
		if (sh->seal_run != NULL)
			return diag_set(STRATA_EBUSY, "run hook: on_seal of shard %u is running", shard);
		strata_stats st;
		if (sh->seals == 0 && store_shard_stats(rt->db, shard, &st) == 0) {
			sh->seals = 1;
			sh->last_gen = st.next_generation ? st.next_generation - 1 : 0;
		}
		rt_start_seal_run(rt, shard, done, ctx);
		return 0;
	}
	case POLICY_ON_SWEEP:
		if (rt->sweep_run != NULL)
			return diag_set(STRATA_EBUSY, "run hook: on_sweep is running");
		rt_start_sweep(rt, done, ctx);
		return 0;
	default:
		rt_start_merge_request(rt, shard, NULL, NULL, done, ctx);
		return 0;
	}
}

unsigned
runtime_busy(struct runtime *rt)
{
	unsigned n = rt->jobs;
	for (struct rt_run *r = rt->runs; r != NULL; r = r->next)
		n++;
	for (struct rt_mreq *m = rt->mreq_head; m != NULL; m = m->next)
		n++;
	pthread_mutex_lock(&rt->ev_mu);
	n += rt->ndirty;
	pthread_mutex_unlock(&rt->ev_mu);
	return n;
}




int
runtime_check_policy(const char *path, const char *src, size_t len, struct runtime_settings *out)
{
	char *file = NULL;
	if (src == NULL) {
		if (path == NULL)
			return diag_set(STRATA_EINVAL, "policy check: a path or a source is required");
		int rc = rt_read_file(path, &file, &len, NULL);
		if (rc != 0)
			return rc;
		src = file;
	}
	struct policy *p;
	int rc = policy_new(path ? path : "policy", src, len, NULL, &p);
	env.free(file);
	if (rc != 0)
		return rc;
	if (out != NULL)
		*out = *policy_settings(p);
	policy_delete(p);
	return 0;
}

