#include "http.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../strata.h"

/** Bytes read from a socket per read call. */
#define HTTP_READ_CHUNK (64u << 10)
/** Connections accepted per wakeup of the listening socket. */
#define HTTP_ACCEPT_BATCH 64
/** Pause of the accept watcher after running out of file descriptors, seconds. */
#define HTTP_ACCEPT_RETRY_S 0.1
/** Listen backlog. */
#define HTTP_BACKLOG 1024

/** Where a connection is in reading its current request. */
enum http_phase {
	/** No byte of the next request parsed yet. */
	HTTP_PH_IDLE,
	/** Request line and headers arriving. */
	HTTP_PH_HEADERS,
	/** Body arriving. */
	HTTP_PH_BODY,
	/** Whole request parsed (the parser is paused). */
	HTTP_PH_COMPLETE,
};

/** One client connection. */
struct http_conn {
	/** Owning server. */
	struct http_server *srv;
	/** Socket, -1 once closed. */
	int fd;
	/** Readable watcher. */
	ev_io rio;
	/** Writable watcher; also fed to run deferred work ("kick"). */
	ev_io wio;
	/** The single deadline watcher (phase timeouts, send timeout, linger). */
	ev_timer timer;
	/** Request parser. */
	http_parser parser;
	/** Bytes read and not yet parsed start at in.data + in_off. */
	struct buf in;
	/** Parsed prefix of in. */
	size_t in_off;
	/** Bytes queued for the client start at out.data + out_off. */
	struct buf out;
	/** Written prefix of out. */
	size_t out_off;
	/** The current request. */
	struct http_req req;
	/** enum http_phase of req. */
	int phase;
	/** No request has started on this connection yet. */
	int first;
	/** rio is started. */
	int reading;
	/** Close after the current request's response. */
	int close_after;
	/** No more requests are parsed; close once the output is written. */
	int closing;
	/** Close without lingering once the output is written (aborted stream, timeout). */
	int abort_close;
	/** Write side shut down; discarding input until EOF or the linger deadline. */
	int lingering;
	/** Socket closed while a handler held the request; freed when it finishes. */
	int dead;
	/** req is with the handler (between on_request and its finish). */
	int in_handler;
	/** Status of an error found inside a parser callback (0 = none). */
	int cb_status;
	/** Error words of cb_status. */
	const char *cb_error;
	/** Detail of cb_status. */
	char cb_detail[160];
	/** Body bytes received for req. */
	uint64_t body_bytes;
	/** Accept time, ns. */
	uint64_t accept_ns;
	/** When the connection last became idle between requests, ns. */
	uint64_t idle_since_ns;
	/** Deadline of the header block of req, ns. */
	uint64_t header_deadline_ns;
	/** Deadline of the body of req, ns. */
	uint64_t body_deadline_ns;
	/** Last time output made progress (or was first queued), ns. */
	uint64_t progress_ns;
	/** Linger deadline, ns. */
	uint64_t linger_deadline_ns;
	/** Header field being accumulated. */
	struct buf hfield;
	/** Header value being accumulated. */
	struct buf hvalue;
	/** The parser last delivered header value bytes. */
	int hlast_value;
	/** Neighbours in the server's connection list. */
	struct http_conn *prev, *next;
};

struct http_server {
	/** Loop everything runs on. */
	struct ev_loop *loop;
	/** Options (listen string not kept). */
	struct http_options o;
	/** Listening socket, -1 once closed. */
	int lfd;
	/** Accept watcher. */
	ev_io accept_io;
	/** Re-arms accept_io after EMFILE. */
	ev_timer accept_retry;
	/** Bound address, "host:port". */
	char address[128];
	/** Open connections. */
	struct http_conn *conns;
	/** Counters. */
	struct http_stats st;
	/** Draining: no new connections, close after each current request. */
	int draining;
	/** Called once draining left no connection. */
	void (*drain_done)(void *arg);
	/** Argument of drain_done. */
	void *drain_arg;
	/** Parser callbacks. */
	http_parser_settings settings;
	/** Second of the wall clock date_line was formatted for. */
	int64_t date_sec;
	/** "Date: <IMF-fixdate>\r\n" of date_sec. */
	char date_line[48];
};

static void conn_process(struct http_conn *c);
static void conn_close(struct http_conn *c);
static void conn_update(struct http_conn *c);

static uint64_t
http_now(void)
{
	return env.mono_ns();
}

static uint64_t
ms_ns(uint32_t ms)
{
	return (uint64_t)ms * 1000000ull;
}

const char *
http_status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Payload Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 421: return "Misdirected Request";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	case 507: return "Insufficient Storage";
	default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
	}
}

/* ---------- output ---------- */

static size_t
conn_queued(const struct http_conn *c)
{
	return c->out.len - c->out_off;
}

