/*
 * wal_repair.c — read-only tools over a WAL directory for `strata inspect` and `strata
 * repair`: what each segment holds (wal_inspect_dir), every segment an open would refuse
 * (wal_damage_dir, by the open's own rules: wal_judge_one), and what can still be read
 * past a damaged spot (wal_salvage_scan). Nothing here writes; the repair's cuts are the
 * CLI's. The objects of wal = store are inspected by wal_store.c (wal_inspect_store).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/env.h"
#include "wal_int.h"

int
wal_inspect_dir(const char *dir, struct wal_segment_info *infos, int max)
{
	if (dir == NULL || (infos == NULL && max > 0))
		return diag_set(STRATA_EINVAL, "wal: inspect needs a directory");
	if (strlen(dir) + 1 + WAL_NAME_EPOCH_LEN >= PATH_MAX)
		return diag_set(STRATA_EINVAL, "wal: directory path %s is too long", dir);
	DIR *d = env.opendir(dir); /* unlike an open, inspect needs the directory to exist */
	if (d == NULL)
		return diag_sys(errno, "wal: cannot list", dir);
	env.closedir(d);
	struct wal_segment_info *fs;
	size_t n;
	int rc = wal_survey(dir, UINT32_MAX, UINT64_MAX, NULL, NULL, NULL, 0, &fs, &n);
	if (rc)
		return rc;
	/* A segment released by a running node between listing and opening is skipped. */
	size_t k = 0, total = 0;
	for (size_t i = 0; i < n; i++) {
		const struct wal_segment_info *f = &fs[i];
		if (f->gone)
			continue;
		total++;
		if ((int)k >= max)
			continue;
		struct wal_segment_info *in = &infos[k++];
		*in = *f;
		if (f->dead) {
			in->valid_bytes = 0;
			snprintf(in->why, sizeof(in->why), "void: a newer epoch starts at or before it");
		} else if (f->cut) {
			snprintf(in->why, sizeof(in->why), "void after position %" PRIu64
				 ": a newer epoch starts there", f->limit);
		}
	}
	env.free(fs);
	if (total > INT_MAX)
		total = INT_MAX;
	return (int)total;
}

int
wal_damage_dir(const char *dir, uint64_t replay_after, uint64_t max_entry_bytes,
	       struct wal_segment_info *out, int max)
{
	if (dir == NULL || dir[0] == '\0' || (out == NULL && max > 0))
		return diag_set(STRATA_EINVAL, "wal: damage scan needs a directory");
	if (strlen(dir) + 1 + WAL_NAME_EPOCH_LEN >= PATH_MAX)
		return diag_set(STRATA_EINVAL, "wal: directory path %s is too long", dir);
	uint64_t max_entry = max_entry_bytes ? max_entry_bytes : WAL_DEFAULT_MAX_ENTRY;
	if (max_entry > UINT32_MAX)
		max_entry = UINT32_MAX;
	struct wal_segment_info *fs;
	size_t n;
	int rc = wal_survey(dir, max_entry, UINT64_MAX, NULL, NULL, NULL, 0, &fs, &n);
	if (rc)
		return rc;
	/* The rules of wal_judge, applied to every segment instead of up to the first. */
	size_t last = wal_last_live(fs, n);
	const struct wal_segment_info *before = NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct wal_segment_info *f = &fs[i];
		if (f->dead || f->gone)
			continue;
		int v = wal_judge_one(dir, f, i == last, before, replay_after);
		if (v < 0) {
			rc = v;
			break;
		}
		before = f;
		if (v != WAL_BYTES_REFUSED)
			continue;
		if ((int)k < max)
			out[k] = *f;
		k++;
	}
	env.free(fs);
	if (rc)
		return rc;
	return k > INT_MAX ? INT_MAX : (int)k;
}

int
wal_salvage_scan(const char *path, uint64_t off, uint64_t max_entry_bytes, struct wal_salvage *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t max_entry = max_entry_bytes ? max_entry_bytes : WAL_DEFAULT_MAX_ENTRY;
	if (max_entry > UINT32_MAX)
		max_entry = UINT32_MAX;
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0)
		return wal_sys(errno, "open of", path, 0);
	struct stat st;
	if (env.fstat(fd, &st) != 0) {
		int rc = wal_sys(errno, "stat of", path, 0);
		env.close(fd);
		return rc;
	}
	uint64_t size = (uint64_t)st.st_size;
	out->bytes = size;
	if (off >= size) {
		env.close(fd);
		return 0;
	}
	struct wal_reader r = {.fd = fd, .path = path, .size = size};
	uint64_t p = off > WAL_SEG_HDR ? off : WAL_SEG_HDR; /* entries start after the header */
	int rc = 0;
	while (p + WAL_ENTRY_HDR <= size) {
		const uint8_t *h;
		rc = wal_reader_get(&r, p, WAL_ENTRY_HDR, &h);
		if (rc)
			break;
		if (crc32c(0, h + 4, WAL_ENTRY_HDR - 4) != dec_u32(h)) {
			p++;
			continue;
		}
		uint32_t plen = dec_u32(h + 4);
		uint64_t fseq = dec_u64(h + 8);
		uint32_t nrows = dec_u32(h + 16);
		uint32_t pcrc = dec_u32(h + 20);
		uint64_t end = p + WAL_ENTRY_HDR + plen;
		if (plen > max_entry || nrows == 0 || nrows > plen / 2 || end > size || fseq == 0 ||
		    fseq > UINT64_MAX - nrows) {
			p++;
			continue;
		}
		const uint8_t *pl;
		rc = wal_reader_get(&r, p + WAL_ENTRY_HDR, plen, &pl);
		if (rc)
			break;
		if (crc32c(0, pl, plen) != pcrc) {
			if (p == off) {
				/* The damaged entry itself: its verified header says what it held
				 * and where the next entry starts. */
				out->head_ok = 1;
				out->head_first_seq = fseq;
				out->head_last_seq = fseq + nrows - 1;
				p = end;
			} else {
				p++;
			}
			continue;
		}
		if (out->entries == 0 || fseq < out->first_seq)
			out->first_seq = fseq;
		if (fseq + nrows - 1 > out->last_seq)
			out->last_seq = fseq + nrows - 1;
		out->entries++;
		out->intact_bytes += end - p;
		p = end;
	}
	buf_destroy(&r.b);
	env.close(fd);
	out->damaged_bytes = size - off - out->intact_bytes;
	return rc;
}
