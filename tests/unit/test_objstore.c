/* test_objstore.c — the local-directory object store (node/objstore/fs.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"

#ifndef TEST
#define TEST(name) static void name(void)
#endif

/** A store in a fresh temp dir. */
struct fixture {
	/** The temp dir. */
	char *dir;
	/** The store rooted at dir. */
	struct objstore *os;
};

static int
fx_open(struct fixture *fx)
{
	fx->dir = harness_tmpdir("objstore");
	if (fx->dir == NULL)
		return -1;
	char root[600];
	snprintf(root, sizeof(root), "%s/objects", fx->dir);
	return objstore_fs_new(root, &fx->os);
}

static void
fx_close(struct fixture *fx)
{
	env_reset();
	objstore_destroy(fx->os);
	if (fx->dir) {
		harness_rmrf(fx->dir);
		free(fx->dir);
	}
}

/** Number of regular files anywhere under path (temp files included). */
static int
count_files(const char *path)
{
	DIR *d = opendir(path);
	if (d == NULL)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char p[1024];
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		struct stat st;
		if (lstat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			n += count_files(p);
		else
			n++;
	}
	closedir(d);
	return n;
}

static int
root_files(struct fixture *fx)
{
	char root[600];
	snprintf(root, sizeof(root), "%s/objects", fx->dir);
	return count_files(root);
}

/** Keys and sizes seen by list, joined as "key=size;". */
struct seen {
	/** The joined listing. */
	char text[4096];
	/** Callbacks made. */
	int n;
	/** Stop (return this) after this many callbacks; 0 = never. */
	int stop_after;
};

static int
seen_cb(void *ctx, const char *key, uint64_t size)
{
	struct seen *s = ctx;
	size_t l = strlen(s->text);
	snprintf(s->text + l, sizeof(s->text) - l, "%s=%llu;", key, (unsigned long long)size);
	s->n++;
	if (s->stop_after && s->n >= s->stop_after)
		return 42;
	return 0;
}

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
	buf_destroy(&b);
	return ok;
}

TEST(put_get_size_overwrite_roundtrip)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	CHECK(strncmp(fx.os->name, "fs:", 3) == 0 && strstr(fx.os->name, "/objects") != NULL);
	CHECK_EQ(put_str(fx.os, "a/b/c", "hello"), 0);
	CHECK(get_eq(fx.os, "a/b/c", "hello"));
	uint64_t sz = 0;
	CHECK_EQ(objstore_size(fx.os, "a/b/c", &sz), 0);
	CHECK_EQ(sz, 5);
	CHECK_EQ(put_str(fx.os, "a/b/c", "goodbye!"), 0);
	CHECK(get_eq(fx.os, "a/b/c", "goodbye!"));
	CHECK_EQ(objstore_put(fx.os, "empty", "", 0), 0);
	CHECK(get_eq(fx.os, "empty", ""));
	/* get appends to what the buffer holds. */
	struct buf b = {0};
	buf_append(&b, "xy", 2);
	CHECK_EQ(objstore_get(fx.os, "a/b/c", &b), 0);
	CHECK(b.len == 10 && memcmp(b.data, "xygoodbye!", 10) == 0);
	buf_destroy(&b);
	CHECK_EQ(root_files(&fx), 2);
	fx_close(&fx);
}

TEST(get_range_reads_slices_short_at_end)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	REQUIRE_EQ(put_str(fx.os, "r", "0123456789"), 0);
	char dst[16];
	size_t got = 99;
	CHECK_EQ(objstore_get_range(fx.os, "r", 3, 4, dst, &got), 0);
	CHECK(got == 4 && memcmp(dst, "3456", 4) == 0);
	CHECK_EQ(objstore_get_range(fx.os, "r", 8, 10, dst, &got), 0);
	CHECK(got == 2 && memcmp(dst, "89", 2) == 0);
	CHECK_EQ(objstore_get_range(fx.os, "r", 10, 4, dst, &got), 0);
	CHECK_EQ(got, 0);
	CHECK_EQ(objstore_get_range(fx.os, "r", 1000, 4, dst, &got), 0);
	CHECK_EQ(got, 0);
	fx_close(&fx);
}

