/*
 * load_core.h — the state of one `strata load` run (the run, its scenarios, stages, VUs
 * and coroutines) and the lower layer every file of node/load builds on (load_core.c).
 * The files call one way: load_run.c (the runner) calls load_conf.c (the script's
 * configuration), load_verb.c (ctx and its verbs), load_report.c (summary, JSON, HTML)
 * and the targets (load_http.c, load_embed.c); all of them call load_core.c,
 * load_metric.c and load_track.c, which call nothing above them. What the runner must
 * do for a lower file reaches it through a function pointer: a request's completion
 * (load_req.on_complete, struct load_run's verb_done) and ctx:stop (its stop).
 * Below, with load_core.c's functions, are those of load_verb.c and load_conf.c that the
 * runner calls. Loop thread only.
 */
#ifndef STRATA_LOAD_CORE_H
#define STRATA_LOAD_CORE_H

#include <ev.h>
#include <stdint.h>

#include "load.h"

struct lua_State;

/** Workload models. */
enum load_model {
	/** Constant arrival rate, latency from the intended start. */
	LOAD_MODEL_OPEN,
	/** A number of virtual users, each running iterations back to back. */
	LOAD_MODEL_CLOSED,
};

/** Phases of a run, in order. */
enum load_phase {
	LOAD_PHASE_INIT,
	LOAD_PHASE_SETUP,
	LOAD_PHASE_RUN,
	LOAD_PHASE_DRAIN,
	LOAD_PHASE_TEARDOWN,
	LOAD_PHASE_VERIFY,
	LOAD_PHASE_DONE,
};

/** One stage of a scenario: the rate (open) or VU count (closed) moves linearly
 *  from the previous stage's target to this one's over its duration. */
struct load_stage {
	/** Name ("" when unnamed); a named stage has its own statistics. */
	char name[LOAD_NAME_MAX];
	/** Start, relative to the scenario's start, ns. */
	uint64_t t0;
	/** Length, ns (0 = a jump). */
	uint64_t dur;
	/** Rate per second or VUs at the start and at the end of the stage. */
	double from, to;
	/** Open model: arrivals before the stage starts. */
	double n0;
	/** Statistics of iterations intended in this stage, or NULL. */
	struct load_stat *stat;
};

struct load_scn;

/** A virtual user of a closed-model scenario. */
struct load_vu {
	/** Its scenario. */
	struct load_scn *scn;
	/** Index, from 0. */
	unsigned id;
	/** Starts the next iteration after the pause. */
	ev_timer timer;
	/** An iteration of this VU is live. */
	int busy;
	/** The VU should keep running iterations (the ramp may switch it off). */
	int active;
	/** The timer is armed. */
	int waiting;
	/** Iterations the VU ran. */
	uint64_t iterations;
};

/** One named workload of a script. */
struct load_scn {
	/** The run. */
	struct load_run *run;
	/** Name (metric prefix). */
	char name[LOAD_NAME_MAX];
	/** enum load_model. */
	int model;
	/** Registry reference of the exec function. */
	int exec_ref;
	/** Registry reference of a pause function (seconds before each iteration), or LUA_NOREF. */
	int pause_ref;
	/** Constant pause between iterations of a VU, seconds. */
	double pause_s;
	/** Start and end, relative to the run's start, ns. */
	uint64_t start, end;
	/** Initial rate per second (open) or VUs (closed). */
	double initial;
	/** Stages. */
	struct load_stage stages[LOAD_MAX_STAGES];
	/** Number of stages. */
	unsigned nstages;
	/** Open model: most iterations live at once. */
	unsigned max_inflight;
	/** Open model: arrivals beyond max_inflight are dropped (1) or queued (0). */
	int drop;
	/** Open model: most queued arrivals. */
	uint64_t max_pending;
	/** Stop after this many iterations (0 = no limit). */
	uint64_t max_iterations;
	/** Description of the model for the summary ("open 500/s", "closed 8 VUs"). */
	char desc[64];

