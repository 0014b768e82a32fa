/*
 * compare_cmd.c — `strata policy compare --trace FILE [--speed N] [--store KIND] [--model FILE]
 * [--prices FILE] [--html FILE] [--json [--machine]] POLICY...`:
 * replay a workload trace in the simulator once per policy (node/sim/replay.h), in one
 * thread, and print what each cost side by side, with what the recorded node did. A
 * POLICY is a file, or "default" for the built-in one.
 */
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
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
	fprintf(f, "usage: strata policy compare --trace FILE [--speed N] [--merge-max-inputs N] [--store KIND]\n"
		   "                             [--model FILE] [--prices FILE] [--html FILE] [--json [--machine]] POLICY...\n"
		   "  replay the workload trace FILE (POST /v1/trace, strata serve --trace-file, strata load\n"
		   "  --record-trace) in the simulator once per POLICY (a file, or 'default' for the built-in\n"
		   "  one) and print what each cost side by side: seals, merges, bytes sealed and merged,\n"
		   "  write amplification, pending generations (peak and at the end), the time to drain the\n"
		   "  backlog after the trace, tables probed per get, merge inputs and memory, background IO,\n"
		   "  object-store requests and their price, the hooks' runs and errors; and what the recorded\n"
		   "  node did. The same trace, policy, model and prices print the same figures, byte for byte\n"
		   "  (this machine's figures, the hooks' CPU and the replay's time, go to stderr).\n"
		   "  --speed N             background work per record: N times the trace time since the last\n"
		   "                        (default 1)\n"
		   "  --merge-max-inputs N  the replayed engine's per-pass cap (default strata's)\n"
		   "  --store KIND          where the objects are: local (default), azure or s3 (requests\n"
		   "                        counted as those clients send them, and priced)\n"
		   "  --model FILE          the disk, store and CPU cost model (`strata calibrate` writes one;\n"
		   "                        default: round figures, printed with --json)\n"
		   "  --prices FILE         request prices, 'KIND USD_PER_1000' lines (default: the store's\n"
		   "                        list prices, unverified)\n"
		   "  --html FILE           also write the report over trace time as a self-contained page\n"
		   "  --json                the figures as JSON (--machine adds hook_cpu_s and wall_s)\n"
		   "  The model and where it is approximate: node/sim/replay.h.\n");
}

