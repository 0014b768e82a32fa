/*
 * test_http_server.c — integration tests of `strata serve`: each test starts real
 * node processes on ephemeral ports in temporary directories, talks to them with
 * libcurl (and raw sockets for malformed traffic), and kills them by PID at the
 * end, also when a test fails.
 *
 * The binary is $STRATA_BIN, else $BUILD/strata, else build/strata. Node logs stay
 * in the temporary directory when a test fails or STRATA_TEST_KEEP is set.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "harness.h"

/* ---------- processes ---------- */

/** A started node. */
struct node {
	/** Process id (0 once reaped). */
	pid_t pid;
	/** Bound port. */
	int port;
	/** Its stderr log. */
	char log[600];
	/** Its data directory. */
	char dir[600];
};

/** Every node process not yet reaped, so a failing test still kills them. */
static pid_t live_pids[64];
static char *tmp_root;
static int node_seq;

static const char *
strata_bin(void)
{
	static char path[600];
	const char *b = getenv("STRATA_BIN");
	if (b != NULL)
		return b;
	const char *build = getenv("BUILD");
	snprintf(path, sizeof(path), "%s/strata", build ? build : "build");
	return path;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void
pid_forget(pid_t pid)
{
	for (size_t i = 0; i < sizeof(live_pids) / sizeof(live_pids[0]); i++)
		if (live_pids[i] == pid)
			live_pids[i] = 0;
}

static void
nodes_kill_all(void)
{
	for (size_t i = 0; i < sizeof(live_pids) / sizeof(live_pids[0]); i++)
		if (live_pids[i] > 0) {
			kill(live_pids[i], SIGKILL);
			waitpid(live_pids[i], NULL, 0);
			live_pids[i] = 0;
		}
}

static void
on_fatal_signal(int sig)
{
	nodes_kill_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
print_log(const struct node *n)
{
	FILE *f = fopen(n->log, "r");
	if (f == NULL)
		return;
	char line[1024];
	fprintf(stderr, "  --- %s\n", n->log);
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  | %s", line);
	fclose(f);
}

/** Wait for a process to exit, up to ms; its exit status, 128+signal, or -1 on timeout. */
static int
wait_exit(pid_t pid, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid) {
			pid_forget(pid);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		if (now_ms() > end)
			return -1;
		sleep_ms(5);
	}
}

static long http_status(struct node *n, const char *method, const char *path, const char *body, size_t len,
			const char *const *headers, char **resp, size_t *resp_len);

/** Spawn `strata serve` on dir with extra flags (NULL-terminated); the child's exit
 *  status when it exits before becoming ready (then n->pid is 0), else 0. */
static int
node_spawn(struct node *n, const char *dir, const char *const *extra)
{
	char data[sizeof(n->dir)];
	snprintf(data, sizeof(data), "%s", dir);
	memset(n, 0, sizeof(*n));
	memcpy(n->dir, data, sizeof(n->dir));
	int seq = ++node_seq;
	char ready[600];
	snprintf(ready, sizeof(ready), "%s/ready-%d", tmp_root, seq);
	snprintf(n->log, sizeof(n->log), "%s/node-%d.log", tmp_root, seq);
	const char *argv[64];
	int k = 0;
	argv[k++] = strata_bin();
	argv[k++] = "serve";
	argv[k++] = "--listen";
	argv[k++] = "127.0.0.1:0";
	argv[k++] = "--data";
	argv[k++] = n->dir;
	argv[k++] = "--ready-file";
	argv[k++] = ready;
	argv[k++] = "--shards";
	argv[k++] = "2";
	for (int i = 0; extra != NULL && extra[i] != NULL && k < 62; i++)
		argv[k++] = extra[i];
	argv[k] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(n->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		return -1;
	for (size_t i = 0; i < sizeof(live_pids) / sizeof(live_pids[0]); i++)
		if (live_pids[i] == 0) {
			live_pids[i] = pid;
			break;
		}
	n->pid = pid;
	uint64_t end = now_ms() + 20000;
	while (now_ms() < end) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			pid_forget(pid);
			n->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		FILE *f = fopen(ready, "r");
		if (f != NULL) {
			char line[128] = "";
			char *got = fgets(line, sizeof(line), f);
			fclose(f);
			char *colon = got ? strrchr(line, ':') : NULL;
			if (colon != NULL) {
				n->port = atoi(colon + 1);
				break;
			}
		}
		sleep_ms(5);
	}
	unlink(ready);
	while (n->port > 0 && now_ms() < end) {
		if (http_status(n, "GET", "/healthz", NULL, 0, NULL, NULL, NULL) == 200)
			return 0;
		sleep_ms(5);
	}
	print_log(n);
	return -1;
}

/** node_spawn that must succeed. */
static int
node_start(struct node *n, const char *dir, const char *const *extra)
{
	int rc = node_spawn(n, dir, extra);
	if (rc != 0 || n->pid == 0) {
		fprintf(stderr, "  node did not start (status %d)\n", rc);
		print_log(n);
		return -1;
	}
	return 0;
}

/** Signal the node and wait for its exit status. */
static int
node_stop(struct node *n, int sig)
{
	if (n->pid <= 0)
		return -1;
	kill(n->pid, sig);
	int st = wait_exit(n->pid, 20000);
	if (st < 0) {
		kill(n->pid, SIGKILL);
		waitpid(n->pid, NULL, 0);
		pid_forget(n->pid);
	}
	if (st != 0 && sig != SIGKILL)
		print_log(n);
	n->pid = 0;
	return st;
}

/** Make a fresh data directory named after tag for n (which it empties; not started). */
static void
node_dir(struct node *n, const char *tag)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->dir, sizeof(n->dir), "%s/%s-%d", tmp_root, tag, ++node_seq);
	mkdir(n->dir, 0755);
}

/** node_start on a fresh data directory named after tag. */
static int
node_up(struct node *n, const char *tag, const char *const *extra)
{
	node_dir(n, tag);
	return node_start(n, n->dir, extra);
}

/** Write text to the file at path; 0, or -1 when it cannot be created. */
static int
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	fputs(text, f);
	fclose(f);
	return 0;
}

/* ---------- libcurl client ---------- */

/** A growing response body. */
struct sink {
	/** The bytes (NUL-terminated). */
	char *p;
	/** Length. */
	size_t n;
};

static size_t
sink_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	size_t add = size * nmemb;
	char *q = realloc(s->p, s->n + add + 1);
	if (q == NULL)
		return 0;
	memcpy(q + s->n, ptr, add);
	s->p = q;
	s->n += add;
	s->p[s->n] = '\0';
	return add;
}

/** One request; the status (or -1 on a transport error) and, when resp is given, the
 *  body (caller frees). */
static long
http_status(struct node *n, const char *method, const char *path, const char *body, size_t len,
	    const char *const *headers, char **resp, size_t *resp_len)
{
	CURL *c = curl_easy_init();
	if (c == NULL)
		return -1;
	char url[4200];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", n->port, path);
	struct sink s = {0};
	struct curl_slist *hl = NULL;
	for (int i = 0; headers != NULL && headers[i] != NULL; i++)
		hl = curl_slist_append(hl, headers[i]);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (hl != NULL)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	long code = -1;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	if (resp != NULL) {
		*resp = s.p ? s.p : strdup("");
		if (resp_len)
			*resp_len = s.p ? s.n : 0;
	} else {
		free(s.p);
	}
	return code;
}

static long
http_get(struct node *n, const char *path, char **resp, size_t *len)
{
	return http_status(n, "GET", path, NULL, 0, NULL, resp, len);
}

static long
http_post(struct node *n, const char *path, const char *body, size_t len, char **resp)
{
	return http_status(n, "POST", path, body ? body : "", body ? len : 0, NULL, resp, NULL);
}

/** GET the value of key in shard; 1 when it equals want. */
static int
value_is(struct node *n, int shard, const char *key, const char *want, size_t want_len)
{
	char path[512], *v = NULL;
	size_t vl = 0;
	snprintf(path, sizeof(path), "/v1/shards/%d/rows/%s", shard, key);
	long st = http_get(n, path, &v, &vl);
	int ok = st == 200 && vl == want_len && memcmp(v, want, vl) == 0;
	free(v);
	return ok;
}

static long
get_status(struct node *n, int shard, const char *key)
{
	char path[512];
	snprintf(path, sizeof(path), "/v1/shards/%d/rows/%s", shard, key);
	return http_get(n, path, NULL, NULL);
}

/** Integer member of a JSON object text; -1 when absent. */
static long long
json_int_of(const char *text, const char *name)
{
	json_t *o = text ? json_loads(text, 0, NULL) : NULL;
	json_t *v = o ? json_object_get(o, name) : NULL;
	long long r = json_is_integer(v) ? json_integer_value(v) : -1;
	json_decref(o);
	return r;
}

static long long
shard_stat(struct node *n, int shard, const char *name)
{
	char path[64], *b = NULL;
	snprintf(path, sizeof(path), "/v1/shards/%d/stats", shard);
	long st = http_get(n, path, &b, NULL);
	long long v = st == 200 ? json_int_of(b, name) : -1;
	free(b);
	return v;
}

/** Scan into a JSON array of {"key","value"} objects (NULL on failure). */
static json_t *
scan(struct node *n, const char *query)
{
	char path[600], *b = NULL;
	size_t bl = 0;
	snprintf(path, sizeof(path), "/v1/shards/0/rows%s", query);
	if (http_get(n, path, &b, &bl) != 200) {
		free(b);
		return NULL;
	}
	json_t *arr = json_array();
	char *p = b;
	while (*p) {
		char *nl = strchr(p, '\n');
		if (nl == NULL)
			break;
		json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
		if (o == NULL) {
			json_decref(arr);
			arr = NULL;
			break;
		}
		json_array_append_new(arr, o);
		p = nl + 1;
	}
	if (arr != NULL && *p != '\0') {
		json_decref(arr);
		arr = NULL;
	}
	free(b);
	return arr;
}

/** Rows of a scan (scan's query), or -1 when it fails. */
static long
scan_count(struct node *n, const char *query)
{
	json_t *arr = scan(n, query);
	long rows = arr != NULL ? (long)json_array_size(arr) : -1;
	json_decref(arr);
	return rows;
}

static const char *
row_key(json_t *arr, size_t i)
{
	return json_string_value(json_object_get(json_array_get(arr, i), "key"));
}

/* ---------- raw sockets ---------- */

static int
raw_connect(struct node *n)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)n->port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int
raw_send(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
raw_sends(int fd, const char *s)
{
	return raw_send(fd, s, strlen(s));
}

/** Read until EOF or until ms pass; what arrived (NUL-terminated, caller frees).
 *  *eof says whether the server closed. */
static char *
raw_read(int fd, unsigned ms, size_t *len, int *eof)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	uint64_t end = now_ms() + ms;
	*eof = 0;
	for (;;) {
		uint64_t t = now_ms();
		if (t >= end)
			break;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, (int)(end - t)) <= 0)
			break;
		if (cap - n < 2048) {
			cap *= 2;
			b = realloc(b, cap);
		}
		ssize_t r = recv(fd, b + n, cap - n - 1, 0);
		if (r <= 0) {
			*eof = 1;
			break;
		}
		n += (size_t)r;
	}
	b[n] = '\0';
	if (len)
		*len = n;
	return b;
}

