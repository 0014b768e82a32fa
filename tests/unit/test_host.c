/*
 * test_host.c — the node host: separate foreground and background executors, the
 * inline mode that runs work only when stepped, the step budget, calls onto the
 * loop thread (waited for, and posted from one loop to another), and draining an
 * executor.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../node/host/host.h"
#include "../../node/lib/fiber.h"
#include "../../node/lib/env.h"
#include "../../node/strata_types.h"
#include "harness.h"

/** A job that can be held until released, and what it saw. */
struct hjob {
	/** Hold the worker until released. */
	int hold;
	/** Busy-wait this long in work(), ns. */
	uint64_t spin_ns;
	/** Set by the test to let a held job go. */
	atomic_int release;
	/** work() started / finished; done() ran, and on which thread. */
	atomic_int started, worked, done;
	pthread_t done_on;
};

static void
hjob_work(void *arg)
{
	struct hjob *j = arg;
	atomic_store(&j->started, 1);
	while (j->hold && !atomic_load(&j->release))
		usleep(100);
	uint64_t t0 = env.mono_ns();
	while (env.mono_ns() - t0 < j->spin_ns)
		;
	atomic_store(&j->worked, 1);
}

static void
hjob_done(void *arg)
{
	struct hjob *j = arg;
	j->done_on = pthread_self();
	atomic_store(&j->done, 1);
}

/** Run the loop until cond or 5 s pass. */
#define LOOP_UNTIL(h, cond)                                                          \
	({                                                                           \
		uint64_t t0_ = env.mono_ns();                                        \
		while (!(cond) && env.mono_ns() - t0_ < 5000000000ull)               \
			ev_run(host_loop(h), EVRUN_NOWAIT), usleep(200);             \
		(cond);                                                              \
	})

TEST(foreground_never_waits_behind_background)
{
	struct host_options o = {.mode = HOST_THREADED};
	o.threads[HOST_FG] = 1;
	o.threads[HOST_BG] = 1;
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	/* The only background worker is taken by a long merge, and another waits. */
	struct hjob merge = {.hold = 1}, queued = {0}, append = {0};
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), hjob_work, hjob_done, &merge), 0);
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), hjob_work, hjob_done, &queued), 0);
	CHECK(LOOP_UNTIL(h, atomic_load(&merge.started)));
	/* A client job completes meanwhile. */
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_FG), hjob_work, hjob_done, &append), 0);
	CHECK(LOOP_UNTIL(h, atomic_load(&append.done)));
	CHECK_EQ(atomic_load(&queued.started), 0);
	struct host_exec_stats st;
	host_exec_stats(h, HOST_BG, &st);
	CHECK_EQ(st.pending, 2);
	CHECK_EQ(st.threads, 1);
	host_exec_stats(h, HOST_FG, &st);
	CHECK_EQ(st.pending, 0);
	atomic_store(&merge.release, 1);
	CHECK(LOOP_UNTIL(h, atomic_load(&queued.done)));
	host_delete(h);
}

TEST(inline_host_runs_work_only_when_stepped)
{
	struct host_options o = {.mode = HOST_INLINE};
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	CHECK_EQ(host_mode(h), HOST_INLINE);
	struct hjob a = {0}, b = {0};
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), hjob_work, hjob_done, &a), 0);
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_FG), hjob_work, hjob_done, &b), 0);
	usleep(20000);
	CHECK_EQ(atomic_load(&a.started) + atomic_load(&b.started), 0); /* no thread ran them */
	struct host_exec_stats st;
	host_exec_stats(h, HOST_BG, &st);
	CHECK_EQ(st.threads, 0);
	CHECK_EQ(st.pending, 1);
	struct host_step_info did;
	CHECK_EQ(host_step(h, 1000000, env.mono_ns, &did), 0);
	CHECK_EQ(did.chunks, 2);
	CHECK(atomic_load(&a.done) && atomic_load(&b.done));
	CHECK(pthread_equal(a.done_on, pthread_self()));
	/* Nothing due: a step returns at once. */
	uint64_t t0 = env.mono_ns();
	CHECK_EQ(host_step(h, 1000000, env.mono_ns, &did), 0);
	CHECK_EQ(did.chunks, 0);
	CHECK(env.mono_ns() - t0 < 100000000ull);
	host_delete(h);
}

