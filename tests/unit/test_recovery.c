/*
 * test_recovery.c — recovery through the public API (node/strata.h): merges
 * interrupted at every commit step converge, replay starts at the manifest's cursor,
 * torn WAL tails are cut, and corrupt WAL entries, run blocks and manifests are
 * reported naming the file or object. "Crashes" are forked children that _exit at
 * a test point of node/lib/env.h (ENV_POINTS).
 */
#include <pthread.h>
#include <dirent.h>
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
#include "../../node/core/wal.h"
#include "../../node/lib/buf.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "harness.h"

/** Tag of the temporary directories (engine_util.h). */
#define ENGINE_UTIL_TAG "recovery"
#include "engine_util.h"

/* ---------------------------------------------------------------- rows */

/** Number of keys in [from, to) that are not STRATA_NOTFOUND. */
static int
range_present(strata *db, const char *prefix, int from, int to)
{
	int bad = 0;
	for (int i = from; i < to; i++) {
		char key[48];
		snprintf(key, sizeof(key), "%s%05d", prefix, i);
		if (!get_is(db, key, NULL) && ++bad >= 5) {
			fprintf(stderr, "  (more present under %s not shown)\n", prefix);
			return bad + (to - i - 1);
		}
	}
	return bad;
}

/* ---------------------------------------------------------------- crash points */

/** Point at which a forked child exits, or NULL. Set only in children. */
static const char *exit_at;

static int
test_point(const char *name, const void *arg)
{
	(void)arg;
	const char *at = __atomic_load_n(&exit_at, __ATOMIC_ACQUIRE);
	if (at != NULL && strcmp(name, at) == 0)
		_exit(0);
	return 0;
}

/* ---------------------------------------------------------------- files and objects */

/** Path and file name of the newest WAL segment of shard 0 under dir. 0 or -1. */
static int
last_segment(const char *dir, char *path, size_t cap, char *name, size_t ncap)
{
	char wdir[512];
	snprintf(wdir, sizeof(wdir), "%s/wal/shard-0000", dir);
	DIR *d = opendir(wdir);
	if (d == NULL) {
		fprintf(stderr, "  opendir %s: %s\n", wdir, strerror(errno));
		return -1;
	}
	char best[256] = "";
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		if (len > 4 && strcmp(e->d_name + len - 4, ".wal") == 0 && strcmp(e->d_name, best) > 0 &&
		    len < sizeof(best))
			memcpy(best, e->d_name, len + 1);
	}
	closedir(d);
	if (best[0] == '\0') {
		fprintf(stderr, "  no WAL segment in %s\n", wdir);
		return -1;
	}
	snprintf(path, cap, "%s/%s", wdir, best);
	snprintf(name, ncap, "%s", best);
	return 0;
}

static long long
file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int
flip_file_byte(const char *path, long long off)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	unsigned char c;
	int rc = -1;
	if (pread(fd, &c, 1, off) == 1) {
		c ^= 0xff;
		if (pwrite(fd, &c, 1, off) == 1)
			rc = 0;
	}
	close(fd);
	return rc;
}

static struct objstore *
objects_of(const char *dir)
{
	char root[512];
	snprintf(root, sizeof(root), "%s/objects", dir);
	struct objstore *os = NULL;
	if (objstore_fs_new(root, &os) != 0) {
		fprintf(stderr, "  objstore_fs_new(%s): %s\n", root, strata_last_error());
		return NULL;
	}
	return os;
}

/** Keys listed under a prefix. */
struct key_list {
	/** The keys, full (as listed). */
	char keys[256][160];
	/** How many. */
	int n;
};

static int
key_list_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	struct key_list *l = ctx;
	if (l->n < 256)
		snprintf(l->keys[l->n], sizeof(l->keys[0]), "%s", key);
	l->n++;
	return 0;
}

static int
list_keys(const char *dir, const char *prefix, struct key_list *l)
{
	memset(l, 0, sizeof(*l));
	struct objstore *os = objects_of(dir);
	if (os == NULL)
		return -1;
	int rc = objstore_list(os, prefix, key_list_cb, l);
	objstore_destroy(os);
	if (rc != 0 || l->n > 256) {
		fprintf(stderr, "  list %s: %d keys, %s\n", prefix, l->n, strata_last_error());
		return -1;
	}
	return 0;
}

