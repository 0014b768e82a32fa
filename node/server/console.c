/*
 * console.c — the console's page and endpoints (console.h).
 */
#include "console.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cluster/cluster.h"
#include "../core/store.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../objstore/objstore.h"
#include "../policy/runtime.h"
#include "../policy/trial.h"
#include "../strata_host.h"
#include "../lib/wtrace.h"
#include "../sim/replay.h"
#include "metrics.h"
#include "phist.h"

/* ---------- the page ---------- */

void
console_page(struct api *a, struct http_req *r, const struct api_route *rt)
{
	/* Everything the page runs is in it: no other origin is ever asked for anything. */
	api_reply(a, r, 200, "text/html; charset=utf-8",
		  "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
		  "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src "
		  "'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'\r\n",
		  console_html, console_html_len);
}

/* ---------- GET /v1/console/state ---------- */

/** Bucket bounds of the latency histograms the page reads, microseconds: ten per decade
 *  from 1 us to 100 s, so a percentile the page interpolates in a bucket is within 26%
 *  (what one bucket spans) of the one the node's histogram holds. */
#define CONSOLE_BOUNDS 81

static double console_bounds_us[CONSOLE_BOUNDS];

static void
console_bounds_init(void)
{
	if (console_bounds_us[0] != 0)
		return;
	for (int i = 0; i < CONSOLE_BOUNDS; i++)
		console_bounds_us[i] = api_round(pow(10, i / 10.0), 3);
}

/** {"count", "max_us", "le": [count of values <= each bound]} of a nanosecond hist: the
 *  page takes a window's percentiles from the difference of two samples. */
static json_t *
console_hist(const struct hist *h)
{
	json_t *le = json_array();
	for (int i = 0; h != NULL && i < CONSOLE_BOUNDS; i++)
		json_array_append_new(le, json_integer((json_int_t)hist_count_le(h, (uint64_t)(console_bounds_us[i] *
											   1e3))));
	return json_pack("{s:I, s:f, s:o}", "count", (json_int_t)(h ? hist_count(h) : 0), "max_us",
			 h ? api_round((double)hist_max(h) / 1e3, 3) : 0.0, "le", le);
}

