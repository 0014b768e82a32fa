/*
 * sim_run.c — one seed of `strata sim`: a seeded workload against a store on the
 * simulated file system (sim_fs.c), with faults, crashes and reopens, checked against
 * a model after every operation and every reopen.
 *
 * The model keeps, per key, the values it may hold: the last acknowledged one and
 * those of every later append that failed or was cut by a crash (an unknown outcome).
 * Within one open of the store a read pins the key to what it saw (an unknown append
 * that was not visible cannot become visible without a reopen, and one that was seen
 * cannot vanish); a reopen unpins every key, since a failed append that reached the
 * WAL shows up once the WAL is replayed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/manifest.h"
#include "../lib/diag.h"
#include "../objstore/objstore.h"
#include "../strata.h"
#include "sim.h"

/** Shards of the simulated store. */
#define SIM_SHARDS 2
/** Keys per shard. */
#define SIM_KEYS 32
/** Rows per append, at most. */
#define SIM_BATCH 6
/** Largest value written. */
#define SIM_VAL_MAX 3000
/** The store's directory in the simulated file system. */
#define SIM_DIR "/db"
/** Opens tried with faults before one without. */
#define SIM_OPEN_TRIES 4
/** Objects of one shard the leak check handles. */
#define SIM_MAX_REFS 4096
/** Where the policy file lives in the simulated file system. */
#define SIM_POLICY "/policy.lua"
/** Largest policy file. */
#define SIM_POLICY_MAX (1u << 20)
/** Simulated time between operations, ns. */
#define SIM_STEP_NS 1000000ull

/** What a key may hold. */
struct sim_key {
	/** Candidate value ids, oldest first: [0] is the last acknowledged (0 = absent),
	 *  the rest come from appends with an unknown outcome. */
	uint32_t *cand;
	uint32_t n, cap;
	/** Reads of this open may see cand[pin] or any cand[i] with i >= after. */
	uint32_t pin, after;
};

/** State of one run. */
struct sim {
	const struct sim_config *c;
	struct sim_result *r;
	struct sim_fs *fs;
	strata *db;
	/** The workload's random stream. */
	uint64_t rng;
	/** Next value id (ids start at 1). */
	uint32_t next_vid;
	struct sim_key keys[SIM_SHARDS][SIM_KEYS];
	/** Highest manifest epoch and version seen per shard. */
	uint64_t epoch[SIM_SHARDS], version[SIM_SHARDS];
	/** The step running. */
	uint32_t step;
	/** The store must be reopened (a shard turned read-only). */
	int need_reopen;
	/** The policy's source (c->policy's bytes), or NULL. */
	char *policy_src;
	size_t policy_len;
	/** Log of operations (keep_log). */
	char *log;
	size_t log_len, log_cap;
};

static uint64_t
sim_rand(struct sim *s, uint64_t n)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return n ? z % n : z;
}

