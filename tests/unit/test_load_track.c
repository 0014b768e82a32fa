/*
 * test_load_track.c — the load runner's bookkeeping: the tracker of acknowledged
 * rows (newest sequence number wins, unknown outcomes are tolerated, the bound
 * holds), threshold expressions, the metric map, durations, and per-interval
 * statistics. The runner's files are compiled in directly: they are not part of
 * libstrata.a (they belong to the CLI).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../node/load/load_metric.c"
#include "../../node/load/load_track.c"
#include "harness.h"

/** Read back key k of shard sh through entry lookup: its index, or UINT64_MAX. */
static uint64_t
find_entry(struct load_track *t, uint32_t sh, const char *k)
{
	for (uint64_t i = 0; i < load_track_capacity(t); i++) {
		uint32_t shard;
		const void *key;
		size_t klen;
		if (load_track_entry(t, i, &shard, &key, &klen) && shard == sh && klen == strlen(k) &&
		    memcmp(key, k, klen) == 0)
			return i;
	}
	return UINT64_MAX;
}

static uint64_t
vh(const char *v)
{
	return load_track_hash(v, strlen(v));
}

TEST(newest_acknowledged_value_wins_whatever_the_ack_order)
{
	struct load_track *t;
	REQUIRE_EQ(load_track_new(100, &t), 0);
	/* seq 7 acknowledged after seq 9 (two appends in flight): 9 stays. */
	load_track_ack(t, 0, "k", 1, 9, vh("new"), 3);
	load_track_ack(t, 0, "k", 1, 7, vh("old"), 3);
	uint64_t i = find_entry(t, 0, "k");
	REQUIRE(i != UINT64_MAX);
	CHECK_EQ(load_track_check(t, i, 1, "new", 3), 0);
	CHECK_EQ(load_track_check(t, i, 1, "old", 3), 2);
	load_track_ack(t, 0, "k", 1, 12, vh("newest"), 6);
	CHECK_EQ(load_track_check(t, i, 1, "newest", 6), 0);
	CHECK_EQ(load_track_check(t, i, 1, "new", 3), 2);
	CHECK_EQ(load_track_count(t), 1);
	load_track_delete(t);
}

TEST(missing_row_is_lost)
{
	struct load_track *t;
	REQUIRE_EQ(load_track_new(100, &t), 0);
	load_track_ack(t, 3, "a", 1, 1, vh("v"), 1);
	uint64_t i = find_entry(t, 3, "a");
	REQUIRE(i != UINT64_MAX);
	CHECK_EQ(load_track_check(t, i, 0, NULL, 0), 1);
	CHECK_EQ(load_track_check(t, i, 1, "v", 1), 0);
	CHECK_EQ(load_track_check(t, i, 1, "w", 1), 2);
	CHECK_EQ(load_track_check(t, i, 1, "vv", 2), 2);
	load_track_delete(t);
}

TEST(shards_keep_keys_apart)
{
	struct load_track *t;
	REQUIRE_EQ(load_track_new(100, &t), 0);
	load_track_ack(t, 0, "k", 1, 5, vh("zero"), 4);
	load_track_ack(t, 1, "k", 1, 2, vh("one"), 3);
	CHECK_EQ(load_track_count(t), 2);
	uint64_t i0 = find_entry(t, 0, "k"), i1 = find_entry(t, 1, "k");
	REQUIRE(i0 != UINT64_MAX && i1 != UINT64_MAX && i0 != i1);
	CHECK_EQ(load_track_check(t, i0, 1, "zero", 4), 0);
	CHECK_EQ(load_track_check(t, i1, 1, "one", 3), 0);
	load_track_delete(t);
}

