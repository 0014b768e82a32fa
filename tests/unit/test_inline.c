/*
 * test_inline.c — the embedding for simulation rigs: a manual clock, inline mode (no
 * threads), a bounded strata_step, and determinism (the same seed and calls give the
 * same trace hash and the same files byte for byte).
 */
#define ENGINE_UTIL_TAG "inline"
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "../../node/lib/env.h"
/* Not every shared helper is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine_util.h"
#pragma GCC diagnostic pop

/** Statistics of one shard. */
static strata_stats
shard_stats_of(strata *db, uint32_t shard)
{
	strata_stats s;
	memset(&s, 0, sizeof(s));
	if (strata_shard_stats(db, shard, &s) != 0)
		fprintf(stderr, "  strata_shard_stats: %s\n", strata_last_error());
	return s;
}

static int
rows_cb(void *ctx, const strata_row *row)
{
	(void)row;
	(*(unsigned *)ctx)++;
	return 0;
}

/** Rows a whole-shard scan returns. */
static unsigned
scan_count(strata *db, uint32_t shard)
{
	unsigned n = 0;
	if (strata_scan(db, shard, NULL, 0, NULL, 0, rows_cb, &n) != 0)
		fprintf(stderr, "  strata_scan: %s\n", strata_last_error());
	return n;
}

/** A policy that keeps background work coming: seal at 64 KiB or every 50 ms of the
 *  manual clock, merge once 4 generations wait, compact past 2 runs. */
static const char *busy_policy =
	"return { flush_interval_s = 0.05, sweep_interval_s = 0, merge_after_generations = 4,\n"
	"         merge_max_generations = 8, memtable_max_bytes = 64 * 1024, base_max_runs = 2 }\n";

/** Write busy_policy into dir/policy.lua; the path (static buffer). */
static const char *
policy_file(const char *dir)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/policy.lua", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return NULL;
	fputs(busy_policy, f);
	fclose(f);
	return path;
}

/** Options of a simulated node: manual clock, inline, seeded, small blocks. */
static strata_options
sim_opts(const char *dir, uint64_t seed, const char *policy)
{
	strata_options o = opts_for(dir);
	o.shards = 2;
	o.clock = STRATA_CLOCK_MANUAL;
	o.threads = 0;
	o.seed = seed;
	o.block_bytes = 4096;
	o.policy = policy;
	return o;
}

/** FNV-1a over bytes. */
static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/** Hash of a file tree: every path (relative, sorted) and its contents. LOCK (the
 *  holder's pid) and policy.lua are left out; names, sizes and bytes of the rest count. */
static uint64_t
tree_hash(const char *root, const char *rel, uint64_t h, unsigned *files)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(path);
	if (d == NULL)
		return h;
	char *names[1024];
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < 1024)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		char sub[4096], full[8200];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", names[i]);
		snprintf(full, sizeof(full), "%s/%s", root, sub);
		struct stat st;
		if (stat(full, &st) != 0 || !strcmp(sub, "LOCK") || !strcmp(sub, "policy.lua")) {
			free(names[i]);
			continue;
		}
		h = fnv(h, sub, strlen(sub) + 1);
		if (S_ISDIR(st.st_mode)) {
			h = tree_hash(root, sub, h, files);
		} else {
			int fd = open(full, O_RDONLY);
			char buf[65536];
			ssize_t r;
			while (fd >= 0 && (r = read(fd, buf, sizeof(buf))) > 0)
				h = fnv(h, buf, (size_t)r);
			if (fd >= 0)
				close(fd);
			(*files)++;
		}
		free(names[i]);
	}
	return h;
}

/** What a scenario ended with. */
struct outcome {
	/** strata_trace_hash and its event count at close. */
	uint64_t trace, events;
	/** tree_hash of the directory after close, and its file count. */
	uint64_t tree;
	unsigned files;
	/** Seals, merges and compactions the policy did (over both shards). */
	uint64_t seals, merges, compactions;
	/** Rows read back wrong (must be 0). */
	unsigned wrong;
};

/** A frame loop: 60 frames of 16.7 ms; each appends rows of a key space drawn from the
 *  seed, reads some back, and gives the store a 500 us (work meter) step. */
