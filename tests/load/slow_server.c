/*
 * slow_server.c — a deliberately slow, forgetful HTTP/1.1 server for the specs
 * of `strata load` (tests/spec/load_spec.lua). Test tooling only.
 *
 *   slow_server PORT_FILE [DELAY_MS]
 *
 * Listens on 127.0.0.1 at a free port, writes "127.0.0.1:PORT" into PORT_FILE
 * once listening, and answers every request DELAY_MS milliseconds after it
 * arrived (each connection is served by its own thread, so the delay is per
 * request, not a global queue). Keep-alive is supported.
 *
 * It imitates just enough of a strata node to be driven by load scripts:
 *   POST /v1/shards/N/rows  -> 200 {"appended": rows, "last_seq": s} (rows = NDJSON lines)
 *   GET  /v1/shards/N/rows/K -> 404 {"error": "not found"}   (it keeps nothing: every row is lost)
 *   POST /v1/shards/N/merge-wal -> by N, the answers a node gives a busy shard and others:
 *        0: 200 {"reclaimed": 1, "pending": 0}   1: 429 busy, Retry-After: 2
 *        2: 503 busy, Retry-After: 1             3: 409 conflict
 *        4: 503 out of memory (an error, not busy)
 *   POST /v1/shards/9/rows  -> 409 fenced (an append's 409 is an error, not busy)
 *   anything else           -> 200 "ok"
 * Runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/** Largest request (line, headers and body) accepted. */
#define SLOW_MAX_REQUEST (8u << 20)

/** Delay before each response, milliseconds. */
static long slow_delay_ms;
/** Sequence numbers handed out by appends. */
static uint64_t slow_seq;
/** Guards slow_seq. */
static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;

static int
slow_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void
slow_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

/** Reply; extra is more header lines ("Name: value\r\n"), or "". */
static void
slow_reply_with(int fd, int status, const char *extra, const char *ctype, const char *body, int keep)
{
	char head[512];
	size_t bl = strlen(body);
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\n%sContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n\r\n",
			 status, status == 200 ? "OK" : status == 404 ? "Not Found" : "Other", extra, ctype, bl,
			 keep ? "keep-alive" : "close");
	if (slow_write_all(fd, head, (size_t)n) == 0)
		slow_write_all(fd, body, bl);
}

static void
slow_reply(int fd, int status, const char *ctype, const char *body, int keep)
{
	slow_reply_with(fd, status, "", ctype, body, keep);
}

/** The merge-wal answer of shard N (see the header). */
static void
slow_merge(int fd, long shard, int keep)
{
	const char *j = "application/json";
	switch (shard) {
	case 0:
		slow_reply(fd, 200, j, "{\"reclaimed\":1,\"pending\":0}\n", keep);
		break;
	case 1:
		slow_reply_with(fd, 429, "Retry-After: 2\r\n", j,
				"{\"error\":\"busy\",\"detail\":\"a merge of shard 1 is in progress\"}\n", keep);
		break;
	case 2:
		slow_reply_with(fd, 503, "Retry-After: 1\r\n", j,
				"{\"error\":\"busy\",\"detail\":\"shard 2: busy: a merge is in progress\"}\n", keep);
		break;
	case 3:
		slow_reply(fd, 409, j, "{\"error\":\"conflict\",\"detail\":\"another merge took them\"}\n", keep);
		break;
	default:
		slow_reply(fd, 503, j, "{\"error\":\"out of memory\",\"detail\":\"no memory\"}\n", keep);
		break;
	}
}