TEST(failed_append_makes_a_different_value_uncertain_not_lost)
{
	struct load_track *t;
	REQUIRE_EQ(load_track_new(100, &t), 0);
	load_track_ack(t, 0, "k", 1, 4, vh("acked"), 5);
	load_track_uncertain(t, 0, "k", 1);
	uint64_t i = find_entry(t, 0, "k");
	REQUIRE(i != UINT64_MAX);
	CHECK_EQ(load_track_check(t, i, 1, "maybe", 5), 3);
	CHECK_EQ(load_track_check(t, i, 1, "acked", 5), 0);
	/* Absent is lost even so: an acknowledged row never disappears. */
	CHECK_EQ(load_track_check(t, i, 0, NULL, 0), 1);
	/* A key only ever failed has nothing to verify. */
	load_track_uncertain(t, 0, "never", 5);
	CHECK_EQ(find_entry(t, 0, "never"), UINT64_MAX);
	load_track_delete(t);
}

TEST(bound_is_kept_and_counted)
{
	struct load_track *t;
	REQUIRE_EQ(load_track_new(1000, &t), 0);
	char k[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(k, sizeof(k), "key%05d", i);
		load_track_ack(t, 0, k, strlen(k), (uint64_t)i + 1, vh(k), (uint32_t)strlen(k));
	}
	CHECK_EQ(load_track_count(t), 1000);
	CHECK_EQ(load_track_overflow(t), 4000);
	/* Keys already tracked still update past the bound. */
	load_track_ack(t, 0, "key00000", 8, 99999, vh("x"), 1);
	CHECK_EQ(load_track_overflow(t), 4000);
	uint64_t i = find_entry(t, 0, "key00000");
	REQUIRE(i != UINT64_MAX);
	CHECK_EQ(load_track_check(t, i, 1, "x", 1), 0);
	load_track_delete(t);
}

TEST(growth_keeps_every_key)
{
	struct load_track *t;
	REQUIRE_EQ(load_track_new(1000000, &t), 0);
	char k[32];
	for (int i = 0; i < 20000; i++) {
		snprintf(k, sizeof(k), "g%d", i);
		load_track_ack(t, (uint32_t)(i % 3), k, strlen(k), (uint64_t)i + 1, vh(k), (uint32_t)strlen(k));
	}
	CHECK_EQ(load_track_count(t), 20000);
	uint64_t seen = 0, good = 0;
	for (uint64_t i = 0; i < load_track_capacity(t); i++) {
		uint32_t shard;
		const void *key;
		size_t klen;
		if (!load_track_entry(t, i, &shard, &key, &klen))
			continue;
		seen++;
		good += load_track_check(t, i, 1, key, klen) == 0;
	}
	CHECK_EQ(seen, 20000);
	CHECK_EQ(good, 20000);
	load_track_delete(t);
}

static int
parse_ok(const char *expr, int *cmp, double *v)
{
	struct load_threshold t = { .metric = "m" };
	char msg[256];
	int rc = load_threshold_parse(&t, expr, msg, sizeof(msg));
	*cmp = t.cmp;
	*v = t.value;
	return rc;
}

