/* base64.h — base64 (RFC 4648) encoding and decoding, standard and URL-safe alphabets. */
#ifndef STRATA_BASE64_H
#define STRATA_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/** Flags of b64_decode. */
enum {
	/** Also accept the URL-safe alphabet ('-' for 62, '_' for 63), mixed with the standard one. */
	B64_URLSAFE = 1,
	/** Forgiving: stop at the first '=' (ignoring the rest) and accept any length and
	 *  non-zero leftover bits. Without it the input must be canonical: '=' padding
	 *  optional but, when present, to a multiple of 4; never 1 character past a
	 *  multiple of 4; leftover bits zero. */
	B64_LENIENT = 2,
};

/** Most bytes that decoding n characters yields (room to give b64_decode). */
static inline size_t
b64_decoded_max(size_t n)
{
	return n / 4 * 3 + n % 4 * 3 / 4;
}

/** Append the standard base64 of p[0..n), '=' padded, to out. 0 or STRATA_ENOMEM. */
int b64_encode(struct buf *out, const uint8_t *p, size_t n);
/** Decode in[0..n) (B64_* flags) into out, which has room for b64_decoded_max(n) bytes;
 *  *out_len is the decoded length. 0 or STRATA_EINVAL when the input is not base64. */
int b64_decode(const char *in, size_t n, unsigned flags, uint8_t *out, size_t *out_len);

#endif
