/*
 * test_engine.c — the engine through the public API (node/strata.h): appends and
 * reads concurrent with merges, the prepare/commit discipline, merge caps, fencing,
 * large values and input checks. Pauses inside seal/prepare/commit go through the
 * test points of node/lib/env.h (ENV_POINTS); a watchdog fails a test that hangs.
 */
#include <pthread.h>
#include <sched.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../node/core/manifest.h"
#include "../../node/core/run.h"
#include "../../node/core/store.h"
#include "../../node/lib/buf.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "harness.h"

/** Tag of the temporary directories (engine_util.h). */
#define ENGINE_UTIL_TAG "engine"
#include "engine_util.h"

/* ---------------------------------------------------------------- test points */

enum { PT_OFF, PT_PAUSE, PT_EXIT, PT_FAIL, PT_FAIL_ONCE };

/** The one env.point callback, installed for the whole run and steered by pt. */
static struct {
	/** Guards every field. */
	pthread_mutex_t mu;
	/** Signalled on every change. */
	pthread_cond_t cv;
	/** Point acted on, or NULL. */
	const char *name;
	/** PT_PAUSE, PT_EXIT, PT_FAIL (the operation fails there) or PT_FAIL_ONCE (the
	 *  first thread to get there fails, the others go on). */
	int action;
	/** Threads paused at the point so far. */
	int arrived;
	/** Worker threads that finished their operation. */
	int finished;
	/** Set to let paused threads go. */
	int released;
	/** Times a flush reported waiting for in-flight appends ("seal.waiting"). */
	int seal_waiting;
	/** Set by seal_waits_for_inflight_append's sealing thread when its seal returned. */
	int seal_done;
} pt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, PT_OFF, 0, 0, 0, 0, 0 };

/** Set on threads that volunteer to be paused; each pauses at most once. */
static __thread int pt_self;
/** Set once this thread has paused. */
static __thread int pt_self_done;

static int
test_point(const char *name, const void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pt.mu);
	if (strcmp(name, "seal.waiting") == 0) {
		pt.seal_waiting++;
		pthread_cond_broadcast(&pt.cv);
	}
	if (pt.name == NULL || strcmp(name, pt.name) != 0) {
		pthread_mutex_unlock(&pt.mu);
		return 0;
	}
	if (pt.action == PT_EXIT)
		_exit(0);
	if (pt.action == PT_FAIL || (pt.action == PT_FAIL_ONCE && pt.arrived++ == 0)) {
		pthread_mutex_unlock(&pt.mu);
		return 1;
	}
	if (pt.action == PT_PAUSE && pt_self && !pt_self_done) {
		pt_self_done = 1;
		pt.arrived++;
		pthread_cond_broadcast(&pt.cv);
		while (!pt.released)
			pthread_cond_wait(&pt.cv, &pt.mu);
	}
	pthread_mutex_unlock(&pt.mu);
	return 0;
}

static void
pt_arm(const char *name, int action)
{
	if (env_point_lookup(name) < 0) {
		fprintf(stderr, "  pt_arm: the engine has no test point '%s'\n", name);
		abort();
	}
	pthread_mutex_lock(&pt.mu);
	pt.name = name;
	pt.action = action;
	pt.arrived = 0;
	pt.finished = 0;
	pt.released = 0;
	pthread_mutex_unlock(&pt.mu);
}

static void
pt_disarm(void)
{
	pthread_mutex_lock(&pt.mu);
	pt.name = NULL;
	pt.action = PT_OFF;
	pt.released = 1;
	pthread_cond_broadcast(&pt.cv);
	pthread_mutex_unlock(&pt.mu);
}

/** Wait until n threads are paused or a worker finished without pausing; returns arrivals. */
static int
pt_wait(int n)
{
	pthread_mutex_lock(&pt.mu);
	while (pt.arrived < n && pt.finished == 0)
		pthread_cond_wait(&pt.cv, &pt.mu);
	int got = pt.arrived;
	pthread_mutex_unlock(&pt.mu);
	return got;
}

static void
pt_release(void)
{
	pthread_mutex_lock(&pt.mu);
	pt.released = 1;
	pthread_cond_broadcast(&pt.cv);
	pthread_mutex_unlock(&pt.mu);
}

static void
pt_worker_finished(void)
{
	pthread_mutex_lock(&pt.mu);
	pt.finished++;
	pthread_cond_broadcast(&pt.cv);
	pthread_mutex_unlock(&pt.mu);
}

/* ---------------------------------------------------------------- merge workers */

enum { JOB_MERGE, JOB_PREPARE_COMMIT };

/** A merge run on its own thread. */
struct job {
	/** Store and arguments. */
	strata *db;
	uint32_t cap;
	/** JOB_MERGE (strata_merge) or JOB_PREPARE_COMMIT (prepare, then commit). */
	int kind;
	/** Volunteer to be paused at the armed point. */
	int pause;
	/** Results. */
	int rc, rc_prepare, rc_commit;
	uint32_t merged;
	/** The thread. */
	pthread_t th;
};

static void *
job_main(void *p)
{
	struct job *j = p;
	pt_self = j->pause;
	if (j->kind == JOB_MERGE) {
		j->rc = strata_merge(j->db, 0, j->cap, &j->merged);
		if (j->rc != 0)
			fprintf(stderr, "  merge: %s: %s\n", strata_strerror(j->rc), strata_last_error());
	} else {
		strata_plan *plan = NULL;
		j->rc_prepare = strata_prepare_merge(j->db, 0, j->cap, &plan);
		if (j->rc_prepare != 0) {
			fprintf(stderr, "  prepare: %s: %s\n", strata_strerror(j->rc_prepare),
				strata_last_error());
		} else {
			j->merged = strata_plan_generations(plan);
			/* Both preparers have their plans before either commits. */
			j->rc_commit = strata_commit_merge(j->db, plan);
			if (j->rc_commit != 0 && j->rc_commit != STRATA_ECONFLICT)
				fprintf(stderr, "  commit: %s: %s\n", strata_strerror(j->rc_commit),
					strata_last_error());
		}
		j->rc = j->rc_prepare != 0 ? j->rc_prepare : j->rc_commit;
	}
	pt_worker_finished();
	return NULL;
}

static void
job_start(struct job *j)
{
	if (pthread_create(&j->th, NULL, job_main, j) != 0) {
		perror("pthread_create");
		abort();
	}
}

/* ---------------------------------------------------------------- tests */

/** appends_survive_concurrent_merges: shared state of appenders and merger. */
static struct {
	/** Guards the counters. */
	pthread_mutex_t mu;
	/** Signalled on every change. */
	pthread_cond_t cv;
	/** Batches acknowledged so far, all appenders. */
	uint64_t acked;
	/** Seal+merge passes completed. */
	uint64_t passes;
	/** Appenders that finished. */
	int done;
} t1 = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };

#define T1_THREADS 4
#define T1_KEYS 5000
#define T1_CHECKPOINT 1000

/** One appender thread of appends_survive_concurrent_merges. */
struct t1_appender {
	strata *db;
	int id;
	/** Failed appends or read-backs. */
	int errors;
	pthread_t th;
};

static void
t1_row(char *key, size_t kcap, char *val, size_t vcap, int id, int i)
{
	snprintf(key, kcap, "t%d-%05d", id, i);
	make_value(val, vcap, key, "v", 24);
}

static void *
t1_append_main(void *p)
{
	struct t1_appender *a = p;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(a->id + 1);
	static __thread char keys[50][32], vals[50][64];
	strata_row rows[50];
	int next = 0, checkpoint = T1_CHECKPOINT;
	while (next < T1_KEYS) {
		int n = 1 + (int)(xorshift(&rng) % 50);
		if (n > T1_KEYS - next)
			n = T1_KEYS - next;
		for (int i = 0; i < n; i++) {
			t1_row(keys[i], sizeof(keys[i]), vals[i], sizeof(vals[i]), a->id, next + i);
			rows[i] = (strata_row){ keys[i], strlen(keys[i]), vals[i], strlen(vals[i]) };
		}
		int rc = strata_append(a->db, 0, rows, (size_t)n);
		if (rc != 0) {
			fprintf(stderr, "  appender %d: append: %s: %s\n", a->id, strata_strerror(rc),
				strata_last_error());
			a->errors++;
		}
		next += n;
		char key[32], val[64];
		t1_row(key, sizeof(key), val, sizeof(val), a->id, (int)(xorshift(&rng) % (uint64_t)next));
		if (!get_is(a->db, key, val))
			a->errors++;
		pthread_mutex_lock(&t1.mu);
		t1.acked++;
		pthread_cond_broadcast(&t1.cv);
		if (next >= checkpoint) {
			/* Guarantee merges interleave with this appender's batches. */
			uint64_t p0 = t1.passes;
			while (t1.passes == p0)
				pthread_cond_wait(&t1.cv, &t1.mu);
			checkpoint += T1_CHECKPOINT;
		}
		pthread_mutex_unlock(&t1.mu);
	}
	pthread_mutex_lock(&t1.mu);
	t1.done++;
	pthread_cond_broadcast(&t1.cv);
	pthread_mutex_unlock(&t1.mu);
	return NULL;
}

/** A sealer thread of appends_survive_concurrent_merges: seals race the merger's
 *  commits (a commit must never swap back a view from before a seal). */
struct t1_sealer {
	strata *db;
	int errors;
	pthread_t th;
};

static void *
t1_seal_main(void *p)
{
	struct t1_sealer *sl = p;
	for (;;) {
		pthread_mutex_lock(&t1.mu);
		int done = t1.done >= T1_THREADS;
		pthread_mutex_unlock(&t1.mu);
		if (done)
			return NULL;
		int rc = strata_seal(sl->db, 0);
		if (rc != 0) {
			fprintf(stderr, "  sealer: %s: %s\n", strata_strerror(rc), strata_last_error());
			sl->errors++;
			return NULL;
		}
		sched_yield();
	}
}

/** The merger thread of appends_survive_concurrent_merges. */
struct t1_merger {
	strata *db;
	int errors;
	uint64_t merged;
	pthread_t th;
};

static void *
t1_merge_main(void *p)
{
	struct t1_merger *m = p;
	pthread_mutex_lock(&t1.mu);
	while (t1.done < T1_THREADS) {
		uint64_t seen = t1.acked;
		pthread_mutex_unlock(&t1.mu);
		int rc = strata_seal(m->db, 0);
		if (rc != 0) {
			fprintf(stderr, "  merger: seal: %s: %s\n", strata_strerror(rc), strata_last_error());
			m->errors++;
		}
		uint32_t merged = 0;
		rc = strata_merge(m->db, 0, 3, &merged);
		if (rc != 0) {
			fprintf(stderr, "  merger: merge: %s: %s\n", strata_strerror(rc), strata_last_error());
			m->errors++;
		} else if (merged > 3) {
			fprintf(stderr, "  merger: merge with cap 3 folded %u generations\n", merged);
			m->errors++;
		}
		m->merged += merged;
		pthread_mutex_lock(&t1.mu);
		t1.passes++;
		pthread_cond_broadcast(&t1.cv);
		while (t1.acked == seen && t1.done < T1_THREADS)
			pthread_cond_wait(&t1.cv, &t1.mu);
	}
	pthread_mutex_unlock(&t1.mu);
	return NULL;
}

