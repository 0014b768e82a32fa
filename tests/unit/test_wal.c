/*
 * test_wal.c — the write-ahead log: round trip across threads, group commit,
 * torn tails, corruption, replay_after, release, sync failures (fsyncgate rule),
 * ENOSPC, sync modes, and monotonic positions across reopens and segment rolls.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../node/core/wal.h"
#include "../../node/lib/buf.h"
#include "../../node/lib/crc.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "harness.h"

/** Bytes of an entry header: header_crc, payload_len, first_seq, nrows, payload_crc. */
#define ENTRY_HDR 24

/* ---- fault injection through env ---- */

/** Guards the fx_* state below. */
static pthread_mutex_t fx_mu = PTHREAD_MUTEX_INITIALIZER;
/** Signalled whenever an fx_* counter changes. */
static pthread_cond_t fx_cv = PTHREAD_COND_INITIALIZER;
/** fdatasync calls seen since fx_arm. */
static int fx_syncs;
/** pwrite calls seen since fx_arm. */
static int fx_pwrites;
/** Fail the fdatasync with this 1-based number (0: never). */
static int fx_fail_sync_at;
/** Fail the pwrite with this 1-based number (0: never). */
static int fx_fail_pwrite_at;
/** errno of an injected failure. */
static int fx_errno;
/** The first fdatasync waits until fx_submitted reaches this (0: no wait). */
static int fx_block_until;
/** Submits done by test threads. */
static int fx_submitted;
/** While set, every fdatasync waits. */
static int fx_hold;
/** Holds that gave up after FX_HOLD_MAX_S (a hang the test reports instead). */
static int fx_hold_timeouts;
/** Longest a held fdatasync waits, in seconds. */
#define FX_HOLD_MAX_S 20
/** pwrite calls seen when the injected fdatasync failure happened (-1: none yet). */
static int fx_pwrites_at_failure;
/** Only count and inject after fx_arm. */
static int fx_armed;

static int
fx_fdatasync(int fd)
{
	pthread_mutex_lock(&fx_mu);
	if (!fx_armed) {
		pthread_mutex_unlock(&fx_mu);
		return 0;
	}
	int k = ++fx_syncs;
	pthread_cond_broadcast(&fx_cv);
	if (k == 1 && fx_block_until)
		while (fx_submitted < fx_block_until)
			pthread_cond_wait(&fx_cv, &fx_mu);
	if (fx_hold) {
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += FX_HOLD_MAX_S;
		while (fx_hold)
			if (pthread_cond_timedwait(&fx_cv, &fx_mu, &dl) == ETIMEDOUT) {
				fx_hold_timeouts++;
				fx_hold = 0;
				break;
			}
	}
	int fail = fx_fail_sync_at && k == fx_fail_sync_at;
	if (fail)
		fx_pwrites_at_failure = fx_pwrites;
	pthread_mutex_unlock(&fx_mu);
	if (fail) {
		errno = fx_errno;
		return -1;
	}
	return 0;
}

static ssize_t
fx_pwrite(int fd, const void *p, size_t n, off_t off)
{
	pthread_mutex_lock(&fx_mu);
	int fail = 0;
	if (fx_armed) {
		int k = ++fx_pwrites;
		fail = fx_fail_pwrite_at && k == fx_fail_pwrite_at;
	}
	pthread_mutex_unlock(&fx_mu);
	if (fail) {
		errno = fx_errno;
		return -1;
	}
	return pwrite(fd, p, n, off);
}

/** Install the fakes with everything off. */
static void
fx_install(void)
{
	env_reset();
	env.fdatasync = fx_fdatasync;
	env.pwrite = fx_pwrite;
	pthread_mutex_lock(&fx_mu);
	fx_syncs = fx_pwrites = fx_fail_sync_at = fx_fail_pwrite_at = fx_errno = 0;
	fx_block_until = fx_submitted = fx_hold = fx_armed = fx_hold_timeouts = 0;
	fx_pwrites_at_failure = -1;
	pthread_mutex_unlock(&fx_mu);
}

/** Start counting (and injecting) from now on. */
static void
fx_arm(void)
{
	pthread_mutex_lock(&fx_mu);
	fx_armed = 1;
	fx_syncs = fx_pwrites = 0;
	pthread_mutex_unlock(&fx_mu);
}

static int
fx_get(int *v)
{
	pthread_mutex_lock(&fx_mu);
	int x = *v;
	pthread_mutex_unlock(&fx_mu);
	return x;
}

static void
fx_submitted_inc(void)
{
	pthread_mutex_lock(&fx_mu);
	fx_submitted++;
	pthread_cond_broadcast(&fx_cv);
	pthread_mutex_unlock(&fx_mu);
}

/** Wait (bounded) until fx_syncs reaches n; 1 when it did. */
static int
fx_wait_syncs(int n)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += FX_HOLD_MAX_S;
	pthread_mutex_lock(&fx_mu);
	int e = 0;
	while (fx_syncs < n && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&fx_cv, &fx_mu, &dl);
	int ok = fx_syncs >= n;
	pthread_mutex_unlock(&fx_mu);
	return ok;
}

/** Hold every fdatasync from now on (on), or release the held ones (off). */
static void
fx_set_hold(int on)
{
	pthread_mutex_lock(&fx_mu);
	fx_hold = on;
	pthread_cond_broadcast(&fx_cv);
	pthread_mutex_unlock(&fx_mu);
}

/* ---- rows with checkable contents ---- */

/** Fill v[0..len) with the pattern of seed. */
static void
fill_value(uint8_t *v, size_t len, uint32_t seed)
{
	for (size_t j = 0; j < len; j++)
		v[j] = (uint8_t)(seed * 2654435761u + j * 131 + (j >> 9));
}

static int
value_ok(const uint8_t *v, size_t len, uint32_t seed)
{
	for (size_t j = 0; j < len; j++)
		if (v[j] != (uint8_t)(seed * 2654435761u + j * 131 + (j >> 9)))
			return 0;
	return 1;
}

/** Length of the value of row (t, i, r); one row carries a few MiB. */
static size_t
value_len(int t, int i, int r)
{
	if (t == 1 && i == 7 && r == 0)
		return (3u << 20) + 12345;
	return (size_t)((t * 7 + i * 13 + r * 5) % 300);
}

static uint32_t
row_seed(int t, int i, int r)
{
	return (uint32_t)(t * 100000 + i * 10 + r);
}

/** Build the n rows of entry (t, i) into rows, keys and a value buffer the caller frees. */
static uint8_t *
make_rows(int t, int i, int n, strata_row *rows, char keys[][32])
{
	size_t total = 0;
	for (int r = 0; r < n; r++)
		total += value_len(t, i, r);
	uint8_t *vals = malloc(total ? total : 1);
	size_t at = 0;
	for (int r = 0; r < n; r++) {
		size_t len = value_len(t, i, r);
		snprintf(keys[r], 32, "t%02d-i%05d-r%d", t, i, r);
		fill_value(vals + at, len, row_seed(t, i, r));
		rows[r] = (strata_row){keys[r], strlen(keys[r]), vals + at, len};
		at += len;
	}
	return vals;
}

