/*
 * wal.h — one shard's write-ahead log.
 *
 * Segment files "<dir>/<first_seq %020llu>-<epoch %020llu>.wal" hold CRC32C-framed
 * entries ("<first_seq %020llu>.wal" for epoch 0, a WAL used without an owner). An
 * entry carries a batch of rows; row i of an entry with first_seq s has sequence
 * number s+i, so positions increase monotonically across entries and segments.
 *
 * Ownership. The epoch in a segment's name is the writer epoch of the shard's owner
 * that created it. The file "<dir>/epoch" (the fence) holds the newest owner's epoch.
 * A new owner (wal_start) first writes its epoch into the fence, then reads what the
 * older writer left, then starts its own segment at the next position p. An older
 * writer re-reads the fence after every group commit and before acknowledging it:
 * once the fence names a newer epoch it turns terminal (STRATA_EFENCED for every
 * waiting and later submit). So every entry an older writer acknowledged was written
 * before the fence moved, and the new owner read it. Entries of an older epoch at
 * positions >= p (a fenced writer's last, unacknowledged batch) are void: recovery
 * reads an older-epoch segment only up to the first position of the nearest newer
 * epoch, and never appends to or deletes a segment of another epoch before fencing.
 *
 * Group commit: wal_submit assigns positions and queues the encoded entry (no IO);
 * wal_wait blocks until the entry is durable. The first waiter to find no sync in
 * flight becomes the leader: it writes every queued entry with one pwrite, calls one
 * fdatasync, and wakes the others; entries queued meanwhile share the next one.
 *
 * A failed write or fdatasync is never retried as if the data were safe: the WAL
 * turns failed, every waiter and every later submit gets STRATA_EREADONLY, and the
 * shard refuses writes until it is reopened (which replays what reached the file).
 * A fenced WAL fails the same way with STRATA_EFENCED; an append that was waiting
 * when the fence was seen has an unknown outcome (like one cut short by a crash):
 * its rows may be read by the new owner, or not.
 *
 * Format (little-endian). Segment header, 24 bytes: "STRWAL01", u32 version (3
 * written; 2 and 3 read), u32 crc32c of magic, version and first_seq, u64 first_seq
 * (equal to the file name). Any other version is refused with STRATA_EVERSION.
 * Entry header, 24 bytes: u32 header_crc (crc32c of the next 20 bytes), u32
 * payload_len, u64 first_seq, u32 nrows (>= 1), u32 payload_crc (crc32c of the
 * payload); then the payload = per row u8 kind (STRATA_ROW_PUT or STRATA_ROW_DELETE,
 * a delete with vlen 0; version 2 has no kind byte: every row a put), varint klen,
 * varint vlen, key, value. Replay hands each row's kind in strata_row.kind. The
 * header has its own checksum so that a length is trusted only once verified.
 * Positions start at 1 and are contiguous inside a segment; a later segment may start
 * above the previous one's end (a next_seq_floor jump), never at or below it.
 *
 * Writing: a batch is coalesced into one pwrite per 1 MiB (an entry of 1 MiB or more
 * is written from its own buffer). A segment rolls before an entry that would take it
 * past segment_bytes unless it is still empty, so one entry never spans segments.
 * Creating or deleting a segment fsyncs the directory (not under STRATA_SYNC_NONE).
 *
 * Limits: an entry's payload is at most max_entry_bytes (default 1 GiB, at most
 * UINT32_MAX) and at most UINT32_MAX rows; wal_submit refuses more with
 * STRATA_ETOOBIG, so replay never meets an entry it would reject. There is no cap on
 * bytes queued but not yet written: every queued entry belongs to a wal_submit whose
 * caller still holds its rows, so the queue is bounded by the callers' in-flight
 * appends (the shard bounds those by its value limit and its appending threads).
 *
 * Threads: wal_submit, wal_wait, wal_release, wal_next_seq, wal_usage, wal_failed and
 * wal_fence may run concurrently. wal_close must not run concurrently with any other call on
 * the same WAL. STRATA_SYNC_INTERVAL starts one thread that sleeps on the real
 * monotonic clock (a simulation with a manual clock uses STRATA_SYNC_NONE).
 */
#ifndef STRATA_WAL_H
#define STRATA_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "../strata_types.h"

