/*
 * bench_merge — peak memory and throughput of a merge, against generation size.
 *
 * For each value shape and each generation size S (MiB of raw row bytes), the parent
 * process writes BENCH_MERGE_GENS generations of S MiB each into a fresh strata store
 * (sync NONE, batches of 256 rows of a 16-byte key and a 200-byte value, a seal every
 * S MiB), closes it, drops the files from the page cache, and runs the merge in a
 * fresh child process (fork + exec of this binary):
 * the child opens the store, reads VmHWM, runs strata_prepare_merge and
 * strata_commit_merge of every generation, reads VmHWM again and reports the growth,
 * the time and MB/s (generation bytes from the stats before the merge / seconds of
 * prepare + commit); then it runs the reaper, which deletes the merged generations at
 * delete_bytes_per_s (256 MiB/s by default, as strata_merge does after its commit), and
 * reports that time on its own (del_secs). The goal is a growth that does not
 * depend on S. As a peer reference the same rows are loaded into RocksDB (auto
 * compactions off, one flush per S MiB, so the same number of L0 files) and a
 * child measures rocksdb_compact_range over everything in the same way, once per
 * RocksDB configuration: configured as strata is (zstd at strata's level, 64 KiB
 * blocks, bloom 10) and with RocksDB's own defaults (Snappy, 4 KiB blocks, no filter).
 * strata merges once per count of BENCH_MERGE_THREADS ("1,all": one thread, then
 * every online CPU), each on a copy of the same generations: with more than one, helper
 * threads compress the blocks of the run while the merge reads on, and the file written
 * is the same for any count; a merge on more than one thread with at least twice
 * merge_part_min_bytes (64 MiB) of input also splits its key range into parts written at
 * once (strata-tN/pP: P parts). RocksDB merges on one thread (max_subcompactions 1, its
 * default), and rocksdb-zstd-64k-sub with max_subcompactions = the online CPUs
 * (rocksdb-zstd-64k-sub/sN: its LOG says the compaction ran as N subcompactions).
 *
 * Value shapes (BENCH_MERGE_SHAPES): "random" bytes (incompressible), "half" as
 * db_bench --compression_ratio=0.5 makes them (each 100-byte piece is 50 random
 * printable characters, then those 50 again), "hex" (4 bits of entropy per byte).
 * Per shape it also times zstd alone at the bench's level on 32 MiB of the same rows
 * (64 KiB blocks, warm context and buffers, one thread), and prints beside each
 * one-thread strata merge its codec floor: the seconds that decompressing the input's
 * raw rows and compressing the output's take at those rates, which no engine around
 * the codec can go below on one thread (a shape whose blocks strata stores raw: the
 * sampled tries only).
 * Asserts nothing about speed or memory; it prints figures.
 *
 * Environment: BENCH_MERGE_GEN_MB ("64,512"), BENCH_MERGE_GENS (8),
 * BENCH_MERGE_VALUE (200 bytes), BENCH_MERGE_SHAPES ("random,half"),
 * BENCH_MERGE_OVERWRITE_PCT (10: share of rows that rewrite an older key),
 * BENCH_MERGE_ROCKSDB (1; 0 skips the peer reference), BENCH_MERGE_ROCKSDB_CONFIGS
 * ("zstd-64k,defaults,zstd-64k-sub"), BENCH_MERGE_ZSTD_LEVEL (strata's default, 1: the level of
 * strata's runs and of rocksdb-zstd-64k), BENCH_MERGE_THREADS ("1,all": strata's
 * merge_threads, a list of counts 1..64 or "all"), BENCH_DIR (data directory),
 * BENCH_MERGE_KEEP (set: keep a copy of each strata store built, DIR.keep, and print
 * its path, to profile one merge on a copy of it:
 * `bench_merge --child-strata COPY GEN_BYTES THREADS`, with the same environment).
 */
#include <inttypes.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <rocksdb/c.h>
#include <zstd.h>

#include "../../node/core/store.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "bench_util.h"

#ifndef BENCH_ROCKSDB_VERSION
#define BENCH_ROCKSDB_VERSION "(version unknown)"
#endif

enum { KEY_BYTES = 16, BATCH_ROWS = 256, MAX_SIZES = 8, MAX_VALUE = 1 << 20, MAX_THREAD_COUNTS = 4 };

/** How a value's bytes are drawn. */
enum shape { SHAPE_RANDOM, SHAPE_HALF, SHAPE_HEX, SHAPE_COUNT };

static const char *const shape_names[SHAPE_COUNT] = { "random", "half", "hex" };
static const char *const shape_docs[SHAPE_COUNT] = {
	"random bytes, incompressible",
	"db_bench --compression_ratio=0.5: 50 random printable bytes per 100, then those 50 again",
	"4 bits of entropy per byte",
};

/** The RocksDB configurations the merge is measured against. */
enum rdb_config { RDB_ZSTD_64K, RDB_DEFAULTS, RDB_ZSTD_64K_SUB, RDB_COUNT };

static const char *const rdb_names[RDB_COUNT] = { "zstd-64k", "defaults", "zstd-64k-sub" };
static const char *const rdb_docs[RDB_COUNT] = {
	"configured as strata: zstd at strata's level, 64 KiB blocks, bloom 10 bits/key",
	"RocksDB's defaults: Snappy, 4 KiB blocks, no filter",
	"zstd-64k with max_subcompactions = the online CPUs n, max_background_jobs n + 2 and n + 1 "
	"low-priority threads (the peer of strata's split merge on every thread)",
};

/** Workload shared by the builder and the children. */
struct workload {
	/** Raw row bytes (key + value) per generation. */
	uint64_t gen_bytes;
	/** Generations to build. */
	uint64_t gens;
	/** Value size in bytes. */
	uint64_t value_bytes;
	/** Percentage of rows that rewrite an older key. */
	uint64_t overwrite_pct;
	/** How values are drawn. */
	enum shape shape;
	/** zstd level of strata's runs and of RocksDB's zstd configuration. */
	int zstd_level;
};

