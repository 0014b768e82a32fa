/*
 * bench_policy — what the policy runtime costs: reload time, append latency during
 * reloads, and the per-shard cost of a sweep hook.
 *
 * 1. Reload. A store (1 shard) is opened with options.policy = a policy file; the
 *    bench then calls strata_set_policy BENCH_POLICY_RELOADS times back to back,
 *    alternating two valid policy sources, and prints mean/p50/max of one call.
 * 2. Appends during reloads. Throughout, BENCH_POLICY_THREADS threads append
 *    batches of BENCH_POLICY_BATCH rows (16-byte keys, 200-byte values) to that
 *    shard at a constant paced rate (BENCH_POLICY_RATE appends/s per thread, an
 *    open loop: a late append is not made up for by a burst), timing every append
 *    call. Latencies are split into the window of the reloads and an idle window of
 *    the same length right after it, printed side by side (p50/p99/max).
 * 3. Sweep hook overhead. A store of BENCH_POLICY_SHARDS shards (sync none, 1 MiB
 *    WAL segments, nothing appended, so no generations anywhere) runs, one after the
 *    other for BENCH_SWEEP_SECONDS each, policies with sweep_interval_s =
 *    BENCH_SWEEP_INTERVAL_MS: the sweeper off (idle baseline), an empty on_sweep, an
 *    on_sweep that calls shard:stats() on every shard of node:shards(), and the
 *    built-in default on_sweep. The sweeps counter (timer fires) and hook_runs
 *    (sweeps started) come from strata_policy_info_get; the process CPU time over the
 *    window divided by the sweeps started gives the CPU time of one sweep, and that
 *    divided by the shard count the µs per shard visited.
 * Asserts nothing about speed; exits 1 when the engine reports an error.
 *
 * Environment: BENCH_POLICY_RELOADS (100), BENCH_POLICY_THREADS (4),
 * BENCH_POLICY_RATE (10000), BENCH_POLICY_BATCH (1), BENCH_POLICY_SYNC (none|fsync,
 * default none), BENCH_POLICY_SHARDS (1000), BENCH_SWEEP_INTERVAL_MS (10, the
 * smallest sweep_interval_s a policy accepts), BENCH_SWEEP_SECONDS (2), BENCH_DIR.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../../node/strata.h"
#include "bench_util.h"

enum { KEY_BYTES = 16, VALUE_BYTES = 200, VALUE_POOL = 8192 };

/** Phases of the append load; each append is counted in the phase it started in. */
enum phase { PHASE_WARMUP, PHASE_RELOADS, PHASE_IDLE, PHASE_STOP };

/** Measured windows: the reloads (0) and the idle window after them (1). */
enum { WINDOWS = 2 };

/** The two policies the reload bench alternates (both valid, timers that do not fire). */
static const char reload_src_a[] =
	"-- bench_policy: reload source A\n"
	"return {\n"
	"\tflush_interval_s = 0,\n"
	"\tsweep_interval_s = 0,\n"
	"\tmerge_after_generations = 50,\n"
	"\tmerge_max_generations = 8,\n"
	"\tbase_max_runs = 8,\n"
	"\ton_seal = function(shard, info)\n"
	"\t\tif info.generations >= 50 then shard:merge{} end\n"
	"\tend,\n"
	"}\n";
static const char reload_src_b[] =
	"-- bench_policy: reload source B\n"
	"local strata = require \"strata\"\n"
	"local function busy(shard)\n"
	"\treturn shard:stats().generations >= 40\n"
	"end\n"
	"return {\n"
	"\tflush_interval_s = 0,\n"
	"\tsweep_interval_s = 0,\n"
	"\tmerge_after_generations = 40,\n"
	"\tmerge_max_generations = 4,\n"
	"\tbase_max_runs = 6,\n"
	"\ton_seal = function(shard, info)\n"
	"\t\tif busy(shard) then\n"
	"\t\t\tlocal n, err = shard:merge{}\n"
	"\t\t\tif not n then strata.log.warn(err) end\n"
	"\t\tend\n"
	"\tend,\n"
	"}\n";

