/*
 * wal_store.c — the WAL's second backend, wal = store: the WAL of a shard as objects on
 * the object store instead of segment files. A group commit is one object put if
 * absent; an open walks the objects from the replay cursor; a new owner fences the WAL
 * by putting a marker at the next position. The object format and the rules are in the
 * header comment of wal_int.h; group commit itself is wal.c's, which calls
 * wal_store_flush in place of writing a segment.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "../lib/env.h"
#include "../objstore/objstore.h"
#include "reaper.h"
#include "wal_int.h"

/** Kinds of WAL object. */
enum { WAL_OBJ_BATCH = 0, WAL_OBJ_FENCE = 1, WAL_OBJ_VOID = 2 };

/** Bytes of a WAL object's header; a marker (fence, void) is only that. */
#define WAL_OBJ_HDR 48u
/** Format version of WAL objects. */
#define WAL_OBJ_VERSION 1u
/** Walks of the listing wal_start makes before giving up on a WAL that keeps moving. */
#define WAL_STORE_ATTEMPTS 64
/** Objects a fence chases past (an older writer appending at the tail) per walk. */
#define WAL_STORE_CHASE 4096
/** Name (under the prefix) of the epoch object: the newest owner's epoch. */
#define WAL_STORE_EPOCH "epoch"
/** A group commit reads the epoch object again once this long (ns) has passed since the
 *  last read, */
#define WAL_STORE_EPOCH_CHECK_NS (20u * 1000u * 1000u)
/** or once this many group commits have. */
#define WAL_STORE_EPOCH_CHECK_COMMITS 32u

static const char wal_obj_magic[8] = {'S', 'T', 'R', 'W', 'A', 'L', 'O', 'B'};

/** Key of the object at position first. */
static void
wal_obj_key(const struct wal *w, uint64_t first, char *out, size_t cap)
{
	snprintf(out, cap, "%s%020" PRIu64, w->store.prefix, first);
}

static void
wal_obj_header(uint8_t *h, int kind, uint64_t epoch, uint64_t first, uint64_t last, uint32_t entries)
{
	memcpy(h, wal_obj_magic, 8);
	enc_u32(h + 8, WAL_OBJ_VERSION);
	enc_u32(h + 12, (uint32_t)kind);
	enc_u64(h + 16, epoch);
	enc_u64(h + 24, first);
	enc_u64(h + 32, last);
	enc_u32(h + 40, entries);
	enc_u32(h + 44, crc32c(0, h, 44));
}

static const char *
wal_obj_kind_name(int kind)
{
	return kind == WAL_OBJ_BATCH ? "batch" : kind == WAL_OBJ_FENCE ? "fence" : "void";
}

/** Check a WAL object's header (len bytes of it at least are in d); fill o. */
static int
wal_obj_check_header(const struct wal *w, const char *key, uint64_t first, const uint8_t *d, size_t len,
		     struct wal_obj *o, uint64_t *epoch, uint32_t *entries)
{
	const char *why = NULL;
	if (len < WAL_OBJ_HDR)
		why = "shorter than its header";
	else if (memcmp(d, wal_obj_magic, 8) != 0)
		why = "bad magic";
	else if (dec_u32(d + 8) != WAL_OBJ_VERSION)
		return diag_set(STRATA_EVERSION, "wal: object %s (%s) has format version %u; this build "
				"reads version %u", key, w->store.os->name, dec_u32(d + 8), WAL_OBJ_VERSION);
	else if (crc32c(0, d, 44) != dec_u32(d + 44))
		why = "header checksum mismatch";
	else if (dec_u64(d + 24) != first)
		why = "header names another position than its key";
	else if (dec_u64(d + 32) < first || dec_u32(d + 12) > WAL_OBJ_VOID)
		why = "bad position range or kind";
	if (why != NULL)
		return diag_set(STRATA_ECORRUPT, "wal: corrupt object %s (%s): %s", key, w->store.os->name, why);
	o->first_seq = first;
	o->last_seq = dec_u64(d + 32);
	o->kind = (int)dec_u32(d + 12);
	*epoch = dec_u64(d + 16);
	*entries = dec_u32(d + 40);
	return 0;
}

