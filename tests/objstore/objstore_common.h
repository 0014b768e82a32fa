/*
 * objstore_common.h — what the suites of the remote object stores share (test_azure.c
 * against Azurite, test_s3.c against s3rver and a canned server): small objects written
 * and read back, a listing joined into one string, the engine's rows, a loopback
 * listener, and the checks both stores must pass alike (whole and ranged reads, a
 * listing by prefix, streamed writes, the engine's append, seal, merge and compact).
 * Static functions only, so that each suite stays one C file (the Makefile builds
 * $(BUILD)/tests/objstore_azure from test_azure.c alone). A helper whose REQUIREs end
 * it takes `int *finished` last and sets it at its end: its test REQUIREs that.
 */
#ifndef STRATA_TEST_OBJSTORE_COMMON_H
#define STRATA_TEST_OBJSTORE_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../unit/harness.h"
#include "../../node/lib/diag.h"
#include "../../node/objstore/http.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"

static int
put_str(struct objstore *os, const char *key, const char *v)
{
	return objstore_put(os, key, v, strlen(v));
}

static int
get_eq(struct objstore *os, const char *key, const char *want)
{
	struct buf b = {0};
	int rc = objstore_get(os, key, &b);
	int ok = rc == 0 && b.len == strlen(want) && (b.len == 0 || memcmp(b.data, want, b.len) == 0);
	if (!ok)
		fprintf(stderr, "  get %s: rc %d (%s), %zu bytes\n", key, rc, diag_last(), b.len);
	buf_destroy(&b);
	return ok;
}

/** A socket listening on 127.0.0.1 at a free port (*port); -1 on a failure. Nothing
 *  accepts on it until its owner does: a client's request gets no answer. */
static int
loopback_listener(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 16) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* ---------------------------------------------------------------- reads */

/** Whole and ranged reads of a small object, a replaced and an empty one, and a missing
 *  key: what both stores answer alike. */
static void
check_put_get_size_and_ranges(struct objstore *os)
{
	CHECK_EQ(put_str(os, "a/b/c", "hello, world"), 0);
	CHECK(get_eq(os, "a/b/c", "hello, world"));
	uint64_t sz = 0;
	CHECK_EQ(objstore_size(os, "a/b/c", &sz), 0);
	CHECK_EQ(sz, 12);
	char dst[16];
	size_t got = 99;
	CHECK_EQ(objstore_get_range(os, "a/b/c", 7, 5, dst, &got), 0); /* 206 */
	CHECK(got == 5 && memcmp(dst, "world", 5) == 0);
	CHECK_EQ(objstore_get_range(os, "a/b/c", 10, 10, dst, &got), 0); /* short at the end */
	CHECK(got == 2 && memcmp(dst, "ld", 2) == 0);
	CHECK_EQ(objstore_get_range(os, "a/b/c", 12, 4, dst, &got), 0); /* past the end (S3: 416) */
	CHECK_EQ(got, 0);
	CHECK_EQ(put_str(os, "a/b/c", "replaced"), 0);
	CHECK(get_eq(os, "a/b/c", "replaced"));
	CHECK_EQ(objstore_put(os, "empty", "", 0), 0);
	CHECK(get_eq(os, "empty", ""));
	struct buf b = {0};
	CHECK_EQ(objstore_get(os, "missing", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_size(os, "missing", &sz), STRATA_NOTFOUND);
	CHECK_EQ(objstore_get_range(os, "missing", 0, 4, dst, &got), STRATA_NOTFOUND);
	buf_destroy(&b);
}

/* ---------------------------------------------------------------- listings */

/** Keys and sizes seen by list, joined as "key=size;". */
struct seen {
	/** The joined listing. */
	char text[4096];
	/** Callbacks made. */
	int n;
};

static int
seen_cb(void *ctx, const char *key, uint64_t size)
{
	struct seen *s = ctx;
	size_t l = strlen(s->text);
	snprintf(s->text + l, sizeof(s->text) - l, "%s=%llu;", key, (unsigned long long)size);
	s->n++;
	return 0;
}

static int
stop_cb(void *ctx, const char *key, uint64_t size)
{
	return ++*(int *)ctx == 3 ? 42 : 0;
}

/** The listing of prefix is exactly want ("key=size;" joined). */
static void
check_listed(struct objstore *os, const char *prefix, const char *want)
{
	struct seen s = {{0}, 0};
	int lrc = objstore_list(os, prefix, seen_cb, &s);
	if (lrc != 0)
		fprintf(stderr, "  list: %s\n", diag_last());
	CHECK_EQ(lrc, 0);
	CHECK(strcmp(s.text, want) == 0);
	if (strcmp(s.text, want) != 0)
		fprintf(stderr, "  listed: %s\n", s.text);
}

/** The end of the listing tests, on a store with 7 keys at 2 a page: a prefix of nothing
 *  lists nothing, the callback's result stops a listing, and the pages were requested
 *  (counters of cl, the store's client). */
static void
check_list_stops_and_pages(struct objstore *os, struct oshttp_client *cl)
{
	struct seen s = {{0}, 0};
	CHECK_EQ(objstore_list(os, "nothing/", seen_cb, &s), 0);
	CHECK_EQ(s.n, 0);
	int calls = 0;
	CHECK_EQ(objstore_list(os, "", stop_cb, &calls), 42); /* the callback's result stops it */
	CHECK_EQ(calls, 3);
	struct oshttp_stats st;
	oshttp_client_stats(cl, OSHTTP_OP_LIST, &st);
	CHECK(st.requests >= 4 + 3); /* 7 keys at 2 a page: 4 pages, and 3 for the first */
}

/* ---------------------------------------------------------------- streamed writes */

/** n bytes of a pattern that repeats no block (malloc; NULL when out of memory). */
static uint8_t *
pattern_new(size_t n)
{
	uint8_t *data = malloc(n);
	for (size_t i = 0; data != NULL && i < n; i++)
		data[i] = (uint8_t)(i * 131 + (i >> 9));
	return data;
}

/** Write n bytes of data through w in pieces of 7777 bytes; 0 or the first failure. */
static int
write_in_pieces(struct objstore_writer *w, const uint8_t *data, size_t n)
{
	for (size_t off = 0; off < n;) {
		size_t k = n - off < 7777 ? n - off : 7777;
		int rc = objstore_writer_write(w, data + off, k);
		if (rc != 0)
			return rc;
		off += k;
	}
	return 0;
}

/** A small streamed write is committed whole ("run/small") and an aborted one of the n
 *  bytes of data leaves nothing ("run/aborted"). */
static void
check_small_and_aborted_writes(struct objstore *os, const uint8_t *data, size_t n, int *finished)
{
	*finished = 0;
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(os, "run/small", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "tiny", 4), 0);
	CHECK_EQ(objstore_writer_commit(w), 0);
	CHECK(get_eq(os, "run/small", "tiny"));
	REQUIRE_EQ(objstore_writer_open(os, "run/aborted", &w), 0);
	CHECK_EQ(objstore_writer_write(w, data, n), 0);
	objstore_writer_abort(w);
	struct buf b = {0};
	CHECK_EQ(objstore_get(os, "run/aborted", &b), STRATA_NOTFOUND);
	buf_destroy(&b);
	*finished = 1;
}

