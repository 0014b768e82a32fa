/*
 * test_s3.c — the S3 object store (node/objstore/s3.c, s3_xml.c) against a real s3rver,
 * which tests/objstore/s3.sh starts and names in STRATA_TEST_S3_ENDPOINT
 * (http://127.0.0.1:PORT), with s3rver's credentials in AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY; and against a canned server in this file that answers what AWS
 * answers (412 on a conditional write, 409 ConditionalRequestConflict, 403, 503
 * SlowDown) and checks every request's SigV4 signature with its own implementation of
 * the algorithm. s3rver ignores If-None-Match and If-Match, so nothing here claims
 * fencing works on it: the probe refuses it unless single_writer=1. Each test uses its
 * own bucket. What test_azure.c checks alike is in objstore_common.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "../unit/harness.h"
#include "../../node/lib/diag.h"
#include "../../node/lib/env.h"
#include "../../node/objstore/http.h"
#include "../../node/objstore/objstore.h"
#include "../../node/objstore/s3_xml.h"
#include "../../node/strata.h"
#include "objstore_common.h"

static const char *endpoint;
static unsigned bucket_seq;

/** A fresh bucket's URL (single_writer=1: s3rver does not enforce conditions), with extra
 *  parameters (may be ""). */
static void
fresh_url(char *dst, size_t cap, const char *prefix, const char *extra)
{
	snprintf(dst, cap, "s3://t%u-%u%s%s?endpoint=%s&single_writer=1%s", (unsigned)getpid(), ++bucket_seq,
		 prefix ? "/" : "", prefix ? prefix : "", endpoint, extra);
}

static struct objstore *
open_ok(const char *url)
{
	struct objstore *os = NULL;
	int rc = objstore_url_new(url, &os);
	if (rc != 0)
		fprintf(stderr, "  open %s: %s\n", url, diag_last());
	return os;
}

TEST(get_range_put_size_delete_roundtrip)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "");
	struct objstore *os = open_ok(url);
	REQUIRE(os != NULL);
	CHECK(strncmp(os->name, "s3://t", 6) == 0);
	CHECK_EQ(objstore_s3_conditions_enforced(os), 0);
	check_put_get_size_and_ranges(os);
	CHECK_EQ(put_str(os, "odd key+&=?#%/x y", "odd"), 0); /* escaped in the path, signed as sent */
	CHECK(get_eq(os, "odd key+&=?#%/x y", "odd"));
	struct buf b = {0};
	/* single_writer: the conditions are checked by a HEAD first. */
	CHECK_EQ(objstore_put_if_absent(os, "once", "1", 1), 0);
	CHECK_EQ(objstore_put_if_absent(os, "once", "2", 1), STRATA_EEXIST);
	CHECK(get_eq(os, "once", "1"));
	char etag[OBJSTORE_ETAG_MAX];
	CHECK_EQ(objstore_etag(os, "once", etag, sizeof(etag)), 0);
	CHECK(etag[0] == '"');
	CHECK_EQ(objstore_put_if_match(os, "once", "3", 1, "\"stale\""), STRATA_ECONFLICT);
	CHECK_EQ(objstore_put_if_match(os, "once", "3", 1, etag), 0);
	CHECK(get_eq(os, "once", "3"));
	CHECK_EQ(objstore_put_if_match(os, "gone", "x", 1, etag), STRATA_ECONFLICT);
	CHECK_EQ(objstore_del(os, "once"), 0);
	CHECK_EQ(objstore_del(os, "once"), 0); /* absent is fine */
	CHECK_EQ(objstore_get(os, "once", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_put_if_absent(os, "once", "4", 1), 0); /* absent again: it may be created */
	buf_destroy(&b);
	struct oshttp_stats st;
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_GET, &st);
	CHECK(st.requests >= 8 && st.ok >= 5 && st.bytes_received >= 12);
	uint64_t removed = 9, bytes = 9;
	CHECK_EQ(objstore_recover(os, &removed, &bytes), 0); /* s3rver cannot list uploads: a warning */
	CHECK_EQ(removed, 0);
	objstore_destroy(os);
}

