/*
 * policy.c — one sandboxed LuaJIT state running a merge policy.
 *
 * Sandbox: the script's chunk (and every function it defines) sees only an
 * allow-listed environment: pairs ipairs next type tostring tonumber select
 * error assert pcall xpcall unpack setmetatable getmetatable rawget rawequal,
 * copies of string, table and math, load/loadstring of text chunks only (mode
 * "t", same environment), require "strata" only, and the table strata (log,
 * default hooks, settings). No os, io, debug, package, jit, ffi, coroutine,
 * getfenv/setfenv, rawset or dofile. Reading an undefined global and assigning
 * any global are errors naming the global.
 *
 * Limits:
 *  - Memory: the state's allocator counts every byte and refuses an allocation
 *    that would take the state over its limit while policy code runs (loading
 *    or a hook run); Lua raises "not enough memory". The runtime's own small
 *    pushes between runs are never refused (they could not be reported), and a
 *    full collection runs before a hook when the state is over half its limit,
 *    since LuaJIT does not collect before failing an allocation.
 *  - Time: the JIT is off for the policy state (luaJIT_setmode ENGINE|OFF), so
 *    the count hook (lua_sethook LUA_MASKCOUNT every POLICY_HOOK_INSTRUCTIONS
 *    virtual-machine instructions) fires in every loop. It compares the CPU time
 *    the run has spent while resumed (time parked in a primitive waiting for IO
 *    does not count) with the budget and raises "hook exceeded its time budget
 *    of N ms" ("policy exceeded ..." while loading the script).
 *  - Positions: a line hook (LUA_MASKLINE, with the count hook) records the last line
 *    of the script that began to run. LuaJIT drops the frame of a function that makes a
 *    tail call, so an error raised by `return error(...)`, `return assert(...)` or a
 *    primitive tail-called may have no frame of the script left to name; a failed run's
 *    message then names the innermost frame of the script still on the stack, else that
 *    last line (policy_fail_msg): every hook error carries file:line.
 *  - Once a run hit either limit it is marked killed: every later count hook
 *    raises again, and the sandbox's pcall/xpcall re-raise instead of returning
 *    false, so a script cannot swallow the error and go on.
 *  - Known limit: a single C library call (a string pattern with heavy
 *    backtracking, a sort of a huge table) is not interrupted until it returns
 *    to the virtual machine; its memory is bounded by the limit above.
 */
#include "policy.h"

#include <lauxlib.h>
#include <luajit.h>
#include <lualib.h>
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/text.h"
#include "policy_lua.h"

/** Why a run was stopped. */
enum {
	POLICY_KILL_NONE = 0,
	/** It used up its CPU time budget. */
	POLICY_KILL_BUDGET = 1,
	/** An allocation was refused at the memory limit. */
	POLICY_KILL_MEM = 2,
};

/** One execution of policy code: a hook run (coroutine) or the loading of the script. */
struct policy_run {
	/** The state it runs on. */
	struct policy *p;
	/** Its coroutine (NULL for the loading pseudo-run, which runs on the main thread). */
	lua_State *co;
	/** Registry reference keeping the coroutine alive. */
	int ref;
	/** CPU time spent while resumed, nanoseconds. */
	uint64_t cpu_ns;
	/** policy_now_cpu() when the current resume began. */
	uint64_t resumed_at;
	/** The thread's CPU time while resumed (policy_cpu_ns, whatever the budget's clock). */
	uint64_t thread_cpu_ns;
	/** POLICY_KILL_* once a limit fired. */
	int killed;
	/** Line of the policy that was running when an allocation was refused (0 = none). */
	int mem_line;
	/** Last line of the policy's own chunk that began to run (0 = none yet): where an error
	 *  raised by a function the policy tail-called was raised, once its frame is gone. */
	int last_line;
	/** Set for the loading pseudo-run (wording of the budget message). */
	int loading;
	/** The runtime's per-run pointer. */
	void *data;
};

struct policy {
	/** The Lua state. */
	lua_State *L;
	/** Memory limit and bytes in use. */
	uint64_t mem_limit, mem_used;
	/** CPU budget per run. */
	uint64_t budget_ns;
	uint32_t budget_ms;
	/** The run being executed now, NULL between runs; limits are enforced only while set. */
	struct policy_run *current;
	/** Name in messages (a path or a label) and source text (owned). */
	char *name, *src;
	size_t len;
	/** The chunk name of the script as the debug interface gives it (lua_Debug.source of
	 *  every function the script defines; interned, so compared by address), or NULL
	 *  before the script is compiled. */
	const char *chunk;
	/** name as Lua's messages spell it (lua_Debug.short_src: a long path is cut to
	 *  "..." and its tail). */
	char short_name[LUA_IDSIZE];
	/** Resolved settings. */
	struct runtime_settings settings;
	/** Registry references of the function each hook runs (script's or default). */
	int hook_ref[POLICY_HOOK_COUNT];
	/** Whether the script defines each hook. */
	int has_hook[POLICY_HOOK_COUNT];
	/** Registry reference of the sandbox environment. */
	int env_ref;
	/** Registry reference of the defaults' private settings table. */
	int dsettings_ref;
	/** The runtime's pointer. */
	void *host;
};

static uint64_t
policy_default_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t (*policy_cpu_ns)(void) = policy_default_cpu_ns;

/** The hook-budget clock: the environment's, else policy_cpu_ns. */
static uint64_t
policy_now_cpu(void)
{
	return env.cpu_ns != NULL ? env.cpu_ns() : policy_cpu_ns();
}

/* The built-in policy (policies/default.lua), the sandbox prelude (prelude.lua: its
 * arguments are the real globals, killed(), textload(chunk, name, env) and the log
 * table; it returns the environment) and the built-in hooks run when a script leaves
 * a hook out, also strata.default.* (defaults.lua: arguments their private settings
 * table and the log table) are generated from the .lua files: see policy_lua.h. */

