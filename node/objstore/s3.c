/*
 * s3.c — the S3 object store: s3://BUCKET[/PREFIX][?k=v&...]. Every request is signed
 * with AWS SigV4 by libcurl (CURLOPT_AWS_SIGV4); the payload's SHA-256 goes in
 * x-amz-content-sha256, and query parameters are added in name order already encoded,
 * because libcurl 7.88 (Debian bookworm) signs the query as it is sent. put_if_absent is
 * PutObject with If-None-Match: * (412: it exists; 409 ConditionalRequestConflict: a
 * concurrent write, retried), put_if_match is PutObject with If-Match: ETAG, a streamed
 * write is one PutObject when it fits a part, else a multipart upload of part_bytes
 * parts, list is ListObjectsV2 by prefix and continuation token (byte order), del_batch
 * is DeleteObjects of up to 1000 keys with Content-MD5, recover aborts stale multipart
 * uploads under the prefix. With endpoint=URL the service is addressed path-style
 * (URL/BUCKET, as s3rver, MinIO and the emulators are); without it virtual-host style on
 * https://BUCKET.s3.REGION.amazonaws.com (path-style on s3.REGION.amazonaws.com for a
 * bucket with dots). At open the bucket is created when missing, and a probe writes one
 * object twice with If-None-Match: * (and once with a stale If-Match): a server that
 * accepts the second write does not enforce conditional writes, and the open is refused
 * unless single_writer=1 states that one node owns the store (put-if-absent and
 * compare-and-swap are then checked by a HEAD first). Credentials come from
 * credentials_file=PATH (profile=, AWS_PROFILE, [default]), AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), AWS_SHARED_CREDENTIALS_FILE or
 * ~/.aws/credentials; they never appear in a URL, a message or a log line.
 */
#include "objstore.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "s3_xml.h"
#include "xml.h"
#include "../lib/base64.h"
#include "../lib/diag.h"
#include "../lib/env.h"

/** Longest key accepted (S3's limit, with the prefix). */
#define S3_KEY_MAX 1024
_Static_assert(S3_KEY_MAX <= OSHTTP_KEY_MAX, "a key fits the buffers of the shared requests");
/** Default and limits of a multipart upload's part (AWS wants 5 MiB at least, but for
 *  the last part; smaller ones are for test servers). */
#define S3_PART_DEFAULT (8u << 20)
#define S3_PART_MIN (64u << 10)
#define S3_PART_MAX (5ull << 30)
/** Most parts of one upload (the service's limit). */
#define S3_PARTS_MAX 10000u
/** Default and largest ListObjectsV2 page, and most keys of one DeleteObjects. */
#define S3_LIST_PAGE 1000u
#define S3_DELETE_MAX 1000u
/** Default age, seconds, after which recover aborts an upload left under the prefix. */
#define S3_STALE_UPLOAD_S 3600u
/** Room for the credentials. */
#define S3_KEY_ID_MAX 128
#define S3_SECRET_MAX 128
#define S3_TOKEN_MAX 4096

/** An S3 store. */
struct s3_store {
	/** The generic header and what its requests are built from: the HTTP client, the key
	 *  prefix, the origin and the path before the key ("/BUCKET" path-style, ""
	 *  virtual-host style), the ListObjectsV2 page; must be first. */
	struct oshttp_store st;
	/** Bucket. */
	char bucket[64];
	/** Region of the signature scope. */
	char region[64];
	/** libcurl's SigV4 provider string: "aws:amz:REGION:s3". */
	char sigv4[96];
	/** Access key id. */
	char key_id[S3_KEY_ID_MAX];
	/** Secret access key. */
	char secret[S3_SECRET_MAX];
	/** Session token ("" when none). */
	char token[S3_TOKEN_MAX];
	/** Part size of streamed writes. */
	uint64_t part_bytes;
	/** Seconds after which recover aborts an upload (0: every upload under the prefix). */
	uint64_t stale_upload_s;
	/** The operator guarantees one node writes the store (single_writer=1). */
	int single_writer;
	/** The probe found the server ignores If-None-Match / If-Match: conditions are checked
	 *  by a HEAD first (only with single_writer). */
	int emulate_if_none_match, emulate_if_match;
};

/** A streamed write: parts of part_bytes, then CompleteMultipartUpload. */
struct s3_writer {
	/** Generic header; must be first. */
	struct objstore_writer base;
	/** The object's key (without the store prefix). */
	char key[S3_KEY_MAX + 1];
	/** Bytes not yet sent as a part. */
	struct buf pending;
	/** The multipart upload's id ("" until the first part is sent). */
	char upload_id[S3XML_MAX_TEXT + 1];
	/** ETags of the parts sent, OBJSTORE_ETAG_MAX bytes each. */
	char *etags;
	/** Parts sent. */
	uint32_t nparts;
	/** Room in etags, in parts. */
	uint32_t cap;
	/** The object must not exist yet (If-None-Match: * on the last request). */
	int if_absent;
};

/** One signed request being built (its range goes in Range). */
struct s3_call {
	/** The request; must be first. */
	struct oshttp_call call;
	/** Content-MD5 ("" none). */
	char md5[32];
	/** Hex SHA-256 of the body. */
	char sha256[65];
};
_Static_assert(sizeof(struct s3_call) <= sizeof(struct oshttp_call) + OSHTTP_CALL_EXTRA,
	       "the shared requests have room for an S3 request");

static const struct objstore_ops s3_ops;
static const struct oshttp_store_ops s3_http_ops;
static int s3_put_object(struct oshttp_store *store, const char *opname, const char *key, const void *data,
			 size_t len, const char *if_match, const char *if_none_match);

/* ---------------------------------------------------------------- requests */

/** The store of a request. */
static struct s3_store *
s3_of(struct oshttp_store *st)
{
	return (struct s3_store *)((char *)st - offsetof(struct s3_store, st));
}

/** The headers of one attempt; libcurl adds X-Amz-Date and the signature. */
static int
s3_headers(void *ctx, struct curl_slist **h)
{
	struct s3_call *sc = ctx;
	struct oshttp_call *c = &sc->call;
	struct s3_store *s3 = s3_of(c->st);
	int rc = oshttp_header(h, "x-amz-content-sha256", sc->sha256);
	rc = rc ? rc : oshttp_call_headers(c, h, "Range");
	if (rc == 0 && sc->md5[0] != '\0')
		rc = oshttp_header(h, "Content-MD5", sc->md5);
	if (rc == 0 && s3->token[0] != '\0')
		rc = oshttp_header(h, "x-amz-security-token", s3->token);
	return rc ? diag_set(STRATA_ENOMEM, "%s: out of memory", c->what) : 0;
}