/** Serve one connection until it closes. */
static void *
slow_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc(SLOW_MAX_REQUEST);
	size_t len = 0;
	if (buf == NULL) {
		close(fd);
		return NULL;
	}
	for (;;) {
		char *end = NULL;
		while ((end = memmem(buf, len, "\r\n\r\n", 4)) == NULL) {
			if (len == SLOW_MAX_REQUEST)
				goto out;
			ssize_t r = read(fd, buf + len, SLOW_MAX_REQUEST - len);
			if (r <= 0)
				goto out;
			len += (size_t)r;
		}
		size_t head = (size_t)(end - buf) + 4;
		size_t clen = 0;
		int keep = 1;
		for (char *p = buf; p < end;) {
			char *nl = memmem(p, (size_t)(end - p), "\r\n", 2);
			if (nl == NULL)
				nl = end;
			if ((size_t)(nl - p) > 15 && strncasecmp(p, "Content-Length:", 15) == 0)
				clen = strtoul(p + 15, NULL, 10);
			if ((size_t)(nl - p) > 11 && strncasecmp(p, "Connection:", 11) == 0 &&
			    memmem(p, (size_t)(nl - p), "close", 5) != NULL)
				keep = 0;
			p = nl + 2;
		}
		if (head + clen > SLOW_MAX_REQUEST)
			goto out;
		while (len < head + clen) {
			ssize_t r = read(fd, buf + len, SLOW_MAX_REQUEST - len);
			if (r <= 0)
				goto out;
			len += (size_t)r;
		}
		if (slow_delay_ms > 0)
			slow_sleep_ms(slow_delay_ms);
		char method[16] = "", path[1024] = "";
		sscanf(buf, "%15s %1023s", method, path);
		size_t pl = strlen(path);
		if (strcmp(method, "POST") == 0 && strncmp(path, "/v1/shards/", 11) == 0 && pl > 10 &&
		    strcmp(path + pl - 10, "/merge-wal") == 0) {
			slow_merge(fd, strtol(path + 11, NULL, 10), keep);
		} else if (strcmp(method, "POST") == 0 && strcmp(path, "/v1/shards/9/rows") == 0) {
			slow_reply(fd, 409, "application/json", "{\"error\":\"fenced\",\"detail\":\"shard 9\"}\n", keep);
		} else if (strcmp(method, "POST") == 0 && strncmp(path, "/v1/shards/", 11) == 0 &&
		    strlen(path) > 5 && strcmp(path + strlen(path) - 5, "/rows") == 0) {
			uint64_t rows = 0;
			for (size_t i = head; i < head + clen; i++)
				rows += buf[i] == '\n';
			pthread_mutex_lock(&slow_mu);
			slow_seq += rows;
			uint64_t last = slow_seq;
			pthread_mutex_unlock(&slow_mu);
			char body[128];
			snprintf(body, sizeof(body), "{\"appended\":%llu,\"last_seq\":%llu}\n", (unsigned long long)rows,
				 (unsigned long long)last);
			slow_reply(fd, 200, "application/json", body, keep);
		} else if (strcmp(method, "GET") == 0 && strncmp(path, "/v1/shards/", 11) == 0 &&
			   strstr(path, "/rows/") != NULL) {
			slow_reply(fd, 404, "application/json", "{\"error\":\"not found\"}\n", keep);
		} else {
			slow_reply(fd, 200, "text/plain", "ok", keep);
		}
		memmove(buf, buf + head + clen, len - head - clen);
		len -= head + clen;
		if (!keep)
			break;
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

int
main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: slow_server PORT_FILE [DELAY_MS]\n");
		return 2;
	}
	/* A client that hangs up mid-response must not kill the server. */
	signal(SIGPIPE, SIG_IGN);
	slow_delay_ms = argc == 3 ? atol(argv[2]) : 0;
	if (slow_delay_ms < 0 || slow_delay_ms > 600000) {
		fprintf(stderr, "slow_server: DELAY_MS must be 0..600000\n");
		return 2;
	}
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof(a);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 512) != 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
		perror("slow_server: listen");
		return 1;
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "127.0.0.1:%u\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0 ||
	    rename(tmp, argv[1]) != 0) {
		perror("slow_server: port file");
		return 1;
	}
	for (;;) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 * 1024);
		if (pthread_create(&t, &at, slow_conn, (void *)(intptr_t)fd) != 0)
			close(fd);
		pthread_attr_destroy(&at);
	}
}
