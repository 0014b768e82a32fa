/*
 * test_waldir.c — a WAL in a directory of its own (strata_options.wal_dir): the segments
 * go there and nowhere else, the store records the place, a reopen without the option
 * finds it, a reopen naming another place is refused before anything is written, and
 * the WAL directory has one owner like the data directory.
 */
#define ENGINE_UTIL_TAG "waldir"
#include <dirent.h>
#include <sys/stat.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine_util.h"
#pragma GCC diagnostic pop

/** Number of WAL segment files (*.wal) under dir/sub, or -1 when dir/sub is missing. */
static int
segments_in(const char *dir, const char *sub)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	DIR *d = opendir(path);
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (len > 4 && strcmp(de->d_name + len - 4, ".wal") == 0)
			n++;
	}
	closedir(d);
	return n;
}

/** Whether path exists. */
static int
exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

TEST(the_wal_lives_in_wal_dir_and_the_store_remembers_it)
{
	char *data = tdir(), *wal = tdir();
	strata_options o = opts_for(data);
	o.sync = STRATA_SYNC_FSYNC;
	o.wal_dir = wal;
	strata *db = db_open(&o);
	CHECK(db != NULL);
	if (db == NULL)
		return;
	CHECK(put_range(db, "k", 0, 200, "a", 10) == 0);
	CHECK(segments_in(wal, "shard-0000") > 0);
	char path[4096];
	snprintf(path, sizeof(path), "%s/wal", data);
	CHECK(!exists(path)); /* nothing of the WAL in the data directory */
	snprintf(path, sizeof(path), "%s/LOCK", wal);
	CHECK(exists(path));
	db_close(db);

	/* Reopen without the option: the store's record leads to the WAL, and replays it. */
	strata_options r = opts_for(data);
	db = db_open(&r);
	CHECK(db != NULL);
	if (db == NULL)
		return;
	CHECK(range_misses(db, "k", 0, 200, "a") == 0);
	snprintf(path, sizeof(path), "%s/wal", data);
	CHECK(!exists(path));
	db_close(db);

	/* The same place spelled with a trailing slash is the same place. */
	snprintf(path, sizeof(path), "%s/", wal);
	r.wal_dir = path;
	db = db_open(&r);
	CHECK(db != NULL);
	if (db != NULL)
		db_close(db);
}

TEST(another_wal_dir_is_refused_before_anything_is_written)
{
	char *data = tdir(), *wal = tdir(), *other = tdir();
	strata_options o = opts_for(data);
	o.wal_dir = wal;
	strata *db = db_open(&o);
	CHECK(db != NULL);
	if (db == NULL)
		return;
	CHECK(put_range(db, "k", 0, 50, "a", 10) == 0);
	db_close(db);

	o.wal_dir = other;
	strata *bad = NULL;
	int rc = strata_open(&o, &bad);
	CHECK(rc == STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), wal) != NULL);
	CHECK(strstr(strata_last_error(), other) != NULL);
	fprintf(stderr, "  # %s\n", strata_last_error());
	if (rc == 0)
		strata_close(bad);
	CHECK(segments_in(other, "shard-0000") == -1);

	/* A store whose WAL is in <dir>/wal: a wal_dir elsewhere would hide its rows. */
	char *data2 = tdir(), *wal2 = tdir();
	strata_options d = opts_for(data2);
	db = db_open(&d);
	CHECK(db != NULL);
	if (db == NULL)
		return;
	CHECK(put_range(db, "k", 0, 50, "a", 10) == 0);
	db_close(db);
	d.wal_dir = wal2;
	rc = strata_open(&d, &bad);
	CHECK(rc == STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "keeps its WAL in") != NULL);
	if (rc == 0)
		strata_close(bad);
	CHECK(segments_in(wal2, "shard-0000") == -1);
	d.wal_dir = NULL;
	db = db_open(&d);
	CHECK(db != NULL);
	if (db == NULL)
		return;
	CHECK(range_misses(db, "k", 0, 50, "a") == 0);
	db_close(db);
}

TEST(a_wal_dir_has_one_owner)
{
	char *a = tdir(), *b = tdir(), *wal = tdir();
	strata_options o = opts_for(a);
	o.wal_dir = wal;
	strata *db = db_open(&o);
	CHECK(db != NULL);
	if (db == NULL)
		return;
	/* Another store (another data directory) pointed at the same WAL directory. */
	strata_options p = opts_for(b);
	p.wal_dir = wal;
	strata *second = NULL;
	int rc = strata_open(&p, &second);
	CHECK(rc == STRATA_ELOCKED);
	CHECK(strstr(strata_last_error(), "WAL directory") != NULL);
	if (rc == 0)
		strata_close(second);
	CHECK(put_range(db, "k", 0, 20, "a", 5) == 0);
	CHECK(range_misses(db, "k", 0, 20, "a") == 0);
	db_close(db);
	/* Released at close: the first store opens again, and the refused open left its
	 * data directory without a STORE that would claim the WAL directory. */
	db = db_open(&o);
	CHECK(db != NULL);
	if (db != NULL)
		db_close(db);
	char path[4096];
	snprintf(path, sizeof(path), "%s/STORE", b);
	CHECK(!exists(path));
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
	T(the_wal_lives_in_wal_dir_and_the_store_remembers_it);
	T(another_wal_dir_is_refused_before_anything_is_written);
	T(a_wal_dir_has_one_owner);
	return HARNESS_END("test_waldir");
}
