/*
 * test_policy.c — the policy runtime: validation, triggers and the per-pass cap,
 * reload, the sandbox and its limits, plan misuse, and the yield/resume path.
 *
 * Time is a manual clock (env.mono_ns / env.wall_ns); the loop is driven with
 * ev_run(EVRUN_ONCE) until a condition holds, a bounded number of times (a
 * 10 ms guard timer keeps EVRUN_ONCE from blocking on real time).
 */
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <ev.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../node/core/store.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/lib/text.h"
#include "../../node/policy/policy.h"
#include "../../node/policy/policy_lua.h"
#include "../../node/policy/runtime.h"
#include "../../node/policy/trial.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "harness.h"

/* ---------------------------------------------------------------- clock */

static _Atomic uint64_t test_mono = 1000000000000ull;
static _Atomic uint64_t test_wall = 1700000000000000000ull;

static uint64_t
test_mono_ns(void)
{
	return atomic_load(&test_mono);
}

static uint64_t
test_wall_ns(void)
{
	return atomic_load(&test_wall);
}

static void
clock_advance(double seconds)
{
	uint64_t d = (uint64_t)(seconds * 1e9);
	atomic_fetch_add(&test_mono, d);
	atomic_fetch_add(&test_wall, d);
}

/* A CPU clock for the budget that only moves when a test says so. */
static _Atomic uint64_t test_cpu;

static uint64_t
test_cpu_ns(void)
{
	return atomic_load(&test_cpu);
}

/** The budget's real CPU clock, restored after each test. */
static uint64_t (*default_cpu_ns)(void);

/* ---------------------------------------------------------------- log capture */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536];
static size_t log_used;

static void
log_capture(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	pthread_mutex_lock(&log_mu);
	int n = snprintf(log_text + log_used, sizeof(log_text) - log_used, "%s %s\n", names[level & 3], msg);
	if (n > 0 && (size_t)n < sizeof(log_text) - log_used)
		log_used += (size_t)n;
	pthread_mutex_unlock(&log_mu);
}

static int
log_has(const char *s)
{
	pthread_mutex_lock(&log_mu);
	int r = strstr(log_text, s) != NULL;
	pthread_mutex_unlock(&log_mu);
	return r;
}

static void
log_clear(void)
{
	pthread_mutex_lock(&log_mu);
	log_used = 0;
	log_text[0] = '\0';
	pthread_mutex_unlock(&log_mu);
}

/* ---------------------------------------------------------------- test point */

static pthread_mutex_t pt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pt_cv = PTHREAD_COND_INITIALIZER;
/** Block the next prepare.block; set when a worker is parked there; release it. */
static int pt_armed, pt_reached, pt_release;

static int
point_block(const char *name, const void *arg)
{
	(void)arg;
	if (strcmp(name, "prepare.block") != 0)
		return 0;
	pthread_mutex_lock(&pt_mu);
	if (pt_armed) {
		pt_armed = 0;
		pt_reached = 1;
		pthread_cond_broadcast(&pt_cv);
		while (!pt_release)
			pthread_cond_wait(&pt_cv, &pt_mu);
	}
	pthread_mutex_unlock(&pt_mu);
	return 0;
}

static void
point_arm(void)
{
	pthread_mutex_lock(&pt_mu);
	pt_armed = 1;
	pt_reached = 0;
	pt_release = 0;
	pthread_mutex_unlock(&pt_mu);
	env.point = point_block;
}

static int
point_reached(void)
{
	pthread_mutex_lock(&pt_mu);
	int r = pt_reached;
	pthread_mutex_unlock(&pt_mu);
	return r;
}

static void
point_release(void)
{
	pthread_mutex_lock(&pt_mu);
	pt_release = 1;
	pthread_cond_broadcast(&pt_cv);
	pthread_mutex_unlock(&pt_mu);
}

/* ---------------------------------------------------------------- fixture */

/** A store, a loop and a runtime on them. */
struct fx {
	/** Data directory. */
	char *dir;
	/** The store, the loop the test drives, the host on that loop, the runtime on them. */
	strata *db;
	struct ev_loop *loop;
	struct host *host;
	struct runtime *rt;
	/** Bounds every EVRUN_ONCE to 10 ms of real time. */
	ev_timer guard;
	/** Counter of appended rows (keys are unique across a test). */
	unsigned next_key;
};

/** Options of a fixture. */
struct fx_opts {
	/** Shards of the store (0 = 1). */
	uint32_t shards;
	/** Policy source (NULL: the file name, or the built-in default). */
	const char *policy;
	/** Policy file, or the name of policy in messages. */
	const char *name;
	/** Hook budget (0 = 1000 ms). */
	uint32_t budget_ms;
	/** Policy memory limit (0 = the default). */
	uint64_t mem_bytes;
	/** Run-file block size (0 = the default). */
	uint32_t block_bytes;
	/** The engine's merge_threads (0 = the default: auto). */
	uint32_t merge_threads;
};

static void
guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

static void
fx_env(void)
{
	env_reset();
	env.mono_ns = test_mono_ns;
	env.wall_ns = test_wall_ns;
	diag_log_sink = log_capture;
	log_clear();
}

/** rc, with the message of the failure it reports copied into err ("" for none). */
static int
with_err(int rc, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", rc ? diag_last() : "");
	return rc;
}

/** Open a store and a runtime; returns runtime_new's code (err filled). */
static int
fx_open(struct fx *f, const struct fx_opts *o, char *err, size_t errlen)
{
	memset(f, 0, sizeof(*f));
	fx_env();
	f->dir = harness_tmpdir("policy");
	strata_options so;
	strata_options_init(&so);
	so.dir = f->dir;
	so.shards = o->shards ? o->shards : 1;
	so.sync = STRATA_SYNC_NONE;
	if (o->block_bytes)
		so.block_bytes = o->block_bytes;
	so.merge_threads = o->merge_threads;
	int rc = strata_open(&so, &f->db);
	if (rc != 0) {
		snprintf(err, errlen, "strata_open: %s", strata_last_error());
		return rc;
	}
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ev_timer_init(&f->guard, guard_cb, 0.01, 0.01);
	ev_timer_start(f->loop, &f->guard);
	struct host_options ho = {.mode = HOST_THREADED, .loop = f->loop};
	rc = host_new(&ho, &f->host);
	if (rc != 0) {
		snprintf(err, errlen, "host_new: %s", strata_last_error());
		return rc;
	}
	struct runtime_options ro = {
		.db = strata_store(f->db),
		.host = f->host,
		.policy_path = o->name,
		.policy_source = o->policy,
		.hook_budget_ms = o->budget_ms ? o->budget_ms : 1000,
		.policy_mem_bytes = o->mem_bytes,
	};
	return with_err(runtime_new(&ro, &f->rt), err, errlen);
}

static void
fx_close(struct fx *f)
{
	point_release();
	runtime_delete(f->rt);
	host_delete(f->host);
	if (f->loop != NULL) {
		ev_timer_stop(f->loop, &f->guard);
		ev_loop_destroy(f->loop);
	}
	strata_close(f->db);
	if (f->dir != NULL) {
		harness_rmrf(f->dir);
		free(f->dir);
	}
	env_reset();
	policy_cpu_ns = default_cpu_ns;
	diag_log_sink = log_capture;
	memset(f, 0, sizeof(*f));
}

/** Run the loop until cond holds (at most ~2000 turns); the value of cond. */
#define DRIVE_UNTIL(f, cond)                                     \
	({                                                       \
		int ok_ = 0;                                     \
		for (int i_ = 0; i_ < 2000; i_++) {              \
			if (cond) {                              \
				ok_ = 1;                         \
				break;                           \
			}                                        \
			ev_run((f)->loop, EVRUN_ONCE);           \
		}                                                \
		ok_;                                             \
	})

static int
drive_idle(struct fx *f)
{
	return DRIVE_UNTIL(f, runtime_busy(f->rt) == 0);
}

static strata_stats
shard_stats(struct fx *f, uint32_t shard)
{
	strata_stats s;
	memset(&s, 0, sizeof(s));
	strata_shard_stats(f->db, shard, &s);
	return s;
}

static struct runtime_stats
rt_stats(struct fx *f)
{
	struct runtime_stats s;
	runtime_stats(f->rt, &s);
	return s;
}

static int
append_one(struct fx *f, uint32_t shard)
{
	char key[32], val[32];
	snprintf(key, sizeof(key), "key-%08u", f->next_key);
	snprintf(val, sizeof(val), "val-%08u", f->next_key);
	f->next_key++;
	strata_row r = {key, strlen(key), val, strlen(val)};
	return strata_append(f->db, shard, &r, 1);
}

/** Append a row and seal, n times, letting the policy react after each seal. */
static int
add_generations(struct fx *f, uint32_t shard, int n)
{
	for (int i = 0; i < n; i++) {
		if (append_one(f, shard) != 0 || strata_seal(f->db, shard) != 0)
			return -1;
		if (!drive_idle(f))
			return -1;
	}
	return 0;
}

/** Result of a merge request. */
struct mres {
	/** Completions seen, and the last one's code. */
	int done, rc;
	/** Generations merged by the request, and still waiting after it. */
	uint64_t reclaimed, pending;
	/** The failure message ("" on success). */
	char err[512];
};

static void
mres_cb(void *ctx, int rc, uint64_t reclaimed, uint64_t pending, const char *err)
{
	struct mres *m = ctx;
	m->done++;
	m->rc = rc;
	m->reclaimed = reclaimed;
	m->pending = pending;
	snprintf(m->err, sizeof(m->err), "%s", err ? err : "");
}

/** Run files in a shard's object directory. */
static int
count_run_files(struct fx *f, uint32_t shard)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/objects/shard-%04u/run", f->dir, shard);
	DIR *d = opendir(path);
	if (d == NULL)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && strstr(e->d_name, ".sst") != NULL)
			n++;
	closedir(d);
	return n;
}

