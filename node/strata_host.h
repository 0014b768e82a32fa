/*
 * strata_host.h — for the programs that compose a node themselves (`strata serve`,
 * `strata load --embedded`): open a store on a host they created, and reach the
 * pieces the public API hides. Embedders use strata.h alone.
 */
#ifndef STRATA_STRATA_HOST_H
#define STRATA_STRATA_HOST_H

#include "host/host.h"
#include "strata_types.h"

struct runtime;
struct store;

/** Extra settings of the policy runtime for strata_open_on. */
struct strata_runtime_options {
	/** Watch the policy file and reload it when it changes. */
	int watch_file;
	/** Settle interval and poll period of the watcher, ms (0 = the runtime's defaults;
	 *  runtime_options in node/policy/runtime.h). */
	uint32_t watch_settle_ms, watch_poll_ms;
	/** The host the runtime runs on: its loop runs the timers and hooks, its background
	 *  executor the seals and merges (NULL: the handle's host). One with a loop thread of
	 *  its own keeps hooks off the thread that runs the handle's host's loop. It must
	 *  outlive the handle. */
	struct host *host;
};

/** strata_open on the caller's host (it must outlive the handle; strata_close leaves it
 *  running). With o->policy set, the policy runtime runs on ro->host, else on h; ro may
 *  be NULL for the defaults. */
int strata_open_on(const strata_options *o, struct host *h, const struct strata_runtime_options *ro,
		   strata **out);
/** The host a handle runs on. */
struct host *strata_host(strata *db);
/** The host its policy runtime runs on (strata_host's unless strata_runtime_options.host
 *  named another): every call into the runtime is made on that host's loop thread. */
struct host *strata_runtime_host(strata *db);
/** The policy runtime of a handle, or NULL. */
struct runtime *strata_runtime(strata *db);

struct wtrace_options;
struct wtrace_status;
/** Record the store's workload into a trace (node/lib/wtrace.h; o->shards is the
 *  store's), stopping one being recorded first. 0 or a STRATA_E* code. Any thread. */
int strata_trace_start(strata *db, const struct wtrace_options *o);
/** Record in the trace being recorded, if any, that a client asked for a seal (merge 0)
 *  or a merge (merge 1) of shard: what the composers of a node call when they hand such
 *  a request to the policy runtime (strata_seal records its own). Any thread. */
void strata_trace_request(strata *db, int merge, uint32_t shard);
/** Stop the trace being recorded (its end written and synced); none: nothing. */
void strata_trace_stop(strata *db);
/** The trace being recorded, else the last one stopped: its figures and its file (into
 *  path, cap bytes). 0, or STRATA_NOTFOUND when none was started. */
int strata_trace_status(strata *db, struct wtrace_status *out, char *path, size_t cap);
/** Stop the policy runtime now, on its loop thread, and leave the store open (strata_close
 *  does it otherwise): the requests handed to it are answered first, so their answers can
 *  still read the store. Safe on a handle without a runtime, and twice. */
void strata_runtime_stop(strata *db);
/** The core store of a handle. */
struct store *strata_store(strata *db);
/** strata_close for a program whose start failed after the open (its listener, its ready
 *  file): a store the open created is removed again, what existed before stays
 *  (store_close_discard in node/core/store.h). Safe on NULL. */
void strata_close_discard(strata *db);

#endif