TEST(ranged_reads_reuse_descriptors_and_see_replacements)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	REQUIRE_EQ(objstore_fs_set_read_fds(fx.os, 2), 0);
	REQUIRE_EQ(put_str(fx.os, "a", "aaaa"), 0);
	REQUIRE_EQ(put_str(fx.os, "b", "bbbb"), 0);
	REQUIRE_EQ(put_str(fx.os, "c", "cccc"), 0);
	char dst[16];
	size_t got = 0;
	for (int i = 0; i < 10; i++)
		REQUIRE_EQ(objstore_get_range(fx.os, "a", 0, 4, dst, &got), 0);
	unsigned open = 0;
	uint64_t hits = 0, misses = 0;
	objstore_fs_read_fd_stats(fx.os, &open, &hits, &misses);
	CHECK_EQ(misses, 1); /* opened once */
	CHECK_EQ(hits, 9);
	CHECK_EQ(open, 1);
	/* A replaced object is read anew, never through the old file's descriptor. */
	REQUIRE_EQ(put_str(fx.os, "a", "AAAAAA"), 0);
	CHECK_EQ(objstore_get_range(fx.os, "a", 0, 16, dst, &got), 0);
	CHECK(got == 6 && memcmp(dst, "AAAAAA", 6) == 0);
	/* Bounded: a third object evicts the least recently used. */
	CHECK_EQ(objstore_get_range(fx.os, "b", 0, 4, dst, &got), 0);
	CHECK_EQ(objstore_get_range(fx.os, "c", 0, 4, dst, &got), 0);
	objstore_fs_read_fd_stats(fx.os, &open, NULL, NULL);
	CHECK_EQ(open, 2);
	/* A deleted object is gone, not read through a kept descriptor. */
	CHECK_EQ(objstore_del(fx.os, "c"), 0);
	CHECK_EQ(objstore_get_range(fx.os, "c", 0, 4, dst, &got), STRATA_NOTFOUND);
	/* A streamed write that replaces a key is seen too. */
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(fx.os, "b", &w), 0);
	REQUIRE_EQ(objstore_writer_write(w, "streamed", 8), 0);
	REQUIRE_EQ(objstore_writer_commit(w), 0);
	CHECK_EQ(objstore_get_range(fx.os, "b", 0, 16, dst, &got), 0);
	CHECK(got == 8 && memcmp(dst, "streamed", 8) == 0);
	fx_close(&fx);
}

TEST(missing_key_is_notfound_and_del_is_idempotent)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct buf b = {0};
	char dst[4];
	size_t got;
	uint64_t sz;
	CHECK_EQ(objstore_get(fx.os, "nope", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_get(fx.os, "no/such/dir", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_get_range(fx.os, "nope", 0, 4, dst, &got), STRATA_NOTFOUND);
	CHECK_EQ(objstore_size(fx.os, "nope", &sz), STRATA_NOTFOUND);
	REQUIRE_EQ(put_str(fx.os, "d/x", "1"), 0);
	/* A directory is not an object. */
	CHECK_EQ(objstore_get(fx.os, "d", &b), STRATA_NOTFOUND);
	/* A key below an object is absent, not an error. */
	CHECK_EQ(objstore_get(fx.os, "d/x/y", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_del(fx.os, "d/x"), 0);
	CHECK_EQ(objstore_get(fx.os, "d/x", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_del(fx.os, "d/x"), 0);
	CHECK_EQ(objstore_del(fx.os, "never/was"), 0);
	CHECK_EQ(root_files(&fx), 0);
	buf_destroy(&b);
	fx_close(&fx);
}

TEST(list_is_byte_ordered_and_prefix_filtered)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	/* '-' (0x2d) sorts before '/' (0x2f): a directory walk alone would misorder these. */
	const char *keys[] = {"s0/run/b", "s0/gen/2", "s0-x", "s0/gen/10", "s1/gen/1", "s0/gen/1",
			      "s0/manifest/00000000000000000001", "top"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		REQUIRE_EQ(put_str(fx.os, keys[i], "abc"), 0);
	struct seen s = {0};
	CHECK_EQ(objstore_list(fx.os, "", seen_cb, &s), 0);
	CHECK_EQ(strcmp(s.text, "s0-x=3;s0/gen/1=3;s0/gen/10=3;s0/gen/2=3;"
				"s0/manifest/00000000000000000001=3;s0/run/b=3;s1/gen/1=3;top=3;"),
		 0);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(fx.os, "s0/", seen_cb, &s), 0);
	CHECK_EQ(strcmp(s.text, "s0/gen/1=3;s0/gen/10=3;s0/gen/2=3;"
				"s0/manifest/00000000000000000001=3;s0/run/b=3;"),
		 0);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(fx.os, "s0", seen_cb, &s), 0);
	CHECK_EQ(strcmp(s.text, "s0-x=3;s0/gen/1=3;s0/gen/10=3;s0/gen/2=3;"
				"s0/manifest/00000000000000000001=3;s0/run/b=3;"),
		 0);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(fx.os, "s0/gen/1", seen_cb, &s), 0);
	CHECK_EQ(strcmp(s.text, "s0/gen/1=3;s0/gen/10=3;"), 0);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(fx.os, "s0/g", seen_cb, &s), 0);
	CHECK_EQ(strcmp(s.text, "s0/gen/1=3;s0/gen/10=3;s0/gen/2=3;"), 0);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(fx.os, "nothing/here/", seen_cb, &s), 0);
	CHECK_EQ(s.n, 0);
	memset(&s, 0, sizeof(s));
	s.stop_after = 2;
	CHECK_EQ(objstore_list(fx.os, "", seen_cb, &s), 42);
	CHECK_EQ(s.n, 2);
	fx_close(&fx);
}

