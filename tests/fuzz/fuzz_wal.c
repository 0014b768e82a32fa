/*
 * fuzz_wal.c — libFuzzer target for the WAL segment reader (wal_open's recovery).
 *
 * The input is written as segment files in a scratch directory: one segment, or two
 * when the magic "STRWAL01" appears again past the first header (the input is split
 * there). Each file is named after the first_seq its header claims, as the writer
 * names them. Oracles beyond "no crash, leak or sanitizer report":
 *   - a failed open returns STRATA_ECORRUPT or STRATA_EVERSION and changes no file;
 *   - replayed entries have n >= 1 and strictly increasing positions, and every row is
 *     a put or a delete, a delete with no value;
 *   - after a successful open, an append, a close and a reopen replay exactly what the
 *     first open replayed plus the appended row (recovery is idempotent);
 *   - a reopen with a replay cursor replays only entries ending above it.
 * Each input runs as it is and, when that differs, with every header and entry CRC32C
 * recomputed, so mutations reach the checks behind the checksums.
 */
#include <stdint.h>

#include "../../node/core/wal.h"
#include "../../node/lib/env.h"
#include "fuzz_util.h"

/** What a replay saw. */
struct replay {
	/** Entries and rows passed to the callback. */
	uint64_t entries, rows;
	/** Last position of the previous entry. */
	uint64_t last;
	/** Entries must end above this. */
	uint64_t after;
	/** Sum over the bytes of every key and value (makes the sanitizers read them). */
	uint64_t sum;
	/** Rows that are deletes. */
	uint64_t deletes;
};

static int
replay_cb(void *ctx, uint64_t first_seq, const strata_row *rows, size_t n)
{
	struct replay *r = ctx;
	if (n == 0)
		FUZZ_FAIL("replay of an entry with no rows at %llu", (unsigned long long)first_seq);
	if (r->entries > 0 && first_seq <= r->last)
		FUZZ_FAIL("replay positions not increasing: %llu after %llu",
			  (unsigned long long)first_seq, (unsigned long long)r->last);
	uint64_t last = first_seq + n - 1;
	if (last <= r->after)
		FUZZ_FAIL("replayed entry ending at %llu, at or below the cursor %llu",
			  (unsigned long long)last, (unsigned long long)r->after);
	for (size_t i = 0; i < n; i++) {
		if (rows[i].kind != STRATA_ROW_PUT && rows[i].kind != STRATA_ROW_DELETE)
			FUZZ_FAIL("replayed row of kind %u at %llu", (unsigned)rows[i].kind,
				  (unsigned long long)(first_seq + i));
		if (rows[i].kind == STRATA_ROW_DELETE && rows[i].value_len != 0)
			FUZZ_FAIL("replayed delete with a value of %zu bytes", rows[i].value_len);
		r->deletes += rows[i].kind == STRATA_ROW_DELETE;
		const uint8_t *k = rows[i].key, *v = rows[i].value;
		for (size_t j = 0; j < rows[i].key_len; j++)
			r->sum += k[j];
		for (size_t j = 0; j < rows[i].value_len; j++)
			r->sum += v[j];
	}
	r->entries++;
	r->rows += n;
	r->last = last;
	return 0;
}

/** first_seq a segment header claims, or fallback when the bytes are too short. */
static uint64_t
header_seq(const uint8_t *p, size_t n, uint64_t fallback)
{
	if (n < 24)
		return fallback;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[16 + i];
	return v;
}

/** Sizes of the directory's files, as "name:size;" (to compare before and after). */
static void
dir_state(const char *dir, char *out, size_t cap)
{
	out[0] = '\0';
	size_t used = 0;
	struct wal_segment_info infos[8];
	int n = wal_inspect_dir(dir, infos, 8);
	for (int i = 0; i < n && i < 8 && used < cap; i++)
		used += (size_t)snprintf(out + used, cap - used, "%s:%llu;", infos[i].name,
					 (unsigned long long)infos[i].bytes);
}

/** Recompute the header and entry checksums of one segment's bytes. */
static void
fix_segment(uint8_t *b, size_t n)
{
	if (n < 24 || memcmp(b, "STRWAL01", 8) != 0)
		return;
	enc_u32(b + 12, crc32c(crc32c(0, b, 12), b + 16, 8));
	for (size_t off = 24; off + 20 <= n;) {
		uint64_t plen = dec_u32(b + off + 4);
		if (plen > n - off - 20)
			break;
		enc_u32(b + off, crc32c(0, b + off + 4, 16 + (size_t)plen));
		off += 20 + (size_t)plen;
	}
}

