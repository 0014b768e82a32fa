/* test_run.c — run files: round trips, seeks, bloom filters, corruption, memory bounds. */
#include <inttypes.h>

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <zstd.h>

#include "../../node/core/run.h"
#include "../../node/lib/crc.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"

#define RUN_KEY "shard-0000/gen/00000001.run"

/* ---- fixtures --------------------------------------------------------------- */

/** A temp dir with an fs object store in it, and a reader of the run under test. */
struct fix {
	/** Temp directory. */
	char *dir;
	/** Store rooted at dir. */
	struct objstore *os;
	/** Reader of RUN_KEY (fix_reader), closed by fix_close; or NULL. */
	struct run_reader *r;
};

static int
fix_open(struct fix *f)
{
	f->dir = harness_tmpdir("run");
	if (f->dir == NULL)
		return -1;
	return objstore_fs_new(f->dir, &f->os);
}

static void
fix_close(struct fix *f)
{
	if (f->r != NULL)
		run_reader_close(f->r);
	objstore_destroy(f->os);
	if (f->dir != NULL)
		harness_rmrf(f->dir);
	free(f->dir);
	f->r = NULL;
	f->os = NULL;
	f->dir = NULL;
}

/** Path of the file that holds RUN_KEY. */
static void
fix_path(const struct fix *f, char *path, size_t n)
{
	snprintf(path, n, "%s/%s", f->dir, RUN_KEY);
}

/** Whether the fixture's directory holds no file (no run, no temp file). */
static int
fix_has_no_file(const struct fix *f)
{
	char cmd[1100];
	snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -type f)\"", f->dir);
	return system(cmd) == 0;
}

static void
row_key(char *k, size_t n, uint32_t i)
{
	snprintf(k, n, "key%08u", i);
}

/** A deterministic, compressible value for row i; returns its length. */
static size_t
row_val(char *v, size_t n, uint32_t i)
{
	int len = snprintf(v, n, "value-%u-%u-", i, i * 2654435761u);
	size_t want = 10 + i % 40;
	while ((size_t)len < want && (size_t)len + 1 < n)
		v[len++] = (char)('a' + i % 26);
	v[len] = 0;
	return (size_t)len;
}

/** Write rows 0, step, 2*step, ... (count rows) with seq = 1000 + i. */
static int
write_rows(struct objstore *os, const char *key, const struct run_writer_options *o,
	   uint32_t count, uint32_t step, struct run_meta *meta)
{
	struct run_writer *w;
	int rc = run_writer_open(os, key, o, &w);
	if (rc)
		return rc;
	char k[32], v[128];
	for (uint32_t n = 0; n < count; n++) {
		uint32_t i = n * step;
		row_key(k, sizeof(k), i);
		size_t vl = row_val(v, sizeof(v), i);
		rc = run_writer_add(w, k, strlen(k), 1000 + i, v, vl);
		if (rc) {
			run_writer_abort(w);
			return rc;
		}
	}
	return run_writer_finish(w, meta);
}

/** Open the fixture and write RUN_KEY with write_rows. */
static int
fix_rows(struct fix *f, const struct run_writer_options *o, uint32_t count, uint32_t step,
	 struct run_meta *meta)
{
	int rc = fix_open(f);
	return rc ? rc : write_rows(f->os, RUN_KEY, o, count, step, meta);
}

/** Open f->r on RUN_KEY. */
static int
fix_reader(struct fix *f)
{
	return run_reader_open(f->os, RUN_KEY, &f->r);
}

/** fix_rows, then fix_reader. */
static int
fix_run(struct fix *f, const struct run_writer_options *o, uint32_t count, uint32_t step)
{
	int rc = fix_rows(f, o, count, step, NULL);
	return rc ? rc : fix_reader(f);
}

/** 1 when key i of a run written by write_rows with step 2 reads back wrong: an odd key
 *  must be absent, an even one must hold its seq and value. */
static int
row_misreads(struct run_reader *r, uint32_t i)
{
	char k[32], v[128];
	row_key(k, sizeof(k), i);
	uint64_t seq = 0;
	void *val = NULL;
	size_t vlen = 0;
	int rc = run_reader_get(r, k, strlen(k), &seq, &val, &vlen);
	if (i % 2 == 1)
		return rc != STRATA_NOTFOUND;
	size_t want = row_val(v, sizeof(v), i);
	int bad = rc != 0 || seq != 1000 + i || vlen != want || memcmp(val, v, want) != 0;
	env.free(val);
	return bad;
}

static const struct run_writer_options small_opts = {
	.block_bytes = 1024,
	.index_partition_bytes = 1024,
};

/* ---- round trips ------------------------------------------------------------ */

TEST(round_trip_many_rows_over_blocks_and_partitions)
{
	struct fix f = { 0 };
	const uint32_t n = 50000;
	struct run_meta m;
	REQUIRE_EQ(fix_rows(&f, &small_opts, n, 2, &m), 0);
	CHECK_EQ(m.rows, n);
	CHECK(m.blocks > 1000);
	CHECK_EQ(m.min_seq, 1000);
	CHECK_EQ(m.max_seq, 1000 + 2 * (n - 1));
	CHECK(m.bytes < m.raw_bytes); /* zstd was used */
	uint64_t size = 0;
	REQUIRE_EQ(objstore_size(f.os, RUN_KEY, &size), 0);
	CHECK_EQ(m.bytes, size);

	struct run_meta vm;
	CHECK_EQ(run_verify(f.os, RUN_KEY, &vm), 0);
	CHECK_EQ(vm.rows, m.rows);
	CHECK_EQ(vm.blocks, m.blocks);
	CHECK_EQ(vm.raw_bytes, m.raw_bytes);

	REQUIRE_EQ(fix_reader(&f), 0);
	struct run_reader *r = f.r;
	const struct run_meta *rm = run_reader_meta(r);
	CHECK_EQ(rm->rows, m.rows);
	CHECK_EQ(rm->blocks, m.blocks);
	CHECK_EQ(rm->bytes, m.bytes);
	CHECK_EQ(rm->raw_bytes, m.raw_bytes);
	CHECK_EQ(rm->min_seq, m.min_seq);
	CHECK_EQ(rm->max_seq, m.max_seq);
	CHECK(run_reader_partitions(r) > 10);
	CHECK(strcmp(run_reader_key(r), RUN_KEY) == 0);

	int bad = 0;
	for (uint32_t i = 0; i < 2 * n; i++)
		bad += row_misreads(r, i);
	CHECK_EQ(bad, 0);
	/* Absent keys between present ones: almost all answered by the bloom filters. */
	uint64_t skips = run_reader_bloom_skips(r);
	CHECK(skips > 0);
	CHECK(skips >= n * 9 / 10);
	CHECK(skips < n);
	fix_close(&f);
}

/** Get every key from the first row's to the last's of a run written by fix_run(rows,
 *  step): each row's key must be found with its seq, every key between them absent. */
static void
gets_over_the_range(struct run_reader *r, uint32_t rows, uint32_t step)
{
	char k[32];
	uint32_t found = 0, absent = 0;
	for (uint32_t i = 0; i < (rows - 1) * step; i++) {
		row_key(k, sizeof(k), i);
		uint64_t seq = 0;
		void *val = NULL;
		size_t vlen = 0;
		int rc = run_reader_get(r, k, strlen(k), &seq, &val, &vlen);
		if (i % step == 0) {
			found += rc == 0 && seq == 1000 + i;
			env.free(val);
		} else {
			absent += rc == STRATA_NOTFOUND;
		}
	}
	CHECK_EQ(found, rows - 1);
	CHECK_EQ(absent, (rows - 1) * (step - 1));
}

/* A generation's filter: a power of two bits, each probe's bit from its own step of an
 * LCG. Double hashing modulo 64 cycles through a few bits, which made a 4-row
 * generation's false-positive rate 0.5-1.3% (an odd step / any step) instead of the
 * ~0.07% its bits promise: at 10 000 pending generations, tens of block reads per get. */
