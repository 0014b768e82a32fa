/*
 * mem.h — the memtable: a sorted, concurrent, insert-only skiplist of
 * (key, seq) -> value with byte accounting. Inserts from many threads run at once
 * (CAS per level); readers never lock. Entries are ordered by key ascending, then
 * seq descending, so the first entry for a key is its newest version. Memory comes
 * from an arena freed with the memtable.
 *
 * A batch goes in two steps so that a write-ahead log can sit between them:
 * mem_batch_new does every allocation and copy (it may fail), mem_batch_insert only
 * links (it cannot fail). Nothing of a batch is visible or counted before the insert.
 */
#ifndef STRATA_MEM_H
#define STRATA_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "../strata_types.h"

struct mem;
/** A batch of rows copied into unlinked nodes of one memtable, waiting to be linked. */
struct mem_batch;

/** Bytes charged per entry by mem_bytes on top of key and value: the 24-byte node
 *  header plus an average tower (4/3 pointers at branching 4), rounded up. */
#define MEM_ENTRY_OVERHEAD 40u
/** Longest key this layer stores (the length is kept in 32 bits). */
#define MEM_MAX_KEY UINT32_MAX
/** Tallest skiplist tower; 4^16 entries before searches degrade. */
#define MEM_MAX_HEIGHT 16
/** Arena chunk size; an entry over a quarter of it gets a dedicated allocation. */
#define MEM_CHUNK_BYTES (1u << 20)
/** Size of the chunks after the first with huge pages on; their 2 MiB-aligned interior
 *  is advised MADV_HUGEPAGE. */
#define MEM_HUGE_CHUNK_BYTES (16u << 20)

/** Create an empty memtable with one reference (huge_pages: chunks after the first are
 *  MEM_HUGE_CHUNK_BYTES, advised as huge pages). NULL on ENOMEM. */
struct mem *mem_new(int huge_pages);
/** Take a reference. */
void mem_ref(struct mem *m);
/** Drop a reference; the last one frees the memtable. Safe on NULL. */
void mem_unref(struct mem *m);
/** Insert a copy of (key, seq, value). Thread-safe. 0 or STRATA_ENOMEM.
 *  Inserting the same (key, seq) twice keeps one entry (the first value).
 *  An empty key and a zero-length value are allowed (NULL pointers with length 0).
 *  STRATA_EINVAL for a NULL key or value with a nonzero length; STRATA_ETOOBIG for a
 *  key over MEM_MAX_KEY bytes or an entry whose size does not fit in size_t.
 *  On failure nothing is inserted and the counters are unchanged. */
int mem_insert(struct mem *m, const void *key, size_t klen, uint64_t seq, const void *val,
	       size_t vlen);
/** mem_insert of a row of kind STRATA_ROW_PUT or STRATA_ROW_DELETE (a tombstone:
 *  vlen 0; it is the key's newest version like any row). STRATA_EINVAL for another kind. */
int mem_insert_kind(struct mem *m, const void *key, size_t klen, uint64_t seq, const void *val,
		    size_t vlen, uint32_t kind);

/** Prepare rows[0..n) for m (each row's kind is kept; STRATA_EINVAL for an unknown one): validate them like mem_insert (STRATA_EINVAL, naming the
 *  row, for rows NULL with n > 0 or a NULL key or value with a nonzero length;
 *  STRATA_ETOOBIG for a key over MEM_MAX_KEY bytes or an entry that does not fit in
 *  size_t), then allocate every node, copy keys and values and choose tower heights.
 *  Nothing is linked or counted. Thread-safe, also against inserts on m. The batch holds
 *  a reference to m. 0 and *out set, or a STRATA_E* code with *out NULL: then nothing
 *  allocated outlives the call except arena space of nodes never linked, which stays
 *  invisible and uncounted by mem_rows/mem_bytes until the memtable is freed. */
int mem_batch_new(struct mem *m, const strata_row *rows, size_t n, struct mem_batch **out);
/** Link row i of b with seq first_seq + i, update the counters as mem_insert does, and
 *  free b (b is invalid afterwards; do not call mem_batch_free). Cannot fail. A row whose
 *  (key, seq) is already present keeps the entry there (its node is dropped). Thread-safe
 *  like mem_insert. first_seq + n - 1 must not wrap. */
void mem_batch_insert(struct mem_batch *b, uint64_t first_seq);
/** Release a batch that was never inserted: its dedicated allocations and the handle are
 *  freed, its arena space stays unlinked and uncounted until the memtable is freed.
 *  Safe on NULL. */
void mem_batch_free(struct mem_batch *b);
/** Newest version of key (a tombstone too, with vlen 0: see mem_get_kind).
 *  0 and pointers valid while m is referenced, or STRATA_NOTFOUND.
 *  STRATA_EINVAL for a NULL key with a nonzero length. Lock-free; any output may be NULL. */
