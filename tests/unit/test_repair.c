/*
 * test_repair.c — `strata inspect --verify` and `strata repair` on damaged data
 * directories: a flipped byte in the middle of a WAL segment is reported naming file
 * and offset, a dry-run repair changes nothing, --truncate-wal cuts the segment after
 * saving it and the store opens again with the intact prefix; a clean store and a
 * torn tail pass; damage a repair cannot fix is reported; a held directory is refused.
 * Stores are made through node/strata.h; the CLI runs as "$BUILD/strata".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../node/strata.h"
#include "harness.h"

/** Seconds the whole binary may take before the watchdog declares it hung. */
#define WATCHDOG_S 120
/** Rows per append in these tests. */
#define BATCH 10
/** Largest captured command output. */
#define OUT_MAX (1 << 20)

/** Captured output of the last command run by cli(). */
static char out[OUT_MAX];

static void
watchdog_fire(int sig)
{
	(void)sig;
	static const char msg[] = "  watchdog: test_repair did not finish in time\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(2);
}

/** Path of the strata binary. */
static const char *
strata_bin(void)
{
	static char path[1024];
	const char *b = getenv("BUILD");
	snprintf(path, sizeof(path), "%s/strata", b && b[0] ? b : "build");
	return path;
}

/** Run `strata ARGS` with stdout and stderr captured into out; the exit status, or -1. */
static int
cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
cli(const char *fmt, ...)
{
	char args[4096], cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", strata_bin(), args);
	FILE *p = popen(cmd, "r");
	out[0] = '\0';
	if (p == NULL)
		return -1;
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/** CHECK that the last output contains s, printing the output when it does not. */
#define CHECK_OUT(s)                                                                          \
	do {                                                                                  \
		if (strstr(out, (s)) == NULL) {                                               \
			fprintf(stderr, "  %s:%d: output lacks \"%s\":\n%s\n", __FILE__, __LINE__, \
				(s), out);                                                    \
			harness_cur_failed = 1;                                               \
		}                                                                             \
	} while (0)

static strata_options
opts_for(const char *dir)
{
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1;
	o.sync = STRATA_SYNC_NONE;
	return o;
}

/** Key of row i. */
static void
key_of(int i, char *k, size_t cap)
{
	snprintf(k, cap, "key-%05d", i);
}

/** Value of row i. */
static void
value_of(int i, char *v, size_t cap)
{
	snprintf(v, cap, "value-%05d-padding-padding-padding-padding", i);
}

/** Append rows [from, from + BATCH) as one entry. */
static int
put_batch(strata *db, int from)
{
	char keys[BATCH][32], vals[BATCH][64];
	strata_row rows[BATCH];
	for (int i = 0; i < BATCH; i++) {
		key_of(from + i, keys[i], sizeof(keys[i]));
		value_of(from + i, vals[i], sizeof(vals[i]));
		rows[i] = (strata_row){keys[i], strlen(keys[i]), vals[i], strlen(vals[i])};
	}
	int rc = strata_append(db, 0, rows, BATCH);
	if (rc != 0)
		fprintf(stderr, "  append: %s: %s\n", strata_strerror(rc), strata_last_error());
	return rc;
}

/** Rows [from, to) that do not read back as written. */
static int
rows_missing(strata *db, int from, int to)
{
	int bad = 0;
	for (int i = from; i < to; i++) {
		char k[32], want[64];
		key_of(i, k, sizeof(k));
		value_of(i, want, sizeof(want));
		void *v = NULL;
		size_t n = 0;
		int rc = strata_get(db, 0, k, strlen(k), &v, &n);
		if (rc != 0 || n != strlen(want) || memcmp(v, want, n) != 0)
			bad++;
		if (rc == 0)
			strata_free(v);
	}
	return bad;
}

/** Rows [from, to) that are present. */
static int
rows_present(strata *db, int from, int to)
{
	int found = 0;
	for (int i = from; i < to; i++) {
		char k[32];
		key_of(i, k, sizeof(k));
		void *v = NULL;
		size_t n = 0;
		if (strata_get(db, 0, k, strlen(k), &v, &n) == 0) {
			found++;
			strata_free(v);
		}
	}
	return found;
}

/** Names of shard 0's WAL segments, sorted; how many (at most max). */
static int
list_segments(const char *dir, char names[][128], int max)
{
	char wdir[1024];
	snprintf(wdir, sizeof(wdir), "%s/wal/shard-0000", dir);
	DIR *d = opendir(wdir);
	if (d == NULL)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".wal") != 0 || len >= 128 || n >= max)
			continue;
		int i = n++;
		while (i > 0 && strcmp(names[i - 1], e->d_name) > 0) {
			memcpy(names[i], names[i - 1], 128);
			i--;
		}
		memcpy(names[i], e->d_name, len + 1);
	}
	closedir(d);
	return n;
}

