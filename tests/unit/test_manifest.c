/* test_manifest.c — manifest codec, edits and the versioned CAS protocol (node/core/manifest.c). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "../../node/core/manifest.h"
#include "../../node/lib/crc.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"

#ifndef TEST
#define TEST(name) static void name(void)
#endif

/** Shard prefix used throughout. */
#define PFX "shard-0007/"

/** A store in a fresh temp dir. */
struct fixture {
	/** The temp dir. */
	char *dir;
	/** The store rooted at dir. */
	struct objstore *os;
};

static int
fx_open(struct fixture *fx)
{
	fx->dir = harness_tmpdir("manifest");
	if (fx->dir == NULL)
		return -1;
	return objstore_fs_new(fx->dir, &fx->os);
}

static void
fx_close(struct fixture *fx)
{
	env_reset();
	objstore_destroy(fx->os);
	if (fx->dir) {
		harness_rmrf(fx->dir);
		free(fx->dir);
	}
}

static struct manifest_obj
obj(uint64_t id, uint64_t epoch)
{
	return (struct manifest_obj){.id = id, .epoch = epoch, .bytes = id * 1000 + 7, .rows = id * 3,
				     .min_seq = id * 100, .max_seq = id * 100 + 99};
}

/** A manifest with 3 generations and 2 runs. */
static void
sample(struct manifest *m)
{
	memset(m, 0, sizeof(*m));
	m->version = 42;
	m->writer_epoch = 5;
	m->replay_after = 123456789012ull;
	m->next_generation = 20;
	struct manifest_obj g[] = {obj(11, 5), obj(12, 5), obj(19, 4)};
	struct manifest_obj r[] = {obj(3, 1), obj(7, 2)};
	for (int i = 0; i < 3; i++)
		manifest_add_gen(m, &g[i]);
	for (int i = 0; i < 2; i++)
		manifest_add_run(m, &r[i]);
}

static int
same(const struct manifest *a, const struct manifest *b)
{
	if (a->version != b->version || a->writer_epoch != b->writer_epoch ||
	    a->replay_after != b->replay_after || a->next_generation != b->next_generation ||
	    a->ngens != b->ngens || a->nruns != b->nruns)
		return 0;
	if (a->ngens && memcmp(a->gens, b->gens, a->ngens * sizeof(*a->gens)) != 0)
		return 0;
	if (a->nruns && memcmp(a->runs, b->runs, a->nruns * sizeof(*a->runs)) != 0)
		return 0;
	return 1;
}

/** Recompute the trailing crc of an encoded manifest after patching it. */
static void
reseal(struct buf *b)
{
	enc_u32(b->data + b->len - 4, crc32c(0, b->data, b->len - 4));
}

TEST(encode_decode_round_trip)
{
	struct manifest m, d;
	sample(&m);
	struct buf b = {0};
	REQUIRE_EQ(manifest_encode(&m, &b), 0);
	CHECK_EQ(b.len, 8 + 4 + 32 + 4 + 3 * 48 + 4 + 2 * 48 + 4);
	CHECK(memcmp(b.data, "STRMANIF", 8) == 0);
	REQUIRE_EQ(manifest_decode(b.data, b.len, "sample", &d), 0);
	CHECK(same(&m, &d));
	manifest_destroy(&d);

	struct manifest empty = {.version = 0, .next_generation = 1};
	buf_reset(&b);
	REQUIRE_EQ(manifest_encode(&empty, &b), 0);
	REQUIRE_EQ(manifest_decode(b.data, b.len, "empty", &d), 0);
	CHECK(same(&empty, &d));
	CHECK(d.gens == NULL && d.runs == NULL);
	manifest_destroy(&d);

	struct manifest c;
	REQUIRE_EQ(manifest_copy(&c, &m), 0);
	CHECK(same(&c, &m));
	CHECK(c.gens != m.gens && c.runs != m.runs);
	manifest_destroy(&c);
	CHECK(c.gens == NULL && c.ngens == 0);
	manifest_destroy(&m);
	buf_destroy(&b);
}

TEST(every_byte_flip_and_truncation_is_rejected)
{
	struct manifest m, d;
	sample(&m);
	struct buf b = {0};
	REQUIRE_EQ(manifest_encode(&m, &b), 0);
	manifest_destroy(&m);
	static const uint8_t masks[] = {0x01, 0x10, 0x80, 0xff};
	int bad = 0;
	for (size_t i = 0; i < b.len; i++) {
		for (size_t k = 0; k < sizeof(masks); k++) {
			b.data[i] ^= masks[k];
			diag_clear();
			int rc = manifest_decode(b.data, b.len, "flipped-obj", &d);
			if (rc != STRATA_ECORRUPT && rc != STRATA_EVERSION) {
				if (bad++ < 5)
					fprintf(stderr, "  flip at %zu mask %02x: rc %d\n", i, masks[k], rc);
				if (rc == 0)
					manifest_destroy(&d);
			} else if (strstr(diag_last(), "flipped-obj") == NULL) {
				bad++;
			}
			b.data[i] ^= masks[k];
		}
	}
	for (size_t n = 0; n < b.len; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, b.data, n);
		int rc = manifest_decode(copy, n, "truncated-obj", &d);
		free(copy);
		if (rc != STRATA_ECORRUPT) {
			if (bad++ < 5)
				fprintf(stderr, "  truncation to %zu: rc %d\n", n, rc);
			if (rc == 0)
				manifest_destroy(&d);
		}
	}
	CHECK_EQ(bad, 0);
	/* The untouched buffer still decodes. */
	CHECK_EQ(manifest_decode(b.data, b.len, "ok", &d), 0);
	manifest_destroy(&d);
	buf_destroy(&b);
}