/** What a merge child reports. */
struct merge_result {
	/** The child ran and reported. */
	int ok;
	/** Generations (strata) or L0 files (RocksDB) before the merge. */
	uint64_t inputs;
	/** Input file bytes: strata generation_bytes, RocksDB total SST bytes before. */
	uint64_t bytes_in;
	/** Output file bytes: strata merge_bytes_out, RocksDB total SST bytes after. */
	uint64_t bytes_out;
	/** Merge wall time in ns (strata: prepare + commit). */
	uint64_t ns;
	/** strata: the paced deletes of the merged generations after the commit, ns
	 *  (RocksDB deletes its inputs inside the merge: 0). */
	uint64_t del_ns;
	/** VmHWM at process start, in kB. */
	uint64_t hwm_start_kb;
	/** VmHWM after open, in kB. */
	uint64_t hwm_open_kb;
	/** VmHWM after the merge, in kB. */
	uint64_t hwm_merge_kb;
	/** strata: data blocks the merge wrote compressed and raw (RocksDB: 0). */
	uint64_t blocks_z, blocks_raw;
	/** strata: the merge's threads as the store ran them, and the blocks its helper
	 *  threads compressed (RocksDB: 0). */
	uint64_t threads, helped;
	/** strata: the runs a split merge wrote its key-range parts to (0: one run). */
	uint64_t parts;
	/** CPU time of the merge, all the process's threads, user + system, ns. */
	uint64_t cpu_ns;
};

/** CPU time this process has used so far, every thread, user + system, ns. */
static uint64_t
cpu_now_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/** splitmix64: a bijective mix of a row index. */
static inline uint64_t
mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/** Row i: key of 16 bytes (random order), value of the workload's shape. */
static void
make_row(const struct workload *wl, uint64_t i, uint8_t *key, uint8_t *value)
{
	uint64_t h = mix64(i);
	uint64_t ki = i;
	struct bench_rng rng = { .s = h | 1 };

	/* Some rows rewrite the key of an earlier row, so the merge has duplicates to drop. */
	if (i > 0 && (h >> 40) % 100 < wl->overwrite_pct)
		ki = (h >> 8) % i;
	uint64_t kh = mix64(ki ^ 0x5bd1e995ull);
	for (int b = 0; b < 8; b++) {
		key[b] = (uint8_t)(kh >> (56 - 8 * b));
		key[8 + b] = (uint8_t)(ki >> (56 - 8 * b));
	}
	switch (wl->shape) {
	case SHAPE_HEX:
		for (uint64_t off = 0; off < wl->value_bytes; off += 16) {
			uint64_t r = bench_rng_next(&rng);

			for (uint64_t j = 0; j < 16 && off + j < wl->value_bytes; j++)
				value[off + j] = (uint8_t)('a' + ((r >> (4 * j)) & 15));
		}
		break;
	case SHAPE_RANDOM:
		for (uint64_t off = 0; off < wl->value_bytes; off += 8) {
			uint64_t r = bench_rng_next(&rng);

			for (uint64_t j = 0; j < 8 && off + j < wl->value_bytes; j++)
				value[off + j] = (uint8_t)(r >> (8 * j));
		}
		break;
	default:
		/* db_bench's CompressibleString(ratio 0.5) over pieces of 100 bytes: a random
		 * string of ' '..'~' of half the piece, then copies of it to fill it. */
		for (uint64_t off = 0; off < wl->value_bytes; off += 100) {
			uint64_t piece = wl->value_bytes - off < 100 ? wl->value_bytes - off : 100;
			uint64_t raw = (piece + 1) / 2;

			for (uint64_t j = 0; j < raw; j++)
				value[off + j] = (uint8_t)(' ' + bench_rng_next(&rng) % 95);
			for (uint64_t j = raw; j < piece; j++)
				value[off + j] = value[off + j - raw];
		}
		break;
	}
}

/** zstd alone on rows of the workload's shape, on this thread: what one merge thread
 *  cannot go below at this level, whatever the engine around the codec does. */
struct codec_floor {
	/** ns per raw byte to compress (ZSTD_compressCCtx, one 64 KiB block at a time, the
	 *  context and buffers warm) and to decompress (ZSTD_decompressDCtx). */
	double c_ns_per_b, d_ns_per_b;
	/** Raw bytes / compressed bytes. */
	double ratio;
	/** The blocks saved at least 1/8 (strata keeps them compressed; otherwise raw,
	 *  and a merge reads and writes them without the codec). */
	int pays;
};

/** Measure codec_floor over CODEC_SAMPLE bytes of rows (key + value, as a run block
 *  holds them but for its per-row framing) cut into blocks of CODEC_BLOCK: each pass
 *  compresses every block once; the first warms the context and the output buffers
 *  (this VM pays a page fault per fresh page: a cold pass runs 2-3x slower), the
 *  second is timed, then every block is decompressed. */
enum { CODEC_SAMPLE = 32 << 20, CODEC_BLOCK = 64 << 10 };

static void
codec_floor_measure(const struct workload *wl, struct codec_floor *f)
{
	size_t nblocks = CODEC_SAMPLE / CODEC_BLOCK, cap = ZSTD_compressBound(CODEC_BLOCK);
	uint8_t *raw = malloc(CODEC_SAMPLE), *out = malloc(nblocks * cap), *back = malloc(CODEC_BLOCK);
	size_t *len = calloc(nblocks, sizeof(*len));
	uint8_t *value = malloc(wl->value_bytes);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	uint64_t t0 = 0, t1 = 0, t2, in = 0, zout = 0;

	memset(f, 0, sizeof(*f));
	if (!raw || !out || !back || !len || !value || !cc || !dc)
		bench_die("codec floor: out of memory");
	for (size_t off = 0, i = 0; off < CODEC_SAMPLE; i++) {
		uint8_t key[KEY_BYTES];

		make_row(wl, i, key, value);
		for (size_t j = 0; j < KEY_BYTES + wl->value_bytes && off < CODEC_SAMPLE; j++, off++)
			raw[off] = j < KEY_BYTES ? key[j] : value[j - KEY_BYTES];
	}
	for (int pass = 0; pass < 2; pass++) {
		t0 = bench_now_ns();
		zout = 0;
		for (size_t b = 0; b < nblocks; b++) {
			len[b] = ZSTD_compressCCtx(cc, out + b * cap, cap, raw + b * CODEC_BLOCK,
						   CODEC_BLOCK, wl->zstd_level);
			if (ZSTD_isError(len[b]))
				bench_die("codec floor: zstd: %s", ZSTD_getErrorName(len[b]));
			zout += len[b];
		}
		t1 = bench_now_ns();
	}
	for (size_t b = 0; b < nblocks; b++) {
		size_t n = ZSTD_decompressDCtx(dc, back, CODEC_BLOCK, out + b * cap, len[b]);

		if (ZSTD_isError(n) || n != CODEC_BLOCK)
			bench_die("codec floor: block %zu did not decompress", b);
		in += n;
	}
	t2 = bench_now_ns();
	for (size_t b = 0; b < nblocks; b++) /* untimed: the blocks are the bytes */
		if (ZSTD_decompressDCtx(dc, back, CODEC_BLOCK, out + b * cap, len[b]) != CODEC_BLOCK ||
		    memcmp(back, raw + b * CODEC_BLOCK, CODEC_BLOCK) != 0)
			bench_die("codec floor: block %zu did not decompress to its bytes", b);
	f->c_ns_per_b = (double)(t1 - t0) / (double)in;
	f->d_ns_per_b = (double)(t2 - t1) / (double)in;
	f->ratio = (double)in / (double)zout;
	f->pays = zout * 8 <= in * 7;
	ZSTD_freeCCtx(cc);
	ZSTD_freeDCtx(dc);
	free(raw);
	free(out);
	free(back);
	free(len);
	free(value);
}