int
cmd_policy_compare(int argc, char **argv)
{
	struct replay_config c = {.speed = 1.0};
	const char *names[COMPARE_MAX];
	const char *model_file = NULL, *prices_file = NULL, *html = NULL;
	int n = 0, as_json = 0, machine = 0;
	static struct sim_model model;
	static struct replay_prices prices;
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
		} else if (strcmp(a, "--store") == 0 && i + 1 < argc) {
			c.store = replay_store_parse(argv[++i]);
			if (c.store < 0) {
				fprintf(stderr, "strata policy compare: --store needs local, azure or s3, not '%s'\n", argv[i]);
				return 2;
			}
		} else if (strcmp(a, "--model") == 0 && i + 1 < argc) {
			model_file = argv[++i];
		} else if (strcmp(a, "--prices") == 0 && i + 1 < argc) {
			prices_file = argv[++i];
		} else if (strcmp(a, "--html") == 0 && i + 1 < argc) {
			html = argv[++i];
		} else if (strcmp(a, "--json") == 0) {
			as_json = 1;
		} else if (strcmp(a, "--machine") == 0) {
			machine = 1;
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
	/* A model file sets what it names over the store's defaults; prices likewise. */
	replay_model_default(c.store, &model);
	replay_prices_default(c.store, &prices);
	if ((model_file != NULL && replay_model_load(model_file, &model) != 0) ||
	    (prices_file != NULL && replay_prices_load(prices_file, &prices) != 0)) {
		fprintf(stderr, "strata policy compare: %s\n", diag_last());
		return 2;
	}
	c.model = &model;
	c.prices = &prices;
	/* The simulated files live in memory and come and go by the hundred MiB: keep freed
	 * memory for the next one instead of unmapping it and faulting it in again (measured:
	 * page faults were a fifth of a replay's time). This process only replays. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	static struct replay_result res[COMPARE_MAX];
	for (int i = 0; i < n; i++) {
		c.policy = strcmp(names[i], "default") == 0 ? NULL : names[i];
		if (replay_run(&c, &res[i]) != 0) {
			fprintf(stderr, "strata policy compare: %s: %s\n", names[i], diag_last());
			return 1;
		}
	}
	const struct replay_result *r0 = &res[0];
	for (int i = 0; i < n; i++)
		fprintf(stderr, "# %s on this machine: the replay took %.2f s, the hooks %.1f ms of CPU\n", names[i],
			(double)res[i].wall_ns / 1e9, (double)res[i].hook_cpu_ns / 1e6);
	if (html != NULL) {
		FILE *hf = fopen(html, "w");
		if (hf == NULL) {
			fprintf(stderr, "strata policy compare: --html %s: %s\n", html, strerror(errno));
			return 1;
		}
		replay_html(hf, &c, names, res, n);
		if (fclose(hf) != 0) {
			fprintf(stderr, "strata policy compare: --html %s: %s\n", html, strerror(errno));
			return 1;
		}
	}
	if (as_json) {
		json_t *list = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(list, replay_result_json(names[i], &res[i], machine));
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
	const struct sim_model *m = &model;
	printf("objects on %s; the model: disk %.0f MiB/s read, %.0f MiB/s write, %.0f us a call, %.2f ms a sync;",
	       replay_store_name(c.store), m->disk_read_mib_s, m->disk_write_mib_s, (double)m->disk_op_ns / 1e3,
	       (double)m->disk_sync_ns / 1e6);
	if (c.store != REPLAY_STORE_LOCAL)
		printf(" store %.0f/%.0f ms a read/write, %.0f MiB/s;", (double)m->store_read_ns / 1e6,
		       (double)m->store_write_ns / 1e6, m->store_mib_s);
	printf(" CPU %.0f MiB/s\n", m->cpu_mib_s);
	if (c.store != REPLAY_STORE_LOCAL)
		printf("prices: %s\n", prices.name);
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
	ROW("peak sealed, not flushed", "llu", (unsigned long long)r->peak_sealed);
	ROW("peak memtable bytes", "llu", (unsigned long long)r->peak_memtable_bytes);
	printf("%-28s", "time to drain after it (s)");
	for (int i = 0; i < n; i++) {
		if (res[i].drained)
			printf(" %18.2f", (double)res[i].drain_ns / 1e9);
		else
			printf(" %18s", "not within 1 h");
	}
	putchar('\n');
	ROW("tables per get, p50", "u", r->get_tables_p50);
	ROW("tables per get, p99", "u", r->get_tables_p99);
	ROW("tables searched, p99", "u", r->get_searched_p99);
	ROW("peak merge inputs", "llu", (unsigned long long)r->peak_merge_inputs);
	ROW("peak merge memory (est.)", "llu", (unsigned long long)r->peak_merge_mem);
	ROW("background bytes written", "llu", (unsigned long long)r->bg_written);
	ROW("background bytes read", "llu", (unsigned long long)r->bg_read);
	ROW("background written, peak/s", "llu", (unsigned long long)r->bg_peak_written_per_s);
	ROW("background IO busy (s)", ".3f", (double)r->bg_busy_ns / 1e9);
	if (c.store != REPLAY_STORE_LOCAL) {
		for (int k = 0; k < SIM_OS_KINDS; k++) {
			char label[40];
			snprintf(label, sizeof(label), "store %s requests", sim_os_kind_name(k));
			ROW(label, "llu", (unsigned long long)r->os_requests[k]);
		}
		ROW("store requests, USD", ".6f", r->os_usd);
	}
	ROW("background quiet after (s)", ".2f", (double)r->quiet_ns / 1e9);
	ROW("pending when quiet", "llu", (unsigned long long)r->quiet_pending);
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