TEST(temp_files_are_invisible)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	REQUIRE_EQ(put_str(fx.os, "d/a", "1"), 0);
	char p[700];
	snprintf(p, sizeof(p), "%s/objects/d/.tmp.deadbeef", fx.dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	REQUIRE(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/objects/.tmp.0123", fx.dir);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	REQUIRE(fd >= 0);
	close(fd);
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(fx.os, "d/b", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "pending", 7), 0);
	struct seen s = {0};
	CHECK_EQ(objstore_list(fx.os, "", seen_cb, &s), 0);
	CHECK_EQ(strcmp(s.text, "d/a=1;"), 0);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(fx.os, "d/.tmp", seen_cb, &s), STRATA_OK);
	CHECK_EQ(s.n, 0);
	struct buf b = {0};
	CHECK_EQ(objstore_get(fx.os, "d/b", &b), STRATA_NOTFOUND);
	objstore_writer_abort(w);
	fx_close(&fx);
}

/** Shared state of the put_if_absent race. */
struct race {
	/** The store raced on. */
	struct objstore *os;
	/** Released together. */
	pthread_barrier_t go;
	/** Result per thread. */
	int rc[8];
};

/** Argument of one racer. */
struct racer {
	/** The race. */
	struct race *r;
	/** Thread index. */
	int i;
};

static void *
race_main(void *arg)
{
	struct racer *me = arg;
	char v[32];
	snprintf(v, sizeof(v), "writer-%d", me->i);
	pthread_barrier_wait(&me->r->go);
	me->r->rc[me->i] = objstore_put_if_absent(me->r->os, "shard/manifest/1", v, strlen(v));
	return NULL;
}

TEST(put_if_absent_race_has_one_winner)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	for (int round = 0; round < 20; round++) {
		struct race r = {.os = fx.os};
		pthread_t t[8];
		struct racer me[8];
		pthread_barrier_init(&r.go, NULL, 8);
		for (int i = 0; i < 8; i++) {
			me[i] = (struct racer){.r = &r, .i = i};
			pthread_create(&t[i], NULL, race_main, &me[i]);
		}
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&r.go);
		int winner = -1, wins = 0, lost = 0;
		for (int i = 0; i < 8; i++) {
			if (r.rc[i] == 0) {
				wins++;
				winner = i;
			} else if (r.rc[i] == STRATA_EEXIST) {
				lost++;
			}
		}
		REQUIRE_EQ(wins, 1);
		REQUIRE_EQ(lost, 7);
		char want[32];
		snprintf(want, sizeof(want), "writer-%d", winner);
		CHECK(get_eq(fx.os, "shard/manifest/1", want));
		CHECK_EQ(root_files(&fx), 1);
		CHECK_EQ(objstore_del(fx.os, "shard/manifest/1"), 0);
	}
	/* Sequentially: the second put_if_absent loses and the first value stays. */
	CHECK_EQ(put_str(fx.os, "k", "one"), 0);
	CHECK_EQ(objstore_put_if_absent(fx.os, "k", "two", 3), STRATA_EEXIST);
	CHECK(get_eq(fx.os, "k", "one"));
	CHECK_EQ(root_files(&fx), 1);
	fx_close(&fx);
}