static void sim_logf(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sim_logf(struct sim *s, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (s->c->verbose)
		fprintf(stderr, "sim: step %u: %s\n", s->step, line);
	if (!s->c->keep_log)
		return;
	if (s->log_len + (size_t)n + 32 > s->log_cap) {
		size_t nc = s->log_cap ? s->log_cap * 2 : 4096;
		while (nc < s->log_len + (size_t)n + 32)
			nc *= 2;
		char *v = realloc(s->log, nc);
		if (v == NULL)
			return;
		s->log = v;
		s->log_cap = nc;
	}
	s->log_len += (size_t)sprintf(s->log + s->log_len, "  step %u: %s\n", s->step, line);
}

static void sim_bad(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Record the first failed check. */
static void
sim_bad(struct sim *s, const char *fmt, ...)
{
	if (s->r->failed)
		return;
	s->r->failed = 1;
	s->r->fail_step = s->step;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->r->why, sizeof(s->r->why), fmt, ap);
	va_end(ap);
	sim_logf(s, "FAILED: %s", s->r->why);
}

/* ---------- values ---------- */

/** The bytes of value vid written to (shard, key): a header naming all three, then filler. */
static size_t
sim_value(uint32_t shard, uint32_t key, uint32_t vid, char *out)
{
	int n = sprintf(out, "v%08u/s%u/k%u|", vid, shard, key);
	uint64_t h = (uint64_t)vid * 0x9e3779b97f4a7c15ull;
	size_t len = (size_t)(h >> 40) % 240;
	if ((h & 0xff) < 8)
		len = (size_t)(h >> 20) % (SIM_VAL_MAX - 64);
	for (size_t i = 0; i < len; i++)
		out[n + i] = (char)('a' + (vid + i) % 26);
	return (size_t)n + len;
}

/** The value id a read returned, or UINT32_MAX when the bytes are not a value of this key. */
static uint32_t
sim_value_id(uint32_t shard, uint32_t key, const void *v, size_t len)
{
	char want[SIM_VAL_MAX], head[10];
	unsigned vid;
	if (len < 10 || len >= SIM_VAL_MAX)
		return UINT32_MAX;
	memcpy(head, v, 9);
	head[9] = '\0';
	if (sscanf(head, "v%8u", &vid) != 1)
		return UINT32_MAX;
	size_t wl = sim_value(shard, key, vid, want);
	return wl == len && memcmp(want, v, len) == 0 ? vid : UINT32_MAX;
}

static void
sim_key_name(uint32_t key, char *out)
{
	sprintf(out, "k%04u", key);
}

/* ---------- the model ---------- */

static void
sim_key_push(struct sim_key *k, uint32_t vid)
{
	if (k->n == k->cap) {
		uint32_t nc = k->cap ? k->cap * 2 : 4;
		uint32_t *v = realloc(k->cand, nc * sizeof(*v));
		if (v == NULL)
			abort();
		k->cand = v;
		k->cap = nc;
	}
	k->cand[k->n++] = vid;
}

static void
sim_key_acked(struct sim_key *k, uint32_t vid)
{
	k->n = 0;
	sim_key_push(k, vid);
	k->pin = 0;
	k->after = 1;
}

/** A read of (shard, key) saw vid (0: absent): check it and pin the key. */
static void
sim_key_saw(struct sim *s, uint32_t shard, uint32_t key, uint32_t vid, const char *how)
{
	struct sim_key *k = &s->keys[shard][key];
	s->r->checks++;
	for (uint32_t i = 0; i < k->n; i++) {
		if (k->cand[i] != vid || !(i == k->pin || i >= k->after))
			continue;
		k->pin = i;
		k->after = k->n;
		return;
	}
	char list[256];
	size_t off = 0;
	list[0] = '\0';
	for (uint32_t i = 0; i < k->n && off + 24 < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%u%s", i ? "," : "",
					k->cand[i], i == k->pin ? "(pinned)" : i >= k->after ? "" : "(ruled out)");
	sim_bad(s, "%s of shard %u key k%04u returned %s%u; the model allows values [%s] "
		"(0 = absent; the first is the last acknowledged)",
		how, shard, key, vid == UINT32_MAX ? "garbage " : "value ", vid == UINT32_MAX ? 0 : vid, list);
}

static void
sim_unpin_all(struct sim *s)
{
	for (int sh = 0; sh < SIM_SHARDS; sh++)
		for (int k = 0; k < SIM_KEYS; k++) {
			s->keys[sh][k].pin = 0;
			s->keys[sh][k].after = 0;
		}
}

/* ---------- checks ---------- */

/** Get (shard, key) and check it against the model. Returns the value id seen, 0 for
 *  absent, UINT32_MAX when the get failed (nothing checked). */
static uint32_t
sim_check_key(struct sim *s, uint32_t shard, uint32_t key, const char *how)
{
	char kn[16];
	sim_key_name(key, kn);
	void *v = NULL;
	size_t vl = 0;
	int rc = strata_get(s->db, shard, kn, strlen(kn), &v, &vl);
	if (sim_fs_dead(s->fs))
		rc = STRATA_EIO;
	uint32_t vid = UINT32_MAX;
	if (rc == STRATA_NOTFOUND)
		vid = 0;
	else if (rc == 0)
		vid = sim_value_id(shard, key, v, vl);
	strata_free(v);
	if (rc < 0)
		return UINT32_MAX;
	sim_key_saw(s, shard, key, vid, how);
	return vid;
}

/** Faults off for the sim's own verification reads. */
static void
sim_quiet(struct sim *s, int on)
{
	sim_fs_quiet(s->fs, on);
}

/** Every key of every shard, with faults off. */
static void
sim_check_all(struct sim *s, const char *how)
{
	sim_quiet(s, 1);
	for (uint32_t sh = 0; sh < SIM_SHARDS && !s->r->failed; sh++)
		for (uint32_t k = 0; k < SIM_KEYS && !s->r->failed; k++)
			if (sim_check_key(s, sh, k, how) == UINT32_MAX)
				sim_bad(s, "%s of shard %u key k%04u failed with faults off: %s", how, sh, k,
					strata_last_error());
	sim_quiet(s, 0);
}

/** strata_check and the manifest's epoch and version (never going back) of every shard. */
static void
sim_check_shards(struct sim *s, int reopened)
{
	sim_quiet(s, 1);
	for (uint32_t sh = 0; sh < SIM_SHARDS && !s->r->failed; sh++) {
		int rc = strata_check(s->db, sh);
		if (rc != 0) {
			sim_bad(s, "strata_check of shard %u: %s: %s", sh, strata_strerror(rc), strata_last_error());
			break;
		}
		strata_stats st;
		rc = strata_shard_stats(s->db, sh, &st);
		if (rc != 0) {
			sim_bad(s, "stats of shard %u: %s", sh, strata_last_error());
			break;
		}
		if (st.writer_epoch < s->epoch[sh] || (reopened && st.writer_epoch == s->epoch[sh]) ||
		    st.manifest_version < s->version[sh])
			sim_bad(s, "shard %u: epoch/version went from %llu/%llu to %llu/%llu%s", sh,
				(unsigned long long)s->epoch[sh], (unsigned long long)s->version[sh],
				(unsigned long long)st.writer_epoch, (unsigned long long)st.manifest_version,
				reopened ? " across a reopen (the epoch must grow)" : "");
		s->epoch[sh] = st.writer_epoch;
		s->version[sh] = st.manifest_version;
	}
	sim_quiet(s, 0);
}

/** Objects a manifest references (keys relative to the shard prefix). */
struct sim_refs {
	/** The keys. */
	char (*key)[160];
	/** Entries in key. */
	uint32_t n;
	/** Unreferenced objects found by the listing. */
	uint32_t leaked;
	/** The first of them. */
	char first[200];
	/** Prefix length to strip. */
	size_t plen;
	/** Manifest log positions (entries and snapshots) kept: [log_floor, log_top]. */
	uint64_t log_floor, log_top;
};

static int
sim_leak_cb(void *ctx, const char *key, uint64_t size)
{
	struct sim_refs *r = ctx;
	const char *rel = key + r->plen;
	for (uint32_t i = 0; i < r->n; i++)
		if (strcmp(r->key[i], rel) == 0)
			return 0;
	uint64_t v;
	int is_snap;
	if (manifest_parse_log_key(rel, &v, &is_snap) == 0 && v >= r->log_floor && v <= r->log_top)
		return 0;
	if (r->leaked++ == 0)
		snprintf(r->first, sizeof(r->first), "%s (%llu bytes)", key, (unsigned long long)size);
	return 0;
}

/** After a reopen: no object under a shard's prefix that its manifest does not reference,
 *  and every referenced object present. */
static void
sim_check_leaks(struct sim *s)
{
	struct env_ops *prev = env_enter(sim_fs_env(s->fs));
	sim_quiet(s, 1);
	struct objstore *os = NULL;
	int rc = objstore_fs_new(SIM_DIR "/objects", &os);
	if (rc) {
		sim_bad(s, "leak check: cannot open the object store: %s", strata_last_error());
		goto out;
	}
	static char keys[SIM_MAX_REFS][160];
	for (uint32_t sh = 0; sh < SIM_SHARDS && !s->r->failed; sh++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "shard-%04u/", sh);
		struct manifest m;
		rc = manifest_load(os, prefix, &m);
		if (rc) {
			sim_bad(s, "leak check: manifest of shard %u: %s: %s", sh, strata_strerror(rc),
				strata_last_error());
			break;
		}
		struct sim_refs r = {.key = keys, .plen = strlen(prefix)};
		if (m.ngens + m.nruns + 64 > SIM_MAX_REFS) {
			manifest_destroy(&m);
			continue;
		}
		for (uint32_t i = 0; i < m.ngens + m.nruns; i++) {
			int gen = i < m.ngens;
			manifest_obj_key(r.key[r.n], sizeof(r.key[0]), "", gen ? MANIFEST_GEN : MANIFEST_RUN,
					 gen ? &m.gens[i] : &m.runs[i - m.ngens]);
			char full[200];
			uint64_t size;
			snprintf(full, sizeof(full), "%s%s", prefix, r.key[r.n]);
			if (objstore_size(os, full, &size) != 0)
				sim_bad(s, "shard %u: the manifest (version %llu) references %s, which is missing",
					sh, (unsigned long long)m.version, full);
			r.n++;
		}
		strata_options dflt;
		strata_options_init(&dflt);
		uint32_t keep = 2;
		uint64_t snap;
		if (manifest_gc_floor(os, prefix, m.version, keep + 1, &r.log_floor, &snap) != 0)
			sim_bad(s, "leak check: shard %u: listing the manifest snapshots: %s", sh,
				strata_last_error());
		r.log_top = m.version;
		manifest_destroy(&m);
		rc = objstore_list(os, prefix, sim_leak_cb, &r);
		if (rc)
			sim_bad(s, "leak check: list %s: %s", prefix, strata_last_error());
		else if (r.leaked)
			sim_bad(s, "shard %u: %u object%s the manifest does not reference after the reopen, "
				"first %s", sh, r.leaked, r.leaked == 1 ? "" : "s", r.first);
	}
out:
	objstore_destroy(os);
	sim_quiet(s, 0);
	env_leave(prev);
}

