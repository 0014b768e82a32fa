/*
 * manifest.c — the per-shard manifest: binary codec, in-memory edits, and the
 * versioned compare-and-swap protocol over an object store (put-if-absent of
 * "<prefix>manifest/<version %020llu>").
 *
 * Whole manifest (little-endian): "STRMANIF", u32 format, u64 version, u64
 * writer_epoch, u64 replay_after, u64 next_generation, [format 2: u32 tip_crc], u32
 * ngens, ngens x obj, u32 nruns, nruns x obj, u32 crc32c of all preceding bytes.
 * obj = six u64: id, epoch, bytes, rows, min_seq, max_seq. Formats 3 and 4 are 1 and
 * 2 with a seventh u64 per obj, its group (manifest_obj.group); they are written only
 * when a run is grouped, so a store that never split a merge keeps formats 1 and 2.
 *
 * Edit: "STRMEDIT", u32 format, u64 version, u32 prev_crc, u64 writer_epoch, u64
 * replay_after, u64 next_generation, u32 ngens, u32 nruns (after the edit), u32 n +
 * n x u64 generation ids removed, the same for runs, u32 n + n x (u32 position, obj)
 * generations added, the same for runs, u32 crc32c of all preceding bytes. Applying
 * removes first, then inserts at the ascending positions of the result. Format 2 adds
 * the group to each added obj, and is written only when an added run is grouped.
 */
#include "manifest.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/crc.h"
#include "../lib/diag.h"
#include "../lib/env.h"

/** Magic at the start of every encoded manifest. */
#define MANIFEST_MAGIC "STRMANIF"
/** Length of MANIFEST_MAGIC. */
#define MANIFEST_MAGIC_LEN 8
/** Highest whole-manifest format this build reads and writes (2: a snapshot, with tip_crc;
 *  3 and 4: formats 1 and 2 with grouped runs); newer ones are refused with STRATA_EVERSION. */
#define MANIFEST_FORMAT 4
/** Encoded size of one manifest_obj without and with its group. */
#define MANIFEST_OBJ_BYTES 48
#define MANIFEST_OBJ_GROUPED_BYTES 56
/** Whether a whole-manifest format carries tip_crc and the recent CRCs (a snapshot). */
#define MANIFEST_FMT_TIP(f) ((f) == 2 || (f) == 4)
/** Encoded size of one obj in a whole-manifest format. */
#define MANIFEST_FMT_OBJ(f) ((f) >= 3 ? MANIFEST_OBJ_GROUPED_BYTES : MANIFEST_OBJ_BYTES)
/** Encoded size without objects: magic, format, 4 u64, 2 counts, crc. */
#define MANIFEST_FIXED_BYTES (MANIFEST_MAGIC_LEN + 4 + 32 + 4 + 4 + 4)
/** Most generations, and most runs, one manifest may hold. */
#define MANIFEST_MAX_OBJS (1u << 20)
/** Put-if-absent attempts before claim_epoch / commit_update give up. */
#define MANIFEST_MAX_RETRIES 100
/** Loads retried when the listed highest version vanishes before it is read. */
#define MANIFEST_LOAD_RETRIES 8
/** Longest object key built here, including the NUL. */
#define MANIFEST_KEY_MAX 1024
/** Digits of a version in its object key. */
#define MANIFEST_VERSION_DIGITS 20

void
manifest_obj_key(char *dst, size_t n, const char *prefix, int kind, const struct manifest_obj *o)
{
	snprintf(dst, n, "%s%s/%016llx-%08llx.sst", prefix, kind == MANIFEST_RUN ? "run" : "gen",
		 (unsigned long long)o->id, (unsigned long long)o->epoch);
}

/** Parse exactly len lowercase hex digits at p. */
static int
manifest_parse_hex(const char *p, size_t len, uint64_t *v)
{
	if (len == 0 || len > 16)
		return -1;
	uint64_t x = 0;
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		int d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else
			return -1;
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	return 0;
}

int
manifest_parse_obj_key(const char *key, int *kind, uint64_t *id, uint64_t *epoch)
{
	if (key == NULL)
		return diag_set(STRATA_EINVAL, "object key: NULL");
	const char *file = strrchr(key, '/');
	if (file == NULL || file - key < 3)
		return diag_set(STRATA_EINVAL, "object key '%s': not <prefix>gen/ or run/", key);
	const char *dir = file - 3;
	if (dir > key && dir[-1] != '/')
		return diag_set(STRATA_EINVAL, "object key '%s': not <prefix>gen/ or run/", key);
	int k;
	if (memcmp(dir, "gen", 3) == 0)
		k = MANIFEST_GEN;
	else if (memcmp(dir, "run", 3) == 0)
		k = MANIFEST_RUN;
	else
		return diag_set(STRATA_EINVAL, "object key '%s': not <prefix>gen/ or run/", key);
	file++;
	size_t len = strlen(file);
	const char *dash = strchr(file, '-');
	if (len < 4 || strcmp(file + len - 4, ".sst") != 0 || dash == NULL)
		return diag_set(STRATA_EINVAL, "object key '%s': not <id>-<epoch>.sst", key);
	uint64_t i, e;
	if (manifest_parse_hex(file, (size_t)(dash - file), &i) != 0 ||
	    manifest_parse_hex(dash + 1, (size_t)(file + len - 4 - dash - 1), &e) != 0)
		return diag_set(STRATA_EINVAL, "object key '%s': bad hex id or epoch", key);
	char canon[64];
	snprintf(canon, sizeof(canon), "%016llx-%08llx.sst", (unsigned long long)i,
		 (unsigned long long)e);
	if (strcmp(canon, file) != 0)
		return diag_set(STRATA_EINVAL, "object key '%s': not in canonical form", key);
	*kind = k;
	*id = i;
	*epoch = e;
	return 0;
}

void
manifest_version_key(char *dst, size_t n, const char *prefix, uint64_t version)
{
	snprintf(dst, n, "%smanifest/%0*llu", prefix, MANIFEST_VERSION_DIGITS,
		 (unsigned long long)version);
}

static int
manifest_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Check ids: unique across gens and runs and below next_generation (an external
 * compactor's, MANIFEST_EXTERNAL_ID, only unique). Returns 0, or
 * 1 with *bad set to the offending id and *dup telling which rule it broke, or
 * STRATA_ENOMEM.
 */
static int
manifest_check_ids(const struct manifest *m, uint64_t *bad, int *dup)
{
	size_t n = (size_t)m->ngens + m->nruns;
	for (uint32_t i = 0; i < m->ngens; i++) {
		if (m->gens[i].id >= m->next_generation && !(m->gens[i].id & MANIFEST_EXTERNAL_ID)) {
			*bad = m->gens[i].id;
			*dup = 0;
			return 1;
		}
	}
	for (uint32_t i = 0; i < m->nruns; i++) {
		if (m->runs[i].id >= m->next_generation && !(m->runs[i].id & MANIFEST_EXTERNAL_ID)) {
			*bad = m->runs[i].id;
			*dup = 0;
			return 1;
		}
	}
	if (n < 2)
		return 0;
	uint64_t *ids = env.malloc(n * sizeof(*ids));
	if (ids == NULL)
		return STRATA_ENOMEM;
	for (uint32_t i = 0; i < m->ngens; i++)
		ids[i] = m->gens[i].id;
	for (uint32_t i = 0; i < m->nruns; i++)
		ids[m->ngens + i] = m->runs[i].id;
	qsort(ids, n, sizeof(*ids), manifest_u64_cmp);
	int rc = 0;
	for (size_t i = 1; i < n; i++) {
		if (ids[i] == ids[i - 1]) {
			*bad = ids[i];
			*dup = 1;
			rc = 1;
			break;
		}
	}
	env.free(ids);
	return rc;
}

/** The groups of runs[0..n) well formed: each stretch of grouped runs starts at the part
 *  whose id is the group (ids are unique, so a group is one stretch). 0, or 1 with the
 *  offending id in *bad. */
static int
manifest_check_run_groups(const struct manifest_obj *runs, uint32_t n, uint64_t *bad)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t g = runs[i].group;
		if (g != 0 && runs[i].id != g && (i == 0 || runs[i - 1].group != g)) {
			*bad = runs[i].id;
			return 1;
		}
	}
	return 0;
}

/** manifest_check_run_groups of m's runs, and no generation grouped. */
static int
manifest_check_groups(const struct manifest *m, uint64_t *bad)
{
	for (uint32_t i = 0; i < m->ngens; i++) {
		if (m->gens[i].group != 0) {
			*bad = m->gens[i].id;
			return 1;
		}
	}
	return manifest_check_run_groups(m->runs, m->nruns, bad);
}

/** 1 when some run of m is grouped. */
static int
manifest_grouped(const struct manifest *m)
{
	for (uint32_t i = 0; i < m->nruns; i++)
		if (m->runs[i].group != 0)
			return 1;
	return 0;
}

uint32_t
manifest_sorted_runs(const struct manifest *m, uint32_t n)
{
	if (n > m->nruns)
		n = m->nruns;
	uint32_t c = 0;
	for (uint32_t i = 0; i < n; i += manifest_run_parts(m->runs, n, i))
		c++;
	return c;
}

