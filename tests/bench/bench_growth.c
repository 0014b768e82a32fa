/*
 * bench_growth.c — costs as a backlog grows (issue "costs that do not grow with the
 * backlog"), strata beside RocksDB where the comparison makes sense.
 *
 * 1. Pending generations: for each N of BENCH_GROWTH_GENS (10,100,1000,10000), in a child
 *    process of its own (so RSS is the engine's): build N generations of
 *    BENCH_GROWTH_ROWS rows (16-byte keys, 100-byte values; sync none, nothing merges),
 *    close, drop the files from the page cache, then time the open (cold), read RSS,
 *    time gets (warm, after one pass): a hit in a random generation, and a miss (an
 *    absent key: every generation's filter is probed), then 20 seals of 100 rows each
 *    with sync=fsync, timed, and the bytes each one wrote (wchar of /proc/self/io: what
 *    the process passed to write calls, the run file and the manifest). RocksDB (same rows, one L0 file per flush, auto compactions off,
 *    level0 triggers raised above N, bloom 10 bits/key) the same way.
 * 2. Shards: for each S of BENCH_GROWTH_SHARDS (1,100,1000,10000): create a store of S
 *    shards (sync=interval), close, and time the reopen; open file descriptors, threads
 *    and RSS while it is open, under the process's RLIMIT_NOFILE (printed).
 * 3. WAL replay: BENCH_GROWTH_REPLAY_MB (1024) of WAL in one shard (sync none, nothing
 *    seals), closed, dropped from the page cache, reopened: MiB/s of WAL replayed, next
 *    to reading the same files with O_DIRECT 1 MiB reads (what `dd iflag=direct` does).
 *    Cold twice: in a fresh process (this binary run with --replay-open DIR: what a
 *    restarted node sees, memory it never touched) and in the process that built the
 *    WAL (memory it used before); then a warm reopen (decode speed without the disk).
 *    Run twice: keys ascending (a counter's or a clock's), then in random order.
 * Prints tables, and writes an SVG of part 1 (BENCH_GROWTH_SVG, default
 * build/bench/growth.svg). Asserts nothing about speed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "../../node/strata.h"
#include "bench_util.h"

#define MAX_POINTS 16
#define GETS 2000
#define SEALS 20

/** Figures of one pending-generation count, for one engine. */
struct gen_point {
	/** Pending generations (L0 files). */
	uint64_t n;
	/** Seconds to build, to open cold. */
	double build_s, open_ms;
	/** RSS after the open and after the gets, KiB. */
	uint64_t rss_open_kb, rss_gets_kb;
	/** Get latencies, µs. */
	double hit_p50, hit_p99, miss_p50, miss_p99;
	/** Seal (flush) of 100 rows, median and max, ms. */
	double seal_p50, seal_max;
	/** Bytes one seal (flush) wrote, median and mean. */
	double seal_bytes_p50, seal_bytes_mean;
	/** 0 ok, else failed. */
	int failed;
};

static uint64_t rows_per_gen;

/** Bytes this process has passed to write calls (wchar of /proc/self/io). */
static uint64_t
proc_wchar(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	unsigned long long v = 0;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "wchar: %llu", &v) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return v;
}

static int cmp_double(const void *a, const void *b);

/** Median and mean of n byte counts (sorted in place). */
static void
bytes_stats(double *b, int n, double *p50, double *mean)
{
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += b[i];
	qsort(b, (size_t)n, sizeof(double), cmp_double);
	*p50 = b[n / 2];
	*mean = sum / n;
}

/** The 16-byte key of row i of generation gen (both below 10^7), NUL-terminated in k[17]. */
static void
key_of(char *k, uint64_t gen, uint64_t i)
{
	char t[48];
	snprintf(t, sizeof(t), "g%07" PRIu64 "r%07" PRIu64, gen % 10000000, i % 10000000);
	memcpy(k, t, 17);
}

static void
value_of(char *v, uint64_t gen, uint64_t i)
{
	memset(v, 'a' + (int)((gen + i) % 26), 100);
	snprintf(v, 100, "v%" PRIu64 ":%" PRIu64, gen, i);
	v[strlen(v)] = '.';
}

