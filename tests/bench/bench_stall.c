/*
 * bench_stall — durable append latency while a merge folds a backlog, strata beside
 * RocksDB in the same run.
 *
 * For each engine, in a fresh directory: load a backlog of BENCH_STALL_GENS
 * generations (strata) or L0 files (RocksDB) of BENCH_STALL_GEN_MB MiB of rows with a
 * 16-byte key and an incompressible BENCH_STALL_VALUE-byte value, sync the file
 * system, then measure one writer's capacity (1-row sync appends back to back for
 * BENCH_STALL_CAP_S seconds) and pace one writer at BENCH_STALL_PCT % of it. Every
 * append's latency is taken from its intended send time (start + i / rate), so a stall
 * counts for every append it delayed (coordinated omission corrected). The writer runs
 * BENCH_STALL_IDLE_S seconds idle, then while one merge folds the whole backlog
 * (strata: strata_prepare_merge + strata_commit_merge with merge_max_inputs = gens;
 * RocksDB: rocksdb_compact_range over everything); it stops when the merge returns and,
 * for strata, whose commit only queues the inputs' deletes for the background executor,
 * when those deletes are done. Prints p50/p99/p99.9/max per phase (strata's merge split
 * into prepare, which writes the run, and commit, which publishes it; then the deletes,
 * and the merge with its deletes), the merge's MB/s,
 * the during/idle ratios and strata/RocksDB, the CPU time the hypervisor took from the
 * machine in each phase (steal), and what the run was made of: engine
 * versions, sync mode, file system and its mount options. Asserts nothing about speed.
 *
 * Environment: BENCH_STALL_GENS (32), BENCH_STALL_GEN_MB (32), BENCH_STALL_VALUE (1024),
 * BENCH_STALL_IDLE_S (5), BENCH_STALL_PCT (40), BENCH_STALL_CAP_S (2), BENCH_STALL_RATE
 * (appends/s; unset = BENCH_STALL_PCT of the measured capacity: a fixed rate compares
 * runs on a machine whose capacity varies from run to run),
 * BENCH_STALL_SETTLE_S (3: seconds of quiet after the backlog is built and synced, and
 * after an engine's directory is removed),
 * BENCH_STALL_ENGINES ("strata,rocksdb"), BENCH_DIR (data directory), BENCH_STALL_IO_AUTO
 * (1: strata's background IO budget in its automatic mode, which backs off while the
 * WAL's syncs slow down; unset: unlimited), BENCH_STALL_IO_MIB (a fixed background IO
 * budget in MiB/s; unset or 0: unlimited);
 * experiments on strata's writeback: BENCH_STALL_BYTES_PER_SYNC (bytes; unset = the fs
 * store's default, 0 = off: the whole run is written back by its final fsync, as
 * before incremental writeback), BENCH_STALL_SFR (how the bench's env seam passes the
 * store's sync_file_range on: "wait_write" as asked, the default; "write" drops
 * SYNC_FILE_RANGE_WAIT_BEFORE; "wait_all" adds SYNC_FILE_RANGE_WAIT_AFTER);
 * BENCH_STALL_DELETE_RATE (strata's delete_bytes_per_s; unset = its default);
 * BENCH_STALL_DELETE_CHUNK (strata's delete_chunk_bytes; unset or 0 = its default);
 * BENCH_STALL_ROCKSDB_BYTES_PER_SYNC (RocksDB's bytes_per_sync; default 0, its own
 * default); BENCH_STALL_MERGE_IOPRIO (idle or be7: the IO priority of the thread that
 * runs strata's merge and so submits its writeback; unset = unchanged);
 * BENCH_STALL_MERGE_THREADS (strata's merge_threads, 1..64; unset or 0 = its default, half
 * the online CPUs up to 8);
 * BENCH_STALL_MERGE_NICE (0..19: the CPU nice value of that thread; 0 = unchanged);
 * BENCH_STALL_SAMPLES=FILE appends every sample to FILE (engine, phase, wall
 * clock seconds of the intended send, latency ms) to line stalls up with strace -tt. A quick run: BENCH_STALL_GENS=8 BENCH_STALL_GEN_MB=16.
 */
#include <inttypes.h>
#include <mntent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <rocksdb/c.h>

#include "../../node/lib/env.h"
#include "../../node/core/store.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "bench_util.h"

#ifndef BENCH_ROCKSDB_VERSION
#define BENCH_ROCKSDB_VERSION "(version unknown)"
#endif

enum { KEY_BYTES = 16, W_VALUE_BYTES = 200, LOAD_BATCH = 256, MAX_VALUE = 1 << 20 };

/** Which engine a run drives. */
enum engine { ENGINE_STRATA, ENGINE_ROCKSDB };

/** How the bench's sync_file_range seam passes the store's calls on. */
enum sfr_mode { SFR_WAIT_WRITE, SFR_WRITE, SFR_WAIT_ALL };

/** The workload, from the environment. */
struct workload {
	/** Generations / L0 files in the backlog. */
	uint64_t gens;
	/** Raw row bytes per generation. */
	uint64_t gen_bytes;
	/** Value bytes of a backlog row. */
	uint64_t value_bytes;
	/** Idle phase, seconds. */
	uint64_t idle_s;
	/** Capacity measurement, seconds. */
	uint64_t cap_s;
	/** Pace, percent of capacity. */
	uint64_t pct;
	/** Fixed pace, appends/s (0: pct of the measured capacity). */
	uint64_t rate;
	/** Seconds of quiet after a sync of the file system, before measuring. */
	uint64_t settle_s;
	/** strata bytes_per_sync to set; UINT64_MAX = leave the store's default. */
	uint64_t bytes_per_sync;
	/** RocksDB bytes_per_sync. */
	uint64_t rocksdb_bytes_per_sync;
	/** The seam's flags mode. */
	enum sfr_mode sfr;
	/** IO priority (ioprio_set value) of strata's merge thread; 0 = left as it is. */
	int merge_ioprio;
	/** CPU nice of strata's merge thread (setpriority on the thread); 0 = left as it is. */
	int merge_nice;
	/** strata's merge_threads (0: its default). */
	uint32_t merge_threads;
	/** strata's background IO budget in its automatic mode (BENCH_STALL_IO_AUTO=1). */
	int io_auto;
	/** strata's background IO budget in MiB/s (BENCH_STALL_IO_MIB; 0 = unlimited). */
	uint64_t io_mib;
	/** strata's delete_bytes_per_s (UINT64_MAX: its default). */
	uint64_t delete_rate;
	/** strata's delete_chunk_bytes (0: its default). */
	uint64_t delete_chunk;
};

