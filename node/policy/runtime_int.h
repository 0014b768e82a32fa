/*
 * runtime_int.h — what the files of the policy runtime share (private to
 * node/policy): rt_jobs.c (jobs on the host's background executor, at the bottom),
 * rt_lua.c (the shard, node and plan objects and primitives hooks call, over the
 * jobs) and runtime.c (states, hook runs, timers, triggers, events, reload and the
 * API, over both). Calls go one way: runtime.c -> rt_lua.c -> rt_jobs.c; a job's
 * completion reaches runtime.c through runtime.job_done.
 */
#ifndef STRATA_RUNTIME_INT_H
#define STRATA_RUNTIME_INT_H

#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/store.h"
#include "../host/host.h"
#include "../lib/pool.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/trace.h"
#include "policy.h"


/** Metatable names in the policy state's registry. */
#define RT_MT_SHARD "strata.shard"
#define RT_MT_PLAN "strata.plan"
#define RT_MT_NODE "strata.node"

/** Kinds of pool jobs. */
enum rt_job_kind {
	RT_JOB_SEAL,
	RT_JOB_PREPARE,
	RT_JOB_COMMIT,
	RT_JOB_ABORT,
	RT_JOB_MERGE,
	RT_JOB_COMPACT,
	/** Run the store's queued deletes (not tied to a shard or a hook). */
	RT_JOB_REAP,
};

/** States of a plan seen from Lua. */
enum rt_plan_state {
	/** Prepared, waiting for commit or abort. */
	RT_PLAN_READY,
	/** Committed or aborted (handed to a worker). */
	RT_PLAN_DONE,
};

struct runtime;
struct rt_run;

/** One policy Lua state and the runs still using it. */
struct rt_state {
	/** The policy. */
	struct policy *pol;
	/** The runtime. */
	struct runtime *rt;
	/** Runs started on this state that have not ended. */
	unsigned live;
	/** Set once a reload replaced it: closed when live drops to 0. */
	int retired;
	/** Registry reference of the table of shard objects (index id + 1). */
	int shards_ref;
	/** Registry reference of the node object. */
	int node_ref;
	/** Next retired state still running hooks. */
	struct rt_state *next;
};

/** A plan as a Lua userdata. */
struct rt_plan {
	/** The engine's plan; NULL once committed or aborted. */
	strata_plan *plan;
	/** The runtime (for aborting from __gc). */
	struct runtime *rt;
	/** Shard it belongs to. */
	uint32_t shard;
	/** Generations (or runs) it folds. */
	uint32_t inputs;
	/** enum rt_plan_state. */
	int state;
};

/** A shard userdata. */
struct rt_lshard {
	/** Shard number. */
	uint32_t id;
};

/** One hook run: a coroutine on one state. */
struct rt_run {
	/** The runtime. */
	struct runtime *rt;
	/** The state it runs on (kept alive until the run ends). */
	struct rt_state *st;
	/** The coroutine. */
	struct policy_run *pr;
	/** Which hook. */
	enum policy_hook hook;
	/** Shard of an on_seal or on_merge_request run. */
	uint32_t shard;
	/** Set while parked on a pool job. */
	int waiting;
	/** Registry reference of the table of plans this run prepared. */
	int plans_ref;
	/** Generations merged by this run's commits and merges. */
	uint64_t merged;
	/** Code of the last primitive that returned nil, reason (0 = none). */
	int last_rc;
	/** Completion of a merge request (NULL for other runs). */
	runtime_merge_cb cb;
	/** Passed to cb. */
	void *ctx;
	/** Completion of a run started by runtime_run_hook (NULL for other runs). */
	runtime_hook_cb done;
	/** Passed to done. */
	void *done_ctx;
	/** Links in the runtime's list of live runs. */
	struct rt_run *prev, *next;
};

/** A job on the worker pool. */
struct rt_job {
	/** The runtime. */
	struct runtime *rt;
	/** enum rt_job_kind. */
	int kind;
	/** Shard. */
	uint32_t shard;
	/** max_generations of a prepare or merge, max_runs of a compaction. */
	uint32_t max;
	/** In: the plan to commit or abort. Out: the prepared plan. */
	strata_plan *plan;
	/** The run to resume with the result (NULL: nobody waits). */
	struct rt_run *run;
	/** Set when a timer or size-trigger seal (clears the shard's sealing flag). */
	int trigger;
	/** Result code. */
	int rc;
	/** Generations (runs) planned, merged or committed. */
	uint32_t count;
	/** Message of a failure, copied from the worker's diagnostics. */
	char err[512];
	/** Completion of a seal request. */
	runtime_done_cb cb;
	/** Passed to cb. */
	void *ctx;
};

/** The runtime's view of a shard (loop thread only). */
struct rt_shard {
	/** env.mono_ns() deadline of the flush timer (0 = off). */
	uint64_t flush_due;
	/** A prepare, merge or compaction of a hook is in flight. */
	int busy;
	/** Merge plans of this shard prepared and not yet consumed (their commit or abort
	 *  has not finished on a worker): the engine refuses a second one (STRATA_EBUSY). */
	uint32_t plans;
	/** A timer or size-trigger seal is queued or running. */
	int sealing;
	/** The on_seal run in progress. */
	struct rt_run *seal_run;
	/** Seals reported and not yet given to on_seal, and their last generation,
	 *  rows and bytes. */
	uint64_t seals, last_gen, rows, bytes;
};