static int
conn_queue(struct http_conn *c, const void *p, size_t n)
{
	if (c->out_off > 0 && c->out_off == c->out.len) {
		c->out_off = 0;
		c->out.len = 0;
	} else if (c->out_off >= (64u << 10) && c->out_off * 2 >= c->out.len) {
		memmove(c->out.data, c->out.data + c->out_off, c->out.len - c->out_off);
		c->out.len -= c->out_off;
		c->out_off = 0;
	}
	if (conn_queued(c) == 0)
		c->progress_ns = http_now();
	return buf_append(&c->out, p, n);
}

static int
conn_queuef(struct http_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
conn_queuef(struct http_conn *c, const char *fmt, ...)
{
	char tmp[2048];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return STRATA_EINVAL;
	return conn_queue(c, tmp, (size_t)n);
}

/** Write what can be written now. 0, or -1 when the connection failed (closed). */
static int
conn_flush(struct http_conn *c)
{
	while (conn_queued(c) > 0) {
		ssize_t n = send(c->fd, c->out.data + c->out_off, conn_queued(c), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c->out_off += (size_t)n;
			c->progress_ns = http_now();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!ev_is_active(&c->wio))
				ev_io_start(c->srv->loop, &c->wio);
			return 0;
		}
		conn_close(c);
		return -1;
	}
	c->out_off = c->out.len = 0;
	if (c->out.cap > (4u << 20)) {
		buf_destroy(&c->out);
	}
	if (ev_is_active(&c->wio))
		ev_io_stop(c->srv->loop, &c->wio);
	return 0;
}

/** Run the connection's deferred work from the loop (flush, parse on). */
static void
conn_kick(struct http_conn *c)
{
	ev_feed_event(c->srv->loop, &c->wio, EV_WRITE);
}

/** A JSON error body; invalid UTF-8 in detail is replaced by '?'. Caller frees. */
static char *
http_error_json(const char *error, const char *detail)
{
	json_t *o = json_object();
	json_object_set_new(o, "error", json_string(error ? error : "error"));
	if (detail != NULL) {
		json_t *d = json_string(detail);
		if (d == NULL) {
			char clean[1024];
			size_t i = 0;
			for (; detail[i] && i < sizeof(clean) - 1; i++)
				clean[i] = (unsigned char)detail[i] < 0x80 ? detail[i] : '?';
			clean[i] = '\0';
			d = json_string(clean);
		}
		json_object_set_new(o, "detail", d ? d : json_string(""));
	}
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s != NULL) {
		size_t n = strlen(s);
		char *t = realloc(s, n + 2);
		if (t != NULL) {
			t[n] = '\n';
			t[n + 1] = '\0';
			s = t;
		}
	}
	return s;
}

static void
http_count_status(struct http_server *s, int status)
{
	if (status >= 0 && status < HTTP_MAX_STATUS)
		s->st.by_status[status]++;
}

/** A response of this layer itself (no handler saw the request), by status. */
static void
http_count_own(struct http_server *s, int status)
{
	http_count_status(s, status);
	if (status >= 0 && status < HTTP_MAX_STATUS)
		s->st.own_by_status[status]++;
}

/** "Date: ...\r\n" for a response sent now (RFC 7231 IMF-fixdate), formatted once a second. */
static const char *
http_date(struct http_server *s)
{
	int64_t sec = (int64_t)(env.wall_ns() / 1000000000ull);
	if (sec != s->date_sec || s->date_line[0] == '\0') {
		static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
		static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
						   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
		time_t t = (time_t)sec;
		struct tm tm;
		gmtime_r(&t, &tm);
		snprintf(s->date_line, sizeof(s->date_line), "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n",
			 days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour,
			 tm.tm_min, tm.tm_sec);
		s->date_sec = sec;
	}
	return s->date_line;
}

/** Queue a response of the HTTP layer itself (malformed request, limit, timeout) and
 *  stop reading requests on this connection. */
