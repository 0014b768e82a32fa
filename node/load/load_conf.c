/*
 * load_conf.c — the configuration of a `strata load` run from its script: the
 * returned table (duration, scenarios, stages, thresholds, hooks, options) with
 * every field checked, and the wrk compatibility layer for scripts that define
 * wrk's global hooks instead. Loop thread only, before the loop runs (wrk's
 * done() after it stopped).
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "load_core.h"

/* ------------------------------------------------------------------------ */
/* The script's configuration                                                */
/* ------------------------------------------------------------------------ */

int
load_conf_fail(struct load_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int
load_conf_fail(struct load_run *run, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "strata load: %s: ", run->script);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return -1;
}

/** Refuse keys of the table at idx that are not in allowed (NULL-terminated). */
static int
conf_fields(struct load_run *run, int idx, const char *what, const char *const *allowed)
{
	lua_State *L = run->L;
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING) {
			lua_pop(L, 1);
			return load_conf_fail(run, "%s: keys must be names", what);
		}
		const char *k = lua_tostring(L, -1);
		int ok = 0;
		struct load_metrics names = { 0 };
		for (const char *const *a = allowed; *a != NULL; a++) {
			if (strcmp(*a, k) == 0)
				ok = 1;
			load_metrics_set(&names, *a, 0);
		}
		if (!ok) {
			char sug[256];
			load_metrics_suggest(&names, k, sug, sizeof(sug));
			load_metrics_destroy(&names);
			int rc = load_conf_fail(run, "%s: unknown field \"%s\" (closest known fields: %s)", what, k, sug);
			lua_pop(L, 1);
			return rc;
		}
		load_metrics_destroy(&names);
	}
	return 0;
}

/** A time at idx: seconds, "30s"/"500ms"/"2m", or "40%" of whole. 1 when absent. */
static int
conf_time(struct load_run *run, int idx, uint64_t whole, const char *what, uint64_t *out)
{
	lua_State *L = run->L;
	if (lua_isnil(L, idx))
		return 1;
	double s;
	if (lua_type(L, idx) == LUA_TNUMBER) {
		s = lua_tonumber(L, idx);
		if (!(s >= 0 && s <= 366.0 * 86400.0))
			return load_conf_fail(run, "%s: %g seconds is out of range", what, s);
	} else if (lua_type(L, idx) == LUA_TSTRING) {
		const char *str = lua_tostring(L, idx);
		size_t n = strlen(str);
		if (n > 1 && str[n - 1] == '%' && whole != UINT64_MAX) {
			char *end;
			double pct = strtod(str, &end);
			if (end != str + n - 1 || !(pct >= 0 && pct <= 100))
				return load_conf_fail(run, "%s: bad percentage \"%s\"", what, str);
			*out = (uint64_t)((double)whole * pct / 100.0);
			return 0;
		}
		s = load_parse_duration(str);
		if (s < 0)
			return load_conf_fail(run, "%s: bad duration \"%s\" (use 30s, 500ms, 2m, 1h%s)", what, str,
					 whole != UINT64_MAX ? " or 40%" : "");
	} else {
		return load_conf_fail(run, "%s must be seconds or a duration string", what);
	}
	*out = (uint64_t)(s * 1e9);
	return 0;
}

static int
conf_number(struct load_run *run, int idx, double lo, double hi, const char *what, double *out)
{
	lua_State *L = run->L;
	if (lua_isnil(L, idx))
		return 1;
	if (lua_type(L, idx) != LUA_TNUMBER)
		return load_conf_fail(run, "%s must be a number", what);
	double v = lua_tonumber(L, idx);
	if (!(v >= lo && v <= hi))
		return load_conf_fail(run, "%s = %g is out of range %g..%g", what, v, lo, hi);
	*out = v;
	return 0;
}

/** conf_number of the field name of the table at idx. */
static int
conf_field_number(struct load_run *run, int idx, const char *name, double lo, double hi, double *out)
{
	lua_getfield(run->L, idx, name);
	int rc = conf_number(run, -1, lo, hi, name, out);
	lua_pop(run->L, 1);
	return rc;
}

