/*
 * wal.c — one shard's write-ahead log: segment files, group commit, recovery.
 *
 * Segment: header (magic "STRWAL01", u32 version, u32 crc32c of magic, version and
 * first_seq, u64 first_seq), then entries. Entry header, 24 bytes: u32 header_crc
 * (crc32c of the next 20 bytes), u32 payload_len, u64 first_seq, u32 nrows, u32
 * payload_crc (crc32c of the payload); then the payload, per row: u8 kind (0 put,
 * 1 delete; version 3 on), varint klen, varint vlen, key, value. Version 2 rows have no
 * kind byte and are all puts. All integers little-endian.
 */
#include "wal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../lib/buf.h"
#include "../lib/crc.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/ecount.h"
#include "../lib/mono.h"
#include "../lib/ratelimit.h"
#include "../objstore/objstore.h"
#include "reaper.h"

/** Bytes of a segment header. */
#define WAL_SEG_HDR 24u
/** Bytes of an entry header: header_crc, payload_len, first_seq, nrows, payload_crc. */
#define WAL_ENTRY_HDR 24u
/** Segment format version written by this build (3: a kind byte per row). */
#define WAL_VERSION 3u
/** Oldest segment version read (2: entry header checksum, rows without a kind). */
#define WAL_VERSION_MIN 2u
/** Segment size used when the options say 0. */
#define WAL_DEFAULT_SEGMENT_BYTES (64ull << 20)
/** Largest entry payload used when the options say 0. */
#define WAL_DEFAULT_MAX_ENTRY (1ull << 30)
/** Interval between background syncs when the options say 0. */
#define WAL_DEFAULT_INTERVAL_MS 1000u
/** Entries smaller than this are coalesced into one pwrite up to this many bytes;
 *  larger ones are written straight from their own buffer. */
#define WAL_COALESCE_BYTES (1u << 20)
/** Read-ahead of the recovery scanner. */
#define WAL_READ_CHUNK (1u << 20)
/** Bytes past the chunk being read that replay asks the kernel to read ahead. */
#define WAL_READAHEAD (8u << 20)
/** Length of a legacy (epoch 0) segment file name: 20 digits and ".wal". */
#define WAL_NAME_LEN 24u
/** Length of a segment file name with an epoch: 20 digits, '-', 20 digits, ".wal". */
#define WAL_NAME_EPOCH_LEN 45u
/** Name of the fence file in a WAL directory. */
#define WAL_FENCE_NAME "epoch"
/** Bytes of the fence file: magic, u64 epoch, u32 crc32c of magic and epoch, u32 zero. */
#define WAL_FENCE_BYTES 24u
/** Longest failure message kept for later callers. */
#define WAL_MSG_MAX 512u

static const char wal_magic[8] = {'S', 'T', 'R', 'W', 'A', 'L', '0', '1'};
static const char wal_fence_magic[8] = {'S', 'T', 'R', 'F', 'E', 'N', 'C', 'E'};

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

/** Kinds of WAL object (wal = store). */
enum { WAL_OBJ_BATCH = 0, WAL_OBJ_FENCE = 1, WAL_OBJ_VOID = 2 };

/** A WAL object of the store as tracked in memory (wal = store). */
struct wal_obj {
	/** Position named by the key (its first). */
	uint64_t first_seq;
	/** Last position it covers. */
	uint64_t last_seq;
	/** Bytes of the object. */
	uint64_t bytes;
	/** WAL_OBJ_*; a marker (fence, void) is exactly WAL_OBJ_HDR bytes. */
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
	 *  queued (wal_defer), until gather_dl (CLOCK_MONOTONIC). */
	int gather_armed;
	struct timespec gather_dl;
	/** Where each fdatasync's time is reported (wal_options.observe). */
	struct ratelimit *observe;
	/** The descriptor budget this WAL's segment descriptor counts against (NULL:
	 *  none), and its place in that budget's LRU list (under the cache's mu). */
	struct wal_fdcache *fdc;
	struct wal *fdc_prev, *fdc_next;
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
	/** fdatasync calls made on segment files. */
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
	/** Leader-private: last position written or staged in the current segment. */
	uint64_t cur_last;
	/** Leader-private: segment offset after everything written or staged. */
	uint64_t cur_off;
	/** Leader-private: small entries waiting to be written with one pwrite. */
	struct buf stg;
	/** Leader-private: path of the current segment. */
	char cur_path[PATH_MAX];
	/** Owner epoch (set by wal_start): names new segments, compared with the fence. */
	uint64_t epoch;
	/** Set once wal_start succeeded: submits are accepted. */
	int started;
	/** Replay cursor given to wal_scan_open. */
	uint64_t replay_after;
	/** Replay callback and its context, kept for wal_start's catch-up. */
	wal_replay_cb cb;
	void *cb_ctx;
	/** The environment of the thread that opened the WAL; the interval thread runs in it. */
	struct env_ops *env_ops;
	/** What wal_scan_open found, for wal_start. */
	struct wal_found *found;
	/** Entries in found. */
	size_t nfound;
	/** wal = store: the object store holding the WAL objects (NULL: segment files). */
	struct objstore *os;
	/** wal = store: key prefix of this WAL's objects ("shard-0000/wal/"), env.malloc'ed. */
	char *prefix;
	/** wal = store: where released objects go to be deleted (NULL: deleted at once). */
	struct reaper *reaper;
	/** wal = store: objects above the cursor known to this writer, in position order. */
	struct wal_obj *objs;
	/** Entries used and allocated in objs. */
	size_t nobjs, cap_objs;
	/** wal = store: highest position covered by the objects read (the walk's end). */
	uint64_t covered;
	/** wal = store: gaps met by the walk (positions above the cursor no object covers). */
	uint64_t gaps;
	/** wal = store: gaps this writer closed with a void object. */
	uint64_t gaps_closed;
	/** wal = store: objects below the cursor found by the open and queued for deletion. */
	uint64_t stale_collected;
	/** wal = store, leader-private: when the epoch object was last read (env.mono_ns), and
	 *  group commits since. */
	uint64_t epoch_checked_ns;
	unsigned commits_unchecked;
};

/** A segment file found by a survey of the directory. */
struct wal_found {
	/** Position named by the file. */
	uint64_t first_seq;
	/** Owner epoch named by the file. */
	uint64_t epoch;
	/** Positions above this belong to a newer epoch (UINT64_MAX: none). */
	uint64_t limit;
	/** Last valid position read (first_seq - 1 when none). */
	uint64_t last_seq;
	/** Valid entries read. */
	uint64_t entries;
	/** File size, and the offset of the first byte not read as valid. */
	uint64_t size, valid_bytes;
	/** A newer epoch starts at or before first_seq: nothing in it counts. */
	int dead;
	/** The scan stopped at the limit (the bytes after it are void, not invalid). */
	int cut;
	/** The invalid bytes at valid_bytes look like an interrupted append. */
	int torn;
	/** The file vanished between listing and reading (released by its writer). */
	int gone;
	/** Why the byte at valid_bytes is invalid. */
	char why[160];
};

