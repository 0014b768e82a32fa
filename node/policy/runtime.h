/*
 * runtime.h — the policy runtime of a node: a LuaJIT policy driving seals and
 * merges from a libev loop.
 *
 * It owns per-shard flush timers (flush_interval_s), the global sweeper
 * (sweep_interval_s), the size trigger (memtable_max_bytes, through the store
 * listener) and the count trigger after each seal (merge_after_generations). Seal,
 * prepare and compaction IO runs on the host's background executor. Hooks run as
 * coroutines on the loop thread; a primitive that does IO submits it to the
 * executor and yields, and the completion resumes the coroutine, so the loop keeps
 * serving.
 *
 * Every function here must be called on the loop thread (host_invoke gets there).
 * Failures return a STRATA_E* code with the message (file:line for a policy) in diag
 * (diag_last, strata_last_error) of the calling thread.
 */
#ifndef STRATA_RUNTIME_H
#define STRATA_RUNTIME_H

#include <ev.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../strata_types.h"
#include "policy.h"

struct host;
struct runtime;
struct store;

/** How to start a runtime. */
struct runtime_options {
	/** The open store (not owned). */
	struct store *db;
	/** The host: its loop runs the runtime, its background executor the seals and merges
	 *  (not owned; it outlives the runtime). */
	struct host *host;
	/** Policy file; NULL with policy_source NULL = built-in default (policies/default.lua
	 *  semantics, compiled into the binary). */
	const char *policy_path;
	/** Policy source text instead of a file (policy_path then only names it in messages). */
	const char *policy_source;
	/** CPU time budget of one hook run, in milliseconds of Lua execution (default 200). */
	uint32_t hook_budget_ms;
	/** Memory limit of the policy Lua state, bytes (default 64 MiB). */
	uint64_t policy_mem_bytes;
	/** Watch policy_path and reload it when it changes (ev_stat and a poll, debounced). */
	int watch_file;
	/** A changed policy file is reloaded once its size, mtime, inode and content hash have
	 *  not changed for this long, milliseconds (0 = RUNTIME_WATCH_SETTLE_MS). */
	uint32_t watch_settle_ms;
	/** Period of the watcher's own poll of the file, which sees the edits ev_stat misses
	 *  (same size within its one-second mtime), milliseconds (0 = RUNTIME_WATCH_POLL_MS). */
	uint32_t watch_poll_ms;
};

/** Default settle interval of the policy file watcher, milliseconds. */
#define RUNTIME_WATCH_SETTLE_MS 300u
/** Default poll period of the policy file watcher, milliseconds. */
#define RUNTIME_WATCH_POLL_MS 1000u

/** Counters and state for stats and /metrics. */
struct runtime_stats {
	/** Successful reloads since start. */
	uint64_t reloads;
	/** Refused reloads since start. */
	uint64_t reload_failures;
	/** Changes of the watched policy file seen (each starts its settle interval again). */
	uint64_t policy_file_changes;
	/** Version of the running policy (1 for the first, +1 per successful reload). */
	uint64_t policy_version;
	/** Hook runs started / failed (error, budget or memory limit). */
	uint64_t hook_runs, hook_errors;
	/** CPU time the finished hook runs took on their threads, ns (policy_run_thread_cpu_ns). */
	uint64_t hook_cpu_ns;
	/** Seals, merge passes and compactions started by the policy. */
	uint64_t policy_seals, policy_merges, policy_compactions;
	/** Timer fires of the flush timers and the sweeper. */
	uint64_t flush_timer_fires, sweeps;
	/** Jobs waiting in the worker pool. */
	uint64_t pool_pending;
	/** The last reload or hook error ("" when none; a successful reload clears it). */
	char last_error[1024];
	/** Name (path or label) of the running policy. */
	char policy_name[512];
	/** The file the running policy was read from or kept in (runtime_reload_persist); ""
	 *  for the built-in default and for source text. */
	char source_path[512];
};

/** Start: load and validate the policy, arm timers, listen to the store. */
int runtime_new(const struct runtime_options *o, struct runtime **out);
/** Stop timers, wait for in-flight work, free. Hooks in flight are abandoned safely
 *  (their plans aborted). */
void runtime_delete(struct runtime *rt);
/** Reload from the policy file. On failure the running policy stays; the message has
 *  file:line. */
int runtime_reload_file(struct runtime *rt);
/** Reload from source text (PUT /v1/policy, db:policy(source)). Same rules. */
int runtime_reload_source(struct runtime *rt, const char *src, size_t len, const char *name);
/** Count a reload refused before it reached the runtime (a PUT /v1/policy whose trial
 *  failed or whose file could not be written): reload_failures, last_error (err) and the
 *  log, as for any refused reload. The running policy stays. */
void runtime_reload_refused(struct runtime *rt, const char *err);
/** Told on the runtime's loop thread of the policy now running: after every swap (a
 *  reload of the file, PUT /v1/policy, db:policy), with the counters (st->policy_version,
 *  policy_name, source_path) and the source. */
typedef void (*runtime_swap_fn)(void *ctx, const struct runtime_stats *st, const char *src, size_t len);
/** Set the swap hook (fn NULL: none) and call it at once for the policy running now. On
 *  the runtime's loop thread. */
