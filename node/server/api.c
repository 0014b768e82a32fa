/*
 * api.c — the node's HTTP endpoints: the endpoint table (api_endpoints), the checks
 * every request passes before its body is read (api_check), then the handlers, each
 * answering on the server's loop or from a job on the host's executors or the policy
 * runtime's loop.
 */
#include "api.h"
#include "../sim/replay.h"

#include <http_parser.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../lib/buf.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/keycmp.h"
#include "../lib/pool.h"
#include "../lib/text.h"
#include "../cluster/cluster.h"
#include "../core/store.h"
#include "../policy/runtime.h"
#include "../policy/trial.h"
#include "../strata_host.h"
#include "api_int.h"
#include "console.h"
#include "metrics.h"
#include "phist.h"
#include "views.h"

/* ---------- the endpoint table ---------- */

/** What the body of a POST or PUT may be. */
struct api_body {
	/** The media types taken, NULL-terminated ("": no Content-Type header). */
	const char *const *types;
	/** What a 415 tells the client to send instead. */
	const char *hint;
};

/** One endpoint: a row of api_endpoints. */
struct api_endpoint {
	/** Path pattern: bytes matched as they are, "{id}" a shard id (one segment,
	 *  api_shard_parse), "{key}" the rest of the path (a key, percent-encoded); NULL in
	 *  the row of the paths no endpoint serves. */
	const char *path;
	/** The methods it takes (API_M_* bits): any other is a 405 whose Allow header names these. */
	int methods;
	/** What answers it. */
	api_handler_fn *handler;
	/** Its handler label in strata_http_requests_total and strata_http_request_duration_seconds. */
	const char *metric;
	/** What its body may be (POST, PUT), or NULL: anything. */
	const struct api_body *body;
	/** It takes a shard this node does not serve too (else that is a 421). */
	int unserved_shard;
	/** Its shard is the key's (strata_shard_of of the decoded {key}), not in the path. */
	int key_routed;
	/** With --token-file its reads need the token too (the console's endpoints). */
	int read_auth;
};

static api_handler_fn api_healthz, api_metrics, api_stats, api_policy, api_rows, api_row, api_seal, api_merge_wal,
	api_shard_stats, api_checkpoint, api_claim, api_slow_requests, api_cluster, api_rows_by_key;

/** Media types POST /v1/shards/{id}/rows takes. "" is an absent header, and
 *  application/x-www-form-urlencoded what curl -d sends when told no type: both NDJSON. */
static const char *const api_rows_types[] = {"", "application/x-www-form-urlencoded", API_NDJSON_CONTENT_TYPE,
					     "application/ndjson", "application/json", API_BATCH_CONTENT_TYPE,
					     NULL};
static const struct api_body api_rows_body = {
	api_rows_types, "send " API_NDJSON_CONTENT_TYPE " (NDJSON, also when the header is absent) or "
			API_BATCH_CONTENT_TYPE " (binary batch)"};
/** Media types PUT /v1/policy takes (Lua source). */
static const char *const api_policy_types[] = {"", "application/x-www-form-urlencoded", "text/x-lua",
					       "text/plain", "application/x-lua", "application/octet-stream",
					       NULL};
static const struct api_body api_policy_body = {
	api_policy_types, "send the policy's Lua source as text/x-lua or text/plain (or without the header)"};

/** The endpoints. A request is routed to the first row whose path matches (no two do),
 *  checked against its methods, body types and shard (api_check), answered by its
 *  handler and counted under its metric name. Adding an endpoint is a row here and its
 *  handler; node/server/README.md documents each. */
static const struct api_endpoint api_endpoints[] = {
	{NULL, 0, NULL, "not_found"},
	{"/healthz", API_M_GET, api_healthz, "healthz"},
	{"/metrics", API_M_GET, api_metrics, "metrics"},
	{"/v1/stats", API_M_GET, api_stats, "stats"},
	{"/v1/policy", API_M_GET | API_M_PUT, api_policy, "policy", &api_policy_body},
	{"/v1/shards/{id}/rows", API_M_GET | API_M_POST, api_rows, "rows", &api_rows_body},
	{"/v1/shards/{id}/rows/{key}", API_M_GET | API_M_DELETE, api_row, "row"},
	{"/v1/shards/{id}/seal", API_M_POST, api_seal, "seal"},
	{"/v1/shards/{id}/merge-wal", API_M_POST, api_merge_wal, "merge_wal"},
	{"/v1/shards/{id}/stats", API_M_GET, api_shard_stats, "shard_stats"},
	{"/v1/checkpoint", API_M_POST, api_checkpoint, "checkpoint"},
	{"/v1/shards/{id}/claim", API_M_POST, api_claim, "claim", .unserved_shard = 1},
	{"/v1/slow-requests", API_M_GET | API_M_DELETE, api_slow_requests, "slow_requests"},
	{"/v1/cluster", API_M_GET, api_cluster, "cluster"},
	{"/v1/rows", API_M_POST, api_rows_by_key, "rows_by_key", &api_rows_body},
	{"/v1/rows/{key}", API_M_GET | API_M_DELETE, api_row, "row_by_key", .key_routed = 1},
	{"/", API_M_GET, console_page, "console"},
	{"/v1/console/state", API_M_GET, console_state, "console_state", .read_auth = 1},
	{"/v1/policy/check", API_M_POST, console_policy_check, "policy_check", &api_policy_body},
	{"/v1/policy/history", API_M_GET, console_policy_history, "policy_history", .read_auth = 1},
	{"/v1/policy/rollback", API_M_POST, console_policy_rollback, "policy_rollback"},
	{"/v1/trace", API_M_GET | API_M_POST | API_M_DELETE, api_trace, "trace"},
	{"/v1/policy/compare", API_M_POST, console_policy_compare, "policy_compare", &api_policy_body},
};
/** Rows of api_endpoints. */
#define API_ENDPOINTS (sizeof(api_endpoints) / sizeof(api_endpoints[0]))
/** The row of the paths no endpoint serves: a 404, counted as "not_found". */
#define API_EP_NONE 0