static void
conn_fail(struct http_conn *c, int status, const char *error, const char *detail)
{
	c->srv->st.bad_requests++;
	c->closing = 1;
	c->close_after = 1;
	if (c->req.responded || c->in_handler)
		return;
	char *body = http_error_json(error, detail);
	size_t len = body ? strlen(body) : 0;
	conn_queuef(c,
		    "HTTP/1.1 %d %s\r\nServer: strata/" STRATA_VERSION "\r\n%sContent-Type: application/json\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		    status, http_status_text(status), http_date(c->srv), len);
	if (body)
		conn_queue(c, body, len);
	free(body);
	http_count_own(c->srv, status);
	c->req.responded = c->req.finished = 1;
	c->req.status = status;
}

/* ---------- request state ---------- */

static void
req_reset(struct http_req *r)
{
	buf_reset(&r->url);
	if (r->body.cap > (1u << 20))
		buf_destroy(&r->body);
	buf_reset(&r->body);
	r->method = 0;
	r->http_minor = 1;
	r->path = r->query = NULL;
	r->path_len = r->query_len = 0;
	r->content_type[0] = r->authorization[0] = '\0';
	r->authorization_truncated = 0;
	r->expect_continue = 0;
	r->content_length = UINT64_MAX;
	r->start_ns = r->complete_ns = r->respond_ns = r->sent_ns = 0;
	memset(r->mark_ns, 0, sizeof(r->mark_ns));
	r->sent = 0;
	r->udata = NULL;
	r->responded = r->finished = r->streaming = r->close_delimited = r->discard_body = 0;
	r->status = 0;
	r->drain_cb = NULL;
	r->drain_arg = NULL;
}

static void
conn_keep_header(struct http_conn *c)
{
	struct http_req *r = &c->req;
	const char *f = (const char *)c->hfield.data;
	size_t fl = c->hfield.len, vl = c->hvalue.len;
	const char *v = (const char *)c->hvalue.data;
	char *dst = NULL;
	if (fl == 12 && strncasecmp(f, "content-type", 12) == 0)
		dst = r->content_type;
	else if (fl == 13 && strncasecmp(f, "authorization", 13) == 0) {
		dst = r->authorization;
		if (vl >= HTTP_MAX_KEPT_HEADER)
			r->authorization_truncated = 1;
	} else if (fl == 6 && strncasecmp(f, "expect", 6) == 0) {
		if (vl == 12 && strncasecmp(v, "100-continue", 12) == 0)
			r->expect_continue = 1;
	}
	if (dst != NULL) {
		size_t n = vl < HTTP_MAX_KEPT_HEADER - 1 ? vl : HTTP_MAX_KEPT_HEADER - 1;
		if (n)
			memcpy(dst, v, n);
		dst[n] = '\0';
	}
	buf_reset(&c->hfield);
	buf_reset(&c->hvalue);
	c->hlast_value = 0;
}

static int
cb_error(struct http_conn *c, int status, const char *error, const char *detail)
{
	c->cb_status = status;
	c->cb_error = error;
	snprintf(c->cb_detail, sizeof(c->cb_detail), "%s", detail);
	return -1;
}

static int
on_message_begin(http_parser *p)
{
	struct http_conn *c = p->data;
	req_reset(&c->req);
	uint64_t now = http_now();
	c->req.start_ns = now;
	c->header_deadline_ns = (c->first ? c->accept_ns : now) + ms_ns(c->srv->o.header_timeout_ms);
	c->first = 0;
	c->phase = HTTP_PH_HEADERS;
	c->body_bytes = 0;
	buf_reset(&c->hfield);
	buf_reset(&c->hvalue);
	c->hlast_value = 0;
	return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	if (buf_append(&c->req.url, at, len))
		return cb_error(c, 503, "out of memory", "request target");
	return 0;
}

static int
on_header_field(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	if (c->hlast_value)
		conn_keep_header(c);
	if (buf_append(&c->hfield, at, len))
		return cb_error(c, 503, "out of memory", "request headers");
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	c->hlast_value = 1;
	if (buf_append(&c->hvalue, at, len))
		return cb_error(c, 503, "out of memory", "request headers");
	return 0;
}

/** Split the request target into path and query. 0, or -1 when it has no path. */
static int
req_split_url(struct http_req *r)
{
	if (buf_put_u8(&r->url, 0))
		return -1;
	r->url.len--;
	const char *u = (const char *)r->url.data;
	size_t n = r->url.len;
	if (n == 0)
		return -1;
	if (u[0] != '/') {
		struct http_parser_url pu;
		http_parser_url_init(&pu);
		if (http_parser_parse_url(u, n, 0, &pu) != 0 || !(pu.field_set & (1 << UF_PATH)))
			return -1;
		r->path = u + pu.field_data[UF_PATH].off;
		r->path_len = pu.field_data[UF_PATH].len;
		if (pu.field_set & (1 << UF_QUERY)) {
			r->query = u + pu.field_data[UF_QUERY].off;
			r->query_len = pu.field_data[UF_QUERY].len;
		}
		return 0;
	}
	const char *q = memchr(u, '?', n);
	const char *h = memchr(u, '#', n);
	size_t end = h ? (size_t)(h - u) : n;
	if (q != NULL && (size_t)(q - u) < end) {
		r->path = u;
		r->path_len = (size_t)(q - u);
		r->query = q + 1;
		r->query_len = end - r->path_len - 1;
	} else {
		r->path = u;
		r->path_len = end;
	}
	return 0;
}

static int
on_headers_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	struct http_server *s = c->srv;
	struct http_req *r = &c->req;
	if (c->hfield.len > 0 || c->hlast_value)
		conn_keep_header(c);
	r->method = p->method;
	r->http_minor = p->http_major == 1 ? p->http_minor : 0;
	if (p->http_major != 1)
		return cb_error(c, 505, "http version not supported", "only HTTP/1.0 and HTTP/1.1 are served");
	if (p->upgrade || p->method == HTTP_CONNECT)
		return cb_error(c, 501, "not implemented", "protocol upgrades and CONNECT are not supported");
	if (req_split_url(r) != 0)
		return cb_error(c, 400, "malformed request", "request target has no path");
	if ((p->flags & F_CHUNKED) == 0 && p->content_length != ULLONG_MAX)
		r->content_length = p->content_length;
	if (r->content_length != UINT64_MAX && r->content_length > s->o.max_body_bytes) {
		char d[160];
		snprintf(d, sizeof(d), "body of %llu bytes is over the limit of %llu bytes",
			 (unsigned long long)r->content_length, (unsigned long long)s->o.max_body_bytes);
		return cb_error(c, 413, "body too large", d);
	}
	c->phase = HTTP_PH_BODY;
	c->body_deadline_ns = http_now() + ms_ns(s->o.body_timeout_ms);
	/* The client's Connection: close (or an HTTP/1.0 request without keep-alive) holds
	 * for an answer given from the headers too. */
	if (!http_should_keep_alive(p))
		c->close_after = 1;
	int was_close = c->close_after;
	if (r->expect_continue)
		c->close_after = 1;
	if (s->o.on_headers != NULL)
		s->o.on_headers(s->o.ctx, r);
	if (r->responded) {
		r->discard_body = 1;
		if (r->expect_continue) {
			http_parser_pause(p, 1);
			c->closing = 1;
		}
		return 0;
	}
	c->close_after = was_close;
	if (r->content_length != UINT64_MAX && r->content_length > 0 &&
	    buf_reserve(&r->body, (size_t)r->content_length))
		return cb_error(c, 503, "out of memory", "request body");
	if (r->expect_continue && r->http_minor >= 1)
		conn_queue(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	struct http_req *r = &c->req;
	c->body_bytes += len;
	if (c->body_bytes > c->srv->o.max_body_bytes) {
		char d[160];
		snprintf(d, sizeof(d), "body is over the limit of %llu bytes",
			 (unsigned long long)c->srv->o.max_body_bytes);
		return cb_error(c, 413, "body too large", d);
	}
	if (r->discard_body)
		return 0;
	if (buf_append(&r->body, at, len))
		return cb_error(c, 503, "out of memory", "request body");
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	c->phase = HTTP_PH_COMPLETE;
	c->req.complete_ns = http_now();
	c->srv->st.requests++;
	if (!http_should_keep_alive(p))
		c->close_after = 1;
	http_parser_pause(p, 1);
	return 0;
}

/* ---------- connection lifecycle ---------- */

static void
conn_free(struct http_conn *c)
{
	struct http_server *s = c->srv;
	ev_io_stop(s->loop, &c->rio);
	ev_io_stop(s->loop, &c->wio);
	ev_timer_stop(s->loop, &c->timer);
	if (c->fd >= 0)
		close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	buf_destroy(&c->in);
	buf_destroy(&c->out);
	buf_destroy(&c->req.url);
	buf_destroy(&c->req.body);
	buf_destroy(&c->hfield);
	buf_destroy(&c->hvalue);
	env.free(c);
	s->st.open--;
	if (s->draining && s->st.open == 0 && s->drain_done != NULL) {
		void (*done)(void *) = s->drain_done;
		s->drain_done = NULL;
		done(s->drain_arg);
	}
}

static void
conn_close(struct http_conn *c)
{
	if (c->dead)
		return;
	struct http_server *s = c->srv;
	if (!c->in_handler) {
		conn_free(c);
		return;
	}
	ev_io_stop(s->loop, &c->rio);
	ev_io_stop(s->loop, &c->wio);
	ev_timer_stop(s->loop, &c->timer);
	c->reading = 0;
	close(c->fd);
	c->fd = -1;
	c->dead = 1;
	buf_destroy(&c->in);
	buf_destroy(&c->out);
	c->in_off = c->out_off = 0;
	if (c->req.drain_cb != NULL)
		conn_kick(c);
}

/** The handler (or an early response) finished the request: run the rest from the loop. */
static void
conn_finished(struct http_conn *c)
{
	if (c->dead) {
		c->in_handler = 0;
		conn_free(c);
		return;
	}
	c->in_handler = 0;
	conn_kick(c);
}

/** Shut the write side and keep reading until EOF or the linger deadline. 0, or -1
 *  when the connection was closed (and freed) instead. */
static int
conn_start_linger(struct http_conn *c)
{
	if (shutdown(c->fd, SHUT_WR) != 0) {
		conn_close(c);
		return -1;
	}
	c->lingering = 1;
	c->linger_deadline_ns = http_now() + ms_ns(HTTP_LINGER_MS);
	return 0;
}

/** The finished request's response is written (or the next request starts before it
 *  is): tell on_sent, once. */
static void
conn_sent(struct http_conn *c)
{
	struct http_req *r = &c->req;
	if (r->sent || !r->finished)
		return;
	r->sent = 1;
	r->sent_ns = http_now();
	if (c->srv->o.on_sent != NULL)
		c->srv->o.on_sent(c->srv->o.ctx, r);
}

/** Start the next request on a kept-alive connection. */
static void
conn_next_request(struct http_conn *c)
{
	conn_sent(c);
	req_reset(&c->req);
	c->phase = HTTP_PH_IDLE;
	c->idle_since_ns = http_now();
	http_parser_pause(&c->parser, 0);
}

/** Feed buffered input to the parser until a request completes or input runs out. */
static void
conn_parse(struct http_conn *c)
{
	struct http_server *s = c->srv;
	const char *data = (const char *)c->in.data + c->in_off;
	size_t len = c->in.len - c->in_off;
	c->cb_status = 0;
	size_t n = http_parser_execute(&c->parser, &s->settings, data, len);
	enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
	if (e == HPE_PAUSED) {
		c->in_off += n;
	} else if (e != HPE_OK) {
		c->in_off = c->in.len;
		if (c->cb_status != 0)
			conn_fail(c, c->cb_status, c->cb_error, c->cb_detail);
		else if (e == HPE_HEADER_OVERFLOW) {
			char d[160];
			snprintf(d, sizeof(d), "request line and headers are over the limit of %u bytes",
				 s->o.max_header_bytes);
			conn_fail(c, 431, "headers too large", d);
		} else if (e == HPE_CLOSED_CONNECTION) {
			c->closing = 1;
		} else {
			char d[200];
			snprintf(d, sizeof(d), "%s: %s", http_errno_name(e), http_errno_description(e));
			conn_fail(c, 400, "malformed request", d);
		}
	} else {
		c->in_off += n;
		if (c->in_off < c->in.len) {
			c->in_off = c->in.len;
			conn_fail(c, 400, "malformed request", "unparsed bytes after the message");
		}
	}
	if (c->in_off == c->in.len)
		c->in_off = c->in.len = 0;
}

/** Advance the connection: flush, hand a complete request over, parse further,
 *  close or linger, and set the watchers and deadline to match. */
static void
conn_process(struct http_conn *c)
{
	struct http_server *s = c->srv;
	for (;;) {
		if (c->dead || c->lingering)
			return;
		if (conn_flush(c) != 0)
			return;
		if (c->in_handler)
			break;
		if (s->draining)
			c->close_after = 1;
		if (c->phase == HTTP_PH_COMPLETE && c->req.finished && conn_queued(c) == 0)
			conn_sent(c);
		if (c->phase == HTTP_PH_COMPLETE && !c->closing) {
			if (!c->req.finished) {
				c->in_handler = 1;
				conn_update(c);
				s->o.on_request(s->o.ctx, &c->req);
				return;
			}
			if (c->close_after) {
				c->closing = 1;
			} else {
				conn_next_request(c);
				continue;
			}
		}
		if (!c->closing && c->close_after && c->phase == HTTP_PH_IDLE)
			c->closing = 1;
		if (c->closing) {
			if (conn_queued(c) == 0) {
				if (c->abort_close) {
					conn_close(c);
					return;
				}
				if (conn_start_linger(c) != 0)
					return;
				break;
			}
			break;
		}
		if (conn_queued(c) > HTTP_OUT_HIGH)
			break;
		if (c->in_off < c->in.len) {
			conn_parse(c);
			continue;
		}
		break;
	}
	conn_update(c);
}

/** Start or stop reading and set the deadline timer for the current state. */
static void
conn_update(struct http_conn *c)
{
	struct http_server *s = c->srv;
	if (c->dead)
		return;
	int want_read = c->lingering ||
			(!c->in_handler && !c->closing && c->phase != HTTP_PH_COMPLETE &&
			 conn_queued(c) <= HTTP_OUT_HIGH);
	if (want_read && !c->reading) {
		ev_io_start(s->loop, &c->rio);
		c->reading = 1;
	} else if (!want_read && c->reading) {
		ev_io_stop(s->loop, &c->rio);
		c->reading = 0;
	}
	uint64_t deadline = UINT64_MAX;
	if (c->lingering) {
		deadline = c->linger_deadline_ns;
	} else {
		if (conn_queued(c) > 0)
			deadline = c->progress_ns + ms_ns(s->o.send_timeout_ms);
		if (!c->in_handler && !c->closing) {
			uint64_t d = UINT64_MAX;
			if (c->phase == HTTP_PH_IDLE)
				d = c->first ? c->accept_ns + ms_ns(s->o.header_timeout_ms)
					     : c->idle_since_ns + ms_ns(s->o.idle_timeout_ms);
			else if (c->phase == HTTP_PH_HEADERS)
				d = c->header_deadline_ns;
			else if (c->phase == HTTP_PH_BODY)
				d = c->body_deadline_ns;
			if (d < deadline)
				deadline = d;
		}
	}
	ev_timer_stop(s->loop, &c->timer);
	if (deadline == UINT64_MAX)
		return;
	uint64_t now = http_now();
	double after = deadline > now ? (double)(deadline - now) / 1e9 : 0.0;
	ev_timer_set(&c->timer, after + 0.0005, 0.0);
	ev_timer_start(s->loop, &c->timer);
}

static void
conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_conn *c = w->data;
	struct http_server *s = c->srv;
	uint64_t now = http_now();
	if (c->lingering) {
		if (now >= c->linger_deadline_ns) {
			conn_close(c);
			return;
		}
		conn_update(c);
		return;
	}
	if (conn_queued(c) > 0 && now >= c->progress_ns + ms_ns(s->o.send_timeout_ms)) {
		s->st.timeouts++;
		diag_log(LOG_LVL_DEBUG, "http: closing a connection whose client stopped reading");
		conn_close(c);
		return;
	}
	if (!c->in_handler && !c->closing) {
		int expired = 0;
		const char *what = NULL;
		if (c->phase == HTTP_PH_IDLE) {
			uint64_t d = c->first ? c->accept_ns + ms_ns(s->o.header_timeout_ms)
					      : c->idle_since_ns + ms_ns(s->o.idle_timeout_ms);
			expired = now >= d;
		} else if (c->phase == HTTP_PH_HEADERS) {
			expired = now >= c->header_deadline_ns;
			what = "request headers did not arrive in time";
		} else if (c->phase == HTTP_PH_BODY) {
			expired = now >= c->body_deadline_ns;
			what = "request body did not arrive in time";
		}
		if (expired) {
			s->st.timeouts++;
			if (what != NULL) {
				conn_fail(c, 408, "request timeout", what);
				c->abort_close = 1;
				send(c->fd, c->out.data + c->out_off, conn_queued(c), MSG_NOSIGNAL | MSG_DONTWAIT);
			}
			conn_close(c);
			return;
		}
	}
	conn_update(c);
}

