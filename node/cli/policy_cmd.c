/*
 * policy_cmd.c — `strata policy check [--run] [--merge-max-inputs N] [--merge-threads N] FILE...`: compile
 * and validate merge policies without a store. Prints each file's settings as the engine
 * runs them (a clamped one says what the policy asks and why) and which hooks it
 * defines, or every error with file:line. With --run, every hook also runs against a
 * small simulated node (a temporary store with a few shards and generations pending)
 * under the real budgets, and each run's result, time and error are reported: the trial
 * of node/policy/trial.h, the same one PUT /v1/policy runs. Exit 0 when all are valid
 * (and every hook run succeeded), 1 when one is not, 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/text.h"
#include "../policy/policy.h"
#include "../policy/runtime.h"
#include "../policy/trial.h"
#include "../strata.h"
#include "cli.h"

static void
policy_cmd_usage(FILE *f)
{
	strata_options so;
	strata_options_init(&so);
	fprintf(f, "usage: strata policy check [--run] [--merge-max-inputs N] [--merge-threads N] FILE...\n"
		   "       strata policy compare --trace FILE [--speed N] [--json] POLICY...   (its --help)\n"
		   "  compile and validate each policy (in a sandboxed state, under the default\n"
		   "  time budget and memory limit); print its settings as the engine runs them\n"
		   "  and its hooks, or every error with file:line. A setting the engine narrows\n"
		   "  (merge_max_generations over merge_max_inputs, merge_threads over the engine's)\n"
		   "  shows the value that runs, what\n"
		   "  the policy asks and why\n"
		   "  --run   also run every hook (on_seal on each shard, on_merge_request, on_sweep)\n"
		   "          against a simulated node: a temporary store of %u shards with %u, %u and %u\n"
		   "          generations pending, under the real budgets (%u ms of CPU per run, %llu MiB);\n"
		   "          report each run's result, CPU and wall time, and any error with file:line.\n"
		   "          A hook that fails (a Lua error, its time budget, the memory limit) makes\n"
		   "          the policy broken: exit 1. PUT /v1/policy runs the same checks\n"
		   "  --merge-max-inputs N\n"
		   "          the engine's per-pass cap to check the settings against and to run the\n"
		   "          simulated node with (strata serve --merge-max-inputs; default %u)\n"
		   "  --merge-threads N\n"
		   "          the engine's threads of a merge pass to check merge_threads against\n"
		   "          (strata serve --merge-threads, 1..64; default: not known, no clamp)\n",
		TRIAL_SHARDS, trial_gens[0], trial_gens[1], trial_gens[2], POLICY_DEFAULT_BUDGET_MS,
		(unsigned long long)(POLICY_DEFAULT_MEM_BYTES >> 20), so.merge_max_inputs);
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

/** Print the captured log lines of text, indented under their run. */
static void
policy_cmd_log(const char *text)
{
	for (const char *l = text; l != NULL && *l != '\0';) {
		const char *nl = strchr(l, '\n');
		int n = nl ? (int)(nl - l) : (int)strlen(l);
		printf("      log %.*s\n", n, l);
		l = nl ? nl + 1 : NULL;
	}
}

/** Print the hook runs of a trial; 0 when every one succeeded. */
static int
policy_cmd_runs(const char *path, const struct trial *t)
{
	printf("  run: a simulated node of %u shards with %u, %u and %u generations pending (a temporary store), "
	       "%u ms of CPU per hook run, %llu MiB of memory:\n", TRIAL_SHARDS, trial_gens[0], trial_gens[1],
	       trial_gens[2], t->limits.budget_ms, (unsigned long long)(t->limits.mem_bytes >> 20));
	if (t->runtime_err[0] != '\0')
		printf("    FAILED: the runtime refused the policy: %s\n", t->runtime_err);
	for (unsigned i = 0; i < t->nruns; i++) {
		const struct trial_run *r = &t->runs[i];
		char what[64];
		if (r->hook == POLICY_ON_SWEEP)
			snprintf(what, sizeof(what), "%s", policy_hook_name(r->hook));
		else
			snprintf(what, sizeof(what), "%s (shard %u)", policy_hook_name(r->hook), r->shard);
		policy_cmd_log(r->log);
		const char *who = r->scripted ? "" : " (built-in default)";
		double cpu_ms = (double)r->cpu_ns / 1e6, wall_ms = (double)r->wall_ns / 1e6;
		switch (r->outcome) {
		case TRIAL_RUN_NOT_STARTED:
			printf("    %-28s FAILED: %s\n", what, r->err);
			break;
		case TRIAL_RUN_STUCK:
			printf("    %-28s FAILED: %s%s\n", what, r->err, who);
			break;
		case TRIAL_RUN_FAILED:
			printf("    %-28s FAILED after %.1f ms of CPU, %.1f ms%s: %s\n", what, cpu_ms, wall_ms, who,
			       r->err);
			break;
		default:
			printf("    %-28s ok, returned %s, %.1f ms of CPU, %.1f ms%s\n", what,
			       r->result[0] ? r->result : "nothing", cpu_ms, wall_ms, who);
		}
	}
	policy_cmd_log(t->log);
	if (t->check_err[0] != '\0')
		printf("    FAILED: %s\n", t->check_err);
	if (t->failed)
		printf("%s: broken: %u of %u hook runs failed\n", path, t->failed, t->counted);
	else
		printf("%s: ok: all %u hook runs succeeded\n", path, t->counted);
	return t->failed ? -1 : 0;
}

