/*
 * wal.c — one shard's write-ahead log: open (scan, then start), group commit, writing
 * and rolling segment files, the fence file, release and close. The group-commit
 * protocol, and which of the WAL's files holds what, are in the header comment of
 * wal_int.h.
 *
 * Segment: header (magic "STRWAL01", u32 version, u32 crc32c of magic, version and
 * first_seq, u64 first_seq), then entries. Entry header, 24 bytes: u32 header_crc
 * (crc32c of the next 20 bytes), u32 payload_len, u64 first_seq, u32 nrows, u32
 * payload_crc (crc32c of the payload); then the payload, per row: u8 kind (0 put,
 * 1 delete; version 3 on), varint klen, varint vlen, key, value. Version 2 rows have no
 * kind byte and are all puts. All integers little-endian.
 */
#include "wal_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "../lib/env.h"
#include "../lib/mono.h"
#include "../lib/ratelimit.h"

/** Segment size used when the options say 0. */
#define WAL_DEFAULT_SEGMENT_BYTES (64ull << 20)
/** Interval between background syncs when the options say 0. */
#define WAL_DEFAULT_INTERVAL_MS 1000u
/** Entries smaller than this are coalesced into one pwrite up to this many bytes;
 *  larger ones are written straight from their own buffer. */
#define WAL_COALESCE_BYTES (1u << 20)
/** Name of the fence file in a WAL directory. */
#define WAL_FENCE_NAME "epoch"

/* ---- writing helpers ---- */

static int
wal_dir_sync(const char *dir)
{
	int fd = env.open(dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return diag_sys(errno, "wal: cannot open directory", dir);
	int rc = 0;
	if (env.fsync(fd) != 0)
		rc = diag_sys(errno, "wal: cannot fsync directory", dir);
	env.close(fd);
	return rc;
}

static int
wal_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *path)
{
	const uint8_t *q = p;
	while (n > 0) {
		ssize_t r = env.pwrite(fd, q, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			char what[64];
			snprintf(what, sizeof(what), "write of %zu bytes to", n);
			return wal_sys(r < 0 ? errno : EIO, what, path, off);
		}
		q += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static void
wal_seg_header(uint8_t *h, uint64_t first_seq)
{
	memcpy(h, WAL_MAGIC, 8);
	enc_u32(h + 8, WAL_VERSION);
	enc_u64(h + 16, first_seq);
	uint32_t c = crc32c(crc32c(0, h, 12), h + 16, 8);
	enc_u32(h + 12, c);
}

/* ---- the fence ---- */

/** Read the epoch a fence file names. STRATA_ECORRUPT when it is not a fence. */
static int
wal_fence_get(int fd, const char *path, uint64_t *epoch)
{
	uint8_t b[WAL_FENCE_BYTES];
	ssize_t n = env_pread_full(fd, b, sizeof(b), 0);
	if (n < 0)
		return wal_sys(errno, "read of", path, 0);
	if (n == 0) {
		*epoch = 0; /* created, never written: no owner yet */
		return 0;
	}
	if (wal_fence_decode(b, (size_t)n, epoch) != 0)
		return diag_set(STRATA_ECORRUPT, "wal: the fence %s is not a valid fence file (%zd bytes)",
				path, n);
	return 0;
}

/** Leader, before acknowledging: STRATA_EFENCED once the fence names a newer owner. */
static int
wal_fence_check(struct wal *w)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" WAL_FENCE_NAME, w->dir);
	uint64_t owner = 0;
	/* Opened per check, not held: a shard costs one descriptor (its segment), so a
	 * store of 1000 shards fits the default limit of 1024. */
	int fd = env.open(path, O_RDONLY, 0);
	int rc = fd >= 0 ? wal_fence_get(fd, path, &owner) : wal_sys(errno, "open of", path, 0);
	if (fd >= 0)
		env.close(fd);
	if (rc == 0 && owner <= w->epoch)
		return 0;
	if (rc == 0)
		return diag_set(STRATA_EFENCED, "wal: %s is fenced: a newer owner (epoch %" PRIu64
				") took it over from this writer (epoch %" PRIu64 "); appends in flight "
				"have an unknown outcome and no later append is accepted",
				w->dir, owner, w->epoch);
	/* An unreadable fence cannot prove ownership: do not acknowledge. That is an IO
	 * failure (the WAL turns read-only until reopened), not proof of a newer owner. */
	char why[WAL_MSG_MAX];
	snprintf(why, sizeof(why), "%s", diag_last());
	return diag_set(rc == STRATA_ECORRUPT ? STRATA_ECORRUPT : STRATA_EIO, "wal: %s: cannot confirm "
			"ownership (%s); appends in flight have an unknown outcome", w->dir, why);
}

int
wal_fence_read(const char *dir, uint64_t *epoch)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" WAL_FENCE_NAME, dir);
	*epoch = 0;
	int fd = env.open(path, O_RDONLY, 0);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return wal_sys(errno, "open of", path, 0);
	int rc = wal_fence_get(fd, path, epoch);
	env.close(fd);
	return rc;
}

