/*
 * strata_lua.c — the C half of the LuaJIT module `strata` (`require "strata.core"`):
 * store and plan userdata over the embedding API of node/strata.h. The Lua half
 * (lua/strata.lua) adds the scan iterator and the pure-Lua helpers.
 *
 * Conventions: an operational failure returns nil, message, code (message is
 * strata_strerror(rc) .. ": " .. strata_last_error()); a programming error (wrong
 * argument type, unknown option, a closed store) raises a Lua error. Memory the
 * engine hands out is held by a box userdata while Lua may raise, so an
 * allocation failure in the Lua VM never leaks it.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/text.h"
#include "../strata.h"

#define LSTRATA_DB_MT "strata.db"
#define LSTRATA_PLAN_MT "strata.plan"
#define LSTRATA_BOX_MT "strata.box"

/** Returned by the scan callback to stop a batch that is full. */
#define LSTRATA_SCAN_STOP 0x5ca7
/** Most rows one scan batch may hold. */
#define LSTRATA_SCAN_MAX_ROWS 65536u
/** A scan batch stops taking rows once it holds this many bytes (one row always fits). */
#define LSTRATA_SCAN_BATCH_BYTES (4u << 20)
/** The failure message of the policy calls in a build without policies. */
#define LSTRATA_NO_POLICY "policies are not supported by this build (compiled without STRATA_HAVE_POLICY)"

#if defined(__GNUC__)
#define LSTRATA_EXPORT __attribute__((visibility("default")))
#else
#define LSTRATA_EXPORT
#endif

/*
 * Argument errors name the function the script called even where Lua cannot: a tail call
 * (return db:merge(0, {...})) or a pcall(db.merge, ...) leaves no name in the caller's
 * frame, and luaL_argerror said "bad argument #3 to '?'". lstrata_argerror finds the
 * running C function in the registered tables instead ("bad argument #2 to 'db:merge'",
 * self not counted); the luaL_check* of this file go through it.
 */
static const luaL_Reg *lstrata_named[3];
static const char *const lstrata_named_prefix[3] = {"db:", "plan:", "strata."};

static int
lstrata_argerror(lua_State *L, int narg, const char *msg)
{
	lua_Debug ar;
	if (!lua_getstack(L, 0, &ar))
		return luaL_error(L, "bad argument #%d (%s)", narg, msg);
	lua_getinfo(L, "nf", &ar);
	lua_CFunction fn = lua_tocfunction(L, -1);
	lua_pop(L, 1);
	const char *name = ar.name, *prefix = "";
	int method = ar.namewhat != NULL && strcmp(ar.namewhat, "method") == 0;
	for (int k = 0; name == NULL && fn != NULL && k < 3; k++)
		for (const luaL_Reg *r = lstrata_named[k]; r != NULL && r->name != NULL; r++)
			if (r->func == fn) {
				name = r->name;
				prefix = lstrata_named_prefix[k];
				method = k < 2;
				break;
			}
	if (method) {
		narg--;
		if (narg == 0)
			return luaL_error(L, "calling '%s%s' on bad self (%s)", prefix, name, msg);
	}
	return luaL_error(L, "bad argument #%d to '%s%s' (%s)", narg, prefix, name ? name : "?", msg);
}

static int
lstrata_typerror(lua_State *L, int narg, const char *tname)
{
	return lstrata_argerror(L, narg, lua_pushfstring(L, "%s expected, got %s", tname, luaL_typename(L, narg)));
}

static void *
lstrata_checkudata(lua_State *L, int idx, const char *tname)
{
	void *p = lua_touserdata(L, idx);
	if (p != NULL && lua_getmetatable(L, idx)) {
		lua_getfield(L, LUA_REGISTRYINDEX, tname);
		int same = lua_rawequal(L, -1, -2);
		lua_pop(L, 2);
		if (same)
			return p;
	}
	lstrata_typerror(L, idx, tname);
	return NULL;
}

static void
lstrata_checktype(lua_State *L, int idx, int t)
{
	if (lua_type(L, idx) != t)
		lstrata_typerror(L, idx, lua_typename(L, t));
}

static const char *
lstrata_checklstring(lua_State *L, int idx, size_t *len)
{
	const char *s = lua_tolstring(L, idx, len);
	if (s == NULL)
		lstrata_typerror(L, idx, lua_typename(L, LUA_TSTRING));
	return s;
}

static lua_Integer
lstrata_checkinteger(lua_State *L, int idx)
{
	lua_Integer d = lua_tointeger(L, idx);
	if (d == 0 && !lua_isnumber(L, idx))
		lstrata_typerror(L, idx, lua_typename(L, LUA_TNUMBER));
	return d;
}

static const char *
lstrata_optlstring(lua_State *L, int idx, const char *def, size_t *len)
{
	if (lua_isnoneornil(L, idx)) {
		if (len != NULL)
			*len = def ? strlen(def) : 0;
		return def;
	}
	return lstrata_checklstring(L, idx, len);
}

#define luaL_argerror lstrata_argerror
#define luaL_checkudata lstrata_checkudata
#define luaL_checktype lstrata_checktype
#define luaL_checklstring lstrata_checklstring
#define luaL_checkinteger lstrata_checkinteger
#define luaL_optlstring lstrata_optlstring

struct lstrata_plan;

/** A store as seen from Lua. */
struct lstrata_db {
	/** The open store; NULL once closed. */
	strata *db;
	/** Plans prepared on this store and neither committed nor aborted. */
	struct lstrata_plan *plans;
};

/** A prepared merge or base compaction as seen from Lua. */
struct lstrata_plan {
	/** The engine's plan; NULL once committed, aborted or dropped by close. */
	strata_plan *plan;
	/** Store the plan was prepared on (kept alive by the plan's environment table). */
	struct lstrata_db *owner;
	/** Previous plan in owner->plans. */
	struct lstrata_plan *prev;
	/** Next plan in owner->plans. */
	struct lstrata_plan *next;
	/** Generations (merge) or runs (compaction) the plan folds. */
	uint32_t inputs;
	/** Shard the plan belongs to. */
	uint32_t shard;
	/** 1 for a base compaction, 0 for a merge. */
	int compact;
};

/** Kinds of memory a box holds. */
enum lstrata_box_kind {
	/** Memory returned by strata_get: released with strata_free. */
	LSTRATA_BOX_ENGINE,
	/** Memory of the binding's own buffers: released with free. */
	LSTRATA_BOX_OWN,
};

/** C memory owned by a userdata, so that a Lua error cannot leak it. */
struct lstrata_box {
	/** The memory, or NULL. */
	void *p;
	/** Bytes allocated (LSTRATA_BOX_OWN). */
	size_t cap;
	/** Bytes used (LSTRATA_BOX_OWN). */
	size_t len;
	/** Where p came from. */
	enum lstrata_box_kind kind;
};

/** One uint64_t counter of a C struct (strata_stats, strata_policy_info), shown in Lua. */
struct lstrata_field {
	/** Field name, the key in the Lua table. */
	const char *name;
	/** Offset in the struct. */
	size_t off;
};