/** Read until want responses (by Content-Length) arrived or ms pass. */
static char *
raw_read_responses(int fd, int want, unsigned ms, size_t *len)
{
	size_t cap = 8192, n = 0;
	char *b = malloc(cap);
	uint64_t end = now_ms() + ms;
	for (;;) {
		b[n] = '\0';
		int got = 0;
		const char *p = b;
		for (;;) {
			const char *he = strstr(p, "\r\n\r\n");
			if (he == NULL)
				break;
			const char *cl = strcasestr(p, "Content-Length:");
			size_t body = cl && cl < he ? (size_t)atol(cl + 15) : 0;
			if ((size_t)(he + 4 - b) + body > n)
				break;
			got++;
			p = he + 4 + body;
		}
		if (got >= want || now_ms() >= end)
			break;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 50) <= 0)
			continue;
		if (cap - n < 4096) {
			cap *= 2;
			b = realloc(b, cap);
		}
		ssize_t r = recv(fd, b + n, cap - n - 1, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	if (len)
		*len = n;
	return b;
}

static int
status_of(const char *resp)
{
	if (strncmp(resp, "HTTP/1.1 ", 9) != 0)
		return -1;
	return atoi(resp + 9);
}

/** Send raw bytes on a fresh connection and return the status of the reply (-1 none). */
static int
raw_exchange(struct node *n, const char *req, size_t len, int *closed)
{
	int fd = raw_connect(n);
	if (fd < 0)
		return -1;
	raw_send(fd, req, len);
	int eof = 0;
	char *resp = raw_read(fd, 5000, NULL, &eof);
	int st = status_of(resp);
	free(resp);
	close(fd);
	if (closed)
		*closed = eof;
	return st;
}

/** The node answers /healthz and still holds the baseline row. */
static int
node_healthy(struct node *n)
{
	return http_get(n, "/healthz", NULL, NULL) == 200 && value_is(n, 0, "baseline", "kept", 4);
}

/* ---------- tests ---------- */

