/*
 * test_sync.c — the WAL's syncs: one fdatasync acknowledges the writers that come back
 * together (a group commit's leader waits briefly for the writers of the previous
 * group); the background IO budget's automatic mode follows the syncs' times; and one
 * thread syncs every shard in STRATA_SYNC_INTERVAL.
 */
#define ENGINE_UTIL_TAG "sync"
#include <pthread.h>
#include <stdatomic.h>
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>

#include "../../node/lib/env.h"
#include "../../node/lib/ratelimit.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine_util.h"
#pragma GCC diagnostic pop

/** fdatasync calls seen, and the real one. */
static atomic_long syncs;
static int (*real_fdatasync)(int fd);

/** A slow disk: every fdatasync takes 10 ms, so writers come back well inside the
 *  5 ms a leader waits for them, even on a loaded machine. */
static int
slow_fdatasync(int fd)
{
	atomic_fetch_add(&syncs, 1);
	struct timespec ts = {0, 10000000};
	nanosleep(&ts, NULL);
	return real_fdatasync(fd);
}

/** One writer: rows appends of one row each to shard 0. */
struct writer {
	strata *db;
	int id, rows, failed;
};

static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	char key[32];
	for (int i = 0; i < w->rows; i++) {
		int kl = snprintf(key, sizeof(key), "w%d-%05d", w->id, i);
		strata_row row = {key, (size_t)kl, "v", 1};
		if (strata_append(w->db, 0, &row, 1) != 0)
			w->failed++;
	}
	return NULL;
}

/** Appends per fdatasync with 4 writers and the given gather bound. */
static double
appends_per_sync(uint32_t wait_us)
{
	strata_options o = opts_for(tdir());
	o.sync = STRATA_SYNC_FSYNC;
	o.group_commit_wait_us = wait_us;
	strata *db = db_open(&o);
	if (db == NULL)
		return 0;
	enum { W = 4, ROWS = 60 };
	struct writer ws[W];
	pthread_t t[W];
	atomic_store(&syncs, 0);
	for (int i = 0; i < W; i++) {
		ws[i] = (struct writer){db, i, ROWS, 0};
		pthread_create(&t[i], NULL, writer_main, &ws[i]);
	}
	int failed = 0;
	for (int i = 0; i < W; i++) {
		pthread_join(t[i], NULL);
		failed += ws[i].failed;
	}
	strata_stats st;
	strata_shard_stats(db, 0, &st);
	db_close(db);
	CHECK_EQ(failed, 0);
	CHECK_EQ(st.appends, W * ROWS);
	return st.wal_syncs ? (double)st.appends / (double)st.wal_syncs : 0;
}

TEST(one_sync_carries_the_writers_that_come_back_together)
{
	real_fdatasync = env_default.fdatasync;
	env_default.fdatasync = slow_fdatasync;
	double gathered = appends_per_sync(20000);
	double plain = appends_per_sync(0);
	env_default.fdatasync = real_fdatasync;
	fprintf(stderr, "  # 4 writers, 10 ms syncs: %.2f appends per sync gathering, %.2f without\n",
		gathered, plain);
	/* Without gathering the first writer back leads alone and the others wait for the
	 * next sync (groups of 1 and 3); gathering makes every group carry all four. */
	CHECK(gathered >= 3.0);
	CHECK(gathered > plain);
}

/** A slower disk for the IO budget's test: 5 ms per fdatasync. */
static int
slower_fdatasync(int fd)
{
	atomic_fetch_add(&syncs, 1);
	struct timespec ts = {0, 5000000};
	nanosleep(&ts, NULL);
	return real_fdatasync(fd);
}

/** Append n single rows to shard 0 of db from this thread. */
static void
append_n(strata *db, int n, const char *tag)
{
	char key[32];
	for (int i = 0; i < n; i++) {
		int kl = snprintf(key, sizeof(key), "%s-%05d", tag, i);
		strata_row row = {key, (size_t)kl, "v", 1};
		REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
	}
}

/** A fast disk for the IO budget's test: fdatasync returns at once (this test checks the
 *  budget's reaction, not durability; the machine's own syncs vary too much under load). */
