/*
 * load_run.c — the runner of `strata load`: slot accounting towards the target, the
 * coroutines of iterations, setup and teardown, the scheduling of scenarios (open
 * and closed models, stages), verification, the phases of a run (setup,
 * scenarios, drain, teardown, verify, report) and load_main. The verbs bound to
 * ctx are in load_verb.c, the script's configuration and wrk hooks in load_conf.c,
 * requests, target slots and the log line in load_core.c: this file calls them all,
 * and none calls back into it but through run->verb_done, run->stop and r->on_complete.
 *
 * Everything here runs on the loop thread. A coroutine is resumed only from a
 * loop callback (a timer, a completion), never from inside another resume.
 */
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "load_core.h"

/** Closed-model VU ramp: how often the VU target is re-evaluated, seconds. */
#define LOAD_RAMP_TICK_S 0.1

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static void lr_kick(struct load_run *run);
static void iter_resume(struct load_iter *it, int nargs);

/** The stat of a verb over all scenarios, created on first use; NULL on ENOMEM. */
static struct load_stat *
lr_verb_stat(struct load_run *run, int verb)
{
	if (run->verb[verb] == NULL)
		load_stat_new(load_verb_name(verb), 1, &run->verb[verb]);
	return run->verb[verb];
}

static struct load_stat *
scn_verb_stat(struct load_scn *s, int verb)
{
	if (s->verb[verb] == NULL) {
		char name[LOAD_NAME_MAX + 16];
		snprintf(name, sizeof(name), "%s.%s", s->name, load_verb_name(verb));
		load_stat_new(name, 0, &s->verb[verb]);
	}
	return s->verb[verb];
}

/* ------------------------------------------------------------------------ */
/* Requests and target slots                                                 */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Coroutines                                                                */
/* ------------------------------------------------------------------------ */

static void
iter_unlink(struct load_iter *it)
{
	struct load_run *run = it->run;
	if (it->prev == NULL && it->next == NULL && run->live != it)
		return;
	if (it->prev != NULL)
		it->prev->next = it->next;
	else
		run->live = it->next;
	if (it->next != NULL)
		it->next->prev = it->prev;
	it->prev = it->next = NULL;
	run->nlive--;
}

static void
iter_free(struct load_iter *it)
{
	struct load_run *run = it->run;
	iter_unlink(it);
	if (it->sleeping)
		ev_timer_stop(run->loop, &it->sleep);
	if (it->ref != LUA_NOREF)
		luaL_unref(run->L, LUA_REGISTRYINDEX, it->ref);
	env.free(it);
}

static void
iter_sleep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_iter *it = w->data;
	it->sleeping = 0;
	iter_resume(it, 0);
}

static struct load_iter *
iter_new(struct load_run *run, int kind, struct load_scn *scn, struct load_vu *vu)
{
	struct load_iter *it = env.calloc(1, sizeof(*it));
	if (it == NULL)
		return NULL;
	it->run = run;
	it->kind = kind;
	it->scn = scn;
	it->vu = vu;
	it->stage = -1;
	it->co = lua_newthread(run->L);
	it->ref = luaL_ref(run->L, LUA_REGISTRYINDEX);
	ev_timer_init(&it->sleep, iter_sleep_cb, 0., 0.);
	it->sleep.data = it;
	it->next = run->live;
	if (run->live != NULL)
		run->live->prev = it;
	run->live = it;
	run->nlive++;
	return it;
}

static void scn_end(struct load_scn *s);
static void vu_schedule(struct load_vu *vu, int first);

/** Print a script error with its traceback, once per run. */
static void
iter_report_error(struct load_iter *it, const char *msg)
{
	struct load_run *run = it->run;
	if (run->traceback_printed)
		return;
	run->traceback_printed = 1;
	luaL_traceback(run->L, it->co, msg, 0);
	const char *where = it->kind == LOAD_ITER_SETUP ? "setup"
			    : it->kind == LOAD_ITER_TEARDOWN ? "teardown"
							       : it->scn->name;
	load_run_log(run, "script error in %s: %s", where, lua_tostring(run->L, -1));
	lua_pop(run->L, 1);
}

/** A coroutine returned (msg NULL) or raised msg. */
static void
iter_finish(struct load_iter *it, const char *msg)
{
	struct load_run *run = it->run;
	uint64_t now = load_now_ns();
	if (msg != NULL) {
		iter_report_error(it, msg);
		if (it->verb_errors == 0 || it->kind != LOAD_ITER_SCENARIO) {
			run->script_errors++;
			load_errors_add(&run->errors, "script", msg);
		}
	}
	if (it->kind == LOAD_ITER_SCENARIO) {
		struct load_scn *s = it->scn;
		int failed = msg != NULL || it->verb_errors > 0;
		uint64_t raw = now - it->started;
		raw = raw > it->queued_ns ? raw - it->queued_ns : 0;
		s->inflight--;
		load_stat_record(s->stat, now - it->intended, raw, it->rows, failed);
		if (it->stage >= 0 && s->stages[it->stage].stat != NULL)
			load_stat_record(s->stages[it->stage].stat, now - it->intended, raw, it->rows, failed);
		if (it->vu != NULL) {
			it->vu->busy = 0;
			it->vu->iterations++;
		}
		if (s->max_iterations > 0 && s->started >= s->max_iterations && s->inflight == 0)
			scn_end(s);
		else if (it->vu != NULL)
			vu_schedule(it->vu, 0);
		else if (s->pending_len > 0 && !ev_is_active(&s->drain))
			ev_timer_start(run->loop, &s->drain);
	} else if (it->kind == LOAD_ITER_SETUP) {
		if (msg != NULL) {
			run->setup_failed = 1;
		} else if (lua_gettop(it->co) >= 1) {
			lua_settop(it->co, 1);
			lua_xmove(it->co, run->L, 1);
			lua_rawgeti(run->L, LUA_REGISTRYINDEX, run->ctx_ref);
			lua_pushvalue(run->L, -2);
			lua_setfield(run->L, -2, "data");
			lua_pop(run->L, 1);
			run->data_ref = luaL_ref(run->L, LUA_REGISTRYINDEX);
		}
	}
	iter_free(it);
	lr_kick(run);
}

static void
iter_resume(struct load_iter *it, int nargs)
{
	struct load_run *run = it->run;
	struct load_iter *prev = run->cur;
	run->cur = it;
	int st = lua_resume(it->co, nargs);
	run->cur = prev;
	if (st == LUA_YIELD) {
		if (it->req != NULL || it->sleeping)
			return;
		iter_finish(it, "coroutine.yield() outside a ctx verb: an iteration may only wait in ctx verbs "
				"and ctx:sleep");
		return;
	}
	if (st == 0) {
		iter_finish(it, NULL);
		return;
	}
	const char *msg = lua_tostring(it->co, -1);
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", msg != NULL ? msg : "(error object is not a string)");
	iter_finish(it, buf);
}

