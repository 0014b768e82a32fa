/*
 * http.h — the HTTP client of the remote object stores (azure, s3), over libcurl.
 * A client keeps a small pool of easy handles (each keeps its connections alive, so
 * requests reuse them), applies timeouts, retries 5xx, throttling (429, 503) and
 * transport failures with jittered exponential backoff, and counts every request per
 * operation kind. A failure after the request was sent (a timeout, a dropped
 * connection, a 500/502/504) may or may not have been applied by the server: the
 * request says so (oshttp_req.indeterminate) and the backend reports it as such
 * (objstore_last_indeterminate). Above the client, the requests both stores make alike
 * are built here too (struct oshttp_call, which each client's request embeds, from the
 * struct oshttp_store each store begins with): get, get_range, head, delete, the start of
 * a whole-object write and the listing loop, with a small callback table per client
 * (oshttp_store_ops) for what differs: signing, failure mapping, a missing key, the
 * whole-object write, the listing's query and XML format. The objstore_ops entries that
 * are these requests and nothing else (get, get_range, size, etag, put, put_if_absent,
 * put_if_match, del, list, request_stats) are written here once, for both stores' tables.
 */
#ifndef STRATA_OSHTTP_H
#define STRATA_OSHTTP_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "objstore.h"

struct curl_slist;
struct hist;
struct oshttp_client;

/** Operation kinds, for the counters. */
enum oshttp_op {
	OSHTTP_OP_GET,     /**< whole-object reads */
	OSHTTP_OP_GET_RANGE, /**< ranged reads */
	OSHTTP_OP_HEAD,    /**< size and ETag reads */
	OSHTTP_OP_PUT,     /**< plain whole-object writes */
	OSHTTP_OP_PUT_IF_ABSENT, /**< whole-object writes if absent (If-None-Match: *) */
	OSHTTP_OP_PUT_IF_MATCH,  /**< compare-and-swap writes (If-Match: ETag) */
	OSHTTP_OP_PART,    /**< one part of a streamed write (Put Block, UploadPart) */
	OSHTTP_OP_COMMIT,  /**< the end of a streamed write (Put Block List, CompleteMultipartUpload) */
	OSHTTP_OP_DELETE,  /**< deletes */
	OSHTTP_OP_LIST,    /**< listing pages */
	OSHTTP_OP_OTHER,   /**< container/bucket probes and creation */
	OSHTTP_OP_COUNT
};

/** Counters of one operation kind. */
struct oshttp_stats {
	/** Requests sent (each attempt counts). */
	uint64_t requests;
	/** Attempts answered 2xx or 3xx. */
	uint64_t ok;
	/** Final answers 4xx (not found, exists, conflict, auth). */
	uint64_t client_errors;
	/** Attempts answered 500, 502 or 504. */
	uint64_t server_errors;
	/** Attempts answered 429 or 503 (throttling). */
	uint64_t throttled;
	/** Attempts that failed in transport (connect, timeout, reset). */
	uint64_t transport_errors;
	/** Of those, attempts that timed out (connect, whole-request or stall timeout). */
	uint64_t timeouts;
	/** Attempts whose outcome is unknown: failed after the request was sent. */
	uint64_t indeterminate;
	/** Attempts repeated after a retryable failure. */
	uint64_t retries;
	/** Request body bytes sent. */
	uint64_t bytes_sent;
	/** Response body bytes received. */
	uint64_t bytes_received;
};

/** Limits of a client; every one is settable from the store URL. */
struct oshttp_config {
	/** Connect timeout, ms. */
	uint32_t connect_timeout_ms;
	/** Whole-request timeout, ms (0 = none). */
	uint32_t timeout_ms;
	/** A transfer slower than 1 KiB/s for this long is aborted, ms (0 = never). */
	uint32_t stall_timeout_ms;
	/** Retries after the first attempt. */
	uint32_t retries;
	/** First backoff, ms; doubled per retry, with full jitter. */
	uint32_t backoff_base_ms;
	/** Longest backoff, ms. */
	uint32_t backoff_max_ms;
	/** Idle easy handles kept for reuse. */
	uint32_t pool_max;
	/** Largest response body read into memory (list pages, error bodies, whole gets). */
	uint64_t max_response_bytes;
};