/** conf_time of the field name of the table at idx. */
static int
conf_field_time(struct load_run *run, int idx, const char *name, uint64_t whole, uint64_t *out)
{
	lua_getfield(run->L, idx, name);
	int rc = conf_time(run, -1, whole, name, out);
	lua_pop(run->L, 1);
	return rc;
}

static int
conf_name_ok(const char *n)
{
	if (*n == '\0' || strlen(n) >= LOAD_NAME_MAX - 40)
		return 0;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == '-'))
			return 0;
	return 1;
}

static int
conf_stages(struct load_run *run, struct load_scn *s, int idx, uint64_t scn_len)
{
	lua_State *L = run->L;
	static const char *const fields[] = { "duration", "target", "name", NULL };
	if (!lua_istable(L, idx))
		return load_conf_fail(run, "scenario %s: stages must be an array of {duration=, target=}", s->name);
	size_t n = lua_objlen(L, idx);
	if (n > LOAD_MAX_STAGES)
		return load_conf_fail(run, "scenario %s: %zu stages, more than %d", s->name, n, LOAD_MAX_STAGES);
	uint64_t t = 0;
	double level = s->initial, arrivals = 0;
	for (size_t i = 0; i < n; i++) {
		char what[LOAD_NAME_MAX + 64];
		snprintf(what, sizeof(what), "scenario %s stage %zu", s->name, i + 1);
		lua_rawgeti(L, idx, (int)i + 1);
		int st_idx = lua_gettop(L);
		if (!lua_istable(L, st_idx)) {
			lua_pop(L, 1);
			return load_conf_fail(run, "%s must be a table {duration=, target=, name=}", what);
		}
		if (conf_fields(run, st_idx, what, fields) != 0) {
			lua_pop(L, 1);
			return -1;
		}
		struct load_stage *st = &s->stages[i];
		lua_getfield(L, st_idx, "duration");
		int rc = conf_time(run, -1, scn_len, what, &st->dur);
		lua_pop(L, 1);
		if (rc == 1)
			rc = load_conf_fail(run, "%s needs a duration", what);
		double target = 0;
		lua_getfield(L, st_idx, "target");
		if (rc == 0) {
			rc = conf_number(run, -1, 0, s->model == LOAD_MODEL_OPEN ? 1e7 : LOAD_MAX_VUS, what, &target);
			if (rc == 1)
				rc = load_conf_fail(run, "%s needs a target (%s)", what,
					       s->model == LOAD_MODEL_OPEN ? "rate per second" : "VUs");
		}
		lua_pop(L, 1);
		lua_getfield(L, st_idx, "name");
		if (rc == 0 && !lua_isnil(L, -1)) {
			const char *nm = lua_tostring(L, -1);
			if (lua_type(L, -1) != LUA_TSTRING || !conf_name_ok(nm))
				rc = load_conf_fail(run, "%s: name must be letters, digits, _ or -", what);
			else
				snprintf(st->name, sizeof(st->name), "%s", nm);
		}
		lua_pop(L, 2);
		if (rc != 0)
			return -1;
		st->t0 = t;
		st->from = level;
		st->to = target;
		st->n0 = arrivals;
		arrivals += (st->from + st->to) / 2 * ((double)st->dur / 1e9);
		t += st->dur;
		level = target;
		if (st->name[0] != '\0') {
			char sn[LOAD_NAME_MAX * 2 + 2];
			snprintf(sn, sizeof(sn), "%s/%s", s->name, st->name);
			if (load_stat_new(sn, 0, &st->stat) != 0)
				return load_conf_fail(run, "%s", diag_last());
		}
	}
	s->nstages = (unsigned)n;
	return 0;
}

