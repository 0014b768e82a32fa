/*
 * azure.c — the Azure Blob object store: azure://ACCOUNT/CONTAINER[/PREFIX][?k=v&...].
 * Every request is signed with SharedKey (HMAC-SHA256 through libcrypto). put_if_absent
 * is Put Blob with If-None-Match: *, put_if_match is Put Blob with If-Match: ETAG, a
 * streamed write is Put Block per block_bytes and one Put Block List (a write that fits
 * one block is one Put Blob), list is List Blobs by prefix and marker (byte order).
 * With endpoint=URL the service is addressed path-style (URL/ACCOUNT/CONTAINER, as
 * Azurite and the emulators are); without it https://ACCOUNT.blob.core.windows.net.
 * The key comes from key_file=PATH, AZURE_STORAGE_KEY_FILE or AZURE_STORAGE_KEY (with
 * AZURE_STORAGE_ACCOUNT, when set, naming the same account); it never appears in a URL,
 * a message or a log line.
 */
#include "objstore.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "azure_xml.h"
#include "http.h"
#include "xml.h"
#include "../lib/base64.h"
#include "../lib/diag.h"
#include "../lib/env.h"

/** The API version requests ask for. */
#define AZ_VERSION "2021-12-02"
/** Longest key accepted (the service's limit on a blob name, with the prefix). */
#define AZ_KEY_MAX 1024
_Static_assert(AZ_KEY_MAX <= OSHTTP_KEY_MAX, "a key fits the buffers of the shared requests");
/** Default and limits of a streamed write's block. */
#define AZ_BLOCK_DEFAULT (8u << 20)
#define AZ_BLOCK_MIN (64u << 10)
#define AZ_BLOCK_MAX (256u << 20)
/** Most blocks of one blob (the service's limit). */
#define AZ_BLOCKS_MAX 50000u
/** Default and largest List Blobs page. */
#define AZ_LIST_PAGE 5000u

/** An Azure Blob store. */
struct az_store {
	/** The generic header and what its requests are built from: the HTTP client, the key
	 *  prefix, the origin and the path ("/ACCOUNT/CONTAINER" path-style, "/CONTAINER" on
	 *  the public endpoint), the List Blobs page; must be first. */
	struct oshttp_store st;
	/** Storage account. */
	char account[64];
	/** Container. */
	char container[64];
	/** The decoded account key. */
	uint8_t key[128];
	/** Its length. */
	size_t key_len;
	/** Block size of streamed writes. */
	uint64_t block_bytes;
};

/** A streamed write: blocks of block_bytes, then the block list. */
struct az_writer {
	/** Generic header; must be first. */
	struct objstore_writer base;
	/** The blob's key (without the store prefix). */
	char key[AZ_KEY_MAX + 1];
	/** Bytes not yet sent as a block. */
	struct buf pending;
	/** Blocks put so far. */
	uint32_t nblocks;
	/** Random part of this write's block ids. */
	uint64_t id;
};

/** One signed request being built (its range goes in x-ms-range). */
struct az_call {
	/** The request; must be first. */
	struct oshttp_call call;
	/** x-ms-blob-type (NULL: none). */
	const char *blob_type;
};
_Static_assert(sizeof(struct az_call) <= sizeof(struct oshttp_call) + OSHTTP_CALL_EXTRA,
	       "the shared requests have room for an Azure request");

static const struct objstore_ops az_ops;
static const struct oshttp_store_ops az_http_ops;
static int az_put_blob(struct oshttp_store *store, const char *opname, const char *key, const void *data, size_t len,
		       const char *if_match, const char *if_none_match);

/* ---------------------------------------------------------------- requests */

/** The store of a request. */
static struct az_store *
az_of(struct oshttp_store *st)
{
	return (struct az_store *)((char *)st - offsetof(struct az_store, st));
}

