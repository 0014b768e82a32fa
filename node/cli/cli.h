/*
 * cli.h — what the files of the `strata` command share: the subcommands main.c
 * dispatches to, and the shard scan of a data directory that inspect and repair use.
 */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

int cmd_policy(int argc, char **argv);
/** `strata policy compare` (compare_cmd.c), its arguments after "compare". */
int cmd_policy_compare(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_compact(int argc, char **argv);
int cmd_cluster(int argc, char **argv);
/** `strata calibrate` (calibrate_cmd.c). */
int cmd_calibrate(int argc, char **argv);
/** `strata inspect --trace FILE [--json]` (trace_cmd.c): 0, or 1 after printing why. */
int cli_inspect_trace(const char *path, int as_json);

/** Shard numbers found under a data directory's wal/ and objects/. */
struct cli_shards {
	/** Sorted, distinct shard numbers. */
	unsigned ids[65536];
	/** Entries in ids. */
	unsigned n;
};

/** Add the numbers of path's "shard-N" entries to sl (a missing path adds none). */
void cli_scan_shard_dirs(const char *path, struct cli_shards *sl);

struct objstore;
/** Add the numbers of the "shard-N/" prefixes of os's keys to sl. 0, or the listing's
 *  error code (diag set). */
int cli_scan_shard_store(struct objstore *os, struct cli_shards *sl);

#endif