static const char *const policy_hook_names[POLICY_HOOK_COUNT] = {
	"on_seal",
	"on_sweep",
	"on_merge_request",
};

/** A numeric setting: its name, kind, range and default. */
struct policy_setting_spec {
	/** Key in the policy table. */
	const char *name;
	/** Nonzero when the value must be an integer. */
	int integer;
	/** Smallest nonzero value accepted (0 is always accepted). */
	double min;
	/** Largest value accepted. */
	double max;
	/** Value when the key is absent. */
	double def;
};

enum {
	SET_FLUSH,
	SET_SWEEP,
	SET_AFTER,
	SET_CAP,
	SET_MEMTABLE,
	SET_BASE_RUNS,
	SET_IO,
	SET_THREADS,
	SET_COUNT,
};

static const struct policy_setting_spec policy_specs[SET_COUNT] = {
	[SET_FLUSH] = {"flush_interval_s", 0, 0.01, 86400, 5},
	[SET_SWEEP] = {"sweep_interval_s", 0, 0.01, 86400, 60},
	[SET_AFTER] = {"merge_after_generations", 1, 1, 1000000, 50},
	[SET_CAP] = {"merge_max_generations", 1, 1, 1000000, 8},
	[SET_MEMTABLE] = {"memtable_max_bytes", 1, 4096, 1099511627776.0, 64.0 * 1024 * 1024},
	[SET_BASE_RUNS] = {"base_max_runs", 1, 1, 1000000, 8},
	/* Absent (-1): the store's background_io_bytes_per_s option stays. */
	[SET_IO] = {"background_io_mib_per_s", 0, 0, 1000000, -1},
	/* 0 (or absent): the engine's merge_threads. */
	[SET_THREADS] = {"merge_threads", 1, 1, 64, 0},
};

const char *
policy_hook_name(enum policy_hook h)
{
	return (unsigned)h < POLICY_HOOK_COUNT ? policy_hook_names[h] : "?";
}

struct policy *
policy_of(lua_State *L)
{
	void *ud = NULL;
	lua_getallocf(L, &ud);
	return ud;
}

/** Whether the debug record d (after lua_getinfo "S") is a function of the script itself. */
static int
policy_is_own(const struct policy *p, const lua_Debug *d)
{
	return p->chunk != NULL && d->source == p->chunk;
}

/** Remember the line of the policy r is running (for a refused allocation: after the
 *  error the topmost frame no longer knows its line). Reads the stack only. */
static void
policy_note_line(struct policy *p, struct policy_run *r)
{
	lua_Debug d;
	if (r->co == NULL || r->mem_line > 0)
		return;
	for (int lv = 0; lua_getstack(r->co, lv, &d); lv++) {
		if (lua_getinfo(r->co, "Sl", &d) && d.currentline > 0 && policy_is_own(p, &d)) {
			r->mem_line = d.currentline;
			return;
		}
	}
}

static void *
policy_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct policy *p = ud;
	if (ptr == NULL)
		osize = 0;
	if (nsize == 0) {
		if (ptr != NULL) {
			env.free(ptr);
			p->mem_used -= osize;
		}
		return NULL;
	}
	if (nsize > osize && p->current != NULL && p->mem_used - osize + nsize > p->mem_limit) {
		p->current->killed = POLICY_KILL_MEM;
		policy_note_line(p, p->current);
		return NULL;
	}
	void *q = env.realloc(ptr, nsize);
	if (q == NULL) {
		if (p->current != NULL)
			p->current->killed = POLICY_KILL_MEM;
		return NULL;
	}
	p->mem_used = p->mem_used - osize + nsize;
	return q;
}

static int
policy_panic(lua_State *L)
{
	const char *msg = lua_tostring(L, -1);
	diag_log(LOG_LVL_ERROR, "policy: unprotected Lua error: %s", msg ? msg : "(not a string)");
	abort();
}

/**
 * The state's debug hook. Line events record the last line of the script that began to
 * run: LuaJIT drops the frame of a function that made a tail call (`return error(...)`,
 * `return f()`), so after an error raised there the stack may hold no frame of the script
 * at all; this line is where it was raised. Count events enforce the time budget.
 */
static void
policy_hook(lua_State *L, lua_Debug *ar)
{
	struct policy *p = policy_of(L);
	struct policy_run *r = p->current;
	if (r == NULL)
		return;
	if (ar->event == LUA_HOOKLINE) {
		if (ar->currentline > 0 && lua_getinfo(L, "S", ar) && policy_is_own(p, ar))
			r->last_line = ar->currentline;
		return;
	}
	if (r->killed == POLICY_KILL_NONE) {
		uint64_t used = r->cpu_ns + (policy_now_cpu() - r->resumed_at);
		if (used <= p->budget_ns)
			return;
		r->killed = POLICY_KILL_BUDGET;
	}
	/* Name the line the run was at: the hook has no Lua frame of its own. */
	lua_Debug d;
	char where[128] = "";
	if (lua_getstack(L, 0, &d) && lua_getinfo(L, "Sl", &d) && d.currentline > 0)
		snprintf(where, sizeof(where), "%s:%d: ", policy_is_own(p, &d) ? p->name : d.short_src,
			 d.currentline);
	if (r->killed == POLICY_KILL_MEM)
		lua_pushfstring(L, "%snot enough memory (the policy memory limit is %d KiB)", where,
				(int)(p->mem_limit >> 10));
	else
		lua_pushfstring(L, "%s%s exceeded its time budget of %d ms", where, r->loading ? "policy" : "hook",
				(int)p->budget_ms);
	lua_error(L);
}