/** A key relative to shard 0's prefix. */
static const char *
rel_key(const char *key)
{
	return strncmp(key, SHARD0, strlen(SHARD0)) == 0 ? key + strlen(SHARD0) : key;
}

/** The first (last = 0) or last key under "shard-0000/<sub>". 0 or -1. */
static int
find_object(const char *dir, const char *sub, int last, char *key, size_t cap)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), SHARD0 "%s", sub);
	static struct key_list l;
	if (list_keys(dir, prefix, &l) != 0 || l.n == 0) {
		fprintf(stderr, "  no object under %s\n", prefix);
		return -1;
	}
	snprintf(key, cap, "%s", l.keys[last ? l.n - 1 : 0]);
	return 0;
}

/** Invert the byte at frac of the object's length, through the object store. */
static int
flip_object_byte(const char *dir, const char *key, double frac)
{
	struct objstore *os = objects_of(dir);
	if (os == NULL)
		return -1;
	struct buf b = { 0 };
	int rc = objstore_get(os, key, &b);
	if (rc == 0 && b.len > 0) {
		size_t off = (size_t)((double)b.len * frac);
		b.data[off] ^= 0xff;
		rc = objstore_put(os, key, b.data, b.len);
	} else if (rc == 0) {
		rc = -1;
	}
	if (rc != 0)
		fprintf(stderr, "  flip %s: %d %s\n", key, rc, strata_last_error());
	buf_destroy(&b);
	objstore_destroy(os);
	return rc;
}

/** Gen/run objects not referenced by the manifest plus referenced ones missing; prints each. */
static int
objects_mismatch_manifest(const char *dir)
{
	struct manifest m;
	if (load_manifest(dir, &m) != 0)
		return 1;
	static struct key_list l;
	if (list_keys(dir, SHARD0, &l) != 0) {
		manifest_destroy(&m);
		return 1;
	}
	int bad = 0;
	for (int i = 0; i < l.n; i++) {
		const char *k = rel_key(l.keys[i]);
		if (strncmp(k, "manifest/", 9) == 0)
			continue;
		int kind;
		uint64_t id, epoch;
		if (manifest_parse_obj_key(k, &kind, &id, &epoch) != 0) {
			fprintf(stderr, "  unexpected object %s\n", l.keys[i]);
			bad++;
			continue;
		}
		int at = kind == MANIFEST_GEN ? manifest_find_gen(&m, id) : manifest_find_run(&m, id);
		const struct manifest_obj *o = at < 0 ? NULL : kind == MANIFEST_GEN ? &m.gens[at] : &m.runs[at];
		if (o == NULL || o->epoch != epoch) {
			fprintf(stderr, "  leaked object %s (not in manifest version %llu)\n", l.keys[i],
				(unsigned long long)m.version);
			bad++;
		}
	}
	for (int kind = MANIFEST_GEN; kind <= MANIFEST_RUN; kind++) {
		uint32_t n = kind == MANIFEST_GEN ? m.ngens : m.nruns;
		for (uint32_t i = 0; i < n; i++) {
			const struct manifest_obj *o = kind == MANIFEST_GEN ? &m.gens[i] : &m.runs[i];
			char want[160];
			manifest_obj_key(want, sizeof(want), SHARD0, kind, o);
			int found = 0;
			for (int k = 0; k < l.n && !found; k++)
				found = strcmp(rel_key(l.keys[k]), rel_key(want)) == 0;
			if (!found) {
				fprintf(stderr, "  manifest version %llu references missing %s\n",
					(unsigned long long)m.version, want);
				bad++;
			}
		}
	}
	manifest_destroy(&m);
	return bad;
}

/* ---------------------------------------------------------------- tests */

static const char *const crash_points[] = {
	"prepare.run_written",
	"commit.manifest_updated",
	"commit.before_delete",
};

/** In a forked child: build three generations and a WAL tail, then merge and die at point. */
static void
crash_child(const strata_options *o, const char *point)
{
	strata *db = NULL;
	if (strata_open(o, &db) != 0)
		_exit(10);
	for (int g = 0; g < 3; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%d-", g);
		if (put_range(db, prefix, 0, 100, "old", 25) != 0 || strata_seal(db, 0) != 0)
			_exit(11);
	}
	if (put_range(db, "tail-", 0, 50, "t", 10) != 0)
		_exit(12);
	if (env_point_lookup(point) < 0)
		_exit(13); /* no such test point: the test is wrong */
	__atomic_store_n(&exit_at, point, __ATOMIC_RELEASE);
	uint32_t merged = 0;
	int rc = strata_merge(db, 0, 0, &merged);
	fprintf(stderr, "  child: merge returned %s without reaching %s\n", strata_strerror(rc), point);
	_exit(3);
}