/* ---------- small codecs ---------- */

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/** Percent-decode s into out ('+' is a space when plus_space). 0 or -1 on a bad escape. */
static int
pct_decode(const char *s, size_t n, int plus_space, struct buf *out)
{
	buf_reset(out);
	if (buf_reserve(out, n + 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%') {
			if (i + 2 >= n)
				return -1;
			int h = hexval((unsigned char)s[i + 1]);
			int l = hexval((unsigned char)s[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			out->data[out->len++] = (uint8_t)(h << 4 | l);
			i += 2;
		} else if (c == '+' && plus_space) {
			out->data[out->len++] = ' ';
		} else {
			out->data[out->len++] = (uint8_t)c;
		}
	}
	out->data[out->len] = 0;
	return 0;
}

/** The next non-empty pair of the query at *q (up to end; *q NULL: no query) into p,
 *  *q moved past it. 0 when there is none left. */
int
api_query_next(const char **q, const char *end, struct api_qpair *p)
{
	while (*q != NULL && *q < end) {
		const char *s = *q;
		const char *amp = memchr(s, '&', (size_t)(end - s));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(s, '=', (size_t)(pe - s));
		*q = pe + 1;
		if (pe == s)
			continue;
		p->name = s;
		p->name_len = (size_t)((eq ? eq : pe) - s);
		p->value = eq ? eq + 1 : pe;
		p->value_len = eq ? (size_t)(pe - eq - 1) : 0;
		return 1;
	}
	return 0;
}

/* ---------- replies ---------- */

int
api_status_of(int rc)
{
	switch (rc) {
	case STRATA_NOTFOUND:
	case STRATA_ERANGE:
		return 404;
	case STRATA_EINVAL:
		return 400;
	case STRATA_ETOOBIG:
		return 413;
	case STRATA_EFENCED:
	case STRATA_ECONFLICT:
	case STRATA_EEXIST:
		return 409;
	case STRATA_ENOSPC:
		return 507;
	case STRATA_EBUSY:
		return 429;
	case STRATA_ECLOSED:
	case STRATA_EREADONLY:
	case STRATA_ENOMEM:
		return 503;
	default:
		return 500;
	}
}

static void api_route(const struct http_req *r, struct api_route *rt);

/** Count a response to r by handler, method and status. */
static void
api_count(struct api *a, const struct http_req *r, int status)
{
	struct api_route rt;
	api_route(r, &rt);
	reqstats_count(&a->stats, rt.ep, r->method, status);
}

/** Record the duration of a request whose response was counted (and log it at debug level). */
static void
api_duration(struct api *a, struct http_req *r)
{
	if (r->start_ns == 0)
		return;
	uint64_t ns = env.mono_ns() - r->start_ns;
	struct api_route rt;
	api_route(r, &rt);
	reqstats_time(&a->stats, rt.ep, ns);
	if (diag_log_level <= LOG_LVL_DEBUG)
		diag_log(LOG_LVL_DEBUG, "http %s %.*s: %.3f ms", http_method_str(r->method),
			 (int)(r->path_len > 200 ? 200 : r->path_len), r->path, (double)ns / 1e6);
}

/** Count r's response (status) and record its duration. */
static void
api_record(struct api *a, struct http_req *r, int status)
{
	api_count(a, r, status);
	api_duration(a, r);
}

void
api_reply(struct api *a, struct http_req *r, int status, const char *ctype, const char *extra, const void *body,
	  size_t len)
{
	api_record(a, r, status);
	http_respond(r, status, ctype, extra, body, len);
}

void
api_error(struct api *a, struct http_req *r, int status, const char *error, const char *detail)
{
	const char *extra = status == 503 || status == 429 ? "Retry-After: " API_RETRY_AFTER_S "\r\n" : NULL;
	api_record(a, r, status);
	http_respond_error(r, status, extra, error, detail);
}

/** Reply with o (consumed) as JSON and 1, or (o NULL or not encoded) 0 without replying. */
int
api_json_reply(struct api *a, struct http_req *r, int status, const char *extra, json_t *o)
{
	char *s = o ? json_dumps(o, API_JSON_FLAGS) : NULL;
	json_decref(o);
	if (s == NULL)
		return 0;
	size_t n = strlen(s);
	s[n] = '\n';
	api_reply(a, r, status, "application/json", extra, s, n + 1);
	free(s);
	return 1;
}

/** Reply with o (consumed) as JSON. */
void
api_json(struct api *a, struct http_req *r, int status, json_t *o)
{
	if (!api_json_reply(a, r, status, NULL, o))
		api_error(a, r, 500, "internal error", "could not encode the response");
}

/** The shard's statistics into st (zeroes where they cannot be read). */
static void
api_read_shard_stats(struct api *a, uint32_t shard, strata_stats *st)
{
	memset(st, 0, sizeof(*st));
	strata_shard_stats(a->db, shard, st);
}

/** The error words of a failed engine call: "fenced" for STRATA_EFENCED, else words. */
static const char *
api_failed(int rc, const char *words)
{
	return rc == STRATA_EFENCED ? "fenced" : words;
}

/* ---------- routing and auth ---------- */

/** Parse the shard id s[0..n) (one path segment) into rt. */
static void
api_shard_parse(const char *s, size_t n, struct api_route *rt)
{
	rt->has_shard = 1;
	rt->shard_valid = 1;
	rt->shard_id = s;
	rt->shard_id_len = n;
	uint64_t v = 0;
	for (const char *q = s; q < s + n && rt->shard_valid; q++) {
		if (*q < '0' || *q > '9') {
			rt->shard_valid = 0;
			rt->shard_problem = "is not a decimal number";
		} else if (v > UINT32_MAX) {
			rt->shard_valid = 0;
			rt->shard_problem = "is too large";
		} else {
			v = v * 10 + (uint64_t)(*q - '0');
		}
	}
	if (rt->shard_valid && n == 0) {
		rt->shard_valid = 0;
		rt->shard_problem = "is empty";
	} else if (rt->shard_valid && v > UINT32_MAX) {
		rt->shard_valid = 0;
		rt->shard_problem = "is too large";
	} else if (rt->shard_valid && n > 1 && *s == '0') {
		rt->shard_valid = 0;
		rt->shard_problem = "has a leading zero";
	}
	rt->shard = v;
}

/** Whether the path[0..n) matches the pattern pat (struct api_endpoint.path); its
 *  {id} and {key} go to rt. */
static int
api_match(const char *pat, const char *path, size_t n, struct api_route *rt)
{
	const char *p = path, *end = path + n;
	while (*pat != '\0') {
		if (strncmp(pat, "{id}", 4) == 0) {
			const char *slash = memchr(p, '/', (size_t)(end - p));
			const char *id_end = slash ? slash : end;
			api_shard_parse(p, (size_t)(id_end - p), rt);
			p = id_end;
			pat += 4;
		} else if (strncmp(pat, "{key}", 5) == 0) {
			rt->has_key = 1;
			rt->key = p;
			rt->key_len = (size_t)(end - p);
			p = end;
			pat += 5;
		} else if (p < end && *p == *pat) {
			p++;
			pat++;
		} else {
			return 0;
		}
	}
	return p == end;
}

static void
api_route(const struct http_req *r, struct api_route *rt)
{
	for (size_t i = 0; i < API_ENDPOINTS; i++) {
		memset(rt, 0, sizeof(*rt));
		if (api_endpoints[i].path != NULL && api_match(api_endpoints[i].path, r->path, r->path_len, rt)) {
			rt->ep = i;
			return;
		}
	}
	memset(rt, 0, sizeof(*rt));
	rt->ep = API_EP_NONE;
}


static int
method_bit(int method)
{
	switch (method) {
	case HTTP_GET:
	case HTTP_HEAD:
		return API_M_GET;
	case HTTP_POST:
		return API_M_POST;
	case HTTP_PUT:
		return API_M_PUT;
	case HTTP_DELETE:
		return API_M_DELETE;
	default:
		return 0;
	}
}


/** Whether the media type of a Content-Type value (parameters after ';' ignored, case
 *  insensitive) is one of types. */
static int
media_type_in(const char *ct, const char *const *types)
{
	while (*ct == ' ' || *ct == '\t')
		ct++;
	size_t n = strcspn(ct, ";");
	while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
		n--;
	for (int i = 0; types[i] != NULL; i++)
		if (strlen(types[i]) == n && strncasecmp(ct, types[i], n) == 0)
			return 1;
	return 0;
}

/** The token of the Authorization header that matches (its index), or -1; each token is
 *  compared in time independent of where they differ. */
static int
api_token_match(const struct api *a, const struct http_req *r)
{
	const char *h = r->authorization;
	if (r->authorization_truncated || strncasecmp(h, "Bearer ", 7) != 0)
		return -1;
	const char *t = h + 7;
	while (*t == ' ')
		t++;
	size_t n = strlen(t);
	while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	int found = -1;
	for (size_t k = 0; k < a->ntokens; k++) {
		volatile unsigned diff = n != a->token_len[k];
		for (size_t i = 0; i < a->token_len[k]; i++)
			diff |= (unsigned)((unsigned char)a->token[k][i] ^ (unsigned char)(i < n ? t[i] : 0));
		if (diff == 0)
			found = (int)k;
	}
	return found;
}

const char *
api_token_name(const struct api *a, const struct http_req *r)
{
	if (a->ntokens == 0)
		return "anonymous";
	int k = api_token_match(a, r);
	return k < 0 ? NULL : a->token_name[k];
}

/** On a cluster member: answer 421 (another owner, or none yet) or 503 (the lease is not
 *  confirmed) and return 1 unless this node serves shard now; 0 when it does. */
static int
api_cluster_unserved(struct api *a, struct http_req *r, uint32_t shard)
{
	const char *owner, *url;
	int st = cluster_serving(a->cluster, shard, &owner, &url);
	if (st == 0)
		return 0;
	char d[400];
	if (st == 503)
		snprintf(d, sizeof(d), "this node holds shard %u but cannot be sure its etcd lease is alive, so it "
			 "serves nothing until it is confirmed", shard);
	else if (owner[0] != '\0')
		snprintf(d, sizeof(d), "shard %u is served by node %s at %s", shard, owner, url);
	else
		snprintf(d, sizeof(d), "shard %u has no owner right now (placement is moving it); retry shortly",
			 shard);
	json_t *o = json_pack("{s:s, s:s, s:I, s:s?, s:s?}", "error",
			      st == 503 ? "shard not served: lease not confirmed" : "shard not served", "detail", d,
			      "shard", (json_int_t)shard, "owner", owner[0] ? owner : NULL, "owner_url",
			      url[0] ? url : NULL);
	if (!api_json_reply(a, r, st, st == 503 ? "Retry-After: " API_RETRY_AFTER_S "\r\n" : NULL, o))
		api_error(a, r, st, "shard not served", d);
	return 1;
}

/** Check route, method, auth and shard; answer at once (and return nonzero) when one fails. */
static int
api_check(struct api *a, struct http_req *r, struct api_route *rt)
{
	api_route(r, rt);
	const struct api_endpoint *ep = &api_endpoints[rt->ep];
	if (rt->ep == API_EP_NONE) {
		char d[300];
		snprintf(d, sizeof(d), "no endpoint at %.*s", (int)(r->path_len > 200 ? 200 : r->path_len), r->path);
		api_error(a, r, 404, "not found", d);
		return 1;
	}
	int allowed = ep->methods;
	if (!(method_bit(r->method) & allowed)) {
		char allow[64] = "Allow: ", d[160];
		const char *names[] = {"GET, HEAD", "POST", "PUT", "DELETE"};
		for (int i = 0, first = 1; i < 4; i++)
			if (allowed & (1 << i)) {
				strcat(allow, first ? "" : ", ");
				strcat(allow, names[i]);
				first = 0;
			}
		strcat(allow, "\r\n");
		snprintf(d, sizeof(d), "%s is not allowed here; use %s", http_method_str(r->method), allow + 7);
		d[strcspn(d, "\r")] = '\0';
		api_record(a, r, 405);
		http_respond_error(r, 405, allow, "method not allowed", d);
		return 1;
	}
	int mutating = r->method != HTTP_GET && r->method != HTTP_HEAD;
	if ((mutating || ep->read_auth) && a->ntokens > 0 && api_token_match(a, r) < 0) {
		a->stats.auth_failures++;
		int missing = r->authorization[0] == '\0';
		api_record(a, r, missing ? 401 : 403);
		http_respond_error(r, missing ? 401 : 403, "WWW-Authenticate: Bearer\r\n",
				   missing ? "unauthorized" : "forbidden",
				   missing ? "this endpoint needs Authorization: Bearer <token>"
					   : "the bearer token is not valid");
		return 1;
	}
	if (ep->key_routed && rt->has_key) {
		/* The key's shard, as strata_shard_of routes it; a malformed key is api_row's 400. */
		struct buf k = {0};
		if (pct_decode(rt->key, rt->key_len, 0, &k) == 0 && k.len > 0 && k.len <= STRATA_MAX_KEY) {
			rt->has_shard = 1;
			rt->shard_valid = 1;
			rt->shard = strata_shard_of(k.data, k.len, strata_shards(a->db));
		}
		buf_destroy(&k);
	}
	if (rt->has_shard && !rt->shard_valid) {
		char d[300];
		const char *p = rt->shard_id;
		size_t idl = rt->shard_id_len;
		uint32_t n = strata_shards(a->db);
		snprintf(d, sizeof(d), "the shard id '%.*s'%s %s; it must be a decimal number without leading "
			 "zeros (this node has shards 0..%u)",
			 (int)(idl > 40 ? 40 : idl), p, idl > 40 ? "..." : "", rt->shard_problem, n ? n - 1 : 0);
		api_error(a, r, 400, "bad shard id", d);
		return 1;
	}
	if (rt->has_shard && rt->shard >= strata_shards(a->db)) {
		char d[200];
		uint32_t n = strata_shards(a->db);
		snprintf(d, sizeof(d), "shard %llu does not exist; this node has shards 0..%u",
			 (unsigned long long)rt->shard, n ? n - 1 : 0);
		api_error(a, r, 404, "unknown shard", d);
		return 1;
	}
	if (rt->has_shard && a->cluster != NULL && ep->handler == api_claim) {
		api_error(a, r, 409, "placement is the cluster's",
			  "this node is a cluster member: etcd's placement decides which node claims a shard "
			  "(\"Cluster\" in node/core/DESIGN.md)");
		return 1;
	}
	if (rt->has_shard && !ep->unserved_shard && a->cluster != NULL &&
	    api_cluster_unserved(a, r, (uint32_t)rt->shard))
		return 1;
	if (rt->has_shard && !ep->unserved_shard && !strata_shard_served(a->db, (uint32_t)rt->shard)) {
		char d[300];
		snprintf(d, sizeof(d), "shard %llu is not served by this node (another node may own it); "
			 "POST /v1/shards/%llu/claim takes it over here", (unsigned long long)rt->shard,
			 (unsigned long long)rt->shard);
		api_error(a, r, 421, "shard not served", d);
		return 1;
	}
	if (rt->has_key && rt->key_len == 0) {
		api_error(a, r, 400, "bad key", "the key is empty");
		return 1;
	}
	if (ep->body != NULL && (r->method == HTTP_POST || r->method == HTTP_PUT) &&
	    !media_type_in(r->content_type, ep->body->types)) {
		char d[HTTP_MAX_KEPT_HEADER + 200];
		snprintf(d, sizeof(d), "Content-Type '%.200s' is not taken here; %s", r->content_type, ep->body->hint);
		api_error(a, r, 415, "unsupported media type", d);
		return 1;
	}
	return 0;
}

void
api_on_headers(void *ctx, struct http_req *r)
{
	struct api_route rt;
	api_check(ctx, r, &rt);
}

/* ---------- POST rows ---------- */

/** One append request on the pool. */
struct api_append {
	/** The API. */
	struct api *a;
	/** The request (its body is read by the worker). */
	struct http_req *r;
	/** Target shard. */
	uint32_t shard;
	/** Body is the binary batch format. */
	int binary;
	/** Reply status. */
	int status;
	/** Error words when status is not 200. */
	const char *error;
	/** Error detail. */
	char detail[600];
	/** Rows appended. */
	uint64_t appended;
	/** Sequence number of the last row. */
	uint64_t last_seq;
};

/** Refuse the append: the status of rc, the answer's words and detail. */
static void
append_refuse(struct api_append *j, int rc, const char *words, const char *detail)
{
	j->status = api_status_of(rc);
	j->error = words;
	snprintf(j->detail, sizeof(j->detail), "%s", detail);
}

static void
append_work(void *arg)
{
	struct api_append *j = arg;
	struct http_req *r = j->r;
	struct batch b;
	const char *what = NULL;
	r->mark_ns[REQSTATS_MARK_WORK] = env.mono_ns();
	int rc = batch_decode(j->binary ? BATCH_BINARY : BATCH_NDJSON, r->body.data, r->body.len,
			      &j->a->batch_limits, &b, &what);
	if (rc != 0) {
		append_refuse(j, rc, what, diag_last());
		return;
	}
	uint64_t last = 0, t0 = env.mono_ns();
	r->mark_ns[REQSTATS_MARK_ENGINE] = t0;
	rc = strata_append_seq(j->a->db, j->shard, b.rows, b.n, &last);
	uint64_t t1 = env.mono_ns();
	r->mark_ns[REQSTATS_MARK_ENGINE_END] = t1;
	hist_record(j->a->stats.append_ns, t1 - t0);
	if (rc != 0) {
		append_refuse(j, rc, api_failed(rc, "append failed"), strata_last_error());
	} else {
		j->status = 200;
		j->appended = b.n;
		j->last_seq = last;
	}
	batch_destroy(&b);
}

static void
append_done(void *arg)
{
	struct api_append *j = arg;
	struct api *a = j->a;
	a->jobs--;
	j->r->mark_ns[REQSTATS_MARK_DONE] = env.mono_ns();
	if (j->status == 200)
		api_json(a, j->r, 200, json_pack("{s:I, s:I}", "appended", (json_int_t)j->appended, "last_seq",
						 (json_int_t)j->last_seq));
	else
		api_error(a, j->r, j->status, j->error, j->detail);
	env.free(j);
}

static int
is_batch_type(const char *ct)
{
	size_t n = strlen(API_BATCH_CONTENT_TYPE);
	while (*ct == ' ')
		ct++;
	if (strncasecmp(ct, API_BATCH_CONTENT_TYPE, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

/** Submit a job to the host's executor exec (HOST_FG: appends, reads; HOST_BG: claims,
 *  checkpoints), or answer when it refuses. */
int
api_submit(struct api *a, struct http_req *r, int exec, pool_work_fn work, pool_done_fn done, void *job)
{
	r->mark_ns[REQSTATS_MARK_SUBMIT] = env.mono_ns();
	int rc = pool_submit(host_exec(a->host, exec), work, done, job);
	if (rc == 0) {
		a->jobs++;
		return 0;
	}
	r->mark_ns[REQSTATS_MARK_SUBMIT] = 0;
	/* A full foreground queue is the node at capacity, not a busy shard. */
	if (exec == HOST_FG)
		api_error(a, r, rc == STRATA_EBUSY ? 503 : api_status_of(rc), "node busy", diag_last());
	else
		api_error(a, r, api_status_of(rc), "busy", diag_last());
	return rc;
}

/** A zeroed job of size bytes for r, or NULL (answered 503). */
void *
api_job_new(struct api *a, struct http_req *r, size_t size)
{
	void *j = env.calloc(1, size);
	if (j == NULL)
		api_error(a, r, 503, "out of memory", "no memory for the request");
	return j;
}

static void
api_append(struct api *a, struct http_req *r, uint32_t shard)
{
	struct api_append *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	j->shard = shard;
	j->binary = is_batch_type(r->content_type);
	if (api_submit(a, r, HOST_FG, append_work, append_done, j) != 0)
		env.free(j);
}

/* ---------- POST /v1/rows (routed by key) ---------- */

/** A key-routed batch on the pool: its rows grouped by strata_shard_of, one append per
 *  shard, in shard order. */
struct api_keyed {
	/** The API and the request. */
	struct api *a;
	struct http_req *r;
	/** Body is the binary batch format. */
	int binary;
	/** Reply status, words and detail when it is not 200. */
	int status;
	const char *error;
	char detail[600];
	/** With status 421 (or 503): the first shard of the batch this node does not serve. */
	uint32_t unserved;
	/** The shards appended, in order: id, rows, last sequence number (env.calloc). */
	uint32_t *done_shard;
	uint64_t *done_rows, *done_seq;
	size_t ndone;
	/** Rows appended in all. */
	uint64_t appended;
};

static int
keyed_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static void
keyed_work(void *arg)
{
	struct api_keyed *j = arg;
	struct http_req *r = j->r;
	struct api *a = j->a;
	struct batch b;
	const char *what = NULL;
	r->mark_ns[REQSTATS_MARK_WORK] = env.mono_ns();
	int rc = batch_decode(j->binary ? BATCH_BINARY : BATCH_NDJSON, r->body.data, r->body.len, &a->batch_limits,
			      &b, &what);
	if (rc != 0) {
		j->status = api_status_of(rc);
		j->error = what;
		snprintf(j->detail, sizeof(j->detail), "%s", diag_last());
		return;
	}
	uint32_t nsh = strata_shards(a->db);
	/* (shard << 32 | index): sorted, the rows of a shard are together and in batch order. */
	uint64_t *order = env.calloc(b.n ? b.n : 1, sizeof(*order));
	strata_row *rows = env.calloc(b.n ? b.n : 1, sizeof(*rows));
	j->done_shard = env.calloc(b.n ? b.n : 1, sizeof(*j->done_shard));
	j->done_rows = env.calloc(b.n ? b.n : 1, sizeof(*j->done_rows));
	j->done_seq = env.calloc(b.n ? b.n : 1, sizeof(*j->done_seq));
	if (order == NULL || rows == NULL || j->done_shard == NULL || j->done_rows == NULL || j->done_seq == NULL) {
		j->status = 503;
		j->error = "out of memory";
		snprintf(j->detail, sizeof(j->detail), "no memory to route a batch of %zu rows", b.n);
		goto out;
	}
	for (size_t i = 0; i < b.n; i++)
		order[i] = (uint64_t)strata_shard_of(b.rows[i].key, b.rows[i].key_len, nsh) << 32 | i;
	qsort(order, b.n, sizeof(*order), keyed_cmp);
	/* Every shard first: a batch with a row for a shard this node does not serve is
	 * refused whole, before anything is appended. */
	for (size_t i = 0; i < b.n; i++) {
		uint32_t sh = (uint32_t)(order[i] >> 32);
		if (i > 0 && sh == (uint32_t)(order[i - 1] >> 32))
			continue;
		int served = a->cluster != NULL ? cluster_serves_now(a->cluster, sh) : strata_shard_served(a->db, sh);
		if (!served) {
			j->status = 421;
			j->unserved = sh;
			goto out;
		}
	}
	uint64_t t0 = env.mono_ns();
	r->mark_ns[REQSTATS_MARK_ENGINE] = t0;
	for (size_t i = 0; i < b.n;) {
		uint32_t sh = (uint32_t)(order[i] >> 32);
		size_t n = 0;
		for (; i < b.n && (uint32_t)(order[i] >> 32) == sh; i++)
			rows[n++] = b.rows[(uint32_t)order[i]];
		uint64_t last = 0;
		rc = strata_append_seq(a->db, sh, rows, n, &last);
		if (rc != 0) {
			j->status = api_status_of(rc);
			j->error = api_failed(rc, "append failed");
			snprintf(j->detail, sizeof(j->detail), "shard %u: %s", sh, strata_last_error());
			break;
		}
		j->done_shard[j->ndone] = sh;
		j->done_rows[j->ndone] = n;
		j->done_seq[j->ndone++] = last;
		j->appended += n;
	}
	uint64_t t1 = env.mono_ns();
	r->mark_ns[REQSTATS_MARK_ENGINE_END] = t1;
	hist_record(a->stats.append_ns, t1 - t0);
	if (rc == 0)
		j->status = 200;
out:
	env.free(order);
	env.free(rows);
	batch_destroy(&b);
}

static void
keyed_done(void *arg)
{
	struct api_keyed *j = arg;
	struct api *a = j->a;
	a->jobs--;
	j->r->mark_ns[REQSTATS_MARK_DONE] = env.mono_ns();
	json_t *shards = json_array();
	for (size_t i = 0; i < j->ndone; i++)
		json_array_append_new(shards, json_pack("{s:I, s:I, s:I}", "shard", (json_int_t)j->done_shard[i],
							"appended", (json_int_t)j->done_rows[i], "last_seq",
							(json_int_t)j->done_seq[i]));
	if (j->status == 200) {
		api_json(a, j->r, 200, json_pack("{s:I, s:o}", "appended", (json_int_t)j->appended, "shards", shards));
	} else if (j->status == 421 && (a->cluster == NULL || !api_cluster_unserved(a, j->r, j->unserved))) {
		/* Not a member (or the lease came back meanwhile: the client retries). */
		json_decref(shards);
		char d[300];
		snprintf(d, sizeof(d), "the batch has rows for shard %u, which this node does not serve; nothing "
			 "was appended", j->unserved);
		api_error(a, j->r, 421, "shard not served", d);
	} else if (j->status == 421) {
		json_decref(shards);
	} else if (!api_json_reply(a, j->r, j->status, j->status == 503 ? "Retry-After: " API_RETRY_AFTER_S "\r\n" : NULL,
				   json_pack("{s:s, s:s, s:I, s:o}", "error", j->error, "detail", j->detail,
					     "appended", (json_int_t)j->appended, "appended_shards", shards))) {
		api_error(a, j->r, j->status, j->error, j->detail);
	}
	env.free(j->done_shard);
	env.free(j->done_rows);
	env.free(j->done_seq);
	env.free(j);
}

/** POST /v1/rows: a batch whose rows go to their keys' shards. */
static void
api_rows_by_key(struct api *a, struct http_req *r, const struct api_route *rt)
{
	struct api_keyed *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	j->binary = is_batch_type(r->content_type);
	if (api_submit(a, r, HOST_FG, keyed_work, keyed_done, j) != 0)
		env.free(j);
}

/* ---------- GET and DELETE rows/{key} ---------- */

/** One point read on the pool. */
struct api_get {
	/** The API. */
	struct api *a;
	/** The request. */
	struct http_req *r;
	/** Shard read. */
	uint32_t shard;
	/** Decoded key. */
	struct buf key;
	/** Value found (strata_free), or NULL. */
	void *value;
	/** Length of value. */
	size_t value_len;
	/** strata_get's result (strata_append_seq's for a DELETE). */
	int rc;
	/** The request is DELETE: append a tombstone instead of reading. */
	int del;
	/** Sequence number of the tombstone of a DELETE. */
	uint64_t last_seq;
	/** Error detail when rc < 0. */
	char detail[600];
};

static void
get_work(void *arg)
{
	struct api_get *j = arg;
	uint64_t t0 = env.mono_ns();
	j->r->mark_ns[REQSTATS_MARK_WORK] = j->r->mark_ns[REQSTATS_MARK_ENGINE] = t0;
	if (j->del) {
		strata_row row = {.key = j->key.data, .key_len = j->key.len, .kind = STRATA_ROW_DELETE};
		j->rc = strata_append_seq(j->a->db, j->shard, &row, 1, &j->last_seq);
	} else {
		j->rc = strata_get(j->a->db, j->shard, j->key.data, j->key.len, &j->value, &j->value_len);
	}
	uint64_t t1 = env.mono_ns();
	j->r->mark_ns[REQSTATS_MARK_ENGINE_END] = t1;
	hist_record(j->del ? j->a->stats.append_ns : j->a->stats.get_ns, t1 - t0);
	if (j->rc < 0)
		snprintf(j->detail, sizeof(j->detail), "%s", strata_last_error());
}

static void
get_done(void *arg)
{
	struct api_get *j = arg;
	struct api *a = j->a;
	a->jobs--;
	j->r->mark_ns[REQSTATS_MARK_DONE] = env.mono_ns();
	if (j->rc == 0 && j->del) {
		api_json(a, j->r, 200, json_pack("{s:I, s:I}", "deleted", (json_int_t)1, "last_seq",
						 (json_int_t)j->last_seq));
	} else if (j->rc < 0 && j->del) {
		api_error(a, j->r, api_status_of(j->rc), "delete failed", j->detail);
	} else if (j->rc == 0) {
		api_reply(a, j->r, 200, "application/octet-stream", NULL, j->value, j->value_len);
	} else if (j->rc == STRATA_NOTFOUND) {
		char d[128];
		snprintf(d, sizeof(d), "no row with that key (%zu bytes) in shard %u", j->key.len, j->shard);
		api_error(a, j->r, 404, "not found", d);
	} else {
		api_error(a, j->r, api_status_of(j->rc), api_failed(j->rc, "read failed"), j->detail);
	}
	strata_free(j->value);
	buf_destroy(&j->key);
	env.free(j);
}

static void
api_row(struct api *a, struct http_req *r, const struct api_route *rt)
{
	struct api_get *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	j->shard = (uint32_t)rt->shard;
	j->del = r->method == HTTP_DELETE;
	if (pct_decode(rt->key, rt->key_len, 0, &j->key) != 0) {
		api_error(a, r, 400, "bad key", "the key has a malformed %-escape");
	} else if (j->key.len > STRATA_MAX_KEY) {
		char d[96];
		snprintf(d, sizeof(d), "the key is %zu bytes; the limit is %u", j->key.len, STRATA_MAX_KEY);
		api_error(a, r, 400, BATCH_KEY_TOO_LONG, d);
	} else if (j->key.len == 0) {
		char d[96];
		snprintf(d, sizeof(d), "the key is empty; keys are 1..%u bytes", STRATA_MAX_KEY);
		api_error(a, r, 400, "bad key", d);
	} else if (api_submit(a, r, HOST_FG, get_work, get_done, j) == 0) {
		return;
	}
	buf_destroy(&j->key);
	env.free(j);
}

/* ---------- GET rows (scan) ---------- */

/** A streamed scan: one pool job per chunk, resumed after the last key sent. */
struct api_scan {
	/** The API. */
	struct api *a;
	/** The request. */
	struct http_req *r;
	/** Shard scanned. */
	uint32_t shard;
	/** Inclusive lower bound (start and prefix combined). */
	struct buf lo;
	/** lo is set. */
	int has_lo;
	/** Exclusive upper bound (end and prefix combined). */
	struct buf hi;
	/** hi is set. */
	int has_hi;
	/** Last key streamed; the next chunk starts there and skips it. */
	struct buf last;
	/** last is set. */
	int has_last;
	/** Lower bound of the running chunk (a copy of lo or last). */
	struct buf from;
	/** Rows still allowed by limit (UINT64_MAX = no limit). */
	uint64_t remaining;
	/** NDJSON produced by the running chunk. */
	struct buf chunk;
	/** Rows in chunk. */
	size_t chunk_rows;
	/** Scratch for base64. */
	struct buf tmp;
	/** The range is exhausted (or the limit reached). */
	int eof;
	/** Error of the last chunk (< 0), else 0. */
	int rc;
	/** Error detail. */
	char detail[600];
};

static void
scan_free(struct api_scan *s)
{
	buf_destroy(&s->lo);
	buf_destroy(&s->hi);
	buf_destroy(&s->last);
	buf_destroy(&s->from);
	buf_destroy(&s->chunk);
	buf_destroy(&s->tmp);
	env.free(s);
}

static int
scan_row(void *ctx, const strata_row *row)
{
	struct api_scan *s = ctx;
	if (s->has_last && row->key_len == s->last.len && memcmp(row->key, s->last.data, row->key_len) == 0)
		return 0;
	if (s->remaining == 0) {
		s->eof = 1;
		return 1;
	}
	if (batch_ndjson_row(&s->chunk, row, &s->tmp) != 0)
		return diag_set(STRATA_ENOMEM, "scan: out of memory formatting a row");
	buf_reset(&s->last);
	if (buf_append(&s->last, row->key, row->key_len))
		return diag_set(STRATA_ENOMEM, "scan: out of memory");
	s->has_last = 1;
	s->chunk_rows++;
	if (s->remaining != UINT64_MAX)
		s->remaining--;
	if (s->remaining == 0) {
		s->eof = 1;
		return 1;
	}
	if (s->chunk_rows >= API_SCAN_CHUNK_ROWS || s->chunk.len >= API_SCAN_CHUNK_BYTES)
		return 1;
	return 0;
}

static void
scan_work(void *arg)
{
	struct api_scan *s = arg;
	buf_reset(&s->chunk);
	s->chunk_rows = 0;
	int has_from = s->has_last || s->has_lo;
	struct buf *src = s->has_last ? &s->last : &s->lo;
	buf_reset(&s->from);
	if (has_from && buf_append(&s->from, src->data, src->len)) {
		s->rc = diag_set(STRATA_ENOMEM, "scan: out of memory");
		snprintf(s->detail, sizeof(s->detail), "%s", diag_last());
		return;
	}
	int rc = strata_scan(s->a->db, s->shard, has_from ? (s->from.data ? s->from.data : (uint8_t *)"") : NULL,
			     s->from.len, s->has_hi ? (s->hi.data ? s->hi.data : (uint8_t *)"") : NULL, s->hi.len,
			     scan_row, s);
	if (rc < 0) {
		s->rc = rc;
		snprintf(s->detail, sizeof(s->detail), "%s", strata_last_error());
	} else if (rc == 0) {
		s->eof = 1;
	}
}

static void scan_submit(struct api_scan *s);

static void
scan_abandon(struct api_scan *s)
{
	struct http_req *r = s->r;
	if (r->responded)
		http_stream_abort(r);
	else
		api_error(s->a, r, 503, "scan abandoned", "the client went away");
	scan_free(s);
}

static void
scan_resume(struct http_req *r, void *arg)
{
	struct api_scan *s = arg;
	if (!http_req_alive(r)) {
		scan_abandon(s);
		return;
	}
	scan_submit(s);
}

static void
scan_done(void *arg)
{
	struct api_scan *s = arg;
	struct api *a = s->a;
	struct http_req *r = s->r;
	a->jobs--;
	if (!http_req_alive(r)) {
		scan_abandon(s);
		return;
	}
	if (s->rc < 0) {
		if (!r->responded) {
			api_error(a, r, api_status_of(s->rc), api_failed(s->rc, "scan failed"), s->detail);
		} else {
			diag_log(LOG_LVL_WARN, "scan of shard %u failed after streaming began: %s", s->shard,
				 s->detail);
			http_stream_abort(r);
		}
		scan_free(s);
		return;
	}
	if (!r->responded) {
		api_count(a, r, 200);
		http_stream_begin(r, 200, "application/x-ndjson");
	}
	a->stats.scan_rows += s->chunk_rows;
	if (s->chunk.len > 0 && http_stream_write(r, s->chunk.data, s->chunk.len) != 0) {
		http_stream_abort(r);
		scan_free(s);
		return;
	}
	if (s->eof) {
		api_duration(a, r);
		http_stream_end(r);
		scan_free(s);
		return;
	}
	if (http_stream_queued(r) > HTTP_OUT_LOW) {
		a->stats.scan_waits++;
		http_stream_on_drain(r, scan_resume, s);
	}
	else
		scan_submit(s);
}

static void
scan_submit(struct api_scan *s)
{
	int rc = pool_submit(host_exec(s->a->host, HOST_FG), scan_work, scan_done, s);
	if (rc == 0) {
		s->a->jobs++;
		return;
	}
	if (s->r->responded) {
		diag_log(LOG_LVL_WARN, "scan of shard %u stopped: %s", s->shard, diag_last());
		http_stream_abort(s->r);
	} else {
		api_error(s->a, s->r, rc == STRATA_EBUSY ? 503 : api_status_of(rc), "node busy", diag_last());
	}
	scan_free(s);
}

/** key_cmp (lib/keycmp.h) of two buffers. */
static int
buf_key_cmp(const struct buf *a, const struct buf *b)
{
	return key_cmp(a->data, a->len, b->data, b->len);
}

/** Parse prefix/start/end/limit (an empty value counts as absent) into the scan's
 *  bounds. 0, or answered 400. */
static int
scan_params(struct api *a, struct http_req *r, struct api_scan *s)
{
	struct buf name = {0}, val = {0}, prefix = {0};
	int has_prefix = 0, rc = 0;
	char d[200] = "";
	const char *q = r->query, *end = r->query ? r->query + r->query_len : NULL;
	struct api_qpair qp;
	while (rc == 0 && api_query_next(&q, end, &qp)) {
		if (pct_decode(qp.name, qp.name_len, 1, &name) || pct_decode(qp.value, qp.value_len, 1, &val)) {
			snprintf(d, sizeof(d), "malformed %%-escape in the query");
			rc = -1;
			break;
		}
		const char *nm = (const char *)name.data;
		if (val.len == 0 && (strcmp(nm, "prefix") == 0 || strcmp(nm, "start") == 0 || strcmp(nm, "end") == 0 ||
				     strcmp(nm, "limit") == 0))
			continue;
		struct buf *dst = NULL;
		int *flag = NULL;
		if (strcmp(nm, "prefix") == 0) {
			dst = &prefix;
			flag = &has_prefix;
		} else if (strcmp(nm, "start") == 0) {
			dst = &s->lo;
			flag = &s->has_lo;
		} else if (strcmp(nm, "end") == 0) {
			dst = &s->hi;
			flag = &s->has_hi;
		} else if (strcmp(nm, "limit") == 0) {
			uint64_t lim = 0;
			if (text_u64((const char *)val.data, 10, &lim, NULL) != 0 || lim == 0) {
				snprintf(d, sizeof(d), "limit must be a positive integer");
				rc = -1;
				break;
			}
			s->remaining = lim;
		} else {
			snprintf(d, sizeof(d), "unknown query parameter '%.40s' (expected prefix, start, end, limit)",
				 nm);
			rc = -1;
			break;
		}
		if (dst != NULL) {
			if (val.len > STRATA_MAX_KEY) {
				snprintf(d, sizeof(d), "%s is %zu bytes; bounds are at most %u bytes", nm, val.len,
					 STRATA_MAX_KEY);
				rc = -1;
				break;
			}
			buf_reset(dst);
			if (buf_append(dst, val.data, val.len)) {
				snprintf(d, sizeof(d), "out of memory");
				rc = -1;
				break;
			}
			*flag = 1;
		}
	}
	if (rc == 0 && has_prefix && prefix.len > 0) {
		if (!s->has_lo || buf_key_cmp(&s->lo, &prefix) < 0) {
			buf_reset(&s->lo);
			rc = buf_append(&s->lo, prefix.data, prefix.len) ? -1 : 0;
			s->has_lo = 1;
		}
		/* The smallest key above every key with this prefix: drop trailing 0xff bytes,
		 * then add one to the last byte. All 0xff: no upper bound from the prefix. */
		size_t n = prefix.len;
		while (n > 0 && prefix.data[n - 1] == 0xff)
			n--;
		if (rc == 0 && n > 0) {
			prefix.len = n;
			prefix.data[n - 1]++;
			if (!s->has_hi || buf_key_cmp(&prefix, &s->hi) < 0) {
				buf_reset(&s->hi);
				rc = buf_append(&s->hi, prefix.data, prefix.len) ? -1 : 0;
				s->has_hi = 1;
			}
		}
		if (rc)
			snprintf(d, sizeof(d), "out of memory");
	}
	if (rc == 0 && s->has_lo && s->has_hi && buf_key_cmp(&s->lo, &s->hi) >= 0)
		s->eof = 1;
	buf_destroy(&name);
	buf_destroy(&val);
	buf_destroy(&prefix);
	if (rc != 0)
		api_error(a, r, 400, "bad query", d);
	return rc;
}

static void
api_scan(struct api *a, struct http_req *r, const struct api_route *rt)
{
	struct api_scan *s = api_job_new(a, r, sizeof(*s));
	if (s == NULL)
		return;
	s->a = a;
	s->r = r;
	s->shard = (uint32_t)rt->shard;
	s->remaining = UINT64_MAX;
	if (scan_params(a, r, s) != 0) {
		scan_free(s);
		return;
	}
	if (s->eof) {
		api_reply(a, r, 200, "application/x-ndjson", NULL, "", 0);
		scan_free(s);
		return;
	}
	scan_submit(s);
}

/* ---------- requests that need the policy runtime ---------- */

/*
 * The runtime runs on a host of its own, whose loop thread runs its timers and hooks,
 * never on the loop that serves HTTP. A request that needs it (seal, merge-wal, stats,
 * metrics, GET and PUT /v1/policy) crosses to the runtime's loop with host_post, does
 * its part there (submits the seal or merge, copies the counters, reloads), and crosses
 * back with host_post to the server's loop, the only thread that touches its HTTP
 * request. Neither loop waits for the other: a hook that runs for its whole budget
 * delays only the requests that need the runtime, and those only until it yields or
 * stops; appends, reads, scans and /healthz never wait for it.
 */

/** What a request asks of the runtime. */
enum api_rt_kind {
	API_RT_SEAL,
	API_RT_MERGE,
	API_RT_STATS,
	API_RT_METRICS,
	API_RT_POLICY_GET,
	API_RT_CONSOLE,
};

/** A request crossing to the runtime's loop and back. The members marked (runtime) are
 *  written on the runtime's loop thread, before the call is posted back; the server's
 *  loop reads them after. */
struct api_rtcall {
	/** The API (the runtime's side reads only rt and host). */
	struct api *a;
	/** The request (the server's loop only). */
	struct http_req *r;
	/** The crossing: to the runtime's loop, then back. */
	struct host_call call;
	/** enum api_rt_kind. */
	int kind;
	/** Target shard (seal, merge). */
	uint32_t shard;
	/** (runtime) The outcome: result code and error text of every kind, the counts of
	 *  a merge. */
	struct runtime_req req;
	/** Seals counted on the shard when the seal request was made (server's loop). */
	uint64_t seals_before;
	/** (runtime) The runtime's counters, settings and (GET /v1/policy) source. */
	struct views_policy_snap snap;
};

static void rtcall_answer(void *arg);

/** What holds a busy shard, from the refusal's words. */
static const char *
busy_what(const char *err)
{
	if (strstr(err, "merge or compaction") != NULL)
		return "merge or compaction";
	if (strstr(err, "compaction is already") != NULL)
		return "compaction";
	if (strstr(err, "merge is already") != NULL || strstr(err, "merge plan") != NULL)
		return "merge";
	if (strstr(err, "seal") != NULL)
		return "seal";
	return "merge or compaction";
}

/** Answer 429 for a shard that is busy with other work: the client retries after
 *  Retry-After seconds; the node is fine. */
static void
api_busy(struct api *a, struct http_req *r, uint32_t shard, const char *request, const char *err)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:i}", "error", "shard busy", "detail", err, "shard",
			      (json_int_t)shard, "busy", busy_what(err), "request", request, "retry_after_s",
			      atoi(API_RETRY_AFTER_S));
	if (!api_json_reply(a, r, 429, "Retry-After: " API_RETRY_AFTER_S "\r\n", o))
		api_error(a, r, 429, "shard busy", err);
}

/** Runtime's loop: hand the call (an api_rtcall) back to the server's loop. */
static void
rtcall_back(void *arg)
{
	struct api_rtcall *c = arg;
	host_post(c->a->host, &c->call, rtcall_answer, c);
}

/** Runtime's loop: do the request's part there. */
static void
rtcall_run(void *arg)
{
	struct api_rtcall *c = arg;
	struct api *a = c->a;
	diag_clear();
	if (a->rt == NULL) {
		/* No runtime: stats and metrics show zeroes, the rest is refused. */
		if (c->kind != API_RT_STATS && c->kind != API_RT_METRICS && c->kind != API_RT_CONSOLE) {
			c->req.rc = STRATA_EINVAL;
			snprintf(c->req.err, sizeof(c->req.err), "this node runs no policy runtime");
		}
		rtcall_back(c);
		return;
	}
	switch (c->kind) {
	case API_RT_SEAL:
	case API_RT_MERGE:
		strata_trace_request(a->db, c->kind == API_RT_MERGE, c->shard);
		runtime_req_run(a->rt, &c->req, c->kind == API_RT_MERGE, c->shard, rtcall_back, c);
		return;
	default:
		if (views_policy_snap(a->rt, c->kind == API_RT_POLICY_GET, &c->snap) != 0) {
			c->req.rc = STRATA_ENOMEM;
			snprintf(c->req.err, sizeof(c->req.err), "%s", diag_last());
		}
		break;
	}
	rtcall_back(c);
}

static void
rtcall_free(struct api_rtcall *c)
{
	views_policy_snap_free(&c->snap);
	env.free(c);
}

static void api_stats_reply(struct api *a, struct http_req *r, const struct views_policy_snap *snap);
static void api_metrics_reply(struct api *a, struct http_req *r, const struct runtime_stats *rs);

/** Server's loop: answer the request with what the runtime's side found. */
static void
rtcall_answer(void *arg)
{
	struct api_rtcall *c = arg;
	struct api *a = c->a;
	struct http_req *r = c->r;
	a->jobs--;
	const char *err = c->req.err[0] ? c->req.err : strata_strerror(c->req.rc);
	switch (c->kind) {
	case API_RT_SEAL:
	case API_RT_MERGE:
		if (c->req.rc == STRATA_EBUSY) {
			api_busy(a, r, c->shard, c->kind == API_RT_MERGE ? "merge-wal" : "seal", err);
		} else if (c->req.rc != 0) {
			api_error(a, r, api_status_of(c->req.rc),
				  c->kind == API_RT_MERGE ? "merge failed" : "seal failed", err);
		} else if (c->kind == API_RT_MERGE) {
			api_json(a, r, 200, json_pack("{s:I, s:I, s:I}", "reclaimed", (json_int_t)c->req.reclaimed,
						      "pending", (json_int_t)c->req.pending, "shard", (json_int_t)c->shard));
		} else {
			strata_stats st;
			api_read_shard_stats(a, c->shard, &st);
			json_t *o = json_pack("{s:b, s:I, s:I}", "sealed", st.seals != c->seals_before, "shard",
					      (json_int_t)c->shard, "generations", (json_int_t)st.generations);
			if (o != NULL && st.seals == c->seals_before)
				json_object_set_new(o, "reason",
						    json_string("the memtable was empty: nothing was appended since "
								"the last seal, so no generation was written"));
			api_json(a, r, 200, o);
		}
		break;
	default:
		if (c->req.rc != 0)
			api_error(a, r, api_status_of(c->req.rc), "policy runtime", err);
		else if (c->kind == API_RT_STATS)
			api_stats_reply(a, r, &c->snap);
		else if (c->kind == API_RT_METRICS)
			api_metrics_reply(a, r, &c->snap.st);
		else if (c->kind == API_RT_CONSOLE)
			console_state_reply(a, r, &c->snap);
		else
			api_json(a, r, 200, views_policy(&c->snap));
		break;
	}
	rtcall_free(c);
}

/** Hand r to the runtime's loop (kind, shard); it is answered from rtcall_answer. */
static void
api_rtcall(struct api *a, struct http_req *r, int kind, uint32_t shard)
{
	struct api_rtcall *c = api_job_new(a, r, sizeof(*c));
	if (c == NULL)
		return;
	c->a = a;
	c->r = r;
	c->kind = kind;
	c->shard = shard;
	if (kind == API_RT_SEAL) {
		strata_stats st;
		api_read_shard_stats(a, shard, &st);
		c->seals_before = st.seals;
	}
	a->jobs++;
	host_post(a->rt_host, &c->call, rtcall_run, c);
}

void
api_rt_console(struct api *a, struct http_req *r)
{
	api_rtcall(a, r, API_RT_CONSOLE, 0);
}

/* ---------- stats and policy ---------- */

/** The shard's statistics (or the error reading them) as GET /v1/shards/{id}/stats shows them. */
static json_t *
shard_stats_json(struct api *a, uint32_t shard)
{
	json_t *o;
	views_shard_stats(a->db, shard, &o);
	return o;
}

/** v rounded to a multiple of 10^-digits (JSON figures without binary noise). */
double
api_round(double v, int digits)
{
	double m = pow(10, digits);
	return round(v * m) / m;
}

json_t *
latency_json(const struct hist *h)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f}", "count", (json_int_t)hist_count(h), "mean_us",
			 api_round(hist_mean(h) / 1e3, 3), "p50_us", api_round(hist_percentile(h, 50) / 1e3, 3),
			 "p99_us", api_round(hist_percentile(h, 99) / 1e3, 3), "p999_us",
			 api_round(hist_percentile(h, 99.9) / 1e3, 3), "max_us", api_round(hist_max(h) / 1e3, 3));
}

