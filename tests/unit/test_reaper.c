/*
 * test_reaper.c — deletes of merged objects are background work: a reader that
 * lets go of the last reference and a commit only queue them; the host's background
 * executor (or, without one, the next seal or merge) runs them, paced, large files
 * cut down in chunks first, several per directory sync.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../node/core/reaper.h"
#include "../../node/core/store.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "harness.h"

/** unlink calls of the calling thread, and of all threads, on .sst objects. */
static __thread long my_unlinks;
static atomic_long all_unlinks, all_truncates, dir_syncs;
static int (*real_unlink)(const char *);
static int (*real_ftruncate)(int, off_t);
static int (*real_fsync)(int);

static int
counting_unlink(const char *path)
{
	if (strstr(path, ".sst") != NULL) {
		my_unlinks++;
		atomic_fetch_add(&all_unlinks, 1);
	}
	return real_unlink(path);
}

static int
counting_ftruncate(int fd, off_t len)
{
	atomic_fetch_add(&all_truncates, 1);
	return real_ftruncate(fd, len);
}

static int
counting_fsync(int fd)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
		atomic_fetch_add(&dir_syncs, 1);
	return real_fsync(fd);
}

static void
counting_on(void)
{
	real_unlink = env_default.unlink;
	real_ftruncate = env_default.ftruncate;
	real_fsync = env_default.fsync;
	env_default.unlink = counting_unlink;
	env_default.ftruncate = counting_ftruncate;
	env_default.fsync = counting_fsync;
	atomic_store(&all_unlinks, 0);
	atomic_store(&all_truncates, 0);
	atomic_store(&dir_syncs, 0);
	my_unlinks = 0;
}

static void
counting_off(void)
{
	env_default.unlink = real_unlink;
	env_default.ftruncate = real_ftruncate;
	env_default.fsync = real_fsync;
}

/** n generations of rows rows each: short text values, or (value_bytes > 0) random,
 *  incompressible values of value_bytes. */
static int
gens_of(strata *db, int n, int rows, size_t value_bytes)
{
	static char val[64 << 10];
	unsigned seed = 7;
	if (value_bytes > sizeof(val))
		return -1;
	for (int g = 0; g < n; g++) {
		for (int i = 0; i < rows; i++) {
			char key[32];
			size_t vl = value_bytes;
			snprintf(key, sizeof(key), "k%03d-%05d", g, i);
			if (vl == 0)
				vl = (size_t)snprintf(val, sizeof(val), "value of generation %d row %d", g, i);
			else
				for (size_t j = 0; j < vl; j++)
					val[j] = (char)(rand_r(&seed) >> 7);
			strata_row r = {key, strlen(key), val, vl};
			if (strata_append(db, 0, &r, 1) != 0)
				return -1;
		}
		if (strata_seal(db, 0) != 0)
			return -1;
	}
	return 0;
}

static int
gens(strata *db, int n, int rows)
{
	return gens_of(db, n, rows, 0);
}

/** The pinned scan: blocks in its first callback until released. */
static struct {
	strata *db;
	atomic_int in_scan, release;
	long unlinks;
	int rows, rc;
} S;

static int
scan_cb(void *ctx, const strata_row *row)
{
	(void)ctx;
	(void)row;
	if (S.rows++ == 0) {
		atomic_store(&S.in_scan, 1);
		while (!atomic_load(&S.release))
			usleep(1000);
	}
	return 0;
}

static void *
scan_main(void *arg)
{
	(void)arg;
	S.rc = strata_scan(S.db, 0, NULL, 0, NULL, 0, scan_cb, NULL);
	S.unlinks = my_unlinks;
	return NULL;
}

static long
count_gen_files(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "ls %s/objects/shard-0000/gen 2>/dev/null | grep -c sst", dir);
	FILE *f = popen(cmd, "r");
	long n = -1;
	if (f != NULL && fscanf(f, "%ld", &n) != 1)
		n = -1;
	if (f != NULL)
		pclose(f);
	return n;
}