/** Verify a whole WAL object and replay its entries above replay_after through cb. */
static int
wal_obj_replay(struct wal *w, const char *key, uint64_t first, const uint8_t *d, size_t len,
	       uint64_t replay_after, wal_replay_cb cb, void *ctx, struct wal_obj *o, uint64_t *epoch)
{
	uint32_t nentries;
	int rc = wal_obj_check_header(w, key, first, d, len, o, epoch, &nentries);
	if (rc)
		return rc;
	o->bytes = len;
	if (o->kind != WAL_OBJ_BATCH) {
		if (len != WAL_OBJ_HDR || nentries != 0)
			return diag_set(STRATA_ECORRUPT, "wal: corrupt object %s (%s): a %s marker of %zu "
					"bytes", key, w->store.os->name, wal_obj_kind_name(o->kind), len);
		return 0;
	}
	strata_row *rows = NULL;
	size_t rows_cap = 0, off = WAL_OBJ_HDR;
	uint64_t expect = first;
	const char *why = NULL;
	for (uint32_t k = 0; k < nentries && why == NULL; k++) {
		const uint8_t *h = d + off;
		if (len - off < WAL_ENTRY_HDR) {
			why = "incomplete entry header";
			break;
		}
		uint32_t plen = dec_u32(h + 4), nrows = dec_u32(h + 16);
		uint64_t fseq = dec_u64(h + 8);
		if (crc32c(0, h + 4, WAL_ENTRY_HDR - 4) != dec_u32(h))
			why = "entry header checksum mismatch";
		else if (plen > w->max_entry || plen > len - off - WAL_ENTRY_HDR)
			why = "entry payload past the end of the object";
		else if (crc32c(0, h + WAL_ENTRY_HDR, plen) != dec_u32(h + 20))
			why = "entry payload checksum mismatch";
		else if (nrows == 0 || nrows > plen / 2 || fseq != expect || fseq > UINT64_MAX - nrows)
			why = "entry positions do not follow the previous entry";
		if (why != NULL)
			break;
		if (nrows > rows_cap) {
			strata_row *nr = env.realloc(rows, (size_t)nrows * sizeof(*rows));
			if (nr == NULL) {
				env.free(rows);
				return diag_set(STRATA_ENOMEM, "wal: out of memory replaying %s", key);
			}
			rows = nr;
			rows_cap = nrows;
		}
		struct rd in;
		rd_init(&in, h + WAL_ENTRY_HDR, plen);
		for (uint32_t i = 0; i < nrows && !in.err; i++) {
			const uint8_t *kb = rd_bytes(&in, 1);
			if (kb == NULL || (*kb != STRATA_ROW_PUT && *kb != STRATA_ROW_DELETE)) {
				in.err = 1;
				break;
			}
			uint64_t klen = rd_varint(&in), vlen = rd_varint(&in);
			if (in.err || klen > rd_left(&in) || vlen > rd_left(&in) - klen ||
			    (*kb == STRATA_ROW_DELETE && vlen > 0)) {
				in.err = 1;
				break;
			}
			rows[i].kind = *kb;
			rows[i].key_len = (size_t)klen;
			rows[i].key = rd_bytes(&in, (size_t)klen);
			rows[i].value_len = (size_t)vlen;
			rows[i].value = rd_bytes(&in, (size_t)vlen);
		}
		if (in.err || rd_left(&in) != 0) {
			why = "entry rows do not match its payload length";
			break;
		}
		uint64_t last = fseq + nrows - 1;
		if (cb != NULL && last > replay_after) {
			int cr = cb(ctx, fseq, rows, nrows);
			if (cr != 0) {
				env.free(rows);
				return cr < 0 ? cr : diag_set(STRATA_EINVAL, "wal: replay stopped at position "
							      "%" PRIu64 " of %s", fseq, key);
			}
		}
		expect = last + 1;
		off += WAL_ENTRY_HDR + plen;
	}
	env.free(rows);
	if (why == NULL && (off != len || expect != o->last_seq + 1 || nentries == 0))
		why = "its entries do not end where its header says";
	if (why != NULL)
		return diag_set(STRATA_ECORRUPT, "wal: corrupt object %s (%s) at offset %zu: %s", key,
				w->store.os->name, off, why);
	return 0;
}

/** One key of a listing of the WAL's prefix. */
struct wal_listed {
	/** Position named by the key. */
	uint64_t first;
	/** Object size. */
	uint64_t size;
};

/** A listing of the WAL's prefix being collected. */
struct wal_listing {
	/** The WAL. */
	struct wal *w;
	/** Keys found, in position order. */
	struct wal_listed *v;
	/** Entries used and allocated. */
	size_t n, cap;
};

