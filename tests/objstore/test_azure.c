/*
 * test_azure.c — the Azure Blob object store (node/objstore/azure.c) and its HTTP client
 * (node/objstore/http.c) against a real Azurite, which tests/objstore/azure.sh starts
 * and names in STRATA_TEST_AZURE_ENDPOINT (http://127.0.0.1:PORT), with the well-known
 * development account's key in AZURE_STORAGE_KEY. Each test uses its own container. What
 * test_s3.c checks alike is in objstore_common.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../unit/harness.h"
#include "../../node/core/manifest.h"
#include "../../node/core/store.h"
#include "../../node/strata_host.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/http.h"
#include "../../node/objstore/objstore.h"
#include "../../node/strata.h"
#include "objstore_common.h"

#define ACCOUNT "devstoreaccount1"

static const char *endpoint;
static unsigned container_seq;

/** A fresh container's URL, with extra parameters (may be ""). */
static void
fresh_url(char *dst, size_t cap, const char *prefix, const char *extra)
{
	snprintf(dst, cap, "azure://" ACCOUNT "/t%u-%u%s%s?endpoint=%s%s", (unsigned)getpid(), ++container_seq,
		 prefix ? "/" : "", prefix ? prefix : "", endpoint, extra);
}

TEST(get_range_put_size_delete_roundtrip)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "");
	struct objstore *os = NULL;
	int orc = objstore_url_new(url, &os);
	if (orc != 0)
		fprintf(stderr, "  open %s: %s\n", url, diag_last());
	REQUIRE_EQ(orc, 0);
	CHECK(strncmp(os->name, "azure://" ACCOUNT "/", 8 + strlen(ACCOUNT) + 1) == 0);
	check_put_get_size_and_ranges(os);
	struct buf b = {0};
	CHECK_EQ(objstore_put_if_absent(os, "once", "1", 1), 0);
	CHECK_EQ(objstore_put_if_absent(os, "once", "2", 1), STRATA_EEXIST);
	CHECK(get_eq(os, "once", "1"));
	CHECK_EQ(objstore_del(os, "once"), 0);
	CHECK_EQ(objstore_del(os, "once"), 0); /* absent is fine */
	CHECK_EQ(objstore_get(os, "once", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_put_if_absent(os, "once", "3", 1), 0); /* absent again: it may be created */
	buf_destroy(&b);
	struct oshttp_stats st;
	struct oshttp_stats sr;
	oshttp_client_stats(objstore_azure_client(os), OSHTTP_OP_GET, &st);
	oshttp_client_stats(objstore_azure_client(os), OSHTTP_OP_GET_RANGE, &sr);
	CHECK(st.requests + sr.requests >= 8 && st.ok + sr.ok >= 5 && st.bytes_received + sr.bytes_received >= 12);
	CHECK(sr.requests >= 1);
	objstore_destroy(os);
}

TEST(list_is_byte_ordered_prefix_filtered_and_paged)
{
	char url[512];
	fresh_url(url, sizeof(url), "node-a/store", "&list_page=2");
	struct objstore *os = NULL, *other = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	/* The same container without the prefix: what lies outside the prefix stays out. */
	char bare[512];
	snprintf(bare, sizeof(bare), "%.*s?endpoint=%s", (int)(strstr(url, "/node-a") - url), url, endpoint);
	REQUIRE_EQ(objstore_url_new(bare, &other), 0);
	CHECK_EQ(put_str(other, "outside", "x"), 0);
	const char *keys[] = {"s/b", "s/a/2", "s/B", "s/a/10", "s/a/1", "t/z", "s/a-"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		CHECK_EQ(objstore_put(os, keys[i], "1234567890", i + 1), 0);
	check_listed(os, "s/", "s/B=3;s/a-=7;s/a/1=5;s/a/10=4;s/a/2=2;s/b=1;");
	struct seen s = {{0}, 0};
	CHECK_EQ(objstore_list(os, "", seen_cb, &s), 0);
	CHECK_EQ(s.n, 7);
	CHECK(strstr(s.text, "outside") == NULL);
	check_listed(os, "s/a/1", "s/a/1=5;s/a/10=4;");
	check_list_stops_and_pages(os, objstore_azure_client(os));
	objstore_destroy(other);
	objstore_destroy(os);
}

TEST(writer_puts_blocks_then_the_block_list)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "&block_bytes=65536");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	size_t n = 200000;
	uint8_t *data = pattern_new(n);
	REQUIRE(data != NULL);
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(os, "run/big", &w), 0);
	REQUIRE_EQ(write_in_pieces(w, data, n), 0);
	struct buf b = {0};
	CHECK_EQ(objstore_get(os, "run/big", &b), STRATA_NOTFOUND); /* not visible before commit */
	CHECK_EQ(objstore_writer_commit(w), 0);
	CHECK_EQ(objstore_get(os, "run/big", &b), 0);
	CHECK(b.len == n && memcmp(b.data, data, n) == 0);
	struct oshttp_stats st;
	oshttp_client_stats(objstore_azure_client(os), OSHTTP_OP_PART, &st);
	CHECK_EQ(st.ok, 4); /* 3 full blocks of 64 KiB and the rest */
	oshttp_client_stats(objstore_azure_client(os), OSHTTP_OP_COMMIT, &st);
	CHECK_EQ(st.ok, 1);
	/* A small write is one Put Blob; an aborted one leaves nothing. */
	int finished;
	check_small_and_aborted_writes(os, data, n, &finished);
	REQUIRE(finished);
	buf_destroy(&b);
	free(data);
	objstore_destroy(os);
}

/** A racer of the put-if-absent and CAS races. */
struct racer {
	/** The shared store. */
	struct objstore *os;
	/** The ETag to swap from (NULL: put_if_absent). */
	const char *etag;
	/** Its number. */
	int id;
	/** The result. */
	int rc;
};

static atomic_int race_gate;

static void *
racer_main(void *arg)
{
	struct racer *r = arg;
	while (atomic_load(&race_gate) == 0)
		;
	char v[32];
	snprintf(v, sizeof(v), "racer-%d", r->id);
	r->rc = r->etag == NULL ? objstore_put_if_absent(r->os, "contended", v, strlen(v))
				: objstore_put_if_match(r->os, "contended", v, strlen(v), r->etag);
	return NULL;
}