/** killed(): whether the current run hit a limit (the sandbox's pcall re-raises then). */
static int
policy_lua_killed(lua_State *L)
{
	struct policy *p = policy_of(L);
	lua_pushboolean(L, p->current != NULL && p->current->killed != POLICY_KILL_NONE);
	return 1;
}

/** textload(chunk, name, env): compile a text chunk with the sandbox environment. */
static int
policy_lua_textload(lua_State *L)
{
	if (lua_type(L, 1) != LUA_TSTRING) {
		lua_pushnil(L);
		lua_pushstring(L, "load: only string chunks of Lua text are allowed in a policy");
		return 2;
	}
	size_t n;
	const char *s = lua_tolstring(L, 1, &n);
	const char *name = luaL_optstring(L, 2, "=(load)");
	if (luaL_loadbufferx(L, s, n, name, "t") != 0) {
		lua_pushnil(L);
		lua_insert(L, -2);
		return 2;
	}
	lua_pushvalue(L, 3);
	lua_setfenv(L, -2);
	return 1;
}

/** strata.log.*: join the arguments with spaces and log them under the policy's name. */
static int
policy_lua_log(lua_State *L, int level)
{
	struct policy *p = policy_of(L);
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	int n = lua_gettop(L);
	for (int i = 1; i <= n; i++) {
		if (i > 1)
			luaL_addchar(&b, ' ');
		switch (lua_type(L, i)) {
		case LUA_TSTRING:
		case LUA_TNUMBER: {
			size_t len;
			const char *s = lua_tolstring(L, i, &len);
			luaL_addlstring(&b, s, len);
			break;
		}
		case LUA_TBOOLEAN:
			luaL_addstring(&b, lua_toboolean(L, i) ? "true" : "false");
			break;
		default:
			luaL_addstring(&b, luaL_typename(L, i));
		}
	}
	luaL_pushresult(&b);
	diag_log(level, "policy %s: %s", p->name, lua_tostring(L, -1));
	return 0;
}

static int
policy_lua_log_info(lua_State *L)
{
	return policy_lua_log(L, LOG_LVL_INFO);
}

static int
policy_lua_log_warn(lua_State *L)
{
	return policy_lua_log(L, LOG_LVL_WARN);
}

static int
policy_lua_log_error(lua_State *L)
{
	return policy_lua_log(L, LOG_LVL_ERROR);
}

/** An error list: messages appended one per line, truncated at the buffer's end. */
struct policy_errs {
	/** Destination. */
	char *buf;
	size_t len;
	/** Bytes used. */
	size_t used;
	/** Errors added. */
	int count;
};

static void __attribute__((format(printf, 2, 3)))
policy_err(struct policy_errs *e, const char *fmt, ...)
{
	e->count++;
	if (e->buf == NULL || e->len == 0 || e->used + 1 >= e->len)
		return;
	if (e->used > 0)
		e->buf[e->used++] = '\n';
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e->buf + e->used, e->len - e->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		e->used += (size_t)n < e->len - e->used ? (size_t)n : e->len - e->used - 1;
	e->buf[e->used] = '\0';
}

static int
policy_is_ident(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/** Line of the first `key =` (or `["key"] =`) outside a comment in src; 0 when not found. */
static int
policy_key_line(const char *src, size_t len, const char *key)
{
	size_t kl = strlen(key);
	int line = 1;
	size_t line_start = 0;
	for (size_t i = 0; i + kl <= len; i++) {
		if (src[i] == '\n') {
			line++;
			line_start = i + 1;
			continue;
		}
		if (memcmp(src + i, key, kl) != 0)
			continue;
		if (i > 0 && policy_is_ident(src[i - 1]))
			continue;
		size_t j = i + kl;
		if (j < len && policy_is_ident(src[j]))
			continue;
		if (j < len && (src[j] == '"' || src[j] == '\''))
			j++;
		if (j < len && src[j] == ']')
			j++;
		while (j < len && (src[j] == ' ' || src[j] == '\t'))
			j++;
		if (j >= len || src[j] != '=' || (j + 1 < len && src[j + 1] == '='))
			continue;
		int commented = 0;
		for (size_t k = line_start; k + 1 < i; k++)
			if (src[k] == '-' && src[k + 1] == '-')
				commented = 1;
		if (!commented)
			return line;
	}
	return 0;
}

/** "name:line" for key, or "name" when the line is not found. */
static void
policy_where(const struct policy *p, const char *key, char *buf, size_t len)
{
	int line = key ? policy_key_line(p->src, p->len, key) : 0;
	if (line > 0)
		snprintf(buf, len, "%s:%d", p->name, line);
	else
		snprintf(buf, len, "%s", p->name);
}

static const char *
policy_closest_key(const char *key)
{
	const char *best = NULL;
	unsigned best_d = ~0u;
	for (int i = 0; i < SET_COUNT; i++) {
		unsigned d = text_edit_distance(key, policy_specs[i].name);
		if (d < best_d) {
			best_d = d;
			best = policy_specs[i].name;
		}
	}
	for (int i = 0; i < POLICY_HOOK_COUNT; i++) {
		unsigned d = text_edit_distance(key, policy_hook_names[i]);
		if (d < best_d) {
			best_d = d;
			best = policy_hook_names[i];
		}
	}
	size_t kl = strlen(key);
	unsigned tolerance = kl / 3 > 2 ? (unsigned)(kl / 3) : 2;
	return best_d <= tolerance ? best : NULL;
}

/** Check one numeric setting at the top of the stack; store it in vals[i]. */
static void
policy_check_setting(struct policy *p, lua_State *L, int i, double *vals, struct policy_errs *e)
{
	const struct policy_setting_spec *s = &policy_specs[i];
	char where[600];
	policy_where(p, s->name, where, sizeof(where));
	if (i == SET_IO && lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0) {
		vals[i] = POLICY_IO_AUTO;
		return;
	}
	if (lua_type(L, -1) != LUA_TNUMBER) {
		policy_err(e, "%s: %s must be a number%s, not %s", where, s->name,
			   i == SET_IO ? " or \"auto\"" : "", luaL_typename(L, -1));
		return;
	}
	double v = lua_tonumber(L, -1);
	if (isnan(v) || isinf(v)) {
		policy_err(e, "%s: %s must be a finite number", where, s->name);
		return;
	}
	if (s->integer && v != floor(v)) {
		policy_err(e, "%s: %s must be an integer, not %g", where, s->name, v);
		return;
	}
	if (v < 0 || v > s->max || (v != 0 && v < s->min)) {
		policy_err(e, "%s: %s must be 0 or between %g and %.0f (got %g)", where, s->name, s->min, s->max,
			   v);
		return;
	}
	vals[i] = v;
}

/** Line number in "name:line: ..." (name is skipped), or INT_MAX when absent. */
static int
policy_msg_line(const char *msg, size_t namelen)
{
	if (strlen(msg) <= namelen || msg[namelen] != ':')
		return INT_MAX;
	char *end;
	long line = strtol(msg + namelen + 1, &end, 10);
	return end != msg + namelen + 1 && *end == ':' ? (int)line : INT_MAX;
}

/** Context of policy_msg_cmp (qsort has none). */
static __thread size_t policy_sort_namelen;

static int
policy_msg_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int lx = policy_msg_line(x, policy_sort_namelen), ly = policy_msg_line(y, policy_sort_namelen);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x, y);
}

