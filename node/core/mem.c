/*
 * mem.c — the memtable: an insert-only skiplist linked with one CAS per level,
 * entries copied inline into an arena of env.malloc'd chunks.
 */
#include "mem.h"

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/keycmp.h"

/** One skiplist entry; key then value bytes follow the tower. */
struct mem_node {
	/** Sequence number of the row. */
	uint64_t seq;
	/** Value length in bytes. */
	size_t vlen;
	/** Key length in bytes. */
	uint32_t klen;
	/** Number of levels this node is linked on, 1..MEM_MAX_HEIGHT. */
	uint16_t height;
	/** STRATA_ROW_PUT or STRATA_ROW_DELETE (a tombstone, vlen 0). */
	uint16_t kind;
	/** Successor on each level 0..height-1. */
	_Atomic(struct mem_node *) next[];
};

/** A block of arena memory: a chunk shared by bump allocation, or one dedicated entry. */
struct mem_chunk {
	/** Previous chunk in the arena's list. */
	struct mem_chunk *prev;
	/** Usable bytes in data. */
	size_t cap;
	/** Bytes handed out from data; may run past cap when a bump loses the race. */
	atomic_size_t used;
	/** The memory handed out. */
	alignas(16) char data[];
};

/** The memtable. */
struct mem {
	/** References held; the last mem_unref frees everything. */
	atomic_int refs;
	/** Tallest tower linked so far; searches start there. */
	atomic_int max_height;
	/** Head tower: first node on each level. */
	_Atomic(struct mem_node *) head[MEM_MAX_HEIGHT];
	/** Entries inserted (duplicates not counted). */
	atomic_uint_fast64_t rows;
	/** Sum of klen + vlen + MEM_ENTRY_OVERHEAD over entries. */
	atomic_uint_fast64_t bytes;
	/** Highest seq inserted. */
	atomic_uint_fast64_t max_seq;
	/** Bytes of memory obtained from env.malloc for chunks and dedicated entries. */
	atomic_uint_fast64_t arena_bytes;
	/** Chunk that bump allocation serves from; NULL before the first insert. */
	_Atomic(struct mem_chunk *) cur;
	/** Serialises chunk switches and the lists below. */
	pthread_mutex_t lock;
	/** Every shared chunk, newest first. */
	struct mem_chunk *chunks;
	/** Every dedicated entry allocation that holds a linked node, newest first. */
	struct mem_chunk *bigs;
	/** Chunks after the first are MEM_HUGE_CHUNK_BYTES, advised as huge pages. */
	int huge_pages;
	/** The prefault thread filling the arena ahead (mem_prefault_start), or NULL. */
	struct mem_prefault *pf;
	/** Chunks the last prefault thread made, and taken by the arena. */
	uint64_t pf_made, pf_taken;
	/** The bulk load in progress (mem_load_begin), or NULL. */
	struct mem_load *load;
};

/** A node of a bulk load waiting to be linked, with its key's first bytes for sorting. */
struct mem_load_ent {
	/** The key's first 8 bytes, big-endian, zero-padded: orders like the key mostly. */
	uint64_t pfx;
	/** The node, unlinked, seq and kind set. */
	struct mem_node *node;
	/** Arrival order. */
	uint64_t ord;
};

/** A bulk load: nodes made and not linked yet, in the order they came. */
struct mem_load {
	/** Entries held, room, and the most held before they are linked. */
	size_t n, cap, max;
	/** The entries. */
	struct mem_load_ent *v;
	/** Arrival number of the next entry. */
	uint64_t ord;
};

/** A thread that allocates and faults in huge chunks ahead of the inserting thread. */
struct mem_prefault {
	/** The thread. */
	pthread_t thread;
	/** Guards everything below. */
	pthread_mutex_t lock;
	/** Signalled when a chunk is taken and on stop. */
	pthread_cond_t cond;
	/** Chunks ready to take, linked through prev. */
	struct mem_chunk *ready;
	/** Number of chunks in ready. */
	unsigned nready;
	/** Bytes of chunks still to make (chunks the arena allocated itself count too). */
	uint64_t left;
	/** Set by mem_prefault_stop. */
	int stop;
	/** Chunks made, and taken. */
	uint64_t made, taken;
};

/** Entries larger than this get a dedicated allocation instead of chunk space. */
#define MEM_BIG_BYTES (MEM_CHUNK_BYTES / 4)

/** xorshift64 state of this thread for tower heights; 0 until seeded. */
static __thread uint64_t mem_rand_state;
/** Distinct seeds for threads. */
static atomic_uint_fast64_t mem_rand_seeds;