TEST(a_pinned_scan_and_a_commit_delete_nothing_themselves)
{
	char *dir = harness_tmpdir("reaper");
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.sync = STRATA_SYNC_FSYNC; /* the batch's directory sync is counted (none syncs nothing) */
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(gens(db, 4, 200), 0);
	counting_on();
	memset(&S, 0, sizeof(S));
	S.db = db;
	pthread_t t;
	REQUIRE_EQ(pthread_create(&t, NULL, scan_main, NULL), 0);
	while (!atomic_load(&S.in_scan))
		usleep(1000);
	/* A merge commits while the scan holds the old view (and so the generations). */
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_merge(db, 0, 0, &plan), 0);
	CHECK_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(my_unlinks, 0); /* the commit deleted nothing */
	atomic_store(&S.release, 1);
	pthread_join(t, NULL);
	CHECK_EQ(S.rc, 0);
	CHECK_EQ(S.unlinks, 0); /* the scan let go of the last references: it deleted nothing */
	uint64_t pending = 0;
	store_reaper_stats(strata_store(db), &pending, NULL, NULL, NULL);
	CHECK_EQ(pending, 4);
	CHECK_EQ(count_gen_files(dir), 4);
	/* With no background thread, the next call that does background work deletes them,
	 * in one batch: one directory sync for the four. */
	long syncs = atomic_load(&dir_syncs);
	CHECK_EQ(strata_seal(db, 0), 0);
	CHECK_EQ(my_unlinks, 4);
	CHECK_EQ(count_gen_files(dir), 0);
	CHECK_EQ(atomic_load(&dir_syncs) - syncs, 1);
	counting_off();
	strata_close(db);
	harness_rmrf(dir);
	free(dir);
}

TEST(with_a_runtime_the_background_executor_deletes)
{
	char *dir = harness_tmpdir("reaper");
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.sync = STRATA_SYNC_NONE;
	o.policy = ""; /* a host with a background executor, and the runtime that drives it */
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(gens(db, 3, 100), 0);
	counting_on();
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 3);
	CHECK_EQ(my_unlinks, 0); /* not the caller's thread */
	for (int i = 0; i < 5000 && count_gen_files(dir) != 0; i++)
		usleep(1000);
	CHECK_EQ(count_gen_files(dir), 0);
	CHECK_EQ(atomic_load(&all_unlinks), 3);
	CHECK_EQ(my_unlinks, 0);
	strata_close(db); /* its jobs end before the seams change back */
	counting_off();
	harness_rmrf(dir);
	free(dir);
}

TEST(a_threaded_handle_without_a_policy_deletes_on_its_background_executor)
{
	char *dir = harness_tmpdir("reaper");
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.sync = STRATA_SYNC_NONE;
	o.threads = 1; /* a background executor, and no runtime to drive it */
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(gens(db, 3, 100), 0);
	counting_on();
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_merge(db, 0, 0, &plan), 0);
	CHECK_EQ(strata_commit_merge(db, plan), 0);
	/* Nothing else is called: the executor deletes the three on its own. */
	for (int i = 0; i < 5000 && count_gen_files(dir) != 0; i++)
		usleep(1000);
	CHECK_EQ(count_gen_files(dir), 0);
	CHECK_EQ(atomic_load(&all_unlinks), 3);
	CHECK_EQ(my_unlinks, 0);
	/* strata_merge as well returns without deleting on the caller's thread. */
	REQUIRE_EQ(gens(db, 2, 100), 0);
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);
	for (int i = 0; i < 5000 && count_gen_files(dir) != 0; i++)
		usleep(1000);
	CHECK_EQ(count_gen_files(dir), 0);
	CHECK_EQ(my_unlinks, 0);
	strata_close(db);
	counting_off();
	harness_rmrf(dir);
	free(dir);
}

/** Write an object of n bytes through the fs store. */
static int
put_object(struct objstore *os, const char *key, size_t n)
{
	char *b = calloc(1, n);
	int rc = b ? objstore_put(os, key, b, n) : -1;
	free(b);
	return rc;
}

