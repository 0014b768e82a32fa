/*
 * manifest.c — the per-shard manifest: binary codec, in-memory edits, and the
 * versioned compare-and-swap protocol over an object store (put-if-absent of
 * "<prefix>manifest/<version %020llu>").
 *
 * Encoding (little-endian): "STRMANIF", u32 format, u64 version, u64 writer_epoch,
 * u64 replay_after, u64 next_generation, u32 ngens, ngens x obj, u32 nruns,
 * nruns x obj, u32 crc32c of all preceding bytes. obj = six u64: id, epoch, bytes,
 * rows, min_seq, max_seq.
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
/** Format version written by this build; newer ones are refused with STRATA_EVERSION. */
#define MANIFEST_FORMAT 1
/** Encoded size of one manifest_obj. */
#define MANIFEST_OBJ_BYTES 48
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

static int
manifest_put_obj(struct buf *out, const struct manifest_obj *o)
{
	uint8_t t[MANIFEST_OBJ_BYTES];
	enc_u64(t, o->id);
	enc_u64(t + 8, o->epoch);
	enc_u64(t + 16, o->bytes);
	enc_u64(t + 24, o->rows);
	enc_u64(t + 32, o->min_seq);
	enc_u64(t + 40, o->max_seq);
	return buf_append(out, t, sizeof(t));
}

int
manifest_encode(const struct manifest *m, struct buf *out)
{
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
	size_t total = MANIFEST_FIXED_BYTES + ((size_t)m->ngens + m->nruns) * MANIFEST_OBJ_BYTES;
	if (buf_reserve(out, total) != 0)
		return diag_set(STRATA_ENOMEM, "manifest v%llu: no memory for %zu bytes",
				(unsigned long long)m->version, total);
	rc = buf_append(out, MANIFEST_MAGIC, MANIFEST_MAGIC_LEN);
	rc = rc ? rc : buf_put_u32(out, MANIFEST_FORMAT);
	rc = rc ? rc : buf_put_u64(out, m->version);
	rc = rc ? rc : buf_put_u64(out, m->writer_epoch);
	rc = rc ? rc : buf_put_u64(out, m->replay_after);
	rc = rc ? rc : buf_put_u64(out, m->next_generation);
	rc = rc ? rc : buf_put_u32(out, m->ngens);
	for (uint32_t i = 0; rc == 0 && i < m->ngens; i++)
		rc = manifest_put_obj(out, &m->gens[i]);
	rc = rc ? rc : buf_put_u32(out, m->nruns);
	for (uint32_t i = 0; rc == 0 && i < m->nruns; i++)
		rc = manifest_put_obj(out, &m->runs[i]);
	rc = rc ? rc : buf_put_u32(out, crc32c(0, out->data + start, out->len - start));
	if (rc) {
		out->len = start;
		return diag_set(rc, "manifest v%llu: no memory to encode",
				(unsigned long long)m->version);
	}
	assert(out->len - start == total);
	return 0;
}

/** Read n objects into a fresh array (NULL when n is 0). */
static int
manifest_rd_objs(struct rd *r, uint32_t n, struct manifest_obj **out)
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
	m.ngens = rd_u32(&r);
	if (m.ngens > MANIFEST_MAX_OBJS || (uint64_t)m.ngens * MANIFEST_OBJ_BYTES + 4 > rd_left(&r))
		return diag_set(STRATA_ECORRUPT, "manifest %s: %u generations do not fit in %zu bytes",
				name, m.ngens, n);
	int rc = manifest_rd_objs(&r, m.ngens, &m.gens);
	if (rc)
		return diag_set(rc, "manifest %s: no memory for %u generations", name, m.ngens);
	m.nruns = rd_u32(&r);
	if (m.nruns > MANIFEST_MAX_OBJS || (uint64_t)m.nruns * MANIFEST_OBJ_BYTES != rd_left(&r)) {
		rc = diag_set(STRATA_ECORRUPT, "manifest %s: %u runs do not match the %zu bytes left",
			      name, m.nruns, rd_left(&r));
		manifest_destroy(&m);
		return rc;
	}
	rc = manifest_rd_objs(&r, m.nruns, &m.runs);
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
	*out = m;
	return 0;
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
	return manifest_remove(m, m->runs, &m->nruns, ids, n, "run");
}

/** State of the listing that finds the highest version. */
struct manifest_scan {
	/** Length of "<prefix>manifest/". */
	size_t dir_len;
	/** Whether any version was found. */
	int found;
	/** Highest version found. */
	uint64_t max;
	/** Versions found below this are collected into vs (gc), when vs_on. */
	uint64_t below;
	/** Collect versions below `below`. */
	int vs_on;
	/** Collected versions. */
	uint64_t *vs;
	/** Number collected. */
	size_t nvs;
	/** Capacity of vs. */
	size_t cap;
};

/** Parse the version of a manifest key's last part; -1 if not a version name. */
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

static int
manifest_scan_cb(void *ctx, const char *key, uint64_t size)
{
	struct manifest_scan *s = ctx;
	uint64_t v;
	if (strlen(key) < s->dir_len || manifest_parse_version(key + s->dir_len, &v) != 0)
		return 0;
	if (!s->found || v > s->max)
		s->max = v;
	s->found = 1;
	if (s->vs_on && v < s->below) {
		if (s->nvs == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 16;
			uint64_t *nv = env.realloc(s->vs, cap * sizeof(*nv));
			if (nv == NULL)
				return diag_set(STRATA_ENOMEM, "manifest gc: no memory for %zu versions",
						cap);
			s->vs = nv;
			s->cap = cap;
		}
		s->vs[s->nvs++] = v;
	}
	return 0;
}