/** Defaults: 5 s connect, 120 s request, 30 s stall, 5 retries from 50 ms to 2 s, 16
 *  pooled handles, 256 MiB responses. */
void oshttp_config_init(struct oshttp_config *c);

/** Fills in the headers of one attempt (signing needs a fresh date each time): append
 *  to *h with curl_slist_append. 0 or a STRATA_E* code with a message. */
typedef int (*oshttp_headers_fn)(void *ctx, struct curl_slist **h);

/** One request and its answer. */
struct oshttp_req {
	/** Operation kind (counters). */
	enum oshttp_op op;
	/** "GET", "PUT", "HEAD", "DELETE", "POST". */
	const char *method;
	/** The full URL. */
	const char *url;
	/** What the request is about, for messages ("azure acct/ctr: get KEY"). */
	const char *what;
	/** Request body (NULL: none). */
	const void *body;
	/** Its length. */
	size_t body_len;
	/** Builds the headers of each attempt. */
	oshttp_headers_fn headers;
	/** Its context (also retry_answer's). */
	void *headers_ctx;
	/** Whether a final answer that its status alone does not make retryable is worth
	 *  another attempt (S3's 409 ConditionalRequestConflict, 400 RequestTimeout); its body
	 *  is in error_body. NULL: never. */
	int (*retry_answer)(void *ctx, const struct oshttp_req *r);
	/** Sign with AWS SigV4 through libcurl: "aws:amz:REGION:SERVICE" (NULL: the caller
	 *  signs in headers). libcurl (7.88, Debian bookworm) signs every header of the
	 *  request as given, an empty one that removes a default too, so a signed request
	 *  gets no removals: it names its Content-Type, and an Expect: 100-continue libcurl
	 *  adds to a large body goes out unsigned. */
	const char *aws_sigv4;
	/** The access key id and secret of aws_sigv4 (never logged). */
	const char *aws_key_id, *aws_secret;
	/** A 2xx body goes here, appended (NULL: to dst, or discarded). */
	struct buf *out;
	/** Or into this fixed buffer (a ranged read). */
	void *dst;
	/** Room in dst. */
	size_t dst_cap;
	/** Bytes of a 200 answer to skip before dst (a server that ignored Range). */
	uint64_t skip;
	/** Answer: the final HTTP status (0: none arrived). */
	long status;
	/** Answer: bytes written to dst. */
	size_t got;
	/** Answer: the ETag header, quotes kept ("" when absent). */
	char etag[128];
	/** Answer: the service's error code header (x-ms-error-code), "" when absent. */
	char error_code[128];
	/** Answer: Content-Length (-1 when absent). */
	int64_t content_length;
	/** Answer: the body of a non-2xx answer (at most 64 KiB), for error parsing. */
	struct buf error_body;
	/** Answer: some attempt failed after it was sent, so it may have been applied. */
	int indeterminate;
	/** Answer: attempts made. */
	uint32_t attempts;
};

/** A client with config c (NULL: defaults). */
int oshttp_client_new(const struct oshttp_config *c, struct oshttp_client **out);
/** Safe on NULL. */
void oshttp_client_delete(struct oshttp_client *cl);
/** The client's limits. */
const struct oshttp_config *oshttp_client_config(const struct oshttp_client *cl);

/*
 * Run r, retrying what is retryable. 0 when an answer arrived (r->status: the caller
 * maps it; after the retries a 5xx or throttled status is returned as it is); STRATA_EIO
 * with a message naming r->what when none did (r->indeterminate tells whether one may
 * have been applied), STRATA_ENOMEM. Release r->error_body with oshttp_req_destroy.
 */
