/*
 * test_mem.c — the memtable: order, versions, duplicates, seek, accounting,
 * concurrent inserts with lock-free readers, large values and allocation failure;
 * two-step batches (prepare, then link) with the same properties.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../../node/core/mem.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "harness.h"

/** Reference order: key bytes, shorter prefix first, then seq descending. */
static int
ref_cmp(const void *k1, size_t l1, uint64_t s1, const void *k2, size_t l2, uint64_t s2)
{
	size_t min = l1 < l2 ? l1 : l2;
	int c = min ? memcmp(k1, k2, min) : 0;
	if (c != 0)
		return c;
	if (l1 != l2)
		return l1 < l2 ? -1 : 1;
	if (s1 != s2)
		return s1 > s2 ? -1 : 1;
	return 0;
}

/** One expected entry. */
struct exp_row {
	/** Key bytes. */
	const char *key;
	/** Key length. */
	size_t klen;
	/** Sequence number. */
	uint64_t seq;
};

/** CHECK that iterating m from the start yields exactly want[0..n). */
static void
check_contents(struct mem *m, const struct exp_row *want, size_t n)
{
	struct mem_iter it;
	size_t i = 0;
	for (mem_iter_seek(&it, m, NULL, 0); mem_iter_valid(&it); mem_iter_next(&it), i++) {
		const void *k, *v;
		size_t kl, vl;
		uint64_t s;
		mem_iter_entry(&it, &k, &kl, &s, &v, &vl);
		if (i >= n) {
			CHECK(i < n);
			return;
		}
		CHECK_EQ(kl, want[i].klen);
		CHECK(kl == want[i].klen && (kl == 0 || memcmp(k, want[i].key, kl) == 0));
		CHECK_EQ(s, want[i].seq);
	}
	CHECK_EQ(i, n);
}

TEST(order_is_key_ascending_then_seq_descending)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	/* Inserted in a scrambled order. */
	static const struct exp_row ins[] = {
		{"b", 1, 4},   {"a\0", 2, 2}, {"ab", 2, 9},  {"a", 1, 3},    {"", 0, 5},
		{"a", 1, 10},  {"\xff", 1, 1}, {"ab", 2, 1}, {"a\0", 2, 7},  {"a", 1, 1},
		{"aa", 2, 6},  {"b", 1, 8},   {"", 0, 11},   {"a\0\0", 3, 12},
	};
	static const struct exp_row want[] = {
		{"", 0, 11},   {"", 0, 5},    {"a", 1, 10},  {"a", 1, 3},  {"a", 1, 1},
		{"a\0", 2, 7}, {"a\0", 2, 2}, {"a\0\0", 3, 12}, {"aa", 2, 6}, {"ab", 2, 9},
		{"ab", 2, 1},  {"b", 1, 8},   {"b", 1, 4},   {"\xff", 1, 1},
	};
	size_t n = sizeof(ins) / sizeof(ins[0]);
	for (size_t i = 0; i < n; i++)
		REQUIRE_EQ(mem_insert(m, ins[i].key, ins[i].klen, ins[i].seq, "v", 1), 0);
	CHECK_EQ(mem_rows(m), n);
	check_contents(m, want, sizeof(want) / sizeof(want[0]));
	mem_unref(m);
}

TEST(prefix_keys_order_shorter_first)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "ab", 2, 1, NULL, 0), 0);
	REQUIRE_EQ(mem_insert(m, "a\0", 2, 2, NULL, 0), 0);
	REQUIRE_EQ(mem_insert(m, "a", 1, 3, NULL, 0), 0);
	static const struct exp_row want[] = {{"a", 1, 3}, {"a\0", 2, 2}, {"ab", 2, 1}};
	check_contents(m, want, 3);
	uint64_t seq = 0;
	CHECK_EQ(mem_get(m, "a", 1, &seq, NULL, NULL), 0);
	CHECK_EQ(seq, 3);
	CHECK_EQ(mem_get(m, "a\0", 2, &seq, NULL, NULL), 0);
	CHECK_EQ(seq, 2);
	mem_unref(m);
}

TEST(get_returns_highest_seq)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "key", 3, 5, "v5", 2), 0);
	REQUIRE_EQ(mem_insert(m, "key", 3, 9, "v9", 2), 0);
	REQUIRE_EQ(mem_insert(m, "key", 3, 3, "v3", 2), 0);
	REQUIRE_EQ(mem_insert(m, "kex", 3, 20, "x", 1), 0);
	REQUIRE_EQ(mem_insert(m, "kez", 3, 21, "z", 1), 0);
	uint64_t seq = 0;
	const void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(mem_get(m, "key", 3, &seq, &v, &vl), 0);
	CHECK_EQ(seq, 9);
	CHECK(vl == 2 && memcmp(v, "v9", 2) == 0);
	CHECK_EQ(mem_get(m, "ke", 2, &seq, &v, &vl), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "keyy", 4, &seq, &v, &vl), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "kea", 3, &seq, &v, &vl), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "l", 1, &seq, &v, &vl), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "", 0, &seq, &v, &vl), STRATA_NOTFOUND);
	CHECK_EQ(mem_max_seq(m), 21);
	mem_unref(m);
}

TEST(duplicate_key_seq_collapses)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "k", 1, 5, "first", 5), 0);
	uint64_t bytes = mem_bytes(m);
	CHECK_EQ(bytes, 1 + 5 + MEM_ENTRY_OVERHEAD);
	CHECK_EQ(mem_insert(m, "k", 1, 5, "first", 5), 0);
	CHECK_EQ(mem_insert(m, "k", 1, 5, "second!", 7), 0);
	CHECK_EQ(mem_rows(m), 1);
	CHECK_EQ(mem_bytes(m), bytes);
	uint64_t seq;
	const void *v;
	size_t vl;
	CHECK_EQ(mem_get(m, "k", 1, &seq, &v, &vl), 0);
	CHECK(vl == 5 && memcmp(v, "first", 5) == 0);
	REQUIRE_EQ(mem_insert(m, "k", 1, 6, "new", 3), 0);
	CHECK_EQ(mem_rows(m), 2);
	static const struct exp_row want[] = {{"k", 1, 6}, {"k", 1, 5}};
	check_contents(m, want, 2);
	mem_unref(m);
}

/** Seek to key and CHECK the entry reached (want NULL: past the end). */
static void
check_seek(struct mem *m, const char *key, size_t klen, const char *want, uint64_t want_seq)
{
	struct mem_iter it;
	mem_iter_seek(&it, m, key, klen);
	if (want == NULL) {
		CHECK(!mem_iter_valid(&it));
		return;
	}
	REQUIRE(mem_iter_valid(&it));
	const void *k;
	size_t kl;
	uint64_t s;
	mem_iter_entry(&it, &k, &kl, &s, NULL, NULL);
	CHECK(kl == strlen(want) && memcmp(k, want, kl) == 0);
	CHECK_EQ(s, want_seq);
}

TEST(seek_lands_on_first_entry_at_or_after_key)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	struct mem_iter it;
	mem_iter_seek(&it, m, NULL, 0);
	CHECK(!mem_iter_valid(&it));
	mem_iter_seek(&it, m, "a", 1);
	CHECK(!mem_iter_valid(&it));
	const char *keys[] = {"b", "d", "f"};
	for (int i = 0; i < 3; i++) {
		REQUIRE_EQ(mem_insert(m, keys[i], 1, (uint64_t)i * 10 + 1, "x", 1), 0);
		REQUIRE_EQ(mem_insert(m, keys[i], 1, (uint64_t)i * 10 + 2, "y", 1), 0);
	}
	check_seek(m, NULL, 0, "b", 2);
	check_seek(m, "", 0, "b", 2);
	check_seek(m, "a", 1, "b", 2);
	check_seek(m, "b", 1, "b", 2);
	check_seek(m, "b\0", 2, "d", 12);
	check_seek(m, "c", 1, "d", 12);
	check_seek(m, "d", 1, "d", 12);
	check_seek(m, "e\xff\xff", 3, "f", 22);
	check_seek(m, "f", 1, "f", 22);
	check_seek(m, "f\0", 2, NULL, 0);
	check_seek(m, "g", 1, NULL, 0);
	mem_iter_seek(&it, m, "d", 1);
	REQUIRE(mem_iter_valid(&it));
	mem_iter_next(&it);
	uint64_t s;
	const void *v;
	size_t vl;
	mem_iter_entry(&it, NULL, NULL, &s, &v, &vl);
	CHECK_EQ(s, 11);
	CHECK(vl == 1 && memcmp(v, "x", 1) == 0);
	mem_unref(m);
}

