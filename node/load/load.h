/*
 * load.h — `strata load SCRIPT.lua`: a LuaJIT load generator for a strata node.
 *
 * One libev loop thread runs the script's Lua state (JIT on): every iteration of
 * a scenario is a coroutine; a verb (ctx:append, ctx:get, ...) hands a request to
 * the target and yields until it completes. Two targets: HTTP through libcurl's
 * multi interface driven by the same loop, and an embedded store whose calls run
 * on worker threads. Open-model scenarios start iterations at a constant arrival
 * rate and measure latency from the intended start (coordinated-omission
 * correction, as wrk2); closed-model scenarios run a fixed number of virtual
 * users. Latencies go to log-linear histograms (node/lib/hist.h); thresholds,
 * a summary table, JSON and a self-contained HTML report come at the end.
 *
 * Files, from the top down: load_run.c (runner, scheduling, phases, load_main) calls
 * load_conf.c (the script's configuration, wrk hooks), load_verb.c (ctx and its verbs),
 * load_report.c (summary, JSON and HTML), load_http.c (HTTP target) and load_embed.c
 * (embedded target); all of them call load_core.c (names, clock, requests and target
 * slots, histogram objects; load_core.h holds the run's state), load_metric.c (metrics,
 * thresholds) and load_track.c (acknowledged-row tracking). Nothing calls upwards.
 */
#ifndef STRATA_LOAD_H
#define STRATA_LOAD_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "../lib/hist.h"
#include "../strata.h"

struct lua_State;

/** Exit code: the run finished and every threshold passed. */
#define LOAD_EXIT_OK 0
/** Exit code: the run finished and a threshold failed. */
#define LOAD_EXIT_THRESHOLD 1
/** Exit code: bad usage, a bad script, or a target that cannot be used. */
#define LOAD_EXIT_ERROR 2

/** Most scenarios in one script. */
#define LOAD_MAX_SCENARIOS 64
/** Most stages of one scenario. */
#define LOAD_MAX_STAGES 64
/** Most thresholds of one script. */
#define LOAD_MAX_THRESHOLDS 256
/** Most rows in one append. */
#define LOAD_MAX_BATCH_ROWS (1u << 20)
/** Largest request body built (an append batch or a policy), bytes. */
#define LOAD_MAX_BODY_BYTES (512ull << 20)
/** Largest response body kept, bytes (more is an error of kind "too_big"). */
#define LOAD_MAX_RESPONSE_BYTES (256ull << 20)
/** Most rows one scan returns (its limit is clamped to this). */
#define LOAD_MAX_SCAN_ROWS 100000u
/** Largest connection / worker count. */
#define LOAD_MAX_SLOTS 4096u
/** Most open-model arrivals waiting for a free iteration slot, per scenario. */
#define LOAD_MAX_PENDING (1u << 20)
/** Distinct error messages kept per error kind for the summary. */
#define LOAD_ERROR_SAMPLES 3
/** Most distinct error kinds counted (more fold into "other"). */
#define LOAD_MAX_ERROR_KINDS 64
/** Most custom metrics a script sets. */
#define LOAD_MAX_CUSTOM 256
/** Longest metric or scenario name. */
#define LOAD_NAME_MAX 128
/** Latency histograms: lowest discernible value (1 µs), in ns. */
#define LOAD_HIST_LOWEST 1000ull

/** Verbs a script calls; each has its own latency histogram. */
enum load_verb {
	LOAD_VERB_APPEND,
	LOAD_VERB_GET,
	LOAD_VERB_SCAN,
	LOAD_VERB_SEAL,
	LOAD_VERB_MERGE,
	LOAD_VERB_POLICY,
	LOAD_VERB_GET_POLICY,
	LOAD_VERB_STATS,
	LOAD_VERB_HTTP,
	LOAD_VERB_COUNT,
	/** Read-back of a tracked row by the verifier (not a script verb). */
	LOAD_VERB_VERIFY = LOAD_VERB_COUNT,
};

