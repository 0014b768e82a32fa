/*
 * trace_cmd.c — `strata inspect --trace FILE [--json]`: a summary of a workload trace
 * (node/lib/wtrace.h): its header, how it ended, what the clients did (appends, deletes,
 * gets, scans, per shard) and the engine's events by kind.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/trace.h"
#include "../lib/wtrace.h"
#include "../strata.h"
#include "cli.h"

/** Shards a summary lists one by one. */
#define TRACE_CMD_SHARDS 4096u

struct trace_sum {
	uint64_t appends, rows, key_bytes, value_bytes, deletes, deleted, gets, found, scans, scan_rows;
	uint64_t seal_requests, merge_requests;
	uint64_t events[TRACE_COUNT];
	uint64_t last_t;
	uint64_t shard_rows[TRACE_CMD_SHARDS], shard_bytes[TRACE_CMD_SHARDS];
	uint32_t max_shard;
};

static const char *const trace_event_names[] = {
#define TRACE_NAME(id, name) name,
	TRACE_EVENTS(TRACE_NAME)
#undef TRACE_NAME
};

static int
sum_rec(void *ctx, const struct wtrace_rec *r)
{
	struct trace_sum *s = ctx;
	s->last_t = r->t_ns;
	uint32_t sh = r->shard < TRACE_CMD_SHARDS ? r->shard : TRACE_CMD_SHARDS - 1;
	switch (r->kind) {
	case WTRACE_APPEND:
		s->appends++;
		s->rows += r->nrows;
		for (size_t i = 0; i < r->nrows; i++) {
			s->key_bytes += r->rows[i].key_len;
			s->value_bytes += r->rows[i].value_len;
			s->shard_bytes[sh] += r->rows[i].key_len + r->rows[i].value_len;
		}
		s->shard_rows[sh] += r->nrows;
		if (sh > s->max_shard)
			s->max_shard = sh;
		break;
	case WTRACE_DELETE:
		s->deletes++;
		s->deleted += r->nrows;
		break;
	case WTRACE_GET:
		s->gets++;
		s->found += r->found;
		break;
	case WTRACE_SCAN:
		s->scans++;
		s->scan_rows += r->scan_rows;
		break;
	case WTRACE_SEAL:
		s->seal_requests++;
		break;
	case WTRACE_MERGE:
		s->merge_requests++;
		break;
	case WTRACE_ENGINE:
		if (r->event < TRACE_COUNT)
			s->events[r->event]++;
		break;
	}
	return 0;
}

int
cli_inspect_trace(const char *path, int as_json)
{
	static struct trace_sum s;
	memset(&s, 0, sizeof(s));
	struct wtrace_info info;
	int rc = wtrace_read(path, sum_rec, &s, &info);
	if (rc != 0) {
		fprintf(stderr, "strata inspect: %s\n", diag_last());
		return 1;
	}
	/* From the start to the clean stop, else to the last record read. */
	double secs = (double)(info.ended ? info.end_ns : s.last_t) / 1e9;
	char started[64];
	time_t sec = (time_t)(info.start_wall_ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&sec, &tm);
	strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_t *ev = json_object();
	for (unsigned k = 0; k < TRACE_COUNT; k++)
		if (k != TRACE_APPEND)
			json_object_set_new(ev, trace_event_names[k], json_integer((json_int_t)s.events[k]));
	json_t *shards = json_array();
	for (uint32_t i = 0; s.rows > 0 && i <= s.max_shard; i++)
		json_array_append_new(shards, json_pack("{s:I, s:I, s:I}", "shard", (json_int_t)i, "rows",
							(json_int_t)s.shard_rows[i], "bytes",
							(json_int_t)s.shard_bytes[i]));
	json_t *req = json_pack("{s:I, s:I}", "seal", (json_int_t)s.seal_requests, "merge", (json_int_t)s.merge_requests);
	json_t *o = json_pack(
		"{s:s, s:I, s:I, s:s, s:f, s:I, s:I, s:I, s:b, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:f}, s:{s:I, s:I},"
		" s:{s:I, s:I}, s:{s:I, s:I}, s:o, s:o, s:o}",
		"file", path, "version", (json_int_t)info.version, "shards", (json_int_t)info.shards, "started", started,
		"seconds", secs, "records", (json_int_t)info.records, "blocks", (json_int_t)info.blocks, "bytes",
		(json_int_t)info.bytes, "ended", info.ended, "dropped", (json_int_t)info.end_dropped, "torn_at",
		(json_int_t)info.torn_at, "appends", "requests", (json_int_t)s.appends, "rows", (json_int_t)s.rows,
		"key_bytes", (json_int_t)s.key_bytes, "value_bytes", (json_int_t)s.value_bytes, "rows_per_s",
		secs > 0 ? (double)s.rows / secs : 0.0, "deletes", "requests", (json_int_t)s.deletes, "keys",
		(json_int_t)s.deleted, "gets", "requests", (json_int_t)s.gets, "found", (json_int_t)s.found, "scans",
		"requests", (json_int_t)s.scans, "rows", (json_int_t)s.scan_rows, "engine_events", ev, "shard_appends",
		shards, "requested", req);
	if (as_json) {
		json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		putchar('\n');
	} else {
		printf("trace %s: format version %u, %u shards, started %s, %.3f s recorded\n", path, info.version,
		       info.shards, started, secs);
		printf("  %llu records in %llu blocks, %llu bytes; %s\n", (unsigned long long)info.records,
		       (unsigned long long)info.blocks, (unsigned long long)info.bytes,
		       info.ended ? (info.end_dropped ? "stopped cleanly, with records dropped (the writer was behind)"
						      : "stopped cleanly")
				  : "no end block (still being written, or cut short)");
		if (info.ended && info.end_dropped)
			printf("  dropped: %llu records\n", (unsigned long long)info.end_dropped);
		if (info.torn_at)
			printf("  warning: the trace is torn at offset %llu; what follows it was not read\n",
			       (unsigned long long)info.torn_at);
		printf("  appends: %llu requests, %llu rows (%.0f rows/s), keys %llu bytes, values %llu bytes\n",
		       (unsigned long long)s.appends, (unsigned long long)s.rows, secs > 0 ? (double)s.rows / secs : 0.0,
		       (unsigned long long)s.key_bytes, (unsigned long long)s.value_bytes);
		printf("  deletes: %llu requests, %llu keys; gets: %llu (%llu found); scans: %llu (%llu rows)\n",
		       (unsigned long long)s.deletes, (unsigned long long)s.deleted, (unsigned long long)s.gets,
		       (unsigned long long)s.found, (unsigned long long)s.scans, (unsigned long long)s.scan_rows);
		printf("  seals asked for: %llu; merges asked for: %llu\n", (unsigned long long)s.seal_requests,
		       (unsigned long long)s.merge_requests);
		printf("  engine:");
		for (unsigned k = 0; k < TRACE_COUNT; k++)
			if (k != TRACE_APPEND)
				printf(" %s %llu%s", trace_event_names[k], (unsigned long long)s.events[k],
				       k + 1 < TRACE_COUNT ? "," : "\n");
		for (uint32_t i = 0; s.rows > 0 && i <= s.max_shard && i < 16; i++)
			printf("  shard %u: %llu rows, %llu bytes appended\n", i, (unsigned long long)s.shard_rows[i],
			       (unsigned long long)s.shard_bytes[i]);
		if (s.max_shard >= 16)
			printf("  (%u more shards: --json lists every one)\n", s.max_shard + 1 - 16);
	}
	json_decref(o);
	return 0;
}
