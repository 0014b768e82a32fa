/*
 * bench_get — point-get latency across a backlog of pending generations, and with
 * everything merged, strata beside RocksDB.
 *
 * For each backlog size N (BENCH_GET_GENS, "10,100,1000,10000"), in a fresh store (one
 * shard, sync NONE, no policy): N generations of BENCH_GET_ROWS (4) rows of 100-byte
 * values, row j of generation g holding key j*N+g, so that every generation's key
 * range overlaps every other's and a get must consider them all. Then a warm pass and
 * BENCH_GET_SAMPLES timed gets of existing keys (hit) and of absent keys inside the
 * range (miss), printed as p50/p99. The merged case: BENCH_GET_MERGED_ROWS (200 000)
 * rows sealed in 8 generations and merged into the base, then the same gets (under 8: skipped). RocksDB
 * (BENCH_GET_ROCKSDB=1; 0 skips it) gets the same rows with one flush per generation,
 * auto compactions off and the L0 triggers raised so the files stay in L0, a 64 MiB
 * block cache (the strata default) and bloom filters of 10 bits per key; the merged
 * case is compacted into one level (at 10 000 generations a fifth of the samples for strata, a
 * tenth for RocksDB). BENCH_GET_GEN_BLOOM sets strata's generation_bloom_bits_per_key
 * (default 16). BENCH_GET_CACHE sets strata's block_cache_bytes
 * (default: the library's default). Prints figures; asserts nothing about speed.
 */
#include <inttypes.h>

#include <rocksdb/c.h>

#include "../../node/strata.h"
#include "bench_util.h"

#ifndef BENCH_ROCKSDB_VERSION
#define BENCH_ROCKSDB_VERSION "(version unknown)"
#endif

enum { MAX_SIZES = 8, VALUE_BYTES = 100 };

/** One engine under test, behind two calls. */
struct engine {
	/** Name printed. */
	const char *name;
	/** strata handle (or NULL). */
	strata *s;
	/** RocksDB handle (or NULL). */
	rocksdb_t *r;
	/** RocksDB read options. */
	rocksdb_readoptions_t *ro;
	/** RocksDB write options. */
	rocksdb_writeoptions_t *wo;
	/** RocksDB options (kept for close). */
	rocksdb_options_t *opt;
	/** RocksDB block cache. */
	rocksdb_cache_t *cache;
};

static void
key_of(char *k, uint64_t n, int miss)
{
	snprintf(k, 24, "k%012" PRIu64 "%s", n, miss ? "x" : "");
}

static void
eng_put(struct engine *e, uint64_t n)
{
	char k[24], v[VALUE_BYTES];
	key_of(k, n, 0);
	memset(v, 'a' + (int)(n % 26), sizeof(v));
	if (e->s != NULL) {
		strata_row row = {k, strlen(k), v, sizeof(v)};
		if (strata_append(e->s, 0, &row, 1) != 0)
			bench_die("strata_append: %s", strata_last_error());
		return;
	}
	char *err = NULL;
	rocksdb_put(e->r, e->wo, k, strlen(k), v, sizeof(v), &err);
	if (err != NULL)
		bench_die("rocksdb_put: %s", err);
}

static void
eng_flush(struct engine *e)
{
	if (e->s != NULL) {
		if (strata_seal(e->s, 0) != 0)
			bench_die("strata_seal: %s", strata_last_error());
		return;
	}
	char *err = NULL;
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_flush(e->r, fo, &err);
	rocksdb_flushoptions_destroy(fo);
	if (err != NULL)
		bench_die("rocksdb_flush: %s", err);
}

/** One get; 1 found, 0 absent. */
static int
eng_get(struct engine *e, uint64_t n, int miss)
{
	char k[24];
	key_of(k, n, miss);
	if (e->s != NULL) {
		void *v;
		size_t vl;
		int rc = strata_get(e->s, 0, k, strlen(k), &v, &vl);
		if (rc == STRATA_NOTFOUND)
			return 0;
		if (rc != 0)
			bench_die("strata_get: %s", strata_last_error());
		strata_free(v);
		return 1;
	}
	char *err = NULL;
	size_t vl;
	char *v = rocksdb_get(e->r, e->ro, k, strlen(k), &vl, &err);
	if (err != NULL)
		bench_die("rocksdb_get: %s", err);
	free(v);
	return v != NULL;
}

