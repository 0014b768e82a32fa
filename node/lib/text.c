#include "text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int
text_utf8_valid(const void *p, size_t n)
{
	const uint8_t *s = p;
	size_t i = 0;
	while (i < n) {
		/* ASCII eight bytes at a time: most keys and values are. */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (w & 0x8080808080808080ull)
				break;
			i += 8;
		}
		if (i == n)
			break;
		uint8_t c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len;
		uint32_t cp;
		if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (len > n - i)
			return 0;
		for (size_t j = 1; j < len; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += len;
	}
	return 1;
}

int
text_u64(const char *v, int base, uint64_t *out, const char **rest)
{
	if (v == NULL || v[0] < '0' || v[0] > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, base);
	if (errno != 0 || (rest == NULL && *end != '\0'))
		return -1;
	if (rest != NULL)
		*rest = end;
	*out = x;
	return 0;
}

unsigned
text_edit_distance(const char *a, const char *b)
{
	size_t la = strnlen(a, 255), lb = strnlen(b, 255);
	unsigned row[256];
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j];
			unsigned best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}
