/*
 * http.c — the remote object stores' HTTP client over libcurl: a pool of easy handles
 * (connection reuse), timeouts, retries with jittered backoff, indeterminate results
 * and per-operation counters; and the requests the azure and s3 clients share (get,
 * get_range, head, delete, whole-object writes, listing), each client's own part given
 * by its oshttp_store_ops, with the objstore_ops entries both stores' tables name. libcurl
 * allocates its own memory; everything of ours goes through env.
 */
#include "http.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "objstore.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/fiber.h"
#include "../lib/hist.h"
#include "../lib/text.h"

/** Most bytes of a non-2xx body kept for error parsing. */
#define OSHTTP_ERROR_BODY_MAX (64u << 10)
/** Longest single sleep of a backoff: a tick of a manual clock is seen this often. */
#define OSHTTP_MAX_SLEEP_NS 50000000ull

struct oshttp_client {
	/** Limits. */
	struct oshttp_config cfg;
	/** Guards idle and nidle. */
	pthread_mutex_t mu;
	/** Easy handles not in use (each keeps its live connections). */
	CURL **idle;
	/** How many. */
	uint32_t nidle;
	/** Counters per operation kind (updated with atomic adds). */
	struct oshttp_stats stats[OSHTTP_OP_COUNT];
	/** Request durations per operation kind, ns. */
	struct hist *latency[OSHTTP_OP_COUNT];
};

/** State of one attempt, seen by the callbacks. */
struct oshttp_attempt {
	/** The request. */
	struct oshttp_req *r;
	/** Its client. */
	struct oshttp_client *cl;
	/** r->out->len when the attempt started (a retry starts over there). */
	size_t out_start;
	/** Bytes of a 200 answer skipped so far. */
	uint64_t skipped;
	/** Body bytes received. */
	uint64_t received;
	/** The body went over max_response_bytes. */
	int too_big;
	/** dst is full and the rest of a 200 answer was not wanted. */
	int full;
	/** Out of memory in a callback. */
	int nomem;
	/** Times the request's headers went out: over 1 when libcurl re-sent it by itself
	 *  (a reused connection that died after the request was written). */
	int header_sends;
};

static pthread_once_t oshttp_once = PTHREAD_ONCE_INIT;
static CURLcode oshttp_init_rc;
static __thread uint64_t oshttp_rand_state;

