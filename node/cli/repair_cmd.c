/*
 * repair_cmd.c — `strata repair DIR [--truncate-wal] [--json]`: find what makes a data
 * directory unopenable (the checks of `strata inspect --verify`: every shard's
 * manifest, generations and base runs, WAL segments and fence) and say what can be
 * done about it.
 *
 * Without flags nothing is changed: it prints each problem and what a repair would do,
 * and exits 1 when a repair is needed (0 when an open would accept the directory).
 * With --truncate-wal each corrupt WAL segment is cut at its first bad entry (its valid
 * prefix stays), after its original was copied into DIR/repair-<UTC time>/wal/shard-NNNN/
 * and fsynced. A segment whose own header is damaged holds no valid entry; when it is
 * not the last one it is deleted (after the copy), since an empty file there is refused
 * too. Corrupt manifests, missing or corrupt generations and base runs, and a fence
 * newer than the manifest are not repaired: they need a restore from a backup.
 *
 * Repair takes DIR/LOCK (flock, non-blocking) for its whole run, so it never runs
 * while a node or another repair holds the directory. Exit status: 0 nothing to repair
 * or everything repaired, 1 a repair is needed, cannot be done, or failed (or DIR is
 * in use), 2 a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/manifest.h"
#include "../core/store.h"
#include "../core/run.h"
#include "../core/wal.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../objstore/objstore.h"
#include "../strata.h"
#include "cli.h"


/** File in the data directory whose flock marks its one owner (see store.c, server.c). */
#define REPAIR_LOCK_FILE "LOCK"
/** Bytes of a WAL segment header: a cut below this leaves no valid segment. */
#define REPAIR_SEG_HDR 24u
/** Bytes copied per read when saving a segment. */
#define REPAIR_COPY_CHUNK (1u << 20)

/** What repair does to a corrupt segment. */
enum { REPAIR_TRUNCATE, REPAIR_DELETE };

/** One corrupt WAL segment and what repair does about it. */
struct repair_seg {
	/** Shard the segment belongs to. */
	unsigned shard;
	/** The shard's replay cursor (positions at or below it are in generations). */
	uint64_t replay_after;
	/** Where the segment is damaged, from wal_damage_dir. */
	struct wal_segment_info d;
	/** What follows the damage, from wal_salvage_scan. */
	struct wal_salvage s;
	/** 0, or the code of a failed salvage scan (the counts are then unknown). */
	int salvage_rc;
	/** Why the salvage scan failed ("" when it did not). */
	char salvage_err[512];
	/** REPAIR_TRUNCATE or REPAIR_DELETE. */
	int action;
	/** Path of the segment. */
	char path[4224];
	/** Path of its saved copy ("" until saved). */
	char backup[4352];
	/** Positions lost: lost_first..lost_last (lost_last 0: unknown, up to the damage's end). */
	uint64_t lost_first, lost_last;
	/** The repair was applied. */
	int done;
	/** Why applying it failed ("" when it did not). */
	char err[8704];
};

/** A problem repair does not fix. */
struct repair_problem {
	/** Shard it is in. */
	unsigned shard;
	/** "manifest", "generation", "base_run", "wal", "wal_object" or "fence". */
	const char *what;
	/** The message of the failed check. */
	char msg[1024];
};

/** Everything one run of repair found and did. */
struct repair_state {
	/** The data directory. */
	const char *dir;
	/** The WAL's root: <dir>/wal, or the directory STORE records. */
	char wal_root[STORE_WAL_ROOT_MAX];
	/** Corrupt segments. */
	struct repair_seg *segs;
	/** Entries in segs, and their capacity. */
	size_t nsegs, capsegs;
	/** Problems repair does not fix. */
	struct repair_problem *probs;
	/** Entries in probs, and their capacity. */
	size_t nprobs, capprobs;
	/** Sorted distinct shard numbers found under DIR/wal and DIR/objects. */
	const unsigned *shards;
	/** Entries in shards. */
	unsigned nshards;
	/** DIR/repair-<stamp> once created ("" before). */
	char backup_dir[4096];
};