/** Completion of a verb's request (run->verb_done): record it and resume the coroutine with
 *  its results. */
static void
iter_req_done(struct load_req *r)
{
	struct load_iter *it = r->ctx;
	struct load_run *run = it->run;
	it->req = NULL;
	if (r->fail == LOAD_FAIL_INTERRUPTED || it->abandoned || run->phase == LOAD_PHASE_DONE) {
		if (r->verb == LOAD_VERB_APPEND)
			load_track_append(run, r, !it->abandoned ? 0 : load_classify(r));
		if (it->kind == LOAD_ITER_SCENARIO) {
			run->interrupted++;
			it->scn->inflight--;
		}
		load_run_req_put(run, r);
		iter_free(it);
		lr_kick(run);
		return;
	}
	if (r->t_send > it->call_ns)
		it->queued_ns += r->t_send - it->call_ns;
	int ok = load_classify(r);
	lua_State *co = it->co;
	int nres = 0;
	if (ok) {
		nres = load_push_ok(co, r);
		if (nres < 0) {
			ok = 0;
			r->fail = LOAD_FAIL_RESPONSE;
			nres = 0;
		}
	}
	if (r->verb == LOAD_VERB_APPEND)
		load_track_append(run, r, ok);
	/* A busy shard is the node asking to be asked again: counted apart, not an error. */
	int busy = !ok && r->fail == LOAD_FAIL_BUSY;
	uint64_t rows = ok && r->verb == LOAD_VERB_APPEND ? r->nrows : 0;
	/* Raw HTTP hands every response to the script, and counts 4xx/5xx as wrk does. */
	int status_error = ok && r->verb == LOAD_VERB_HTTP && r->status >= 400;
	if (status_error) {
		char msg[300];
		snprintf(msg, sizeof(msg), "%s %s: status %d", r->method, (const char *)r->path.data, r->status);
		load_errors_add(&run->errors, r->status >= 500 ? "http_5xx" : "http_4xx", msg);
	}
	if (it->kind == LOAD_ITER_SCENARIO) {
		run->resp_bytes += r->resp.len;
		uint64_t lateness = it->started - it->intended;
		uint64_t from = it->call_ns - lateness;
		uint64_t corrected = r->t_done > from ? r->t_done - from : 0;
		uint64_t raw = r->t_done > r->t_send ? r->t_done - r->t_send : 0;
		struct load_stat *vs = lr_verb_stat(run, r->verb);
		if (vs != NULL) {
			load_stat_record(vs, corrected, raw, rows, (!ok && !busy) || status_error);
			vs->busy += (uint64_t)busy;
		}
		struct load_stat *ss = scn_verb_stat(it->scn, r->verb);
		if (ss != NULL) {
			load_stat_record(ss, corrected, raw, rows, (!ok && !busy) || status_error);
			ss->busy += (uint64_t)busy;
		}
		it->scn->requests++;
		run->requests++;
		run->rows += rows;
		it->rows += rows;
	}
	if (busy) {
		load_errors_add(&run->busy, load_verb_name(r->verb), r->errmsg);
		lua_pushnil(co);
		lua_pushstring(co, r->errmsg);
		lua_pushstring(co, "busy");
		if (r->has_retry_after)
			lua_pushnumber(co, r->retry_after_s);
		else
			lua_pushnil(co);
		nres = 4;
	} else if (!ok) {
		it->verb_errors++;
		load_errors_add(&run->errors, load_fail_kind(r), r->errmsg);
		lua_pushnil(co);
		lua_pushstring(co, r->errmsg);
		lua_pushstring(co, load_fail_kind(r));
		nres = 3;
	}
	load_run_req_put(run, r);
	iter_resume(it, nres);
}

/* ------------------------------------------------------------------------ */
/* Scheduling                                                                */
/* ------------------------------------------------------------------------ */

/** Arrivals (open) from the scenario's start until rel ns: integral of the rate. */
static double
scn_tail_rate(const struct load_scn *s)
{
	return s->nstages ? s->stages[s->nstages - 1].to : s->initial;
}

/** Time (ns after the scenario's start) of arrival k (from 0); UINT64_MAX when there is none. */
static uint64_t
scn_arrival_at(const struct load_scn *s, uint64_t k)
{
	double kk = (double)k;
	for (unsigned i = 0; i < s->nstages; i++) {
		const struct load_stage *st = &s->stages[i];
		double d = (double)st->dur / 1e9;
		double nend = st->n0 + (st->from + st->to) / 2 * d;
		if (d <= 0 || kk >= nend)
			continue;
		double c = kk - st->n0;
		if (c < 0)
			c = 0;
		double a = (st->to - st->from) / (2 * d), b = st->from, x;
		if (fabs(a) < 1e-12)
			x = b > 0 ? c / b : 0;
		else
			x = 2 * c / (b + sqrt(b * b + 4 * a * c > 0 ? b * b + 4 * a * c : 0));
		if (!(x >= 0))
			x = 0;
		if (x > d)
			x = d;
		return st->t0 + (uint64_t)(x * 1e9);
	}
	uint64_t t_tail = 0;
	double n_tail = 0;
	if (s->nstages > 0) {
		const struct load_stage *st = &s->stages[s->nstages - 1];
		t_tail = st->t0 + st->dur;
		n_tail = st->n0 + (st->from + st->to) / 2 * ((double)st->dur / 1e9);
	}
	double rate = scn_tail_rate(s);
	if (rate <= 0)
		return UINT64_MAX;
	double x = (kk - n_tail) / rate;
	if (x < 0)
		x = 0;
	double t = (double)t_tail + x * 1e9;
	if (t >= 1.8e19)
		return UINT64_MAX;
	return (uint64_t)t;
}

/** Rate (open) or VUs (closed) at rel ns after the scenario's start. */
static double
scn_level_at(const struct load_scn *s, uint64_t rel)
{
	for (unsigned i = 0; i < s->nstages; i++) {
		const struct load_stage *st = &s->stages[i];
		if (rel < st->t0 + st->dur) {
			if (st->dur == 0)
				return st->to;
			double f = (double)(rel - st->t0) / (double)st->dur;
			return st->from + (st->to - st->from) * f;
		}
	}
	return scn_tail_rate(s);
}

/** Stage holding rel, or -1 after the last. */
static int
scn_stage_of(const struct load_scn *s, uint64_t rel)
{
	for (unsigned i = 0; i < s->nstages; i++)
		if (rel >= s->stages[i].t0 && rel < s->stages[i].t0 + s->stages[i].dur)
			return (int)i;
	return -1;
}

