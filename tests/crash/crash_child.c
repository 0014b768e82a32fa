/*
 * crash_child.c — the process the crash driver kills. It opens a store (sync=fsync)
 * and runs a seeded random workload until it is killed: writer threads append
 * (announcing each append on the pipe before the call and acknowledging it after it
 * returned 0), a maintenance thread seals and merges with random caps, another
 * compacts the base, a reader gets and scans. With CRASH_PAUSE_POINT=<point> and
 * CRASH_PAUSE_COUNT=<n> in the environment, the n-th thread to reach that test point
 * reports "P <point>" and blocks there, so the kill lands inside the operation.
 *
 * usage: crash_child DIR SEED INCARNATION NEXT_INDEX KEYCAP THREADS SHARDS MAX_SECONDS
 * The protocol goes to stdout (see crash_common.h); diagnostics go to stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../node/lib/env.h"
#include "../../node/strata.h"
#include "crash_common.h"

/** The child's configuration, from the command line. */
static struct {
	/** Store directory. */
	const char *dir;
	/** Seed of this incarnation's workload. */
	uint64_t seed;
	/** Incarnation number (1, 2, ...). */
	uint32_t inc;
	/** First unused key index. */
	uint32_t next;
	/** Key indexes stay below this (then keys are only overwritten). */
	uint32_t keycap;
	/** Writer threads. */
	uint32_t threads;
	/** Shards of the store. */
	uint32_t shards;
	/** Seconds after which the child gives up waiting for its kill. */
	uint32_t max_seconds;
} cfg;

/** The open store. */
static strata *db;
/** Serialises protocol lines (each is also one write(2) below PIPE_BUF). */
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
/** Test point to pause at (NULL = none) and the hit to pause on. */
static const char *pause_point;
static long pause_count;
/** Hits of pause_point so far. */
static atomic_long pause_hits;

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
	char line[CRASH_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	pthread_mutex_lock(&out_mu);
	const char *p = line;
	while (n > 0) {
		ssize_t w = write(1, p, (size_t)n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(5); /* the driver is gone */
		p += w;
		n -= (int)w;
	}
	pthread_mutex_unlock(&out_mu);
}

/** Report an unexpected failure and stop: the driver counts it as a failed run. */
static void
fail(const char *what, int rc)
{
	say("E %s: %s: %s", what, strata_strerror(rc), strata_last_error());
	_exit(4);
}

static int
child_point(const char *name, const void *arg)
{
	(void)arg;
	if (pause_point == NULL || strcmp(name, pause_point) != 0)
		return 0;
	if (atomic_fetch_add(&pause_hits, 1) + 1 != pause_count)
		return 0;
	say("P %s", name);
	for (;;)
		pause();
}

/* ---------------------------------------------------------------- writers */

static void *
writer_main(void *arg)
{
	uint32_t th = (uint32_t)(uintptr_t)arg;
	struct crash_rng rng = {crash_mix(cfg.seed ^ (0x1000u + th))};
	uint32_t shard = th % cfg.shards;
	uint32_t next = cfg.next;
	char (*vals)[CRASH_VALUE_CAP] = malloc(CRASH_MAX_BATCH * sizeof(*vals));
	if (vals == NULL)
		fail("malloc", STRATA_ENOMEM);
	char keys[CRASH_MAX_BATCH][CRASH_KEY_CAP];
	strata_row rows[CRASH_MAX_BATCH];
	uint32_t idx[CRASH_MAX_BATCH];
	for (uint64_t ctr = 1;; ctr++) {
		uint32_t n = crash_below(&rng, 4) == 0 ? 1 + (uint32_t)crash_below(&rng, CRASH_MAX_BATCH) : 1;
		char line[CRASH_LINE_MAX];
		int len = snprintf(line, sizeof(line), "I %u %llu %u", th, (unsigned long long)ctr, n);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t k;
			for (;;) {
				if (next == 0 || (next < cfg.keycap && crash_below(&rng, 100) < 55))
					k = next++;
				else
					k = (uint32_t)crash_below(&rng, next);
				uint32_t j = 0;
				while (j < i && idx[j] != k)
					j++;
				if (j == i)
					break;
			}
			idx[i] = k;
			uint64_t r = crash_below(&rng, 100);
			uint32_t extra = r < 80 ? (uint32_t)crash_below(&rng, 200)
				       : r < 96 ? 200 + (uint32_t)crash_below(&rng, 1800)
						: 2000 + (uint32_t)crash_below(&rng, CRASH_MAX_EXTRA - 2000);
			struct crash_desc d = {cfg.inc, th, ctr, i, extra, 0};
			rows[i].key = keys[i];
			rows[i].key_len = crash_key(keys[i], th, k);
			if (crash_below(&rng, 100) < CRASH_DELETE_PCT) {
				rows[i].value = NULL;
				rows[i].value_len = 0;
				rows[i].kind = STRATA_ROW_DELETE;
				len += snprintf(line + len, sizeof(line) - (size_t)len, " %u d", k);
				continue;
			}
			rows[i].value = vals[i];
			rows[i].value_len = crash_value(vals[i], &d);
			rows[i].kind = STRATA_ROW_PUT;
			len += snprintf(line + len, sizeof(line) - (size_t)len, " %u %u", k, extra);
		}
		say("%s", line);
		int rc = strata_append(db, shard, rows, n);
		if (rc != 0)
			fail("append", rc);
		say("A %u %llu", th, (unsigned long long)ctr);
		if (crash_below(&rng, 16) == 0)
			usleep((useconds_t)crash_below(&rng, 300));
	}
	return NULL;
}

