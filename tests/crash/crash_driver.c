/*
 * crash_driver.c — the crash-kill harness. It runs crash_child (a process embedding
 * strata with sync=fsync and a seeded random workload) on one store directory,
 * SIGKILLs it at random moments — a share of them while a thread is paused inside
 * seal, prepare or commit at an engine test point — and after every kill reopens the
 * store itself and checks that:
 *   - every acknowledged row is readable with its value, and every key whose newest
 *     acknowledged row is a delete is absent from gets and scans (a later acknowledged
 *     write of the key wins; a write that was in flight at the kill may show or not,
 *     and a batch in flight shows entirely or not at all);
 *   - no key shows two values (a full scan has strictly increasing keys, agreeing
 *     with point gets), and no key appears that was never written;
 *   - the manifest epoch only grows (before the reopen it is the child's, after it
 *     the driver's claim is newer);
 *   - after the orphan collection of strata_open, no object under the shard prefix is
 *     unreferenced by the manifest (generations, runs, the kept manifest versions),
 *     and no WAL segment wholly below the replay cursor is left;
 *   - the child's stderr holds no sanitizer report or failed assertion.
 * Temp files of interrupted object writes (".tmp.*", never listed as objects) are
 * counted and reported; --strict-tmp makes each one a failure.
 * Then it restarts the child on the same directory, continuing the key space.
 *
 * usage: crash_driver [--seed N] [--kills N] [--threads N] [--shards N] [--keycap N]
 *                     [--max-ms N] [--point-pct N] [--dir DIR] [--keep] [--child PATH]
 *                     [--strict-tmp] [--verbose]
 * Defaults are the short run of `make test`; `make soak` passes --kills 1000.
 * It ends with "# crash: N passed, N failed" (one test per kill) for tests/run.sh.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../node/core/manifest.h"
#include "../../node/core/wal.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "crash_common.h"

/** Most failures printed per kill (the rest are only counted). */
#define MAX_PRINTED 12
/** Milliseconds to wait for a test point before killing anyway. */
#define POINT_TIMEOUT_MS 3000
/** Milliseconds to wait for the child to report its store open. */
#define READY_TIMEOUT_MS 20000
/** Seconds after which a child kills itself if the driver forgot it. */
#define CHILD_MAX_SECONDS 120
/** Most WAL segments inspected per shard. */
#define MAX_SEGMENTS 4096
/** Most objects a shard may reference. */
#define MAX_REFS 65536

/** Command-line settings. */
static struct {
	/** Seed of every random decision of the run. */
	uint64_t seed;
	/** Kills (and checks) to run. */
	uint32_t kills;
	/** Writer threads of the child. */
	uint32_t threads;
	/** Shards of the store. */
	uint32_t shards;
	/** Key indexes per thread stay below this (then keys are only overwritten). */
	uint32_t keycap;
	/** Largest delay of a timed kill after the child is ready. */
	uint32_t max_ms;
	/** Percentage of kills that pause at a test point first. */
	uint32_t point_pct;
	/** Working directory (store in <dir>/store); NULL = a fresh temp dir. */
	const char *dir;
	/** Keep the working directory even when everything passed. */
	int keep;
	/** Path of crash_child. */
	const char *child;
	/** Count stale temp files as failures. */
	int strict_tmp;
	/** Print one line per kill. */
	int verbose;
} opt = {0, 60, 4, 2, 4000, 150, 65, NULL, 0, NULL, 0, 0};

/** What the driver knows about one key. */
struct kstate {
	/** The newest acknowledged write (valid when has_acked). */
	struct crash_desc acked;
	/** A write announced but not acknowledged when the child died (valid when has_pend). */
	struct crash_desc pend;
	uint8_t has_acked, has_pend;
	/** Set once its loss was counted (until a new acknowledgement). */
	uint8_t lost;
	/** What the check found: 0 absent, 1 the acked value (absent for a delete), 2 the
	 *  pending value (absent for a delete), 3 another, 4 absent, which is both the acked
	 *  state and the pending delete. */
	uint8_t seen;
	/** Acknowledged writes not yet confirmed by a check. */
	uint32_t unverified;
};

/** An append in flight of one thread. */
struct pending {
	/** Set while announced and not acknowledged. */
	int on;
	/** Its counter. */
	uint64_t counter;
	/** Rows and their key indexes. */
	uint32_t n;
	uint32_t idx[CRASH_MAX_BATCH];
};

/** The model and the figures of the run. */
static struct {
	/** Per thread, per key index. */
	struct kstate *k[CRASH_MAX_THREADS];
	/** Per thread: the append in flight. */
	struct pending pb[CRASH_MAX_THREADS];
	/** One above the highest key index ever announced. */
	uint32_t next;
	/** Incarnation of the running child. */
	uint32_t inc;
	/** Per shard: the epoch and manifest version seen at the last check. */
	uint64_t epoch[CRASH_MAX_SHARDS], version[CRASH_MAX_SHARDS];
	/** Per shard: epochs the child reported when ready (0 = not ready). */
	uint64_t child_epoch[CRASH_MAX_SHARDS];
	int ready;
	/** Failures of the current check, and of the run. */
	int cur_failures;
	uint32_t passed, failed;
	/** Row figures: acknowledged, confirmed at the next check, overwritten by a later
	 *  acknowledged write before a check, missing, in flight yet found durable. */
	uint64_t acked_rows, verified, superseded, lost, recovered;
	/** Acknowledged rows that were deletes. */
	uint64_t acked_deletes;
	/** Keys compared with the model, and point gets compared with the scan. */
	uint64_t keys_checked, gets_checked;
	/** Unreferenced objects and kept WAL segments found after reopens. */
	uint64_t leaked_objects, leaked_wal;
	/** Seals, merges and compactions the children reported committed. */
	uint64_t seals, merges, compactions;
	/** Kills at a test point (of which inside seal/prepare/commit), kills whose point
	 *  was not reached in time, timed kills. */
	uint64_t point_kills, inside_kills, point_misses, timed_kills;
	/** Pauses per test point (crash_points order). */
	uint64_t point_hits[CRASH_NPOINTS];
	/** Temp files of interrupted object writes found by the last check, and their bytes;
	 *  the most found by any check. */
	uint64_t stale_tmp, stale_tmp_bytes, stale_tmp_max;
} M;