/** Become the owner of epoch: write it into the fence (creating it) unless a newer
 *  owner is there already. */
static int
wal_fence_take(struct wal *w, uint64_t epoch)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" WAL_FENCE_NAME, w->dir);
	int created = 0;
	int fd = env.open(path, O_RDWR, 0);
	if (fd < 0 && errno == ENOENT) {
		fd = env.open(path, O_RDWR | O_CREAT, 0644);
		created = 1;
	}
	if (fd < 0)
		return wal_sys(errno, "open of", path, 0);
	uint64_t owner = 0;
	int rc = wal_fence_get(fd, path, &owner);
	if (rc == STRATA_ECORRUPT) {
		diag_log(LOG_LVL_WARN, "%s: rewriting it", diag_last());
		rc = 0;
		owner = 0;
	}
	if (rc == 0 && owner > epoch)
		rc = diag_set(STRATA_EFENCED, "wal: %s is owned by a newer epoch %" PRIu64
			      " than ours (%" PRIu64 ")", w->dir, owner, epoch);
	uint8_t b[WAL_FENCE_BYTES];
	wal_fence_encode(b, epoch);
	if (rc == 0)
		rc = wal_pwrite_all(fd, b, sizeof(b), 0, path);
	if (rc == 0 && w->sync != STRATA_SYNC_NONE && env.fdatasync(fd) != 0)
		rc = wal_sys(errno, "fdatasync of", path, 0);
	if (rc == 0 && created && w->sync != STRATA_SYNC_NONE)
		rc = wal_dir_sync(w->dir);
	env.close(fd);
	if (rc)
		return rc;
	w->epoch = epoch;
	return 0;
}

/* ---- writing ---- */