	/** Arrivals generated so far (open). */
	uint64_t arrivals;
	/** Iterations started. */
	uint64_t started;
	/** Arrivals dropped (overload or still queued at the end). */
	uint64_t dropped;
	/** Live iterations. */
	unsigned inflight;
	/** Queued arrivals: intended start times (absolute, ns), a ring. */
	uint64_t *pending;
	/** Ring head, length and capacity. */
	uint64_t pending_head, pending_len, pending_cap;
	/** VUs (closed). */
	struct load_vu *vus;
	/** Allocated VUs. */
	unsigned nvus;
	/** Scheduling timer (next arrival, or the VU ramp tick). */
	ev_timer timer;
	/** Starts the scenario at its start time, then ends it at its end time. */
	ev_timer edge;
	/** Starts queued arrivals after iterations finish (zero delay). */
	ev_timer drain;
	/** Closed model: a pause function runs before the first iteration too (wrk's delay). */
	int pause_first;
	/** Started, ended. */
	int begun, ended;
	/** Iteration statistics. */
	struct load_stat *stat;
	/** Per-verb statistics of this scenario, created on first use. */
	struct load_stat *verb[LOAD_VERB_COUNT];
	/** Requests issued by this scenario. */
	uint64_t requests;
};

/** Kinds of coroutine the runner drives. */
enum load_iter_kind { LOAD_ITER_SCENARIO, LOAD_ITER_SETUP, LOAD_ITER_TEARDOWN };

/** A live coroutine: a scenario iteration, setup or teardown. */
struct load_iter {
	/** The run. */
	struct load_run *run;
	/** enum load_iter_kind. */
	int kind;
	/** Scenario (LOAD_ITER_SCENARIO), else NULL. */
	struct load_scn *scn;
	/** VU (closed model), else NULL. */
	struct load_vu *vu;
	/** The coroutine. */
	struct lua_State *co;
	/** Registry reference anchoring it. */
	int ref;
	/** Intended and actual start, absolute ns. */
	uint64_t intended, started;
	/** Iteration number within the scenario, from 1. */
	uint64_t n;
	/** Stage index of the intended start, or -1. */
	int stage;
	/** Failed verbs during this iteration. */
	unsigned verb_errors;
	/** Rows acknowledged during this iteration. */
	uint64_t rows;
	/** Request in flight, or NULL. */
	struct load_req *req;
	/** Time the verb in flight was called, ns. */
	uint64_t call_ns;
	/** Time this iteration's requests waited for a free connection or worker, ns (not part
	 *  of the uncorrected latency, which counts only time actually spent at the target). */
	uint64_t queued_ns;
	/** ctx:sleep timer. */
	ev_timer sleep;
	/** Sleeping. */
	int sleeping;
	/** Abandoned at the end of the run: freed when its request completes. */
	int abandoned;
	/** Previous and next live coroutine. */
	struct load_iter *prev, *next;
};