int oshttp_perform(struct oshttp_client *cl, struct oshttp_req *r);
/** Release what an answer holds. */
void oshttp_req_destroy(struct oshttp_req *r);

/** The counters of operation kind op. */
void oshttp_client_stats(struct oshttp_client *cl, enum oshttp_op op, struct oshttp_stats *out);
/** Name of an operation kind ("get", "put", ...). */
const char *oshttp_op_name(enum oshttp_op op);
/** The client's counters as a remote store's request_stats reports them: up to cap entries
 *  of out, one per operation kind; how many. */
size_t oshttp_client_request_stats(struct oshttp_client *cl, struct objstore_op_stats *out, size_t cap);
/** Durations of the requests of kind op, ns, from the first attempt to the answer (the
 *  retries and their backoff included). */
const struct hist *oshttp_client_latency(struct oshttp_client *cl, enum oshttp_op op);
/** Longest request duration the latency histograms tell apart, ns. */
#define OSHTTP_LATENCY_HIGHEST_NS (600ull * 1000000000ull)

/** Wait ns nanoseconds of the environment's clock: on a fiber until a tick moved it that
 *  far; elsewhere sleeping, but never longer than the real time asked when the clock is a
 *  manual one that does not move. */
void oshttp_sleep(uint64_t ns);

/** A random number: env.random, or a per-thread xorshift when the environment has none
 *  (backoff jitter, block ids). */
uint64_t oshttp_random(void);

/** Append s to out percent-encoded (RFC 3986 unreserved kept; '/' kept when keep_slash). */
int oshttp_escape(struct buf *out, const char *s, size_t n, int keep_slash);

/** Query parameters a request may carry. */
#define OSHTTP_MAX_QUERY 6

/** Where a request goes: its encoded path, its query, and the URL built from them. */
struct oshttp_target {
	/** The encoded path, from the first '/'. */
	struct buf path;
	/** Query names and values (not encoded), in the order added: callers add them in
	 *  name order, which both stores' signatures want. */
	const char *qn[OSHTTP_MAX_QUERY], *qv[OSHTTP_MAX_QUERY];
	/** How many. */
	int nq;
	/** origin + path + "?" + the encoded query, NUL-terminated (oshttp_target_url). */
	struct buf url;
};

/** Add a query parameter (name and value must outlive the request). */
void oshttp_target_query(struct oshttp_target *t, const char *name, const char *value);
/** Build t->url from origin, the path and the query. 0 or STRATA_ENOMEM (no message). */
int oshttp_target_url(struct oshttp_target *t, const char *origin);
/** Free the target's buffers. */
void oshttp_target_destroy(struct oshttp_target *t);
/** Append the header "name: value" to *h. 0 or STRATA_ENOMEM (no message). */
int oshttp_header(struct curl_slist **h, const char *name, const char *value);

/** Longest key of a remote store, with its prefix (azure's and s3's limit). */
#define OSHTTP_KEY_MAX 1024
/** Room for a request's message prefix: the store's name, the operation and a key. */
#define OSHTTP_WHAT_MAX (OSHTTP_KEY_MAX + 384)
/** Longest place a listing page says the next one starts at (a marker, a token). */
#define OSHTTP_LIST_NEXT_MAX 4096
/** Most bytes a client's request adds to struct oshttp_call (each client asserts that
 *  its own fits): the requests written here hold one on the stack. */
#define OSHTTP_CALL_EXTRA 128

struct oshttp_call;
struct oshttp_lister;
struct oshttp_store;