/** Start one iteration of s intended at `intended` (absolute ns). */
static void
iter_start(struct load_scn *s, struct load_vu *vu, uint64_t intended)
{
	struct load_run *run = s->run;
	struct load_iter *it = iter_new(run, LOAD_ITER_SCENARIO, s, vu);
	if (it == NULL) {
		load_errors_add(&run->errors, "script", "out of memory starting an iteration");
		run->script_errors++;
		return;
	}
	uint64_t now = load_now_ns();
	it->intended = intended < now ? intended : now;
	it->started = now;
	it->n = ++s->started;
	uint64_t base = run->t0 + s->start;
	it->stage = scn_stage_of(s, it->intended > base ? it->intended - base : 0);
	s->inflight++;
	if (vu != NULL)
		vu->busy = 1;
	lua_State *co = it->co;
	lua_rawgeti(co, LUA_REGISTRYINDEX, s->exec_ref);
	lua_rawgeti(co, LUA_REGISTRYINDEX, run->ctx_ref);
	lua_pushnumber(co, (lua_Number)it->n);
	iter_resume(it, 2);
}

/** One open-model arrival intended at t (absolute ns). */
static void
scn_arrive(struct load_scn *s, uint64_t t)
{
	if (s->inflight < s->max_inflight && s->pending_len == 0) {
		iter_start(s, NULL, t);
		return;
	}
	if (s->drop || s->pending_len >= s->max_pending) {
		s->dropped++;
		return;
	}
	if (s->pending_len == s->pending_cap) {
		uint64_t ncap = s->pending_cap ? s->pending_cap * 2 : 1024;
		if (ncap > s->max_pending)
			ncap = s->max_pending;
		uint64_t *n = env.malloc(ncap * sizeof(*n));
		if (n == NULL) {
			s->dropped++;
			return;
		}
		for (uint64_t i = 0; i < s->pending_len; i++)
			n[i] = s->pending[(s->pending_head + i) % s->pending_cap];
		env.free(s->pending);
		s->pending = n;
		s->pending_cap = ncap;
		s->pending_head = 0;
	}
	s->pending[(s->pending_head + s->pending_len) % s->pending_cap] = t;
	s->pending_len++;
}

static void
scn_arrival_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_scn *s = w->data;
	struct load_run *run = s->run;
	if (s->ended)
		return;
	uint64_t now = load_now_ns();
	uint64_t base = run->t0 + s->start, end = run->t0 + s->end;
	for (;;) {
		if (s->ended || (s->max_iterations > 0 && s->arrivals >= s->max_iterations))
			return;
		uint64_t rel = scn_arrival_at(s, s->arrivals);
		if (rel == UINT64_MAX || base + rel >= end)
			return;
		if (base + rel > now) {
			ev_timer_set(&s->timer, (double)(base + rel - now) / 1e9, 0.);
			ev_timer_start(loop, &s->timer);
			return;
		}
		s->arrivals++;
		scn_arrive(s, base + rel);
	}
}

/** Start queued arrivals while there is room. */
static void
scn_drain_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_scn *s = w->data;
	while (!s->ended && s->pending_len > 0 && s->inflight < s->max_inflight) {
		uint64_t t = s->pending[s->pending_head];
		s->pending_head = (s->pending_head + 1) % s->pending_cap;
		s->pending_len--;
		iter_start(s, NULL, t);
	}
}

/** Seconds a VU pauses before its next iteration. */
static double
vu_pause(struct load_scn *s, int first)
{
	struct load_run *run = s->run;
	if (s->pause_ref != LUA_NOREF && (!first || s->pause_first)) {
		lua_State *L = run->L;
		lua_rawgeti(L, LUA_REGISTRYINDEX, s->pause_ref);
		if (lua_pcall(L, 0, 1, 0) != 0) {
			const char *msg = lua_tostring(L, -1);
			load_run_log(run, "script error in %s pause: %s", s->name, msg ? msg : "?");
			load_errors_add(&run->errors, "script", msg);
			run->script_errors++;
			lua_pop(L, 1);
			return 0;
		}
		double p = lua_tonumber(L, -1);
		lua_pop(L, 1);
		if (!(p > 0))
			return 0;
		return p > 3600 ? 3600 : p;
	}
	return first ? 0 : s->pause_s;
}

static void
vu_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_vu *vu = w->data;
	struct load_scn *s = vu->scn;
	vu->waiting = 0;
	if (!vu->active || s->ended || s->run->phase != LOAD_PHASE_RUN)
		return;
	if (s->max_iterations > 0 && s->started >= s->max_iterations)
		return;
	iter_start(s, vu, load_now_ns());
}

/** Allocate the VUs of a closed-model scenario (s->nvus of them, as the configuration says). */
static int
scn_init_vus(struct load_scn *s)
{
	s->vus = env.calloc(s->nvus ? s->nvus : 1, sizeof(*s->vus));
	if (s->vus == NULL)
		return diag_set(STRATA_ENOMEM, "load: out of memory for %u VUs", s->nvus);
	for (unsigned i = 0; i < s->nvus; i++) {
		s->vus[i].scn = s;
		s->vus[i].id = i;
		ev_timer_init(&s->vus[i].timer, vu_timer_cb, 0., 0.);
		s->vus[i].timer.data = &s->vus[i];
	}
	return 0;
}

static void
vu_schedule(struct load_vu *vu, int first)
{
	struct load_scn *s = vu->scn;
	if (!vu->active || vu->busy || vu->waiting || s->ended || s->run->phase != LOAD_PHASE_RUN)
		return;
	ev_timer_set(&vu->timer, vu_pause(s, first), 0.);
	ev_timer_start(s->run->loop, &vu->timer);
	vu->waiting = 1;
}

static void
scn_set_vus(struct load_scn *s, unsigned target)
{
	for (unsigned i = 0; i < s->nvus; i++) {
		struct load_vu *vu = &s->vus[i];
		if (i < target && !vu->active) {
			vu->active = 1;
			vu_schedule(vu, vu->iterations == 0);
		} else if (i >= target && vu->active) {
			vu->active = 0;
			if (vu->waiting) {
				ev_timer_stop(s->run->loop, &vu->timer);
				vu->waiting = 0;
			}
		}
	}
}

static void
scn_ramp_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_scn *s = w->data;
	uint64_t base = s->run->t0 + s->start, now = load_now_ns();
	double v = scn_level_at(s, now > base ? now - base : 0);
	scn_set_vus(s, (unsigned)(v + 0.5));
}

static void
scn_begin(struct load_scn *s)
{
	struct load_run *run = s->run;
	s->begun = 1;
	if (s->model == LOAD_MODEL_OPEN) {
		ev_timer_init(&s->timer, scn_arrival_cb, 0., 0.);
		s->timer.data = s;
		ev_timer_start(run->loop, &s->timer);
	} else {
		scn_set_vus(s, (unsigned)(scn_level_at(s, 0) + 0.5));
		if (s->nstages > 0) {
			ev_timer_init(&s->timer, scn_ramp_cb, LOAD_RAMP_TICK_S, LOAD_RAMP_TICK_S);
			s->timer.data = s;
			ev_timer_start(run->loop, &s->timer);
		}
	}
}

