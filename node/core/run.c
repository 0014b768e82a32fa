/*
 * run.c — run files (generations and base runs), streamed through the object store.
 *
 * Object layout (all integers little-endian; "varint" is LEB128 as in buf.h):
 *
 *   [data blocks of partition 0][partition 0][data blocks of partition 1][partition 1] ...
 *   [top index][meta][footer]
 *
 * Every data block, index partition, top index and meta section is a frame:
 *   u8 codec (0 raw, 1 zstd) | payload | u32 crc32c over codec + payload
 * A zstd payload is one zstd frame that decompresses to exactly the raw length recorded
 * by whoever points at the frame; a raw payload is the raw bytes. The writer stores raw
 * when zstd saves less than its options ask (by default 1/8 of the raw bytes), and a
 * writer whose last RUN_SAMPLE_AFTER blocks did not pay tries only one block in
 * sample_every until one pays again (judged RUN_SAMPLE_LAG blocks behind, so a writer
 * whose helper threads encode several blocks at once writes the same bytes as one that
 * encodes them in turn). Readers tell each frame's codec from its first byte.
 *
 * Data block (raw): rows in strictly increasing key order (memcmp, shorter prefix first):
 *   u8 kind | varint klen | varint vlen | u64 seq | key | value
 * kind is STRATA_ROW_PUT (0) or STRATA_ROW_DELETE (1, a tombstone, vlen 0). Version 1
 * rows have no kind byte and are all puts.
 * The writer cuts a block before a row that would take it past block_bytes; a row larger
 * than block_bytes therefore gets a block of its own.
 *
 * Index partition (raw): one entry per data block, in order:
 *   varint klen | last key | varint offset | varint on-disk length | varint raw length |
 *   varint nrows | varint filter length | filter
 * filter is empty (no filter) or a bloom bitmap of (length - 1) bytes followed by u8 k,
 * the number of probes. Probe i of a key sets bit (h + i * delta) mod nbits, where
 * h = XXH3_64bits(key) and delta = rotr64(h, 33). nbits = max(64, nkeys * bits_per_key)
 * rounded up to a byte; k = round(bits_per_key * 0.69) clamped to 1..30.
 * A filter whose last byte is k | 0x80 (generations write these) has nbits = 2^m and
 * takes probe i's bit from the top m bits of w_i, where w_0 = h and
 * w_{i+1} = w_i * 6364136223846793005 + 1442695040888963407 (mod 2^64): no division, and
 * bits as independent as the false-positive rate assumes, where double hashing modulo
 * a small power of two is not (its probes cycle through a few bits: a 4-key, 64-bit
 * filter passed 1.3% of absent keys, this one 0.07%, the rate its bits promise). A
 * reader that does not know the flag reads k > 30 and takes the filter for none (every
 * block may hold the key), never for a wrong answer. The writer picks k: generations
 * take it from bloom_bits_per_key and their size from generation_bloom_bits_per_key.
 * A filter whose last byte is k | 0x40 (merged runs write these; the file version is
 * unchanged, as for 0x80) has nbits of any multiple of 8 and takes probe i's bit from
 * the high 64 bits of the 128-bit product w_i * nbits, with w_i as above: one multiply
 * per probe where h mod nbits divided (a merge sets k bits for each of its rows; the
 * division was 5-6% of a merge's samples). Filters with neither flag are still read
 * as the first paragraph says; an older reader takes these for none, as above.
 * A partition is flushed once its raw size reaches index_partition_bytes.
 *
 * Top index (raw): one entry per partition, in order:
 *   varint klen | last key | varint offset | varint on-disk length | varint raw length |
 *   varint nblocks
 *
 * Meta (raw): varint klen | smallest key | varint klen | largest key (both empty when the
 * run has no rows).
 *
 * Footer: RUN_FOOTER_SIZE (112) bytes at the very end of the object:
 *     0 u64 top index offset      8 u64 top index on-disk length   16 u64 top index raw length
 *    24 u64 partitions           32 u64 meta offset               40 u64 meta on-disk length
 *    48 u64 meta raw length      56 u64 rows                      64 u64 blocks
 *    72 u64 raw bytes (sum of key and value lengths)              80 u64 min seq
 *    88 u64 max seq              96 u32 format version (2; 1 read) 100 u32 crc32c of bytes 0..99
 *   104 magic "STRATARN"
 * Version and magic sit at fixed distances from the end so that a reader finds them
 * whatever the footer size of a later version. A reader checks, in order: the magic
 * (ECORRUPT), the version (newer: EVERSION), the footer crc (ECORRUPT), then that the
 * top index and meta tile the bytes between the data and the footer.
 *
 * Memory: the writer holds one raw block, its key hashes, one frame, one raw index
 * partition and the top index (one small entry per partition). zstd contexts are the
 * thread's (run_zctx), one of each kind per thread, never one per writer or iterator. A reader holds the top
 * index and meta, plus each partition a point lookup has loaded. An iterator holds one
 * partition and one block.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "run.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "../lib/bcache.h"
#include "../lib/crc.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/keycmp.h"
#include "../lib/ratelimit.h"

/** Frame codecs. */
enum { RUN_CODEC_RAW = 0, RUN_CODEC_ZSTD = 1 };

/** How run_frame_encode stores a frame. */
struct run_codec {
	/** The compressor (NULL: store raw without trying). */
	size_t (*compress)(void *dst, size_t cap, const void *src, size_t n, int level);
	/** Its level. */
	int level;
	/** Keep a compressed payload only when it is at most this many bytes per KiB of raw. */
	uint32_t max_per_kib;
};

/** Format version written and the newest one read (2: a kind byte per row). */
#define RUN_FORMAT_VERSION 2u
/** Footer magic, the last 8 bytes of every run. */
#define RUN_MAGIC "STRATARN"
/** Size of a version-1 footer. */
#define RUN_FOOTER_SIZE 112u
/** Codec byte plus crc trailer around every frame payload. */
#define RUN_FRAME_OVERHEAD 5u
/** Largest raw size of any frame a reader accepts. */
#define RUN_MAX_RAW ((uint64_t)RUN_MAX_BLOCK_BYTES + RUN_MAX_VALUE + STRATA_MAX_KEY + 64)
/** A scratch buffer over RUN_TRIM_FACTOR x its need + RUN_TRIM_SLACK is released. */
#define RUN_TRIM_FACTOR 2
/** See RUN_TRIM_FACTOR. */
#define RUN_TRIM_SLACK (64 * 1024)

/** Defaults for zero writer options. */
enum {
	RUN_DEFAULT_BLOCK = 64 * 1024,
	RUN_DEFAULT_LEVEL = 1,
	RUN_DEFAULT_BLOOM = 10,
	RUN_DEFAULT_PARTITION = 64 * 1024,
};

/** One row decoded from a data block; pointers into the block. */
struct run_row {
	/** Key bytes. */
	const uint8_t *key;
	/** Key length. */
	size_t klen;
	/** Value bytes. */
	const uint8_t *val;
	/** Value length. */
	size_t vlen;
	/** Sequence number. */
	uint64_t seq;
	/** STRATA_ROW_PUT or STRATA_ROW_DELETE. */
	uint32_t kind;
};

/** A data block as listed by an index partition; pointers into the partition. */
struct run_bentry {
	/** Last key of the block. */
	const uint8_t *key;
	/** Length of key. */
	size_t klen;
	/** Offset of the block frame in the object. */
	uint64_t off;
	/** On-disk length of the frame. */
	uint64_t disk_len;
	/** Raw length of the block. */
	uint64_t raw_len;
	/** Rows in the block. */
	uint64_t nrows;
	/** Bloom filter (bitmap + k byte), or NULL. */
	const uint8_t *filter;
	/** Length of filter (0: no filter). */
	size_t flen;
};

/** A partition as listed by the top index; pointers into the top index. */
struct run_pentry {
	/** Last key of the partition's last block. */
	const uint8_t *key;
	/** Length of key. */
	size_t klen;
	/** Offset of the partition frame. */
	uint64_t off;
	/** On-disk length of the frame. */
	uint64_t disk_len;
	/** Raw length of the partition. */
	uint64_t raw_len;
	/** Blocks the partition lists. */
	uint64_t nblocks;
};

/** A loaded index partition. */
struct run_part {
	/** The frame as read. */
	struct buf disk;
	/** Decompressed bytes when the frame is zstd. */
	struct buf raw;
	/** Its block entries. */
	struct run_bentry *e;
	/** Entries in e. */
	size_t n;
	/** Capacity of e. */
	size_t cap;
};

/** Result bits of a data block, kept RUN_SAMPLE_LAG blocks for the sampling decision. */
enum { RUN_BLOCK_TRIED = 1, RUN_BLOCK_PACKED = 2 };

/** A data block handed to the writer's helpers: its rows, what its index entry needs,
 *  and the frame they encode it into. */
struct run_job {
	/** Raw rows of the block. */
	struct buf raw;
	/** Its encoded frame. */
	struct buf frame;
	/** Last key of the block. */
	struct buf last_key;
	/** XXH3 hashes of its keys. */
	uint64_t *hashes;
	/** Capacity of hashes. */
	size_t hashes_cap;
	/** Rows in it. */
	uint64_t rows;
	/** Compression is tried. */
	int try;
	/** The frame is compressed. */
	int packed;
	/** Encoding failed (out of memory). */
	int rc;
	/** Encoded (under the crew's mutex), or framed by the writer as it queued it (not tried). */
	int done;
	/** Encoded by a helper thread, not by the writer's. */
	int helped;
};

/** A writer's helper threads and the ring of blocks they encode. */
struct run_crew {
	/** Guards the ring's counters and the jobs' done flags. */
	pthread_mutex_t mu;
	/** Signalled when a job is queued or the crew stops. */
	pthread_cond_t work;
	/** Signalled when a job is done. */
	pthread_cond_t done;
	/** The codec jobs are encoded with. */
	const struct run_codec *codec;
	/** Helper threads. */
	pthread_t *threads;
	/** Threads started. */
	unsigned nthreads;
	/** Ring of depth jobs; job k is jobs[k % depth]. */
	struct run_job *jobs;
	/** Blocks in flight at most. */
	unsigned depth;
	/** Oldest job not yet written out; oldest not yet taken by a thread; next to queue. */
	uint64_t head, next, tail;
	/** The threads are to exit once the queue is empty. */
	int stop;
};

struct run_writer {
	/** The store written to. */
	struct objstore *os;
	/** The streamed write. */
	struct objstore_writer *ow;
	/** Object key (for messages). */
	char *key;
	/** Effective options (defaults applied). */
	struct run_writer_options o;
	/** How its frames are compressed. */
	struct run_codec codec;
	/** Data blocks in a row whose compression did not pay (RUN_SAMPLE_AFTER). */
	uint32_t unpaid;
	/** Data blocks stored without trying since the last try, while sampling. */
	uint32_t untried;
	/** Data blocks decided so far (numbering the sampling decisions). */
	uint64_t decided;
	/** RUN_BLOCK_* of the last RUN_SAMPLE_LAG blocks, by block number. */
	uint8_t results[RUN_SAMPLE_LAG];
	/** Helper threads (NULL: the writer encodes each block itself). */
	struct run_crew *crew;
	/** Raw rows of the current block. */
	struct buf block;
	/** Rows in the current block. */
	uint64_t block_rows;
	/** XXH3 hashes of the current block's keys. */
	uint64_t *hashes;
	/** Capacity of hashes. */
	size_t hashes_cap;
	/** Scratch for one encoded frame. */
	struct buf frame;
	/** Raw entries of the current index partition. */
	struct buf part;
	/** Blocks listed by the current partition. */
	uint64_t part_blocks;
	/** Raw top index. */
	struct buf top;
	/** Partitions written. */
	uint64_t nparts;
	/** Smallest key (the first added). */
	struct buf first_key;
	/** Largest key so far (the last added). */
	struct buf last_key;
	/** Bytes written to the object so far. */
	uint64_t off;
	/** Totals for the footer. */
	struct run_meta meta;
	/** Sticky error: once an IO or memory failure happened, only abort remains. */
	int err;
};

/** A block as a probe lists it. */
struct run_probe_block {
	/** Last key of the block (in the probe's bytes). */
	const uint8_t *key;
	/** Its bloom filter (in the probe's bytes; NULL: none). */
	const uint8_t *filter;
	/** Length of key. */
	uint32_t klen;
	/** Length of filter. */
	uint32_t flen;
};

