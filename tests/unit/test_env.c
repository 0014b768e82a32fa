/*
 * test_env.c — per-store environments: two stores in one process, one with a table
 * of its own (counting file calls, its own log sink, random source and object-store
 * factory, a failing fdatasync), the other with the process default. Each store's
 * calls, and the threads it starts, must use its own table only.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "harness.h"

/** The libc table, which the custom one forwards to. */
static struct env_ops real;

/** What the custom table saw. */
static struct {
	atomic_long opens, pwrites, fdatasyncs, randoms, objstores, logs;
	/** Make fdatasync fail with EIO. */
	atomic_int fail_sync;
} A;

static int
a_open(const char *path, int flags, mode_t mode)
{
	atomic_fetch_add(&A.opens, 1);
	return real.open(path, flags, mode);
}

static ssize_t
a_pwrite(int fd, const void *b, size_t n, off_t off)
{
	atomic_fetch_add(&A.pwrites, 1);
	return real.pwrite(fd, b, n, off);
}

static int
a_fdatasync(int fd)
{
	atomic_fetch_add(&A.fdatasyncs, 1);
	if (atomic_load(&A.fail_sync)) {
		errno = EIO;
		return -1;
	}
	return real.fdatasync(fd);
}

static uint64_t
a_random(void)
{
	atomic_fetch_add(&A.randoms, 1);
	return 0x9e3779b97f4a7c15ull; /* a fixed draw: every tower has height 1 */
}

static int
a_objstore_new(const char *dir, struct objstore **out)
{
	atomic_fetch_add(&A.objstores, 1);
	return objstore_fs_new(dir, out);
}

static void
a_log(int level, const char *msg)
{
	(void)level;
	(void)msg;
	atomic_fetch_add(&A.logs, 1);
}

/** Calls of the default table made while the test watches it. */
static atomic_long default_pwrites;
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);

static ssize_t
default_counting_pwrite(int fd, const void *b, size_t n, off_t off)
{
	atomic_fetch_add(&default_pwrites, 1);
	return real_pwrite(fd, b, n, off);
}

static struct env_ops table_a;

static strata *
open_store(const char *dir, const struct env_ops *e, int sync)
{
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.sync = sync;
	o.sync_interval_ms = 5;
	o.env_ops = e;
	strata *db = NULL;
	int rc = strata_open(&o, &db);
	if (rc != 0)
		fprintf(stderr, "  strata_open(%s): %s\n", dir, strata_last_error());
	return db;
}

static int
put(strata *db, const char *key)
{
	strata_row r = {key, strlen(key), "v", 1};
	return strata_append(db, 0, &r, 1);
}

TEST(two_stores_use_their_own_environments)
{
	memset(&A, 0, sizeof(A));
	real = env_default;
	table_a = env_default;
	table_a.open = a_open;
	table_a.pwrite = a_pwrite;
	table_a.fdatasync = a_fdatasync;
	table_a.random = a_random;
	table_a.objstore_new = a_objstore_new;
	table_a.log = a_log;
	real_pwrite = env_default.pwrite;
	env_default.pwrite = default_counting_pwrite;

	char *da = harness_tmpdir("env-a"), *db_dir = harness_tmpdir("env-b");
	strata *a = open_store(da, &table_a, STRATA_SYNC_FSYNC);
	strata *b = open_store(db_dir, NULL, STRATA_SYNC_FSYNC);
	REQUIRE(a != NULL && b != NULL);
	CHECK_EQ(atomic_load(&A.objstores), 1);
	CHECK(atomic_load(&A.opens) > 0);
	CHECK(atomic_load(&A.logs) > 0); /* A's open logged through A's sink */

	/* B's work touches nothing of A's table, and A's nothing of the default's. */
	long a_writes = atomic_load(&A.pwrites), a_syncs = atomic_load(&A.fdatasyncs);
	long d_writes = atomic_load(&default_pwrites);
	CHECK_EQ(put(b, "b1"), 0);
	CHECK_EQ(strata_seal(b, 0), 0);
	CHECK_EQ(atomic_load(&A.pwrites), a_writes);
	CHECK_EQ(atomic_load(&A.fdatasyncs), a_syncs);
	CHECK(atomic_load(&default_pwrites) > d_writes);
	d_writes = atomic_load(&default_pwrites);
	CHECK_EQ(put(a, "a1"), 0);
	CHECK_EQ(strata_seal(a, 0), 0);
	CHECK(atomic_load(&A.pwrites) > a_writes);
	CHECK(atomic_load(&A.fdatasyncs) > a_syncs);
	CHECK(atomic_load(&A.randoms) > 0);
	CHECK_EQ(atomic_load(&default_pwrites), d_writes);

	/* A failure of A's environment is A's alone. */
	atomic_store(&A.fail_sync, 1);
	CHECK_EQ(put(a, "a2"), STRATA_EREADONLY);
	CHECK_EQ(put(b, "b2"), 0);
	atomic_store(&A.fail_sync, 0);
	strata_close(a);
	strata_close(b);

	/* A thread the store starts (the WAL's interval sync) runs in the store's table. */
	a = open_store(da, &table_a, STRATA_SYNC_INTERVAL);
	REQUIRE(a != NULL);
	a_syncs = atomic_load(&A.fdatasyncs);
	CHECK_EQ(put(a, "a3"), 0); /* acknowledged after the write; the sync comes later */
	for (int i = 0; i < 2000 && atomic_load(&A.fdatasyncs) == a_syncs; i++)
		usleep(1000);
	CHECK(atomic_load(&A.fdatasyncs) > a_syncs);
	strata_close(a);

	/* And the rows are where they belong. */
	a = open_store(da, &table_a, STRATA_SYNC_FSYNC);
	b = open_store(db_dir, NULL, STRATA_SYNC_FSYNC);
	REQUIRE(a != NULL && b != NULL);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(strata_get(a, 0, "a1", 2, &v, &vl), 0);
	strata_free(v);
	CHECK_EQ(strata_get(a, 0, "a3", 2, &v, &vl), 0);
	strata_free(v);
	CHECK_EQ(strata_get(a, 0, "b1", 2, &v, &vl), STRATA_NOTFOUND);
	CHECK_EQ(strata_get(b, 0, "b2", 2, &v, &vl), 0);
	strata_free(v);
	strata_close(a);
	strata_close(b);
	env_default.pwrite = real_pwrite;
	harness_rmrf(da);
	harness_rmrf(db_dir);
	free(da);
	free(db_dir);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(two_stores_use_their_own_environments);
	return HARNESS_END("test_env");
}