uint32_t
manifest_run_parts(const struct manifest_obj *runs, uint32_t n, uint32_t i)
{
	uint32_t end = i + 1;
	while (runs[i].group != 0 && end < n && runs[end].group == runs[i].group)
		end++;
	return end - i;
}

static int
manifest_put_obj(struct buf *out, const struct manifest_obj *o, int grouped)
{
	uint8_t t[MANIFEST_OBJ_GROUPED_BYTES];
	enc_u64(t, o->id);
	enc_u64(t + 8, o->epoch);
	enc_u64(t + 16, o->bytes);
	enc_u64(t + 24, o->rows);
	enc_u64(t + 32, o->min_seq);
	enc_u64(t + 40, o->max_seq);
	enc_u64(t + 48, o->group);
	return buf_append(out, t, grouped ? MANIFEST_OBJ_GROUPED_BYTES : MANIFEST_OBJ_BYTES);
}

/** Encode m as format 1 (a whole-manifest log entry) or 2 (a snapshot, with tip_crc),
 *  each 2 higher (3, 4) when a run is grouped. */
static int
manifest_encode_fmt(const struct manifest *m, uint32_t format, struct buf *out)
{
	if (manifest_grouped(m))
		format += 2;
	uint64_t badg;
	if (manifest_check_groups(m, &badg))
		return diag_set(STRATA_EINVAL, "manifest v%llu: object %llu has a group that does not "
				"start at its first part", (unsigned long long)m->version,
				(unsigned long long)badg);
	if (m->ngens > MANIFEST_MAX_OBJS || m->nruns > MANIFEST_MAX_OBJS)
		return diag_set(STRATA_EINVAL, "manifest v%llu: %u generations, %u runs; limit %u each",
				(unsigned long long)m->version, m->ngens, m->nruns, MANIFEST_MAX_OBJS);
	uint64_t bad;
	int dup;
	int rc = manifest_check_ids(m, &bad, &dup);
	if (rc < 0)
		return diag_set(rc, "manifest v%llu: no memory to check ids",
				(unsigned long long)m->version);
	if (rc > 0)
		return diag_set(STRATA_EINVAL, "manifest v%llu: id %llu %s",
				(unsigned long long)m->version, (unsigned long long)bad,
				dup ? "appears twice" : "is not below next_generation");
	size_t start = out->len;
	size_t total = MANIFEST_FIXED_BYTES + (MANIFEST_FMT_TIP(format) ? 8 + 4 * MANIFEST_RECENT : 0) +
		       ((size_t)m->ngens + m->nruns) * MANIFEST_FMT_OBJ(format);
	if (buf_reserve(out, total) != 0)
		return diag_set(STRATA_ENOMEM, "manifest v%llu: no memory for %zu bytes",
				(unsigned long long)m->version, total);
	rc = buf_append(out, MANIFEST_MAGIC, MANIFEST_MAGIC_LEN);
	rc = rc ? rc : buf_put_u32(out, format);
	rc = rc ? rc : buf_put_u64(out, m->version);
	rc = rc ? rc : buf_put_u64(out, m->writer_epoch);
	rc = rc ? rc : buf_put_u64(out, m->replay_after);
	rc = rc ? rc : buf_put_u64(out, m->next_generation);
	uint32_t nrecent = 0;
	if (MANIFEST_FMT_TIP(format)) {
		rc = rc ? rc : buf_put_u32(out, m->tip_crc);
		uint32_t crc;
		while (nrecent < MANIFEST_RECENT && nrecent < m->version &&
		       manifest_recent_crc(m, m->version - nrecent, &crc))
			nrecent++;
		rc = rc ? rc : buf_put_u32(out, nrecent);
		for (uint32_t i = nrecent; rc == 0 && i-- > 0;) {
			manifest_recent_crc(m, m->version - i, &crc);
			rc = buf_put_u32(out, crc);
		}
	}
	rc = rc ? rc : buf_put_u32(out, m->ngens);
	for (uint32_t i = 0; rc == 0 && i < m->ngens; i++)
		rc = manifest_put_obj(out, &m->gens[i], format >= 3);
	rc = rc ? rc : buf_put_u32(out, m->nruns);
	for (uint32_t i = 0; rc == 0 && i < m->nruns; i++)
		rc = manifest_put_obj(out, &m->runs[i], format >= 3);
	rc = rc ? rc : buf_put_u32(out, crc32c(0, out->data + start, out->len - start));
	if (rc) {
		out->len = start;
		return diag_set(rc, "manifest v%llu: no memory to encode",
				(unsigned long long)m->version);
	}
	assert(out->len - start + (MANIFEST_FMT_TIP(format) ? 4 * (MANIFEST_RECENT - nrecent) : 0) == total);
	return 0;
}

int
manifest_encode(const struct manifest *m, struct buf *out)
{
	return manifest_encode_fmt(m, 1, out);
}

int
manifest_encode_snapshot(const struct manifest *m, struct buf *out)
{
	return manifest_encode_fmt(m, 2, out);
}

/** Read n objects (with their groups when grouped) into a fresh array (NULL when n is 0). */
static int
manifest_rd_objs(struct rd *r, uint32_t n, int grouped, struct manifest_obj **out)
{
	*out = NULL;
	if (n == 0)
		return 0;
	struct manifest_obj *v = env.malloc((size_t)n * sizeof(*v));
	if (v == NULL)
		return STRATA_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		v[i].id = rd_u64(r);
		v[i].epoch = rd_u64(r);
		v[i].bytes = rd_u64(r);
		v[i].rows = rd_u64(r);
		v[i].min_seq = rd_u64(r);
		v[i].max_seq = rd_u64(r);
		v[i].group = grouped ? rd_u64(r) : 0;
	}
	*out = v;
	return 0;
}

int
manifest_decode(const void *p, size_t n, const char *name, struct manifest *out)
{
	memset(out, 0, sizeof(*out));
	const uint8_t *b = p;
	if (n < MANIFEST_FIXED_BYTES)
		return diag_set(STRATA_ECORRUPT, "manifest %s: %zu bytes, shorter than the %d-byte minimum",
				name, n, MANIFEST_FIXED_BYTES);
	if (memcmp(b, MANIFEST_MAGIC, MANIFEST_MAGIC_LEN) != 0)
		return diag_set(STRATA_ECORRUPT, "manifest %s: bad magic", name);
	uint32_t want = dec_u32(b + n - 4);
	uint32_t got = crc32c(0, b, n - 4);
	if (want != got)
		return diag_set(STRATA_ECORRUPT, "manifest %s: crc32c mismatch (stored %08x, computed %08x)",
				name, want, got);
	struct rd r;
	rd_init(&r, b + MANIFEST_MAGIC_LEN, n - MANIFEST_MAGIC_LEN - 4);
	uint32_t format = rd_u32(&r);
	if (format > MANIFEST_FORMAT)
		return diag_set(STRATA_EVERSION, "manifest %s: format %u, this build reads up to %d",
				name, format, MANIFEST_FORMAT);
	if (format == 0)
		return diag_set(STRATA_ECORRUPT, "manifest %s: format 0", name);
	struct manifest m = {0};
	m.version = rd_u64(&r);
	m.writer_epoch = rd_u64(&r);
	m.replay_after = rd_u64(&r);
	m.next_generation = rd_u64(&r);
	size_t objb = MANIFEST_FMT_OBJ(format);
	if (MANIFEST_FMT_TIP(format)) {
		m.tip_crc = rd_u32(&r);
		uint32_t nrecent = rd_u32(&r);
		if (nrecent > MANIFEST_RECENT || nrecent > m.version || (uint64_t)nrecent * 4 > rd_left(&r))
			return diag_set(STRATA_ECORRUPT, "manifest %s: %u recent entry CRCs", name, nrecent);
		for (uint32_t i = 0; i < nrecent; i++)
			manifest_note_entry(&m, m.version - nrecent + 1 + i, rd_u32(&r));
		if (nrecent > 0 && m.recent[m.version % MANIFEST_RECENT] != m.tip_crc)
			return diag_set(STRATA_ECORRUPT, "manifest %s: the recent entry CRCs do not end "
					"with its own", name);
	} else {
		m.tip_crc = want;
		manifest_note_entry(&m, m.version, want);
	}
	m.ngens = rd_u32(&r);
	if (m.ngens > MANIFEST_MAX_OBJS || (uint64_t)m.ngens * objb + 4 > rd_left(&r))
		return diag_set(STRATA_ECORRUPT, "manifest %s: %u generations do not fit in %zu bytes",
				name, m.ngens, n);
	int rc = manifest_rd_objs(&r, m.ngens, format >= 3, &m.gens);
	if (rc)
		return diag_set(rc, "manifest %s: no memory for %u generations", name, m.ngens);
	m.nruns = rd_u32(&r);
	if (m.nruns > MANIFEST_MAX_OBJS || (uint64_t)m.nruns * objb != rd_left(&r)) {
		rc = diag_set(STRATA_ECORRUPT, "manifest %s: %u runs do not match the %zu bytes left",
			      name, m.nruns, rd_left(&r));
		manifest_destroy(&m);
		return rc;
	}
	rc = manifest_rd_objs(&r, m.nruns, format >= 3, &m.runs);
	if (rc) {
		manifest_destroy(&m);
		return diag_set(rc, "manifest %s: no memory for %u runs", name, m.nruns);
	}
	if (r.err || rd_left(&r) != 0) {
		manifest_destroy(&m);
		return diag_set(STRATA_ECORRUPT, "manifest %s: length mismatch", name);
	}
	uint64_t bad;
	int dup;
	rc = manifest_check_ids(&m, &bad, &dup);
	if (rc != 0) {
		manifest_destroy(&m);
		if (rc < 0)
			return diag_set(rc, "manifest %s: no memory to check ids", name);
		return diag_set(STRATA_ECORRUPT, "manifest %s: id %llu %s", name,
				(unsigned long long)bad,
				dup ? "appears twice" : "is not below next_generation");
	}
	if (manifest_check_groups(&m, &bad)) {
		manifest_destroy(&m);
		return diag_set(STRATA_ECORRUPT, "manifest %s: object %llu has a group that does not "
				"start at its first part", name, (unsigned long long)bad);
	}
	*out = m;
	return 0;
}