/**
 * What a lookup that misses needs of a small resident run, in one allocation: the
 * smallest key, the newest seq, and each block's last key and bloom filter. A lookup of
 * a backlog probes thousands of these; one allocation is a few cache lines where the
 * reader, its top index, its meta and its partition are a dozen.
 */
struct run_probe {
	/** Largest seq of the run. */
	uint64_t max_seq;
	/** Smallest key. */
	const uint8_t *min_key;
	/** Length of min_key. */
	uint32_t min_klen;
	/** Blocks listed. */
	uint32_t nblocks;
	/** Bytes of the allocation (charged to the resident budget). */
	size_t bytes;
	/** The blocks; the keys and filters they point to follow. */
	struct run_probe_block b[];
};

/** Largest probe built (bytes): a run with more blocks is probed through its partition. */
#define RUN_PROBE_MAX_BYTES 4096u

struct run_reader {
	/** The probe of a small resident run (NULL until built; installed under mu). */
	struct run_probe *probe;
	/** No probe is built for this run (too large, or no budget). */
	atomic_int probe_none;
	/** The store read from. */
	struct objstore *os;
	/** Object key. */
	char *key;
	/** Footer totals. */
	struct run_meta meta;
	/** Format version of the object (rows of version 1 carry no kind). */
	uint32_t version;
	/** End of data: offset of the top index. */
	uint64_t data_end;
	/** Top index and meta frames as read. */
	struct buf tail;
	/** Decompressed top index when zstd. */
	struct buf top_raw;
	/** Decompressed meta when zstd. */
	struct buf meta_raw;
	/** Smallest key. */
	const uint8_t *min_key;
	/** Length of min_key. */
	size_t min_klen;
	/** Largest key. */
	const uint8_t *max_key;
	/** Length of max_key. */
	size_t max_klen;
	/** Top index entries. */
	struct run_pentry *parts;
	/** Entries in parts. */
	size_t nparts;
	/** Partitions loaded by point lookups (NULL until loaded); installed under mu. */
	struct run_part **cache;
	/** Guards cache installation and the lazy load. */
	pthread_mutex_t mu;
	/** The footer, top index and meta are read (run_reader_open_lazy defers that to the
	 *  first lookup or iterator). */
	atomic_int loaded;
	/** Bloom probes that said "absent" (atomic). */
	uint64_t bloom_skips;
	/** Identity of this reader's blocks in the cache (bcache_new_id). */
	uint64_t id;
	/** How it caches. */
	struct run_read_options ro;
	/** Bytes of the partitions in cache reserved from the cache's resident budget. */
	_Atomic(uint64_t) resident_bytes;
};

/** A data block as the cache keeps it: the raw rows and where each starts. */
struct run_cblock {
	/** Raw bytes. */
	const uint8_t *data;
	/** Length of data. */
	size_t len;
	/** Rows. */
	size_t nrows;
	/** Offset of each row in data. */
	uint32_t *rows;
};

struct run_iter {
	/** The run iterated. */
	struct run_reader *r;
	/** The loaded partition (not the reader's cache). */
	struct run_part part;
	/** Index of the current partition. */
	size_t pidx;
	/** Index of the current block in part. */
	size_t bidx;
	/** part holds partition pidx. */
	int part_loaded;
	/** The current block's frame as read. */
	struct buf disk;
	/** The current block decompressed. */
	struct buf raw;
	/** Raw bytes of the current block. */
	const uint8_t *bytes;
	/** Length of bytes; 0 when no block is loaded. */
	size_t blen;
	/** A block is loaded. */
	int block_loaded;
	/** Offset of the next row in bytes. */
	size_t pos;
	/** Rows of the current block consumed. */
	uint64_t rows_seen;
	/** The current row. */
	struct run_row row;
	/** Sticky error. */
	int err;
};

/* ---- helpers ---------------------------------------------------------------- */

static char *
run_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = env.malloc(n);
	if (p != NULL)
		memcpy(p, s, n);
	return p;
}

static int
run_corrupt(struct objstore *os, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** Record STRATA_ECORRUPT with the object key and the failing part. */
static int
run_corrupt(struct objstore *os, const char *key, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return diag_set(STRATA_ECORRUPT, "run %s (%s): %s", key, os->name, msg);
}

/** Release b's memory when it holds more than keep bytes (after an oversized row). */
static void
run_buf_trim(struct buf *b, size_t keep)
{
	if (b->cap > keep)
		buf_destroy(b);
}

/** Parse one row of a run of format version at rd. 0, or -1 on a malformed row. */
static int
run_row_parse(struct rd *rd, uint32_t version, struct run_row *row)
{
	row->kind = STRATA_ROW_PUT;
	if (version >= 2) {
		row->kind = rd_u8(rd);
		if (row->kind != STRATA_ROW_PUT && row->kind != STRATA_ROW_DELETE)
			return -1;
	}
	uint64_t klen = rd_varint(rd);
	uint64_t vlen = rd_varint(rd);
	row->seq = rd_u64(rd);
	if (rd->err || klen > rd_left(rd) || vlen > rd_left(rd) - klen)
		return -1;
	row->klen = klen;
	row->vlen = vlen;
	row->key = rd_bytes(rd, klen);
	row->val = rd_bytes(rd, vlen);
	if (row->kind == STRATA_ROW_DELETE && vlen > 0)
		return -1;
	return rd->err ? -1 : 0;
}

/* ---- bloom filter ----------------------------------------------------------- */

/** Flags of a filter's k byte (format above): power-of-two bits, probes from an LCG;
 *  any size, probes from the LCG scaled by a multiply. */
#define RUN_BLOOM_POW2 0x80u
#define RUN_BLOOM_RANGE 0x40u

static uint32_t
run_bloom_k(uint32_t bits_per_key)
{
	uint32_t k = (uint32_t)(bits_per_key * 0.69 + 0.5);
	if (k < 1)
		k = 1;
	if (k > 30)
		k = 30;
	return k;
}

/** Step of the probe sequence of RUN_BLOOM_POW2 filters (Knuth's MMIX LCG). */
#define RUN_BLOOM_MUL 6364136223846793005ull
#define RUN_BLOOM_ADD 1442695040888963407ull

/** Probe w's bit of a RUN_BLOOM_RANGE filter of nbits: w * nbits / 2^64. */
static inline uint64_t
run_bloom_range_bit(uint64_t w, uint64_t nbits)
{
	return (uint64_t)(((unsigned __int128)w * nbits) >> 64);
}

/** Set key hash h's k bits: mode RUN_BLOOM_POW2, RUN_BLOOM_RANGE or 0 (h mod nbits,
 *  the oldest format; kept for the tests that read it). */
static void
run_bloom_set(uint8_t *bits, uint64_t nbits, uint32_t k, unsigned mode, uint64_t h)
{
	if (mode == RUN_BLOOM_POW2) {
		unsigned shift = (unsigned)__builtin_clzll(nbits) + 1; /* 64 - log2(nbits) */
		for (uint32_t i = 0; i < k; i++) {
			uint64_t b = h >> shift;
			bits[b >> 3] |= (uint8_t)(1u << (b & 7));
			h = h * RUN_BLOOM_MUL + RUN_BLOOM_ADD;
		}
		return;
	}
	if (mode == RUN_BLOOM_RANGE) {
		for (uint32_t i = 0; i < k; i++) {
			uint64_t b = run_bloom_range_bit(h, nbits);
			bits[b >> 3] |= (uint8_t)(1u << (b & 7));
			h = h * RUN_BLOOM_MUL + RUN_BLOOM_ADD;
		}
		return;
	}
	uint64_t delta = (h >> 33) | (h << 31);
	for (uint32_t i = 0; i < k; i++) {
		uint64_t b = h % nbits;
		bits[b >> 3] |= (uint8_t)(1u << (b & 7));
		h += delta;
	}
}

/** 1 if the filter may contain the key of hash h (XXH3; or there is no usable filter),
 *  0 if absent. */
static int
run_bloom_may_contain_hash(const uint8_t *filter, size_t flen, uint64_t h)
{
	if (flen < 2)
		return 1;
	uint32_t k = filter[flen - 1];
	uint64_t nbits = (uint64_t)(flen - 1) * 8;
	if (k & RUN_BLOOM_POW2) {
		k &= ~RUN_BLOOM_POW2;
		if ((nbits & (nbits - 1)) != 0 || k < 1 || k > 30)
			return 1; /* not what the flag promises: no usable filter */
		unsigned shift = (unsigned)__builtin_clzll(nbits) + 1;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t b = h >> shift;
			if (!(filter[b >> 3] & (1u << (b & 7))))
				return 0;
			h = h * RUN_BLOOM_MUL + RUN_BLOOM_ADD;
		}
		return 1;
	}
	if (k & RUN_BLOOM_RANGE) {
		k &= ~RUN_BLOOM_RANGE;
		if (k < 1 || k > 30)
			return 1;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t b = run_bloom_range_bit(h, nbits);
			if (!(filter[b >> 3] & (1u << (b & 7))))
				return 0;
			h = h * RUN_BLOOM_MUL + RUN_BLOOM_ADD;
		}
		return 1;
	}
	if (k < 1 || k > 30)
		return 1;
	uint64_t delta = (h >> 33) | (h << 31);
	if ((nbits & (nbits - 1)) == 0) {
		/* 64-bit filters of small runs: the same bit positions as h % nbits, without
		 * a division per probe. */
		uint64_t mask = nbits - 1;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t b = h & mask;
			if (!(filter[b >> 3] & (1u << (b & 7))))
				return 0;
			h += delta;
		}
		return 1;
	}
	for (uint32_t i = 0; i < k; i++) {
		uint64_t b = h % nbits;
		if (!(filter[b >> 3] & (1u << (b & 7))))
			return 0;
		h += delta;
	}
	return 1;
}

/** run_bloom_may_contain_hash of key. */
static int
run_bloom_may_contain(const uint8_t *filter, size_t flen, const void *key, size_t klen)
{
	return run_bloom_may_contain_hash(filter, flen, XXH3_64bits(key, klen));
}

/* ---- per-thread zstd contexts --------------------------------------------- */

/** A thread's zstd contexts, made at its first frame and freed when it exits. A context is
 *  used only inside one ZSTD_*CCtx / *DCtx call, so every writer, reader and iterator
 *  that runs on the thread (fibers of inline mode included) shares them: none is made
 *  per writer or per iterator, and memory grows with threads, not with open runs. */
struct run_zctx {
	/** Compression context (NULL until the thread's first compression). */
	ZSTD_CCtx *c;
	/** Decompression context (NULL until the thread's first decompression). */
	ZSTD_DCtx *d;
	/** env's allocator when this was made: the contexts (which zstd may resize) and
	 *  this struct are allocated and freed through it alone, whatever env holds later. */
	void *(*alloc)(size_t n);
	/** See alloc. */
	void (*release)(void *p);
};

/** Frees a thread's run_zctx at its exit. */
static pthread_key_t run_zkey;
/** Creates run_zkey once. */
static pthread_once_t run_zonce = PTHREAD_ONCE_INIT;
/** The calling thread's contexts, cached (the key holds the same pointer). */
static __thread struct run_zctx *run_zself;

static void *
run_zctx_alloc(void *opaque, size_t n)
{
	return ((struct run_zctx *)opaque)->alloc(n);
}

static void
run_zctx_release(void *opaque, void *p)
{
	((struct run_zctx *)opaque)->release(p);
}

static void
run_zctx_free(void *p)
{
	struct run_zctx *z = p;
	ZSTD_freeCCtx(z->c);
	ZSTD_freeDCtx(z->d);
	z->release(z);
	run_zself = NULL;
}

static void
run_zkey_create(void)
{
	pthread_key_create(&run_zkey, run_zctx_free);
}

/** The calling thread's contexts (NULL: out of memory). */
static struct run_zctx *
run_zctx(void)
{
	struct run_zctx *z = run_zself;
	if (z != NULL)
		return z;
	pthread_once(&run_zonce, run_zkey_create);
	z = env.malloc(sizeof(*z));
	if (z == NULL)
		return NULL;
	*z = (struct run_zctx){ .alloc = env.malloc, .release = env.free };
	if (pthread_setspecific(run_zkey, z) != 0) {
		env.free(z);
		return NULL;
	}
	return run_zself = z;
}