TEST(power_of_two_filters_find_every_key_and_few_false_positives)
{
	struct fix f = { 0 };
	struct run_writer_options o = small_opts;
	o.block_bytes = 64u << 10;
	o.bloom_bits_per_key = 16;
	o.bloom_k_bits_per_key = 10;
	o.pow2_filters = 1;
	enum { STEP = 2500, ROWS = 4 };
	REQUIRE_EQ(fix_run(&f, &o, ROWS, STEP), 0);
	struct run_reader *r = f.r;
	CHECK_EQ(run_reader_meta(r)->blocks, 1);
	gets_over_the_range(r, ROWS, STEP);
	/* Every absent key inside the range is a bloom probe; those it passed read the
	 * block. 64 bits, 4 keys, k = 7: 0.07% expected (5 of 7497), 0.5-1.3% from double
	 * hashing. */
	uint64_t probes = (ROWS - 1) * (STEP - 1), skips = run_reader_bloom_skips(r);
	fprintf(stderr, "  # %" PRIu64 " false positives in %" PRIu64 " absent keys\n",
		probes - skips, probes);
	CHECK(probes - skips <= probes * 4 / 1000);
	fix_close(&f);
}

/* A merged run's filters (any size) take each probe's bit by a multiply, not h mod
 * nbits; files written with the division before still read. Both must find every key
 * and pass about the share of absent keys that 10 bits a key promise (0.8%). */
TEST(range_filters_and_legacy_filters_find_every_key_and_few_false_positives)
{
	for (int legacy = 0; legacy < 2; legacy++) {
		struct fix f = { 0 };
		struct run_writer_options o = small_opts;
		o.block_bytes = 16u << 10;
		o.index_partition_bytes = 16u << 10;
		o.bloom_bits_per_key = 10;
		o.legacy_filters = legacy;
		enum { STEP = 8, ROWS = 4000 };
		REQUIRE_EQ(fix_run(&f, &o, ROWS, STEP), 0);
		struct run_reader *r = f.r;
		CHECK(run_reader_meta(r)->blocks > 4);
		gets_over_the_range(r, ROWS, STEP);
		uint64_t probes = (uint64_t)(ROWS - 1) * (STEP - 1), skips = run_reader_bloom_skips(r);
		fprintf(stderr, "  # %s filters: %" PRIu64 " false positives in %" PRIu64 " absent keys\n",
			legacy ? "h mod nbits" : "range", probes - skips, probes);
		CHECK(probes - skips <= probes * 2 / 100);
		fix_close(&f);
	}
}

/* A generation a backlog's gets pass by (key outside its range, or rows older than the
 * row found) gets its probe at the first such lookup, so the view's hints cover it and
 * later gets never touch its reader; before, only a lookup inside its range built one. */
TEST(a_lookup_outside_a_resident_run_builds_its_probe)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, NULL, 100, 1, NULL), 0);
	struct run_read_options ro = {.resident_index = 1};
	for (int why = 0; why < 2; why++) {
		struct run_reader *r;
		REQUIRE_EQ(run_reader_open_with(f.os, RUN_KEY, &ro, 1, &r), 0);
		CHECK(run_reader_probe(r) == NULL);
		struct run_key k;
		char key[32];
		row_key(key, sizeof(key), why == 0 ? 5000 : 50);
		run_key_init(&k, key, strlen(key));
		uint64_t seq = 0;
		void *val = NULL;
		size_t vlen = 0;
		uint32_t kind = 0;
		/* why 0: past the last key; why 1: in range, but a newer row was found. */
		CHECK_EQ(run_reader_find(r, &k, why == 0 ? 0 : 1u << 30, &seq, &val, &vlen, &kind),
			 STRATA_NOTFOUND);
		const struct run_probe *pr = run_reader_probe(r);
		CHECK(pr != NULL);
		if (pr != NULL)
			CHECK_EQ(run_probe_may_hold(pr, &k, why == 0 ? 0 : 1u << 30), 0);
		run_reader_close(r);
	}
	fix_close(&f);
}

TEST(get_outside_key_range_skips_io)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_run(&f, &small_opts, 1000, 1), 0);
	struct run_reader *r = f.r;
	/* Remove the object: any IO would now fail with an error, not NOTFOUND. */
	REQUIRE_EQ(objstore_del(f.os, RUN_KEY), 0);
	void *val = NULL;
	size_t vlen;
	uint64_t seq;
	CHECK_EQ(run_reader_get(r, "a", 1, &seq, &val, &vlen), STRATA_NOTFOUND);
	CHECK_EQ(run_reader_get(r, "key", 3, &seq, &val, &vlen), STRATA_NOTFOUND);
	CHECK_EQ(run_reader_get(r, "key00000999\x00", 12, &seq, &val, &vlen), STRATA_NOTFOUND);
	CHECK_EQ(run_reader_get(r, "zzz", 3, &seq, &val, &vlen), STRATA_NOTFOUND);
	CHECK(val == NULL);
	/* Inside the range it does need IO, which fails cleanly. */
	int rc = run_reader_get(r, "key00000500", 11, &seq, &val, &vlen);
	CHECK(rc < 0);
	fix_close(&f);
}

/** An object store that forwards to another one and counts range reads. */
struct counting_os {
	/** Generic header. */
	struct objstore base;
	/** The real store. */
	struct objstore *inner;
	/** get_range calls. */
	int ranges;
};

static int
cnt_get_range(struct objstore *os, const char *key, uint64_t off, size_t len, void *dst,
	      size_t *got)
{
	struct counting_os *c = (struct counting_os *)os;
	__atomic_fetch_add(&c->ranges, 1, __ATOMIC_RELAXED);
	return objstore_get_range(c->inner, key, off, len, dst, got);
}

static int
cnt_size(struct objstore *os, const char *key, uint64_t *size)
{
	return objstore_size(((struct counting_os *)os)->inner, key, size);
}

static const struct objstore_ops cnt_ops = {
	.get_range = cnt_get_range,
	.size = cnt_size,
};

TEST(get_caches_partitions_and_iter_does_not)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, &small_opts, 5000, 1, NULL), 0);
	struct counting_os c = { .base = { .ops = &cnt_ops, .name = "counting" }, .inner = f.os };
	struct run_reader *r;
	REQUIRE_EQ(run_reader_open(&c.base, RUN_KEY, &r), 0);
	REQUIRE(run_reader_partitions(r) > 2);

	/* A full scan reads every partition and block but leaves the cache empty. */
	struct run_iter *it;
	REQUIRE_EQ(run_iter_new(r, NULL, 0, &it), 0);
	int rows = 0, rc;
	while ((rc = run_iter_next(it)) == 1)
		rows++;
	CHECK_EQ(rc, 0);
	CHECK_EQ(rows, 5000);
	run_iter_free(it);

	void *val;
	size_t vlen;
	uint64_t seq;
	c.ranges = 0;
	REQUIRE_EQ(run_reader_get(r, "key00000007", 11, &seq, &val, &vlen), 0);
	env.free(val);
	CHECK_EQ(c.ranges, 2); /* partition + block */
	c.ranges = 0;
	REQUIRE_EQ(run_reader_get(r, "key00000008", 11, &seq, &val, &vlen), 0);
	env.free(val);
	CHECK_EQ(c.ranges, 1); /* block only: the partition is cached */
	run_reader_close(r);
	fix_close(&f);
}

