/*
 * test_wtrace.c — the workload trace (node/lib/wtrace.h) through strata_trace_start on a
 * live store: what the clients did comes back record by record with its key hashes and
 * sizes, and the engine's seals and merges with it; a torn tail is read up to its offset,
 * a corrupt block and a future version are refused naming them; the byte budget stops a
 * trace (appends going on, unchanged) or, rotating, moves the file to FILE.1; a stop
 * writes the end block with the counts.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "../../node/lib/crc.h"
#include "../../node/lib/buf.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/trace.h"
#include "../../node/lib/wtrace.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "harness.h"

#define ENGINE_UTIL_TAG "wtrace"
/* Not every helper of the shared file is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine_util.h"
#pragma GCC diagnostic pop

static void
t_end(void)
{
	alarm(0);
	t_cleanup();
}

/** What a read of a trace found. */
struct tally {
	uint64_t recs[8], rows, row_bytes, deleted, gets, found, scans, scan_rows, seal_requests, merge_requests;
	uint64_t events[TRACE_COUNT];
	uint64_t last_t;
	int out_of_order;
	/** The hash of the first appended row, its key and value sizes. */
	uint64_t first_hash;
	uint32_t first_klen, first_vlen;
};

static int
tally_rec(void *ctx, const struct wtrace_rec *r)
{
	struct tally *t = ctx;
	if (r->kind < 8)
		t->recs[r->kind]++;
	if (r->t_ns < t->last_t)
		t->out_of_order = 1;
	t->last_t = r->t_ns;
	switch (r->kind) {
	case WTRACE_APPEND:
		if (t->rows == 0) {
			t->first_hash = r->rows[0].hash;
			t->first_klen = r->rows[0].key_len;
			t->first_vlen = r->rows[0].value_len;
		}
		t->rows += r->nrows;
		for (size_t i = 0; i < r->nrows; i++)
			t->row_bytes += r->rows[i].key_len + r->rows[i].value_len;
		break;
	case WTRACE_DELETE:
		t->deleted += r->nrows;
		break;
	case WTRACE_GET:
		t->gets++;
		t->found += r->found;
		break;
	case WTRACE_SCAN:
		t->scans++;
		t->scan_rows += r->scan_rows;
		break;
	case WTRACE_ENGINE:
		if (r->event < TRACE_COUNT)
			t->events[r->event]++;
		break;
	case WTRACE_SEAL:
		t->seal_requests++;
		break;
	case WTRACE_MERGE:
		t->merge_requests++;
		break;
	}
	return 0;
}

static int
scan_count(void *ctx, const strata_row *row)
{
	(*(int *)ctx)++;
	return 0;
}

