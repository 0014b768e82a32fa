/*
 * wal_int.h — what the files of the WAL share (private to node/core). wal.h is the
 * WAL's face for the rest of core and the CLI; this header is for these files alone:
 *
 *   wal.c          the WAL: open (scan, then start: fence, catch up, truncate a torn
 *                  tail, a fresh segment), group commit, writing and rolling segments,
 *                  the fence file, release, close
 *   wal_scan.c     reading a WAL directory: segment names and listing, validating (and
 *                  replaying) one segment, the survey of every segment and the rules
 *                  by which an open judges it
 *   wal_fdcache.c  the segment descriptor outside group commits: the descriptor budget
 *                  a store's WALs share, and the interval sync of what is written
 *   wal_store.c    the second backend, wal = store: the WAL as objects
 *   wal_repair.c   read-only tools for `strata inspect` and `strata repair`
 *
 * Calls go one way: wal.c calls wal_fdcache.c, wal_store.c and wal_scan.c; those two
 * call wal_scan.c, and so does wal_repair.c; nothing calls back up.
 *
 * GROUP COMMIT (wal.c). Every entry has an end offset in the WAL's logical stream (the
 * sum of the sizes of the entries submitted up to it). Under mu: the queue
 * (q_head..q_tail, q_count), next_seq, submitted_off, leader, written_off, synced_off,
 * failed, and the gathering state (active_writers, flushing, last_sync_ns,
 * gather_armed, gather_dl). Without mu: ack_off (an atomic, stored under mu with
 * release order) and ack_gen (an event count waiters sleep on).
 *
 *   submit   wal_submit_encoded, under mu, no IO: refuse when failed (its code and
 *            fail_msg), not started, closing, or out of positions; assign positions
 *            next_seq..; finish the entry header's checksum; queue the entry;
 *            submitted_off += its size; the ticket is the new submitted_off.
 *   wait     wal_wait, a loop: ack_off >= ticket (acquire) returns 0 with no lock. Else
 *            under mu: ack_off checked again; failed returns its code. With no leader
 *            the waiter either defers (wal_defer) or leads. With a leader, or while
 *            deferring, it reads ack_gen, drops mu and sleeps on ack_gen; only the
 *            waiter that armed the deferral's deadline sleeps with a timeout (until it).
 *   defer    wal_defer, fsync mode with group_wait_ns > 0 only: while fewer entries are
 *            queued than the last group saw writers (active_writers >= 2), the first
 *            waiter to find it so arms a deadline, min(last_sync_ns / 2, group_wait_ns)
 *            (under 1 us: no deferral), and waiters defer until it passes. The writer whose entry
 *            brings q_count to active_writers leads at once; the armer, woken at the
 *            deadline, leads if no one has. Closing defers no one.
 *   lead     wal_lead, entered and left with mu held, no leader, not failed, queue not
 *            empty: set leader, disarm the deferral, take the whole queue and its end
 *            offset, drop mu. Outside mu, write the batch: wal_flush (segment files:
 *            small entries coalesced into one pwrite per WAL_COALESCE_BYTES, a roll
 *            before an entry that would pass segment_bytes, one fdatasync in fsync mode,
 *            then the fence file re-read) or wal_store_flush (one object put if absent,
 *            then now and then the epoch object read). Retake mu: clear leader; count
 *            the syncs; active_writers = entries carried + entries queued meanwhile;
 *            on success written_off = ack_off = the batch's end (and synced_off in fsync
 *            mode and on the store); on failure wal_set_failed (STRATA_EFENCED when
 *            fenced, else STRATA_EREADONLY), which bumps ack_gen. Broadcast cond. The
 *            caller drops mu and bumps ack_gen: every sleeper wakes and loops. Entries
 *            queued during the write form the next group, led by one of their waiters.
 *   failure  terminal and never retried: failed is set once, fail_msg is repeated to
 *            every later submit and wait; a ticket at or below ack_off still returns 0.
 *            The leader whose batch hit the wal.before_sync test point gets
 *            STRATA_EINJECTED itself.
 *
 * Leader-private fields (cur_fd, cur_first, cur_last, cur_off, stg, cur_path, and the
 * store's epoch_checked_ns, commits_unchecked) are touched by the one leader, or by
 * wal_start and wal_close while no leader can run. The one exception: the descriptor
 * budget closes an idle WAL's cur_fd (no leader, under that WAL's mu) and sets it to
 * -1; the next leader reopens it. In interval mode a leader acknowledges once its
 * batch is written; wal_sync_written_locked (the sync thread, the owner's inline call,
 * or the budget) fdatasyncs sync_fd with mu dropped and bg_syncing set, advancing
 * synced_off; a roll waits for bg_syncing to clear before it swaps sync_fd. wal_close
 * sets closing, waits for the leader, leads once more for what is queued, stops the
 * sync thread and, in interval mode, makes the tail durable.
 *
 * Lock order: a wal_fdcache's mu before any WAL's mu (the budget only trylocks them);
 * a leader calls into the budget with no WAL mu held.
 *
 * WAL OBJECTS (wal = store, wal_store.c). All integers little-endian. Every object
 * lives under the WAL's prefix ("shard-NNNN/wal/"):
 *
 *   <prefix><first position, 20 digits>   a batch or a marker; the listing's order
 *                                         is position order
 *   <prefix>epoch                         the epoch object: the newest owner's epoch
 *   anything else                         logged and left alone
 *
 *   header, 48 bytes   magic "STRWALOB" (8), u32 version (1; another is refused with
 *                      STRATA_EVERSION), u32 kind (0 batch, 1 fence, 2 void), u64 the
 *                      writer's epoch, u64 first position (the key's), u64 last
 *                      position (>= first), u32 entries, u32 crc32c of bytes 0..43
 *   batch              the header, then its entries exactly as in a segment (24-byte
 *                      entry header, version-3 rows with a kind byte): at least one,
 *                      positions contiguous from first to last, the object ending with
 *                      the last entry
 *   fence, void        the header alone (48 bytes, 0 entries). A new owner puts a fence
 *                      at the first position after what it read; a void closes a gap
 *                      (positions first..last that no object covers)
 *   epoch object       24 bytes, the local fence file's format: magic "STRFENCE", u64
 *                      epoch, u32 crc32c of the first 16 bytes, u32 zero
 *
 * Every object is written by put-if-absent. A position already taken, or a put whose
 * outcome is unknown, is read back: the same bytes are this writer's own retry;
 * anything else means a newer owner took the position (STRATA_EFENCED). After a
 * batch's put, a writer reads the epoch object when 20 ms or 32 group commits have
 * passed since it last did; once it names a newer epoch the writer is fenced and the
 * batch is not acknowledged (its outcome is unknown). An open walks the objects from
 * the cursor: objects wholly at or below it are not replayed (an owner collects stale
 * batches); a gap does not stop the walk, and only a void put at its first position
 * closes it; an object that starts at or below a position already covered (other than
 * the one straddling the cursor) is void, logged and not replayed. A release hands
 * batches wholly at or below its position to the reaper; markers stay, so a stalled
 * older writer's put still finds its position taken.
 */