/** Submit and wait for entry (t, i) of n rows; 0 or the code. */
static int
append_entry(struct wal *w, int t, int i, int n, struct wal_ticket *tk)
{
	strata_row rows[4];
	char keys[4][32];
	uint8_t *vals = make_rows(t, i, n, rows, keys);
	int rc = wal_submit(w, rows, (size_t)n, tk);
	free(vals);
	if (rc == 0)
		rc = wal_wait(w, tk);
	return rc;
}

/* ---- replay collection ---- */

/** Up to this many entries are recorded by the collector. */
#define MAX_SEEN 4096

/** What a replay delivered. */
struct seen {
	/** Entries delivered. */
	int n;
	/** first_seq of each entry. */
	uint64_t first[MAX_SEEN];
	/** Row count of each entry. */
	size_t rows[MAX_SEEN];
	/** (t, i) of each entry, from its first key. */
	int t[MAX_SEEN], i[MAX_SEEN];
	/** Entries whose positions did not increase. */
	int out_of_order;
	/** Rows whose key or value did not match the pattern. */
	int bad_rows;
	/** Last position delivered. */
	uint64_t last;
};

static int
collect_cb(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n)
{
	struct seen *s = ctx;
	if (s->n > 0 && first_seq <= s->last)
		s->out_of_order++;
	int t0 = -1, i0 = -1;
	for (size_t k = 0; k < n; k++) {
		int t, i, r;
		char key[40];
		size_t kl = rows[k].key_len < sizeof(key) - 1 ? rows[k].key_len : sizeof(key) - 1;
		memcpy(key, rows[k].key, kl);
		key[kl] = '\0';
		if (sscanf(key, "t%d-i%d-r%d", &t, &i, &r) != 3 || r != (int)k ||
		    rows[k].value_len != value_len(t, i, r) ||
		    !value_ok(rows[k].value, rows[k].value_len, row_seed(t, i, r))) {
			s->bad_rows++;
			continue;
		}
		if (k == 0) {
			t0 = t;
			i0 = i;
		}
	}
	if (s->n < MAX_SEEN) {
		s->first[s->n] = first_seq;
		s->rows[s->n] = n;
		s->t[s->n] = t0;
		s->i[s->n] = i0;
	}
	s->n++;
	s->last = first_seq + n - 1;
	return 0;
}

static struct seen *
seen_new(void)
{
	return calloc(1, sizeof(struct seen));
}

/* ---- files ---- */

static long long
file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void
seg_path(char *out, size_t cap, const char *dir, uint64_t first)
{
	snprintf(out, cap, "%s/%020llu.wal", dir, (unsigned long long)first);
}

static uint8_t *
read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
	if (fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return p;
}

static int
write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (f == NULL)
		return -1;
	int rc = fwrite(p, 1, n, f) == n ? 0 : -1;
	return fclose(f) == 0 ? rc : -1;
}

/** XOR the byte at off of path with mask; 0 or -1. */
static int
xor_byte(const char *path, long long off, uint8_t mask)
{
	size_t n;
	uint8_t *p = read_file(path, &n);
	if (p == NULL || off < 0 || (size_t)off >= n) {
		free(p);
		return -1;
	}
	p[off] ^= mask;
	int rc = write_file(path, p, n);
	free(p);
	return rc;
}

static int
flip_byte(const char *path, long long off)
{
	return xor_byte(path, off, 0x5a);
}

/** Append n bytes to path (created if missing); 0 or -1. */
static int
append_bytes(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "ab");
	if (f == NULL)
		return -1;
	int rc = fwrite(p, 1, n, f) == n ? 0 : -1;
	return fclose(f) == 0 ? rc : -1;
}

static int
count_segments(const char *dir)
{
	struct wal_segment_info infos[1];
	return wal_inspect_dir(dir, infos, 0);
}

static struct wal_options
opts(const char *dir, int sync, uint64_t segment_bytes)
{
	return (struct wal_options){.dir = dir, .sync = sync, .segment_bytes = segment_bytes};
}

/* ---- the fixture ---- */

/**
 * WAL_TEST(name) { ... } defines TEST(name): the body runs with the fakes installed
 * (fx_install, everything off) in dir, a fresh temporary directory; afterwards, however
 * the body ended (a REQUIRE leaves only the body), dir is removed and env reset.
 */
#define WAL_TEST(name)                                                                  \
	static void name##_in(const char *dir);                                         \
	TEST(name)                                                                      \
	{                                                                               \
		fx_install();                                                           \
		char *dir = harness_tmpdir("wal");                                      \
		REQUIRE(dir != NULL);                                                   \
		name##_in(dir);                                                         \
		harness_rmrf(dir);                                                      \
		free(dir);                                                              \
		env_reset();                                                            \
	}                                                                               \
	static void name##_in(const char *dir)

/* ---- tests ---- */

/** Threads and entries of the concurrent tests. */
#define RT_THREADS 4
#define RT_ENTRIES 40

/** One appending thread of round_trip. */
struct rt_arg {
	/** The WAL. */
	struct wal *w;
	/** Thread number. */
	int t;
	/** Tickets of its entries. */
	struct wal_ticket tk[RT_ENTRIES];
	/** Results of its entries. */
	int rc[RT_ENTRIES];
};

static void *
rt_main(void *p)
{
	struct rt_arg *a = p;
	for (int i = 0; i < RT_ENTRIES; i++)
		a->rc[i] = append_entry(a->w, a->t, i, 1 + (a->t + i) % 3, &a->tk[i]);
	return NULL;
}

WAL_TEST(round_trip_replays_every_acked_row_once_in_order)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 1 << 20);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	static struct rt_arg args[RT_THREADS];
	pthread_t th[RT_THREADS];
	for (int t = 0; t < RT_THREADS; t++) {
		args[t].w = w;
		args[t].t = t;
		pthread_create(&th[t], NULL, rt_main, &args[t]);
	}
	for (int t = 0; t < RT_THREADS; t++)
		pthread_join(th[t], NULL);
	wal_close(w);
	for (int t = 0; t < RT_THREADS; t++)
		for (int i = 0; i < RT_ENTRIES; i++)
			CHECK_EQ(args[t].rc[i], 0);

	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	wal_close(w);
	CHECK_EQ(s->n, RT_THREADS * RT_ENTRIES);
	CHECK_EQ(s->out_of_order, 0);
	CHECK_EQ(s->bad_rows, 0);
	static int count[RT_THREADS][RT_ENTRIES];
	memset(count, 0, sizeof(count));
	for (int k = 0; k < s->n && k < MAX_SEEN; k++) {
		int t = s->t[k], i = s->i[k];
		if (t < 0 || t >= RT_THREADS || i < 0 || i >= RT_ENTRIES) {
			CHECK(0);
			continue;
		}
		count[t][i]++;
		CHECK_EQ(s->first[k], args[t].tk[i].first_seq);
		CHECK_EQ(s->rows[k], 1 + (t + i) % 3);
	}
	for (int t = 0; t < RT_THREADS; t++)
		for (int i = 0; i < RT_ENTRIES; i++)
			CHECK_EQ(count[t][i], 1);
	/* The big value forced at least one segment roll. */
	CHECK(count_segments(dir) >= 2);
	free(s);
}

/** Threads of the group-commit tests. */
#define GC_THREADS 8