int mem_get(struct mem *m, const void *key, size_t klen, uint64_t *seq, const void **val,
	    size_t *vlen);
/** mem_get that also reports the kind of the newest version (kind may be NULL): a
 *  tombstone is found like a put, with *kind STRATA_ROW_DELETE. */
int mem_get_kind(struct mem *m, const void *key, size_t klen, uint64_t *seq, const void **val,
		 size_t *vlen, uint32_t *kind);

/** Entries inserted (all versions). */
uint64_t mem_rows(const struct mem *m);
/** Bytes accounted: the sum over entries of klen + vlen + MEM_ENTRY_OVERHEAD. */
uint64_t mem_bytes(const struct mem *m);
/** Highest seq inserted (0 when empty). */
uint64_t mem_max_seq(const struct mem *m);
/** Bytes of memory held by the arena (chunks and dedicated allocations). */
uint64_t mem_arena_bytes(const struct mem *m);

/** Rows a bulk load holds before it links them when mem_load_begin is given 0
 *  (24 bytes each). */
#define MEM_LOAD_DEFAULT_PENDING (1u << 20)
/** Start a bulk load of m (WAL replay): from here until mem_load_end, mem_load_add
 *  copies a row into an unlinked node and keeps it; every max_pending rows (0:
 *  MEM_LOAD_DEFAULT_PENDING), and at mem_load_end, the rows held are sorted and linked
 *  in key order, each search starting where the one before it ended (a replay of
 *  random keys spent most of its time in mem_insert's descents from the head); rows
 *  already in m are kept. While a load runs, rows held are not visible or counted, and
 *  m must have no other user than the loading thread (no readers, no other inserts).
 *  STRATA_ENOMEM leaves m as it was: mem_load_add then inserts each row. */
int mem_load_begin(struct mem *m, size_t max_pending);
/** mem_insert_kind for a bulk load of m; without one, mem_insert_kind itself. The same
 *  errors; of two rows with the same (key, seq) the first added is kept. */
int mem_load_add(struct mem *m, const void *key, size_t klen, uint64_t seq, const void *val,
		 size_t vlen, uint32_t kind);
/** Link every row the load holds and end it (cannot fail). Safe without a load. The
 *  last mem_unref of m frees a load left open without linking its rows. */
void mem_load_end(struct mem *m);

/** Chunks a prefault thread keeps ready at most (MEM_PREFAULT_DEPTH * 16 MiB). */
#define MEM_PREFAULT_DEPTH 4
/** Fill m's arena ahead from another thread while one thread inserts about bytes
 *  (WAL replay): a thread allocates the next huge chunks and faults their pages in
 *  (MADV_POPULATE_WRITE, or a write per page), keeping at most MEM_PREFAULT_DEPTH of
 *  them ready, and stops once bytes of chunks were made or taken. A chunk switch takes a
 *  ready chunk when there is one and allocates its own otherwise, so inserts never wait
 *  for the thread. Does nothing (returns 0) without huge_pages or for bytes under two
 *  chunks. The kernel zeroing a page on its first write is then done on another core:
 *  replay on this machine spent over 40% of its time there. Call mem_prefault_stop
 *  before m is used by more than the one inserting thread or freed. STRATA_ENOMEM or
 *  STRATA_EIO (no thread) leaves m as it was; the caller may go on without it. */
int mem_prefault_start(struct mem *m, uint64_t bytes);
/** Stop and join m's prefault thread and free the chunks it made that were not taken.
 *  Safe when none was started. */
void mem_prefault_stop(struct mem *m);
/** Chunks the last prefault thread made, and how many of them the arena took (set by
 *  mem_prefault_stop). */
void mem_prefault_stats(const struct mem *m, uint64_t *made, uint64_t *taken);
/** Chunks m's running prefault thread has ready now (0 without one). */
unsigned mem_prefault_ready(struct mem *m);

/** A position in a memtable; valid while the memtable is referenced. */
struct mem_iter {
	/** The memtable walked. */
	struct mem *m;
	/** Current node, NULL past the end. */
	void *node;
};

/** Position at the first entry with key >= key (key NULL: the first entry). */
void mem_iter_seek(struct mem_iter *it, struct mem *m, const void *key, size_t klen);
/** 1 while the iterator is on an entry. */
static inline int mem_iter_valid(const struct mem_iter *it) { return it->node != NULL; }
/** Advance to the next entry (the next version of the same key, or the next key). */
void mem_iter_next(struct mem_iter *it);
/** Accessors for the current entry. */
void mem_iter_entry(const struct mem_iter *it, const void **key, size_t *klen, uint64_t *seq,
		    const void **val, size_t *vlen);

/** Kind of the current entry: STRATA_ROW_PUT or STRATA_ROW_DELETE. */
uint32_t mem_iter_kind(const struct mem_iter *it);

#endif
