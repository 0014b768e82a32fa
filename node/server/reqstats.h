/*
 * reqstats.h — what the HTTP endpoints count and time: responses by handler, method and
 * status code, request durations by handler, the latencies of the engine calls they
 * make, and the scan and auth counters. api.c records them, a handler being a row of
 * its endpoint table and named by that row's metric name; metrics.c (GET /metrics) and
 * GET /v1/stats read them. The server's loop thread only, except the histograms (any
 * thread).
 */
#ifndef STRATA_REQSTATS_H
#define STRATA_REQSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/hist.h"
#include "http.h"

/** Methods counted apart: GET, HEAD, POST, PUT, DELETE and any other (reqstats_method). */
#define REQSTATS_METHODS 6

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
};

/** Set up s, zeroed, for handlers handlers (their names still NULL: the caller names
 *  them). 0 or STRATA_ENOMEM (then s is destroyed). */
int reqstats_create(struct reqstats *s, size_t handlers);
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

#endif
