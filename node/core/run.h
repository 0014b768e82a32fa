/*
 * run.h — run files: the format of generations and base runs.
 *
 * A run is a sorted sequence of rows (key strictly increasing, one version per key;
 * a version is a put or a tombstone, STRATA_ROW_DELETE)
 * cut into blocks. Each block is zstd-compressed with a CRC32C trailer. The index is
 * partitioned: index partitions (each listing its blocks' last keys, positions and a
 * per-block bloom filter) are written between data blocks as the writer streams, and a
 * small top-level index lists the partitions. A checksummed footer with a magic and a
 * format version closes the file. The writer holds one block and one index partition
 * in memory; an iterator holds one block and one partition. Every checksum is verified
 * and a mismatch is STRATA_ECORRUPT with a message naming the object.
 */
#ifndef STRATA_RUN_H
#define STRATA_RUN_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../objstore/objstore.h"

struct ratelimit;
struct bcache;

/** Writer settings. Zero fields take defaults. */
struct run_writer_options {
	/** Uncompressed target block size (default 64 KiB); a larger row gets a block of its own. */
	uint32_t block_bytes;
	/** zstd level (default 1). */
	int zstd_level;
	/** Bloom bits per key (default 10; STRATA uses 0 from options to mean default). */
	uint32_t bloom_bits_per_key;
	/** Uncompressed target size of an index partition (default 64 KiB). */
	uint32_t index_partition_bytes;
	/** Size each block's filter to a power of two bits (at least the bits asked for):
	 *  a probe masks instead of dividing. For small runs whose filters stay resident
	 *  (generations); readers tell from the filter's length. */
	int pow2_filters;
	/** Otherwise filters probe h mod nbits, the format before RUN_BLOOM_RANGE (run.c):
	 *  for the tests that show such files still read, never set by the store. */
	int legacy_filters;
	/** Bits per key that set the number of probes k (0: bloom_bits_per_key): a larger
	 *  filter with the k of a smaller one is emptier, so a negative lookup stops at its
	 *  first or second probe (measured faster at 10 000 generations than the k of its
	 *  size, for as few false positives). */
	uint32_t bloom_k_bits_per_key;
	/** Budget every write of the run is drawn from (NULL: none). */
	struct ratelimit *limiter;
	/** Where the time waited on it is added (may be NULL). */
	_Atomic(uint64_t) *waited_ns;
	/** A compressed frame is kept only when it is at most this many bytes per KiB of its
	 *  raw bytes (0: RUN_DEFAULT_MAX_PER_KIB, which keeps those that save at least 1/8,
	 *  as RocksDB's max_compressed_bytes_per_kb; 1024: any saving; RUN_COMPRESS_OFF: never
	 *  compress). A frame that saves less is stored raw: incompressible values pay for
	 *  no compression on write and for no decompression on every read and merge. */
	uint32_t max_compressed_per_kib;
	/** Once RUN_SAMPLE_AFTER data blocks in a row did not pay, try to compress only one
	 *  block in this many until one pays again (0: RUN_DEFAULT_SAMPLE_EVERY; 1: try every
	 *  block). */
	uint32_t sample_every;
	/** The compressor (NULL: zstd on the thread's context at zstd_level): the compressed
	 *  size of src in dst (at most cap bytes), or 0 when it could not. A seam for tests. */
	size_t (*compress)(void *dst, size_t cap, const void *src, size_t n, int level);
	/** Where the writer counts its data blocks (may be NULL). */
	struct run_codec_stats *codec;
	/** Threads that encode (compress and checksum) the data blocks: 0 or 1, the writer's
	 *  own, block by block; n > 1 starts n - 1 helpers with the writer, which encode up
	 *  to RUN_MAX_IN_FLIGHT blocks (2n at most) while the writer's caller produces the
	 *  next ones; the writer helps when it waits. The file is byte for byte the same
	 *  for every n: whether a block is tried is decided from the blocks up to
	 *  RUN_SAMPLE_LAG before it, which are always done. */
	uint32_t threads;
};

/** Data blocks written, by how they were stored; atomics, shared by a shard's writers. */
struct run_codec_stats {
	/** Blocks stored compressed. */
	_Atomic(uint64_t) compressed;
	/** Blocks stored raw (compression tried and did not pay, or not tried). */
	_Atomic(uint64_t) raw;
	/** Blocks of raw stored without calling the compressor (sampling). */
	_Atomic(uint64_t) untried;
	/** Raw bytes less stored bytes of the compressed blocks. */
	_Atomic(uint64_t) saved_bytes;
	/** Blocks a helper thread encoded (run_writer_options.threads > 1), not the writer's. */
	_Atomic(uint64_t) helped;
};

