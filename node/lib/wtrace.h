/*
 * wtrace.h — a workload trace: a compact binary file of what a store's clients and its
 * engine did, for replaying the workload elsewhere (the policy what-if). Per request its
 * time, shard, kind and, per row, the key's XXH3-64 hash and the key's and value's sizes;
 * never a key or a value. The engine's events (seals, merge plans and commits, aborts,
 * the reaper's deletes, the policy runtime's decisions: lib/trace.h's events) go in as
 * they happen.
 *
 * File format (version WTRACE_VERSION, all little-endian):
 *   header, 32 bytes: "STRATAWT", u32 version, u32 shards, u64 start wall time (ns since
 *     the epoch), u32 flags (0), u32 CRC32C of the 28 bytes before it
 *   blocks, each: u32 "TBLK", u32 payload bytes, u32 records, u32 CRC32C of the payload,
 *     u64 time of the block's first record (ns since the start); then the payload:
 *     records, each a u8 kind, a varint of the ns since the previous record (of the
 *     block; the first record's is 0), then by kind (all varints unless said):
 *       WTRACE_APPEND  shard, rows, then per row: u64 key hash, key bytes, value bytes
 *       WTRACE_DELETE  shard, keys, then per key: u64 key hash, key bytes
 *       WTRACE_GET     shard, u64 key hash, key bytes, found (0/1), value bytes
 *       WTRACE_SCAN    shard, rows returned, bytes returned
 *       WTRACE_ENGINE  lib/trace.h event kind, values n, then n values
 *       WTRACE_SEAL    shard (a client asked for a seal: HTTP seal, strata_seal)
 *       WTRACE_MERGE   shard (a client asked for a merge: HTTP merge-wal, the policy's
 *                      on_merge_request)
 *   the end block, written by a clean stop: u32 "TEND", u32 24, u32 0, u32 CRC32C of the
 *     24 bytes after it, then u64 records written, u64 records dropped (the writer was
 *     behind and the queue full, or the budget was reached; dropped records are never
 *     waited for) and u64 the stop's time (ns since the start).
 * A reader stops at a block it cannot read whole (a torn tail: the offset is reported),
 * refuses a block whose CRC does not match (naming its offset) and a header of another
 * version.
 *
 * Recording never blocks its caller on IO: records go into a block in memory under a
 * mutex, full blocks to a queue of at most WTRACE_QUEUE_BLOCKS that one writer thread
 * drains. It stops at its byte budget (or, with rotate, moves the file to FILE.1 and goes
 * on) and at its duration.
 */
#ifndef STRATA_WTRACE_H
#define STRATA_WTRACE_H

#include <stddef.h>
#include <stdint.h>

/** The format this code writes and reads. */
#define WTRACE_VERSION 1u
/** The header's and the blocks' sizes, bytes. */
#define WTRACE_HEADER_BYTES 32u
#define WTRACE_BLOCK_HEADER_BYTES 24u
/** A block is handed to the writer once its payload reaches this many bytes. */
#define WTRACE_BLOCK_BYTES (64u << 10)
/** Full blocks waiting for the writer at most; a record past that is dropped. */
#define WTRACE_QUEUE_BLOCKS 32u
/** The writer also writes a partial block this often, ms. */
#define WTRACE_FLUSH_MS 1000u
/** The smallest byte budget. */
#define WTRACE_MIN_BYTES (256u << 10)

/** Record kinds. */
enum wtrace_kind {
	WTRACE_APPEND = 1,
	WTRACE_DELETE = 2,
	WTRACE_GET = 3,
	WTRACE_SCAN = 4,
	WTRACE_ENGINE = 5,
	WTRACE_SEAL = 6,
	WTRACE_MERGE = 7,
};

/** One row of an append or delete: its key's hash and sizes. */
struct wtrace_row {
	uint64_t hash;
	uint32_t key_len, value_len;
};

