/*
 * load_embed.c — the embedded target of `strata load`: a store opened in-process,
 * appends, reads, scans and stats run by worker threads through the embedding API
 * (node/strata.h), completions back on the loop through the pool's ev_async. A
 * policy runtime (node/policy/runtime.h) does what a node's does: flush timers, merge
 * triggers, and the seal, merge_wal, get_policy and put_policy verbs. As in `strata
 * serve`, it runs on a host of its own (a loop thread for its timers and hooks), never
 * on the runner's loop: a verb crosses to the runtime's loop with host_post and its
 * answer crosses back the same way.
 *
 * Results are shaped like the node's HTTP replies (status codes, the stats JSON),
 * so one script runs against either target.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/pool.h"
#include "../policy/runtime.h"
#include "../server/views.h"
#include "../strata_host.h"
#include "../lib/wtrace.h"
#include "load.h"

/** The embedded target. */
struct lembed {
	/** Public part (first member). */
	struct load_target t;
	/** The loop. */
	struct ev_loop *loop;
	/** The store. */
	strata *db;
	/** The host on the runner's loop: its foreground executor runs the calls (owned). */
	struct host *host;
	/** The policy runtime's host: a loop thread for its timers and hooks, its background
	 *  executor for the policy's seals and merges (owned). */
	struct host *rt_host;
	/** host's foreground executor. */
	struct pool *pool;
	/** The policy runtime (seal, merge_wal, put_policy, timers and triggers); called on
	 *  rt_host's loop thread only. */
	struct runtime *rt;
	/** Completes requests finished on the loop thread (runtime verbs, refusals) later. */
	ev_timer defer;
	/** Requests to complete from the defer timer, oldest first. */
	struct load_req *deferred, *deferred_tail;
};

/** Scan collector. */
struct lembed_scan {
	/** The request (packed rows go to resp). */
	struct load_req *r;
	/** Prefix filter. */
	const uint8_t *prefix;
	/** Its length. */
	size_t prefix_len;
	/** Rows taken. */
	uint32_t rows;
	/** Out of memory. */
	int oom;
};

/** Returned by the scan callback to stop at the limit. */
#define LEMBED_SCAN_STOP 0x10ad

static int
lembed_status(int rc)
{
	switch (rc) {
	case STRATA_OK:
		return 200;
	case STRATA_NOTFOUND:
		return 404;
	case STRATA_EINVAL:
	case STRATA_ETOOBIG:
	case STRATA_ERANGE:
		return 400;
	case STRATA_EBUSY:
		return 429;
	case STRATA_ECONFLICT:
	case STRATA_EFENCED:
		return 409;
	case STRATA_ENOSPC:
		return 507;
	default:
		return 500;
	}
}

static void
lembed_engine_fail(struct load_req *r, int rc)
{
	r->status = lembed_status(rc);
	load_req_fail(r, LOAD_FAIL_ENGINE, "%s shard %u: %s: %s", load_verb_name(r->verb), r->shard,
		      strata_strerror(rc), strata_last_error());
}

static int
lembed_scan_cb(void *ctx, const strata_row *row)
{
	struct lembed_scan *s = ctx;
	if (s->prefix_len > 0) {
		if (row->key_len < s->prefix_len || memcmp(row->key, s->prefix, s->prefix_len) != 0)
			return 0;
	}
	if (s->rows >= s->r->scan_limit)
		return LEMBED_SCAN_STOP;
	struct buf *b = &s->r->resp;
	if (b->len + row->key_len + row->value_len + 8 > LOAD_MAX_RESPONSE_BYTES) {
		s->oom = 2;
		return LEMBED_SCAN_STOP;
	}
	if (buf_put_u32(b, (uint32_t)row->key_len) != 0 || buf_append(b, row->key, row->key_len) != 0 ||
	    buf_put_u32(b, (uint32_t)row->value_len) != 0 || buf_append(b, row->value, row->value_len) != 0) {
		s->oom = 1;
		return LEMBED_SCAN_STOP;
	}
	s->rows++;
	return 0;
}

/** The smallest key above every key starting with p (into out); 0 when none (all 0xff). */
static size_t
lembed_prefix_end(const uint8_t *p, size_t n, uint8_t *out)
{
	while (n > 0 && p[n - 1] == 0xff)
		n--;
	if (n == 0)
		return 0;
	memcpy(out, p, n);
	out[n - 1]++;
	return n;
}