static void
conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_conn *c = w->data;
	if (c->lingering) {
		char scratch[16384];
		ssize_t n = recv(c->fd, scratch, sizeof(scratch), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			conn_close(c);
		return;
	}
	if (c->in_off == c->in.len)
		c->in_off = c->in.len = 0;
	if (buf_reserve(&c->in, HTTP_READ_CHUNK)) {
		diag_log(LOG_LVL_WARN, "http: out of memory for a read buffer; closing a connection");
		conn_close(c);
		return;
	}
	ssize_t n = recv(c->fd, c->in.data + c->in.len, HTTP_READ_CHUNK, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->in.len += (size_t)n;
	conn_process(c);
}

static void
conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_conn *c = w->data;
	if (c->dead) {
		void (*cb)(struct http_req *, void *) = c->req.drain_cb;
		if (cb != NULL) {
			c->req.drain_cb = NULL;
			cb(&c->req, c->req.drain_arg);
		}
		return;
	}
	if (c->lingering)
		return;
	if (conn_flush(c) != 0)
		return;
	if (c->in_handler && c->req.drain_cb != NULL && conn_queued(c) <= HTTP_OUT_LOW) {
		void (*cb)(struct http_req *, void *) = c->req.drain_cb;
		c->req.drain_cb = NULL;
		cb(&c->req, c->req.drain_arg);
		return;
	}
	conn_process(c);
}