TEST(byte_accounting_matches_formula)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	CHECK_EQ(mem_bytes(m), 0);
	CHECK_EQ(mem_rows(m), 0);
	CHECK_EQ(mem_max_seq(m), 0);
	char key[64], val[300];
	memset(val, 'v', sizeof(val));
	uint64_t want = 0, payload = 0;
	for (int i = 0; i < 1000; i++) {
		size_t kl = (size_t)snprintf(key, sizeof(key), "key-%d", i * 37 % 1000);
		size_t vl = (size_t)(i * 13 % 300);
		REQUIRE_EQ(mem_insert(m, key, kl, (uint64_t)(1000 - i), val, vl), 0);
		want += kl + vl + MEM_ENTRY_OVERHEAD;
		payload += kl + vl;
		if (i % 10 == 0)
			REQUIRE_EQ(mem_insert(m, key, kl, (uint64_t)(1000 - i), val, vl), 0);
	}
	CHECK_EQ(mem_rows(m), 1000);
	CHECK_EQ(mem_bytes(m), want);
	CHECK_EQ(mem_max_seq(m), 1000);
	CHECK(mem_arena_bytes(m) >= payload);
	mem_unref(m);
}

TEST(empty_key_and_value_are_valid_null_with_a_length_is_refused)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, NULL, 0, 1, NULL, 0), 0);
	REQUIRE_EQ(mem_insert(m, "", 0, 2, "x", 1), 0);
	REQUIRE_EQ(mem_insert(m, "a", 1, 3, "", 0), 0);
	CHECK_EQ(mem_rows(m), 3);
	CHECK_EQ(mem_bytes(m), 3 * MEM_ENTRY_OVERHEAD + 1 + 1);
	uint64_t seq;
	const void *v;
	size_t vl = 99;
	CHECK_EQ(mem_get(m, NULL, 0, &seq, &v, &vl), 0);
	CHECK_EQ(seq, 2);
	CHECK(vl == 1 && memcmp(v, "x", 1) == 0);
	CHECK_EQ(mem_get(m, "a", 1, &seq, &v, &vl), 0);
	CHECK_EQ(seq, 3);
	CHECK_EQ(vl, 0);
	static const struct exp_row want[] = {{"", 0, 2}, {"", 0, 1}, {"a", 1, 3}};
	check_contents(m, want, 3);

	diag_clear();
	CHECK_EQ(mem_insert(m, NULL, 1, 4, "x", 1), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "NULL key") != NULL);
	CHECK_EQ(mem_insert(m, "b", 1, 4, NULL, 1), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "NULL value") != NULL);
	CHECK_EQ(mem_get(m, NULL, 1, &seq, &v, &vl), STRATA_EINVAL);
	CHECK_EQ(mem_rows(m), 3);
	CHECK_EQ(mem_max_seq(m), 3);
	mem_unref(m);
}

TEST(oversized_entry_is_rejected)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	CHECK_EQ(mem_insert(m, "k", (size_t)MEM_MAX_KEY + 1, 1, "v", 1), STRATA_ETOOBIG);
	CHECK(strstr(diag_last(), "key of") != NULL);
	CHECK_EQ(mem_insert(m, "k", 1, 1, "v", SIZE_MAX - 8), STRATA_ETOOBIG);
	CHECK_EQ(mem_rows(m), 0);
	CHECK_EQ(mem_bytes(m), 0);
	struct mem_iter it;
	mem_iter_seek(&it, m, NULL, 0);
	CHECK(!mem_iter_valid(&it));
	mem_unref(m);
}

TEST(large_value_is_copied_and_round_trips)
{
	size_t n = 16u << 20;
	unsigned char *big = malloc(n);
	REQUIRE(big != NULL);
	for (size_t i = 0; i < n; i++)
		big[i] = (unsigned char)(i * 2654435761u >> 13);
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "a", 1, 1, "small", 5), 0);
	REQUIRE_EQ(mem_insert(m, "big", 3, 2, big, n), 0);
	REQUIRE_EQ(mem_insert(m, "c", 1, 3, "small", 5), 0);
	/* An entry just over the dedicated-allocation threshold, and one just under. */
	REQUIRE_EQ(mem_insert(m, "mid1", 4, 4, big, MEM_CHUNK_BYTES / 4), 0);
	REQUIRE_EQ(mem_insert(m, "mid2", 4, 5, big, MEM_CHUNK_BYTES / 4 - 200), 0);
	/* The memtable holds a copy: scribbling on the source afterwards changes nothing. */
	memset(big + n / 2, 0, 8);
	uint64_t seq;
	const void *v;
	size_t vl;
	REQUIRE_EQ(mem_get(m, "big", 3, &seq, &v, &vl), 0);
	CHECK_EQ(seq, 2);
	REQUIRE_EQ(vl, n);
	for (size_t i = 0; i < 8; i++)
		big[n / 2 + i] = (unsigned char)((n / 2 + i) * 2654435761u >> 13);
	CHECK(memcmp(v, big, n) == 0);
	REQUIRE_EQ(mem_get(m, "mid1", 4, &seq, &v, &vl), 0);
	CHECK(vl == MEM_CHUNK_BYTES / 4 && memcmp(v, big, vl) == 0);
	REQUIRE_EQ(mem_get(m, "mid2", 4, &seq, &v, &vl), 0);
	CHECK(vl == MEM_CHUNK_BYTES / 4 - 200 && memcmp(v, big, vl) == 0);
	CHECK_EQ(mem_bytes(m), 1 + 5 + 3 + n + 1 + 5 + 4 + MEM_CHUNK_BYTES / 4 + 4 +
				       MEM_CHUNK_BYTES / 4 - 200 + 5 * MEM_ENTRY_OVERHEAD);
	CHECK(mem_arena_bytes(m) >= n + MEM_CHUNK_BYTES / 2);
	static const struct exp_row want[] = {
		{"a", 1, 1}, {"big", 3, 2}, {"c", 1, 3}, {"mid1", 4, 4}, {"mid2", 4, 5},
	};
	check_contents(m, want, 5);
	mem_unref(m);
	free(big);
}

/** Allocation seam state: calls left before failing (-1: never fail), live blocks. */
static long fail_after = -1;
static atomic_long live_blocks;

/** Whether the seams fail this allocation (counting it against fail_after). */
static bool
seam_fails(void)
{
	if (fail_after == 0)
		return true;
	if (fail_after > 0)
		fail_after--;
	return false;
}

static void *
test_malloc(size_t n)
{
	if (seam_fails())
		return NULL;
	void *p = malloc(n);
	if (p != NULL)
		live_blocks++;
	return p;
}

static void *
test_calloc(size_t n, size_t size)
{
	if (seam_fails())
		return NULL;
	void *p = calloc(n, size);
	if (p != NULL)
		live_blocks++;
	return p;
}

static void *
test_realloc(void *old, size_t n)
{
	if (seam_fails())
		return NULL;
	void *p = realloc(old, n);
	if (p != NULL && old == NULL)
		live_blocks++;
	return p;
}

static void
test_free(void *p)
{
	if (p != NULL)
		live_blocks--;
	free(p);
}