static void
scn_end(struct load_scn *s)
{
	struct load_run *run = s->run;
	if (s->ended)
		return;
	s->ended = 1;
	ev_timer_stop(run->loop, &s->timer);
	ev_timer_stop(run->loop, &s->edge);
	ev_timer_stop(run->loop, &s->drain);
	s->dropped += s->pending_len;
	s->pending_len = 0;
	for (unsigned i = 0; i < s->nvus; i++) {
		s->vus[i].active = 0;
		if (s->vus[i].waiting) {
			ev_timer_stop(run->loop, &s->vus[i].timer);
			s->vus[i].waiting = 0;
		}
	}
	run->nended++;
	lr_kick(run);
}

/** The scenario's start, then its end. */
static void
scn_edge_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_scn *s = w->data;
	struct load_run *run = s->run;
	if (!s->begun) {
		scn_begin(s);
		if (s->ended)
			return;
		uint64_t end = run->t0 + s->end, now = load_now_ns();
		ev_timer_set(&s->edge, end > now ? (double)(end - now) / 1e9 : 0., 0.);
		ev_timer_start(loop, &s->edge);
		return;
	}
	scn_end(s);
}

/* ------------------------------------------------------------------------ */
/* Phases                                                                    */
/* ------------------------------------------------------------------------ */

static void lr_advance(struct load_run *run);

static void
lr_kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	lr_advance(w->data);
}

static void
lr_kick(struct load_run *run)
{
	if (!ev_is_active(&run->kick)) {
		ev_timer_set(&run->kick, 0., 0.);
		ev_timer_start(run->loop, &run->kick);
	}
}

/** Start setup or teardown as a coroutine: fn(ctx [, data]). */
static void
lr_spawn(struct load_run *run, int kind, int fn_ref)
{
	struct load_iter *it = iter_new(run, kind, NULL, NULL);
	if (it == NULL) {
		load_errors_add(&run->errors, "script", "out of memory starting a coroutine");
		run->script_errors++;
		if (kind == LOAD_ITER_SETUP)
			run->setup_failed = 1;
		lr_kick(run);
		return;
	}
	it->intended = it->started = load_now_ns();
	lua_State *co = it->co;
	lua_rawgeti(co, LUA_REGISTRYINDEX, fn_ref);
	lua_rawgeti(co, LUA_REGISTRYINDEX, run->ctx_ref);
	int nargs = 1;
	if (kind == LOAD_ITER_TEARDOWN) {
		if (run->data_ref != LUA_NOREF)
			lua_rawgeti(co, LUA_REGISTRYINDEX, run->data_ref);
		else
			lua_pushnil(co);
		nargs = 2;
	}
	iter_resume(it, nargs);
}

/** Interrupt every request and coroutine still live. */
static void
lr_abandon(struct load_run *run)
{
	run->cancelling = 1;
	struct load_req *r;
	while ((r = load_run_waitq_pop(run)) != NULL) {
		load_req_fail(r, LOAD_FAIL_INTERRUPTED, "%s: interrupted before it was sent", load_verb_name(r->verb));
		r->t_send = r->t_done = load_now_ns();
		r->on_complete(r);
	}
	run->target->cancel_all(run->target);
	run->cancelling = 0;
	while (run->live != NULL) {
		struct load_iter *it = run->live;
		iter_unlink(it);
		if (it->req != NULL) {
			it->abandoned = 1;
			continue;
		}
		if (it->kind == LOAD_ITER_SCENARIO) {
			run->interrupted++;
			it->scn->inflight--;
		}
		iter_free(it);
	}
}

static void
lr_tick(struct load_run *run)
{
	uint64_t now = load_now_ns();
	double t = (double)(now - run->t0) / 1e9;
	for (unsigned i = 0; i < run->nscn; i++)
		load_stat_tick(run->scn[i]->stat, t);
	for (int v = 0; v < LOAD_VERB_COUNT; v++)
		if (run->verb[v] != NULL)
			load_stat_tick(run->verb[v], t);
	double dt = (double)(now - run->tick_ns) / 1e9;
	if (!run->o->quiet && dt > 0) {
		char line[2048];
		int off = snprintf(line, sizeof(line), "%8.0f req/s %9.0f rows/s  errors %llu  live %u  queued %llu",
				   (double)(run->requests - run->tick_requests) / dt,
				   (double)(run->rows - run->tick_rows) / dt, (unsigned long long)run->errors.total,
				   run->nlive, (unsigned long long)run->waiting);
		for (unsigned i = 0; i < run->nscn && off > 0 && (size_t)off < sizeof(line); i++) {
			struct load_stat *s = run->scn[i]->stat;
			if (s->nseries == 0 || s->series[s->nseries - 1].count == 0)
				continue;
			off += snprintf(line + off, sizeof(line) - (size_t)off, " | %s p99 %.2fms", s->name,
					(double)s->series[s->nseries - 1].p99 / 1e6);
		}
		load_run_log(run, "%s", line);
	}
	run->tick_requests = run->requests;
	run->tick_rows = run->rows;
	run->tick_errors = run->errors.total;
	run->tick_ns = now;
}

static void
lr_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	lr_tick(w->data);
}

static void
lr_end_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_run *run = w->data;
	for (unsigned i = 0; i < run->nscn; i++)
		scn_end(run->scn[i]);
}

static void
lr_grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct load_run *run = w->data;
	load_run_log(run, "grace period over: interrupting %u iterations still running", run->nlive);
	lr_abandon(run);
	lr_kick(run);
}

static void
lr_start_scenarios(struct load_run *run)
{
	run->t0 = load_now_ns();
	run->wall0 = env.wall_ns();
	run->tick_ns = run->t0;
	for (unsigned i = 0; i < run->nscn; i++) {
		struct load_scn *s = run->scn[i];
		ev_timer_init(&s->drain, scn_drain_cb, 0., 0.);
		s->drain.data = s;
		ev_timer_init(&s->edge, scn_edge_cb, (double)s->start / 1e9, 0.);
		s->edge.data = s;
		if (s->start >= run->duration || s->end <= s->start) {
			load_run_log(run, "scenario %s starts at %.3fs, after the run's end (%.3fs): skipped", s->name,
				(double)s->start / 1e9, (double)run->duration / 1e9);
			s->ended = 1;
			run->nended++;
			continue;
		}
		ev_timer_start(run->loop, &s->edge);
	}
	ev_timer_init(&run->end_timer, lr_end_cb, (double)run->duration / 1e9, 0.);
	run->end_timer.data = run;
	ev_timer_start(run->loop, &run->end_timer);
	ev_timer_init(&run->tick, lr_tick_cb, (double)run->interval / 1e9, (double)run->interval / 1e9);
	run->tick.data = run;
	ev_timer_start(run->loop, &run->tick);
}

