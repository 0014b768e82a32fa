/*
 * test_batch.c — the row batches of POST /v1/shards/{id}/rows (node/server/batch.h),
 * alone, without a node: NDJSON and binary batches decoded to rows, every refusal with
 * its result code, its words and where it names, the limits (rows, a 4096-byte key, the
 * value limit), and the encoders read back. batch.c belongs to the server, not to
 * libstrata.a: it is compiled in here.
 */
#include <stdint.h>
#include <stdio.h>
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
	return HARNESS_END("test_batch");
}