/** Route every env allocation through the counting, failing seams; nothing fails yet. */
static void
seams_install(void)
{
	env.malloc = test_malloc;
	env.calloc = test_calloc;
	env.realloc = test_realloc;
	env.free = test_free;
	fail_after = -1;
	live_blocks = 0;
}

/** Blocks the memtable m itself may hold before any dedicated entry is linked: the
 *  struct and its arena chunks. */
static long
mem_own_blocks(const struct mem *m)
{
	return 1 + (long)(mem_arena_bytes(m) / MEM_CHUNK_BYTES);
}

TEST(enomem_on_new_returns_null)
{
	seams_install();
	fail_after = 0;
	struct mem *m = mem_new(0);
	CHECK(m == NULL);
	fail_after = -1;
	env_reset();
	mem_unref(m);
}

/** CHECK that m holds exactly the rows "r%05d" for i < n with seq i+1, in order. */
static void
check_small_rows(struct mem *m, int n)
{
	struct mem_iter it;
	int i = 0;
	for (mem_iter_seek(&it, m, NULL, 0); mem_iter_valid(&it); mem_iter_next(&it), i++) {
		char want[16];
		const void *k, *v;
		size_t kl, vl;
		uint64_t s;
		mem_iter_entry(&it, &k, &kl, &s, &v, &vl);
		snprintf(want, sizeof(want), "r%05d", i);
		if (kl != 6 || memcmp(k, want, 6) != 0 || s != (uint64_t)i + 1 || vl != 100) {
			CHECK(!"row out of place");
			return;
		}
	}
	CHECK_EQ(i, n);
	CHECK_EQ(mem_rows(m), n);
	CHECK_EQ(mem_bytes(m), (uint64_t)n * (6 + 100 + MEM_ENTRY_OVERHEAD));
	CHECK_EQ(mem_max_seq(m), n);
}

TEST(enomem_leaves_memtable_consistent)
{
	seams_install();
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	char val[100], key[16];
	memset(val, 'v', sizeof(val));

	fail_after = 0;
	diag_clear();
	CHECK_EQ(mem_insert(m, "r00000", 6, 1, val, 100), STRATA_ENOMEM);
	CHECK(strstr(diag_last(), "memtable") != NULL);
	check_small_rows(m, 0);
	CHECK_EQ(mem_get(m, "r00000", 6, NULL, NULL, NULL), STRATA_NOTFOUND);
	CHECK_EQ(mem_arena_bytes(m), 0);

	/* Fill the first chunk; the insert that needs a second chunk fails. */
	fail_after = 1;
	int n = 0, rc;
	for (;;) {
		snprintf(key, sizeof(key), "r%05d", n);
		rc = mem_insert(m, key, 6, (uint64_t)n + 1, val, 100);
		if (rc != 0)
			break;
		n++;
		REQUIRE(n < 100000);
	}
	CHECK_EQ(rc, STRATA_ENOMEM);
	CHECK(n > 1000);
	check_small_rows(m, n);
	CHECK_EQ(mem_get(m, key, 6, NULL, NULL, NULL), STRATA_NOTFOUND);
	CHECK_EQ(mem_insert(m, key, 6, (uint64_t)n + 1, val, 100), STRATA_ENOMEM);

	/* A dedicated allocation fails too. */
	size_t bn = MEM_CHUNK_BYTES;
	char *big = calloc(1, bn);
	REQUIRE(big != NULL);
	CHECK_EQ(mem_insert(m, "zbig", 4, 999999, big, bn), STRATA_ENOMEM);
	CHECK(strstr(diag_last(), "entry") != NULL);
	check_small_rows(m, n);
	CHECK_EQ(mem_get(m, "zbig", 4, NULL, NULL, NULL), STRATA_NOTFOUND);

	/* Allocation works again: the failed rows go in and everything is in place. */
	fail_after = -1;
	for (int i = n; i < n + 50; i++) {
		snprintf(key, sizeof(key), "r%05d", i);
		REQUIRE_EQ(mem_insert(m, key, 6, (uint64_t)i + 1, val, 100), 0);
	}
	check_small_rows(m, n + 50);
	CHECK_EQ(mem_insert(m, "zbig", 4, 999999, big, bn), 0);
	CHECK_EQ(mem_get(m, "zbig", 4, NULL, NULL, NULL), 0);
	CHECK_EQ(mem_rows(m), n + 51);
	mem_unref(m);
	CHECK_EQ(live_blocks, 0);
	free(big);
	env_reset();
}

TEST(last_unref_frees_every_allocation)
{
	seams_install();
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	char *big = calloc(1, 600000);
	REQUIRE(big != NULL);
	char key[16];
	for (int i = 0; i < 30000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		REQUIRE_EQ(mem_insert(m, key, strlen(key), 1, big, (size_t)(i % 97)), 0);
	}
	REQUIRE_EQ(mem_insert(m, "big1", 4, 1, big, 600000), 0);
	REQUIRE_EQ(mem_insert(m, "big2", 4, 1, big, 300000), 0);
	REQUIRE_EQ(mem_insert(m, "big2", 4, 1, big, 300000), 0);
	CHECK(live_blocks > 3);
	mem_ref(m);
	mem_unref(m);
	CHECK_EQ(mem_get(m, "big1", 4, NULL, NULL, NULL), 0);
	CHECK(live_blocks > 3);
	mem_unref(m);
	CHECK_EQ(live_blocks, 0);
	env_reset();
	free(big);
}

/** Wait up to 10 s for m's prefault thread to have n chunks ready. */
static void
wait_ready(struct mem *m, unsigned n)
{
	for (int i = 0; i < 10000 && mem_prefault_ready(m) < n; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

TEST(prefaulted_chunks_hold_every_row_and_none_leak)
{
	seams_install();
	struct mem *m = mem_new(1);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_prefault_start(m, 200u << 20), 0);
	wait_ready(m, MEM_PREFAULT_DEPTH);
	CHECK_EQ(mem_prefault_ready(m), MEM_PREFAULT_DEPTH); /* it stops at the depth */
	/* About 60 MiB: four chunks after the first, taken from the thread's. */
	static char val[1000];
	char key[16];
	const int rows = 60000;
	for (int i = 0; i < rows; i++) {
		snprintf(key, sizeof(key), "k%08d", i);
		memset(val, 'a' + i % 26, sizeof(val));
		REQUIRE_EQ(mem_insert(m, key, strlen(key), (uint64_t)i + 1, val, sizeof(val)), 0);
	}
	mem_prefault_stop(m);
	uint64_t made = 0, taken = 0;
	mem_prefault_stats(m, &made, &taken);
	CHECK(taken >= 3);
	CHECK(made >= taken && made <= taken + MEM_PREFAULT_DEPTH + 1);
	CHECK_EQ(mem_rows(m), rows);
	int bad = 0;
	for (int i = 0; i < rows; i++) {
		snprintf(key, sizeof(key), "k%08d", i);
		const void *v = NULL;
		size_t vlen = 0;
		if (mem_get(m, key, strlen(key), NULL, &v, &vlen) != 0 || vlen != sizeof(val) ||
		    ((const char *)v)[0] != 'a' + i % 26 || ((const char *)v)[vlen - 1] != 'a' + i % 26)
			bad++;
	}
	CHECK_EQ(bad, 0);
	/* Inserts after the stop allocate their own chunks. */
	REQUIRE_EQ(mem_insert(m, "after", 5, rows + 1, val, sizeof(val)), 0);
	mem_unref(m);
	CHECK_EQ(live_blocks, 0); /* chunks made and never taken were freed by the stop */
	env_reset();
}

TEST(prefault_is_not_started_for_a_small_replay_and_a_stop_frees_what_was_made)
{
	seams_install();
	struct mem *m = mem_new(1);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_prefault_start(m, MEM_HUGE_CHUNK_BYTES), 0);
	CHECK_EQ(mem_prefault_ready(m), 0);
	mem_prefault_stop(m);
	uint64_t made = 1, taken = 1;
	mem_prefault_stats(m, &made, &taken);
	CHECK_EQ(made, 0);
	/* Without huge pages there is no thread either. */
	struct mem *plain = mem_new(0);
	REQUIRE(plain != NULL);
	REQUIRE_EQ(mem_prefault_start(plain, 1u << 30), 0);
	CHECK_EQ(mem_prefault_ready(plain), 0);
	mem_unref(plain);
	/* A thread whose chunks are never taken: the stop frees them all. */
	REQUIRE_EQ(mem_prefault_start(m, 1u << 30), 0);
	wait_ready(m, 2);
	CHECK(mem_prefault_ready(m) >= 2);
	mem_prefault_stop(m);
	mem_prefault_stats(m, &made, &taken);
	CHECK(made >= 2);
	CHECK_EQ(taken, 0);
	mem_unref(m);
	CHECK_EQ(live_blocks, 0);
	env_reset();
}

