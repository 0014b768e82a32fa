#include "metrics.h"
#include "../cluster/cluster.h"

#include "../host/host.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/pool.h"
#include "../objstore/objstore.h"
#include "../policy/runtime.h"
#include "http.h"

/** Upper bounds (seconds) of the latency histogram buckets. */
static const double metrics_bounds[] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
					0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    0.25,
					0.5,     1,        2.5,     5,      10,      30,     60};
/** Upper bounds (seconds) of the exclusive-lock hold and wait buckets: a commit's swap is
 *  O(1), so microseconds, and anything from a millisecond up is a stall. */
static const double metrics_lock_bounds[] = {0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005,
					     0.0001,   0.00025,   0.0005,   0.001,   0.0025,   0.005,
					     0.01,     0.025,     0.1,      1};
/** Number of elements of a static array. */
#define METRICS_LEN(a) (sizeof(a) / sizeof((a)[0]))
/** Most buckets of any histogram above. */
#define METRICS_MAX_BOUNDS 32

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

/** The series of one histogram in seconds from a nanosecond hist, with bucket bounds
 *  (seconds) and labels ("a=\"b\"", or "" for none): cumulative buckets, +Inf, sum, count. */
static void
mo_hist_series(struct metrics_out *m, const char *name, const char *labels, const struct hist *h,
	       const double *bounds, size_t nb)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum[METRICS_MAX_BOUNDS];
	memset(cum, 0, sizeof(cum));
	if (nb > METRICS_MAX_BOUNDS)
		nb = METRICS_MAX_BOUNDS;
	struct hist_iter it;
	struct hist_bucket b;
	uint64_t total = 0;
	hist_iter_init(&it, h);
	while (hist_iter_next(&it, &b)) {
		total += b.count;
		for (size_t i = 0; i < nb; i++)
			if ((double)b.hi <= bounds[i] * 1e9)
				cum[i] += b.count;
	}
	for (size_t i = 0; i < nb; i++)
		mo_printf(m, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[i],
			  (unsigned long long)cum[i]);
	mo_printf(m, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)total);
	if (labels[0]) {
		mo_printf(m, "%s_sum{%s} %.9f\n", name, labels, (double)hist_sum(h) / 1e9);
		mo_printf(m, "%s_count{%s} %llu\n", name, labels, (unsigned long long)total);
	} else {
		mo_printf(m, "%s_sum %.9f\n", name, (double)hist_sum(h) / 1e9);
		mo_printf(m, "%s_count %llu\n", name, (unsigned long long)total);
	}
}

/** A histogram family of one unlabelled series (mo_hist_series). */
static void
mo_hist_in(struct metrics_out *m, const char *name, const char *help, const struct hist *h,
	   const double *bounds, size_t nb)
{
	mo_head(m, name, "histogram", help);
	mo_hist_series(m, name, "", h, bounds, nb);
}

/** mo_hist_in with the latency buckets. */
static void
mo_hist(struct metrics_out *m, const char *name, const char *help, const struct hist *h)
{
	mo_hist_in(m, name, help, h, metrics_bounds, METRICS_LEN(metrics_bounds));
}