TEST(checksummed_but_inconsistent_content_is_rejected)
{
	struct manifest m, d;
	sample(&m);
	struct buf b = {0};
	REQUIRE_EQ(manifest_encode(&m, &b), 0);
	/* offsets: magic 0, format 8, version 12, epoch 20, replay 28, next_gen 36,
	 * ngens 44, gens 48.., nruns 48+3*48=192, runs 196.. */
	struct buf t = {0};

	buf_append(&t, b.data, b.len);
	enc_u32(t.data + 8, 5);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "newer", &d), STRATA_EVERSION);
	CHECK(strstr(diag_last(), "newer") != NULL);

	buf_reset(&t);
	buf_append(&t, b.data, b.len);
	enc_u32(t.data + 8, 0);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "fmt0", &d), STRATA_ECORRUPT);

	buf_reset(&t);
	buf_append(&t, b.data, b.len);
	enc_u64(t.data + 36, 19);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "idrange", &d), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), "idrange") != NULL && strstr(diag_last(), "19") != NULL);

	buf_reset(&t);
	buf_append(&t, b.data, b.len);
	enc_u64(t.data + 48 + 48, 11);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "dupgen", &d), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), "twice") != NULL);

	buf_reset(&t);
	buf_append(&t, b.data, b.len);
	enc_u64(t.data + 196, 12);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "dup-gen-run", &d), STRATA_ECORRUPT);

	buf_reset(&t);
	buf_append(&t, b.data, b.len);
	enc_u32(t.data + 44, 0xffffffffu);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "hugecount", &d), STRATA_ECORRUPT);

	buf_reset(&t);
	buf_append(&t, b.data, b.len);
	enc_u32(t.data + 44, 4);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "count+1", &d), STRATA_ECORRUPT);

	buf_reset(&t);
	buf_append(&t, b.data, b.len - 4);
	buf_put_u64(&t, 0);
	buf_put_u32(&t, 0);
	reseal(&t);
	CHECK_EQ(manifest_decode(t.data, t.len, "trailing", &d), STRATA_ECORRUPT);

	/* encode refuses what decode would refuse. */
	m.next_generation = 19;
	buf_reset(&t);
	CHECK_EQ(manifest_encode(&m, &t), STRATA_EINVAL);
	CHECK_EQ(t.len, 0);
	manifest_destroy(&m);
	buf_destroy(&t);
	buf_destroy(&b);
}

TEST(obj_keys_round_trip_and_bad_ones_are_refused)
{
	char key[256];
	struct manifest_obj o = obj(0x1234abcd, 0x2a);
	manifest_obj_key(key, sizeof(key), PFX, MANIFEST_GEN, &o);
	CHECK_EQ(strcmp(key, PFX "gen/000000001234abcd-0000002a.sst"), 0);
	int kind = -1;
	uint64_t id = 0, epoch = 0;
	CHECK_EQ(manifest_parse_obj_key(key, &kind, &id, &epoch), 0);
	CHECK(kind == MANIFEST_GEN && id == 0x1234abcd && epoch == 0x2a);
	manifest_obj_key(key, sizeof(key), "", MANIFEST_RUN, &o);
	CHECK_EQ(strcmp(key, "run/000000001234abcd-0000002a.sst"), 0);
	CHECK_EQ(manifest_parse_obj_key(key, &kind, &id, &epoch), 0);
	CHECK(kind == MANIFEST_RUN && id == 0x1234abcd && epoch == 0x2a);
	o.epoch = 0x123456789ull;
	manifest_obj_key(key, sizeof(key), PFX, MANIFEST_RUN, &o);
	CHECK_EQ(manifest_parse_obj_key(key, &kind, &id, &epoch), 0);
	CHECK(epoch == 0x123456789ull);
	CHECK_EQ(manifest_parse_obj_key(key + strlen(PFX), &kind, &id, &epoch), 0);
	const char *bad[] = {
		"gen/000000001234abcd-0000002a",       "gen/000000001234abcd0000002a.sst",
		"xgen/000000001234abcd-0000002a.sst", "gen/000000001234ABCD-0000002a.sst",
		"gen/1234abcd-0000002a.sst",          "gen/000000001234abcd-2a.sst",
		"gen/000000001234abcd-0000002a.sstx", "manifest/00000000000000000001",
		"000000001234abcd-0000002a.sst",      "gen/00000000001234abcd-0000002a.sst",
		"gen/000000001234abcd-00000002a.sst", "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = manifest_parse_obj_key(bad[i], &kind, &id, &epoch);
		if (rc != STRATA_EINVAL)
			fprintf(stderr, "  accepted '%s'\n", bad[i]);
		CHECK_EQ(rc, STRATA_EINVAL);
	}
	manifest_version_key(key, sizeof(key), PFX, 17);
	CHECK_EQ(strcmp(key, PFX "manifest/00000000000000000017"), 0);
}

TEST(remove_gens_is_all_or_nothing)
{
	struct manifest m;
	sample(&m);
	uint64_t ids[] = {11, 99};
	CHECK_EQ(manifest_remove_gens(&m, ids, 2), STRATA_ECONFLICT);
	CHECK_EQ(m.ngens, 3);
	CHECK(manifest_find_gen(&m, 11) == 0 && manifest_find_gen(&m, 12) == 1);
	uint64_t twice[] = {12, 12};
	CHECK(manifest_remove_gens(&m, twice, 2) < 0);
	CHECK_EQ(m.ngens, 3);
	/* A run id is not a generation id. */
	uint64_t run_id[] = {3};
	CHECK_EQ(manifest_remove_gens(&m, run_id, 1), STRATA_ECONFLICT);
	CHECK_EQ(m.ngens, 3);
	uint64_t two[] = {19, 11};
	CHECK_EQ(manifest_remove_gens(&m, two, 2), 0);
	CHECK_EQ(m.ngens, 1);
	CHECK_EQ(m.gens[0].id, 12);
	CHECK_EQ(manifest_find_gen(&m, 11), -1);
	CHECK_EQ(manifest_remove_gens(&m, NULL, 0), 0);
	CHECK_EQ(m.ngens, 1);
	uint64_t runs[] = {7};
	CHECK_EQ(manifest_remove_runs(&m, runs, 1), 0);
	CHECK(m.nruns == 1 && m.runs[0].id == 3);
	CHECK_EQ(manifest_remove_runs(&m, runs, 1), STRATA_ECONFLICT);
	struct manifest_obj dup = obj(3, 1);
	CHECK_EQ(manifest_add_gen(&m, &dup), STRATA_EINVAL);
	manifest_destroy(&m);
}

TEST(load_picks_highest_version_and_ignores_other_names)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest m;
	CHECK_EQ(manifest_load(fx.os, PFX, &m), STRATA_NOTFOUND);
	char key[256];
	struct buf b = {0};
	uint64_t versions[] = {3, 10, 9, 2};
	for (int i = 0; i < 4; i++) {
		struct manifest v = {.version = versions[i], .writer_epoch = versions[i] * 10,
				     .next_generation = 1};
		buf_reset(&b);
		REQUIRE_EQ(manifest_encode(&v, &b), 0);
		manifest_version_key(key, sizeof(key), PFX, versions[i]);
		REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
	}
	CHECK_EQ(objstore_put(fx.os, PFX "manifest/junk", "x", 1), 0);
	CHECK_EQ(objstore_put(fx.os, PFX "manifest/99", "x", 1), 0);
	CHECK_EQ(objstore_put(fx.os, PFX "manifest/000000000000000000099", "x", 1), 0);
	CHECK_EQ(objstore_put(fx.os, "shard-0008/manifest/00000000000000000050", "x", 1), 0);
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK_EQ(m.version, 10);
	CHECK_EQ(m.writer_epoch, 100);
	manifest_destroy(&m);
	buf_destroy(&b);
	fx_close(&fx);
}