/** What a remote store's client (azure, s3) gives the requests built here. */
struct oshttp_store_ops {
	/** Bytes of the client's request, which embeds struct oshttp_call first. */
	size_t call_size;
	/** Make c ready to run (its URL is built): its headers function, which signs each
	 *  attempt, and what else the client's requests carry. 0 or a STRATA_E* code with a
	 *  message. */
	int (*sign)(struct oshttp_call *c);
	/** Map an answer that is not the expected success to a code and a message. */
	int (*fail)(struct oshttp_call *c);
	/** Whether an answer is a 404 about the key (not the container or bucket). */
	int (*key_missing)(struct oshttp_call *c);
	/** Write a whole object (Put Blob, PutObject), named opname in messages, with an
	 *  optional condition (if_match: an ETag; if_none_match: "*"), and map its answer: the
	 *  services answer a write and a failed condition differently (oshttp_put_init starts
	 *  the request). */
	int (*put)(struct oshttp_store *st, const char *opname, const char *key, const void *data, size_t len,
		   const char *if_match, const char *if_none_match);
	/** The status of a delete done, besides 200 (azure: 202 Accepted; s3: 204 No Content). */
	long delete_status;
	/** Add the query of one listing page (List Blobs, ListObjectsV2) to c: next, where it
	 *  starts ("" for the first); page, the most keys it may hold (decimal); full, the
	 *  key prefix with the store's ("" none). */
	void (*list_query)(struct oshttp_call *c, const char *next, const char *page, const char *full);
	/** Parse the listing page in body (at most max keys), give each key to
	 *  oshttp_list_entry in the answer's order, and copy where the next page starts into
	 *  next (OSHTTP_LIST_NEXT_MAX + 1 bytes; "" after the last). 0 or a STRATA_E* code
	 *  with a message. */
	int (*list_page)(struct oshttp_call *c, const struct buf *body, uint32_t max, struct oshttp_lister *ls,
			 char *next);
	/** A listing is refused when it is not in byte order (s3). */
	int list_in_order;
};

/** The part of a remote store its requests are built from; the store begins with it. */
struct oshttp_store {
	/** Generic header (the store's objstore_ops and its name); must be first: the
	 *  objstore_ops entries written here find the rest of the store behind it. */
	struct objstore base;
	/** The client's callbacks. */
	const struct oshttp_store_ops *ops;
	/** The HTTP client (pooled connections, retries, counters). */
	struct oshttp_client *http;
	/** Key prefix inside the container or bucket ("" or "dir/"). */
	char prefix[256];
	/** Its length. */
	size_t prefix_len;
	/** Longest key accepted, with the prefix. */
	size_t key_max;
	/** Keys per listing page asked for. */
	uint32_t list_page;
	/** scheme://host[:port] of the service. */
	char origin[256];
	/** The path before a key's '/': "/ACCOUNT/CONTAINER" path-style or "/CONTAINER"
	 *  (azure), "/BUCKET" path-style or "" virtual-host style (s3). */
	char path0[160];
};

/** One request being built; a client's request embeds it first. */
struct oshttp_call {
	/** The store. */
	struct oshttp_store *st;
	/** The HTTP request. */
	struct oshttp_req http;
	/** Content-Type (NULL: none). */
	const char *content_type;
	/** If-Match and If-None-Match (NULL: none). */
	const char *if_match, *if_none_match;
	/** The range header's value ("" none). */
	char range[64];
	/** Its path, query and URL. */
	struct oshttp_target to;
	/** The message prefix. */
	char what[OSHTTP_WHAT_MAX];
};

/** Start a call of method on key (NULL: the container or bucket itself) in c, a request
 *  of st->ops->call_size bytes, all of them zeroed first: its message prefix
 *  "NAME: OPNAME KEY" and its path. 0 or STRATA_ENOMEM with a message; release c with
 *  oshttp_call_destroy either way. */
int oshttp_call_init(struct oshttp_call *c, struct oshttp_store *st, enum oshttp_op op, const char *method,
		     const char *opname, const char *key);
/** Release what c holds. */
void oshttp_call_destroy(struct oshttp_call *c);
/** Add a query parameter; callers add them in name order (the signatures need it). */
void oshttp_call_query(struct oshttp_call *c, const char *name, const char *value);
/** Append the headers both stores' requests name alike, those c has, in this order:
 *  Content-Type, If-Match, If-None-Match, and its range as range_name ("x-ms-range",
 *  "Range"). 0 or STRATA_ENOMEM (no message). */
