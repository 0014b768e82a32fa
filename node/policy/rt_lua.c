/*
 * rt_lua.c — what a policy hook sees: the shard, node and plan objects, and the
 * primitives (seal, prepare, commit, abort, merge, compact, stats) that park the
 * calling hook on a job and resume it with the job's result.
 */
#include "runtime_int.h"

/* ---------------------------------------------------------------- Lua objects */

void
rt_push_shard(struct rt_state *st, lua_State *L, uint32_t id)
{
	lua_rawgeti(L, LUA_REGISTRYINDEX, st->shards_ref);
	lua_rawgeti(L, -1, (int)id + 1);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		struct rt_lshard *s = lua_newuserdata(L, sizeof(*s));
		s->id = id;
		luaL_getmetatable(L, RT_MT_SHARD);
		lua_setmetatable(L, -2);
		lua_pushvalue(L, -1);
		lua_rawseti(L, -3, (int)id + 1);
	}
	lua_remove(L, -2);
}

static void
rt_push_stats(lua_State *L, const strata_stats *s)
{
	lua_createtable(L, 0, 32);
#define RT_FIELD(field, kind, metric, scale, help)            \
	lua_pushnumber(L, (lua_Number)s->field);              \
	lua_setfield(L, -2, #field);
	STRATA_STATS_FIELDS(RT_FIELD)
#undef RT_FIELD
}

static struct runtime *
rt_of(lua_State *L)
{
	return policy_host(policy_of(L));
}

/**
 * An argument error naming fname, the method the script called ("shard:merge"), and
 * counting arguments as the script wrote them (self not counted). luaL_argerror names
 * the function from the caller's frame, which a tail call (return shard:merge{...}) or
 * a pcall does not have: it said "bad argument #3 to '?'".
 */
static int
rt_argerror(lua_State *L, int narg, const char *fname, const char *msg)
{
	if (narg <= 1)
		return luaL_error(L, "calling '%s' on bad self (%s)", fname, msg);
	return luaL_error(L, "bad argument #%d to '%s' (%s)", narg - 1, fname, msg);
}

/** The userdata of metatable mt at idx, or an argument error naming fname. */
static void *
rt_check_udata(lua_State *L, int idx, const char *mt, const char *what, const char *fname)
{
	void *u = lua_touserdata(L, idx);
	if (u != NULL && lua_getmetatable(L, idx)) {
		luaL_getmetatable(L, mt);
		int same = lua_rawequal(L, -1, -2);
		lua_pop(L, 2);
		if (same)
			return u;
	}
	rt_argerror(L, idx, fname, lua_pushfstring(L, "%s expected, got %s", what, luaL_typename(L, idx)));
	return NULL;
}

static uint32_t
rt_check_shard(lua_State *L, const char *fname)
{
	struct rt_lshard *s = rt_check_udata(L, 1, RT_MT_SHARD, "shard", fname);
	return s->id;
}

/** The run a yielding primitive belongs to; a Lua error when it cannot yield here. */
static struct rt_run *
rt_hook_run(lua_State *L, const char *what)
{
	struct policy_run *pr = policy_current_run(policy_of(L));
	if (pr == NULL || policy_run_data(pr) == NULL || policy_run_thread(pr) != L || !lua_isyieldable(L))
		luaL_error(L, "%s must be called from a policy hook (not while loading the policy, and not "
			   "through a C function such as table.sort or string.gsub)", what);
	return policy_run_data(pr);
}

/** Optional integer option of the table at index idx (0 when absent); any other key of
 *  the table is an error naming it. */
static uint32_t
rt_opt_count(lua_State *L, int idx, const char *field, const char *what)
{
	if (lua_isnoneornil(L, idx))
		return 0;
	if (lua_type(L, idx) != LUA_TTABLE)
		rt_argerror(L, idx, what, lua_pushfstring(L, "table of options or nil expected, got %s",
							  luaL_typename(L, idx)));
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), field) != 0) {
			lua_pushvalue(L, -1);
			const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1);
			rt_argerror(L, idx, what, lua_pushfstring(L, "unknown option '%s' (%s takes %s)", k, what,
								  field));
		}
	}
	lua_getfield(L, idx, field);
	uint32_t v = 0;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TNUMBER)
			luaL_error(L, "%s: %s must be a number, not %s", what, field, luaL_typename(L, -1));
		lua_Number n = lua_tonumber(L, -1);
		if (n != (lua_Number)(int64_t)n || n < 0 || n > 1e9)
			luaL_error(L, "%s: %s must be an integer between 0 and 1000000000 (got %f)", what, field,
				   n);
		v = (uint32_t)n;
	}
	lua_pop(L, 1);
	return v;
}

