/*
 * test_base64.c — the base64 codec of node/lib/base64.h: the RFC 4648 vectors, both
 * alphabets, padding, the strict decoder the HTTP API uses (flags 0) and the
 * forgiving one of `strata load` (B64_URLSAFE | B64_LENIENT), and bad input.
 */
#include <stdint.h>
#include <string.h>

#include "../../node/lib/base64.h"
#include "../../node/lib/buf.h"
#include "../../node/strata.h"
#include "harness.h"

/** What `strata load` passes: either alphabet, forgiving padding. */
#define LOAD_FLAGS (B64_URLSAFE | B64_LENIENT)

/** Decode the C string in with flags; 1 when it decodes to exactly want[0..want_len). */
static int
decodes_to(const char *in, unsigned flags, const char *want, size_t want_len)
{
	uint8_t out[256];
	size_t n = strlen(in), m = 12345;
	if (b64_decoded_max(n) > sizeof(out))
		return 0;
	int rc = b64_decode(in, n, flags, out, &m);
	if (rc != 0) {
		fprintf(stderr, "  decode '%s' (flags %u) = %d\n", in, flags, rc);
		return 0;
	}
	if (m > b64_decoded_max(n) || m != want_len || memcmp(out, want, m) != 0) {
		fprintf(stderr, "  decode '%s' (flags %u): %zu bytes '%.*s', want '%.*s'\n", in, flags, m,
			(int)m, (const char *)out, (int)want_len, want);
		return 0;
	}
	return 1;
}

/** 1 when in is refused with STRATA_EINVAL under flags. */
static int
refused(const char *in, unsigned flags)
{
	uint8_t out[256];
	size_t m = 0;
	int rc = b64_decode(in, strlen(in), flags, out, &m);
	if (rc != STRATA_EINVAL)
		fprintf(stderr, "  decode '%s' (flags %u) = %d (%zu bytes), want STRATA_EINVAL\n", in, flags, rc, m);
	return rc == STRATA_EINVAL;
}

/** 1 when encoding the C string in gives exactly want (appended after what out held). */
static int
encodes_to(const char *in, const char *want)
{
	struct buf b = {0};
	int ok = buf_append(&b, "x", 1) == 0 && b64_encode(&b, (const uint8_t *)in, strlen(in)) == 0 &&
		 b.len == 1 + strlen(want) && memcmp(b.data + 1, want, strlen(want)) == 0;
	if (!ok)
		fprintf(stderr, "  encode '%s': got '%.*s', want 'x%s'\n", in, (int)b.len, (const char *)b.data,
			want);
	buf_destroy(&b);
	return ok;
}

#define DEC(in, flags, want) CHECK(decodes_to(in, flags, want, sizeof(want) - 1))

TEST(encode_rfc4648_vectors)
{
	CHECK(encodes_to("", ""));
	CHECK(encodes_to("f", "Zg=="));
	CHECK(encodes_to("fo", "Zm8="));
	CHECK(encodes_to("foo", "Zm9v"));
	CHECK(encodes_to("foob", "Zm9vYg=="));
	CHECK(encodes_to("fooba", "Zm9vYmE="));
	CHECK(encodes_to("foobar", "Zm9vYmFy"));
	/* Bytes that map to 62 and 63 use the standard alphabet. */
	struct buf b = {0};
	const uint8_t hi[] = {0xfb, 0xff, 0xbf};
	REQUIRE(b64_encode(&b, hi, sizeof(hi)) == 0);
	CHECK(b.len == 4 && memcmp(b.data, "+/+/", 4) == 0);
	buf_destroy(&b);
}

TEST(strict_decodes_padded_and_unpadded)
{
	DEC("", 0, "");
	DEC("Zg==", 0, "f");
	DEC("Zg", 0, "f");
	DEC("Zm8=", 0, "fo");
	DEC("Zm8", 0, "fo");
	DEC("Zm9v", 0, "foo");
	DEC("Zm9vYg==", 0, "foob");
	DEC("Zm9vYmE=", 0, "fooba");
	DEC("Zm9vYmFy", 0, "foobar");
	DEC("+/+/", 0, "\xfb\xff\xbf");
}

TEST(strict_refuses_bad_input)
{
	CHECK(refused("Zm9v!", 0));    /* not in the alphabet */
	CHECK(refused("Zm 9v", 0));    /* nor is a space */
	CHECK(refused("-_-_", 0));     /* URL-safe characters need B64_URLSAFE */
	CHECK(refused("Z", 0));        /* 1 past a multiple of 4 */
	CHECK(refused("Zm9vY", 0));
	CHECK(refused("Zg=", 0));      /* padding to other than a multiple of 4 */
	CHECK(refused("Zm8==", 0));
	CHECK(refused("Zg===", 0));
	CHECK(refused("Z===", 0));
	CHECK(refused("====", 0));
	CHECK(refused("Zg==Zg==", 0)); /* '=' before the end */
	CHECK(refused("Zm=v", 0));
	CHECK(refused("Zh==", 0));     /* leftover bits not zero */
	CHECK(refused("Zm9=", 0));
	CHECK(refused("Zh", 0));
}

