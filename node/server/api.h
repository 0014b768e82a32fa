/*
 * api.h — the node's HTTP endpoints (routing, auth, JSON, the jobs that run
 * appends, reads and scans on the host's foreground executor, and the requests that
 * cross to the policy runtime's loop and back).
 *
 * Every endpoint is one row of api.c's endpoint table (api_endpoints): its path
 * pattern, the methods it takes, its handler and its metric name; routing, the Allow
 * header of a 405, dispatch and the handler label of the request metrics (reqstats.h)
 * all come from there.
 *
 * POST /v1/shards/{id}/rows takes NDJSON, one object per line, or, with
 * Content-Type: application/x-strata-batch, the binary batch format (batch.h decodes
 * both). A batch is all or nothing; the reply {"appended": n, "last_seq": s} comes
 * once it is durable.
 * Any other Content-Type than api.c's api_rows_types is a 415 before the body is read.
 * DELETE /v1/shards/{id}/rows/{key} appends one delete: {"deleted": 1, "last_seq": s}.
 *
 * A malformed shard id is a 400, a well-formed one the store lacks a 404; a shard
 * busy with a merge or compaction a 429 with Retry-After (the node is fine), a full
 * worker queue a 503. A key over STRATA_MAX_KEY bytes is a 400 "key too long" on every
 * route; a value over max_value_bytes a 413.
 *
 * PUT /v1/policy tries the policy first (api.c: its trial on the background executor,
 * then the file and the swap on the runtime's loop).
 *
 * The console's page and endpoints (GET /, /v1/console/state, /v1/policy/check,
 * /history, /rollback) are console.c's (console.h); api_int.h is what the two share.
 */
#ifndef STRATA_API_H
#define STRATA_API_H

#include <stddef.h>
#include <stdint.h>

#include "../host/host.h"
#include "../policy/policy.h"
#include "../sim/sim.h"
#include "../strata.h"
#include "batch.h"
#include "http.h"
#include "reqstats.h"

struct runtime;
struct cluster;
struct phist;

/** Content-Type of the binary batch format. */
#define API_BATCH_CONTENT_TYPE "application/x-strata-batch"
/** Content-Type of NDJSON rows (the default when a POST names none). */
#define API_NDJSON_CONTENT_TYPE "application/x-ndjson"
/** The file in the data directory that keeps a policy PUT /v1/policy accepted on a node
 *  without --policy; `strata serve` without --policy runs it when it exists. */
#define API_POLICY_FILE "policy.lua"
/** Default largest byte budget of a workload trace (strata serve --trace-max-bytes). */
#define API_TRACE_MAX_BYTES (64ull << 20)
/** Default wall time of POST /v1/policy/compare's replays, ms (--policy-compare-ms). */
#define API_COMPARE_BUDGET_MS 10000ull
/** Retry-After of a 429 (busy shard) or 503 (node at capacity), seconds. */
#define API_RETRY_AFTER_S "1"
/** json_dumps flags of every JSON body: compact, doubles to 15 significant digits (no
 *  binary noise such as 0.1 printed as 0.10000000000000001). */
#define API_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))
/** A scan job stops after this many rows and hands them to the loop. */
#define API_SCAN_CHUNK_ROWS 1024u
/** A scan job stops once its NDJSON chunk reaches this many bytes. */
#define API_SCAN_CHUNK_BYTES (256u << 10)

/** A bearer token and the name it goes by. */
struct api_token {
	const char *name;
	const char *token;
};

/** Most tokens a node takes. */
#define API_MAX_TOKENS 16u