TEST(list_is_byte_ordered_prefix_filtered_and_paged)
{
	char url[512];
	fresh_url(url, sizeof(url), "node-a/store", "&list_page=2");
	struct objstore *os = open_ok(url), *other = NULL;
	REQUIRE(os != NULL);
	/* The same bucket without the prefix: what lies outside the prefix stays out. */
	char bare[512];
	snprintf(bare, sizeof(bare), "%.*s?endpoint=%s&single_writer=1", (int)(strstr(url, "/node-a") - url), url,
		 endpoint);
	other = open_ok(bare);
	REQUIRE(other != NULL);
	CHECK_EQ(put_str(other, "outside", "x"), 0);
	CHECK_EQ(put_str(other, "node-a/storeroom", "x"), 0); /* shares the prefix's bytes, not its '/' */
	/* No "s/a-" next to "s/a/": s3rver lists its directories depth first, not in byte order
	 * (the store refuses such a listing, see sigv4_headers_are_signed_as_aws_checks_them). */
	const char *keys[] = {"s/b", "s/a/2", "s/B", "s/a/10", "s/a/1", "t/z", "s/a0"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		CHECK_EQ(objstore_put(os, keys[i], "1234567890", i + 1), 0);
	check_listed(os, "s/", "s/B=3;s/a/1=5;s/a/10=4;s/a/2=2;s/a0=7;s/b=1;");
	struct seen s = {{0}, 0};
	CHECK_EQ(objstore_list(os, "", seen_cb, &s), 0);
	CHECK_EQ(s.n, 7);
	CHECK(strstr(s.text, "outside") == NULL && strstr(s.text, "room") == NULL);
	CHECK(strstr(s.text, ".strata-probe") == NULL); /* the probe cleaned up after itself */
	memset(&s, 0, sizeof(s));
	CHECK_EQ(objstore_list(other, "", seen_cb, &s), 0);
	CHECK(strstr(s.text, ".strata-probe") == NULL);
	check_listed(os, "s/a/1", "s/a/1=5;s/a/10=4;");
	check_list_stops_and_pages(os, objstore_s3_client(os));
	objstore_destroy(other);
	objstore_destroy(os);
}

TEST(writer_uploads_parts_then_completes)
{
	char url[512];
	fresh_url(url, sizeof(url), NULL, "&part_bytes=65536");
	struct objstore *os = open_ok(url);
	REQUIRE(os != NULL);
	size_t n = 200000;
	uint8_t *data = pattern_new(n);
	REQUIRE(data != NULL);
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_writer_open(os, "run/big", &w), 0);
	REQUIRE_EQ(write_in_pieces(w, data, n), 0);
	struct buf b = {0};
	CHECK_EQ(objstore_get(os, "run/big", &b), STRATA_NOTFOUND); /* not visible before commit */
	int crc = objstore_writer_commit(w);
	if (crc != 0)
		fprintf(stderr, "  commit: %s\n", diag_last());
	CHECK_EQ(crc, 0);
	CHECK_EQ(objstore_get(os, "run/big", &b), 0);
	CHECK(b.len == n && memcmp(b.data, data, n) == 0);
	char part[100];
	size_t got = 0;
	CHECK_EQ(objstore_get_range(os, "run/big", 65536 - 50, 100, part, &got), 0); /* across parts */
	CHECK(got == 100 && memcmp(part, data + 65536 - 50, 100) == 0);
	struct oshttp_stats st;
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_PART, &st);
	CHECK_EQ(st.ok, 1 + 4); /* create, 3 full parts of 64 KiB and the rest */
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_COMMIT, &st);
	CHECK_EQ(st.ok, 1);
	/* Exactly one part's worth is one PutObject. */
	REQUIRE_EQ(objstore_writer_open(os, "run/one", &w), 0);
	CHECK_EQ(objstore_writer_write(w, data, 65536), 0);
	CHECK_EQ(objstore_writer_commit(w), 0);
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_COMMIT, &st);
	CHECK_EQ(st.ok, 1);
	buf_reset(&b);
	CHECK_EQ(objstore_get(os, "run/one", &b), 0);
	CHECK(b.len == 65536 && memcmp(b.data, data, 65536) == 0);
	/* A small write is one PutObject; an aborted one leaves nothing. */
	int finished;
	check_small_and_aborted_writes(os, data, n, &finished);
	REQUIRE(finished);
	/* A conditional streamed write finds the object there. */
	REQUIRE_EQ(objstore_s3_writer_open_if_absent(os, "run/big", &w), 0);
	CHECK_EQ(objstore_writer_write(w, data, n), 0);
	CHECK_EQ(objstore_writer_commit(w), STRATA_EEXIST);
	REQUIRE_EQ(objstore_s3_writer_open_if_absent(os, "run/new", &w), 0);
	CHECK_EQ(objstore_writer_write(w, data, n), 0);
	CHECK_EQ(objstore_writer_commit(w), 0);
	buf_reset(&b);
	CHECK_EQ(objstore_get(os, "run/new", &b), 0);
	CHECK(b.len == n && memcmp(b.data, data, n) == 0);
	buf_destroy(&b);
	free(data);
	objstore_destroy(os);
}

TEST(del_batch_deletes_in_one_request)
{
	char url[512];
	fresh_url(url, sizeof(url), "p", "");
	struct objstore *os = open_ok(url);
	REQUIRE(os != NULL);
	const char *keys[] = {"d/1", "d/2", "d/3 &<x>", "d/4", "keep"};
	for (size_t i = 0; i < 5; i++)
		CHECK_EQ(put_str(os, keys[i], "v"), 0);
	struct oshttp_stats before, after;
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_DELETE, &before);
	const char *del[] = {"d/1", "d/2", "d/3 &<x>", "d/4", "d/never-there"};
	int rc = objstore_del_batch(os, del, 5);
	if (rc != 0)
		fprintf(stderr, "  del_batch: %s\n", diag_last());
	CHECK_EQ(rc, 0);
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_DELETE, &after);
	CHECK_EQ(after.requests - before.requests, 1 + after.retries - before.retries); /* s3rver's 500s */
	CHECK_EQ(after.ok - before.ok, 1);
	struct seen s = {{0}, 0};
	CHECK_EQ(objstore_list(os, "", seen_cb, &s), 0);
	CHECK(strcmp(s.text, "keep=1;") == 0);
	CHECK_EQ(objstore_del_batch(os, del, 0), 0);
	objstore_destroy(os);
}

TEST(probe_refuses_a_server_that_ignores_if_none_match_unless_single_writer)
{
	char url[512];
	snprintf(url, sizeof(url), "s3://t%u-probe?endpoint=%s", (unsigned)getpid(), endpoint);
	struct objstore *os = NULL;
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "does not enforce If-None-Match") != NULL);
	CHECK(strstr(diag_last(), "conditional writes are needed when several writers may share the store") !=
	      NULL);
	CHECK(strstr(diag_last(), "add single_writer=1 to the URL if you guarantee one node") != NULL);
	CHECK(os == NULL);
	char ok[600];
	snprintf(ok, sizeof(ok), "%s&single_writer=1", url);
	os = open_ok(ok);
	CHECK(os != NULL);
	if (os != NULL) {
		CHECK_EQ(objstore_s3_conditions_enforced(os), 0);
		struct seen s = {{0}, 0};
		CHECK_EQ(objstore_list(os, "", seen_cb, &s), 0);
		CHECK_EQ(s.n, 0); /* both probes deleted their object */
		objstore_destroy(os);
	}
}