/** Options of one run, from the command line. */
struct load_opts {
	/** Path of the script. */
	const char *script;
	/** Base URL of a node (http://host:port), or NULL with embedded_dir. */
	const char *target;
	/** Data directory of an in-process store, or NULL. */
	const char *embedded_dir;
	/** Embedded: shards to open (0 = the script's `shards`, else the store's count,
	 *  STRATA_DEFAULT_SHARDS for a new store). */
	uint32_t shards;
	/** Embedded: STRATA_SYNC_* mode (-1 = the script's, else fsync). */
	int sync;
	/** Embedded: merge policy file (NULL = the script's `policy`, else the built-in default). */
	const char *policy;
	/** Total duration in seconds (0 = the script's `duration`, else 10). */
	double duration_s;
	/** HTTP connections or embedded worker threads (0 = the script's, else 32). */
	unsigned connections;
	/** wrk-style scripts: constant request rate per second (0 = closed model). */
	double rate;
	/** wrk-style scripts: number of setup(thread) calls. */
	unsigned threads;
	/** Per-request timeout, seconds (0 = 30). */
	double timeout_s;
	/** Wait for iterations in flight after the end, seconds (negative = 10). */
	double grace_s;
	/** Progress line interval, seconds (0 = 1). */
	double interval_s;
	/** No progress lines. */
	int quiet;
	/** Write the JSON result here, or NULL. */
	const char *json_path;
	/** Write the HTML report here, or NULL. */
	const char *report_path;
	/** Bearer token for the node, or NULL. */
	const char *token;
	/** Base seed handed to the script as ctx.seed. */
	uint64_t seed;
	/** Most acknowledged rows tracked for verification. */
	uint64_t max_tracked;
	/** Embedded: record the store's workload into this trace file (node/lib/wtrace.h), or NULL. */
	const char *record_trace;
	/** Send appends as application/x-strata-batch instead of NDJSON (-1 = script's). */
	int batch_format;
	/** Arguments after `--`, for init(args) and ctx.args. */
	char **args;
	/** Number of args. */
	int nargs;
};

/** Error classes of a failed request. */
enum load_fail {
	/** Success. */
	LOAD_FAIL_NONE,
	/** Could not connect. */
	LOAD_FAIL_CONNECT,
	/** The request timed out. */
	LOAD_FAIL_TIMEOUT,
	/** Sending failed. */
	LOAD_FAIL_WRITE,
	/** Receiving failed or the connection closed early. */
	LOAD_FAIL_READ,
	/** Another transport failure. */
	LOAD_FAIL_TRANSPORT,
	/** The status code says the request failed. */
	LOAD_FAIL_STATUS,
	/** The response could not be parsed. */
	LOAD_FAIL_RESPONSE,
	/** The embedded engine returned an error code. */
	LOAD_FAIL_ENGINE,
	/** The verb is not available on this target. */
	LOAD_FAIL_UNSUPPORTED,
	/** The run ended before the request completed. */
	LOAD_FAIL_INTERRUPTED,
	/** The status differs from the one the script expected. */
	LOAD_FAIL_UNEXPECTED,
	/** The node is busy with the shard (429, 409, 503 "busy"; EBUSY/ECONFLICT embedded): counted
	 *  apart from the errors, and handed to the script as nil, msg, "busy", retry_after. */
	LOAD_FAIL_BUSY,
};

struct load_run;

/** Where one appended row's bytes are, and what its value hashes to. */
struct load_rowmeta {
	/** Offset of the key in load_req.keys. */
	uint64_t koff;
	/** Offset of the value in load_req.body (embedded target). */
	uint64_t voff;
	/** Key length. */
	uint32_t klen;
	/** Value length. */
	uint32_t vlen;
	/** load_track_hash of the value (0 when not tracking). */
	uint64_t vhash;
};