TEST(corrupt_highest_version_fails_load_naming_object)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest m;
	for (int i = 0; i < 3; i++) {
		REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &m), 0);
		manifest_destroy(&m);
	}
	struct buf b = {0};
	REQUIRE_EQ(objstore_get(fx.os, PFX "manifest/00000000000000000003", &b), 0);
	b.data[b.len / 2] ^= 0x40;
	REQUIRE_EQ(objstore_put(fx.os, PFX "manifest/00000000000000000003", b.data, b.len), 0);
	diag_clear();
	CHECK_EQ(manifest_load(fx.os, PFX, &m), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), PFX "manifest/00000000000000000003") != NULL);
	CHECK_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &m), STRATA_ECORRUPT);

	/* A valid encoding stored under the wrong version's name is corrupt too. */
	buf_reset(&b);
	REQUIRE_EQ(objstore_get(fx.os, PFX "manifest/00000000000000000002", &b), 0);
	REQUIRE_EQ(objstore_put(fx.os, PFX "manifest/00000000000000000004", b.data, b.len), 0);
	diag_clear();
	CHECK_EQ(manifest_load(fx.os, PFX, &m), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), PFX "manifest/00000000000000000004") != NULL);
	buf_destroy(&b);
	fx_close(&fx);
}

TEST(claim_epoch_bumps_epoch_each_time)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest m;
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &m), 0);
	CHECK(m.version == 1 && m.writer_epoch == 1 && m.next_generation == 1);
	CHECK(m.ngens == 0 && m.nruns == 0);
	manifest_destroy(&m);
	for (uint64_t i = 2; i <= 5; i++) {
		REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &m), 0);
		CHECK_EQ(m.version, i);
		CHECK_EQ(m.writer_epoch, i);
		manifest_destroy(&m);
	}
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(m.version == 5 && m.writer_epoch == 5);
	manifest_destroy(&m);
	/* Another shard's prefix is independent. */
	REQUIRE_EQ(manifest_claim_epoch(fx.os, "shard-0001/", NULL, &m), 0);
	CHECK(m.version == 1 && m.writer_epoch == 1);
	manifest_destroy(&m);
	fx_close(&fx);
}

/** State of concurrent claimers. */
struct claimers {
	/** The store. */
	struct objstore *os;
	/** Released together. */
	pthread_barrier_t go;
	/** Result per thread. */
	int rc[6];
	/** Epoch each thread claimed. */
	uint64_t epoch[6];
};

/** Argument of one claimer. */
struct claimer {
	/** Shared state. */
	struct claimers *c;
	/** Thread index. */
	int i;
};

static void *
claimer_main(void *arg)
{
	struct claimer *me = arg;
	struct manifest m;
	pthread_barrier_wait(&me->c->go);
	me->c->rc[me->i] = manifest_claim_epoch(me->c->os, PFX, NULL, &m);
	if (me->c->rc[me->i] == 0) {
		me->c->epoch[me->i] = m.writer_epoch;
		manifest_destroy(&m);
	}
	return NULL;
}

TEST(concurrent_claims_get_distinct_epochs)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct claimers c = {.os = fx.os};
	struct claimer me[6];
	pthread_t t[6];
	pthread_barrier_init(&c.go, NULL, 6);
	for (int i = 0; i < 6; i++) {
		me[i] = (struct claimer){.c = &c, .i = i};
		pthread_create(&t[i], NULL, claimer_main, &me[i]);
	}
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&c.go);
	int seen[7] = {0};
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(c.rc[i], 0);
		if (c.epoch[i] >= 1 && c.epoch[i] <= 6)
			seen[c.epoch[i]]++;
	}
	for (int e = 1; e <= 6; e++)
		CHECK_EQ(seen[e], 1);
	struct manifest m;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(m.version == 6 && m.writer_epoch == 6);
	manifest_destroy(&m);
	fx_close(&fx);
}

/** A mutation that adds one generation with a fresh id and counts its calls. */
struct add_gen_ctx {
	/** Times called. */
	int calls;
	/** Epoch recorded in the generation. */
	uint64_t epoch;
	/** Id the last call allocated. */
	uint64_t id;
	/** Return this instead of mutating, when nonzero. */
	int fail;
};

static int
add_gen_mutate(void *arg, struct manifest *next)
{
	struct add_gen_ctx *c = arg;
	c->calls++;
	if (c->fail)
		return c->fail;
	struct manifest_obj o = obj(next->next_generation, c->epoch);
	c->id = o.id;
	next->next_generation++;
	next->replay_after += 10;
	return manifest_add_gen(next, &o);
}

TEST(commit_update_by_older_epoch_after_claim_is_fenced)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest old, cur;
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &old), 0);
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &cur), 0);
	REQUIRE_EQ(cur.writer_epoch, 2);
	struct add_gen_ctx ctx = {.epoch = 1};

	/* The old owner, still holding v1: its put of v2 loses, the reload shows epoch 2. */
	diag_clear();
	CHECK_EQ(manifest_commit_update(fx.os, PFX, NULL, 1, &old, add_gen_mutate, &ctx), STRATA_EFENCED);
	CHECK(strstr(diag_last(), PFX) != NULL);
	CHECK(strstr(diag_last(), "epoch 2") != NULL && strstr(diag_last(), "ours is 1") != NULL);
	CHECK_EQ(ctx.calls, 1);
	CHECK(old.version == 2 && old.writer_epoch == 2);
	/* Holding the fresh manifest, it is fenced before mutating. */
	ctx.calls = 0;
	CHECK_EQ(manifest_commit_update(fx.os, PFX, NULL, 1, &old, add_gen_mutate, &ctx), STRATA_EFENCED);
	CHECK_EQ(ctx.calls, 0);
	struct manifest m;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(m.version == 2 && m.ngens == 0);
	manifest_destroy(&m);

	/* The current owner commits. */
	ctx = (struct add_gen_ctx){.epoch = 2};
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, NULL, 2, &cur, add_gen_mutate, &ctx), 0);
	REQUIRE(cur.version == 3 && cur.writer_epoch == 2 && cur.ngens == 1);
	CHECK(cur.gens[0].id == 1 && cur.next_generation == 2);
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(same(&m, &cur));
	manifest_destroy(&m);

	/* A stored epoch older than ours is not fenced; the stored epoch is kept. */
	ctx.calls = 0;
	CHECK_EQ(manifest_commit_update(fx.os, PFX, NULL, 9, &cur, add_gen_mutate, &ctx), 0);
	CHECK(cur.version == 4 && cur.writer_epoch == 2 && ctx.calls == 1);
	manifest_destroy(&old);
	manifest_destroy(&cur);
	fx_close(&fx);
}

