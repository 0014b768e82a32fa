/*
 * policy_cmd.c — `strata policy check [--run] FILE...`: compile and validate merge
 * policies without a store. Prints each file's resolved settings and which hooks
 * it defines, or every error with file:line. With --run, every hook also runs against
 * a small simulated node (a temporary store with a few shards and generations pending)
 * under the real budgets, and each run's result, time and error are reported. Exit 0
 * when all are valid (and every hook run succeeded), 1 when one is not, 2 on a usage
 * error.
 */
#include <errno.h>
#include <ev.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../host/host.h"
#include "../lib/diag.h"
#include "../policy/policy.h"
#include "../policy/runtime.h"
#include "../strata.h"
#include "../strata_host.h"
#include "cli.h"

/** Shards of the simulated node of --run. */
#define POLICY_RUN_SHARDS 3u
/** Rows of each generation of the simulated node. */
#define POLICY_RUN_ROWS 16u
/** Longest wall time one hook run may take before --run calls it stuck, seconds (a
 *  run parked on IO is not charged to its CPU budget). */
#define POLICY_RUN_WALL_S 30.0

/** Generations pending on each shard of the simulated node. */
static const unsigned policy_run_gens[POLICY_RUN_SHARDS] = {4, 2, 0};

static void
policy_cmd_usage(FILE *f)
{
	fprintf(f, "usage: strata policy check [--run] FILE...\n"
		   "  compile and validate each policy (in a sandboxed state, under the default\n"
		   "  time budget and memory limit); print its resolved settings and hooks, or\n"
		   "  every error with file:line\n"
		   "  --run   also run every hook (on_seal on each shard, on_merge_request, on_sweep)\n"
		   "          against a simulated node: a temporary store of 3 shards with 4, 2 and 0\n"
		   "          generations pending, under the real budgets (%u ms of CPU per run, %llu MiB);\n"
		   "          report each run's result, CPU and wall time, and any error with file:line.\n"
		   "          A hook that fails (a Lua error, its time budget, the memory limit) makes\n"
		   "          the policy broken: exit 1\n",
		POLICY_DEFAULT_BUDGET_MS, (unsigned long long)(POLICY_DEFAULT_MEM_BYTES >> 20));
}