/** The S3 error code of an answer's body ("" when none). */
static void
s3_error_code(const struct oshttp_req *r, char *code, size_t cap, char *msg, size_t mcap)
{
	code[0] = '\0';
	if (msg != NULL)
		msg[0] = '\0';
	char m[512] = "";
	if (r->error_body.len > 0 &&
	    osxml_parse_error(r->error_body.data, r->error_body.len, code, cap, m, sizeof(m)) != 0)
		diag_clear();
	if (msg != NULL) {
		snprintf(msg, mcap, "%s", m[0] ? m : "");
		oshttp_flatten(msg);
	}
}

/** Whether an S3 error answer is worth another attempt. */
static int
s3_retry_answer(void *ctx, const struct oshttp_req *r)
{
	char code[128];
	s3_error_code(r, code, sizeof(code), NULL, 0);
	return (r->status == 409 && strcmp(code, "ConditionalRequestConflict") == 0) ||
	       (r->status == 400 && strcmp(code, "RequestTimeout") == 0) || strcmp(code, "SlowDown") == 0 ||
	       strcmp(code, "InternalError") == 0;
}

/** Hex SHA-256 of n bytes at p into hex (65 bytes). */
static int
s3_sha256_hex(const void *p, size_t n, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_Digest(p != NULL ? p : "", n, md, &mdlen, EVP_sha256(), NULL) != 1)
		return -1;
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/** Sign c with SigV4 through libcurl, its payload's hash in x-amz-content-sha256 (an
 *  oshttp_store_ops.sign). */
static int
s3_sign(struct oshttp_call *c)
{
	struct s3_store *s3 = s3_of(c->st);
	c->http.aws_sigv4 = s3->sigv4;
	c->http.aws_key_id = s3->key_id;
	c->http.aws_secret = s3->secret;
	if (s3_sha256_hex(c->http.body, c->http.body_len, ((struct s3_call *)c)->sha256) != 0)
		return diag_set(STRATA_EIO, "%s: SHA-256 failed", c->what);
	c->http.headers = s3_headers;
	c->http.headers_ctx = c;
	c->http.retry_answer = s3_retry_answer;
	return 0;
}

/** Whether an error code means the credentials were refused. */
static int
s3_auth_code(const char *code)
{
	static const char *const codes[] = {"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied",
					    "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
					    "AuthorizationHeaderMalformed", "InvalidSecurity"};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i]) == 0)
			return 1;
	return 0;
}

/** Map an answer that is not the expected success to a code and a message. */
static int
s3_fail(struct oshttp_call *c)
{
	struct s3_store *s3 = s3_of(c->st);
	char code[128], msg[512];
	s3_error_code(&c->http, code, sizeof(code), msg, sizeof(msg));
	long st = c->http.status;
	if (st == 403 || s3_auth_code(code))
		return diag_set(STRATA_EIO, "%s: HTTP %ld %s: the service refused the credentials for bucket "
				"'%s' (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, credentials_file=, "
				"AWS_SHARED_CREDENTIALS_FILE, and region=)%s%s", c->what, st,
				code[0] ? code : "Forbidden", s3->bucket, msg[0] ? ": " : "", msg);
	if (strcmp(code, "NoSuchBucket") == 0)
		return diag_set(STRATA_EIO, "%s: bucket '%s' does not exist", c->what, s3->bucket);
	if (st == 301 || strcmp(code, "PermanentRedirect") == 0)
		return diag_set(STRATA_EIO, "%s: HTTP %ld %s: bucket '%s' is in another region than '%s' "
				"(set region=)", c->what, st, code, s3->bucket, s3->region);
	return oshttp_fail_answer(&c->http, code, msg);
}

/** Whether an answer is a 404 about the key (not the bucket; a HEAD answer has no body
 *  to tell them apart, so every 404 of one is the key's). */
static int
s3_key_missing(struct oshttp_call *c)
{
	if (c->http.status != 404)
		return 0;
	char code[128];
	s3_error_code(&c->http, code, sizeof(code), NULL, 0);
	return strcmp(code, "NoSuchBucket") != 0;
}

/** The query of a ListObjectsV2 page (an oshttp_store_ops.list_query). */
static void
s3_list_query(struct oshttp_call *c, const char *next, const char *page, const char *full)
{
	if (next[0] != '\0')
		oshttp_call_query(c, "continuation-token", next);
	oshttp_call_query(c, "list-type", "2");
	oshttp_call_query(c, "max-keys", page);
	if (full[0] != '\0')
		oshttp_call_query(c, "prefix", full);
}

_Static_assert(sizeof(((struct s3xml_list *)0)->next) == OSHTTP_LIST_NEXT_MAX + 1,
	       "a NextContinuationToken fits where oshttp_list keeps it");

/** Parse a ListObjectsV2 page; a truncated one names where the next starts (an
 *  oshttp_store_ops.list_page). */
static int
s3_list_page(struct oshttp_call *c, const struct buf *body, uint32_t max, struct oshttp_lister *ls, char *next)
{
	struct s3xml_list l = {0};
	int rc = s3xml_parse_list(body->data, body->len, max, c->what, &l);
	if (rc == 0 && l.truncated && l.next[0] == '\0')
		rc = diag_set(STRATA_EIO, "%s: a truncated page without a NextContinuationToken", c->what);
	for (size_t i = 0; rc == 0 && i < l.n; i++)
		rc = oshttp_list_entry(ls, l.v[i].name, l.v[i].size);
	if (rc == 0 && l.truncated)
		memcpy(next, l.next, sizeof(l.next));
	else if (rc == 0)
		next[0] = '\0';
	s3xml_list_destroy(&l);
	return rc;
}

_Static_assert(offsetof(struct s3_call, call) == 0, "the shared request is the first member");

static const struct oshttp_store_ops s3_http_ops = {
	.call_size = sizeof(struct s3_call),
	.sign = s3_sign,
	.fail = s3_fail,
	.key_missing = s3_key_missing,
	.put = s3_put_object,
	.delete_status = 204,
	.list_query = s3_list_query,
	.list_page = s3_list_page,
	.list_in_order = 1,
};

/* ---------------------------------------------------------------- writes */