static void verify_done(struct load_req *r);

static void
verify_fill(struct load_run *run)
{
	uint64_t cap = load_track_capacity(run->track);
	uint64_t max = 2ull * run->target->slots;
	while (run->verify_inflight < max && run->verify_next < cap && run->phase == LOAD_PHASE_VERIFY) {
		uint64_t i = run->verify_next++;
		uint32_t shard;
		const void *k;
		size_t kl;
		if (!load_track_entry(run->track, i, &shard, &k, &kl))
			continue;
		struct load_req *r = load_run_req_get(run);
		if (r == NULL || buf_append(&r->key, k, kl) != 0) {
			if (r != NULL)
				load_run_req_put(run, r);
			run->verify_errors++;
			load_errors_add(&run->errors, "verify", "out of memory for a read-back");
			continue;
		}
		r->verb = LOAD_VERB_VERIFY;
		r->shard = shard;
		r->track_idx = i;
		run->verify_inflight++;
		load_run_submit(run, r, verify_done, NULL);
	}
	if (run->verify_inflight == 0)
		lr_kick(run);
}

/** Printable form of a key for messages. */
static void
load_key_text(char *out, size_t len, const uint8_t *k, size_t kl)
{
	size_t o = 0;
	for (size_t i = 0; i < kl && o + 5 < len; i++) {
		if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\')
			out[o++] = (char)k[i];
		else
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", k[i]);
	}
	out[o] = '\0';
}

static void
verify_done(struct load_req *r)
{
	struct load_run *run = r->run;
	run->verify_inflight--;
	if (r->fail == LOAD_FAIL_INTERRUPTED || run->phase != LOAD_PHASE_VERIFY) {
		run->unverified++;
	} else if (r->fail == LOAD_FAIL_NONE && (r->status == 200 || r->status == 404)) {
		int c = load_track_check(run->track, r->track_idx, r->status == 200, r->resp.data, r->resp.len);
		run->verified++;
		if (c == 1 || c == 2) {
			if (c == 1)
				run->lost++;
			else
				run->mismatched++;
			for (int i = 0; i < 3; i++) {
				if (run->lost_sample[i][0] != '\0')
					continue;
				char kt[100];
				load_key_text(kt, sizeof(kt), r->key.data, r->key.len);
				snprintf(run->lost_sample[i], sizeof(run->lost_sample[i]), "shard %u key \"%s\": %s",
					 r->shard, kt, c == 1 ? "not found" : "different value");
				break;
			}
		} else if (c == 3) {
			run->uncertain++;
		}
		uint64_t lat = r->t_done > r->t_send ? r->t_done - r->t_send : 0;
		load_stat_record(run->verify_stat, lat, lat, 0, 0);
	} else {
		load_classify(r);
		run->verify_errors++;
		load_errors_add(&run->errors, "verify", r->errmsg);
	}
	load_run_req_put(run, r);
	verify_fill(run);
}

static void
lr_advance(struct load_run *run)
{
	for (;;) {
		switch (run->phase) {
		case LOAD_PHASE_INIT:
			run->phase = LOAD_PHASE_SETUP;
			if (run->setup_ref != LUA_NOREF) {
				lr_spawn(run, LOAD_ITER_SETUP, run->setup_ref);
				return;
			}
			break;
		case LOAD_PHASE_SETUP:
			if (run->abandon_phase == LOAD_PHASE_SETUP && run->nlive > 0)
				lr_abandon(run);
			if (run->nlive > 0)
				return;
			if (run->setup_failed || run->stopped) {
				if (run->setup_failed)
					load_run_log(run, "setup failed: no scenario runs");
				run->phase = LOAD_PHASE_DONE;
				break;
			}
			lr_start_scenarios(run);
			run->phase = LOAD_PHASE_RUN;
			break;
		case LOAD_PHASE_RUN:
			if (run->nended < run->nscn)
				return;
			run->phase = LOAD_PHASE_DRAIN;
			run->t_end = load_now_ns();
			ev_timer_stop(run->loop, &run->end_timer);
			if (run->nlive > 0) {
				double g = run->grace_s >= 0 ? run->grace_s : 10.0;
				ev_timer_init(&run->grace_timer, lr_grace_cb, g, 0.);
				run->grace_timer.data = run;
				ev_timer_start(run->loop, &run->grace_timer);
				return;
			}
			break;
		case LOAD_PHASE_DRAIN:
			if (run->nlive > 0)
				return;
			ev_timer_stop(run->loop, &run->grace_timer);
			ev_timer_stop(run->loop, &run->tick);
			/* The last, partial interval, unless too short for a meaningful rate. */
			if (load_now_ns() - run->tick_ns >= run->interval / 10)
				lr_tick(run);
			run->phase = LOAD_PHASE_TEARDOWN;
			if (run->teardown_ref != LUA_NOREF) {
				lr_spawn(run, LOAD_ITER_TEARDOWN, run->teardown_ref);
				return;
			}
			break;
		case LOAD_PHASE_TEARDOWN:
			if (run->abandon_phase == LOAD_PHASE_TEARDOWN && run->nlive > 0)
				lr_abandon(run);
			if (run->nlive > 0)
				return;
			run->phase = LOAD_PHASE_VERIFY;
			if (run->track != NULL && !run->stopped_twice) {
				load_run_log(run, "verifying %llu acknowledged keys",
					(unsigned long long)load_track_count(run->track));
				verify_fill(run);
				return;
			}
			break;
		case LOAD_PHASE_VERIFY:
			if (run->verify_inflight > 0 ||
			    (run->track != NULL && !run->stopped_twice &&
			     run->verify_next < load_track_capacity(run->track)))
				return;
			run->phase = LOAD_PHASE_DONE;
			break;
		case LOAD_PHASE_DONE:
			ev_break(run->loop, EVBREAK_ALL);
			return;
		}
	}
}

/** End the scenarios now (run->stop: ctx:stop, signals); teardown, verification and reports
 *  still run. */
static void
lr_stop(struct load_run *run, const char *why)
{
	if (run->stopped)
		return;
	run->stopped = 1;
	load_run_log(run, "stopping: %s", why);
	if (run->phase == LOAD_PHASE_SETUP || run->phase == LOAD_PHASE_TEARDOWN)
		run->abandon_phase = run->phase;
	if (run->phase == LOAD_PHASE_RUN)
		for (unsigned i = 0; i < run->nscn; i++)
			scn_end(run->scn[i]);
	lr_kick(run);
}