#ifndef STRATA_WAL_INT_H
#define STRATA_WAL_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../lib/buf.h"
#include "../lib/crc.h"
#include "../lib/diag.h"
#include "../lib/ecount.h"
#include "wal.h"

/** Magic of a segment header. */
#define WAL_MAGIC "STRWAL01"
/** Bytes of a segment header. */
#define WAL_SEG_HDR 24u
/** Bytes of an entry header: header_crc, payload_len, first_seq, nrows, payload_crc. */
#define WAL_ENTRY_HDR 24u
/** Segment format version written by this build (3: a kind byte per row). */
#define WAL_VERSION 3u
/** Oldest segment version read (2: entry header checksum, rows without a kind). */
#define WAL_VERSION_MIN 2u
/** Largest entry payload used when the options say 0. */
#define WAL_DEFAULT_MAX_ENTRY (1ull << 30)
/** Length of a segment file name with an epoch: 20 digits, '-', 20 digits, ".wal". */
#define WAL_NAME_EPOCH_LEN 45u
/** Magic of a fence (the fence file, and the epoch object of wal = store). */
#define WAL_FENCE_MAGIC "STRFENCE"
/** Bytes of a fence: magic, u64 epoch, u32 crc32c of magic and epoch, u32 zero. */
#define WAL_FENCE_BYTES 24u
/** Longest failure message kept for later callers. */
#define WAL_MSG_MAX 512u

/** An encoded entry waiting in the group-commit queue. */
struct wal_entry {
	/** Next entry in position order. */
	struct wal_entry *next;
	/** Position of the first row. */
	uint64_t first_seq;
	/** Position of the last row. */
	uint64_t last_seq;
	/** Bytes in data: entry header plus payload. */
	size_t len;
	/** Rows in the entry. */
	size_t nrows;
	/** The entry exactly as written to the segment. */
	uint8_t data[];
};

