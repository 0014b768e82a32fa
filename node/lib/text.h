/* text.h — small string helpers shared by the layers above. */
#ifndef STRATA_TEXT_H
#define STRATA_TEXT_H

#include <stddef.h>
#include <stdint.h>

/** Levenshtein distance of a and b (each counted up to 255 characters), for
 *  "did you mean ...?" suggestions. */
unsigned text_edit_distance(const char *a, const char *b);

/** Parses an unsigned number in base (as strtoull; 0 takes 0x and 0 prefixes) into *out.
 *  Unlike strtoull, v must start with a digit: no blanks, no sign ("-1" would wrap round,
 *  "-0" would be 0). With rest NULL the number must be all of v; otherwise *rest is set to
 *  what follows it (a unit suffix). Returns 0, or -1 when v is NULL, not a number, or over
 *  UINT64_MAX; *out is left alone then. */
int text_u64(const char *v, int base, uint64_t *out, const char **rest);

/** Whether p[0..n) is well-formed UTF-8 as RFC 3629 has it (and as jansson checks it):
 *  no overlong form, no surrogate (U+D800..U+DFFF), nothing above U+10FFFF, no
 *  sequence cut short. NUL bytes are UTF-8. */
int text_utf8_valid(const void *p, size_t n);

#endif