TEST(writer_commit_publishes_and_abort_leaves_nothing)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(fx.os, "x/y/z.sst", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "part1-", 6), 0);
	CHECK_EQ(objstore_writer_write(w, "", 0), 0);
	CHECK_EQ(objstore_writer_write(w, "part2", 5), 0);
	CHECK_EQ(objstore_writer_commit(w), 0);
	CHECK(get_eq(fx.os, "x/y/z.sst", "part1-part2"));
	CHECK_EQ(root_files(&fx), 1);

	REQUIRE_EQ(objstore_writer_open(fx.os, "x/y/dropped", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "junk", 4), 0);
	CHECK_EQ(root_files(&fx), 2);
	objstore_writer_abort(w);
	struct buf b = {0};
	CHECK_EQ(objstore_get(fx.os, "x/y/dropped", &b), STRATA_NOTFOUND);
	CHECK_EQ(root_files(&fx), 1);

	/* A streamed write replaces an existing object at commit. */
	REQUIRE_EQ(objstore_writer_open(fx.os, "x/y/z.sst", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "new", 3), 0);
	CHECK(get_eq(fx.os, "x/y/z.sst", "part1-part2"));
	CHECK_EQ(objstore_writer_commit(w), 0);
	CHECK(get_eq(fx.os, "x/y/z.sst", "new"));
	CHECK_EQ(root_files(&fx), 1);
	fx_close(&fx);
}

TEST(bad_keys_are_refused)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	const char *bad[] = {"", "/abs", "a/../b", "..", "a/..", "a//b", "a/", ".tmp.x", "d/.tmp.y",
			     "a/./b", "."};
	struct buf b = {0};
	uint64_t sz;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		diag_clear();
		CHECK_EQ(put_str(fx.os, bad[i], "v"), STRATA_EINVAL);
		CHECK(diag_last()[0] != '\0');
		CHECK_EQ(objstore_put_if_absent(fx.os, bad[i], "v", 1), STRATA_EINVAL);
		CHECK_EQ(objstore_get(fx.os, bad[i], &b), STRATA_EINVAL);
		CHECK_EQ(objstore_size(fx.os, bad[i], &sz), STRATA_EINVAL);
		CHECK_EQ(objstore_del(fx.os, bad[i]), STRATA_EINVAL);
		struct objstore_writer *w = NULL;
		CHECK_EQ(objstore_writer_open(fx.os, bad[i], &w), STRATA_EINVAL);
	}
	char longkey[2000];
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	CHECK_EQ(put_str(fx.os, longkey, "v"), STRATA_EINVAL);
	struct seen s = {0};
	CHECK_EQ(objstore_list(fx.os, "/etc", seen_cb, &s), STRATA_EINVAL);
	CHECK_EQ(objstore_list(fx.os, "../", seen_cb, &s), STRATA_EINVAL);
	CHECK_EQ(objstore_list(fx.os, "a//", seen_cb, &s), STRATA_EINVAL);
	CHECK_EQ(s.n, 0);
	CHECK_EQ(root_files(&fx), 0);
	fx_close(&fx);
}

static int
fail_fsync(int fd)
{
	errno = EIO;
	return -1;
}

TEST(fsync_failure_fails_put_naming_path_and_publishes_nothing)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	REQUIRE_EQ(put_str(fx.os, "d/x", "1"), 0);
	env.fsync = fail_fsync;
	diag_clear();
	int rc = put_str(fx.os, "d/y", "2");
	CHECK_EQ(rc, STRATA_EIO);
	char want[700];
	snprintf(want, sizeof(want), "%s/objects/d/y", fx.dir);
	CHECK(strstr(diag_last(), want) != NULL);
	CHECK_EQ(objstore_put_if_absent(fx.os, "d/z", "3", 1), STRATA_EIO);
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(fx.os, "d/w", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "4", 1), 0);
	CHECK_EQ(objstore_writer_commit(w), STRATA_EIO);
	env.fsync = fsync;
	struct buf b = {0};
	CHECK_EQ(objstore_get(fx.os, "d/y", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_get(fx.os, "d/z", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_get(fx.os, "d/w", &b), STRATA_NOTFOUND);
	CHECK_EQ(root_files(&fx), 1);
	fx_close(&fx);
}

static ssize_t
full_pwrite(int fd, const void *p, size_t n, off_t off)
{
	errno = ENOSPC;
	return -1;
}

TEST(enospc_from_pwrite_is_strata_enospc)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	env.pwrite = full_pwrite;
	CHECK_EQ(put_str(fx.os, "a/b", "data"), STRATA_ENOSPC);
	CHECK(strstr(diag_last(), "a/b") != NULL);
	CHECK_EQ(objstore_put_if_absent(fx.os, "a/c", "data", 4), STRATA_ENOSPC);
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(fx.os, "a/d", &w), 0);
	CHECK_EQ(objstore_writer_write(w, "data", 4), STRATA_ENOSPC);
	objstore_writer_abort(w);
	env.pwrite = pwrite;
	CHECK_EQ(root_files(&fx), 0);
	fx_close(&fx);
}

