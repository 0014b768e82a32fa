#include "metrics.h"

#include "../host/host.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/pool.h"
#include "../policy/runtime.h"
#include "http.h"

/** Upper bounds (seconds) of the latency histogram buckets. */
static const double metrics_bounds[] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
					0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    0.25,
					0.5,     1,        2.5,     5,      10,      30,     60};

/** Output under construction; the first failure sticks. */
struct metrics_out {
	/** Destination. */
	struct buf *b;
	/** First failure (STRATA_ENOMEM), else 0. */
	int rc;
};

static void
mo_printf(struct metrics_out *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
mo_printf(struct metrics_out *m, const char *fmt, ...)
{
	if (m->rc)
		return;
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		m->rc = STRATA_EINVAL;
		return;
	}
	m->rc = buf_append(m->b, tmp, (size_t)n);
}

static void
mo_head(struct metrics_out *m, const char *name, const char *type, const char *help)
{
	mo_printf(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/** A histogram in seconds from a nanosecond hist: cumulative buckets, +Inf, sum, count. */
static void
mo_hist(struct metrics_out *m, const char *name, const char *help, const struct hist *h)
{
	mo_head(m, name, "histogram", help);
	size_t nb = sizeof(metrics_bounds) / sizeof(metrics_bounds[0]);
	uint64_t cum[sizeof(metrics_bounds) / sizeof(metrics_bounds[0])];
	memset(cum, 0, sizeof(cum));
	struct hist_iter it;
	struct hist_bucket b;
	uint64_t total = 0;
	hist_iter_init(&it, h);
	while (hist_iter_next(&it, &b)) {
		total += b.count;
		for (size_t i = 0; i < nb; i++)
			if ((double)b.hi <= metrics_bounds[i] * 1e9)
				cum[i] += b.count;
	}
	for (size_t i = 0; i < nb; i++)
		mo_printf(m, "%s_bucket{le=\"%g\"} %llu\n", name, metrics_bounds[i], (unsigned long long)cum[i]);
	mo_printf(m, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)total);
	mo_printf(m, "%s_sum %.9f\n", name, (double)hist_sum(h) / 1e9);
	mo_printf(m, "%s_count %llu\n", name, (unsigned long long)total);
}

/** Percentile gauges of a nanosecond hist, in seconds (label percentile="99"). */
static void
mo_quantiles(struct metrics_out *m, const char *name, const char *help, const struct hist *h)
{
	static const double ps[] = {50, 90, 99, 99.9, 100};
	mo_head(m, name, "gauge", help);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
		mo_printf(m, "%s{percentile=\"%g\"} %.9f\n", name, ps[i], (double)hist_percentile(h, ps[i]) / 1e9);
}

/** One per-shard series family. */
struct metrics_shard_family {
	/** Metric name. */
	const char *name;
	/** counter or gauge. */
	const char *type;
	/** HELP text. */
	const char *help;
	/** Offset of the strata_stats field. */
	size_t off;
	/** Divide the value by this (1e9 for ns -> s). */
	double scale;
};

/** One unlabelled series. */
struct metrics_scalar {
	/** Metric name. */
	const char *name;
	/** counter or gauge. */
	const char *type;
	/** HELP text. */
	const char *help;
	/** Value. */
	uint64_t v;
};

static void
mo_scalars(struct metrics_out *m, const struct metrics_scalar *sc, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		mo_head(m, sc[i].name, sc[i].type, sc[i].help);
		mo_printf(m, "%s %llu\n", sc[i].name, (unsigned long long)sc[i].v);
	}
}

#define METRICS_FAMILY(field, kind, metric, scale, help) {metric, kind, help, offsetof(strata_stats, field), scale},
/** The per-shard families: every STRATA_STATS_FIELDS entry, in its order. */
static const struct metrics_shard_family metrics_shard[] = {STRATA_STATS_FIELDS(METRICS_FAMILY)};
#undef METRICS_FAMILY

/** strata_stats members /metrics leaves out (bookkeeping positions, not series to watch). */
static const size_t metrics_unexported[] = {
	offsetof(strata_stats, manifest_version),
	offsetof(strata_stats, replay_after),
	offsetof(strata_stats, next_generation),
};

/** Whether the strata_stats member at offset off is exported. */
static int
metrics_exported(size_t off)
{
	for (size_t i = 0; i < sizeof(metrics_unexported) / sizeof(metrics_unexported[0]); i++)
		if (metrics_unexported[i] == off)
			return 0;
	return 1;
}