/** Every acknowledged key of the appenders reads back; returns the number that do not. */
static int
t1_verify(strata *db)
{
	int bad = 0;
	for (int id = 0; id < T1_THREADS; id++) {
		for (int i = 0; i < T1_KEYS; i++) {
			char key[32], val[64];
			t1_row(key, sizeof(key), val, sizeof(val), id, i);
			if (!get_is(db, key, val) && ++bad > 5)
				return bad;
		}
	}
	return bad;
}

TEST(appends_survive_concurrent_merges)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.block_bytes = 4096;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	t1.acked = 0;
	t1.passes = 0;
	t1.done = 0;
	struct t1_appender ap[T1_THREADS];
	struct t1_merger mg = { .db = db };
	for (int i = 0; i < T1_THREADS; i++) {
		ap[i] = (struct t1_appender){ .db = db, .id = i };
		REQUIRE(pthread_create(&ap[i].th, NULL, t1_append_main, &ap[i]) == 0);
	}
	REQUIRE(pthread_create(&mg.th, NULL, t1_merge_main, &mg) == 0);
	struct t1_sealer sl = { .db = db };
	REQUIRE(pthread_create(&sl.th, NULL, t1_seal_main, &sl) == 0);
	for (int i = 0; i < T1_THREADS; i++) {
		pthread_join(ap[i].th, NULL);
		CHECK_EQ(ap[i].errors, 0);
	}
	pthread_join(mg.th, NULL);
	pthread_join(sl.th, NULL);
	CHECK_EQ(sl.errors, 0);
	CHECK_EQ(mg.errors, 0);
	CHECK(mg.merged > 0);
	CHECK(t1.passes >= T1_KEYS / T1_CHECKPOINT);

	CHECK_EQ(t1_verify(db), 0);
	CHECK(scan_ok(db, T1_THREADS * T1_KEYS));
	strata_stats s = stats_of(db);
	CHECK_EQ(s.rows_appended, T1_THREADS * T1_KEYS);
	CHECK_EQ(s.merged_generations, mg.merged);

	/* Each pass folds at most merge_max_inputs (8): drain what the run left. */
	uint32_t merged = 0;
	for (int pass = 0; pass < 64 && stats_of(db).generations > 0; pass++)
		CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	s = stats_of(db);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(s.memtable_rows, 0);
	CHECK(scan_ok(db, T1_THREADS * T1_KEYS));
	db_close(db);

	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(t1_verify(db), 0);
	CHECK(scan_ok(db, T1_THREADS * T1_KEYS));
	db_close(db);
}

/** Append three generations g0..g2 of `per` rows each ("g<n>-%05d"). */
static int
three_generations(strata *db, int per)
{
	for (int g = 0; g < 3; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%d-", g);
		int rc = put_range(db, prefix, 0, per, "old", 25);
		if (rc == 0)
			rc = strata_seal(db, 0);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int
three_generations_misses(strata *db, int per)
{
	int bad = 0;
	for (int g = 0; g < 3; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%d-", g);
		bad += range_misses(db, prefix, 0, per, "old");
	}
	return bad;
}

TEST(seal_during_merge_is_not_drained)
{
	static const char *const points[] = { "prepare.block", "prepare.run_written" };
	for (int p = 0; p < 2; p++) {
		fprintf(stderr, "  # paused at %s\n", points[p]);
		const char *dir = tdir();
		strata_options o = opts_for(dir);
		o.block_bytes = 1024;
		strata *db = db_open(&o);
		REQUIRE(db != NULL);
		REQUIRE_EQ(three_generations(db, 300), 0);
		REQUIRE_EQ(stats_of(db).generations, 3);

		pt_arm(points[p], PT_PAUSE);
		struct job j = { .db = db, .cap = 0, .kind = JOB_MERGE, .pause = 1 };
		job_start(&j);
		int arrived = pt_wait(1);
		CHECK_EQ(arrived, 1);
		if (arrived == 1) {
			/* While the merge is paused: a new generation appears. */
			CHECK_EQ(put_range(db, "new-", 0, 100, "new", 10), 0);
			CHECK_EQ(strata_seal(db, 0), 0);
			CHECK_EQ(stats_of(db).generations, 4);
			CHECK_EQ(range_misses(db, "new-", 0, 100, "new"), 0);
		}
		pt_release();
		pthread_join(j.th, NULL);
		pt_disarm();
		REQUIRE(arrived == 1);
		CHECK_EQ(j.rc, 0);
		CHECK_EQ(j.merged, 3);

		strata_stats s = stats_of(db);
		CHECK_EQ(s.generations, 1);
		CHECK_EQ(s.base_runs, 1);
		CHECK_EQ(count_objects(dir, "gen/"), 1);
		CHECK_EQ(count_objects(dir, "run/"), 1);
		CHECK_EQ(range_misses(db, "new-", 0, 100, "new"), 0);
		CHECK_EQ(three_generations_misses(db, 300), 0);
		CHECK(scan_ok(db, 1000));
		db_close(db);

		/* The new generation is in the manifest, not only in memory. */
		db = db_open(&o);
		REQUIRE(db != NULL);
		s = stats_of(db);
		CHECK_EQ(s.generations, 1);
		CHECK_EQ(s.base_runs, 1);
		CHECK_EQ(s.memtable_rows, 0);
		CHECK_EQ(range_misses(db, "new-", 0, 100, "new"), 0);
		CHECK_EQ(three_generations_misses(db, 300), 0);
		uint32_t merged = 0;
		CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
		CHECK_EQ(merged, 1);
		CHECK_EQ(range_misses(db, "new-", 0, 100, "new"), 0);
		CHECK(scan_ok(db, 1000));
		db_close(db);
	}
}

/** A reader of stats beside a stream of merges (stats_count_merges_with_their_view). */
struct stats_reader {
	strata *db;
	/** Generations sealed before the merges start (none is sealed during them). */
	uint64_t total;
	atomic_int stop;
	/** Reads, and reads where the view had lost generations the counters did not count. */
	uint64_t reads, short_reads;
};

static void *
stats_reader_run(void *arg)
{
	struct stats_reader *r = arg;
	while (!atomic_load(&r->stop)) {
		strata_stats s;
		if (strata_shard_stats(r->db, 0, &s) != 0)
			continue;
		r->reads++;
		r->short_reads += s.generations + s.merged_generations < r->total;
	}
	return NULL;
}

TEST(stats_count_merges_with_their_view)
{
	/* A stats read takes the view, then the counters: a merge counted only after its view
	 * is published shows generations gone that no counter has merged. A policy spec that
	 * waited for generations == 0 and then read merged_generations once got one pass
	 * short. 400 one-generation merges beside a reader that never stops. */
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	enum { GENS = 400 };
	for (int g = 0; g < GENS; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "g%04d-", g);
		REQUIRE_EQ(put_range(db, prefix, 0, 1, "v", 1), 0);
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	struct stats_reader r = { .db = db, .total = GENS };
	pthread_t th;
	REQUIRE_EQ(pthread_create(&th, NULL, stats_reader_run, &r), 0);
	uint32_t merged = 0, sum = 0;
	for (int g = 0; g < GENS; g++) {
		CHECK_EQ(strata_merge(db, 0, 1, &merged), 0);
		sum += merged;
	}
	atomic_store(&r.stop, 1);
	pthread_join(th, NULL);
	CHECK_EQ(sum, GENS);
	if (r.short_reads != 0)
		fprintf(stderr, "  %llu of %llu stats reads counted fewer generations than the view had lost\n",
			(unsigned long long)r.short_reads, (unsigned long long)r.reads);
	CHECK_EQ(r.short_reads, 0);
	CHECK(r.reads > GENS);
	db_close(db);
}

TEST(second_prepare_is_busy_before_io)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(three_generations(db, 100), 0);

	/* A's merge pauses with its run written, not yet committed. */
	pt_arm("prepare.run_written", PT_PAUSE);
	struct job a = { .db = db, .cap = 0, .kind = JOB_PREPARE_COMMIT, .pause = 1 };
	job_start(&a);
	REQUIRE_EQ(pt_wait(1), 1);
	CHECK_EQ(put_range(db, "late-", 0, 10, "l", 10), 0);
	strata_stats before = stats_of(db);
	/* B asks while A is in flight: refused at once, before sealing or writing. */
	strata_plan *plan = NULL;
	CHECK_EQ(strata_prepare_merge(db, 0, 0, &plan), STRATA_EBUSY);
	CHECK(plan == NULL);
	CHECK(strstr(strata_last_error(), "already in flight") != NULL);
	CHECK_EQ(strata_merge(db, 0, 0, NULL), STRATA_EBUSY);
	strata_stats during = stats_of(db);
	CHECK_EQ(during.seals, before.seals);
	CHECK_EQ(during.memtable_rows, 10);
	CHECK_EQ(count_objects(dir, "run/"), 1); /* A's run only: B wrote none */
	/* A compaction is another kind of plan: it is not blocked by a merge. */
	CHECK_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
	strata_abort_merge(db, plan);
	pt_release();
	pthread_join(a.th, NULL);
	pt_disarm();
	CHECK_EQ(a.rc_prepare, 0);
	CHECK_EQ(a.rc_commit, 0);
	CHECK_EQ(a.merged, 3);

	/* Once A committed, the next prepare goes ahead (and folds the late rows). */
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 1);
	strata_stats s = stats_of(db);
	CHECK_EQ(s.merges, 2);
	CHECK_EQ(s.merge_conflicts, 0);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(three_generations_misses(db, 100), 0);
	CHECK_EQ(range_misses(db, "late-", 0, 10, "l"), 0);
	CHECK_EQ(count_objects(dir, "run/"), 2);
	/* A failed prepare releases the shard too. */
	pt_arm("prepare.run_written", PT_FAIL);
	CHECK_EQ(put_range(db, "f-", 0, 10, "f", 10), 0);
	CHECK_EQ(strata_merge(db, 0, 0, NULL), STRATA_EINJECTED);
	pt_disarm();
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 1);
	db_close(db);
}

struct t5_client {
	strata *db;
	int id;
	/** Failed operations. */
	int errors;
	pthread_t th;
};


/** Appends one row ("inflight") from a thread that volunteers to pause. */
static void *
inflight_append_thread(void *arg)
{
	strata *db = arg;
	pt_self = 1;
	strata_row r = { "inflight", 8, "v-inflight", 10 };
	intptr_t rc = strata_append(db, 0, &r, 1);
	pt_worker_finished();
	return (void *)rc;
}

