/*
 * test_compact.c — an external compactor next to a live writer (node/core/compactor.h,
 * shard_load_external): it merges with the writer's epoch and never fences it; the
 * writer follows its commits; when both commit the same inputs exactly one wins and the
 * other backs off; a commit prepared before a new owner claimed the shard is dropped;
 * nothing is lost, duplicated or leaked.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../node/core/compactor.h"
#include "../../node/core/manifest.h"
#include "../../node/core/reaper.h"
#include "../../node/core/shard.h"
#include "../../node/lib/env.h"
#include "../../node/lib/keycmp.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "harness.h"

/** Tag of the temporary directories (engine_util.h). */
#define ENGINE_UTIL_TAG "compact"
#include "engine_util.h"

/** Rows per generation the tests write. */
#define ROWS_PER_GEN 50

/** A one-shard store with gens generations of ROWS_PER_GEN rows ("k" 0..), sealed. */
static strata *
open_with_gens(const char *dir, int gens)
{
	strata_options o = opts_for(dir);
	strata *db = db_open(&o);
	for (int g = 0; db != NULL && g < gens; g++) {
		if (put_range(db, "k", g * ROWS_PER_GEN, (g + 1) * ROWS_PER_GEN, "a", 16) != 0 ||
		    strata_seal(db, 0) != 0)
			return NULL;
	}
	return db;
}

static struct compactor_options
copts_for(const char *dir)
{
	strata_options so;
	strata_options_init(&so);
	struct compactor_options o = {
		.dir = dir,
		.shard = 0,
		.max_generations = 0,
		.base_max_runs = 0,
		.merge_max_inputs = so.merge_max_inputs,
		.block_bytes = so.block_bytes,
		.zstd_level = so.zstd_level,
		.bloom_bits_per_key = so.bloom_bits_per_key,
	};
	return o;
}

/** A compactor's shard handle on dir's fs store, for driving prepare and commit apart. */
struct ext {
	/** The store. */
	struct objstore *os;
	/** Its reaper. */
	struct reaper *reaper;
	/** The handle. */
	struct shard *s;
};

static int
ext_open(const char *dir, struct ext *e)
{
	memset(e, 0, sizeof(*e));
	char root[512];
	snprintf(root, sizeof(root), "%s/objects", dir);
	int rc = objstore_fs_new(root, &e->os);
	if (rc == 0)
		rc = reaper_new(e->os, 0, 8u << 20, &e->reaper);
	if (rc == 0) {
		struct shard_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.os = e->os;
		snprintf(cfg.prefix, sizeof(cfg.prefix), SHARD0);
		cfg.run.block_bytes = 4096;
		cfg.run.zstd_level = 1;
		cfg.merge_max_inputs = 64;
		cfg.reaper = e->reaper;
		rc = shard_load_external(&cfg, &e->s);
	}
	if (rc)
		fprintf(stderr, "  ext_open(%s): %s: %s\n", dir, strata_strerror(rc), strata_last_error());
	return rc;
}

static void
ext_close(struct ext *e)
{
	shard_close(e->s);
	reaper_delete(e->reaper);
	objstore_destroy(e->os);
	memset(e, 0, sizeof(*e));
}

/** Every object under shard 0 is named by its manifest (none leaked): 1, or 0 printing
 *  what is not. */
struct leak_ctx {
	/** The manifest. */
	struct manifest *m;
	/** Objects it does not name. */
	int leaked;
};

static int
leak_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	struct leak_ctx *l = ctx;
	const char *rel = key + strlen(SHARD0);
	int kind;
	uint64_t id, epoch;
	if (strncmp(rel, "manifest/", 9) == 0 || manifest_parse_obj_key(rel, &kind, &id, &epoch) != 0)
		return 0;
	int idx = kind == MANIFEST_GEN ? manifest_find_gen(l->m, id) : manifest_find_run(l->m, id);
	if (idx < 0) {
		fprintf(stderr, "  leaked: %s\n", key);
		l->leaked++;
	}
	return 0;
}

static int
no_leaks(const char *dir)
{
	struct manifest m;
	if (load_manifest(dir, &m) != 0)
		return 0;
	char root[512];
	snprintf(root, sizeof(root), "%s/objects", dir);
	struct objstore *os = NULL;
	struct leak_ctx l = {&m, 0};
	int rc = objstore_fs_new(root, &os);
	if (rc == 0)
		rc = objstore_list(os, SHARD0, leak_cb, &l);
	objstore_destroy(os);
	manifest_destroy(&m);
	return rc == 0 && l.leaked == 0;
}