/** The calling thread's compression context (NULL: out of memory). */
static ZSTD_CCtx *
run_cctx(void)
{
	struct run_zctx *z = run_zctx();
	if (z != NULL && z->c == NULL)
		z->c = ZSTD_createCCtx_advanced((ZSTD_customMem){ run_zctx_alloc, run_zctx_release, z });
	return z != NULL ? z->c : NULL;
}

/** The calling thread's decompression context (NULL: out of memory). */
static ZSTD_DCtx *
run_dctx(void)
{
	struct run_zctx *z = run_zctx();
	if (z != NULL && z->d == NULL)
		z->d = ZSTD_createDCtx_advanced((ZSTD_customMem){ run_zctx_alloc, run_zctx_release, z });
	return z != NULL ? z->d : NULL;
}

/* ---- frames ----------------------------------------------------------------- */

/** zstd on the calling thread's context: run_writer_options.compress's default. */
static size_t
run_zstd_compress(void *dst, size_t cap, const void *src, size_t n, int level)
{
	ZSTD_CCtx *c = run_cctx();
	if (c == NULL)
		return 0;
	size_t csize = ZSTD_compressCCtx(c, dst, cap, src, n, level);
	return ZSTD_isError(csize) ? 0 : csize;
}

/** Encode n raw bytes as a frame into out (replacing its contents): compressed when cd
 *  has a compressor and the result pays (*packed then 1), raw otherwise. */
static int
run_frame_encode(const struct run_codec *cd, const uint8_t *raw, size_t n, struct buf *out,
		 int *packed)
{
	buf_reset(out);
	size_t bound = ZSTD_compressBound(n);
	size_t room = (bound > n ? bound : n) + RUN_FRAME_OVERHEAD;
	if (buf_reserve(out, room))
		return STRATA_ENOMEM;
	size_t csize = 0;
	if (n > 0 && cd != NULL && cd->compress != NULL)
		csize = cd->compress(out->data + 1, room - RUN_FRAME_OVERHEAD, raw, n, cd->level);
	*packed = csize > 0 && csize < n && (uint64_t)csize * 1024 <= (uint64_t)n * cd->max_per_kib;
	if (*packed) {
		out->data[0] = RUN_CODEC_ZSTD;
		out->len = 1 + csize;
	} else {
		out->data[0] = RUN_CODEC_RAW;
		if (n > 0)
			memcpy(out->data + 1, raw, n);
		out->len = 1 + n;
	}
	enc_u32(out->data + out->len, crc32c(0, out->data, out->len));
	out->len += 4;
	return 0;
}

/** Check a frame's length and checksum; *body: its length less the checksum, codec byte first. */
static int
run_frame_check(struct objstore *os, const char *key, const char *what, const uint8_t *frame,
		size_t len, size_t *body)
{
	if (len < RUN_FRAME_OVERHEAD)
		return run_corrupt(os, key, "%s: frame of %zu bytes is too short", what, len);
	*body = len - 4;
	uint32_t want = dec_u32(frame + *body);
	uint32_t got = crc32c(0, frame, *body);
	if (want != got)
		return run_corrupt(os, key, "%s: checksum mismatch (stored %08x, computed %08x)",
				   what, want, got);
	return 0;
}

/** Decompress a checked zstd frame of body bytes into dst (room for raw_len), which it must fill. */
static int
run_frame_unzstd(struct objstore *os, const char *key, const char *what, const uint8_t *frame,
		 size_t body, uint64_t raw_len, ZSTD_DCtx *dctx, uint8_t *dst)
{
	size_t n = ZSTD_decompressDCtx(dctx, dst, raw_len, frame + 1, body - 1);
	if (ZSTD_isError(n))
		return run_corrupt(os, key, "%s: zstd: %s", what, ZSTD_getErrorName(n));
	if (n != raw_len)
		return run_corrupt(os, key, "%s: decompressed to %zu bytes, expected %llu",
				   what, n, (unsigned long long)raw_len);
	return 0;
}

/**
 * Verify a frame and produce its raw bytes: *raw points into frame (raw codec) or into
 * scratch (zstd, decompressed with dctx). what names the part for messages.
 */
static int
run_frame_decode(struct objstore *os, const char *key, const char *what, const uint8_t *frame,
		 size_t len, uint64_t raw_len, ZSTD_DCtx *dctx, struct buf *scratch,
		 const uint8_t **raw)
{
	size_t body;
	int rc = run_frame_check(os, key, what, frame, len, &body);
	if (rc)
		return rc;
	if (raw_len > RUN_MAX_RAW)
		return run_corrupt(os, key, "%s: raw length %llu over the limit", what,
				   (unsigned long long)raw_len);
	switch (frame[0]) {
	case RUN_CODEC_RAW:
		if (body - 1 != raw_len)
			return run_corrupt(os, key, "%s: raw frame holds %zu bytes, expected %llu",
					   what, body - 1, (unsigned long long)raw_len);
		*raw = frame + 1;
		return 0;
	case RUN_CODEC_ZSTD: {
		buf_reset(scratch);
		if (buf_reserve(scratch, raw_len ? raw_len : 1))
			return diag_set(STRATA_ENOMEM, "run %s: %s: cannot allocate %llu bytes", key,
					what, (unsigned long long)raw_len);
		rc = run_frame_unzstd(os, key, what, frame, body, raw_len, dctx, scratch->data);
		if (rc)
			return rc;
		scratch->len = raw_len;
		*raw = scratch->data;
		return 0;
	}
	default:
		return run_corrupt(os, key, "%s: unknown codec %u", what, frame[0]);
	}
}

/** Read len bytes at off into b (replacing its contents); a short read is corruption. */
static int
run_read(struct objstore *os, const char *key, const char *what, uint64_t off, uint64_t len,
	 struct buf *b)
{
	buf_reset(b);
	if (len > SIZE_MAX || buf_reserve(b, len ? len : 1))
		return diag_set(STRATA_ENOMEM, "run %s: %s: cannot allocate %llu bytes", key, what,
				(unsigned long long)len);
	size_t got = 0;
	int rc = objstore_get_range(os, key, off, len, b->data, &got);
	if (rc == STRATA_NOTFOUND)
		return diag_set(STRATA_EIO, "run %s (%s): %s: object not found", key, os->name,
				what);
	if (rc)
		return rc;
	if (got != len)
		return run_corrupt(os, key, "%s: object ends early: read %zu of %llu bytes at "
				   "offset %llu (truncated?)", what, got,
				   (unsigned long long)len, (unsigned long long)off);
	b->len = len;
	return 0;
}

/* ---- writer ----------------------------------------------------------------- */

static int
run_writer_fail(struct run_writer *w, int rc)
{
	if (w->err == 0)
		w->err = rc;
	return rc;
}

/** Write a frame at the end of the object, drawn from the background IO budget. */
static int
run_writer_emit(struct run_writer *w, const struct buf *frame)
{
	uint64_t waited = ratelimit_acquire(w->o.limiter, frame->len);
	if (waited != 0 && w->o.waited_ns != NULL)
		atomic_fetch_add(w->o.waited_ns, waited);
	int rc = objstore_writer_write(w->ow, frame->data, frame->len);
	if (rc)
		return rc;
	w->off += frame->len;
	return 0;
}

/** Write the current index partition; last_key is the last key of its last block. */
static int
run_writer_flush_part(struct run_writer *w, const struct buf *last_key)
{
	assert(w->part_blocks > 0);
	int packed;
	int rc = run_frame_encode(&w->codec, w->part.data, w->part.len, &w->frame, &packed);
	if (rc)
		return diag_set(rc, "run %s: cannot allocate an index frame", w->key);
	uint64_t off = w->off;
	rc = run_writer_emit(w, &w->frame);
	if (rc)
		return rc;
	if (buf_put_varint(&w->top, last_key->len) ||
	    buf_append(&w->top, last_key->data, last_key->len) ||
	    buf_put_varint(&w->top, off) || buf_put_varint(&w->top, w->frame.len) ||
	    buf_put_varint(&w->top, w->part.len) || buf_put_varint(&w->top, w->part_blocks))
		return diag_set(STRATA_ENOMEM, "run %s: cannot grow the top index", w->key);
	w->nparts++;
	w->part_blocks = 0;
	buf_reset(&w->part);
	return 0;
}

/**
 * Whether to try compressing the next data block. Once RUN_SAMPLE_AFTER blocks in a row
 * did not pay for their compression, only one block in sample_every is tried, until one
 * pays. Block i is judged by the blocks up to i - RUN_SAMPLE_LAG, which a writer with
 * helpers has always written out by then: the decisions, and so the file, do not depend
 * on how many threads encode or how fast.
 */
static int
run_writer_decide(struct run_writer *w)
{
	uint64_t i = w->decided++;
	if (i >= RUN_SAMPLE_LAG) {
		uint8_t r = w->results[i % RUN_SAMPLE_LAG]; /* block i - RUN_SAMPLE_LAG */
		if (r & RUN_BLOCK_TRIED)
			w->unpaid = (r & RUN_BLOCK_PACKED) ? 0 : w->unpaid + 1;
	}
	int sampling = w->unpaid >= RUN_SAMPLE_AFTER;
	int try = w->codec.compress != NULL && (!sampling || ++w->untried >= w->o.sample_every);
	if (try)
		w->untried = 0;
	return try;
}

/**
 * Write out data block number 'block' (its frame) and list it in the index partition:
 * its last key, offset, lengths, rows and bloom filter over hashes. Counts it by how it
 * was stored.
 */
static int
run_writer_put_block(struct run_writer *w, uint64_t block, const struct buf *frame,
		     size_t raw_len, uint64_t rows, const uint64_t *hashes,
		     const struct buf *last_key, int try, int packed)
{
	w->results[block % RUN_SAMPLE_LAG] = (uint8_t)((try ? RUN_BLOCK_TRIED : 0) |
						       (packed ? RUN_BLOCK_PACKED : 0));
	struct run_codec_stats *cs = w->o.codec;
	if (cs != NULL) {
		atomic_fetch_add(packed ? &cs->compressed : &cs->raw, 1);
		if (!try && w->codec.compress != NULL)
			atomic_fetch_add(&cs->untried, 1);
		if (packed)
			atomic_fetch_add(&cs->saved_bytes, raw_len + RUN_FRAME_OVERHEAD - frame->len);
	}
	uint64_t off = w->off;
	int rc = run_writer_emit(w, frame);
	if (rc)
		return rc;
	size_t flen = 0;
	uint64_t nbits = 0;
	if (w->o.bloom_bits_per_key != RUN_BLOOM_DISABLED) {
		nbits = rows * w->o.bloom_bits_per_key;
		if (nbits < 64)
			nbits = 64;
		if (w->o.pow2_filters && (nbits & (nbits - 1)) != 0)
			nbits = (uint64_t)1 << (64 - __builtin_clzll(nbits));
		flen = (size_t)((nbits + 7) / 8) + 1;
		nbits = (uint64_t)(flen - 1) * 8;
	}
	if (buf_put_varint(&w->part, last_key->len) ||
	    buf_append(&w->part, last_key->data, last_key->len) ||
	    buf_put_varint(&w->part, off) || buf_put_varint(&w->part, frame->len) ||
	    buf_put_varint(&w->part, raw_len) || buf_put_varint(&w->part, rows) ||
	    buf_put_varint(&w->part, flen) || buf_reserve(&w->part, flen))
		return diag_set(STRATA_ENOMEM, "run %s: cannot grow an index partition", w->key);
	if (flen > 0) {
		uint8_t *f = w->part.data + w->part.len;
		uint32_t k = run_bloom_k(w->o.bloom_k_bits_per_key ? w->o.bloom_k_bits_per_key
								  : w->o.bloom_bits_per_key);
		unsigned mode = w->o.pow2_filters ? RUN_BLOOM_POW2
			      : w->o.legacy_filters ? 0 : RUN_BLOOM_RANGE;
		memset(f, 0, flen);
		for (uint64_t i = 0; i < rows; i++)
			run_bloom_set(f, nbits, k, mode, hashes[i]);
		f[flen - 1] = (uint8_t)(k | mode);
		w->part.len += flen;
	}
	w->part_blocks++;
	w->meta.blocks++;
	if (w->part.len >= w->o.index_partition_bytes)
		return run_writer_flush_part(w, last_key);
	return 0;
}

/* ---- the writer's helpers ---- */

static void
run_job_encode(const struct run_crew *c, struct run_job *j)
{
	j->rc = run_frame_encode(j->try ? c->codec : NULL, j->raw.data, j->raw.len, &j->frame,
				 &j->packed);
}

