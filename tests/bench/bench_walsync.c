/*
 * bench_walsync — what a WAL's fdatasync costs while background writes stream, for the
 * writeback choices issue 11 asks to try: the measurement behind which ones strata keeps.
 *
 * One thread writes a WAL record (256 bytes) and fdatasyncs it every 2 ms and times each
 * pwrite + fdatasync, while another streams background writes at BENCH_WALSYNC_MB_S
 * (default 170, the unlimited 1 GiB merge's rate on this machine) in 1 MiB writes, for
 * BENCH_WALSYNC_S seconds (8) per case. Cases, every pair of:
 *   background: none (the device's own noise); "buffered + sync_file_range" (a 1 MiB
 *     write, then sync_file_range(WAIT_BEFORE | WRITE) of it: what the fs store does
 *     every bytes_per_sync); "O_DIRECT" (1 MiB writes that bypass the page cache, one in
 *     flight: a shallow device queue, no dirty pages for the journal to wait behind).
 *   WAL: "growing" (each record extends the file, so an fdatasync commits the new size
 *     through the journal: strata's segments), "preallocated" (records overwrite a
 *     64 MiB file written with zeros and synced beforehand: no metadata to commit, as
 *     PostgreSQL's and RocksDB's recycled segments).
 * Prints p50/p99/p99.9/max and the syncs over 10 ms per case. Asserts nothing.
 *
 * Environment: BENCH_WALSYNC_S (8), BENCH_WALSYNC_MB_S (170), BENCH_DIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

enum { BG_NONE, BG_BUFFERED, BG_DIRECT, BG_MODES };
enum { WAL_GROWING, WAL_PREALLOC, WAL_MODES };

static const char *const bg_name[BG_MODES] = {"none", "buffered + sync_file_range", "O_DIRECT"};
static const char *const wal_name[WAL_MODES] = {"growing", "preallocated"};

#define WAL_FILE_BYTES (64u << 20)
#define BG_WRITE_BYTES (1u << 20)
#define MAX_SAMPLES 100000

/** The background writer's job. */
struct bg {
	/** BG_*. */
	int mode;
	/** Its file. */
	char path[4200];
	/** Bytes per second. */
	double rate;
	/** Set to stop. */
	atomic_int stop;
	/** Bytes written. */
	uint64_t written;
	/** First error (errno), 0 when none. */
	int err;
};

static void
sleep_until(uint64_t t)
{
	uint64_t now = bench_now_ns();
	if (t > now) {
		struct timespec ts = {(time_t)((t - now) / 1000000000u), (long)((t - now) % 1000000000u)};
		nanosleep(&ts, NULL);
	}
}

