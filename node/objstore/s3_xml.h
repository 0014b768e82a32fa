/*
 * s3_xml.h — the parsers of S3's XML answers, over expat: ListObjectsV2 pages,
 * ListMultipartUploads pages, InitiateMultipartUpload results and DeleteObjects
 * results. Error bodies have the same <Error><Code/><Message/></Error> shape as Azure's
 * and are parsed by osxml_parse_error (xml.h). Limits are explicit: nesting
 * depth, text per element, entries per page; a document type declaration (and so any
 * entity) is refused. A malformed, truncated, oversized or hostile body gets STRATA_EIO
 * with a message naming what was wrong and where.
 */
#ifndef STRATA_S3_XML_H
#define STRATA_S3_XML_H

#include <stddef.h>
#include <stdint.h>

/** Deepest element nesting accepted. */
#define S3XML_MAX_DEPTH 16
/** Longest text of one element, bytes (a key is at most 1024, a token a few hundred). */
#define S3XML_MAX_TEXT 4096

/** One entry of a page: an object, an upload in progress, or a key a delete refused. */
struct s3xml_entry {
	/** The full key (with the store's prefix), NUL-terminated. */
	char *name;
	/** Size of an object (ListObjectsV2). */
	uint64_t size;
	/** Upload id (ListMultipartUploads), NULL otherwise. */
	char *upload_id;
	/** Initiated, seconds since the epoch (ListMultipartUploads; 0 when unknown). */
	int64_t initiated;
	/** The error code of a refused delete (DeleteObjects), "" otherwise. */
	char code[64];
};

/** One page of a listing or a delete result. Zero-initialise; release with s3xml_list_destroy. */
struct s3xml_list {
	/** The entries, in the order of the answer. */
	struct s3xml_entry *v;
	/** How many. */
	size_t n;
	/** Room in v. */
	size_t cap;
	/** IsTruncated was true. */
	int truncated;
	/** NextContinuationToken (ListObjectsV2) or NextKeyMarker (uploads); "" when absent. */
	char next[S3XML_MAX_TEXT + 1];
	/** NextUploadIdMarker (uploads); "" when absent. */
	char next_upload[S3XML_MAX_TEXT + 1];
};

/** Parse a ListObjectsV2 page of at most max_entries objects into out (what: for messages). */
int s3xml_parse_list(const void *data, size_t len, size_t max_entries, const char *what,
		     struct s3xml_list *out);
/** Parse a ListMultipartUploads page of at most max_entries uploads into out. */
int s3xml_parse_uploads(const void *data, size_t len, size_t max_entries, const char *what,
			struct s3xml_list *out);
/** Parse a DeleteObjects result: out holds the keys it refused (at most max_entries). */
int s3xml_parse_delete(const void *data, size_t len, size_t max_entries, const char *what,
		       struct s3xml_list *out);
/** The UploadId of an InitiateMultipartUpload result into id (cap bytes with the NUL). */
int s3xml_parse_upload_id(const void *data, size_t len, const char *what, char *id, size_t cap);
/** Release a page. */
void s3xml_list_destroy(struct s3xml_list *l);

#endif