static void
repair_usage(FILE *f)
{
	fprintf(f,
		"usage: strata repair DIR [--store URL] [--truncate-wal] [--json]\n"
		"  check DIR the way an open does (manifests, generations and base runs, WAL segments\n"
		"  and WAL objects)\n"
		"  and report each problem and what a repair would do; changes nothing. Exit 0 when\n"
		"  an open accepts DIR, 1 when a repair is needed or a problem cannot be repaired.\n"
		"  --truncate-wal  cut each corrupt WAL segment at its first bad entry (the rows\n"
		"                  after it are dropped and counted), after copying the original into\n"
		"                  DIR/repair-<UTC YYYYmmddTHHMMSSZ>/wal/shard-NNNN/; exit 0 when DIR\n"
		"                  then passes every check\n"
		"  --store URL     the node's object store (azure://..., s3://...), read for the\n"
		"                  manifests, runs and WAL objects instead of DIR/objects\n"
		"  --json          print the report as one JSON object\n"
		"  A corrupt manifest, a missing or corrupt generation, or a WAL object on the store\n"
		"  that an open refuses is not repaired: restore from a backup. Refused while a node\n"
		"  holds DIR (DIR/LOCK).\n");
}

/* ---------------------------------------------------------------- collecting */

static struct repair_problem *
repair_problem_add(struct repair_state *st, unsigned shard, const char *what, const char *msg)
{
	if (st->nprobs == st->capprobs) {
		size_t cap = st->capprobs ? st->capprobs * 2 : 8;
		struct repair_problem *p = realloc(st->probs, cap * sizeof(*p));
		if (p == NULL) {
			fprintf(stderr, "strata repair: out of memory\n");
			exit(1);
		}
		st->probs = p;
		st->capprobs = cap;
	}
	struct repair_problem *p = &st->probs[st->nprobs++];
	p->shard = shard;
	p->what = what;
	snprintf(p->msg, sizeof(p->msg), "%s", msg);
	return p;
}

static struct repair_seg *
repair_seg_add(struct repair_state *st)
{
	if (st->nsegs == st->capsegs) {
		size_t cap = st->capsegs ? st->capsegs * 2 : 8;
		struct repair_seg *s = realloc(st->segs, cap * sizeof(*s));
		if (s == NULL) {
			fprintf(stderr, "strata repair: out of memory\n");
			exit(1);
		}
		st->segs = s;
		st->capsegs = cap;
	}
	struct repair_seg *s = &st->segs[st->nsegs++];
	memset(s, 0, sizeof(*s));
	return s;
}


/** Positions lost when seg is cut at its damage (see the header of wal.h). */
static void
repair_lost_range(struct repair_seg *g)
{
	const struct wal_segment_info *d = &g->d;
	g->lost_first = d->last_seq + 1;
	uint64_t last = 0;
	if (d->next_first_seq != 0) {
		last = d->next_first_seq - 1;
	} else if (g->salvage_rc == 0) {
		if (g->s.entries > 0)
			last = g->s.last_seq;
		if (g->s.head_ok && g->s.head_last_seq > last)
			last = g->s.head_last_seq;
	}
	if (last != 0 && d->limit != UINT64_MAX && last > d->limit)
		last = d->limit;
	g->lost_last = last;
}

/** Where repair_obj_cb adds its problems. */
struct repair_objs {
	/** The run of repair, and the shard checked. */
	struct repair_state *st;
	unsigned shard;
};

static int
repair_obj_cb(void *ctx, const struct wal_object_info *o)
{
	struct repair_objs *ro = ctx;
	if (o->refused)
		repair_problem_add(ro->st, ro->shard, "wal_object", o->why);
	return 0;
}

/** wal = store: each WAL object under prefix that an open with replay_after refuses,
 *  as a problem repair does not fix (the objects are the store's, which another node may
 *  be writing; `strata inspect --verify` shows them all). */
static void
repair_check_wal_objects(struct repair_state *st, struct objstore *os, const char *prefix, unsigned id,
			 uint64_t replay_after)
{
	char wprefix[64];
	snprintf(wprefix, sizeof(wprefix), "%swal/", prefix);
	struct repair_objs ro = {st, id};
	uint64_t epoch = 0;
	if (wal_inspect_store(os, wprefix, replay_after, 1, repair_obj_cb, &ro, &epoch) < 0)
		repair_problem_add(st, id, "wal_object", diag_last());
}

