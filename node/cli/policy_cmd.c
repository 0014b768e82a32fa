/*
 * policy_cmd.c — `strata policy check FILE...`: compile and validate merge
 * policies without a store. Prints each file's resolved settings and which hooks
 * it defines, or every error with file:line. Exit 0 when all are valid, 1 when
 * one is not, 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../policy/policy.h"
#include "cli.h"


static void
policy_cmd_usage(FILE *f)
{
	fprintf(f, "usage: strata policy check FILE...\n"
		   "  compile and validate each policy (in a sandboxed state, under the default\n"
		   "  time budget and memory limit); print its resolved settings and hooks, or\n"
		   "  every error with file:line\n");
}

/** Read a whole policy file (at most POLICY_MAX_SOURCE_BYTES + 1 bytes); NULL with err set. */
static char *
policy_cmd_read(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	if (fp == NULL) {
		snprintf(err, errlen, "%s: cannot open", path);
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
	fclose(fp);
	if (bad) {
		free(buf);
		snprintf(err, errlen, "%s: read error", path);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/** Check one file; 0 when valid. */
static int
policy_cmd_check(const char *path)
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
	free(src);
	if (rc != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	char desc[2048];
	policy_describe(p, desc, sizeof(desc));
	printf("%s: ok\n", path);
	for (char *line = strtok(desc, "\n"); line != NULL; line = strtok(NULL, "\n"))
		printf("  %s\n", line);
	policy_delete(p);
	return 0;
}

int
cmd_policy(int argc, char **argv)
{
	if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
		policy_cmd_usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[0], "check") != 0) {
		policy_cmd_usage(stderr);
		return 2;
	}
	int failed = 0;
	for (int i = 1; i < argc; i++)
		failed |= policy_cmd_check(argv[i]);
	return failed ? 1 : 0;
}
