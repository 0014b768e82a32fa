/*
 * load_http.c — the HTTP target of `strata load`: libcurl's multi interface driven
 * by the runner's libev loop (CURLMOPT_SOCKETFUNCTION / CURLMOPT_TIMERFUNCTION),
 * with at most `slots` connections to the node, kept alive and reused.
 *
 * The runner never hands more than `slots` requests at once, so libcurl never
 * queues one internally: a request's send time is when it reaches the wire's queue.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../net/curl_ev.h"
#include "load.h"

struct lhttp;

/** One request in flight. */
struct lhttp_xfer {
	/** Its easy handle. */
	CURL *easy;
	/** The request. */
	struct load_req *r;
	/** Header list owned by this transfer (raw requests), or NULL. */
	struct curl_slist *own_headers;
	/** Full URL. */
	char *url;
	/** The response outgrew LOAD_MAX_RESPONSE_BYTES. */
	int too_big;
	/** Previous and next live transfer. */
	struct lhttp_xfer *prev, *next;
};

/** The HTTP target. */
struct lhttp {
	/** Public part (first member). */
	struct load_target t;
	/** The loop and its multi handle (node/net/curl_ev.h). */
	struct ev_loop *loop;
	struct curl_ev curl;
	/** Runs requests that failed before reaching libcurl. */
	ev_timer defer;
	/** Requests failed before reaching libcurl, to complete from the loop. */
	struct load_req *deferred, *deferred_tail;
	/** Base URL without a trailing slash. */
	char base[1024];
	/** Per-request timeout, ms. */
	long timeout_ms;
	/** Header lists: NDJSON rows, batch rows, policy text, no body. */
	struct curl_slist *hdr_ndjson, *hdr_batch, *hdr_text, *hdr_plain;
	/** "Authorization: Bearer ..." or "". */
	char auth[1100];
	/** Idle easy handles. */
	CURL **idle;
	/** Number of idle easy handles. */
	unsigned nidle;
	/** Live transfers. */
	struct lhttp_xfer *live;
	/** A cluster's shard map (GET /v1/cluster): each shard's owner URL ("" unknown: base),
	 *  nowner entries; NULL when the target is no cluster member. */
	char (*owner)[256];
	uint32_t nowner;
};

/** Most 421s one request follows. */
#define LHTTP_MAX_REDIRECTS 4u

static int lhttp_follow(struct lhttp *h, struct load_req *r);

static size_t
lhttp_write_cb(char *p, size_t size, size_t n, void *ud)
{
	struct lhttp_xfer *x = ud;
	size_t len = size * n;
	if (x->r->resp.len + len > LOAD_MAX_RESPONSE_BYTES) {
		x->too_big = 1;
		return 0;
	}
	if (buf_append(&x->r->resp, p, len) != 0)
		return 0;
	return len;
}

static size_t
lhttp_header_cb(char *p, size_t size, size_t n, void *ud)
{
	struct lhttp_xfer *x = ud;
	size_t len = size * n;
	/* A new status line (after 100 Continue or a redirect) restarts the header block. */
	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		buf_reset(&x->r->resp_headers);
		x->r->has_retry_after = 0;
	}
	if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
		char num[32];
		size_t nl = len - 12 < sizeof(num) - 1 ? len - 12 : sizeof(num) - 1;
		memcpy(num, p + 12, nl);
		num[nl] = '\0';
		char *end;
		double secs = strtod(num, &end);
		if (end != num && secs >= 0 && secs <= 86400) {
			x->r->has_retry_after = 1;
			x->r->retry_after_s = secs;
		}
	}
	if (!x->r->want_headers)
		return len;
	if (x->r->resp_headers.len + len > (1u << 20))
		return len;
	if (buf_append(&x->r->resp_headers, p, len) != 0)
		return 0;
	return len;
}

static void
lhttp_xfer_free(struct lhttp *h, struct lhttp_xfer *x)
{
	if (x->prev != NULL)
		x->prev->next = x->next;
	else
		h->live = x->next;
	if (x->next != NULL)
		x->next->prev = x->prev;
	if (x->easy != NULL) {
		if (h->nidle < h->t.slots) {
			curl_easy_reset(x->easy);
			h->idle[h->nidle++] = x->easy;
		} else {
			curl_easy_cleanup(x->easy);
		}
	}
	curl_slist_free_all(x->own_headers);
	env.free(x->url);
	env.free(x);
}