/** Map the answer of a conditional write (PutObject, CompleteMultipartUpload). */
static int
s3_cond_result(struct oshttp_call *c, const char *if_match, const char *if_none_match)
{
	long st = c->http.status;
	char code[128];
	s3_error_code(&c->http, code, sizeof(code), NULL, 0);
	int lost = (if_none_match != NULL && st == 412) ||
		   (if_match != NULL && (st == 412 || (st == 404 && strcmp(code, "NoSuchBucket") != 0)));
	if (lost)
		return oshttp_cond_lost(&c->http, if_match, if_none_match);
	if (st == 501 && (if_match != NULL || if_none_match != NULL))
		return diag_set(STRATA_EIO, "%s: HTTP 501 %s: the server does not implement conditional writes",
				c->what, code);
	return s3_fail(c);
}

/** PutObject of data at key, with an optional condition, as the server does it. */
static int
s3_put_object_raw(struct s3_store *s3, const char *opname, const char *key, const void *data, size_t len,
		  const char *if_match, const char *if_none_match)
{
	struct s3_call c;
	int rc = oshttp_put_init(&s3->st, &c.call, opname, key, data, len, if_match, if_none_match);
	if (rc == 0)
		rc = oshttp_call_send(&c.call);
	if (rc == 0 && c.call.http.status != 200)
		rc = s3_cond_result(&c.call, if_match, if_none_match);
	oshttp_call_destroy(&c.call);
	return rc;
}

/** PutObject with a condition (an oshttp_store_ops.put); checked by a HEAD first where
 *  the probe found the server ignores it (single_writer only: one writer, so nothing can
 *  come in between). */
static int
s3_put_object(struct oshttp_store *store, const char *opname, const char *key, const void *data, size_t len,
	      const char *if_match, const char *if_none_match)
{
	struct s3_store *s3 = s3_of(store);
	if ((if_none_match != NULL && s3->emulate_if_none_match) || (if_match != NULL && s3->emulate_if_match)) {
		char etag[OBJSTORE_ETAG_MAX];
		int rc = oshttp_head(&s3->st, key, opname, NULL, etag, sizeof(etag));
		if (rc != 0 && rc != STRATA_NOTFOUND)
			return rc;
		if (if_none_match != NULL && rc == 0)
			return diag_set(STRATA_EEXIST, "%s: %s %s: already exists", s3->st.base.name, opname, key);
		if (if_match != NULL && (rc == STRATA_NOTFOUND || strcmp(etag, if_match) != 0))
			return diag_set(STRATA_ECONFLICT, "%s: %s %s: the ETag %s is stale", s3->st.base.name, opname,
					key, if_match);
		return s3_put_object_raw(s3, opname, key, data, len, NULL, NULL);
	}
	return s3_put_object_raw(s3, opname, key, data, len, if_match, if_none_match);
}

/** Append s to out with XML's five special characters escaped. */
static int
s3_xml_text(struct buf *out, const char *s)
{
	int rc = 0;
	for (; rc == 0 && *s != '\0'; s++) {
		switch (*s) {
		case '&': rc = buf_append(out, "&amp;", 5); break;
		case '<': rc = buf_append(out, "&lt;", 4); break;
		case '>': rc = buf_append(out, "&gt;", 4); break;
		case '"': rc = buf_append(out, "&quot;", 6); break;
		case '\'': rc = buf_append(out, "&apos;", 6); break;
		default: rc = buf_append(out, s, 1); break;
		}
	}
	return rc;
}

/** Base64 MD5 of n bytes at p into b64 (at least 25 bytes). */
static int
s3_md5_b64(const void *p, size_t n, char *dst, size_t cap)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_Digest(p, n, md, &mdlen, EVP_md5(), NULL) != 1)
		return -1;
	struct buf b = {0};
	int rc = b64_encode(&b, md, mdlen);
	if (rc == 0 && b.len < cap) {
		memcpy(dst, b.data, b.len);
		dst[b.len] = '\0';
	} else {
		rc = -1;
	}
	buf_destroy(&b);
	return rc;
}

/** One DeleteObjects request of n keys (n <= S3_DELETE_MAX). */
static int
s3_delete_objects(struct s3_store *s3, const char *const *keys, size_t n)
{
	struct buf xml = {0};
	static const char head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete><Quiet>true</Quiet>";
	int rc = buf_append(&xml, head, sizeof(head) - 1);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = buf_append(&xml, "<Object><Key>", 13);
		if (rc == 0)
			rc = s3_xml_text(&xml, s3->st.prefix);
		if (rc == 0)
			rc = s3_xml_text(&xml, keys[i]);
		if (rc == 0)
			rc = buf_append(&xml, "</Key></Object>", 15);
	}
	if (rc == 0)
		rc = buf_append(&xml, "</Delete>", 9);
	if (rc) {
		buf_destroy(&xml);
		return diag_set(STRATA_ENOMEM, "%s: delete_batch: out of memory", s3->st.base.name);
	}
	struct s3_call c;
	struct buf body = {0};
	rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_DELETE, "POST", "delete_batch", NULL);
	snprintf(c.call.what, sizeof(c.call.what), "%s: delete_batch of %zu keys from %s", s3->st.base.name, n, keys[0]);
	if (rc == 0 && s3_md5_b64(xml.data, xml.len, c.md5, sizeof(c.md5)) != 0)
		rc = diag_set(STRATA_EIO, "%s: MD5 failed", c.call.what);
	if (rc == 0) {
		oshttp_call_query(&c.call, "delete", "");
		c.call.content_type = "application/xml";
		c.call.http.body = xml.data;
		c.call.http.body_len = xml.len;
		c.call.http.out = &body;
		rc = oshttp_call_send(&c.call);
	}
	if (rc == 0 && c.call.http.status != 200)
		rc = s3_fail(&c.call);
	struct s3xml_list l = {0};
	if (rc == 0)
		rc = s3xml_parse_delete(body.data, body.len, n, c.call.what, &l);
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		if (strcmp(l.v[i].code, "NoSuchKey") == 0)
			continue;
		rc = diag_set(STRATA_EIO, "%s: %s was not deleted: %s", c.call.what, l.v[i].name, l.v[i].code);
	}
	s3xml_list_destroy(&l);
	oshttp_call_destroy(&c.call);
	buf_destroy(&body);
	buf_destroy(&xml);
	return rc;
}