/** Run every check an open makes on one shard; record what is wrong in st. */
static void
repair_check_shard(struct repair_state *st, struct objstore *os, unsigned id)
{
	char prefix[32], wal_dir[4096];
	snprintf(prefix, sizeof(prefix), "shard-%04u/", id);
	snprintf(wal_dir, sizeof(wal_dir), "%s/shard-%04u", st->wal_root, id);
	struct manifest m;
	memset(&m, 0, sizeof(m));
	uint64_t replay_after = 0, claim = 1;
	int rc = os ? manifest_load(os, prefix, &m) : STRATA_NOTFOUND;
	if (rc == 0) {
		replay_after = m.replay_after;
		claim = m.writer_epoch + 1;
		for (int k = 0; k < 2; k++) {
			uint32_t n = k ? m.nruns : m.ngens;
			for (uint32_t i = 0; i < n; i++) {
				char key[256];
				manifest_obj_key(key, sizeof(key), prefix, k ? MANIFEST_RUN : MANIFEST_GEN,
						 k ? &m.runs[i] : &m.gens[i]);
				struct run_meta meta;
				if (run_verify(os, key, &meta) != 0)
					repair_problem_add(st, id, k ? "base_run" : "generation", diag_last());
			}
		}
		manifest_destroy(&m);
	} else if (rc != STRATA_NOTFOUND) {
		repair_problem_add(st, id, "manifest", diag_last());
	}
	if (os != NULL)
		repair_check_wal_objects(st, os, prefix, id, replay_after);

	rc = wal_check_dir(wal_dir, replay_after, 0);
	if (rc == 0) {
		uint64_t fence = 0;
		if (wal_fence_read(wal_dir, &fence) == 0 && fence > claim) {
			char msg[4400];
			snprintf(msg, sizeof(msg), "wal: the fence %s/epoch names epoch %" PRIu64 ", newer "
				 "than the epoch an open claims (%" PRIu64 "): the manifest is older than "
				 "the WAL", wal_dir, fence, claim);
			repair_problem_add(st, id, "fence", msg);
		}
		return;
	}
	char refusal[1024];
	snprintf(refusal, sizeof(refusal), "%s", diag_last());
	int n = wal_damage_dir(wal_dir, replay_after, 0, NULL, 0);
	struct wal_segment_info *ds = NULL;
	if (n > 0) {
		ds = calloc((size_t)n, sizeof(*ds));
		if (ds == NULL) {
			fprintf(stderr, "strata repair: out of memory\n");
			exit(1);
		}
		n = wal_damage_dir(wal_dir, replay_after, 0, ds, n);
	}
	if (n < 0) {
		repair_problem_add(st, id, "wal", diag_last());
	} else if (n == 0) {
		char msg[2100];
		snprintf(msg, sizeof(msg), "%s (no segment has damaged bytes that a cut removes)", refusal);
		repair_problem_add(st, id, "wal", msg);
	}
	for (int i = 0; i < n; i++) {
		struct repair_seg *g = repair_seg_add(st);
		g->shard = id;
		g->replay_after = replay_after;
		g->d = ds[i];
		snprintf(g->path, sizeof(g->path), "%s/%s", wal_dir, g->d.name);
		g->action = g->d.valid_bytes < REPAIR_SEG_HDR && g->d.next_first_seq != 0 ? REPAIR_DELETE
											 : REPAIR_TRUNCATE;
		g->salvage_rc = wal_salvage_scan(g->path, g->d.valid_bytes, 0, &g->s);
		if (g->salvage_rc != 0)
			snprintf(g->salvage_err, sizeof(g->salvage_err), "%s", diag_last());
		repair_lost_range(g);
	}
	free(ds);
}

/* ---------------------------------------------------------------- applying */

/** fsync a directory. 0 or -1 with a message in err. */
static int
repair_sync_dir(const char *path, char *err, size_t cap)
{
	int fd = env.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0 || env.fsync(fd) != 0) {
		snprintf(err, cap, "cannot fsync the directory %s: %s", path, strerror(errno));
		if (fd >= 0)
			env.close(fd);
		return -1;
	}
	env.close(fd);
	return 0;
}