/** One request to a target. */
struct load_req {
	/** enum load_verb. */
	int verb;
	/** Shard addressed. */
	uint32_t shard;
	/** Key (get, verify) or scan bounds, owned. */
	struct buf key;
	/** Request body: NDJSON or batch rows (HTTP append), policy source, raw body. */
	struct buf body;
	/** Embedded append: the rows, pointing into body. */
	strata_row *rows;
	/** Number of rows of an append. */
	size_t nrows;
	/** Append: the raw keys of the rows, back to back (tracking). */
	struct buf keys;
	/** Append: one struct load_rowmeta per row. */
	struct buf rowmeta;
	/** Scan: prefix, start and end (owned, NUL-free lengths), and limit. */
	struct buf scan_prefix, scan_start, scan_end;
	/** Scan: at most this many rows. */
	uint32_t scan_limit;
	/** Scan: which bounds were given (bit 0 prefix, 1 start, 2 end). */
	unsigned scan_bounds;
	/** Scan: hand the rows back as an array of {key=, value=} (ctx:scan_rows), not an iterator. */
	int scan_rows;
	/** Stats: of the shard r->shard (ctx:stats(shard)), not the whole node. */
	int stats_shard;
	/** Raw HTTP: method, NUL-terminated. */
	char method[16];
	/** Raw HTTP: path and query, owned, NUL-terminated. */
	struct buf path;
	/** Raw HTTP: "Name: value" header lines, each NUL-terminated. */
	struct buf headers;
	/** Number of header lines. */
	unsigned nheaders;
	/** Raw HTTP: ask the target to collect response headers. */
	int want_headers;
	/** Expected status (0 = the verb's success statuses). */
	int expect;
	/** HTTP: 421s this request followed to the owner they named (the target's). */
	unsigned redirects;

	/** Outcome: enum load_fail. */
	int fail;
	/** HTTP status, or the embedded equivalent (200, 404, 400, 409, 500). */
	int status;
	/** Words for a failure. */
	char errmsg[512];
	/** Response body (value, JSON, NDJSON, packed scan rows). */
	struct buf resp;
	/** Response header lines "Name: value\r\n" when want_headers. */
	struct buf resp_headers;
	/** The response had a Retry-After header of retry_after_s seconds. */
	int has_retry_after;
	/** Seconds of that header. */
	double retry_after_s;
	/** Append: last sequence number acknowledged. */
	uint64_t last_seq;
	/** Append: rows the target acknowledged. */
	uint64_t appended;
	/** Merge: generations merged; pending: generations left. */
	uint64_t reclaimed, pending;
	/** Scan (embedded): rows are packed {u32 klen, key, u32 vlen, value} in resp. */
	int packed;
	/** Append: body is application/x-strata-batch (else NDJSON). */
	int batch;
	/** Monotonic time the target started the request, ns. */
	uint64_t t_send;
	/** Monotonic time it completed, ns. */
	uint64_t t_done;

	/** Completion the target calls on the loop thread (the runner's slot accounting). */
	void (*done)(struct load_req *r);
	/** What the runner does with the outcome once the slot is released. */
	void (*on_complete)(struct load_req *r);
	/** The run. */
	struct load_run *run;
	/** Runner's context (the iteration, or the tracked entry being verified). */
	void *ctx;
	/** Verifier: index of the tracked entry. */
	uint64_t track_idx;
	/** Append: record the rows for verification. */
	int track;
	/** Target's private state while in flight. */
	void *priv;
	/** Next in a queue or free list. */
	struct load_req *next;
};

/** A target: where requests go. Every call is on the loop thread. */
struct load_target {
	/** "http" or "embedded". */
	const char *kind;
	/** Description for the summary (URL or directory). */
	char desc[512];
	/** Requests the target runs at once; the runner never submits more. */
	unsigned slots;
	/** Shards of the store, or 0 when unknown (HTTP). */
	uint32_t shards;
	/** Start a request; r->done runs later on the loop thread, never from within. */
	void (*submit)(struct load_target *t, struct load_req *r);
	/** Abandon every request in flight (their done runs with LOAD_FAIL_INTERRUPTED
	 *  when they can be cancelled; embedded ones finish first). */
	void (*cancel_all)(struct load_target *t);
	/** Release everything; nothing may be in flight. */
	void (*destroy)(struct load_target *t);
};

/** Start the HTTP target for base_url with slots connections. */
int load_http_new(struct ev_loop *loop, const char *base_url, unsigned slots, double timeout_s,
		  const char *token, struct load_target **out);
/** Ask an HTTP target for GET /v1/stats (blocking, before the loop runs): -1 with err when the
 *  node cannot be reached; else 0, with *shards its shard count (0 when the reply has none).
 *  A cluster member also answers GET /v1/cluster: its shard map, after which each request
 *  for a shard goes to the shard's owner, and a 421 naming another owner is followed (the
 *  map updated, the request sent there; its latency counts from the first send). */
