/*
 * calibrate_cmd.c — `strata calibrate [--dir DIR] [--mib N] [--buffered] [--store URL]
 * [--out FILE]`: measure the cost model of `strata policy compare` (node/sim/replay.h) on the
 * machine and store at hand, and write it as a model file ("key = value" lines).
 *
 *   disk   N MiB written in 1 MiB O_DIRECT writes and synced (write MiB/s), read back the
 *          same way (read MiB/s), 256 random 4 KiB reads (a call's time, median) and 32
 *          4 KiB writes each followed by fdatasync (a sync's time, median). --buffered
 *          measures the page cache instead (what a `--sync none` node writes to); a file
 *          system without O_DIRECT (tmpfs) is measured buffered, and says so.
 *   CPU    a merge of 4 generations of N/4 MiB of rows (16-byte keys, 200-byte random
 *          values) on one thread, into the page cache (sync none): MiB written per second.
 *   store  with --store URL: 16 puts and gets of 1 KiB (a write's and a read's time,
 *          median), one 8 MiB put and get (MiB/s past the first byte), every object deleted.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../lib/buf.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../objstore/objstore.h"
#include "../sim/replay.h"
#include "../strata.h"
#include "cli.h"

#define CAL_CHUNK (1u << 20)
#define CAL_SMALL 4096u

/** The monotonic clock, ns. */
#define cal_now() env_default.mono_ns()

static int
cal_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t
cal_median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cal_cmp);
	return v[n / 2];
}

static void
cal_usage(FILE *f)
{
	fprintf(f, "usage: strata calibrate [--dir DIR] [--mib N] [--buffered] [--store URL] [--out FILE]\n"
		   "  measure the cost model `strata policy compare --model FILE` replays with, and print it\n"
		   "  as a model file (or write it to FILE); what it measured goes to stderr.\n"
		   "  --dir DIR    the disk to measure: a scratch file and store in DIR (default .), removed after\n"
		   "  --mib N      MiB to write for the bandwidths and the merge (default 64, 8..4096)\n"
		   "  --buffered   the page cache, not the disk (no O_DIRECT, no sync in the bandwidths): what\n"
		   "               a node with --sync none writes to\n"
		   "  --store URL  also a remote store's request times and bandwidth (objects under\n"
		   "               calibrate-PID/, deleted after)\n");
}

/** The disk's figures into m. 0, or 1 after printing why. */
static int
cal_disk(const char *dir, unsigned mib, int buffered, struct sim_model *m)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/.strata-calibrate.%d", dir, (int)getpid());
	int direct = !buffered;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0600);
	if (fd < 0 && direct && errno == EINVAL) {
		fprintf(stderr, "# %s: no O_DIRECT here (tmpfs?): measuring buffered\n", dir);
		direct = 0;
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	}
	if (fd < 0) {
		fprintf(stderr, "strata calibrate: %s: %s\n", path, strerror(errno));
		return 1;
	}
	void *blk = NULL;
	if (posix_memalign(&blk, 4096, CAL_CHUNK) != 0) {
		close(fd);
		unlink(path);
		fprintf(stderr, "strata calibrate: out of memory\n");
		return 1;
	}
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < CAL_CHUNK / 8; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		((uint64_t *)blk)[i] = x;
	}
	int rc = 0;
	uint64_t t0 = cal_now();
	for (unsigned i = 0; i < mib && rc == 0; i++)
		if (pwrite(fd, blk, CAL_CHUNK, (off_t)i * CAL_CHUNK) != (ssize_t)CAL_CHUNK)
			rc = 1;
	if (rc == 0 && !buffered && fdatasync(fd) != 0)
		rc = 1;
	uint64_t tw = cal_now() - t0;
	if (rc == 0 && !direct && !buffered)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	t0 = cal_now();
	for (unsigned i = 0; i < mib && rc == 0; i++)
		if (pread(fd, blk, CAL_CHUNK, (off_t)i * CAL_CHUNK) != (ssize_t)CAL_CHUNK)
			rc = 1;
	uint64_t tr = cal_now() - t0;
	uint64_t ops[256], syncs[32];
	uint64_t seed = 12345;
	for (int i = 0; i < 256 && rc == 0; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		off_t off = (off_t)((seed >> 20) % ((uint64_t)mib * (CAL_CHUNK / CAL_SMALL))) * CAL_SMALL;
		uint64_t a = cal_now();
		if (pread(fd, blk, CAL_SMALL, off) != (ssize_t)CAL_SMALL)
			rc = 1;
		ops[i] = cal_now() - a;
	}
	for (int i = 0; i < 32 && rc == 0; i++) {
		uint64_t a = cal_now();
		if (pwrite(fd, blk, CAL_SMALL, (off_t)i * CAL_SMALL) != (ssize_t)CAL_SMALL || fdatasync(fd) != 0)
			rc = 1;
		syncs[i] = cal_now() - a;
	}
	if (rc != 0)
		fprintf(stderr, "strata calibrate: %s: %s\n", path, strerror(errno));
	close(fd);
	unlink(path);
	free(blk);
	if (rc != 0)
		return 1;
	m->disk_write_mib_s = (double)mib / ((double)tw / 1e9);
	m->disk_read_mib_s = (double)mib / ((double)tr / 1e9);
	m->disk_op_ns = cal_median(ops, 256);
	m->disk_sync_ns = cal_median(syncs, 32);
	fprintf(stderr, "# disk %s (%s): write %.0f MiB/s, read %.0f MiB/s, a 4 KiB read %.1f us, a sync %.2f ms\n", dir,
		buffered ? "page cache" : direct ? "O_DIRECT" : "buffered, synced", m->disk_write_mib_s,
		m->disk_read_mib_s, (double)m->disk_op_ns / 1e3, (double)m->disk_sync_ns / 1e6);
	return 0;
}

