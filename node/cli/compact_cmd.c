/*
 * compact_cmd.c — `strata compact --shard N (--store URL | --data DIR) [...]`: an
 * external compactor process next to a shard's live node (node/core/compactor.h). It
 * never claims the shard's epoch and never takes the data directory's LOCK, so
 * starting or stopping it never stops the node.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/compactor.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/text.h"
#include "../policy/policy.h"
#include "../strata.h"
#include "cli.h"

/** Longest --interval, seconds (a day). */
#define COMPACT_MAX_INTERVAL_S 86400.0
/** Largest policy file read, bytes. */
#define COMPACT_MAX_POLICY_BYTES (1u << 20)

/** Set by SIGTERM/SIGINT: finish the pass and exit. */
static volatile sig_atomic_t compact_stop;

static void
compact_on_signal(int sig)
{
	(void)sig;
	compact_stop = 1;
}

/** The merge settings of the built-in default policy, which --max-generations and
 *  --base-max-runs default to without --policy. */
static void
compact_builtin_settings(uint32_t *max_gens, uint32_t *base_runs)
{
	struct policy *p = NULL;
	if (policy_new(POLICY_BUILTIN_NAME, policy_builtin_source, strlen(policy_builtin_source), NULL, &p) != 0)
		return; /* a broken built-in default fails the policy tests; keep the callers' values */
	*max_gens = policy_settings(p)->merge_max_generations;
	*base_runs = policy_settings(p)->base_max_runs;
	policy_delete(p);
}

static void
compact_usage(FILE *f)
{
	strata_options so;
	strata_options_init(&so);
	uint32_t gens = 0, runs = 0;
	compact_builtin_settings(&gens, &runs);
	fprintf(f,
		"usage: strata compact --shard N (--store URL | --data DIR) [--max-generations K]\n"
		"                      [--base-max-runs R] [--merge-threads T] [--once | --interval S]\n"
		"                      [--merge-part-min-bytes B] [--policy FILE]\n"
		"\n"
		"An external compactor of one shard, next to the node that serves it: each pass reads\n"
		"the shard's newest manifest, merges up to K of its oldest flushed generations into a\n"
		"base run, then folds the base runs together when there are more than R, and commits\n"
		"each as the next manifest version with the node's epoch unchanged. It never claims the\n"
		"epoch, never reads the WAL and never takes DIR/LOCK, so it never fences or stops the\n"
		"node. When the node merged the same inputs first, the compactor's commit loses\n"
		"(conflict), its run is deleted and the next pass plans again. It deletes nothing it\n"
		"merged: the node does when it sees the new version (its next seal or merge), or its\n"
		"next open collects them.\n"
		"\n"
		"  --shard N             the shard (required)\n"
		"  --store URL           the shard's object store (azure://..., as strata serve --store)\n"
		"  --data DIR            the node's data directory, for the fs store in DIR/objects\n"
		"                        (its LOCK is not taken; the node keeps it)\n"
		"  --max-generations K   generations one merge folds (default: the policy's\n"
		"                        merge_max_generations, else %u; 0 = up to --merge-max-inputs)\n"
		"  --base-max-runs R     fold the base when it has more than R runs (default: the\n"
		"                        policy's base_max_runs, else %u; 0 = never)\n"
		"  --merge-max-inputs M  most inputs of one pass (default %u, as strata serve)\n"
		"  --merge-threads T     threads a pass writes on (default 1, the pass's own; at most\n"
		"                        64); a pass of at least 2 x B input bytes splits its key\n"
		"                        range into up to T parts written at once\n"
		"  --merge-part-min-bytes B  the least input of one part (default %llu, as strata\n"
		"                        serve)\n"
		"  --once                one pass, then exit (the default)\n"
		"  --interval S          a pass every S seconds (0 < S <= %.0f) until SIGTERM/SIGINT\n"
		"  --policy FILE         take merge_max_generations and base_max_runs from a policy\n"
		"                        file (its hooks are not run)\n"
		"\n"
		"Each pass prints one line: what it merged and folded, lost races, the manifest\n"
		"version and the writer epoch. Exit 0, or 1 after a failure (the message says which).\n",
		gens, runs, so.merge_max_inputs, (unsigned long long)so.merge_part_min_bytes,
		COMPACT_MAX_INTERVAL_S);
}