TEST(credentials_come_from_the_environment_or_a_file_and_never_show)
{
	char *id = strdup(getenv("AWS_ACCESS_KEY_ID")), *secret = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
	char url[512];
	fresh_url(url, sizeof(url), NULL, "&retries=0");
	struct objstore *os = NULL;
	/* A key id s3rver does not know: 403 InvalidAccessKeyId at open. */
	setenv("AWS_ACCESS_KEY_ID", "AKIDSTRATAWRONG", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "sEcReT-never-shown", 1);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EIO);
	CHECK(strstr(diag_last(), "HTTP 403") != NULL); /* a HEAD of the bucket: no body, no code */
	CHECK(strstr(diag_last(), "refused the credentials for bucket 't") != NULL);
	CHECK(strstr(diag_last(), "sEcReT") == NULL);
	setenv("AWS_SECRET_ACCESS_KEY", "", 1);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "without AWS_SECRET_ACCESS_KEY") != NULL);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	char *dir = harness_tmpdir("s3cred");
	setenv("HOME", dir, 1); /* no ~/.aws/credentials */
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "no credentials for bucket") != NULL);
	/* A credentials file: the profile asked for, with comments and spaces. */
	char path[600];
	snprintf(path, sizeof(path), "%s/credentials", dir);
	FILE *f = fopen(path, "w");
	fprintf(f, "# strata test\n[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = x\n\n"
		   "[strata]\n  aws_access_key_id=%s\naws_secret_access_key = %s\n; end\n", id, secret);
	fclose(f);
	char withfile[1400];
	snprintf(withfile, sizeof(withfile), "%s&credentials_file=%s&profile=strata", url, path);
	os = open_ok(withfile);
	CHECK(os != NULL);
	if (os != NULL) {
		CHECK_EQ(put_str(os, "k", "v"), 0);
		objstore_destroy(os);
	}
	snprintf(withfile, sizeof(withfile), "%s&credentials_file=%s&profile=nobody", url, path);
	CHECK_EQ(objstore_url_new(withfile, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "no profile [nobody]") != NULL);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_PROFILE", "strata", 1);
	os = open_ok(url);
	CHECK(os != NULL);
	objstore_destroy(os);
	unsetenv("AWS_PROFILE");
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EIO); /* [default] holds a key id s3rver refuses */
	CHECK(strstr(diag_last(), "AKIDWRONG") == NULL || strstr(diag_last(), "InvalidAccessKeyId") != NULL);
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	if (home != NULL)
		setenv("HOME", home, 1);
	free(home);
	setenv("AWS_ACCESS_KEY_ID", id, 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	harness_rmrf(dir);
	free(dir);
	free(id);
	free(secret);
}

TEST(bad_urls_are_refused_naming_what_is_wrong)
{
	struct objstore *os = NULL;
	char url[512];
	snprintf(url, sizeof(url), "s3://cfg1?endpoint=%s&colour=blue", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "unknown parameter 'colour'") != NULL);
	snprintf(url, sizeof(url), "s3://Bad_Bucket?endpoint=%s", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "bucket") != NULL);
	snprintf(url, sizeof(url), "s3://cfg1?endpoint=%s&part_bytes=100", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "part_bytes") != NULL);
	/* strtoull would take these (a sign wraps round, "-0" is 0): only digits are a number. */
	static const char *not_numbers[] = {"-0", "-1", "+3", "-18446744073709551615", "", "3x"};
	for (size_t i = 0; i < sizeof(not_numbers) / sizeof(not_numbers[0]); i++) {
		snprintf(url, sizeof(url), "s3://cfg1?endpoint=%s&retries=%s", endpoint, not_numbers[i]);
		CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
		CHECK(strstr(diag_last(), "retries must be a number in 0..100") != NULL);
	}
	snprintf(url, sizeof(url), "s3://cfg1?endpoint=%s&region=Mars_1", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "region") != NULL);
	snprintf(url, sizeof(url), "s3://cfg1?endpoint=%s&single_writer=yes", endpoint);
	CHECK_EQ(objstore_url_new(url, &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "single_writer") != NULL);
	CHECK_EQ(objstore_url_new("s3://cfg1?endpoint=ftp://x", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "endpoint") != NULL);
	CHECK_EQ(objstore_url_new("s3://cfg1//x?endpoint=http://127.0.0.1:1", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "empty component") != NULL);
	CHECK_EQ(objstore_url_new("gcs://bucket", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "unknown scheme 'gcs'") != NULL);
}

/* ---------------------------------------------------------------- a canned server */

/** One scripted answer. */
struct canned {
	/** Status line and headers, without the final blank line ("HTTP/1.1 412 ..."). */
	const char *head;
	/** Body. */
	const char *body;
};

