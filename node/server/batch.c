/* batch.c — the row batches of POST /v1/shards/{id}/rows, NDJSON and binary, decoded and encoded (batch.h). */
#include "batch.h"

#include <assert.h>
#include <jansson.h>
#include <yajl/yajl_parse.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../lib/base64.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/text.h"

/** Longest message of a refusal (what the answer's "detail" shows). */
#define BATCH_DETAIL_MAX 600

static int
batch_fail(const char **what, int rc, const char *words, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/** Refuse the batch with rc: *what the answer's words, diag's message fmt. rc. */
static int
batch_fail(const char **what, int rc, const char *words, const char *fmt, ...)
{
	char msg[BATCH_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*what = words;
	return diag_set(rc, "%s", msg);
}

/** The limits of one row (where idx: "row 3", "line 2"), in the words strata_check_row
 *  gives them; a key over the limit is a bad request (400) on every route, a value over
 *  it a body too large (413). */
static int
batch_check_row(const struct batch_limits *lim, const char *where, size_t idx, size_t klen, size_t vlen,
		const char **what)
{
	if (klen > lim->max_key)
		return batch_fail(what, STRATA_EINVAL, BATCH_KEY_TOO_LONG,
				  "%s %zu: the key is %zu bytes; the limit is %zu", where, idx, klen, lim->max_key);
	if (klen == 0)
		return batch_fail(what, STRATA_EINVAL, "bad row", "%s %zu: empty key", where, idx);
	if (vlen > lim->max_value)
		return batch_fail(what, STRATA_ETOOBIG, "row too large",
				  "%s %zu: value of %zu bytes is over the limit of %llu bytes", where, idx, vlen,
				  (unsigned long long)lim->max_value);
	return 0;
}

void
batch_destroy(struct batch *b)
{
	env.free(b->rows);
	env.free(b->arena);
	memset(b, 0, sizeof(*b));
}

/* ---------- binary ---------- */

static int
batch_decode_binary(const uint8_t *p, size_t len, const struct batch_limits *lim, struct batch *out,
		    const char **what)
{
	if (len < 4)
		return batch_fail(what, STRATA_EINVAL, "bad batch",
				  "the batch is %zu bytes, shorter than its 4-byte row count", len);
	struct rd rd;
	rd_init(&rd, p, len);
	uint32_t count = rd_u32(&rd);
	if (count == 0)
		return batch_fail(what, STRATA_EINVAL, "bad batch", "the batch has no rows");
	if (count > lim->max_rows)
		return batch_fail(what, STRATA_ETOOBIG, "batch too large", "%u rows in one batch; the limit is %zu",
				  count, lim->max_rows);
	if (count > (len - 4) / 8)
		return batch_fail(what, STRATA_EINVAL, "bad batch",
				  "the batch declares %u rows but has only %zu bytes after the count", count, len - 4);
	strata_row *rows = env.calloc(count, sizeof(*rows));
	if (rows == NULL)
		return batch_fail(what, STRATA_ENOMEM, "out of memory", "no memory for %u rows", count);
	int rc = 0;
	for (uint32_t i = 0; i < count; i++) {
		size_t off = (size_t)(rd.p - p);
		uint32_t kl = rd_u32(&rd), vl = rd_u32(&rd);
		uint32_t kind = vl == BATCH_DELETE ? STRATA_ROW_DELETE : STRATA_ROW_PUT;
		if (kind == STRATA_ROW_DELETE)
			vl = 0;
		const uint8_t *k = rd_bytes(&rd, kl);
		const uint8_t *v = rd_bytes(&rd, vl);
		if (rd.err) {
			rc = batch_fail(what, STRATA_EINVAL, "bad batch",
					"row %u (at byte %zu) runs past the end of the batch", i, off);
			goto fail;
		}
		if ((rc = batch_check_row(lim, "row", i, kl, vl, what)) != 0)
			goto fail;
		rows[i] = (strata_row){k, kl, v, vl, kind};
	}
	if (rd_left(&rd) != 0) {
		rc = batch_fail(what, STRATA_EINVAL, "bad batch", "%zu bytes after the last of %u rows", rd_left(&rd),
				count);
		goto fail;
	}
	*out = (struct batch){.rows = rows, .n = count};
	return 0;
fail:
	env.free(rows);
	return rc;
}

/* ---------- NDJSON ---------- */

/*
 * Every line is read by yajl's callback parser first. A line that is one flat object of
 * known, distinct fields whose strings hold no escape and are well-formed UTF-8 (what
 * strata's own clients and most others send) decodes straight from its bytes, with no
 * tree built. Any other line (an escape, nesting, a number or null, an unknown or
 * repeated field, a syntax error, a form feed or vertical tab, which yajl takes for
 * blanks and JSON does not) is read again by jansson, whose verdict and words are the
 * reference: the fast path takes only lines on which the two agree.
 */

/** The fields of a row's object, in the order nd_names spells them. */
enum { ND_KEY, ND_KEY64, ND_VAL, ND_VAL64, ND_DEL, ND_FIELDS };

static const char *const nd_names[ND_FIELDS] = {"key", "key_b64", "value", "value_b64", "delete"};

/** What a field of a line is. */
enum nd_kind { ND_ABSENT, ND_STRING, ND_FALSE, ND_TRUE, ND_OTHER };

/** One field of a row's object as its line gives it. */
struct nd_field {
	enum nd_kind kind;
	/** A string's decoded bytes (ND_STRING; they live in the line or in jansson's tree). */
	const char *s;
	/** Their length. */
	size_t n;
};

/** An NDJSON batch being decoded. */
struct batch_ndjson {
	/** Its limits. */
	const struct batch_limits *lim;
	/** The rows so far and the arena their strings are in. */
	struct batch b;
	/** Bytes of the arena in use. */
	size_t used;
	/** Bytes of the arena (the input's length: enough for every string it decodes to). */
	size_t cap;
	/** The line being decoded, from 1 (blank lines count). */
	size_t line;
	/** The refusal's words. */
	const char **what;
};

/** Index of the field named s[0..n), or -1. */
static int
nd_index(const char *s, size_t n)
{
	for (int i = 0; i < ND_FIELDS; i++)
		if (strlen(nd_names[i]) == n && memcmp(nd_names[i], s, n) == 0)
			return i;
	return -1;
}

/** Copy the string of field i (base64-decoded for the *_b64 fields) to the end of the
 *  arena and its length to *len. 0 or STRATA_EINVAL. */
static int
ndjson_field(struct batch_ndjson *d, int i, const struct nd_field *f, size_t *len)
{
	if (f->kind != ND_STRING)
		return batch_fail(d->what, STRATA_EINVAL, "bad row", "line %zu: \"%s\" must be a string", d->line,
				  nd_names[i]);
	/* A string decodes to no more bytes than the line spells it in. */
	assert(f->n <= d->cap - d->used);
	uint8_t *at = d->b.arena + d->used;
	if (i == ND_KEY || i == ND_VAL) {
		if (f->n > 0)
			memcpy(at, f->s, f->n);
		*len = f->n;
	} else if (b64_decode(f->s, f->n, 0, at, len) != 0) {
		return batch_fail(d->what, STRATA_EINVAL, "bad base64", "line %zu: \"%s\" is not valid base64", d->line,
				  nd_names[i]);
	}
	d->used += *len;
	return 0;
}

/** Make the next row of the fields f of the current line, or refuse the line. */
static int
ndjson_row(struct batch_ndjson *d, const struct nd_field *f)
{
	int has_key = f[ND_KEY].kind != ND_ABSENT, has_key64 = f[ND_KEY64].kind != ND_ABSENT;
	int has_val = f[ND_VAL].kind != ND_ABSENT, has_val64 = f[ND_VAL64].kind != ND_ABSENT;
	enum nd_kind del = f[ND_DEL].kind;
	if (has_key == has_key64)
		return batch_fail(d->what, STRATA_EINVAL, "bad row",
				  "line %zu: needs exactly one of \"key\" and \"key_b64\"", d->line);
	if (del != ND_ABSENT && del != ND_TRUE && del != ND_FALSE)
		return batch_fail(d->what, STRATA_EINVAL, "bad row", "line %zu: \"delete\" must be true or false",
				  d->line);
	int is_del = del == ND_TRUE;
	if (is_del && (has_val || has_val64))
		return batch_fail(d->what, STRATA_EINVAL, "bad row",
				  "line %zu: a delete has no \"value\" or \"value_b64\"", d->line);
	if (!is_del && has_val == has_val64)
		return batch_fail(d->what, STRATA_EINVAL, "bad row",
				  "line %zu: needs exactly one of \"value\" and \"value_b64\"", d->line);
	strata_row *row = &d->b.rows[d->b.n];
	row->kind = is_del ? STRATA_ROW_DELETE : STRATA_ROW_PUT;
	row->key = d->b.arena + d->used;
	int k = has_key ? ND_KEY : ND_KEY64;
	int rc = ndjson_field(d, k, &f[k], &row->key_len);
	if (rc != 0)
		return rc;
	row->value = d->b.arena + d->used;
	row->value_len = 0;
	int v = has_val ? ND_VAL : ND_VAL64;
	if (!is_del && (rc = ndjson_field(d, v, &f[v], &row->value_len)) != 0)
		return rc;
	return batch_check_row(d->lim, "line", d->line, row->key_len, row->value_len, d->what);
}

/** Decode the line p[0..n) with jansson into the next row: the reference path. */
static int
ndjson_tree(struct batch_ndjson *d, const char *p, size_t n)
{
	json_error_t err;
	json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
	if (o == NULL)
		return batch_fail(d->what, STRATA_EINVAL, "invalid JSON", "line %zu, column %d: %s", d->line, err.column,
				  err.text);
	int rc = 0;
	if (!json_is_object(o)) {
		rc = batch_fail(d->what, STRATA_EINVAL, "bad row", "line %zu: expected a JSON object", d->line);
		goto out;
	}
	struct nd_field f[ND_FIELDS] = {{0}};
	const char *name;
	json_t *v;
	json_object_foreach(o, name, v)
	{
		int i = nd_index(name, strlen(name));
		if (i < 0) {
			rc = batch_fail(d->what, STRATA_EINVAL, "bad row",
					"line %zu: unknown field \"%.64s\" (expected key or key_b64, and value or "
					"value_b64 or \"delete\": true)",
					d->line, name);
			goto out;
		}
		if (json_is_string(v))
			f[i] = (struct nd_field){ND_STRING, json_string_value(v), json_string_length(v)};
		else
			f[i].kind = json_is_true(v) ? ND_TRUE : json_is_false(v) ? ND_FALSE : ND_OTHER;
	}
	rc = ndjson_row(d, f);
out:
	json_decref(o);
	return rc;
}

/** The fast path's reading of one line. Each callback returns 0, which stops yajl, at
 *  the first thing that the line must go to jansson for. */
struct nd_fast {
	/** The line: the strings the fast path takes lie in it (yajl hands over a string
	 *  with an escape from a buffer of its own). */
	const char *lo, *hi;
	/** The fields so far. */
	struct nd_field f[ND_FIELDS];
	/** Depth of objects (1 inside the row's), and objects begun at depth 0 (a line
	 *  holds one). */
	int depth, objects;
	/** The field whose value comes next, or -1. */
	int cur;
	/** The parser, and the bytes of the line it had read when the row's object closed
	 *  (0 until then). */
	yajl_handle h;
	size_t end;
};

/** Whether s[0..n) lies in the line (a string without escapes). */
static int
nd_in_line(const struct nd_fast *x, const unsigned char *s, size_t n)
{
	const char *c = (const char *)s;
	return c >= x->lo && c <= x->hi && n <= (size_t)(x->hi - c);
}

static int
nd_fast_decline(void *ctx)
{
	return 0;
}

static int
nd_fast_number(void *ctx, const char *s, size_t n)
{
	return 0;
}

static int
nd_fast_bool(void *ctx, int b)
{
	struct nd_fast *x = ctx;
	if (x->depth != 1 || x->cur != ND_DEL)
		return 0;
	x->f[ND_DEL].kind = b ? ND_TRUE : ND_FALSE;
	x->cur = -1;
	return 1;
}

static int
nd_fast_string(void *ctx, const unsigned char *s, size_t n)
{
	struct nd_fast *x = ctx;
	if (x->depth != 1 || x->cur < 0 || x->cur == ND_DEL || !nd_in_line(x, s, n) || !text_utf8_valid(s, n))
		return 0;
	x->f[x->cur] = (struct nd_field){ND_STRING, (const char *)s, n};
	x->cur = -1;
	return 1;
}

static int
nd_fast_start_map(void *ctx)
{
	struct nd_fast *x = ctx;
	if (x->depth++ != 0)
		return 0;
	return ++x->objects == 1;
}

static int
nd_fast_key(void *ctx, const unsigned char *s, size_t n)
{
	struct nd_fast *x = ctx;
	int i = nd_in_line(x, s, n) ? nd_index((const char *)s, n) : -1;
	if (i < 0 || x->f[i].kind != ND_ABSENT)
		return 0;
	x->cur = i;
	return 1;
}

static int
nd_fast_end_map(void *ctx)
{
	struct nd_fast *x = ctx;
	if (--x->depth == 0)
		x->end = yajl_get_bytes_consumed(x->h);
	return 1;
}

static const yajl_callbacks nd_fast_callbacks = {
	.yajl_null = nd_fast_decline,
	.yajl_boolean = nd_fast_bool,
	.yajl_number = nd_fast_number,
	.yajl_string = nd_fast_string,
	.yajl_start_map = nd_fast_start_map,
	.yajl_map_key = nd_fast_key,
	.yajl_end_map = nd_fast_end_map,
	.yajl_start_array = nd_fast_decline,
	.yajl_end_array = nd_fast_decline,
};

/** Read the line p[0..n) on the fast path into f. 1 when it did, 0 when the line must
 *  go to jansson. x keeps the parser from line to line (yajl_alloc costs a plain line a
 *  third of its time): yajl reads the lines as one stream of values
 *  (yajl_allow_multiple_values), and after a line it declined, whose state is unknown,
 *  the next line gets a new one. */
static int
ndjson_fast(struct nd_fast *x, const char *p, size_t n, struct nd_field *f)
{
	if (memchr(p, '\f', n) != NULL || memchr(p, '\v', n) != NULL)
		return 0;
	if (x->h == NULL) {
		if ((x->h = yajl_alloc(&nd_fast_callbacks, NULL, x)) == NULL)
			return 0;
		yajl_config(x->h, yajl_allow_multiple_values, 1);
	}
	x->lo = p;
	x->hi = p + n;
	memset(x->f, 0, sizeof(x->f));
	x->depth = 0;
	x->objects = 0;
	x->cur = -1;
	x->end = 0;
	/* The object must end the line (the caller trimmed its blanks): then it is whole, and
	 *  nothing of the line is left in the parser (yajl would let a token cut short after
	 *  a whole value pass: `{...}"`). */
	if (yajl_parse(x->h, (const unsigned char *)p, n) != yajl_status_ok || x->depth != 0 || x->end != n) {
		yajl_free(x->h);
		x->h = NULL;
		return 0;
	}
	memcpy(f, x->f, sizeof(x->f));
	return 1;
}

/** Decode the NDJSON batch p[0..len) into *out, on the fast path where a line allows
 *  it when fast, else with jansson on every line. */
static int
batch_decode_ndjson(const uint8_t *p, size_t len, const struct batch_limits *lim, struct batch *out,
		    const char **what, int fast)
{
	size_t lines = 0;
	for (size_t i = 0; i < len;) {
		const uint8_t *nl = memchr(p + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - p) : len;
		for (size_t k = i; k < e; k++)
			if (p[k] != ' ' && p[k] != '\t' && p[k] != '\r') {
				lines++;
				break;
			}
		i = e + 1;
	}
	if (lines == 0)
		return batch_fail(what, STRATA_EINVAL, "bad batch",
				  "the body has no rows (expected NDJSON objects, one per line)");
	if (lines > lim->max_rows)
		return batch_fail(what, STRATA_ETOOBIG, "batch too large", "%zu rows in one batch; the limit is %zu",
				  lines, lim->max_rows);
	struct batch_ndjson d = {.lim = lim, .cap = len, .what = what};
	struct nd_fast x = {.h = NULL};
	d.b.rows = env.calloc(lines, sizeof(*d.b.rows));
	d.b.arena = env.malloc(len);
	int rc = 0;
	if (d.b.rows == NULL || d.b.arena == NULL) {
		rc = batch_fail(what, STRATA_ENOMEM, "out of memory", "no memory for %zu rows", lines);
		goto fail;
	}
	for (size_t i = 0; i < len;) {
		const uint8_t *nl = memchr(p + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - p) : len;
		size_t b = i;
		i = e + 1;
		d.line++;
		while (b < e && (p[b] == ' ' || p[b] == '\t' || p[b] == '\r'))
			b++;
		size_t t = e;
		while (t > b && (p[t - 1] == ' ' || p[t - 1] == '\t' || p[t - 1] == '\r'))
			t--;
		if (t == b)
			continue;
		struct nd_field f[ND_FIELDS];
		if (fast && ndjson_fast(&x, (const char *)p + b, t - b, f)) {
			rc = ndjson_row(&d, f);
		} else {
			d.b.slow_lines++;
			rc = ndjson_tree(&d, (const char *)p + b, t - b);
		}
		if (rc != 0)
			goto fail;
		d.b.n++;
	}
	if (x.h != NULL)
		yajl_free(x.h);
	*out = d.b;
	return 0;
fail:
	if (x.h != NULL)
		yajl_free(x.h);
	batch_destroy(&d.b);
	return rc;
}

int
batch_decode(enum batch_format f, const void *p, size_t len, const struct batch_limits *lim, struct batch *out,
	     const char **what)
{
	memset(out, 0, sizeof(*out));
	return f == BATCH_BINARY ? batch_decode_binary(p, len, lim, out, what)
				 : batch_decode_ndjson(p, len, lim, out, what, 1);
}

int
batch_decode_ndjson_tree(const void *p, size_t len, const struct batch_limits *lim, struct batch *out,
			 const char **what)
{
	memset(out, 0, sizeof(*out));
	return batch_decode_ndjson(p, len, lim, out, what, 0);
}

/* ---------- encoding ---------- */

/** Set member name of o to the n bytes at p, or, when they are not UTF-8, name64 to
 *  their base64 (made in tmp). 0 or -1. */
static int
ndjson_set(json_t *o, const char *name, const char *name64, const void *p, size_t n, struct buf *tmp)
{
	json_t *v = json_stringn((const char *)p, n);
	if (v != NULL)
		return json_object_set_new(o, name, v);
	buf_reset(tmp);
	if (b64_encode(tmp, p, n))
		return -1;
	v = json_stringn((const char *)tmp->data, tmp->len);
	return v ? json_object_set_new(o, name64, v) : -1;
}

int
batch_ndjson_row(struct buf *out, const strata_row *row, struct buf *tmp)
{
	json_t *o = json_object();
	int rc = o == NULL || ndjson_set(o, "key", "key_b64", row->key, row->key_len, tmp) != 0;
	if (rc == 0 && row->kind == STRATA_ROW_DELETE)
		rc = json_object_set_new(o, "delete", json_true());
	else if (rc == 0)
		rc = ndjson_set(o, "value", "value_b64", row->value, row->value_len, tmp);
	size_t need = rc == 0 ? json_dumpb(o, NULL, 0, JSON_COMPACT) : 0;
	if (need == 0 || buf_reserve(out, need + 1)) {
		json_decref(o);
		return STRATA_ENOMEM;
	}
	json_dumpb(o, (char *)out->data + out->len, need, JSON_COMPACT);
	json_decref(o);
	out->len += need;
	out->data[out->len++] = '\n';
	return 0;
}

/** Append row i of a binary batch to out. */
static int
binary_row(struct buf *out, const strata_row *row, size_t i)
{
	int del = row->kind == STRATA_ROW_DELETE;
	if (row->key_len > UINT32_MAX || (!del && row->value_len >= BATCH_DELETE))
		return diag_set(STRATA_ETOOBIG, "batch: row %zu (key %zu bytes, value %zu) has no binary encoding", i,
				row->key_len, row->value_len);
	if (buf_put_u32(out, (uint32_t)row->key_len) ||
	    buf_put_u32(out, del ? BATCH_DELETE : (uint32_t)row->value_len) ||
	    (row->key_len > 0 && buf_append(out, row->key, row->key_len)) ||
	    (!del && row->value_len > 0 && buf_append(out, row->value, row->value_len)))
		return diag_set(STRATA_ENOMEM, "batch: out of memory");
	return 0;
}

int
batch_encode(enum batch_format f, const strata_row *rows, size_t n, struct buf *out)
{
	if (f == BATCH_BINARY && n > UINT32_MAX)
		return diag_set(STRATA_ETOOBIG, "batch: %zu rows have no binary encoding", n);
	if (f == BATCH_BINARY && buf_put_u32(out, (uint32_t)n))
		return diag_set(STRATA_ENOMEM, "batch: out of memory");
	struct buf tmp = {0};
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (f == BATCH_BINARY)
			rc = binary_row(out, &rows[i], i);
		else if (batch_ndjson_row(out, &rows[i], &tmp) != 0)
			rc = diag_set(STRATA_ENOMEM, "batch: out of memory");
	buf_destroy(&tmp);
	return rc;
}