struct wal;
struct ratelimit;
struct objstore;
struct reaper;
/** A budget of open segment descriptors shared by the WALs of a store. */
struct wal_fdcache;

/** A budget of max open segment descriptors (least recently used idle ones close). */
int wal_fdcache_new(unsigned max, struct wal_fdcache **out);
/** Free a budget no WAL uses any more. Safe on NULL. */
void wal_fdcache_delete(struct wal_fdcache *c);
/** Descriptors open now, closed to make room, and reopened since the start. */
void wal_fdcache_stats(struct wal_fdcache *c, unsigned *open, uint64_t *evictions, uint64_t *reopens);

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
	/** Owner epoch for wal_open (wal_scan_open + wal_start); 0 = a WAL without an owner. */
	uint64_t epoch;
	/** The descriptor budget the segment descriptor counts against (wal_fdcache_new;
	 *  NULL: none). An idle WAL's descriptor may be closed to make room for another's
	 *  and is reopened by its next append. */
	struct wal_fdcache *fdcache;
	/** The background IO budget told how long each fdatasync took (its automatic mode
	 *  backs off when they slow down; NULL: nobody). */
	struct ratelimit *observe;
	/** STRATA_SYNC_FSYNC: longest writers wait for the writers of the previous group
	 *  before one leads the next (at most half the last fdatasync), microseconds;
	 *  0 = never. */
	uint32_t group_wait_us;
	/** STRATA_SYNC_INTERVAL: start no sync thread; the owner calls wal_sync_written every
	 *  interval (inline mode). */
	int external_sync;
	/** wal = store: the object store that holds the WAL as objects (NULL: segment files
	 *  in dir; dir then only names the WAL in messages and is checked to hold no rows). */
	struct objstore *os;
	/** wal = store: key prefix of the WAL's objects ("shard-0000/wal/"). */
	const char *prefix;
	/** wal = store: where released objects are queued for deletion (NULL: at once). */
	struct reaper *reaper;
};

/** fdatasync what is written and not yet synced (STRATA_SYNC_INTERVAL's periodic sync:
 *  its thread's, or the owner's with external_sync). A failure turns the WAL read-only. */
void wal_sync_written(struct wal *w);

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

/** Open, first half, read-only: validate every segment and replay the entries after
 *  replay_after through cb. Fails with STRATA_ECORRUPT naming segment and offset on
 *  anything wal_start would not accept; writes, truncates and deletes nothing (a
 *  missing directory is an empty WAL). The WAL takes no appends until wal_start. */
int wal_scan_open(const struct wal_options *o, uint64_t replay_after, wal_replay_cb cb, void *ctx,
		  struct wal **out);
/** Open, second half, once the caller owns epoch (claimed in the manifest): write epoch
 *  into the fence (STRATA_EFENCED if it already names a newer one), replay through the
 *  same cb what an older writer appended since wal_scan_open, truncate a torn tail of
 *  the last segment (logged), delete segments wholly at or below replay_after and void
 *  ones, and start a fresh segment. The first position handed out is at least
 *  next_seq_floor (e.g. replay_after+1). On failure the WAL can only be closed. */
int wal_start(struct wal *w, uint64_t epoch, uint64_t next_seq_floor);
/** wal_scan_open then wal_start with o->epoch. */
int wal_open(const struct wal_options *o, uint64_t replay_after, uint64_t next_seq_floor,
	     wal_replay_cb cb, void *ctx, struct wal **out);
/** What wal_scan_open checks, on a directory, without replaying: 0, or the code and
 *  message (segment and offset) with which an open would refuse it. Read-only. */
int wal_check_dir(const char *dir, uint64_t replay_after, uint64_t max_entry_bytes);
/*   Torn tail, in the last segment only: fewer than 24 bytes left; an entry header
 *   with a bad header_crc when every byte from it to EOF is zero (a zero-filled tail);
 *   a verified header whose payload reaches past EOF; a bad payload_crc in an entry
 *   that ends at EOF or is followed only by zeros. A last segment shorter than its
 *   header or made only of zeros is dropped. Anything else invalid (a bad header_crc
 *   followed by non-zero bytes, for instance) is STRATA_ECORRUPT, and the open changes
 *   nothing. Segments are validated and replayed in one pass, so a failed open
 *   may already have passed some entries to cb: the caller discards what it built.
 *   An empty old segment is deleted; the first position is
 *   max(1, last position found + 1, position named by the last segment, next_seq_floor). */