/** A whole file in malloc'ed memory (NULL on failure). */
static unsigned char *
read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		fclose(f);
		return NULL;
	}
	unsigned char *b = malloc((size_t)st.st_size + 1);
	size_t n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	if (b == NULL || n != (size_t)st.st_size) {
		free(b);
		return NULL;
	}
	*len = n;
	return b;
}

static long long
file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int
flip_byte(const char *path, long long off)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	unsigned char c;
	int rc = -1;
	if (pread(fd, &c, 1, off) == 1) {
		c ^= 0x5a;
		if (pwrite(fd, &c, 1, off) == 1)
			rc = 0;
	}
	close(fd);
	return rc;
}

/** Entries in DIR named "repair-*". */
static int
count_repair_dirs(const char *dir, char *first, size_t cap)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "repair-", 7) == 0) {
			if (n++ == 0 && first)
				snprintf(first, cap, "%s", e->d_name);
		}
	closedir(d);
	return n;
}

/**
 * A store whose single WAL segment holds four entries of BATCH rows each (positions
 * 1..40), closed. sizes[i] is the segment's size after entry i. 0 or -1.
 */
static int
make_four_entries(const char *dir, char *seg, size_t cap, char *name, size_t ncap, long long sizes[4])
{
	strata_options o = opts_for(dir);
	strata *db = NULL;
	int rc = strata_open(&o, &db);
	if (rc != 0) {
		fprintf(stderr, "  strata_open: %s\n", strata_last_error());
		return -1;
	}
	char names[8][128];
	for (int b = 0; b < 4; b++) {
		if (put_batch(db, b * BATCH) != 0 || list_segments(dir, names, 8) != 1) {
			strata_close(db);
			return -1;
		}
		snprintf(seg, cap, "%s/wal/shard-0000/%s", dir, names[0]);
		sizes[b] = file_size(seg);
	}
	strata_close(db);
	snprintf(name, ncap, "%s", names[0]);
	return 0;
}