void
manifest_note_entry(struct manifest *m, uint64_t v, uint32_t crc)
{
	if (v == 0)
		return;
	if (m->recent_from == 0 || v < m->recent_from)
		m->recent_from = v; /* positions are noted in order: this starts again */
	m->recent[v % MANIFEST_RECENT] = crc;
	if (v - m->recent_from >= MANIFEST_RECENT)
		m->recent_from = v - MANIFEST_RECENT + 1;
}

int
manifest_recent_crc(const struct manifest *m, uint64_t v, uint32_t *crc)
{
	if (m->recent_from == 0 || v < m->recent_from || v > m->version ||
	    m->version - v >= MANIFEST_RECENT)
		return 0;
	*crc = m->recent[v % MANIFEST_RECENT];
	return 1;
}

int
manifest_copy(struct manifest *dst, const struct manifest *src)
{
	struct manifest m = *src;
	m.gens = NULL;
	m.runs = NULL;
	if (src->ngens > 0) {
		m.gens = env.malloc((size_t)src->ngens * sizeof(*m.gens));
		if (m.gens == NULL)
			goto nomem;
		memcpy(m.gens, src->gens, (size_t)src->ngens * sizeof(*m.gens));
	}
	if (src->nruns > 0) {
		m.runs = env.malloc((size_t)src->nruns * sizeof(*m.runs));
		if (m.runs == NULL)
			goto nomem;
		memcpy(m.runs, src->runs, (size_t)src->nruns * sizeof(*m.runs));
	}
	*dst = m;
	return 0;
nomem:
	env.free(m.gens);
	memset(dst, 0, sizeof(*dst));
	return diag_set(STRATA_ENOMEM, "manifest v%llu: no memory to copy",
			(unsigned long long)src->version);
}

void
manifest_destroy(struct manifest *m)
{
	env.free(m->gens);
	env.free(m->runs);
	memset(m, 0, sizeof(*m));
}

static int
manifest_find(const struct manifest_obj *v, uint32_t n, uint64_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (v[i].id == id)
			return (int)i;
	return -1;
}

int
manifest_find_gen(const struct manifest *m, uint64_t id)
{
	return manifest_find(m->gens, m->ngens, id);
}

int
manifest_find_run(const struct manifest *m, uint64_t id)
{
	return manifest_find(m->runs, m->nruns, id);
}

/** Append o to (*v, *n); ids must stay unique across generations and runs. */
static int
manifest_add(struct manifest *m, struct manifest_obj **v, uint32_t *n, const struct manifest_obj *o,
	     const char *what)
{
	if (manifest_find_gen(m, o->id) >= 0 || manifest_find_run(m, o->id) >= 0)
		return diag_set(STRATA_EINVAL, "manifest v%llu: %s id %llu is already present",
				(unsigned long long)m->version, what, (unsigned long long)o->id);
	if (*n >= MANIFEST_MAX_OBJS)
		return diag_set(STRATA_EINVAL, "manifest v%llu: more than %u %ss",
				(unsigned long long)m->version, MANIFEST_MAX_OBJS, what);
	struct manifest_obj *nv = env.realloc(*v, ((size_t)*n + 1) * sizeof(*nv));
	if (nv == NULL)
		return diag_set(STRATA_ENOMEM, "manifest v%llu: no memory for a %s",
				(unsigned long long)m->version, what);
	nv[*n] = *o;
	*v = nv;
	(*n)++;
	return 0;
}

int
manifest_add_gen(struct manifest *m, const struct manifest_obj *o)
{
	return manifest_add(m, &m->gens, &m->ngens, o, "generation");
}

int
manifest_add_run(struct manifest *m, const struct manifest_obj *o)
{
	return manifest_add(m, &m->runs, &m->nruns, o, "run");
}

