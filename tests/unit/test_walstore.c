/*
 * test_walstore.c — the WAL on an object store (wal = store) over the local-directory
 * store: one object per group commit, replay in position order, fencing by
 * put-if-absent at the next position, gaps closed (never skipped), release of objects
 * below the cursor; and through the public API: a round trip, the serve range, and a
 * takeover by strata_shard_claim between two handles sharing one object directory.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../node/core/wal.h"
#include "../../node/lib/buf.h"
#include "../../node/lib/crc.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "harness.h"

/** Key prefix of the WALs under test. */
#define PFX "shard-0000/wal/"
/** Most rows a replay records. */
#define MAX_SEEN 256

/** Rows a replay handed over. */
struct seen {
	/** Position and key of each row. */
	uint64_t seq[MAX_SEEN];
	char key[MAX_SEEN][32];
	/** Rows recorded. */
	int n;
};

static int
seen_cb(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n)
{
	struct seen *s = ctx;
	for (size_t i = 0; i < n && s->n < MAX_SEEN; i++, s->n++) {
		s->seq[s->n] = first_seq + i;
		snprintf(s->key[s->n], sizeof(s->key[0]), "%.*s", (int)rows[i].key_len, (const char *)rows[i].key);
	}
	return 0;
}

/** Index of the row with key k in s, or -1. */
static int
seen_find(const struct seen *s, const char *k)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->key[i], k) == 0)
			return i;
	return -1;
}

static void
wo_init(struct wal_options *wo, const char *dir, struct objstore *os)
{
	memset(wo, 0, sizeof(*wo));
	wo->dir = dir;
	wo->sync = STRATA_SYNC_FSYNC;
	wo->os = os;
	wo->prefix = PFX;
}

/** Open a WAL of epoch on os, replaying into s (cursor 0, floor). */
static int
wal_at(const char *dir, struct objstore *os, uint64_t epoch, uint64_t floor, struct seen *s, struct wal **w)
{
	struct wal_options wo;
	wo_init(&wo, dir, os);
	int rc = wal_scan_open(&wo, 0, seen_cb, s, w);
	if (rc == 0 && (rc = wal_start(*w, epoch, floor)) != 0) {
		wal_close(*w);
		*w = NULL;
	}
	return rc;
}

/** Append one row with key k: the code of its wait. */
static int
put1(struct wal *w, const char *k, uint64_t *seq)
{
	strata_row r = {k, strlen(k), "v", 1, STRATA_ROW_PUT};
	struct wal_ticket t;
	int rc = wal_submit(w, &r, 1, &t);
	if (rc == 0)
		rc = wal_wait(w, &t);
	if (seq != NULL)
		*seq = t.first_seq;
	return rc;
}

static int
count_cb(void *ctx, const char *key, uint64_t size)
{
	(*(int *)ctx)++;
	return 0;
}

static int
count_objects(struct objstore *os, const char *prefix)
{
	int n = 0;
	objstore_list(os, prefix, count_cb, &n);
	return n;
}

/** The bytes of a batch object of one row (key k) at position first, as a writer of
 *  epoch would put it (the format of node/core/wal.c). */
static size_t
batch_object(uint8_t *out, uint64_t epoch, uint64_t first, const char *k)
{
	size_t kl = strlen(k), plen = 1 + 1 + 1 + kl + 1;
	uint8_t *e = out + 48, *p = e + 24;
	p[0] = STRATA_ROW_PUT;
	p[1] = (uint8_t)kl;
	p[2] = 1;
	memcpy(p + 3, k, kl);
	p[3 + kl] = 'v';
	enc_u32(e + 4, (uint32_t)plen);
	enc_u64(e + 8, first);
	enc_u32(e + 16, 1);
	enc_u32(e + 20, crc32c(0, p, plen));
	enc_u32(e, crc32c(0, e + 4, 20));
	memcpy(out, "STRWALOB", 8);
	enc_u32(out + 8, 1);
	enc_u32(out + 12, 0);
	enc_u64(out + 16, epoch);
	enc_u64(out + 24, first);
	enc_u64(out + 32, first);
	enc_u32(out + 40, 1);
	enc_u32(out + 44, crc32c(0, out, 44));
	return 48 + 24 + plen;
}

