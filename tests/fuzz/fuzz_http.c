/*
 * fuzz_http.c — libFuzzer target for the node's HTTP request handling, the whole
 * request-to-response path: the input is sent as raw bytes over a TCP connection to an
 * in-process node (store, policy runtime, API endpoints, HTTP server on one libev loop,
 * as `strata serve` builds them), the write side is shut, and the loop runs until the
 * server closes the connection. Oracles beyond "no crash, leak or sanitizer report":
 *   - the connection ends within FUZZ_HTTP_DEADLINE_MS (timeouts are 500 ms here);
 *   - whatever comes back is a sequence of HTTP responses ("HTTP/1.x NNN ...");
 *   - no response is a 500, 502 or 504: bad input gets a 4xx, never an internal error.
 * The node is rebuilt from an empty store every FUZZ_HTTP_RESET inputs so that what
 * the inputs append does not pile up. Mutating endpoints need "Authorization: Bearer
 * fuzz-token" (the seeds and the dictionary carry it), so auth is exercised too.
 */
#include <arpa/inet.h>
#include <ev.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "../../node/policy/runtime.h"
#include "../../node/server/api.h"
#include "../../node/server/http.h"
#include "../../node/strata.h"
#include "../../node/strata_host.h"
#include "fuzz_util.h"

/** Milliseconds an input may take before the target declares a hang. */
#define FUZZ_HTTP_DEADLINE_MS 5000
/** Inputs between two rebuilds of the node. */
#define FUZZ_HTTP_RESET 256
/** Response bytes kept for the checks (the rest is read and dropped). */
#define FUZZ_HTTP_KEEP (64u << 10)
/** A policy that starts nothing by itself (no timers: runs stay reproducible). */
static const char quiet_policy[] = "return { flush_interval_s = 0, sweep_interval_s = 0 }\n";

/** The node under test. */
static struct {
	/** The store (sync none, in the scratch directory). */
	strata *db;
	/** The loop everything runs on (this thread's). */
	struct ev_loop *loop;
	/** The host on that loop (executors) and the policy runtime on it. */
	struct host *host;
	struct runtime *rt;
	/** The endpoints. */
	struct api *api;
	/** The HTTP server. */
	struct http_server *http;
	/** Server port. */
	int port;
	/** Inputs since the last rebuild. */
	unsigned inputs;
} N;

static void
node_stop(void)
{
	while (N.host != NULL && pool_pending(host_exec(N.host, HOST_FG)) > 0)
		host_drain(N.host, HOST_FG);
	if (N.rt != NULL)
		runtime_delete(N.rt);
	http_server_delete(N.http);
	api_delete(N.api);
	strata_close(N.db);
	host_delete(N.host);
	if (N.loop != NULL)
		ev_loop_destroy(N.loop);
	memset(&N, 0, sizeof(N));
}

