/*
 * etcd.h — an asynchronous client of etcd's v3 JSON gateway (etcd 3.4: POST
 * /v3/<service>/<method> with a JSON body, keys and values base64), run by libcurl's multi
 * interface on a libev loop: no thread per call, no blocking on the loop.
 *
 * A call goes to one endpoint of the list; one that fails at the transport (refused,
 * timed out) moves the client on to the next endpoint for the calls after it, so a
 * cluster of etcd members is used as a client would expect. A reply is handed to the
 * caller's callback on the loop, parsed: rc 0 and the JSON of an HTTP 200, or rc
 * nonzero with the words of what failed (transport error, HTTP status and etcd's
 * message).
 *
 * Everything here runs on the loop's thread, except etcd_call_sync (any thread, blocks).
 */
#ifndef STRATA_ETCD_H
#define STRATA_ETCD_H

#include <ev.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"

struct etcd;

/** Most endpoints of one client. */
#define ETCD_MAX_ENDPOINTS 8u
/** Largest reply kept, bytes (a range of the whole prefix of a big cluster). */
#define ETCD_MAX_REPLY_BYTES (16u << 20)

/** How to build a client. */
struct etcd_options {
	/** The loop the calls run on. */
	struct ev_loop *loop;
	/** "HOST:PORT[,HOST:PORT...]". */
	const char *endpoints;
	/** Time limit of one call, ms (connect included). */
	long timeout_ms;
};

/** What a call hands back: rc 0 and the reply (borrowed: valid during the call), or rc
 *  nonzero (a STRATA_E* code), reply NULL and err the words of the failure. */
typedef void etcd_done_fn(void *ctx, int rc, json_t *reply, const char *err);

/** A message of a stream (borrowed: valid during the call). */
typedef void etcd_line_fn(void *ctx, json_t *message);
struct etcd_xfer;

/** Build a client. 0 or STRATA_EINVAL (a malformed endpoint list) / STRATA_ENOMEM with a
 *  message in diag. */
int etcd_new(const struct etcd_options *o, struct etcd **out);
/** Cancel the calls in flight (their callbacks are not called) and free. Safe on NULL. */
void etcd_delete(struct etcd *e);
/** POST body (taken: the call owns it, even on failure) to /v3/path ("kv/range",
 *  "lease/keepalive", ...); done is called on the loop once, later. 0 or a STRATA_E*
 *  code (done not called). */
int etcd_call(struct etcd *e, const char *path, json_t *body, etcd_done_fn *done, void *ctx);
/** A streaming call (POST /v3/watch): each message (one JSON object a line) goes to line
 *  as it comes; done is called once the stream ends (rc nonzero: it always ends in an
 *  error or EOF, and the caller starts another), unless it was cancelled. *out (may be
 *  NULL) names it for etcd_cancel. 0 or a STRATA_E* code (neither callback called). */
int etcd_stream(struct etcd *e, const char *path, json_t *body, etcd_line_fn *line, etcd_done_fn *done, void *ctx,
		struct etcd_xfer **out);
/** End a call in flight without calling its callbacks (no-op when it is done). */
void etcd_cancel(struct etcd *e, struct etcd_xfer *x);
/** The same, blocking, on a connection of its own (a last call at shutdown, when the loop
 *  no longer runs; the `strata cluster` command): tries each endpoint in turn. 0 and, when
 *  reply is not NULL, the parsed reply in *reply (json_decref it); or a code with the
 *  words in err. */
int etcd_call_sync(struct etcd *e, const char *path, json_t *body, json_t **reply, char *err, size_t errlen);
/** Calls in flight. */
unsigned etcd_inflight(const struct etcd *e);
/** The endpoint the next call goes to, "HOST:PORT". */
const char *etcd_endpoint(const struct etcd *e);

/** A JSON string of the base64 of p[0..n), or NULL (out of memory). */
json_t *etcd_b64(const void *p, size_t n);
/** Decode the base64 string member name of o into out (reset first); 0, or STRATA_EINVAL
 *  when it is missing or not base64. */
int etcd_unb64(const json_t *o, const char *name, struct buf *out);
/** An int64 member of o that the gateway writes as a decimal string ("123") or a number;
 *  def when missing or malformed. */
int64_t etcd_int(const json_t *o, const char *name, int64_t def);
/** The range end that makes a range of every key beginning with prefix (prefix with its
 *  last byte that is not 0xff incremented), into out. */
int etcd_prefix_end(const char *prefix, size_t n, struct buf *out);

#endif /* STRATA_ETCD_H */
