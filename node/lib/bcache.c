/*
 * bcache.c — the sharded LRU of bcache.h.
 *
 * Each shard has a mutex, a chained hash table and a list of its idle entries (no
 * handle out), most recently used first; a pinned entry is off the list and cannot be
 * evicted. A shard's bytes never exceed its share of the evicting capacity: an insert
 * evicts idle entries from the cold end until the new one fits, and when even an empty
 * list leaves no room the entry is handed out detached (never in the table, freed at
 * its release).
 */
#include "bcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../strata_types.h"
#include "diag.h"
#include "env.h"

/** Most shards; fewer when each would hold under BCACHE_MIN_SHARD_BYTES. */
#define BCACHE_MAX_SHARDS 16u
/** Smallest share of the capacity a shard is given (unless the cache is smaller). */
#define BCACHE_MIN_SHARD_BYTES (1u << 20)
/** Resident budget: capacity / BCACHE_RESIDENT_DIV. */
#define BCACHE_RESIDENT_DIV 4u

struct bcache_entry {
	/** Object identity (bcache_new_id). */
	uint64_t id;
	/** Offset in the object. */
	uint64_t off;
	/** Hash of (id, off). */
	uint64_t hash;
	/** The value. */
	void *value;
	/** Frees value. */
	bcache_free_fn free_fn;
	/** Bytes charged (value plus overhead). */
	size_t charge;
	/** Handles out (under the shard's mutex). */
	uint32_t refs;
	/** In the shard's table (0: detached, or erased by an eviction). */
	uint32_t in_table;
	/** Next entry of the hash chain. */
	struct bcache_entry *next_hash;
	/** Neighbours on the idle list. */
	struct bcache_entry *prev, *next;
};

/** One shard of the cache. */
struct bcache_shard {
	/** Guards everything below. */
	pthread_mutex_t mu;
	/** Hash chains; nbuckets is a power of two. */
	struct bcache_entry **buckets;
	/** Number of buckets. */
	size_t nbuckets;
	/** Entries in the table. */
	size_t count;
	/** Bytes charged by the entries in the table. */
	uint64_t bytes;
	/** This shard's share of the evicting capacity. */
	uint64_t capacity;
	/** Idle list: head is the most recently used. */
	struct bcache_entry lru;
	/** Counters. */
	uint64_t hits, misses, evictions, rejected;
} __attribute__((aligned(64)));

struct bcache {
	/** Shards; nshards is a power of two. */
	struct bcache_shard *shards;
	/** Number of shards. */
	uint32_t nshards;
	/** Evicting capacity. */
	uint64_t capacity;
	/** Resident budget. */
	uint64_t resident_capacity;
	/** Bytes reserved in the resident budget. */
	_Atomic(uint64_t) resident;
};

static _Atomic(uint64_t) bcache_ids = 1;

uint64_t
bcache_new_id(void)
{
	return atomic_fetch_add_explicit(&bcache_ids, 1, memory_order_relaxed);
}

size_t
bcache_entry_overhead(void)
{
	return sizeof(struct bcache_entry) + 2 * sizeof(void *);
}

static uint64_t
bcache_hash(uint64_t id, uint64_t off)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull ^ (off + 0x632be59bd9b4e019ull);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return h;
}

int
bcache_new(uint64_t capacity, struct bcache **out)
{
	*out = NULL;
	if (capacity == 0)
		return diag_set(STRATA_EINVAL, "block cache: a capacity of 0 bytes (0 means no cache)");
	struct bcache *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "block cache: out of memory");
	c->resident_capacity = capacity / BCACHE_RESIDENT_DIV;
	c->capacity = capacity - c->resident_capacity;
	uint32_t n = BCACHE_MAX_SHARDS;
	while (n > 1 && c->capacity / n < BCACHE_MIN_SHARD_BYTES)
		n /= 2;
	c->nshards = n;
	c->shards = env.calloc(n, sizeof(*c->shards));
	if (c->shards == NULL) {
		env.free(c);
		return diag_set(STRATA_ENOMEM, "block cache: out of memory");
	}
	for (uint32_t i = 0; i < n; i++) {
		struct bcache_shard *s = &c->shards[i];
		pthread_mutex_init(&s->mu, NULL);
		s->capacity = c->capacity / n;
		s->lru.next = s->lru.prev = &s->lru;
		s->nbuckets = 64;
		s->buckets = env.calloc(s->nbuckets, sizeof(*s->buckets));
		if (s->buckets == NULL) {
			c->nshards = i + 1;
			bcache_delete(c);
			return diag_set(STRATA_ENOMEM, "block cache: out of memory");
		}
	}
	*out = c;
	return 0;
}

static void
bcache_free_entry(struct bcache_entry *e)
{
	if (e->free_fn != NULL)
		e->free_fn(e->value);
	env.free(e);
}

void
bcache_delete(struct bcache *c)
{
	if (c == NULL)
		return;
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct bcache_shard *s = &c->shards[i];
		for (size_t b = 0; s->buckets != NULL && b < s->nbuckets; b++) {
			struct bcache_entry *e = s->buckets[b];
			while (e != NULL) {
				struct bcache_entry *next = e->next_hash;
				bcache_free_entry(e);
				e = next;
			}
		}
		env.free(s->buckets);
		pthread_mutex_destroy(&s->mu);
	}
	env.free(c->shards);
	env.free(c);
}

static struct bcache_shard *
bcache_shard_of(struct bcache *c, uint64_t h)
{
	return &c->shards[(h >> 56) & (c->nshards - 1)];
}