/** Events of one shard recorded by listener callbacks (under ev_mu). */
struct rt_event {
	/** Seals published since the loop last looked. */
	uint64_t seals;
	/** Last generation, and rows and bytes summed over those seals. */
	uint64_t last_gen, rows, bytes;
	/** The memtable reached memtable_max_bytes. */
	int full;
	/** The shard is in the dirty list. */
	int queued;
};

/** A merge request waiting to start (deferred to the next loop iteration). */
struct rt_mreq {
	/** Shard. */
	uint32_t shard;
	/** Completion. */
	runtime_merge_cb cb;
	void *ctx;
	/** Next request. */
	struct rt_mreq *next;
};

/** What the policy file watcher compares: a file is stable while this stays the same. */
struct rt_fileprint {
	/** Whether the file could be read. */
	int ok;
	/** Size, inode and modification time (nanoseconds) from fstat. */
	uint64_t size, ino, mtime_ns;
	/** CRC32C of the content. */
	uint32_t crc;
};

struct runtime {
	/** The store (not owned). */
	struct store *db;
	/** The host whose loop the runtime runs on and whose background executor runs its
	 *  seals and merges (not owned). */
	struct host *host;
	/** host's loop. */
	struct ev_loop *loop;
	/** Options copied at start (policy_path owned). */
	char *policy_path;
	/** The policy came from policy_path (read at start, or kept there by
	 *  runtime_reload_persist), not from source text that policy_path only names. */
	int from_file;
	/** Limits of every policy state. */
	struct policy_limits limits;
	/** host's background executor. */
	struct pool *pool;
	/** Jobs of this runtime submitted to pool whose completion has not run yet. */
	unsigned jobs;
	/** Number of shards. */
	uint32_t nshards;
	/** Per-shard state (loop thread). */
	struct rt_shard *shards;
	/** The running policy. */
	struct rt_state *cur;
	/** Replaced states with runs still going. */
	struct rt_state *retired;
	/** Live runs. */
	struct rt_run *runs;
	/** The on_sweep run in progress. */
	struct rt_run *sweep_run;
	/** env.mono_ns() deadline of the sweeper (0 = off). */
	uint64_t sweep_due;
	/** Earliest deadline (UINT64_MAX = none). */
	uint64_t next_due;
	/** Settings the timers are armed for. */
	struct runtime_settings armed;
	/** Wakes the loop for the next deadline. */
	ev_timer timer;
	/** Checks deadlines on every loop iteration (manual clocks). */
	ev_prepare prep;
	/** Wakes the loop for listener events and merge requests. */
	ev_async events;
	/** Watches the policy file. */
	ev_stat stat;
	/** Whether stat is started. */
	int watching;
	/** Polls the policy file every watch_poll_ms (ev_stat compares mtimes in seconds). */
	ev_timer poll;
	/** Settle interval of the watcher, nanoseconds. */
	uint64_t settle_ns;
	/** The file as last loaded or refused (by the watcher, SIGHUP or a reload of the file). */
	struct rt_fileprint seen;
	/** A changed file waiting to settle: how it looked, and since when (env.mono_ns;
	 *  0 = nothing waits). */
	struct rt_fileprint pending;
	uint64_t pending_since;
	/** Guards ev, dirty, ndirty. */
	pthread_mutex_t ev_mu;
	/** Per-shard events from listener callbacks. */
	struct rt_event *ev;
	/** Shards with events, in arrival order. */
	uint32_t *dirty;
	uint32_t ndirty;
	/** Loop-side copies of dirty and of each one's full flag (taken under ev_mu). */
	uint32_t *taken;
	uint8_t *taken_full;
	/** Merge requests waiting to start (loop thread). */
	struct rt_mreq *mreq_head, *mreq_tail;
	/** Listener callbacks executing now. */
	atomic_int in_callback;
	/** Set when the listener is removed: late callbacks do nothing. */
	atomic_int sink_closed;
	/** Set by runtime_delete: completions abandon their runs. */
	int closing;
	/** Counters (loop thread). */
	struct runtime_stats stats;
	/** Told of every policy swap, on the loop thread (runtime_set_swap_hook), or NULL. */
	runtime_swap_fn swap_fn;
	void *swap_ctx;
	/** Completion of every job of this runtime (runtime.c's rt_job_done). */
	void (*job_done)(void *arg);
	/** Set (from any thread) when the store queued deletes; the loop starts a reap job. */
	atomic_int reap_wanted;
	/** A reap job is queued or running (loop thread). */
	int reaping;
};


/* rt_jobs.c */
void rt_abort_plan(struct runtime *rt, strata_plan *plan, uint32_t shard);
void rt_copy(char *dst, size_t len, const char *src);
struct rt_job * rt_job_new(struct runtime *rt, int kind, uint32_t shard);
void rt_plan_consumed(struct runtime *rt, uint32_t shard);
int rt_pool_submit(struct runtime *rt, struct rt_job *j);
const char * rt_reason(int rc);
void rt_set_error(struct runtime *rt, const char *msg);
int rt_submit(struct runtime *rt, struct rt_job *j);
/** Run a job's IO (on a worker of the background executor). */
void rt_job_work(void *arg);

/* rt_lua.c */
void rt_bind(struct rt_state *st);
int rt_push_result(struct rt_run *run, struct rt_job *j, lua_State *co);
void rt_push_shard(struct rt_state *st, lua_State *L, uint32_t id);

#endif
