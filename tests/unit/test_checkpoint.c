/*
 * test_checkpoint.c — strata_checkpoint through the public API: the copy opens to
 * exactly the rows acknowledged before the call under concurrent appenders and merges,
 * a merge committing in the middle of a checkpoint deletes nothing it still links, later
 * writes, merges and deletes of the original leave the copy byte for byte as it was, a
 * failure at any file operation leaves no directory, a refused hard link falls back to a
 * copy, and bad targets are refused naming what was wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../node/lib/env.h"
#include "../../node/strata.h"
#include "harness.h"

/** Tag of the temporary directories (engine_util.h). */
#define ENGINE_UTIL_TAG "ckpt"
#pragma GCC diagnostic ignored "-Wunused-function" /* engine_util.h's helpers this file skips */
#include "engine_util.h"

/* ---------------------------------------------------------------- helpers */

/** 1 when path exists (any kind of file). */
static int
exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/** FNV-1a over every file's relative path, size and bytes under dir, in name order. */
static uint64_t
tree_hash(const char *dir, const char *rel, uint64_t h)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s%s", dir, rel[0] ? "/" : "", rel);
	struct dirent **names = NULL;
	int n = scandir(path, &names, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *nm = names[i]->d_name;
		if (strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0) {
			char sub[4096], full[8192]; /* dir + "/" + sub never truncates */
			snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", nm);
			snprintf(full, sizeof(full), "%s/%s", dir, sub);
			for (const char *c = sub; *c; c++)
				h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
			struct stat st;
			if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
				h = tree_hash(dir, sub, h);
			} else {
				FILE *f = fopen(full, "rb");
				static unsigned char b[1 << 16];
				size_t got;
				h = (h ^ (uint64_t)st.st_size) * 0x100000001b3ull;
				while (f != NULL && (got = fread(b, 1, sizeof(b), f)) > 0)
					for (size_t k = 0; k < got; k++)
						h = (h ^ b[k]) * 0x100000001b3ull;
				if (f != NULL)
					fclose(f);
			}
		}
		free(names[i]);
	}
	free(names);
	return h;
}

/** Rows a scan of one shard visits. */
static int
row_count_cb(void *ctx, const strata_row *row)
{
	(void)row;
	(*(uint64_t *)ctx)++;
	return 0;
}

static uint64_t
shard_rows(strata *db, uint32_t shard)
{
	uint64_t n = 0;
	int rc = strata_scan(db, shard, NULL, 0, NULL, 0, row_count_cb, &n);
	if (rc != 0)
		fprintf(stderr, "  scan of shard %u: %s: %s\n", shard, strata_strerror(rc), strata_last_error());
	return n;
}

/** Open the checkpoint at dir (shards as stored) and check every shard's invariants. */
static strata *
open_checkpoint(const char *dir)
{
	strata_options o = opts_for(dir);
	o.shards = 0;
	strata *db = db_open(&o);
	for (uint32_t i = 0; db != NULL && i < strata_shards(db); i++) {
		int rc = strata_check(db, i);
		if (rc != 0)
			fprintf(stderr, "  check of shard %u of %s: %s\n", i, dir, strata_last_error());
	}
	return db;
}

/* ---------------------------------------------------------------- an environment with faults */

/** The real table the hooks call through. */
static struct env_ops real;
/** The store's table: a copy of real with the hooks below. */
static struct env_ops hooked;
/** File operations counted since armed; the fail_at-th fails (0: none). */
static atomic_int ops_seen, fail_at;
/** errno of the failure. */
static int fail_errno = EIO;
/** env.link always fails with this errno (0: links work). */
static int link_errno;
/** Called once at the first link of a checkpoint (NULL: none), then cleared. */
static void (*on_first_link)(void);

/** 1 when this call is the one to fail. */
static int
fault_now(void)
{
	int n = atomic_fetch_add(&ops_seen, 1) + 1;
	if (atomic_load(&fail_at) != 0 && n == atomic_load(&fail_at)) {
		errno = fail_errno;
		return 1;
	}
	return 0;
}

static int
h_open(const char *p, int fl, mode_t m)
{
	return fault_now() ? -1 : real.open(p, fl, m);
}

