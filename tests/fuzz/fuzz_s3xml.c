/*
 * fuzz_s3xml.c — libFuzzer target for the S3 XML parsers (node/objstore/s3_xml.c:
 * ListObjectsV2 and ListMultipartUploads pages, DeleteObjects results, the UploadId of
 * InitiateMultipartUpload). Every input goes through each parser. Oracles beyond "no
 * crash, leak or sanitizer report": a failure is STRATA_EIO (or STRATA_ENOMEM) with a
 * message naming the document and leaves no entries; a page that parses holds at most
 * the entries asked for, each with a non-empty key of at most S3XML_MAX_TEXT bytes (and
 * an upload id for an upload); tokens and ids fit their buffers.
 */
#include <stdint.h>
#include <string.h>

#include "../../node/objstore/s3_xml.h"
#include "fuzz_util.h"

/** Entries per page the target asks for (small, so the limit is reached). */
#define FUZZ_S3XML_PAGE 64

typedef int (*fuzz_s3xml_page_fn)(const void *, size_t, size_t, const char *, struct s3xml_list *);

static void
fuzz_page(fuzz_s3xml_page_fn fn, const char *what, int uploads, const uint8_t *data, size_t size)
{
	struct s3xml_list l = {0};
	int rc = fn(data, size, FUZZ_S3XML_PAGE, what, &l);
	if (rc != 0) {
		if (rc != STRATA_EIO && rc != STRATA_ENOMEM)
			FUZZ_FAIL("%s gave %s: %s", what, fuzz_code(rc), diag_last());
		if (strstr(diag_last(), what) == NULL)
			FUZZ_FAIL("the message names no document: %s", diag_last());
		if (l.n != 0)
			FUZZ_FAIL("a failed parse of %s left %zu entries", what, l.n);
	} else {
		if (l.n > FUZZ_S3XML_PAGE)
			FUZZ_FAIL("%s: %zu entries, more than the %d asked for", what, l.n, FUZZ_S3XML_PAGE);
		for (size_t i = 0; i < l.n; i++) {
			size_t n = strlen(l.v[i].name);
			if (n == 0 || n > S3XML_MAX_TEXT)
				FUZZ_FAIL("%s: entry %zu has a key of %zu bytes", what, i, n);
			if (uploads && (l.v[i].upload_id == NULL || l.v[i].upload_id[0] == '\0'))
				FUZZ_FAIL("%s: upload %zu has no id", what, i);
			if (strlen(l.v[i].code) >= sizeof(l.v[i].code))
				FUZZ_FAIL("%s: a code over its buffer", what);
		}
		if (strlen(l.next) > S3XML_MAX_TEXT || strlen(l.next_upload) > S3XML_MAX_TEXT)
			FUZZ_FAIL("%s: a token over the limit", what);
	}
	s3xml_list_destroy(&l);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	diag_log_sink = fuzz_quiet_sink;
	fuzz_page(s3xml_parse_list, "fuzz-list", 0, data, size);
	fuzz_page(s3xml_parse_uploads, "fuzz-uploads", 1, data, size);
	fuzz_page(s3xml_parse_delete, "fuzz-delete", 0, data, size);
	char id[32];
	int rc = s3xml_parse_upload_id(data, size, "fuzz-init", id, sizeof(id));
	if (rc != 0 && rc != STRATA_EIO && rc != STRATA_ENOMEM)
		FUZZ_FAIL("s3xml_parse_upload_id gave %s: %s", fuzz_code(rc), diag_last());
	if (rc == 0 && (id[0] == '\0' || strlen(id) >= sizeof(id)))
		FUZZ_FAIL("an upload id of %zu bytes", strlen(id));
	return 0;
}