static char *
trace_path(const char *dir, const char *name)
{
	static char p[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static struct wtrace_options
topts(const char *path, uint64_t max_bytes, int rotate)
{
	return (struct wtrace_options){.path = path, .max_bytes = max_bytes, .rotate = rotate};
}

TEST(records_requests_and_engine_events)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	const char *path = trace_path(dir, "t.swt");
	struct wtrace_options to = topts(path, 1 << 20, 0);
	REQUIRE(strata_trace_start(db, &to) == 0);
	REQUIRE(put_range(db, "k", 0, 300, "v", 50) == 0); /* 6 appends of 50 rows */
	REQUIRE(strata_seal(db, 0) == 0);
	REQUIRE(put_range(db, "k", 300, 400, "v", 50) == 0); /* 2 more */
	REQUIRE(strata_seal(db, 0) == 0);
	uint32_t merged = 0;
	REQUIRE(strata_merge(db, 0, 8, &merged) == 0);
	CHECK_EQ(merged, 2);
	void *v;
	size_t vl;
	CHECK_EQ(strata_get(db, 0, "k00001", 6, &v, &vl), 0);
	free(v);
	CHECK_EQ(strata_get(db, 0, "nope", 4, &v, &vl), STRATA_NOTFOUND);
	const void *keys[] = {"k00002"};
	size_t kls[] = {6};
	CHECK_EQ(strata_delete(db, 0, keys, kls, 1), 0);
	int n = 0;
	CHECK_EQ(strata_scan(db, 0, "k0001", 5, "k0002", 5, scan_count, &n), 0);
	CHECK_EQ(n, 10);
	strata_trace_stop(db);
	/* Recording is over: this append is in no trace. */
	REQUIRE(put_range(db, "late", 0, 10, "v", 10) == 0);
	struct wtrace_status st;
	char p[512];
	REQUIRE(strata_trace_status(db, &st, p, sizeof(p)) == 0);
	CHECK(!st.active);
	CHECK(strcmp(st.why, "stopped") == 0);
	CHECK_EQ(st.dropped, 0);

	struct tally t;
	memset(&t, 0, sizeof(t));
	struct wtrace_info info;
	REQUIRE(wtrace_read(path, tally_rec, &t, &info) == 0);
	CHECK_EQ(info.version, WTRACE_VERSION);
	CHECK_EQ(info.shards, 1);
	CHECK(info.ended);
	CHECK_EQ(info.torn_at, 0);
	CHECK_EQ(info.end_records, info.records);
	CHECK_EQ(info.records, st.records);
	CHECK(info.end_ns >= t.last_t);
	CHECK_EQ(t.recs[WTRACE_APPEND], 8);
	CHECK_EQ(t.rows, 400);
	CHECK_EQ(t.first_hash, XXH3_64bits("k00000", 6));
	CHECK_EQ(t.first_klen, 6);
	char val[256];
	CHECK_EQ(t.first_vlen, make_value(val, sizeof(val), "k00000", "v", 40));
	CHECK_EQ(t.deleted, 1);
	CHECK_EQ(t.gets, 2);
	CHECK_EQ(t.found, 1);
	CHECK_EQ(t.scans, 1);
	CHECK_EQ(t.scan_rows, 10);
	/* Two seals (the merge sealed nothing new), one plan, one commit. */
	CHECK_EQ(t.events[TRACE_SEAL], 2);
	CHECK_EQ(t.events[TRACE_PLAN], 1);
	CHECK_EQ(t.events[TRACE_COMMIT], 1);
	CHECK_EQ(t.events[TRACE_APPEND], 0);
	/* strata_seal is a client's request; strata_merge is the engine's pass, not one. */
	CHECK_EQ(t.seal_requests, 2);
	CHECK_EQ(t.merge_requests, 0);
	CHECK(!t.out_of_order);
	db_close(db);
}

/** A trace of a few appends at path, closed; its size. */
static off_t
small_trace(const char *dir, const char *path)
{
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	if (db == NULL)
		return -1;
	struct wtrace_options to = topts(path, 1 << 20, 0);
	if (strata_trace_start(db, &to) != 0)
		return -1;
	for (int b = 0; b < 3; b++) {
		if (put_range(db, "k", b * 10, b * 10 + 10, "v", 10) != 0)
			return -1;
		/* one block each: the writer flushes a partial block after a quiet second */
		usleep((WTRACE_FLUSH_MS + 300) * 1000);
	}
	strata_trace_stop(db);
	db_close(db);
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

TEST(a_torn_tail_is_read_up_to_its_offset)
{
	const char *dir = tdir();
	const char *path = trace_path(dir, "t.swt");
	off_t size = small_trace(dir, path);
	REQUIRE(size > 100);
	struct tally t;
	memset(&t, 0, sizeof(t));
	struct wtrace_info info;
	REQUIRE(wtrace_read(path, tally_rec, &t, &info) == 0);
	CHECK_EQ(info.blocks, 3);
	uint64_t all = t.rows;
	CHECK_EQ(all, 30);
	/* Cut into the last block: the end block goes, and the last block is torn. */
	REQUIRE(truncate(path, size - 40 - 5) == 0);
	memset(&t, 0, sizeof(t));
	CHECK_EQ(wtrace_read(path, tally_rec, &t, &info), 0);
	CHECK(!info.ended);
	CHECK(info.torn_at > WTRACE_HEADER_BYTES);
	CHECK_EQ(info.blocks, 2);
	CHECK_EQ(t.rows, 20);
}

TEST(a_corrupt_block_and_a_future_version_are_refused)
{
	const char *dir = tdir();
	const char *path = trace_path(dir, "t.swt");
	REQUIRE(small_trace(dir, path) > 100);
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	/* A byte of the first block's payload. */
	uint8_t c;
	REQUIRE(pread(fd, &c, 1, WTRACE_HEADER_BYTES + WTRACE_BLOCK_HEADER_BYTES + 3) == 1);
	c ^= 0x40;
	REQUIRE(pwrite(fd, &c, 1, WTRACE_HEADER_BYTES + WTRACE_BLOCK_HEADER_BYTES + 3) == 1);
	struct tally t;
	memset(&t, 0, sizeof(t));
	struct wtrace_info info;
	CHECK_EQ(wtrace_read(path, tally_rec, &t, &info), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "offset 32 is corrupt") != NULL);
	c ^= 0x40;
	REQUIRE(pwrite(fd, &c, 1, WTRACE_HEADER_BYTES + WTRACE_BLOCK_HEADER_BYTES + 3) == 1);
	CHECK_EQ(wtrace_read(path, tally_rec, &t, &info), 0);
	/* Version 2, with a header CRC that matches. */
	uint8_t h[WTRACE_HEADER_BYTES];
	REQUIRE(pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
	enc_u32(h + 8, 2);
	enc_u32(h + 28, crc32c(0, h, 28));
	REQUIRE(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
	close(fd);
	CHECK_EQ(wtrace_read(path, tally_rec, &t, &info), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "format version 2; this strata reads version 1") != NULL);
	/* Not a trace at all. */
	const char *other = trace_path(dir, "not.swt");
	FILE *f = fopen(other, "w");
	REQUIRE(f != NULL);
	fputs("{\"key\": 1}\n", f);
	fclose(f);
	CHECK_EQ(wtrace_read(other, tally_rec, &t, &info), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "is not a strata workload trace") != NULL);
}

/** Append batches of 100 rows until the trace is no longer active (or n batches). */
static int
append_until_stopped(strata *db, int max_batches, int *batches)
{
	struct wtrace_status st;
	char p[512];
	for (*batches = 0; *batches < max_batches; (*batches)++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "b%05d-", *batches);
		int rc = put_range(db, prefix, 0, 100, "v", 50);
		if (rc != 0)
			return rc;
		if (strata_trace_status(db, &st, p, sizeof(p)) == 0 && !st.active)
			return 0;
	}
	return 0;
}