static void
lr_signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct load_run *run = w->data;
	if (!run->stopped) {
		run->stop_signal = w->signum;
		lr_stop(run, w->signum == SIGINT ? "interrupted (SIGINT); again to skip verification"
						  : "terminated (SIGTERM); again to skip verification");
		return;
	}
	if (!run->stopped_twice) {
		run->stopped_twice = 1;
		load_run_log(run, "interrupted again: abandoning what is in flight, skipping verification");
		run->abandon_phase = run->phase;
		if (run->phase == LOAD_PHASE_DRAIN || run->phase == LOAD_PHASE_VERIFY ||
		    run->phase == LOAD_PHASE_SETUP || run->phase == LOAD_PHASE_TEARDOWN)
			lr_abandon(run);
		lr_kick(run);
		return;
	}
	fprintf(stderr, "strata load: interrupted three times: exiting now\n");
	_exit(130);
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

static int
lr_metric_setf(struct load_metrics *m, double v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
lr_metric_setf(struct load_metrics *m, double v, const char *fmt, ...)
{
	char name[LOAD_NAME_MAX * 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	return load_metrics_set(m, name, v);
}

static void
lr_metrics_stat(struct load_metrics *m, const struct load_stat *s, double dur, int is_scn)
{
	lr_metric_setf(m, (double)s->count, "%s.%s", s->name, is_scn ? "iterations" : "requests");
	lr_metric_setf(m, (double)s->errors, "%s.errors", s->name);
	if (!is_scn)
		lr_metric_setf(m, (double)s->busy, "%s.busy", s->name);
	lr_metric_setf(m, (double)s->rows, "%s.rows", s->name);
	if (dur > 0) {
		lr_metric_setf(m, (double)s->count / dur, "%s.%s", s->name, is_scn ? "iterations_per_s" : "rps");
		lr_metric_setf(m, (double)s->rows / dur, "%s.rows_per_s", s->name);
	}
	load_metrics_add_hist(m, s->name, s->lat);
	char un[LOAD_NAME_MAX + 16];
	snprintf(un, sizeof(un), "%s.uncorrected", s->name);
	load_metrics_add_hist(m, un, s->raw);
}

static void
lr_build_metrics(struct load_run *run)
{
	struct load_metrics *m = &run->metrics;
	double dur = run->t_end > run->t0 ? (double)(run->t_end - run->t0) / 1e9 : 0;
	load_metrics_set(m, "duration_s", dur);
	load_metrics_set(m, "requests", (double)run->requests);
	load_metrics_set(m, "rows", (double)run->rows);
	if (dur > 0) {
		load_metrics_set(m, "rps", (double)run->requests / dur);
		load_metrics_set(m, "rows_per_s", (double)run->rows / dur);
	}
	load_metrics_set(m, "errors", (double)run->errors.total);
	load_metrics_set(m, "script_errors", (double)run->script_errors);
	for (unsigned i = 0; i < run->errors.n; i++)
		lr_metric_setf(m, (double)run->errors.count[i], "errors.%s", run->errors.kind[i]);
	load_metrics_set(m, "busy", (double)run->busy.total);
	uint64_t iters = 0, dropped = 0;
	for (unsigned i = 0; i < run->nscn; i++) {
		const struct load_scn *s = run->scn[i];
		double sd = load_scn_seconds(run, s);
		iters += s->stat->count;
		dropped += s->dropped;
		lr_metrics_stat(m, s->stat, sd, 1);
		lr_metric_setf(m, (double)s->requests, "%s.requests", s->name);
		if (sd > 0)
			lr_metric_setf(m, (double)s->requests / sd, "%s.rps", s->name);
		lr_metric_setf(m, (double)s->dropped, "%s.dropped", s->name);
		if (s->model == LOAD_MODEL_OPEN)
			lr_metric_setf(m, (double)s->arrivals, "%s.arrivals", s->name);
		for (int v = 0; v < LOAD_VERB_COUNT; v++)
			if (s->verb[v] != NULL)
				lr_metrics_stat(m, s->verb[v], sd, 0);
		for (unsigned j = 0; j < s->nstages; j++)
			if (s->stages[j].stat != NULL)
				lr_metrics_stat(m, s->stages[j].stat, (double)s->stages[j].dur / 1e9, 1);
	}
	load_metrics_set(m, "iterations", (double)iters);
	load_metrics_set(m, "dropped_iterations", (double)dropped);
	load_metrics_set(m, "interrupted", (double)run->interrupted);
	for (int v = 0; v < LOAD_VERB_COUNT; v++)
		if (run->verb[v] != NULL)
			lr_metrics_stat(m, run->verb[v], dur, 0);
	if (run->track != NULL) {
		load_metrics_set(m, "tracked_rows", (double)load_track_count(run->track));
		load_metrics_set(m, "untracked_rows", (double)load_track_overflow(run->track));
		load_metrics_set(m, "verified_rows", (double)run->verified);
		load_metrics_set(m, "lost_rows", (double)(run->lost + run->mismatched));
		load_metrics_set(m, "missing_rows", (double)run->lost);
		load_metrics_set(m, "mismatched_rows", (double)run->mismatched);
		load_metrics_set(m, "uncertain_rows", (double)run->uncertain);
		load_metrics_set(m, "unverified_rows", (double)run->unverified);
		load_metrics_set(m, "verify_errors", (double)run->verify_errors);
		if (run->verify_stat->count > 0)
			load_metrics_add_hist(m, "verify", run->verify_stat->lat);
	}
	for (size_t i = 0; i < run->custom.n; i++)
		load_metrics_set(m, run->custom.name[i], run->custom.value[i]);
}

/** The script's done(ctx, metrics). */
static void
lr_done_hook(struct load_run *run)
{
	lua_State *L = run->L;
	if (run->done_ref == LUA_NOREF)
		return;
	lua_rawgeti(L, LUA_REGISTRYINDEX, run->done_ref);
	lua_rawgeti(L, LUA_REGISTRYINDEX, run->ctx_ref);
	lua_createtable(L, 0, (int)run->metrics.n);
	for (size_t i = 0; i < run->metrics.n; i++) {
		lua_pushnumber(L, run->metrics.value[i]);
		lua_setfield(L, -2, run->metrics.name[i]);
	}
	if (lua_pcall(L, 2, 0, 0) != 0) {
		fprintf(stderr, "strata load: %s: done: %s\n", run->script, lua_tostring(L, -1));
		lua_pop(L, 1);
		load_errors_add(&run->errors, "script", "done() raised");
		run->script_errors++;
		load_metrics_set(&run->metrics, "errors", (double)run->errors.total);
		load_metrics_set(&run->metrics, "script_errors", (double)run->script_errors);
	}
	for (size_t i = 0; i < run->custom.n; i++)
		load_metrics_set(&run->metrics, run->custom.name[i], run->custom.value[i]);
}

static void
lr_thresholds(struct load_run *run)
{
	run->passed = 1;
	for (unsigned i = 0; i < run->nthr; i++) {
		struct load_threshold *t = &run->thr[i];
		t->found = load_metrics_get(&run->metrics, t->metric, &t->got);
		t->ok = t->found && load_threshold_holds(t->cmp, t->got, t->value);
		if (!t->ok)
			run->passed = 0;
	}
}

/* ------------------------------------------------------------------------ */
/* The run                                                                   */
/* ------------------------------------------------------------------------ */

static int
lua_dir_try(struct load_run *run, const char *dir)
{
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/strata/load.lua", dir);
	size_t off = strlen(run->lua_tried);
	if (off + strlen(dir) + 3 < sizeof(run->lua_tried))
		snprintf(run->lua_tried + off, sizeof(run->lua_tried) - off, "%s%s", off ? ", " : "", dir);
	if (access(probe, R_OK) != 0)
		return 0;
	char *real = realpath(dir, NULL);
	snprintf(run->lua_dir, sizeof(run->lua_dir), "%s", real != NULL ? real : dir);
	free(real);
	return 1;
}

/** Find lua/ (with strata/load.lua): $STRATA_LUA_DIR, next to the binary, near the script, ./lua. */
static int
lua_dir_find(struct load_run *run)
{
	const char *env_dir = getenv("STRATA_LUA_DIR");
	if (env_dir != NULL && env_dir[0] != '\0')
		return lua_dir_try(run, env_dir) ? 0 : -1;
	char exe[4096], dir[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash != NULL) {
			*slash = '\0';
			static const char *const rel[] = { "/../lua", "/../../lua", "/../share/strata/lua" };
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				snprintf(dir, sizeof(dir), "%s%s", exe, rel[i]);
				if (lua_dir_try(run, dir))
					return 0;
			}
		}
	}
	char sdir[4096];
	snprintf(sdir, sizeof(sdir), "%s", run->script);
	char *slash = strrchr(sdir, '/');
	if (slash != NULL)
		*slash = '\0';
	else
		snprintf(sdir, sizeof(sdir), ".");
	static const char *const srel[] = { "/../../lua", "/../lua", "/lua" };
	for (size_t i = 0; i < sizeof(srel) / sizeof(srel[0]); i++) {
		snprintf(dir, sizeof(dir), "%s%s", sdir, srel[i]);
		if (lua_dir_try(run, dir))
			return 0;
	}
	if (lua_dir_try(run, "lua"))
		return 0;
	return -1;
}