/** Seals shard 0 and records that it returned. */
static void *
sealer_thread(void *arg)
{
	strata *db = arg;
	intptr_t rc = strata_seal(db, 0);
	pthread_mutex_lock(&pt.mu);
	pt.seal_done = 1;
	pthread_cond_broadcast(&pt.cv);
	pthread_mutex_unlock(&pt.mu);
	return (void *)rc;
}

/*
 * A seal must not flush a memtable while an append that was given a position in
 * it has not inserted its rows: the generation would miss the row while the WAL
 * cursor moves past it, and a restart would never replay it.
 */
TEST(seal_waits_for_inflight_append)
{
	char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "w", 0, 10, "a", 10), 0);
	pt_arm("append.durable", PT_PAUSE);
	pthread_mutex_lock(&pt.mu);
	pt.seal_waiting = 0;
	pt.seal_done = 0;
	pthread_mutex_unlock(&pt.mu);
	pthread_t ta, ts;
	pthread_create(&ta, NULL, inflight_append_thread, db);
	int arrived = pt_wait(1);
	CHECK_EQ(arrived, 1);
	pthread_create(&ts, NULL, sealer_thread, db);
	pthread_mutex_lock(&pt.mu);
	while (pt.seal_waiting == 0 && !pt.seal_done)
		pthread_cond_wait(&pt.cv, &pt.mu);
	int done_early = pt.seal_done;
	pthread_mutex_unlock(&pt.mu);
	CHECK(!done_early); /* the seal finished while an append into its memtable was in flight */
	pt_release();
	void *ra, *rs;
	pthread_join(ta, &ra);
	pthread_join(ts, &rs);
	pt_disarm();
	CHECK_EQ((intptr_t)ra, 0);
	CHECK_EQ((intptr_t)rs, 0);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(strata_get(db, 0, "inflight", 8, &v, &vl), 0);
	strata_free(v);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	v = NULL;
	CHECK_EQ(strata_get(db, 0, "inflight", 8, &v, &vl), 0);
	CHECK(v != NULL && vl == 10 && memcmp(v, "v-inflight", 10) == 0);
	strata_free(v);
	db_close(db);
}
static void *
t5_client_main(void *p)
{
	struct t5_client *c = p;
	char prefix[16];
	snprintf(prefix, sizeof(prefix), "c%d-", c->id);
	if (put_range(c->db, prefix, 0, 500, "during", 10) != 0)
		c->errors++;
	c->errors += range_misses(c->db, prefix, 0, 500, "during");
	/* Rows of the generations being merged stay readable. */
	c->errors += three_generations_misses(c->db, 300);
	return NULL;
}

TEST(append_not_blocked_by_prepare)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.block_bytes = 1024;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(three_generations(db, 300), 0);

	pt_arm("prepare.block", PT_PAUSE);
	struct job j = { .db = db, .cap = 0, .kind = JOB_MERGE, .pause = 1 };
	job_start(&j);
	int arrived = pt_wait(1);
	CHECK_EQ(arrived, 1);
	/* The prepare is paused mid-IO: these must all complete (a block here hangs the watchdog). */
	struct t5_client c[2];
	for (int i = 0; i < 2; i++) {
		c[i] = (struct t5_client){ .db = db, .id = i };
		if (pthread_create(&c[i].th, NULL, t5_client_main, &c[i]) != 0)
			abort();
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(c[i].th, NULL);
		CHECK_EQ(c[i].errors, 0);
	}
	int still_paused;
	pthread_mutex_lock(&pt.mu);
	still_paused = pt.finished == 0;
	pthread_mutex_unlock(&pt.mu);
	CHECK(still_paused);
	CHECK_EQ(stats_of(db).rows_appended, 3 * 300 + 2 * 500);
	/* The paused merge shows as in flight: its input bytes, and a part of them read. */
	strata_stats mid = stats_of(db);
	CHECK(mid.merge_in_flight_bytes > 0);
	CHECK_EQ(mid.merge_in_flight_bytes, mid.generation_bytes);
	CHECK(mid.merge_in_flight_done_bytes > 0);
	CHECK(mid.merge_in_flight_done_bytes < mid.merge_in_flight_bytes);
	pt_release();
	pthread_join(j.th, NULL);
	pt_disarm();
	CHECK_EQ(j.rc, 0);
	CHECK_EQ(j.merged, 3);
	CHECK_EQ(stats_of(db).merge_in_flight_bytes, 0);
	CHECK_EQ(stats_of(db).merge_in_flight_done_bytes, 0);
	CHECK_EQ(range_misses(db, "c0-", 0, 500, "during"), 0);
	CHECK_EQ(range_misses(db, "c1-", 0, 500, "during"), 0);
	CHECK(scan_ok(db, 3 * 300 + 2 * 500));
	db_close(db);
}

/** Ten generations "G<g>-%05d" of 50 rows, each also overwriting "shared" with "shared=gen-<g>". */
static int
ten_generations(strata *db)
{
	for (int g = 0; g < 10; g++) {
		char prefix[16], val[32];
		snprintf(prefix, sizeof(prefix), "G%d-", g);
		snprintf(val, sizeof(val), "shared=gen-%d", g);
		int rc = put_range(db, prefix, 0, 50, "x", 25);
		strata_row r = { "shared", 6, val, strlen(val) };
		if (rc == 0)
			rc = strata_append(db, 0, &r, 1);
		if (rc == 0)
			rc = strata_seal(db, 0);
		if (rc != 0) {
			fprintf(stderr, "  generation %d: %s: %s\n", g, strata_strerror(rc), strata_last_error());
			return rc;
		}
	}
	return 0;
}

static int
ten_generations_misses(strata *db)
{
	int bad = 0;
	for (int g = 0; g < 10; g++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "G%d-", g);
		bad += range_misses(db, prefix, 0, 50, "x");
	}
	if (!get_is(db, "shared", "shared=gen-9"))
		bad++;
	return bad;
}

TEST(merge_pass_is_bounded)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(ten_generations(db), 0);
	REQUIRE_EQ(stats_of(db).generations, 10);
	struct manifest m0;
	REQUIRE_EQ(load_manifest(dir, &m0), 0);
	CHECK_EQ(m0.ngens, 10);

	static const uint32_t want[] = { 3, 3, 3, 1 };
	uint32_t got[16];
	int passes = 0;
	while (stats_of(db).generations > 0 && passes < 16) {
		uint32_t merged = 0;
		int rc = strata_merge(db, 0, 3, &merged);
		CHECK_EQ(rc, 0);
		if (rc != 0)
			break;
		got[passes++] = merged;
		/* Newest value wins while older generations sit in the base below newer ones. */
		CHECK(get_is(db, "shared", "shared=gen-9"));
		if (passes == 1 && m0.ngens == 10) {
			/* The pass took the oldest three. */
			struct manifest m1;
			if (load_manifest(dir, &m1) == 0) {
				CHECK_EQ(m1.ngens, 7);
				for (uint32_t i = 0; i < m1.ngens && i < 7; i++)
					CHECK_EQ(m1.gens[i].id, m0.gens[i + 3].id);
				CHECK_EQ(m1.nruns, 1);
				manifest_destroy(&m1);
			}
		}
	}
	manifest_destroy(&m0);
	CHECK_EQ(passes, 4);
	for (int i = 0; i < passes && i < 4; i++)
		CHECK_EQ(got[i], want[i]);
	strata_stats s = stats_of(db);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(s.base_runs, 4);
	CHECK_EQ(s.merged_generations, 10);
	CHECK_EQ(count_objects(dir, "gen/"), 0);
	CHECK_EQ(count_objects(dir, "run/"), 4);
	CHECK_EQ(ten_generations_misses(db), 0);
	CHECK(scan_ok(db, 10 * 50 + 1));
	db_close(db);
}

TEST(engine_cap_binds_every_pass)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	CHECK_EQ(o.merge_max_inputs, 8); /* the default */
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(ten_generations(db), 0);
	/* 0 asks for "all": the engine folds up to its cap, and the rest waits. */
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 8);
	CHECK_EQ(stats_of(db).generations, 2);
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);
	CHECK_EQ(ten_generations_misses(db), 0);
	db_close(db);

	/* A smaller configured cap binds an explicit larger request too, and compactions. */
	o.merge_max_inputs = 3;
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(stats_of(db).base_runs, 2);
	REQUIRE_EQ(ten_generations(db), 0);
	CHECK_EQ(strata_merge(db, 0, 100, &merged), 0);
	CHECK_EQ(merged, 3);
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 3);
	CHECK_EQ(strata_merge(db, 0, 2, &merged), 0);
	CHECK_EQ(merged, 2); /* a caller may ask for less */
	strata_stats s = stats_of(db);
	CHECK_EQ(s.base_runs, 5);
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
	CHECK_EQ(strata_plan_generations(plan), 3);
	CHECK_EQ(strata_commit_merge(db, plan), 0);
	CHECK_EQ(stats_of(db).base_runs, 3);
	CHECK_EQ(ten_generations_misses(db), 0);
	CHECK(scan_ok(db, 10 * 50 + 1));
	db_close(db);

	o.merge_max_inputs = 1;
	strata *bad = NULL;
	CHECK_EQ(strata_open(&o, &bad), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "merge_max_inputs") != NULL);
}

TEST(merge_seals_first)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	char keys[100][16], vals[100][64];
	strata_row rows[100];
	for (int i = 0; i < 100; i++) {
		snprintf(keys[i], sizeof(keys[i]), "m-%05d", i);
		size_t vl = make_value(vals[i], sizeof(vals[i]), keys[i], "wal", 40);
		rows[i] = (strata_row){ keys[i], strlen(keys[i]), vals[i], vl };
	}
	uint64_t last = 0;
	REQUIRE_EQ(strata_append_seq(db, 0, rows, 50, &last), 0);
	uint64_t last2 = 0;
	REQUIRE_EQ(strata_append_seq(db, 0, rows + 50, 50, &last2), 0);
	CHECK_EQ(last2, last + 50);
	last = last2;
	strata_stats s = stats_of(db);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(s.memtable_rows, 100);
	CHECK_EQ(s.last_seq, last);

	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 1);
	s = stats_of(db);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(s.base_runs, 1);
	CHECK_EQ(s.memtable_rows, 0);
	CHECK_EQ(s.sealed_memtables, 0);
	CHECK_EQ(s.replay_after, last);
	struct manifest m;
	if (load_manifest(dir, &m) == 0) {
		CHECK_EQ(m.ngens, 0);
		CHECK_EQ(m.nruns, 1);
		CHECK_EQ(m.replay_after, last);
		if (m.nruns == 1) {
			CHECK_EQ(m.runs[0].rows, 100);
			CHECK_EQ(m.runs[0].max_seq, last);
		}
		manifest_destroy(&m);
	} else {
		CHECK(!"manifest loads");
	}
	CHECK_EQ(range_misses(db, "m-", 0, 100, "wal"), 0);
	db_close(db);

	db = db_open(&o);
	REQUIRE(db != NULL);
	s = stats_of(db);
	CHECK_EQ(s.generations, 0);
	CHECK_EQ(s.base_runs, 1);
	CHECK_EQ(s.memtable_rows, 0);
	CHECK_EQ(s.replay_after, last);
	CHECK_EQ(range_misses(db, "m-", 0, 100, "wal"), 0);
	CHECK(scan_ok(db, 100));
	db_close(db);
}