/** GET /v1/stats, with snap the runtime's side of it. */
static void
api_stats_reply(struct api *a, struct http_req *r, const struct views_policy_snap *snap)
{
	uint32_t n = strata_shards(a->db);
	json_t *shards = json_array();
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(shards, shard_stats_json(a, i));
	struct http_stats hs;
	memset(&hs, 0, sizeof(hs));
	if (a->http)
		http_server_stats(a->http, &hs);
	struct pool *p = host_exec(a->host, HOST_FG);
	json_t *o = json_pack(
		"{s:s, s:f, s:I, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:o, s:o, s:o}, s:{s:I, s:I, s:I}}",
		"version", STRATA_VERSION, "uptime_s", api_round((double)(env.mono_ns() - a->stats.start_ns) / 1e9, 3),
		"shard_count", (json_int_t)n, "shards", shards, "policy", views_policy(snap), "http", "connections_open",
		(json_int_t)hs.open, "connections_accepted", (json_int_t)hs.accepted, "connections_refused",
		(json_int_t)hs.refused, "requests", (json_int_t)hs.requests, "timeouts", (json_int_t)hs.timeouts,
		"bad_requests", (json_int_t)hs.bad_requests, "auth_failures", (json_int_t)a->stats.auth_failures,
		"latency", "append", latency_json(a->stats.append_ns), "get", latency_json(a->stats.get_ns),
		"request", latency_json(a->stats.request_ns), "pool", "pending", (json_int_t)pool_pending(p), "refused",
		(json_int_t)pool_refused(p), "api_jobs", (json_int_t)a->jobs);
	api_json(a, r, 200, o);
}