/** Assign positions to n rows and queue their entry. No IO; thread-safe. */
int wal_submit(struct wal *w, const strata_row *rows, size_t n, struct wal_ticket *t);
/** An entry encoded and checksummed ahead of its submission (wal_encode). */
struct wal_entry;
/** The heavy half of wal_submit, with no lock taken: check the rows against the
 *  entry limits, copy them into an entry and checksum its payload. */
int wal_encode(struct wal *w, const strata_row *rows, size_t n, struct wal_entry **out);
/** The O(1) half: assign positions and queue e (consumed, also on failure). */
int wal_submit_encoded(struct wal *w, struct wal_entry *e, struct wal_ticket *t);
/** Free an entry that was never submitted. Safe on NULL. */
void wal_entry_free(struct wal_entry *e);
/** Block until the ticket's entry is durable under the sync mode (written, for NONE). */
int wal_wait(struct wal *w, const struct wal_ticket *t);
/*   Returns 0 for a ticket already acknowledged, even after a later failure;
 *   STRATA_EREADONLY for one not acknowledged once the WAL failed; STRATA_EINJECTED to
 *   the leader whose batch hit the "wal.before_sync" test point (the WAL is failed). */
/** Delete segments whose entries all have positions <= upto (never the current one). */
int wal_release(struct wal *w, uint64_t upto);
/** The next position wal_submit will hand out. */
uint64_t wal_next_seq(struct wal *w);
/** Live segment files and their total bytes. */
void wal_usage(struct wal *w, uint64_t *segments, uint64_t *bytes, uint64_t *syncs);
/** 0, or the code the WAL failed with (STRATA_EREADONLY after an IO failure,
 *  STRATA_EFENCED once a newer owner fenced it). */
int wal_failed(struct wal *w);
/** Turn the WAL terminal with STRATA_EFENCED (the caller learned of a newer owner
 *  elsewhere, e.g. from the manifest); why is repeated to every later caller. */
void wal_fence(struct wal *w, const char *why);
/** The same for a WAL whose shard this node gives up (a handoff): why is the refusal's
 *  message, and nothing is logged as an error. */
void wal_give_up(struct wal *w, const char *why);
/** With the WAL on the store: 0 while this writer still owns the shard as a read of the
 *  epoch object at most max_age_ns old found (0: read it now); else it reads the epoch
 *  object, and a newer owner fences the WAL (STRATA_EFENCED); a failed read is its code,
 *  ownership unconfirmed. Any thread. A local WAL: 0 (its fence is the directory lock). */
int wal_owner_check(struct wal *w, uint64_t max_age_ns);
/** The epoch the fence file of dir names (0 when there is none). */
int wal_fence_read(const char *dir, uint64_t *epoch);
/** Write and sync what is queued, then close and free. Safe on NULL. */
void wal_close(struct wal *w);

/** wal = store: whether the WAL objects under prefix hold rows after replay_after (a
 *  shard opened with wal = local must not ignore them). Read-only. */
int wal_store_has_rows(struct objstore *os, const char *prefix, uint64_t replay_after, int *has);
/** One object of a WAL on an object store, as wal_inspect_store sees it. */
struct wal_object_info {
	/** Key, relative to the WAL's prefix (20 digits: its first position). */
	char name[32];
	/** Object size in bytes. */
	uint64_t bytes;
	/** "batch", "fence", "void", or "?" when the header is unreadable. */
	const char *kind;
	/** Owner epoch, last position and entries its header names (0 when unreadable);
	 *  first_seq is the position its key names. */
	uint64_t epoch, first_seq, last_seq;
	uint32_t entries;
	/** Why the object is corrupt ("" when its header, and with verify every entry, is
	 *  whole); the message an open would fail with. */
	char why[300];
	/** Wholly at or below replay_after: an open reads at most its header (to collect it). */
	int below;
	/** An open with that cursor refuses the store for this object: why is set, and its
	 *  header is damaged or the open replays it. */
	int refused;
};

/** Called by wal_inspect_store once per object, in position order; nonzero stops the
 *  scan and is returned. */