/** One appender of the group-commit tests. */
struct gc_arg {
	/** The WAL. */
	struct wal *w;
	/** Thread number. */
	int t;
	/** Result of submit. */
	int submit_rc;
	/** Result of wait. */
	int wait_rc;
	/** The diag message after wait. */
	char msg[256];
};

static void *
gc_main(void *p)
{
	struct gc_arg *a = p;
	strata_row rows[1];
	char keys[1][32];
	uint8_t *vals = make_rows(a->t, 0, 1, rows, keys);
	struct wal_ticket tk;
	a->submit_rc = wal_submit(a->w, rows, 1, &tk);
	free(vals);
	fx_submitted_inc();
	if (a->submit_rc == 0)
		a->wait_rc = wal_wait(a->w, &tk);
	snprintf(a->msg, sizeof(a->msg), "%s", diag_last());
	return NULL;
}

static void
run_gc_threads(struct wal *w, struct gc_arg *args)
{
	pthread_t th[GC_THREADS];
	for (int t = 0; t < GC_THREADS; t++) {
		args[t] = (struct gc_arg){.w = w, .t = t};
		pthread_create(&th[t], NULL, gc_main, &args[t]);
	}
	for (int t = 0; t < GC_THREADS; t++)
		pthread_join(th[t], NULL);
}

WAL_TEST(group_commit_shares_fdatasync_across_waiters)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	uint64_t syncs0;
	wal_usage(w, NULL, NULL, &syncs0);
	fx_arm();
	/* The first fdatasync holds until every thread has submitted. */
	pthread_mutex_lock(&fx_mu);
	fx_block_until = GC_THREADS;
	pthread_mutex_unlock(&fx_mu);
	struct gc_arg args[GC_THREADS];
	run_gc_threads(w, args);
	for (int t = 0; t < GC_THREADS; t++) {
		CHECK_EQ(args[t].submit_rc, 0);
		CHECK_EQ(args[t].wait_rc, 0);
	}
	int syncs = fx_get(&fx_syncs);
	CHECK(syncs >= 1);
	CHECK(syncs <= 2);
	CHECK(syncs < GC_THREADS);
	uint64_t syncs1;
	wal_usage(w, NULL, NULL, &syncs1);
	CHECK_EQ(syncs1 - syncs0, (uint64_t)syncs);
	wal_close(w);
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	wal_close(w);
	CHECK_EQ(s->n, GC_THREADS);
	CHECK_EQ(s->bad_rows, 0);
	free(s);
}

/** Append entries 0..n-1 (1 row each, thread 0) to a fresh WAL in dir; record the
 *  segment size after each (ends[0] = header only). The WAL is closed after. */
static int
write_entries(const char *dir, int n, long long *ends, uint64_t segment_bytes)
{
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, segment_bytes);
	struct wal *w;
	int rc = wal_open(&o, 0, 0, NULL, NULL, &w);
	if (rc)
		return rc;
	char path[4096];
	seg_path(path, sizeof(path), dir, 1);
	if (ends)
		ends[0] = file_size(path);
	for (int i = 0; i < n && rc == 0; i++) {
		struct wal_ticket tk;
		rc = append_entry(w, 0, i, 1 + i % 2, &tk);
		if (ends)
			ends[i + 1] = file_size(path);
	}
	wal_close(w);
	return rc;
}

/** Most entries written_segment writes. */
#define WRITTEN_MAX 7

/** The one segment the corruption tests damage, as written_segment wrote it. */
struct written {
	/** Segment size after each entry (ends[0]: the header alone). */
	long long ends[WRITTEN_MAX + 1];
	/** Path of the segment (positions from 1). */
	char path[4096];
	/** Its bytes as written (malloc'ed), to restore or damage. */
	uint8_t *orig;
	/** How many. */
	size_t len;
};

/** Write entries 0..n-1 (write_entries) to a fresh WAL in dir and keep a copy of the one
 *  segment in g; 0, write_entries' code, or -1 when the copy cannot be read. */
static int
written_segment(const char *dir, int n, struct written *g)
{
	g->orig = NULL;
	if (n > WRITTEN_MAX)
		return -1;
	int rc = write_entries(dir, n, g->ends, 0);
	if (rc)
		return rc;
	seg_path(g->path, sizeof(g->path), dir, 1);
	g->orig = read_file(g->path, &g->len);
	return g->orig != NULL ? 0 : -1;
}

/** The last warning logged, for checks on torn-tail reports. */
static char last_warn[1024];

static void
capture_sink(int level, const char *msg)
{
	if (level == LOG_LVL_WARN)
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
}

/** wal_open(o) replaying everything into s, with the last warning it logs in last_warn. */
static int
open_capturing_warning(const struct wal_options *o, struct seen *s, struct wal **w)
{
	void (*sink)(int, const char *) = diag_log_sink;
	diag_log_sink = capture_sink;
	last_warn[0] = '\0';
	int rc = wal_open(o, 0, 0, collect_cb, s, w);
	diag_log_sink = sink;
	return rc;
}

/** CHECK that the last warning names segment seg_first (legacy name) and offset off. */
static void
check_warning_names(uint64_t seg_first, long long off)
{
	char name[64], offs[64];
	snprintf(name, sizeof(name), "%020llu.wal", (unsigned long long)seg_first);
	snprintf(offs, sizeof(offs), "offset %lld", off);
	if (strstr(last_warn, name) == NULL || strstr(last_warn, offs) == NULL) {
		fprintf(stderr, "  warning does not name %s and %s: '%s'\n", name, offs, last_warn);
		CHECK(0);
	}
}

WAL_TEST(torn_tail_is_truncated_to_last_whole_entry)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 5, &g), 0);
	REQUIRE_EQ(g.len, g.ends[5]);
	REQUIRE(g.ends[5] - g.ends[4] > ENTRY_HDR + 1);
	/* Inside the header, a whole header with its payload cut, most of the payload. */
	long long cuts[] = {g.ends[4] + 1, g.ends[4] + 10, g.ends[4] + ENTRY_HDR - 1,
			    g.ends[4] + ENTRY_HDR, g.ends[4] + ENTRY_HDR + 1, g.ends[5] - 1};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		harness_rmrf(dir);
		REQUIRE(mkdir(dir, 0755) == 0);
		REQUIRE(write_file(g.path, g.orig, (size_t)cuts[c]) == 0);
		struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
		struct seen *s = seen_new();
		struct wal *w;
		int rc = open_capturing_warning(&o, s, &w);
		CHECK_EQ(rc, 0);
		check_warning_names(1, g.ends[4]);
		if (rc != 0) {
			fprintf(stderr, "  cut %lld: %s\n", cuts[c], diag_last());
			free(s);
			continue;
		}
		CHECK_EQ(s->n, 4);
		CHECK_EQ(s->bad_rows, 0);
		CHECK_EQ(s->last, 1 + 2 + 1 + 2);
		CHECK_EQ(file_size(g.path), g.ends[4]);
		CHECK_EQ(wal_next_seq(w), 7);
		struct wal_ticket tk;
		CHECK_EQ(append_entry(w, 0, 99, 1, &tk), 0);
		CHECK_EQ(tk.first_seq, 7);
		wal_close(w);
		/* The truncated segment and the new one replay cleanly. */
		memset(s, 0, sizeof(*s));
		CHECK_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
		CHECK_EQ(s->n, 5);
		CHECK_EQ(s->out_of_order, 0);
		wal_close(w);
		free(s);
	}
	free(g.orig);
}

