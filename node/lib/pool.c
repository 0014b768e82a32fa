/*
 * pool.c — a bounded worker pool whose completions return to a libev loop.
 *
 * Jobs wait in a FIFO (at most max_queued waiting); a worker runs work() and
 * moves the job to the done list, then wakes the loop with ev_async_send; the
 * loop-side async callback runs every done() in completion order. A job counts
 * as pending from pool_submit until its done() has returned. A pool of zero threads
 * runs nothing by itself: its owner runs queued jobs with pool_run_one (whole) or
 * pool_run_chunk (on a fiber, one chunk at a time: inline mode).
 */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>

#include "diag.h"
#include "env.h"
#include "fiber.h"

/** One queued, running or completed job. */
struct pool_job {
	/** Runs on a worker thread. */
	pool_work_fn work;
	/** Runs on the loop thread afterwards. */
	pool_done_fn done;
	/** Passed to both. */
	void *arg;
	/** Next in the wait queue or the done list. */
	struct pool_job *next;
};

struct pool {
	/** The loop done() callbacks run on. */
	struct ev_loop *loop;
	/** Wakes the loop when jobs complete. */
	ev_async wake;
	/** Guards every field below it. */
	pthread_mutex_t mu;
	/** Signalled when a job is queued or the pool stops. */
	pthread_cond_t cv;
	/** Signalled when a worker finished a job. */
	pthread_cond_t done_cv;
	/** Jobs waiting for a worker, oldest first. */
	struct pool_job *head, *tail;
	/** Completed jobs waiting for done(), oldest first. */
	struct pool_job *done_head, *done_tail;
	/** Jobs waiting in the queue. */
	unsigned queued;
	/** Bound of queued. */
	unsigned max_queued;
	/** Set by pool_delete: workers drain the queue and exit; submit refuses. */
	int stopping;
	/** Jobs submitted whose done() has not returned yet. */
	atomic_uint pending;
	/** Jobs refused because the queue was full. */
	atomic_uint_fast64_t refused;
	/** Worker threads. */
	pthread_t *threads;
	/** Number of started worker threads. */
	unsigned nthreads;
	/** The environment of the thread that created the pool; its workers run in it. */
	struct env_ops *env_ops;
	/** Without threads: the fiber pool_run_chunk runs jobs on (created on first use). */
	struct fiber *fib;
	/** The job started on fib and not yet completed. */
	struct pool_job *fib_job;
};

static void *
pool_worker(void *arg)
{
	struct pool *p = arg;
	env_enter(p->env_ops);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->head == NULL && !p->stopping)
			pthread_cond_wait(&p->cv, &p->mu);
		struct pool_job *j = p->head;
		if (j == NULL)
			break; /* stopping and drained */
		p->head = j->next;
		if (p->head == NULL)
			p->tail = NULL;
		p->queued--;
		pthread_mutex_unlock(&p->mu);
		j->work(j->arg);
		j->next = NULL;
		pthread_mutex_lock(&p->mu);
		if (p->done_tail != NULL)
			p->done_tail->next = j;
		else
			p->done_head = j;
		p->done_tail = j;
		pthread_cond_broadcast(&p->done_cv);
		if (!p->stopping)
			ev_async_send(p->loop, &p->wake);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/** Run every completed job's done() on the calling (loop) thread. */
static void
pool_deliver(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	struct pool_job *j = p->done_head;
	p->done_head = p->done_tail = NULL;
	pthread_mutex_unlock(&p->mu);
	while (j != NULL) {
		struct pool_job *next = j->next;
		if (j->done != NULL)
			j->done(j->arg);
		env.free(j);
		atomic_fetch_sub(&p->pending, 1);
		j = next;
	}
}

static void
pool_wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	pool_deliver(w->data);
}

int
pool_new(struct ev_loop *loop, unsigned threads, unsigned max_queued, struct pool **out)
{
	*out = NULL;
	if (loop == NULL || threads > 1024)
		return diag_set(STRATA_EINVAL, "pool: a loop and 0..1024 threads are required (got %u)",
				threads);
	struct pool *p = env.calloc(1, sizeof(*p));
	if (p == NULL)
		return diag_set(STRATA_ENOMEM, "pool: out of memory");
	p->threads = env.calloc(threads ? threads : 1, sizeof(*p->threads));
	if (p->threads == NULL) {
		env.free(p);
		return diag_set(STRATA_ENOMEM, "pool: out of memory");
	}
	p->loop = loop;
	p->env_ops = env_tls;
	p->max_queued = max_queued ? max_queued : 4096;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	ev_async_init(&p->wake, pool_wake_cb);
	p->wake.data = p;
	ev_async_start(loop, &p->wake);
	for (unsigned i = 0; i < threads; i++) {
		int err = pthread_create(&p->threads[i], NULL, pool_worker, p);
		if (err != 0) {
			pool_delete(p);
			return diag_set(STRATA_ENOMEM, "pool: cannot start worker thread %u: error %d", i,
					err);
		}
		p->nthreads++;
	}
	*out = p;
	return 0;
}

