/*
 * host.c — the loop, its optional thread, the foreground and background executors,
 * calls onto the loop thread (waited for, or posted), and the inline step.
 */
#include "host.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"

/** Threads of each executor when the options say 0. */
#define HOST_DEFAULT_THREADS 2u

struct host {
	/** HOST_THREADED or HOST_INLINE. */
	int mode;
	/** The loop. */
	struct ev_loop *loop;
	/** The host created the loop and destroys it. */
	int own_loop;
	/** The executors, HOST_FG and HOST_BG. */
	struct pool *exec[HOST_NEXEC];
	/** The loop runs on thread (loop_thread set). */
	int has_thread;
	/** The loop thread. */
	pthread_t thread;
	/** Wakes the loop thread to run calls or to stop. */
	ev_async wake;
	/** Guards calls, stop and running. */
	pthread_mutex_t mu;
	/** Signalled when a call ran or the loop thread started. */
	pthread_cond_t cv;
	/** Calls waiting for the loop thread. */
	struct host_call *calls;
	/** Asks the loop thread to return. */
	int stop;
	/** Set once the loop thread runs its loop. */
	int running;
	/** The environment of the thread that created the host; its threads run in it. */
	struct env_ops *env_ops;
};

/** Loop thread: run the waiting calls, in the order they came. The number run. */
static unsigned
host_run_calls(struct host *h)
{
	pthread_mutex_lock(&h->mu);
	struct host_call *list = h->calls, *rev = NULL;
	h->calls = NULL;
	pthread_mutex_unlock(&h->mu);
	while (list != NULL) {
		struct host_call *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	unsigned ran = 0;
	while (rev != NULL) {
		/* A posted call may be freed or posted again by its fn: read it first. */
		struct host_call *next = rev->next;
		int wait = rev->wait;
		rev->fn(rev->arg);
		ran++;
		if (wait) {
			pthread_mutex_lock(&h->mu);
			rev->done = 1;
			pthread_cond_broadcast(&h->cv);
			pthread_mutex_unlock(&h->mu);
		}
		rev = next;
	}
	return ran;
}

static void
host_wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)revents;
	struct host *h = w->data;
	host_run_calls(h);
	pthread_mutex_lock(&h->mu);
	int stop = h->stop;
	pthread_mutex_unlock(&h->mu);
	if (stop)
		ev_break(loop, EVBREAK_ALL);
}

static void *
host_main(void *arg)
{
	struct host *h = arg;
	env_enter(h->env_ops);
	pthread_mutex_lock(&h->mu);
	h->running = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	ev_run(h->loop, 0);
	/* Calls that came while it stopped still get to run. */
	while (host_run_calls(h) > 0)
		;
	return NULL;
}

int
host_new(const struct host_options *o, struct host **out)
{
	*out = NULL;
	struct host_options d;
	memset(&d, 0, sizeof(d));
	if (o == NULL)
		o = &d;
	if (o->mode != HOST_THREADED && o->mode != HOST_INLINE)
		return diag_set(STRATA_EINVAL, "host: unknown mode %d", o->mode);
	if (o->mode == HOST_INLINE && o->loop_thread)
		return diag_set(STRATA_EINVAL, "host: an inline host has no threads, so no loop thread");
	struct host *h = env.calloc(1, sizeof(*h));
	if (h == NULL)
		return diag_set(STRATA_ENOMEM, "host: out of memory");
	h->mode = o->mode;
	h->env_ops = env_tls;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->loop = o->loop;
	if (h->loop == NULL) {
		h->loop = ev_loop_new(EVFLAG_AUTO);
		h->own_loop = 1;
	}
	int rc = h->loop ? 0 : diag_set(STRATA_ENOMEM, "host: cannot create an event loop");
	/* The threads started here inherit a mask without the process-wide control signals,
	 * so those reach the embedder's threads (serve's main loop, which watches them) and
	 * never a worker or the runtime's loop thread, which may be busy in a hook. */
	sigset_t quiet, prev_mask;
	sigemptyset(&quiet);
	static const int control[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM};
	for (size_t i = 0; i < sizeof(control) / sizeof(control[0]); i++)
		sigaddset(&quiet, control[i]);
	pthread_sigmask(SIG_BLOCK, &quiet, &prev_mask);
	for (int i = 0; rc == 0 && i < HOST_NEXEC; i++) {
		unsigned threads = o->mode == HOST_INLINE ? 0
				   : o->threads[i] ? o->threads[i]
						   : HOST_DEFAULT_THREADS;
		rc = pool_new(h->loop, threads, o->max_queued[i], &h->exec[i]);
	}
	if (rc == 0) {
		ev_async_init(&h->wake, host_wake_cb);
		h->wake.data = h;
		ev_async_start(h->loop, &h->wake);
	}
	if (rc == 0 && o->loop_thread) {
		int err = pthread_create(&h->thread, NULL, host_main, h);
		if (err != 0) {
			rc = diag_set(STRATA_ENOMEM, "host: cannot start the loop thread: error %d", err);
		} else {
			h->has_thread = 1;
			pthread_mutex_lock(&h->mu);
			while (!h->running)
				pthread_cond_wait(&h->cv, &h->mu);
			pthread_mutex_unlock(&h->mu);
		}
	}
	pthread_sigmask(SIG_SETMASK, &prev_mask, NULL);
	if (rc) {
		host_delete(h);
		return rc;
	}
	*out = h;
	return 0;
}

