/*
 * api_int.h — what the endpoint files of the node share (api.c, console.c): the routed
 * request, the handler signature and the helpers that answer a request and count it.
 * Not for anything outside node/server.
 */
#ifndef STRATA_API_INT_H
#define STRATA_API_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/hist.h"
#include "../lib/pool.h"
#include "api.h"

/** Method bits of an endpoint (HEAD goes with GET). */
enum { API_M_GET = 1, API_M_POST = 2, API_M_PUT = 4, API_M_DELETE = 8 };

/** A routed request target. */
struct api_route {
	/** The endpoint: its row in api_endpoints (API_EP_NONE: none at the path). */
	size_t ep;
	/** The path names a shard ({id}). */
	int has_shard;
	/** Shard number as parsed (may be out of range). */
	uint64_t shard;
	/** The shard segment is a well-formed shard number. */
	int shard_valid;
	/** Why it is not (shard_valid == 0). */
	const char *shard_problem;
	/** The shard segment as written, into the request's path. */
	const char *shard_id;
	/** Length of shard_id. */
	size_t shard_id_len;
	/** The path names a key ({key}). */
	int has_key;
	/** Raw (percent-encoded) key, into the request's path. */
	const char *key;
	/** Length of key. */
	size_t key_len;
};

/** An endpoint's handler: answer r, routed to rt, once api_check passed it. */
typedef void api_handler_fn(struct api *a, struct http_req *r, const struct api_route *rt);

/** One name=value pair of a query string, still percent-encoded. */
struct api_qpair {
	/** The name. */
	const char *name;
	/** Its length. */
	size_t name_len;
	/** The value ("" without '='). */
	const char *value;
	/** Its length. */
	size_t value_len;
};

/** The next non-empty pair of the query at *q (up to end; *q NULL: no query) into p,
 *  *q moved past it. 0 when there is none left. */
int api_query_next(const char **q, const char *end, struct api_qpair *p);
/** Answer r with body (len bytes of ctype, extra headers or NULL) and count it. */
void api_reply(struct api *a, struct http_req *r, int status, const char *ctype, const char *extra,
	       const void *body, size_t len);
/** Answer r with {"error": error, "detail": detail} and count it. */
void api_error(struct api *a, struct http_req *r, int status, const char *error, const char *detail);
/** Reply with o (consumed) as JSON and 1, or (o NULL or not encoded) 0 without replying. */
int api_json_reply(struct api *a, struct http_req *r, int status, const char *extra, json_t *o);
/** Reply with o (consumed) as JSON (a 500 when it cannot be encoded). */
void api_json(struct api *a, struct http_req *r, int status, json_t *o);
/** Submit a job to the host's executor exec, or answer when it refuses (nonzero). */
int api_submit(struct api *a, struct http_req *r, int exec, pool_work_fn work, pool_done_fn done, void *job);
/** A zeroed job of size bytes for r, or NULL (answered 503). */
void *api_job_new(struct api *a, struct http_req *r, size_t size);
/** v rounded to a multiple of 10^-digits. */
double api_round(double v, int digits);
/** {"count", "mean_us", "p50_us", "p99_us", "p999_us", "max_us"} of a nanosecond hist. */
json_t *latency_json(const struct hist *h);
/** The name of the token r carries ("anonymous" without --token-file; NULL: none valid). */
const char *api_token_name(const struct api *a, const struct http_req *r);
/** GET, POST and DELETE /v1/trace (trace_ep.c). */
api_handler_fn api_trace;
/** Answer r (GET /v1/console/state) from the runtime's loop's snapshot. */
void api_rt_console(struct api *a, struct http_req *r);
/** Try src as a policy and, when it passes, put it live as PUT /v1/policy does; the
 *  history names who applied it and note (NULL: none). Copies src. */
void api_policy_apply(struct api *a, struct http_req *r, const char *src, size_t len, const char *who,
		      const char *note);

#endif
