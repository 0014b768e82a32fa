/*
 * metrics.h — the node's Prometheus text exposition (GET /metrics).
 */
#ifndef STRATA_METRICS_H
#define STRATA_METRICS_H

#include "../lib/buf.h"
#include "../policy/runtime.h"
#include "../strata.h"
#include "http.h"
#include "reqstats.h"

struct host;

/** What /metrics reads of the node (nothing owned). */
struct cluster;

struct metrics_src {
	/** The open store. */
	strata *db;
	/** The host whose foreground executor runs the requests' jobs. */
	struct host *host;
	/** The HTTP server (connections, requests refused before routing), or NULL. */
	struct http_server *http;
	/** The endpoints' counters, by handler. */
	const struct reqstats *req;
	/** The cluster membership, or NULL (no strata_cluster_* series). */
	const struct cluster *cluster;
};

/** This process's figures from /proc/self/stat. */
struct metrics_proc {
	/** User and system CPU time, s. */
	double cpu_s;
	/** The start, s after boot. */
	double start_ticks_s;
	/** Virtual and resident memory, bytes. */
	uint64_t vsize, rss;
};

/** Read them (the process_* series of /metrics, the console's). 0, or -1 when /proc has
 *  no such file. */
int metrics_proc_self(struct metrics_proc *out);

/** Append the exposition (text format 0.0.4) of the node a to out, with rs the policy
 *  runtime's counters as read on its loop thread. On the server's loop. 0 or STRATA_ENOMEM. */
int metrics_render(const struct metrics_src *a, const struct runtime_stats *rs, struct buf *out);

#endif