static void
node_start(void)
{
	const char *dir = fuzz_dir("http");
	fuzz_clean(dir, 0);
	strata_options so;
	strata_options_init(&so);
	so.dir = dir;
	so.shards = 2;
	so.sync = STRATA_SYNC_NONE;
	so.max_value_bytes = 1u << 20;
	if (strata_open(&so, &N.db) != 0)
		FUZZ_FAIL("strata_open %s: %s", dir, strata_last_error());
	N.loop = ev_loop_new(EVFLAG_AUTO);
	if (N.loop == NULL)
		FUZZ_FAIL("ev_loop_new");
	struct host_options hopt = {.mode = HOST_THREADED, .loop = N.loop};
	if (host_new(&hopt, &N.host) != 0)
		FUZZ_FAIL("host_new: %s", strata_last_error());
	struct runtime_options ro = {
		.db = strata_store(N.db), .host = N.host, .policy_path = "fuzz-policy.lua",
		.policy_source = quiet_policy,
	};
	if (runtime_new(&ro, &N.rt) != 0)
		FUZZ_FAIL("runtime_new: %s", strata_last_error());
	struct api_options ao = {.db = N.db, .rt = N.rt, .host = N.host, .token = "fuzz-token"};
	if (api_new(&ao, &N.api) != 0)
		FUZZ_FAIL("api_new: %s", diag_last());
	struct http_options ho = {
		.listen = "127.0.0.1:0",
		.max_connections = 16,
		.max_header_bytes = 16u << 10,
		.max_body_bytes = 1u << 20,
		.idle_timeout_ms = 500,
		.header_timeout_ms = 500,
		.body_timeout_ms = 500,
		.send_timeout_ms = 500,
		.on_headers = api_on_headers,
		.on_request = api_on_request,
		.ctx = N.api,
	};
	if (http_server_new(N.loop, &ho, &N.http) != 0)
		FUZZ_FAIL("http_server_new: %s", diag_last());
	N.api->http = N.http;
	const char *addr = http_server_address(N.http);
	const char *colon = strrchr(addr, ':');
	N.port = colon ? atoi(colon + 1) : 0;
	if (N.port <= 0)
		FUZZ_FAIL("bad server address %s", addr);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/** What came back on the connection. */
struct reply {
	/** First FUZZ_HTTP_KEEP bytes. */
	char buf[FUZZ_HTTP_KEEP];
	size_t len;
	/** All bytes received. */
	uint64_t total;
};

/** Check every status line found at the start of a response in the kept bytes. */
static void
check_reply(const struct reply *r, const uint8_t *data, size_t size)
{
	if (getenv("FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "--- %zu bytes in, %llu bytes out:\n%.*s\n", size,
			(unsigned long long)r->total, (int)(r->len < 600 ? r->len : 600), r->buf);
	if (r->len == 0)
		return; /* closed without answering (e.g. an empty input) */
	if (r->len < 12 || (memcmp(r->buf, "HTTP/1.1 ", 9) != 0 && memcmp(r->buf, "HTTP/1.0 ", 9) != 0))
		FUZZ_FAIL("the reply does not start with a status line: %.40s", r->buf);
	for (size_t i = 0; i + 12 <= r->len; i++) {
		if (memcmp(r->buf + i, "HTTP/1.", 7) != 0 || (i > 0 && r->buf[i - 1] != '\n'))
			continue;
		int status = atoi(r->buf + i + 9);
		if (status == 500 || status == 502 || status == 504) {
			const char *body = strstr(r->buf + i, "\r\n\r\n");
			FUZZ_FAIL("status %d for a %zu-byte input: %.300s", status, size,
				  body ? body + 4 : r->buf + i);
		}
	}
	(void)data;
}

/** Called from the loop when the client socket is readable. */
static void
client_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (N.db == NULL || N.inputs >= FUZZ_HTTP_RESET)
		node_stop(), node_start();
	N.inputs++;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		FUZZ_FAIL("socket: %s", strerror(errno));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)N.port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Non-blocking connect: libFuzzer's SIGALRM may interrupt any blocking call. The
	 * loop accepts the connection while we wait for it to complete. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (errno != EINPROGRESS && errno != EINTR)
			FUZZ_FAIL("connect: %s", strerror(errno));
		uint64_t until = now_ms() + FUZZ_HTTP_DEADLINE_MS;
		for (;;) {
			struct pollfd pf = {fd, POLLOUT, 0};
			if (poll(&pf, 1, 0) == 1)
				break;
			if (now_ms() > until)
				FUZZ_FAIL("connect to 127.0.0.1:%d did not complete", N.port);
			ev_run(N.loop, EVRUN_NOWAIT);
			usleep(100);
		}
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0)
			FUZZ_FAIL("connect: %s", strerror(soerr));
	}
	ev_io cw;
	ev_io_init(&cw, client_cb, fd, EV_READ);
	ev_io_start(N.loop, &cw);
	static struct reply r;
	r.len = 0;
	r.total = 0;
	size_t sent = 0;
	int shut = 0, done = 0;
	uint64_t deadline = now_ms() + FUZZ_HTTP_DEADLINE_MS;
	while (!done) {
		if (sent < size) {
			ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				sent = size; /* the server closed its side: stop sending */
		}
		if (sent == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		for (;;) {
			char tmp[16384];
			ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
			if (n > 0) {
				size_t keep = r.len + (size_t)n <= sizeof(r.buf) ? (size_t)n : sizeof(r.buf) - r.len;
				memcpy(r.buf + r.len, tmp, keep);
				r.len += keep;
				r.total += (uint64_t)n;
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
				done = 1;
			break;
		}
		if (done)
			break;
		if (now_ms() > deadline)
			FUZZ_FAIL("the connection did not end within %d ms (%zu of %zu bytes sent, %llu "
				  "received)", FUZZ_HTTP_DEADLINE_MS, sent, size, (unsigned long long)r.total);
		/* Sleep in the loop until the server, the pool or the client has news. */
		ev_run(N.loop, sent < size ? EVRUN_NOWAIT : EVRUN_ONCE);
	}
	ev_io_stop(N.loop, &cw);
	close(fd);
	/* Let the server notice the close and finish any job before the next input. */
	uint64_t settle = now_ms() + FUZZ_HTTP_DEADLINE_MS;
	for (;;) {
		struct http_stats st;
		http_server_stats(N.http, &st);
		if (st.open == 0 && N.api->jobs == 0)
			break;
		if (now_ms() > settle)
			FUZZ_FAIL("the server kept %llu connections and %llu jobs %d ms after the client "
				  "closed", (unsigned long long)st.open, (unsigned long long)N.api->jobs,
				  FUZZ_HTTP_DEADLINE_MS);
		ev_run(N.loop, EVRUN_ONCE);
	}
	check_reply(&r, data, size);
	return 0;
}