/** max_generations clamped to the running policy's cap (0 = the cap). */
static uint32_t
rt_clamp(struct runtime *rt, struct rt_state *st, uint32_t want)
{
	(void)rt;
	uint32_t cap = policy_settings(st->pol)->merge_max_generations;
	if (cap == 0)
		return want;
	return want == 0 || want > cap ? cap : want;
}

static int
rt_push_fail(lua_State *L, struct rt_run *run, int rc, const char *msg)
{
	if (run != NULL)
		run->last_rc = rc;
	lua_pushnil(L);
	lua_pushfstring(L, "%s: %s", rt_reason(rc), msg);
	return 2;
}

/** Push a job's result for its run; returns the number of values pushed. */
int
rt_push_result(struct rt_run *run, struct rt_job *j, lua_State *co)
{
	if (j->rc != 0)
		return rt_push_fail(co, run, j->rc, j->err);
	switch (j->kind) {
	case RT_JOB_SEAL:
		lua_pushboolean(co, 1);
		return 1;
	case RT_JOB_PREPARE: {
		struct rt_plan *lp = lua_newuserdata(co, sizeof(*lp));
		memset(lp, 0, sizeof(*lp));
		lp->plan = j->plan;
		lp->rt = run->rt;
		lp->shard = j->shard;
		lp->inputs = j->count;
		lp->state = RT_PLAN_READY;
		j->plan = NULL;
		luaL_getmetatable(co, RT_MT_PLAN);
		lua_setmetatable(co, -2);
		/* The run owns it until it ends: aborted then unless committed. */
		lua_rawgeti(co, LUA_REGISTRYINDEX, run->plans_ref);
		lua_pushvalue(co, -2);
		lua_pushboolean(co, 1);
		lua_rawset(co, -3);
		lua_pop(co, 1);
		return 1;
	}
	case RT_JOB_COMMIT:
	case RT_JOB_MERGE:
		run->merged += j->count;
		lua_pushnumber(co, j->count);
		return 1;
	case RT_JOB_COMPACT:
		lua_pushnumber(co, j->count);
		return 1;
	default:
		lua_pushboolean(co, 1);
		return 1;
	}
}
/* ---------------------------------------------------------------- primitives */

/** Park the calling run on a new job; returns lua_yield or nil, reason. */
static int
rt_yield_job(lua_State *L, struct rt_run *run, struct rt_job *j)
{
	struct runtime *rt = run->rt;
	j->run = run;
	int rc = rt_submit(rt, j);
	if (rc != 0)
		return rt_push_fail(L, run, rc == STRATA_ECLOSED ? rc : STRATA_EBUSY, diag_last());
	run->waiting = 1;
	return lua_yield(L, 0);
}

static int
rt_lua_seal(lua_State *L)
{
	uint32_t id = rt_check_shard(L, "shard:seal");
	struct rt_run *run = rt_hook_run(L, "shard:seal");
	struct runtime *rt = run->rt;
	struct rt_job *j = rt_job_new(rt, RT_JOB_SEAL, id);
	if (j == NULL)
		return luaL_error(L, "shard:seal: out of memory");
	rt->stats.policy_seals++;
	TRACE(store_trace(rt->db), POLICY, TRACE_POLICY_PRIMITIVE, RT_JOB_SEAL, id, 0);
	return rt_yield_job(L, run, j);
}

/** Start a prepare/merge/compaction job of kind on the calling run. */
static int
rt_lua_heavy(lua_State *L, int kind, const char *what)
{
	uint32_t id = rt_check_shard(L, what);
	uint32_t want = rt_opt_count(L, 2, kind == RT_JOB_COMPACT ? "max_runs" : "max_generations", what);
	struct rt_run *run = rt_hook_run(L, what);
	struct runtime *rt = run->rt;
	uint32_t max = kind == RT_JOB_COMPACT ? want : rt_clamp(rt, run->st, want);
	struct rt_shard *sh = &rt->shards[id];
	if (sh->busy) {
		char msg[128];
		snprintf(msg, sizeof(msg), "a prepare, merge or compaction is already in flight on shard %u",
			 id);
		return rt_push_fail(L, run, STRATA_EBUSY, msg);
	}
	if (kind != RT_JOB_COMPACT && sh->plans > 0) {
		char msg[160];
		snprintf(msg, sizeof(msg), "a merge plan of shard %u is prepared and not yet committed or "
			 "aborted (one at a time)", id);
		return rt_push_fail(L, run, STRATA_EBUSY, msg);
	}
	struct rt_job *j = rt_job_new(rt, kind, id);
	if (j == NULL)
		return luaL_error(L, "%s: out of memory", what);
	j->max = max;
	TRACE(store_trace(rt->db), POLICY, TRACE_POLICY_PRIMITIVE, (uint64_t)kind, id, max);
	int n = rt_yield_job(L, run, j);
	if (run->waiting) {
		sh->busy = 1;
		if (kind == RT_JOB_COMPACT)
			rt->stats.policy_compactions++;
		else
			rt->stats.policy_merges++;
	}
	return n;
}