#define LSTRATA_STAT(field, kind, metric, scale, help) {#field, offsetof(strata_stats, field)},
/** Every strata_stats field (STRATA_STATS_FIELDS), in declaration order. */
static const struct lstrata_field lstrata_stat_fields[] = {STRATA_STATS_FIELDS(LSTRATA_STAT)};
#undef LSTRATA_STAT

/** A result code and its constant name. */
struct lstrata_code {
	/** Name without the STRATA_ prefix. */
	const char *name;
	/** The code. */
	int rc;
};

static const struct lstrata_code lstrata_codes[] = {
	{"OK", STRATA_OK},
	{"NOTFOUND", STRATA_NOTFOUND},
	{"EINVAL", STRATA_EINVAL},
	{"ENOMEM", STRATA_ENOMEM},
	{"EIO", STRATA_EIO},
	{"ECORRUPT", STRATA_ECORRUPT},
	{"EFENCED", STRATA_EFENCED},
	{"ECONFLICT", STRATA_ECONFLICT},
	{"ETOOBIG", STRATA_ETOOBIG},
	{"ERANGE", STRATA_ERANGE},
	{"ENOSPC", STRATA_ENOSPC},
	{"EBUSY", STRATA_EBUSY},
	{"ECLOSED", STRATA_ECLOSED},
	{"EREADONLY", STRATA_EREADONLY},
	{"EEXIST", STRATA_EEXIST},
	{"EINJECTED", STRATA_EINJECTED},
	{"EVERSION", STRATA_EVERSION},
	{"ELOCKED", STRATA_ELOCKED},
};

/** Options of strata.open. */
static const char *const lstrata_open_keys[] = {
	"dir", "shards", "sync", "sync_interval_ms", "max_value_bytes", "wal_segment_bytes",
	"block_bytes", "zstd_level", "compress_max_bytes_per_kib", "compress_sample_every", "bloom_bits_per_key", "generation_bloom_bits_per_key", "manifest_keep", "manifest_snapshot_edits",
	"merge_max_inputs", "policy",
	"clock", "threads", "seed", "step_meter", "store", "wal_dir", "delete_bytes_per_s",
	"background_io_bytes_per_s", "background_io_auto", "group_commit_wait_us", "max_open_wal_files",
	"max_open_object_files", "memtable_huge_pages", "replay_batch_rows", "open_threads", "wal", "serve_first", "serve_count",
	"block_cache_bytes", "delete_chunk_bytes", "merge_threads", NULL,
};
/** Options of merge and prepare. */
static const char *const lstrata_merge_keys[] = {"max_generations", NULL};
/** Options of compact and prepare_compact. */
static const char *const lstrata_compact_keys[] = {"max_runs", NULL};

/* ---------- results and argument checks ---------- */

/** Push nil, "<strerror>: <last error>", rc: the operational-failure triple. */
static int
lstrata_fail(lua_State *L, int rc)
{
	const char *msg = strata_last_error();
	lua_pushnil(L);
	if (msg != NULL && msg[0] != '\0')
		lua_pushfstring(L, "%s: %s", strata_strerror(rc), msg);
	else
		lua_pushstring(L, strata_strerror(rc));
	lua_pushinteger(L, rc);
	return 3;
}

/** Push nil, msg, rc for a failure detected by the binding itself. */
static int
lstrata_fail_msg(lua_State *L, int rc, const char *msg)
{
	lua_pushnil(L);
	lua_pushstring(L, msg);
	lua_pushinteger(L, rc);
	return 3;
}

/** Push true, or the failure triple when rc is not 0: the result of a call that returns
 *  no value. */
static int
lstrata_ok(lua_State *L, int rc)
{
	if (rc != 0)
		return lstrata_fail(L, rc);
	lua_pushboolean(L, 1);
	return 1;
}

/** Push v, or the failure triple when rc is not 0. */
static int
lstrata_number(lua_State *L, int rc, lua_Number v)
{
	if (rc != 0)
		return lstrata_fail(L, rc);
	lua_pushnumber(L, v);
	return 1;
}

/** Raise an argument error for every key of the table at t not in known, with the
 *  nearest known name suggested. */
static void
lstrata_check_keys(lua_State *L, int t, int argn, const char *const *known)
{
	lua_pushnil(L);
	while (lua_next(L, t) != 0) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_argerror(L, argn, lua_pushfstring(L, "option names are strings, not %s",
							       luaL_typename(L, -1)));
		const char *k = lua_tostring(L, -1);
		const char *near = NULL;
		size_t best = (size_t)-1;
		int found = 0;
		for (const char *const *n = known; *n != NULL && !found; n++) {
			size_t d = text_edit_distance(k, *n);
			found = strcmp(k, *n) == 0;
			if (d < best) {
				best = d;
				near = *n;
			}
		}
		if (found)
			continue;
		size_t klen = strlen(k);
		if (near != NULL && best <= (klen / 3 > 2 ? klen / 3 : 2))
			luaL_argerror(L, argn, lua_pushfstring(L, "unknown option '%s' (did you mean '%s'?)",
							       k, near));
		luaL_argerror(L, argn, lua_pushfstring(L, "unknown option '%s'", k));
	}
}

/** The value at idx as an integer in [lo, hi]; raises an argument error otherwise. */
static lua_Number
lstrata_int_at(lua_State *L, int idx, int argn, const char *what, lua_Number lo, lua_Number hi)
{
	if (lua_type(L, idx) != LUA_TNUMBER)
		luaL_argerror(L, argn, lua_pushfstring(L, "%s must be an integer, not %s", what,
						       luaL_typename(L, idx)));
	lua_Number d = lua_tonumber(L, idx);
	if (d != floor(d) || d < lo || d > hi) {
		char range[96];
		snprintf(range, sizeof(range), "[%.0f, %.0f]", (double)lo, (double)hi);
		luaL_argerror(L, argn, lua_pushfstring(L, "%s must be an integer in %s, not %s", what, range,
						       lua_tostring(L, idx)));
	}
	return d;
}

/** Field name of the option table at t as an integer in [lo, hi], or def when nil. */
static lua_Number
lstrata_opt_int(lua_State *L, int t, int argn, const char *name, lua_Number lo, lua_Number hi,
		lua_Number def)
{
	lua_getfield(L, t, name);
	lua_Number v = def;
	if (!lua_isnil(L, -1))
		v = lstrata_int_at(L, -1, argn, name, lo, hi);
	lua_pop(L, 1);
	return v;
}

/** The store at idx; raises if it is not a store or is closed. */
static struct lstrata_db *
lstrata_checkdb(lua_State *L, int idx)
{
	struct lstrata_db *d = luaL_checkudata(L, idx, LSTRATA_DB_MT);
	if (d->db == NULL)
		luaL_argerror(L, idx, "the store is closed");
	return d;
}

/** The shard number at idx (range against the store is the engine's check). */
static uint32_t
lstrata_checkshard(lua_State *L, int idx)
{
	return (uint32_t)lstrata_int_at(L, idx, idx, "shard", 0, (lua_Number)UINT32_MAX);
}

/** The plan at idx. */
static struct lstrata_plan *
lstrata_checkplan(lua_State *L, int idx)
{
	return luaL_checkudata(L, idx, LSTRATA_PLAN_MT);
}