/** Remove exactly the listed ids from (v, *n), keeping order; all or nothing. */
static int
manifest_remove(const struct manifest *m, struct manifest_obj *v, uint32_t *n, const uint64_t *ids,
		uint32_t nids, const char *what)
{
	for (uint32_t i = 0; i < nids; i++) {
		if (manifest_find(v, *n, ids[i]) < 0)
			return diag_set(STRATA_ECONFLICT, "manifest v%llu: %s %llu is not present",
					(unsigned long long)m->version, what,
					(unsigned long long)ids[i]);
		for (uint32_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return diag_set(STRATA_EINVAL, "manifest v%llu: %s %llu listed twice",
						(unsigned long long)m->version, what,
						(unsigned long long)ids[i]);
	}
	uint32_t w = 0;
	for (uint32_t r = 0; r < *n; r++) {
		int drop = 0;
		for (uint32_t i = 0; i < nids && !drop; i++)
			drop = v[r].id == ids[i];
		if (!drop)
			v[w++] = v[r];
	}
	assert(w + nids == *n);
	*n = w;
	return 0;
}

int
manifest_remove_gens(struct manifest *m, const uint64_t *ids, uint32_t n)
{
	return manifest_remove(m, m->gens, &m->ngens, ids, n, "generation");
}

int
manifest_remove_runs(struct manifest *m, const uint64_t *ids, uint32_t n)
{
	/* A sorted run's parts go together: one left behind would lose the others' keys.
	 * The parts are consecutive: count those listed, a group at a time. */
	for (uint32_t i = 0; i < m->nruns;) {
		uint64_t g = m->runs[i].group;
		uint32_t end = i + manifest_run_parts(m->runs, m->nruns, i), listed = 0;
		for (uint32_t k = i; k < end; k++)
			for (uint32_t j = 0; j < n; j++)
				if (ids[j] == m->runs[k].id) {
					listed++;
					break;
				}
		if (listed != 0 && listed != end - i)
			return diag_set(STRATA_EINVAL, "manifest v%llu: %u of the %u parts of the sorted "
					"run %llu are removed, not all of them",
					(unsigned long long)m->version, listed, end - i,
					(unsigned long long)g);
		i = end;
	}
	return manifest_remove(m, m->runs, &m->nruns, ids, n, "run");
}

/* ---------------------------------------------------------------- edits */

/** Magic at the start of every encoded edit. */
#define MANIFEST_EDIT_MAGIC "STRMEDIT"
/** Highest format of edits this build reads (2: added objects with their groups; written
 *  only when an added run is grouped, else 1). */
#define MANIFEST_EDIT_FORMAT 2
/** Encoded edit without its lists: magic, format, version, prev_crc, 3 u64, 2 counts,
 *  4 list lengths, crc. */
#define MANIFEST_EDIT_FIXED (MANIFEST_MAGIC_LEN + 4 + 8 + 4 + 24 + 8 + 16 + 4)
/** Encoded size of one added object: position and object (format 1). */
#define MANIFEST_ADD_BYTES (4 + MANIFEST_OBJ_BYTES)

void
manifest_edit_destroy(struct manifest_edit *e)
{
	env.free(e->del_gens);
	env.free(e->del_runs);
	env.free(e->add_gens);
	env.free(e->add_runs);
	memset(e, 0, sizeof(*e));
}

/** One slot of the id table manifest_diff builds: an id of cur (or one added). */
struct manifest_slot {
	/** The id + 1 (0: empty). */
	uint64_t key;
	/** Index in cur's list (UINT32_MAX: not in cur). */
	uint32_t idx;
	/** MANIFEST_GEN or MANIFEST_RUN. */
	uint8_t kind;
	/** Already seen in next. */
	uint8_t seen;
};

/** The slot of id in a table of cap (a power of two) slots: its own or the empty one. */
static struct manifest_slot *
manifest_slot_find(struct manifest_slot *t, size_t cap, uint64_t id)
{
	size_t i = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
	while (t[i].key != 0 && t[i].key != id + 1)
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/** Append to a growable array of n elements of size sz. */
static int
manifest_push(void **v, uint32_t *n, size_t sz, const void *x)
{
	if ((*n & (*n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to the next power of two */
		size_t cap = *n ? (size_t)*n * 2 : 1;
		void *nv = env.realloc(*v, cap * sz);
		if (nv == NULL)
			return STRATA_ENOMEM;
		*v = nv;
	}
	memcpy((char *)*v + (size_t)*n * sz, x, sz);
	(*n)++;
	return 0;
}

/** Diff one list of next (kind) against the table of cur's ids. 1: a reorder. */
static int
manifest_diff_list(struct manifest_slot *t, size_t cap, const struct manifest *cur, int kind,
		   const struct manifest_obj *v, uint32_t n, uint64_t next_generation,
		   struct manifest_edit_add **adds, uint32_t *nadds)
{
	const struct manifest_obj *cv = kind == MANIFEST_GEN ? cur->gens : cur->runs;
	int64_t last = -1;
	for (uint32_t j = 0; j < n; j++) {
		struct manifest_slot *sl = manifest_slot_find(t, cap, v[j].id);
		if (sl->key != 0 && sl->seen)
			return diag_set(STRATA_EINVAL, "manifest v%llu: id %llu appears twice",
					(unsigned long long)cur->version + 1, (unsigned long long)v[j].id);
		if (sl->key != 0 && sl->kind == kind && sl->idx != UINT32_MAX &&
		    memcmp(&cv[sl->idx], &v[j], sizeof(v[j])) == 0) {
			sl->seen = 1;
			if ((int64_t)sl->idx < last)
				return 1;
			last = sl->idx;
			continue;
		}
		if (v[j].id >= next_generation && !(v[j].id & MANIFEST_EXTERNAL_ID))
			return diag_set(STRATA_EINVAL, "manifest v%llu: id %llu is not below next_generation",
					(unsigned long long)cur->version + 1, (unsigned long long)v[j].id);
		if (sl->key == 0) {
			sl->key = v[j].id + 1;
			sl->idx = UINT32_MAX;
			sl->kind = (uint8_t)kind;
		}
		sl->seen = 2; /* in next as a new object: cur's, if any, goes */
		struct manifest_edit_add a = {.pos = j, .obj = v[j]};
		if (manifest_push((void **)adds, nadds, sizeof(a), &a) != 0)
			return STRATA_ENOMEM;
	}
	return 0;
}

/** Most generations the fast path of manifest_diff takes as appended. */
#define MANIFEST_DIFF_FAST_ADDS 8

/*
 * The common change without a table: every object of cur kept in place and a few
 * generations appended (a seal), or none (a claim). 0 with the adds in e, 1 when the
 * change is another kind, or an error.
 */
static int
manifest_diff_appended(const struct manifest *cur, const struct manifest *next,
		       struct manifest_edit *e)
{
	if (next->ngens < cur->ngens || next->ngens - cur->ngens > MANIFEST_DIFF_FAST_ADDS ||
	    next->nruns != cur->nruns ||
	    (cur->ngens && memcmp(next->gens, cur->gens, cur->ngens * sizeof(*cur->gens)) != 0) ||
	    (cur->nruns && memcmp(next->runs, cur->runs, cur->nruns * sizeof(*cur->runs)) != 0))
		return 1;
	for (uint32_t j = cur->ngens; j < next->ngens; j++) {
		uint64_t id = next->gens[j].id;
		int dup = manifest_find_run(cur, id) >= 0 || manifest_find(next->gens, j, id) >= 0;
		if (dup || (id >= next->next_generation && !(id & MANIFEST_EXTERNAL_ID)))
			return diag_set(STRATA_EINVAL, "manifest v%llu: id %llu %s",
					(unsigned long long)next->version, (unsigned long long)id,
					dup ? "appears twice" : "is not below next_generation");
		struct manifest_edit_add a = {.pos = j, .obj = next->gens[j]};
		if (manifest_push((void **)&e->add_gens, &e->nadd_gens, sizeof(a), &a) != 0)
			return diag_set(STRATA_ENOMEM, "manifest v%llu: no memory for an edit",
					(unsigned long long)next->version);
	}
	return 0;
}

int
manifest_diff(const struct manifest *cur, const struct manifest *next, struct manifest_edit *e)
{
	memset(e, 0, sizeof(*e));
	e->version = next->version;
	e->prev_crc = cur->tip_crc;
	e->writer_epoch = next->writer_epoch;
	e->replay_after = next->replay_after;
	e->next_generation = next->next_generation;
	e->ngens = next->ngens;
	e->nruns = next->nruns;
	if (next->ngens > MANIFEST_MAX_OBJS || next->nruns > MANIFEST_MAX_OBJS)
		return diag_set(STRATA_EINVAL, "manifest v%llu: %u generations, %u runs; limit %u each",
				(unsigned long long)next->version, next->ngens, next->nruns,
				MANIFEST_MAX_OBJS);
	int rc = manifest_diff_appended(cur, next, e);
	if (rc <= 0) {
		if (rc < 0)
			manifest_edit_destroy(e);
		return rc;
	}
	size_t n = (size_t)cur->ngens + cur->nruns + next->ngens + next->nruns;
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	struct manifest_slot *t = env.calloc(cap, sizeof(*t));
	if (t == NULL)
		return diag_set(STRATA_ENOMEM, "manifest v%llu: no memory to diff %zu objects",
				(unsigned long long)next->version, n);
	for (int k = 0; k < 2; k++) {
		const struct manifest_obj *v = k ? cur->runs : cur->gens;
		uint32_t c = k ? cur->nruns : cur->ngens;
		for (uint32_t i = 0; i < c; i++) {
			struct manifest_slot *sl = manifest_slot_find(t, cap, v[i].id);
			sl->key = v[i].id + 1;
			sl->idx = i;
			sl->kind = (uint8_t)k;
		}
	}
	rc = manifest_diff_list(t, cap, cur, MANIFEST_GEN, next->gens, next->ngens,
				    next->next_generation, &e->add_gens, &e->nadd_gens);
	if (rc == 0)
		rc = manifest_diff_list(t, cap, cur, MANIFEST_RUN, next->runs, next->nruns,
					next->next_generation, &e->add_runs, &e->nadd_runs);
	for (int k = 0; rc == 0 && k < 2; k++) {
		const struct manifest_obj *v = k ? cur->runs : cur->gens;
		uint32_t c = k ? cur->nruns : cur->ngens;
		for (uint32_t i = 0; rc == 0 && i < c; i++) {
			struct manifest_slot *sl = manifest_slot_find(t, cap, v[i].id);
			if (sl->seen == 1 && sl->kind == k && sl->idx == i)
				continue;
			rc = k ? manifest_push((void **)&e->del_runs, &e->ndel_runs, 8, &v[i].id)
			       : manifest_push((void **)&e->del_gens, &e->ndel_gens, 8, &v[i].id);
			if (rc)
				rc = STRATA_ENOMEM;
		}
	}
	env.free(t);
	if (rc == STRATA_ENOMEM)
		diag_set(rc, "manifest v%llu: no memory for an edit", (unsigned long long)next->version);
	if (rc != 0)
		manifest_edit_destroy(e);
	return rc;
}

static int
manifest_put_adds(struct buf *out, const struct manifest_edit_add *a, uint32_t n, int grouped)
{
	int rc = buf_put_u32(out, n);
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		rc = buf_put_u32(out, a[i].pos);
		rc = rc ? rc : manifest_put_obj(out, &a[i].obj, grouped);
	}
	return rc;
}

static int
manifest_put_ids(struct buf *out, const uint64_t *ids, uint32_t n)
{
	int rc = buf_put_u32(out, n);
	for (uint32_t i = 0; rc == 0 && i < n; i++)
		rc = buf_put_u64(out, ids[i]);
	return rc;
}

int
manifest_edit_encode(const struct manifest_edit *e, struct buf *out)
{
	size_t start = out->len;
	int grouped = 0;
	for (uint32_t i = 0; i < e->nadd_runs; i++)
		grouped |= e->add_runs[i].obj.group != 0;
	for (uint32_t i = 0; i < e->nadd_gens; i++)
		if (e->add_gens[i].obj.group != 0)
			return diag_set(STRATA_EINVAL, "manifest edit v%llu: generation %llu is grouped",
					(unsigned long long)e->version,
					(unsigned long long)e->add_gens[i].obj.id);
	int rc = buf_append(out, MANIFEST_EDIT_MAGIC, MANIFEST_MAGIC_LEN);
	rc = rc ? rc : buf_put_u32(out, grouped ? 2 : 1);
	rc = rc ? rc : buf_put_u64(out, e->version);
	rc = rc ? rc : buf_put_u32(out, e->prev_crc);
	rc = rc ? rc : buf_put_u64(out, e->writer_epoch);
	rc = rc ? rc : buf_put_u64(out, e->replay_after);
	rc = rc ? rc : buf_put_u64(out, e->next_generation);
	rc = rc ? rc : buf_put_u32(out, e->ngens);
	rc = rc ? rc : buf_put_u32(out, e->nruns);
	rc = rc ? rc : manifest_put_ids(out, e->del_gens, e->ndel_gens);
	rc = rc ? rc : manifest_put_ids(out, e->del_runs, e->ndel_runs);
	rc = rc ? rc : manifest_put_adds(out, e->add_gens, e->nadd_gens, grouped);
	rc = rc ? rc : manifest_put_adds(out, e->add_runs, e->nadd_runs, grouped);
	rc = rc ? rc : buf_put_u32(out, crc32c(0, out->data + start, out->len - start));
	if (rc) {
		out->len = start;
		return diag_set(rc, "manifest edit v%llu: no memory to encode",
				(unsigned long long)e->version);
	}
	return 0;
}

/** Read a list of ids (length first) that must fit in what is left. */
static int
manifest_rd_ids(struct rd *r, uint64_t **ids, uint32_t *n)
{
	*n = rd_u32(r);
	if (r->err || *n > MANIFEST_MAX_OBJS || (uint64_t)*n * 8 > rd_left(r))
		return 1;
	if (*n == 0)
		return 0;
	*ids = env.malloc((size_t)*n * 8);
	if (*ids == NULL)
		return STRATA_ENOMEM;
	for (uint32_t i = 0; i < *n; i++)
		(*ids)[i] = rd_u64(r);
	return 0;
}

/** Read a list of added objects (with their groups when grouped) whose positions must
 *  ascend below count. */
static int
manifest_rd_adds(struct rd *r, uint32_t count, int grouped, struct manifest_edit_add **adds,
		 uint32_t *n)
{
	*n = rd_u32(r);
	if (r->err || *n > count ||
	    (uint64_t)*n * (MANIFEST_ADD_BYTES + (grouped ? 8 : 0)) > rd_left(r))
		return 1;
	if (*n == 0)
		return 0;
	*adds = env.malloc((size_t)*n * sizeof(**adds));
	if (*adds == NULL)
		return STRATA_ENOMEM;
	for (uint32_t i = 0; i < *n; i++) {
		struct manifest_edit_add *a = &(*adds)[i];
		a->pos = rd_u32(r);
		a->obj.id = rd_u64(r);
		a->obj.epoch = rd_u64(r);
		a->obj.bytes = rd_u64(r);
		a->obj.rows = rd_u64(r);
		a->obj.min_seq = rd_u64(r);
		a->obj.max_seq = rd_u64(r);
		a->obj.group = grouped ? rd_u64(r) : 0;
		if (a->pos >= count || (i > 0 && a->pos <= (*adds)[i - 1].pos))
			return 1;
	}
	return 0;
}

int
manifest_edit_decode(const void *p, size_t n, const char *name, struct manifest_edit *out)
{
	memset(out, 0, sizeof(*out));
	const uint8_t *b = p;
	if (n < MANIFEST_EDIT_FIXED)
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: %zu bytes, shorter than the %d-byte "
				"minimum", name, n, MANIFEST_EDIT_FIXED);
	if (memcmp(b, MANIFEST_EDIT_MAGIC, MANIFEST_MAGIC_LEN) != 0)
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: bad magic", name);
	uint32_t want = dec_u32(b + n - 4);
	uint32_t got = crc32c(0, b, n - 4);
	if (want != got)
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: crc32c mismatch (stored %08x, "
				"computed %08x)", name, want, got);
	struct rd r;
	rd_init(&r, b + MANIFEST_MAGIC_LEN, n - MANIFEST_MAGIC_LEN - 4);
	uint32_t format = rd_u32(&r);
	if (format > MANIFEST_EDIT_FORMAT)
		return diag_set(STRATA_EVERSION, "manifest edit %s: format %u, this build reads up to %d",
				name, format, MANIFEST_EDIT_FORMAT);
	if (format == 0)
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: format 0", name);
	struct manifest_edit e = {0};
	e.version = rd_u64(&r);
	e.prev_crc = rd_u32(&r);
	e.writer_epoch = rd_u64(&r);
	e.replay_after = rd_u64(&r);
	e.next_generation = rd_u64(&r);
	e.ngens = rd_u32(&r);
	e.nruns = rd_u32(&r);
	int rc = 0;
	const char *what = NULL;
	if (e.ngens > MANIFEST_MAX_OBJS || e.nruns > MANIFEST_MAX_OBJS)
		what = "more objects than the limit";
	if (what == NULL && (rc = manifest_rd_ids(&r, &e.del_gens, &e.ndel_gens)) > 0)
		what = "generations removed do not fit";
	if (what == NULL && rc == 0 && (rc = manifest_rd_ids(&r, &e.del_runs, &e.ndel_runs)) > 0)
		what = "runs removed do not fit";
	if (what == NULL && rc == 0 &&
	    (rc = manifest_rd_adds(&r, e.ngens, format >= 2, &e.add_gens, &e.nadd_gens)) > 0)
		what = "generations added do not fit or are out of order";
	if (what == NULL && rc == 0 &&
	    (rc = manifest_rd_adds(&r, e.nruns, format >= 2, &e.add_runs, &e.nadd_runs)) > 0)
		what = "runs added do not fit or are out of order";
	if (what == NULL && rc == 0 && (r.err || rd_left(&r) != 0))
		what = "length mismatch";
	if (what == NULL && rc == 0 && e.version == 0)
		what = "position 0";
	for (uint32_t k = 0; what == NULL && rc == 0 && k < 2; k++) {
		const struct manifest_edit_add *a = k ? e.add_runs : e.add_gens;
		uint32_t na = k ? e.nadd_runs : e.nadd_gens;
		for (uint32_t i = 0; i < na && what == NULL; i++)
			if (a[i].obj.id >= e.next_generation && !(a[i].obj.id & MANIFEST_EXTERNAL_ID))
				what = "an added id is not below next_generation";
			else if (k == 0 && a[i].obj.group != 0)
				what = "an added generation is grouped";
	}
	if (rc < 0) {
		manifest_edit_destroy(&e);
		return diag_set(rc, "manifest edit %s: no memory to decode", name);
	}
	if (what != NULL) {
		manifest_edit_destroy(&e);
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: %s", name, what);
	}
	*out = e;
	return 0;
}

/** One list's removals and additions applied to v[0..n): a new array of count in *out
 *  (v unchanged). An edit that only appends at the end (a seal) grows v in place
 *  instead when grow is not NULL: *grow is then set, *out is v moved by realloc, and v
 *  must not be used. 0, 1 when the edit does not fit the list, or STRATA_ENOMEM (v
 *  unchanged). */
static int
manifest_apply_list(struct manifest_obj *v, uint32_t n, const uint64_t *del, uint32_t ndel,
		    const struct manifest_edit_add *add, uint32_t nadd, uint32_t count, int *grow,
		    struct manifest_obj **out)
{
	*out = NULL;
	if (grow != NULL)
		*grow = 0;
	if ((uint64_t)n < ndel || (uint64_t)n - ndel + nadd != count)
		return 1;
	int append = grow != NULL && ndel == 0 && nadd > 0;
	for (uint32_t i = 0; append && i < nadd; i++)
		append = add[i].pos == n + i;
	if (append) {
		/* No copy of the whole list per seal: realloc moves a large block by its pages. */
		struct manifest_obj *nv = env.realloc(v, (size_t)count * sizeof(*nv));
		if (nv == NULL)
			return STRATA_ENOMEM;
		for (uint32_t i = 0; i < nadd; i++)
			nv[n + i] = add[i].obj;
		*out = nv;
		*grow = 1;
		return 0;
	}
	struct manifest_obj *nv = count ? env.malloc((size_t)count * sizeof(*nv)) : NULL;
	if (count && nv == NULL)
		return STRATA_ENOMEM;
	uint32_t found = 0, w = 0, ai = 0;
	for (uint32_t r = 0; r < n; r++) {
		int drop = 0;
		for (uint32_t i = 0; i < ndel && !drop; i++)
			drop = v[r].id == del[i];
		if (drop) {
			found++;
			continue;
		}
		while (ai < nadd && add[ai].pos == w)
			nv[w++] = add[ai++].obj;
		nv[w++] = v[r];
	}
	while (ai < nadd && add[ai].pos == w)
		nv[w++] = add[ai++].obj;
	if (found != ndel || w != count || ai != nadd) {
		env.free(nv);
		return 1;
	}
	*out = nv;
	return 0;
}

int
manifest_edit_apply(struct manifest *m, const struct manifest_edit *e, const char *name)
{
	if (e->version != m->version + 1)
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: position %llu follows %llu", name,
				(unsigned long long)e->version, (unsigned long long)m->version);
	/* The runs first, into a new array, so that m is unchanged if anything fails; then
	 * the generations, which a seal only appends to (in place, the last step). */
	struct manifest_obj *runs = NULL, *gens = NULL;
	int grown = 0;
	int rc = manifest_apply_list(m->runs, m->nruns, e->del_runs, e->ndel_runs, e->add_runs,
				     e->nadd_runs, e->nruns, NULL, &runs);
	/* The runs it makes must keep every group whole and starting at its first part. */
	uint64_t bad = 0;
	if (rc == 0 && manifest_check_run_groups(runs, e->nruns, &bad)) {
		env.free(runs);
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: leaves run %llu in a group that "
				"does not start at its first part", name, (unsigned long long)bad);
	}
	if (rc == 0)
		rc = manifest_apply_list(m->gens, m->ngens, e->del_gens, e->ndel_gens, e->add_gens,
					 e->nadd_gens, e->ngens, &grown, &gens);
	if (rc != 0) {
		env.free(runs);
		if (rc < 0)
			return diag_set(rc, "manifest edit %s: no memory to apply", name);
		return diag_set(STRATA_ECORRUPT, "manifest edit %s: does not apply to version %llu "
				"(an object it removes is missing, or the counts disagree)", name,
				(unsigned long long)m->version);
	}
	if (!grown)
		env.free(m->gens); /* a grown array is the old one, moved by realloc */
	m->gens = gens;
	m->ngens = e->ngens;
	env.free(m->runs);
	m->runs = runs;
	m->nruns = e->nruns;
	m->version = e->version;
	m->writer_epoch = e->writer_epoch;
	m->replay_after = e->replay_after;
	m->next_generation = e->next_generation;
	return 0;
}