/** Working directory, store directory, logs. */
static char work[1024], store[1100], child_log[1100], drv_log[1100];
/** The driver's own log (engine messages of its reopens). */
static FILE *drv_log_f;
/** Scratch for generated values. */
static char scratch[CRASH_VALUE_CAP];
/** Kill number being checked (1-based), for messages. */
static uint32_t kill_no;

static void
bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
bad(const char *fmt, ...)
{
	if (M.cur_failures++ >= MAX_PRINTED)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "  kill %u (incarnation %u): ", kill_no, M.inc);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
log_sink(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	if (drv_log_f != NULL && level >= LOG_LVL_INFO)
		fprintf(drv_log_f, "kill=%u level=%s msg=\"%s\"\n", kill_no, names[level & 3], msg);
}

static void
print_repro(FILE *f, const char *argv0)
{
	fprintf(f, "# crash: reproduce: %s --seed %llu --kills %u --threads %u --shards %u "
		"--keycap %u --max-ms %u --point-pct %u%s\n", argv0, (unsigned long long)opt.seed,
		opt.kills, opt.threads, opt.shards, opt.keycap, opt.max_ms, opt.point_pct,
		opt.strict_tmp ? " --strict-tmp" : "");
}

/* ---------------------------------------------------------------- protocol */

/** Apply one protocol line; returns 1 when it was "P" (paused), 0 otherwise. */
static int
apply_line(char *line)
{
	char *save = NULL;
	char *tok = strtok_r(line, " ", &save);
	if (tok == NULL)
		return 0;
	if (strcmp(tok, "I") == 0) {
		unsigned th, n;
		unsigned long long ctr;
		char *a = strtok_r(NULL, " ", &save), *b = strtok_r(NULL, " ", &save),
		     *c = strtok_r(NULL, " ", &save);
		if (!a || !b || !c || sscanf(a, "%u", &th) != 1 || sscanf(b, "%llu", &ctr) != 1 ||
		    sscanf(c, "%u", &n) != 1 || th >= opt.threads || n == 0 || n > CRASH_MAX_BATCH) {
			bad("protocol: bad announce line");
			return 0;
		}
		struct pending *p = &M.pb[th];
		if (p->on)
			bad("protocol: thread %u announced append %llu with %llu still in flight", th, ctr,
			    (unsigned long long)p->counter);
		p->on = 1;
		p->counter = ctr;
		p->n = n;
		for (unsigned i = 0; i < n; i++) {
			unsigned idx, extra = 0;
			char *x = strtok_r(NULL, " ", &save), *y = strtok_r(NULL, " ", &save);
			int del = y != NULL && strcmp(y, "d") == 0;
			if (!x || !y || sscanf(x, "%u", &idx) != 1 ||
			    (!del && sscanf(y, "%u", &extra) != 1) || idx >= opt.keycap ||
			    extra > CRASH_MAX_EXTRA) {
				bad("protocol: bad row in announce line");
				p->on = 0;
				return 0;
			}
			p->idx[i] = idx;
			struct kstate *ks = &M.k[th][idx];
			ks->pend = (struct crash_desc){M.inc, th, ctr, i, extra, (uint32_t)del};
			ks->has_pend = 1;
			if (idx + 1 > M.next)
				M.next = idx + 1;
		}
	} else if (strcmp(tok, "A") == 0) {
		unsigned th;
		unsigned long long ctr;
		char *a = strtok_r(NULL, " ", &save), *b = strtok_r(NULL, " ", &save);
		if (!a || !b || sscanf(a, "%u", &th) != 1 || sscanf(b, "%llu", &ctr) != 1 ||
		    th >= opt.threads || !M.pb[th].on || M.pb[th].counter != ctr) {
			bad("protocol: acknowledgement of an append never announced");
			return 0;
		}
		struct pending *p = &M.pb[th];
		for (uint32_t i = 0; i < p->n; i++) {
			struct kstate *ks = &M.k[th][p->idx[i]];
			ks->acked = ks->pend;
			ks->has_acked = 1;
			ks->has_pend = 0;
			ks->lost = 0;
			ks->unverified++;
			M.acked_deletes += ks->acked.del;
		}
		M.acked_rows += p->n;
		p->on = 0;
	} else if (strcmp(tok, "R") == 0) {
		M.ready = 1;
		strtok_r(NULL, " ", &save); /* incarnation */
		for (uint32_t s = 0; s < opt.shards; s++) {
			char *e = strtok_r(NULL, " ", &save);
			unsigned long long ep = 0;
			if (e == NULL || sscanf(e, "%llu", &ep) != 1)
				bad("protocol: ready line without the epoch of shard %u", s);
			M.child_epoch[s] = ep;
		}
	} else if (strcmp(tok, "P") == 0) {
		char *pt = strtok_r(NULL, " ", &save);
		for (size_t i = 0; pt != NULL && i < CRASH_NPOINTS; i++)
			if (strcmp(pt, crash_points[i]) == 0)
				M.point_hits[i]++;
		return 1;
	} else if (strcmp(tok, "M") == 0) {
		char *op = strtok_r(NULL, " ", &save);
		if (op && strcmp(op, "seal") == 0)
			M.seals++;
		else if (op && strcmp(op, "merge") == 0)
			M.merges++;
		else if (op && strcmp(op, "compact") == 0)
			M.compactions++;
	} else if (strcmp(tok, "E") == 0) {
		char *rest = strtok_r(NULL, "", &save);
		bad("the child reported an error: %s", rest ? rest : "");
	} else {
		bad("protocol: unknown line '%s'", tok);
	}
	return 0;
}

