/*
 * phist.h — the history of the policies a node ran: one entry per policy put live (the
 * one it started with, each PUT /v1/policy, each reload of the policy file), with the
 * time, the source's hash, who applied it (the bearer token's name), the policy's name
 * and its source, so that the console shows the history and rolls back to any entry.
 *
 * The newest `cap` entries are kept in memory and in a JSON-lines file in the data
 * directory (DATA/policy-history.jsonl: one object per line, appended and synced per
 * entry, rewritten with the newest `cap` when it holds twice as many). A line that does
 * not parse (a torn last line after a crash) is skipped with a warning naming its line.
 * Any thread: a mutex guards it.
 */
#ifndef STRATA_PHIST_H
#define STRATA_PHIST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/** The file of the history in the data directory. */
#define PHIST_FILE "policy-history.jsonl"
/** Entries kept by default (strata serve --policy-history). */
#define PHIST_DEFAULT_CAP 64u
/** Most entries that may be kept. */
#define PHIST_MAX_CAP 4096u

struct phist;

/** Open the history kept in path (created at the first entry), keeping cap entries
 *  (1..PHIST_MAX_CAP). 0, or a STRATA_E* code (diag_last says why). */
int phist_open(const char *path, size_t cap, struct phist **out);
/** Free. Safe on NULL. */
void phist_close(struct phist *h);
/** Add an entry: the policy version the runtime gave it, who applied it, the policy's
 *  name, an optional note ("rollback to #3"; NULL: none) and its source. Unless force,
 *  nothing is added when the newest entry has the same source (a restart running the
 *  policy it ran before). Returns the entry's number (1, 2, ...), 0 when nothing was
 *  added; a file that cannot be written is logged, and the entry stays in memory. */
uint64_t phist_add(struct phist *h, uint64_t version, const char *who, const char *name, const char *note,
		   const char *src, size_t len, int force);
/** {"capacity", "file", "entries": [{"id", "time", "version", "hash", "who", "name",
 *  "note", "bytes", "source"?}]}, newest first; with_source adds each source (or, with
 *  only_id, the one entry's). NULL when out of memory. */
json_t *phist_json(struct phist *h, int with_source, uint64_t only_id);
/** A copy (malloc) of entry id's source (id 0: the newest entry's) and its length; 0, or
 *  STRATA_NOTFOUND when no such entry is kept. */
int phist_source(struct phist *h, uint64_t id, char **src, size_t *len);
/** The hash phist uses for a source: XXH3-64 as 16 lowercase hex digits into out[17]. */
void phist_hash(const char *src, size_t len, char out[17]);

#endif