/** Run 16 racers; the number of winners, the others' results checked against lose_rc. */
static int
race(struct objstore *os, const char *etag, int lose_rc, int *winner)
{
	struct racer r[16];
	pthread_t t[16];
	atomic_store(&race_gate, 0);
	for (int i = 0; i < 16; i++) {
		r[i] = (struct racer){.os = os, .etag = etag, .id = i, .rc = 99};
		pthread_create(&t[i], NULL, racer_main, &r[i]);
	}
	atomic_store(&race_gate, 1);
	int wins = 0;
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		if (r[i].rc == 0) {
			wins++;
			*winner = i;
		} else if (r[i].rc != lose_rc) {
			fprintf(stderr, "  racer %d: rc %d\n", i, r[i].rc);
			wins += 100;
		}
	}
	return wins;
}

TEST(put_if_absent_race_has_exactly_one_winner)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	int winner = -1;
	CHECK_EQ(race(os, NULL, STRATA_EEXIST, &winner), 1);
	char want[32];
	snprintf(want, sizeof(want), "racer-%d", winner);
	CHECK(get_eq(os, "contended", want));
	objstore_destroy(os);
}

TEST(compare_and_swap_race_has_exactly_one_winner)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	REQUIRE_EQ(put_str(os, "contended", "v0"), 0);
	char etag[OBJSTORE_ETAG_MAX], after[OBJSTORE_ETAG_MAX];
	REQUIRE_EQ(objstore_etag(os, "contended", etag, sizeof(etag)), 0);
	CHECK(etag[0] != '\0');
	int winner = -1;
	CHECK_EQ(race(os, etag, STRATA_ECONFLICT, &winner), 1);
	char want[32];
	snprintf(want, sizeof(want), "racer-%d", winner);
	CHECK(get_eq(os, "contended", want));
	CHECK_EQ(objstore_etag(os, "contended", after, sizeof(after)), 0);
	CHECK(strcmp(etag, after) != 0);
	CHECK_EQ(objstore_put_if_match(os, "contended", "late", 4, etag), STRATA_ECONFLICT);
	CHECK(strstr(diag_last(), "stale") != NULL);
	CHECK_EQ(objstore_put_if_match(os, "contended", "next", 4, after), 0);
	CHECK(get_eq(os, "contended", "next"));
	CHECK_EQ(objstore_put_if_match(os, "gone", "x", 1, after), STRATA_ECONFLICT);
	CHECK_EQ(objstore_etag(os, "gone", after, sizeof(after)), STRATA_NOTFOUND);
	objstore_destroy(os);
}

TEST(a_wrong_key_is_refused_at_open_naming_the_account)
{
	const char *good = getenv("AZURE_STORAGE_KEY");
	REQUIRE(good != NULL);
	char *saved = strdup(good);
	/* A valid base64 key that is not the account's. */
	setenv("AZURE_STORAGE_KEY", "c3RyYXRhLXRlc3Qtd3Jvbmcta2V5LXN0cmF0YS10ZXN0LXdyb25nLWtleQ==", 1);
	char url[512];
	fresh_url(url, sizeof(url), NULL, "&retries=0");
	struct objstore *os = NULL;
	int rc = objstore_url_new(url, &os);
	CHECK_EQ(rc, STRATA_EIO);
	CHECK(strstr(diag_last(), "403") != NULL);
	CHECK(strstr(diag_last(), "account '" ACCOUNT "'") != NULL);
	CHECK(strstr(diag_last(), "c3RyYXRh") == NULL); /* the key is never in a message */
	if (rc == 0)
		objstore_destroy(os);
	setenv("AZURE_STORAGE_KEY", "not base64!", 1);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "not base64") != NULL && strstr(diag_last(), "not base64!") == NULL);
	unsetenv("AZURE_STORAGE_KEY");
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "no key for account '" ACCOUNT "'") != NULL);
	setenv("AZURE_STORAGE_ACCOUNT", "someoneelse", 1);
	setenv("AZURE_STORAGE_KEY", saved, 1);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "someoneelse") != NULL);
	unsetenv("AZURE_STORAGE_ACCOUNT");
	/* The key from a file. */
	char *dir = harness_tmpdir("azkey");
	char path[600];
	snprintf(path, sizeof(path), "%s/key", dir);
	FILE *f = fopen(path, "w");
	fprintf(f, "%s\n", saved);
	fclose(f);
	unsetenv("AZURE_STORAGE_KEY");
	char withfile[1200];
	snprintf(withfile, sizeof(withfile), "%s&key_file=%s", url, path);
	CHECK_EQ(objstore_url_new(withfile, &os), 0);
	if (os != NULL) {
		CHECK_EQ(put_str(os, "k", "v"), 0);
		objstore_destroy(os);
	}
	setenv("AZURE_STORAGE_KEY", saved, 1);
	harness_rmrf(dir);
	free(dir);
	free(saved);
}

TEST(bad_urls_are_refused_naming_what_is_wrong)
{
	struct objstore *os = NULL;
	char url[512];
	snprintf(url, sizeof(url), "azure://" ACCOUNT "/cfg1?endpoint=%s&colour=blue", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "unknown parameter 'colour'") != NULL);
	snprintf(url, sizeof(url), "azure://" ACCOUNT "/Bad_Container?endpoint=%s", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "container") != NULL);
	snprintf(url, sizeof(url), "azure://" ACCOUNT "/cfg1?endpoint=%s&retries=lots", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "retries") != NULL);
	/* strtoull would take these (a sign wraps round, "-0" is 0): only digits are a number. */
	static const char *not_numbers[] = {"-0", "-1", "+3", "-18446744073709551615", "", "3x"};
	for (size_t i = 0; i < sizeof(not_numbers) / sizeof(not_numbers[0]); i++) {
		snprintf(url, sizeof(url), "azure://" ACCOUNT "/cfg1?endpoint=%s&retries=%s", endpoint, not_numbers[i]);
		CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
		CHECK(strstr(diag_last(), "retries must be a number in 0..100") != NULL);
	}
	snprintf(url, sizeof(url), "azure://" ACCOUNT "/cfg1?endpoint=%s&retries=3", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), 0);
	objstore_destroy(os);
	os = NULL;
	CHECK_EQ(objstore_url_new("azure://" ACCOUNT "/cfg1?endpoint=ftp://x", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "endpoint") != NULL);
	CHECK_EQ(objstore_url_new("gcs://bucket", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "unknown scheme 'gcs'") != NULL);
	CHECK_EQ(objstore_url_new("s3://Bad_Bucket", &os), STRATA_EINVAL); /* tests/objstore/test_s3.c */
	CHECK(strstr(diag_last(), "s3://Bad_Bucket") != NULL);
}

