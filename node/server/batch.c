/* batch.c — the row batches of POST /v1/shards/{id}/rows, NDJSON and binary, decoded and encoded (batch.h). */
#include "batch.h"

#include <assert.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../lib/base64.h"
#include "../lib/diag.h"
#include "../lib/env.h"

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

/** Copy the string v (base64-decoded when b64) of field name to the end of the arena
 *  and its length to *len. 0 or STRATA_EINVAL. */
static int
ndjson_field(struct batch_ndjson *d, const char *name, json_t *v, int b64, size_t *len)
{
	if (!json_is_string(v))
		return batch_fail(d->what, STRATA_EINVAL, "bad row", "line %zu: \"%s\" must be a string", d->line,
				  name);
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	/* A string decodes to no more bytes than the line spells it in. */
	assert(n <= d->cap - d->used);
	uint8_t *at = d->b.arena + d->used;
	if (!b64) {
		memcpy(at, s, n);
		*len = n;
	} else if (b64_decode(s, n, 0, at, len) != 0) {
		return batch_fail(d->what, STRATA_EINVAL, "bad base64", "line %zu: \"%s\" is not valid base64", d->line,
				  name);
	}
	d->used += *len;
	return 0;
}

/** Decode the object o of the current line into the next row. */
static int
ndjson_object(struct batch_ndjson *d, json_t *o)
{
	if (!json_is_object(o))
		return batch_fail(d->what, STRATA_EINVAL, "bad row", "line %zu: expected a JSON object", d->line);
	json_t *key = NULL, *key64 = NULL, *val = NULL, *val64 = NULL, *del = NULL;
	const char *name;
	json_t *v;
	json_object_foreach(o, name, v)
	{
		if (strcmp(name, "key") == 0)
			key = v;
		else if (strcmp(name, "key_b64") == 0)
			key64 = v;
		else if (strcmp(name, "value") == 0)
			val = v;
		else if (strcmp(name, "value_b64") == 0)
			val64 = v;
		else if (strcmp(name, "delete") == 0)
			del = v;
		else
			return batch_fail(d->what, STRATA_EINVAL, "bad row",
					  "line %zu: unknown field \"%.64s\" (expected key or key_b64, and value or "
					  "value_b64 or \"delete\": true)",
					  d->line, name);
	}
	if ((key == NULL) == (key64 == NULL))
		return batch_fail(d->what, STRATA_EINVAL, "bad row",
				  "line %zu: needs exactly one of \"key\" and \"key_b64\"", d->line);
	if (del != NULL && !json_is_boolean(del))
		return batch_fail(d->what, STRATA_EINVAL, "bad row", "line %zu: \"delete\" must be true or false",
				  d->line);
	int is_del = del != NULL && json_is_true(del);
	if (is_del && (val != NULL || val64 != NULL))
		return batch_fail(d->what, STRATA_EINVAL, "bad row",
				  "line %zu: a delete has no \"value\" or \"value_b64\"", d->line);
	if (!is_del && (val == NULL) == (val64 == NULL))
		return batch_fail(d->what, STRATA_EINVAL, "bad row",
				  "line %zu: needs exactly one of \"value\" and \"value_b64\"", d->line);
	strata_row *row = &d->b.rows[d->b.n];
	row->kind = is_del ? STRATA_ROW_DELETE : STRATA_ROW_PUT;
	row->key = d->b.arena + d->used;
	int rc = ndjson_field(d, key ? "key" : "key_b64", key ? key : key64, key == NULL, &row->key_len);
	if (rc != 0)
		return rc;
	row->value = d->b.arena + d->used;
	row->value_len = 0;
	if (!is_del && (rc = ndjson_field(d, val ? "value" : "value_b64", val ? val : val64, val == NULL,
					  &row->value_len)) != 0)
		return rc;
	return batch_check_row(d->lim, "line", d->line, row->key_len, row->value_len, d->what);
}

static int
batch_decode_ndjson(const uint8_t *p, size_t len, const struct batch_limits *lim, struct batch *out,
		    const char **what)
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
		json_error_t err;
		json_t *o = json_loadb((const char *)p + b, t - b, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
		if (o == NULL) {
			rc = batch_fail(what, STRATA_EINVAL, "invalid JSON", "line %zu, column %d: %s", d.line,
					err.column, err.text);
			goto fail;
		}
		rc = ndjson_object(&d, o);
		json_decref(o);
		if (rc != 0)
			goto fail;
		d.b.n++;
	}
	*out = d.b;
	return 0;
fail:
	batch_destroy(&d.b);
	return rc;
}

int
batch_decode(enum batch_format f, const void *p, size_t len, const struct batch_limits *lim, struct batch *out,
	     const char **what)
{
	memset(out, 0, sizeof(*out));
	return f == BATCH_BINARY ? batch_decode_binary(p, len, lim, out, what)
				 : batch_decode_ndjson(p, len, lim, out, what);
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