/** Line assembly of the child's pipe. */
struct reader {
	/** The pipe. */
	int fd;
	/** Bytes not yet forming a full line. */
	char buf[CRASH_LINE_MAX * 4];
	size_t len;
	/** Set at end of file. */
	int eof;
};

/** Read what is available (waiting up to timeout_ms); apply complete lines.
 *  Returns 1 if a "P" line was applied. */
static int
pump(struct reader *r, int timeout_ms)
{
	struct pollfd pfd = {r->fd, POLLIN, 0};
	int pr = poll(&pfd, 1, timeout_ms);
	if (pr <= 0)
		return 0;
	ssize_t n = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
	if (n < 0)
		return errno == EINTR ? 0 : (r->eof = 1, 0);
	if (n == 0) {
		r->eof = 1;
		return 0;
	}
	r->len += (size_t)n;
	int paused = 0;
	size_t start = 0;
	for (size_t i = 0; i < r->len; i++) {
		if (r->buf[i] != '\n')
			continue;
		r->buf[i] = '\0';
		paused |= apply_line(r->buf + start);
		start = i + 1;
	}
	memmove(r->buf, r->buf + start, r->len - start);
	r->len -= start;
	if (r->len == sizeof(r->buf)) {
		bad("protocol: a line longer than %zu bytes", sizeof(r->buf));
		r->len = 0;
	}
	return paused;
}

/* ---------------------------------------------------------------- the child */

static pid_t
spawn_child(int *fd_out, const char *point, uint32_t count, uint64_t seed)
{
	int p[2];
	if (pipe(p) != 0) {
		perror("crash_driver: pipe");
		exit(2);
	}
	char a_seed[32], a_inc[16], a_next[16], a_cap[16], a_th[16], a_sh[16], a_max[16], a_cnt[16];
	snprintf(a_seed, sizeof(a_seed), "%llu", (unsigned long long)seed);
	snprintf(a_inc, sizeof(a_inc), "%u", M.inc);
	snprintf(a_next, sizeof(a_next), "%u", M.next);
	snprintf(a_cap, sizeof(a_cap), "%u", opt.keycap);
	snprintf(a_th, sizeof(a_th), "%u", opt.threads);
	snprintf(a_sh, sizeof(a_sh), "%u", opt.shards);
	snprintf(a_max, sizeof(a_max), "%u", CHILD_MAX_SECONDS);
	snprintf(a_cnt, sizeof(a_cnt), "%u", count);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("crash_driver: fork");
		exit(2);
	}
	if (pid == 0) {
		close(p[0]);
		if (dup2(p[1], 1) < 0)
			_exit(6);
		close(p[1]);
		int lf = open(child_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (lf >= 0) {
			dup2(lf, 2);
			close(lf);
		}
		if (point != NULL) {
			setenv("CRASH_PAUSE_POINT", point, 1);
			setenv("CRASH_PAUSE_COUNT", a_cnt, 1);
		} else {
			unsetenv("CRASH_PAUSE_POINT");
			unsetenv("CRASH_PAUSE_COUNT");
		}
		execl(opt.child, opt.child, store, a_seed, a_inc, a_next, a_cap, a_th, a_sh, a_max,
		      (char *)NULL);
		fprintf(stderr, "crash_driver: exec %s: %s\n", opt.child, strerror(errno));
		_exit(7);
	}
	close(p[1]);
	*fd_out = p[0];
	return pid;
}

/** Size of a file (0 if absent). */
static off_t
file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/** Fail the kill if the child's stderr since from holds a sanitizer report (the child is
 *  killed, so a sanitizer that only reports at exit would never be heard otherwise). */
static void
scan_child_log(off_t from)
{
	static const char *const marks[] = {"ERROR: AddressSanitizer", "WARNING: ThreadSanitizer",
					    "runtime error:", "ERROR: LeakSanitizer",
					    "Assertion", "SUMMARY: "};
	FILE *f = fopen(child_log, "r");
	if (f == NULL)
		return;
	if (fseeko(f, from, SEEK_SET) == 0) {
		char line[1024];
		while (fgets(line, sizeof(line), f) != NULL) {
			for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
				if (strstr(line, marks[i]) != NULL) {
					line[strcspn(line, "\n")] = '\0';
					bad("the child's stderr has a report: %s (see %s)", line, child_log);
					break;
				}
			}
		}
	}
	fclose(f);
}