/** Create the segment for first_seq and write its header. */
static int
wal_segment_create(struct wal *w, uint64_t first_seq, int excl, char *path, int *fdp)
{
	wal_seg_path(w->dir, first_seq, w->epoch, path);
	int fd = env.open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC), 0644);
	if (fd < 0)
		return wal_sys(errno, "create of", path, 0);
	uint8_t h[WAL_SEG_HDR];
	wal_seg_header(h, first_seq);
	int rc = wal_pwrite_all(fd, h, sizeof(h), 0, path);
	if (rc == 0 && w->sync != STRATA_SYNC_NONE)
		rc = wal_dir_sync(w->dir);
	if (rc) {
		env.close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

static int
wal_segs_reserve(struct wal *w, size_t extra)
{
	if (w->cap_segs - w->nsegs >= extra)
		return 0;
	size_t ncap = w->cap_segs ? w->cap_segs : 8;
	while (ncap - w->nsegs < extra)
		ncap *= 2;
	struct wal_seg *ns = env.realloc(w->segs, ncap * sizeof(*ns));
	if (ns == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory tracking segments of %s", w->dir);
	w->segs = ns;
	w->cap_segs = ncap;
	return 0;
}

static int
wal_datasync(int fd, const char *path, uint64_t *nsyncs)
{
	(*nsyncs)++;
	if (env.fdatasync(fd) != 0)
		return wal_sys(errno, "fdatasync of", path, 0);
	return 0;
}

/**
 * Mutex held, no leader, queue not empty: whether the calling waiter should wait
 * (until *dl) before it leads, for the writers the last group carried. Writers that
 * were acknowledged together come back together, but the first of them would
 * otherwise start the next sync alone and the rest would wait a whole sync for the
 * one after: with 4 writers at one row each, groups averaged 2.4.
 *
 * The first waiter to find the queue short arms a deadline: half the last sync's
 * duration, at most group_wait_ns. Waiters defer until as many entries are queued as
 * the last group saw writers (those it carried and those that queued while it
 * synced), or until the deadline. The writer whose entry completes the group then
 * finds it complete and leads at once, on its own thread. Only the waiter that armed
 * the deadline (*armer set) sleeps until it: it leads if no one has by then; the
 * others sleep until a group ends, so that a group that completes costs no timer
 * wake-ups during its sync. (A leader that slept until the last writer's submit
 * signalled it put a wake-up on the critical path of every group. Waiting for the
 * largest recent group instead of the last settled at 3 of 4 writers: the fourth
 * always came one entry late and never raised the target.)
 */
static int
wal_defer(struct wal *w, struct timespec *dl, int *armer)
{
	unsigned want = w->active_writers;
	if (w->sync != STRATA_SYNC_FSYNC || w->group_wait_ns == 0 || want < 2 ||
	    w->q_count >= want || w->closing)
		return 0;
	if (!w->gather_armed) {
		uint64_t wait = w->last_sync_ns / 2;
		if (wait > w->group_wait_ns)
			wait = w->group_wait_ns;
		if (wait < 1000)
			return 0;
		w->gather_dl = mono_deadline(wait);
		w->gather_armed = 1;
		*armer = 1;
	} else {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > w->gather_dl.tv_sec ||
		    (now.tv_sec == w->gather_dl.tv_sec && now.tv_nsec >= w->gather_dl.tv_nsec))
			return 0;
	}
	*dl = w->gather_dl;
	return 1;
}

/** Leader: write the staged bytes, which end at cur_off. */
static int
wal_stg_write(struct wal *w)
{
	if (w->stg.len == 0)
		return 0;
	int rc = wal_pwrite_all(w->cur_fd, w->stg.data, w->stg.len, w->cur_off - w->stg.len,
				w->cur_path);
	buf_reset(&w->stg);
	return rc;
}

/** Leader: close the current segment (synced unless NONE) and start one at first_seq. */
static int
wal_roll(struct wal *w, uint64_t first_seq, uint64_t *nsyncs)
{
	int rc;
	if (w->sync != STRATA_SYNC_NONE) {
		rc = wal_datasync(w->cur_fd, w->cur_path, nsyncs);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&w->mu);
	rc = wal_segs_reserve(w, 1);
	pthread_mutex_unlock(&w->mu);
	if (rc)
		return rc;
	char path[PATH_MAX];
	int fd;
	rc = wal_segment_create(w, first_seq, 1, path, &fd);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->mu);
	while (w->bg_syncing)
		pthread_cond_wait(&w->cond, &w->mu);
	struct wal_seg *cur = &w->segs[w->nsegs - 1];
	cur->last_seq = w->cur_last;
	cur->bytes = w->cur_off;
	w->segs[w->nsegs++] = (struct wal_seg){first_seq, w->epoch, first_seq - 1, WAL_SEG_HDR};
	w->sync_fd = fd;
	pthread_mutex_unlock(&w->mu);
	env.close(w->cur_fd);
	w->cur_fd = fd;
	w->cur_first = first_seq;
	w->cur_last = first_seq - 1;
	w->cur_off = WAL_SEG_HDR;
	memcpy(w->cur_path, path, sizeof(w->cur_path));
	return 0;
}

/** Leader, outside the mutex: write a batch at the segment tail and sync it. */
static int
wal_flush(struct wal *w, struct wal_entry *head, uint64_t *nsyncs)
{
	int rc;
	assert(w->stg.len == 0);
	if (w->cur_fd >= 0)
		wal_fdc_use(w, 0);
	else if ((rc = wal_fdc_reopen(w)) != 0) /* the budget closed it since the last group */
		return rc;
	for (struct wal_entry *e = head; e != NULL; e = e->next) {
		if (w->cur_last >= w->cur_first && w->cur_off + e->len > w->segment_bytes) {
			rc = wal_stg_write(w);
			if (rc == 0)
				rc = wal_roll(w, e->first_seq, nsyncs);
			if (rc)
				return rc;
		}
		if (w->stg.len + e->len > WAL_COALESCE_BYTES) {
			rc = wal_stg_write(w);
			if (rc)
				return rc;
		}
		if (e->len < WAL_COALESCE_BYTES && buf_append(&w->stg, e->data, e->len) == 0) {
			w->cur_off += e->len;
		} else {
			rc = wal_stg_write(w);
			if (rc == 0)
				rc = wal_pwrite_all(w->cur_fd, e->data, e->len, w->cur_off, w->cur_path);
			if (rc)
				return rc;
			w->cur_off += e->len;
		}
		w->cur_last = e->last_seq;
	}
	rc = wal_stg_write(w);
	if (rc)
		return rc;
	if (env_point(ENV_POINT_WAL_BEFORE_SYNC, w) != 0)
		return diag_set(STRATA_EINJECTED, "wal: failure injected at wal.before_sync in %s",
				w->cur_path);
	if (w->sync == STRATA_SYNC_FSYNC) {
		uint64_t t0 = env.mono_ns();
		if ((rc = wal_datasync(w->cur_fd, w->cur_path, nsyncs)) != 0)
			return rc;
		w->last_sync_ns = env.mono_ns() - t0; /* read by the next leader, under mu */
		ratelimit_observe(w->observe, w->last_sync_ns);
	}
	/* Written (and synced): acknowledge only while no newer owner has fenced us. */
	if (env_point(ENV_POINT_WAL_BEFORE_ACK, w) != 0)
		return diag_set(STRATA_EINJECTED, "wal: failure injected at wal.before_ack in %s",
				w->cur_path);
	return wal_fence_check(w);
}