TEST(lost_race_is_retried_on_fresh_copy)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest a, b;
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &a), 0);
	REQUIRE_EQ(manifest_copy(&b, &a), 0);
	/* Another writer with the same epoch (e.g. a seal) commits v2 first. */
	struct add_gen_ctx other = {.epoch = 1};
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, NULL, 1, &b, add_gen_mutate, &other), 0);
	REQUIRE_EQ(b.version, 2);
	/* Our update, based on v1, loses the put of v2, reloads v2 and re-applies. */
	struct add_gen_ctx ours = {.epoch = 1};
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, NULL, 1, &a, add_gen_mutate, &ours), 0);
	CHECK_EQ(ours.calls, 2);
	CHECK_EQ(a.version, 3);
	CHECK_EQ(a.ngens, 2);
	CHECK(manifest_find_gen(&a, other.id) == 0 && manifest_find_gen(&a, ours.id) == 1);
	CHECK(other.id != ours.id);
	CHECK_EQ(a.next_generation, 3);
	CHECK_EQ(a.replay_after, 20);
	struct manifest m;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(same(&m, &a));
	manifest_destroy(&m);
	manifest_destroy(&a);
	manifest_destroy(&b);
	fx_close(&fx);
}

TEST(failed_mutation_writes_nothing)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest a;
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, NULL, &a), 0);
	struct add_gen_ctx ctx = {.epoch = 1, .fail = STRATA_ECONFLICT};
	CHECK_EQ(manifest_commit_update(fx.os, PFX, NULL, 1, &a, add_gen_mutate, &ctx), STRATA_ECONFLICT);
	CHECK_EQ(a.version, 1);
	struct manifest m;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK_EQ(m.version, 1);
	manifest_destroy(&m);
	manifest_destroy(&a);
	fx_close(&fx);
}

/** Collects listed keys, joined by ';'. */
static int
join_cb(void *ctx, const char *key, uint64_t size)
{
	char *s = ctx;
	strcat(s, key + strlen(PFX "manifest/"));
	strcat(s, ";");
	return 0;
}

TEST(gc_keeps_the_snapshot_and_keep_positions_behind_current)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest m;
	struct manifest_opts never = {.snapshot_edits = 1000000, .snapshot_bytes = 1ull << 40};
	for (int i = 0; i < 10; i++) {
		REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, &never, &m), 0);
		manifest_destroy(&m);
	}
	CHECK_EQ(objstore_put(fx.os, PFX "manifest/junk", "x", 1), 0);
	/* No snapshot yet: collecting puts one of the state it is given first. */
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK_EQ(m.version, 10);
	CHECK_EQ(m.snap_version, 0);
	CHECK_EQ(manifest_gc(fx.os, PFX, &m, 3), 0);
	char s[1024] = "";
	CHECK_EQ(objstore_list(fx.os, PFX "manifest/", join_cb, s), 0);
	CHECK_EQ(strcmp(s, "00000000000000000007;00000000000000000008;00000000000000000009;"
			   "00000000000000000010;junk;snap/00000000000000000010;"),
		 0);
	manifest_destroy(&m);
	/* Two more positions: the snapshot stays the floor; nothing above it goes. */
	for (int i = 0; i < 2; i++) {
		REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, &never, &m), 0);
		manifest_destroy(&m);
	}
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK_EQ(m.version, 12);
	CHECK_EQ(m.snap_version, 10);
	CHECK_EQ(m.snap_edits, 2);
	CHECK_EQ(m.writer_epoch, 12);
	CHECK_EQ(manifest_gc(fx.os, PFX, &m, 0), 0);
	s[0] = '\0';
	CHECK_EQ(objstore_list(fx.os, PFX "manifest/", join_cb, s), 0);
	CHECK_EQ(strcmp(s, "00000000000000000010;00000000000000000011;00000000000000000012;junk;"
			   "snap/00000000000000000010;"),
		 0);
	manifest_destroy(&m);
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK_EQ(m.version, 12);
	manifest_destroy(&m);
	fx_close(&fx);
}

/* ---------------------------------------------------------------- the log */

/** Decode every 1-byte flip (4 masks) and every truncation of an encoded object with
 *  dec; each must fail with ECORRUPT/EVERSION naming `name`. Returns the failures. */
static int
flips_and_truncations(const struct buf *b, int (*dec)(const void *, size_t, const char *, void *),
		      void (*drop)(void *), void *out)
{
	static const uint8_t masks[] = {0x01, 0x10, 0x80, 0xff};
	int bad = 0;
	uint8_t *p = malloc(b->len);
	memcpy(p, b->data, b->len);
	for (size_t i = 0; i < b->len; i++) {
		for (size_t k = 0; k < sizeof(masks); k++) {
			p[i] ^= masks[k];
			diag_clear();
			int rc = dec(p, b->len, "flipped-entry", out);
			if (rc != STRATA_ECORRUPT && rc != STRATA_EVERSION) {
				if (bad++ < 5)
					fprintf(stderr, "  flip at %zu mask %02x: rc %d\n", i, masks[k], rc);
				if (rc == 0)
					drop(out);
			} else if (strstr(diag_last(), "flipped-entry") == NULL) {
				bad++;
			}
			p[i] ^= masks[k];
		}
	}
	for (size_t n = 0; n < b->len; n++) {
		int rc = dec(p, n, "truncated-entry", out);
		if (rc != STRATA_ECORRUPT) {
			if (bad++ < 5)
				fprintf(stderr, "  truncation to %zu: rc %d\n", n, rc);
			if (rc == 0)
				drop(out);
		}
	}
	free(p);
	return bad;
}

static int
dec_edit(const void *p, size_t n, const char *name, void *out)
{
	return manifest_edit_decode(p, n, name, out);
}