static void
lembed_scan(struct lembed *e, struct load_req *r)
{
	const uint8_t *start = NULL, *end = NULL;
	size_t start_len = 0, end_len = 0;
	uint8_t pend[STRATA_MAX_KEY];
	struct lembed_scan s = { .r = r };
	if (r->scan_bounds & 1) {
		s.prefix = r->scan_prefix.data;
		s.prefix_len = r->scan_prefix.len;
		start = r->scan_prefix.data;
		start_len = r->scan_prefix.len;
		if (r->scan_prefix.len <= sizeof(pend)) {
			end_len = lembed_prefix_end(r->scan_prefix.data, r->scan_prefix.len, pend);
			end = end_len ? pend : NULL;
		}
	}
	if ((r->scan_bounds & 2) && (start == NULL || (r->scan_start.len > 0 &&
						       memcmp(r->scan_start.data, start,
							      r->scan_start.len < start_len ? r->scan_start.len
											    : start_len) >= 0))) {
		start = r->scan_start.data;
		start_len = r->scan_start.len;
	}
	if (r->scan_bounds & 4) {
		end = r->scan_end.data;
		end_len = r->scan_end.len;
		if ((r->scan_bounds & 1) && r->scan_prefix.len <= sizeof(pend)) {
			uint8_t tmp[STRATA_MAX_KEY];
			size_t tl = lembed_prefix_end(r->scan_prefix.data, r->scan_prefix.len, tmp);
			if (tl > 0) {
				size_t m = tl < end_len ? tl : end_len;
				int c = memcmp(tmp, end, m);
				if (c < 0 || (c == 0 && tl < end_len)) {
					memcpy(pend, tmp, tl);
					end = pend;
					end_len = tl;
				}
			}
		}
	}
	if (start == NULL) {
		start = (const uint8_t *)"";
		start_len = 0;
	}
	int rc = strata_scan(e->db, r->shard, start_len ? start : NULL, start_len, end, end_len, lembed_scan_cb,
			     &s);
	r->packed = 1;
	if (s.oom == 2) {
		r->status = 500;
		load_req_fail(r, LOAD_FAIL_RESPONSE, "scan shard %u: more than %llu bytes", r->shard,
			      (unsigned long long)LOAD_MAX_RESPONSE_BYTES);
	} else if (s.oom) {
		r->status = 500;
		load_req_fail(r, LOAD_FAIL_ENGINE, "scan shard %u: out of memory", r->shard);
	} else if (rc != 0 && rc != LEMBED_SCAN_STOP) {
		lembed_engine_fail(r, rc);
	} else {
		r->status = 200;
	}
}

/** Fill resp with {"shard_count": n, "shards": [{"shard": i, <strata_stats fields>}, ...]} (the
 *  per-shard part of the node's GET /v1/stats). */
static void
lembed_stats(struct lembed *e, struct load_req *r)
{
	if (r->stats_shard) {
		json_t *one = NULL;
		int src = views_shard_stats(e->db, r->shard, &one);
		char *txt = src == 0 && one != NULL ? json_dumps(one, JSON_COMPACT) : NULL;
		json_decref(one);
		if (src != 0) {
			lembed_engine_fail(r, src);
		} else if (txt == NULL || buf_append(&r->resp, txt, strlen(txt)) != 0) {
			r->status = 500;
			load_req_fail(r, LOAD_FAIL_ENGINE, "stats: out of memory");
		} else {
			r->status = 200;
		}
		free(txt);
		return;
	}
	json_t *arr = json_array();
	json_t *root = json_pack("{s:I, s:o}", "shard_count", (json_int_t)strata_shards(e->db), "shards", arr);
	if (root == NULL) {
		r->status = 500;
		load_req_fail(r, LOAD_FAIL_ENGINE, "stats: out of memory");
		return;
	}
	uint32_t n = strata_shards(e->db);
	for (uint32_t i = 0; i < n; i++) {
		json_t *o;
		int rc = views_shard_stats(e->db, i, &o);
		if (rc != 0) {
			json_decref(o);
			json_decref(root);
			lembed_engine_fail(r, rc);
			return;
		}
		if (o == NULL || json_array_append_new(arr, o) != 0) {
			json_decref(root);
			r->status = 500;
			load_req_fail(r, LOAD_FAIL_ENGINE, "stats: out of memory");
			return;
		}
	}
	char *txt = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (txt == NULL || buf_append(&r->resp, txt, strlen(txt)) != 0) {
		free(txt);
		r->status = 500;
		load_req_fail(r, LOAD_FAIL_ENGINE, "stats: out of memory");
		return;
	}
	free(txt);
	r->status = 200;
}