static void
obj_key(char *out, size_t cap, uint64_t first)
{
	snprintf(out, cap, PFX "%020llu", (unsigned long long)first);
}

TEST(store_wal_round_trip_one_object_per_group_commit)
{
	char *d = harness_tmpdir("walstore");
	char objs[600], wd[600];
	snprintf(objs, sizeof(objs), "%s/objects", d);
	snprintf(wd, sizeof(wd), "%s/wal", d);
	struct objstore *os;
	REQUIRE(objstore_fs_new(objs, &os) == 0);
	struct seen s = {0};
	struct wal *w;
	REQUIRE(wal_at(wd, os, 1, 1, &s, &w) == 0);
	CHECK_EQ(s.n, 0);
	uint64_t seq[3];
	CHECK_EQ(put1(w, "a", &seq[0]), 0);
	CHECK_EQ(put1(w, "b", &seq[1]), 0);
	CHECK_EQ(put1(w, "c", &seq[2]), 0);
	CHECK(seq[0] < seq[1] && seq[1] < seq[2]);
	CHECK_EQ(count_objects(os, PFX), 5); /* the epoch object, the fence and three batches */
	wal_close(w);
	struct seen s2 = {0};
	REQUIRE(wal_at(wd, os, 2, 1, &s2, &w) == 0);
	REQUIRE_EQ(s2.n, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(s2.seq[i], seq[i]);
	CHECK(strcmp(s2.key[0], "a") == 0 && strcmp(s2.key[2], "c") == 0);
	uint64_t s4;
	CHECK_EQ(put1(w, "d", &s4), 0);
	CHECK(s4 > seq[2] + 1); /* the new owner's fence took the position after c */
	wal_close(w);
	objstore_destroy(os);
	harness_rmrf(d);
	free(d);
}

TEST(newer_owner_fences_older_writer_at_next_position)
{
	char *d = harness_tmpdir("walstore");
	char objs[600], wd[600];
	snprintf(objs, sizeof(objs), "%s/objects", d);
	snprintf(wd, sizeof(wd), "%s/wal", d);
	struct objstore *os1, *os2;
	REQUIRE(objstore_fs_new(objs, &os1) == 0);
	REQUIRE(objstore_fs_new(objs, &os2) == 0);
	struct seen s1 = {0}, s2 = {0};
	struct wal *a, *b;
	REQUIRE(wal_at(wd, os1, 1, 1, &s1, &a) == 0);
	CHECK_EQ(put1(a, "acked-by-a", NULL), 0);
	REQUIRE(wal_at(wd, os2, 2, 1, &s2, &b) == 0);
	CHECK(seen_find(&s2, "acked-by-a") >= 0);
	/* The epoch object b wrote is what stops a still appending a soon (so that b's fence
	 * can get ahead of it); put it back to a's epoch, so that only the fence at the next
	 * position stands between a and an acknowledged row nobody will read. */
	uint8_t ep[24] = "STRFENCE";
	enc_u64(ep + 8, 1);
	enc_u32(ep + 16, crc32c(0, ep, 16));
	REQUIRE(objstore_put(os2, PFX "epoch", ep, sizeof(ep)) == 0);
	/* a's next put finds its position taken by b's fence: fenced, terminal. */
	CHECK_EQ(put1(a, "lost-by-a", NULL), STRATA_EFENCED);
	CHECK_EQ(wal_failed(a), STRATA_EFENCED);
	CHECK_EQ(put1(a, "later-by-a", NULL), STRATA_EFENCED);
	CHECK_EQ(put1(b, "acked-by-b", NULL), 0);
	wal_close(a);
	wal_close(b);
	struct seen s3 = {0};
	struct wal *c;
	REQUIRE(wal_at(wd, os2, 3, 1, &s3, &c) == 0);
	CHECK(seen_find(&s3, "acked-by-a") >= 0);
	CHECK(seen_find(&s3, "acked-by-b") >= 0);
	CHECK(seen_find(&s3, "lost-by-a") < 0);
	CHECK(seen_find(&s3, "later-by-a") < 0);
	/* an older epoch cannot start once a newer one fenced the WAL: its fence goes to
	 * the next position and it replays everything, it is the manifest's epoch claim
	 * that refuses it (recover.c). Here: it is simply a newer writer at a later spot. */
	wal_close(c);
	objstore_destroy(os1);
	objstore_destroy(os2);
	harness_rmrf(d);
	free(d);
}

/*
 * The rule: replay goes on past a gap (positions above the cursor no object covers)
 * and replays the rows after it; before the WAL takes appends (so before any seal can
 * move the cursor past the gap), the owner puts a void object at the gap's first
 * position by put-if-absent. If an object lands there first (a late put of a writer whose
 * outcome was unknown), the void put fails, the owner walks again and replays it.
 */
TEST(gap_after_failed_put_is_closed_never_skipped)
{
	char *d = harness_tmpdir("walstore");
	char objs[600], wd[600], key[128];
	snprintf(objs, sizeof(objs), "%s/objects", d);
	snprintf(wd, sizeof(wd), "%s/wal", d);
	struct objstore *os;
	REQUIRE(objstore_fs_new(objs, &os) == 0);
	struct seen s = {0};
	struct wal *w;
	/* Writer 1: fence at 1, row at 2; its put at 3 "fails" (never lands for now). */
	REQUIRE(wal_at(wd, os, 1, 1, &s, &w) == 0);
	uint64_t p;
	CHECK_EQ(put1(w, "before-gap", &p), 0);
	CHECK_EQ(p, 2);
	wal_close(w);
	/* A later writer commits above the gap (its fence at 6, a row at 7). */
	struct seen s1 = {0};
	REQUIRE(wal_at(wd, os, 2, 6, &s1, &w) == 0);
	CHECK_EQ(put1(w, "after-gap", &p), 0);
	CHECK_EQ(p, 7);
	wal_close(w);
	/* Open: the scan replays both sides of the gap 3..5 and reports it. */
	struct wal_options wo;
	wo_init(&wo, wd, os);
	struct seen s2 = {0};
	REQUIRE(wal_scan_open(&wo, 0, seen_cb, &s2, &w) == 0);
	CHECK(seen_find(&s2, "before-gap") >= 0);
	CHECK(seen_find(&s2, "after-gap") >= 0);
	uint64_t gaps = 0, closed = 0;
	wal_store_stats(w, &gaps, &closed, NULL);
	CHECK_EQ(gaps, 1);
	/* The failed put lands late, before the owner closes the gap: it is replayed. */
	uint8_t obj[256];
	size_t len = batch_object(obj, 1, 3, "late");
	obj_key(key, sizeof(key), 3);
	REQUIRE(objstore_put_if_absent(os, key, obj, len) == 0);
	REQUIRE(wal_start(w, 3, 1) == 0);
	CHECK(seen_find(&s2, "late") >= 0);
	wal_store_stats(w, &gaps, &closed, NULL);
	CHECK_EQ(closed, 1); /* 4..5, after the late object took 3 */
	wal_close(w);
	/* Closed for good: a put into the gap now finds its position taken. */
	obj_key(key, sizeof(key), 4);
	len = batch_object(obj, 1, 4, "too-late");
	CHECK_EQ(objstore_put_if_absent(os, key, obj, len), STRATA_EEXIST);
	struct seen s3 = {0};
	REQUIRE(wal_at(wd, os, 4, 1, &s3, &w) == 0);
	CHECK_EQ(s3.n, 3);
	CHECK(seen_find(&s3, "too-late") < 0);
	wal_store_stats(w, &gaps, &closed, NULL);
	CHECK_EQ(gaps, 0);
	wal_close(w);
	objstore_destroy(os);
	harness_rmrf(d);
	free(d);
}

TEST(release_deletes_batches_below_cursor_and_keeps_markers)
{
	char *d = harness_tmpdir("walstore");
	char objs[600], wd[600], key[128];
	snprintf(objs, sizeof(objs), "%s/objects", d);
	snprintf(wd, sizeof(wd), "%s/wal", d);
	struct objstore *os;
	REQUIRE(objstore_fs_new(objs, &os) == 0);
	struct seen s = {0};
	struct wal *w;
	REQUIRE(wal_at(wd, os, 1, 1, &s, &w) == 0);
	uint64_t p1, p2, p3;
	CHECK_EQ(put1(w, "a", &p1), 0);
	CHECK_EQ(put1(w, "b", &p2), 0);
	CHECK_EQ(put1(w, "c", &p3), 0);
	CHECK_EQ(wal_release(w, p2), 0);
	struct buf b = {0};
	obj_key(key, sizeof(key), p1);
	CHECK_EQ(objstore_get(os, key, &b), STRATA_NOTFOUND);
	obj_key(key, sizeof(key), p3);
	CHECK_EQ(objstore_get(os, key, &b), 0);
	obj_key(key, sizeof(key), 1);
	buf_reset(&b);
	CHECK_EQ(objstore_get(os, key, &b), 0); /* the fence stays */
	buf_destroy(&b);
	wal_close(w);
	/* Reopened with the cursor at p2: only c is replayed. */
	struct wal_options wo;
	wo_init(&wo, wd, os);
	struct seen s2 = {0};
	REQUIRE(wal_scan_open(&wo, p2, seen_cb, &s2, &w) == 0);
	REQUIRE(wal_start(w, 2, p2 + 1) == 0);
	CHECK_EQ(s2.n, 1);
	CHECK(seen_find(&s2, "c") >= 0);
	wal_close(w);
	objstore_destroy(os);
	harness_rmrf(d);
	free(d);
}

/* ---- through the public API ---- */

/** The one object directory the handles of a test share (env.objstore_new). */
static char shared_objects[600];

static int
shared_objstore_new(const char *dir, struct objstore **out)
{
	(void)dir;
	return objstore_fs_new(shared_objects, out);
}

static struct env_ops shared_env;

/** open_at with owner_check_ms (strata_options_init's default: 1000). */
static int
open_checking(const char *dir, uint32_t shards, uint32_t first, uint32_t count, uint32_t owner_check_ms,
	      strata **db)
{
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.shards = shards;
	o.threads = 0;
	o.wal = STRATA_WAL_STORE;
	o.serve_first = first;
	o.serve_count = count;
	o.owner_check_ms = owner_check_ms;
	o.env_ops = &shared_env;
	return strata_open(&o, db);
}

static int
open_at(const char *dir, uint32_t shards, uint32_t first, uint32_t count, strata **db)
{
	return open_checking(dir, shards, first, count, 1000, db);
}

static int
append1(strata *db, uint32_t shard, const char *k, const char *v)
{
	strata_row r = {k, strlen(k), v, strlen(v), STRATA_ROW_PUT};
	return strata_append(db, shard, &r, 1);
}

/** 1 when shard's key k reads v. */
static int
reads(strata *db, uint32_t shard, const char *k, const char *v)
{
	void *val = NULL;
	size_t vl = 0;
	int rc = strata_get(db, shard, k, strlen(k), &val, &vl);
	int ok = rc == 0 && vl == strlen(v) && memcmp(val, v, vl) == 0;
	strata_free(val);
	return ok;
}

TEST(store_wal_round_trip_through_seal_merge_reopen)
{
	char *d = harness_tmpdir("walstore");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/node", d);
	snprintf(shared_objects, sizeof(shared_objects), "%s/objects", d);
	strata *db;
	REQUIRE(open_at(dir, 1, 0, 0, &db) == 0);
	char k[32];
	for (int i = 0; i < 20; i++) {
		snprintf(k, sizeof(k), "k%02d", i);
		CHECK_EQ(append1(db, 0, k, "one"), 0);
		if (i == 9)
			CHECK_EQ(strata_seal(db, 0), 0);
	}
	CHECK_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);
	CHECK_EQ(append1(db, 0, "tail", "unsealed"), 0);
	strata_close(db);
	REQUIRE(open_at(dir, 1, 0, 0, &db) == 0);
	for (int i = 0; i < 20; i++) {
		snprintf(k, sizeof(k), "k%02d", i);
		CHECK(reads(db, 0, k, "one"));
	}
	CHECK(reads(db, 0, "tail", "unsealed"));
	strata_close(db);
	/* What the seals covered went to the reaper: only the epoch object, the fences of
	 * the two opens and the unsealed tail's batch are left. */
	struct objstore *os;
	REQUIRE(objstore_fs_new(shared_objects, &os) == 0);
	CHECK_EQ(count_objects(os, PFX), 4);
	objstore_destroy(os);
	/* The local WAL directory holds nothing: opening it with wal = local would lose
	 * the tail, and the reverse switch is refused by the store-mode open. */
	harness_rmrf(d);
	free(d);
}