static void
oshttp_global_init(void)
{
	oshttp_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void
oshttp_config_init(struct oshttp_config *c)
{
	memset(c, 0, sizeof(*c));
	c->connect_timeout_ms = 5000;
	c->timeout_ms = 120000;
	c->stall_timeout_ms = 30000;
	c->retries = 5;
	c->backoff_base_ms = 50;
	c->backoff_max_ms = 2000;
	c->pool_max = 16;
	c->max_response_bytes = 256ull << 20;
}

const char *
oshttp_op_name(enum oshttp_op op)
{
	static const char *const names[OSHTTP_OP_COUNT] = {
		"get", "get_range", "head", "put", "put_if_absent", "put_if_match", "part", "commit",
		"delete", "list", "other"};
	return (unsigned)op < OSHTTP_OP_COUNT ? names[op] : "?";
}

int
oshttp_client_new(const struct oshttp_config *c, struct oshttp_client **out)
{
	pthread_once(&oshttp_once, oshttp_global_init);
	if (oshttp_init_rc != CURLE_OK)
		return diag_set(STRATA_EIO, "libcurl: global init failed: %s", curl_easy_strerror(oshttp_init_rc));
	struct oshttp_client *cl = env.calloc(1, sizeof(*cl));
	if (cl == NULL)
		return diag_set(STRATA_ENOMEM, "http client: out of memory");
	if (c != NULL)
		cl->cfg = *c;
	else
		oshttp_config_init(&cl->cfg);
	if (cl->cfg.pool_max == 0)
		cl->cfg.pool_max = 1;
	cl->idle = env.calloc(cl->cfg.pool_max, sizeof(*cl->idle));
	if (cl->idle == NULL) {
		env.free(cl);
		return diag_set(STRATA_ENOMEM, "http client: out of memory");
	}
	for (int op = 0; op < OSHTTP_OP_COUNT; op++) {
		if (hist_new(1000, OSHTTP_LATENCY_HIGHEST_NS, 2, &cl->latency[op]) != 0) {
			for (int i = 0; i < op; i++)
				hist_delete(cl->latency[i]);
			env.free(cl->idle);
			env.free(cl);
			return diag_set(STRATA_ENOMEM, "http client: out of memory");
		}
	}
	pthread_mutex_init(&cl->mu, NULL);
	*out = cl;
	return 0;
}

const struct hist *
oshttp_client_latency(struct oshttp_client *cl, enum oshttp_op op)
{
	return (unsigned)op < OSHTTP_OP_COUNT ? cl->latency[op] : NULL;
}

void
oshttp_client_delete(struct oshttp_client *cl)
{
	if (cl == NULL)
		return;
	for (uint32_t i = 0; i < cl->nidle; i++)
		curl_easy_cleanup(cl->idle[i]);
	pthread_mutex_destroy(&cl->mu);
	for (int op = 0; op < OSHTTP_OP_COUNT; op++)
		hist_delete(cl->latency[op]);
	env.free(cl->idle);
	env.free(cl);
}

const struct oshttp_config *
oshttp_client_config(const struct oshttp_client *cl)
{
	return &cl->cfg;
}

void
oshttp_client_stats(struct oshttp_client *cl, enum oshttp_op op, struct oshttp_stats *out)
{
	memset(out, 0, sizeof(*out));
	if ((unsigned)op >= OSHTTP_OP_COUNT)
		return;
	const uint64_t *src = (const uint64_t *)&cl->stats[op];
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

#define OSHTTP_COUNT(cl, op, field, n) __atomic_fetch_add(&(cl)->stats[op].field, (n), __ATOMIC_RELAXED)

static CURL *
oshttp_take(struct oshttp_client *cl)
{
	CURL *h = NULL;
	pthread_mutex_lock(&cl->mu);
	if (cl->nidle > 0)
		h = cl->idle[--cl->nidle];
	pthread_mutex_unlock(&cl->mu);
	if (h == NULL)
		h = curl_easy_init();
	else
		curl_easy_reset(h); /* keeps its live connections */
	return h;
}

static void
oshttp_give(struct oshttp_client *cl, CURL *h)
{
	pthread_mutex_lock(&cl->mu);
	if (cl->nidle < cl->cfg.pool_max) {
		cl->idle[cl->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&cl->mu);
	if (h != NULL)
		curl_easy_cleanup(h);
}

uint64_t
oshttp_random(void)
{
	if (env.random != NULL)
		return env.random();
	if (oshttp_rand_state == 0)
		oshttp_rand_state = (uint64_t)(uintptr_t)&oshttp_rand_state ^ env.mono_ns() ^ 0x9e3779b97f4a7c15ull;
	uint64_t x = oshttp_rand_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	oshttp_rand_state = x;
	return x;
}

void
oshttp_sleep(uint64_t ns)
{
	/* Over when the environment's clock moved ns, or when ns of real time were slept:
	 * a manual clock that does not move cannot hold a thread that only it could tick. */
	uint64_t start = env.mono_ns(), slept = 0;
	while (slept < ns) {
		uint64_t moved = env.mono_ns() - start;
		if (moved >= ns)
			return;
		if (fiber_active()) {
			if (fiber_block() != 0)
				return; /* a forced run: nobody will move the clock for us */
			continue;
		}
		uint64_t left = ns - (moved > slept ? moved : slept);
		if (left > OSHTTP_MAX_SLEEP_NS)
			left = OSHTTP_MAX_SLEEP_NS;
		struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
		nanosleep(&ts, NULL);
		slept += left;
	}
}

int
oshttp_escape(struct buf *out, const char *s, size_t n, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			    c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
		if (plain) {
			if (buf_append(out, &c, 1) != 0)
				return STRATA_ENOMEM;
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			if (buf_append(out, e, 3) != 0)
				return STRATA_ENOMEM;
		}
	}
	return 0;
}

/** Copy a header value (trimmed) into dst. */
static void
oshttp_header_value(const char *v, size_t n, char *dst, size_t cap)
{
	while (n > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static size_t
oshttp_header_cb(char *b, size_t size, size_t nitems, void *ud)
{
	struct oshttp_attempt *a = ud;
	struct oshttp_req *r = a->r;
	size_t n = size * nitems;
	if (n >= 5 && memcmp(b, "HTTP/", 5) == 0) {
		const char *sp = memchr(b, ' ', n);
		r->status = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
		r->etag[0] = '\0';
		r->error_code[0] = '\0';
		r->content_length = -1;
		return n;
	}
	const char *colon = memchr(b, ':', n);
	if (colon == NULL)
		return n;
	size_t nl = (size_t)(colon - b);
	const char *v = colon + 1;
	size_t vl = n - nl - 1;
	char tmp[32];
	if (nl == 4 && strncasecmp(b, "etag", 4) == 0) {
		oshttp_header_value(v, vl, r->etag, sizeof(r->etag));
	} else if (nl == 15 && strncasecmp(b, "x-ms-error-code", 15) == 0) {
		oshttp_header_value(v, vl, r->error_code, sizeof(r->error_code));
	} else if (nl == 14 && strncasecmp(b, "content-length", 14) == 0) {
		oshttp_header_value(v, vl, tmp, sizeof(tmp));
		char *end;
		long long cl = strtoll(tmp, &end, 10);
		r->content_length = end != tmp && cl >= 0 ? cl : -1;
	}
	return n;
}

static size_t
oshttp_write_cb(char *p, size_t size, size_t nitems, void *ud)
{
	struct oshttp_attempt *a = ud;
	struct oshttp_req *r = a->r;
	size_t n = size * nitems;
	a->received += n;
	if (r->status < 200 || r->status >= 300) {
		size_t room = OSHTTP_ERROR_BODY_MAX - r->error_body.len;
		if (room > 0 && buf_append(&r->error_body, p, n < room ? n : room) != 0) {
			a->nomem = 1;
			return 0;
		}
		return n;
	}
	if (r->out != NULL) {
		if (r->out->len - a->out_start + n > a->cl->cfg.max_response_bytes) {
			a->too_big = 1;
			return 0;
		}
		if (buf_append(r->out, p, n) != 0) {
			a->nomem = 1;
			return 0;
		}
		return n;
	}
	if (r->dst == NULL)
		return n;
	size_t off = 0;
	if (r->status == 200 && a->skipped < r->skip) {
		uint64_t s = r->skip - a->skipped;
		off = s < n ? (size_t)s : n;
		a->skipped += off;
	}
	size_t want = n - off, room = r->dst_cap - r->got;
	if (want > room) {
		memcpy((char *)r->dst + r->got, p + off, room);
		r->got += room;
		if (r->status == 206) {
			a->too_big = 1; /* more than the range asked for */
			return 0;
		}
		a->full = 1; /* the rest of a whole-object answer is not wanted */
		return 0;
	}
	memcpy((char *)r->dst + r->got, p + off, want);
	r->got += want;
	return n;
}

static int
oshttp_debug_cb(CURL *h, curl_infotype type, char *data, size_t size, void *ud)
{
	if (type == CURLINFO_HEADER_OUT)
		((struct oshttp_attempt *)ud)->header_sends++;
	return 0;
}

/** Whether a status is worth another attempt. */
static int
oshttp_retryable(long status)
{
	return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
	       status == 504;
}

/** Jittered exponential backoff before attempt number attempt (1 = the first retry). */
static uint64_t
oshttp_backoff_ns(const struct oshttp_config *c, uint32_t attempt)
{
	uint64_t cap = (uint64_t)c->backoff_base_ms;
	for (uint32_t i = 1; i < attempt && cap < c->backoff_max_ms; i++)
		cap *= 2;
	if (cap > c->backoff_max_ms)
		cap = c->backoff_max_ms;
	uint64_t ns = cap * 1000000ull;
	if (ns == 0)
		return 0;
	return ns / 2 + oshttp_random() % (ns / 2 + 1); /* half fixed, half jitter */
}

/** What one attempt came to. */
enum { OSHTTP_ANSWER, OSHTTP_TRANSPORT, OSHTTP_FATAL };

static int
oshttp_attempt(struct oshttp_client *cl, struct oshttp_req *r, CURL *h, size_t out_start, char *err,
	       size_t errcap, int *sent, int *fatal_rc)
{
	if (r->out != NULL)
		r->out->len = out_start; /* a retry starts over: drop what a failed attempt appended */
	struct oshttp_attempt a = {.r = r, .cl = cl, .out_start = out_start};
	struct curl_slist *hdrs = NULL;
	*sent = 0;
	r->status = 0;
	r->got = 0;
	r->etag[0] = '\0';
	r->error_code[0] = '\0';
	r->content_length = -1;
	buf_reset(&r->error_body);
	if (r->headers != NULL) {
		int rc = r->headers(r->headers_ctx, &hdrs);
		if (rc != 0) {
			curl_slist_free_all(hdrs);
			*fatal_rc = rc;
			return OSHTTP_FATAL;
		}
	}
	/* No Expect: 100-continue; and a body without a Content-Type of the caller's gets none
	 * (libcurl would add one the signature does not cover). */
	int has_type = 0;
	for (struct curl_slist *x = hdrs; x != NULL; x = x->next)
		has_type |= strncasecmp(x->data, "content-type:", 13) == 0;
	struct curl_slist *t = hdrs;
	if (r->aws_sigv4 == NULL) {
		t = curl_slist_append(hdrs, "Expect:");
		if (t != NULL && !has_type)
			t = curl_slist_append(t, "Content-Type:");
	}
	if (t == NULL && r->aws_sigv4 == NULL) {
		curl_slist_free_all(hdrs);
		*fatal_rc = diag_set(STRATA_ENOMEM, "%s: out of memory", r->what);
		return OSHTTP_FATAL;
	}
	hdrs = t;
	char errbuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_URL, r->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cl->cfg.connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)cl->cfg.timeout_ms);
	if (cl->cfg.stall_timeout_ms > 0) {
		long s = (long)((cl->cfg.stall_timeout_ms + 999) / 1000);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, s);
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, oshttp_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, oshttp_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (r->aws_sigv4 != NULL) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->aws_sigv4);
		curl_easy_setopt(h, CURLOPT_USERNAME, r->aws_key_id);
		curl_easy_setopt(h, CURLOPT_PASSWORD, r->aws_secret);
	}
	int write = strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0;
	if (write) {
		/* libcurl re-sends a request by itself when a reused connection dies before an
		 * answer; the first one may have been applied. Count the sends to know. */
		curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, oshttp_debug_cb);
		curl_easy_setopt(h, CURLOPT_DEBUGDATA, &a);
		curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
	}
	if (strcmp(r->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
		if (r->body != NULL || strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body != NULL ? r->body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		}
	}
	OSHTTP_COUNT(cl, r->op, requests, 1);
	CURLcode cc = curl_easy_perform(h);
	curl_slist_free_all(hdrs);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	if (r->aws_sigv4 != NULL) {
		curl_easy_setopt(h, CURLOPT_USERNAME, NULL);
		curl_easy_setopt(h, CURLOPT_PASSWORD, NULL);
	}
	long reqsize = 0;
	curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &reqsize);
	*sent = reqsize > 0;
	if (*sent)
		OSHTTP_COUNT(cl, r->op, bytes_sent, r->body_len);
	OSHTTP_COUNT(cl, r->op, bytes_received, a.received);
	if (a.header_sends > 1) {
		r->indeterminate = 1;
		OSHTTP_COUNT(cl, r->op, indeterminate, 1);
	}
	if (a.nomem) {
		*fatal_rc = diag_set(STRATA_ENOMEM, "%s: out of memory reading the answer", r->what);
		return OSHTTP_FATAL;
	}
	if (a.too_big) {
		*fatal_rc = diag_set(STRATA_EIO, "%s: the answer is larger than %s (%llu bytes)", r->what,
			 r->out != NULL ? "max_response_bytes" : "the range asked for",
			 (unsigned long long)(r->out != NULL ? cl->cfg.max_response_bytes : r->dst_cap));
		return OSHTTP_FATAL;
	}
	if (cc == CURLE_OK || (cc == CURLE_WRITE_ERROR && a.full)) {
		long st = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
		r->status = st;
		return OSHTTP_ANSWER;
	}
	snprintf(err, errcap, "%s", errbuf[0] != '\0' ? errbuf : curl_easy_strerror(cc));
	if (cc == CURLE_OPERATION_TIMEDOUT)
		OSHTTP_COUNT(cl, r->op, timeouts, 1);
	return OSHTTP_TRANSPORT;
}

