/*
 * test_batch.c — the row batches of POST /v1/shards/{id}/rows (node/server/batch.h),
 * alone, without a node: NDJSON and binary batches decoded to rows, every refusal with
 * its result code, its words and where it names, the limits (rows, a 4096-byte key, the
 * value limit), and the encoders read back. batch.c belongs to the server, not to
 * libstrata.a: it is compiled in here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../node/lib/diag.h"
#include "../../node/server/batch.c"
#include "harness.h"

/** The node's limits, with values of at most 1 KiB (strata serve --max-value 1K). */
static const struct batch_limits lim = {.max_rows = BATCH_MAX_ROWS, .max_key = STRATA_MAX_KEY, .max_value = 1024};

/** Decode the C string s as NDJSON under lim into b; 0 or the code, with the refusal
 *  printed. */
static int
ndjson(const char *s, struct batch *b)
{
	const char *what = NULL;
	int rc = batch_decode(BATCH_NDJSON, s, strlen(s), &lim, b, &what);
	if (rc != 0)
		fprintf(stderr, "  refused (%d, %s): %s\n", rc, what, diag_last());
	return rc;
}

/** 1 when row i of b is kind with key k and (a put) value v of vn bytes. */
static int
row_is(const struct batch *b, size_t i, uint32_t kind, const char *k, const void *v, size_t vn)
{
	const strata_row *r = i < b->n ? &b->rows[i] : NULL;
	int ok = r != NULL && r->kind == kind && r->key_len == strlen(k) && memcmp(r->key, k, r->key_len) == 0 &&
		 r->value_len == (kind == STRATA_ROW_DELETE ? 0 : vn) &&
		 (kind == STRATA_ROW_DELETE || vn == 0 || memcmp(r->value, v, vn) == 0);
	if (!ok && r != NULL)
		fprintf(stderr, "  row %zu: kind %u key '%.*s' value '%.*s' (%zu bytes)\n", i, r->kind,
			(int)r->key_len, (const char *)r->key, (int)r->value_len, (const char *)r->value, r->value_len);
	else if (!ok)
		fprintf(stderr, "  row %zu: none (%zu rows)\n", i, b->n);
	return ok;
}

/** 1 when p[0..n) in format f is refused under l with rc, the words what and a message
 *  that has detail in it, leaving the batch empty. */
static int
refused_under(enum batch_format f, const void *p, size_t n, const struct batch_limits *l, int rc, const char *what,
	      const char *detail)
{
	struct batch b = {.n = 99};
	const char *got = NULL;
	diag_clear();
	int r = batch_decode(f, p, n, l, &b, &got);
	int ok = r == rc && got != NULL && strcmp(got, what) == 0 && strstr(diag_last(), detail) != NULL &&
		 b.rows == NULL && b.n == 0 && b.arena == NULL;
	if (!ok)
		fprintf(stderr, "  got %d '%s' \"%s\" (%zu rows), want %d '%s' \"...%s...\"\n", r, got ? got : "(none)",
			diag_last(), b.n, rc, what, detail);
	batch_destroy(&b);
	return ok;
}

/** refused_under the node's limits. */
static int
refused(enum batch_format f, const void *p, size_t n, int rc, const char *what, const char *detail)
{
	return refused_under(f, p, n, &lim, rc, what, detail);
}

/** refused for an NDJSON C string. */
static int
nd_refused(const char *s, int rc, const char *what, const char *detail)
{
	return refused(BATCH_NDJSON, s, strlen(s), rc, what, detail);
}

/** A binary batch under construction: put its count first, then rows. */
static void
bin_u32(struct buf *b, uint32_t v)
{
	buf_put_u32(b, v);
}

/** Append a row (key, then value_len bytes of value or, with value NULL and
 *  value_len BATCH_DELETE, none) to a binary batch. */
static void
bin_row(struct buf *b, const char *key, const char *value, uint32_t value_len)
{
	bin_u32(b, (uint32_t)strlen(key));
	bin_u32(b, value_len);
	buf_append(b, key, strlen(key));
	if (value != NULL)
		buf_append(b, value, value_len);
}

