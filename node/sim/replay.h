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
 * The model, and where it is approximate:
 *  - keys are the trace's hashes (8 bytes, padded with zeros to the key's length; a key under
 *    8 bytes keeps that many bytes of its hash, so distinct short keys may meet); values are
 *    pseudo-random bytes of the recorded sizes (incompressible: a workload of compressible
 *    values writes less than the replay says); reads are replayed as gets of the same key
 *    hashes, scans are counted, not run;
 *  - time: background work gets the trace time between records (times `speed`), and each
 *    chunk of it costs what the cost model (sim.h, struct sim_model) says its IO and its
 *    encoding CPU take: serial (CPU and IO never overlap, one request at a time), no page
 *    cache, the foreground's own IO (the WAL) not charged. So a disk or store slower than
 *    the work lets the backlog grow as it would; a faster one drains it sooner. The defaults
 *    are round figures (replay_model_default), `strata calibrate` measures the machine or
 *    store at hand;
 *  - objects: on the local disk (REPLAY_STORE_LOCAL), or a remote store (Azure, S3) whose
 *    requests are counted as its client sends them (a write in 8 MiB parts and its commit)
 *    and priced per kind (replay_prices_default: published list prices as the project
 *    knew them, not checked against the live price pages, so give yours with --prices;
 *    request charges only: no storage, egress or tier charges); the WAL is local;
 *  - merge memory is estimated, not measured: a pass of k inputs holds one block and one
 *    index partition per input plus its writer's (node/core/DESIGN.md), so k x (block +
 *    partition) + block + partition, at the store's block size and 64 KiB partitions; the
 *    per-thread zstd contexts and the block cache are not in it;
 *  - hook CPU is measured on the replaying machine (not in the report hash).
 */
#ifndef STRATA_REPLAY_H
#define STRATA_REPLAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim.h"

/** Most shards a replay reports one by one. */
#define REPLAY_MAX_SHARDS 256u
/** Most points of a replay's series (pairs merge, halving the resolution, when full). */
#define REPLAY_SERIES_MAX 512u

/** Where the replayed store keeps its objects. */
enum replay_store {
	REPLAY_STORE_LOCAL = 0, /**< files on the local disk */
	REPLAY_STORE_AZURE = 1, /**< Azure Blob (block blobs in 8 MiB blocks) */
	REPLAY_STORE_S3 = 2,    /**< S3 (multipart in 8 MiB parts) */
};
/** "local", "azure", "s3". */
const char *replay_store_name(int store);
/** The store of a name; -1 for none. */
int replay_store_parse(const char *name);
/** The store a node's --store URL names (azure://, s3://; NULL or another: local). */
int replay_store_of_url(const char *url);
/** The cost model's defaults for a store. */
void replay_model_default(int store, struct sim_model *m);
/** Read a model file (`strata calibrate`'s output: "key = value" lines, # comments) over *m.
 *  0, or STRATA_EINVAL naming the file, line and key. */
int replay_model_load(const char *path, struct sim_model *m);
/** Write m as a model file's lines. */
void replay_model_write(FILE *f, const struct sim_model *m);

/** Request prices, USD per 1000 requests of each enum sim_os_kind. */
struct replay_prices {
	char name[64];
	double usd_per_1000[SIM_OS_KINDS];
};
/** The defaults of a remote store (a local one's are zero). */
void replay_prices_default(int store, struct replay_prices *p);
/** Read a prices file ("KIND USD_PER_1000" lines: get, head, put, part, commit, list,
 *  delete; "name TEXT"; # comments) over *p. 0, or STRATA_EINVAL naming the line. */
int replay_prices_load(const char *path, struct replay_prices *p);