static int
crash_rows_misses(strata *db)
{
	int bad = range_misses(db, "tail-", 0, 50, "t");
	for (int g = 0; g < 3; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%d-", g);
		bad += range_misses(db, prefix, 0, 100, "old");
	}
	return bad;
}

TEST(interrupted_merge_converges)
{
	for (size_t p = 0; p < sizeof(crash_points) / sizeof(crash_points[0]); p++) {
		fprintf(stderr, "  # crash at %s\n", crash_points[p]);
		const char *dir = tdir();
		strata_options o = opts_for(dir);
		fflush(stdout);
		fflush(stderr);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0)
			crash_child(&o, crash_points[p]);
		int status = 0;
		REQUIRE(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "  child did not stop at %s: %s %d\n", crash_points[p],
				WIFEXITED(status) ? "exit" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			CHECK(0);
			continue;
		}

		strata *db = db_open(&o);
		REQUIRE(db != NULL);
		CHECK_EQ(crash_rows_misses(db), 0);
		/* Open collected the orphans of the interrupted merge. */
		CHECK_EQ(objects_mismatch_manifest(dir), 0);
		uint32_t merged = 0;
		int rc = strata_merge(db, 0, 0, &merged);
		CHECK_EQ(rc, 0);
		strata_stats s = stats_of(db);
		CHECK_EQ(s.generations, 0);
		CHECK_EQ(s.base_runs, 1);
		CHECK_EQ(objects_mismatch_manifest(dir), 0);
		CHECK_EQ(count_objects(dir, "gen/"), 0);
		CHECK_EQ(count_objects(dir, "run/"), 1);
		CHECK_EQ(crash_rows_misses(db), 0);
		CHECK(scan_ok(db, 3 * 100 + 50));
		db_close(db);

		db = db_open(&o);
		REQUIRE(db != NULL);
		CHECK_EQ(crash_rows_misses(db), 0);
		CHECK_EQ(objects_mismatch_manifest(dir), 0);
		CHECK_EQ(stats_of(db).base_runs, 1);
		db_close(db);
	}
}

static int
drain_gens(void *ctx, struct manifest *next)
{
	(void)ctx;
	next->ngens = 0;
	return 0;
}

TEST(recovery_replays_after_cursor_even_if_generations_drained)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "sealed-", 0, 100, "s", 20), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	strata_stats s = stats_of(db);
	CHECK_EQ(s.replay_after, s.last_seq);
	uint64_t cursor = s.replay_after;
	REQUIRE_EQ(put_range(db, "tail-", 0, 50, "t", 10), 0);
	db_close(db);

	/* Precondition for catching a replay from 0: the sealed rows are still in the WAL. */
	struct wal_segment_info segs[16];
	char wdir[512];
	snprintf(wdir, sizeof(wdir), "%s/wal/shard-0000", dir);
	int nseg = wal_inspect_dir(wdir, segs, 16);
	int sealed_in_wal = 0;
	for (int i = 0; i < nseg && i < 16; i++)
		if (segs[i].entries > 0 && segs[i].first_seq <= cursor)
			sealed_in_wal = 1;
	if (!sealed_in_wal)
		fprintf(stderr, "  note: the sealed rows left the WAL; a replay from 0 would go unseen\n");

	/* An external compactor drains the generation list and deletes the objects. */
	struct objstore *os = objects_of(dir);
	REQUIRE(os != NULL);
	struct manifest m;
	int rc = manifest_load(os, SHARD0, &m);
	if (rc != 0)
		objstore_destroy(os);
	REQUIRE_EQ(rc, 0);
	CHECK_EQ(m.ngens, 1);
	CHECK_EQ(m.replay_after, cursor);
	char keys[8][160];
	uint32_t nkeys = 0;
	for (uint32_t i = 0; i < m.ngens && nkeys < 8; i++)
		manifest_obj_key(keys[nkeys++], sizeof(keys[0]), SHARD0, MANIFEST_GEN, &m.gens[i]);
	rc = manifest_commit_update(os, SHARD0, NULL, m.writer_epoch, &m, drain_gens, NULL);
	CHECK_EQ(rc, 0);
	CHECK_EQ(m.ngens, 0);
	CHECK_EQ(m.replay_after, cursor);
	for (uint32_t i = 0; i < nkeys; i++)
		CHECK_EQ(objstore_del(os, keys[i]), 0);
	manifest_destroy(&m);
	objstore_destroy(os);
	REQUIRE_EQ(rc, 0);

	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(range_misses(db, "tail-", 0, 50, "t"), 0);
	CHECK_EQ(range_present(db, "sealed-", 0, 100), 0);
	s = stats_of(db);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(s.memtable_rows, 50);
	CHECK_EQ(s.replay_after, cursor);
	CHECK(scan_ok(db, 50));
	db_close(db);
}