/* ---------------------------------------------------------------- the engine */

static char *
key_of(int i, char *dst)
{
	sprintf(dst, "key-%06d", i);
	return dst;
}

/** Every row i < n of shard reads back as "value-i-shard". */
static int
all_rows_read_back(strata *db, uint32_t shard, int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++) {
		char k[32], want[32];
		key_of(i, k);
		snprintf(want, sizeof(want), "value-%d-%u", i, shard);
		void *v = NULL;
		size_t len = 0;
		int rc = strata_get(db, shard, k, strlen(k), &v, &len);
		if (rc != 0 || len != strlen(want) || memcmp(v, want, len) != 0) {
			if (bad++ < 3)
				fprintf(stderr, "  shard %u %s: rc %d %s\n", shard, k, rc, strata_last_error());
		}
		strata_free(v);
	}
	return bad == 0;
}

/** Open the engine of the round trip below (o: its options, for a reopen): two shards in
 *  dir, on the store at url, in blocks of 1 KiB. */
static int
engine_open(strata_options *o, const char *dir, const char *url, strata **db)
{
	strata_options_init(o);
	o->dir = dir;
	o->store = url;
	o->shards = 2;
	o->block_bytes = 1024;
	*db = NULL;
	int orc = strata_open(o, db);
	if (orc != 0)
		fprintf(stderr, "  open: %s\n", strata_last_error());
	return orc;
}

/** Shards 0 and 1 of db on a remote store: n rows each in three passes, each pass sealed
 *  and the first two merged, then a compaction folds the two runs into one; every row
 *  reads back and strata_check passes. */
static void
engine_append_seal_merge_compact(strata *db, int n, int *finished)
{
	*finished = 0;
	for (uint32_t shard = 0; shard < 2; shard++) {
		for (int pass = 0; pass < 3; pass++) {
			for (int i = pass; i < n; i += 3) {
				char k[32], v[32];
				key_of(i, k);
				snprintf(v, sizeof(v), "value-%d-%u", i, shard);
				strata_row r = {k, strlen(k), v, strlen(v)};
				REQUIRE_EQ(strata_append(db, shard, &r, 1), 0);
			}
			REQUIRE_EQ(strata_seal(db, shard), 0);
			if (pass < 2) {
				uint32_t merged = 0;
				REQUIRE_EQ(strata_merge(db, shard, 0, &merged), 0);
				CHECK_EQ(merged, 1);
			}
		}
		strata_stats st;
		REQUIRE_EQ(strata_shard_stats(db, shard, &st), 0);
		CHECK_EQ(st.base_runs, 2);
		CHECK_EQ(st.generations, 1);
		strata_plan *plan = NULL;
		REQUIRE_EQ(strata_prepare_compact(db, shard, 0, &plan), 0);
		REQUIRE_EQ(strata_commit_merge(db, plan), 0);
		REQUIRE_EQ(strata_shard_stats(db, shard, &st), 0);
		CHECK_EQ(st.base_runs, 1);
		CHECK(all_rows_read_back(db, shard, n));
		CHECK_EQ(strata_check(db, shard), 0);
	}
	*finished = 1;
}

/** After the round trip, through os (a store of the engine's URL): shard 1's objects
 *  are in the container or bucket (a run, a generation, manifest versions). */
static void
check_engine_objects_listed(struct objstore *os)
{
	struct seen s = {{0}, 0};
	CHECK_EQ(objstore_list(os, "shard-0001/", seen_cb, &s), 0);
	CHECK(s.n >= 3); /* a run, a generation, manifest versions */
}

/** After a reopen: every row of shards 0 and 1 reads back and strata_check passes. */
static void
check_engine_reopened(strata *db, int n)
{
	for (uint32_t shard = 0; shard < 2; shard++) {
		CHECK(all_rows_read_back(db, shard, n));
		CHECK_EQ(strata_check(db, shard), 0);
	}
}

#endif
