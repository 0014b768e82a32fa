/*
 * wtrace.c — the workload trace (wtrace.h): records into blocks under a mutex, one writer
 * thread for the file, and the reader.
 */
#include "wtrace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../strata_types.h"
#include "buf.h"
#include "crc.h"
#include "diag.h"
#include "env.h"

static const char wtrace_magic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'W', 'T'};
#define WTRACE_BLOCK_MAGIC 0x4b4c4254u /* "TBLK" */
#define WTRACE_END_MAGIC 0x444e4554u   /* "TEND" */

struct wtrace {
	struct wtrace_options o;
	char path[4096];
	/** Guards everything below but the file, which only the writer touches. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_int active;
	int stop;
	/** The block being filled: payload, records, its first record's time, the last time. */
	struct buf cur;
	uint32_t cur_recs;
	uint64_t cur_first, last_t;
	/** Full blocks for the writer (payloads, with their counts and times). */
	struct buf q[WTRACE_QUEUE_BLOCKS];
	uint32_t q_recs[WTRACE_QUEUE_BLOCKS];
	uint64_t q_first[WTRACE_QUEUE_BLOCKS];
	unsigned q_head, q_len;
	/** Counts (records and dropped under mu; the file's, written by the writer alone, atomic
	 *  so that wtrace_status reads them while it writes). */
	uint64_t records, dropped;
	_Atomic uint64_t written_records, file_bytes, bytes, rotations;
	uint64_t start_ns;
	char why[256];
	/** The file took its last block (budget, error): nothing more is written to it. */
	int full;
	/** The writer's file and thread. */
	int fd;
	pthread_t th;
	int th_started;
};

static uint64_t
wt_now(const struct wtrace *w)
{
	return w->o.now_ns ? w->o.now_ns() : env.mono_ns();
}

/* ---------- the file (writer thread, or the opener before it starts) ---------- */