TEST(append_get_scan_round_trip)
{
	struct node n;
	REQUIRE(node_up(&n, "roundtrip", NULL) == 0);
	/* NDJSON: plain, binary (value_b64), a key with '/', space and UTF-8. */
	const char *nd = "{\"key\":\"alpha\",\"value\":\"one\"}\n"
			 "{\"key\":\"beta\",\"value_b64\":\"AAEC/w==\"}\r\n"
			 "\n"
			 "{\"key\":\"dir/x y\",\"value\":\"caf\\u00e9\"}\n"
			 "{\"key_b64\":\"AP8=\",\"value\":\"binary key\"}";
	char *r = NULL;
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", nd, strlen(nd), &r), 200);
	CHECK_EQ(json_int_of(r, "appended"), 4);
	CHECK_EQ(json_int_of(r, "last_seq"), 4);
	free(r);
	CHECK(value_is(&n, 0, "alpha", "one", 3));
	CHECK(value_is(&n, 0, "beta", "\x00\x01\x02\xff", 4));
	CHECK(value_is(&n, 0, "dir%2Fx%20y", "caf\xc3\xa9", 5));
	CHECK(value_is(&n, 0, "dir/x%20y", "caf\xc3\xa9", 5));
	CHECK(value_is(&n, 0, "%00%FF", "binary key", 10));
	CHECK_EQ(get_status(&n, 0, "missing"), 404);
	CHECK_EQ(get_status(&n, 1, "alpha"), 404);

	/* The binary batch format: u32 count, then per row u32 klen, u32 vlen, key, value. */
	uint8_t batch[4096];
	size_t bl = 4;
	uint32_t count = 3;
	memcpy(batch, &count, 4);
	const char *bk[] = {"bin-1", "bin-2", "bin-3"};
	for (int i = 0; i < 3; i++) {
		uint32_t kl = (uint32_t)strlen(bk[i]), vl = (uint32_t)i * 3;
		memcpy(batch + bl, &kl, 4);
		memcpy(batch + bl + 4, &vl, 4);
		memcpy(batch + bl + 8, bk[i], kl);
		memset(batch + bl + 8 + kl, 0xA0 + i, vl);
		bl += 8 + kl + vl;
	}
	const char *bh[] = {"Content-Type: application/x-strata-batch", NULL};
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/1/rows", (const char *)batch, bl, bh, &r, NULL), 200);
	CHECK_EQ(json_int_of(r, "appended"), 3);
	free(r);
	CHECK(value_is(&n, 1, "bin-2", "\xa1\xa1\xa1", 3));
	CHECK(value_is(&n, 1, "bin-1", "", 0));

	/* Scans: all, by prefix, by range, with a limit; binary data comes back as _b64. */
	json_t *all = scan(&n, "");
	REQUIRE(all != NULL);
	REQUIRE_EQ(json_array_size(all), 4);
	CHECK(json_object_get(json_array_get(all, 0), "key_b64") != NULL);
	CHECK(strcmp(row_key(all, 1), "alpha") == 0);
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(all, 2), "value_b64")), "AAEC/w==") == 0);
	CHECK(strcmp(row_key(all, 3), "dir/x y") == 0);
	json_decref(all);
	CHECK_EQ(scan_count(&n, "?prefix=b"), 1);
	CHECK_EQ(scan_count(&n, "?start=alpha&end=dir&limit=5"), 2);
	CHECK_EQ(scan_count(&n, "?prefix=&start=&end=&limit="), 4);
	CHECK_EQ(scan_count(&n, "?limit=2"), 2);
	CHECK_EQ(http_get(&n, "/v1/shards/0/rows?bogus=1", NULL, NULL), 400);
	CHECK_EQ(http_get(&n, "/v1/shards/0/rows?limit=-3", NULL, NULL), 400);
	/* strtoull would take these: a blank and a sign (wrapping round), a plus. */
	CHECK_EQ(http_get(&n, "/v1/shards/0/rows?limit=%20-3", NULL, NULL), 400);
	CHECK_EQ(http_get(&n, "/v1/shards/0/rows?limit=%2B3", NULL, NULL), 400);
	CHECK_EQ(http_get(&n, "/v1/shards/0/rows?limit=2x", NULL, NULL), 400);

	/* A scan larger than one chunk streams every row exactly once, in order. */
	size_t big = 5000;
	char *many = malloc(big * 64);
	size_t ml = 0;
	for (size_t i = 0; i < big; i++)
		ml += (size_t)sprintf(many + ml, "{\"key\":\"many-%06zu\",\"value\":\"v%zu\"}\n", i, i);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", many, ml, NULL), 200);
	free(many);
	json_t *m = scan(&n, "?prefix=many-");
	REQUIRE(m != NULL);
	CHECK_EQ(json_array_size(m), big);
	int order_ok = 1;
	for (size_t i = 0; i < json_array_size(m); i++) {
		char want[32];
		snprintf(want, sizeof(want), "many-%06zu", i);
		if (strcmp(row_key(m, i), want) != 0)
			order_ok = 0;
	}
	CHECK(order_ok);
	json_decref(m);
	CHECK_EQ(scan_count(&n, "?prefix=many-&limit=2500"), 2500);

	/* Seal and merge-wal keep every row readable. */
	CHECK_EQ(http_post(&n, "/v1/shards/0/seal", NULL, 0, &r), 200);
	free(r);
	CHECK_EQ(http_post(&n, "/v1/shards/0/merge-wal", NULL, 0, &r), 200);
	CHECK(json_int_of(r, "reclaimed") >= 1);
	CHECK_EQ(json_int_of(r, "pending"), 0);
	free(r);
	CHECK(value_is(&n, 0, "alpha", "one", 3));
	CHECK(value_is(&n, 0, "many-004999", "v4999", 5));
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(delete_by_route_ndjson_and_binary_batch)
{
	struct node n;
	REQUIRE(node_up(&n, "delete", NULL) == 0);
	const char *nd = "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":\"b\",\"value\":\"2\"}\n"
			 "{\"key\":\"c\",\"value\":\"3\"}\n{\"key\":\"d/e\",\"value\":\"4\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", nd, strlen(nd), NULL), 200);
	CHECK_EQ(http_post(&n, "/v1/shards/0/seal", NULL, 0, NULL), 200);
	/* DELETE of a row: a tombstone; deleting it again, or an absent key, is no error. */
	char *r = NULL;
	CHECK_EQ(http_status(&n, "DELETE", "/v1/shards/0/rows/d%2Fe", NULL, 0, NULL, &r, NULL), 200);
	CHECK_EQ(json_int_of(r, "deleted"), 1);
	CHECK_EQ(json_int_of(r, "last_seq"), 5);
	free(r);
	CHECK_EQ(get_status(&n, 0, "d%2Fe"), 404);
	CHECK_EQ(http_status(&n, "DELETE", "/v1/shards/0/rows/never", NULL, 0, NULL, NULL, NULL), 200);
	CHECK_EQ(http_status(&n, "DELETE", "/v1/shards/9/rows/a", NULL, 0, NULL, NULL, NULL), 404);
	CHECK_EQ(http_status(&n, "DELETE", "/v1/shards/0/rows", NULL, 0, NULL, NULL, NULL), 405);
	/* NDJSON: a delete row mixed with puts, applied in order. */
	const char *mix = "{\"key\":\"a\",\"delete\":true}\n{\"key\":\"f\",\"value\":\"6\"}\n"
			  "{\"key\":\"c\",\"delete\":false,\"value\":\"3b\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", mix, strlen(mix), &r), 200);
	CHECK_EQ(json_int_of(r, "appended"), 3);
	free(r);
	CHECK_EQ(get_status(&n, 0, "a"), 404);
	CHECK(value_is(&n, 0, "c", "3b", 2));
	CHECK(value_is(&n, 0, "f", "6", 1));
	const char *bad[] = {"{\"key\":\"b\",\"delete\":true,\"value\":\"x\"}\n",
			     "{\"key\":\"b\",\"delete\":1}\n", "{\"key\":\"b\",\"delete\":false}\n"};
	for (int i = 0; i < 3; i++)
		CHECK_EQ(http_post(&n, "/v1/shards/0/rows", bad[i], strlen(bad[i]), NULL), 400);
	CHECK(value_is(&n, 0, "b", "2", 1));
	/* Binary batch: value_len 0xffffffff is a delete with no value bytes. */
	uint8_t batch[64];
	uint32_t count = 2, kl = 1, del = UINT32_MAX, vl = 2;
	memcpy(batch, &count, 4);
	memcpy(batch + 4, &kl, 4);
	memcpy(batch + 8, &del, 4);
	batch[12] = 'b';
	memcpy(batch + 13, &kl, 4);
	memcpy(batch + 17, &vl, 4);
	memcpy(batch + 21, "gG7", 3);
	const char *bh[] = {"Content-Type: application/x-strata-batch", NULL};
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", (const char *)batch, 24, bh, &r, NULL), 200);
	CHECK_EQ(json_int_of(r, "appended"), 2);
	free(r);
	CHECK_EQ(get_status(&n, 0, "b"), 404);
	CHECK(value_is(&n, 0, "g", "G7", 2));
	/* Scans skip deleted keys, before and after a merge. */
	for (int pass = 0; pass < 2; pass++) {
		json_t *all = scan(&n, "");
		REQUIRE(all != NULL);
		CHECK_EQ(json_array_size(all), 3);
		if (json_array_size(all) == 3) {
			CHECK(strcmp(row_key(all, 0), "c") == 0);
			CHECK(strcmp(row_key(all, 1), "f") == 0);
			CHECK(strcmp(row_key(all, 2), "g") == 0);
		}
		json_decref(all);
		CHECK_EQ(http_post(&n, "/v1/shards/0/merge-wal", NULL, 0, NULL), 200);
	}
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(slow_reader_gets_the_whole_scan)
{
	struct node n;
	REQUIRE(node_up(&n, "slowscan", NULL) == 0);
	size_t rows = 3000, vlen = 1000;
	char *body = malloc(rows * (vlen + 64));
	size_t bl = 0;
	for (size_t i = 0; i < rows; i++) {
		bl += (size_t)sprintf(body + bl, "{\"key\":\"s%05zu\",\"value\":\"", i);
		memset(body + bl, 'a' + (int)(i % 26), vlen);
		bl += vlen;
		bl += (size_t)sprintf(body + bl, "\"}\n");
	}
	REQUIRE_EQ(http_post(&n, "/v1/shards/0/rows", body, bl, NULL), 200);
	free(body);
	/* HTTP/1.0: the body ends when the node closes; a small receive buffer and slow
	 * reads make the node wait for the client (several MiB pass through 1 MiB of queue). */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int small = 16384;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)n.port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	raw_sends(fd, "GET /v1/shards/0/rows HTTP/1.0\r\n\r\n");
	size_t total = 0, lines = 0;
	char buf[8192];
	int reads = 0;
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			lines += buf[i] == '\n';
		total += (size_t)r;
		if (++reads % 64 == 0)
			sleep_ms(1);
	}
	close(fd);
	CHECK(total > rows * vlen);
	/* Five header lines (status, Server, Date, Content-Type, Connection) and the blank
	 * line, then one NDJSON line per row. */
	CHECK_EQ(lines, rows + 6);
	char *m = NULL;
	REQUIRE_EQ(http_get(&n, "/metrics", &m, NULL), 200);
	const char *w = strstr(m, "\nstrata_scan_waits_total ");
	CHECK(w != NULL && atol(w + 25) > 0);
	free(m);
	/* A client that goes away in the middle of a scan leaves the node healthy. */
	for (int k = 0; k < 3; k++) {
		fd = raw_connect(&n);
		REQUIRE(fd >= 0);
		raw_sends(fd, "GET /v1/shards/0/rows HTTP/1.1\r\n\r\n");
		recv(fd, buf, sizeof(buf), 0);
		close(fd);
	}
	CHECK_EQ(http_get(&n, "/healthz", NULL, NULL), 200);
	CHECK_EQ(scan_count(&n, "?limit=10"), 10);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(pipelined_requests_answered_in_order)
{
	struct node n;
	REQUIRE(node_up(&n, "pipeline", NULL) == 0);
	int fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	const char *body = "{\"key\":\"p1\",\"value\":\"first\"}\n";
	char req[2048];
	int len = snprintf(req, sizeof(req),
			   "POST /v1/shards/0/rows HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s"
			   "GET /v1/shards/0/rows/p1 HTTP/1.1\r\nHost: x\r\n\r\n"
			   "GET /v1/shards/0/rows/nope HTTP/1.1\r\nHost: x\r\n\r\n"
			   "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
			   strlen(body), body);
	REQUIRE(raw_send(fd, req, (size_t)len) == 0);
	char *resp = raw_read_responses(fd, 4, 10000, NULL);
	const char *a = strstr(resp, "HTTP/1.1 200");
	const char *b = a ? strstr(a + 1, "\r\n\r\nfirst") : NULL;
	const char *c = b ? strstr(b, "HTTP/1.1 404") : NULL;
	const char *d = c ? strstr(c, "\"status\":\"ok\"") : NULL;
	CHECK(a == resp);
	CHECK(a != NULL && strstr(a, "\"appended\":1") != NULL && strstr(a, "\"appended\":1") < b);
	CHECK(b != NULL);
	CHECK(c != NULL);
	CHECK(d != NULL);
	free(resp);
	close(fd);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(chunked_body_accepted)
{
	struct node n;
	REQUIRE(node_up(&n, "chunked", NULL) == 0);
	int fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	raw_sends(fd, "POST /v1/shards/0/rows HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
	const char *pieces[] = {"{\"key\":\"c1\",\"va", "lue\":\"chunk\"}\n", "{\"key\":\"c2\",\"value\":\"two\"}\n", NULL};
	for (int i = 0; pieces[i] != NULL; i++) {
		char chunk[128];
		snprintf(chunk, sizeof(chunk), "%zx\r\n%s\r\n", strlen(pieces[i]), pieces[i]);
		raw_sends(fd, chunk);
		sleep_ms(10);
	}
	raw_sends(fd, "0\r\n\r\n");
	char *resp = raw_read_responses(fd, 1, 10000, NULL);
	CHECK_EQ(status_of(resp), 200);
	CHECK(strstr(resp, "\"appended\":2") != NULL);
	free(resp);
	close(fd);
	CHECK(value_is(&n, 0, "c1", "chunk", 5));
	CHECK(value_is(&n, 0, "c2", "two", 3));
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(bad_inputs_never_break_the_node)
{
	struct node n;
	const char *flags[] = {"--max-body", "8K", "--max-header", "1024", "--max-value", "1K",
			       "--header-timeout-ms", "300", "--body-timeout-ms", "300", NULL};
	REQUIRE(node_up(&n, "bad", flags) == 0);
	const char *base = "{\"key\":\"baseline\",\"value\":\"kept\"}\n";
	REQUIRE_EQ(http_post(&n, "/v1/shards/0/rows", base, strlen(base), NULL), 200);
	long long rows0 = shard_stat(&n, 0, "rows_appended");
	REQUIRE_EQ(rows0, 1);
	int closed = 0;

	/* Malformed request line. */
	const char *garbage = "THIS IS NOT HTTP\r\n\r\n";
	CHECK_EQ(raw_exchange(&n, garbage, strlen(garbage), &closed), 400);
	CHECK(closed);
	CHECK(node_healthy(&n));
	const char *badver = "GET /healthz HTTP/9.9\r\n\r\n";
	CHECK(raw_exchange(&n, badver, strlen(badver), NULL) >= 400);
	CHECK(node_healthy(&n));

	/* Headers over the limit. */
	char big[4096];
	int bl = snprintf(big, sizeof(big), "GET /healthz HTTP/1.1\r\nX-Big: %0*d\r\n\r\n", 2000, 7);
	CHECK_EQ(raw_exchange(&n, big, (size_t)bl, &closed), 431);
	CHECK(closed);
	CHECK(node_healthy(&n));

	/* Body over the limit: declared, and chunked. */
	const char *over = "POST /v1/shards/0/rows HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{\"key\":";
	CHECK_EQ(raw_exchange(&n, over, strlen(over), &closed), 413);
	CHECK(closed);
	char chunked[12000];
	int cl = snprintf(chunked, sizeof(chunked),
			  "POST /v1/shards/0/rows HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2710\r\n");
	memset(chunked + cl, 'x', 9000);
	CHECK_EQ(raw_exchange(&n, chunked, (size_t)cl + 9000, &closed), 413);
	CHECK(node_healthy(&n));

	/* Invalid JSON, invalid base64, bad fields: 400 and nothing of the batch applied. */
	const char *bad_json = "{\"key\":\"ok-1\",\"value\":\"v\"}\n{\"key\":\"ok-2\",\"value\":}\n";
	char *r = NULL;
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", bad_json, strlen(bad_json), &r), 400);
	CHECK(r != NULL && strstr(r, "\"error\":\"invalid JSON\"") != NULL && strstr(r, "line 2") != NULL);
	free(r);
	const char *bad_b64 = "{\"key\":\"ok-3\",\"value\":\"v\"}\n{\"key\":\"ok-4\",\"value_b64\":\"@@@\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", bad_b64, strlen(bad_b64), &r), 400);
	CHECK(r != NULL && strstr(r, "base64") != NULL);
	free(r);
	const char *bad_field = "{\"key\":\"ok-5\",\"valeu\":\"v\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", bad_field, strlen(bad_field), NULL), 400);
	const char *not_obj = "[1,2]\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", not_obj, strlen(not_obj), NULL), 400);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", "", 0, NULL), 400);
	CHECK_EQ(get_status(&n, 0, "ok-1"), 404);
	CHECK_EQ(get_status(&n, 0, "ok-3"), 404);

	/* Oversized key (a bad request: key_too_long_is_400_everywhere) and value (a body too large). */
	char *bigkey = malloc(6000);
	int kl = snprintf(bigkey, 6000, "{\"key\":\"%0*d\",\"value\":\"v\"}\n", 4097, 1);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", bigkey, (size_t)kl, NULL), 400);
	kl = snprintf(bigkey, 6000, "{\"key\":\"ok-6\",\"value\":\"v\"}\n{\"key\":\"ok-7\",\"value\":\"%0*d\"}\n", 1025, 1);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", bigkey, (size_t)kl, NULL), 413);
	free(bigkey);
	CHECK_EQ(get_status(&n, 0, "ok-6"), 404);

	/* A malformed binary batch. */
	const uint8_t trunc[] = {2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'k', 'v', 5, 0, 0, 0, 1, 0, 0, 0, 'x'};
	const char *bh[] = {"Content-Type: application/x-strata-batch", NULL};
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", (const char *)trunc, sizeof(trunc), bh, NULL, NULL),
		 400);
	CHECK_EQ(get_status(&n, 0, "k"), 404);

	/* Unknown shard, unknown path, wrong method, bad key escape. */
	CHECK_EQ(http_post(&n, "/v1/shards/7/rows", base, strlen(base), &r), 404);
	CHECK(r != NULL && strstr(r, "unknown shard") != NULL);
	free(r);
	CHECK_EQ(http_get(&n, "/v1/shards/x1/stats", NULL, NULL), 400);
	CHECK_EQ(http_get(&n, "/v1/nothing", NULL, NULL), 404);
	CHECK_EQ(http_status(&n, "PUT", "/v1/shards/0/rows/baseline", NULL, 0, NULL, NULL, NULL), 405);
	CHECK_EQ(http_get(&n, "/v1/shards/0/seal", NULL, NULL), 405);
	CHECK_EQ(get_status(&n, 0, "bad%zzescape"), 400);
	CHECK(node_healthy(&n));

	/* A connection closed in the middle of a body applies nothing. */
	int fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	raw_sends(fd, "POST /v1/shards/0/rows HTTP/1.1\r\nContent-Length: 200\r\n\r\n{\"key\":\"half\",\"value\":\"x\"}\n");
	sleep_ms(50);
	close(fd);
	sleep_ms(50);
	CHECK_EQ(get_status(&n, 0, "half"), 404);
	CHECK(node_healthy(&n));

	/* Slowloris: headers a byte at a time; the node closes after the header timeout. */
	fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	const char *slow = "GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	int cut = 0;
	for (size_t i = 0; slow[i] && !cut; i++) {
		if (send(fd, slow + i, 1, MSG_NOSIGNAL) != 1)
			cut = 1;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 25) > 0) {
			char tmp[512];
			ssize_t rr;
			while ((rr = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT)) > 0)
				;
			if (rr == 0 || (rr < 0 && errno != EAGAIN))
				cut = 1;
		}
	}
	CHECK(cut);
	close(fd);
	/* A connection that sends nothing is closed too. */
	int eof = 0;
	raw_exchange(&n, "", 0, &eof);
	CHECK(eof);
	/* A slow body (headers complete, body trickles) gets 408. */
	const char *slow_body = "POST /v1/shards/0/rows HTTP/1.1\r\nContent-Length: 50\r\n\r\n{";
	eof = 0;
	CHECK_EQ(raw_exchange(&n, slow_body, strlen(slow_body), &eof), 408);
	CHECK(eof);
	CHECK(node_healthy(&n));

	/* Nothing bad was applied: still exactly the baseline row. */
	CHECK_EQ(shard_stat(&n, 0, "rows_appended"), rows0);
	CHECK_EQ(scan_count(&n, ""), 1);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/** Whether r is {"error": "key too long", "detail": "...N bytes; the limit is 4096"}. */