/* ---------------------------------------------------------------- maintenance */

/** 1 if rc is an outcome a concurrent merge or compaction may legally meet. */
static int
benign(int rc)
{
	return rc == 0 || rc == STRATA_ECONFLICT || rc == STRATA_EBUSY;
}

static void *
merger_main(void *arg)
{
	(void)arg;
	struct crash_rng rng = {crash_mix(cfg.seed ^ 0x2000u)};
	for (;;) {
		uint32_t shard = (uint32_t)crash_below(&rng, cfg.shards);
		uint64_t r = crash_below(&rng, 10);
		if (r < 4) {
			int rc = strata_seal(db, shard);
			if (rc)
				fail("seal", rc);
			say("M seal %u 0", shard);
		} else if (r < 8) {
			uint32_t cap = (uint32_t)crash_below(&rng, 4);
			strata_plan *plan = NULL;
			int rc = strata_prepare_merge(db, shard, cap, &plan);
			if (!benign(rc))
				fail("prepare merge", rc);
			if (rc == 0) {
				uint32_t g = strata_plan_generations(plan);
				if (crash_below(&rng, 2))
					usleep((useconds_t)crash_below(&rng, 2000));
				rc = strata_commit_merge(db, plan);
				if (!benign(rc))
					fail("commit merge", rc);
				if (rc == 0 && g > 0)
					say("M merge %u %u", shard, g);
			}
		} else if (r < 9) {
			uint32_t merged = 0;
			int rc = strata_merge(db, shard, (uint32_t)crash_below(&rng, 3), &merged);
			if (!benign(rc))
				fail("merge", rc);
			if (rc == 0 && merged > 0)
				say("M merge %u %u", shard, merged);
		} else {
			usleep((useconds_t)crash_below(&rng, 3000));
		}
		usleep((useconds_t)crash_below(&rng, 2000));
	}
	return NULL;
}

static void *
compactor_main(void *arg)
{
	(void)arg;
	struct crash_rng rng = {crash_mix(cfg.seed ^ 0x3000u)};
	for (;;) {
		usleep(2000 + (useconds_t)crash_below(&rng, 8000));
		uint32_t shard = (uint32_t)crash_below(&rng, cfg.shards);
		uint32_t cap = crash_below(&rng, 3) == 0 ? 0 : 2 + (uint32_t)crash_below(&rng, 3);
		strata_plan *plan = NULL;
		int rc = strata_prepare_compact(db, shard, cap, &plan);
		if (!benign(rc))
			fail("prepare compaction", rc);
		if (rc != 0)
			continue;
		uint32_t g = strata_plan_generations(plan);
		rc = strata_commit_merge(db, plan);
		if (!benign(rc))
			fail("commit compaction", rc);
		if (rc == 0 && g > 0)
			say("M compact %u %u", shard, g);
	}
	return NULL;
}

/* ---------------------------------------------------------------- reader */

/** State of one bounded scan. */
struct scan_state {
	/** Previous key and its length. */
	char prev[CRASH_KEY_CAP + 8];
	size_t prev_len;
	/** Rows seen; the scan stops at a limit. */
	int rows;
};

static int
scan_cb(void *ctx, const strata_row *row)
{
	struct scan_state *st = ctx;
	if (row->key_len > CRASH_KEY_CAP) {
		say("E scan returned a key of %zu bytes", row->key_len);
		_exit(4);
	}
	if (st->rows > 0) {
		size_t m = st->prev_len < row->key_len ? st->prev_len : row->key_len;
		int c = memcmp(st->prev, row->key, m);
		if (c > 0 || (c == 0 && st->prev_len >= row->key_len)) {
			say("E scan keys not strictly increasing: '%.*s' then '%.*s'", (int)st->prev_len,
			    st->prev, (int)row->key_len, (const char *)row->key);
			_exit(4);
		}
	}
	memcpy(st->prev, row->key, row->key_len);
	st->prev_len = row->key_len;
	return ++st->rows >= 64;
}