TEST(threshold_expressions_parse_and_hold)
{
	int cmp;
	double v;
	REQUIRE_EQ(parse_ok("< 5", &cmp, &v), 0);
	CHECK_EQ(cmp, LOAD_CMP_LT);
	CHECK(v == 5);
	REQUIRE_EQ(parse_ok("<=2.5", &cmp, &v), 0);
	CHECK_EQ(cmp, LOAD_CMP_LE);
	CHECK(v == 2.5);
	REQUIRE_EQ(parse_ok("  == 0 ", &cmp, &v), 0);
	CHECK_EQ(cmp, LOAD_CMP_EQ);
	REQUIRE_EQ(parse_ok(">= 1e3", &cmp, &v), 0);
	CHECK_EQ(cmp, LOAD_CMP_GE);
	CHECK(v == 1000);
	REQUIRE_EQ(parse_ok("!= 3", &cmp, &v), 0);
	CHECK_EQ(cmp, LOAD_CMP_NE);
	REQUIRE_EQ(parse_ok("> -1", &cmp, &v), 0);
	CHECK_EQ(cmp, LOAD_CMP_GT);
	CHECK_EQ(parse_ok("5", &cmp, &v), -1);
	CHECK_EQ(parse_ok("< five", &cmp, &v), -1);
	CHECK_EQ(parse_ok("< 5 ms", &cmp, &v), -1);
	CHECK_EQ(parse_ok("=< 5", &cmp, &v), -1);
	CHECK_EQ(parse_ok("< nan", &cmp, &v), -1);

	CHECK(load_threshold_holds(LOAD_CMP_LT, 4.9, 5));
	CHECK(!load_threshold_holds(LOAD_CMP_LT, 5, 5));
	CHECK(load_threshold_holds(LOAD_CMP_LE, 5, 5));
	CHECK(!load_threshold_holds(LOAD_CMP_GT, 5, 5));
	CHECK(load_threshold_holds(LOAD_CMP_GE, 5, 5));
	CHECK(load_threshold_holds(LOAD_CMP_EQ, 0, 0));
	CHECK(!load_threshold_holds(LOAD_CMP_EQ, 1, 0));
	CHECK(load_threshold_holds(LOAD_CMP_NE, 1, 0));
}

TEST(metric_map_sets_replaces_and_suggests)
{
	struct load_metrics m = { 0 };
	char name[32];
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		REQUIRE_EQ(load_metrics_set(&m, name, i), 0);
	}
	REQUIRE_EQ(load_metrics_set(&m, "append.p99_ms", 1.5), 0);
	REQUIRE_EQ(load_metrics_set(&m, "append.p99_ms", 2.5), 0);
	double v = 0;
	CHECK(load_metrics_get(&m, "append.p99_ms", &v));
	CHECK(v == 2.5);
	CHECK(load_metrics_get(&m, "m299", &v));
	CHECK(v == 299);
	CHECK(!load_metrics_get(&m, "append.p999_ms", &v));
	CHECK_EQ(m.n, 301);
	char sug[256];
	load_metrics_suggest(&m, "apend.p99_ms", sug, sizeof(sug));
	CHECK(strncmp(sug, "append.p99_ms", 13) == 0);
	load_metrics_destroy(&m);
}

TEST(latency_metrics_come_from_the_histogram_in_ms_and_us)
{
	struct load_metrics m = { 0 };
	struct hist *h;
	REQUIRE_EQ(hist_new(LOAD_HIST_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS, &h), 0);
	/* Nothing recorded: no latency metrics (a threshold on them fails as "no such metric"). */
	REQUIRE_EQ(load_metrics_add_hist(&m, "w", h), 0);
	CHECK_EQ(m.n, 0);
	for (int i = 1; i <= 1000; i++)
		hist_record(h, (uint64_t)i * 1000000ull);
	REQUIRE_EQ(load_metrics_add_hist(&m, "w", h), 0);
	double v = 0;
	CHECK(load_metrics_get(&m, "w.p50_ms", &v) && fabs(v - 500) <= 0.5);
	CHECK(load_metrics_get(&m, "w.p999_ms", &v) && fabs(v - 999) <= 1);
	CHECK(load_metrics_get(&m, "w.max_ms", &v) && v == 1000);
	CHECK(load_metrics_get(&m, "w.p99_us", &v) && fabs(v - 990000) <= 1000);
	CHECK(load_metrics_get(&m, "w.min_ms", &v) && v == 1);
	hist_delete(h);
	load_metrics_destroy(&m);
}

TEST(durations_parse_with_units)
{
	CHECK(load_parse_duration("30s") == 30);
	CHECK(load_parse_duration("1.5") == 1.5);
	CHECK(fabs(load_parse_duration("500ms") - 0.5) < 1e-12);
	CHECK(fabs(load_parse_duration("250us") - 0.00025) < 1e-12);
	CHECK(load_parse_duration("2m") == 120);
	CHECK(load_parse_duration("1h") == 3600);
	CHECK(load_parse_duration("") < 0);
	CHECK(load_parse_duration("-1s") < 0);
	CHECK(load_parse_duration("5 s") < 0);
	CHECK(load_parse_duration("5d") < 0);
	CHECK(load_parse_duration("1e9h") < 0);
	CHECK(load_parse_duration(NULL) < 0);
}