/* ---------------------------------------------------------------- the log */

/** Positions found by one listing of "<prefix>manifest/". */
struct manifest_scan {
	/** Length of "<prefix>manifest/". */
	size_t dir_len;
	/** Log positions, ascending (the listing is in byte order). */
	uint64_t *vs;
	/** Number of vs. */
	uint32_t nvs;
	/** Snapshot positions, ascending. */
	uint64_t *snaps;
	/** Number of snaps. */
	uint32_t nsnaps;
	/** Set when memory ran out. */
	int nomem;
};

/** Parse exactly MANIFEST_VERSION_DIGITS decimal digits; -1 if s is anything else. */
static int
manifest_parse_version(const char *s, uint64_t *v)
{
	if (strlen(s) != MANIFEST_VERSION_DIGITS)
		return -1;
	uint64_t x = 0;
	for (int i = 0; i < MANIFEST_VERSION_DIGITS; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

/** A load's result when an object it listed vanished (collected meanwhile): start again. */
#define MANIFEST_VANISHED 1000

/** Sub-directory of the snapshots under "<prefix>manifest/". */
#define MANIFEST_SNAP_DIR "snap/"

static int
manifest_scan_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	struct manifest_scan *s = ctx;
	uint64_t v;
	if (strlen(key) < s->dir_len)
		return 0;
	const char *rel = key + s->dir_len;
	int rc = 0;
	if (manifest_parse_version(rel, &v) == 0)
		rc = manifest_push((void **)&s->vs, &s->nvs, sizeof(v), &v);
	else if (strncmp(rel, MANIFEST_SNAP_DIR, strlen(MANIFEST_SNAP_DIR)) == 0 &&
		 manifest_parse_version(rel + strlen(MANIFEST_SNAP_DIR), &v) == 0)
		rc = manifest_push((void **)&s->snaps, &s->nsnaps, sizeof(v), &v);
	if (rc) {
		s->nomem = 1;
		return diag_set(STRATA_ENOMEM, "manifest: no memory to list %u positions", s->nvs);
	}
	return 0;
}

static void
manifest_scan_destroy(struct manifest_scan *s)
{
	env.free(s->vs);
	env.free(s->snaps);
	memset(s, 0, sizeof(*s));
}

/** "<prefix>manifest/" into dst. */
static int
manifest_dir_key(char *dst, size_t n, const char *prefix)
{
	int len = snprintf(dst, n, "%smanifest/", prefix);
	if (len < 0 || (size_t)len + MANIFEST_VERSION_DIGITS + strlen(MANIFEST_SNAP_DIR) >= n)
		return diag_set(STRATA_EINVAL, "manifest prefix '%s' too long", prefix);
	return 0;
}

void
manifest_snapshot_key(char *dst, size_t n, const char *prefix, uint64_t version)
{
	snprintf(dst, n, "%smanifest/" MANIFEST_SNAP_DIR "%0*llu", prefix, MANIFEST_VERSION_DIGITS,
		 (unsigned long long)version);
}

int
manifest_parse_log_key(const char *rel, uint64_t *v, int *is_snap)
{
	if (strncmp(rel, "manifest/", 9) != 0)
		return -1;
	rel += 9;
	*is_snap = strncmp(rel, MANIFEST_SNAP_DIR, strlen(MANIFEST_SNAP_DIR)) == 0;
	return manifest_parse_version(rel + (*is_snap ? strlen(MANIFEST_SNAP_DIR) : 0), v);
}

/** List the log (what is under dir, or only its snapshots when snaps_only). */
static int
manifest_scan(struct objstore *os, const char *prefix, int snaps_only, struct manifest_scan *s)
{
	char dir[MANIFEST_KEY_MAX];
	memset(s, 0, sizeof(*s));
	int rc = manifest_dir_key(dir, sizeof(dir), prefix);
	if (rc)
		return rc;
	s->dir_len = strlen(dir);
	if (snaps_only)
		strcat(dir, MANIFEST_SNAP_DIR);
	rc = objstore_list(os, dir, manifest_scan_cb, s);
	if (rc)
		manifest_scan_destroy(s);
	return rc;
}

/** One entry read by a load before it is applied. */
struct manifest_entry {
	/** Position. */
	uint64_t version;
	/** Whole manifest (is_full) or edit. */
	int is_full;
	/** The whole manifest, when is_full. */
	struct manifest m;
	/** The edit, when not. */
	struct manifest_edit e;
	/** CRC32C of the entry (its last four bytes). */
	uint32_t crc;
	/** Encoded size. */
	size_t bytes;
};

/** Read and decode the entry at position v: 0, STRATA_NOTFOUND, or an error. */
static int
manifest_read_entry(struct objstore *os, const char *prefix, uint64_t v, struct manifest_entry *en)
{
	char key[MANIFEST_KEY_MAX], name[MANIFEST_KEY_MAX + 300];
	memset(en, 0, sizeof(*en));
	manifest_version_key(key, sizeof(key), prefix, v);
	snprintf(name, sizeof(name), "%s/%s", os->name, key);
	struct buf b = {0};
	int rc = objstore_get(os, key, &b);
	if (rc) {
		buf_destroy(&b);
		return rc;
	}
	en->version = v;
	en->bytes = b.len;
	if (b.len >= MANIFEST_MAGIC_LEN && memcmp(b.data, MANIFEST_EDIT_MAGIC, MANIFEST_MAGIC_LEN) == 0) {
		rc = manifest_edit_decode(b.data, b.len, name, &en->e);
		if (rc == 0 && en->e.version != v) {
			rc = diag_set(STRATA_ECORRUPT, "manifest %s: holds position %llu", name,
				      (unsigned long long)en->e.version);
			manifest_edit_destroy(&en->e);
		}
	} else {
		en->is_full = 1;
		rc = manifest_decode(b.data, b.len, name, &en->m);
		if (rc == 0 && en->m.version != v) {
			rc = diag_set(STRATA_ECORRUPT, "manifest %s: holds version %llu", name,
				      (unsigned long long)en->m.version);
			manifest_destroy(&en->m);
		}
	}
	if (rc == 0)
		en->crc = dec_u32(b.data + b.len - 4);
	buf_destroy(&b);
	return rc;
}

static void
manifest_entry_destroy(struct manifest_entry *en)
{
	if (en->is_full)
		manifest_destroy(&en->m);
	else
		manifest_edit_destroy(&en->e);
}

/** Read the snapshot at position v into *m (STRATA_NOTFOUND if it vanished). */
static int
manifest_read_snapshot(struct objstore *os, const char *prefix, uint64_t v, struct manifest *m,
		       size_t *bytes)
{
	char key[MANIFEST_KEY_MAX], name[MANIFEST_KEY_MAX + 300];
	manifest_snapshot_key(key, sizeof(key), prefix, v);
	snprintf(name, sizeof(name), "%s/%s", os->name, key);
	struct buf b = {0};
	int rc = objstore_get(os, key, &b);
	if (rc == 0)
		rc = manifest_decode(b.data, b.len, name, m);
	if (rc == 0 && m->version != v) {
		rc = diag_set(STRATA_ECORRUPT, "manifest snapshot %s: holds version %llu", name,
			      (unsigned long long)m->version);
		manifest_destroy(m);
	}
	if (bytes)
		*bytes = b.len;
	buf_destroy(&b);
	return rc;
}

/** One attempt at a load; MANIFEST_VANISHED when an object it listed vanished (collected). */
static int
manifest_walk_once(struct objstore *os, const char *prefix, manifest_walk_fn fn, void *ctx,
		   struct manifest *out)
{
	struct manifest_scan s;
	int rc = manifest_scan(os, prefix, 0, &s);
	if (rc)
		return rc;
	if (s.nvs == 0 && s.nsnaps == 0) {
		manifest_scan_destroy(&s);
		return STRATA_NOTFOUND;
	}
	uint64_t snap = s.nsnaps ? s.snaps[s.nsnaps - 1] : 0;
	uint64_t max = s.nvs ? s.vs[s.nvs - 1] : 0;
	/* Entries after the snapshot, newest first, down to a whole manifest. */
	uint32_t lo = s.nvs;
	while (lo > 0 && s.vs[lo - 1] > snap)
		lo--;
	uint32_t nen = s.nvs - lo;
	struct manifest_entry *en = nen ? env.calloc(nen, sizeof(*en)) : NULL;
	if (nen && en == NULL) {
		manifest_scan_destroy(&s);
		return diag_set(STRATA_ENOMEM, "manifest %s%smanifest/: no memory for %u entries",
				os->name, prefix, nen);
	}
	uint32_t first = nen; /* index of the oldest entry read */
	for (uint32_t i = nen; rc == 0 && i-- > 0;) {
		uint64_t v = s.vs[lo + i];
		if (i + 1 < nen && s.vs[lo + i + 1] != v + 1) {
			rc = diag_set(STRATA_ECORRUPT, "manifest %s%smanifest/: position %llu is missing "
				      "(the log goes from %llu to %llu)", os->name, prefix,
				      (unsigned long long)v + 1, (unsigned long long)v,
				      (unsigned long long)s.vs[lo + i + 1]);
			break;
		}
		rc = manifest_read_entry(os, prefix, v, &en[i]);
		if (rc == STRATA_NOTFOUND)
			rc = MANIFEST_VANISHED;
		if (rc)
			break;
		first = i;
		if (en[i].is_full)
			break;
	}
	struct manifest m = {0};
	size_t bytes = 0;
	if (rc == 0 && (first == nen || !en[first].is_full)) {
		/* The base is the snapshot (or, with none, nothing: the log must start at 1). */
		uint64_t base = first < nen ? en[first].version - 1 : max;
		if (snap > 0 && base != snap)
			rc = diag_set(STRATA_ECORRUPT, "manifest %s%smanifest/: the entries after snapshot "
				      "%llu start at %llu", os->name, prefix, (unsigned long long)snap,
				      (unsigned long long)base + 1);
		else if (snap > 0) {
			rc = manifest_read_snapshot(os, prefix, snap, &m, &bytes);
			if (rc == STRATA_NOTFOUND)
				rc = MANIFEST_VANISHED;
			m.snap_version = snap;
			if (rc == 0 && fn)
				rc = fn(ctx, snap, 1, NULL, &m, bytes);
		} else if (base != 0) {
			rc = diag_set(STRATA_ECORRUPT, "manifest %s%smanifest/: no snapshot and the log "
				      "starts at %llu with an edit", os->name, prefix,
				      (unsigned long long)base + 1);
		} else {
			m.next_generation = 0;
		}
	} else if (rc == 0) {
		m = en[first].m;
		memset(&en[first].m, 0, sizeof(en[first].m));
		m.snap_version = snap;
		m.snap_edits = 0;
		if (fn)
			rc = fn(ctx, m.version, 0, NULL, &m, en[first].bytes);
		first++;
	}
	char name[MANIFEST_KEY_MAX + 300];
	for (uint32_t i = first; rc == 0 && i < nen; i++) {
		char key[MANIFEST_KEY_MAX];
		manifest_version_key(key, sizeof(key), prefix, en[i].version);
		snprintf(name, sizeof(name), "%s/%s", os->name, key);
		if (en[i].e.prev_crc != m.tip_crc && m.version > 0) {
			rc = diag_set(STRATA_ECORRUPT, "manifest edit %s: follows an entry with crc %08x, "
				      "the log has %08x there", name, en[i].e.prev_crc, m.tip_crc);
			break;
		}
		rc = manifest_edit_apply(&m, &en[i].e, name);
		if (rc)
			break;
		m.tip_crc = en[i].crc;
		manifest_note_entry(&m, m.version, en[i].crc);
		m.snap_edits++;
		m.snap_bytes += en[i].bytes;
		if (fn)
			rc = fn(ctx, m.version, 0, &en[i].e, &m, en[i].bytes);
	}
	if (rc == 0 && first < nen) {
		uint64_t bad;
		int dup;
		int crc = manifest_check_ids(&m, &bad, &dup);
		if (crc < 0)
			rc = diag_set(crc, "manifest %s: no memory to check ids", name);
		else if (crc > 0)
			rc = diag_set(STRATA_ECORRUPT, "manifest %s: id %llu %s", name,
				      (unsigned long long)bad,
				      dup ? "appears twice" : "is not below next_generation");
	}
	for (uint32_t i = 0; i < nen; i++)
		manifest_entry_destroy(&en[i]);
	env.free(en);
	manifest_scan_destroy(&s);
	if (rc) {
		manifest_destroy(&m);
		return rc;
	}
	*out = m;
	return 0;
}

int
manifest_walk(struct objstore *os, const char *prefix, manifest_walk_fn fn, void *ctx,
	      struct manifest *out)
{
	memset(out, 0, sizeof(*out));
	for (int attempt = 0; attempt < MANIFEST_LOAD_RETRIES; attempt++) {
		int rc = manifest_walk_once(os, prefix, fn, ctx, out);
		if (rc != MANIFEST_VANISHED)
			return rc;
	}
	return diag_set(STRATA_EIO, "manifest %s%smanifest/: entries vanished %d times while loading",
			os->name, prefix, MANIFEST_LOAD_RETRIES);
}

int
manifest_load(struct objstore *os, const char *prefix, struct manifest *out)
{
	return manifest_walk(os, prefix, NULL, NULL, out);
}

/** Read-backs of manifest puts that reported a failure: stored intact, and not. */
static _Atomic uint64_t manifest_readback_landed, manifest_readback_lost;

void
manifest_readbacks(uint64_t *landed, uint64_t *lost)
{
	*landed = atomic_load(&manifest_readback_landed);
	*lost = atomic_load(&manifest_readback_lost);
}

/** Put-if-absent b at key; a failure after which the object is stored intact is success. */
static int
manifest_put_bytes(struct objstore *os, const char *key, const struct buf *b, const char *what)
{
	int rc = objstore_put_if_absent(os, key, b->data, b->len);
	if (rc != 0 && rc != STRATA_EEXIST) {
		/* A failure after the object became visible (a failed cleanup or directory
		 * sync) must not be mistaken for "not written": the caller would then delete
		 * what the manifest now references. Read back to tell the two apart. */
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		struct buf back = {0};
		int grc = objstore_get(os, key, &back);
		if (grc == 0 && back.len == b->len && memcmp(back.data, b->data, b->len) == 0) {
			diag_log(LOG_LVL_WARN, "manifest %s: the put reported \"%s\" but the %s is "
				 "stored intact; taking it as written", key, why, what);
			rc = 0;
			atomic_fetch_add(&manifest_readback_landed, 1);
		} else {
			atomic_fetch_add(&manifest_readback_lost, 1);
			diag_set(rc, "%s", why);
		}
		buf_destroy(&back);
	}
	return rc;
}

/*
 * After creating position v (crc its CRC): was it free because it was never written,
 * or because a collection deleted it after a snapshot covered it? Collection deletes
 * only positions at or below the newest snapshot, so with none at or above v the
 * position was new. Otherwise the history tells: the snapshot at v records its entry's
 * CRC, and the entry at v+1 names its predecessor's. 0: ours is in the log;
 * STRATA_EFENCED: another entry held v; STRATA_EIO: it cannot be told (may be written).
 */
static int
manifest_check_created(struct objstore *os, const char *prefix, uint64_t v, uint32_t crc)
{
	struct manifest_scan s;
	int rc = manifest_scan(os, prefix, 1, &s);
	if (rc)
		return rc;
	uint64_t snap = s.nsnaps ? s.snaps[s.nsnaps - 1] : 0;
	manifest_scan_destroy(&s);
	if (snap < v)
		return 0;
	uint32_t theirs = 0;
	int known = 0;
	struct manifest m;
	rc = manifest_read_snapshot(os, prefix, snap, &m, NULL);
	if (rc == 0) {
		known = manifest_recent_crc(&m, v, &theirs);
		manifest_destroy(&m);
	}
	if (!known) {
		struct manifest_entry en;
		rc = manifest_read_entry(os, prefix, v + 1, &en);
		if (rc == 0) {
			known = !en.is_full;
			theirs = en.e.prev_crc;
			manifest_entry_destroy(&en);
		}
	}
	if (known && theirs == crc)
		return 0;
	if (known)
		return diag_set(STRATA_EFENCED, "shard prefix '%s': fenced: manifest position %llu was "
				"collected under snapshot %llu and re-created by this writer, which "
				"stalled past the collection; its update is not in the log",
				prefix, (unsigned long long)v, (unsigned long long)snap);
	return diag_set(STRATA_EIO, "shard prefix '%s': manifest position %llu is at or below "
			"snapshot %llu and its successor is gone: cannot tell whether this update "
			"is in the log (reload)", prefix, (unsigned long long)v,
			(unsigned long long)snap);
}

/** Put the snapshot of m (at m->version) when o says it is due; failures only log. */
static void
manifest_maybe_snapshot(struct objstore *os, const char *prefix, const struct manifest_opts *o,
			struct manifest *m)
{
	uint32_t edits = o && o->snapshot_edits ? o->snapshot_edits : MANIFEST_SNAPSHOT_EDITS;
	uint64_t bytes = o && o->snapshot_bytes ? o->snapshot_bytes : MANIFEST_SNAPSHOT_BYTES;
	if (m->snap_edits < edits && m->snap_bytes < bytes)
		return;
	char key[MANIFEST_KEY_MAX];
	manifest_snapshot_key(key, sizeof(key), prefix, m->version);
	struct buf b = {0};
	int rc = manifest_encode_snapshot(m, &b);
	if (rc == 0)
		rc = manifest_put_bytes(os, key, &b, "snapshot");
	buf_destroy(&b);
	if (rc != 0 && rc != STRATA_EEXIST) {
		diag_log(LOG_LVL_WARN, "manifest %s: snapshot not written (%s); the log stays longer "
			 "and the next update tries again", key, diag_last());
		return;
	}
	m->snap_version = m->version;
	m->snap_edits = 0;
	m->snap_bytes = 0;
	if (env_point(ENV_POINT_MANIFEST_SNAPSHOT_WRITTEN, m) != 0)
		return;
	rc = manifest_gc(os, prefix, m, o ? o->keep : 0);
	if (rc)
		diag_log(LOG_LVL_WARN, "manifest %s: collecting the log behind the snapshot: %s", key,
			 diag_last());
}

/*
 * Append next (cur->version + 1) to the log after cur: an edit, or the whole manifest
 * when the change is not one. 0 with next's log fields set, STRATA_EEXIST when the
 * position is taken, or another error (then maybe written unless EFENCED/EINVAL/EINJECTED).
 */
static int
manifest_append(struct objstore *os, const char *prefix, const struct manifest_opts *o,
		const struct manifest *cur, struct manifest *next)
{
	struct manifest_edit e;
	struct buf b = {0};
	int rc = manifest_diff(cur, next, &e);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		rc = manifest_edit_encode(&e, &b);
		manifest_edit_destroy(&e);
	} else {
		rc = manifest_encode(next, &b);
	}
	if (rc == 0 && env_point(ENV_POINT_MANIFEST_BEFORE_APPEND, next) != 0)
		rc = diag_set(STRATA_EINJECTED, "manifest %s: injected failure at manifest.before_append",
			      prefix);
	char key[MANIFEST_KEY_MAX];
	manifest_version_key(key, sizeof(key), prefix, next->version);
	if (rc == 0)
		rc = manifest_put_bytes(os, key, &b, "entry");
	uint32_t crc = rc == 0 ? dec_u32(b.data + b.len - 4) : 0;
	size_t len = b.len;
	buf_destroy(&b);
	if (rc)
		return rc;
	rc = manifest_check_created(os, prefix, next->version, crc);
	if (rc)
		return rc;
	next->tip_crc = crc;
	manifest_note_entry(next, next->version, crc);
	next->snap_version = cur->snap_version;
	next->snap_edits = cur->snap_edits + 1;
	next->snap_bytes = cur->snap_bytes + len;
	if (env_point(ENV_POINT_MANIFEST_APPENDED, next) != 0)
		return 0; /* the crash tests stop here: appended, no snapshot */
	manifest_maybe_snapshot(os, prefix, o, next);
	return 0;
}

