/*
 * load_cmd.c — `strata load SCRIPT.lua [options] [-- script args]`: parse the
 * command line and run the load generator (node/load).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../load/load.h"
#include "../lib/text.h"
#include "cli.h"


static void
load_usage(FILE *f)
{
	fprintf(f,
		"usage: strata load SCRIPT.lua [options] [-- script args]\n"
		"\n"
		"Runs a load-test script against a node (HTTP) or an in-process store, prints a\n"
		"summary, and exits non-zero when a threshold of the script fails.\n"
		"\n"
		"target:\n"
		"  --target URL          a node (default http://127.0.0.1:7070)\n"
		"  --embedded DIR        an in-process store in DIR instead (requests run on worker threads)\n"
		"  --shards N            embedded: shards to open (default: the script's, else the store's;\n"
		"                        %u for a new store)\n"
		"  --sync MODE           embedded: fsync | none | interval (default: the script's, else fsync)\n"
		"  --policy FILE         embedded: merge policy (default: the script's, else the built-in one)\n"
		"  --record-trace FILE   embedded: record the run's workload into a trace file (at most 1 GiB;\n"
		"                        strata inspect --trace FILE)\n"
		"  --token TOKEN         bearer token for the node (default $STRATA_TOKEN)\n"
		"run:\n"
		"  -d, --duration D      total run time (30s, 500ms, 2m, 1h); overrides the script's\n"
		"  -c, --connections N   HTTP connections or embedded workers (default: the script's, else 32;\n"
		"                        wrk-style scripts 10)\n"
		"  -R, --rate R          wrk-style scripts: constant request rate per second (open model)\n"
		"  -t, --threads N       wrk-style scripts: setup(thread) calls (default 1)\n"
		"  --timeout D           per-request timeout (default 30s)\n"
		"  --grace D             wait for iterations in flight after the end (default 10s)\n"
		"  --seed N              base seed handed to the script as ctx.seed (default 1)\n"
		"  --batch               send appends as application/x-strata-batch instead of NDJSON\n"
		"  --max-tracked N       most acknowledged rows kept for verification (default 50000000)\n"
		"output:\n"
		"  --interval D          progress line interval on stderr (default 1s)\n"
		"  -q, --quiet           no progress lines\n"
		"  --json FILE           write the result as JSON\n"
		"  --report FILE.html    write a self-contained HTML report\n"
		"\n"
		"exit status: 0 every threshold passed, 1 a threshold failed, 2 bad usage, script or target,\n"
		"128+N stopped by signal N (the summary and reports are still written)\n",
		STRATA_DEFAULT_SHARDS);
}

static int
load_arg_uint(const char *opt, const char *v, unsigned long long max, unsigned long long *out)
{
	uint64_t n = 0;
	if (text_u64(v, 10, &n, NULL) != 0 || n > max) {
		fprintf(stderr, "strata load: %s needs an integer 0..%llu, not \"%s\"\n", opt, max, v);
		return -1;
	}
	*out = n;
	return 0;
}

static int
load_arg_duration(const char *opt, const char *v, double *out)
{
	double d = load_parse_duration(v);
	if (d < 0) {
		fprintf(stderr, "strata load: %s needs a duration like 30s, 500ms or 2m, not \"%s\"\n", opt, v);
		return -1;
	}
	*out = d;
	return 0;
}

int
cmd_load(int argc, char **argv)
{
	struct load_opts o = { .sync = -1, .grace_s = -1, .seed = 1, .batch_format = -1 };
	o.token = getenv("STRATA_TOKEN");
	int i = 0;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			load_usage(stdout);
			return 0;
		}
		if (a[0] != '-') {
			if (o.script != NULL) {
				fprintf(stderr, "strata load: one script only (\"%s\" and \"%s\"); script arguments "
						"go after --\n", o.script, a);
				return LOAD_EXIT_ERROR;
			}
			o.script = a;
			continue;
		}
		/* --name=value or --name value */
		char name[64];
		const char *val = NULL;
		const char *eq = strchr(a, '=');
		if (eq != NULL && a[1] == '-') {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
			val = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", a);
		}
		int is_flag = strcmp(name, "--quiet") == 0 || strcmp(name, "-q") == 0 || strcmp(name, "--batch") == 0;
		if (is_flag) {
			if (val != NULL) {
				fprintf(stderr, "strata load: %s takes no value\n", name);
				return LOAD_EXIT_ERROR;
			}
			if (name[2] == 'b')
				o.batch_format = 1;
			else
				o.quiet = 1;
			continue;
		}
		static const char *const known[] = {"--target", "--embedded", "--shards", "--connections", "-c",
						    "--duration", "-d", "--grace", "--interval", "--json", "--max-tracked",
						    "--policy", "--rate", "-R", "--record-trace", "--report", "--seed", "--sync", "--threads",
						    "-t", "--timeout", "--token", NULL};
		int found = 0;
		for (const char *const *k = known; *k != NULL && !found; k++)
			found = strcmp(*k, name) == 0;
		if (!found) {
			fprintf(stderr, "strata load: unknown option %s (see strata load --help)\n", name);
			return LOAD_EXIT_ERROR;
		}
		if (val == NULL) {
			if (i + 1 >= argc) {
				fprintf(stderr, "strata load: %s needs a value (see strata load --help)\n", name);
				return LOAD_EXIT_ERROR;
			}
			val = argv[++i];
		}
		unsigned long long n;
		int rc = 0;
		if (strcmp(name, "--target") == 0) {
			o.target = val;
		} else if (strcmp(name, "--embedded") == 0) {
			o.embedded_dir = val;
		} else if (strcmp(name, "--shards") == 0) {
			rc = load_arg_uint(name, val, 65536, &n);
			if (rc == 0 && n == 0) {
				fprintf(stderr, "strata load: --shards must be at least 1\n");
				rc = -1;
			}
			o.shards = (uint32_t)n;
		} else if (strcmp(name, "--sync") == 0) {
			if (strcmp(val, "fsync") == 0)
				o.sync = STRATA_SYNC_FSYNC;
			else if (strcmp(val, "none") == 0)
				o.sync = STRATA_SYNC_NONE;
			else if (strcmp(val, "interval") == 0)
				o.sync = STRATA_SYNC_INTERVAL;
			else {
				fprintf(stderr, "strata load: --sync must be fsync, none or interval\n");
				rc = -1;
			}
		} else if (strcmp(name, "--policy") == 0) {
			o.policy = val;
		} else if (strcmp(name, "--record-trace") == 0) {
			o.record_trace = val;
		} else if (strcmp(name, "--token") == 0) {
			o.token = val;
		} else if (strcmp(name, "--duration") == 0 || strcmp(name, "-d") == 0) {
			rc = load_arg_duration(name, val, &o.duration_s);
			if (rc == 0 && o.duration_s <= 0) {
				fprintf(stderr, "strata load: --duration must be above 0\n");
				rc = -1;
			}
		} else if (strcmp(name, "--connections") == 0 || strcmp(name, "-c") == 0) {
			rc = load_arg_uint(name, val, LOAD_MAX_SLOTS, &n);
			if (rc == 0 && n == 0) {
				fprintf(stderr, "strata load: --connections must be at least 1\n");
				rc = -1;
			}
			o.connections = (unsigned)n;
		} else if (strcmp(name, "--rate") == 0 || strcmp(name, "-R") == 0) {
			char *end;
			o.rate = strtod(val, &end);
			if (*end != '\0' || !(o.rate > 0 && o.rate <= 1e7)) {
				fprintf(stderr, "strata load: --rate needs a number of requests per second 0..1e7\n");
				rc = -1;
			}
		} else if (strcmp(name, "--threads") == 0 || strcmp(name, "-t") == 0) {
			rc = load_arg_uint(name, val, 1024, &n);
			o.threads = (unsigned)n;
		} else if (strcmp(name, "--timeout") == 0) {
			rc = load_arg_duration(name, val, &o.timeout_s);
		} else if (strcmp(name, "--grace") == 0) {
			rc = load_arg_duration(name, val, &o.grace_s);
		} else if (strcmp(name, "--interval") == 0) {
			rc = load_arg_duration(name, val, &o.interval_s);
			if (rc == 0 && o.interval_s < 0.01) {
				fprintf(stderr, "strata load: --interval must be at least 10ms\n");
				rc = -1;
			}
		} else if (strcmp(name, "--json") == 0) {
			o.json_path = val;
		} else if (strcmp(name, "--report") == 0) {
			o.report_path = val;
		} else if (strcmp(name, "--seed") == 0) {
			rc = load_arg_uint(name, val, (1ull << 53), &n);
			o.seed = n;
		} else if (strcmp(name, "--max-tracked") == 0) {
			rc = load_arg_uint(name, val, 1000000000000ull, &n);
			o.max_tracked = n;
		} else {
			fprintf(stderr, "strata load: unknown option %s (see strata load --help)\n", name);
			return LOAD_EXIT_ERROR;
		}
		if (rc != 0)
			return LOAD_EXIT_ERROR;
	}
	if (o.script == NULL) {
		load_usage(stderr);
		return LOAD_EXIT_ERROR;
	}
	o.args = argv + i;
	o.nargs = argc - i;
	return load_main(&o);
}