int oshttp_call_headers(const struct oshttp_call *c, struct curl_slist **h, const char *range_name);
/** Send c (after its body and query are set): build its URL, sign it and run it. 0 when
 *  an answer arrived; a failure that may have been applied is recorded as such. */
int oshttp_call_send(struct oshttp_call *c);

/** Check a key of st (oshttp_check_key with its prefix and key_max). */
int oshttp_store_check_key(const struct oshttp_store *st, const char *key, int is_prefix);

/*
 * The objstore_ops entries of a remote store, written once for both (os: the base of a
 * struct oshttp_store). Each checks the key, runs its request in a client's request on
 * its stack (st->ops->call_size bytes) and maps the answer, a missing key
 * (st->ops->key_missing) to STRATA_NOTFOUND and any other failure through st->ops->fail;
 * the writes go through st->ops->put.
 */
/** Read a whole object into out (appended; cut back on a failure). */
int oshttp_get(struct objstore *os, const char *key, struct buf *out);
/** Read len bytes at off into dst; *got: the bytes read (short at the end, 0 past it). */
int oshttp_get_range(struct objstore *os, const char *key, uint64_t off, size_t len, void *dst, size_t *got);
/** The size of an object (a HEAD). */
int oshttp_size(struct objstore *os, const char *key, uint64_t *size);
/** The ETag of an object (a HEAD). */
int oshttp_etag(struct objstore *os, const char *key, char *etag, size_t cap);
/** Write a whole object (st->ops->put, no condition). */
int oshttp_put(struct objstore *os, const char *key, const void *data, size_t len);
/** Write a whole object only if key does not exist (st->ops->put, If-None-Match: *). */
int oshttp_put_if_absent(struct objstore *os, const char *key, const void *data, size_t len);
/** Replace an object only while its ETag is etag (st->ops->put, If-Match: ETAG); an empty
 *  ETag is refused. */
int oshttp_put_if_match(struct objstore *os, const char *key, const void *data, size_t len, const char *etag);
/** Delete an object; one that is missing is not a failure. */
int oshttp_del(struct objstore *os, const char *key);
/** List the keys under prefix, st->list_page a page, calling cb(ctx, key without the
 *  store's prefix, size) for each in the order of the answers (refused when it is not
 *  byte order, with list_in_order); cb's nonzero stops the listing and is returned. */
int oshttp_list(struct objstore *os, const char *prefix, objstore_list_cb cb, void *ctx);
/** The requests per operation kind (oshttp_client_request_stats of the store's client). */
size_t oshttp_request_stats(struct objstore *os, struct objstore_op_stats *out, size_t cap);

/** Ask for the container or bucket itself (method, named opname in messages, with the
 *  query parameter qname=qvalue unless qname is NULL): *missing says it answered 404 (an
 *  open creates it then). 0, or another failure mapped through st->ops->fail. */
int oshttp_probe_container(struct oshttp_store *st, const char *method, const char *opname, const char *qname,
			   const char *qvalue, int *missing);
/** HEAD an object of st, named opname in messages: its size and ETag (NULL: not wanted). */
int oshttp_head(struct oshttp_store *st, const char *key, const char *opname, uint64_t *size, char *etag,
		size_t cap);
/** Start a whole-object write (Put Blob, PutObject) of data at key in c, with an optional
 *  condition: the key checked, the operation kind of its condition, Content-Type
 *  application/octet-stream, the condition and the body. The client sends it and maps the
 *  answer; release c with oshttp_call_destroy either way (after a failed key check too). */
int oshttp_put_init(struct oshttp_store *st, struct oshttp_call *c, const char *opname, const char *key,
		    const void *data, size_t len, const char *if_match, const char *if_none_match);