static double
q_us(const struct bench_hist *h, double q)
{
	return (double)bench_hist_quantile(h, q) / 1000.0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- strata */

static int
strata_fill(strata *db, uint64_t gen)
{
	static char keys[512][17], vals[512][100];
	strata_row rows[512];
	uint64_t done = 0;
	while (done < rows_per_gen) {
		uint64_t n = rows_per_gen - done > 512 ? 512 : rows_per_gen - done;
		for (uint64_t i = 0; i < n; i++) {
			key_of(keys[i], gen, done + i);
			value_of(vals[i], gen, done + i);
			rows[i] = (strata_row){.key = keys[i], .key_len = 16, .value = vals[i], .value_len = 100};
		}
		if (strata_append(db, 0, rows, (size_t)n) != 0)
			return -1;
		done += n;
	}
	return 0;
}

static void
strata_gens(uint64_t n, struct gen_point *p)
{
	char dir[4096];
	bench_mkdtemp("growth", dir, sizeof(dir));
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1;
	o.sync = STRATA_SYNC_NONE;
	strata *db = NULL;
	uint64_t t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0)
		goto fail;
	for (uint64_t g = 0; g < n; g++)
		if (strata_fill(db, g) != 0 || strata_seal(db, 0) != 0)
			goto fail;
	p->build_s = (double)(bench_now_ns() - t0) / 1e9;
	strata_close(db);
	db = NULL;
	bench_drop_cache(dir);
	o.sync = STRATA_SYNC_FSYNC;
	t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0)
		goto fail;
	p->open_ms = (double)(bench_now_ns() - t0) / 1e6;
	p->rss_open_kb = bench_proc_status_kb("VmRSS");
	struct bench_rng r = {.s = 0x9e3779b97f4a7c15ull ^ n};
	struct bench_hist *hit = calloc(1, sizeof(*hit)), *miss = calloc(1, sizeof(*miss));
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < GETS; i++) {
			char k[17];
			uint64_t g = bench_rng_next(&r) % n, row = bench_rng_next(&r) % rows_per_gen;
			key_of(k, g, row);
			void *v = NULL;
			size_t vl = 0;
			uint64_t s = bench_now_ns();
			int rc = strata_get(db, 0, k, 16, &v, &vl);
			uint64_t e = bench_now_ns() - s;
			if (rc != 0 || vl != 100)
				goto fail;
			free(v);
			if (pass == 1)
				bench_hist_add(hit, e);
			key_of(k, g, rows_per_gen + row); /* never written */
			s = bench_now_ns();
			rc = strata_get(db, 0, k, 16, &v, &vl);
			e = bench_now_ns() - s;
			if (rc != STRATA_NOTFOUND)
				goto fail;
			if (pass == 1)
				bench_hist_add(miss, e);
		}
	}
	p->hit_p50 = q_us(hit, 0.5);
	p->hit_p99 = q_us(hit, 0.99);
	p->miss_p50 = q_us(miss, 0.5);
	p->miss_p99 = q_us(miss, 0.99);
	free(hit);
	free(miss);
	p->rss_gets_kb = bench_proc_status_kb("VmRSS");
	double seals[SEALS], bytes[SEALS];
	rows_per_gen = 100;
	for (int i = 0; i < SEALS; i++) {
		if (strata_fill(db, n + (uint64_t)i) != 0)
			goto fail;
		uint64_t w = proc_wchar();
		uint64_t s = bench_now_ns();
		if (strata_seal(db, 0) != 0)
			goto fail;
		seals[i] = (double)(bench_now_ns() - s) / 1e6;
		bytes[i] = (double)(proc_wchar() - w);
	}
	bytes_stats(bytes, SEALS, &p->seal_bytes_p50, &p->seal_bytes_mean);
	qsort(seals, SEALS, sizeof(double), cmp_double);
	p->seal_p50 = seals[SEALS / 2];
	p->seal_max = seals[SEALS - 1];
	strata_close(db);
	bench_rmrf(dir);
	return;
fail:
	fprintf(stderr, "bench_growth: strata, %" PRIu64 " generations: %s\n", n, strata_last_error());
	p->failed = 1;
	if (db != NULL)
		strata_close(db);
	bench_rmrf(dir);
}

/* ---------------------------------------------------------------- rocksdb */