static int
s3_del_batch(struct objstore *os, const char *const *keys, size_t n)
{
	struct s3_store *s3 = (struct s3_store *)os;
	objstore_set_indeterminate(0);
	for (size_t i = 0; i < n; i++) {
		int rc = oshttp_store_check_key(&s3->st, keys[i], 0);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < n; i += S3_DELETE_MAX) {
		int rc = s3_delete_objects(s3, keys + i, n - i < S3_DELETE_MAX ? n - i : S3_DELETE_MAX);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- multipart writes */

/** CreateMultipartUpload of w's key. */
static int
s3_upload_create(struct s3_writer *w)
{
	struct s3_store *s3 = (struct s3_store *)w->base.os;
	struct s3_call c;
	struct buf body = {0};
	int rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_PART, "POST", "create_multipart_upload", w->key);
	if (rc == 0) {
		oshttp_call_query(&c.call, "uploads", "");
		c.call.content_type = "application/octet-stream";
		c.call.http.out = &body;
		rc = oshttp_call_send(&c.call);
	}
	if (rc == 0 && c.call.http.status != 200)
		rc = s3_fail(&c.call);
	if (rc == 0)
		rc = s3xml_parse_upload_id(body.data, body.len, c.call.what, w->upload_id, sizeof(w->upload_id));
	oshttp_call_destroy(&c.call);
	buf_destroy(&body);
	return rc;
}

/** UploadPart of w's pending bytes. */
static int
s3_upload_part(struct s3_writer *w)
{
	struct s3_store *s3 = (struct s3_store *)w->base.os;
	if (w->nparts >= S3_PARTS_MAX)
		return diag_set(STRATA_ETOOBIG, "%s: write %s: more than %u parts of %llu bytes", s3->st.base.name,
				w->key, S3_PARTS_MAX, (unsigned long long)s3->part_bytes);
	int rc = w->upload_id[0] == '\0' ? s3_upload_create(w) : 0;
	if (rc)
		return rc;
	if (w->nparts == w->cap) {
		uint32_t cap = w->cap ? w->cap * 2 : 16;
		char *e = env.realloc(w->etags, (size_t)cap * OBJSTORE_ETAG_MAX);
		if (e == NULL)
			return diag_set(STRATA_ENOMEM, "%s: write %s: out of memory", s3->st.base.name, w->key);
		w->etags = e;
		w->cap = cap;
	}
	char num[16];
	snprintf(num, sizeof(num), "%u", w->nparts + 1);
	struct s3_call c;
	rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_PART, "PUT", "upload_part", w->key);
	if (rc == 0) {
		oshttp_call_query(&c.call, "partNumber", num);
		oshttp_call_query(&c.call, "uploadId", w->upload_id);
		c.call.content_type = "application/octet-stream";
		c.call.http.body = w->pending.data;
		c.call.http.body_len = w->pending.len;
		rc = oshttp_call_send(&c.call);
	}
	if (rc == 0 && c.call.http.status != 200)
		rc = s3_fail(&c.call);
	if (rc == 0 && c.call.http.etag[0] == '\0')
		rc = diag_set(STRATA_EIO, "%s: part %s has no ETag in the answer", c.call.what, num);
	if (rc == 0) {
		snprintf(w->etags + (size_t)w->nparts * OBJSTORE_ETAG_MAX, OBJSTORE_ETAG_MAX, "%s", c.call.http.etag);
		w->nparts++;
		buf_reset(&w->pending);
	}
	oshttp_call_destroy(&c.call);
	return rc;
}

/** AbortMultipartUpload of key's upload id (best effort for a writer; counted by recover). */
static int
s3_upload_abort(struct s3_store *s3, const char *key, const char *upload_id)
{
	struct s3_call c;
	int rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_DELETE, "DELETE", "abort_multipart_upload", key);
	if (rc == 0) {
		oshttp_call_query(&c.call, "uploadId", upload_id);
		rc = oshttp_call_send(&c.call);
	}
	if (rc == 0 && c.call.http.status != 204 && c.call.http.status != 200 && c.call.http.status != 404)
		rc = s3_fail(&c.call);
	oshttp_call_destroy(&c.call);
	return rc;
}

static int
s3_writer_open_impl(struct objstore *os, const char *key, int if_absent, struct objstore_writer **out)
{
	struct s3_store *s3 = (struct s3_store *)os;
	int rc = oshttp_store_check_key(&s3->st, key, 0);
	if (rc)
		return rc;
	struct s3_writer *w = env.calloc(1, sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "%s: write %s: out of memory", os->name, key);
	w->base.os = os;
	w->if_absent = if_absent;
	snprintf(w->key, sizeof(w->key), "%s", key);
	*out = &w->base;
	return 0;
}

static int
s3_writer_open(struct objstore *os, const char *key, struct objstore_writer **out)
{
	return s3_writer_open_impl(os, key, 0, out);
}

int
objstore_s3_writer_open_if_absent(struct objstore *os, const char *key, struct objstore_writer **out)
{
	if (os == NULL || os->ops != &s3_ops)
		return diag_set(STRATA_EINVAL, "%s: a conditional streamed write needs an s3:// store",
				os ? os->name : "(null)");
	return s3_writer_open_impl(os, key, 1, out);
}

static int
s3_writer_write(struct objstore_writer *base, const void *data, size_t len)
{
	struct s3_writer *w = (struct s3_writer *)base;
	struct s3_store *s3 = (struct s3_store *)base->os;
	const uint8_t *p = data;
	while (len > 0) {
		/* A full part goes out once more bytes follow: an object of one part is one PutObject. */
		if (w->pending.len == s3->part_bytes) {
			int rc = s3_upload_part(w);
			if (rc)
				return rc;
		}
		size_t room = (size_t)s3->part_bytes - w->pending.len;
		size_t n = len < room ? len : room;
		if (buf_append(&w->pending, p, n) != 0)
			return diag_set(STRATA_ENOMEM, "%s: write %s: out of memory", s3->st.base.name, w->key);
		p += n;
		len -= n;
	}
	return 0;
}

static void
s3_writer_free(struct s3_writer *w)
{
	buf_destroy(&w->pending);
	env.free(w->etags);
	env.free(w);
}

