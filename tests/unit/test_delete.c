/*
 * test_delete.c — deletes through the public API: a tombstone hides older rows of its key
 * in every layer (memtable, generation, base run) for get and scan, across seal, merge,
 * compaction, close and reopen, and a crash; merges keep a tombstone while an older table
 * may hold its key and drop it once nothing older is left; puts and deletes mix in one
 * batch; and the files of the build before deletes (WAL segment version 2, run format 1,
 * a whole store in tests/unit/data/store-v1) are still read.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../node/core/manifest.h"
#include "../../node/core/run.h"
#include "../../node/core/wal.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "harness.h"

/** Tag of the temporary directories (engine_util.h). */
#define ENGINE_UTIL_TAG "delete"
#include "engine_util.h"

/** Fixtures written by the build before deletes existed (see tests/unit/data/README). */
#define DATA_DIR "tests/unit/data"

static void
t_end(void)
{
	alarm(0);
	t_cleanup();
}

/** Delete keys "<prefix>%05d" for i in [from, to) with strata_delete, in one batch. */
static int
del_range(strata *db, const char *prefix, int from, int to)
{
	static char keys[1024][48];
	const void *kp[1024];
	size_t kl[1024];
	int n = 0;
	for (int i = from; i < to && n < 1024; i++, n++) {
		snprintf(keys[n], sizeof(keys[n]), "%s%05d", prefix, i);
		kp[n] = keys[n];
		kl[n] = strlen(keys[n]);
	}
	int rc = strata_delete(db, 0, kp, kl, (size_t)n);
	if (rc != 0)
		fprintf(stderr, "  delete %s..: %s: %s\n", keys[0], strata_strerror(rc),
			strata_last_error());
	return rc;
}

/** Keys in [from, to) that read back (they should all be deleted). */
static int
range_present(strata *db, const char *prefix, int from, int to)
{
	int present = 0;
	for (int i = from; i < to; i++) {
		char key[48];
		snprintf(key, sizeof(key), "%s%05d", prefix, i);
		void *v = NULL;
		size_t n = 0;
		int rc = strata_get(db, 0, key, strlen(key), &v, &n);
		if (rc == 0) {
			if (present++ < 3)
				fprintf(stderr, "  get %s: deleted, but reads '%.*s'\n", key,
					(int)(n > 40 ? 40 : n), (const char *)v);
			strata_free(v);
		} else if (rc != STRATA_NOTFOUND) {
			fprintf(stderr, "  get %s: %s: %s\n", key, strata_strerror(rc),
				strata_last_error());
			present++;
		}
	}
	return present;
}

/** Rows of shard 0's tables as the manifest records them (generations + runs). */
static uint64_t
table_rows(const char *dir)
{
	struct manifest m;
	if (load_manifest(dir, &m) != 0)
		return UINT64_MAX;
	uint64_t rows = 0;
	for (uint32_t i = 0; i < m.ngens; i++)
		rows += m.gens[i].rows;
	for (uint32_t i = 0; i < m.nruns; i++)
		rows += m.runs[i].rows;
	manifest_destroy(&m);
	return rows;
}

/** Every layer keeps a 200-key set with 1 in 4 keys deleted, as get and scan see it. */
static int
quarter_deleted_ok(strata *db, const char *tag)
{
	int bad = 0;
	for (int q = 0; q < 200; q += 4) {
		bad += range_present(db, "k", q, q + 1);
		bad += range_misses(db, "k", q + 1, q + 4, tag);
	}
	return bad == 0 && scan_ok(db, 150);
}

TEST(delete_hides_the_key_in_every_layer)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* Puts in a base run, deletes in the memtable. */
	REQUIRE_EQ(put_range(db, "k", 0, 200, "v1", 50), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	for (int q = 0; q < 200; q += 4)
		REQUIRE_EQ(del_range(db, "k", q, q + 1), 0);
	CHECK(quarter_deleted_ok(db, "v1"));
	/* Sealed: the tombstones are a generation above the run. */
	REQUIRE_EQ(strata_seal(db, 0), 0);
	CHECK_EQ(stats_of(db).generations, 1);
	CHECK(quarter_deleted_ok(db, "v1"));
	/* Merged: a second run above the first, which still holds the keys. */
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	CHECK_EQ(stats_of(db).base_runs, 2);
	CHECK(quarter_deleted_ok(db, "v1"));
	/* Reopened: the same from the files alone. */
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK(quarter_deleted_ok(db, "v1"));
	/* A put after the delete brings the key back; a delete of an absent key is no error. */
	REQUIRE_EQ(put_range(db, "k", 0, 1, "v2", 1), 0);
	CHECK_EQ(range_misses(db, "k", 0, 1, "v2"), 0);
	REQUIRE_EQ(del_range(db, "absent", 0, 10), 0);
	CHECK(scan_ok(db, 151));
	db_close(db);
}