static void
lr_destroy(struct load_run *run)
{
	if (run->target != NULL)
		run->target->destroy(run->target);
	run->target = NULL;
	while (run->free_reqs != NULL) {
		struct load_req *r = run->free_reqs;
		run->free_reqs = r->next;
		load_req_destroy(r);
		env.free(r);
	}
	if (run->L != NULL)
		lua_close(run->L);
	for (unsigned i = 0; i < run->nscn; i++) {
		struct load_scn *s = run->scn[i];
		load_stat_delete(s->stat);
		for (int v = 0; v < LOAD_VERB_COUNT; v++)
			load_stat_delete(s->verb[v]);
		for (unsigned j = 0; j < s->nstages; j++)
			load_stat_delete(s->stages[j].stat);
		env.free(s->pending);
		env.free(s->vus);
		env.free(s);
	}
	for (int v = 0; v < LOAD_VERB_COUNT; v++)
		load_stat_delete(run->verb[v]);
	load_stat_delete(run->verify_stat);
	hist_delete(run->wrk_rate);
	load_track_delete(run->track);
	load_metrics_destroy(&run->metrics);
	load_metrics_destroy(&run->custom);
	if (run->loop != NULL)
		ev_loop_destroy(run->loop);
}

/** Everything before the loop runs; LOAD_EXIT_ERROR on failure. */
static int
lr_prepare(struct load_run *run)
{
	const struct load_opts *o = run->o;
	if (o->target != NULL && o->embedded_dir != NULL)
		return load_conf_fail(run, "give either --target URL or --embedded DIR, not both"), LOAD_EXIT_ERROR;
	if (o->record_trace != NULL && o->embedded_dir == NULL)
		return load_conf_fail(run, "--record-trace records an --embedded store; a node records its own "
				      "workload: POST /v1/trace, or strata serve --trace-file"), LOAD_EXIT_ERROR;
	if (lua_dir_find(run) != 0)
		return load_conf_fail(run, "cannot find the strata Lua library (strata/load.lua) in: %s; set "
				      "STRATA_LUA_DIR", run->lua_tried), LOAD_EXIT_ERROR;
	run->loop = ev_loop_new(EVFLAG_AUTO);
	if (run->loop == NULL)
		return load_conf_fail(run, "cannot create an event loop"), LOAD_EXIT_ERROR;
	lua_State *L = luaL_newstate();
	if (L == NULL)
		return load_conf_fail(run, "cannot create a Lua state"), LOAD_EXIT_ERROR;
	run->L = L;
	luaL_openlibs(L);
	luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_ON);
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "path");
	lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", run->lua_dir, run->lua_dir, lua_tostring(L, -1));
	lua_setfield(L, -3, "path");
	lua_pop(L, 2);
	if (load_wrk_define(run) != 0)
		return LOAD_EXIT_ERROR;
	/* The base seed is known to the script while it loads: require("strata.load").seed. */
	lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
	lua_getfield(L, -1, "strata.load");
	if (lua_istable(L, -1)) {
		lua_pushnumber(L, (lua_Number)o->seed);
		lua_setfield(L, -2, "seed");
	}
	lua_pop(L, 2);

	if (luaL_loadfile(L, run->script) != 0) {
		load_conf_fail(run, "%s", lua_tostring(L, -1));
		return LOAD_EXIT_ERROR;
	}
	/* The script sees its arguments (after --) as the chunk's `...`. */
	luaL_checkstack(L, o->nargs + 1, "too many script arguments");
	for (int i = 0; i < o->nargs; i++)
		lua_pushstring(L, o->args[i]);
	if (lua_pcall(L, o->nargs, 1, 0) != 0) {
		load_conf_fail(run, "%s", lua_tostring(L, -1));
		return LOAD_EXIT_ERROR;
	}
	struct load_conf c = { .slots = o->connections, .shards = o->shards, .sync = o->sync,
			       .policy = o->policy, .timeout_s = o->timeout_s };
	int conf_idx = lua_gettop(L);
	if (lua_istable(L, conf_idx)) {
		if (load_conf_top(run, conf_idx, &c) != 0)
			return LOAD_EXIT_ERROR;
	} else if (!lua_isnil(L, conf_idx)) {
		return load_conf_fail(run, "the script returned a %s: return a table with scenarios, or define wrk "
				      "hooks (request, response, ...) as globals", luaL_typename(L, conf_idx)),
		       LOAD_EXIT_ERROR;
	} else {
		run->wrk = 1;
		run->duration = (uint64_t)((o->duration_s > 0 ? o->duration_s : LOAD_DEFAULT_DURATION_S) * 1e9);
		if (c.slots == 0)
			c.slots = 10;
		if (o->embedded_dir != NULL)
			return load_conf_fail(run, "a wrk-style script sends raw HTTP: it needs --target URL"),
			       LOAD_EXIT_ERROR;
	}
	if (c.slots == 0)
		c.slots = LOAD_DEFAULT_SLOTS;
	if (c.sync < 0)
		c.sync = STRATA_SYNC_FSYNC;
	if (run->batch_format < 0)
		run->batch_format = 0;
	if (run->grace_s < 0)
		run->grace_s = 10.0;
	int rc;
	if (o->embedded_dir != NULL) {
		struct load_embed_opts eo = { .dir = o->embedded_dir, .shards = c.shards,
					      .sync = c.sync, .slots = c.slots, .policy_path = c.policy,
					      .record_trace = o->record_trace };
		rc = load_embed_new(run->loop, &eo, &run->target);
	} else {
		rc = load_http_new(run->loop, o->target != NULL ? o->target : "http://127.0.0.1:7070", c.slots,
				   c.timeout_s, o->token, &run->target);
	}
	if (rc != 0)
		return load_conf_fail(run, "%s", diag_last()), LOAD_EXIT_ERROR;
	uint32_t shards = run->target->shards;
	if (strcmp(run->target->kind, "http") == 0) {
		char err[1400];
		if (load_http_probe(run->target, &shards, err, sizeof(err)) != 0)
			return load_conf_fail(run, "%s", err), LOAD_EXIT_ERROR;
	}
	if (shards == 0)
		shards = c.shards ? c.shards : 1;
	load_ctx_create(run);
	lua_rawgeti(L, LUA_REGISTRYINDEX, run->ctx_ref);
	lua_pushnumber(L, shards);
	lua_setfield(L, -2, "shards");
	lua_pushnumber(L, (lua_Number)run->duration / 1e9);
	lua_setfield(L, -2, "duration");
	lua_pop(L, 1);
	if (run->wrk) {
		if (load_wrk_prepare(run) != 0)
			return LOAD_EXIT_ERROR;
	} else {
		lua_getfield(L, conf_idx, "scenarios");
		rc = load_conf_scenarios(run, lua_gettop(L));
		lua_pop(L, 1);
		if (rc != 0)
			return LOAD_EXIT_ERROR;
		for (unsigned i = 0; i < run->nthr; i++) {
			char m[LOAD_NAME_MAX];
			snprintf(m, sizeof(m), "%s", run->thr[i].metric);
			char *dot = strchr(m, '.');
			if (dot == NULL)
				continue;
			*dot = '\0';
			int known = strcmp(m, "errors") == 0 || strcmp(m, "verify") == 0;
			for (int v = 0; v <= LOAD_VERB_VERIFY && !known; v++)
				known = strcmp(m, load_verb_name(v)) == 0;
			for (unsigned j = 0; j < run->nscn && !known; j++)
				known = strncmp(m, run->scn[j]->name, strlen(run->scn[j]->name)) == 0;
			if (!known)
				load_run_log(run, "warning: threshold %s names no scenario or verb (a custom metric?)",
					run->thr[i].metric);
		}
	}
	for (unsigned i = 0; i < run->nscn; i++)
		if (run->scn[i]->model == LOAD_MODEL_CLOSED && scn_init_vus(run->scn[i]) != 0)
			return load_conf_fail(run, "out of memory for %u VUs", run->scn[i]->nvus), LOAD_EXIT_ERROR;
	lua_settop(L, 0);
	if (run->verify) {
		uint64_t max = o->max_tracked ? o->max_tracked
			       : run->max_tracked ? run->max_tracked
						  : LOAD_DEFAULT_MAX_TRACKED;
		if (load_track_new(max, &run->track) != 0 || load_stat_new("verify", 0, &run->verify_stat) != 0)
			return load_conf_fail(run, "%s", diag_last()), LOAD_EXIT_ERROR;
	}
	return 0;
}