/** Read a small /proc file into buf (NUL-terminated). Its length, or -1. */
static ssize_t
metrics_read_proc(const char *path, char *buf, size_t cap)
{
	int fd = env.open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	ssize_t n = env.pread(fd, buf, cap - 1, 0);
	env.close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

int
metrics_proc_self(struct metrics_proc *out)
{
	char buf[4096];
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	const char *rp = metrics_read_proc("/proc/self/stat", buf, sizeof(buf)) > 0 ? strrchr(buf, ')') : NULL;
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0;
	/* After "pid (comm)": state is field 3, utime 14, stime 15, starttime 22, vsize 23, rss 24. */
	int got = rp ? sscanf(rp + 1,
			      " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
			      "%llu %llu %lld",
			      &utime, &stime, &start, &vsize, &rss)
		     : 0;
	if (got != 5 || tick <= 0)
		return -1;
	out->cpu_s = (double)(utime + stime) / (double)tick;
	out->start_ticks_s = (double)start / (double)tick;
	out->vsize = vsize;
	out->rss = (uint64_t)rss * (uint64_t)page;
	return 0;
}

/** The standard process_* series (Prometheus client conventions), read from /proc.
 *  A file that cannot be read leaves its series out. */
static void
mo_process(struct metrics_out *m)
{
	struct metrics_proc pr;
	if (metrics_proc_self(&pr) == 0) {
		mo_head(m, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
		mo_printf(m, "process_cpu_seconds_total %.2f\n", pr.cpu_s);
		mo_head(m, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
		mo_printf(m, "process_virtual_memory_bytes %llu\n", (unsigned long long)pr.vsize);
		mo_head(m, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
		mo_printf(m, "process_resident_memory_bytes %llu\n", (unsigned long long)pr.rss);
		char st[8192];
		const char *bt = metrics_read_proc("/proc/stat", st, sizeof(st)) > 0 ? strstr(st, "\nbtime ") : NULL;
		if (bt != NULL) {
			unsigned long long boot = strtoull(bt + 7, NULL, 10);
			mo_head(m, "process_start_time_seconds", "gauge",
				"Start time of the process since unix epoch in seconds.");
			mo_printf(m, "process_start_time_seconds %.2f\n", (double)boot + pr.start_ticks_s);
		}
	}
	DIR *d = opendir("/proc/self/fd");
	if (d != NULL) {
		uint64_t n = 0;
		for (struct dirent *e; (e = readdir(d)) != NULL;)
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
		mo_head(m, "process_open_fds", "gauge", "Number of open file descriptors.");
		mo_printf(m, "process_open_fds %llu\n", (unsigned long long)(n ? n - 1 : 0)); /* less opendir's */
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		mo_head(m, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
		if (rl.rlim_cur == RLIM_INFINITY)
			mo_printf(m, "process_max_fds +Inf\n");
		else
			mo_printf(m, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
	}
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
	/* Maxima since the open: strata_exclusive_lock_{hold,wait}_seconds are the histograms. */
	offsetof(strata_stats, max_exclusive_ns),
	offsetof(strata_stats, max_exclusive_wait_ns),
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

/** One counter family of the object store's requests, a series per operation kind. */
static void
mo_objstore_counter(struct metrics_out *m, const char *name, const char *help,
		    const struct objstore_op_stats *st, size_t n, size_t off)
{
	mo_head(m, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		uint64_t v;
		memcpy(&v, (const char *)&st[i] + off, sizeof(v));
		mo_printf(m, "%s{op=\"%s\"} %llu\n", name, st[i].op, (unsigned long long)v);
	}
}

/** The object store's requests per operation kind (none for a local store). */
static void
mo_objstore(struct metrics_out *m, strata *db)
{
	struct objstore_op_stats st[OBJSTORE_MAX_OP_KINDS];
	size_t n = strata_objstore_stats(db, st, OBJSTORE_MAX_OP_KINDS);
	if (n == 0)
		return;
	mo_objstore_counter(m, "strata_objstore_requests_total",
			    "Object-store requests by operation kind (each attempt counts, retries too).", st, n,
			    offsetof(struct objstore_op_stats, requests));
	static const struct {
		const char *cls;
		size_t off;
	} classes[] = {
		{"4xx", offsetof(struct objstore_op_stats, client_errors)},
		{"5xx", offsetof(struct objstore_op_stats, server_errors)},
		{"throttled", offsetof(struct objstore_op_stats, throttled)},
		{"transport", offsetof(struct objstore_op_stats, transport_errors)},
		{"timeout", offsetof(struct objstore_op_stats, timeouts)},
	};
	mo_head(m, "strata_objstore_errors_total", "counter",
		"Failed object-store attempts by operation kind and class: 4xx (final answers: not found, "
		"exists, conflict, auth), 5xx (500, 502, 504), throttled (429, 503), transport (refused, "
		"reset, dropped) and timeout.");
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < METRICS_LEN(classes); c++) {
			uint64_t v;
			memcpy(&v, (const char *)&st[i] + classes[c].off, sizeof(v));
			mo_printf(m, "strata_objstore_errors_total{op=\"%s\",class=\"%s\"} %llu\n", st[i].op,
				  classes[c].cls, (unsigned long long)v);
		}
	mo_objstore_counter(m, "strata_objstore_retries_total",
			    "Object-store attempts repeated after a retryable failure.", st, n,
			    offsetof(struct objstore_op_stats, retries));
	mo_objstore_counter(m, "strata_objstore_indeterminate_total",
			    "Object-store attempts that failed after they were sent (they may have been applied; "
			    "a manifest write is then read back).", st, n,
			    offsetof(struct objstore_op_stats, indeterminate));
	mo_objstore_counter(m, "strata_objstore_sent_bytes_total", "Object-store request body bytes sent.", st,
			    n, offsetof(struct objstore_op_stats, bytes_sent));
	mo_objstore_counter(m, "strata_objstore_received_bytes_total",
			    "Object-store response body bytes received.", st, n,
			    offsetof(struct objstore_op_stats, bytes_received));
	mo_head(m, "strata_objstore_request_duration_seconds", "histogram",
		"Object-store request durations by operation kind, from the first attempt to the answer "
		"(retries and their backoff included).");
	for (size_t i = 0; i < n; i++) {
		if (st[i].latency_ns == NULL)
			continue;
		char lab[64];
		snprintf(lab, sizeof(lab), "op=\"%s\"", st[i].op);
		mo_hist_series(m, "strata_objstore_request_duration_seconds", lab, st[i].latency_ns,
			       metrics_bounds, METRICS_LEN(metrics_bounds));
	}
}

int
metrics_render(const struct metrics_src *a, const struct runtime_stats *rs, struct buf *out)
{
	struct metrics_out m = {.b = out};
	mo_head(&m, "strata_build_info", "gauge", "Version of the running node (always 1).");
	mo_printf(&m, "strata_build_info{version=\"%s\"} 1\n", STRATA_VERSION);
	mo_head(&m, "strata_uptime_seconds", "gauge", "Seconds since the node started serving.");
	mo_printf(&m, "strata_uptime_seconds %.3f\n", (double)(env.mono_ns() - a->req->start_ns) / 1e9);

	mo_process(&m);
	mo_hist(&m, "strata_append_latency_seconds", "Latency of appends (WAL write and group-commit sync).",
		a->req->append_ns);
	mo_hist(&m, "strata_get_latency_seconds", "Latency of point reads.", a->req->get_ns);
	mo_head(&m, "strata_http_request_duration_seconds", "histogram",
		"Time from a request's first byte to its complete response, by handler (route name).");
	for (size_t h = 0; h < a->req->handlers; h++) {
		char lab[64];
		snprintf(lab, sizeof(lab), "handler=\"%s\"", a->req->handler[h].name);
		mo_hist_series(&m, "strata_http_request_duration_seconds", lab, a->req->handler[h].ns, metrics_bounds,
			       METRICS_LEN(metrics_bounds));
	}
	mo_head(&m, "strata_http_stage_seconds", "histogram",
		"Where the requests served by a worker job (appends, gets, deletes of rows) spent their time, "
		"by stage: read (first byte to body parsed), loop (to the job's submit), queue (waiting for a "
		"worker), decode (batch decoding, key checks), engine (the store's call), handoff (the "
		"completion waiting for the loop), respond (building the response), reply (writing it).");
	for (int i = 0; i < REQSTATS_STAGES; i++) {
		char lab[32];
		snprintf(lab, sizeof(lab), "stage=\"%s\"", reqstats_stage_name(i));
		mo_hist_series(&m, "strata_http_stage_seconds", lab, a->req->stage_ns[i], metrics_lock_bounds,
			       METRICS_LEN(metrics_lock_bounds));
	}
	mo_head(&m, "strata_http_loop_lag_seconds", "histogram",
		"How late the HTTP loop's 10 ms timer fired: time the loop could not read its sockets "
		"(a request arriving then waits before its first stage).");
	mo_hist_series(&m, "strata_http_loop_lag_seconds", "", a->req->loop_lag_ns, metrics_lock_bounds,
		       METRICS_LEN(metrics_lock_bounds));
	const struct hist *hold = NULL, *wait = NULL;
	strata_lock_hists(a->db, &hold, &wait);
	mo_hist_in(&m, "strata_exclusive_lock_hold_seconds",
		   "Holds of a shard's exclusive lock (view swaps: seal, merge commit), every shard.", hold,
		   metrics_lock_bounds, METRICS_LEN(metrics_lock_bounds));
	mo_hist_in(&m, "strata_exclusive_lock_wait_seconds",
		   "Waits to take a shard's exclusive lock (behind appends and readers), every shard.", wait,
		   metrics_lock_bounds, METRICS_LEN(metrics_lock_bounds));

	mo_objstore(&m, a->db);

	strata_store_stats ss = {0};
	strata_store_stats_get(a->db, &ss);
	const struct metrics_scalar reaper[] = {
		{"strata_deletes_pending_objects", "gauge",
		 "Objects no manifest names any more (merged generations, compacted runs), queued for the "
		 "reaper's paced deletes.", ss.deletes_pending_objects},
		{"strata_deletes_pending_bytes", "gauge", "Bytes still to free of the queued deletes.",
		 ss.deletes_pending_bytes},
		{"strata_deleted_objects_total", "counter", "Objects the reaper deleted since the open.",
		 ss.deleted_objects},
		{"strata_deleted_bytes_total", "counter", "Bytes the reaper freed since the open.", ss.deleted_bytes},
	};
	mo_scalars(&m, reaper, sizeof(reaper) / sizeof(reaper[0]));

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
		{"strata_scan_rows_total", "counter", "Rows streamed by scans.", a->req->scan_rows},
		{"strata_scan_waits_total", "counter", "Scan chunks held back until a slow client drained its queue.",
		 a->req->scan_waits},
		{"strata_http_auth_failures_total", "counter", "Requests refused for a missing or wrong token.",
		 a->req->auth_failures},
		{"strata_http_slow_requests_total", "counter",
		 "Requests that took --slow-request-us or more (logged in GET /v1/slow-requests).",
		 a->req->slow_total},
	};
	mo_scalars(&m, rt, sizeof(rt) / sizeof(rt[0]));

	struct http_stats hs;
	memset(&hs, 0, sizeof(hs));
	if (a->http)
		http_server_stats(a->http, &hs);
	mo_head(&m, "strata_http_requests_total", "counter",
		"HTTP responses by handler (route name; \"protocol\": refused before any route, a malformed "
		"request or a limit), method and status code.");
	for (size_t h = 0; h < a->req->handlers; h++)
		for (int meth = 0; meth < REQSTATS_METHODS; meth++)
			for (int c = 0; c < HTTP_MAX_STATUS; c++) {
				uint64_t v = a->req->handler[h].responses[meth][c];
				if (v)
					mo_printf(&m,
						  "strata_http_requests_total{handler=\"%s\",method=\"%s\",code=\"%d\"} "
						  "%llu\n",
						  a->req->handler[h].name, reqstats_method_name(meth), c,
						  (unsigned long long)v);
			}
	for (int c = 0; c < HTTP_MAX_STATUS; c++)
		if (hs.own_by_status[c])
			mo_printf(&m,
				  "strata_http_requests_total{handler=\"protocol\",method=\"unknown\",code=\"%d\"} "
				  "%llu\n",
				  c, (unsigned long long)hs.own_by_status[c]);
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
	if (a->cluster != NULL) {
		struct cluster_stats cs;
		cluster_stats(a->cluster, &cs);
		const struct metrics_scalar cl[] = {
			{"strata_cluster_members", "gauge", "Live members (node keys in etcd) at the last read.",
			 cs.members},
			{"strata_cluster_shards_served", "gauge", "Shards this node serves now.", cs.owned},
			{"strata_cluster_degraded", "gauge",
			 "1 while etcd cannot be reached or this node's lease is not confirmed.", (uint64_t)cs.degraded},
			{"strata_cluster_acquisitions_total", "counter", "Shards this node took (key created, claimed).",
			 cs.acquired},
			{"strata_cluster_handoffs_total", "counter", "Shards this node handed to a member that joined.",
			 cs.handed_off},
			{"strata_cluster_shards_lost_total", "counter",
			 "Shards this node stopped serving because its lease lapsed or another took them.", cs.lost},
			{"strata_cluster_claim_failures_total", "counter", "Claims of a shard that failed.",
			 cs.claim_failures},
			{"strata_cluster_leases_total", "counter", "etcd leases granted (1 + the times one lapsed).",
			 cs.leases},
			{"strata_cluster_keepalives_total", "counter", "Lease keep-alives sent.", cs.keepalives},
			{"strata_cluster_keepalive_failures_total", "counter", "Lease keep-alives that failed.",
			 cs.keepalive_failures},
			{"strata_cluster_etcd_errors_total", "counter", "etcd calls that failed.", cs.etcd_errors},
			{"strata_cluster_etcd_revision", "gauge", "The etcd revision of the last read.",
			 (uint64_t)cs.revision},
		};
		mo_scalars(&m, cl, sizeof(cl) / sizeof(cl[0]));
		const struct hist *tk, *cl_ns;
		cluster_hists(a->cluster, &tk, &cl_ns);
		mo_hist(&m, "strata_cluster_takeover_seconds",
			"From the read that found a shard without an owner to this node serving it (claim included).",
			tk);
		mo_hist(&m, "strata_cluster_claim_seconds", "Claims of the shards placement gave this node.", cl_ns);
		mo_head(&m, "strata_cluster_keepalive_seconds", "gauge", "Round trip of the last lease keep-alive.");
		mo_printf(&m, "strata_cluster_keepalive_seconds %.6f\n", (double)cs.keepalive_rtt_ns / 1e9);
	}
	return m.rc;
}