TEST(interval_series_counts_each_interval_once)
{
	struct load_stat *s;
	REQUIRE_EQ(load_stat_new("w", 1, &s), 0);
	for (int i = 0; i < 10; i++)
		load_stat_record(s, 2000000, 1000000, 3, i == 0);
	REQUIRE_EQ(load_stat_tick(s, 1.0), 0);
	load_stat_record(s, 9000000, 8000000, 1, 0);
	REQUIRE_EQ(load_stat_tick(s, 2.0), 0);
	REQUIRE_EQ(load_stat_tick(s, 3.0), 0);
	REQUIRE_EQ(s->nseries, 3);
	CHECK_EQ(s->series[0].count, 10);
	CHECK_EQ(s->series[0].rows, 30);
	CHECK_EQ(s->series[0].errors, 1);
	CHECK(s->series[0].max >= 2000000 && s->series[0].max <= 2002000);
	CHECK_EQ(s->series[1].count, 1);
	CHECK(s->series[1].p50 >= 9000000 && s->series[1].p50 <= 9010000);
	CHECK_EQ(s->series[2].count, 0);
	CHECK_EQ(s->series[2].max, 0);
	CHECK_EQ(hist_count(s->lat), 11);
	/* Corrected latency is never below the uncorrected one. */
	load_stat_record(s, 1000, 5000000, 0, 0);
	CHECK(hist_min(s->lat) >= 2000000);
	CHECK_EQ(s->count, 12);
	load_stat_delete(s);
}

TEST(errors_keep_counts_and_distinct_samples_per_kind)
{
	struct load_errors e;
	memset(&e, 0, sizeof(e));
	load_errors_add(&e, "timeout", "append shard 0: timed out");
	load_errors_add(&e, "timeout", "append shard 0: timed out");
	load_errors_add(&e, "timeout", "get shard 1: timed out");
	load_errors_add(&e, "http_5xx", "status 503");
	CHECK_EQ(e.total, 4);
	CHECK_EQ(e.n, 2);
	CHECK_EQ(e.count[0], 3);
	CHECK(strcmp(e.sample[0][0], "append shard 0: timed out") == 0);
	CHECK(strcmp(e.sample[0][1], "get shard 1: timed out") == 0);
	CHECK(e.sample[0][2][0] == '\0');
	char kind[16];
	for (int i = 0; i < LOAD_MAX_ERROR_KINDS + 5; i++) {
		snprintf(kind, sizeof(kind), "k%d", i);
		load_errors_add(&e, kind, NULL);
	}
	CHECK_EQ(e.n, LOAD_MAX_ERROR_KINDS);
	CHECK(strcmp(e.kind[LOAD_MAX_ERROR_KINDS - 1], "other") == 0);
	CHECK_EQ(e.total, 4 + LOAD_MAX_ERROR_KINDS + 5);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(newest_acknowledged_value_wins_whatever_the_ack_order);
	RUN(missing_row_is_lost);
	RUN(shards_keep_keys_apart);
	RUN(failed_append_makes_a_different_value_uncertain_not_lost);
	RUN(bound_is_kept_and_counted);
	RUN(growth_keeps_every_key);
	RUN(threshold_expressions_parse_and_hold);
	RUN(metric_map_sets_replaces_and_suggests);
	RUN(latency_metrics_come_from_the_histogram_in_ms_and_us);
	RUN(durations_parse_with_units);
	RUN(interval_series_counts_each_interval_once);
	RUN(errors_keep_counts_and_distinct_samples_per_kind);
	return HARNESS_END("test_load_track");
}
