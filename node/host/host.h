/*
 * host.h — the one object that owns a node's threads: the libev loop and two bounded
 * executors. The foreground executor runs client work (appends, gets, scans); the
 * background executor runs seals, merges, compactions and deletes, so a long merge
 * never queues in front of an append (Tarantool vinyl keeps its dump and compaction
 * threads apart the same way). strata_open, `strata serve` and `strata load
 * --embedded` each create a host and hand it down; nothing below the host starts a
 * thread or keeps a pointer up to it.
 *
 * Modes:
 *   HOST_THREADED  worker threads run the executors; the loop runs either on a thread
 *                  of the host's own (loop_thread) or on the caller's (serve).
 *   HOST_INLINE    zero threads: work runs only inside host_step, on the caller's
 *                  thread (a simulation frame decides when background work runs).
 *
 * The host's threads block the process-wide control signals (SIGTERM, SIGINT, SIGHUP,
 * SIGQUIT, SIGUSR1/2, SIGCHLD, SIGALRM), so those are delivered to the embedder's threads.
 *
 * A program that must keep one loop free of another's work runs two hosts: `strata
 * serve` serves HTTP on one (its own loop, the foreground executor) and runs the policy
 * runtime on a second with a loop thread (the runtime's timers and hooks, the
 * background executor), and the two hand each other work with host_post, never
 * waiting for each other.
 */
#ifndef STRATA_HOST_H
#define STRATA_HOST_H

#include <ev.h>
#include <stdint.h>

#include "../lib/pool.h"

struct host;

/** How a host runs its work. */
enum { HOST_THREADED = 0, HOST_INLINE = 1 };

/** The executors. */
enum { HOST_FG = 0, HOST_BG = 1, HOST_NEXEC = 2 };

/** How to create a host. Zero fields take the defaults given. */
struct host_options {
	/** HOST_THREADED or HOST_INLINE. */
	int mode;
	/** The loop to use (NULL: the host creates and owns one). */
	struct ev_loop *loop;
	/** HOST_THREADED: run the loop on a thread of the host's (else the caller runs it). */
	int loop_thread;
	/** Worker threads of the foreground and background executors (default 2 and 2). */
	unsigned threads[HOST_NEXEC];
	/** Jobs that may wait in each executor's queue (default 4096). */
	unsigned max_queued[HOST_NEXEC];
};

/** Counters of one executor. */
struct host_exec_stats {
	/** Jobs queued or running. */
	unsigned pending;
	/** Jobs refused because the queue was full. */
	uint64_t refused;
	/** Worker threads (0 in inline mode). */
	unsigned threads;
};

/** Create a host. 0 or a STRATA_E* code with a message. */
int host_new(const struct host_options *o, struct host **out);
/** Stop the loop thread (if any), finish every queued job, stop the workers, free.
 *  Whatever runs on the host (runtime, server) must be stopped first. Safe on NULL. */
void host_delete(struct host *h);
/** HOST_THREADED or HOST_INLINE. */
int host_mode(const struct host *h);
/** The loop. */
struct ev_loop *host_loop(struct host *h);
/** An executor (HOST_FG or HOST_BG). */
struct pool *host_exec(struct host *h, int which);
/** Queue depth and refusals of an executor. */
void host_exec_stats(struct host *h, int which, struct host_exec_stats *out);
/** A call queued for a host's loop (host_post, host_invoke). The poster owns the storage;
 *  the host is done with a posted call once its fn starts, so fn may free the storage or
 *  post it again (to this host or another). Members are the host's. */
struct host_call {
	/** What to run. */
	void (*fn)(void *arg);
	/** Argument of fn. */
	void *arg;
	/** host_invoke waits for it: done is set once fn returned. */
	int wait;
	/** Set once fn returned (waited calls only). */
	int done;
	/** Next call in the queue. */
	struct host_call *next;
};

/** Run fn(arg) on the loop thread and wait for it (inline when called on it, when the
 *  host has no loop thread, or before the loop thread runs). */
void host_invoke(struct host *h, void (*fn)(void *arg), void *arg);
/** Queue fn(arg) to run on the thread that runs h's loop (its loop thread, or the caller
 *  running it) and return at once, never running it inline: how one loop hands work to
 *  another without waiting for it. Thread-safe; calls run in the order they were posted
 *  (with host_invoke's). c must stay valid until fn starts. Calls still queued when the
 *  loop stops run in host_delete or host_run_posted. */
void host_post(struct host *h, struct host_call *c, void (*fn)(void *arg), void *arg);
/** Run the calls posted so far (and those they post to h) on the calling thread, which
 *  runs the loop or the loop is stopped: how a component that stops collects the answers
 *  already handed to it. The number of calls run. */
unsigned host_run_posted(struct host *h);
/** 1 when the calling thread is the loop's thread (or the host has no loop thread). */
int host_on_loop(struct host *h);
/** Wait for one job of an executor to finish (inline: run one) and run the completions
 *  due, on the calling thread (the loop's, or the loop is stopped): how a component that
 *  stops waits out its own jobs. 1 if a job completed, 0 if none was pending. */
int host_drain(struct host *h, int which);
/** Work meter: bytes of background IO that cost one microsecond of a step's budget. */
#define HOST_WORK_BYTES_PER_US 1024u

/** What one host_step did. */
struct host_step_info {
	/** Chunks of background work run (a job's chunk: lib/fiber.h). */
	unsigned chunks;
	/** Loop turns (due timers, completions, posted calls). */
	unsigned turns;
	/** Budget spent, in microseconds of the step's meter. */
	uint64_t spent_us;
	/** The largest single chunk, in microseconds of the meter. */
	uint64_t max_chunk_us;
	/** A job waited for time to pass (a rate budget): only a later tick moves it. */
	int blocked;
};

/** HOST_INLINE: run due loop events, posted calls and chunks of queued jobs (background
 *  first) until budget_us is spent or nothing is due. The meter: with clock_ns, the time
 *  it reads; without (NULL), the work meter, which charges each loop turn 1 us and each
 *  chunk its reported bytes / HOST_WORK_BYTES_PER_US (at least 1 us), the same whatever
 *  the machine (a deterministic step). The budget is checked after each chunk, so a
 *  step overruns it by at most one chunk. out may be NULL. HOST_THREADED: STRATA_EINVAL. */
int host_step(struct host *h, uint64_t budget_us, uint64_t (*clock_ns)(void), struct host_step_info *out);

#endif