static void
lembed_work(void *arg)
{
	struct load_req *r = arg;
	struct lembed *e = r->priv;
	r->t_send = load_now_ns();
	int rc;
	switch (r->verb) {
	case LOAD_VERB_APPEND:
		rc = strata_append_seq(e->db, r->shard, r->rows, r->nrows, &r->last_seq);
		if (rc == 0) {
			r->status = 200;
			r->appended = r->nrows;
		} else {
			lembed_engine_fail(r, rc);
		}
		break;
	case LOAD_VERB_GET:
	case LOAD_VERB_VERIFY: {
		void *v = NULL;
		size_t vl = 0;
		rc = strata_get(e->db, r->shard, r->key.data, r->key.len, &v, &vl);
		if (rc == 0) {
			r->status = 200;
			if (vl > LOAD_MAX_RESPONSE_BYTES || buf_append(&r->resp, v, vl) != 0) {
				r->status = 500;
				load_req_fail(r, LOAD_FAIL_RESPONSE, "get shard %u: value of %zu bytes not kept",
					      r->shard, vl);
			}
			strata_free(v);
		} else if (rc == STRATA_NOTFOUND) {
			r->status = 404;
		} else {
			lembed_engine_fail(r, rc);
		}
		break;
	}
	case LOAD_VERB_SCAN:
		lembed_scan(e, r);
		break;
	case LOAD_VERB_SEAL:
		rc = strata_seal(e->db, r->shard);
		if (rc == 0)
			r->status = 200;
		else
			lembed_engine_fail(r, rc);
		break;
	case LOAD_VERB_STATS:
		lembed_stats(e, r);
		break;
	default:
		r->status = 501;
		load_req_fail(r, LOAD_FAIL_UNSUPPORTED, "%s is not available on the embedded target",
			      load_verb_name(r->verb));
		break;
	}
	r->t_done = load_now_ns();
}

static void
lembed_done(void *arg)
{
	struct load_req *r = arg;
	r->priv = NULL;
	r->done(r);
}

static void
lembed_defer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct lembed *e = w->data;
	while (e->deferred != NULL) {
		struct load_req *r = e->deferred;
		e->deferred = r->next;
		if (e->deferred == NULL)
			e->deferred_tail = NULL;
		r->next = NULL;
		r->done(r);
	}
}

/** Complete r from the loop later (never from inside submit or a runtime callback). */
static void
lembed_later(struct lembed *e, struct load_req *r)
{
	r->t_done = load_now_ns();
	r->priv = NULL;
	r->next = NULL;
	if (e->deferred_tail != NULL)
		e->deferred_tail->next = r;
	else
		e->deferred = r;
	e->deferred_tail = r;
	if (!ev_is_active(&e->defer)) {
		ev_timer_set(&e->defer, 0., 0.);
		ev_timer_start(e->loop, &e->defer);
	}
}

/** Record a runtime verb's outcome in r. */
static void
lembed_rt_result(struct load_req *r, int rc, const char *err)
{
	if (rc == 0) {
		r->status = 200;
		return;
	}
	r->status = lembed_status(rc);
	load_req_fail(r, LOAD_FAIL_ENGINE, "%s shard %u: %s: %s", load_verb_name(r->verb), r->shard,
		      strata_strerror(rc), err != NULL && err[0] ? err : strata_last_error());
}

/** A runtime verb crossing to the runtime's loop and back. The members marked (runtime)
 *  are written on the runtime's loop thread before the call is posted back. */
struct lembed_rtcall {
	/** The crossing: to the runtime's loop, then back to the runner's. */
	struct host_call call;
	/** The target (the runtime's side reads only rt and host). */
	struct lembed *e;
	/** The request (the runtime's side reads only its verb, shard and body). */
	struct load_req *r;
	/** (runtime) The outcome: result code and error text of every verb, the counts of a
	 *  merge_wal. */
	struct runtime_req req;
	/** (runtime) The running policy (get_policy). */
	struct views_policy_snap snap;
};