/** One key of a listing page (full name, with the store's prefix): checked to be under the
 *  listed prefix (and after the last one, with list_in_order), then given to the
 *  listing's callback. 0, STRATA_EIO with a message, or the callback's nonzero. */
int oshttp_list_entry(struct oshttp_lister *ls, const char *name, uint64_t size);

/** Check a key of the store named name, whose prefix is prefix_len bytes: non-empty
 *  (unless is_prefix), at most max bytes with the prefix, no "//" or leading '/'. 0 or
 *  STRATA_EINVAL with a message. */
int oshttp_check_key(const char *name, size_t prefix_len, size_t max, const char *key, int is_prefix);
/** Turn the line ends of an error message into spaces, in place. */
void oshttp_flatten(char *msg);
/** The failure of an answer (what: r->what) that no rule of the store mapped, with the
 *  service's error code and message: STRATA_EIO, indeterminate when an earlier attempt may
 *  have been applied. */
int oshttp_fail_answer(const struct oshttp_req *r, const char *code, const char *msg);
/** The failure of a conditional write whose condition failed (if_none_match: the key
 *  exists, STRATA_EEXIST; if_match: the ETag is stale, STRATA_ECONFLICT), or STRATA_EIO,
 *  indeterminate, when an earlier attempt may have been the write that made it fail. */
int oshttp_cond_lost(const struct oshttp_req *r, const char *if_match, const char *if_none_match);

/** Start opening a store URL of scheme ("azure://", "s3://"), at most 4096 bytes: the store,
 *  size bytes zeroed, into *store, and a copy of url into *copy, cut at its query (*query:
 *  what follows '?', NULL when none); free both with env.free. 0, or STRATA_EINVAL or
 *  STRATA_ENOMEM with a message. */
int oshttp_url_open(const char *url, const char *scheme, size_t size, void **store, char **copy, char **query);
/** Called for each NAME=VALUE parameter of a store URL; 0 or a STRATA_E* code with a message. */
typedef int (*oshttp_param_fn)(void *ctx, const char *name, const char *value);
/** Call fn for every parameter of query, the part of url after '?' (cut in place; NULL:
 *  none). 0, fn's failure, or STRATA_EINVAL for a parameter that is not NAME=VALUE. */
int oshttp_url_params(const char *url, char *query, oshttp_param_fn fn, void *ctx);
/** A decimal parameter value of url in [lo, hi]. 0 or STRATA_EINVAL with a message. */
int oshttp_param_u64(const char *url, const char *name, const char *v, uint64_t lo, uint64_t hi,
		     uint64_t *out);
/** Set the limit of c that URL parameter name is (connect_timeout_ms, timeout_ms,
 *  stall_timeout_ms, retries, backoff_base_ms, backoff_max_ms, pool, max_response_bytes);
 *  *taken says whether it is one. 0 or STRATA_EINVAL with a message. */
int oshttp_config_param(struct oshttp_config *c, const char *url, const char *name, const char *v,
			int *taken);
/** Check endpoint= of url (http://HOST[:PORT] or https://HOST[:PORT], no path) and copy it,
 *  without trailing '/', into origin (cap bytes). 0 or STRATA_EINVAL with a message. */
int oshttp_url_endpoint(const char *url, const char *endpoint, char *origin, size_t cap);
/** The key prefix of a store URL from pfx, the path after the container or bucket (NULL:
 *  none; trailing '/' cut in place): "PFX/" into prefix (cap bytes), "" without one; *pl:
 *  the length of pfx kept. 0 or STRATA_EINVAL with a message. */
int oshttp_url_prefix(const char *url, char *pfx, char *prefix, size_t cap, size_t *pl);

/** The HTTP client of an azure store (its counters), NULL for another kind of store. */
struct oshttp_client *objstore_azure_client(struct objstore *os);
/** The HTTP client of an s3 store (its counters), NULL for another kind of store. */
struct oshttp_client *objstore_s3_client(struct objstore *os);

#endif