/** Run one incarnation and kill it. */
static void
child_run(struct crash_rng *rng)
{
	const char *point = NULL;
	uint32_t count = 1, delay = 0;
	int inside = 0;
	if (crash_below(rng, 100) < opt.point_pct) {
		/* Three in four point kills land inside seal, prepare or commit. */
		size_t i = crash_below(rng, 4) != 0 ? crash_below(rng, CRASH_INSIDE_POINTS)
						    : CRASH_INSIDE_POINTS +
							      crash_below(rng, CRASH_NPOINTS - CRASH_INSIDE_POINTS);
		point = crash_points[i];
		inside = i < CRASH_INSIDE_POINTS;
		count = 1 + (uint32_t)crash_below(rng, 3);
	} else {
		delay = 1 + (uint32_t)crash_below(rng, opt.max_ms);
	}
	uint32_t linger = (uint32_t)crash_below(rng, 3);
	uint64_t child_seed = crash_next(rng);
	memset(M.child_epoch, 0, sizeof(M.child_epoch));
	M.ready = 0;
	off_t log_from = file_size(child_log);
	int fd;
	pid_t pid = spawn_child(&fd, point, count, child_seed);
	struct reader r = {.fd = fd, .len = 0, .eof = 0};
	uint64_t t0 = now_ms(), ready_at = 0, deadline = 0;
	int paused = 0;
	while (!r.eof) {
		uint64_t now = now_ms();
		if (!M.ready && now - t0 > READY_TIMEOUT_MS) {
			bad("the child did not open the store within %d ms", READY_TIMEOUT_MS);
			break;
		}
		if (M.ready && ready_at == 0) {
			ready_at = now;
			deadline = point ? now + POINT_TIMEOUT_MS : now + delay;
		}
		if (ready_at && now >= deadline)
			break;
		int wait = ready_at ? (int)(deadline - now) : 50;
		if (pump(&r, wait > 50 ? 50 : wait) && !paused) {
			paused = 1;
			deadline = now_ms() + linger;
		}
	}
	kill(pid, SIGKILL);
	/* Lines written before the kill are still in the pipe: apply them all. */
	while (!r.eof)
		pump(&r, 1000);
	close(fd);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
		bad("the child ended on its own (%s %d) before the kill; see %s",
		    WIFSIGNALED(st) ? "signal" : "exit status",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), child_log);
	scan_child_log(log_from);
	if (point != NULL && paused) {
		M.point_kills++;
		M.inside_kills += inside;
	} else if (point != NULL) {
		M.point_misses++;
	} else {
		M.timed_kills++;
	}
	if (opt.verbose)
		fprintf(stderr, "  kill %u: %s%s%s after %llu ms\n", kill_no,
			point ? "at " : "timed", point ? point : "", point && !paused ? " (not reached)" : "",
			(unsigned long long)(now_ms() - t0));
}

/* ---------------------------------------------------------------- checks */

/** Context of the verifying scan of one shard. */
struct scan_ctx {
	/** Shard scanned. */
	uint32_t shard;
	/** Previous key. */
	char prev[CRASH_KEY_CAP + 8];
	size_t prev_len;
	/** Rows seen. */
	uint64_t rows;
};

/** Classify a value found for key state ks: 1 acked, 2 pending, 3 neither. */
static uint8_t
classify(const struct kstate *ks, const void *val, size_t len)
{
	if (ks->has_acked && !ks->acked.del && crash_value_is(val, len, &ks->acked, scratch))
		return 1;
	if (ks->has_pend && !ks->pend.del && crash_value_is(val, len, &ks->pend, scratch))
		return 2;
	return 3;
}

/** Class of an absent key (see kstate.seen): a delete acknowledged or in flight, or 0. */
static uint8_t
classify_absent(const struct kstate *ks)
{
	int acked_absent = !ks->has_acked || ks->acked.del;
	if (ks->has_pend && ks->pend.del)
		return acked_absent ? 4 : 2;
	return ks->has_acked && ks->acked.del ? 1 : 0;
}

static int
verify_scan_cb(void *ctx, const strata_row *row)
{
	struct scan_ctx *sc = ctx;
	if (row->key_len > CRASH_KEY_CAP) {
		bad("shard %u: scan returned a key of %zu bytes", sc->shard, row->key_len);
		return 0;
	}
	if (sc->rows > 0) {
		size_t m = sc->prev_len < row->key_len ? sc->prev_len : row->key_len;
		int c = memcmp(sc->prev, row->key, m);
		if (c > 0 || (c == 0 && sc->prev_len >= row->key_len))
			bad("shard %u: scan keys not strictly increasing ('%.*s' then '%.*s'): a key "
			    "shows twice", sc->shard, (int)sc->prev_len, sc->prev, (int)row->key_len,
			    (const char *)row->key);
	}
	memcpy(sc->prev, row->key, row->key_len);
	sc->prev_len = row->key_len;
	sc->rows++;
	uint32_t th, idx;
	if (crash_parse_key(row->key, row->key_len, &th, &idx) != 0 || th >= opt.threads ||
	    idx >= opt.keycap || th % opt.shards != sc->shard) {
		bad("shard %u: scan returned a key no thread of this shard writes: '%.*s'", sc->shard,
		    (int)row->key_len, (const char *)row->key);
		return 0;
	}
	struct kstate *ks = &M.k[th][idx];
	if (!ks->has_acked && !ks->has_pend) {
		bad("shard %u: key '%.*s' was never written but is present", sc->shard,
		    (int)row->key_len, (const char *)row->key);
		return 0;
	}
	if (ks->seen != 0)
		bad("shard %u: key '%.*s' seen twice by one scan", sc->shard, (int)row->key_len,
		    (const char *)row->key);
	ks->seen = classify(ks, row->value, row->value_len);
	if (ks->seen == 3 && ks->has_acked && ks->acked.del)
		bad("shard %u: key '%.*s' reads back (%zu bytes, '%.*s') after an acknowledged delete",
		    sc->shard, (int)row->key_len, (const char *)row->key, row->value_len,
		    (int)(row->value_len < 40 ? row->value_len : 40), (const char *)row->value);
	else if (ks->seen == 3)
		bad("shard %u: key '%.*s' shows neither its newest acknowledged value nor the write in "
		    "flight (%zu bytes, '%.*s')",
		    sc->shard, (int)row->key_len, (const char *)row->key, row->value_len,
		    (int)(row->value_len < 40 ? row->value_len : 40), (const char *)row->value);
	return 0;
}