/* ---------- opening and closing ---------- */

static void
sim_options(struct sim *s, strata_options *o)
{
	strata_options_init(o);
	o->dir = SIM_DIR;
	o->shards = SIM_SHARDS;
	o->sync = STRATA_SYNC_FSYNC;
	o->wal_segment_bytes = 16u << 10;
	o->block_bytes = 1024;
	o->manifest_keep = 2;
	o->manifest_snapshot_edits = 4; /* snapshots and their collection inside short runs */
	o->merge_max_inputs = 4;
	o->delete_bytes_per_s = 0;
	o->env_ops = sim_fs_env(s->fs);
	o->policy = s->c->policy ? SIM_POLICY : NULL;
	o->clock = STRATA_CLOCK_MANUAL;
	o->threads = 0;
	o->seed = s->c->seed;
}

/** Fold the handle's engine trace into the run's, once per handle. */
static void
sim_fold_trace(struct sim *s)
{
	uint64_t ev = 0, h = strata_trace_hash(s->db, &ev);
	s->r->trace_hash = (s->r->trace_hash ^ h) * 0x100000001b3ull + ev;
	s->r->trace_events += ev;
	sim_fs_trace(s->fs, "engine", (int64_t)h, (int64_t)ev);
}

/** Close the handle (after a crash, a dead process's handle: its calls all fail). */
static void
sim_close(struct sim *s)
{
	if (s->db != NULL)
		sim_fold_trace(s);
	strata_close(s->db);
	s->db = NULL;
}

