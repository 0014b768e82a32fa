/*
 * fuzz_batch.c — libFuzzer target for the row batches of POST /v1/shards/{id}/rows
 * (node/server/batch.c): every input is decoded as NDJSON and as a binary batch, under
 * limits small enough to be reached. Oracles beyond "no crash, leak or sanitizer
 * report": a refusal is STRATA_EINVAL, STRATA_ETOOBIG or STRATA_ENOMEM with words and a
 * message, and leaves no rows; an accepted batch keeps the limits, its rows point into
 * the input (binary) or the arena (NDJSON), a binary batch re-encodes to its very bytes,
 * the rows encode in both formats to batches that decode to the same rows (the same
 * binary encoding, which is one per list of rows), and an NDJSON encoding re-encodes to
 * itself, and the NDJSON fast path decodes as jansson does on every line.
 */
#include <stdint.h>
#include <string.h>

#include "../../node/server/batch.h"
#include "fuzz_util.h"

/** Limits the inputs reach: a few rows, short keys and values. */
static const struct batch_limits fuzz_lim = {.max_rows = 8, .max_key = 16, .max_value = 32};

/** Whether [p, p + n) lies in [lo, lo + len). */
static int
fuzz_inside(const void *p, size_t n, const uint8_t *lo, size_t len)
{
	const uint8_t *q = p;
	return q >= lo && n <= len && (size_t)(q - lo) <= len - n;
}

/** Encode b in format f into out and decode it back: the rows must be those whose binary
 *  encoding (canonical: one encoding per list of rows) is canon. */
static void
fuzz_round_trip(const struct batch *b, enum batch_format f, const struct buf *canon, struct buf *out)
{
	const char *name = f == BATCH_BINARY ? "binary" : "NDJSON";
	buf_reset(out);
	int rc = batch_encode(f, b->rows, b->n, out);
	if (rc != 0)
		FUZZ_FAIL("%zu accepted rows do not encode as %s: %s: %s", b->n, name, fuzz_code(rc), diag_last());
	struct batch back;
	const char *what = NULL;
	rc = batch_decode(f, out->data, out->len, &fuzz_lim, &back, &what);
	if (rc != 0)
		FUZZ_FAIL("the %s encoding of %zu accepted rows is refused (%s): %s", name, b->n, what, diag_last());
	struct buf again = {0};
	if (batch_encode(BATCH_BINARY, back.rows, back.n, &again) != 0 || again.len != canon->len ||
	    memcmp(again.data, canon->data, canon->len) != 0)
		FUZZ_FAIL("the %s encoding reads back as other rows", name);
	buf_destroy(&again);
	batch_destroy(&back);
}