TEST(switch_to_store_wal_with_local_rows_is_refused)
{
	char *d = harness_tmpdir("walstore");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/node", d);
	snprintf(shared_objects, sizeof(shared_objects), "%s/objects", d);
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1; /* as open_at below */
	o.threads = 0;
	o.env_ops = &shared_env;
	strata *db;
	REQUIRE(strata_open(&o, &db) == 0);
	CHECK_EQ(append1(db, 0, "local", "row"), 0);
	strata_close(db);
	CHECK_EQ(open_at(dir, 1, 0, 0, &db), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "wal = local") != NULL);
	o.wal = 7;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	harness_rmrf(d);
	free(d);
}

/* The other direction, on the local fs store (no store URL): rows acknowledged with
 * wal = store must not be hidden by an open with wal = local, and then lost for good when
 * that open's seal moves the cursor past them. */
TEST(switch_to_local_wal_with_store_rows_is_refused_on_the_fs_store)
{
	char *d = harness_tmpdir("walstore");
	strata_options o;
	strata_options_init(&o);
	o.dir = d;
	o.shards = 1;
	o.threads = 0;
	o.wal = STRATA_WAL_STORE;
	strata *db;
	REQUIRE(strata_open(&o, &db) == 0);
	CHECK_EQ(append1(db, 0, "acked", "on the store"), 0);
	strata_close(db);
	o.wal = STRATA_WAL_LOCAL;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "wal = store") != NULL);
	o.wal = STRATA_WAL_STORE;
	REQUIRE(strata_open(&o, &db) == 0);
	CHECK(reads(db, 0, "acked", "on the store"));
	strata_close(db);
	harness_rmrf(d);
	free(d);
}

