/*
 * wal_fdcache.c — a segment's descriptor outside group commits: the descriptor budget
 * the WALs of a store share (the least recently used idle descriptors close to make
 * room, and the next append reopens them), and the interval sync of what is written
 * (STRATA_SYNC_INTERVAL: by the sync thread, by the owner in inline mode, or by the
 * budget ahead of the interval when it must close a descriptor that holds unsynced
 * bytes). Lock order: the budget's mu before any WAL's mu, never after.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "../lib/env.h"
#include "../lib/mono.h"
#include "wal_int.h"

/* ---- the descriptor budget ---- */

/** A budget of open segment descriptors shared by the WALs of a store (wal.h). */
struct wal_fdcache {
	/** Guards the list and the count; taken before any WAL's mu, never after. */
	pthread_mutex_t mu;
	/** Most segment descriptors open at once. */
	unsigned max;
	/** Segment descriptors open now (listed WALs). */
	unsigned open;
	/** Listed WAL used most recently. */
	struct wal *head;
	/** Listed WAL used least recently: the first one considered for closing. */
	struct wal *tail;
	/** Descriptors closed to make room. */
	uint64_t evictions;
	/** Closed descriptors reopened by a later append. */
	uint64_t reopens;
	/** Evictions that synced an interval-mode segment ahead of its interval. */
	uint64_t early_syncs;
};

int
wal_fdcache_new(unsigned max, struct wal_fdcache **out)
{
	*out = NULL;
	struct wal_fdcache *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "wal: out of memory");
	pthread_mutex_init(&c->mu, NULL);
	c->max = max ? max : 1;
	*out = c;
	return 0;
}

void
wal_fdcache_delete(struct wal_fdcache *c)
{
	if (c == NULL)
		return;
	pthread_mutex_destroy(&c->mu);
	env.free(c);
}

void
wal_fdcache_stats(struct wal_fdcache *c, unsigned *open, uint64_t *evictions, uint64_t *reopens)
{
	pthread_mutex_lock(&c->mu);
	if (open)
		*open = c->open;
	if (evictions)
		*evictions = c->evictions;
	if (reopens)
		*reopens = c->reopens;
	pthread_mutex_unlock(&c->mu);
}

/** c->mu held: take w out of the list. */
static void
wal_fdc_unlink(struct wal_fdcache *c, struct wal *w)
{
	if (w->fdc_prev != NULL)
		w->fdc_prev->fdc_next = w->fdc_next;
	else
		c->head = w->fdc_next;
	if (w->fdc_next != NULL)
		w->fdc_next->fdc_prev = w->fdc_prev;
	else
		c->tail = w->fdc_prev;
	w->fdc_prev = w->fdc_next = NULL;
}

/** c->mu held: put w first. */
static void
wal_fdc_push(struct wal_fdcache *c, struct wal *w)
{
	w->fdc_prev = NULL;
	w->fdc_next = c->head;
	if (c->head != NULL)
		c->head->fdc_prev = w;
	c->head = w;
	if (c->tail == NULL)
		c->tail = w;
}

/** v->mu held: v's descriptor is open and no one uses it (no leader, no background
 *  sync, not closing). */
static int
wal_fdc_idle(const struct wal *v)
{
	return !v->leader && !v->bg_syncing && !v->closing && v->cur_fd >= 0;
}

/** c->mu and v->mu held, v idle with nothing unsynced: close v's descriptor (its next
 *  append reopens it). */
static void
wal_fdc_evict(struct wal_fdcache *c, struct wal *v)
{
	env.close(v->cur_fd);
	v->cur_fd = v->sync_fd = -1;
	wal_fdc_unlink(c, v);
	v->fdc_listed = 0;
	c->open--;
	c->evictions++;
}

/**
 * Leader (or wal_start), no WAL mutex held: w's segment descriptor is (re)opened or
 * used. Mark it most recently used; while the budget is exceeded, close the least
 * recently used idle WAL's descriptor: one with no leader, no background sync and
 * nothing written but unsynced (sync = interval) — its next append reopens it. When
 * every other one holds unsynced bytes, the least recently used is synced first.
 */