/** Take the oldest queued job and encode it, with c->mu held (released meanwhile);
 *  helper: the calling thread is one of the crew's, not the writer's. */
static void
run_crew_take(struct run_crew *c, int helper)
{
	struct run_job *j = &c->jobs[c->next++ % c->depth];
	if (j->done)
		return; /* a block not tried: the writer framed it as it queued it */
	pthread_mutex_unlock(&c->mu);
	run_job_encode(c, j);
	pthread_mutex_lock(&c->mu);
	j->helped = helper;
	j->done = 1;
	pthread_cond_broadcast(&c->done);
}

static void *
run_crew_main(void *arg)
{
	struct run_crew *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->stop && c->next == c->tail)
			pthread_cond_wait(&c->work, &c->mu);
		if (c->next == c->tail)
			break;
		run_crew_take(c, 1);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/** Stop the helpers (they finish what is queued first), join them, free the crew. */
static void
run_crew_free(struct run_crew *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->mu);
	for (unsigned i = 0; i < c->nthreads; i++)
		pthread_join(c->threads[i], NULL);
	for (unsigned i = 0; c->jobs != NULL && i < c->depth; i++) {
		buf_destroy(&c->jobs[i].raw);
		buf_destroy(&c->jobs[i].frame);
		buf_destroy(&c->jobs[i].last_key);
		env.free(c->jobs[i].hashes);
	}
	env.free(c->jobs);
	env.free(c->threads);
	pthread_cond_destroy(&c->work);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->mu);
	env.free(c);
}

/** Start threads - 1 helpers for w. */
static int
run_crew_start(struct run_writer *w, unsigned threads)
{
	struct run_crew *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate its helpers", w->key);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->done, NULL);
	c->codec = &w->codec;
	c->depth = 2 * threads < RUN_MAX_IN_FLIGHT ? 2 * threads : RUN_MAX_IN_FLIGHT;
	c->jobs = env.calloc(c->depth, sizeof(*c->jobs));
	c->threads = env.calloc(threads - 1, sizeof(*c->threads));
	if (c->jobs == NULL || c->threads == NULL) {
		run_crew_free(c);
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate its helpers", w->key);
	}
	for (unsigned i = 0; i + 1 < threads; i++) {
		int err = pthread_create(&c->threads[i], NULL, run_crew_main, c);
		if (err != 0) {
			run_crew_free(c);
			return diag_set(STRATA_EIO, "run %s: cannot start a helper thread: %s",
					w->key, strerror(err));
		}
		c->nthreads++;
	}
	w->crew = c;
	return 0;
}

/** Wait for the oldest block in flight (encoding queued ones meanwhile) and write it out. */
static int
run_writer_put_oldest(struct run_writer *w)
{
	struct run_crew *c = w->crew;
	assert(c->head < c->tail);
	struct run_job *j = &c->jobs[c->head % c->depth];
	pthread_mutex_lock(&c->mu);
	while (!j->done) {
		if (c->next < c->tail)
			run_crew_take(c, 0);
		else
			pthread_cond_wait(&c->done, &c->mu);
	}
	/* A block the writer framed itself is done before any thread took it: no thread
	 * may take it after it is written out, when its slot holds a newer block. */
	if (c->next <= c->head)
		c->next = c->head + 1;
	pthread_mutex_unlock(&c->mu);
	uint64_t block = c->head++;
	if (j->rc)
		return diag_set(j->rc, "run %s: cannot allocate a block frame", w->key);
	if (j->helped && w->o.codec != NULL)
		atomic_fetch_add(&w->o.codec->helped, 1);
	return run_writer_put_block(w, block, &j->frame, j->raw.len, j->rows, j->hashes,
				    &j->last_key, j->try, j->packed);
}

/** Write out every block in flight. */
static int
run_writer_drain(struct run_writer *w)
{
	int rc = 0;
	while (rc == 0 && w->crew != NULL && w->crew->head < w->crew->tail)
		rc = run_writer_put_oldest(w);
	return rc;
}