static int
conf_scenario(struct load_run *run, const char *name, int idx)
{
	lua_State *L = run->L;
	static const char *const fields[] = { "exec",	    "rate",	"every",       "vus",	      "start",
					      "duration",   "stages",	"max_inflight", "on_overload", "max_pending",
					      "iterations", "pause",	"description", NULL };
	if (!conf_name_ok(name))
		return load_conf_fail(run, "scenario name \"%s\": use letters, digits, _ or - (at most %d)", name,
				 LOAD_NAME_MAX - 41);
	for (int v = 0; v <= LOAD_VERB_VERIFY; v++)
		if (strcmp(name, load_verb_name(v)) == 0)
			return load_conf_fail(run, "scenario name \"%s\" is a verb's name; metric names would clash",
					 name);
	if (strcmp(name, "errors") == 0)
		return load_conf_fail(run, "scenario name \"errors\" is reserved");
	if (run->nscn == LOAD_MAX_SCENARIOS)
		return load_conf_fail(run, "more than %d scenarios", LOAD_MAX_SCENARIOS);
	char what[LOAD_NAME_MAX + 16];
	snprintf(what, sizeof(what), "scenario %s", name);
	if (!lua_istable(L, idx))
		return load_conf_fail(run, "%s must be a table", what);
	if (conf_fields(run, idx, what, fields) != 0)
		return -1;
	struct load_scn *s = env.calloc(1, sizeof(*s));
	if (s == NULL)
		return load_conf_fail(run, "out of memory");
	run->scn[run->nscn++] = s;
	s->run = run;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->exec_ref = s->pause_ref = LUA_NOREF;
	s->max_pending = LOAD_MAX_PENDING;
	s->max_inflight = LOAD_DEFAULT_MAX_INFLIGHT;
	if (load_stat_new(name, 1, &s->stat) != 0)
		return load_conf_fail(run, "%s", diag_last());

	lua_getfield(L, idx, "exec");
	if (!lua_isfunction(L, -1)) {
		lua_pop(L, 1);
		return load_conf_fail(run, "%s needs exec = function(ctx, n) ... end", what);
	}
	s->exec_ref = luaL_ref(L, LUA_REGISTRYINDEX);

	int have = 0, rc;
	double v;
	rc = conf_field_number(run, idx, "rate", 0, 1e7, &v);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		have++;
		s->model = LOAD_MODEL_OPEN;
		s->initial = v;
	}
	uint64_t every = 0;
	rc = conf_field_time(run, idx, "every", UINT64_MAX, &every);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		if (every < 1000000)
			return load_conf_fail(run, "%s: every must be at least 1ms", what);
		have++;
		s->model = LOAD_MODEL_OPEN;
		s->initial = 1e9 / (double)every;
		s->max_inflight = 1;
		s->drop = 1;
	}
	rc = conf_field_number(run, idx, "vus", 0, LOAD_MAX_VUS, &v);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		if (v != floor(v))
			return load_conf_fail(run, "%s: vus must be an integer", what);
		have++;
		s->model = LOAD_MODEL_CLOSED;
		s->initial = v;
	}
	if (have != 1)
		return load_conf_fail(run, "%s needs exactly one of rate (open model, iterations per second), every "
				      "(open model, one at a time) or vus (closed model)", what);

	rc = conf_field_time(run, idx, "start", run->duration, &s->start);
	if (rc < 0)
		return -1;
	uint64_t len = run->duration > s->start ? run->duration - s->start : 0;
	rc = conf_field_time(run, idx, "duration", run->duration, &len);
	if (rc < 0)
		return -1;
	s->end = s->start + len > run->duration ? run->duration : s->start + len;

	lua_getfield(L, idx, "stages");
	rc = lua_isnil(L, -1) ? 0 : conf_stages(run, s, lua_gettop(L), len);
	lua_pop(L, 1);
	if (rc != 0)
		return -1;

	rc = conf_field_number(run, idx, "max_inflight", 1, 1e7, &v);
	if (rc < 0)
		return -1;
	if (rc == 0)
		s->max_inflight = (unsigned)v;
	rc = conf_field_number(run, idx, "max_pending", 0, LOAD_MAX_PENDING, &v);
	if (rc < 0)
		return -1;
	if (rc == 0)
		s->max_pending = (uint64_t)v;
	lua_getfield(L, idx, "on_overload");
	if (!lua_isnil(L, -1)) {
		const char *o = lua_tostring(L, -1);
		if (o != NULL && strcmp(o, "drop") == 0)
			s->drop = 1;
		else if (o != NULL && strcmp(o, "queue") == 0)
			s->drop = 0;
		else {
			lua_pop(L, 1);
			return load_conf_fail(run, "%s: on_overload must be \"queue\" or \"drop\"", what);
		}
	}
	lua_pop(L, 1);
	rc = conf_field_number(run, idx, "iterations", 1, 1e15, &v);
	if (rc < 0)
		return -1;
	if (rc == 0)
		s->max_iterations = (uint64_t)v;
	lua_getfield(L, idx, "pause");
	if (lua_isfunction(L, -1)) {
		s->pause_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	} else {
		uint64_t p = 0;
		rc = conf_time(run, -1, UINT64_MAX, "pause", &p);
		lua_pop(L, 1);
		if (rc < 0)
			return -1;
		s->pause_s = (double)p / 1e9;
	}
	if (s->model == LOAD_MODEL_CLOSED) {
		double most = s->initial;
		for (unsigned i = 0; i < s->nstages; i++)
			if (s->stages[i].to > most)
				most = s->stages[i].to;
		s->nvus = (unsigned)most;
		snprintf(s->desc, sizeof(s->desc), "closed %g VUs%s", s->initial, s->nstages ? " (staged)" : "");
	} else if (every > 0) {
		snprintf(s->desc, sizeof(s->desc), "every %.4gs", (double)every / 1e9);
	} else {
		snprintf(s->desc, sizeof(s->desc), "open %.6g/s%s", s->initial, s->nstages ? " (staged)" : "");
	}
	return 0;
}