/** Point gets must agree with the scan. */
static void
verify_get(strata *db, uint32_t th, uint32_t idx)
{
	struct kstate *ks = &M.k[th][idx];
	char key[CRASH_KEY_CAP];
	size_t kl = crash_key(key, th, idx);
	void *v = NULL;
	size_t vl = 0;
	int rc = strata_get(db, th % opt.shards, key, kl, &v, &vl);
	M.gets_checked++;
	uint8_t got;
	if (rc == STRATA_NOTFOUND) {
		got = ks->seen == 0 ? 0 : classify_absent(ks);
	} else if (rc != 0) {
		bad("get '%s': %s: %s", key, strata_strerror(rc), strata_last_error());
		return;
	} else {
		got = classify(ks, v, vl);
		strata_free(v);
	}
	if (got != ks->seen)
		bad("key '%s': get and scan disagree (get class %u, scan class %u)", key, got, ks->seen);
}

/** Check every key against the model after a scan; resolve what was in flight. */
static void
verify_model(void)
{
	for (uint32_t th = 0; th < opt.threads; th++)
		for (uint32_t idx = 0; idx < M.next; idx++)
			if (M.k[th][idx].seen == 0)
				M.k[th][idx].seen = classify_absent(&M.k[th][idx]);
	for (uint32_t th = 0; th < opt.threads; th++) {
		struct pending *p = &M.pb[th];
		if (p->on) {
			uint32_t fresh = 0, either = 0;
			for (uint32_t i = 0; i < p->n; i++) {
				fresh += M.k[th][p->idx[i]].seen == 2;
				either += M.k[th][p->idx[i]].seen == 4;
			}
			if (fresh != 0 && fresh + either != p->n)
				bad("thread %u: append %llu in flight at the kill shows %u of its %u rows: a "
				    "batch must be all or nothing", th, (unsigned long long)p->counter,
				    fresh, p->n);
			p->on = 0;
		}
		for (uint32_t idx = 0; idx < M.next; idx++) {
			struct kstate *ks = &M.k[th][idx];
			if (!ks->has_acked && !ks->has_pend)
				continue;
			M.keys_checked++;
			if (ks->seen == 2 || ks->seen == 4) {
				/* The write in flight reached the log: it is durable now. */
				if (ks->unverified > 0)
					M.superseded += ks->unverified;
				ks->unverified = 0;
				ks->acked = ks->pend;
				ks->has_acked = 1;
				ks->lost = 0;
				M.recovered++;
			} else if (ks->has_acked && ks->seen == 1) {
				if (ks->unverified > 0) {
					M.verified++;
					M.superseded += ks->unverified - 1;
				}
				ks->unverified = 0;
			} else if (ks->has_acked && !ks->lost) {
				char key[CRASH_KEY_CAP];
				crash_key(key, th, idx);
				bad("key '%s': acknowledged %s i%u.t%u.c%llu.r%u %s", key,
				    ks->acked.del ? "delete" : "value", ks->acked.inc, ks->acked.thread,
				    (unsigned long long)ks->acked.counter, ks->acked.row,
				    ks->acked.del ? "was undone: the key reads back"
				    : ks->seen == 0 ? "is missing" : "was replaced by a value never acknowledged");
				M.lost++;
				ks->lost = 1;
				if (ks->unverified > 1)
					M.superseded += ks->unverified - 1;
				ks->unverified = 0;
			}
			ks->has_pend = 0;
			ks->seen = 0;
		}
	}
}

/** A set of object keys the manifest references. */
struct refs {
	/** The keys. */
	char (*key)[192];
	uint32_t n;
	/** Manifest log positions (entries and snapshots) kept: [log_floor, log_top]. */
	uint64_t log_floor, log_top;
};

static int
refs_has(const struct refs *r, const char *key)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (strcmp(r->key[i], key) == 0)
			return 1;
	uint64_t v;
	int is_snap;
	return manifest_parse_log_key(key, &v, &is_snap) == 0 && v >= r->log_floor && v <= r->log_top;
}

/** Walk <objects>/<rel> and report files the manifest does not reference. */
static void
walk_objects(const char *root, const char *rel, const struct refs *refs)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	DIR *d = opendir(path);
	if (d == NULL) {
		if (errno != ENOENT)
			bad("opendir %s: %s", path, strerror(errno));
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[PATH_MAX];
		snprintf(sub, sizeof(sub), "%s%s", rel, de->d_name);
		char full[PATH_MAX + 8];
		snprintf(full, sizeof(full), "%s/%s", root, sub);
		struct stat st;
		if (lstat(full, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			strncat(sub, "/", sizeof(sub) - strlen(sub) - 1);
			walk_objects(root, sub, refs);
		} else if (strncmp(de->d_name, ".tmp.", 5) == 0) {
			M.stale_tmp++;
			M.stale_tmp_bytes += (uint64_t)st.st_size;
			if (opt.strict_tmp)
				bad("stale temp file %s (%lld bytes) left by an interrupted write", sub,
				    (long long)st.st_size);
		} else if (!refs_has(refs, sub)) {
			M.leaked_objects++;
			bad("object %s (%lld bytes) is not referenced by the manifest", sub,
			    (long long)st.st_size);
		}
	}
	closedir(d);
}

