/*
 * load_core.c — the lower layer of `strata load`, what every other file of node/load
 * needs and nothing above it: verb names, the clock, a request's life (reset, failure
 * record, free list), the slots towards the target (submit, queue, completion), the
 * run's log line, a scenario's window, and histogram objects for Lua. It calls nothing
 * above it: a target completes a request through r->done, and the runner's part of a
 * completion arrives through r->on_complete (for verbs, run->verb_done).
 *
 * Loop thread only.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/env.h"
#include "load_core.h"

/** Requests kept on the free list; more are freed. */
#define LOAD_FREE_REQS 4096u
/** A request whose buffers grew above this is freed rather than kept. */
#define LOAD_REQ_KEEP_BYTES (1u << 20)

/* ------------------------------------------------------------------------ */
/* Names, the clock, a request's life                                       */
/* ------------------------------------------------------------------------ */

static const char *const load_verb_names[] = {
	[LOAD_VERB_APPEND] = "append", [LOAD_VERB_GET] = "get",	      [LOAD_VERB_SCAN] = "scan",
	[LOAD_VERB_SEAL] = "seal",     [LOAD_VERB_MERGE] = "merge_wal", [LOAD_VERB_POLICY] = "put_policy",
	[LOAD_VERB_GET_POLICY] = "get_policy",
	[LOAD_VERB_STATS] = "stats",   [LOAD_VERB_HTTP] = "http",	      [LOAD_VERB_VERIFY] = "verify",
};

const char *
load_verb_name(int verb)
{
	if (verb < 0 || verb > LOAD_VERB_VERIFY)
		return "?";
	return load_verb_names[verb];
}

uint64_t
load_now_ns(void)
{
	return env.mono_ns();
}

void
load_req_reset(struct load_req *r)
{
	buf_reset(&r->key);
	buf_reset(&r->body);
	buf_reset(&r->keys);
	buf_reset(&r->rowmeta);
	buf_reset(&r->scan_prefix);
	buf_reset(&r->scan_start);
	buf_reset(&r->scan_end);
	buf_reset(&r->path);
	buf_reset(&r->headers);
	buf_reset(&r->resp);
	buf_reset(&r->resp_headers);
	env.free(r->rows);
	struct load_req keep = *r;
	memset(r, 0, sizeof(*r));
	r->key = keep.key;
	r->body = keep.body;
	r->keys = keep.keys;
	r->rowmeta = keep.rowmeta;
	r->scan_prefix = keep.scan_prefix;
	r->scan_start = keep.scan_start;
	r->scan_end = keep.scan_end;
	r->path = keep.path;
	r->headers = keep.headers;
	r->resp = keep.resp;
	r->resp_headers = keep.resp_headers;
}

void
load_req_destroy(struct load_req *r)
{
	buf_destroy(&r->key);
	buf_destroy(&r->body);
	buf_destroy(&r->keys);
	buf_destroy(&r->rowmeta);
	buf_destroy(&r->scan_prefix);
	buf_destroy(&r->scan_start);
	buf_destroy(&r->scan_end);
	buf_destroy(&r->path);
	buf_destroy(&r->headers);
	buf_destroy(&r->resp);
	buf_destroy(&r->resp_headers);
	env.free(r->rows);
	r->rows = NULL;
}

void
load_req_fail(struct load_req *r, int fail, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
	/* One line: reply bodies quoted in messages end with newlines. */
	size_t n = strlen(r->errmsg);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)r->errmsg[i] < 0x20)
			r->errmsg[i] = ' ';
	while (n > 0 && r->errmsg[n - 1] == ' ')
		r->errmsg[--n] = '\0';
	r->fail = fail;
}

static double
lr_elapsed_s(const struct load_run *run)
{
	if (run->t0 == 0)
		return 0;
	return (double)(load_now_ns() - run->t0) / 1e9;
}

