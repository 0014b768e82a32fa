/* buf.h — a growable byte buffer and little-endian / varint codecs. */
#ifndef STRATA_BUF_H
#define STRATA_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/** A growable byte buffer; memory from env.realloc. Zero-initialise to create. */
struct buf {
	/** The bytes. */
	uint8_t *data;
	/** Bytes in use. */
	size_t len;
	/** Bytes allocated. */
	size_t cap;
};

/** Ensure room for extra more bytes. 0 or STRATA_ENOMEM. */
int buf_reserve(struct buf *b, size_t extra);
/** Append n bytes. 0 or STRATA_ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_put_u8(struct buf *b, uint8_t v);
int buf_put_u32(struct buf *b, uint32_t v);
int buf_put_u64(struct buf *b, uint64_t v);
int buf_put_varint(struct buf *b, uint64_t v);
/** Release the memory and zero the struct. */
void buf_destroy(struct buf *b);
/** Forget the contents, keep the memory. */
static inline void buf_reset(struct buf *b) { b->len = 0; }

static inline void enc_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void enc_u64(uint8_t *p, uint64_t v)
{
	enc_u32(p, (uint32_t)v);
	enc_u32(p + 4, (uint32_t)(v >> 32));
}
/** Bytes the LEB128 varint of v takes (1 to 10). */
static inline size_t enc_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}
/** Write the LEB128 varint of v at p (room for enc_varint_len(v) bytes); the bytes written. */
static inline size_t enc_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}
static inline uint32_t dec_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t dec_u64(const uint8_t *p)
{
	return (uint64_t)dec_u32(p) | (uint64_t)dec_u32(p + 4) << 32;
}

/** A bounds-checked reader over a byte range. Any overrun sets err and yields zeros. */
struct rd {
	/** Next byte to read. */
	const uint8_t *p;
	/** One past the last readable byte. */
	const uint8_t *end;
	/** Set once a read ran past end or a varint was malformed. */
	int err;
};

static inline void rd_init(struct rd *r, const void *p, size_t n)
{
	r->p = p;
	r->end = r->p + n;
	r->err = 0;
}
static inline size_t rd_left(const struct rd *r) { return (size_t)(r->end - r->p); }
static inline const uint8_t *rd_bytes(struct rd *r, size_t n)
{
	if (r->err || rd_left(r) < n) {
		r->err = 1;
		return NULL;
	}
	const uint8_t *p = r->p;
	r->p += n;
	return p;
}
static inline uint8_t rd_u8(struct rd *r)
{
	const uint8_t *p = rd_bytes(r, 1);
	return p ? p[0] : 0;
}
static inline uint32_t rd_u32(struct rd *r)
{
	const uint8_t *p = rd_bytes(r, 4);
	return p ? dec_u32(p) : 0;
}
static inline uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_bytes(r, 8);
	return p ? dec_u64(p) : 0;
}
static inline uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->err || r->p >= r->end) {
			r->err = 1;
			return 0;
		}
		uint8_t c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->err = 1;
	return 0;
}

#endif