/** How to record. */
struct wtrace_options {
	/** The file (created or truncated). */
	const char *path;
	/** Bytes the file may hold (at least WTRACE_MIN_BYTES). */
	uint64_t max_bytes;
	/** Stop after this long, ns (0: no limit). */
	uint64_t max_ns;
	/** At max_bytes move the file to PATH.1 (replacing it) and go on in a new one; else stop. */
	int rotate;
	/** The store's shards (for the header). */
	uint32_t shards;
	/** The clock of the records (NULL: env.mono_ns). */
	uint64_t (*now_ns)(void);
};

/** What a recording did so far. */
struct wtrace_status {
	/** Still recording. */
	int active;
	/** Why it stopped ("" while active): "stopped", "byte budget", "duration", or an IO error. */
	char why[256];
	/** Records taken, and dropped because the writer was behind. */
	uint64_t records, dropped;
	/** Bytes written to the current file, and in all files since the start. */
	uint64_t file_bytes, bytes;
	/** Files moved to PATH.1. */
	uint64_t rotations;
	/** Time since the start, ns. */
	uint64_t elapsed_ns;
};

struct wtrace;

/** Start recording into o->path. 0, or a STRATA_E* code (diag_last says why). */
int wtrace_open(const struct wtrace_options *o, struct wtrace **out);
/** Stop (the end block, synced), keeping the object for wtrace_status; idempotent. */
void wtrace_stop(struct wtrace *w);
/** Stop and free. Safe on NULL. No recorder may be running. */
void wtrace_close(struct wtrace *w);
/** Whether records are taken (a cheap read for the callers' fast path). */
int wtrace_active(const struct wtrace *w);
/** The recording's figures. */
void wtrace_status(struct wtrace *w, struct wtrace_status *out);
/** The path recorded into. */
const char *wtrace_path(const struct wtrace *w);

/** Record an append (kind WTRACE_APPEND) or a delete (WTRACE_DELETE) of n rows. Any thread. */
void wtrace_rows(struct wtrace *w, enum wtrace_kind kind, uint32_t shard, const struct wtrace_row *rows,
		 size_t n);
/** Record a get. */
void wtrace_get(struct wtrace *w, uint32_t shard, uint64_t hash, uint32_t key_len, int found, uint64_t value_len);
/** Record a scan. */
void wtrace_scan(struct wtrace *w, uint32_t shard, uint64_t rows, uint64_t bytes);
/** Record a client's seal (WTRACE_SEAL) or merge request (WTRACE_MERGE) of shard. */
void wtrace_request(struct wtrace *w, enum wtrace_kind kind, uint32_t shard);
/** Record an engine event (lib/trace.h's kind and values). */
void wtrace_engine(struct wtrace *w, unsigned kind, const uint64_t *v, unsigned n);

/* ---------- reading ---------- */

/** One record as read. */
struct wtrace_rec {
	enum wtrace_kind kind;
	/** Time since the start, ns. */
	uint64_t t_ns;
	uint32_t shard;
	/** APPEND, DELETE: the rows (valid during the callback). */
	const struct wtrace_row *rows;
	size_t nrows;
	/** GET: the key (rows[0]), found, value bytes. SCAN: rows and bytes returned. */
	int found;
	uint64_t value_len, scan_rows, scan_bytes;
	/** ENGINE: lib/trace.h's kind and its values. */
	unsigned event;
	const uint64_t *v;
	unsigned nv;
};

/** The header and the end of a trace as read. */
struct wtrace_info {
	uint32_t version, shards;
	uint64_t start_wall_ns;
	/** Blocks and records read, the file's bytes. */
	uint64_t blocks, records, bytes;
	/** The end block was there (a clean stop): its counts. */
	int ended;
	uint64_t end_records, end_dropped, end_ns;
	/** The read stopped early at a torn tail (at this offset): warn (0: it did not). */
	uint64_t torn_at;
};

/** Called per record; nonzero stops the read and is returned. */
typedef int (*wtrace_read_fn)(void *ctx, const struct wtrace_rec *r);

/** Read the trace at path, calling fn per record (fn NULL: the header alone, into info). 0 (a torn tail too: info->torn_at), or
 *  a STRATA_E* code with diag_last naming the file and offset: STRATA_EINVAL for a file
 *  that is no trace, of another version or with a corrupt block. */
int wtrace_read(const char *path, wtrace_read_fn fn, void *ctx, struct wtrace_info *info);

#endif