/** Open the store (faults on for a few tries, then off); the checks of a reopen. */
static int
sim_open(struct sim *s, int first)
{
	strata_options o;
	sim_options(s, &o);
	int rc = 0;
	uint64_t faults = sim_fs_faults(s->fs), crashes = s->r->crashes;
	for (int t = 0; t <= SIM_OPEN_TRIES; t++) {
		if (t == SIM_OPEN_TRIES)
			sim_quiet(s, 1);
		rc = strata_open(&o, &s->db);
		sim_fs_trace(s->fs, "open", t, rc);
		if (t == SIM_OPEN_TRIES)
			sim_quiet(s, 0);
		if (rc == 0)
			break;
		sim_logf(s, "open failed (try %d): %s", t + 1, strata_last_error());
		s->r->failed_ops++;
		if (sim_fs_dead(s->fs)) {
			s->r->crashes++;
			sim_fs_revive(s->fs);
		}
	}
	if (rc != 0) {
		sim_bad(s, "the store does not open with faults off: %s: %s", strata_strerror(rc),
			strata_last_error());
		return rc;
	}
	if ((rc = strata_tick(s->db, sim_fs_now(s->fs))) != 0) {
		sim_bad(s, "strata_tick: %s", strata_last_error());
		return rc;
	}
	s->need_reopen = 0;
	if (!first) {
		s->r->reopens++;
		sim_unpin_all(s);
	}
	sim_check_shards(s, !first);
	/* An open that met no fault collected every orphan. */
	if (!first && !s->r->failed && faults == sim_fs_faults(s->fs) && crashes == s->r->crashes)
		sim_check_leaks(s);
	if (!s->r->failed)
		sim_check_all(s, "get after reopen");
	return s->r->failed ? -1 : 0;
}

/** A crash happened (or happens now): the dead process's handle goes, the store reopens. */
static void
sim_crash_reopen(struct sim *s, const char *why)
{
	if (!sim_fs_dead(s->fs))
		sim_fs_power_loss(s->fs);
	s->r->crashes++;
	sim_logf(s, "power loss (%s); reopen", why);
	sim_close(s);
	sim_fs_revive(s->fs);
	sim_open(s, 0);
}

static void
sim_clean_reopen(struct sim *s, const char *why)
{
	sim_logf(s, "close and reopen (%s)", why);
	sim_close(s);
	if (sim_fs_dead(s->fs)) {
		/* A crash inside close. */
		s->r->crashes++;
		sim_fs_revive(s->fs);
	}
	sim_open(s, 0);
}

/* ---------- operations ---------- */