/** A value of an optional option table at idx: nil or a table; returns 1 for a table. */
static int
lstrata_opt_table(lua_State *L, int idx, const char *const *known)
{
	if (lua_isnoneornil(L, idx))
		return 0;
	luaL_checktype(L, idx, LUA_TTABLE);
	lstrata_check_keys(L, idx, idx, known);
	return 1;
}

/** The max_runs (compact) or max_generations (merge) of the optional option table at 3;
 *  0 when absent. */
static uint32_t
lstrata_opt_max(lua_State *L, int compact)
{
	if (!lstrata_opt_table(L, 3, compact ? lstrata_compact_keys : lstrata_merge_keys))
		return 0;
	return (uint32_t)lstrata_opt_int(L, 3, 3, compact ? "max_runs" : "max_generations", 0, UINT32_MAX, 0);
}

/** Push a table of the n counters (fields) of the struct at base, with room for extra
 *  more members. */
static void
lstrata_push_fields(lua_State *L, const void *base, const struct lstrata_field *fields, size_t n, int extra)
{
	lua_createtable(L, 0, (int)n + extra);
	for (size_t i = 0; i < n; i++) {
		uint64_t v;
		memcpy(&v, (const char *)base + fields[i].off, sizeof(v));
		lua_pushnumber(L, (lua_Number)v);
		lua_setfield(L, -2, fields[i].name);
	}
}

/* ---------- boxes ---------- */

static int
lstrata_box_gc(lua_State *L)
{
	struct lstrata_box *b = luaL_checkudata(L, 1, LSTRATA_BOX_MT);
	if (b->p != NULL) {
		if (b->kind == LSTRATA_BOX_ENGINE)
			strata_free(b->p);
		else
			free(b->p);
		b->p = NULL;
	}
	return 0;
}

/** Push an empty box of the given kind. */
static struct lstrata_box *
lstrata_box_new(lua_State *L, enum lstrata_box_kind kind)
{
	struct lstrata_box *b = lua_newuserdata(L, sizeof(*b));
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	luaL_getmetatable(L, LSTRATA_BOX_MT);
	lua_setmetatable(L, -2);
	return b;
}