static int
rt_lua_prepare(lua_State *L)
{
	return rt_lua_heavy(L, RT_JOB_PREPARE, "shard:prepare");
}

static int
rt_lua_merge(lua_State *L)
{
	return rt_lua_heavy(L, RT_JOB_MERGE, "shard:merge");
}

static int
rt_lua_compact(lua_State *L)
{
	return rt_lua_heavy(L, RT_JOB_COMPACT, "shard:compact");
}

/** Check a plan argument for commit/abort; nil, reason pushed (returns 2) when misused. */
static int
rt_check_plan(lua_State *L, uint32_t id, struct rt_plan *lp, struct rt_run *run)
{
	if (lp->state == RT_PLAN_DONE || lp->plan == NULL) {
		lua_pushnil(L);
		lua_pushliteral(L, "consumed: the plan was already committed or aborted");
		if (run != NULL)
			run->last_rc = STRATA_EINVAL;
		return 2;
	}
	if (lp->shard != id) {
		lua_pushnil(L);
		lua_pushfstring(L, "wrong shard: the plan belongs to shard %d, not shard %d", (int)lp->shard,
				(int)id);
		if (run != NULL)
			run->last_rc = STRATA_EINVAL;
		return 2;
	}
	return 0;
}

static int
rt_lua_commit(lua_State *L)
{
	uint32_t id = rt_check_shard(L, "shard:commit");
	struct rt_plan *lp = rt_check_udata(L, 2, RT_MT_PLAN, "plan", "shard:commit");
	struct rt_run *run = rt_hook_run(L, "shard:commit");
	int n = rt_check_plan(L, id, lp, run);
	if (n)
		return n;
	struct rt_job *j = rt_job_new(run->rt, RT_JOB_COMMIT, id);
	if (j == NULL)
		return luaL_error(L, "shard:commit: out of memory");
	j->plan = lp->plan;
	j->run = run;
	int rc = rt_pool_submit(run->rt, j);
	if (rc != 0) {
		/* Not queued: the plan stays with its userdata, still ready. */
		env.free(j);
		return rt_push_fail(L, run, rc == STRATA_ECLOSED ? rc : STRATA_EBUSY, diag_last());
	}
	lp->plan = NULL;
	lp->state = RT_PLAN_DONE;
	run->waiting = 1;
	return lua_yield(L, 0);
}

static int
rt_lua_abort(lua_State *L)
{
	uint32_t id = rt_check_shard(L, "shard:abort");
	struct rt_plan *lp = rt_check_udata(L, 2, RT_MT_PLAN, "plan", "shard:abort");
	struct policy_run *pr = policy_current_run(policy_of(L));
	struct rt_run *run = pr ? policy_run_data(pr) : NULL;
	int n = rt_check_plan(L, id, lp, run);
	if (n)
		return n;
	strata_plan *plan = lp->plan;
	lp->plan = NULL;
	lp->state = RT_PLAN_DONE;
	struct runtime *rt = rt_of(L);
	if (run != NULL && !rt->closing && lua_isyieldable(L)) {
		/* In a hook: wait for the worker, so that the next prepare finds the shard free. */
		struct rt_job *j = rt_job_new(rt, RT_JOB_ABORT, id);
		if (j != NULL) {
			j->plan = plan;
			j->run = run;
			if (rt_pool_submit(rt, j) == 0) {
				run->waiting = 1;
				return lua_yield(L, 0);
			}
			env.free(j);
		}
	}
	rt_abort_plan(rt, plan, id);
	lua_pushboolean(L, 1);
	return 1;
}

static int
rt_lua_stats(lua_State *L)
{
	uint32_t id = rt_check_shard(L, "shard:stats");
	strata_stats s;
	int rc = store_shard_stats(rt_of(L)->db, id, &s);
	if (rc != 0)
		return rt_push_fail(L, NULL, rc, diag_last());
	rt_push_stats(L, &s);
	return 1;
}