static int oshttp_perform_attempts(struct oshttp_client *cl, struct oshttp_req *r);

int
oshttp_perform(struct oshttp_client *cl, struct oshttp_req *r)
{
	uint64_t t0 = env.mono_ns();
	int rc = oshttp_perform_attempts(cl, r);
	if ((unsigned)r->op < OSHTTP_OP_COUNT)
		hist_record(cl->latency[r->op], env.mono_ns() - t0);
	return rc;
}

/** oshttp_perform without the latency record. */
static int
oshttp_perform_attempts(struct oshttp_client *cl, struct oshttp_req *r)
{
	r->indeterminate = 0;
	r->attempts = 0;
	int write = strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0;
	char err[CURL_ERROR_SIZE + 64] = "";
	size_t out_start = r->out != NULL ? r->out->len : 0;
	for (uint32_t attempt = 0;; attempt++) {
		if (attempt > 0) {
			OSHTTP_COUNT(cl, r->op, retries, 1);
			oshttp_sleep(oshttp_backoff_ns(&cl->cfg, attempt));
		}
		CURL *h = oshttp_take(cl);
		if (h == NULL)
			return diag_set(STRATA_ENOMEM, "%s: curl_easy_init failed", r->what);
		int sent = 0, fatal_rc = STRATA_EIO;
		int what = oshttp_attempt(cl, r, h, out_start, err, sizeof(err), &sent, &fatal_rc);
		r->attempts++;
		if (what == OSHTTP_TRANSPORT) {
			curl_easy_cleanup(h); /* its connection is in an unknown state */
		} else {
			oshttp_give(cl, h);
		}
		if (what == OSHTTP_FATAL)
			return fatal_rc;
		int last = attempt >= cl->cfg.retries;
		if (what == OSHTTP_TRANSPORT) {
			OSHTTP_COUNT(cl, r->op, transport_errors, 1);
			if (sent && write) {
				r->indeterminate = 1;
				OSHTTP_COUNT(cl, r->op, indeterminate, 1);
			}
			if (!last)
				continue;
			return diag_set(STRATA_EIO, "%s: %s (after %u attempts; %s)", r->what, err, r->attempts,
					r->indeterminate ? "a request was sent: it may have been applied"
							 : "not applied");
		}
		long st = r->status;
		if (st >= 200 && st < 400) {
			OSHTTP_COUNT(cl, r->op, ok, 1);
			return 0;
		}
		if (st == 429 || st == 503) {
			OSHTTP_COUNT(cl, r->op, throttled, 1);
		} else if (st >= 500) {
			OSHTTP_COUNT(cl, r->op, server_errors, 1);
			if (write && st != 501) {
				r->indeterminate = 1;
				OSHTTP_COUNT(cl, r->op, indeterminate, 1);
			}
		}
		if ((oshttp_retryable(st) || (st >= 400 && r->retry_answer != NULL &&
					      r->retry_answer(r->headers_ctx, r))) && !last)
			continue;
		if (st >= 400 && st < 500)
			OSHTTP_COUNT(cl, r->op, client_errors, 1);
		return 0;
	}
}