TEST(merge_keeps_a_tombstone_while_an_older_run_holds_the_key)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k", 0, 100, "v1", 100), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0); /* run 1: 100 puts */
	REQUIRE_EQ(del_range(db, "k", 0, 40), 0);
	REQUIRE_EQ(put_range(db, "n", 0, 10, "v1", 10), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0); /* run 2: 40 tombstones + 10 puts */
	CHECK_EQ(stats_of(db).base_runs, 2);
	CHECK_EQ(table_rows(dir), 150);
	CHECK_EQ(range_present(db, "k", 0, 40), 0);
	CHECK_EQ(range_misses(db, "k", 40, 100, "v1"), 0);
	CHECK(scan_ok(db, 70));
	/* The compaction folds the oldest run: tombstones and the rows they hid go. */
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
	REQUIRE_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(stats_of(db).base_runs, 1);
	CHECK_EQ(table_rows(dir), 70);
	CHECK_EQ(range_present(db, "k", 0, 40), 0);
	CHECK_EQ(range_misses(db, "k", 40, 100, "v1"), 0);
	CHECK(scan_ok(db, 70));
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(range_present(db, "k", 0, 40), 0);
	CHECK(scan_ok(db, 70));
	CHECK_EQ(strata_check(db, 0), 0);
	db_close(db);
}

TEST(compaction_of_newer_runs_keeps_tombstones_over_the_oldest)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	o.merge_max_inputs = 2;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k", 0, 50, "v1", 50), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0); /* run A: the puts */
	REQUIRE_EQ(put_range(db, "m", 0, 5, "v1", 5), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0); /* run B */
	REQUIRE_EQ(del_range(db, "k", 0, 20), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0); /* run C: tombstones */
	/* Compact the two oldest (A, B) first: C stays above them with its tombstones. */
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_compact(db, 0, 2, &plan), 0);
	REQUIRE_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(stats_of(db).base_runs, 2);
	CHECK_EQ(table_rows(dir), 75);
	CHECK_EQ(range_present(db, "k", 0, 20), 0);
	CHECK(scan_ok(db, 35));
	/* Then fold all: nothing older is left, so the tombstones go. */
	REQUIRE_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
	REQUIRE_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(table_rows(dir), 35);
	CHECK_EQ(range_present(db, "k", 0, 20), 0);
	CHECK_EQ(range_misses(db, "k", 20, 50, "v1"), 0);
	CHECK(scan_ok(db, 35));
	db_close(db);
}

TEST(merge_into_an_empty_base_drops_tombstones)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k", 0, 30, "v1", 30), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0); /* generation 1: puts */
	REQUIRE_EQ(del_range(db, "k", 0, 10), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0); /* generation 2: tombstones */
	REQUIRE_EQ(del_range(db, "k", 10, 12), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0); /* generation 3: tombstones */
	CHECK_EQ(table_rows(dir), 42);
	/* Fold only the oldest two: generation 3 is newer, so dropping is safe there too. */
	REQUIRE_EQ(strata_merge(db, 0, 2, NULL), 0);
	CHECK_EQ(table_rows(dir), 22);
	CHECK_EQ(range_present(db, "k", 0, 12), 0);
	CHECK(scan_ok(db, 18));
	/* The last generation merges above a run now: its tombstones stay. */
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	CHECK_EQ(table_rows(dir), 22);
	CHECK_EQ(range_present(db, "k", 0, 12), 0);
	CHECK(scan_ok(db, 18));
	db_close(db);
}

TEST(merging_away_every_row_leaves_an_empty_run)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k", 0, 20, "v1", 20), 0);
	REQUIRE_EQ(del_range(db, "k", 0, 20), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	CHECK_EQ(stats_of(db).base_runs, 1);
	CHECK_EQ(table_rows(dir), 0);
	CHECK(scan_ok(db, 0));
	REQUIRE_EQ(put_range(db, "k", 5, 6, "v2", 1), 0);
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
	REQUIRE_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(table_rows(dir), 1);
	CHECK_EQ(range_misses(db, "k", 5, 6, "v2"), 0);
	CHECK(scan_ok(db, 1));
	CHECK_EQ(strata_check(db, 0), 0);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK(scan_ok(db, 1));
	db_close(db);
}