TEST(urlsafe_accepts_either_alphabet)
{
	DEC("-_-_", B64_URLSAFE, "\xfb\xff\xbf");
	DEC("+_-/", B64_URLSAFE, "\xfb\xff\xbf");
	DEC("+/+/", B64_URLSAFE, "\xfb\xff\xbf");
	DEC("Zm8", B64_URLSAFE, "fo");
	DEC("Zm8=", B64_URLSAFE, "fo");
	/* Still strict about padding and leftover bits without B64_LENIENT. */
	CHECK(refused("Zg=", B64_URLSAFE));
	CHECK(refused("Zh==", B64_URLSAFE));
	CHECK(refused("-_-_.", B64_URLSAFE));
}

TEST(lenient_stops_at_padding)
{
	DEC("Zm9vYmFy", LOAD_FLAGS, "foobar");
	DEC("-_-_", LOAD_FLAGS, "\xfb\xff\xbf");
	DEC("Zg==", LOAD_FLAGS, "f");
	DEC("Zg=", LOAD_FLAGS, "f");        /* short padding */
	DEC("Zg===", LOAD_FLAGS, "f");      /* long padding */
	DEC("Zg=!junk", LOAD_FLAGS, "f");   /* whatever follows the first '=' */
	DEC("=Zm9v", LOAD_FLAGS, "");
	DEC("Zh==", LOAD_FLAGS, "f");       /* leftover bits ignored */
	DEC("Zm9vY", LOAD_FLAGS, "foo");    /* a lone trailing character yields nothing */
	DEC("Z", LOAD_FLAGS, "");
	CHECK(refused("Zm9v!", LOAD_FLAGS)); /* a bad character before any '=' */
	CHECK(refused("Zm 9v", LOAD_FLAGS));
	CHECK(refused("Zm9v\n", LOAD_FLAGS));
	CHECK(refused("Zm.=", B64_LENIENT));
	CHECK(refused("-_-_", B64_LENIENT)); /* lenient alone keeps the standard alphabet */
}

TEST(round_trips_every_length)
{
	uint8_t in[200], out[200];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(in); i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		in[i] = (uint8_t)s;
	}
	for (size_t n = 0; n <= 130; n++) {
		struct buf b = {0};
		REQUIRE(b64_encode(&b, in, n) == 0);
		CHECK_EQ(b.len, (n + 2) / 3 * 4);
		static const unsigned flags[] = {0, B64_URLSAFE, B64_LENIENT, B64_URLSAFE | B64_LENIENT};
		for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
			size_t m = 0;
			CHECK(b64_decoded_max(b.len) <= sizeof(out));
			CHECK_EQ(b64_decode((const char *)b.data, b.len, flags[f], out, &m), 0);
			CHECK_EQ(m, n);
			CHECK(memcmp(out, in, n) == 0);
			/* Unpadded decodes too. */
			size_t len = b.len;
			while (len > 0 && b.data[len - 1] == '=')
				len--;
			CHECK_EQ(b64_decode((const char *)b.data, len, flags[f], out, &m), 0);
			CHECK_EQ(m, n);
			CHECK(memcmp(out, in, n) == 0);
		}
		buf_destroy(&b);
	}
}

TEST(decoded_max_bounds_the_output)
{
	CHECK_EQ(b64_decoded_max(0), 0);
	CHECK_EQ(b64_decoded_max(1), 0);
	CHECK_EQ(b64_decoded_max(2), 1);
	CHECK_EQ(b64_decoded_max(3), 2);
	CHECK_EQ(b64_decoded_max(4), 3);
	CHECK_EQ(b64_decoded_max(8), 6);
	CHECK_EQ(b64_decoded_max(11), 8);
	CHECK(b64_decoded_max(SIZE_MAX) <= SIZE_MAX / 4 * 3 + 2);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(encode_rfc4648_vectors);
	RUN(strict_decodes_padded_and_unpadded);
	RUN(strict_refuses_bad_input);
	RUN(urlsafe_accepts_either_alphabet);
	RUN(lenient_stops_at_padding);
	RUN(round_trips_every_length);
	RUN(decoded_max_bounds_the_output);
	return HARNESS_END("test_base64");
}