/* ---------- accepting ---------- */

static void
server_refuse(struct http_server *s, int fd)
{
	static const char body[] = "{\"error\":\"too many connections\",\"detail\":\"the connection limit is reached\"}";
	char resp[512];
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 503 Service Unavailable\r\nServer: strata/" STRATA_VERSION
			 "\r\n%sContent-Type: application/json\r\nContent-Length: %zu\r\nRetry-After: 1\r\n"
			 "Connection: close\r\n\r\n%s",
			 http_date(s), sizeof(body) - 1, body);
	ssize_t w = send(fd, resp, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)w;
	close(fd);
	s->st.refused++;
	http_count_own(s, 503);
}

static void
accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_server *s = w->data;
	for (int i = 0; i < HTTP_ACCEPT_BATCH; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				diag_log(LOG_LVL_WARN, "http: accept: %s; pausing accepts", strerror(errno));
				ev_io_stop(loop, &s->accept_io);
				ev_timer_start(loop, &s->accept_retry);
			}
			return;
		}
		if (s->st.open >= s->o.max_connections) {
			server_refuse(s, fd);
			continue;
		}
		struct http_conn *c = env.calloc(1, sizeof(*c));
		if (c == NULL) {
			server_refuse(s, fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->srv = s;
		c->fd = fd;
		c->first = 1;
		c->accept_ns = c->idle_since_ns = http_now();
		c->phase = HTTP_PH_IDLE;
		req_reset(&c->req);
		c->req.conn = c;
		http_parser_init(&c->parser, HTTP_REQUEST);
		c->parser.data = c;
		ev_io_init(&c->rio, conn_read_cb, fd, EV_READ);
		ev_io_init(&c->wio, conn_write_cb, fd, EV_WRITE);
		ev_init(&c->timer, conn_timer_cb);
		c->rio.data = c->wio.data = c->timer.data = c;
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->st.open++;
		s->st.accepted++;
		conn_update(c);
	}
}