/** Epochs, leaks and WAL segments of one shard after the driver's reopen. */
static void
verify_shard_files(strata *db, struct objstore *os, uint32_t s, const struct manifest *before)
{
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "shard-%04u/", s);
	struct manifest m;
	int rc = manifest_load(os, prefix, &m);
	if (rc) {
		bad("shard %u: manifest_load after reopen: %s: %s", s, strata_strerror(rc),
		    strata_last_error());
		return;
	}
	strata_stats st;
	strata_shard_stats(db, s, &st);
	if (m.writer_epoch != st.writer_epoch)
		bad("shard %u: stored epoch %llu is not the reopened writer's %llu", s,
		    (unsigned long long)m.writer_epoch, (unsigned long long)st.writer_epoch);
	if (m.writer_epoch <= before->writer_epoch || m.version <= before->version)
		bad("shard %u: epoch/version did not grow across the reopen: %llu/%llu -> %llu/%llu", s,
		    (unsigned long long)before->writer_epoch, (unsigned long long)before->version,
		    (unsigned long long)m.writer_epoch, (unsigned long long)m.version);
	M.epoch[s] = m.writer_epoch;
	M.version[s] = m.version;

	static struct refs refs;
	if (refs.key == NULL && (refs.key = malloc(MAX_REFS * sizeof(*refs.key))) == NULL) {
		perror("crash_driver: malloc");
		exit(2);
	}
	refs.n = 0;
	if (m.ngens + m.nruns + 16u > MAX_REFS) {
		bad("shard %u: manifest names %u objects, more than this check handles", s,
		    m.ngens + m.nruns);
		manifest_destroy(&m);
		return;
	}
	char key[192];
	for (uint32_t i = 0; i < m.ngens + m.nruns; i++) {
		int gen = i < m.ngens;
		manifest_obj_key(key, sizeof(key), "", gen ? MANIFEST_GEN : MANIFEST_RUN,
				 gen ? &m.gens[i] : &m.runs[i - m.ngens]);
		snprintf(refs.key[refs.n++], sizeof(refs.key[0]), "%s", key);
		uint64_t size;
		char full[256];
		snprintf(full, sizeof(full), "%s%s", prefix, key);
		if (objstore_size(os, full, &size) != 0)
			bad("shard %u: referenced object %s is missing", s, full);
	}
	strata_options dflt;
	strata_options_init(&dflt);
	uint64_t snap;
	if (manifest_gc_floor(os, prefix, m.version, dflt.manifest_keep, &refs.log_floor, &snap) != 0)
		bad("shard %u: listing the manifest snapshots: %s", s, strata_last_error());
	refs.log_top = m.version;
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%s/objects/%s", store, prefix);
	walk_objects(root, "", &refs);

	char wdir[PATH_MAX];
	snprintf(wdir, sizeof(wdir), "%s/wal/shard-%04u", store, s);
	static struct wal_segment_info infos[MAX_SEGMENTS];
	int n = wal_inspect_dir(wdir, infos, MAX_SEGMENTS);
	if (n < 0) {
		bad("shard %u: wal_inspect_dir %s: %s", s, wdir, strata_last_error());
	} else {
		for (int i = 0; i + 1 < n && i < MAX_SEGMENTS; i++) {
			if (infos[i].entries == 0 || infos[i].last_seq <= m.replay_after) {
				M.leaked_wal++;
				bad("shard %u: WAL segment %s (last position %llu, %llu entries) is wholly "
				    "at or below the replay cursor %llu but was kept", s, infos[i].name,
				    (unsigned long long)infos[i].last_seq,
				    (unsigned long long)infos[i].entries,
				    (unsigned long long)m.replay_after);
			}
		}
	}
	manifest_destroy(&m);
}