WAL_TEST(bad_checksum_on_final_entry_is_a_torn_tail)
{
	long long ends[6];
	REQUIRE_EQ(write_entries(dir, 5, ends, 0), 0);
	char path[4096];
	seg_path(path, sizeof(path), dir, 1);
	REQUIRE_EQ(flip_byte(path, ends[4] + ENTRY_HDR + 2), 0);
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, 0);
	struct seen *s = seen_new();
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK_EQ(s->n, 4);
	CHECK_EQ(file_size(path), ends[4]);
	wal_close(w);
	free(s);
}

WAL_TEST(torn_segment_header_is_dropped)
{
	long long ends[3];
	REQUIRE_EQ(write_entries(dir, 2, ends, 0), 0);
	char path[4096];
	seg_path(path, sizeof(path), dir, 1);
	REQUIRE(truncate(path, 10) == 0);
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct seen *s = seen_new();
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK_EQ(s->n, 0);
	CHECK_EQ(wal_next_seq(w), 1);
	wal_close(w);
	struct wal_segment_info info[4];
	CHECK_EQ(wal_inspect_dir(dir, info, 4), 1);
	CHECK_EQ(info[0].bytes, 24);
	CHECK_EQ(info[0].valid_bytes, 24);
	CHECK_EQ(info[0].entries, 0);
	free(s);
}

/** CHECK that opening dir fails with ECORRUPT naming the segment and the offset. */
static void
check_corrupt_open(const char *dir, uint64_t seg_first, long long off, uint64_t max_entry)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	o.max_entry_bytes = max_entry;
	struct seen *s = seen_new();
	struct wal *w = NULL;
	diag_clear();
	int rc = wal_open(&o, 0, 0, collect_cb, s, &w);
	CHECK_EQ(rc, STRATA_ECORRUPT);
	CHECK(w == NULL);
	char name[64], offs[64];
	snprintf(name, sizeof(name), "%020llu.wal", (unsigned long long)seg_first);
	snprintf(offs, sizeof(offs), "offset %lld", off);
	if (strstr(diag_last(), name) == NULL || strstr(diag_last(), offs) == NULL) {
		fprintf(stderr, "  want '%s' and '%s' in: %s\n", name, offs, diag_last());
		CHECK(0);
	}
	if (w != NULL)
		wal_close(w);
	free(s);
}

WAL_TEST(corrupt_middle_entry_fails_open_naming_segment_and_offset)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 5, &g), 0);
	/* A payload byte and the header_crc, payload_len, first_seq, nrows and payload_crc
	 * fields of entry 3. */
	long long flips[] = {g.ends[2] + ENTRY_HDR + 3, g.ends[2] + 1, g.ends[2] + 5,
			     g.ends[2] + 9, g.ends[2] + 16, g.ends[2] + 21};
	for (size_t f = 0; f < sizeof(flips) / sizeof(flips[0]); f++) {
		REQUIRE(write_file(g.path, g.orig, g.len) == 0);
		REQUIRE_EQ(flip_byte(g.path, flips[f]), 0);
		check_corrupt_open(dir, 1, g.ends[2], 0);
		/* Nothing was truncated or created. */
		CHECK_EQ(file_size(g.path), (long long)g.len);
		CHECK_EQ(count_segments(dir), 1);
	}
	free(g.orig);
}

WAL_TEST(torn_entry_in_older_segment_is_corruption)
{
	REQUIRE_EQ(write_entries(dir, 12, NULL, 200), 0);
	struct wal_segment_info info[32];
	int n = wal_inspect_dir(dir, info, 32);
	REQUIRE(n >= 3);
	REQUIRE(info[0].entries >= 1);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%.64s", dir, info[0].name);
	REQUIRE(truncate(path, (off_t)info[0].bytes - 3) == 0);
	/* The last entry of the first segment now looks torn, but segments follow it. */
	struct wal_segment_info after[32];
	REQUIRE_EQ(wal_inspect_dir(dir, after, 32), n);
	long long off = (long long)after[0].valid_bytes;
	CHECK(after[0].valid_bytes < after[0].bytes);
	check_corrupt_open(dir, info[0].first_seq, off, 0);
}

/** Append a well-formed entry (valid checksums) with the given first_seq to path. */
static int
append_forged_entry(const char *path, uint64_t first_seq)
{
	uint8_t e[ENTRY_HDR + 7];
	uint8_t *p = e + ENTRY_HDR;
	p[0] = STRATA_ROW_PUT;
	p[1] = 2;
	p[2] = 2;
	memcpy(p + 3, "kkvv", 4);
	enc_u32(e + 4, 7);
	enc_u64(e + 8, first_seq);
	enc_u32(e + 16, 1);
	enc_u32(e + 20, crc32c(0, p, 7));
	enc_u32(e, crc32c(0, e + 4, ENTRY_HDR - 4));
	int fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -1;
	int rc = write(fd, e, sizeof(e)) == (ssize_t)sizeof(e) ? 0 : -1;
	close(fd);
	return rc;
}

WAL_TEST(position_gap_or_repeat_is_corruption)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 3, &g), 0); /* positions 1..4 */
	uint64_t bad[] = {4, 6, 1};
	for (size_t b = 0; b < 3; b++) {
		REQUIRE(write_file(g.path, g.orig, g.len) == 0);
		REQUIRE_EQ(append_forged_entry(g.path, bad[b]), 0);
		check_corrupt_open(dir, 1, g.ends[3], 0);
	}
	/* The right position is accepted: the forging itself is sound. */
	REQUIRE(write_file(g.path, g.orig, g.len) == 0);
	REQUIRE_EQ(append_forged_entry(g.path, 5), 0);
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), 6);
	wal_close(w);
	free(g.orig);
}

WAL_TEST(payload_over_max_entry_bytes_is_corruption)
{
	long long ends[6];
	REQUIRE_EQ(write_entries(dir, 5, ends, 0), 0);
	/* The limit admits the first entry's payload but not the second's. */
	long long maxp = ends[1] - ends[0] - ENTRY_HDR;
	REQUIRE(maxp < ends[2] - ends[1] - ENTRY_HDR);
	check_corrupt_open(dir, 1, ends[1], (uint64_t)maxp);
	/* Submit refuses what replay would refuse. */
	char *dir2 = harness_tmpdir("wal");
	REQUIRE(dir2 != NULL);
	struct wal_options o = opts(dir2, STRATA_SYNC_NONE, 0);
	o.max_entry_bytes = 1000;
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	static uint8_t big[2000];
	/* Payload = kind + varint(1) + varint(value_len) + 1 + value_len. */
	strata_row r = {"k", 1, big, 996};
	struct wal_ticket tk;
	CHECK_EQ(wal_submit(w, &r, 1, &tk), STRATA_ETOOBIG);
	r.value_len = 995;
	CHECK_EQ(wal_submit(w, &r, 1, &tk), 0);
	CHECK_EQ(wal_wait(w, &tk), 0);
	CHECK_EQ(wal_submit(w, &r, 0, &tk), STRATA_EINVAL);
	strata_row nul = {NULL, 3, "v", 1};
	CHECK_EQ(wal_submit(w, &nul, 1, &tk), STRATA_EINVAL);
	wal_close(w);
	harness_rmrf(dir2);
	free(dir2);
}

