/*
 * wal_scan.c — reading a WAL directory: segment names and listing, validating (and
 * replaying) one segment, the survey of every segment, and the rules by which an open
 * judges what the survey found. Read-only; wal.c's open, wal_store.c's check of a local
 * directory and wal_repair.c's tools all read through here. The format is in wal.h.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "../lib/env.h"
#include "wal_int.h"

/** Read-ahead of the recovery scanner. */
#define WAL_READ_CHUNK (1u << 20)
/** Bytes past the chunk being read that replay asks the kernel to read ahead. */
#define WAL_READAHEAD (8u << 20)
/** Length of a legacy (epoch 0) segment file name: 20 digits and ".wal". */
#define WAL_NAME_LEN 24u

/* ---- names and listing ---- */

/** Name of the code diag_errno maps an errno to. */
static const char *
wal_code_name(int code)
{
	switch (code) {
	case STRATA_ENOSPC:
		return "ENOSPC";
	case STRATA_ENOMEM:
		return "ENOMEM";
	case STRATA_EEXIST:
		return "EEXIST";
	default:
		return "EIO";
	}
}

int
wal_sys(int err, const char *what, const char *path, uint64_t off)
{
	int code = diag_errno(err);
	struct rlimit rl;
	if ((err == EMFILE || err == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		return diag_set(code, "wal: %s %s failed: %s: the process may hold %llu descriptors "
				"(ulimit -n); lower max_open_wal_files (WAL files held open over all "
				"shards) or raise the limit", what, path, strerror(err),
				(unsigned long long)rl.rlim_cur);
	return diag_set(code, "wal: %s %s at offset %" PRIu64 " failed: %s (errno %d, %s)", what,
			path, off, strerror(err), err, wal_code_name(code));
}

void
wal_seg_name(uint64_t first_seq, uint64_t epoch, char *out, size_t cap)
{
	if (epoch == 0)
		snprintf(out, cap, "%020" PRIu64 ".wal", first_seq);
	else
		snprintf(out, cap, "%020" PRIu64 "-%020" PRIu64 ".wal", first_seq, epoch);
}

void
wal_seg_path(const char *dir, uint64_t first_seq, uint64_t epoch, char *out)
{
	char name[64];
	wal_seg_name(first_seq, epoch, name, sizeof(name));
	snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

/** Parse 20 decimal digits; -1 when they are not. */
static int
wal_parse_u64(const char *p, uint64_t *out)
{
	uint64_t v = 0;
	for (int i = 0; i < 20; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		uint64_t d = (uint64_t)(p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/** Parse a segment file name; 0 with position and epoch, or -1 when not a segment name. */
static int
wal_parse_name(const char *name, uint64_t *first_seq, uint64_t *epoch)
{
	size_t len = strlen(name);
	*epoch = 0;
	if (len == WAL_NAME_LEN && strcmp(name + 20, ".wal") == 0)
		return wal_parse_u64(name, first_seq);
	if (len != WAL_NAME_EPOCH_LEN || name[20] != '-' || strcmp(name + 41, ".wal") != 0)
		return -1;
	if (wal_parse_u64(name, first_seq) != 0 || wal_parse_u64(name + 21, epoch) != 0 || *epoch == 0)
		return -1;
	return 0;
}

/** A segment as listed: position and epoch. */
struct wal_name {
	/** Position named by the file. */
	uint64_t first_seq;
	/** Epoch named by the file. */
	uint64_t epoch;
};

/** Position order, then epoch (an older epoch's segment sorts first). */
static int
wal_cmp_name(const void *a, const void *b)
{
	const struct wal_name *x = a, *y = b;
	if (x->first_seq != y->first_seq)
		return x->first_seq < y->first_seq ? -1 : 1;
	return x->epoch < y->epoch ? -1 : x->epoch > y->epoch;
}

/** The segments found in dir in position order, in an env.malloc'ed array. A missing
 *  directory holds none. */
static int
wal_list(const char *dir, struct wal_name **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	DIR *d = env.opendir(dir);
	if (d == NULL && errno == ENOENT)
		return 0;
	if (d == NULL)
		return diag_sys(errno, "wal: cannot list", dir);
	struct wal_name *v = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = env.readdir(d)) != NULL) {
		uint64_t first, epoch;
		if (wal_parse_name(de->d_name, &first, &epoch) != 0)
			continue;
		if (first == 0) {
			rc = diag_set(STRATA_ECORRUPT, "wal: segment %s/%s names position 0", dir,
				      de->d_name);
			break;
		}
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct wal_name *nv = env.realloc(v, ncap * sizeof(*v));
			if (nv == NULL) {
				rc = diag_set(STRATA_ENOMEM, "wal: out of memory listing %s", dir);
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[len++] = (struct wal_name){first, epoch};
	}
	env.closedir(d);
	if (rc) {
		env.free(v);
		return rc;
	}
	if (len > 1)
		qsort(v, len, sizeof(*v), wal_cmp_name);
	*out = v;
	*n = len;
	return 0;
}

/* ---- reading and validating one segment ---- */

int
wal_reader_get(struct wal_reader *r, uint64_t off, size_t n, const uint8_t **out)
{
	assert(off + n <= r->size);
	if (off >= r->boff && off + n <= r->boff + r->b.len) {
		*out = r->b.data + (off - r->boff);
		return 0;
	}
	uint64_t want = n > WAL_READ_CHUNK ? n : WAL_READ_CHUNK;
	if (want > r->size - off)
		want = r->size - off;
	r->b.len = 0;
	r->boff = off;
	/* Replay reads a segment front to back: ask for the next chunks now, so the disk
	 * reads them while this one is decoded (a hint: no effect on a descriptor that is
	 * not a file). */
	if (off + want < r->size)
		(void)posix_fadvise(r->fd, (off_t)(off + want), WAL_READAHEAD, POSIX_FADV_WILLNEED);
	if (buf_reserve(&r->b, (size_t)want) != 0)
		return diag_set(STRATA_ENOMEM, "wal: out of memory reading %" PRIu64 " bytes of %s",
				want, r->path);
	size_t got = 0;
	while (got < want) {
		ssize_t k = env.pread(r->fd, r->b.data + got, (size_t)want - got,
				      (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return wal_sys(errno, "read of", r->path, off + got);
		if (k == 0)
			return diag_set(STRATA_EIO, "wal: %s shrank while read at offset %" PRIu64,
					r->path, off + got);
		got += (size_t)k;
	}
	r->b.len = (size_t)want;
	*out = r->b.data;
	return 0;
}

/** Set *zero to whether every byte of r's file from off to its end is zero. */
static int
wal_zero_to_end(struct wal_reader *r, uint64_t off, int *zero)
{
	*zero = 1;
	while (off < r->size) {
		uint64_t n = r->size - off;
		if (n > WAL_READ_CHUNK)
			n = WAL_READ_CHUNK;
		const uint8_t *p;
		int rc = wal_reader_get(r, off, (size_t)n, &p);
		if (rc)
			return rc;
		for (uint64_t i = 0; i < n; i++) {
			if (p[i] != 0) {
				*zero = 0;
				return 0;
			}
		}
		off += n;
	}
	return 0;
}

/**
 * Validate the segment s names (first_seq, limit) from its start, filling in what the
 * read finds. Stops at the first invalid spot and records it in s (valid_bytes, torn,
 * why); returns 0 then. A negative return is an IO error, an unknown version, or a
 * replay callback that aborted. Each valid entry whose last position is above
 * replay_after goes to cb (when cb is set).
 * Torn (an interrupted append, if this is the last segment): fewer bytes left than an
 * entry header; a bad header checksum with only zeros from there to the end; a good
 * header whose payload reaches past the end; a bad payload checksum in an entry that
 * ends at the end or is followed only by zeros; a segment of zeros only.
 */
static int
wal_scan_segment(int fd, const char *path, uint64_t max_entry, uint64_t replay_after,
		 wal_replay_cb cb, void *ctx, struct wal_segment_info *s)
{
	uint64_t first_seq = s->first_seq, limit = s->limit;
	s->last_seq = first_seq - 1;
	s->entries = s->bytes = s->valid_bytes = 0;
	s->torn = s->cut = 0;
	s->why[0] = '\0';
	struct stat st;
	if (env.fstat(fd, &st) != 0)
		return wal_sys(errno, "stat of", path, 0);
	s->bytes = (uint64_t)st.st_size;
	if (s->bytes < WAL_SEG_HDR) {
		s->torn = 1;
		snprintf(s->why, sizeof(s->why), "incomplete segment header (%" PRIu64 " bytes)",
			 s->bytes);
		return 0;
	}
	struct wal_reader r = {.fd = fd, .path = path, .size = s->bytes};
	strata_row *rows = NULL;
	size_t rows_cap = 0;
	const uint8_t *p;
	int rc = wal_reader_get(&r, 0, WAL_SEG_HDR, &p);
	if (rc)
		goto out;
	if (memcmp(p, WAL_MAGIC, 8) != 0) {
		rc = wal_zero_to_end(&r, 0, &s->torn);
		snprintf(s->why, sizeof(s->why), "%s",
			 s->torn ? "zero-filled segment" : "bad segment magic");
		goto out;
	}
	uint32_t version = dec_u32(p + 8);
	if (version < WAL_VERSION_MIN || version > WAL_VERSION) {
		rc = diag_set(STRATA_EVERSION,
			      "wal: segment %s has format version %u, but this build reads only "
			      "versions %u..%u (entries with a header checksum); it cannot be replayed",
			      path, version, WAL_VERSION_MIN, WAL_VERSION);
		goto out;
	}
	if (crc32c(crc32c(0, p, 12), p + 16, 8) != dec_u32(p + 12)) {
		snprintf(s->why, sizeof(s->why), "segment header checksum mismatch");
		goto out;
	}
	if (dec_u64(p + 16) != first_seq) {
		snprintf(s->why, sizeof(s->why), "segment header names position %" PRIu64 ", not %" PRIu64,
			 dec_u64(p + 16), first_seq);
		goto out;
	}
	uint64_t off = WAL_SEG_HDR;
	uint64_t expect = first_seq;
	s->valid_bytes = off;
	while (off < s->bytes) {
		if (s->last_seq >= limit) {
			s->cut = 1; /* a newer epoch owns the positions from here on */
			break;
		}
		if (s->bytes - off < WAL_ENTRY_HDR) {
			s->torn = 1;
			snprintf(s->why, sizeof(s->why),
				 "incomplete entry header (%" PRIu64 " bytes)", s->bytes - off);
			break;
		}
		uint8_t h[WAL_ENTRY_HDR];
		rc = wal_reader_get(&r, off, WAL_ENTRY_HDR, &p);
		if (rc)
			goto out;
		memcpy(h, p, WAL_ENTRY_HDR);
		if (crc32c(0, h + 4, WAL_ENTRY_HDR - 4) != dec_u32(h)) {
			rc = wal_zero_to_end(&r, off, &s->torn);
			if (rc)
				goto out;
			if (s->torn)
				snprintf(s->why, sizeof(s->why),
					 "zero-filled tail of %" PRIu64 " bytes", s->bytes - off);
			else
				snprintf(s->why, sizeof(s->why), "entry header checksum mismatch");
			break;
		}
		uint32_t plen = dec_u32(h + 4);
		uint64_t fseq = dec_u64(h + 8);
		uint32_t nrows = dec_u32(h + 16);
		uint32_t pcrc = dec_u32(h + 20);
		if (plen > max_entry) {
			snprintf(s->why, sizeof(s->why), "payload length %u exceeds the limit %" PRIu64,
				 plen, max_entry);
			break;
		}
		uint64_t end = off + WAL_ENTRY_HDR + plen;
		if (end > s->bytes) {
			s->torn = 1;
			snprintf(s->why, sizeof(s->why),
				 "entry of %u payload bytes extends %" PRIu64
				 " bytes past the end of the file",
				 plen, end - s->bytes);
			break;
		}
		rc = wal_reader_get(&r, off + WAL_ENTRY_HDR, plen, &p);
		if (rc)
			goto out;
		if (crc32c(0, p, plen) != pcrc) {
			rc = wal_zero_to_end(&r, end, &s->torn);
			if (rc)
				goto out;
			snprintf(s->why, sizeof(s->why), "entry payload checksum mismatch%s",
				 !s->torn ? "" : end == s->bytes ? " in the final entry"
								: " in the final entry, zeros after it");
			break;
		}
		if (nrows == 0 || nrows > plen / 2) {
			snprintf(s->why, sizeof(s->why), "entry has %u rows in %u payload bytes", nrows,
				 plen);
			break;
		}
		if (fseq != expect || fseq > UINT64_MAX - nrows) {
			snprintf(s->why, sizeof(s->why), "entry starts at position %" PRIu64
				 ", expected %" PRIu64, fseq, expect);
			break;
		}
		if (fseq + nrows - 1 > limit) {
			snprintf(s->why, sizeof(s->why), "entry of positions %" PRIu64 "..%" PRIu64
				 " crosses position %" PRIu64 ", where a newer epoch starts", fseq,
				 fseq + nrows - 1, limit + 1);
			break;
		}
		if (nrows > rows_cap) {
			strata_row *nr = env.realloc(rows, (size_t)nrows * sizeof(*rows));
			if (nr == NULL) {
				rc = diag_set(STRATA_ENOMEM, "wal: out of memory replaying %s", path);
				goto out;
			}
			rows = nr;
			rows_cap = nrows;
		}
		struct rd in;
		rd_init(&in, p, plen);
		for (uint32_t i = 0; i < nrows && !in.err; i++) {
			uint32_t kind = STRATA_ROW_PUT;
			if (version >= 3) {
				const uint8_t *kb = rd_bytes(&in, 1);
				if (kb == NULL || (*kb != STRATA_ROW_PUT && *kb != STRATA_ROW_DELETE)) {
					in.err = 1;
					break;
				}
				kind = *kb;
			}
			uint64_t klen = rd_varint(&in);
			uint64_t vlen = rd_varint(&in);
			if (klen > rd_left(&in) || vlen > rd_left(&in) - klen) {
				in.err = 1;
				break;
			}
			rows[i].key_len = (size_t)klen;
			rows[i].key = rd_bytes(&in, (size_t)klen);
			rows[i].value_len = (size_t)vlen;
			rows[i].value = rd_bytes(&in, (size_t)vlen);
			rows[i].kind = kind;
			if (kind == STRATA_ROW_DELETE && vlen > 0)
				in.err = 1;
		}
		if (in.err || rd_left(&in) != 0) {
			snprintf(s->why, sizeof(s->why), "entry rows do not match its payload length");
			break;
		}
		uint64_t last = fseq + nrows - 1;
		if (cb != NULL && last > replay_after) {
			int cr = cb(ctx, fseq, rows, nrows);
			if (cr != 0) {
				rc = cr < 0 ? cr
					    : diag_set(STRATA_EINVAL,
						       "wal: replay stopped at position %" PRIu64 " of %s",
						       fseq, path);
				goto out;
			}
		}
		s->entries++;
		s->last_seq = last;
		expect = last + 1;
		off = end;
		s->valid_bytes = off;
	}
out:
	env.free(rows);
	buf_destroy(&r.b);
	return rc;
}

/* ---- the survey and its judgement ---- */

/** Position-ordered index of fs sorted by epoch, newest first (for wal_limits). */
static int
wal_cmp_epoch_desc(const void *a, const void *b, void *arg)
{
	const struct wal_segment_info *fs = arg;
	uint64_t x = fs[*(const size_t *)a].epoch, y = fs[*(const size_t *)b].epoch;
	return x > y ? -1 : x < y;
}

/** Set each segment's limit: one below the first position of any newer epoch. */
static int
wal_limits(struct wal_segment_info *fs, size_t n)
{
	size_t *idx = env.malloc((n ? n : 1) * sizeof(*idx));
	if (idx == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory ordering %zu segments", n);
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, n, sizeof(*idx), wal_cmp_epoch_desc, fs);
	uint64_t min_newer = UINT64_MAX; /* least first position of the epochs seen so far */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t group_min = UINT64_MAX;
		for (; j < n && fs[idx[j]].epoch == fs[idx[i]].epoch; j++) {
			fs[idx[j]].limit = min_newer == UINT64_MAX ? UINT64_MAX : min_newer - 1;
			if (fs[idx[j]].first_seq < group_min)
				group_min = fs[idx[j]].first_seq;
		}
		if (group_min < min_newer)
			min_newer = group_min;
		i = j;
	}
	env.free(idx);
	for (size_t i = 0; i < n; i++)
		fs[i].dead = fs[i].limit < fs[i].first_seq;
	return 0;
}

/** Index of the last live (neither void nor gone) segment of fs (n when none). */
size_t
wal_last_live(const struct wal_segment_info *fs, size_t n)
{
	for (size_t i = n; i-- > 0;)
		if (!fs[i].dead && !fs[i].gone)
			return i;
	return n;
}

/**
 * List and read every segment of dir. Entries whose last position is above
 * replay_from go to cb. A segment also in prev (an earlier survey) that was not the
 * last live one there and whose limit is unchanged is not read again: only the last
 * segment of a writer grows. Read-only; the caller judges what it found.
 */
int
wal_survey(const char *dir, uint64_t max_entry, uint64_t replay_from, wal_replay_cb cb, void *ctx,
	   const struct wal_segment_info *prev, size_t nprev, struct wal_segment_info **out,
	   size_t *nout)
{
	*out = NULL;
	*nout = 0;
	struct wal_name *names = NULL;
	size_t n = 0;
	int rc = wal_list(dir, &names, &n);
	if (rc)
		return rc;
	struct wal_segment_info *fs = env.calloc(n ? n : 1, sizeof(*fs));
	if (fs == NULL) {
		env.free(names);
		return diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", dir);
	}
	for (size_t i = 0; i < n; i++) {
		fs[i].first_seq = names[i].first_seq;
		fs[i].epoch = names[i].epoch;
		wal_seg_name(fs[i].first_seq, fs[i].epoch, fs[i].name, sizeof(fs[i].name));
	}
	env.free(names);
	rc = wal_limits(fs, n);
	size_t prev_last = wal_last_live(prev, nprev);
	char path[PATH_MAX];
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct wal_segment_info *f = &fs[i];
		f->last_seq = f->first_seq - 1;
		if (f->dead)
			continue;
		const struct wal_segment_info *known = NULL;
		for (size_t k = 0; k < nprev && known == NULL; k++)
			if (k != prev_last && prev[k].first_seq == f->first_seq && prev[k].epoch == f->epoch &&
			    prev[k].limit == f->limit && !prev[k].dead && !prev[k].gone)
				known = &prev[k];
		if (known != NULL) {
			*f = *known;
			continue;
		}
		wal_seg_path(dir, f->first_seq, f->epoch, path);
		int fd = env.open(path, O_RDONLY, 0);
		if (fd < 0 && errno == ENOENT) {
			f->gone = 1; /* released by its writer since the listing */
			continue;
		}
		if (fd < 0) {
			rc = wal_sys(errno, "open of", path, 0);
			break;
		}
		rc = wal_scan_segment(fd, path, max_entry, replay_from, cb, ctx, f);
		env.close(fd);
	}
	if (rc) {
		env.free(fs);
		return rc;
	}
	uint64_t next = 0;
	for (size_t i = n; i-- > 0;) {
		fs[i].next_first_seq = next;
		if (!fs[i].dead && !fs[i].gone)
			next = fs[i].first_seq;
	}
	*out = fs;
	*nout = n;
	return 0;
}

int
wal_judge_one(const char *dir, const struct wal_segment_info *f, int is_last,
	      const struct wal_segment_info *before, uint64_t replay_after)
{
	if (before != NULL && f->first_seq <= before->last_seq) {
		char path[PATH_MAX];
		wal_seg_path(dir, f->first_seq, f->epoch, path);
		return diag_set(STRATA_ECORRUPT,
				"wal: corrupt segment %s at offset 0: it starts at position %" PRIu64
				" but the previous segment reaches %" PRIu64,
				path, f->first_seq, before->last_seq);
	}
	if (f->valid_bytes >= f->bytes || f->cut)
		return WAL_BYTES_ACCEPTED;
	if (is_last && f->torn)
		return WAL_BYTES_ACCEPTED; /* an interrupted append: wal_start truncates it */
	/* A fenced writer's segment whose every position is already in a generation
	 * (the newer epoch started above the replay cursor): its torn bytes are void. */
	if (f->torn && f->limit != UINT64_MAX && f->limit <= replay_after)
		return WAL_BYTES_VOID;
	return WAL_BYTES_REFUSED;
}

int
wal_judge(const char *dir, const struct wal_segment_info *fs, size_t n, uint64_t replay_after,
	  size_t *last)
{
	char path[PATH_MAX];
	*last = wal_last_live(fs, n);
	const struct wal_segment_info *before = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct wal_segment_info *f = &fs[i];
		if (f->dead || f->gone)
			continue;
		int v = wal_judge_one(dir, f, i == *last, before, replay_after);
		if (v < 0)
			return v;
		before = f;
		if (v == WAL_BYTES_ACCEPTED)
			continue;
		wal_seg_path(dir, f->first_seq, f->epoch, path);
		if (v == WAL_BYTES_VOID) {
			diag_log(LOG_LVL_WARN, "wal: %s has a torn tail at offset %" PRIu64 " (%s) below "
				 "a newer epoch; every position it could hold is in a generation", path,
				 f->valid_bytes, f->why);
			continue;
		}
		return diag_set(STRATA_ECORRUPT, "wal: corrupt segment %s at offset %" PRIu64 ": %s",
				path, f->valid_bytes, f->why);
	}
	return 0;
}