static void
sim_op_append(struct sim *s)
{
	uint32_t sh = (uint32_t)sim_rand(s, SIM_SHARDS);
	uint32_t n = 1 + (uint32_t)sim_rand(s, SIM_BATCH);
	static char vals[SIM_BATCH][SIM_VAL_MAX];
	char names[SIM_BATCH][16];
	uint32_t keys[SIM_BATCH], vids[SIM_BATCH];
	strata_row rows[SIM_BATCH];
	memset(rows, 0, sizeof(rows));
	uint32_t k0 = (uint32_t)sim_rand(s, SIM_KEYS);
	uint32_t stride = 1 + (uint32_t)sim_rand(s, 5);
	for (uint32_t i = 0; i < n; i++) {
		keys[i] = (k0 + i * stride) % SIM_KEYS;
		for (uint32_t j = 0; j < i; j++)
			if (keys[j] == keys[i])
				n = i;
	}
	for (uint32_t i = 0; i < n; i++) {
		sim_key_name(keys[i], names[i]);
		rows[i].key = names[i];
		rows[i].key_len = strlen(names[i]);
		if (sim_rand(s, 10) == 0) {
			/* A delete: the model's "absent", value id 0. */
			vids[i] = 0;
			rows[i].kind = STRATA_ROW_DELETE;
			rows[i].value = "";
			continue;
		}
		vids[i] = s->next_vid++;
		rows[i].value = vals[i];
		rows[i].value_len = sim_value(sh, keys[i], vids[i], vals[i]);
	}
	int rc = strata_append(s->db, sh, rows, n);
	sim_fs_trace(s->fs, "append", sh, rc);
	s->r->appends++;
	sim_logf(s, "append shard %u, %u rows (k%04u..., values %u..%u): %s", sh, n, keys[0], vids[0],
		 vids[n - 1], rc ? strata_strerror(rc) : "ok");
	for (uint32_t i = 0; i < n; i++) {
		struct sim_key *k = &s->keys[sh][keys[i]];
		if (rc == 0)
			sim_key_acked(k, vids[i]);
		else
			sim_key_push(k, vids[i]);
	}
	if (rc == 0) {
		s->r->rows += n;
		return;
	}
	s->r->failed_ops++;
	/* Outside --strict, any failed append may have left unsynced WAL bytes (a clean
	 * reopen that builds on them is --strict's). */
	if (rc == STRATA_EREADONLY || rc == STRATA_EFENCED || !(s->c->strict & SIM_STRICT_REOPEN))
		s->need_reopen = 1;
}

static void
sim_op_get(struct sim *s)
{
	uint32_t sh = (uint32_t)sim_rand(s, SIM_SHARDS), key = (uint32_t)sim_rand(s, SIM_KEYS);
	s->r->gets++;
	uint32_t vid = sim_check_key(s, sh, key, "get");
	sim_fs_trace(s->fs, "get", sh, vid);
	sim_logf(s, "get shard %u k%04u: %s%u", sh, key, vid == UINT32_MAX ? "failed " : "value ",
		 vid == UINT32_MAX ? 0 : vid);
	if (vid == UINT32_MAX)
		s->r->failed_ops++;
}

/** Rows a scan returned. */
struct sim_scan {
	/** Value id per key index (0 = not returned). */
	uint32_t vid[SIM_KEYS];
	/** Key order broken, or a key outside the range or unknown. */
	char bad[200];
	/** Last key index returned (-1: none). */
	int last;
	/** Range. */
	uint32_t lo, hi;
	/** Shard. */
	uint32_t shard;
};

static int
sim_scan_cb(void *ctx, const strata_row *row)
{
	struct sim_scan *sc = ctx;
	unsigned k;
	char kn[6];
	if (sc->bad[0])
		return 0;
	if (row->key_len == 5) {
		memcpy(kn, row->key, 5);
		kn[5] = '\0';
	}
	if (row->key_len != 5 || sscanf(kn, "k%4u", &k) != 1 || k >= SIM_KEYS) {
		snprintf(sc->bad, sizeof(sc->bad), "scan returned a key never written (%zu bytes)", row->key_len);
		return 0;
	}
	if ((int)k <= sc->last || k < sc->lo || k >= sc->hi) {
		snprintf(sc->bad, sizeof(sc->bad), "scan [k%04u, k%04u) returned k%04u after k%04d", sc->lo,
			 sc->hi, k, sc->last);
		return 0;
	}
	sc->last = (int)k;
	uint32_t vid = sim_value_id(sc->shard, k, row->value, row->value_len);
	sc->vid[k] = vid;
	return 0;
}

static void
sim_op_scan(struct sim *s)
{
	uint32_t sh = (uint32_t)sim_rand(s, SIM_SHARDS);
	uint32_t lo = (uint32_t)sim_rand(s, SIM_KEYS), hi = lo + 1 + (uint32_t)sim_rand(s, SIM_KEYS - lo);
	struct sim_scan sc;
	memset(&sc, 0, sizeof(sc));
	sc.last = -1;
	sc.lo = lo;
	sc.hi = hi;
	sc.shard = sh;
	char a[16], b[16];
	sim_key_name(lo, a);
	sim_key_name(hi, b);
	int rc = strata_scan(s->db, sh, a, strlen(a), hi < SIM_KEYS ? b : NULL, hi < SIM_KEYS ? strlen(b) : 0,
			     sim_scan_cb, &sc);
	s->r->scans++;
	sim_fs_trace(s->fs, "scan", sh, rc);
	sim_logf(s, "scan shard %u [k%04u, k%04u): %s", sh, lo, hi, rc ? strata_strerror(rc) : "ok");
	if (sim_fs_dead(s->fs) || rc != 0) {
		s->r->failed_ops++;
		return;
	}
	if (sc.bad[0]) {
		sim_bad(s, "shard %u: %s", sh, sc.bad);
		return;
	}
	/* Each row against the model, then the scan against gets. */
	for (uint32_t k = lo; k < hi && !s->r->failed; k++)
		sim_key_saw(s, sh, k, sc.vid[k], "scan");
	sim_quiet(s, 1);
	for (uint32_t k = lo; k < hi && !s->r->failed; k++) {
		uint32_t g = sim_check_key(s, sh, k, "get after scan");
		if (g != UINT32_MAX && g != sc.vid[k])
			sim_bad(s, "shard %u: scan saw k%04u = %u, a get right after it %u", sh, k, sc.vid[k], g);
	}
	sim_quiet(s, 0);
}