static char *
root_path(const char *rel)
{
	static char buf[4096];
	const char *file = __FILE__;
	const char *tail = strstr(file, "tests/unit/test_policy.c");
	int dirlen = tail ? (int)(tail - file) : 0;
	snprintf(buf, sizeof(buf), "%.*s%s", dirlen, file, rel);
	return buf;
}

static char *
read_text(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (fp == NULL)
		return NULL;
	char *buf = malloc(1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

/* ---------------------------------------------------------------- validation */

TEST(shipped_policies_load_and_validate)
{
	static const char *files[] = {"policies/default.lua", "policies/bulk_load.lua",
				      "policies/low_memory.lua", "policies/off_peak.lua",
				      "policies/tiered.lua"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char err[2048];
		struct runtime_settings s;
		int rc = with_err(runtime_check_policy(root_path(files[i]), NULL, 0, &s), err, sizeof(err));
		if (rc != 0)
			fprintf(stderr, "  %s: %s\n", files[i], err);
		CHECK_EQ(rc, 0);
	}
	/* The Lua compiled in (generated from the files by node/policy/gen_lua_c.sh) is each
	 * file, byte for byte, with its length. */
	static const struct {
		const char *file, *text;
		const size_t *len;
	} embedded[] = {
		{"policies/default.lua", policy_builtin_source, &policy_builtin_source_len},
		{"node/policy/prelude.lua", policy_prelude_lua, &policy_prelude_lua_len},
		{"node/policy/defaults.lua", policy_defaults_lua, &policy_defaults_lua_len},
	};
	for (size_t i = 0; i < sizeof(embedded) / sizeof(embedded[0]); i++) {
		char *text = read_text(root_path(embedded[i].file));
		REQUIRE(text != NULL);
		CHECK_EQ(*embedded[i].len, strlen(text));
		CHECK(strcmp(text, embedded[i].text) == 0);
		free(text);
	}
	/* ... with the seed's numbers. */
	struct runtime_settings s;
	char err[1024];
	REQUIRE_EQ(with_err(runtime_check_policy(NULL, policy_builtin_source, strlen(policy_builtin_source), &s),
			    err, sizeof(err)), 0);
	CHECK_EQ(s.merge_max_generations, 8);
	CHECK_EQ(s.merge_after_generations, 50);
	CHECK(s.flush_interval_s == 5);
	CHECK(s.sweep_interval_s == 60);
	/* Every shipped policy also starts a runtime (primitives bind, hooks resolve). */
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct fx f;
		struct fx_opts o = {.name = root_path(files[i])};
		int rc = fx_open(&f, &o, err, sizeof(err));
		CHECK_EQ(rc, 0);
		if (rc == 0) {
			CHECK(add_generations(&f, 0, 2) == 0);
			clock_advance(61);
			CHECK(drive_idle(&f));
			CHECK_EQ(rt_stats(&f).hook_errors, 0);
		}
		fx_close(&f);
	}
}

TEST(typo_key_is_refused_with_nearest_name)
{
	const char *src = "return {\n"
			  "\tmerge_max_generation = 3,\n"
			  "}\n";
	char err[2048];
	struct runtime_settings s;
	int rc = with_err(runtime_check_policy("typo.lua", src, strlen(src), &s), err, sizeof(err));
	CHECK(rc != 0);
	CHECK(strstr(err, "did you mean merge_max_generations") != NULL);
	CHECK(strstr(err, "typo.lua:2:") != NULL);
	/* A hook name typo too. */
	const char *src2 = "return { on_seel = function() end }";
	rc = with_err(runtime_check_policy("typo2.lua", src2, strlen(src2), &s), err, sizeof(err));
	CHECK(rc != 0);
	CHECK(strstr(err, "did you mean on_seal") != NULL);
	CHECK_EQ(text_edit_distance("merge_max_generation", "merge_max_generations"), 1);
	CHECK_EQ(text_edit_distance("kitten", "sitting"), 3);
}

TEST(text_u64_takes_digits_only)
{
	uint64_t v = 7;
	const char *rest = NULL;
	CHECK_EQ(text_u64("0", 10, &v, NULL), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(text_u64("18446744073709551615", 10, &v, NULL), 0);
	CHECK_EQ(v, UINT64_MAX);
	CHECK_EQ(text_u64("0x10", 0, &v, NULL), 0);
	CHECK_EQ(v, 16);
	CHECK_EQ(text_u64("64MiB", 10, &v, &rest), 0);
	CHECK_EQ(v, 64);
	CHECK(strcmp(rest, "MiB") == 0);
	/* What strtoull takes and a number flag must not: a sign wraps round, blanks, overflow. */
	static const char *bad[] = {"-0", "-1", "+3", " 3", "\t3", "", "3x", "18446744073709551616", "0x"};
	v = 7;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(text_u64(bad[i], 10, &v, NULL), -1);
	CHECK_EQ(text_u64(NULL, 10, &v, NULL), -1);
	CHECK_EQ(v, 7); /* left alone on every refusal */
}

TEST(wrong_types_and_ranges_are_refused)
{
	static const struct {
		const char *src;
		const char *want;
	} cases[] = {
		{"return { flush_interval_s = '5' }", "flush_interval_s must be a number, not string"},
		{"return { merge_max_generations = -1 }", "merge_max_generations must be 0 or between"},
		{"return { merge_after_generations = 2.5 }", "merge_after_generations must be an integer"},
		{"return { sweep_interval_s = 0/0 }", "sweep_interval_s must be a finite number"},
		{"return { memtable_max_bytes = 100 }", "memtable_max_bytes must be 0 or between 4096"},
		{"return { base_max_runs = true }", "base_max_runs must be a number, not boolean"},
		{"return { on_seal = 5 }", "on_seal must be a function, not number"},
		{"return 42", "must return a table"},
		{"return { 1, 2 }", "unexpected number key"},
		{"return {", "bad.lua:1: unexpected symbol near '<eof>'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[2048];
		struct runtime_settings s;
		int rc = with_err(runtime_check_policy("bad.lua", cases[i].src, strlen(cases[i].src), &s), err,
				  sizeof(err));
		CHECK(rc != 0);
		if (strstr(err, cases[i].want) == NULL || strstr(err, "bad.lua") == NULL) {
			fprintf(stderr, "  case %zu: got \"%s\", want \"%s\"\n", i, err, cases[i].want);
			CHECK(0);
		}
	}
	/* Several errors are all reported. */
	const char *many = "return {\n flush_interval_s = 'x',\n merge_max_generations = -3,\n}";
	char err[2048];
	struct runtime_settings s;
	CHECK(with_err(runtime_check_policy("many.lua", many, strlen(many), &s), err, sizeof(err)) != 0);
	CHECK(strstr(err, "many.lua:2: flush_interval_s") != NULL);
	CHECK(strstr(err, "many.lua:3: merge_max_generations") != NULL);
	/* A bad policy never starts a runtime. */
	struct fx f;
	struct fx_opts o = {.policy = "return { merge_max_generation = 3 }", .name = "typo.lua"};
	CHECK(fx_open(&f, &o, err, sizeof(err)) != 0);
	CHECK(strstr(err, "did you mean merge_max_generations") != NULL);
	CHECK(f.rt == NULL);
	fx_close(&f);
}

/* ---------------------------------------------------------------- triggers and the cap */

TEST(count_trigger_fires_at_n_and_cap_binds)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.policy = "return { merge_after_generations = 10, merge_max_generations = 3,\n"
				      "  flush_interval_s = 0, sweep_interval_s = 0, base_max_runs = 0 }"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	REQUIRE(add_generations(&f, 0, 9) == 0);
	CHECK_EQ(shard_stats(&f, 0).generations, 9);
	CHECK_EQ(shard_stats(&f, 0).merges, 0);
	CHECK_EQ(rt_stats(&f).hook_runs, 9);
	REQUIRE(add_generations(&f, 0, 1) == 0);
	strata_stats s = shard_stats(&f, 0);
	CHECK_EQ(s.merges, 1);
	CHECK_EQ(s.merged_generations, 3);
	CHECK_EQ(s.generations, 7);
	CHECK_EQ(rt_stats(&f).policy_merges, 1);
	/* 7 + 1 < 10: no merge; 7 + 3 = 10: the next capped pass. */
	REQUIRE(add_generations(&f, 0, 1) == 0);
	CHECK_EQ(shard_stats(&f, 0).merges, 1);
	REQUIRE(add_generations(&f, 0, 2) == 0);
	s = shard_stats(&f, 0);
	CHECK_EQ(s.merges, 2);
	CHECK_EQ(s.merged_generations, 6);
	CHECK_EQ(s.generations, 7);
	CHECK_EQ(rt_stats(&f).hook_errors, 0);
	CHECK_EQ(strata_check(f.db, 0), 0);
	fx_close(&f);
}

TEST(sweeper_honours_cap)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.shards = 2,
			    .policy = "return { sweep_interval_s = 60, merge_after_generations = 0,\n"
				      "  merge_max_generations = 3, flush_interval_s = 0, base_max_runs = 0 }"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	REQUIRE(add_generations(&f, 0, 5) == 0);
	REQUIRE(add_generations(&f, 1, 2) == 0);
	clock_advance(59);
	REQUIRE(drive_idle(&f));
	ev_run(f.loop, EVRUN_NOWAIT);
	CHECK_EQ(rt_stats(&f).sweeps, 0);
	CHECK_EQ(shard_stats(&f, 0).merges, 0);
	clock_advance(1);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	CHECK_EQ(rt_stats(&f).sweeps, 1);
	CHECK_EQ(shard_stats(&f, 0).merged_generations, 3);
	CHECK_EQ(shard_stats(&f, 0).generations, 2);
	CHECK_EQ(shard_stats(&f, 1).merged_generations, 2);
	CHECK_EQ(shard_stats(&f, 1).generations, 0);
	clock_advance(60);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	CHECK_EQ(rt_stats(&f).sweeps, 2);
	CHECK_EQ(shard_stats(&f, 0).generations, 0);
	CHECK_EQ(shard_stats(&f, 0).merges, 2);
	fx_close(&f);
}

TEST(merge_request_honours_cap)
{
	struct fx f;
	char err[1024];
	/* The hook asks for far more than the cap: the cap binds. */
	struct fx_opts o = {.policy = "return { merge_after_generations = 0, merge_max_generations = 3,\n"
				      "  flush_interval_s = 0, sweep_interval_s = 0,\n"
				      "  on_merge_request = function(shard, req)\n"
				      "    return shard:merge{max_generations = 100}\n"
				      "  end }"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	REQUIRE(add_generations(&f, 0, 10) == 0);
	struct mres m = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
	CHECK_EQ(m.done, 0); /* never inside the caller */
	REQUIRE(DRIVE_UNTIL(&f, m.done));
	CHECK_EQ(m.rc, 0);
	CHECK_EQ(m.reclaimed, 3);
	CHECK_EQ(m.pending, 7);
	CHECK_EQ(shard_stats(&f, 0).merged_generations, 3);
	fx_close(&f);

	/* The built-in on_merge_request: one capped pass. */
	struct fx_opts o2 = {.policy = "return { merge_after_generations = 0, merge_max_generations = 4,\n"
				       "  flush_interval_s = 0, sweep_interval_s = 0 }"};
	REQUIRE_EQ(fx_open(&f, &o2, err, sizeof(err)), 0);
	REQUIRE(add_generations(&f, 0, 6) == 0);
	memset(&m, 0, sizeof(m));
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
	REQUIRE(DRIVE_UNTIL(&f, m.done));
	CHECK_EQ(m.rc, 0);
	CHECK_EQ(m.reclaimed, 4);
	CHECK_EQ(m.pending, 2);
	CHECK_EQ(runtime_merge_request(f.rt, 7, mres_cb, &m), STRATA_ERANGE);
	fx_close(&f);
}

TEST(flush_timer_and_size_trigger_seal)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.shards = 2,
			    .policy = "return { flush_interval_s = 5, sweep_interval_s = 0,\n"
				      "  merge_after_generations = 0, memtable_max_bytes = 4096 }"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	REQUIRE_EQ(append_one(&f, 0), 0);
	clock_advance(4.9);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	CHECK_EQ(rt_stats(&f).flush_timer_fires, 0);
	clock_advance(0.1);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	CHECK_EQ(rt_stats(&f).flush_timer_fires, 2); /* one per shard */
	CHECK_EQ(shard_stats(&f, 0).generations, 1);
	CHECK_EQ(shard_stats(&f, 1).generations, 0); /* empty memtable: no seal */
	/* A reload re-arms the timers with the new interval. */
	const char *v2 = "return { flush_interval_s = 20, sweep_interval_s = 0,\n"
			 "  merge_after_generations = 0, memtable_max_bytes = 4096 }";
	REQUIRE_EQ(with_err(runtime_reload_source(f.rt, v2, strlen(v2), "v2.lua"), err, sizeof(err)), 0);
	REQUIRE_EQ(append_one(&f, 0), 0);
	clock_advance(10);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	CHECK_EQ(shard_stats(&f, 0).generations, 1);
	clock_advance(10);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	CHECK_EQ(shard_stats(&f, 0).generations, 2);
	/* Size trigger: ~100 bytes per row, the memtable passes 4096 bytes. */
	uint64_t before = shard_stats(&f, 1).generations;
	char val[100];
	memset(val, 'v', sizeof(val));
	for (int i = 0; i < 60; i++) {
		char key[32];
		snprintf(key, sizeof(key), "big-%04d", i);
		strata_row r = {key, strlen(key), val, sizeof(val)};
		REQUIRE_EQ(strata_append(f.db, 1, &r, 1), 0);
	}
	REQUIRE(DRIVE_UNTIL(&f, shard_stats(&f, 1).generations > before));
	REQUIRE(drive_idle(&f));
	CHECK(shard_stats(&f, 1).memtable_bytes < 4096);
	fx_close(&f);
}

/* ---------------------------------------------------------------- reload */

/** A writer appending rows from another thread. */
struct writer {
	/** Store and number of rows to append (keys w-NNNNNN, shard i % 2). */
	strata *db;
	unsigned rows;
	/** When set, row i waits until *pace >= i / 10 (interleaves with the loop). */
	atomic_int *pace;
	/** Rows appended so far. */
	atomic_uint written;
	/** Set when finished; appends that failed. */
	atomic_int done;
	atomic_int failed;
};

static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	for (unsigned i = 0; i < w->rows; i++) {
		while (w->pace != NULL && (unsigned)atomic_load(w->pace) < i / 10)
			sched_yield();
		char key[32], val[32];
		snprintf(key, sizeof(key), "w-%06u", i);
		snprintf(val, sizeof(val), "v-%06u", i);
		strata_row r = {key, strlen(key), val, strlen(val)};
		if (strata_append(w->db, i % 2, &r, 1) != 0)
			atomic_fetch_add(&w->failed, 1);
		atomic_fetch_add(&w->written, 1);
	}
	atomic_store(&w->done, 1);
	return NULL;
}

