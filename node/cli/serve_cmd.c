/*
 * serve_cmd.c — `strata serve`: flags into server_options, then server_run.
 *
 * Every flag is one row of serve_flags[]: its name, its value's kind and range, where
 * it goes, and its help line. Parsing, --help and the defaults shown there all come
 * from that table; the engine's options (strata_options) are the rows with a field
 * name, and tests/build/check_cli.sh checks that every strata_options field has one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/text.h"
#include "../server/api.h"
#include "../server/server.h"
#include "../strata.h"
#include "cli.h"

/** How a flag's value is read. */
enum serve_kind {
	/** A string, kept as given (const char *). */
	SERVE_STR,
	/** An unsigned 32-bit number, K/M/G suffixes allowed (uint32_t). */
	SERVE_U32,
	/** An unsigned 64-bit number, K/M/G suffixes allowed (uint64_t). */
	SERVE_U64,
	/** A signed number (int). */
	SERVE_INT,
	/** fsync|interval|none (int, STRATA_SYNC_*). */
	SERVE_SYNC,
	/** logfmt|json (int, SERVER_LOG_*). */
	SERVE_LOGFMT,
	/** debug|info|warn|error (diag_log_level). */
	SERVE_LEVEL,
	/** No value: sets an int to 0. */
	SERVE_OFF,
	/** local|store (int, STRATA_WAL_*). */
	SERVE_WAL,
	/** N (the shard count, uint32_t) or A-B (serve_first and serve_count instead). */
	SERVE_SHARDS,
};

/** One flag of `strata serve`. */
struct serve_flag {
	/** "--name". */
	const char *name;
	/** enum serve_kind. */
	int kind;
	/** Offset of the value in struct server_options (unused for SERVE_LEVEL). */
	size_t off;
	/** Smallest and largest value of a number. */
	int64_t min;
	uint64_t max;
	/** The value's placeholder in --help ("" for SERVE_OFF). */
	const char *arg;
	/** What it does; the default is appended unless default_text says it. */
	const char *help;
	/** The default in words, when the value itself would not say it (NULL: print it). */
	const char *default_text;
	/** The strata_options field it sets (NULL: a server option). */
	const char *field;
};

#define SO(m) offsetof(struct server_options, m)
#define ST(m) offsetof(struct server_options, store.m)

