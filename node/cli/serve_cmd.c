/*
 * serve_cmd.c — `strata serve`: flags into server_options, then server_run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../lib/diag.h"
#include "../server/server.h"
#include "../strata.h"
#include "cli.h"


static void
serve_usage(FILE *f)
{
	fprintf(f,
		"usage: strata serve [FLAGS]\n"
		"\n"
		"Run a storage node: HTTP/1.1 on one address, one data directory, one merge policy.\n"
		"\n"
		"flags (a value may also be given as --flag=VALUE; sizes take K, M or G suffixes):\n"
		"  --listen HOST:PORT         address to listen on (default 127.0.0.1:7070; port 0 picks a\n"
		"                             free port)\n"
		"  --data DIR                 data directory, created when missing (default ./data)\n"
		"  --store URL                object store (azure://ACCOUNT/CONTAINER[/PREFIX]?endpoint=...;\n"
		"                             key from AZURE_STORAGE_KEY or a key file; default DIR/objects)\n"
		"  --shards N                 number of shards, 1..65536 (default: the store's; 4 for a new one)\n"
		"  --policy FILE              merge policy script (default: the built-in default policy)\n"
		"  --no-watch-policy          do not reload the policy file when it changes (SIGHUP still does)\n"
		"  --token-file FILE          require 'Authorization: Bearer <token>' (the file's content) on\n"
		"                             every mutating endpoint and on PUT /v1/policy\n"
		"  --sync fsync|interval|none WAL durability before a write is acknowledged (default fsync)\n"
		"  --sync-interval-ms MS      sync period of --sync interval (default 100)\n"
		"  --max-body BYTES           largest request body (default 64M)\n"
		"  --max-header BYTES         largest request line plus headers (default 16K)\n"
		"  --max-value BYTES          largest value of a row (default 64M)\n"
		"  --max-connections N        connections open at once; more get 503 (default 1024)\n"
		"  --workers N                worker threads for appends, reads, scans, seals and merges\n"
		"                             (default 16)\n"
		"  --idle-timeout-ms MS       close a keep-alive connection idle this long (default 60000)\n"
		"  --header-timeout-ms MS     time for a request's line and headers to arrive, counted from\n"
		"                             the accept for the first request (default 10000)\n"
		"  --body-timeout-ms MS       time for a request's body to arrive (default 60000)\n"
		"  --send-timeout-ms MS       close a connection whose client reads nothing this long\n"
		"                             (default 60000)\n"
		"  --shutdown-timeout-ms MS   on SIGTERM/SIGINT, wait this long for requests in flight before\n"
		"                             closing their connections (default 30000)\n"
		"  --log-format logfmt|json   format of log lines on stderr (default logfmt)\n"
		"  --log-level debug|info|warn|error\n"
		"                             lowest level logged (default info, or $STRATA_LOG_LEVEL)\n"
		"  --checkpoint-dir ROOT      allow POST /v1/checkpoint to create checkpoints as new\n"
		"                             directories directly under ROOT (an existing directory);\n"
		"                             without it the endpoint is refused\n"
		"  --ready-file FILE          write the bound HOST:PORT into FILE once listening\n"
		"  --help                     this text\n"
		"\n"
		"signals: SIGTERM/SIGINT stop gracefully (a second one closes connections at once);\n"
		"SIGHUP reloads the policy file.\n");
}

/** Parse an unsigned number with an optional K/M/G (binary) suffix. 0 or -1. */
static int
parse_size(const char *s, uint64_t *out)
{
	if (s == NULL || *s == '\0' || *s == '-')
		return -1;
	char *e = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 10);
	if (errno != 0 || e == s)
		return -1;
	unsigned shift = 0;
	if (*e == 'k' || *e == 'K')
		shift = 10;
	else if (*e == 'm' || *e == 'M')
		shift = 20;
	else if (*e == 'g' || *e == 'G')
		shift = 30;
	if (shift) {
		e++;
		if (*e == 'i')
			e++;
		if (*e == 'B' || *e == 'b')
			e++;
	}
	if (*e != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int
parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	if (parse_size(s, &v) != 0 || v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int
parse_level(const char *s, int *out)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
	return -1;
}

int
cmd_serve(int argc, char **argv)
{
	struct server_options o;
	server_options_init(&o);
	const char *env_level = getenv("STRATA_LOG_LEVEL");
	if (env_level != NULL && parse_level(env_level, &diag_log_level) != 0)
		fprintf(stderr, "strata serve: ignoring STRATA_LOG_LEVEL=%s (expected debug, info, warn or error)\n",
			env_level);
	for (int i = 0; i < argc; i++) {
		char *arg = argv[i];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			serve_usage(stdout);
			return 0;
		}
		if (strcmp(arg, "--no-watch-policy") == 0) {
			o.watch_policy = 0;
			continue;
		}
		if (strncmp(arg, "--", 2) != 0) {
			fprintf(stderr, "strata serve: unexpected argument '%s' (see strata serve --help)\n", arg);
			return 2;
		}
		char name[64];
		const char *val;
		const char *eq = strchr(arg, '=');
		if (eq != NULL) {
			size_t n = (size_t)(eq - arg);
			if (n >= sizeof(name)) {
				fprintf(stderr, "strata serve: unknown flag %s\n", arg);
				return 2;
			}
			memcpy(name, arg, n);
			name[n] = '\0';
			val = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", arg);
			if (i + 1 >= argc) {
				fprintf(stderr, "strata serve: %s needs a value (see strata serve --help)\n", arg);
				return 2;
			}
			val = argv[++i];
		}
		int bad = 0;
		uint64_t v64;
		if (strcmp(name, "--listen") == 0)
			o.listen = val;
		else if (strcmp(name, "--data") == 0)
			o.data_dir = val;
		else if (strcmp(name, "--store") == 0)
			o.store = val;
		else if (strcmp(name, "--policy") == 0)
			o.policy_path = val;
		else if (strcmp(name, "--token-file") == 0)
			o.token_file = val;
		else if (strcmp(name, "--ready-file") == 0)
			o.ready_file = val;
		else if (strcmp(name, "--checkpoint-dir") == 0)
			o.checkpoint_dir = val;
		else if (strcmp(name, "--shards") == 0)
			bad = parse_u32(val, 1, 65536, &o.shards);
		else if (strcmp(name, "--sync") == 0) {
			if (strcmp(val, "fsync") == 0)
				o.sync = STRATA_SYNC_FSYNC;
			else if (strcmp(val, "interval") == 0)
				o.sync = STRATA_SYNC_INTERVAL;
			else if (strcmp(val, "none") == 0)
				o.sync = STRATA_SYNC_NONE;
			else
				bad = 1;
		} else if (strcmp(name, "--sync-interval-ms") == 0)
			bad = parse_u32(val, 1, 3600000, &o.sync_interval_ms);
		else if (strcmp(name, "--max-body") == 0) {
			bad = parse_size(val, &v64) != 0 || v64 == 0 || v64 > (4ull << 30);
			o.max_body_bytes = v64;
		} else if (strcmp(name, "--max-value") == 0) {
			bad = parse_size(val, &v64) != 0 || v64 == 0 || v64 > (1ull << 30);
			o.max_value_bytes = v64;
		} else if (strcmp(name, "--max-header") == 0)
			bad = parse_u32(val, 256, 1u << 20, &o.max_header_bytes);
		else if (strcmp(name, "--max-connections") == 0)
			bad = parse_u32(val, 1, 1000000, &o.max_connections);
		else if (strcmp(name, "--workers") == 0) {
			uint32_t w = 0;
			bad = parse_u32(val, 1, 1024, &w);
			o.workers = w;
		} else if (strcmp(name, "--idle-timeout-ms") == 0)
			bad = parse_u32(val, 1, 86400000, &o.idle_timeout_ms);
		else if (strcmp(name, "--header-timeout-ms") == 0)
			bad = parse_u32(val, 1, 86400000, &o.header_timeout_ms);
		else if (strcmp(name, "--body-timeout-ms") == 0)
			bad = parse_u32(val, 1, 86400000, &o.body_timeout_ms);
		else if (strcmp(name, "--send-timeout-ms") == 0)
			bad = parse_u32(val, 1, 86400000, &o.send_timeout_ms);
		else if (strcmp(name, "--shutdown-timeout-ms") == 0)
			bad = parse_u32(val, 1, 86400000, &o.shutdown_timeout_ms);
		else if (strcmp(name, "--log-format") == 0) {
			if (strcmp(val, "logfmt") == 0)
				o.log_format = SERVER_LOG_LOGFMT;
			else if (strcmp(val, "json") == 0)
				o.log_format = SERVER_LOG_JSON;
			else
				bad = 1;
		} else if (strcmp(name, "--log-level") == 0)
			bad = parse_level(val, &diag_log_level);
		else {
			fprintf(stderr, "strata serve: unknown flag %s (see strata serve --help)\n", name);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "strata serve: bad value '%s' for %s (see strata serve --help)\n", val, name);
			return 2;
		}
	}
	return server_run(&o);
}