TEST(reload_under_appends_loses_nothing_and_refuses_broken_script)
{
	struct fx f;
	char err[2048];
	const char *good[2] = {
		"return { flush_interval_s = 1, sweep_interval_s = 2, merge_after_generations = 2,\n"
		"  merge_max_generations = 2, memtable_max_bytes = 4096 }",
		"return { flush_interval_s = 0.5, sweep_interval_s = 3, merge_after_generations = 3,\n"
		"  merge_max_generations = 4, memtable_max_bytes = 8192,\n"
		"  on_seal = function(shard, info) strata.default.on_seal(shard, info) end }",
	};
	const char *broken = "return {\n  flush_interval_s = ,\n}\n";
	struct fx_opts o = {.shards = 2, .policy = good[0], .name = "v1.lua"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	atomic_int pace = 0;
	struct writer w = {.db = f.db, .rows = 3000, .pace = &pace};
	pthread_t th;
	REQUIRE_EQ(pthread_create(&th, NULL, writer_main, &w), 0);
	int reloads = 0, refused = 0;
	for (int i = 0; i < 200000 && !atomic_load(&w.done); i++, atomic_store(&pace, i)) {
		clock_advance(0.25);
		ev_run(f.loop, EVRUN_NOWAIT);
		/* Lockstep: ten rows per turn of the loop; the policy's IO finishes each turn. */
		while (atomic_load(&w.written) < 10u * (unsigned)(i + 1) && !atomic_load(&w.done))
			sched_yield();
		CHECK(drive_idle(&f));
		if (i % 50 == 25) {
			const char *src = good[reloads % 2];
			if (with_err(runtime_reload_source(f.rt, src, strlen(src), "good.lua"), err, sizeof(err)) == 0)
				reloads++;
		}
		if (i == 60) {
			uint64_t version = rt_stats(&f).policy_version;
			CHECK(with_err(runtime_reload_source(f.rt, broken, strlen(broken), "broken.lua"), err,
				       sizeof(err)) != 0);
			refused++;
			CHECK_EQ(rt_stats(&f).policy_version, version);
			CHECK(strstr(rt_stats(&f).last_error, "broken.lua:2:") != NULL);
			CHECK(strstr(err, "broken.lua:2:") != NULL);
		}
	}
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&w.failed), 0);
	REQUIRE(drive_idle(&f));
	struct runtime_stats rs = rt_stats(&f);
	CHECK_EQ(rs.reloads, reloads);
	CHECK_EQ(rs.reload_failures, refused);
	CHECK_EQ(rs.policy_version, 1 + reloads);
	CHECK_EQ(rs.hook_errors, 0);
	CHECK(refused == 1);
	/* Flush the rest and merge everything, then every row must be there. */
	for (uint32_t s = 0; s < 2; s++)
		CHECK_EQ(strata_merge(f.db, s, 0, NULL), 0);
	for (unsigned i = 0; i < w.rows; i++) {
		char key[32], want[32];
		snprintf(key, sizeof(key), "w-%06u", i);
		snprintf(want, sizeof(want), "v-%06u", i);
		void *v = NULL;
		size_t vl = 0;
		int rc = strata_get(f.db, i % 2, key, strlen(key), &v, &vl);
		if (rc != 0 || vl != strlen(want) || memcmp(v, want, vl) != 0) {
			fprintf(stderr, "  row %s: rc %d\n", key, rc);
			CHECK(0);
			strata_free(v);
			break;
		}
		strata_free(v);
	}
	CHECK_EQ(strata_check(f.db, 0), 0);
	CHECK_EQ(strata_check(f.db, 1), 0);
	/* Policy merges ran during the stream, on both policies. */
	CHECK(rs.policy_merges > 10);
	CHECK(rs.policy_seals > 10);
	CHECK(reloads >= 5);
	fx_close(&f);
}

