/*
 * test_backlog.c — costs that must not grow with the backlog: the memory a pending
 * generation keeps while idle (its reader, index and filter; no decompression context
 * of its own), counted through the environment's allocator.
 */
#define ENGINE_UTIL_TAG "backlog"
#include <malloc.h>
#include <stdatomic.h>

#include "../../node/lib/env.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine_util.h"
#pragma GCC diagnostic pop

/** Bytes the store's environment holds now. */
static atomic_long live_bytes;

static void *
count_malloc(size_t n)
{
	void *p = malloc(n);
	if (p != NULL)
		atomic_fetch_add(&live_bytes, (long)malloc_usable_size(p));
	return p;
}

static void *
count_calloc(size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (p != NULL)
		atomic_fetch_add(&live_bytes, (long)malloc_usable_size(p));
	return p;
}

static void *
count_realloc(void *old, size_t n)
{
	long before = old != NULL ? (long)malloc_usable_size(old) : 0;
	void *p = realloc(old, n);
	if (p != NULL)
		atomic_fetch_add(&live_bytes, (long)malloc_usable_size(p) - before);
	return p;
}

static void
count_free(void *p)
{
	if (p != NULL)
		atomic_fetch_sub(&live_bytes, (long)malloc_usable_size(p));
	free(p);
}

TEST(an_idle_pending_generation_keeps_a_few_kib)
{
	static struct env_ops counted;
	counted = env_default;
	counted.malloc = count_malloc;
	counted.calloc = count_calloc;
	counted.realloc = count_realloc;
	counted.free = count_free;
	strata_options o = opts_for(tdir());
	o.env_ops = &counted;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	char key[32], val[100];
	memset(val, 'v', sizeof(val));
	/* Warm up: the first generations create what every later one shares. */
	for (int g = 0; g < 20; g++) {
		for (int r = 0; r < 4; r++) {
			int kl = snprintf(key, sizeof(key), "k%07d", g * 4 + r);
			strata_row row = {key, (size_t)kl, val, sizeof(val)};
			REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
		}
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	long before = atomic_load(&live_bytes);
	enum { GENS = 300 };
	for (int g = 20; g < 20 + GENS; g++) {
		for (int r = 0; r < 4; r++) {
			int kl = snprintf(key, sizeof(key), "k%07d", g * 4 + r);
			strata_row row = {key, (size_t)kl, val, sizeof(val)};
			REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
		}
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
	long per_gen = (atomic_load(&live_bytes) - before) / GENS;
	fprintf(stderr, "  # %d pending generations: %ld bytes each while idle\n", GENS, per_gen);
	CHECK_EQ(stats_of(db).generations, 20 + GENS);
	/* A reader kept a ~96 KiB zstd context of its own before; now it takes one from a
	 * shared pool per call. */
	CHECK(per_gen <= 4096);
	/* Reads across the whole backlog still work (they borrow contexts). */
	void *v = NULL;
	size_t vl = 0;
	REQUIRE_EQ(strata_get(db, 0, "k0000001", 8, &v, &vl), 0);
	CHECK_EQ(vl, sizeof(val));
	strata_free(v);
	db_close(db);
}

/** End a test: stop the watchdog, clean up. */
static void
t_end(void)
{
	alarm(0);
	t_cleanup();
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	signal(SIGALRM, watchdog_fire);
	T(an_idle_pending_generation_keeps_a_few_kib);
	return HARNESS_END("test_backlog");
}