TEST(compactor_merges_next_to_a_live_writer)
{
	char *dir = tdir();
	strata *db = open_with_gens(dir, 4);
	REQUIRE(db != NULL);
	uint64_t epoch = stats_of(db).writer_epoch;
	struct compactor *c = NULL;
	struct compactor_options co = copts_for(dir);
	REQUIRE_EQ(compactor_open(&co, &c), 0);
	struct compactor_pass r;
	REQUIRE_EQ(compactor_run(c, &r), 0);
	CHECK_EQ(r.merged, 4);
	CHECK_EQ(r.lost, 0);
	CHECK_EQ(r.epoch, epoch);
	CHECK(r.runs == 1 && r.generations == 0);
	/* The writer keeps serving, keeps its epoch, and follows the commit at its next seal. */
	REQUIRE_EQ(put_range(db, "k", 4 * ROWS_PER_GEN, 5 * ROWS_PER_GEN, "a", 16), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	strata_stats st = stats_of(db);
	CHECK_EQ(st.writer_epoch, epoch);
	CHECK(st.foreign_manifest_versions >= 1);
	CHECK_EQ(st.generations, 1);
	CHECK_EQ(st.base_runs, 1);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK(scan_ok(db, 5 * ROWS_PER_GEN));
	CHECK_EQ(range_misses(db, "k", 0, 5 * ROWS_PER_GEN, "a"), 0);
	/* A second pass folds the writer's new generation too. */
	REQUIRE_EQ(compactor_run(c, &r), 0);
	CHECK_EQ(r.merged, 1);
	CHECK_EQ(put_range(db, "z", 0, 10, "a", 16), 0);
	CHECK_EQ(strata_merge(db, 0, 0, NULL), 0);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK(scan_ok(db, 5 * ROWS_PER_GEN + 10));
	compactor_close(c);
	db_close(db);
	/* The merged generations went with the writer's view or go at the next open. */
	strata_options o = opts_for(dir);
	o.shards = 0;
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK(scan_ok(db, 5 * ROWS_PER_GEN + 10));
	db_close(db);
	CHECK(no_leaks(dir));
	CHECK_EQ(count_objects(dir, "gen/"), 0);
}

TEST(node_and_compactor_commit_the_same_inputs)
{
	char *dir = tdir();
	strata *db = open_with_gens(dir, 3);
	REQUIRE(db != NULL);
	struct ext e;
	REQUIRE_EQ(ext_open(dir, &e), 0);
	for (int round = 0; round < 2; round++) {
		/* Both plan the same oldest generations. */
		strata_plan *np = NULL;
		struct shard_plan *cp = NULL;
		REQUIRE_EQ(shard_refresh(e.s), 0);
		REQUIRE_EQ(shard_prepare_merge(e.s, 0, &cp), 0);
		REQUIRE_EQ(strata_prepare_merge(db, 0, 0, &np), 0);
		uint32_t nin = strata_plan_generations(np);
		CHECK_EQ(nin, shard_plan_inputs(cp));
		REQUIRE(nin == 3);
		int node_rc, ext_rc;
		if (round == 0) {
			ext_rc = shard_commit(e.s, cp);
			node_rc = strata_commit_merge(db, np);
		} else {
			node_rc = strata_commit_merge(db, np);
			ext_rc = shard_commit(e.s, cp);
		}
		/* Exactly one wins; the other backs off with a conflict. */
		CHECK((node_rc == 0) + (ext_rc == 0) == 1);
		CHECK(node_rc == 0 || node_rc == STRATA_ECONFLICT);
		CHECK(ext_rc == 0 || ext_rc == STRATA_ECONFLICT);
		CHECK_EQ(round == 0 ? ext_rc : node_rc, 0);
		/* The writer is not fenced, its view follows the manifest, nothing is lost. */
		CHECK_EQ(strata_check(db, 0), 0);
		CHECK(scan_ok(db, (size_t)(3 + round * 3) * ROWS_PER_GEN));
		CHECK_EQ(range_misses(db, "k", 0, (3 + round * 3) * ROWS_PER_GEN, "a"), 0);
		strata_stats st = stats_of(db);
		CHECK_EQ(st.generations, 0);
		CHECK_EQ(st.base_runs, (uint64_t)round + 1);
		CHECK_EQ(st.merge_conflicts, 1); /* round 0's, counted once */
		for (int g = 3; g < 6; g++) {
			int from = (3 * (round + 1) + g - 3) * ROWS_PER_GEN;
			REQUIRE_EQ(put_range(db, "k", from, from + ROWS_PER_GEN, "a", 16), 0);
			REQUIRE_EQ(strata_seal(db, 0), 0);
		}
	}
	ext_close(&e);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK(scan_ok(db, 9 * ROWS_PER_GEN));
	db_close(db);
	strata_options o = opts_for(dir);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK(scan_ok(db, 9 * ROWS_PER_GEN));
	db_close(db);
	CHECK(no_leaks(dir));
}

TEST(compactor_commit_after_a_new_owner_is_dropped)
{
	char *dir = tdir();
	strata *db = open_with_gens(dir, 3);
	REQUIRE(db != NULL);
	struct ext e;
	REQUIRE_EQ(ext_open(dir, &e), 0);
	struct shard_plan *cp = NULL;
	REQUIRE_EQ(shard_prepare_merge(e.s, 0, &cp), 0);
	/* The node restarts: a new epoch, and its open collects the compactor's run. */
	uint64_t epoch = stats_of(db).writer_epoch;
	db_close(db);
	strata_options o = opts_for(dir);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(stats_of(db).writer_epoch, epoch + 1);
	CHECK_EQ(shard_commit(e.s, cp), STRATA_EFENCED);
	/* The compactor is not terminal: it adopts the new epoch and merges. */
	REQUIRE_EQ(shard_refresh(e.s), 0);
	REQUIRE_EQ(shard_prepare_merge(e.s, 0, &cp), 0);
	CHECK_EQ(shard_plan_inputs(cp), 3);
	CHECK_EQ(shard_commit(e.s, cp), 0);
	ext_close(&e);
	CHECK_EQ(put_range(db, "k", 3 * ROWS_PER_GEN, 4 * ROWS_PER_GEN, "a", 16), 0);
	CHECK_EQ(strata_seal(db, 0), 0);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK_EQ(stats_of(db).writer_epoch, epoch + 1);
	CHECK(scan_ok(db, 4 * ROWS_PER_GEN));
	db_close(db);
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK(scan_ok(db, 4 * ROWS_PER_GEN));
	db_close(db);
	CHECK(no_leaks(dir));
}

TEST(compactor_refuses_what_it_cannot_use)
{
	char *dir = tdir();
	struct compactor *c = NULL;
	struct compactor_options co = copts_for(dir);
	CHECK_EQ(compactor_open(&co, &c), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "objects") != NULL);
	strata *db = open_with_gens(dir, 0);
	REQUIRE(db != NULL);
	db_close(db);
	co.shard = 3;
	CHECK_EQ(compactor_open(&co, &c), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "no manifest") != NULL);
	co.shard = 0;
	co.base_max_runs = 1;
	CHECK_EQ(compactor_open(&co, &c), STRATA_EINVAL);
	co.base_max_runs = 0;
	co.merge_max_inputs = 1;
	CHECK_EQ(compactor_open(&co, &c), STRATA_EINVAL);
}