/** Append the lines of tmp to e in line-number order. */
static void
policy_errs_sorted(struct policy *p, char *tmp, struct policy_errs *e)
{
	size_t n = 1;
	for (char *c = tmp; *c; c++)
		n += *c == '\n';
	char **lines = env.malloc(n * sizeof(*lines));
	if (lines == NULL) {
		policy_err(e, "%s", tmp);
		return;
	}
	size_t k = 0;
	for (char *save = NULL, *l = strtok_r(tmp, "\n", &save); l != NULL && k < n;
	     l = strtok_r(NULL, "\n", &save))
		lines[k++] = l;
	policy_sort_namelen = strlen(p->name);
	qsort(lines, k, sizeof(*lines), policy_msg_cmp);
	for (size_t i = 0; i < k; i++)
		policy_err(e, "%s", lines[i]);
	env.free(lines);
}

/** Validate the table at the top of the stack; fill settings and hook flags. */
static void
policy_validate(struct policy *p, lua_State *L, struct policy_errs *out)
{
	/* Collect in table order, report in line order. */
	char *tmp = env.malloc(out->len ? out->len : 1);
	struct policy_errs tmp_errs = {.buf = tmp, .len = tmp ? out->len : 0};
	struct policy_errs *e = &tmp_errs;
	if (tmp != NULL)
		tmp[0] = '\0';
	double vals[SET_COUNT];
	for (int i = 0; i < SET_COUNT; i++)
		vals[i] = policy_specs[i].def;
	int t = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, t) != 0) {
		char where[600];
		if (lua_type(L, -2) != LUA_TSTRING) {
			lua_pushvalue(L, -2);
			const char *k = lua_tostring(L, -1);
			policy_where(p, NULL, where, sizeof(where));
			policy_err(e, "%s: unexpected %s key %s in the policy table (keys are setting and hook "
				   "names)", where, luaL_typename(L, -3), k ? k : "");
			lua_pop(L, 2);
			continue;
		}
		const char *key = lua_tostring(L, -2);
		int found = 0;
		for (int i = 0; i < SET_COUNT && !found; i++) {
			if (strcmp(key, policy_specs[i].name) == 0) {
				found = 1;
				policy_check_setting(p, L, i, vals, e);
			}
		}
		for (int h = 0; h < POLICY_HOOK_COUNT && !found; h++) {
			if (strcmp(key, policy_hook_names[h]) == 0) {
				found = 1;
				if (lua_type(L, -1) != LUA_TFUNCTION) {
					policy_where(p, key, where, sizeof(where));
					policy_err(e, "%s: %s must be a function, not %s", where, key,
						   luaL_typename(L, -1));
				} else {
					p->has_hook[h] = 1;
				}
			}
		}
		if (!found) {
			policy_where(p, key, where, sizeof(where));
			const char *near = policy_closest_key(key);
			if (near != NULL)
				policy_err(e, "%s: unknown key '%s' in the policy table (did you mean %s?)", where,
					   key, near);
			else
				policy_err(e, "%s: unknown key '%s' in the policy table (valid keys: "
					   "flush_interval_s, sweep_interval_s, merge_after_generations, "
					   "merge_max_generations, memtable_max_bytes, base_max_runs, "
					   "background_io_mib_per_s, merge_threads, on_seal, "
					   "on_sweep, on_merge_request)", where, key);
		}
		lua_pop(L, 1);
	}
	struct runtime_settings *s = &p->settings;
	s->flush_interval_s = vals[SET_FLUSH];
	s->sweep_interval_s = vals[SET_SWEEP];
	s->merge_after_generations = (uint32_t)vals[SET_AFTER];
	s->merge_max_generations = (uint32_t)vals[SET_CAP];
	s->memtable_max_bytes = (uint64_t)vals[SET_MEMTABLE];
	s->base_max_runs = (uint32_t)vals[SET_BASE_RUNS];
	s->background_io_mib_per_s = vals[SET_IO];
	s->merge_threads = (uint32_t)vals[SET_THREADS];
	if (e->count > 0) {
		if (tmp != NULL && out->buf != NULL)
			policy_errs_sorted(p, tmp, out);
		else
			out->count += e->count;
	}
	env.free(tmp);
}

