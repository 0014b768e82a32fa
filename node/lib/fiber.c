/*
 * fiber.c — ucontext fibers with guard-paged stacks and sanitizer annotations.
 */
#include "fiber.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "diag.h"
#include "env.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FIBER_ASAN)
#define FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(FIBER_TSAN)
#define FIBER_TSAN 1
#endif

#ifdef FIBER_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif
#ifdef FIBER_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

struct fiber {
	/** The fiber's context while it is suspended (or before it starts). */
	ucontext_t ctx;
	/** The resumer's context while the fiber runs. */
	ucontext_t back;
	/** The mapping: a guard page, then the stack. */
	void *map;
	/** Bytes of the mapping, and of the usable stack above the guard page. */
	size_t map_bytes, stack_bytes;
	/** The job, while busy. */
	void (*fn)(void *arg);
	void *arg;
	/** A job is started and has not returned. */
	int busy;
	/** How the last run ended (FIBER_*), set by the fiber before it switches back. */
	int state;
	/** Cost reported by the last fiber_yield. */
	uint64_t cost;
	/** This run was forced by fiber_mutex_lock: fiber_block does not wait. */
	int forced;
	/** Next suspended fiber of the same thread. */
	struct fiber *next_suspended;
#ifdef FIBER_ASAN
	/** ASan's fake stack of the side that switched away. */
	void *fake_stack;
	/** The resumer's stack, as ASan reported it at the switch in. */
	const void *back_bottom;
	size_t back_size;
#endif
#ifdef FIBER_TSAN
	/** TSan's fiber, and the resumer's. */
	void *tsan, *tsan_back;
#endif
};

/** The fiber running on this thread, or NULL. */
static __thread struct fiber *fiber_cur;
/** Suspended fibers this thread ran last (what fiber_mutex_lock may resume). */
static __thread struct fiber *fiber_suspended;

static void
fiber_unlist(struct fiber *f)
{
	for (struct fiber **p = &fiber_suspended; *p != NULL; p = &(*p)->next_suspended) {
		if (*p == f) {
			*p = f->next_suspended;
			f->next_suspended = NULL;
			return;
		}
	}
}

/** Switch from the resumer into f. */
static void
fiber_switch_in(struct fiber *f)
{
#ifdef FIBER_ASAN
	__sanitizer_start_switch_fiber(&f->fake_stack, (char *)f->map + (f->map_bytes - f->stack_bytes),
				       f->stack_bytes);
#endif
#ifdef FIBER_TSAN
	f->tsan_back = __tsan_get_current_fiber();
	__tsan_switch_to_fiber(f->tsan, 0);
#endif
	swapcontext(&f->back, &f->ctx);
#ifdef FIBER_ASAN
	__sanitizer_finish_switch_fiber(f->fake_stack, NULL, NULL);
#endif
}

/** Called on the fiber right after a switch in. */
static void
fiber_arrived(struct fiber *f)
{
#ifdef FIBER_ASAN
	__sanitizer_finish_switch_fiber(f->fake_stack, &f->back_bottom, &f->back_size);
#else
	(void)f;
#endif
}

/** Switch from f back to its resumer; done: the fiber's job returned. */
static void
fiber_switch_out(struct fiber *f, int done)
{
#ifdef FIBER_ASAN
	__sanitizer_start_switch_fiber(done ? NULL : &f->fake_stack, f->back_bottom, f->back_size);
#else
	(void)done;
#endif
#ifdef FIBER_TSAN
	__tsan_switch_to_fiber(f->tsan_back, 0);
#endif
	swapcontext(&f->ctx, &f->back);
	fiber_arrived(f);
}

/** The fiber being started (makecontext passes only ints). */
static __thread struct fiber *fiber_starting;

static void
fiber_main(void)
{
	struct fiber *f = fiber_starting;
	fiber_arrived(f);
	for (;;) {
		f->fn(f->arg);
		f->busy = 0;
		f->fn = NULL;
		f->arg = NULL;
		f->state = FIBER_DONE;
		f->cost = 0;
		/* Park here; the next fiber_start resumes the loop with a new job. */
		fiber_switch_out(f, 0);
	}
}