/** A WAL object of the store as tracked in memory (wal = store). */
struct wal_obj {
	/** Position named by the key (its first). */
	uint64_t first_seq;
	/** Last position it covers. */
	uint64_t last_seq;
	/** Bytes of the object. */
	uint64_t bytes;
	/** Its kind (batch, fence, void: wal_store.c); a marker is only a header. */
	int kind;
};

/** A live segment file as tracked in memory. */
struct wal_seg {
	/** Position named by the file. */
	uint64_t first_seq;
	/** Owner epoch named by the file. */
	uint64_t epoch;
	/** Last position written to it (first_seq - 1 when it holds no entry). */
	uint64_t last_seq;
	/** Bytes of the file, header included. */
	uint64_t bytes;
};

/** What only a WAL on the object store holds (wal = store; all zero for segment files). */
struct wal_store_state {
	/** The object store holding the WAL objects (NULL: the WAL is segment files). */
	struct objstore *os;
	/** Key prefix of this WAL's objects ("shard-0000/wal/"), env.malloc'ed. */
	char *prefix;
	/** Where released objects go to be deleted (NULL: deleted at once). */
	struct reaper *reaper;
	/** Objects above the cursor known to this writer, in position order (under mu). */
	struct wal_obj *objs;
	/** Entries used in objs. */
	size_t nobjs;
	/** Entries allocated in objs. */
	size_t cap_objs;
	/** Highest position covered by the objects read (the walk's end). */
	uint64_t covered;
	/** Gaps met by the walk (positions above the cursor no object covers). */
	uint64_t gaps;
	/** Gaps this writer closed with a void object. */
	uint64_t gaps_closed;
	/** Objects below the cursor found by the open and queued for deletion. */
	uint64_t stale_collected;
	/** Leader-private: when the epoch object was last read (env.mono_ns). */
	uint64_t epoch_checked_ns;
	/** Leader-private: group commits since the epoch object was last read. */
	unsigned commits_unchecked;
	/** When a read of the epoch object last found this writer the owner (env.mono_ns;
	 *  any thread: wal_owner_check). */
	_Atomic uint64_t owner_seen_ns;
};

