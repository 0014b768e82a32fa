/*
 * pool.h — a bounded worker pool whose completions return to a libev loop.
 * work() runs on a worker thread; done() runs later on the loop thread (woken
 * through ev_async). The queue is bounded: a full pool refuses new work.
 */
#ifndef STRATA_POOL_H
#define STRATA_POOL_H

#include <ev.h>
#include <stdint.h>

struct pool;

/** Work run on a worker thread. */
typedef void (*pool_work_fn)(void *arg);
/** Completion run on the loop thread after work() returned. */
typedef void (*pool_done_fn)(void *arg);

/** Start threads workers serving loop; at most max_queued jobs wait (0 = 4096). With
 *  threads = 0 nothing runs until pool_run_one is called (inline mode). */
int pool_new(struct ev_loop *loop, unsigned threads, unsigned max_queued, struct pool **out);
/** Run the oldest queued job, work then done, on the calling thread (first the one
 *  pool_run_chunk left unfinished, to its end). 1 if one ran, 0 if the queue was empty.
 *  Meant for pools without threads. */
int pool_run_one(struct pool *p);
/** What pool_run_chunk did. */
enum { POOL_IDLE = 0, POOL_RAN = 1, POOL_BLOCKED = 2 };
/** Without threads: run one chunk of the oldest job on the pool's fiber (start it, or
 *  resume the one a previous call left at a chunk boundary; lib/fiber.h) and, when the
 *  job's work returns, its done. POOL_RAN (*cost = the units the chunk reported),
 *  POOL_BLOCKED (the job waits for time to pass; nothing ran), POOL_IDLE (no job). */
int pool_run_chunk(struct pool *p, uint64_t *cost);
/** Wait until a job finishes (without threads: run the oldest queued job) and run the
 *  completions that are due on the calling thread, which must be the loop's or the
 *  loop must be stopped. 1 if a job completed, 0 if none was pending. */
int pool_wait_one(struct pool *p);
/** Worker threads of the pool (0 in inline mode). */
unsigned pool_threads(const struct pool *p);
/** Queue a job. STRATA_EBUSY (with a message) when the queue is full. Thread-safe. */
int pool_submit(struct pool *p, pool_work_fn work, pool_done_fn done, void *arg);
/** Jobs queued or running. */
unsigned pool_pending(struct pool *p);
/** Jobs refused because the queue was full. */
uint64_t pool_refused(struct pool *p);
/** Finish every queued job (running their done callbacks on the calling thread, which
 *  must be the loop thread or the loop must be stopped), stop the threads, free. */
void pool_delete(struct pool *p);

#endif
