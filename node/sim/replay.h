/*
 * replay.h — a workload trace (node/lib/wtrace.h) replayed in the simulator under a
 * policy: a store in inline mode with a manual clock on the simulated file system, fed
 * the trace's requests at their recorded times, its background work (seals, merges,
 * compactions, deletes, hooks) given the time between them. What it measures is what a
 * policy costs on that workload: seals, merges, bytes sealed and merged, write
 * amplification, the backlog of pending generations, the time to drain it after the
 * trace, the hooks' errors and CPU. One thread; the same trace and policy give the same
 * result, byte for byte.
 *
 * The model, and where it is approximate: keys are the trace's hashes (8 bytes, padded
 * with zeros to the key's length; a key under 8 bytes keeps that many bytes of its hash,
 * so distinct short keys may meet), values are pseudo-random bytes of the recorded sizes
 * (incompressible: a workload of compressible values writes less than the replay says),
 * reads are replayed as gets of the same key hashes; background work runs in the
 * simulator's work meter, as fast as the replaying CPU allows, bounded per record by the
 * trace time that passed (`speed` scales it), so a disk slower than the machine running
 * the replay is not modelled (the simulated disk has no cost model yet).
 */
#ifndef STRATA_REPLAY_H
#define STRATA_REPLAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/** Most shards a replay reports one by one. */
#define REPLAY_MAX_SHARDS 256u

/** What to replay. */
struct replay_config {
	/** The trace. */
	const char *trace;
	/** The policy file, or NULL for the built-in default (or policy_src). */
	const char *policy;
	/** The policy's source instead of a file (policy NULL), or NULL. */
	const char *policy_src;
	size_t policy_len;
	/** Stop replaying after this much wall time, ms (0: no limit); the result says
	 *  cut_short. */
	uint64_t deadline_ms;
	/** Background work per record: the trace time since the previous record times this
	 *  (1 = as recorded; 0 = 1). */
	double speed;
	/** The engine's per-pass cap of the replayed store (0: strata's default). */
	uint32_t merge_max_inputs;
	/** After the trace, at most this much simulated time to drain the backlog, ns (0: 1 h). */
	uint64_t drain_limit_ns;
};

/** What a replay found. */
struct replay_result {
	/** The trace's shards and length. */
	uint32_t shards;
	uint64_t trace_ns;
	/** Requests replayed, rows appended and their key and value bytes. */
	uint64_t requests, rows, user_bytes, gets, deletes, scans, seal_requests, merge_requests;
	/** What the store did during the trace (what the recorded node's figures compare with). */
	uint64_t trace_seals, trace_sealed_bytes, trace_merges, trace_merge_bytes_in;
	/** What the store did, the drain after the trace included. */
	uint64_t seals, sealed_bytes, merges, merged_generations, merge_bytes_in, merge_bytes_out, compactions;
	/** (sealed + merged out) / user bytes. */
	double write_amp;
	/** Pending generations: the peak of any shard, the peak of their sum, and at the
	 *  trace's end; per shard peaks. */
	uint64_t peak_pending, peak_pending_total, end_pending_total;
	uint64_t peak_pending_shard[REPLAY_MAX_SHARDS];
	/** Time after the trace until no generation was pending, ns (drained 0: not within
	 *  the limit). */
	int drained;
	uint64_t drain_ns;
	/** The policy's hooks: runs, errors, and the last error. */
	uint64_t hook_runs, hook_errors;
	char last_error[1024];
	/** Background work the replay ran (the simulator's chunks and steps). */
	uint64_t chunks, steps;
	/** What the recorded node did, from the trace's engine events. */
	uint64_t rec_seals, rec_sealed_bytes, rec_plans, rec_commits;
	/** The trace was torn at this offset (0: read whole). */
	uint64_t torn_at;
	/** The replay stopped at deadline_ms before the trace's end (the figures cover what it
	 *  replayed; no drain). */
	int cut_short;
	/** XXH3-64 of the figures above: two replays that did the same hash the same. */
	uint64_t hash;
};

/** One replay's figures as `strata policy compare --json` shows a policy. */
json_t *replay_result_json(const char *name, const struct replay_result *r);
/** The whole report: the trace, what the recorded node did (r0's), and policies (taken). */
json_t *replay_report_json(const struct replay_config *c, const struct replay_result *r0, json_t *policies);
/** Replay c->trace under c->policy into *r. 0, or a STRATA_E* code (diag_last says why:
 *  the trace, the policy, or the store). */
int replay_run(const struct replay_config *c, struct replay_result *r);

#endif