static const struct serve_flag serve_flags[] = {
	{"--listen", SERVE_STR, SO(listen), 0, 0, "HOST:PORT", "address to listen on (port 0 picks a free port)",
	 NULL, NULL},
	{"--data", SERVE_STR, SO(data_dir), 0, 0, "DIR", "data directory, created when missing", NULL, "dir"},
	{"--wal-dir", SERVE_STR, ST(wal_dir), 0, 0, "DIR",
	 "directory of the WAL, e.g. on a device of its own (recorded in the store; reopening with "
	 "another is refused)", "the one the store records; DIR/wal for a new store", "wal_dir"},
	{"--store", SERVE_STR, ST(store), 0, 0, "URL",
	 "object store of the run and manifest files: azure://ACCOUNT/CONTAINER[/PREFIX]?endpoint=URL "
	 "or s3://BUCKET[/PREFIX]?region=R&endpoint=URL (credentials from the environment or a file the "
	 "URL names, never the command line)", "the data directory's objects/", "store"},
	{"--shards", SERVE_SHARDS, ST(shards), 1, 65536, "N|A-B",
	 "number of shards, 1..65536; or A-B: serve only shards A..B of the store (as --serve-first A "
	 "--serve-count B-A+1; the others answer 421 until claimed)", NULL, "shards"},
	{"--serve-first", SERVE_U32, ST(serve_first), 0, 65535, "N", "first shard this node opens",
	 NULL, "serve_first"},
	{"--serve-count", SERVE_U32, ST(serve_count), 0, 65536, "N",
	 "shards this node opens from --serve-first (0 = through the last)", NULL, "serve_count"},
	{"--wal", SERVE_WAL, ST(wal), 0, 0, "local|store",
	 "where the WALs are: segment files in the data directory, or one object per group commit on "
	 "the store (a shard survives its node and can be claimed by another)", NULL, "wal"},
	{"--owner-check-ms", SERVE_U32, ST(owner_check_ms), 0, 3600000, "MS",
	 "with --wal store: serve a get or scan only while the shard's epoch object was read at most MS "
	 "ago and named this node; older, read it first (0: on every read). The longest a node fenced "
	 "while idle serves stale reads", NULL, "owner_check_ms"},
	{"--policy", SERVE_STR, SO(policy_path), 0, 0, "FILE",
	 "merge policy script. PUT /v1/policy tries a policy first (every hook on a simulated node, as "
	 "strata policy check --run) and writes the one it accepts over FILE (a synced temporary file "
	 "renamed over it; the watcher does not load it twice), so a restart runs it too",
	 "DATA/policy.lua when it exists, where PUT /v1/policy keeps a policy on a node started without "
	 "--policy; else the built-in default policy", "policy"},
	{"--no-watch-policy", SERVE_OFF, SO(watch_policy), 0, 0, "",
	 "do not reload the policy file when it changes (SIGHUP still does)", "", NULL},
	{"--policy-settle-ms", SERVE_U32, SO(policy_settle_ms), 1, 3600000, "MS",
	 "a changed policy file is reloaded once its size, mtime and content have stayed the same "
	 "this long (deploy by renaming a complete file over it)", NULL, NULL},
	{"--policy-poll-ms", SERVE_U32, SO(policy_poll_ms), 10, 3600000, "MS",
	 "the watcher also reads the policy file this often (it sees the edits a stat misses)", NULL,
	 NULL},
	{"--token-file", SERVE_STR, SO(token_file), 0, 0, "FILE",
	 "require 'Authorization: Bearer <token>' on every mutating endpoint and on the console's "
	 "reads; FILE holds one token, or lines 'NAME TOKEN' (the policy history names who applied "
	 "each policy)", "", NULL},
	{"--checkpoint-dir", SERVE_STR, SO(checkpoint_dir), 0, 0, "ROOT",
	 "allow POST /v1/checkpoint to create checkpoints as new directories directly under ROOT (an "
	 "existing directory); without it the endpoint is refused", "", NULL},
	{"--ready-file", SERVE_STR, SO(ready_file), 0, 0, "FILE", "write the bound HOST:PORT into FILE once "
	 "listening", "", NULL},
	{"--sync", SERVE_SYNC, ST(sync), 0, 0, "fsync|interval|none",
	 "WAL durability before a write is acknowledged", NULL, "sync"},
	{"--sync-interval-ms", SERVE_U32, ST(sync_interval_ms), 1, 3600000, "MS",
	 "sync period of --sync interval", NULL, "sync_interval_ms"},
	{"--max-value-bytes", SERVE_U64, ST(max_value_bytes), 1, 1ull << 30, "BYTES",
	 "largest value of a row (also --max-value)", NULL, "max_value_bytes"},
	{"--max-value", SERVE_U64, ST(max_value_bytes), 1, 1ull << 30, "BYTES",
	 "the same as --max-value-bytes", NULL, NULL},
	{"--wal-segment-bytes", SERVE_U64, ST(wal_segment_bytes), 4096, 1ull << 40, "BYTES",
	 "WAL segment size at which a new segment starts", NULL, "wal_segment_bytes"},
	{"--block-bytes", SERVE_U32, ST(block_bytes), 256, 64u << 20, "BYTES",
	 "uncompressed target size of a run-file block", NULL, "block_bytes"},
	{"--index-partition-bytes", SERVE_U32, ST(index_partition_bytes), 0, 64u << 20, "BYTES",
	 "uncompressed target size of a run file's index partitions (0 = 64 KiB)", NULL,
	 "index_partition_bytes"},
	{"--zstd-level", SERVE_INT, ST(zstd_level), -131072, 22, "N",
	 "zstd compression level of run-file blocks, -131072..22 (negative: faster)", NULL, "zstd_level"},
	{"--compress-max-bytes-per-kib", SERVE_U32, ST(compress_max_bytes_per_kib), 0, 1024, "N",
	 "keep a compressed block only when it is at most N bytes per KiB of raw (896: saves 1/8; "
	 "1024: any saving; 0: never compress); others are stored raw", NULL,
	 "compress_max_bytes_per_kib"},
	{"--compress-sample-every", SERVE_U32, ST(compress_sample_every), 1, 1u << 20, "N",
	 "after 4 blocks in a row that did not pay, try to compress only one block in N until one "
	 "pays (1: every block)", NULL, "compress_sample_every"},
	{"--bloom-bits-per-key", SERVE_U32, ST(bloom_bits_per_key), 0, 64, "N",
	 "bloom filter bits per key, 0..64 (0 disables the filters)", NULL, "bloom_bits_per_key"},
	{"--generation-bloom-bits-per-key", SERVE_U32, ST(generation_bloom_bits_per_key), 0, 64, "N",
	 "bloom filter bits per key of generations (0: --bloom-bits-per-key); every get probes "
	 "every pending one", NULL, "generation_bloom_bits_per_key"},
	{"--manifest-keep", SERVE_U32, ST(manifest_keep), 0, 1000000, "N",
	 "manifest versions kept behind the current one", NULL, "manifest_keep"},
	{"--manifest-snapshot-edits", SERVE_U32, ST(manifest_snapshot_edits), 1, 1000000, "N",
	 "manifest log entries between snapshots of the whole manifest", NULL,
	 "manifest_snapshot_edits"},
	{"--merge-max-inputs", SERVE_U32, ST(merge_max_inputs), 2, 1000000, "N",
	 "most generations (or runs) one merge or compaction pass folds; a policy may only narrow it",
	 NULL, "merge_max_inputs"},
	{"--merge-threads", SERVE_U32, ST(merge_threads), 0, 64, "N",
	 "threads one merge or compaction pass writes its run on, the same file for any count (0 = "
	 "auto: half the online CPUs, at most 8; a policy may only narrow it)", NULL, "merge_threads"},
	{"--merge-part-min-bytes", SERVE_U64, ST(merge_part_min_bytes), 0, UINT64_MAX, "BYTES",
	 "with merge threads, a pass splits its key range into up to merge-threads parts of at least "
	 "this many input bytes, written at once (default 64 MiB; 0 = the default)", NULL,
	 "merge_part_min_bytes"},
	{"--delete-bytes-per-s", SERVE_U64, ST(delete_bytes_per_s), 0, UINT64_MAX, "BYTES",
	 "rate of the deletes of merged objects, per second (0 = unlimited)", NULL, "delete_bytes_per_s"},
	{"--delete-chunk-bytes", SERVE_U64, ST(delete_chunk_bytes), 0, UINT64_MAX, "BYTES",
	 "step by which a large merged object is cut down before it is unlinked (0 = 1 MiB)", NULL,
	 "delete_chunk_bytes"},
	{"--background-io-bytes-per-s", SERVE_U64, ST(background_io_bytes_per_s), 0, UINT64_MAX, "BYTES",
	 "budget of seals, merges and compactions, per second (0 = unlimited; a policy's "
	 "background_io_mib_per_s replaces it)", NULL, "background_io_bytes_per_s"},
	{"--background-io-auto", SERVE_INT, ST(background_io_auto), 0, 1, "0|1",
	 "1: the background IO budget backs off while the WAL's fdatasyncs slow down (starting at "
	 "--background-io-bytes-per-s, or 1 GiB/s)", NULL, "background_io_auto"},
	{"--group-commit-wait-us", SERVE_U32, ST(group_commit_wait_us), 0, 1000000, "US",
	 "longest wait of a group commit's leader for the writers the previous group carried "
	 "(0 = never waits)", NULL, "group_commit_wait_us"},
	{"--max-open-wal-files", SERVE_U32, ST(max_open_wal_files), 0, 10000000, "N",
	 "most WAL segment files open at once over all shards (0 = one per shard, unbounded)", NULL,
	 "max_open_wal_files"},
	{"--max-open-object-files", SERVE_U32, ST(max_open_object_files), 0, 10000000, "N",
	 "run and generation files kept open for reads (0 = open and close the file on every block "
	 "read)", NULL, "max_open_object_files"},
	{"--memtable-huge-pages", SERVE_INT, ST(memtable_huge_pages), 0, 1, "0|1",
	 "memtable arenas past their first MiB in 16 MiB chunks advised as transparent huge pages",
	 NULL, "memtable_huge_pages"},
	{"--replay-batch-rows", SERVE_U32, ST(replay_batch_rows), 0, UINT32_MAX, "N",
	 "rows WAL replay sorts and links into the memtable at a time (24 bytes each; 0 = one "
	 "insert per row)", NULL, "replay_batch_rows"},
	{"--open-threads", SERVE_U32, ST(open_threads), 0, 1024, "N",
	 "threads that load and claim the shards at open (0 or 1 = one)", NULL, "open_threads"},
	{"--block-cache-bytes", SERVE_U64, ST(block_cache_bytes), 0, UINT64_MAX, "BYTES",
	 "block cache shared by every reader of the store: decompressed blocks and index partitions, "
	 "a quarter of it the resident budget of pending generations' filters (0 = none)", NULL,
	 "block_cache_bytes"},
	{"--seed", SERVE_U64, ST(seed), 0, UINT64_MAX, "N",
	 "seed of the engine's random source (memtable tower heights; 0 = unseeded)", NULL, "seed"},
	{"--max-body", SERVE_U64, SO(max_body_bytes), 1, 4ull << 30, "BYTES", "largest request body", NULL,
	 NULL},
	{"--max-header", SERVE_U32, SO(max_header_bytes), 256, 1u << 20, "BYTES",
	 "largest request line plus headers", NULL, NULL},
	{"--max-connections", SERVE_U32, SO(max_connections), 1, 1000000, "N",
	 "connections open at once; more get 503", NULL, NULL},
	{"--workers", SERVE_U32, SO(workers), 1, 1024, "N",
	 "worker threads for appends, reads and scans", NULL, NULL},
	{"--idle-timeout-ms", SERVE_U32, SO(idle_timeout_ms), 1, 86400000, "MS",
	 "close a keep-alive connection idle this long", NULL, NULL},
	{"--header-timeout-ms", SERVE_U32, SO(header_timeout_ms), 1, 86400000, "MS",
	 "time for a request's line and headers to arrive, counted from the accept for the first request",
	 NULL, NULL},
	{"--body-timeout-ms", SERVE_U32, SO(body_timeout_ms), 1, 86400000, "MS",
	 "time for a request's body to arrive", NULL, NULL},
	{"--send-timeout-ms", SERVE_U32, SO(send_timeout_ms), 1, 86400000, "MS",
	 "close a connection whose client reads nothing this long", NULL, NULL},
	{"--shutdown-timeout-ms", SERVE_U32, SO(shutdown_timeout_ms), 1, 86400000, "MS",
	 "on SIGTERM/SIGINT, wait this long for requests in flight before closing their connections",
	 NULL, NULL},
	{"--slow-request-us", SERVE_U64, SO(slow_request_us), 0, 3600ull * 1000000, "US",
	 "a request slower than this, from its first byte to the last of its response, goes to the "
	 "slow-request log (GET /v1/slow-requests) with the time of each of its stages (0 = off)", NULL,
	 NULL},
	{"--slow-requests", SERVE_U32, SO(slow_requests), 1, 100000, "N",
	 "entries the slow-request log keeps (the oldest go first)", NULL, NULL},
	{"--trace-file", SERVE_STR, SO(trace_file), 0, 0, "FILE",
	 "record the node's workload (requests' key hashes and sizes, never values; the engine's "
	 "events) into FILE from the start, moving it to FILE.1 when it reaches --trace-max-bytes "
	 "(strata inspect --trace FILE)", "none: POST /v1/trace records on demand", NULL},
	{"--trace-max-bytes", SERVE_U64, SO(trace_max_bytes), 262144, 1ull << 40, "BYTES",
	 "the size of --trace-file before it moves to FILE.1, and the largest budget of POST /v1/trace",
	 "67108864 (64 MiB)", NULL},
	{"--policy-compare-ms", SERVE_U64, SO(policy_compare_ms), 100, 600000, "MS",
	 "the wall time POST /v1/policy/compare may replay the node's trace for (the report then says "
	 "cut_short)", "10000", NULL},
	{"--policy-compare-model", SERVE_STR, SO(policy_compare_model), 0, 0, "FILE",
	 "the disk, store and CPU cost model POST /v1/policy/compare replays with (strata calibrate "
	 "writes one; the objects are the node's own kind: local, azure or s3)",
	 "the model's defaults for the node's store", NULL},
	{"--policy-history", SERVE_U32, SO(policy_history), 1, 4096, "N",
	 "policies the history keeps (DATA/policy-history.jsonl; GET /v1/policy/history), the oldest "
	 "go first", "64", NULL},
	{"--cluster", SERVE_STR, SO(cluster), 0, 0, "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]",
	 "join the cluster whose members, shard owners and leases are under PREFIX in etcd: the node "
	 "opens no shard itself and serves those placement gives it (needs --store and --wal store)",
	 "none: the node serves its own shards", NULL},
	{"--node-id", SERVE_STR, SO(node_id), 0, 0, "ID",
	 "this node's id in the cluster (letters, digits, '.', '_', '-')", "the host name", NULL},
	{"--advertise", SERVE_STR, SO(advertise), 0, 0, "URL",
	 "the URL clients and other nodes reach this node at", "http:// and the listen address", NULL},
	{"--cluster-lease-ttl-s", SERVE_U32, SO(cluster_lease_ttl_s), 1, 3600, "S",
	 "TTL of the node's etcd lease: a node that stops renewing it loses its shards to the others "
	 "after about this long, and serves nothing after 4/5 of it", NULL, NULL},
	{"--cluster-poll-ms", SERVE_U32, SO(cluster_poll_ms), 50, 60000, "MS",
	 "how often the node reads the cluster's keys in etcd whatever its watch of them says (it "
	 "reads them at every change the watch brings too)", NULL, NULL},
	{"--log-format", SERVE_LOGFMT, SO(log_format), 0, 0, "logfmt|json", "format of log lines on stderr",
	 NULL, NULL},
	{"--log-level", SERVE_LEVEL, 0, 0, 0, "debug|info|warn|error", "lowest level logged",
	 "info, or $STRATA_LOG_LEVEL", NULL},
};