/** Concurrent test shape. */
enum {
	CONC_WRITERS = 4,
	CONC_PER_WRITER = 50000,
	CONC_ROWS = CONC_WRITERS * CONC_PER_WRITER,
	CONC_KEYS = 30000,
	CONC_READERS = 2,
};

/** Key of row r. */
static size_t
conc_key(int r, char *buf)
{
	uint32_t idx = (uint32_t)((uint64_t)(uint32_t)r * 2654435761u % CONC_KEYS);
	return (size_t)snprintf(buf, 16, "k%u", idx);
}

/** Value of row r (vlen r % 23). */
static size_t
conc_val(int r, unsigned char *buf)
{
	size_t n = (size_t)(r % 23);
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(r * 31 + (int)i);
	return n;
}

/** Shared state of the concurrent test. */
struct conc {
	/** The memtable under test. */
	struct mem *m;
	/** Set once every writer has finished. */
	atomic_int done;
	/** Errors seen by threads (insert failures, order violations, bad entries). */
	atomic_int errors;
	/** Reader passes completed. */
	atomic_int passes;
};

/** Writer argument. */
struct conc_writer {
	/** Shared state. */
	struct conc *c;
	/** Writer index. */
	int t;
};

static int
conc_insert(struct mem *m, int r)
{
	char key[16];
	unsigned char val[32];
	size_t kl = conc_key(r, key);
	size_t vl = conc_val(r, val);
	return mem_insert(m, key, kl, (uint64_t)r + 1, val, vl);
}

static void *
conc_writer_main(void *arg)
{
	struct conc_writer *w = arg;
	for (int j = 0; j < CONC_PER_WRITER; j++) {
		if (conc_insert(w->c->m, j * CONC_WRITERS + w->t) != 0)
			atomic_fetch_add(&w->c->errors, 1);
		/* A neighbour's row again, at about the time the neighbour inserts it. */
		if (j % 4 == 0 &&
		    conc_insert(w->c->m, j * CONC_WRITERS + (w->t + 1) % CONC_WRITERS) != 0)
			atomic_fetch_add(&w->c->errors, 1);
	}
	return NULL;
}

/** One reader pass: order strict, every entry's key and value those of its seq. */
static long
conc_pass(struct conc *c)
{
	struct mem_iter it;
	const void *pk = NULL;
	size_t pkl = 0;
	uint64_t ps = 0;
	long count = 0;
	for (mem_iter_seek(&it, c->m, NULL, 0); mem_iter_valid(&it); mem_iter_next(&it)) {
		const void *k, *v;
		size_t kl, vl;
		uint64_t s;
		mem_iter_entry(&it, &k, &kl, &s, &v, &vl);
		if (count > 0 && ref_cmp(pk, pkl, ps, k, kl, s) >= 0) {
			atomic_fetch_add(&c->errors, 1);
			return -1;
		}
		char wk[16];
		unsigned char wv[32];
		if (s < 1 || s > CONC_ROWS) {
			atomic_fetch_add(&c->errors, 1);
			return -1;
		}
		size_t wkl = conc_key((int)s - 1, wk);
		size_t wvl = conc_val((int)s - 1, wv);
		if (kl != wkl || memcmp(k, wk, kl) != 0 || vl != wvl ||
		    (vl > 0 && memcmp(v, wv, vl) != 0)) {
			atomic_fetch_add(&c->errors, 1);
			return -1;
		}
		pk = k;
		pkl = kl;
		ps = s;
		count++;
	}
	return count;
}

static void *
conc_reader_main(void *arg)
{
	struct conc *c = arg;
	long last = 0;
	int stop;
	do {
		stop = atomic_load(&c->done);
		long n = conc_pass(c);
		if (n < last)
			atomic_fetch_add(&c->errors, 1);
		if (n < 0)
			break;
		last = n;
		char key[16];
		size_t kl = conc_key((int)n, key);
		uint64_t s;
		const void *v;
		size_t vl;
		if (mem_get(c->m, key, kl, &s, &v, &vl) == 0) {
			char wk[16];
			size_t wkl = conc_key((int)s - 1, wk);
			if (wkl != kl || memcmp(wk, key, kl) != 0)
				atomic_fetch_add(&c->errors, 1);
		}
		atomic_fetch_add(&c->passes, 1);
	} while (!stop);
	return NULL;
}

/** After every writer is done: every row present once, counters and gets right. */
static void
conc_check_final(struct conc *c)
{
	CHECK_EQ(conc_pass(c), CONC_ROWS);
	unsigned char *seen = calloc(CONC_ROWS, 1);
	uint64_t *newest = calloc(CONC_KEYS, sizeof(*newest));
	REQUIRE(seen != NULL && newest != NULL);
	uint64_t want_bytes = 0;
	for (int r = 0; r < CONC_ROWS; r++) {
		char key[16];
		unsigned char val[32];
		want_bytes += conc_key(r, key) + conc_val(r, val) + MEM_ENTRY_OVERHEAD;
		uint32_t idx = (uint32_t)atoi(key + 1);
		if (newest[idx] < (uint64_t)r + 1)
			newest[idx] = (uint64_t)r + 1;
	}
	struct mem_iter it;
	long dups = 0;
	for (mem_iter_seek(&it, c->m, NULL, 0); mem_iter_valid(&it); mem_iter_next(&it)) {
		uint64_t s;
		mem_iter_entry(&it, NULL, NULL, &s, NULL, NULL);
		if (seen[s - 1]++)
			dups++;
	}
	CHECK_EQ(dups, 0);
	long missing = 0;
	for (int r = 0; r < CONC_ROWS; r++)
		missing += !seen[r];
	CHECK_EQ(missing, 0);
	CHECK_EQ(mem_rows(c->m), CONC_ROWS);
	CHECK_EQ(mem_bytes(c->m), want_bytes);
	CHECK_EQ(mem_max_seq(c->m), CONC_ROWS);
	long wrong_get = 0;
	for (uint32_t idx = 0; idx < CONC_KEYS; idx++) {
		char key[16];
		size_t kl = (size_t)snprintf(key, sizeof(key), "k%u", idx);
		uint64_t s = 0;
		int rc = mem_get(c->m, key, kl, &s, NULL, NULL);
		if (newest[idx] == 0 ? rc != STRATA_NOTFOUND : rc != 0 || s != newest[idx])
			wrong_get++;
	}
	CHECK_EQ(wrong_get, 0);
	free(seen);
	free(newest);
}

/** CONC_WRITERS threads running writer and CONC_READERS running conc_reader_main on one
 *  memtable: no reader sees a wrong entry or order, and every row is there at the end. */