/** One paced append: when it was meant to go and how long it took from then. */
struct sample {
	/** Intended send time, ns (monotonic). */
	uint64_t at;
	/** Completion minus intended send time, ns. */
	uint64_t lat;
};

/** The engine handles an append goes to. */
struct target {
	/** Engine. */
	enum engine engine;
	/** strata store. */
	strata *db;
	/** RocksDB handle. */
	rocksdb_t *rdb;
	/** RocksDB sync write options. */
	rocksdb_writeoptions_t *rwo;
};

/** The paced writer thread. */
struct writer {
	/** Thread handle. */
	pthread_t thread;
	/** Where appends go. */
	struct target *t;
	/** Appends per second (0: back to back, for the capacity measurement). */
	double rate;
	/** Stop once the next intended send time is at or after this (ns). */
	_Atomic uint64_t stop_at;
	/** Samples taken. */
	struct sample *s;
	/** Samples used. */
	size_t n;
	/** Samples allocated. */
	size_t cap;
	/** Error message, empty if none. */
	char error[512];
};

/** Figures of one phase. */
struct phase {
	/** Samples. */
	uint64_t n;
	/** Percentiles and max, ms. */
	double p50, p99, p999, max;
	/** CPU time the hypervisor took from this machine's CPUs during the phase (steal in
	 *  /proc/stat, summed over CPUs), ms: a VM held over its host's CPU quota is frozen
	 *  whole, every thread at once, whatever the engine does. */
	double steal_ms;
};

/** Steal time of all CPUs so far, ms (0 where /proc/stat has no steal column). */
static double
steal_now_ms(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	if (f == NULL)
		return 0;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		       &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	return n == 8 ? (double)v[7] * 1000.0 / (double)sysconf(_SC_CLK_TCK) : 0;
}

/** Counters of the bench's env seams (strata runs only). */
static struct {
	/** sync_file_range calls. */
	atomic_uint_fast64_t sfr_calls;
	/** Total ns in sync_file_range. */
	atomic_uint_fast64_t sfr_ns;
	/** Longest sync_file_range, ns. */
	atomic_uint_fast64_t sfr_max;
	/** Longest fsync (run files, directories, manifests), ns. */
	atomic_uint_fast64_t fsync_max;
	/** Longest fdatasync (the WAL), ns. */
	atomic_uint_fast64_t fdatasync_max;
	/** Longest unlink, ns. */
	atomic_uint_fast64_t unlink_max;
	/** fdatasync calls over 10 ms. */
	atomic_uint_fast64_t fdatasync_slow;
} seam;

static struct env_ops bench_env;
static struct workload WL;

/** Most slow seam calls kept for BENCH_STALL_SAMPLES. */
#define SLOW_MAX 65536

/** Seam calls over 5 ms (strata runs), for BENCH_STALL_SAMPLES. */
static struct {
	/** Guards the arrays. */
	pthread_mutex_t mu;
	/** Calls kept. */
	size_t n;
	/** Per call: name of the seam, start (monotonic ns), duration (ns). */
	const char *what[SLOW_MAX];
	uint64_t at[SLOW_MAX];
	uint64_t ns[SLOW_MAX];
} slow = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void
slow_note(const char *what, uint64_t t0, uint64_t d)
{
	if (d < 5000000ull)
		return;
	pthread_mutex_lock(&slow.mu);
	if (slow.n < SLOW_MAX) {
		slow.what[slow.n] = what;
		slow.at[slow.n] = t0;
		slow.ns[slow.n] = d;
		slow.n++;
	}
	pthread_mutex_unlock(&slow.mu);
}

static void
atomic_max(atomic_uint_fast64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load(a);

	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static void
seam_reset(void)
{
	atomic_store(&seam.sfr_calls, 0);
	atomic_store(&seam.sfr_ns, 0);
	atomic_store(&seam.sfr_max, 0);
	atomic_store(&seam.fsync_max, 0);
	atomic_store(&seam.fdatasync_max, 0);
	atomic_store(&seam.unlink_max, 0);
	atomic_store(&seam.fdatasync_slow, 0);
}

static int
seam_sfr(int fd, off_t off, off_t n, unsigned int flags)
{
	uint64_t t0 = bench_now_ns(), d;
	int r;

	if (WL.sfr == SFR_WRITE)
		flags &= ~(unsigned)SYNC_FILE_RANGE_WAIT_BEFORE;
	else if (WL.sfr == SFR_WAIT_ALL)
		flags |= SYNC_FILE_RANGE_WAIT_AFTER;
	r = sync_file_range(fd, off, n, flags);
	d = bench_now_ns() - t0;
	atomic_fetch_add(&seam.sfr_calls, 1);
	atomic_fetch_add(&seam.sfr_ns, d);
	atomic_max(&seam.sfr_max, d);
	slow_note("sync_file_range", t0, d);
	return r;
}

static int
seam_fsync(int fd)
{
	uint64_t t0 = bench_now_ns();
	int r = fsync(fd);

	atomic_max(&seam.fsync_max, bench_now_ns() - t0);
	slow_note("fsync", t0, bench_now_ns() - t0);
	return r;
}

static int
seam_fdatasync(int fd)
{
	uint64_t t0 = bench_now_ns(), d;
	int r = fdatasync(fd);

	d = bench_now_ns() - t0;
	atomic_max(&seam.fdatasync_max, d);
	slow_note("fdatasync", t0, d);
	if (d > 10000000ull)
		atomic_fetch_add(&seam.fdatasync_slow, 1);
	return r;
}

static int
seam_unlink(const char *path)
{
	uint64_t t0 = bench_now_ns();
	int r = unlink(path);

	atomic_max(&seam.unlink_max, bench_now_ns() - t0);
	slow_note("unlink", t0, bench_now_ns() - t0);
	return r;
}

static ssize_t
seam_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	uint64_t t0 = bench_now_ns();
	ssize_t r = pwrite(fd, buf, n, off);

	slow_note("pwrite", t0, bench_now_ns() - t0);
	return r;
}

