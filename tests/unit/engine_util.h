/*
 * engine_util.h — what the tests of the engine through the public API (test_engine.c,
 * test_recovery.c) share: per-test state (temporary directories, open stores, a
 * watchdog), rows written and read back by key pattern, whole-shard scans, statistics,
 * and shard 0's objects and manifest. Static functions, like harness.h. Define
 * ENGINE_UTIL_TAG (the temporary directories' name tag) before including it.
 */
#ifndef STRATA_ENGINE_UTIL_H
#define STRATA_ENGINE_UTIL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../node/core/manifest.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "harness.h"

#ifndef ENGINE_UTIL_TAG
#error "define ENGINE_UTIL_TAG (the temporary directories' tag) before including engine_util.h"
#endif

#ifndef TEST
#define TEST(name) static void name(void)
#endif

/** Object-store prefix of shard 0. */
#define SHARD0 "shard-0000/"
/** Seconds a test may take before the watchdog declares it hung. */
#ifndef WATCHDOG_S
#define WATCHDOG_S 60
#endif
/** Most stores one test keeps open at once. */
#define MAX_DBS 8
/** Most temporary directories one test creates. */
#define MAX_DIRS 8

/* ---------------------------------------------------------------- per-test state */

/** Name of the running test, for the watchdog. */
static const char *t_name = "";
/** Stores opened by the running test and not yet closed. */
static strata *t_dbs[MAX_DBS];
/** Directories created by the running test. */
static char *t_dirs[MAX_DIRS];

/** SIGALRM: the running test hung; say so and exit. */
static void
watchdog_fire(int sig)
{
	(void)sig;
	char msg[1024];
	int n = snprintf(msg, sizeof(msg),
			 "  watchdog: %s did not finish within %d s: an operation blocked; "
			 "its data is left in %s\nnot ok - %s\n",
			 t_name, WATCHDOG_S, t_dirs[0] ? t_dirs[0] : "(no directory)", t_name);
	if (n > (int)sizeof(msg) - 1)
		n = (int)sizeof(msg) - 1;
	if (write(2, msg, (size_t)n) < 0)
		_exit(2);
	_exit(2);
}

/** A fresh temporary directory, removed by t_cleanup. */
static char *
tdir(void)
{
	char *d = harness_tmpdir(ENGINE_UTIL_TAG);
	for (int i = 0; i < MAX_DIRS; i++) {
		if (t_dirs[i] == NULL) {
			t_dirs[i] = d;
			return d;
		}
	}
	fprintf(stderr, "  too many temp dirs in one test\n");
	abort();
}

/** Options for a one-shard store in dir without syncs. */
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

/** Open a store, tracked so the test runner closes it if a test bails out. NULL on failure. */
static strata *
db_open(const strata_options *o)
{
	strata *db = NULL;
	int rc = strata_open(o, &db);
	if (rc != 0) {
		fprintf(stderr, "  strata_open(%s) = %s: %s\n", o->dir, strata_strerror(rc),
			strata_last_error());
		return NULL;
	}
	for (int i = 0; i < MAX_DBS; i++) {
		if (t_dbs[i] == NULL) {
			t_dbs[i] = db;
			return db;
		}
	}
	fprintf(stderr, "  too many open stores in one test\n");
	abort();
}

/** Close a store db_open opened. */
static void
db_close(strata *db)
{
	for (int i = 0; i < MAX_DBS; i++)
		if (t_dbs[i] == db)
			t_dbs[i] = NULL;
	strata_close(db);
}

/* ---------------------------------------------------------------- rows */

static uint64_t
xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/** Value of a row: "<key>=<tag>" padded with '.' to at least pad bytes. */
static size_t
make_value(char *dst, size_t cap, const char *key, const char *tag, size_t pad)
{
	int n = snprintf(dst, cap, "%s=%s", key, tag);
	size_t len = (size_t)n;
	while (len < pad && len + 1 < cap)
		dst[len++] = '.';
	dst[len] = '\0';
	return len;
}