/** The directory lock always granted: two handles on one directory, as two machines
 *  on shared storage would be, where no local lock can help. */
static int
flock_granted(int fd, int op)
{
	(void)fd;
	(void)op;
	return 0;
}

TEST(second_open_is_refused_while_the_first_lives)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.shards = 2;
	strata *a = db_open(&o);
	REQUIRE(a != NULL);
	REQUIRE_EQ(put_range(a, "a-", 0, 50, "a", 10), 0);
	strata_stats sa = stats_of(a);
	strata *b = NULL;
	CHECK_EQ(strata_open(&o, &b), STRATA_ELOCKED);
	CHECK(b == NULL);
	char pid[32];
	snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	CHECK(strstr(strata_last_error(), dir) != NULL);
	CHECK(strstr(strata_last_error(), pid) != NULL);
	/* Another process is refused the same way. */
	pid_t child = fork();
	if (child == 0) {
		strata *c = NULL;
		int crc = strata_open(&o, &c);
		_exit(crc == STRATA_ELOCKED && strstr(strata_last_error(), pid) != NULL ? 0 : 1);
	}
	int status = -1;
	REQUIRE(child > 0 && waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The refused openers claimed nothing: the first handle still owns every shard. */
	CHECK_EQ(stats_of(a).writer_epoch, sa.writer_epoch);
	CHECK_EQ(put_range(a, "b-", 0, 50, "b", 10), 0);
	CHECK_EQ(range_misses(a, "a-", 0, 50, "a"), 0);
	db_close(a);
	/* Closed: the directory has no owner, and the next open sees every row. */
	b = db_open(&o);
	REQUIRE(b != NULL);
	CHECK_EQ(range_misses(b, "a-", 0, 50, "a"), 0);
	CHECK_EQ(range_misses(b, "b-", 0, 50, "b"), 0);
	db_close(b);
}

TEST(second_open_fences_first)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *a = db_open(&o);
	REQUIRE(a != NULL);
	REQUIRE_EQ(put_range(a, "r1-", 0, 100, "a", 20), 0);
	REQUIRE_EQ(strata_seal(a, 0), 0);
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_merge(a, 0, 0, &plan), 0);
	CHECK_EQ(strata_plan_generations(plan), 1);
	CHECK_EQ(strata_plan_shard(plan), 0);
	REQUIRE_EQ(put_range(a, "r2-", 0, 100, "a", 20), 0);
	strata_stats sa = stats_of(a);

	env.flock = flock_granted;
	strata *b = db_open(&o);
	env.flock = flock;
	if (b == NULL)
		strata_abort_merge(a, plan);
	REQUIRE(b != NULL);
	strata_stats sb = stats_of(b);
	CHECK(sb.writer_epoch > sa.writer_epoch);

	/* A learns at its next append: refused, and terminal for every later call. */
	strata_row row = {"late", 4, "x", 1};
	CHECK_EQ(strata_append(a, 0, &row, 1), STRATA_EFENCED);
	CHECK(strstr(strata_last_error(), "fenced") != NULL);
	CHECK_EQ(strata_append(a, 0, &row, 1), STRATA_EFENCED);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(strata_get(a, 0, "r1-0", 4, &v, &vl), STRATA_EFENCED);
	int rc = strata_seal(a, 0);
	CHECK_EQ(rc, STRATA_EFENCED);
	rc = strata_commit_merge(a, plan);
	CHECK_EQ(rc, STRATA_EFENCED);

	/* B owns the shard: it sees A's acknowledged rows and merges without claiming an epoch. */
	CHECK_EQ(range_misses(b, "r1-", 0, 100, "a"), 0);
	CHECK_EQ(range_misses(b, "r2-", 0, 100, "a"), 0);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(b, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);
	strata_stats sb2 = stats_of(b);
	CHECK_EQ(sb2.writer_epoch, sb.writer_epoch);
	CHECK_EQ(sb2.generations, 0);
	CHECK_EQ(sb2.base_runs, 1);
	struct manifest m;
	if (load_manifest(dir, &m) == 0) {
		CHECK_EQ(m.writer_epoch, sb.writer_epoch);
		manifest_destroy(&m);
	}
	db_close(a);
	CHECK_EQ(range_misses(b, "r1-", 0, 100, "a"), 0);
	CHECK_EQ(range_misses(b, "r2-", 0, 100, "a"), 0);
	CHECK_EQ(count_objects(dir, "run/"), 1);
	CHECK_EQ(count_objects(dir, "gen/"), 0);
	db_close(b);
}

/** fenced_writer_never_acknowledges: one writer thread of the old owner. */
struct fw_writer {
	/** The old owner's handle. */
	strata *db;
	/** Keys acknowledged, in order: "w-<i>". */
	int acked;
	/** Result of the first failed append. */
	int rc;
	/** Set by the test to stop a writer that was never fenced. */
	atomic_int stop;
	/** The thread. */
	pthread_t th;
};

static void *
fw_main(void *p)
{
	struct fw_writer *w = p;
	for (int i = 0; !atomic_load(&w->stop); i++) {
		char key[32];
		int kl = snprintf(key, sizeof(key), "w-%07d", i);
		strata_row r = {key, (size_t)kl, "old", 3};
		int rc = strata_append(w->db, 0, &r, 1);
		if (rc != 0) {
			w->rc = rc;
			return NULL;
		}
		w->acked = i + 1;
	}
	return NULL;
}

TEST(fenced_writer_never_acknowledges)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.sync = STRATA_SYNC_FSYNC;
	o.wal_segment_bytes = 4096; /* the old writer rolls segments while it is taken over */
	env.flock = flock_granted;
	strata *a = db_open(&o);
	REQUIRE(a != NULL);
	REQUIRE_EQ(put_range(a, "pre-", 0, 50, "a", 10), 0);
	REQUIRE_EQ(strata_seal(a, 0), 0);
	/* The old owner keeps appending from a thread while the new one opens. */
	struct fw_writer w = {.db = a};
	REQUIRE(pthread_create(&w.th, NULL, fw_main, &w) == 0);
	while (w.acked < 200)
		sched_yield();
	strata *b = db_open(&o);
	/* A fenced writer stops by itself at its next group commit. */
	for (int ms = 0; ms < 3000 && w.rc == 0; ms++)
		usleep(1000);
	atomic_store(&w.stop, 1);
	pthread_join(w.th, NULL);
	env.flock = flock;
	REQUIRE(b != NULL);
	CHECK_EQ(w.rc, STRATA_EFENCED);
	/* Every row the old owner acknowledged is in the new owner's store. */
	int acked = w.acked, missing = 0;
	for (int i = 0; i < acked; i++) {
		char key[32];
		snprintf(key, sizeof(key), "w-%07d", i);
		missing += !get_is(b, key, "old");
	}
	CHECK_EQ(missing, 0);
	CHECK_EQ(range_misses(b, "pre-", 0, 50, "a"), 0);
	/* The new owner's own rows, and both owners' rows again after a reopen. */
	REQUIRE_EQ(put_range(b, "new-", 0, 100, "b", 10), 0);
	db_close(a);
	db_close(b);
	b = db_open(&o);
	REQUIRE(b != NULL);
	missing = 0;
	for (int i = 0; i < acked; i++) {
		char key[32];
		snprintf(key, sizeof(key), "w-%07d", i);
		missing += !get_is(b, key, "old");
	}
	CHECK_EQ(missing, 0);
	CHECK_EQ(range_misses(b, "new-", 0, 100, "b"), 0);
	CHECK_EQ(range_misses(b, "pre-", 0, 50, "a"), 0);
	CHECK_EQ(strata_check(b, 0), 0);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(b, 0, 0, &merged), 0);
	CHECK_EQ(range_misses(b, "new-", 0, 100, "b"), 0);
	db_close(b);
}

/** landed_manifest_write_is_reconciled: the next manifest put lands, then reports EIO,
 *  and the read-back that would tell fails too. */
static struct {
	/** Lie about the next manifest link. */
	int armed;
	/** Fail the read-back of the manifest that landed. */
	int readback;
} lie;

static int
lying_link(const char *from, const char *to)
{
	int r = link(from, to);
	if (r == 0 && lie.armed && strstr(to, "/manifest/") != NULL) {
		lie.armed = 0;
		lie.readback = 1;
		errno = EIO;
		return -1;
	}
	return r;
}

static int
lying_open(const char *path, int flags, mode_t mode)
{
	if (lie.readback && strstr(path, "/manifest/") != NULL && (flags & O_ACCMODE) == O_RDONLY &&
	    !(flags & O_DIRECTORY)) {
		lie.readback = 0;
		errno = EIO;
		return -1;
	}
	return open(path, flags, mode);
}

TEST(landed_manifest_write_is_reconciled)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	struct env_ops saved = env;
	env.link = lying_link;
	env.open = lying_open;
	/* A seal whose publish landed but reported failure. */
	REQUIRE_EQ(put_range(db, "s1-", 0, 50, "a", 10), 0);
	lie.armed = 1;
	CHECK_EQ(strata_seal(db, 0), STRATA_EIO);
	CHECK_EQ(lie.armed + lie.readback, 0); /* both faults acted */
	CHECK_EQ(range_misses(db, "s1-", 0, 50, "a"), 0);
	REQUIRE_EQ(put_range(db, "s2-", 0, 50, "b", 10), 0);
	CHECK_EQ(strata_seal(db, 0), 0);
	strata_stats st = stats_of(db);
	CHECK_EQ(st.generations, 2); /* the landed one, once, and the new one */
	CHECK_EQ(st.sealed_memtables, 0);
	CHECK_EQ(count_objects(dir, "gen/"), 2);
	CHECK_EQ(strata_check(db, 0), 0);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);

	/* A commit whose manifest landed but reported failure. */
	REQUIRE_EQ(put_range(db, "s3-", 0, 50, "c", 10), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	strata_plan *plan = NULL;
	REQUIRE_EQ(strata_prepare_merge(db, 0, 0, &plan), 0);
	lie.armed = 1;
	CHECK_EQ(strata_commit_merge(db, plan), STRATA_EIO);
	REQUIRE_EQ(put_range(db, "s4-", 0, 50, "d", 10), 0);
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 1);
	st = stats_of(db);
	CHECK_EQ(st.generations, 0);
	CHECK_EQ(st.base_runs, 3);
	CHECK_EQ(st.merge_conflicts, 0);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK_EQ(count_objects(dir, "gen/"), 0);
	CHECK_EQ(count_objects(dir, "run/"), 3);
	env.link = saved.link;
	env.open = saved.open;
	const char *pre[4] = {"s1-", "s2-", "s3-", "s4-"}, *val[4] = {"a", "b", "c", "d"};
	for (int k = 0; k < 4; k++)
		CHECK_EQ(range_misses(db, pre[k], 0, 50, val[k]), 0);
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (int k = 0; k < 4; k++)
		CHECK_EQ(range_misses(db, pre[k], 0, 50, val[k]), 0);
	CHECK_EQ(stats_of(db).base_runs, 3);
	db_close(db);
}

