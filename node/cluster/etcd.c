/* etcd.c — etcd's v3 JSON gateway over libcurl's multi interface on a libev loop (etcd.h). */
#include "etcd.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/base64.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../net/curl_ev.h"
#include "../strata_types.h"

/** One call in flight. */
struct etcd_xfer {
	/** Its easy handle. */
	CURL *easy;
	/** The request body (JSON text) and the reply. */
	struct buf body, reply;
	/** The reply outgrew ETCD_MAX_REPLY_BYTES. */
	int too_big;
	/** The endpoint it went to (index). */
	unsigned endpoint;
	/** Who hears of it. */
	etcd_done_fn *done;
	void *ctx;
	/** A stream (etcd_stream): each complete line of the reply goes to line, then is
	 *  dropped from reply. */
	etcd_line_fn *line;
	/** Previous and next live call. */
	struct etcd_xfer *prev, *next;
};

struct etcd {
	/** The loop and its multi handle (node/net/curl_ev.h). */
	struct ev_loop *loop;
	struct curl_ev curl;
	/** The endpoints, "HOST:PORT". */
	char endpoints[ETCD_MAX_ENDPOINTS][256];
	unsigned nendpoints;
	/** The endpoint of the next call. */
	unsigned current;
	/** Time limit of a call, ms. */
	long timeout_ms;
	/** "Content-Type: application/json". */
	struct curl_slist *headers;
	/** Live calls. */
	struct etcd_xfer *live;
	unsigned nlive;
};

static size_t
etcd_write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct etcd_xfer *x = arg;
	size_t len = size * n;
	if (x->reply.len + len > ETCD_MAX_REPLY_BYTES) {
		x->too_big = 1;
		return 0;
	}
	if (buf_append(&x->reply, p, len) != 0)
		return 0;
	if (x->line != NULL) {
		/* A stream: hand over each complete line (one JSON message), keep the rest. */
		size_t start = 0;
		for (size_t i = 0; i < x->reply.len; i++) {
			if (x->reply.data[i] != '\n')
				continue;
			json_t *m = json_loadb((const char *)x->reply.data + start, i - start, 0, NULL);
			if (m != NULL)
				x->line(x->ctx, m);
			json_decref(m);
			start = i + 1;
		}
		if (start > 0) {
			memmove(x->reply.data, x->reply.data + start, x->reply.len - start);
			x->reply.len -= start;
		}
	}
	return len;
}

static void
etcd_xfer_free(struct etcd_xfer *x)
{
	if (x->easy != NULL)
		curl_easy_cleanup(x->easy);
	buf_destroy(&x->body);
	buf_destroy(&x->reply);
	env.free(x);
}

/** Take x off the list of live calls. */
static void
etcd_unlink(struct etcd *e, struct etcd_xfer *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		e->live = x->next;
	if (x->next)
		x->next->prev = x->prev;
	e->nlive--;
}

/** Words for an HTTP reply that is not a 200: etcd's "error"/"message", else the body. */
static void
etcd_http_error(long status, const struct buf *reply, char *err, size_t errlen)
{
	json_t *j = json_loadb((const char *)reply->data, reply->len, 0, NULL);
	const char *m = NULL;
	if (j != NULL) {
		m = json_string_value(json_object_get(j, "message"));
		if (m == NULL)
			m = json_string_value(json_object_get(j, "error"));
	}
	if (m != NULL)
		snprintf(err, errlen, "HTTP %ld: %s", status, m);
	else
		snprintf(err, errlen, "HTTP %ld: %.*s", status, (int)(reply->len > 200 ? 200 : reply->len),
			 reply->data ? (const char *)reply->data : "");
	json_decref(j);
}

/** Hand x's outcome to its caller (transport result res). */
static void
etcd_complete(struct etcd *e, struct etcd_xfer *x, CURLcode res)
{
	char err[512] = "";
	json_t *reply = NULL;
	int rc = 0;
	long status = 0;
	if (res != CURLE_OK) {
		rc = STRATA_EIO;
		snprintf(err, sizeof(err), "etcd at %s: %s", e->endpoints[x->endpoint],
			 x->too_big ? "reply over the size limit" : curl_easy_strerror(res));
		/* The next call tries the next endpoint. */
		if (e->current == x->endpoint && e->nendpoints > 1)
			e->current = (x->endpoint + 1) % e->nendpoints;
	} else {
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status != 200) {
			rc = STRATA_EIO;
			char h[400];
			etcd_http_error(status, &x->reply, h, sizeof(h));
			snprintf(err, sizeof(err), "etcd at %s: %s", e->endpoints[x->endpoint], h);
		} else if (x->line != NULL) {
			rc = STRATA_EIO; /* a stream that ended: the caller starts another */
			snprintf(err, sizeof(err), "etcd at %s: the stream ended", e->endpoints[x->endpoint]);
		} else if ((reply = json_loadb((const char *)x->reply.data, x->reply.len, 0, NULL)) == NULL ||
			   !json_is_object(reply)) {
			rc = STRATA_ECORRUPT;
			snprintf(err, sizeof(err), "etcd at %s: the reply is not a JSON object", e->endpoints[x->endpoint]);
		}
	}
	etcd_unlink(e, x);
	etcd_done_fn *done = x->done;
	void *ctx = x->ctx;
	etcd_xfer_free(x);
	done(ctx, rc, rc ? NULL : reply, err);
	json_decref(reply);
}