size_t
oshttp_client_request_stats(struct oshttp_client *cl, struct objstore_op_stats *out, size_t cap)
{
	size_t n = 0;
	for (int op = 0; op < OSHTTP_OP_COUNT && n < cap; op++, n++) {
		struct oshttp_stats st;
		oshttp_client_stats(cl, (enum oshttp_op)op, &st);
		out[n] = (struct objstore_op_stats){
			.op = oshttp_op_name((enum oshttp_op)op),
			.requests = st.requests,
			.client_errors = st.client_errors,
			.server_errors = st.server_errors,
			.throttled = st.throttled,
			.transport_errors = st.transport_errors - st.timeouts,
			.timeouts = st.timeouts,
			.indeterminate = st.indeterminate,
			.retries = st.retries,
			.bytes_sent = st.bytes_sent,
			.bytes_received = st.bytes_received,
			.latency_ns = oshttp_client_latency(cl, (enum oshttp_op)op),
		};
	}
	return n;
}

void
oshttp_req_destroy(struct oshttp_req *r)
{
	buf_destroy(&r->error_body);
}

void
oshttp_target_query(struct oshttp_target *t, const char *name, const char *value)
{
	assert(t->nq < OSHTTP_MAX_QUERY);
	t->qn[t->nq] = name;
	t->qv[t->nq] = value;
	t->nq++;
}

int
oshttp_target_url(struct oshttp_target *t, const char *origin)
{
	struct buf *u = &t->url;
	buf_reset(u);
	int rc = buf_append(u, origin, strlen(origin));
	if (rc == 0)
		rc = buf_append(u, t->path.data, t->path.len);
	for (int i = 0; rc == 0 && i < t->nq; i++) {
		rc = buf_append(u, i == 0 ? "?" : "&", 1);
		if (rc == 0)
			rc = buf_append(u, t->qn[i], strlen(t->qn[i]));
		if (rc == 0)
			rc = buf_append(u, "=", 1);
		if (rc == 0)
			rc = oshttp_escape(u, t->qv[i], strlen(t->qv[i]), 0);
	}
	if (rc == 0)
		rc = buf_append(u, "", 1);
	return rc ? STRATA_ENOMEM : 0;
}