TEST(puts_and_deletes_mix_in_one_batch)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k", 0, 3, "v1", 3), 0);
	strata_row rows[] = {
		{"k00000", 6, NULL, 0, STRATA_ROW_DELETE},
		{"a", 1, "a=x", 3},
		{"b", 1, "b=1", 3},
		{"b", 1, NULL, 0, STRATA_ROW_DELETE},   /* later in the batch: b is deleted */
		{"c", 1, NULL, 0, STRATA_ROW_DELETE},
		{"c", 1, "c=2", 3, STRATA_ROW_PUT},     /* later in the batch: c is put */
	};
	REQUIRE_EQ(strata_append(db, 0, rows, 6), 0);
	for (int pass = 0; pass < 3; pass++) {
		CHECK(get_is(db, "k00000", NULL));
		CHECK(get_is(db, "a", "a=x"));
		CHECK(get_is(db, "b", NULL));
		CHECK(get_is(db, "c", "c=2"));
		CHECK_EQ(range_misses(db, "k", 1, 3, "v1"), 0);
		CHECK(scan_ok(db, 4));
		if (pass == 0)
			REQUIRE_EQ(strata_seal(db, 0), 0);
		if (pass == 1)
			REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	}
	/* All or nothing: a bad row rejects the deletes in its batch too. */
	strata_row bad[] = {
		{"a", 1, NULL, 0, STRATA_ROW_DELETE},
		{"d", 1, "d=1", 3, 7},
	};
	CHECK_EQ(strata_append(db, 0, bad, 2), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "row 1") != NULL);
	CHECK(strstr(strata_last_error(), "kind 7") != NULL);
	bad[1] = (strata_row){"d", 1, "d=1", 3, STRATA_ROW_DELETE};
	CHECK_EQ(strata_append(db, 0, bad, 2), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "a delete has no value") != NULL);
	const void *empty[] = {"x", ""};
	size_t empty_len[] = {1, 0};
	CHECK_EQ(strata_delete(db, 0, empty, empty_len, 2), STRATA_EINVAL);
	CHECK_EQ(strata_delete(db, 0, NULL, NULL, 1), STRATA_EINVAL);
	CHECK_EQ(strata_delete(db, 0, NULL, NULL, 0), 0);
	CHECK_EQ(strata_delete(db, 9, empty, empty_len, 1), STRATA_ERANGE);
	CHECK(get_is(db, "a", "a=x"));
	CHECK(scan_ok(db, 4));
	db_close(db);
}

TEST(acknowledged_deletes_survive_a_crash)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	o.sync = STRATA_SYNC_FSYNC;
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		strata *c = NULL;
		if (strata_open(&o, &c) != 0)
			_exit(10);
		if (put_range(c, "k", 0, 100, "v1", 25) != 0 || strata_merge(c, 0, 0, NULL) != 0 ||
		    del_range(c, "k", 0, 10) != 0 || strata_seal(c, 0) != 0 ||
		    del_range(c, "k", 10, 20) != 0)
			_exit(11);
		_exit(0); /* no close: the last deletes are only in the WAL */
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(range_present(db, "k", 0, 20), 0);
	CHECK_EQ(range_misses(db, "k", 20, 100, "v1"), 0);
	CHECK(scan_ok(db, 80));
	CHECK_EQ(strata_merge(db, 0, 0, NULL), 0);
	CHECK_EQ(range_present(db, "k", 0, 20), 0);
	CHECK(scan_ok(db, 80));
	db_close(db);
}

/* ---------------------------------------------------------------- older formats */

/** What a replay of the old WAL segment saw. */
struct replay_seen {
	/** Rows replayed. */
	size_t rows;
	/** Rows whose kind was not a put. */
	size_t not_put;
};

static int
replay_count(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n)
{
	struct replay_seen *s = ctx;
	for (size_t i = 0; i < n; i++)
		s->not_put += rows[i].kind != STRATA_ROW_PUT;
	s->rows += n;
	return 0;
}

/** Copy file from to to; 0 or -1. */
static int
copy_file(const char *from, const char *to)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp -R '%s' '%s'", from, to);
	return system(cmd) == 0 ? 0 : -1;
}

TEST(wal_segment_version_2_still_replays)
{
	char *dir = tdir();
	char path[1024];
	snprintf(path, sizeof(path), "%s/00000000000000000001.wal", dir);
	REQUIRE_EQ(copy_file(DATA_DIR "/wal-v2.wal", path), 0);
	struct wal_options wo = {.dir = dir, .sync = STRATA_SYNC_NONE};
	struct replay_seen seen = {0};
	struct wal *w = NULL;
	REQUIRE_EQ(wal_open(&wo, 0, 0, replay_count, &seen, &w), 0);
	CHECK_EQ(seen.rows, 7);
	CHECK_EQ(seen.not_put, 0);
	/* New entries go to a new segment of the new version, next to the old one. */
	strata_row r = {"k", 1, NULL, 0, STRATA_ROW_DELETE};
	struct wal_ticket t;
	REQUIRE_EQ(wal_submit(w, &r, 1, &t), 0);
	REQUIRE_EQ(wal_wait(w, &t), 0);
	CHECK_EQ(t.first_seq, 8);
	wal_close(w);
	seen = (struct replay_seen){0};
	REQUIRE_EQ(wal_open(&wo, 0, 0, replay_count, &seen, &w), 0);
	CHECK_EQ(seen.rows, 8);
	CHECK_EQ(seen.not_put, 1);
	wal_close(w);
}

