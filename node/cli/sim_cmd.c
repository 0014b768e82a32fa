/*
 * sim_cmd.c — `strata sim --seed N [--steps M] [--policy FILE]`: a deterministic
 * simulation of a store (node/sim) with injected faults and a model checker. Prints
 * the seed, what ran, the trace hash and a replay line; on a failure, the shortest
 * prefix of steps that still fails.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/sim.h"
#include "../lib/text.h"
#include "../strata.h"
#include "cli.h"

/** Most steps of one seed. */
#define SIM_CMD_MAX_STEPS 1000000u
/** Most seeds of one --seeds run. */
#define SIM_CMD_MAX_SEEDS 10000000u

static const char *const sim_bug_names[] = {"none", "wal-nosync", "gen-nosync"};
/** Names of the SIM_STRICT_* bits, in bit order. */
static const char *const sim_strict_names[] = {"dirs", "zeros", "commit-point", "reopen", "tails"};
/** Entries of sim_strict_names. */
#define SIM_STRICT_NAMES 5

/** Parse --strict[=LIST]: 0, or -1 with a message. */
static int
sim_strict_parse(const char *list, int *out)
{
	if (list == NULL) {
		*out = SIM_STRICT_ALL;
		return 0;
	}
	*out = 0;
	const char *p = list;
	while (*p) {
		size_t n = strcspn(p, ",");
		int found = 0;
		for (int b = 0; b < SIM_STRICT_NAMES; b++)
			if (strlen(sim_strict_names[b]) == n && strncmp(p, sim_strict_names[b], n) == 0) {
				*out |= 1 << b;
				found = 1;
			}
		if (!found) {
			fprintf(stderr, "strata sim: --strict takes dirs, zeros, commit-point, reopen and tails "
				"(comma-separated), not %.*s\n", (int)n, p);
			return -1;
		}
		p += n + (p[n] == ',');
	}
	return 0;
}

static void
sim_usage(FILE *f)
{
	fprintf(f,
		"usage: strata sim --seed N [--steps M] [--policy FILE] [--seeds K] [--plant-bug BUG]\n"
		"                  [--strict[=LIST]] [--first-failure] [--no-shrink] [--verbose] [--trace]\n"
		"\n"
		"Runs a seeded workload (appends, gets, scans, seals, merges, compactions, crashes and\n"
		"reopens) against a store on a simulated file system and object store, in one thread,\n"
		"with injected faults (EIO, ENOSPC, torn writes, power loss at any call or test point,\n"
		"object-store errors and latency), and checks it against a model after every step and\n"
		"every reopen. The same seed gives the same run and the same trace hash.\n"
		"\n"
		"  --seed N          the seed (default 1)\n"
		"  --steps M         operations per seed (default 200, at most %u)\n"
		"  --seeds K         run seeds N .. N+K-1 (default 1); prints one line per failing seed\n"
		"  --policy FILE     open with this policy and reload it now and then\n"
		"  --plant-bug BUG   plant an engine bug through the sim's seams, to see it found:\n"
		"                    wal-nosync (acknowledge appends without syncing the WAL) or\n"
		"                    gen-nosync (publish a seal's generation without syncing it)\n"
		"  --strict[=LIST]   faults the engine does not survive yet as well (all, or a comma\n"
		"                    list): dirs (failed directory opens and fsyncs), zeros (tails\n"
		"                    that end in zeros at power loss), commit-point (a failed test\n"
		"                    point between a commit's manifest write and its view swap),\n"
		"                    reopen (a clean reopen, not a power loss, after a failed append),\n"
		"                    tails (a prefix of an unsynced tail survives a power loss; zeros\n"
		"                    and reopen keep such tails too)\n"
		"  --first-failure   with --seeds, stop at the first failing seed\n"
		"  --no-shrink       on a failure, do not search for the shortest failing prefix\n"
		"  --verbose         print every step (to stderr)\n"
		"  --trace           print every step and every file call (to stderr)\n"
		"\n"
		"Exit status: 0 when every seed passed, 1 when one failed, 2 on bad usage.\n",
		SIM_CMD_MAX_STEPS);
}

static int
sim_num(const char *flag, const char *v, uint64_t max, uint64_t *out)
{
	uint64_t n = 0;
	if (text_u64(v, 0, &n, NULL) != 0 || n > max) {
		fprintf(stderr, "strata sim: %s needs a number from 0 to %" PRIu64 "%s%s\n", flag, max,
			v ? ", not " : "", v ? v : "");
		return -1;
	}
	*out = n;
	return 0;
}