/** Put the resolved settings into the table at index idx. */
static void
policy_push_settings(struct policy *p, lua_State *L, int idx)
{
	const struct runtime_settings *s = &p->settings;
	const double v[SET_COUNT] = {
		[SET_FLUSH] = s->flush_interval_s,
		[SET_SWEEP] = s->sweep_interval_s,
		[SET_AFTER] = s->merge_after_generations,
		[SET_CAP] = s->merge_max_generations,
		[SET_MEMTABLE] = (double)s->memtable_max_bytes,
		[SET_BASE_RUNS] = s->base_max_runs,
		[SET_IO] = s->background_io_mib_per_s,
		[SET_THREADS] = s->merge_threads,
	};
	for (int i = 0; i < SET_COUNT; i++) {
		lua_pushnumber(L, v[i]);
		lua_setfield(L, idx, policy_specs[i].name);
	}
}

/** "name:line: " of the innermost frame of co running the policy's own code (where an
 *  allocation was refused), or "" when none is on co's stack. */
static void
policy_code_where(struct policy *p, lua_State *co, char *buf, size_t len)
{
	lua_Debug d;
	buf[0] = '\0';
	for (int lv = 0; lua_getstack(co, lv, &d); lv++) {
		if (!lua_getinfo(co, "Sl", &d) || d.currentline <= 0 || !policy_is_own(p, &d))
			continue;
		snprintf(buf, len, "%s:%d: ", p->name, d.currentline);
		return;
	}
}

/** name as lua_Debug.short_src spells a chunk named "@name": "..." and the tail of one
 *  too long for LUA_IDSIZE (LuaJIT's lj_debug_shortname). */
static void
policy_short_name(const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);
	if (nl >= LUA_IDSIZE)
		snprintf(out, len, "...%s", name + nl - (LUA_IDSIZE - 4));
	else
		snprintf(out, len, "%s", name);
}

/** The rest of m after the script's name (from its ':' on) when m begins with the name,
 *  as given or as Lua's messages cut a long one ("..." and its tail); else NULL. */
static const char *
policy_msg_rest(const struct policy *p, const char *m)
{
	size_t nl = strlen(p->name), sl = strlen(p->short_name);
	if (strncmp(m, p->name, nl) == 0 && m[nl] == ':')
		return m + nl;
	if (sl > 0 && strncmp(m, p->short_name, sl) == 0 && m[sl] == ':')
		return m + sl;
	return NULL;
}

/**
 * The message of a run r that failed with m, always naming the script and, when any line
 * of it ran, the line: m as Lua made it when it has a position (its name spelt in full);
 * else (`error(e, 2)` whose caller's frame a tail call dropped, `assert`, an error object
 * that is not a string, an error raised by a function the script tail-called, so that no
 * frame of the script is left) the innermost frame of the script still on the stack, else
 * the last line of the script that ran; for a refused allocation, the line recorded then.
 */
static void
policy_fail_msg(struct policy *p, struct policy_run *r, const char *m, char *err, size_t errlen)
{
	const char *rest = policy_msg_rest(p, m);
	if (rest != NULL) {
		char note[200] = "";
		if (r->killed == POLICY_KILL_MEM && strstr(m, "memory limit") == NULL)
			snprintf(note, sizeof(note), " (the policy memory limit is %d KiB)", (int)(p->mem_limit >> 10));
		snprintf(err, errlen, "%s%s%s", p->name, rest, note);
		return;
	}
	char where[700] = "";
	if (r->killed == POLICY_KILL_MEM && r->mem_line > 0)
		snprintf(where, sizeof(where), "%s:%d: ", p->name, r->mem_line);
	else if (r->co != NULL)
		policy_code_where(p, r->co, where, sizeof(where));
	if (where[0] == '\0' && r->killed != POLICY_KILL_MEM && r->last_line > 0)
		snprintf(where, sizeof(where), "%s:%d: ", p->name, r->last_line);
	if (r->killed != POLICY_KILL_MEM) {
		if (where[0] != '\0')
			snprintf(err, errlen, "%s%s", where, m);
		else
			snprintf(err, errlen, "%s: %s", p->name, m);
		return;
	}
	char note[200] = "";
	if (strstr(m, "memory limit") == NULL)
		snprintf(note, sizeof(note), " (the policy memory limit is %d KiB%s)", (int)(p->mem_limit >> 10),
			 where[0] ? "" : "; no line of the policy was running: the allocation was the "
					 "runtime's own");
	if (where[0] != '\0')
		snprintf(err, errlen, "%s%s%s", where, m, note);
	else
		snprintf(err, errlen, "%s: %s%s", p->name, m, note);
}

/** Call the function below its nargs arguments under the loading budget, like lua_pcall
 *  but on a coroutine, so that the stack of a failure can still be read (the line of a
 *  refused allocation). On failure the full message is on the stack. */
static int
policy_call_budgeted(struct policy *p, int nargs, int nres)
{
	lua_State *L = p->L;
	lua_State *co = lua_newthread(L);
	lua_insert(L, -(nargs + 2));
	lua_xmove(L, co, nargs + 1);
	struct policy_run load = {.p = p, .co = co, .ref = LUA_NOREF, .loading = 1};
	p->current = &load;
	load.resumed_at = policy_now_cpu();
	int rc = lua_resume(co, nargs);
	p->current = NULL;
	if (rc == 0) {
		int n = lua_gettop(co);
		lua_xmove(co, L, n < nres ? n : nres);
		for (int i = n; i < nres; i++)
			lua_pushnil(L);
		lua_remove(L, -(nres + 1));
		return 0;
	}
	char msg[2048];
	if (rc == LUA_YIELD) {
		snprintf(msg, sizeof(msg), "%s: the policy yielded while loading (only hooks may wait)", p->name);
		rc = LUA_ERRRUN;
	} else {
		const char *m = lua_tostring(co, -1);
		policy_fail_msg(p, &load, m ? m : "(error object is not a string)", msg, sizeof(msg));
	}
	lua_settop(co, 0);
	lua_pop(L, 1);
	lua_pushstring(L, msg);
	return rc;
}