/** How to build the endpoints. */
struct api_options {
	/** The open store (not owned). */
	strata *db;
	/** The policy runtime (not owned). */
	struct runtime *rt;
	/** The host whose loop serves HTTP and whose foreground executor runs appends, gets
	 *  and scans (not owned). */
	struct host *host;
	/** The host whose loop runs the policy runtime (not owned; NULL: host). */
	struct host *rt_host;
	/** One bearer token, named "default" (NULL: tokens decide; neither: no auth). */
	const char *token;
	/** Named bearer tokens (--token-file with NAME TOKEN lines), any of which is taken;
	 *  the name is who applied a policy in its history. */
	const struct api_token *tokens;
	size_t ntokens;
	/** Entries of the policy history (0: PHIST_DEFAULT_CAP). */
	size_t policy_history;
	/** The largest byte budget of a workload trace (POST /v1/trace; 0: API_TRACE_MAX_BYTES). */
	uint64_t trace_max_bytes;
	/** Wall time one POST /v1/policy/compare may replay for, ms (0: API_COMPARE_BUDGET_MS). */
	uint64_t compare_budget_ms;
	/** The cost model file of its replays (NULL: the store kind's defaults), and the node's
	 *  store URL (NULL: local), whose scheme picks the kind of store replayed. */
	const char *compare_model;
	const char *store_url;
	/** The directory (a canonical absolute path) POST /v1/checkpoint writes under; NULL:
	 *  checkpoints over HTTP are refused. */
	const char *checkpoint_root;
	/** A request slower than this, first byte to last byte of its response, goes to the
	 *  slow-request log (GET /v1/slow-requests), ns; 0: none does. */
	uint64_t slow_request_ns;
	/** Entries of the slow-request log (0: REQSTATS_SLOW_DEFAULT_LEN; at most
	 *  REQSTATS_SLOW_MAX_LEN). */
	size_t slow_requests;
};

/** The endpoints' state. The server's loop thread only, except the histograms of stats
 *  (any thread) and rt, host and rt_host (set once; rt is used on rt_host's loop only). */
struct api {
	/** The open store. */
	strata *db;
	/** The policy runtime (called on rt_host's loop thread only). */
	struct runtime *rt;
	/** The host of the server's loop (foreground executor). */
	struct host *host;
	/** The host of the runtime's loop. */
	struct host *rt_host;
	/** The HTTP server (for connection statistics); set by the owner. */
	struct http_server *http;
	/** Bearer tokens and their names (owned); none: no auth. */
	char *token[API_MAX_TOKENS], *token_name[API_MAX_TOKENS];
	size_t token_len[API_MAX_TOKENS], ntokens;
	/** Where POST /v1/checkpoint writes (strdup'ed), or NULL: refused. */
	char *checkpoint_root;
	/** What the endpoints count and time, by the rows of the endpoint table. */
	struct reqstats stats;
	/** What a POSTed batch may hold: BATCH_MAX_ROWS rows, keys of STRATA_MAX_KEY bytes,
	 *  values of the store's max_value_bytes. */
	struct batch_limits batch_limits;
	/** Jobs of this API on the executor or the runtime's loop, not yet completed. */
	uint64_t jobs;
	/** Where PUT /v1/policy keeps a policy it accepts (strdup'ed): the runtime's policy
	 *  file (--policy), else DATA/policy.lua; NULL without a runtime. */
	char *policy_file;
	/** What the trial of a PUT /v1/policy runs under: the runtime's limits, and
	 *  strata_options_init's options with the store's merge_max_inputs. */
	struct policy_limits policy_limits;
	strata_options trial_store;
	/** The cluster this node is a member of (set by the owner), or NULL. */
	struct cluster *cluster;
	/** The largest byte budget of a POSTed trace. */
	uint64_t trace_max_bytes;
	/** Wall time of a POST /v1/policy/compare's replays, ms. */
	uint64_t compare_budget_ms;
	/** Their kind of store (enum replay_store) and cost model (api_new read it). */
	int compare_store;
	struct sim_model compare_model;
	/** The policies put live (console.h), or NULL without a runtime. */
	struct phist *phist;
	/** The call that starts recording them on the runtime's loop. */
	struct host_call hist_call;
	/** (runtime's loop) Who is applying the policy being swapped in and why ("": the
	 *  swap is not a PUT or a rollback). */
	char apply_who[64], apply_note[64];
};

/** Build the endpoints. */
int api_new(const struct api_options *o, struct api **out);
/** Free (every job must have completed). Safe on NULL. */
void api_delete(struct api *a);
/** http_headers_fn: route, method, auth and shard checks before the body. */
void api_on_headers(void *ctx, struct http_req *r);
/** http_request_fn: run the endpoint. */
void api_on_request(void *ctx, struct http_req *r);
/** http_options.on_sent: time the request's stages and log it when slow. */
void api_on_sent(void *ctx, struct http_req *r);
/** The loop's lag, sampled by the server's timer (reqstats.h, loop_lag_ns). Loop thread. */
void api_loop_lag(struct api *a, uint64_t lag_ns);
/** HTTP status for a STRATA_E* code. */
int api_status_of(int rc);

#endif