/** The replay line of a run. */
static void
sim_replay(FILE *f, const char *argv0, const struct sim_config *c)
{
	fprintf(f, "sim: replay: %s sim --seed %" PRIu64 " --steps %u", argv0, c->seed, c->steps);
	if (c->policy)
		fprintf(f, " --policy %s", c->policy);
	if (c->bug)
		fprintf(f, " --plant-bug %s", sim_bug_names[c->bug]);
	if (c->strict == SIM_STRICT_ALL) {
		fprintf(f, " --strict");
	} else if (c->strict) {
		const char *sep = "=";
		fprintf(f, " --strict");
		for (int b = 0; b < SIM_STRICT_NAMES; b++)
			if (c->strict & (1 << b)) {
				fprintf(f, "%s%s", sep, sim_strict_names[b]);
				sep = ",";
			}
	}
	fprintf(f, "\n");
}

static void
sim_report(const struct sim_config *c, const struct sim_result *r)
{
	printf("sim: seed %" PRIu64 ": %u steps: %" PRIu64 " appends (%" PRIu64 " rows acknowledged), %" PRIu64
	       " gets, %" PRIu64 " scans, %" PRIu64 " seals, %" PRIu64 " merges, %" PRIu64 " compactions, %" PRIu64
	       " aborted plans, %" PRIu64 " reloads, %" PRIu64 " checkpoints; %" PRIu64 " crashes, %" PRIu64 " reopens, %" PRIu64
	       " failed operations, %" PRIu64 " reads checked\n",
	       c->seed, c->steps, r->appends, r->rows, r->gets, r->scans, r->seals, r->merges, r->compactions,
	       r->aborts, r->reloads, r->checkpoints, r->crashes, r->reopens, r->failed_ops, r->checks);
	printf("sim: faults: %" PRIu64 " EIO, %" PRIu64 " ENOSPC, %" PRIu64 " torn writes, %" PRIu64
	       " failed test points, %" PRIu64 " object-store errors, %" PRIu64 " power losses (%" PRIu64
	       " unsynced tails torn); %" PRIu64 " file calls, %.3f s simulated\n",
	       r->fs.eio, r->fs.enospc, r->fs.torn, r->fs.points_failed, r->fs.os_errors, r->fs.power_losses,
	       r->fs.tails_torn, r->fs.calls, (double)r->sim_ns / 1e9);
	if (c->bug)
		printf("sim: planted bug %s fired %" PRIu64 " times\n", sim_bug_names[c->bug], r->fs.bug_fired);
	printf("sim: %" PRIu64 " strata_step calls ran %" PRIu64 " chunks of background work; %u temp files of "
	       "interrupted writes left (the fs store's sweep uses lstat, outside env)\n",
	       r->steps_run, r->chunks, r->tmp_left);
	printf("sim: trace %016" PRIx64 " (%" PRIu64 " engine events), io %016" PRIx64 ", tree %016" PRIx64 "\n",
	       r->trace_hash, r->trace_events, r->io_hash, r->tree_hash);
}

/** Run c; 1 when it failed, 0 when it passed, negative when it could not run. */
static int
sim_once(const struct sim_config *c, struct sim_result *r)
{
	int rc = sim_run(c, r);
	if (rc) {
		fprintf(stderr, "strata sim: seed %" PRIu64 ": %s\n", c->seed, strata_strerror(rc));
		return rc;
	}
	return r->failed ? 1 : 0;
}