TEST(step_stops_when_its_budget_is_spent)
{
	struct host_options o = {.mode = HOST_INLINE};
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	enum { N = 10 };
	static struct hjob jobs[N];
	for (int i = 0; i < N; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].spin_ns = 2000000; /* 2 ms each */
		REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), hjob_work, hjob_done, &jobs[i]), 0);
	}
	/* A 5 ms budget runs jobs until it is spent: the last one may overrun it (a job is
	 * the chunk), so 3 jobs, never all ten. */
	struct host_step_info did;
	CHECK_EQ(host_step(h, 5000, env.mono_ns, &did), 0);
	CHECK(did.chunks >= 1 && did.chunks <= 3);
	unsigned total = did.chunks;
	while (total < N) {
		CHECK_EQ(host_step(h, 5000, env.mono_ns, &did), 0);
		REQUIRE(did.chunks > 0);
		total += did.chunks;
	}
	CHECK_EQ(total, N);
	host_delete(h);
}

/** A job cut into chunks: it reports `chunks` chunks of `bytes` each through fiber_yield. */
struct chunky {
	/** In. */
	int chunks;
	uint64_t bytes;
	/** Chunks done so far, and whether done() ran. */
	int done_chunks;
	int finished;
};

static void
chunky_work(void *arg)
{
	struct chunky *c = arg;
	for (int i = 0; i < c->chunks; i++) {
		c->done_chunks++;
		fiber_yield(c->bytes);
	}
}

static void
chunky_done(void *arg)
{
	((struct chunky *)arg)->finished = 1;
}

TEST(a_chunked_job_advances_one_chunk_at_a_time_under_the_work_meter)
{
	struct host_options o = {.mode = HOST_INLINE};
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	/* 20 chunks of 64 KiB: 64 us each in the work meter, plus 1 us per loop turn. */
	struct chunky c = {.chunks = 20, .bytes = 64u << 10};
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), chunky_work, chunky_done, &c), 0);
	struct host_step_info info;
	CHECK_EQ(host_step(h, 200, NULL, &info), 0);
	/* 65 + 65 + 65 < 200 <= 65 * 4: the fourth chunk crosses the budget, then it stops. */
	CHECK_EQ(info.chunks, 4);
	CHECK_EQ(c.done_chunks, 4);
	CHECK_EQ(info.max_chunk_us, 65);
	CHECK(info.spent_us <= 200 + info.max_chunk_us);
	CHECK(!c.finished);
	/* The same budget again does the same amount of work: the meter is the work. */
	CHECK_EQ(host_step(h, 200, NULL, &info), 0);
	CHECK_EQ(c.done_chunks, 8);
	/* A whole drain finishes it (forced: its yields return at once). */
	CHECK_EQ(host_drain(h, HOST_BG), 1);
	CHECK_EQ(c.done_chunks, 20);
	CHECK(c.finished);
	CHECK_EQ(host_step(h, 200, NULL, &info), 0);
	CHECK_EQ(info.chunks, 0);
	host_delete(h);
}

/** A fiber job that holds a mutex across its chunks. */
struct holder {
	pthread_mutex_t *mu;
	int chunks_done;
};

static void
holder_work(void *arg)
{
	struct holder *x = arg;
	fiber_mutex_lock(x->mu);
	for (int i = 0; i < 3; i++) {
		x->chunks_done++;
		fiber_yield(1);
	}
	pthread_mutex_unlock(x->mu);
}

TEST(a_caller_that_needs_a_lock_a_suspended_chunk_holds_finishes_that_job)
{
	struct host_options o = {.mode = HOST_INLINE};
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct holder x = {.mu = &mu};
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), holder_work, NULL, &x), 0);
	struct host_step_info info;
	CHECK_EQ(host_step(h, 1, NULL, &info), 0); /* one chunk: the job holds mu, suspended */
	CHECK_EQ(x.chunks_done, 1);
	CHECK(pthread_mutex_trylock(&mu) != 0);
	/* Without the fiber runs this would deadlock the thread on itself. */
	fiber_mutex_lock(&mu);
	CHECK_EQ(x.chunks_done, 3);
	pthread_mutex_unlock(&mu);
	CHECK_EQ(host_step(h, 1000, NULL, &info), 0); /* collects the finished job */
	CHECK_EQ(pool_pending(host_exec(h, HOST_BG)), 0);
	host_delete(h);
}