/** append_is_all_or_nothing_under_enomem: allocations left before they fail (-1: never). */
static atomic_long alloc_budget = -1;

static int
alloc_take(void)
{
	long b = atomic_load(&alloc_budget);
	while (b >= 0) {
		if (b == 0)
			return 0;
		if (atomic_compare_exchange_weak(&alloc_budget, &b, b - 1))
			return 1;
	}
	return 1;
}

static void *
budget_malloc(size_t n)
{
	return alloc_take() ? malloc(n) : NULL;
}

static void *
budget_calloc(size_t n, size_t k)
{
	return alloc_take() ? calloc(n, k) : NULL;
}

static void *
budget_realloc(void *p, size_t n)
{
	return alloc_take() ? realloc(p, n) : NULL;
}

TEST(append_is_all_or_nothing_under_enomem)
{
	/* Values over a quarter of a memtable chunk: every row needs an allocation of its own. */
	enum { ROWS = 4, VLEN = 300 << 10 };
	static char vals[ROWS][VLEN];
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	struct env_ops saved = env;
	int failures = 0, n;
	for (n = 0; n < 200; n++) {
		strata_row rows[ROWS];
		char keys[ROWS][32];
		for (int r = 0; r < ROWS; r++) {
			snprintf(keys[r], sizeof(keys[r]), "n%03d-r%d", n, r);
			memset(vals[r], 'a' + r, VLEN);
			rows[r] = (strata_row){keys[r], strlen(keys[r]), vals[r], VLEN};
		}
		atomic_store(&alloc_budget, n);
		env.malloc = budget_malloc;
		env.calloc = budget_calloc;
		env.realloc = budget_realloc;
		int rc = strata_append(db, 0, rows, ROWS);
		env.malloc = saved.malloc;
		env.calloc = saved.calloc;
		env.realloc = saved.realloc;
		atomic_store(&alloc_budget, -1);
		int visible = 0;
		for (int r = 0; r < ROWS; r++) {
			void *v = NULL;
			size_t vl = 0;
			if (strata_get(db, 0, keys[r], strlen(keys[r]), &v, &vl) == 0) {
				visible++;
				strata_free(v);
			}
		}
		if (rc == 0) {
			CHECK_EQ(visible, ROWS);
			break;
		}
		failures++;
		CHECK_EQ(rc, STRATA_ENOMEM);
		if (visible != 0)
			fprintf(stderr, "  allocation %d failed: %d of %d rows visible\n", n, visible, ROWS);
		CHECK_EQ(visible, 0);
	}
	CHECK(failures >= ROWS); /* the sweep reached the per-row allocations */
	CHECK(n < 200);
	db_close(db);
}

/** Write n generations of rows random bytes (so zstd cannot shrink them) of total bytes. */
static int
noise_generations(strata *db, int n, size_t bytes)
{
	static char val[4096];
	uint64_t x = 0x2545f4914f6cdd1dull;
	size_t per = bytes / (size_t)n, rows = per / sizeof(val);
	for (int g = 0; g < n; g++) {
		for (size_t r = 0; r < rows; r++) {
			for (size_t k = 0; k < sizeof(val); k += 8) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				memcpy(val + k, &x, 8);
			}
			char key[32];
			snprintf(key, sizeof(key), "n%02d-%06zu", g, r);
			strata_row row = {key, strlen(key), val, sizeof(val)};
			if (strata_append(db, 0, &row, 1) != 0)
				return -1;
		}
		if (strata_seal(db, 0) != 0)
			return -1;
	}
	return 0;
}

TEST(background_writes_keep_to_their_budget)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(noise_generations(db, 3, 3u << 20), 0);
	/* 2 MiB/s: a merge writing about 3 MiB takes at least (3 MiB - burst) / 2 MiB/s. */
	store_set_io_rate(strata_store(db), 2u << 20);
	strata_stats st = stats_of(db);
	CHECK_EQ(st.background_io_bytes_per_s, 2u << 20);
	uint64_t t0 = env.mono_ns();
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	uint64_t limited = env.mono_ns() - t0;
	CHECK_EQ(merged, 3);
	CHECK(limited >= 1000000000ull);
	st = stats_of(db);
	CHECK(st.background_io_wait_ns >= 800000000ull);
	/* Lifted live: the same volume goes through without waiting. */
	store_set_io_rate(strata_store(db), 0);
	REQUIRE_EQ(noise_generations(db, 3, 3u << 20), 0);
	uint64_t waited = stats_of(db).background_io_wait_ns;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(stats_of(db).background_io_wait_ns, waited);
	CHECK_EQ(stats_of(db).background_io_bytes_per_s, 0);
	db_close(db);
}

TEST(shard_count_is_part_of_the_store)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.shards = 4;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k-", 0, 10, "v", 10), 0);
	db_close(db);
	uint32_t n = 0;
	CHECK_EQ(strata_stored_shards(dir, &n), 0);
	CHECK_EQ(n, 4);
	for (uint32_t bad = 2; bad <= 8; bad += 6) {
		o.shards = bad;
		db = NULL;
		CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
		CHECK(db == NULL);
		CHECK(strstr(strata_last_error(), "holds a store of 4 shards") != NULL);
	}
	o.shards = 0; /* as stored */
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(strata_shards(db), 4);
	CHECK_EQ(range_misses(db, "k-", 0, 10, "v"), 0);
	db_close(db);
	const char *fresh = tdir();
	CHECK_EQ(strata_stored_shards(fresh, &n), STRATA_NOTFOUND);
}

static void
fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed | 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t x = xorshift(&s);
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)xorshift(&s);
}

/** 1 if key reads back as exactly v[0..n). */
static int
get_blob_is(strata *db, const char *key, const uint8_t *want, size_t n)
{
	void *v = NULL;
	size_t got = 0;
	int rc = strata_get(db, 0, key, strlen(key), &v, &got);
	if (rc != 0) {
		fprintf(stderr, "  get %s: %s: %s\n", key, strata_strerror(rc), strata_last_error());
		return 0;
	}
	int ok = got == n && memcmp(v, want, n) == 0;
	if (!ok)
		fprintf(stderr, "  get %s: %zu bytes, want %zu%s\n", key, got, n,
			got == n ? " (contents differ)" : "");
	strata_free(v);
	return ok;
}

#define BIG_VALUE (16u << 20)
#define BIG_KEYS 4

TEST(large_values_round_trip)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.max_value_bytes = BIG_VALUE;
	uint8_t *vals[BIG_KEYS];
	for (int i = 0; i < BIG_KEYS; i++) {
		vals[i] = malloc(BIG_VALUE + 1);
		REQUIRE(vals[i] != NULL);
		fill_random(vals[i], BIG_VALUE + 1, 0x1234567ull + (uint64_t)i);
	}
	const char *keys[BIG_KEYS] = { "big-0", "big-1", "big-2", "big-3" };
	strata *db = db_open(&o);
	if (db == NULL)
		goto out;
	strata_row r;
	for (int i = 0; i < 2; i++) {
		r = (strata_row){ keys[i], strlen(keys[i]), vals[i], BIG_VALUE };
		CHECK_EQ(strata_append(db, 0, &r, 1), 0);
		CHECK(get_blob_is(db, keys[i], vals[i], BIG_VALUE));
	}
	r = (strata_row){ "too-big", 7, vals[0], BIG_VALUE + 1 };
	CHECK_EQ(strata_append(db, 0, &r, 1), STRATA_ETOOBIG);
	CHECK_EQ(strata_seal(db, 0), 0);
	CHECK(get_blob_is(db, keys[0], vals[0], BIG_VALUE));
	CHECK(get_blob_is(db, keys[1], vals[1], BIG_VALUE));
	r = (strata_row){ keys[2], strlen(keys[2]), vals[2], BIG_VALUE };
	CHECK_EQ(strata_append(db, 0, &r, 1), 0);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);
	for (int i = 0; i < 3; i++)
		CHECK(get_blob_is(db, keys[i], vals[i], BIG_VALUE));
	/* The last one only in the WAL across a reopen. */
	r = (strata_row){ keys[3], strlen(keys[3]), vals[3], BIG_VALUE };
	CHECK_EQ(strata_append(db, 0, &r, 1), 0);
	db_close(db);
	db = db_open(&o);
	if (db == NULL) {
		CHECK(!"reopen with a 16 MiB value in the WAL");
		goto out;
	}
	CHECK_EQ(stats_of(db).memtable_rows, 1);
	for (int i = 0; i < BIG_KEYS; i++)
		CHECK(get_blob_is(db, keys[i], vals[i], BIG_VALUE));
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 1);
	db_close(db);
	db = db_open(&o);
	if (db == NULL) {
		CHECK(!"reopen after merging 16 MiB values");
		goto out;
	}
	for (int i = 0; i < BIG_KEYS; i++)
		CHECK(get_blob_is(db, keys[i], vals[i], BIG_VALUE));
	CHECK_EQ(stats_of(db).base_runs, 2);
	db_close(db);
out:
	for (int i = 0; i < BIG_KEYS; i++)
		free(vals[i]);
}

/* Incompressible rows are stored raw, compressible ones compressed; strata_stats (and so
 * /metrics) counts both, and what compression saved. */
TEST(stats_count_raw_and_compressed_blocks)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	static uint8_t v[1000];
	char key[32];
	for (int i = 0; i < 1000; i++) {
		fill_random(v, sizeof(v), 2 * (uint64_t)i + 77);
		snprintf(key, sizeof(key), "random-%04d", i);
		strata_row r = { key, strlen(key), v, sizeof(v) };
		REQUIRE_EQ(strata_append(db, 0, &r, 1), 0);
	}
	CHECK_EQ(strata_seal(db, 0), 0);
	strata_stats st = stats_of(db);
	CHECK(st.blocks_raw >= 14); /* 1 MB of rows in 64 KiB blocks */
	CHECK_EQ(st.blocks_compressed, 0);
	CHECK(st.blocks_compress_untried > 0);
	CHECK_EQ(st.compress_saved_bytes, 0);
	memset(v, 'x', sizeof(v));
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "text-%04d", i);
		strata_row r = { key, strlen(key), v, sizeof(v) };
		REQUIRE_EQ(strata_append(db, 0, &r, 1), 0);
	}
	CHECK_EQ(strata_seal(db, 0), 0);
	strata_stats after = stats_of(db);
	CHECK(after.blocks_compressed >= 14);
	CHECK_EQ(after.blocks_raw, st.blocks_raw);
	CHECK(after.compress_saved_bytes > 900000);
	/* A merge of both writes its blocks the same way, and reads both kinds back. */
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 2);
	strata_stats m = stats_of(db);
	CHECK(m.blocks_raw >= 2 * st.blocks_raw - 1);
	CHECK(m.blocks_compressed > after.blocks_compressed);
	fill_random(v, sizeof(v), 2 * 500 + 77);
	CHECK(get_blob_is(db, "random-0500", v, sizeof(v)));
	memset(v, 'x', sizeof(v));
	CHECK(get_blob_is(db, "text-0999", v, sizeof(v)));
	db_close(db);
	/* 0 never compresses. */
	o.compress_max_bytes_per_kib = 0;
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "more-text-%04d", i);
		strata_row r = { key, strlen(key), v, sizeof(v) };
		REQUIRE_EQ(strata_append(db, 0, &r, 1), 0);
	}
	CHECK_EQ(strata_seal(db, 0), 0);
	st = stats_of(db);
	CHECK_EQ(st.blocks_compressed, 0);
	CHECK(st.blocks_raw >= 14);
	CHECK_EQ(st.blocks_compress_untried, 0);
	CHECK(get_blob_is(db, "more-text-0001", v, sizeof(v)));
	db_close(db);
}