static rocksdb_options_t *
rdb_options(uint64_t n)
{
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_disable_auto_compactions(o, 1);
	rocksdb_options_set_level0_file_num_compaction_trigger(o, (int)n + 10);
	rocksdb_options_set_level0_slowdown_writes_trigger(o, (int)n + 10);
	rocksdb_options_set_level0_stop_writes_trigger(o, (int)n + 10);
	rocksdb_options_set_compression(o, rocksdb_zstd_compression);
	rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom(10));
	rocksdb_options_set_block_based_table_factory(o, t);
	rocksdb_block_based_options_destroy(t);
	return o;
}

static int
rdb_fill(rocksdb_t *db, rocksdb_writeoptions_t *wo, uint64_t gen)
{
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	char k[17], v[100];
	for (uint64_t i = 0; i < rows_per_gen; i++) {
		key_of(k, gen, i);
		value_of(v, gen, i);
		rocksdb_writebatch_put(wb, k, 16, v, 100);
	}
	char *err = NULL;
	rocksdb_write(db, wo, wb, &err);
	rocksdb_writebatch_destroy(wb);
	if (err != NULL) {
		fprintf(stderr, "bench_growth: rocksdb_write: %s\n", err);
		rocksdb_free(err);
		return -1;
	}
	return 0;
}

static int
rdb_flush(rocksdb_t *db)
{
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(fo, 1);
	char *err = NULL;
	rocksdb_flush(db, fo, &err);
	rocksdb_flushoptions_destroy(fo);
	if (err != NULL) {
		fprintf(stderr, "bench_growth: rocksdb_flush: %s\n", err);
		rocksdb_free(err);
		return -1;
	}
	return 0;
}

static void
rocksdb_gens(uint64_t n, struct gen_point *p)
{
	char dir[4096];
	bench_mkdtemp("growth-rocksdb", dir, sizeof(dir));
	rocksdb_options_t *o = rdb_options(n);
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(wo, 0);
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	char *err = NULL;
	uint64_t t0 = bench_now_ns();
	rocksdb_t *db = rocksdb_open(o, dir, &err);
	if (db == NULL)
		goto fail;
	for (uint64_t g = 0; g < n; g++)
		if (rdb_fill(db, wo, g) != 0 || rdb_flush(db) != 0)
			goto fail;
	p->build_s = (double)(bench_now_ns() - t0) / 1e9;
	rocksdb_close(db);
	db = NULL;
	bench_drop_cache(dir);
	t0 = bench_now_ns();
	db = rocksdb_open(o, dir, &err);
	if (db == NULL)
		goto fail;
	p->open_ms = (double)(bench_now_ns() - t0) / 1e6;
	p->rss_open_kb = bench_proc_status_kb("VmRSS");
	struct bench_rng r = {.s = 0x9e3779b97f4a7c15ull ^ n};
	struct bench_hist *hit = calloc(1, sizeof(*hit)), *miss = calloc(1, sizeof(*miss));
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < GETS; i++) {
			char k[17];
			uint64_t g = bench_rng_next(&r) % n, row = bench_rng_next(&r) % rows_per_gen;
			key_of(k, g, row);
			size_t vl = 0;
			uint64_t s = bench_now_ns();
			char *v = rocksdb_get(db, ro, k, 16, &vl, &err);
			uint64_t e = bench_now_ns() - s;
			if (v == NULL || vl != 100)
				goto fail;
			rocksdb_free(v);
			if (pass == 1)
				bench_hist_add(hit, e);
			key_of(k, g, rows_per_gen + row);
			s = bench_now_ns();
			v = rocksdb_get(db, ro, k, 16, &vl, &err);
			e = bench_now_ns() - s;
			if (v != NULL || err != NULL)
				goto fail;
			if (pass == 1)
				bench_hist_add(miss, e);
		}
	}
	p->hit_p50 = q_us(hit, 0.5);
	p->hit_p99 = q_us(hit, 0.99);
	p->miss_p50 = q_us(miss, 0.5);
	p->miss_p99 = q_us(miss, 0.99);
	free(hit);
	free(miss);
	p->rss_gets_kb = bench_proc_status_kb("VmRSS");
	double seals[SEALS], bytes[SEALS];
	uint64_t saved = rows_per_gen;
	rows_per_gen = 100;
	rocksdb_writeoptions_set_sync(wo, 1);
	for (int i = 0; i < SEALS; i++) {
		if (rdb_fill(db, wo, n + (uint64_t)i) != 0)
			goto fail;
		uint64_t w = proc_wchar();
		uint64_t s = bench_now_ns();
		if (rdb_flush(db) != 0)
			goto fail;
		seals[i] = (double)(bench_now_ns() - s) / 1e6;
		bytes[i] = (double)(proc_wchar() - w);
	}
	bytes_stats(bytes, SEALS, &p->seal_bytes_p50, &p->seal_bytes_mean);
	rows_per_gen = saved;
	qsort(seals, SEALS, sizeof(double), cmp_double);
	p->seal_p50 = seals[SEALS / 2];
	p->seal_max = seals[SEALS - 1];
	rocksdb_close(db);
	rocksdb_options_destroy(o);
	rocksdb_writeoptions_destroy(wo);
	rocksdb_readoptions_destroy(ro);
	bench_rmrf(dir);
	return;