/** "<prefix>manifest/" into dst. */
static int
manifest_dir_key(char *dst, size_t n, const char *prefix)
{
	int len = snprintf(dst, n, "%smanifest/", prefix);
	if (len < 0 || (size_t)len + MANIFEST_VERSION_DIGITS >= n)
		return diag_set(STRATA_EINVAL, "manifest prefix '%s' too long", prefix);
	return 0;
}

int
manifest_load(struct objstore *os, const char *prefix, struct manifest *out)
{
	memset(out, 0, sizeof(*out));
	char dir[MANIFEST_KEY_MAX], key[MANIFEST_KEY_MAX], name[MANIFEST_KEY_MAX + 300];
	int rc = manifest_dir_key(dir, sizeof(dir), prefix);
	if (rc)
		return rc;
	for (int attempt = 0; attempt < MANIFEST_LOAD_RETRIES; attempt++) {
		struct manifest_scan s = {.dir_len = strlen(dir)};
		rc = objstore_list(os, dir, manifest_scan_cb, &s);
		if (rc)
			return rc;
		if (!s.found)
			return STRATA_NOTFOUND;
		manifest_version_key(key, sizeof(key), prefix, s.max);
		snprintf(name, sizeof(name), "%s/%s", os->name, key);
		struct buf b = {0};
		rc = objstore_get(os, key, &b);
		if (rc == STRATA_NOTFOUND) {
			buf_destroy(&b);
			continue;
		}
		if (rc) {
			buf_destroy(&b);
			return rc;
		}
		struct manifest m;
		rc = manifest_decode(b.data, b.len, name, &m);
		buf_destroy(&b);
		if (rc)
			return rc;
		if (m.version != s.max) {
			rc = diag_set(STRATA_ECORRUPT, "manifest %s: holds version %llu", name,
				      (unsigned long long)m.version);
			manifest_destroy(&m);
			return rc;
		}
		*out = m;
		return 0;
	}
	return diag_set(STRATA_EIO, "manifest %s%s: the highest version vanished %d times while loading",
			os->name, dir, MANIFEST_LOAD_RETRIES);
}

/** Read-backs of manifest puts that reported a failure: stored intact, and not. */
static _Atomic uint64_t manifest_readback_landed, manifest_readback_lost;

void
manifest_readbacks(uint64_t *landed, uint64_t *lost)
{
	*landed = atomic_load(&manifest_readback_landed);
	*lost = atomic_load(&manifest_readback_lost);
}

/** Encode m and put-if-absent it as its version's object. */
static int
manifest_put_version(struct objstore *os, const char *prefix, const struct manifest *m)
{
	char key[MANIFEST_KEY_MAX];
	manifest_version_key(key, sizeof(key), prefix, m->version);
	struct buf b = {0};
	int rc = manifest_encode(m, &b);
	if (rc == 0)
		rc = objstore_put_if_absent(os, key, b.data, b.len);
	if (rc != 0 && rc != STRATA_EEXIST && b.data != NULL) {
		/* A failure after the object became visible (a failed cleanup or directory
		 * sync) must not be mistaken for "not written": the caller would then delete
		 * what the manifest now references. Read back to tell the two apart. */
		char why[512];
		snprintf(why, sizeof(why), "%s", diag_last());
		struct buf back = {0};
		int grc = objstore_get(os, key, &back);
		if (grc == 0 && back.len == b.len && memcmp(back.data, b.data, b.len) == 0) {
			diag_log(LOG_LVL_WARN, "manifest %s: the put reported \"%s\" but version %llu is "
				 "stored intact; taking it as written", key, why,
				 (unsigned long long)m->version);
			rc = 0;
			atomic_fetch_add(&manifest_readback_landed, 1);
		} else {
			atomic_fetch_add(&manifest_readback_lost, 1);
			diag_set(rc, "%s", why);
		}
		buf_destroy(&back);
	}
	buf_destroy(&b);
	return rc;
}

int
manifest_claim_at(struct objstore *os, const char *prefix, struct manifest *m)
{
	struct manifest next = *m;
	next.version = m->version + 1;
	next.writer_epoch = m->writer_epoch + 1;
	int rc = manifest_put_version(os, prefix, &next);
	if (rc == 0)
		*m = next; /* same arrays, new version and epoch */
	return rc;
}

int
manifest_claim_epoch(struct objstore *os, const char *prefix, struct manifest *m)
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
		struct manifest next = cur;
		next.version = cur.version + 1;
		next.writer_epoch = cur.writer_epoch + 1;
		rc = manifest_put_version(os, prefix, &next);
		if (rc == 0) {
			*m = next;
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
manifest_commit_update(struct objstore *os, const char *prefix, uint64_t local_epoch,
		       struct manifest *cur, manifest_mutate_fn mutate, void *ctx)
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
		rc = manifest_put_version(os, prefix, &next);
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
manifest_gc(struct objstore *os, const char *prefix, uint64_t current, uint32_t keep)
{
	if (current <= keep)
		return 0;
	char dir[MANIFEST_KEY_MAX], key[MANIFEST_KEY_MAX];
	int rc = manifest_dir_key(dir, sizeof(dir), prefix);
	if (rc)
		return rc;
	struct manifest_scan s = {.dir_len = strlen(dir), .below = current - keep, .vs_on = 1};
	rc = objstore_list(os, dir, manifest_scan_cb, &s);
	for (size_t i = 0; rc == 0 && i < s.nvs; i++) {
		manifest_version_key(key, sizeof(key), prefix, s.vs[i]);
		rc = objstore_del(os, key);
	}
	env.free(s.vs);
	return rc;
}