int
load_conf_scenarios(struct load_run *run, int idx)
{
	lua_State *L = run->L;
	if (!lua_istable(L, idx))
		return load_conf_fail(run, "scenarios must be a table name -> {exec=, rate=|vus=|every=, ...}");
	/* Sorted names: the order of a Lua table is not stable. */
	const char *names[LOAD_MAX_SCENARIOS + 1];
	int n = 0;
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING) {
			lua_pop(L, 1);
			return load_conf_fail(run, "scenarios: keys must be scenario names");
		}
		if (n == LOAD_MAX_SCENARIOS) {
			lua_pop(L, 1);
			return load_conf_fail(run, "more than %d scenarios", LOAD_MAX_SCENARIOS);
		}
		names[n++] = lua_tostring(L, -1);
	}
	if (n == 0)
		return load_conf_fail(run, "scenarios is empty");
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			const char *t = names[j];
			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (int i = 0; i < n; i++) {
		lua_getfield(L, idx, names[i]);
		int rc = conf_scenario(run, names[i], lua_gettop(L));
		lua_pop(L, 1);
		if (rc != 0)
			return -1;
	}
	return 0;
}

static int
conf_thresholds(struct load_run *run, int idx)
{
	lua_State *L = run->L;
	if (!lua_istable(L, idx))
		return load_conf_fail(run, "thresholds must be a table metric -> \"< 5\" (or a list of such strings)");
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		if (lua_type(L, -2) != LUA_TSTRING) {
			lua_pop(L, 2);
			return load_conf_fail(run, "thresholds: keys must be metric names");
		}
		const char *metric = lua_tostring(L, -2);
		int vidx = lua_gettop(L);
		size_t count = lua_istable(L, vidx) ? lua_objlen(L, vidx) : 1;
		for (size_t i = 1; i <= count; i++) {
			if (lua_istable(L, vidx))
				lua_rawgeti(L, vidx, (int)i);
			else
				lua_pushvalue(L, vidx);
			if (lua_type(L, -1) != LUA_TSTRING) {
				lua_pop(L, 3);
				return load_conf_fail(run, "threshold %s: write the condition as a string, e.g. \"< 5\"",
						 metric);
			}
			if (run->nthr == LOAD_MAX_THRESHOLDS) {
				lua_pop(L, 3);
				return load_conf_fail(run, "more than %d thresholds", LOAD_MAX_THRESHOLDS);
			}
			struct load_threshold *t = &run->thr[run->nthr];
			snprintf(t->metric, sizeof(t->metric), "%s", metric);
			char msg[256];
			if (load_threshold_parse(t, lua_tostring(L, -1), msg, sizeof(msg)) != 0) {
				lua_pop(L, 3);
				return load_conf_fail(run, "%s", msg);
			}
			run->nthr++;
			lua_pop(L, 1);
		}
		lua_pop(L, 1);
	}
	/* Sorted for a stable report. */
	for (unsigned i = 1; i < run->nthr; i++)
		for (unsigned j = i; j > 0 && strcmp(run->thr[j - 1].metric, run->thr[j].metric) > 0; j--) {
			struct load_threshold t = run->thr[j];
			run->thr[j] = run->thr[j - 1];
			run->thr[j - 1] = t;
		}
	return 0;
}