static json_int_t
lhttp_json_uint(json_t *o, const char *name, int *ok)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		*ok = 0;
		return 0;
	}
	return json_integer_value(v);
}

/** Parse the JSON reply of an append or a merge into r. */
static void
lhttp_parse_reply(struct load_req *r)
{
	json_error_t jerr;
	json_t *j = json_loadb(r->resp.len ? (const char *)r->resp.data : "", r->resp.len, 0, &jerr);
	if (j == NULL || !json_is_object(j)) {
		load_req_fail(r, LOAD_FAIL_RESPONSE, "%s reply is not a JSON object: %.*s", load_verb_name(r->verb),
			      (int)(r->resp.len > 200 ? 200 : r->resp.len), r->resp.len ? (const char *)r->resp.data : "");
		json_decref(j);
		return;
	}
	int ok = 1;
	if (r->verb == LOAD_VERB_APPEND) {
		r->appended = (uint64_t)lhttp_json_uint(j, "appended", &ok);
		r->last_seq = (uint64_t)lhttp_json_uint(j, "last_seq", &ok);
	} else {
		r->reclaimed = (uint64_t)lhttp_json_uint(j, "reclaimed", &ok);
		r->pending = (uint64_t)lhttp_json_uint(j, "pending", &ok);
	}
	if (!ok)
		load_req_fail(r, LOAD_FAIL_RESPONSE, "%s reply lacks %s: %.*s", load_verb_name(r->verb),
			      r->verb == LOAD_VERB_APPEND ? "appended/last_seq" : "reclaimed/pending",
			      (int)(r->resp.len > 200 ? 200 : r->resp.len), r->resp.len ? (const char *)r->resp.data : "");
	json_decref(j);
}

static void
lhttp_complete(struct lhttp *h, struct lhttp_xfer *x, CURLcode res)
{
	struct load_req *r = x->r;
	r->t_done = load_now_ns();
	long status = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	r->status = (int)status;
	if (res != CURLE_OK) {
		int fail = LOAD_FAIL_TRANSPORT;
		switch (res) {
		case CURLE_COULDNT_CONNECT:
		case CURLE_COULDNT_RESOLVE_HOST:
			fail = LOAD_FAIL_CONNECT;
			break;
		case CURLE_OPERATION_TIMEDOUT:
			fail = LOAD_FAIL_TIMEOUT;
			break;
		case CURLE_SEND_ERROR:
			fail = LOAD_FAIL_WRITE;
			break;
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
			fail = LOAD_FAIL_READ;
			break;
		default:
			break;
		}
		if (x->too_big)
			load_req_fail(r, LOAD_FAIL_RESPONSE, "%s %s: response over %llu bytes", load_verb_name(r->verb),
				      x->url, (unsigned long long)LOAD_MAX_RESPONSE_BYTES);
		else
			load_req_fail(r, fail, "%s %s: %s", load_verb_name(r->verb), x->url, curl_easy_strerror(res));
	} else if (status == 200 && (r->verb == LOAD_VERB_APPEND || r->verb == LOAD_VERB_MERGE)) {
		lhttp_parse_reply(r);
	}
	lhttp_xfer_free(h, x);
	r->priv = NULL;
	if (res == CURLE_OK && lhttp_follow(h, r))
		return;
	r->done(r);
}

/** curl_ev_done_fn: a request's transfer finished. */
static void
lhttp_finished(void *ctx, CURL *easy, CURLcode res)
{
	struct lhttp_xfer *x = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
	lhttp_complete(ctx, x, res);
}

static void
lhttp_defer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct lhttp *h = w->data;
	while (h->deferred != NULL) {
		struct load_req *r = h->deferred;
		h->deferred = r->next;
		if (h->deferred == NULL)
			h->deferred_tail = NULL;
		r->next = NULL;
		r->t_done = load_now_ns();
		r->done(r);
	}
}

/** Complete r later from the loop (it failed before reaching libcurl). */
static void
lhttp_fail_later(struct lhttp *h, struct load_req *r)
{
	r->next = NULL;
	if (h->deferred_tail != NULL)
		h->deferred_tail->next = r;
	else
		h->deferred = r;
	h->deferred_tail = r;
	if (!ev_is_active(&h->defer)) {
		ev_timer_set(&h->defer, 0., 0.);
		ev_timer_start(h->loop, &h->defer);
	}
}

