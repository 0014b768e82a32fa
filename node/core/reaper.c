/*
 * reaper.c — paced, batched deletes of objects no manifest names any more.
 */
#include "reaper.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/fiber.h"
#include "../lib/mono.h"
#include "../lib/trace.h"

/** Most objects deleted in one batch (one directory sync). */
#define REAPER_BATCH 64u
/** What one delete (or one cut of a large object) costs in a step's work meter, bytes. */
#define REAPER_OP_COST 4096u

/** One object waiting. */
struct reaper_entry {
	/** Next, younger. */
	struct reaper_entry *next;
	/** Bytes still to free (shrinks as the object is cut down). */
	uint64_t left;
	/** Object key (NUL-terminated). */
	char key[];
};

struct reaper {
	/** The store deleted from. */
	struct objstore *os;
	/** Guards everything below. */
	pthread_mutex_t mu;
	/** Wakes a runner waiting for tokens when the rate changes. */
	pthread_cond_t rate_cv;
	/** Queue, oldest first. */
	struct reaper_entry *head, *tail;
	/** Objects and bytes queued. */
	uint64_t n, bytes;
	/** Deleted since the start. */
	uint64_t deleted, deleted_bytes;
	/** Rate in bytes per second (0 = unlimited) and the step of a large object. */
	uint64_t rate, chunk;
	/** Token bucket: bytes that may be freed now (below zero: freed ahead of the rate,
	 *  by an object larger than the bucket), and when it was last filled. The bucket
	 *  holds one chunk: deletes start paced, with no burst of a second's worth. */
	double tokens;
	uint64_t filled_ns;
	/** A reaper_run is going on. */
	int running;
	/** Told when the queue goes from empty to pending. */
	reaper_kick_fn kick;
	void *kick_ctx;
	/** Kicks being called now (reaper_set_kick waits them out). */
	int kicking;
	/** Where delete batches are traced (NULL: nowhere). */
	struct trace *trace;
};

int
reaper_new(struct objstore *os, uint64_t bytes_per_s, uint64_t chunk_bytes, struct reaper **out)
{
	struct reaper *r = env.calloc(1, sizeof(*r));
	if (r == NULL)
		return diag_set(STRATA_ENOMEM, "reaper: out of memory");
	r->os = os;
	r->rate = bytes_per_s;
	r->chunk = chunk_bytes ? chunk_bytes : REAPER_CHUNK_DEFAULT;
	r->tokens = (double)r->chunk;
	r->filled_ns = env.mono_ns();
	pthread_mutex_init(&r->mu, NULL);
	mono_cond_init(&r->rate_cv);
	*out = r;
	return 0;
}

void
reaper_set_trace(struct reaper *r, struct trace *t)
{
	r->trace = t;
}

void
reaper_add(struct reaper *r, const char *key, uint64_t bytes)
{
	size_t kl = strlen(key);
	struct reaper_entry *e = env.malloc(sizeof(*e) + kl + 1);
	if (e == NULL) {
		diag_log(LOG_LVL_WARN, "reaper: out of memory queueing %s: the next open's orphan "
			 "collection deletes it", key);
		return;
	}
	memcpy(e->key, key, kl + 1);
	e->left = bytes;
	e->next = NULL;
	pthread_mutex_lock(&r->mu);
	int was_empty = r->n == 0;
	if (r->tail != NULL)
		r->tail->next = e;
	else
		r->head = e;
	r->tail = e;
	r->n++;
	r->bytes += bytes;
	reaper_kick_fn kick = was_empty ? r->kick : NULL;
	void *ctx = r->kick_ctx;
	if (kick != NULL)
		r->kicking++;
	pthread_mutex_unlock(&r->mu);
	if (kick != NULL) {
		kick(ctx);
		pthread_mutex_lock(&r->mu);
		r->kicking--;
		pthread_mutex_unlock(&r->mu);
	}
}