/* ---------------------------------------------------------------- the HTTP client */

TEST(a_timeout_after_send_is_indeterminate_and_a_refused_connect_is_not)
{
	int port = 0;
	int fd = loopback_listener(&port);
	REQUIRE(fd >= 0);
	struct oshttp_config c;
	oshttp_config_init(&c);
	c.timeout_ms = 300;
	c.retries = 1;
	c.backoff_base_ms = 1;
	struct oshttp_client *cl = NULL;
	REQUIRE_EQ(oshttp_client_new(&c, &cl), 0);
	char url[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", port);
	struct oshttp_req r = {.op = OSHTTP_OP_PUT, .method = "PUT", .url = url, .what = "put x",
			       .body = "data", .body_len = 4};
	CHECK_EQ(oshttp_perform(cl, &r), STRATA_EIO);
	CHECK_EQ(r.indeterminate, 1);
	CHECK_EQ(r.attempts, 2);
	CHECK(strstr(diag_last(), "may have been applied") != NULL);
	oshttp_req_destroy(&r);
	struct oshttp_stats st;
	oshttp_client_stats(cl, OSHTTP_OP_PUT, &st);
	CHECK_EQ(st.indeterminate, 2);
	CHECK_EQ(st.retries, 1);
	CHECK_EQ(st.transport_errors, 2);
	/* A read that times out is retried too but is never "applied". */
	struct oshttp_req g = {.op = OSHTTP_OP_GET, .method = "GET", .url = url, .what = "get x"};
	CHECK_EQ(oshttp_perform(cl, &g), STRATA_EIO);
	CHECK_EQ(g.indeterminate, 0);
	oshttp_req_destroy(&g);
	close(fd); /* now nothing listens there: connect is refused, nothing was sent */
	struct oshttp_req p = {.op = OSHTTP_OP_PUT, .method = "PUT", .url = url, .what = "put y",
			       .body = "data", .body_len = 4};
	CHECK_EQ(oshttp_perform(cl, &p), STRATA_EIO);
	CHECK_EQ(p.indeterminate, 0);
	CHECK(strstr(diag_last(), "not applied") != NULL);
	oshttp_req_destroy(&p);
	oshttp_client_delete(cl);
}

static uint64_t frozen_ns(void) { return 12345; }

TEST(backoff_sleep_returns_under_a_frozen_manual_clock)
{
	env_default.mono_ns = frozen_ns;
	oshttp_sleep(20000000ull); /* would never end if it waited for the clock to move */
	env_reset();
	CHECK(1);
}

/*
 * A TCP proxy in front of Azurite that, while armed, lets one request that carries
 * `If-None-Match: *` through to the server and then drops the connection instead of
 * passing the answer back: the write happened, the client cannot know.
 */
struct proxy {
	/** Listening socket. */
	int lfd;
	/** Its port. */
	int port;
	/** Azurite's port. */
	int upstream;
	/** Answers still to drop. */
	atomic_int armed;
	/** Answers dropped. */
	atomic_int dropped;
};

/** One connection a relay (the proxy, the fault proxy) accepted. */
struct relay_conn {
	/** The relay's state. */
	void *relay;
	/** The client's socket. */
	int cfd;
};

/** Accept connections on lfd until it is shut down, each served on a detached thread by
 *  conn_main with a struct relay_conn (which conn_main frees). */
static void *
relay_accept(int lfd, void *(*conn_main)(void *), void *relay)
{
	for (;;) {
		int cfd = accept(lfd, NULL, NULL);
		if (cfd < 0)
			return NULL;
		struct relay_conn *rc = malloc(sizeof(*rc));
		rc->relay = relay;
		rc->cfd = cfd;
		pthread_t t;
		pthread_create(&t, NULL, conn_main, rc);
		pthread_detach(t);
	}
}

/** The other end of a relayed connection: a connection to 127.0.0.1:port (Azurite), or
 *  -1, the client's socket closed, when it is refused. Frees rc; *cfd: the client's. */
static int
relay_connect(struct relay_conn *rc, int port, int *cfd)
{
	*cfd = rc->cfd;
	free(rc);
	int ufd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)port)};
	if (ufd < 0 || connect(ufd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(*cfd);
		if (ufd >= 0)
			close(ufd);
		return -1;
	}
	return ufd;
}

static void *
proxy_conn_main(void *arg)
{
	struct proxy *p = ((struct relay_conn *)arg)->relay;
	int cfd;
	int ufd = relay_connect(arg, p->upstream, &cfd);
	if (ufd < 0)
		return NULL;
	int conditional = 0; /* the request in flight carries If-None-Match: * */
	char b[65536];
	for (;;) {
		struct pollfd f[2] = {{.fd = cfd, .events = POLLIN}, {.fd = ufd, .events = POLLIN}};
		if (poll(f, 2, 10000) <= 0)
			break;
		if (f[0].revents) {
			ssize_t n = read(cfd, b, sizeof(b));
			if (n <= 0)
				break;
			if (memmem(b, (size_t)n, "If-None-Match: *", 16) != NULL)
				conditional = 1;
			if (write(ufd, b, (size_t)n) != n)
				break;
		}
		if (f[1].revents) {
			ssize_t n = read(ufd, b, sizeof(b));
			if (n <= 0)
				break;
			if (conditional && atomic_load(&p->armed) > 0) {
				atomic_fetch_sub(&p->armed, 1);
				atomic_fetch_add(&p->dropped, 1);
				break; /* applied upstream; the answer is lost */
			}
			conditional = 0;
			if (write(cfd, b, (size_t)n) != n)
				break;
		}
	}
	close(cfd);
	close(ufd);
	return NULL;
}

static void *
proxy_main(void *arg)
{
	struct proxy *p = arg;
	return relay_accept(p->lfd, proxy_conn_main, p);
}

