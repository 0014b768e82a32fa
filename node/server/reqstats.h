/*
 * reqstats.h — what the HTTP endpoints count and time: responses by handler, method and
 * status code, request durations by handler, the latencies of the engine calls they
 * make, where a request spent its time (its stages), the slow-request log, and the scan
 * and auth counters. api.c records them, a handler being a row of its endpoint table and
 * named by that row's metric name; metrics.c (GET /metrics), GET /v1/stats and GET
 * /v1/slow-requests read them. The server's loop thread only, except the histograms (any
 * thread).
 *
 * Stages. A request is timed at up to nine points: its first byte parsed (start), its
 * whole body parsed (complete), its job handed to the foreground executor (submit), the
 * job begun on a worker (work), the engine call begun and returned (engine, engine_end),
 * the job's completion run on the loop (done), the response queued (respond) and its last
 * byte written to the socket (sent). A stage is the time between two points that follow
 * each other: read, loop (complete to submit, or to respond for a request answered on the
 * loop), queue, decode (batch decoding or key checks), engine, handoff (the completion's
 * wait for the loop), respond (building the response) and reply (writing it out).
 */
#ifndef STRATA_REQSTATS_H
#define STRATA_REQSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/hist.h"
#include "http.h"

/** Methods counted apart: GET, HEAD, POST, PUT, DELETE and any other (reqstats_method). */
#define REQSTATS_METHODS 6

/** The stages of a request (header comment), in order. */
enum reqstats_stage {
	REQSTATS_READ,
	REQSTATS_LOOP,
	REQSTATS_QUEUE,
	REQSTATS_DECODE,
	REQSTATS_ENGINE,
	REQSTATS_HANDOFF,
	REQSTATS_RESPOND,
	REQSTATS_REPLY,
	REQSTATS_STAGES
};

/** What api.c marks in http_req.mark_ns: the points of a request between complete and
 *  respond (header comment). */
enum reqstats_mark {
	REQSTATS_MARK_SUBMIT,
	REQSTATS_MARK_WORK,
	REQSTATS_MARK_ENGINE,
	REQSTATS_MARK_ENGINE_END,
	REQSTATS_MARK_DONE,
	REQSTATS_MARKS
};
_Static_assert(REQSTATS_MARKS <= HTTP_MARKS, "http_req has room for every mark");

/** Default threshold of the slow-request log, ns (Redis's slowlog-log-slower-than). */
#define REQSTATS_SLOW_DEFAULT_NS (10ull * 1000 * 1000)
/** Default number of slow requests kept. */
#define REQSTATS_SLOW_DEFAULT_LEN 128u
/** Most slow requests kept. */
#define REQSTATS_SLOW_MAX_LEN 100000u
/** Bytes of a slow request's path kept (the rest is cut). */
#define REQSTATS_SLOW_PATH 96u

/** One request of the slow-request log. */
struct reqstats_slow {
	/** When its response was written (env.wall_ns). */
	uint64_t wall_ns;
	/** From its first byte to its response's last, ns. */
	uint64_t total_ns;
	/** Each stage's time, ns (UINT64_MAX: the request did not pass through it). */
	uint64_t stage_ns[REQSTATS_STAGES];
	/** Its endpoint (handler index). */
	size_t handler;
	/** Its http_parser method. */
	int method;
	/** Its response status. */
	int status;
	/** Its path, cut at REQSTATS_SLOW_PATH - 1 bytes, NUL-terminated. */
	char path[REQSTATS_SLOW_PATH];
};

/** What is counted of one handler. */
struct reqstats_handler {
	/** Its handler label in strata_http_requests_total and
	 *  strata_http_request_duration_seconds (the endpoint table's metric name; not owned). */
	const char *name;
	/** Time from a request's first byte to its response, ns (2 significant digits, from 1 µs). */
	struct hist *ns;
	/** Responses by method index (reqstats_method) and status code. */
	uint64_t responses[REQSTATS_METHODS][HTTP_MAX_STATUS];
};