/** Default max_compressed_per_kib: keep a compressed frame that saves at least 1/8. */
#define RUN_DEFAULT_MAX_PER_KIB 896u
/** max_compressed_per_kib that never compresses (frames are all raw). */
#define RUN_COMPRESS_OFF UINT32_MAX
/** Default sample_every. */
#define RUN_DEFAULT_SAMPLE_EVERY 16u
/** Data blocks in a row that did not pay before a writer starts sampling. */
#define RUN_SAMPLE_AFTER 4u
/** Whether data block i is tried is decided from blocks 0..i - RUN_SAMPLE_LAG: the
 *  first RUN_SAMPLE_AFTER + RUN_SAMPLE_LAG - 1 blocks of a run are all tried. */
#define RUN_SAMPLE_LAG 8u
/** Data blocks a writer with threads encodes at once, at most (RUN_SAMPLE_LAG). */
#define RUN_MAX_IN_FLIGHT RUN_SAMPLE_LAG
/** Most threads a writer takes (run_writer_options.threads). */
#define RUN_MAX_THREADS 64u

/** What a finished run holds; also read back from its footer. */
struct run_meta {
	/** Rows (= distinct keys). */
	uint64_t rows;
	/** Data blocks. */
	uint64_t blocks;
	/** Size of the object in bytes. */
	uint64_t bytes;
	/** Sum of uncompressed key and value bytes. */
	uint64_t raw_bytes;
	/** Smallest and largest seq in the run (0, 0 when empty). */
	uint64_t min_seq, max_seq;
};

/** bloom_bits_per_key value that writes no filters (0 means the default). */
#define RUN_BLOOM_DISABLED UINT32_MAX
/** Largest bloom_bits_per_key accepted. */
#define RUN_MAX_BLOOM_BITS 64u
/** Smallest block_bytes / index_partition_bytes accepted. */
#define RUN_MIN_BLOCK_BYTES 64u
/** Largest block_bytes / index_partition_bytes accepted. */
#define RUN_MAX_BLOCK_BYTES (64u << 20)
/** Largest value a run accepts (STRATA_ETOOBIG above); keys are limited to STRATA_MAX_KEY. */
#define RUN_MAX_VALUE (1u << 30)

struct run_writer;
struct run_reader;
struct run_iter;

/** Start writing a run object under key. */
int run_writer_open(struct objstore *os, const char *key, const struct run_writer_options *o,
		    struct run_writer **out);
/** Add a row; keys must strictly increase (STRATA_EINVAL otherwise). */
int run_writer_add(struct run_writer *w, const void *key, size_t klen, uint64_t seq, const void *val,
		   size_t vlen);
/** run_writer_add of a row of kind STRATA_ROW_PUT or STRATA_ROW_DELETE (vlen 0);
 *  STRATA_EINVAL for another kind or a delete with a value. */
int run_writer_add_kind(struct run_writer *w, const void *key, size_t klen, uint64_t seq,
			const void *val, size_t vlen, uint32_t kind);
/** Data blocks written so far (lets a caller notice block boundaries). */
uint64_t run_writer_blocks(const struct run_writer *w);
/** Write the last block, the index and the footer; make the object durable. Frees w. */
int run_writer_finish(struct run_writer *w, struct run_meta *meta);
/** Drop the run; nothing is left in the object store. Frees w. */
void run_writer_abort(struct run_writer *w);

/** Open a run: reads and verifies footer and top-level index. Thread-safe to use.
 *  A missing object is STRATA_EIO (a run that is referenced must exist). */
int run_reader_open(struct objstore *os, const char *key, struct run_reader **out);
/** A reader that reads nothing yet: the footer, top index and meta are read and checked
 *  by the first lookup or iterator (a failure then is that call's, and is retried by
 *  the next one). How a store opens a backlog of thousands of generations without
 *  reading one. */
int run_reader_open_lazy(struct objstore *os, const char *key, struct run_reader **out);
/** How a reader caches what it reads. Zero: no cache (blocks are read on every lookup;
 *  index partitions stay with the reader once loaded, unbounded). */
struct run_read_options {
	/** The store's block cache: decompressed data blocks and index partitions (NULL:
	 *  none). */
	struct bcache *cache;
	/** Keep index partitions (the blocks' keys, positions and bloom filters) with the
	 *  reader, outside the evicting part, while the cache's resident budget has room: a
	 *  lookup that the filter answers then reads nothing (pending generations). */
	int resident_index;
	/** Where lookups that found (hits) or missed (misses) their block or partition in
	 *  the cache are counted (each may be NULL). */
	_Atomic(uint64_t) *hits, *misses;
};