/** The fs object store, with the bench's bytes_per_sync when one is set. */
static int
seam_objstore_new(const char *dir, struct objstore **out)
{
	int rc = objstore_fs_new(dir, out);

	if (rc == 0 && WL.bytes_per_sync != UINT64_MAX) {
		rc = objstore_fs_set_bytes_per_sync(*out, WL.bytes_per_sync);
		if (rc != 0) {
			objstore_destroy(*out);
			*out = NULL;
		}
	}
	return rc;
}

/* ---- the paced writer ------------------------------------------------------ */

static int
target_append(struct target *t, const uint8_t *key, const uint8_t *val, char *err, size_t errcap)
{
	if (t->engine == ENGINE_STRATA) {
		strata_row r = { key, KEY_BYTES, val, W_VALUE_BYTES };
		int rc = strata_append(t->db, 0, &r, 1);

		if (rc != 0)
			snprintf(err, errcap, "strata_append: %s: %s", strata_strerror(rc),
				 strata_last_error());
		return rc;
	} else {
		char *e = NULL;

		rocksdb_put(t->rdb, t->rwo, (const char *)key, KEY_BYTES, (const char *)val,
			    W_VALUE_BYTES, &e);
		if (e != NULL) {
			snprintf(err, errcap, "rocksdb_put: %s", e);
			rocksdb_free(e);
			return -1;
		}
		return 0;
	}
}

static void
sleep_until(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	struct bench_rng rng = { .s = 0x2545F4914F6CDD1Dull ^ bench_now_ns() };
	uint8_t key[KEY_BYTES], val[W_VALUE_BYTES];
	uint64_t t0 = bench_now_ns(), i = 0;
	double period = w->rate > 0 ? 1e9 / w->rate : 0;

	for (;;) {
		uint64_t at = w->rate > 0 ? t0 + (uint64_t)((double)i * period) : bench_now_ns();

		if (at >= atomic_load(&w->stop_at))
			break;
		if (w->rate > 0 && bench_now_ns() < at)
			sleep_until(at);
		for (int b = 0; b < KEY_BYTES; b += 8) {
			uint64_t r = bench_rng_next(&rng);

			memcpy(key + b, &r, 8);
		}
		for (int b = 0; b + 8 <= W_VALUE_BYTES; b += 8) {
			uint64_t r = bench_rng_next(&rng);

			memcpy(val + b, &r, 8);
		}
		if (target_append(w->t, key, val, w->error, sizeof(w->error)) != 0)
			break;
		if (w->n == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 65536;
			struct sample *s = realloc(w->s, cap * sizeof(*s));

			if (s == NULL) {
				snprintf(w->error, sizeof(w->error), "out of memory for samples");
				break;
			}
			w->s = s;
			w->cap = cap;
		}
		w->s[w->n].at = at;
		w->s[w->n].lat = bench_now_ns() - at;
		w->n++;
		i++;
	}
	return NULL;
}

static void
writer_start(struct writer *w, struct target *t, double rate, uint64_t stop_at)
{
	memset(w, 0, sizeof(*w));
	w->t = t;
	w->rate = rate;
	atomic_store(&w->stop_at, stop_at);
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
		bench_die("pthread_create failed");
}

/** Figures of the samples whose intended time is in [from, to). */
static struct phase
phase_of(const struct writer *w, uint64_t from, uint64_t to)
{
	struct bench_hist *h = calloc(1, sizeof(*h));
	struct phase p = { 0 };
	uint64_t max = 0;

	if (h == NULL)
		bench_die("out of memory");
	for (size_t i = 0; i < w->n; i++) {
		if (w->s[i].at < from || w->s[i].at >= to)
			continue;
		bench_hist_add(h, w->s[i].lat);
		if (w->s[i].lat > max)
			max = w->s[i].lat;
	}
	p.n = h->total;
	p.p50 = (double)bench_hist_quantile(h, 0.50) / 1e6;
	p.p99 = (double)bench_hist_quantile(h, 0.99) / 1e6;
	p.p999 = (double)bench_hist_quantile(h, 0.999) / 1e6;
	p.max = (double)max / 1e6;
	/* A quantile is its bucket's midpoint: never report one above the largest sample. */
	p.p50 = p.p50 > p.max ? p.max : p.p50;
	p.p99 = p.p99 > p.max ? p.max : p.p99;
	p.p999 = p.p999 > p.max ? p.max : p.p999;
	free(h);
	return p;
}

/** BENCH_STALL_SAMPLES=FILE: append every sample as "engine phase wall_s latency_ms" (wall
 *  clock, to line them up with strace -tt), and every seam call of strata's over 5 ms as
 *  "seam NAME wall_s duration_ms". */
static void
dump_samples(enum engine engine, const struct writer *w, uint64_t t0, uint64_t t_prep,
	     uint64_t t_end)
{
	const char *path = getenv("BENCH_STALL_SAMPLES");
	struct timespec rt;
	FILE *f;

	if (path == NULL || *path == '\0')
		return;
	f = fopen(path, "a");
	if (f == NULL)
		bench_die("open %s: %s", path, strerror(errno));
	clock_gettime(CLOCK_REALTIME, &rt);
	double off = (double)rt.tv_sec + (double)rt.tv_nsec / 1e9 - (double)bench_now_ns() / 1e9;
	for (size_t i = 0; i < w->n; i++) {
		const struct sample *s = &w->s[i];
		const char *ph = s->at < t0 ? "idle" : s->at < t_prep ? "prepare" : s->at < t_end
			? "commit" : "deletes";

		fprintf(f, "%s %s %.6f %.3f\n", engine == ENGINE_STRATA ? "strata" : "rocksdb", ph,
			off + (double)s->at / 1e9, (double)s->lat / 1e6);
	}
	pthread_mutex_lock(&slow.mu);
	for (size_t i = 0; engine == ENGINE_STRATA && i < slow.n; i++)
		fprintf(f, "seam %s %.6f %.3f\n", slow.what[i], off + (double)slow.at[i] / 1e9,
			(double)slow.ns[i] / 1e6);
	slow.n = 0;
	pthread_mutex_unlock(&slow.mu);
	fclose(f);
}