TEST(torn_wal_tail_is_truncated)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	long long sz[5];
	char seg[640], name[256], first[256] = "";
	for (int b = 0; b < 5; b++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "b%d-", b);
		REQUIRE_EQ(put_range(db, prefix, 0, 20, "w", 20), 0);
		REQUIRE_EQ(last_segment(dir, seg, sizeof(seg), name, sizeof(name)), 0);
		if (b == 0)
			snprintf(first, sizeof(first), "%s", name);
		REQUIRE(strcmp(first, name) == 0);
		sz[b] = file_size(seg);
	}
	db_close(db);
	REQUIRE(sz[4] > sz[3]);
	/* Tear the last entry in half. */
	long long cut = sz[3] + (sz[4] - sz[3]) / 2;
	REQUIRE(truncate(seg, cut) == 0);

	db = db_open(&o);
	REQUIRE(db != NULL);
	for (int b = 0; b < 4; b++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "b%d-", b);
		CHECK_EQ(range_misses(db, prefix, 0, 20, "w"), 0);
	}
	CHECK_EQ(range_present(db, "b4-", 0, 20), 0);
	long long after = file_size(seg);
	if (after >= 0 && after > sz[3])
		fprintf(stderr, "  %s is %lld bytes after open; the torn tail starts at %lld\n", seg, after,
			sz[3]);
	CHECK(after <= sz[3]);
	/* New appends land after the cut and survive another reopen. */
	CHECK_EQ(put_range(db, "after-", 0, 20, "w", 20), 0);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (int b = 0; b < 4; b++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "b%d-", b);
		CHECK_EQ(range_misses(db, prefix, 0, 20, "w"), 0);
	}
	CHECK_EQ(range_present(db, "b4-", 0, 20), 0);
	CHECK_EQ(range_misses(db, "after-", 0, 20, "w"), 0);
	CHECK(scan_ok(db, 5 * 20));
	db_close(db);
}

TEST(corrupt_wal_entry_fails_open)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	char seg[640], name[256];
	REQUIRE_EQ(put_range(db, "b0-", 0, 5, "w", 5), 0);
	REQUIRE_EQ(last_segment(dir, seg, sizeof(seg), name, sizeof(name)), 0);
	long long sz0 = file_size(seg);
	REQUIRE_EQ(put_range(db, "b1-", 0, 40, "w", 40), 0);
	long long sz1 = file_size(seg);
	for (int b = 2; b < 5; b++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "b%d-", b);
		REQUIRE_EQ(put_range(db, prefix, 0, 20, "w", 20), 0);
	}
	char seg2[640], name2[256];
	REQUIRE_EQ(last_segment(dir, seg2, sizeof(seg2), name2, sizeof(name2)), 0);
	REQUIRE(strcmp(seg, seg2) == 0);
	db_close(db);
	REQUIRE(sz1 > sz0 && sz0 >= 0);
	/* Corrupt the middle of the second entry; three whole entries follow it. */
	REQUIRE_EQ(flip_file_byte(seg, sz0 + (sz1 - sz0) / 2), 0);

	strata *bad = NULL;
	int rc = strata_open(&o, &bad);
	CHECK_EQ(rc, STRATA_ECORRUPT);
	const char *err = strata_last_error();
	if (strstr(err, name) == NULL) {
		fprintf(stderr, "  error does not name segment %s: '%s'\n", name, err);
		CHECK(0);
	}
	if (rc == 0) {
		for (int b = 1; b < 5; b++) {
			char prefix[16];
			snprintf(prefix, sizeof(prefix), "b%d-", b);
			fprintf(stderr, "  opened anyway; rows of batch %d missing: %d\n", b,
				range_misses(bad, prefix, 0, b == 1 ? 40 : 20, "w"));
		}
		strata_close(bad);
	}
}