int
load_conf_top(struct load_run *run, int idx, struct load_conf *c)
{
	lua_State *L = run->L;
	static const char *const fields[] = { "duration",   "shards",	  "connections", "verify",
					      "append_format", "policy", "sync", "setup",
					      "teardown",   "done",	  "scenarios",	 "thresholds",
					      "timeout",    "grace",	  "description", "name",
					      "max_tracked", NULL };
	if (conf_fields(run, idx, "script table", fields) != 0)
		return -1;
	uint64_t d = 0;
	int rc = conf_field_time(run, idx, "duration", UINT64_MAX, &d);
	if (rc < 0)
		return -1;
	if (run->o->duration_s > 0)
		d = (uint64_t)(run->o->duration_s * 1e9);
	else if (rc == 1)
		d = (uint64_t)(LOAD_DEFAULT_DURATION_S * 1e9);
	if (d == 0)
		return load_conf_fail(run, "duration must be above 0");
	run->duration = d;
	double v;
	rc = conf_field_number(run, idx, "connections", 1, LOAD_MAX_SLOTS, &v);
	if (rc < 0)
		return -1;
	if (rc == 0 && c->slots == 0)
		c->slots = (unsigned)v;
	rc = conf_field_number(run, idx, "shards", 1, 65536, &v);
	if (rc < 0)
		return -1;
	if (rc == 0 && c->shards == 0)
		c->shards = (uint32_t)v;
	lua_getfield(L, idx, "policy");
	if (!lua_isnil(L, -1) && c->policy == NULL) {
		if (lua_type(L, -1) != LUA_TSTRING) {
			lua_pop(L, 1);
			return load_conf_fail(run, "policy must be the path of a policy file");
		}
		snprintf(run->policy_path, sizeof(run->policy_path), "%s", lua_tostring(L, -1));
		c->policy = run->policy_path;
	}
	lua_pop(L, 1);
	rc = conf_field_number(run, idx, "max_tracked", 0, 1e12, &v);
	if (rc < 0)
		return -1;
	if (rc == 0 && run->o->max_tracked == 0)
		run->max_tracked = (uint64_t)v;
	uint64_t t;
	rc = conf_field_time(run, idx, "timeout", UINT64_MAX, &t);
	if (rc < 0)
		return -1;
	if (rc == 0 && c->timeout_s == 0)
		c->timeout_s = (double)t / 1e9;
	rc = conf_field_time(run, idx, "grace", UINT64_MAX, &t);
	if (rc < 0)
		return -1;
	if (rc == 0 && run->grace_s < 0)
		run->grace_s = (double)t / 1e9;
	lua_getfield(L, idx, "sync");
	if (!lua_isnil(L, -1) && c->sync < 0) {
		const char *sm = lua_tostring(L, -1);
		if (sm != NULL && strcmp(sm, "fsync") == 0)
			c->sync = STRATA_SYNC_FSYNC;
		else if (sm != NULL && strcmp(sm, "none") == 0)
			c->sync = STRATA_SYNC_NONE;
		else if (sm != NULL && strcmp(sm, "interval") == 0)
			c->sync = STRATA_SYNC_INTERVAL;
		else {
			lua_pop(L, 1);
			return load_conf_fail(run, "sync must be \"fsync\", \"none\" or \"interval\"");
		}
	}
	lua_pop(L, 1);
	lua_getfield(L, idx, "append_format");
	if (!lua_isnil(L, -1) && run->batch_format < 0) {
		const char *f = lua_tostring(L, -1);
		if (f != NULL && strcmp(f, "batch") == 0)
			run->batch_format = 1;
		else if (f != NULL && strcmp(f, "ndjson") == 0)
			run->batch_format = 0;
		else {
			lua_pop(L, 1);
			return load_conf_fail(run, "append_format must be \"ndjson\" or \"batch\"");
		}
	}
	lua_pop(L, 1);
	lua_getfield(L, idx, "verify");
	if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) {
		lua_pop(L, 1);
		return load_conf_fail(run, "verify must be true or false");
	}
	run->verify = lua_toboolean(L, -1);
	lua_pop(L, 1);
	static const char *const hooks[] = { "setup", "teardown", "done" };
	int *refs[] = { &run->setup_ref, &run->teardown_ref, &run->done_ref };
	for (int i = 0; i < 3; i++) {
		lua_getfield(L, idx, hooks[i]);
		if (lua_isnil(L, -1)) {
			lua_pop(L, 1);
			continue;
		}
		if (!lua_isfunction(L, -1)) {
			lua_pop(L, 1);
			return load_conf_fail(run, "%s must be a function", hooks[i]);
		}
		*refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
	}
	lua_getfield(L, idx, "thresholds");
	rc = lua_isnil(L, -1) ? 0 : conf_thresholds(run, lua_gettop(L));
	lua_pop(L, 1);
	if (rc != 0)
		return -1;
	lua_getfield(L, idx, "scenarios");
	int has = !lua_isnil(L, -1);
	lua_pop(L, 1);
	if (!has)
		return load_conf_fail(run, "the returned table needs scenarios = { name = {exec=, rate=|vus=|every=} }");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* wrk compatibility                                                         */