static int
is_key_too_long(const char *r, size_t klen)
{
	json_t *o = r ? json_loads(r, 0, NULL) : NULL;
	const char *e = json_string_value(json_object_get(o, "error"));
	const char *d = json_string_value(json_object_get(o, "detail"));
	char want[64];
	snprintf(want, sizeof(want), "%zu bytes; the limit is 4096", klen);
	int ok = e != NULL && strcmp(e, "key too long") == 0 && d != NULL && strstr(d, want) != NULL;
	if (!ok)
		fprintf(stderr, "  answer: %s\n", r ? r : "(none)");
	json_decref(o);
	return ok;
}

/* A key over 4096 bytes is one answer on every route: 400 "key too long", whether it
 * comes in an NDJSON or a binary batch, a GET or a DELETE. A value over --max-value is
 * still a 413 (a body too large). Nothing of a refused batch is applied. */
TEST(key_too_long_is_400_everywhere)
{
	struct node n;
	const char *flags[] = {"--max-value", "1K", NULL};
	REQUIRE(node_up(&n, "keylen", flags) == 0);
	enum { KL = 4097 };
	char *key = malloc(KL + 1);
	memset(key, 'k', KL);
	key[KL] = '\0';
	char *r = NULL;
	/* NDJSON, its second line. */
	char *body = malloc(KL + 200);
	int bl = snprintf(body, KL + 200, "{\"key\":\"ok-1\",\"value\":\"v\"}\n{\"key\":\"%s\",\"value\":\"v\"}\n",
			  key);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", body, (size_t)bl, &r), 400);
	CHECK(is_key_too_long(r, KL));
	CHECK(r != NULL && strstr(r, "line 2") != NULL);
	free(r);
	CHECK_EQ(get_status(&n, 0, "ok-1"), 404);
	/* The binary batch. */
	size_t blen = 4 + 8 + KL + 1;
	uint8_t *batch = malloc(blen);
	uint32_t count = 1, klen = KL, vlen = 1;
	memcpy(batch, &count, 4);
	memcpy(batch + 4, &klen, 4);
	memcpy(batch + 8, &vlen, 4);
	memcpy(batch + 12, key, KL);
	batch[12 + KL] = 'v';
	const char *bh[] = {"Content-Type: application/x-strata-batch", NULL};
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", (const char *)batch, blen, bh, &r, NULL), 400);
	CHECK(is_key_too_long(r, KL));
	free(r);
	/* GET and DELETE. */
	char path[KL + 64];
	snprintf(path, sizeof(path), "/v1/shards/0/rows/%s", key);
	CHECK_EQ(http_get(&n, path, &r, NULL), 400);
	CHECK(is_key_too_long(r, KL));
	free(r);
	CHECK_EQ(http_status(&n, "DELETE", path, NULL, 0, NULL, &r, NULL), 400);
	CHECK(is_key_too_long(r, KL));
	free(r);
	/* 4096 bytes is a key. */
	key[KL - 1] = '\0';
	snprintf(path, sizeof(path), "/v1/shards/0/rows/%s", key);
	CHECK_EQ(http_get(&n, path, NULL, NULL), 404);
	bl = snprintf(body, KL + 200, "{\"key\":\"%s\",\"value\":\"v\"}\n", key);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", body, (size_t)bl, NULL), 200);
	CHECK_EQ(http_status(&n, "DELETE", path, NULL, 0, NULL, NULL, NULL), 200);
	/* A value over --max-value stays a 413. */
	bl = snprintf(body, KL + 200, "{\"key\":\"big\",\"value\":\"%0*d\"}\n", 1025, 1);
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", body, (size_t)bl, &r), 413);
	CHECK(r != NULL && strstr(r, "row too large") != NULL);
	free(r);
	CHECK_EQ(http_get(&n, "/healthz", NULL, NULL), 200);
	free(batch);
	free(body);
	free(key);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(token_required_for_mutations)
{
	struct node n;
	node_dir(&n, "token");
	char tokfile[700];
	snprintf(tokfile, sizeof(tokfile), "%s/token", n.dir);
	REQUIRE(write_file(tokfile, "s3cret-T0ken\n") == 0);
	const char *flags[] = {"--token-file", tokfile, NULL};
	REQUIRE(node_start(&n, n.dir, flags) == 0);
	const char *row = "{\"key\":\"t\",\"value\":\"1\"}\n";
	const char *none[] = {NULL};
	const char *wrong[] = {"Authorization: Bearer s3cret-T0kem", NULL};
	const char *prefix[] = {"Authorization: Bearer s3cret-T0ke", NULL};
	const char *good[] = {"Authorization: Bearer s3cret-T0ken", NULL};
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", row, strlen(row), none, NULL, NULL), 401);
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", row, strlen(row), wrong, NULL, NULL), 403);
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", row, strlen(row), prefix, NULL, NULL), 403);
	CHECK_EQ(get_status(&n, 0, "t"), 404);
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/seal", "", 0, none, NULL, NULL), 401);
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/merge-wal", "", 0, wrong, NULL, NULL), 403);
	const char *pol = "return { flush_interval_s = 0 }\n";
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", pol, strlen(pol), none, NULL, NULL), 401);
	/* Refused from the headers alone: no 100 Continue, and the body is never read. */
	const char *early = "POST /v1/shards/0/rows HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 25\r\n\r\n";
	int eof = 0;
	CHECK_EQ(raw_exchange(&n, early, strlen(early), &eof), 401);
	CHECK(eof);
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", row, strlen(row), good, NULL, NULL), 200);
	CHECK(value_is(&n, 0, "t", "1", 1));
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/seal", "", 0, good, NULL, NULL), 200);
	CHECK_EQ(http_get(&n, "/metrics", NULL, NULL), 200);
	CHECK_EQ(http_get(&n, "/v1/stats", NULL, NULL), 200);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(policy_put_good_and_broken)
{
	struct node n;
	REQUIRE(node_up(&n, "policy", NULL) == 0);
	char *r = NULL;
	REQUIRE_EQ(http_get(&n, "/v1/policy", &r, NULL), 200);
	CHECK_EQ(json_int_of(r, "version"), 1);
	free(r);
	const char *good = "-- test policy\nreturn {\n  flush_interval_s = 0,\n  merge_max_generations = 3,\n}\n";
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", good, strlen(good), NULL, &r, NULL), 200);
	CHECK_EQ(json_int_of(r, "version"), 2);
	free(r);
	const char *broken = "-- broken\nreturn {\n  flush_interval_s = = 0,\n}\n";
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", broken, strlen(broken), NULL, &r, NULL), 400);
	json_t *e = json_loads(r, 0, NULL);
	const char *detail = json_string_value(json_object_get(e, "detail"));
	CHECK(detail != NULL && strstr(detail, ":3:") != NULL);
	if (detail == NULL || strstr(detail, ":3:") == NULL)
		fprintf(stderr, "  refusal: %s\n", r);
	json_decref(e);
	free(r);
	REQUIRE_EQ(http_get(&n, "/v1/policy", &r, NULL), 200);
	json_t *p = json_loads(r, 0, NULL);
	CHECK_EQ(json_integer_value(json_object_get(p, "version")), 2);
	CHECK(strcmp(json_string_value(json_object_get(p, "source")), good) == 0);
	CHECK(json_is_string(json_object_get(p, "last_error")));
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(p, "settings"), "merge_max_generations")), 3);
	json_decref(p);
	free(r);
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", "", 0, NULL, NULL, NULL), 400);
	const char *row = "{\"key\":\"after\",\"value\":\"reload\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", row, strlen(row), NULL), 200);
	CHECK(value_is(&n, 0, "after", "reload", 6));
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/** GET /v1/policy as JSON (NULL on failure; json_decref it). */
static json_t *
policy_json(struct node *n)
{
	char *r = NULL;
	json_t *o = http_get(n, "/v1/policy", &r, NULL) == 200 ? json_loads(r, 0, NULL) : NULL;
	free(r);
	return o;
}

/** Whether member key of o is the string want. */
static int
str_is(json_t *o, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v != NULL && strcmp(v, want) == 0;
}

/** The whole content of a file (free it), or NULL. */
static char *
file_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	char *b = calloc(1, 1 << 20);
	size_t n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

/** A PUT /v1/policy made on a thread of its own, and its answer. */
struct put_call {
	/** The node and the policy. */
	struct node *n;
	const char *src;
	/** The status and body of the answer (free it). */
	long status;
	char *resp;
	/** Set once answered. */
	atomic_int done;
};

static void *
put_thread(void *arg)
{
	struct put_call *c = arg;
	c->status = http_status(c->n, "PUT", "/v1/policy", c->src, strlen(c->src), NULL, &c->resp, NULL);
	atomic_store(&c->done, 1);
	return NULL;
}

/* PUT /v1/policy runs the policy's hooks before it takes it (the trial of `strata policy
 * check --run`): a hook that loops forever is stopped by its budget in the trial and
 * the PUT answers 422 with the hook, its error and its file:line; one that calls
 * os.execute likewise. The running policy stays (GET says so), nothing is written, and
 * appends go on. */