/** A server that answers requests from a script and checks each one's SigV4 signature. */
struct fake {
	/** Listening socket. */
	int lfd;
	/** Its port. */
	int port;
	/** The script. */
	const struct canned *script;
	/** Its length; requests past it get 500. */
	int n;
	/** Requests served. */
	atomic_int served;
	/** Requests whose signature did not verify, or that lacked x-amz-content-sha256. */
	atomic_int bad_signatures;
	/** The secret to verify with. */
	const char *secret;
	/** Methods and targets seen, "PUT /b/k?x=;" joined. */
	char seen[8192];
	/** Guards seen. */
	pthread_mutex_t mu;
	/** The server thread. */
	pthread_t t;
	/** The connection being served (-1: none), shut down by fake_stop. */
	atomic_int cfd;
};

static void
hex_of(const unsigned char *md, unsigned n, char *hex)
{
	for (unsigned i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
}

static void
sha256_hex(const void *p, size_t n, char *hex)
{
	unsigned char md[32];
	unsigned int l = 0;
	EVP_Digest(p, n, md, &l, EVP_sha256(), NULL);
	hex_of(md, l, hex);
}

/** Find header name (lowercase) in head; its trimmed value into v. */
static int
header_of(const char *head, const char *name, char *v, size_t cap)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l != NULL; l = strstr(l, "\r\n")) {
		l += 2;
		if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
			const char *s = l + nl + 1, *e = strstr(s, "\r\n");
			while (*s == ' ')
				s++;
			size_t n = e ? (size_t)(e - s) : strlen(s);
			if (n >= cap)
				n = cap - 1;
			memcpy(v, s, n);
			v[n] = '\0';
			return 1;
		}
	}
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/** Verify a request's SigV4 signature the way AWS documents it (sorted query, signed
 *  headers by name, the x-amz-content-sha256 the body must match). */
static int
verify_sigv4(const char *secret, const char *head, const char *body, size_t blen)
{
	char auth[1024], date[32], sha[80], want_sha[65];
	if (!header_of(head, "authorization", auth, sizeof(auth)) || !header_of(head, "x-amz-date", date, sizeof(date)) ||
	    !header_of(head, "x-amz-content-sha256", sha, sizeof(sha)))
		return 0;
	sha256_hex(body, blen, want_sha);
	if (strcmp(sha, want_sha) != 0)
		return 0;
	char method[16], target[4096];
	if (sscanf(head, "%15s %4095s", method, target) != 2)
		return 0;
	char *q = strchr(target, '?');
	char query[4096] = "";
	if (q != NULL) {
		*q++ = '\0';
		char *parts[32];
		int np = 0;
		for (char *t = strtok(q, "&"); t != NULL && np < 32; t = strtok(NULL, "&"))
			parts[np++] = t;
		qsort(parts, (size_t)np, sizeof(parts[0]), cmp_str);
		for (int i = 0; i < np; i++) {
			strcat(query, i ? "&" : "");
			strcat(query, parts[i]);
			if (strchr(parts[i], '=') == NULL)
				strcat(query, "=");
		}
	}
	const char *sh = strstr(auth, "SignedHeaders="), *sg = strstr(auth, "Signature=");
	if (sh == NULL || sg == NULL)
		return 0;
	char signed_hdrs[512];
	sscanf(sh + 14, "%511[^,]", signed_hdrs);
	char canon[16384];
	snprintf(canon, sizeof(canon), "%s\n%s\n%s\n", method, target, query);
	char list[512];
	snprintf(list, sizeof(list), "%s", signed_hdrs);
	for (char *h = strtok(list, ";"); h != NULL; h = strtok(NULL, ";")) {
		char v[4096];
		if (!header_of(head, h, v, sizeof(v)))
			return 0; /* a signed header the request does not carry */
		size_t l = strlen(canon);
		snprintf(canon + l, sizeof(canon) - l, "%s:%s\n", h, v);
	}
	size_t l = strlen(canon);
	snprintf(canon + l, sizeof(canon) - l, "\n%s\n%s", signed_hdrs, sha);
	char ch[65], sts[512], day[9];
	sha256_hex(canon, strlen(canon), ch);
	snprintf(day, sizeof(day), "%.8s", date);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/us-east-1/s3/aws4_request\n%s", date, day, ch);
	unsigned char k[32];
	unsigned int kl = 0;
	char k0[256];
	snprintf(k0, sizeof(k0), "AWS4%s", secret);
	const char *steps[] = {day, "us-east-1", "s3", "aws4_request", sts};
	HMAC(EVP_sha256(), k0, (int)strlen(k0), (const unsigned char *)steps[0], strlen(steps[0]), k, &kl);
	for (int i = 1; i < 5; i++)
		HMAC(EVP_sha256(), k, (int)kl, (const unsigned char *)steps[i], strlen(steps[i]), k, &kl);
	char got[65];
	hex_of(k, kl, got);
	return strncmp(sg + 10, got, 64) == 0;
}

