/*
 * fiber.h — cooperative execution contexts on one thread: how inline mode cuts a
 * background job (a seal's flush, a merge) into chunks that a bounded step runs one at
 * a time, without turning the engine's code inside out.
 *
 * A job started on a fiber runs on the fiber's own stack until it calls fiber_yield
 * (a chunk boundary: the engine calls it after each block it writes) or fiber_block
 * (it waits for time to pass: a rate budget), or returns. Outside a fiber (threaded
 * mode, or a caller's own synchronous call) both are no-ops, so the same engine code
 * serves both modes. A fiber only ever runs on the thread that resumes it, and every
 * switch is explicit: no preemption, no concurrency between fibers.
 *
 * Locks. A fiber may be suspended while it holds a mutex (a flush holds its shard's
 * seal mutex across its blocks). fiber_mutex_lock is how code that may run while such
 * a fiber is suspended takes that mutex: on a fiber it yields until the mutex is free;
 * outside one it resumes the calling thread's suspended fibers until it is ("forced"
 * runs, in which fiber_block returns at once instead of waiting).
 *
 * Stacks are mmap'd with a guard page below them. The sanitizers (ASan, TSan) are told
 * about every switch.
 */
#ifndef STRATA_FIBER_H
#define STRATA_FIBER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct fiber;

/** What a run of a fiber ended in. */
enum {
	FIBER_DONE = 0,    /**< the job returned; the fiber can start another */
	FIBER_YIELDED = 1, /**< the job reached a chunk boundary; resume it for more */
	FIBER_BLOCKED = 2, /**< the job waits for time to pass; resume it after a tick */
};

/** What a chunk that ends in file syncs (a run's end, a manifest update) reports, in the
 *  work meter's units (bytes): a sync costs about as much as writing 64 KiB. */
#define FIBER_SYNC_COST (64u << 10)

/** Default stack size of a fiber. */
#define FIBER_STACK_BYTES (1u << 20)

/** Create an idle fiber with a stack of stack_bytes (0: FIBER_STACK_BYTES). 0 or a
 *  STRATA_E* code with a message. */
int fiber_new(size_t stack_bytes, struct fiber **out);
/** Free an idle (or finished) fiber. A suspended fiber's job is lost: finish it first.
 *  Safe on NULL. */
void fiber_delete(struct fiber *f);
/** Start fn(arg) on an idle fiber and run it until it yields, blocks or returns. */
int fiber_start(struct fiber *f, void (*fn)(void *arg), void *arg);
/** Run a suspended fiber until it yields, blocks or returns (FIBER_DONE at once for an
 *  idle one). */
int fiber_resume(struct fiber *f);
/** Run a started job to its end in a forced run (its yields and blocks return at once):
 *  how a component that stops, or a caller that needs the whole job, finishes it. */
void fiber_finish(struct fiber *f);
/** 1 while a job is started and has not returned. */
int fiber_busy(const struct fiber *f);
/** The work the last run reported through fiber_yield, in the caller's units (bytes). */
uint64_t fiber_last_cost(const struct fiber *f);

/** On a fiber: end this chunk, reporting cost units of work done in it, and return to
 *  the resumer. Outside a fiber: nothing. */
void fiber_yield(uint64_t cost);
/** On a fiber: return to the resumer reporting FIBER_BLOCKED (waiting for time) and
 *  return 0 when resumed. Outside a fiber, or in a forced run: return -1 at once (the
 *  caller must not wait on a clock only its own thread can move). */
int fiber_block(void);
/** 1 when the caller runs on a fiber. */
int fiber_active(void);
/** Take m, letting suspended fibers of this thread run while it is held (see above). */
void fiber_mutex_lock(pthread_mutex_t *m);

#endif
