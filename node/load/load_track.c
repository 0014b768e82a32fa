/*
 * load_track.c — every acknowledged row of a load run, for the read-back at the end.
 *
 * An open-addressing table keyed by (shard, key) keeps, per key, the sequence
 * number and value hash of the newest acknowledged row, and whether an append of
 * the key failed (its outcome is unknown: the node may have applied it). Keys live
 * in one arena. The table holds at most max_rows keys; more are counted, not kept.
 */
#include <string.h>
#include <xxhash.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "load.h"

/** One tracked key. */
struct load_track_ent {
	/** Hash of (shard, key); 0 = empty slot. */
	uint64_t h;
	/** Offset of the key in the arena. */
	uint64_t koff;
	/** Sequence number of the newest acknowledged row (0 = none acknowledged). */
	uint64_t seq;
	/** Hash of its value. */
	uint64_t vhash;
	/** Key length. */
	uint32_t klen;
	/** Value length. */
	uint32_t vlen;
	/** Shard. */
	uint32_t shard;
	/** An append of this key failed: a different value may legitimately be newest. */
	uint32_t uncertain;
};

struct load_track {
	/** Slots (power of two). */
	struct load_track_ent *ent;
	/** Number of slots. */
	uint64_t cap;
	/** Used slots. */
	uint64_t used;
	/** Most keys kept. */
	uint64_t max_rows;
	/** Keys not kept because of max_rows. */
	uint64_t overflow;
	/** Key bytes. */
	struct buf arena;
};

uint64_t
load_track_hash(const void *v, size_t n)
{
	return XXH3_64bits(v, n);
}

static uint64_t
track_key_hash(uint32_t shard, const void *key, size_t klen)
{
	uint64_t h = XXH3_64bits_withSeed(key, klen, shard);
	return h == 0 ? 1 : h;
}

int
load_track_new(uint64_t max_rows, struct load_track **out)
{
	struct load_track *t = env.calloc(1, sizeof(*t));
	if (t == NULL)
		return diag_set(STRATA_ENOMEM, "load: out of memory for the row tracker");
	t->cap = 1024;
	t->max_rows = max_rows;
	t->ent = env.calloc(t->cap, sizeof(*t->ent));
	if (t->ent == NULL) {
		env.free(t);
		return diag_set(STRATA_ENOMEM, "load: out of memory for the row tracker");
	}
	*out = t;
	return 0;
}

void
load_track_delete(struct load_track *t)
{
	if (t == NULL)
		return;
	buf_destroy(&t->arena);
	env.free(t->ent);
	env.free(t);
}

static int
track_grow(struct load_track *t)
{
	uint64_t ncap = t->cap * 2;
	struct load_track_ent *n = env.calloc(ncap, sizeof(*n));
	if (n == NULL)
		return diag_set(STRATA_ENOMEM, "load: out of memory growing the row tracker to %llu slots",
				(unsigned long long)ncap);
	for (uint64_t i = 0; i < t->cap; i++) {
		if (t->ent[i].h == 0)
			continue;
		uint64_t j = t->ent[i].h & (ncap - 1);
		while (n[j].h != 0)
			j = (j + 1) & (ncap - 1);
		n[j] = t->ent[i];
	}
	env.free(t->ent);
	t->ent = n;
	t->cap = ncap;
	return 0;
}

/** The slot of (shard, key), inserting it when create; NULL when absent or full. */
static struct load_track_ent *
track_find(struct load_track *t, uint32_t shard, const void *key, size_t klen, int create)
{
	uint64_t h = track_key_hash(shard, key, klen);
	uint64_t j = h & (t->cap - 1);
	while (t->ent[j].h != 0) {
		struct load_track_ent *e = &t->ent[j];
		if (e->h == h && e->shard == shard && e->klen == klen &&
		    memcmp(t->arena.data + e->koff, key, klen) == 0)
			return e;
		j = (j + 1) & (t->cap - 1);
	}
	if (!create)
		return NULL;
	if (t->used >= t->max_rows) {
		t->overflow++;
		return NULL;
	}
	if ((t->used + 1) * 10 > t->cap * 7) {
		if (track_grow(t) != 0) {
			t->overflow++;
			return NULL;
		}
		return track_find(t, shard, key, klen, create);
	}
	uint64_t off = t->arena.len;
	if (buf_append(&t->arena, key, klen) != 0) {
		t->overflow++;
		return NULL;
	}
	struct load_track_ent *e = &t->ent[j];
	memset(e, 0, sizeof(*e));
	e->h = h;
	e->koff = off;
	e->klen = (uint32_t)klen;
	e->shard = shard;
	t->used++;
	return e;
}

void
load_track_ack(struct load_track *t, uint32_t shard, const void *key, size_t klen, uint64_t seq,
	       uint64_t vhash, uint32_t vlen)
{
	struct load_track_ent *e = track_find(t, shard, key, klen, 1);
	if (e == NULL || seq < e->seq)
		return;
	e->seq = seq;
	e->vhash = vhash;
	e->vlen = vlen;
}

void
load_track_uncertain(struct load_track *t, uint32_t shard, const void *key, size_t klen)
{
	struct load_track_ent *e = track_find(t, shard, key, klen, 1);
	if (e != NULL)
		e->uncertain = 1;
}

uint64_t
load_track_count(const struct load_track *t)
{
	return t->used;
}

uint64_t
load_track_overflow(const struct load_track *t)
{
	return t->overflow;
}

uint64_t
load_track_capacity(const struct load_track *t)
{
	return t->cap;
}

int
load_track_entry(const struct load_track *t, uint64_t i, uint32_t *shard, const void **key, size_t *klen)
{
	const struct load_track_ent *e = &t->ent[i];
	if (e->h == 0 || e->seq == 0)
		return 0;
	*shard = e->shard;
	*key = t->arena.data + e->koff;
	*klen = e->klen;
	return 1;
}

int
load_track_check(const struct load_track *t, uint64_t i, int found, const void *v, size_t vlen)
{
	const struct load_track_ent *e = &t->ent[i];
	if (e->vlen == LOAD_TRACK_DELETED)
		return !found ? 0 : e->uncertain ? 3 : 2;
	if (!found)
		return 1;
	if (vlen == e->vlen && load_track_hash(v, vlen) == e->vhash)
		return 0;
	return e->uncertain ? 3 : 2;
}