/** curl_ev_done_fn: a call's transfer finished. */
static void
etcd_finished(void *ctx, CURL *easy, CURLcode res)
{
	struct etcd_xfer *x = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
	etcd_complete(ctx, x, res);
}

/** An easy handle for POST /v3/path of body to endpoint i, writing into x (or NULL). */
static CURL *
etcd_easy(struct etcd *e, unsigned i, const char *path, const struct buf *body, struct etcd_xfer *x)
{
	CURL *c = curl_easy_init();
	if (c == NULL)
		return NULL;
	char url[512];
	snprintf(url, sizeof(url), "http://%s/v3/%s", e->endpoints[i], path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)body->data);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body->len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	if (x != NULL) {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, etcd_write_cb);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
		curl_easy_setopt(c, CURLOPT_PRIVATE, x);
	}
	return c;
}

/** The JSON text of body (taken) into out, NUL-terminated. 0 or STRATA_ENOMEM. */
static int
etcd_dump(json_t *body, struct buf *out)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (s == NULL)
		return diag_set(STRATA_ENOMEM, "etcd: out of memory for a request");
	int rc = buf_append(out, s, strlen(s) + 1);
	free(s);
	if (rc == 0)
		out->len--; /* the NUL stays past len */
	return rc;
}

static int etcd_start(struct etcd *e, const char *path, json_t *body, etcd_line_fn *line, etcd_done_fn *done,
		      void *ctx, struct etcd_xfer **out);

int
etcd_call(struct etcd *e, const char *path, json_t *body, etcd_done_fn *done, void *ctx)
{
	return etcd_start(e, path, body, NULL, done, ctx, NULL);
}

int
etcd_stream(struct etcd *e, const char *path, json_t *body, etcd_line_fn *line, etcd_done_fn *done, void *ctx,
	    struct etcd_xfer **out)
{
	return etcd_start(e, path, body, line, done, ctx, out);
}

void
etcd_cancel(struct etcd *e, struct etcd_xfer *x)
{
	for (struct etcd_xfer *y = e->live; y != NULL; y = y->next) {
		if (y != x)
			continue;
		curl_multi_remove_handle(e->curl.multi, x->easy);
		etcd_unlink(e, x);
		etcd_xfer_free(x);
		return;
	}
}

static int
etcd_start(struct etcd *e, const char *path, json_t *body, etcd_line_fn *line, etcd_done_fn *done, void *ctx,
	   struct etcd_xfer **out)
{
	if (out != NULL)
		*out = NULL;
	struct etcd_xfer *x = env.calloc(1, sizeof(*x));
	if (x == NULL) {
		json_decref(body);
		return diag_set(STRATA_ENOMEM, "etcd: out of memory for a request");
	}
	int rc = etcd_dump(body, &x->body);
	if (rc) {
		etcd_xfer_free(x);
		return rc;
	}
	x->endpoint = e->current;
	x->done = done;
	x->ctx = ctx;
	x->line = line;
	if ((x->easy = etcd_easy(e, x->endpoint, path, &x->body, x)) == NULL) {
		etcd_xfer_free(x);
		return diag_set(STRATA_ENOMEM, "etcd: curl_easy_init failed");
	}
	if (line != NULL) {
		/* A stream lasts: no time limit but the connect's; TCP keep-alives find a dead peer. */
		curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, 0L);
		curl_easy_setopt(x->easy, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(x->easy, CURLOPT_TCP_KEEPIDLE, 5L);
		curl_easy_setopt(x->easy, CURLOPT_TCP_KEEPINTVL, 2L);
	}
	CURLMcode mc = curl_multi_add_handle(e->curl.multi, x->easy);
	if (mc != CURLM_OK) {
		etcd_xfer_free(x);
		return diag_set(STRATA_EIO, "etcd: curl_multi_add_handle: %s", curl_multi_strerror(mc));
	}
	x->next = e->live;
	if (e->live)
		e->live->prev = x;
	e->live = x;
	e->nlive++;
	if (out != NULL)
		*out = x;
	return 0;
}