static void
drop_edit(void *e)
{
	manifest_edit_destroy(e);
}

static int
dec_manifest(const void *p, size_t n, const char *name, void *out)
{
	return manifest_decode(p, n, name, out);
}

static void
drop_manifest(void *m)
{
	manifest_destroy(m);
}

/** sample() after a merge-like change: generation 12 out, generation 21 and run 20 in. */
static void
sample_next(struct manifest *next)
{
	sample(next);
	next->version = 43;
	next->next_generation = 22;
	next->replay_after += 5;
	uint64_t out[] = {12};
	manifest_remove_gens(next, out, 1);
	struct manifest_obj r = obj(20, 5), g = obj(21, 5);
	manifest_add_run(next, &r);
	manifest_add_gen(next, &g);
}

/** sample() with its two runs followed by a sorted run of three parts (ids 13..15). */
static void
sample_grouped(struct manifest *m)
{
	sample(m);
	for (uint64_t id = 13; id <= 15; id++) {
		struct manifest_obj r = obj(id, 5);
		r.group = 13;
		manifest_add_run(m, &r);
	}
}

TEST(grouped_runs_round_trip_in_the_grouped_formats_and_ungrouped_ones_as_before)
{
	struct manifest m, d;
	sample(&m);
	struct buf b = {0};
	/* No group: formats 1 and 2, byte for byte what builds without groups write. */
	REQUIRE_EQ(manifest_encode(&m, &b), 0);
	CHECK_EQ(dec_u32(b.data + 8), 1);
	CHECK_EQ(b.len, 8 + 4 + 32 + 4 + 3 * 48 + 4 + 2 * 48 + 4);
	buf_reset(&b);
	REQUIRE_EQ(manifest_encode_snapshot(&m, &b), 0);
	CHECK_EQ(dec_u32(b.data + 8), 2);
	manifest_destroy(&m);

	sample_grouped(&m);
	CHECK_EQ(manifest_sorted_runs(&m, m.nruns), 3);
	CHECK_EQ(manifest_sorted_runs(&m, 3), 3);
	CHECK_EQ(manifest_sorted_runs(&m, 2), 2);
	buf_reset(&b);
	REQUIRE_EQ(manifest_encode(&m, &b), 0);
	CHECK_EQ(dec_u32(b.data + 8), 3);
	CHECK_EQ(b.len, 8 + 4 + 32 + 4 + 3 * 56 + 4 + 5 * 56 + 4);
	REQUIRE_EQ(manifest_decode(b.data, b.len, "grouped", &d), 0);
	CHECK(same(&m, &d));
	CHECK_EQ(d.runs[3].group, 13);
	manifest_destroy(&d);
	CHECK_EQ(flips_and_truncations(&b, dec_manifest, drop_manifest, &d), 0);
	buf_reset(&b);
	REQUIRE_EQ(manifest_encode_snapshot(&m, &b), 0);
	CHECK_EQ(dec_u32(b.data + 8), 4);
	REQUIRE_EQ(manifest_decode(b.data, b.len, "grouped-snap", &d), 0);
	CHECK(same(&m, &d));
	manifest_destroy(&d);

	/* A group that does not start at its first part is corrupt, naming the object. */
	buf_reset(&b);
	struct manifest bad;
	REQUIRE_EQ(manifest_copy(&bad, &m), 0);
	bad.runs[2].group = 14; /* the first part now names the second */
	CHECK_EQ(manifest_encode(&bad, &b), STRATA_EINVAL);
	bad.runs[2].group = 13;
	bad.gens[0].group = 13; /* a generation is never grouped */
	CHECK_EQ(manifest_encode(&bad, &b), STRATA_EINVAL);
	manifest_destroy(&bad);
	REQUIRE_EQ(manifest_encode(&m, &b), 0);
	/* runs start at 48 + 3*56 + 4; run 3 (id 14) group at +3*56 + 48 */
	enc_u64(b.data + 48 + 3 * 56 + 4 + 3 * 56 + 48, 14);
	reseal(&b);
	CHECK_EQ(manifest_decode(b.data, b.len, "badgroup", &d), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), "badgroup") != NULL && strstr(diag_last(), "group") != NULL);

	/* Parts go only together. */
	uint64_t part[] = {14};
	CHECK_EQ(manifest_remove_runs(&m, part, 1), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "13") != NULL);
	uint64_t first[] = {3, 13};
	CHECK_EQ(manifest_remove_runs(&m, first, 2), STRATA_EINVAL);
	CHECK_EQ(m.nruns, 5);
	uint64_t whole[] = {3, 13, 14, 15};
	CHECK_EQ(manifest_remove_runs(&m, whole, 4), 0);
	CHECK_EQ(m.nruns, 1);
	manifest_destroy(&m);
	buf_destroy(&b);
}

TEST(an_edit_that_adds_a_grouped_run_is_written_in_format_2_and_applies)
{
	struct manifest cur, next;
	sample(&cur);
	cur.tip_crc = 0x1234;
	/* A split merge: generations 11 and 12 out, a sorted run of parts 20..22 in. */
	sample(&next);
	next.version = 43;
	next.next_generation = 23;
	uint64_t out[] = {11, 12};
	REQUIRE_EQ(manifest_remove_gens(&next, out, 2), 0);
	for (uint64_t id = 20; id <= 22; id++) {
		struct manifest_obj r = obj(id, 5);
		r.group = 20;
		REQUIRE_EQ(manifest_add_run(&next, &r), 0);
	}
	struct manifest_edit e, d;
	REQUIRE_EQ(manifest_diff(&cur, &next, &e), 0);
	CHECK_EQ(e.nadd_runs, 3);
	struct buf b = {0};
	REQUIRE_EQ(manifest_edit_encode(&e, &b), 0);
	manifest_edit_destroy(&e);
	CHECK_EQ(dec_u32(b.data + 8), 2);
	CHECK_EQ(b.len, 8 + 4 + 8 + 4 + 24 + 8 + 16 + 4 + 2 * 8 + 3 * 60);
	REQUIRE_EQ(manifest_edit_decode(b.data, b.len, "split", &d), 0);
	struct manifest applied;
	REQUIRE_EQ(manifest_copy(&applied, &cur), 0);
	REQUIRE_EQ(manifest_edit_apply(&applied, &d, "split"), 0);
	CHECK(same(&applied, &next));
	CHECK_EQ(applied.runs[3].group, 20);
	manifest_destroy(&applied);
	manifest_edit_destroy(&d);
	CHECK_EQ(flips_and_truncations(&b, dec_edit, drop_edit, &d), 0);

	/* An edit that would leave a part without its first one does not apply. */
	struct manifest_edit half = {0};
	REQUIRE_EQ(manifest_diff(&next, &next, &half), 0);
	uint64_t first = 20;
	half.version = 44;
	half.del_runs = &first;
	half.ndel_runs = 1;
	half.nruns = next.nruns - 1;
	CHECK_EQ(manifest_edit_apply(&next, &half, "half"), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), "group") != NULL);
	CHECK_EQ(next.nruns, 5);
	CHECK_EQ(next.version, 43);
	half.del_runs = NULL;
	half.ndel_runs = 0;
	manifest_edit_destroy(&half);
	manifest_destroy(&cur);
	manifest_destroy(&next);
	buf_destroy(&b);
}

