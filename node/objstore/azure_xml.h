/*
 * azure_xml.h — the parser of Azure Blob's List Blobs pages, over expat (error bodies,
 * which S3 writes alike, are parsed by osxml_parse_error, xml.h). Limits are explicit:
 * nesting depth, text per element, entries per page; a document type declaration (and
 * so any entity) is refused. A malformed, truncated, oversized or hostile body gets
 * STRATA_EIO with a message naming what was wrong and where.
 */
#ifndef STRATA_AZURE_XML_H
#define STRATA_AZURE_XML_H

#include <stddef.h>
#include <stdint.h>

/** Deepest element nesting accepted. */
#define AZXML_MAX_DEPTH 16
/** Longest text of one element, bytes (a blob name is at most 1024). */
#define AZXML_MAX_TEXT 4096

/** One blob of a listing page. */
struct azxml_entry {
	/** Its full name (with the store's prefix), NUL-terminated. */
	char *name;
	/** Content-Length. */
	uint64_t size;
};

/** One List Blobs page. Zero-initialise; release with azxml_list_destroy. */
struct azxml_list {
	/** The blobs, in the order of the answer. */
	struct azxml_entry *v;
	/** How many. */
	size_t n;
	/** Room in v. */
	size_t cap;
	/** NextMarker ("" when the listing is complete). */
	char next_marker[AZXML_MAX_TEXT + 1];
};

/** Parse a List Blobs answer of at most max_entries blobs into out (what: for messages). */
int azxml_parse_list(const void *data, size_t len, size_t max_entries, const char *what,
		     struct azxml_list *out);
/** Release a page. */
void azxml_list_destroy(struct azxml_list *l);

#endif