static void *
fake_main(void *arg)
{
	struct fake *f = arg;
	for (;;) {
		int cfd = accept(f->lfd, NULL, NULL);
		if (cfd < 0)
			return NULL;
		atomic_store(&f->cfd, cfd);
		static char b[1 << 20];
		for (;;) { /* requests of one kept-alive connection */
			size_t len = 0;
			char *end = NULL;
			while (end == NULL) {
				ssize_t r = read(cfd, b + len, sizeof(b) - 1 - len);
				if (r <= 0)
					goto closed;
				len += (size_t)r;
				b[len] = '\0';
				end = strstr(b, "\r\n\r\n");
			}
			char cl[32] = "0";
			header_of(b, "content-length", cl, sizeof(cl));
			size_t hl = (size_t)(end + 4 - b), want = hl + (size_t)atol(cl);
			char expect[64];
			if (header_of(b, "expect", expect, sizeof(expect)) && len < want &&
			    write(cfd, "HTTP/1.1 100 Continue\r\n\r\n", 25) < 0)
				goto closed;
			while (len < want) {
				ssize_t r = read(cfd, b + len, sizeof(b) - 1 - len);
				if (r <= 0)
					goto closed;
				len += (size_t)r;
			}
			end[2] = '\0';
			if (!verify_sigv4(f->secret, b, end + 4, want - hl))
				atomic_fetch_add(&f->bad_signatures, 1);
			char method[16], target[512];
			sscanf(b, "%15s %511s", method, target);
			pthread_mutex_lock(&f->mu);
			size_t sl = strlen(f->seen);
			snprintf(f->seen + sl, sizeof(f->seen) - sl, "%s %s;", method, target);
			pthread_mutex_unlock(&f->mu);
			int i = atomic_fetch_add(&f->served, 1);
			const struct canned *c = i < f->n ? &f->script[i]
							  : &(struct canned){"HTTP/1.1 500 Internal Server Error", ""};
			char out[8192];
			int cut = c->head[0] == '!'; /* promise 10 bytes more than the body, then hang up */
			int n = snprintf(out, sizeof(out), "%s\r\nContent-Length: %zu\r\n\r\n%s", c->head + cut,
					 strcmp(method, "HEAD") == 0 ? 0 : strlen(c->body) + (cut ? 10 : 0),
					 strcmp(method, "HEAD") == 0 ? "" : c->body);
			if (write(cfd, out, (size_t)n) != n || cut)
				break;
		}
	closed:
		atomic_store(&f->cfd, -1);
		close(cfd);
	}
}

static void
fake_start(struct fake *f, const struct canned *script, int n)
{
	memset(f, 0, sizeof(*f));
	f->script = script;
	f->n = n;
	f->secret = "fake-secret/with+chars";
	atomic_store(&f->cfd, -1);
	pthread_mutex_init(&f->mu, NULL);
	f->lfd = loopback_listener(&f->port);
	if (f->lfd < 0)
		abort();
	pthread_create(&f->t, NULL, fake_main, f);
}

static void
fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	close(f->lfd);
	int cfd = atomic_load(&f->cfd);
	if (cfd >= 0)
		shutdown(cfd, SHUT_RDWR); /* a kept-alive connection of a store never destroyed */
	pthread_join(f->t, NULL);
	pthread_mutex_destroy(&f->mu);
}