TEST(deletes_are_paced_and_large_objects_freed_in_chunks)
{
	char *dir = harness_tmpdir("reaper");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_fs_new(dir, &os), 0);
	/* 8 MiB/s, 1 MiB chunks: the bucket holds one chunk, no second's worth of burst. */
	struct reaper *r = NULL;
	REQUIRE_EQ(reaper_new(os, 8u << 20, 1u << 20, &r), 0);
	REQUIRE_EQ(put_object(os, "a/big.sst", 3u << 20), 0);
	for (int i = 0; i < 3; i++) {
		char key[32];
		snprintf(key, sizeof(key), "a/small-%d.sst", i);
		REQUIRE_EQ(put_object(os, key, 1u << 20), 0);
	}
	counting_on();
	reaper_add(r, "a/big.sst", 3u << 20);
	for (int i = 0; i < 3; i++) {
		char key[32];
		snprintf(key, sizeof(key), "a/small-%d.sst", i);
		reaper_add(r, key, 1u << 20);
	}
	/* 6 MiB to free, 1 MiB in the bucket: the rest takes 5/8 of a second. */
	uint64_t t0 = env.mono_ns();
	CHECK_EQ(reaper_run(r, 0), 4); /* no waiting: one chunk only */
	CHECK_EQ(atomic_load(&all_truncates), 1); /* 3 MiB -> 2 */
	CHECK_EQ(atomic_load(&all_unlinks), 0);
	CHECK_EQ(reaper_run(r, 5000000000ull), 0);
	uint64_t took = env.mono_ns() - t0;
	CHECK(took >= 560000000ull);
	CHECK_EQ(atomic_load(&all_truncates), 2); /* 3 MiB -> 2 -> 1, then deleted whole */
	CHECK_EQ(atomic_load(&all_unlinks), 4);
	uint64_t deleted = 0, bytes = 0;
	reaper_stats(r, NULL, NULL, &deleted, &bytes);
	CHECK_EQ(deleted, 4);
	CHECK_EQ(bytes, 6u << 20);
	counting_off();
	reaper_delete(r);
	objstore_destroy(os);
	harness_rmrf(dir);
	free(dir);
}

TEST(an_object_larger_than_the_bucket_on_a_store_that_cannot_cut_it_is_deleted_and_paced)
{
	char *dir = harness_tmpdir("reaper");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_fs_new(dir, &os), 0);
	/* An object store's ops: no shrink, so a 6 MiB object goes in one delete. */
	struct objstore_ops ops = *os->ops;
	ops.shrink = NULL;
	const struct objstore_ops *fs_ops = os->ops;
	os->ops = &ops;
	/* 4 MiB/s: the object is larger than a second's worth, and than the bucket. */
	struct reaper *r = NULL;
	REQUIRE_EQ(reaper_new(os, 4u << 20, 1u << 20, &r), 0);
	REQUIRE_EQ(put_object(os, "a/run.sst", 6u << 20), 0);
	REQUIRE_EQ(put_object(os, "a/next.sst", 1u << 10), 0);
	counting_on();
	reaper_add(r, "a/run.sst", 6u << 20);
	/* It is not left waiting for tokens the bucket can never hold. */
	CHECK_EQ(reaper_run(r, 2000000000ull), 0);
	CHECK_EQ(atomic_load(&all_unlinks), 1);
	CHECK_EQ(atomic_load(&all_truncates), 0);
	/* Its 5 MiB over the bucket are owed: the next delete waits for them. */
	reaper_add(r, "a/next.sst", 1u << 10);
	CHECK_EQ(reaper_run(r, 0), 1);
	CHECK_EQ(atomic_load(&all_unlinks), 1);
	CHECK_EQ(reaper_run(r, 3000000000ull), 0);
	CHECK_EQ(atomic_load(&all_unlinks), 2);
	counting_off();
	reaper_delete(r);
	os->ops = fs_ops;
	objstore_destroy(os);
	harness_rmrf(dir);
	free(dir);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

TEST(a_close_does_not_wait_out_the_pace_of_the_deletes_and_leaves_none)
{
	char *dir = harness_tmpdir("reaper");
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.sync = STRATA_SYNC_NONE;
	o.threads = 1;
	o.delete_bytes_per_s = 64u << 10; /* 12 MiB queued: over a minute at this pace */
	o.delete_chunk_bytes = 8u << 20;  /* a bucket that holds one whole generation */
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(gens_of(db, 3, 64, 64u << 10), 0); /* 3 x 4 MiB */
	uint32_t merged = 0;
	REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 3);
	/* The executor's job deletes what the bucket holds, then waits for tokens. */
	for (int i = 0; i < 5000 && count_gen_files(dir) == 3; i++)
		usleep(1000);
	CHECK(count_gen_files(dir) < 3);
	usleep(100000);
	CHECK(count_gen_files(dir) > 0);
	uint64_t t0 = now_ms();
	strata_close(db);
	uint64_t took = now_ms() - t0;
	CHECK(took < 10000); /* the paced rest would take over 60 s */
	CHECK_EQ(count_gen_files(dir), 0);
	harness_rmrf(dir);
	free(dir);
}

/** Sum over the store's generation files of the cuts the reaper makes before it unlinks
 *  each one in steps of chunk: ceil(size / chunk) - 1. */