TEST(ndjson_rows_of_every_form)
{
	const char *s = "{\"key\":\"alpha\",\"value\":\"one\"}\n"
			"{\"key\":\"beta\",\"value_b64\":\"AAEC/w==\"}\r\n"
			"\n"
			"   \t\r\n"
			"  {\"key_b64\":\"AP8=\",\"value\":\"binary key\"}  \n"
			"{\"value\":\"caf\\u00e9\",\"key\":\"dir/x y\"}\n"
			"{\"key\":\"gone\",\"delete\":true}\n"
			"{\"key\":\"kept\",\"delete\":false,\"value\":\"\"}\n"
			"{\"key\":\"nul\",\"value\":\"a\\u0000b\"}";
	struct batch b;
	REQUIRE_EQ(ndjson(s, &b), 0);
	CHECK_EQ(b.n, 7);
	CHECK(row_is(&b, 0, STRATA_ROW_PUT, "alpha", "one", 3));
	CHECK(row_is(&b, 1, STRATA_ROW_PUT, "beta", "\x00\x01\x02\xff", 4));
	CHECK(b.n > 2 && b.rows[2].key_len == 2 && memcmp(b.rows[2].key, "\x00\xff", 2) == 0);
	CHECK(b.n > 2 && b.rows[2].value_len == 10 && memcmp(b.rows[2].value, "binary key", 10) == 0);
	CHECK(row_is(&b, 3, STRATA_ROW_PUT, "dir/x y", "caf\xc3\xa9", 5));
	CHECK(row_is(&b, 4, STRATA_ROW_DELETE, "gone", NULL, 0));
	CHECK(row_is(&b, 5, STRATA_ROW_PUT, "kept", "", 0));
	CHECK(row_is(&b, 6, STRATA_ROW_PUT, "nul", "a\0b", 3));
	/* The strings live in the arena, which is as long as the input and never moves. */
	for (size_t i = 0; i < b.n; i++) {
		CHECK((const uint8_t *)b.rows[i].key >= b.arena &&
		      (const uint8_t *)b.rows[i].key < b.arena + strlen(s));
		CHECK((const uint8_t *)b.rows[i].value >= b.arena &&
		      (const uint8_t *)b.rows[i].value + b.rows[i].value_len <= b.arena + strlen(s));
	}
	batch_destroy(&b);
	CHECK(b.rows == NULL && b.n == 0 && b.arena == NULL);
	batch_destroy(&b);
}

/** An NDJSON body and how it is refused: code, words, what the message says. */
struct nd_refusal {
	/** The body. */
	const char *body;
	/** The result code. */
	int rc;
	/** The answer's words. */
	const char *what;
	/** A part of the message. */
	const char *detail;
};