/** One shard's WAL. */
struct wal {
	/** Segment directory (env.malloc'ed copy). */
	char *dir;
	/** STRATA_SYNC_* mode. */
	int sync;
	/** Milliseconds between background syncs (STRATA_SYNC_INTERVAL). */
	uint32_t interval_ms;
	/** Roll threshold of a segment. */
	uint64_t segment_bytes;
	/** Largest payload accepted by submit and by recovery. */
	uint64_t max_entry;
	/** Guards every field below up to the leader-private ones. */
	pthread_mutex_t mu;
	/** Broadcast when a batch or a background sync finishes. */
	pthread_cond_t cond;
	/** Wakes the interval thread early (to stop it); uses CLOCK_MONOTONIC. */
	pthread_cond_t bg_cond;
	/** Position handed to the next submitted row. */
	uint64_t next_seq;
	/** Oldest queued entry not yet taken by a leader. */
	struct wal_entry *q_head;
	/** Newest queued entry. */
	struct wal_entry *q_tail;
	/** Logical stream offset (sum of entry sizes) of the end of the last submit. */
	uint64_t submitted_off;
	/** Logical stream offset written to segment files. */
	uint64_t written_off;
	/** Logical stream offset acknowledged to waiters under the sync mode: stored under
	 *  the mutex (release), and read by wal_wait without it. */
	_Atomic uint64_t ack_off;
	/** Bumped after each group commit ends and when the WAL fails: what wal_wait's
	 *  waiters sleep on (ecount.h), with no mutex to take again when they wake. */
	struct ecount ack_gen;
	/** Logical stream offset covered by a successful fdatasync. */
	uint64_t synced_off;
	/** Set while a leader writes a batch outside the mutex. */
	int leader;
	/** Entries queued (q_head..q_tail). */
	unsigned q_count;
	/** Writers seen by the last group commit: the entries it carried plus those that
	 *  queued while it synced (writers it did not carry). How many entries writers
	 *  wait for before one leads the next group (wal_defer); it follows the writers at
	 *  once, up and down. */
	unsigned active_writers;
	/** Entries the group being flushed carried. */
	unsigned flushing;
	/** How long the last fdatasync took, ns (env.mono_ns). */
	uint64_t last_sync_ns;
	/** Longest writers defer leading for the writers of the last group, ns (0: never waits). */
	uint64_t group_wait_ns;
	/** Set while writers defer leading a group until the writers of the last one are
	 *  queued (wal_defer). */
	int gather_armed;
	/** Until when they defer (CLOCK_MONOTONIC), while gather_armed. */
	struct timespec gather_dl;
	/** Where each fdatasync's time is reported (wal_options.observe). */
	struct ratelimit *observe;
	/** The descriptor budget this WAL's segment descriptor counts against (NULL: none). */
	struct wal_fdcache *fdc;
	/** Neighbour in the budget's LRU list towards its head (under the budget's mu). */
	struct wal *fdc_prev;
	/** Neighbour in the budget's LRU list towards its tail (under the budget's mu). */
	struct wal *fdc_next;
	/** cur_fd counts against fdc (listed). */
	int fdc_listed;
	/** 0, STRATA_EREADONLY once a write or sync failed, STRATA_EFENCED once fenced. */
	int failed;
	/** What failed, repeated to every later caller. */
	char fail_msg[WAL_MSG_MAX];
	/** Set by wal_close: submits are refused. */
	int closing;
	/** Live segments in position order; the last one is current. */
	struct wal_seg *segs;
	/** Entries used in segs. */
	size_t nsegs;
	/** Entries allocated in segs. */
	size_t cap_segs;
	/** fdatasync calls made on segment files (object puts, on the store). */
	uint64_t syncs;
	/** Descriptor of the current segment, for the interval thread. */
	int sync_fd;
	/** Set while the interval thread syncs sync_fd outside the mutex. */
	int bg_syncing;
	/** Asks the interval thread to exit. */
	int bg_stop;
	/** The interval thread runs. */
	int bg_started;
	/** STRATA_SYNC_INTERVAL without a thread: the owner calls wal_sync_written. */
	int external_sync;
	/** The interval thread. */
	pthread_t bg;
	/** Leader-private: descriptor of the current segment. */
	int cur_fd;
	/** Leader-private: position named by the current segment. */
	uint64_t cur_first;
	/** Leader-private: last position written or staged in the current segment (or put,
	 *  on the store). */
	uint64_t cur_last;
	/** Leader-private: segment offset after everything written or staged. */
	uint64_t cur_off;
	/** Leader-private: small entries waiting to be written with one pwrite (the object
	 *  being built, on the store). */
	struct buf stg;
	/** Leader-private: path of the current segment. */
	char cur_path[PATH_MAX];
	/** Owner epoch (set by wal_start): names new segments, compared with the fence. */
	uint64_t epoch;
	/** Set once wal_start succeeded: submits are accepted. */
	int started;
	/** Replay cursor given to wal_scan_open. */
	uint64_t replay_after;
	/** Replay callback, kept for wal_start's catch-up. */
	wal_replay_cb cb;
	/** Its context. */
	void *cb_ctx;
	/** The environment of the thread that opened the WAL; the interval thread runs in it. */
	struct env_ops *env_ops;
	/** What wal_scan_open's survey found, for wal_start. */
	struct wal_segment_info *found;
	/** Entries in found. */
	size_t nfound;
	/** What only wal = store uses (store.os == NULL: segment files). */
	struct wal_store_state store;
};

/** A sequential reader with read-ahead over one file. */
struct wal_reader {
	/** File read. */
	int fd;
	/** Its path, for messages. */
	const char *path;
	/** Bytes readable. */
	uint64_t size;
	/** Cached bytes. */
	struct buf b;
	/** File offset of b.data[0]. */
	uint64_t boff;
};

/** Mutex held: turn the WAL terminal: read-only after a failed write or sync
 *  (STRATA_EREADONLY), or fenced by a newer owner (STRATA_EFENCED). */
static inline void
wal_set_failed(struct wal *w, int code, const char *why)
{
	if (w->failed)
		return;
	w->failed = code;
	if (code == STRATA_EFENCED)
		snprintf(w->fail_msg, sizeof(w->fail_msg), "%s", why);
	else
		snprintf(w->fail_msg, sizeof(w->fail_msg), "%.*s; the WAL is read-only until reopened",
			 (int)strnlen(why, WAL_MSG_MAX - 64), why);
	diag_log(LOG_LVL_ERROR, "%s", w->fail_msg);
	ecount_signal(&w->ack_gen);
}

/** Encode the fence naming epoch into b (WAL_FENCE_BYTES). */
static inline void
wal_fence_encode(uint8_t *b, uint64_t epoch)
{
	memcpy(b, WAL_FENCE_MAGIC, 8);
	enc_u64(b + 8, epoch);
	enc_u32(b + 16, crc32c(0, b, 16));
	enc_u32(b + 20, 0);
}

