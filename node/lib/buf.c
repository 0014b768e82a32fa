#include "buf.h"

#include "../strata_types.h"
#include "env.h"

int
buf_reserve(struct buf *b, size_t extra)
{
	if (b->cap - b->len >= extra)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra) {
		if (cap > SIZE_MAX / 2)
			return STRATA_ENOMEM;
		cap *= 2;
	}
	uint8_t *p = env.realloc(b->data, cap);
	if (p == NULL)
		return STRATA_ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	int rc = buf_reserve(b, n);
	if (rc)
		return rc;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int
buf_put_u8(struct buf *b, uint8_t v)
{
	return buf_append(b, &v, 1);
}

int
buf_put_u32(struct buf *b, uint32_t v)
{
	uint8_t t[4];
	enc_u32(t, v);
	return buf_append(b, t, 4);
}

int
buf_put_u64(struct buf *b, uint64_t v)
{
	uint8_t t[8];
	enc_u64(t, v);
	return buf_append(b, t, 8);
}

int
buf_put_varint(struct buf *b, uint64_t v)
{
	uint8_t t[10];
	return buf_append(b, t, enc_varint(t, v));
}

void
buf_destroy(struct buf *b)
{
	env.free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