/** Append "&name=escaped(value)" (or "?name=") to u. */
static int
lhttp_query_arg(CURL *easy, struct buf *u, int *first, const char *name, const struct buf *v)
{
	char *esc = curl_easy_escape(easy, v->len ? (const char *)v->data : "", (int)v->len);
	if (esc == NULL)
		return -1;
	int rc = buf_append(u, *first ? "?" : "&", 1);
	if (rc == 0)
		rc = buf_append(u, name, strlen(name));
	if (rc == 0)
		rc = buf_append(u, "=", 1);
	if (rc == 0)
		rc = buf_append(u, esc, strlen(esc));
	curl_free(esc);
	*first = 0;
	return rc;
}

/** The verb addresses r->shard (its URL names the shard). */
static int
lhttp_shard_verb(const struct load_req *r)
{
	switch (r->verb) {
	case LOAD_VERB_APPEND:
	case LOAD_VERB_GET:
	case LOAD_VERB_VERIFY:
	case LOAD_VERB_SCAN:
	case LOAD_VERB_SEAL:
	case LOAD_VERB_MERGE:
		return 1;
	case LOAD_VERB_STATS:
		return r->stats_shard;
	default:
		return 0;
	}
}

/** Where a request for r goes: the owner of its shard when the map names one, else base. */
static const char *
lhttp_base_of(const struct lhttp *h, const struct load_req *r)
{
	if (h->owner != NULL && lhttp_shard_verb(r) && r->shard < h->nowner && h->owner[r->shard][0] != '\0')
		return h->owner[r->shard];
	return h->base;
}

/** Build the URL of r into u (NUL-terminated). */
static int
lhttp_build_url(struct lhttp *h, CURL *easy, struct load_req *r, struct buf *u)
{
	char tmp[256];
	const char *base = lhttp_base_of(h, r);
	int rc = buf_append(u, base, strlen(base));
	switch (r->verb) {
	case LOAD_VERB_APPEND:
		snprintf(tmp, sizeof(tmp), "/v1/shards/%u/rows", r->shard);
		break;
	case LOAD_VERB_GET:
	case LOAD_VERB_VERIFY:
	case LOAD_VERB_SCAN:
		snprintf(tmp, sizeof(tmp), "/v1/shards/%u/rows", r->shard);
		break;
	case LOAD_VERB_SEAL:
		snprintf(tmp, sizeof(tmp), "/v1/shards/%u/seal", r->shard);
		break;
	case LOAD_VERB_MERGE:
		snprintf(tmp, sizeof(tmp), "/v1/shards/%u/merge-wal", r->shard);
		break;
	case LOAD_VERB_POLICY:
	case LOAD_VERB_GET_POLICY:
		snprintf(tmp, sizeof(tmp), "/v1/policy");
		break;
	case LOAD_VERB_STATS:
		if (r->stats_shard)
			snprintf(tmp, sizeof(tmp), "/v1/shards/%u/stats", r->shard);
		else
			snprintf(tmp, sizeof(tmp), "/v1/stats");
		break;
	default:
		tmp[0] = '\0';
		break;
	}
	if (rc == 0)
		rc = buf_append(u, tmp, strlen(tmp));
	if (rc == 0 && (r->verb == LOAD_VERB_GET || r->verb == LOAD_VERB_VERIFY)) {
		char *esc = curl_easy_escape(easy, r->key.len ? (const char *)r->key.data : "", (int)r->key.len);
		if (esc == NULL)
			return -1;
		rc = buf_append(u, "/", 1);
		if (rc == 0)
			rc = buf_append(u, esc, strlen(esc));
		curl_free(esc);
	}
	if (rc == 0 && r->verb == LOAD_VERB_SCAN) {
		int first = 1;
		if (r->scan_bounds & 1)
			rc = lhttp_query_arg(easy, u, &first, "prefix", &r->scan_prefix);
		if (rc == 0 && (r->scan_bounds & 2))
			rc = lhttp_query_arg(easy, u, &first, "start", &r->scan_start);
		if (rc == 0 && (r->scan_bounds & 4))
			rc = lhttp_query_arg(easy, u, &first, "end", &r->scan_end);
		snprintf(tmp, sizeof(tmp), "%climit=%u", first ? '?' : '&', r->scan_limit);
		if (rc == 0)
			rc = buf_append(u, tmp, strlen(tmp));
	}
	if (rc == 0 && r->verb == LOAD_VERB_HTTP)
		rc = buf_append(u, r->path.data, r->path.len);
	if (rc == 0)
		rc = buf_append(u, "", 1);
	return rc;
}