TEST(ndjson_refusals_name_the_line)
{
	static const struct nd_refusal cases[] = {
		{"", STRATA_EINVAL, "bad batch", "the body has no rows"},
		{" \n\r\n\t", STRATA_EINVAL, "bad batch", "the body has no rows"},
		{"{\"key\":\"a\",\"value\":\"v\"}\n{\"key\":\"b\",\"value\":}\n", STRATA_EINVAL, "invalid JSON",
		 "line 2, column "},
		{"{\"key\":\"a\",\"value\":\"v\"} {}\n", STRATA_EINVAL, "invalid JSON", "line 1, column "},
		{"{\"key\":\"a\",\"key\":\"b\",\"value\":\"v\"}", STRATA_EINVAL, "invalid JSON", "line 1, column "},
		{"\n\n[1,2]\n", STRATA_EINVAL, "bad row", "line 3: expected a JSON object"},
		{"{\"key\":\"a\",\"valeu\":\"v\"}", STRATA_EINVAL, "bad row",
		 "line 1: unknown field \"valeu\" (expected key or key_b64"},
		{"{\"value\":\"v\"}", STRATA_EINVAL, "bad row", "line 1: needs exactly one of \"key\" and \"key_b64\""},
		{"{\"key\":\"a\",\"key_b64\":\"YQ==\",\"value\":\"v\"}", STRATA_EINVAL, "bad row",
		 "line 1: needs exactly one of \"key\" and \"key_b64\""},
		{"{\"key\":\"a\"}", STRATA_EINVAL, "bad row",
		 "line 1: needs exactly one of \"value\" and \"value_b64\""},
		{"{\"key\":\"a\",\"value\":\"v\",\"value_b64\":\"dg==\"}", STRATA_EINVAL, "bad row",
		 "line 1: needs exactly one of \"value\" and \"value_b64\""},
		{"{\"key\":\"a\",\"delete\":false}", STRATA_EINVAL, "bad row",
		 "line 1: needs exactly one of \"value\" and \"value_b64\""},
		{"{\"key\":1,\"value\":\"v\"}", STRATA_EINVAL, "bad row", "line 1: \"key\" must be a string"},
		{"{\"key\":\"a\",\"value\":null}", STRATA_EINVAL, "bad row", "line 1: \"value\" must be a string"},
		{"{\"key_b64\":[],\"value\":\"v\"}", STRATA_EINVAL, "bad row", "line 1: \"key_b64\" must be a string"},
		{"{\"key\":\"a\",\"value\":\"v\"}\n{\"key\":\"b\",\"value_b64\":\"@@@\"}", STRATA_EINVAL, "bad base64",
		 "line 2: \"value_b64\" is not valid base64"},
		{"{\"key_b64\":\"Y\",\"value\":\"v\"}", STRATA_EINVAL, "bad base64",
		 "line 1: \"key_b64\" is not valid base64"},
		{"{\"key\":\"a\",\"delete\":1}", STRATA_EINVAL, "bad row", "line 1: \"delete\" must be true or false"},
		{"{\"key\":\"a\",\"delete\":true,\"value\":\"x\"}", STRATA_EINVAL, "bad row",
		 "line 1: a delete has no \"value\" or \"value_b64\""},
		{"{\"key\":\"a\",\"delete\":true,\"value_b64\":\"\"}", STRATA_EINVAL, "bad row",
		 "line 1: a delete has no \"value\" or \"value_b64\""},
		{"{\"key\":\"\",\"value\":\"v\"}", STRATA_EINVAL, "bad row", "line 1: empty key"},
		{"{\"key\":\"a\",\"value\":\"v\"}\n\n{\"key_b64\":\"\",\"delete\":true}", STRATA_EINVAL, "bad row",
		 "line 3: empty key"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(nd_refused(cases[i].body, cases[i].rc, cases[i].what, cases[i].detail));
}

/** An NDJSON batch of one row whose key is klen 'k's and value vlen 'v's (free it). */
static char *
nd_sized(size_t klen, size_t vlen)
{
	char *s = malloc(klen + vlen + 64);
	size_t n = (size_t)sprintf(s, "{\"key\":\"");
	memset(s + n, 'k', klen);
	n += klen;
	n += (size_t)sprintf(s + n, "\",\"value\":\"");
	memset(s + n, 'v', vlen);
	n += vlen;
	sprintf(s + n, "\"}\n");
	return s;
}

TEST(limits_of_rows_keys_and_values)
{
	/* A key of 4096 bytes is a key; 4097 is a 400 "key too long", in either format. */
	char *s = nd_sized(4096, 1024);
	struct batch b;
	REQUIRE_EQ(ndjson(s, &b), 0);
	CHECK(b.n == 1 && b.rows[0].key_len == 4096 && b.rows[0].value_len == 1024);
	batch_destroy(&b);
	free(s);
	s = nd_sized(4097, 1);
	CHECK(nd_refused(s, STRATA_EINVAL, BATCH_KEY_TOO_LONG, "line 1: the key is 4097 bytes; the limit is 4096"));
	free(s);
	/* A value over the limit is a 413. */
	s = nd_sized(1, 1025);
	CHECK(nd_refused(s, STRATA_ETOOBIG, "row too large",
			 "line 1: value of 1025 bytes is over the limit of 1024 bytes"));
	free(s);
	struct buf k = {0};
	bin_u32(&k, 1);
	char key[4098];
	memset(key, 'k', sizeof(key) - 1);
	key[4097] = '\0';
	bin_row(&k, key, "v", 1);
	CHECK(refused(BATCH_BINARY, k.data, k.len, STRATA_EINVAL, BATCH_KEY_TOO_LONG,
		      "row 0: the key is 4097 bytes; the limit is 4096"));
	buf_reset(&k);
	key[4096] = '\0';
	bin_u32(&k, 1);
	bin_row(&k, key, "v", 1);
	const char *what = NULL;
	CHECK_EQ(batch_decode(BATCH_BINARY, k.data, k.len, &lim, &b, &what), 0);
	CHECK(b.n == 1 && b.rows[0].key_len == 4096);
	batch_destroy(&b);
	buf_reset(&k);
	char big[1026];
	memset(big, 'v', sizeof(big));
	bin_u32(&k, 2);
	bin_row(&k, "a", big, 1024);
	bin_row(&k, "b", big, 1025);
	CHECK(refused(BATCH_BINARY, k.data, k.len, STRATA_ETOOBIG, "row too large",
		      "row 1: value of 1025 bytes is over the limit of 1024 bytes"));
	buf_destroy(&k);
	/* The row count, in either format. */
	struct batch_limits three = lim;
	three.max_rows = 3;
	/* Blank lines are no rows. */
	const char *rows3 = "{\"key\":\"a\",\"value\":\"v\"}\n{\"key\":\"b\",\"value\":\"v\"}\n\n"
			    "{\"key\":\"c\",\"value\":\"v\"}\n \n";
	char four[256];
	snprintf(four, sizeof(four), "%s{\"key\":\"d\",\"value\":\"v\"}\n", rows3);
	CHECK(refused_under(BATCH_NDJSON, four, strlen(four), &three, STRATA_ETOOBIG, "batch too large",
			    "4 rows in one batch; the limit is 3"));
	CHECK_EQ(batch_decode(BATCH_NDJSON, rows3, strlen(rows3), &three, &b, &what), 0);
	CHECK_EQ(b.n, 3);
	batch_destroy(&b);
	const uint8_t count4[] = {4, 0, 0, 0};
	CHECK(refused_under(BATCH_BINARY, count4, sizeof(count4), &three, STRATA_ETOOBIG, "batch too large",
			    "4 rows in one batch; the limit is 3"));
	const uint8_t huge[] = {1, 0, 0x10, 0}; /* 2^20 + 1 rows */
	CHECK(refused(BATCH_BINARY, huge, sizeof(huge), STRATA_ETOOBIG, "batch too large",
		      "1048577 rows in one batch; the limit is 1048576"));
}

TEST(binary_rows_and_deletes)
{
	struct buf k = {0};
	bin_u32(&k, 4);
	bin_row(&k, "bin-1", "", 0);
	bin_row(&k, "bin-2", "\xa1\xa1\xa1", 3);
	bin_row(&k, "gone", NULL, BATCH_DELETE);
	bin_row(&k, "bin-3", "a\0b", 3);
	struct batch b;
	const char *what = NULL;
	REQUIRE_EQ(batch_decode(BATCH_BINARY, k.data, k.len, &lim, &b, &what), 0);
	CHECK_EQ(b.n, 4);
	CHECK(row_is(&b, 0, STRATA_ROW_PUT, "bin-1", "", 0));
	CHECK(row_is(&b, 1, STRATA_ROW_PUT, "bin-2", "\xa1\xa1\xa1", 3));
	CHECK(row_is(&b, 2, STRATA_ROW_DELETE, "gone", NULL, 0));
	CHECK(row_is(&b, 3, STRATA_ROW_PUT, "bin-3", "a\0b", 3));
	/* Keys and values point into the bytes decoded: nothing is copied. */
	CHECK(b.arena == NULL && b.n == 4 && (const uint8_t *)b.rows[1].key == k.data + 4 + 8 + 5 + 8);
	batch_destroy(&b);
	buf_destroy(&k);
}

TEST(binary_refusals_name_the_row_and_byte)
{
	const uint8_t three[] = {1, 0, 0};
	CHECK(refused(BATCH_BINARY, three, sizeof(three), STRATA_EINVAL, "bad batch",
		      "the batch is 3 bytes, shorter than its 4-byte row count"));
	CHECK(refused(BATCH_BINARY, "", 0, STRATA_EINVAL, "bad batch", "the batch is 0 bytes"));
	const uint8_t none[] = {0, 0, 0, 0};
	CHECK(refused(BATCH_BINARY, none, sizeof(none), STRATA_EINVAL, "bad batch", "the batch has no rows"));
	const uint8_t declares[] = {2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'k', 'v'};
	CHECK(refused(BATCH_BINARY, declares, sizeof(declares), STRATA_EINVAL, "bad batch",
		      "the batch declares 2 rows but has only 10 bytes after the count"));
	/* The second row's key runs past the end (the request test_http_server sends). */
	const uint8_t trunc[] = {2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'k', 'v', 5, 0, 0, 0, 1, 0, 0, 0, 'x'};
	CHECK(refused(BATCH_BINARY, trunc, sizeof(trunc), STRATA_EINVAL, "bad batch",
		      "row 1 (at byte 14) runs past the end of the batch"));
	/* Truncated in its lengths, in its value. */
	struct buf k = {0};
	bin_u32(&k, 3);
	bin_row(&k, "a", "v", 1);
	bin_row(&k, "b", "vv", 2);
	bin_row(&k, "c", "vvv", 3);
	for (size_t cut = 1; cut <= 9; cut++) {
		char want[64];
		snprintf(want, sizeof(want), "row 2 (at byte %zu) runs past the end", k.len - (3 + 8 + 1));
		CHECK(refused(BATCH_BINARY, k.data, k.len - cut, STRATA_EINVAL, "bad batch", want));
	}
	/* Bytes after the last row. */
	buf_append(&k, "xyz", 3);
	CHECK(refused(BATCH_BINARY, k.data, k.len, STRATA_EINVAL, "bad batch", "3 bytes after the last of 3 rows"));
	buf_reset(&k);
	bin_u32(&k, 1);
	bin_row(&k, "", "v", 1);
	CHECK(refused(BATCH_BINARY, k.data, k.len, STRATA_EINVAL, "bad row", "row 0: empty key"));
	/* A delete has no value bytes: what follows is the next row. */
	buf_reset(&k);
	bin_u32(&k, 1);
	bin_row(&k, "gone", NULL, BATCH_DELETE);
	buf_append(&k, "zz", 2);
	CHECK(refused(BATCH_BINARY, k.data, k.len, STRATA_EINVAL, "bad batch", "2 bytes after the last of 1 rows"));
	buf_destroy(&k);
}

/** 1 when a and b hold the same rows (a delete's value ignored). */
static int
same_rows(const struct batch *a, const struct batch *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		const strata_row *x = &a->rows[i], *y = &b->rows[i];
		if (x->kind != y->kind || x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) != 0)
			return 0;
		if (x->kind == STRATA_ROW_PUT &&
		    (x->value_len != y->value_len || (x->value_len && memcmp(x->value, y->value, x->value_len) != 0)))
			return 0;
	}
	return 1;
}

