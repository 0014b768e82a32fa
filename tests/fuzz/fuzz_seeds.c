/*
 * fuzz_seeds.c — writes the seed corpora of the fuzz targets with the real writers:
 * WAL segments (wal_submit), run files (run_writer), manifests (manifest_encode), plus
 * edge cases cut from them (empty, header only, torn tail, flipped byte, truncated).
 * WAL and run seeds hold delete rows (tombstones) too. The seed-v2-* WAL and seed-v1-*
 * run files of the corpora were written by the build before deletes (older formats);
 * this program leaves them alone.
 * usage: fuzz_seeds CORPUS_ROOT   (writes CORPUS_ROOT/{wal,run,manifest}/seed-*)
 * The output is deterministic: rerunning it rewrites the same files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../node/core/manifest.h"
#include "../../node/core/run.h"
#include "../../node/core/wal.h"
#include "../../node/lib/buf.h"
#include "../../node/objstore/objstore.h"
#include "fuzz_util.h"

/** Root of the corpora. */
static const char *root;

static void
seed(const char *target, const char *name, const void *data, size_t len)
{
	char path[FUZZ_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "fuzz_seeds: mkdir %s: %s\n", path, strerror(errno));
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/seed-%s", root, target, name);
	fuzz_write_file(path, data, len);
	printf("%s (%zu bytes)\n", path, len);
}

/** Write the derived edge cases of a valid input. */
static void
seed_edges(const char *target, const char *name, const uint8_t *d, size_t n, size_t hdr)
{
	char nm[128];
	uint8_t *c = malloc(n + 1);
	if (c == NULL)
		abort();
	snprintf(nm, sizeof(nm), "%s-torn", name);
	seed(target, nm, d, n > 3 ? n - 3 : 0);
	snprintf(nm, sizeof(nm), "%s-half", name);
	seed(target, nm, d, n / 2);
	if (hdr > 0 && hdr <= n) {
		snprintf(nm, sizeof(nm), "%s-header-only", name);
		seed(target, nm, d, hdr);
	}
	memcpy(c, d, n);
	c[n / 2] ^= 0x40;
	snprintf(nm, sizeof(nm), "%s-flipped", name);
	seed(target, nm, c, n);
	free(c);
}

static int
read_file(const char *path, struct buf *out)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return -1;
	uint8_t tmp[65536];
	size_t k;
	while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
		if (buf_append(out, tmp, k) != 0)
			abort();
	fclose(f);
	return 0;
}

static int
noop_cb(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n)
{
	(void)ctx;
	(void)first_seq;
	(void)rows;
	(void)n;
	return 0;
}

/** Append n rows keyed from from; every del-th row (del > 0) is a delete. */
static void
append_rows_del(struct wal *w, int from, int n, size_t vlen, int del)
{
	static char vals[8][8192];
	char keys[8][32];
	strata_row rows[8];
	for (int i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "key-%04d", from + i);
		size_t vl = vlen < sizeof(vals[i]) ? vlen : sizeof(vals[i]);
		for (size_t j = 0; j < vl; j++)
			vals[i][j] = (char)('a' + (j + (size_t)i) % 26);
		rows[i] = (strata_row){keys[i], strlen(keys[i]), vals[i], vl};
		if (del > 0 && (from + i) % del == 0)
			rows[i] = (strata_row){keys[i], strlen(keys[i]), NULL, 0, STRATA_ROW_DELETE};
	}
	struct wal_ticket t;
	if (wal_submit(w, rows, (size_t)n, &t) != 0 || wal_wait(w, &t) != 0) {
		fprintf(stderr, "fuzz_seeds: wal append: %s\n", diag_last());
		exit(1);
	}
}

static void
append_rows(struct wal *w, int from, int n, size_t vlen)
{
	append_rows_del(w, from, n, vlen, 0);
}