static int
wt_write(struct wtrace *w, const void *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = env.pwrite(w->fd, (const char *)p + done, n - done, (off_t)(w->file_bytes + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return diag_set(errno == ENOSPC ? STRATA_ENOSPC : STRATA_EIO, "trace %s: write: %s", w->path,
					k < 0 ? strerror(errno) : "short write");
		done += (size_t)k;
	}
	w->file_bytes += n;
	w->bytes += n;
	return 0;
}

static int
wt_header(struct wtrace *w)
{
	uint8_t h[WTRACE_HEADER_BYTES];
	memcpy(h, wtrace_magic, 8);
	enc_u32(h + 8, WTRACE_VERSION);
	enc_u32(h + 12, w->o.shards);
	enc_u64(h + 16, env.wall_ns());
	enc_u32(h + 24, 0);
	enc_u32(h + 28, crc32c(0, h, 28));
	return wt_write(w, h, sizeof(h));
}

static int
wt_open_file(struct wtrace *w)
{
	w->fd = env.open(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0)
		return diag_set(errno == ENOSPC ? STRATA_ENOSPC : STRATA_EIO, "trace %s: %s", w->path, strerror(errno));
	w->file_bytes = 0;
	return wt_header(w);
}

static int
wt_block(struct wtrace *w, const struct buf *payload, uint32_t recs, uint64_t first)
{
	uint8_t h[WTRACE_BLOCK_HEADER_BYTES];
	enc_u32(h, WTRACE_BLOCK_MAGIC);
	enc_u32(h + 4, (uint32_t)payload->len);
	enc_u32(h + 8, recs);
	enc_u32(h + 12, crc32c(0, payload->data, payload->len));
	enc_u64(h + 16, first);
	int rc = wt_write(w, h, sizeof(h));
	if (rc == 0)
		rc = wt_write(w, payload->data, payload->len);
	if (rc == 0)
		w->written_records += recs;
	return rc;
}

/** The end block, a sync and the close. */
static int
wt_end(struct wtrace *w, uint64_t dropped)
{
	uint8_t e[16 + 24];
	enc_u32(e, WTRACE_END_MAGIC);
	enc_u32(e + 4, 24);
	enc_u32(e + 8, 0);
	enc_u64(e + 16, w->written_records);
	enc_u64(e + 24, dropped);
	enc_u64(e + 32, wt_now(w) - w->start_ns);
	enc_u32(e + 12, crc32c(0, e + 16, 24));
	int rc = wt_write(w, e, sizeof(e));
	if (rc == 0 && env.fdatasync(w->fd) != 0)
		rc = diag_set(STRATA_EIO, "trace %s: fdatasync: %s", w->path, strerror(errno));
	env.close(w->fd);
	w->fd = -1;
	return rc;
}

/** Write one block, first making room: rotate or stop at the budget. 0, 1 (stopped at the
 *  budget), or an error. */
static int
wt_put(struct wtrace *w, const struct buf *payload, uint32_t recs, uint64_t first)
{
	uint64_t need = WTRACE_BLOCK_HEADER_BYTES + payload->len + 40;
	if (w->file_bytes + need > w->o.max_bytes) {
		if (!w->o.rotate)
			return 1;
		char old[sizeof(w->path) + 4];
		snprintf(old, sizeof(old), "%s.1", w->path);
		int rc = wt_end(w, 0);
		if (rc == 0 && env.rename(w->path, old) != 0)
			rc = diag_set(STRATA_EIO, "trace: rename %s to %s: %s", w->path, old, strerror(errno));
		if (rc == 0)
			rc = wt_open_file(w);
		if (rc != 0)
			return rc;
		w->written_records = 0;
		w->rotations++;
	}
	return wt_block(w, payload, recs, first);
}

/** Move the block being filled to the writer's queue (mu held; the queue has room). */
static void
wt_queue_cur(struct wtrace *w)
{
	unsigned i = (w->q_head + w->q_len) % WTRACE_QUEUE_BLOCKS;
	w->q[i] = w->cur;
	w->q_recs[i] = w->cur_recs;
	w->q_first[i] = w->cur_first;
	w->q_len++;
	memset(&w->cur, 0, sizeof(w->cur));
	w->cur_recs = 0;
}

static void *
wt_main(void *arg)
{
	struct wtrace *w = arg;
	struct buf b = {0};
	pthread_mutex_lock(&w->mu);
	for (;;) {
		uint64_t now = wt_now(w);
		int expired = w->o.max_ns && now - w->start_ns >= w->o.max_ns;
		if (w->q_len == 0 && !w->stop && !expired) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)WTRACE_FLUSH_MS % 1000 * 1000000L;
			ts.tv_sec += WTRACE_FLUSH_MS / 1000 + ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT && w->q_len == 0 && w->cur_recs > 0) {
				/* A quiet second: what there is goes to the file. */
				wt_queue_cur(w);
			}
			continue;
		}
		int last = w->stop || expired;
		if (last && w->cur_recs > 0 && w->q_len < WTRACE_QUEUE_BLOCKS)
			wt_queue_cur(w);
		if (last)
			atomic_store(&w->active, 0);
		int rc = 0;
		while (w->q_len > 0) {
			unsigned i = w->q_head;
			buf_destroy(&b);
			b = w->q[i];
			uint32_t recs = w->q_recs[i];
			uint64_t first = w->q_first[i];
			memset(&w->q[i], 0, sizeof(w->q[i]));
			w->q_head = (w->q_head + 1) % WTRACE_QUEUE_BLOCKS;
			w->q_len--;
			pthread_mutex_unlock(&w->mu);
			rc = w->fd >= 0 && !w->full ? wt_put(w, &b, recs, first) : 1;
			pthread_mutex_lock(&w->mu);
			if (rc != 0) {
				if (rc == 1 && w->why[0] == '\0')
					snprintf(w->why, sizeof(w->why), "byte budget");
				else if (rc != 1 && w->why[0] == '\0')
					snprintf(w->why, sizeof(w->why), "%s", diag_last());
				w->dropped += recs;
				w->full = 1;
				atomic_store(&w->active, 0);
				last = 1;
			}
		}
		if (last) {
			if (w->why[0] == '\0')
				snprintf(w->why, sizeof(w->why), "%s", expired && !w->stop ? "duration" : "stopped");
			/* What was taken and not written is dropped. */
			w->dropped += w->cur_recs;
			w->cur_recs = 0;
			buf_destroy(&w->cur);
			uint64_t dropped = w->dropped;
			pthread_mutex_unlock(&w->mu);
			if (w->fd >= 0 && wt_end(w, dropped) != 0) {
				pthread_mutex_lock(&w->mu);
				snprintf(w->why, sizeof(w->why), "%s", diag_last());
				pthread_mutex_unlock(&w->mu);
			}
			buf_destroy(&b);
			diag_log(LOG_LVL_INFO, "trace %s: ended (%s): %llu records, %llu dropped, %llu bytes", w->path,
				 w->why, (unsigned long long)w->records, (unsigned long long)dropped,
				 (unsigned long long)atomic_load(&w->bytes));
			return NULL;
		}
	}
}