/** After a kill: reopen, check everything, close. */
static void
verify(struct crash_rng *rng)
{
	char objdir[PATH_MAX];
	snprintf(objdir, sizeof(objdir), "%s/objects", store);
	struct objstore *os = NULL;
	int rc = objstore_fs_new(objdir, &os);
	if (rc) {
		bad("objstore_fs_new %s: %s", objdir, strata_last_error());
		return;
	}
	struct manifest before[CRASH_MAX_SHARDS];
	memset(before, 0, sizeof(before));
	M.stale_tmp = 0;
	M.stale_tmp_bytes = 0;
	for (uint32_t s = 0; s < opt.shards; s++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "shard-%04u/", s);
		rc = manifest_load(os, prefix, &before[s]);
		if (rc == STRATA_NOTFOUND && M.epoch[s] == 0 && !M.ready)
			continue; /* killed before its first claim */
		if (rc) {
			bad("shard %u: manifest_load before reopen: %s: %s", s, strata_strerror(rc),
			    strata_last_error());
			continue;
		}
		if (before[s].writer_epoch < M.epoch[s] || before[s].version < M.version[s])
			bad("shard %u: epoch/version went back: %llu/%llu after %llu/%llu", s,
			    (unsigned long long)before[s].writer_epoch,
			    (unsigned long long)before[s].version, (unsigned long long)M.epoch[s],
			    (unsigned long long)M.version[s]);
		if (M.ready && (M.child_epoch[s] <= M.epoch[s] ||
				before[s].writer_epoch != M.child_epoch[s]))
			bad("shard %u: the child claimed epoch %llu after %llu; the manifest holds %llu", s,
			    (unsigned long long)M.child_epoch[s], (unsigned long long)M.epoch[s],
			    (unsigned long long)before[s].writer_epoch);
	}

	strata_options o;
	strata_options_init(&o);
	o.dir = store;
	o.shards = opt.shards;
	o.sync = STRATA_SYNC_FSYNC;
	o.block_bytes = CRASH_BLOCK_BYTES;
	o.wal_segment_bytes = CRASH_SEGMENT_BYTES;
	o.manifest_snapshot_edits = CRASH_SNAPSHOT_EDITS;
	strata *db = NULL;
	rc = strata_open(&o, &db);
	if (rc) {
		bad("reopen: %s: %s", strata_strerror(rc), strata_last_error());
		for (uint32_t s = 0; s < opt.shards; s++)
			manifest_destroy(&before[s]);
		objstore_destroy(os);
		return;
	}
	for (uint32_t s = 0; s < opt.shards; s++) {
		if ((rc = strata_check(db, s)) != 0)
			bad("shard %u: strata_check: %s", s, strata_last_error());
		struct scan_ctx sc = {.shard = s, .prev_len = 0, .rows = 0};
		rc = strata_scan(db, s, NULL, 0, NULL, 0, verify_scan_cb, &sc);
		if (rc)
			bad("shard %u: scan: %s: %s", s, strata_strerror(rc), strata_last_error());
	}
	/* Gets agree with the scan: every row in flight, and a random sample. */
	for (uint32_t th = 0; th < opt.threads; th++)
		for (uint32_t i = 0; M.pb[th].on && i < M.pb[th].n; i++)
			verify_get(db, th, M.pb[th].idx[i]);
	for (int i = 0; M.next > 0 && i < 256; i++)
		verify_get(db, (uint32_t)crash_below(rng, opt.threads), (uint32_t)crash_below(rng, M.next));
	verify_model();
	for (uint32_t s = 0; s < opt.shards; s++) {
		verify_shard_files(db, os, s, &before[s]);
		manifest_destroy(&before[s]);
	}
	strata_close(db);
	objstore_destroy(os);
	if (M.stale_tmp > M.stale_tmp_max)
		M.stale_tmp_max = M.stale_tmp;
}

/* ---------------------------------------------------------------- main */

static int
num_arg(int argc, char **argv, int *i, uint64_t *out)
{
	if (*i + 1 >= argc)
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(argv[++*i], &end, 0);
	if (errno || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static void
usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--seed N] [--kills N] [--threads N] [--shards N] [--keycap N] "
		"[--max-ms N] [--point-pct N] [--dir DIR] [--keep] [--child PATH] [--strict-tmp] "
		"[--verbose]\n", argv0);
	exit(2);
}

