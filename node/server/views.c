#include "views.h"

#include <math.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"

int
views_shard_stats(strata *db, uint32_t shard, json_t **out)
{
	strata_stats st;
	memset(&st, 0, sizeof(st));
	int rc = strata_shard_stats(db, shard, &st);
	json_t *o = json_pack("{s:I}", "shard", (json_int_t)shard);
	*out = o;
	if (rc != 0) {
		json_object_set_new(o, "error", json_string(strata_strerror(rc)));
		return rc;
	}
#define VIEWS_STAT_SET(field, kind, metric, scale, help) \
	json_object_set_new(o, #field, json_integer((json_int_t)st.field));
	STRATA_STATS_FIELDS(VIEWS_STAT_SET)
#undef VIEWS_STAT_SET
	return 0;
}

/** A JSON string of text; bytes that are not UTF-8 become '?'. */
static json_t *
views_text(const char *s, size_t n)
{
	json_t *v = json_stringn(s, n);
	if (v != NULL)
		return v;
	char *c = env.malloc(n + 1);
	if (c == NULL)
		return json_null();
	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
	v = json_stringn(c, n);
	env.free(c);
	return v ? v : json_null();
}

/** A JSON number: an integer when v is one. */
static json_t *
views_number(double v)
{
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

int
views_policy_snap(struct runtime *rt, int with_source, struct views_policy_snap *out)
{
	memset(out, 0, sizeof(*out));
	runtime_stats(rt, &out->st);
	runtime_settings(rt, &out->set);
	out->nclamps = runtime_clamps(rt, out->clamps, POLICY_MAX_CLAMPS);
	if (out->nclamps > POLICY_MAX_CLAMPS)
		out->nclamps = POLICY_MAX_CLAMPS;
	out->with_source = with_source;
	if (!with_source)
		return 0;
	size_t len = 0;
	const char *src = runtime_policy_source(rt, &len);
	if (src == NULL)
		return 0;
	out->source = env.malloc(len + 1);
	if (out->source == NULL)
		return diag_set(STRATA_ENOMEM, "policy view: out of memory copying %zu bytes of source", len);
	memcpy(out->source, src, len);
	out->source[len] = '\0';
	out->source_len = len;
	return 0;
}

void
views_policy_snap_free(struct views_policy_snap *s)
{
	env.free(s->source);
	s->source = NULL;
	s->source_len = 0;
}

json_t *
views_policy(const struct views_policy_snap *s)
{
	const struct runtime_stats *st = &s->st;
	const struct runtime_settings *set = &s->set;
	json_t *o = json_object();
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "name", views_text(st->policy_name, strnlen(st->policy_name, sizeof(st->policy_name))));
	size_t pl = strnlen(st->source_path, sizeof(st->source_path));
	json_object_set_new(o, "source_path", pl ? views_text(st->source_path, pl) : json_null());
	json_object_set_new(o, "version", json_integer((json_int_t)st->policy_version));
	size_t el = strnlen(st->last_error, sizeof(st->last_error));
	json_object_set_new(o, "last_error", el ? views_text(st->last_error, el) : json_null());
	json_object_set_new(o, "reloads", json_integer((json_int_t)st->reloads));
	json_object_set_new(o, "reload_failures", json_integer((json_int_t)st->reload_failures));
	json_object_set_new(o, "hook_runs", json_integer((json_int_t)st->hook_runs));
	json_object_set_new(o, "hook_errors", json_integer((json_int_t)st->hook_errors));
	json_object_set_new(
		o, "settings",
		json_pack("{s:f, s:f, s:I, s:I, s:I, s:I, s:I}", "flush_interval_s", set->flush_interval_s,
			  "sweep_interval_s", set->sweep_interval_s, "merge_after_generations",
			  (json_int_t)set->merge_after_generations, "merge_max_generations",
			  (json_int_t)set->merge_max_generations, "memtable_max_bytes",
			  (json_int_t)set->memtable_max_bytes, "base_max_runs", (json_int_t)set->base_max_runs,
			  "merge_threads", (json_int_t)set->merge_threads));
	json_t *clamped = json_array();
	for (unsigned i = 0; i < s->nclamps && clamped != NULL; i++)
		json_array_append_new(clamped, json_pack("{s:s, s:o, s:o, s:s}", "setting", s->clamps[i].setting,
							 "asked", views_number(s->clamps[i].asked), "effective",
							 views_number(s->clamps[i].effective), "why", s->clamps[i].why));
	json_object_set_new(o, "clamped", clamped ? clamped : json_null());
	if (s->with_source)
		json_object_set_new(o, "source", s->source ? views_text(s->source, s->source_len) : json_null());
	return o;
}

/** The lines of an env.malloc'ed log as a JSON array. */
static json_t *
views_lines(const char *text)
{
	json_t *a = json_array();
	for (const char *l = text; a != NULL && l != NULL && *l != '\0';) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		json_array_append_new(a, views_text(l, n));
		l = nl ? nl + 1 : NULL;
	}
	return a ? a : json_null();
}

/** A time in nanoseconds as milliseconds rounded to microseconds. */
static double
views_ms(uint64_t ns)
{
	return round((double)ns / 1e3) / 1e3;
}

json_t *
views_trial(const struct trial *t)
{
	json_t *runs = json_array();
	for (unsigned i = 0; runs != NULL && i < t->nruns; i++) {
		const struct trial_run *r = &t->runs[i];
		int ok = r->outcome == TRIAL_RUN_OK;
		int line = ok ? 0 : trial_msg_line(t, r->err);
		json_t *o = json_pack("{s:s, s:b, s:b, s:f, s:f}", "hook", policy_hook_name(r->hook), "scripted",
				      r->scripted, "ok", ok, "cpu_ms", views_ms(r->cpu_ns), "wall_ms", views_ms(r->wall_ns));
		if (o == NULL)
			continue;
		if (r->hook != POLICY_ON_SWEEP)
			json_object_set_new(o, "shard", json_integer(r->shard));
		json_object_set_new(o, "result", ok ? views_text(r->result, strlen(r->result)) : json_null());
		json_object_set_new(o, "error", ok ? json_null() : views_text(r->err, strlen(r->err)));
		json_object_set_new(o, "file", line ? views_text(t->name, strlen(t->name)) : json_null());
		json_object_set_new(o, "line", line ? json_integer(line) : json_null());
		json_object_set_new(o, "log", views_lines(r->log));
		json_array_append_new(runs, o);
	}
	json_t *gens = json_array();
	for (unsigned i = 0; gens != NULL && i < TRIAL_SHARDS; i++)
		json_array_append_new(gens, json_integer(trial_gens[i]));
	json_t *o = json_pack("{s:b, s:{s:i, s:o}, s:i, s:I, s:o, s:i}", "ok", t->failed == 0 && t->ran, "node",
			      "shards", (int)TRIAL_SHARDS, "generations_pending", gens ? gens : json_null(),
			      "budget_ms", (int)t->limits.budget_ms, "memory_bytes", (json_int_t)t->limits.mem_bytes,
			      "runs", runs ? runs : json_null(), "failed", (int)t->failed);
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "runtime_error",
			    t->runtime_err[0] ? views_text(t->runtime_err, strlen(t->runtime_err)) : json_null());
	json_object_set_new(o, "invariants", t->check_err[0] ? views_text(t->check_err, strlen(t->check_err))
							   : json_null());
	json_object_set_new(o, "log", views_lines(t->log));
	return o;
}