#undef SO
#undef ST

/** The strata_options fields `strata serve` has no flag for, and why. */
static const struct {
	/** The field. */
	const char *field;
	/** Why a node has no use for it. */
	const char *why;
} serve_no_flag[] = {
	{"env_ops", "a C table of system calls, for embedders and tests"},
	{"threads", "strata serve makes its own hosts: --workers sizes the client executor"},
	{"clock", "a node runs on the real clock; a manual one moves only by an embedder's strata_tick"},
	{"step_meter", "it meters strata_step, which only an embedder calls"},
};

/** Rows in serve_flags. */
#define SERVE_NFLAGS (sizeof(serve_flags) / sizeof(serve_flags[0]))

static const char *const serve_sync_names[] = {[STRATA_SYNC_FSYNC] = "fsync", [STRATA_SYNC_INTERVAL] = "interval",
					       [STRATA_SYNC_NONE] = "none"};
static const char *const serve_level_names[] = {"debug", "info", "warn", "error"};
static const char *const serve_wal_names[] = {[STRATA_WAL_LOCAL] = "local", [STRATA_WAL_STORE] = "store"};

/** The value of flag f in o as text, for --help. */
static void
serve_flag_value(const struct serve_flag *f, const struct server_options *o, char *buf, size_t len)
{
	const char *p = (const char *)o + f->off;
	switch (f->kind) {
	case SERVE_STR: {
		const char *s;
		memcpy(&s, p, sizeof(s));
		snprintf(buf, len, "%s", s ? s : "none");
		break;
	}
	case SERVE_U32:
	case SERVE_U64: {
		uint64_t v;
		if (f->kind == SERVE_U32) {
			uint32_t v32;
			memcpy(&v32, p, sizeof(v32));
			v = v32;
		} else {
			memcpy(&v, p, sizeof(v));
		}
		if (strcmp(f->arg, "BYTES") != 0)
			snprintf(buf, len, "%" PRIu64, v);
		else if (v != 0 && v % (1u << 30) == 0)
			snprintf(buf, len, "%" PRIu64 "G", v >> 30);
		else if (v != 0 && v % (1u << 20) == 0)
			snprintf(buf, len, "%" PRIu64 "M", v >> 20);
		else if (v != 0 && v % (1u << 10) == 0)
			snprintf(buf, len, "%" PRIu64 "K", v >> 10);
		else
			snprintf(buf, len, "%" PRIu64, v);
		break;
	}
	case SERVE_SHARDS: {
		uint32_t v32;
		memcpy(&v32, p, sizeof(v32));
		if (v32 == 0)
			snprintf(buf, len, "the store's; %u for a new one", STRATA_DEFAULT_SHARDS);
		else
			snprintf(buf, len, "%u", v32);
		break;
	}
	case SERVE_INT:
	case SERVE_SYNC:
	case SERVE_WAL:
	case SERVE_LOGFMT: {
		int v;
		memcpy(&v, p, sizeof(v));
		if (f->kind == SERVE_WAL)
			snprintf(buf, len, "%s", v >= 0 && v <= 1 ? serve_wal_names[v] : "?");
		else if (f->kind == SERVE_SYNC)
			snprintf(buf, len, "%s", v >= 0 && v <= 2 ? serve_sync_names[v] : "?");
		else if (f->kind == SERVE_LOGFMT)
			snprintf(buf, len, "%s", v == SERVER_LOG_JSON ? "json" : "logfmt");
		else
			snprintf(buf, len, "%d", v);
		break;
	}
	default:
		snprintf(buf, len, "%s", "");
	}
}