int
wtrace_open(const struct wtrace_options *o, struct wtrace **out)
{
	*out = NULL;
	if (o->path == NULL || strlen(o->path) >= sizeof(((struct wtrace *)0)->path) - 4)
		return diag_set(STRATA_EINVAL, "trace: no file, or its path is too long");
	if (o->max_bytes < WTRACE_MIN_BYTES)
		return diag_set(STRATA_EINVAL, "trace: a byte budget of %llu is too small; at least %u",
				(unsigned long long)o->max_bytes, WTRACE_MIN_BYTES);
	struct wtrace *w = env.calloc(1, sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "trace: out of memory");
	w->o = *o;
	snprintf(w->path, sizeof(w->path), "%s", o->path);
	w->o.path = w->path;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->start_ns = wt_now(w);
	int rc = wt_open_file(w);
	if (rc == 0 && pthread_create(&w->th, NULL, wt_main, w) != 0)
		rc = diag_set(STRATA_ENOMEM, "trace: cannot start its writer thread");
	if (rc != 0) {
		if (w->fd >= 0)
			env.close(w->fd);
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		env.free(w);
		return rc;
	}
	w->th_started = 1;
	atomic_store(&w->active, 1);
	*out = w;
	return 0;
}

void
wtrace_stop(struct wtrace *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	int join = w->th_started;
	w->th_started = 0;
	pthread_mutex_unlock(&w->mu);
	if (join)
		pthread_join(w->th, NULL);
}

void
wtrace_close(struct wtrace *w)
{
	if (w == NULL)
		return;
	wtrace_stop(w);
	for (unsigned i = 0; i < WTRACE_QUEUE_BLOCKS; i++)
		buf_destroy(&w->q[i]);
	buf_destroy(&w->cur);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	env.free(w);
}

int
wtrace_active(const struct wtrace *w)
{
	return w != NULL && atomic_load_explicit(&w->active, memory_order_relaxed);
}

const char *
wtrace_path(const struct wtrace *w)
{
	return w->path;
}

void
wtrace_status(struct wtrace *w, struct wtrace_status *out)
{
	pthread_mutex_lock(&w->mu);
	out->active = atomic_load(&w->active);
	snprintf(out->why, sizeof(out->why), "%s", w->why);
	out->records = w->records;
	out->dropped = w->dropped;
	out->file_bytes = atomic_load(&w->file_bytes);
	out->bytes = atomic_load(&w->bytes);
	out->rotations = atomic_load(&w->rotations);
	out->elapsed_ns = wt_now(w) - w->start_ns;
	pthread_mutex_unlock(&w->mu);
}

/* ---------- recording ---------- */

/** Lock and start a record of at most max bytes: its kind and time; NULL (unlocked) when
 *  the trace is not taking records or the record is dropped. */
static uint8_t *
wt_begin(struct wtrace *w, enum wtrace_kind kind, size_t max)
{
	if (!wtrace_active(w))
		return NULL;
	pthread_mutex_lock(&w->mu);
	if (!atomic_load(&w->active) || w->stop) {
		pthread_mutex_unlock(&w->mu);
		return NULL;
	}
	if (w->cur.len + max > WTRACE_BLOCK_BYTES && w->cur_recs > 0) {
		if (w->q_len == WTRACE_QUEUE_BLOCKS) {
			w->records++;
			w->dropped++;
			pthread_mutex_unlock(&w->mu);
			return NULL;
		}
		wt_queue_cur(w);
		pthread_cond_signal(&w->cv);
	}
	if (buf_reserve(&w->cur, max) != 0) {
		w->records++;
		w->dropped++;
		pthread_mutex_unlock(&w->mu);
		return NULL;
	}
	uint64_t t = wt_now(w) - w->start_ns;
	if (t < w->last_t)
		t = w->last_t;
	if (w->cur_recs == 0) {
		w->cur_first = t;
		w->last_t = t;
	}
	uint8_t *p = w->cur.data + w->cur.len;
	*p++ = (uint8_t)kind;
	p += enc_varint(p, t - w->last_t);
	w->last_t = t;
	return p;
}

/** End the record that ends at p, and unlock. */
static void
wt_end_rec(struct wtrace *w, uint8_t *p)
{
	w->cur.len = (size_t)(p - w->cur.data);
	w->cur_recs++;
	w->records++;
	pthread_mutex_unlock(&w->mu);
}

void
wtrace_rows(struct wtrace *w, enum wtrace_kind kind, uint32_t shard, const struct wtrace_row *rows, size_t n)
{
	uint8_t *p = wt_begin(w, kind, 32 + n * 18);
	if (p == NULL)
		return;
	p += enc_varint(p, shard);
	p += enc_varint(p, n);
	for (size_t i = 0; i < n; i++) {
		enc_u64(p, rows[i].hash);
		p += 8;
		p += enc_varint(p, rows[i].key_len);
		if (kind == WTRACE_APPEND)
			p += enc_varint(p, rows[i].value_len);
	}
	wt_end_rec(w, p);
}