/** Append n bytes to an own box without raising; STRATA_ENOMEM on failure. */
static int
lstrata_box_add(struct lstrata_box *b, const void *p, size_t n)
{
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap - b->len < n) {
			if (cap > SIZE_MAX / 2)
				return STRATA_ENOMEM;
			cap *= 2;
		}
		void *np = realloc(b->p, cap);
		if (np == NULL)
			return STRATA_ENOMEM;
		b->p = np;
		b->cap = cap;
	}
	if (n > 0)
		memcpy((char *)b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* ---------- open / close ---------- */

/** Abort every pending plan of d and mark it consumed. */
static void
lstrata_drop_plans(struct lstrata_db *d)
{
	while (d->plans != NULL) {
		struct lstrata_plan *p = d->plans;
		d->plans = p->next;
		strata_abort_merge(d->db, p->plan);
		p->plan = NULL;
		p->prev = p->next = NULL;
	}
}

static void
lstrata_unlink_plan(struct lstrata_plan *p)
{
	if (p->prev != NULL)
		p->prev->next = p->next;
	else if (p->owner != NULL && p->owner->plans == p)
		p->owner->plans = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	p->prev = p->next = NULL;
}

#ifdef STRATA_HAVE_POLICY
/** Install a policy; pushes the failure triple and returns 3, or returns 0. */
static int
lstrata_set_policy(lua_State *L, strata *db, const char *src, size_t len)
{
	int rc = strata_set_policy(db, src, len);
	if (rc == 0)
		return 0;
	return lstrata_fail_msg(L, rc, lua_pushfstring(L, "%s: %s", strata_strerror(rc), strata_last_error()));
}
#else
static int
lstrata_set_policy(lua_State *L, strata *db, const char *src, size_t len)
{
	(void)db;
	(void)src;
	(void)len;
	return lstrata_fail_msg(L, STRATA_EINVAL, LSTRATA_NO_POLICY);
}
#endif

/** Names of the values of an enumerated option, by value. */
struct lstrata_name {
	const char *name;
	int value;
};
static const struct lstrata_name lstrata_clocks[] = {
	{"real", STRATA_CLOCK_REAL}, {"manual", STRATA_CLOCK_MANUAL}, {NULL, 0}};
static const struct lstrata_name lstrata_meters[] = {
	{"auto", STRATA_STEP_AUTO}, {"time", STRATA_STEP_TIME}, {"work", STRATA_STEP_WORK}, {NULL, 0}};
static const struct lstrata_name lstrata_syncs[] = {
	{"fsync", STRATA_SYNC_FSYNC}, {"none", STRATA_SYNC_NONE}, {"interval", STRATA_SYNC_INTERVAL}, {NULL, 0}};
static const struct lstrata_name lstrata_wals[] = {{"local", STRATA_WAL_LOCAL}, {"store", STRATA_WAL_STORE}, {NULL, 0}};

/** Option name of table 1 as one of names (absent: def); an argument error otherwise. */
static int
lstrata_opt_enum(lua_State *L, int t, const char *name, const struct lstrata_name *names, int def)
{
	lua_getfield(L, t, name);
	int v = def;
	if (!lua_isnil(L, -1)) {
		const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
		const struct lstrata_name *n = names;
		while (n->name != NULL && (s == NULL || strcmp(s, n->name) != 0))
			n++;
		if (n->name == NULL) {
			luaL_Buffer b;
			luaL_buffinit(L, &b);
			for (n = names; n->name != NULL; n++) {
				luaL_addstring(&b, n == names ? "\"" : n[1].name ? ", \"" : " or \"");
				luaL_addstring(&b, n->name);
				luaL_addstring(&b, "\"");
			}
			luaL_pushresult(&b);
			luaL_argerror(L, 1, lua_pushfstring(L, "%s must be %s", name, lua_tostring(L, -1)));
		}
		v = n->value;
	}
	lua_pop(L, 1);
	return v;
}

/** Option name of table t as a boolean (absent: def); an argument error otherwise. */
static int
lstrata_opt_bool(lua_State *L, int t, const char *name, int def)
{
	lua_getfield(L, t, name);
	int v = def;
	if (lua_isboolean(L, -1))
		v = lua_toboolean(L, -1);
	else if (!lua_isnil(L, -1))
		luaL_argerror(L, t, lua_pushfstring(L, "%s must be a boolean, not %s", name, luaL_typename(L, -1)));
	lua_pop(L, 1);
	return v;
}

/** strata.open(opts | dir) -> db | nil, message, code */
static int
lstrata_open(lua_State *L)
{
	strata_options o;
	strata_options_init(&o);
	if (lua_type(L, 1) == LUA_TSTRING) {
		lua_createtable(L, 0, 1);
		lua_pushvalue(L, 1);
		lua_setfield(L, -2, "dir");
		lua_replace(L, 1);
	}
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	lstrata_check_keys(L, 1, 1, lstrata_open_keys);

	lua_getfield(L, 1, "dir"); /* 2: kept on the stack while the store opens */
	if (lua_type(L, 2) != LUA_TSTRING)
		luaL_argerror(L, 1, lua_pushfstring(L, "dir must be a string, not %s", luaL_typename(L, 2)));
	o.dir = lua_tostring(L, 2);
	o.shards = (uint32_t)lstrata_opt_int(L, 1, 1, "shards", 0, 65536, o.shards);
	o.sync = lstrata_opt_enum(L, 1, "sync", lstrata_syncs, o.sync);
	o.wal = lstrata_opt_enum(L, 1, "wal", lstrata_wals, o.wal);
	o.serve_first = (uint32_t)lstrata_opt_int(L, 1, 1, "serve_first", 0, 65535, 0);
	o.serve_count = (uint32_t)lstrata_opt_int(L, 1, 1, "serve_count", 0, 65536, 0);
	o.sync_interval_ms = (uint32_t)lstrata_opt_int(L, 1, 1, "sync_interval_ms", 1, UINT32_MAX,
						       o.sync_interval_ms);
	o.max_value_bytes = (uint64_t)lstrata_opt_int(L, 1, 1, "max_value_bytes", 1, 9007199254740992.0,
						      (lua_Number)o.max_value_bytes);
	o.wal_segment_bytes = (uint64_t)lstrata_opt_int(L, 1, 1, "wal_segment_bytes", 4096,
							9007199254740992.0, (lua_Number)o.wal_segment_bytes);
	o.block_bytes = (uint32_t)lstrata_opt_int(L, 1, 1, "block_bytes", 256, UINT32_MAX, o.block_bytes);
	o.merge_max_inputs = (uint32_t)lstrata_opt_int(L, 1, 1, "merge_max_inputs", 2, UINT32_MAX,
						       o.merge_max_inputs);
	o.zstd_level = (int)lstrata_opt_int(L, 1, 1, "zstd_level", -131072, 22, o.zstd_level);
	o.compress_max_bytes_per_kib = (uint32_t)lstrata_opt_int(L, 1, 1, "compress_max_bytes_per_kib", 0,
								 1024, o.compress_max_bytes_per_kib);
	o.compress_sample_every = (uint32_t)lstrata_opt_int(L, 1, 1, "compress_sample_every", 1,
							    1u << 20, o.compress_sample_every);
	o.bloom_bits_per_key = (uint32_t)lstrata_opt_int(L, 1, 1, "bloom_bits_per_key", 0, 64,
							 o.bloom_bits_per_key);
	o.generation_bloom_bits_per_key = (uint32_t)lstrata_opt_int(
		L, 1, 1, "generation_bloom_bits_per_key", 0, 64, o.generation_bloom_bits_per_key);
	o.manifest_keep = (uint32_t)lstrata_opt_int(L, 1, 1, "manifest_keep", 0, 1000000, o.manifest_keep);
	o.manifest_snapshot_edits = (uint32_t)lstrata_opt_int(L, 1, 1, "manifest_snapshot_edits", 1,
							      1000000, o.manifest_snapshot_edits);
	o.delete_bytes_per_s = (uint64_t)lstrata_opt_int(L, 1, 1, "delete_bytes_per_s", 0, 9007199254740992.0,
							 (lua_Number)o.delete_bytes_per_s);
	o.delete_chunk_bytes = (uint64_t)lstrata_opt_int(L, 1, 1, "delete_chunk_bytes", 0, 9007199254740992.0,
							 (lua_Number)o.delete_chunk_bytes);
	o.background_io_bytes_per_s = (uint64_t)lstrata_opt_int(L, 1, 1, "background_io_bytes_per_s", 0,
								9007199254740992.0,
								(lua_Number)o.background_io_bytes_per_s);
	o.open_threads = (uint32_t)lstrata_opt_int(L, 1, 1, "open_threads", 0, 1024, o.open_threads);
	o.merge_threads = (uint32_t)lstrata_opt_int(L, 1, 1, "merge_threads", 0, 64, o.merge_threads);
	o.memtable_huge_pages = lstrata_opt_bool(L, 1, "memtable_huge_pages", o.memtable_huge_pages);
	o.replay_batch_rows = (uint32_t)lstrata_opt_int(L, 1, 1, "replay_batch_rows", 0, 4294967295.0,
							o.replay_batch_rows);
	o.background_io_auto = lstrata_opt_bool(L, 1, "background_io_auto", o.background_io_auto);
	o.group_commit_wait_us = (uint32_t)lstrata_opt_int(L, 1, 1, "group_commit_wait_us", 0, 10000000,
							   o.group_commit_wait_us);
	o.max_open_wal_files = (uint32_t)lstrata_opt_int(L, 1, 1, "max_open_wal_files", 0, 10000000,
							 o.max_open_wal_files);
	o.max_open_object_files = (uint32_t)lstrata_opt_int(L, 1, 1, "max_open_object_files", 0, 10000000,
							    o.max_open_object_files);
	o.block_cache_bytes = (uint64_t)lstrata_opt_int(L, 1, 1, "block_cache_bytes", 0, 9007199254740992.0,
							(lua_Number)o.block_cache_bytes);
	o.clock = lstrata_opt_enum(L, 1, "clock", lstrata_clocks, o.clock);
	o.step_meter = lstrata_opt_enum(L, 1, "step_meter", lstrata_meters, o.step_meter);
	o.threads = (int)lstrata_opt_int(L, 1, 1, "threads", -1, 1024, o.threads);
	o.seed = (uint64_t)lstrata_opt_int(L, 1, 1, "seed", 0, 9007199254740992.0, 0);
	lua_getfield(L, 1, "policy"); /* 3: kept on the stack while the store opens */
	if (lua_type(L, 3) == LUA_TSTRING)
		o.policy = lua_tostring(L, 3);
	else if (lua_type(L, 3) == LUA_TBOOLEAN)
		o.policy = lua_toboolean(L, 3) ? "" : NULL;
	else if (!lua_isnil(L, 3))
		luaL_argerror(L, 1, lua_pushfstring(L, "policy must be a file path, true (the built-in "
						    "default) or false, not %s", luaL_typename(L, 3)));

	lua_getfield(L, 1, "store"); /* 4: kept on the stack while the store opens */
	if (lua_type(L, 4) == LUA_TSTRING)
		o.store = lua_tostring(L, 4);
	else if (!lua_isnil(L, 4))
		luaL_argerror(L, 1, lua_pushfstring(L, "store must be a URL string, not %s", luaL_typename(L, 4)));

	lua_getfield(L, 1, "wal_dir"); /* 5: kept on the stack while the store opens */
	if (lua_type(L, 5) == LUA_TSTRING)
		o.wal_dir = lua_tostring(L, 5);
	else if (!lua_isnil(L, 5))
		luaL_argerror(L, 1, lua_pushfstring(L, "wal_dir must be a directory path, not %s",
						    luaL_typename(L, 5)));

	struct lstrata_db *d = lua_newuserdata(L, sizeof(*d)); /* 6 */
	memset(d, 0, sizeof(*d));
	luaL_getmetatable(L, LSTRATA_DB_MT);
	lua_setmetatable(L, -2);
	int rc = strata_open(&o, &d->db);
	if (rc != 0) {
		d->db = NULL;
		return lstrata_fail(L, rc);
	}
	lua_settop(L, 6);
	return 1;
}

/** db:close() -> true; idempotent. Aborts plans still pending on the store. */
static int
lstrata_close(lua_State *L)
{
	struct lstrata_db *d = luaL_checkudata(L, 1, LSTRATA_DB_MT);
	if (d->db != NULL) {
		lstrata_drop_plans(d);
		strata_close(d->db);
		d->db = NULL;
	}
	lua_pushboolean(L, 1);
	return 1;
}

/** db:is_closed() -> boolean */
static int
lstrata_is_closed(lua_State *L)
{
	struct lstrata_db *d = luaL_checkudata(L, 1, LSTRATA_DB_MT);
	lua_pushboolean(L, d->db == NULL);
	return 1;
}

static int
lstrata_db_tostring(lua_State *L)
{
	struct lstrata_db *d = luaL_checkudata(L, 1, LSTRATA_DB_MT);
	if (d->db == NULL)
		lua_pushfstring(L, "strata.db: %p (closed)", (void *)d);
	else
		lua_pushfstring(L, "strata.db: %p (%d shards)", (void *)d, (int)strata_shards(d->db));
	return 1;
}

/** db:shards() -> number of shards */
static int
lstrata_shards(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	lua_pushinteger(L, (lua_Integer)strata_shards(d->db));
	return 1;
}

/** db:shard_of(key) -> the shard key belongs to (strata_shard_of) */
static int
lstrata_shard_of(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	size_t n;
	const char *k = luaL_checklstring(L, 2, &n);
	lua_pushinteger(L, (lua_Integer)strata_shard_of(k, n, strata_shards(d->db)));
	return 1;
}

/** db:policy(path_or_source) -> true | nil, message, code */
static int
lstrata_policy(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	size_t len;
	const char *src = luaL_checklstring(L, 2, &len);
	int nret = lstrata_set_policy(L, d->db, src, len);
	return nret != 0 ? nret : lstrata_ok(L, 0);
}

#ifdef STRATA_HAVE_POLICY
#define LSTRATA_INFO(f) { #f, offsetof(strata_policy_info, f) }
/** Every counter of strata_policy_info. */
static const struct lstrata_field lstrata_info_fields[] = {
	LSTRATA_INFO(version),
	LSTRATA_INFO(reloads),
	LSTRATA_INFO(reload_failures),
	LSTRATA_INFO(hook_runs),
	LSTRATA_INFO(hook_errors),
	LSTRATA_INFO(policy_seals),
	LSTRATA_INFO(policy_merges),
	LSTRATA_INFO(policy_compactions),
	LSTRATA_INFO(flush_timer_fires),
	LSTRATA_INFO(sweeps),
};
#undef LSTRATA_INFO
_Static_assert(sizeof(lstrata_info_fields) / sizeof(lstrata_info_fields[0]) * sizeof(uint64_t) ==
	offsetof(strata_policy_info, last_error), "every counter of strata_policy_info is listed");

/** db:policy_info() -> {version=, reloads=, reload_failures=, hook_runs=, hook_errors=,
 *  policy_seals=, policy_merges=, policy_compactions=, flush_timer_fires=, sweeps=,
 *  last_error=, name=} | nil, message, code (a store opened without a policy) */
static int
lstrata_policy_info(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	strata_policy_info info;
	int rc = strata_policy_info_get(d->db, &info);
	if (rc != 0)
		return lstrata_fail(L, rc);
	lstrata_push_fields(L, &info, lstrata_info_fields, sizeof(lstrata_info_fields) / sizeof(lstrata_info_fields[0]),
			    2);
	info.last_error[sizeof(info.last_error) - 1] = '\0';
	info.name[sizeof(info.name) - 1] = '\0';
	lua_pushstring(L, info.last_error);
	lua_setfield(L, -2, "last_error");
	lua_pushstring(L, info.name);
	lua_setfield(L, -2, "name");
	return 1;
}
#else
static int
lstrata_policy_info(lua_State *L)
{
	lstrata_checkdb(L, 1);
	return lstrata_fail_msg(L, STRATA_EINVAL, LSTRATA_NO_POLICY);
}
#endif

/* ---------- rows ---------- */

/** The string field name of the row table at row, or its element pos ({key, value} rows, as
 *  ctx:append and strata.load's batches take them); anchors a value produced by an __index
 *  metamethod in the table at anchor (created lazily at that slot). */
static const char *
lstrata_row_field(lua_State *L, int row, size_t i, const char *name, int pos, size_t *len, int anchor,
		  size_t *nanchored)
{
	lua_pushstring(L, name);
	lua_rawget(L, row);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_rawgeti(L, row, pos);
	}
	int raw = !lua_isnil(L, -1);
	if (!raw) {
		lua_pop(L, 1);
		lua_getfield(L, row, name);
	}
	if (lua_type(L, -1) != LUA_TSTRING)
		luaL_argerror(L, 3, lua_pushfstring(L, "row %d: %s must be a string, not %s", (int)i + 1,
						    name, luaL_typename(L, -1)));
	const char *s = lua_tolstring(L, -1, len);
	if (!raw) {
		if (lua_isnil(L, anchor)) {
			lua_newtable(L);
			lua_replace(L, anchor);
		}
		lua_rawseti(L, anchor, (int)++*nanchored);
	} else {
		lua_pop(L, 1);
	}
	return s;
}