/** Print text wrapped at 100 columns, each line indented by indent (the first line
 *  continues at column col). */
static void
serve_wrap(FILE *out, const char *text, int col, int indent)
{
	const char *s = text;
	while (*s != '\0') {
		int room = 100 - col;
		int n = (int)strlen(s);
		if (n > room) {
			int cut = room;
			while (cut > 0 && s[cut] != ' ')
				cut--;
			n = cut > 0 ? cut : room;
		}
		fprintf(out, "%.*s\n", n, s);
		s += n;
		while (*s == ' ')
			s++;
		if (*s != '\0') {
			fprintf(out, "%*s", indent, "");
			col = indent;
		}
	}
}

static void
serve_usage(FILE *f)
{
	struct server_options o;
	server_options_init(&o);
	fprintf(f, "usage: strata serve [FLAGS]\n"
		   "\n"
		   "Run a storage node: HTTP/1.1 on one address, one data directory, one merge policy.\n"
		   "\n"
		   "flags (a value may also be given as --flag=VALUE; sizes take K, M or G suffixes);\n"
		   "[field] names the strata_options field of the C API a flag sets:\n");
	for (size_t i = 0; i < SERVE_NFLAGS; i++) {
		const struct serve_flag *fl = &serve_flags[i];
		char head[96], val[64], text[768];
		snprintf(head, sizeof(head), "  %s%s%s", fl->name, fl->arg[0] ? " " : "", fl->arg);
		serve_flag_value(fl, &o, val, sizeof(val));
		const char *def = fl->default_text ? fl->default_text : val;
		snprintf(text, sizeof(text), "%s%s%s%s%s%s%s", fl->help, def[0] ? " (default " : "", def,
			 def[0] ? ")" : "", fl->field ? " [" : "", fl->field ? fl->field : "", fl->field ? "]" : "");
		int col = (int)strlen(head);
		if (col > 31) {
			fprintf(f, "%s\n%*s", head, 31, "");
		} else {
			fprintf(f, "%-31s", head);
		}
		serve_wrap(f, text, 31, 31);
	}
	fprintf(f, "  --help                       this text\n"
		   "\n"
		   "The data directory's store keeps its shard count; the other engine options apply to\n"
		   "this run. strata_options fields without a flag:\n");
	for (size_t i = 0; i < sizeof(serve_no_flag) / sizeof(serve_no_flag[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text), "(no flag: %s)", serve_no_flag[i].why);
		fprintf(f, "  %-29s", serve_no_flag[i].field);
		serve_wrap(f, text, 31, 31);
	}
	fprintf(f, "\n"
		   "signals: SIGTERM/SIGINT stop gracefully (a second one closes connections at once);\n"
		   "SIGHUP reloads the policy file.\n");
}