TEST(encoders_read_back_as_the_same_rows)
{
	const char *s = "{\"key\":\"alpha\",\"value\":\"one\"}\n"
			"{\"key_b64\":\"AP8=\",\"value_b64\":\"AAEC/w==\"}\n"
			"{\"key\":\"gone\",\"delete\":true}\n"
			"{\"key\":\"nul\",\"value\":\"a\\u0000b\"}\n"
			"{\"key\":\"empty\",\"value\":\"\"}\n";
	struct batch in;
	REQUIRE_EQ(ndjson(s, &in), 0);
	for (int f = BATCH_NDJSON; f <= BATCH_BINARY; f++) {
		struct buf out = {0};
		CHECK_EQ(batch_encode(f, in.rows, in.n, &out), 0);
		struct batch back;
		const char *what = NULL;
		CHECK_EQ(batch_decode(f, out.data, out.len, &lim, &back, &what), 0);
		CHECK(same_rows(&in, &back));
		batch_destroy(&back);
		buf_destroy(&out);
	}
	/* The NDJSON lines a scan streams: UTF-8 as strings, other bytes as base64. */
	struct buf out = {0}, tmp = {0};
	for (size_t i = 0; i < in.n; i++)
		CHECK_EQ(batch_ndjson_row(&out, &in.rows[i], &tmp), 0);
	const char *want = "{\"key\":\"alpha\",\"value\":\"one\"}\n"
			   "{\"key_b64\":\"AP8=\",\"value_b64\":\"AAEC/w==\"}\n"
			   "{\"key\":\"gone\",\"delete\":true}\n"
			   "{\"key\":\"nul\",\"value\":\"a\\u0000b\"}\n"
			   "{\"key\":\"empty\",\"value\":\"\"}\n";
	CHECK(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0);
	if (out.len != strlen(want) || memcmp(out.data, want, out.len) != 0)
		fprintf(stderr, "  encoded: %.*s", (int)out.len, (const char *)out.data);
	buf_destroy(&out);
	buf_destroy(&tmp);
	batch_destroy(&in);
	/* A value of 2^32-1 bytes would read as a delete: it has no binary encoding. */
	strata_row odd = {.key = "k", .key_len = 1, .value = "", .value_len = BATCH_DELETE};
	CHECK_EQ(batch_encode(BATCH_BINARY, &odd, 1, &out), STRATA_ETOOBIG);
	buf_destroy(&out);
}