TEST(serve_range_opens_a_subset_and_claim_takes_a_shard_over)
{
	char *d = harness_tmpdir("walstore");
	char da[600], dbd[600];
	snprintf(da, sizeof(da), "%s/a", d);
	snprintf(dbd, sizeof(dbd), "%s/b", d);
	snprintf(shared_objects, sizeof(shared_objects), "%s/objects", d);
	strata *a, *b;
	/* Node A serves shards 0 and 1 of 3, node B shard 2. */
	REQUIRE(open_at(da, 3, 0, 2, &a) == 0);
	REQUIRE(open_at(dbd, 3, 2, 1, &b) == 0);
	CHECK_EQ(append1(a, 2, "x", "y"), STRATA_ERANGE);
	CHECK(strstr(strata_last_error(), "not served by this node") != NULL);
	CHECK_EQ(append1(b, 0, "x", "y"), STRATA_ERANGE);
	char dc[600];
	strata *c;
	snprintf(dc, sizeof(dc), "%s/c", d);
	CHECK_EQ(open_at(dc, 3, 3, 0, &c), STRATA_EINVAL);
	char k[32];
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "a%02d", i);
		CHECK_EQ(append1(a, 0, k, "acked"), 0);
		if (i == 4)
			CHECK_EQ(strata_seal(a, 0), 0);
	}
	CHECK_EQ(append1(a, 1, "s1", "before"), 0);
	/* B takes shard 0 over. */
	int rc = strata_shard_claim(b, 0);
	if (rc != 0)
		fprintf(stderr, "  claim: %s\n", strata_last_error());
	CHECK_EQ(rc, 0);
	CHECK_EQ(strata_shard_claim(b, 0), 0); /* owned already: nothing to do */
	CHECK_EQ(append1(a, 0, "after", "claim"), STRATA_EFENCED);
	CHECK_EQ(append1(a, 0, "after2", "claim"), STRATA_EFENCED);
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "a%02d", i);
		CHECK(reads(b, 0, k, "acked"));
	}
	CHECK(!reads(b, 0, "after", "claim"));
	CHECK_EQ(append1(b, 0, "by-b", "ok"), 0);
	/* A keeps serving shard 1. */
	CHECK_EQ(append1(a, 1, "s1", "after"), 0);
	CHECK(reads(a, 1, "s1", "after"));
	/* A takes it back: its fenced handle of shard 0 is replaced by a fresh one. */
	CHECK_EQ(strata_shard_claim(a, 0), 0);
	CHECK(reads(a, 0, "by-b", "ok"));
	CHECK_EQ(append1(b, 0, "b-again", "x"), STRATA_EFENCED);
	CHECK_EQ(append1(a, 0, "a-again", "x"), 0);
	strata_close(b);
	strata_close(a);
	harness_rmrf(d);
	free(d);
}

