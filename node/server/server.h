/*
 * server.h — `strata serve`: one node process. Takes the data directory's lock
 * file, opens the store, serves the HTTP endpoints on its main libev loop and runs
 * the policy runtime on a loop thread of its own (a second host), so no hook runs on
 * the thread serving clients, and handles signals (SIGTERM/SIGINT: graceful stop;
 * SIGHUP: reload the policy file, on the runtime's loop).
 */
#ifndef STRATA_SERVER_H
#define STRATA_SERVER_H

#include <stdint.h>

#include "../strata_types.h"

/** Longest bearer token accepted from --token-file, bytes. */
#define SERVER_MAX_TOKEN 512u

/** Log line formats. */
enum { SERVER_LOG_LOGFMT, SERVER_LOG_JSON };

/** Everything `strata serve` can be told. */
struct server_options {
	/** "host:port" to listen on. */
	const char *listen;
	/** Data directory (created when missing). */
	const char *data_dir;
	/** Policy file, or NULL for the built-in default. */
	const char *policy_path;
	/** File holding the bearer token, or NULL for no auth. */
	const char *token_file;
	/** Existing directory under which POST /v1/checkpoint creates checkpoints, or NULL to
	 *  refuse them. */
	const char *checkpoint_dir;
	/** File to write "host:port" into once listening, or NULL. */
	const char *ready_file;
	/** The store's options (strata_options_init's defaults); dir and policy are taken
	 *  from data_dir and policy_path, shards = 0 opens the stored count (a new store
	 *  gets STRATA_DEFAULT_SHARDS). */
	strata_options store;
	/** Largest request body, bytes. */
	uint64_t max_body_bytes;
	/** Largest request line plus headers, bytes. */
	uint32_t max_header_bytes;
	/** Connections open at once. */
	uint32_t max_connections;
	/** Keep-alive idle timeout, ms. */
	uint32_t idle_timeout_ms;
	/** Header (and first request) timeout, ms. */
	uint32_t header_timeout_ms;
	/** Body timeout, ms. */
	uint32_t body_timeout_ms;
	/** No-progress timeout of queued output, ms. */
	uint32_t send_timeout_ms;
	/** Time a graceful stop waits for requests in flight before closing them, ms. */
	uint32_t shutdown_timeout_ms;
	/** Worker threads of the pool (appends, reads, scans, seals, merges). */
	unsigned workers;
	/** SERVER_LOG_LOGFMT or SERVER_LOG_JSON. */
	int log_format;
	/** Reload the policy file when it changes. */
	int watch_policy;
	/** The watcher's settle interval and poll period, ms (runtime_options). */
	uint32_t policy_settle_ms, policy_poll_ms;
	/** Threshold of the slow-request log, µs (0: off). */
	uint64_t slow_request_us;
	/** Entries of the slow-request log. */
	uint32_t slow_requests;
	/** Entries of the policy history (console.h; 0: PHIST_DEFAULT_CAP). */
	uint32_t policy_history;
	/** Record the node's workload from the start into this file (node/lib/wtrace.h),
	 *  moving it to FILE.1 at trace_max_bytes, or NULL. */
	const char *trace_file;
	/** That file's size, and the largest byte budget of POST /v1/trace (0: API_TRACE_MAX_BYTES). */
	uint64_t trace_max_bytes;
	/** Wall time of POST /v1/policy/compare's replays, ms (0: API_COMPARE_BUDGET_MS). */
	uint64_t policy_compare_ms;
	/** The cost model those replays run on (`strata calibrate`'s file), or NULL: the
	 *  defaults of the node's kind of store. */
	const char *policy_compare_model;
	/** etcd://HOST:PORT[,...][/PREFIX] of the cluster to join, or NULL: a node on its own. */
	const char *cluster;
	/** This node's id in the cluster (NULL: the host name). */
	const char *node_id;
	/** The URL clients reach this node at (NULL: http:// and the listen address). */
	const char *advertise;
	/** The cluster lease's TTL, s. */
	uint32_t cluster_lease_ttl_s;
	/** How often the node reads the cluster's keys in etcd, ms. */
	uint32_t cluster_poll_ms;
};

/** Fill *o with the defaults of `strata serve`. */
void server_options_init(struct server_options *o);
/** Run a node until SIGTERM/SIGINT. Returns the process exit status (0 after a
 *  graceful stop); a failure to start is printed to stderr and leaves the data directory
 *  as it was (absent when it did not exist): the listen address is bound and the policy
 *  compiled before the store is opened or created. */
int server_run(const struct server_options *o);

#endif