static void
accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_server *s = w->data;
	if (s->lfd >= 0 && !s->draining)
		ev_io_start(loop, &s->accept_io);
}

/** Split "host:port" ("[v6]:port", ":port" = 127.0.0.1). */
static int
split_listen(const char *listen, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon = strrchr(listen, ':');
	if (colon == NULL || colon[1] == '\0')
		return diag_set(STRATA_EINVAL, "listen address '%s' is not host:port", listen);
	const char *h = listen;
	size_t hl = (size_t)(colon - listen);
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl == 0) {
		h = "127.0.0.1";
		hl = strlen(h);
	}
	if (hl >= hostlen || strlen(colon + 1) >= portlen)
		return diag_set(STRATA_EINVAL, "listen address '%s' is too long", listen);
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return diag_set(STRATA_EINVAL, "listen address '%s': port '%s' is not a number", listen,
					port);
	if (atoi(port) > 65535)
		return diag_set(STRATA_EINVAL, "listen address '%s': port over 65535", listen);
	return 0;
}

int
http_server_new(struct ev_loop *loop, const struct http_options *o, struct http_server **out)
{
	*out = NULL;
	char host[256], port[16];
	int rc = split_listen(o->listen ? o->listen : "127.0.0.1:7070", host, sizeof(host), port, sizeof(port));
	if (rc)
		return rc;
	if (o->on_request == NULL || o->max_connections == 0 || o->max_header_bytes < 256)
		return diag_set(STRATA_EINVAL, "http: need a request handler, max_connections >= 1 and "
					       "max_header_bytes >= 256");
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
			*res = NULL;
	int gai = getaddrinfo(host, port, &hints, &res);
	if (gai != 0)
		return diag_set(STRATA_EINVAL, "listen address %s:%s: %s", host, port, gai_strerror(gai));
	int fd = -1, err = 0;
	for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && (o->bind_only || listen(fd, HTTP_BACKLOG) == 0))
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return diag_set(STRATA_EIO, "cannot listen on %s:%s: %s", host, port, strerror(err));
	struct http_server *s = env.calloc(1, sizeof(*s));
	if (s == NULL) {
		close(fd);
		return diag_set(STRATA_ENOMEM, "http: out of memory");
	}
	s->loop = loop;
	s->o = *o;
	s->o.listen = NULL;
	s->lfd = fd;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";
	int bound_port = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
			bound_port = ntohs(a->sin_port);
			snprintf(s->address, sizeof(s->address), "%s:%d", ip, bound_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
			bound_port = ntohs(a->sin6_port);
			snprintf(s->address, sizeof(s->address), "[%s]:%d", ip, bound_port);
		}
	}
	http_parser_settings_init(&s->settings);
	s->settings.on_message_begin = on_message_begin;
	s->settings.on_url = on_url;
	s->settings.on_header_field = on_header_field;
	s->settings.on_header_value = on_header_value;
	s->settings.on_headers_complete = on_headers_complete;
	s->settings.on_body = on_body;
	s->settings.on_message_complete = on_message_complete;
	/* Process-wide in http_parser 2.9: one server per process. */
	http_parser_set_max_header_size(o->max_header_bytes);
	ev_io_init(&s->accept_io, accept_cb, fd, EV_READ);
	s->accept_io.data = s;
	ev_timer_init(&s->accept_retry, accept_retry_cb, HTTP_ACCEPT_RETRY_S, 0.0);
	s->accept_retry.data = s;
	if (!o->bind_only)
		ev_io_start(loop, &s->accept_io);
	*out = s;
	return 0;
}