/*
 * PUT /v1/policy runs the policy's trial (node/policy/trial.h: compile, validate, every
 * hook against a simulated node under the node's budgets, as `strata policy check --run`)
 * on the server host's background executor, never on a loop: a hook that loops spends
 * its budget there while appends, gets and /healthz go on. A policy that passes is
 * written beside the node's policy file (a temporary file, synced) and then, on the
 * runtime's loop, compiled again in a fresh state, renamed over the file and swapped
 * in; the file watcher takes that content as loaded. Whatever refuses it, the running
 * policy stays and the refusal counts as a refused reload. Answers:
 *   200  accepted: the policy now running (as GET /v1/policy), "persisted": the file,
 *        "check": the trial's runs (views_trial)
 *   400  "policy refused": it does not compile or validate (every error, file:line)
 *   422  "policy refused": a hook failed in the trial: "hook", "shard", "message",
 *        "file", "line" of the first failure and "check"
 *   500  "policy not persisted" (507 when the disk is full): the file could not be
 *        written; "path" names it
 *   503  "policy check unavailable": the simulated node could not be built
 */

/** Name of a policy from PUT /v1/policy in messages (its lines are the body's). */
#define API_PUT_NAME "PUT /v1/policy"

/** A PUT /v1/policy on its way: the trial (server's background executor), the swap
 *  (runtime's loop), the answer (server's loop). (worker) and (runtime) members are
 *  written there, before the call moves on. */