TEST(flipped_wal_byte_is_reported_and_repaired)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	char seg[1024], name[128];
	long long sz[4];
	REQUIRE_EQ(make_four_entries(dir, seg, sizeof(seg), name, sizeof(name), sz), 0);
	REQUIRE(sz[0] > 24 && sz[1] > sz[0] && sz[3] > sz[2]);
	/* Flip a byte inside the payload of the second entry (positions 11..20): the first
	 * entry stays an intact prefix, two whole entries follow the damage. */
	long long bad_off = sz[0];
	REQUIRE_EQ(flip_byte(seg, bad_off + 24 + 10), 0);
	size_t orig_len = 0;
	unsigned char *orig = read_file(seg, &orig_len);
	REQUIRE(orig != NULL);
	char at[64];
	snprintf(at, sizeof(at), "at offset %lld", bad_off);

	/* inspect --verify: exit 1, names the segment and the offset. */
	CHECK_EQ(cli("inspect '%s' --verify", dir), 1);
	CHECK_OUT(name);
	CHECK_OUT(at);
	CHECK_OUT("verify: FAILED");
	CHECK_OUT("INVALID");
	CHECK_OUT("epoch 1");
	/* The JSON carries the same verdict in the shard's object. */
	CHECK_EQ(cli("inspect '%s' --verify --json", dir), 1);
	json_error_t jerr;
	json_t *root = json_loads(out, 0, &jerr);
	CHECK(root != NULL);
	if (root != NULL) {
		json_t *sh = json_array_get(json_object_get(root, "shards"), 0);
		const char *wv = json_string_value(json_object_get(sh, "wal_verify"));
		CHECK(wv != NULL && strstr(wv, name) != NULL && strstr(wv, at) != NULL);
		json_t *s0 = json_array_get(json_object_get(sh, "wal_segments"), 0);
		CHECK(s0 != NULL && strcmp(json_string_value(json_object_get(s0, "state")), "invalid") == 0);
		CHECK_EQ(json_integer_value(json_object_get(s0, "valid_bytes")), bad_off);
		json_decref(root);
	}

	/* An open refuses it. */
	strata_options o = opts_for(dir);
	strata *db = NULL;
	int rc = strata_open(&o, &db);
	CHECK_EQ(rc, STRATA_ECORRUPT);
	if (rc == 0)
		strata_close(db);

	/* A dry run: exit 1, says what it would do, changes nothing. */
	CHECK_EQ(cli("repair '%s'", dir), 1);
	CHECK_OUT(name);
	CHECK_OUT(at);
	CHECK_OUT("would truncate");
	CHECK_OUT("2 intact entries after the damage, positions 21..40, would be dropped");
	CHECK_OUT("repair needed");
	size_t now_len = 0;
	unsigned char *now = read_file(seg, &now_len);
	CHECK(now != NULL && now_len == orig_len && memcmp(now, orig, orig_len) == 0);
	free(now);
	char names[8][128];
	CHECK_EQ(list_segments(dir, names, 8), 1);
	CHECK_EQ(count_repair_dirs(dir, NULL, 0), 0);

	/* --json of the dry run counts the same. */
	CHECK_EQ(cli("repair '%s' --json", dir), 1);
	root = json_loads(out, 0, &jerr);
	CHECK(root != NULL);
	if (root != NULL) {
		CHECK(strcmp(json_string_value(json_object_get(root, "status")), "repair_needed") == 0);
		json_t *g = json_array_get(json_object_get(root, "wal_segments"), 0);
		CHECK_EQ(json_integer_value(json_object_get(g, "offset")), bad_off);
		CHECK_EQ(json_integer_value(json_object_get(g, "intact_entries_dropped")), 2);
		CHECK_EQ(json_integer_value(json_object_get(g, "intact_first_seq")), 21);
		CHECK_EQ(json_integer_value(json_object_get(g, "intact_last_seq")), 40);
		CHECK_EQ(json_integer_value(json_object_get(g, "bytes_dropped")), (long long)orig_len - bad_off);
		CHECK_EQ(json_integer_value(json_object_get(g, "damaged_bytes")), sz[1] - sz[0]);
		CHECK_EQ(json_integer_value(json_object_get(g, "lost_first_seq")), 11);
		CHECK_EQ(json_integer_value(json_object_get(g, "lost_last_seq")), 40);
		CHECK(json_is_false(json_object_get(g, "done")));
		json_decref(root);
	}

	/* The repair: exit 0, reports what was dropped, keeps a copy of the original. */
	CHECK_EQ(cli("repair '%s' --truncate-wal", dir), 0);
	char want[1400];
	snprintf(want, sizeof(want), "truncated %s at offset %lld: %lld of %zu bytes dropped", seg, bad_off,
		 (long long)orig_len - bad_off, orig_len);
	CHECK_OUT(want);
	snprintf(want, sizeof(want), "the damaged entry at offset %lld held positions 11..20", bad_off);
	CHECK_OUT(want);
	snprintf(want, sizeof(want), "2 intact entries after the damage, positions 21..40, were dropped; "
		 "%lld damaged bytes", sz[1] - sz[0]);
	CHECK_OUT(want);
	CHECK_OUT("positions 11..40 are lost");
	CHECK_OUT("the WAL passes the checks of an open now");
	char rdir[256];
	CHECK_EQ(count_repair_dirs(dir, rdir, sizeof(rdir)), 1);
	char backup[1536];
	snprintf(backup, sizeof(backup), "%s/%s/wal/shard-0000/%s", dir, rdir, name);
	CHECK_OUT(backup);
	size_t blen = 0;
	unsigned char *b = read_file(backup, &blen);
	CHECK(b != NULL && blen == orig_len && memcmp(b, orig, orig_len) == 0);
	free(b);
	now = read_file(seg, &now_len);
	CHECK(now != NULL && now_len == (size_t)bad_off && memcmp(now, orig, now_len) == 0);
	free(now);
	free(orig);

	/* Verify passes now, and the store opens with the intact prefix. */
	CHECK_EQ(cli("inspect '%s' --verify", dir), 0);
	rc = strata_open(&o, &db);
	CHECK_EQ(rc, 0);
	if (rc == 0) {
		CHECK_EQ(rows_missing(db, 0, BATCH), 0);
		CHECK_EQ(rows_present(db, BATCH, 4 * BATCH), 0);
		/* It takes new rows, which survive a reopen. */
		CHECK_EQ(put_batch(db, 100), 0);
		strata_close(db);
		rc = strata_open(&o, &db);
		CHECK_EQ(rc, 0);
		if (rc == 0) {
			CHECK_EQ(rows_missing(db, 0, BATCH), 0);
			CHECK_EQ(rows_missing(db, 100, 100 + BATCH), 0);
			strata_close(db);
		}
	}
	CHECK_EQ(cli("repair '%s'", dir), 0);
	CHECK_OUT("nothing to repair");
	harness_rmrf(dir);
	free(dir);
}