/** Open s3://bkt on the fake with the fake's credentials. */
static int
fake_open(struct fake *f, const char *extra, struct objstore **os)
{
	char *id = strdup(getenv("AWS_ACCESS_KEY_ID")), *secret = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
	setenv("AWS_ACCESS_KEY_ID", "AKIDFAKE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", f->secret, 1);
	char url[512];
	snprintf(url, sizeof(url), "s3://bkt/pre?endpoint=http://127.0.0.1:%d&region=us-east-1"
		 "&backoff_base_ms=1&backoff_max_ms=2%s", f->port, extra);
	int rc = objstore_url_new(url, os);
	setenv("AWS_ACCESS_KEY_ID", id, 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	free(id);
	free(secret);
	return rc;
}

#define OK200 "HTTP/1.1 200 OK\r\nETag: \"e1\""
#define NOCONTENT "HTTP/1.1 204 No Content"
#define PRECOND "HTTP/1.1 412 Precondition Failed\r\nContent-Type: application/xml"
#define PRECOND_BODY "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions " \
		     "you specified did not hold</Message></Error>"
/** What AWS answers at open: the bucket exists, the probe's second write and its stale
 *  If-Match are refused, the probe object is deleted. */
#define OPEN_ENFORCED {OK200, ""}, {OK200, ""}, {PRECOND, PRECOND_BODY}, {PRECOND, PRECOND_BODY}, \
		      {NOCONTENT, ""}

TEST(an_enforcing_server_opens_for_shared_use_and_maps_its_answers)
{
	static const struct canned script[] = {
		OPEN_ENFORCED,
		/* put_if_absent: a concurrent conditional write (409) is retried, then 412 = exists */
		{"HTTP/1.1 409 Conflict", "<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting "
					  "conditional operation is in progress</Message></Error>"},
		{PRECOND, PRECOND_BODY},
		/* put_if_match with a stale ETag */
		{PRECOND, PRECOND_BODY},
		/* put: throttled twice, then done */
		{"HTTP/1.1 503 Slow Down", "<Error><Code>SlowDown</Code><Message>Reduce your request "
					   "rate.</Message></Error>"},
		{"HTTP/1.1 503 Slow Down", "<Error><Code>SlowDown</Code><Message>Reduce your request "
					   "rate.</Message></Error>"},
		{OK200, ""},
		/* get: refused signature */
		{"HTTP/1.1 403 Forbidden", "<Error><Code>SignatureDoesNotMatch</Code><Message>The request "
					   "signature we calculated does not match</Message></Error>"},
		/* get: no such key */
		{"HTTP/1.1 404 Not Found", "<Error><Code>NoSuchKey</Code><Message>The specified key does not "
					   "exist.</Message></Error>"},
		/* get: no such bucket */
		{"HTTP/1.1 404 Not Found", "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does "
					   "not exist</Message></Error>"},
		/* a conditional multipart write: create, 2 parts, complete refused 412, abort */
		{OK200, "<InitiateMultipartUploadResult><Bucket>bkt</Bucket><Key>pre/m</Key><UploadId>up-1"
			"</UploadId></InitiateMultipartUploadResult>"},
		{OK200, ""},
		{OK200, ""},
		{PRECOND, PRECOND_BODY},
		{NOCONTENT, ""},
		/* recover: one stale upload and one fresh, then the abort of the stale one */
		{OK200, "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>pre/old"
			"</Key><UploadId>u-old</UploadId><Initiated>2001-01-01T00:00:00.000Z</Initiated></Upload>"
			"<Upload><Key>pre/new</Key><UploadId>u-new</UploadId><Initiated>2999-01-01T00:00:00.000Z"
			"</Initiated></Upload><Upload><Key>elsewhere</Key><UploadId>u-x</UploadId><Initiated>"
			"2001-01-01T00:00:00.000Z</Initiated></Upload></ListMultipartUploadsResult>"},
		{NOCONTENT, ""},
		/* a 200 CompleteMultipartUpload that carries an error */
		{OK200, "<InitiateMultipartUploadResult><UploadId>up-2</UploadId></InitiateMultipartUploadResult>"},
		{OK200, ""},
		{OK200, ""},
		{OK200, "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message>"
			"</Error>"},
		{NOCONTENT, ""},
	};
	struct fake f;
	fake_start(&f, script, (int)(sizeof(script) / sizeof(script[0])));
	struct objstore *os = NULL;
	int rc = fake_open(&f, "&part_bytes=65536", &os);
	if (rc != 0)
		fprintf(stderr, "  open: %s\n", diag_last());
	REQUIRE_EQ(rc, 0);
	CHECK_EQ(objstore_s3_conditions_enforced(os), 1);
	CHECK_EQ(objstore_put_if_absent(os, "m1", "x", 1), STRATA_EEXIST);
	CHECK_EQ(objstore_last_indeterminate(), 0);
	CHECK_EQ(objstore_put_if_match(os, "m1", "x", 1, "\"old\""), STRATA_ECONFLICT);
	CHECK(strstr(diag_last(), "stale") != NULL);
	CHECK_EQ(objstore_put(os, "p", "x", 1), 0);
	struct buf b = {0};
	CHECK_EQ(objstore_get(os, "g", &b), STRATA_EIO);
	CHECK(strstr(diag_last(), "SignatureDoesNotMatch") != NULL);
	CHECK(strstr(diag_last(), "bucket 'bkt'") != NULL);
	CHECK(strstr(diag_last(), f.secret) == NULL);
	CHECK_EQ(objstore_get(os, "g", &b), STRATA_NOTFOUND);
	CHECK_EQ(objstore_get(os, "g", &b), STRATA_EIO);
	CHECK(strstr(diag_last(), "bucket 'bkt' does not exist") != NULL);
	buf_destroy(&b);
	static uint8_t big[100000];
	struct objstore_writer *w = NULL;
	REQUIRE_EQ(objstore_s3_writer_open_if_absent(os, "m", &w), 0);
	CHECK_EQ(objstore_writer_write(w, big, sizeof(big)), 0);
	CHECK_EQ(objstore_writer_commit(w), STRATA_EEXIST);
	uint64_t removed = 0, bytes = 0;
	CHECK_EQ(objstore_recover(os, &removed, &bytes), 0);
	CHECK_EQ(removed, 1);
	REQUIRE_EQ(objstore_writer_open(os, "m2", &w), 0);
	CHECK_EQ(objstore_writer_write(w, big, sizeof(big)), 0);
	CHECK_EQ(objstore_writer_commit(w), STRATA_EIO);
	CHECK(strstr(diag_last(), "InternalError") != NULL);
	CHECK_EQ(atomic_load(&f.served), (int)(sizeof(script) / sizeof(script[0])));
	CHECK_EQ(atomic_load(&f.bad_signatures), 0);
	const char *want =
		"HEAD /bkt;PUT /bkt/pre/.strata-probe/"; /* the probe lives under the prefix */
	CHECK(strncmp(f.seen, want, strlen(want)) == 0);
	CHECK(strstr(f.seen, "POST /bkt/pre/m?uploads=;PUT /bkt/pre/m?partNumber=1&uploadId=up-1;"
			     "PUT /bkt/pre/m?partNumber=2&uploadId=up-1;POST /bkt/pre/m?uploadId=up-1;"
			     "DELETE /bkt/pre/m?uploadId=up-1;") != NULL);
	CHECK(strstr(f.seen, "GET /bkt?max-uploads=1000&prefix=pre%2F&uploads=;DELETE /bkt/pre/old?uploadId=u-old;") !=
	      NULL);
	if (strstr(f.seen, "DELETE /bkt/pre/old?uploadId=u-old;") == NULL)
		fprintf(stderr, "  seen: %s\n", f.seen);
	struct oshttp_stats st;
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_PUT, &st);
	CHECK(st.throttled == 2 && st.retries == 2); /* 2 SlowDown */
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_PUT_IF_ABSENT, &st);
	CHECK(st.retries == 1 && st.client_errors == 2); /* the 409, then 412; and the probe's 412 */
	struct objstore_op_stats ops[OBJSTORE_MAX_OP_KINDS];
	size_t nops = objstore_request_stats(os, ops, OBJSTORE_MAX_OP_KINDS);
	CHECK(nops == OSHTTP_OP_COUNT && strcmp(ops[OSHTTP_OP_PUT_IF_ABSENT].op, "put_if_absent") == 0 &&
	      ops[OSHTTP_OP_PUT_IF_ABSENT].retries == 1);
	objstore_destroy(os);
	fake_stop(&f);
}

