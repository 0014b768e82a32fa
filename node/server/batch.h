/*
 * batch.h — the row batches of POST /v1/shards/{id}/rows, from bytes to rows and back,
 * with nothing of HTTP or of a store: what api.c decodes a body with, and what a scan
 * encodes its rows with. Two formats:
 *
 * NDJSON (BATCH_NDJSON), one object per line (blank lines and blanks around a line
 * ignored):
 *   {"key": "k", "value": "v"}  or  {"key": "k", "value_b64": "dg=="}
 *   or a delete, {"key": "k", "delete": true}
 * ("key_b64" in place of "key" for a binary key; "delete": false is a put).
 *
 * Binary (BATCH_BINARY, Content-Type application/x-strata-batch):
 *   u32 count, then count times { u32 key_len, u32 value_len, key bytes, value bytes }
 * all integers little-endian, nothing after the last row; a value_len of BATCH_DELETE
 * makes the row a delete (no value bytes follow).
 *
 * A batch is decoded whole or refused whole, at its first fault, under struct
 * batch_limits: the result code says what kind of refusal it is (STRATA_EINVAL a bad
 * batch, STRATA_ETOOBIG one over a limit, STRATA_ENOMEM), *what the words of the
 * answer's "error", and diag's message what was wrong and where ("line 2, column 14:
 * ...", "row 3 (at byte 40) runs past the end of the batch").
 */
#ifndef STRATA_BATCH_H
#define STRATA_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "../strata_types.h"

/** value_len of a delete row in the binary batch format. */
#define BATCH_DELETE UINT32_MAX
/** Most rows accepted in one POST. */
#define BATCH_MAX_ROWS (1u << 20)
/** The "error" of a key over the key limit: the same 400 in a batch (NDJSON and binary)
 *  as on GET and DELETE of a row. */
#define BATCH_KEY_TOO_LONG "key too long"

/** The formats of a batch. */
enum batch_format {
	/** One JSON object per line. */
	BATCH_NDJSON,
	/** application/x-strata-batch. */
	BATCH_BINARY,
};

/** What a batch may hold. */
struct batch_limits {
	/** Most rows (BATCH_MAX_ROWS on the node); more is STRATA_ETOOBIG. */
	size_t max_rows;
	/** Longest key in bytes (STRATA_MAX_KEY); longer is STRATA_EINVAL, "key too long". */
	size_t max_key;
	/** Longest value in bytes (the store's max_value_bytes); longer is STRATA_ETOOBIG. */
	uint64_t max_value;
};

/** Decoded rows. */
struct batch {
	/** The rows, in the order of the batch (env.calloc). A binary batch's keys and values
	 *  point into the bytes it was decoded from, an NDJSON batch's into arena. */
	strata_row *rows;
	/** Entries of rows. */
	size_t n;
	/** The decoded strings of an NDJSON batch (env.malloc, as long as its input: no
	 *  string decodes longer than it is written, so it never grows), or NULL. */
	uint8_t *arena;
	/** Lines of an NDJSON batch that its fast path left to jansson (batch.c says which). */
	size_t slow_lines;
};

/** Decode len bytes at p in format f into out (batch_destroy it). 0, or a negative
 *  STRATA_E* code with *what the refusal's words and diag's message saying why and
 *  where; out is then empty. */
int batch_decode(enum batch_format f, const void *p, size_t len, const struct batch_limits *lim,
		 struct batch *out, const char **what);
/** batch_decode of an NDJSON batch with jansson reading every line, the fast path
 *  never taken: the reference that the fast path is held to (tests, fuzzing). */
int batch_decode_ndjson_tree(const void *p, size_t len, const struct batch_limits *lim, struct batch *out,
			     const char **what);
/** Free what batch_decode made and empty b. Safe on an empty batch. */
void batch_destroy(struct batch *b);
/** Append n rows to out in format f: a batch that batch_decode reads back as the same
 *  rows. 0, STRATA_ENOMEM, or STRATA_ETOOBIG when a count or length has no binary
 *  encoding. */
int batch_encode(enum batch_format f, const strata_row *rows, size_t n, struct buf *out);
/** Append one row as an NDJSON line to out: "key" and "value" when they are UTF-8, else
 *  "key_b64" and "value_b64"; a delete has "delete": true in place of a value. tmp is
 *  scratch for base64. 0 or STRATA_ENOMEM. */
int batch_ndjson_row(struct buf *out, const strata_row *row, struct buf *tmp);

#endif
