/*
 * test_bcache.c — the block cache a store's readers share: its byte count never exceeds
 * its capacity, hits and misses are counted, a replaced object's blocks are never
 * served, readers on several threads share it (run this binary in the SAN=thread build
 * too), and a block read again after its eviction is checked again.
 */
#define ENGINE_UTIL_TAG "bcache"
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../../node/lib/bcache.h"
#include "../../node/lib/env.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine_util.h"
#pragma GCC diagnostic pop

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
free_value(void *v)
{
	free(v);
}

TEST(the_cache_never_charges_more_than_its_capacity)
{
	struct bcache *c;
	REQUIRE_EQ(bcache_new(2u << 20, &c), 0);
	struct bcache_stats st;
	bcache_get_stats(c, &st);
	REQUIRE_EQ(st.capacity + st.resident_capacity, 2u << 20);
	uint64_t seed = 7, over = 0;
	struct bcache_entry *held[32] = {NULL};
	for (int i = 0; i < 20000; i++) {
		uint64_t id = 1 + rnd(&seed) % 64, off = (rnd(&seed) % 256) * 4096;
		struct bcache_entry *e = bcache_lookup(c, id, off);
		if (e == NULL) {
			size_t n = 100 + rnd(&seed) % 140000;
			uint64_t *v = malloc(n);
			REQUIRE(v != NULL);
			v[0] = id ^ (off << 8);
			e = bcache_insert(c, id, off, v, n, free_value);
			REQUIRE(e != NULL);
		}
		CHECK_EQ(*(uint64_t *)bcache_value(e), id ^ (off << 8));
		/* Keep 32 pinned for a while (up to more than the capacity): a pinned entry is
		 * never evicted, and one that does not fit is not kept. */
		int slot = (int)(rnd(&seed) % 32);
		bcache_release(c, held[slot]);
		held[slot] = e;
		bcache_get_stats(c, &st);
		if (st.bytes > st.capacity)
			over++;
	}
	for (int i = 0; i < 32; i++)
		bcache_release(c, held[i]);
	CHECK_EQ(over, 0);
	bcache_get_stats(c, &st);
	CHECK(st.evictions > 1000);
	CHECK(st.rejected > 0);
	CHECK(st.hits > 0 && st.misses > 0);
	CHECK(st.bytes <= st.capacity);
	/* The resident budget is a quarter, reserved and given back. */
	CHECK_EQ(bcache_reserve(c, st.resident_capacity), 0);
	CHECK_EQ(bcache_reserve(c, 1), -1);
	bcache_unreserve(c, st.resident_capacity);
	CHECK_EQ(bcache_reserve(c, 1), 0);
	bcache_unreserve(c, 1);
	bcache_delete(c);
	CHECK_EQ(bcache_new(0, &c), STRATA_EINVAL);
}

/** 8-byte keys "kNNNNNNN" and values that name the key and a version. */
static void
put_rows(strata *db, uint32_t from, uint32_t n, uint32_t version)
{
	for (uint32_t i = from; i < from + n; i += 100) {
		strata_row rows[100];
		char keys[100][16], vals[100][120];
		uint32_t m = 0;
		for (uint32_t j = i; j < i + 100 && j < from + n; j++, m++) {
			snprintf(keys[m], sizeof(keys[m]), "k%07u", j);
			snprintf(vals[m], sizeof(vals[m]), "v%u-of-k%07u-%0100u", version, j, j);
			rows[m] = (strata_row){keys[m], 8, vals[m], strlen(vals[m]), STRATA_ROW_PUT};
		}
		if (strata_append(db, 0, rows, m) != 0)
			fprintf(stderr, "  append: %s\n", strata_last_error());
	}
}

/** 0 if key j reads as version; -1 (and a message) otherwise. */
static int
read_is(strata *db, uint32_t j, uint32_t version)
{
	char key[16], want[120];
	snprintf(key, sizeof(key), "k%07u", j);
	snprintf(want, sizeof(want), "v%u-of-k%07u-%0100u", version, j, j);
	void *v = NULL;
	size_t vl = 0;
	int rc = strata_get(db, 0, key, 8, &v, &vl);
	int ok = rc == 0 && vl == strlen(want) && memcmp(v, want, vl) == 0;
	if (!ok)
		fprintf(stderr, "  get %s: rc %d (%s), got %.*s, want %s\n", key, rc,
			rc ? strata_last_error() : "", rc == 0 ? (int)(vl < 24 ? vl : 24) : 0,
			rc == 0 ? (char *)v : "", want);
	strata_free(v);
	return ok ? 0 : -1;
}