/** Context of the listing that finds shard 0's one run. */
struct one_run {
	char key[256];
	int n;
};

static int
one_run_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	struct one_run *r = ctx;
	if (r->n++ == 0)
		snprintf(r->key, sizeof(r->key), "%s", key);
	return 0;
}

/** The bytes of shard 0's only run in dir (malloc'd; NULL unless exactly one). */
static uint8_t *
only_run_bytes(const char *dir, size_t *len)
{
	char root[512];
	snprintf(root, sizeof(root), "%s/objects", dir);
	struct objstore *os = NULL;
	if (objstore_fs_new(root, &os) != 0)
		return NULL;
	struct one_run r = { .n = 0 };
	int rc = objstore_list(os, SHARD0 "run/", one_run_cb, &r);
	objstore_destroy(os);
	if (rc != 0 || r.n != 1) {
		fprintf(stderr, "  %d runs under %s (list: %d)\n", r.n, root, rc);
		return NULL;
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", root, r.key);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
	if (b != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

/** Value of key i written in generation g: random bytes for odd i, text for even. */
static size_t
threads_value(uint8_t *v, uint32_t i, uint32_t g)
{
	size_t n = 100 + (i * 7 + g) % 300;
	if (i % 2)
		fill_random(v, n, (uint64_t)i * 31 + g);
	else
		for (size_t k = 0; k < n; k++)
			v[k] = (uint8_t)('a' + (i + g + k / 16) % 4);
	return n;
}

/** Three generations over 3000 keys: g writes every (1 + g)th key from g on; the last
 *  one deletes those of them that are multiples of 5. */
static int
threads_generations(strata *db)
{
	static uint8_t v[512];
	char key[32];
	for (uint32_t g = 0; g < 3; g++) {
		for (uint32_t i = g; i < 3000; i += 1 + g) {
			snprintf(key, sizeof(key), "k%05u", i);
			strata_row r = { key, strlen(key), v, threads_value(v, i, g), STRATA_ROW_PUT };
			if (g == 2 && i % 5 == 0)
				r = (strata_row){ key, strlen(key), NULL, 0, STRATA_ROW_DELETE };
			int rc = strata_append(db, 0, &r, 1);
			if (rc)
				return rc;
		}
		int rc = strata_seal(db, 0);
		if (rc)
			return rc;
	}
	return 0;
}

/** The generation that last wrote key i in threads_generations. */
static uint32_t
threads_last_gen(uint32_t i)
{
	if (i >= 2 && (i - 2) % 3 == 0)
		return 2;
	if (i >= 1 && (i - 1) % 2 == 0)
		return 1;
	return 0;
}

/** Keys of threads_generations that do not read back their newest row (a deleted one
 *  must be absent). */
static int
threads_misses(strata *db)
{
	static uint8_t v[512];
	char key[32];
	int bad = 0;
	for (uint32_t i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "k%05u", i);
		uint32_t g = threads_last_gen(i);
		void *got = NULL;
		size_t n = 0;
		int rc = strata_get(db, 0, key, strlen(key), &got, &n);
		if (g == 2 && i % 5 == 0) {
			bad += rc != STRATA_NOTFOUND;
		} else {
			size_t want = threads_value(v, i, g);
			bad += rc != 0 || n != want || memcmp(got, v, n) != 0;
		}
		strata_free(got);
	}
	return bad;
}

TEST(a_merge_on_threads_writes_the_run_one_thread_writes)
{
	uint8_t *one = NULL;
	size_t one_len = 0;
	static const uint32_t threads[] = { 1, 4, 64 };
	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		const char *dir = tdir();
		strata_options o = opts_for(dir);
		o.block_bytes = 512; /* hundreds of blocks: many in flight at once */
		o.merge_threads = threads[t];
		strata *db = db_open(&o);
		REQUIRE(db != NULL);
		REQUIRE_EQ(threads_generations(db), 0);
		CHECK_EQ(stats_of(db).merge_threads, threads[t]);
		uint32_t merged = 0;
		CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
		CHECK_EQ(merged, 3);
		strata_stats st = stats_of(db);
		CHECK_EQ(st.base_runs, 1);
		CHECK(st.blocks_compressed > 100);
		CHECK(st.blocks_raw > 100);
		/* The helpers did encode blocks, and only when there are helpers. */
		if (threads[t] == 1)
			CHECK_EQ(st.merge_blocks_helped, 0);
		else
			CHECK(st.merge_blocks_helped > 0);
		/* Every key reads back its newest row. */
		CHECK_EQ(threads_misses(db), 0);
		db_close(db);
		size_t len = 0;
		uint8_t *b = only_run_bytes(dir, &len);
		REQUIRE(b != NULL);
		if (one == NULL) {
			one = b;
			one_len = len;
			continue;
		}
		/* Byte for byte the run one thread wrote. */
		CHECK_EQ(len, one_len);
		CHECK(len == one_len && memcmp(b, one, len) == 0);
		free(b);
	}
	free(one);
}

TEST(merge_threads_are_resolved_and_checked)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	CHECK_EQ(o.merge_threads, 0); /* auto */
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t want = cpus > 1 ? (uint32_t)(cpus / 2) : 1;
	CHECK_EQ(stats_of(db).merge_threads, want < 8 ? want : 8);
	db_close(db);
	/* Inline mode starts no thread: one, whatever is asked. */
	o.threads = 0;
	o.merge_threads = 4;
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(stats_of(db).merge_threads, 1);
	db_close(db);
	o.threads = STRATA_THREADS_DEFAULT;
	o.merge_threads = 65;
	strata *bad = NULL;
	CHECK_EQ(strata_open(&o, &bad), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "merge_threads") != NULL);
}

/** Every row of shard 0, in key order, as one byte string (lengths, key, value). */
struct image {
	uint8_t *b;
	size_t n, cap;
};

static int
image_row(void *ctx, const strata_row *r)
{
	struct image *im = ctx;
	size_t need = im->n + 16 + r->key_len + r->value_len;
	if (need > im->cap) {
		size_t cap = im->cap ? im->cap : 1 << 16;
		while (cap < need)
			cap *= 2;
		uint8_t *b = realloc(im->b, cap);
		if (b == NULL)
			return STRATA_ENOMEM;
		im->b = b;
		im->cap = cap;
	}
	uint64_t kl = r->key_len, vl = r->value_len;
	memcpy(im->b + im->n, &kl, 8);
	memcpy(im->b + im->n + 8, &vl, 8);
	memcpy(im->b + im->n + 16, r->key, r->key_len);
	if (vl)
		memcpy(im->b + im->n + 16 + kl, r->value, r->value_len);
	im->n = need;
	return 0;
}

static struct image
scan_image(strata *db)
{
	struct image im = { NULL, 0, 0 };
	if (strata_scan(db, 0, NULL, 0, NULL, 0, image_row, &im) != 0) {
		free(im.b);
		im = (struct image){ NULL, 0, 0 };
	}
	return im;
}

struct run_rows {
	struct objstore *os;
	uint64_t rows;
	/** Rows of the smallest and the largest run. */
	uint64_t least, most;
	int err;
};

static int
run_rows_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	struct run_rows *r = ctx;
	struct run_reader *rd = NULL;
	if (run_reader_open(r->os, key, &rd) != 0) {
		r->err = 1;
		return 0;
	}
	uint64_t n = run_reader_meta(rd)->rows;
	r->rows += n;
	if (n < r->least)
		r->least = n;
	if (n > r->most)
		r->most = n;
	run_reader_close(rd);
	return 0;
}

/** Rows of all of shard 0's run objects in dir (a key in two parts counts twice), or
 *  UINT64_MAX. */
static uint64_t
run_rows(const char *dir, uint64_t *least, uint64_t *most)
{
	char root[512];
	snprintf(root, sizeof(root), "%s/objects", dir);
	struct run_rows r = { NULL, 0, UINT64_MAX, 0, 0 };
	if (objstore_fs_new(root, &r.os) != 0)
		return UINT64_MAX;
	int rc = objstore_list(r.os, SHARD0 "run/", run_rows_cb, &r);
	objstore_destroy(r.os);
	*least = r.least;
	*most = r.most;
	return rc || r.err ? UINT64_MAX : r.rows;
}