/** Parse an unsigned number with an optional K/M/G (binary) suffix. 0 or -1. */
static int
parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *e = NULL;
	if (text_u64(s, 10, &v, &e) != 0)
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
parse_level(const char *s, int *out)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, serve_level_names[i]) == 0) {
			*out = i;
			return 0;
		}
	return -1;
}

/** Store val into o for flag f; 0, or -1 when the value is bad. */
static int
serve_flag_set(const struct serve_flag *f, struct server_options *o, const char *val)
{
	char *p = (char *)o + f->off;
	uint64_t v = 0;
	switch (f->kind) {
	case SERVE_STR:
		memcpy(p, &val, sizeof(val));
		return 0;
	case SERVE_U32:
	case SERVE_U64:
		if (parse_size(val, &v) != 0 || v < (uint64_t)f->min || v > f->max)
			return -1;
		if (f->kind == SERVE_U32) {
			uint32_t v32 = (uint32_t)v;
			memcpy(p, &v32, sizeof(v32));
		} else {
			memcpy(p, &v, sizeof(v));
		}
		return 0;
	case SERVE_INT: {
		char *e = NULL;
		errno = 0;
		long long n = strtoll(val, &e, 10);
		if (errno != 0 || e == val || *e != '\0' || n < f->min || n > (long long)f->max)
			return -1;
		int i = (int)n;
		memcpy(p, &i, sizeof(i));
		return 0;
	}
	case SERVE_SYNC:
		for (int i = 0; i < 3; i++)
			if (strcmp(val, serve_sync_names[i]) == 0) {
				memcpy(p, &i, sizeof(i));
				return 0;
			}
		return -1;
	case SERVE_LOGFMT: {
		int i = strcmp(val, "logfmt") == 0 ? SERVER_LOG_LOGFMT : strcmp(val, "json") == 0 ? SERVER_LOG_JSON : -1;
		if (i < 0)
			return -1;
		memcpy(p, &i, sizeof(i));
		return 0;
	}
	case SERVE_WAL:
		for (int i = 0; i < 2; i++)
			if (strcmp(val, serve_wal_names[i]) == 0) {
				memcpy(p, &i, sizeof(i));
				return 0;
			}
		return -1;
	case SERVE_SHARDS: {
		const char *dash = strchr(val, '-');
		if (dash == NULL) {
			if (parse_size(val, &v) != 0 || v < (uint64_t)f->min || v > f->max)
				return -1;
			uint32_t v32 = (uint32_t)v;
			memcpy(p, &v32, sizeof(v32));
			return 0;
		}
		char a[24];
		uint64_t lo, hi;
		size_t n = (size_t)(dash - val);
		if (n == 0 || n >= sizeof(a))
			return -1;
		memcpy(a, val, n);
		a[n] = '\0';
		if (parse_size(a, &lo) != 0 || parse_size(dash + 1, &hi) != 0 || lo > hi || hi >= f->max)
			return -1;
		o->store.serve_first = (uint32_t)lo;
		o->store.serve_count = (uint32_t)(hi - lo + 1);
		return 0;
	}
	case SERVE_LEVEL:
		return parse_level(val, &diag_log_level);
	default:
		return -1;
	}
}