static const char *
policy_errmsg(lua_State *L)
{
	const char *m = lua_tostring(L, -1);
	return m ? m : "(error object is not a string)";
}

/** Append msg to e, prefixed with the policy name unless it already names a place. */
static void
policy_err_named(struct policy *p, struct policy_errs *e, const char *msg)
{
	const char *rest = policy_msg_rest(p, msg);
	if (rest != NULL)
		policy_err(e, "%s%s", p->name, rest);
	else
		policy_err(e, "%s: %s", p->name, msg);
}

/** Build the sandbox, the defaults and the libraries; 0 or an error in e. */
static int
policy_setup(struct policy *p, struct policy_errs *e)
{
	lua_State *L = p->L;
	static const lua_CFunction libs[] = {luaopen_base, luaopen_string, luaopen_table, luaopen_math};
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		lua_pushcfunction(L, libs[i]);
		lua_call(L, 0, 0);
	}
	lua_settop(L, 0);
	lua_createtable(L, 0, 3);
	lua_pushcfunction(L, policy_lua_log_info);
	lua_setfield(L, -2, "info");
	lua_pushcfunction(L, policy_lua_log_warn);
	lua_setfield(L, -2, "warn");
	lua_pushcfunction(L, policy_lua_log_error);
	lua_setfield(L, -2, "error");
	if (luaL_loadbufferx(L, policy_prelude_lua, policy_prelude_lua_len, "=strata.prelude", "t") != 0) {
		policy_err(e, "%s: internal error building the sandbox: %s", p->name, policy_errmsg(L));
		return STRATA_EINVAL;
	}
	lua_pushvalue(L, LUA_GLOBALSINDEX);
	lua_pushcfunction(L, policy_lua_killed);
	lua_pushcfunction(L, policy_lua_textload);
	lua_pushvalue(L, 1);
	if (lua_pcall(L, 4, 1, 0) != 0) {
		policy_err(e, "%s: internal error building the sandbox: %s", p->name, policy_errmsg(L));
		return STRATA_EINVAL;
	}
	/* stack: log, env */
	p->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	if (luaL_loadbufferx(L, policy_defaults_lua, policy_defaults_lua_len, "=strata.default", "t") != 0) {
		policy_err(e, "%s: internal error loading the default hooks: %s", p->name, policy_errmsg(L));
		return STRATA_EINVAL;
	}
	lua_rawgeti(L, LUA_REGISTRYINDEX, p->env_ref);
	lua_setfenv(L, -2);
	lua_newtable(L);
	lua_pushvalue(L, -1);
	p->dsettings_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_pushvalue(L, 1);
	if (lua_pcall(L, 2, 1, 0) != 0) {
		policy_err(e, "%s: internal error loading the default hooks: %s", p->name, policy_errmsg(L));
		return STRATA_EINVAL;
	}
	/* stack: log, D. strata.default.<hook> = D.<hook>; keep references to the defaults. */
	lua_rawgeti(L, LUA_REGISTRYINDEX, p->env_ref);
	lua_pushliteral(L, "strata");
	lua_rawget(L, -2);
	lua_getfield(L, -1, "default");
	int def = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, 2) != 0) {
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, def);
	}
	for (int h = 0; h < POLICY_HOOK_COUNT; h++) {
		lua_getfield(L, 2, policy_hook_names[h]);
		p->hook_ref[h] = luaL_ref(L, LUA_REGISTRYINDEX);
	}
	lua_settop(L, 0);
	return 0;
}

/** Load and run the script under the budget; validate its table; 0 or errors in e. */
static int
policy_load(struct policy *p, struct policy_errs *e)
{
	lua_State *L = p->L;
	char chunkname[600];
	snprintf(chunkname, sizeof(chunkname), "@%s", p->name);
	if (luaL_loadbufferx(L, p->src, p->len, chunkname, "t") != 0) {
		policy_err_named(p, e, policy_errmsg(L));
		return STRATA_EINVAL;
	}
	lua_Debug d;
	lua_pushvalue(L, -1);
	if (lua_getinfo(L, ">S", &d))
		p->chunk = d.source;
	lua_rawgeti(L, LUA_REGISTRYINDEX, p->env_ref);
	lua_setfenv(L, -2);
	if (policy_call_budgeted(p, 0, 1) != 0) {
		policy_err_named(p, e, policy_errmsg(L));
		return STRATA_EINVAL;
	}
	if (lua_type(L, -1) != LUA_TTABLE) {
		policy_err(e, "%s: the policy must return a table of settings and hooks (it returned %s)",
			   p->name, luaL_typename(L, -1));
		return STRATA_EINVAL;
	}
	policy_validate(p, L, e);
	if (e->count > 0)
		return STRATA_EINVAL;
	for (int h = 0; h < POLICY_HOOK_COUNT; h++) {
		if (!p->has_hook[h])
			continue;
		luaL_unref(L, LUA_REGISTRYINDEX, p->hook_ref[h]);
		lua_getfield(L, -1, policy_hook_names[h]);
		p->hook_ref[h] = luaL_ref(L, LUA_REGISTRYINDEX);
	}
	/* The defaults' private settings and the script-visible strata.settings. */
	lua_rawgeti(L, LUA_REGISTRYINDEX, p->dsettings_ref);
	policy_push_settings(p, L, lua_gettop(L));
	lua_rawgeti(L, LUA_REGISTRYINDEX, p->env_ref);
	lua_pushliteral(L, "strata");
	lua_rawget(L, -2);
	lua_getfield(L, -1, "settings");
	policy_push_settings(p, L, lua_gettop(L));
	lua_settop(L, 0);
	return 0;
}