TEST(policy_put_of_a_looping_hook_is_refused_and_the_policy_stays)
{
	struct node n;
	REQUIRE(node_up(&n, "putloop", NULL) == 0);
	const char *loop = "-- loops\n"
			   "return {\n"
			   "  flush_interval_s = 0,\n"
			   "  on_seal = function(shard, info)\n"
			   "    while true do end\n"
			   "  end,\n"
			   "}\n";
	/* The trial spends three budgets of CPU (on_seal on three shards) on the server's
	 * background executor: appends and /healthz are answered meanwhile. */
	struct put_call pc = {.n = &n, .src = loop};
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, put_thread, &pc) == 0);
	int served = 0;
	for (int i = 0; i < 100000 && !atomic_load(&pc.done); i++) {
		char row[96];
		snprintf(row, sizeof(row), "{\"key\":\"during-%d\",\"value\":\"v\"}\n", i);
		long st = http_post(&n, "/v1/shards/1/rows", row, strlen(row), NULL);
		long hst = http_get(&n, "/healthz", NULL, NULL);
		if (st == 200 && hst == 200 && !atomic_load(&pc.done))
			served++;
	}
	pthread_join(th, NULL);
	CHECK(served >= 3);
	char *r = pc.resp;
	CHECK_EQ(pc.status, 422);
	json_t *e = json_loads(r, 0, NULL);
	const char *msg = json_string_value(json_object_get(e, "message"));
	CHECK(str_is(e, "error", "policy refused"));
	CHECK(str_is(e, "hook", "on_seal"));
	CHECK_EQ(json_integer_value(json_object_get(e, "shard")), 0);
	CHECK_EQ(json_integer_value(json_object_get(e, "line")), 5);
	CHECK(str_is(e, "file", "PUT /v1/policy"));
	CHECK(msg != NULL && strstr(msg, "PUT /v1/policy:5: hook exceeded its time budget of 200 ms") != NULL);
	const char *detail = json_string_value(json_object_get(e, "detail"));
	CHECK(detail != NULL && strstr(detail, "on_seal (shard 0)") != NULL && strstr(detail, ":5:") != NULL);
	/* The report: every run, each with its result or error and its times. */
	json_t *runs = json_object_get(json_object_get(e, "check"), "runs");
	CHECK_EQ(json_array_size(runs), 5);
	json_t *first = json_array_get(runs, 0);
	CHECK(json_is_false(json_object_get(first, "ok")));
	CHECK(json_real_value(json_object_get(first, "cpu_ms")) > 0);
	CHECK(json_is_number(json_object_get(first, "wall_ms")));
	CHECK(json_is_true(json_object_get(json_array_get(runs, 3), "ok")));
	if (msg == NULL || strstr(msg, ":5:") == NULL)
		fprintf(stderr, "  refusal: %s\n", r);
	json_decref(e);
	free(r);
	/* The built-in policy still runs; the refusal is its last error. */
	json_t *p = policy_json(&n);
	REQUIRE(p != NULL);
	CHECK_EQ(json_integer_value(json_object_get(p, "version")), 1);
	CHECK(str_is(p, "name", "policies/default.lua (built-in)"));
	CHECK(json_is_null(json_object_get(p, "source_path")));
	CHECK_EQ(json_integer_value(json_object_get(p, "reload_failures")), 1);
	const char *last = json_string_value(json_object_get(p, "last_error"));
	CHECK(last != NULL && strstr(last, "PUT /v1/policy:5:") != NULL);
	json_decref(p);
	/* os.execute: the sandbox has no os. */
	const char *exec = "return {\n  on_sweep = function(node)\n    os.execute('touch /tmp/strata-pwned')\n  end,\n}\n";
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", exec, strlen(exec), NULL, &r, NULL), 422);
	e = json_loads(r, 0, NULL);
	CHECK(str_is(e, "hook", "on_sweep"));
	CHECK_EQ(json_integer_value(json_object_get(e, "line")), 3);
	msg = json_string_value(json_object_get(e, "message"));
	CHECK(msg != NULL && strstr(msg, "undefined global 'os'") != NULL);
	json_decref(e);
	free(r);
	p = policy_json(&n);
	CHECK(p != NULL && json_integer_value(json_object_get(p, "version")) == 1);
	json_decref(p);
	/* Nothing was kept, and the node goes on. */
	char kept[700];
	snprintf(kept, sizeof(kept), "%s/policy.lua", n.dir);
	CHECK(access(kept, F_OK) != 0);
	const char *row = "{\"key\":\"after-refusal\",\"value\":\"ok\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", row, strlen(row), NULL), 200);
	CHECK(value_is(&n, 0, "after-refusal", "ok", 2));
	CHECK_EQ(http_get(&n, "/healthz", NULL, NULL), 200);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/* On a node started without --policy, a policy PUT /v1/policy accepts is kept in
 * DATA/policy.lua, and `strata serve` without --policy runs that file after a restart.
 * A merge_max_generations over merge_max_inputs shows the value that runs and the clamp. */
TEST(policy_put_persists_and_a_restart_runs_it)
{
	struct node n;
	REQUIRE(node_up(&n, "putkeep", NULL) == 0);
	const char *pol = "-- kept\nreturn {\n  flush_interval_s = 0,\n  merge_max_generations = 32,\n"
			  "  on_seal = function(shard, info) strata.log.info('sealed', info.generations) end,\n}\n";
	char kept[700];
	snprintf(kept, sizeof(kept), "%s/policy.lua", n.dir);
	char *r = NULL;
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", pol, strlen(pol), NULL, &r, NULL), 200);
	json_t *o = json_loads(r, 0, NULL);
	const char *persisted = json_string_value(json_object_get(o, "persisted"));
	CHECK(persisted != NULL && strcmp(persisted, kept) == 0);
	CHECK_EQ(json_integer_value(json_object_get(o, "version")), 2);
	json_t *check = json_object_get(o, "check");
	CHECK(json_is_true(json_object_get(check, "ok")));
	CHECK_EQ(json_array_size(json_object_get(check, "runs")), 5);
	json_t *log0 = json_object_get(json_array_get(json_object_get(check, "runs"), 0), "log");
	CHECK(json_array_size(log0) == 1 && strstr(json_string_value(json_array_get(log0, 0)), "sealed") != NULL);
	json_decref(o);
	free(r);
	char *text = file_text(kept);
	CHECK(text != NULL && strcmp(text, pol) == 0);
	free(text);
	json_t *p = policy_json(&n);
	REQUIRE(p != NULL);
	CHECK(str_is(p, "source_path", kept));
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(p, "settings"), "merge_max_generations")), 8);
	json_t *c = json_array_get(json_object_get(p, "clamped"), 0);
	CHECK(str_is(c, "setting", "merge_max_generations"));
	CHECK_EQ(json_integer_value(json_object_get(c, "asked")), 32);
	CHECK_EQ(json_integer_value(json_object_get(c, "effective")), 8);
	CHECK(json_string_value(json_object_get(c, "why")) != NULL &&
	      strstr(json_string_value(json_object_get(c, "why")), "merge_max_inputs = 8") != NULL);
	json_decref(p);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
	/* The log said it once, when the policy loaded. */
	char *log = file_text(n.log);
	CHECK(log != NULL && strstr(log, "merge_max_generations = 8 (the policy asks 32; clamped to the engine's "
					 "merge_max_inputs = 8)") != NULL);
	free(log);
	/* A restart without --policy runs the kept file. */
	REQUIRE(node_start(&n, n.dir, NULL) == 0);
	p = policy_json(&n);
	REQUIRE(p != NULL);
	CHECK(str_is(p, "name", kept));
	CHECK(str_is(p, "source_path", kept));
	CHECK(str_is(p, "source", pol));
	json_decref(p);
	log = file_text(n.log);
	char says[800];
	snprintf(says, sizeof(says), "policy %s,", kept);
	CHECK(log != NULL && strstr(log, says) != NULL);
	free(log);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/* With --policy FILE, a policy PUT accepts is written over FILE (and loaded once). When
 * FILE cannot be written, the PUT is refused with a 5xx naming it and the running
 * policy stays. */
