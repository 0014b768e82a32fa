/* test_run.c — run files: round trips, seeks, bloom filters, corruption, memory bounds. */
#include <inttypes.h>

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

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
	char k[32];
	int found = 0, absent = 0;
	for (uint32_t i = 0; i < (ROWS - 1) * STEP; i++) {
		row_key(k, sizeof(k), i);
		uint64_t seq = 0;
		void *val = NULL;
		size_t vlen = 0;
		int rc = run_reader_get(r, k, strlen(k), &seq, &val, &vlen);
		if (i % STEP == 0) {
			found += rc == 0 && seq == 1000 + i;
			env.free(val);
		} else {
			absent += rc == STRATA_NOTFOUND;
		}
	}
	CHECK_EQ(found, ROWS - 1);
	CHECK_EQ(absent, (ROWS - 1) * (STEP - 1));
	/* Every absent key inside the range is a bloom probe; those it passed read the
	 * block. 64 bits, 4 keys, k = 7: 0.07% expected (5 of 7497), 0.5-1.3% from double
	 * hashing. */
	uint64_t probes = (ROWS - 1) * (STEP - 1), skips = run_reader_bloom_skips(r);
	fprintf(stderr, "  # %" PRIu64 " false positives in %" PRIu64 " absent keys\n",
		probes - skips, probes);
	CHECK(probes - skips <= probes * 4 / 1000);
	fix_close(&f);
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
	return HARNESS_END("test_run");
}