/* ---------- the NDJSON fast path against jansson ---------- */

/** Decode p[0..n) as NDJSON both ways, batch_decode (the fast path where a line allows
 *  it) and batch_decode_ndjson_tree (jansson on every line): 1 when they agree on the
 *  code, the words, the message and every row, byte for byte. *slow (when not NULL) gets
 *  the lines the fast path left to jansson, SIZE_MAX for a refusal. */
static int
nd_agree(const char *p, size_t n, const struct batch_limits *l, size_t *slow)
{
	struct batch a, b;
	const char *wa = NULL, *wb = NULL;
	char ma[BATCH_DETAIL_MAX + 64], mb[BATCH_DETAIL_MAX + 64];
	diag_clear();
	int ra = batch_decode(BATCH_NDJSON, p, n, l, &a, &wa);
	snprintf(ma, sizeof(ma), "%s", diag_last());
	diag_clear();
	int rb = batch_decode_ndjson_tree(p, n, l, &b, &wb);
	snprintf(mb, sizeof(mb), "%s", diag_last());
	int ok = ra == rb && a.n == b.n && (ra == 0 || (wa && wb && strcmp(wa, wb) == 0 && strcmp(ma, mb) == 0));
	for (size_t i = 0; ok && i < a.n; i++) {
		const strata_row *x = &a.rows[i], *y = &b.rows[i];
		ok = x->kind == y->kind && x->key_len == y->key_len && x->value_len == y->value_len &&
		     memcmp(x->key, y->key, x->key_len) == 0 &&
		     (x->value_len == 0 || memcmp(x->value, y->value, x->value_len) == 0);
	}
	if (!ok)
		fprintf(stderr, "  fast path: %d '%s' \"%s\" (%zu rows); jansson: %d '%s' \"%s\" (%zu rows); input \"%.*s\"\n",
			ra, wa ? wa : "", ma, a.n, rb, wb ? wb : "", mb, b.n, (int)(n > 200 ? 200 : n), p);
	if (slow != NULL)
		*slow = ra == 0 ? a.slow_lines : SIZE_MAX;
	CHECK(b.slow_lines == (rb == 0 ? b.n : 0) || rb != 0);
	batch_destroy(&a);
	batch_destroy(&b);
	return ok;
}