TEST(damage_in_an_earlier_segment_loses_up_to_the_next_one)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	strata_options o = opts_for(dir);
	o.wal_segment_bytes = 4096;
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	/* ~600 bytes an entry: a segment rolls every few entries. */
	for (int b = 0; b < 20; b++)
		REQUIRE_EQ(put_batch(db, b * BATCH), 0);
	strata_close(db);
	char names[64][128];
	int n = list_segments(dir, names, 64);
	REQUIRE(n >= 3);
	unsigned long long next_first = strtoull(names[1], NULL, 10);
	REQUIRE(next_first > 1 + BATCH);
	char seg[1024];
	snprintf(seg, sizeof(seg), "%s/wal/shard-0000/%s", dir, names[0]);
	/* A flipped byte in the first entry's payload of the first segment. */
	REQUIRE_EQ(flip_byte(seg, 24 + 24 + 10), 0);

	CHECK_EQ(cli("inspect '%s' --verify", dir), 1);
	CHECK_OUT(names[0]);
	CHECK_OUT("at offset 24");
	CHECK_EQ(cli("repair '%s' --truncate-wal", dir), 0);
	char want[256];
	snprintf(want, sizeof(want), "positions 1..%llu are lost (the next segment starts at position %llu)",
		 next_first - 1, next_first);
	CHECK_OUT(want);
	snprintf(want, sizeof(want), "intact entries after the damage, positions %d..%llu, were dropped",
		 BATCH + 1, next_first - 1);
	CHECK_OUT(want);
	CHECK_EQ(file_size(seg), 24);
	REQUIRE_EQ(strata_open(&o, &db), 0);
	CHECK_EQ(rows_present(db, 0, (int)next_first - 1), 0);
	CHECK_EQ(rows_missing(db, (int)next_first - 1, 20 * BATCH), 0);
	strata_close(db);
	harness_rmrf(dir);
	free(dir);
}

TEST(clean_store_passes)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	strata_options o = opts_for(dir);
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(put_batch(db, 0), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	REQUIRE_EQ(put_batch(db, BATCH), 0);
	strata_close(db);
	CHECK_EQ(cli("inspect '%s' --verify", dir), 0);
	CHECK_OUT("verify: ok");
	CHECK_EQ(cli("inspect '%s' --verify --json", dir), 0);
	CHECK_OUT("\"wal_verify\": \"ok\"");
	CHECK_EQ(cli("repair '%s'", dir), 0);
	CHECK_OUT("nothing to repair");
	CHECK_EQ(cli("repair '%s' --truncate-wal", dir), 0);
	CHECK_EQ(count_repair_dirs(dir, NULL, 0), 0);
	harness_rmrf(dir);
	free(dir);
}