/* ---- the backlog ----------------------------------------------------------- */

/** Append rows of random keys and incompressible values, sealing every gen_bytes. */
static int
load_backlog(struct target *t, char *err, size_t errcap)
{
	uint8_t *keys = malloc((size_t)LOAD_BATCH * KEY_BYTES);
	uint8_t *vals = malloc((size_t)LOAD_BATCH * WL.value_bytes + 8);
	strata_row rows[LOAD_BATCH] = {0};
	struct bench_rng rng = { .s = 0x9E3779B97F4A7C15ull };
	rocksdb_writeoptions_t *nowal = NULL;
	rocksdb_writebatch_t *wb = NULL;
	int rc = 0;

	if (keys == NULL || vals == NULL)
		bench_die("out of memory");
	if (t->engine == ENGINE_ROCKSDB) {
		nowal = rocksdb_writeoptions_create();
		rocksdb_writeoptions_disable_WAL(nowal, 1);
		wb = rocksdb_writebatch_create();
	}
	for (uint64_t g = 0; g < WL.gens && rc == 0; g++) {
		uint64_t since = 0;

		while (since < WL.gen_bytes && rc == 0) {
			size_t n = 0;

			for (size_t b = 0; b < (size_t)LOAD_BATCH * WL.value_bytes; b += 8) {
				uint64_t r = bench_rng_next(&rng);

				memcpy(vals + b, &r, 8);
			}
			while (n < LOAD_BATCH && since < WL.gen_bytes) {
				uint8_t *k = keys + n * KEY_BYTES;

				for (int b = 0; b < KEY_BYTES; b += 8) {
					uint64_t r = bench_rng_next(&rng);

					memcpy(k + b, &r, 8);
				}
				rows[n].key = k;
				rows[n].key_len = KEY_BYTES;
				rows[n].value = vals + n * WL.value_bytes;
				rows[n].value_len = WL.value_bytes;
				since += KEY_BYTES + WL.value_bytes;
				n++;
			}
			if (t->engine == ENGINE_STRATA) {
				rc = strata_append(t->db, 0, rows, n);
				if (rc != 0)
					snprintf(err, errcap, "strata_append: %s: %s",
						 strata_strerror(rc), strata_last_error());
			} else {
				char *e = NULL;

				rocksdb_writebatch_clear(wb);
				for (size_t i = 0; i < n; i++)
					rocksdb_writebatch_put(wb, rows[i].key, rows[i].key_len,
							       rows[i].value, rows[i].value_len);
				rocksdb_write(t->rdb, nowal, wb, &e);
				if (e != NULL) {
					snprintf(err, errcap, "rocksdb_write: %s", e);
					rocksdb_free(e);
					rc = -1;
				}
			}
		}
		if (rc != 0)
			break;
		if (t->engine == ENGINE_STRATA) {
			rc = strata_seal(t->db, 0);
			if (rc != 0)
				snprintf(err, errcap, "strata_seal: %s: %s", strata_strerror(rc),
					 strata_last_error());
		} else {
			rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
			char *e = NULL;

			rocksdb_flushoptions_set_wait(fo, 1);
			rocksdb_flush(t->rdb, fo, &e);
			rocksdb_flushoptions_destroy(fo);
			if (e != NULL) {
				snprintf(err, errcap, "rocksdb_flush: %s", e);
				rocksdb_free(e);
				rc = -1;
			}
		}
	}
	if (wb != NULL)
		rocksdb_writebatch_destroy(wb);
	if (nowal != NULL)
		rocksdb_writeoptions_destroy(nowal);
	free(keys);
	free(vals);
	return rc;
}

/** Write back everything dirty on dir's file system, so the idle phase starts clean. */
static void
sync_fs(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
}

/* ---- engines --------------------------------------------------------------- */

static rocksdb_options_t *
rdb_options(void)
{
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();

	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_disable_auto_compactions(o, 1);
	rocksdb_options_set_write_buffer_size(o, (size_t)(WL.gen_bytes * 2 + (64u << 20)));
	rocksdb_options_set_level0_slowdown_writes_trigger(o, 1000);
	rocksdb_options_set_level0_stop_writes_trigger(o, 1000);
	rocksdb_options_set_compression(o, rocksdb_zstd_compression);
	rocksdb_options_set_compression_options(o, -14, 1, 0, 0);
	rocksdb_options_set_bytes_per_sync(o, WL.rocksdb_bytes_per_sync);
	rocksdb_block_based_options_set_block_size(t, 64u << 10);
	rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom(10));
	rocksdb_options_set_block_based_table_factory(o, t);
	rocksdb_block_based_options_destroy(t);
	return o;
}

static uint64_t
rdb_prop(rocksdb_t *db, const char *name)
{
	uint64_t v = 0;
	char *s;

	if (rocksdb_property_int(db, name, &v) == 0)
		return v;
	s = rocksdb_property_value(db, name);
	if (s == NULL)
		return 0;
	v = strtoull(s, NULL, 10);
	rocksdb_free(s);
	return v;
}

/** What one engine's run measured. */
struct result {
	/** It ran to the end. */
	int ok;
	/** Appends/s back to back, and the paced rate. */
	double capacity, rate;
	/** Phases: idle, whole merge, prepare, commit (strata), the deletes of the merged
	 *  generations after the commit (strata), and the merge with its deletes. */
	struct phase idle, merge, prepare, commit, deletes, whole;
	/** Merge seconds, its prepare part, and the deletes' seconds after the commit. */
	double merge_s, prepare_s, deletes_s;
	/** Bytes the deletes after the commit removed. */
	uint64_t deleted_bytes;
	/** strata: stalls the automatic budget halved at during the merge, and its rate
	 *  when the merge ended (bytes/s, 0 = unlimited). */
	uint64_t io_stalls, io_rate_end;
	/** Input bytes of the merge. */
	uint64_t bytes_in;
	/** Generations / L0 files folded. */
	uint64_t inputs;
	/** Backlog build seconds. */
	double load_s;
};