void
oshttp_target_destroy(struct oshttp_target *t)
{
	buf_destroy(&t->path);
	buf_destroy(&t->url);
}

int
oshttp_header(struct curl_slist **h, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value), n = nl + vl + 3;
	char small[1024];
	char *line = n <= sizeof(small) ? small : env.malloc(n);
	if (line == NULL)
		return STRATA_ENOMEM;
	memcpy(line, name, nl);
	memcpy(line + nl, ": ", 2);
	memcpy(line + nl + 2, value, vl + 1);
	struct curl_slist *t = curl_slist_append(*h, line);
	if (line != small)
		env.free(line);
	if (t == NULL)
		return STRATA_ENOMEM;
	*h = t;
	return 0;
}

int
oshttp_call_init(struct oshttp_call *c, struct oshttp_store *st, enum oshttp_op op, const char *method,
		 const char *opname, const char *key)
{
	memset(c, 0, st->ops->call_size);
	c->st = st;
	c->http.op = op;
	c->http.method = method;
	snprintf(c->what, sizeof(c->what), "%s: %s%s%s", st->base.name, opname, key ? " " : "",
		 key ? key : "");
	c->http.what = c->what;
	int rc = buf_append(&c->to.path, st->path0, strlen(st->path0));
	if (rc == 0 && (key != NULL || st->path0[0] == '\0'))
		rc = buf_append(&c->to.path, "/", 1);
	if (rc == 0 && key != NULL) {
		rc = oshttp_escape(&c->to.path, st->prefix, st->prefix_len, 1);
		if (rc == 0)
			rc = oshttp_escape(&c->to.path, key, strlen(key), 1);
	}
	return rc ? diag_set(STRATA_ENOMEM, "%s: out of memory", c->what) : 0;
}

void
oshttp_call_destroy(struct oshttp_call *c)
{
	oshttp_target_destroy(&c->to);
	oshttp_req_destroy(&c->http);
}

void
oshttp_call_query(struct oshttp_call *c, const char *name, const char *value)
{
	oshttp_target_query(&c->to, name, value);
}

int
oshttp_call_headers(const struct oshttp_call *c, struct curl_slist **h, const char *range_name)
{
	int rc = c->content_type != NULL ? oshttp_header(h, "Content-Type", c->content_type) : 0;
	if (rc == 0 && c->if_match != NULL)
		rc = oshttp_header(h, "If-Match", c->if_match);
	if (rc == 0 && c->if_none_match != NULL)
		rc = oshttp_header(h, "If-None-Match", c->if_none_match);
	if (rc == 0 && c->range[0] != '\0')
		rc = oshttp_header(h, range_name, c->range);
	return rc;
}

int
oshttp_call_send(struct oshttp_call *c)
{
	if (oshttp_target_url(&c->to, c->st->origin) != 0)
		return diag_set(STRATA_ENOMEM, "%s: out of memory", c->what);
	c->http.url = (const char *)c->to.url.data;
	int rc = c->st->ops->sign(c);
	if (rc)
		return rc;
	rc = oshttp_perform(c->st->http, &c->http);
	if (rc != 0 && c->http.indeterminate)
		objstore_set_indeterminate(1);
	return rc;
}

int
oshttp_store_check_key(const struct oshttp_store *st, const char *key, int is_prefix)
{
	return oshttp_check_key(st->base.name, st->prefix_len, st->key_max, key, is_prefix);
}

/** Room for a client's request, which embeds struct oshttp_call first. */
union oshttp_call_room {
	/** The shared request. */
	struct oshttp_call call;
	/** The client's, up to OSHTTP_CALL_EXTRA bytes more. */
	unsigned char room[sizeof(struct oshttp_call) + OSHTTP_CALL_EXTRA];
};

_Static_assert(offsetof(struct oshttp_store, base) == 0, "a remote store's objstore is its oshttp_store");

/** The remote store whose generic header os is. */
static struct oshttp_store *
oshttp_store_of(struct objstore *os)
{
	return (struct oshttp_store *)os;
}

int
oshttp_get(struct objstore *os, const char *key, struct buf *out)
{
	struct oshttp_store *st = oshttp_store_of(os);
	union oshttp_call_room room;
	struct oshttp_call *c = &room.call;
	objstore_set_indeterminate(0);
	int rc = oshttp_store_check_key(st, key, 0);
	if (rc)
		return rc;
	rc = oshttp_call_init(c, st, OSHTTP_OP_GET, "GET", "get", key);
	size_t start = out->len;
	c->http.out = out;
	if (rc == 0)
		rc = oshttp_call_send(c);
	if (rc == 0 && st->ops->key_missing(c))
		rc = STRATA_NOTFOUND;
	else if (rc == 0 && c->http.status != 200)
		rc = st->ops->fail(c);
	if (rc != 0)
		out->len = start;
	oshttp_call_destroy(c);
	return rc;
}