static void
sim_op_seal(struct sim *s)
{
	uint32_t sh = (uint32_t)sim_rand(s, SIM_SHARDS);
	int rc = strata_seal(s->db, sh);
	s->r->seals++;
	sim_fs_trace(s->fs, "seal", sh, rc);
	sim_logf(s, "seal shard %u: %s", sh, rc ? strata_strerror(rc) : "ok");
	if (rc)
		s->r->failed_ops++;
}

static void
sim_op_merge(struct sim *s)
{
	uint32_t sh = (uint32_t)sim_rand(s, SIM_SHARDS), max = (uint32_t)sim_rand(s, 4);
	uint32_t merged = 0;
	int rc = strata_merge(s->db, sh, max, &merged);
	s->r->merges++;
	sim_fs_trace(s->fs, "merge", sh, rc);
	sim_logf(s, "merge shard %u (max %u): %s, %u folded", sh, max, rc ? strata_strerror(rc) : "ok", merged);
	if (rc)
		s->r->failed_ops++;
}

static void
sim_op_plan(struct sim *s, int compact, int abort_it)
{
	uint32_t sh = (uint32_t)sim_rand(s, SIM_SHARDS);
	strata_plan *plan = NULL;
	int rc = compact ? strata_prepare_compact(s->db, sh, 0, &plan)
			 : strata_prepare_merge(s->db, sh, (uint32_t)sim_rand(s, 3), &plan);
	const char *what = compact ? "compact" : "prepare merge";
	if (rc == 0 && plan != NULL && abort_it) {
		strata_abort_merge(s->db, plan);
		s->r->aborts++;
	} else if (rc == 0 && plan != NULL) {
		rc = strata_commit_merge(s->db, plan);
	}
	if (compact)
		s->r->compactions++;
	sim_fs_trace(s->fs, what, sh, rc);
	sim_logf(s, "%s shard %u%s: %s", what, sh, abort_it ? ", then abort" : ", then commit",
		 rc ? strata_strerror(rc) : "ok");
	if (rc)
		s->r->failed_ops++;
}

/** A checkpoint, then the copy opened as a store of its own: every key holds a value the
 *  model allowed at the call (acknowledged, or an append of unknown outcome). */
static void
sim_op_checkpoint(struct sim *s)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/ckpt-%llu", (unsigned long long)s->r->checkpoints);
	int rc = strata_checkpoint(s->db, dir);
	s->r->checkpoints++;
	sim_fs_trace(s->fs, "checkpoint", (int64_t)s->r->checkpoints, rc);
	sim_logf(s, "checkpoint %s: %s", dir, rc ? strata_strerror(rc) : "ok");
	if (rc || sim_fs_dead(s->fs)) {
		s->r->failed_ops++;
		return;
	}
	sim_quiet(s, 1);
	strata_options o;
	sim_options(s, &o);
	o.dir = dir;
	o.policy = NULL;
	strata *cp = NULL;
	rc = strata_open(&o, &cp);
	if (rc) {
		sim_bad(s, "the checkpoint %s does not open: %s: %s", dir, strata_strerror(rc), strata_last_error());
		sim_quiet(s, 0);
		return;
	}
	for (uint32_t sh = 0; sh < SIM_SHARDS && !s->r->failed; sh++) {
		if ((rc = strata_check(cp, sh)) != 0)
			sim_bad(s, "strata_check of shard %u of the checkpoint %s: %s", sh, dir, strata_last_error());
		for (uint32_t k = 0; k < SIM_KEYS && !s->r->failed; k++) {
			char kn[16];
			sim_key_name(k, kn);
			void *v = NULL;
			size_t vl = 0;
			rc = strata_get(cp, sh, kn, strlen(kn), &v, &vl);
			uint32_t vid = rc == STRATA_NOTFOUND ? 0 : rc == 0 ? sim_value_id(sh, k, v, vl) : UINT32_MAX;
			strata_free(v);
			const struct sim_key *mk = &s->keys[sh][k];
			int allowed = 0;
			for (uint32_t i = 0; i < mk->n; i++)
				allowed |= mk->cand[i] == vid;
			s->r->checks++;
			if (!allowed)
				sim_bad(s, "checkpoint %s: shard %u key k%04u holds %s%u, not a value the model "
					"allowed at the call (last acknowledged %u)", dir, sh, k,
					rc < 0 ? "an error " : "value ", rc < 0 ? 0 : vid, mk->cand[0]);
		}
	}
	strata_close(cp);
	sim_quiet(s, 0);
}

