/*
 * views.h — the node's JSON views of a store and its policy runtime, built once for
 * everyone who shows them: the HTTP endpoints (GET /v1/stats, GET /v1/shards/{id}/stats,
 * GET /v1/policy) and the embedded target of `strata load`, whose replies are shaped
 * like the node's. Top-level users of the public API only (server, load): no lower
 * layer includes it.
 */
#ifndef STRATA_VIEWS_H
#define STRATA_VIEWS_H

#include <jansson.h>
#include <stdint.h>

#include "../policy/runtime.h"
#include "../strata.h"

/** Set *out to {"shard": shard, <every STRATA_STATS_FIELDS member by name>}, or, when
 *  the statistics cannot be read, {"shard": shard, "error": "<strerror>"} (NULL when out
 *  of memory). Returns strata_shard_stats's code: 0 or a negative STRATA_E* code. */
int views_shard_stats(strata *db, uint32_t shard, json_t **out);
/** What the views show of a policy runtime, copied on the runtime's loop thread so that
 *  another thread (the one serving clients) can show it. */
struct views_policy_snap {
	/** Counters, name and last error. */
	struct runtime_stats st;
	/** Resolved settings. */
	struct runtime_settings set;
	/** The source was asked for (the view then has a "source" member). */
	int with_source;
	/** Copy of the running policy's source (env.malloc), or NULL. */
	char *source;
	/** Length of source. */
	size_t source_len;
};

/** Fill *out from rt, with a copy of the source when with_source. On rt's loop thread.
 *  0, or STRATA_ENOMEM (the source could not be copied; the rest is filled). */
int views_policy_snap(struct runtime *rt, int with_source, struct views_policy_snap *out);
/** Free the source copy of a snapshot. Safe on a zeroed one. */
void views_policy_snap_free(struct views_policy_snap *s);
/** The policy of a snapshot as GET /v1/policy shows it: name, version, last_error, reload
 *  and hook counts, settings and, when the snapshot has it, the source. Any thread.
 *  NULL when out of memory. */
json_t *views_policy(const struct views_policy_snap *s);

#endif