static int
cal_rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0)
		fprintf(stderr, "# could not remove %s: %s\n", path, strerror(errno));
	return 0;
}

/** Remove a directory tree (the scratch store). */
static void
cal_rmtree(const char *path)
{
	nftw(path, cal_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/** The merge's CPU figure into m. 0, or 1 after printing why. */
static int
cal_cpu(const char *dir, unsigned mib, struct sim_model *m)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/.strata-calibrate-store.%d", dir, (int)getpid());
	strata_options o;
	strata_options_init(&o);
	o.dir = path;
	o.shards = 1;
	o.sync = STRATA_SYNC_NONE;
	o.policy = "";
	o.merge_threads = 1;
	strata *db = NULL;
	if (strata_open(&o, &db) != 0) {
		fprintf(stderr, "strata calibrate: a scratch store in %s: %s\n", path, strata_last_error());
		cal_rmtree(path);
		return 1;
	}
	enum { BATCH = 256, KEY = 16, VAL = 200 };
	static uint8_t keys[BATCH][KEY], vals[BATCH][VAL];
	strata_row rows[BATCH];
	uint64_t per_gen = (uint64_t)mib * 1048576 / 4 / (KEY + VAL), seq = 0, x = 88172645463325252ull;
	int rc = 0;
	for (int g = 0; g < 4 && rc == 0; g++) {
		for (uint64_t done = 0; done < per_gen && rc == 0; done += BATCH) {
			for (int i = 0; i < BATCH; i++) {
				/* Keys interleave across generations, so the merge really merges. */
				uint64_t k = (seq++ % per_gen) * 4 + (uint64_t)g;
				for (int b = 0; b < 8; b++)
					keys[i][b] = (uint8_t)(k >> (56 - 8 * b));
				memset(keys[i] + 8, 0, KEY - 8);
				for (int b = 0; b < VAL; b += 8) {
					x ^= x << 13, x ^= x >> 7, x ^= x << 17;
					memcpy(vals[i] + b, &x, VAL - b < 8 ? (size_t)(VAL - b) : 8);
				}
				rows[i] = (strata_row){keys[i], KEY, vals[i], VAL, STRATA_ROW_PUT};
			}
			rc = strata_append(db, 0, rows, BATCH);
		}
		if (rc == 0)
			rc = strata_seal(db, 0);
	}
	uint64_t t0 = cal_now();
	uint32_t merged = 0;
	if (rc == 0)
		rc = strata_merge(db, 0, 4, &merged);
	uint64_t t = cal_now() - t0;
	strata_stats st;
	memset(&st, 0, sizeof(st));
	if (rc == 0)
		rc = strata_shard_stats(db, 0, &st);
	if (rc != 0)
		fprintf(stderr, "strata calibrate: the merge: %s\n", strata_last_error());
	strata_close(db);
	cal_rmtree(path);
	if (rc != 0)
		return 1;
	m->cpu_mib_s = (double)st.merge_bytes_out / 1048576.0 / ((double)t / 1e9);
	fprintf(stderr, "# CPU: a one-thread merge of %u generations wrote %.1f MiB at %.0f MiB/s\n", merged,
		(double)st.merge_bytes_out / 1048576.0, m->cpu_mib_s);
	return 0;
}

/** The store's figures into m. 0, or 1 after printing why. */
static int
cal_store(const char *url, struct sim_model *m)
{
	struct objstore *os = NULL;
	if (objstore_url_new(url, &os) != 0) {
		fprintf(stderr, "strata calibrate: --store %s: %s\n", url, diag_last());
		return 1;
	}
	enum { N = 16 };
	static uint8_t small[1024];
	size_t big_n = 8u << 20;
	uint8_t *big = malloc(big_n);
	uint64_t w[N], r[N], tb_w = 0, tb_r = 0;
	char key[128];
	int rc = big == NULL ? diag_set(STRATA_ENOMEM, "out of memory") : 0;
	struct buf b = {0};
	for (int i = 0; i < N && rc == 0; i++) {
		snprintf(key, sizeof(key), "calibrate-%d/small-%02d", (int)getpid(), i);
		uint64_t a = cal_now();
		rc = objstore_put(os, key, small, sizeof(small));
		w[i] = cal_now() - a;
		a = cal_now();
		if (rc == 0)
			rc = objstore_get(os, key, &b);
		r[i] = cal_now() - a;
	}
	if (rc == 0) {
		memset(big, 0x5a, big_n);
		snprintf(key, sizeof(key), "calibrate-%d/big", (int)getpid());
		uint64_t a = cal_now();
		rc = objstore_put(os, key, big, big_n);
		tb_w = cal_now() - a;
		a = cal_now();
		if (rc == 0)
			rc = objstore_get(os, key, &b);
		tb_r = cal_now() - a;
	}
	if (rc != 0)
		fprintf(stderr, "strata calibrate: --store %s: %s\n", url, diag_last());
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "calibrate-%d/small-%02d", (int)getpid(), i);
		objstore_del(os, key);
	}
	snprintf(key, sizeof(key), "calibrate-%d/big", (int)getpid());
	objstore_del(os, key);
	diag_clear();
	buf_destroy(&b);
	free(big);
	objstore_destroy(os);
	if (rc != 0)
		return 1;
	m->store_write_ns = cal_median(w, N);
	m->store_read_ns = cal_median(r, N);
	/* Bandwidth past the first byte: the 8 MiB requests less a small one's time. */
	uint64_t pay = (tb_w > m->store_write_ns ? tb_w - m->store_write_ns : 1) / 2 +
		       (tb_r > m->store_read_ns ? tb_r - m->store_read_ns : 1) / 2;
	m->store_mib_s = 8.0 / ((double)(pay ? pay : 1) / 1e9);
	fprintf(stderr, "# store %s: a write %.2f ms, a read %.2f ms, %.0f MiB/s a request\n", url,
		(double)m->store_write_ns / 1e6, (double)m->store_read_ns / 1e6, m->store_mib_s);
	return 0;
}