/** policy_new, its errors collected in e. */
static int
policy_new_in(const char *name, const char *src, size_t len, const struct policy_limits *lim,
	      struct policy **out, struct policy_errs *e)
{
	*out = NULL;
	if (name == NULL || name[0] == '\0')
		name = "policy";
	if (src == NULL) {
		policy_err(e, "%s: no policy source", name);
		return STRATA_EINVAL;
	}
	if (len > POLICY_MAX_SOURCE_BYTES) {
		policy_err(e, "%s: policy of %zu bytes is over the limit of %u bytes", name, len,
			   POLICY_MAX_SOURCE_BYTES);
		return STRATA_ETOOBIG;
	}
	uint64_t mem = lim && lim->mem_bytes ? lim->mem_bytes : POLICY_DEFAULT_MEM_BYTES;
	uint32_t budget = lim && lim->budget_ms ? lim->budget_ms : POLICY_DEFAULT_BUDGET_MS;
	if (mem < POLICY_MIN_MEM_BYTES) {
		policy_err(e, "%s: policy memory limit of %llu bytes is under the minimum of %llu bytes", name,
			   (unsigned long long)mem, (unsigned long long)POLICY_MIN_MEM_BYTES);
		return STRATA_EINVAL;
	}
	struct policy *p = env.calloc(1, sizeof(*p));
	if (p == NULL) {
		policy_err(e, "%s: out of memory", name);
		return STRATA_ENOMEM;
	}
	p->mem_limit = mem;
	p->budget_ms = budget;
	p->budget_ns = (uint64_t)budget * 1000000ull;
	p->env_ref = p->dsettings_ref = LUA_NOREF;
	for (int h = 0; h < POLICY_HOOK_COUNT; h++)
		p->hook_ref[h] = LUA_NOREF;
	p->name = strdup(name);
	policy_short_name(name, p->short_name, sizeof(p->short_name));
	p->src = env.malloc(len + 1);
	if (p->name == NULL || p->src == NULL) {
		policy_delete(p);
		policy_err(e, "%s: out of memory", name);
		return STRATA_ENOMEM;
	}
	memcpy(p->src, src, len);
	p->src[len] = '\0';
	p->len = len;
	p->L = lua_newstate(policy_alloc, p);
	if (p->L == NULL) {
		policy_delete(p);
		policy_err(e, "%s: cannot create a Lua state", name);
		return STRATA_ENOMEM;
	}
	lua_atpanic(p->L, policy_panic);
	luaJIT_setmode(p->L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
	lua_sethook(p->L, policy_hook, LUA_MASKCOUNT | LUA_MASKLINE, POLICY_HOOK_INSTRUCTIONS);
	int rc = policy_setup(p, e);
	if (rc == 0)
		rc = policy_load(p, e);
	if (rc != 0) {
		policy_delete(p);
		return rc;
	}
	lua_gc(p->L, LUA_GCCOLLECT, 0);
	*out = p;
	return 0;
}

int
policy_new(const char *name, const char *src, size_t len, const struct policy_limits *lim,
	   struct policy **out)
{
	char errs[DIAG_MSG_MAX] = "";
	struct policy_errs e = {.buf = errs, .len = sizeof(errs)};
	int rc = policy_new_in(name, src, len, lim, out, &e);
	return rc ? diag_set(rc, "%s", errs) : 0;
}

void
policy_delete(struct policy *p)
{
	if (p == NULL)
		return;
	assert(p->current == NULL);
	if (p->L != NULL)
		lua_close(p->L);
	free(p->name);
	env.free(p->src);
	env.free(p);
}

lua_State *
policy_lua(struct policy *p)
{
	return p->L;
}

const struct runtime_settings *
policy_settings(const struct policy *p)
{
	return &p->settings;
}

int
policy_has_hook(const struct policy *p, enum policy_hook h)
{
	return (unsigned)h < POLICY_HOOK_COUNT && p->has_hook[h];
}

const char *
policy_source(const struct policy *p, size_t *len)
{
	if (len != NULL)
		*len = p->len;
	return p->src;
}

const char *
policy_name(const struct policy *p)
{
	return p->name;
}

void
policy_set_host(struct policy *p, void *host)
{
	p->host = host;
}

void *
policy_host(const struct policy *p)
{
	return p->host;
}

uint64_t
policy_mem_used(const struct policy *p)
{
	return p->mem_used;
}

int
policy_run_new(struct policy *p, enum policy_hook h, struct policy_run **out)
{
	*out = NULL;
	if ((unsigned)h >= POLICY_HOOK_COUNT)
		return diag_set(STRATA_EINVAL, "policy: unknown hook %d", (int)h);
	struct policy_run *r = env.calloc(1, sizeof(*r));
	if (r == NULL)
		return diag_set(STRATA_ENOMEM, "policy: out of memory starting a hook run");
	lua_State *L = p->L;
	if (p->mem_used > p->mem_limit / 2)
		lua_gc(L, LUA_GCCOLLECT, 0);
	r->p = p;
	r->co = lua_newthread(L);
	r->ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_rawgeti(L, LUA_REGISTRYINDEX, p->hook_ref[h]);
	lua_xmove(L, r->co, 1);
	*out = r;
	return 0;
}

lua_State *
policy_run_thread(struct policy_run *r)
{
	return r->co;
}

int
policy_run_resume(struct policy_run *r, int nargs)
{
	struct policy *p = r->p;
	p->current = r;
	r->resumed_at = policy_now_cpu();
	uint64_t t0 = policy_cpu_ns();
	int rc = lua_resume(r->co, nargs);
	r->thread_cpu_ns += policy_cpu_ns() - t0;
	r->cpu_ns += policy_now_cpu() - r->resumed_at;
	p->current = NULL;
	if (rc == LUA_YIELD)
		return POLICY_RUN_YIELD;
	if (rc == 0)
		return POLICY_RUN_DONE;
	const char *m = lua_tostring(r->co, -1);
	if (m == NULL)
		m = lua_type(r->co, -1) == LUA_TNIL ? "nil error" : "(error object is not a string)";
	char err[DIAG_MSG_MAX];
	policy_fail_msg(p, r, m, err, sizeof(err));
	lua_settop(r->co, 0);
	if (r->killed != POLICY_KILL_NONE)
		lua_gc(p->L, LUA_GCCOLLECT, 0);
	return diag_set(POLICY_RUN_ERROR, "%s", err);
}

struct policy_run *
policy_current_run(struct policy *p)
{
	return p->current;
}

uint64_t
policy_run_cpu_ns(const struct policy_run *r)
{
	return r->cpu_ns;
}

uint64_t
policy_run_thread_cpu_ns(const struct policy_run *r)
{
	return r->thread_cpu_ns;
}

void
policy_run_set_data(struct policy_run *r, void *data)
{
	r->data = data;
}

void *
policy_run_data(const struct policy_run *r)
{
	return r->data;
}

void
policy_run_delete(struct policy_run *r)
{
	if (r == NULL)
		return;
	luaL_unref(r->p->L, LUA_REGISTRYINDEX, r->ref);
	env.free(r);
}

unsigned
policy_clamps(const struct runtime_settings *s, const struct policy_engine *e, struct policy_clamp *out,
	      unsigned max)
{
	unsigned n = 0;
	uint32_t cap = e->merge_max_inputs;
	if (cap > 0 && (s->merge_max_generations == 0 || s->merge_max_generations > cap)) {
		if (n < max) {
			struct policy_clamp *c = &out[n];
			c->setting = policy_specs[SET_CAP].name;
			c->asked = s->merge_max_generations;
			c->effective = cap;
			if (s->merge_max_generations == 0)
				snprintf(c->why, sizeof(c->why), "0 asks for no cap; the engine's merge_max_inputs "
					 "= %u caps every pass", cap);
			else
				snprintf(c->why, sizeof(c->why), "clamped to the engine's merge_max_inputs = %u", cap);
		}
		n++;
	}
	uint32_t threads = e->merge_threads;
	if (threads > 0 && s->merge_threads > threads) {
		if (n < max) {
			struct policy_clamp *c = &out[n];
			c->setting = policy_specs[SET_THREADS].name;
			c->asked = s->merge_threads;
			c->effective = threads;
			snprintf(c->why, sizeof(c->why), "clamped to the engine's merge_threads = %u", threads);
		}
		n++;
	}
	return n;
}

void
policy_effective(const struct runtime_settings *s, const struct policy_engine *e, struct runtime_settings *out)
{
	*out = *s;
	struct policy_clamp c[POLICY_MAX_CLAMPS];
	unsigned n = policy_clamps(s, e, c, POLICY_MAX_CLAMPS);
	for (unsigned i = 0; i < n && i < POLICY_MAX_CLAMPS; i++)
		if (strcmp(c[i].setting, policy_specs[SET_CAP].name) == 0)
			out->merge_max_generations = (uint32_t)c[i].effective;
		else if (strcmp(c[i].setting, policy_specs[SET_THREADS].name) == 0)
			out->merge_threads = (uint32_t)c[i].effective;
}

void
policy_describe(const struct policy *p, const struct policy_engine *e, char *buf, size_t len)
{
	struct runtime_settings eff;
	policy_effective(&p->settings, e, &eff);
	const struct runtime_settings *s = &eff;
	struct policy_clamp c[POLICY_MAX_CLAMPS];
	unsigned nc = policy_clamps(&p->settings, e, c, POLICY_MAX_CLAMPS);
	char cap_note[256] = "", threads_note[256] = "";
	for (unsigned i = 0; i < nc && i < POLICY_MAX_CLAMPS; i++)
		if (strcmp(c[i].setting, policy_specs[SET_CAP].name) == 0)
			snprintf(cap_note, sizeof(cap_note), " (the policy asks %.0f; %s)", c[i].asked, c[i].why);
		else if (strcmp(c[i].setting, policy_specs[SET_THREADS].name) == 0)
			snprintf(threads_note, sizeof(threads_note), " (the policy asks %.0f; %s)", c[i].asked,
				 c[i].why);
	if (s->merge_threads == 0) {
		if (e->merge_threads > 0)
			snprintf(threads_note, sizeof(threads_note), " (the engine's: %u)", e->merge_threads);
		else
			snprintf(threads_note, sizeof(threads_note), " (the engine's)");
	}
	int n = snprintf(buf, len,
			 "flush_interval_s = %g\n"
			 "sweep_interval_s = %g\n"
			 "merge_after_generations = %u\n"
			 "merge_max_generations = %u%s\n"
			 "memtable_max_bytes = %llu\n"
			 "base_max_runs = %u\n"
			 "background_io_mib_per_s = %g%s\n"
			 "merge_threads = %u%s\n",
			 s->flush_interval_s, s->sweep_interval_s, s->merge_after_generations,
			 s->merge_max_generations, cap_note, (unsigned long long)s->memtable_max_bytes, s->base_max_runs,
			 s->background_io_mib_per_s < 0 ? 0 : s->background_io_mib_per_s,
			 s->background_io_mib_per_s == POLICY_IO_AUTO ? " (auto)"
			 : s->background_io_mib_per_s < 0 ? " (not set: the store's option)"
			 : s->background_io_mib_per_s == 0 ? " (unlimited)" : "",
			 s->merge_threads, threads_note);
	for (int h = 0; h < POLICY_HOOK_COUNT && n >= 0 && (size_t)n < len; h++)
		n += snprintf(buf + n, len - (size_t)n, "%s = %s\n", policy_hook_names[h],
			      p->has_hook[h] ? "defined by the script" : "built-in default");
}