static void
wal_entries_free(struct wal_entry *e)
{
	while (e != NULL) {
		struct wal_entry *next = e->next;
		env.free(e);
		e = next;
	}
}

/**
 * Mutex held, no leader, not failed, queue not empty: take every queued entry,
 * write and sync it outside the mutex, publish the outcome, wake the waiters.
 * Returns with the mutex held: 0, or the code of the failure (diag set).
 */
static int
wal_lead(struct wal *w)
{
	assert(!w->leader && !w->failed && w->q_head != NULL);
	w->leader = 1;
	w->gather_armed = 0;
	struct wal_entry *head = w->q_head;
	uint64_t end = w->submitted_off;
	w->flushing = w->q_count;
	w->q_head = w->q_tail = NULL;
	w->q_count = 0;
	pthread_mutex_unlock(&w->mu);

	uint64_t nsyncs = 0;
	int rc = w->store.os != NULL ? wal_store_flush(w, head, &nsyncs) : wal_flush(w, head, &nsyncs);
	char why[WAL_MSG_MAX];
	if (rc)
		snprintf(why, sizeof(why), "%s", diag_last());
	wal_entries_free(head);

	pthread_mutex_lock(&w->mu);
	w->leader = 0;
	w->syncs += nsyncs;
	w->active_writers = w->flushing + w->q_count; /* carried, and arrived meanwhile */
	if (w->store.os == NULL) {
		struct wal_seg *cur = &w->segs[w->nsegs - 1];
		cur->last_seq = w->cur_last;
		cur->bytes = w->cur_off;
	}
	if (rc == 0) {
		w->written_off = end;
		atomic_store_explicit(&w->ack_off, end, memory_order_release);
		if (w->sync == STRATA_SYNC_FSYNC || w->store.os != NULL)
			w->synced_off = end;
	} else {
		wal_set_failed(w, rc == STRATA_EFENCED ? STRATA_EFENCED : STRATA_EREADONLY, why);
	}
	pthread_cond_broadcast(&w->cond);
	return rc;
}

/* ---- public ---- */

int
wal_encode(struct wal *w, const strata_row *rows, size_t n, struct wal_entry **out)
{
	*out = NULL;
	if (rows == NULL || n == 0)
		return diag_set(STRATA_EINVAL, "wal: submit needs at least one row");
	if (n > UINT32_MAX)
		return diag_set(STRATA_ETOOBIG, "wal: %zu rows in one entry (limit %u)", n, UINT32_MAX);
	uint64_t plen = 0;
	for (size_t i = 0; i < n; i++) {
		const strata_row *r = &rows[i];
		if ((r->key == NULL && r->key_len) || (r->value == NULL && r->value_len))
			return diag_set(STRATA_EINVAL, "wal: row %zu has a NULL key or value", i);
		if ((r->kind != STRATA_ROW_PUT && r->kind != STRATA_ROW_DELETE) ||
		    (r->kind == STRATA_ROW_DELETE && r->value_len > 0))
			return diag_set(STRATA_EINVAL, "wal: row %zu has kind %u with a value of %zu "
					"bytes", i, (unsigned)r->kind, r->value_len);
		if (r->key_len > w->max_entry || r->value_len > w->max_entry)
			return diag_set(STRATA_ETOOBIG, "wal: row %zu exceeds the entry limit %" PRIu64,
					i, w->max_entry);
		plen += 1 + enc_varint_len(r->key_len) + enc_varint_len(r->value_len) + r->key_len +
			r->value_len;
		if (plen > w->max_entry)
			return diag_set(STRATA_ETOOBIG,
					"wal: entry payload exceeds the limit of %" PRIu64 " bytes",
					w->max_entry);
	}
	size_t len = WAL_ENTRY_HDR + (size_t)plen;
	struct wal_entry *e = env.malloc(sizeof(*e) + len);
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory for an entry of %zu bytes", len);
	uint8_t *p = e->data + WAL_ENTRY_HDR;
	for (size_t i = 0; i < n; i++) {
		*p++ = (uint8_t)rows[i].kind;
		p += enc_varint(p, rows[i].key_len);
		p += enc_varint(p, rows[i].value_len);
		if (rows[i].key_len)
			memcpy(p, rows[i].key, rows[i].key_len);
		p += rows[i].key_len;
		if (rows[i].value_len)
			memcpy(p, rows[i].value, rows[i].value_len);
		p += rows[i].value_len;
	}
	assert(p == e->data + len);
	e->next = NULL;
	e->len = len;
	e->nrows = n;
	enc_u32(e->data + 4, (uint32_t)plen);
	enc_u32(e->data + 16, (uint32_t)n);
	enc_u32(e->data + 20, crc32c(0, e->data + WAL_ENTRY_HDR, (size_t)plen));
	*out = e;
	return 0;
}