/** One point of a replay's series: what happened in [t_ns, t_ns + the series' step). */
struct replay_point {
	/** Most pending generations of all shards together. */
	uint64_t pending;
	/** Bytes merges read, background bytes written (disk or store), the model's time of
	 *  the background work, ns. */
	uint64_t merged, written, busy_ns;
	/** The background IO budget at the point's end, bytes/s (0: none). */
	uint64_t io_budget;
};

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
	/** Where the objects are (enum replay_store). */
	int store;
	/** The cost model (NULL: replay_model_default of store). */
	const struct sim_model *model;
	/** The prices (NULL: replay_prices_default of store). */
	const struct replay_prices *prices;
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
	/** Each shard's pending generations at the trace's end, and when the replay ended (the
	 *  drain done, or quiet). */
	uint64_t end_pending_shard[REPLAY_MAX_SHARDS], final_pending_shard[REPLAY_MAX_SHARDS];
	/** The most sealed memtables waiting for their flush (all shards): a seal that falls
	 *  behind shows here, not in pending generations. */
	uint64_t peak_sealed;
	/** The most bytes in memtables, active and sealed, all shards: what a disk that cannot
	 *  keep up costs in memory. */
	uint64_t peak_memtable_bytes;
	/** Time after the trace until no generation and no sealed memtable was pending, ns
	 *  (drained 0: not within the limit). */
	int drained;
	uint64_t drain_ns;
	/** Time after the trace until the background went quiet for good (nothing queued, no
	 *  sealed memtable waiting; the drain stops after 10 quiet minutes with the backlog
	 *  unchanged), ns, and the generations still pending then (a policy that merges only
	 *  when a seal brings it to its trigger keeps a remainder). */
	uint64_t quiet_ns, quiet_pending;
	/** The policy's hooks: runs, errors, and the last error. */
	uint64_t hook_runs, hook_errors;
	char last_error[1024];
	/** Gets: flushed tables each considered and each searched (shard_get_cost), p50, p99
	 *  and max. */
	uint32_t get_tables_p50, get_tables_p99, get_tables_max;
	uint32_t get_searched_p50, get_searched_p99, get_searched_max;
	/** The most inputs one merge or compaction pass took, and its memory (estimated). */
	uint64_t peak_merge_inputs, peak_merge_mem;
	/** Background IO: bytes written and read (disk or store), the model's time of it, ns;
	 *  the most bytes written in one second of trace time. */
	uint64_t bg_written, bg_read, bg_busy_ns, bg_peak_written_per_s;
	/** Object-store requests by enum sim_os_kind (background and foreground), and their
	 *  price, USD. */
	uint64_t os_requests[SIM_OS_KINDS];
	double os_usd;
	/** The series over trace time (and the drain): points of step_ns each. */
	uint32_t npoints;
	uint64_t step_ns;
	struct replay_point points[REPLAY_SERIES_MAX];
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
	/** Not in the hash (this machine's, not the replay's): the hooks' CPU time, ns, and the
	 *  replay's wall time, ns. */
	uint64_t hook_cpu_ns, wall_ns;
};

/** The model and the prices a replay of c runs with (c's, or the store's defaults). */
void replay_model_of(const struct replay_config *c, struct sim_model *m);
void replay_prices_of(const struct replay_config *c, struct replay_prices *p);
/** One replay's figures as `strata policy compare --json` shows a policy; machine nonzero
 *  adds this machine's figures (hook_cpu_s, wall_s), which no two runs share. */
json_t *replay_result_json(const char *name, const struct replay_result *r, int machine);
/** The whole report: the trace, what the recorded node did (r0's), and policies (taken). */
json_t *replay_report_json(const struct replay_config *c, const struct replay_result *r0, json_t *policies);
/** The report as a self-contained HTML page: the series of each policy over trace time
 *  (pending generations, MiB merged per second, background MiB written per second with the
 *  IO budget), then the figures side by side. */
void replay_html(FILE *f, const struct replay_config *c, const char *const *names,
		 const struct replay_result *res, int n);
/** Replay c->trace under c->policy into *r. 0, or a STRATA_E* code (diag_last says why:
 *  the trace, the policy, or the store). */
int replay_run(const struct replay_config *c, struct replay_result *r);

#endif