static strata_options
small_opts(const char *dir, uint64_t cache)
{
	strata_options o = opts_for(dir);
	o.block_bytes = 4096;
	o.block_cache_bytes = cache;
	o.merge_max_inputs = 1000;
	return o;
}

TEST(random_gets_over_runs_larger_than_the_cache_stay_within_its_capacity)
{
	char *dir = tdir();
	strata_options o = small_opts(dir, 256u << 10);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* A base run of 20 000 rows (~2.6 MB) and 8 pending generations over it. */
	put_rows(db, 0, 20000, 1);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	for (uint32_t g = 0; g < 8; g++) {
		put_rows(db, g * 2500, 100, 2);
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	strata_stats st = stats_of(db);
	REQUIRE_EQ(st.block_cache_capacity, 192u << 10); /* a tenth of the rows' raw bytes */
	uint64_t seed = 11, over = 0, bad = 0, resident_over = 0;
	for (int i = 0; i < 6000; i++) {
		uint32_t j = (uint32_t)(rnd(&seed) % 20000);
		uint32_t version = (j % 2500) < 100 ? 2 : 1;
		if (read_is(db, j, version) != 0 && ++bad > 5)
			break;
		if (i % 50 == 0) {
			st = stats_of(db);
			over += st.block_cache_bytes > st.block_cache_capacity;
			resident_over += st.resident_filter_bytes > (64u << 10);
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(over, 0);
	CHECK_EQ(resident_over, 0);
	st = stats_of(db);
	CHECK(st.block_cache_evictions > 100);
	CHECK(st.block_cache_bytes > st.block_cache_capacity / 2);
	CHECK(st.resident_filter_bytes > 0);
	db_close(db);
}

TEST(hits_and_misses_are_counted)
{
	char *dir = tdir();
	strata_options o = small_opts(dir, 1u << 20);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	put_rows(db, 0, 1000, 1);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	strata_stats a = stats_of(db);
	CHECK_EQ(a.block_cache_hits, 0);
	CHECK_EQ(a.block_cache_misses, 0);
	REQUIRE_EQ(read_is(db, 500, 1), 0);
	strata_stats b = stats_of(db);
	CHECK_EQ(b.block_cache_hits, 0);
	CHECK_EQ(b.block_cache_misses, 2); /* the base run's partition, then its block */
	CHECK(b.block_cache_bytes > 4096);
	REQUIRE_EQ(read_is(db, 500, 1), 0);
	REQUIRE_EQ(read_is(db, 501, 1), 0); /* the same block */
	strata_stats c = stats_of(db);
	CHECK_EQ(c.block_cache_hits, 4);
	CHECK_EQ(c.block_cache_misses, 2);
	CHECK_EQ(c.block_cache_evictions, 0);
	db_close(db);
	/* 0: no cache, nothing counted, every get still served. */
	o.block_cache_bytes = 0;
	db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(read_is(db, 500, 1), 0);
	REQUIRE_EQ(read_is(db, 500, 1), 0);
	strata_stats d = stats_of(db);
	CHECK_EQ(d.block_cache_hits + d.block_cache_misses + d.block_cache_capacity, 0);
	db_close(db);
}

TEST(a_replaced_object_never_serves_its_cached_blocks)
{
	char *dir = tdir();
	strata_options o = small_opts(dir, 4u << 20);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* The same keys with values of the same size: every run has the same layout, so
	 * only the objects' identities tell their blocks apart. */
	put_rows(db, 0, 3000, 1);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	int bad = 0;
	for (uint32_t j = 0; j < 3000; j += 7)
		bad += read_is(db, j, 1) != 0;
	for (uint32_t version = 2; version <= 4; version++) {
		put_rows(db, 0, 3000, version);
		REQUIRE_EQ(strata_seal(db, 0), 0);
		for (uint32_t j = 0; j < 3000; j += 7)
			bad += read_is(db, j, version) != 0; /* the generation over the base */
		REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
		for (uint32_t j = 0; j < 3000; j += 7)
			bad += read_is(db, j, version) != 0; /* the new run */
		strata_plan *plan = NULL;
		REQUIRE_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
		REQUIRE_EQ(strata_commit_merge(db, plan), 0);
		for (uint32_t j = 0; j < 3000; j += 7)
			bad += read_is(db, j, version) != 0; /* the compacted run */
	}
	CHECK_EQ(bad, 0);
	CHECK(stats_of(db).block_cache_hits > 0);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	bad = 0;
	for (uint32_t j = 0; j < 3000; j += 7)
		bad += read_is(db, j, 4) != 0;
	CHECK_EQ(bad, 0);
	db_close(db);
}

/** Shared by the reader threads. */
struct readers {
	/** The store. */
	strata *db;
	/** Bad reads seen. */
	_Atomic int bad;
	/** Set by the writer when it is done. */
	_Atomic int done;
};

static void *
reader_main(void *arg)
{
	struct readers *rs = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	int n = 0;
	while (!atomic_load(&rs->done) || n < 2000) {
		uint32_t j = (uint32_t)(rnd(&seed) % 4000);
		char key[16];
		snprintf(key, sizeof(key), "k%07u", j);
		void *v = NULL;
		size_t vl = 0;
		int rc = strata_get(rs->db, 0, key, 8, &v, &vl);
		/* Any version, but of this key. */
		char tail[32];
		snprintf(tail, sizeof(tail), "-of-k%07u-", j);
		if (rc != 0 || vl < 20 || memmem(v, vl, tail, strlen(tail)) == NULL)
			atomic_fetch_add(&rs->bad, 1);
		strata_free(v);
		n++;
	}
	return NULL;
}

TEST(readers_on_several_threads_share_the_cache)
{
	char *dir = tdir();
	strata_options o = small_opts(dir, 128u << 10);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	put_rows(db, 0, 4000, 1);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	struct readers rs = {.db = db};
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		REQUIRE_EQ(pthread_create(&th[i], NULL, reader_main, &rs), 0);
	/* Meanwhile new generations, merges and a compaction replace what they read. */
	for (uint32_t version = 2; version <= 5; version++) {
		put_rows(db, (version * 1000) % 4000, 1000, version);
		CHECK_EQ(strata_seal(db, 0), 0);
		if (version % 2 == 1)
			CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	}
	strata_plan *plan = NULL;
	if (strata_prepare_compact(db, 0, 0, &plan) == 0)
		CHECK_EQ(strata_commit_merge(db, plan), 0);
	atomic_store(&rs.done, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(atomic_load(&rs.bad), 0);
	strata_stats st = stats_of(db);
	CHECK(st.block_cache_hits > 0);
	CHECK(st.block_cache_evictions > 0);
	CHECK(st.block_cache_bytes <= st.block_cache_capacity);
	db_close(db);
}

/** Flip a byte inside the first data block of shard 0's only base run in dir. */
static int
damage_run_block(const char *dir)
{
	char rdir[4200], path[4600];
	snprintf(rdir, sizeof(rdir), "%s/objects/" SHARD0 "run", dir);
	DIR *d = opendir(rdir);
	struct dirent *e;
	path[0] = '\0';
	int n = 0;
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (strstr(e->d_name, ".sst") != NULL) {
			snprintf(path, sizeof(path), "%s/%s", rdir, e->d_name);
			n++;
		}
	}
	if (d != NULL)
		closedir(d);
	if (n != 1) {
		fprintf(stderr, "  %d runs in %s, want 1\n", n, rdir);
		return -1;
	}
	FILE *f = fopen(path, "r+");
	if (f == NULL)
		return -1;
	fseek(f, 20, SEEK_SET);
	int ch = fgetc(f);
	fseek(f, 20, SEEK_SET);
	fputc(ch ^ 0x55, f);
	fclose(f);
	return 0;
}

TEST(a_block_read_again_after_its_eviction_is_checked_again)
{
	char *dir = tdir();
	strata_options o = small_opts(dir, 64u << 10);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	put_rows(db, 0, 4000, 1);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	REQUIRE_EQ(read_is(db, 0, 1), 0); /* the first block, now cached */
	REQUIRE_EQ(damage_run_block(dir), 0);
	CHECK_EQ(read_is(db, 1, 1), 0); /* a hit: what was checked when it was read */
	/* Read the rest of the run until the first block has surely been evicted. */
	strata_stats before = stats_of(db);
	for (uint32_t j = 100; j < 4000; j += 3)
		CHECK_EQ(read_is(db, j, 1), 0);
	strata_stats after = stats_of(db);
	CHECK(after.block_cache_evictions - before.block_cache_evictions > 100);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(strata_get(db, 0, "k0000002", 8, &v, &vl), STRATA_ECORRUPT);
	CHECK(strstr(strata_last_error(), "checksum") != NULL);
	CHECK(strstr(strata_last_error(), "block at offset 0") != NULL);
	strata_free(v);
	/* Still corrupt the next time: a failed read caches nothing. */
	CHECK_EQ(strata_get(db, 0, "k0000002", 8, &v, &vl), STRATA_ECORRUPT);
	strata_free(v);
	db_close(db);
}

/** preads of the store's environment. */
static atomic_long preads;
static ssize_t (*real_pread)(int fd, void *buf, size_t n, off_t off);

static ssize_t
count_pread(int fd, void *buf, size_t n, off_t off)
{
	atomic_fetch_add(&preads, 1);
	return real_pread(fd, buf, n, off);
}

TEST(a_get_that_misses_pending_generations_reads_none_of_them)
{
	static struct env_ops counted;
	counted = env_default;
	real_pread = env_default.pread;
	counted.pread = count_pread;
	char *dir = tdir();
	strata_options o = small_opts(dir, 256u << 10);
	o.env_ops = &counted;
	o.bloom_bits_per_key = 20;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* A base run larger than the cache ("b..." keys), then 100 pending generations of 8
	 * "g..." keys each, every one spanning the others' range. */
	char key[32], val[120];
	memset(val, 'v', sizeof(val));
	for (uint32_t i = 0; i < 20000; i++) {
		int kl = snprintf(key, sizeof(key), "b%07u", i);
		strata_row row = {key, (size_t)kl, val, sizeof(val)};
		REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
	}
	REQUIRE_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	for (uint32_t g = 0; g < 100; g++) {
		for (uint32_t r = 0; r < 8; r++) {
			int kl = snprintf(key, sizeof(key), "g%07u", r * 100 + g);
			strata_row row = {key, (size_t)kl, val, sizeof(val)};
			REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
		}
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	void *v = NULL;
	size_t vl = 0;
	for (uint32_t g = 0; g < 100; g++) { /* the first read of each generation */
		snprintf(key, sizeof(key), "g%07u", g);
		REQUIRE_EQ(strata_get(db, 0, key, 8, &v, &vl), 0);
		strata_free(v);
	}
	/* Gets of the base keep the evicting part of the cache turning over; in between,
	 * gets of absent keys inside every generation's range. */
	uint64_t seed = 5;
	long absent_reads = 0;
	for (int i = 0; i < 1000; i++) {
		for (int j = 0; j < (i % 10 == 0 ? 60 : 1); j++) { /* 60 blocks: more than the cache */
			snprintf(key, sizeof(key), "b%07u", (unsigned)(rnd(&seed) % 20000));
			REQUIRE_EQ(strata_get(db, 0, key, 8, &v, &vl), 0);
			strata_free(v);
		}
		snprintf(key, sizeof(key), "g%07ux", (unsigned)(rnd(&seed) % 800));
		long before = atomic_load(&preads);
		REQUIRE_EQ(strata_get(db, 0, key, 9, &v, &vl), STRATA_NOTFOUND);
		absent_reads += atomic_load(&preads) - before;
	}
	strata_stats st = stats_of(db);
	CHECK(st.block_cache_evictions > 100);
	CHECK(st.resident_filter_bytes > 100 * 100);
	CHECK(st.resident_filter_bytes <= (64u << 10));
	/* 100 000 generation probes: only a filter's false positive reads a block (246
	 * of them here, the filters' measured rate); a partition read per generation
	 * would be 100 000. */
	CHECK(absent_reads < 1000);
	if (absent_reads >= 1000)
		fprintf(stderr, "  %ld reads for 1000 absent keys\n", absent_reads);
	db_close(db);
}

/** End a test: stop the watchdog, clean up. */
static void
t_end(void)
{
	alarm(0);
	t_cleanup();
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	T(the_cache_never_charges_more_than_its_capacity);
	T(random_gets_over_runs_larger_than_the_cache_stay_within_its_capacity);
	T(hits_and_misses_are_counted);
	T(a_replaced_object_never_serves_its_cached_blocks);
	T(readers_on_several_threads_share_the_cache);
	T(a_block_read_again_after_its_eviction_is_checked_again);
	T(a_get_that_misses_pending_generations_reads_none_of_them);
	return HARNESS_END("test_bcache");
}