static int
wal_listing_cb(void *ctx, const char *key, uint64_t size)
{
	struct wal_listing *l = ctx;
	const char *rel = key + strlen(l->w->store.prefix);
	if (strcmp(rel, WAL_STORE_EPOCH) == 0)
		return 0;
	uint64_t first = 0;
	size_t i = 0;
	for (; rel[i] >= '0' && rel[i] <= '9' && i < 20; i++)
		first = first * 10 + (uint64_t)(rel[i] - '0');
	if (i != 20 || rel[i] != '\0' || first == 0) {
		diag_log(LOG_LVL_WARN, "wal: %s (%s) is not a WAL object name: left alone", key,
			 l->w->store.os->name);
		return 0;
	}
	if (l->n > 0 && l->v[l->n - 1].first >= first)
		return diag_set(STRATA_EIO, "wal: the listing of %s (%s) is not in key order at %s",
				l->w->store.prefix, l->w->store.os->name, key);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct wal_listed *nv = env.realloc(l->v, cap * sizeof(*nv));
		if (nv == NULL)
			return diag_set(STRATA_ENOMEM, "wal: out of memory listing %s", l->w->store.prefix);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = (struct wal_listed){first, size};
	return 0;
}

/** Index of the known object at first, or -1. */
static ssize_t
wal_obj_find(const struct wal *w, uint64_t first)
{
	size_t lo = 0, hi = w->store.nobjs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->store.objs[mid].first_seq < first)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < w->store.nobjs && w->store.objs[lo].first_seq == first ? (ssize_t)lo : -1;
}

/** mu held or no other thread yet: add o to the known objects, in position order. */
static int
wal_obj_insert(struct wal *w, const struct wal_obj *o)
{
	if (w->store.nobjs == w->store.cap_objs) {
		size_t cap = w->store.cap_objs ? w->store.cap_objs * 2 : 64;
		struct wal_obj *nv = env.realloc(w->store.objs, cap * sizeof(*nv));
		if (nv == NULL)
			return diag_set(STRATA_ENOMEM, "wal: out of memory tracking objects of %s", w->store.prefix);
		w->store.objs = nv;
		w->store.cap_objs = cap;
	}
	size_t i = w->store.nobjs;
	while (i > 0 && w->store.objs[i - 1].first_seq > o->first_seq)
		i--;
	memmove(w->store.objs + i + 1, w->store.objs + i, (w->store.nobjs - i) * sizeof(*w->store.objs));
	w->store.objs[i] = *o;
	w->store.nobjs++;
	return 0;
}

/** The first gap a walk met: positions above the cursor no object covers. */
struct wal_gap {
	/** First and last missing position (first == 0: no gap). */
	uint64_t first, last;
};

/**
 * Walk the objects of the WAL in position order from the cursor: read and replay through
 * cb every object above it that w->store.objs does not hold yet, and add it there. Objects
 * wholly at or below the cursor are not read (an owner reads the header of a batch to
 * queue it for deletion: a release the last writer did not finish). Positions above the
 * cursor no object covers are a gap: the walk goes on past it (the later rows are
 * replayed, not lost) and reports the first one; only a void object written by
 * put-if-absent at its first position closes it (wal_store_start), so the cursor can
 * never move past a gap that a late object could still fill. An object that starts at
 * or below a position already covered (other than the one straddling the cursor) is
 * void: it is not replayed (logged).
 */