static ssize_t
h_pwrite(int fd, const void *b, size_t n, off_t off)
{
	return fault_now() ? -1 : real.pwrite(fd, b, n, off);
}

static ssize_t
h_pread(int fd, void *b, size_t n, off_t off)
{
	return fault_now() ? -1 : real.pread(fd, b, n, off);
}

/** Counted, failed when told, and otherwise skipped: these tests need no durability. */
static int
h_fsync(int fd)
{
	return fault_now() ? -1 : 0;
}

static int
h_ftruncate(int fd, off_t len)
{
	return fault_now() ? -1 : real.ftruncate(fd, len);
}

static int
h_fstat(int fd, struct stat *st)
{
	return fault_now() ? -1 : real.fstat(fd, st);
}

static int
h_rename(const char *a, const char *b)
{
	return fault_now() ? -1 : real.rename(a, b);
}

static int
h_mkdir(const char *p, mode_t m)
{
	return fault_now() ? -1 : real.mkdir(p, m);
}

static DIR *
h_opendir(const char *p)
{
	return fault_now() ? NULL : real.opendir(p);
}

static int
h_link(const char *a, const char *b)
{
	if (on_first_link != NULL) {
		void (*f)(void) = on_first_link;
		on_first_link = NULL;
		f();
	}
	if (fault_now())
		return -1;
	if (link_errno != 0) {
		errno = link_errno;
		return -1;
	}
	return real.link(a, b);
}

/** Options for a store of shards shards in dir running in the hooked table. */
static strata_options
hooked_opts(const char *dir, uint32_t shards)
{
	real = env_default;
	hooked = env_default;
	hooked.open = h_open;
	hooked.pwrite = h_pwrite;
	hooked.pread = h_pread;
	hooked.fsync = h_fsync;
	hooked.ftruncate = h_ftruncate;
	hooked.fstat = h_fstat;
	hooked.rename = h_rename;
	hooked.mkdir = h_mkdir;
	hooked.opendir = h_opendir;
	hooked.link = h_link;
	atomic_store(&fail_at, 0);
	atomic_store(&ops_seen, 0);
	link_errno = 0;
	on_first_link = NULL;
	strata_options o = opts_for(dir);
	o.shards = shards;
	o.env_ops = &hooked;
	return o;
}

/** Append keys "<p>%05d" [from, to) to shard with values "<key>=<tag>" padded to pad. */
static int
put_shard(strata *db, uint32_t shard, const char *p, int from, int to, const char *tag, size_t pad)
{
	static char val[70000];
	for (int i = from; i < to; i++) {
		char key[48];
		snprintf(key, sizeof(key), "%s%05d", p, i);
		size_t vl = make_value(val, sizeof(val), key, tag, pad);
		uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + shard;
		for (size_t j = strlen(key) + 1 + strlen(tag); j < vl; j++)
			val[j] = (char)(xorshift(&x) >> 56); /* incompressible */
		strata_row r = {key, strlen(key), val, vl};
		int rc = strata_append(db, shard, &r, 1);
		if (rc != 0) {
			fprintf(stderr, "  append %s: %s: %s\n", key, strata_strerror(rc), strata_last_error());
			return rc;
		}
	}
	return 0;
}

/** Keys of [from, to) under p in shard that are missing (want 1) or present (want 0). */
static int
shard_wrong(strata *db, uint32_t shard, const char *p, int from, int to, int want)
{
	int bad = 0;
	for (int i = from; i < to; i++) {
		char key[48];
		snprintf(key, sizeof(key), "%s%05d", p, i);
		void *v = NULL;
		size_t n = 0;
		int rc = strata_get(db, shard, key, strlen(key), &v, &n);
		if (rc == 0)
			strata_free(v);
		if ((rc == 0) != want && bad++ < 3)
			fprintf(stderr, "  shard %u key %s: %s, want %s\n", shard, key,
				rc == 0 ? "present" : strata_strerror(rc), want ? "present" : "absent");
	}
	return bad;
}

/* ---------------------------------------------------------------- concurrent appends */

/** Appender threads, batches per thread at most, rows per batch. */
#define CA_THREADS 4
#define CA_MAX_BATCHES 200000
#define CA_ROWS 3

/** 0 before the checkpoint call, 1 during it, 2 once it returned. */
static atomic_int ca_phase;
/** Tells the threads to stop. */
static atomic_int ca_stop;