static int
instant_fdatasync(int fd)
{
	(void)fd;
	atomic_fetch_add(&syncs, 1);
	return 0;
}

TEST(the_automatic_io_budget_follows_the_wals_syncs)
{
	real_fdatasync = env_default.fdatasync;
	env_default.fdatasync = instant_fdatasync;
	strata_options o = opts_for(tdir());
	o.sync = STRATA_SYNC_FSYNC;
	o.background_io_auto = 1;
	o.background_io_bytes_per_s = 256ull << 20; /* the ceiling */
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	strata_stats st;
	strata_shard_stats(db, 0, &st);
	CHECK_EQ(st.background_io_bytes_per_s, 256ull << 20);
	append_n(db, 40, "fast"); /* the baseline */
	env_default.fdatasync = slower_fdatasync;
	append_n(db, 40, "slow"); /* 5 ms syncs: the budget halves per window of 8 */
	env_default.fdatasync = instant_fdatasync;
	strata_shard_stats(db, 0, &st);
	uint64_t low = st.background_io_bytes_per_s;
	CHECK(st.background_io_stalls >= 1); /* 5 ms syncs against instant ones: stalls */
	CHECK(low <= (256ull << 20) / 8);
	CHECK(low >= 4ull << 20); /* the floor */
	usleep((RATELIMIT_AUTO_HOLD_NS + 20000000) / 1000); /* past the hold of the last stall */
	append_n(db, 200, "again"); /* fast again: it climbs back */
	strata_shard_stats(db, 0, &st);
	CHECK(st.background_io_bytes_per_s > low);
	fprintf(stderr, "  # budget: 256 MiB/s, %.1f MiB/s after slow syncs, %.1f MiB/s after fast ones\n",
		(double)low / 1048576.0, (double)st.background_io_bytes_per_s / 1048576.0);
	db_close(db);
	env_default.fdatasync = real_fdatasync;
}

TEST(a_policy_turns_the_automatic_budget_on_with_auto)
{
	char *dir = tdir();
	char path[4200];
	snprintf(path, sizeof(path), "%s/p.lua", dir);
	FILE *f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs("return { background_io_mib_per_s = \"auto\" }\n", f);
	fclose(f);
	strata_options o = opts_for(dir);
	o.policy = path;
	o.background_io_bytes_per_s = 64ull << 20;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	strata_stats st;
	strata_shard_stats(db, 0, &st);
	CHECK_EQ(st.background_io_bytes_per_s, 64ull << 20); /* auto, at its ceiling */
	char err[512] = "";
	const char *bad = "return { background_io_mib_per_s = \"fast\" }";
	CHECK(strata_set_policy(db, bad, strlen(bad)) != 0);
	snprintf(err, sizeof(err), "%s", strata_last_error());
	CHECK(strstr(err, "background_io_mib_per_s must be a number or \"auto\"") != NULL);
	const char *eight = "return { background_io_mib_per_s = 8 }";
	CHECK_EQ(strata_set_policy(db, eight, strlen(eight)), 0);
	strata_shard_stats(db, 0, &st);
	CHECK_EQ(st.background_io_bytes_per_s, 8ull << 20);
	db_close(db);
}

/** Threads of this process (/proc/self/status). */
static long
thread_count(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long n = -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "Threads:", 8) == 0)
			n = atol(line + 8);
	if (f != NULL)
		fclose(f);
	return n;
}

TEST(one_thread_syncs_every_shard_in_interval_mode)
{
	strata_options o = opts_for(tdir());
	o.shards = 64;
	o.sync = STRATA_SYNC_INTERVAL;
	o.sync_interval_ms = 5;
	long before = thread_count();
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(thread_count() - before, 1); /* one syncer, not one per shard */
	strata_row row = {"k", 1, "v", 1};
	for (uint32_t sh = 0; sh < 64; sh++)
		REQUIRE_EQ(strata_append(db, sh, &row, 1), 0);
	int synced = 0;
	for (int tries = 0; tries < 400 && synced < 64; tries++) {
		usleep(5000);
		synced = 0;
		for (uint32_t sh = 0; sh < 64; sh++) {
			strata_stats st;
			strata_shard_stats(db, sh, &st);
			synced += st.wal_syncs > 0;
		}
	}
	CHECK_EQ(synced, 64); /* every shard's written WAL got its background sync */
	db_close(db);
	CHECK_EQ(thread_count(), before);
}

