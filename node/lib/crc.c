#include "crc.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t
crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;
	while (len > 0) {
		int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;
		c = crc32_iscsi((unsigned char *)p, n, c);
		p += n;
		len -= (size_t)n;
	}
	return ~c;
}