/** Path of shard 0's WAL object with the highest position under dir/objects (wal = store). */
static int
last_wal_object(const char *dir, char *path, size_t cap)
{
	char wdir[1024], best[64] = "";
	snprintf(wdir, sizeof(wdir), "%s/objects/shard-0000/wal", dir);
	DIR *d = opendir(wdir);
	if (d == NULL)
		return -1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strlen(e->d_name) == 20 && strcmp(e->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", e->d_name);
	closedir(d);
	if (best[0] == '\0')
		return -1;
	snprintf(path, cap, "%s/%s", wdir, best);
	return 0;
}

/** Appends after the seal in store_wal_objects_are_listed_and_verified: one object each. */
#define STORE_WAL_BATCHES 300

TEST(store_wal_objects_are_listed_and_verified)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	strata_options o = opts_for(dir);
	o.wal = STRATA_WAL_STORE;
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(put_batch(db, 0), 0);
	REQUIRE_EQ(put_batch(db, BATCH), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	/* More objects than inspect lists (256), so the last one, damaged below, is only
	 * found if every object is checked. */
	for (int i = 0; i < STORE_WAL_BATCHES; i++)
		REQUIRE_EQ(put_batch(db, (2 + i) * BATCH), 0);
	strata_close(db);
	CHECK_EQ(cli("repair '%s'", dir), 0);
	CHECK_OUT("nothing to repair");

	CHECK_EQ(cli("inspect '%s' --verify --json", dir), 0);
	json_error_t jerr;
	json_t *root = json_loads(out, 0, &jerr);
	REQUIRE(root != NULL);
	json_t *sh = json_array_get(json_object_get(root, "shards"), 0);
	json_t *objs = json_object_get(sh, "wal_objects");
	REQUIRE(json_is_array(objs));
	/* The appends after the seal are objects the next open replays, each a whole batch. */
	size_t i, replayed = 0, entries = 0;
	json_t *ob;
	json_array_foreach(objs, i, ob)
	{
		if (strcmp(json_string_value(json_object_get(ob, "state")), "replayed") != 0)
			continue;
		CHECK(strcmp(json_string_value(json_object_get(ob, "kind")), "batch") == 0);
		CHECK(json_integer_value(json_object_get(ob, "last_seq")) >
		      json_integer_value(json_object_get(json_object_get(sh, "manifest"),
							 "replay_after_wal_entry_position")));
		replayed++;
		entries += (size_t)json_integer_value(json_object_get(ob, "entries"));
	}
	CHECK(replayed >= 250); /* of the 256 listed; the rest are markers below the cursor */
	CHECK_EQ(entries, replayed); /* one append, one object, one entry */
	CHECK(json_integer_value(json_object_get(sh, "wal_object_count")) >= STORE_WAL_BATCHES);
	CHECK_EQ(json_array_size(objs), 256);
	json_decref(root);
	CHECK_EQ(cli("inspect '%s'", dir), 0);
	CHECK_OUT("wal objects: ");
	CHECK_OUT("  batch  epoch 1");

	/* A flipped byte in the last object's rows: inspect --verify names it, as the open
	 * that refuses the store does; without --verify only headers are read. */
	char obj[1200];
	REQUIRE_EQ(last_wal_object(dir, obj, sizeof(obj)), 0);
	struct stat st;
	REQUIRE_EQ(stat(obj, &st), 0);
	int fd = open(obj, O_RDWR);
	REQUIRE(fd >= 0);
	unsigned char c;
	off_t at = st.st_size - 3;
	REQUIRE_EQ(pread(fd, &c, 1, at), 1);
	c ^= 0x40;
	REQUIRE_EQ(pwrite(fd, &c, 1, at), 1);
	close(fd);
	CHECK_EQ(cli("inspect '%s'", dir), 0);
	CHECK_EQ(cli("inspect '%s' --verify", dir), 1);
	CHECK_OUT("INVALID: wal: corrupt object shard-0000/wal/");
	CHECK_OUT("entry payload checksum mismatch");
	CHECK_OUT("verify: FAILED");
	/* strata repair names it too, as a problem it does not fix. */
	CHECK_EQ(cli("repair '%s'", dir), 1);
	CHECK_OUT("an open refuses a WAL object on the store");
	CHECK_OUT("entry payload checksum mismatch");
	db = NULL;
	CHECK(strata_open(&o, &db) != 0);
	CHECK(strstr(strata_last_error(), "entry payload checksum mismatch") != NULL);
	if (db != NULL)
		strata_close(db);
	harness_rmrf(dir);
	free(dir);
}

TEST(torn_tail_passes_verify)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	char seg[1024], name[128];
	long long sz[4];
	REQUIRE_EQ(make_four_entries(dir, seg, sizeof(seg), name, sizeof(name), sz), 0);
	/* Cut the last entry in half: an interrupted append, which an open truncates. */
	REQUIRE_EQ(truncate(seg, sz[2] + (sz[3] - sz[2]) / 2), 0);
	CHECK_EQ(cli("inspect '%s' --verify", dir), 0);
	CHECK_OUT("verify: ok");
	char want[256];
	snprintf(want, sizeof(want), "torn tail at offset %lld", sz[2]);
	CHECK_OUT(want);
	CHECK_EQ(cli("repair '%s'", dir), 0);
	strata_options o = opts_for(dir);
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	CHECK_EQ(rows_missing(db, 0, 3 * BATCH), 0);
	strata_close(db);
	harness_rmrf(dir);
	free(dir);
}