/** Background work: one bounded strata_step (timers, policy hooks, deletes, seals and
 *  merges a policy started). */
static void
sim_op_step(struct sim *s)
{
	uint64_t budget = 100 + sim_rand(s, 20000);
	strata_step_info info;
	memset(&info, 0, sizeof(info));
	int rc = strata_step(s->db, budget, &info);
	s->r->steps_run++;
	s->r->chunks += info.chunks;
	sim_fs_trace(s->fs, "step", (int64_t)budget, rc);
	sim_logf(s, "step %llu us: %s, %u chunks, %u turns, %u pending", (unsigned long long)budget,
		 rc ? strata_strerror(rc) : "ok", info.chunks, info.turns, info.pending);
	if (rc)
		s->r->failed_ops++;
}

static void
sim_op_reload(struct sim *s)
{
	char err[512] = "";
	int rc = strata_set_policy(s->db, s->policy_src, s->policy_len);
	if (rc)
		snprintf(err, sizeof(err), "%s", strata_last_error());
	s->r->reloads++;
	sim_fs_trace(s->fs, "reload", 0, rc);
	sim_logf(s, "reload policy %s: %s", s->c->policy, rc ? err : "ok");
	if (rc)
		sim_bad(s, "reload of %s refused: %s", s->c->policy, err);
}

/** One step of the workload. */
static void
sim_step(struct sim *s)
{
	/* Time moves on: milliseconds, now and then seconds (timers fall due). */
	sim_fs_advance(s->fs, sim_rand(s, 10) ? SIM_STEP_NS * (1 + sim_rand(s, 50))
					       : SIM_STEP_NS * 1000 * (1 + sim_rand(s, 30)));
	if (strata_tick(s->db, sim_fs_now(s->fs)) != 0) {
		sim_bad(s, "strata_tick: %s", strata_last_error());
		return;
	}
	/* Now and then a crash is armed for the n-th file call or test point of this step. */
	uint64_t arm = sim_rand(s, 100) < 8 ? 1 + sim_rand(s, 40) : 0;
	if (arm)
		sim_fs_arm_crash(s->fs, arm);
	uint64_t w = sim_rand(s, 100);
	if (w < 40)
		sim_op_append(s);
	else if (w < 52)
		sim_op_get(s);
	else if (w < 58)
		sim_op_scan(s);
	else if (w < 68)
		sim_op_seal(s);
	else if (w < 76)
		sim_op_merge(s);
	else if (w < 80)
		sim_op_plan(s, 1, sim_rand(s, 4) == 0);
	else if (w < 83)
		sim_op_plan(s, 0, 1);
	else if (w < 88)
		sim_clean_reopen(s, "planned");
	else if (w < 93) {
		sim_fs_arm_crash(s->fs, 0);
		sim_crash_reopen(s, "planned");
	} else if (w < 95 && s->c->policy)
		sim_op_reload(s);
	else if (w < 97)
		sim_op_checkpoint(s);
	else
		sim_op_step(s);
	sim_fs_arm_crash(s->fs, 0);
	s->r->ops++;
	if (s->r->failed)
		return;
	if (sim_fs_dead(s->fs)) {
		sim_crash_reopen(s, "armed");
		return;
	}
	if (s->need_reopen && (s->c->strict & SIM_STRICT_REOPEN)) {
		sim_clean_reopen(s, "a shard turned read-only");
		return;
	}
	if (s->need_reopen) {
		/* As PostgreSQL does on a failed fsync: the process ends, unsynced data with it. */
		sim_crash_reopen(s, "a shard turned read-only");
		return;
	}
	sim_check_shards(s, 0);
	if (!s->r->failed)
		sim_check_all(s, "get");
}

/* ---------- a run ---------- */