static int
wal_store_walk(struct wal *w, wal_replay_cb cb, void *ctx, int owner, struct wal_gap *gap)
{
	gap->first = gap->last = 0;
	struct wal_listing l = {.w = w};
	int rc = objstore_list(w->store.os, w->store.prefix, wal_listing_cb, &l);
	uint64_t c = w->replay_after, expect = c + 1;
	struct buf b = {0};
	char key[512];
	uint64_t gaps = 0;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		uint64_t first = l.v[i].first;
		wal_obj_key(w, first, key, sizeof(key));
		ssize_t k = wal_obj_find(w, first);
		struct wal_obj o;
		if (k >= 0) {
			o = w->store.objs[k];
		} else if (i + 1 < l.n && l.v[i + 1].first <= c + 1) {
			/* Wholly at or below the cursor: a kept marker, or a batch to collect. */
			if (!owner || l.v[i].size == WAL_OBJ_HDR)
				continue;
			uint8_t h[WAL_OBJ_HDR];
			size_t got = 0;
			uint64_t epoch;
			uint32_t ne;
			rc = objstore_get_range(w->store.os, key, 0, sizeof(h), h, &got);
			if (rc == STRATA_NOTFOUND) {
				rc = 0; /* a release deleted it meanwhile */
				continue;
			}
			if (rc == 0)
				rc = wal_obj_check_header(w, key, first, h, got, &o, &epoch, &ne);
			if (rc == 0 && o.last_seq <= c && o.kind == WAL_OBJ_BATCH) {
				w->store.stale_collected++;
				if (w->store.reaper != NULL)
					reaper_add(w->store.reaper, key, l.v[i].size);
				else if (objstore_del(w->store.os, key) != 0)
					diag_log(LOG_LVL_WARN, "%s", diag_last());
			}
			continue;
		} else {
			buf_reset(&b);
			rc = objstore_get(w->store.os, key, &b);
			if (rc == STRATA_NOTFOUND) {
				rc = 0;
				continue;
			}
			uint64_t epoch = 0;
			uint32_t ne;
			if (rc == 0)
				rc = wal_obj_check_header(w, key, first, b.data, b.len, &o, &epoch, &ne);
			if (rc)
				break;
			if (o.last_seq <= c)
				continue; /* the last object, wholly below the cursor */
			if (first < expect && expect > c + 1) {
				diag_log(LOG_LVL_WARN, "wal: object %s (%s, positions %" PRIu64 "..%" PRIu64
					 ") overlaps positions already covered up to %" PRIu64 ": void, not "
					 "replayed", key, w->store.os->name, first, o.last_seq, expect - 1);
				continue;
			}
			rc = wal_obj_replay(w, key, first, b.data, b.len, c, o.kind == WAL_OBJ_BATCH ? cb : NULL,
					    ctx, &o, &epoch);
			if (rc == 0)
				rc = wal_obj_insert(w, &o);
			if (rc)
				break;
		}
		if (o.last_seq <= c || (first < expect && expect > c + 1))
			continue;
		if (first > expect) {
			gaps++;
			if (gap->first == 0) {
				gap->first = expect;
				gap->last = first - 1;
			}
			diag_log(LOG_LVL_WARN, "wal: %s (%s): no object covers positions %" PRIu64 "..%" PRIu64
				 " (a gap); the rows after it are replayed and the gap is closed before "
				 "the cursor may pass it", w->store.prefix, w->store.os->name, expect, first - 1);
		}
		expect = o.last_seq + 1;
	}
	buf_destroy(&b);
	env.free(l.v);
	if (rc)
		return rc;
	w->store.covered = expect - 1;
	w->store.gaps = gaps;
	return 0;
}

/** The epoch the epoch object names (0 when there is none). */
static int
wal_store_epoch_read(struct wal *w, uint64_t *epoch)
{
	char key[512];
	snprintf(key, sizeof(key), "%s" WAL_STORE_EPOCH, w->store.prefix);
	/* A whole get, never a ranged read: the object is rewritten by every new owner, and
	 * a store may keep the descriptors of the objects it reads by range (the fs store
	 * does), which would go on reading the replaced one. */
	struct buf b = {0};
	*epoch = 0;
	int rc = objstore_get(w->store.os, key, &b);
	if (rc == STRATA_NOTFOUND) {
		buf_destroy(&b);
		return 0;
	}
	if (rc == 0 && wal_fence_decode(b.data, b.len, epoch) != 0)
		rc = diag_set(STRATA_ECORRUPT, "wal: the epoch object %s (%s) is damaged", key,
			      w->store.os->name);
	buf_destroy(&b);
	return rc;
}

/**
 * Leader, after a batch's put: now and then, read the epoch object. A newer owner writes
 * it before it walks the WAL to fence it, so an older writer that still appends stops
 * within a few commits and the new owner's fence, chasing the tail, gets ahead of it.
 * (Correctness rests on the fence: a put that finds its position taken; this is what
 * makes the chase end.) The batch just put is then not acknowledged: its outcome is
 * unknown, the new owner replays it or not.
 */