int
manifest_claim_at(struct objstore *os, const char *prefix, const struct manifest_opts *o,
		  struct manifest *m)
{
	struct manifest next = *m;
	next.version = m->version + 1;
	next.writer_epoch = m->writer_epoch + 1;
	int rc = manifest_append(os, prefix, o, m, &next);
	if (rc == 0)
		*m = next; /* same arrays, new version and epoch */
	return rc;
}

int
manifest_claim_epoch(struct objstore *os, const char *prefix, const struct manifest_opts *o,
		     struct manifest *m)
{
	char dir[MANIFEST_KEY_MAX];
	int rc = manifest_dir_key(dir, sizeof(dir), prefix);
	if (rc)
		return rc;
	for (int attempt = 0; attempt < MANIFEST_MAX_RETRIES; attempt++) {
		struct manifest cur;
		rc = manifest_load(os, prefix, &cur);
		if (rc == STRATA_NOTFOUND) {
			memset(&cur, 0, sizeof(cur));
			cur.next_generation = 1;
		} else if (rc) {
			return rc;
		}
		rc = manifest_claim_at(os, prefix, o, &cur);
		if (rc == 0) {
			*m = cur;
			return 0;
		}
		manifest_destroy(&cur);
		if (rc != STRATA_EEXIST)
			return rc;
	}
	return diag_set(STRATA_ECONFLICT, "shard prefix '%s': claim_epoch lost %d races in a row", prefix,
			MANIFEST_MAX_RETRIES);
}