WAL_TEST(flipped_length_bit_before_tail_is_corruption)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 5, &g), 0);
	/* Entry k starts at ends[k]: the second-to-last (3) and a middle one (2). Bit 28 of
	 * payload_len adds 256 MiB: past EOF, yet under the default 1 GiB entry limit. */
	int victims[] = {3, 2};
	for (size_t v = 0; v < sizeof(victims) / sizeof(victims[0]); v++) {
		long long at = g.ends[victims[v]];
		REQUIRE(at + ENTRY_HDR + (long long)dec_u32(g.orig + at + 4) + (1ll << 28) >
			(long long)g.len);
		REQUIRE(write_file(g.path, g.orig, g.len) == 0);
		REQUIRE_EQ(xor_byte(g.path, at + 7, 0x10), 0);
		check_corrupt_open(dir, 1, at, 0);
		CHECK(strstr(diag_last(), "header checksum") != NULL);
		/* Nothing was truncated or created. */
		CHECK_EQ(file_size(g.path), (long long)g.len);
		CHECK_EQ(count_segments(dir), 1);
	}
	free(g.orig);
}

/** Open dir, expecting success; CHECK that n entries ending at position last were
 *  replayed and that the torn-tail warning names segment seg_first and offset off. */
static void
check_torn_open(const char *dir, uint64_t seg_first, long long off, int n, uint64_t last)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct seen *s = seen_new();
	struct wal *w = NULL;
	int rc = open_capturing_warning(&o, s, &w);
	CHECK_EQ(rc, 0);
	if (rc != 0) {
		fprintf(stderr, "  open: %s\n", diag_last());
		free(s);
		return;
	}
	check_warning_names(seg_first, off);
	CHECK_EQ(s->n, n);
	CHECK_EQ(s->bad_rows, 0);
	CHECK_EQ(s->out_of_order, 0);
	CHECK_EQ(s->last, last);
	CHECK_EQ(wal_next_seq(w), last + 1);
	wal_close(w);
	free(s);
}

WAL_TEST(zero_filled_tail_is_torn)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 5, &g), 0); /* positions 1..7 */
	size_t zlen = (2u << 20) + 3;
	uint8_t *zeros = calloc(1, zlen);
	REQUIRE(zeros != NULL);
	/* Zeros after the last entry: one page, and more than the scanner reads at once. */
	size_t tails[] = {4096, zlen};
	for (size_t t = 0; t < 2; t++) {
		harness_rmrf(dir);
		REQUIRE(mkdir(dir, 0755) == 0);
		REQUIRE(write_file(g.path, g.orig, g.len) == 0);
		REQUIRE(append_bytes(g.path, zeros, tails[t]) == 0);
		check_torn_open(dir, 1, g.ends[5], 5, 7);
		CHECK_EQ(file_size(g.path), g.ends[5]);
	}
	/* The last entry's payload never arrived either: its header is whole, zeros after. */
	harness_rmrf(dir);
	REQUIRE(mkdir(dir, 0755) == 0);
	memset(g.orig + g.ends[4] + ENTRY_HDR, 0, (size_t)(g.ends[5] - g.ends[4] - ENTRY_HDR));
	REQUIRE(write_file(g.path, g.orig, g.len) == 0);
	REQUIRE(append_bytes(g.path, zeros, 4096) == 0);
	check_torn_open(dir, 1, g.ends[4], 4, 6);
	CHECK_EQ(file_size(g.path), g.ends[4]);
	/* A newly rolled last segment made only of zeros is dropped (and then replaced by
	 * the fresh segment of the same name). */
	harness_rmrf(dir);
	REQUIRE_EQ(write_entries(dir, 5, g.ends, 0), 0);
	char path8[4096];
	seg_path(path8, sizeof(path8), dir, 8);
	REQUIRE(append_bytes(path8, zeros, 4096) == 0);
	check_torn_open(dir, 8, 0, 5, 7);
	CHECK_EQ(file_size(g.path), g.ends[5]);
	CHECK_EQ(file_size(path8), 24);
	CHECK_EQ(count_segments(dir), 2);
	free(zeros);
	free(g.orig);
}

WAL_TEST(garbage_tail_is_corruption)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 5, &g), 0);
	uint8_t garbage[64];
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)(0xa5 ^ (i * 29));
	/* Zeros with one byte set at the very end, beyond the scanner's first read. */
	size_t zlen = (1u << 20) + 4096;
	uint8_t *late = calloc(1, zlen);
	REQUIRE(late != NULL);
	late[zlen - 1] = 1;
	struct {
		/** Bytes appended after the last entry. */
		const uint8_t *p;
		/** Their count. */
		size_t n;
	} tails[] = {{garbage, sizeof(garbage)}, {late, zlen}};
	for (size_t t = 0; t < 2; t++) {
		REQUIRE(write_file(g.path, g.orig, g.len) == 0);
		REQUIRE(append_bytes(g.path, tails[t].p, tails[t].n) == 0);
		check_corrupt_open(dir, 1, g.ends[5], 0);
		CHECK_EQ(file_size(g.path), (long long)g.len + (long long)tails[t].n);
		CHECK_EQ(count_segments(dir), 1);
	}
	/* A bad payload in the last entry with garbage after it is not a torn append. */
	REQUIRE(write_file(g.path, g.orig, g.len) == 0);
	REQUIRE_EQ(flip_byte(g.path, g.ends[4] + ENTRY_HDR + 2), 0);
	REQUIRE(append_bytes(g.path, garbage, sizeof(garbage)) == 0);
	check_corrupt_open(dir, 1, g.ends[4], 0);
	CHECK(strstr(diag_last(), "payload checksum") != NULL);
	CHECK_EQ(file_size(g.path), (long long)g.len + (long long)sizeof(garbage));
	free(late);
	free(g.orig);
}

WAL_TEST(old_segment_version_is_refused)
{
	struct written g;
	REQUIRE_EQ(written_segment(dir, 3, &g), 0);
	/* Rewrite the header as version 1, with a checksum that matches it. */
	enc_u32(g.orig + 8, 1);
	enc_u32(g.orig + 12, crc32c(crc32c(0, g.orig, 12), g.orig + 16, 8));
	REQUIRE(write_file(g.path, g.orig, g.len) == 0);
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w = NULL;
	CHECK_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), STRATA_EVERSION);
	CHECK(w == NULL);
	const char *m = diag_last();
	if (strstr(m, "00000000000000000001.wal") == NULL || strstr(m, "version 1") == NULL) {
		fprintf(stderr, "  message: %s\n", m);
		CHECK(0);
	}
	CHECK_EQ(file_size(g.path), (long long)g.len);
	/* No fresh segment was created after the refused one (positions 1..4). */
	char next[4096];
	seg_path(next, sizeof(next), dir, 5);
	CHECK_EQ(file_size(next), -1);
	if (w != NULL)
		wal_close(w);
	free(g.orig);
}