/** The epoch the n bytes of a fence name: 0, or -1 when they are not a fence. */
static inline int
wal_fence_decode(const uint8_t *b, size_t n, uint64_t *epoch)
{
	if (n != WAL_FENCE_BYTES || memcmp(b, WAL_FENCE_MAGIC, 8) != 0 ||
	    crc32c(0, b, 16) != dec_u32(b + 16))
		return -1;
	*epoch = dec_u64(b + 8);
	return 0;
}

/* ---- wal_scan.c ---- */

/** Record a failed syscall on a segment: "<what> <path>: <strerror> (...)". */
int wal_sys(int err, const char *what, const char *path, uint64_t off);
/** File name of a segment: the legacy form for epoch 0. */
void wal_seg_name(uint64_t first_seq, uint64_t epoch, char *out, size_t cap);
/** Path (PATH_MAX bytes) of a segment of dir. */
void wal_seg_path(const char *dir, uint64_t first_seq, uint64_t epoch, char *out);
/** Point *out at n bytes at file offset off (off + n <= size). */
int wal_reader_get(struct wal_reader *r, uint64_t off, size_t n, const uint8_t **out);
/** List and read every segment of dir into an env.malloc'ed array, in position order;
 *  entries above replay_from go to cb. Segments known from prev, an earlier survey, and
 *  not the last live one there are not read again. Read-only. */
int wal_survey(const char *dir, uint64_t max_entry, uint64_t replay_from, wal_replay_cb cb,
	       void *ctx, const struct wal_segment_info *prev, size_t nprev,
	       struct wal_segment_info **out, size_t *nout);
/** Index of the last live (neither void nor gone) segment of fs (n when none). */
size_t wal_last_live(const struct wal_segment_info *fs, size_t n);

/** What an open makes of a live segment's bytes (wal_judge_one). */
enum wal_bytes_verdict {
	/** Whole, cut at a newer epoch, or the last live segment's torn tail (truncated by
	 *  wal_start). */
	WAL_BYTES_ACCEPTED = 0,
	/** Invalid: the open fails with STRATA_ECORRUPT (repair may cut it). */
	WAL_BYTES_REFUSED = 1,
	/** A torn tail below a newer epoch whose positions are all in generations: void. */
	WAL_BYTES_VOID = 2,
};
/** The rules of an open for live segment f of a survey (is_last: the last live one),
 *  after the live segment before (NULL: none): a wal_bytes_verdict, or STRATA_ECORRUPT
 *  (diag set) when f starts at or below before's last position. */
int wal_judge_one(const char *dir, const struct wal_segment_info *f, int is_last,
		  const struct wal_segment_info *before, uint64_t replay_after);
/** 0 when an open accepts what a survey found, else STRATA_ECORRUPT naming file and
 *  offset (a void torn tail is logged). *last receives the index of the last live
 *  segment (n when none). */
int wal_judge(const char *dir, const struct wal_segment_info *fs, size_t n, uint64_t replay_after,
	      size_t *last);

/* ---- wal_fdcache.c ---- */

/** Leader (or wal_start), no WAL mutex held: w's segment descriptor is in use, newly
 *  opened when opened is set; the budget closes others' to stay within it. */
void wal_fdc_use(struct wal *w, int opened);
/** Leader: reopen the current segment, whose descriptor the budget closed (cur_fd < 0). */
int wal_fdc_reopen(struct wal *w);
/** w's descriptor is closed for good (wal_free): leave the budget. */
void wal_fdc_drop(struct wal *w);
/** mu held: fdatasync what is written and not yet synced, dropping mu around the call. */
void wal_sync_written_locked(struct wal *w);
/** The STRATA_SYNC_INTERVAL thread (wal_start starts it): wal_sync_written_locked every
 *  interval_ms until bg_stop. */
void *wal_bg_main(void *arg);

/* ---- wal_store.c ---- */

/** wal_scan_open of a WAL on the store: refuse local rows after the cursor, then walk
 *  the objects and replay those above it through cb. */
int wal_store_scan(struct wal *w, wal_replay_cb cb, void *ctx);
/** wal_start of a WAL on the store. */
int wal_store_start(struct wal *w, uint64_t epoch, uint64_t floor);
/** Leader, outside the mutex: write a batch as one object at its first position. */
int wal_store_flush(struct wal *w, struct wal_entry *head, uint64_t *nputs);
/** wal_release of a WAL on the store. */
int wal_store_release(struct wal *w, uint64_t upto);

#endif