/** FNV-1a over every path, file size and byte below dir, in sorted path order. */
static uint64_t
tree_digest(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "cd '%s' && find . -print | LC_ALL=C sort", dir);
	FILE *list = popen(cmd, "r");
	uint64_t h = 1469598103934665603ull;
	if (list == NULL)
		return 0;
	char rel[2048];
	while (fgets(rel, sizeof(rel), list) != NULL) {
		rel[strcspn(rel, "\n")] = '\0';
		for (const char *p = rel; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ull;
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s", dir, rel);
		struct stat st;
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		FILE *f = fopen(path, "rb");
		int c;
		while (f != NULL && (c = fgetc(f)) != EOF)
			h = (h ^ (unsigned char)c) * 1099511628211ull;
		if (f != NULL)
			fclose(f);
		h = (h ^ (uint64_t)st.st_size) * 1099511628211ull;
	}
	pclose(list);
	return h;
}

/** Manifest version of shard 0 as stored (0 when unreadable). */
static uint64_t
stored_version(const char *dir)
{
	char objs[640];
	snprintf(objs, sizeof(objs), "%s/objects", dir);
	struct objstore *os = NULL;
	struct manifest m;
	uint64_t v = 0;
	if (objstore_fs_new(objs, &os) == 0 && manifest_load(os, SHARD0, &m) == 0) {
		v = m.version;
		manifest_destroy(&m);
	}
	objstore_destroy(os);
	return v;
}

TEST(failed_open_changes_nothing)
{
	/* Two shards: shard 1 is damaged, shard 0 is fine and must not be claimed either. */
	for (int damage = 0; damage < 2; damage++) {
		const char *dir = tdir();
		strata_options o = opts_for(dir);
		o.shards = 2;
		strata *db = db_open(&o);
		REQUIRE(db != NULL);
		REQUIRE_EQ(put_range(db, "g-", 0, 50, "v", 50), 0);
		for (uint32_t sh = 0; sh < 2; sh++) {
			strata_row r = {"k", 1, "v", 1};
			REQUIRE_EQ(strata_append(db, sh, &r, 1), 0);
			REQUIRE_EQ(strata_seal(db, sh), 0);
		}
		for (int b = 0; b < 4; b++) {
			char key[16];
			snprintf(key, sizeof(key), "w-%d", b);
			strata_row r = {key, strlen(key), "wal-row", 7};
			REQUIRE_EQ(strata_append(db, 1, &r, 1), 0);
		}
		db_close(db);
		char path[1024];
		if (damage == 0) {
			/* A flipped byte in the middle of shard 1's WAL (first of four entries). */
			char wdir[640];
			snprintf(wdir, sizeof(wdir), "%s/wal/shard-0001", dir);
			struct wal_segment_info info[8];
			int n = wal_inspect_dir(wdir, info, 8);
			REQUIRE(n >= 1);
			snprintf(path, sizeof(path), "%s/%s", wdir, info[n - 1].name);
			REQUIRE(info[n - 1].entries >= 4);
			REQUIRE_EQ(flip_file_byte(path, 24 + 24 + 3), 0);
		} else {
			/* Shard 1's generation cut short. */
			char objs[640];
			snprintf(objs, sizeof(objs), "%s/objects/shard-0001/gen", dir);
			DIR *d = opendir(objs);
			REQUIRE(d != NULL);
			struct dirent *de;
			path[0] = '\0';
			while ((de = readdir(d)) != NULL)
				if (strstr(de->d_name, ".sst") != NULL)
					snprintf(path, sizeof(path), "%s/%s", objs, de->d_name);
			closedir(d);
			REQUIRE(path[0] != '\0');
			REQUIRE(truncate(path, file_size(path) / 2) == 0);
		}
		uint64_t digest = tree_digest(dir), version = stored_version(dir);
		REQUIRE(version > 0);
		for (int attempt = 0; attempt < 3; attempt++) {
			strata *bad = NULL;
			int rc = strata_open(&o, &bad);
			CHECK_EQ(rc, STRATA_ECORRUPT);
			CHECK(strstr(strata_last_error(), "strata repair") != NULL);
			if (bad != NULL)
				strata_close(bad);
		}
		CHECK_EQ(tree_digest(dir), digest);
		CHECK_EQ(stored_version(dir), version);
	}
}