/** CompleteMultipartUpload of w's parts. */
static int
s3_upload_complete(struct s3_writer *w)
{
	struct s3_store *s3 = (struct s3_store *)w->base.os;
	struct buf xml = {0}, body = {0};
	static const char head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUpload>";
	int rc = buf_append(&xml, head, sizeof(head) - 1);
	for (uint32_t i = 0; rc == 0 && i < w->nparts; i++) {
		char part[64];
		snprintf(part, sizeof(part), "<Part><PartNumber>%u</PartNumber><ETag>", i + 1);
		rc = buf_append(&xml, part, strlen(part));
		if (rc == 0)
			rc = s3_xml_text(&xml, w->etags + (size_t)i * OBJSTORE_ETAG_MAX);
		if (rc == 0)
			rc = buf_append(&xml, "</ETag></Part>", 14);
	}
	if (rc == 0)
		rc = buf_append(&xml, "</CompleteMultipartUpload>", 26);
	if (rc) {
		buf_destroy(&xml);
		return diag_set(STRATA_ENOMEM, "%s: write %s: out of memory", s3->st.base.name, w->key);
	}
	const char *inm = w->if_absent && !s3->emulate_if_none_match ? "*" : NULL;
	if (w->if_absent && s3->emulate_if_none_match) {
		rc = oshttp_head(&s3->st, w->key, "complete_multipart_upload", NULL, NULL, 0);
		if (rc == 0)
			rc = diag_set(STRATA_EEXIST, "%s: write %s: already exists", s3->st.base.name, w->key);
		else if (rc == STRATA_NOTFOUND)
			rc = 0;
	}
	objstore_set_indeterminate(0);
	struct s3_call c;
	if (rc == 0)
		rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_COMMIT, "POST", "complete_multipart_upload", w->key);
	else
		memset(&c, 0, sizeof(c));
	if (rc == 0) {
		oshttp_call_query(&c.call, "uploadId", w->upload_id);
		c.call.content_type = "application/xml";
		c.call.if_none_match = inm;
		c.call.http.body = xml.data;
		c.call.http.body_len = xml.len;
		c.call.http.out = &body;
		rc = oshttp_call_send(&c.call);
		if (rc == 0 && c.call.http.status != 200) {
			rc = s3_cond_result(&c.call, NULL, inm);
		} else if (rc == 0) {
			/* A 200 answer may still carry an <Error> (the service failed after it
			 * started answering). */
			char code[128], msg[256];
			if (body.len > 0 && osxml_parse_error(body.data, body.len, code, sizeof(code), msg,
							      sizeof(msg)) == 0)
				rc = diag_set(STRATA_EIO, "%s: HTTP 200 with error %s: %s", c.call.what, code, msg);
			else
				diag_clear();
		}
	}
	oshttp_call_destroy(&c.call);
	buf_destroy(&xml);
	buf_destroy(&body);
	return rc;
}

static int
s3_writer_commit(struct objstore_writer *base)
{
	struct s3_writer *w = (struct s3_writer *)base;
	struct s3_store *s3 = (struct s3_store *)base->os;
	int rc;
	if (w->nparts == 0) {
		rc = s3_put_object(&s3->st, "put", w->key, w->pending.data, w->pending.len, NULL,
				   w->if_absent ? "*" : NULL);
		s3_writer_free(w);
		return rc;
	}
	rc = w->pending.len > 0 ? s3_upload_part(w) : 0;
	if (rc == 0)
		rc = s3_upload_complete(w);
	if (rc != 0 && !objstore_last_indeterminate()) {
		char msg[DIAG_LOG_MAX];
		snprintf(msg, sizeof(msg), "%s", diag_last());
		s3_upload_abort(s3, w->key, w->upload_id);
		diag_set(rc, "%s", msg);
	}
	s3_writer_free(w);
	return rc;
}

static void
s3_writer_abort(struct objstore_writer *base)
{
	struct s3_writer *w = (struct s3_writer *)base;
	if (w->upload_id[0] != '\0' && s3_upload_abort((struct s3_store *)base->os, w->key, w->upload_id) != 0)
		diag_log(LOG_LVL_WARN, "%s (recover aborts it later)", diag_last());
	s3_writer_free(w);
}

/* ---------------------------------------------------------------- recover */

/** Abort the multipart uploads under the prefix older than stale_upload_s: what a crash
 *  left behind (their parts are billed but never part of an object). */
static int
s3_recover(struct objstore *os, uint64_t *removed, uint64_t *bytes)
{
	struct s3_store *s3 = (struct s3_store *)os;
	objstore_set_indeterminate(0);
	*removed = 0;
	*bytes = 0;
	struct s3xml_list l = {0};
	char *key_marker = env.malloc(2 * sizeof(l.next));
	if (key_marker == NULL)
		return diag_set(STRATA_ENOMEM, "%s: recover: out of memory", os->name);
	char *id_marker = key_marker + sizeof(l.next);
	key_marker[0] = id_marker[0] = '\0';
	char page[16];
	snprintf(page, sizeof(page), "%u", s3->st.list_page);
	int64_t now = (int64_t)(env.wall_ns() / 1000000000ull);
	struct buf body = {0};
	int rc = 0;
	for (;;) {
		struct s3_call c;
		rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_LIST, "GET", "recover: list uploads", NULL);
		if (rc) {
			oshttp_call_destroy(&c.call);
			break;
		}
		if (key_marker[0] != '\0')
			oshttp_call_query(&c.call, "key-marker", key_marker);
		oshttp_call_query(&c.call, "max-uploads", page);
		if (s3->st.prefix[0] != '\0')
			oshttp_call_query(&c.call, "prefix", s3->st.prefix);
		if (id_marker[0] != '\0')
			oshttp_call_query(&c.call, "upload-id-marker", id_marker);
		oshttp_call_query(&c.call, "uploads", "");
		buf_reset(&body);
		c.call.http.out = &body;
		rc = oshttp_call_send(&c.call);
		if (rc == 0 && c.call.http.status == 501) {
			diag_log(LOG_LVL_WARN, "%s: the server cannot list multipart uploads (HTTP 501): "
				 "uploads a crash left are not aborted", c.call.what);
			oshttp_call_destroy(&c.call);
			break;
		}
		if (rc == 0 && c.call.http.status != 200)
			rc = s3_fail(&c.call);
		if (rc == 0)
			rc = s3xml_parse_uploads(body.data, body.len, s3->st.list_page, c.call.what, &l);
		oshttp_call_destroy(&c.call);
		for (size_t i = 0; rc == 0 && i < l.n; i++) {
			const char *name = l.v[i].name;
			if (strncmp(name, s3->st.prefix, s3->st.prefix_len) != 0 || name[s3->st.prefix_len] == '\0')
				continue;
			if (s3->stale_upload_s > 0 &&
			    (l.v[i].initiated == 0 || now - l.v[i].initiated < (int64_t)s3->stale_upload_s))
				continue;
			rc = s3_upload_abort(s3, name + s3->st.prefix_len, l.v[i].upload_id);
			if (rc == 0)
				(*removed)++;
		}
		int more = rc == 0 && l.truncated && (l.next[0] != '\0' || l.next_upload[0] != '\0');
		if (more) {
			memcpy(key_marker, l.next, sizeof(l.next));
			memcpy(id_marker, l.next_upload, sizeof(l.next_upload));
		}
		s3xml_list_destroy(&l);
		if (!more)
			break;
	}
	buf_destroy(&body);
	env.free(key_marker);
	return rc;
}