/** What a call onto the loop saw. */
struct inv {
	/** Thread it ran on. */
	pthread_t ran_on;
	/** Calls made. */
	int calls;
};

static void
inv_fn(void *arg)
{
	struct inv *v = arg;
	v->ran_on = pthread_self();
	v->calls++;
}

TEST(invoke_runs_on_the_loop_thread)
{
	struct host_options o = {.mode = HOST_THREADED, .loop_thread = 1};
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	CHECK(!host_on_loop(h));
	struct inv v = {0};
	host_invoke(h, inv_fn, &v);
	CHECK_EQ(v.calls, 1);
	CHECK(!pthread_equal(v.ran_on, pthread_self()));
	/* A job's completion runs on the loop thread too. */
	struct hjob j = {0};
	REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), hjob_work, hjob_done, &j), 0);
	for (int i = 0; i < 5000 && !atomic_load(&j.done); i++)
		usleep(1000);
	CHECK(atomic_load(&j.done));
	CHECK(pthread_equal(j.done_on, v.ran_on));
	host_delete(h);
	/* Without a loop thread, invoke calls directly. */
	struct host_options o2 = {.mode = HOST_THREADED};
	REQUIRE_EQ(host_new(&o2, &h), 0);
	CHECK(host_on_loop(h));
	host_invoke(h, inv_fn, &v);
	CHECK_EQ(v.calls, 2);
	CHECK(pthread_equal(v.ran_on, pthread_self()));
	host_delete(h);
}

/** A call that crosses from one host's loop to another's and back. */
struct ping {
	/** The crossing, reused for both hops. */
	struct host_call call;
	/** Where the second hop goes. */
	struct host *back;
	/** Threads the two hops ran on. */
	pthread_t on_a, on_b;
	/** Position among the calls the first host ran. */
	int order;
	/** Both hops ran. */
	atomic_int done;
};

/** Calls the first host ran (its loop thread only). */
static int ping_seq;

static void
ping_on_b(void *arg)
{
	struct ping *p = arg;
	p->on_b = pthread_self();
	atomic_store(&p->done, 1);
}

static void
ping_on_a(void *arg)
{
	struct ping *p = arg;
	p->on_a = pthread_self();
	p->order = ping_seq++;
	host_post(p->back, &p->call, ping_on_b, p); /* the same record, posted again */
}

/** Holds the loop thread it runs on until released. */
static void
hold_fn(void *arg)
{
	atomic_int *release = arg;
	while (!atomic_load(release))
		usleep(100);
}

/** A call that posts a second one to its own host and checks it did not run inline. */
struct selfpost {
	/** The call itself, and the one it posts. */
	struct host_call call, next;
	/** The host both run on. */
	struct host *h;
	/** The second call ran; it had not when host_post returned. */
	atomic_int ran, inline_run;
};

static void
selfpost_next(void *arg)
{
	struct selfpost *sp = arg;
	atomic_store(&sp->ran, 1);
}

static void
selfpost_first(void *arg)
{
	struct selfpost *sp = arg;
	host_post(sp->h, &sp->next, selfpost_next, sp);
	atomic_store(&sp->inline_run, atomic_load(&sp->ran));
}