TEST(iter_full_scan_returns_every_row_in_order)
{
	struct fix f = { 0 };
	const uint32_t n = 20000;
	REQUIRE_EQ(fix_run(&f, &small_opts, n, 3), 0);
	struct run_iter *it;
	REQUIRE_EQ(run_iter_new(f.r, NULL, 0, &it), 0);
	uint32_t got = 0;
	int bad = 0, rc;
	char k[32], v[128];
	while ((rc = run_iter_next(it)) == 1) {
		const void *key, *val;
		size_t klen, vlen;
		uint64_t seq;
		run_iter_row(it, &key, &klen, &seq, &val, &vlen);
		uint32_t i = got * 3;
		row_key(k, sizeof(k), i);
		size_t vl = row_val(v, sizeof(v), i);
		if (klen != strlen(k) || memcmp(key, k, klen) != 0 || seq != 1000 + i || vlen != vl ||
		    memcmp(val, v, vl) != 0)
			bad++;
		got++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(got, n);
	CHECK_EQ(bad, 0);
	CHECK_EQ(run_iter_next(it), 0); /* stays at the end */
	run_iter_free(it);
	fix_close(&f);
}

/** Seek to key, return the first row's key number (-1 at end, -2 on error). */
static long
seek_first(struct run_reader *r, const char *key)
{
	struct run_iter *it;
	if (run_iter_new(r, key, key ? strlen(key) : 0, &it) != 0)
		return -2;
	long res = -1;
	int rc = run_iter_next(it);
	if (rc == 1) {
		const void *k;
		size_t klen;
		run_iter_row(it, &k, &klen, NULL, NULL, NULL);
		char buf[32];
		snprintf(buf, sizeof(buf), "%.*s", (int)klen, (const char *)k);
		res = strtol(buf + 3, NULL, 10);
	} else if (rc < 0) {
		res = -2;
	}
	run_iter_free(it);
	return res;
}

TEST(iter_seek_lands_on_first_row_at_or_after_key)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	/* keys 10, 20, ..., 100000: many blocks and partitions */
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, &small_opts, &w), 0);
	char k[32];
	for (uint32_t i = 1; i <= 10000; i++) {
		row_key(k, sizeof(k), i * 10);
		REQUIRE_EQ(run_writer_add(w, k, strlen(k), i, "v", 1), 0);
	}
	REQUIRE_EQ(run_writer_finish(w, NULL), 0);
	REQUIRE_EQ(fix_reader(&f), 0);
	struct run_reader *r = f.r;
	REQUIRE(run_reader_partitions(r) > 2);
	CHECK_EQ(seek_first(r, NULL), 10);
	CHECK_EQ(seek_first(r, "a"), 10);            /* before the first key */
	CHECK_EQ(seek_first(r, "key00000010"), 10);  /* the first key */
	CHECK_EQ(seek_first(r, "key00050000"), 50000); /* an existing key */
	CHECK_EQ(seek_first(r, "key00050001"), 50010); /* between keys */
	CHECK_EQ(seek_first(r, "key0005000"), 50000);  /* a prefix sorts first */
	CHECK_EQ(seek_first(r, "key00100000"), 100000); /* the last key */
	CHECK_EQ(seek_first(r, "key00100001"), -1);  /* past the last key */
	CHECK_EQ(seek_first(r, "z"), -1);
	/* Every block boundary: seeking to each key and just past it. */
	int bad = 0;
	for (uint32_t i = 1; i <= 10000; i += 7) {
		row_key(k, sizeof(k), i * 10);
		if (seek_first(r, k) != (long)i * 10)
			bad++;
		row_key(k, sizeof(k), i * 10 + 1);
		if (seek_first(r, k) != (i == 10000 ? -1 : (long)(i + 1) * 10))
			bad++;
	}
	CHECK_EQ(bad, 0);
	/* After a seek, the scan continues to the end in order. */
	struct run_iter *it;
	REQUIRE_EQ(run_iter_new(r, "key00099955", 11, &it), 0);
	int n = 0;
	while (run_iter_next(it) == 1)
		n++;
	CHECK_EQ(n, 5); /* 99960 .. 100000 */
	run_iter_free(it);
	fix_close(&f);
}

TEST(value_of_16mib_round_trips)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	size_t big = 16u << 20;
	uint8_t *v = malloc(big);
	REQUIRE(v != NULL);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < big; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v[i] = (uint8_t)x;
	}
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, NULL, &w), 0);
	REQUIRE_EQ(run_writer_add(w, "a", 1, 1, "small", 5), 0);
	REQUIRE_EQ(run_writer_add(w, "b", 1, 2, v, big), 0);
	REQUIRE_EQ(run_writer_add(w, "c", 1, 3, "small", 5), 0);
	struct run_meta m;
	REQUIRE_EQ(run_writer_finish(w, &m), 0);
	CHECK_EQ(m.rows, 3);
	CHECK_EQ(m.blocks, 3); /* the big row gets a block of its own */
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), 0);

	REQUIRE_EQ(fix_reader(&f), 0);
	struct run_reader *r = f.r;
	void *val = NULL;
	size_t vlen = 0;
	uint64_t seq = 0;
	REQUIRE_EQ(run_reader_get(r, "b", 1, &seq, &val, &vlen), 0);
	CHECK_EQ(seq, 2);
	CHECK_EQ(vlen, big);
	CHECK(memcmp(val, v, big) == 0);
	env.free(val);
	struct run_iter *it;
	REQUIRE_EQ(run_iter_new(r, "b", 1, &it), 0);
	REQUIRE_EQ(run_iter_next(it), 1);
	const void *ival;
	run_iter_row(it, NULL, NULL, NULL, &ival, &vlen);
	CHECK_EQ(vlen, big);
	CHECK(memcmp(ival, v, big) == 0);
	REQUIRE_EQ(run_iter_next(it), 1);
	REQUIRE_EQ(run_iter_next(it), 0);
	run_iter_free(it);
	free(v);
	fix_close(&f);
}

TEST(keys_out_of_order_are_refused)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, NULL, &w), 0);
	REQUIRE_EQ(run_writer_add(w, "abc", 3, 1, "x", 1), 0);
	CHECK_EQ(run_writer_add(w, "abc", 3, 2, "x", 1), STRATA_EINVAL); /* equal */
	CHECK(strstr(diag_last(), RUN_KEY) != NULL);
	CHECK_EQ(run_writer_add(w, "abb", 3, 2, "x", 1), STRATA_EINVAL); /* smaller */
	CHECK_EQ(run_writer_add(w, "ab", 3 - 1, 2, "x", 1), STRATA_EINVAL); /* a prefix */
	CHECK_EQ(run_writer_add(w, "", 0, 2, "x", 1), STRATA_EINVAL);  /* empty */
	char big[STRATA_MAX_KEY + 1];
	memset(big, 'z', sizeof(big));
	CHECK_EQ(run_writer_add(w, big, sizeof(big), 2, "x", 1), STRATA_ETOOBIG);
	/* Refusals leave the writer usable. */
	CHECK_EQ(run_writer_add(w, "abc\0", 4, 3, "y", 1), 0);
	CHECK_EQ(run_writer_add(w, "abd", 3, 4, "z", 1), 0);
	struct run_meta m;
	REQUIRE_EQ(run_writer_finish(w, &m), 0);
	CHECK_EQ(m.rows, 3);
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), 0);
	fix_close(&f);
}

TEST(bad_options_are_refused)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer *w = NULL;
	struct run_writer_options o = { .block_bytes = 1 };
	CHECK_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), STRATA_EINVAL);
	o = (struct run_writer_options){ .index_partition_bytes = RUN_MAX_BLOCK_BYTES + 1 };
	CHECK_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), STRATA_EINVAL);
	o = (struct run_writer_options){ .zstd_level = 1000 };
	CHECK_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), STRATA_EINVAL);
	o = (struct run_writer_options){ .bloom_bits_per_key = 1000 };
	CHECK_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), STRATA_EINVAL);
	o = (struct run_writer_options){ .max_compressed_per_kib = 1025 };
	CHECK_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), STRATA_EINVAL);
	uint64_t size;
	CHECK_EQ(objstore_size(f.os, RUN_KEY, &size), STRATA_NOTFOUND);
	fix_close(&f);
}

TEST(bloom_disabled_still_finds_every_key)
{
	struct fix f = { 0 };
	struct run_writer_options o = small_opts;
	o.bloom_bits_per_key = RUN_BLOOM_DISABLED;
	REQUIRE_EQ(fix_rows(&f, &o, 2000, 2, NULL), 0);
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), 0);
	REQUIRE_EQ(fix_reader(&f), 0);
	struct run_reader *r = f.r;
	char k[32];
	int bad = 0;
	for (uint32_t i = 0; i < 4000; i++) {
		row_key(k, sizeof(k), i);
		void *val = NULL;
		size_t vlen;
		int rc = run_reader_get(r, k, strlen(k), NULL, &val, &vlen);
		if (rc != (i % 2 ? STRATA_NOTFOUND : 0))
			bad++;
		env.free(val);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(run_reader_bloom_skips(r), 0);
	fix_close(&f);
}

