/*
 * http.h — an HTTP/1.1 server on a libev loop (requests parsed with http_parser).
 *
 * Keep-alive, pipelining (one request handled at a time per connection, responses
 * in request order), chunked request bodies, Expect: 100-continue, and explicit
 * limits: header bytes, body bytes, open connections, and timeouts for a slow
 * first request or header block (header_timeout), a slow body (body_timeout),
 * an idle keep-alive connection (idle_timeout) and a client that stops reading
 * (send_timeout). Responses are queued and written without blocking the loop; a
 * handler may answer later (after work on other threads) or stream a chunked body.
 *
 * Every function here runs on the loop thread.
 */
#ifndef STRATA_HTTP_H
#define STRATA_HTTP_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"

struct http_server;
struct http_conn;

/** Largest status code counted per code in the statistics. */
#define HTTP_MAX_STATUS 600
/** Bytes of output queued on a connection above which a streamed response waits
 *  (http_stream_on_drain) and pipelined requests are not parsed further. */
#define HTTP_OUT_HIGH (1u << 20)
/** Queued bytes at or below which a waiting stream is resumed. */
#define HTTP_OUT_LOW (256u << 10)
/** How long a connection closed by the server keeps reading (and dropping) what the
 *  client still sends, so the client sees the response rather than a reset. */
#define HTTP_LINGER_MS 2000u
/** Largest Content-Type or Authorization value kept; longer ones are truncated. */
#define HTTP_MAX_KEPT_HEADER 1024u
/** Times a handler may mark on a request (http_req.mark_ns). */
#define HTTP_MARKS 6

/** One request. Owned by its connection; valid from on_headers until the handler
 *  finished it with http_respond, http_stream_end or http_stream_abort (and, for the
 *  marks and times read by on_sent, until on_sent returns). */
struct http_req {
	/** Connection it arrived on (private). */
	struct http_conn *conn;
	/** enum http_method of http_parser.h (HTTP_GET, HTTP_POST, ...). */
	int method;
	/** HTTP minor version (1.0 or 1.1). */
	int http_minor;
	/** Request target as received, NUL-terminated. */
	struct buf url;
	/** Path part of the target (not decoded), into url; path_len bytes. */
	const char *path;
	/** Length of path. */
	size_t path_len;
	/** Query part after '?' (not decoded), into url, or NULL. */
	const char *query;
	/** Length of query. */
	size_t query_len;
	/** Content-Type header value (NUL-terminated; "" when absent). */
	char content_type[HTTP_MAX_KEPT_HEADER];
	/** Authorization header value (NUL-terminated; "" when absent). */
	char authorization[HTTP_MAX_KEPT_HEADER];
	/** Authorization header was longer than HTTP_MAX_KEPT_HEADER. */
	int authorization_truncated;
	/** The client sent Expect: 100-continue. */
	int expect_continue;
	/** Declared Content-Length, or UINT64_MAX when none (chunked or no body). */
	uint64_t content_length;
	/** The request body (complete when on_request runs). */
	struct buf body;
	/** Monotonic time the first byte of the request was parsed, ns. */
	uint64_t start_ns;
	/** Monotonic time the whole request, body included, was parsed, ns. */
	uint64_t complete_ns;
	/** Times the handler marks on the request's way, ns (what each means is the
	 *  handler's; 0: not marked); kept until on_sent has run. */
	uint64_t mark_ns[HTTP_MARKS];
	/** Monotonic time the response began to be queued (http_respond, http_stream_begin), ns. */
	uint64_t respond_ns;
	/** Monotonic time the last byte of the response went to the kernel, ns (set just
	 *  before on_sent; when the next request on the connection started first, the time it
	 *  did). */
	uint64_t sent_ns;
	/** on_sent ran for this request. */
	int sent;
	/** Handler's state for this request. */
	void *udata;
	/** A response has been started (headers queued). */
	int responded;
	/** The response is complete (fully queued). */
	int finished;
	/** Status code of the response. */
	int status;
	/** The response is a chunked stream in progress. */
	int streaming;
	/** The response body is delimited by closing the connection (HTTP/1.0 stream). */
	int close_delimited;
	/** Drop the body as it arrives (an early response was given). */
	int discard_body;
	/** Callback run once queued output drops to HTTP_OUT_LOW or the connection dies. */
	void (*drain_cb)(struct http_req *r, void *arg);
	/** Argument of drain_cb. */
	void *drain_arg;
};

/** Headers of a request are complete: the handler may answer at once (route, method,
 *  auth, Content-Type checks) with http_respond, and the body is then not kept. */
typedef void (*http_headers_fn)(void *ctx, struct http_req *r);
/** A whole request arrived; the handler answers now or later. */
typedef void (*http_request_fn)(void *ctx, struct http_req *r);

