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

#include "../strata.h"

struct runtime;

/** Set *out to {"shard": shard, <every STRATA_STATS_FIELDS member by name>}, or, when
 *  the statistics cannot be read, {"shard": shard, "error": "<strerror>"} (NULL when out
 *  of memory). Returns strata_shard_stats's code: 0 or a negative STRATA_E* code. */
int views_shard_stats(strata *db, uint32_t shard, json_t **out);
/** The running policy of rt as GET /v1/policy shows it: name, version, last_error,
 *  reload and hook counts, settings and, when with_source, the source. NULL when out of memory. */
json_t *views_policy(struct runtime *rt, int with_source);

#endif