TEST(empty_run_round_trips)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, NULL, &w), 0);
	CHECK_EQ(run_writer_blocks(w), 0);
	struct run_meta m;
	REQUIRE_EQ(run_writer_finish(w, &m), 0);
	CHECK_EQ(m.rows, 0);
	CHECK_EQ(m.blocks, 0);
	CHECK_EQ(m.min_seq, 0);
	CHECK_EQ(m.max_seq, 0);
	CHECK(m.bytes > 0);
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), 0);
	REQUIRE_EQ(fix_reader(&f), 0);
	struct run_reader *r = f.r;
	CHECK_EQ(run_reader_meta(r)->rows, 0);
	CHECK_EQ(run_reader_partitions(r), 0);
	void *val = NULL;
	size_t vlen;
	CHECK_EQ(run_reader_get(r, "a", 1, NULL, &val, &vlen), STRATA_NOTFOUND);
	struct run_iter *it;
	REQUIRE_EQ(run_iter_new(r, NULL, 0, &it), 0);
	CHECK_EQ(run_iter_next(it), 0);
	run_iter_free(it);
	REQUIRE_EQ(run_iter_new(r, "a", 1, &it), 0);
	CHECK_EQ(run_iter_next(it), 0);
	run_iter_free(it);
	fix_close(&f);
}

static int
count_cb(void *ctx, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	(*(int *)ctx)++;
	return 0;
}

TEST(abort_leaves_nothing)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, &small_opts, &w), 0);
	char k[32];
	for (uint32_t i = 0; i < 3000; i++) {
		row_key(k, sizeof(k), i);
		REQUIRE_EQ(run_writer_add(w, k, strlen(k), i, "value", 5), 0);
	}
	CHECK(run_writer_blocks(w) > 10);
	run_writer_abort(w);
	uint64_t size;
	CHECK_EQ(objstore_size(f.os, RUN_KEY, &size), STRATA_NOTFOUND);
	int n = 0;
	CHECK_EQ(objstore_list(f.os, "", count_cb, &n), 0);
	CHECK_EQ(n, 0);
	CHECK(fix_has_no_file(&f)); /* no temp file left either */
	fix_close(&f);
}

/** pwrite calls left before the injected ENOSPC. */
static int pwrite_budget;

static ssize_t
failing_pwrite(int fd, const void *b, size_t n, off_t off)
{
	if (pwrite_budget-- <= 0) {
		errno = ENOSPC;
		return -1;
	}
	return pwrite(fd, b, n, off);
}

TEST(write_failure_fails_finish_and_leaves_nothing)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, &small_opts, &w), 0);
	pwrite_budget = 5;
	env.pwrite = failing_pwrite;
	char k[32];
	int rc = 0;
	uint32_t i;
	for (i = 0; i < 3000 && rc == 0; i++) {
		row_key(k, sizeof(k), i);
		rc = run_writer_add(w, k, strlen(k), i, "value", 5);
	}
	env_reset();
	CHECK_EQ(rc, STRATA_ENOSPC);
	CHECK(i < 3000);
	row_key(k, sizeof(k), 5000);
	CHECK_EQ(run_writer_add(w, k, strlen(k), 1, "v", 1), STRATA_ENOSPC); /* sticky */
	CHECK_EQ(run_writer_finish(w, NULL), STRATA_ENOSPC);
	uint64_t size;
	CHECK_EQ(objstore_size(f.os, RUN_KEY, &size), STRATA_NOTFOUND);
	CHECK(fix_has_no_file(&f));
	fix_close(&f);
}

/** sync_file_range calls seen, and the fds they named. */
static int sfr_calls, sfr_other_fd, sfr_fd = -1;

static int
counting_sync_file_range(int fd, off_t off, off_t n, unsigned int flags)
{
	if (sfr_fd < 0)
		sfr_fd = fd;
	else if (fd != sfr_fd)
		sfr_other_fd++;
	sfr_calls++;
	return sync_file_range(fd, off, n, flags);
}

/* A run of several MiB starts its writeback about every bytes_per_sync (1 MiB) bytes
 * through the env seam, so its final fsync has little left to write. */
TEST(run_writer_starts_writeback_every_mib)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	sfr_calls = sfr_other_fd = 0;
	sfr_fd = -1;
	env.sync_file_range = counting_sync_file_range;
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, NULL, &w), 0);
	/* Incompressible values: 6000 rows of 1 KiB make a run of about 6 MiB. */
	uint64_t x = 88172645463325252ull;
	char k[32], v[1024];
	int rc = 0;
	for (uint32_t i = 0; i < 6000 && rc == 0; i++) {
		for (size_t b = 0; b < sizeof(v); b += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(v + b, &x, 8);
		}
		row_key(k, sizeof(k), i);
		rc = run_writer_add(w, k, strlen(k), i, v, sizeof(v));
	}
	REQUIRE_EQ(rc, 0);
	struct run_meta m;
	REQUIRE_EQ(run_writer_finish(w, &m), 0);
	env_reset();
	REQUIRE(m.bytes > (5u << 20));
	/* One call per MiB, give or take the block that crossed each MiB and the tail. */
	CHECK(sfr_calls >= (int)(m.bytes / ((1u << 20) + (128u << 10))) - 1);
	CHECK(sfr_calls <= (int)(m.bytes >> 20));
	CHECK_EQ(sfr_other_fd, 0);
	REQUIRE_EQ(fix_reader(&f), 0);
	CHECK_EQ(run_reader_meta(f.r)->rows, 6000);
	fix_close(&f);
}

TEST(writer_blocks_counts_flushed_blocks)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer *w;
	struct run_writer_options o = { .block_bytes = 100 };
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), 0);
	char v[60];
	memset(v, 'v', sizeof(v));
	/* Each row is 1 + 1 + 8 + 4 + 60 = 74 bytes: one row per block. */
	REQUIRE_EQ(run_writer_add(w, "k001", 4, 1, v, sizeof(v)), 0);
	CHECK_EQ(run_writer_blocks(w), 0);
	REQUIRE_EQ(run_writer_add(w, "k002", 4, 1, v, sizeof(v)), 0);
	CHECK_EQ(run_writer_blocks(w), 1);
	REQUIRE_EQ(run_writer_add(w, "k003", 4, 1, v, 10), 0); /* 24 bytes: fits with k002 */
	CHECK_EQ(run_writer_blocks(w), 1);
	REQUIRE_EQ(run_writer_add(w, "k004", 4, 1, v, 10), 0); /* 172 > 100: new block */
	CHECK_EQ(run_writer_blocks(w), 2);
	struct run_meta m;
	REQUIRE_EQ(run_writer_finish(w, &m), 0);
	CHECK_EQ(m.blocks, 3);
	fix_close(&f);
}

/* ---- concurrency ------------------------------------------------------------ */

/** Work for one reader thread. */
struct thr_arg {
	/** Shared reader. */
	struct run_reader *r;
	/** Thread number (picks the key order). */
	uint32_t t;
	/** Rows in the run (keys 0, 2, 4, ...). */
	uint32_t n;
	/** Mismatches seen. */
	int bad;
};

static void *
get_thread(void *p)
{
	struct thr_arg *a = p;
	for (uint32_t j = 0; j < 2 * a->n; j++)
		a->bad += row_misreads(a->r, (j * (2 * a->t + 1) + a->t * 977) % (2 * a->n));
	return NULL;
}

static void *
iter_thread(void *p)
{
	struct thr_arg *a = p;
	struct run_iter *it;
	char k[32];
	row_key(k, sizeof(k), a->t * 100);
	if (run_iter_new(a->r, k, strlen(k), &it) != 0) {
		a->bad++;
		return NULL;
	}
	uint32_t i = a->t * 100;
	int rc;
	while ((rc = run_iter_next(it)) == 1) {
		const void *key;
		size_t klen;
		run_iter_row(it, &key, &klen, NULL, NULL, NULL);
		row_key(k, sizeof(k), i);
		if (klen != strlen(k) || memcmp(key, k, klen) != 0)
			a->bad++;
		i += 2;
	}
	if (rc != 0 || i != 2 * a->n)
		a->bad++;
	run_iter_free(it);
	return NULL;
}

TEST(concurrent_gets_and_iterators_share_a_reader)
{
	struct fix f = { 0 };
	const uint32_t n = 5000;
	REQUIRE_EQ(fix_run(&f, &small_opts, n, 2), 0);
	pthread_t th[6];
	struct thr_arg a[6];
	for (uint32_t t = 0; t < 6; t++) {
		a[t] = (struct thr_arg){ .r = f.r, .t = t, .n = n };
		REQUIRE_EQ(pthread_create(&th[t], NULL, t < 4 ? get_thread : iter_thread, &a[t]), 0);
	}
	int bad = 0;
	for (int t = 0; t < 6; t++) {
		pthread_join(th[t], NULL);
		bad += a[t].bad;
	}
	CHECK_EQ(bad, 0);
	fix_close(&f);
}