/** db:append(shard, rows | row | key, value) -> last_seq | nil, message, code
 *  rows is a list of {key=, value=} or {key, value} tables ({key=, delete=true} for a
 *  delete); a single row table or a key and a value are accepted as a batch of one. */
static int
lstrata_append(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	if (lua_type(L, 3) == LUA_TSTRING) {
		strata_row r = {0};
		r.key = lua_tolstring(L, 3, &r.key_len);
		r.value = luaL_checklstring(L, 4, &r.value_len);
		uint64_t seq = 0;
		int rc = strata_append_seq(d->db, shard, &r, 1, &seq);
		return lstrata_number(L, rc, (lua_Number)seq);
	}
	luaL_checktype(L, 3, LUA_TTABLE);
	lua_settop(L, 3);
	lua_pushnil(L); /* 4: anchor for strings produced by metamethods */
	lua_getfield(L, 3, "key");
	lua_rawgeti(L, 3, 1);
	int single = !lua_isnil(L, -2) || lua_type(L, -1) == LUA_TSTRING;
	lua_pop(L, 2);
	size_t n = single ? 1 : lua_objlen(L, 3);
	if (n > UINT32_MAX)
		luaL_argerror(L, 3, "too many rows in one batch");
	strata_row one;
	strata_row *rows = &one;
	if (n > 1)
		rows = lua_newuserdata(L, n * sizeof(*rows)); /* 5 */
	int rows_top = lua_gettop(L);
	size_t nanchored = 0;
	for (size_t i = 0; i < n; i++) {
		if (single) {
			lua_pushvalue(L, 3);
		} else {
			lua_rawgeti(L, 3, (int)(i + 1));
			if (lua_type(L, -1) != LUA_TTABLE)
				luaL_argerror(L, 3, lua_pushfstring(L, "row %d must be a {key=, value=} "
								    "or {key, value} table, not %s", (int)i + 1,
								    luaL_typename(L, -1)));
		}
		int row = lua_gettop(L);
		rows[i].key = lstrata_row_field(L, row, i, "key", 1, &rows[i].key_len, 4, &nanchored);
		lua_getfield(L, row, "delete");
		rows[i].kind = lua_toboolean(L, -1) ? STRATA_ROW_DELETE : STRATA_ROW_PUT;
		lua_pop(L, 1);
		if (rows[i].kind == STRATA_ROW_DELETE) {
			rows[i].value = NULL;
			rows[i].value_len = 0;
		} else {
			rows[i].value = lstrata_row_field(L, row, i, "value", 2, &rows[i].value_len, 4,
							  &nanchored);
		}
		lua_settop(L, rows_top);
	}
	uint64_t seq = UINT64_MAX;
	int rc = strata_append_seq(d->db, shard, rows, n, &seq);
	if (rc != 0)
		return lstrata_fail(L, rc);
	if (seq == UINT64_MAX) {
		strata_stats st;
		rc = strata_shard_stats(d->db, shard, &st);
		if (rc != 0)
			return lstrata_fail(L, rc);
		seq = st.last_seq;
	}
	return lstrata_number(L, 0, (lua_Number)seq);
}