TEST(reload_lets_running_hook_finish_on_old_state)
{
	struct fx f;
	char err[2048];
	const char *v1 = "return { merge_after_generations = 0, merge_max_generations = 5,\n"
			 "  flush_interval_s = 0, sweep_interval_s = 0,\n"
			 "  on_merge_request = function(shard, req)\n"
			 "    local n, e = shard:merge{}\n"
			 "    strata.log.info('v1 merged', n)\n"
			 "    return n, e\n"
			 "  end }";
	const char *v2 = "return { merge_after_generations = 0, merge_max_generations = 1,\n"
			 "  flush_interval_s = 0, sweep_interval_s = 0,\n"
			 "  on_merge_request = function(shard, req)\n"
			 "    local n, e = shard:merge{}\n"
			 "    strata.log.info('v2 merged', n)\n"
			 "    return n, e\n"
			 "  end }";
	struct fx_opts o = {.policy = v1, .block_bytes = 256};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	for (int g = 0; g < 4; g++) {
		for (int i = 0; i < 30; i++)
			REQUIRE_EQ(append_one(&f, 0), 0);
		REQUIRE_EQ(strata_seal(f.db, 0), 0);
		REQUIRE(drive_idle(&f));
	}
	point_arm();
	struct mres m1 = {0}, m2 = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m1), 0);
	REQUIRE(DRIVE_UNTIL(&f, point_reached()));
	REQUIRE_EQ(with_err(runtime_reload_source(f.rt, v2, strlen(v2), "v2.lua"), err, sizeof(err)), 0);
	CHECK_EQ(rt_stats(&f).policy_version, 2);
	point_release();
	REQUIRE(DRIVE_UNTIL(&f, m1.done));
	CHECK_EQ(m1.rc, 0);
	CHECK_EQ(m1.reclaimed, 4); /* the old state's cap (5), not the new one (1) */
	CHECK(log_has("v1 merged 4"));
	REQUIRE(add_generations(&f, 0, 3) == 0);
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m2), 0);
	REQUIRE(DRIVE_UNTIL(&f, m2.done));
	CHECK_EQ(m2.reclaimed, 1);
	CHECK(log_has("v2 merged 1"));
	size_t len;
	CHECK(strcmp(runtime_policy_source(f.rt, &len), v2) == 0);
	fx_close(&f);
}

TEST(reload_from_file_and_refusal_keeps_policy)
{
	struct fx f;
	char err[2048];
	char *dir = harness_tmpdir("policyfile");
	REQUIRE(dir != NULL);
	char path[600];
	snprintf(path, sizeof(path), "%s/p.lua", dir);
	FILE *fp = fopen(path, "w");
	REQUIRE(fp != NULL);
	fputs("return { merge_max_generations = 3 }\n", fp);
	fclose(fp);
	struct fx_opts o = {.name = path};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 3);
	fp = fopen(path, "w");
	fputs("return {\n merge_max_generations = 5,\n on_sweep = function(node) node.x = 1 end,\n"
	      " oops = 1 }\n", fp);
	fclose(fp);
	CHECK(with_err(runtime_reload_file(f.rt), err, sizeof(err)) != 0);
	CHECK(strstr(err, "p.lua:4: unknown key 'oops'") != NULL);
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 3);
	fp = fopen(path, "w");
	fputs("return { merge_max_generations = 6 }\n", fp);
	fclose(fp);
	CHECK_EQ(with_err(runtime_reload_file(f.rt), err, sizeof(err)), 0);
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 6);
	CHECK_EQ(rt_stats(&f).reloads, 1);
	CHECK_EQ(rt_stats(&f).reload_failures, 1);
	fx_close(&f);
	harness_rmrf(dir);
	free(dir);
}

/** Replace path with text through a temporary file and rename. */
static int
write_by_rename(const char *path, const char *text)
{
	char tmp[700];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *fp = fopen(tmp, "w");
	if (fp == NULL)
		return -1;
	fputs(text, fp);
	fclose(fp);
	return rename(tmp, path);
}

/** Run the loop until cond holds, moving the manual clock 50 ms per turn (the watcher's
 *  settle interval runs on it); the value of cond. */
#define WATCH_UNTIL(f, cond) DRIVE_UNTIL(f, (clock_advance(0.05), (cond)))

/** A store and a runtime watching the policy file path (settle_ms and poll_ms passed on). */
static void
fx_open_watched(struct fx *f, const char *path, uint32_t settle_ms, uint32_t poll_ms)
{
	char err[2048];
	memset(f, 0, sizeof(*f));
	fx_env();
	f->dir = harness_tmpdir("policy");
	strata_options so;
	strata_options_init(&so);
	so.dir = f->dir;
	so.sync = STRATA_SYNC_NONE;
	REQUIRE_EQ(strata_open(&so, &f->db), 0);
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ev_timer_init(&f->guard, guard_cb, 0.01, 0.01);
	ev_timer_start(f->loop, &f->guard);
	struct host_options ho = {.mode = HOST_THREADED, .loop = f->loop};
	REQUIRE_EQ(host_new(&ho, &f->host), 0);
	struct runtime_options ro = {.db = strata_store(f->db), .host = f->host, .policy_path = path,
				     .watch_file = 1, .watch_settle_ms = settle_ms, .watch_poll_ms = poll_ms};
	REQUIRE_EQ(with_err(runtime_new(&ro, &f->rt), err, sizeof(err)), 0);
}

/** Write text at offset of path (created, truncated first when trunc), in place. */
static int
write_in_place(const char *path, const char *text, size_t len, int trunc)
{
	int fd = open(path, O_WRONLY | O_CREAT | (trunc ? O_TRUNC : O_APPEND), 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

TEST(watcher_reloads_a_file_written_in_two_halves_once)
{
	char *dir = harness_tmpdir("policywatch");
	REQUIRE(dir != NULL);
	char path[600];
	snprintf(path, sizeof(path), "%s/w.lua", dir);
	REQUIRE(write_by_rename(path, "return { merge_max_generations = 3 }\n") == 0);
	struct fx f;
	fx_open_watched(&f, path, 500, 20);
	/* cp new.lua policies/default.lua: truncate, write, pause, write the rest. Each
	 * half alone is not a valid policy. */
	static const char text[] = "return {\n\tmerge_max_generations = 7,\n\tsweep_interval_s = 30,\n}\n";
	size_t half = sizeof(text) / 2;
	CHECK(write_in_place(path, text, half, 1) == 0);
	/* The pause: the watcher sees the half file (a change), 200 ms of the 500 ms settle
	 * interval pass, and nothing is read as a policy. */
	CHECK(DRIVE_UNTIL(&f, rt_stats(&f).policy_file_changes >= 1));
	for (int i = 0; i < 20; i++) {
		clock_advance(0.01);
		ev_run(f.loop, EVRUN_ONCE);
	}
	CHECK_EQ(rt_stats(&f).reload_failures, 0);
	CHECK_EQ(rt_stats(&f).reloads, 0);
	CHECK(write_in_place(path, text + half, sizeof(text) - 1 - half, 0) == 0);
	CHECK(WATCH_UNTIL(&f, rt_stats(&f).reloads >= 1));
	/* A second of quiet later: still one reload, no refusal. */
	for (int i = 0; i < 40; i++) {
		clock_advance(0.05);
		ev_run(f.loop, EVRUN_ONCE);
	}
	struct runtime_stats st = rt_stats(&f);
	CHECK_EQ(st.reloads, 1);
	CHECK_EQ(st.reload_failures, 0);
	CHECK(st.last_error[0] == '\0');
	CHECK(st.policy_file_changes >= 2);
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 7);
	CHECK(s.sweep_interval_s == 30);
	fx_close(&f);
	harness_rmrf(dir);
	free(dir);
}

TEST(watcher_sees_a_same_size_edit_within_a_second)
{
	char *dir = harness_tmpdir("policywatch");
	REQUIRE(dir != NULL);
	char path[600];
	snprintf(path, sizeof(path), "%s/w.lua", dir);
	REQUIRE(write_by_rename(path, "return { merge_max_generations = 3 }\n") == 0);
	struct fx f;
	fx_open_watched(&f, path, 50, 20);
	/* Two in-place edits of the same size, back to back: the second has the size of the
	 * first and (most likely) its mtime second, which a stat comparison alone misses. */
	static const char a[] = "return { merge_max_generations = 4 }\n";
	static const char b[] = "return { merge_max_generations = 5 }\n";
	CHECK(write_in_place(path, a, sizeof(a) - 1, 1) == 0);
	CHECK(WATCH_UNTIL(&f, rt_stats(&f).reloads >= 1));
	CHECK(write_in_place(path, b, sizeof(b) - 1, 1) == 0);
	CHECK(WATCH_UNTIL(&f, rt_stats(&f).reloads >= 2));
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 5);
	CHECK_EQ(rt_stats(&f).reloads, 2);
	CHECK_EQ(rt_stats(&f).reload_failures, 0);
	fx_close(&f);
	harness_rmrf(dir);
	free(dir);
}

TEST(watched_file_reloads_on_change)
{
	struct fx f;
	char err[2048];
	char *dir = harness_tmpdir("policywatch");
	REQUIRE(dir != NULL);
	char path[600];
	snprintf(path, sizeof(path), "%s/w.lua", dir);
	FILE *fp = fopen(path, "w");
	REQUIRE(fp != NULL);
	fputs("return { merge_max_generations = 3 }\n", fp);
	fclose(fp);
	memset(&f, 0, sizeof(f));
	fx_env();
	f.dir = harness_tmpdir("policy");
	strata_options so;
	strata_options_init(&so);
	so.dir = f.dir;
	so.sync = STRATA_SYNC_NONE;
	REQUIRE_EQ(strata_open(&so, &f.db), 0);
	f.loop = ev_loop_new(EVFLAG_AUTO);
	ev_timer_init(&f.guard, guard_cb, 0.01, 0.01);
	ev_timer_start(f.loop, &f.guard);
	struct host_options ho = {.mode = HOST_THREADED, .loop = f.loop};
	REQUIRE_EQ(host_new(&ho, &f.host), 0);
	struct runtime_options ro = {.db = strata_store(f.db), .host = f.host, .policy_path = path,
				     .watch_file = 1};
	REQUIRE_EQ(with_err(runtime_new(&ro, &f.rt), err, sizeof(err)), 0);
	/* A broken edit is refused and logged; the next good one is taken, and clears the
	 * error (files are replaced by rename, the safe way to deploy). */
	CHECK(write_by_rename(path, "return { merge_max_generations = }\n") == 0);
	CHECK(WATCH_UNTIL(&f, strstr(rt_stats(&f).last_error, "w.lua:1:") != NULL));
	CHECK_EQ(rt_stats(&f).reload_failures, 1);
	CHECK_EQ(rt_stats(&f).reloads, 0);
	CHECK(write_by_rename(path, "return { merge_max_generations = 6, sweep_interval_s = 30 }\n") == 0);
	CHECK(WATCH_UNTIL(&f, rt_stats(&f).reloads >= 1));
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 6);
	CHECK_EQ(rt_stats(&f).policy_version, 2);
	CHECK_EQ(rt_stats(&f).reload_failures, 1);
	CHECK(rt_stats(&f).last_error[0] == '\0');
	fx_close(&f);
	harness_rmrf(dir);
	free(dir);
}

