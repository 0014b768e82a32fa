/*
 * fuzz_manifest.c — libFuzzer target for the manifest decoders (manifest_decode, and
 * manifest_edit_decode for an input that starts "STRMEDIT"; a decoded edit must
 * re-encode to the same bytes).
 * Each input is decoded as it is and, when that differs, with its trailing CRC32C
 * recomputed, so mutations reach the checks behind the checksum. Oracles beyond "no
 * crash, leak or sanitizer report": a failure is STRATA_ECORRUPT or STRATA_EVERSION
 * naming the input; a manifest that decodes re-encodes, and the re-encoding decodes to
 * the same manifest.
 */
#include <stdint.h>

#include "../../node/core/manifest.h"
#include "../../node/lib/buf.h"
#include "fuzz_util.h"

static int
objs_equal(const struct manifest_obj *a, const struct manifest_obj *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i].id != b[i].id || a[i].epoch != b[i].epoch || a[i].bytes != b[i].bytes ||
		    a[i].rows != b[i].rows || a[i].min_seq != b[i].min_seq || a[i].max_seq != b[i].max_seq)
			return 0;
	return 1;
}

static void
decode_edit(const uint8_t *data, size_t size)
{
	struct manifest_edit e;
	int rc = manifest_edit_decode(data, size, "fuzz-input", &e);
	if (rc != 0) {
		if (rc != STRATA_ECORRUPT && rc != STRATA_EVERSION)
			FUZZ_FAIL("manifest_edit_decode gave %s: %s", fuzz_code(rc), diag_last());
		if (strstr(diag_last(), "fuzz-input") == NULL)
			FUZZ_FAIL("the message names no edit: %s", diag_last());
		return;
	}
	struct buf b = {0};
	if (manifest_edit_encode(&e, &b) != 0)
		FUZZ_FAIL("a decoded edit does not encode: %s", diag_last());
	if (b.len != size || memcmp(b.data, data, size) != 0)
		FUZZ_FAIL("encode(decode(edit)) differs from the edit");
	manifest_edit_destroy(&e);
	buf_destroy(&b);
}

static void
decode_one(const uint8_t *data, size_t size)
{
	if (size >= 8 && memcmp(data, "STRMEDIT", 8) == 0) {
		decode_edit(data, size);
		return;
	}
	struct manifest m;
	int rc = manifest_decode(data, size, "fuzz-input", &m);
	if (rc != 0) {
		if (rc != STRATA_ECORRUPT && rc != STRATA_EVERSION)
			FUZZ_FAIL("manifest_decode gave %s: %s", fuzz_code(rc), diag_last());
		if (strstr(diag_last(), "fuzz-input") == NULL)
			FUZZ_FAIL("the message names no manifest: %s", diag_last());
		return;
	}
	struct buf b = {0};
	rc = manifest_encode(&m, &b);
	if (rc != 0)
		FUZZ_FAIL("a decoded manifest does not encode: %s: %s", fuzz_code(rc),
			  diag_last());
	struct manifest m2;
	rc = manifest_decode(b.data, b.len, "re-encoded", &m2);
	if (rc != 0)
		FUZZ_FAIL("a re-encoded manifest does not decode: %s", diag_last());
	if (m.version != m2.version || m.writer_epoch != m2.writer_epoch ||
	    m.replay_after != m2.replay_after || m.next_generation != m2.next_generation ||
	    m.ngens != m2.ngens || m.nruns != m2.nruns || !objs_equal(m.gens, m2.gens, m.ngens) ||
	    !objs_equal(m.runs, m2.runs, m.nruns))
		FUZZ_FAIL("decode(encode(m)) differs from m");
	struct manifest m3;
	if (manifest_copy(&m3, &m) == 0)
		manifest_destroy(&m3);
	manifest_destroy(&m2);
	manifest_destroy(&m);
	buf_destroy(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	diag_log_sink = fuzz_quiet_sink;
	decode_one(data, size);
	if (size < 8)
		return 0;
	uint8_t *fixed = fuzz_copy(data, size);
	enc_u32(fixed + size - 4, crc32c(0, fixed, size - 4));
	if (memcmp(fixed, data, size) != 0)
		decode_one(fixed, size);
	free(fixed);
	return 0;
}