/** The whole run. */
struct load_run {
	/** Options. */
	const struct load_opts *o;
	/** The runner's completion of a verb's request (record it, resume the coroutine with its
	 *  results): the verbs submit with it, so they never call up into the runner. */
	void (*verb_done)(struct load_req *r);
	/** The runner's early end of the scenarios (ctx:stop; teardown, verification and reports
	 *  still run). */
	void (*stop)(struct load_run *run, const char *why);
	/** The loop. */
	struct ev_loop *loop;
	/** The script's state. */
	struct lua_State *L;
	/** Where requests go. */
	struct load_target *target;
	/** The script is wrk-style (global hooks, no scenarios table). */
	int wrk;
	/** Registry references: ctx, the setup/teardown/done hooks, setup's data. */
	int ctx_ref, setup_ref, teardown_ref, done_ref, data_ref;
	/** Total duration, ns. */
	uint64_t duration;
	/** Start of the scenarios (after setup), absolute ns; end when they stopped. */
	uint64_t t0, t_end;
	/** Wall clock at t0, ns since the epoch. */
	uint64_t wall0;
	/** Scenarios. */
	struct load_scn *scn[LOAD_MAX_SCENARIOS];
	/** Number of scenarios. */
	unsigned nscn;
	/** Scenarios that ended. */
	unsigned nended;
	/** Per-verb statistics over all scenarios, created on first use. */
	struct load_stat *verb[LOAD_VERB_COUNT];
	/** Verification read-backs. */
	struct load_stat *verify_stat;
	/** Errors by kind. */
	struct load_errors errors;
	/** Busy answers by verb (not errors: the node was busy with the shard). */
	struct load_errors busy;
	/** Lua errors in iterations that had no failed verb. */
	uint64_t script_errors;
	/** Thresholds. */
	struct load_threshold thr[LOAD_MAX_THRESHOLDS];
	/** Number of thresholds. */
	unsigned nthr;
	/** Every metric, built at the end. */
	struct load_metrics metrics;
	/** Metrics the script set (ctx:metric, ctx:add). */
	struct load_metrics custom;
	/** Track acknowledged rows and read them back at the end. */
	int verify;
	/** The tracked rows. */
	struct load_track *track;
	/** Verification cursor, read-backs in flight, and outcomes. */
	uint64_t verify_next, verify_inflight, verified, lost, mismatched, uncertain, verify_errors;
	/** Requests in flight at the target. */
	unsigned inflight;
	/** Requests waiting for a target slot, FIFO. */
	struct load_req *waitq, *waitq_tail;
	/** Requests waiting. */
	uint64_t waiting;
	/** Free requests. */
	struct load_req *free_reqs;
	/** Requests on the free list. */
	unsigned nfree;
	/** Zero-delay timer that advances the phases. */
	ev_timer kick;
	/** Monotonic time the runner started, ns. */
	uint64_t t_init;
	/** A few keys found lost by the verifier. */
	char lost_sample[3][160];
	/** The first script error's traceback has been printed. */
	int traceback_printed;
	/** Cancelling: completions do not start queued requests. */
	int cancelling;
	/** Phase (setup or teardown) whose coroutines a stop abandons. */
	int abandon_phase;
	/** Counters at the previous progress tick, and its time (ns). */
	uint64_t tick_requests, tick_rows, tick_errors, tick_ns;
	/** Response bytes received by scenario requests. */
	uint64_t resp_bytes;
	/** Read-backs that could not be made (interrupted). */
	uint64_t unverified;
	/** Names of the shipped-library candidates tried (for the error message). */
	char lua_tried[1024];
	/** Live coroutines. */
	struct load_iter *live;
	/** Number of live coroutines. */
	unsigned nlive;
	/** The coroutine being resumed, or NULL. */
	struct load_iter *cur;
	/** enum load_phase. */
	int phase;
	/** Progress tick, end of the scenarios, end of the grace period. */
	ev_timer tick, end_timer, grace_timer;
	/** SIGINT / SIGTERM: stop early. */
	ev_signal sigint, sigterm;
	/** Stopped early (signal, ctx:stop(), thread:stop()). */
	int stopped;
	/** Interrupted a second time: abandon everything, skip verification. */
	int stopped_twice;
	/** The signal that stopped the run (0 = none): the exit code is 128 + it. */
	int stop_signal;
	/** Setup failed: no scenario runs. */
	int setup_failed;
	/** Iterations abandoned at the end of the grace period. */
	uint64_t interrupted;
	/** Requests in total and rows acknowledged in total (scenarios only). */
	uint64_t requests, rows;
	/** Progress interval, ns. */
	uint64_t interval;
	/** Most rows tracked for verification. */
	uint64_t max_tracked;
	/** Grace period after the end, seconds (negative until set). */
	double grace_s;
	/** wrk's requests-per-interval histogram for done(), or NULL. */
	struct hist *wrk_rate;
	/** Appends use the binary batch format. */
	int batch_format;
	/** Directory of the shipped Lua modules. */
	char lua_dir[4096];
	/** Path of the script as given. */
	const char *script;
	/** Policy file named by the script (embedded target). */
	char policy_path[4096];
	/** Result: LOAD_EXIT_*. */
	int exit_code;
	/** Thresholds all passed. */
	int passed;
};