void
wal_fdc_use(struct wal *w, int opened)
{
	struct wal_fdcache *c = w->fdc;
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	if (w->fdc_listed)
		wal_fdc_unlink(c, w);
	else if (opened)
		c->open++;
	w->fdc_listed = 1;
	wal_fdc_push(c, w);
	for (struct wal *v = c->tail; v != NULL && c->open > c->max;) {
		struct wal *prev = v->fdc_prev;
		if (v != w && pthread_mutex_trylock(&v->mu) == 0) {
			if (wal_fdc_idle(v) &&
			    (v->sync != STRATA_SYNC_INTERVAL || v->written_off <= v->synced_off))
				wal_fdc_evict(c, v);
			pthread_mutex_unlock(&v->mu);
		}
		v = prev;
	}
	/* Every other WAL holds unsynced bytes (sync = interval, appends faster than the
	 * interval): sync the least recently used one now, a little ahead of its interval,
	 * rather than go past the budget and the process's descriptor limit. */
	for (struct wal *v = c->tail; v != NULL && c->open > c->max;) {
		struct wal *prev = v->fdc_prev;
		if (v != w && pthread_mutex_trylock(&v->mu) == 0) {
			if (wal_fdc_idle(v) && v->sync == STRATA_SYNC_INTERVAL &&
			    v->written_off > v->synced_off) {
				wal_sync_written_locked(v); /* drops v->mu while it syncs */
				if (wal_fdc_idle(v) && v->written_off <= v->synced_off) {
					wal_fdc_evict(c, v);
					c->early_syncs++;
				}
			}
			pthread_mutex_unlock(&v->mu);
		}
		v = prev;
	}
	pthread_mutex_unlock(&c->mu);
}

void
wal_fdc_drop(struct wal *w)
{
	struct wal_fdcache *c = w->fdc;
	if (c == NULL || !w->fdc_listed)
		return;
	pthread_mutex_lock(&c->mu);
	wal_fdc_unlink(c, w);
	w->fdc_listed = 0;
	c->open--;
	pthread_mutex_unlock(&c->mu);
}

int
wal_fdc_reopen(struct wal *w)
{
	int fd = env.open(w->cur_path, O_WRONLY, 0);
	if (fd < 0)
		return wal_sys(errno, "reopen of", w->cur_path, 0);
	pthread_mutex_lock(&w->mu);
	w->cur_fd = w->sync_fd = fd;
	pthread_mutex_unlock(&w->mu);
	if (w->fdc != NULL) {
		pthread_mutex_lock(&w->fdc->mu);
		w->fdc->reopens++;
		pthread_mutex_unlock(&w->fdc->mu);
	}
	wal_fdc_use(w, 1);
	return 0;
}

/* ---- the interval sync ---- */

void
wal_sync_written_locked(struct wal *w)
{
	/* One sync at a time: the budget's early sync and the interval's may meet here, and
	 * the budget closes the descriptor once the first ends. */
	while (w->bg_syncing)
		pthread_cond_wait(&w->cond, &w->mu);
	if (w->failed || w->written_off <= w->synced_off || w->sync_fd < 0)
		return;
	uint64_t target = w->written_off;
	int fd = w->sync_fd;
	w->bg_syncing = 1;
	pthread_mutex_unlock(&w->mu);
	int r = env.fdatasync(fd);
	int err = errno;
	pthread_mutex_lock(&w->mu);
	w->bg_syncing = 0;
	w->syncs++;
	if (r == 0) {
		if (target > w->synced_off)
			w->synced_off = target;
	} else {
		char why[WAL_MSG_MAX], path[PATH_MAX];
		wal_seg_path(w->dir, w->segs[w->nsegs - 1].first_seq, w->segs[w->nsegs - 1].epoch, path);
		wal_sys(err, "background fdatasync of", path, 0);
		snprintf(why, sizeof(why), "%s", diag_last());
		wal_set_failed(w, STRATA_EREADONLY, why);
	}
	pthread_cond_broadcast(&w->cond);
}

void
wal_sync_written(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	if (w->started)
		wal_sync_written_locked(w);
	pthread_mutex_unlock(&w->mu);
}

void *
wal_bg_main(void *arg)
{
	struct wal *w = arg;
	env_enter(w->env_ops);
	pthread_mutex_lock(&w->mu);
	while (!w->bg_stop) {
		struct timespec dl = mono_deadline((uint64_t)w->interval_ms * 1000000ull);
		while (!w->bg_stop && pthread_cond_timedwait(&w->bg_cond, &w->mu, &dl) != ETIMEDOUT)
			;
		if (w->bg_stop)
			break;
		wal_sync_written_locked(w);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}