/* ------------------------------------------------------------------------ */

/** Push require("strata.load")[fn]; 0 or -1 with a message. */
static int
lr_module_fn(struct load_run *run, const char *fn)
{
	lua_State *L = run->L;
	lua_getglobal(L, "require");
	lua_pushstring(L, "strata.load");
	if (lua_pcall(L, 1, 1, 0) != 0) {
		load_conf_fail(run, "cannot load the strata.load module: %s", lua_tostring(L, -1));
		lua_pop(L, 1);
		return -1;
	}
	lua_getfield(L, -1, fn);
	lua_remove(L, -2);
	if (!lua_isfunction(L, -1)) {
		lua_pop(L, 1);
		return load_conf_fail(run, "strata.load.%s is missing (an old lua/strata/load.lua?)", fn);
	}
	return 0;
}

/** The global `wrk` table, before the script runs. */
int
load_wrk_define(struct load_run *run)
{
	lua_State *L = run->L;
	char scheme[16] = "http", host[256] = "embedded", port[16] = "0", path[1024] = "/";
	if (run->o->target != NULL) {
		CURLU *u = curl_url();
		char url[1200];
		snprintf(url, sizeof(url), "%s%s", strstr(run->o->target, "://") ? "" : "http://", run->o->target);
		char *part;
		if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
			if (u != NULL)
				curl_url_cleanup(u);
			return load_conf_fail(run, "bad target URL \"%s\"", run->o->target);
		}
		if (curl_url_get(u, CURLUPART_SCHEME, &part, 0) == CURLUE_OK) {
			snprintf(scheme, sizeof(scheme), "%s", part);
			curl_free(part);
		}
		if (curl_url_get(u, CURLUPART_HOST, &part, 0) == CURLUE_OK) {
			snprintf(host, sizeof(host), "%s", part);
			curl_free(part);
		}
		if (curl_url_get(u, CURLUPART_PORT, &part, CURLU_DEFAULT_PORT) == CURLUE_OK) {
			snprintf(port, sizeof(port), "%s", part);
			curl_free(part);
		}
		if (curl_url_get(u, CURLUPART_PATH, &part, 0) == CURLUE_OK) {
			snprintf(path, sizeof(path), "%s", part);
			curl_free(part);
		}
		curl_url_cleanup(u);
	}
	if (lr_module_fn(run, "wrk_table") != 0)
		return -1;
	lua_createtable(L, 0, 4);
	lua_pushstring(L, scheme);
	lua_setfield(L, -2, "scheme");
	lua_pushstring(L, host);
	lua_setfield(L, -2, "host");
	lua_pushstring(L, port);
	lua_setfield(L, -2, "port");
	lua_pushstring(L, path);
	lua_setfield(L, -2, "path");
	if (lua_pcall(L, 1, 1, 0) != 0) {
		load_conf_fail(run, "strata.load.wrk_table: %s", lua_tostring(L, -1));
		lua_pop(L, 1);
		return -1;
	}
	lua_setglobal(L, "wrk");
	return 0;
}