/** Create DIR/repair-<UTC stamp> (a suffix when taken). 0 or -1 with a message. */
static int
repair_make_backup_dir(struct repair_state *st, char *err, size_t cap)
{
	time_t now = (time_t)(env.wall_ns() / 1000000000ull);
	struct tm tm;
	char stamp[32];
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int k = 1; k < 100; k++) {
		if (k == 1)
			snprintf(st->backup_dir, sizeof(st->backup_dir), "%s/repair-%s", st->dir, stamp);
		else
			snprintf(st->backup_dir, sizeof(st->backup_dir), "%s/repair-%s-%d", st->dir, stamp, k);
		if (env.mkdir(st->backup_dir, 0755) == 0)
			return repair_sync_dir(st->dir, err, cap);
		if (errno != EEXIST)
			break;
	}
	snprintf(err, cap, "cannot create %s: %s", st->backup_dir, strerror(errno));
	st->backup_dir[0] = '\0';
	return -1;
}

/** Copy src to a new file dst and fsync it and the directories up to the backup root. */
static int
repair_copy(const struct repair_state *st, const char *src, const char *dst_dir, const char *dst,
	    char *err, size_t cap)
{
	int in = env.open(src, O_RDONLY | O_CLOEXEC, 0);
	if (in < 0) {
		snprintf(err, cap, "cannot open %s: %s", src, strerror(errno));
		return -1;
	}
	int out = env.open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		snprintf(err, cap, "cannot create %s: %s", dst, strerror(errno));
		env.close(in);
		return -1;
	}
	char *buf = malloc(REPAIR_COPY_CHUNK);
	int rc = buf ? 0 : -1;
	if (buf == NULL)
		snprintf(err, cap, "out of memory copying %s", src);
	off_t off = 0;
	while (rc == 0) {
		ssize_t n = env.pread(in, buf, REPAIR_COPY_CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, cap, "cannot read %s at offset %lld: %s", src, (long long)off,
				 strerror(errno));
			rc = -1;
			break;
		}
		if (n == 0)
			break;
		for (ssize_t w = 0; w < n;) {
			ssize_t k = env.pwrite(out, buf + w, (size_t)(n - w), off + w);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				snprintf(err, cap, "cannot write %s at offset %lld: %s", dst,
					 (long long)(off + w), k < 0 ? strerror(errno) : "short write");
				rc = -1;
				break;
			}
			w += k;
		}
		off += n;
	}
	free(buf);
	if (rc == 0 && env.fsync(out) != 0) {
		snprintf(err, cap, "cannot fsync %s: %s", dst, strerror(errno));
		rc = -1;
	}
	env.close(out);
	env.close(in);
	if (rc == 0) {
		/* The copy's name must be durable too: its directory and every one created above it. */
		char p[4200];
		rc = repair_sync_dir(dst_dir, err, cap);
		snprintf(p, sizeof(p), "%s/wal", st->backup_dir);
		if (rc == 0)
			rc = repair_sync_dir(p, err, cap);
		if (rc == 0)
			rc = repair_sync_dir(st->backup_dir, err, cap);
	}
	return rc;
}

/** Save g's segment, then cut (or delete) it. 0 or -1 with g->err set. */
static int
repair_apply(struct repair_state *st, struct repair_seg *g)
{
	char dst_dir[4224];
	snprintf(dst_dir, sizeof(dst_dir), "%s/wal/shard-%04u", st->backup_dir, g->shard);
	if (env_mkdir_p(dst_dir) != 0) {
		snprintf(g->err, sizeof(g->err), "%s", diag_last());
		return -1;
	}
	snprintf(g->backup, sizeof(g->backup), "%s/%s", dst_dir, g->d.name);
	if (repair_copy(st, g->path, dst_dir, g->backup, g->err, sizeof(g->err)) != 0) {
		g->backup[0] = '\0';
		return -1;
	}
	if (g->action == REPAIR_DELETE) {
		if (env.unlink(g->path) != 0) {
			snprintf(g->err, sizeof(g->err), "cannot delete %s: %s", g->path, strerror(errno));
			return -1;
		}
		char wal_dir[4096];
		snprintf(wal_dir, sizeof(wal_dir), "%s/shard-%04u", st->wal_root, g->shard);
		if (repair_sync_dir(wal_dir, g->err, sizeof(g->err)) != 0)
			return -1;
		g->done = 1;
		return 0;
	}
	int fd = env.open(g->path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(g->err, sizeof(g->err), "cannot open %s: %s", g->path, strerror(errno));
		return -1;
	}
	int rc = 0;
	if (env.ftruncate(fd, (off_t)g->d.valid_bytes) != 0) {
		snprintf(g->err, sizeof(g->err), "cannot truncate %s at offset %" PRIu64 ": %s", g->path,
			 g->d.valid_bytes, strerror(errno));
		rc = -1;
	} else if (env.fsync(fd) != 0) {
		snprintf(g->err, sizeof(g->err), "cannot fsync %s after truncating it: %s", g->path,
			 strerror(errno));
		rc = -1;
	}
	env.close(fd);
	if (rc == 0)
		g->done = 1;
	return rc;
}