static int
rt_lua_id(lua_State *L)
{
	lua_pushnumber(L, rt_check_shard(L, "shard:id"));
	return 1;
}

static int
rt_lua_shard_tostring(lua_State *L)
{
	lua_pushfstring(L, "shard %d", (int)rt_check_shard(L, "tostring"));
	return 1;
}

static int
rt_lua_node_shards(lua_State *L)
{
	rt_check_udata(L, 1, RT_MT_NODE, "node", "node:shards");
	struct runtime *rt = rt_of(L);
	struct rt_state *st = NULL;
	struct policy *pol = policy_of(L);
	if (rt->cur->pol == pol)
		st = rt->cur;
	for (struct rt_state *s = rt->retired; st == NULL && s != NULL; s = s->next)
		if (s->pol == pol)
			st = s;
	if (st == NULL)
		return luaL_error(L, "node:shards: the policy state is gone");
	lua_createtable(L, (int)rt->nshards, 0);
	for (uint32_t i = 0; i < rt->nshards; i++) {
		rt_push_shard(st, L, i);
		lua_rawseti(L, -2, (int)i + 1);
	}
	return 1;
}

static int
rt_lua_node_now(lua_State *L)
{
	rt_check_udata(L, 1, RT_MT_NODE, "node", "node:now");
	lua_pushnumber(L, (lua_Number)env.wall_ns() / 1e9);
	return 1;
}

static int
rt_lua_plan_index(lua_State *L)
{
	struct rt_plan *lp = luaL_checkudata(L, 1, RT_MT_PLAN);
	const char *k = luaL_checkstring(L, 2);
	if (strcmp(k, "generations") == 0) {
		lua_pushnumber(L, lp->inputs);
	} else if (strcmp(k, "shard") == 0) {
		lua_pushnumber(L, lp->shard);
	} else if (strcmp(k, "state") == 0) {
		static const char *names[] = {"ready", "done"};
		lua_pushstring(L, names[lp->state]);
	} else {
		lua_pushnil(L);
	}
	return 1;
}

static int
rt_lua_plan_gc(lua_State *L)
{
	struct rt_plan *lp = lua_touserdata(L, 1);
	if (lp != NULL && lp->plan != NULL) {
		store_abort(lp->rt->db, lp->plan);
		rt_plan_consumed(lp->rt, lp->shard);
		lp->plan = NULL;
		lp->state = RT_PLAN_DONE;
	}
	return 0;
}

static int
rt_lua_plan_tostring(lua_State *L)
{
	struct rt_plan *lp = luaL_checkudata(L, 1, RT_MT_PLAN);
	lua_pushfstring(L, "plan of shard %d (%d inputs)", (int)lp->shard, (int)lp->inputs);
	return 1;
}

/** Register the metatables and objects of the primitives in a new state. */
void
rt_bind(struct rt_state *st)
{
	lua_State *L = policy_lua(st->pol);
	static const luaL_Reg shard_methods[] = {
		{"seal", rt_lua_seal},	     {"prepare", rt_lua_prepare}, {"commit", rt_lua_commit},
		{"abort", rt_lua_abort},     {"merge", rt_lua_merge},	  {"compact", rt_lua_compact},
		{"stats", rt_lua_stats},     {"id", rt_lua_id},		  {NULL, NULL},
	};
	luaL_newmetatable(L, RT_MT_SHARD);
	lua_newtable(L);
	luaL_register(L, NULL, shard_methods);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, rt_lua_shard_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pushliteral(L, RT_MT_SHARD);
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);

	luaL_newmetatable(L, RT_MT_PLAN);
	lua_pushcfunction(L, rt_lua_plan_index);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, rt_lua_plan_gc);
	lua_setfield(L, -2, "__gc");
	lua_pushcfunction(L, rt_lua_plan_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pushliteral(L, RT_MT_PLAN);
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);

	static const luaL_Reg node_methods[] = {
		{"shards", rt_lua_node_shards},
		{"now", rt_lua_node_now},
		{NULL, NULL},
	};
	luaL_newmetatable(L, RT_MT_NODE);
	lua_newtable(L);
	luaL_register(L, NULL, node_methods);
	lua_setfield(L, -2, "__index");
	lua_pushliteral(L, RT_MT_NODE);
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);

	lua_newtable(L);
	st->shards_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_newuserdata(L, 1);
	luaL_getmetatable(L, RT_MT_NODE);
	lua_setmetatable(L, -2);
	st->node_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