int
metrics_render(struct api *a, const struct runtime_stats *rs, struct buf *out)
{
	struct metrics_out m = {.b = out};
	mo_head(&m, "strata_build_info", "gauge", "Version of the running node (always 1).");
	mo_printf(&m, "strata_build_info{version=\"%s\"} 1\n", STRATA_VERSION);
	mo_head(&m, "strata_uptime_seconds", "gauge", "Seconds since the node started serving.");
	mo_printf(&m, "strata_uptime_seconds %.3f\n", (double)(env.mono_ns() - a->start_ns) / 1e9);

	mo_hist(&m, "strata_append_latency_seconds", "Latency of appends (WAL write and group-commit sync).",
		a->append_ns);
	mo_quantiles(&m, "strata_append_latency_percentile_seconds", "Append latency percentiles since start.",
		     a->append_ns);
	mo_hist(&m, "strata_get_latency_seconds", "Latency of point reads.", a->get_ns);
	mo_quantiles(&m, "strata_get_latency_percentile_seconds", "Point read latency percentiles since start.",
		     a->get_ns);
	mo_hist(&m, "strata_http_request_duration_seconds",
		"Time from a request's first byte to its complete response.", a->request_ns);

	uint32_t n = strata_shards(a->db);
	strata_stats *st = env.calloc(n ? n : 1, sizeof(*st));
	if (st == NULL)
		return STRATA_ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		strata_shard_stats(a->db, i, &st[i]);
	for (size_t f = 0; f < sizeof(metrics_shard) / sizeof(metrics_shard[0]); f++) {
		const struct metrics_shard_family *fam = &metrics_shard[f];
		if (!metrics_exported(fam->off))
			continue;
		mo_head(&m, fam->name, fam->type, fam->help);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&st[i] + fam->off, sizeof(v));
			if (fam->scale == 1)
				mo_printf(&m, "%s{shard=\"%u\"} %llu\n", fam->name, i, (unsigned long long)v);
			else
				mo_printf(&m, "%s{shard=\"%u\"} %.9f\n", fam->name, i, (double)v / fam->scale);
		}
	}
	env.free(st);

	const struct metrics_scalar rt[] = {
		{"strata_policy_version", "gauge", "Version of the running policy (1 + successful reloads).",
		 rs->policy_version},
		{"strata_policy_reloads_total", "counter", "Successful policy reloads.", rs->reloads},
		{"strata_policy_reload_failures_total", "counter", "Refused policy reloads.", rs->reload_failures},
		{"strata_policy_hook_runs_total", "counter", "Policy hook runs started.", rs->hook_runs},
		{"strata_policy_hook_errors_total", "counter", "Policy hook runs that failed.", rs->hook_errors},
		{"strata_policy_seals_total", "counter", "Seals started by the policy.", rs->policy_seals},
		{"strata_policy_merges_total", "counter", "Merge passes started by the policy.", rs->policy_merges},
		{"strata_policy_compactions_total", "counter", "Base compactions started by the policy.",
		 rs->policy_compactions},
		{"strata_policy_flush_timer_fires_total", "counter", "Flush timer fires.", rs->flush_timer_fires},
		{"strata_policy_sweeps_total", "counter", "Sweeper runs.", rs->sweeps},
		{"strata_pool_pending_jobs", "gauge", "Jobs queued or running on the worker pool.",
		 pool_pending(host_exec(a->host, HOST_FG))},
		{"strata_pool_refused_total", "counter", "Jobs refused because the worker pool queue was full.",
		 pool_refused(host_exec(a->host, HOST_FG))},
		{"strata_scan_rows_total", "counter", "Rows streamed by scans.", a->scan_rows},
		{"strata_scan_waits_total", "counter", "Scan chunks held back until a slow client drained its queue.",
		 a->scan_waits},
		{"strata_http_auth_failures_total", "counter", "Requests refused for a missing or wrong token.",
		 a->auth_failures},
	};
	mo_scalars(&m, rt, sizeof(rt) / sizeof(rt[0]));

	struct http_stats hs;
	memset(&hs, 0, sizeof(hs));
	if (a->http)
		http_server_stats(a->http, &hs);
	mo_head(&m, "strata_http_requests_total", "counter", "HTTP responses by status code.");
	for (int c = 0; c < HTTP_MAX_STATUS; c++)
		if (hs.by_status[c])
			mo_printf(&m, "strata_http_requests_total{code=\"%d\"} %llu\n", c,
				  (unsigned long long)hs.by_status[c]);
	const struct metrics_scalar ht[] = {
		{"strata_http_open_connections", "gauge", "HTTP connections open.", hs.open},
		{"strata_http_connections_total", "counter", "HTTP connections accepted.", hs.accepted},
		{"strata_http_refused_connections_total", "counter",
		 "HTTP connections refused at the connection limit.", hs.refused},
		{"strata_http_timeouts_total", "counter", "HTTP connections closed by a timeout.", hs.timeouts},
		{"strata_http_bad_requests_total", "counter", "Malformed or over-limit HTTP requests.",
		 hs.bad_requests},
	};
	mo_scalars(&m, ht, sizeof(ht) / sizeof(ht[0]));
	return m.rc;
}