/** Append n entries (thread 0, 1 + i % 2 rows) to w, keeping tickets. */
static int
append_n(struct wal *w, int from, int n, struct wal_ticket *tk)
{
	for (int i = from; i < from + n; i++) {
		int rc = append_entry(w, 0, i, 1 + i % 2, &tk[i]);
		if (rc)
			return rc;
	}
	return 0;
}

WAL_TEST(replay_after_skips_and_deletes_covered_segments)
{
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, 300);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	static struct wal_ticket tk[60];
	REQUIRE_EQ(append_n(w, 0, 60, tk), 0);
	wal_close(w);
	struct wal_segment_info before[128];
	int nb = wal_inspect_dir(dir, before, 128);
	REQUIRE(nb >= 6);
	/* Cut inside the two-row entry i = 31: it is replayed whole. */
	uint64_t cut = tk[31].first_seq;
	REQUIRE_EQ(tk[31].last_seq, cut + 1);
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, cut, cut + 1, collect_cb, s, &w), 0);
	CHECK_EQ(s->n, 60 - 31);
	CHECK_EQ(s->first[0], cut);
	CHECK_EQ(s->i[0], 31);
	CHECK_EQ(s->last, tk[59].last_seq);
	CHECK_EQ(s->out_of_order, 0);
	CHECK_EQ(s->bad_rows, 0);
	CHECK_EQ(wal_next_seq(w), tk[59].last_seq + 1);
	uint64_t nsegs;
	wal_usage(w, &nsegs, NULL, NULL);
	wal_close(w);
	struct wal_segment_info after[128];
	int na = wal_inspect_dir(dir, after, 128);
	int deleted = 0, kept = 0;
	for (int k = 0; k < nb; k++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%.64s", dir, before[k].name);
		if (before[k].last_seq <= cut) {
			CHECK_EQ(file_size(path), -1);
			deleted++;
		} else {
			CHECK_EQ(file_size(path), (long long)before[k].bytes);
			kept++;
		}
	}
	CHECK(deleted >= 3);
	CHECK(kept >= 3);
	CHECK_EQ(na, kept + 1);
	CHECK_EQ(nsegs, (uint64_t)kept + 1);
	free(s);
}

WAL_TEST(release_deletes_old_segments_but_never_the_current_one)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 300);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	static struct wal_ticket tk[40];
	REQUIRE_EQ(append_n(w, 0, 40, tk), 0);
	uint64_t n0, b0;
	wal_usage(w, &n0, &b0, NULL);
	REQUIRE(n0 >= 4);
	CHECK_EQ(count_segments(dir), (int)n0);
	uint64_t upto = tk[20].last_seq;
	CHECK_EQ(wal_release(w, upto), 0);
	uint64_t n1, b1;
	wal_usage(w, &n1, &b1, NULL);
	CHECK(n1 < n0);
	CHECK(b1 < b0);
	struct wal_segment_info info[64];
	int n = wal_inspect_dir(dir, info, 64);
	CHECK_EQ(n, (int)n1);
	for (int k = 0; k < n && k < 64; k++)
		CHECK(info[k].last_seq > upto);
	uint64_t bytes_on_disk = 0;
	for (int k = 0; k < n && k < 64; k++)
		bytes_on_disk += info[k].bytes;
	CHECK_EQ(bytes_on_disk, b1);
	CHECK_EQ(wal_release(w, UINT64_MAX), 0);
	wal_usage(w, &n1, NULL, NULL);
	CHECK_EQ(n1, 1);
	CHECK_EQ(count_segments(dir), 1);
	/* The current segment still takes appends. */
	struct wal_ticket t2;
	CHECK_EQ(append_entry(w, 0, 77, 1, &t2), 0);
	CHECK_EQ(t2.first_seq, tk[39].last_seq + 1);
	wal_close(w);
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK(s->n >= 1);
	CHECK_EQ(s->last, t2.last_seq);
	wal_close(w);
	free(s);
}

WAL_TEST(fdatasync_failure_turns_wal_readonly_and_keeps_acked_rows)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	pthread_mutex_lock(&fx_mu);
	fx_fail_sync_at = 4;
	fx_errno = EIO;
	pthread_mutex_unlock(&fx_mu);
	struct wal_ticket tk[6];
	for (int i = 0; i < 3; i++)
		CHECK_EQ(append_entry(w, 0, i, 1, &tk[i]), 0);
	CHECK_EQ(wal_failed(w), 0);
	CHECK_EQ(append_entry(w, 0, 3, 1, &tk[3]), STRATA_EREADONLY);
	if (strstr(diag_last(), ".wal") == NULL || strstr(diag_last(), "Input/output error") == NULL) {
		fprintf(stderr, "  message: %s\n", diag_last());
		CHECK(0);
	}
	CHECK_EQ(wal_failed(w), STRATA_EREADONLY);
	/* Never retried: the same ticket and later appends keep failing without IO. */
	int pw = fx_get(&fx_pwrites);
	CHECK_EQ(wal_wait(w, &tk[3]), STRATA_EREADONLY);
	strata_row rows[1];
	char keys[1][32];
	uint8_t *vals = make_rows(0, 4, 1, rows, keys);
	CHECK_EQ(wal_submit(w, rows, 1, &tk[4]), STRATA_EREADONLY);
	free(vals);
	CHECK(strstr(diag_last(), "Input/output error") != NULL);
	CHECK_EQ(fx_get(&fx_pwrites), pw);
	CHECK_EQ(fx_get(&fx_syncs), 4);
	/* Acknowledged tickets stay acknowledged. */
	CHECK_EQ(wal_wait(w, &tk[0]), 0);
	wal_close(w);
	CHECK_EQ(fx_get(&fx_pwrites), pw);
	CHECK_EQ(fx_get(&fx_syncs), 4);

	env_reset();
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK(s->n >= 3);
	for (int k = 0; k < 3 && k < s->n; k++) {
		CHECK_EQ(s->i[k], k);
		CHECK_EQ(s->first[k], tk[k].first_seq);
	}
	CHECK_EQ(s->bad_rows, 0);
	CHECK(wal_next_seq(w) >= tk[2].last_seq + 1);
	wal_close(w);
	free(s);
}

WAL_TEST(failed_sync_fails_every_waiter_of_the_batch_and_later)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	pthread_mutex_lock(&fx_mu);
	fx_block_until = GC_THREADS;
	fx_fail_sync_at = 1;
	fx_errno = EIO;
	pthread_mutex_unlock(&fx_mu);
	struct gc_arg args[GC_THREADS];
	run_gc_threads(w, args);
	for (int t = 0; t < GC_THREADS; t++) {
		CHECK_EQ(args[t].submit_rc, 0);
		CHECK_EQ(args[t].wait_rc, STRATA_EREADONLY);
		CHECK(strstr(args[t].msg, ".wal") != NULL);
	}
	/* Nothing was written, let alone acknowledged, after the failure. */
	CHECK_EQ(fx_get(&fx_syncs), 1);
	CHECK_EQ(fx_get(&fx_pwrites), fx_get(&fx_pwrites_at_failure));
	wal_close(w);
	CHECK_EQ(fx_get(&fx_syncs), 1);
}

/** A clock on which every fdatasync takes 400 ms, so that a group waits 200 ms. */
static _Atomic uint64_t slow_clock;