static int
run_engine(enum engine engine, struct result *res)
{
	struct target t = { .engine = engine };
	rocksdb_options_t *ropt = NULL;
	struct writer w;
	char dir[4096], err[512] = "";
	uint64_t t0, t_prep, t_end, t_reaped;
	int rc;

	memset(res, 0, sizeof(*res));
	bench_mkdtemp(engine == ENGINE_STRATA ? "stall-strata" : "stall-rocksdb", dir, sizeof(dir));
	t0 = bench_now_ns();
	if (engine == ENGINE_STRATA) {
		strata_options o;

		/* Build with sync=none, then reopen with sync=fsync for the measurement. */
		strata_options_init(&o);
		o.dir = dir;
		o.shards = 1;
		o.sync = STRATA_SYNC_NONE;
		o.env_ops = &bench_env;
		if ((rc = strata_open(&o, &t.db)) != 0)
			bench_die("strata_open %s: %s: %s", dir, strata_strerror(rc), strata_last_error());
		rc = load_backlog(&t, err, sizeof(err));
		strata_close(t.db);
		t.db = NULL;
		if (rc != 0)
			goto fail;
		o.sync = STRATA_SYNC_FSYNC;
		o.background_io_auto = WL.io_auto;
		o.background_io_bytes_per_s = WL.io_mib << 20;
		if (WL.delete_rate != UINT64_MAX)
			o.delete_bytes_per_s = WL.delete_rate;
		if (WL.delete_chunk != 0)
			o.delete_chunk_bytes = WL.delete_chunk;
		o.merge_max_inputs = (uint32_t)(WL.gens < 2 ? 2 : WL.gens);
		o.merge_threads = WL.merge_threads;
		if ((rc = strata_open(&o, &t.db)) != 0) {
			snprintf(err, sizeof(err), "strata_open %.300s: %s: %.150s", dir, strata_strerror(rc),
				 strata_last_error());
			goto fail;
		}
		strata_stats st;
		if (strata_shard_stats(t.db, 0, &st) == 0)
			printf("strata: the merge runs on %" PRIu64 " thread%s (merge_threads; "
			       "BENCH_STALL_MERGE_THREADS)\n", (uint64_t)st.merge_threads,
			       st.merge_threads == 1 ? "" : "s");
	} else {
		char *e = NULL;

		ropt = rdb_options();
		t.rdb = rocksdb_open(ropt, dir, &e);
		if (e != NULL)
			bench_die("rocksdb_open %s: %s", dir, e);
		t.rwo = rocksdb_writeoptions_create();
		rocksdb_writeoptions_set_sync(t.rwo, 1);
		if (load_backlog(&t, err, sizeof(err)) != 0)
			goto fail;
	}
	res->load_s = (double)(bench_now_ns() - t0) / 1e9;
	sync_fs(dir);
	sleep((unsigned)WL.settle_s);

	/* Capacity: back to back. */
	writer_start(&w, &t, 0, UINT64_MAX);
	usleep((useconds_t)(WL.cap_s * 1000000));
	atomic_store(&w.stop_at, 0);
	pthread_join(w.thread, NULL);
	if (w.error[0] != '\0') {
		snprintf(err, sizeof(err), "%s", w.error);
		free(w.s);
		goto fail;
	}
	res->capacity = (double)w.n / (double)WL.cap_s;
	res->rate = WL.rate != 0 ? (double)WL.rate : res->capacity * (double)WL.pct / 100.0;
	free(w.s);
	if (res->rate < 1)
		res->rate = 1;

	/* Idle, then the merge. */
	if (engine == ENGINE_STRATA)
		seam_reset();
	double st_idle = steal_now_ms();
	writer_start(&w, &t, res->rate, UINT64_MAX);
	usleep((useconds_t)(WL.idle_s * 1000000));
	t0 = bench_now_ns();
	double st0 = steal_now_ms(), st_prep = 0, st_end = 0;
	if (engine == ENGINE_STRATA) {
		strata_stats before, after;
		strata_plan *plan = NULL;

		strata_shard_stats(t.db, 0, &before);
		seam_reset();
		/* This thread runs the merge (and submits its writeback): its IO priority is
		 * that of the run's writes. */
		long old_prio = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
		if (WL.merge_ioprio != 0 && syscall(SYS_ioprio_set, 1, 0, WL.merge_ioprio) != 0)
			bench_die("ioprio_set: %s", strerror(errno));
		pid_t tid = (pid_t)syscall(SYS_gettid);
		errno = 0;
		int old_nice = getpriority(PRIO_PROCESS, (id_t)tid);
		if (WL.merge_nice != 0 && setpriority(PRIO_PROCESS, (id_t)tid, WL.merge_nice) != 0)
			bench_die("setpriority: %s", strerror(errno));
		rc = strata_prepare_merge(t.db, 0, 0, &plan);
		t_prep = bench_now_ns();
		st_prep = steal_now_ms();
		if (rc == 0)
			rc = strata_commit_merge(t.db, plan);
		t_end = bench_now_ns();
		st_end = steal_now_ms();
		if (WL.merge_ioprio != 0 && old_prio >= 0)
			syscall(SYS_ioprio_set, 1, 0, (int)old_prio);
		if (WL.merge_nice != 0 && setpriority(PRIO_PROCESS, (id_t)tid, old_nice) != 0)
			fprintf(stderr, "bench_stall: cannot restore the nice value: %s\n", strerror(errno));
		if (rc != 0)
			snprintf(err, sizeof(err), "strata merge: %s: %s", strata_strerror(rc),
				 strata_last_error());
		strata_shard_stats(t.db, 0, &after);
		res->bytes_in = after.merge_bytes_in - before.merge_bytes_in;
		res->io_stalls = after.background_io_stalls - before.background_io_stalls;
		res->io_rate_end = after.background_io_bytes_per_s;
		res->inputs = after.merged_generations - before.merged_generations;
		/* The commit only queues the merged generations' deletes. This handle has no
		 * policy runtime, so this thread runs them, as strata_merge does after its
		 * commit (a node's background executor runs the same reaper at the same
		 * delete_bytes_per_s); the writer keeps going until they are done, so their
		 * cost to appends is measured too. */
		uint64_t left = 0, del0 = 0, del1 = 0;
		store_reaper_stats(strata_store(t.db), NULL, NULL, NULL, &del0);
		if (rc == 0)
			left = store_reap(strata_store(t.db), UINT64_MAX);
		t_reaped = bench_now_ns();
		store_reaper_stats(strata_store(t.db), NULL, NULL, NULL, &del1);
		if (rc == 0 && left != 0)
			snprintf(err, sizeof(err), "strata: %" PRIu64 " deletes still queued after the "
				 "reaper ran", left);
		res->deleted_bytes = del1 - del0;
	} else {
		res->bytes_in = rdb_prop(t.rdb, "rocksdb.total-sst-files-size");
		res->inputs = rdb_prop(t.rdb, "rocksdb.num-files-at-level0");
		/* RocksDB deletes the compacted inputs itself before CompactRange returns
		 * (no DeleteScheduler configured): they are inside the merge's window. */
		rocksdb_compact_range(t.rdb, NULL, 0, NULL, 0);
		t_prep = t_end = t_reaped = bench_now_ns();
		st_prep = st_end = steal_now_ms();
		rc = 0;
	}
	double st_reaped = steal_now_ms();
	atomic_store(&w.stop_at, t_reaped);
	pthread_join(w.thread, NULL);
	if (w.error[0] != '\0' && err[0] == '\0')
		snprintf(err, sizeof(err), "%s", w.error);
	res->idle = phase_of(&w, 0, t0);
	res->merge = phase_of(&w, t0, t_end);
	res->prepare = phase_of(&w, t0, t_prep);
	res->commit = phase_of(&w, t_prep, t_end);
	res->deletes = phase_of(&w, t_end, t_reaped);
	res->whole = phase_of(&w, t0, t_reaped);
	res->idle.steal_ms = st0 - st_idle;
	res->merge.steal_ms = st_end - st0;
	res->prepare.steal_ms = st_prep - st0;
	res->commit.steal_ms = st_end - st_prep;
	res->deletes.steal_ms = st_reaped - st_end;
	res->whole.steal_ms = st_reaped - st0;
	res->merge_s = (double)(t_end - t0) / 1e9;
	res->prepare_s = (double)(t_prep - t0) / 1e9;
	res->deletes_s = (double)(t_reaped - t_end) / 1e9;
	dump_samples(engine, &w, t0, t_prep, t_end);
	free(w.s);
	if (err[0] != '\0')
		goto fail;
	res->ok = 1;
fail:
	if (t.db != NULL)
		strata_close(t.db);
	if (t.rdb != NULL) {
		rocksdb_writeoptions_destroy(t.rwo);
		rocksdb_close(t.rdb);
		rocksdb_options_destroy(ropt);
	}
	if (err[0] != '\0')
		fprintf(stderr, "bench_stall: %s: %s\n", engine == ENGINE_STRATA ? "strata" : "rocksdb",
			err);
	/* The next engine starts on a quiet disk: the deletes' journal commits (and their
	 * discards, on a file system mounted with discard) are done. */
	bench_rmrf(dir);
	sync_fs(bench_base_dir());
	sleep((unsigned)WL.settle_s);
	return res->ok ? 0 : 1;
}