/** The endpoints' counters. */
struct reqstats {
	/** When the endpoints were made (env.mono_ns): the node's uptime counts from there. */
	uint64_t start_ns;
	/** Latency of the strata_append_seq calls of POST rows and DELETE rows/{key}, ns. */
	struct hist *append_ns;
	/** Latency of the strata_get calls of GET rows/{key}, ns. */
	struct hist *get_ns;
	/** Time from a request's first byte to its response, every handler, ns. */
	struct hist *request_ns;
	/** By handler index: the rows of the endpoint table, in its order. */
	struct reqstats_handler *handler;
	/** Entries of handler. */
	size_t handlers;
	/** Rows streamed by scans. */
	uint64_t scan_rows;
	/** Scan chunks that waited for a slow client to drain its queue. */
	uint64_t scan_waits;
	/** Requests refused for a missing or wrong token. */
	uint64_t auth_failures;
	/** Time in each stage of the requests served by a foreground job (appends, gets,
	 *  deletes of rows), ns. */
	struct hist *stage_ns[REQSTATS_STAGES];
	/** A request slower than this (first byte to last byte of its response) goes to the
	 *  slow-request log, ns (0: none does). */
	uint64_t slow_threshold_ns;
	/** The slow-request log: a ring of slow_cap entries, the newest at slow_next - 1. */
	struct reqstats_slow *slow;
	/** Entries of slow. */
	size_t slow_cap;
	/** Where the next slow request goes. */
	size_t slow_next;
	/** Entries of slow in use. */
	size_t slow_len;
	/** Slow requests seen since the start (reqstats_slow_reset leaves it: a counter). */
	uint64_t slow_total;
	/** The loop's lag: how late a timer of REQSTATS_LAG_TICK_NS fired, each time, ns (the
	 *  loop was busy or the thread was not running; a request that arrives then waits in its
	 *  socket, before any of its stages). The longest since the start or the last
	 *  reqstats_slow_reset. */
	struct hist *loop_lag_ns;
	uint64_t loop_lag_max_ns;
};

/** How often the loop's lag is sampled, ns. */
#define REQSTATS_LAG_TICK_NS (10ull * 1000 * 1000)
/** A lag sample. */
void reqstats_loop_lag(struct reqstats *s, uint64_t lag_ns);

/** Set up s, zeroed, for handlers handlers (their names still NULL: the caller names
 *  them), with a slow-request log of slow_len entries (0: REQSTATS_SLOW_DEFAULT_LEN) for
 *  requests over slow_threshold_ns (0: none). 0 or STRATA_ENOMEM (then s is destroyed). */
int reqstats_create(struct reqstats *s, size_t handlers, uint64_t slow_threshold_ns, size_t slow_len);
/** Free what reqstats_create made. Safe on a zeroed s. */
void reqstats_destroy(struct reqstats *s);
/** Method index (0..REQSTATS_METHODS-1) of an http_parser method. */
int reqstats_method(int http_method);
/** Label of method index m: "GET", "HEAD", "POST", "PUT", "DELETE", "other". */
const char *reqstats_method_name(int m);
/** Count a response with status to a request of http_method that handler h answered. */
void reqstats_count(struct reqstats *s, size_t h, int http_method, int status);
/** Record a request that handler h answered ns after its first byte. */
void reqstats_time(struct reqstats *s, size_t h, uint64_t ns);
/** Name of stage i ("read", "loop", ...). */
const char *reqstats_stage_name(int i);
/** The stages of r, whose response was written (http_options.on_sent), into stage_ns
 *  (UINT64_MAX where it did not pass); its total time (start to sent), or 0 when r was
 *  not timed. */
uint64_t reqstats_stages(const struct http_req *r, uint64_t stage_ns[REQSTATS_STAGES]);
/** r, answered by handler h, is written: record its stages in the stage histograms when
 *  in_stages and a job served it, and log it when slow. */
void reqstats_sent(struct reqstats *s, size_t h, const struct http_req *r, int in_stages);
/** The i-th newest entry of the slow-request log (i < s->slow_len). */
const struct reqstats_slow *reqstats_slow_get(const struct reqstats *s, size_t i);
/** Empty the slow-request log. */
void reqstats_slow_reset(struct reqstats *s);

#endif