TEST(corrupt_run_block_is_reported)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* Values of random hex so the block stays most of the object. */
	uint64_t rng = 0x51ed2701u;
	static char keys[100][16], vals[100][200];
	strata_row rows[100];
	for (int i = 0; i < 100; i++) {
		snprintf(keys[i], sizeof(keys[i]), "r-%05d", i);
		int n = snprintf(vals[i], sizeof(vals[i]), "%s=", keys[i]);
		while (n < 180)
			vals[i][n++] = "0123456789abcdef"[xorshift(&rng) & 15];
		vals[i][n] = '\0';
		rows[i] = (strata_row){ keys[i], strlen(keys[i]), vals[i], (size_t)n };
	}
	REQUIRE_EQ(strata_append(db, 0, rows, 100), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	db_close(db);
	REQUIRE_EQ(count_objects(dir, "gen/"), 1);
	char key[160];
	REQUIRE_EQ(find_object(dir, "gen/", 0, key, sizeof(key)), 0);
	REQUIRE_EQ(flip_object_byte(dir, key, 0.25), 0);
	const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;

	int rc = strata_open(&o, &db);
	if (rc != 0) {
		CHECK_EQ(rc, STRATA_ECORRUPT);
		if (strstr(strata_last_error(), base) == NULL) {
			fprintf(stderr, "  open error does not name %s: '%s'\n", base, strata_last_error());
			CHECK(0);
		}
		return;
	}
	int named = 0, corrupt = 0;
	for (int i = 0; i < 100; i++) {
		void *v = NULL;
		size_t vl = 0;
		rc = strata_get(db, 0, keys[i], strlen(keys[i]), &v, &vl);
		if (rc == 0) {
			if (vl != strlen(vals[i]) || memcmp(v, vals[i], vl) != 0)
				fprintf(stderr, "  get %s returned a wrong value from a corrupt block\n", keys[i]);
			strata_free(v);
		}
		if (rc == STRATA_ECORRUPT) {
			corrupt++;
			named += strstr(strata_last_error(), base) != NULL;
			if (corrupt == 1)
				fprintf(stderr, "  # %s\n", strata_last_error());
		}
	}
	CHECK_EQ(corrupt, 100);
	CHECK_EQ(named, corrupt);
	static struct scan_check sc;
	memset(&sc, 0, sizeof(sc));
	rc = strata_scan(db, 0, NULL, 0, NULL, 0, scan_check_cb, &sc);
	CHECK_EQ(rc, STRATA_ECORRUPT);
	if (rc == STRATA_ECORRUPT && strstr(strata_last_error(), base) == NULL) {
		fprintf(stderr, "  scan error does not name %s: '%s'\n", base, strata_last_error());
		CHECK(0);
	}
	strata_close(db);
}

TEST(a_large_wal_replays_every_row_while_another_thread_prefaults_the_memtable)
{
	/* 48 MiB of WAL: over the two 16 MiB chunks at which the open starts a thread that
	 * faults the memtable's next chunks in while it replays (mem_prefault_start). */
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.sync = STRATA_SYNC_NONE;
	o.memtable_huge_pages = 1;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	static char keys[256][16], vals[256][1000];
	strata_row rows[256];
	const int batches = 192;
	for (int b = 0; b < batches; b++) {
		for (int i = 0; i < 256; i++) {
			snprintf(keys[i], sizeof(keys[i]), "p-%03d-%03d", b, i);
			memset(vals[i], 'a' + (b + i) % 26, sizeof(vals[i]));
			rows[i] = (strata_row){ keys[i], strlen(keys[i]), vals[i], sizeof(vals[i]) };
		}
		REQUIRE_EQ(strata_append(db, 0, rows, 256), 0);
	}
	db_close(db);
	REQUIRE_EQ(strata_open(&o, &db), 0);
	strata_stats st;
	strata_shard_stats(db, 0, &st);
	CHECK_EQ(st.memtable_rows, batches * 256);
	int bad = 0;
	for (int b = 0; b < batches; b++) {
		for (int i = 0; i < 256; i += 7) {
			char k[16];
			snprintf(k, sizeof(k), "p-%03d-%03d", b, i);
			void *v = NULL;
			size_t vl = 0;
			if (strata_get(db, 0, k, strlen(k), &v, &vl) != 0 || vl != 1000 ||
			    ((char *)v)[0] != 'a' + (b + i) % 26 || ((char *)v)[999] != 'a' + (b + i) % 26)
				bad++;
			strata_free(v);
		}
	}
	CHECK_EQ(bad, 0);
	strata_close(db);
}