int
oshttp_get_range(struct objstore *os, const char *key, uint64_t off, size_t len, void *dst, size_t *got)
{
	struct oshttp_store *st = oshttp_store_of(os);
	union oshttp_call_room room;
	struct oshttp_call *c = &room.call;
	objstore_set_indeterminate(0);
	*got = 0;
	int rc = oshttp_store_check_key(st, key, 0);
	if (rc || len == 0)
		return rc;
	rc = oshttp_call_init(c, st, OSHTTP_OP_GET_RANGE, "GET", "get_range", key);
	snprintf(c->range, sizeof(c->range), "bytes=%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	c->http.dst = dst;
	c->http.dst_cap = len;
	c->http.skip = off;
	if (rc == 0)
		rc = oshttp_call_send(c);
	if (rc == 0) {
		long status = c->http.status;
		if (status == 206 || status == 200)
			*got = c->http.got;
		else if (status == 416)
			*got = 0; /* at or past the end */
		else if (st->ops->key_missing(c))
			rc = STRATA_NOTFOUND;
		else
			rc = st->ops->fail(c);
	}
	oshttp_call_destroy(c);
	return rc;
}

int
oshttp_head(struct oshttp_store *st, const char *key, const char *opname, uint64_t *size, char *etag, size_t cap)
{
	union oshttp_call_room room;
	struct oshttp_call *c = &room.call;
	objstore_set_indeterminate(0);
	int rc = oshttp_store_check_key(st, key, 0);
	if (rc)
		return rc;
	rc = oshttp_call_init(c, st, OSHTTP_OP_HEAD, "HEAD", opname, key);
	if (rc == 0)
		rc = oshttp_call_send(c);
	if (rc == 0) {
		if (c->http.status == 200) {
			if (size != NULL) {
				if (c->http.content_length < 0)
					rc = diag_set(STRATA_EIO, "%s: no Content-Length in the answer", c->what);
				else
					*size = (uint64_t)c->http.content_length;
			}
			if (etag != NULL)
				snprintf(etag, cap, "%s", c->http.etag);
		} else if (st->ops->key_missing(c)) {
			rc = STRATA_NOTFOUND;
		} else {
			rc = st->ops->fail(c);
		}
	}
	oshttp_call_destroy(c);
	return rc;
}

int
oshttp_probe_container(struct oshttp_store *st, const char *method, const char *opname, const char *qname,
		       const char *qvalue, int *missing)
{
	union oshttp_call_room room;
	struct oshttp_call *c = &room.call;
	*missing = 0;
	int rc = oshttp_call_init(c, st, OSHTTP_OP_OTHER, method, opname, NULL);
	if (qname != NULL)
		oshttp_call_query(c, qname, qvalue);
	if (rc == 0)
		rc = oshttp_call_send(c);
	if (rc == 0 && c->http.status == 404)
		*missing = 1;
	else if (rc == 0 && c->http.status != 200)
		rc = st->ops->fail(c);
	oshttp_call_destroy(c);
	return rc;
}

int
oshttp_size(struct objstore *os, const char *key, uint64_t *size)
{
	return oshttp_head(oshttp_store_of(os), key, "size", size, NULL, 0);
}

int
oshttp_etag(struct objstore *os, const char *key, char *etag, size_t cap)
{
	return oshttp_head(oshttp_store_of(os), key, "etag", NULL, etag, cap);
}

int
oshttp_put(struct objstore *os, const char *key, const void *data, size_t len)
{
	struct oshttp_store *st = oshttp_store_of(os);
	return st->ops->put(st, "put", key, data, len, NULL, NULL);
}

int
oshttp_put_if_absent(struct objstore *os, const char *key, const void *data, size_t len)
{
	struct oshttp_store *st = oshttp_store_of(os);
	return st->ops->put(st, "put_if_absent", key, data, len, NULL, "*");
}

int
oshttp_put_if_match(struct objstore *os, const char *key, const void *data, size_t len, const char *etag)
{
	struct oshttp_store *st = oshttp_store_of(os);
	if (etag == NULL || etag[0] == '\0')
		return diag_set(STRATA_EINVAL, "%s: put_if_match %s: an ETag is required", os->name,
				key ? key : "(null)");
	return st->ops->put(st, "put_if_match", key, data, len, etag, NULL);
}

int
oshttp_del(struct objstore *os, const char *key)
{
	struct oshttp_store *st = oshttp_store_of(os);
	union oshttp_call_room room;
	struct oshttp_call *c = &room.call;
	objstore_set_indeterminate(0);
	int rc = oshttp_store_check_key(st, key, 0);
	if (rc)
		return rc;
	rc = oshttp_call_init(c, st, OSHTTP_OP_DELETE, "DELETE", "delete", key);
	if (rc == 0)
		rc = oshttp_call_send(c);
	if (rc == 0 && c->http.status != st->ops->delete_status && c->http.status != 200 &&
	    !st->ops->key_missing(c))
		rc = st->ops->fail(c);
	oshttp_call_destroy(c);
	return rc;
}

int
oshttp_put_init(struct oshttp_store *st, struct oshttp_call *c, const char *opname, const char *key,
		const void *data, size_t len, const char *if_match, const char *if_none_match)
{
	objstore_set_indeterminate(0);
	int rc = oshttp_store_check_key(st, key, 0);
	if (rc) {
		memset(c, 0, st->ops->call_size);
		return rc;
	}
	rc = oshttp_call_init(c, st, if_match != NULL ? OSHTTP_OP_PUT_IF_MATCH
			      : if_none_match != NULL ? OSHTTP_OP_PUT_IF_ABSENT : OSHTTP_OP_PUT,
			      "PUT", opname, key);
	c->content_type = "application/octet-stream";
	c->if_match = if_match;
	c->if_none_match = if_none_match;
	c->http.body = data;
	c->http.body_len = len;
	return rc;
}

/** A listing in progress (oshttp_list). */
struct oshttp_lister {
	/** The store. */
	struct oshttp_store *st;
	/** The prefix listed, as the caller gave it (messages). */
	const char *prefix;
	/** With the store's prefix, and its length. */
	const char *full;
	size_t full_len;
	/** The last key given (list_in_order; NULL: not checked). */
	char *last;
	/** The caller's callback and its context. */
	int (*cb)(void *ctx, const char *key, uint64_t size);
	void *ctx;
};

int
oshttp_list_entry(struct oshttp_lister *ls, const char *name, uint64_t size)
{
	if (strncmp(name, ls->full, ls->full_len) != 0)
		return diag_set(STRATA_EIO, "%s: list '%s': the answer holds '%.200s', outside the prefix",
				ls->st->base.name, ls->prefix, name);
	if (ls->last != NULL) {
		if (ls->last[0] != '\0' && strcmp(name, ls->last) <= 0)
			return diag_set(STRATA_EIO, "%s: list '%s': the server listed '%.200s' after '%.200s', "
					"not in byte order", ls->st->base.name, ls->prefix, name, ls->last);
		snprintf(ls->last, OSHTTP_KEY_MAX + 1, "%s", name);
	}
	return ls->cb(ls->ctx, name + ls->st->prefix_len, size);
}

int
oshttp_list(struct objstore *os, const char *prefix, objstore_list_cb cb, void *ctx)
{
	struct oshttp_store *st = oshttp_store_of(os);
	uint32_t page_max = st->list_page;
	union oshttp_call_room room;
	struct oshttp_call *c = &room.call;
	objstore_set_indeterminate(0);
	int rc = oshttp_store_check_key(st, prefix, 1);
	if (rc)
		return rc;
	char full[OSHTTP_KEY_MAX + 1], page[16];
	snprintf(full, sizeof(full), "%s%s", st->prefix, prefix);
	snprintf(page, sizeof(page), "%u", page_max);
	char *next = env.malloc(OSHTTP_LIST_NEXT_MAX + 1);
	if (next == NULL)
		return diag_set(STRATA_ENOMEM, "%s: list: out of memory", st->base.name);
	next[0] = '\0';
	struct oshttp_lister ls = {
		.st = st, .prefix = prefix, .full = full, .full_len = strlen(full), .cb = cb, .ctx = ctx,
	};
	if (st->ops->list_in_order) {
		ls.last = env.malloc(OSHTTP_KEY_MAX + 1);
		if (ls.last == NULL) {
			env.free(next);
			return diag_set(STRATA_ENOMEM, "%s: list: out of memory", st->base.name);
		}
		ls.last[0] = '\0';
	}
	struct buf body = {0};
	do {
		rc = oshttp_call_init(c, st, OSHTTP_OP_LIST, "GET", "list", NULL);
		snprintf(c->what, sizeof(c->what), "%s: list '%s'", st->base.name, prefix);
		if (rc) {
			oshttp_call_destroy(c);
			break;
		}
		st->ops->list_query(c, next, page, full);
		buf_reset(&body);
		c->http.out = &body;
		rc = oshttp_call_send(c);
		if (rc == 0 && c->http.status != 200)
			rc = st->ops->fail(c);
		if (rc == 0)
			rc = st->ops->list_page(c, &body, page_max, &ls, next);
		oshttp_call_destroy(c);
	} while (rc == 0 && next[0] != '\0');
	buf_destroy(&body);
	env.free(next);
	env.free(ls.last);
	return rc;
}

size_t
oshttp_request_stats(struct objstore *os, struct objstore_op_stats *out, size_t cap)
{
	return oshttp_client_request_stats(oshttp_store_of(os)->http, out, cap);
}

int
oshttp_check_key(const char *name, size_t prefix_len, size_t max, const char *key, int is_prefix)
{
	if (key == NULL)
		return diag_set(STRATA_EINVAL, "%s: NULL key", name);
	size_t n = strlen(key);
	if (n == 0 && !is_prefix)
		return diag_set(STRATA_EINVAL, "%s: empty key", name);
	if (n + prefix_len > max)
		return diag_set(STRATA_EINVAL, "%s: key '%.64s...' longer than %zu bytes with the prefix", name,
				key, max);
	if (n > 0 && (key[0] == '/' || strstr(key, "//") != NULL))
		return diag_set(STRATA_EINVAL, "%s: key '%s' has an empty component", name, key);
	return 0;
}

void
oshttp_flatten(char *msg)
{
	for (char *p = msg; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

int
oshttp_fail_answer(const struct oshttp_req *r, const char *code, const char *msg)
{
	if (r->indeterminate) {
		objstore_set_indeterminate(1);
		return diag_set(STRATA_EIO, "%s: indeterminate: HTTP %ld %s after %u attempts, an earlier one "
				"may have been applied", r->what, r->status, code, r->attempts);
	}
	return diag_set(STRATA_EIO, "%s: HTTP %ld %s%s%s (after %u attempts)", r->what, r->status, code,
			msg[0] ? ": " : "", msg, r->attempts);
}

int
oshttp_cond_lost(const struct oshttp_req *r, const char *if_match, const char *if_none_match)
{
	if (r->indeterminate) {
		/* An earlier attempt may have written it: the condition now fails on our own
		 * object. Only a read-back can tell. */
		objstore_set_indeterminate(1);
		return diag_set(STRATA_EIO, "%s: indeterminate: HTTP %ld after an attempt that may have been "
				"applied", r->what, r->status);
	}
	if (if_none_match != NULL)
		return diag_set(STRATA_EEXIST, "%s: already exists", r->what);
	return diag_set(STRATA_ECONFLICT, "%s: the ETag %s is stale (HTTP %ld)", r->what, if_match, r->status);
}

int
oshttp_url_open(const char *url, const char *scheme, size_t size, void **store, char **copy, char **query)
{
	*store = NULL;
	*copy = *query = NULL;
	if (url == NULL || strncmp(url, scheme, strlen(scheme)) != 0)
		return diag_set(STRATA_EINVAL, "store URL %s: not an %s URL", url ? url : "(null)", scheme);
	if (strlen(url) > 4096)
		return diag_set(STRATA_EINVAL, "store URL: longer than 4096 bytes");
	void *s = env.calloc(1, size);
	char *c = env.malloc(strlen(url) + 1);
	if (s == NULL || c == NULL) {
		env.free(s);
		env.free(c);
		return diag_set(STRATA_ENOMEM, "store URL %s: out of memory", url);
	}
	strcpy(c, url);
	char *q = strchr(c, '?');
	if (q != NULL)
		*q++ = '\0';
	*store = s;
	*copy = c;
	*query = q;
	return 0;
}

int
oshttp_url_params(const char *url, char *query, oshttp_param_fn fn, void *ctx)
{
	int rc = 0;
	for (char *q = query; rc == 0 && q != NULL && *q != '\0';) {
		char *amp = strchr(q, '&');
		if (amp != NULL)
			*amp = '\0';
		char *eq = strchr(q, '=');
		if (eq == NULL || eq == q)
			return diag_set(STRATA_EINVAL, "store URL %s: parameter '%s' is not NAME=VALUE", url, q);
		*eq = '\0';
		rc = fn(ctx, q, eq + 1);
		q = amp != NULL ? amp + 1 : NULL;
	}
	return rc;
}

int
oshttp_param_u64(const char *url, const char *name, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t x = 0;
	if (text_u64(v, 10, &x, NULL) != 0 || x < lo || x > hi)
		return diag_set(STRATA_EINVAL, "store URL %s: %s must be a number in %llu..%llu, not '%s'", url,
				name, (unsigned long long)lo, (unsigned long long)hi, v);
	*out = x;
	return 0;
}

int
oshttp_config_param(struct oshttp_config *c, const char *url, const char *name, const char *v, int *taken)
{
	static const struct {
		const char *name;
		uint64_t lo, hi;
	} nums[] = {
		{"connect_timeout_ms", 1, 3600000}, {"timeout_ms", 0, 86400000}, {"stall_timeout_ms", 0, 86400000},
		{"retries", 0, 100}, {"backoff_base_ms", 0, 60000}, {"backoff_max_ms", 0, 600000},
		{"pool", 1, 1024}, {"max_response_bytes", 4096, 1ull << 40},
	};
	*taken = 0;
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(name, nums[i].name) != 0)
			continue;
		*taken = 1;
		uint64_t x = 0;
		int rc = oshttp_param_u64(url, name, v, nums[i].lo, nums[i].hi, &x);
		if (rc)
			return rc;
		switch (i) {
		case 0: c->connect_timeout_ms = (uint32_t)x; break;
		case 1: c->timeout_ms = (uint32_t)x; break;
		case 2: c->stall_timeout_ms = (uint32_t)x; break;
		case 3: c->retries = (uint32_t)x; break;
		case 4: c->backoff_base_ms = (uint32_t)x; break;
		case 5: c->backoff_max_ms = (uint32_t)x; break;
		case 6: c->pool_max = (uint32_t)x; break;
		default: c->max_response_bytes = x; break;
		}
		return 0;
	}
	return 0;
}

int
oshttp_url_endpoint(const char *url, const char *endpoint, char *origin, size_t cap)
{
	const char *hs = strstr(endpoint, "://");
	size_t el = strlen(endpoint);
	while (el > 0 && endpoint[el - 1] == '/')
		el--;
	if ((strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0) || hs == NULL ||
	    memchr(hs + 3, '/', el - (size_t)(hs + 3 - endpoint)) != NULL || el >= cap ||
	    el <= (size_t)(hs + 3 - endpoint))
		return diag_set(STRATA_EINVAL, "store URL %s: endpoint must be http://HOST[:PORT] or "
				"https://HOST[:PORT] (no path)", url);
	snprintf(origin, cap, "%.*s", (int)el, endpoint);
	return 0;
}

int
oshttp_url_prefix(const char *url, char *pfx, char *prefix, size_t cap, size_t *pl)
{
	size_t n = pfx != NULL ? strlen(pfx) : 0;
	while (n > 0 && pfx[n - 1] == '/')
		pfx[--n] = '\0';
	*pl = n;
	prefix[0] = '\0';
	if (n + 2 > cap)
		return diag_set(STRATA_EINVAL, "store URL %s: prefix longer than %zu bytes", url, cap - 2);
	if (n > 0 && (pfx[0] == '/' || strstr(pfx, "//") != NULL))
		return diag_set(STRATA_EINVAL, "store URL %s: the prefix has an empty component", url);
	if (n > 0)
		snprintf(prefix, cap, "%s/", pfx);
	return 0;
}
