#include "text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