/* ---------------------------------------------------------------- open */

static void
s3_destroy(struct objstore *os)
{
	struct s3_store *s3 = (struct s3_store *)os;
	oshttp_client_delete(s3->st.http);
	memset(s3->secret, 0, sizeof(s3->secret));
	memset(s3->token, 0, sizeof(s3->token));
	env.free(s3);
}

/* The reads, the whole-object writes (through s3_put_object), the delete and the listing
 * are the shared requests of http.c; the streamed writes, the batch delete and recover
 * are S3's own. */
static const struct objstore_ops s3_ops = {
	.get = oshttp_get,
	.get_range = oshttp_get_range,
	.size = oshttp_size,
	.put = oshttp_put,
	.put_if_absent = oshttp_put_if_absent,
	.put_if_match = oshttp_put_if_match,
	.etag = oshttp_etag,
	.writer_open = s3_writer_open,
	.writer_write = s3_writer_write,
	.writer_commit = s3_writer_commit,
	.writer_abort = s3_writer_abort,
	.del = oshttp_del,
	.del_batch = s3_del_batch,
	.list = oshttp_list,
	.recover = s3_recover,
	.request_stats = oshttp_request_stats,
	.destroy = s3_destroy,
};

/** Trim spaces, tabs and line ends off both ends of s in place. */
static char *
s3_trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

/** Copy a credential value into dst, refusing one that does not fit or has a control byte. */
static int
s3_cred_copy(struct s3_store *s3, const char *from, const char *what, const char *v, char *dst, size_t cap)
{
	size_t n = strlen(v);
	int bad = n == 0 || n >= cap;
	for (size_t i = 0; !bad && i < n; i++)
		bad = (unsigned char)v[i] < 0x20 || v[i] == 0x7f;
	if (bad)
		return diag_set(STRATA_EINVAL, "%s: %s in %s is empty, longer than %zu bytes or has a control "
				"character", s3->st.base.name, what, from, cap - 1);
	memcpy(dst, v, n + 1);
	return 0;
}

/** Read the credentials of profile from an ini credentials file. */
static int
s3_read_credentials_file(struct s3_store *s3, const char *path, const char *profile)
{
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0)
		return diag_sys(errno, "open the credentials file", path);
	enum { CRED_FILE_MAX = 64 << 10 };
	char *text = env.malloc(CRED_FILE_MAX + 1);
	if (text == NULL) {
		env.close(fd);
		return diag_set(STRATA_ENOMEM, "%s: out of memory", s3->st.base.name);
	}
	ssize_t n = env_pread_full(fd, text, CRED_FILE_MAX, 0);
	int err = errno;
	env.close(fd);
	int rc = 0;
	if (n < 0)
		rc = diag_sys(err, "read the credentials file", path);
	else if (n == CRED_FILE_MAX)
		rc = diag_set(STRATA_EINVAL, "credentials file %s is larger than %d bytes", path, CRED_FILE_MAX);
	int in = 0, found = 0;
	char id[S3_KEY_ID_MAX + 1] = "", *secret = NULL, *token = NULL;
	if (rc == 0) {
		text[n] = '\0';
		for (char *line = text, *next; rc == 0 && line != NULL; line = next) {
			next = strchr(line, '\n');
			if (next != NULL)
				*next++ = '\0';
			char *l = s3_trim(line);
			if (*l == '\0' || *l == '#' || *l == ';')
				continue;
			if (*l == '[') {
				char *end = strchr(l, ']');
				if (end == NULL) {
					rc = diag_set(STRATA_EINVAL, "credentials file %s: a section header without ']'",
						      path);
					break;
				}
				*end = '\0';
				in = strcmp(s3_trim(l + 1), profile) == 0;
				found |= in;
				continue;
			}
			if (!in)
				continue;
			char *eq = strchr(l, '=');
			if (eq == NULL)
				continue;
			*eq = '\0';
			char *k = s3_trim(l), *v = s3_trim(eq + 1);
			if (strcmp(k, "aws_access_key_id") == 0)
				rc = s3_cred_copy(s3, path, "aws_access_key_id", v, id, sizeof(id) - 1);
			else if (strcmp(k, "aws_secret_access_key") == 0)
				secret = v;
			else if (strcmp(k, "aws_session_token") == 0)
				token = v;
		}
	}
	if (rc == 0 && !found)
		rc = diag_set(STRATA_EINVAL, "%s: credentials file %s has no profile [%s]", s3->st.base.name, path,
			      profile);
	else if (rc == 0 && (id[0] == '\0' || secret == NULL))
		rc = diag_set(STRATA_EINVAL, "%s: profile [%s] of credentials file %s needs aws_access_key_id "
			      "and aws_secret_access_key", s3->st.base.name, profile, path);
	if (rc == 0)
		rc = s3_cred_copy(s3, path, "aws_secret_access_key", secret, s3->secret, sizeof(s3->secret));
	if (rc == 0 && token != NULL)
		rc = s3_cred_copy(s3, path, "aws_session_token", token, s3->token, sizeof(s3->token));
	if (rc == 0)
		memcpy(s3->key_id, id, sizeof(s3->key_id));
	memset(text, 0, CRED_FILE_MAX + 1);
	env.free(text);
	return rc;
}

/** Find the credentials: credentials_file=, the environment, AWS_SHARED_CREDENTIALS_FILE,
 *  ~/.aws/credentials. */