static long
cuts_of_gen_files(const char *dir, uint64_t chunk)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/objects/shard-0000/gen", dir);
	DIR *d = opendir(path);
	long cuts = 0;
	struct dirent *de;
	while (d != NULL && (de = readdir(d)) != NULL) {
		char f[900];
		struct stat st;
		if (strstr(de->d_name, ".sst") == NULL)
			continue;
		snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
		if (stat(f, &st) == 0 && st.st_size > 0)
			cuts += (long)(((uint64_t)st.st_size + chunk - 1) / chunk) - 1;
	}
	if (d != NULL)
		closedir(d);
	return cuts;
}

TEST(merged_objects_are_cut_down_in_delete_chunk_bytes_steps)
{
	/* The store's option reaches its reaper: 3 generations of about 2 MiB, cut down in
	 * 256 KiB steps, then by the default 1 MiB. */
	const uint64_t chunks[] = {256u << 10, 0};
	for (int c = 0; c < 2; c++) {
		char *dir = harness_tmpdir("reaper");
		strata_options o;
		strata_options_init(&o);
		o.dir = dir;
		o.sync = STRATA_SYNC_NONE;
		o.threads = 1;
		o.delete_bytes_per_s = 0;
		o.delete_chunk_bytes = chunks[c];
		uint64_t step = chunks[c] != 0 ? chunks[c] : REAPER_CHUNK_DEFAULT;
		strata *db = NULL;
		REQUIRE_EQ(strata_open(&o, &db), 0);
		REQUIRE_EQ(gens_of(db, 3, 32, 64u << 10), 0); /* 3 x 2 MiB, incompressible */
		long want = cuts_of_gen_files(dir, step);
		CHECK(want >= 3 * (c == 0 ? 7 : 1));
		counting_on();
		uint32_t merged = 0;
		REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
		CHECK_EQ(merged, 3);
		strata_close(db);
		CHECK_EQ(atomic_load(&all_truncates), want);
		CHECK_EQ(count_gen_files(dir), 0);
		counting_off();
		harness_rmrf(dir);
		free(dir);
	}
}

static struct {
	struct reaper *r;
	atomic_int done;
	uint64_t left;
} W;

static void *
waiting_runner(void *arg)
{
	(void)arg;
	W.left = reaper_run(W.r, UINT64_MAX);
	atomic_store(&W.done, 1);
	return NULL;
}

TEST(a_runner_waiting_for_tokens_goes_on_when_the_rate_changes)
{
	char *dir = harness_tmpdir("reaper");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_fs_new(dir, &os), 0);
	/* 1 KiB/s, a bucket of 1 MiB: the second object is a thousand seconds away. */
	REQUIRE_EQ(reaper_new(os, 1u << 10, 1u << 20, &W.r), 0);
	REQUIRE_EQ(put_object(os, "a/one.sst", 1u << 20), 0);
	REQUIRE_EQ(put_object(os, "a/two.sst", 1u << 20), 0);
	counting_on();
	reaper_add(W.r, "a/one.sst", 1u << 20);
	reaper_add(W.r, "a/two.sst", 1u << 20);
	pthread_t t;
	REQUIRE_EQ(pthread_create(&t, NULL, waiting_runner, NULL), 0);
	for (int i = 0; i < 5000 && atomic_load(&all_unlinks) < 1; i++)
		usleep(1000);
	usleep(50000);
	CHECK_EQ(atomic_load(&all_unlinks), 1);
	CHECK_EQ(atomic_load(&W.done), 0);
	reaper_set_rate(W.r, 0);
	for (int i = 0; i < 5000 && !atomic_load(&W.done); i++)
		usleep(1000);
	/* Not done: the runner sleeps on; it is left to the exit rather than freed under it. */
	REQUIRE_EQ(atomic_load(&W.done), 1);
	pthread_join(t, NULL);
	CHECK_EQ(W.left, 0);
	CHECK_EQ(atomic_load(&all_unlinks), 2);
	counting_off();
	reaper_delete(W.r);
	objstore_destroy(os);
	harness_rmrf(dir);
	free(dir);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(a_pinned_scan_and_a_commit_delete_nothing_themselves);
	RUN(with_a_runtime_the_background_executor_deletes);
	RUN(a_threaded_handle_without_a_policy_deletes_on_its_background_executor);
	RUN(deletes_are_paced_and_large_objects_freed_in_chunks);
	RUN(merged_objects_are_cut_down_in_delete_chunk_bytes_steps);
	RUN(an_object_larger_than_the_bucket_on_a_store_that_cannot_cut_it_is_deleted_and_paced);
	RUN(a_close_does_not_wait_out_the_pace_of_the_deletes_and_leaves_none);
	RUN(a_runner_waiting_for_tokens_goes_on_when_the_rate_changes);
	return HARNESS_END("test_reaper");
}