/** What a scan of one segment found. */
struct wal_scan {
	/** File size when the scan started. */
	uint64_t size;
	/** Offset of the first invalid byte (size when all valid). */
	uint64_t valid_bytes;
	/** Last valid position (first_seq - 1 when none). */
	uint64_t last_seq;
	/** Valid entries. */
	uint64_t entries;
	/** The invalid spot looks like an interrupted append (a torn tail). */
	int torn;
	/** The scan stopped at its limit: what follows belongs to no one and is not read. */
	int cut;
	/** Why the spot at valid_bytes is invalid. */
	char why[160];
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

/* ---- small helpers ---- */

/** Name of the code diag_errno maps an errno to. */
static const char *
wal_code_name(int code)
{
	switch (code) {
	case STRATA_ENOSPC:
		return "ENOSPC";
	case STRATA_ENOMEM:
		return "ENOMEM";
	case STRATA_EEXIST:
		return "EEXIST";
	default:
		return "EIO";
	}
}

/** Record a failed syscall on a segment: "<what> <path>: <strerror> (...)". */
static int
wal_sys(int err, const char *what, const char *path, uint64_t off)
{
	int code = diag_errno(err);
	struct rlimit rl;
	if ((err == EMFILE || err == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		return diag_set(code, "wal: %s %s failed: %s: the process may hold %llu descriptors "
				"(ulimit -n); lower max_open_wal_files (WAL files held open over all "
				"shards) or raise the limit", what, path, strerror(err),
				(unsigned long long)rl.rlim_cur);
	return diag_set(code, "wal: %s %s at offset %" PRIu64 " failed: %s (errno %d, %s)", what,
			path, off, strerror(err), err, wal_code_name(code));
}

/** File name of a segment: the legacy form for epoch 0. */
static void
wal_seg_name(uint64_t first_seq, uint64_t epoch, char *out, size_t cap)
{
	if (epoch == 0)
		snprintf(out, cap, "%020" PRIu64 ".wal", first_seq);
	else
		snprintf(out, cap, "%020" PRIu64 "-%020" PRIu64 ".wal", first_seq, epoch);
}

static void
wal_seg_path(const char *dir, uint64_t first_seq, uint64_t epoch, char *out)
{
	char name[64];
	wal_seg_name(first_seq, epoch, name, sizeof(name));
	snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

/** Parse 20 decimal digits; -1 when they are not. */
static int
wal_parse_u64(const char *p, uint64_t *out)
{
	uint64_t v = 0;
	for (int i = 0; i < 20; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		uint64_t d = (uint64_t)(p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/** Parse a segment file name; 0 with position and epoch, or -1 when not a segment name. */
static int
wal_parse_name(const char *name, uint64_t *first_seq, uint64_t *epoch)
{
	size_t len = strlen(name);
	*epoch = 0;
	if (len == WAL_NAME_LEN && strcmp(name + 20, ".wal") == 0)
		return wal_parse_u64(name, first_seq);
	if (len != WAL_NAME_EPOCH_LEN || name[20] != '-' || strcmp(name + 41, ".wal") != 0)
		return -1;
	if (wal_parse_u64(name, first_seq) != 0 || wal_parse_u64(name + 21, epoch) != 0 || *epoch == 0)
		return -1;
	return 0;
}

/** A segment as listed: position and epoch. */
struct wal_name {
	/** Position named by the file. */
	uint64_t first_seq;
	/** Epoch named by the file. */
	uint64_t epoch;
};

/** Position order, then epoch (an older epoch's segment sorts first). */
static int
wal_cmp_name(const void *a, const void *b)
{
	const struct wal_name *x = a, *y = b;
	if (x->first_seq != y->first_seq)
		return x->first_seq < y->first_seq ? -1 : 1;
	return x->epoch < y->epoch ? -1 : x->epoch > y->epoch;
}

/** The segments found in dir in position order, in an env.malloc'ed array. A missing
 *  directory holds none. */
static int
wal_list(const char *dir, struct wal_name **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	DIR *d = env.opendir(dir);
	if (d == NULL && errno == ENOENT)
		return 0;
	if (d == NULL)
		return diag_sys(errno, "wal: cannot list", dir);
	struct wal_name *v = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = env.readdir(d)) != NULL) {
		uint64_t first, epoch;
		if (wal_parse_name(de->d_name, &first, &epoch) != 0)
			continue;
		if (first == 0) {
			rc = diag_set(STRATA_ECORRUPT, "wal: segment %s/%s names position 0", dir,
				      de->d_name);
			break;
		}
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct wal_name *nv = env.realloc(v, ncap * sizeof(*v));
			if (nv == NULL) {
				rc = diag_set(STRATA_ENOMEM, "wal: out of memory listing %s", dir);
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[len++] = (struct wal_name){first, epoch};
	}
	env.closedir(d);
	if (rc) {
		env.free(v);
		return rc;
	}
	if (len > 1)
		qsort(v, len, sizeof(*v), wal_cmp_name);
	*out = v;
	*n = len;
	return 0;
}

static int
wal_dir_sync(const char *dir)
{
	int fd = env.open(dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return diag_sys(errno, "wal: cannot open directory", dir);
	int rc = 0;
	if (env.fsync(fd) != 0)
		rc = diag_sys(errno, "wal: cannot fsync directory", dir);
	env.close(fd);
	return rc;
}

static int
wal_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *path)
{
	const uint8_t *q = p;
	while (n > 0) {
		ssize_t r = env.pwrite(fd, q, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			char what[64];
			snprintf(what, sizeof(what), "write of %zu bytes to", n);
			return wal_sys(r < 0 ? errno : EIO, what, path, off);
		}
		q += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static void
wal_seg_header(uint8_t *h, uint64_t first_seq)
{
	memcpy(h, wal_magic, 8);
	enc_u32(h + 8, WAL_VERSION);
	enc_u64(h + 16, first_seq);
	uint32_t c = crc32c(crc32c(0, h, 12), h + 16, 8);
	enc_u32(h + 12, c);
}

/* ---- reading and validating segments ---- */

/** Point *out at n bytes at file offset off (off + n <= size). */
static int
wal_reader_get(struct wal_reader *r, uint64_t off, size_t n, const uint8_t **out)
{
	assert(off + n <= r->size);
	if (off >= r->boff && off + n <= r->boff + r->b.len) {
		*out = r->b.data + (off - r->boff);
		return 0;
	}
	uint64_t want = n > WAL_READ_CHUNK ? n : WAL_READ_CHUNK;
	if (want > r->size - off)
		want = r->size - off;
	r->b.len = 0;
	r->boff = off;
	/* Replay reads a segment front to back: ask for the next chunks now, so the disk
	 * reads them while this one is decoded (a hint: no effect on a descriptor that is
	 * not a file). */
	if (off + want < r->size)
		(void)posix_fadvise(r->fd, (off_t)(off + want), WAL_READAHEAD, POSIX_FADV_WILLNEED);
	if (buf_reserve(&r->b, (size_t)want) != 0)
		return diag_set(STRATA_ENOMEM, "wal: out of memory reading %" PRIu64 " bytes of %s",
				want, r->path);
	size_t got = 0;
	while (got < want) {
		ssize_t k = env.pread(r->fd, r->b.data + got, (size_t)want - got,
				      (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return wal_sys(errno, "read of", r->path, off + got);
		if (k == 0)
			return diag_set(STRATA_EIO, "wal: %s shrank while read at offset %" PRIu64,
					r->path, off + got);
		got += (size_t)k;
	}
	r->b.len = (size_t)want;
	*out = r->b.data;
	return 0;
}

/** Set *zero to whether every byte of r's file from off to its end is zero. */
static int
wal_zero_to_end(struct wal_reader *r, uint64_t off, int *zero)
{
	*zero = 1;
	while (off < r->size) {
		uint64_t n = r->size - off;
		if (n > WAL_READ_CHUNK)
			n = WAL_READ_CHUNK;
		const uint8_t *p;
		int rc = wal_reader_get(r, off, (size_t)n, &p);
		if (rc)
			return rc;
		for (uint64_t i = 0; i < n; i++) {
			if (p[i] != 0) {
				*zero = 0;
				return 0;
			}
		}
		off += n;
	}
	return 0;
}

/**
 * Validate one segment from its start. Stops at the first invalid spot and records
 * it in s (valid_bytes, torn, why); returns 0 then. A negative return is an IO error,
 * an unknown version, or a replay callback that aborted. Each valid entry whose last
 * position is above replay_after goes to cb (when cb is set).
 * Torn (an interrupted append, if this is the last segment): fewer bytes left than an
 * entry header; a bad header checksum with only zeros from there to the end; a good
 * header whose payload reaches past the end; a bad payload checksum in an entry that
 * ends at the end or is followed only by zeros; a segment of zeros only.
 */
static int
wal_scan_segment(int fd, const char *path, uint64_t first_seq, uint64_t limit, uint64_t max_entry,
		 uint64_t replay_after, wal_replay_cb cb, void *ctx, struct wal_scan *s)
{
	memset(s, 0, sizeof(*s));
	s->last_seq = first_seq - 1;
	struct stat st;
	if (env.fstat(fd, &st) != 0)
		return wal_sys(errno, "stat of", path, 0);
	s->size = (uint64_t)st.st_size;
	if (s->size < WAL_SEG_HDR) {
		s->torn = 1;
		snprintf(s->why, sizeof(s->why), "incomplete segment header (%" PRIu64 " bytes)",
			 s->size);
		return 0;
	}
	struct wal_reader r = {.fd = fd, .path = path, .size = s->size};
	strata_row *rows = NULL;
	size_t rows_cap = 0;
	const uint8_t *p;
	int rc = wal_reader_get(&r, 0, WAL_SEG_HDR, &p);
	if (rc)
		goto out;
	if (memcmp(p, wal_magic, 8) != 0) {
		rc = wal_zero_to_end(&r, 0, &s->torn);
		snprintf(s->why, sizeof(s->why), "%s",
			 s->torn ? "zero-filled segment" : "bad segment magic");
		goto out;
	}
	uint32_t version = dec_u32(p + 8);
	if (version < WAL_VERSION_MIN || version > WAL_VERSION) {
		rc = diag_set(STRATA_EVERSION,
			      "wal: segment %s has format version %u, but this build reads only "
			      "versions %u..%u (entries with a header checksum); it cannot be replayed",
			      path, version, WAL_VERSION_MIN, WAL_VERSION);
		goto out;
	}
	if (crc32c(crc32c(0, p, 12), p + 16, 8) != dec_u32(p + 12)) {
		snprintf(s->why, sizeof(s->why), "segment header checksum mismatch");
		goto out;
	}
	if (dec_u64(p + 16) != first_seq) {
		snprintf(s->why, sizeof(s->why), "segment header names position %" PRIu64 ", not %" PRIu64,
			 dec_u64(p + 16), first_seq);
		goto out;
	}
	uint64_t off = WAL_SEG_HDR;
	uint64_t expect = first_seq;
	s->valid_bytes = off;
	while (off < s->size) {
		if (s->last_seq >= limit) {
			s->cut = 1; /* a newer epoch owns the positions from here on */
			break;
		}
		if (s->size - off < WAL_ENTRY_HDR) {
			s->torn = 1;
			snprintf(s->why, sizeof(s->why),
				 "incomplete entry header (%" PRIu64 " bytes)", s->size - off);
			break;
		}
		uint8_t h[WAL_ENTRY_HDR];
		rc = wal_reader_get(&r, off, WAL_ENTRY_HDR, &p);
		if (rc)
			goto out;
		memcpy(h, p, WAL_ENTRY_HDR);
		if (crc32c(0, h + 4, WAL_ENTRY_HDR - 4) != dec_u32(h)) {
			rc = wal_zero_to_end(&r, off, &s->torn);
			if (rc)
				goto out;
			if (s->torn)
				snprintf(s->why, sizeof(s->why),
					 "zero-filled tail of %" PRIu64 " bytes", s->size - off);
			else
				snprintf(s->why, sizeof(s->why), "entry header checksum mismatch");
			break;
		}
		uint32_t plen = dec_u32(h + 4);
		uint64_t fseq = dec_u64(h + 8);
		uint32_t nrows = dec_u32(h + 16);
		uint32_t pcrc = dec_u32(h + 20);
		if (plen > max_entry) {
			snprintf(s->why, sizeof(s->why), "payload length %u exceeds the limit %" PRIu64,
				 plen, max_entry);
			break;
		}
		uint64_t end = off + WAL_ENTRY_HDR + plen;
		if (end > s->size) {
			s->torn = 1;
			snprintf(s->why, sizeof(s->why),
				 "entry of %u payload bytes extends %" PRIu64
				 " bytes past the end of the file",
				 plen, end - s->size);
			break;
		}
		rc = wal_reader_get(&r, off + WAL_ENTRY_HDR, plen, &p);
		if (rc)
			goto out;
		if (crc32c(0, p, plen) != pcrc) {
			rc = wal_zero_to_end(&r, end, &s->torn);
			if (rc)
				goto out;
			snprintf(s->why, sizeof(s->why), "entry payload checksum mismatch%s",
				 !s->torn ? "" : end == s->size ? " in the final entry"
								: " in the final entry, zeros after it");
			break;
		}
		if (nrows == 0 || nrows > plen / 2) {
			snprintf(s->why, sizeof(s->why), "entry has %u rows in %u payload bytes", nrows,
				 plen);
			break;
		}
		if (fseq != expect || fseq > UINT64_MAX - nrows) {
			snprintf(s->why, sizeof(s->why), "entry starts at position %" PRIu64
				 ", expected %" PRIu64, fseq, expect);
			break;
		}
		if (fseq + nrows - 1 > limit) {
			snprintf(s->why, sizeof(s->why), "entry of positions %" PRIu64 "..%" PRIu64
				 " crosses position %" PRIu64 ", where a newer epoch starts", fseq,
				 fseq + nrows - 1, limit + 1);
			break;
		}
		if (nrows > rows_cap) {
			strata_row *nr = env.realloc(rows, (size_t)nrows * sizeof(*rows));
			if (nr == NULL) {
				rc = diag_set(STRATA_ENOMEM, "wal: out of memory replaying %s", path);
				goto out;
			}
			rows = nr;
			rows_cap = nrows;
		}
		struct rd in;
		rd_init(&in, p, plen);
		for (uint32_t i = 0; i < nrows && !in.err; i++) {
			uint32_t kind = STRATA_ROW_PUT;
			if (version >= 3) {
				const uint8_t *kb = rd_bytes(&in, 1);
				if (kb == NULL || (*kb != STRATA_ROW_PUT && *kb != STRATA_ROW_DELETE)) {
					in.err = 1;
					break;
				}
				kind = *kb;
			}
			uint64_t klen = rd_varint(&in);
			uint64_t vlen = rd_varint(&in);
			if (klen > rd_left(&in) || vlen > rd_left(&in) - klen) {
				in.err = 1;
				break;
			}
			rows[i].key_len = (size_t)klen;
			rows[i].key = rd_bytes(&in, (size_t)klen);
			rows[i].value_len = (size_t)vlen;
			rows[i].value = rd_bytes(&in, (size_t)vlen);
			rows[i].kind = kind;
			if (kind == STRATA_ROW_DELETE && vlen > 0)
				in.err = 1;
		}
		if (in.err || rd_left(&in) != 0) {
			snprintf(s->why, sizeof(s->why), "entry rows do not match its payload length");
			break;
		}
		uint64_t last = fseq + nrows - 1;
		if (cb != NULL && last > replay_after) {
			int cr = cb(ctx, fseq, rows, nrows);
			if (cr != 0) {
				rc = cr < 0 ? cr
					    : diag_set(STRATA_EINVAL,
						       "wal: replay stopped at position %" PRIu64 " of %s",
						       fseq, path);
				goto out;
			}
		}
		s->entries++;
		s->last_seq = last;
		expect = last + 1;
		off = end;
		s->valid_bytes = off;
	}
out:
	env.free(rows);
	buf_destroy(&r.b);
	return rc;
}

/* ---- the fence ---- */

static void
wal_fence_encode(uint8_t *b, uint64_t epoch)
{
	memcpy(b, wal_fence_magic, 8);
	enc_u64(b + 8, epoch);
	enc_u32(b + 16, crc32c(0, b, 16));
	enc_u32(b + 20, 0);
}

/** Read the epoch a fence file names. STRATA_ECORRUPT when it is not a fence. */
static int
wal_fence_get(int fd, const char *path, uint64_t *epoch)
{
	uint8_t b[WAL_FENCE_BYTES];
	ssize_t n = env_pread_full(fd, b, sizeof(b), 0);
	if (n < 0)
		return wal_sys(errno, "read of", path, 0);
	if (n == 0) {
		*epoch = 0; /* created, never written: no owner yet */
		return 0;
	}
	if (n != (ssize_t)sizeof(b) || memcmp(b, wal_fence_magic, 8) != 0 ||
	    crc32c(0, b, 16) != dec_u32(b + 16))
		return diag_set(STRATA_ECORRUPT, "wal: the fence %s is not a valid fence file (%zd bytes)",
				path, n);
	*epoch = dec_u64(b + 8);
	return 0;
}

/** Leader, before acknowledging: STRATA_EFENCED once the fence names a newer owner. */
static int
wal_fence_check(struct wal *w)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" WAL_FENCE_NAME, w->dir);
	uint64_t owner = 0;
	/* Opened per check, not held: a shard costs one descriptor (its segment), so a
	 * store of 1000 shards fits the default limit of 1024. */
	int fd = env.open(path, O_RDONLY, 0);
	int rc = fd >= 0 ? wal_fence_get(fd, path, &owner) : wal_sys(errno, "open of", path, 0);
	if (fd >= 0)
		env.close(fd);
	if (rc == 0 && owner <= w->epoch)
		return 0;
	if (rc == 0)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: a newer owner (epoch %" PRIu64
				") took it over from this writer (epoch %" PRIu64 "); appends in flight "
				"have an unknown outcome and no later append is accepted",
				w->dir, owner, w->epoch);
	/* An unreadable fence cannot prove ownership: do not acknowledge. That is an IO
	 * failure (the WAL turns read-only until reopened), not proof of a newer owner. */
	char why[WAL_MSG_MAX];
	snprintf(why, sizeof(why), "%s", diag_last());
	return diag_set(rc == STRATA_ECORRUPT ? STRATA_ECORRUPT : STRATA_EIO, "wal: %s: cannot confirm "
			"ownership (%s); appends in flight have an unknown outcome", w->dir, why);
}

int
wal_fence_read(const char *dir, uint64_t *epoch)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" WAL_FENCE_NAME, dir);
	*epoch = 0;
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return wal_sys(errno, "open of", path, 0);
	int rc = wal_fence_get(fd, path, epoch);
	env.close(fd);
	return rc;
}

/** Become the owner of epoch: write it into the fence (creating it) unless a newer
 *  owner is there already. */
static int
wal_fence_take(struct wal *w, uint64_t epoch)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" WAL_FENCE_NAME, w->dir);
	int created = 0;
	int fd = env.open(path, O_RDWR, 0);
	if (fd < 0 && errno == ENOENT) {
		fd = env.open(path, O_RDWR | O_CREAT, 0644);
		created = 1;
	}
	if (fd < 0)
		return wal_sys(errno, "open of", path, 0);
	uint64_t owner = 0;
	int rc = wal_fence_get(fd, path, &owner);
	if (rc == STRATA_ECORRUPT) {
		diag_log(LOG_LVL_WARN, "%s: rewriting it", diag_last());
		rc = 0;
		owner = 0;
	}
	if (rc == 0 && owner > epoch)
		rc = diag_set(STRATA_EFENCED, "wal: %s is owned by a newer epoch %" PRIu64
			      " than ours (%" PRIu64 ")", w->dir, owner, epoch);
	uint8_t b[WAL_FENCE_BYTES];
	wal_fence_encode(b, epoch);
	if (rc == 0)
		rc = wal_pwrite_all(fd, b, sizeof(b), 0, path);
	if (rc == 0 && w->sync != STRATA_SYNC_NONE && env.fdatasync(fd) != 0)
		rc = wal_sys(errno, "fdatasync of", path, 0);
	if (rc == 0 && created && w->sync != STRATA_SYNC_NONE)
		rc = wal_dir_sync(w->dir);
	env.close(fd);
	if (rc)
		return rc;
	w->epoch = epoch;
	return 0;
}

/* ---- writing ---- */

/** Create the segment for first_seq and write its header. */
static int
wal_segment_create(struct wal *w, uint64_t first_seq, int excl, char *path, int *fdp)
{
	wal_seg_path(w->dir, first_seq, w->epoch, path);
	int fd = env.open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC), 0644);
	if (fd < 0)
		return wal_sys(errno, "create of", path, 0);
	uint8_t h[WAL_SEG_HDR];
	wal_seg_header(h, first_seq);
	int rc = wal_pwrite_all(fd, h, sizeof(h), 0, path);
	if (rc == 0 && w->sync != STRATA_SYNC_NONE)
		rc = wal_dir_sync(w->dir);
	if (rc) {
		env.close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

static int
wal_segs_reserve(struct wal *w, size_t extra)
{
	if (w->cap_segs - w->nsegs >= extra)
		return 0;
	size_t ncap = w->cap_segs ? w->cap_segs : 8;
	while (ncap - w->nsegs < extra)
		ncap *= 2;
	struct wal_seg *ns = env.realloc(w->segs, ncap * sizeof(*ns));
	if (ns == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory tracking segments of %s", w->dir);
	w->segs = ns;
	w->cap_segs = ncap;
	return 0;
}

static int
wal_datasync(int fd, const char *path, uint64_t *nsyncs)
{
	(*nsyncs)++;
	if (env.fdatasync(fd) != 0)
		return wal_sys(errno, "fdatasync of", path, 0);
	return 0;
}

/**
 * Mutex held, no leader, queue not empty: whether the calling waiter should wait
 * (until *dl) before it leads, for the writers the last group carried. Writers that
 * were acknowledged together come back together, but the first of them would
 * otherwise start the next sync alone and the rest would wait a whole sync for the
 * one after: with 4 writers at one row each, groups averaged 2.4.
 *
 * The first waiter to find the queue short arms a deadline: half the last sync's
 * duration, at most group_wait_ns. Waiters defer until as many entries are queued as
 * the last group saw writers (those it carried and those that queued while it
 * synced), or until the deadline. The writer whose entry completes the group then
 * finds it complete and leads at once, on its own thread. Only the waiter that armed
 * the deadline (*armer set) sleeps until it: it leads if no one has by then; the
 * others sleep until a group ends, so that a group that completes costs no timer
 * wake-ups during its sync. (A leader that slept until the last writer's submit
 * signalled it put a wake-up on the critical path of every group. Waiting for the
 * largest recent group instead of the last settled at 3 of 4 writers: the fourth
 * always came one entry late and never raised the target.)
 */
static int
wal_defer(struct wal *w, struct timespec *dl, int *armer)
{
	unsigned want = w->active_writers;
	if (w->sync != STRATA_SYNC_FSYNC || w->group_wait_ns == 0 || want < 2 ||
	    w->q_count >= want || w->closing)
		return 0;
	if (!w->gather_armed) {
		uint64_t wait = w->last_sync_ns / 2;
		if (wait > w->group_wait_ns)
			wait = w->group_wait_ns;
		if (wait < 1000)
			return 0;
		w->gather_dl = mono_deadline(wait);
		w->gather_armed = 1;
		*armer = 1;
	} else {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > w->gather_dl.tv_sec ||
		    (now.tv_sec == w->gather_dl.tv_sec && now.tv_nsec >= w->gather_dl.tv_nsec))
			return 0;
	}
	*dl = w->gather_dl;
	return 1;
}

/** Leader: write the staged bytes, which end at cur_off. */
static int
wal_stg_write(struct wal *w)
{
	if (w->stg.len == 0)
		return 0;
	int rc = wal_pwrite_all(w->cur_fd, w->stg.data, w->stg.len, w->cur_off - w->stg.len,
				w->cur_path);
	buf_reset(&w->stg);
	return rc;
}

/** Leader: close the current segment (synced unless NONE) and start one at first_seq. */
static int
wal_roll(struct wal *w, uint64_t first_seq, uint64_t *nsyncs)
{
	int rc;
	if (w->sync != STRATA_SYNC_NONE) {
		rc = wal_datasync(w->cur_fd, w->cur_path, nsyncs);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&w->mu);
	rc = wal_segs_reserve(w, 1);
	pthread_mutex_unlock(&w->mu);
	if (rc)
		return rc;
	char path[PATH_MAX];
	int fd;
	rc = wal_segment_create(w, first_seq, 1, path, &fd);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->mu);
	while (w->bg_syncing)
		pthread_cond_wait(&w->cond, &w->mu);
	struct wal_seg *cur = &w->segs[w->nsegs - 1];
	cur->last_seq = w->cur_last;
	cur->bytes = w->cur_off;
	w->segs[w->nsegs++] = (struct wal_seg){first_seq, w->epoch, first_seq - 1, WAL_SEG_HDR};
	w->sync_fd = fd;
	pthread_mutex_unlock(&w->mu);
	env.close(w->cur_fd);
	w->cur_fd = fd;
	w->cur_first = first_seq;
	w->cur_last = first_seq - 1;
	w->cur_off = WAL_SEG_HDR;
	memcpy(w->cur_path, path, sizeof(w->cur_path));
	return 0;
}

/* ---- the descriptor budget ---- */

static void wal_sync_written_locked(struct wal *w);

struct wal_fdcache {
	/** Guards the list and the count; taken before any WAL's mu, never after. */
	pthread_mutex_t mu;
	/** Most segment descriptors open at once, and how many are. */
	unsigned max, open;
	/** Listed WALs, most recently used first. */
	struct wal *head, *tail;
	/** Descriptors closed to make room, and reopened on a later append. */
	uint64_t evictions, reopens;
	/** Evictions that synced an interval-mode segment ahead of its interval. */
	uint64_t early_syncs;
};

int
wal_fdcache_new(unsigned max, struct wal_fdcache **out)
{
	*out = NULL;
	struct wal_fdcache *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory");
	pthread_mutex_init(&c->mu, NULL);
	c->max = max ? max : 1;
	*out = c;
	return 0;
}

void
wal_fdcache_delete(struct wal_fdcache *c)
{
	if (c == NULL)
		return;
	pthread_mutex_destroy(&c->mu);
	env.free(c);
}

void
wal_fdcache_stats(struct wal_fdcache *c, unsigned *open, uint64_t *evictions, uint64_t *reopens)
{
	pthread_mutex_lock(&c->mu);
	if (open)
		*open = c->open;
	if (evictions)
		*evictions = c->evictions;
	if (reopens)
		*reopens = c->reopens;
	pthread_mutex_unlock(&c->mu);
}

/** c->mu held: take w out of the list. */
static void
wal_fdc_unlink(struct wal_fdcache *c, struct wal *w)
{
	if (w->fdc_prev != NULL)
		w->fdc_prev->fdc_next = w->fdc_next;
	else
		c->head = w->fdc_next;
	if (w->fdc_next != NULL)
		w->fdc_next->fdc_prev = w->fdc_prev;
	else
		c->tail = w->fdc_prev;
	w->fdc_prev = w->fdc_next = NULL;
}

/** c->mu held: put w first. */
static void
wal_fdc_push(struct wal_fdcache *c, struct wal *w)
{
	w->fdc_prev = NULL;
	w->fdc_next = c->head;
	if (c->head != NULL)
		c->head->fdc_prev = w;
	c->head = w;
	if (c->tail == NULL)
		c->tail = w;
}

/**
 * Leader (or wal_start), no WAL mutex held: w's segment descriptor is (re)opened or
 * used. Mark it most recently used; while the budget is exceeded, close the least
 * recently used idle WAL's descriptor: one with no leader, no background sync and
 * nothing written but unsynced (sync = interval) — its next append reopens it. When
 * every other one holds unsynced bytes, the least recently used is synced first.
 */
static void
wal_fdc_use(struct wal *w, int opened)
{
	struct wal_fdcache *c = w->fdc;
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	if (w->fdc_listed)
		wal_fdc_unlink(c, w);
	else if (opened)
		c->open++;
	w->fdc_listed = 1;
	wal_fdc_push(c, w);
	for (struct wal *v = c->tail; v != NULL && c->open > c->max;) {
		struct wal *prev = v->fdc_prev;
		if (v != w && pthread_mutex_trylock(&v->mu) == 0) {
			int idle = !v->leader && !v->bg_syncing && !v->closing && v->cur_fd >= 0 &&
				   (v->sync != STRATA_SYNC_INTERVAL || v->written_off <= v->synced_off);
			if (idle) {
				env.close(v->cur_fd);
				v->cur_fd = v->sync_fd = -1;
				wal_fdc_unlink(c, v);
				v->fdc_listed = 0;
				c->open--;
				c->evictions++;
			}
			pthread_mutex_unlock(&v->mu);
		}
		v = prev;
	}
	/* Every other WAL holds unsynced bytes (sync = interval, appends faster than the
	 * interval): sync the least recently used one now, a little ahead of its interval,
	 * rather than go past the budget and the process's descriptor limit. */
	for (struct wal *v = c->tail; v != NULL && c->open > c->max;) {
		struct wal *prev = v->fdc_prev;
		if (v != w && pthread_mutex_trylock(&v->mu) == 0) {
			if (!v->leader && !v->bg_syncing && !v->closing && v->cur_fd >= 0 &&
			    v->sync == STRATA_SYNC_INTERVAL && v->written_off > v->synced_off) {
				wal_sync_written_locked(v); /* drops v->mu while it syncs */
				if (!v->leader && !v->bg_syncing && !v->closing && v->cur_fd >= 0 &&
				    v->written_off <= v->synced_off) {
					env.close(v->cur_fd);
					v->cur_fd = v->sync_fd = -1;
					wal_fdc_unlink(c, v);
					v->fdc_listed = 0;
					c->open--;
					c->evictions++;
					c->early_syncs++;
				}
			}
			pthread_mutex_unlock(&v->mu);
		}
		v = prev;
	}
	pthread_mutex_unlock(&c->mu);
}

/** w's descriptor is closed for good (wal_free): leave the budget. */
static void
wal_fdc_drop(struct wal *w)
{
	struct wal_fdcache *c = w->fdc;
	if (c == NULL || !w->fdc_listed)
		return;
	pthread_mutex_lock(&c->mu);
	wal_fdc_unlink(c, w);
	w->fdc_listed = 0;
	c->open--;
	pthread_mutex_unlock(&c->mu);
}

/** Leader: reopen the current segment if the budget closed its descriptor. */
static int
wal_fdc_reopen(struct wal *w)
{
	if (w->cur_fd >= 0) {
		wal_fdc_use(w, 0);
		return 0;
	}
	int fd = env.open(w->cur_path, O_WRONLY, 0);
	if (fd < 0)
		return wal_sys(errno, "reopen of", w->cur_path, 0);
	pthread_mutex_lock(&w->mu);
	w->cur_fd = w->sync_fd = fd;
	pthread_mutex_unlock(&w->mu);
	if (w->fdc != NULL) {
		pthread_mutex_lock(&w->fdc->mu);
		w->fdc->reopens++;
		pthread_mutex_unlock(&w->fdc->mu);
	}
	wal_fdc_use(w, 1);
	return 0;
}

/** Leader, outside the mutex: write a batch at the segment tail and sync it. */
static int
wal_flush(struct wal *w, struct wal_entry *head, uint64_t *nsyncs)
{
	int rc;
	assert(w->stg.len == 0);
	if ((rc = wal_fdc_reopen(w)) != 0)
		return rc;
	for (struct wal_entry *e = head; e != NULL; e = e->next) {
		if (w->cur_last >= w->cur_first && w->cur_off + e->len > w->segment_bytes) {
			rc = wal_stg_write(w);
			if (rc == 0)
				rc = wal_roll(w, e->first_seq, nsyncs);
			if (rc)
				return rc;
		}
		if (w->stg.len + e->len > WAL_COALESCE_BYTES) {
			rc = wal_stg_write(w);
			if (rc)
				return rc;
		}
		if (e->len < WAL_COALESCE_BYTES && buf_append(&w->stg, e->data, e->len) == 0) {
			w->cur_off += e->len;
		} else {
			rc = wal_stg_write(w);
			if (rc == 0)
				rc = wal_pwrite_all(w->cur_fd, e->data, e->len, w->cur_off, w->cur_path);
			if (rc)
				return rc;
			w->cur_off += e->len;
		}
		w->cur_last = e->last_seq;
	}
	rc = wal_stg_write(w);
	if (rc)
		return rc;
	if (env_point(ENV_POINT_WAL_BEFORE_SYNC, w) != 0)
		return diag_set(STRATA_EINJECTED, "wal: failure injected at wal.before_sync in %s",
				w->cur_path);
	if (w->sync == STRATA_SYNC_FSYNC) {
		uint64_t t0 = env.mono_ns();
		if ((rc = wal_datasync(w->cur_fd, w->cur_path, nsyncs)) != 0)
			return rc;
		w->last_sync_ns = env.mono_ns() - t0; /* read by the next leader, under mu */
		ratelimit_observe(w->observe, w->last_sync_ns);
	}
	/* Written (and synced): acknowledge only while no newer owner has fenced us. */
	if (env_point(ENV_POINT_WAL_BEFORE_ACK, w) != 0)
		return diag_set(STRATA_EINJECTED, "wal: failure injected at wal.before_ack in %s",
				w->cur_path);
	return wal_fence_check(w);
}

static int wal_store_flush(struct wal *w, struct wal_entry *head, uint64_t *nputs);

/** Mutex held: turn the WAL terminal: read-only after a failed write or sync
 *  (STRATA_EREADONLY), or fenced by a newer owner (STRATA_EFENCED). */
static void
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

static void
wal_entries_free(struct wal_entry *e)
{
	while (e != NULL) {
		struct wal_entry *next = e->next;
		env.free(e);
		e = next;
	}
}

/**
 * Mutex held, no leader, not failed, queue not empty: take every queued entry,
 * write and sync it outside the mutex, publish the outcome, wake the waiters.
 * Returns with the mutex held: 0, or the code of the failure (diag set).
 */
static int
wal_lead(struct wal *w)
{
	assert(!w->leader && !w->failed && w->q_head != NULL);
	w->leader = 1;
	w->gather_armed = 0;
	struct wal_entry *head = w->q_head;
	uint64_t end = w->submitted_off;
	w->flushing = w->q_count;
	w->q_head = w->q_tail = NULL;
	w->q_count = 0;
	pthread_mutex_unlock(&w->mu);

	uint64_t nsyncs = 0;
	int rc = w->os != NULL ? wal_store_flush(w, head, &nsyncs) : wal_flush(w, head, &nsyncs);
	char why[WAL_MSG_MAX];
	if (rc)
		snprintf(why, sizeof(why), "%s", diag_last());
	wal_entries_free(head);

	pthread_mutex_lock(&w->mu);
	w->leader = 0;
	w->syncs += nsyncs;
	w->active_writers = w->flushing + w->q_count; /* carried, and arrived meanwhile */
	if (w->os == NULL) {
		struct wal_seg *cur = &w->segs[w->nsegs - 1];
		cur->last_seq = w->cur_last;
		cur->bytes = w->cur_off;
	}
	if (rc == 0) {
		w->written_off = end;
		atomic_store_explicit(&w->ack_off, end, memory_order_release);
		if (w->sync == STRATA_SYNC_FSYNC || w->os != NULL)
			w->synced_off = end;
	} else {
		wal_set_failed(w, rc == STRATA_EFENCED ? STRATA_EFENCED : STRATA_EREADONLY, why);
	}
	pthread_cond_broadcast(&w->cond);
	return rc;
}

/** The STRATA_SYNC_INTERVAL thread: fdatasync the current segment when written to. */
/** mu held: fdatasync what is written and not yet synced (STRATA_SYNC_INTERVAL's
 *  background sync), dropping mu around the call. */
static void
wal_sync_written_locked(struct wal *w)
{
	/* One sync at a time: the budget's early sync and the interval's may meet here, and
	 * the budget closes the descriptor once the first ends. */
	while (w->bg_syncing)
		pthread_cond_wait(&w->cond, &w->mu);
	if (w->failed || w->written_off <= w->synced_off || w->sync_fd < 0)
		return;
	uint64_t target = w->written_off;
	int fd = w->sync_fd;
	w->bg_syncing = 1;
	pthread_mutex_unlock(&w->mu);
	int r = env.fdatasync(fd);
	int err = errno;
	pthread_mutex_lock(&w->mu);
	w->bg_syncing = 0;
	w->syncs++;
	if (r == 0) {
		if (target > w->synced_off)
			w->synced_off = target;
	} else {
		char why[WAL_MSG_MAX], path[PATH_MAX];
		wal_seg_path(w->dir, w->segs[w->nsegs - 1].first_seq, w->segs[w->nsegs - 1].epoch, path);
		wal_sys(err, "background fdatasync of", path, 0);
		snprintf(why, sizeof(why), "%s", diag_last());
		wal_set_failed(w, STRATA_EREADONLY, why);
	}
	pthread_cond_broadcast(&w->cond);
}

void
wal_sync_written(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	if (w->started)
		wal_sync_written_locked(w);
	pthread_mutex_unlock(&w->mu);
}

static void *
wal_bg_main(void *arg)
{
	struct wal *w = arg;
	env_enter(w->env_ops);
	pthread_mutex_lock(&w->mu);
	while (!w->bg_stop) {
		struct timespec dl = mono_deadline((uint64_t)w->interval_ms * 1000000ull);
		while (!w->bg_stop && pthread_cond_timedwait(&w->bg_cond, &w->mu, &dl) != ETIMEDOUT)
			;
		if (w->bg_stop)
			break;
		wal_sync_written_locked(w);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- the WAL on an object store (wal = store) ---- */

/** Bytes of a WAL object's header; a marker (fence, void) is only that. */
#define WAL_OBJ_HDR 48u
/** Format version of WAL objects. */
#define WAL_OBJ_VERSION 1u
/** Walks of the listing wal_start makes before giving up on a WAL that keeps moving. */
#define WAL_STORE_ATTEMPTS 64
/** Objects a fence chases past (an older writer appending at the tail) per walk. */
#define WAL_STORE_CHASE 4096
/** Name (under the prefix) of the epoch object: the newest owner's epoch. */
#define WAL_STORE_EPOCH "epoch"
/** A writer reads the epoch object at least this often (ns) and every this many commits. */
#define WAL_STORE_EPOCH_CHECK_NS (20u * 1000u * 1000u)
#define WAL_STORE_EPOCH_CHECK_COMMITS 32u

static const char wal_obj_magic[8] = {'S', 'T', 'R', 'W', 'A', 'L', 'O', 'B'};

/** Key of the object at position first. */
static void
wal_obj_key(const struct wal *w, uint64_t first, char *out, size_t cap)
{
	snprintf(out, cap, "%s%020" PRIu64, w->prefix, first);
}

static void
wal_obj_header(uint8_t *h, int kind, uint64_t epoch, uint64_t first, uint64_t last, uint32_t entries)
{
	memcpy(h, wal_obj_magic, 8);
	enc_u32(h + 8, WAL_OBJ_VERSION);
	enc_u32(h + 12, (uint32_t)kind);
	enc_u64(h + 16, epoch);
	enc_u64(h + 24, first);
	enc_u64(h + 32, last);
	enc_u32(h + 40, entries);
	enc_u32(h + 44, crc32c(0, h, 44));
}

static const char *
wal_obj_kind_name(int kind)
{
	return kind == WAL_OBJ_BATCH ? "batch" : kind == WAL_OBJ_FENCE ? "fence" : "void";
}

/** Check a WAL object's header (len bytes of it at least are in d); fill o. */
static int
wal_obj_check_header(const struct wal *w, const char *key, uint64_t first, const uint8_t *d, size_t len,
		     struct wal_obj *o, uint64_t *epoch, uint32_t *entries)
{
	const char *why = NULL;
	if (len < WAL_OBJ_HDR)
		why = "shorter than its header";
	else if (memcmp(d, wal_obj_magic, 8) != 0)
		why = "bad magic";
	else if (dec_u32(d + 8) != WAL_OBJ_VERSION)
		return diag_set(STRATA_EVERSION, "wal: object %s (%s) has format version %u; this build "
				"reads version %u", key, w->os->name, dec_u32(d + 8), WAL_OBJ_VERSION);
	else if (crc32c(0, d, 44) != dec_u32(d + 44))
		why = "header checksum mismatch";
	else if (dec_u64(d + 24) != first)
		why = "header names another position than its key";
	else if (dec_u64(d + 32) < first || dec_u32(d + 12) > WAL_OBJ_VOID)
		why = "bad position range or kind";
	if (why != NULL)
		return diag_set(STRATA_ECORRUPT, "wal: corrupt object %s (%s): %s", key, w->os->name, why);
	o->first_seq = first;
	o->last_seq = dec_u64(d + 32);
	o->kind = (int)dec_u32(d + 12);
	*epoch = dec_u64(d + 16);
	*entries = dec_u32(d + 40);
	return 0;
}

/** Verify a whole WAL object and replay its entries above replay_after through cb. */
static int
wal_obj_replay(struct wal *w, const char *key, uint64_t first, const uint8_t *d, size_t len,
	       uint64_t replay_after, wal_replay_cb cb, void *ctx, struct wal_obj *o, uint64_t *epoch)
{
	uint32_t nentries;
	int rc = wal_obj_check_header(w, key, first, d, len, o, epoch, &nentries);
	if (rc)
		return rc;
	o->bytes = len;
	if (o->kind != WAL_OBJ_BATCH) {
		if (len != WAL_OBJ_HDR || nentries != 0)
			return diag_set(STRATA_ECORRUPT, "wal: corrupt object %s (%s): a %s marker of %zu "
					"bytes", key, w->os->name, wal_obj_kind_name(o->kind), len);
		return 0;
	}
	strata_row *rows = NULL;
	size_t rows_cap = 0, off = WAL_OBJ_HDR;
	uint64_t expect = first;
	const char *why = NULL;
	for (uint32_t k = 0; k < nentries && why == NULL; k++) {
		const uint8_t *h = d + off;
		if (len - off < WAL_ENTRY_HDR) {
			why = "incomplete entry header";
			break;
		}
		uint32_t plen = dec_u32(h + 4), nrows = dec_u32(h + 16);
		uint64_t fseq = dec_u64(h + 8);
		if (crc32c(0, h + 4, WAL_ENTRY_HDR - 4) != dec_u32(h))
			why = "entry header checksum mismatch";
		else if (plen > w->max_entry || plen > len - off - WAL_ENTRY_HDR)
			why = "entry payload past the end of the object";
		else if (crc32c(0, h + WAL_ENTRY_HDR, plen) != dec_u32(h + 20))
			why = "entry payload checksum mismatch";
		else if (nrows == 0 || nrows > plen / 2 || fseq != expect || fseq > UINT64_MAX - nrows)
			why = "entry positions do not follow the previous entry";
		if (why != NULL)
			break;
		if (nrows > rows_cap) {
			strata_row *nr = env.realloc(rows, (size_t)nrows * sizeof(*rows));
			if (nr == NULL) {
				env.free(rows);
				return diag_set(STRATA_ENOMEM, "wal: out of memory replaying %s", key);
			}
			rows = nr;
			rows_cap = nrows;
		}
		struct rd in;
		rd_init(&in, h + WAL_ENTRY_HDR, plen);
		for (uint32_t i = 0; i < nrows && !in.err; i++) {
			const uint8_t *kb = rd_bytes(&in, 1);
			if (kb == NULL || (*kb != STRATA_ROW_PUT && *kb != STRATA_ROW_DELETE)) {
				in.err = 1;
				break;
			}
			uint64_t klen = rd_varint(&in), vlen = rd_varint(&in);
			if (in.err || klen > rd_left(&in) || vlen > rd_left(&in) - klen ||
			    (*kb == STRATA_ROW_DELETE && vlen > 0)) {
				in.err = 1;
				break;
			}
			rows[i].kind = *kb;
			rows[i].key_len = (size_t)klen;
			rows[i].key = rd_bytes(&in, (size_t)klen);
			rows[i].value_len = (size_t)vlen;
			rows[i].value = rd_bytes(&in, (size_t)vlen);
		}
		if (in.err || rd_left(&in) != 0) {
			why = "entry rows do not match its payload length";
			break;
		}
		uint64_t last = fseq + nrows - 1;
		if (cb != NULL && last > replay_after) {
			int cr = cb(ctx, fseq, rows, nrows);
			if (cr != 0) {
				env.free(rows);
				return cr < 0 ? cr : diag_set(STRATA_EINVAL, "wal: replay stopped at position "
							      "%" PRIu64 " of %s", fseq, key);
			}
		}
		expect = last + 1;
		off += WAL_ENTRY_HDR + plen;
	}
	env.free(rows);
	if (why == NULL && (off != len || expect != o->last_seq + 1 || nentries == 0))
		why = "its entries do not end where its header says";
	if (why != NULL)
		return diag_set(STRATA_ECORRUPT, "wal: corrupt object %s (%s) at offset %zu: %s", key,
				w->os->name, off, why);
	return 0;
}

/** One key of a listing of the WAL's prefix. */
struct wal_listed {
	/** Position named by the key. */
	uint64_t first;
	/** Object size. */
	uint64_t size;
};

/** A listing of the WAL's prefix being collected. */
struct wal_listing {
	/** The WAL. */
	struct wal *w;
	/** Keys found, in position order. */
	struct wal_listed *v;
	/** Entries used and allocated. */
	size_t n, cap;
};

static int
wal_listing_cb(void *ctx, const char *key, uint64_t size)
{
	struct wal_listing *l = ctx;
	const char *rel = key + strlen(l->w->prefix);
	if (strcmp(rel, WAL_STORE_EPOCH) == 0)
		return 0;
	uint64_t first = 0;
	size_t i = 0;
	for (; rel[i] >= '0' && rel[i] <= '9' && i < 20; i++)
		first = first * 10 + (uint64_t)(rel[i] - '0');
	if (i != 20 || rel[i] != '\0' || first == 0) {
		diag_log(LOG_LVL_WARN, "wal: %s (%s) is not a WAL object name: left alone", key, l->w->os->name);
		return 0;
	}
	if (l->n > 0 && l->v[l->n - 1].first >= first)
		return diag_set(STRATA_EIO, "wal: the listing of %s (%s) is not in key order at %s",
				l->w->prefix, l->w->os->name, key);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct wal_listed *nv = env.realloc(l->v, cap * sizeof(*nv));
		if (nv == NULL)
			return diag_set(STRATA_ENOMEM, "wal: out of memory listing %s", l->w->prefix);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = (struct wal_listed){first, size};
	return 0;
}

/** Index of the known object at first, or -1. */
static ssize_t
wal_obj_find(const struct wal *w, uint64_t first)
{
	size_t lo = 0, hi = w->nobjs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->objs[mid].first_seq < first)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < w->nobjs && w->objs[lo].first_seq == first ? (ssize_t)lo : -1;
}

/** mu held or no other thread yet: add o to the known objects, in position order. */
static int
wal_obj_insert(struct wal *w, const struct wal_obj *o)
{
	if (w->nobjs == w->cap_objs) {
		size_t cap = w->cap_objs ? w->cap_objs * 2 : 64;
		struct wal_obj *nv = env.realloc(w->objs, cap * sizeof(*nv));
		if (nv == NULL)
			return diag_set(STRATA_ENOMEM, "wal: out of memory tracking objects of %s", w->prefix);
		w->objs = nv;
		w->cap_objs = cap;
	}
	size_t i = w->nobjs;
	while (i > 0 && w->objs[i - 1].first_seq > o->first_seq)
		i--;
	memmove(w->objs + i + 1, w->objs + i, (w->nobjs - i) * sizeof(*w->objs));
	w->objs[i] = *o;
	w->nobjs++;
	return 0;
}

/** The first gap a walk met: positions above the cursor no object covers. */
struct wal_gap {
	/** First and last missing position (first == 0: no gap). */
	uint64_t first, last;
};

/**
 * Walk the objects of the WAL in position order from the cursor: read and replay through
 * cb every object above it that w->objs does not hold yet, and add it there. Objects
 * wholly at or below the cursor are not read (an owner reads the header of a batch to
 * queue it for deletion: a release the last writer did not finish). Positions above the
 * cursor no object covers are a gap: the walk goes on past it (the later rows are
 * replayed, not lost) and reports the first one; only a void object written by
 * put-if-absent at its first position closes it (wal_store_start), so the cursor can
 * never move past a gap that a late object could still fill. An object that starts at
 * or below a position already covered (other than the one straddling the cursor) is
 * void: it is not replayed (logged).
 */
static int
wal_store_walk(struct wal *w, wal_replay_cb cb, void *ctx, int owner, struct wal_gap *gap)
{
	gap->first = gap->last = 0;
	struct wal_listing l = {.w = w};
	int rc = objstore_list(w->os, w->prefix, wal_listing_cb, &l);
	uint64_t c = w->replay_after, expect = c + 1;
	struct buf b = {0};
	char key[512];
	uint64_t gaps = 0;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		uint64_t first = l.v[i].first;
		wal_obj_key(w, first, key, sizeof(key));
		ssize_t k = wal_obj_find(w, first);
		struct wal_obj o;
		if (k >= 0) {
			o = w->objs[k];
		} else if (i + 1 < l.n && l.v[i + 1].first <= c + 1) {
			/* Wholly at or below the cursor: a kept marker, or a batch to collect. */
			if (!owner || l.v[i].size == WAL_OBJ_HDR)
				continue;
			uint8_t h[WAL_OBJ_HDR];
			size_t got = 0;
			uint64_t epoch;
			uint32_t ne;
			rc = objstore_get_range(w->os, key, 0, sizeof(h), h, &got);
			if (rc == STRATA_NOTFOUND) {
				rc = 0; /* a release deleted it meanwhile */
				continue;
			}
			if (rc == 0)
				rc = wal_obj_check_header(w, key, first, h, got, &o, &epoch, &ne);
			if (rc == 0 && o.last_seq <= c && o.kind == WAL_OBJ_BATCH) {
				w->stale_collected++;
				if (w->reaper != NULL)
					reaper_add(w->reaper, key, l.v[i].size);
				else if (objstore_del(w->os, key) != 0)
					diag_log(LOG_LVL_WARN, "%s", diag_last());
			}
			continue;
		} else {
			buf_reset(&b);
			rc = objstore_get(w->os, key, &b);
			if (rc == STRATA_NOTFOUND) {
				rc = 0;
				continue;
			}
			uint64_t epoch = 0;
			uint32_t ne;
			if (rc == 0)
				rc = wal_obj_check_header(w, key, first, b.data, b.len, &o, &epoch, &ne);
			if (rc)
				break;
			if (o.last_seq <= c)
				continue; /* the last object, wholly below the cursor */
			if (first < expect && expect > c + 1) {
				diag_log(LOG_LVL_WARN, "wal: object %s (%s, positions %" PRIu64 "..%" PRIu64
					 ") overlaps positions already covered up to %" PRIu64 ": void, not "
					 "replayed", key, w->os->name, first, o.last_seq, expect - 1);
				continue;
			}
			rc = wal_obj_replay(w, key, first, b.data, b.len, c, o.kind == WAL_OBJ_BATCH ? cb : NULL,
					    ctx, &o, &epoch);
			if (rc == 0)
				rc = wal_obj_insert(w, &o);
			if (rc)
				break;
		}
		if (o.last_seq <= c || (first < expect && expect > c + 1))
			continue;
		if (first > expect) {
			gaps++;
			if (gap->first == 0) {
				gap->first = expect;
				gap->last = first - 1;
			}
			diag_log(LOG_LVL_WARN, "wal: %s (%s): no object covers positions %" PRIu64 "..%" PRIu64
				 " (a gap); the rows after it are replayed and the gap is closed before "
				 "the cursor may pass it", w->prefix, w->os->name, expect, first - 1);
		}
		expect = o.last_seq + 1;
	}
	buf_destroy(&b);
	env.free(l.v);
	if (rc)
		return rc;
	w->covered = expect - 1;
	w->gaps = gaps;
	return 0;
}

/** The epoch the epoch object names (0 when there is none). */
static int
wal_store_epoch_read(struct wal *w, uint64_t *epoch)
{
	char key[512];
	snprintf(key, sizeof(key), "%s" WAL_STORE_EPOCH, w->prefix);
	uint8_t b[WAL_FENCE_BYTES];
	size_t got = 0;
	*epoch = 0;
	int rc = objstore_get_range(w->os, key, 0, sizeof(b), b, &got);
	if (rc == STRATA_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (got != sizeof(b) || memcmp(b, wal_fence_magic, 8) != 0 || crc32c(0, b, 16) != dec_u32(b + 16))
		return diag_set(STRATA_ECORRUPT, "wal: the epoch object %s (%s) is damaged", key, w->os->name);
	*epoch = dec_u64(b + 8);
	return 0;
}

/**
 * Leader, after a batch's put: now and then, read the epoch object. A newer owner writes
 * it before it walks the WAL to fence it, so an older writer that still appends stops
 * within a few commits and the new owner's fence, chasing the tail, gets ahead of it.
 * (Correctness rests on the fence: a put that finds its position taken; this is what
 * makes the chase end.) The batch just put is then not acknowledged: its outcome is
 * unknown, the new owner replays it or not.
 */
static int
wal_store_epoch_check(struct wal *w)
{
	uint64_t now = env.mono_ns();
	if (++w->commits_unchecked < WAL_STORE_EPOCH_CHECK_COMMITS &&
	    now - w->epoch_checked_ns < WAL_STORE_EPOCH_CHECK_NS)
		return 0;
	w->commits_unchecked = 0;
	w->epoch_checked_ns = now;
	uint64_t owner = 0;
	int rc = wal_store_epoch_read(w, &owner);
	if (rc)
		return rc;
	if (owner > w->epoch)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: a newer owner (epoch %" PRIu64 ") is taking "
				"the shard over from this writer (epoch %" PRIu64 "); appends in flight have an "
				"unknown outcome and no later append is accepted", w->prefix, owner, w->epoch);
	return 0;
}

/** wal_start: write epoch into the epoch object, unless it names a newer owner. */
static int
wal_store_epoch_take(struct wal *w, uint64_t epoch)
{
	uint64_t owner = 0;
	int rc = wal_store_epoch_read(w, &owner);
	if (rc == STRATA_ECORRUPT) {
		diag_log(LOG_LVL_WARN, "%s: rewriting it", diag_last());
		rc = 0;
	}
	if (rc)
		return rc;
	if (owner > epoch)
		return diag_set(STRATA_EFENCED, "wal: %s is owned by a newer epoch %" PRIu64 " than ours (%" PRIu64
				")", w->prefix, owner, epoch);
	char key[512];
	snprintf(key, sizeof(key), "%s" WAL_STORE_EPOCH, w->prefix);
	uint8_t b[WAL_FENCE_BYTES];
	wal_fence_encode(b, epoch);
	return objstore_put(w->os, key, b, sizeof(b));
}

/**
 * Leader: put one object by put-if-absent. A position already taken, or a put whose
 * outcome is unknown, is read back: our own bytes there are our write (a retry that
 * landed twice); another object there means a newer owner fenced us (STRATA_EFENCED).
 */
static int
wal_store_put(struct wal *w, uint64_t first, const void *data, size_t len, uint64_t *nputs)
{
	char key[512];
	wal_obj_key(w, first, key, sizeof(key));
	(*nputs)++;
	int rc = objstore_put_if_absent(w->os, key, data, len);
	if (rc == 0)
		return 0;
	int indeterminate = objstore_last_indeterminate();
	if (rc != STRATA_EEXIST && !indeterminate)
		return rc;
	char why[WAL_MSG_MAX];
	snprintf(why, sizeof(why), "%s", diag_last());
	struct buf b = {0};
	int g = objstore_get(w->os, key, &b);
	uint64_t other = b.len >= WAL_OBJ_HDR && memcmp(b.data, wal_obj_magic, 8) == 0 ? dec_u64(b.data + 16)
										    : 0;
	int same = g == 0 && b.len == len && memcmp(b.data, data, len) == 0;
	buf_destroy(&b);
	if (same)
		return 0;
	if (g == 0)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: position %" PRIu64 " is taken by an object "
				"of epoch %" PRIu64 " (this writer's epoch %" PRIu64 "): a newer owner took the "
				"shard over; appends in flight have an unknown outcome and no later append is "
				"accepted", w->prefix, first, other, w->epoch);
	return diag_set(STRATA_EIO, "wal: %s (%s): cannot confirm the put at position %" PRIu64 " (%s)",
			w->prefix, w->os->name, first, why);
}

/** Leader, outside the mutex: write a batch as one object at its first position. */
static int
wal_store_flush(struct wal *w, struct wal_entry *head, uint64_t *nputs)
{
	uint64_t first = head->first_seq, last = 0;
	uint32_t n = 0;
	buf_reset(&w->stg);
	size_t len = WAL_OBJ_HDR;
	for (struct wal_entry *e = head; e != NULL; e = e->next) {
		len += e->len;
		last = e->last_seq;
		n++;
	}
	int rc = buf_reserve(&w->stg, len);
	if (rc)
		return diag_set(STRATA_ENOMEM, "wal: out of memory for an object of %zu bytes", len);
	uint8_t h[WAL_OBJ_HDR];
	wal_obj_header(h, WAL_OBJ_BATCH, w->epoch, first, last, n);
	buf_append(&w->stg, h, sizeof(h));
	for (struct wal_entry *e = head; e != NULL; e = e->next)
		buf_append(&w->stg, e->data, e->len);
	if (env_point(ENV_POINT_WAL_BEFORE_SYNC, w) != 0) {
		buf_reset(&w->stg);
		return diag_set(STRATA_EINJECTED, "wal: failure injected at wal.before_sync in %s", w->prefix);
	}
	rc = wal_store_put(w, first, w->stg.data, w->stg.len, nputs);
	buf_reset(&w->stg);
	if (rc == 0)
		rc = wal_store_epoch_check(w);
	if (rc)
		return rc;
	struct wal_obj o = {first, last, len, WAL_OBJ_BATCH};
	pthread_mutex_lock(&w->mu);
	rc = wal_obj_insert(w, &o);
	pthread_mutex_unlock(&w->mu);
	if (rc)
		return rc;
	w->cur_last = last;
	return 0;
}

/** Put a marker (fence or void) covering first..last: 0, STRATA_EEXIST, or a failure. */
static int
wal_store_marker(struct wal *w, int kind, uint64_t first, uint64_t last)
{
	uint8_t h[WAL_OBJ_HDR];
	wal_obj_header(h, kind, w->epoch, first, last, 0);
	char key[512];
	wal_obj_key(w, first, key, sizeof(key));
	w->syncs++;
	int rc = objstore_put_if_absent(w->os, key, h, sizeof(h));
	if (rc == 0) {
		struct wal_obj o = {first, last, WAL_OBJ_HDR, kind};
		return wal_obj_insert(w, &o);
	}
	if (rc == STRATA_EEXIST || objstore_last_indeterminate()) {
		diag_log(LOG_LVL_DEBUG, "wal: %s: the %s at position %" PRIu64 " did not take (%s)", w->prefix,
			 wal_obj_kind_name(kind), first, diag_last());
		return STRATA_EEXIST;
	}
	return rc;
}

/** Read the object at position first (the one that took the position a fence wanted),
 *  replay it through the start's callback and track it; its epoch into *epoch. */
static int
wal_store_read_at(struct wal *w, uint64_t first, struct wal_obj *o, uint64_t *epoch)
{
	char key[512];
	wal_obj_key(w, first, key, sizeof(key));
	struct buf b = {0};
	int rc = objstore_get(w->os, key, &b);
	if (rc == 0)
		rc = wal_obj_replay(w, key, first, b.data, b.len, w->replay_after, w->cb, w->cb_ctx, o, epoch);
	buf_destroy(&b);
	if (rc == 0 && wal_obj_find(w, first) < 0)
		rc = wal_obj_insert(w, o);
	return rc;
}

/**
 * wal_start of a WAL on the store: walk (replaying what appeared since the scan), close
 * every gap with a void object, then put a fence at the next position. A fence that
 * finds its position taken (the older writer still appends) reads and replays the object
 * there and tries the position after it, chasing the tail object by object; an object
 * that vanished, or a void that did not take, walks again.
 */
static int
wal_store_start(struct wal *w, uint64_t epoch, uint64_t floor)
{
	w->epoch = epoch;
	int rc = wal_store_epoch_take(w, epoch);
	if (rc)
		return rc;
	for (int attempt = 0;; attempt++) {
		if (attempt == WAL_STORE_ATTEMPTS)
			return diag_set(STRATA_EBUSY, "wal: %s (%s): %d walks and the WAL still moves: another "
					"writer keeps appending", w->prefix, w->os->name, attempt);
		struct wal_gap gap;
		rc = wal_store_walk(w, w->cb, w->cb_ctx, 1, &gap);
		if (rc)
			return rc;
		if (gap.first != 0) {
			rc = wal_store_marker(w, WAL_OBJ_VOID, gap.first, gap.last);
			if (rc == 0) {
				w->gaps_closed++;
				diag_log(LOG_LVL_WARN, "wal: %s (%s): closed the gap at positions %" PRIu64 "..%"
					 PRIu64 " with a void object", w->prefix, w->os->name, gap.first,
					 gap.last);
			}
			if (rc == 0 || rc == STRATA_EEXIST)
				continue;
			return rc;
		}
		uint64_t next = w->covered + 1 > floor ? w->covered + 1 : floor;
		int fenced = 0;
		for (int chase = 0; chase < WAL_STORE_CHASE; chase++) {
			rc = wal_store_marker(w, WAL_OBJ_FENCE, next, next);
			if (rc == 0) {
				fenced = 1;
				break;
			}
			if (rc != STRATA_EEXIST)
				return rc;
			struct wal_obj o;
			uint64_t oe = 0;
			rc = wal_store_read_at(w, next, &o, &oe);
			if (rc == STRATA_NOTFOUND)
				break; /* walk again */
			if (rc)
				return rc;
			if (o.kind == WAL_OBJ_FENCE && oe == epoch) {
				fenced = 1; /* our own put whose answer was lost */
				break;
			}
			next = o.last_seq + 1;
		}
		if (!fenced)
			continue;
		w->next_seq = next + 1;
		w->cur_last = next;
		break;
	}
	w->cb = NULL;
	pthread_mutex_lock(&w->mu);
	w->started = 1;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/** wal_release of a WAL on the store: objects wholly at or below upto go to the reaper
 *  (markers stay: a stalled older writer's put must still find its position taken). */
static int
wal_store_release(struct wal *w, uint64_t upto)
{
	char key[512];
	int rc = 0;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (w->nobjs == 0 || w->objs[0].last_seq > upto) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		struct wal_obj o = w->objs[0];
		memmove(w->objs, w->objs + 1, (w->nobjs - 1) * sizeof(*w->objs));
		w->nobjs--;
		wal_obj_key(w, o.first_seq, key, sizeof(key));
		if (o.kind == WAL_OBJ_BATCH && w->reaper != NULL)
			reaper_add(w->reaper, key, o.bytes);
		pthread_mutex_unlock(&w->mu);
		if (o.kind == WAL_OBJ_BATCH && w->reaper == NULL) {
			int r = objstore_del(w->os, key);
			if (rc == 0)
				rc = r;
		}
	}
	return rc;
}

/** wal = store: refuse a local WAL directory that still holds rows after the cursor (the
 *  shard was written with wal = local: replaying only the store would lose them). */
static int
wal_store_local_check(struct wal *w)
{
	DIR *d = env.opendir(w->dir);
	if (d == NULL)
		return errno == ENOENT ? 0 : diag_sys(errno, "wal: cannot list", w->dir);
	env.closedir(d);
	int n = wal_inspect_dir(w->dir, NULL, 0);
	if (n <= 0)
		return n;
	struct wal_segment_info *infos = env.calloc((size_t)n, sizeof(*infos));
	if (infos == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory checking %s", w->dir);
	int m = wal_inspect_dir(w->dir, infos, n);
	int rc = m < 0 ? m : 0;
	for (int i = 0; rc == 0 && i < m && i < n; i++)
		if (infos[i].last_seq > w->replay_after && infos[i].last_seq >= infos[i].first_seq)
			rc = diag_set(STRATA_EINVAL, "wal: %s holds rows after the cursor (up to position %"
				      PRIu64 " in %s): this shard's WAL is local; open it with wal = local "
				      "(and seal it) before switching to wal = store", w->dir,
				      infos[i].last_seq, infos[i].name);
	env.free(infos);
	return rc;
}

int
wal_store_has_rows(struct objstore *os, const char *prefix, uint64_t replay_after, int *has)
{
	*has = 0;
	struct wal w = {.os = os, .prefix = (char *)prefix};
	struct wal_listing l = {.w = &w};
	int rc = objstore_list(os, prefix, wal_listing_cb, &l);
	for (size_t i = l.n; rc == 0 && i-- > 0;) {
		if (l.v[i].size == WAL_OBJ_HDR)
			continue;
		if (l.v[i].first > replay_after) {
			*has = 1;
			break;
		}
		char key[512];
		wal_obj_key(&w, l.v[i].first, key, sizeof(key));
		uint8_t h[WAL_OBJ_HDR];
		size_t got = 0;
		rc = objstore_get_range(os, key, 0, sizeof(h), h, &got);
		if (rc == 0 && got == sizeof(h) && dec_u64(h + 32) > replay_after)
			*has = 1;
		break;
	}
	env.free(l.v);
	return rc;
}

int
wal_inspect_store(struct objstore *os, const char *prefix, uint64_t replay_after, int verify,
		  wal_object_cb cb, void *ctx, uint64_t *epoch)
{
	*epoch = 0;
	if (os == NULL || prefix == NULL || cb == NULL)
		return diag_set(STRATA_EINVAL, "wal: inspect needs a store, a prefix and a callback");
	/* An inspecting handle: no limit on entries but the format's, no reaper, no owner. */
	struct wal w = {.os = os, .prefix = (char *)prefix, .max_entry = UINT32_MAX};
	struct wal_listing l = {.w = &w};
	int rc = objstore_list(os, prefix, wal_listing_cb, &l);
	if (rc == 0 && wal_store_epoch_read(&w, epoch) != 0) {
		*epoch = 0; /* a damaged epoch object is not the listing's failure: say so and go on */
		diag_log(LOG_LVL_WARN, "%s", diag_last());
	}
	struct buf b = {0};
	int n = 0;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		struct wal_object_info in;
		memset(&in, 0, sizeof(in));
		snprintf(in.name, sizeof(in.name), "%020" PRIu64, l.v[i].first);
		in.bytes = l.v[i].size;
		in.kind = "?";
		in.first_seq = l.v[i].first; /* the key names it; a whole header says the same */
		char key[512];
		wal_obj_key(&w, l.v[i].first, key, sizeof(key));
		size_t got = 0;
		buf_reset(&b);
		int r;
		if (verify) {
			r = objstore_get(os, key, &b);
		} else {
			r = buf_reserve(&b, WAL_OBJ_HDR);
			if (r == 0)
				r = objstore_get_range(os, key, 0, WAL_OBJ_HDR, b.data, &got);
			b.len = got;
		}
		if (r == STRATA_NOTFOUND)
			continue; /* a running node released it since the listing */
		int header_ok = 0;
		if (r == 0) {
			struct wal_obj o;
			uint64_t ep = 0;
			uint32_t ne = 0;
			r = wal_obj_check_header(&w, key, l.v[i].first, b.data, b.len, &o, &ep, &ne);
			if (r == 0) {
				header_ok = 1;
				in.kind = wal_obj_kind_name(o.kind);
				in.epoch = ep;
				in.last_seq = o.last_seq;
				in.entries = ne;
				if (verify)
					r = wal_obj_replay(&w, key, l.v[i].first, b.data, b.len, 0, NULL, NULL, &o,
							   &ep);
			}
		}
		if (r != 0)
			snprintf(in.why, sizeof(in.why), "%s", diag_last());
		/* As wal_store_walk judges it: an object the next one starts at or below
		 * replay_after + 1 from, or one whose header ends at or below replay_after, is
		 * only collected (a damaged header still fails the open); the others are
		 * replayed whole. */
		in.below = (i + 1 < l.n && l.v[i + 1].first <= replay_after + 1) ||
			   (header_ok && in.last_seq <= replay_after);
		in.refused = in.why[0] != '\0' && (!header_ok || !in.below);
		n++;
		rc = cb(ctx, &in);
	}
	buf_destroy(&b);
	env.free(l.v);
	return rc ? rc : n;
}

void
wal_store_stats(struct wal *w, uint64_t *gaps, uint64_t *gaps_closed, uint64_t *stale_collected)
{
	pthread_mutex_lock(&w->mu);
	if (gaps)
		*gaps = w->gaps;
	if (gaps_closed)
		*gaps_closed = w->gaps_closed;
	if (stale_collected)
		*stale_collected = w->stale_collected;
	pthread_mutex_unlock(&w->mu);
}

/* ---- public ---- */

int
wal_encode(struct wal *w, const strata_row *rows, size_t n, struct wal_entry **out)
{
	*out = NULL;
	if (rows == NULL || n == 0)
		return diag_set(STRATA_EINVAL, "wal: submit needs at least one row");
	if (n > UINT32_MAX)
		return diag_set(STRATA_ETOOBIG, "wal: %zu rows in one entry (limit %u)", n, UINT32_MAX);
	uint64_t plen = 0;
	for (size_t i = 0; i < n; i++) {
		const strata_row *r = &rows[i];
		if ((r->key == NULL && r->key_len) || (r->value == NULL && r->value_len))
			return diag_set(STRATA_EINVAL, "wal: row %zu has a NULL key or value", i);
		if ((r->kind != STRATA_ROW_PUT && r->kind != STRATA_ROW_DELETE) ||
		    (r->kind == STRATA_ROW_DELETE && r->value_len > 0))
			return diag_set(STRATA_EINVAL, "wal: row %zu has kind %u with a value of %zu "
					"bytes", i, (unsigned)r->kind, r->value_len);
		if (r->key_len > w->max_entry || r->value_len > w->max_entry)
			return diag_set(STRATA_ETOOBIG, "wal: row %zu exceeds the entry limit %" PRIu64,
					i, w->max_entry);
		plen += 1 + enc_varint_len(r->key_len) + enc_varint_len(r->value_len) + r->key_len +
			r->value_len;
		if (plen > w->max_entry)
			return diag_set(STRATA_ETOOBIG,
					"wal: entry payload exceeds the limit of %" PRIu64 " bytes",
					w->max_entry);
	}
	size_t len = WAL_ENTRY_HDR + (size_t)plen;
	struct wal_entry *e = env.malloc(sizeof(*e) + len);
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory for an entry of %zu bytes", len);
	uint8_t *p = e->data + WAL_ENTRY_HDR;
	for (size_t i = 0; i < n; i++) {
		*p++ = (uint8_t)rows[i].kind;
		p += enc_varint(p, rows[i].key_len);
		p += enc_varint(p, rows[i].value_len);
		if (rows[i].key_len)
			memcpy(p, rows[i].key, rows[i].key_len);
		p += rows[i].key_len;
		if (rows[i].value_len)
			memcpy(p, rows[i].value, rows[i].value_len);
		p += rows[i].value_len;
	}
	assert(p == e->data + len);
	e->next = NULL;
	e->len = len;
	e->nrows = n;
	enc_u32(e->data + 4, (uint32_t)plen);
	enc_u32(e->data + 16, (uint32_t)n);
	enc_u32(e->data + 20, crc32c(0, e->data + WAL_ENTRY_HDR, (size_t)plen));
	*out = e;
	return 0;
}

int
wal_submit_encoded(struct wal *w, struct wal_entry *e, struct wal_ticket *t)
{
	size_t n = e->nrows, len = e->len;
	pthread_mutex_lock(&w->mu);
	int rc = 0;
	if (w->failed)
		rc = diag_set(w->failed, "%s", w->fail_msg);
	else if (!w->started)
		rc = diag_set(STRATA_ECLOSED, "wal: %s is not started (wal_start)", w->dir);
	else if (w->closing)
		rc = diag_set(STRATA_ECLOSED, "wal: %s is closing", w->dir);
	else if (w->next_seq > UINT64_MAX - n)
		rc = diag_set(STRATA_ERANGE, "wal: positions of %s exhausted", w->dir);
	if (rc) {
		pthread_mutex_unlock(&w->mu);
		env.free(e);
		return rc;
	}
	e->first_seq = w->next_seq;
	e->last_seq = w->next_seq + n - 1;
	w->next_seq += n;
	enc_u64(e->data + 8, e->first_seq);
	enc_u32(e->data, crc32c(0, e->data + 4, WAL_ENTRY_HDR - 4));
	if (w->q_tail != NULL)
		w->q_tail->next = e;
	else
		w->q_head = e;
	w->q_tail = e;
	w->q_count++;
	w->submitted_off += len;
	t->first_seq = e->first_seq;
	t->last_seq = e->last_seq;
	t->end_offset = w->submitted_off;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int
wal_submit(struct wal *w, const strata_row *rows, size_t n, struct wal_ticket *t)
{
	if (t == NULL)
		return diag_set(STRATA_EINVAL, "wal: submit needs a ticket");
	struct wal_entry *e;
	int rc = wal_encode(w, rows, n, &e);
	return rc ? rc : wal_submit_encoded(w, e, t);
}

void
wal_entry_free(struct wal_entry *e)
{
	env.free(e);
}

/*
 * Waiters sleep on ack_gen, not on cond: woken by a group's end, each reads ack_off
 * and returns without the mutex. (With cond, every waiter woke into a queue on the
 * mutex the leader held, and they passed it on one context switch at a time: 4
 * writers at one row each spent about 100 us of every 300 us cycle that way.)
 */
int
wal_wait(struct wal *w, const struct wal_ticket *t)
{
	int armer = 0;
	for (;;) {
		if (atomic_load_explicit(&w->ack_off, memory_order_acquire) >= t->end_offset)
			return 0;
		pthread_mutex_lock(&w->mu);
		assert(t->end_offset <= w->submitted_off);
		if (atomic_load_explicit(&w->ack_off, memory_order_relaxed) >= t->end_offset) {
			pthread_mutex_unlock(&w->mu);
			return 0;
		}
		if (w->failed) {
			int rc = diag_set(w->failed, "%s", w->fail_msg);
			pthread_mutex_unlock(&w->mu);
			return rc;
		}
		struct timespec dl;
		const struct timespec *until = NULL;
		if (!w->leader) {
			if (!wal_defer(w, &dl, &armer)) {
				int rc = wal_lead(w);
				pthread_mutex_unlock(&w->mu);
				ecount_signal(&w->ack_gen);
				if (rc == STRATA_EINJECTED)
					return rc;
				continue;
			}
			if (armer)
				until = &dl;
		}
		unsigned gen = ecount_read(&w->ack_gen);
		pthread_mutex_unlock(&w->mu);
		ecount_wait(&w->ack_gen, gen, until);
	}
}

int
wal_release(struct wal *w, uint64_t upto)
{
	if (w->os != NULL)
		return wal_store_release(w, upto);
	int rc = 0, removed = 0;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (w->nsegs < 2 || w->segs[0].last_seq > upto) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		uint64_t first = w->segs[0].first_seq, epoch = w->segs[0].epoch;
		memmove(w->segs, w->segs + 1, (w->nsegs - 1) * sizeof(*w->segs));
		w->nsegs--;
		pthread_mutex_unlock(&w->mu);
		char path[PATH_MAX];
		wal_seg_path(w->dir, first, epoch, path);
		if (env.unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = diag_sys(errno, "wal: cannot delete segment", path);
		removed = 1;
	}
	if (removed && w->sync != STRATA_SYNC_NONE) {
		int drc = wal_dir_sync(w->dir);
		if (rc == 0)
			rc = drc;
	}
	return rc;
}

uint64_t
wal_next_seq(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	uint64_t v = w->next_seq;
	pthread_mutex_unlock(&w->mu);
	return v;
}

void
wal_usage(struct wal *w, uint64_t *segments, uint64_t *bytes, uint64_t *syncs)
{
	pthread_mutex_lock(&w->mu);
	uint64_t b = 0;
	for (size_t i = 0; i < w->nsegs; i++)
		b += w->segs[i].bytes;
	for (size_t i = 0; i < w->nobjs; i++)
		b += w->objs[i].bytes;
	if (segments)
		*segments = w->nsegs + w->nobjs;
	if (bytes)
		*bytes = b;
	if (syncs)
		*syncs = w->syncs;
	pthread_mutex_unlock(&w->mu);
}

int
wal_failed(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	int f = w->failed;
	pthread_mutex_unlock(&w->mu);
	return f;
}

void
wal_fence(struct wal *w, const char *why)
{
	pthread_mutex_lock(&w->mu);
	wal_set_failed(w, STRATA_EFENCED, why);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

/** Free a WAL whose threads are stopped and whose queue is drained or abandoned. */
static void
wal_free(struct wal *w)
{
	wal_fdc_drop(w);
	if (w->cur_fd >= 0)
		env.close(w->cur_fd);
	env.free(w->found);
	wal_entries_free(w->q_head);
	buf_destroy(&w->stg);
	env.free(w->segs);
	env.free(w->objs);
	env.free(w->prefix);
	env.free(w->dir);
	pthread_cond_destroy(&w->bg_cond);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mu);
	env.free(w);
}

void
wal_close(struct wal *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->closing = 1;
	while (w->leader)
		pthread_cond_wait(&w->cond, &w->mu);
	if (!w->failed && w->q_head != NULL) {
		if (wal_lead(w) != 0)
			diag_log(LOG_LVL_ERROR, "wal: close of %s lost its queued entries: %s",
				 w->dir, diag_last());
		ecount_signal(&w->ack_gen);
	}
	if (w->bg_started) {
		w->bg_stop = 1;
		pthread_cond_signal(&w->bg_cond);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->bg, NULL);
		pthread_mutex_lock(&w->mu);
		w->bg_started = 0;
	}
	if (!w->failed && w->sync == STRATA_SYNC_INTERVAL && w->written_off > w->synced_off &&
	    w->cur_fd >= 0) {
		w->syncs++;
		if (env.fdatasync(w->cur_fd) != 0) {
			wal_sys(errno, "final fdatasync of", w->cur_path, 0);
			diag_log(LOG_LVL_ERROR, "%s", diag_last());
		} else {
			w->synced_off = w->written_off;
		}
	}
	pthread_mutex_unlock(&w->mu);
	wal_free(w);
}

/* ---- recovery ---- */

/** Position-ordered index of fs sorted by epoch, newest first (for wal_limits). */
static int
wal_cmp_epoch_desc(const void *a, const void *b, void *arg)
{
	const struct wal_found *fs = arg;
	uint64_t x = fs[*(const size_t *)a].epoch, y = fs[*(const size_t *)b].epoch;
	return x > y ? -1 : x < y;
}

/** Set each segment's limit: one below the first position of any newer epoch. */
static int
wal_limits(struct wal_found *fs, size_t n)
{
	size_t *idx = env.malloc((n ? n : 1) * sizeof(*idx));
	if (idx == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory ordering %zu segments", n);
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, n, sizeof(*idx), wal_cmp_epoch_desc, fs);
	uint64_t min_newer = UINT64_MAX; /* least first position of the epochs seen so far */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t group_min = UINT64_MAX;
		for (; j < n && fs[idx[j]].epoch == fs[idx[i]].epoch; j++) {
			fs[idx[j]].limit = min_newer == UINT64_MAX ? UINT64_MAX : min_newer - 1;
			if (fs[idx[j]].first_seq < group_min)
				group_min = fs[idx[j]].first_seq;
		}
		if (group_min < min_newer)
			min_newer = group_min;
		i = j;
	}
	env.free(idx);
	for (size_t i = 0; i < n; i++)
		fs[i].dead = fs[i].limit < fs[i].first_seq;
	return 0;
}

/**
 * List and read every segment of dir. Entries whose last position is above
 * replay_from go to cb. A segment also in prev (an earlier survey) that was not the
 * last live one there and whose limit is unchanged is not read again: only the last
 * segment of a writer grows. Read-only; the caller judges what it found.
 */
static int
wal_survey(const char *dir, uint64_t max_entry, uint64_t replay_from, wal_replay_cb cb, void *ctx,
	   const struct wal_found *prev, size_t nprev, struct wal_found **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	struct wal_name *names = NULL;
	size_t n = 0;
	int rc = wal_list(dir, &names, &n);
	if (rc)
		return rc;
	struct wal_found *fs = env.calloc(n ? n : 1, sizeof(*fs));
	if (fs == NULL) {
		env.free(names);
		return diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", dir);
	}
	for (size_t i = 0; i < n; i++) {
		fs[i].first_seq = names[i].first_seq;
		fs[i].epoch = names[i].epoch;
	}
	env.free(names);
	rc = wal_limits(fs, n);
	size_t prev_last = nprev;
	for (size_t i = nprev; i-- > 0;)
		if (!prev[i].dead && !prev[i].gone) {
			prev_last = i;
			break;
		}
	char path[PATH_MAX];
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct wal_found *f = &fs[i];
		f->last_seq = f->first_seq - 1;
		if (f->dead)
			continue;
		const struct wal_found *known = NULL;
		for (size_t k = 0; k < nprev && known == NULL; k++)
			if (k != prev_last && prev[k].first_seq == f->first_seq && prev[k].epoch == f->epoch &&
			    prev[k].limit == f->limit && !prev[k].dead && !prev[k].gone)
				known = &prev[k];
		if (known != NULL) {
			*f = *known;
			continue;
		}
		wal_seg_path(dir, f->first_seq, f->epoch, path);
		int fd = env.open(path, O_RDONLY, 0);
		if (fd < 0 && errno == ENOENT) {
			f->gone = 1; /* released by its writer since the listing */
			continue;
		}
		if (fd < 0) {
			rc = wal_sys(errno, "open of", path, 0);
			break;
		}
		struct wal_scan sc;
		rc = wal_scan_segment(fd, path, f->first_seq, f->limit, max_entry, replay_from, cb, ctx, &sc);
		env.close(fd);
		if (rc)
			break;
		f->last_seq = sc.last_seq;
		f->entries = sc.entries;
		f->size = sc.size;
		f->valid_bytes = sc.valid_bytes;
		f->cut = sc.cut;
		f->torn = sc.torn;
		memcpy(f->why, sc.why, sizeof(f->why));
	}
	if (rc) {
		env.free(fs);
		return rc;
	}
	*out = fs;
	*nout = n;
	return 0;
}

/** 0 when an open accepts what a survey found, else STRATA_ECORRUPT naming file and
 *  offset. *last receives the index of the last live segment (n when none). */
static int
wal_judge(const char *dir, const struct wal_found *fs, size_t n, uint64_t replay_after, size_t *last)
{
	char path[PATH_MAX];
	*last = n;
	for (size_t i = n; i-- > 0;)
		if (!fs[i].dead && !fs[i].gone) {
			*last = i;
			break;
		}
	const struct wal_found *before = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct wal_found *f = &fs[i];
		if (f->dead || f->gone)
			continue;
		wal_seg_path(dir, f->first_seq, f->epoch, path);
		if (before != NULL && f->first_seq <= before->last_seq)
			return diag_set(STRATA_ECORRUPT,
					"wal: corrupt segment %s at offset 0: it starts at position %" PRIu64
					" but the previous segment reaches %" PRIu64,
					path, f->first_seq, before->last_seq);
		before = f;
		if (f->valid_bytes >= f->size || f->cut)
			continue;
		if (i == *last && f->torn)
			continue; /* an interrupted append: wal_start truncates it */
		/* A fenced writer's segment whose every position is already in a generation
		 * (the newer epoch started above the replay cursor): its torn bytes are void. */
		if (f->torn && f->limit != UINT64_MAX && f->limit <= replay_after) {
			diag_log(LOG_LVL_WARN, "wal: %s has a torn tail at offset %" PRIu64 " (%s) below "
				 "a newer epoch; every position it could hold is in a generation", path,
				 f->valid_bytes, f->why);
			continue;
		}
		return diag_set(STRATA_ECORRUPT, "wal: corrupt segment %s at offset %" PRIu64 ": %s",
				path, f->valid_bytes, f->why);
	}
	return 0;
}

/** Allocate a WAL from its options (nothing on disk is touched). */
static int
wal_new(const struct wal_options *o, struct wal **out)
{
	*out = NULL;
	if (o == NULL || o->dir == NULL || o->dir[0] == '\0')
		return diag_set(STRATA_EINVAL, "wal: no directory given");
	if (o->sync != STRATA_SYNC_FSYNC && o->sync != STRATA_SYNC_NONE &&
	    o->sync != STRATA_SYNC_INTERVAL)
		return diag_set(STRATA_EINVAL, "wal: unknown sync mode %d", o->sync);
	size_t dlen = strlen(o->dir);
	if (dlen + 1 + WAL_NAME_EPOCH_LEN >= PATH_MAX)
		return diag_set(STRATA_EINVAL, "wal: directory path of %zu bytes is too long", dlen);
	struct wal *w = env.calloc(1, sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", o->dir);
	w->dir = env.malloc(dlen + 1);
	if (w->dir == NULL) {
		env.free(w);
		return diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", o->dir);
	}
	memcpy(w->dir, o->dir, dlen + 1);
	while (dlen > 1 && w->dir[dlen - 1] == '/')
		w->dir[--dlen] = '\0';
	w->sync = o->sync;
	w->interval_ms = o->sync_interval_ms ? o->sync_interval_ms : WAL_DEFAULT_INTERVAL_MS;
	w->group_wait_ns = (uint64_t)o->group_wait_us * 1000u;
	w->fdc = o->fdcache;
	w->observe = o->observe;
	w->external_sync = o->external_sync;
	w->segment_bytes = o->segment_bytes ? o->segment_bytes : WAL_DEFAULT_SEGMENT_BYTES;
	w->max_entry = o->max_entry_bytes ? o->max_entry_bytes : WAL_DEFAULT_MAX_ENTRY;
	if (w->max_entry > UINT32_MAX)
		w->max_entry = UINT32_MAX;
	w->cur_fd = -1;
	w->sync_fd = -1;
	w->env_ops = env_tls;
	if (o->os != NULL) {
		size_t pl = o->prefix != NULL ? strlen(o->prefix) : 0;
		w->os = o->os;
		w->reaper = o->reaper;
		w->fdc = NULL;
		w->prefix = pl > 0 && pl < 400 ? env.malloc(pl + 1) : NULL;
		if (w->prefix == NULL) {
			int rc = pl > 0 && pl < 400 ? diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", o->dir)
				 : diag_set(STRATA_EINVAL, "wal: a WAL on the store needs a key prefix of 1..399 bytes");
			env.free(w->dir);
			env.free(w);
			return rc;
		}
		memcpy(w->prefix, o->prefix, pl + 1);
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cond, NULL);
	mono_cond_init(&w->bg_cond);
	*out = w;
	return 0;
}

/** Highest position of the live segments a survey found (0 when none). */
static uint64_t
wal_found_last(const struct wal_found *fs, size_t n)
{
	uint64_t last = 0;
	for (size_t i = 0; i < n; i++)
		if (!fs[i].dead && !fs[i].gone && fs[i].last_seq > last)
			last = fs[i].last_seq;
	return last;
}

int
wal_scan_open(const struct wal_options *o, uint64_t replay_after, wal_replay_cb cb, void *ctx,
	      struct wal **out)
{
	struct wal *w;
	int rc = wal_new(o, &w);
	if (rc)
		return rc;
	w->replay_after = replay_after;
	w->cb = cb;
	w->cb_ctx = ctx;
	size_t last;
	if (w->os != NULL) {
		struct wal_gap gap;
		rc = wal_store_local_check(w);
		if (rc == 0)
			rc = wal_store_walk(w, cb, ctx, 0, &gap);
	} else {
		rc = wal_survey(w->dir, w->max_entry, replay_after, cb, ctx, NULL, 0, &w->found, &w->nfound);
		if (rc == 0)
			rc = wal_judge(w->dir, w->found, w->nfound, replay_after, &last);
	}
	if (rc) {
		wal_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

/** Truncate the torn tail of f (a segment of a writer that is fenced or dead). */
static int
wal_truncate_tail(const char *dir, const struct wal_found *f)
{
	char path[PATH_MAX];
	wal_seg_path(dir, f->first_seq, f->epoch, path);
	if (f->valid_bytes == 0) {
		diag_log(LOG_LVL_WARN, "wal: torn tail in %s at offset 0 (%s): the segment is dropped",
			 path, f->why);
		return 0;
	}
	diag_log(LOG_LVL_WARN, "wal: torn tail in %s at offset %" PRIu64 " (%s): truncating %" PRIu64
		 " bytes", path, f->valid_bytes, f->why, f->size - f->valid_bytes);
	int fd = env.open(path, O_WRONLY, 0);
	if (fd < 0)
		return wal_sys(errno, "open for truncation of", path, 0);
	int rc = 0;
	if (env.ftruncate(fd, (off_t)f->valid_bytes) != 0)
		rc = wal_sys(errno, "truncation of", path, f->valid_bytes);
	else if (env.fsync(fd) != 0)
		rc = wal_sys(errno, "fsync after truncation of", path, f->valid_bytes);
	env.close(fd);
	return rc;
}

int
wal_start(struct wal *w, uint64_t epoch, uint64_t next_seq_floor)
{
	if (w->started)
		return diag_set(STRATA_EINVAL, "wal: %s is started already", w->dir);
	if (w->os != NULL)
		return wal_store_start(w, epoch, next_seq_floor);
	/* 1. Fence: from here on an older writer acknowledges nothing it writes. */
	int rc = env_mkdir_p(w->dir);
	if (rc == 0)
		rc = wal_fence_take(w, epoch);
	if (rc)
		return rc;
	/* 2. Catch up with what it appended since the read-only scan. */
	uint64_t replayed = wal_found_last(w->found, w->nfound);
	uint64_t from = replayed > w->replay_after ? replayed : w->replay_after;
	struct wal_found *fs = NULL;
	size_t n = 0, last = 0;
	rc = wal_survey(w->dir, w->max_entry, from, w->cb, w->cb_ctx, w->found, w->nfound, &fs, &n);
	if (rc == 0)
		rc = wal_judge(w->dir, fs, n, w->replay_after, &last);
	if (rc == 0 && last < n && fs[last].valid_bytes < fs[last].size && !fs[last].cut) {
		rc = wal_truncate_tail(w->dir, &fs[last]);
		fs[last].size = fs[last].valid_bytes;
	}
	if (rc) {
		env.free(fs);
		return rc;
	}
	env.free(w->found);
	w->found = fs;
	w->nfound = n;

	uint64_t next = wal_found_last(fs, n) + 1;
	if (next_seq_floor > next)
		next = next_seq_floor;
	/* 3. A fresh segment of our own. Epoch 0 (no owner) may replace an empty old one. */
	rc = wal_segs_reserve(w, n + 1);
	if (rc)
		return rc;
	int fd;
	rc = wal_segment_create(w, next, epoch != 0, w->cur_path, &fd);
	if (rc)
		return rc;
	w->cur_fd = fd;
	w->sync_fd = fd;
	w->cur_first = next;
	w->cur_last = next - 1;
	w->cur_off = WAL_SEG_HDR;
	w->next_seq = next;
	wal_fdc_use(w, 1);

	/* 4. Drop what is all in generations, empty, or void (a fenced writer's). */
	char path[PATH_MAX];
	int removed = 0;
	for (size_t i = 0; i < n; i++) {
		struct wal_found *f = &fs[i];
		if (f->gone || (f->first_seq == next && f->epoch == epoch))
			continue;
		if (!f->dead && f->valid_bytes > 0 && f->last_seq >= f->first_seq &&
		    f->last_seq > w->replay_after) {
			w->segs[w->nsegs++] = (struct wal_seg){f->first_seq, f->epoch, f->last_seq, f->size};
			continue;
		}
		wal_seg_path(w->dir, f->first_seq, f->epoch, path);
		if (env.unlink(path) != 0 && errno != ENOENT) {
			int err = errno;
			diag_log(LOG_LVL_WARN, "wal: cannot delete segment %s: %s", path, strerror(err));
			if (!f->dead)
				w->segs[w->nsegs++] = (struct wal_seg){f->first_seq, f->epoch, f->last_seq,
								       f->size};
			continue;
		}
		removed = 1;
	}
	w->segs[w->nsegs++] = (struct wal_seg){next, epoch, next - 1, WAL_SEG_HDR};
	if (removed && w->sync != STRATA_SYNC_NONE)
		rc = wal_dir_sync(w->dir);
	if (rc == 0 && w->sync == STRATA_SYNC_INTERVAL && !w->external_sync) {
		int e = pthread_create(&w->bg, NULL, wal_bg_main, w);
		if (e != 0)
			rc = diag_set(diag_errno(e), "wal: cannot start the sync thread of %s: %s", w->dir,
				      strerror(e));
		else
			w->bg_started = 1;
	}
	if (rc)
		return rc;
	env.free(w->found);
	w->found = NULL;
	w->nfound = 0;
	w->cb = NULL;
	pthread_mutex_lock(&w->mu);
	w->started = 1;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int
wal_open(const struct wal_options *o, uint64_t replay_after, uint64_t next_seq_floor,
	 wal_replay_cb cb, void *ctx, struct wal **out)
{
	*out = NULL;
	struct wal *w;
	int rc = wal_scan_open(o, replay_after, cb, ctx, &w);
	if (rc)
		return rc;
	rc = wal_start(w, o->epoch, next_seq_floor);
	if (rc) {
		wal_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

int
wal_check_dir(const char *dir, uint64_t replay_after, uint64_t max_entry_bytes)
{
	struct wal_options o = {.dir = dir, .sync = STRATA_SYNC_NONE, .max_entry_bytes = max_entry_bytes};
	struct wal *w;
	int rc = wal_scan_open(&o, replay_after, NULL, NULL, &w);
	if (rc == 0)
		wal_free(w);
	return rc;
}

int
wal_inspect_dir(const char *dir, struct wal_segment_info *infos, int max)
{
	if (dir == NULL || (infos == NULL && max > 0))
		return diag_set(STRATA_EINVAL, "wal: inspect needs a directory");
	if (strlen(dir) + 1 + WAL_NAME_EPOCH_LEN >= PATH_MAX)
		return diag_set(STRATA_EINVAL, "wal: directory path %s is too long", dir);
	DIR *d = env.opendir(dir); /* unlike an open, inspect needs the directory to exist */
	if (d == NULL)
		return diag_sys(errno, "wal: cannot list", dir);
	env.closedir(d);
	struct wal_found *fs;
	size_t n;
	int rc = wal_survey(dir, UINT32_MAX, UINT64_MAX, NULL, NULL, NULL, 0, &fs, &n);
	if (rc)
		return rc;
	/* A segment released by a running node between listing and opening is skipped. */
	size_t k = 0, total = 0;
	for (size_t i = 0; i < n; i++) {
		const struct wal_found *f = &fs[i];
		if (f->gone)
			continue;
		total++;
		if ((int)k >= max)
			continue;
		struct wal_segment_info *in = &infos[k++];
		memset(in, 0, sizeof(*in));
		wal_seg_name(f->first_seq, f->epoch, in->name, sizeof(in->name));
		in->epoch = f->epoch;
		in->first_seq = f->first_seq;
		in->last_seq = f->last_seq;
		in->entries = f->entries;
		in->bytes = f->size;
		in->valid_bytes = f->dead ? 0 : f->valid_bytes;
		in->limit = f->limit;
		in->torn = f->torn;
		if (f->dead)
			snprintf(in->why, sizeof(in->why), "void: a newer epoch starts at or before it");
		else if (f->cut)
			snprintf(in->why, sizeof(in->why), "void after position %" PRIu64
				 ": a newer epoch starts there", f->limit);
		else
			memcpy(in->why, f->why, sizeof(in->why));
	}
	env.free(fs);
	if (total > INT_MAX)
		total = INT_MAX;
	return (int)total;
}

/* ---- repair support (read-only) ---- */

int
wal_damage_dir(const char *dir, uint64_t replay_after, uint64_t max_entry_bytes,
	       struct wal_damage *out, int max)
{
	if (dir == NULL || dir[0] == '\0' || (out == NULL && max > 0))
		return diag_set(STRATA_EINVAL, "wal: damage scan needs a directory");
	if (strlen(dir) + 1 + WAL_NAME_EPOCH_LEN >= PATH_MAX)
		return diag_set(STRATA_EINVAL, "wal: directory path %s is too long", dir);
	uint64_t max_entry = max_entry_bytes ? max_entry_bytes : WAL_DEFAULT_MAX_ENTRY;
	if (max_entry > UINT32_MAX)
		max_entry = UINT32_MAX;
	struct wal_found *fs;
	size_t n;
	int rc = wal_survey(dir, max_entry, UINT64_MAX, NULL, NULL, NULL, 0, &fs, &n);
	if (rc)
		return rc;
	/* The rules of wal_judge, applied to every segment instead of up to the first. */
	size_t last = n;
	for (size_t i = n; i-- > 0;)
		if (!fs[i].dead && !fs[i].gone) {
			last = i;
			break;
		}
	char path[PATH_MAX];
	const struct wal_found *before = NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct wal_found *f = &fs[i];
		if (f->dead || f->gone)
			continue;
		if (before != NULL && f->first_seq <= before->last_seq) {
			wal_seg_path(dir, f->first_seq, f->epoch, path);
			rc = diag_set(STRATA_ECORRUPT,
				      "wal: corrupt segment %s at offset 0: it starts at position %" PRIu64
				      " but the previous segment reaches %" PRIu64,
				      path, f->first_seq, before->last_seq);
			break;
		}
		before = f;
		if (f->valid_bytes >= f->size || f->cut)
			continue;
		if (i == last && f->torn)
			continue;
		if (f->torn && f->limit != UINT64_MAX && f->limit <= replay_after)
			continue;
		if ((int)k < max) {
			struct wal_damage *d = &out[k];
			memset(d, 0, sizeof(*d));
			wal_seg_name(f->first_seq, f->epoch, d->name, sizeof(d->name));
			d->epoch = f->epoch;
			d->first_seq = f->first_seq;
			d->last_seq = f->last_seq;
			d->entries = f->entries;
			d->bytes = f->size;
			d->valid_bytes = f->valid_bytes;
			d->limit = f->limit;
			d->torn = f->torn;
			for (size_t j = i + 1; j < n; j++)
				if (!fs[j].dead && !fs[j].gone) {
					d->next_first_seq = fs[j].first_seq;
					break;
				}
			memcpy(d->why, f->why, sizeof(d->why));
		}
		k++;
	}
	env.free(fs);
	if (rc)
		return rc;
	return k > INT_MAX ? INT_MAX : (int)k;
}

int
wal_salvage_scan(const char *path, uint64_t off, uint64_t max_entry_bytes, struct wal_salvage *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t max_entry = max_entry_bytes ? max_entry_bytes : WAL_DEFAULT_MAX_ENTRY;
	if (max_entry > UINT32_MAX)
		max_entry = UINT32_MAX;
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0)
		return wal_sys(errno, "open of", path, 0);
	struct stat st;
	if (env.fstat(fd, &st) != 0) {
		int rc = wal_sys(errno, "stat of", path, 0);
		env.close(fd);
		return rc;
	}
	uint64_t size = (uint64_t)st.st_size;
	out->bytes = size;
	if (off >= size) {
		env.close(fd);
		return 0;
	}
	struct wal_reader r = {.fd = fd, .path = path, .size = size};
	uint64_t p = off > WAL_SEG_HDR ? off : WAL_SEG_HDR; /* entries start after the header */
	int rc = 0;
	while (p + WAL_ENTRY_HDR <= size) {
		const uint8_t *h;
		rc = wal_reader_get(&r, p, WAL_ENTRY_HDR, &h);
		if (rc)
			break;
		if (crc32c(0, h + 4, WAL_ENTRY_HDR - 4) != dec_u32(h)) {
			p++;
			continue;
		}
		uint32_t plen = dec_u32(h + 4);
		uint64_t fseq = dec_u64(h + 8);
		uint32_t nrows = dec_u32(h + 16);
		uint32_t pcrc = dec_u32(h + 20);
		uint64_t end = p + WAL_ENTRY_HDR + plen;
		if (plen > max_entry || nrows == 0 || nrows > plen / 2 || end > size || fseq == 0 ||
		    fseq > UINT64_MAX - nrows) {
			p++;
			continue;
		}
		const uint8_t *pl;
		rc = wal_reader_get(&r, p + WAL_ENTRY_HDR, plen, &pl);
		if (rc)
			break;
		if (crc32c(0, pl, plen) != pcrc) {
			if (p == off) {
				/* The damaged entry itself: its verified header says what it held
				 * and where the next entry starts. */
				out->head_ok = 1;
				out->head_first_seq = fseq;
				out->head_last_seq = fseq + nrows - 1;
				p = end;
			} else {
				p++;
			}
			continue;
		}
		if (out->entries == 0 || fseq < out->first_seq)
			out->first_seq = fseq;
		if (fseq + nrows - 1 > out->last_seq)
			out->last_seq = fseq + nrows - 1;
		out->entries++;
		out->intact_bytes += end - p;
		p = end;
	}
	buf_destroy(&r.b);
	env.close(fd);
	out->damaged_bytes = size - off - out->intact_bytes;
	return rc;
}