fail:
	fprintf(stderr, "bench_growth: rocksdb, %" PRIu64 " L0 files: %s\n", n, err ? err : "a get failed");
	p->failed = 1;
	if (db != NULL)
		rocksdb_close(db);
	bench_rmrf(dir);
}

/* ---------------------------------------------------------------- shards */

struct shard_point {
	uint64_t n;
	double create_ms, open_ms;
	long fds, threads;
	uint64_t rss_kb;
	int failed;
};

static long
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;
	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 3; /* ".", "..", and the directory's own descriptor */
}

static void
many_shards(uint64_t n, struct shard_point *p)
{
	char dir[4096];
	bench_mkdtemp("growth-shards", dir, sizeof(dir));
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.shards = (uint32_t)n;
	o.sync = STRATA_SYNC_INTERVAL;
	o.open_threads = (uint32_t)bench_env_u64("BENCH_GROWTH_OPEN_THREADS", o.open_threads);
	strata *db = NULL;
	uint64_t t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0)
		goto fail;
	p->create_ms = (double)(bench_now_ns() - t0) / 1e6;
	for (uint32_t s = 0; s < n; s++) {
		strata_row row = {.key = "k", .key_len = 1, .value = "v", .value_len = 1};
		if (strata_append(db, s, &row, 1) != 0)
			goto fail;
	}
	strata_close(db);
	db = NULL;
	t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0)
		goto fail;
	p->open_ms = (double)(bench_now_ns() - t0) / 1e6;
	p->fds = count_fds();
	p->threads = (long)bench_proc_status_kb("Threads");
	p->rss_kb = bench_proc_status_kb("VmRSS");
	strata_close(db);
	bench_rmrf(dir);
	return;
fail:
	fprintf(stderr, "bench_growth: %" PRIu64 " shards: %s\n", n, strata_last_error());
	p->failed = 1;
	if (db != NULL)
		strata_close(db);
	bench_rmrf(dir);
}

/* ---------------------------------------------------------------- replay */

static uint64_t direct_bytes;
static double direct_s;

static int
direct_read_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag != FTW_F || st->st_size == 0)
		return 0;
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		return 0;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, 1u << 20) != 0) {
		close(fd);
		return 0;
	}
	uint64_t t0 = bench_now_ns();
	ssize_t r;
	off_t off = 0;
	while ((r = pread(fd, buf, 1u << 20, off)) > 0) {
		off += r;
		direct_bytes += (uint64_t)r;
	}
	direct_s += (double)(bench_now_ns() - t0) / 1e9;
	free(buf);
	close(fd);
	return 0;
}

/** Replay options, the same in the building process and a fresh one. */
static void
replay_options(strata_options *o, const char *dir)
{
	strata_options_init(o);
	o->dir = dir;
	o->shards = 1;
	o->sync = STRATA_SYNC_NONE;
	o->max_value_bytes = 1u << 20;
}

/** In a fresh process (what a node restarting sees): print the seconds one open of dir
 *  takes. */
static int
replay_open_fresh(const char *dir)
{
	strata_options o;
	replay_options(&o, dir);
	strata *db = NULL;
	uint64_t t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0) {
		fprintf(stderr, "bench_growth: replay: %s\n", strata_last_error());
		return 1;
	}
	double open_s = (double)(bench_now_ns() - t0) / 1e9;
	strata_close(db);
	printf("%.6f\n", open_s);
	return 0;
}

/** Replay of mb MiB of WAL; keys ascending (as a counter or a clock makes them) or, with
 *  random set, in random order. */
