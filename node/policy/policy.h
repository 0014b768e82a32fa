/*
 * policy.h — one policy Lua state: the sandbox, the memory limit, the per-run
 * CPU budget, loading and validation of a policy script, and hook runs
 * (coroutines) on that state. The runtime (runtime.c) binds the shard/node
 * primitives into it and schedules the runs.
 *
 * Everything here runs on one thread (the loop thread) per state.
 */
#ifndef STRATA_POLICY_H
#define STRATA_POLICY_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_run;

/** The resolved settings of a policy (policy.c fills them from the script). */
/** background_io_mib_per_s = "auto": the budget's automatic mode (lib/ratelimit.h). */
#define POLICY_IO_AUTO (-2.0)

struct runtime_settings {
	/** Seconds between seals of a non-empty memtable (0 = never). */
	double flush_interval_s;
	/** Seconds between sweeper runs (0 = off). */
	double sweep_interval_s;
	/** Pending generations that trigger a merge after a seal (0 = off). */
	uint32_t merge_after_generations;
	/** Per-pass input cap of every trigger (0 = the engine's cap). */
	uint32_t merge_max_generations;
	/** Memtable size that triggers a seal (0 = none). */
	uint64_t memtable_max_bytes;
	/** Base runs that trigger a compaction (0 = off). */
	uint32_t base_max_runs;
	/** Budget of background writes, MiB/s (0 = unlimited; -1 = not set: the store's
	 *  background_io_bytes_per_s option stays; POLICY_IO_AUTO = "auto"). */
	double background_io_mib_per_s;
	/** Threads one merge or compaction pass writes its run on (0 = the engine's
	 *  merge_threads; more than the engine's runs at the engine's). */
	uint32_t merge_threads;
};

/** Default CPU budget of one hook run (and of loading), milliseconds. */
#define POLICY_DEFAULT_BUDGET_MS 200u
/** Default memory limit of a policy state, bytes. */
#define POLICY_DEFAULT_MEM_BYTES (64ull << 20)
/** Smallest memory limit accepted (a bare sandboxed state needs about 100 KiB). */
#define POLICY_MIN_MEM_BYTES (1ull << 20)
/** Largest policy source accepted, bytes. */
#define POLICY_MAX_SOURCE_BYTES (1u << 20)
/** Virtual-machine instructions between two budget checks of the count hook. */
#define POLICY_HOOK_INSTRUCTIONS 1000

/** Hooks a policy may define. */
enum policy_hook {
	POLICY_ON_SEAL,
	POLICY_ON_SWEEP,
	POLICY_ON_MERGE_REQUEST,
	POLICY_HOOK_COUNT,
};

/** Outcome of policy_run_resume. */
enum {
	/** The hook returned; its results are on the run's thread stack. */
	POLICY_RUN_DONE = 0,
	/** The hook yielded inside a primitive and waits to be resumed. */
	POLICY_RUN_YIELD = 1,
	/** The hook failed (Lua error, time budget or memory limit); see diag_last. */
	POLICY_RUN_ERROR = 2,
};

/** How to build a policy state. */
struct policy_limits {
	/** Memory limit of the state, bytes (0 = POLICY_DEFAULT_MEM_BYTES). */
	uint64_t mem_bytes;
	/** CPU budget of one run and of loading, milliseconds (0 = POLICY_DEFAULT_BUDGET_MS). */
	uint32_t budget_ms;
};

/** CPU clock of the budget: nanoseconds of CPU time of the calling thread. A
 *  budget is CPU time, which the engine's wall/monotonic seams do not model (a
 *  frozen manual clock must not switch the budget off); tests may replace it. */
extern uint64_t (*policy_cpu_ns)(void);

/** The text of the built-in default policy (policies/default.lua). */
extern const char policy_builtin_source[];
/** Name of the built-in default policy in messages. */
#define POLICY_BUILTIN_NAME "policies/default.lua (built-in)"

/** Create a fresh sandboxed state, load src (text only) under the budget,
 *  validate the returned table and resolve the settings. On failure the message
 *  (diag_last) holds every error, one per line, each prefixed with name:line. */
int policy_new(const char *name, const char *src, size_t len, const struct policy_limits *lim,
	       struct policy **out);