int
http_server_start(struct http_server *s)
{
	if (!s->o.bind_only)
		return 0;
	if (listen(s->lfd, HTTP_BACKLOG) != 0)
		return diag_set(STRATA_EIO, "cannot listen on %s: %s", s->address, strerror(errno));
	s->o.bind_only = 0;
	ev_io_start(s->loop, &s->accept_io);
	return 0;
}

const char *
http_server_address(const struct http_server *s)
{
	return s->address;
}

void
http_server_stop_accepting(struct http_server *s)
{
	ev_io_stop(s->loop, &s->accept_io);
	ev_timer_stop(s->loop, &s->accept_retry);
	if (s->lfd >= 0) {
		close(s->lfd);
		s->lfd = -1;
	}
}

void
http_server_drain(struct http_server *s, void (*done)(void *arg), void *arg)
{
	http_server_stop_accepting(s);
	s->draining = 1;
	s->drain_done = done;
	s->drain_arg = arg;
	struct http_conn *next;
	for (struct http_conn *c = s->conns; c != NULL; c = next) {
		next = c->next;
		if (c->dead)
			continue;
		c->close_after = 1;
		if (!c->in_handler && c->phase == HTTP_PH_IDLE && conn_queued(c) == 0)
			conn_close(c);
		else if (!c->in_handler)
			conn_kick(c);
	}
	if (s->st.open == 0 && s->drain_done != NULL) {
		s->drain_done = NULL;
		done(arg);
	}
}

void
http_server_close_all(struct http_server *s)
{
	struct http_conn *next;
	for (struct http_conn *c = s->conns; c != NULL; c = next) {
		next = c->next;
		conn_close(c);
	}
}