/* ---- corruption ------------------------------------------------------------- */

static void
flip_byte(const struct fix *f, uint64_t off)
{
	char path[1100];
	fix_path(f, path, sizeof(path));
	int fd = open(path, O_RDWR);
	uint8_t b = 0;
	if (fd < 0 || pread(fd, &b, 1, (off_t)off) != 1)
		abort();
	b ^= 0x5a;
	if (pwrite(fd, &b, 1, (off_t)off) != 1)
		abort();
	close(fd);
}

static uint64_t
object_size(const struct fix *f)
{
	uint64_t size = 0;
	if (objstore_size(f->os, RUN_KEY, &size) != 0)
		abort();
	return size;
}

/** Read the footer and the first top-index entry of a run (format in run.c). */
static void
read_layout(const struct fix *f, uint64_t *top_off, uint64_t *part_off, uint64_t *part_len)
{
	uint64_t size = object_size(f);
	uint8_t foot[112];
	size_t got;
	if (objstore_get_range(f->os, RUN_KEY, size - 112, 112, foot, &got) || got != 112)
		abort();
	*top_off = dec_u64(foot);
	uint64_t top_len = dec_u64(foot + 8);
	uint8_t *top = malloc(top_len);
	if (objstore_get_range(f->os, RUN_KEY, *top_off, top_len, top, &got) || got != top_len)
		abort();
	if (top[0] != 0) /* the tests keep the top index small enough to stay raw */
		abort();
	struct rd rd;
	rd_init(&rd, top + 1, top_len - 5);
	uint64_t klen = rd_varint(&rd);
	rd_bytes(&rd, klen);
	*part_off = rd_varint(&rd);
	*part_len = rd_varint(&rd);
	if (rd.err)
		abort();
	free(top);
}

static int
get_rc(struct run_reader *r, const char *key)
{
	void *val = NULL;
	size_t vlen;
	int rc = run_reader_get(r, key, strlen(key), NULL, &val, &vlen);
	env.free(val);
	return rc;
}

static int
scan_rc(struct run_reader *r)
{
	struct run_iter *it;
	int rc = run_iter_new(r, NULL, 0, &it);
	if (rc)
		return rc;
	while ((rc = run_iter_next(it)) == 1)
		;
	run_iter_free(it);
	return rc;
}

static int
diag_names(const char *a, const char *b)
{
	const char *m = diag_last();
	int ok = strstr(m, a) != NULL && (b == NULL || strstr(m, b) != NULL);
	if (!ok)
		fprintf(stderr, "  diag: %s\n", m);
	return ok;
}

/** One partition (large index_partition_bytes) over a few blocks. */
static const struct run_writer_options corrupt_opts = {
	.block_bytes = 1024,
	.index_partition_bytes = 1 << 20,
};

TEST(flipped_byte_in_data_block_is_corruption)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, &corrupt_opts, 500, 1, NULL), 0);
	flip_byte(&f, 7); /* inside the first block, which starts at offset 0 */
	struct run_reader *r;
	REQUIRE_EQ(run_reader_open(f.os, RUN_KEY, &r), 0);
	CHECK_EQ(get_rc(r, "key00000000"), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "block at offset 0"));
	CHECK_EQ(get_rc(r, "key00000499"), 0); /* other blocks still read */
	CHECK_EQ(scan_rc(r), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "block at offset 0"));
	struct run_iter *it;
	CHECK_EQ(run_iter_new(r, "key00000001", 11, &it), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "checksum"));
	run_reader_close(r);
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "block at offset 0"));
	fix_close(&f);
}

TEST(flipped_byte_in_index_partition_is_corruption)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, &corrupt_opts, 500, 1, NULL), 0);
	uint64_t top_off, part_off, part_len;
	read_layout(&f, &top_off, &part_off, &part_len);
	REQUIRE(part_off + part_len == top_off); /* a single partition, just before the top */
	flip_byte(&f, part_off + part_len / 2);
	struct run_reader *r;
	REQUIRE_EQ(run_reader_open(f.os, RUN_KEY, &r), 0); /* open reads no partition */
	CHECK_EQ(get_rc(r, "key00000100"), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "partition 0"));
	CHECK_EQ(get_rc(r, "key00000101"), STRATA_ECORRUPT); /* nothing bad was cached */
	CHECK_EQ(scan_rc(r), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "partition 0"));
	run_reader_close(r);
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "partition 0"));
	fix_close(&f);
}

TEST(flipped_byte_in_top_index_or_footer_fails_open)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, &corrupt_opts, 500, 1, NULL), 0);
	uint64_t top_off, part_off, part_len;
	read_layout(&f, &top_off, &part_off, &part_len);
	struct run_reader *r = NULL;
	flip_byte(&f, top_off + 3);
	CHECK_EQ(run_reader_open(f.os, RUN_KEY, &r), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "top index"));
	flip_byte(&f, top_off + 3); /* restore */
	REQUIRE_EQ(run_verify(f.os, RUN_KEY, NULL), 0);

	uint64_t size = object_size(&f);
	flip_byte(&f, size - 112 - 6); /* the meta section sits just before the footer */
	CHECK_EQ(run_reader_open(f.os, RUN_KEY, &r), STRATA_ECORRUPT);
	CHECK(diag_names(RUN_KEY, "meta"));
	flip_byte(&f, size - 112 - 6);
	uint64_t offs[] = { size - 112 + 0, size - 112 + 60, size - 112 + 90, size - 112 + 101,
			    size - 3 };
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		flip_byte(&f, offs[i]);
		r = NULL;
		CHECK_EQ(run_reader_open(f.os, RUN_KEY, &r), STRATA_ECORRUPT);
		CHECK(r == NULL);
		CHECK(diag_names(RUN_KEY, "footer"));
		CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), STRATA_ECORRUPT);
		flip_byte(&f, offs[i]);
	}
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), 0);
	fix_close(&f);
}

TEST(truncated_object_fails_to_open)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, &small_opts, 2000, 1, NULL), 0);
	uint64_t size = object_size(&f);
	char path[1100];
	fix_path(&f, path, sizeof(path));
	uint64_t lens[] = { size - 1, size / 2, 100, 0 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		REQUIRE_EQ(truncate(path, (off_t)lens[i]), 0);
		struct run_reader *r = NULL;
		CHECK_EQ(run_reader_open(f.os, RUN_KEY, &r), STRATA_ECORRUPT);
		CHECK(r == NULL);
		CHECK(diag_names(RUN_KEY, "truncated"));
	}
	fix_close(&f);
}

TEST(future_format_version_is_refused)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_rows(&f, &small_opts, 100, 1, NULL), 0);
	uint64_t size = object_size(&f);
	char path[1100];
	fix_path(&f, path, sizeof(path));
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	uint8_t foot[112];
	REQUIRE_EQ(pread(fd, foot, sizeof(foot), (off_t)(size - 112)), 112);
	CHECK_EQ(dec_u32(foot + 96), 2);
	enc_u32(foot + 96, 3);
	enc_u32(foot + 100, crc32c(0, foot, 100));
	REQUIRE_EQ(pwrite(fd, foot, sizeof(foot), (off_t)(size - 112)), 112);
	close(fd);
	struct run_reader *r = NULL;
	CHECK_EQ(run_reader_open(f.os, RUN_KEY, &r), STRATA_EVERSION);
	CHECK(r == NULL);
	CHECK(diag_names(RUN_KEY, "version 3"));
	CHECK_EQ(run_verify(f.os, RUN_KEY, NULL), STRATA_EVERSION);
	fix_close(&f);
}

/* ---- memory ----------------------------------------------------------------- */

/** Live and peak bytes allocated through env while the counting allocator is installed. */
static size_t mem_live, mem_peak;

#define MEM_HDR 16

static void *
mem_malloc(size_t n)
{
	uint8_t *p = malloc(n + MEM_HDR);
	if (p == NULL)
		return NULL;
	memcpy(p, &n, sizeof(n));
	mem_live += n;
	if (mem_live > mem_peak)
		mem_peak = mem_live;
	return p + MEM_HDR;
}

static void
mem_free(void *q)
{
	if (q == NULL)
		return;
	uint8_t *p = (uint8_t *)q - MEM_HDR;
	size_t n;
	memcpy(&n, p, sizeof(n));
	mem_live -= n;
	free(p);
}

