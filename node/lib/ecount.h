/*
 * ecount.h — an event count: wait for an event with no mutex.
 *
 * A waiter reads the count (ecount_read), checks its condition, and sleeps while the
 * count still holds what it read (ecount_wait); the side that changes the condition
 * calls ecount_signal, which bumps the count and wakes every sleeper. A bump between
 * the read and the sleep makes the sleep return at once, so no wake-up is lost.
 * Signalling costs a system call only when someone sleeps: the count and the number
 * of sleepers are both sequentially consistent, so either the signaller sees the
 * sleeper or the sleeper's wait sees the new count. What the condition reads must be
 * published with release stores and read with acquire loads.
 */
#ifndef STRATA_ECOUNT_H
#define STRATA_ECOUNT_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct ecount {
	atomic_uint count;
	atomic_uint sleepers;
};

/** The count, to pass to ecount_wait after checking the condition. */
static inline unsigned
ecount_read(struct ecount *e)
{
	return atomic_load(&e->count);
}

/** Sleep while the count is still seen, until signalled or the CLOCK_MONOTONIC
 *  deadline (NULL: none). May return early: the caller checks its condition again. */
static inline void
ecount_wait(struct ecount *e, unsigned seen, const struct timespec *deadline)
{
	atomic_fetch_add(&e->sleepers, 1);
	syscall(SYS_futex, (unsigned *)&e->count, FUTEX_WAIT_BITSET_PRIVATE, seen, deadline, NULL,
		FUTEX_BITSET_MATCH_ANY);
	atomic_fetch_sub(&e->sleepers, 1);
}

/** Bump the count and wake every sleeper. */
static inline void
ecount_signal(struct ecount *e)
{
	atomic_fetch_add(&e->count, 1);
	if (atomic_load(&e->sleepers) != 0)
		syscall(SYS_futex, (unsigned *)&e->count, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#endif /* STRATA_ECOUNT_H */