int
manifest_commit_update(struct objstore *os, const char *prefix, const struct manifest_opts *o,
		       uint64_t local_epoch, struct manifest *cur, manifest_mutate_fn mutate,
		       void *ctx)
{
	for (int attempt = 0; attempt < MANIFEST_MAX_RETRIES; attempt++) {
		if (cur->writer_epoch > local_epoch)
			return diag_set(STRATA_EFENCED,
					"shard prefix '%s': fenced: manifest v%llu has writer epoch %llu, ours is %llu",
					prefix, (unsigned long long)cur->version,
					(unsigned long long)cur->writer_epoch,
					(unsigned long long)local_epoch);
		struct manifest next;
		int rc = manifest_copy(&next, cur);
		if (rc)
			return rc;
		next.version = cur->version + 1;
		rc = mutate(ctx, &next);
		if (rc) {
			manifest_destroy(&next);
			return rc;
		}
		if (next.version != cur->version + 1 || next.writer_epoch != cur->writer_epoch) {
			manifest_destroy(&next);
			return diag_set(STRATA_EINVAL,
					"shard prefix '%s': a manifest mutation changed the version or writer epoch",
					prefix);
		}
		rc = manifest_append(os, prefix, o, cur, &next);
		if (rc == 0) {
			manifest_destroy(cur);
			*cur = next;
			return 0;
		}
		manifest_destroy(&next);
		if (rc != STRATA_EEXIST)
			return rc;
		struct manifest latest;
		rc = manifest_load(os, prefix, &latest);
		if (rc)
			return rc;
		manifest_destroy(cur);
		*cur = latest;
	}
	return diag_set(STRATA_ECONFLICT, "shard prefix '%s': manifest update lost %d races in a row", prefix,
			MANIFEST_MAX_RETRIES);
}