struct api_put {
	/** The API and the request (the server's loop only). */
	struct api *a;
	struct http_req *r;
	/** The crossings to the runtime's loop and back. */
	struct host_call call;
	/** Copy of the body, env.malloc. */
	char *body;
	size_t body_len;
	/** Who applies it (the token's name) and why ("rollback to #3"; "" for a PUT). */
	char who[64], note[64];
	/** (worker) The trial's report (NULL when out of memory). */
	struct trial *trial;
	/** (worker) The temporary file runtime_stage_file wrote ("" when none). */
	char tmp[4200];
	/** (worker, runtime) The answer's status: 0 until refused, 200 once accepted. */
	int status;
	/** (worker, runtime) Its "error" words and detail. */
	const char *error;
	char detail[8192];
	/** (runtime) The policy now running, when accepted. */
	struct views_policy_snap snap;
};

static void
put_free(struct api_put *j)
{
	trial_delete(j->trial);
	views_policy_snap_free(&j->snap);
	env.free(j->body);
	env.free(j);
}

/** Worker: the trial, then the file written beside the policy file. */
static void
put_work(void *arg)
{
	struct api_put *j = arg;
	struct api *a = j->a;
	struct trial_options o = {.run = 1, .limits = a->policy_limits, .store = &a->trial_store};
	int rc = trial_new(API_PUT_NAME, j->body, j->body_len, &o, &j->trial);
	struct trial *t = j->trial;
	if (t == NULL) {
		j->status = 503;
		j->error = "out of memory";
		snprintf(j->detail, sizeof(j->detail), "%s", diag_last());
	} else if (t->compile_rc != 0) {
		j->status = 400;
		j->error = "policy refused";
		snprintf(j->detail, sizeof(j->detail), "%s", t->errors);
	} else if (t->setup_err[0] != '\0') {
		j->status = 503;
		j->error = "policy check unavailable";
		snprintf(j->detail, sizeof(j->detail), "the policy was not tried, so it is not taken: %s",
			 t->setup_err);
	} else if (rc != 0) {
		const struct trial_run *f = trial_first_failure(t);
		j->status = 422;
		j->error = "policy refused";
		if (f != NULL && f->hook == POLICY_ON_SWEEP)
			snprintf(j->detail, sizeof(j->detail), "%s failed in the trial: %s", policy_hook_name(f->hook),
				 f->err);
		else if (f != NULL)
			snprintf(j->detail, sizeof(j->detail), "%s (shard %u) failed in the trial: %s",
				 policy_hook_name(f->hook), f->shard, f->err);
		else
			snprintf(j->detail, sizeof(j->detail), "%s",
				 t->runtime_err[0] ? t->runtime_err : t->check_err);
	} else if ((rc = runtime_stage_file(a->policy_file, j->body, j->body_len, j->tmp, sizeof(j->tmp))) != 0) {
		snprintf(j->detail, sizeof(j->detail), "%s", diag_last());
		j->status = rc == STRATA_ENOSPC ? 507 : 500;
		j->error = "policy not persisted";
		j->tmp[0] = '\0';
	}
}