static int
s3_load_credentials(struct s3_store *s3, const char *cred_file, const char *profile)
{
	if (profile == NULL)
		profile = getenv("AWS_PROFILE");
	if (profile == NULL || profile[0] == '\0')
		profile = "default";
	if (cred_file != NULL)
		return s3_read_credentials_file(s3, cred_file, profile);
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	if (id != NULL && id[0] != '\0') {
		if (secret == NULL || secret[0] == '\0')
			return diag_set(STRATA_EINVAL, "%s: AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY",
					s3->st.base.name);
		const char *token = getenv("AWS_SESSION_TOKEN");
		int rc = s3_cred_copy(s3, "the environment", "AWS_ACCESS_KEY_ID", id, s3->key_id,
				      sizeof(s3->key_id));
		if (rc == 0)
			rc = s3_cred_copy(s3, "the environment", "AWS_SECRET_ACCESS_KEY", secret, s3->secret,
					  sizeof(s3->secret));
		if (rc == 0 && token != NULL && token[0] != '\0')
			rc = s3_cred_copy(s3, "the environment", "AWS_SESSION_TOKEN", token, s3->token,
					  sizeof(s3->token));
		return rc;
	}
	const char *shared = getenv("AWS_SHARED_CREDENTIALS_FILE");
	if (shared != NULL && shared[0] != '\0')
		return s3_read_credentials_file(s3, shared, profile);
	const char *home = getenv("HOME");
	char path[1024];
	if (home != NULL && home[0] != '\0') {
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
		int fd = env.open(path, O_RDONLY, 0);
		if (fd >= 0) {
			env.close(fd);
			return s3_read_credentials_file(s3, path, profile);
		}
	}
	return diag_set(STRATA_EINVAL, "%s: no credentials for bucket '%s': set credentials_file=PATH in the "
			"URL, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_SHARED_CREDENTIALS_FILE",
			s3->st.base.name, s3->bucket);
}

/** What the URL parameters set. */
struct s3_strparams {
	/** The store being opened. */
	struct s3_store *s3;
	/** Its HTTP client's limits. */
	struct oshttp_config *hc;
	/** The URL, for messages. */
	const char *url;
	/** endpoint=, region=, credentials_file=, profile= (NULL: absent). */
	const char *endpoint, *region, *cred_file, *profile;
};

/** Set one URL parameter (an oshttp_param_fn of struct s3_strparams). */
static int
s3_param(void *ctx, const char *name, const char *v)
{
	struct s3_strparams *sp = ctx;
	struct s3_store *s3 = sp->s3;
	const char *url = sp->url;
	static const struct {
		const char *name;
		uint64_t lo, hi;
	} nums[] = {
		{"part_bytes", S3_PART_MIN, S3_PART_MAX}, {"list_page", 1, S3_LIST_PAGE},
		{"single_writer", 0, 1}, {"stale_upload_s", 0, 365ull * 86400},
	};
	const char **strs[] = {&sp->endpoint, &sp->region, &sp->cred_file, &sp->profile};
	static const char *const snames[] = {"endpoint", "region", "credentials_file", "profile"};
	for (size_t i = 0; i < 4; i++) {
		if (strcmp(name, snames[i]) == 0) {
			if (v[0] == '\0')
				return diag_set(STRATA_EINVAL, "store URL %s: %s is empty", url, name);
			*strs[i] = v;
			return 0;
		}
	}
	int taken = 0;
	int rc = oshttp_config_param(sp->hc, url, name, v, &taken);
	if (rc || taken)
		return rc;
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(name, nums[i].name) != 0)
			continue;
		uint64_t x = 0;
		rc = oshttp_param_u64(url, name, v, nums[i].lo, nums[i].hi, &x);
		if (rc)
			return rc;
		switch (i) {
		case 0: s3->part_bytes = x; break;
		case 1: s3->st.list_page = (uint32_t)x; break;
		case 2: s3->single_writer = (int)x; break;
		default: s3->stale_upload_s = x; break;
		}
		return 0;
	}
	return diag_set(STRATA_EINVAL, "store URL %s: unknown parameter '%s' (region, endpoint, "
			"credentials_file, profile, single_writer, part_bytes, list_page, stale_upload_s, "
			"connect_timeout_ms, timeout_ms, stall_timeout_ms, retries, backoff_base_ms, "
			"backoff_max_ms, pool, max_response_bytes)", url, name);
}

/** Make sure the bucket exists (create it when it does not) and the credentials are accepted. */
static int
s3_open_bucket(struct s3_store *s3)
{
	int missing = 0;
	int rc = oshttp_probe_container(&s3->st, "HEAD", "open: bucket", NULL, NULL, &missing);
	if (rc || !missing)
		return rc;
	struct s3_call c;
	char body[256] = "";
	if (strcmp(s3->region, "us-east-1") != 0)
		snprintf(body, sizeof(body), "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/"
			 "2006-03-01/\"><LocationConstraint>%s</LocationConstraint></CreateBucketConfiguration>",
			 s3->region);
	rc = oshttp_call_init(&c.call, &s3->st, OSHTTP_OP_OTHER, "PUT", "open: create bucket", NULL);
	if (rc == 0) {
		c.call.content_type = "application/xml";
		c.call.http.body = body;
		c.call.http.body_len = strlen(body);
		rc = oshttp_call_send(&c.call);
	}
	if (rc == 0 && c.call.http.status != 200) {
		char code[128];
		s3_error_code(&c.call.http, code, sizeof(code), NULL, 0);
		if (c.call.http.status != 409 || strcmp(code, "BucketAlreadyOwnedByYou") != 0)
			rc = s3_fail(&c.call);
	}
	oshttp_call_destroy(&c.call);
	return rc;
}

/** The stale If-Match value of the probe: never an ETag a server gives. */
#define S3_PROBE_STALE_ETAG "\"strata-probe-stale-etag\""

/** Write a probe object twice with If-None-Match: * (and once with a stale If-Match): a
 *  server that accepts the second write does not enforce conditional writes. */