/** Calls back once per batch of rows; seal() after every gen_bytes of raw rows. */
struct loader {
	/** Append one batch; nonzero stops. */
	int (*append)(void *ctx, const strata_row *rows, size_t n);
	/** Turn the rows so far into one generation / L0 file; nonzero stops. */
	int (*seal)(void *ctx);
	/** Engine context. */
	void *ctx;
};

static int
load_rows(const struct workload *wl, const struct loader *ld, uint64_t *rows_out)
{
	uint8_t *keys = malloc((size_t)BATCH_ROWS * KEY_BYTES);
	uint8_t *values = malloc((size_t)BATCH_ROWS * wl->value_bytes);
	strata_row rows[BATCH_ROWS] = {0};
	uint64_t i = 0, since = 0;
	int rc = 0;

	if (keys == NULL || values == NULL)
		bench_die("out of memory");
	for (uint64_t g = 0; g < wl->gens && rc == 0; g++) {
		since = 0;
		while (since < wl->gen_bytes && rc == 0) {
			size_t n = 0;

			while (n < BATCH_ROWS && since < wl->gen_bytes) {
				uint8_t *k = keys + n * KEY_BYTES;
				uint8_t *v = values + n * wl->value_bytes;

				make_row(wl, i++, k, v);
				rows[n].key = k;
				rows[n].key_len = KEY_BYTES;
				rows[n].value = v;
				rows[n].value_len = wl->value_bytes;
				since += KEY_BYTES + wl->value_bytes;
				n++;
			}
			rc = ld->append(ld->ctx, rows, n);
		}
		if (rc == 0)
			rc = ld->seal(ld->ctx);
	}
	free(keys);
	free(values);
	*rows_out = i;
	return rc;
}

/* ---- strata ---------------------------------------------------------------- */

static int
strata_load_append(void *ctx, const strata_row *rows, size_t n)
{
	int rc = strata_append(ctx, 0, rows, n);

	if (rc != 0)
		fprintf(stderr, "bench_merge: strata_append: %s: %s\n", strata_strerror(rc),
			strata_last_error());
	return rc;
}

static int
strata_load_seal(void *ctx)
{
	int rc = strata_seal(ctx, 0);

	if (rc != 0)
		fprintf(stderr, "bench_merge: strata_seal: %s: %s\n", strata_strerror(rc),
			strata_last_error());
	return rc;
}

static int
strata_build(const struct workload *wl, const char *dir, uint64_t *rows, strata_stats *st)
{
	strata_options o;
	strata *db;
	struct loader ld = { strata_load_append, strata_load_seal, NULL };
	int rc;

	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1;
	o.sync = STRATA_SYNC_NONE;
	o.zstd_level = wl->zstd_level;
	rc = strata_open(&o, &db);
	if (rc != 0) {
		fprintf(stderr, "bench_merge: strata_open %s: %s: %s\n", dir, strata_strerror(rc),
			strata_last_error());
		return rc;
	}
	ld.ctx = db;
	rc = load_rows(wl, &ld, rows);
	if (rc == 0 && (rc = strata_shard_stats(db, 0, st)) != 0)
		fprintf(stderr, "bench_merge: strata_shard_stats: %s\n", strata_last_error());
	strata_close(db);
	return rc;
}

/** Child: open the store, merge everything, report one line on stdout. */
static int
child_strata(const char *dir, const struct workload *wl, uint32_t threads)
{
	strata_options o;
	strata *db;
	strata_stats before, after;
	uint32_t merged = 0;
	uint64_t hwm_start = bench_proc_status_kb("VmHWM"), hwm_open, hwm_merge, t0, t1, t2;
	strata_plan *plan = NULL;
	int rc;

	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1;
	o.zstd_level = wl->zstd_level;
	o.merge_threads = threads;
	rc = strata_open(&o, &db);
	if (rc != 0) {
		fprintf(stderr, "bench_merge child: strata_open %s: %s: %s\n", dir, strata_strerror(rc),
			strata_last_error());
		return 1;
	}
	if (strata_shard_stats(db, 0, &before) != 0)
		return 1;
	hwm_open = bench_proc_status_kb("VmHWM");
	uint64_t c0 = cpu_now_ns();
	t0 = bench_now_ns();
	rc = strata_prepare_merge(db, 0, 0, &plan);
	if (rc == 0) {
		merged = strata_plan_generations(plan);
		rc = strata_commit_merge(db, plan);
	}
	t1 = bench_now_ns();
	uint64_t c1 = cpu_now_ns();
	hwm_merge = bench_proc_status_kb("VmHWM");
	if (rc != 0) {
		fprintf(stderr, "bench_merge child: merge: %s: %s\n", strata_strerror(rc),
			strata_last_error());
		strata_close(db);
		return 1;
	}
	/* The commit only queued the deletes of the merged generations; with no policy
	 * runtime this thread runs them, paced, as strata_merge would. */
	uint64_t left = store_reap(strata_store(db), UINT64_MAX);
	t2 = bench_now_ns();
	if (left != 0)
		fprintf(stderr, "bench_merge child: note: %" PRIu64 " deletes still queued\n", left);
	if (strata_shard_stats(db, 0, &after) != 0)
		return 1;
	if (merged != before.generations || after.generations != 0)
		fprintf(stderr, "bench_merge child: note: merged %u of %" PRIu64
			" generations, %" PRIu64 " left\n", merged, before.generations, after.generations);
	rc = strata_check(db, 0);
	if (rc != 0)
		fprintf(stderr, "bench_merge child: strata_check after merge: %s\n", strata_last_error());
	strata_close(db);
	printf("inputs=%" PRIu64 " bytes_in=%" PRIu64 " bytes_out=%" PRIu64 " ns=%" PRIu64
	       " del_ns=%" PRIu64 " hwm_start=%" PRIu64 " hwm_open=%" PRIu64 " hwm_merge=%" PRIu64
	       " blocks_z=%" PRIu64 " blocks_raw=%" PRIu64 " threads=%" PRIu64 " helped=%" PRIu64
	       " cpu_ns=%" PRIu64 " parts=%" PRIu64 "\n",
	       (uint64_t)merged, before.generation_bytes, after.merge_bytes_out, t1 - t0, t2 - t1,
	       hwm_start, hwm_open, hwm_merge, after.blocks_compressed - before.blocks_compressed,
	       after.blocks_raw - before.blocks_raw, after.merge_threads,
	       after.merge_blocks_helped - before.merge_blocks_helped, c1 - c0,
	       after.merge_split_parts - before.merge_split_parts);
	return rc != 0;
}

