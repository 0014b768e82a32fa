/* text.h — small string helpers shared by the layers above. */
#ifndef STRATA_TEXT_H
#define STRATA_TEXT_H

/** Levenshtein distance of a and b (each counted up to 255 characters), for
 *  "did you mean ...?" suggestions. */
unsigned text_edit_distance(const char *a, const char *b);

#endif