static void
wal_seeds(const char *tmp)
{
	char dir[FUZZ_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/wal", tmp);
	struct wal_options o = {dir, STRATA_SYNC_NONE, 0, 1u << 20, 0};
	struct wal *w;
	if (wal_open(&o, 0, 1, noop_cb, NULL, &w) != 0) {
		fprintf(stderr, "fuzz_seeds: wal_open: %s\n", diag_last());
		exit(1);
	}
	append_rows(w, 0, 1, 10);
	append_rows(w, 1, 3, 40);
	append_rows(w, 4, 1, 0);
	append_rows(w, 5, 2, 5000);
	append_rows_del(w, 0, 4, 12, 2); /* key-0000 and key-0002 deleted */
	wal_close(w);
	struct wal_segment_info info[4];
	int n = wal_inspect_dir(dir, info, 4);
	if (n < 1) {
		fprintf(stderr, "fuzz_seeds: no WAL segment in %s\n", dir);
		exit(1);
	}
	char path[FUZZ_PATH_MAX];
	struct buf b = {0};
	snprintf(path, sizeof(path), "%s/%s", dir, info[n - 1].name);
	read_file(path, &b);
	seed("wal", "small", b.data, b.len);
	seed_edges("wal", "small", b.data, b.len, 24);
	seed("wal", "empty", "", 0);

	/* Two segments, concatenated: the target splits at the second magic. */
	char dir2[FUZZ_PATH_MAX];
	snprintf(dir2, sizeof(dir2), "%s/wal2", tmp);
	struct wal_options o2 = {dir2, STRATA_SYNC_NONE, 0, 256, 0};
	if (wal_open(&o2, 0, 100, noop_cb, NULL, &w) != 0)
		exit(1);
	for (int i = 0; i < 6; i++)
		append_rows(w, i * 2, 2, 60);
	wal_close(w);
	n = wal_inspect_dir(dir2, info, 4);
	struct buf two = {0};
	for (int i = 0; i < n && i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir2, info[i].name);
		read_file(path, &two);
	}
	seed("wal", "two-segments", two.data, two.len);
	seed_edges("wal", "two-segments", two.data, two.len, 0);
	buf_destroy(&b);
	buf_destroy(&two);
}

/** A run of rows keys; every del-th row (del > 0) is a tombstone. */
static void
write_run_del(struct objstore *os, const char *name, int rows, const struct run_writer_options *o,
	      size_t vlen, int del)
{
	char key[128];
	snprintf(key, sizeof(key), "run/%s.sst", name);
	struct run_writer *w;
	if (run_writer_open(os, key, o, &w) != 0) {
		fprintf(stderr, "fuzz_seeds: run_writer_open: %s\n", diag_last());
		exit(1);
	}
	static char val[200000];
	for (int i = 0; i < rows; i++) {
		char k[32];
		int kl = snprintf(k, sizeof(k), "key-%06d", i * 3);
		size_t vl = vlen ? vlen : (size_t)(i % 50);
		for (size_t j = 0; j < vl && j < sizeof(val); j++)
			val[j] = (char)('a' + (j * 7 + (size_t)i) % 26);
		int tomb = del > 0 && i % del == 0;
		if (run_writer_add_kind(w, k, (size_t)kl, (uint64_t)i + 1, tomb ? NULL : val,
					tomb ? 0 : vl, tomb ? STRATA_ROW_DELETE : STRATA_ROW_PUT) != 0) {
			fprintf(stderr, "fuzz_seeds: run_writer_add: %s\n", diag_last());
			exit(1);
		}
	}
	struct run_meta m;
	if (run_writer_finish(w, &m) != 0) {
		fprintf(stderr, "fuzz_seeds: run_writer_finish: %s\n", diag_last());
		exit(1);
	}
	struct buf b = {0};
	if (objstore_get(os, key, &b) != 0)
		exit(1);
	seed("run", name, b.data, b.len);
	if (strcmp(name, "small") == 0 || strcmp(name, "multiblock") == 0)
		seed_edges("run", name, b.data, b.len, 0);
	buf_destroy(&b);
}

