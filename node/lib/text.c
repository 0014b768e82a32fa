#include "text.h"

#include <string.h>

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