static int
wal_store_epoch_check(struct wal *w)
{
	uint64_t now = env.mono_ns();
	if (++w->store.commits_unchecked < WAL_STORE_EPOCH_CHECK_COMMITS &&
	    now - w->store.epoch_checked_ns < WAL_STORE_EPOCH_CHECK_NS)
		return 0;
	w->store.commits_unchecked = 0;
	w->store.epoch_checked_ns = now;
	uint64_t owner = 0;
	int rc = wal_store_epoch_read(w, &owner);
	if (rc)
		return rc;
	if (owner > w->epoch)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: a newer owner (epoch %" PRIu64 ") is taking "
				"the shard over from this writer (epoch %" PRIu64 "); appends in flight have an "
				"unknown outcome and no later append is accepted", w->store.prefix, owner, w->epoch);
	atomic_store(&w->store.owner_seen_ns, now);
	return 0;
}

int
wal_owner_check(struct wal *w, uint64_t max_age_ns)
{
	if (w->store.os == NULL)
		return 0;
	int failed = wal_failed(w);
	if (failed == STRATA_EFENCED)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: a newer owner took the shard over from this "
				"writer (epoch %" PRIu64 ")", w->store.prefix, w->epoch);
	uint64_t now = env.mono_ns();
	uint64_t seen = atomic_load(&w->store.owner_seen_ns);
	if (max_age_ns != 0 && seen != 0 && now - seen <= max_age_ns)
		return 0;
	uint64_t owner = 0;
	int rc = wal_store_epoch_read(w, &owner);
	if (rc) {
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		return diag_set(rc, "wal: %s: cannot confirm that this writer (epoch %" PRIu64 ") still owns the "
				"shard: %s", w->store.prefix, w->epoch, why);
	}
	if (owner > w->epoch) {
		char why[512];
		rc = diag_set(STRATA_EFENCED, "wal: %s is fenced: the epoch object names a newer owner (epoch "
			      "%" PRIu64 ") than this writer (epoch %" PRIu64 "); it no longer serves the shard",
			      w->store.prefix, owner, w->epoch);
		snprintf(why, sizeof(why), "%s", diag_last());
		wal_fence(w, why);
		return rc;
	}
	atomic_store(&w->store.owner_seen_ns, now);
	return 0;
}

/** wal_start: write epoch into the epoch object, unless it names a newer owner. */
static int
wal_store_epoch_take(struct wal *w, uint64_t epoch)
{
	uint64_t owner = 0;
	int rc = wal_store_epoch_read(w, &owner);
	if (rc == STRATA_ECORRUPT) {
		diag_log(LOG_LVL_WARN, "%s: rewriting it", diag_last());
		rc = 0;
	}
	if (rc)
		return rc;
	if (owner > epoch)
		return diag_set(STRATA_EFENCED, "wal: %s is owned by a newer epoch %" PRIu64 " than ours (%" PRIu64
				")", w->store.prefix, owner, epoch);
	char key[512];
	snprintf(key, sizeof(key), "%s" WAL_STORE_EPOCH, w->store.prefix);
	uint8_t b[WAL_FENCE_BYTES];
	wal_fence_encode(b, epoch);
	return objstore_put(w->store.os, key, b, sizeof(b));
}

/**
 * Leader: put one object by put-if-absent. A position already taken, or a put whose
 * outcome is unknown, is read back: our own bytes there are our write (a retry that
 * landed twice); another object there means a newer owner fenced us (STRATA_EFENCED).
 */
static int
wal_store_put(struct wal *w, uint64_t first, const void *data, size_t len, uint64_t *nputs)
{
	char key[512];
	wal_obj_key(w, first, key, sizeof(key));
	(*nputs)++;
	int rc = objstore_put_if_absent(w->store.os, key, data, len);
	if (rc == 0)
		return 0;
	int indeterminate = objstore_last_indeterminate();
	if (rc != STRATA_EEXIST && !indeterminate)
		return rc;
	char why[WAL_MSG_MAX];
	snprintf(why, sizeof(why), "%s", diag_last());
	struct buf b = {0};
	int g = objstore_get(w->store.os, key, &b);
	uint64_t other = b.len >= WAL_OBJ_HDR && memcmp(b.data, wal_obj_magic, 8) == 0 ? dec_u64(b.data + 16)
										    : 0;
	int same = g == 0 && b.len == len && memcmp(b.data, data, len) == 0;
	buf_destroy(&b);
	if (same)
		return 0;
	if (g == 0)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: position %" PRIu64 " is taken by an object "
				"of epoch %" PRIu64 " (this writer's epoch %" PRIu64 "): a newer owner took the "
				"shard over; appends in flight have an unknown outcome and no later append is "
				"accepted", w->store.prefix, first, other, w->epoch);
	return diag_set(STRATA_EIO, "wal: %s (%s): cannot confirm the put at position %" PRIu64 " (%s)",
			w->store.prefix, w->store.os->name, first, why);
}