/** Check one file (and run its hooks with run); 0 when valid. */
static int
policy_cmd_check(const char *path, int run, const strata_options *so)
{
	char err[8192];
	size_t len = 0;
	char *src = policy_cmd_read(path, &len, err, sizeof(err));
	if (src == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct trial_options o = {.run = run, .store = so};
	struct trial *t = NULL;
	fflush(stdout);
	int rc = trial_new(path, src, len, &o, &t);
	free(src);
	if (t == NULL) {
		fprintf(stderr, "%s: %s\n", path, diag_last());
		return 1;
	}
	if (t->compile_rc != 0) {
		fprintf(stderr, "%s\n", t->errors);
		trial_delete(t);
		return 1;
	}
	printf("%s: ok\n", path);
	char desc[sizeof(t->describe)];
	snprintf(desc, sizeof(desc), "%s", t->describe);
	for (char *line = strtok(desc, "\n"); line != NULL; line = strtok(NULL, "\n"))
		printf("  %s\n", line);
	strata_options def;
	strata_options_init(&def);
	int cap_clamped = 0;
	for (unsigned i = 0; i < t->nclamps && i < POLICY_MAX_CLAMPS; i++)
		cap_clamped |= strcmp(t->clamps[i].setting, "merge_max_generations") == 0;
	if (cap_clamped && so->merge_max_inputs == def.merge_max_inputs)
		printf("  (merge_max_inputs = %u is strata serve's default; check against another with "
		       "--merge-max-inputs N)\n", so->merge_max_inputs);
	int failed = 0;
	if (run && t->setup_err[0] != '\0') {
		fprintf(stderr, "strata policy check --run: %s\n", t->setup_err);
		failed = 1;
	} else if (run) {
		failed = policy_cmd_runs(path, t) != 0;
	}
	(void)rc;
	trial_delete(t);
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
	if (argc >= 1 && strcmp(argv[0], "compare") == 0)
		return cmd_policy_compare(argc - 1, argv + 1);
	if (argc < 1 || strcmp(argv[0], "check") != 0) {
		if (argc >= 1)
			fprintf(stderr, "strata policy: unknown subcommand '%s'\n", argv[0]);
		policy_cmd_usage(stderr);
		return 2;
	}
	int run = 0, nfiles = 0, flags = 1;
	strata_options so;
	strata_options_init(&so);
	const char **files = calloc((size_t)argc, sizeof(*files));
	if (files == NULL) {
		fprintf(stderr, "strata policy check: out of memory\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!flags || a[0] != '-') {
			files[nfiles++] = a;
		} else if (strcmp(a, "--") == 0) {
			flags = 0;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			policy_cmd_usage(stdout);
			free(files);
			return 0;
		} else if (strcmp(a, "--run") == 0) {
			run = 1;
		} else if (strncmp(a, "--merge-max-inputs", 18) == 0 && (a[18] == '\0' || a[18] == '=')) {
			const char *v = a[18] == '=' ? a + 19 : i + 1 < argc ? argv[++i] : NULL;
			uint64_t n = 0;
			if (v == NULL || text_u64(v, 10, &n, NULL) != 0 || n < 2 || n > 1000000) {
				fprintf(stderr, "strata policy check: --merge-max-inputs needs a number 2..1000000\n");
				free(files);
				return 2;
			}
			so.merge_max_inputs = (uint32_t)n;
		} else if (strncmp(a, "--merge-threads", 15) == 0 && (a[15] == '\0' || a[15] == '=')) {
			const char *v = a[15] == '=' ? a + 16 : i + 1 < argc ? argv[++i] : NULL;
			uint64_t n = 0;
			if (v == NULL || text_u64(v, 10, &n, NULL) != 0 || n < 1 || n > 64) {
				fprintf(stderr, "strata policy check: --merge-threads needs a number 1..64\n");
				free(files);
				return 2;
			}
			so.merge_threads = (uint32_t)n;
		} else {
			fprintf(stderr, "strata policy check: unknown flag %s\n", a);
			policy_cmd_usage(stderr);
			free(files);
			return 2;
		}
	}
	if (nfiles == 0) {
		policy_cmd_usage(stderr);
		free(files);
		return 2;
	}
	int failed = 0;
	for (int i = 0; i < nfiles; i++)
		failed |= policy_cmd_check(files[i], run, &so);
	free(files);
	return failed ? 1 : 0;
}