static uint64_t
mem_rand(void)
{
	uint64_t x = mem_rand_state;
	if (x == 0) {
		uint64_t z = atomic_fetch_add_explicit(&mem_rand_seeds, 1, memory_order_relaxed);
		z = (z + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&mem_rand_state;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		x = z ^ (z >> 31);
		if (x == 0)
			x = 0x2545f4914f6cdd1dull;
	}
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	mem_rand_state = x;
	return x;
}

/** Tower height: 1, then one more level with probability 1/4 each, up to the maximum. */
static int
mem_random_height(void)
{
	uint64_t r = env.random != NULL ? env.random() : mem_rand();
	int h = 1;
	while (h < MEM_MAX_HEIGHT && (r & 3) == 0) {
		h++;
		r >>= 2;
	}
	return h;
}

static inline const char *
mem_node_key(const struct mem_node *n)
{
	return (const char *)&n->next[n->height];
}

static inline const char *
mem_node_val(const struct mem_node *n)
{
	return mem_node_key(n) + n->klen;
}

/** Order of node n against (key, seq): <0 before, 0 same entry, >0 after. */
static int
mem_cmp(const struct mem_node *n, const void *key, size_t klen, uint64_t seq)
{
	int c = key_cmp(mem_node_key(n), n->klen, key, klen);
	if (c != 0)
		return c;
	if (n->seq != seq)
		return n->seq > seq ? -1 : 1;
	return 0;
}

/** The level-th successor slot of x (x NULL: the head). */
static inline _Atomic(struct mem_node *) *
mem_slot(struct mem *m, struct mem_node *x, int level)
{
	return x != NULL ? &x->next[level] : &m->head[level];
}

/** From prev (before the target) on one level, find the last node before (key, seq). */
static void
mem_find_level(struct mem *m, const void *key, size_t klen, uint64_t seq, int level,
	       struct mem_node **prev, struct mem_node **next)
{
	struct mem_node *x = *prev;
	for (;;) {
		struct mem_node *n = atomic_load_explicit(mem_slot(m, x, level),
							  memory_order_acquire);
		if (n == NULL || mem_cmp(n, key, klen, seq) >= 0) {
			*prev = x;
			*next = n;
			return;
		}
		x = n;
	}
}

/** First node at or after (key, seq). */
static struct mem_node *
mem_find_ge(struct mem *m, const void *key, size_t klen, uint64_t seq)
{
	struct mem_node *x = NULL, *n = NULL;
	int top = atomic_load_explicit(&m->max_height, memory_order_relaxed);
	for (int level = top - 1; level >= 0; level--)
		mem_find_level(m, key, klen, seq, level, &x, &n);
	return n;
}

/** Advise the 2 MiB-aligned interior of [p, p + n) as transparent huge pages (a hint:
 *  a kernel without them, or with them off, keeps normal pages). */
static void
mem_advise_huge(void *p, size_t n)
{
	const uintptr_t huge = 2u << 20;
	uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
	uintptr_t e = ((uintptr_t)p + n) & ~(huge - 1);
	if (e > a)
		(void)madvise((void *)a, e - a, MADV_HUGEPAGE);
}

/** Fault in the pages of [p, p + n) for writing, so that the first write there does not
 *  wait for the kernel to find and zero a page. */
static void
mem_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
	if (madvise((void *)a, (uintptr_t)p + n - a, MADV_POPULATE_WRITE) == 0)
		return;
#endif
	/* An older kernel: one write per page. The memory is fresh, so a zero changes
	 * nothing a reader could see (the chunk is not handed out yet). */
	volatile char *c = p;
	for (size_t off = 0; off < n; off += 4096)
		c[off] = 0;
}

/** One more chunk made or allocated: less left to make (under pf->lock). */
static void
mem_prefault_count(struct mem_prefault *pf)
{
	pf->left = pf->left > MEM_HUGE_CHUNK_BYTES ? pf->left - MEM_HUGE_CHUNK_BYTES : 0;
}

static void *
mem_prefault_main(void *arg)
{
	struct mem_prefault *pf = arg;
	const size_t total = sizeof(struct mem_chunk) + MEM_HUGE_CHUNK_BYTES;
	pthread_mutex_lock(&pf->lock);
	for (;;) {
		while (!pf->stop && pf->left > 0 && pf->nready >= MEM_PREFAULT_DEPTH)
			pthread_cond_wait(&pf->cond, &pf->lock);
		if (pf->stop || pf->left == 0)
			break;
		mem_prefault_count(pf);
		pthread_mutex_unlock(&pf->lock);
		struct mem_chunk *c = env.malloc(total);
		if (c != NULL) {
			mem_advise_huge(c, total);
			mem_populate(c, total);
			c->cap = MEM_HUGE_CHUNK_BYTES;
		}
		pthread_mutex_lock(&pf->lock);
		if (c == NULL)
			break; /* the arena allocates its own, and reports the failure if it has one */
		c->prev = pf->ready;
		pf->ready = c;
		pf->nready++;
		pf->made++;
	}
	pthread_mutex_unlock(&pf->lock);
	return NULL;
}