int
wal_store_flush(struct wal *w, struct wal_entry *head, uint64_t *nputs)
{
	uint64_t first = head->first_seq, last = 0;
	uint32_t n = 0;
	buf_reset(&w->stg);
	size_t len = WAL_OBJ_HDR;
	for (struct wal_entry *e = head; e != NULL; e = e->next) {
		len += e->len;
		last = e->last_seq;
		n++;
	}
	int rc = buf_reserve(&w->stg, len);
	if (rc)
		return diag_set(STRATA_ENOMEM, "wal: out of memory for an object of %zu bytes", len);
	uint8_t h[WAL_OBJ_HDR];
	wal_obj_header(h, WAL_OBJ_BATCH, w->epoch, first, last, n);
	buf_append(&w->stg, h, sizeof(h));
	for (struct wal_entry *e = head; e != NULL; e = e->next)
		buf_append(&w->stg, e->data, e->len);
	if (env_point(ENV_POINT_WAL_BEFORE_SYNC, w) != 0) {
		buf_reset(&w->stg);
		return diag_set(STRATA_EINJECTED, "wal: failure injected at wal.before_sync in %s",
				w->store.prefix);
	}
	rc = wal_store_put(w, first, w->stg.data, w->stg.len, nputs);
	buf_reset(&w->stg);
	if (rc == 0)
		rc = wal_store_epoch_check(w);
	if (rc)
		return rc;
	struct wal_obj o = {first, last, len, WAL_OBJ_BATCH};
	pthread_mutex_lock(&w->mu);
	rc = wal_obj_insert(w, &o);
	pthread_mutex_unlock(&w->mu);
	if (rc)
		return rc;
	w->cur_last = last;
	return 0;
}

/** Put a marker (fence or void) covering first..last: 0, STRATA_EEXIST, or a failure. */
static int
wal_store_marker(struct wal *w, int kind, uint64_t first, uint64_t last)
{
	uint8_t h[WAL_OBJ_HDR];
	wal_obj_header(h, kind, w->epoch, first, last, 0);
	char key[512];
	wal_obj_key(w, first, key, sizeof(key));
	w->syncs++;
	int rc = objstore_put_if_absent(w->store.os, key, h, sizeof(h));
	if (rc == 0) {
		struct wal_obj o = {first, last, WAL_OBJ_HDR, kind};
		return wal_obj_insert(w, &o);
	}
	if (rc == STRATA_EEXIST || objstore_last_indeterminate()) {
		diag_log(LOG_LVL_DEBUG, "wal: %s: the %s at position %" PRIu64 " did not take (%s)",
			 w->store.prefix, wal_obj_kind_name(kind), first, diag_last());
		return STRATA_EEXIST;
	}
	return rc;
}

/** Read the object at position first (the one that took the position a fence wanted),
 *  replay it through the start's callback and track it; its epoch into *epoch. */
static int
wal_store_read_at(struct wal *w, uint64_t first, struct wal_obj *o, uint64_t *epoch)
{
	char key[512];
	wal_obj_key(w, first, key, sizeof(key));
	struct buf b = {0};
	int rc = objstore_get(w->store.os, key, &b);
	if (rc == 0)
		rc = wal_obj_replay(w, key, first, b.data, b.len, w->replay_after, w->cb, w->cb_ctx, o, epoch);
	buf_destroy(&b);
	if (rc == 0 && wal_obj_find(w, first) < 0)
		rc = wal_obj_insert(w, o);
	return rc;
}

/**
 * wal_start of a WAL on the store: walk (replaying what appeared since the scan), close
 * every gap with a void object, then put a fence at the next position. A fence that
 * finds its position taken (the older writer still appends) reads and replays the object
 * there and tries the position after it, chasing the tail object by object; an object
 * that vanished, or a void that did not take, walks again.
 */