TEST(a_split_merge_reads_back_as_one_part_does)
{
	struct image want[3] = { { NULL, 0, 0 } };
	uint64_t want_rows = 0;
	for (int split = 0; split < 2; split++) {
		const char *dir = tdir();
		strata_options o = opts_for(dir);
		o.block_bytes = 512;
		o.index_partition_bytes = 256; /* dozens of partitions per generation to cut at */
		o.merge_threads = split ? 4 : 1;
		o.merge_part_min_bytes = 1;
		strata *db = db_open(&o);
		REQUIRE(db != NULL);
		REQUIRE_EQ(threads_generations(db), 0);
		uint32_t merged = 0;
		strata_stats st0 = stats_of(db);
		CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
		CHECK_EQ(merged, 3);
		strata_stats st = stats_of(db);
		/* Every part wrote through the one background IO budget: it counted every
		 * byte of the runs but each file's 112-byte footer (RUN_FOOTER_SIZE, run.c). */
		uint64_t drawn = st.background_io_bytes - st0.background_io_bytes;
		CHECK_EQ(drawn + 112 * (split ? 4 : 1), st.merge_bytes_out);
		/* Four parts on four threads, one sorted run to a policy. */
		CHECK_EQ(st.base_runs, 1);
		CHECK_EQ(st.merge_split_parts, split ? 4 : 0);
		CHECK_EQ(count_objects(dir, "run/"), split ? 4 : 1);
		/* The parts hold every row once: no key is in two of them; and the cuts
		 * share them out about evenly (a part's rows within 1.5x of another's). */
		uint64_t least = 0, most = 0;
		uint64_t rows = run_rows(dir, &least, &most);
		if (!split)
			want_rows = rows;
		CHECK(rows != UINT64_MAX && rows > 2000);
		CHECK_EQ(rows, want_rows);
		CHECK(least > 0 && most * 2 <= least * 3);
		/* Every key reads back its newest row; the tombstones of the last generation
		 * are gone (nothing older outside the merge for them to hide). */
		CHECK_EQ(threads_misses(db), 0);
		struct image im[3];
		im[0] = scan_image(db);
		/* A second base run, then a compaction of both: it takes the split run's parts
		 * together, and splits its own output. */
		REQUIRE_EQ(threads_generations(db), 0);
		CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
		CHECK_EQ(stats_of(db).base_runs, 2);
		CHECK_EQ(count_objects(dir, "run/"), split ? 8 : 2);
		strata_plan *plan = NULL;
		CHECK_EQ(strata_prepare_compact(db, 0, 0, &plan), 0);
		REQUIRE(plan != NULL);
		CHECK_EQ(strata_plan_generations(plan), split ? 8 : 2);
		CHECK_EQ(strata_commit_merge(db, plan), 0);
		st = stats_of(db);
		CHECK_EQ(st.base_runs, 1);
		CHECK_EQ(st.compactions, 1);
		CHECK_EQ(st.merge_split_parts, split ? 12 : 0);
		im[1] = scan_image(db);
		db_close(db);
		/* The grouped manifest reads back: the same rows after a reopen. */
		db = db_open(&o);
		REQUIRE(db != NULL);
		CHECK_EQ(stats_of(db).base_runs, 1);
		CHECK_EQ(count_objects(dir, "run/"), split ? 4 : 1);
		im[2] = scan_image(db);
		db_close(db);
		for (int k = 0; k < 3; k++) {
			REQUIRE(im[k].b != NULL);
			if (!split) {
				want[k] = im[k];
				continue;
			}
			CHECK_EQ(im[k].n, want[k].n);
			CHECK(im[k].n == want[k].n && memcmp(im[k].b, want[k].b, im[k].n) == 0);
			free(im[k].b);
		}
	}
	CHECK(want[1].n == want[2].n && memcmp(want[1].b, want[2].b, want[1].n) == 0);
	for (int k = 0; k < 3; k++)
		free(want[k].b);
}

TEST(a_split_merge_that_fails_in_one_part_leaves_no_part)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.block_bytes = 512;
	o.index_partition_bytes = 256;
	o.merge_threads = 4;
	o.merge_part_min_bytes = 1;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(threads_generations(db), 0);
	/* One part fails at its first block; the other three stop at their next one. The
	 * pass reports the failure, not a stopped part's. */
	strata_stats st0 = stats_of(db);
	pt_arm("prepare.block", PT_FAIL_ONCE);
	CHECK_EQ(strata_merge(db, 0, 0, NULL), STRATA_EINJECTED);
	CHECK(strstr(strata_last_error(), "prepare.block") != NULL);
	pt_disarm();
	strata_stats st = stats_of(db);
	uint64_t failed_blocks = st.blocks_compressed + st.blocks_raw - st0.blocks_compressed -
				 st0.blocks_raw;
	CHECK_EQ(st.generations, 3);
	CHECK_EQ(st.base_runs, 0);
	CHECK_EQ(st.merge_split_parts, 0);
	/* Nothing of the pass is left behind once the reaper ran (the store's close
	 * drains it). */
	db_close(db);
	CHECK_EQ(count_objects(dir, "run/"), 0);
	db = db_open(&o);
	REQUIRE(db != NULL);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(merged, 3);
	st = stats_of(db);
	CHECK_EQ(st.merge_split_parts, 4);
	CHECK_EQ(count_objects(dir, "run/"), 4);
	/* Stopped, the failed pass wrote a few blocks (4 in three runs here); parts that
	 * wrote on to their ends would write three quarters of the whole pass's (1 560 of
	 * 2 090). Half leaves room for a scheduler that runs the others first for a while. */
	CHECK(failed_blocks * 2 < st.blocks_compressed + st.blocks_raw);
	db_close(db);
}

TEST(the_cap_binds_a_merge_on_threads)
{
	/* On four threads, whole (helpers compress) and split into parts. */
	for (int split = 0; split < 2; split++) {
		const char *dir = tdir();
		strata_options o = opts_for(dir);
		o.block_bytes = 256;
		o.merge_threads = 4;
		o.merge_max_inputs = 3;
		if (split) {
			o.index_partition_bytes = 256;
			o.merge_part_min_bytes = 1;
		}
		strata *db = db_open(&o);
		REQUIRE(db != NULL);
		REQUIRE_EQ(ten_generations(db), 0);
		uint32_t merged = 0;
		CHECK_EQ(strata_merge(db, 0, 100, &merged), 0);
		CHECK_EQ(merged, 3);
		/* (Whether helpers took blocks of so small a pass is up to the scheduler:
		 * a_merge_on_threads_writes_the_run_one_thread_writes checks them.) */
		CHECK_EQ(stats_of(db).merge_split_parts > 1, split);
		CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
		CHECK_EQ(merged, 3);
		CHECK_EQ(stats_of(db).generations, 4);
		CHECK_EQ(stats_of(db).base_runs, 2);
		/* The compaction cap counts sorted runs: two split runs are two inputs. */
		strata_plan *plan = NULL;
		CHECK_EQ(strata_prepare_compact(db, 0, 2, &plan), 0);
		REQUIRE(plan != NULL);
		if (split)
			CHECK(strata_plan_generations(plan) > 2);
		else
			CHECK_EQ(strata_plan_generations(plan), 2);
		CHECK_EQ(strata_commit_merge(db, plan), 0);
		CHECK_EQ(stats_of(db).base_runs, 1);
		CHECK_EQ(ten_generations_misses(db), 0);
		CHECK(scan_ok(db, 10 * 50 + 1));
		db_close(db);
	}
}

TEST(bad_input_is_refused)
{
	const char *dir = tdir();
	strata *db = NULL;
	/* Bad options. */
	CHECK_EQ(strata_open(NULL, &db), STRATA_EINVAL);
	strata_options o = opts_for(NULL);
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	o = opts_for(dir);
	o.shards = 65537;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	o = opts_for(dir);
	o.sync = 7;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	o = opts_for(dir);
	o.compress_max_bytes_per_kib = 1025;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "compress_max_bytes_per_kib") != NULL);
	o = opts_for(dir);
	o.compress_sample_every = 0;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);

	o = opts_for(dir);
	o.max_value_bytes = 1024;
	db = db_open(&o);
	REQUIRE(db != NULL);
	static char big[STRATA_MAX_KEY + 2];
	memset(big, 'k', sizeof(big));
	static char val[1026];
	memset(val, 'v', sizeof(val));

	/* Limits are inclusive. */
	strata_row r = { big, STRATA_MAX_KEY, "v", 1 };
	CHECK_EQ(strata_append(db, 0, &r, 1), 0);
	r.key_len = STRATA_MAX_KEY + 1;
	CHECK_EQ(strata_append(db, 0, &r, 1), STRATA_ETOOBIG);
	CHECK(strlen(strata_last_error()) > 0);
	r = (strata_row){ "val-max", 7, val, 1024 };
	CHECK_EQ(strata_append(db, 0, &r, 1), 0);
	r = (strata_row){ "val-over", 8, val, 1025 };
	CHECK_EQ(strata_append(db, 0, &r, 1), STRATA_ETOOBIG);
	CHECK(strlen(strata_last_error()) > 0);
	CHECK(get_is(db, "val-over", NULL));

	/* Shard out of range, everywhere. */
	r = (strata_row){ "k", 1, "k=", 2 };
	void *v = NULL;
	size_t vl = 0;
	strata_stats s;
	strata_plan *plan = NULL;
	uint32_t merged = 0;
	CHECK_EQ(strata_append(db, 1, &r, 1), STRATA_ERANGE);
	CHECK_EQ(strata_get(db, 1, "k", 1, &v, &vl), STRATA_ERANGE);
	CHECK_EQ(strata_seal(db, 1), STRATA_ERANGE);
	CHECK_EQ(strata_merge(db, 1, 0, &merged), STRATA_ERANGE);
	CHECK_EQ(strata_prepare_merge(db, 1, 0, &plan), STRATA_ERANGE);
	CHECK_EQ(strata_shard_stats(db, 1, &s), STRATA_ERANGE);
	CHECK_EQ(strata_append(db, UINT32_MAX, &r, 1), STRATA_ERANGE);

	/* NULL or empty data. */
	CHECK_EQ(strata_append(db, 0, NULL, 3), STRATA_EINVAL);
	r = (strata_row){ NULL, 3, "x", 1 };
	CHECK_EQ(strata_append(db, 0, &r, 1), STRATA_EINVAL);
	r = (strata_row){ "", 0, "x", 1 };
	CHECK_EQ(strata_append(db, 0, &r, 1), STRATA_EINVAL);
	r = (strata_row){ "nullval", 7, NULL, 5 };
	CHECK_EQ(strata_append(db, 0, &r, 1), STRATA_EINVAL);
	CHECK_EQ(strata_get(db, 0, NULL, 3, &v, &vl), STRATA_EINVAL);
	CHECK_EQ(strata_get(db, 0, "", 0, &v, &vl), STRATA_EINVAL);
	CHECK_EQ(strata_get(db, 0, "k", 1, NULL, &vl), STRATA_EINVAL);

	/* All or nothing: one bad row rejects the batch, and none of it is written. */
	strata_stats before = stats_of(db);
	strata_row batch[5] = {
		{ "batch-0", 7, "batch-0=", 8 },
		{ "batch-1", 7, "batch-1=", 8 },
		{ big, STRATA_MAX_KEY + 1, "x", 1 },
		{ "batch-3", 7, "batch-3=", 8 },
		{ "batch-4", 7, "batch-4=", 8 },
	};
	CHECK_EQ(strata_append(db, 0, batch, 5), STRATA_ETOOBIG);
	batch[2] = (strata_row){ "batch-2", 7, val, 1025 };
	CHECK_EQ(strata_append(db, 0, batch, 5), STRATA_ETOOBIG);
	batch[2] = (strata_row){ NULL, 7, "x", 1 };
	CHECK_EQ(strata_append(db, 0, batch, 5), STRATA_EINVAL);
	batch[2] = (strata_row){ "batch-2", 7, "batch-2=", 8 };
	batch[4] = (strata_row){ "", 0, "x", 1 };
	CHECK_EQ(strata_append(db, 0, batch, 5), STRATA_EINVAL);
	strata_stats after = stats_of(db);
	CHECK_EQ(after.rows_appended, before.rows_appended);
	CHECK_EQ(after.appends, before.appends);
	CHECK_EQ(after.last_seq, before.last_seq);
	CHECK_EQ(after.memtable_rows, before.memtable_rows);
	for (int i = 0; i < 5; i++) {
		char key[16];
		snprintf(key, sizeof(key), "batch-%d", i);
		CHECK(get_is(db, key, NULL));
	}
	/* Nothing reached the WAL either. */
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	for (int i = 0; i < 5; i++) {
		char key[16];
		snprintf(key, sizeof(key), "batch-%d", i);
		CHECK(get_is(db, key, NULL));
	}
	CHECK(get_is(db, "val-over", NULL));
	CHECK_EQ(stats_of(db).memtable_rows, 2);
	db_close(db);
}