/** Decode data in format f and hold the result to the oracles. */
static void
fuzz_one(enum batch_format f, const uint8_t *data, size_t size)
{
	struct batch b;
	const char *what = NULL;
	diag_clear();
	int rc = batch_decode(f, data, size, &fuzz_lim, &b, &what);
	if (rc != 0) {
		if (rc != STRATA_EINVAL && rc != STRATA_ETOOBIG && rc != STRATA_ENOMEM)
			FUZZ_FAIL("a refusal with %s: %s", fuzz_code(rc), diag_last());
		if (what == NULL || what[0] == '\0' || diag_last()[0] == '\0')
			FUZZ_FAIL("a refusal (%s) without words or message", fuzz_code(rc));
		if (b.rows != NULL || b.n != 0 || b.arena != NULL)
			FUZZ_FAIL("a refused batch left %zu rows", b.n);
		return;
	}
	if (b.n == 0 || b.n > fuzz_lim.max_rows)
		FUZZ_FAIL("%zu rows accepted (1..%zu)", b.n, fuzz_lim.max_rows);
	for (size_t i = 0; i < b.n; i++) {
		const strata_row *r = &b.rows[i];
		if (r->key_len == 0 || r->key_len > fuzz_lim.max_key || r->value_len > fuzz_lim.max_value)
			FUZZ_FAIL("row %zu has a key of %zu and a value of %zu bytes", i, r->key_len, r->value_len);
		if (r->kind != STRATA_ROW_PUT && (r->kind != STRATA_ROW_DELETE || r->value_len != 0))
			FUZZ_FAIL("row %zu is of kind %u with a value of %zu bytes", i, r->kind, r->value_len);
		const uint8_t *lo = f == BATCH_BINARY ? data : b.arena;
		if (!fuzz_inside(r->key, r->key_len, lo, size) || !fuzz_inside(r->value, r->value_len, lo, size))
			FUZZ_FAIL("row %zu points outside the %s", i, f == BATCH_BINARY ? "input" : "arena");
	}
	struct buf canon = {0}, nd = {0}, bin = {0};
	if (batch_encode(BATCH_BINARY, b.rows, b.n, &canon) != 0)
		FUZZ_FAIL("%zu accepted rows do not encode: %s", b.n, diag_last());
	if (f == BATCH_BINARY && (canon.len != size || memcmp(canon.data, data, size) != 0))
		FUZZ_FAIL("an accepted binary batch of %zu bytes re-encodes to %zu other bytes", size, canon.len);
	fuzz_round_trip(&b, BATCH_BINARY, &canon, &bin);
	fuzz_round_trip(&b, BATCH_NDJSON, &canon, &nd);
	/* The NDJSON encoding is canonical: decoded and encoded again, it is the same text. */
	struct batch again;
	const char *what2 = NULL;
	if (batch_decode(BATCH_NDJSON, nd.data, nd.len, &fuzz_lim, &again, &what2) != 0)
		FUZZ_FAIL("the NDJSON encoding is refused (%s): %s", what2, diag_last());
	struct buf nd2 = {0};
	if (batch_encode(BATCH_NDJSON, again.rows, again.n, &nd2) != 0 || nd2.len != nd.len ||
	    memcmp(nd2.data, nd.data, nd.len) != 0)
		FUZZ_FAIL("the NDJSON encoding does not re-encode to itself");
	buf_destroy(&nd2);
	batch_destroy(&again);
	buf_destroy(&canon);
	buf_destroy(&nd);
	buf_destroy(&bin);
	batch_destroy(&b);
}

/** The NDJSON fast path against jansson on every line (batch_decode_ndjson_tree): the
 *  same code, words, message and rows. */
static void
fuzz_fast_path(const uint8_t *data, size_t size)
{
	struct batch a, b;
	const char *wa = NULL, *wb = NULL;
	char ma[1024];
	diag_clear();
	int ra = batch_decode(BATCH_NDJSON, data, size, &fuzz_lim, &a, &wa);
	snprintf(ma, sizeof(ma), "%s", diag_last());
	diag_clear();
	int rb = batch_decode_ndjson_tree(data, size, &fuzz_lim, &b, &wb);
	if (ra != rb || a.n != b.n)
		FUZZ_FAIL("the fast path says %s (%zu rows), jansson %s (%zu rows)", fuzz_code(ra), a.n, fuzz_code(rb),
			  b.n);
	if (ra != 0 && (strcmp(wa, wb) != 0 || strcmp(ma, diag_last()) != 0))
		FUZZ_FAIL("the fast path refuses with '%s' \"%s\", jansson with '%s' \"%s\"", wa, ma, wb, diag_last());
	for (size_t i = 0; i < a.n; i++) {
		const strata_row *x = &a.rows[i], *y = &b.rows[i];
		if (x->kind != y->kind || x->key_len != y->key_len || x->value_len != y->value_len ||
		    memcmp(x->key, y->key, x->key_len) != 0 ||
		    (x->value_len > 0 && memcmp(x->value, y->value, x->value_len) != 0))
			FUZZ_FAIL("row %zu: the fast path and jansson decode other bytes", i);
	}
	batch_destroy(&a);
	batch_destroy(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	diag_log_sink = fuzz_quiet_sink;
	fuzz_one(BATCH_NDJSON, data, size);
	fuzz_one(BATCH_BINARY, data, size);
	fuzz_fast_path(data, size);
	return 0;
}