void runtime_set_swap_hook(struct runtime *rt, runtime_swap_fn fn, void *ctx);
/** The running policy's source text. */
const char *runtime_policy_source(struct runtime *rt, size_t *len);
/** The running policy's settings as the engine runs them: every clamp applied (a
 *  merge_max_generations over the store's merge_max_inputs runs at merge_max_inputs). */
void runtime_settings(struct runtime *rt, struct runtime_settings *out);
/** The running policy's settings that the engine narrows (policy_clamps under the store's
 *  options): up to max into out; returns how many there are. Each is logged as a warning
 *  when the policy loads. */
unsigned runtime_clamps(struct runtime *rt, struct policy_clamp *out, unsigned max);
/** The limits every policy state of the runtime gets (its hook budget and memory limit;
 *  fixed at start, so any thread may read them). */
void runtime_limits(struct runtime *rt, struct policy_limits *out);
/** The policy file: the one the runtime was started from (policy_path without
 *  policy_source), or the one runtime_reload_persist last kept a policy in; NULL for
 *  none (the built-in default, or source text policy_path only names). Fixed until a
 *  runtime_reload_persist on the loop thread sets it: read it there, or before the loop
 *  serves anyone else. */
const char *runtime_policy_file(struct runtime *rt);
/** Write src into a new temporary file in file's directory and sync it, for
 *  runtime_reload_persist to rename over file; its path in tmp. Any thread: the IO runs
 *  on the caller's (never call it on the loop thread). 0, or a STRATA_E* code with a
 *  message naming the path and what failed (nothing is left behind). */
int runtime_stage_file(const char *file, const char *src, size_t len, char *tmp, size_t tmplen);
/** Reload from src (runtime_reload_source's rules: compiled and validated in a fresh
 *  state first) and keep it in file: rename tmp (runtime_stage_file's) over file, sync the
 *  directory, swap the policy in. file becomes the policy file (runtime_policy_file) and
 *  the source path; its watcher takes the new content as the one loaded, so it is not
 *  loaded a second time. On failure the running policy stays, file is untouched and tmp
 *  is removed: STRATA_EINVAL when the source is refused, else the code of the failed
 *  rename, with a message naming file. */
int runtime_reload_persist(struct runtime *rt, const char *src, size_t len, const char *name, const char *tmp,
			   const char *file);
void runtime_stats(struct runtime *rt, struct runtime_stats *out);

/** Completion of a merge request: reclaimed = generations merged by the request,
 *  pending = generations still waiting afterwards. err is NULL on success. */
typedef void (*runtime_merge_cb)(void *ctx, int rc, uint64_t reclaimed, uint64_t pending, const char *err);
/** Route an explicit merge request (HTTP merge-wal) through on_merge_request (default:
 *  one merge pass capped by merge_max_generations). cb runs on the loop thread. */
int runtime_merge_request(struct runtime *rt, uint32_t shard, runtime_merge_cb cb, void *ctx);
/** Completion of a seal request. */
typedef void (*runtime_done_cb)(void *ctx, int rc, const char *err);
/** Seal a shard on the pool (HTTP seal); cb runs on the loop thread. */
int runtime_seal_request(struct runtime *rt, uint32_t shard, runtime_done_cb cb, void *ctx);

/** A seal or merge request made for a caller on another thread (an HTTP request, a verb of
 *  `strata load`) and its outcome, which the caller reads once back has run. */
struct runtime_req {
	/** Hands the outcome back; runs on the loop thread, once. */
	void (*back)(void *arg);
	/** back's argument. */
	void *arg;
	/** Inside runtime_req_run's request: a completion only records its result. */
	int submitting;
	/** The completion ran. */
	int done;
	/** Result code. */
	int rc;
	/** Generations merged by a merge request. */
	uint64_t reclaimed;
	/** Generations still waiting after a merge request. */
	uint64_t pending;
	/** Error text ("" when none). */
	char err[2048];
};
/** Request a seal (merge 0) or a merge of shard with q for its outcome, and call back(arg)
 *  once q holds it: before returning when the request is refused or completes at once,
 *  else from its completion. On the loop thread. */
void runtime_req_run(struct runtime *rt, struct runtime_req *q, int merge, uint32_t shard, void (*back)(void *arg),
		     void *arg);
/** Completion of runtime_run_hook: err NULL when the hook returned (result: its return
 *  values as text, "" for none), cpu_ns the CPU time it ran (what its budget counts). */
typedef void (*runtime_hook_cb)(void *ctx, const char *err, const char *result, uint64_t cpu_ns);
/** Run hook h now, as its trigger would (on_seal and on_merge_request on shard, on_sweep
 *  on the node); done runs on the loop thread when the run ends. STRATA_EBUSY when that
 *  hook (of that shard) is running already. For `strata policy check --run`. */
int runtime_run_hook(struct runtime *rt, enum policy_hook h, uint32_t shard, runtime_hook_cb done, void *ctx);
/** Work in flight in a runtime: live hook runs, its executor jobs, store events and
 *  merge requests not yet handled. 0 when idle. For tests and for simulation steps
 *  that run the loop until nothing is left to do. */
unsigned runtime_busy(struct runtime *rt);
/** Compile and validate a policy without running it (for `strata policy check`):
 *  fills *out, or returns nonzero with every error (file:line) in the message. Any
 *  thread. */
int runtime_check_policy(const char *path, const char *src, size_t len, struct runtime_settings *out);

#endif