/** A line and how many lines the fast path leaves to jansson when it is accepted
 *  (SIZE_MAX: it is refused). */
struct nd_line {
	const char *s;
	size_t slow;
};

TEST(ndjson_fast_path_takes_plain_lines_and_agrees_with_jansson_on_the_rest)
{
	static const struct nd_line cases[] = {
		/* Taken by the fast path. */
		{"{\"key\":\"a\",\"value\":\"v\"}", 0},
		{"{ \"key\" : \"a\" ,\t\"value\" : \"v\" }", 0},
		{"{\"value\":\"v\",\"key\":\"a\"}\n{\"key\":\"b\",\"value\":\"\"}", 0},
		{"{\"key\":\"gone\",\"delete\":true}", 0},
		{"{\"key\":\"kept\",\"delete\":false,\"value\":\"x\"}", 0},
		{"{\"key_b64\":\"AP8=\",\"value_b64\":\"AAEC/w==\"}", 0},
		{"{\"key\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\",\"value\":\"\xf4\x8f\xbf\xbf\"}", 0},
		{"{\"key\":\"a\",\"value_b64\":\"@@@\"}", SIZE_MAX},
		{"{\"key\":\"\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\"}", SIZE_MAX},
		{"{}", SIZE_MAX},
		{"{\"key\":\"a\",\"delete\":true,\"value\":\"x\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"key_b64\":\"YQ==\",\"value\":\"v\"}", SIZE_MAX},
		/* Left to jansson: escapes (accepted, and the lone surrogate refused). */
		{"{\"key\":\"a\",\"value\":\"say \\\"hi\\\"\\n\"}", 1},
		{"{\"key\":\"caf\\u00e9\",\"value\":\"a\\u0000b\"}", 1},
		{"{\"k\\u0065y\":\"a\",\"value\":\"v\"}", 1},
		{"{\"key\":\"a\",\"value\":\"v\"}\n{\"key\":\"b\",\"value\":\"\\/\"}", 1},
		{"{\"key\":\"a\",\"value\":\"\\ud800\"}", SIZE_MAX},
		/* Bytes that yajl lets through and JSON does not. */
		{"{\"key\":\"a\",\"value\":\"\xc0\x80\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"\xed\xa0\x80\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"\xf4\x90\x80\x80\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"\xe2\x82\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"\xff\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"\x01\"}", SIZE_MAX},
		{"{\"key\":\"a\",\f\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\v\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",/* c */\"value\":\"v\"}", SIZE_MAX},
		/* Shapes the fast path does not read. */
		{"{\"key\":\"a\",\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"valeu\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":{\"x\":1,\"x\":2}}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":[]}", SIZE_MAX},
		{"{\"key\":1,\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":1e999}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":null}", SIZE_MAX},
		{"{\"key\":true,\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"delete\":\"yes\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"delete\":1}", SIZE_MAX},
		{"[1,2]", SIZE_MAX},
		{"\"key\"", SIZE_MAX},
		{"true", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\"} {}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\"", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\"}}", SIZE_MAX},
		{"{\"key\":\"a\",,\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value_b64\":\"@\"}\"}", SIZE_MAX}, /* found by fuzz_batch */
		/* A line the fast path declined must not leave its parser's state to the next. */
		{"{\"key\":\"a\",\"value\":\"v\\n\"}\n,{\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\\n\"}\n:{\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":[]}\n,{\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":[\"x\"]}\n,{\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":null}\n,{\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\",\"x\":1}\n:{\"key\":\"b\",\"value\":\"v\"}", SIZE_MAX},
		{"[{\"key\":\"a\",\"value\":\"v\"}\n,{\"key\":\"b\",\"value\":\"v\"}]", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\"}\n{\"key\":\"b\",\"value\":\"\\u00e9\"}\n{\"key\":\"c\",\"value\":\"v\"}", 1},
		{"{\"key\":\"a\",\"value\":\"v\"}\"", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\"}tru", SIZE_MAX},
		{"{\"key\":\"a\",\"value\":\"v\"}1", SIZE_MAX},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t slow = 0;
		CHECK(nd_agree(cases[i].s, strlen(cases[i].s), &lim, &slow));
		if (slow != cases[i].slow)
			fprintf(stderr, "  case %zu: %zu lines left to jansson, want %zu\n", i, slow, cases[i].slow);
		CHECK_EQ(slow, cases[i].slow);
	}
	/* A hundred plain rows, as strata load and most clients send them: no line for jansson. */
	char *s = malloc(100 * 256);
	size_t n = 0;
	for (int i = 0; i < 100; i++)
		n += (size_t)sprintf(s + n, "{\"key\":\"k%015d\",\"value\":\"%0200d\"}\n", i, i);
	size_t slow = 1;
	CHECK(nd_agree(s, n, &lim, &slow));
	CHECK_EQ(slow, 0);
	free(s);
}