void
host_delete(struct host *h)
{
	if (h == NULL)
		return;
	if (h->has_thread) {
		pthread_mutex_lock(&h->mu);
		h->stop = 1;
		pthread_mutex_unlock(&h->mu);
		ev_async_send(h->loop, &h->wake);
		pthread_join(h->thread, NULL);
		h->has_thread = 0;
	}
	/* Finished jobs deliver their completions here, on the only thread left, and so do
	 * calls posted after the loop stopped (before and after: either may queue the other). */
	host_run_posted(h);
	for (int i = HOST_NEXEC; i-- > 0;)
		pool_delete(h->exec[i]);
	host_run_posted(h);
	if (h->loop != NULL) {
		ev_async_stop(h->loop, &h->wake);
		if (h->own_loop)
			ev_loop_destroy(h->loop);
	}
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	env.free(h);
}

int
host_mode(const struct host *h)
{
	return h->mode;
}

struct ev_loop *
host_loop(struct host *h)
{
	return h->loop;
}

struct pool *
host_exec(struct host *h, int which)
{
	return which >= 0 && which < HOST_NEXEC ? h->exec[which] : NULL;
}

void
host_exec_stats(struct host *h, int which, struct host_exec_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct pool *p = host_exec(h, which);
	if (p == NULL)
		return;
	out->pending = pool_pending(p);
	out->refused = pool_refused(p);
	out->threads = pool_threads(p);
}

int
host_on_loop(struct host *h)
{
	return !h->has_thread || pthread_equal(pthread_self(), h->thread);
}

void
host_invoke(struct host *h, void (*fn)(void *arg), void *arg)
{
	if (host_on_loop(h)) {
		fn(arg);
		return;
	}
	struct host_call c = {.fn = fn, .arg = arg, .wait = 1};
	pthread_mutex_lock(&h->mu);
	c.next = h->calls;
	h->calls = &c;
	pthread_mutex_unlock(&h->mu);
	ev_async_send(h->loop, &h->wake);
	pthread_mutex_lock(&h->mu);
	while (!c.done)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
}

void
host_post(struct host *h, struct host_call *c, void (*fn)(void *arg), void *arg)
{
	c->fn = fn;
	c->arg = arg;
	c->wait = 0;
	c->done = 0;
	pthread_mutex_lock(&h->mu);
	c->next = h->calls;
	h->calls = c;
	pthread_mutex_unlock(&h->mu);
	ev_async_send(h->loop, &h->wake);
}

unsigned
host_run_posted(struct host *h)
{
	unsigned total = 0, ran;
	while ((ran = host_run_calls(h)) > 0)
		total += ran;
	return total;
}

int
host_drain(struct host *h, int which)
{
	struct pool *p = host_exec(h, which);
	return p != NULL ? pool_wait_one(p) : 0;
}

int
host_step(struct host *h, uint64_t budget_us, uint64_t (*clock_ns)(void), struct host_step_info *out)
{
	struct host_step_info info;
	memset(&info, 0, sizeof(info));
	if (out != NULL)
		*out = info;
	if (h->mode != HOST_INLINE)
		return diag_set(STRATA_EINVAL, "host_step: the host runs its own threads (not inline)");
	uint64_t t0 = clock_ns != NULL ? clock_ns() : 0;
	for (;;) {
		/* Due timers and completions first: they may queue more work. */
		uint64_t c0 = clock_ns != NULL ? clock_ns() : 0;
		ev_run(h->loop, EVRUN_NOWAIT);
		host_run_calls(h);
		info.turns++;
		uint64_t cost = 0;
		int st = pool_run_chunk(h->exec[HOST_BG], &cost);
		if (st != POOL_RAN) {
			info.blocked |= st == POOL_BLOCKED;
			st = pool_run_chunk(h->exec[HOST_FG], &cost);
			info.blocked |= st == POOL_BLOCKED;
		}
		int ran = st == POOL_RAN;
		uint64_t chunk_us;
		if (clock_ns != NULL) {
			uint64_t now = clock_ns();
			chunk_us = (now - c0) / 1000u;
			info.spent_us = (now - t0) / 1000u;
		} else {
			chunk_us = 1 + (ran ? (cost / HOST_WORK_BYTES_PER_US ? cost / HOST_WORK_BYTES_PER_US : 1) : 0);
			info.spent_us += chunk_us;
		}
		if (!ran)
			break;
		info.chunks++;
		if (chunk_us > info.max_chunk_us)
			info.max_chunk_us = chunk_us;
		if (info.spent_us >= budget_us)
			break;
	}
	if (out != NULL)
		*out = info;
	return 0;
}