int
wal_submit_encoded(struct wal *w, struct wal_entry *e, struct wal_ticket *t)
{
	size_t n = e->nrows, len = e->len;
	pthread_mutex_lock(&w->mu);
	int rc = 0;
	if (w->failed)
		rc = diag_set(w->failed, "%s", w->fail_msg);
	else if (!w->started)
		rc = diag_set(STRATA_ECLOSED, "wal: %s is not started (wal_start)", w->dir);
	else if (w->closing)
		rc = diag_set(STRATA_ECLOSED, "wal: %s is closing", w->dir);
	else if (w->next_seq > UINT64_MAX - n)
		rc = diag_set(STRATA_ERANGE, "wal: positions of %s exhausted", w->dir);
	if (rc) {
		pthread_mutex_unlock(&w->mu);
		env.free(e);
		return rc;
	}
	e->first_seq = w->next_seq;
	e->last_seq = w->next_seq + n - 1;
	w->next_seq += n;
	enc_u64(e->data + 8, e->first_seq);
	enc_u32(e->data, crc32c(0, e->data + 4, WAL_ENTRY_HDR - 4));
	if (w->q_tail != NULL)
		w->q_tail->next = e;
	else
		w->q_head = e;
	w->q_tail = e;
	w->q_count++;
	w->submitted_off += len;
	t->first_seq = e->first_seq;
	t->last_seq = e->last_seq;
	t->end_offset = w->submitted_off;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int
wal_submit(struct wal *w, const strata_row *rows, size_t n, struct wal_ticket *t)
{
	if (t == NULL)
		return diag_set(STRATA_EINVAL, "wal: submit needs a ticket");
	struct wal_entry *e;
	int rc = wal_encode(w, rows, n, &e);
	return rc ? rc : wal_submit_encoded(w, e, t);
}

void
wal_entry_free(struct wal_entry *e)
{
	env.free(e);
}

/*
 * Waiters sleep on ack_gen, not on cond: woken by a group's end, each reads ack_off
 * and returns without the mutex. (With cond, every waiter woke into a queue on the
 * mutex the leader held, and they passed it on one context switch at a time: 4
 * writers at one row each spent about 100 us of every 300 us cycle that way.)
 */
int
wal_wait(struct wal *w, const struct wal_ticket *t)
{
	int armer = 0;
	for (;;) {
		if (atomic_load_explicit(&w->ack_off, memory_order_acquire) >= t->end_offset)
			return 0;
		pthread_mutex_lock(&w->mu);
		assert(t->end_offset <= w->submitted_off);
		if (atomic_load_explicit(&w->ack_off, memory_order_relaxed) >= t->end_offset) {
			pthread_mutex_unlock(&w->mu);
			return 0;
		}
		if (w->failed) {
			int rc = diag_set(w->failed, "%s", w->fail_msg);
			pthread_mutex_unlock(&w->mu);
			return rc;
		}
		struct timespec dl;
		const struct timespec *until = NULL;
		if (!w->leader) {
			if (!wal_defer(w, &dl, &armer)) {
				int rc = wal_lead(w);
				pthread_mutex_unlock(&w->mu);
				ecount_signal(&w->ack_gen);
				if (rc == STRATA_EINJECTED)
					return rc;
				continue;
			}
			if (armer)
				until = &dl;
		}
		unsigned gen = ecount_read(&w->ack_gen);
		pthread_mutex_unlock(&w->mu);
		ecount_wait(&w->ack_gen, gen, until);
	}
}

int
wal_release(struct wal *w, uint64_t upto)
{
	if (w->store.os != NULL)
		return wal_store_release(w, upto);
	int rc = 0, removed = 0;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (w->nsegs < 2 || w->segs[0].last_seq > upto) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		uint64_t first = w->segs[0].first_seq, epoch = w->segs[0].epoch;
		memmove(w->segs, w->segs + 1, (w->nsegs - 1) * sizeof(*w->segs));
		w->nsegs--;
		pthread_mutex_unlock(&w->mu);
		char path[PATH_MAX];
		wal_seg_path(w->dir, first, epoch, path);
		if (env.unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = diag_sys(errno, "wal: cannot delete segment", path);
		removed = 1;
	}
	if (removed && w->sync != STRATA_SYNC_NONE) {
		int drc = wal_dir_sync(w->dir);
		if (rc == 0)
			rc = drc;
	}
	return rc;
}

uint64_t
wal_next_seq(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	uint64_t v = w->next_seq;
	pthread_mutex_unlock(&w->mu);
	return v;
}

void
wal_usage(struct wal *w, uint64_t *segments, uint64_t *bytes, uint64_t *syncs)
{
	pthread_mutex_lock(&w->mu);
	uint64_t b = 0;
	for (size_t i = 0; i < w->nsegs; i++)
		b += w->segs[i].bytes;
	for (size_t i = 0; i < w->store.nobjs; i++)
		b += w->store.objs[i].bytes;
	if (segments)
		*segments = w->nsegs + w->store.nobjs;
	if (bytes)
		*bytes = b;
	if (syncs)
		*syncs = w->syncs;
	pthread_mutex_unlock(&w->mu);
}

int
wal_failed(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	int f = w->failed;
	pthread_mutex_unlock(&w->mu);
	return f;
}

void
wal_fence(struct wal *w, const char *why)
{
	pthread_mutex_lock(&w->mu);
	wal_set_failed(w, STRATA_EFENCED, why);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

void
wal_give_up(struct wal *w, const char *why)
{
	pthread_mutex_lock(&w->mu);
	if (!w->failed) {
		w->failed = STRATA_EFENCED;
		snprintf(w->fail_msg, sizeof(w->fail_msg), "%s", why);
		ecount_signal(&w->ack_gen);
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

/** Free a WAL whose threads are stopped and whose queue is drained or abandoned. */
static void
wal_free(struct wal *w)
{
	wal_fdc_drop(w);
	if (w->cur_fd >= 0)
		env.close(w->cur_fd);
	env.free(w->found);
	wal_entries_free(w->q_head);
	buf_destroy(&w->stg);
	env.free(w->segs);
	env.free(w->store.objs);
	env.free(w->store.prefix);
	env.free(w->dir);
	pthread_cond_destroy(&w->bg_cond);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mu);
	env.free(w);
}

void
wal_close(struct wal *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->closing = 1;
	while (w->leader)
		pthread_cond_wait(&w->cond, &w->mu);
	if (!w->failed && w->q_head != NULL) {
		if (wal_lead(w) != 0)
			diag_log(LOG_LVL_ERROR, "wal: close of %s lost its queued entries: %s",
				 w->dir, diag_last());
		ecount_signal(&w->ack_gen);
	}
	if (w->bg_started) {
		w->bg_stop = 1;
		pthread_cond_signal(&w->bg_cond);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->bg, NULL);
		pthread_mutex_lock(&w->mu);
		w->bg_started = 0;
	}
	if (!w->failed && w->sync == STRATA_SYNC_INTERVAL && w->written_off > w->synced_off &&
	    w->cur_fd >= 0) {
		w->syncs++;
		if (env.fdatasync(w->cur_fd) != 0) {
			wal_sys(errno, "final fdatasync of", w->cur_path, 0);
			diag_log(LOG_LVL_ERROR, "%s", diag_last());
		} else {
			w->synced_off = w->written_off;
		}
	}
	pthread_mutex_unlock(&w->mu);
	wal_free(w);
}

/* ---- open ---- */

static int
wal_new(const struct wal_options *o, struct wal **out)
{
	*out = NULL;
	if (o == NULL || o->dir == NULL || o->dir[0] == '\0')
		return diag_set(STRATA_EINVAL, "wal: no directory given");
	if (o->sync != STRATA_SYNC_FSYNC && o->sync != STRATA_SYNC_NONE &&
	    o->sync != STRATA_SYNC_INTERVAL)
		return diag_set(STRATA_EINVAL, "wal: unknown sync mode %d", o->sync);
	size_t dlen = strlen(o->dir);
	if (dlen + 1 + WAL_NAME_EPOCH_LEN >= PATH_MAX)
		return diag_set(STRATA_EINVAL, "wal: directory path of %zu bytes is too long", dlen);
	struct wal *w = env.calloc(1, sizeof(*w));
	if (w == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", o->dir);
	w->dir = env.malloc(dlen + 1);
	if (w->dir == NULL) {
		env.free(w);
		return diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", o->dir);
	}
	memcpy(w->dir, o->dir, dlen + 1);
	while (dlen > 1 && w->dir[dlen - 1] == '/')
		w->dir[--dlen] = '\0';
	w->sync = o->sync;
	w->interval_ms = o->sync_interval_ms ? o->sync_interval_ms : WAL_DEFAULT_INTERVAL_MS;
	w->group_wait_ns = (uint64_t)o->group_wait_us * 1000u;
	w->fdc = o->fdcache;
	w->observe = o->observe;
	w->external_sync = o->external_sync;
	w->segment_bytes = o->segment_bytes ? o->segment_bytes : WAL_DEFAULT_SEGMENT_BYTES;
	w->max_entry = o->max_entry_bytes ? o->max_entry_bytes : WAL_DEFAULT_MAX_ENTRY;
	if (w->max_entry > UINT32_MAX)
		w->max_entry = UINT32_MAX;
	w->cur_fd = -1;
	w->sync_fd = -1;
	w->env_ops = env_tls;
	if (o->os != NULL) {
		size_t pl = o->prefix != NULL ? strlen(o->prefix) : 0;
		w->store.os = o->os;
		w->store.reaper = o->reaper;
		w->fdc = NULL;
		w->store.prefix = pl > 0 && pl < 400 ? env.malloc(pl + 1) : NULL;
		if (w->store.prefix == NULL) {
			int rc = pl > 0 && pl < 400 ? diag_set(STRATA_ENOMEM, "wal: out of memory opening %s", o->dir)
				 : diag_set(STRATA_EINVAL, "wal: a WAL on the store needs a key prefix of 1..399 bytes");
			env.free(w->dir);
			env.free(w);
			return rc;
		}
		memcpy(w->store.prefix, o->prefix, pl + 1);
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cond, NULL);
	mono_cond_init(&w->bg_cond);
	*out = w;
	return 0;
}

/** Highest position of the live segments a survey found (0 when none). */
static uint64_t
wal_found_last(const struct wal_segment_info *fs, size_t n)
{
	uint64_t last = 0;
	for (size_t i = 0; i < n; i++)
		if (!fs[i].dead && !fs[i].gone && fs[i].last_seq > last)
			last = fs[i].last_seq;
	return last;
}

int
wal_scan_open(const struct wal_options *o, uint64_t replay_after, wal_replay_cb cb, void *ctx,
	      struct wal **out)
{
	struct wal *w;
	int rc = wal_new(o, &w);
	if (rc)
		return rc;
	w->replay_after = replay_after;
	w->cb = cb;
	w->cb_ctx = ctx;
	size_t last;
	if (w->store.os != NULL) {
		rc = wal_store_scan(w, cb, ctx);
	} else {
		rc = wal_survey(w->dir, w->max_entry, replay_after, cb, ctx, NULL, 0, &w->found, &w->nfound);
		if (rc == 0)
			rc = wal_judge(w->dir, w->found, w->nfound, replay_after, &last);
	}
	if (rc) {
		wal_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

/** Truncate the torn tail of f (a segment of a writer that is fenced or dead). */
static int
wal_truncate_tail(const char *dir, const struct wal_segment_info *f)
{
	char path[PATH_MAX];
	wal_seg_path(dir, f->first_seq, f->epoch, path);
	if (f->valid_bytes == 0) {
		diag_log(LOG_LVL_WARN, "wal: torn tail in %s at offset 0 (%s): the segment is dropped",
			 path, f->why);
		return 0;
	}
	diag_log(LOG_LVL_WARN, "wal: torn tail in %s at offset %" PRIu64 " (%s): truncating %" PRIu64
		 " bytes", path, f->valid_bytes, f->why, f->bytes - f->valid_bytes);
	int fd = env.open(path, O_WRONLY, 0);
	if (fd < 0)
		return wal_sys(errno, "open for truncation of", path, 0);
	int rc = 0;
	if (env.ftruncate(fd, (off_t)f->valid_bytes) != 0)
		rc = wal_sys(errno, "truncation of", path, f->valid_bytes);
	else if (env.fsync(fd) != 0)
		rc = wal_sys(errno, "fsync after truncation of", path, f->valid_bytes);
	env.close(fd);
	return rc;
}

/** wal_start of a WAL of segment files. */
static int
wal_segs_start(struct wal *w, uint64_t epoch, uint64_t next_seq_floor)
{
	/* 1. Fence: from here on an older writer acknowledges nothing it writes. */
	int rc = env_mkdir_p(w->dir);
	if (rc == 0)
		rc = wal_fence_take(w, epoch);
	if (rc)
		return rc;
	/* 2. Catch up with what it appended since the read-only scan. */
	uint64_t replayed = wal_found_last(w->found, w->nfound);
	uint64_t from = replayed > w->replay_after ? replayed : w->replay_after;
	struct wal_segment_info *fs = NULL;
	size_t n = 0, last = 0;
	rc = wal_survey(w->dir, w->max_entry, from, w->cb, w->cb_ctx, w->found, w->nfound, &fs, &n);
	if (rc == 0)
		rc = wal_judge(w->dir, fs, n, w->replay_after, &last);
	if (rc == 0 && last < n && fs[last].valid_bytes < fs[last].bytes && !fs[last].cut) {
		rc = wal_truncate_tail(w->dir, &fs[last]);
		fs[last].bytes = fs[last].valid_bytes;
	}
	if (rc) {
		env.free(fs);
		return rc;
	}
	env.free(w->found);
	w->found = fs;
	w->nfound = n;

	uint64_t next = wal_found_last(fs, n) + 1;
	if (next_seq_floor > next)
		next = next_seq_floor;
	/* 3. A fresh segment of our own. Epoch 0 (no owner) may replace an empty old one. */
	rc = wal_segs_reserve(w, n + 1);
	if (rc)
		return rc;
	int fd;
	rc = wal_segment_create(w, next, epoch != 0, w->cur_path, &fd);
	if (rc)
		return rc;
	w->cur_fd = fd;
	w->sync_fd = fd;
	w->cur_first = next;
	w->cur_last = next - 1;
	w->cur_off = WAL_SEG_HDR;
	w->next_seq = next;
	wal_fdc_use(w, 1);

	/* 4. Drop what is all in generations, empty, or void (a fenced writer's). */
	char path[PATH_MAX];
	int removed = 0;
	for (size_t i = 0; i < n; i++) {
		struct wal_segment_info *f = &fs[i];
		if (f->gone || (f->first_seq == next && f->epoch == epoch))
			continue;
		if (!f->dead && f->valid_bytes > 0 && f->last_seq >= f->first_seq &&
		    f->last_seq > w->replay_after) {
			w->segs[w->nsegs++] = (struct wal_seg){f->first_seq, f->epoch, f->last_seq, f->bytes};
			continue;
		}
		wal_seg_path(w->dir, f->first_seq, f->epoch, path);
		if (env.unlink(path) != 0 && errno != ENOENT) {
			int err = errno;
			diag_log(LOG_LVL_WARN, "wal: cannot delete segment %s: %s", path, strerror(err));
			if (!f->dead)
				w->segs[w->nsegs++] = (struct wal_seg){f->first_seq, f->epoch, f->last_seq,
								       f->bytes};
			continue;
		}
		removed = 1;
	}
	w->segs[w->nsegs++] = (struct wal_seg){next, epoch, next - 1, WAL_SEG_HDR};
	if (removed && w->sync != STRATA_SYNC_NONE)
		rc = wal_dir_sync(w->dir);
	if (rc == 0 && w->sync == STRATA_SYNC_INTERVAL && !w->external_sync) {
		int e = pthread_create(&w->bg, NULL, wal_bg_main, w);
		if (e != 0)
			rc = diag_set(diag_errno(e), "wal: cannot start the sync thread of %s: %s", w->dir,
				      strerror(e));
		else
			w->bg_started = 1;
	}
	if (rc)
		return rc;
	env.free(w->found);
	w->found = NULL;
	w->nfound = 0;
	return 0;
}

int
wal_start(struct wal *w, uint64_t epoch, uint64_t next_seq_floor)
{
	if (w->started)
		return diag_set(STRATA_EINVAL, "wal: %s is started already", w->dir);
	int rc = w->store.os != NULL ? wal_store_start(w, epoch, next_seq_floor)
				     : wal_segs_start(w, epoch, next_seq_floor);
	if (rc)
		return rc;
	w->cb = NULL;
	pthread_mutex_lock(&w->mu);
	w->started = 1;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int
wal_open(const struct wal_options *o, uint64_t replay_after, uint64_t next_seq_floor,
	 wal_replay_cb cb, void *ctx, struct wal **out)
{
	*out = NULL;
	struct wal *w;
	int rc = wal_scan_open(o, replay_after, cb, ctx, &w);
	if (rc)
		return rc;
	rc = wal_start(w, o->epoch, next_seq_floor);
	if (rc) {
		wal_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

int
wal_check_dir(const char *dir, uint64_t replay_after, uint64_t max_entry_bytes)
{
	struct wal_options o = {.dir = dir, .sync = STRATA_SYNC_NONE, .max_entry_bytes = max_entry_bytes};
	struct wal *w;
	int rc = wal_scan_open(&o, replay_after, NULL, NULL, &w);
	if (rc == 0)
		wal_free(w);
	return rc;
}