/* A cluster member opens no shard (STRATA_SERVE_NONE) and is given them by placement:
 * claim, then release for a handoff (nothing served after it; the next owner's claim
 * replays what was acknowledged), and claim back. */
TEST(serve_none_opens_no_shard_and_a_release_hands_the_shard_over)
{
	char *d = harness_tmpdir("walstore");
	char da[600], dbd[600];
	snprintf(da, sizeof(da), "%s/a", d);
	snprintf(dbd, sizeof(dbd), "%s/b", d);
	snprintf(shared_objects, sizeof(shared_objects), "%s/objects", d);
	strata *a, *b;
	REQUIRE(open_at(da, 3, STRATA_SERVE_NONE, 0, &a) == 0);
	REQUIRE(open_at(dbd, 3, STRATA_SERVE_NONE, 0, &b) == 0);
	for (uint32_t i = 0; i < 3; i++)
		CHECK(!strata_shard_served(a, i));
	CHECK_EQ(append1(a, 1, "x", "y"), STRATA_ERANGE);
	CHECK(strstr(strata_last_error(), "opened no shard") != NULL);
	CHECK_EQ(strata_shard_claim(a, 1), 0);
	CHECK(strata_shard_served(a, 1));
	CHECK_EQ(append1(a, 1, "k1", "by-a"), 0);
	CHECK_EQ(strata_seal(a, 1), 0);
	CHECK_EQ(append1(a, 1, "k2", "by-a, unsealed"), 0);
	CHECK_EQ(strata_shard_release(a, 1, "handed off to b"), 0);
	CHECK(!strata_shard_served(a, 1));
	CHECK_EQ(append1(a, 1, "k3", "after release"), STRATA_ERANGE);
	CHECK(!reads(a, 1, "k1", "by-a"));
	CHECK_EQ(strata_shard_release(a, 1, "again"), 0); /* not open: nothing to do */
	CHECK_EQ(strata_shard_claim(b, 1), 0);
	CHECK(reads(b, 1, "k1", "by-a"));
	CHECK(reads(b, 1, "k2", "by-a, unsealed"));
	CHECK(!reads(b, 1, "k3", "after release"));
	CHECK_EQ(append1(b, 1, "k4", "by-b"), 0);
	CHECK_EQ(strata_shard_claim(a, 1), 0);
	CHECK(reads(a, 1, "k4", "by-b"));
	CHECK_EQ(append1(b, 1, "k5", "b fenced"), STRATA_EFENCED);
	strata_close(b);
	strata_close(a);
	harness_rmrf(d);
	free(d);
}

