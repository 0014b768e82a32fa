/*
 * bench_util.h — small helpers shared by the benchmarks (header-only).
 *
 * Benchmark code, not engine code: it calls libc directly.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/** Print a message and exit with status 2 (setup failure, not a speed verdict). */
static inline void __attribute__((noreturn, format(printf, 1, 2)))
bench_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

/** Monotonic clock in nanoseconds. */
static inline uint64_t
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/** Unsigned integer from the environment, def when unset; dies on garbage. */
static inline uint64_t
bench_env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return def;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		bench_die("%s=%s is not an unsigned integer", name, s);
	return v;
}

/** Parse a comma-separated list of positive integers into out (at most max). */
static inline int
bench_env_list(const char *name, const char *def, uint64_t *out, int max)
{
	const char *s = getenv(name);
	char buf[256];
	char *p, *save = NULL;
	int n = 0;

	if (s == NULL || *s == '\0')
		s = def;
	if (strlen(s) >= sizeof(buf))
		bench_die("%s is too long", name);
	strcpy(buf, s);
	for (p = strtok_r(buf, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno != 0 || *end != '\0' || v == 0)
			bench_die("%s: '%s' is not a positive integer", name, p);
		if (n == max)
			bench_die("%s: more than %d entries", name, max);
		out[n++] = v;
	}
	if (n == 0)
		bench_die("%s is empty", name);
	return n;
}

/** Base directory for benchmark data: BENCH_DIR, else TMPDIR, else /tmp. */
static inline const char *
bench_base_dir(void)
{
	const char *d = getenv("BENCH_DIR");

	if (d == NULL || *d == '\0')
		d = getenv("TMPDIR");
	if (d == NULL || *d == '\0')
		d = "/tmp";
	return d;
}

/** Create a fresh directory "<base>/strata-bench-<tag>-XXXXXX" into out. */
static inline void
bench_mkdtemp(const char *tag, char *out, size_t cap)
{
	if ((size_t)snprintf(out, cap, "%s/strata-bench-%s-XXXXXX", bench_base_dir(), tag) >= cap)
		bench_die("directory name too long");
	if (mkdtemp(out) == NULL)
		bench_die("mkdtemp %s: %s", out, strerror(errno));
}

static inline int
bench_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0 && errno != ENOENT)
		fprintf(stderr, "bench: remove %s: %s\n", path, strerror(errno));
	return 0;
}

/** Remove a directory tree (best effort, reports failures). */
static inline void
bench_rmrf(const char *path)
{
	nftw(path, bench_rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

static inline int
bench_drop_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int fd;

	(void)st;
	(void)ftw;
	if (flag != FTW_F)
		return 0;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

/** Source and destination of the bench_copy_dir in progress (nftw passes no context). */
static const char *bench_copy_src, *bench_copy_dst;

static inline int
bench_copy_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	char to[8192];
	char buf[1 << 16];
	int in, out, rc = 0;
	ssize_t n;

	(void)ftw;
	snprintf(to, sizeof(to), "%s%s", bench_copy_dst, path + strlen(bench_copy_src));
	if (flag == FTW_D)
		return mkdir(to, st->st_mode & 07777) == 0 || errno == EEXIST ? 0 : -1;
	if (flag != FTW_F)
		return 0;
	in = open(path, O_RDONLY);
	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, st->st_mode & 07777);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			rc = -1;
			break;
		}
	if (n < 0)
		rc = -1;
	close(in);
	if (close(out) != 0)
		rc = -1;
	return rc;
}

/** Copy the tree src to dst (regular files and directories); 0, or -1 with a message. */
static inline int
bench_copy_dir(const char *src, const char *dst)
{
	bench_copy_src = src;
	bench_copy_dst = dst;
	if (nftw(src, bench_copy_one, 32, FTW_PHYS) != 0) {
		fprintf(stderr, "bench: copy %s to %s: %s\n", src, dst, strerror(errno));
		return -1;
	}
	return 0;
}

/** Sync every file under path and ask the kernel to drop its cached pages. */
static inline void
bench_drop_cache(const char *path)
{
	nftw(path, bench_drop_one, 32, FTW_PHYS);
}