TEST(run_format_1_is_still_read)
{
	char *dir = tdir();
	char sub[1024];
	snprintf(sub, sizeof(sub), "%s/run", dir);
	REQUIRE(mkdir(sub, 0755) == 0);
	snprintf(sub, sizeof(sub), "%s/run/v1.sst", dir);
	REQUIRE_EQ(copy_file(DATA_DIR "/run-v1.sst", sub), 0);
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_fs_new(dir, &os), 0);
	struct run_meta m;
	CHECK_EQ(run_verify(os, "run/v1.sst", &m), 0);
	CHECK_EQ(m.rows, 300);
	struct run_reader *r = NULL;
	REQUIRE_EQ(run_reader_open(os, "run/v1.sst", &r), 0);
	struct run_iter *it = NULL;
	REQUIRE_EQ(run_iter_new(r, NULL, 0, &it), 0);
	int rows = 0, not_put = 0;
	while (run_iter_next(it) == 1) {
		rows++;
		not_put += run_iter_kind(it) != STRATA_ROW_PUT;
	}
	CHECK_EQ(rows, 300);
	CHECK_EQ(not_put, 0);
	run_iter_free(it);
	void *v = NULL;
	size_t vl = 0;
	uint64_t seq = 0;
	uint32_t kind = 99;
	CHECK_EQ(run_reader_get_kind(r, "key-000297", 10, &seq, &v, &vl, &kind), 0);
	CHECK_EQ(seq, 100);
	CHECK_EQ(kind, STRATA_ROW_PUT);
	free(v);
	run_reader_close(r);
	objstore_destroy(os);
}

TEST(store_written_before_deletes_opens_and_takes_deletes)
{
	char *dir = tdir();
	char store[1024];
	snprintf(store, sizeof(store), "%s/store", dir);
	REQUIRE_EQ(copy_file(DATA_DIR "/store-v1", store), 0);
	strata_options o = opts_for(store);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* The fixture: r00000..r00099 in a run, g00000..g00049 in a generation, w00000..w00019
	 * only in the WAL (see tests/unit/data/README). */
	strata_stats st = stats_of(db);
	CHECK_EQ(st.base_runs, 1);
	CHECK_EQ(st.generations, 1);
	CHECK_EQ(range_misses(db, "r", 0, 100, "old"), 0);
	CHECK_EQ(range_misses(db, "g", 0, 50, "old"), 0);
	CHECK_EQ(range_misses(db, "w", 0, 20, "old"), 0);
	CHECK(scan_ok(db, 170));
	REQUIRE_EQ(del_range(db, "r", 0, 10), 0);
	REQUIRE_EQ(del_range(db, "g", 0, 10), 0);
	REQUIRE_EQ(del_range(db, "w", 0, 10), 0);
	CHECK(scan_ok(db, 140));
	REQUIRE_EQ(strata_merge(db, 0, 0, NULL), 0);
	CHECK_EQ(range_present(db, "r", 0, 10) + range_present(db, "g", 0, 10) +
		 range_present(db, "w", 0, 10), 0);
	CHECK(scan_ok(db, 140));
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
	REQUIRE_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(table_rows(store), 140);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(range_misses(db, "r", 10, 100, "old"), 0);
	CHECK_EQ(range_present(db, "w", 0, 10), 0);
	CHECK(scan_ok(db, 140));
	db_close(db);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	(void)count_objects; /* engine_util.h helpers this file does not need */
	(void)xorshift;
	T(delete_hides_the_key_in_every_layer);
	T(merge_keeps_a_tombstone_while_an_older_run_holds_the_key);
	T(compaction_of_newer_runs_keeps_tombstones_over_the_oldest);
	T(merge_into_an_empty_base_drops_tombstones);
	T(merging_away_every_row_leaves_an_empty_run);
	T(puts_and_deletes_mix_in_one_batch);
	T(acknowledged_deletes_survive_a_crash);
	T(wal_segment_version_2_still_replays);
	T(run_format_1_is_still_read);
	T(store_written_before_deletes_opens_and_takes_deletes);
	return HARNESS_END("test_delete");
}