/* A policy kept in its file by runtime_reload_persist (PUT /v1/policy) is loaded once:
 * the watcher of that file takes the renamed content as the one it loaded, and a later
 * edit is still seen. */
TEST(persisted_policy_is_not_reloaded_by_the_watcher)
{
	char *dir = harness_tmpdir("policywatch");
	REQUIRE(dir != NULL);
	char path[600], err[2048], tmp[700];
	snprintf(path, sizeof(path), "%s/w.lua", dir);
	REQUIRE(write_by_rename(path, "return { merge_max_generations = 3 }\n") == 0);
	struct fx f;
	fx_open_watched(&f, path, 50, 20);
	static const char put[] = "-- from PUT\nreturn { merge_max_generations = 5 }\n";
	REQUIRE_EQ(with_err(runtime_stage_file(path, put, sizeof(put) - 1, tmp, sizeof(tmp)), err, sizeof(err)), 0);
	CHECK(access(tmp, F_OK) == 0);
	REQUIRE_EQ(with_err(runtime_reload_persist(f.rt, put, sizeof(put) - 1, "PUT /v1/policy", tmp, path), err,
			    sizeof(err)), 0);
	CHECK(access(tmp, F_OK) != 0);
	char *text = read_text(path);
	CHECK(text != NULL && strcmp(text, put) == 0);
	free(text);
	struct runtime_stats st = rt_stats(&f);
	CHECK_EQ(st.reloads, 1);
	CHECK_EQ(st.policy_version, 2);
	CHECK(strcmp(st.source_path, path) == 0);
	CHECK(strcmp(runtime_policy_file(f.rt), path) == 0);
	/* Many polls and settle intervals later: the same content is not loaded again. */
	for (int i = 0; i < 60; i++) {
		clock_advance(0.05);
		ev_run(f.loop, EVRUN_ONCE);
	}
	st = rt_stats(&f);
	CHECK_EQ(st.reloads, 1);
	CHECK_EQ(st.policy_file_changes, 0);
	CHECK_EQ(st.policy_version, 2);
	/* The watcher still works: an edit of the file is loaded. */
	REQUIRE(write_by_rename(path, "return { merge_max_generations = 6 }\n") == 0);
	CHECK(WATCH_UNTIL(&f, rt_stats(&f).reloads >= 2));
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 6);
	/* A rename that fails keeps the running policy and the file; the temporary is gone. */
	REQUIRE_EQ(with_err(runtime_stage_file(path, put, sizeof(put) - 1, tmp, sizeof(tmp)), err, sizeof(err)), 0);
	char missing[700];
	snprintf(missing, sizeof(missing), "%s/no-such-dir/w.lua", dir);
	CHECK(with_err(runtime_reload_persist(f.rt, put, sizeof(put) - 1, "PUT /v1/policy", tmp, missing), err,
		       sizeof(err)) != 0);
	CHECK(strstr(err, missing) != NULL);
	CHECK(access(tmp, F_OK) != 0);
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 6);
	CHECK_EQ(rt_stats(&f).reload_failures, 1);
	fx_close(&f);
	harness_rmrf(dir);
	free(dir);
}

/* The engine caps every merge pass at merge_max_inputs; a policy asking for more runs at
 * the cap. What runs is what the runtime reports, with what the policy asked and why,
 * and each clamp is logged once when the policy loads. */
TEST(clamped_setting_reports_what_runs_and_why)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.policy = "return { merge_max_generations = 32, flush_interval_s = 0 }", .name = "big.lua"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	/* Source text: its name is no file to keep a policy in. */
	CHECK(runtime_policy_file(f.rt) == NULL);
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 8);
	struct policy_clamp c[POLICY_MAX_CLAMPS];
	REQUIRE_EQ(runtime_clamps(f.rt, c, POLICY_MAX_CLAMPS), 1);
	CHECK(strcmp(c[0].setting, "merge_max_generations") == 0);
	CHECK(c[0].asked == 32 && c[0].effective == 8);
	CHECK(strstr(c[0].why, "merge_max_inputs = 8") != NULL);
	CHECK(log_has("warn policy big.lua: merge_max_generations = 8 (the policy asks 32; clamped to the "
		      "engine's merge_max_inputs = 8)"));
	/* A reload to a setting within the cap has none. */
	log_clear();
	static const char small[] = "return { merge_max_generations = 4 }";
	CHECK_EQ(with_err(runtime_reload_source(f.rt, small, strlen(small), "small.lua"), err, sizeof(err)), 0);
	CHECK_EQ(runtime_clamps(f.rt, c, POLICY_MAX_CLAMPS), 0);
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_max_generations, 4);
	CHECK(!log_has("clamped"));
	fx_close(&f);
	/* What `strata policy check` prints, under another engine too. */
	struct policy *p;
	static const char big[] = "return { merge_max_generations = 32 }";
	REQUIRE_EQ(with_err(policy_new("big.lua", big, strlen(big), NULL, &p), err, sizeof(err)), 0);
	char desc[2048];
	struct policy_engine e8 = {.merge_max_inputs = 8}, e64 = {.merge_max_inputs = 64};
	policy_describe(p, &e8, desc, sizeof(desc));
	CHECK(strstr(desc, "merge_max_generations = 8 (the policy asks 32; clamped to the engine's "
			   "merge_max_inputs = 8)\n") != NULL);
	policy_describe(p, &e64, desc, sizeof(desc));
	CHECK(strstr(desc, "merge_max_generations = 32\n") != NULL);
	policy_delete(p);
}

/* A policy's merge_threads narrows the engine's: fewer runs as asked, more runs at the
 * engine's and is reported as a clamp, 0 gives the engine's back, and closing the runtime
 * leaves the store at its own count. */
static uint32_t
fx_merge_threads(struct fx *f)
{
	strata_stats st;
	if (strata_shard_stats(f->db, 0, &st) != 0)
		return UINT32_MAX;
	return (uint32_t)st.merge_threads;
}

TEST(merge_threads_narrows_the_engines)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.policy = "return { merge_threads = 2, flush_interval_s = 0 }", .name = "two.lua",
			    .merge_threads = 4};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	CHECK_EQ(fx_merge_threads(&f), 2);
	struct policy_clamp c[POLICY_MAX_CLAMPS];
	CHECK_EQ(runtime_clamps(f.rt, c, POLICY_MAX_CLAMPS), 0);
	/* Asking more than the engine's runs at the engine's, and says so. */
	log_clear();
	static const char many[] = "return { merge_threads = 16, flush_interval_s = 0 }";
	CHECK_EQ(with_err(runtime_reload_source(f.rt, many, strlen(many), "many.lua"), err, sizeof(err)), 0);
	CHECK_EQ(fx_merge_threads(&f), 4);
	REQUIRE_EQ(runtime_clamps(f.rt, c, POLICY_MAX_CLAMPS), 1);
	CHECK(strcmp(c[0].setting, "merge_threads") == 0);
	CHECK(c[0].asked == 16 && c[0].effective == 4);
	CHECK(log_has("merge_threads = 4 (the policy asks 16; clamped to the engine's merge_threads = 4)"));
	struct runtime_settings s;
	runtime_settings(f.rt, &s);
	CHECK_EQ(s.merge_threads, 4);
	/* One thread, then no setting at all: the engine's again. */
	static const char one[] = "return { merge_threads = 1, flush_interval_s = 0 }";
	CHECK_EQ(with_err(runtime_reload_source(f.rt, one, strlen(one), "one.lua"), err, sizeof(err)), 0);
	CHECK_EQ(fx_merge_threads(&f), 1);
	static const char none[] = "return { flush_interval_s = 0 }";
	CHECK_EQ(with_err(runtime_reload_source(f.rt, none, strlen(none), "none.lua"), err, sizeof(err)), 0);
	CHECK_EQ(fx_merge_threads(&f), 4);
	/* Out of range is refused with the setting named; the running policy stays. */
	static const char bad[] = "return { merge_threads = 65 }";
	CHECK(with_err(runtime_reload_source(f.rt, bad, strlen(bad), "bad.lua"), err, sizeof(err)) != 0);
	CHECK(strstr(err, "merge_threads must be 0 or between 1 and 64 (got 65)") != NULL);
	CHECK_EQ(with_err(runtime_reload_source(f.rt, one, strlen(one), "one.lua"), err, sizeof(err)), 0);
	CHECK_EQ(fx_merge_threads(&f), 1);
	runtime_delete(f.rt);
	f.rt = NULL;
	CHECK_EQ(fx_merge_threads(&f), 4);
	fx_close(&f);
	/* What `strata policy check --merge-threads N` prints. */
	struct policy *p;
	REQUIRE_EQ(with_err(policy_new("many.lua", many, strlen(many), NULL, &p), err, sizeof(err)), 0);
	char desc[2048];
	struct policy_engine e4 = {.merge_max_inputs = 8, .merge_threads = 4}, e0 = {.merge_max_inputs = 8};
	policy_describe(p, &e4, desc, sizeof(desc));
	CHECK(strstr(desc, "merge_threads = 4 (the policy asks 16; clamped to the engine's merge_threads = 4)\n") !=
	      NULL);
	policy_describe(p, &e0, desc, sizeof(desc));
	CHECK(strstr(desc, "merge_threads = 16\n") != NULL);
	policy_delete(p);
}

/* The trial of a policy (PUT /v1/policy, `strata policy check --run`): every hook runs on
 * a simulated node; a hook that loops is stopped by its budget and named with its
 * file:line; what the hooks log stays in the report, not in the process's log. */