/* ---- report ---------------------------------------------------------------- */

/** Mount options of the file system holding path (longest matching mount point). */
static void
mount_options(const char *path, char *out, size_t cap)
{
	char real[4096];
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	size_t best = 0;

	snprintf(out, cap, "unknown");
	if (f == NULL || realpath(path, real) == NULL) {
		if (f != NULL)
			endmntent(f);
		return;
	}
	while ((m = getmntent(f)) != NULL) {
		size_t l = strlen(m->mnt_dir);

		if (strncmp(real, m->mnt_dir, l) != 0 || (real[l] != '/' && real[l] != '\0' && l > 1))
			continue;
		if (l >= best) {
			best = l;
			snprintf(out, cap, "%s on %s type %s (%s)", m->mnt_fsname, m->mnt_dir,
				 m->mnt_type, m->mnt_opts);
		}
	}
	endmntent(f);
}

static void
print_phase(const char *engine, const char *name, const struct phase *p, double secs, double mbs)
{
	char s[32] = "", m[32] = "";

	if (secs >= 0)
		snprintf(s, sizeof(s), "%.1f", secs);
	if (mbs >= 0)
		snprintf(m, sizeof(m), "%.0f", mbs);
	printf("%-8s %-9s %8" PRIu64 " %9.2f %9.2f %9.2f %9.2f %7s %6s %8.0f\n", engine, name, p->n,
	       p->p50, p->p99, p->p999, p->max, s, m, p->steal_ms);
}

static void
print_result(const char *engine, const struct result *r, int split)
{
	if (!r->ok) {
		printf("%-8s failed (see stderr)\n", engine);
		return;
	}
	print_phase(engine, "idle", &r->idle, (double)WL.idle_s, -1);
	print_phase(engine, "merge", &r->merge, r->merge_s,
		    r->merge_s > 0 ? (double)r->bytes_in / 1e6 / r->merge_s : 0);
	if (split) {
		print_phase(engine, " prepare", &r->prepare, r->prepare_s, -1);
		print_phase(engine, " commit", &r->commit, r->merge_s - r->prepare_s, -1);
		print_phase(engine, "deletes", &r->deletes, r->deletes_s,
			    r->deletes_s > 0 ? (double)r->deleted_bytes / 1e6 / r->deletes_s : -1);
		print_phase(engine, "merge+del", &r->whole, r->merge_s + r->deletes_s, -1);
	}
}

static double
ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