/** Append keys "<prefix>%05d" for i in [from, to) in batches of `batch`, values tagged `tag`. */
static int
put_range(strata *db, const char *prefix, int from, int to, const char *tag, int batch)
{
	char keys[64][48], vals[64][160];
	strata_row rows[64];
	if (batch < 1 || batch > 64)
		batch = 64;
	for (int i = from; i < to;) {
		int n = 0;
		for (; n < batch && i < to; n++, i++) {
			snprintf(keys[n], sizeof(keys[n]), "%s%05d", prefix, i);
			size_t vl = make_value(vals[n], sizeof(vals[n]), keys[n], tag, 40);
			rows[n] = (strata_row){ keys[n], strlen(keys[n]), vals[n], vl };
		}
		int rc = strata_append(db, 0, rows, (size_t)n);
		if (rc != 0) {
			fprintf(stderr, "  append %s..: %s: %s\n", keys[0], strata_strerror(rc),
				strata_last_error());
			return rc;
		}
	}
	return 0;
}

/** 1 if key reads back exactly want (want NULL: must be STRATA_NOTFOUND); prints otherwise. */
static int
get_is(strata *db, const char *key, const char *want)
{
	void *v = NULL;
	size_t n = 0;
	int rc = strata_get(db, 0, key, strlen(key), &v, &n);
	if (want == NULL) {
		if (rc == STRATA_NOTFOUND)
			return 1;
		fprintf(stderr, "  get %s: want NOTFOUND, got %s (%s)\n", key, strata_strerror(rc),
			rc == 0 ? "a value" : strata_last_error());
		if (rc == 0)
			strata_free(v);
		return 0;
	}
	if (rc != 0) {
		fprintf(stderr, "  get %s: %s: %s\n", key, strata_strerror(rc), strata_last_error());
		return 0;
	}
	int ok = n == strlen(want) && memcmp(v, want, n) == 0;
	if (!ok)
		fprintf(stderr, "  get %s: got '%.*s', want '%s'\n", key, (int)(n > 80 ? 80 : n),
			(const char *)v, want);
	strata_free(v);
	return ok;
}

/** Number of keys in [from, to) that do not read back as put_range wrote them (tag). */
static int
range_misses(strata *db, const char *prefix, int from, int to, const char *tag)
{
	int bad = 0;
	for (int i = from; i < to; i++) {
		char key[48], val[160];
		snprintf(key, sizeof(key), "%s%05d", prefix, i);
		make_value(val, sizeof(val), key, tag, 40);
		if (!get_is(db, key, val) && ++bad >= 5) {
			fprintf(stderr, "  (more misses under %s not shown)\n", prefix);
			return bad + (to - i - 1);
		}
	}
	return bad;
}

/** What a full scan saw. */
struct scan_check {
	/** Rows visited. */
	size_t rows;
	/** Rows whose key was not strictly greater than the previous one (disorder or duplicate). */
	size_t disorder;
	/** Rows whose value does not start with "<key>=". */
	size_t bad_values;
	/** Previous key. */
	char prev[STRATA_MAX_KEY];
	/** Its length. */
	size_t prev_len;
	/** Set after the first row. */
	int have_prev;
};

static int
scan_check_cb(void *ctx, const strata_row *row)
{
	struct scan_check *sc = ctx;
	if (sc->have_prev) {
		size_t m = row->key_len < sc->prev_len ? row->key_len : sc->prev_len;
		int c = memcmp(row->key, sc->prev, m);
		if (c < 0 || (c == 0 && row->key_len <= sc->prev_len)) {
			if (sc->disorder++ < 5)
				fprintf(stderr, "  scan: '%.*s' after '%.*s'\n", (int)row->key_len,
					(const char *)row->key, (int)sc->prev_len, sc->prev);
		}
	}
	if (row->value_len <= row->key_len || memcmp(row->value, row->key, row->key_len) != 0 ||
	    ((const char *)row->value)[row->key_len] != '=') {
		if (sc->bad_values++ < 5)
			fprintf(stderr, "  scan: bad value for '%.*s'\n", (int)row->key_len,
				(const char *)row->key);
	}
	if (row->key_len <= sizeof(sc->prev)) {
		memcpy(sc->prev, row->key, row->key_len);
		sc->prev_len = row->key_len;
	}
	sc->have_prev = 1;
	sc->rows++;
	return 0;
}