TEST(the_byte_budget_stops_it_and_appends_go_on)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	const char *path = trace_path(dir, "t.swt");
	struct wtrace_options to = topts(path, WTRACE_MIN_BYTES, 0);
	REQUIRE(strata_trace_start(db, &to) == 0);
	int batches = 0;
	REQUIRE(append_until_stopped(db, 2000, &batches) == 0);
	struct wtrace_status st;
	char p[512];
	/* The writer may still be on the last blocks: wait for it to say why it stopped. */
	for (int i = 0; i < 200; i++) {
		REQUIRE(strata_trace_status(db, &st, p, sizeof(p)) == 0);
		if (!st.active && st.why[0])
			break;
		usleep(10000);
	}
	CHECK(!st.active);
	CHECK(strcmp(st.why, "byte budget") == 0);
	struct stat fst;
	REQUIRE(stat(path, &fst) == 0);
	CHECK(fst.st_size <= (off_t)WTRACE_MIN_BYTES);
	CHECK(fst.st_size > (off_t)WTRACE_MIN_BYTES / 2);
	/* Appends go on, and every row written while it recorded reads back. */
	REQUIRE(put_range(db, "after-", 0, 100, "v", 50) == 0);
	CHECK_EQ(range_misses(db, "after-", 0, 100, "v"), 0);
	CHECK_EQ(range_misses(db, "b00000-", 0, 100, "v"), 0);
	CHECK_EQ(stats_of(db).rows_appended, (uint64_t)(batches + 1) * 100 + 100);
	strata_trace_stop(db);
	struct tally t;
	memset(&t, 0, sizeof(t));
	struct wtrace_info info;
	REQUIRE(wtrace_read(path, tally_rec, &t, &info) == 0);
	CHECK(info.ended);
	CHECK_EQ(info.torn_at, 0);
	CHECK(t.rows > 0);
	CHECK_EQ(info.end_records, info.records);
	db_close(db);
}

TEST(rotating_moves_the_file_aside_and_goes_on)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	const char *path = trace_path(dir, "t.swt");
	struct wtrace_options to = topts(path, WTRACE_MIN_BYTES, 1);
	REQUIRE(strata_trace_start(db, &to) == 0);
	struct wtrace_status st;
	char p[512];
	int b = 0;
	for (; b < 4000; b++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "r%05d-", b);
		REQUIRE(put_range(db, prefix, 0, 100, "v", 50) == 0);
		REQUIRE(strata_trace_status(db, &st, p, sizeof(p)) == 0);
		if (st.rotations >= 2)
			break;
	}
	CHECK(st.active);
	CHECK(st.rotations >= 2);
	strata_trace_stop(db);
	const char *old = trace_path(dir, "t.swt.1");
	struct tally t1, t2;
	memset(&t1, 0, sizeof(t1));
	memset(&t2, 0, sizeof(t2));
	struct wtrace_info i1, i2;
	CHECK_EQ(wtrace_read(old, tally_rec, &t1, &i1), 0);
	CHECK_EQ(wtrace_read(path, tally_rec, &t2, &i2), 0);
	CHECK(i1.ended && i2.ended);
	CHECK(t1.rows > 0);
	CHECK(i1.bytes <= WTRACE_MIN_BYTES);
	db_close(db);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	T(records_requests_and_engine_events);
	T(a_torn_tail_is_read_up_to_its_offset);
	T(a_corrupt_block_and_a_future_version_are_refused);
	T(the_byte_budget_stops_it_and_appends_go_on);
	T(rotating_moves_the_file_aside_and_goes_on);
	return HARNESS_END("test_wtrace");
}