static void put_on_rt(void *arg);

/** Server's loop: on to the runtime's loop. */
static void
put_done(void *arg)
{
	struct api_put *j = arg;
	host_post(j->a->rt_host, &j->call, put_on_rt, j);
}

static void put_answer(void *arg);

/** Runtime's loop: swap the policy in and keep it in the file, or count the refusal. */
static void
put_on_rt(void *arg)
{
	struct api_put *j = arg;
	struct api *a = j->a;
	if (j->status == 0) {
		snprintf(a->apply_who, sizeof(a->apply_who), "%s", j->who);
		snprintf(a->apply_note, sizeof(a->apply_note), "%s", j->note);
		int rc = runtime_reload_persist(a->rt, j->body, j->body_len, API_PUT_NAME, j->tmp, a->policy_file);
		a->apply_who[0] = a->apply_note[0] = '\0';
		if (rc != 0)
			snprintf(j->detail, sizeof(j->detail), "%s", diag_last());
		if (rc == 0) {
			j->status = 200;
			/* The answer shows the policy now running (without its source: no copy to fail). */
			views_policy_snap(a->rt, 0, &j->snap);
		} else if (rc == STRATA_EINVAL || rc == STRATA_ETOOBIG) {
			j->status = 400;
			j->error = "policy refused";
		} else {
			j->status = rc == STRATA_ENOSPC ? 507 : 500;
			j->error = "policy not persisted";
		}
	} else {
		char msg[sizeof(j->detail) + 64];
		snprintf(msg, sizeof(msg), "%s: %s", API_PUT_NAME, j->detail);
		runtime_reload_refused(a->rt, msg);
	}
	host_post(a->host, &j->call, put_answer, j);
}

