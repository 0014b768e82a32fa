/*
 * fuzz_run.c — libFuzzer target for the run-file reader (footer, top-level index,
 * index partitions, bloom filters, blocks).
 *
 * The input is stored as an object of an fs object store; then run_reader_open,
 * a full iteration, point gets (of keys the iteration saw, and of a key taken from
 * the input), a seek, and run_verify. Oracles beyond "no crash, leak or sanitizer
 * report": every failure is STRATA_ECORRUPT or STRATA_EVERSION naming the object
 * (never EIO, EINVAL or ENOMEM for a file that exists), and a run that opens and
 * verifies iterates in strictly increasing key order with every key found by get, of
 * the kind (put or tombstone) the iteration returned.
 * Each input runs as it is and, when that differs, with the checksums of its footer and
 * of every frame it can locate (top index, meta, raw index partitions, their blocks)
 * recomputed, so mutations reach the structural checks behind the checksums; order
 * oracles apply only to the unmodified input (run_verify checks checksums, not order).
 */
#include <stdint.h>

#include "../../node/core/run.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/objstore.h"
#include "fuzz_util.h"

/** Keys remembered from the iteration, to look up again. */
#define KEEP_KEYS 8
/** Rows iterated at most per input (bounded work). */
#define MAX_ROWS 100000

/** Object key of the run under the scratch store. */
static const char *const run_key = "r/0000000000000001-00000001.sst";

static void
expect_corrupt(int rc, const char *what)
{
	if (rc == STRATA_ECORRUPT || rc == STRATA_EVERSION) {
		if (strstr(diag_last(), "0000000000000001-00000001.sst") == NULL)
			FUZZ_FAIL("%s: corruption message names no object: %s", what, diag_last());
		return;
	}
	FUZZ_FAIL("%s of a run-file input gave %s: %s", what, fuzz_code(rc), diag_last());
}

static int
key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;
	return c ? c : al < bl ? -1 : al > bl;
}

/** Size of a version-1 footer. */
#define FOOTER 112u

/** Recompute the crc trailer of the frame [off, off + len) when it lies inside b. */
static int
fix_frame(uint8_t *b, size_t n, uint64_t off, uint64_t len)
{
	if (len < 5 || off > n || len > n - off)
		return -1;
	enc_u32(b + off + len - 4, crc32c(0, b + off, (size_t)len - 4));
	return 0;
}

/** Walk the raw index entries of the frame at [off, off + len): each lists a frame
 *  (varint klen, key, varint offset, varint disk length, varint raw length, varint
 *  count, and for partitions a filter) whose checksum is fixed; partitions recurse. */
static void
fix_index(uint8_t *b, size_t n, uint64_t off, uint64_t len, int top, int depth)
{
	if (len < 5 || off > n || len > n - off || b[off] != 0 || depth > 1)
		return;
	size_t p = (size_t)off + 1, end = (size_t)(off + len - 4);
	while (p < end) {
		uint64_t klen, eoff, elen, raw, cnt, flen = 0;
		if (fuzz_varint(b, end, &p, &klen) || klen > end - p)
			return;
		p += (size_t)klen;
		if (fuzz_varint(b, end, &p, &eoff) || fuzz_varint(b, end, &p, &elen) ||
		    fuzz_varint(b, end, &p, &raw) || fuzz_varint(b, end, &p, &cnt))
			return;
		if (!top && (fuzz_varint(b, end, &p, &flen) || flen > end - p))
			return;
		p += (size_t)flen;
		if (fix_frame(b, n, eoff, elen) == 0 && top)
			fix_index(b, n, eoff, elen, 0, depth + 1);
	}
	fix_frame(b, n, off, len);
}

/** Recompute every checksum the footer leads to, then the footer's own. */
static void
fix_run(uint8_t *b, size_t n)
{
	if (n < FOOTER)
		return;
	uint8_t *f = b + n - FOOTER;
	fix_index(b, n, dec_u64(f), dec_u64(f + 8), 1, 0);
	fix_frame(b, n, dec_u64(f), dec_u64(f + 8));
	fix_frame(b, n, dec_u64(f + 32), dec_u64(f + 40));
	enc_u32(f + 100, crc32c(0, f, 100));
}

