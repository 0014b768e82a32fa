/*
 * bcache.h — a bounded, sharded LRU cache of immutable values keyed by (id, offset),
 * shared by threads: the block cache of a store's run readers.
 *
 * Every entry is charged its value's bytes plus the cache's own overhead per entry; the
 * bytes charged never exceed the evicting capacity (an insert that cannot make room by
 * evicting idle entries returns a handle that is not kept). A handle pins its entry
 * until released: a pinned entry is never evicted or freed. Keys are (id, offset):
 * ids come from bcache_new_id, one per reader of one object, so a block of an object
 * that was replaced or deleted is never found again (it ages out).
 *
 * A second budget, the resident one (a quarter of the capacity), is only counted here:
 * whoever keeps bytes outside the evicting part (the index and filter partitions of
 * pending generations) reserves them with bcache_reserve and gives them back with
 * bcache_unreserve. The two together never exceed the configured capacity.
 */
#ifndef STRATA_BCACHE_H
#define STRATA_BCACHE_H

#include <stddef.h>
#include <stdint.h>

struct bcache;
struct bcache_entry;

/** Frees a value when its entry goes. */
typedef void (*bcache_free_fn)(void *value);

/** What the cache holds and did, since it was created. */
struct bcache_stats {
	/** Lookups that found their entry. */
	uint64_t hits;
	/** Lookups that did not. */
	uint64_t misses;
	/** Entries evicted to make room. */
	uint64_t evictions;
	/** Inserts that did not fit (their value was used once and freed). */
	uint64_t rejected;
	/** Bytes charged to the evicting part now (values plus overhead). */
	uint64_t bytes;
	/** Capacity of the evicting part. */
	uint64_t capacity;
	/** Bytes reserved in the resident budget now. */
	uint64_t resident_bytes;
	/** The resident budget. */
	uint64_t resident_capacity;
	/** Entries in the evicting part now. */
	uint64_t entries;
};

/** Bytes the cache charges per entry on top of its value. */
size_t bcache_entry_overhead(void);
/** A cache of capacity bytes (evicting part plus resident budget). STRATA_EINVAL for
 *  0, STRATA_ENOMEM. */
int bcache_new(uint64_t capacity, struct bcache **out);
/** Free the cache and every value. No handle may be outstanding. Safe on NULL. */
void bcache_delete(struct bcache *c);
/** An id no other caller of this process ever gets. */
uint64_t bcache_new_id(void);
/** The entry of (id, off), pinned, or NULL. */
struct bcache_entry *bcache_lookup(struct bcache *c, uint64_t id, uint64_t off);
/** Insert value (charged charge bytes plus the overhead) under (id, off) and return it
 *  pinned. The cache owns value from here on: when (id, off) is cached already the
 *  existing entry is returned and value freed; when it does not fit, the handle returned
 *  is not kept (freed at its release). NULL only when out of memory (value freed). */
struct bcache_entry *bcache_insert(struct bcache *c, uint64_t id, uint64_t off, void *value,
				   size_t charge, bcache_free_fn free_fn);
/** The value of a pinned entry. */
void *bcache_value(const struct bcache_entry *e);
/** Unpin an entry. Safe on NULL. */
void bcache_release(struct bcache *c, struct bcache_entry *e);
/** Reserve bytes of the resident budget: 0, or -1 when they do not fit. */
int bcache_reserve(struct bcache *c, uint64_t bytes);
/** Give back bytes reserved. */
void bcache_unreserve(struct bcache *c, uint64_t bytes);
/** Counters and sizes now. */
void bcache_get_stats(struct bcache *c, struct bcache_stats *out);

#endif
