/*
 * compare_cmd.c — `strata policy compare --trace FILE [--speed N] [--json] POLICY...`:
 * replay a workload trace in the simulator once per policy (node/sim/replay.h), in one
 * thread, and print what each cost side by side, with what the recorded node did. A
 * POLICY is a file, or "default" for the built-in one.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../sim/replay.h"
#include "../strata.h"
#include "cli.h"

/** Most policies one compare replays. */
#define COMPARE_MAX 16

static void
compare_usage(FILE *f)
{
	fprintf(f, "usage: strata policy compare --trace FILE [--speed N] [--merge-max-inputs N] [--json] POLICY...\n"
		   "  replay the workload trace FILE (POST /v1/trace, strata serve --trace-file, strata load\n"
		   "  --record-trace) in the simulator once per POLICY (a file, or 'default' for the built-in\n"
		   "  one) and print what each cost side by side: seals, merges, bytes sealed and merged,\n"
		   "  write amplification, pending generations (peak and at the end), the time to drain the\n"
		   "  backlog after the trace, the hooks' runs and errors; and what the recorded node did.\n"
		   "  The same trace and policy print the same figures, byte for byte.\n"
		   "  --speed N             background work per record: N times the trace time since the last\n"
		   "                        (default 1)\n"
		   "  --merge-max-inputs N  the replayed engine's per-pass cap (default strata's)\n"
		   "  --json                the figures as JSON\n"
		   "  The model's limits (values are incompressible bytes of the recorded sizes; no disk cost\n"
		   "  model yet): node/sim/replay.h.\n");
}

int
cmd_policy_compare(int argc, char **argv)
{
	struct replay_config c = {.speed = 1.0};
	const char *names[COMPARE_MAX];
	int n = 0, as_json = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			compare_usage(stdout);
			return 0;
		} else if (strcmp(a, "--trace") == 0 && i + 1 < argc) {
			c.trace = argv[++i];
		} else if (strcmp(a, "--speed") == 0 && i + 1 < argc) {
			char *end;
			c.speed = strtod(argv[++i], &end);
			if (*end != '\0' || !(c.speed > 0 && c.speed <= 1e6)) {
				fprintf(stderr, "strata policy compare: --speed needs a number in (0, 1e6]\n");
				return 2;
			}
		} else if (strcmp(a, "--merge-max-inputs") == 0 && i + 1 < argc) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end != '\0' || v < 2 || v > 1024) {
				fprintf(stderr, "strata policy compare: --merge-max-inputs needs 2..1024\n");
				return 2;
			}
			c.merge_max_inputs = (uint32_t)v;
		} else if (strcmp(a, "--json") == 0) {
			as_json = 1;
		} else if (a[0] == '-') {
			fprintf(stderr, "strata policy compare: unknown flag %s (or it needs a value)\n", a);
			return 2;
		} else if (n == COMPARE_MAX) {
			fprintf(stderr, "strata policy compare: at most %d policies\n", COMPARE_MAX);
			return 2;
		} else {
			names[n++] = a;
		}
	}
	if (c.trace == NULL || n == 0) {
		compare_usage(stderr);
		return 2;
	}
	static struct replay_result res[COMPARE_MAX];
	for (int i = 0; i < n; i++) {
		c.policy = strcmp(names[i], "default") == 0 ? NULL : names[i];
		if (replay_run(&c, &res[i]) != 0) {
			fprintf(stderr, "strata policy compare: %s: %s\n", names[i], diag_last());
			return 1;
		}
	}
	const struct replay_result *r0 = &res[0];
	if (as_json) {
		json_t *list = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(list, replay_result_json(names[i], &res[i]));
		json_t *o = replay_report_json(&c, r0, list);
		json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		putchar('\n');
		json_decref(o);
		return 0;
	}
	printf("trace %s: %u shards, %.3f s, %llu requests, %llu rows, %llu bytes appended (speed %g)\n", c.trace,
	       r0->shards, (double)r0->trace_ns / 1e9, (unsigned long long)r0->requests, (unsigned long long)r0->rows,
	       (unsigned long long)r0->user_bytes, c.speed);
	if (r0->torn_at)
		printf("warning: the trace is torn at offset %llu; replayed up to it\n", (unsigned long long)r0->torn_at);
	printf("recorded node: %llu seals (%llu bytes), %llu merge or compaction plans, %llu commits\n",
	       (unsigned long long)r0->rec_seals, (unsigned long long)r0->rec_sealed_bytes,
	       (unsigned long long)r0->rec_plans, (unsigned long long)r0->rec_commits);
	printf("%-28s", "");
	for (int i = 0; i < n; i++) {
		const char *b = strrchr(names[i], '/');
		printf(" %18.18s", b ? b + 1 : names[i]);
	}
	putchar('\n');
#define ROW(label, fmt, expr)                                                                                  \
	do {                                                                                                   \
		printf("%-28s", label);                                                                        \
		for (int i = 0; i < n; i++) {                                                                  \
			const struct replay_result *r = &res[i];                                               \
			printf(" %18" fmt, expr);                                                              \
		}                                                                                              \
		putchar('\n');                                                                                 \
	} while (0)
	printf("during the trace\n");
	ROW("  seals", "llu", (unsigned long long)r->trace_seals);
	ROW("  bytes sealed", "llu", (unsigned long long)r->trace_sealed_bytes);
	ROW("  merges and compactions", "llu", (unsigned long long)r->trace_merges);
	ROW("  bytes merged (in)", "llu", (unsigned long long)r->trace_merge_bytes_in);
	printf("with the drain after it\n");
	ROW("seals", "llu", (unsigned long long)r->seals);
	ROW("bytes sealed", "llu", (unsigned long long)r->sealed_bytes);
	ROW("merges", "llu", (unsigned long long)r->merges);
	ROW("generations merged", "llu", (unsigned long long)r->merged_generations);
	ROW("bytes merged (in)", "llu", (unsigned long long)r->merge_bytes_in);
	ROW("bytes merged (out)", "llu", (unsigned long long)r->merge_bytes_out);
	ROW("compactions", "llu", (unsigned long long)r->compactions);
	ROW("write amplification", ".3f", r->write_amp);
	ROW("peak pending (a shard)", "llu", (unsigned long long)r->peak_pending);
	ROW("peak pending (all shards)", "llu", (unsigned long long)r->peak_pending_total);
	ROW("pending at the trace's end", "llu", (unsigned long long)r->end_pending_total);
	printf("%-28s", "time to drain after it (s)");
	for (int i = 0; i < n; i++) {
		if (res[i].drained)
			printf(" %18.2f", (double)res[i].drain_ns / 1e9);
		else
			printf(" %18s", "not within 1 h");
	}
	putchar('\n');
	ROW("hook runs", "llu", (unsigned long long)r->hook_runs);
	ROW("hook errors", "llu", (unsigned long long)r->hook_errors);
	printf("%-28s", "report hash");
	for (int i = 0; i < n; i++)
		printf("   %016llx", (unsigned long long)res[i].hash);
	putchar('\n');
#undef ROW
	for (int i = 0; i < n; i++)
		if (res[i].last_error[0])
			printf("%s: last hook error: %s\n", names[i], res[i].last_error);
	return 0;
}
