/*
 * bench_append — durable append throughput and latency, strata beside RocksDB.
 *
 * For each batch size, N threads append rows of a 16-byte key and a 200-byte value
 * for a fixed duration, first to strata (one shard, STRATA_SYNC_FSYNC: an append
 * returns after the fdatasync of its group commit), then to RocksDB through its C
 * API (WriteBatch per append, sync=1), in fresh directories on the same filesystem.
 * Prints rows/s, appends/s, p50/p99 append latency, the number of WAL syncs, and
 * the strata/RocksDB ratio per batch size, and the device's own limit (one 256-byte
 * pwrite + fdatasync at a time, before and after the runs) with each engine's share of
 * it at batch 1. Asserts nothing about speed.
 *
 * Environment: BENCH_SECONDS (5), BENCH_THREADS (4), BENCH_BATCHES ("1,100"),
 * BENCH_SEAL_MB (64: strata memtable size at which the bench seals, as RocksDB
 * flushes at its default 64 MiB write buffer), BENCH_ENGINES ("strata,rocksdb"),
 * BENCH_DIR (data directory).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#include <rocksdb/c.h>

#include "../../node/strata.h"
#include "bench_util.h"

#ifndef BENCH_ROCKSDB_VERSION
#define BENCH_ROCKSDB_VERSION "(version unknown)"
#endif

enum { KEY_BYTES = 16, VALUE_BYTES = 200, VALUE_POOL = 8192, MAX_BATCHES = 8 };

/** Which engine a run drives. */
enum engine { ENGINE_STRATA, ENGINE_ROCKSDB };

/** One measured configuration. */
struct run_cfg {
	/** Engine under test. */
	enum engine engine;
	/** Writer threads. */
	unsigned threads;
	/** Rows per append call. */
	unsigned batch;
	/** Measured duration in seconds. */
	uint64_t seconds;
	/** strata: memtable bytes at which the monitor seals. */
	uint64_t seal_bytes;
};

/** Shared state of a run. */
struct run_state {
	/** The configuration. */
	const struct run_cfg *cfg;
	/** strata store (ENGINE_STRATA). */
	strata *db;
	/** RocksDB handle (ENGINE_ROCKSDB). */
	rocksdb_t *rdb;
	/** RocksDB write options (sync=1). */
	rocksdb_writeoptions_t *rwo;
	/** Set to stop the writers and the monitor. */
	atomic_int stop;
	/** First error message, if any. */
	char error[512];
	/** Guards error. */
	pthread_mutex_t error_lock;
	/** Seals done by the monitor (strata). */
	uint64_t seals;
};

/** One writer thread. */
struct worker {
	/** Thread handle. */
	pthread_t thread;
	/** Thread index. */
	unsigned id;
	/** The run. */
	struct run_state *st;
	/** Append latencies in ns. */
	struct bench_hist *hist;
	/** Acknowledged append calls. */
	uint64_t appends;
	/** Acknowledged rows. */
	uint64_t rows;
};

/** Figures of one finished run. */
struct run_result {
	/** Rows acknowledged per second. */
	double rows_per_s;
	/** Append calls acknowledged per second. */
	double appends_per_s;
	/** Median append latency in µs. */
	double p50_us;
	/** 99th percentile append latency in µs. */
	double p99_us;
	/** WAL syncs (strata wal_syncs; RocksDB rocksdb.wal.synced), UINT64_MAX if unknown. */
	uint64_t syncs;
	/** Append calls acknowledged. */
	uint64_t appends;
	/** Rows acknowledged. */
	uint64_t rows;
	/** File bytes written by memtable flushes (strata generations, RocksDB flush SSTs), UINT64_MAX if unknown. */
	uint64_t flush_bytes;
	/** Measured seconds. */
	double seconds;
};