static void lhttp_send(struct lhttp *h, struct load_req *r);

static void
lhttp_submit(struct load_target *t, struct load_req *r)
{
	struct lhttp *h = (struct lhttp *)t;
	r->t_send = load_now_ns();
	r->redirects = 0;
	lhttp_send(h, r);
}

/** A 421 naming another owner of r's shard: learn it and send r there; 1 when sent. */
static int
lhttp_follow(struct lhttp *h, struct load_req *r)
{
	if (h->owner == NULL || r->status != 421 || !lhttp_shard_verb(r) || r->shard >= h->nowner ||
	    r->redirects >= LHTTP_MAX_REDIRECTS)
		return 0;
	json_t *j = json_loadb(r->resp.len ? (const char *)r->resp.data : "", r->resp.len, 0, NULL);
	const char *u = json_string_value(json_object_get(j, "owner_url"));
	int sent = 0;
	if (u != NULL && strncmp(u, "http://", 7) == 0 && strlen(u) < sizeof(h->owner[0]) &&
	    strcmp(u, lhttp_base_of(h, r)) != 0) {
		snprintf(h->owner[r->shard], sizeof(h->owner[0]), "%s", u);
		r->redirects++;
		buf_reset(&r->resp);
		buf_reset(&r->resp_headers);
		r->status = 0;
		r->fail = LOAD_FAIL_NONE;
		r->errmsg[0] = '\0';
		r->has_retry_after = 0;
		lhttp_send(h, r);
		sent = 1;
	}
	json_decref(j);
	return sent;
}

static void
lhttp_send(struct lhttp *h, struct load_req *r)
{
	struct lhttp_xfer *x = env.calloc(1, sizeof(*x));
	if (x == NULL) {
		load_req_fail(r, LOAD_FAIL_TRANSPORT, "out of memory for a transfer");
		lhttp_fail_later(h, r);
		return;
	}
	x->r = r;
	x->easy = h->nidle ? h->idle[--h->nidle] : curl_easy_init();
	struct buf u = { 0 };
	if (x->easy == NULL || lhttp_build_url(h, x->easy, r, &u) != 0) {
		buf_destroy(&u);
		if (x->easy != NULL)
			curl_easy_cleanup(x->easy);
		env.free(x);
		load_req_fail(r, LOAD_FAIL_TRANSPORT, "cannot set up a transfer (out of memory)");
		lhttp_fail_later(h, r);
		return;
	}
	x->url = (char *)u.data;
	CURL *e = x->easy;
	curl_easy_setopt(e, CURLOPT_URL, x->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, lhttp_write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, h->timeout_ms);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, lhttp_header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	struct curl_slist *hdrs = h->hdr_plain;
	switch (r->verb) {
	case LOAD_VERB_APPEND:
		hdrs = r->batch ? h->hdr_batch : h->hdr_ndjson;
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)r->body.data);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
		break;
	case LOAD_VERB_SEAL:
	case LOAD_VERB_MERGE:
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
		break;
	case LOAD_VERB_POLICY:
		hdrs = h->hdr_text;
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body.len ? (const char *)r->body.data : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
		break;
	case LOAD_VERB_HTTP: {
		struct curl_slist *own = NULL;
		const char *p = (const char *)r->headers.data;
		for (unsigned i = 0; i < r->nheaders; i++) {
			struct curl_slist *n = curl_slist_append(own, p);
			if (n == NULL)
				break;
			own = n;
			p += strlen(p) + 1;
		}
		struct curl_slist *n = curl_slist_append(own, "Expect:");
		if (n != NULL)
			own = n;
		if (h->auth[0] != '\0' && (n = curl_slist_append(own, h->auth)) != NULL)
			own = n;
		x->own_headers = own;
		hdrs = own;
		if (strcmp(r->method, "HEAD") == 0)
			curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		else if (strcmp(r->method, "GET") != 0 || r->body.len > 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
		if (r->body.len > 0 || strcmp(r->method, "POST") == 0 || strcmp(r->method, "PUT") == 0) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body.len ? (const char *)r->body.data : "");
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
		}
		break;
	}
	default:
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
		break;
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	x->next = h->live;
	if (h->live != NULL)
		h->live->prev = x;
	h->live = x;
	r->priv = x;
	CURLMcode mc = curl_multi_add_handle(h->curl.multi, e);
	if (mc != CURLM_OK) {
		load_req_fail(r, LOAD_FAIL_TRANSPORT, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
		lhttp_xfer_free(h, x);
		r->priv = NULL;
		lhttp_fail_later(h, r);
	}
}