/** db:delete(shard, key | keys) -> last_seq | nil, message, code
 *  keys is a list of strings, deleted in one batch (all or nothing). */
static int
lstrata_delete(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	strata_row one = {.kind = STRATA_ROW_DELETE};
	strata_row *rows = &one;
	size_t n = 1;
	if (lua_type(L, 3) == LUA_TSTRING) {
		one.key = lua_tolstring(L, 3, &one.key_len);
	} else {
		luaL_checktype(L, 3, LUA_TTABLE);
		n = lua_objlen(L, 3);
		if (n > UINT32_MAX)
			luaL_argerror(L, 3, "too many keys in one batch");
		if (n == 0)
			return lstrata_fail_msg(L, STRATA_EINVAL, "db:delete: no keys (give a key or a "
						"list of keys)");
		rows = lua_newuserdata(L, n * sizeof(*rows)); /* 4 */
		for (size_t i = 0; i < n; i++) {
			lua_rawgeti(L, 3, (int)(i + 1));
			if (lua_type(L, -1) != LUA_TSTRING)
				luaL_argerror(L, 3, lua_pushfstring(L, "key %d must be a string, not %s",
								    (int)i + 1, luaL_typename(L, -1)));
			rows[i] = (strata_row){.kind = STRATA_ROW_DELETE};
			rows[i].key = lua_tolstring(L, -1, &rows[i].key_len);
			lua_pop(L, 1); /* the string stays alive in the table at 3 */
		}
	}
	uint64_t seq = 0;
	int rc = strata_append_seq(d->db, shard, rows, n, &seq);
	return lstrata_number(L, rc, (lua_Number)seq);
}

/** db:get(shard, key) -> value | nil (absent) | nil, message, code */
static int
lstrata_get(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	size_t klen;
	const char *key = luaL_checklstring(L, 3, &klen);
	struct lstrata_box *b = lstrata_box_new(L, LSTRATA_BOX_ENGINE);
	size_t vlen = 0;
	int rc = strata_get(d->db, shard, key, klen, &b->p, &vlen);
	if (rc == STRATA_NOTFOUND) {
		lua_pushnil(L);
		return 1;
	}
	if (rc != 0)
		return lstrata_fail(L, rc);
	if (vlen == 0)
		lua_pushliteral(L, "");
	else
		lua_pushlstring(L, b->p, vlen);
	strata_free(b->p);
	b->p = NULL;
	return 1;
}

/** State of one scan batch. */
struct lstrata_scan {
	/** Buffer of (key_len, value_len, key, value) records. */
	struct lstrata_box *buf;
	/** Key the batch resumes after (skipped when seen), or NULL. */
	const char *after;
	/** Its length. */
	size_t after_len;
	/** Rows taken so far. */
	size_t rows;
	/** Most rows to take. */
	size_t max_rows;
	/** 1 when the batch stopped because it was full. */
	int more;
	/** STRATA_ENOMEM when the buffer could not grow. */
	int rc;
};

static int
lstrata_scan_cb(void *ctx, const strata_row *row)
{
	struct lstrata_scan *c = ctx;
	if (c->after != NULL && row->key_len == c->after_len &&
	    memcmp(row->key, c->after, c->after_len) == 0)
		return 0;
	if (c->rows >= c->max_rows || c->buf->len >= LSTRATA_SCAN_BATCH_BYTES) {
		c->more = 1;
		return LSTRATA_SCAN_STOP;
	}
	size_t lens[2] = {row->key_len, row->value_len};
	if (lstrata_box_add(c->buf, lens, sizeof(lens)) != 0 ||
	    lstrata_box_add(c->buf, row->key, row->key_len) != 0 ||
	    lstrata_box_add(c->buf, row->value, row->value_len) != 0) {
		c->rc = STRATA_ENOMEM;
		return LSTRATA_SCAN_STOP;
	}
	c->rows++;
	return 0;
}

/** core.scan_batch(db, shard, start, after, stop, max_rows)
 *  -> {k1, v1, k2, v2, ...}, more | nil, message, code
 *  Rows with start <= key < stop (nil = unbounded); with after true, a row whose
 *  key equals start is skipped (resuming a scan after its last key). At most
 *  max_rows rows and about LSTRATA_SCAN_BATCH_BYTES bytes; more is true when the
 *  batch stopped early. */
static int
lstrata_scan_batch(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	size_t start_len = 0, stop_len = 0;
	const char *start = luaL_optlstring(L, 3, NULL, &start_len);
	int after = lua_toboolean(L, 4);
	const char *stop = luaL_optlstring(L, 5, NULL, &stop_len);
	size_t max_rows = (size_t)lstrata_int_at(L, 6, 6, "max_rows", 0, LSTRATA_SCAN_MAX_ROWS);
	if (after && start == NULL)
		luaL_argerror(L, 4, "resuming after a key needs a start key");
	lua_settop(L, 6);
	struct lstrata_scan c;
	memset(&c, 0, sizeof(c));
	c.buf = lstrata_box_new(L, LSTRATA_BOX_OWN); /* 7 */
	c.after = after ? start : NULL;
	c.after_len = start_len;
	c.max_rows = max_rows;
	int rc = strata_scan(d->db, shard, start, start_len, stop, stop_len, lstrata_scan_cb, &c);
	if (c.rc != 0)
		return lstrata_fail_msg(L, c.rc, "out of memory: a scan batch could not grow its buffer");
	if (rc < 0)
		return lstrata_fail(L, rc);
	lua_createtable(L, (int)(c.rows * 2), 0);
	const char *p = c.buf->p;
	for (size_t i = 0; i < c.rows; i++) {
		size_t lens[2];
		memcpy(lens, p, sizeof(lens));
		p += sizeof(lens);
		lua_pushlstring(L, p, lens[0]);
		lua_rawseti(L, -2, (int)(2 * i + 1));
		p += lens[0];
		lua_pushlstring(L, lens[1] ? p : "", lens[1]);
		lua_rawseti(L, -2, (int)(2 * i + 2));
		p += lens[1];
	}
	lua_pushboolean(L, c.more);
	return 2;
}

/* ---------- seal, merge, plans ---------- */