static void lembed_rt_answer(void *arg);

/** Runtime's loop: hand the call (a lembed_rtcall) back to the runner's loop. */
static void
lembed_rt_back(void *arg)
{
	struct lembed_rtcall *c = arg;
	host_post(c->e->host, &c->call, lembed_rt_answer, c);
}

/** Runtime's loop: run the verb there. */
static void
lembed_rt_run(void *arg)
{
	struct lembed_rtcall *c = arg;
	struct lembed *e = c->e;
	struct load_req *r = c->r;
	diag_clear();
	switch (r->verb) {
	case LOAD_VERB_SEAL:
	case LOAD_VERB_MERGE:
		strata_trace_request(e->db, r->verb == LOAD_VERB_MERGE, r->shard);
		runtime_req_run(e->rt, &c->req, r->verb == LOAD_VERB_MERGE, r->shard, lembed_rt_back, c);
		return;
	case LOAD_VERB_GET_POLICY:
		c->req.rc = views_policy_snap(e->rt, 1, &c->snap);
		if (c->req.rc != 0)
			snprintf(c->req.err, sizeof(c->req.err), "%s", diag_last());
		break;
	default: /* LOAD_VERB_POLICY */
		c->req.rc = runtime_reload_source(e->rt, r->body.len ? (const char *)r->body.data : "",
						  r->body.len, "put_policy");
		if (c->req.rc != 0)
			snprintf(c->req.err, sizeof(c->req.err), "%s", diag_last());
		break;
	}
	lembed_rt_back(c);
}

/** Fill resp with the running policy as GET /v1/policy shows it. */
static void
lembed_policy_json(struct load_req *r, const struct views_policy_snap *snap)
{
	json_t *o = views_policy(snap);
	char *txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (txt == NULL || buf_append(&r->resp, txt, strlen(txt)) != 0) {
		r->status = 500;
		load_req_fail(r, LOAD_FAIL_ENGINE, "get_policy: out of memory");
	} else {
		r->status = 200;
	}
	free(txt);
}

/** Runner's loop: complete the request with what the runtime's side found. */
static void
lembed_rt_answer(void *arg)
{
	struct lembed_rtcall *c = arg;
	struct load_req *r = c->r;
	switch (r->verb) {
	case LOAD_VERB_SEAL:
	case LOAD_VERB_MERGE:
		r->reclaimed = c->req.reclaimed;
		r->pending = c->req.pending;
		lembed_rt_result(r, c->req.rc, c->req.err);
		break;
	case LOAD_VERB_GET_POLICY:
		if (c->req.rc != 0)
			lembed_rt_result(r, c->req.rc, c->req.err);
		else
			lembed_policy_json(r, &c->snap);
		break;
	default:
		if (c->req.rc != 0) {
			r->status = 400;
			load_req_fail(r, LOAD_FAIL_ENGINE, "put_policy: policy refused: %s",
				      c->req.err[0] ? c->req.err : strata_strerror(c->req.rc));
		} else {
			r->status = 200;
		}
		break;
	}
	views_policy_snap_free(&c->snap);
	env.free(c);
	r->t_done = load_now_ns();
	r->priv = NULL;
	r->done(r);
}

static void
lembed_submit(struct load_target *t, struct load_req *r)
{
	struct lembed *e = (struct lembed *)t;
	r->priv = e;
	int rc;
	switch (r->verb) {
	case LOAD_VERB_SEAL:
	case LOAD_VERB_MERGE:
	case LOAD_VERB_GET_POLICY:
	case LOAD_VERB_POLICY: {
		/* The runtime's verbs run on its loop, and come back to this one. */
		r->t_send = load_now_ns();
		r->status = 0;
		struct lembed_rtcall *c = env.calloc(1, sizeof(*c));
		if (c == NULL) {
			r->status = 503;
			load_req_fail(r, LOAD_FAIL_ENGINE, "%s: out of memory", load_verb_name(r->verb));
			lembed_later(e, r);
			return;
		}
		c->e = e;
		c->r = r;
		host_post(e->rt_host, &c->call, lembed_rt_run, c);
		return;
	}
	default:
		break;
	}
	rc = pool_submit(e->pool, lembed_work, lembed_done, r);
	if (rc == 0)
		return;
	r->t_send = load_now_ns();
	r->status = 503;
	load_req_fail(r, LOAD_FAIL_ENGINE, "worker pool refused the request: %s", diag_last());
	lembed_later(e, r);
}