static uint64_t
slow_mono_ns(void)
{
	return atomic_fetch_add(&slow_clock, 400000000ull);
}

/** An appender that reports when its wait returned. */
struct late_arg {
	struct gc_arg a;
	atomic_int done;
};

static void *
late_main(void *p)
{
	struct late_arg *l = p;
	gc_main(&l->a);
	atomic_store(&l->done, 1);
	return NULL;
}

static void
late_start(struct late_arg *l, pthread_t *th, struct wal *w, int t)
{
	l->a = (struct gc_arg){.w = w, .t = t};
	atomic_store(&l->done, 0);
	pthread_create(th, NULL, late_main, l);
}

/** Wait up to ms for l to finish; 1 if it did. */
static int
late_done_within(struct late_arg *l, int ms)
{
	for (int i = 0; i < ms && !atomic_load(&l->done); i++)
		usleep(1000);
	return atomic_load(&l->done);
}

static void
fx_wait_submitted(int n)
{
	pthread_mutex_lock(&fx_mu);
	while (fx_submitted < n)
		pthread_cond_wait(&fx_cv, &fx_mu);
	pthread_mutex_unlock(&fx_mu);
}

/* Writers that defer leading a group, waiting for the writers of the last one, sleep
 * with no mutex and only the first of them on a timer: a fence must wake them all. */
WAL_TEST(a_fence_wakes_the_writers_waiting_to_form_a_group)
{
	env.mono_ns = slow_mono_ns;
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	o.group_wait_us = 10000000;
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	/* A group of one, held in its sync while three more writers queue: the next group
	 * expects four writers and, carrying three, the one after expects three. */
	fx_set_hold(1);
	struct late_arg l[6];
	pthread_t th[6];
	late_start(&l[0], &th[0], w, 0);
	REQUIRE(fx_wait_syncs(1));
	for (int t = 1; t < 4; t++)
		late_start(&l[t], &th[t], w, t);
	fx_wait_submitted(4);
	fx_set_hold(0);
	for (int t = 0; t < 4; t++) {
		pthread_join(th[t], NULL);
		CHECK_EQ(l[t].a.wait_rc, 0);
	}
	CHECK_EQ(fx_get(&fx_syncs), 2);
	/* Two writers of the three expected: they wait for a third, 200 ms at most, the
	 * second of them with no timer. The fence ends both waits. */
	late_start(&l[4], &th[4], w, 4);
	late_start(&l[5], &th[5], w, 5);
	fx_wait_submitted(6);
	usleep(20000);
	CHECK_EQ(fx_get(&fx_syncs), 2);
	wal_fence(w, "test: fenced by a newer owner");
	int done4 = late_done_within(&l[4], 5000), done5 = late_done_within(&l[5], 5000);
	CHECK(done4);
	CHECK(done5);
	REQUIRE(done4 && done5); /* a writer still asleep would never return */
	pthread_join(th[4], NULL);
	pthread_join(th[5], NULL);
	CHECK_EQ(l[4].a.wait_rc, STRATA_EFENCED);
	CHECK_EQ(l[5].a.wait_rc, STRATA_EFENCED);
	CHECK(strstr(l[5].a.msg, "fenced by a newer owner") != NULL);
	CHECK_EQ(fx_get(&fx_syncs), 2);
	wal_close(w);
}

WAL_TEST(enospc_on_write_reports_no_space)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	struct wal_ticket tk;
	CHECK_EQ(append_entry(w, 0, 0, 1, &tk), 0);
	fx_arm();
	pthread_mutex_lock(&fx_mu);
	fx_fail_pwrite_at = 1;
	fx_errno = ENOSPC;
	pthread_mutex_unlock(&fx_mu);
	CHECK_EQ(append_entry(w, 0, 1, 1, &tk), STRATA_EREADONLY);
	const char *m = diag_last();
	if (strstr(m, "No space left on device") == NULL || strstr(m, "ENOSPC") == NULL ||
	    strstr(m, "00000000000000000001.wal") == NULL) {
		fprintf(stderr, "  message: %s\n", m);
		CHECK(0);
	}
	CHECK_EQ(fx_get(&fx_syncs), 0);
	CHECK_EQ(append_entry(w, 0, 2, 1, &tk), STRATA_EREADONLY);
	CHECK(strstr(diag_last(), "No space left on device") != NULL);
	wal_close(w);
	env_reset();
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK_EQ(s->n, 1);
	wal_close(w);
	free(s);
}

static int
inject_before_sync(const char *name, const void *arg)
{
	return strcmp(name, "wal.before_sync") == 0;
}

WAL_TEST(injected_point_before_sync_fails_the_leader)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	env.point = inject_before_sync;
	struct wal_ticket tk;
	CHECK_EQ(append_entry(w, 0, 0, 1, &tk), STRATA_EINJECTED);
	CHECK_EQ(fx_get(&fx_syncs), 0);
	CHECK_EQ(wal_failed(w), STRATA_EREADONLY);
	CHECK_EQ(append_entry(w, 0, 1, 1, &tk), STRATA_EREADONLY);
	env.point = NULL;
	wal_close(w);
	CHECK_EQ(fx_get(&fx_syncs), 0);
}

WAL_TEST(positions_are_monotonic_across_reopen_and_rolls)
{
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, 200);
	struct wal *w;
	static struct wal_ticket tk[80];
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), 1);
	REQUIRE_EQ(append_n(w, 0, 20, tk), 0);
	wal_close(w);
	for (int i = 1; i < 20; i++)
		CHECK_EQ(tk[i].first_seq, tk[i - 1].last_seq + 1);
	CHECK(count_segments(dir) >= 4);

	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), tk[19].last_seq + 1);
	REQUIRE_EQ(append_n(w, 20, 20, tk), 0);
	CHECK_EQ(tk[20].first_seq, tk[19].last_seq + 1);
	wal_close(w);

	/* Everything covered: every old segment goes, the position stays. */
	uint64_t last = tk[39].last_seq;
	REQUIRE_EQ(wal_open(&o, last, last + 1, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), last + 1);
	wal_close(w);
	CHECK_EQ(count_segments(dir), 1);
	/* A reopen that knows nothing (floor 0) still continues after the empty segment. */
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), last + 1);
	wal_close(w);
	CHECK_EQ(count_segments(dir), 1);
	/* A floor jumps ahead, and the jump survives a reopen without it. */
	REQUIRE_EQ(wal_open(&o, 0, last + 100, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), last + 100);
	wal_close(w);
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	CHECK_EQ(wal_next_seq(w), last + 100);
	REQUIRE_EQ(append_n(w, 40, 20, tk), 0);
	CHECK_EQ(tk[40].first_seq, last + 100);
	wal_close(w);
	/* A floor below the log's end does not move positions back. */
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 5, collect_cb, s, &w), 0);
	CHECK_EQ(wal_next_seq(w), tk[59].last_seq + 1);
	CHECK_EQ(s->n, 20);
	CHECK_EQ(s->first[0], last + 100);
	CHECK_EQ(s->out_of_order, 0);
	wal_close(w);
	free(s);
}