static struct outcome
scenario(const char *dir, uint64_t seed, int frames)
{
	struct outcome out;
	memset(&out, 0, sizeof(out));
	strata_options o = sim_opts(dir, seed, policy_file(dir));
	strata *db = db_open(&o);
	if (db == NULL) {
		out.wrong = 1;
		return out;
	}
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
	static char vals[400][64];
	static int have[400];
	memset(have, 0, sizeof(have));
	for (int f = 0; f < frames; f++) {
		if (strata_tick(db, (uint64_t)f * 16666667ull) != 0)
			out.wrong++;
		for (int r = 0; r < 40; r++) {
			unsigned k = (unsigned)(xorshift(&rng) % 400);
			char key[32];
			int kl = snprintf(key, sizeof(key), "k%05u", k);
			int vl = snprintf(vals[k], sizeof(vals[k]), "v%d.%d.%llu", f, r,
					  (unsigned long long)(xorshift(&rng) % 100000));
			strata_row row = {key, (size_t)kl, vals[k], (size_t)vl};
			if (strata_append(db, k % 2, &row, 1) != 0)
				out.wrong++;
			have[k] = 1;
		}
		for (int r = 0; r < 10; r++) {
			unsigned k = (unsigned)(xorshift(&rng) % 400);
			char key[32];
			int kl = snprintf(key, sizeof(key), "k%05u", k);
			void *v = NULL;
			size_t vl = 0;
			int rc = strata_get(db, k % 2, key, (size_t)kl, &v, &vl);
			if (have[k] ? rc != 0 || vl != strlen(vals[k]) || memcmp(v, vals[k], vl) != 0
				    : rc != STRATA_NOTFOUND)
				out.wrong++;
			strata_free(v);
		}
		strata_step_info info;
		if (strata_step(db, 500, &info) != 0)
			out.wrong++;
	}
	for (uint32_t sh = 0; sh < 2; sh++) {
		strata_stats st = shard_stats_of(db, sh);
		out.seals += st.seals;
		out.merges += st.merges;
		out.compactions += st.compactions;
	}
	out.trace = strata_trace_hash(db, &out.events);
	db_close(db);
	out.tree = tree_hash(dir, "", 0xcbf29ce484222325ull, &out.files);
	return out;
}

TEST(same_seed_same_trace_and_same_files)
{
	struct outcome a = scenario(tdir(), 42, 60);
	struct outcome b = scenario(tdir(), 42, 60);
	CHECK_EQ(a.wrong, 0);
	CHECK_EQ(b.wrong, 0);
	/* The scenario exercised the background: seals, merges and compactions ran. */
	CHECK(a.seals >= 4);
	CHECK(a.merges >= 1);
	CHECK(a.compactions >= 1);
	CHECK(a.events > 2400);
	CHECK_EQ(a.trace, b.trace);
	CHECK_EQ(a.events, b.events);
	CHECK_EQ(a.files, b.files);
	CHECK_EQ(a.tree, b.tree);
	fprintf(stderr, "  # seed 42: %llu events, trace %016llx, %u files, tree %016llx, "
		"%llu seals, %llu merges, %llu compactions\n", (unsigned long long)a.events,
		(unsigned long long)a.trace, a.files, (unsigned long long)a.tree,
		(unsigned long long)a.seals, (unsigned long long)a.merges,
		(unsigned long long)a.compactions);
	/* Another seed: other calls, another trace. */
	struct outcome c = scenario(tdir(), 43, 60);
	CHECK_EQ(c.wrong, 0);
	CHECK(c.trace != a.trace);
	CHECK(c.tree != a.tree);
}

/** Append rows of about 1 KiB to shard 0 until n generations are flushed by seals. */
static void
fill_generations(strata *db, int n, int rows_each)
{
	char key[32], val[1024];
	memset(val, 'x', sizeof(val));
	for (int g = 0; g < n; g++) {
		for (int r = 0; r < rows_each; r++) {
			int kl = snprintf(key, sizeof(key), "g%03d-r%04d", g, r);
			strata_row row = {key, (size_t)kl, val, sizeof(val)};
			REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
		}
		REQUIRE_EQ(strata_seal(db, 0), 0);
	}
}

TEST(a_step_overruns_its_budget_by_at_most_one_chunk)
{
	const char *dir = tdir();
	/* The built-in policy's sweeper (60 s) merges what waits: 6 generations of 64
	 * rows of 1 KiB, written in 4 KiB blocks, so the merge is ~96 chunks. */
	strata_options o = sim_opts(dir, 7, "");
	o.shards = 1;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	fill_generations(db, 6, 64);
	CHECK_EQ(shard_stats_of(db, 0).generations, 6);
	strata_step_info info;
	REQUIRE_EQ(strata_step(db, 1000, &info), 0);
	CHECK_EQ(info.chunks, 0); /* nothing due before the sweep */
	REQUIRE_EQ(strata_tick(db, 61ull * 1000000000ull), 0);
	unsigned steps = 0, chunks = 0;
	uint64_t budget = 20, max_chunk = 0;
	while (shard_stats_of(db, 0).generations > 0 && steps < 10000) {
		REQUIRE_EQ(strata_step(db, budget, &info), 0);
		steps++;
		chunks += info.chunks;
		if (info.max_chunk_us > max_chunk)
			max_chunk = info.max_chunk_us;
		/* The invariant: the budget, plus at most the one chunk that crossed it. */
		CHECK(info.spent_us <= budget + info.max_chunk_us);
		if (info.chunks > 1)
			CHECK(info.spent_us - info.max_chunk_us < budget);
	}
	CHECK_EQ(shard_stats_of(db, 0).generations, 0);
	CHECK_EQ(shard_stats_of(db, 0).merges, 1);
	/* A chunk is one block (4 KiB of rows: 4 us) or a run's end with its syncs (64 us),
	 * plus the loop turn before it (1 us). */
	CHECK(max_chunk <= 65);
	CHECK(steps >= 20); /* the merge really was spread over many steps */
	CHECK(chunks >= 60);
	fprintf(stderr, "  # merge of 6 generations: %u chunks over %u steps of %llu us, largest "
		"chunk %llu us\n", chunks, steps, (unsigned long long)budget,
		(unsigned long long)max_chunk);
	/* Reads are right across the merge. */
	CHECK_EQ(scan_count(db, 0), 6 * 64);
}