/** Server's loop: answer. */
static void
put_answer(void *arg)
{
	struct api_put *j = arg;
	struct api *a = j->a;
	struct http_req *r = j->r;
	a->jobs--;
	json_t *check = j->trial != NULL && j->trial->ran ? views_trial(j->trial) : NULL;
	if (j->status == 200) {
		diag_log(LOG_LVL_INFO, "policy from PUT /v1/policy in use: version %llu, kept in %s",
			 (unsigned long long)j->snap.st.policy_version, a->policy_file);
		json_t *o = views_policy(&j->snap);
		if (o != NULL) {
			json_object_set_new(o, "persisted", json_string(a->policy_file));
			json_object_set_new(o, "check", check ? check : json_null());
			check = NULL;
		}
		api_json(a, r, 200, o);
	} else {
		json_t *o = json_pack("{s:s, s:s}", "error", j->error, "detail", j->detail);
		const struct trial_run *f = j->trial != NULL ? trial_first_failure(j->trial) : NULL;
		if (o != NULL && j->status == 422 && f != NULL) {
			int line = trial_msg_line(j->trial, f->err);
			json_object_set_new(o, "hook", json_string(policy_hook_name(f->hook)));
			if (f->hook != POLICY_ON_SWEEP)
				json_object_set_new(o, "shard", json_integer(f->shard));
			json_object_set_new(o, "message", json_string(f->err));
			json_object_set_new(o, "file", line ? json_string(API_PUT_NAME) : json_null());
			json_object_set_new(o, "line", line ? json_integer(line) : json_null());
		}
		if (o != NULL && (j->status == 500 || j->status == 507))
			json_object_set_new(o, "path", json_string(a->policy_file));
		if (o != NULL && check != NULL) {
			json_object_set_new(o, "check", check);
			check = NULL;
		}
		if (o == NULL || !api_json_reply(a, r, j->status, NULL, o))
			api_error(a, r, j->status, j->error, j->detail);
	}
	json_decref(check);
	put_free(j);
}

static void
api_policy_put(struct api *a, struct http_req *r)
{
	if (r->body.len == 0) {
		api_error(a, r, 400, "policy refused", "the body is empty; send the Lua source of a policy");
		return;
	}
	api_policy_apply(a, r, (const char *)r->body.data, r->body.len, api_token_name(a, r), NULL);
}

void
api_policy_apply(struct api *a, struct http_req *r, const char *src, size_t len, const char *who, const char *note)
{
	if (a->rt == NULL) {
		api_error(a, r, 400, "policy runtime", "this node runs no policy runtime");
		return;
	}
	struct api_put *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	snprintf(j->who, sizeof(j->who), "%s", who ? who : "anonymous");
	snprintf(j->note, sizeof(j->note), "%s", note ? note : "");
	j->body = env.malloc(len + 1);
	if (j->body == NULL) {
		env.free(j);
		api_error(a, r, 503, "out of memory", "no memory for the policy source");
		return;
	}
	memcpy(j->body, src, len);
	j->body[len] = '\0';
	j->body_len = len;
	if (api_submit(a, r, HOST_BG, put_work, put_done, j) != 0)
		put_free(j);
}

/** GET /metrics, with rs the runtime's counters. */
static void
api_metrics_reply(struct api *a, struct http_req *r, const struct runtime_stats *rs)
{
	struct buf out = {0};
	struct metrics_src src = {.db = a->db, .host = a->host, .http = a->http, .req = &a->stats,
				  .cluster = a->cluster};
	if (metrics_render(&src, rs, &out) != 0) {
		buf_destroy(&out);
		api_error(a, r, 503, "out of memory", "could not render the metrics");
		return;
	}
	api_reply(a, r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, out.data, out.len);
	buf_destroy(&out);
}

/* ---------- POST /v1/checkpoint ---------- */

/*
 * A checkpoint goes into a new directory directly under the root the node was started
 * with (--checkpoint-dir; without one the endpoint is refused), never anywhere else: the
 * request names it with "dir" (query or JSON body) as one path component of
 * [A-Za-z0-9._-], not starting with '.', or as ROOT/NAME. It runs on the server host's
 * background executor, so appends, reads and scans never queue behind its copying.
 */

/** What a request done on the background executor (claim, checkpoint) shares: the
 *  first member of its job. */
struct api_bg {
	/** The API. */
	struct api *a;
	/** The request. */
	struct http_req *r;
	/** The engine call's result. */
	int rc;
	/** Its message. */
	char detail[600];
	/** Time it took, ns. */
	uint64_t ns;
};

/** Worker: record the result rc of the engine call begun at t0 (env.mono_ns). */
static void
api_bg_end(struct api_bg *b, int rc, uint64_t t0)
{
	uint64_t t1 = env.mono_ns();
	b->rc = rc;
	b->ns = t1 - t0;
	b->r->mark_ns[REQSTATS_MARK_WORK] = b->r->mark_ns[REQSTATS_MARK_ENGINE] = t0;
	b->r->mark_ns[REQSTATS_MARK_ENGINE_END] = t1;
	if (rc != 0)
		snprintf(b->detail, sizeof(b->detail), "%s", strata_last_error());
}

/** Server's loop: count the job finished and answer its failure (error words words).
 *  1 when it failed (answered), 0 when the caller answers its success. */
static int
api_bg_failed(struct api_bg *b, const char *words)
{
	b->a->jobs--;
	b->r->mark_ns[REQSTATS_MARK_DONE] = env.mono_ns();
	if (b->rc == 0)
		return 0;
	api_error(b->a, b->r, api_status_of(b->rc), words, b->detail);
	return 1;
}

/** One claim of a shard on the background executor. */
struct api_claim {
	/** The request; rc is strata_shard_claim's result. */
	struct api_bg bg;
	/** The shard. */
	uint32_t shard;
};

static void
claim_work(void *arg)
{
	struct api_claim *j = arg;
	uint64_t t0 = env.mono_ns();
	api_bg_end(&j->bg, strata_shard_claim(j->bg.a->db, j->shard), t0);
}

static void
claim_done(void *arg)
{
	struct api_claim *j = arg;
	struct api *a = j->bg.a;
	if (!api_bg_failed(&j->bg, "claim failed")) {
		strata_stats st;
		api_read_shard_stats(a, j->shard, &st);
		diag_log(LOG_LVL_INFO, "shard %u claimed in %.1f ms (epoch %llu)", j->shard, (double)j->bg.ns / 1e6,
			 (unsigned long long)st.writer_epoch);
		api_json(a, j->bg.r, 200, json_pack("{s:I, s:b, s:I, s:I, s:f}", "shard", (json_int_t)j->shard,
						    "claimed", 1, "epoch", (json_int_t)st.writer_epoch, "replayed_rows",
						    (json_int_t)st.memtable_rows, "ms", (double)j->bg.ns / 1e6));
	}
	env.free(j);
}

/** POST /v1/shards/{id}/claim: take the shard over (claim, fence, replay) off the loop. */
static void
api_claim(struct api *a, struct http_req *r, const struct api_route *rt)
{
	struct api_claim *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->bg.a = a;
	j->bg.r = r;
	j->shard = (uint32_t)rt->shard;
	if (api_submit(a, r, HOST_BG, claim_work, claim_done, j) != 0)
		env.free(j);
}

/** One checkpoint on the background executor. */
struct api_ckpt {
	/** The request; rc is strata_checkpoint's result. */
	struct api_bg bg;
	/** Target directory: root/name. */
	char dir[4200];
};

static void
ckpt_work(void *arg)
{
	struct api_ckpt *j = arg;
	uint64_t t0 = env.mono_ns();
	api_bg_end(&j->bg, strata_checkpoint(j->bg.a->db, j->dir), t0);
}

static void
ckpt_done(void *arg)
{
	struct api_ckpt *j = arg;
	struct api *a = j->bg.a;
	if (!api_bg_failed(&j->bg, "checkpoint failed")) {
		diag_log(LOG_LVL_INFO, "checkpoint written to %s in %.1f ms", j->dir, (double)j->bg.ns / 1e6);
		api_json(a, j->bg.r, 200, json_pack("{s:s, s:I, s:f}", "checkpoint", j->dir, "shards",
						    (json_int_t)strata_shards(a->db), "ms", (double)j->bg.ns / 1e6));
	}
	env.free(j);
}

/** 1 when name is one path component of [A-Za-z0-9._-], 1..255 bytes, not starting with '.'
 *  and not ending with ".partial" (the name of a checkpoint being written). */
static int
ckpt_name_ok(const char *name, size_t n)
{
	static const char partial[] = ".partial";
	if (n == 0 || n > 255 || name[0] == '.' ||
	    (n >= sizeof(partial) - 1 && memcmp(name + n - (sizeof(partial) - 1), partial, sizeof(partial) - 1) == 0))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/** The "dir" of the query, else of the JSON body, into out. 0, or answered 400. */
static int
ckpt_param(struct api *a, struct http_req *r, struct buf *out)
{
	struct buf name = {0};
	int found = 0, rc = 0;
	const char *q = r->query, *end = r->query ? r->query + r->query_len : NULL;
	struct api_qpair qp;
	while (rc == 0 && api_query_next(&q, end, &qp)) {
		if (pct_decode(qp.name, qp.name_len, 1, &name) != 0) {
			rc = -1;
		} else if (strcmp((const char *)name.data, "dir") == 0) {
			rc = pct_decode(qp.value, qp.value_len, 1, out);
			found = 1;
		}
	}
	buf_destroy(&name);
	if (rc != 0) {
		api_error(a, r, 400, "bad query", "malformed %-escape in the query");
		return -1;
	}
	if (found)
		return 0;
	json_error_t je;
	json_t *o = r->body.len ? json_loadb((const char *)r->body.data, r->body.len, 0, &je) : NULL;
	json_t *d = json_is_object(o) ? json_object_get(o, "dir") : NULL;
	if (!json_is_string(d)) {
		json_decref(o);
		api_error(a, r, 400, "bad checkpoint request",
			  "name the checkpoint's directory with ?dir=NAME or a body {\"dir\": \"NAME\"}");
		return -1;
	}
	buf_reset(out);
	rc = buf_append(out, json_string_value(d), json_string_length(d)) || buf_put_u8(out, 0) ? -1 : 0;
	out->len = rc == 0 ? out->len - 1 : 0;
	json_decref(o);
	if (rc != 0)
		api_error(a, r, 503, "out of memory", "no memory for the request");
	return rc;
}

static void
api_checkpoint(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (a->checkpoint_root == NULL) {
		api_error(a, r, 403, "checkpoints are disabled",
			  "this node was started without --checkpoint-dir ROOT, the one directory under "
			  "which POST /v1/checkpoint may write");
		return;
	}
	struct buf dir = {0};
	if (ckpt_param(a, r, &dir) != 0) {
		buf_destroy(&dir);
		return;
	}
	const char *name = (const char *)dir.data;
	size_t n = dir.len, rl = strlen(a->checkpoint_root);
	if (n > rl + 1 && memcmp(name, a->checkpoint_root, rl) == 0 && name[rl] == '/') {
		name += rl + 1;
		n -= rl + 1;
	}
	if (!ckpt_name_ok(name, n) || memchr(name, '\0', n) != NULL) {
		char d[700];
		snprintf(d, sizeof(d), "a checkpoint goes into a new directory directly under %s: give its "
			 "name (1..255 bytes of A-Z a-z 0-9 . _ -, not starting with '.' nor ending with "
			 "'.partial') or %s/NAME",
			 a->checkpoint_root, a->checkpoint_root);
		api_error(a, r, 400, "bad checkpoint directory", d);
		buf_destroy(&dir);
		return;
	}
	struct api_ckpt *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL) {
		buf_destroy(&dir);
		return;
	}
	j->bg.a = a;
	j->bg.r = r;
	snprintf(j->dir, sizeof(j->dir), "%s/%.*s", a->checkpoint_root, (int)n, name);
	buf_destroy(&dir);
	if (api_submit(a, r, HOST_BG, ckpt_work, ckpt_done, j) != 0)
		env.free(j);
}