int
main(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(crash_points) / sizeof(crash_points[0]); i++)
		if (env_point_lookup(crash_points[i]) < 0) {
			fprintf(stderr, "crash: the engine has no test point '%s'\n", crash_points[i]);
			return 2;
		}
	int have_seed = 0;
	for (int i = 1; i < argc; i++) {
		uint64_t v = 0;
		const char *a = argv[i];
		if (strcmp(a, "--keep") == 0) {
			opt.keep = 1;
		} else if (strcmp(a, "--strict-tmp") == 0) {
			opt.strict_tmp = 1;
		} else if (strcmp(a, "--verbose") == 0) {
			opt.verbose = 1;
		} else if (strcmp(a, "--dir") == 0 && i + 1 < argc) {
			opt.dir = argv[++i];
		} else if (strcmp(a, "--child") == 0 && i + 1 < argc) {
			opt.child = argv[++i];
		} else if (num_arg(argc, argv, &i, &v) == 0) {
			if (strcmp(a, "--seed") == 0)
				opt.seed = v, have_seed = 1;
			else if (strcmp(a, "--kills") == 0)
				opt.kills = (uint32_t)v;
			else if (strcmp(a, "--threads") == 0)
				opt.threads = (uint32_t)v;
			else if (strcmp(a, "--shards") == 0)
				opt.shards = (uint32_t)v;
			else if (strcmp(a, "--keycap") == 0)
				opt.keycap = (uint32_t)v;
			else if (strcmp(a, "--max-ms") == 0)
				opt.max_ms = (uint32_t)v;
			else if (strcmp(a, "--point-pct") == 0)
				opt.point_pct = (uint32_t)v;
			else
				usage(argv[0]);
		} else {
			usage(argv[0]);
		}
	}
	if (!have_seed && getenv("CRASH_SEED") != NULL) {
		opt.seed = strtoull(getenv("CRASH_SEED"), NULL, 0);
		have_seed = 1;
	}
	if (!have_seed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		opt.seed = crash_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
				     (uint64_t)getpid()) % 1000000000ull;
	}
	if (opt.threads == 0 || opt.threads > CRASH_MAX_THREADS || opt.shards == 0 ||
	    opt.shards > CRASH_MAX_SHARDS || opt.keycap == 0 || opt.keycap > CRASH_MAX_KEYCAP ||
	    opt.max_ms == 0 || opt.point_pct > 100) {
		fprintf(stderr, "crash_driver: threads 1..%d, shards 1..%d, keycap 1..%u, max-ms > 0, "
			"point-pct 0..100\n", CRASH_MAX_THREADS, CRASH_MAX_SHARDS, CRASH_MAX_KEYCAP);
		return 2;
	}
	static char child_path[PATH_MAX];
	if (opt.child == NULL) {
		ssize_t n = readlink("/proc/self/exe", child_path, sizeof(child_path) - 32);
		if (n <= 0) {
			perror("crash_driver: readlink /proc/self/exe");
			return 2;
		}
		child_path[n] = '\0';
		char *slash = strrchr(child_path, '/');
		strcpy(slash ? slash + 1 : child_path, "crash_child");
		opt.child = child_path;
	}
	if (access(opt.child, X_OK) != 0) {
		fprintf(stderr, "crash_driver: child %s: %s\n", opt.child, strerror(errno));
		return 2;
	}
	if (opt.dir != NULL && strlen(opt.dir) > 1000) {
		fprintf(stderr, "crash_driver: --dir longer than 1000 bytes\n");
		return 2;
	}
	if (opt.dir != NULL) {
		snprintf(work, sizeof(work), "%s", opt.dir);
		if (mkdir(work, 0755) != 0 && errno != EEXIST) {
			fprintf(stderr, "crash_driver: mkdir %s: %s\n", work, strerror(errno));
			return 2;
		}
	} else {
		const char *t = getenv("TMPDIR");
		snprintf(work, sizeof(work), "%s/strata-crash-XXXXXX", t ? t : "/tmp");
		if (mkdtemp(work) == NULL) {
			fprintf(stderr, "crash_driver: mkdtemp %s: %s\n", work, strerror(errno));
			return 2;
		}
	}
	snprintf(store, sizeof(store), "%s/store", work);
	snprintf(child_log, sizeof(child_log), "%s/child.log", work);
	snprintf(drv_log, sizeof(drv_log), "%s/driver.log", work);
	drv_log_f = fopen(drv_log, "a");
	diag_log_sink = log_sink;
	signal(SIGPIPE, SIG_IGN);
	for (uint32_t t = 0; t < opt.threads; t++) {
		M.k[t] = calloc(opt.keycap, sizeof(*M.k[t]));
		if (M.k[t] == NULL) {
			perror("crash_driver: calloc");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	char when[32];
	time_t t_now = time(NULL);
	struct tm tm_now;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t_now, &tm_now));
	printf("# crash: started %s: seed %llu, %u kills, %u writer threads, %u shards, store %s\n",
	       when, (unsigned long long)opt.seed, opt.kills, opt.threads, opt.shards, store);
	print_repro(stdout, argv[0]);

	struct crash_rng rng = {opt.seed};
	uint64_t t0 = now_ms();
	for (kill_no = 1; kill_no <= opt.kills; kill_no++) {
		M.inc = kill_no;
		M.cur_failures = 0;
		child_run(&rng);
		verify(&rng);
		if (M.cur_failures) {
			M.failed++;
			if (M.cur_failures > MAX_PRINTED)
				fprintf(stderr, "  kill %u: %d more failures not shown\n", kill_no,
					M.cur_failures - MAX_PRINTED);
		} else {
			M.passed++;
		}
		if (drv_log_f)
			fflush(drv_log_f);
		if (M.failed >= 5) {
			fprintf(stderr, "  stopping after %u failed kills\n", M.failed);
			break;
		}
	}
	uint32_t done = M.passed + M.failed;
	printf("# crash: %u kills in %.1f s: %llu at a test point (%llu inside seal/prepare/commit), "
	       "%llu timed, %llu where the point was not reached in %d ms\n", done,
	       (double)(now_ms() - t0) / 1000.0, (unsigned long long)M.point_kills,
	       (unsigned long long)M.inside_kills, (unsigned long long)M.timed_kills,
	       (unsigned long long)M.point_misses, POINT_TIMEOUT_MS);
	printf("# crash: points:");
	for (size_t i = 0; i < CRASH_NPOINTS; i++)
		if (M.point_hits[i])
			printf(" %s=%llu", crash_points[i], (unsigned long long)M.point_hits[i]);
	printf("\n# crash: committed by the children: %llu seals, %llu merges, %llu compactions\n",
	       (unsigned long long)M.seals, (unsigned long long)M.merges,
	       (unsigned long long)M.compactions);
	printf("# crash: kills %u, rows acknowledged %llu, rows verified %llu, rows superseded %llu, "
	       "rows lost %llu, leaked objects %llu\n", done, (unsigned long long)M.acked_rows,
	       (unsigned long long)M.verified, (unsigned long long)M.superseded,
	       (unsigned long long)M.lost, (unsigned long long)M.leaked_objects);
	printf("# crash: acknowledged rows that were deletes %llu\n", (unsigned long long)M.acked_deletes);
	printf("# crash: in-flight rows found durable %llu, keys checked %llu, gets checked %llu, "
	       "leaked WAL segments %llu\n", (unsigned long long)M.recovered,
	       (unsigned long long)M.keys_checked, (unsigned long long)M.gets_checked,
	       (unsigned long long)M.leaked_wal);
	printf("# crash: temp files of interrupted object writes left after the reopen: %llu "
	       "(%llu bytes) at the last check, at most %llu%s\n", (unsigned long long)M.stale_tmp,
	       (unsigned long long)M.stale_tmp_bytes, (unsigned long long)M.stale_tmp_max,
	       opt.strict_tmp ? "" : " (a failure only with --strict-tmp)");
	if (M.failed) {
		printf("# crash: FAILED; the store and logs are kept in %s\n", work);
		print_repro(stdout, argv[0]);
	} else if (!opt.keep) {
		char cmd[PATH_MAX + 32];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
		if (system(cmd) != 0)
			fprintf(stderr, "crash_driver: could not remove %s\n", work);
	} else {
		printf("# crash: kept %s\n", work);
	}
	printf("# crash: %u passed, %u failed\n", M.passed, M.failed);
	if (drv_log_f)
		fclose(drv_log_f);
	for (uint32_t t = 0; t < opt.threads; t++)
		free(M.k[t]);
	return M.failed ? 1 : 0;
}