static void
conc_run(void *(*writer)(void *))
{
	struct conc c;
	c.m = mem_new(0);
	REQUIRE(c.m != NULL);
	atomic_init(&c.done, 0);
	atomic_init(&c.errors, 0);
	atomic_init(&c.passes, 0);
	pthread_t wt[CONC_WRITERS], rt[CONC_READERS];
	struct conc_writer wa[CONC_WRITERS];
	for (int i = 0; i < CONC_READERS; i++)
		REQUIRE_EQ(pthread_create(&rt[i], NULL, conc_reader_main, &c), 0);
	for (int i = 0; i < CONC_WRITERS; i++) {
		wa[i].c = &c;
		wa[i].t = i;
		REQUIRE_EQ(pthread_create(&wt[i], NULL, writer, &wa[i]), 0);
	}
	for (int i = 0; i < CONC_WRITERS; i++)
		pthread_join(wt[i], NULL);
	atomic_store(&c.done, 1);
	for (int i = 0; i < CONC_READERS; i++)
		pthread_join(rt[i], NULL);
	CHECK_EQ(atomic_load(&c.errors), 0);
	CHECK(atomic_load(&c.passes) >= CONC_READERS);
	conc_check_final(&c);
	mem_unref(c.m);
}

TEST(concurrent_inserts_keep_readers_ordered_and_lose_no_row)
{
	conc_run(conc_writer_main);
}

/* ---------------------------------------------------------------- batches */

/** CHECK that m holds exactly its entries before a batch: want[0..n) and the counters. */
static void
check_unchanged(struct mem *m, const struct exp_row *want, size_t n, uint64_t rows,
		uint64_t bytes, uint64_t max_seq)
{
	check_contents(m, want, n);
	CHECK_EQ(mem_rows(m), rows);
	CHECK_EQ(mem_bytes(m), bytes);
	CHECK_EQ(mem_max_seq(m), max_seq);
}

TEST(batch_visible_only_after_insert)
{
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "b", 1, 1, "old", 3), 0);
	size_t bn = MEM_CHUNK_BYTES / 2;
	char *big = malloc(bn);
	REQUIRE(big != NULL);
	memset(big, 'B', bn);
	char val[4] = "abc";
	const strata_row rows[] = {
		{"b", 1, "new", 3},   {"a", 1, val, 3},  {NULL, 0, "empty key", 9},
		{"c", 1, NULL, 0},    {"big", 3, big, bn}, {"a", 1, "a2", 2},
	};
	size_t n = sizeof(rows) / sizeof(rows[0]);
	struct mem_batch *b = NULL;
	REQUIRE_EQ(mem_batch_new(m, rows, n, &b), 0);
	REQUIRE(b != NULL);
	/* The batch holds copies: scribbling on the sources changes nothing. */
	memset(val, 'x', 3);
	big[bn / 2] = 'x';
	/* Prepared, not linked: only the old row shows and the counters are as before. */
	static const struct exp_row before[] = {{"b", 1, 1}};
	check_unchanged(m, before, 1, 1, 1 + 3 + MEM_ENTRY_OVERHEAD, 1);
	CHECK_EQ(mem_get(m, "a", 1, NULL, NULL, NULL), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "", 0, NULL, NULL, NULL), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "big", 3, NULL, NULL, NULL), STRATA_NOTFOUND);
	CHECK_EQ(mem_get(m, "c", 1, NULL, NULL, NULL), STRATA_NOTFOUND);
	uint64_t seq = 0;
	const void *v;
	size_t vl;
	CHECK_EQ(mem_get(m, "b", 1, &seq, &v, &vl), 0);
	CHECK_EQ(seq, 1);

	mem_batch_insert(b, 10);
	static const struct exp_row after[] = {
		{"", 0, 12}, {"a", 1, 15}, {"a", 1, 11}, {"b", 1, 10},
		{"b", 1, 1}, {"big", 3, 14}, {"c", 1, 13},
	};
	uint64_t bytes = 1 + 3 + 1 + 3 + 1 + 3 + 9 + 1 + 3 + bn + 1 + 2 + 7 * MEM_ENTRY_OVERHEAD;
	check_unchanged(m, after, 7, 7, bytes, 15);
	CHECK_EQ(mem_get(m, "a", 1, &seq, &v, &vl), 0);
	CHECK(seq == 15 && vl == 2 && memcmp(v, "a2", 2) == 0);
	struct mem_iter it;
	mem_iter_seek(&it, m, "a", 1);
	REQUIRE(mem_iter_valid(&it));
	mem_iter_next(&it);
	REQUIRE(mem_iter_valid(&it));
	mem_iter_entry(&it, NULL, NULL, &seq, &v, &vl);
	CHECK(seq == 11 && vl == 3 && memcmp(v, "abc", 3) == 0);
	CHECK_EQ(mem_get(m, "b", 1, &seq, &v, &vl), 0);
	CHECK(seq == 10 && vl == 3 && memcmp(v, "new", 3) == 0);
	CHECK_EQ(mem_get(m, NULL, 0, &seq, &v, &vl), 0);
	CHECK(seq == 12 && vl == 9 && memcmp(v, "empty key", 9) == 0);
	CHECK_EQ(mem_get(m, "c", 1, &seq, &v, &vl), 0);
	CHECK(seq == 13 && vl == 0);
	REQUIRE_EQ(mem_get(m, "big", 3, &seq, &v, &vl), 0);
	big[bn / 2] = 'B';
	CHECK(seq == 14 && vl == bn && memcmp(v, big, bn) == 0);
	CHECK(mem_arena_bytes(m) >= bn);

	/* Empty batches insert nothing. */
	REQUIRE_EQ(mem_batch_new(m, NULL, 0, &b), 0);
	mem_batch_insert(b, 100);
	REQUIRE_EQ(mem_batch_new(m, rows, 0, &b), 0);
	mem_batch_free(b);
	check_unchanged(m, after, 7, 7, bytes, 15);
	mem_unref(m);
	free(big);
}

/** Rows of the batch tests: i % 3 == 0 a 200 KB value (arena), i % 7 == 3 otherwise a
 *  300 KB value (a dedicated allocation), else 100 bytes; key "r%02d", value pat + i. */
enum { BROWS = 40, BMID = 200 * 1024, BBIG = 300 * 1024 };

/** Keys and the value pattern behind batch_rows. */
struct brows {
	/** Key bytes of each row. */
	char keys[BROWS][8];
	/** Value bytes; row i's value starts at pat + i. */
	unsigned char *pat;
	/** The rows. */
	strata_row rows[BROWS];
};

/** Fill br; false on ENOMEM of the test itself. */
static bool
brows_init(struct brows *br)
{
	br->pat = malloc(BBIG + BROWS);
	if (br->pat == NULL)
		return false;
	for (size_t i = 0; i < BBIG + BROWS; i++)
		br->pat[i] = (unsigned char)(i * 2654435761u >> 11);
	for (int i = 0; i < BROWS; i++) {
		snprintf(br->keys[i], sizeof(br->keys[i]), "r%02d", i);
		size_t vl = i % 3 == 0 ? BMID : i % 7 == 3 ? BBIG : 100;
		br->rows[i] = (strata_row){br->keys[i], 3, br->pat + i, vl};
	}
	return true;
}

/** Bytes mem_bytes charges for the rows of br. */
static uint64_t
brows_bytes(const struct brows *br)
{
	uint64_t sum = 0;
	for (int i = 0; i < BROWS; i++)
		sum += br->rows[i].key_len + br->rows[i].value_len + MEM_ENTRY_OVERHEAD;
	return sum;
}

/** CHECK that no row of br is visible in m. */
static void
brows_check_absent(struct mem *m, const struct brows *br)
{
	int found = 0;
	for (int i = 0; i < BROWS; i++)
		found += mem_get(m, br->keys[i], 3, NULL, NULL, NULL) != STRATA_NOTFOUND;
	CHECK_EQ(found, 0);
}

/** CHECK that every row of br is in m with seq first_seq + i and its value. */
static void
brows_check_present(struct mem *m, const struct brows *br, uint64_t first_seq)
{
	int wrong = 0;
	for (int i = 0; i < BROWS; i++) {
		uint64_t s;
		const void *v;
		size_t vl;
		if (mem_get(m, br->keys[i], 3, &s, &v, &vl) != 0 || s != first_seq + (uint64_t)i ||
		    vl != br->rows[i].value_len || memcmp(v, br->rows[i].value, vl) != 0)
			wrong++;
	}
	CHECK_EQ(wrong, 0);
}