/** Shared state of the append load. */
struct load {
	/** The store. */
	strata *db;
	/** Current phase (enum phase). */
	atomic_int phase;
	/** Rows per append. */
	unsigned batch;
	/** Appends per second per thread. */
	uint64_t rate;
	/** First error message, if any. */
	char error[512];
	/** Guards error. */
	pthread_mutex_t error_lock;
	/** Set when an append failed. */
	atomic_int failed;
};

/** One appender thread. */
struct appender {
	/** Thread handle. */
	pthread_t thread;
	/** Thread index. */
	unsigned id;
	/** The load. */
	struct load *ld;
	/** Latencies (ns) of the appends started in the reload and idle windows. */
	struct bench_hist *hist[WINDOWS];
	/** Longest append (ns) per measured window. */
	uint64_t max_ns[WINDOWS];
	/** Appends started in each measured window. */
	uint64_t appends[WINDOWS];
	/** Rows acknowledged in total. */
	uint64_t rows;
};

static void
load_fail(struct load *ld, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&ld->error_lock);
	if (ld->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(ld->error, sizeof(ld->error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&ld->error_lock);
	atomic_store(&ld->failed, 1);
}

static void
sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *
appender_main(void *arg)
{
	struct appender *a = arg;
	struct load *ld = a->ld;
	unsigned batch = ld->batch;
	struct bench_rng rng = { .s = 0x9E3779B97F4A7C15ull * (a->id + 1) };
	uint8_t pool[VALUE_POOL + VALUE_BYTES];
	uint8_t *keys = malloc((size_t)batch * KEY_BYTES);
	strata_row *rows = malloc((size_t)batch * sizeof(*rows));
	uint64_t period = 1000000000ull / ld->rate, next = bench_now_ns(), counter = 0;

	if (keys == NULL || rows == NULL) {
		load_fail(ld, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < sizeof(pool); i += 8) {
		uint64_t r = bench_rng_next(&rng);

		memcpy(pool + i, &r, sizeof(pool) - i < 8 ? sizeof(pool) - i : 8);
	}
	for (;;) {
		int ph = atomic_load(&ld->phase);
		uint64_t t0, t1;
		int rc;

		if (ph == PHASE_STOP || atomic_load_explicit(&ld->failed, memory_order_relaxed))
			break;
		for (unsigned i = 0; i < batch; i++) {
			uint8_t *k = keys + (size_t)i * KEY_BYTES;
			uint64_t h = bench_rng_next(&rng);
			uint64_t u = ((uint64_t)a->id << 48) | counter++;

			for (int b = 0; b < 8; b++) {
				k[b] = (uint8_t)(h >> (56 - 8 * b));
				k[8 + b] = (uint8_t)(u >> (56 - 8 * b));
			}
			rows[i] = (strata_row){ k, KEY_BYTES, pool + (h >> 32) % VALUE_POOL, VALUE_BYTES };
		}
		t0 = bench_now_ns();
		rc = strata_append(ld->db, 0, rows, batch);
		t1 = bench_now_ns();
		if (rc != 0) {
			load_fail(ld, "strata_append: %s: %s", strata_strerror(rc), strata_last_error());
			break;
		}
		a->rows += batch;
		if (ph == PHASE_RELOADS || ph == PHASE_IDLE) {
			int w = ph == PHASE_RELOADS ? 0 : 1;

			bench_hist_add(a->hist[w], t1 - t0);
			if (t1 - t0 > a->max_ns[w])
				a->max_ns[w] = t1 - t0;
			a->appends[w]++;
		}
		next += period;
		if (t1 > next + 10 * period)
			next = t1; /* fell behind: no catch-up burst */
		else if (next > t1)
			sleep_until(next);
	}
out:
	free(keys);
	free(rows);
	return NULL;
}

/** Arguments of open_off_thread. */
struct opener {
	/** Options to open with. */
	const strata_options *o;
	/** The store opened. */
	strata *db;
	/** strata_open's result. */
	int rc;
	/** strata_last_error() of the opening thread. */
	char error[1024];
};

static void *
opener_main(void *arg)
{
	struct opener *op = arg;

	op->rc = strata_open(op->o, &op->db);
	if (op->rc != 0)
		snprintf(op->error, sizeof(op->error), "%s", strata_last_error());
	return NULL;
}

/*
 * strata_open on a thread of its own. The policy runtime takes the thread that
 * opened the store for its loop thread (runtime_new records pthread_self()), while
 * the embedded loop runs on another thread; strata_set_policy and
 * strata_policy_info_get called from the opening thread would then run on the
 * caller's thread instead of being handed to the loop. Opening elsewhere keeps
 * every call of the bench going through the loop, as for any other caller.
 */
static int
open_off_thread(const strata_options *o, strata **out, char *err, size_t errlen)
{
	struct opener op = { .o = o };
	pthread_t t;

	if (pthread_create(&t, NULL, opener_main, &op) != 0)
		bench_die("pthread_create failed");
	pthread_join(t, NULL);
	*out = op.db;
	snprintf(err, errlen, "%s", op.error);
	return op.rc;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		bench_die("write %s: %s", path, strerror(errno));
}

static int
parse_sync(const char *s)
{
	if (s == NULL || *s == '\0' || strcmp(s, "none") == 0)
		return STRATA_SYNC_NONE;
	if (strcmp(s, "fsync") == 0)
		return STRATA_SYNC_FSYNC;
	bench_die("BENCH_POLICY_SYNC=%s: expected none or fsync", s);
}

static void
print_window(const char *name, double seconds, const struct appender *as, unsigned n, int w)
{
	struct bench_hist *h = calloc(1, sizeof(*h));
	uint64_t appends = 0, max = 0;

	if (h == NULL)
		bench_die("out of memory");
	for (unsigned i = 0; i < n; i++) {
		bench_hist_merge(h, as[i].hist[w]);
		appends += as[i].appends[w];
		if (as[i].max_ns[w] > max)
			max = as[i].max_ns[w];
	}
	printf("  %-18s %8.3f %9" PRIu64 " %11.0f %9.1f %9.1f %9.1f\n", name, seconds, appends,
	       seconds > 0 ? (double)appends / seconds : 0.0, (double)bench_hist_quantile(h, 0.50) / 1e3,
	       (double)bench_hist_quantile(h, 0.99) / 1e3, (double)max / 1e3);
	free(h);
}

/** Part 1 and 2: reload time, and append latency during reloads vs idle. */
static int
bench_reload(void)
{
	uint64_t reloads = bench_env_u64("BENCH_POLICY_RELOADS", 100);
	unsigned threads = (unsigned)bench_env_u64("BENCH_POLICY_THREADS", 4);
	uint64_t rate = bench_env_u64("BENCH_POLICY_RATE", 10000);
	unsigned batch = (unsigned)bench_env_u64("BENCH_POLICY_BATCH", 1);
	int sync = parse_sync(getenv("BENCH_POLICY_SYNC"));
	struct appender *as;
	struct load ld;
	strata_options o;
	strata_policy_info info;
	uint64_t *took, sum = 0, t_start, t_end, idle_end;
	char dir[4096], path[4200], err[1024];
	int rc, failed = 0;

	if (reloads == 0 || reloads > 100000)
		bench_die("BENCH_POLICY_RELOADS must be 1..100000");
	if (threads == 0 || threads > 256)
		bench_die("BENCH_POLICY_THREADS must be 1..256");
	if (rate == 0 || rate > 1000000)
		bench_die("BENCH_POLICY_RATE must be 1..1000000");
	if (batch == 0 || batch > 100000)
		bench_die("BENCH_POLICY_BATCH must be 1..100000");
	as = calloc(threads, sizeof(*as));
	took = calloc(reloads, sizeof(*took));
	if (as == NULL || took == NULL)
		bench_die("out of memory");

	bench_mkdtemp("policy-reload", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/policy.lua", dir);
	write_file(path, reload_src_a);
	strata_options_init(&o);
	o.dir = dir;
	o.shards = 1;
	o.sync = sync;
	o.policy = path;
	rc = open_off_thread(&o, &ld.db, err, sizeof(err));
	if (rc != 0)
		bench_die("strata_open %s: %s: %s", dir, strata_strerror(rc), err);

	printf("-- reload: %" PRIu64 " strata_set_policy calls back to back, alternating two valid "
	       "sources (%zu B, %zu B); store opened with options.policy = a policy file\n",
	       reloads, sizeof(reload_src_a) - 1, sizeof(reload_src_b) - 1);
	printf("   append load meanwhile: %u threads, 1 shard, sync=%s, batch %u, paced at %" PRIu64
	       " appends/s per thread, every append call timed\n",
	       threads, sync == STRATA_SYNC_NONE ? "none" : "fsync", batch, rate);

	atomic_init(&ld.phase, PHASE_WARMUP);
	atomic_init(&ld.failed, 0);
	ld.batch = batch;
	ld.rate = rate;
	ld.error[0] = '\0';
	pthread_mutex_init(&ld.error_lock, NULL);
	for (unsigned i = 0; i < threads; i++) {
		as[i].id = i;
		as[i].ld = &ld;
		for (int w = 0; w < WINDOWS; w++) {
			as[i].hist[w] = calloc(1, sizeof(*as[i].hist[w]));
			if (as[i].hist[w] == NULL)
				bench_die("out of memory");
		}
		if (pthread_create(&as[i].thread, NULL, appender_main, &as[i]) != 0)
			bench_die("pthread_create failed");
	}
	usleep(500000); /* warm-up */

	atomic_store(&ld.phase, PHASE_RELOADS);
	t_start = bench_now_ns();
	for (uint64_t i = 0; i < reloads && !failed; i++) {
		const char *src = i % 2 == 0 ? reload_src_b : reload_src_a;
		size_t len = i % 2 == 0 ? sizeof(reload_src_b) - 1 : sizeof(reload_src_a) - 1;
		uint64_t t0 = bench_now_ns();

		rc = strata_set_policy(ld.db, src, len);
		took[i] = bench_now_ns() - t0;
		sum += took[i];
		if (rc != 0) {
			fprintf(stderr, "bench_policy: strata_set_policy #%" PRIu64 ": %s: %s\n", i + 1,
				strata_strerror(rc), strata_last_error());
			failed = 1;
		}
	}
	t_end = bench_now_ns();
	atomic_store(&ld.phase, PHASE_IDLE);
	idle_end = t_end + (t_end - t_start);
	sleep_until(idle_end);
	atomic_store(&ld.phase, PHASE_STOP);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(as[i].thread, NULL);

	if (strata_policy_info_get(ld.db, &info) != 0) {
		fprintf(stderr, "bench_policy: strata_policy_info_get: %s\n", strata_last_error());
		failed = 1;
	} else if (!failed && (info.reloads != reloads || info.version != reloads + 1 ||
			       info.reload_failures != 0)) {
		fprintf(stderr, "bench_policy: the runtime counted %" PRIu64 " reloads (version %" PRIu64
			", %" PRIu64 " refused), the bench made %" PRIu64 "; last error: %s\n",
			info.reloads, info.version, info.reload_failures, reloads, info.last_error);
		failed = 1;
	}
	if (atomic_load(&ld.failed)) {
		fprintf(stderr, "bench_policy: %s\n", ld.error);
		failed = 1;
	}

	qsort(took, reloads, sizeof(*took), cmp_u64);
	printf("   reload time   mean %.1f us   p50 %.1f us   max %.1f us   (%" PRIu64 " reloads in %.3f s)\n",
	       (double)sum / (double)reloads / 1e3, (double)took[(reloads - 1) / 2] / 1e3,
	       (double)took[reloads - 1] / 1e3, reloads, (double)(t_end - t_start) / 1e9);
	printf("   append latency, the reload window beside an idle window of the same length right after it:\n");
	printf("  %-18s %8s %9s %11s %9s %9s %9s\n", "window", "seconds", "appends", "appends/s", "p50_us",
	       "p99_us", "max_us");
	print_window("during reloads", (double)(t_end - t_start) / 1e9, as, threads, 0);
	print_window("idle (no reloads)", (double)(idle_end - t_end) / 1e9, as, threads, 1);

	strata_close(ld.db);
	bench_rmrf(dir);
	for (unsigned i = 0; i < threads; i++)
		for (int w = 0; w < WINDOWS; w++)
			free(as[i].hist[w]);
	pthread_mutex_destroy(&ld.error_lock);
	free(as);
	free(took);
	return failed;
}

/** One sweep variant. */
struct sweep_variant {
	/** Label printed. */
	const char *name;
	/** on_sweep field of the policy table ("" = none: the built-in default). */
	const char *hook;
	/** Nonzero: sweep_interval_s = 0 (the sweeper off). */
	int off;
};

static double
cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/** Part 3: CPU time of one sweep over many shards, per variant of on_sweep. */
static int
bench_sweep(void)
{
	static const struct sweep_variant variants[] = {
		{ "sweeper off (idle baseline)", "", 1 },
		{ "empty on_sweep", "\ton_sweep = function(node) end,\n", 0 },
		{ "on_sweep: shard:stats() on node:shards()",
		  "\ton_sweep = function(node)\n"
		  "\t\tlocal n = 0\n"
		  "\t\tfor _, shard in ipairs(node:shards()) do\n"
		  "\t\t\tn = n + shard:stats().memtable_rows\n"
		  "\t\tend\n"
		  "\t\treturn n\n"
		  "\tend,\n",
		  0 },
		{ "built-in default on_sweep", "", 0 },
	};
	enum { NV = sizeof(variants) / sizeof(variants[0]) };
	uint64_t shards = bench_env_u64("BENCH_POLICY_SHARDS", 1000);
	uint64_t interval_ms = bench_env_u64("BENCH_SWEEP_INTERVAL_MS", 10);
	uint64_t seconds = bench_env_u64("BENCH_SWEEP_SECONDS", 2);
	double per_sweep[NV];
	strata_options o;
	strata *db;
	char dir[4096], path[4200], err[1024], src[2048];
	uint64_t t0;
	int rc, failed = 0;

	if (shards == 0 || shards > 65536)
		bench_die("BENCH_POLICY_SHARDS must be 1..65536");
	if (interval_ms < 10 || interval_ms > 60000)
		bench_die("BENCH_SWEEP_INTERVAL_MS must be 10..60000 (a policy accepts 0.01 s and up)");
	if (seconds == 0 || seconds > 3600)
		bench_die("BENCH_SWEEP_SECONDS must be 1..3600");

	bench_mkdtemp("policy-sweep", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/policy.lua", dir);
	write_file(path, "return { flush_interval_s = 0, sweep_interval_s = 0, merge_after_generations = 0 }\n");
	strata_options_init(&o);
	o.dir = dir;
	o.shards = (uint32_t)shards;
	o.sync = STRATA_SYNC_NONE;
	o.wal_segment_bytes = 1 << 20;
	o.policy = path;
	t0 = bench_now_ns();
	rc = open_off_thread(&o, &db, err, sizeof(err));
	if (rc != 0)
		bench_die("strata_open %s (%" PRIu64 " shards): %s: %s", dir, shards, strata_strerror(rc), err);
	printf("\n-- sweep hook overhead: %" PRIu64 " shards (sync none, 1 MiB WAL segments, opened in %.2f s), "
	       "nothing appended,\n   sweep_interval_s = %.3f, flush timers off, %" PRIu64 " s per variant; "
	       "CPU = process CPU time over the window (the bench thread sleeps)\n",
	       shards, (double)(bench_now_ns() - t0) / 1e9, (double)interval_ms / 1e3, seconds);
	printf("  %-42s %6s %7s %8s %12s %12s %12s\n", "on_sweep", "fires", "sweeps", "sweeps/s", "cpu_ms/sweep",
	       "us/shard", "net_us/shard");

	for (int v = 0; v < NV && !failed; v++) {
		strata_policy_info i0, i1;
		double c0, c1, secs;
		uint64_t w0, w1, fires, runs;

		snprintf(src, sizeof(src),
			 "-- bench_policy sweep variant %d\n"
			 "return {\n"
			 "\tflush_interval_s = 0,\n"
			 "\tsweep_interval_s = %.3f,\n"
			 "\tmerge_after_generations = 0,\n"
			 "%s"
			 "}\n",
			 v, variants[v].off ? 0.0 : (double)interval_ms / 1e3, variants[v].hook);
		rc = strata_set_policy(db, src, strlen(src));
		if (rc != 0) {
			fprintf(stderr, "bench_policy: sweep variant '%s': %s\n", variants[v].name, strata_last_error());
			failed = 1;
			break;
		}
		usleep(100000); /* let the re-armed sweeper settle */
		if (strata_policy_info_get(db, &i0) != 0)
			bench_die("strata_policy_info_get: %s", strata_last_error());
		c0 = cpu_seconds();
		w0 = bench_now_ns();
		sleep_until(w0 + seconds * 1000000000ull);
		if (strata_policy_info_get(db, &i1) != 0)
			bench_die("strata_policy_info_get: %s", strata_last_error());
		c1 = cpu_seconds();
		w1 = bench_now_ns();
		secs = (double)(w1 - w0) / 1e9;
		fires = i1.sweeps - i0.sweeps;
		runs = i1.hook_runs - i0.hook_runs;
		if (i1.hook_errors != i0.hook_errors) {
			fprintf(stderr, "bench_policy: sweep variant '%s': %" PRIu64 " hook errors; last: %s\n",
				variants[v].name, i1.hook_errors - i0.hook_errors, i1.last_error);
			failed = 1;
		}
		if (variants[v].off) {
			per_sweep[v] = 0;
			printf("  %-42s %6" PRIu64 " %7" PRIu64 " %8.1f %12s %12s %12s   (idle CPU %.2f ms/s)\n",
			       variants[v].name, fires, runs, (double)runs / secs, "-", "-", "-",
			       (c1 - c0) * 1e3 / secs);
			continue;
		}
		per_sweep[v] = runs ? (c1 - c0) / (double)runs : 0;
		printf("  %-42s %6" PRIu64 " %7" PRIu64 " %8.1f %12.3f %12.3f ", variants[v].name, fires, runs,
		       (double)runs / secs, per_sweep[v] * 1e3, per_sweep[v] * 1e6 / (double)shards);
		if (v == 1)
			printf("%12s\n", "-");
		else
			printf("%12.3f\n", (per_sweep[v] - per_sweep[1]) * 1e6 / (double)shards);
	}
	if (!failed) {
		uint64_t gens = 0;

		for (uint32_t s = 0; s < shards; s++) {
			strata_stats st;

			if (strata_shard_stats(db, s, &st) == 0)
				gens += st.generations;
		}
		printf("  fires = sweeper timer expiries (strata_policy_info.sweeps); sweeps = runs started "
		       "(hook_runs; a fire is skipped while the previous sweep runs);\n"
		       "  net_us/shard = (cpu of the variant - cpu of the empty on_sweep) / shards; "
		       "generations left in the store: %" PRIu64 "\n", gens);
	}
	strata_close(db);
	bench_rmrf(dir);
	return failed;
}

int
main(void)
{
	int failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("== bench_policy: policy runtime costs, strata %s\n", STRATA_VERSION);
	bench_print_host(bench_base_dir());
	failed |= bench_reload();
	failed |= bench_sweep();
	if (failed)
		printf("bench_policy: the engine reported an error (see stderr); its figures are partial\n");
	return failed ? 1 : 0;
}