void
wtrace_get(struct wtrace *w, uint32_t shard, uint64_t hash, uint32_t key_len, int found, uint64_t value_len)
{
	uint8_t *p = wt_begin(w, WTRACE_GET, 48);
	if (p == NULL)
		return;
	p += enc_varint(p, shard);
	enc_u64(p, hash);
	p += 8;
	p += enc_varint(p, key_len);
	*p++ = found ? 1 : 0;
	p += enc_varint(p, value_len);
	wt_end_rec(w, p);
}

void
wtrace_scan(struct wtrace *w, uint32_t shard, uint64_t rows, uint64_t bytes)
{
	uint8_t *p = wt_begin(w, WTRACE_SCAN, 48);
	if (p == NULL)
		return;
	p += enc_varint(p, shard);
	p += enc_varint(p, rows);
	p += enc_varint(p, bytes);
	wt_end_rec(w, p);
}

void
wtrace_request(struct wtrace *w, enum wtrace_kind kind, uint32_t shard)
{
	uint8_t *p = wt_begin(w, kind, 24);
	if (p == NULL)
		return;
	p += enc_varint(p, shard);
	wt_end_rec(w, p);
}

void
wtrace_engine(struct wtrace *w, unsigned kind, const uint64_t *v, unsigned n)
{
	uint8_t *p = wt_begin(w, WTRACE_ENGINE, 32 + (size_t)n * 10);
	if (p == NULL)
		return;
	p += enc_varint(p, kind);
	p += enc_varint(p, n);
	for (unsigned i = 0; i < n; i++)
		p += enc_varint(p, v[i]);
	wt_end_rec(w, p);
}

/* ---------- reading ---------- */

/** Decode one block's payload, calling fn per record. 0, fn's nonzero, or -1 (malformed). */
static int
wt_decode(const uint8_t *p, size_t n, uint32_t recs, uint64_t first, wtrace_read_fn fn, void *ctx,
	  struct buf *rows_buf)
{
	struct rd r;
	rd_init(&r, p, n);
	uint64_t t = first;
	for (uint32_t k = 0; k < recs; k++) {
		struct wtrace_rec rec;
		memset(&rec, 0, sizeof(rec));
		rec.kind = rd_u8(&r);
		t += rd_varint(&r);
		rec.t_ns = t;
		uint64_t v[64];
		switch (rec.kind) {
		case WTRACE_APPEND:
		case WTRACE_DELETE: {
			rec.shard = (uint32_t)rd_varint(&r);
			uint64_t nr = rd_varint(&r);
			if (r.err || nr > rd_left(&r) / 9 + 1)
				return -1;
			buf_reset(rows_buf);
			if (buf_reserve(rows_buf, (size_t)nr * sizeof(struct wtrace_row) + 1) != 0)
				return -1;
			struct wtrace_row *rows = (struct wtrace_row *)rows_buf->data;
			for (uint64_t i = 0; i < nr; i++) {
				rows[i].hash = rd_u64(&r);
				rows[i].key_len = (uint32_t)rd_varint(&r);
				rows[i].value_len = rec.kind == WTRACE_APPEND ? (uint32_t)rd_varint(&r) : 0;
			}
			rec.rows = rows;
			rec.nrows = (size_t)nr;
			break;
		}
		case WTRACE_GET: {
			static __thread struct wtrace_row one;
			rec.shard = (uint32_t)rd_varint(&r);
			one.hash = rd_u64(&r);
			one.key_len = (uint32_t)rd_varint(&r);
			rec.found = rd_u8(&r);
			rec.value_len = rd_varint(&r);
			one.value_len = (uint32_t)rec.value_len;
			rec.rows = &one;
			rec.nrows = 1;
			break;
		}
		case WTRACE_SEAL:
		case WTRACE_MERGE:
			rec.shard = (uint32_t)rd_varint(&r);
			break;
		case WTRACE_SCAN:
			rec.shard = (uint32_t)rd_varint(&r);
			rec.scan_rows = rd_varint(&r);
			rec.scan_bytes = rd_varint(&r);
			break;
		case WTRACE_ENGINE: {
			rec.event = (unsigned)rd_varint(&r);
			uint64_t nv = rd_varint(&r);
			if (nv > 64)
				return -1;
			for (uint64_t i = 0; i < nv; i++)
				v[i] = rd_varint(&r);
			rec.v = v;
			rec.nv = (unsigned)nv;
			break;
		}
		default:
			return -1;
		}
		if (r.err)
			return -1;
		int rc = fn(ctx, &rec);
		if (rc != 0)
			return rc;
	}
	return rd_left(&r) == 0 ? 0 : -1;
}