int
load_main(const struct load_opts *o)
{
	static int curl_ready;
	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			fprintf(stderr, "strata load: cannot initialise libcurl\n");
			return LOAD_EXIT_ERROR;
		}
		curl_ready = 1;
	}
	/* A node that closes a connection mid-request must not kill the runner. */
	signal(SIGPIPE, SIG_IGN);
	struct load_run *run = env.calloc(1, sizeof(*run));
	if (run == NULL) {
		fprintf(stderr, "strata load: out of memory\n");
		return LOAD_EXIT_ERROR;
	}
	run->o = o;
	run->verb_done = iter_req_done;
	run->stop = lr_stop;
	run->script = o->script;
	run->t_init = load_now_ns();
	run->ctx_ref = run->setup_ref = run->teardown_ref = run->done_ref = run->data_ref = LUA_NOREF;
	run->batch_format = o->batch_format;
	run->grace_s = o->grace_s;
	run->interval = (uint64_t)((o->interval_s > 0 ? o->interval_s : 1.0) * 1e9);
	int code = lr_prepare(run);
	if (code != 0) {
		lr_destroy(run);
		env.free(run);
		return code;
	}
	ev_timer_init(&run->kick, lr_kick_cb, 0., 0.);
	run->kick.data = run;
	ev_signal_init(&run->sigint, lr_signal_cb, SIGINT);
	run->sigint.data = run;
	ev_signal_init(&run->sigterm, lr_signal_cb, SIGTERM);
	run->sigterm.data = run;
	ev_signal_start(run->loop, &run->sigint);
	ev_signal_start(run->loop, &run->sigterm);
	if (!o->quiet)
		load_run_log(run, "strata load %s -> %s, %.1fs, %u %s%s", run->script, run->target->desc,
			(double)run->duration / 1e9, run->target->slots,
			strcmp(run->target->kind, "http") == 0 ? "connections" : "workers",
			run->verify ? ", verifying rows" : "");
	lr_kick(run);
	ev_run(run->loop, 0);
	ev_signal_stop(run->loop, &run->sigint);
	ev_signal_stop(run->loop, &run->sigterm);
	if (run->t_end == 0)
		run->t_end = run->t0 ? load_now_ns() : 0;

	lr_build_metrics(run);
	if (run->wrk)
		load_wrk_done(run);
	else
		lr_done_hook(run);
	lr_thresholds(run);
	load_report_summary(run, stdout);
	fflush(stdout);
	int failed_io = 0;
	if (o->json_path != NULL && load_report_json(run, o->json_path) != 0)
		failed_io = 1;
	if (o->report_path != NULL && load_report_html(run, o->report_path) != 0)
		failed_io = 1;
	if (run->setup_failed || failed_io)
		code = LOAD_EXIT_ERROR;
	else if (!run->passed)
		code = LOAD_EXIT_THRESHOLD;
	else if (run->stop_signal != 0)
		code = 128 + run->stop_signal;
	else
		code = LOAD_EXIT_OK;
	lr_destroy(run);
	env.free(run);
	return code;
}