TEST(a_rig_that_never_steps_still_gets_durable_appends_and_reads)
{
	const char *dir = tdir();
	strata_options o = sim_opts(dir, 9, policy_file(dir));
	o.shards = 1;
	o.sync = STRATA_SYNC_FSYNC;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	char key[32], val[256];
	memset(val, 'v', sizeof(val));
	for (int i = 0; i < 2000; i++) {
		int kl = snprintf(key, sizeof(key), "key%05d", i);
		strata_row row = {key, (size_t)kl, val, sizeof(val)};
		REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
		if (i % 200 == 0)
			REQUIRE_EQ(strata_tick(db, (uint64_t)i * 1000000000ull), 0);
	}
	/* Past the size trigger and many flush intervals: the work waits, visibly. */
	strata_stats st = shard_stats_of(db, 0);
	CHECK_EQ(st.seals, 0);
	CHECK_EQ(st.generations, 0);
	CHECK(st.memtable_rows == 2000);
	CHECK_EQ(scan_count(db, 0), 2000);
	void *v = NULL;
	size_t vl = 0;
	REQUIRE_EQ(strata_get(db, 0, "key01999", 8, &v, &vl), 0);
	CHECK_EQ(vl, sizeof(val));
	strata_free(v);
	strata_step_info info;
	REQUIRE_EQ(strata_step(db, 0, &info), 0); /* a zero budget runs at most one chunk */
	CHECK(info.chunks <= 1);
	CHECK(info.pending >= 1);
	db_close(db);
	/* Everything acknowledged is there after a reopen (it was in the WAL all along). */
	db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(scan_count(db, 0), 2000);
	db_close(db);
}

TEST(the_manual_clock_moves_only_forward_and_only_by_tick)
{
	const char *dir = tdir();
	strata_options o = sim_opts(dir, 1, NULL);
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	CHECK_EQ(strata_tick(db, 5000), 0);
	CHECK_EQ(strata_tick(db, 5000), 0); /* the same time again is fine */
	CHECK_EQ(strata_tick(db, 4999), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "backwards") != NULL);
	CHECK(strstr(strata_last_error(), "5000") != NULL);
	CHECK_EQ(strata_tick(db, 6000), 0);
	db_close(db);
	/* A real-clock store refuses ticks; a threaded one refuses steps. */
	strata_options r = opts_for(tdir());
	r.threads = 1;
	strata *rdb = db_open(&r);
	REQUIRE(rdb != NULL);
	CHECK_EQ(strata_tick(rdb, 1), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "real clock") != NULL);
	CHECK_EQ(strata_step(rdb, 100, NULL), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "threads") != NULL);
	db_close(rdb);
	strata_options bad = sim_opts(tdir(), 1, NULL);
	bad.clock = 7;
	strata *none = NULL;
	CHECK_EQ(strata_open(&bad, &none), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "clock") != NULL);
}

TEST(interval_sync_runs_in_the_step_in_inline_mode)
{
	const char *dir = tdir();
	strata_options o = sim_opts(dir, 3, NULL);
	o.shards = 1;
	o.sync = STRATA_SYNC_INTERVAL;
	o.sync_interval_ms = 10;
	strata *db = db_open(&o);
	REQUIRE(db != NULL);
	strata_row row = {"a", 1, "b", 1};
	REQUIRE_EQ(strata_append(db, 0, &row, 1), 0);
	uint64_t before = shard_stats_of(db, 0).wal_syncs;
	REQUIRE_EQ(strata_step(db, 100, NULL), 0);
	CHECK_EQ(shard_stats_of(db, 0).wal_syncs, before); /* not due yet: no time passed */
	REQUIRE_EQ(strata_tick(db, 20000000), 0);
	REQUIRE_EQ(strata_step(db, 100, NULL), 0);
	CHECK_EQ(shard_stats_of(db, 0).wal_syncs, before + 1);
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
	T(same_seed_same_trace_and_same_files);
	T(a_step_overruns_its_budget_by_at_most_one_chunk);
	T(a_rig_that_never_steps_still_gets_durable_appends_and_reads);
	T(the_manual_clock_moves_only_forward_and_only_by_tick);
	T(interval_sync_runs_in_the_step_in_inline_mode);
	return HARNESS_END("test_inline");
}