/** run_reader_open (lazy: run_reader_open_lazy) that caches as ro says (NULL: as a
 *  zeroed one). */
int run_reader_open_with(struct objstore *os, const char *key, const struct run_read_options *ro,
			 int lazy, struct run_reader **out);
/** Close a reader (the object is untouched). Safe on NULL. */
void run_reader_close(struct run_reader *r);
/** The run's metadata. */
const struct run_meta *run_reader_meta(const struct run_reader *r);
/** The object key the reader was opened on. */
const char *run_reader_key(const struct run_reader *r);
/** Point lookup, consulting the bloom filter first. On success *val is allocated
 *  with env.malloc (free with env.free). STRATA_NOTFOUND if absent. Thread-safe. */
int run_reader_get(struct run_reader *r, const void *key, size_t klen, uint64_t *seq, void **val,
		   size_t *vlen);
/** run_reader_get that also reports the row's kind (kind may be NULL): a tombstone is
 *  found like a put, with an empty value and *kind STRATA_ROW_DELETE. */
int run_reader_get_kind(struct run_reader *r, const void *key, size_t klen, uint64_t *seq,
			void **val, size_t *vlen, uint32_t *kind);
struct run_probe;

/** A key looked up in many runs: its bloom hash is computed once. */
struct run_key {
	/** Key bytes. */
	const void *key;
	/** Length of key (1..STRATA_MAX_KEY). */
	size_t klen;
	/** XXH3 of the key (run_key_init). */
	uint64_t hash;
};
/** Fill k for key. */
void run_key_init(struct run_key *k, const void *key, size_t klen);
/** run_reader_get_kind of k for a caller that holds a row of seq floor already: a run
 *  whose rows are all older (max seq <= floor) is not searched (STRATA_NOTFOUND).
 *  floor 0: any row. */
int run_reader_find(struct run_reader *r, const struct run_key *k, uint64_t floor, uint64_t *seq,
		    void **val, size_t *vlen, uint32_t *kind);
/** Start loading what run_reader_find of r touches first into the CPU cache (a caller
 *  probing many runs calls it a few runs ahead). */
void run_reader_prefetch(const struct run_reader *r);
/** The resident probe of a small run (its filters and block keys in one allocation),
 *  NULL until a lookup built it or when the run has none; valid until
 *  run_reader_close. */
const struct run_probe *run_reader_probe(const struct run_reader *r);
/** What a probe says of k: 0 the run has no row of k newer than floor (floor 0: any),
 *  1 it may (run_reader_find then says). */
int run_probe_may_hold(const struct run_probe *pr, const struct run_key *k, uint64_t floor);
/** Start loading pr into the CPU cache. */
void run_probe_prefetch(const struct run_probe *pr);
/** Bytes this reader keeps in the cache's resident budget now. */
uint64_t run_reader_resident_bytes(const struct run_reader *r);
/** Bloom probes of an index partition that said "absent" (skipped block reads), for
 *  tests and stats; those of a resident run's probe are not counted (the counter would
 *  be a write per run per lookup across a backlog). */
uint64_t run_reader_bloom_skips(const struct run_reader *r);
/** Index partitions of the run (for inspect and tests). */
uint64_t run_reader_partitions(const struct run_reader *r);
/** Index partition i of r: the last key of its last block (valid until
 *  run_reader_close) and the bytes its data blocks take in the object. How a merge
 *  cuts its key range into parts of about equal size without reading a block. */
int run_reader_partition(struct run_reader *r, uint64_t i, const void **key, size_t *klen,
			 uint64_t *data_bytes);

/** Create an iterator positioned before the first row with key >= key (NULL: first row). */
int run_iter_new(struct run_reader *r, const void *key, size_t klen, struct run_iter **out);
/** Advance: 1 on a row, 0 at the end, negative on error (corruption names the object). */
int run_iter_next(struct run_iter *it);
/** The current row; pointers valid until the next run_iter_next. */
void run_iter_row(const struct run_iter *it, const void **key, size_t *klen, uint64_t *seq,
		  const void **val, size_t *vlen);
/** Kind of the current row: STRATA_ROW_PUT or STRATA_ROW_DELETE. */
uint32_t run_iter_kind(const struct run_iter *it);
/** Free an iterator. Safe on NULL. */
void run_iter_free(struct run_iter *it);

/** Verify every block and index checksum of a run (for inspect and tests). */
int run_verify(struct objstore *os, const char *key, struct run_meta *meta);

#endif