/** The faults of a seed: a quarter run without any, the rest at rates drawn from it. */
static void
sim_pick_faults(struct sim *s, struct sim_faults *f)
{
	memset(f, 0, sizeof(*f));
	uint64_t kind = sim_rand(s, 4);
	/* A torn tail is what zeros and reopen leave behind: both keep tails as --strict=tails. */
	f->tail_survives_ppm =
		(s->c->strict & (SIM_STRICT_TAILS | SIM_STRICT_ZEROS | SIM_STRICT_REOPEN)) ? 500000 : 0;
	if (kind == 0)
		return;
	uint32_t scale = kind == 3 ? 4 : 1;
	f->eio_ppm = scale * (uint32_t)sim_rand(s, 3000);
	f->enospc_ppm = scale * (uint32_t)sim_rand(s, 1000);
	f->torn_ppm = scale * (uint32_t)sim_rand(s, 2000);
	f->point_ppm = scale * (uint32_t)sim_rand(s, 5000);
	f->os_error_ppm = scale * (uint32_t)sim_rand(s, 3000);
	f->os_latency_ns = sim_rand(s, 2) ? 5000000ull : 0;
	f->zero_tails = (s->c->strict & SIM_STRICT_ZEROS) != 0;
	f->dir_faults = (s->c->strict & SIM_STRICT_DIRS) != 0;
	f->commit_point_faults = (s->c->strict & SIM_STRICT_COMMIT_POINT) != 0;
}

/** Copy the policy file into the simulated file system (durably), where the store's
 *  runtime reads it; keep its source for reloads. */
static void
sim_put_policy(struct sim *s)
{
	FILE *f = fopen(s->c->policy, "rb");
	s->policy_src = malloc(SIM_POLICY_MAX);
	if (f == NULL || s->policy_src == NULL) {
		sim_bad(s, "cannot read the policy %s: %s", s->c->policy, strerror(errno));
		if (f)
			fclose(f);
		return;
	}
	s->policy_len = fread(s->policy_src, 1, SIM_POLICY_MAX, f);
	fclose(f);
	if (s->policy_len == SIM_POLICY_MAX) {
		sim_bad(s, "the policy %s is larger than %u bytes", s->c->policy, SIM_POLICY_MAX);
		return;
	}
	int fd = env.open(SIM_POLICY, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int dfd = -1;
	if (fd < 0 || env.pwrite(fd, s->policy_src, s->policy_len, 0) != (ssize_t)s->policy_len ||
	    env.fsync(fd) != 0 || (dfd = env.open("/", O_RDONLY | O_DIRECTORY, 0)) < 0 || env.fsync(dfd) != 0)
		sim_bad(s, "cannot write %s in the simulated file system", SIM_POLICY);
	if (fd >= 0)
		env.close(fd);
	if (dfd >= 0)
		env.close(dfd);
}

int
sim_run(const struct sim_config *c, struct sim_result *r)
{
	memset(r, 0, sizeof(*r));
	struct sim *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return STRATA_ENOMEM;
	s->c = c;
	s->r = r;
	s->rng = c->seed * 0xd1342543de82ef95ull + 0x1234567ull;
	s->next_vid = 1;
	s->fs = sim_fs_new(c->seed);
	if (s->fs == NULL) {
		free(s);
		return STRATA_ENOMEM;
	}
	for (int sh = 0; sh < SIM_SHARDS; sh++)
		for (int k = 0; k < SIM_KEYS; k++)
			sim_key_acked(&s->keys[sh][k], 0);
	struct sim_faults f;
	sim_pick_faults(s, &f);
	sim_fs_set_bug(s->fs, c->bug);
	if (c->verbose > 1)
		sim_fs_set_log(s->fs, stderr);
	/* The data directory exists, durably, before the store first opens. */
	struct env_ops *prev = env_enter(sim_fs_env(s->fs));
	int dfd = -1;
	if (env.mkdir(SIM_DIR, 0755) != 0 || (dfd = env.open("/", O_RDONLY | O_DIRECTORY, 0)) < 0 ||
	    env.fsync(dfd) != 0)
		sim_bad(s, "cannot create %s in the simulated file system", SIM_DIR);
	if (dfd >= 0)
		env.close(dfd);
	if (!r->failed && c->policy)
		sim_put_policy(s);
	env_leave(prev);
	if (!r->failed && sim_open(s, 1) == 0) {
		sim_fs_set_faults(s->fs, &f);
		for (s->step = 0; s->step < c->steps && !r->failed; s->step++)
			sim_step(s);
		if (!r->failed) {
			/* The final check: a clean reopen with faults off finds everything. */
			s->step = c->steps;
			sim_fs_set_faults(s->fs, NULL);
			sim_clean_reopen(s, "final");
		}
	}
	sim_close(s);
	if (sim_fs_dead(s->fs))
		sim_fs_revive(s->fs);
	r->io_hash = sim_fs_trace_hash(s->fs);
	r->tree_hash = sim_fs_tree_hash(s->fs);
	r->tmp_left = sim_fs_count_tmp(s->fs, SIM_DIR);
	r->sim_ns = sim_fs_now(s->fs);
	sim_fs_stats(s->fs, &r->fs);
	r->log = s->log;
	r->log_len = s->log_len;
	for (int sh = 0; sh < SIM_SHARDS; sh++)
		for (int k = 0; k < SIM_KEYS; k++)
			free(s->keys[sh][k].cand);
	sim_fs_delete(s->fs);
	free(s->policy_src);
	free(s);
	return 0;
}