/** A random number (xorshift64*). */
static uint64_t
nd_rand(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 2685821657736338717ull;
}

/** A random blank: mostly none, now and then one JSON does not allow (form feed, tab). */
static const char *
nd_blank(uint64_t *x)
{
	static const char *const blanks[] = {" ", "\t", "\r", "\f", "\v"};
	uint64_t r = nd_rand(x) % 64;
	return r < 48 ? "" : r < 62 ? blanks[r % 3] : blanks[3 + r % 2];
}

/** Append a random string literal to s at *n: mostly plain characters, now and then UTF-8,
 *  an escape, or bytes that JSON does not allow. */
static void
nd_string(char *s, size_t *n, uint64_t *x, int b64)
{
	static const char *const plain[] = {"a", "Z", "0", "/", "+", "=", " ", "Q", "w"};
	static const char *const odd[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc0\x80", "\xed\xa0\x80",
					  "\xf4\x90\x80\x80", "\xe2\x82", "\xff", "\x01", "\\\"", "\\\\", "\\n",
					  "\\u0000", "\\u00e9", "\\ud800", "\\ud83d\\ude00", "\\x", "\\/"};
	s[(*n)++] = '"';
	unsigned len = (unsigned)(nd_rand(x) % 9) * (b64 ? 4 : 1);
	for (unsigned k = 0; k < len; k++) {
		uint64_t c = nd_rand(x) % 200;
		*n += (size_t)sprintf(s + *n, "%s", c < 194 ? plain[c % 9] : odd[nd_rand(x) % 18]);
	}
	s[(*n)++] = '"';
}

/** Append to s at *n a random line of a row: mostly a well-formed row, with the things
 *  that tell the two parsers apart mixed in. */