static void
run_fail(struct run_state *st, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&st->error_lock);
	if (st->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(st->error, sizeof(st->error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&st->error_lock);
	atomic_store(&st->stop, 1);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct run_state *st = w->st;
	unsigned batch = st->cfg->batch;
	struct bench_rng rng = { .s = 0x9E3779B97F4A7C15ull * (w->id + 1) };
	uint8_t pool[VALUE_POOL + VALUE_BYTES];
	uint8_t *keys = malloc((size_t)batch * KEY_BYTES);
	strata_row *rows = calloc((size_t)batch, sizeof(*rows));
	rocksdb_writebatch_t *wb = st->cfg->engine == ENGINE_ROCKSDB ? rocksdb_writebatch_create() : NULL;
	uint64_t counter = 0;

	if (keys == NULL || rows == NULL) {
		run_fail(st, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < sizeof(pool); i += 8) {
		uint64_t r = bench_rng_next(&rng);

		memcpy(pool + i, &r, sizeof(pool) - i < 8 ? sizeof(pool) - i : 8);
	}
	while (!atomic_load_explicit(&st->stop, memory_order_relaxed)) {
		uint64_t t0, t1;

		for (unsigned i = 0; i < batch; i++) {
			uint8_t *k = keys + (size_t)i * KEY_BYTES;
			uint64_t h = bench_rng_next(&rng);
			uint64_t u = ((uint64_t)w->id << 48) | counter++;

			/* Random order (first 8 bytes), unique (last 8 bytes). */
			for (int b = 0; b < 8; b++) {
				k[b] = (uint8_t)(h >> (56 - 8 * b));
				k[8 + b] = (uint8_t)(u >> (56 - 8 * b));
			}
			rows[i].key = k;
			rows[i].key_len = KEY_BYTES;
			rows[i].value = pool + (h >> 32) % VALUE_POOL;
			rows[i].value_len = VALUE_BYTES;
		}
		t0 = bench_now_ns();
		if (st->cfg->engine == ENGINE_STRATA) {
			int rc = strata_append(st->db, 0, rows, batch);

			if (rc != 0) {
				run_fail(st, "strata_append: %s: %s", strata_strerror(rc), strata_last_error());
				break;
			}
		} else {
			char *err = NULL;

			rocksdb_writebatch_clear(wb);
			for (unsigned i = 0; i < batch; i++)
				rocksdb_writebatch_put(wb, rows[i].key, rows[i].key_len, rows[i].value,
						       rows[i].value_len);
			rocksdb_write(st->rdb, st->rwo, wb, &err);
			if (err != NULL) {
				run_fail(st, "rocksdb_write: %s", err);
				rocksdb_free(err);
				break;
			}
		}
		t1 = bench_now_ns();
		bench_hist_add(w->hist, t1 - t0);
		w->appends++;
		w->rows += batch;
	}
out:
	if (wb != NULL)
		rocksdb_writebatch_destroy(wb);
	free(keys);
	free(rows);
	return NULL;
}

/** strata: seal the memtable when it reaches seal_bytes, as a flush policy would. */
static void
strata_monitor(struct run_state *st, uint64_t deadline_ns)
{
	while (!atomic_load(&st->stop) && bench_now_ns() < deadline_ns) {
		strata_stats s;
		int rc = strata_shard_stats(st->db, 0, &s);

		if (rc != 0) {
			run_fail(st, "strata_shard_stats: %s: %s", strata_strerror(rc), strata_last_error());
			return;
		}
		if (s.memtable_bytes >= st->cfg->seal_bytes && s.sealed_memtables == 0) {
			rc = strata_seal(st->db, 0);
			if (rc != 0) {
				run_fail(st, "strata_seal: %s: %s", strata_strerror(rc), strata_last_error());
				return;
			}
			st->seals++;
			continue;
		}
		usleep(20000);
	}
}

/** The COUNT of a ticker in RocksDB's statistics dump, UINT64_MAX if absent. */
static uint64_t
rocksdb_ticker(const char *dump, const char *name)
{
	const char *p = dump;
	size_t nl = strlen(name);

	while (p != NULL && (p = strstr(p, name)) != NULL) {
		if ((p == dump || p[-1] == '\n') && p[nl] == ' ') {
			const char *c = strstr(p, "COUNT : ");

			if (c != NULL)
				return strtoull(c + 8, NULL, 10);
		}
		p += nl;
	}
	return UINT64_MAX;
}

static int
run_one(const struct run_cfg *cfg, struct run_result *res)
{
	struct run_state st;
	struct worker *ws = calloc(cfg->threads, sizeof(*ws));
	struct bench_hist *all = calloc(1, sizeof(*all));
	rocksdb_options_t *ropt = NULL;
	char dir[4096];
	uint64_t t0, t1, deadline;
	int failed = 0;

	if (ws == NULL || all == NULL)
		bench_die("out of memory");
	memset(&st, 0, sizeof(st));
	memset(res, 0, sizeof(*res));
	st.cfg = cfg;
	pthread_mutex_init(&st.error_lock, NULL);
	bench_mkdtemp(cfg->engine == ENGINE_STRATA ? "append-strata" : "append-rocksdb", dir, sizeof(dir));

	if (cfg->engine == ENGINE_STRATA) {
		strata_options o;
		int rc;

		strata_options_init(&o);
		o.dir = dir;
		o.shards = 1;
		o.sync = STRATA_SYNC_FSYNC;
		rc = strata_open(&o, &st.db);
		if (rc != 0)
			bench_die("strata_open %s: %s: %s", dir, strata_strerror(rc), strata_last_error());
	} else {
		char *err = NULL;

		ropt = rocksdb_options_create();
		rocksdb_options_set_create_if_missing(ropt, 1);
		rocksdb_options_enable_statistics(ropt);
		st.rdb = rocksdb_open(ropt, dir, &err);
		if (err != NULL)
			bench_die("rocksdb_open %s: %s", dir, err);
		st.rwo = rocksdb_writeoptions_create();
		rocksdb_writeoptions_set_sync(st.rwo, 1);
	}

	t0 = bench_now_ns();
	deadline = t0 + cfg->seconds * 1000000000ull;
	for (unsigned i = 0; i < cfg->threads; i++) {
		ws[i].id = i;
		ws[i].st = &st;
		ws[i].hist = calloc(1, sizeof(*ws[i].hist));
		if (ws[i].hist == NULL)
			bench_die("out of memory");
		if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0)
			bench_die("pthread_create failed");
	}
	if (cfg->engine == ENGINE_STRATA)
		strata_monitor(&st, deadline);
	while (!atomic_load(&st.stop)) {
		uint64_t now = bench_now_ns();

		if (now >= deadline)
			break;
		usleep((useconds_t)((deadline - now) / 1000 > 100000 ? 100000 : (deadline - now) / 1000));
	}
	atomic_store(&st.stop, 1);
	for (unsigned i = 0; i < cfg->threads; i++) {
		pthread_join(ws[i].thread, NULL);
		bench_hist_merge(all, ws[i].hist);
		res->appends += ws[i].appends;
		res->rows += ws[i].rows;
		free(ws[i].hist);
	}
	t1 = bench_now_ns();

	res->seconds = (double)(t1 - t0) / 1e9;
	res->rows_per_s = (double)res->rows / res->seconds;
	res->appends_per_s = (double)res->appends / res->seconds;
	res->p50_us = (double)bench_hist_quantile(all, 0.50) / 1000.0;
	res->p99_us = (double)bench_hist_quantile(all, 0.99) / 1000.0;
	res->syncs = UINT64_MAX;
	res->flush_bytes = UINT64_MAX;

	if (cfg->engine == ENGINE_STRATA) {
		strata_stats s;

		if (strata_shard_stats(st.db, 0, &s) == 0) {
			res->syncs = s.wal_syncs;
			res->flush_bytes = s.generation_bytes + s.base_bytes;
			if (s.rows_appended != res->rows)
				fprintf(stderr, "bench: note: strata counted %" PRIu64
					" rows, the bench %" PRIu64 "\n", s.rows_appended, res->rows);
		}
		strata_close(st.db);
	} else {
		char *dump = rocksdb_options_statistics_get_string(ropt);

		if (dump != NULL) {
			res->syncs = rocksdb_ticker(dump, "rocksdb.wal.synced");
			res->flush_bytes = rocksdb_ticker(dump, "rocksdb.flush.write.bytes");
			rocksdb_free(dump);
		}
		rocksdb_writeoptions_destroy(st.rwo);
		rocksdb_close(st.rdb);
		rocksdb_options_destroy(ropt);
	}
	bench_rmrf(dir);
	if (st.error[0] != '\0') {
		fprintf(stderr, "bench_append: %s (engine %s, batch %u)\n", st.error,
			cfg->engine == ENGINE_STRATA ? "strata" : "rocksdb", cfg->batch);
		failed = 1;
	}
	pthread_mutex_destroy(&st.error_lock);
	free(all);
	free(ws);
	return failed;
}

static void
print_row(const char *engine, const struct run_cfg *cfg, const struct run_result *r)
{
	char syncs[32], per[32], cycle[32], flushed[32];

	if (r->syncs == UINT64_MAX) {
		snprintf(syncs, sizeof(syncs), "n/a");
		snprintf(per, sizeof(per), "n/a");
		snprintf(cycle, sizeof(cycle), "n/a");
	} else {
		snprintf(syncs, sizeof(syncs), "%" PRIu64, r->syncs);
		snprintf(per, sizeof(per), "%.1f", r->syncs ? (double)r->appends / (double)r->syncs : 0.0);
		snprintf(cycle, sizeof(cycle), "%.0f", r->syncs ? r->seconds * 1e6 / (double)r->syncs : 0.0);
	}
	if (r->flush_bytes == UINT64_MAX)
		snprintf(flushed, sizeof(flushed), "n/a");
	else
		snprintf(flushed, sizeof(flushed), "%.1f", (double)r->flush_bytes / (1 << 20));
	printf("%-8s %7u %6u %12.0f %11.0f %9.1f %9.1f %10s %12s %8s %9s\n", engine, cfg->threads,
	       cfg->batch, r->rows_per_s, r->appends_per_s, r->p50_us, r->p99_us, syncs, per, cycle,
	       flushed);
}

/** The device's own limit: syncs/s of one 256-byte pwrite + fdatasync at a time,
 *  appending to a fresh file in the bench's directory, as a WAL of one writer does. */
static double
sync_limit(void)
{
	char dir[4096], path[4200];
	bench_mkdtemp("synclimit", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		bench_die("open %s: %s", path, strerror(errno));
	char b[256];
	memset(b, 'x', sizeof(b));
	const int n = 1000;
	uint64_t t0 = bench_now_ns();
	for (int i = 0; i < n; i++)
		if (pwrite(fd, b, sizeof(b), (off_t)i * (off_t)sizeof(b)) != (ssize_t)sizeof(b) ||
		    fdatasync(fd) != 0)
			bench_die("pwrite/fdatasync %s: %s", path, strerror(errno));
	double secs = (double)(bench_now_ns() - t0) / 1e9;
	close(fd);
	bench_rmrf(dir);
	return (double)n / secs;
}

int
main(void)
{
	uint64_t batches[MAX_BATCHES];
	int nb = bench_env_list("BENCH_BATCHES", "1,100", batches, MAX_BATCHES);
	unsigned threads = (unsigned)bench_env_u64("BENCH_THREADS", 4);
	uint64_t seconds = bench_env_u64("BENCH_SECONDS", 5);
	uint64_t seal_mb = bench_env_u64("BENCH_SEAL_MB", 64);
	struct run_result rs[MAX_BATCHES], rr[MAX_BATCHES];
	const char *engines = getenv("BENCH_ENGINES");
	int with_strata = 1, with_rocks = 1, failed = 0;

	if (engines != NULL && *engines != '\0') {
		with_strata = strstr(engines, "strata") != NULL;
		with_rocks = strstr(engines, "rocksdb") != NULL;
		if (!with_strata && !with_rocks)
			bench_die("BENCH_ENGINES=%s names neither strata nor rocksdb", engines);
	}
	memset(rs, 0, sizeof(rs));
	memset(rr, 0, sizeof(rr));
	if (threads == 0 || threads > 256)
		bench_die("BENCH_THREADS must be 1..256");
	if (seconds == 0 || seconds > 3600)
		bench_die("BENCH_SECONDS must be 1..3600");
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("== bench_append: durable appends, strata %s vs RocksDB %s\n", STRATA_VERSION,
	       BENCH_ROCKSDB_VERSION);
	bench_print_host(bench_base_dir());
	printf("workload: %u threads, %d-byte keys (random order, unique), %d-byte values, "
	       "%" PRIu64 " s per config, no warm-up, fresh directory per config\n",
	       threads, KEY_BYTES, VALUE_BYTES, seconds);
	printf("strata : 1 shard, sync=STRATA_SYNC_FSYNC (ack after the group commit's fdatasync), "
	       "default options; the bench seals the memtable at %" PRIu64 " MiB\n", seal_mb);
	printf("rocksdb: default options + create_if_missing, WriteBatch per append, "
	       "rocksdb_writeoptions_set_sync(1), WAL on (write_buffer_size 64 MiB)\n");
	printf("latency: wall time of one append call (one strata_append / one rocksdb_write)\n\n");
	double limit0 = sync_limit();
	printf("device: one 256-byte pwrite + fdatasync at a time: %.0f syncs/s (%.0f us each)\n\n",
	       limit0, 1e6 / limit0);
	printf("%-8s %7s %6s %12s %11s %9s %9s %10s %12s %8s %9s\n", "engine", "threads", "batch",
	       "rows/s", "appends/s", "p50_us", "p99_us", "wal_syncs", "appends/sync", "us/sync",
	       "flush_MiB");

	for (int i = 0; i < nb; i++) {
		struct run_cfg cs = { ENGINE_STRATA, threads, (unsigned)batches[i], seconds,
				      seal_mb << 20 };
		struct run_cfg cr = cs;

		if (batches[i] > 100000)
			bench_die("BENCH_BATCHES entries must be at most 100000");
		cr.engine = ENGINE_ROCKSDB;
		if (with_strata) {
			failed |= run_one(&cs, &rs[i]);
			print_row("strata", &cs, &rs[i]);
		}
		if (with_rocks) {
			failed |= run_one(&cr, &rr[i]);
			print_row("rocksdb", &cr, &rr[i]);
		}
	}
	if (with_strata && with_rocks)
		printf("\nratio strata/rocksdb (rows/s; >1 means strata is faster):\n");
	else
		printf("\nratio strata/rocksdb: not computed (BENCH_ENGINES=%s)\n", engines);
	for (int i = 0; i < nb && with_strata && with_rocks; i++) {
		printf("  batch %-6" PRIu64 " %.2fx  (p99 latency ratio %.2fx)\n", batches[i],
		       rr[i].rows_per_s > 0 ? rs[i].rows_per_s / rr[i].rows_per_s : 0.0,
		       rr[i].p99_us > 0 ? rs[i].p99_us / rr[i].p99_us : 0.0);
	}
	double limit1 = sync_limit();
	double limit = (limit0 + limit1) / 2;
	printf("\ndevice after the runs: %.0f syncs/s; the limit of %u writers whose every sync "
	       "carries one row of each (%u x %.0f syncs/s, mean of before and after): %.0f rows/s\n",
	       limit1, threads, threads, limit, threads * limit);
	for (int i = 0; i < nb; i++)
		if (batches[i] == 1) {
			if (with_strata)
				printf("  batch 1: strata %.0f%% of that limit\n",
				       100.0 * rs[i].rows_per_s / (threads * limit));
			if (with_rocks)
				printf("  batch 1: rocksdb %.0f%% of that limit\n",
				       100.0 * rr[i].rows_per_s / (threads * limit));
		}
	printf("wal_syncs: strata from strata_shard_stats().wal_syncs, RocksDB from its "
	       "rocksdb.wal.synced ticker; appends/sync > 1 shows group commit; us/sync is the "
	       "measured time over wal_syncs, one group commit's cycle, next to the device's "
	       "one sync above\n");
	if (failed)
		printf("bench_append: an engine reported an error (see stderr); its figures are partial\n");
	return failed ? 1 : 0;
}