/** RFC 1123 date of the environment's wall clock. */
static void
az_date(char *dst, size_t cap)
{
	static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t t = (time_t)(env.wall_ns() / 1000000000ull);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(dst, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
		 months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/** The headers of one attempt, signed (SharedKey) with a fresh date. */
static int
az_headers(void *ctx, struct curl_slist **h)
{
	struct az_call *ac = ctx;
	struct oshttp_call *c = &ac->call;
	struct az_store *az = az_of(c->st);
	char date[64], len[32] = "";
	az_date(date, sizeof(date));
	if (c->http.body_len > 0)
		snprintf(len, sizeof(len), "%zu", c->http.body_len);
	struct buf s = {0};
	int rc = 0;
	char head[2048];
	snprintf(head, sizeof(head), "%s\n\n\n%s\n\n%s\n\n\n%s\n%s\n\n\n", c->http.method, len,
		 c->content_type ? c->content_type : "", c->if_match ? c->if_match : "",
		 c->if_none_match ? c->if_none_match : "");
	rc |= buf_append(&s, head, strlen(head));
	if (ac->blob_type != NULL) {
		snprintf(head, sizeof(head), "x-ms-blob-type:%s\n", ac->blob_type);
		rc |= buf_append(&s, head, strlen(head));
	}
	snprintf(head, sizeof(head), "x-ms-date:%s\n", date);
	rc |= buf_append(&s, head, strlen(head));
	if (c->range[0] != '\0') {
		snprintf(head, sizeof(head), "x-ms-range:%s\n", c->range);
		rc |= buf_append(&s, head, strlen(head));
	}
	snprintf(head, sizeof(head), "x-ms-version:%s\n/%s", AZ_VERSION, az->account);
	rc |= buf_append(&s, head, strlen(head));
	rc |= buf_append(&s, c->to.path.data, c->to.path.len);
	for (int i = 0; i < c->to.nq; i++) {
		rc |= buf_append(&s, "\n", 1);
		rc |= buf_append(&s, c->to.qn[i], strlen(c->to.qn[i]));
		rc |= buf_append(&s, ":", 1);
		rc |= buf_append(&s, c->to.qv[i], strlen(c->to.qv[i]));
	}
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	if (rc == 0 && HMAC(EVP_sha256(), az->key, (int)az->key_len, s.data, s.len, mac, &maclen) == NULL) {
		buf_destroy(&s);
		return diag_set(STRATA_EIO, "%s: HMAC-SHA256 failed", c->what);
	}
	buf_destroy(&s);
	struct buf sig = {0};
	if (rc == 0)
		rc = b64_encode(&sig, mac, maclen);
	if (rc == 0)
		rc = buf_append(&sig, "", 1);
	if (rc == 0) {
		snprintf(head, sizeof(head), "SharedKey %s:%s", az->account, (const char *)sig.data);
		rc = oshttp_header(h, "Authorization", head);
	}
	buf_destroy(&sig);
	rc = rc ? rc : oshttp_header(h, "x-ms-date", date);
	rc = rc ? rc : oshttp_header(h, "x-ms-version", AZ_VERSION);
	rc = rc ? rc : oshttp_call_headers(c, h, "x-ms-range");
	if (rc == 0 && ac->blob_type != NULL)
		rc = oshttp_header(h, "x-ms-blob-type", ac->blob_type);
	return rc ? diag_set(STRATA_ENOMEM, "%s: out of memory", c->what) : 0;
}

/** Sign c with SharedKey (an oshttp_store_ops.sign). */
static int
az_sign(struct oshttp_call *c)
{
	c->http.headers = az_headers;
	c->http.headers_ctx = c;
	return 0;
}

/** The service's error code of an answer (the header, else the body's <Code>). */
static void
az_error_code(struct oshttp_call *c, char *code, size_t cap, char *msg, size_t mcap)
{
	msg[0] = '\0';
	snprintf(code, cap, "%s", c->http.error_code);
	if (c->http.error_body.len > 0) {
		char bcode[128];
		if (osxml_parse_error(c->http.error_body.data, c->http.error_body.len, bcode, sizeof(bcode), msg,
				      mcap) == 0) {
			if (code[0] == '\0')
				snprintf(code, cap, "%s", bcode);
		} else {
			diag_clear();
		}
	}
	oshttp_flatten(msg);
}

/** Map an answer that is not the expected success to a code and a message. */
static int
az_fail(struct oshttp_call *c)
{
	struct az_store *az = az_of(c->st);
	char code[128], msg[512];
	az_error_code(c, code, sizeof(code), msg, sizeof(msg));
	long st = c->http.status;
	if (st == 403)
		return diag_set(STRATA_EIO, "%s: HTTP 403 %s: the service refused the credentials of account '%s' "
				"(check its key: key_file=, AZURE_STORAGE_KEY_FILE or AZURE_STORAGE_KEY)%s%s",
				c->what, code, az->account, msg[0] ? ": " : "", msg);
	if (st == 404 && strcmp(code, "ContainerNotFound") == 0)
		return diag_set(STRATA_EIO, "%s: container '%s' of account '%s' does not exist", c->what,
				az->container, az->account);
	return oshttp_fail_answer(&c->http, code, msg);
}

/** Whether an answer is a 404 about the blob (not the container). */
static int
az_key_missing(struct oshttp_call *c)
{
	return c->http.status == 404 && strcmp(c->http.error_code, "ContainerNotFound") != 0;
}

/** The query of a List Blobs page (an oshttp_store_ops.list_query). */
static void
az_list_query(struct oshttp_call *c, const char *next, const char *page, const char *full)
{
	oshttp_call_query(c, "comp", "list");
	if (next[0] != '\0')
		oshttp_call_query(c, "marker", next);
	oshttp_call_query(c, "maxresults", page);
	if (full[0] != '\0')
		oshttp_call_query(c, "prefix", full);
	oshttp_call_query(c, "restype", "container");
}

_Static_assert(sizeof(((struct azxml_list *)0)->next_marker) == OSHTTP_LIST_NEXT_MAX + 1,
	       "a NextMarker fits where oshttp_list keeps it");

/** Parse a List Blobs page; the next starts at its NextMarker (an oshttp_store_ops.list_page). */
static int
az_list_page(struct oshttp_call *c, const struct buf *body, uint32_t max, struct oshttp_lister *ls, char *next)
{
	struct azxml_list l = {0};
	int rc = azxml_parse_list(body->data, body->len, max, c->what, &l);
	for (size_t i = 0; rc == 0 && i < l.n; i++)
		rc = oshttp_list_entry(ls, l.v[i].name, l.v[i].size);
	if (rc == 0)
		memcpy(next, l.next_marker, sizeof(l.next_marker));
	azxml_list_destroy(&l);
	return rc;
}

_Static_assert(offsetof(struct az_call, call) == 0, "the shared request is the first member");

static const struct oshttp_store_ops az_http_ops = {
	.call_size = sizeof(struct az_call),
	.sign = az_sign,
	.fail = az_fail,
	.key_missing = az_key_missing,
	.put = az_put_blob,
	.delete_status = 202,
	.list_query = az_list_query,
	.list_page = az_list_page,
};

/* ---------------------------------------------------------------- writes */

/** Put Blob of data at key, with an optional condition (an oshttp_store_ops.put): 201 is
 *  done; the condition lost is 409 or 412 for If-None-Match, 412, 404 or 409 for If-Match. */
static int
az_put_blob(struct oshttp_store *store, const char *opname, const char *key, const void *data, size_t len,
	    const char *if_match, const char *if_none_match)
{
	struct az_call c;
	int rc = oshttp_put_init(store, &c.call, opname, key, data, len, if_match, if_none_match);
	c.blob_type = "BlockBlob";
	if (rc == 0)
		rc = oshttp_call_send(&c.call);
	if (rc == 0) {
		long st = c.call.http.status;
		int lost = (if_none_match != NULL && (st == 409 || st == 412)) ||
			   (if_match != NULL && (st == 412 || st == 404 || st == 409));
		if (st == 201)
			rc = 0;
		else if (lost)
			rc = oshttp_cond_lost(&c.call.http, if_match, if_none_match);
		else
			rc = az_fail(&c.call);
	}
	oshttp_call_destroy(&c.call);
	return rc;
}

/** The block id of block i of w (fixed length, base64). */
static int
az_block_id(const struct az_writer *w, uint32_t i, struct buf *out)
{
	char raw[32];
	int n = snprintf(raw, sizeof(raw), "%016llx%08x", (unsigned long long)w->id, i);
	buf_reset(out);
	int rc = b64_encode(out, (const uint8_t *)raw, (size_t)n);
	return rc ? rc : buf_append(out, "", 1);
}

/** Put Block of w's pending bytes. */
static int
az_put_block(struct az_writer *w)
{
	struct az_store *az = (struct az_store *)w->base.os;
	if (w->nblocks >= AZ_BLOCKS_MAX)
		return diag_set(STRATA_ETOOBIG, "%s: write %s: more than %u blocks of %llu bytes", az->st.base.name,
				w->key, AZ_BLOCKS_MAX, (unsigned long long)az->block_bytes);
	struct buf id = {0};
	struct az_call c;
	int rc = oshttp_call_init(&c.call, &az->st, OSHTTP_OP_PART, "PUT", "put_block", w->key);
	if (rc == 0 && az_block_id(w, w->nblocks, &id) != 0)
		rc = diag_set(STRATA_ENOMEM, "%s: out of memory", c.call.what);
	if (rc == 0) {
		oshttp_call_query(&c.call, "blockid", (const char *)id.data);
		oshttp_call_query(&c.call, "comp", "block");
		c.call.content_type = "application/octet-stream";
		c.call.http.body = w->pending.data;
		c.call.http.body_len = w->pending.len;
		rc = oshttp_call_send(&c.call);
	}
	if (rc == 0 && c.call.http.status != 201)
		rc = az_fail(&c.call);
	if (rc == 0) {
		w->nblocks++;
		buf_reset(&w->pending);
	}
	oshttp_call_destroy(&c.call);
	buf_destroy(&id);
	return rc;
}

static int
az_writer_open(struct objstore *os, const char *key, struct objstore_writer **out)
{
	struct az_store *az = (struct az_store *)os;
	int rc = oshttp_store_check_key(&az->st, key, 0);
	if (rc)
		return rc;
	struct az_writer *w = env.calloc(1, sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "%s: write %s: out of memory", os->name, key);
	w->base.os = os;
	snprintf(w->key, sizeof(w->key), "%s", key);
	w->id = oshttp_random() ^ (uint64_t)(uintptr_t)w;
	*out = &w->base;
	return 0;
}

static int
az_writer_write(struct objstore_writer *base, const void *data, size_t len)
{
	struct az_writer *w = (struct az_writer *)base;
	struct az_store *az = (struct az_store *)base->os;
	const uint8_t *p = data;
	while (len > 0) {
		size_t room = (size_t)az->block_bytes - w->pending.len;
		size_t n = len < room ? len : room;
		if (buf_append(&w->pending, p, n) != 0)
			return diag_set(STRATA_ENOMEM, "%s: write %s: out of memory", az->st.base.name, w->key);
		p += n;
		len -= n;
		if (w->pending.len == az->block_bytes) {
			int rc = az_put_block(w);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void
az_writer_free(struct az_writer *w)
{
	buf_destroy(&w->pending);
	env.free(w);
}

static int
az_writer_commit(struct objstore_writer *base)
{
	struct az_writer *w = (struct az_writer *)base;
	struct az_store *az = (struct az_store *)base->os;
	int rc;
	if (w->nblocks == 0) {
		rc = az_put_blob(&az->st, "put", w->key, w->pending.data, w->pending.len, NULL, NULL);
		az_writer_free(w);
		return rc;
	}
	rc = w->pending.len > 0 ? az_put_block(w) : 0;
	struct buf xml = {0}, id = {0};
	static const char head[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
	if (rc == 0 && buf_append(&xml, head, sizeof(head) - 1) != 0)
		rc = STRATA_ENOMEM;
	for (uint32_t i = 0; rc == 0 && i < w->nblocks; i++) {
		if (az_block_id(w, i, &id) != 0 || buf_append(&xml, "<Latest>", 8) != 0 ||
		    buf_append(&xml, id.data, id.len - 1) != 0 || buf_append(&xml, "</Latest>", 9) != 0)
			rc = STRATA_ENOMEM;
	}
	if (rc == 0 && buf_append(&xml, "</BlockList>", 12) != 0)
		rc = STRATA_ENOMEM;
	if (rc == STRATA_ENOMEM)
		diag_set(rc, "%s: write %s: out of memory", az->st.base.name, w->key);
	if (rc == 0) {
		objstore_set_indeterminate(0);
		struct az_call c;
		rc = oshttp_call_init(&c.call, &az->st, OSHTTP_OP_COMMIT, "PUT", "put_block_list", w->key);
		if (rc == 0) {
			oshttp_call_query(&c.call, "comp", "blocklist");
			c.call.content_type = "application/xml";
			c.call.http.body = xml.data;
			c.call.http.body_len = xml.len;
			rc = oshttp_call_send(&c.call);
		}
		if (rc == 0 && c.call.http.status != 201)
			rc = az_fail(&c.call);
		oshttp_call_destroy(&c.call);
	}
	buf_destroy(&xml);
	buf_destroy(&id);
	az_writer_free(w);
	return rc;
}

static void
az_writer_abort(struct objstore_writer *base)
{
	/* Blocks never committed are not part of any blob; the service drops them. */
	az_writer_free((struct az_writer *)base);
}

/* ---------------------------------------------------------------- open */

static void
az_destroy(struct objstore *os)
{
	struct az_store *az = (struct az_store *)os;
	oshttp_client_delete(az->st.http);
	memset(az->key, 0, sizeof(az->key));
	env.free(az);
}

/* The reads, the whole-object writes (through az_put_blob), the delete and the listing
 * are the shared requests of http.c; the streamed writes are Azure's own. */
static const struct objstore_ops az_ops = {
	.get = oshttp_get,
	.get_range = oshttp_get_range,
	.size = oshttp_size,
	.put = oshttp_put,
	.put_if_absent = oshttp_put_if_absent,
	.put_if_match = oshttp_put_if_match,
	.etag = oshttp_etag,
	.writer_open = az_writer_open,
	.writer_write = az_writer_write,
	.writer_commit = az_writer_commit,
	.writer_abort = az_writer_abort,
	.del = oshttp_del,
	.list = oshttp_list,
	.request_stats = oshttp_request_stats,
	.destroy = az_destroy,
};

/** Read a key file (base64, surrounding whitespace ignored) into dst. */
static int
az_read_key_file(const char *path, char *dst, size_t cap, const char *account)
{
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0)
		return diag_sys(errno, "open the key file of account", path);
	ssize_t n = env_pread_full(fd, dst, cap - 1, 0);
	int err = errno;
	env.close(fd);
	if (n < 0)
		return diag_sys(err, "read the key file", path);
	dst[n] = '\0';
	if ((size_t)n == cap - 1)
		return diag_set(STRATA_EINVAL, "key file %s of account '%s' is larger than a key", path, account);
	return 0;
}

/** Find and decode the account key. */
static int
az_load_key(struct az_store *az, const char *key_file)
{
	char text[512];
	const char *src = NULL;
	if (key_file == NULL)
		key_file = getenv("AZURE_STORAGE_KEY_FILE");
	if (key_file != NULL && key_file[0] != '\0') {
		int rc = az_read_key_file(key_file, text, sizeof(text), az->account);
		if (rc)
			return rc;
		src = text;
	} else {
		const char *acct = getenv("AZURE_STORAGE_ACCOUNT");
		const char *k = getenv("AZURE_STORAGE_KEY");
		if (k == NULL || k[0] == '\0')
			return diag_set(STRATA_EINVAL, "%s: no key for account '%s': set key_file=PATH in the URL, "
					"AZURE_STORAGE_KEY_FILE, or AZURE_STORAGE_KEY (with AZURE_STORAGE_ACCOUNT)",
					az->st.base.name, az->account);
		if (acct != NULL && acct[0] != '\0' && strcmp(acct, az->account) != 0)
			return diag_set(STRATA_EINVAL, "%s: AZURE_STORAGE_KEY is the key of account '%s' "
					"(AZURE_STORAGE_ACCOUNT), not of '%s'", az->st.base.name, acct, az->account);
		snprintf(text, sizeof(text), "%s", k);
		src = text;
	}
	while (*src == ' ' || *src == '\t' || *src == '\n' || *src == '\r')
		src++;
	size_t n = strlen(src);
	while (n > 0 && (src[n - 1] == ' ' || src[n - 1] == '\t' || src[n - 1] == '\n' || src[n - 1] == '\r'))
		n--;
	size_t got = 0;
	if (n == 0 || b64_decoded_max(n) > sizeof(az->key) ||
	    b64_decode(src, n, 0, az->key, &got) != 0 || got == 0) {
		memset(text, 0, sizeof(text));
		diag_clear();
		return diag_set(STRATA_EINVAL, "%s: the key of account '%s' is not base64", az->st.base.name,
				az->account);
	}
	memset(text, 0, sizeof(text));
	az->key_len = got;
	return 0;
}

/** What the URL parameters set. */
struct az_params {
	/** The store being opened. */
	struct az_store *az;
	/** Its HTTP client's limits. */
	struct oshttp_config *hc;
	/** The URL, for messages. */
	const char *url;
	/** endpoint= and key_file= (NULL: absent). */
	const char *endpoint, *key_file;
};

/** Set one URL parameter (an oshttp_param_fn of struct az_params). */
static int
az_param(void *ctx, const char *name, const char *v)
{
	struct az_params *ap = ctx;
	struct az_store *az = ap->az;
	static const struct {
		const char *name;
		uint64_t lo, hi;
	} nums[] = {
		{"block_bytes", AZ_BLOCK_MIN, AZ_BLOCK_MAX}, {"list_page", 1, AZ_LIST_PAGE},
	};
	if (strcmp(name, "endpoint") == 0) {
		ap->endpoint = v;
		return 0;
	}
	if (strcmp(name, "key_file") == 0) {
		ap->key_file = v;
		return 0;
	}
	int taken = 0;
	int rc = oshttp_config_param(ap->hc, ap->url, name, v, &taken);
	if (rc || taken)
		return rc;
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(name, nums[i].name) != 0)
			continue;
		uint64_t x = 0;
		rc = oshttp_param_u64(ap->url, name, v, nums[i].lo, nums[i].hi, &x);
		if (rc)
			return rc;
		if (i == 0)
			az->block_bytes = x;
		else
			az->st.list_page = (uint32_t)x;
		return 0;
	}
	return diag_set(STRATA_EINVAL, "store URL %s: unknown parameter '%s' (endpoint, key_file, "
			"connect_timeout_ms, timeout_ms, stall_timeout_ms, retries, backoff_base_ms, "
			"backoff_max_ms, pool, max_response_bytes, block_bytes, list_page)", ap->url, name);
}

/** Make sure the container exists (create it when it does not) and the key is accepted. */
static int
az_probe(struct az_store *az)
{
	int missing = 0;
	int rc = oshttp_probe_container(&az->st, "GET", "open: container properties", "restype", "container",
					&missing);
	if (rc || !missing)
		return rc;
	struct az_call c;
	rc = oshttp_call_init(&c.call, &az->st, OSHTTP_OP_OTHER, "PUT", "open: create container", NULL);
	oshttp_call_query(&c.call, "restype", "container");
	if (rc == 0)
		rc = oshttp_call_send(&c.call);
	if (rc == 0 && c.call.http.status != 201 && c.call.http.status != 409)
		rc = az_fail(&c.call);
	oshttp_call_destroy(&c.call);
	return rc;
}

/** Whether s is 3..max of [a-z0-9] (hyphens allowed, not first or last, when hyphen). */
static int
az_valid_name(const char *s, size_t n, size_t max, int hyphen)
{
	if (n < 3 || n > max)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
			continue;
		if (hyphen && ch == '-' && i > 0 && i + 1 < n && s[i - 1] != '-')
			continue;
		return 0;
	}
	return 1;
}

int
objstore_azure_new(const char *url, struct objstore **out)
{
	*out = NULL;
	static const char scheme[] = "azure://";
	void *store;
	char *copy, *query;
	int rc = oshttp_url_open(url, scheme, sizeof(struct az_store), &store, &copy, &query);
	if (rc)
		return rc;
	struct az_store *az = store;
	az->st.base.ops = &az_ops;
	az->st.ops = &az_http_ops;
	az->st.key_max = AZ_KEY_MAX;
	az->st.list_page = AZ_LIST_PAGE;
	az->block_bytes = AZ_BLOCK_DEFAULT;
	struct oshttp_config hc;
	oshttp_config_init(&hc);
	char *acct = copy + sizeof(scheme) - 1;
	char *ctr = strchr(acct, '/');
	char *pfx = ctr != NULL ? strchr(ctr + 1, '/') : NULL;
	if (ctr != NULL)
		*ctr++ = '\0';
	if (pfx != NULL)
		*pfx++ = '\0';
	if (!az_valid_name(acct, strlen(acct), 24, 0))
		rc = diag_set(STRATA_EINVAL, "store URL %s: the account must be 3 to 24 lowercase letters "
			      "and digits, not '%s' (azure://ACCOUNT/CONTAINER[/PREFIX])", url, acct);
	else if (ctr == NULL || !az_valid_name(ctr, strlen(ctr), 63, 1))
		rc = diag_set(STRATA_EINVAL, "store URL %s: the container must be 3 to 63 lowercase letters, "
			      "digits and single hyphens (azure://ACCOUNT/CONTAINER[/PREFIX])", url);
	if (rc == 0) {
		snprintf(az->account, sizeof(az->account), "%s", acct);
		snprintf(az->container, sizeof(az->container), "%s", ctr);
		size_t pl = 0;
		rc = oshttp_url_prefix(url, pfx, az->st.prefix, sizeof(az->st.prefix), &pl);
		az->st.prefix_len = strlen(az->st.prefix);
		snprintf(az->st.base.name, sizeof(az->st.base.name), "azure://%s/%s%s%.*s", az->account,
			 az->container, pl ? "/" : "", (int)pl, pl ? pfx : "");
	}
	struct az_params ap = {.az = az, .hc = &hc, .url = url};
	if (rc == 0)
		rc = oshttp_url_params(url, query, az_param, &ap);
	if (rc == 0) {
		if (ap.endpoint != NULL) {
			rc = oshttp_url_endpoint(url, ap.endpoint, az->st.origin, sizeof(az->st.origin));
			if (rc == 0)
				snprintf(az->st.path0, sizeof(az->st.path0), "/%s/%s", az->account, az->container);
		} else {
			snprintf(az->st.origin, sizeof(az->st.origin), "https://%s.blob.core.windows.net", az->account);
			snprintf(az->st.path0, sizeof(az->st.path0), "/%s", az->container);
		}
	}
	if (rc == 0)
		rc = az_load_key(az, ap.key_file);
	if (rc == 0)
		rc = oshttp_client_new(&hc, &az->st.http);
	env.free(copy);
	if (rc == 0)
		rc = az_probe(az);
	if (rc) {
		az_destroy(&az->st.base);
		return rc;
	}
	*out = &az->st.base;
	return 0;
}

struct oshttp_client *
objstore_azure_client(struct objstore *os)
{
	return os != NULL && os->ops == &az_ops ? ((struct az_store *)os)->st.http : NULL;
}