/** A wrk-style script: setup(thread) and init(args) now, then one scenario "wrk". */
int
load_wrk_prepare(struct load_run *run)
{
	lua_State *L = run->L;
	unsigned threads = run->o->threads ? run->o->threads : 1;
	lua_getglobal(L, "setup");
	int has_setup = lua_isfunction(L, -1);
	lua_pop(L, 1);
	lua_getglobal(L, "init");
	int has_init = lua_isfunction(L, -1);
	lua_pop(L, 1);
	for (unsigned i = 0; i < threads && has_setup; i++) {
		lua_getglobal(L, "setup");
		if (lr_module_fn(run, "wrk_thread") != 0)
			return -1;
		lua_rawgeti(L, LUA_REGISTRYINDEX, run->ctx_ref);
		lua_pushinteger(L, (lua_Integer)i + 1);
		if (lua_pcall(L, 2, 1, 0) != 0) {
			load_conf_fail(run, "wrk_thread: %s", lua_tostring(L, -1));
			return -1;
		}
		if (lua_pcall(L, 1, 0, 0) != 0) {
			load_conf_fail(run, "setup: %s", lua_tostring(L, -1));
			return -1;
		}
	}
	for (unsigned i = 0; i < threads && has_init; i++) {
		lua_getglobal(L, "init");
		lua_rawgeti(L, LUA_REGISTRYINDEX, run->ctx_ref);
		lua_getfield(L, -1, "args");
		lua_remove(L, -2);
		if (lua_pcall(L, 1, 0, 0) != 0) {
			load_conf_fail(run, "init: %s", lua_tostring(L, -1));
			return -1;
		}
	}
	struct load_scn *s = env.calloc(1, sizeof(*s));
	if (s == NULL)
		return load_conf_fail(run, "out of memory");
	run->scn[run->nscn++] = s;
	s->run = run;
	snprintf(s->name, sizeof(s->name), "wrk");
	s->exec_ref = s->pause_ref = LUA_NOREF;
	s->start = 0;
	s->end = run->duration;
	s->max_pending = LOAD_MAX_PENDING;
	if (load_stat_new("wrk", 1, &s->stat) != 0)
		return load_conf_fail(run, "%s", diag_last());
	if (lr_module_fn(run, "wrk_exec") != 0)
		return -1;
	s->exec_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_getglobal(L, "delay");
	int has_delay = lua_isfunction(L, -1);
	lua_pop(L, 1);
	if (has_delay) {
		if (lr_module_fn(run, "wrk_pause") != 0)
			return -1;
		s->pause_ref = luaL_ref(L, LUA_REGISTRYINDEX);
		s->pause_first = 1;
	}
	if (run->o->rate > 0) {
		s->model = LOAD_MODEL_OPEN;
		s->initial = run->o->rate;
		s->max_inflight = run->target->slots;
		snprintf(s->desc, sizeof(s->desc), "open %.6g/s", s->initial);
	} else {
		s->model = LOAD_MODEL_CLOSED;
		s->initial = run->target->slots;
		s->nvus = run->target->slots;
		snprintf(s->desc, sizeof(s->desc), "closed %u connections", s->nvus);
	}
	return 0;
}