TEST(a_manifest_put_whose_answer_is_lost_is_resolved_by_reading_back)
{
	struct proxy p = {.upstream = atoi(strrchr(endpoint, ':') + 1)};
	p.lfd = loopback_listener(&p.port);
	REQUIRE(p.lfd >= 0);
	pthread_t t;
	pthread_create(&t, NULL, proxy_main, &p);
	char url[512];
	snprintf(url, sizeof(url), "azure://" ACCOUNT "/t%u-lost?endpoint=http://127.0.0.1:%d&backoff_base_ms=1",
		 (unsigned)getpid(), p.port);
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	/* The backend alone: the retry finds its own blob, and says it cannot tell. */
	atomic_store(&p.armed, 1);
	CHECK_EQ(objstore_put_if_absent(os, "plain", "v", 1), STRATA_EIO);
	CHECK_EQ(objstore_last_indeterminate(), 1);
	CHECK(strstr(diag_last(), "indeterminate") != NULL);
	CHECK_EQ(atomic_load(&p.dropped), 1);
	CHECK(get_eq(os, "plain", "v"));
	CHECK_EQ(objstore_put_if_absent(os, "plain", "w", 1), STRATA_EEXIST); /* a plain loss is EEXIST */
	CHECK_EQ(objstore_last_indeterminate(), 0);
	/* The manifest path reads it back: version 1 at epoch 1 is ours, not a lost race. */
	atomic_store(&p.armed, 1);
	struct manifest m;
	memset(&m, 0, sizeof(m));
	CHECK_EQ(manifest_claim_epoch(os, "shard-0000/", NULL, &m), 0);
	CHECK_EQ(atomic_load(&p.dropped), 2);
	CHECK_EQ(m.version, 1);
	CHECK_EQ(m.writer_epoch, 1);
	manifest_destroy(&m);
	struct oshttp_stats st;
	oshttp_client_stats(objstore_azure_client(os), OSHTTP_OP_PUT_IF_ABSENT, &st);
	CHECK_EQ(st.indeterminate, 2);
	objstore_destroy(os);
	shutdown(p.lfd, SHUT_RDWR);
	close(p.lfd);
	pthread_join(t, NULL);
}

/* ---------------------------------------------------------------- the GC hole */

/** Set on the thread whose manifest update stall_point holds. */
static __thread int stalled_writer;
/** The stall: the writer is in it / may leave it. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int in, go;
} stall = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static int
stall_point(const char *name, const void *arg)
{
	(void)arg;
	if (!stalled_writer || strcmp(name, "manifest.before_append") != 0)
		return 0;
	pthread_mutex_lock(&stall.mu);
	stall.in = 1;
	pthread_cond_broadcast(&stall.cv);
	while (!stall.go)
		pthread_cond_wait(&stall.cv, &stall.mu);
	pthread_mutex_unlock(&stall.mu);
	return 0;
}

/** A manifest mutation that adds generation next_generation with the epoch in ctx. */
static int
add_gen(void *ctx, struct manifest *next)
{
	struct manifest_obj o = {.id = next->next_generation, .epoch = *(uint64_t *)ctx, .bytes = 1,
				 .rows = 1};
	next->next_generation++;
	return manifest_add_gen(next, &o);
}

/** The stalled writer: one update from the state it read before the stall. */
struct staller {
	struct objstore *os;
	struct manifest m;
	uint64_t tag;
	int rc;
	char why[512];
};

static void *
staller_main(void *arg)
{
	struct staller *st = arg;
	struct manifest_opts o = {.snapshot_edits = 4, .keep = 0};
	stalled_writer = 1;
	st->rc = manifest_commit_update(st->os, "shard-0000/", &o, st->m.writer_epoch, &st->m, add_gen,
					&st->tag);
	snprintf(st->why, sizeof(st->why), "%s", diag_last());
	return NULL;
}

TEST(a_writer_stalled_past_a_manifest_collection_is_fenced_on_azure)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "");
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	struct manifest_opts o = {.snapshot_edits = 4, .keep = 0};
	struct manifest a;
	memset(&a, 0, sizeof(a));
	REQUIRE_EQ(manifest_claim_epoch(os, "shard-0000/", &o, &a), 0);
	uint64_t live = 1;
	REQUIRE_EQ(manifest_commit_update(os, "shard-0000/", &o, 1, &a, add_gen, &live), 0);
	struct staller st = {.os = os, .tag = 9};
	REQUIRE_EQ(manifest_copy(&st.m, &a), 0);
	env.point = stall_point;
	pthread_t t;
	REQUIRE_EQ(pthread_create(&t, NULL, staller_main, &st), 0);
	pthread_mutex_lock(&stall.mu);
	while (!stall.in)
		pthread_cond_wait(&stall.cv, &stall.mu);
	pthread_mutex_unlock(&stall.mu);
	/* Another handle advances, snapshots at 4 and 8 and collects behind them: position
	 * 3, the one the stalled writer will create, is deleted from the container. */
	for (int i = 0; i < 8; i++)
		REQUIRE_EQ(manifest_commit_update(os, "shard-0000/", &o, 1, &a, add_gen, &live), 0);
	CHECK_EQ(a.snap_version, 8);
	char key[128];
	uint64_t size;
	manifest_version_key(key, sizeof(key), "shard-0000/", 3);
	CHECK_EQ(objstore_size(os, key, &size), STRATA_NOTFOUND);
	pthread_mutex_lock(&stall.mu);
	stall.go = 1;
	pthread_cond_broadcast(&stall.cv);
	pthread_mutex_unlock(&stall.mu);
	pthread_join(t, NULL);
	env.point = NULL;
	/* Azure's If-None-Match: * let it re-create position 3; the check after the
	 * create fences it, and the log does not name its generation. */
	CHECK_EQ(st.rc, STRATA_EFENCED);
	CHECK(strstr(st.why, "stalled past the collection") != NULL);
	struct manifest l;
	REQUIRE_EQ(manifest_load(os, "shard-0000/", &l), 0);
	CHECK_EQ(l.version, a.version);
	CHECK_EQ(l.ngens, a.ngens);
	for (uint32_t i = 0; i < l.ngens; i++)
		CHECK(l.gens[i].epoch != 9);
	manifest_destroy(&l);
	manifest_destroy(&st.m);
	manifest_destroy(&a);
	objstore_destroy(os);
}