/* ---- RocksDB --------------------------------------------------------------- */

/** RocksDB handles of the loader. */
struct rdb_ctx {
	/** The database. */
	rocksdb_t *db;
	/** Writes without WAL: the loader flushes explicitly. */
	rocksdb_writeoptions_t *wo;
	/** Reused batch. */
	rocksdb_writebatch_t *wb;
};

/** Options shared by the loader and the child. Both configurations load without
 *  automatic compaction and with one memtable per generation; RDB_ZSTD_64K then
 *  compresses and filters as strata does (zstd at wl->zstd_level, 64 KiB blocks, bloom
 *  10 bits/key), RDB_DEFAULTS keeps RocksDB's table defaults (Snappy, 4 KiB, none). */
static rocksdb_options_t *
rdb_options(const struct workload *wl, enum rdb_config cfg)
{
	rocksdb_options_t *o = rocksdb_options_create();

	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_disable_auto_compactions(o, 1);
	rocksdb_options_set_write_buffer_size(o, (size_t)(wl->gen_bytes * 2 + (64u << 20)));
	rocksdb_options_set_level0_slowdown_writes_trigger(o, 1000);
	rocksdb_options_set_level0_stop_writes_trigger(o, 1000);
	if (cfg == RDB_ZSTD_64K_SUB) {
		int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
		static rocksdb_env_t *env;

		if (cpus < 1)
			cpus = 1;
		/* A subcompaction runs only on a thread it reserves from the low-priority
		 * pool (one per background compaction, and max_background_jobs = n gives n - 1
		 * of those): room for every part, plus the flushes'. */
		if (env == NULL) {
			env = rocksdb_create_default_env();
			rocksdb_env_set_background_threads(env, cpus + 1);
		}
		rocksdb_options_set_env(o, env);
		rocksdb_options_set_max_subcompactions(o, (uint32_t)cpus);
		rocksdb_options_set_max_background_jobs(o, cpus + 2);
	}
	if (cfg == RDB_ZSTD_64K || cfg == RDB_ZSTD_64K_SUB) {
		rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();

		rocksdb_options_set_compression(o, rocksdb_zstd_compression);
		rocksdb_options_set_compression_options(o, -14, wl->zstd_level, 0, 0);
		rocksdb_block_based_options_set_block_size(t, 64u << 10);
		rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom(10));
		rocksdb_options_set_block_based_table_factory(o, t);
		rocksdb_block_based_options_destroy(t);
	}
	return o;
}

static int
rdb_load_append(void *ctx, const strata_row *rows, size_t n)
{
	struct rdb_ctx *c = ctx;
	char *err = NULL;

	rocksdb_writebatch_clear(c->wb);
	for (size_t i = 0; i < n; i++)
		rocksdb_writebatch_put(c->wb, rows[i].key, rows[i].key_len, rows[i].value,
				       rows[i].value_len);
	rocksdb_write(c->db, c->wo, c->wb, &err);
	if (err != NULL) {
		fprintf(stderr, "bench_merge: rocksdb_write: %s\n", err);
		rocksdb_free(err);
		return -1;
	}
	return 0;
}

static int
rdb_load_seal(void *ctx)
{
	struct rdb_ctx *c = ctx;
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	char *err = NULL;

	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_flush(c->db, fo, &err);
	rocksdb_flushoptions_destroy(fo);
	if (err != NULL) {
		fprintf(stderr, "bench_merge: rocksdb_flush: %s\n", err);
		rocksdb_free(err);
		return -1;
	}
	return 0;
}

static uint64_t
rdb_prop(rocksdb_t *db, const char *name)
{
	uint64_t v = 0;
	char *s;

	if (rocksdb_property_int(db, name, &v) == 0)
		return v;
	/* Some properties (num-files-at-levelN) exist only as strings. */
	s = rocksdb_property_value(db, name);
	if (s == NULL)
		return UINT64_MAX;
	v = strtoull(s, NULL, 10);
	rocksdb_free(s);
	return v;
}

static int
rdb_build(const struct workload *wl, enum rdb_config cfg, const char *dir, uint64_t *rows,
	  uint64_t *l0_files, uint64_t *sst_bytes)
{
	rocksdb_options_t *o = rdb_options(wl, cfg);
	struct rdb_ctx c;
	struct loader ld = { rdb_load_append, rdb_load_seal, &c };
	char *err = NULL;
	int rc;

	c.db = rocksdb_open(o, dir, &err);
	if (err != NULL) {
		fprintf(stderr, "bench_merge: rocksdb_open %s: %s\n", dir, err);
		rocksdb_free(err);
		rocksdb_options_destroy(o);
		return -1;
	}
	c.wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(c.wo, 1);
	c.wb = rocksdb_writebatch_create();
	rc = load_rows(wl, &ld, rows);
	*l0_files = rdb_prop(c.db, "rocksdb.num-files-at-level0");
	*sst_bytes = rdb_prop(c.db, "rocksdb.total-sst-files-size");
	rocksdb_writebatch_destroy(c.wb);
	rocksdb_writeoptions_destroy(c.wo);
	rocksdb_close(c.db);
	rocksdb_options_destroy(o);
	return rc;
}

/** The most subcompactions a compaction in dir's RocksDB LOG ran on (its
 *  "num_subcompactions"), 0 when the LOG says none. */
static uint64_t
rdb_log_subcompactions(const char *dir)
{
	char path[4096 + 8], line[16384];
	uint64_t most = 0;

	snprintf(path, sizeof(path), "%s/LOG", dir);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *p = strstr(line, "\"num_subcompactions\": ");
		if (p != NULL) {
			uint64_t n = strtoull(p + strlen("\"num_subcompactions\": "), NULL, 10);
			if (n > most)
				most = n;
		}
	}
	fclose(f);
	return most;
}