/** Hand the current block to the helpers (room made first: at most depth in flight). */
static int
run_writer_queue_block(struct run_writer *w)
{
	struct run_crew *c = w->crew;
	int rc = 0;
	while (rc == 0 && c->tail - c->head >= c->depth)
		rc = run_writer_put_oldest(w);
	if (rc)
		return rc;
	struct run_job *j = &c->jobs[c->tail % c->depth];
	buf_reset(&j->last_key);
	if (buf_append(&j->last_key, w->last_key.data, w->last_key.len))
		return diag_set(STRATA_ENOMEM, "run %s: cannot queue a block", w->key);
	/* Trade buffers: the job takes the block's rows and hashes, the writer fills the
	 * job's old ones next. */
	struct buf raw = j->raw;
	j->raw = w->block;
	w->block = raw;
	uint64_t *h = j->hashes;
	size_t hcap = j->hashes_cap;
	j->hashes = w->hashes;
	j->hashes_cap = w->hashes_cap;
	w->hashes = h;
	w->hashes_cap = hcap;
	j->rows = w->block_rows;
	j->try = run_writer_decide(w);
	j->done = 0;
	/* A block not tried is only framed (a copy and a checksum): the writer does that
	 * itself, on the rows still in its cache, rather than hand them to a helper and
	 * wait for them back. It still goes through the ring, so blocks go out in order. */
	if (!j->try) {
		run_job_encode(c, j);
		j->helped = 0;
		j->done = 1;
	}
	pthread_mutex_lock(&c->mu);
	c->tail++;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int
run_writer_flush_block(struct run_writer *w)
{
	assert(w->block_rows > 0);
	int rc;
	if (w->crew != NULL) {
		rc = run_writer_queue_block(w);
	} else {
		uint64_t block = w->decided;
		int try = run_writer_decide(w);
		int packed = 0;
		rc = run_frame_encode(try ? &w->codec : NULL, w->block.data, w->block.len, &w->frame,
				      &packed);
		if (rc)
			return diag_set(rc, "run %s: cannot allocate a block frame", w->key);
		rc = run_writer_put_block(w, block, &w->frame, w->block.len, w->block_rows,
					  w->hashes, &w->last_key, try, packed);
	}
	if (rc)
		return rc;
	w->block_rows = 0;
	buf_reset(&w->block);
	run_buf_trim(&w->block, RUN_TRIM_FACTOR * (size_t)w->o.block_bytes + RUN_TRIM_SLACK);
	run_buf_trim(&w->frame, RUN_TRIM_FACTOR * (size_t)w->o.block_bytes + RUN_TRIM_SLACK);
	return 0;
}

static void
run_writer_free(struct run_writer *w)
{
	run_crew_free(w->crew);
	buf_destroy(&w->block);
	buf_destroy(&w->frame);
	buf_destroy(&w->part);
	buf_destroy(&w->top);
	buf_destroy(&w->first_key);
	buf_destroy(&w->last_key);
	env.free(w->hashes);
	env.free(w->key);
	env.free(w);
}

int
run_writer_open(struct objstore *os, const char *key, const struct run_writer_options *o,
		struct run_writer **out)
{
	struct run_writer_options opt = { 0 };
	if (o != NULL)
		opt = *o;
	if (opt.block_bytes == 0)
		opt.block_bytes = RUN_DEFAULT_BLOCK;
	if (opt.zstd_level == 0)
		opt.zstd_level = RUN_DEFAULT_LEVEL;
	if (opt.bloom_bits_per_key == 0)
		opt.bloom_bits_per_key = RUN_DEFAULT_BLOOM;
	if (opt.index_partition_bytes == 0)
		opt.index_partition_bytes = RUN_DEFAULT_PARTITION;
	if (opt.max_compressed_per_kib == 0)
		opt.max_compressed_per_kib = RUN_DEFAULT_MAX_PER_KIB;
	if (opt.sample_every == 0)
		opt.sample_every = RUN_DEFAULT_SAMPLE_EVERY;
	if (os == NULL || key == NULL || key[0] == '\0')
		return diag_set(STRATA_EINVAL, "run: no object store or key");
	if (opt.block_bytes < RUN_MIN_BLOCK_BYTES || opt.block_bytes > RUN_MAX_BLOCK_BYTES)
		return diag_set(STRATA_EINVAL, "run %s: block_bytes %u outside %u..%u", key,
				opt.block_bytes, RUN_MIN_BLOCK_BYTES, RUN_MAX_BLOCK_BYTES);
	if (opt.index_partition_bytes < RUN_MIN_BLOCK_BYTES ||
	    opt.index_partition_bytes > RUN_MAX_BLOCK_BYTES)
		return diag_set(STRATA_EINVAL, "run %s: index_partition_bytes %u outside %u..%u",
				key, opt.index_partition_bytes, RUN_MIN_BLOCK_BYTES,
				RUN_MAX_BLOCK_BYTES);
	if (opt.zstd_level < ZSTD_minCLevel() || opt.zstd_level > ZSTD_maxCLevel())
		return diag_set(STRATA_EINVAL, "run %s: zstd_level %d outside %d..%d", key,
				opt.zstd_level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	if (opt.bloom_bits_per_key != RUN_BLOOM_DISABLED &&
	    opt.bloom_bits_per_key > RUN_MAX_BLOOM_BITS)
		return diag_set(STRATA_EINVAL, "run %s: bloom_bits_per_key %u over %u", key,
				opt.bloom_bits_per_key, RUN_MAX_BLOOM_BITS);
	if (opt.max_compressed_per_kib != RUN_COMPRESS_OFF && opt.max_compressed_per_kib > 1024)
		return diag_set(STRATA_EINVAL, "run %s: max_compressed_per_kib %u over 1024", key,
				opt.max_compressed_per_kib);
	if (opt.threads > RUN_MAX_THREADS)
		return diag_set(STRATA_EINVAL, "run %s: threads %u over %u", key, opt.threads,
				RUN_MAX_THREADS);

	struct run_writer *w = env.calloc(1, sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a writer", key);
	w->os = os;
	w->o = opt;
	w->key = run_strdup(key);
	if (opt.max_compressed_per_kib != RUN_COMPRESS_OFF)
		w->codec = (struct run_codec){ opt.compress ? opt.compress : run_zstd_compress,
					       opt.zstd_level, opt.max_compressed_per_kib };
	if (w->key == NULL) {
		run_writer_free(w);
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a writer", key);
	}
	int rc = opt.threads > 1 ? run_crew_start(w, opt.threads) : 0;
	if (rc == 0)
		rc = objstore_writer_open(os, key, &w->ow);
	if (rc) {
		run_writer_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int
run_writer_add(struct run_writer *w, const void *key, size_t klen, uint64_t seq, const void *val,
	       size_t vlen)
{
	return run_writer_add_kind(w, key, klen, seq, val, vlen, STRATA_ROW_PUT);
}

int
run_writer_add_kind(struct run_writer *w, const void *key, size_t klen, uint64_t seq,
		    const void *val, size_t vlen, uint32_t kind)
{
	if (w->err)
		return w->err;
	if (kind != STRATA_ROW_PUT && (kind != STRATA_ROW_DELETE || vlen > 0))
		return diag_set(STRATA_EINVAL, "run %s: row of kind %u with a value of %zu bytes",
				w->key, (unsigned)kind, vlen);
	if (key == NULL || klen == 0)
		return diag_set(STRATA_EINVAL, "run %s: empty key", w->key);
	if (val == NULL && vlen > 0)
		return diag_set(STRATA_EINVAL, "run %s: NULL value of %zu bytes", w->key, vlen);
	if (klen > STRATA_MAX_KEY)
		return diag_set(STRATA_ETOOBIG, "run %s: key of %zu bytes over %u", w->key, klen,
				STRATA_MAX_KEY);
	if (vlen > RUN_MAX_VALUE)
		return diag_set(STRATA_ETOOBIG, "run %s: value of %zu bytes over %u", w->key, vlen,
				RUN_MAX_VALUE);
	if (w->meta.rows > 0 && key_cmp(key, klen, w->last_key.data, w->last_key.len) <= 0)
		return diag_set(STRATA_EINVAL, "run %s: key out of order at row %llu (keys must "
				"strictly increase)", w->key, (unsigned long long)w->meta.rows);
	size_t rowlen = 1 + enc_varint_len(klen) + enc_varint_len(vlen) + 8 + klen + vlen;
	int rc;
	if (w->block_rows > 0 && w->block.len + rowlen > w->o.block_bytes) {
		rc = run_writer_flush_block(w);
		if (rc)
			return run_writer_fail(w, rc);
	}
	if (w->block_rows == w->hashes_cap) {
		size_t cap = w->hashes_cap ? w->hashes_cap * 2 : 64;
		uint64_t *h = env.realloc(w->hashes, cap * sizeof(*h));
		if (h == NULL)
			return run_writer_fail(w, diag_set(STRATA_ENOMEM, "run %s: cannot grow "
							   "the key hashes", w->key));
		w->hashes = h;
		w->hashes_cap = cap;
	}
	if (buf_reserve(&w->block, rowlen) || buf_reserve(&w->last_key, klen) ||
	    (w->meta.rows == 0 && buf_reserve(&w->first_key, klen)))
		return run_writer_fail(w, diag_set(STRATA_ENOMEM, "run %s: cannot grow the "
						   "block to %zu bytes", w->key,
						   w->block.len + rowlen));
	/* Room for all of it is reserved above: encode in place, not through a call and a
	 * capacity check per field. */
	uint8_t *p = w->block.data + w->block.len;
	*p++ = (uint8_t)kind;
	p += enc_varint(p, klen);
	p += enc_varint(p, vlen);
	enc_u64(p, seq);
	p += 8;
	memcpy(p, key, klen);
	p += klen;
	if (vlen > 0)
		memcpy(p, val, vlen);
	w->block.len += rowlen;
	w->hashes[w->block_rows++] = XXH3_64bits(key, klen);
	memcpy(w->last_key.data, key, klen);
	w->last_key.len = klen;
	if (w->meta.rows == 0) {
		buf_append(&w->first_key, key, klen);
		w->meta.min_seq = w->meta.max_seq = seq;
	}
	if (seq < w->meta.min_seq)
		w->meta.min_seq = seq;
	if (seq > w->meta.max_seq)
		w->meta.max_seq = seq;
	w->meta.rows++;
	w->meta.raw_bytes += klen + vlen;
	return 0;
}

uint64_t
run_writer_blocks(const struct run_writer *w)
{
	return w->meta.blocks;
}

static int
run_writer_tail(struct run_writer *w)
{
	int rc;
	if (w->block_rows > 0 && (rc = run_writer_flush_block(w)) != 0)
		return rc;
	if ((rc = run_writer_drain(w)) != 0)
		return rc;
	if (w->part_blocks > 0 && (rc = run_writer_flush_part(w, &w->last_key)) != 0)
		return rc;
	uint8_t f[RUN_FOOTER_SIZE];
	memset(f, 0, sizeof(f));
	int packed;
	rc = run_frame_encode(&w->codec, w->top.data, w->top.len, &w->frame, &packed);
	if (rc)
		return diag_set(rc, "run %s: cannot allocate the top index frame", w->key);
	enc_u64(f + 0, w->off);
	enc_u64(f + 8, w->frame.len);
	enc_u64(f + 16, w->top.len);
	enc_u64(f + 24, w->nparts);
	if ((rc = run_writer_emit(w, &w->frame)) != 0)
		return rc;
	/* The top index is no longer needed: reuse it for the meta section. */
	buf_reset(&w->top);
	if (buf_put_varint(&w->top, w->first_key.len) ||
	    buf_append(&w->top, w->first_key.data, w->first_key.len) ||
	    buf_put_varint(&w->top, w->last_key.len) ||
	    buf_append(&w->top, w->last_key.data, w->last_key.len))
		return diag_set(STRATA_ENOMEM, "run %s: cannot build the meta section", w->key);
	rc = run_frame_encode(NULL, w->top.data, w->top.len, &w->frame, &packed);
	if (rc)
		return diag_set(rc, "run %s: cannot allocate the meta frame", w->key);
	enc_u64(f + 32, w->off);
	enc_u64(f + 40, w->frame.len);
	enc_u64(f + 48, w->top.len);
	if ((rc = run_writer_emit(w, &w->frame)) != 0)
		return rc;
	enc_u64(f + 56, w->meta.rows);
	enc_u64(f + 64, w->meta.blocks);
	enc_u64(f + 72, w->meta.raw_bytes);
	enc_u64(f + 80, w->meta.min_seq);
	enc_u64(f + 88, w->meta.max_seq);
	enc_u32(f + 96, RUN_FORMAT_VERSION);
	enc_u32(f + 100, crc32c(0, f, 100));
	memcpy(f + 104, RUN_MAGIC, 8);
	rc = objstore_writer_write(w->ow, f, sizeof(f));
	if (rc)
		return rc;
	w->off += sizeof(f);
	return 0;
}

int
run_writer_finish(struct run_writer *w, struct run_meta *meta)
{
	int rc = w->err;
	if (rc == 0)
		rc = run_writer_tail(w);
	if (rc) {
		run_writer_abort(w);
		return rc;
	}
	rc = objstore_writer_commit(w->ow);
	w->ow = NULL;
	if (rc == 0 && meta != NULL) {
		*meta = w->meta;
		meta->bytes = w->off;
	}
	run_writer_free(w);
	return rc;
}

void
run_writer_abort(struct run_writer *w)
{
	if (w == NULL)
		return;
	if (w->ow != NULL)
		objstore_writer_abort(w->ow);
	run_writer_free(w);
}

/* ---- reader ----------------------------------------------------------------- */

static void
run_part_destroy(struct run_part *p)
{
	buf_destroy(&p->disk);
	buf_destroy(&p->raw);
	env.free(p->e);
	memset(p, 0, sizeof(*p));
}

/** Read, verify and parse partition i of r into p (reusing p's memory). */
static int
run_part_load(struct run_reader *r, size_t i, ZSTD_DCtx *dctx, struct run_part *p)
{
	const struct run_pentry *pe = &r->parts[i];
	char what[64];
	snprintf(what, sizeof(what), "partition %zu at offset %llu", i,
		 (unsigned long long)pe->off);
	p->n = 0;
	int rc = run_read(r->os, r->key, what, pe->off, pe->disk_len, &p->disk);
	if (rc)
		return rc;
	const uint8_t *bytes;
	rc = run_frame_decode(r->os, r->key, what, p->disk.data, p->disk.len, pe->raw_len, dctx,
			      &p->raw, &bytes);
	if (rc)
		return rc;
	if (pe->nblocks > p->cap) {
		struct run_bentry *e = env.realloc(p->e, pe->nblocks * sizeof(*e));
		if (e == NULL)
			return diag_set(STRATA_ENOMEM, "run %s: %s: cannot allocate %llu entries",
					r->key, what, (unsigned long long)pe->nblocks);
		p->e = e;
		p->cap = pe->nblocks;
	}
	struct rd rd;
	rd_init(&rd, bytes, pe->raw_len);
	for (uint64_t b = 0; b < pe->nblocks; b++) {
		struct run_bentry *e = &p->e[b];
		e->klen = rd_varint(&rd);
		if (rd.err || e->klen == 0 || e->klen > STRATA_MAX_KEY)
			break;
		e->key = rd_bytes(&rd, e->klen);
		e->off = rd_varint(&rd);
		e->disk_len = rd_varint(&rd);
		e->raw_len = rd_varint(&rd);
		e->nrows = rd_varint(&rd);
		e->flen = rd_varint(&rd);
		if (rd.err || e->flen > rd_left(&rd))
			break;
		e->filter = e->flen ? rd_bytes(&rd, e->flen) : NULL;
		if (e->disk_len < RUN_FRAME_OVERHEAD || e->off > pe->off ||
		    e->disk_len > pe->off - e->off || e->raw_len > RUN_MAX_RAW || e->nrows == 0)
			return run_corrupt(r->os, r->key, "%s: entry %llu (block at offset %llu, "
					   "%llu bytes) is out of bounds", what,
					   (unsigned long long)b, (unsigned long long)e->off,
					   (unsigned long long)e->disk_len);
		p->n++;
	}
	if (rd.err || p->n != pe->nblocks || rd_left(&rd) != 0)
		return run_corrupt(r->os, r->key, "%s: malformed (parsed %zu of %llu entries)",
				   what, p->n, (unsigned long long)pe->nblocks);
	const struct run_bentry *last = &p->e[p->n - 1];
	if (key_cmp(last->key, last->klen, pe->key, pe->klen) != 0)
		return run_corrupt(r->os, r->key, "%s: last key differs from the top index", what);
	return 0;
}

/** Bytes a loaded partition holds (what the cache is charged for it). */
static size_t
run_part_charge(const struct run_part *p)
{
	return sizeof(*p) + p->disk.cap + p->raw.cap + p->cap * sizeof(*p->e);
}

static void
run_part_free(void *v)
{
	struct run_part *p = v;
	run_part_destroy(p);
	env.free(p);
}

static void
run_count(_Atomic(uint64_t) *c)
{
	if (c != NULL)
		atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/**
 * Partition i: from the reader (a resident one, or any without a cache), else from the
 * block cache, else read (with no lock held) and installed where it belongs. *h is the
 * cache handle to release once done with *out (NULL when the reader keeps it).
 */
static int
run_part_get(struct run_reader *r, size_t i, const struct run_part **out, struct bcache_entry **h)
{
	*h = NULL;
	struct run_part *p = __atomic_load_n(&r->cache[i], __ATOMIC_ACQUIRE);
	if (p != NULL) {
		*out = p;
		return 0;
	}
	struct bcache *bc = r->ro.cache;
	uint64_t off = r->parts[i].off;
	if (bc != NULL) {
		struct bcache_entry *e = bcache_lookup(bc, r->id, off);
		if (e != NULL) {
			run_count(r->ro.hits);
			*h = e;
			*out = bcache_value(e);
			return 0;
		}
		run_count(r->ro.misses);
	}
	p = env.calloc(1, sizeof(*p));
	if (p == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a partition", r->key);
	ZSTD_DCtx *d = run_dctx();
	int rc = d != NULL ? run_part_load(r, i, d, p)
			   : diag_set(STRATA_ENOMEM, "run %s: cannot allocate a decompression context",
				      r->key);
	if (rc) {
		run_part_free(p);
		return rc;
	}
	if (p->raw.data != NULL)
		buf_destroy(&p->disk);
	size_t charge = run_part_charge(p);
	if (bc == NULL || (r->ro.resident_index && bcache_reserve(bc, charge) == 0)) {
		pthread_mutex_lock(&r->mu);
		struct run_part *cur = r->cache[i];
		if (cur == NULL) {
			__atomic_store_n(&r->cache[i], p, __ATOMIC_RELEASE);
			if (bc != NULL)
				atomic_fetch_add(&r->resident_bytes, charge);
		}
		pthread_mutex_unlock(&r->mu);
		if (cur != NULL) {
			if (bc != NULL)
				bcache_unreserve(bc, charge);
			run_part_free(p);
			p = cur;
		}
		*out = p;
		return 0;
	}
	struct bcache_entry *e = bcache_insert(bc, r->id, off, p, charge, run_part_free);
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot cache a partition", r->key);
	*h = e;
	*out = bcache_value(e);
	return 0;
}

/** Read and verify a data block; *bytes receives its raw rows. */
static int
run_block_load(struct run_reader *r, const struct run_bentry *e, ZSTD_DCtx *dctx, struct buf *disk,
	       struct buf *raw, const uint8_t **bytes)
{
	char what[64];
	snprintf(what, sizeof(what), "block at offset %llu", (unsigned long long)e->off);
	int rc = run_read(r->os, r->key, what, e->off, e->disk_len, disk);
	if (rc)
		return rc;
	return run_frame_decode(r->os, r->key, what, disk->data, disk->len, e->raw_len, dctx, raw,
				bytes);
}

/** Verify a frame and write its raw_len raw bytes into dst (room for raw_len). */
static int
run_frame_decode_to(struct objstore *os, const char *key, const char *what, const uint8_t *frame,
		    size_t len, uint64_t raw_len, ZSTD_DCtx *dctx, uint8_t *dst)
{
	size_t body;
	int rc = run_frame_check(os, key, what, frame, len, &body);
	if (rc)
		return rc;
	switch (frame[0]) {
	case RUN_CODEC_RAW:
		if (body - 1 != raw_len)
			return run_corrupt(os, key, "%s: raw frame holds %zu bytes, expected %llu",
					   what, body - 1, (unsigned long long)raw_len);
		if (raw_len > 0)
			memcpy(dst, frame + 1, raw_len);
		return 0;
	case RUN_CODEC_ZSTD:
		return run_frame_unzstd(os, key, what, frame, body, raw_len, dctx, dst);
	default:
		return run_corrupt(os, key, "%s: unknown codec %u", what, frame[0]);
	}
}

/** Smallest encoded row of a run of version (kind byte, two 1-byte varints, seq, 1-byte
 *  key). */
static size_t
run_min_row(uint32_t version)
{
	return (version >= 2 ? 1u : 0u) + 1 + 1 + 8 + 1;
}

/** Read, verify and index data block e: its raw rows and the offset of each. */
static int
run_cblock_load(struct run_reader *r, const struct run_bentry *e, struct run_cblock **out,
		size_t *charge)
{
	char what[64];
	snprintf(what, sizeof(what), "block at offset %llu", (unsigned long long)e->off);
	if (e->nrows > e->raw_len / run_min_row(r->version))
		return run_corrupt(r->os, r->key, "%s: %llu rows cannot fit %llu bytes", what,
				   (unsigned long long)e->nrows, (unsigned long long)e->raw_len);
	size_t size = sizeof(struct run_cblock) + e->nrows * sizeof(uint32_t) + e->raw_len;
	struct run_cblock *b = env.malloc(size);
	if (b == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: %s: cannot allocate %zu bytes", r->key, what,
				size);
	b->rows = (uint32_t *)(b + 1);
	uint8_t *data = (uint8_t *)(b->rows + e->nrows);
	b->data = data;
	b->len = e->raw_len;
	b->nrows = e->nrows;
	struct buf disk = { 0 };
	int rc = run_read(r->os, r->key, what, e->off, e->disk_len, &disk);
	if (rc == 0) {
		ZSTD_DCtx *d = run_dctx();
		rc = d != NULL ? run_frame_decode_to(r->os, r->key, what, disk.data, disk.len,
						     e->raw_len, d, data)
			       : diag_set(STRATA_ENOMEM, "run %s: cannot allocate a zstd context",
					  r->key);
	}
	buf_destroy(&disk);
	struct rd rd;
	rd_init(&rd, data, e->raw_len);
	size_t n = 0;
	while (rc == 0 && rd_left(&rd) > 0) {
		struct run_row row;
		size_t at = e->raw_len - rd_left(&rd);
		if (n == e->nrows || run_row_parse(&rd, r->version, &row) != 0)
			rc = run_corrupt(r->os, r->key, "%s: malformed row %zu", what, n);
		else
			b->rows[n++] = (uint32_t)at;
	}
	if (rc == 0 && n != e->nrows)
		rc = run_corrupt(r->os, r->key, "%s: %zu rows, index says %llu", what, n,
				 (unsigned long long)e->nrows);
	if (rc) {
		env.free(b);
		return rc;
	}
	*out = b;
	*charge = size;
	return 0;
}

/** Data block e of r from the cache, or read (and cached). *h: the handle to release
 *  (NULL without a cache: free *out with env.free). */
static int
run_block_get(struct run_reader *r, const struct run_bentry *e, const struct run_cblock **out,
	      struct bcache_entry **h)
{
	*h = NULL;
	struct bcache *bc = r->ro.cache;
	if (bc != NULL) {
		struct bcache_entry *ce = bcache_lookup(bc, r->id, e->off);
		if (ce != NULL) {
			run_count(r->ro.hits);
			*h = ce;
			*out = bcache_value(ce);
			return 0;
		}
		run_count(r->ro.misses);
	}
	struct run_cblock *b = NULL;
	size_t charge = 0;
	int rc = run_cblock_load(r, e, &b, &charge);
	if (rc)
		return rc;
	if (bc == NULL) {
		*out = b;
		return 0;
	}
	struct bcache_entry *ce = bcache_insert(bc, r->id, e->off, b, charge, env.free);
	if (ce == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot cache a block", r->key);
	*h = ce;
	*out = bcache_value(ce);
	return 0;
}

/** Let go of a block run_block_get gave. */
static void
run_block_put(struct run_reader *r, const struct run_cblock *b, struct bcache_entry *h)
{
	if (h != NULL)
		bcache_release(r->ro.cache, h);
	else
		env.free((void *)b);
}

/** First top-index entry whose last key is >= key (nparts if none). */
static size_t
run_find_part(const struct run_reader *r, const void *key, size_t klen)
{
	size_t lo = 0, hi = r->nparts;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_cmp(r->parts[mid].key, r->parts[mid].klen, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/** First block of p whose last key is >= key (p->n if none). */
static size_t
run_find_block(const struct run_part *p, const void *key, size_t klen)
{
	size_t lo = 0, hi = p->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_cmp(p->e[mid].key, p->e[mid].klen, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/** Parse the top index and meta sections of a reader whose tail is loaded. */
static int
run_reader_parse_tail(struct run_reader *r, uint64_t top_len, uint64_t top_raw,
		      uint64_t nparts, uint64_t meta_len, uint64_t meta_raw)
{
	const uint8_t *top, *meta;
	int rc;
	ZSTD_DCtx *d = run_dctx();
	if (d == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a decompression context", r->key);
	rc = run_frame_decode(r->os, r->key, "top index", r->tail.data, top_len, top_raw, d,
			      &r->top_raw, &top);
	if (rc == 0)
		rc = run_frame_decode(r->os, r->key, "meta", r->tail.data + top_len, meta_len, meta_raw,
				      d, &r->meta_raw, &meta);
	if (rc)
		return rc;
	struct rd rd;
	rd_init(&rd, meta, meta_raw);
	r->min_klen = rd_varint(&rd);
	r->min_key = rd_bytes(&rd, r->min_klen);
	r->max_klen = rd_varint(&rd);
	r->max_key = rd_bytes(&rd, r->max_klen);
	if (rd.err || rd_left(&rd) != 0 || (r->meta.rows > 0) != (r->min_klen > 0) ||
	    (r->meta.rows > 0) != (r->max_klen > 0) ||
	    key_cmp(r->min_key, r->min_klen, r->max_key, r->max_klen) > 0)
		return run_corrupt(r->os, r->key, "meta: malformed");
	if (nparts > top_raw / 5 + 1 || (nparts == 0) != (r->meta.rows == 0))
		return run_corrupt(r->os, r->key, "footer: %llu partitions do not fit a top index "
				   "of %llu bytes", (unsigned long long)nparts,
				   (unsigned long long)top_raw);
	if (nparts > 0) {
		r->parts = env.calloc(nparts, sizeof(*r->parts));
		r->cache = env.calloc(nparts, sizeof(*r->cache));
		if (r->parts == NULL || r->cache == NULL)
			return diag_set(STRATA_ENOMEM, "run %s: cannot allocate %llu partitions",
					r->key, (unsigned long long)nparts);
	}
	rd_init(&rd, top, top_raw);
	uint64_t prev_end = 0;
	for (uint64_t i = 0; i < nparts; i++) {
		struct run_pentry *pe = &r->parts[i];
		pe->klen = rd_varint(&rd);
		if (rd.err || pe->klen == 0 || pe->klen > STRATA_MAX_KEY)
			break;
		pe->key = rd_bytes(&rd, pe->klen);
		pe->off = rd_varint(&rd);
		pe->disk_len = rd_varint(&rd);
		pe->raw_len = rd_varint(&rd);
		pe->nblocks = rd_varint(&rd);
		if (rd.err)
			break;
		if (pe->off < prev_end || pe->disk_len < RUN_FRAME_OVERHEAD ||
		    pe->off > r->data_end || pe->disk_len > r->data_end - pe->off ||
		    pe->raw_len > RUN_MAX_RAW || pe->nblocks == 0 ||
		    pe->nblocks > pe->raw_len / 5)
			return run_corrupt(r->os, r->key, "top index: entry %llu (partition at "
					   "offset %llu) is out of bounds", (unsigned long long)i,
					   (unsigned long long)pe->off);
		prev_end = pe->off + pe->disk_len;
		r->nparts++;
	}
	if (rd.err || r->nparts != nparts || rd_left(&rd) != 0)
		return run_corrupt(r->os, r->key, "top index: malformed (parsed %zu of %llu "
				   "entries)", r->nparts, (unsigned long long)nparts);
	if (nparts > 0 && key_cmp(r->parts[nparts - 1].key, r->parts[nparts - 1].klen,
				     r->max_key, r->max_klen) != 0)
		return run_corrupt(r->os, r->key, "top index: last key differs from meta");
	return 0;
}

/** Read and check the footer, top index and meta of r's object (r->mu held, or r not
 *  shared yet). */
static int
run_reader_load(struct run_reader *r)
{
	struct objstore *os = r->os;
	const char *key = r->key;
	int rc;
	uint64_t size;
	rc = objstore_size(os, key, &size);
	if (rc == STRATA_NOTFOUND)
		rc = diag_set(STRATA_EIO, "run %s (%s): object not found", key, os->name);
	if (rc)
		return rc;
	if (size < RUN_FOOTER_SIZE)
		return run_corrupt(os, key, "object of %llu bytes is shorter than a footer (%u "
				   "bytes): truncated or not a run", (unsigned long long)size,
				   RUN_FOOTER_SIZE);
	uint64_t foot_off = size - RUN_FOOTER_SIZE;
	if ((rc = run_read(os, key, "footer", foot_off, RUN_FOOTER_SIZE, &r->tail)) != 0)
		return rc;
	const uint8_t *f = r->tail.data;
	if (memcmp(f + 104, RUN_MAGIC, 8) != 0)
		return run_corrupt(os, key, "footer: bad magic at end of %llu-byte object "
				   "(truncated or not a run)", (unsigned long long)size);
	uint32_t version = dec_u32(f + 96);
	if (version > RUN_FORMAT_VERSION)
		return diag_set(STRATA_EVERSION, "run %s (%s): format version %u, this build reads "
				"up to %u", key, os->name, version, RUN_FORMAT_VERSION);
	if (crc32c(0, f, 100) != dec_u32(f + 100))
		return run_corrupt(os, key, "footer: checksum mismatch");
	if (version == 0)
		return run_corrupt(os, key, "footer: format version 0");
	r->version = version;
	uint64_t top_off = dec_u64(f + 0), top_len = dec_u64(f + 8), top_raw = dec_u64(f + 16);
	uint64_t nparts = dec_u64(f + 24), meta_off = dec_u64(f + 32), meta_len = dec_u64(f + 40);
	uint64_t meta_raw = dec_u64(f + 48);
	r->meta.rows = dec_u64(f + 56);
	r->meta.blocks = dec_u64(f + 64);
	r->meta.raw_bytes = dec_u64(f + 72);
	r->meta.min_seq = dec_u64(f + 80);
	r->meta.max_seq = dec_u64(f + 88);
	r->meta.bytes = size;
	if (top_off > foot_off || top_len > foot_off - top_off || meta_off != top_off + top_len ||
	    meta_len > foot_off - meta_off || meta_off + meta_len != foot_off ||
	    top_len < RUN_FRAME_OVERHEAD || meta_len < RUN_FRAME_OVERHEAD ||
	    meta_raw > 2 * STRATA_MAX_KEY + 8 || top_raw > RUN_MAX_RAW ||
	    (r->meta.rows == 0) != (r->meta.blocks == 0) || r->meta.blocks > r->meta.rows ||
	    nparts > r->meta.blocks)
		return run_corrupt(os, key, "footer: sections do not fit the %llu-byte object",
				   (unsigned long long)size);
	r->data_end = top_off;
	if ((rc = run_read(os, key, "top index", top_off, top_len + meta_len, &r->tail)) != 0)
		return rc;
	return run_reader_parse_tail(r, top_len, top_raw, nparts, meta_len, meta_raw);
}

/** A reader that has not read its object yet. */
static int
run_reader_new(struct objstore *os, const char *key, struct run_reader **out)
{
	*out = NULL;
	if (os == NULL || key == NULL || key[0] == '\0')
		return diag_set(STRATA_EINVAL, "run: no object store or key");
	struct run_reader *r = env.calloc(1, sizeof(*r));
	if (r == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a reader", key);
	r->os = os;
	r->id = bcache_new_id();
	pthread_mutex_init(&r->mu, NULL);
	r->key = run_strdup(key);
	if (r->key == NULL) {
		run_reader_close(r);
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a reader", key);
	}
	*out = r;
	return 0;
}

int
run_reader_open(struct objstore *os, const char *key, struct run_reader **out)
{
	struct run_reader *r;
	int rc = run_reader_new(os, key, &r);
	if (rc)
		return rc;
	if ((rc = run_reader_load(r)) != 0) {
		run_reader_close(r);
		*out = NULL;
		return rc;
	}
	atomic_store_explicit(&r->loaded, 1, memory_order_release);
	*out = r;
	return 0;
}

int
run_reader_open_lazy(struct objstore *os, const char *key, struct run_reader **out)
{
	return run_reader_new(os, key, out);
}

int
run_reader_open_with(struct objstore *os, const char *key, const struct run_read_options *ro,
		     int lazy, struct run_reader **out)
{
	int rc = lazy ? run_reader_open_lazy(os, key, out) : run_reader_open(os, key, out);
	if (rc == 0 && ro != NULL)
		(*out)->ro = *ro;
	return rc;
}

uint64_t
run_reader_resident_bytes(const struct run_reader *r)
{
	return atomic_load(&((struct run_reader *)r)->resident_bytes);
}

/** Load a lazy reader's object on first use. The IO runs with no lock held (into a
 *  reader of its own, installed under mu): a read that hangs in the object store holds
 *  up only its own caller, never another lookup of the same table. Two first uses at
 *  once may both read; one installs, the other's copy is dropped. A failure is
 *  retried by the next call. */
static int
run_reader_ensure(struct run_reader *r)
{
	if (atomic_load_explicit(&r->loaded, memory_order_acquire))
		return 0;
	struct run_reader *t;
	int rc = run_reader_new(r->os, r->key, &t);
	if (rc)
		return rc;
	if ((rc = run_reader_load(t)) == 0) {
		pthread_mutex_lock(&r->mu);
		if (!atomic_load_explicit(&r->loaded, memory_order_relaxed)) {
			r->meta = t->meta;
			r->version = t->version;
			r->data_end = t->data_end;
			r->tail = t->tail;
			r->top_raw = t->top_raw;
			r->meta_raw = t->meta_raw;
			r->min_key = t->min_key;
			r->min_klen = t->min_klen;
			r->max_key = t->max_key;
			r->max_klen = t->max_klen;
			r->parts = t->parts;
			r->nparts = t->nparts;
			r->cache = t->cache;
			memset(&t->tail, 0, sizeof(t->tail));
			memset(&t->top_raw, 0, sizeof(t->top_raw));
			memset(&t->meta_raw, 0, sizeof(t->meta_raw));
			t->parts = NULL;
			t->cache = NULL;
			t->nparts = 0;
			atomic_store_explicit(&r->loaded, 1, memory_order_release);
		}
		pthread_mutex_unlock(&r->mu);
	}
	run_reader_close(t);
	return rc;
}

void
run_reader_close(struct run_reader *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; r->cache != NULL && i < r->nparts; i++) {
		if (r->cache[i] != NULL) {
			run_part_destroy(r->cache[i]);
			env.free(r->cache[i]);
		}
	}
	env.free(r->probe);
	if (r->ro.cache != NULL && r->resident_bytes != 0)
		bcache_unreserve(r->ro.cache, r->resident_bytes);
	pthread_mutex_destroy(&r->mu);
	env.free(r->cache);
	env.free(r->parts);
	buf_destroy(&r->tail);
	buf_destroy(&r->top_raw);
	buf_destroy(&r->meta_raw);
	env.free(r->key);
	env.free(r);
}

const struct run_meta *
run_reader_meta(const struct run_reader *r)
{
	run_reader_ensure((struct run_reader *)r); /* on failure the zeroed totals */
	return &r->meta;
}

const char *
run_reader_key(const struct run_reader *r)
{
	return r->key;
}

uint64_t
run_reader_bloom_skips(const struct run_reader *r)
{
	return __atomic_load_n(&r->bloom_skips, __ATOMIC_RELAXED);
}

uint64_t
run_reader_partitions(const struct run_reader *r)
{
	run_reader_ensure((struct run_reader *)r);
	return r->nparts;
}

int
run_reader_partition(struct run_reader *r, uint64_t i, const void **key, size_t *klen,
		     uint64_t *data_bytes)
{
	int rc = run_reader_ensure(r);
	if (rc)
		return rc;
	if (i >= r->nparts)
		return diag_set(STRATA_EINVAL, "run %s: no index partition %llu (it has %zu)", r->key,
				(unsigned long long)i, r->nparts);
	const struct run_pentry *pe = &r->parts[i];
	/* A partition is written after its blocks: they lie between the previous one's
	 * frame and its own. */
	uint64_t from = i == 0 ? 0 : r->parts[i - 1].off + r->parts[i - 1].disk_len;
	*key = pe->key;
	*klen = pe->klen;
	*data_bytes = pe->off > from ? pe->off - from : 0;
	return 0;
}

int
run_reader_get(struct run_reader *r, const void *key, size_t klen, uint64_t *seq, void **val,
	       size_t *vlen)
{
	return run_reader_get_kind(r, key, klen, seq, val, vlen, NULL);
}

int
run_reader_get_kind(struct run_reader *r, const void *key, size_t klen, uint64_t *seq, void **val,
		    size_t *vlen, uint32_t *kind)
{
	if (key == NULL || klen == 0)
		return diag_set(STRATA_EINVAL, "run %s: empty key", r->key);
	struct run_key k;
	run_key_init(&k, key, klen);
	return run_reader_find(r, &k, 0, seq, val, vlen, kind);
}

void
run_key_init(struct run_key *k, const void *key, size_t klen)
{
	k->key = key;
	k->klen = klen;
	k->hash = XXH3_64bits(key, klen);
}

/** First row of b whose key is >= key (b->nrows if none), its parse in *row. */
static size_t
run_cblock_find(const struct run_cblock *b, uint32_t version, const void *key, size_t klen,
		struct run_row *row)
{
	size_t lo = 0, hi = b->nrows;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct rd rd;
		rd_init(&rd, b->data + b->rows[mid], b->len - b->rows[mid]);
		run_row_parse(&rd, version, row); /* checked when the block was loaded */
		if (key_cmp(row->key, row->klen, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < b->nrows) {
		struct rd rd;
		rd_init(&rd, b->data + b->rows[lo], b->len - b->rows[lo]);
		run_row_parse(&rd, version, row);
	}
	return lo;
}

/** Build the probe of r from its one partition p, kept by the reader (r loaded). */
static void
run_probe_build(struct run_reader *r, const struct run_part *p)
{
	size_t bytes = sizeof(struct run_probe) + p->n * sizeof(struct run_probe_block) + r->min_klen;
	for (size_t i = 0; i < p->n; i++)
		bytes += p->e[i].klen + p->e[i].flen;
	struct bcache *bc = r->ro.cache;
	if (bytes > RUN_PROBE_MAX_BYTES || (bc != NULL && bcache_reserve(bc, bytes) != 0)) {
		atomic_store(&r->probe_none, 1);
		return;
	}
	struct run_probe *pr = env.malloc(bytes);
	if (pr == NULL) {
		if (bc != NULL)
			bcache_unreserve(bc, bytes);
		return; /* tried again by the next lookup */
	}
	pr->max_seq = r->meta.max_seq;
	pr->nblocks = (uint32_t)p->n;
	pr->bytes = bytes;
	uint8_t *at = (uint8_t *)&pr->b[p->n];
	memcpy(at, r->min_key, r->min_klen);
	pr->min_key = at;
	pr->min_klen = (uint32_t)r->min_klen;
	at += r->min_klen;
	for (size_t i = 0; i < p->n; i++) {
		struct run_probe_block *b = &pr->b[i];
		memcpy(at, p->e[i].key, p->e[i].klen);
		b->key = at;
		b->klen = (uint32_t)p->e[i].klen;
		at += b->klen;
		b->flen = (uint32_t)p->e[i].flen;
		b->filter = b->flen ? at : NULL;
		if (b->flen)
			memcpy(at, p->e[i].filter, b->flen);
		at += b->flen;
	}
	pthread_mutex_lock(&r->mu);
	int won = r->probe == NULL;
	if (won) {
		__atomic_store_n(&r->probe, pr, __ATOMIC_RELEASE);
		if (bc != NULL)
			atomic_fetch_add(&r->resident_bytes, bytes);
	}
	pthread_mutex_unlock(&r->mu);
	if (!won) {
		if (bc != NULL)
			bcache_unreserve(bc, bytes);
		env.free(pr);
	}
}

/** A resident run that a lookup left without reading its partition (the key outside
 *  its range, or its rows older than what was found): build its probe now, once, so
 *  the next lookups (and a view's hints) answer from the probe without touching the
 *  reader. A partition the resident budget has no room for gets no probe. */
static void
run_probe_prepare(struct run_reader *r)
{
	if (!r->ro.resident_index || r->nparts != 1 || r->meta.rows == 0 ||
	    atomic_load_explicit(&r->probe_none, memory_order_relaxed))
		return;
	const struct run_part *p = NULL;
	struct bcache_entry *ph = NULL;
	if (run_part_get(r, 0, &p, &ph) != 0) {
		diag_clear(); /* the lookup's answer stands; a read in range reports it */
		return;
	}
	if (ph != NULL) {
		bcache_release(r->ro.cache, ph);
		atomic_store(&r->probe_none, 1);
		return;
	}
	if (__atomic_load_n(&r->probe, __ATOMIC_ACQUIRE) == NULL)
		run_probe_build(r, p);
}

int
run_probe_may_hold(const struct run_probe *pr, const struct run_key *k, uint64_t floor)
{
	if (floor != 0 && pr->max_seq <= floor)
		return 0;
	/* One block (a small generation): its filter answers first, before any key compare. */
	if (pr->nblocks == 1 && !run_bloom_may_contain_hash(pr->b[0].filter, pr->b[0].flen, k->hash))
		return 0;
	if (key_cmp(k->key, k->klen, pr->min_key, pr->min_klen) < 0)
		return 0;
	size_t lo = 0, hi = pr->nblocks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_cmp(pr->b[mid].key, pr->b[mid].klen, k->key, k->klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == pr->nblocks)
		return 0;
	return run_bloom_may_contain_hash(pr->b[lo].filter, pr->b[lo].flen, k->hash);
}

const struct run_probe *
run_reader_probe(const struct run_reader *r)
{
	return __atomic_load_n(&r->probe, __ATOMIC_ACQUIRE);
}

void
run_probe_prefetch(const struct run_probe *pr)
{
	__builtin_prefetch(pr);
	__builtin_prefetch((const char *)pr + 64);
}

void
run_reader_prefetch(const struct run_reader *r)
{
	const struct run_probe *pr = __atomic_load_n(&r->probe, __ATOMIC_RELAXED);
	if (pr != NULL) {
		__builtin_prefetch(pr);
		__builtin_prefetch((const char *)pr + 64);
	}
}

int
run_reader_find(struct run_reader *r, const struct run_key *k, uint64_t floor, uint64_t *seq,
		void **val, size_t *vlen, uint32_t *kind)
{
	const void *key = k->key;
	size_t klen = k->klen;
	struct run_probe *pr = __atomic_load_n(&r->probe, __ATOMIC_ACQUIRE);
	if (pr != NULL && !run_probe_may_hold(pr, k, floor))
		return STRATA_NOTFOUND;
	int lrc = run_reader_ensure(r);
	if (lrc)
		return lrc;
	if (r->meta.rows == 0 || (floor != 0 && r->meta.max_seq <= floor) ||
	    key_cmp(key, klen, r->min_key, r->min_klen) < 0 ||
	    key_cmp(key, klen, r->max_key, r->max_klen) > 0) {
		if (pr == NULL)
			run_probe_prepare(r);
		return STRATA_NOTFOUND;
	}
	size_t pi = run_find_part(r, key, klen);
	if (pi == r->nparts)
		return STRATA_NOTFOUND;
	const struct run_part *p = NULL;
	struct bcache_entry *ph;
	int rc = run_part_get(r, pi, &p, &ph);
	if (rc)
		return rc;
	if (pr == NULL && ph == NULL && r->ro.resident_index && r->nparts == 1 &&
	    !atomic_load_explicit(&r->probe_none, memory_order_relaxed))
		run_probe_build(r, p);
	size_t bi = run_find_block(p, key, klen);
	if (bi == p->n) {
		bcache_release(r->ro.cache, ph);
		return STRATA_NOTFOUND;
	}
	struct run_bentry e = p->e[bi];
	if (!run_bloom_may_contain_hash(e.filter, e.flen, k->hash)) {
		bcache_release(r->ro.cache, ph);
		__atomic_fetch_add(&r->bloom_skips, 1, __ATOMIC_RELAXED);
		return STRATA_NOTFOUND;
	}
	const struct run_cblock *b = NULL;
	struct bcache_entry *bh;
	rc = run_block_get(r, &e, &b, &bh);
	bcache_release(r->ro.cache, ph); /* e's key and filter are not used past here */
	if (rc)
		return rc;
	struct run_row row;
	size_t ri = run_cblock_find(b, r->version, key, klen, &row);
	rc = STRATA_NOTFOUND;
	if (ri < b->nrows && key_cmp(row.key, row.klen, key, klen) == 0) {
		void *v = env.malloc(row.vlen ? row.vlen : 1);
		if (v == NULL) {
			rc = diag_set(STRATA_ENOMEM, "run %s: cannot allocate a value of %zu bytes",
				      r->key, row.vlen);
		} else {
			if (row.vlen)
				memcpy(v, row.val, row.vlen);
			if (seq != NULL)
				*seq = row.seq;
			if (vlen != NULL)
				*vlen = row.vlen;
			if (kind != NULL)
				*kind = row.kind;
			*val = v;
			rc = 0;
		}
	}
	run_block_put(r, b, bh);
	return rc;
}

/* ---- iterator --------------------------------------------------------------- */

static int
run_iter_load_part(struct run_iter *it, size_t pi)
{
	it->part_loaded = 0;
	ZSTD_DCtx *d = run_dctx();
	if (d == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a zstd context", it->r->key);
	int rc = run_part_load(it->r, pi, d, &it->part);
	if (rc)
		return rc;
	it->pidx = pi;
	it->bidx = 0;
	it->part_loaded = 1;
	return 0;
}

static int
run_iter_load_block(struct run_iter *it)
{
	it->block_loaded = 0;
	const struct run_bentry *e = &it->part.e[it->bidx];
	run_buf_trim(&it->disk, RUN_TRIM_FACTOR * e->disk_len + RUN_TRIM_SLACK);
	run_buf_trim(&it->raw, RUN_TRIM_FACTOR * e->raw_len + RUN_TRIM_SLACK);
	ZSTD_DCtx *d = run_dctx();
	if (d == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate a zstd context", it->r->key);
	int rc = run_block_load(it->r, e, d, &it->disk, &it->raw, &it->bytes);
	if (rc)
		return rc;
	it->blen = e->raw_len;
	it->pos = 0;
	it->rows_seen = 0;
	it->block_loaded = 1;
	return 0;
}

/** Parse the row at it->pos into *row; 0, or ECORRUPT. Does not advance. */
static int
run_iter_peek(struct run_iter *it, struct run_row *row, size_t *next)
{
	struct rd rd;
	rd_init(&rd, it->bytes + it->pos, it->blen - it->pos);
	if (run_row_parse(&rd, it->r->version, row) != 0)
		return run_corrupt(it->r->os, it->r->key, "block at offset %llu: malformed row "
				   "at byte %zu", (unsigned long long)it->part.e[it->bidx].off,
				   it->pos);
	*next = it->blen - rd_left(&rd);
	return 0;
}

int
run_iter_new(struct run_reader *r, const void *key, size_t klen, struct run_iter **out)
{
	*out = NULL;
	int lrc = run_reader_ensure(r);
	if (lrc)
		return lrc;
	struct run_iter *it = env.calloc(1, sizeof(*it));
	if (it == NULL)
		return diag_set(STRATA_ENOMEM, "run %s: cannot allocate an iterator", r->key);
	it->r = r;
	int rc = 0;
	if (key == NULL) {
		*out = it;
		return 0;
	}
	size_t pi = run_find_part(r, key, klen);
	if (pi == r->nparts) {
		it->pidx = pi;
		*out = it;
		return 0;
	}
	if ((rc = run_iter_load_part(it, pi)) != 0)
		goto fail;
	it->bidx = run_find_block(&it->part, key, klen);
	if (it->bidx < it->part.n) {
		if ((rc = run_iter_load_block(it)) != 0)
			goto fail;
		while (it->pos < it->blen) {
			struct run_row row;
			size_t next;
			if ((rc = run_iter_peek(it, &row, &next)) != 0)
				goto fail;
			if (key_cmp(row.key, row.klen, key, klen) >= 0)
				break;
			it->pos = next;
			it->rows_seen++;
		}
	}
	*out = it;
	return 0;
fail:
	run_iter_free(it);
	return rc;
}

int
run_iter_next(struct run_iter *it)
{
	if (it->err)
		return it->err;
	int rc;
	for (;;) {
		if (it->block_loaded && it->pos < it->blen) {
			size_t next;
			if ((rc = run_iter_peek(it, &it->row, &next)) != 0)
				break;
			it->pos = next;
			it->rows_seen++;
			return 1;
		}
		if (it->block_loaded) {
			const struct run_bentry *e = &it->part.e[it->bidx];
			if (it->rows_seen != e->nrows) {
				rc = run_corrupt(it->r->os, it->r->key, "block at offset %llu: %llu "
						 "rows, index says %llu",
						 (unsigned long long)e->off,
						 (unsigned long long)it->rows_seen,
						 (unsigned long long)e->nrows);
				break;
			}
			it->block_loaded = 0;
			it->bidx++;
		}
		if (!it->part_loaded) {
			if (it->pidx >= it->r->nparts)
				return 0;
			if ((rc = run_iter_load_part(it, it->pidx)) != 0)
				break;
		}
		if (it->bidx >= it->part.n) {
			it->part_loaded = 0;
			it->pidx++;
			continue;
		}
		if ((rc = run_iter_load_block(it)) != 0)
			break;
	}
	it->err = rc;
	return rc;
}

void
run_iter_row(const struct run_iter *it, const void **key, size_t *klen, uint64_t *seq,
	     const void **val, size_t *vlen)
{
	if (key != NULL)
		*key = it->row.key;
	if (klen != NULL)
		*klen = it->row.klen;
	if (seq != NULL)
		*seq = it->row.seq;
	if (val != NULL)
		*val = it->row.val;
	if (vlen != NULL)
		*vlen = it->row.vlen;
}

void
run_iter_free(struct run_iter *it)
{
	if (it == NULL)
		return;
	run_part_destroy(&it->part);
	buf_destroy(&it->disk);
	buf_destroy(&it->raw);
	env.free(it);
}

/* ---- verify ----------------------------------------------------------------- */

/** State of a verification walk. */
struct run_verify_state {
	/** Expected offset of the next frame. */
	uint64_t pos;
	/** Totals recomputed from the blocks. */
	struct run_meta m;
	/** Previous key (for order). */
	struct buf prev;
};

static int
run_verify_block(struct run_reader *r, const struct run_bentry *e, ZSTD_DCtx *d,
		 struct buf *disk, struct buf *raw, struct run_verify_state *s)
{
	struct objstore *os = r->os;
	unsigned long long off = e->off;
	if (e->off != s->pos)
		return run_corrupt(os, r->key, "block at offset %llu: expected at offset %llu", off,
				   (unsigned long long)s->pos);
	const uint8_t *bytes;
	int rc = run_block_load(r, e, d, disk, raw, &bytes);
	if (rc)
		return rc;
	s->pos += e->disk_len;
	struct rd rd;
	rd_init(&rd, bytes, e->raw_len);
	uint64_t n = 0;
	struct run_row row = { 0 };
	while (rd_left(&rd) > 0) {
		if (run_row_parse(&rd, r->version, &row) != 0)
			return run_corrupt(os, r->key, "block at offset %llu: malformed row %llu",
					   off, (unsigned long long)n);
		if (row.klen == 0 || row.klen > STRATA_MAX_KEY)
			return run_corrupt(os, r->key, "block at offset %llu: row %llu has a key "
					   "of %zu bytes", off, (unsigned long long)n, row.klen);
		if (s->m.rows == 0 &&
		    key_cmp(row.key, row.klen, r->min_key, r->min_klen) != 0)
			return run_corrupt(os, r->key, "meta: smallest key differs from the "
					   "first row");
		if (s->m.rows > 0 && key_cmp(row.key, row.klen, s->prev.data, s->prev.len) <= 0)
			return run_corrupt(os, r->key, "block at offset %llu: row %llu is out of "
					   "key order", off, (unsigned long long)n);
		if (!run_bloom_may_contain(e->filter, e->flen, row.key, row.klen))
			return run_corrupt(os, r->key, "block at offset %llu: bloom filter misses "
					   "row %llu", off, (unsigned long long)n);
		if (s->m.rows == 0 || row.seq < s->m.min_seq)
			s->m.min_seq = row.seq;
		if (s->m.rows == 0 || row.seq > s->m.max_seq)
			s->m.max_seq = row.seq;
		buf_reset(&s->prev);
		if (buf_append(&s->prev, row.key, row.klen))
			return diag_set(STRATA_ENOMEM, "run %s: verify: out of memory", r->key);
		s->m.rows++;
		s->m.raw_bytes += row.klen + row.vlen;
		n++;
	}
	if (n != e->nrows)
		return run_corrupt(os, r->key, "block at offset %llu: %llu rows, index says %llu",
				   off, (unsigned long long)n, (unsigned long long)e->nrows);
	if (key_cmp(row.key, row.klen, e->key, e->klen) != 0)
		return run_corrupt(os, r->key, "block at offset %llu: last key differs from the "
				   "index", off);
	s->m.blocks++;
	return 0;
}

int
run_verify(struct objstore *os, const char *key, struct run_meta *meta)
{
	struct run_reader *r;
	int rc = run_reader_open(os, key, &r);
	if (rc)
		return rc;
	struct run_part p = { 0 };
	struct buf disk = { 0 }, raw = { 0 };
	struct run_verify_state s = { 0 };
	ZSTD_DCtx *d = run_dctx();
	if (d == NULL) {
		rc = diag_set(STRATA_ENOMEM, "run %s: cannot allocate a zstd context", key);
		goto out;
	}
	for (size_t i = 0; i < r->nparts; i++) {
		if ((rc = run_part_load(r, i, d, &p)) != 0)
			goto out;
		for (size_t b = 0; b < p.n; b++)
			if ((rc = run_verify_block(r, &p.e[b], d, &disk, &raw, &s)) != 0)
				goto out;
		if (r->parts[i].off != s.pos) {
			rc = run_corrupt(os, key, "partition %zu at offset %llu: expected at offset "
					 "%llu", i, (unsigned long long)r->parts[i].off,
					 (unsigned long long)s.pos);
			goto out;
		}
		s.pos += r->parts[i].disk_len;
	}
	if (s.pos != r->data_end) {
		rc = run_corrupt(os, key, "data ends at %llu, top index starts at %llu",
				 (unsigned long long)s.pos, (unsigned long long)r->data_end);
		goto out;
	}
	if (s.m.rows != r->meta.rows || s.m.blocks != r->meta.blocks ||
	    s.m.raw_bytes != r->meta.raw_bytes || s.m.min_seq != r->meta.min_seq ||
	    s.m.max_seq != r->meta.max_seq) {
		rc = run_corrupt(os, key, "footer totals differ from the blocks (rows %llu/%llu, "
				 "blocks %llu/%llu, raw bytes %llu/%llu, seq %llu..%llu/%llu..%llu)",
				 (unsigned long long)s.m.rows, (unsigned long long)r->meta.rows,
				 (unsigned long long)s.m.blocks, (unsigned long long)r->meta.blocks,
				 (unsigned long long)s.m.raw_bytes,
				 (unsigned long long)r->meta.raw_bytes,
				 (unsigned long long)s.m.min_seq, (unsigned long long)s.m.max_seq,
				 (unsigned long long)r->meta.min_seq,
				 (unsigned long long)r->meta.max_seq);
		goto out;
	}
	if (r->meta.rows > 0 && key_cmp(s.prev.data, s.prev.len, r->max_key, r->max_klen) != 0) {
		rc = run_corrupt(os, key, "meta: largest key differs from the last row");
		goto out;
	}
	if (meta != NULL)
		*meta = r->meta;
out:
	run_part_destroy(&p);
	buf_destroy(&disk);
	buf_destroy(&raw);
	buf_destroy(&s.prev);
	run_reader_close(r);
	return rc;
}

uint32_t
run_iter_kind(const struct run_iter *it)
{
	return it->row.kind;
}