void
console_state_reply(struct api *a, struct http_req *r, const struct views_policy_snap *snap)
{
	console_bounds_init();
	uint32_t n = strata_shards(a->db);
	json_t *shards = json_array();
	uint64_t rows = 0, merges = 0, seals = 0, io_rate = 0, io_stalls = 0, io_wait = 0, in_flight = 0;
	for (uint32_t i = 0; i < n; i++) {
		strata_stats st;
		memset(&st, 0, sizeof(st));
		if (strata_shard_stats(a->db, i, &st) != 0)
			continue;
		rows += st.rows_appended;
		merges += st.merges + st.compactions;
		seals += st.seals;
		/* The budget is the store's, shared by its shards: any shard's view of it. */
		io_rate = st.background_io_bytes_per_s;
		io_stalls = st.background_io_stalls;
		io_wait += st.background_io_wait_ns;
		in_flight += st.merge_in_flight_bytes > 0;
		json_array_append_new(
			shards,
			json_pack("{s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "shard",
				  (json_int_t)i, "served", strata_shard_served(a->db, i), "generations",
				  (json_int_t)st.generations, "generation_bytes", (json_int_t)st.generation_bytes,
				  "base_runs", (json_int_t)st.base_runs, "base_bytes", (json_int_t)st.base_bytes,
				  "memtable_rows", (json_int_t)st.memtable_rows, "memtable_bytes",
				  (json_int_t)st.memtable_bytes, "wal_bytes", (json_int_t)st.wal_bytes, "seals",
				  (json_int_t)st.seals, "merges", (json_int_t)st.merges, "compactions",
				  (json_int_t)st.compactions, "merge_in_flight_bytes",
				  (json_int_t)st.merge_in_flight_bytes, "merge_in_flight_done_bytes",
				  (json_int_t)st.merge_in_flight_done_bytes, "max_exclusive_us",
				  api_round((double)st.max_exclusive_ns / 1e3, 3)));
	}
	strata_store_stats ss = {0};
	strata_store_stats_get(a->db, &ss);
	struct objstore_op_stats os[OBJSTORE_MAX_OP_KINDS];
	size_t nos = strata_objstore_stats(a->db, os, OBJSTORE_MAX_OP_KINDS);
	json_t *ops = json_array();
	for (size_t i = 0; i < nos; i++)
		json_array_append_new(
			ops, json_pack("{s:s, s:I, s:I, s:I}", "op", os[i].op, "requests", (json_int_t)os[i].requests,
				       "errors",
				       (json_int_t)(os[i].client_errors + os[i].server_errors + os[i].throttled +
						    os[i].transport_errors + os[i].timeouts),
				       "retries", (json_int_t)os[i].retries));
	const struct hist *hold = NULL, *wait = NULL;
	strata_lock_hists(a->db, &hold, &wait);
	struct http_stats hs;
	memset(&hs, 0, sizeof(hs));
	if (a->http)
		http_server_stats(a->http, &hs);
	struct metrics_proc pr = {0};
	metrics_proc_self(&pr);
	double rss = (double)pr.rss, cpu = pr.cpu_s;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	json_t *bounds = json_array();
	for (int i = 0; i < CONSOLE_BOUNDS; i++)
		json_array_append_new(bounds, json_real(console_bounds_us[i]));
	json_t *policy = views_policy(snap);
	json_t *o = json_pack(
		"{s:I, s:f, s:s, s:I, s:o, s:{s:I, s:o}, s:o, s:o, s:{s:I, s:I, s:I}, s:o, s:{s:I, s:I, s:I, s:I},"
		" s:o, s:{s:f, s:f}, s:{s:I, s:I}, s:o, s:o}",
		"time_ms", (json_int_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, "uptime_s",
		api_round((double)(env.mono_ns() - a->stats.start_ns) / 1e9, 3), "version", STRATA_VERSION,
		"shard_count", (json_int_t)n, "bounds_us", bounds, "appends", "rows", (json_int_t)rows, "latency",
		console_hist(a->stats.append_ns), "get_latency", console_hist(a->stats.get_ns), "exclusive_hold",
		console_hist(hold), "io", "budget_bytes_per_s", (json_int_t)io_rate, "stalls", (json_int_t)io_stalls,
		"wait_ns", (json_int_t)io_wait, "shards", shards, "deletes", "pending_objects",
		(json_int_t)ss.deletes_pending_objects, "pending_bytes", (json_int_t)ss.deletes_pending_bytes,
		"deleted_objects", (json_int_t)ss.deleted_objects, "deleted_bytes", (json_int_t)ss.deleted_bytes,
		"objstore", ops, "process", "rss_bytes", rss, "cpu_s", api_round(cpu, 2), "http", "connections_open",
		(json_int_t)hs.open, "requests", (json_int_t)hs.requests, "policy", policy ? policy : json_null(),
		"cluster", a->cluster ? cluster_json(a->cluster) : json_null());
	if (o != NULL) {
		json_object_set_new(o, "merges", json_integer((json_int_t)merges));
		json_object_set_new(o, "seals", json_integer((json_int_t)seals));
		json_object_set_new(o, "merges_in_flight", json_integer((json_int_t)in_flight));
	}
	api_json(a, r, 200, o);
}

void
console_state(struct api *a, struct http_req *r, const struct api_route *rt)
{
	api_rt_console(a, r);
}

/* ---------- the policy history ---------- */

/** runtime_swap_fn: record the policy now running (runtime's loop). */
static void
console_swap(void *ctx, const struct runtime_stats *st, const char *src, size_t len)
{
	struct api *a = ctx;
	const char *who = a->apply_who[0] ? a->apply_who : st->policy_version == 1 ? "start"
						      : st->source_path[0]             ? "file"
											: "runtime";
	/* The first policy is recorded only when it differs from the newest entry (a restart
	 * runs what it ran); every later swap is a change someone made. */
	phist_add(a->phist, st->policy_version, who, st->policy_name, a->apply_note[0] ? a->apply_note : NULL, src,
		  len, st->policy_version > 1);
}

/** Runtime's loop: start recording. */
static void
console_history_hook(void *arg)
{
	struct api *a = arg;
	runtime_set_swap_hook(a->rt, console_swap, a);
}

int
console_history_start(struct api *a, size_t cap)
{
	const strata_options *so = store_options(strata_store(a->db));
	size_t n = strlen(so->dir) + sizeof("/" PHIST_FILE);
	char *path = malloc(n);
	if (path == NULL)
		return diag_set(STRATA_ENOMEM, "api: out of memory");
	snprintf(path, n, "%s/%s", so->dir, PHIST_FILE);
	int rc = phist_open(path, cap ? cap : PHIST_DEFAULT_CAP, &a->phist);
	free(path);
	if (rc != 0)
		return rc;
	host_post(a->rt_host, &a->hist_call, console_history_hook, a);
	return 0;
}

/** The value of the query parameter name in r's target ("" when absent) into out (not
 *  decoded: the console's parameters are numbers and words). */
static void
console_query(const struct http_req *r, const char *name, char *out, size_t cap)
{
	out[0] = '\0';
	const char *q = r->query, *end = r->query ? r->query + r->query_len : NULL;
	struct api_qpair p;
	while (api_query_next(&q, end, &p)) {
		if (p.name_len == strlen(name) && memcmp(p.name, name, p.name_len) == 0) {
			size_t vl = p.value_len < cap - 1 ? p.value_len : cap - 1;
			memcpy(out, p.value, vl);
			out[vl] = '\0';
			return;
		}
	}
}

void
console_policy_history(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (a->phist == NULL) {
		api_error(a, r, 404, "no policy history", "this node runs no policy runtime");
		return;
	}
	char v[32];
	console_query(r, "source", v, sizeof(v));
	int all = strcmp(v, "all") == 0 || strcmp(v, "1") == 0;
	uint64_t id = all || v[0] == '\0' ? 0 : strtoull(v, NULL, 10);
	if (!all && v[0] != '\0' && id == 0) {
		api_error(a, r, 400, "bad query", "source= takes an entry id, 'all' or '1'");
		return;
	}
	api_json(a, r, 200, phist_json(a->phist, all || id != 0, id));
}

void
console_policy_rollback(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (a->phist == NULL) {
		api_error(a, r, 404, "no policy history", "this node runs no policy runtime");
		return;
	}
	json_error_t err;
	json_t *o = r->body.len ? json_loadb((const char *)r->body.data, r->body.len, 0, &err) : NULL;
	json_int_t to = 0;
	char v[32];
	console_query(r, "to", v, sizeof(v));
	if (v[0] != '\0')
		to = strtoll(v, NULL, 10);
	else if (o == NULL || json_unpack(o, "{s:I}", "to", &to) != 0)
		to = 0;
	json_decref(o);
	if (to <= 0) {
		api_error(a, r, 400, "bad rollback",
			  "name the history entry to put live again: {\"to\": ID} or ?to=ID (GET /v1/policy/history "
			  "lists them)");
		return;
	}
	char *src = NULL;
	size_t len = 0;
	if (phist_source(a->phist, (uint64_t)to, &src, &len) != 0) {
		char d[160];
		snprintf(d, sizeof(d), "the policy history keeps no entry %lld", (long long)to);
		api_error(a, r, 404, "no such history entry", d);
		return;
	}
	char note[64];
	snprintf(note, sizeof(note), "rollback to #%lld", (long long)to);
	api_policy_apply(a, r, src, len, api_token_name(a, r), note);
	free(src);
}

/* ---------- POST /v1/policy/check ---------- */

/** The name of a checked policy in its messages. */
#define CONSOLE_CHECK_NAME "candidate"

struct console_check {
	struct api *a;
	struct http_req *r;
	char *src;
	size_t len;
	/** (worker) The trial (NULL: out of memory) and its verdict. */
	struct trial *t;
	int rc;
};

static void
check_work(void *arg)
{
	struct console_check *j = arg;
	struct trial_options o = {.run = 1, .limits = j->a->policy_limits, .store = &j->a->trial_store};
	j->rc = trial_new(CONSOLE_CHECK_NAME, j->src, j->len, &o, &j->t);
}

/** The settings of a trial as the engine would run them: asked, then each clamp. */
static json_t *
check_settings(const struct trial *t)
{
	struct views_policy_snap s;
	memset(&s, 0, sizeof(s));
	s.set = t->settings;
	memcpy(s.clamps, t->clamps, sizeof(s.clamps));
	s.nclamps = t->nclamps;
	json_t *v = views_policy(&s);
	json_t *o = json_pack("{s:O, s:O}", "settings", json_object_get(v, "settings"), "clamped",
			      json_object_get(v, "clamped"));
	json_decref(v);
	json_t *set = json_object_get(o, "settings");
	for (unsigned i = 0; set != NULL && i < t->nclamps; i++)
		if (json_object_get(set, t->clamps[i].setting) != NULL)
			json_object_set_new(set, t->clamps[i].setting,
					    json_integer((json_int_t)t->clamps[i].effective));
	return o;
}

static void
check_done(void *arg)
{
	struct console_check *j = arg;
	struct api *a = j->a;
	struct http_req *r = j->r;
	struct trial *t = j->t;
	a->jobs--;
	if (t == NULL) {
		api_error(a, r, 503, "out of memory", "no memory for the policy's trial");
	} else if (t->setup_err[0] != '\0') {
		api_error(a, r, 503, "policy check unavailable", t->setup_err);
	} else {
		json_t *errors = json_array();
		if (t->compile_rc != 0) {
			/* One error per line of t->errors, each "candidate:LINE: message". */
			for (char *p = t->errors; *p;) {
				char *nl = strchr(p, '\n');
				size_t l = nl ? (size_t)(nl - p) : strlen(p);
				char msg[sizeof(t->errors)];
				memcpy(msg, p, l);
				msg[l] = '\0';
				if (l > 0) {
					int line = trial_msg_line(t, msg);
					json_array_append_new(errors, json_pack("{s:o, s:s}", "line",
										line ? json_integer(line) : json_null(),
										"message", msg));
				}
				p += l + (nl != NULL);
			}
		} else {
			for (unsigned i = 0; i < t->nruns; i++) {
				const struct trial_run *run = &t->runs[i];
				if (run->outcome == TRIAL_RUN_OK)
					continue;
				int line = trial_msg_line(t, run->err);
				json_array_append_new(
					errors, json_pack("{s:o, s:s, s:s, s:I}", "line", line ? json_integer(line) : json_null(),
							  "message", run->err, "hook", policy_hook_name(run->hook), "shard",
							  (json_int_t)run->shard));
			}
			if (t->runtime_err[0])
				json_array_append_new(errors, json_pack("{s:n, s:s}", "line", "message", t->runtime_err));
			if (t->check_err[0])
				json_array_append_new(errors, json_pack("{s:n, s:s}", "line", "message", t->check_err));
		}
		json_t *o = json_pack("{s:b, s:b, s:s, s:o}", "ok", j->rc == 0, "compiled", t->compile_rc == 0, "name",
				      CONSOLE_CHECK_NAME, "errors", errors);
		if (o != NULL && t->compile_rc == 0) {
			json_object_update_new(o, check_settings(t));
			json_object_set_new(o, "check", t->ran ? views_trial(t) : json_null());
		}
		api_json(a, r, 200, o);
	}
	trial_delete(t);
	free(j->src);
	env.free(j);
}

void
console_policy_check(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (r->body.len == 0) {
		api_error(a, r, 400, "nothing to check", "the body is empty; send the Lua source of a policy");
		return;
	}
	if (a->rt == NULL) {
		api_error(a, r, 400, "policy runtime", "this node runs no policy runtime");
		return;
	}
	struct console_check *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	j->len = r->body.len;
	j->src = malloc(j->len + 1);
	if (j->src == NULL) {
		env.free(j);
		api_error(a, r, 503, "out of memory", "no memory for the policy source");
		return;
	}
	memcpy(j->src, r->body.data, j->len);
	j->src[j->len] = '\0';
	if (api_submit(a, r, HOST_BG, check_work, check_done, j) != 0) {
		free(j->src);
		env.free(j);
	}
}

/* ---------- POST /v1/policy/compare ---------- */

/** A what-if on the background executor: the node's trace replayed under the running
 *  policy and the candidate (node/sim/replay.h). */
struct console_compare {
	struct api *a;
	struct http_req *r;
	char trace[4200];
	char *running, *candidate;
	size_t running_len, candidate_len;
	struct replay_result res[2];
	int rc;
	char err[1024];
};

static void
compare_work(void *arg)
{
	struct console_compare *j = arg;
	struct replay_config c = {.trace = j->trace, .deadline_ms = j->a->compare_budget_ms,
				  .store = j->a->compare_store, .model = &j->a->compare_model};
	const char *src[2] = {j->running, j->candidate};
	size_t len[2] = {j->running_len, j->candidate_len};
	for (int i = 0; i < 2 && j->rc == 0; i++) {
		c.policy_src = src[i];
		c.policy_len = len[i];
		if ((j->rc = replay_run(&c, &j->res[i])) != 0)
			snprintf(j->err, sizeof(j->err), "%s policy: %s", i ? "the candidate" : "the running", diag_last());
	}
}

static void
compare_done(void *arg)
{
	struct console_compare *j = arg;
	struct api *a = j->a;
	a->jobs--;
	if (j->rc != 0) {
		api_error(a, j->r, j->rc == STRATA_ENOMEM ? 503 : 422, "compare failed", j->err);
	} else {
		struct replay_config c = {.trace = j->trace, .speed = 1.0, .store = a->compare_store,
					  .model = &a->compare_model};
		json_t *list = json_array();
		json_array_append_new(list, replay_result_json("running", &j->res[0], 1));
		json_array_append_new(list, replay_result_json("candidate", &j->res[1], 1));
		json_t *o = replay_report_json(&c, &j->res[0], list);
		if (o != NULL) {
			json_object_set_new(o, "budget_ms", json_integer((json_int_t)a->compare_budget_ms));
			json_object_set_new(o, "cut_short", json_boolean(j->res[0].cut_short || j->res[1].cut_short));
		}
		api_json(a, j->r, 200, o);
	}
	free(j->running);
	free(j->candidate);
	env.free(j);
}

void
console_policy_compare(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (r->body.len == 0) {
		api_error(a, r, 400, "nothing to compare", "the body is empty; send the Lua source of a candidate policy");
		return;
	}
	if (a->phist == NULL) {
		api_error(a, r, 400, "policy runtime", "this node runs no policy runtime");
		return;
	}
	struct console_compare *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	struct wtrace_status st;
	if (strata_trace_status(a->db, &st, j->trace, sizeof(j->trace)) != 0) {
		env.free(j);
		api_error(a, r, 404, "no trace to replay",
			  "this node has recorded no workload trace: POST /v1/trace records one (strata serve "
			  "--trace-file records from the start); the comparison replays the newest");
		return;
	}
	if (phist_source(a->phist, 0, &j->running, &j->running_len) != 0) {
		env.free(j);
		api_error(a, r, 503, "running policy unknown", "the policy history holds no running policy yet");
		return;
	}
	j->candidate_len = r->body.len;
	j->candidate = malloc(j->candidate_len + 1);
	if (j->candidate == NULL) {
		free(j->running);
		env.free(j);
		api_error(a, r, 503, "out of memory", "no memory for the candidate");
		return;
	}
	memcpy(j->candidate, r->body.data, j->candidate_len);
	j->candidate[j->candidate_len] = '\0';
	if (api_submit(a, r, HOST_BG, compare_work, compare_done, j) != 0) {
		free(j->running);
		free(j->candidate);
		env.free(j);
	}
}