static void
nd_piece(char *s, size_t *n, uint64_t *x)
{
	static const char *const others[] = {"\"other\"", "\"k\\u0065y\"", "\"key\"", "\"value\""};
	static const char *const values[] = {"true", "false", "null", "1", "-2.5e3", "[]", "{}", "{\"a\":1,\"a\":2}"};
	int fields[4], nf = 0;
	uint64_t r = nd_rand(x);
	fields[nf++] = r % 4 ? ND_KEY : ND_KEY64;
	fields[nf++] = (r >> 4) % 6 == 0 ? ND_DEL : (r >> 8) % 3 ? ND_VAL : ND_VAL64;
	if ((r >> 12) % 16 == 0)
		fields[nf++] = (int)((r >> 16) % ND_FIELDS);
	if ((r >> 20) % 16 == 0)
		fields[nf++] = -1;
	if ((r >> 24) % 2) { /* either order */
		int t = fields[0];
		fields[0] = fields[1];
		fields[1] = t;
	}
	*n += (size_t)sprintf(s + *n, "%s{%s", nd_blank(x), nd_blank(x));
	for (int f = 0; f < nf; f++) {
		if (f > 0)
			*n += (size_t)sprintf(s + *n, "%s%s%s", nd_blank(x),
					      (const char *[]){",", ",", ",", ",\n", ""}[nd_rand(x) % 200 < 197 ? 0 : 3 + nd_rand(x) % 2],
					      nd_blank(x));
		*n += (size_t)sprintf(s + *n, "%s%s:%s",
				      fields[f] < 0 ? others[nd_rand(x) % 4] : (const char *[]){"\"key\"", "\"key_b64\"",
							"\"value\"", "\"value_b64\"", "\"delete\""}[fields[f]],
				      nd_blank(x), nd_blank(x));
		if (fields[f] == ND_DEL && nd_rand(x) % 8)
			*n += (size_t)sprintf(s + *n, "%s", nd_rand(x) % 2 ? "true" : "false");
		else if (nd_rand(x) % 16 == 0)
			*n += (size_t)sprintf(s + *n, "%s", values[nd_rand(x) % 8]);
		else
			nd_string(s, n, x, fields[f] == ND_KEY64 || fields[f] == ND_VAL64);
	}
	*n += (size_t)sprintf(s + *n, "%s%s%s", nd_blank(x), nd_rand(x) % 100 ? "}" : nd_rand(x) % 2 ? "" : "}}",
			      nd_blank(x));
	/* Now and then a second object on the same line, or a value cut short after it. */
	uint64_t more = nd_rand(x) % 100;
	if (more == 0)
		nd_piece(s, n, x);
	else if (more == 1)
		*n += (size_t)sprintf(s + *n, "%s", (const char *[]){"\"", "tru", "1", "{", "[", "\"a"}[nd_rand(x) % 6]);
}

TEST(ndjson_fast_path_agrees_with_jansson_on_random_lines)
{
	static const struct batch_limits small = {.max_rows = 8, .max_key = 12, .max_value = 24};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	char s[4096];
	size_t fast = 0, slow_total = 0, refused_n = 0;
	for (int it = 0; it < 40000; it++) {
		size_t n = 0;
		unsigned lines = 1 + (unsigned)(nd_rand(&x) % 3);
		for (unsigned l = 0; l < lines; l++) {
			nd_piece(s, &n, &x);
			s[n++] = '\n';
		}
		size_t slow = 0;
		if (!nd_agree(s, n, nd_rand(&x) % 2 ? &lim : &small, &slow)) {
			CHECK(!"the fast path and jansson disagree");
			break;
		}
		if (slow == SIZE_MAX)
			refused_n++;
		else if (slow == 0)
			fast++;
		else
			slow_total++;
	}
	fprintf(stderr, "  random batches: %zu accepted on the fast path alone, %zu accepted with jansson's help, "
		"%zu refused\n", fast, slow_total, refused_n);
	/* The generator reaches all three, or the comparison says little. */
	CHECK(fast > 1000 && slow_total > 100 && refused_n > 1000);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(ndjson_rows_of_every_form);
	RUN(ndjson_refusals_name_the_line);
	RUN(limits_of_rows_keys_and_values);
	RUN(binary_rows_and_deletes);
	RUN(binary_refusals_name_the_row_and_byte);
	RUN(encoders_read_back_as_the_same_rows);
	RUN(ndjson_fast_path_takes_plain_lines_and_agrees_with_jansson_on_the_rest);
	RUN(ndjson_fast_path_agrees_with_jansson_on_random_lines);
	return HARNESS_END("test_batch");
}