static void *
mem_calloc(size_t n, size_t size)
{
	void *p = mem_malloc(n * size);
	if (p != NULL)
		memset(p, 0, n * size);
	return p;
}

static void *
mem_realloc(void *q, size_t n)
{
	if (q == NULL)
		return mem_malloc(n);
	size_t old;
	memcpy(&old, (uint8_t *)q - MEM_HDR, sizeof(old));
	void *p = mem_malloc(n);
	if (p == NULL)
		return NULL;
	memcpy(p, q, old < n ? old : n);
	mem_free(q);
	return p;
}

/** Route env's allocations through the counting allocator, then open the fixture. */
static int
fix_open_counted(struct fix *f)
{
	env.malloc = mem_malloc;
	env.calloc = mem_calloc;
	env.realloc = mem_realloc;
	env.free = mem_free;
	mem_live = mem_peak = 0;
	if (fix_open(f) != 0) {
		env_reset();
		return -1;
	}
	return 0;
}

/** Close the fixture and put env's allocator back: the bytes still allocated (leaked). */
static size_t
fix_close_counted(struct fix *f)
{
	fix_close(f);
	size_t leaked = mem_live;
	env_reset();
	return leaked;
}

/** Peak bytes held by a writer of rows rows, and by a full scan of the result. */
static void
measure(struct objstore *os, const struct run_writer_options *o, uint32_t rows, size_t *wpeak,
	size_t *ipeak)
{
	char k[32], v[128];
	size_t base = mem_live;
	mem_peak = mem_live;
	struct run_writer *w;
	if (run_writer_open(os, RUN_KEY, o, &w) != 0)
		abort();
	for (uint32_t i = 0; i < rows; i++) {
		row_key(k, sizeof(k), i);
		size_t vl = row_val(v, sizeof(v), i);
		if (run_writer_add(w, k, strlen(k), i, v, vl) != 0)
			abort();
	}
	if (run_writer_finish(w, NULL) != 0)
		abort();
	*wpeak = mem_peak - base;

	struct run_reader *r;
	if (run_reader_open(os, RUN_KEY, &r) != 0)
		abort();
	struct run_iter *it;
	base = mem_live;
	mem_peak = mem_live;
	if (run_iter_new(r, NULL, 0, &it) != 0)
		abort();
	uint32_t n = 0;
	while (run_iter_next(it) == 1)
		n++;
	if (n != rows)
		abort();
	run_iter_free(it);
	*ipeak = mem_peak - base;
	run_reader_close(r);
	if (objstore_del(os, RUN_KEY) != 0)
		abort();
}

TEST(writer_and_iterator_memory_do_not_grow_with_rows)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open_counted(&f), 0);
	const struct run_writer_options o = { .block_bytes = 4096, .index_partition_bytes = 4096 };
	size_t w20k, w200k, i20k, i200k;
	measure(f.os, &o, 20000, &w20k, &i20k);
	measure(f.os, &o, 200000, &w200k, &i200k);
	size_t leaked = fix_close_counted(&f);
	if (getenv("RUN_TEST_VERBOSE"))
		fprintf(stderr, "  writer peak %zu / %zu, iterator peak %zu / %zu\n", w20k, w200k,
			i20k, i200k);
	CHECK_EQ(leaked, 0);
	/*
	 * Bound: buffers for a block, its frame, an index partition and its frame
	 * (4 x (block + partition)), plus fixed slack for the zstd contexts (measured
	 * ~100-130 KiB at level 1 for 4 KiB inputs) and the fs writer.
	 */
	size_t bound = 4 * (4096 + 4096) + 256 * 1024;
	CHECK(w20k <= bound);
	CHECK(w200k <= bound);
	CHECK(i20k <= bound);
	CHECK(i200k <= bound);
	/* 10x the rows: only the top index (one short entry per partition) may grow. */
	CHECK(w200k <= w20k + 8192);
	CHECK(i200k <= i20k + 1024);
}

TEST(big_row_buffers_are_released_after_its_block)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open_counted(&f), 0);
	size_t big = 16u << 20;
	uint8_t *v = malloc(big);
	memset(v, 0x5a, big);
	char k[32];
	size_t base = mem_live, wlive = 0, ilive = 0;
	struct run_writer *w;
	if (run_writer_open(f.os, RUN_KEY, NULL, &w) != 0)
		abort();
	if (run_writer_add(w, "a", 1, 1, v, big) != 0)
		abort();
	for (uint32_t i = 0; i < 100; i++) {
		row_key(k, sizeof(k), i);
		if (run_writer_add(w, k, strlen(k), 2 + i, "v", 1) != 0)
			abort();
	}
	wlive = mem_live - base; /* the big block is flushed; small rows are pending */
	if (run_writer_finish(w, NULL) != 0)
		abort();
	struct run_reader *r;
	if (run_reader_open(f.os, RUN_KEY, &r) != 0)
		abort();
	struct run_iter *it;
	if (run_iter_new(r, NULL, 0, &it) != 0)
		abort();
	int n = 0;
	base = mem_live;
	while (run_iter_next(it) == 1)
		if (++n == 2)
			ilive = mem_live - base; /* past the big block */
	run_iter_free(it);
	run_reader_close(r);
	size_t leaked = fix_close_counted(&f);
	free(v);
	if (getenv("RUN_TEST_VERBOSE"))
		fprintf(stderr, "  writer live %zu, iterator live %zu\n", wlive, ilive);
	CHECK_EQ(leaked, 0);
	CHECK_EQ(n, 101);
	CHECK(wlive < (4u << 20));
	CHECK(ilive < (4u << 20));
}

/* ---- compression that pays ------------------------------------------------- */

/** Calls of counting_compress since the test reset it (helper threads call it too). */
static _Atomic unsigned compress_calls;

/** run_writer_options.compress: zstd, counted. */
static size_t
counting_compress(void *dst, size_t cap, const void *src, size_t n, int level)
{
	compress_calls++;
	size_t c = ZSTD_compress(dst, cap, src, n, level);
	return ZSTD_isError(c) ? 0 : c;
}

/** Value shapes of shaped_rows. */
enum shape { SHAPE_RANDOM, SHAPE_MOSTLY_RANDOM, SHAPE_TEXT };

/** The 200-byte value of row i: random bytes (SHAPE_RANDOM), random but for its last 6
 *  bytes, which are zero (SHAPE_MOSTLY_RANDOM: a block compresses by a few percent), or
 *  one letter repeated (SHAPE_TEXT). */
static void
shaped_val(uint8_t *v, uint32_t i, enum shape sh)
{
	uint64_t x = 0x9E3779B97F4A7C15ull * (i + 1);
	for (size_t b = 0; b < 200; b++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v[b] = sh == SHAPE_TEXT ? (uint8_t)('a' + i % 26) : (uint8_t)(x >> 24);
	}
	if (sh == SHAPE_MOSTLY_RANDOM)
		memset(v + 194, 0, 6);
}

/** Write rows first..first+count-1 of shape sh (keys row_key, seq = 1000 + i) into w. */
static int
shaped_rows(struct run_writer *w, uint32_t first, uint32_t count, enum shape sh)
{
	char k[32];
	uint8_t v[200];
	for (uint32_t i = first; i < first + count; i++) {
		row_key(k, sizeof(k), i);
		shaped_val(v, i, sh);
		int rc = run_writer_add(w, k, strlen(k), 1000 + i, v, sizeof(v));
		if (rc)
			return rc;
	}
	return 0;
}

/** Write RUN_KEY of count rows of shape sh with o (whose codec and compress it keeps). */
static int
shaped_run(struct fix *f, const struct run_writer_options *o, uint32_t count, enum shape sh,
	   struct run_meta *m)
{
	objstore_del(f->os, RUN_KEY);
	struct run_writer *w;
	int rc = run_writer_open(f->os, RUN_KEY, o, &w);
	if (rc)
		return rc;
	if ((rc = shaped_rows(w, 0, count, sh)) != 0) {
		run_writer_abort(w);
		return rc;
	}
	return run_writer_finish(w, m);
}

/** Rows of RUN_KEY read back by a full scan that differ from what shaped_rows wrote
 *  (rows below split of shape a, the rest of shape b), plus rows missing or extra. */