static void *
bg_main(void *arg)
{
	struct bg *b = arg;
	int flags = O_CREAT | O_TRUNC | O_WRONLY | (b->mode == BG_DIRECT ? O_DIRECT : 0);
	int fd = open(b->path, flags, 0644);
	void *buf = NULL;
	if (fd < 0 || posix_memalign(&buf, 4096, BG_WRITE_BYTES) != 0) {
		b->err = errno ? errno : ENOMEM;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	/* Incompressible, like a merge of random values. */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < BG_WRITE_BYTES / 8; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		((uint64_t *)buf)[i] = x;
	}
	uint64_t t0 = bench_now_ns();
	off_t off = 0;
	while (!atomic_load(&b->stop)) {
		if (pwrite(fd, buf, BG_WRITE_BYTES, off) != (ssize_t)BG_WRITE_BYTES) {
			b->err = errno ? errno : EIO;
			break;
		}
		if (b->mode == BG_BUFFERED)
			(void)sync_file_range(fd, off, BG_WRITE_BYTES,
					      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
		off += BG_WRITE_BYTES;
		b->written += BG_WRITE_BYTES;
		sleep_until(t0 + (uint64_t)((double)b->written / b->rate * 1e9));
		if (off >= (off_t)4 << 30)
			off = 0; /* bounded disk use on a long run */
	}
	close(fd);
	free(buf);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/** One case: the WAL's sync latencies while bg streams. */
static void
run_case(const char *dir, int bgm, int walm, double secs, double mb_s)
{
	static double lat[MAX_SAMPLES];
	char wal[4200];
	snprintf(wal, sizeof(wal), "%s/wal", dir);
	int fd = open(wal, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0)
		bench_die("open %s: %s", wal, strerror(errno));
	if (walm == WAL_PREALLOC) {
		static char zero[1 << 20];
		for (unsigned i = 0; i < WAL_FILE_BYTES / sizeof(zero); i++)
			if (write(fd, zero, sizeof(zero)) != (ssize_t)sizeof(zero))
				bench_die("write %s: %s", wal, strerror(errno));
		if (fsync(fd) != 0)
			bench_die("fsync %s: %s", wal, strerror(errno));
	}
	int dfd = open(dir, O_RDONLY);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	sleep(1);
	struct bg b = {.mode = bgm, .rate = mb_s * 1e6};
	snprintf(b.path, sizeof(b.path), "%s/background", dir);
	atomic_init(&b.stop, 0);
	pthread_t th;
	if (bgm != BG_NONE && pthread_create(&th, NULL, bg_main, &b) != 0)
		bench_die("pthread_create failed");
	char rec[256];
	memset(rec, 0x5a, sizeof(rec));
	uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)(secs * 1e9);
	size_t n = 0;
	off_t off = 0;
	while (n < MAX_SAMPLES && bench_now_ns() < end) {
		uint64_t a = bench_now_ns();
		if (pwrite(fd, rec, sizeof(rec), off) != (ssize_t)sizeof(rec) || fdatasync(fd) != 0)
			bench_die("WAL write or sync: %s", strerror(errno));
		lat[n++] = (double)(bench_now_ns() - a) / 1e6;
		off += (off_t)sizeof(rec);
		if (off + (off_t)sizeof(rec) > (off_t)WAL_FILE_BYTES)
			off = 0;
		sleep_until(a + 2000000u);
	}
	double elapsed = (double)(bench_now_ns() - t0) / 1e9;
	if (bgm != BG_NONE) {
		atomic_store(&b.stop, 1);
		pthread_join(th, NULL);
		if (b.err != 0)
			bench_die("background writes: %s", strerror(b.err));
	}
	close(fd);
	unlink(wal);
	unlink(b.path);
	qsort(lat, n, sizeof(lat[0]), cmp_double);
	size_t over = 0;
	for (size_t i = 0; i < n; i++)
		over += lat[i] > 10.0;
	printf("  %-27s %-13s %6zu %8.2f %8.2f %8.2f %8.2f %6zu %9.0f\n", bg_name[bgm], wal_name[walm], n,
	       lat[n / 2], lat[n * 99 / 100], lat[n * 999 / 1000], lat[n - 1], over,
	       (double)b.written / 1e6 / elapsed);
	fflush(stdout);
}

int
main(void)
{
	double secs = (double)bench_env_u64("BENCH_WALSYNC_S", 8);
	double mb_s = (double)bench_env_u64("BENCH_WALSYNC_MB_S", 170);
	if (secs < 1 || mb_s < 1)
		bench_die("BENCH_WALSYNC_S and BENCH_WALSYNC_MB_S must be at least 1");
	char dir[4096];
	bench_mkdtemp("walsync", dir, sizeof(dir));
	printf("== bench_walsync: a WAL's pwrite + fdatasync of 256 bytes every 2 ms, %.0f s per case, "
	       "while 1 MiB background writes stream at %.0f MB/s\n", secs, mb_s);
	bench_print_host(dir);
	printf("  %-27s %-13s %6s %8s %8s %8s %8s %6s %9s\n", "background", "WAL", "syncs", "p50 ms",
	       "p99 ms", "p99.9 ms", "max ms", ">10ms", "bg MB/s");
	for (int bgm = 0; bgm < BG_MODES; bgm++)
		for (int walm = 0; walm < WAL_MODES; walm++)
			run_case(dir, bgm, walm, secs, mb_s);
	bench_rmrf(dir);
	return 0;
}