/* ---------------------------------------------------------------- the engine */

static uint64_t os_total(strata *db, size_t off);

TEST(engine_round_trip_on_azure_append_seal_merge_compact_reopen)
{
	char url[512];
	fresh_url(url, sizeof(url), "db", "");
	char *dir = harness_tmpdir("azengine");
	REQUIRE(dir != NULL);
	strata_options o;
	strata *db = NULL;
	REQUIRE_EQ(engine_open(&o, dir, url, &db), 0);
	int n = 600;
	int finished;
	engine_append_seal_merge_compact(db, n, &finished);
	REQUIRE(finished);
	strata_close(db);
	/* The objects are in the container: list them through a store of the same URL. */
	struct objstore *os = NULL;
	REQUIRE_EQ(objstore_url_new(url, &os), 0);
	check_engine_objects_listed(os);
	objstore_destroy(os);
	db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	check_engine_reopened(db, n);
	/* Remote blocks stay in the block cache: reading every row again sends no request. */
	uint64_t before = os_total(db, offsetof(struct objstore_op_stats, requests));
	for (uint32_t shard = 0; shard < 2; shard++)
		CHECK(all_rows_read_back(db, shard, n));
	CHECK_EQ(os_total(db, offsetof(struct objstore_op_stats, requests)), before);
	strata_close(db);
	/* Without a cache every read goes to the store. */
	o.block_cache_bytes = 0;
	db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	CHECK(all_rows_read_back(db, 0, n));
	before = os_total(db, offsetof(struct objstore_op_stats, requests));
	CHECK(all_rows_read_back(db, 0, n));
	CHECK(os_total(db, offsetof(struct objstore_op_stats, requests)) > before);
	strata_close(db);
	harness_rmrf(dir);
	free(dir);
}

/** State of the --leaks listing. */
struct leaks {
	/** The shard's manifest. */
	struct manifest m;
	/** Length of the shard prefix. */
	size_t plen;
	/** Objects the manifest does not name. */
	int n;
};

static int
leaks_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	struct leaks *l = ctx;
	int kind;
	uint64_t id, epoch;
	const char *rel = key + l->plen;
	if (strncmp(rel, "manifest/", 9) == 0 || manifest_parse_obj_key(rel, &kind, &id, &epoch) != 0)
		return 0;
	int idx = kind == MANIFEST_GEN ? manifest_find_gen(&l->m, id) : manifest_find_run(&l->m, id);
	if (idx < 0) {
		printf("leaked: %s\n", key);
		l->n++;
	}
	return 0;
}

/*
 * A fault proxy in front of Azurite: a real TCP relay that, while armed, counts the
 * requests that start on its connections and spoils some of them on a fixed schedule:
 * throttling (503 ServerBusy) and 5xx bursts (two 500s in a row) answered by the proxy
 * itself, a connection dropped after the request went through (the answer lost: for a
 * write, an indeterminate outcome), a connection dropped in the middle of the answer's
 * body, and a stall after the request went through until the client's timeout. Every
 * third conditional create (If-None-Match: *, the manifest's puts) loses its answer too,
 * so the manifest path must read back.
 */
/** Bytes the fault proxy relays at a time. */
#define CHAOS_BUF (1 << 16)

enum { CHAOS_PASS, CHAOS_503, CHAOS_500, CHAOS_DROP_AFTER, CHAOS_MIDBODY, CHAOS_STALL, CHAOS_KINDS };

struct chaos {
	/** Listening socket and its port. */
	int lfd, port;
	/** Azurite's port. */
	int upstream;
	/** Faults are injected while set. */
	atomic_int armed;
	/** Requests seen while armed, and conditional creates among them. */
	atomic_int requests, creates;
	/** Faults injected, per kind. */
	atomic_int injected[CHAOS_KINDS];
};

static int
chaos_request_start(const char *b, ssize_t n)
{
	static const char *const m[] = {"GET ", "PUT ", "HEAD ", "DELETE ", "POST "};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if ((size_t)n >= strlen(m[i]) && memcmp(b, m[i], strlen(m[i])) == 0)
			return 1;
	return 0;
}

static int
chaos_pick(struct chaos *c, const char *b, ssize_t n)
{
	if (!atomic_load(&c->armed))
		return CHAOS_PASS;
	int k = atomic_fetch_add(&c->requests, 1);
	if (memmem(b, (size_t)n, "If-None-Match: *", 16) != NULL && atomic_fetch_add(&c->creates, 1) % 3 == 1)
		return CHAOS_DROP_AFTER;
	switch (k % 24) {
	case 3: return CHAOS_503;
	case 7: case 8: return CHAOS_500;
	case 11: return CHAOS_DROP_AFTER;
	case 15: return CHAOS_MIDBODY;
	case 19: return k % 120 == 19 ? CHAOS_STALL : CHAOS_PASS;
	default: return CHAOS_PASS;
	}
}