TEST(a_replay_in_sorted_batches_keeps_the_newest_version_of_every_key)
{
	/* Keys in random order, written over and deleted again across appends, some of them
	 * sealed before the close: each reopen replays the WAL after the cursor in sorted
	 * batches of replay_batch_rows (1, 5, 1000, the default) or row by row (0), and every
	 * key reads as its last write left it. */
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.sync = STRATA_SYNC_NONE;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	enum { KEYS = 300, APPENDS = 400, PER = 8 };
	static int model[KEYS]; /* -1: never written or deleted; else the version */
	for (int k = 0; k < KEYS; k++)
		model[k] = -1;
	uint64_t x = 12345;
	for (int a = 0; a < APPENDS; a++) {
		char keys[PER][16], vals[PER][32];
		strata_row rows[PER];
		for (int i = 0; i < PER; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			int k = (int)(x % KEYS);
			int del = (x >> 20) % 4 == 0;
			snprintf(keys[i], sizeof(keys[i]), "r%05d", (k * 7919) % 100000);
			int n = snprintf(vals[i], sizeof(vals[i]), "v%d.%d", k, a * PER + i);
			rows[i] = (strata_row){keys[i], strlen(keys[i]), del ? NULL : vals[i],
					      del ? 0 : (size_t)n, del ? STRATA_ROW_DELETE : STRATA_ROW_PUT};
			model[k] = del ? -1 : a * PER + i;
		}
		REQUIRE_EQ(strata_append(db, 0, rows, PER), 0);
		if (a == APPENDS / 4)
			REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	db_close(db);
	static const uint32_t batch[] = {1, 5, 1000, 1u << 20, 0};
	for (size_t c = 0; c < sizeof(batch) / sizeof(batch[0]); c++) {
		o.replay_batch_rows = batch[c];
		REQUIRE_EQ(strata_open(&o, &db), 0);
		int bad = 0;
		for (int k = 0; k < KEYS; k++) {
			char key[16], want[32];
			snprintf(key, sizeof(key), "r%05d", (k * 7919) % 100000);
			void *v = NULL;
			size_t vl = 0;
			int rc = strata_get(db, 0, key, strlen(key), &v, &vl);
			if (model[k] < 0) {
				bad += rc != STRATA_NOTFOUND;
			} else {
				int n = snprintf(want, sizeof(want), "v%d.%d", k, model[k]);
				bad += rc != 0 || vl != (size_t)n || memcmp(v, want, vl) != 0;
			}
			strata_free(v);
		}
		if (bad)
			fprintf(stderr, "  replay_batch_rows %u: %d keys read wrong\n", batch[c], bad);
		CHECK_EQ(bad, 0);
		strata_close(db);
	}
}

TEST(corrupt_manifest_fails_open)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "m-", 0, 50, "x", 25), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	REQUIRE_EQ(put_range(db, "n-", 0, 50, "x", 25), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	db_close(db);
	char key[160];
	REQUIRE_EQ(find_object(dir, "manifest/", 1, key, sizeof(key)), 0);
	REQUIRE_EQ(flip_object_byte(dir, key, 0.5), 0);
	const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;

	int rc = strata_open(&o, &db);
	CHECK_EQ(rc, STRATA_ECORRUPT);
	if (strstr(strata_last_error(), base) == NULL) {
		fprintf(stderr, "  error does not name manifest %s: '%s'\n", key, strata_last_error());
		CHECK(0);
	}
	if (rc == 0)
		strata_close(db);
}

/* ---------------------------------------------------------------- runner */

/** End a test: stop the watchdog, clean up. */
static void
t_end(void)
{
	alarm(0);
	t_cleanup();
}