static int
child_rocksdb(const char *dir, const struct workload *wl, enum rdb_config cfg)
{
	uint64_t hwm_start = bench_proc_status_kb("VmHWM"), hwm_open, hwm_merge, t0, t1;
	rocksdb_options_t *o = rdb_options(wl, cfg);
	uint64_t l0, in, out;
	char *err = NULL;
	rocksdb_t *db;

	rocksdb_options_set_create_if_missing(o, 0);
	db = rocksdb_open(o, dir, &err);
	if (err != NULL) {
		fprintf(stderr, "bench_merge child: rocksdb_open %s: %s\n", dir, err);
		return 1;
	}
	l0 = rdb_prop(db, "rocksdb.num-files-at-level0");
	in = rdb_prop(db, "rocksdb.total-sst-files-size");
	hwm_open = bench_proc_status_kb("VmHWM");
	uint64_t c0 = cpu_now_ns();
	t0 = bench_now_ns();
	rocksdb_compact_range(db, NULL, 0, NULL, 0);
	t1 = bench_now_ns();
	uint64_t c1 = cpu_now_ns();
	hwm_merge = bench_proc_status_kb("VmHWM");
	out = rdb_prop(db, "rocksdb.total-sst-files-size");
	rocksdb_close(db);
	rocksdb_options_destroy(o);
	printf("inputs=%" PRIu64 " bytes_in=%" PRIu64 " bytes_out=%" PRIu64 " ns=%" PRIu64
	       " del_ns=0 hwm_start=%" PRIu64 " hwm_open=%" PRIu64 " hwm_merge=%" PRIu64
	       " blocks_z=0 blocks_raw=0 threads=1 helped=0 cpu_ns=%" PRIu64 " parts=%" PRIu64 "\n",
	       l0, in, out, t1 - t0, hwm_start, hwm_open, hwm_merge, c1 - c0,
	       rdb_log_subcompactions(dir));
	return 0;
}

/* ---- parent ---------------------------------------------------------------- */

/** Run this binary as "--child-ENGINE DIR GEN_BYTES CONFIG", the rest of the workload in
 *  the environment. */
static void
run_child(const char *engine, const char *dir, const struct workload *wl, int cfg,
	  struct merge_result *r)
{
	int fds[2], status;
	pid_t pid;
	FILE *f;
	char line[1024];

	memset(r, 0, sizeof(*r));
	fflush(stdout);
	if (pipe(fds) != 0)
		bench_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		char mode[64], gb[32], cf[16];

		snprintf(mode, sizeof(mode), "--child-%s", engine);
		snprintf(gb, sizeof(gb), "%" PRIu64, wl->gen_bytes);
		snprintf(cf, sizeof(cf), "%d", (int)cfg);
		close(fds[0]);
		if (dup2(fds[1], STDOUT_FILENO) < 0)
			_exit(127);
		close(fds[1]);
		execl("/proc/self/exe", "bench_merge", mode, dir, gb, cf, (char *)NULL);
		fprintf(stderr, "bench_merge: exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (f == NULL)
		bench_die("fdopen: %s", strerror(errno));
	if (fgets(line, sizeof(line), f) != NULL &&
	    sscanf(line, "inputs=%" SCNu64 " bytes_in=%" SCNu64 " bytes_out=%" SCNu64 " ns=%" SCNu64
		   " del_ns=%" SCNu64 " hwm_start=%" SCNu64 " hwm_open=%" SCNu64 " hwm_merge=%" SCNu64
		   " blocks_z=%" SCNu64 " blocks_raw=%" SCNu64 " threads=%" SCNu64 " helped=%" SCNu64
		   " cpu_ns=%" SCNu64 " parts=%" SCNu64,
		   &r->inputs, &r->bytes_in, &r->bytes_out, &r->ns, &r->del_ns, &r->hwm_start_kb,
		   &r->hwm_open_kb, &r->hwm_merge_kb, &r->blocks_z, &r->blocks_raw, &r->threads,
		   &r->helped, &r->cpu_ns, &r->parts) == 14)
		r->ok = 1;
	fclose(f);
	if (waitpid(pid, &status, 0) < 0)
		bench_die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench_merge: %s merge child failed (status 0x%x)\n", engine, status);
		r->ok = 0;
	}
}

/** MB/s of input file bytes, or 0 when the merge did not run. */
static double
mb_s(const struct merge_result *r)
{
	return r->ok && r->ns > 0 ? (double)r->bytes_in / 1e6 / ((double)r->ns / 1e9) : 0.0;
}

static void
print_result(const char *engine, const char *shape, uint64_t gen_mb, const struct workload *wl,
	     const struct merge_result *r)
{
	double secs = (double)r->ns / 1e9;

	if (!r->ok) {
		printf("%-23s %-6s %7" PRIu64 " %5" PRIu64 "   failed (see stderr)\n", engine, shape,
		       gen_mb, wl->gens);
		return;
	}
	char del[32], raw[32];
	if (strncmp(engine, "strata", 6) == 0) {
		snprintf(del, sizeof(del), "%.2f", (double)r->del_ns / 1e9);
		snprintf(raw, sizeof(raw), "%.0f%%", r->blocks_z + r->blocks_raw > 0 ?
			 100.0 * (double)r->blocks_raw / (double)(r->blocks_z + r->blocks_raw) : 0.0);
	} else {
		snprintf(del, sizeof(del), "inside");
		snprintf(raw, sizeof(raw), "-");
	}
	printf("%-23s %-6s %7" PRIu64 " %5" PRIu64 " %6" PRIu64 " %10.1f %10.1f %8.2f %8.2f %8.1f %8s %6s "
	       "%9.1f %9.1f %10.1f\n",
	       engine, shape, gen_mb, wl->gens, r->inputs, (double)r->bytes_in / (1 << 20),
	       (double)r->bytes_out / (1 << 20), secs, (double)r->cpu_ns / 1e9, mb_s(r), del, raw,
	       (double)r->hwm_open_kb / 1024, (double)r->hwm_merge_kb / 1024,
	       (double)(r->hwm_merge_kb - r->hwm_open_kb) / 1024);
}

/** Parse a comma-separated list of names into indexes of names[]; dies on an unknown one. */
static int
parse_names(const char *env, const char *def, const char *const *names, int count, int *out)
{
	const char *v = getenv(env);
	char buf[256], *save = NULL;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", v != NULL && *v != '\0' ? v : def);
	for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		int k = -1;

		for (int j = 0; j < count; j++)
			if (strcmp(tok, names[j]) == 0)
				k = j;
		if (k < 0) {
			char known[128] = "";

			for (int j = 0; j < count; j++)
				snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
					 j ? ", " : "", names[j]);
			bench_die("%s: '%s' is not one of %s", env, tok, known);
		}
		if (n < count)
			out[n++] = k;
	}
	if (n == 0)
		bench_die("%s names nothing", env);
	return n;
}