TEST(trial_names_the_failing_hook_and_keeps_its_log)
{
	fx_env();
	strata_options so;
	strata_options_init(&so);
	struct trial_options o = {.run = 1, .limits = {.budget_ms = 20}, .store = &so};
	static const char loop[] = "return {\n"
				   "  on_sweep = function(node) strata.log.info('sweeping') end,\n"
				   "  on_seal = function(shard, info)\n"
				   "    while true do end\n"
				   "  end,\n"
				   "}\n";
	struct trial *t = NULL;
	CHECK_EQ(trial_new("t.lua", loop, sizeof(loop) - 1, &o, &t), STRATA_EINVAL);
	REQUIRE(t != NULL);
	CHECK_EQ(t->compile_rc, 0);
	CHECK(t->ran);
	CHECK_EQ(t->nruns, TRIAL_RUNS);
	CHECK_EQ(t->failed, TRIAL_SHARDS);
	const struct trial_run *f = trial_first_failure(t);
	REQUIRE(f != NULL);
	CHECK_EQ(f->hook, POLICY_ON_SEAL);
	CHECK_EQ(f->shard, 0);
	CHECK(strstr(f->err, "t.lua:4: hook exceeded its time budget of 20 ms") != NULL);
	CHECK_EQ(trial_msg_line(t, f->err), 4);
	const struct trial_run *sweep = &t->runs[TRIAL_RUNS - 1];
	CHECK_EQ(sweep->hook, POLICY_ON_SWEEP);
	CHECK_EQ(sweep->outcome, TRIAL_RUN_OK);
	CHECK(sweep->log != NULL && strstr(sweep->log, "info: policy t.lua: sweeping") != NULL);
	CHECK(!log_has("sweeping"));
	trial_delete(t);
	/* A policy that does not compile is not run. */
	CHECK_EQ(trial_new("t.lua", "return {", 8, &o, &t), STRATA_EINVAL);
	REQUIRE(t != NULL);
	CHECK(t->compile_rc != 0 && !t->ran);
	CHECK(strstr(t->errors, "t.lua:1:") != NULL);
	trial_delete(t);
	/* A good one passes every run. */
	static const char good[] = "return { merge_max_generations = 2 }";
	CHECK_EQ(trial_new("t.lua", good, strlen(good), &o, &t), 0);
	REQUIRE(t != NULL);
	CHECK_EQ(t->failed, 0);
	CHECK_EQ(t->nruns, TRIAL_RUNS);
	trial_delete(t);
	env_reset();
}

/* ---------------------------------------------------------------- hostile policies */

TEST(hostile_policies_are_stopped_and_store_keeps_working)
{
	static const struct {
		const char *src;
		/** Refused at load (else fails in on_seal). */
		int at_load;
		uint32_t budget_ms;
		const char *want;
	} cases[] = {
		{"while true do end return {}", 1, 50, "hostile.lua:1: policy exceeded its time budget of 50 ms"},
		{"os.execute('touch /tmp/strata-pwned') return {}", 1, 50, "hostile.lua:1: undefined global 'os'"},
		{"local x = require 'os' return {}", 1, 50, "require 'os' is not allowed"},
		{"local s = string.rep('x', 1e9) return {}", 1, 5000, "not enough memory"},
		{"return { on_seal = function()\n while true do end\n end }", 0, 50,
		 "hostile.lua:2: hook exceeded its time budget of 50 ms"},
		{"return { on_seal = function()\n while true do pcall(function() while true do end end) end\n end }",
		 0, 50, "exceeded its time budget of 50 ms"},
		{"return { on_seal = function()\n os.execute('touch /tmp/strata-pwned')\n end }", 0, 50,
		 "hostile.lua:2: undefined global 'os'"},
		{"return { on_seal = function()\n io.open('/etc/passwd')\n end }", 0, 50,
		 "hostile.lua:2: undefined global 'io'"},
		{"return { on_seal = function()\n local os = require 'os'\n end }", 0, 50,
		 "hostile.lua:2: require 'os' is not allowed"},
		{"return { on_seal = function()\n local s = string.rep('x', 1e9)\n end }", 0, 5000,
		 "not enough memory"},
		{"return { on_seal = function()\n local t = {}\n local i = 0\n while true do i = i + 1 t[i] = {i} end\n"
		 " end }", 0, 5000, "not enough memory"},
		{"return { on_seal = function()\n local ok = pcall(string.rep, 'x', 1e9)\n while true do end\n end }",
		 0, 5000, "not enough memory"},
		{"return { on_seal = function()\n error('boom')\n end }", 0, 50, "hostile.lua:2: boom"},
		{"return { on_seal = function()\n leak = 1\n end }", 0, 50,
		 "hostile.lua:2: assignment to global 'leak'"},
		{"return { on_seal = function()\n local f = assert(load(string.dump(function() end)))\n end }", 0,
		 50, "attempt to load chunk with wrong mode"},
		{"return { on_seal = function()\n local f = assert(load('debug.sethook()'))\n f()\n end }", 0, 50,
		 "undefined global 'debug'"},
		{"return { on_seal = function()\n getfenv(1).x = 1\n end }", 0, 50, "undefined global 'getfenv'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fx f;
		char err[2048];
		struct fx_opts o = {.policy = cases[i].src,
				    .name = "hostile.lua",
				    .budget_ms = cases[i].budget_ms,
				    .mem_bytes = 4 << 20};
		int rc = fx_open(&f, &o, err, sizeof(err));
		if (cases[i].at_load) {
			CHECK(rc != 0);
			if (strstr(err, cases[i].want) == NULL) {
				fprintf(stderr, "  case %zu: got \"%s\", want \"%s\"\n", i, err, cases[i].want);
				CHECK(0);
			}
			/* A reload with it is refused the same way. */
			fx_close(&f);
			struct fx_opts ok = {.policy = "return {}", .budget_ms = cases[i].budget_ms,
					     .mem_bytes = 4 << 20};
			REQUIRE_EQ(fx_open(&f, &ok, err, sizeof(err)), 0);
			CHECK(with_err(runtime_reload_source(f.rt, cases[i].src, strlen(cases[i].src), "hostile.lua"),
				       err, sizeof(err)) != 0);
			CHECK(strstr(err, cases[i].want) != NULL);
			CHECK_EQ(rt_stats(&f).policy_version, 1);
			fx_close(&f);
			continue;
		}
		REQUIRE_EQ(rc, 0);
		REQUIRE(add_generations(&f, 0, 1) == 0);
		struct runtime_stats rs = rt_stats(&f);
		CHECK_EQ(rs.hook_errors, 1);
		if (strstr(rs.last_error, cases[i].want) == NULL) {
			fprintf(stderr, "  case %zu: got \"%s\", want \"%s\"\n", i, rs.last_error, cases[i].want);
			CHECK(0);
		}
		CHECK(log_has("warn policy hook on_seal failed"));
		/* The store still accepts appends and merges (directly and through the policy). */
		CHECK_EQ(append_one(&f, 0), 0);
		CHECK_EQ(strata_merge(f.db, 0, 0, NULL), 0);
		REQUIRE(drive_idle(&f));
		struct mres m = {0};
		REQUIRE(add_generations(&f, 0, 1) == 0);
		REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
		REQUIRE(DRIVE_UNTIL(&f, m.done));
		CHECK_EQ(m.rc, 0);
		CHECK(m.reclaimed >= 1);
		/* The next trigger runs the hook again. */
		rs = rt_stats(&f);
		CHECK(rs.hook_errors >= 2);
		CHECK_EQ(strata_check(f.db, 0), 0);
		fx_close(&f);
	}
}

TEST(budget_counts_only_time_running_not_parked)
{
	struct fx f;
	char err[1024];
	/* After the merge resumes it, the hook runs far more than one count-hook
	 * interval of instructions, so the budget is checked after the park. */
	struct fx_opts o = {.policy = "return { merge_after_generations = 0, flush_interval_s = 0,\n"
				      "  sweep_interval_s = 0,\n"
				      "  on_merge_request = function(shard, req)\n"
				      "    local n, e = shard:merge{}\n"
				      "    local x = 0\n"
				      "    for i = 1, 100000 do x = x + i end\n"
				      "    return n, e\n"
				      "  end }",
			    .budget_ms = 50,
			    .block_bytes = 256};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	policy_cpu_ns = test_cpu_ns;
	for (int i = 0; i < 40; i++)
		REQUIRE_EQ(append_one(&f, 0), 0);
	point_arm();
	struct mres m = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
	REQUIRE(DRIVE_UNTIL(&f, point_reached()));
	/* Ten seconds of "CPU" pass while the hook is parked in prepare. */
	atomic_fetch_add(&test_cpu, 10000000000ull);
	point_release();
	REQUIRE(DRIVE_UNTIL(&f, m.done));
	CHECK_EQ(m.rc, 0);
	CHECK_EQ(rt_stats(&f).hook_errors, 0);
	fx_close(&f);
}

/** The process's default log sink (logfmt on stderr), saved before fixtures replace it. */
static void (*test_default_sink)(int level, const char *msg);

/** Run a merge request whose on_merge_request body is body; its failure message in m. */
static void
merge_request_with(const char *body, struct mres *m)
{
	struct fx f;
	char err[1024], src[1024];
	snprintf(src, sizeof(src), "return { merge_after_generations = 0, flush_interval_s = 0,\n"
		 "  sweep_interval_s = 0,\n"
		 "  on_merge_request = function(shard, req)\n"
		 "    %s\n"
		 "  end }", body);
	struct fx_opts o = {.policy = src, .name = "named.lua"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	memset(m, 0, sizeof(*m));
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, m), 0);
	REQUIRE(DRIVE_UNTIL(&f, m->done));
	fx_close(&f);
}