/** Most VUs of one closed-model scenario. */
#define LOAD_MAX_VUS 100000u
/** Default total duration, seconds. */
#define LOAD_DEFAULT_DURATION_S 10.0
/** Default connections / workers. */
#define LOAD_DEFAULT_SLOTS 32u
/** Default cap of live iterations of an open-model scenario. */
#define LOAD_DEFAULT_MAX_INFLIGHT 10000u
/** Default bound of acknowledged rows tracked. */
#define LOAD_DEFAULT_MAX_TRACKED 50000000ull

/** Values of the script's table that shape the target, read before it exists. */
struct load_conf {
	/** Connections / workers. */
	unsigned slots;
	/** Shards. */
	uint32_t shards;
	/** Sync mode of the embedded store. */
	int sync;
	/** Policy file of the embedded target, or NULL. */
	const char *policy;
	/** Per-request timeout, seconds. */
	double timeout_s;
};

/* ---- load_core.c ---- */

/** A progress-style line on stderr, prefixed with the run's elapsed time. */
void load_run_log(struct load_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** A request from the free list (zeroed), or NULL on ENOMEM. */
struct load_req *load_run_req_get(struct load_run *run);
/** Give a request back. */
void load_run_req_put(struct load_run *run, struct load_req *r);
/** The oldest request waiting for a target slot, taken off the queue; NULL when none waits. */
struct load_req *load_run_waitq_pop(struct load_run *run);
/** Hand r to the target now, or queue it for the next free slot; on_complete runs later. */
void load_run_submit(struct load_run *run, struct load_req *r, void (*on_complete)(struct load_req *), void *ctx);
/** The window a scenario actually ran, seconds. */
double load_scn_seconds(const struct load_run *run, const struct load_scn *s);
/** Register the metatable of histogram objects in L (before load_hist_push). */
void load_hist_register(struct lua_State *L);
/** Push a histogram object reporting h in units of `unit` recorded values. */
void load_hist_push(struct lua_State *L, const struct hist *h, double unit);

/* ---- load_verb.c ---- */

/** Create ctx (the verbs, args, seed, target) and register the histogram metatable. */
void load_ctx_create(struct load_run *run);
/** Whether r succeeded (1) under its verb's rules and expect; else fail and errmsg are set. */
int load_classify(struct load_req *r);
/** Error kind of a failed request ("connect", "http_5xx", ...). */
const char *load_fail_kind(const struct load_req *r);
/** Push the results of a successful r on L: their count, or -1 (errmsg set) on a malformed reply. */
int load_push_ok(struct lua_State *L, struct load_req *r);
/** Record the rows of a completed append in the tracker. */
void load_track_append(struct load_run *run, struct load_req *r, int ok);

/* ---- load_conf.c ---- */

/** Print "strata load: SCRIPT: message" on stderr; returns -1. */
int load_conf_fail(struct load_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Read the script's table at idx (everything but the scenarios) into run and c. */
int load_conf_top(struct load_run *run, int idx, struct load_conf *c);
/** Read the scenarios table at idx. */
int load_conf_scenarios(struct load_run *run, int idx);
/** Define the global `wrk` table before the script runs. */
int load_wrk_define(struct load_run *run);
/** A wrk-style script: setup(thread) and init(args) now, and the scenario "wrk". */
int load_wrk_prepare(struct load_run *run);
/** Call wrk's done(summary, latency, requests). */
void load_wrk_done(struct load_run *run);

#endif