int
etcd_call_sync(struct etcd *e, const char *path, json_t *body, json_t **reply, char *err, size_t errlen)
{
	if (reply != NULL)
		*reply = NULL;
	struct buf b = {0};
	int rc = etcd_dump(body, &b);
	if (rc) {
		snprintf(err, errlen, "%s", diag_last());
		return rc;
	}
	rc = STRATA_EIO;
	for (unsigned k = 0; k < e->nendpoints && rc != 0; k++) {
		unsigned i = (e->current + k) % e->nendpoints;
		CURL *c = etcd_easy(e, i, path, &b, NULL);
		if (c == NULL) {
			snprintf(err, errlen, "curl_easy_init failed");
			break;
		}
		struct etcd_xfer sink = {0};
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, etcd_write_cb);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
		CURLcode res = curl_easy_perform(c);
		long status = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (res != CURLE_OK) {
			snprintf(err, errlen, "etcd at %s: %s", e->endpoints[i], curl_easy_strerror(res));
		} else if (status != 200) {
			char h[400];
			etcd_http_error(status, &sink.reply, h, sizeof(h));
			snprintf(err, errlen, "etcd at %s: %s", e->endpoints[i], h);
		} else if (reply != NULL &&
			   (*reply = json_loadb((const char *)sink.reply.data, sink.reply.len, 0, NULL)) == NULL) {
			snprintf(err, errlen, "etcd at %s: the reply is not JSON", e->endpoints[i]);
			rc = STRATA_ECORRUPT;
			buf_destroy(&sink.reply);
			curl_easy_cleanup(c);
			break;
		} else {
			rc = 0;
		}
		buf_destroy(&sink.reply);
		curl_easy_cleanup(c);
	}
	buf_destroy(&b);
	return rc;
}

unsigned
etcd_inflight(const struct etcd *e)
{
	return e->nlive;
}

const char *
etcd_endpoint(const struct etcd *e)
{
	return e->endpoints[e->current];
}

int
etcd_new(const struct etcd_options *o, struct etcd **out)
{
	*out = NULL;
	struct etcd *e = env.calloc(1, sizeof(*e));
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "etcd: out of memory");
	e->loop = o->loop;
	e->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 2000;
	const char *p = o->endpoints;
	while (p != NULL && *p) {
		size_t n = strcspn(p, ",");
		if (n == 0 || n >= sizeof(e->endpoints[0]) || e->nendpoints == ETCD_MAX_ENDPOINTS ||
		    memchr(p, ':', n) == NULL || memchr(p, '/', n) != NULL) {
			env.free(e);
			return diag_set(STRATA_EINVAL, "etcd endpoint '%.*s' is not HOST:PORT (at most %u of "
					"them, comma-separated)", (int)(n > 200 ? 200 : n), p, ETCD_MAX_ENDPOINTS);
		}
		memcpy(e->endpoints[e->nendpoints++], p, n);
		p += n;
		if (*p == ',')
			p++;
	}
	if (e->nendpoints == 0) {
		env.free(e);
		return diag_set(STRATA_EINVAL, "no etcd endpoint given (HOST:PORT[,HOST:PORT...])");
	}
	e->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (e->headers == NULL || curl_ev_init(&e->curl, e->loop, etcd_finished, e) != 0) {
		etcd_delete(e);
		return diag_set(STRATA_ENOMEM, "etcd: out of memory for libcurl");
	}
	*out = e;
	return 0;
}

void
etcd_delete(struct etcd *e)
{
	if (e == NULL)
		return;
	while (e->live != NULL) {
		struct etcd_xfer *x = e->live;
		e->live = x->next;
		curl_multi_remove_handle(e->curl.multi, x->easy);
		etcd_xfer_free(x);
	}
	curl_ev_destroy(&e->curl);
	curl_slist_free_all(e->headers);
	env.free(e);
}

json_t *
etcd_b64(const void *p, size_t n)
{
	struct buf b = {0};
	if (b64_encode(&b, p, n) != 0 || buf_append(&b, "", 1) != 0) {
		buf_destroy(&b);
		return NULL;
	}
	json_t *s = json_stringn((const char *)b.data, b.len - 1);
	buf_destroy(&b);
	return s;
}

int
etcd_unb64(const json_t *o, const char *name, struct buf *out)
{
	buf_reset(out);
	const json_t *v = json_object_get(o, name);
	const char *s = json_string_value(v);
	if (s == NULL)
		return STRATA_EINVAL;
	size_t n = json_string_length(v), len = 0;
	if (buf_reserve(out, b64_decoded_max(n) + 1) != 0)
		return STRATA_ENOMEM;
	if (b64_decode(s, n, 0, out->data, &len) != 0)
		return STRATA_EINVAL;
	out->len = len;
	out->data[len] = '\0';
	return 0;
}

int64_t
etcd_int(const json_t *o, const char *name, int64_t def)
{
	const json_t *v = json_object_get(o, name);
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	const char *s = json_string_value(v);
	if (s == NULL || *s == '\0')
		return def;
	char *end;
	long long x = strtoll(s, &end, 10);
	return *end == '\0' ? (int64_t)x : def;
}

int
etcd_prefix_end(const char *prefix, size_t n, struct buf *out)
{
	buf_reset(out);
	if (buf_append(out, prefix, n) != 0)
		return STRATA_ENOMEM;
	for (size_t i = n; i-- > 0;) {
		if (out->data[i] != 0xff) {
			out->data[i]++;
			out->len = i + 1;
			return 0;
		}
	}
	/* All 0xff: the range to the end of the key space is "\0". */
	out->len = 0;
	return buf_append(out, "", 1);
}