/** db:claim(shard) -> true | nil, message, code: strata_shard_claim. */
static int
lstrata_claim(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	return lstrata_ok(L, strata_shard_claim(d->db, shard));
}

/** db:seal(shard) -> true | nil, message, code */
static int
lstrata_seal(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	return lstrata_ok(L, strata_seal(d->db, shard));
}

/** db:checkpoint(dir) -> true | nil, message, code (strata_checkpoint) */
static int
lstrata_checkpoint(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	const char *dir = luaL_checkstring(L, 2);
	return lstrata_ok(L, strata_checkpoint(d->db, dir));
}

/** db:merge(shard, {max_generations=}) -> generations merged | nil, message, code */
static int
lstrata_merge(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	uint32_t max = lstrata_opt_max(L, 0);
	uint32_t merged = 0;
	int rc = strata_merge(d->db, shard, max, &merged);
	return lstrata_number(L, rc, merged);
}

/** Shared body of prepare and prepare_compact. */
static int
lstrata_prepare_kind(lua_State *L, int compact)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	uint32_t max = lstrata_opt_max(L, compact);
	/* Everything that may raise happens before the engine holds a plan. */
	struct lstrata_plan *p = lua_newuserdata(L, sizeof(*p));
	memset(p, 0, sizeof(*p));
	luaL_getmetatable(L, LSTRATA_PLAN_MT);
	lua_setmetatable(L, -2);
	lua_createtable(L, 1, 0);
	lua_pushvalue(L, 1);
	lua_rawseti(L, -2, 1);
	lua_setfenv(L, -2);
	strata_plan *sp = NULL;
	int rc = compact ? strata_prepare_compact(d->db, shard, max, &sp)
			 : strata_prepare_merge(d->db, shard, max, &sp);
	if (rc != 0)
		return lstrata_fail(L, rc);
	p->plan = sp;
	p->owner = d;
	p->inputs = strata_plan_generations(sp);
	p->shard = strata_plan_shard(sp);
	p->compact = compact;
	p->next = d->plans;
	if (d->plans != NULL)
		d->plans->prev = p;
	d->plans = p;
	return 1;
}

/** db:prepare(shard, {max_generations=}) -> plan | nil, message, code */
static int
lstrata_prepare(lua_State *L)
{
	return lstrata_prepare_kind(L, 0);
}

/** db:prepare_compact(shard, {max_runs=}) -> plan | nil, message, code */
static int
lstrata_prepare_compact(lua_State *L)
{
	return lstrata_prepare_kind(L, 1);
}

/** Take the engine's plan out of p (which is then consumed) and unlink p from its store. */
static strata_plan *
lstrata_plan_take(struct lstrata_plan *p)
{
	strata_plan *sp = p->plan;
	lstrata_unlink_plan(p);
	p->plan = NULL;
	return sp;
}

/** Check that the plan at 2 can be consumed by the store d; pushes the failure triple
 *  and returns 3 when it cannot, else 0. */
static int
lstrata_plan_usable(lua_State *L, struct lstrata_db *d, struct lstrata_plan *p)
{
	if (p->plan == NULL)
		return lstrata_fail_msg(L, STRATA_EINVAL, "plan already consumed");
	if (p->owner != d)
		return lstrata_fail_msg(L, STRATA_EINVAL, "plan belongs to another store");
	return 0;
}

/** db:commit(plan) -> inputs folded | nil, message, code. Consumes the plan, also on
 *  a conflict (whose run is deleted). */
static int
lstrata_commit(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	struct lstrata_plan *p = lstrata_checkplan(L, 2);
	int nret = lstrata_plan_usable(L, d, p);
	if (nret != 0)
		return nret;
	int rc = strata_commit_merge(d->db, lstrata_plan_take(p));
	return lstrata_number(L, rc, p->inputs);
}

/** db:abort(plan) -> true | nil, message, code. Deletes the plan's run. */
static int
lstrata_abort(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	struct lstrata_plan *p = lstrata_checkplan(L, 2);
	int nret = lstrata_plan_usable(L, d, p);
	if (nret != 0)
		return nret;
	strata_abort_merge(d->db, lstrata_plan_take(p));
	return lstrata_ok(L, 0);
}

/** db:compact(shard, {max_runs=}) -> runs folded | nil, message, code */
static int
lstrata_compact(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	uint32_t max = lstrata_opt_max(L, 1);
	strata_plan *sp = NULL;
	int rc = strata_prepare_compact(d->db, shard, max, &sp);
	if (rc != 0)
		return lstrata_fail(L, rc);
	uint32_t n = strata_plan_generations(sp);
	rc = strata_commit_merge(d->db, sp);
	return lstrata_number(L, rc, n);
}

static int
lstrata_plan_gc(lua_State *L)
{
	struct lstrata_plan *p = luaL_checkudata(L, 1, LSTRATA_PLAN_MT);
	if (p->plan != NULL && p->owner != NULL && p->owner->db != NULL)
		strata_abort_merge(p->owner->db, lstrata_plan_take(p));
	return 0;
}

/** plan:inputs() -> generations (merge) or runs (compaction) the plan folds */
static int
lstrata_plan_inputs(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lstrata_checkplan(L, 1)->inputs);
	return 1;
}

/** plan:shard() -> shard number */
static int
lstrata_plan_shard(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lstrata_checkplan(L, 1)->shard);
	return 1;
}

/** plan:kind() -> "merge" | "compact" */
static int
lstrata_plan_kind(lua_State *L)
{
	lua_pushstring(L, lstrata_checkplan(L, 1)->compact ? "compact" : "merge");
	return 1;
}

/** plan:consumed() -> true once committed, aborted or dropped by close */
static int
lstrata_plan_consumed(lua_State *L)
{
	lua_pushboolean(L, lstrata_checkplan(L, 1)->plan == NULL);
	return 1;
}

static int
lstrata_plan_tostring(lua_State *L)
{
	struct lstrata_plan *p = lstrata_checkplan(L, 1);
	lua_pushfstring(L, "strata.plan: %p (%s of %d %s on shard %d%s)", (void *)p,
			p->compact ? "compaction" : "merge", (int)p->inputs,
			p->compact ? "runs" : "generations", (int)p->shard,
			p->plan == NULL ? ", consumed" : "");
	return 1;
}

/* ---------- stats, check ---------- */

/** db:stats(shard) -> table of every strata_stats field | nil, message, code */
static int
lstrata_stats(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	strata_stats st;
	int rc = strata_shard_stats(d->db, shard, &st);
	if (rc != 0)
		return lstrata_fail(L, rc);
	lstrata_push_fields(L, &st, lstrata_stat_fields, sizeof(lstrata_stat_fields) / sizeof(lstrata_stat_fields[0]), 0);
	return 1;
}

/** db:check(shard) -> true | nil, message, code */
static int
lstrata_check(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint32_t shard = lstrata_checkshard(L, 2);
	return lstrata_ok(L, strata_check(d->db, shard));
}

/** db:tick(now_ns) -> true | nil, message, code: set a manual clock (never backwards). */
static int
lstrata_tick(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	lua_Number now = luaL_checknumber(L, 2);
	if (!(now >= 0) || now > 9007199254740992.0)
		return luaL_argerror(L, 2, "the time is nanoseconds, 0 .. 2^53");
	return lstrata_ok(L, strata_tick(d->db, (uint64_t)now));
}