TEST(an_open_is_refused_when_the_probe_write_succeeds_twice)
{
	static const struct canned script[] = {
		{OK200, ""}, {OK200, ""}, {OK200, ""}, {PRECOND, PRECOND_BODY}, {NOCONTENT, ""},
		{OK200, ""}, {OK200, ""}, {PRECOND, PRECOND_BODY}, {OK200, ""}, {NOCONTENT, ""},
	};
	struct fake f;
	fake_start(&f, script, (int)(sizeof(script) / sizeof(script[0])));
	struct objstore *os = NULL;
	CHECK_EQ(fake_open(&f, "", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "does not enforce If-None-Match") != NULL);
	CHECK(strstr(diag_last(), "single_writer=1") != NULL);
	objstore_destroy(os);
	os = NULL;
	CHECK_EQ(atomic_load(&f.served), 5); /* the probe object was deleted all the same */
	CHECK(strstr(f.seen, "DELETE /bkt/pre/.strata-probe/") != NULL);
	/* If-None-Match enforced, a stale If-Match accepted: refused too. */
	CHECK_EQ(fake_open(&f, "", &os), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "does not enforce If-Match") != NULL);
	objstore_destroy(os);
	CHECK_EQ(atomic_load(&f.bad_signatures), 0);
	fake_stop(&f);
}

TEST(a_get_cut_mid_body_is_retried_from_the_start)
{
	static const struct canned script[] = {
		OPEN_ENFORCED,
		{"!" OK200, "first-half"},
		{OK200, "the whole object"},
	};
	struct fake f;
	fake_start(&f, script, (int)(sizeof(script) / sizeof(script[0])));
	struct objstore *os = NULL;
	REQUIRE_EQ(fake_open(&f, "", &os), 0);
	CHECK(get_eq(os, "k", "the whole object")); /* nothing of the cut answer is kept */
	struct oshttp_stats st;
	oshttp_client_stats(objstore_s3_client(os), OSHTTP_OP_GET, &st);
	CHECK(st.transport_errors == 1 && st.retries == 1 && st.indeterminate == 0);
	objstore_destroy(os);
	fake_stop(&f);
}

TEST(sigv4_headers_are_signed_as_aws_checks_them)
{
	/* An odd key, a query, a session token and a body: the fake verifies each request. */
	static const struct canned script[] = {
		OPEN_ENFORCED,
		{OK200, ""},
		{OK200, "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t/1+2="
			"</NextContinuationToken><Contents><Key>pre/a b</Key><Size>3</Size></Contents>"
			"</ListBucketResult>"},
		{OK200, "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/c</Key><Size>4"
			"</Size></Contents></ListBucketResult>"},
		{OK200, "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>n"
			"</NextContinuationToken><Contents><Key>pre/b</Key><Size>3</Size></Contents>"
			"</ListBucketResult>"},
		{OK200, "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/a</Key><Size>4"
			"</Size></Contents></ListBucketResult>"},
		{OK200, "<DeleteResult><Error><Key>pre/x</Key><Code>AccessDenied</Code><Message>no</Message>"
			"</Error></DeleteResult>"},
	};
	struct fake f;
	fake_start(&f, script, (int)(sizeof(script) / sizeof(script[0])));
	setenv("AWS_SESSION_TOKEN", "session/token+value=", 1);
	struct objstore *os = NULL;
	int rc = fake_open(&f, "&list_page=1", &os);
	unsetenv("AWS_SESSION_TOKEN");
	REQUIRE_EQ(rc, 0);
	CHECK_EQ(objstore_put(os, "a b+c&d=e/\xc3\xa9", "body", 4), 0);
	struct seen s = {{0}, 0};
	CHECK_EQ(objstore_list(os, "", seen_cb, &s), 0);
	CHECK(strcmp(s.text, "a b=3;c=4;") == 0);
	const char *keys[] = {"x", "y"};
	CHECK_EQ(objstore_list(os, "", seen_cb, &s), STRATA_EIO); /* out of byte order */
	CHECK(strstr(diag_last(), "not in byte order") != NULL);
	CHECK_EQ(objstore_del_batch(os, keys, 2), STRATA_EIO);
	CHECK(strstr(diag_last(), "pre/x was not deleted: AccessDenied") != NULL);
	CHECK_EQ(atomic_load(&f.bad_signatures), 0);
	CHECK(strstr(f.seen, "PUT /bkt/pre/a%20b%2Bc%26d%3De/%C3%A9;") != NULL);
	CHECK(strstr(f.seen, "GET /bkt?continuation-token=t%2F1%2B2%3D&list-type=2&max-keys=1&prefix=pre%2F;") !=
	      NULL);
	if (atomic_load(&f.bad_signatures) != 0 || strstr(f.seen, "continuation-token") == NULL)
		fprintf(stderr, "  seen: %s\n", f.seen);
	objstore_destroy(os);
	fake_stop(&f);
}

/* ---------------------------------------------------------------- the XML parsers */