int
pool_submit(struct pool *p, pool_work_fn work, pool_done_fn done, void *arg)
{
	if (p == NULL || work == NULL)
		return diag_set(STRATA_EINVAL, "pool_submit: a pool and a work function are required");
	struct pool_job *j = env.malloc(sizeof(*j));
	if (j == NULL)
		return diag_set(STRATA_ENOMEM, "pool: out of memory queueing a job");
	j->work = work;
	j->done = done;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->stopping) {
		pthread_mutex_unlock(&p->mu);
		env.free(j);
		return diag_set(STRATA_ECLOSED, "pool: shutting down, job refused");
	}
	if (p->queued >= p->max_queued) {
		pthread_mutex_unlock(&p->mu);
		env.free(j);
		atomic_fetch_add(&p->refused, 1);
		return diag_set(STRATA_EBUSY, "pool: queue full (%u jobs waiting)", p->max_queued);
	}
	if (p->tail != NULL)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	p->queued++;
	atomic_fetch_add(&p->pending, 1);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/** Pop the oldest queued job, or NULL. */
static struct pool_job *
pool_pop(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	struct pool_job *j = p->head;
	if (j != NULL) {
		p->head = j->next;
		if (p->head == NULL)
			p->tail = NULL;
		p->queued--;
	}
	pthread_mutex_unlock(&p->mu);
	return j;
}

/** A job's work returned on the calling thread: run done() and free it. */
static void
pool_complete(struct pool *p, struct pool_job *j)
{
	if (j->done != NULL)
		j->done(j->arg);
	env.free(j);
	atomic_fetch_sub(&p->pending, 1);
}

/** Finish the job on the fiber, if any (forced: it waits for nothing). 1 if there was one. */
static int
pool_finish_fiber_job(struct pool *p)
{
	struct pool_job *j = p->fib_job;
	if (j == NULL)
		return 0;
	fiber_finish(p->fib);
	p->fib_job = NULL;
	pool_complete(p, j);
	return 1;
}

int
pool_run_one(struct pool *p)
{
	if (pool_finish_fiber_job(p))
		return 1;
	struct pool_job *j = pool_pop(p);
	if (j == NULL)
		return 0;
	j->work(j->arg);
	pool_complete(p, j);
	return 1;
}

int
pool_run_chunk(struct pool *p, uint64_t *cost)
{
	*cost = 0;
	struct pool_job *j = p->fib_job;
	int st;
	if (j != NULL) {
		/* A forced run (a caller that needed the lock it held) may have finished it. */
		st = fiber_busy(p->fib) ? fiber_resume(p->fib) : FIBER_DONE;
	} else {
		if ((j = pool_pop(p)) == NULL)
			return POOL_IDLE;
		if (p->fib == NULL && fiber_new(0, &p->fib) != 0) {
			diag_log(LOG_LVL_WARN, "pool: no fiber (%s): running a job whole", diag_last());
			j->work(j->arg);
			pool_complete(p, j);
			return POOL_RAN;
		}
		p->fib_job = j;
		st = fiber_start(p->fib, j->work, j->arg);
	}
	*cost = fiber_last_cost(p->fib);
	if (st == FIBER_DONE) {
		p->fib_job = NULL;
		pool_complete(p, j);
	}
	return st == FIBER_BLOCKED ? POOL_BLOCKED : POOL_RAN;
}

int
pool_wait_one(struct pool *p)
{
	if (p->nthreads == 0)
		return pool_run_one(p);
	pthread_mutex_lock(&p->mu);
	while (p->done_head == NULL && atomic_load(&p->pending) > 0)
		pthread_cond_wait(&p->done_cv, &p->mu);
	int any = p->done_head != NULL;
	pthread_mutex_unlock(&p->mu);
	pool_deliver(p);
	return any;
}

unsigned
pool_threads(const struct pool *p)
{
	return p ? p->nthreads : 0;
}

unsigned
pool_pending(struct pool *p)
{
	return p ? atomic_load(&p->pending) : 0;
}

uint64_t
pool_refused(struct pool *p)
{
	return p ? atomic_load(&p->refused) : 0;
}

void
pool_delete(struct pool *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	/* Workers drained the queue before exiting; deliver what they finished. Without
	 * workers, the queue is run here. */
	pool_deliver(p);
	while (pool_run_one(p))
		;
	fiber_delete(p->fib);
	ev_async_stop(p->loop, &p->wake);
	pthread_cond_destroy(&p->cv);
	pthread_cond_destroy(&p->done_cv);
	pthread_mutex_destroy(&p->mu);
	env.free(p->threads);
	env.free(p);
}