int
main(void)
{
	const char *engines = getenv("BENCH_STALL_ENGINES");
	const char *sfr = getenv("BENCH_STALL_SFR");
	const char *bps = getenv("BENCH_STALL_BYTES_PER_SYNC");
	const char *prio = getenv("BENCH_STALL_MERGE_IOPRIO");
	int with_strata = 1, with_rocks = 1, failed = 0;
	struct result rs, rr;
	char mnt[1024], bps_s[64], del_s[64], io_s[64];
	uint64_t need;

	WL.gens = bench_env_u64("BENCH_STALL_GENS", 32);
	WL.gen_bytes = bench_env_u64("BENCH_STALL_GEN_MB", 32) << 20;
	WL.value_bytes = bench_env_u64("BENCH_STALL_VALUE", 1024);
	WL.idle_s = bench_env_u64("BENCH_STALL_IDLE_S", 5);
	WL.cap_s = bench_env_u64("BENCH_STALL_CAP_S", 2);
	WL.pct = bench_env_u64("BENCH_STALL_PCT", 40);
	WL.settle_s = bench_env_u64("BENCH_STALL_SETTLE_S", 3);
	WL.rate = bench_env_u64("BENCH_STALL_RATE", 0);
	WL.io_auto = (int)bench_env_u64("BENCH_STALL_IO_AUTO", 0);
	WL.io_mib = bench_env_u64("BENCH_STALL_IO_MIB", 0);
	WL.merge_nice = (int)bench_env_u64("BENCH_STALL_MERGE_NICE", 0);
	WL.merge_threads = (uint32_t)bench_env_u64("BENCH_STALL_MERGE_THREADS", 0);
	if (WL.merge_threads > 64)
		bench_die("BENCH_STALL_MERGE_THREADS must be 0..64");
	if (WL.merge_nice > 19)
		bench_die("BENCH_STALL_MERGE_NICE must be 0..19");
	WL.delete_rate = bench_env_u64("BENCH_STALL_DELETE_RATE", UINT64_MAX);
	WL.delete_chunk = bench_env_u64("BENCH_STALL_DELETE_CHUNK", 0);
	WL.bytes_per_sync = bps != NULL && *bps != '\0' ? bench_env_u64("BENCH_STALL_BYTES_PER_SYNC", 0)
						    : UINT64_MAX;
	WL.rocksdb_bytes_per_sync = bench_env_u64("BENCH_STALL_ROCKSDB_BYTES_PER_SYNC", 0);
	WL.sfr = SFR_WAIT_WRITE;
	if (sfr != NULL && *sfr != '\0') {
		if (strcmp(sfr, "write") == 0)
			WL.sfr = SFR_WRITE;
		else if (strcmp(sfr, "wait_all") == 0)
			WL.sfr = SFR_WAIT_ALL;
		else if (strcmp(sfr, "wait_write") != 0)
			bench_die("BENCH_STALL_SFR=%s is not one of wait_write, write, wait_all", sfr);
	}
	if (prio != NULL && *prio != '\0') {
		if (strcmp(prio, "idle") == 0)
			WL.merge_ioprio = 3 << 13;
		else if (strcmp(prio, "be7") == 0)
			WL.merge_ioprio = (2 << 13) | 7;
		else
			bench_die("BENCH_STALL_MERGE_IOPRIO=%s is not one of idle, be7", prio);
	}
	if (WL.gens == 0 || WL.gens > 1000 || WL.gen_bytes == 0)
		bench_die("BENCH_STALL_GENS must be 1..1000 and BENCH_STALL_GEN_MB at least 1");
	if (WL.value_bytes < 8 || WL.value_bytes > MAX_VALUE)
		bench_die("BENCH_STALL_VALUE must be 8..%d", MAX_VALUE);
	if (WL.pct == 0 || WL.pct > 100 || WL.cap_s == 0 || WL.idle_s == 0)
		bench_die("BENCH_STALL_PCT must be 1..100, BENCH_STALL_CAP_S and _IDLE_S at least 1");
	if (engines != NULL && *engines != '\0') {
		with_strata = strstr(engines, "strata") != NULL;
		with_rocks = strstr(engines, "rocksdb") != NULL;
		if (!with_strata && !with_rocks)
			bench_die("BENCH_STALL_ENGINES=%s names neither strata nor rocksdb", engines);
	}
	bench_env = env_default;
	bench_env.objstore_new = seam_objstore_new;
	bench_env.sync_file_range = seam_sfr;
	bench_env.fsync = seam_fsync;
	bench_env.fdatasync = seam_fdatasync;
	bench_env.unlink = seam_unlink;
	bench_env.pwrite = seam_pwrite;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("== bench_stall: sync appends while a merge folds a backlog, strata %s vs RocksDB %s\n",
	       STRATA_VERSION, BENCH_ROCKSDB_VERSION);
	bench_print_host(bench_base_dir());
	mount_options(bench_base_dir(), mnt, sizeof(mnt));
	printf("file system: %s\n", mnt);
	if (WL.bytes_per_sync == UINT64_MAX)
		snprintf(bps_s, sizeof(bps_s), "the fs store's default (1 MiB)");
	else if (WL.bytes_per_sync == 0)
		snprintf(bps_s, sizeof(bps_s), "0 (off: one fsync of the whole run)");
	else
		snprintf(bps_s, sizeof(bps_s), "%" PRIu64 " bytes", WL.bytes_per_sync);
	if (WL.delete_rate == UINT64_MAX)
		snprintf(del_s, sizeof(del_s), "the default (256 MiB/s)");
	else if (WL.delete_rate == 0)
		snprintf(del_s, sizeof(del_s), "0 (unlimited)");
	else
		snprintf(del_s, sizeof(del_s), "%" PRIu64 " bytes/s", WL.delete_rate);
	if (WL.io_mib == 0)
		snprintf(io_s, sizeof(io_s), "unlimited");
	else
		snprintf(io_s, sizeof(io_s), "%" PRIu64 " MiB/s (BENCH_STALL_IO_MIB)", WL.io_mib);
	printf("backlog: %" PRIu64 " generations / L0 files of %" PRIu64 " MiB of raw rows "
	       "(16-byte random keys, %" PRIu64 "-byte incompressible values), %.2f GiB\n",
	       WL.gens, WL.gen_bytes >> 20, WL.value_bytes,
	       (double)(WL.gens * WL.gen_bytes) / (1u << 30));
	if (WL.rate != 0)
		printf("writer : paced at a fixed %" PRIu64 " appends/s (BENCH_STALL_RATE), not "
		       "at a share of the measured capacity\n", WL.rate);
	printf("writer : 1 thread, 1-row appends (16-byte key, %d-byte value), paced at %" PRIu64
	       "%% of its back-to-back rate over %" PRIu64 " s; latency from the intended send time "
	       "(coordinated omission corrected); %" PRIu64 " s idle, then until the merge returns "
	       "(strata: and its inputs are deleted); "
	       "the backlog is synced (syncfs) and the disk left quiet %" PRIu64 " s first\n",
	       W_VALUE_BYTES, WL.pct, WL.cap_s, WL.idle_s, WL.settle_s);
	printf("strata : 1 shard, sync=STRATA_SYNC_FSYNC (ack after fdatasync), merge_max_inputs=%"
	       PRIu64 ", one strata_prepare_merge + strata_commit_merge of everything; "
	       "bytes_per_sync %s, sync_file_range flags %s, merge thread IO priority %s, nice %d, "
	       "background IO budget %s, delete_bytes_per_s %s in steps of %" PRIu64 " KiB\n",
	       WL.gens < 2 ? 2 : WL.gens, bps_s,
	       WL.sfr == SFR_WRITE ? "WRITE" : WL.sfr == SFR_WAIT_ALL ? "WAIT_BEFORE|WRITE|WAIT_AFTER"
								     : "WAIT_BEFORE|WRITE",
	       prio != NULL && *prio != '\0' ? prio : "unchanged", WL.merge_nice,
	       WL.io_auto ? "automatic (BENCH_STALL_IO_AUTO=1)" : io_s, del_s,
	       (WL.delete_chunk != 0 ? WL.delete_chunk : 1u << 20) >> 10);
	printf("rocksdb: WriteOptions sync=1 (WAL fsync per put), auto compactions off, L0 "
	       "slowdown/stop triggers 1000, zstd, 64 KiB blocks, bloom 10, bytes_per_sync %" PRIu64
	       ", no rate limiter; one rocksdb_compact_range of everything\n",
	       WL.rocksdb_bytes_per_sync);
	need = WL.gens * WL.gen_bytes * 25 / 10 + (1ull << 30);
	if (bench_free_bytes(bench_base_dir()) < need) {
		printf("SKIPPED: needs ~%.1f GiB free in %s\n", (double)need / (1u << 30),
		       bench_base_dir());
		return 0;
	}
	printf("\n");

	memset(&rs, 0, sizeof(rs));
	memset(&rr, 0, sizeof(rr));
	if (with_strata) {
		failed |= run_engine(ENGINE_STRATA, &rs);
		if (rs.ok)
			printf("strata : backlog built in %.1f s; capacity %.0f appends/s, paced at %.0f/s; "
			       "merge folded %" PRIu64 " generations; during it sync_file_range %" PRIu64
			       " calls, %.2f s in all, longest %.1f ms; longest run/dir fsync %.1f ms, "
			       "WAL fdatasync %.1f ms (%" PRIu64 " over 10 ms), unlink %.1f ms; "
			       "background IO budget at the end %.0f MiB/s, %" PRIu64 " stalls halved at\n",
			       rs.load_s, rs.capacity, rs.rate, rs.inputs,
			       (uint64_t)atomic_load(&seam.sfr_calls),
			       (double)atomic_load(&seam.sfr_ns) / 1e9,
			       (double)atomic_load(&seam.sfr_max) / 1e6,
			       (double)atomic_load(&seam.fsync_max) / 1e6,
			       (double)atomic_load(&seam.fdatasync_max) / 1e6,
			       (uint64_t)atomic_load(&seam.fdatasync_slow),
			       (double)atomic_load(&seam.unlink_max) / 1e6,
			       (double)rs.io_rate_end / 1048576.0, rs.io_stalls);
	}
	if (with_rocks) {
		failed |= run_engine(ENGINE_ROCKSDB, &rr);
		if (rr.ok)
			printf("rocksdb: backlog built in %.1f s; capacity %.0f appends/s, paced at "
			       "%.0f/s; compaction of %" PRIu64 " L0 files\n",
			       rr.load_s, rr.capacity, rr.rate, rr.inputs);
	}
	printf("\n%-8s %-9s %8s %9s %9s %9s %9s %7s %6s %8s\n", "engine", "phase", "appends", "p50_ms",
	       "p99_ms", "p99.9_ms", "max_ms", "secs", "MB/s", "steal_ms");
	if (with_strata)
		print_result("strata", &rs, 1);
	if (with_rocks)
		print_result("rocksdb", &rr, 0);
	printf("(merge MB/s = input file bytes / merge seconds; strata's merge = prepare, which "
	       "writes the run, + commit, which publishes it and queues the inputs' deletes; "
	       "deletes = the reaper run after the commit, at delete_bytes_per_s, on the merge's "
	       "thread as strata_merge does; RocksDB deletes its inputs inside CompactRange; "
	       "steal_ms = CPU time the hypervisor took from this machine during the phase, "
	       "summed over CPUs: where it is not 0, the host froze the VM's every thread for "
	       "that long in all)\n");
	printf("\nduring/idle p99.9:");
	if (with_strata && rs.ok)
		printf("  strata %.1fx (with the deletes %.1fx)", ratio(rs.merge.p999, rs.idle.p999),
		       ratio(rs.whole.p999, rs.idle.p999));
	if (with_rocks && rr.ok)
		printf("  rocksdb %.1fx", ratio(rr.merge.p999, rr.idle.p999));
	printf("\n");
	if (with_strata && with_rocks && rs.ok && rr.ok)
		printf("strata/rocksdb during the merge and its deletes: p99.9 %.2fx, max %.2fx (>1: "
		       "strata stalls longer)\n", ratio(rs.whole.p999, rr.merge.p999),
		       ratio(rs.whole.max, rr.merge.max));
	if (failed)
		printf("bench_stall: an engine reported an error (see stderr); figures are partial\n");
	return failed ? 1 : 0;
}