static void *
chaos_conn_main(void *arg)
{
	struct chaos *c = ((struct relay_conn *)arg)->relay;
	int cfd;
	int ufd = relay_connect(arg, c->upstream, &cfd);
	if (ufd < 0)
		return NULL;
	int action = CHAOS_PASS, stalled = 0;
	char *buf = malloc(CHAOS_BUF);
	for (int done = 0; !done && buf != NULL;) {
		struct pollfd f[2] = {{.fd = cfd, .events = POLLIN}, {.fd = ufd, .events = POLLIN}};
		if (poll(f, 2, 10000) <= 0)
			break;
		if (f[0].revents) {
			ssize_t n = read(cfd, buf, CHAOS_BUF);
			if (n <= 0)
				break;
			if (!stalled && chaos_request_start(buf, n)) {
				action = chaos_pick(c, buf, n);
				if (action == CHAOS_503 || action == CHAOS_500) {
					const char *ans = action == CHAOS_503
						? "HTTP/1.1 503 Service Unavailable\r\nx-ms-error-code: ServerBusy\r\n"
						  "Content-Length: 0\r\nConnection: close\r\n\r\n"
						: "HTTP/1.1 500 Internal Server Error\r\nx-ms-error-code: InternalError\r\n"
						  "Content-Length: 0\r\nConnection: close\r\n\r\n";
					atomic_fetch_add(&c->injected[action], 1);
					if (write(cfd, ans, strlen(ans)) < 0)
						break;
					break; /* not forwarded: the server never saw it */
				}
			}
			if (!stalled && write(ufd, buf, (size_t)n) != n)
				break;
		}
		if (f[1].revents) {
			ssize_t n = read(ufd, buf, CHAOS_BUF);
			if (n <= 0)
				break;
			if (stalled)
				continue; /* the answer never comes: the client times out */
			switch (action) {
			case CHAOS_DROP_AFTER:
				atomic_fetch_add(&c->injected[action], 1);
				done = 1;
				continue;
			case CHAOS_MIDBODY: {
				const char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);
				size_t head = end != NULL ? (size_t)(end - buf) + 4 : 0;
				size_t cut = head + ((size_t)n - head) / 2;
				atomic_fetch_add(&c->injected[action], 1);
				if (cut > 0 && write(cfd, buf, cut) < 0)
					break;
				done = 1;
				continue;
			}
			case CHAOS_STALL:
				atomic_fetch_add(&c->injected[action], 1);
				stalled = 1;
				continue;
			default:
				break;
			}
			action = CHAOS_PASS;
			if (write(cfd, buf, (size_t)n) != n)
				break;
		}
	}
	free(buf);
	close(cfd);
	close(ufd);
	return NULL;
}

static void *
chaos_main(void *arg)
{
	struct chaos *c = arg;
	return relay_accept(c->lfd, chaos_conn_main, c);
}

/** Sum of one counter over the store's operation kinds. */
static uint64_t
os_total(strata *db, size_t off)
{
	struct objstore_op_stats st[OBJSTORE_MAX_OP_KINDS];
	size_t n = objstore_request_stats(store_objstore(strata_store(db)), st, OBJSTORE_MAX_OP_KINDS);
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t v;
		memcpy(&v, (const char *)&st[i] + off, sizeof(v));
		sum += v;
	}
	return sum;
}

TEST(appends_survive_object_store_faults_and_nothing_acknowledged_is_lost)
{
	struct chaos c = {.upstream = atoi(strrchr(endpoint, ':') + 1)};
	c.lfd = loopback_listener(&c.port);
	REQUIRE(c.lfd >= 0);
	pthread_t t;
	pthread_create(&t, NULL, chaos_main, &c);
	char container[64], url[512], direct[512];
	snprintf(container, sizeof(container), "t%u-chaos", (unsigned)getpid());
	snprintf(url, sizeof(url), "azure://" ACCOUNT "/%s?endpoint=http://127.0.0.1:%d&backoff_base_ms=1"
		 "&backoff_max_ms=20&retries=8&timeout_ms=1000", container, c.port);
	snprintf(direct, sizeof(direct), "azure://" ACCOUNT "/%s?endpoint=%s", container, endpoint);
	char *dir = harness_tmpdir("azchaos");
	REQUIRE(dir != NULL);
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.store = url;
	o.shards = 1;
	o.block_bytes = 1024;
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	uint64_t landed0, lost0;
	manifest_readbacks(&landed0, &lost0);
	atomic_store(&c.armed, 1);
	int n = 1000, acked = 0, seal_fail = 0, merge_fail = 0, seals = 0, merges = 0;
	for (int i = 0; i < n; i++) {
		char k[32], v[32];
		key_of(i, k);
		snprintf(v, sizeof(v), "value-%d-0", i);
		strata_row r = {k, strlen(k), v, strlen(v)};
		int rc = strata_append(db, 0, &r, 1);
		CHECK_EQ(rc, 0); /* the WAL is local: a fault of the store never fails an append */
		acked += rc == 0;
		if (i % 50 == 49) {
			seals++;
			seal_fail += strata_seal(db, 0) != 0;
		}
		if (i % 200 == 199) {
			uint32_t merged = 0;
			merges++;
			merge_fail += strata_merge(db, 0, 4, &merged) != 0;
		}
	}
	atomic_store(&c.armed, 0);
	/* The faults over, everything flushes and folds. */
	CHECK_EQ(strata_seal(db, 0), 0);
	uint32_t merged = 0;
	CHECK_EQ(strata_merge(db, 0, 0, &merged), 0);
	CHECK_EQ(strata_check(db, 0), 0);
	CHECK(all_rows_read_back(db, 0, n));
	uint64_t landed, lost;
	manifest_readbacks(&landed, &lost);
	uint64_t indet = os_total(db, offsetof(struct objstore_op_stats, indeterminate));
	uint64_t thr = os_total(db, offsetof(struct objstore_op_stats, throttled));
	uint64_t s5 = os_total(db, offsetof(struct objstore_op_stats, server_errors));
	uint64_t tmo = os_total(db, offsetof(struct objstore_op_stats, timeouts));
	uint64_t tr = os_total(db, offsetof(struct objstore_op_stats, transport_errors));
	uint64_t retries = os_total(db, offsetof(struct objstore_op_stats, retries));
	printf("# chaos: %d requests, injected %d throttled, %d 5xx, %d dropped after send, %d dropped "
	       "mid-answer, %d stalls; client saw %llu throttled, %llu 5xx, %llu transport, %llu timeouts, "
	       "%llu indeterminate, %llu retries; manifest read-backs %llu landed, %llu not; %d of %d seals "
	       "and %d of %d merges failed; %d appends acknowledged\n",
	       atomic_load(&c.requests), atomic_load(&c.injected[CHAOS_503]), atomic_load(&c.injected[CHAOS_500]),
	       atomic_load(&c.injected[CHAOS_DROP_AFTER]), atomic_load(&c.injected[CHAOS_MIDBODY]),
	       atomic_load(&c.injected[CHAOS_STALL]), (unsigned long long)thr, (unsigned long long)s5,
	       (unsigned long long)tr, (unsigned long long)tmo, (unsigned long long)indet,
	       (unsigned long long)retries, (unsigned long long)(landed - landed0),
	       (unsigned long long)(lost - lost0), seal_fail, seals, merge_fail, merges, acked);
	CHECK_EQ(acked, n);
	CHECK(atomic_load(&c.injected[CHAOS_503]) > 0 && thr > 0);
	CHECK(atomic_load(&c.injected[CHAOS_500]) > 0 && s5 > 0);
	CHECK(atomic_load(&c.injected[CHAOS_MIDBODY]) > 0);
	CHECK(atomic_load(&c.injected[CHAOS_STALL]) > 0 && tmo > 0);
	CHECK(indet > 0);
	CHECK(landed - landed0 > 0); /* the manifest's indeterminate path ran, and resolved */
	CHECK(seals - seal_fail > 0 && merges - merge_fail > 0);
	strata_close(db);
	/* Straight to Azurite, after a restart: every acknowledged row is there. */
	o.store = direct;
	db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	CHECK(all_rows_read_back(db, 0, n));
	CHECK_EQ(strata_check(db, 0), 0);
	strata_close(db);
	shutdown(c.lfd, SHUT_RDWR);
	close(c.lfd);
	pthread_join(t, NULL);
	harness_rmrf(dir);
	free(dir);
}