TEST(unrepairable_damage_is_reported)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	strata_options o = opts_for(dir);
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	REQUIRE_EQ(put_batch(db, 0), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	strata_close(db);
	/* Remove the generation the manifest names. */
	char gdir[1024];
	snprintf(gdir, sizeof(gdir), "%s/objects/shard-0000/gen", dir);
	DIR *d = opendir(gdir);
	REQUIRE(d != NULL);
	struct dirent *e;
	int removed = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char p[2048];
		snprintf(p, sizeof(p), "%s/%s", gdir, e->d_name);
		removed += unlink(p) == 0;
	}
	closedir(d);
	REQUIRE_EQ(removed, 1);
	CHECK_EQ(cli("inspect '%s' --verify", dir), 1);
	CHECK_OUT("verify: FAILED");
	CHECK_EQ(cli("repair '%s' --truncate-wal", dir), 1);
	CHECK_OUT("strata repair does not fix this: restore the shard from a backup");
	CHECK_EQ(count_repair_dirs(dir, NULL, 0), 0);
	harness_rmrf(dir);
	free(dir);
}

TEST(repair_refuses_a_held_directory)
{
	char *dir = harness_tmpdir("repair");
	REQUIRE(dir != NULL);
	char seg[1024], name[128];
	long long sz[4];
	REQUIRE_EQ(make_four_entries(dir, seg, sizeof(seg), name, sizeof(name), sz), 0);
	REQUIRE_EQ(flip_byte(seg, sz[0] + 24 + 10), 0);
	size_t len0 = 0, len1 = 0;
	unsigned char *before = read_file(seg, &len0);
	REQUIRE(before != NULL);
	/* Hold DIR/LOCK the way a node does. */
	char lock[1024];
	snprintf(lock, sizeof(lock), "%s/LOCK", dir);
	int fd = open(lock, O_RDWR | O_CREAT, 0644);
	REQUIRE(fd >= 0);
	REQUIRE_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
	REQUIRE(ftruncate(fd, 0) == 0 && pwrite(fd, "424242\n", 7, 0) == 7);
	CHECK_EQ(cli("repair '%s' --truncate-wal", dir), 1);
	char want[1100];
	snprintf(want, sizeof(want), "%s is in use by a running node (pid 424242)", dir);
	CHECK_OUT(want);
	unsigned char *after = read_file(seg, &len1);
	CHECK(after != NULL && len1 == len0 && memcmp(after, before, len0) == 0);
	CHECK_EQ(count_repair_dirs(dir, NULL, 0), 0);
	free(after);
	free(before);
	close(fd);
	/* Released: the repair runs. */
	CHECK_EQ(cli("repair '%s' --truncate-wal", dir), 0);
	harness_rmrf(dir);
	free(dir);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	alarm(WATCHDOG_S);
	if (access(strata_bin(), X_OK) != 0) {
		fprintf(stderr, "test_repair: %s is not built (make %s)\n", strata_bin(), strata_bin());
		return 1;
	}
	RUN(flipped_wal_byte_is_reported_and_repaired);
	RUN(damage_in_an_earlier_segment_loses_up_to_the_next_one);
	RUN(clean_store_passes);
	RUN(torn_tail_passes_verify);
	RUN(store_wal_objects_are_listed_and_verified);
	RUN(unrepairable_damage_is_reported);
	RUN(repair_refuses_a_held_directory);
	return HARNESS_END("test_repair");
}