/** BENCH_MERGE_THREADS ("1,all"): strata's merge thread counts, 1..64 each, "all" the
 *  online CPUs; a count given twice runs once. */
static int
parse_threads(uint32_t *out)
{
	const char *v = getenv("BENCH_MERGE_THREADS");
	char buf[256], *save = NULL;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", v != NULL && *v != '\0' ? v : "1,all");
	for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *end = NULL;
		long t = strcmp(tok, "all") == 0 ? (cpus < 1 ? 1 : cpus > 64 ? 64 : cpus) : strtol(tok, &end, 10);
		int dup = 0;

		if (end != NULL && (*end != '\0' || end == tok))
			t = 0;
		if (t < 1 || t > 64)
			bench_die("BENCH_MERGE_THREADS entries must be 1..64 or \"all\", not \"%s\"", tok);
		for (int j = 0; j < n; j++)
			dup |= out[j] == (uint32_t)t;
		if (dup)
			continue;
		if (n == MAX_THREAD_COUNTS)
			bench_die("BENCH_MERGE_THREADS has more than %d counts", MAX_THREAD_COUNTS);
		out[n++] = (uint32_t)t;
	}
	if (n == 0)
		bench_die("BENCH_MERGE_THREADS names nothing");
	return n;
}

/** Figures of one (shape, size): strata at each thread count and each RocksDB configuration. */
struct cell {
	/** The size ran (there was room for it). */
	int ran;
	/** strata's merge, per entry of BENCH_MERGE_THREADS. */
	struct merge_result s[MAX_THREAD_COUNTS];
	/** RocksDB's, per configuration. */
	struct merge_result r[RDB_COUNT];
};