/** Parse an unsigned decimal flag value; -1 with a message on anything else. */
static int
compact_uint(const char *flag, const char *v, uint32_t max, uint32_t *out)
{
	uint64_t x = 0;
	if (text_u64(v, 10, &x, NULL) != 0 || x > max) {
		fprintf(stderr, "strata compact: %s takes a number 0..%u, not '%s'\n", flag, max,
			v ? v : "");
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

/** Read the policy file and take its merge settings; -1 with a message. */
static int
compact_policy(const char *path, uint32_t *max_gens, uint32_t *base_runs)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "strata compact: --policy %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *src = malloc(COMPACT_MAX_POLICY_BYTES + 1);
	size_t len = src ? fread(src, 1, COMPACT_MAX_POLICY_BYTES + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (src == NULL || bad || len > COMPACT_MAX_POLICY_BYTES) {
		fprintf(stderr, "strata compact: --policy %s: %s\n", path,
			src == NULL ? "out of memory" : bad ? "read error" : "larger than 1 MiB");
		free(src);
		return -1;
	}
	struct policy *p = NULL;
	int rc = policy_new(path, src, len, NULL, &p);
	free(src);
	if (rc) {
		fprintf(stderr, "strata compact: --policy %s: broken:\n%s\n", path, diag_last());
		return -1;
	}
	const struct runtime_settings *s = policy_settings(p);
	*max_gens = s->merge_max_generations;
	*base_runs = s->base_max_runs;
	policy_delete(p);
	return 0;
}

int
cmd_compact(int argc, char **argv)
{
	strata_options so;
	strata_options_init(&so);
	struct compactor_options o = {
		.merge_max_inputs = so.merge_max_inputs,
		.block_bytes = so.block_bytes,
		.zstd_level = so.zstd_level,
		.bloom_bits_per_key = so.bloom_bits_per_key,
	};
	compact_builtin_settings(&o.max_generations, &o.base_max_runs);
	int have_shard = 0, once = 0, have_gens = 0, have_runs = 0;
	uint32_t gens = 0, runs = 0;
	double interval = 0;
	const char *policy = NULL;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			compact_usage(stdout);
			return 0;
		}
		if (strcmp(a, "--once") == 0) {
			once = 1;
			continue;
		}
		int takes = strcmp(a, "--shard") == 0 || strcmp(a, "--store") == 0 || strcmp(a, "--data") == 0 ||
			    strcmp(a, "--max-generations") == 0 || strcmp(a, "--base-max-runs") == 0 ||
			    strcmp(a, "--merge-max-inputs") == 0 || strcmp(a, "--interval") == 0 ||
			    strcmp(a, "--merge-threads") == 0 || strcmp(a, "--merge-part-min-bytes") == 0 ||
			    strcmp(a, "--policy") == 0;
		if (!takes) {
			fprintf(stderr, "strata compact: unknown argument '%s' (strata compact --help)\n", a);
			return 2;
		}
		if (v == NULL) {
			fprintf(stderr, "strata compact: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (strcmp(a, "--shard") == 0) {
			if (compact_uint(a, v, 65535, &o.shard))
				return 2;
			have_shard = 1;
		} else if (strcmp(a, "--store") == 0) {
			o.store = v;
		} else if (strcmp(a, "--data") == 0) {
			o.dir = v;
		} else if (strcmp(a, "--max-generations") == 0) {
			if (compact_uint(a, v, 1000000, &gens))
				return 2;
			have_gens = 1;
		} else if (strcmp(a, "--base-max-runs") == 0) {
			if (compact_uint(a, v, 1000000, &runs))
				return 2;
			have_runs = 1;
		} else if (strcmp(a, "--merge-max-inputs") == 0) {
			if (compact_uint(a, v, 1000000, &o.merge_max_inputs))
				return 2;
		} else if (strcmp(a, "--merge-threads") == 0) {
			if (compact_uint(a, v, 64, &o.merge_threads))
				return 2;
			if (o.merge_threads == 0) {
				fprintf(stderr, "strata compact: --merge-threads takes 1..64, not 0\n");
				return 2;
			}
		} else if (strcmp(a, "--merge-part-min-bytes") == 0) {
			if (text_u64(v, 10, &o.merge_part_min_bytes, NULL) != 0 || o.merge_part_min_bytes == 0) {
				fprintf(stderr, "strata compact: --merge-part-min-bytes takes bytes, at least 1, "
					"not '%s'\n", v ? v : "");
				return 2;
			}
		} else if (strcmp(a, "--interval") == 0) {
			char *end = NULL;
			interval = strtod(v, &end);
			if (end == v || *end != '\0' || !(interval > 0) || interval > COMPACT_MAX_INTERVAL_S) {
				fprintf(stderr, "strata compact: --interval takes seconds, 0 < S <= %.0f, not '%s'\n",
					COMPACT_MAX_INTERVAL_S, v);
				return 2;
			}
		} else {
			policy = v;
		}
	}
	if (!have_shard) {
		fprintf(stderr, "strata compact: --shard N is required (strata compact --help)\n");
		return 2;
	}
	if ((o.store == NULL) == (o.dir == NULL)) {
		fprintf(stderr, "strata compact: give exactly one of --store URL and --data DIR\n");
		return 2;
	}
	if (once && interval > 0) {
		fprintf(stderr, "strata compact: --once and --interval exclude each other\n");
		return 2;
	}
	if (policy != NULL && compact_policy(policy, &o.max_generations, &o.base_max_runs))
		return 2;
	if (have_gens)
		o.max_generations = gens;
	if (have_runs)
		o.base_max_runs = runs;
	struct compactor *c = NULL;
	if (compactor_open(&o, &c) != 0) {
		fprintf(stderr, "strata compact: %s\n", diag_last());
		return 1;
	}
	signal(SIGTERM, compact_on_signal);
	signal(SIGINT, compact_on_signal);
	int status = 0;
	for (unsigned long pass = 1; !compact_stop; pass++) {
		struct compactor_pass r;
		int rc = compactor_run(c, &r);
		if (rc) {
			fprintf(stderr, "strata compact: shard %u: pass %lu: %s\n", o.shard, pass, diag_last());
			status = 1;
			if (interval <= 0)
				break;
		} else {
			printf("compact: shard %u pass %lu: merged %u generations, folded %u runs, %u lost to "
			       "the writer, %llu bytes in, %llu out; manifest v%llu epoch %llu: %u generations, "
			       "%u runs\n", o.shard, pass, r.merged, r.compacted, r.lost,
			       (unsigned long long)r.bytes_in, (unsigned long long)r.bytes_out,
			       (unsigned long long)r.version, (unsigned long long)r.epoch, r.generations,
			       r.runs);
			fflush(stdout);
		}
		if (interval <= 0)
			break;
		/* Sleep in short steps so a signal ends the wait soon. */
		for (double left = interval; left > 0 && !compact_stop; left -= 0.05) {
			struct timespec ts = {0, 50 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	compactor_close(c);
	return status;
}