/** `objstore_azure --leaks URL SHARD`: print every generation or run object of the shard
 *  that its manifest does not name (tests/objstore/compact_live.sh); exit 1 when any. */
static int
leaks_main(const char *url, const char *shard)
{
	struct objstore *os = NULL;
	struct leaks l = {.n = 0};
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "shard-%04u/", (unsigned)atoi(shard));
	l.plen = strlen(prefix);
	int rc = objstore_url_new(url, &os);
	if (rc == 0)
		rc = manifest_load(os, prefix, &l.m);
	if (rc == 0)
		rc = objstore_list(os, prefix, leaks_cb, &l);
	if (rc)
		printf("--leaks %s: %s\n", url, diag_last());
	manifest_destroy(&l.m);
	objstore_destroy(os);
	return rc || l.n ? 1 : 0;
}

/** Open a store of shards on url in dir with the WAL on the store, serving count shards
 *  from first (count 0: all). */
static int
open_walstore(const char *url, const char *dir, uint32_t shards, uint32_t first, uint32_t count, strata **db)
{
	strata_options o;
	strata_options_init(&o);
	o.dir = dir;
	o.store = url;
	o.shards = shards;
	o.block_bytes = 1024;
	o.wal = STRATA_WAL_STORE;
	o.serve_first = first;
	o.serve_count = count;
	*db = NULL;
	int rc = strata_open(&o, db);
	if (rc != 0)
		fprintf(stderr, "  open %s: %s\n", dir, strata_last_error());
	return rc;
}

static int
append_kv(strata *db, uint32_t shard, int i)
{
	char k[32], v[32];
	key_of(i, k);
	snprintf(v, sizeof(v), "value-%d-%u", i, shard);
	strata_row r = {k, strlen(k), v, strlen(v)};
	return strata_append(db, shard, &r, 1);
}

/** Rows of the listing of prefix. */
static int
count_listed(const char *url, const char *prefix)
{
	struct objstore *os = NULL;
	if (objstore_url_new(url, &os) != 0)
		return -1;
	struct seen s = {{0}, 0};
	int rc = objstore_list(os, prefix, seen_cb, &s);
	objstore_destroy(os);
	return rc == 0 ? s.n : -1;
}

TEST(wal_on_the_store_survives_the_loss_of_the_node)
{
	char url[512];
	fresh_url(url, sizeof(url), "db", "");
	char *dir = harness_tmpdir("azwal");
	REQUIRE(dir != NULL);
	char node1[600], node2[600];
	snprintf(node1, sizeof(node1), "%s/node1", dir);
	snprintf(node2, sizeof(node2), "%s/node2", dir);
	strata *db;
	REQUIRE_EQ(open_walstore(url, node1, 1, 0, 0, &db), 0);
	int n = 300;
	for (int i = 0; i < n; i++) {
		REQUIRE_EQ(append_kv(db, 0, i), 0);
		if (i == 99 || i == 199) {
			REQUIRE_EQ(strata_seal(db, 0), 0);
			uint32_t merged = 0;
			REQUIRE_EQ(strata_merge(db, 0, 0, &merged), 0);
			CHECK_EQ(merged, 1);
		}
	}
	strata_close(db);
	/* A node with an empty data directory: rows 200..299 were never sealed and must come
	 * from the WAL objects; 0..199 from the runs. */
	REQUIRE_EQ(open_walstore(url, node2, 1, 0, 0, &db), 0);
	CHECK(all_rows_read_back(db, 0, n));
	CHECK_EQ(strata_check(db, 0), 0);
	REQUIRE_EQ(strata_seal(db, 0), 0);
	strata_close(db);
	/* The seals released every batch: left are the epoch object and the fences of the
	 * two opens. */
	CHECK_EQ(count_listed(url, "shard-0000/wal/"), 3);
	REQUIRE_EQ(open_walstore(url, node1, 1, 0, 0, &db), 0);
	CHECK(all_rows_read_back(db, 0, n));
	strata_close(db);
	harness_rmrf(dir);
	free(dir);
}

/** An appender on shard 0 of db until it is refused: how many rows it had acknowledged. */
struct appender {
	/** The store. */
	strata *db;
	/** Rows acknowledged (0..acked-1). */
	atomic_int acked;
	/** The code that stopped it. */
	int rc;
	/** Most rows it appends. */
	int max;
	/** Set to stop it. */
	atomic_int stop;
	/** Set once it stopped. */
	atomic_int done;
};

static void *
appender_main(void *arg)
{
	struct appender *a = arg;
	for (int i = 0; i < a->max && !atomic_load(&a->stop); i++) {
		int rc = append_kv(a->db, 0, i);
		if (rc != 0) {
			a->rc = rc;
			break;
		}
		atomic_store(&a->acked, i + 1);
	}
	atomic_store(&a->done, 1);
	return NULL;
}