static uint32_t
shaped_misreads(struct fix *f, uint32_t count, uint32_t split, enum shape a, enum shape b)
{
	struct run_reader *r;
	if (run_reader_open(f->os, RUN_KEY, &r) != 0)
		return count + 1;
	struct run_iter *it;
	if (run_iter_new(r, NULL, 0, &it) != 0) {
		run_reader_close(r);
		return count + 1;
	}
	uint32_t bad = 0, i = 0;
	char k[32];
	uint8_t v[200];
	while (run_iter_next(it) == 1) {
		const void *key, *val;
		size_t klen, vlen;
		uint64_t seq;
		run_iter_row(it, &key, &klen, &seq, &val, &vlen);
		row_key(k, sizeof(k), i);
		shaped_val(v, i, i < split ? a : b);
		bad += klen != strlen(k) || memcmp(key, k, klen) != 0 || seq != 1000 + i ||
		       vlen != sizeof(v) || memcmp(val, v, vlen) != 0;
		i++;
	}
	run_iter_free(it);
	run_reader_close(r);
	return bad + (i > count ? i - count : count - i);
}

TEST(a_block_that_saves_less_than_the_threshold_is_stored_raw)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_codec_stats cs = { 0 };
	const uint32_t n = 2000;
	/* Any saving kept: how much these blocks compress at all. */
	struct run_writer_options o = { .block_bytes = 4096, .max_compressed_per_kib = 1024,
					.codec = &cs, .sample_every = 1 };
	struct run_meta any, dflt;
	REQUIRE_EQ(shaped_run(&f, &o, n, SHAPE_MOSTLY_RANDOM, &any), 0);
	CHECK_EQ(atomic_load(&cs.compressed), any.blocks);
	CHECK_EQ(atomic_load(&cs.raw), 0);
	uint64_t raw = any.blocks * 4096;
	uint64_t saved = atomic_load(&cs.saved_bytes);
	CHECK(saved > raw / 100);      /* they do compress, */
	CHECK(saved < raw / 8 - 1024); /* by less than 1/8 */
	CHECK_EQ(shaped_misreads(&f, n, n, SHAPE_MOSTLY_RANDOM, SHAPE_MOSTLY_RANDOM), 0);

	/* The default (1/8) stores every one of them raw, and the run grows by what was saved. */
	cs = (struct run_codec_stats){ 0 };
	o.max_compressed_per_kib = 0;
	REQUIRE_EQ(shaped_run(&f, &o, n, SHAPE_MOSTLY_RANDOM, &dflt), 0);
	CHECK_EQ(dflt.blocks, any.blocks);
	CHECK_EQ(atomic_load(&cs.compressed), 0);
	CHECK_EQ(atomic_load(&cs.raw), dflt.blocks);
	CHECK_EQ(atomic_load(&cs.saved_bytes), 0);
	if (getenv("RUN_TEST_VERBOSE"))
		fprintf(stderr, "  blocks %llu, any %llu bytes, default %llu bytes, saved %llu\n",
			(unsigned long long)any.blocks, (unsigned long long)any.bytes,
			(unsigned long long)dflt.bytes, (unsigned long long)saved);
	/* (The index partitions, which list every block's stored length, compress a little
	 * differently: not exactly.) */
	CHECK(dflt.bytes > any.bytes + saved * 9 / 10);
	CHECK_EQ(shaped_misreads(&f, n, n, SHAPE_MOSTLY_RANDOM, SHAPE_MOSTLY_RANDOM), 0);

	/* Text saves far more than 1/8: compressed under the default. */
	cs = (struct run_codec_stats){ 0 };
	REQUIRE_EQ(shaped_run(&f, &o, n, SHAPE_TEXT, &dflt), 0);
	CHECK_EQ(atomic_load(&cs.compressed), dflt.blocks);
	CHECK(dflt.bytes < dflt.raw_bytes / 4);

	/* 0 at the store (RUN_COMPRESS_OFF here) never compresses, not even text. */
	cs = (struct run_codec_stats){ 0 };
	o.max_compressed_per_kib = RUN_COMPRESS_OFF;
	o.compress = counting_compress;
	compress_calls = 0;
	REQUIRE_EQ(shaped_run(&f, &o, n, SHAPE_TEXT, &dflt), 0);
	CHECK_EQ(compress_calls, 0);
	CHECK_EQ(atomic_load(&cs.compressed), 0);
	CHECK(dflt.bytes > dflt.raw_bytes);
	CHECK_EQ(shaped_misreads(&f, n, n, SHAPE_TEXT, SHAPE_TEXT), 0);
	fix_close(&f);
}

/** Compressor calls a writer of blocks data blocks that never pay makes: the first
 *  RUN_SAMPLE_AFTER + RUN_SAMPLE_LAG - 1 (block i is judged by the blocks up to
 *  i - RUN_SAMPLE_LAG), then one in every. */
static uint64_t
sampled_calls(uint64_t blocks, uint32_t every)
{
	const uint64_t first = RUN_SAMPLE_AFTER + RUN_SAMPLE_LAG - 1;
	if (blocks <= first)
		return blocks;
	return first + (blocks - first) / every;
}

TEST(an_incompressible_stream_stops_calling_the_compressor_after_the_window)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_codec_stats cs = { 0 };
	struct run_writer_options o = { .block_bytes = 4096, .compress = counting_compress,
					.codec = &cs };
	struct run_meta m;
	const uint32_t n = 4000;
	compress_calls = 0;
	REQUIRE_EQ(shaped_run(&f, &o, n, SHAPE_RANDOM, &m), 0);
	REQUIRE(m.blocks > 100);
	/* Every index partition and the top index are tried as well. */
	struct run_reader *r;
	REQUIRE_EQ(run_reader_open(f.os, RUN_KEY, &r), 0);
	uint64_t index_calls = run_reader_partitions(r) + 1;
	run_reader_close(r);
	uint64_t data_calls = compress_calls - index_calls;
	CHECK_EQ(data_calls, sampled_calls(m.blocks, RUN_DEFAULT_SAMPLE_EVERY));
	CHECK(data_calls < m.blocks / 8);
	CHECK_EQ(atomic_load(&cs.raw), m.blocks);
	CHECK_EQ(atomic_load(&cs.compressed), 0);
	CHECK_EQ(atomic_load(&cs.untried), m.blocks - data_calls);
	CHECK_EQ(shaped_misreads(&f, n, n, SHAPE_RANDOM, SHAPE_RANDOM), 0);

	/* sample_every 1 tries every block; 5 tries one in five. */
	uint32_t every[] = { 1, 5 };
	for (size_t e = 0; e < 2; e++) {
		cs = (struct run_codec_stats){ 0 };
		o.sample_every = every[e];
		compress_calls = 0;
		REQUIRE_EQ(shaped_run(&f, &o, n, SHAPE_RANDOM, &m), 0);
		CHECK_EQ(compress_calls - index_calls, sampled_calls(m.blocks, every[e]));
		CHECK_EQ(atomic_load(&cs.untried), m.blocks - sampled_calls(m.blocks, every[e]));
	}
	fix_close(&f);
}