void
reaper_set_kick(struct reaper *r, reaper_kick_fn fn, void *ctx)
{
	pthread_mutex_lock(&r->mu);
	r->kick = fn;
	r->kick_ctx = ctx;
	int pending = r->n > 0;
	/* The previous kick's owner may go away once this returns: wait out its calls. */
	while (r->kicking > 0) {
		pthread_mutex_unlock(&r->mu);
		sched_yield();
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	if (fn != NULL && pending)
		fn(ctx);
}

void
reaper_set_rate(struct reaper *r, uint64_t bytes_per_s)
{
	pthread_mutex_lock(&r->mu);
	r->rate = bytes_per_s;
	pthread_cond_broadcast(&r->rate_cv); /* a runner waiting at the old rate recounts */
	pthread_mutex_unlock(&r->mu);
}

/** mu held: add the tokens earned since the last fill (at most one chunk's worth). */
static void
reaper_fill(struct reaper *r)
{
	uint64_t now = env.mono_ns();
	if (r->rate == 0) {
		r->filled_ns = now;
		return;
	}
	double cap = (double)r->chunk;
	r->tokens += (double)(now - r->filled_ns) * (double)r->rate / 1e9;
	if (r->tokens > cap)
		r->tokens = cap;
	r->filled_ns = now;
}

/** mu held: wait up to ns for tokens; a change of the rate ends the wait early. 0, or
 *  -1 when waiting is pointless: the clock is a manual one that did not move (only the
 *  caller's thread ticks it) or a forced fiber run. On a fiber the wait is a blocked
 *  chunk: the step returns and a later tick resumes it. */
static int
reaper_sleep(struct reaper *r, uint64_t ns)
{
	if (fiber_active()) {
		pthread_mutex_unlock(&r->mu);
		int rc = fiber_block();
		pthread_mutex_lock(&r->mu);
		return rc;
	}
	uint64_t before = env.mono_ns();
	uint64_t rate = r->rate;
	struct timespec dl = mono_deadline(ns);
	while (r->rate == rate && pthread_cond_timedwait(&r->rate_cv, &r->mu, &dl) != ETIMEDOUT)
		;
	if (r->rate != rate)
		return 0;
	return env.mono_ns() == before ? -1 : 0;
}

uint64_t
reaper_run(struct reaper *r, uint64_t max_wait_ns)
{
	uint64_t waited = 0;
	pthread_mutex_lock(&r->mu);
	if (r->running) {
		uint64_t n = r->n;
		pthread_mutex_unlock(&r->mu);
		return n;
	}
	r->running = 1;
	for (;;) {
		reaper_fill(r);
		struct reaper_entry *e = r->head;
		if (e == NULL)
			break;
		/* A large object is cut down a chunk at a time; the rest go in batches. */
		int shrink = r->os->ops->shrink != NULL && e->left > r->chunk;
		uint64_t cost = shrink ? r->chunk : e->left;
		/* An object larger than the bucket (a store that cannot cut one down) goes once
		 * the bucket is full, and the debt it leaves delays what follows. */
		uint64_t want = cost < r->chunk ? cost : r->chunk;
		if (r->rate != 0 && r->tokens < (double)want) {
			uint64_t need = (uint64_t)(((double)want - r->tokens) * 1e9 / (double)r->rate) + 1;
			if (waited >= max_wait_ns)
				break;
			if (need > max_wait_ns - waited)
				need = max_wait_ns - waited;
			int slept = reaper_sleep(r, need);
			waited += need;
			if (slept != 0)
				break; /* the time this needs will not come on this call */
			continue;
		}
		if (shrink) {
			e->left -= r->chunk;
			if (r->rate != 0)
				r->tokens -= (double)r->chunk;
			r->bytes -= r->chunk;
			r->deleted_bytes += r->chunk;
			uint64_t size = e->left;
			pthread_mutex_unlock(&r->mu);
			/* Only this runner removes entries: e stays valid. */
			if (r->os->ops->shrink(r->os, e->key, size) != 0)
				diag_log(LOG_LVL_WARN, "reaper: %s", diag_last());
			fiber_yield(REAPER_OP_COST);
			pthread_mutex_lock(&r->mu);
			continue;
		}
		/* A batch of whole deletes within the tokens. */
		struct reaper_entry *batch = NULL, **tailp = &batch;
		const char *keys[REAPER_BATCH];
		size_t nk = 0;
		uint64_t freed = 0;
		while (r->head != NULL && nk < REAPER_BATCH) {
			struct reaper_entry *h = r->head;
			if (nk > 0 && ((r->os->ops->shrink != NULL && h->left > r->chunk) ||
				       (r->rate != 0 && r->tokens < (double)(freed + h->left))))
				break;
			r->head = h->next;
			if (r->head == NULL)
				r->tail = NULL;
			h->next = NULL;
			*tailp = h;
			tailp = &h->next;
			keys[nk++] = h->key;
			freed += h->left;
		}
		r->n -= nk;
		r->bytes -= freed;
		if (r->rate != 0)
			r->tokens -= (double)freed;
		pthread_mutex_unlock(&r->mu);
		if (r->trace != NULL) {
			uint64_t kh = 0;
			for (size_t i = 0; i < nk; i++)
				for (const char *c = keys[i]; *c; c++)
					kh = trace_mix(kh ^ (uint8_t)*c);
			TRACE(r->trace, DELETE, nk, kh);
		}
		if (objstore_del_batch(r->os, keys, nk) != 0)
			diag_log(LOG_LVL_WARN, "reaper: deleting %zu merged objects: %s (the orphan "
				 "collection of the next open retries)", nk, diag_last());
		while (batch != NULL) {
			struct reaper_entry *next = batch->next;
			env.free(batch);
			batch = next;
		}
		fiber_yield(nk * REAPER_OP_COST); /* a batch is a chunk (inline mode) */
		pthread_mutex_lock(&r->mu);
		r->deleted += nk;
		r->deleted_bytes += freed;
	}
	r->running = 0;
	uint64_t n = r->n;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void
reaper_stats(struct reaper *r, uint64_t *pending, uint64_t *pending_bytes, uint64_t *deleted,
	     uint64_t *deleted_bytes)
{
	pthread_mutex_lock(&r->mu);
	if (pending)
		*pending = r->n;
	if (pending_bytes)
		*pending_bytes = r->bytes;
	if (deleted)
		*deleted = r->deleted;
	if (deleted_bytes)
		*deleted_bytes = r->deleted_bytes;
	pthread_mutex_unlock(&r->mu);
}

void
reaper_delete(struct reaper *r)
{
	if (r == NULL)
		return;
	reaper_set_rate(r, 0);
	reaper_run(r, 0);
	pthread_cond_destroy(&r->rate_cv);
	pthread_mutex_destroy(&r->mu);
	env.free(r);
}