TEST(claim_by_another_node_fences_the_old_owner_and_loses_no_acked_row)
{
	char url[512];
	fresh_url(url, sizeof(url), "db", "");
	char *dir = harness_tmpdir("azclaim");
	REQUIRE(dir != NULL);
	char da[600], dbd[600];
	snprintf(da, sizeof(da), "%s/a", dir);
	snprintf(dbd, sizeof(dbd), "%s/b", dir);
	strata *a, *b;
	REQUIRE_EQ(open_walstore(url, da, 3, 0, 2, &a), 0); /* shards 0 and 1 */
	REQUIRE_EQ(open_walstore(url, dbd, 3, 2, 1, &b), 0); /* shard 2 */
	CHECK_EQ(append_kv(b, 0, 0), STRATA_ERANGE);
	struct appender ap = {.db = a, .max = 1000000};
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, appender_main, &ap) == 0);
	while (atomic_load(&ap.acked) < 50)
		usleep(1000);
	int crc = strata_shard_claim(b, 0);
	if (crc != 0)
		fprintf(stderr, "  claim: %s\n", strata_last_error());
	/* The appender stops at its first refusal; with the fencing broken it would not. */
	int at_claim = atomic_load(&ap.acked);
	for (int i = 0; i < 10000 && atomic_load(&ap.acked) < at_claim + 20 && !atomic_load(&ap.done); i++)
		usleep(1000);
	atomic_store(&ap.stop, 1);
	pthread_join(t, NULL);
	REQUIRE_EQ(crc, 0);
	CHECK_EQ(ap.rc, STRATA_EFENCED);
	CHECK_EQ(append_kv(a, 0, 0), STRATA_EFENCED);
	int acked = atomic_load(&ap.acked);
	fprintf(stderr, "  # %d rows acknowledged by the old owner before the claim fenced it\n", acked);
	CHECK(all_rows_read_back(b, 0, acked));
	CHECK_EQ(append_kv(b, 0, acked), 0);
	/* The old owner keeps its other shard. */
	CHECK_EQ(append_kv(a, 1, 7), 0);
	/* A is idle on shard 1 from here. B claims it and acknowledges a row; A, told nothing,
	 * stops serving its copy once its last look at the epoch object is older than
	 * owner_check_ms (1 s by default): no stale row and no 404 for B's. */
	REQUIRE_EQ(strata_shard_claim(b, 1), 0);
	CHECK_EQ(append_kv(b, 1, 8), 0);
	usleep(1100 * 1000);
	char k7[32], k8[32];
	key_of(7, k7);
	key_of(8, k8);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(strata_get(a, 1, k7, strlen(k7), &v, &vl), STRATA_EFENCED);
	CHECK_EQ(strata_get(a, 1, k8, strlen(k8), &v, &vl), STRATA_EFENCED);
	/* A's claim looks at the epoch object too, and takes shard 1 back for real. */
	CHECK_EQ(strata_shard_claim(a, 1), 0);
	CHECK_EQ(strata_get(a, 1, k8, strlen(k8), &v, &vl), 0);
	strata_free(v);
	CHECK_EQ(append_kv(b, 1, 9), STRATA_EFENCED);
	CHECK_EQ(append_kv(a, 1, 9), 0);
	strata_close(b);
	strata_close(a);
	harness_rmrf(dir);
	free(dir);
}

/** Append latency, median and p99 over n one-row appends, µs. */
static void
append_latency(strata *db, int n, double *p50, double *p99)
{
	double *lat = malloc((size_t)n * sizeof(*lat));
	for (int i = 0; i < n; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		append_kv(db, 0, i);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		lat[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
			double x = lat[j];
			lat[j] = lat[j - 1];
			lat[j - 1] = x;
		}
	*p50 = lat[n / 2];
	*p99 = lat[n * 99 / 100];
	free(lat);
}

TEST(append_latency_of_local_and_store_wal_is_printed)
{
	char url[512];
	fresh_url(url, sizeof(url), "db", "");
	char *dir = harness_tmpdir("azlat");
	REQUIRE(dir != NULL);
	char d1[600], d2[600];
	snprintf(d1, sizeof(d1), "%s/local", dir);
	snprintf(d2, sizeof(d2), "%s/store", dir);
	strata_options o;
	strata_options_init(&o);
	o.dir = d1;
	o.store = url;
	o.shards = 1;
	strata *db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	double l50, l99, s50, s99;
	append_latency(db, 200, &l50, &l99);
	strata_close(db);
	char url2[512];
	fresh_url(url2, sizeof(url2), "db", "");
	REQUIRE_EQ(open_walstore(url2, d2, 1, 0, 0, &db), 0);
	append_latency(db, 200, &s50, &s99);
	strata_close(db);
	fprintf(stderr, "  # append latency, one writer, 200 one-row appends on Azurite: wal = local (fsync) "
		"p50 %.0f us p99 %.0f us; wal = store p50 %.0f us p99 %.0f us\n", l50, l99, s50, s99);
	harness_rmrf(dir);
	free(dir);
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--leaks") == 0)
		return leaks_main(argv[2], argv[3]);
	HARNESS_BEGIN(argc, argv);
	endpoint = getenv("STRATA_TEST_AZURE_ENDPOINT");
	if (endpoint == NULL || getenv("AZURE_STORAGE_KEY") == NULL) {
		fprintf(stderr, "test_azure: set STRATA_TEST_AZURE_ENDPOINT and AZURE_STORAGE_KEY "
				"(tests/objstore/azure.sh does)\n");
		return 2;
	}
	RUN(get_range_put_size_delete_roundtrip);
	RUN(list_is_byte_ordered_prefix_filtered_and_paged);
	RUN(writer_puts_blocks_then_the_block_list);
	RUN(put_if_absent_race_has_exactly_one_winner);
	RUN(compare_and_swap_race_has_exactly_one_winner);
	RUN(a_wrong_key_is_refused_at_open_naming_the_account);
	RUN(bad_urls_are_refused_naming_what_is_wrong);
	RUN(a_timeout_after_send_is_indeterminate_and_a_refused_connect_is_not);
	RUN(backoff_sleep_returns_under_a_frozen_manual_clock);
	RUN(a_manifest_put_whose_answer_is_lost_is_resolved_by_reading_back);
	RUN(a_writer_stalled_past_a_manifest_collection_is_fenced_on_azure);
	RUN(engine_round_trip_on_azure_append_seal_merge_compact_reopen);
	RUN(appends_survive_object_store_faults_and_nothing_acknowledged_is_lost);
	RUN(wal_on_the_store_survives_the_loss_of_the_node);
	RUN(claim_by_another_node_fences_the_old_owner_and_loses_no_acked_row);
	RUN(append_latency_of_local_and_store_wal_is_printed);
	return HARNESS_END("objstore_azure");
}