/** How to run a server. */
struct http_options {
	/** "host:port" to listen on; port 0 picks a free port. */
	const char *listen;
	/** Connections open at once; more are answered 503 and closed. */
	uint32_t max_connections;
	/** Bytes of request line plus headers. */
	uint32_t max_header_bytes;
	/** Bytes of a request body (decoded from chunked encoding). */
	uint64_t max_body_bytes;
	/** Milliseconds a keep-alive connection may wait between requests. */
	uint32_t idle_timeout_ms;
	/** Milliseconds from a connection's accept (first request) or a request's first
	 *  byte (later ones) until its header block is complete. */
	uint32_t header_timeout_ms;
	/** Milliseconds from the end of the headers until the whole body has arrived. */
	uint32_t body_timeout_ms;
	/** Milliseconds queued output may make no progress before the connection closes. */
	uint32_t send_timeout_ms;
	/** Called when a request's headers are complete (may be NULL). */
	http_headers_fn on_headers;
	/** Called with each complete request. */
	http_request_fn on_request;
	/** Called once a request's whole response has been written to its socket, before the
	 *  request is reset for the next one (may be NULL; not when the connection dies first). */
	http_request_fn on_sent;
	/** Passed to the callbacks. */
	void *ctx;
	/** Only bind the address (which fails when it is in use); connections are refused
	 *  until http_server_start listens and accepts. */
	int bind_only;
};

/** Counters of a server. */
struct http_stats {
	/** Connections open now (including ones waiting for a handler to finish). */
	uint64_t open;
	/** Connections accepted since start. */
	uint64_t accepted;
	/** Connections refused because max_connections were open. */
	uint64_t refused;
	/** Requests fully received. */
	uint64_t requests;
	/** Connections closed by a timeout. */
	uint64_t timeouts;
	/** Requests refused for a malformed message or a limit (4xx from this layer). */
	uint64_t bad_requests;
	/** Responses started, by status code. */
	uint64_t by_status[HTTP_MAX_STATUS];
	/** Of those, the responses of this layer itself (malformed request, limit, timeout,
	 *  connection refused), which no handler saw, by status code. */
	uint64_t own_by_status[HTTP_MAX_STATUS];
};

/** Bind, listen and start accepting. The error (with the address) is in diag. */
int http_server_new(struct ev_loop *loop, const struct http_options *o, struct http_server **out);
/** Listen and accept on a server made with bind_only (no-op otherwise). The error is in
 *  diag. */
int http_server_start(struct http_server *s);
/** "host:port" actually bound (with the real port when 0 was asked). */
const char *http_server_address(const struct http_server *s);
/** Stop accepting and close the listening socket. */
void http_server_stop_accepting(struct http_server *s);
/** Graceful stop: stop accepting, close idle connections, let requests in progress
 *  finish (their responses say Connection: close), then call done once no
 *  connection is left. */
void http_server_drain(struct http_server *s, void (*done)(void *arg), void *arg);
/** Close every connection now (a handler still working keeps its request until it
 *  finishes it). */
void http_server_close_all(struct http_server *s);
/** Copy the counters. */
void http_server_stats(const struct http_server *s, struct http_stats *out);
/** Free the server and every connection. Handlers must not touch their requests after. */
void http_server_delete(struct http_server *s);

/** Whether the client of r is still connected. */
int http_req_alive(const struct http_req *r);
/** Answer r: status, Content-Type (NULL = none), extra header lines (each ending in
 *  "\r\n", or NULL), body. Finishes the request. */
void http_respond(struct http_req *r, int status, const char *content_type, const char *extra_headers,
		  const void *body, size_t len);
/** Answer r with {"error": error, "detail": detail} (detail may be NULL). */
void http_respond_error(struct http_req *r, int status, const char *extra_headers, const char *error,
			const char *detail);
/** Start a streamed response (chunked for HTTP/1.1, close-delimited for 1.0). */
void http_stream_begin(struct http_req *r, int status, const char *content_type);
/** Queue body bytes of a streamed response. STRATA_ECLOSED when the client is gone. */
int http_stream_write(struct http_req *r, const void *p, size_t n);
/** Bytes queued on r's connection and not yet written. */
size_t http_stream_queued(const struct http_req *r);
/** Run cb(r, arg) once the queue drops to HTTP_OUT_LOW (at once, from the loop, if it
 *  already has) or the client goes away. */
void http_stream_on_drain(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg);
/** End a streamed response. Finishes the request. */
void http_stream_end(struct http_req *r);
/** Abandon a streamed response: the connection closes without ending the body, so
 *  the client sees it truncated. Finishes the request. */
void http_stream_abort(struct http_req *r);
/** Words for a status code ("Not Found"). */
const char *http_status_text(int status);

#endif