static void
replay(uint64_t mb, int random)
{
	char dir[4096], wal[4200];
	bench_mkdtemp("growth-replay", dir, sizeof(dir));
	strata_options o;
	replay_options(&o, dir);
	strata *db = NULL;
	if (strata_open(&o, &db) != 0)
		goto fail;
	static char keys[256][17], vals[256][1000];
	strata_row rows[256];
	uint64_t bytes = 0, gen = 0, x = 0x2545f4914f6cdd1dull;
	while (bytes < mb << 20) {
		for (int i = 0; i < 256; i++) {
			if (random) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				char t[32];
				snprintf(t, sizeof(t), "k%015" PRIu64, (uint64_t)(x % 1000000000000000ull));
				memcpy(keys[i], t, 17);
			} else {
				key_of(keys[i], gen, (uint64_t)i);
			}
			memset(vals[i], 'a' + (int)((gen + (uint64_t)i) % 26), sizeof(vals[i]));
			rows[i] = (strata_row){.key = keys[i], .key_len = 16, .value = vals[i], .value_len = 1000};
		}
		if (strata_append(db, 0, rows, 256) != 0)
			goto fail;
		bytes += 256 * (16 + 1000);
		gen++;
	}
	strata_stats st;
	strata_shard_stats(db, 0, &st);
	uint64_t wal_bytes = st.wal_bytes;
	strata_close(db);
	db = NULL;
	snprintf(wal, sizeof(wal), "%s/wal", dir);
	bench_drop_cache(wal);
	direct_bytes = 0;
	direct_s = 0;
	nftw(wal, direct_read_one, 32, FTW_PHYS);
	bench_drop_cache(wal);
	/* Cold, in a fresh process: a restarted node's memtable is memory this process never
	 * touched, which a virtual machine may have to back page by page. */
	char cmd[8400];
	snprintf(cmd, sizeof(cmd), "/proc/%d/exe --replay-open '%s'", (int)getpid(), dir);
	fflush(stdout);
	FILE *child = popen(cmd, "r");
	double fresh_cold = 0;
	int got = child != NULL && fscanf(child, "%lf", &fresh_cold) == 1;
	if (child != NULL && pclose(child) != 0)
		got = 0;
	if (!got)
		goto fail;
	bench_drop_cache(wal);
	uint64_t t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0)
		goto fail;
	double cold = (double)(bench_now_ns() - t0) / 1e9;
	strata_close(db);
	db = NULL;
	t0 = bench_now_ns();
	if (strata_open(&o, &db) != 0)
		goto fail;
	double warm = (double)(bench_now_ns() - t0) / 1e9;
	strata_close(db);
	db = NULL;
	double mib = (double)wal_bytes / (1u << 20);
	double direct = (double)direct_bytes / (1u << 20) / direct_s;
	printf("  WAL replay of %.0f MiB (%" PRIu64 " rows of 16 + 1000 bytes, keys %s); O_DIRECT "
	       "1 MiB reads of the same files: %.0f MiB/s\n", mib, gen * 256,
	       random ? "in random order" : "ascending", direct);
	printf("    cold, fresh process (a restart): %.2f s = %.0f MiB/s (%.0f%% of O_DIRECT)\n",
	       fresh_cold, mib / fresh_cold, 100.0 * (mib / fresh_cold) / direct);
	printf("    cold, in the process that built it: %.2f s = %.0f MiB/s (%.0f%% of O_DIRECT)\n",
	       cold, mib / cold, 100.0 * (mib / cold) / direct);
	printf("    warm (page cache), same process: %.2f s = %.0f MiB/s\n", warm, mib / warm);
	bench_rmrf(dir);
	return;
fail:
	fprintf(stderr, "bench_growth: replay: %s\n", strata_last_error());
	if (db != NULL)
		strata_close(db);
	bench_rmrf(dir);
}

/* ---------------------------------------------------------------- svg */

static double
lx(double v, double lo, double hi, double px0, double px1)
{
	return px0 + (log10(v) - log10(lo)) / (log10(hi) - log10(lo)) * (px1 - px0);
}