int
mem_prefault_start(struct mem *m, uint64_t bytes)
{
	assert(m->pf == NULL);
	if (!m->huge_pages || bytes < 2ull * MEM_HUGE_CHUNK_BYTES)
		return 0;
	struct mem_prefault *pf = env.malloc(sizeof(*pf));
	if (pf == NULL)
		return diag_set(STRATA_ENOMEM, "memtable: cannot allocate a prefault thread's state");
	memset(pf, 0, sizeof(*pf));
	pthread_mutex_init(&pf->lock, NULL);
	pthread_cond_init(&pf->cond, NULL);
	pf->left = bytes;
	int err = pthread_create(&pf->thread, NULL, mem_prefault_main, pf);
	if (err != 0) {
		pthread_cond_destroy(&pf->cond);
		pthread_mutex_destroy(&pf->lock);
		env.free(pf);
		return diag_set(STRATA_EIO, "memtable: cannot start a prefault thread: %s",
				strerror(err));
	}
	m->pf_made = m->pf_taken = 0;
	m->pf = pf;
	return 0;
}

void
mem_prefault_stop(struct mem *m)
{
	struct mem_prefault *pf = m->pf;
	if (pf == NULL)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->stop = 1;
	pthread_cond_signal(&pf->cond);
	pthread_mutex_unlock(&pf->lock);
	pthread_join(pf->thread, NULL);
	while (pf->ready != NULL) {
		struct mem_chunk *c = pf->ready;
		pf->ready = c->prev;
		env.free(c);
	}
	pthread_mutex_lock(&m->lock);
	m->pf = NULL;
	m->pf_made = pf->made;
	m->pf_taken = pf->taken;
	pthread_mutex_unlock(&m->lock);
	pthread_cond_destroy(&pf->cond);
	pthread_mutex_destroy(&pf->lock);
	env.free(pf);
}

void
mem_prefault_stats(const struct mem *m, uint64_t *made, uint64_t *taken)
{
	*made = m->pf_made;
	*taken = m->pf_taken;
}