/** Bytes available to an unprivileged user on the filesystem holding path. */
static inline uint64_t
bench_free_bytes(const char *path)
{
	struct statvfs sv;

	if (statvfs(path, &sv) != 0)
		bench_die("statvfs %s: %s", path, strerror(errno));
	return (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
}

/** A short name for the filesystem type holding path. */
static inline const char *
bench_fs_type(const char *path)
{
	struct statfs sf;

	if (statfs(path, &sf) != 0)
		return "unknown";
	switch ((unsigned long)sf.f_type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs";
	case 0x794c7630: return "overlayfs";
	case 0x2FC12FC1: return "zfs";
	case 0xF2F52010: return "f2fs";
	case 0x6969: return "nfs";
	default: return "other";
	}
}

/** A kB figure from /proc/self/status ("VmHWM", "VmRSS"), or 0 if unreadable. */
static inline uint64_t
bench_proc_status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t fl = strlen(field);
	uint64_t kb = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
			kb = strtoull(line + fl + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

/** Print the machine and directory a benchmark ran on. */
static inline void
bench_print_host(const char *dir)
{
	struct utsname u;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t mem = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);

	uname(&u);
	printf("host: %s %s, %ld cpus, %.1f GiB RAM\n", u.sysname, u.release, cpus,
	       (double)mem / (1u << 30));
	printf("data dir: %s (%s, %.1f GiB free)\n", dir, bench_fs_type(dir),
	       (double)bench_free_bytes(dir) / (1u << 30));
}

/** xorshift64* generator state; never 0. */
struct bench_rng {
	/** Current state. */
	uint64_t s;
};

static inline uint64_t
bench_rng_next(struct bench_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 2685821657736338717ull;
}

/**
 * Latency histogram: log-linear buckets (64 per power of two), so a
 * percentile is exact to within 1/64 (~1.6%) of its value. Values in ns.
 */
#define BENCH_HIST_SUB 64
#define BENCH_HIST_BUCKETS (64 * BENCH_HIST_SUB)
struct bench_hist {
	/** Samples per bucket. */
	uint64_t count[BENCH_HIST_BUCKETS];
	/** Total samples. */
	uint64_t total;
};

static inline int
bench_hist_bucket(uint64_t v)
{
	int msb;

	if (v < BENCH_HIST_SUB)
		return (int)v;
	msb = 63 - __builtin_clzll(v);
	/* msb >= 6: keep the 6 bits below the top bit. */
	return (msb - 5) * BENCH_HIST_SUB + (int)((v >> (msb - 6)) & (BENCH_HIST_SUB - 1));
}

/** Lowest value that falls in bucket b. */
static inline uint64_t
bench_hist_value(int b)
{
	int e = b / BENCH_HIST_SUB, m = b % BENCH_HIST_SUB;

	if (e == 0)
		return (uint64_t)m;
	return ((uint64_t)(BENCH_HIST_SUB + m)) << (e - 1);
}

static inline void
bench_hist_add(struct bench_hist *h, uint64_t v)
{
	h->count[bench_hist_bucket(v)]++;
	h->total++;
}

static inline void
bench_hist_merge(struct bench_hist *into, const struct bench_hist *from)
{
	for (int i = 0; i < BENCH_HIST_BUCKETS; i++)
		into->count[i] += from->count[i];
	into->total += from->total;
}

/** Value at quantile q (0..1), the midpoint of its bucket; 0 if empty. */
static inline uint64_t
bench_hist_quantile(const struct bench_hist *h, double q)
{
	uint64_t want, seen = 0;

	if (h->total == 0)
		return 0;
	want = (uint64_t)(q * (double)h->total);
	if (want >= h->total)
		want = h->total - 1;
	for (int i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen > want) {
			uint64_t lo = bench_hist_value(i);
			uint64_t hi = i + 1 < BENCH_HIST_BUCKETS ? bench_hist_value(i + 1) : lo;

			return lo + (hi - lo) / 2;
		}
	}
	return 0;
}

#endif