/** memcmp's sign, then the shorter key first: key_cmp's reference. */
static int
key_cmp_reference(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	for (size_t i = 0; i < al && i < bl; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return al < bl ? -1 : al > bl;
}

/* The merge's key order decides its first 8 bytes as one word: it must be byte order
 * (unsigned, most significant first) for every length, and fall back to the bytes
 * after a shared first word. Keys of 0..20 bytes drawn so that most share a prefix
 * of some length, with bytes on both sides of 0x80. */
TEST(merge_key_order_is_unsigned_byte_order_then_length)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	static const uint8_t alphabet[] = { 0x00, 0x01, 0x7f, 0x80, 0x81, 0xfe, 0xff, 'a', 'b' };
	int mismatches = 0, decided_in_word = 0, decided_after = 0;

	for (int n = 0; n < 200000; n++) {
		uint8_t a[20], b[20];
		size_t al = xorshift(&seed) % 21, bl = xorshift(&seed) % 21;
		size_t shared = xorshift(&seed) % 21;

		for (size_t i = 0; i < sizeof(a); i++) {
			a[i] = alphabet[xorshift(&seed) % sizeof(alphabet)];
			b[i] = i < shared ? a[i] : alphabet[xorshift(&seed) % sizeof(alphabet)];
		}
		int want = key_cmp_reference(a, al, b, bl);
		int got = key_cmp(a, al, b, bl);
		if ((got > 0) - (got < 0) != want && mismatches++ < 5)
			fprintf(stderr, "  keys of %zu and %zu bytes sharing %zu: got %d, want %d\n",
				al, bl, shared, got, want);
		if (al >= 8 && bl >= 8 && want != 0)
			*(memcmp(a, b, 8) != 0 ? &decided_in_word : &decided_after) += 1;
	}
	CHECK_EQ(mismatches, 0);
	/* Both sides of the word were exercised. */
	CHECK(decided_in_word > 1000);
	CHECK(decided_after > 1000);
}

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
	(void)xorshift;
	T(compactor_merges_next_to_a_live_writer);
	T(node_and_compactor_commit_the_same_inputs);
	T(compactor_commit_after_a_new_owner_is_dropped);
	T(compactor_refuses_what_it_cannot_use);
	T(merge_key_order_is_unsigned_byte_order_then_length);
	return HARNESS_END("test_compact");
}