static uint64_t
lr_error_count(const struct load_run *run, const char *kind)
{
	for (unsigned i = 0; i < run->errors.n; i++)
		if (strcmp(run->errors.kind[i], kind) == 0)
			return run->errors.count[i];
	return 0;
}

/** wrk's done(summary, latency, requests): latency in µs, requests per second per interval. */
void
load_wrk_done(struct load_run *run)
{
	lua_State *L = run->L;
	lua_getglobal(L, "done");
	if (!lua_isfunction(L, -1)) {
		lua_pop(L, 1);
		return;
	}
	struct load_stat *http = run->verb[LOAD_VERB_HTTP];
	double dur_us = run->t_end > run->t0 ? (double)(run->t_end - run->t0) / 1e3 : 0;
	lua_createtable(L, 0, 4);
	lua_pushnumber(L, dur_us);
	lua_setfield(L, -2, "duration");
	lua_pushnumber(L, (lua_Number)(http ? http->count : 0));
	lua_setfield(L, -2, "requests");
	lua_pushnumber(L, (lua_Number)run->resp_bytes);
	lua_setfield(L, -2, "bytes");
	lua_createtable(L, 0, 5);
	lua_pushnumber(L, (lua_Number)lr_error_count(run, "connect"));
	lua_setfield(L, -2, "connect");
	lua_pushnumber(L, (lua_Number)(lr_error_count(run, "read") + lr_error_count(run, "transport")));
	lua_setfield(L, -2, "read");
	lua_pushnumber(L, (lua_Number)lr_error_count(run, "write"));
	lua_setfield(L, -2, "write");
	lua_pushnumber(L, (lua_Number)(lr_error_count(run, "http_4xx") + lr_error_count(run, "http_5xx")));
	lua_setfield(L, -2, "status");
	lua_pushnumber(L, (lua_Number)lr_error_count(run, "timeout"));
	lua_setfield(L, -2, "timeout");
	lua_setfield(L, -2, "errors");
	struct hist *empty = NULL;
	if (http == NULL && hist_new(LOAD_HIST_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS, &empty) != 0) {
		lua_pop(L, 2);
		return;
	}
	load_hist_push(L, http ? http->lat : empty, 1e3);
	if (hist_new(1, 1000000000ull, 3, &run->wrk_rate) == 0 && http != NULL) {
		double ival = (double)run->interval / 1e9;
		for (size_t i = 0; i < http->nseries; i++) {
			double dt = i == 0 ? http->series[0].t : http->series[i].t - http->series[i - 1].t;
			if (dt <= 0)
				dt = ival;
			hist_record(run->wrk_rate, (uint64_t)((double)http->series[i].count / dt + 0.5));
		}
	}
	if (run->wrk_rate != NULL)
		load_hist_push(L, run->wrk_rate, 1);
	else
		lua_pushnil(L);
	if (lua_pcall(L, 3, 0, 0) != 0) {
		fprintf(stderr, "strata load: %s: done: %s\n", run->script, lua_tostring(L, -1));
		lua_pop(L, 1);
		load_errors_add(&run->errors, "script", "done() raised");
		run->script_errors++;
	}
	hist_delete(empty);
}