typedef int (*wal_object_cb)(void *ctx, const struct wal_object_info *in);
/** Read-only scan of the WAL objects under prefix (`shard-NNNN/wal/`) for `strata
 *  inspect` and `strata repair`: each object's header, or with verify the whole object
 *  (every entry's checksums and positions, as an open replays it), judged against the
 *  manifest's replay_after as an open would (below, refused), goes to cb; *epoch gets
 *  what the epoch object names (0: none). Returns the number of objects, or a negative
 *  code when the listing fails (or cb's nonzero). An object deleted between the listing
 *  and its read is skipped. */
int wal_inspect_store(struct objstore *os, const char *prefix, uint64_t replay_after, int verify,
		      wal_object_cb cb, void *ctx, uint64_t *epoch);
/** wal = store: gaps the open met, gaps this writer closed, and objects below the cursor
 *  its open found left over and queued for deletion. */
void wal_store_stats(struct wal *w, uint64_t *gaps, uint64_t *gaps_closed, uint64_t *stale_collected);

/** What a read of one segment file found: an entry of wal_inspect_dir's and of
 *  wal_damage_dir's answer, and of the survey an open judges (one struct for all). */
struct wal_segment_info {
	/** File name within the directory. */
	char name[64];
	/** Owner epoch named by the file (0 for a legacy name). */
	uint64_t epoch;
	/** First position named by the file. */
	uint64_t first_seq;
	/** Last valid position found (first_seq - 1 when none). */
	uint64_t last_seq;
	/** Valid entries. */
	uint64_t entries;
	/** File size in bytes (0 for a void segment, which is not read). */
	uint64_t bytes;
	/** Offset of the first invalid byte, or bytes when the segment is whole: where a
	 *  repair cuts the segment. */
	uint64_t valid_bytes;
	/** Positions above this belong to a newer epoch and are not read (UINT64_MAX: none). */
	uint64_t limit;
	/** First position of the next live segment (0 when this is the last live one). */
	uint64_t next_first_seq;
	/** The bytes from valid_bytes on look like an interrupted append (a torn tail). */
	int torn;
	/** The read stopped at limit: the bytes after it are void, not invalid. */
	int cut;
	/** Void: a newer epoch starts at or before first_seq, so nothing in it counts. */
	int dead;
	/** The file vanished between listing and reading (its writer released it); never
	 *  among what inspect and repair are given. */
	int gone;
	/** Why the byte at valid_bytes is invalid ("" when whole; inspect says why a void
	 *  segment or the rest of a cut one is void). */
	char why[160];
};

/** Read-only scan of a WAL directory for `strata inspect`: fills up to max infos,
 *  returns the number of segments (may exceed max) or a negative code. */
int wal_inspect_dir(const char *dir, struct wal_segment_info *infos, int max);

/** Every segment of dir that an open would refuse as corrupt (wal_check_dir names only
 *  the first), with the same rules and replay cursor. Fills up to max and returns how
 *  many there are (0: the segments' bytes pass), or a negative code: STRATA_ECORRUPT
 *  when a segment starts at or below the previous one's last position (cutting a
 *  segment does not fix that), STRATA_EVERSION, an IO error. Read-only. */
int wal_damage_dir(const char *dir, uint64_t replay_after, uint64_t max_entry_bytes,
		   struct wal_segment_info *out, int max);

/** What wal_salvage_scan found from a bad spot of a segment to its end. */
struct wal_salvage {
	/** File size in bytes. */
	uint64_t bytes;
	/** The entry at the bad spot has a verified header but a bad payload. */
	int head_ok;
	/** Positions that verified header names (when head_ok). */
	uint64_t head_first_seq, head_last_seq;
	/** Entries from the bad spot on whose header and payload checksums both verify. */
	uint64_t entries;
	/** Least first and greatest last position of those entries (0 when none). */
	uint64_t first_seq, last_seq;
	/** Bytes those entries take, headers included. */
	uint64_t intact_bytes;
	/** Bytes from the bad spot to the end in no intact entry. */
	uint64_t damaged_bytes;
};

/** Read-only: scan the segment at path from offset off (its first bad byte, e.g. a
 *  wal_damage_dir's valid_bytes) to its end for entries whose header checksum and payload
 *  checksum verify, trying every byte offset where no entry was found; a verified
 *  entry is skipped whole. max_entry_bytes as for an open (0: the default). */
int wal_salvage_scan(const char *path, uint64_t off, uint64_t max_entry_bytes, struct wal_salvage *out);

#endif