TEST(batch_free_without_insert_leaves_nothing)
{
	struct brows br;
	REQUIRE(brows_init(&br));
	seams_install();
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "a", 1, 1, "x", 1), 0);
	static const struct exp_row only_a[] = {{"a", 1, 1}};
	uint64_t bytes = 1 + 1 + MEM_ENTRY_OVERHEAD;

	struct mem_batch *b = NULL;
	REQUIRE_EQ(mem_batch_new(m, br.rows, BROWS, &b), 0);
	/* The handle and the dedicated entries are held by the batch. */
	CHECK(live_blocks > mem_own_blocks(m) + 1);
	mem_batch_free(b);
	check_unchanged(m, only_a, 1, 1, bytes, 1);
	brows_check_absent(m, &br);
	/* Freed at once, not at the last unref: only the memtable and its chunks remain. */
	CHECK_EQ(live_blocks, mem_own_blocks(m));
	mem_batch_free(NULL);

	/* The same rows and seqs go in afterwards: the freed batch left nothing behind. */
	REQUIRE_EQ(mem_batch_new(m, br.rows, BROWS, &b), 0);
	mem_batch_insert(b, 2);
	brows_check_present(m, &br, 2);
	CHECK_EQ(mem_rows(m), 1 + BROWS);
	CHECK_EQ(mem_bytes(m), bytes + brows_bytes(&br));
	CHECK_EQ(mem_max_seq(m), 1 + BROWS);

	/* A batch keeps its memtable alive; freeing it drops the last reference. */
	REQUIRE_EQ(mem_batch_new(m, br.rows, BROWS, &b), 0);
	mem_unref(m);
	CHECK(live_blocks > 0);
	mem_batch_free(b);
	CHECK_EQ(live_blocks, 0);
	/* Likewise when the batch is inserted. */
	m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_batch_new(m, br.rows, BROWS, &b), 0);
	mem_unref(m);
	mem_batch_insert(b, 1);
	CHECK_EQ(live_blocks, 0);
	env_reset();
	free(br.pat);
}

TEST(batch_rejects_bad_rows)
{
	seams_install();
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	long blocks = live_blocks;
	struct mem_batch *b = (struct mem_batch *)&b;
	strata_row rows[3] = {{"a", 1, "x", 1}, {"b", 1, "y", 1}, {NULL, 1, "z", 1}};
	diag_clear();
	CHECK_EQ(mem_batch_new(m, rows, 3, &b), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "row 2: NULL key") != NULL);
	CHECK(b == NULL);
	rows[2] = (strata_row){"c", 1, NULL, 1};
	CHECK_EQ(mem_batch_new(m, rows, 3, &b), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "row 2: NULL value") != NULL);
	rows[2] = (strata_row){"c", (size_t)MEM_MAX_KEY + 1, "z", 1};
	CHECK_EQ(mem_batch_new(m, rows, 3, &b), STRATA_ETOOBIG);
	CHECK(strstr(diag_last(), "row 2: key of") != NULL);
	rows[2] = (strata_row){"c", 1, "z", SIZE_MAX - 8};
	CHECK_EQ(mem_batch_new(m, rows, 3, &b), STRATA_ETOOBIG);
	CHECK(strstr(diag_last(), "row 2: entry") != NULL);
	CHECK_EQ(mem_batch_new(m, NULL, 1, &b), STRATA_EINVAL);
	CHECK(b == NULL);
	/* Rejected before any allocation. */
	CHECK_EQ(live_blocks, blocks);
	CHECK_EQ(mem_arena_bytes(m), 0);
	check_unchanged(m, NULL, 0, 0, 0, 0);
	mem_unref(m);
	CHECK_EQ(live_blocks, 0);
	env_reset();
}

TEST(batch_enomem_at_every_allocation)
{
	struct brows br;
	REQUIRE(brows_init(&br));
	seams_install();
	static const struct exp_row pre[] = {{"pre", 3, 1000}};
	uint64_t pre_bytes = 3 + 1 + MEM_ENTRY_OVERHEAD;
	long failures = 0;
	for (long nth = 0;; nth++) {
		if (nth > 1000) {
			CHECK(!"mem_batch_new never succeeded");
			break;
		}
		fail_after = -1;
		struct mem *m = mem_new(0);
		REQUIRE(m != NULL);
		REQUIRE_EQ(mem_insert(m, "pre", 3, 1000, "p", 1), 0);
		struct mem_batch *b = (struct mem_batch *)&b;
		fail_after = nth;
		diag_clear();
		int rc = mem_batch_new(m, br.rows, BROWS, &b);
		fail_after = -1;
		if (rc == 0) {
			mem_batch_insert(b, 1);
			brows_check_present(m, &br, 1);
			CHECK_EQ(mem_rows(m), 1 + BROWS);
			CHECK_EQ(mem_bytes(m), pre_bytes + brows_bytes(&br));
			CHECK_EQ(mem_max_seq(m), 1000);
			mem_unref(m);
			CHECK_EQ(live_blocks, 0);
			break;
		}
		failures++;
		CHECK_EQ(rc, STRATA_ENOMEM);
		CHECK(b == NULL);
		CHECK(strstr(diag_last(), "memtable: cannot allocate") != NULL);
		check_unchanged(m, pre, 1, 1, pre_bytes, 1000);
		brows_check_absent(m, &br);
		/* Nothing but the memtable and its chunks is held: no dedicated entry leaked. */
		CHECK_EQ(live_blocks, mem_own_blocks(m));
		/* Allocation works again: the same batch goes in whole. */
		REQUIRE_EQ(mem_batch_new(m, br.rows, BROWS, &b), 0);
		check_unchanged(m, pre, 1, 1, pre_bytes, 1000);
		mem_batch_insert(b, 1);
		brows_check_present(m, &br, 1);
		CHECK_EQ(mem_rows(m), 1 + BROWS);
		CHECK_EQ(mem_bytes(m), pre_bytes + brows_bytes(&br));
		mem_unref(m);
		CHECK_EQ(live_blocks, 0);
	}
	/* The handle, the 4 dedicated entries and the 2 chunks beyond the one "pre" opened
	 * (14 values of 200 KB): each allocation failed once. */
	CHECK_EQ(failures, 7);
	env_reset();
	free(br.pat);
}

TEST(batch_duplicate_key_seq_keeps_one)
{
	seams_install();
	struct mem *m = mem_new(0);
	REQUIRE(m != NULL);
	REQUIRE_EQ(mem_insert(m, "k", 1, 5, "first", 5), 0);
	const strata_row rows[] = {{"j", 1, "J", 1}, {"k", 1, "second", 6}, {"l", 1, "L", 1}};
	struct mem_batch *b;
	REQUIRE_EQ(mem_batch_new(m, rows, 3, &b), 0);
	mem_batch_insert(b, 4);
	static const struct exp_row want[] = {{"j", 1, 4}, {"k", 1, 5}, {"l", 1, 6}};
	uint64_t bytes = (1 + 5) + (1 + 1) + (1 + 1) + 3 * MEM_ENTRY_OVERHEAD;
	check_unchanged(m, want, 3, 3, bytes, 6);
	const void *v;
	size_t vl;
	CHECK_EQ(mem_get(m, "k", 1, NULL, &v, &vl), 0);
	CHECK(vl == 5 && memcmp(v, "first", 5) == 0);
	/* The whole batch again at the same seqs: nothing changes. */
	REQUIRE_EQ(mem_batch_new(m, rows, 3, &b), 0);
	mem_batch_insert(b, 4);
	check_unchanged(m, want, 3, 3, bytes, 6);
	/* mem_insert after a batch keeps the batch's entry. */
	CHECK_EQ(mem_insert(m, "j", 1, 4, "other", 5), 0);
	CHECK_EQ(mem_get(m, "j", 1, NULL, &v, &vl), 0);
	CHECK(vl == 1 && memcmp(v, "J", 1) == 0);
	check_unchanged(m, want, 3, 3, bytes, 6);

	/* A duplicate dedicated entry is freed, not adopted. */
	size_t bn = MEM_CHUNK_BYTES / 2;
	char *big = calloc(1, bn);
	REQUIRE(big != NULL);
	const strata_row brow[] = {{"m", 1, big, bn}};
	REQUIRE_EQ(mem_batch_new(m, brow, 1, &b), 0);
	mem_batch_insert(b, 9);
	uint64_t arena = mem_arena_bytes(m);
	long blocks = live_blocks;
	REQUIRE_EQ(mem_batch_new(m, brow, 1, &b), 0);
	mem_batch_insert(b, 9);
	CHECK_EQ(mem_arena_bytes(m), arena);
	CHECK_EQ(live_blocks, blocks);
	CHECK_EQ(mem_rows(m), 4);
	CHECK_EQ(mem_bytes(m), bytes + 1 + bn + MEM_ENTRY_OVERHEAD);
	CHECK_EQ(mem_max_seq(m), 9);
	mem_unref(m);
	CHECK_EQ(live_blocks, 0);
	env_reset();
	free(big);
}