/** One appender's record. */
struct ca_thread {
	/** The store. */
	strata *db;
	/** Thread number (its key prefix and its shard, modulo the shard count). */
	int id;
	/** Batches acknowledged. */
	atomic_int done;
	/** Per batch: the phase seen before the call and after it returned. */
	signed char before[CA_MAX_BATCHES], after[CA_MAX_BATCHES];
	/** First failure (0: none). */
	atomic_int rc;
};

static void *
ca_main(void *arg)
{
	struct ca_thread *t = arg;
	uint32_t shard = (uint32_t)t->id % strata_shards(t->db);
	for (int b = 0; b < CA_MAX_BATCHES && !atomic_load(&ca_stop); b++) {
		char keys[CA_ROWS][32], vals[CA_ROWS][64];
		strata_row rows[CA_ROWS];
		for (int j = 0; j < CA_ROWS; j++) {
			snprintf(keys[j], sizeof(keys[j]), "t%d-%06d-%d", t->id, b, j);
			size_t vl = make_value(vals[j], sizeof(vals[j]), keys[j], "ca", 24);
			rows[j] = (strata_row){keys[j], strlen(keys[j]), vals[j], vl};
		}
		t->before[b] = (signed char)atomic_load(&ca_phase);
		int rc = strata_append(t->db, shard, rows, CA_ROWS);
		t->after[b] = (signed char)atomic_load(&ca_phase);
		if (rc != 0) {
			atomic_store(&t->rc, rc);
			break;
		}
		atomic_store(&t->done, b + 1);
	}
	return NULL;
}

/** Seals and merges every shard over and over while the appenders run. */
static void *
ca_merger(void *arg)
{
	strata *db = arg;
	for (int i = 0; !atomic_load(&ca_stop); i++) {
		uint32_t s = (uint32_t)i % strata_shards(db);
		int rc = i % 3 == 2 ? strata_merge(db, s, 0, NULL) : strata_seal(db, s);
		if (rc != 0 && rc != STRATA_EBUSY)
			fprintf(stderr, "  merger: %s: %s\n", strata_strerror(rc), strata_last_error());
		usleep(500);
	}
	return NULL;
}

/** Wait until every thread acknowledged at least n batches (or stopped). */
static void
ca_wait(struct ca_thread *ts, int n)
{
	for (int i = 0; i < CA_THREADS; i++)
		while (atomic_load(&ts[i].done) < n && atomic_load(&ts[i].rc) == 0 && atomic_load(&ts[i].done) < CA_MAX_BATCHES)
			usleep(200);
}