/* ---------------------------------------------------------------- reporting */

/** "positions a..b" of the lost range into out, with what the replay cursor says. */
static void
repair_lost_text(const struct repair_seg *g, int applied, char *out, size_t cap)
{
	uint64_t a = g->lost_first, b = g->lost_last, r = g->replay_after;
	const char *verb = applied ? "are" : "would be";
	if (b == 0) {
		if (a <= r)
			snprintf(out, cap, "positions from %" PRIu64 " on that the damaged bytes held %s lost "
				 "(those up to the replay cursor %" PRIu64 " are in generations)", a, verb, r);
		else
			snprintf(out, cap, "positions from %" PRIu64 " on that the damaged bytes held %s lost",
				 a, verb);
	} else if (b < a) {
		snprintf(out, cap, "no position is lost");
	} else if (b <= r) {
		snprintf(out, cap, "positions %" PRIu64 "..%" PRIu64 " are all at or below the replay "
			 "cursor %" PRIu64 ": their rows are in generations, no row is lost", a, b, r);
	} else if (a <= r) {
		snprintf(out, cap, "positions %" PRIu64 "..%" PRIu64 " %s lost (%" PRIu64 "..%" PRIu64
			 " are in generations)", r + 1, b, verb, a, r);
	} else {
		snprintf(out, cap, "positions %" PRIu64 "..%" PRIu64 " %s lost", a, b, verb);
	}
}

static void
repair_print_seg(const struct repair_seg *g, int applied)
{
	const struct wal_segment_info *d = &g->d;
	const char *dropped = applied ? "were dropped" : "would be dropped";
	printf("shard %u: corrupt WAL segment %s (epoch %" PRIu64 ", positions from %" PRIu64
	       ") at offset %" PRIu64 ": %s\n",
	       g->shard, d->name, d->epoch, d->first_seq, d->valid_bytes, d->why);
	if (d->entries > 0)
		printf("  %" PRIu64 " valid entries before it (positions %" PRIu64 "..%" PRIu64 ") are kept\n",
		       d->entries, d->first_seq, d->last_seq);
	else
		printf("  no valid entry before it\n");
	if (g->salvage_rc != 0) {
		printf("  the bytes after the damage could not be scanned: %s\n", g->salvage_err);
	} else {
		if (g->s.head_ok)
			printf("  the damaged entry at offset %" PRIu64 " held positions %" PRIu64 "..%" PRIu64
			       " (its header is intact)\n",
			       d->valid_bytes, g->s.head_first_seq, g->s.head_last_seq);
		if (g->s.entries > 0)
			printf("  %" PRIu64 " intact entr%s after the damage, positions %" PRIu64 "..%" PRIu64
			       ", %s; %" PRIu64 " damaged bytes\n",
			       g->s.entries, g->s.entries == 1 ? "y" : "ies", g->s.first_seq, g->s.last_seq,
			       dropped, g->s.damaged_bytes);
		else
			printf("  0 intact entries after the damage %s; %" PRIu64 " damaged bytes\n", dropped,
			       g->s.damaged_bytes);
	}
	char lost[512];
	repair_lost_text(g, applied, lost, sizeof(lost));
	if (d->next_first_seq != 0)
		printf("  %s (the next segment starts at position %" PRIu64 ")\n", lost, d->next_first_seq);
	else
		printf("  %s\n", lost);
	if (g->action == REPAIR_DELETE) {
		if (g->done)
			printf("  deleted %s (its segment header is damaged): %" PRIu64 " bytes dropped; the "
			       "original is saved as %s\n", g->path, d->bytes, g->backup);
		else if (!applied)
			printf("  would delete %s (its segment header is damaged): %" PRIu64 " bytes dropped\n",
			       g->path, d->bytes);
	} else {
		if (g->done)
			printf("  truncated %s at offset %" PRIu64 ": %" PRIu64 " of %" PRIu64 " bytes dropped; "
			       "the original is saved as %s\n", g->path, d->valid_bytes, d->bytes - d->valid_bytes,
			       d->bytes, g->backup);
		else if (!applied)
			printf("  would truncate %s at offset %" PRIu64 ": %" PRIu64 " of %" PRIu64
			       " bytes dropped\n", g->path, d->valid_bytes, d->bytes - d->valid_bytes, d->bytes);
	}
	if (applied && !g->done)
		printf("  NOT repaired%s%s\n", g->err[0] ? ": " : " (an earlier step failed)", g->err);
}