static int
s3_probe(struct s3_store *s3)
{
	char key[64];
	snprintf(key, sizeof(key), ".strata-probe/%016llx", (unsigned long long)oshttp_random());
	int rc = s3_put_object_raw(s3, "open: probe", key, "1", 1, NULL, "*");
	if (rc)
		return rc;
	int inm = s3_put_object_raw(s3, "open: probe", key, "2", 1, NULL, "*");
	int enforced_inm = inm == STRATA_EEXIST;
	char why[512] = "";
	if (inm != 0 && inm != STRATA_EEXIST)
		snprintf(why, sizeof(why), " (%s)", diag_last());
	int im = s3_put_object_raw(s3, "open: probe", key, "3", 1, S3_PROBE_STALE_ETAG, NULL);
	int enforced_im = im == STRATA_ECONFLICT;
	int del = oshttp_del(&s3->st.base, key);
	if (inm != 0 && inm != STRATA_EEXIST && strstr(why, "HTTP 501") == NULL)
		return diag_set(inm, "%s: open: the conditional-write probe failed%s", s3->st.base.name, why);
	if (im != 0 && im != STRATA_ECONFLICT && strstr(diag_last(), "HTTP 501") == NULL && del == 0)
		return diag_set(im, "%s: open: the If-Match probe failed", s3->st.base.name);
	if (!enforced_inm && !s3->single_writer)
		return diag_set(STRATA_EINVAL, "%s: the server does not enforce If-None-Match%s: conditional "
				"writes are needed when several writers may share the store; add single_writer=1 "
				"to the URL if you guarantee one node", s3->st.base.name,
				inm == 0 ? " (a second put-if-absent of the probe object succeeded)" : why);
	if (!enforced_im && !s3->single_writer)
		return diag_set(STRATA_EINVAL, "%s: the server does not enforce If-Match (a put with a stale "
				"ETag succeeded): conditional writes are needed when several writers may share the "
				"store; add single_writer=1 to the URL if you guarantee one node", s3->st.base.name);
	s3->emulate_if_none_match = !enforced_inm;
	s3->emulate_if_match = !enforced_im;
	if (s3->emulate_if_none_match || s3->emulate_if_match)
		diag_log(LOG_LVL_WARN, "%s: the server does not enforce %s; single_writer=1: conditions are "
			 "checked by a HEAD first, which is safe only while one node writes the store",
			 s3->st.base.name, !enforced_inm && !enforced_im ? "If-None-Match nor If-Match"
					: !enforced_inm ? "If-None-Match" : "If-Match");
	if (del != 0)
		diag_log(LOG_LVL_WARN, "%s: the probe object %s was not deleted: %s", s3->st.base.name, key,
			 diag_last());
	return 0;
}

/** Whether s is a bucket name: 3..63 of [a-z0-9.-], a letter or digit at both ends. */
static int
s3_valid_bucket(const char *s)
{
	size_t n = strlen(s);
	if (n < 3 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		int alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
		if (alnum)
			continue;
		if ((ch == '-' || ch == '.') && i > 0 && i + 1 < n)
			continue;
		return 0;
	}
	return 1;
}

/** Whether s is a region name: 1..32 of [a-z0-9-]. */
static int
s3_valid_region(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

int
objstore_s3_new(const char *url, struct objstore **out)
{
	*out = NULL;
	static const char scheme[] = "s3://";
	void *store;
	char *copy, *query;
	int rc = oshttp_url_open(url, scheme, sizeof(struct s3_store), &store, &copy, &query);
	if (rc)
		return rc;
	struct s3_store *s3 = store;
	s3->st.base.ops = &s3_ops;
	s3->st.ops = &s3_http_ops;
	s3->st.key_max = S3_KEY_MAX;
	s3->st.list_page = S3_LIST_PAGE;
	s3->part_bytes = S3_PART_DEFAULT;
	s3->stale_upload_s = S3_STALE_UPLOAD_S;
	struct oshttp_config hc;
	oshttp_config_init(&hc);
	char *bucket = copy + sizeof(scheme) - 1;
	char *pfx = strchr(bucket, '/');
	if (pfx != NULL)
		*pfx++ = '\0';
	if (!s3_valid_bucket(bucket))
		rc = diag_set(STRATA_EINVAL, "store URL %s: the bucket must be 3 to 63 lowercase letters, digits, "
			      "dots and hyphens, not '%.64s' (s3://BUCKET[/PREFIX])", url, bucket);
	if (rc == 0) {
		snprintf(s3->bucket, sizeof(s3->bucket), "%s", bucket);
		size_t pl = 0;
		rc = oshttp_url_prefix(url, pfx, s3->st.prefix, sizeof(s3->st.prefix), &pl);
		s3->st.prefix_len = strlen(s3->st.prefix);
		snprintf(s3->st.base.name, sizeof(s3->st.base.name), "s3://%s%s%.*s", s3->bucket, pl ? "/" : "",
			 (int)pl, pl ? pfx : "");
	}
	struct s3_strparams sp = {.s3 = s3, .hc = &hc, .url = url};
	if (rc == 0)
		rc = oshttp_url_params(url, query, s3_param, &sp);
	if (rc == 0) {
		const char *region = sp.region;
		if (region == NULL)
			region = getenv("AWS_REGION");
		if (region == NULL || region[0] == '\0')
			region = getenv("AWS_DEFAULT_REGION");
		if (region == NULL || region[0] == '\0')
			region = "us-east-1";
		if (!s3_valid_region(region))
			rc = diag_set(STRATA_EINVAL, "store URL %s: region must be 1 to 32 lowercase letters, digits "
				      "and hyphens, not '%.64s'", url, region);
		else
			snprintf(s3->region, sizeof(s3->region), "%s", region);
		snprintf(s3->sigv4, sizeof(s3->sigv4), "aws:amz:%s:s3", s3->region);
	}
	if (rc == 0) {
		const char *endpoint = sp.endpoint;
		if (endpoint != NULL) {
			rc = oshttp_url_endpoint(url, endpoint, s3->st.origin, sizeof(s3->st.origin));
			if (rc == 0)
				snprintf(s3->st.path0, sizeof(s3->st.path0), "/%s", s3->bucket);
		} else if (strchr(s3->bucket, '.') != NULL) {
			snprintf(s3->st.origin, sizeof(s3->st.origin), "https://s3.%s.amazonaws.com", s3->region);
			snprintf(s3->st.path0, sizeof(s3->st.path0), "/%s", s3->bucket);
		} else {
			snprintf(s3->st.origin, sizeof(s3->st.origin), "https://%s.s3.%s.amazonaws.com", s3->bucket,
				 s3->region);
		}
	}
	if (rc == 0)
		rc = s3_load_credentials(s3, sp.cred_file, sp.profile);
	if (rc == 0)
		rc = oshttp_client_new(&hc, &s3->st.http);
	env.free(copy);
	if (rc == 0)
		rc = s3_open_bucket(s3);
	if (rc == 0)
		rc = s3_probe(s3);
	if (rc) {
		s3_destroy(&s3->st.base);
		return rc;
	}
	*out = &s3->st.base;
	return 0;
}

struct oshttp_client *
objstore_s3_client(struct objstore *os)
{
	return os != NULL && os->ops == &s3_ops ? ((struct s3_store *)os)->st.http : NULL;
}

int
objstore_s3_conditions_enforced(struct objstore *os)
{
	if (os == NULL || os->ops != &s3_ops)
		return -1;
	struct s3_store *s3 = (struct s3_store *)os;
	return !s3->emulate_if_none_match && !s3->emulate_if_match;
}