static void
svg(const char *path, const struct gen_point *s, const struct gen_point *r, int np)
{
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "bench_growth: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	const char *names[4] = {"open, ms", "seal p50, ms", "get miss p99, µs", "RSS after gets, MiB"};
	const int W = 360, H = 260;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "font-family=\"sans-serif\" font-size=\"11\">\n", W * 2 + 40, H * 2 + 60);
	fprintf(f, "<text x=\"10\" y=\"16\" font-size=\"13\">strata (blue) and RocksDB (orange) as "
		   "pending generations / L0 files grow (log-log; bench_growth)</text>\n");
	for (int c = 0; c < 4; c++) {
		double ox = 20 + (c % 2) * (W + 20), oy = 30 + (c / 2) * (H + 20);
		double lo = 1e300, hi = 0;
		for (int e = 0; e < 2; e++) {
			for (int i = 0; i < np; i++) {
				const struct gen_point *p = e ? &r[i] : &s[i];
				double v = c == 0 ? p->open_ms : c == 1 ? p->seal_p50 : c == 2 ? p->miss_p99
					   : (double)p->rss_gets_kb / 1024.0;
				if (p->failed || v <= 0)
					continue;
				lo = v < lo ? v : lo;
				hi = v > hi ? v : hi;
			}
		}
		if (hi <= 0)
			continue;
		lo /= 2;
		hi *= 2;
		fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"none\" "
			   "stroke=\"#999\"/>\n", ox, oy, W, H);
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s (%.3g .. %.3g)</text>\n", ox + 6, oy + 14,
			names[c], lo, hi);
		for (int e = 0; e < 2; e++) {
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
				e ? "#e07000" : "#1060d0");
			for (int i = 0; i < np; i++) {
				const struct gen_point *p = e ? &r[i] : &s[i];
				double v = c == 0 ? p->open_ms : c == 1 ? p->seal_p50 : c == 2 ? p->miss_p99
					   : (double)p->rss_gets_kb / 1024.0;
				if (p->failed || v <= 0)
					continue;
				fprintf(f, "%.1f,%.1f ", lx((double)p->n, (double)s[0].n / 2, (double)s[np - 1].n * 2,
							   ox, ox + W),
					lx(v, lo, hi, oy + H, oy));
			}
			fprintf(f, "\"/>\n");
		}
		for (int i = 0; i < np; i++)
			fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%" PRIu64 "</text>\n",
				lx((double)s[i].n, (double)s[0].n / 2, (double)s[np - 1].n * 2, ox, ox + W),
				oy + H - 4, s[i].n);
	}
	fprintf(f, "</svg>\n");
	fclose(f);
	printf("  SVG of the curves: %s\n", path);
}

/* ---------------------------------------------------------------- main */

/** Run fn in a child process; the child writes its result struct into a pipe. */
static int
in_child(void (*fn)(uint64_t, void *), uint64_t n, void *out, size_t size)
{
	int fds[2];
	if (pipe(fds) != 0)
		bench_die("pipe: %s", strerror(errno));
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		memset(out, 0, size);
		fn(n, out);
		ssize_t w = write(fds[1], out, size);
		_exit(w == (ssize_t)size ? 0 : 1);
	}
	close(fds[1]);
	ssize_t got = 0, r;
	while (got < (ssize_t)size && (r = read(fds[0], (char *)out + got, size - (size_t)got)) > 0)
		got += r;
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	return got == (ssize_t)size && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void
run_strata_gens(uint64_t n, void *out)
{
	struct gen_point *p = out;
	p->n = n;
	strata_gens(n, p);
}

static void
run_rocksdb_gens(uint64_t n, void *out)
{
	struct gen_point *p = out;
	p->n = n;
	rocksdb_gens(n, p);
}

static void
run_shards(uint64_t n, void *out)
{
	struct shard_point *p = out;
	p->n = n;
	many_shards(n, p);
}