static void
lhttp_cancel_all(struct load_target *t)
{
	struct lhttp *h = (struct lhttp *)t;
	while (h->live != NULL) {
		struct lhttp_xfer *x = h->live;
		struct load_req *r = x->r;
		curl_multi_remove_handle(h->curl.multi, x->easy);
		load_req_fail(r, LOAD_FAIL_INTERRUPTED, "%s %s: interrupted at the end of the run",
			      load_verb_name(r->verb), x->url);
		r->t_done = load_now_ns();
		lhttp_xfer_free(h, x);
		r->priv = NULL;
		r->done(r);
	}
	lhttp_defer_cb(h->loop, &h->defer, 0);
}

static void
lhttp_destroy(struct load_target *t)
{
	struct lhttp *h = (struct lhttp *)t;
	lhttp_cancel_all(t);
	ev_timer_stop(h->loop, &h->defer);
	for (unsigned i = 0; i < h->nidle; i++)
		curl_easy_cleanup(h->idle[i]);
	curl_ev_destroy(&h->curl);
	curl_slist_free_all(h->hdr_ndjson);
	curl_slist_free_all(h->hdr_batch);
	curl_slist_free_all(h->hdr_text);
	curl_slist_free_all(h->hdr_plain);
	env.free(h->idle);
	env.free(h->owner);
	env.free(h);
}

static struct curl_slist *
lhttp_headers(const struct lhttp *h, const char *content_type)
{
	struct curl_slist *l = curl_slist_append(NULL, "Expect:");
	if (l != NULL && content_type != NULL) {
		struct curl_slist *n = curl_slist_append(l, content_type);
		if (n == NULL) {
			curl_slist_free_all(l);
			return NULL;
		}
		l = n;
	}
	if (l != NULL && h->auth[0] != '\0') {
		struct curl_slist *n = curl_slist_append(l, h->auth);
		if (n == NULL) {
			curl_slist_free_all(l);
			return NULL;
		}
		l = n;
	}
	return l;
}

int
load_http_new(struct ev_loop *loop, const char *base_url, unsigned slots, double timeout_s, const char *token,
	      struct load_target **out)
{
	if (slots == 0 || slots > LOAD_MAX_SLOTS)
		return diag_set(STRATA_EINVAL, "load: connections must be 1..%u, not %u", LOAD_MAX_SLOTS, slots);
	size_t blen = strlen(base_url);
	int has_scheme = strstr(base_url, "://") != NULL;
	if (blen == 0 || blen + 8 >= sizeof(((struct lhttp *)0)->base))
		return diag_set(STRATA_EINVAL, "load: bad target URL \"%s\"", base_url);
	if (has_scheme && strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0)
		return diag_set(STRATA_EINVAL, "load: target \"%s\" must be an http:// or https:// URL", base_url);
	if (token != NULL && strlen(token) > 1024)
		return diag_set(STRATA_EINVAL, "load: token longer than 1024 bytes");
	struct lhttp *h = env.calloc(1, sizeof(*h));
	if (h == NULL)
		return diag_set(STRATA_ENOMEM, "load: out of memory for the HTTP target");
	h->idle = env.calloc(slots, sizeof(*h->idle));
	if (h->idle == NULL) {
		env.free(h);
		return diag_set(STRATA_ENOMEM, "load: out of memory for the HTTP target");
	}
	snprintf(h->base, sizeof(h->base), "%s%s", has_scheme ? "" : "http://", base_url);
	size_t n = strlen(h->base);
	while (n > 0 && h->base[n - 1] == '/')
		h->base[--n] = '\0';
	h->loop = loop;
	h->timeout_ms = (long)((timeout_s > 0 ? timeout_s : 30.0) * 1000.0);
	if (token != NULL && token[0] != '\0')
		snprintf(h->auth, sizeof(h->auth), "Authorization: Bearer %s", token);
	h->t.kind = "http";
	snprintf(h->t.desc, sizeof(h->t.desc), "%s", h->base);
	h->t.slots = slots;
	h->t.submit = lhttp_submit;
	h->t.cancel_all = lhttp_cancel_all;
	h->t.destroy = lhttp_destroy;
	ev_timer_init(&h->defer, lhttp_defer_cb, 0., 0.);
	h->defer.data = h;
	h->hdr_ndjson = lhttp_headers(h, "Content-Type: application/x-ndjson");
	h->hdr_batch = lhttp_headers(h, "Content-Type: application/x-strata-batch");
	h->hdr_text = lhttp_headers(h, "Content-Type: text/x-lua");
	h->hdr_plain = lhttp_headers(h, NULL);
	if (curl_ev_init(&h->curl, h->loop, lhttp_finished, h) != 0 || h->hdr_ndjson == NULL || h->hdr_batch == NULL || h->hdr_text == NULL ||
	    h->hdr_plain == NULL) {
		lhttp_destroy(&h->t);
		return diag_set(STRATA_ENOMEM, "load: cannot set up libcurl");
	}
	curl_multi_setopt(h->curl.multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)slots);
	curl_multi_setopt(h->curl.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)slots);
	curl_multi_setopt(h->curl.multi, CURLMOPT_MAXCONNECTS, (long)slots);
	curl_multi_setopt(h->curl.multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
	*out = &h->t;
	return 0;
}