void
http_server_stats(const struct http_server *s, struct http_stats *out)
{
	*out = s->st;
}

void
http_server_delete(struct http_server *s)
{
	if (s == NULL)
		return;
	http_server_stop_accepting(s);
	s->drain_done = NULL;
	while (s->conns != NULL) {
		s->conns->in_handler = 0;
		conn_free(s->conns);
	}
	env.free(s);
}

/* ---------- responses ---------- */

int
http_req_alive(const struct http_req *r)
{
	return !r->conn->dead;
}

/** "Connection:" header line for a response on c. */
static const char *
conn_header(struct http_conn *c)
{
	if (c->srv->draining)
		c->close_after = 1;
	if (c->close_after)
		return "Connection: close\r\n";
	return c->req.http_minor == 0 ? "Connection: keep-alive\r\n" : "";
}

void
http_respond(struct http_req *r, int status, const char *content_type, const char *extra_headers,
	     const void *body, size_t len)
{
	struct http_conn *c = r->conn;
	assert(!r->finished);
	r->responded = r->finished = 1;
	r->status = status;
	r->respond_ns = http_now();
	http_count_status(c->srv, status);
	if (!c->dead) {
		int rc = conn_queuef(c, "HTTP/1.1 %d %s\r\nServer: strata/" STRATA_VERSION "\r\n%s%s%s%sContent-Length: %zu\r\n%s%s\r\n",
				     status, http_status_text(status), http_date(c->srv), content_type ? "Content-Type: " : "",
				     content_type ? content_type : "", content_type ? "\r\n" : "", len,
				     extra_headers ? extra_headers : "", conn_header(c));
		if (rc == 0 && len > 0 && r->method != HTTP_HEAD)
			rc = conn_queue(c, body, len);
		if (rc != 0) {
			diag_log(LOG_LVL_WARN, "http: out of memory queueing a response; closing the connection");
			c->abort_close = c->closing = 1;
		}
	}
	if (c->in_handler)
		conn_finished(c);
	else if (!c->dead)
		conn_kick(c);
}

void
http_respond_error(struct http_req *r, int status, const char *extra_headers, const char *error,
		   const char *detail)
{
	char *body = http_error_json(error, detail);
	http_respond(r, status, "application/json", extra_headers, body, body ? strlen(body) : 0);
	free(body);
}

void
http_stream_begin(struct http_req *r, int status, const char *content_type)
{
	struct http_conn *c = r->conn;
	assert(!r->responded && c->in_handler);
	r->responded = 1;
	r->streaming = 1;
	r->status = status;
	r->respond_ns = http_now();
	http_count_status(c->srv, status);
	if (c->dead)
		return;
	if (r->http_minor == 0) {
		r->close_delimited = 1;
		c->close_after = 1;
	}
	const char *conn = conn_header(c);
	if (conn_queuef(c, "HTTP/1.1 %d %s\r\nServer: strata/" STRATA_VERSION "\r\n%sContent-Type: %s\r\n%s%s\r\n",
			status, http_status_text(status), http_date(c->srv), content_type,
			r->close_delimited ? "" : "Transfer-Encoding: chunked\r\n", conn) != 0)
		c->abort_close = 1;
	conn_kick(c);
}

int
http_stream_write(struct http_req *r, const void *p, size_t n)
{
	struct http_conn *c = r->conn;
	assert(r->streaming && !r->finished);
	if (c->dead || c->abort_close)
		return diag_set(STRATA_ECLOSED, "http: client went away");
	if (n == 0)
		return 0;
	int rc = 0;
	if (!r->close_delimited)
		rc = conn_queuef(c, "%zx\r\n", n);
	if (rc == 0)
		rc = conn_queue(c, p, n);
	if (rc == 0 && !r->close_delimited)
		rc = conn_queue(c, "\r\n", 2);
	if (rc != 0) {
		c->abort_close = 1;
		return diag_set(STRATA_ENOMEM, "http: out of memory queueing a streamed response");
	}
	conn_kick(c);
	return 0;
}

size_t
http_stream_queued(const struct http_req *r)
{
	return r->conn->dead ? 0 : conn_queued(r->conn);
}

void
http_stream_on_drain(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg)
{
	r->drain_cb = cb;
	r->drain_arg = arg;
	conn_kick(r->conn);
}

void
http_stream_end(struct http_req *r)
{
	struct http_conn *c = r->conn;
	assert(r->streaming && !r->finished);
	r->finished = 1;
	r->drain_cb = NULL;
	if (!c->dead) {
		if (r->close_delimited)
			c->closing = 1;
		else if (conn_queue(c, "0\r\n\r\n", 5) != 0)
			c->abort_close = c->closing = 1;
		if (c->abort_close)
			c->closing = 1;
	}
	conn_finished(c);
}

void
http_stream_abort(struct http_req *r)
{
	struct http_conn *c = r->conn;
	assert(!r->finished);
	r->finished = 1;
	r->drain_cb = NULL;
	if (!c->dead)
		c->abort_close = c->closing = 1;
	conn_finished(c);
}