/** Set on the thread whose manifest update the point below stalls. */
static __thread int stalled_writer;
/** The stall: the writer is in it / may leave it. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int in, go;
} stall = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static int
stall_point(const char *name, const void *arg)
{
	(void)arg;
	if (!stalled_writer || strcmp(name, "manifest.before_append") != 0)
		return 0;
	pthread_mutex_lock(&stall.mu);
	stall.in = 1;
	pthread_cond_broadcast(&stall.cv);
	while (!stall.go)
		pthread_cond_wait(&stall.cv, &stall.mu);
	pthread_mutex_unlock(&stall.mu);
	return 0;
}

/** The stalled writer: commit a prepared merge. */
struct stalled_commit {
	strata *db;
	strata_plan *plan;
	int rc;
};

static void *
stalled_commit_main(void *arg)
{
	struct stalled_commit *c = arg;
	stalled_writer = 1;
	c->rc = strata_commit_merge(c->db, c->plan);
	return NULL;
}

/** A manifest update that changes nothing but the position. */
static int
touch_mutate(void *ctx, struct manifest *next)
{
	(void)ctx;
	(void)next;
	return 0;
}

TEST(a_merge_stalled_past_a_manifest_collection_is_fenced_and_deletes_nothing)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	for (int g = 0; g < 4; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%d-", g);
		REQUIRE_EQ(put_range(db, prefix, 0, 20, "v", 20), 0);
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_merge(db, 0, 0, &plan), 0);
	CHECK_EQ(strata_plan_generations(plan), 4);
	env_default.point = stall_point;
	struct stalled_commit c = {db, plan, 0};
	pthread_t t;
	REQUIRE_EQ(pthread_create(&t, NULL, stalled_commit_main, &c), 0);
	pthread_mutex_lock(&stall.mu);
	while (!stall.in)
		pthread_cond_wait(&stall.cv, &stall.mu);
	pthread_mutex_unlock(&stall.mu);

	/* Another handle on the same store and epoch (an external compactor never claims)
	 * moves the log on, snapshots and collects the position the merge will create. */
	struct objstore *os = objects_of(dir);
	REQUIRE(os != NULL);
	struct manifest m;
	REQUIRE_EQ(manifest_load(os, SHARD0, &m), 0);
	uint64_t stalled_at = m.version + 1;
	struct manifest_opts mo = {.snapshot_edits = 4, .keep = 0};
	int rc = 0;
	for (int i = 0; i < 8 && rc == 0; i++)
		rc = manifest_commit_update(os, SHARD0, &mo, m.writer_epoch, &m, touch_mutate, NULL);
	CHECK_EQ(rc, 0);
	CHECK(m.snap_version > stalled_at);
	char key[160];
	uint64_t size;
	manifest_version_key(key, sizeof(key), SHARD0, stalled_at);
	CHECK_EQ(objstore_size(os, key, &size), STRATA_NOTFOUND);
	manifest_destroy(&m);
	objstore_destroy(os);
	long gens_before = count_objects(dir, "gen/");

	pthread_mutex_lock(&stall.mu);
	stall.go = 1;
	pthread_cond_broadcast(&stall.cv);
	pthread_mutex_unlock(&stall.mu);
	pthread_join(t, NULL);
	env_default.point = NULL;
	/* Its put of the collected position succeeded; the check after it tells it the
	 * position is not its own: fenced, and none of the merged generations is deleted. */
	CHECK_EQ(c.rc, STRATA_EFENCED);
	CHECK_EQ(gens_before, 4);
	CHECK_EQ(count_objects(dir, "gen/"), 4);
	db_close(db);

	/* The log's state is intact: every row readable, nothing missing. */
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (int g = 0; g < 4; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%d-", g);
		CHECK_EQ(range_misses(db, prefix, 0, 20, "v"), 0);
	}
	CHECK_EQ(stats_of(db).generations, 4);
	db_close(db);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	env.point = test_point;
	T(interrupted_merge_converges);
	T(recovery_replays_after_cursor_even_if_generations_drained);
	T(torn_wal_tail_is_truncated);
	T(corrupt_wal_entry_fails_open);
	T(failed_open_changes_nothing);
	T(corrupt_run_block_is_reported);
	T(corrupt_manifest_fails_open);
	T(a_large_wal_replays_every_row_while_another_thread_prefaults_the_memtable);
	T(a_replay_in_sorted_batches_keeps_the_newest_version_of_every_key);
	T(a_merge_stalled_past_a_manifest_collection_is_fenced_and_deletes_nothing);
	return HARNESS_END("test_recovery");
}