static const char *
repair_what_text(const char *what)
{
	if (strcmp(what, "manifest") == 0)
		return "its manifest does not decode";
	if (strcmp(what, "generation") == 0)
		return "a flushed generation is missing or corrupt";
	if (strcmp(what, "base_run") == 0)
		return "a base run is missing or corrupt";
	if (strcmp(what, "fence") == 0)
		return "its WAL fence is newer than its manifest";
	if (strcmp(what, "wal_object") == 0)
		return "an open refuses a WAL object on the store";
	return "an open refuses its WAL";
}

static json_t *
repair_seg_json(const struct repair_seg *g)
{
	const struct wal_segment_info *d = &g->d;
	json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:I}", "shard",
			      (json_int_t)g->shard, "file", d->name, "path", g->path, "epoch",
			      (json_int_t)d->epoch, "first_seq", (json_int_t)d->first_seq, "offset",
			      (json_int_t)d->valid_bytes, "why", d->why, "action",
			      g->action == REPAIR_DELETE ? "delete" : "truncate", "bytes", (json_int_t)d->bytes,
			      "bytes_dropped",
			      (json_int_t)(g->action == REPAIR_DELETE ? d->bytes : d->bytes - d->valid_bytes),
			      "kept_entries", (json_int_t)d->entries, "replay_after", (json_int_t)g->replay_after);
	if (g->salvage_rc == 0) {
		json_object_set_new(o, "damaged_entry",
				    g->s.head_ok ? json_pack("{s:I, s:I}", "first_seq",
							     (json_int_t)g->s.head_first_seq, "last_seq",
							     (json_int_t)g->s.head_last_seq)
						 : json_null());
		json_object_set_new(o, "intact_entries_dropped", json_integer((json_int_t)g->s.entries));
		json_object_set_new(o, "intact_first_seq",
				    g->s.entries ? json_integer((json_int_t)g->s.first_seq) : json_null());
		json_object_set_new(o, "intact_last_seq",
				    g->s.entries ? json_integer((json_int_t)g->s.last_seq) : json_null());
		json_object_set_new(o, "damaged_bytes", json_integer((json_int_t)g->s.damaged_bytes));
	}
	json_object_set_new(o, "next_first_seq",
			    d->next_first_seq ? json_integer((json_int_t)d->next_first_seq) : json_null());
	json_object_set_new(o, "lost_first_seq", json_integer((json_int_t)g->lost_first));
	json_object_set_new(o, "lost_last_seq",
			    g->lost_last ? json_integer((json_int_t)g->lost_last) : json_null());
	json_object_set_new(o, "done", json_boolean(g->done));
	json_object_set_new(o, "backup", g->backup[0] ? json_string(g->backup) : json_null());
	json_object_set_new(o, "error", g->err[0] ? json_string(g->err) : json_null());
	if (g->salvage_rc != 0)
		json_object_set_new(o, "salvage_error", json_string(g->salvage_err));
	return o;
}

/* ---------------------------------------------------------------- the command */