TEST(checkpoint_holds_exactly_the_acknowledged_rows)
{
	char *src = tdir(), *parent = tdir(), dst[4200];
	snprintf(dst, sizeof(dst), "%s/ckpt", parent);
	strata_options o = opts_for(src);
	o.shards = 2;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	static struct ca_thread ts[CA_THREADS];
	pthread_t th[CA_THREADS], mt;
	atomic_store(&ca_phase, 0);
	atomic_store(&ca_stop, 0);
	for (int i = 0; i < CA_THREADS; i++) {
		memset(&ts[i], 0, sizeof(ts[i]));
		ts[i].db = db;
		ts[i].id = i;
		memset(ts[i].before, -1, sizeof(ts[i].before));
		pthread_create(&th[i], NULL, ca_main, &ts[i]);
	}
	pthread_create(&mt, NULL, ca_merger, db);
	ca_wait(ts, 300);
	atomic_store(&ca_phase, 1);
	int rc = strata_checkpoint(db, dst);
	atomic_store(&ca_phase, 2);
	if (rc != 0)
		fprintf(stderr, "  checkpoint: %s: %s\n", strata_strerror(rc), strata_last_error());
	int at_return[CA_THREADS];
	for (int i = 0; i < CA_THREADS; i++)
		at_return[i] = atomic_load(&ts[i].done);
	for (int i = 0; i < CA_THREADS; i++)
		while (atomic_load(&ts[i].done) < at_return[i] + 100 && atomic_load(&ts[i].rc) == 0 &&
		       atomic_load(&ts[i].done) < CA_MAX_BATCHES)
			usleep(200);
	atomic_store(&ca_stop, 1);
	for (int i = 0; i < CA_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_join(mt, NULL);
	REQUIRE_EQ(rc, 0);
	for (int i = 0; i < CA_THREADS; i++)
		CHECK_EQ(atomic_load(&ts[i].rc), 0);
	CHECK(!exists(strcat(strcpy((char[4300]){0}, dst), ".partial")));
	CHECK(!exists(strcat(strcpy((char[4300]){0}, dst), "/LOCK")));
	strata *ck = open_checkpoint(dst);
	REQUIRE(ck != NULL);
	CHECK_EQ(strata_shards(ck), 2);
	/* Per thread: batches acknowledged before the call all present; batches started after
	 * it returned all absent; in between, whole batches, and a prefix (a thread's batch
	 * starts only after its previous one was acknowledged). */
	uint64_t want_rows[2] = {0, 0};
	int acked_before = 0, started_after = 0, in_flight = 0;
	for (int i = 0; i < CA_THREADS; i++) {
		uint32_t shard = (uint32_t)i % 2;
		int done = atomic_load(&ts[i].done), seen_absent = 0, bad = 0;
		for (int b = 0; b < done; b++) {
			int present = 0;
			for (int j = 0; j < CA_ROWS; j++) {
				char key[32];
				snprintf(key, sizeof(key), "t%d-%06d-%d", i, b, j);
				void *v = NULL;
				size_t n = 0;
				int g = strata_get(ck, shard, key, strlen(key), &v, &n);
				if (g == 0) {
					present++;
					strata_free(v);
				}
			}
			int whole = present == 0 || present == CA_ROWS;
			int must = ts[i].after[b] == 0, must_not = ts[i].before[b] == 2;
			acked_before += must;
			started_after += must_not;
			in_flight += !must && !must_not;
			if (!whole || (must && !present) || (must_not && present) || (present && seen_absent)) {
				if (bad++ < 3)
					fprintf(stderr, "  thread %d batch %d: %d of %d rows present (phase %d..%d)%s\n",
						i, b, present, CA_ROWS, ts[i].before[b], ts[i].after[b],
						seen_absent ? " after an absent batch" : "");
			}
			if (present)
				want_rows[shard] += CA_ROWS;
			else
				seen_absent = 1;
		}
		CHECK_EQ(bad, 0);
	}
	fprintf(stderr, "  %d batches acknowledged before the call, %d in flight during it, %d started "
		"after it\n", acked_before, in_flight, started_after);
	CHECK(acked_before >= CA_THREADS * 300);
	CHECK(started_after >= CA_THREADS * 100);
	/* Nothing else: a scan finds only those rows. */
	CHECK_EQ(shard_rows(ck, 0), want_rows[0]);
	CHECK_EQ(shard_rows(ck, 1), want_rows[1]);
	db_close(ck);
	db_close(db);
}

/* ---------------------------------------------------------------- a merge in the middle */

/** The store the link hook merges. */
static strata *mid_db;
/** Result of that merge and the generations it folded. */
static int mid_rc = -1;
static uint32_t mid_merged;

static void
merge_now(void)
{
	mid_rc = strata_merge(mid_db, 0, 0, &mid_merged);
}

TEST(merge_committing_mid_checkpoint_deletes_nothing_linked)
{
	char *src = tdir(), *parent = tdir(), dst[4200];
	snprintf(dst, sizeof(dst), "%s/ckpt", parent);
	strata_options o = hooked_opts(src, 1);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	for (int g = 0; g < 4; g++) {
		REQUIRE_EQ(put_shard(db, 0, "m", g * 50, g * 50 + 50, "v", 40), 0);
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	REQUIRE_EQ(put_shard(db, 0, "m", 200, 230, "v", 40), 0); /* in the WAL only */
	long gens_before = count_objects(src, "gen/");
	CHECK_EQ(gens_before, 4);
	/* At its first link the checkpoint has pinned shard 0: a merge commits there and
	 * deletes the generations it folded that nothing else holds. */
	mid_db = db;
	on_first_link = merge_now;
	int rc = strata_checkpoint(db, dst);
	if (rc != 0)
		fprintf(stderr, "  checkpoint: %s: %s\n", strata_strerror(rc), strata_last_error());
	CHECK_EQ(mid_rc, 0);
	CHECK(mid_merged >= 4);
	REQUIRE_EQ(rc, 0);
	/* The original moved on to a base run; the checkpoint is the state before. */
	CHECK_EQ(count_objects(src, "run/"), 1);
	CHECK_EQ(count_objects(dst, "gen/"), 4);
	CHECK_EQ(count_objects(dst, "run/"), 0);
	strata *ck = open_checkpoint(dst);
	REQUIRE(ck != NULL);
	CHECK_EQ(shard_wrong(ck, 0, "m", 0, 230, 1), 0);
	CHECK_EQ(shard_rows(ck, 0), 230);
	db_close(ck);
	/* What the merge folded goes once the checkpoint lets go of it. */
	REQUIRE_EQ(strata_seal(db, 0), 0);
	CHECK_EQ(count_objects(src, "gen/"), 0);
	CHECK_EQ(shard_rows(db, 0), 230);
	db_close(db);
}

/* ---------------------------------------------------------------- later writes */

TEST(later_writes_and_merges_leave_the_checkpoint_unchanged)
{
	char *src = tdir(), *parent = tdir(), dst[4200];
	snprintf(dst, sizeof(dst), "%s/ckpt", parent);
	strata_options o = opts_for(src);
	o.shards = 2;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	/* Generations over the reaper's 8 MiB step, so a delete would cut them down first. */
	for (uint32_t s = 0; s < 2; s++) {
		REQUIRE_EQ(put_shard(db, s, "big", 0, 150, "v1", 65000), 0);
		REQUIRE_EQ(strata_seal(db, s), 0);
		REQUIRE_EQ(put_shard(db, s, "k", 0, 100, "v1", 40), 0);
		REQUIRE_EQ(strata_seal(db, s), 0);
		REQUIRE_EQ(put_shard(db, s, "w", 0, 100, "v1", 40), 0); /* WAL only */
	}
	int rc = strata_checkpoint(db, dst);
	if (rc != 0)
		fprintf(stderr, "  checkpoint: %s: %s\n", strata_strerror(rc), strata_last_error());
	REQUIRE_EQ(rc, 0);
	struct stat st;
	char obj[4300];
	struct manifest m;
	REQUIRE_EQ(load_manifest(dst, &m), 0);
	REQUIRE(m.ngens == 2);
	snprintf(obj, sizeof(obj), "%s/objects/" SHARD0 "gen/%016llx-%08llx.sst", dst,
		 (unsigned long long)m.gens[0].id, (unsigned long long)m.gens[0].epoch);
	CHECK(stat(obj, &st) == 0 && st.st_nlink == 2); /* a hard link, not a copy */
	CHECK(st.st_size > (8 << 20));
	manifest_destroy(&m);
	uint64_t h0 = tree_hash(dst, "", 0xcbf29ce484222325ull);
	/* The original overwrites, seals, merges (deleting the linked generations),
	 * compacts, and appends more. */
	for (uint32_t s = 0; s < 2; s++) {
		REQUIRE_EQ(put_shard(db, s, "k", 0, 100, "v2", 40), 0);
		REQUIRE_EQ(strata_merge(db, s, 0, NULL), 0);
		REQUIRE_EQ(put_shard(db, s, "k", 100, 200, "v2", 40), 0);
		REQUIRE_EQ(strata_merge(db, s, 0, NULL), 0);
		strata_plan *p = NULL;
		REQUIRE_EQ(strata_prepare_compact(db, s, 0, &p), 0);
		REQUIRE_EQ(strata_commit_merge(db, p), 0);
		REQUIRE_EQ(put_shard(db, s, "after", 0, 50, "v2", 40), 0);
	}
	CHECK_EQ(count_objects(src, "gen/"), 0);
	db_close(db);
	CHECK(tree_hash(dst, "", 0xcbf29ce484222325ull) == h0);
	strata *ck = open_checkpoint(dst);
	REQUIRE(ck != NULL);
	for (uint32_t s = 0; s < 2; s++) {
		CHECK_EQ(shard_wrong(ck, s, "big", 0, 150, 1), 0);
		CHECK_EQ(shard_wrong(ck, s, "w", 0, 100, 1), 0);
		CHECK_EQ(shard_wrong(ck, s, "after", 0, 50, 0), 0);
		CHECK_EQ(shard_wrong(ck, s, "k", 100, 200, 0), 0);
		CHECK_EQ(shard_rows(ck, s), 350);
		const char *key = "k00007", *want = "k00007=v1";
		void *v = NULL;
		size_t n = 0;
		REQUIRE_EQ(strata_get(ck, s, key, strlen(key), &v, &n), 0);
		CHECK(n == 40 && memcmp(v, want, strlen(want)) == 0); /* the value before the overwrite */
		strata_free(v);
	}
	db_close(ck);
}

TEST(merges_in_the_checkpoint_leave_the_original_unchanged)
{
	char *src = tdir(), *parent = tdir(), dst[4200], objs[4300];
	snprintf(dst, sizeof(dst), "%s/ckpt", parent);
	snprintf(objs, sizeof(objs), "%s/objects", src);
	strata_options o = opts_for(src);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_shard(db, 0, "big", 0, 150, "v1", 65000), 0); /* over the reaper's 8 MiB step */
	REQUIRE_EQ(strata_seal(db, 0), 0);
	REQUIRE_EQ(put_shard(db, 0, "k", 0, 50, "v1", 40), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	REQUIRE_EQ(strata_checkpoint(db, dst), 0);
	uint64_t h0 = tree_hash(objs, "", 0xcbf29ce484222325ull);
	/* The checkpoint, opened, folds and deletes the generations it shares with the original. */
	strata *ck = open_checkpoint(dst);
	REQUIRE(ck != NULL);
	REQUIRE_EQ(put_shard(ck, 0, "k", 0, 50, "v2", 40), 0);
	REQUIRE_EQ(strata_merge(ck, 0, 0, NULL), 0);
	CHECK_EQ(count_objects(dst, "gen/"), 0);
	db_close(ck);
	CHECK(tree_hash(objs, "", 0xcbf29ce484222325ull) == h0);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK_EQ(shard_wrong(db, 0, "big", 0, 150, 1), 0);
	CHECK_EQ(strata_merge(db, 0, 0, NULL), 0); /* reads every block of both generations */
	CHECK_EQ(shard_rows(db, 0), 200);
	db_close(db);
}

/* ---------------------------------------------------------------- failures */

TEST(failure_at_any_file_operation_leaves_no_directory)
{
	char *src = tdir(), *parent = tdir(), dst[4200], partial[4300];
	snprintf(dst, sizeof(dst), "%s/ckpt", parent);
	snprintf(partial, sizeof(partial), "%s.partial", dst);
	strata_options o = hooked_opts(src, 1);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	for (uint32_t s = 0; s < 1; s++) {
		REQUIRE_EQ(put_shard(db, s, "g", 0, 40, "v", 40), 0);
		REQUIRE_EQ(strata_seal(db, s), 0);
		REQUIRE_EQ(put_shard(db, s, "g", 40, 80, "v", 40), 0);
		REQUIRE_EQ(strata_merge(db, s, 0, NULL), 0);
		REQUIRE_EQ(put_shard(db, s, "g", 80, 120, "v", 40), 0);
		REQUIRE_EQ(strata_seal(db, s), 0);
		REQUIRE_EQ(put_shard(db, s, "g", 120, 160, "v", 40), 0);
	}
	int failures = 0, n;
	for (n = 1; n < 5000; n++) {
		atomic_store(&ops_seen, 0);
		atomic_store(&fail_at, n);
		int rc = strata_checkpoint(db, dst);
		atomic_store(&fail_at, 0);
		if (rc == 0) {
			CHECK(atomic_load(&ops_seen) < n); /* no fault was injected */
			break;
		}
		failures++;
		if (exists(dst) || exists(partial)) {
			fprintf(stderr, "  failing file operation %d (%s) left %s\n", n, strata_last_error(),
				exists(dst) ? dst : partial);
			CHECK(!"a failed checkpoint left a directory");
			break;
		}
	}
	fprintf(stderr, "  %d failing points, each left nothing; then it succeeded\n", failures);
	CHECK(failures > 20);
	CHECK(exists(dst) && !exists(partial));
	strata *ck = open_checkpoint(dst);
	REQUIRE(ck != NULL);
	for (uint32_t s = 0; s < 1; s++) {
		CHECK_EQ(shard_wrong(ck, s, "g", 0, 160, 1), 0);
		CHECK_EQ(shard_rows(ck, s), 160);
	}
	db_close(ck);
	/* The original never noticed. */
	for (uint32_t s = 0; s < 1; s++)
		CHECK_EQ(shard_rows(db, s), 160);
	db_close(db);
}

TEST(refused_hard_link_falls_back_to_a_copy)
{
	char *src = tdir(), *parent = tdir(), dst[4200];
	snprintf(dst, sizeof(dst), "%s/ckpt", parent);
	strata_options o = hooked_opts(src, 1);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_shard(db, 0, "x", 0, 100, "v", 40), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	REQUIRE_EQ(put_shard(db, 0, "x", 100, 120, "v", 40), 0);
	link_errno = EXDEV;
	int rc = strata_checkpoint(db, dst);
	link_errno = 0;
	if (rc != 0)
		fprintf(stderr, "  checkpoint: %s: %s\n", strata_strerror(rc), strata_last_error());
	REQUIRE_EQ(rc, 0);
	struct manifest m;
	REQUIRE_EQ(load_manifest(dst, &m), 0);
	REQUIRE(m.ngens == 1);
	char obj[4300];
	struct stat st;
	snprintf(obj, sizeof(obj), "%s/objects/" SHARD0 "gen/%016llx-%08llx.sst", dst,
		 (unsigned long long)m.gens[0].id, (unsigned long long)m.gens[0].epoch);
	CHECK(stat(obj, &st) == 0 && st.st_nlink == 1 && (uint64_t)st.st_size == m.gens[0].bytes);
	manifest_destroy(&m);
	/* Another error of link is not papered over. */
	char dst2[4300];
	snprintf(dst2, sizeof(dst2), "%s/ckpt2", parent);
	link_errno = EACCES;
	rc = strata_checkpoint(db, dst2);
	link_errno = 0;
	CHECK(rc != 0 && strstr(strata_last_error(), "hard-link") != NULL && !exists(dst2));
	db_close(db);
	strata *ck = open_checkpoint(dst);
	REQUIRE(ck != NULL);
	CHECK_EQ(shard_wrong(ck, 0, "x", 0, 120, 1), 0);
	db_close(ck);
}

TEST(bad_targets_are_refused)
{
	char *src = tdir(), *parent = tdir(), path[4300];
	strata_options o = opts_for(src);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_shard(db, 0, "b", 0, 10, "v", 40), 0);
	CHECK_EQ(strata_checkpoint(db, NULL), STRATA_EINVAL);
	CHECK_EQ(strata_checkpoint(db, ""), STRATA_EINVAL);
	CHECK_EQ(strata_checkpoint(NULL, parent), STRATA_EINVAL);
	CHECK_EQ(strata_checkpoint(db, parent), STRATA_EEXIST); /* exists */
	CHECK(strstr(strata_last_error(), "already exists") != NULL);
	snprintf(path, sizeof(path), "%s/no/such/ckpt", parent);
	CHECK_EQ(strata_checkpoint(db, path), STRATA_NOTFOUND);
	CHECK(strstr(strata_last_error(), "parent directory") != NULL);
	snprintf(path, sizeof(path), "%s/busy.partial", parent);
	REQUIRE(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/busy", parent);
	CHECK_EQ(strata_checkpoint(db, path), STRATA_EEXIST);
	CHECK(strstr(strata_last_error(), "interrupted") != NULL);
	/* A trailing slash names the same directory. */
	snprintf(path, sizeof(path), "%s/ok/", parent);
	CHECK_EQ(strata_checkpoint(db, path), 0);
	snprintf(path, sizeof(path), "%s/ok", parent);
	CHECK_EQ(strata_checkpoint(db, path), STRATA_EEXIST);
	db_close(db);
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
	T(checkpoint_holds_exactly_the_acknowledged_rows);
	T(merge_committing_mid_checkpoint_deletes_nothing_linked);
	T(later_writes_and_merges_leave_the_checkpoint_unchanged);
	T(merges_in_the_checkpoint_leave_the_original_unchanged);
	T(failure_at_any_file_operation_leaves_no_directory);
	T(refused_hard_link_falls_back_to_a_copy);
	T(bad_targets_are_refused);
	return HARNESS_END("test_checkpoint");
}