static void
read_one(const uint8_t *data, size_t size, int strict)
{
	static struct objstore *os;
	const char *dir = fuzz_dir("run");
	if (os == NULL && objstore_fs_new(dir, &os) != 0)
		FUZZ_FAIL("objstore_fs_new %s: %s", dir, diag_last());
	char path[FUZZ_PATH_MAX];
	snprintf(path, sizeof(path), "%s/r", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s", dir, run_key);
	fuzz_write_file(path, data, size);

	struct run_reader *r = NULL;
	int rc = run_reader_open(os, run_key, &r);
	if (rc != 0) {
		expect_corrupt(rc, "run_reader_open");
		return;
	}
	struct run_meta vm;
	int verified = run_verify(os, run_key, &vm);
	if (verified != 0)
		expect_corrupt(verified, "run_verify");
	else if (!strict)
		verified = -1; /* checksums forged by fix_run: order oracles do not apply */

	/* Iterate everything; remember a few keys. */
	static uint8_t keys[KEEP_KEYS][STRATA_MAX_KEY];
	size_t klens[KEEP_KEYS];
	uint32_t kinds[KEEP_KEYS];
	int nkeys = 0;
	static uint8_t prev[STRATA_MAX_KEY];
	size_t prev_len = 0;
	uint64_t rows = 0;
	struct run_iter *it = NULL;
	rc = run_iter_new(r, NULL, 0, &it);
	if (rc != 0) {
		expect_corrupt(rc, "run_iter_new");
	} else {
		while (rows < MAX_ROWS && (rc = run_iter_next(it)) == 1) {
			const void *k, *v;
			size_t kl, vl;
			uint64_t seq;
			run_iter_row(it, &k, &kl, &seq, &v, &vl);
			uint32_t kind = run_iter_kind(it);
			if (kl > STRATA_MAX_KEY)
				FUZZ_FAIL("iteration returned a key of %zu bytes", kl);
			if (kind != STRATA_ROW_PUT && (kind != STRATA_ROW_DELETE || vl != 0))
				FUZZ_FAIL("iteration returned a row of kind %u with %zu value bytes", kind, vl);
			if (verified == 0 && rows > 0 && key_cmp(prev, prev_len, k, kl) >= 0)
				FUZZ_FAIL("a verified run iterates keys out of order");
			memcpy(prev, k, kl);
			prev_len = kl;
			volatile uint8_t sink = 0;
			for (size_t i = 0; i < vl; i++)
				sink ^= ((const uint8_t *)v)[i];
			(void)sink;
			if (nkeys < KEEP_KEYS && (rows % 7) == 0) {
				memcpy(keys[nkeys], k, kl);
				kinds[nkeys] = kind;
				klens[nkeys++] = kl;
			}
			rows++;
		}
		if (rc < 0)
			expect_corrupt(rc, "run_iter_next");
		run_iter_free(it);
	}

	/* Point gets: of keys the iteration saw, and of a key from the input. */
	for (int i = 0; i <= nkeys; i++) {
		const void *k = i < nkeys ? keys[i] : data;
		size_t kl = i < nkeys ? klens[i] : (size < 16 ? size : 16);
		if (kl == 0)
			continue;
		uint64_t seq;
		void *v = NULL;
		size_t vl;
		uint32_t kind = UINT32_MAX;
		rc = run_reader_get_kind(r, k, kl, &seq, &v, &vl, &kind);
		if (rc == 0 && i < nkeys && verified == 0 && kind != kinds[i])
			FUZZ_FAIL("a verified run gets key %d as kind %u, its iteration as %u", i, kind,
				  kinds[i]);
		if (rc == 0)
			env.free(v);
		else if (rc == STRATA_NOTFOUND && i < nkeys && verified == 0 && rows < MAX_ROWS)
			FUZZ_FAIL("a verified run misses key %d that its iteration returned", i);
		else if (rc != STRATA_NOTFOUND)
			expect_corrupt(rc, "run_reader_get");
	}

	/* A seek into the middle. */
	if (size > 0) {
		size_t kl = size < 8 ? size : 8;
		rc = run_iter_new(r, data + size - kl, kl, &it);
		if (rc != 0) {
			expect_corrupt(rc, "run_iter_new(seek)");
		} else {
			for (int i = 0; i < 16 && (rc = run_iter_next(it)) == 1; i++)
				;
			if (rc < 0)
				expect_corrupt(rc, "run_iter_next(seek)");
			run_iter_free(it);
		}
	}
	run_reader_close(r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	read_one(data, size, 1);
	uint8_t *fixed = fuzz_copy(data, size);
	fix_run(fixed, size);
	if (memcmp(fixed, data, size) != 0)
		read_one(fixed, size, 0);
	free(fixed);
	return 0;
}