int
wal_store_start(struct wal *w, uint64_t epoch, uint64_t floor)
{
	w->epoch = epoch;
	int rc = wal_store_epoch_take(w, epoch);
	if (rc)
		return rc;
	atomic_store(&w->store.owner_seen_ns, env.mono_ns());
	for (int attempt = 0;; attempt++) {
		if (attempt == WAL_STORE_ATTEMPTS)
			return diag_set(STRATA_EBUSY, "wal: %s (%s): %d walks and the WAL still moves: another "
					"writer keeps appending", w->store.prefix, w->store.os->name, attempt);
		struct wal_gap gap;
		rc = wal_store_walk(w, w->cb, w->cb_ctx, 1, &gap);
		if (rc)
			return rc;
		if (gap.first != 0) {
			rc = wal_store_marker(w, WAL_OBJ_VOID, gap.first, gap.last);
			if (rc == 0) {
				w->store.gaps_closed++;
				diag_log(LOG_LVL_WARN, "wal: %s (%s): closed the gap at positions %" PRIu64 "..%"
					 PRIu64 " with a void object", w->store.prefix, w->store.os->name, gap.first,
					 gap.last);
			}
			if (rc == 0 || rc == STRATA_EEXIST)
				continue;
			return rc;
		}
		uint64_t next = w->store.covered + 1 > floor ? w->store.covered + 1 : floor;
		int fenced = 0;
		for (int chase = 0; chase < WAL_STORE_CHASE; chase++) {
			rc = wal_store_marker(w, WAL_OBJ_FENCE, next, next);
			if (rc == 0) {
				fenced = 1;
				break;
			}
			if (rc != STRATA_EEXIST)
				return rc;
			struct wal_obj o;
			uint64_t oe = 0;
			rc = wal_store_read_at(w, next, &o, &oe);
			if (rc == STRATA_NOTFOUND)
				break; /* walk again */
			if (rc)
				return rc;
			if (o.kind == WAL_OBJ_FENCE && oe == epoch) {
				fenced = 1; /* our own put whose answer was lost */
				break;
			}
			next = o.last_seq + 1;
		}
		if (!fenced)
			continue;
		w->next_seq = next + 1;
		w->cur_last = next;
		return 0;
	}
}

/** wal_release of a WAL on the store: objects wholly at or below upto go to the reaper
 *  (markers stay: a stalled older writer's put must still find its position taken). */
int
wal_store_release(struct wal *w, uint64_t upto)
{
	char key[512];
	int rc = 0;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (w->store.nobjs == 0 || w->store.objs[0].last_seq > upto) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		struct wal_obj o = w->store.objs[0];
		memmove(w->store.objs, w->store.objs + 1, (w->store.nobjs - 1) * sizeof(*w->store.objs));
		w->store.nobjs--;
		wal_obj_key(w, o.first_seq, key, sizeof(key));
		if (o.kind == WAL_OBJ_BATCH && w->store.reaper != NULL)
			reaper_add(w->store.reaper, key, o.bytes);
		pthread_mutex_unlock(&w->mu);
		if (o.kind == WAL_OBJ_BATCH && w->store.reaper == NULL) {
			int r = objstore_del(w->store.os, key);
			if (rc == 0)
				rc = r;
		}
	}
	return rc;
}

/** Refuse a local WAL directory that still holds rows after the cursor (the shard was
 *  written with wal = local: replaying only the store would lose them). */
static int
wal_store_local_check(struct wal *w)
{
	struct wal_segment_info *fs;
	size_t n;
	int rc = wal_survey(w->dir, UINT32_MAX, UINT64_MAX, NULL, NULL, NULL, 0, &fs, &n);
	if (rc)
		return rc;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (!fs[i].gone && fs[i].last_seq > w->replay_after && fs[i].last_seq >= fs[i].first_seq)
			rc = diag_set(STRATA_EINVAL, "wal: %s holds rows after the cursor (up to position %"
				      PRIu64 " in %s): this shard's WAL is local; open it with wal = local "
				      "(and seal it) before switching to wal = store", w->dir,
				      fs[i].last_seq, fs[i].name);
	env.free(fs);
	return rc;
}

int
wal_store_scan(struct wal *w, wal_replay_cb cb, void *ctx)
{
	struct wal_gap gap;
	int rc = wal_store_local_check(w);
	if (rc == 0)
		rc = wal_store_walk(w, cb, ctx, 0, &gap);
	return rc;
}