/** db:step(budget_us) -> {chunks, turns, spent_us, max_chunk_us, blocked, pending} |
 *  nil, message, code: run background work for at most the budget (+ one chunk). */
static int
lstrata_step(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	lua_Number b = luaL_checknumber(L, 2);
	if (!(b >= 0) || b > 9007199254740992.0)
		return luaL_argerror(L, 2, "the budget is microseconds, 0 .. 2^53");
	strata_step_info info;
	int rc = strata_step(d->db, (uint64_t)b, &info);
	if (rc != 0)
		return lstrata_fail(L, rc);
	lua_createtable(L, 0, 6);
	lua_pushnumber(L, info.chunks);
	lua_setfield(L, -2, "chunks");
	lua_pushnumber(L, info.turns);
	lua_setfield(L, -2, "turns");
	lua_pushnumber(L, (lua_Number)info.spent_us);
	lua_setfield(L, -2, "spent_us");
	lua_pushnumber(L, (lua_Number)info.max_chunk_us);
	lua_setfield(L, -2, "max_chunk_us");
	lua_pushboolean(L, info.blocked);
	lua_setfield(L, -2, "blocked");
	lua_pushnumber(L, info.pending);
	lua_setfield(L, -2, "pending");
	return 1;
}

/** db:trace_hash() -> hex string, events: the hash over every engine event so far. */
static int
lstrata_trace_hash(lua_State *L)
{
	struct lstrata_db *d = lstrata_checkdb(L, 1);
	uint64_t events = 0;
	uint64_t h = strata_trace_hash(d->db, &events);
	char hex[17];
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)h);
	lua_pushstring(L, hex);
	lua_pushnumber(L, (lua_Number)events);
	return 2;
}

/** core.strerror(code) -> words */
static int
lstrata_strerror(lua_State *L)
{
	lua_pushstring(L, strata_strerror((int)luaL_checkinteger(L, 1)));
	return 1;
}

/* ---------- registration ---------- */

static const luaL_Reg lstrata_db_methods[] = {
	{"append", lstrata_append},
	{"get", lstrata_get},
	{"delete", lstrata_delete},
	{"seal", lstrata_seal},
	{"claim", lstrata_claim},
	{"merge", lstrata_merge},
	{"prepare", lstrata_prepare},
	{"prepare_compact", lstrata_prepare_compact},
	{"commit", lstrata_commit},
	{"abort", lstrata_abort},
	{"compact", lstrata_compact},
	{"stats", lstrata_stats},
	{"check", lstrata_check},
	{"checkpoint", lstrata_checkpoint},
	{"policy", lstrata_policy},
	{"policy_info", lstrata_policy_info},
	{"tick", lstrata_tick},
	{"step", lstrata_step},
	{"trace_hash", lstrata_trace_hash},
	{"shards", lstrata_shards},
	{"shard_of", lstrata_shard_of},
	{"close", lstrata_close},
	{"is_closed", lstrata_is_closed},
	{NULL, NULL},
};

static const luaL_Reg lstrata_plan_methods[] = {
	{"inputs", lstrata_plan_inputs},
	{"generations", lstrata_plan_inputs},
	{"shard", lstrata_plan_shard},
	{"kind", lstrata_plan_kind},
	{"consumed", lstrata_plan_consumed},
	{NULL, NULL},
};

static const luaL_Reg lstrata_functions[] = {
	{"open", lstrata_open},
	{"scan_batch", lstrata_scan_batch},
	{"strerror", lstrata_strerror},
	{NULL, NULL},
};

/** Create metatable name with __index = a methods table (also left in module field
 *  field), __gc and __tostring. Expects the module table on top. */
static void
lstrata_register_type(lua_State *L, const char *name, const char *field, const luaL_Reg *methods,
		      lua_CFunction gc, lua_CFunction tostring)
{
	luaL_newmetatable(L, name);
	lua_newtable(L);
	luaL_register(L, NULL, methods);
	lua_pushvalue(L, -1);
	lua_setfield(L, -4, field);
	lua_setfield(L, -2, "__index");
	if (gc != NULL) {
		lua_pushcfunction(L, gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pushcfunction(L, tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pushliteral(L, "strata");
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);
}

static int
lstrata_box_tostring(lua_State *L)
{
	lua_pushliteral(L, "strata.box");
	return 1;
}

LSTRATA_EXPORT int
luaopen_strata_core(lua_State *L)
{
	lstrata_named[0] = lstrata_db_methods;
	lstrata_named[1] = lstrata_plan_methods;
	lstrata_named[2] = lstrata_functions;
	lua_newtable(L);
	luaL_register(L, NULL, lstrata_functions);
	lstrata_register_type(L, LSTRATA_DB_MT, "db_methods", lstrata_db_methods, lstrata_close,
			      lstrata_db_tostring);
	lstrata_register_type(L, LSTRATA_PLAN_MT, "plan_methods", lstrata_plan_methods, lstrata_plan_gc,
			      lstrata_plan_tostring);
	luaL_newmetatable(L, LSTRATA_BOX_MT);
	lua_pushcfunction(L, lstrata_box_gc);
	lua_setfield(L, -2, "__gc");
	lua_pushcfunction(L, lstrata_box_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pop(L, 1);

	lua_pushliteral(L, STRATA_VERSION);
	lua_setfield(L, -2, "VERSION");
	lua_pushinteger(L, STRATA_MAX_KEY);
	lua_setfield(L, -2, "MAX_KEY");
	lua_pushinteger(L, STRATA_DEFAULT_SHARDS);
	lua_setfield(L, -2, "DEFAULT_SHARDS");
	lua_pushinteger(L, LSTRATA_SCAN_MAX_ROWS);
	lua_setfield(L, -2, "SCAN_MAX_ROWS");
	lua_pushinteger(L, LSTRATA_SCAN_BATCH_BYTES);
	lua_setfield(L, -2, "SCAN_BATCH_BYTES");
#ifdef STRATA_HAVE_POLICY
	lua_pushboolean(L, 1);
#else
	lua_pushboolean(L, 0);
#endif
	lua_setfield(L, -2, "HAVE_POLICY");
	for (size_t i = 0; i < sizeof(lstrata_codes) / sizeof(lstrata_codes[0]); i++) {
		lua_pushinteger(L, lstrata_codes[i].rc);
		lua_setfield(L, -2, lstrata_codes[i].name);
	}
	size_t n = sizeof(lstrata_stat_fields) / sizeof(lstrata_stat_fields[0]);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, lstrata_stat_fields[i].name);
		lua_rawseti(L, -2, (int)i + 1);
	}
	lua_setfield(L, -2, "STATS_FIELDS");
	return 1;
}

/** Reached only when `require "strata"` found this library (built as strata.so)
 *  before the Lua half: say how to make the Lua half visible. */
LSTRATA_EXPORT int
luaopen_strata(lua_State *L)
{
	return luaL_error(L, "strata: this library holds only the C half (strata.core); the module "
			  "`strata` is lua/strata.lua, which must be on package.path before this library "
			  "is on package.cpath (e.g. LUA_PATH=\"<repo>/lua/?.lua;;\")");
}