TEST(policy_put_writes_the_policy_file_or_refuses)
{
	struct node n;
	node_dir(&n, "putfile");
	char sub[700], pol[800];
	snprintf(sub, sizeof(sub), "%s/conf", n.dir);
	REQUIRE(mkdir(sub, 0755) == 0);
	snprintf(pol, sizeof(pol), "%s/mine.lua", sub);
	REQUIRE(write_file(pol, "return { flush_interval_s = 0, merge_max_generations = 4 }\n") == 0);
	const char *flags[] = {"--policy", pol, NULL};
	REQUIRE(node_start(&n, n.dir, flags) == 0);
	const char *put = "-- from PUT\nreturn { flush_interval_s = 0, merge_max_generations = 6 }\n";
	char *r = NULL;
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", put, strlen(put), NULL, &r, NULL), 200);
	json_t *o = json_loads(r, 0, NULL);
	const char *persisted = json_string_value(json_object_get(o, "persisted"));
	CHECK(persisted != NULL && strcmp(persisted, pol) == 0);
	json_decref(o);
	free(r);
	char *text = file_text(pol);
	CHECK(text != NULL && strcmp(text, put) == 0);
	free(text);
	char kept[700];
	snprintf(kept, sizeof(kept), "%s/policy.lua", n.dir);
	CHECK(access(kept, F_OK) != 0);
	/* The file's directory is gone: nothing can be written there. */
	unlink(pol);
	REQUIRE(rmdir(sub) == 0);
	const char *next = "return { flush_interval_s = 0, merge_max_generations = 2 }\n";
	CHECK_EQ(http_status(&n, "PUT", "/v1/policy", next, strlen(next), NULL, &r, NULL), 500);
	o = json_loads(r, 0, NULL);
	CHECK(str_is(o, "error", "policy not persisted"));
	CHECK(str_is(o, "path", pol));
	const char *detail = json_string_value(json_object_get(o, "detail"));
	CHECK(detail != NULL && strstr(detail, pol) != NULL && strstr(detail, "No such file or directory") != NULL);
	json_decref(o);
	free(r);
	json_t *p = policy_json(&n);
	REQUIRE(p != NULL);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(p, "settings"), "merge_max_generations")), 6);
	CHECK_EQ(json_integer_value(json_object_get(p, "version")), 2);
	json_decref(p);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(sighup_reloads_the_policy_file)
{
	struct node n;
	node_dir(&n, "hup");
	char pol[700];
	snprintf(pol, sizeof(pol), "%s/policy.lua", n.dir);
	REQUIRE(write_file(pol, "return { flush_interval_s = 0, merge_max_generations = 4 }\n") == 0);
	const char *flags[] = {"--policy", pol, "--no-watch-policy", NULL};
	REQUIRE(node_start(&n, n.dir, flags) == 0);
	REQUIRE(write_file(pol, "return { flush_interval_s = 0, merge_max_generations = 6 }\n") == 0);
	kill(n.pid, SIGHUP);
	long long version = 0;
	for (int i = 0; i < 400 && version != 2; i++) {
		char *r = NULL;
		http_get(&n, "/v1/policy", &r, NULL);
		version = json_int_of(r, "version");
		free(r);
		if (version != 2)
			sleep_ms(5);
	}
	CHECK_EQ(version, 2);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/** Whether promtool is on PATH. */
static int
have_promtool(void)
{
	return system("command -v promtool >/dev/null 2>&1") == 0;
}

TEST(metrics_parse_as_prometheus_text)
{
	struct node n;
	REQUIRE(node_up(&n, "metrics", NULL) == 0);
	const char *row = "{\"key\":\"m\",\"value\":\"1\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/0/rows", row, strlen(row), NULL), 200);
	CHECK(value_is(&n, 0, "m", "1", 1));
	CHECK_EQ(get_status(&n, 0, "nope"), 404);
	CHECK_EQ(http_post(&n, "/v1/shards/0/seal", NULL, 0, NULL), 200);
	CHECK_EQ(http_post(&n, "/v1/shards/0/merge-wal", NULL, 0, NULL), 200);
	char *m = NULL;
	size_t ml = 0;
	REQUIRE_EQ(http_get(&n, "/metrics", &m, &ml), 200);
	const char *want[] = {"strata_append_latency_seconds_bucket{le=\"+Inf\"} 1\n",
			      "strata_append_latency_seconds_count 1\n",
			      "strata_get_latency_seconds_count 2\n",
			      "strata_exclusive_lock_hold_seconds_bucket{le=\"1e-06\"}",
			      "strata_exclusive_lock_wait_seconds_count",
			      "process_resident_memory_bytes ",
			      "process_open_fds ",
			      "strata_pending_generations{shard=\"1\"} 0\n",
			      "strata_merge_passes_total{shard=\"0\"} 1\n",
			      "strata_merge_read_bytes_total{shard=\"0\"}",
			      "strata_seals_total{shard=\"0\"} 1\n",
			      "strata_wal_bytes{shard=\"0\"}",
			      "strata_policy_reloads_total 0\n",
			      "strata_policy_hook_errors_total",
			      "strata_http_requests_total{handler=\"rows\",method=\"POST\",code=\"200\"} 1\n",
			      "strata_http_requests_total{handler=\"row\",method=\"GET\",code=\"404\"} 1\n",
			      "strata_http_open_connections 1\n",
			      "strata_deletes_pending_bytes ",
			      NULL};
	for (int i = 0; want[i] != NULL; i++)
		if (strstr(m, want[i]) == NULL) {
			fprintf(stderr, "  /metrics lacks: %s\n", want[i]);
			harness_cur_failed = 1;
		}
	/* The merge folded one generation: its object is queued, then the background
	 * executor's reaper deletes it. */
	for (int i = 0; i < 500 && strstr(m, "strata_deleted_objects_total 1\n") == NULL; i++) {
		free(m);
		m = NULL;
		usleep(10000);
		REQUIRE_EQ(http_get(&n, "/metrics", &m, &ml), 200);
	}
	CHECK(strstr(m, "strata_deleted_objects_total 1\n") != NULL);
	CHECK(strstr(m, "strata_deletes_pending_objects 0\n") != NULL);
	CHECK(strstr(m, "strata_deleted_bytes_total 0\n") == NULL);
	if (have_promtool()) {
		char path[700], cmd[800];
		snprintf(path, sizeof(path), "%s/metrics.txt", n.dir);
		FILE *f = fopen(path, "w");
		REQUIRE(f != NULL);
		fwrite(m, 1, ml, f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' 1>&2", path);
		CHECK_EQ(system(cmd), 0);
	} else {
		printf("# skip promtool check: promtool is not installed (apt-get install prometheus)\n");
		int bad = 0;
		for (char *line = m; *line;) {
			char *nl = strchr(line, '\n');
			if (nl == NULL) {
				bad++;
				break;
			}
			if (*line != '#' && strchr(line, ' ') == NULL)
				bad++;
			line = nl + 1;
		}
		CHECK_EQ(bad, 0);
	}
	free(m);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/** GET /v1/stats and return policy.hook_errors, or -1. */
static long long
policy_hook_errors(struct node *n)
{
	char *b = NULL;
	long long v = -1;
	if (http_get(n, "/v1/stats", &b, NULL) == 200) {
		json_t *o = json_loads(b, 0, NULL);
		json_t *e = json_object_get(json_object_get(o, "policy"), "hook_errors");
		v = json_is_integer(e) ? json_integer_value(e) : -1;
		json_decref(o);
	}
	free(b);
	return v;
}

/* Hooks run on the policy runtime's own loop thread, never on the one serving clients:
 * with a hook that loops until its CPU budget (200 ms) stops it, once a second on every
 * shard, appends and /healthz still answer in a fraction of that budget (all but 2%
 * of the rounds under 100 ms, every one under the budget). (The limit is an order of magnitude, not a benchmark: on the old arrangement, where the hook ran
 * on the HTTP loop, requests waited for up to a whole budget.) --sync none keeps the
 * disk out of what is measured. */
/** The slow-request log's entry of GET /v1/slow-requests (parsed; caller json_decrefs). */
static json_t *
slow_log(struct node *n)
{
	char *r = NULL;
	json_t *o = http_get(n, "/v1/slow-requests", &r, NULL) == 200 ? json_loads(r, 0, NULL) : NULL;
	free(r);
	return o;
}

/** The value of the Prometheus sample line that starts with series (name and labels), or -1. */
/** The value of series in the exposition text m, or -1. */
static double
metric_in(const char *m, const char *series)
{
	size_t sl = strlen(series);
	for (const char *p = m; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, sl) == 0 && p[sl] == ' ')
			return atof(p + sl + 1);
	return -1;
}

static double
metric_value(struct node *n, const char *series)
{
	char *m = NULL;
	double v = http_get(n, "/metrics", &m, NULL) == 200 ? metric_in(m, series) : -1;
	free(m);
	return v;
}

/** The loop lag's sample count and those under 100 ms, from one scrape. */
static void
loop_lag_counts(struct node *n, double *count, double *under)
{
	char *m = NULL;
	*count = *under = -1;
	if (http_get(n, "/metrics", &m, NULL) == 200) {
		*count = metric_in(m, "strata_http_loop_lag_seconds_count");
		*under = metric_in(m, "strata_http_loop_lag_seconds_bucket{le=\"0.1\"}");
	}
	free(m);
}

/** The newest entry of log o answered by handler, or NULL. */
static json_t *
slow_entry(json_t *o, const char *handler)
{
	json_t *reqs = json_object_get(o, "requests"), *e;
	size_t i;
	json_array_foreach(reqs, i, e) if (str_is(e, "handler", handler)) return e;
	return NULL;
}

/** Stage s of entry e, µs (-1 when absent). */
static double
stage_us(json_t *e, const char *s)
{
	json_t *v = json_object_get(json_object_get(e, "stages_us"), s);
	return json_is_number(v) ? json_number_value(v) : -1;
}