int
wtrace_read(const char *path, wtrace_read_fn fn, void *ctx, struct wtrace_info *info)
{
	memset(info, 0, sizeof(*info));
	int fd = env.open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return diag_set(errno == ENOENT ? STRATA_NOTFOUND : STRATA_EIO, "trace %s: %s", path, strerror(errno));
	struct stat st;
	if (env.fstat(fd, &st) != 0) {
		env.close(fd);
		return diag_set(STRATA_EIO, "trace %s: %s", path, strerror(errno));
	}
	uint64_t size = (uint64_t)st.st_size;
	info->bytes = size;
	uint8_t h[WTRACE_HEADER_BYTES];
	int rc = 0;
	if (size < WTRACE_HEADER_BYTES || env.pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, wtrace_magic, 8) != 0) {
		rc = diag_set(STRATA_EINVAL, "%s is not a strata workload trace (no STRATAWT header)", path);
	} else if (dec_u32(h + 28) != crc32c(0, h, 28)) {
		rc = diag_set(STRATA_EINVAL, "trace %s: the header at offset 0 is corrupt (CRC mismatch)", path);
	} else if ((info->version = dec_u32(h + 8)) != WTRACE_VERSION) {
		rc = diag_set(STRATA_EINVAL, "trace %s is of format version %u; this strata reads version %u", path,
			      info->version, WTRACE_VERSION);
	}
	info->shards = dec_u32(h + 12);
	info->start_wall_ns = dec_u64(h + 16);
	if (fn == NULL) { /* the header alone */
		env.close(fd);
		return rc;
	}
	struct buf payload = {0}, rows = {0};
	uint64_t off = WTRACE_HEADER_BYTES;
	while (rc == 0 && off < size) {
		uint8_t b[WTRACE_BLOCK_HEADER_BYTES];
		if (size - off < 16 || env.pread(fd, b, 16, (off_t)off) != 16) {
			info->torn_at = off;
			break;
		}
		uint32_t magic = dec_u32(b), len = dec_u32(b + 4), recs = dec_u32(b + 8), crc = dec_u32(b + 12);
		if (magic == WTRACE_END_MAGIC) {
			uint8_t e[24];
			if (len != 24 || size - off < 40 || env.pread(fd, e, 24, (off_t)(off + 16)) != 24) {
				info->torn_at = off;
				break;
			}
			if (crc32c(0, e, 24) != crc) {
				rc = diag_set(STRATA_EINVAL, "trace %s: the end block at offset %llu is corrupt", path,
					      (unsigned long long)off);
				break;
			}
			info->ended = 1;
			info->end_records = dec_u64(e);
			info->end_dropped = dec_u64(e + 8);
			info->end_ns = dec_u64(e + 16);
			off += 40;
			continue; /* a rotated file ends here; nothing follows in practice */
		}
		if (magic != WTRACE_BLOCK_MAGIC) {
			rc = diag_set(STRATA_EINVAL, "trace %s: no block at offset %llu (bad magic)", path,
				      (unsigned long long)off);
			break;
		}
		if (size - off < WTRACE_BLOCK_HEADER_BYTES + (uint64_t)len) {
			info->torn_at = off;
			break;
		}
		if (env.pread(fd, b + 16, 8, (off_t)(off + 16)) != 8 || buf_reserve(&payload, len + 1) != 0 ||
		    env.pread(fd, payload.data, len, (off_t)(off + WTRACE_BLOCK_HEADER_BYTES)) != (ssize_t)len) {
			rc = diag_set(STRATA_EIO, "trace %s: read at offset %llu failed", path, (unsigned long long)off);
			break;
		}
		if (crc32c(0, payload.data, len) != crc) {
			rc = diag_set(STRATA_EINVAL, "trace %s: the block at offset %llu is corrupt (CRC mismatch)", path,
				      (unsigned long long)off);
			break;
		}
		int d = wt_decode(payload.data, len, recs, dec_u64(b + 16), fn, ctx, &rows);
		if (d < 0) {
			rc = diag_set(STRATA_EINVAL, "trace %s: the block at offset %llu does not decode", path,
				      (unsigned long long)off);
			break;
		}
		if (d > 0) {
			rc = d;
			break;
		}
		info->blocks++;
		info->records += recs;
		off += WTRACE_BLOCK_HEADER_BYTES + len;
	}
	buf_destroy(&payload);
	buf_destroy(&rows);
	env.close(fd);
	return rc;
}