static void
lembed_cancel_all(struct load_target *t)
{
	/* Engine calls cannot be interrupted; they finish and complete normally. */
}

static void
lembed_destroy(struct load_target *t)
{
	struct lembed *e = (struct lembed *)t;
	while (pool_pending(e->pool) > 0)
		host_drain(e->host, HOST_FG);
	/* The runtime stops after the verbs already handed to its loop; their answers, and
	 * those of the verbs it still had, come back to this loop before the store closes. */
	strata_runtime_stop(e->db);
	host_run_posted(e->host);
	strata_close(e->db);
	lembed_defer_cb(e->loop, &e->defer, 0);
	ev_timer_stop(e->loop, &e->defer);
	host_delete(e->rt_host);
	host_delete(e->host);
	env.free(e);
}

int
load_embed_new(struct ev_loop *loop, const struct load_embed_opts *o, struct load_target **out)
{
	if (o->slots == 0 || o->slots > LOAD_MAX_SLOTS)
		return diag_set(STRATA_EINVAL, "load: workers must be 1..%u, not %u", LOAD_MAX_SLOTS, o->slots);
	struct lembed *e = env.calloc(1, sizeof(*e));
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "load: out of memory for the embedded target");
	strata_options so;
	strata_options_init(&so);
	so.dir = o->dir;
	so.shards = o->shards;
	so.sync = o->sync;
	so.policy = o->policy_path != NULL ? o->policy_path : "";
	/* The queue holds every request the runner can have in flight. */
	struct host_options ho = {.mode = HOST_THREADED, .loop = loop};
	ho.threads[HOST_FG] = o->slots;
	ho.max_queued[HOST_FG] = o->slots + 16;
	ho.threads[HOST_BG] = 1;
	/* The runtime's host: its own loop thread, so hooks never run on the runner's. */
	struct host_options ro = {.mode = HOST_THREADED, .loop_thread = 1};
	ro.threads[HOST_FG] = 1;
	int rc = host_new(&ho, &e->host);
	if (rc == 0)
		rc = host_new(&ro, &e->rt_host);
	if (rc != 0) {
		host_delete(e->host);
		env.free(e);
		return rc;
	}
	struct strata_runtime_options sro = {.watch_file = o->policy_path != NULL, .host = e->rt_host};
	rc = strata_open_on(&so, e->host, &sro, &e->db);
	if (rc != 0) {
		host_delete(e->rt_host);
		host_delete(e->host);
		env.free(e);
		return diag_set(rc, "load: cannot open the store in %s: %s", o->dir, strata_last_error());
	}
	if (o->record_trace != NULL) {
		struct wtrace_options wo = {.path = o->record_trace, .max_bytes = LOAD_TRACE_MAX_BYTES};
		if ((rc = strata_trace_start(e->db, &wo)) != 0) {
			char why[600];
			snprintf(why, sizeof(why), "%s", diag_last());
			strata_close(e->db);
			host_delete(e->rt_host);
			host_delete(e->host);
			env.free(e);
			return diag_set(rc, "load: --record-trace: %s", why);
		}
	}
	e->pool = host_exec(e->host, HOST_FG);
	e->rt = strata_runtime(e->db);
	e->loop = loop;
	ev_timer_init(&e->defer, lembed_defer_cb, 0., 0.);
	e->defer.data = e;
	e->t.kind = "embedded";
	snprintf(e->t.desc, sizeof(e->t.desc), "embedded %s (%u shards, policy %s)", o->dir, strata_shards(e->db),
		 o->policy_path ? o->policy_path : "built-in default");
	e->t.slots = o->slots;
	e->t.shards = strata_shards(e->db);
	e->t.submit = lembed_submit;
	e->t.cancel_all = lembed_cancel_all;
	e->t.destroy = lembed_destroy;
	*out = &e->t;
	return 0;
}