/** Take DIR/LOCK. The descriptor, or -1 after printing why. */
static int
repair_lock(const char *dir, int write_pid)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/" REPAIR_LOCK_FILE, dir);
	int fd = env.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "strata repair: cannot open the lock file %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (env.flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;
		char pid[64] = "";
		ssize_t n = env.pread(fd, pid, sizeof(pid) - 1, 0);
		if (n > 0) {
			pid[n] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
		}
		env.close(fd);
		if (err == EWOULDBLOCK)
			fprintf(stderr, "strata repair: %s is in use by a running node (pid %s); stop it "
				"before repairing (it holds %s)\n", dir, pid[0] ? pid : "unknown", path);
		else
			fprintf(stderr, "strata repair: cannot lock %s: %s\n", path, strerror(err));
		return -1;
	}
	if (write_pid) {
		char line[32];
		int len = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
		if (env.ftruncate(fd, 0) != 0 || env.pwrite(fd, line, (size_t)len, 0) != len)
			fprintf(stderr, "strata repair: warning: could not write the pid into %s: %s\n", path,
				strerror(errno));
	}
	return fd;
}

int
cmd_repair(int argc, char **argv)
{
	const char *dir = NULL, *url = NULL;
	int truncate_wal = 0, as_json = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--truncate-wal") == 0)
			truncate_wal = 1;
		else if (strcmp(argv[i], "--store") == 0) {
			if (i + 1 >= argc || argv[i + 1][0] == '\0') {
				fprintf(stderr, "strata repair: --store needs a store URL\n");
				return 2;
			}
			url = argv[++i];
		}
		else if (strcmp(argv[i], "--json") == 0)
			as_json = 1;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			repair_usage(stdout);
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "strata repair: unknown flag %s\n", argv[i]);
			repair_usage(stderr);
			return 2;
		} else if (dir == NULL) {
			dir = argv[i];
		} else {
			fprintf(stderr, "strata repair: one directory only\n");
			return 2;
		}
	}
	if (dir == NULL) {
		repair_usage(stderr);
		return 2;
	}
	DIR *dd = opendir(dir);
	if (dd == NULL) {
		fprintf(stderr, "strata repair: cannot open %s: %s\n", dir, strerror(errno));
		return 1;
	}
	closedir(dd);
	int lock_fd = repair_lock(dir, truncate_wal);
	if (lock_fd < 0)
		return 1;

	struct repair_state st;
	memset(&st, 0, sizeof(st));
	st.dir = dir;
	char path[4096];
	static struct cli_shards found;
	if (store_wal_root(dir, st.wal_root, sizeof(st.wal_root)) != 0) {
		fprintf(stderr, "strata repair: %s\n", diag_last());
		env.close(lock_fd);
		return 1;
	}
	cli_scan_shard_dirs(st.wal_root, &found);
	struct objstore *os = NULL;
	if (url != NULL) {
		if (objstore_url_new(url, &os) != 0 || cli_scan_shard_store(os, &found) != 0) {
			fprintf(stderr, "strata repair: %s\n", diag_last());
			objstore_destroy(os);
			env.close(lock_fd);
			return 1;
		}
	} else {
		snprintf(path, sizeof(path), "%s/objects", dir);
		cli_scan_shard_dirs(path, &found);
		dd = opendir(path); /* never create DIR/objects */
		if (dd != NULL) {
			closedir(dd);
			if (objstore_fs_new(path, &os) != 0) {
				fprintf(stderr, "strata repair: %s\n", diag_last());
				env.close(lock_fd);
				return 1;
			}
		}
	}
	st.shards = found.ids;
	st.nshards = found.n;
	for (unsigned i = 0; i < st.nshards; i++)
		repair_check_shard(&st, os, st.shards[i]);
	objstore_destroy(os);

	/* Apply: every copy is durable before its segment is cut. */
	int apply_failed = 0;
	char err[8704] = "";
	if (truncate_wal && st.nsegs > 0) {
		if (repair_make_backup_dir(&st, err, sizeof(err)) != 0)
			apply_failed = 1;
		for (size_t i = 0; !apply_failed && i < st.nsegs; i++)
			if (repair_apply(&st, &st.segs[i]) != 0)
				apply_failed = 1;
	}
	/* Check again what an open checks, on every shard a segment was cut in. */
	json_t *after = json_array();
	int after_failed = 0;
	for (size_t i = 0; truncate_wal && i < st.nsegs; i++) {
		if (i > 0 && st.segs[i - 1].shard == st.segs[i].shard)
			continue;
		char wal_dir[4096];
		snprintf(wal_dir, sizeof(wal_dir), "%s/shard-%04u", st.wal_root, st.segs[i].shard);
		int rc = wal_check_dir(wal_dir, st.segs[i].replay_after, 0);
		if (rc != 0)
			after_failed = 1;
		json_array_append_new(after, json_pack("{s:I, s:s}", "shard", (json_int_t)st.segs[i].shard,
						       "wal_verify", rc == 0 ? "ok" : diag_last()));
	}

	const char *status;
	int code;
	if (st.nsegs == 0 && st.nprobs == 0) {
		status = "ok";
		code = 0;
	} else if (!truncate_wal) {
		status = st.nsegs > 0 ? "repair_needed" : "unrepairable";
		code = 1;
	} else if (apply_failed || after_failed) {
		status = "failed";
		code = 1;
	} else {
		status = st.nprobs ? "unrepairable" : "repaired";
		code = st.nprobs ? 1 : 0;
	}

	if (as_json) {
		json_t *segs = json_array(), *probs = json_array();
		for (size_t i = 0; i < st.nsegs; i++)
			json_array_append_new(segs, repair_seg_json(&st.segs[i]));
		for (size_t i = 0; i < st.nprobs; i++)
			json_array_append_new(probs, json_pack("{s:I, s:s, s:s, s:b}", "shard",
							       (json_int_t)st.probs[i].shard, "what",
							       st.probs[i].what, "message", st.probs[i].msg,
							       "repairable", 0));
		json_t *root = json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "dir", dir, "mode",
					 truncate_wal ? "truncate_wal" : "report", "shards",
					 (json_int_t)st.nshards, "status", status, "wal_segments", segs,
					 "unrepairable", probs);
		json_object_set_new(root, "backup_dir",
				    st.backup_dir[0] ? json_string(st.backup_dir) : json_null());
		json_object_set_new(root, "error", err[0] ? json_string(err) : json_null());
		if (truncate_wal)
			json_object_set_new(root, "after", after);
		else
			json_decref(after);
		json_dumpf(root, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(root);
	} else {
		printf("data directory %s: %u shard%s\n", dir, st.nshards, st.nshards == 1 ? "" : "s");
		for (size_t i = 0; i < st.nsegs; i++)
			repair_print_seg(&st.segs[i], truncate_wal);
		for (size_t i = 0; i < st.nprobs; i++) {
			printf("shard %u: %s: %s\n", st.probs[i].shard, repair_what_text(st.probs[i].what),
			       st.probs[i].msg);
			printf("  strata repair does not fix this: restore the shard from a backup\n");
		}
		if (err[0])
			printf("NOT repaired: %s\n", err);
		size_t i;
		json_t *o;
		json_array_foreach(after, i, o)
		{
			const char *v = json_string_value(json_object_get(o, "wal_verify"));
			if (strcmp(v, "ok") == 0)
				printf("shard %lld: the WAL passes the checks of an open now\n",
				       (long long)json_integer_value(json_object_get(o, "shard")));
			else
				printf("shard %lld: the WAL is still refused: %s\n",
				       (long long)json_integer_value(json_object_get(o, "shard")), v);
		}
		json_decref(after);
		size_t ndone = 0;
		for (size_t k = 0; k < st.nsegs; k++)
			ndone += st.segs[k].done;
		if (st.nsegs == 0 && st.nprobs == 0)
			printf("ok: nothing to repair; an open accepts %s\n", dir);
		else if (!truncate_wal && st.nsegs > 0)
			printf("repair needed: %zu corrupt WAL segment%s; `strata repair %s --truncate-wal` "
			       "cuts them (each original is first copied into %s/repair-<UTC time>/)\n",
			       st.nsegs, st.nsegs == 1 ? "" : "s", dir, dir);
		else if (truncate_wal && st.nsegs > 0)
			printf("%s: %zu of %zu corrupt WAL segment%s repaired; the originals are in %s\n",
			       apply_failed || after_failed ? "repair FAILED" : "repaired", ndone, st.nsegs,
			       st.nsegs == 1 ? "" : "s", st.backup_dir[0] ? st.backup_dir : "(no copy made)");
		if (st.nprobs > 0)
			printf("not repairable: %zu problem%s above; strata repair does not fix %s: restore "
			       "from a backup\n", st.nprobs, st.nprobs == 1 ? "" : "s",
			       st.nprobs == 1 ? "it" : "them");
	}
	free(st.segs);
	free(st.probs);
	env.close(lock_fd); /* releases the flock */
	return code;
}