/* A node fenced while idle (another node claimed its shard, and it appended nothing
 * since) must not serve its stale copy: a read looks at the epoch object once its last
 * look is older than owner_check_ms and, finding a newer owner, refuses. A claim always
 * looks, so it never answers 0 without owning the shard: here it takes the shard back. */
TEST(an_idle_fenced_node_serves_no_stale_read_and_its_claim_takes_the_shard_back)
{
	char *d = harness_tmpdir("walstore");
	char da[600], dbd[600], dc[600];
	snprintf(da, sizeof(da), "%s/a", d);
	snprintf(dbd, sizeof(dbd), "%s/b", d);
	snprintf(dc, sizeof(dc), "%s/c", d);
	snprintf(shared_objects, sizeof(shared_objects), "%s/objects", d);
	strata *a, *b;
	/* A serves shards 0 and 1 of 3 and checks on every read; B serves shard 2. */
	REQUIRE(open_checking(da, 3, 0, 2, 0, &a) == 0);
	REQUIRE(open_at(dbd, 3, 2, 1, &b) == 0);
	CHECK_EQ(append1(a, 0, "k1", "v1"), 0);
	CHECK_EQ(append1(a, 1, "s1", "one"), 0);
	CHECK(reads(a, 0, "k1", "v1"));
	strata_stats st;
	REQUIRE_EQ(strata_shard_stats(a, 1, &st), 0);
	uint64_t epoch1 = st.writer_epoch;
	/* A claim of a shard A owns changes nothing: the same epoch, still appending. */
	CHECK_EQ(strata_shard_claim(a, 1), 0);
	REQUIRE_EQ(strata_shard_stats(a, 1, &st), 0);
	CHECK_EQ(st.writer_epoch, epoch1);
	CHECK_EQ(append1(a, 1, "s1", "two"), 0);
	/* B claims shard 0 and acknowledges a row; A stays idle. */
	REQUIRE_EQ(strata_shard_claim(b, 0), 0);
	CHECK_EQ(append1(b, 0, "k2", "by-b"), 0);
	void *val = NULL;
	size_t vl = 0;
	CHECK_EQ(strata_get(a, 0, "k1", 2, &val, &vl), STRATA_EFENCED); /* not its stale 200 */
	CHECK(strstr(strata_last_error(), "newer owner") != NULL);
	CHECK_EQ(strata_get(a, 0, "k2", 2, &val, &vl), STRATA_EFENCED); /* not a 404 */
	CHECK_EQ(append1(a, 0, "k3", "x"), STRATA_EFENCED);
	/* Shard 1 is still A's. */
	CHECK(reads(a, 1, "s1", "two"));
	/* B claims shard 1 too; A, idle on it and told nothing, claims it straight back: the
	 * claim looks at the epoch object, finds B there, and takes the shard over. */
	REQUIRE_EQ(strata_shard_claim(b, 1), 0);
	CHECK_EQ(append1(b, 1, "s1", "by-b"), 0);
	CHECK_EQ(strata_shard_claim(a, 1), 0);
	REQUIRE_EQ(strata_shard_stats(a, 1, &st), 0);
	CHECK(st.writer_epoch > epoch1 + 1);
	CHECK_EQ(append1(a, 1, "s1", "three"), 0);
	CHECK(reads(a, 1, "s1", "three"));
	CHECK_EQ(append1(b, 1, "s1", "x"), STRATA_EFENCED);
	/* A's claim takes shard 0 back with a newer epoch, B's rows included. */
	CHECK_EQ(strata_shard_claim(a, 0), 0);
	CHECK(reads(a, 0, "k2", "by-b"));
	CHECK(reads(a, 0, "k1", "v1"));
	CHECK_EQ(append1(a, 0, "k5", "by-a"), 0);
	/* With the default (1000 ms), B's idle handle serves its copy until its last look is
	 * a second old (the documented window), and no longer. */
	val = NULL;
	CHECK_EQ(strata_get(b, 0, "k2", 2, &val, &vl), 0);
	strata_free(val);
	usleep(1100 * 1000);
	CHECK_EQ(strata_get(b, 0, "k2", 2, &val, &vl), STRATA_EFENCED);
	CHECK_EQ(append1(b, 0, "k4", "x"), STRATA_EFENCED);
	/* B's claim takes it back in turn. */
	CHECK_EQ(strata_shard_claim(b, 0), 0);
	CHECK(reads(b, 0, "k5", "by-a"));
	CHECK_EQ(append1(a, 0, "k6", "x"), STRATA_EFENCED);
	/* The option is checked. */
	strata *c = NULL;
	CHECK_EQ(open_checking(dc, 3, 2, 1, 3600001, &c), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "owner_check_ms") != NULL);
	strata_close(b);
	strata_close(a);
	harness_rmrf(d);
	free(d);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	diag_log_level = LOG_LVL_ERROR + 1;
	shared_env = env_default;
	shared_env.objstore_new = shared_objstore_new;
	RUN(store_wal_round_trip_one_object_per_group_commit);
	RUN(newer_owner_fences_older_writer_at_next_position);
	RUN(gap_after_failed_put_is_closed_never_skipped);
	RUN(release_deletes_batches_below_cursor_and_keeps_markers);
	RUN(store_wal_round_trip_through_seal_merge_reopen);
	RUN(switch_to_store_wal_with_local_rows_is_refused);
	RUN(switch_to_local_wal_with_store_rows_is_refused_on_the_fs_store);
	RUN(serve_range_opens_a_subset_and_claim_takes_a_shard_over);
	RUN(an_idle_fenced_node_serves_no_stale_read_and_its_claim_takes_the_shard_back);
	RUN(serve_none_opens_no_shard_and_a_release_hands_the_shard_over);
	return HARNESS_END("test_walstore");
}
