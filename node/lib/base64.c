#include "base64.h"

#include "../strata_types.h"

/** The standard alphabet. */
static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int
b64_encode(struct buf *out, const uint8_t *p, size_t n)
{
	if (buf_reserve(out, (n + 2) / 3 * 4 + 1))
		return STRATA_ENOMEM;
	char *o = (char *)out->data + out->len;
	size_t i = 0, k = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		o[k++] = b64_alphabet[v >> 18];
		o[k++] = b64_alphabet[(v >> 12) & 63];
		o[k++] = b64_alphabet[(v >> 6) & 63];
		o[k++] = b64_alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		o[k++] = b64_alphabet[v >> 18];
		o[k++] = b64_alphabet[(v >> 12) & 63];
		o[k++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
		o[k++] = '=';
	}
	out->len += k;
	return 0;
}

/** Value of base64 character c, or -1. */
static int
b64_val(unsigned char c, unsigned flags)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || (c == '-' && (flags & B64_URLSAFE)))
		return 62;
	if (c == '/' || (c == '_' && (flags & B64_URLSAFE)))
		return 63;
	return -1;
}

int
b64_decode(const char *in, size_t n, unsigned flags, uint8_t *out, size_t *out_len)
{
	*out_len = 0;
	size_t m = n;
	if (flags & B64_LENIENT) {
		for (m = 0; m < n && in[m] != '='; m++)
			;
	} else if (n > 0 && in[n - 1] == '=') {
		if (n % 4 != 0)
			return STRATA_EINVAL;
		m = n > 1 && in[n - 2] == '=' ? n - 2 : n - 1;
	}
	if (!(flags & B64_LENIENT) && m % 4 == 1)
		return STRATA_EINVAL;
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < m; i++) {
		int v = b64_val((unsigned char)in[i], flags);
		if (v < 0)
			return STRATA_EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (acc != 0 && !(flags & B64_LENIENT))
		return STRATA_EINVAL;
	*out_len = o;
	return 0;
}
