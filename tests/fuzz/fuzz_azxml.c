/*
 * fuzz_azxml.c — libFuzzer target for the Azure Blob XML parsers: List Blobs pages
 * (node/objstore/azure_xml.c) and error bodies (node/objstore/xml.c, which parses S3's
 * too). Oracles beyond "no crash, leak or sanitizer report": a failure is STRATA_EIO (or
 * STRATA_ENOMEM) with a message naming the document; a page that parses holds at most
 * the entries asked for, each with a non-empty name of at most AZXML_MAX_TEXT bytes; an
 * error body's code and message fit their buffers.
 */
#include <stdint.h>
#include <string.h>

#include "../../node/objstore/azure_xml.h"
#include "../../node/objstore/xml.h"
#include "fuzz_util.h"

/** Entries per page the target asks for (small, so the limit is reached). */
#define FUZZ_AZXML_PAGE 64

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	diag_log_sink = fuzz_quiet_sink;
	struct azxml_list l = {0};
	int rc = azxml_parse_list(data, size, FUZZ_AZXML_PAGE, "fuzz-page", &l);
	if (rc != 0) {
		if (rc != STRATA_EIO && rc != STRATA_ENOMEM)
			FUZZ_FAIL("azxml_parse_list gave %s: %s", fuzz_code(rc), diag_last());
		if (strstr(diag_last(), "fuzz-page") == NULL)
			FUZZ_FAIL("the message names no document: %s", diag_last());
		if (l.n != 0)
			FUZZ_FAIL("a failed parse left %zu entries", l.n);
	} else {
		if (l.n > FUZZ_AZXML_PAGE)
			FUZZ_FAIL("%zu entries, more than the %d asked for", l.n, FUZZ_AZXML_PAGE);
		for (size_t i = 0; i < l.n; i++) {
			size_t n = strlen(l.v[i].name);
			if (n == 0 || n > AZXML_MAX_TEXT)
				FUZZ_FAIL("entry %zu has a name of %zu bytes", i, n);
		}
		if (strlen(l.next_marker) > AZXML_MAX_TEXT)
			FUZZ_FAIL("a marker over the limit");
	}
	azxml_list_destroy(&l);
	char code[32], msg[64];
	rc = osxml_parse_error(data, size, code, sizeof(code), msg, sizeof(msg));
	if (rc != 0 && rc != STRATA_EIO && rc != STRATA_ENOMEM)
		FUZZ_FAIL("osxml_parse_error gave %s: %s", fuzz_code(rc), diag_last());
	if (strlen(code) >= sizeof(code) || strlen(msg) >= sizeof(msg))
		FUZZ_FAIL("code or message overran its buffer");
	return 0;
}