/** The env.open that emfile_open wraps. */
static int (*emfile_real_open)(const char *path, int flags, mode_t mode);

/** env.open that is out of descriptors for every file it would create. */
static int
emfile_open(const char *path, int flags, mode_t mode)
{
	if (flags & O_CREAT) {
		errno = EMFILE;
		return -1;
	}
	return emfile_real_open(path, flags, mode);
}

TEST(out_of_descriptors_names_the_limit)
{
	/* A put that cannot create its temp file says which limit to raise. */
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	REQUIRE_EQ(put_str(fx.os, "a/b", "data"), 0); /* the directory exists */
	emfile_real_open = env.open;
	env.open = emfile_open;
	CHECK(put_str(fx.os, "a/c", "data") != 0);
	CHECK(strstr(diag_last(), "a/c") != NULL);
	CHECK(strstr(diag_last(), "ulimit -n") != NULL);
	env.open = emfile_real_open;
	CHECK_EQ(root_files(&fx), 1);
	fx_close(&fx);
}

/* ---- incremental writeback (sync_file_range every bytes_per_sync) ---- */

/** Most sync_file_range calls recorded. */
#define SFR_MAX 4096

/** What the sync_file_range seam saw. */
static struct {
	/** Calls made. */
	int n;
	/** Per call: fd, offset, length, flags. */
	int fd[SFR_MAX];
	off_t off[SFR_MAX];
	off_t len[SFR_MAX];
	unsigned flags[SFR_MAX];
	/** errno to fail every call with (0: call the real one). */
	int fail_errno;
} sfr;

static int
counting_sfr(int fd, off_t off, off_t n, unsigned int flags)
{
	if (sfr.n < SFR_MAX) {
		sfr.fd[sfr.n] = fd;
		sfr.off[sfr.n] = off;
		sfr.len[sfr.n] = n;
		sfr.flags[sfr.n] = flags;
	}
	sfr.n++;
	if (sfr.fail_errno != 0) {
		errno = sfr.fail_errno;
		return -1;
	}
	return sync_file_range(fd, off, n, flags);
}

/** Stream `total` bytes (in pieces of 3 x 21841 bytes, like run blocks of odd sizes) to
 *  key; 0 or the first error. */
static int
stream_object(struct objstore *os, const char *key, size_t total, int commit)
{
	static unsigned char chunk[3 * 21841];
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (unsigned char)(i * 131 + 7);
	struct objstore_writer *w = NULL;
	int rc = objstore_writer_open(os, key, &w);
	if (rc)
		return rc;
	for (size_t done = 0; done < total && rc == 0;) {
		size_t n = total - done < sizeof(chunk) ? total - done : sizeof(chunk);
		rc = objstore_writer_write(w, chunk, n);
		done += n;
	}
	if (rc != 0 || !commit) {
		objstore_writer_abort(w);
		return rc;
	}
	return objstore_writer_commit(w);
}

/** Check the recorded calls: one writer's fd, WAIT_BEFORE | WRITE, whole pages, each
 *  range starting where the one before the last ended, one about every `every` bytes. */