static void
eng_open(struct engine *e, const char *kind, const char *dir)
{
	memset(e, 0, sizeof(*e));
	e->name = kind;
	if (strcmp(kind, "strata") == 0) {
		strata_options o;
		strata_options_init(&o);
		o.dir = dir;
		o.shards = 1;
		o.sync = STRATA_SYNC_NONE;
		o.merge_max_inputs = 1000000;
#ifndef BENCH_GET_NO_CACHE_STATS
		const char *c = getenv("BENCH_GET_CACHE");
		if (c != NULL && *c != '\0')
			o.block_cache_bytes = bench_env_u64("BENCH_GET_CACHE", 0);
#endif
		o.generation_bloom_bits_per_key = (uint32_t)bench_env_u64(
			"BENCH_GET_GEN_BLOOM", o.generation_bloom_bits_per_key);
		if (strata_open(&o, &e->s) != 0)
			bench_die("strata_open %s: %s", dir, strata_last_error());
		return;
	}
	char *err = NULL;
	e->opt = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(e->opt, 1);
	rocksdb_options_set_disable_auto_compactions(e->opt, 1);
	rocksdb_options_set_level0_file_num_compaction_trigger(e->opt, 1 << 30);
	rocksdb_options_set_level0_slowdown_writes_trigger(e->opt, 1 << 30);
	rocksdb_options_set_level0_stop_writes_trigger(e->opt, 1 << 30);
	rocksdb_options_set_max_open_files(e->opt, -1);
	rocksdb_options_set_compression(e->opt, rocksdb_zstd_compression);
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
	e->cache = rocksdb_cache_create_lru(64u << 20);
	rocksdb_block_based_options_set_block_cache(t, e->cache);
	rocksdb_block_based_options_set_block_size(t, 64u << 10);
	rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom(10));
	rocksdb_options_set_block_based_table_factory(e->opt, t);
	rocksdb_block_based_options_destroy(t);
	e->r = rocksdb_open(e->opt, dir, &err);
	if (err != NULL)
		bench_die("rocksdb_open %s: %s", dir, err);
	e->ro = rocksdb_readoptions_create();
	e->wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(e->wo, 1);
}