TEST(primitive_errors_name_the_method_called)
{
	/* A tail call leaves Lua no name for the function: the message must still say which. */
	struct mres m;
	merge_request_with("return shard:merge{max_gens = 3}", &m);
	CHECK(m.rc != 0);
	CHECK(strstr(m.err, "bad argument #1 to 'shard:merge' (unknown option 'max_gens' (shard:merge takes "
		       "max_generations))") != NULL);
	CHECK(strstr(m.err, "'?'") == NULL);
	merge_request_with("return shard:merge(5)", &m);
	CHECK(strstr(m.err, "bad argument #1 to 'shard:merge' (table of options or nil expected, got number)") !=
	      NULL);
	merge_request_with("local ok, e = pcall(shard.commit, shard, 7) error(e, 0)", &m);
	CHECK(strstr(m.err, "bad argument #1 to 'shard:commit' (plan expected, got number)") != NULL);
	merge_request_with("return shard.seal(42)", &m);
	CHECK(strstr(m.err, "calling 'shard:seal' on bad self (shard expected, got number)") != NULL);
	CHECK(strstr(m.err, "'?'") == NULL);
	/* A named call keeps its line. */
	merge_request_with("local n = shard:compact{max_gens = 1} return n", &m);
	CHECK(strstr(m.err, "named.lua:4: bad argument #1 to 'shard:compact' (unknown option 'max_gens'") != NULL);
}

/** Run a merge request of a policy (name tail.lua) whose helpers are in helpers and whose
 *  on_merge_request body is body; its failure message in m, the runtime's last_error in last. */
static void
merge_request_of(const char *helpers, const char *body, struct mres *m, char *last, size_t lastlen)
{
	struct fx f;
	char err[1024], src[2048];
	snprintf(src, sizeof(src), "%s\nreturn { merge_after_generations = 0, flush_interval_s = 0,\n"
		 "  sweep_interval_s = 0,\n"
		 "  on_merge_request = function(shard, req)\n"
		 "    %s\n"
		 "  end }", helpers, body);
	struct fx_opts o = {.policy = src, .name = "tail.lua"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	memset(m, 0, sizeof(*m));
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, m), 0);
	REQUIRE(DRIVE_UNTIL(&f, m->done));
	snprintf(last, lastlen, "%s", rt_stats(&f).last_error);
	fx_close(&f);
}

/* LuaJIT drops the frame of a function that makes a tail call: after `return error(...)`
 * in a helper the hook tail-called, no frame of the script is left on the stack, and
 * error's own position (level 1, the dropped frame) comes out empty. The message still
 * names the file and the line where the error was raised: in the merge request's
 * answer, in last_error (what hook_errors and GET /v1/policy show) and in the log. */
TEST(error_raised_in_a_tail_call_names_its_line)
{
	const char *helpers = "local function check(x)\n"	       /* 1 */
			      "  if not x then\n"		       /* 2 */
			      "    return error('boom')\n"	       /* 3 */
			      "  end\n"			       /* 4 */
			      "end\n"				       /* 5 */
			      "local function blame(x)\n"	       /* 6 */
			      "  error('caller blamed', 2)\n"	       /* 7 */
			      "end\n"				       /* 8 */
			      "local function f() error('plain') end\n" /* 9 */
			      "local function merge(shard)\n"	       /* 10 */
			      "  return shard:merge{max_generations = -1}\n" /* 11 */
			      "end";				       /* 12 */
	/* The hook's body is line 16. */
	struct mres m;
	char last[1024];
	log_clear();
	merge_request_of(helpers, "return check(false)", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:3: boom") != NULL);
	CHECK(strstr(last, "tail.lua:3: boom") != NULL);
	CHECK(log_has("tail.lua:3: boom"));
	if (strstr(m.err, "tail.lua:3: boom") == NULL)
		fprintf(stderr, "  got: %s\n", m.err);
	/* Level 2 blames the hook, whose frame the tail call dropped: the helper's line. */
	merge_request_of(helpers, "return blame(1)", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:7: caller blamed") != NULL);
	/* assert adds no position of its own, tail call or not. */
	merge_request_of(helpers, "return assert(nil, 'nope')", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:16: nope") != NULL);
	merge_request_of(helpers, "local ok = assert(false, 'nope')\n    return ok", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:16: nope") != NULL);
	/* An error object that is not a string. */
	merge_request_of(helpers, "error({code = 7})", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:16: ") != NULL);
	/* A primitive's error, raised in C, from a tail call. */
	merge_request_of(helpers, "return merge(shard)", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:11: ") != NULL && strstr(m.err, "max_generations") != NULL);
	/* The brief's case: the helper's own frame is still there. */
	merge_request_of(helpers, "return f()", &m, last, sizeof(last));
	CHECK(strstr(m.err, "tail.lua:9: plain") != NULL);
}

TEST(refused_allocation_names_the_policy_line)
{
	struct fx f;
	char err[2048];
	/* At load: the line of the string.rep. */
	struct fx_opts o = {.policy = "local a = 1\nlocal s = string.rep('x', 1e9)\nreturn {}", .name = "oom.lua",
			    .budget_ms = 5000};
	CHECK(fx_open(&f, &o, err, sizeof(err)) != 0);
	CHECK(strstr(err, "oom.lua:2: not enough memory (the policy memory limit is 65536 KiB)") != NULL);
	fx_close(&f);
	/* Through the sandbox's pcall, which re-raises: the line of the pcall. */
	o.policy = "local a = 1\n\nlocal ok = pcall(string.rep, 'x', 1e9)\nreturn {}";
	CHECK(fx_open(&f, &o, err, sizeof(err)) != 0);
	CHECK(strstr(err, "oom.lua:3: not enough memory") != NULL);
	fx_close(&f);
	/* A concatenation in the virtual machine: after the error its frame has no line any
	 * more, so the line is taken when the allocation is refused. */
	o.policy = "local t = {}\nfor i = 1, 1e9 do\n  local s = string.rep('x', 1e7)\n  t[i] = s .. i\nend\nreturn {}";
	CHECK(fx_open(&f, &o, err, sizeof(err)) != 0);
	CHECK(strstr(err, "oom.lua:4: not enough memory") != NULL);
	fx_close(&f);
	/* In a hook. */
	struct mres m;
	merge_request_with("local t = {}\n    local s = string.rep('y', 1e9)\n    return 0", &m);
	CHECK(strstr(m.err, "named.lua:5: not enough memory (the policy memory limit is") != NULL);
}

TEST(multi_error_refusal_is_one_logfmt_record)
{
	struct fx f;
	char err[2048];
	struct fx_opts o = {.policy = "return {}", .name = "start.lua"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	/* The default sink, into a file instead of stderr. */
	char path[600];
	snprintf(path, sizeof(path), "%s/stderr.txt", f.dir);
	fflush(stderr);
	int saved = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	static const char bad[] = "return { flush_interval_s = \"five\", merge_max_generations = -3 }";
	/* diag_log's default sink is what `strata serve --log-format logfmt` writes with. */
	diag_log_sink = test_default_sink;
	int rc = with_err(runtime_reload_source(f.rt, bad, strlen(bad), "multi.lua"), err, sizeof(err));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	diag_log_sink = log_capture;
	CHECK(rc != 0);
	CHECK(strchr(err, '\n') != NULL); /* two errors, one per line in the API's text */
	char *text = read_text(path);
	REQUIRE(text != NULL);
	int lines = 0;
	for (char *c = text; *c; c++)
		lines += *c == '\n';
	CHECK_EQ(lines, 1);
	CHECK(strstr(text, "msg=\"policy: reload refused") != NULL);
	CHECK(strstr(text, "multi.lua:1: flush_interval_s must be a number, not string\\nmulti.lua:1: "
		       "merge_max_generations must be 0") != NULL);
	free(text);
	/* A good reload after it clears last_error. */
	CHECK(rt_stats(&f).last_error[0] != '\0');
	static const char good[] = "return { merge_max_generations = 4 }";
	CHECK_EQ(with_err(runtime_reload_source(f.rt, good, strlen(good), "good.lua"), err, sizeof(err)), 0);
	CHECK(rt_stats(&f).last_error[0] == '\0');
	fx_close(&f);
}

/* ---------------------------------------------------------------- plans */

TEST(plan_misuse_gets_documented_errors)
{
	struct fx f;
	char err[2048];
	const char *src =
		"local function expect(pat, ok, err)\n"
		"  if ok ~= nil or not tostring(err):find(pat) then\n"
		"    error('expected ' .. pat .. ', got ' .. tostring(ok) .. ', ' .. tostring(err), 2)\n"
		"  end\n"
		"end\n"
		"return { merge_after_generations = 0, merge_max_generations = 2,\n"
		"  flush_interval_s = 0, sweep_interval_s = 60,\n"
		"  on_sweep = function(node)\n"
		"    local s = node:shards()\n"
		"    local a, b = s[1], s[2]\n"
		"    local p1 = assert(a:prepare{max_generations = 2})\n"
		"    expect('^busy: ', a:prepare{max_generations = 2})\n"
		"    assert(p1.generations == 2 and p1.shard == 0 and p1.state == 'ready')\n"
		"    expect('^wrong shard: the plan belongs to shard 0', b:commit(p1))\n"
		"    assert(a:commit(p1) == 2)\n"
		"    assert(p1.state == 'done')\n"
		"    expect('^consumed', a:commit(p1))\n"
		"    local p2 = assert(a:prepare{max_generations = 2})\n"
		"    assert(a:abort(p2) == true)\n"
		"    expect('^consumed', a:abort(p2))\n"
		"    local p3 = assert(b:prepare{})\n"
		"    assert(b:abort(p3) == true)\n"
		"    expect('^consumed', b:commit(p3))\n"
		"    local ok, e = pcall(table.sort, {2, 1}, function(x, y) a:prepare{} return x < y end)\n"
		"    assert(not ok and e:find('must be called from a policy hook'), e)\n"
		"    ok, e = pcall(a.commit, a, {})\n"
		"    assert(not ok and e:find([[bad argument #1 to 'shard:commit' (plan expected, got table)]], 1, true), e)\n"
		"    ok, e = pcall(a.merge, a, {max_generations = -1})\n"
		"    assert(not ok and e:find('max_generations must be an integer'), e)\n"
		"    strata.log.info('misuse checks passed')\n"
		"  end,\n"
		"  on_merge_request = function(shard, req)\n"
		"    local p = assert(shard:prepare{})\n"
		"    strata.log.info('left open', p.generations)\n"
		"    return 0\n"
		"  end }\n";
	struct fx_opts o = {.shards = 2, .policy = src, .name = "misuse.lua"};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	REQUIRE(add_generations(&f, 0, 4) == 0);
	REQUIRE(add_generations(&f, 1, 2) == 0);
	clock_advance(60);
	ev_run(f.loop, EVRUN_NOWAIT);
	REQUIRE(drive_idle(&f));
	struct runtime_stats rs = rt_stats(&f);
	CHECK_EQ(rs.hook_errors, 0);
	if (rs.hook_errors != 0)
		fprintf(stderr, "  last_error: %s\n", rs.last_error);
	CHECK(log_has("misuse checks passed"));
	strata_stats s0 = shard_stats(&f, 0);
	CHECK_EQ(s0.merges, 1);
	CHECK_EQ(s0.merge_conflicts, 0);
	CHECK_EQ(s0.generations, 2);
	CHECK_EQ(shard_stats(&f, 1).generations, 2);
	/* Aborted and conflicting plans left no run objects behind. */
	CHECK_EQ(count_run_files(&f, 0), (int)s0.base_runs);
	CHECK_EQ(count_run_files(&f, 1), (int)shard_stats(&f, 1).base_runs);
	/* A plan still open when its hook ends is aborted, its run deleted. */
	struct mres m = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
	REQUIRE(DRIVE_UNTIL(&f, m.done));
	REQUIRE(drive_idle(&f));
	CHECK(log_has("left open 2"));
	CHECK_EQ(m.rc, 0);
	CHECK_EQ(shard_stats(&f, 0).generations, 2);
	CHECK_EQ(count_run_files(&f, 0), (int)shard_stats(&f, 0).base_runs);
	CHECK_EQ(strata_check(f.db, 0), 0);
	fx_close(&f);
}

TEST(second_prepare_in_flight_is_busy)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.policy = "return { merge_after_generations = 0, flush_interval_s = 0,\n"
				      "  sweep_interval_s = 0,\n"
				      "  on_merge_request = function(shard, req)\n"
				      "    local p, e = shard:prepare{}\n"
				      "    if not p then return nil, e end\n"
				      "    return shard:commit(p)\n"
				      "  end }",
			    .block_bytes = 256};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 40; i++)
		REQUIRE_EQ(append_one(&f, 0), 0);
	point_arm();
	struct mres m1 = {0}, m2 = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m1), 0);
	REQUIRE(DRIVE_UNTIL(&f, point_reached()));
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m2), 0);
	REQUIRE(DRIVE_UNTIL(&f, m2.done));
	CHECK_EQ(m2.rc, STRATA_EBUSY);
	CHECK(strncmp(m2.err, "busy: ", 6) == 0);
	CHECK_EQ(m1.done, 0);
	point_release();
	REQUIRE(DRIVE_UNTIL(&f, m1.done));
	CHECK_EQ(m1.rc, 0);
	CHECK_EQ(m1.reclaimed, 1);
	fx_close(&f);
}