/** Scan the whole of shard 0 and require order, no duplicates, sane values and `want` rows. */
static int
scan_ok(strata *db, size_t want)
{
	static struct scan_check sc;
	memset(&sc, 0, sizeof(sc));
	int rc = strata_scan(db, 0, NULL, 0, NULL, 0, scan_check_cb, &sc);
	if (rc != 0) {
		fprintf(stderr, "  scan: %s: %s\n", strata_strerror(rc), strata_last_error());
		return 0;
	}
	if (sc.rows != want || sc.disorder != 0 || sc.bad_values != 0) {
		fprintf(stderr, "  scan: %zu rows (want %zu), %zu out of order/duplicate, %zu bad values\n",
			sc.rows, want, sc.disorder, sc.bad_values);
		return 0;
	}
	return 1;
}

static strata_stats
stats_of(strata *db)
{
	strata_stats s;
	memset(&s, 0, sizeof(s));
	int rc = strata_shard_stats(db, 0, &s);
	if (rc != 0)
		fprintf(stderr, "  stats: %s: %s\n", strata_strerror(rc), strata_last_error());
	return s;
}

/* ---------------------------------------------------------------- object store */

static int
count_cb(void *ctx, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	(*(long *)ctx)++;
	return 0;
}

/** Objects under "shard-0000/<sub>" in dir's object store, or -1. */
static long
count_objects(const char *dir, const char *sub)
{
	char root[512], prefix[64];
	snprintf(root, sizeof(root), "%s/objects", dir);
	snprintf(prefix, sizeof(prefix), SHARD0 "%s", sub);
	struct objstore *os = NULL;
	if (objstore_fs_new(root, &os) != 0) {
		fprintf(stderr, "  objstore_fs_new(%s): %s\n", root, strata_last_error());
		return -1;
	}
	long n = 0;
	int rc = objstore_list(os, prefix, count_cb, &n);
	objstore_destroy(os);
	if (rc != 0) {
		fprintf(stderr, "  list %s: %s\n", prefix, strata_last_error());
		return -1;
	}
	return n;
}

/** Load shard 0's current manifest from dir's object store. */
static int
load_manifest(const char *dir, struct manifest *m)
{
	char root[512];
	snprintf(root, sizeof(root), "%s/objects", dir);
	memset(m, 0, sizeof(*m));
	struct objstore *os = NULL;
	int rc = objstore_fs_new(root, &os);
	if (rc == 0)
		rc = manifest_load(os, SHARD0, m);
	if (rc != 0)
		fprintf(stderr, "  manifest_load(%s): %s: %s\n", root, strata_strerror(rc),
			strata_last_error());
	objstore_destroy(os);
	return rc;
}

/* ---------------------------------------------------------------- runner */

/** Start the watchdog for test name. */
static void
t_begin(const char *name)
{
	t_name = name;
	alarm(WATCHDOG_S);
}

/** Close the stores and remove the directories the test left behind. */
static void
t_cleanup(void)
{
	for (int i = 0; i < MAX_DBS; i++) {
		if (t_dbs[i] != NULL) {
			strata_close(t_dbs[i]);
			t_dbs[i] = NULL;
		}
	}
	for (int i = 0; i < MAX_DIRS; i++) {
		if (t_dirs[i] != NULL) {
			harness_rmrf(t_dirs[i]);
			free(t_dirs[i]);
			t_dirs[i] = NULL;
		}
	}
}

/** Run one test under the watchdog; the file's t_end stops it and cleans up. */
#define T(fn)                                                                                   \
	do {                                                                                    \
		t_begin(#fn);                                                                   \
		RUN(fn);                                                                        \
		t_end();                                                                        \
	} while (0)

#endif