TEST(post_crosses_loops_without_waiting)
{
	/* a: a loop thread of its own (the policy runtime's); b: a loop this thread runs
	 * (the server's). */
	struct host_options oa = {.mode = HOST_THREADED, .loop_thread = 1}, ob = {.mode = HOST_THREADED};
	struct host *a = NULL, *b = NULL;
	REQUIRE_EQ(host_new(&oa, &a), 0);
	REQUIRE_EQ(host_new(&ob, &b), 0);
	enum { N = 100 };
	static struct ping pings[N];
	memset(pings, 0, sizeof(pings));
	ping_seq = 0;
	for (int i = 0; i < N; i++) {
		pings[i].back = b;
		host_post(a, &pings[i].call, ping_on_a, &pings[i]);
	}
	int all = 0;
	CHECK(LOOP_UNTIL(b, ({
		all = 1;
		for (int i = 0; i < N; i++)
			all &= atomic_load(&pings[i].done);
		all;
	})));
	for (int i = 0; i < N && all; i++) {
		CHECK_EQ(pings[i].order, i); /* in the order posted */
		CHECK(!pthread_equal(pings[i].on_a, pthread_self()));
		CHECK(pthread_equal(pings[i].on_b, pthread_self()));
	}
	/* The poster never waits: a's loop is held by a long call (a hook running for its
	 * budget), and posting to it still returns at once. */
	atomic_int release = 0;
	struct host_call hold;
	host_post(a, &hold, hold_fn, &release);
	struct ping late = {.back = b};
	uint64_t t0 = env.mono_ns();
	host_post(a, &late.call, ping_on_a, &late);
	CHECK(env.mono_ns() - t0 < 50000000ull);
	usleep(20000);
	ev_run(host_loop(b), EVRUN_NOWAIT);
	CHECK_EQ(atomic_load(&late.done), 0);
	atomic_store(&release, 1);
	CHECK(LOOP_UNTIL(b, atomic_load(&late.done)));
	/* Posted on the loop's own thread, a call still waits for the next turn. */
	struct selfpost sp = {.h = b};
	host_post(b, &sp.call, selfpost_first, &sp);
	CHECK(LOOP_UNTIL(b, atomic_load(&sp.ran)));
	CHECK_EQ(atomic_load(&sp.inline_run), 0);
	/* Calls posted to a loop nobody runs any more are run by host_run_posted, or at the
	 * latest by host_delete. */
	struct inv v = {0};
	struct host_call c1, c2;
	host_post(b, &c1, inv_fn, &v);
	CHECK_EQ(host_run_posted(b), 1);
	CHECK_EQ(v.calls, 1);
	CHECK_EQ(host_run_posted(b), 0);
	host_post(b, &c2, inv_fn, &v);
	host_delete(a);
	host_delete(b);
	CHECK_EQ(v.calls, 2);
	CHECK(pthread_equal(v.ran_on, pthread_self()));
}

TEST(drain_waits_out_an_executors_jobs)
{
	struct host_options o = {.mode = HOST_THREADED};
	struct host *h = NULL;
	REQUIRE_EQ(host_new(&o, &h), 0);
	struct hjob jobs[4];
	memset(jobs, 0, sizeof(jobs));
	for (int i = 0; i < 4; i++) {
		jobs[i].spin_ns = 1000000;
		REQUIRE_EQ(pool_submit(host_exec(h, HOST_BG), hjob_work, hjob_done, &jobs[i]), 0);
	}
	while (pool_pending(host_exec(h, HOST_BG)) > 0)
		host_drain(h, HOST_BG);
	for (int i = 0; i < 4; i++) {
		CHECK(atomic_load(&jobs[i].done));
		CHECK(pthread_equal(jobs[i].done_on, pthread_self()));
	}
	CHECK_EQ(host_drain(h, HOST_BG), 0); /* nothing pending: returns at once */
	struct host_step_info did;
	CHECK_EQ(host_step(h, 1000, NULL, &did), STRATA_EINVAL); /* only inline hosts step */
	struct host_options bad = {.mode = HOST_INLINE, .loop_thread = 1};
	struct host *nope = NULL;
	CHECK_EQ(host_new(&bad, &nope), STRATA_EINVAL);
	host_delete(h);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(foreground_never_waits_behind_background);
	RUN(inline_host_runs_work_only_when_stepped);
	RUN(step_stops_when_its_budget_is_spent);
	RUN(a_chunked_job_advances_one_chunk_at_a_time_under_the_work_meter);
	RUN(a_caller_that_needs_a_lock_a_suspended_chunk_holds_finishes_that_job);
	RUN(invoke_runs_on_the_loop_thread);
	RUN(post_crosses_loops_without_waiting);
	RUN(drain_waits_out_an_executors_jobs);
	return HARNESS_END("test_host");
}