unsigned
mem_prefault_ready(struct mem *m)
{
	pthread_mutex_lock(&m->lock);
	unsigned n = 0;
	if (m->pf != NULL) {
		pthread_mutex_lock(&m->pf->lock);
		n = m->pf->nready;
		pthread_mutex_unlock(&m->pf->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

/** A ready chunk of m's prefault thread, or NULL (none, or none ready yet); under m->lock. */
static struct mem_chunk *
mem_prefault_take(struct mem *m)
{
	struct mem_prefault *pf = m->pf;
	if (pf == NULL)
		return NULL;
	pthread_mutex_lock(&pf->lock);
	struct mem_chunk *c = pf->ready;
	if (c != NULL) {
		pf->ready = c->prev;
		pf->nready--;
		pf->taken++;
		pthread_cond_signal(&pf->cond);
	} else {
		mem_prefault_count(pf);
	}
	pthread_mutex_unlock(&pf->lock);
	return c;
}

/** Space for a node of size n from the current chunk, switching chunks when full. */
static void *
mem_arena_alloc(struct mem *m, size_t n)
{
	assert(n <= MEM_BIG_BYTES && n % 16 == 0);
	for (;;) {
		struct mem_chunk *c = atomic_load_explicit(&m->cur, memory_order_acquire);
		if (c != NULL) {
			size_t off = atomic_fetch_add_explicit(&c->used, n, memory_order_relaxed);
			if (off <= c->cap && n <= c->cap - off)
				return c->data + off;
		}
		pthread_mutex_lock(&m->lock);
		if (atomic_load_explicit(&m->cur, memory_order_relaxed) != c) {
			pthread_mutex_unlock(&m->lock);
			continue;
		}
		/* The first chunk is small: an idle shard's memtable costs 1 MiB at most. One that
		 * fills it is busy: its next chunks come as huge pages, one fault per 2 MiB. */
		size_t cap = m->huge_pages && m->chunks != NULL ? MEM_HUGE_CHUNK_BYTES : MEM_CHUNK_BYTES;
		size_t total = sizeof(struct mem_chunk) + cap;
		struct mem_chunk *nc = cap == MEM_HUGE_CHUNK_BYTES ? mem_prefault_take(m) : NULL;
		if (nc == NULL && (nc = env.malloc(total)) != NULL && cap == MEM_HUGE_CHUNK_BYTES)
			mem_advise_huge(nc, total);
		if (nc == NULL) {
			pthread_mutex_unlock(&m->lock);
			diag_set(STRATA_ENOMEM, "memtable: cannot allocate an arena chunk of %zu bytes",
				 total);
			return NULL;
		}
		nc->cap = cap;
		atomic_init(&nc->used, n);
		nc->prev = m->chunks;
		m->chunks = nc;
		atomic_fetch_add_explicit(&m->arena_bytes, total, memory_order_relaxed);
		atomic_store_explicit(&m->cur, nc, memory_order_release);
		pthread_mutex_unlock(&m->lock);
		return nc->data;
	}
}

struct mem *
mem_new(int huge_pages)
{
	struct mem *m = env.malloc(sizeof(*m));
	if (m == NULL) {
		diag_set(STRATA_ENOMEM, "memtable: cannot allocate %zu bytes", sizeof(*m));
		return NULL;
	}
	atomic_init(&m->refs, 1);
	atomic_init(&m->max_height, 1);
	for (int i = 0; i < MEM_MAX_HEIGHT; i++)
		atomic_init(&m->head[i], NULL);
	atomic_init(&m->rows, 0);
	atomic_init(&m->bytes, 0);
	atomic_init(&m->max_seq, 0);
	atomic_init(&m->arena_bytes, 0);
	atomic_init(&m->cur, NULL);
	pthread_mutex_init(&m->lock, NULL);
	m->chunks = NULL;
	m->bigs = NULL;
	m->huge_pages = huge_pages;
	m->pf = NULL;
	m->pf_made = m->pf_taken = 0;
	m->load = NULL;
	return m;
}

void
mem_ref(struct mem *m)
{
	int old = atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
	assert(old > 0);
	(void)old;
}

static void
mem_free_list(struct mem_chunk *c)
{
	while (c != NULL) {
		struct mem_chunk *prev = c->prev;
		env.free(c);
		c = prev;
	}
}

static void mem_load_release(struct mem *m);

void
mem_unref(struct mem *m)
{
	if (m == NULL)
		return;
	int old = atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel);
	assert(old > 0);
	if (old != 1)
		return;
	mem_prefault_stop(m);
	mem_load_release(m);
	mem_free_list(m->chunks);
	mem_free_list(m->bigs);
	pthread_mutex_destroy(&m->lock);
	env.free(m);
}

/** Raise max_height to at least h. */
static void
mem_raise_height(struct mem *m, int h)
{
	int cur = atomic_load_explicit(&m->max_height, memory_order_relaxed);
	while (cur < h && !atomic_compare_exchange_weak_explicit(&m->max_height, &cur, h,
								 memory_order_relaxed,
								 memory_order_relaxed))
		;
}

/** Raise an atomic maximum to at least v. */
static void
mem_raise_u64(atomic_uint_fast64_t *a, uint64_t v)
{
	uint_fast64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (cur < v && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

/** Bytes of a node header with the tallest tower. */
#define MEM_NODE_MAX_HDR (sizeof(struct mem_node) + MEM_MAX_HEIGHT * sizeof(struct mem_node *))

/** Bytes of a node with a tower of h levels, key and value, rounded up to 16. */
static inline size_t
mem_node_size(uint32_t h, size_t klen, size_t vlen)
{
	size_t hdr = sizeof(struct mem_node) + (size_t)h * sizeof(struct mem_node *);
	return (hdr + klen + vlen + 15) & ~(size_t)15;
}

/** Validate one entry: 0, or STRATA_EINVAL / STRATA_ETOOBIG with a message that names
 *  row unless it is SIZE_MAX (a single insert). */
static int
mem_check(const void *key, size_t klen, const void *val, size_t vlen, size_t row)
{
	/* The largest node plus a dedicated-allocation header and rounding fits in size_t. */
	size_t fixed = MEM_NODE_MAX_HDR + sizeof(struct mem_chunk) + 16;
	bool fits = klen <= SIZE_MAX - fixed && vlen <= SIZE_MAX - fixed - klen;
	if ((key != NULL || klen == 0) && (val != NULL || vlen == 0) && klen <= MEM_MAX_KEY &&
	    fits)
		return 0;
	char at[40] = "";
	if (row != SIZE_MAX)
		snprintf(at, sizeof(at), "row %zu: ", row);
	if (key == NULL && klen > 0)
		return diag_set(STRATA_EINVAL, "memtable: %sNULL key with length %zu", at, klen);
	if (val == NULL && vlen > 0)
		return diag_set(STRATA_EINVAL, "memtable: %sNULL value with length %zu", at, vlen);
	if (klen > MEM_MAX_KEY)
		return diag_set(STRATA_ETOOBIG, "memtable: %skey of %zu bytes over the limit of %u",
				at, klen, (unsigned)MEM_MAX_KEY);
	return diag_set(STRATA_ETOOBIG, "memtable: %sentry with key %zu and value %zu bytes "
			"does not fit in memory", at, klen, vlen);
}

/** mem_check of a row of a given kind: STRATA_EINVAL for a kind other than a put or a
 *  delete. */
static int
mem_check_row(const void *key, size_t klen, const void *val, size_t vlen, uint32_t kind)
{
	int rc = mem_check(key, klen, val, vlen, SIZE_MAX);
	if (rc == 0 && kind != STRATA_ROW_PUT && kind != STRATA_ROW_DELETE)
		rc = diag_set(STRATA_EINVAL, "memtable: unknown row kind %u", (unsigned)kind);
	return rc;
}

/** A node holding a copy of (key, val) with a tower of h levels, seq 0, not linked. One
 *  over MEM_BIG_BYTES is a dedicated allocation that is on no list yet (mem_node_big).
 *  NULL on ENOMEM with the message set. */
static struct mem_node *
mem_node_new(struct mem *m, const void *key, size_t klen, const void *val, size_t vlen, int h)
{
	size_t size = mem_node_size((uint32_t)h, klen, vlen);
	struct mem_node *node;
	if (size > MEM_BIG_BYTES) {
		size_t total = sizeof(struct mem_chunk) + size;
		struct mem_chunk *big = env.malloc(total);
		if (big == NULL) {
			diag_set(STRATA_ENOMEM, "memtable: cannot allocate %zu bytes for an entry "
				 "(key %zu, value %zu bytes)", total, klen, vlen);
			return NULL;
		}
		big->prev = NULL;
		big->cap = size;
		atomic_init(&big->used, size);
		node = (struct mem_node *)big->data;
	} else {
		node = mem_arena_alloc(m, size);
		if (node == NULL)
			return NULL;
	}
	node->seq = 0;
	node->vlen = vlen;
	node->klen = (uint32_t)klen;
	node->height = (uint16_t)h;
	node->kind = STRATA_ROW_PUT;
	if (klen > 0)
		memcpy((char *)mem_node_key(node), key, klen);
	if (vlen > 0)
		memcpy((char *)mem_node_val(node), val, vlen);
	return node;
}

/** The dedicated allocation that holds node, NULL for a node in a shared chunk. */
static struct mem_chunk *
mem_node_big(struct mem_node *node)
{
	if (mem_node_size(node->height, node->klen, node->vlen) <= MEM_BIG_BYTES)
		return NULL;
	return (struct mem_chunk *)((char *)node - offsetof(struct mem_chunk, data));
}

/** Drop a node that was never linked: free a dedicated allocation; arena space stays. */
static void
mem_node_drop(struct mem_node *node)
{
	env.free(mem_node_big(node));
}

/** Raise max_height to at least h, then find on each level below h the nodes around
 *  (key, seq). true when (key, seq) is already present. */
static bool
mem_splice(struct mem *m, const void *key, size_t klen, uint64_t seq, int h,
	   struct mem_node **prev, struct mem_node **next)
{
	mem_raise_height(m, h);
	struct mem_node *x = NULL, *n = NULL;
	int top = atomic_load_explicit(&m->max_height, memory_order_relaxed);
	assert(top >= h);
	for (int level = top - 1; level >= 0; level--) {
		mem_find_level(m, key, klen, seq, level, &x, &n);
		if (level < h) {
			prev[level] = x;
			next[level] = n;
		}
	}
	return next[0] != NULL && mem_cmp(next[0], key, klen, seq) == 0;
}

/** Link node (seq set) on every level of its tower, starting from the splice that
 *  mem_splice found. false when a concurrent insert of the same (key, seq) won on
 *  level 0: node is then not linked anywhere. */
static bool
mem_link(struct mem *m, struct mem_node *node, struct mem_node **prev, struct mem_node **next)
{
	const char *key = mem_node_key(node);
	size_t klen = node->klen;
	uint64_t seq = node->seq;
	for (int level = 0; level < (int)node->height; level++) {
		for (;;) {
			atomic_store_explicit(&node->next[level], next[level], memory_order_relaxed);
			struct mem_node *expect = next[level];
			if (atomic_compare_exchange_strong_explicit(mem_slot(m, prev[level], level),
								    &expect, node,
								    memory_order_release,
								    memory_order_relaxed))
				break;
			mem_find_level(m, key, klen, seq, level, &prev[level], &next[level]);
			if (level == 0 && next[0] != NULL && mem_cmp(next[0], key, klen, seq) == 0)
				return false;
		}
	}
	return true;
}

/** Take over the dedicated allocation of a node just linked (if it has one). */
static void
mem_adopt(struct mem *m, struct mem_node *node)
{
	struct mem_chunk *big = mem_node_big(node);
	if (big == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	big->prev = m->bigs;
	m->bigs = big;
	pthread_mutex_unlock(&m->lock);
	atomic_fetch_add_explicit(&m->arena_bytes, sizeof(struct mem_chunk) + big->cap,
				  memory_order_relaxed);
}

/** Count rows entries of bytes accounted bytes, the highest of them max_seq. */
static void
mem_count(struct mem *m, uint64_t rows, uint64_t bytes, uint64_t max_seq)
{
	if (rows == 0)
		return;
	atomic_fetch_add_explicit(&m->rows, rows, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->bytes, bytes, memory_order_relaxed);
	mem_raise_u64(&m->max_seq, max_seq);
}

int
mem_insert(struct mem *m, const void *key, size_t klen, uint64_t seq, const void *val,
	   size_t vlen)
{
	return mem_insert_kind(m, key, klen, seq, val, vlen, STRATA_ROW_PUT);
}

int
mem_insert_kind(struct mem *m, const void *key, size_t klen, uint64_t seq, const void *val,
		size_t vlen, uint32_t kind)
{
	assert(m != NULL);
	int rc = mem_check_row(key, klen, val, vlen, kind);
	if (rc != 0)
		return rc;
	int h = mem_random_height();
	struct mem_node *prev[MEM_MAX_HEIGHT], *next[MEM_MAX_HEIGHT];
	/* A duplicate is found before anything is allocated for it. */
	if (mem_splice(m, key, klen, seq, h, prev, next))
		return 0;
	struct mem_node *node = mem_node_new(m, key, klen, val, vlen, h);
	if (node == NULL)
		return STRATA_ENOMEM;
	node->seq = seq;
	node->kind = (uint16_t)kind;
	if (!mem_link(m, node, prev, next)) {
		mem_node_drop(node);
		return 0;
	}
	mem_adopt(m, node);
	mem_count(m, 1, (uint64_t)klen + vlen + MEM_ENTRY_OVERHEAD, seq);
	return 0;
}

/** A prepared batch: one filled, unlinked node per row. */
struct mem_batch {
	/** The memtable the nodes were allocated from; referenced by the batch. */
	struct mem *m;
	/** Nodes held in nodes. */
	size_t n;
	/** Node of row i; its seq is set by mem_batch_insert. */
	struct mem_node *nodes[];
};

/** Drop every node of b and free the handle; the reference to b->m is not touched. */
static void
mem_batch_release(struct mem_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		mem_node_drop(b->nodes[i]);
	env.free(b);
}

int
mem_batch_new(struct mem *m, const strata_row *rows, size_t n, struct mem_batch **out)
{
	assert(m != NULL && out != NULL);
	*out = NULL;
	if (rows == NULL && n > 0)
		return diag_set(STRATA_EINVAL, "memtable: NULL rows for a batch of %zu", n);
	for (size_t i = 0; i < n; i++) {
		int rc = mem_check(rows[i].key, rows[i].key_len, rows[i].value, rows[i].value_len,
				   i);
		if (rc == 0 && rows[i].kind != STRATA_ROW_PUT && rows[i].kind != STRATA_ROW_DELETE)
			rc = diag_set(STRATA_EINVAL, "memtable: row %zu: unknown kind %u", i,
				      (unsigned)rows[i].kind);
		if (rc != 0)
			return rc;
	}
	if (n > (SIZE_MAX - sizeof(struct mem_batch)) / sizeof(struct mem_node *))
		return diag_set(STRATA_ETOOBIG, "memtable: a batch of %zu rows does not fit in "
				"memory", n);
	size_t total = sizeof(struct mem_batch) + n * sizeof(struct mem_node *);
	struct mem_batch *b = env.malloc(total);
	if (b == NULL)
		return diag_set(STRATA_ENOMEM, "memtable: cannot allocate %zu bytes for a batch "
				"of %zu rows", total, n);
	b->m = m;
	b->n = 0;
	for (size_t i = 0; i < n; i++) {
		struct mem_node *node = mem_node_new(m, rows[i].key, rows[i].key_len,
						     rows[i].value, rows[i].value_len,
						     mem_random_height());
		if (node == NULL) {
			mem_batch_release(b);
			return STRATA_ENOMEM;
		}
		node->kind = (uint16_t)rows[i].kind;
		b->nodes[b->n++] = node;
	}
	mem_ref(m);
	*out = b;
	return 0;
}

void
mem_batch_insert(struct mem_batch *b, uint64_t first_seq)
{
	assert(b != NULL);
	assert(b->n == 0 || first_seq <= UINT64_MAX - (b->n - 1));
	struct mem *m = b->m;
	uint64_t rows = 0, bytes = 0, max_seq = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct mem_node *node = b->nodes[i];
		node->seq = first_seq + i;
		struct mem_node *prev[MEM_MAX_HEIGHT], *next[MEM_MAX_HEIGHT];
		if (mem_splice(m, mem_node_key(node), node->klen, node->seq, (int)node->height,
			       prev, next) ||
		    !mem_link(m, node, prev, next)) {
			mem_node_drop(node);
			continue;
		}
		mem_adopt(m, node);
		rows++;
		bytes += (uint64_t)node->klen + node->vlen + MEM_ENTRY_OVERHEAD;
		max_seq = node->seq;
	}
	mem_count(m, rows, bytes, max_seq);
	env.free(b);
	mem_unref(m);
}

void
mem_batch_free(struct mem_batch *b)
{
	if (b == NULL)
		return;
	struct mem *m = b->m;
	mem_batch_release(b);
	mem_unref(m);
}

/* ---- bulk load ---- */

/** Nodes a bulk load's linking fetches ahead of the one it links. */
#define MEM_LOAD_PREFETCH 8

/** The first 8 bytes of a key, big-endian, zero-padded: ordered like the key except
 *  where they are equal. */
static uint64_t
mem_key_pfx(const void *key, size_t klen)
{
	uint8_t b[8] = {0};
	if (klen > 0)
		memcpy(b, key, klen < 8 ? klen : 8);
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

/** The skiplist's order of two nodes: mem_cmp's. */
static int
mem_node_cmp(const struct mem_node *a, const struct mem_node *b)
{
	return mem_cmp(a, mem_node_key(b), b->klen, b->seq);
}

/** Order of load entries: the skiplist's, then arrival (the first of two equal rows is
 *  linked, as mem_insert keeps the first). */
static int
mem_load_cmp(const void *pa, const void *pb)
{
	const struct mem_load_ent *a = pa, *b = pb;
	if (a->pfx != b->pfx)
		return a->pfx < b->pfx ? -1 : 1;
	int c = mem_node_cmp(a->node, b->node);
	if (c != 0)
		return c;
	return a->ord < b->ord ? -1 : a->ord > b->ord;
}

/**
 * Link the nodes m's load holds, sorted, and count them. Each search starts from the
 * splice of the node linked before it (a finger): the one after it in key order is at
 * or after that splice on every level, so a search costs the distance between them, not
 * a descent from the head through cold nodes (the descents were 47% of the samples of a
 * replay of 1 GiB of random keys, the other core's prefault thread included). m has no
 * other user.
 */
static void
mem_load_flush(struct mem *m)
{
	struct mem_load *l = m->load;
	if (l->n == 0)
		return;
	qsort(l->v, l->n, sizeof(*l->v), mem_load_cmp);
	struct mem_node *prev[MEM_MAX_HEIGHT] = {0}, *next[MEM_MAX_HEIGHT];
	uint64_t rows = 0, bytes = 0, max_seq = 0;
	/* The linked node equal to the entry before (NULL at the start): a row equal to it is
	 * a duplicate (entries of the same (key, seq) sort together, first come first). */
	struct mem_node *last = NULL;
	for (size_t i = 0; i < l->n; i++) {
		struct mem_node *node = l->v[i].node;
		/* The nodes were written long ago, in arrival order: fetch the next ones ahead. */
		if (i + MEM_LOAD_PREFETCH < l->n)
			__builtin_prefetch(l->v[i + MEM_LOAD_PREFETCH].node, 1);
		if (last != NULL && mem_node_cmp(last, node) == 0) {
			mem_node_drop(node);
			continue;
		}
		const char *key = mem_node_key(node);
		int h = node->height;
		mem_raise_height(m, h);
		int top = atomic_load_explicit(&m->max_height, memory_order_relaxed);
		struct mem_node *x = NULL, *nx = NULL;
		for (int level = top - 1; level >= 0; level--) {
			/* Both are before node: start from the one further on. */
			struct mem_node *p = prev[level];
			if (p != NULL && p != x && (x == NULL || mem_node_cmp(p, x) > 0))
				x = p;
			mem_find_level(m, key, node->klen, node->seq, level, &x, &nx);
			prev[level] = x;
			next[level] = nx;
		}
		if (nx != NULL && mem_cmp(nx, key, node->klen, node->seq) == 0) {
			last = nx;
			mem_node_drop(node);
			continue;
		}
		/* No other inserter: the first CAS on every level succeeds. */
		bool linked = mem_link(m, node, prev, next);
		assert(linked);
		(void)linked;
		for (int level = 0; level < h; level++)
			prev[level] = node;
		mem_adopt(m, node);
		last = node;
		rows++;
		bytes += (uint64_t)node->klen + node->vlen + MEM_ENTRY_OVERHEAD;
		if (node->seq > max_seq)
			max_seq = node->seq;
	}
	mem_count(m, rows, bytes, max_seq);
	l->n = 0;
}

int
mem_load_begin(struct mem *m, size_t max_pending)
{
	assert(m != NULL && m->load == NULL);
	struct mem_load *l = env.calloc(1, sizeof(*l));
	if (l == NULL)
		return diag_set(STRATA_ENOMEM, "memtable: cannot allocate %zu bytes for a bulk load",
				sizeof(*l));
	l->max = max_pending > 0 ? max_pending : MEM_LOAD_DEFAULT_PENDING;
	if (l->max > SIZE_MAX / sizeof(struct mem_load_ent))
		l->max = SIZE_MAX / sizeof(struct mem_load_ent);
	m->load = l;
	return 0;
}

int
mem_load_add(struct mem *m, const void *key, size_t klen, uint64_t seq, const void *val,
	     size_t vlen, uint32_t kind)
{
	struct mem_load *l = m->load;
	if (l == NULL)
		return mem_insert_kind(m, key, klen, seq, val, vlen, kind);
	int rc = mem_check_row(key, klen, val, vlen, kind);
	if (rc != 0)
		return rc;
	if (l->n == l->cap) {
		size_t cap = l->cap == 0 ? 4096 : l->cap * 2;
		if (cap > l->max)
			cap = l->max;
		struct mem_load_ent *v = cap > l->cap ? env.realloc(l->v, cap * sizeof(*v)) : NULL;
		if (v != NULL) {
			l->v = v;
			l->cap = cap;
		} else {
			/* Full (or no memory for more): link what is held and reuse the room. */
			mem_load_flush(m);
			if (l->cap == 0)
				return mem_insert_kind(m, key, klen, seq, val, vlen, kind);
		}
	}
	struct mem_node *node = mem_node_new(m, key, klen, val, vlen, mem_random_height());
	if (node == NULL)
		return STRATA_ENOMEM;
	node->seq = seq;
	node->kind = (uint16_t)kind;
	l->v[l->n++] = (struct mem_load_ent){.pfx = mem_key_pfx(key, klen), .node = node,
					      .ord = l->ord++};
	return 0;
}

/** Free m's load, dropping the nodes it still holds unlinked. Safe without one. */
static void
mem_load_release(struct mem *m)
{
	struct mem_load *l = m->load;
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		mem_node_drop(l->v[i].node);
	env.free(l->v);
	env.free(l);
	m->load = NULL;
}

void
mem_load_end(struct mem *m)
{
	if (m->load == NULL)
		return;
	mem_load_flush(m);
	mem_load_release(m);
}

int
mem_get(struct mem *m, const void *key, size_t klen, uint64_t *seq, const void **val,
	size_t *vlen)
{
	return mem_get_kind(m, key, klen, seq, val, vlen, NULL);
}

int
mem_get_kind(struct mem *m, const void *key, size_t klen, uint64_t *seq, const void **val,
	     size_t *vlen, uint32_t *kind)
{
	if (key == NULL && klen > 0)
		return diag_set(STRATA_EINVAL, "memtable: NULL key with length %zu", klen);
	struct mem_node *n = mem_find_ge(m, key, klen, UINT64_MAX);
	if (n == NULL || n->klen != klen || (klen > 0 && memcmp(mem_node_key(n), key, klen) != 0))
		return STRATA_NOTFOUND;
	if (seq != NULL)
		*seq = n->seq;
	if (val != NULL)
		*val = mem_node_val(n);
	if (vlen != NULL)
		*vlen = n->vlen;
	if (kind != NULL)
		*kind = n->kind;
	return 0;
}

uint64_t
mem_rows(const struct mem *m)
{
	return atomic_load_explicit(&m->rows, memory_order_relaxed);
}

uint64_t
mem_bytes(const struct mem *m)
{
	return atomic_load_explicit(&m->bytes, memory_order_relaxed);
}

uint64_t
mem_max_seq(const struct mem *m)
{
	return atomic_load_explicit(&m->max_seq, memory_order_relaxed);
}

uint64_t
mem_arena_bytes(const struct mem *m)
{
	return atomic_load_explicit(&m->arena_bytes, memory_order_relaxed);
}

void
mem_iter_seek(struct mem_iter *it, struct mem *m, const void *key, size_t klen)
{
	it->m = m;
	if (key == NULL)
		it->node = atomic_load_explicit(&m->head[0], memory_order_acquire);
	else
		it->node = mem_find_ge(m, key, klen, UINT64_MAX);
}

void
mem_iter_next(struct mem_iter *it)
{
	struct mem_node *n = it->node;
	assert(n != NULL);
	it->node = atomic_load_explicit(&n->next[0], memory_order_acquire);
}

void
mem_iter_entry(const struct mem_iter *it, const void **key, size_t *klen, uint64_t *seq,
	       const void **val, size_t *vlen)
{
	const struct mem_node *n = it->node;
	assert(n != NULL);
	if (key != NULL)
		*key = mem_node_key(n);
	if (klen != NULL)
		*klen = n->klen;
	if (seq != NULL)
		*seq = n->seq;
	if (val != NULL)
		*val = mem_node_val(n);
	if (vlen != NULL)
		*vlen = n->vlen;
}

uint32_t
mem_iter_kind(const struct mem_iter *it)
{
	const struct mem_node *n = it->node;
	assert(n != NULL);
	return n->kind;
}