TEST(a_stream_that_turns_compressible_is_compressed_again_and_mixed_files_read_back)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_codec_stats cs = { 0 };
	struct run_writer_options o = { .block_bytes = 4096, .compress = counting_compress,
					.codec = &cs };
	const uint32_t half = 2000;
	struct run_writer *w;
	REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), 0);
	REQUIRE_EQ(shaped_rows(w, 0, half, SHAPE_RANDOM), 0);
	uint64_t random_blocks = run_writer_blocks(w);
	REQUIRE_EQ(shaped_rows(w, half, half, SHAPE_TEXT), 0);
	struct run_meta m;
	REQUIRE_EQ(run_writer_finish(w, &m), 0);
	uint64_t text_blocks = m.blocks - random_blocks;
	REQUIRE(random_blocks > 50);
	REQUIRE(text_blocks > 20);
	/* The random blocks stop being tried after RUN_SAMPLE_AFTER (judged RUN_SAMPLE_LAG
	 * blocks behind); the text blocks go on being sampled until the first one tried pays
	 * and RUN_SAMPLE_LAG blocks more, and from then on every block is. */
	uint64_t random_untried = random_blocks - sampled_calls(random_blocks, RUN_DEFAULT_SAMPLE_EVERY);
	uint64_t text_untried = atomic_load(&cs.untried) - random_untried;
	CHECK(atomic_load(&cs.untried) >= random_untried);
	CHECK(text_untried < RUN_DEFAULT_SAMPLE_EVERY + RUN_SAMPLE_LAG);
	CHECK_EQ(atomic_load(&cs.raw), random_blocks + text_untried);
	CHECK(atomic_load(&cs.compressed) >= text_blocks - RUN_DEFAULT_SAMPLE_EVERY - RUN_SAMPLE_LAG);
	CHECK(atomic_load(&cs.compressed) <= text_blocks);
	CHECK(m.bytes < m.raw_bytes * 3 / 4);
	CHECK_EQ(shaped_misreads(&f, 2 * half, half, SHAPE_RANDOM, SHAPE_TEXT), 0);
	struct run_meta vm;
	CHECK_EQ(run_verify(f.os, RUN_KEY, &vm), 0);
	CHECK_EQ(vm.blocks, m.blocks);
	/* Point lookups of both kinds of block. */
	REQUIRE_EQ(run_reader_open(f.os, RUN_KEY, &f.r), 0);
	uint32_t probes[] = { 0, 17, half - 1, half, half + 333, 2 * half - 1 };
	for (size_t p = 0; p < sizeof(probes) / sizeof(probes[0]); p++) {
		char k[32];
		uint8_t v[200];
		row_key(k, sizeof(k), probes[p]);
		shaped_val(v, probes[p], probes[p] < half ? SHAPE_RANDOM : SHAPE_TEXT);
		uint64_t seq = 0;
		void *val = NULL;
		size_t vlen = 0;
		CHECK_EQ(run_reader_get(f.r, k, strlen(k), &seq, &val, &vlen), 0);
		CHECK(vlen == sizeof(v) && val != NULL && memcmp(val, v, vlen) == 0);
		CHECK_EQ(seq, 1000 + probes[p]);
		env.free(val);
	}
	fix_close(&f);
}

/* ---- helper threads ---------------------------------------------------------- */

/** The bytes of RUN_KEY, malloc'd (NULL on failure). */
static uint8_t *
run_bytes(struct fix *f, size_t *len)
{
	char path[4096];
	fix_path(f, path, sizeof(path));
	FILE *fp = fopen(path, "rb");
	if (fp == NULL)
		return NULL;
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	if (b != NULL && fread(b, 1, (size_t)n, fp) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(fp);
	*len = (size_t)n;
	return b;
}

/** Write 2 x half rows, random then text then random again, with o; the file's bytes. */
static uint8_t *
mixed_run(struct fix *f, const struct run_writer_options *o, uint32_t half, size_t *len,
	  struct run_meta *m)
{
	objstore_del(f->os, RUN_KEY);
	struct run_writer *w;
	if (run_writer_open(f->os, RUN_KEY, o, &w) != 0)
		return NULL;
	if (shaped_rows(w, 0, half, SHAPE_RANDOM) != 0 ||
	    shaped_rows(w, half, half / 2, SHAPE_TEXT) != 0 ||
	    shaped_rows(w, half + half / 2, half / 2, SHAPE_MOSTLY_RANDOM) != 0) {
		run_writer_abort(w);
		return NULL;
	}
	if (run_writer_finish(w, m) != 0)
		return NULL;
	return run_bytes(f, len);
}

TEST(a_writer_with_helper_threads_writes_the_same_bytes_as_one_without)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	const uint32_t half = 3000;
	struct run_codec_stats cs0 = { 0 };
	struct run_writer_options o = { .block_bytes = 4096, .compress = counting_compress,
					.codec = &cs0, .index_partition_bytes = 4096 };
	struct run_meta m0;
	size_t len0 = 0;
	compress_calls = 0;
	uint8_t *b0 = mixed_run(&f, &o, half, &len0, &m0);
	REQUIRE(b0 != NULL);
	unsigned calls0 = compress_calls;
	REQUIRE(m0.blocks > 200);
	/* Sampling happened (the random part stopped being tried) and text was compressed. */
	REQUIRE(atomic_load(&cs0.untried) > 50);
	REQUIRE(atomic_load(&cs0.compressed) > 20);
	uint32_t threads[] = { 2, 3, 8, RUN_MAX_THREADS };
	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		struct run_codec_stats cs = { 0 };
		o.codec = &cs;
		o.threads = threads[t];
		compress_calls = 0;
		struct run_meta m;
		size_t len = 0;
		uint8_t *b = mixed_run(&f, &o, half, &len, &m);
		REQUIRE(b != NULL);
		CHECK_EQ(len, len0);
		CHECK(len == len0 && memcmp(b, b0, len) == 0);
		CHECK_EQ(m.blocks, m0.blocks);
		CHECK_EQ(m.bytes, m0.bytes);
		CHECK_EQ(compress_calls, calls0);
		CHECK_EQ(atomic_load(&cs.compressed), atomic_load(&cs0.compressed));
		CHECK_EQ(atomic_load(&cs.raw), atomic_load(&cs0.raw));
		CHECK_EQ(atomic_load(&cs.untried), atomic_load(&cs0.untried));
		CHECK_EQ(atomic_load(&cs.saved_bytes), atomic_load(&cs0.saved_bytes));
		free(b);
	}
	struct run_meta vm;
	CHECK_EQ(run_verify(f.os, RUN_KEY, &vm), 0);
	CHECK_EQ(vm.blocks, m0.blocks);
	/* More threads than a writer may take are refused by name. */
	o.threads = RUN_MAX_THREADS + 1;
	struct run_writer *w = NULL;
	CHECK_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "threads") != NULL);
	free(b0);
	fix_close(&f);
}

TEST(a_writer_with_blocks_in_flight_aborts_and_leaves_nothing)
{
	struct fix f = { 0 };
	REQUIRE_EQ(fix_open(&f), 0);
	struct run_writer_options o = { .block_bytes = 4096, .threads = 4 };
	for (uint32_t rows = 0; rows <= 400; rows += 100) {
		objstore_del(f.os, RUN_KEY);
		struct run_writer *w;
		REQUIRE_EQ(run_writer_open(f.os, RUN_KEY, &o, &w), 0);
		REQUIRE_EQ(shaped_rows(w, 0, rows, SHAPE_TEXT), 0);
		run_writer_abort(w);
		CHECK(fix_has_no_file(&f));
	}
	fix_close(&f);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(round_trip_many_rows_over_blocks_and_partitions);
	RUN(get_outside_key_range_skips_io);
	RUN(a_lookup_outside_a_resident_run_builds_its_probe);
	RUN(power_of_two_filters_find_every_key_and_few_false_positives);
	RUN(get_caches_partitions_and_iter_does_not);
	RUN(iter_full_scan_returns_every_row_in_order);
	RUN(iter_seek_lands_on_first_row_at_or_after_key);
	RUN(value_of_16mib_round_trips);
	RUN(keys_out_of_order_are_refused);
	RUN(bad_options_are_refused);
	RUN(bloom_disabled_still_finds_every_key);
	RUN(range_filters_and_legacy_filters_find_every_key_and_few_false_positives);
	RUN(empty_run_round_trips);
	RUN(abort_leaves_nothing);
	RUN(write_failure_fails_finish_and_leaves_nothing);
	RUN(writer_blocks_counts_flushed_blocks);
	RUN(run_writer_starts_writeback_every_mib);
	RUN(concurrent_gets_and_iterators_share_a_reader);
	RUN(flipped_byte_in_data_block_is_corruption);
	RUN(flipped_byte_in_index_partition_is_corruption);
	RUN(flipped_byte_in_top_index_or_footer_fails_open);
	RUN(truncated_object_fails_to_open);
	RUN(future_format_version_is_refused);
	RUN(writer_and_iterator_memory_do_not_grow_with_rows);
	RUN(big_row_buffers_are_released_after_its_block);
	RUN(a_block_that_saves_less_than_the_threshold_is_stored_raw);
	RUN(an_incompressible_stream_stops_calling_the_compressor_after_the_window);
	RUN(a_stream_that_turns_compressible_is_compressed_again_and_mixed_files_read_back);
	RUN(a_writer_with_helper_threads_writes_the_same_bytes_as_one_without);
	RUN(a_writer_with_blocks_in_flight_aborts_and_leaves_nothing);
	return HARNESS_END("test_run");
}