/** Rows per batch in the concurrent batch test. */
enum { CONC_BATCH = 50, CONC_BATCHES = CONC_ROWS / CONC_BATCH };

/** Prepare batch k of the concurrent test (rows k * CONC_BATCH ...); NULL on failure. */
static struct mem_batch *
conc_batch_new(struct mem *m, int k)
{
	char keys[CONC_BATCH][16];
	unsigned char vals[CONC_BATCH][32];
	strata_row rows[CONC_BATCH] = {0};
	for (int i = 0; i < CONC_BATCH; i++) {
		int r = k * CONC_BATCH + i;
		rows[i].key = keys[i];
		rows[i].key_len = conc_key(r, keys[i]);
		rows[i].value = vals[i];
		rows[i].value_len = conc_val(r, vals[i]);
	}
	struct mem_batch *b;
	return mem_batch_new(m, rows, CONC_BATCH, &b) == 0 ? b : NULL;
}

static void *
conc_batch_writer_main(void *arg)
{
	struct conc_writer *w = arg;
	struct mem *m = w->c->m;
	/* Writer t owns batches k with k % CONC_WRITERS == t; it prepares two at a time and
	 * inserts them newest first, like two appends whose WAL writes finish out of order. */
	for (int k = w->t; k < CONC_BATCHES; k += 2 * CONC_WRITERS) {
		int k2 = k + CONC_WRITERS;
		struct mem_batch *b1 = conc_batch_new(m, k);
		struct mem_batch *b2 = k2 < CONC_BATCHES ? conc_batch_new(m, k2) : NULL;
		if (b1 == NULL || (k2 < CONC_BATCHES && b2 == NULL)) {
			atomic_fetch_add(&w->c->errors, 1);
			mem_batch_free(b1);
			mem_batch_free(b2);
			continue;
		}
		if (b2 != NULL)
			mem_batch_insert(b2, (uint64_t)k2 * CONC_BATCH + 1);
		mem_batch_insert(b1, (uint64_t)k * CONC_BATCH + 1);
		/* A neighbour's batch again, at about the time the neighbour inserts it: as a
		 * batch, row by row, or prepared and dropped. */
		int nk = k + 1;
		if (nk >= CONC_BATCHES || (k / CONC_WRITERS) % 3 != 0)
			continue;
		switch ((k / CONC_WRITERS / 3) % 3) {
		case 0: {
			struct mem_batch *nb = conc_batch_new(m, nk);
			if (nb == NULL)
				atomic_fetch_add(&w->c->errors, 1);
			else
				mem_batch_insert(nb, (uint64_t)nk * CONC_BATCH + 1);
			break;
		}
		case 1:
			for (int i = 0; i < CONC_BATCH; i++)
				if (conc_insert(m, nk * CONC_BATCH + i) != 0)
					atomic_fetch_add(&w->c->errors, 1);
			break;
		default:
			mem_batch_free(conc_batch_new(m, nk));
			break;
		}
	}
	return NULL;
}

TEST(concurrent_batch_inserts_keep_readers_ordered_and_lose_no_row)
{
	conc_run(conc_batch_writer_main);
}

/** With huge pages on, the first chunk stays 1 MiB (an idle memtable stays small) and
 *  later ones are MEM_HUGE_CHUNK_BYTES; every row reads back across the switch. */
TEST(huge_page_chunks_after_the_first)
{
	for (int huge = 0; huge <= 1; huge++) {
		struct mem *m = mem_new(huge);
		REQUIRE(m != NULL);
		char key[16], val[1000];
		memset(val, 'v', sizeof(val));
		REQUIRE_EQ(mem_insert(m, "first", 5, 1, val, 10), 0);
		uint64_t one = mem_arena_bytes(m);
		CHECK(one > MEM_CHUNK_BYTES && one < MEM_CHUNK_BYTES + 4096);
		int n = 3000; /* about 3 MiB of rows: past the first chunk */
		for (int i = 0; i < n; i++) {
			snprintf(key, sizeof(key), "k%08d", i);
			REQUIRE_EQ(mem_insert(m, key, 9, (uint64_t)i + 2, val, sizeof(val)), 0);
		}
		uint64_t all = mem_arena_bytes(m);
		if (huge)
			CHECK(all > MEM_CHUNK_BYTES + MEM_HUGE_CHUNK_BYTES &&
			      all < MEM_CHUNK_BYTES + MEM_HUGE_CHUNK_BYTES + 8192);
		else
			CHECK(all > 3 * MEM_CHUNK_BYTES && all < 5 * (MEM_CHUNK_BYTES + 4096));
		for (int i = 0; i < n; i += 97) {
			snprintf(key, sizeof(key), "k%08d", i);
			uint64_t seq;
			const void *v;
			size_t vl;
			CHECK_EQ(mem_get(m, key, 9, &seq, &v, &vl), 0);
			CHECK_EQ(vl, sizeof(val));
			CHECK_EQ(seq, (uint64_t)i + 2);
		}
		mem_unref(m);
	}
}

/* ---- bulk load (WAL replay) ---- */

/** A row of the bulk load tests. */
struct load_row {
	char key[12];
	size_t klen;
	uint64_t seq;
	uint32_t kind;
	size_t vlen;
};

/** n rows in the given order (0 random, 1 ascending, 2 descending): short keys over a
 *  small alphabet with zero bytes, so keys share their first 8 bytes, are prefixes of
 *  each other and repeat; seqs from a small range, so (key, seq) repeats with another
 *  value; tombstones; and now and then a value of a dedicated allocation. */
static void
load_rows(struct load_row *r, size_t n, int order, uint64_t *x)
{
	for (size_t i = 0; i < n; i++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
		uint64_t v = *x;
		if (order == 0) {
			r[i].klen = v % 11;
			for (size_t j = 0; j < r[i].klen; j++)
				r[i].key[j] = "ab\0"[(v >> (8 + 2 * j)) % 3];
		} else {
			size_t k = order == 1 ? i / 3 : n - i / 3;
			r[i].klen = (size_t)snprintf(r[i].key, sizeof(r[i].key), "key%08zu", k);
		}
		r[i].seq = 1 + (v >> 40) % 64;
		r[i].kind = (v >> 50) % 5 == 0 ? STRATA_ROW_DELETE : STRATA_ROW_PUT;
		r[i].vlen = r[i].kind == STRATA_ROW_DELETE ? 0 : (v >> 53) % 97 == 0 ? 300000 : (v >> 56) % 40;
	}
}

/** The value of row i: its index in its first bytes, so which of two rows with the same
 *  (key, seq) was kept shows. */
static void
load_val(char *val, size_t i)
{
	memcpy(val, &i, sizeof(i));
}