static void
eng_close(struct engine *e)
{
	if (e->s != NULL) {
		strata_close(e->s);
		return;
	}
	rocksdb_close(e->r);
	rocksdb_readoptions_destroy(e->ro);
	rocksdb_writeoptions_destroy(e->wo);
	rocksdb_options_destroy(e->opt);
	rocksdb_cache_destroy(e->cache);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/** Time samples gets (hit or miss) of random keys below nkeys; p50 and p99 in us. */
static void
time_gets(struct engine *e, uint64_t nkeys, int miss, uint64_t samples, uint64_t *lat, double *p50,
	  double *p99)
{
	uint64_t x = 88172645463325252ull;
	for (uint64_t i = 0; i < samples; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint64_t n = x % nkeys;
		uint64_t t0 = bench_now_ns();
		int found = eng_get(e, n, miss);
		lat[i] = bench_now_ns() - t0;
		if (found == miss)
			bench_die("%s: key %" PRIu64 " %s", e->name, n, miss ? "found" : "not found");
	}
	qsort(lat, samples, sizeof(*lat), cmp_u64);
	*p50 = lat[samples / 2] / 1e3;
	*p99 = lat[samples * 99 / 100] / 1e3;
}

/** Build, warm, measure and print one case: gens generations of rows rows (merged: one
 *  base holding them all). */
static void
run_case(const char *kind, const char *root, uint64_t gens, uint64_t rows, int merged, uint64_t samples)
{
	char dir[4096];
	(void)root;
	bench_mkdtemp("get", dir, sizeof(dir));
	struct engine e;
	eng_open(&e, kind, dir);
	uint64_t nkeys = gens * rows;
	uint64_t t0 = bench_now_ns();
	for (uint64_t g = 0; g < gens; g++) {
		for (uint64_t j = 0; j < rows; j++)
			eng_put(&e, j * gens + g);
		eng_flush(&e);
	}
	if (merged && e.s != NULL) {
		uint32_t m;
		if (strata_merge(e.s, 0, 0, &m) != 0)
			bench_die("strata_merge: %s", strata_last_error());
	} else if (merged) {
		rocksdb_compact_range(e.r, NULL, 0, NULL, 0);
	}
	double build_s = (bench_now_ns() - t0) / 1e9;
	uint64_t *lat = malloc(samples * sizeof(*lat));
	if (lat == NULL)
		bench_die("out of memory");
	double h50, h99, m50, m99;
	time_gets(&e, nkeys, 0, samples, lat, &h50, &h99); /* warm */
	time_gets(&e, nkeys, 1, samples, lat, &m50, &m99);
	time_gets(&e, nkeys, 0, samples, lat, &h50, &h99);
	time_gets(&e, nkeys, 1, samples, lat, &m50, &m99);
	char what[64];
	if (merged)
		snprintf(what, sizeof(what), "merged, %" PRIu64 " rows", nkeys);
	else
		snprintf(what, sizeof(what), "%" PRIu64 " pending", gens);
	printf("| %-7s | %-20s | %8.1f | %8.1f | %8.1f | %8.1f | %6.1f s |\n", kind, what, h50, h99,
	       m50, m99, build_s);
	fflush(stdout);
#ifndef BENCH_GET_NO_CACHE_STATS
	if (e.s != NULL) {
		strata_stats st;
		if (strata_shard_stats(e.s, 0, &st) == 0)
			printf("|         |   cache hits %" PRIu64 ", misses %" PRIu64 ", %" PRIu64
			       " of %" PRIu64 " bytes, resident filters %" PRIu64 " bytes | | | | | |\n",
			       st.block_cache_hits, st.block_cache_misses, st.block_cache_bytes,
			       st.block_cache_capacity, st.resident_filter_bytes);
	}
#endif
	free(lat);
	eng_close(&e);
	bench_rmrf(dir);
}

int
main(void)
{
	uint64_t sizes[MAX_SIZES];
	int n = bench_env_list("BENCH_GET_GENS", "10,100,1000,10000", sizes, MAX_SIZES);
	uint64_t rows = bench_env_u64("BENCH_GET_ROWS", 4);
	uint64_t merged_rows = bench_env_u64("BENCH_GET_MERGED_ROWS", 200000);
	uint64_t samples = bench_env_u64("BENCH_GET_SAMPLES", 20000);
	int rocks = (int)bench_env_u64("BENCH_GET_ROCKSDB", 1);
	const char *root = bench_base_dir();
	if (rows == 0 || samples < 100)
		bench_die("BENCH_GET_ROWS must be > 0 and BENCH_GET_SAMPLES >= 100");
	printf("== bench_get: point gets across a backlog, strata %s vs RocksDB %s\n", STRATA_VERSION,
	       BENCH_ROCKSDB_VERSION);
	printf("%" PRIu64 " rows of %d-byte values per generation, every generation spanning the key "
	       "range; %" PRIu64 " timed gets per column after a warm pass; latencies in us\n", rows,
	       VALUE_BYTES, samples);
	printf("| engine  | case                 | hit p50  | hit p99  | miss p50 | miss p99 | build    |\n");
	printf("|---|---|---|---|---|---|---|\n");
	const char *kinds[2] = {"strata", "rocksdb"};
	for (int k = 0; k < (rocks ? 2 : 1); k++) {
		for (int i = 0; i < n; i++) {
			uint64_t s = sizes[i] >= 10000 && samples > 2000 ? samples / (k ? 10 : 5) : samples;
			run_case(kinds[k], root, sizes[i], rows, 0, s);
		}
		if (merged_rows >= 8)
			run_case(kinds[k], root, 8, merged_rows / 8, 1, samples);
	}
	return 0;
}