int
manifest_gc_floor(struct objstore *os, const char *prefix, uint64_t current, uint32_t keep,
		  uint64_t *floor, uint64_t *snap)
{
	struct manifest_scan s;
	int rc = manifest_scan(os, prefix, 1, &s);
	if (rc)
		return rc;
	*snap = s.nsnaps ? s.snaps[s.nsnaps - 1] : 0;
	manifest_scan_destroy(&s);
	uint64_t behind = current > keep ? current - keep : 0;
	*floor = *snap < behind ? *snap : behind;
	return 0;
}

int
manifest_gc(struct objstore *os, const char *prefix, const struct manifest *cur, uint32_t keep)
{
	struct manifest_scan s;
	int rc = manifest_scan(os, prefix, 0, &s);
	if (rc)
		return rc;
	uint64_t snap = s.nsnaps ? s.snaps[s.nsnaps - 1] : 0;
	if (snap == 0 && cur->version > 0) {
		/* A log with no snapshot (new, or written by a build before the log): put
		 * one of the state we hold, so that what is behind it can go. */
		char key[MANIFEST_KEY_MAX];
		manifest_snapshot_key(key, sizeof(key), prefix, cur->version);
		struct buf b = {0};
		rc = manifest_encode_snapshot(cur, &b);
		if (rc == 0)
			rc = manifest_put_bytes(os, key, &b, "snapshot");
		buf_destroy(&b);
		if (rc == STRATA_EEXIST)
			rc = 0;
		if (rc) {
			manifest_scan_destroy(&s);
			return rc;
		}
		snap = cur->version;
	}
	uint64_t behind = cur->version > keep ? cur->version - keep : 0;
	uint64_t floor = snap < behind ? snap : behind;
	char key[MANIFEST_KEY_MAX];
	for (uint32_t i = 0; rc == 0 && i < s.nvs && s.vs[i] < floor; i++) {
		manifest_version_key(key, sizeof(key), prefix, s.vs[i]);
		rc = objstore_del(os, key);
	}
	for (uint32_t i = 0; rc == 0 && i < s.nsnaps && s.snaps[i] < floor; i++) {
		manifest_snapshot_key(key, sizeof(key), prefix, s.snaps[i]);
		rc = objstore_del(os, key);
	}
	manifest_scan_destroy(&s);
	return rc;
}