/** Close the state (every run of it must have ended) and free. Safe on NULL. */
void policy_delete(struct policy *p);
/** The Lua state (for binding primitives). */
lua_State *policy_lua(struct policy *p);
/** The policy a Lua state (or one of its threads) belongs to. */
struct policy *policy_of(lua_State *L);
/** Resolved settings. */
const struct runtime_settings *policy_settings(const struct policy *p);
/** Whether the script defines the hook (otherwise the built-in default runs). */
int policy_has_hook(const struct policy *p, enum policy_hook h);
/** Lua name of a hook ("on_seal", ...). */
const char *policy_hook_name(enum policy_hook h);
/** The script's source text and its name. */
const char *policy_source(const struct policy *p, size_t *len);
const char *policy_name(const struct policy *p);
/** Opaque pointer of the embedding runtime, readable from primitives. */
void policy_set_host(struct policy *p, void *host);
void *policy_host(const struct policy *p);
/** Bytes the state currently holds. */
uint64_t policy_mem_used(const struct policy *p);

/** Start a run of hook h: a new coroutine with the hook function (the script's,
 *  or the built-in default) on its stack. Push the arguments on
 *  policy_run_thread() and call policy_run_resume(). */
int policy_run_new(struct policy *p, enum policy_hook h, struct policy_run **out);
/** The coroutine of a run. */
lua_State *policy_run_thread(struct policy_run *r);
/** Resume with nargs values on the run's stack (the hook's arguments on the
 *  first resume, a primitive's results afterwards). The budget counts CPU time
 *  only while resumed. POLICY_RUN_ERROR records the hook's error (file:line) as
 *  the message (diag_last). */
int policy_run_resume(struct policy_run *r, int nargs);
/** The run being resumed right now on p (NULL between resumes; while the script loads, a
 *  pseudo-run whose data is NULL). */
struct policy_run *policy_current_run(struct policy *p);
/** CPU time a run has spent while resumed, nanoseconds (what its budget counts). */
uint64_t policy_run_cpu_ns(const struct policy_run *r);
/** The thread's CPU time (policy_cpu_ns) the run took while resumed: what it cost on this
 *  machine, even where the budget runs on a simulated clock. */
uint64_t policy_run_thread_cpu_ns(const struct policy_run *r);
/** Per-run pointer for the runtime. */
void policy_run_set_data(struct policy_run *r, void *data);
void *policy_run_data(const struct policy_run *r);
/** Free a run that finished or is abandoned (its coroutine becomes garbage). */
void policy_run_delete(struct policy_run *r);

/** What the engine allows and a policy's settings may only narrow (DESIGN: the engine
 *  enforces merge_max_inputs for merges and compactions). */
struct policy_engine {
	/** Most generations (or runs) one merge or compaction pass folds
	 *  (strata_options.merge_max_inputs). */
	uint32_t merge_max_inputs;
	/** Threads one pass writes its run on, as the store resolved strata_options.merge_threads
	 *  (0 = not known: no clamp). */
	uint32_t merge_threads;
};

/** A setting of a policy that the engine narrows: what the script asks, what runs, why. */
struct policy_clamp {
	/** The setting's name (static). */
	const char *setting;
	/** The value the script asks for. */
	double asked;
	/** The value the engine uses. */
	double effective;
	/** Why, in words ("clamped to the engine's merge_max_inputs = 8"). */
	char why[160];
};

/** Most clamps one policy can have. */
#define POLICY_MAX_CLAMPS 4

/** The settings s asks for that engine e narrows (merge_max_generations above
 *  merge_max_inputs, or 0 = no cap, runs at merge_max_inputs): up to max of them into
 *  out; returns how many there are. */
unsigned policy_clamps(const struct runtime_settings *s, const struct policy_engine *e, struct policy_clamp *out,
		       unsigned max);
/** s as the engine e runs it: every clamp applied. */
void policy_effective(const struct runtime_settings *s, const struct policy_engine *e, struct runtime_settings *out);
/** Format the settings (as engine e runs them; a clamped one says what the script asks and
 *  why) and the hooks as "key = value" lines (for `strata policy check`). */
void policy_describe(const struct policy *p, const struct policy_engine *e, char *buf, size_t len);

#endif