static void
print_gen(const char *engine, const struct gen_point *p)
{
	if (p->failed) {
		printf("  %-8s %6" PRIu64 "  failed (see above)\n", engine, p->n);
		return;
	}
	printf("  %-8s %6" PRIu64 " %8.1f %9.1f %8.1f %8.1f %9.1f %9.1f %8.2f %8.2f %9.1f %9.1f %8.0f "
	       "%8.0f\n", engine, p->n, p->build_s, p->open_ms, p->hit_p50, p->hit_p99, p->miss_p50,
	       p->miss_p99, p->seal_p50, p->seal_max, p->seal_bytes_p50 / 1024.0,
	       p->seal_bytes_mean / 1024.0, (double)p->rss_open_kb / 1024.0,
	       (double)p->rss_gets_kb / 1024.0);
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--replay-open") == 0)
		return replay_open_fresh(argv[2]);
	uint64_t gens[MAX_POINTS], shards[MAX_POINTS];
	int ng = bench_env_list("BENCH_GROWTH_GENS", "10,100,1000,10000", gens, MAX_POINTS);
	int ns = bench_env_list("BENCH_GROWTH_SHARDS", "1,100,1000,10000", shards, MAX_POINTS);
	uint64_t rows = bench_env_u64("BENCH_GROWTH_ROWS", 100);
	uint64_t replay_mb = bench_env_u64("BENCH_GROWTH_REPLAY_MB", 1024);
	const char *svg_path = getenv("BENCH_GROWTH_SVG");
	if (svg_path == NULL || *svg_path == '\0')
		svg_path = "build/bench/growth.svg";
	const char *engines = getenv("BENCH_GROWTH_ENGINES");
	if (engines == NULL || *engines == '\0')
		engines = "strata,rocksdb";
	if (rows < 1 || rows > 1000000)
		bench_die("BENCH_GROWTH_ROWS must be 1..1000000");
	rows_per_gen = rows;
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);

	printf("== bench_growth: costs as pending generations and shards grow\n");
	printf("strata %s", STRATA_VERSION);
#ifdef BENCH_ROCKSDB_VERSION
	printf("; rocksdb %s", BENCH_ROCKSDB_VERSION);
#endif
	printf("\n");
	bench_print_host(bench_base_dir());
	printf("pending generations: %" PRIu64 " rows each (16-byte keys, 100-byte values), built with "
	       "sync none and nothing merging, then closed, dropped from the page cache (fadvise), "
	       "reopened; gets: %d warm hits (random generation) and misses (absent key); %d seals "
	       "of 100 rows with sync=fsync. RocksDB: one L0 file per flush, auto compactions off, "
	       "bloom 10 bits/key, default table cache.\n", rows, GETS, SEALS);
	printf("  %-8s %6s %8s %9s %8s %8s %9s %9s %8s %8s %9s %9s %8s %8s\n", "engine", "gens",
	       "build s", "open ms", "hit p50", "hit p99", "miss p50", "miss p99", "seal p50", "seal max",
	       "seal p50", "seal avg", "RSS MiB", "+gets");
	printf("  %-8s %6s %8s %9s %8s %8s %9s %9s %8s %8s %9s %9s %8s %8s\n", "", "", "", "(cold)", "µs",
	       "µs", "µs", "µs", "ms", "ms", "KiB", "KiB", "open", "MiB");
	struct gen_point sp[MAX_POINTS], rp[MAX_POINTS];
	memset(sp, 0, sizeof(sp));
	memset(rp, 0, sizeof(rp));
	for (int i = 0; i < ng; i++) {
		if (strstr(engines, "strata") != NULL) {
			if (in_child(run_strata_gens, gens[i], &sp[i], sizeof(sp[i])) != 0)
				sp[i].failed = 1, sp[i].n = gens[i];
			print_gen("strata", &sp[i]);
		}
		if (strstr(engines, "rocksdb") != NULL) {
			if (in_child(run_rocksdb_gens, gens[i], &rp[i], sizeof(rp[i])) != 0)
				rp[i].failed = 1, rp[i].n = gens[i];
			print_gen("rocksdb", &rp[i]);
		}
	}
	if (ng > 1)
		svg(svg_path, sp, rp, ng);

	printf("\nshards: a store of S shards (sync=interval, one row each) closed and reopened; "
	       "descriptors, threads and RSS while open; RLIMIT_NOFILE %llu\n",
	       (unsigned long long)rl.rlim_cur);
	printf("  %8s %10s %10s %8s %8s %8s\n", "shards", "create ms", "reopen ms", "fds", "threads", "RSS MiB");
	for (int i = 0; i < ns; i++) {
		struct shard_point p;
		memset(&p, 0, sizeof(p));
		if (in_child(run_shards, shards[i], &p, sizeof(p)) != 0 || p.failed) {
			printf("  %8" PRIu64 "  failed (see above)\n", shards[i]);
			continue;
		}
		printf("  %8" PRIu64 " %10.1f %10.1f %8ld %8ld %8.0f\n", p.n, p.create_ms, p.open_ms, p.fds,
		       p.threads, (double)p.rss_kb / 1024.0);
	}
	if (replay_mb > 0) {
		printf("\n");
		fflush(stdout);
		replay(replay_mb, 0);
		replay(replay_mb, 1);
	}
	return 0;
}