/* ---------- the other handlers, and dispatch ---------- */

static void
api_healthz(struct api *a, struct http_req *r, const struct api_route *rt)
{
	const char *why;
	if (a->cluster != NULL && cluster_degraded(a->cluster, &why)) {
		api_json(a, r, 200, json_pack("{s:s, s:s}", "status", "degraded", "cluster", why));
		return;
	}
	api_json(a, r, 200, json_pack("{s:s}", "status", "ok"));
}

/** GET /v1/cluster: the members and the shard map this node read from etcd last. */
static void
api_cluster(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (a->cluster == NULL) {
		api_error(a, r, 404, "not a cluster member",
			  "this node was started without --cluster; it serves its own shards");
		return;
	}
	api_json(a, r, 200, cluster_json(a->cluster));
}

static void
api_metrics(struct api *a, struct http_req *r, const struct api_route *rt)
{
	api_rtcall(a, r, API_RT_METRICS, 0);
}

static void
api_stats(struct api *a, struct http_req *r, const struct api_route *rt)
{
	api_rtcall(a, r, API_RT_STATS, 0);
}

static void
api_policy(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (r->method == HTTP_PUT)
		api_policy_put(a, r);
	else
		api_rtcall(a, r, API_RT_POLICY_GET, 0);
}

static void
api_rows(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (r->method == HTTP_POST)
		api_append(a, r, (uint32_t)rt->shard);
	else if (r->method == HTTP_HEAD)
		api_reply(a, r, 200, "application/x-ndjson", NULL, "", 0);
	else
		api_scan(a, r, rt);
}

static void
api_seal(struct api *a, struct http_req *r, const struct api_route *rt)
{
	api_rtcall(a, r, API_RT_SEAL, (uint32_t)rt->shard);
}

static void
api_merge_wal(struct api *a, struct http_req *r, const struct api_route *rt)
{
	api_rtcall(a, r, API_RT_MERGE, (uint32_t)rt->shard);
}

static void
api_shard_stats(struct api *a, struct http_req *r, const struct api_route *rt)
{
	api_json(a, r, 200, shard_stats_json(a, (uint32_t)rt->shard));
}

void
api_loop_lag(struct api *a, uint64_t lag_ns)
{
	reqstats_loop_lag(&a->stats, lag_ns);
}

/** GET /v1/slow-requests: the slow-request log, newest first; DELETE empties it (and
 *  the longest loop lag). */
static void
api_slow_requests(struct api *a, struct http_req *r, const struct api_route *rt)
{
	struct reqstats *s = &a->stats;
	if (r->method == HTTP_DELETE) {
		size_t n = s->slow_len;
		reqstats_slow_reset(s);
		api_json(a, r, 200, json_pack("{s:I}", "cleared", (json_int_t)n));
		return;
	}
	json_t *list = json_array();
	for (size_t i = 0; i < s->slow_len; i++) {
		const struct reqstats_slow *e = reqstats_slow_get(s, i);
		json_t *stages = json_object();
		for (int k = 0; k < REQSTATS_STAGES; k++) /* every stage, 0 where it did not pass */
			json_object_set_new(stages, reqstats_stage_name(k),
					    json_real(e->stage_ns[k] == UINT64_MAX
							      ? 0.0
							      : api_round((double)e->stage_ns[k] / 1e3, 3)));
		time_t sec = (time_t)(e->wall_ns / 1000000000ull);
		struct tm tm;
		gmtime_r(&sec, &tm);
		char when[40], date[32];
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(when, sizeof(when), "%s.%03uZ", date, (unsigned)(e->wall_ns / 1000000ull % 1000));
		json_t *path = json_stringn(e->path, strlen(e->path));
		if (path == NULL) { /* not UTF-8 (or cut inside a character): the bytes as ASCII */
			char clean[REQSTATS_SLOW_PATH];
			size_t n = 0;
			for (; e->path[n] != '\0'; n++)
				clean[n] = (unsigned char)e->path[n] < 0x20 || (unsigned char)e->path[n] > 0x7e ? '?'
														 : e->path[n];
			clean[n] = '\0';
			path = json_string(clean);
		}
		json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:s, s:i, s:f, s:o}", "time", when, "method",
						      http_method_str(e->method), "path", path,
						      "handler", s->handler[e->handler].name, "status", e->status,
						      "total_us", api_round((double)e->total_ns / 1e3, 3), "stages_us",
						      stages));
	}
	api_json(a, r, 200, json_pack("{s:f, s:f, s:I, s:I, s:I, s:o}", "loop_lag_max_us",
				      api_round((double)s->loop_lag_max_ns / 1e3, 3), "threshold_us",
				      api_round((double)s->slow_threshold_ns / 1e3, 3), "capacity", (json_int_t)s->slow_cap,
				      "logged", (json_int_t)s->slow_total, "kept", (json_int_t)s->slow_len, "requests",
				      list));
}

void
api_on_sent(void *ctx, struct http_req *r)
{
	struct api *a = ctx;
	struct api_route rt;
	api_route(r, &rt);
	/* The stage histograms are of the foreground jobs (rows and row): a merge's or a
	 * checkpoint's minutes in "engine" would hide the appends' microseconds. */
	api_handler_fn *h = api_endpoints[rt.ep].handler;
	reqstats_sent(&a->stats, rt.ep, r, h == api_rows || h == api_row);
}

void
api_on_request(void *ctx, struct http_req *r)
{
	struct api *a = ctx;
	struct api_route rt;
	if (api_check(a, r, &rt) == 0)
		api_endpoints[rt.ep].handler(a, r, &rt);
}

/** Where PUT /v1/policy keeps a policy, and what its trial runs under (before the node
 *  serves: the runtime's policy file is read off its loop only then). */
static int
api_policy_setup(struct api *a)
{
	const char *file = runtime_policy_file(a->rt);
	const strata_options *so = store_options(strata_store(a->db));
	if (file != NULL) {
		a->policy_file = strdup(file);
	} else {
		size_t n = strlen(so->dir) + sizeof("/" API_POLICY_FILE);
		a->policy_file = malloc(n);
		if (a->policy_file != NULL)
			snprintf(a->policy_file, n, "%s/%s", so->dir, API_POLICY_FILE);
	}
	if (a->policy_file == NULL)
		return diag_set(STRATA_ENOMEM, "api: out of memory");
	runtime_limits(a->rt, &a->policy_limits);
	strata_options_init(&a->trial_store);
	a->trial_store.merge_max_inputs = so->merge_max_inputs;
	/* The count the node resolved, so a trial clamps a policy's merge_threads as it would. */
	a->trial_store.merge_threads = store_merge_threads_max(strata_store(a->db));
	return 0;
}

int
api_new(const struct api_options *o, struct api **out)
{
	*out = NULL;
	struct api *a = env.calloc(1, sizeof(*a));
	if (a == NULL)
		return diag_set(STRATA_ENOMEM, "api: out of memory");
	a->db = o->db;
	a->rt = o->rt;
	a->host = o->host;
	a->rt_host = o->rt_host != NULL ? o->rt_host : o->host;
	a->batch_limits = (struct batch_limits){.max_rows = BATCH_MAX_ROWS, .max_key = STRATA_MAX_KEY,
						.max_value = store_options(strata_store(o->db))->max_value_bytes};
	int rc = 0;
	if (o->checkpoint_root != NULL && (a->checkpoint_root = strdup(o->checkpoint_root)) == NULL)
		rc = diag_set(STRATA_ENOMEM, "api: out of memory");
	struct api_token one = {"default", o->token};
	const struct api_token *tokens = o->token != NULL ? &one : o->tokens;
	size_t ntokens = o->token != NULL ? 1 : o->ntokens;
	if (ntokens > API_MAX_TOKENS)
		rc = diag_set(STRATA_EINVAL, "api: %zu tokens; at most %u", ntokens, API_MAX_TOKENS);
	for (size_t k = 0; rc == 0 && k < ntokens; k++) {
		a->token_len[k] = strlen(tokens[k].token);
		a->token[k] = env.malloc(a->token_len[k] + 1);
		a->token_name[k] = strdup(tokens[k].name);
		a->ntokens = k + 1;
		if (a->token[k] == NULL || a->token_name[k] == NULL)
			rc = diag_set(STRATA_ENOMEM, "api: out of memory");
		else
			memcpy(a->token[k], tokens[k].token, a->token_len[k] + 1);
	}
	if (rc == 0 && a->rt != NULL)
		rc = api_policy_setup(a);
	a->trace_max_bytes = o->trace_max_bytes ? o->trace_max_bytes : API_TRACE_MAX_BYTES;
	a->compare_budget_ms = o->compare_budget_ms ? o->compare_budget_ms : API_COMPARE_BUDGET_MS;
	/* The what-if replays the node's own kind of store, on its model file when it has one. */
	a->compare_store = replay_store_of_url(o->store_url);
	replay_model_default(a->compare_store, &a->compare_model);
	if (rc == 0 && o->compare_model != NULL && replay_model_load(o->compare_model, &a->compare_model) != 0) {
		rc = diag_set(STRATA_EINVAL, "--policy-compare-model: %s", diag_last());
	}
	if (rc == 0 && a->rt != NULL)
		rc = console_history_start(a, o->policy_history);
	if (rc == 0 && (rc = reqstats_create(&a->stats, API_ENDPOINTS, o->slow_request_ns, o->slow_requests)) == 0)
		for (size_t h = 0; h < API_ENDPOINTS; h++)
			a->stats.handler[h].name = api_endpoints[h].metric;
	if (rc != 0) {
		api_delete(a);
		return rc;
	}
	*out = a;
	return 0;
}

void
api_delete(struct api *a)
{
	if (a == NULL)
		return;
	for (size_t k = 0; k < a->ntokens; k++) {
		if (a->token[k] != NULL) {
			memset(a->token[k], 0, a->token_len[k]);
			env.free(a->token[k]);
		}
		free(a->token_name[k]);
	}
	phist_close(a->phist);
	reqstats_destroy(&a->stats);
	free(a->checkpoint_root);
	free(a->policy_file);
	env.free(a);
}