TEST(an_edit_round_trips_and_applies_to_exactly_the_next_state)
{
	struct manifest cur, next;
	sample(&cur);
	cur.tip_crc = 0xabcdef01;
	sample_next(&next);
	struct manifest_edit e, d;
	REQUIRE_EQ(manifest_diff(&cur, &next, &e), 0);
	CHECK_EQ(e.prev_crc, 0xabcdef01);
	CHECK_EQ(e.ndel_gens, 1);
	CHECK_EQ(e.nadd_gens, 1);
	CHECK_EQ(e.nadd_runs, 1);
	CHECK_EQ(e.ndel_runs, 0);
	struct buf b = {0};
	REQUIRE_EQ(manifest_edit_encode(&e, &b), 0);
	manifest_edit_destroy(&e);
	CHECK(memcmp(b.data, "STRMEDIT", 8) == 0);
	/* Fixed part and one of each: no copy of the objects that stay. */
	CHECK_EQ(b.len, 8 + 4 + 8 + 4 + 24 + 8 + 16 + 4 + 8 + 2 * 52);
	REQUIRE_EQ(manifest_edit_decode(b.data, b.len, "e", &d), 0);
	struct manifest applied;
	REQUIRE_EQ(manifest_copy(&applied, &cur), 0);
	REQUIRE_EQ(manifest_edit_apply(&applied, &d, "e"), 0);
	CHECK(same(&applied, &next));
	/* It applies only to the state it follows. */
	CHECK_EQ(manifest_edit_apply(&applied, &d, "again"), STRATA_ECORRUPT);
	manifest_destroy(&applied);
	/* Applied to a state that lacks what it removes: refused, state unchanged. */
	struct manifest other;
	REQUIRE_EQ(manifest_copy(&other, &cur), 0);
	uint64_t gone[] = {12};
	REQUIRE_EQ(manifest_remove_gens(&other, gone, 1), 0);
	CHECK_EQ(manifest_edit_apply(&other, &d, "lacking"), STRATA_ECORRUPT);
	CHECK_EQ(other.ngens, 2);
	CHECK_EQ(other.version, 42);
	manifest_destroy(&other);
	manifest_edit_destroy(&d);

	/* Every byte flip and every truncation of the edit is refused. */
	CHECK_EQ(flips_and_truncations(&b, dec_edit, drop_edit, &d), 0);
	/* An id added twice, or not below next_generation, is no edit. */
	struct manifest dup;
	REQUIRE_EQ(manifest_copy(&dup, &next), 0);
	dup.gens[0].id = 21;
	CHECK_EQ(manifest_diff(&cur, &dup, &e), STRATA_EINVAL);
	dup.gens[0].id = 99;
	manifest_edit_destroy(&e);
	CHECK_EQ(manifest_diff(&cur, &dup, &e), STRATA_EINVAL);
	manifest_destroy(&dup);
	/* A seal (one generation appended, nothing else moved): one add, at the end. */
	struct manifest sealed;
	REQUIRE_EQ(manifest_copy(&sealed, &cur), 0);
	sealed.version = 43;
	sealed.next_generation = 21;
	struct manifest_obj g20 = obj(20, 5);
	REQUIRE_EQ(manifest_add_gen(&sealed, &g20), 0);
	REQUIRE_EQ(manifest_diff(&cur, &sealed, &e), 0);
	CHECK_EQ(e.nadd_gens, 1);
	CHECK_EQ(e.add_gens[0].pos, 3);
	CHECK_EQ(e.ndel_gens + e.ndel_runs + e.nadd_runs, 0);
	REQUIRE_EQ(manifest_copy(&applied, &cur), 0);
	REQUIRE_EQ(manifest_edit_apply(&applied, &e, "sealed"), 0);
	CHECK(same(&applied, &sealed));
	manifest_destroy(&applied);
	manifest_edit_destroy(&e);
	/* Appending an id the manifest holds (as a run here), or one not below
	 * next_generation, is refused on that path too. */
	sealed.gens[3].id = 7;
	CHECK_EQ(manifest_diff(&cur, &sealed, &e), STRATA_EINVAL);
	sealed.gens[3].id = 30;
	CHECK_EQ(manifest_diff(&cur, &sealed, &e), STRATA_EINVAL);
	manifest_destroy(&sealed);
	/* Objects kept in another order are no edit: the writer puts the whole manifest. */
	struct manifest swapped;
	REQUIRE_EQ(manifest_copy(&swapped, &cur), 0);
	swapped.version = 43;
	struct manifest_obj t = swapped.runs[0];
	swapped.runs[0] = swapped.runs[1];
	swapped.runs[1] = t;
	CHECK_EQ(manifest_diff(&cur, &swapped, &e), 1);
	manifest_destroy(&swapped);
	manifest_destroy(&cur);
	manifest_destroy(&next);
	buf_destroy(&b);
}

TEST(every_byte_flip_and_truncation_of_a_snapshot_is_rejected)
{
	struct manifest m, d;
	sample(&m);
	m.tip_crc = 0x12345678;
	struct buf b = {0};
	REQUIRE_EQ(manifest_encode_snapshot(&m, &b), 0);
	REQUIRE_EQ(manifest_decode(b.data, b.len, "snap", &d), 0);
	CHECK(same(&m, &d));
	CHECK_EQ(d.tip_crc, 0x12345678);
	manifest_destroy(&d);
	CHECK_EQ(flips_and_truncations(&b, dec_manifest, drop_manifest, &d), 0);
	manifest_destroy(&m);
	buf_destroy(&b);
}

