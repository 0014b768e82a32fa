/*
 * trial.h — a policy's trial before it runs anywhere that matters: compile and validate
 * it (policy_new), then run every hook once against a simulated node — a temporary store
 * of TRIAL_SHARDS shards with 4, 2 and 0 generations pending — under the real budgets:
 * on_seal on each shard, on_merge_request on shard 0, then on_sweep. Each run's result,
 * CPU and wall time, the log lines it wrote and any error (file:line) are kept, and the
 * shards' invariants are checked afterwards.
 *
 * What `strata policy check [--run]` prints and what PUT /v1/policy runs before it
 * accepts a policy. A trial makes its own loop, host, store and runtime and runs them on
 * the calling thread until every run ended: it takes as long as the hooks do (up to a
 * whole budget each, TRIAL_WALL_S at most for one parked on IO), so a node calls it on
 * a background executor, never on a loop that serves clients or runs its policy. The
 * log lines of the trial's runtime go into the report, not to the process's sink.
 */
#ifndef STRATA_TRIAL_H
#define STRATA_TRIAL_H

#include <stddef.h>
#include <stdint.h>

#include "../strata_types.h"
#include "policy.h"

/** Shards of the simulated node. */
#define TRIAL_SHARDS 3u
/** Rows of each generation of the simulated node. */
#define TRIAL_ROWS 16u
/** Hook runs of a trial: on_seal on each shard, on_merge_request, on_sweep. */
#define TRIAL_RUNS (TRIAL_SHARDS + 2u)
/** Longest wall time one hook run may take before the trial calls it stuck, seconds (a
 *  run parked on IO is not charged to its CPU budget). */
#define TRIAL_WALL_S 30.0

/** Generations pending on each shard of the simulated node. */
extern const unsigned trial_gens[TRIAL_SHARDS];

/** How to run a trial. Zero members take the defaults. */
struct trial_options {
	/** Run the hooks (else compile and validate only). */
	int run;
	/** Limits of the policy state: a node passes its own (runtime_limits). */
	struct policy_limits limits;
	/** The options of the simulated node's store, required: strata_options_init's, with
	 *  the engine's limits of the node to imitate (merge_max_inputs: the settings are
	 *  checked against it). The trial sets its own dir, shards, sync and WAL, on the
	 *  local file system. */
	const strata_options *store;
	/** Directory the temporary store is made in (NULL: $TMPDIR, else /tmp). */
	const char *tmpdir;
};

/** How one hook run of a trial ended. */
enum trial_outcome {
	/** The hook returned. */
	TRIAL_RUN_OK,
	/** It failed: a Lua error, its time budget or the memory limit (err). */
	TRIAL_RUN_FAILED,
	/** It was still parked after TRIAL_WALL_S of wall time. */
	TRIAL_RUN_STUCK,
	/** The runtime could not start it (err). */
	TRIAL_RUN_NOT_STARTED,
};

/** One hook run of a trial. */
struct trial_run {
	/** The hook, and the shard of on_seal and on_merge_request. */
	enum policy_hook hook;
	uint32_t shard;
	/** The script defines the hook (else its built-in default ran). */
	int scripted;
	/** enum trial_outcome. */
	int outcome;
	/** The error, with file:line ("" when it returned). */
	char err[2048];
	/** Its return values as text ("" for none). */
	char result[256];
	/** CPU time it ran (what its budget counts) and wall time it took, nanoseconds. */
	uint64_t cpu_ns, wall_ns;
	/** The log lines written while it ran, "level: text" each, one per line (env.malloc;
	 *  NULL for none). The runtime's own line about a failed hook is left out: err says it. */
	char *log;
	/** (the trial's own) The runtime's completion of the run came; the trial stopped
	 *  waiting for it (a completion after that changes nothing). */
	int done, abandoned;
};

/** The report of a trial. */
struct trial {
	/** Name of the policy in messages. */
	char name[512];
	/** The limits and the engine it ran under (defaults filled in). */
	struct policy_limits limits;
	struct policy_engine engine;
	/** 0 when the policy compiled and validated, else the refusal's code; errors (one
	 *  per line, each with file:line) then. */
	int compile_rc;
	char errors[8192];
	/** Its settings as the script asks them, the clamps the engine applies, and which
	 *  hooks it defines (when it compiled). */
	struct runtime_settings settings;
	struct policy_clamp clamps[POLICY_MAX_CLAMPS];
	unsigned nclamps;
	int has_hook[POLICY_HOOK_COUNT];
	/** policy_describe's lines (when it compiled). */
	char describe[2048];
	/** The hooks were run (options.run and it compiled). */
	int ran;
	/** Why the simulated node could not be built ("" when it was): the policy is then
	 *  neither passed nor failed. */
	char setup_err[1024];
	/** The runtime refused the policy ("" when it took it; a failure). */
	char runtime_err[4096];
	/** The runs, in order. */
	struct trial_run runs[TRIAL_RUNS];
	unsigned nruns;
	/** Shards whose invariants failed after the runs, and the first message. */
	unsigned bad_shards;
	char check_err[1024];
	/** Log lines written outside any run (after the last, while its work finished). */
	char *log;
	/** Failures: runs that did not return, a refusal of the runtime, broken shards. */
	unsigned failed;
	/** Runs counted in the verdict (1 when the runtime refused the policy). */
	unsigned counted;
};

/** Try the policy src (len bytes, named name in messages): compile and validate it and,
 *  with o->run, run its hooks (see above). *out is the report (trial_delete it) unless
 *  out of memory (STRATA_ENOMEM). Returns 0 when the policy passed, STRATA_EINVAL when
 *  it did not compile or a run failed, or the code of a simulated node that could not be
 *  built (setup_err; the policy's worth is then unknown). */
int trial_new(const char *name, const char *src, size_t len, const struct trial_options *o, struct trial **out);
/** Free a report. Safe on NULL. */
void trial_delete(struct trial *t);
/** The first run that did not return, or NULL. */
const struct trial_run *trial_first_failure(const struct trial *t);
/** The line of "name:LINE: ..." in a message of the trial's policy, or 0. */
int trial_msg_line(const struct trial *t, const char *msg);

#endif
