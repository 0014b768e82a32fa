#include "views.h"

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

int
views_policy_snap(struct runtime *rt, int with_source, struct views_policy_snap *out)
{
	memset(out, 0, sizeof(*out));
	runtime_stats(rt, &out->st);
	runtime_settings(rt, &out->set);
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
	json_object_set_new(o, "version", json_integer((json_int_t)st->policy_version));
	size_t el = strnlen(st->last_error, sizeof(st->last_error));
	json_object_set_new(o, "last_error", el ? views_text(st->last_error, el) : json_null());
	json_object_set_new(o, "reloads", json_integer((json_int_t)st->reloads));
	json_object_set_new(o, "reload_failures", json_integer((json_int_t)st->reload_failures));
	json_object_set_new(o, "hook_runs", json_integer((json_int_t)st->hook_runs));
	json_object_set_new(o, "hook_errors", json_integer((json_int_t)st->hook_errors));
	json_object_set_new(
		o, "settings",
		json_pack("{s:f, s:f, s:I, s:I, s:I, s:I}", "flush_interval_s", set->flush_interval_s,
			  "sweep_interval_s", set->sweep_interval_s, "merge_after_generations",
			  (json_int_t)set->merge_after_generations, "merge_max_generations",
			  (json_int_t)set->merge_max_generations, "memtable_max_bytes",
			  (json_int_t)set->memtable_max_bytes, "base_max_runs", (json_int_t)set->base_max_runs));
	if (s->with_source)
		json_object_set_new(o, "source", s->source ? views_text(s->source, s->source_len) : json_null());
	return o;
}