int
wal_store_has_rows(struct objstore *os, const char *prefix, uint64_t replay_after, int *has)
{
	*has = 0;
	struct wal w = {.store = {.os = os, .prefix = (char *)prefix}};
	struct wal_listing l = {.w = &w};
	int rc = objstore_list(os, prefix, wal_listing_cb, &l);
	for (size_t i = l.n; rc == 0 && i-- > 0;) {
		if (l.v[i].size == WAL_OBJ_HDR)
			continue;
		if (l.v[i].first > replay_after) {
			*has = 1;
			break;
		}
		char key[512];
		wal_obj_key(&w, l.v[i].first, key, sizeof(key));
		uint8_t h[WAL_OBJ_HDR];
		size_t got = 0;
		rc = objstore_get_range(os, key, 0, sizeof(h), h, &got);
		if (rc == 0 && got == sizeof(h) && dec_u64(h + 32) > replay_after)
			*has = 1;
		break;
	}
	env.free(l.v);
	return rc;
}

int
wal_inspect_store(struct objstore *os, const char *prefix, uint64_t replay_after, int verify,
		  wal_object_cb cb, void *ctx, uint64_t *epoch)
{
	*epoch = 0;
	if (os == NULL || prefix == NULL || cb == NULL)
		return diag_set(STRATA_EINVAL, "wal: inspect needs a store, a prefix and a callback");
	/* An inspecting handle: no limit on entries but the format's, no reaper, no owner. */
	struct wal w = {.max_entry = UINT32_MAX, .store = {.os = os, .prefix = (char *)prefix}};
	struct wal_listing l = {.w = &w};
	int rc = objstore_list(os, prefix, wal_listing_cb, &l);
	if (rc == 0 && wal_store_epoch_read(&w, epoch) != 0) {
		*epoch = 0; /* a damaged epoch object is not the listing's failure: say so and go on */
		diag_log(LOG_LVL_WARN, "%s", diag_last());
	}
	struct buf b = {0};
	int n = 0;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		struct wal_object_info in;
		memset(&in, 0, sizeof(in));
		snprintf(in.name, sizeof(in.name), "%020" PRIu64, l.v[i].first);
		in.bytes = l.v[i].size;
		in.kind = "?";
		in.first_seq = l.v[i].first; /* the key names it; a whole header says the same */
		char key[512];
		wal_obj_key(&w, l.v[i].first, key, sizeof(key));
		size_t got = 0;
		buf_reset(&b);
		int r;
		if (verify) {
			r = objstore_get(os, key, &b);
		} else {
			r = buf_reserve(&b, WAL_OBJ_HDR);
			if (r == 0)
				r = objstore_get_range(os, key, 0, WAL_OBJ_HDR, b.data, &got);
			b.len = got;
		}
		if (r == STRATA_NOTFOUND)
			continue; /* a running node released it since the listing */
		int header_ok = 0;
		if (r == 0) {
			struct wal_obj o;
			uint64_t ep = 0;
			uint32_t ne = 0;
			r = wal_obj_check_header(&w, key, l.v[i].first, b.data, b.len, &o, &ep, &ne);
			if (r == 0) {
				header_ok = 1;
				in.kind = wal_obj_kind_name(o.kind);
				in.epoch = ep;
				in.last_seq = o.last_seq;
				in.entries = ne;
				if (verify)
					r = wal_obj_replay(&w, key, l.v[i].first, b.data, b.len, 0, NULL, NULL, &o,
							   &ep);
			}
		}
		if (r != 0)
			snprintf(in.why, sizeof(in.why), "%s", diag_last());
		/* As wal_store_walk judges it: an object the next one starts at or below
		 * replay_after + 1 from, or one whose header ends at or below replay_after, is
		 * only collected (a damaged header still fails the open); the others are
		 * replayed whole. */
		in.below = (i + 1 < l.n && l.v[i + 1].first <= replay_after + 1) ||
			   (header_ok && in.last_seq <= replay_after);
		in.refused = in.why[0] != '\0' && (!header_ok || !in.below);
		n++;
		rc = cb(ctx, &in);
	}
	buf_destroy(&b);
	env.free(l.v);
	return rc ? rc : n;
}

void
wal_store_stats(struct wal *w, uint64_t *gaps, uint64_t *gaps_closed, uint64_t *stale_collected)
{
	pthread_mutex_lock(&w->mu);
	if (gaps)
		*gaps = w->store.gaps;
	if (gaps_closed)
		*gaps_closed = w->store.gaps_closed;
	if (stale_collected)
		*stale_collected = w->store.stale_collected;
	pthread_mutex_unlock(&w->mu);
}