/** Descriptors this process holds. */
static int
fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	while (d != NULL && readdir(d) != NULL)
		n++;
	if (d != NULL)
		closedir(d);
	return n - 3; /* ".", ".." and opendir's own */
}

TEST(many_shards_share_a_budget_of_open_wal_files)
{
	strata_options o = opts_for(tdir());
	o.shards = 300;
	o.max_open_wal_files = 16;
	int before = fd_count();
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	int held = fd_count() - before;
	CHECK(held <= 16 + 4); /* the budget, the LOCK file and the object store's */
	/* Every shard appends (reopening what the budget closed), twice, and reads back. */
	char key[32];
	for (int round = 0; round < 2; round++)
		for (uint32_t sh = 0; sh < 300; sh++) {
			int kl = snprintf(key, sizeof(key), "r%d-s%u", round, sh);
			strata_row row = {key, (size_t)kl, "v", 1};
			REQUIRE_EQ(strata_append(db, sh, &row, 1), 0);
		}
	CHECK(fd_count() - before <= 16 + 4);
	db_close(db);
	CHECK_EQ(fd_count(), before);
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (uint32_t sh = 0; sh < 300; sh += 37) {
		void *v = NULL;
		size_t vl = 0;
		int kl = snprintf(key, sizeof(key), "r1-s%u", sh);
		CHECK_EQ(strata_get(db, sh, key, (size_t)kl, &v, &vl), 0);
		strata_free(v);
	}
	db_close(db);
	/* Without a budget, a process limit below the shard count is a clear error. */
	struct rlimit old, low;
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = (rlim_t)(before + 100);
	setrlimit(RLIMIT_NOFILE, &low);
	strata_options u = o;
	u.max_open_wal_files = 0;
	strata *none = NULL;
	int rc = strata_open(&u, &none);
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK(rc != 0);
	CHECK(strstr(strata_last_error(), "ulimit -n") != NULL);
	fprintf(stderr, "  # without a budget, under a limit of %d: %s\n", before + 100, strata_last_error());
	if (rc == 0)
		strata_close(none);
}

/** Threads seen opening files, while counting (thread ids, at most 64 kept). */
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t seen[64];
static int nseen;
static int (*real_open)(const char *path, int flags, mode_t mode);

static int
seeing_open(const char *path, int flags, mode_t mode)
{
	pthread_t me = pthread_self();
	pthread_mutex_lock(&seen_mu);
	int known = 0;
	for (int i = 0; i < nseen && !known; i++)
		known = pthread_equal(seen[i], me);
	if (!known && nseen < 64)
		seen[nseen++] = me;
	pthread_mutex_unlock(&seen_mu);
	return real_open(path, flags, mode);
}

/** Open o through an environment that counts the threads opening files. */
static int
threads_opening(strata_options o, strata **db)
{
	static struct env_ops e;
	e = env_default;
	real_open = env_default.open;
	e.open = seeing_open;
	o.env_ops = &e;
	nseen = 0;
	return strata_open(&o, db);
}

TEST(interval_mode_stays_in_the_wal_file_budget_when_every_shard_is_dirty)
{
	strata_options o = opts_for(tdir());
	o.shards = 300;
	o.max_open_wal_files = 16;
	o.sync = STRATA_SYNC_INTERVAL;
	o.sync_interval_ms = 60000; /* nothing syncs by the clock during the test */
	int before = fd_count();
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	char key[32];
	int most = 0;
	for (uint32_t sh = 0; sh < 300; sh++) {
		int kl = snprintf(key, sizeof(key), "s%u", sh);
		strata_row row = {key, (size_t)kl, "v", 1};
		REQUIRE_EQ(strata_append(db, sh, &row, 1), 0);
		int held = fd_count() - before;
		most = held > most ? held : most;
	}
	CHECK(most <= 16 + 4);
	fprintf(stderr, "  # 300 dirty shards, budget 16: at most %d descriptors\n", most);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (uint32_t sh = 0; sh < 300; sh++) {
		void *v = NULL;
		size_t vl = 0;
		int kl = snprintf(key, sizeof(key), "s%u", sh);
		CHECK_EQ(strata_get(db, sh, key, (size_t)kl, &v, &vl), 0);
		strata_free(v);
	}
	db_close(db);
}