static struct bcache_entry **
bcache_slot(struct bcache_shard *s, uint64_t id, uint64_t off, uint64_t h)
{
	struct bcache_entry **p = &s->buckets[h & (s->nbuckets - 1)];
	while (*p != NULL && ((*p)->id != id || (*p)->off != off))
		p = &(*p)->next_hash;
	return p;
}

static void
lru_remove(struct bcache_entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = NULL;
}

static void
lru_push(struct bcache_shard *s, struct bcache_entry *e)
{
	e->next = s->lru.next;
	e->prev = &s->lru;
	s->lru.next->prev = e;
	s->lru.next = e;
}

/** Grow the table when it holds more entries than buckets (best effort). */
static void
bcache_grow(struct bcache_shard *s)
{
	if (s->count <= s->nbuckets)
		return;
	size_t n = s->nbuckets * 2;
	struct bcache_entry **b = env.calloc(n, sizeof(*b));
	if (b == NULL)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct bcache_entry *e = s->buckets[i];
		while (e != NULL) {
			struct bcache_entry *next = e->next_hash;
			e->next_hash = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	env.free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
}

struct bcache_entry *
bcache_lookup(struct bcache *c, uint64_t id, uint64_t off)
{
	uint64_t h = bcache_hash(id, off);
	struct bcache_shard *s = bcache_shard_of(c, h);
	pthread_mutex_lock(&s->mu);
	struct bcache_entry *e = *bcache_slot(s, id, off, h);
	if (e != NULL) {
		if (e->refs++ == 0)
			lru_remove(e);
		s->hits++;
	} else {
		s->misses++;
	}
	pthread_mutex_unlock(&s->mu);
	return e;
}

struct bcache_entry *
bcache_insert(struct bcache *c, uint64_t id, uint64_t off, void *value, size_t charge,
	      bcache_free_fn free_fn)
{
	struct bcache_entry *e = env.malloc(sizeof(*e));
	if (e == NULL) {
		if (free_fn != NULL)
			free_fn(value);
		diag_set(STRATA_ENOMEM, "block cache: out of memory");
		return NULL;
	}
	uint64_t h = bcache_hash(id, off);
	*e = (struct bcache_entry){.id = id, .off = off, .hash = h, .value = value,
				   .free_fn = free_fn, .charge = charge + bcache_entry_overhead(),
				   .refs = 1};
	struct bcache_shard *s = bcache_shard_of(c, h);
	struct bcache_entry *victims = NULL;
	pthread_mutex_lock(&s->mu);
	struct bcache_entry **slot = bcache_slot(s, id, off, h);
	if (*slot != NULL) {
		struct bcache_entry *old = *slot;
		if (old->refs++ == 0)
			lru_remove(old);
		pthread_mutex_unlock(&s->mu);
		bcache_free_entry(e);
		return old;
	}
	while (s->bytes + e->charge > s->capacity && s->lru.prev != &s->lru) {
		struct bcache_entry *v = s->lru.prev;
		lru_remove(v);
		*bcache_slot(s, v->id, v->off, v->hash) = v->next_hash;
		v->in_table = 0;
		s->bytes -= v->charge;
		s->count--;
		s->evictions++;
		v->next_hash = victims;
		victims = v;
	}
	if (s->bytes + e->charge <= s->capacity) {
		slot = bcache_slot(s, id, off, h);
		e->next_hash = NULL;
		*slot = e;
		e->in_table = 1;
		s->bytes += e->charge;
		s->count++;
		bcache_grow(s);
	} else {
		s->rejected++;
	}
	pthread_mutex_unlock(&s->mu);
	while (victims != NULL) {
		struct bcache_entry *next = victims->next_hash;
		bcache_free_entry(victims);
		victims = next;
	}
	return e;
}

void *
bcache_value(const struct bcache_entry *e)
{
	return e->value;
}

void
bcache_release(struct bcache *c, struct bcache_entry *e)
{
	if (e == NULL)
		return;
	struct bcache_shard *s = bcache_shard_of(c, e->hash);
	pthread_mutex_lock(&s->mu);
	int gone = 0;
	if (--e->refs == 0) {
		if (e->in_table)
			lru_push(s, e);
		else
			gone = 1;
	}
	pthread_mutex_unlock(&s->mu);
	if (gone)
		bcache_free_entry(e);
}

int
bcache_reserve(struct bcache *c, uint64_t bytes)
{
	uint64_t cur = atomic_load_explicit(&c->resident, memory_order_relaxed);
	do {
		if (bytes > c->resident_capacity || cur > c->resident_capacity - bytes)
			return -1;
	} while (!atomic_compare_exchange_weak(&c->resident, &cur, cur + bytes));
	return 0;
}

void
bcache_unreserve(struct bcache *c, uint64_t bytes)
{
	atomic_fetch_sub(&c->resident, bytes);
}

void
bcache_get_stats(struct bcache *c, struct bcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return;
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct bcache_shard *s = &c->shards[i];
		pthread_mutex_lock(&s->mu);
		out->hits += s->hits;
		out->misses += s->misses;
		out->evictions += s->evictions;
		out->rejected += s->rejected;
		out->bytes += s->bytes;
		out->entries += s->count;
		pthread_mutex_unlock(&s->mu);
	}
	out->capacity = c->capacity;
	out->resident_bytes = atomic_load(&c->resident);
	out->resident_capacity = c->resident_capacity;
}