static void *
reader_main(void *arg)
{
	(void)arg;
	struct crash_rng rng = {crash_mix(cfg.seed ^ 0x4000u)};
	for (;;) {
		uint32_t th = (uint32_t)crash_below(&rng, cfg.threads);
		uint32_t k = (uint32_t)crash_below(&rng, cfg.next + 64);
		char key[CRASH_KEY_CAP];
		size_t kl = crash_key(key, th, k);
		if (crash_below(&rng, 4) == 0) {
			struct scan_state st = {.rows = 0};
			int rc = strata_scan(db, th % cfg.shards, key, kl, NULL, 0, scan_cb, &st);
			if (rc < 0)
				fail("scan", rc);
		} else {
			void *v = NULL;
			size_t vl = 0;
			int rc = strata_get(db, th % cfg.shards, key, kl, &v, &vl);
			if (rc < 0)
				fail("get", rc);
			strata_free(v);
		}
		usleep((useconds_t)crash_below(&rng, 500));
	}
	return NULL;
}

/* ---------------------------------------------------------------- main */

static int
parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int
main(int argc, char **argv)
{
	uint64_t v[7];
	if (argc != 9) {
		fprintf(stderr, "usage: %s DIR SEED INCARNATION NEXT_INDEX KEYCAP THREADS SHARDS "
			"MAX_SECONDS\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < 7; i++) {
		if (parse_u64(argv[i + 2], &v[i]) != 0) {
			fprintf(stderr, "crash_child: bad number '%s'\n", argv[i + 2]);
			return 2;
		}
	}
	cfg.dir = argv[1];
	cfg.seed = v[0];
	cfg.inc = (uint32_t)v[1];
	cfg.next = (uint32_t)v[2];
	cfg.keycap = (uint32_t)v[3];
	cfg.threads = (uint32_t)v[4];
	cfg.shards = (uint32_t)v[5];
	cfg.max_seconds = (uint32_t)v[6];
	if (cfg.threads == 0 || cfg.threads > CRASH_MAX_THREADS || cfg.shards == 0 ||
	    cfg.shards > CRASH_MAX_SHARDS || cfg.keycap == 0 || cfg.keycap > CRASH_MAX_KEYCAP ||
	    cfg.next > cfg.keycap) {
		fprintf(stderr, "crash_child: threads 1..%d, shards 1..%d, next <= keycap <= %u\n",
			CRASH_MAX_THREADS, CRASH_MAX_SHARDS, CRASH_MAX_KEYCAP);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	const char *pp = getenv("CRASH_PAUSE_POINT");
	const char *pc = getenv("CRASH_PAUSE_COUNT");
	if (pp != NULL && pp[0] != '\0') {
		pause_point = pp;
		pause_count = pc ? atol(pc) : 1;
		if (pause_count < 1)
			pause_count = 1;
	}

	strata_options o;
	strata_options_init(&o);
	o.dir = cfg.dir;
	o.shards = cfg.shards;
	o.sync = STRATA_SYNC_FSYNC;
	o.block_bytes = CRASH_BLOCK_BYTES;
	o.wal_segment_bytes = CRASH_SEGMENT_BYTES;
	o.manifest_snapshot_edits = CRASH_SNAPSHOT_EDITS;
	/* One life in four merges on its own thread, the others with 1..3 helpers encoding
	 * blocks: a kill then lands with blocks in flight. */
	o.merge_threads = 1 + (uint32_t)((cfg.seed + cfg.inc) % 4);
	/* Half of those split every pass into up to merge_threads key-range parts written at
	 * once (cut at index partitions of 256 bytes): a kill then lands with parts half
	 * written and the grouped run not yet committed, or committed. */
	if (o.merge_threads > 1 && (cfg.seed + cfg.inc) / 4 % 2) {
		o.merge_part_min_bytes = 1;
		o.index_partition_bytes = 256;
	}
	int rc = strata_open(&o, &db);
	if (rc)
		fail("open", rc);
	char line[CRASH_LINE_MAX];
	int len = snprintf(line, sizeof(line), "R %u", cfg.inc);
	for (uint32_t s = 0; s < cfg.shards; s++) {
		strata_stats st;
		if ((rc = strata_shard_stats(db, s, &st)) != 0)
			fail("stats", rc);
		len += snprintf(line + len, sizeof(line) - (size_t)len, " %llu",
				(unsigned long long)st.writer_epoch);
	}
	say("%s", line);
	/* Points armed only now: the manifest's are reached by the open's claim too, and a
	 * child paused before "R" would look to the driver like one that cannot open. */
	env.point = child_point;

	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 1u << 20);
	for (uint32_t i = 0; i < cfg.threads; i++)
		if (pthread_create(&t, &attr, writer_main, (void *)(uintptr_t)i) != 0)
			fail("pthread_create", STRATA_ENOMEM);
	if (pthread_create(&t, &attr, merger_main, NULL) != 0 ||
	    pthread_create(&t, &attr, compactor_main, NULL) != 0 ||
	    pthread_create(&t, &attr, reader_main, NULL) != 0)
		fail("pthread_create", STRATA_ENOMEM);
	pthread_attr_destroy(&attr);
	sleep(cfg.max_seconds);
	say("E not killed within %u s", cfg.max_seconds);
	_exit(3);
}