/** Size of the object at key, or 0. */
static uint64_t
size_of(struct objstore *os, const char *key)
{
	uint64_t n = 0;
	return objstore_size(os, key, &n) == 0 ? n : 0;
}

TEST(updates_append_small_edits_and_a_load_replays_them_after_the_snapshot)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest_opts o = {.snapshot_edits = 8, .keep = 2};
	struct manifest a;
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, &o, &a), 0);
	struct add_gen_ctx ctx = {.epoch = 1};
	char key[256];
	uint64_t first_size = 0;
	for (int i = 0; i < 30; i++) {
		REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 1, &a, add_gen_mutate, &ctx), 0);
		manifest_version_key(key, sizeof(key), PFX, a.version);
		uint64_t n = size_of(fx.os, key);
		if (i == 0)
			first_size = n;
		CHECK_EQ(n, first_size); /* one generation in, whatever the number before */
	}
	CHECK_EQ(a.version, 31);
	CHECK_EQ(a.ngens, 30);
	/* Snapshots at 8, 16, 24; the log behind the newest (and keep) is collected. */
	CHECK_EQ(a.snap_version, 24);
	manifest_snapshot_key(key, sizeof(key), PFX, 24);
	CHECK(size_of(fx.os, key) > 0);
	manifest_snapshot_key(key, sizeof(key), PFX, 16);
	CHECK_EQ(size_of(fx.os, key), 0);
	manifest_version_key(key, sizeof(key), PFX, 21);
	CHECK_EQ(size_of(fx.os, key), 0);
	manifest_version_key(key, sizeof(key), PFX, 22);
	CHECK(size_of(fx.os, key) > 0);
	struct manifest l;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &l), 0);
	CHECK(same(&l, &a));
	CHECK_EQ(l.tip_crc, a.tip_crc);
	CHECK_EQ(l.snap_version, 24);
	CHECK_EQ(l.snap_edits, 7);
	manifest_destroy(&l);

	/* A corrupt entry after the snapshot fails the load, naming it (puts are atomic:
	 * a damaged entry is damage, never an interrupted write to skip). */
	struct buf b = {0};
	manifest_version_key(key, sizeof(key), PFX, 28);
	REQUIRE_EQ(objstore_get(fx.os, key, &b), 0);
	b.data[20] ^= 0x04;
	REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
	diag_clear();
	CHECK_EQ(manifest_load(fx.os, PFX, &l), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), PFX "manifest/00000000000000000028") != NULL);
	b.data[20] ^= 0x04;
	REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
	/* A corrupt snapshot is not skipped either. */
	manifest_snapshot_key(key, sizeof(key), PFX, 24);
	buf_reset(&b);
	REQUIRE_EQ(objstore_get(fx.os, key, &b), 0);
	b.data[b.len - 9] ^= 0x20;
	REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
	diag_clear();
	CHECK_EQ(manifest_load(fx.os, PFX, &l), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), PFX "manifest/snap/00000000000000000024") != NULL);
	b.data[b.len - 9] ^= 0x20;
	REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
	manifest_version_key(key, sizeof(key), PFX, 28);
	buf_reset(&b);
	REQUIRE_EQ(objstore_get(fx.os, key, &b), 0);
	/* A valid edit that follows another entry than the one the log holds. */
	struct manifest_edit e;
	REQUIRE_EQ(manifest_edit_decode(b.data, b.len, "28", &e), 0);
	e.prev_crc ^= 1;
	buf_reset(&b);
	REQUIRE_EQ(manifest_edit_encode(&e, &b), 0);
	manifest_edit_destroy(&e);
	REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
	diag_clear();
	CHECK_EQ(manifest_load(fx.os, PFX, &l), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), "follows an entry") != NULL);
	/* A hole in the log. */
	REQUIRE_EQ(objstore_del(fx.os, key), 0);
	diag_clear();
	CHECK_EQ(manifest_load(fx.os, PFX, &l), STRATA_ECORRUPT);
	CHECK(strstr(diag_last(), "position 28 is missing") != NULL);
	buf_destroy(&b);
	manifest_destroy(&a);
	fx_close(&fx);
}

/** Move the last run to the front (what a base compaction does). */
static int
rotate_runs_mutate(void *arg, struct manifest *next)
{
	(void)arg;
	struct manifest_obj t = next->runs[0];
	next->runs[0] = next->runs[1];
	next->runs[1] = t;
	return 0;
}

TEST(a_store_of_whole_versions_opens_and_continues_as_a_log)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	/* What a build before the log wrote: a whole manifest at every version. */
	char key[256];
	struct buf b = {0};
	struct manifest m;
	for (uint64_t v = 5; v <= 7; v++) {
		sample(&m);
		m.version = v;
		buf_reset(&b);
		REQUIRE_EQ(manifest_encode(&m, &b), 0);
		manifest_version_key(key, sizeof(key), PFX, v);
		REQUIRE_EQ(objstore_put(fx.os, key, b.data, b.len), 0);
		manifest_destroy(&m);
	}
	struct manifest l;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &l), 0);
	CHECK_EQ(l.version, 7);
	CHECK_EQ(l.ngens, 3);
	CHECK_EQ(l.tip_crc, dec_u32(b.data + b.len - 4));
	struct add_gen_ctx ctx = {.epoch = 5};
	struct manifest_opts o = {.snapshot_edits = 100, .keep = 1};
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 5, &l, add_gen_mutate, &ctx), 0);
	CHECK_EQ(l.version, 8);
	/* A reorder is not an edit: a whole manifest goes in the log, and the log goes on. */
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 5, &l, rotate_runs_mutate, NULL), 0);
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 5, &l, add_gen_mutate, &ctx), 0);
	buf_reset(&b);
	manifest_version_key(key, sizeof(key), PFX, 8);
	REQUIRE_EQ(objstore_get(fx.os, key, &b), 0);
	CHECK(memcmp(b.data, "STRMEDIT", 8) == 0);
	buf_reset(&b);
	manifest_version_key(key, sizeof(key), PFX, 9);
	REQUIRE_EQ(objstore_get(fx.os, key, &b), 0);
	CHECK(memcmp(b.data, "STRMANIF", 8) == 0);
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(same(&m, &l));
	CHECK_EQ(m.runs[0].id, 7);
	manifest_destroy(&m);
	/* The first collection puts the snapshot the old store lacked. */
	REQUIRE_EQ(manifest_gc(fx.os, PFX, &l, o.keep), 0);
	manifest_snapshot_key(key, sizeof(key), PFX, 10);
	CHECK(size_of(fx.os, key) > 0);
	manifest_version_key(key, sizeof(key), PFX, 8);
	CHECK_EQ(size_of(fx.os, key), 0);
	REQUIRE_EQ(manifest_load(fx.os, PFX, &m), 0);
	CHECK(same(&m, &l));
	CHECK_EQ(m.snap_version, 10);
	manifest_destroy(&m);
	manifest_destroy(&l);
	buf_destroy(&b);
	fx_close(&fx);
}