TEST(strerror_covers_every_code)
{
	static const int codes[] = {
		STRATA_OK,	 STRATA_NOTFOUND, STRATA_EINVAL,    STRATA_ENOMEM,   STRATA_EIO,
		STRATA_ECORRUPT, STRATA_EFENCED,  STRATA_ECONFLICT, STRATA_ETOOBIG,  STRATA_ERANGE,
		STRATA_ENOSPC,	 STRATA_EBUSY,	  STRATA_ECLOSED,   STRATA_EREADONLY, STRATA_EEXIST,
		STRATA_EINJECTED, STRATA_EVERSION, STRATA_ELOCKED,
	};
	const size_t n = sizeof(codes) / sizeof(codes[0]);
	const char *unknown = strata_strerror(-12345);
	CHECK(unknown != NULL && unknown[0] != '\0');
	CHECK(strata_strerror(12345) != NULL);
	for (size_t i = 0; i < n; i++) {
		const char *s = strata_strerror(codes[i]);
		CHECK(s != NULL);
		if (s == NULL)
			continue;
		if (s[0] == '\0' || (unknown != NULL && strcmp(s, unknown) == 0)) {
			fprintf(stderr, "  code %d has no words of its own: '%s'\n", codes[i], s);
			CHECK(0);
		}
		for (size_t k = 0; k < i; k++) {
			const char *t = strata_strerror(codes[k]);
			if (t != NULL && strcmp(s, t) == 0) {
				fprintf(stderr, "  codes %d and %d share '%s'\n", codes[k], codes[i], s);
				CHECK(0);
			}
		}
	}
	/* Every code between the extremes is named. */
	for (int rc = STRATA_ELOCKED; rc <= STRATA_NOTFOUND; rc++) {
		const char *s = strata_strerror(rc);
		CHECK(s != NULL && unknown != NULL && strcmp(s, unknown) != 0);
	}
}

TEST(new_store_gets_the_default_shard_count)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.shards = 0; /* a new store: the one default, as `strata serve` and the Lua module */
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(strata_shards(db), STRATA_DEFAULT_SHARDS);
	CHECK_EQ(STRATA_DEFAULT_SHARDS, 4);
	REQUIRE_EQ(put_range(db, "k-", 0, 10, "v", 10), 0);
	db_close(db);
	uint32_t n = 0;
	CHECK_EQ(strata_stored_shards(dir, &n), 0);
	CHECK_EQ(n, STRATA_DEFAULT_SHARDS);
	db = db_open(&o); /* 0 again: the stored count */
	REQUIRE(db != NULL);
	CHECK_EQ(strata_shards(db), STRATA_DEFAULT_SHARDS);
	CHECK_EQ(range_misses(db, "k-", 0, 10, "v"), 0);
	db_close(db);
}

/** Append "path type size hash" lines of every entry under root/rel to b, sorted per
 *  directory (a listing to compare before and after). */
static void
tree_list(const char *root, const char *rel, struct buf *b)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s%s", root, rel[0] ? "/" : "", rel);
	struct dirent **names = NULL;
	int n = scandir(path, &names, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
			char sub[4096], full[4200], line[4400];
			snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", name);
			snprintf(full, sizeof(full), "%s/%s", root, sub);
			struct stat st;
			if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
				snprintf(line, sizeof(line), "%s/\n", sub);
				buf_append(b, line, strlen(line));
				tree_list(root, sub, b);
			} else {
				uint64_t h = 0xcbf29ce484222325ull;
				FILE *f = fopen(full, "rb");
				int c;
				while (f != NULL && (c = fgetc(f)) != EOF)
					h = (h ^ (uint8_t)c) * 0x100000001b3ull;
				if (f != NULL)
					fclose(f);
				snprintf(line, sizeof(line), "%s %lld %016llx\n", sub, (long long)st.st_size,
					 (unsigned long long)h);
				buf_append(b, line, strlen(line));
			}
		}
		free(names[i]);
	}
	free(names);
}

/** Whether path exists. */
static int
path_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

TEST(failed_open_removes_the_store_it_created)
{
	/* A new store whose open fails late (its first manifest write, after STORE, the WAL
	 * and objects directories were made): the path it created is gone again, up to the
	 * outermost directory the open made. */
	const char *parent = tdir();
	char dir[4096], top[4096];
	snprintf(top, sizeof(top), "%s/a", parent);
	snprintf(dir, sizeof(dir), "%s/a/b/store", parent);
	strata_options o = opts_for(dir);
	o.shards = 2;
	strata *db = NULL;
	pt_arm("manifest.before_append", PT_FAIL);
	CHECK(strata_open(&o, &db) != 0);
	pt_disarm();
	CHECK(db == NULL);
	CHECK(!path_exists(top));
	/* An existing empty directory stays, empty. */
	char empty[4096];
	snprintf(empty, sizeof(empty), "%s/empty", parent);
	REQUIRE(mkdir(empty, 0755) == 0);
	o.dir = empty;
	pt_arm("manifest.before_append", PT_FAIL);
	CHECK(strata_open(&o, &db) != 0);
	pt_disarm();
	struct buf b = {0};
	tree_list(empty, "", &b);
	CHECK(path_exists(empty));
	CHECK_EQ(b.len, 0);
	if (b.len != 0)
		fprintf(stderr, "  left in %s:\n%.*s", empty, (int)b.len, (const char *)b.data);
	buf_destroy(&b);
	/* The same store opens once the fault is gone. */
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(strata_shards(db), 2);
	db_close(db);
}

TEST(failed_open_keeps_an_existing_store)
{
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	o.shards = 2;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k-", 0, 10, "v", 10), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	db_close(db);
	/* A LOCK with another (dead) owner's pid: a failed open puts it back. */
	char lock[4096];
	snprintf(lock, sizeof(lock), "%s/LOCK", dir);
	FILE *f = fopen(lock, "w");
	REQUIRE(f != NULL);
	fputs("999999\n", f);
	fclose(f);
	struct buf before = {0}, after = {0};
	tree_list(dir, "", &before);
	pt_arm("manifest.before_append", PT_FAIL);
	CHECK(strata_open(&o, &db) != 0);
	pt_disarm();
	tree_list(dir, "", &after);
	/* Nothing the store held is removed; here nothing was written either. */
	CHECK(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
	if (before.len != after.len || memcmp(before.data, after.data, before.len) != 0)
		fprintf(stderr, "  before:\n%.*s  after:\n%.*s", (int)before.len, (const char *)before.data,
			(int)after.len, (const char *)after.data);
	buf_destroy(&before);
	buf_destroy(&after);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(range_misses(db, "k-", 0, 10, "v"), 0);
	db_close(db);
}

TEST(bad_policy_leaves_the_directory_as_it_was)
{
	/* The policy is compiled and validated before the store is touched: a new directory
	 * is not made, an existing store is not opened (no epoch claimed, no LOCK written). */
	const char *parent = tdir();
	char fresh[4096], broken[4096];
	snprintf(fresh, sizeof(fresh), "%s/fresh", parent);
	snprintf(broken, sizeof(broken), "%s/broken.lua", parent);
	FILE *f = fopen(broken, "w");
	REQUIRE(f != NULL);
	fputs("return {\n\tflush_interval_s = 5,\n", f); /* no closing brace */
	fclose(f);
	const char *dir = tdir();
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	REQUIRE_EQ(put_range(db, "k-", 0, 10, "v", 10), 0);
	db_close(db);
	struct buf before = {0};
	tree_list(dir, "", &before);
	const char *policies[] = {"/nonexistent/policy.lua", broken};
	for (int i = 0; i < 2; i++) {
		o.policy = policies[i];
		o.dir = fresh;
		db = NULL;
		CHECK(strata_open(&o, &db) != 0);
		CHECK(strstr(strata_last_error(), policies[i]) != NULL);
		CHECK(!path_exists(fresh));
		o.dir = dir;
		CHECK(strata_open(&o, &db) != 0);
		struct buf after = {0};
		tree_list(dir, "", &after);
		CHECK(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
		if (before.len != after.len || memcmp(before.data, after.data, before.len) != 0)
			fprintf(stderr, "  policy %s: before:\n%.*s  after:\n%.*s", policies[i], (int)before.len,
				(const char *)before.data, (int)after.len, (const char *)after.data);
		buf_destroy(&after);
	}
	buf_destroy(&before);
}

TEST(refused_second_open_removes_nothing)
{
	/* A second opener of a new store is refused at the lock: what the first made stays. */
	const char *parent = tdir();
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/fresh", parent);
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	strata *db2 = NULL;
	CHECK_EQ(strata_open(&o, &db2), STRATA_ELOCKED);
	char store[4200];
	snprintf(store, sizeof(store), "%s/STORE", dir);
	CHECK(path_exists(store));
	REQUIRE_EQ(put_range(db, "k-", 0, 10, "v", 10), 0);
	db_close(db);
}

/* ---------------------------------------------------------------- runner */

/** End a test: stop the watchdog, let paused threads go, clean up. */
static void
t_end(void)
{
	alarm(0);
	pt_disarm();
	t_cleanup();
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	env.point = test_point;
	T(appends_survive_concurrent_merges);
	T(seal_during_merge_is_not_drained);
	T(stats_count_merges_with_their_view);
	T(second_prepare_is_busy_before_io);
	T(seal_waits_for_inflight_append);
	T(append_not_blocked_by_prepare);
	T(merge_pass_is_bounded);
	T(engine_cap_binds_every_pass);
	T(merge_seals_first);
	T(second_open_is_refused_while_the_first_lives);
	T(second_open_fences_first);
	T(fenced_writer_never_acknowledges);
	T(shard_count_is_part_of_the_store);
	T(background_writes_keep_to_their_budget);
	T(append_is_all_or_nothing_under_enomem);
	T(landed_manifest_write_is_reconciled);
	T(large_values_round_trip);
	T(stats_count_raw_and_compressed_blocks);
	T(a_merge_on_threads_writes_the_run_one_thread_writes);
	T(a_split_merge_reads_back_as_one_part_does);
	T(a_split_merge_that_fails_in_one_part_leaves_no_part);
	T(merge_threads_are_resolved_and_checked);
	T(the_cap_binds_a_merge_on_threads);
	T(bad_input_is_refused);
	T(strerror_covers_every_code);
	T(new_store_gets_the_default_shard_count);
	T(failed_open_removes_the_store_it_created);
	T(failed_open_keeps_an_existing_store);
	T(bad_policy_leaves_the_directory_as_it_was);
	T(refused_second_open_removes_nothing);
	return HARNESS_END("test_engine");
}