int
fiber_new(size_t stack_bytes, struct fiber **out)
{
	*out = NULL;
	long page = sysconf(_SC_PAGESIZE);
	if (stack_bytes == 0)
		stack_bytes = FIBER_STACK_BYTES;
	stack_bytes = (stack_bytes + (size_t)page - 1) & ~((size_t)page - 1);
	struct fiber *f = env.calloc(1, sizeof(*f));
	if (f == NULL)
		return diag_set(STRATA_ENOMEM, "fiber: out of memory");
	f->map_bytes = stack_bytes + (size_t)page;
	f->stack_bytes = stack_bytes;
	f->map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
		      -1, 0);
	if (f->map == MAP_FAILED) {
		int err = errno;
		env.free(f);
		return diag_set(STRATA_ENOMEM, "fiber: cannot map a %zu-byte stack: %s", stack_bytes,
				strerror(err));
	}
	mprotect(f->map, (size_t)page, PROT_NONE); /* the guard page: an overflow faults */
	if (getcontext(&f->ctx) != 0) {
		int err = errno;
		munmap(f->map, f->map_bytes);
		env.free(f);
		return diag_set(STRATA_EINVAL, "fiber: getcontext: %s", strerror(err));
	}
	f->ctx.uc_stack.ss_sp = (char *)f->map + page;
	f->ctx.uc_stack.ss_size = stack_bytes;
	f->ctx.uc_link = NULL;
	makecontext(&f->ctx, fiber_main, 0);
#ifdef FIBER_TSAN
	f->tsan = __tsan_create_fiber(0);
#endif
	*out = f;
	return 0;
}

void
fiber_delete(struct fiber *f)
{
	if (f == NULL)
		return;
	fiber_unlist(f);
#ifdef FIBER_TSAN
	__tsan_destroy_fiber(f->tsan);
#endif
	munmap(f->map, f->map_bytes);
	env.free(f);
}

/** Run f until it switches back; returns how it ended. */
static int
fiber_run(struct fiber *f, int forced)
{
	fiber_unlist(f);
	struct fiber *prev = fiber_cur;
	int prev_forced = f->forced;
	f->forced = forced;
	fiber_cur = f;
	fiber_starting = f;
	fiber_switch_in(f);
	fiber_cur = prev;
	f->forced = prev_forced;
	if (f->busy) {
		f->next_suspended = fiber_suspended;
		fiber_suspended = f;
	}
	return f->state;
}

int
fiber_start(struct fiber *f, void (*fn)(void *arg), void *arg)
{
	if (f->busy)
		return diag_set(STRATA_EBUSY, "fiber: a job is already running on this fiber");
	f->fn = fn;
	f->arg = arg;
	f->busy = 1;
	f->cost = 0;
	return fiber_run(f, 0);
}

int
fiber_resume(struct fiber *f)
{
	if (!f->busy)
		return FIBER_DONE;
	f->cost = 0;
	return fiber_run(f, 0);
}

void
fiber_finish(struct fiber *f)
{
	while (f->busy)
		fiber_run(f, 1);
}

int
fiber_busy(const struct fiber *f)
{
	return f != NULL && f->busy;
}

uint64_t
fiber_last_cost(const struct fiber *f)
{
	return f->cost;
}

int
fiber_active(void)
{
	return fiber_cur != NULL;
}

void
fiber_yield(uint64_t cost)
{
	struct fiber *f = fiber_cur;
	if (f == NULL || f->forced)
		return;
	f->cost = cost;
	f->state = FIBER_YIELDED;
	fiber_switch_out(f, 0);
}

int
fiber_block(void)
{
	struct fiber *f = fiber_cur;
	if (f == NULL || f->forced)
		return -1;
	f->cost = 0;
	f->state = FIBER_BLOCKED;
	fiber_switch_out(f, 0);
	return f->forced ? -1 : 0;
}

void
fiber_mutex_lock(pthread_mutex_t *m)
{
	while (pthread_mutex_trylock(m) != 0) {
		if (fiber_cur != NULL) {
			/* Another fiber holds it: give the resumer back the thread (a blocked
			 * chunk) so it can run the holder. */
			if (fiber_block() == 0)
				continue;
		} else if (fiber_suspended != NULL) {
			/* A suspended fiber of this thread may hold it: run one until it
			 * yields or finishes, waiting for nothing. */
			fiber_run(fiber_suspended, 1);
			continue;
		}
		pthread_mutex_lock(m);
		return;
	}
}