/** The row of a flag name, or NULL. */
static const struct serve_flag *
serve_flag_find(const char *name)
{
	for (size_t i = 0; i < SERVE_NFLAGS; i++)
		if (strcmp(serve_flags[i].name, name) == 0)
			return &serve_flags[i];
	return NULL;
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
		if (strncmp(arg, "--", 2) != 0) {
			fprintf(stderr, "strata serve: unexpected argument '%s' (see strata serve --help)\n", arg);
			return 2;
		}
		char name[64];
		const char *val = NULL;
		const char *eq = strchr(arg, '=');
		size_t n = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
		if (n >= sizeof(name)) {
			fprintf(stderr, "strata serve: unknown flag %.*s (see strata serve --help)\n", (int)n, arg);
			return 2;
		}
		memcpy(name, arg, n);
		name[n] = '\0';
		const struct serve_flag *f = serve_flag_find(name);
		if (f == NULL) {
			fprintf(stderr, "strata serve: unknown flag %s (see strata serve --help)\n", name);
			return 2;
		}
		if (f->kind == SERVE_OFF) {
			if (eq != NULL) {
				fprintf(stderr, "strata serve: %s takes no value\n", name);
				return 2;
			}
			int zero = 0;
			memcpy((char *)&o + f->off, &zero, sizeof(zero));
			continue;
		}
		if (eq != NULL) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			fprintf(stderr, "strata serve: %s needs a value (%s; see strata serve --help)\n", name,
				f->arg);
			return 2;
		}
		if (serve_flag_set(f, &o, val) != 0) {
			char range[96] = "";
			if (f->kind == SERVE_SHARDS)
				snprintf(range, sizeof(range), ": a count 1..65536 or a range A-B of shard numbers "
					 "(A <= B < 65536)");
			else if (f->kind == SERVE_U32 || f->kind == SERVE_U64 || f->kind == SERVE_INT)
				snprintf(range, sizeof(range), ": %s must be %" PRId64 "..%" PRIu64, f->arg, f->min,
					 f->max);
			else
				snprintf(range, sizeof(range), ": one of %s", f->arg);
			fprintf(stderr, "strata serve: bad value '%s' for %s%s (see strata serve --help)\n", val,
				name, range);
			return 2;
		}
	}
	/* Without --policy the node runs the policy PUT /v1/policy kept in DATA/policy.lua, as
	 * if --policy named it (the log line "listening on" names it), else the built-in one. */
	static char kept[4096];
	int kl = snprintf(kept, sizeof(kept), "%s/%s", o.data_dir, API_POLICY_FILE);
	if (o.policy_path == NULL && kl > 0 && (size_t)kl < sizeof(kept) && access(kept, F_OK) == 0)
		o.policy_path = kept;
	return server_run(&o);
}