/** Body sink of the probe. */
static size_t
lhttp_probe_write(char *p, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len + len > (4u << 20) || buf_append(b, p, len) != 0)
		return 0;
	return len;
}

/** GET base + path (blocking): 0 with the HTTP status and the body, or -1 with err. */
static int
lhttp_get(struct lhttp *h, const char *path, long *status, struct buf *body, char *err, size_t errlen)
{
	CURL *e = curl_easy_init();
	if (e == NULL) {
		snprintf(err, errlen, "cannot set up libcurl");
		return -1;
	}
	char url[1100];
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, h->timeout_ms < 10000 ? h->timeout_ms : 10000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, lhttp_probe_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->hdr_plain);
	CURLcode res = curl_easy_perform(e);
	*status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(e);
	if (res != CURLE_OK && res != CURLE_WRITE_ERROR) {
		snprintf(err, errlen, "cannot reach %s: %s", url, curl_easy_strerror(res));
		return -1;
	}
	return 0;
}

/** A cluster member's map (GET /v1/cluster) into h->owner; nothing when the node is none. */
static void
lhttp_learn_map(struct lhttp *h, uint32_t shards)
{
	struct buf body = {0};
	long status = 0;
	char err[1200];
	if (shards == 0 || lhttp_get(h, "/v1/cluster", &status, &body, err, sizeof(err)) != 0 || status != 200) {
		buf_destroy(&body);
		return;
	}
	json_t *j = json_loadb(body.len ? (const char *)body.data : "", body.len, 0, NULL);
	buf_destroy(&body);
	json_t *list = json_object_get(j, "shards");
	if (!json_is_array(list) || (h->owner = env.calloc(shards, sizeof(*h->owner))) == NULL) {
		json_decref(j);
		return;
	}
	h->nowner = shards;
	size_t i, known = 0;
	json_t *e;
	json_array_foreach(list, i, e) {
		json_int_t sh = json_integer_value(json_object_get(e, "shard"));
		const char *u = json_string_value(json_object_get(e, "owner_url"));
		if (sh >= 0 && (uint64_t)sh < shards && u != NULL && strncmp(u, "http://", 7) == 0 &&
		    strlen(u) < sizeof(h->owner[0])) {
			snprintf(h->owner[sh], sizeof(h->owner[0]), "%s", u);
			known++;
		}
	}
	size_t members = json_array_size(json_object_get(j, "members"));
	snprintf(h->t.desc, sizeof(h->t.desc), "%.300s (cluster of %zu members; %zu of %u shards' owners known, "
		 "each request sent to its shard's owner)", h->base, members, known, shards);
	json_decref(j);
}

int
load_http_probe(struct load_target *t, uint32_t *shards, char *err, size_t errlen)
{
	struct lhttp *h = (struct lhttp *)t;
	*shards = 0;
	struct buf body = { 0 };
	long status = 0;
	if (lhttp_get(h, "/v1/stats", &status, &body, err, errlen) != 0) {
		buf_destroy(&body);
		return -1;
	}
	if (status == 200) {
		json_error_t jerr;
		json_t *j = json_loadb(body.len ? (const char *)body.data : "", body.len, 0, &jerr);
		json_t *n = json_object_get(j, "shard_count");
		if (json_is_integer(n) && json_integer_value(n) > 0 && json_integer_value(n) <= 65536)
			*shards = (uint32_t)json_integer_value(n);
		json_decref(j);
	}
	buf_destroy(&body);
	lhttp_learn_map(h, *shards);
	return 0;
}