TEST(shards_open_on_many_threads_and_the_lowest_failure_is_reported)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	o.shards = 64;
	o.sync = STRATA_SYNC_FSYNC;
	o.open_threads = 8;
	strata *db = NULL;
	REQUIRE_EQ(threads_opening(o, &db), 0);
	CHECK(nseen > 1 && nseen <= 8);
	fprintf(stderr, "  # 64 shards opened by %d threads\n", nseen);
	char key[32];
	for (uint32_t sh = 0; sh < 64; sh++) {
		int kl = snprintf(key, sizeof(key), "s%u", sh);
		strata_row row = {key, (size_t)kl, "v", 1};
		REQUIRE_EQ(strata_append(db, sh, &row, 1), 0);
	}
	strata_close(db);
	/* One thread when asked for one. */
	o.open_threads = 1;
	REQUIRE_EQ(threads_opening(o, &db), 0);
	CHECK_EQ(nseen, 1);
	strata_close(db);
	/* Two damaged shards: the open fails naming the lower one, and leaves nothing open. */
	o.open_threads = 8;
	char path[4096], saved[2][4096];
	int bad[2] = {50, 37};
	for (int i = 0; i < 2; i++) {
		char mdir[1024], newest[256] = "";
		snprintf(mdir, sizeof(mdir), "%s/objects/shard-%04d/manifest", dir, bad[i]);
		DIR *d = opendir(mdir);
		REQUIRE(d != NULL);
		struct dirent *de;
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.' && strcmp(de->d_name, "snap") != 0 && /* snapshots */
			    strcmp(de->d_name, newest) > 0)
				snprintf(newest, sizeof(newest), "%s", de->d_name);
		closedir(d);
		snprintf(path, sizeof(path), "%s/%s", mdir, newest);
		snprintf(saved[i], sizeof(saved[i]), "%s/%s.saved", mdir, newest);
		REQUIRE_EQ(rename(path, saved[i]), 0);
		FILE *f = fopen(path, "w");
		REQUIRE(f != NULL);
		fputs("not a manifest", f);
		fclose(f);
	}
	int before = fd_count();
	int rc = threads_opening(o, &db);
	CHECK_EQ(rc, STRATA_ECORRUPT);
	CHECK(strstr(strata_last_error(), "shard-0037") != NULL);
	fprintf(stderr, "  # %s\n", strata_last_error());
	CHECK_EQ(fd_count(), before);
	for (int i = 0; i < 2; i++) {
		char orig[4096];
		snprintf(orig, sizeof(orig), "%.*s", (int)(strlen(saved[i]) - 6), saved[i]);
		REQUIRE_EQ(rename(saved[i], orig), 0);
	}
	REQUIRE_EQ(threads_opening(o, &db), 0);
	for (uint32_t sh = 0; sh < 64; sh++) {
		void *v = NULL;
		size_t vl = 0;
		int kl = snprintf(key, sizeof(key), "s%u", sh);
		CHECK_EQ(strata_get(db, sh, key, (size_t)kl, &v, &vl), 0);
		strata_free(v);
	}
	strata_close(db);
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
	T(one_sync_carries_the_writers_that_come_back_together);
	T(the_automatic_io_budget_follows_the_wals_syncs);
	T(a_policy_turns_the_automatic_budget_on_with_auto);
	T(one_thread_syncs_every_shard_in_interval_mode);
	T(many_shards_share_a_budget_of_open_wal_files);
	T(interval_mode_stays_in_the_wal_file_budget_when_every_shard_is_dirty);
	T(shards_open_on_many_threads_and_the_lowest_failure_is_reported);
	return HARNESS_END("test_sync");
}