/** Read a whole policy file (at most POLICY_MAX_SOURCE_BYTES + 1 bytes); NULL with err set. */
static char *
policy_cmd_read(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	if (fp == NULL) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(POLICY_MAX_SOURCE_BYTES + 2);
	if (buf == NULL) {
		fclose(fp);
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	size_t n = fread(buf, 1, POLICY_MAX_SOURCE_BYTES + 1, fp);
	int bad = ferror(fp);
	int e = errno;
	fclose(fp);
	if (bad) {
		free(buf);
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* ---------------------------------------------------------------- --run */

/** One hook run of --run and how it ended. */
struct policy_hook_run {
	/** Set by the completion. */
	int done;
	/** Whether it failed, and the message. */
	int failed;
	char err[2048];
	/** Its return values as text. */
	char result[256];
	/** CPU time it ran, nanoseconds. */
	uint64_t cpu_ns;
};

static void
policy_hook_done(void *ctx, const char *err, const char *result, uint64_t cpu_ns)
{
	struct policy_hook_run *r = ctx;
	r->done = 1;
	r->failed = err != NULL;
	snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
	snprintf(r->result, sizeof(r->result), "%s", result ? result : "");
	r->cpu_ns = cpu_ns;
}

/** Log lines while hooks run: the hooks' own strata.log output, indented under the run
 *  (the runtime's line about a failed hook repeats what the report says). */
static void
policy_run_log(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	if (level < diag_log_level || strncmp(msg, "policy hook ", 12) == 0)
		return;
	char text[4 * DIAG_LOG_MAX + 1];
	diag_logfmt_escape(msg, text, sizeof(text));
	printf("      log %s: %s\n", names[level & 3], text);
}

static double
policy_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
policy_guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

static int
policy_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/** The simulated node of --run: a loop, a host on it, a store with generations pending. */
struct policy_sim {
	/** Temporary data directory. */
	char dir[256];
	struct ev_loop *loop;
	/** Keeps EVRUN_ONCE from blocking longer than 10 ms. */
	ev_timer guard;
	struct host *host;
	strata *db;
};

static void
policy_sim_close(struct policy_sim *s)
{
	strata_close(s->db);
	host_delete(s->host);
	if (s->loop != NULL) {
		ev_timer_stop(s->loop, &s->guard);
		ev_loop_destroy(s->loop);
	}
	if (s->dir[0] != '\0')
		nftw(s->dir, policy_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	memset(s, 0, sizeof(*s));
}

/** Build the simulated node; 0, or -1 with a message on stderr. */
static int
policy_sim_open(struct policy_sim *s)
{
	memset(s, 0, sizeof(*s));
	const char *tmp = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/strata-policy-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(s->dir) == NULL) {
		fprintf(stderr, "strata policy check --run: cannot create a temporary store in %s: %s\n", s->dir,
			strerror(errno));
		s->dir[0] = '\0';
		return -1;
	}
	s->loop = ev_loop_new(EVFLAG_AUTO);
	struct host_options ho = {.mode = HOST_THREADED, .loop = s->loop};
	strata_options so;
	strata_options_init(&so);
	so.dir = s->dir;
	so.shards = POLICY_RUN_SHARDS;
	so.sync = STRATA_SYNC_NONE;
	if (s->loop == NULL || host_new(&ho, &s->host) != 0 || strata_open_on(&so, s->host, NULL, &s->db) != 0) {
		fprintf(stderr, "strata policy check --run: cannot open a temporary store in %s: %s\n", s->dir,
			s->loop ? strata_last_error() : "no event loop");
		policy_sim_close(s);
		return -1;
	}
	ev_timer_init(&s->guard, policy_guard_cb, 0.01, 0.01);
	ev_timer_start(s->loop, &s->guard);
	for (uint32_t shard = 0; shard < POLICY_RUN_SHARDS; shard++) {
		for (unsigned g = 0; g < policy_run_gens[shard]; g++) {
			strata_row rows[POLICY_RUN_ROWS];
			char keys[POLICY_RUN_ROWS][32], vals[POLICY_RUN_ROWS][32];
			for (unsigned i = 0; i < POLICY_RUN_ROWS; i++) {
				snprintf(keys[i], sizeof(keys[i]), "key-%02u-%04u", g, i);
				snprintf(vals[i], sizeof(vals[i]), "value-%u-%u-%u", shard, g, i);
				rows[i] = (strata_row){keys[i], strlen(keys[i]), vals[i], strlen(vals[i])};
			}
			if (strata_append(s->db, shard, rows, POLICY_RUN_ROWS) != 0 || strata_seal(s->db, shard) != 0) {
				fprintf(stderr, "strata policy check --run: cannot fill the temporary store: %s\n",
					strata_last_error());
				policy_sim_close(s);
				return -1;
			}
		}
	}
	return 0;
}

/** Run hook h (on shard) once and print how it went; 0 when it succeeded. */
static int
policy_run_one(struct policy_sim *s, struct runtime *rt, enum policy_hook h, uint32_t shard, int scripted)
{
	struct policy_hook_run r;
	memset(&r, 0, sizeof(r));
	char what[64];
	if (h == POLICY_ON_SWEEP)
		snprintf(what, sizeof(what), "%s", policy_hook_name(h));
	else
		snprintf(what, sizeof(what), "%s (shard %u)", policy_hook_name(h), shard);
	fflush(stdout);
	double t0 = policy_now_s(), deadline = t0 + POLICY_RUN_WALL_S;
	int rc;
	/* A run the runtime started by itself (a trigger) goes first. */
	while ((rc = runtime_run_hook(rt, h, shard, policy_hook_done, &r)) == STRATA_EBUSY && policy_now_s() < deadline)
		ev_run(s->loop, EVRUN_ONCE);
	if (rc != 0) {
		printf("    %-28s FAILED: cannot start it: %s\n", what, diag_last());
		return -1;
	}
	while (!r.done && policy_now_s() < deadline)
		ev_run(s->loop, EVRUN_ONCE);
	double wall_ms = (policy_now_s() - t0) * 1e3;
	const char *who = scripted ? "" : " (built-in default)";
	if (!r.done) {
		printf("    %-28s FAILED: still running after %.0f s of wall time%s (parked on IO that never "
		       "finished?)\n", what, POLICY_RUN_WALL_S, who);
		return -1;
	}
	if (r.failed) {
		printf("    %-28s FAILED after %.1f ms of CPU, %.1f ms%s: %s\n", what, (double)r.cpu_ns / 1e6,
		       wall_ms, who, r.err);
		return -1;
	}
	printf("    %-28s ok, returned %s, %.1f ms of CPU, %.1f ms%s\n", what, r.result[0] ? r.result : "nothing",
	       (double)r.cpu_ns / 1e6, wall_ms, who);
	return 0;
}

/** --run of one validated policy; 0 when every hook run succeeded. */
static int
policy_cmd_run(const char *path, const char *src, size_t len, const struct policy *p)
{
	struct policy_sim s;
	if (policy_sim_open(&s) != 0)
		return -1;
	printf("  run: a simulated node of %u shards with %u, %u and %u generations pending (a temporary store), "
	       "%u ms of CPU per hook run, %llu MiB of memory:\n", POLICY_RUN_SHARDS, policy_run_gens[0],
	       policy_run_gens[1], policy_run_gens[2], POLICY_DEFAULT_BUDGET_MS,
	       (unsigned long long)(POLICY_DEFAULT_MEM_BYTES >> 20));
	void (*sink)(int, const char *) = diag_log_sink;
	diag_log_sink = policy_run_log;
	char err[4096];
	struct runtime_options ro = {.db = strata_store(s.db), .host = s.host, .policy_path = path,
				     .policy_source = src};
	struct runtime *rt = NULL;
	(void)len;
	int failed = 0, runs = 0;
	if (runtime_new(&ro, &rt, err, sizeof(err)) != 0) {
		printf("    FAILED: the runtime refused the policy: %s\n", err);
		failed = runs = 1;
	} else {
		for (uint32_t shard = 0; shard < POLICY_RUN_SHARDS; shard++, runs++)
			failed += policy_run_one(&s, rt, POLICY_ON_SEAL, shard, policy_has_hook(p, POLICY_ON_SEAL)) != 0;
		failed += policy_run_one(&s, rt, POLICY_ON_MERGE_REQUEST, 0,
					 policy_has_hook(p, POLICY_ON_MERGE_REQUEST)) != 0;
		failed += policy_run_one(&s, rt, POLICY_ON_SWEEP, 0, policy_has_hook(p, POLICY_ON_SWEEP)) != 0;
		runs += 2;
		/* What the runs started (merges, seals) finishes before the store closes. */
		double deadline = policy_now_s() + POLICY_RUN_WALL_S;
		while (runtime_busy(rt) > 0 && policy_now_s() < deadline)
			ev_run(s.loop, EVRUN_ONCE);
		runtime_delete(rt);
		for (uint32_t shard = 0; shard < POLICY_RUN_SHARDS; shard++)
			if (strata_check(s.db, shard) != 0) {
				printf("    FAILED: the invariants of shard %u after the runs: %s\n", shard,
				       strata_last_error());
				failed++;
			}
	}
	diag_log_sink = sink;
	policy_sim_close(&s);
	if (failed)
		printf("%s: broken: %d of %d hook runs failed\n", path, failed, runs);
	else
		printf("%s: ok: all %d hook runs succeeded\n", path, runs);
	return failed ? -1 : 0;
}

/** Check one file (and run its hooks with run); 0 when valid. */
static int
policy_cmd_check(const char *path, int run)
{
	char err[8192];
	size_t len = 0;
	char *src = policy_cmd_read(path, &len, err, sizeof(err));
	if (src == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct policy *p = NULL;
	int rc = policy_new(path, src, len, NULL, &p, err, sizeof(err));
	if (rc != 0) {
		free(src);
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	char desc[2048];
	policy_describe(p, desc, sizeof(desc));
	printf("%s: ok\n", path);
	for (char *line = strtok(desc, "\n"); line != NULL; line = strtok(NULL, "\n"))
		printf("  %s\n", line);
	int failed = run && policy_cmd_run(path, src, len, p) != 0;
	policy_delete(p);
	free(src);
	fflush(stdout);
	return failed;
}

int
cmd_policy(int argc, char **argv)
{
	if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
		policy_cmd_usage(stdout);
		return 0;
	}
	if (argc < 1 || strcmp(argv[0], "check") != 0) {
		if (argc >= 1)
			fprintf(stderr, "strata policy: unknown subcommand '%s'\n", argv[0]);
		policy_cmd_usage(stderr);
		return 2;
	}
	int run = 0, files = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			policy_cmd_usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "--run") == 0) {
			run = 1;
		} else if (strcmp(argv[i], "--") == 0) {
			files += argc - i - 1;
			break;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "strata policy check: unknown flag %s\n", argv[i]);
			policy_cmd_usage(stderr);
			return 2;
		} else {
			files++;
		}
	}
	if (files == 0) {
		policy_cmd_usage(stderr);
		return 2;
	}
	int failed = 0, flags = 1;
	for (int i = 1; i < argc; i++) {
		if (flags && strcmp(argv[i], "--") == 0) {
			flags = 0;
			continue;
		}
		if (flags && argv[i][0] == '-')
			continue;
		failed |= policy_cmd_check(argv[i], run);
	}
	return failed ? 1 : 0;
}