int
cmd_calibrate(int argc, char **argv)
{
	const char *dir = ".", *store = NULL, *out = NULL;
	unsigned mib = 64;
	int buffered = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cal_usage(stdout);
			return 0;
		} else if (strcmp(a, "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(a, "--mib") == 0 && i + 1 < argc) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end != '\0' || v < 8 || v > 4096) {
				fprintf(stderr, "strata calibrate: --mib needs 8..4096\n");
				return 2;
			}
			mib = (unsigned)v;
		} else if (strcmp(a, "--buffered") == 0) {
			buffered = 1;
		} else if (strcmp(a, "--store") == 0 && i + 1 < argc) {
			store = argv[++i];
		} else if (strcmp(a, "--out") == 0 && i + 1 < argc) {
			out = argv[++i];
		} else {
			fprintf(stderr, "strata calibrate: unknown argument %s (or it needs a value)\n", a);
			cal_usage(stderr);
			return 2;
		}
	}
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "strata calibrate: --dir %s is not a directory\n", dir);
		return 2;
	}
	struct sim_model m;
	replay_model_default(store != NULL ? REPLAY_STORE_AZURE : REPLAY_STORE_LOCAL, &m);
	if (cal_disk(dir, mib, buffered, &m) != 0 || cal_cpu(dir, mib, &m) != 0 ||
	    (store != NULL && cal_store(store, &m) != 0))
		return 1;
	FILE *f = out != NULL ? fopen(out, "w") : stdout;
	if (f == NULL) {
		fprintf(stderr, "strata calibrate: --out %s: %s\n", out, strerror(errno));
		return 1;
	}
	fprintf(f, "# strata calibrate --dir %s%s%s%s: strata policy compare --model FILE reads this\n", dir,
		buffered ? " --buffered" : "", store ? " --store " : "", store ? store : "");
	replay_model_write(f, &m);
	if (out != NULL && fclose(f) != 0) {
		fprintf(stderr, "strata calibrate: --out %s: %s\n", out, strerror(errno));
		return 1;
	}
	return 0;
}