static void
write_run(struct objstore *os, const char *name, int rows, const struct run_writer_options *o,
	  size_t vlen)
{
	write_run_del(os, name, rows, o, vlen, 0);
}

static void
run_seeds(const char *tmp)
{
	char dir[FUZZ_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/objects", tmp);
	struct objstore *os;
	if (objstore_fs_new(dir, &os) != 0)
		exit(1);
	struct run_writer_options dflt = {0, 0, 0, 0};
	write_run(os, "small", 3, &dflt, 0);
	struct run_writer_options tiny = {RUN_MIN_BLOCK_BYTES, 1, 10, RUN_MIN_BLOCK_BYTES};
	write_run(os, "multiblock", 300, &tiny, 0);
	struct run_writer_options nobloom = {256, 3, RUN_BLOOM_DISABLED, 256};
	write_run(os, "nobloom", 60, &nobloom, 0);
	write_run(os, "empty", 0, &dflt, 0);
	write_run(os, "bigvalue", 2, &dflt, 150000);
	write_run_del(os, "tombstones", 120, &tiny, 0, 3);
	objstore_destroy(os);
}

static void
manifest_seeds(void)
{
	struct manifest m;
	memset(&m, 0, sizeof(m));
	m.version = 1;
	m.writer_epoch = 1;
	m.next_generation = 1;
	struct buf b = {0};
	if (manifest_encode(&m, &b) != 0)
		exit(1);
	seed("manifest", "empty", b.data, b.len);
	buf_destroy(&b);
	m.version = 42;
	m.writer_epoch = 7;
	m.replay_after = 1234;
	m.next_generation = 20;
	for (uint64_t i = 1; i <= 3; i++) {
		struct manifest_obj o = {10 + i, 7, 4096 * i, 100 * i, 1000 + 100 * i, 1099 + 100 * i};
		if (manifest_add_gen(&m, &o) != 0)
			exit(1);
	}
	for (uint64_t i = 1; i <= 2; i++) {
		struct manifest_obj o = {i, 5, 65536 * i, 500 * i, 1 + 500 * (i - 1), 500 * i};
		if (manifest_add_run(&m, &o) != 0)
			exit(1);
	}
	b = (struct buf){0};
	if (manifest_encode(&m, &b) != 0)
		exit(1);
	seed("manifest", "gens-runs", b.data, b.len);
	seed_edges("manifest", "gens-runs", b.data, b.len, 0);
	buf_destroy(&b);
	m.tip_crc = 0x1234;
	b = (struct buf){0};
	if (manifest_encode_snapshot(&m, &b) != 0)
		exit(1);
	seed("manifest", "snapshot", b.data, b.len);
	buf_destroy(&b);
	/* An edit: generation 12 merged into run 20, generation 21 sealed. */
	struct manifest next;
	if (manifest_copy(&next, &m) != 0)
		exit(1);
	next.version = 43;
	next.next_generation = 22;
	uint64_t out[] = {12};
	struct manifest_obj r = {20, 7, 9000, 200, 1100, 1299}, g = {21, 7, 100, 3, 1400, 1402};
	struct manifest_edit e;
	if (manifest_remove_gens(&next, out, 1) != 0 || manifest_add_run(&next, &r) != 0 ||
	    manifest_add_gen(&next, &g) != 0 || manifest_diff(&m, &next, &e) != 0)
		exit(1);
	b = (struct buf){0};
	if (manifest_edit_encode(&e, &b) != 0)
		exit(1);
	seed("manifest", "edit", b.data, b.len);
	buf_destroy(&b);
	manifest_edit_destroy(&e);
	manifest_destroy(&next);
	manifest_destroy(&m);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
		return 2;
	}
	root = argv[1];
	const char *tmp = fuzz_dir("seeds");
	wal_seeds(tmp);
	run_seeds(tmp);
	manifest_seeds();
	return 0;
}