static void
check_sfr_calls(size_t every)
{
	int n = sfr.n < SFR_MAX ? sfr.n : SFR_MAX;
	off_t prev_end = 0, prev_prev_end = 0;
	for (int i = 0; i < n; i++) {
		CHECK_EQ(sfr.fd[i], sfr.fd[0]);
		CHECK_EQ(sfr.flags[i], SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
		off_t end = sfr.off[i] + sfr.len[i];
		CHECK_EQ(end % 4096, 0);
		CHECK_EQ(sfr.off[i], prev_prev_end);
		CHECK(end - prev_end >= (off_t)every - 4096);
		CHECK(end - prev_end <= (off_t)every + 3 * 21841);
		prev_prev_end = prev_end;
		prev_end = end;
	}
}

TEST(writer_starts_writeback_every_bytes_per_sync)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	memset(&sfr, 0, sizeof(sfr));
	env.sync_file_range = counting_sfr;

	/* The default: every 1 MiB (plus the rest of the write that crossed it). 6 MiB and a
	 * bit: five or six calls, the tail left to the final fsync. */
	REQUIRE_EQ(stream_object(fx.os, "run/a", (6u << 20) + 12345, 1), 0);
	CHECK(sfr.n >= 5 && sfr.n <= 6);
	check_sfr_calls(1u << 20);
	struct buf b = {0};
	REQUIRE_EQ(objstore_get(fx.os, "run/a", &b), 0);
	CHECK_EQ(b.len, (6u << 20) + 12345);
	CHECK_EQ(b.data[(6u << 20) + 100], (unsigned char)(((6u << 20) + 100) % (3 * 21841) * 131 + 7));
	buf_destroy(&b);

	/* 256 KiB: about four times as many. */
	memset(&sfr, 0, sizeof(sfr));
	REQUIRE_EQ(objstore_fs_set_bytes_per_sync(fx.os, 256u << 10), 0);
	REQUIRE_EQ(stream_object(fx.os, "run/b", 6u << 20, 1), 0);
	CHECK(sfr.n >= 22 && sfr.n <= 24);
	check_sfr_calls(256u << 10);

	/* Whole objects (put) and small streams never call it; 0 turns it off. */
	memset(&sfr, 0, sizeof(sfr));
	REQUIRE_EQ(stream_object(fx.os, "run/c", 200u << 10, 1), 0);
	REQUIRE_EQ(put_str(fx.os, "manifest/1", "m"), 0);
	REQUIRE_EQ(objstore_fs_set_bytes_per_sync(fx.os, 0), 0);
	REQUIRE_EQ(stream_object(fx.os, "run/d", 4u << 20, 1), 0);
	CHECK_EQ(sfr.n, 0);

	CHECK_EQ(objstore_fs_set_bytes_per_sync(fx.os, 100), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "bytes_per_sync") != NULL);
	fx_close(&fx);
}

TEST(writeback_failure_fails_the_write_and_publishes_nothing)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	memset(&sfr, 0, sizeof(sfr));
	env.sync_file_range = counting_sfr;
	sfr.fail_errno = EIO;
	diag_clear();
	/* A writeback error is reported once per open file: the write fails there. */
	CHECK_EQ(stream_object(fx.os, "run/a", 3u << 20, 1), STRATA_EIO);
	CHECK_EQ(sfr.n, 1);
	CHECK(strstr(diag_last(), "run/a") != NULL);
	sfr.fail_errno = ENOSPC;
	CHECK_EQ(stream_object(fx.os, "run/b", 3u << 20, 1), STRATA_ENOSPC);
	CHECK_EQ(root_files(&fx), 0);

	/* Not supported here: writeback is left to the final fsync, the write goes on. */
	memset(&sfr, 0, sizeof(sfr));
	sfr.fail_errno = ENOSYS;
	CHECK_EQ(stream_object(fx.os, "run/c", 3u << 20, 1), 0);
	CHECK_EQ(sfr.n, 1);
	env.sync_file_range = NULL;
	CHECK_EQ(stream_object(fx.os, "run/d", 3u << 20, 1), 0);
	uint64_t size = 0;
	CHECK_EQ(objstore_size(fx.os, "run/c", &size), 0);
	CHECK_EQ(size, 3u << 20);
	CHECK_EQ(objstore_size(fx.os, "run/d", &size), 0);
	CHECK_EQ(root_files(&fx), 2);
	fx_close(&fx);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(put_get_size_overwrite_roundtrip);
	RUN(get_range_reads_slices_short_at_end);
	RUN(ranged_reads_reuse_descriptors_and_see_replacements);
	RUN(missing_key_is_notfound_and_del_is_idempotent);
	RUN(list_is_byte_ordered_and_prefix_filtered);
	RUN(temp_files_are_invisible);
	RUN(put_if_absent_race_has_one_winner);
	RUN(writer_commit_publishes_and_abort_leaves_nothing);
	RUN(bad_keys_are_refused);
	RUN(fsync_failure_fails_put_naming_path_and_publishes_nothing);
	RUN(enospc_from_pwrite_is_strata_enospc);
	RUN(out_of_descriptors_names_the_limit);
	RUN(writer_starts_writeback_every_bytes_per_sync);
	RUN(writeback_failure_fails_the_write_and_publishes_nothing);
	return HARNESS_END("test_objstore");
}
