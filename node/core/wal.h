/*
 * wal.h — one shard's write-ahead log.
 *
 * Segment files "<dir>/<first_seq %020llu>.wal" hold CRC32C-framed entries. An entry
 * carries a batch of rows; row i of an entry with first_seq s has sequence number
 * s+i, so positions increase monotonically across entries and segments.
 *
 * Group commit: wal_submit assigns positions and queues the encoded entry (no IO);
 * wal_wait blocks until the entry is durable. The first waiter to find no sync in
 * flight becomes the leader: it writes every queued entry with one pwrite, calls one
 * fdatasync, and wakes the others; entries queued meanwhile share the next one.
 *
 * A failed write or fdatasync is never retried as if the data were safe: the WAL
 * turns failed, every waiter and every later submit gets STRATA_EREADONLY, and the
 * shard refuses writes until it is reopened (which replays what reached the file).
 */
#ifndef STRATA_WAL_H
#define STRATA_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "../strata.h"

struct wal;

/** How to open a WAL. */
struct wal_options {
	/** Directory holding this shard's segments (created if missing). */
	const char *dir;
	/** STRATA_SYNC_FSYNC, STRATA_SYNC_NONE or STRATA_SYNC_INTERVAL. */
	int sync;
	/** For STRATA_SYNC_INTERVAL: milliseconds between background fdatasyncs. */
	uint32_t sync_interval_ms;
	/** A new segment starts once the current one reaches this many bytes. */
	uint64_t segment_bytes;
	/** Largest entry payload accepted on replay; a longer length is corruption. */
	uint64_t max_entry_bytes;
};

/** A submitted entry, to wait on. */
struct wal_ticket {
	/** Sequence number of the entry's first row. */
	uint64_t first_seq;
	/** Sequence number of the entry's last row. */
	uint64_t last_seq;
	/** Internal: end position of the entry in the WAL's logical byte stream. */
	uint64_t end_offset;
};

/** Called on open for each entry whose last row is above replay_after, in order.
 *  rows point into a buffer valid only during the call. Nonzero aborts the open. */
typedef int (*wal_replay_cb)(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n);

/** Open: validate every segment, truncate a torn tail of the last segment (logged),
 *  fail with STRATA_ECORRUPT naming segment and offset on a corrupt entry before the
 *  tail, replay entries after replay_after through cb, delete segments wholly at or
 *  below replay_after, and start a fresh segment for appends.
 *  next_seq_floor: the first position handed out is at least this (e.g. replay_after+1). */
int wal_open(const struct wal_options *o, uint64_t replay_after, uint64_t next_seq_floor,
	     wal_replay_cb cb, void *ctx, struct wal **out);
/** Assign positions to n rows and queue their entry. No IO; thread-safe. */
int wal_submit(struct wal *w, const strata_row *rows, size_t n, struct wal_ticket *t);
/** Block until the ticket's entry is durable under the sync mode (written, for NONE). */
int wal_wait(struct wal *w, const struct wal_ticket *t);
/** Delete segments whose entries all have positions <= upto (never the current one). */
int wal_release(struct wal *w, uint64_t upto);
/** The next position wal_submit will hand out. */
uint64_t wal_next_seq(struct wal *w);
/** Live segment files and their total bytes. */
void wal_usage(struct wal *w, uint64_t *segments, uint64_t *bytes, uint64_t *syncs);
/** 0, or the code the WAL failed with (STRATA_EREADONLY once failed). */
int wal_failed(struct wal *w);
/** Write and sync what is queued, then close and free. Safe on NULL. */
void wal_close(struct wal *w);

/** One segment's contents as seen by wal_inspect_dir. */
struct wal_segment_info {
	/** File name within the directory. */
	char name[64];
	/** First position named by the file. */
	uint64_t first_seq;
	/** Last valid position found (first_seq - 1 when empty). */
	uint64_t last_seq;
	/** Valid entries. */
	uint64_t entries;
	/** File size in bytes. */
	uint64_t bytes;
	/** Offset of the first invalid byte, or bytes when the segment is whole. */
	uint64_t valid_bytes;
};

/** Read-only scan of a WAL directory for `strata inspect`: fills up to max infos,
 *  returns the number of segments (may exceed max) or a negative code. */
int wal_inspect_dir(const char *dir, struct wal_segment_info *infos, int max);

#endif