int load_http_probe(struct load_target *t, uint32_t *shards, char *err, size_t errlen);

/** How to open the embedded target. */
struct load_embed_opts {
	/** Data directory. */
	const char *dir;
	/** Shards (0: the store's count, STRATA_DEFAULT_SHARDS for a new store). */
	uint32_t shards;
	/** STRATA_SYNC_* mode. */
	int sync;
	/** Worker threads (requests at once). */
	unsigned slots;
	/** Merge policy file, or NULL for the built-in default. */
	const char *policy_path;
	/** Record the workload into this trace file from the open to the close, or NULL. */
	const char *record_trace;
};

/** Byte budget of `strata load --record-trace` (the trace stops there; the run goes on). */
#define LOAD_TRACE_MAX_BYTES (1ull << 30)

/** Open the embedded target: a store served by worker threads. */
int load_embed_new(struct ev_loop *loop, const struct load_embed_opts *o, struct load_target **out);

/** Clear a request's outcome and inputs, keeping its memory. */
void load_req_reset(struct load_req *r);
/** Free a request's buffers. */
void load_req_destroy(struct load_req *r);
/** Record a failure in r (printf-style message). */
void load_req_fail(struct load_req *r, int fail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** Short name of a verb ("append", ...). */
const char *load_verb_name(int verb);
/** Monotonic clock, ns. */
uint64_t load_now_ns(void);

/* ---- acknowledged-row tracking (load_track.c) ---- */

/** Every acknowledged row: (shard, key) -> the newest acknowledged value's hash. */
struct load_track;

int load_track_new(uint64_t max_rows, struct load_track **out);
void load_track_delete(struct load_track *t);
/** vlen of a tracked row that is a delete: the key must read back absent. */
#define LOAD_TRACK_DELETED UINT32_MAX
/** Record an acknowledged row with its sequence number (vlen LOAD_TRACK_DELETED: a delete). */
void load_track_ack(struct load_track *t, uint32_t shard, const void *key, size_t klen, uint64_t seq,
		    uint64_t vhash, uint32_t vlen);
/** Record a row whose append failed: it may or may not have been applied. */
void load_track_uncertain(struct load_track *t, uint32_t shard, const void *key, size_t klen);
/** Rows tracked, rows refused for the bound. */
uint64_t load_track_count(const struct load_track *t);
uint64_t load_track_overflow(const struct load_track *t);
/** Entry i (0 <= i < capacity) if used: shard, key; 0 when slot i is empty. */
int load_track_entry(const struct load_track *t, uint64_t i, uint32_t *shard, const void **key, size_t *klen);
/** Capacity of the table (iterate entries 0..capacity-1). */
uint64_t load_track_capacity(const struct load_track *t);
/** Compare a read-back value with entry i: 0 same (absent, for a deleted key), 1 lost
 *  (absent), 2 mismatch (a deleted key that reads back too), 3 mismatch tolerated because
 *  an unacknowledged append of the key may have won. */
int load_track_check(const struct load_track *t, uint64_t i, int found, const void *v, size_t vlen);
/** Hash of a value as tracked. */
uint64_t load_track_hash(const void *v, size_t n);

/* ---- metrics (load_metric.c) ---- */

/** Latency and counters of one thing measured (a scenario, a verb, a scenario's verb, a stage). */
struct load_series_pt {
	/** Seconds since the start of the run, end of the interval. */
	double t;
	/** Requests or iterations completed in the interval. */
	uint64_t count;
	/** Rows acknowledged in the interval. */
	uint64_t rows;
	/** Failures in the interval. */
	uint64_t errors;
	/** Corrected latency in the interval: p50, p99, max, ns. */
	uint64_t p50, p99, max;
};

/** One measured thing. */
struct load_stat {
	/** Name as used in metric names ("writers", "append", "writers.append"). */
	char name[LOAD_NAME_MAX];
	/** Corrected latency (from the intended start), ns. */
	struct hist *lat;
	/** Uncorrected latency (from the actual send), ns. */
	struct hist *raw;
	/** Latency of the current progress interval (corrected), or NULL. */
	struct hist *ival;
	/** Completed (iterations for a scenario, requests for a verb). */
	uint64_t count;
	/** Rows acknowledged. */
	uint64_t rows;
	/** Failures. */
	uint64_t errors;
	/** Requests the node answered busy (not failures). */
	uint64_t busy;
	/** Counters at the previous progress tick. */
	uint64_t ival_count, ival_rows, ival_errors;
	/** Time series (one point per progress interval), or NULL. */
	struct load_series_pt *series;
	/** Points in series, and allocated. */
	size_t nseries, cap_series;
};

int load_stat_new(const char *name, int with_series, struct load_stat **out);
void load_stat_delete(struct load_stat *s);
/** Record one completed thing. */
void load_stat_record(struct load_stat *s, uint64_t corrected_ns, uint64_t raw_ns, uint64_t rows, int failed);
/** Close a progress interval at time t (seconds): add a series point, reset the interval. */
int load_stat_tick(struct load_stat *s, double t);

/** Counted errors by kind, with a few sample messages. */
struct load_errors {
	/** Kinds seen. */
	unsigned n;
	/** Kind names. */
	char kind[LOAD_MAX_ERROR_KINDS][48];
	/** Count per kind. */
	uint64_t count[LOAD_MAX_ERROR_KINDS];
	/** Distinct sample messages per kind. */
	char sample[LOAD_MAX_ERROR_KINDS][LOAD_ERROR_SAMPLES][256];
	/** Total. */
	uint64_t total;
};

/** Count an error of kind with message msg. */
void load_errors_add(struct load_errors *e, const char *kind, const char *msg);

/** A comparison in a threshold. */
enum load_cmp { LOAD_CMP_LT, LOAD_CMP_LE, LOAD_CMP_GT, LOAD_CMP_GE, LOAD_CMP_EQ, LOAD_CMP_NE };

/** One threshold: metric OP value. */
struct load_threshold {
	/** Metric name. */
	char metric[LOAD_NAME_MAX];
	/** The expression as written ("< 5"). */
	char expr[64];
	/** enum load_cmp. */
	int cmp;
	/** Right-hand side. */
	double value;
	/** Evaluated: metric found, its value, and the verdict. */
	int found;
	double got;
	int ok;
};

/** Parse "< 5", "<=5", "== 0", ... into t (metric already set). 0 or -1 with msg. */
int load_threshold_parse(struct load_threshold *t, const char *expr, char *msg, size_t msglen);
/** Evaluate op. */
int load_threshold_holds(int cmp, double got, double want);

/** A flat name -> value map of every metric of a run (for thresholds and JSON). */
struct load_metrics {
	/** Names. */
	char (*name)[LOAD_NAME_MAX];
	/** Values. */
	double *value;
	/** Entries and allocated. */
	size_t n, cap;
};

/** Set (add or replace) a metric. */
int load_metrics_set(struct load_metrics *m, const char *name, double v);
/** Look a metric up; 0 when absent. */
int load_metrics_get(const struct load_metrics *m, const char *name, double *v);
void load_metrics_destroy(struct load_metrics *m);
/** Add the latency metrics of h under prefix ("writers" -> writers.p99_ms, ...). */
int load_metrics_add_hist(struct load_metrics *m, const char *prefix, const struct hist *h);
/** The metric names closest to name (for "did you mean"), into buf. */
void load_metrics_suggest(const struct load_metrics *m, const char *name, char *buf, size_t len);

/* ---- results and reports (load_report.c) ---- */

struct load_run;
/** Write the JSON result. 0 or -1 (message on stderr). */
int load_report_json(struct load_run *run, const char *path);
/** Write the HTML report. 0 or -1 (message on stderr). */
int load_report_html(struct load_run *run, const char *path);
/** Print the summary table to f. */
void load_report_summary(struct load_run *run, void *f);

/** The whole run: `strata load`. Returns a LOAD_EXIT_* code. */
int load_main(const struct load_opts *o);
/** Parse "30s", "500ms", "2m", "1h", "1.5" (seconds) into seconds; -1 when bad. */
double load_parse_duration(const char *s);

#endif