int
main(int argc, char **argv)
{
	uint64_t sizes[MAX_SIZES];
	static struct cell cells[SHAPE_COUNT][MAX_SIZES];
	struct codec_floor floors[SHAPE_COUNT];
	int shapes[SHAPE_COUNT], cfgs[RDB_COUNT], nshapes, ncfgs, nsz, do_rocks, failed = 0;
	struct workload wl;

	wl.gens = bench_env_u64("BENCH_MERGE_GENS", 8);
	wl.value_bytes = bench_env_u64("BENCH_MERGE_VALUE", 200);
	wl.overwrite_pct = bench_env_u64("BENCH_MERGE_OVERWRITE_PCT", 10);
	wl.shape = SHAPE_RANDOM;
	{
		strata_options d;
		const char *lv = getenv("BENCH_MERGE_ZSTD_LEVEL");

		strata_options_init(&d);
		wl.zstd_level = lv != NULL && *lv != '\0' ? atoi(lv) : d.zstd_level;
		if (wl.zstd_level < -131072 || wl.zstd_level > 22)
			bench_die("BENCH_MERGE_ZSTD_LEVEL must be -131072..22");
	}
	if (wl.gens == 0 || wl.gens > 1000)
		bench_die("BENCH_MERGE_GENS must be 1..1000");
	if (wl.value_bytes == 0 || wl.value_bytes > MAX_VALUE)
		bench_die("BENCH_MERGE_VALUE must be 1..%d", MAX_VALUE);
	if (wl.overwrite_pct > 100)
		bench_die("BENCH_MERGE_OVERWRITE_PCT must be 0..100");

	if (argc == 5 && strncmp(argv[1], "--child-", 8) == 0) {
		int cfg = atoi(argv[4]);

		wl.gen_bytes = strtoull(argv[3], NULL, 10);
		if (strcmp(argv[1], "--child-strata") == 0 && cfg >= 1 && cfg <= 64)
			return child_strata(argv[2], &wl, (uint32_t)cfg);
		if (strcmp(argv[1], "--child-rocksdb") == 0 && cfg >= 0 && cfg < RDB_COUNT)
			return child_rocksdb(argv[2], &wl, (enum rdb_config)cfg);
		bench_die("unknown mode %s %s", argv[1], argv[4]);
	}
	if (argc != 1)
		bench_die("usage: bench_merge (settings through BENCH_* environment variables)");

	nsz = bench_env_list("BENCH_MERGE_GEN_MB", "64,512", sizes, MAX_SIZES);
	nshapes = parse_names("BENCH_MERGE_SHAPES", "random,half", shape_names, SHAPE_COUNT, shapes);
	do_rocks = (int)bench_env_u64("BENCH_MERGE_ROCKSDB", 1);
	ncfgs = do_rocks ? parse_names("BENCH_MERGE_ROCKSDB_CONFIGS", "zstd-64k,defaults,zstd-64k-sub", rdb_names,
				       RDB_COUNT, cfgs) : 0;
	uint32_t threads[MAX_THREAD_COUNTS];
	int nthreads = parse_threads(threads);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("== bench_merge: merge throughput and memory vs value shape and generation size, "
	       "strata %s, peer RocksDB %s\n", STRATA_VERSION, BENCH_ROCKSDB_VERSION);
	bench_print_host(bench_base_dir());
	printf("workload: %" PRIu64 " generations per size, each of the given MiB of raw rows "
	       "(16-byte key + %" PRIu64 "-byte value), keys in random order, %" PRIu64 "%% of rows "
	       "rewrite an older key; value shapes:\n", wl.gens, wl.value_bytes, wl.overwrite_pct);
	for (int k = 0; k < nshapes; k++)
		printf("  %-6s %s\n", shape_names[shapes[k]], shape_docs[shapes[k]]);
	printf("build  : strata sync=NONE, 1 shard, default options but zstd level %d (64 KiB "
	       "blocks, a block kept compressed only when it saves 1/8), batches of %d rows, seal "
	       "every generation; RocksDB WAL off, auto compactions off, one flush per generation "
	       "(same rows, same boundaries), in each configuration:\n", wl.zstd_level, BATCH_ROWS);
	for (int c = 0; c < ncfgs; c++)
		printf("  rocksdb-%-9s %s\n", rdb_names[cfgs[c]], rdb_docs[cfgs[c]]);
	printf("threads: strata merge_threads");
	for (int t = 0; t < nthreads; t++)
		printf("%s%u", t ? ", " : " ", threads[t]);
	printf(" (BENCH_MERGE_THREADS; %ld online CPUs), each on a copy of the same generations; "
	       "RocksDB one thread (max_subcompactions 1, its default) but rocksdb-zstd-64k-sub\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("measure: each merge in a fresh child process (fork+exec) after the data files were "
	       "fdatasynced and dropped from the page cache (POSIX_FADV_DONTNEED): VmHWM after open "
	       "and after strata prepare + commit of every generation / rocksdb_compact_range(all); "
	       "MB/s = input file bytes / merge seconds\n\n");

	for (int k = 0; k < nshapes; k++) {
		wl.shape = (enum shape)shapes[k];
		codec_floor_measure(&wl, &floors[k]);
		printf("%s: zstd level %d alone on %d MiB of these rows, one thread, %d KiB blocks, warm "
		       "context and buffers: compress %.0f MB/s, decompress %.0f MB/s, ratio %.2f (%s)\n",
		       shape_names[wl.shape], wl.zstd_level, CODEC_SAMPLE >> 20, CODEC_BLOCK >> 10,
		       1e3 / floors[k].c_ns_per_b, 1e3 / floors[k].d_ns_per_b, floors[k].ratio,
		       floors[k].pays ? "saves 1/8: strata keeps the blocks compressed"
				      : "saves less than 1/8: strata stores the blocks raw");
		for (int i = 0; i < nsz; i++) {
			struct cell *cl = &cells[k][i];
			uint64_t raw, need, avail, rows;
			char dir[4096];
			strata_stats st;
			uint64_t t0;

			if (sizes[i] > (1u << 20))
				bench_die("BENCH_MERGE_GEN_MB entries must be at most 1048576");
			wl.gen_bytes = sizes[i] << 20;
			raw = wl.gen_bytes * wl.gens;
			/* WAL up to one memtable + generations + merged run (at most the raw rows
			 * each), plus 1 GiB of slack; each engine's directory is removed before the
			 * next. */
			need = wl.gen_bytes + raw * 3 + (1ull << 30);
			avail = bench_free_bytes(bench_base_dir());
			if (avail < need) {
				printf("%s, size %" PRIu64 " MiB: SKIPPED: needs ~%.1f GiB free in %s, "
				       "%.1f GiB available\n", shape_names[wl.shape], sizes[i],
				       (double)need / (1u << 30), bench_base_dir(),
				       (double)avail / (1u << 30));
				continue;
			}
			cl->ran = 1;

			bench_mkdtemp("merge-strata", dir, sizeof(dir));
			t0 = bench_now_ns();
			if (strata_build(&wl, dir, &rows, &st) != 0) {
				failed = 1;
				bench_rmrf(dir);
				continue;
			}
			printf("%s, size %" PRIu64 " MiB: strata built %" PRIu64 " generations, %" PRIu64
			       " rows, %.1f MiB raw -> %.1f MiB of generation files in %.1f s\n",
			       shape_names[wl.shape], sizes[i], st.generations, rows,
			       (double)raw / (1 << 20), (double)st.generation_bytes / (1 << 20),
			       (double)(bench_now_ns() - t0) / 1e9);
			if (getenv("BENCH_MERGE_KEEP") != NULL) {
				char keep[4096 + 16];

				snprintf(keep, sizeof(keep), "%s.keep", dir);
				if (bench_copy_dir(dir, keep) == 0)
					printf("kept %s\n", keep);
			}
			/* Every count but the last merges a copy; the last merges the original. */
			for (int t = 0; t < nthreads; t++) {
				char copy[4096 + 16];

				snprintf(copy, sizeof(copy), "%s", dir);
				if (t + 1 < nthreads) {
					snprintf(copy, sizeof(copy), "%s.copy", dir);
					if (bench_copy_dir(dir, copy) != 0) {
						failed = 1;
						bench_rmrf(copy);
						continue;
					}
				}
				bench_drop_cache(copy);
				run_child("strata", copy, &wl, (int)threads[t], &cl->s[t]);
				failed |= !cl->s[t].ok;
				bench_rmrf(copy);
			}

			for (int c = 0; c < ncfgs; c++) {
				enum rdb_config cfg = (enum rdb_config)cfgs[c];
				uint64_t l0 = 0, sst = 0;

				bench_mkdtemp("merge-rocksdb", dir, sizeof(dir));
				t0 = bench_now_ns();
				if (rdb_build(&wl, cfg, dir, &rows, &l0, &sst) != 0) {
					failed = 1;
					bench_rmrf(dir);
					continue;
				}
				printf("%s, size %" PRIu64 " MiB: rocksdb-%s built %" PRIu64 " L0 files, "
				       "%" PRIu64 " rows, %.1f MiB of SST files in %.1f s\n",
				       shape_names[wl.shape], sizes[i], rdb_names[cfg], l0, rows,
				       (double)sst / (1 << 20), (double)(bench_now_ns() - t0) / 1e9);
				bench_drop_cache(dir);
				run_child("rocksdb", dir, &wl, (int)cfg, &cl->r[cfg]);
				bench_rmrf(dir);
			}
		}
	}

	printf("\n%-23s %-6s %7s %5s %6s %10s %10s %8s %8s %8s %8s %6s %9s %9s %10s\n", "engine", "shape",
	       "gen_MiB", "gens", "inputs", "in_MiB", "out_MiB", "secs", "cpu_secs", "MB/s", "del_secs", "raw",
	       "hwm_open", "hwm_after", "rss_growth");
	for (int k = 0; k < nshapes; k++)
		for (int i = 0; i < nsz; i++) {
			const struct cell *cl = &cells[k][i];
			const char *sh = shape_names[shapes[k]];

			if (!cl->ran)
				continue;
			for (int t = 0; t < nthreads; t++) {
				char name[32];

				if (cl->s[t].parts > 1)
					snprintf(name, sizeof(name), "strata-t%u/p%" PRIu64, threads[t],
						 cl->s[t].parts);
				else
					snprintf(name, sizeof(name), "strata-t%u", threads[t]);
				print_result(name, sh, sizes[i], &wl, &cl->s[t]);
			}
			for (int c = 0; c < ncfgs; c++) {
				char name[32];

				if (cfgs[c] == RDB_ZSTD_64K_SUB)
					snprintf(name, sizeof(name), "rocksdb-%s/s%" PRIu64, rdb_names[cfgs[c]],
						 cl->r[cfgs[c]].parts);
				else
					snprintf(name, sizeof(name), "rocksdb-%s", rdb_names[cfgs[c]]);
				print_result(name, sh, sizes[i], &wl, &cl->r[cfgs[c]]);
			}
		}
	printf("(cpu_secs: user + system time of every thread of the merging process during secs; "
	       "hwm_* and rss_growth in MiB: VmHWM after open, after the merge, and their difference; "
	       "strata's secs and MB/s are prepare + commit, del_secs the paced deletes of its inputs "
	       "after the commit, at delete_bytes_per_s (256 MiB/s); raw: strata's data blocks the "
	       "merge stored raw because compression did not save 1/8; RocksDB deletes its inputs "
	       "inside the compaction)\n");
	if (!do_rocks)
		printf("rocksdb peer reference: SKIPPED (BENCH_MERGE_ROCKSDB=0)\n");

	/* strata's merge speed against each peer configuration (the target: >= 1.5x
	 * on one thread), at each thread count. */
	if (ncfgs > 0) {
		printf("\nstrata against RocksDB CompactRange (one thread; target for strata-t1 >= 1.5x): "
		       "speed of the same rows (RocksDB's seconds / strata's), then MB/s of input "
		       "files (strata's / RocksDB's; a format that compresses more has fewer bytes to "
		       "read)\n");
		for (int k = 0; k < nshapes; k++)
			for (int i = 0; i < nsz; i++)
				for (int t = 0; t < nthreads; t++) {
					const struct cell *cl = &cells[k][i];
					const struct merge_result *sr = &cl->s[t];

					if (!cl->ran || !sr->ok)
						continue;
					printf("  %-6s %5" PRIu64 " MiB strata-t%-2u:", shape_names[shapes[k]],
					       sizes[i], threads[t]);
					for (int c = 0; c < ncfgs; c++) {
						double peer = mb_s(&cl->r[cfgs[c]]);

						if (peer > 0)
							printf("  vs rocksdb-%s %.2fx (files %.2fx)",
							       rdb_names[cfgs[c]],
							       (double)cl->r[cfgs[c]].ns / (double)sr->ns,
							       mb_s(sr) / peer);
						else
							printf("  vs rocksdb-%s failed", rdb_names[cfgs[c]]);
					}
					/* What the codec alone costs this merge on one thread: decompress
					 * the input's raw rows and compress the output's (the input's, less
					 * the rows the merge dropped: by the file sizes); a shape whose
					 * blocks do not pay is stored raw and only sampled (1 block in 16). */
					if (threads[t] == 1) {
						const struct codec_floor *f = &floors[k];
						double rin = (double)(sizes[i] << 20) * (double)wl.gens;
						double rout = rin * (double)sr->bytes_out / (double)sr->bytes_in;
						double fl = f->pays ? (rin * f->d_ns_per_b + rout * f->c_ns_per_b) / 1e9
								    : rout * f->c_ns_per_b / 16 / 1e9;
						printf("  codec floor %.2f s (%.0f%% of strata's %.2f s)", fl,
						       100.0 * fl * 1e9 / (double)sr->ns, (double)sr->ns / 1e9);
					}
					printf("\n");
				}
	}
	/* More threads against one: the speed-up, and the output (the same file for any
	 * count, so the same size). */
	if (nthreads > 1) {
		printf("\nstrata merge threads against the first count: speed-up, blocks the helper "
		       "threads compressed, and the merged run's size (the same file for any count "
		       "that does not split; a split merge writes its key range as parts, runs of "
		       "their own)\n");
		for (int k = 0; k < nshapes; k++)
			for (int i = 0; i < nsz; i++) {
				const struct cell *cl = &cells[k][i];

				if (!cl->ran || !cl->s[0].ok)
					continue;
				for (int t = 1; t < nthreads; t++) {
					const struct merge_result *a = &cl->s[0], *b = &cl->s[t];

					if (!b->ok)
						continue;
					char how[64];
					if (b->parts > 1)
						snprintf(how, sizeof(how), "in %" PRIu64 " parts", b->parts);
					else
						snprintf(how, sizeof(how), "%s", a->bytes_out == b->bytes_out
										   ? "the same size" : "DIFFERS");
					printf("  %-6s %5" PRIu64 " MiB: t%" PRIu64 " vs t%" PRIu64 ": %.2fx, %" PRIu64
					       " of %" PRIu64 " blocks helped, output %s (%" PRIu64 " and %" PRIu64
					       " bytes)\n", shape_names[shapes[k]], sizes[i], b->threads, a->threads,
					       (double)a->ns / (double)b->ns, b->helped, b->blocks_z + b->blocks_raw,
					       how, a->bytes_out, b->bytes_out);
				}
			}
	}

	/* Growth ratio between the largest and the smallest size that both ran, per shape. */
	for (int k = 0; k < nshapes; k++) {
		int lo = -1, hi = -1;

		for (int i = 0; i < nsz; i++) {
			if (!cells[k][i].ran || !cells[k][i].s[0].ok)
				continue;
			if (lo < 0 || sizes[i] < sizes[lo])
				lo = i;
			if (hi < 0 || sizes[i] > sizes[hi])
				hi = i;
		}
		if (lo < 0 || hi < 0 || lo == hi) {
			printf("%s: RSS growth ratio not computed (fewer than two sizes ran)\n",
			       shape_names[shapes[k]]);
			continue;
		}
		const struct merge_result *sl = &cells[k][lo].s[0], *shi = &cells[k][hi].s[0];
		double gl = (double)(sl->hwm_merge_kb - sl->hwm_open_kb);
		double gh = (double)(shi->hwm_merge_kb - shi->hwm_open_kb);

		if (gl > 0)
			printf("%s: strata RSS growth ratio %" PRIu64 "/%" PRIu64 " MiB generations: "
			       "%.2f (goal ~1: merge memory independent of generation size)\n",
			       shape_names[shapes[k]], sizes[hi], sizes[lo], gh / gl);
		else
			printf("%s: strata RSS growth ratio %" PRIu64 "/%" PRIu64 " MiB generations: not "
			       "measured (the %" PRIu64 " MiB merge stayed under VmHWM at open; the "
			       "larger grew %.1f MiB)\n", shape_names[shapes[k]], sizes[hi], sizes[lo],
			       sizes[lo], gh / 1024);
		for (int c = 0; c < ncfgs; c++) {
			const struct merge_result *rl = &cells[k][lo].r[cfgs[c]];
			const struct merge_result *rh = &cells[k][hi].r[cfgs[c]];

			if (!rl->ok || !rh->ok)
				continue;
			gl = (double)(rl->hwm_merge_kb - rl->hwm_open_kb);
			gh = (double)(rh->hwm_merge_kb - rh->hwm_open_kb);
			printf("%s: rocksdb-%s RSS growth ratio %" PRIu64 "/%" PRIu64 " MiB: %.2f\n",
			       shape_names[shapes[k]], rdb_names[cfgs[c]], sizes[hi], sizes[lo],
			       gl > 0 ? gh / gl : 0.0);
		}
	}
	if (failed)
		printf("bench_merge: an engine reported an error (see stderr); figures are partial\n");
	return failed ? 1 : 0;
}