TEST(slow_requests_are_logged_with_the_stages_they_spent_their_time_in)
{
	struct node n;
	node_dir(&n, "slowlog");
	char tokfile[700];
	snprintf(tokfile, sizeof(tokfile), "%s/token", n.dir);
	REQUIRE(write_file(tokfile, "t0k\n") == 0);
	/* 150 ms: a request on loopback takes far less unless it is held up. */
	const char *flags[] = {"--token-file", tokfile, "--slow-request-us", "150000", "--slow-requests", "4", NULL};
	REQUIRE(node_start(&n, n.dir, flags) == 0);
	const char *auth[] = {"Authorization: Bearer t0k", NULL};
	const char *row = "{\"key\":\"s\",\"value\":\"1\"}\n";
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/rows", row, strlen(row), auth, NULL, NULL), 200);
	CHECK(value_is(&n, 0, "s", "1", 1));
	json_t *o = slow_log(&n);
	REQUIRE(o != NULL);
	CHECK_EQ(json_integer_value(json_object_get(o, "capacity")), 4);
	CHECK(json_number_value(json_object_get(o, "threshold_us")) == 150000.0);
	CHECK_EQ(json_integer_value(json_object_get(o, "kept")), 0); /* nothing was slow */
	json_decref(o);
	/* Every append and get went through each stage of a worker job. */
	CHECK(metric_value(&n, "strata_http_stage_seconds_count{stage=\"engine\"}") == 2);
	CHECK(metric_value(&n, "strata_http_stage_seconds_count{stage=\"queue\"}") == 2);
	CHECK(metric_value(&n, "strata_http_stage_seconds_count{stage=\"reply\"}") == 2);
	/* A seal runs on the background executor: not in the foreground's stages. */
	CHECK_EQ(http_status(&n, "POST", "/v1/shards/0/seal", NULL, 0, auth, NULL, NULL), 200);
	CHECK(metric_value(&n, "strata_http_stage_seconds_count{stage=\"engine\"}") == 2);

	/* An append whose client sends its body 300 ms after its headers: slow, and the
	 * time is in "read", not in the engine. The margins (300 ms against the 150 ms
	 * threshold, 50 ms of lateness allowed) hold on a loaded 2-core machine, where the
	 * node may read the headers late. */
	int fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	char head[256];
	snprintf(head, sizeof(head),
		 "POST /v1/shards/0/rows HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0k\r\n"
		 "Content-Type: application/x-ndjson\r\nContent-Length: %zu\r\n\r\n",
		 strlen(row));
	CHECK_EQ(raw_sends(fd, head), 0);
	sleep_ms(300);
	CHECK_EQ(raw_sends(fd, row), 0);
	size_t len = 0;
	char *resp = raw_read_responses(fd, 1, 5000, &len);
	CHECK_EQ(status_of(resp), 200);
	free(resp);
	close(fd);
	o = slow_log(&n);
	REQUIRE(o != NULL);
	CHECK_EQ(json_integer_value(json_object_get(o, "kept")), 1);
	CHECK_EQ(json_integer_value(json_object_get(o, "logged")), 1);
	json_t *e = slow_entry(o, "rows");
	REQUIRE(e != NULL);
	CHECK(str_is(e, "method", "POST"));
	CHECK(str_is(e, "path", "/v1/shards/0/rows"));
	CHECK_EQ(json_integer_value(json_object_get(e, "status")), 200);
	double total = json_number_value(json_object_get(e, "total_us"));
	CHECK(total >= 250000);
	CHECK(stage_us(e, "read") >= 250000);
	CHECK(stage_us(e, "engine") > 0);
	CHECK(stage_us(e, "engine") < total - 250000);
	/* Every stage is there, and they add up to the total. */
	static const char *const stages[] = {"read", "loop", "queue", "decode", "engine", "handoff", "respond", "reply"};
	double sum = 0;
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		CHECK(stage_us(e, stages[i]) >= 0);
		sum += stage_us(e, stages[i]);
	}
	CHECK(sum > total - 0.05 && sum < total + 0.05);
	json_decref(o);
	CHECK(metric_value(&n, "strata_http_slow_requests_total") == 1);
	CHECK(metric_value(&n, "strata_http_stage_seconds_bucket{stage=\"read\",le=\"0.1\"}") == 2);
	CHECK(metric_value(&n, "strata_http_stage_seconds_count{stage=\"read\"}") == 3);

	/* A request answered on the loop (here a 404 that arrives slowly) spends no time in
	 * a worker's stages. The log keeps the newest 4. */
	for (int i = 0; i < 5; i++) {
		fd = raw_connect(&n);
		REQUIRE(fd >= 0);
		CHECK_EQ(raw_sends(fd, "GET /nowhere HTTP/1.1\r\n"), 0);
		sleep_ms(300);
		CHECK_EQ(raw_sends(fd, "Host: x\r\n\r\n"), 0);
		resp = raw_read_responses(fd, 1, 5000, &len);
		CHECK_EQ(status_of(resp), 404);
		free(resp);
		close(fd);
	}
	o = slow_log(&n);
	REQUIRE(o != NULL);
	CHECK_EQ(json_integer_value(json_object_get(o, "kept")), 4);
	json_int_t logged = json_integer_value(json_object_get(o, "logged"));
	CHECK(logged >= 6);
	CHECK(slow_entry(o, "rows") == NULL); /* pushed out */
	e = slow_entry(o, "not_found");
	REQUIRE(e != NULL);
	CHECK(str_is(e, "path", "/nowhere"));
	CHECK(stage_us(e, "read") >= 250000);
	CHECK(stage_us(e, "queue") == 0 && stage_us(e, "engine") == 0 && stage_us(e, "handoff") == 0);
	json_decref(o);

	/* Emptying it needs the token, and keeps the counter. */
	CHECK_EQ(http_status(&n, "DELETE", "/v1/slow-requests", NULL, 0, NULL, NULL, NULL), 401);
	char *r = NULL;
	CHECK_EQ(http_status(&n, "DELETE", "/v1/slow-requests", NULL, 0, auth, &r, NULL), 200);
	CHECK_EQ(json_int_of(r, "cleared"), 4);
	free(r);
	o = slow_log(&n);
	REQUIRE(o != NULL);
	CHECK_EQ(json_integer_value(json_object_get(o, "kept")), 0);
	CHECK(json_integer_value(json_object_get(o, "logged")) >= logged);
	json_decref(o);
	CHECK(metric_value(&n, "strata_http_slow_requests_total") >= (double)logged);
	CHECK_EQ(http_status(&n, "POST", "/v1/slow-requests", NULL, 0, auth, NULL, NULL), 405);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);

	/* --slow-request-us 0 logs nothing, however slow. */
	const char *off[] = {"--slow-request-us", "0", NULL};
	REQUIRE(node_up(&n, "slowoff", off) == 0);
	fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	CHECK_EQ(raw_sends(fd, "GET /healthz HTTP/1.1\r\n"), 0);
	sleep_ms(40);
	CHECK_EQ(raw_sends(fd, "Host: x\r\n\r\n"), 0);
	resp = raw_read_responses(fd, 1, 5000, &len);
	CHECK_EQ(status_of(resp), 200);
	free(resp);
	close(fd);
	o = slow_log(&n);
	REQUIRE(o != NULL);
	CHECK_EQ(json_integer_value(json_object_get(o, "kept")), 0);
	CHECK_EQ(json_integer_value(json_object_get(o, "logged")), 0);
	CHECK(json_number_value(json_object_get(o, "threshold_us")) == 0.0);
	json_decref(o);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(the_loop_lag_is_sampled_and_shows_a_stopped_loop)
{
	struct node n;
	REQUIRE(node_up(&n, "looplag", NULL) == 0);
	sleep_ms(200);
	/* A 10 ms timer: some 20 samples in 200 ms. */
	double c0, u0;
	loop_lag_counts(&n, &c0, &u0);
	CHECK(c0 >= 5 && u0 <= c0);
	/* The process stopped for 300 ms: the loop could not read a socket, and says so. */
	REQUIRE(kill(n.pid, SIGSTOP) == 0);
	sleep_ms(300);
	REQUIRE(kill(n.pid, SIGCONT) == 0);
	sleep_ms(50);
	json_t *o = slow_log(&n);
	REQUIRE(o != NULL);
	double lag_us = json_number_value(json_object_get(o, "loop_lag_max_us"));
	CHECK(lag_us >= 250000.0 && lag_us < 5e6);
	json_decref(o);
	double c1, u1;
	loop_lag_counts(&n, &c1, &u1);
	CHECK(c1 > c0);
	CHECK(c1 - u1 >= 1 + (c0 - u0)); /* the stop's sample is over 100 ms */
	/* Emptying the slow-request log starts the longest lag again. */
	char *r = NULL;
	CHECK_EQ(http_status(&n, "DELETE", "/v1/slow-requests", NULL, 0, NULL, &r, NULL), 200);
	free(r);
	sleep_ms(50);
	o = slow_log(&n);
	REQUIRE(o != NULL);
	CHECK(json_number_value(json_object_get(o, "loop_lag_max_us")) < 250000.0);
	json_decref(o);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(looping_hook_never_delays_clients)
{
	struct node n;
	node_dir(&n, "hook");
	/* A PUT would refuse this policy (its trial runs on_seal): it comes as a file. */
	char polfile[700];
	snprintf(polfile, sizeof(polfile), "%s/loop.lua", n.dir);
	REQUIRE(write_file(polfile, "return { flush_interval_s = 1, on_seal = function() while true do end end }\n") == 0);
	const char *flags[] = {"--sync", "none", "--policy", polfile, NULL};
	REQUIRE(node_start(&n, n.dir, flags) == 0);
	long long errors0 = policy_hook_errors(&n);
	REQUIRE(errors0 >= 0);
	enum { ROUNDS = 200, PACE_MS = 15, LIMIT_MS = 100 };
	uint64_t worst_append = 0, worst_health = 0, t_begin = now_ms();
	int slow = 0, failed = 0;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t_round = now_ms();
		char row[96];
		snprintf(row, sizeof(row), "{\"key\":\"hook:%04d\",\"value\":\"v%d\"}\n", i, i);
		char path[64];
		snprintf(path, sizeof(path), "/v1/shards/%d/rows", i % 2);
		uint64_t t0 = now_ms();
		long st = http_post(&n, path, row, strlen(row), NULL);
		uint64_t t1 = now_ms();
		long hst = http_get(&n, "/healthz", NULL, NULL);
		uint64_t t2 = now_ms();
		failed += st != 200 || hst != 200;
		if (t1 - t0 >= LIMIT_MS || t2 - t1 >= LIMIT_MS) {
			if (slow++ < 5)
				fprintf(stderr, "  round %d: append %llu ms, /healthz %llu ms\n", i,
					(unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1));
		}
		worst_append = t1 - t0 > worst_append ? t1 - t0 : worst_append;
		worst_health = t2 - t1 > worst_health ? t2 - t1 : worst_health;
		uint64_t spent = now_ms() - t_round;
		if (spent < PACE_MS)
			sleep_ms((unsigned)(PACE_MS - spent));
	}
	uint64_t elapsed = now_ms() - t_begin;
	printf("# looping hook: %d appends and /healthz in %llu ms; slowest append %llu ms, slowest /healthz "
	       "%llu ms; %d of %d rounds at or over %d ms\n",
	       ROUNDS, (unsigned long long)elapsed, (unsigned long long)worst_append,
	       (unsigned long long)worst_health, slow, ROUNDS, LIMIT_MS);
	CHECK_EQ(failed, 0);
	/* Hooks on the serving loop hold it for whole runs: requests wait up to a budget
	 * and more (seen: 1129 ms, in 3 rounds of 200). A round or two over the limit but
	 * under the budget is the machine (seen: one 111 ms append while 5 builds ran on
	 * 2 cores). */
	CHECK(slow <= ROUNDS / 50);
	CHECK(worst_append < 200 && worst_health < 200);
	long long errors = policy_hook_errors(&n);
	for (int i = 0; i < 300 && errors <= errors0; i++) {
		sleep_ms(10);
		errors = policy_hook_errors(&n);
	}
	CHECK(errors > errors0);
	char *r = NULL;
	REQUIRE_EQ(http_get(&n, "/v1/policy", &r, NULL), 200);
	json_t *p = json_loads(r, 0, NULL);
	const char *last = json_string_value(json_object_get(p, "last_error"));
	CHECK(last != NULL && strstr(last, "budget") != NULL);
	json_decref(p);
	free(r);
	CHECK(value_is(&n, 1, "hook:0199", "v199", 4));
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

/** One appending thread of the concurrency tests. */
struct appender {
	/** Node appended to. */
	struct node *n;
	/** Thread number (in the keys). */
	int id;
	/** Batches of 5 rows to send. */
	int batches;
	/** Rows 0..acked-1 of this thread are acknowledged (atomic). */
	int acked;
	/** Set by the test to stop early (atomic). */
	int *stop;
	/** Set when the thread ends (atomic). */
	int done;
};

static void *
appender_main(void *p)
{
	struct appender *a = p;
	char body[4096];
	for (int b = 0; b < a->batches && !__atomic_load_n(a->stop, __ATOMIC_RELAXED); b++) {
		size_t len = 0;
		for (int r = 0; r < 5; r++)
			len += (size_t)snprintf(body + len, sizeof(body) - len,
						"{\"key\":\"w%d-%05d\",\"value\":\"v%d-%d\"}\n", a->id, b * 5 + r,
						a->id, b * 5 + r);
		char *resp = NULL;
		long st = http_post(a->n, "/v1/shards/0/rows", body, len, &resp);
		int ok = st == 200 && json_int_of(resp, "appended") == 5;
		free(resp);
		if (!ok)
			break;
		__atomic_store_n(&a->acked, (b + 1) * 5, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&a->done, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int
acked_sum(struct appender *ap, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += __atomic_load_n(&ap[i].acked, __ATOMIC_RELAXED);
	return s;
}

/** Start n appenders of batches batches each on node nd; *stop ends them early. */
static void
appenders_start(struct appender *ap, pthread_t *th, int n, struct node *nd, int batches, int *stop)
{
	for (int i = 0; i < n; i++) {
		ap[i] = (struct appender){.n = nd, .id = i, .batches = batches, .stop = stop};
		pthread_create(&th[i], NULL, appender_main, &ap[i]);
	}
}

static void
appenders_join(pthread_t *th, int n)
{
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

/** Rows of n appenders, every step-th acknowledged one, that node nd does not hold;
 *  *checked counts those read. */
static int
appenders_missing(struct appender *ap, int n, struct node *nd, int step, int *checked)
{
	int missing = 0;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < ap[i].acked; k += step) {
			char key[32], val[32];
			snprintf(key, sizeof(key), "w%d-%05d", i, k);
			snprintf(val, sizeof(val), "v%d-%d", i, k);
			(*checked)++;
			if (!value_is(nd, 0, key, val, strlen(val)))
				missing++;
		}
	return missing;
}

/** Appenders still running. */
static int
appenders_running(struct appender *ap, int n)
{
	int r = 0;
	for (int i = 0; i < n; i++)
		r += !__atomic_load_n(&ap[i].done, __ATOMIC_RELAXED);
	return r;
}

/** Wait until n appenders acknowledged target rows in all; 0 when they all ended first. */
static int
wait_acked(struct appender *ap, int n, int target)
{
	for (;;) {
		if (acked_sum(ap, n) >= target)
			return 1;
		if (appenders_running(ap, n) == 0)
			return acked_sum(ap, n) >= target;
		sleep_ms(1);
	}
}

TEST(merge_wal_under_concurrent_appends_loses_nothing)
{
	struct node n;
	REQUIRE(node_up(&n, "concurrent", NULL) == 0);
	int stop = 0;
	struct appender ap[4];
	pthread_t th[4];
	appenders_start(ap, th, 4, &n, 120, &stop);
	int merges = 0, reclaimed = 0;
	CHECK(wait_acked(ap, 4, 1));
	for (int k = 0; k < 10 || appenders_running(ap, 4) > 0; k++) {
		char *r = NULL;
		if (http_post(&n, "/v1/shards/0/seal", NULL, 0, NULL) == 200 &&
		    http_post(&n, "/v1/shards/0/merge-wal", NULL, 0, &r) == 200) {
			merges++;
			reclaimed += (int)json_int_of(r, "reclaimed");
		}
		free(r);
		sleep_ms(5);
	}
	appenders_join(th, 4);
	CHECK(merges > 0);
	CHECK(reclaimed > 0);
	int total = 0;
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(ap[i].acked, 600);
		total += ap[i].acked;
	}
	CHECK_EQ(scan_count(&n, "?prefix=w"), total);
	int checked = 0;
	CHECK_EQ(appenders_missing(ap, 4, &n, 37, &checked), 0);
	CHECK(shard_stat(&n, 0, "merges") > 0);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(acknowledged_rows_survive_sigkill)
{
	struct node n;
	REQUIRE(node_up(&n, "sigkill", NULL) == 0);
	int stop = 0;
	struct appender ap[3];
	pthread_t th[3];
	appenders_start(ap, th, 3, &n, 100000, &stop);
	CHECK(wait_acked(ap, 3, 600));
	CHECK_EQ(http_post(&n, "/v1/shards/0/seal", NULL, 0, NULL), 200);
	CHECK(wait_acked(ap, 3, 900));
	CHECK_EQ(node_stop(&n, SIGKILL), 128 + SIGKILL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	appenders_join(th, 3);
	struct node again;
	REQUIRE(node_start(&again, n.dir, NULL) == 0);
	int checked = 0;
	int missing = appenders_missing(ap, 3, &again, 1, &checked);
	CHECK(checked >= 900);
	CHECK_EQ(missing, 0);
	CHECK_EQ(node_stop(&again, SIGTERM), 0);
}

TEST(second_node_on_the_same_dir_is_refused)
{
	struct node a, b;
	REQUIRE(node_up(&a, "lock", NULL) == 0);
	const char *row = "{\"key\":\"first\",\"value\":\"node\"}\n";
	CHECK_EQ(http_post(&a, "/v1/shards/0/rows", row, strlen(row), NULL), 200);
	int st = node_spawn(&b, a.dir, NULL);
	CHECK_EQ(st, 1);
	CHECK(b.pid == 0);
	if (b.pid != 0)
		node_stop(&b, SIGKILL);
	FILE *f = fopen(b.log, "r");
	char line[1024] = "";
	if (f != NULL) {
		if (fgets(line, sizeof(line), f) == NULL)
			line[0] = '\0';
		fclose(f);
	}
	char holder[64];
	snprintf(holder, sizeof(holder), "is in use (pid %ld holds", (long)a.pid);
	if (strstr(line, holder) == NULL)
		fprintf(stderr, "  log line: %s", line);
	CHECK(strstr(line, holder) != NULL);
	CHECK(value_is(&a, 0, "first", "node", 4));
	CHECK_EQ(http_post(&a, "/v1/shards/0/rows", row, strlen(row), NULL), 200);
	CHECK_EQ(shard_stat(&a, 0, "writer_epoch"), 1);
	CHECK_EQ(node_stop(&a, SIGTERM), 0);
}

TEST(sigterm_finishes_requests_in_flight_and_exits_zero)
{
	struct node n;
	REQUIRE(node_up(&n, "sigterm", NULL) == 0);
	const char *row = "{\"key\":\"before\",\"value\":\"stop\"}\n";
	CHECK_EQ(http_post(&n, "/v1/shards/1/rows", row, strlen(row), NULL), 200);
	/* A request whose headers arrived (100 Continue seen) but whose body has not. */
	int fd = raw_connect(&n);
	REQUIRE(fd >= 0);
	const char *body = "{\"key\":\"inflight\",\"value\":\"done\"}\n";
	char hdr[256];
	snprintf(hdr, sizeof(hdr),
		 "POST /v1/shards/1/rows HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %zu\r\n\r\n",
		 strlen(body));
	raw_sends(fd, hdr);
	char *cont = raw_read_responses(fd, 1, 5000, NULL);
	CHECK(strncmp(cont, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
	free(cont);
	int idle = raw_connect(&n);
	REQUIRE(idle >= 0);
	kill(n.pid, SIGTERM);
	/* The drain has begun once the listening socket is gone. */
	for (int i = 0; i < 2000; i++) {
		int probe = raw_connect(&n);
		if (probe < 0)
			break;
		close(probe);
		sleep_ms(5);
	}
	raw_sends(fd, body);
	int eof = 0;
	char *resp = raw_read(fd, 10000, NULL, &eof);
	CHECK_EQ(status_of(resp), 200);
	CHECK(strstr(resp, "Connection: close") != NULL);
	CHECK(eof);
	free(resp);
	close(fd);
	char *nothing = raw_read(idle, 10000, NULL, &eof);
	CHECK(eof);
	CHECK_EQ(strlen(nothing), 0);
	free(nothing);
	close(idle);
	int st = wait_exit(n.pid, 20000);
	CHECK_EQ(st, 0);
	if (st != 0)
		print_log(&n);
	n.pid = 0;
	struct node again;
	REQUIRE(node_start(&again, n.dir, NULL) == 0);
	CHECK(value_is(&again, 1, "before", "stop", 4));
	CHECK(value_is(&again, 1, "inflight", "done", 4));
	CHECK_EQ(node_stop(&again, SIGINT), 0);
}

/** A connection on which /healthz answered 200 (retried while the node still counts
 *  closed connections against the limit), or -1. */
static int
held_connection(struct node *n)
{
	for (int i = 0; i < 500; i++) {
		int fd = raw_connect(n);
		if (fd < 0)
			return -1;
		raw_sends(fd, "GET /healthz HTTP/1.1\r\n\r\n");
		char *r = raw_read_responses(fd, 1, 5000, NULL);
		int st = status_of(r);
		free(r);
		if (st == 200)
			return fd;
		close(fd);
		sleep_ms(10);
	}
	return -1;
}

TEST(connection_limit_refuses_extra_clients)
{
	struct node n;
	const char *flags[] = {"--max-connections", "2", NULL};
	REQUIRE(node_up(&n, "maxconn", flags) == 0);
	int a = held_connection(&n), b = held_connection(&n);
	REQUIRE(a >= 0 && b >= 0);
	int eof = 0;
	CHECK_EQ(raw_exchange(&n, "", 0, &eof), 503);
	CHECK(eof);
	/* The held connections still serve; once one closes, a new client gets in. */
	raw_sends(a, "GET /healthz HTTP/1.1\r\n\r\n");
	char *ra = raw_read_responses(a, 1, 5000, NULL);
	CHECK_EQ(status_of(ra), 200);
	free(ra);
	close(b);
	int d = held_connection(&n);
	CHECK(d >= 0);
	close(d);
	close(a);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
}

TEST(json_logs_and_help)
{
	struct node n;
	const char *flags[] = {"--log-format", "json", NULL};
	REQUIRE(node_up(&n, "json", flags) == 0);
	CHECK_EQ(node_stop(&n, SIGTERM), 0);
	FILE *f = fopen(n.log, "r");
	REQUIRE(f != NULL);
	char line[2048];
	int lines = 0, json_lines = 0, has_address = 0;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		json_t *o = json_loads(line, 0, NULL);
		if (o != NULL && json_is_string(json_object_get(o, "msg")) &&
		    json_is_string(json_object_get(o, "level")) && json_is_string(json_object_get(o, "ts")))
			json_lines++;
		if (o != NULL && strstr(json_string_value(json_object_get(o, "msg")), "listening on http://127.0.0.1:"))
			has_address = 1;
		json_decref(o);
	}
	fclose(f);
	CHECK(lines >= 2);
	CHECK_EQ(json_lines, lines);
	CHECK(has_address);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "'%s' serve --help > '%s/help.txt'", strata_bin(), n.dir);
	REQUIRE_EQ(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/help.txt", n.dir);
	f = fopen(cmd, "r");
	REQUIRE(f != NULL);
	char help[32768];
	size_t hl = fread(help, 1, sizeof(help) - 1, f);
	help[hl] = '\0';
	fclose(f);
	const char *flags_listed[] = {"--listen", "--data", "--shards", "--policy", "--token-file", "--max-body",
				      "--sync", "--log-format", "--max-connections", "--header-timeout-ms", NULL};
	for (int i = 0; flags_listed[i]; i++)
		CHECK(strstr(help, flags_listed[i]) != NULL);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	if (access(strata_bin(), X_OK) != 0) {
		fprintf(stderr, "test_http_server: %s is not built (set STRATA_BIN or BUILD)\n", strata_bin());
		printf("not ok - strata_binary_present\n");
		return HARNESS_END("test_http_server") + 1;
	}
	tmp_root = harness_tmpdir("http");
	if (tmp_root == NULL)
		return 1;
	atexit(nodes_kill_all);
	signal(SIGINT, on_fatal_signal);
	signal(SIGTERM, on_fatal_signal);
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
#define RUN_NODE(fn)                                                                                    \
	do {                                                                                            \
		RUN(fn);                                                                                \
		nodes_kill_all();                                                                       \
	} while (0)
	RUN_NODE(append_get_scan_round_trip);
	RUN_NODE(delete_by_route_ndjson_and_binary_batch);
	RUN_NODE(slow_reader_gets_the_whole_scan);
	RUN_NODE(pipelined_requests_answered_in_order);
	RUN_NODE(chunked_body_accepted);
	RUN_NODE(bad_inputs_never_break_the_node);
	RUN_NODE(key_too_long_is_400_everywhere);
	RUN_NODE(token_required_for_mutations);
	RUN_NODE(policy_put_good_and_broken);
	RUN_NODE(policy_put_of_a_looping_hook_is_refused_and_the_policy_stays);
	RUN_NODE(policy_put_persists_and_a_restart_runs_it);
	RUN_NODE(policy_put_writes_the_policy_file_or_refuses);
	RUN_NODE(sighup_reloads_the_policy_file);
	RUN_NODE(metrics_parse_as_prometheus_text);
	RUN_NODE(the_loop_lag_is_sampled_and_shows_a_stopped_loop);
	RUN_NODE(looping_hook_never_delays_clients);
	RUN_NODE(merge_wal_under_concurrent_appends_loses_nothing);
	RUN_NODE(acknowledged_rows_survive_sigkill);
	RUN_NODE(second_node_on_the_same_dir_is_refused);
	RUN_NODE(sigterm_finishes_requests_in_flight_and_exits_zero);
	RUN_NODE(connection_limit_refuses_extra_clients);
	RUN_NODE(json_logs_and_help);
	RUN_NODE(slow_requests_are_logged_with_the_stages_they_spent_their_time_in);
	curl_global_cleanup();
	if (harness_failed == 0 && getenv("STRATA_TEST_KEEP") == NULL)
		harness_rmrf(tmp_root);
	else
		fprintf(stderr, "test_http_server: logs kept in %s\n", tmp_root);
	free(tmp_root);
	return HARNESS_END("test_http_server");
}