/** The stalled writer's pause at manifest.before_append. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/** The paused thread is in the point / may leave it. */
	int paused, resume;
	/** The thread to pause (others pass). */
	pthread_t who;
	/** Armed. */
	int armed;
} stall = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0};

static int
stall_point(const char *name, const void *arg)
{
	(void)arg;
	if (strcmp(name, "manifest.before_append") != 0)
		return 0;
	pthread_mutex_lock(&stall.mu);
	if (!stall.armed || !pthread_equal(pthread_self(), stall.who)) {
		pthread_mutex_unlock(&stall.mu);
		return 0;
	}
	stall.paused = 1;
	pthread_cond_broadcast(&stall.cv);
	while (!stall.resume)
		pthread_cond_wait(&stall.cv, &stall.mu);
	pthread_mutex_unlock(&stall.mu);
	return 0;
}

/** The stalled writer: one commit from the state it read before the stall. */
struct staller {
	struct objstore *os;
	struct manifest m;
	struct add_gen_ctx ctx;
	int rc;
	/** Its diagnostic (diag is per thread). */
	char why[512];
};

static void *
staller_main(void *arg)
{
	struct staller *st = arg;
	pthread_mutex_lock(&stall.mu);
	stall.who = pthread_self(); /* before its first manifest point */
	pthread_mutex_unlock(&stall.mu);
	struct manifest_opts o = {.snapshot_edits = 4, .keep = 0};
	st->rc = manifest_commit_update(st->os, PFX, &o, st->m.writer_epoch, &st->m, add_gen_mutate,
					&st->ctx);
	snprintf(st->why, sizeof(st->why), "%s", diag_last());
	return NULL;
}

TEST(a_writer_stalled_past_a_collection_is_fenced_and_its_update_is_not_in_the_log)
{
	struct fixture fx = {0};
	REQUIRE_EQ(fx_open(&fx), 0);
	struct manifest_opts o = {.snapshot_edits = 4, .keep = 0};
	struct manifest a;
	REQUIRE_EQ(manifest_claim_epoch(fx.os, PFX, &o, &a), 0);
	struct add_gen_ctx ctx = {.epoch = 1};
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 1, &a, add_gen_mutate, &ctx), 0);
	/* The stalled writer (same epoch: an external compactor never claims) read v2. */
	struct staller st = {.os = fx.os, .ctx = {.epoch = 9}};
	REQUIRE_EQ(manifest_copy(&st.m, &a), 0);
	pthread_mutex_lock(&stall.mu);
	stall.armed = 1;
	stall.paused = stall.resume = 0;
	pthread_mutex_unlock(&stall.mu);
	env.point = stall_point;
	pthread_t t;
	REQUIRE_EQ(pthread_create(&t, NULL, staller_main, &st), 0);
	pthread_mutex_lock(&stall.mu);
	while (!stall.paused)
		pthread_cond_wait(&stall.cv, &stall.mu);
	pthread_mutex_unlock(&stall.mu);
	/* The other handle moves on: positions 3.., a snapshot at 4, 8, and collection
	 * behind it deletes position 3 -- the one the stalled writer is about to create. */
	for (int i = 0; i < 8; i++)
		REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 1, &a, add_gen_mutate, &ctx), 0);
	CHECK_EQ(a.version, 10);
	CHECK_EQ(a.snap_version, 8);
	CHECK_EQ(size_of(fx.os, PFX "manifest/00000000000000000003"), 0);
	pthread_mutex_lock(&stall.mu);
	stall.resume = 1;
	pthread_cond_broadcast(&stall.cv);
	pthread_mutex_unlock(&stall.mu);
	pthread_join(t, NULL);
	stall.armed = 0;
	env.point = NULL;
	/* It re-created position 3 but learnt it is not the log's: fenced, not committed. */
	CHECK_EQ(st.rc, STRATA_EFENCED);
	CHECK(strstr(st.why, "stalled past the collection") != NULL);
	struct manifest l;
	REQUIRE_EQ(manifest_load(fx.os, PFX, &l), 0);
	CHECK(same(&l, &a));
	for (uint32_t i = 0; i < l.ngens; i++)
		CHECK(l.gens[i].epoch != 9); /* the stalled writer's generation is not named */
	manifest_destroy(&l);
	manifest_destroy(&st.m);
	/* A commit whose position was never collected is not disturbed by the check. */
	REQUIRE_EQ(manifest_commit_update(fx.os, PFX, &o, 1, &a, add_gen_mutate, &ctx), 0);
	manifest_destroy(&a);
	fx_close(&fx);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(encode_decode_round_trip);
	RUN(grouped_runs_round_trip_in_the_grouped_formats_and_ungrouped_ones_as_before);
	RUN(an_edit_that_adds_a_grouped_run_is_written_in_format_2_and_applies);
	RUN(every_byte_flip_and_truncation_is_rejected);
	RUN(checksummed_but_inconsistent_content_is_rejected);
	RUN(obj_keys_round_trip_and_bad_ones_are_refused);
	RUN(remove_gens_is_all_or_nothing);
	RUN(load_picks_highest_version_and_ignores_other_names);
	RUN(corrupt_highest_version_fails_load_naming_object);
	RUN(claim_epoch_bumps_epoch_each_time);
	RUN(concurrent_claims_get_distinct_epochs);
	RUN(commit_update_by_older_epoch_after_claim_is_fenced);
	RUN(lost_race_is_retried_on_fresh_copy);
	RUN(failed_mutation_writes_nothing);
	RUN(gc_keeps_the_snapshot_and_keep_positions_behind_current);
	RUN(an_edit_round_trips_and_applies_to_exactly_the_next_state);
	RUN(every_byte_flip_and_truncation_of_a_snapshot_is_rejected);
	RUN(updates_append_small_edits_and_a_load_replays_them_after_the_snapshot);
	RUN(a_store_of_whole_versions_opens_and_continues_as_a_log);
	RUN(a_writer_stalled_past_a_collection_is_fenced_and_its_update_is_not_in_the_log);
	return HARNESS_END("test_manifest");
}