/** Where the input splits into two segments (size when it does not). */
static size_t
split_at(const uint8_t *data, size_t size)
{
	for (size_t i = 24; i + 8 <= size; i++)
		if (memcmp(data + i, "STRWAL01", 8) == 0)
			return i;
	return size;
}

static void
open_one(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_dir("wal");
	fuzz_clean(dir, 0);
	size_t split = split_at(data, size);
	char path[FUZZ_PATH_MAX];
	uint64_t s1 = header_seq(data, split, 1);
	snprintf(path, sizeof(path), "%s/%020llu.wal", dir, (unsigned long long)s1);
	fuzz_write_file(path, data, split);
	if (split < size) {
		uint64_t s2 = header_seq(data + split, size - split, s1 + 1000);
		if (s2 == s1)
			s2++;
		snprintf(path, sizeof(path), "%s/%020llu.wal", dir, (unsigned long long)s2);
		fuzz_write_file(path, data + split, size - split);
	}

	struct wal_options o = {
		.dir = dir, .sync = STRATA_SYNC_NONE, .sync_interval_ms = 0,
		.segment_bytes = 1u << 20, .max_entry_bytes = 0,
	};
	char before[1024], after[1024];
	dir_state(dir, before, sizeof(before));
	struct replay r1 = {0};
	struct wal *w = NULL;
	int rc = wal_open(&o, 0, 0, replay_cb, &r1, &w);
	if (rc != 0) {
		if (rc != STRATA_ECORRUPT && rc != STRATA_EVERSION)
			FUZZ_FAIL("wal_open of a file-content input gave %s: %s", fuzz_code(rc),
				  diag_last());
		if (strstr(diag_last(), dir) == NULL)
			FUZZ_FAIL("corruption message names no segment: %s", diag_last());
		dir_state(dir, after, sizeof(after));
		if (strcmp(before, after) != 0)
			FUZZ_FAIL("a failed wal_open changed the directory: %s -> %s", before, after);
		return;
	}
	/* Append a put and a delete, close, reopen: the same rows and the new ones come back. */
	strata_row row[2] = {{"fuzz-key", 8, "fuzz-value", 10}, {"fuzz-key", 8, NULL, 0, STRATA_ROW_DELETE}};
	struct wal_ticket t;
	rc = wal_submit(w, row, 2, &t);
	if (rc == 0)
		rc = wal_wait(w, &t);
	if (rc != 0 && rc != STRATA_ERANGE)
		FUZZ_FAIL("append after recovery: %s: %s", fuzz_code(rc), diag_last());
	int appended = rc == 0;
	wal_close(w);
	struct replay r2 = {0};
	rc = wal_open(&o, 0, 0, replay_cb, &r2, &w);
	if (rc != 0)
		FUZZ_FAIL("a recovered WAL does not reopen: %s: %s", fuzz_code(rc),
			  diag_last());
	if (r2.rows != r1.rows + 2 * (uint64_t)appended || r2.sum < r1.sum)
		FUZZ_FAIL("reopen replayed %llu rows, the first open %llu (+%d appended)",
			  (unsigned long long)r2.rows, (unsigned long long)r1.rows, 2 * appended);
	if (r2.deletes != r1.deletes + (uint64_t)appended)
		FUZZ_FAIL("reopen replayed %llu deletes, the first open %llu (+%d appended)",
			  (unsigned long long)r2.deletes, (unsigned long long)r1.deletes, appended);
	if (appended && r2.last != t.last_seq)
		FUZZ_FAIL("the appended row came back at %llu, not %llu", (unsigned long long)r2.last,
			  (unsigned long long)t.last_seq);
	wal_close(w);
	/* A cursor halfway: only entries ending above it are replayed. */
	struct replay r3 = {.after = r2.last / 2};
	rc = wal_open(&o, r3.after, r3.after + 1, replay_cb, &r3, &w);
	if (rc != 0)
		FUZZ_FAIL("reopen with cursor %llu: %s: %s", (unsigned long long)r3.after,
			  fuzz_code(rc), diag_last());
	wal_close(w);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	open_one(data, size);
	uint8_t *fixed = fuzz_copy(data, size);
	size_t split = split_at(data, size);
	fix_segment(fixed, split);
	fix_segment(fixed + split, size - split);
	if (memcmp(fixed, data, size) != 0)
		open_one(fixed, size);
	free(fixed);
	return 0;
}