/** CHECK that a and b hold the same entries (key, seq, kind, value) and counters, and
 *  that every search finds the same entry in both (the upper levels are linked right). */
static void
check_same_mem(struct mem *a, struct mem *b, const struct load_row *r, size_t n)
{
	CHECK_EQ(mem_rows(a), mem_rows(b));
	CHECK_EQ(mem_bytes(a), mem_bytes(b));
	CHECK_EQ(mem_max_seq(a), mem_max_seq(b));
	struct mem_iter ia, ib;
	mem_iter_seek(&ia, a, NULL, 0);
	mem_iter_seek(&ib, b, NULL, 0);
	size_t same = 0;
	for (; mem_iter_valid(&ia) && mem_iter_valid(&ib); mem_iter_next(&ia), mem_iter_next(&ib)) {
		const void *ka, *kb, *va, *vb;
		size_t kla, klb, vla, vlb;
		uint64_t sa, sb;
		mem_iter_entry(&ia, &ka, &kla, &sa, &va, &vla);
		mem_iter_entry(&ib, &kb, &klb, &sb, &vb, &vlb);
		if (kla != klb || (kla > 0 && memcmp(ka, kb, kla) != 0) || sa != sb || vla != vlb ||
		    (vla > 0 && memcmp(va, vb, vla < 8 ? vla : 8) != 0) ||
		    mem_iter_kind(&ia) != mem_iter_kind(&ib)) {
			fprintf(stderr, "  entry %zu: key of %zu bytes, seq %llu after the inserts, "
				"%zu bytes, seq %llu after the load\n", same, kla, (unsigned long long)sa,
				klb, (unsigned long long)sb);
			break;
		}
		same++;
	}
	CHECK_EQ(same, mem_rows(a));
	CHECK(!mem_iter_valid(&ia) && !mem_iter_valid(&ib));
	size_t found = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t s1 = 0, s2 = 0;
		int g1 = mem_get(a, r[i].key, r[i].klen, &s1, NULL, NULL);
		int g2 = mem_get(b, r[i].key, r[i].klen, &s2, NULL, NULL);
		mem_iter_seek(&ia, a, r[i].key, r[i].klen);
		mem_iter_seek(&ib, b, r[i].key, r[i].klen);
		const void *ka = NULL, *kb = NULL;
		size_t kla = 0, klb = 0;
		uint64_t sa = 0, sb = 0;
		if (mem_iter_valid(&ia))
			mem_iter_entry(&ia, &ka, &kla, &sa, NULL, NULL);
		if (mem_iter_valid(&ib))
			mem_iter_entry(&ib, &kb, &klb, &sb, NULL, NULL);
		if (g1 == g2 && s1 == s2 && kla == klb && sa == sb &&
		    (ka == NULL) == (kb == NULL) && (kla == 0 || memcmp(ka, kb, kla) == 0))
			found++;
	}
	CHECK_EQ(found, n);
}

/** A bulk load holds the memtable's contents to what one insert per row makes: in every
 *  key order, with rows already present, with every batch size down to one row. */
TEST(bulk_load_links_what_inserts_would)
{
	static struct load_row r[3000];
	static const size_t caps[] = {1, 2, 7, 64, 1000, 0};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	char *val = calloc(1, 300000);
	REQUIRE(val != NULL);
	for (int order = 0; order < 3; order++) {
		for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
			size_t n = sizeof(r) / sizeof(r[0]);
			load_rows(r, n, order, &x);
			struct mem *a = mem_new(0), *b = mem_new(0);
			REQUIRE(a != NULL && b != NULL);
			size_t pre = n / 10;
			for (size_t i = 0; i < n; i++) {
				load_val(val, i);
				REQUIRE_EQ(mem_insert_kind(a, r[i].key, r[i].klen, r[i].seq, val, r[i].vlen,
							   r[i].kind), 0);
				if (i == pre)
					REQUIRE_EQ(mem_load_begin(b, caps[c]), 0);
				REQUIRE_EQ(mem_load_add(b, r[i].key, r[i].klen, r[i].seq, val, r[i].vlen,
							r[i].kind), 0);
			}
			/* Rows the load holds are not visible before it links them. */
			if (caps[c] == 0)
				CHECK(mem_rows(b) < mem_rows(a));
			mem_load_end(b);
			check_same_mem(a, b, r, n);
			/* After the load, an add is an insert. */
			REQUIRE_EQ(mem_load_add(b, "zz-after", 8, 1, "v", 1, STRATA_ROW_PUT), 0);
			CHECK_EQ(mem_get(b, "zz-after", 8, NULL, NULL, NULL), 0);
			mem_unref(a);
			mem_unref(b);
		}
	}
	free(val);
}

/** A load that runs out of memory at any allocation keeps every row it accepted and
 *  leaks nothing, also when the memtable is freed with the load still open. */
TEST(bulk_load_enomem_at_every_allocation)
{
	static struct load_row r[200];
	uint64_t x = 7;
	load_rows(r, 200, 0, &x);
	static char val[300000];
	int failed_somewhere = 0;
	for (long k = 0; k < 40; k++) {
		seams_install();
		struct mem *m = mem_new(0);
		REQUIRE(m != NULL);
		fail_after = k;
		int begun = mem_load_begin(m, 16) == 0;
		size_t ok = 0;
		static size_t okv[200];
		for (size_t i = 0; i < 200; i++) {
			int rc = mem_load_add(m, r[i].key, r[i].klen, r[i].seq, val, r[i].vlen, r[i].kind);
			CHECK(rc == 0 || rc == STRATA_ENOMEM);
			if (rc == 0)
				okv[ok++] = i;
			else
				failed_somewhere = 1;
		}
		fail_after = -1;
		/* Every other time the load is left open, holding a row of a dedicated
		 * allocation: m's last unref below frees it. */
		if (k % 2 == 1 && begun)
			REQUIRE_EQ(mem_load_add(m, "zz-big", 6, 1, val, sizeof(val), STRATA_ROW_PUT), 0);
		if (k % 2 == 0 || !begun) {
			mem_load_end(m);
			for (size_t j = 0; j < ok; j++) {
				const struct load_row *w = &r[okv[j]];
				uint64_t s;
				CHECK_EQ(mem_get(m, w->key, w->klen, &s, NULL, NULL), 0);
			}
		}
		mem_unref(m);
		CHECK_EQ(live_blocks, 0);
		env_reset();
	}
	CHECK(failed_somewhere);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(order_is_key_ascending_then_seq_descending);
	RUN(huge_page_chunks_after_the_first);
	RUN(prefix_keys_order_shorter_first);
	RUN(get_returns_highest_seq);
	RUN(duplicate_key_seq_collapses);
	RUN(seek_lands_on_first_entry_at_or_after_key);
	RUN(byte_accounting_matches_formula);
	RUN(empty_key_and_value_are_valid_null_with_a_length_is_refused);
	RUN(oversized_entry_is_rejected);
	RUN(large_value_is_copied_and_round_trips);
	RUN(enomem_on_new_returns_null);
	RUN(enomem_leaves_memtable_consistent);
	RUN(last_unref_frees_every_allocation);
	RUN(prefaulted_chunks_hold_every_row_and_none_leak);
	RUN(prefault_is_not_started_for_a_small_replay_and_a_stop_frees_what_was_made);
	RUN(concurrent_inserts_keep_readers_ordered_and_lose_no_row);
	RUN(batch_visible_only_after_insert);
	RUN(batch_free_without_insert_leaves_nothing);
	RUN(batch_rejects_bad_rows);
	RUN(batch_enomem_at_every_allocation);
	RUN(batch_duplicate_key_seq_keeps_one);
	RUN(concurrent_batch_inserts_keep_readers_ordered_and_lose_no_row);
	RUN(bulk_load_links_what_inserts_would);
	RUN(bulk_load_enomem_at_every_allocation);
	return HARNESS_END("test_mem");
}
