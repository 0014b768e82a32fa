/*
 * mono.h — condition variables timed on CLOCK_MONOTONIC, and their deadlines.
 */
#ifndef STRATA_MONO_H
#define STRATA_MONO_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/** Initialise cv so that pthread_cond_timedwait takes CLOCK_MONOTONIC deadlines. */
static inline void
mono_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

/** The CLOCK_MONOTONIC deadline ns from now, for a mono_cond_init condvar. */
static inline struct timespec
mono_deadline(uint64_t ns)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	ns += (uint64_t)dl.tv_nsec;
	dl.tv_sec += (time_t)(ns / 1000000000ull);
	dl.tv_nsec = (long)(ns % 1000000000ull);
	return dl;
}

#endif /* STRATA_MONO_H */