TEST(xml_parsers_keep_what_they_need_and_refuse_hostile_documents)
{
	struct s3xml_list l = {0};
	static const char list[] = "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/"
				   "2006-03-01/\"><Name>b</Name><Contents><Key>a&amp;b</Key><Size>12</Size>"
				   "<ETag>&quot;x&quot;</ETag></Contents><IsTruncated>true</IsTruncated>"
				   "<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>";
	CHECK_EQ(s3xml_parse_list(list, strlen(list), 10, "page", &l), 0);
	CHECK(l.n == 1 && strcmp(l.v[0].name, "a&b") == 0 && l.v[0].size == 12);
	CHECK(l.truncated == 1 && strcmp(l.next, "tok") == 0);
	CHECK_EQ(s3xml_parse_list(list, strlen(list), 0, "page", &l), STRATA_EIO); /* over the page */
	CHECK_EQ(l.n, 0);
	CHECK_EQ(s3xml_parse_list(list, strlen(list) - 10, 10, "page", &l), STRATA_EIO); /* truncated */
	CHECK(strstr(diag_last(), "page: malformed XML") != NULL);
	static const char nosize[] = "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>";
	CHECK_EQ(s3xml_parse_list(nosize, strlen(nosize), 10, "page", &l), STRATA_EIO);
	CHECK(strstr(diag_last(), "no <Size>") != NULL);
	static const char bomb[] = "<!DOCTYPE x [<!ENTITY a \"aaaa\">]><ListBucketResult>&a;</ListBucketResult>";
	CHECK_EQ(s3xml_parse_list(bomb, strlen(bomb), 10, "page", &l), STRATA_EIO);
	CHECK(strstr(diag_last(), "DOCTYPE") != NULL);
	static const char other[] = "<Error><Code>NoSuchBucket</Code></Error>";
	CHECK_EQ(s3xml_parse_list(other, strlen(other), 10, "page", &l), STRATA_EIO);
	CHECK(strstr(diag_last(), "unexpected root element <Error>") != NULL);
	static const char bad_size[] = "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents>"
				       "</ListBucketResult>";
	CHECK_EQ(s3xml_parse_list(bad_size, strlen(bad_size), 10, "page", &l), STRATA_EIO);
	char id[16];
	static const char init[] = "<InitiateMultipartUploadResult><UploadId>0123456789abcdef0123</UploadId>"
				   "</InitiateMultipartUploadResult>";
	CHECK_EQ(s3xml_parse_upload_id(init, strlen(init), "init", id, sizeof(id)), STRATA_EIO); /* too long */
	char id2[64];
	CHECK_EQ(s3xml_parse_upload_id(init, strlen(init), "init", id2, sizeof(id2)), 0);
	CHECK(strcmp(id2, "0123456789abcdef0123") == 0);
	static const char up[] = "<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId>u</UploadId>"
				 "<Initiated>2026-12-02T02:10:11.000Z</Initiated></Upload><IsTruncated>false"
				 "</IsTruncated></ListMultipartUploadsResult>";
	CHECK_EQ(s3xml_parse_uploads(up, strlen(up), 10, "uploads", &l), 0);
	CHECK(l.n == 1 && strcmp(l.v[0].upload_id, "u") == 0 && l.v[0].initiated == 1796177411);
	s3xml_list_destroy(&l);
}

/* ---------------------------------------------------------------- the engine */

TEST(engine_round_trip_on_s3_append_seal_merge_compact_reopen)
{
	char url[512];
	fresh_url(url, sizeof(url), "db", "");
	char *dir = harness_tmpdir("s3engine");
	REQUIRE(dir != NULL);
	strata_options o;
	strata *db = NULL;
	REQUIRE_EQ(engine_open(&o, dir, url, &db), 0);
	int n = 200; /* every get is a ranged GET of s3rver: a few blocks of 1 KiB per shard, kept short */
	int finished;
	engine_append_seal_merge_compact(db, n, &finished);
	REQUIRE(finished);
	strata_close(db);
	/* The objects are in the bucket: list them through a store of the same URL. */
	struct objstore *os = open_ok(url);
	REQUIRE(os != NULL);
	check_engine_objects_listed(os);
	objstore_destroy(os);
	db = NULL;
	REQUIRE_EQ(strata_open(&o, &db), 0);
	check_engine_reopened(db, n);
	strata_close(db);
	/* Without single_writer the same store is refused by the probe. */
	char shared[512];
	snprintf(shared, sizeof(shared), "%.*s", (int)(strstr(url, "&single_writer=1") - url), url);
	o.store = shared;
	CHECK_EQ(strata_open(&o, &db), STRATA_EINVAL);
	CHECK(strstr(strata_last_error(), "does not enforce If-None-Match") != NULL);
	harness_rmrf(dir);
	free(dir);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	endpoint = getenv("STRATA_TEST_S3_ENDPOINT");
	if (endpoint == NULL || getenv("AWS_ACCESS_KEY_ID") == NULL || getenv("AWS_SECRET_ACCESS_KEY") == NULL) {
		fprintf(stderr, "test_s3: set STRATA_TEST_S3_ENDPOINT, AWS_ACCESS_KEY_ID and "
				"AWS_SECRET_ACCESS_KEY (tests/objstore/s3.sh does)\n");
		return 2;
	}
	RUN(get_range_put_size_delete_roundtrip);
	RUN(list_is_byte_ordered_prefix_filtered_and_paged);
	RUN(writer_uploads_parts_then_completes);
	RUN(del_batch_deletes_in_one_request);
	RUN(probe_refuses_a_server_that_ignores_if_none_match_unless_single_writer);
	RUN(credentials_come_from_the_environment_or_a_file_and_never_show);
	RUN(bad_urls_are_refused_naming_what_is_wrong);
	RUN(an_enforcing_server_opens_for_shared_use_and_maps_its_answers);
	RUN(an_open_is_refused_when_the_probe_write_succeeds_twice);
	RUN(a_get_cut_mid_body_is_retried_from_the_start);
	RUN(sigv4_headers_are_signed_as_aws_checks_them);
	RUN(xml_parsers_keep_what_they_need_and_refuse_hostile_documents);
	RUN(engine_round_trip_on_s3_append_seal_merge_compact_reopen);
	return HARNESS_END("objstore_s3");
}