void
load_run_log(struct load_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void
load_run_log(struct load_run *run, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[%7.2fs] %s\n", lr_elapsed_s(run), msg);
}

double
load_scn_seconds(const struct load_run *run, const struct load_scn *s)
{
	uint64_t ran = run->t_end > run->t0 ? run->t_end - run->t0 : 0;
	uint64_t end = s->end < ran ? s->end : ran;
	return end > s->start ? (double)(end - s->start) / 1e9 : 0;
}

/* ------------------------------------------------------------------------ */
/* Requests and target slots                                                */
/* ------------------------------------------------------------------------ */

struct load_req *
load_run_req_get(struct load_run *run)
{
	struct load_req *r = run->free_reqs;
	if (r != NULL) {
		run->free_reqs = r->next;
		run->nfree--;
		r->next = NULL;
		return r;
	}
	return env.calloc(1, sizeof(*r));
}

void
load_run_req_put(struct load_run *run, struct load_req *r)
{
	size_t big = r->body.cap + r->resp.cap + r->keys.cap + r->rowmeta.cap;
	if (run->nfree >= LOAD_FREE_REQS || big > LOAD_REQ_KEEP_BYTES) {
		load_req_destroy(r);
		env.free(r);
		return;
	}
	load_req_reset(r);
	r->next = run->free_reqs;
	run->free_reqs = r;
	run->nfree++;
}

struct load_req *
load_run_waitq_pop(struct load_run *run)
{
	struct load_req *r = run->waitq;
	if (r == NULL)
		return NULL;
	run->waitq = r->next;
	if (run->waitq == NULL)
		run->waitq_tail = NULL;
	r->next = NULL;
	run->waiting--;
	return r;
}

static void
lr_req_done(struct load_req *r)
{
	struct load_run *run = r->run;
	if (run->inflight > 0)
		run->inflight--;
	while (!run->cancelling && run->waitq != NULL && run->inflight < run->target->slots) {
		struct load_req *w = load_run_waitq_pop(run);
		run->inflight++;
		run->target->submit(run->target, w);
	}
	r->on_complete(r);
}

/** Hand r to the target now, or queue it for the next free slot. */
void
load_run_submit(struct load_run *run, struct load_req *r, void (*on_complete)(struct load_req *), void *ctx)
{
	r->run = run;
	r->done = lr_req_done;
	r->on_complete = on_complete;
	r->ctx = ctx;
	r->next = NULL;
	if (run->inflight < run->target->slots && run->waitq == NULL) {
		run->inflight++;
		run->target->submit(run->target, r);
		return;
	}
	if (run->waitq_tail != NULL)
		run->waitq_tail->next = r;
	else
		run->waitq = r;
	run->waitq_tail = r;
	run->waiting++;
}

/* ------------------------------------------------------------------------ */
/* Histogram objects (ctx:hist, wrk's done(summary, latency, requests))      */
/* ------------------------------------------------------------------------ */

#define LOAD_HIST_MT "strata.load.hist"

/** A histogram as seen from Lua. */
struct load_hist_ud {
	/** The histogram (owned by the run, valid while the Lua state lives). */
	const struct hist *h;
	/** Recorded units per reported unit (1e6: report ms of ns values). */
	double unit;
};

static struct load_hist_ud *
l_hist_ud(lua_State *L)
{
	return luaL_checkudata(L, 1, LOAD_HIST_MT);
}

static double
l_hist_ud_stdev(const struct load_hist_ud *u)
{
	uint64_t n = hist_count(u->h);
	if (n < 2)
		return 0;
	double mean = hist_mean(u->h), acc = 0;
	struct hist_iter it;
	struct hist_bucket b;
	hist_iter_init(&it, u->h);
	while (hist_iter_next(&it, &b)) {
		double mid = ((double)b.lo + (double)b.hi) / 2 - mean;
		acc += mid * mid * (double)b.count;
	}
	return sqrt(acc / (double)(n - 1)) / u->unit;
}

/* h:percentile(p) -> value */
static int
l_hist_percentile(lua_State *L)
{
	struct load_hist_ud *u = l_hist_ud(L);
	lua_Number p = luaL_checknumber(L, 2);
	if (!(p >= 0 && p <= 100))
		return luaL_error(L, "percentile must be 0..100");
	lua_pushnumber(L, (double)hist_percentile(u->h, p) / u->unit);
	return 1;
}

/* h:count_over(x) -> values recorded above x (in the histogram's unit) */
static int
l_hist_count_over(lua_State *L)
{
	struct load_hist_ud *u = l_hist_ud(L);
	lua_Number x = luaL_checknumber(L, 2);
	if (!(x >= 0))
		return luaL_error(L, "count_over needs a non-negative value");
	double raw = x * u->unit;
	uint64_t v = raw >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)raw;
	lua_pushnumber(L, (lua_Number)(hist_count(u->h) - hist_count_le(u->h, v)));
	return 1;
}

static int
l_hist_index(lua_State *L)
{
	struct load_hist_ud *u = l_hist_ud(L);
	if (lua_type(L, 2) == LUA_TNUMBER) {
		lua_Number want = lua_tonumber(L, 2);
		struct hist_iter it;
		struct hist_bucket b;
		hist_iter_init(&it, u->h);
		lua_Number i = 0;
		while (hist_iter_next(&it, &b)) {
			if (++i == want) {
				lua_createtable(L, 0, 2);
				lua_pushnumber(L, (double)b.hi / u->unit);
				lua_setfield(L, -2, "value");
				lua_pushnumber(L, (lua_Number)b.count);
				lua_setfield(L, -2, "count");
				return 1;
			}
		}
		lua_pushnil(L);
		return 1;
	}
	const char *k = luaL_checkstring(L, 2);
	if (strcmp(k, "min") == 0)
		lua_pushnumber(L, (double)hist_min(u->h) / u->unit);
	else if (strcmp(k, "max") == 0)
		lua_pushnumber(L, (double)hist_max(u->h) / u->unit);
	else if (strcmp(k, "mean") == 0)
		lua_pushnumber(L, hist_mean(u->h) / u->unit);
	else if (strcmp(k, "stdev") == 0)
		lua_pushnumber(L, l_hist_ud_stdev(u));
	else if (strcmp(k, "count") == 0)
		lua_pushnumber(L, (lua_Number)hist_count(u->h));
	else if (strcmp(k, "percentile") == 0)
		lua_pushcfunction(L, l_hist_percentile);
	else if (strcmp(k, "count_over") == 0)
		lua_pushcfunction(L, l_hist_count_over);
	else
		lua_pushnil(L);
	return 1;
}

static int
l_hist_len(lua_State *L)
{
	struct load_hist_ud *u = l_hist_ud(L);
	struct hist_iter it;
	struct hist_bucket b;
	hist_iter_init(&it, u->h);
	lua_Number n = 0;
	while (hist_iter_next(&it, &b))
		n++;
	lua_pushnumber(L, n);
	return 1;
}

void
load_hist_push(lua_State *L, const struct hist *h, double unit)
{
	struct load_hist_ud *u = lua_newuserdata(L, sizeof(*u));
	u->h = h;
	u->unit = unit;
	luaL_getmetatable(L, LOAD_HIST_MT);
	lua_setmetatable(L, -2);
}

void
load_hist_register(lua_State *L)
{
	luaL_newmetatable(L, LOAD_HIST_MT);
	lua_pushcfunction(L, l_hist_index);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, l_hist_len);
	lua_setfield(L, -2, "__len");
	lua_pop(L, 1);
}