/** The shortest prefix of c's steps that still fails (c fails at step fail_step). */
static uint32_t
sim_shrink(const struct sim_config *c, uint32_t fail_step)
{
	uint32_t hi = fail_step + 1 < c->steps ? fail_step + 1 : c->steps;
	uint32_t lo = 0;
	/* The first hi steps fail (the run up to there is the same); find the fewest that do. */
	struct sim_config t = *c;
	t.verbose = 0;
	t.keep_log = 0;
	while (lo + 1 < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		t.steps = mid;
		struct sim_result r;
		int f = sim_once(&t, &r);
		free(r.log);
		if (f == 1)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/** Report a failing seed: the failure, the shortest failing prefix, the replay line. */
static void
sim_failed(const char *argv0, const struct sim_config *c, const struct sim_result *r, int shrink)
{
	printf("sim: seed %" PRIu64 " FAILED at step %u: %s\n", c->seed, r->fail_step, r->why);
	struct sim_config t = *c;
	if (shrink) {
		t.steps = sim_shrink(c, r->fail_step);
		t.keep_log = 1;
		t.verbose = 0;
		struct sim_result sr;
		if (sim_once(&t, &sr) == 1) {
			printf("sim: shortest failing prefix: %u of %u steps (fails at step %u: %s):\n", t.steps,
			       c->steps, sr.fail_step, sr.why);
			fwrite(sr.log, 1, sr.log_len, stdout);
		} else {
			printf("sim: the prefix of %u steps passed when run again; replaying all %u\n", t.steps,
			       c->steps);
			t.steps = c->steps;
		}
		free(sr.log);
	}
	sim_replay(stdout, argv0, &t);
}

int
cmd_sim(int argc, char **argv)
{
	const char *argv0 = program_invocation_name;
	struct sim_config c;
	memset(&c, 0, sizeof(c));
	c.seed = 1;
	c.steps = 200;
	uint64_t seeds = 1, v;
	int shrink = 1, first_failure = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			sim_usage(stdout);
			return 0;
		} else if (strcmp(a, "--seed") == 0) {
			if (sim_num(a, next, UINT64_MAX, &c.seed) != 0)
				return 2;
			i++;
		} else if (strcmp(a, "--steps") == 0) {
			if (sim_num(a, next, SIM_CMD_MAX_STEPS, &v) != 0)
				return 2;
			c.steps = (uint32_t)v;
			i++;
		} else if (strcmp(a, "--seeds") == 0) {
			if (sim_num(a, next, SIM_CMD_MAX_SEEDS, &seeds) != 0 || seeds == 0) {
				if (seeds == 0)
					fprintf(stderr, "strata sim: --seeds needs at least 1\n");
				return 2;
			}
			i++;
		} else if (strcmp(a, "--policy") == 0) {
			if (next == NULL) {
				fprintf(stderr, "strata sim: --policy needs a file\n");
				return 2;
			}
			FILE *f = fopen(next, "rb");
			if (f == NULL) {
				fprintf(stderr, "strata sim: --policy %s: %s\n", next, strerror(errno));
				return 2;
			}
			fclose(f);
			c.policy = next;
			i++;
		} else if (strcmp(a, "--plant-bug") == 0) {
			int found = 0;
			for (int b = 1; next && b < (int)(sizeof(sim_bug_names) / sizeof(*sim_bug_names)); b++)
				if (strcmp(next, sim_bug_names[b]) == 0) {
					c.bug = b;
					found = 1;
				}
			if (!found) {
				fprintf(stderr, "strata sim: --plant-bug needs wal-nosync or gen-nosync%s%s\n",
					next ? ", not " : "", next ? next : "");
				return 2;
			}
			i++;
		} else if (strcmp(a, "--strict") == 0 || strncmp(a, "--strict=", 9) == 0) {
			if (sim_strict_parse(a[8] == '=' ? a + 9 : NULL, &c.strict) != 0)
				return 2;
		} else if (strcmp(a, "--first-failure") == 0) {
			first_failure = 1;
		} else if (strcmp(a, "--no-shrink") == 0) {
			shrink = 0;
		} else if (strcmp(a, "--verbose") == 0) {
			c.verbose = 1;
		} else if (strcmp(a, "--trace") == 0) {
			c.verbose = 2;
		} else {
			fprintf(stderr, "strata sim: unknown argument %s (strata sim --help)\n", a);
			return 2;
		}
	}
	if (seeds == 1) {
		struct sim_result r;
		int f = sim_once(&c, &r);
		free(r.log);
		if (f < 0)
			return 1;
		sim_report(&c, &r);
		if (f) {
			sim_failed(argv0, &c, &r, shrink);
			return 1;
		}
		sim_replay(stdout, argv0, &c);
		printf("sim: ok\n");
		return 0;
	}
	uint64_t passed = 0, failed = 0, combined = 0xcbf29ce484222325ull, first = c.seed;
	struct sim_result tot;
	memset(&tot, 0, sizeof(tot));
	for (uint64_t k = 0; k < seeds; k++) {
		c.seed = first + k;
		struct sim_result r;
		int f = sim_once(&c, &r);
		free(r.log);
		if (f < 0)
			return 1;
		combined = (combined ^ r.trace_hash ^ r.io_hash) * 0x100000001b3ull;
		tot.ops += r.ops;
		tot.crashes += r.crashes;
		tot.reopens += r.reopens;
		tot.checks += r.checks;
		tot.rows += r.rows;
		tot.sim_ns += r.sim_ns;
		if (c.verbose)
			printf("sim: seed %" PRIu64 ": %s, trace %016" PRIx64 ", io %016" PRIx64 ", tree %016" PRIx64
			       "\n", c.seed, f ? "FAILED" : "ok", r.trace_hash, r.io_hash, r.tree_hash);
		if (f) {
			failed++;
			sim_failed(argv0, &c, &r, shrink);
			if (first_failure) {
				seeds = k + 1;
				break;
			}
		} else {
			passed++;
		}
	}
	printf("sim: seeds %" PRIu64 "..%" PRIu64 ", %u steps each: %" PRIu64 " steps, %" PRIu64
	       " rows acknowledged, %" PRIu64 " crashes, %" PRIu64 " reopens, %" PRIu64 " reads checked, %.1f s "
	       "simulated; combined trace %016" PRIx64 "\n",
	       first, first + seeds - 1, c.steps, tot.ops, tot.rows, tot.crashes, tot.reopens, tot.checks,
	       (double)tot.sim_ns / 1e9, combined);
	printf("sim: %" PRIu64 " seeds passed, %" PRIu64 " failed\n", passed, failed);
	return failed ? 1 : 0;
}