/* ---------------------------------------------------------------- yield / resume */

static void
tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	(*(int *)w->data)++;
}

TEST(parked_hook_does_not_block_appends_or_loop)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.shards = 2,
			    .policy = "return { merge_after_generations = 0, flush_interval_s = 5,\n"
				      "  sweep_interval_s = 0 }",
			    .block_bytes = 256};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 40; i++)
		REQUIRE_EQ(append_one(&f, 0), 0);
	point_arm();
	struct mres m = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
	REQUIRE(DRIVE_UNTIL(&f, point_reached()));
	/* Appends from another thread complete while the hook is parked. */
	struct writer w = {.db = f.db, .rows = 200};
	pthread_t th;
	REQUIRE_EQ(pthread_create(&th, NULL, writer_main, &w), 0);
	int ticks = 0;
	ev_timer tick;
	ev_timer_init(&tick, tick_cb, 0., 0.);
	tick.data = &ticks;
	ev_timer_start(f.loop, &tick);
	CHECK(DRIVE_UNTIL(&f, atomic_load(&w.done) && ticks == 1));
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&w.failed), 0);
	/* The flush timers still fire and seal shard 1 on the other worker. */
	clock_advance(5);
	CHECK(DRIVE_UNTIL(&f, shard_stats(&f, 1).generations == 1));
	CHECK_EQ(rt_stats(&f).flush_timer_fires, 2);
	CHECK_EQ(m.done, 0);
	CHECK(rt_stats(&f).hook_runs >= 1);
	point_release();
	REQUIRE(DRIVE_UNTIL(&f, m.done));
	CHECK_EQ(m.rc, 0);
	CHECK_EQ(m.reclaimed, 1);
	CHECK_EQ(strata_check(f.db, 0), 0);
	fx_close(&f);
}

TEST(delete_abandons_parked_hook_safely)
{
	struct fx f;
	char err[1024];
	struct fx_opts o = {.policy = "return { merge_after_generations = 0, flush_interval_s = 0,\n"
				      "  sweep_interval_s = 0,\n"
				      "  on_merge_request = function(shard, req)\n"
				      "    local p = assert(shard:prepare{})\n"
				      "    return shard:commit(p)\n"
				      "  end }",
			    .block_bytes = 256};
	REQUIRE_EQ(fx_open(&f, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 40; i++)
		REQUIRE_EQ(append_one(&f, 0), 0);
	point_arm();
	struct mres m = {0};
	REQUIRE_EQ(runtime_merge_request(f.rt, 0, mres_cb, &m), 0);
	REQUIRE(DRIVE_UNTIL(&f, point_reached()));
	point_release();
	runtime_delete(f.rt);
	f.rt = NULL;
	CHECK_EQ(m.done, 1);
	CHECK_EQ(m.rc, STRATA_ECLOSED);
	/* The prepared run was aborted: nothing merged, no stray run object (the abort ran
	 * its delete: the runtime that drove deletes had already stopped). */
	CHECK_EQ(shard_stats(&f, 0).merges, 0);
	uint64_t pending = 0;
	store_reaper_stats(strata_store(f.db), &pending, NULL, NULL, NULL);
	CHECK_EQ(pending, 0);
	CHECK_EQ(count_run_files(&f, 0), 0);
	CHECK_EQ(strata_check(f.db, 0), 0);
	CHECK_EQ(append_one(&f, 0), 0);
	CHECK_EQ(strata_merge(f.db, 0, 0, NULL), 0);
	CHECK_EQ(count_run_files(&f, 0), 1);
	CHECK_EQ(shard_stats(&f, 0).base_runs, 1);
	fx_close(&f);
}

TEST(strata_close_stops_its_runtime)
{
	fx_env();
	char *dir = harness_tmpdir("policy");
	strata_options so;
	strata_options_init(&so);
	so.dir = dir;
	so.sync = STRATA_SYNC_NONE;
	so.policy = ""; /* the built-in default, on a loop thread of the handle's own host */
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&so, &db), 0);
	struct runtime *rt = strata_runtime(db);
	CHECK(rt != NULL);
	CHECK(host_mode(strata_host(db)) == HOST_THREADED);
	strata_policy_info info;
	CHECK_EQ(strata_policy_info_get(db, &info), 0);
	CHECK_EQ(info.version, 1);
	strata_row r = {"k", 1, "v", 1};
	CHECK_EQ(strata_append(db, 0, &r, 1), 0);
	strata_close(db); /* stops the runtime on its loop thread, then the store, then the host */
	/* Without a policy the handle runs on a host without threads. */
	so.policy = NULL;
	REQUIRE_EQ(strata_open(&so, &db), 0);
	CHECK(strata_runtime(db) == NULL);
	CHECK(host_mode(strata_host(db)) == HOST_INLINE);
	CHECK_EQ(strata_policy_info_get(db, &info), STRATA_EINVAL);
	strata_close(db);
	harness_rmrf(dir);
	free(dir);
	env_reset();
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	default_cpu_ns = policy_cpu_ns;
	test_default_sink = diag_log_sink;
	RUN(shipped_policies_load_and_validate);
	RUN(typo_key_is_refused_with_nearest_name);
	RUN(text_u64_takes_digits_only);
	RUN(wrong_types_and_ranges_are_refused);
	RUN(count_trigger_fires_at_n_and_cap_binds);
	RUN(sweeper_honours_cap);
	RUN(merge_request_honours_cap);
	RUN(flush_timer_and_size_trigger_seal);
	RUN(reload_under_appends_loses_nothing_and_refuses_broken_script);
	RUN(reload_lets_running_hook_finish_on_old_state);
	RUN(reload_from_file_and_refusal_keeps_policy);
	RUN(watched_file_reloads_on_change);
	RUN(watcher_reloads_a_file_written_in_two_halves_once);
	RUN(watcher_sees_a_same_size_edit_within_a_second);
	RUN(persisted_policy_is_not_reloaded_by_the_watcher);
	RUN(clamped_setting_reports_what_runs_and_why);
	RUN(merge_threads_narrows_the_engines);
	RUN(trial_names_the_failing_hook_and_keeps_its_log);
	RUN(hostile_policies_are_stopped_and_store_keeps_working);
	RUN(budget_counts_only_time_running_not_parked);
	RUN(primitive_errors_name_the_method_called);
	RUN(error_raised_in_a_tail_call_names_its_line);
	RUN(refused_allocation_names_the_policy_line);
	RUN(multi_error_refusal_is_one_logfmt_record);
	RUN(plan_misuse_gets_documented_errors);
	RUN(second_prepare_in_flight_is_busy);
	RUN(parked_hook_does_not_block_appends_or_loop);
	RUN(delete_abandons_parked_hook_safely);
	RUN(strata_close_stops_its_runtime);
	return HARNESS_END("test_policy");
}
