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
#include "../policy/trial.h"
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
	/** Settings as the engine runs them (clamps applied). */
	struct runtime_settings set;
	/** The settings the engine narrows: what the policy asks, what runs, why. */
	struct policy_clamp clamps[POLICY_MAX_CLAMPS];
	/** Entries of clamps. */
	unsigned nclamps;
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
/** The policy of a snapshot as GET /v1/policy shows it: name, source_path (the file it
 *  was read from or kept in, null for the built-in default and source text), version,
 *  last_error, reload and hook counts, settings (as the engine runs them), clamped (each
 *  setting the engine narrows: {"setting", "asked", "effective", "why"}) and, when the
 *  snapshot has it, the source. Any thread. NULL when out of memory. */
json_t *views_policy(const struct views_policy_snap *s);

/** The hook runs of a policy's trial (PUT /v1/policy, `strata policy check --run`):
 *  {"ok", "node": {"shards", "generations_pending": [...]}, "budget_ms", "memory_bytes",
 *  "runs": [{"hook", "shard" (not for on_sweep), "scripted", "ok", "result", "cpu_ms",
 *  "wall_ms", "error", "file", "line", "log": [...]}], "failed", "runtime_error",
 *  "invariants"}; "error", "file" and "line" are null for a run that returned, "result"
 *  for one that did not. Any thread. NULL when out of memory. */
json_t *views_trial(const struct trial *t);

#endif