WAL_TEST(interval_mode_acks_after_write_and_syncs_in_background)
{
	struct wal_options o = opts(dir, STRATA_SYNC_INTERVAL, 0);
	o.sync_interval_ms = 2;
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	/* Every fdatasync blocks: appends must still be acknowledged. */
	fx_set_hold(1);
	struct wal_ticket tk[10];
	for (int i = 0; i < 10; i++)
		CHECK_EQ(append_entry(w, 0, i, 1, &tk[i]), 0);
	/* The background thread reaches fdatasync by itself (bounded wait, not a threshold). */
	int seen_sync = fx_wait_syncs(1);
	fx_set_hold(0);
	CHECK(seen_sync);
	CHECK_EQ(fx_get(&fx_hold_timeouts), 0);
	wal_close(w);
	CHECK(fx_get(&fx_syncs) >= 1);
	env_reset();
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK_EQ(s->n, 10);
	wal_close(w);
	free(s);
}

/** One append of fsync_mode_acks_only_after_fdatasync. */
struct ack_arg {
	/** The WAL. */
	struct wal *w;
	/** Result of the append. */
	int rc;
	/** Set once the append returned. */
	int done;
};

static void *
ack_main(void *p)
{
	struct ack_arg *a = p;
	struct wal_ticket tk;
	int rc = append_entry(a->w, 0, 0, 1, &tk);
	pthread_mutex_lock(&fx_mu);
	a->rc = rc;
	a->done = 1;
	pthread_mutex_unlock(&fx_mu);
	return NULL;
}

WAL_TEST(fsync_mode_acks_only_after_fdatasync)
{
	struct wal_options o = opts(dir, STRATA_SYNC_FSYNC, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	fx_set_hold(1);
	struct ack_arg a = {.w = w};
	pthread_t th;
	pthread_create(&th, NULL, ack_main, &a);
	CHECK(fx_wait_syncs(1));
	/* The fdatasync is in flight and held: the append must not have returned. */
	pthread_mutex_lock(&fx_mu);
	CHECK_EQ(a.done, 0);
	fx_hold = 0;
	pthread_cond_broadcast(&fx_cv);
	pthread_mutex_unlock(&fx_mu);
	pthread_join(th, NULL);
	CHECK_EQ(a.rc, 0);
	CHECK_EQ(fx_get(&fx_hold_timeouts), 0);
	wal_close(w);
}

WAL_TEST(interval_mode_close_makes_the_tail_durable)
{
	struct wal_options o = opts(dir, STRATA_SYNC_INTERVAL, 0);
	o.sync_interval_ms = 3600u * 1000u;
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	fx_arm();
	struct wal_ticket tk;
	CHECK_EQ(append_entry(w, 0, 0, 1, &tk), 0);
	CHECK_EQ(fx_get(&fx_syncs), 0);
	wal_close(w);
	CHECK_EQ(fx_get(&fx_syncs), 1);
}

WAL_TEST(none_mode_never_syncs)
{
	fx_arm();
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, 200);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	static struct wal_ticket tk[20];
	REQUIRE_EQ(append_n(w, 0, 20, tk), 0);
	wal_close(w);
	CHECK_EQ(fx_get(&fx_syncs), 0);
	CHECK(fx_get(&fx_pwrites) > 0);
	struct seen *s = seen_new();
	REQUIRE_EQ(wal_open(&o, 0, 0, collect_cb, s, &w), 0);
	CHECK_EQ(s->n, 20);
	wal_close(w);
	CHECK_EQ(fx_get(&fx_syncs), 0);
	free(s);
}

WAL_TEST(inspect_reports_without_modifying)
{
	long long ends[6];
	REQUIRE_EQ(write_entries(dir, 5, ends, 0), 0);
	char path[4096];
	seg_path(path, sizeof(path), dir, 1);
	long long cut = ends[4] + 7;
	REQUIRE(truncate(path, cut) == 0);
	struct wal_segment_info info[4];
	REQUIRE_EQ(wal_inspect_dir(dir, info, 4), 1);
	CHECK(strcmp(info[0].name, "00000000000000000001.wal") == 0);
	CHECK_EQ(info[0].first_seq, 1);
	CHECK_EQ(info[0].entries, 4);
	CHECK_EQ(info[0].last_seq, 6);
	CHECK_EQ(info[0].bytes, cut);
	CHECK_EQ(info[0].valid_bytes, ends[4]);
	CHECK_EQ(file_size(path), cut);
	CHECK_EQ(wal_inspect_dir("/nonexistent/strata-wal", info, 4) < 0, 1);
	/* While a WAL is open: its torn tail is already cut, the fresh segment shows. */
	struct wal_options o = opts(dir, STRATA_SYNC_NONE, 0);
	struct wal *w;
	REQUIRE_EQ(wal_open(&o, 0, 0, NULL, NULL, &w), 0);
	struct wal_ticket tk;
	CHECK_EQ(append_entry(w, 0, 50, 2, &tk), 0);
	REQUIRE_EQ(wal_inspect_dir(dir, info, 4), 2);
	CHECK_EQ(info[0].bytes, ends[4]);
	CHECK_EQ(info[0].valid_bytes, ends[4]);
	CHECK_EQ(info[1].first_seq, 7);
	CHECK_EQ(info[1].entries, 1);
	CHECK_EQ(info[1].last_seq, 8);
	CHECK_EQ(info[1].valid_bytes, info[1].bytes);
	/* Fewer slots than segments: the count still says how many there are. */
	CHECK_EQ(wal_inspect_dir(dir, info, 1), 2);
	wal_close(w);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	diag_log_level = LOG_LVL_ERROR + 1;
	RUN(round_trip_replays_every_acked_row_once_in_order);
	RUN(group_commit_shares_fdatasync_across_waiters);
	RUN(torn_tail_is_truncated_to_last_whole_entry);
	RUN(bad_checksum_on_final_entry_is_a_torn_tail);
	RUN(torn_segment_header_is_dropped);
	RUN(corrupt_middle_entry_fails_open_naming_segment_and_offset);
	RUN(torn_entry_in_older_segment_is_corruption);
	RUN(position_gap_or_repeat_is_corruption);
	RUN(payload_over_max_entry_bytes_is_corruption);
	RUN(flipped_length_bit_before_tail_is_corruption);
	RUN(zero_filled_tail_is_torn);
	RUN(garbage_tail_is_corruption);
	RUN(old_segment_version_is_refused);
	RUN(replay_after_skips_and_deletes_covered_segments);
	RUN(release_deletes_old_segments_but_never_the_current_one);
	RUN(fdatasync_failure_turns_wal_readonly_and_keeps_acked_rows);
	RUN(failed_sync_fails_every_waiter_of_the_batch_and_later);
	RUN(a_fence_wakes_the_writers_waiting_to_form_a_group);
	RUN(enospc_on_write_reports_no_space);
	RUN(injected_point_before_sync_fails_the_leader);
	RUN(positions_are_monotonic_across_reopen_and_rolls);
	RUN(fsync_mode_acks_only_after_fdatasync);
	RUN(interval_mode_acks_after_write_and_syncs_in_background);
	RUN(interval_mode_close_makes_the_tail_durable);
	RUN(none_mode_never_syncs);
	RUN(inspect_reports_without_modifying);
	return HARNESS_END("test_wal");
}
