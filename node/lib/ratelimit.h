/*
 * ratelimit.h — a byte budget per second shared by threads (a token bucket that may go
 * into debt: a large request goes through at once and the next ones wait it off). The
 * store's seals, merges and compactions draw their writes from one, so background IO
 * cannot take the device away from the WAL's syncs.
 */
#ifndef STRATA_RATELIMIT_H
#define STRATA_RATELIMIT_H

#include <stdint.h>

struct ratelimit;

/** A limiter of bytes_per_s (0 = unlimited). */
int ratelimit_new(uint64_t bytes_per_s, struct ratelimit **out);
/** Safe on NULL. */
void ratelimit_delete(struct ratelimit *r);
/** Change the rate (0 = unlimited); waiters see it at their next check. */
void ratelimit_set(struct ratelimit *r, uint64_t bytes_per_s);
/** The current rate (0 = unlimited). */
uint64_t ratelimit_rate(struct ratelimit *r);
/** Take bytes from the budget, sleeping while it is overdrawn. Returns the nanoseconds
 *  waited. NULL = no limit. */
uint64_t ratelimit_acquire(struct ratelimit *r, uint64_t bytes);
/** Bytes taken and nanoseconds waited since the start. */
void ratelimit_stats(struct ratelimit *r, uint64_t *bytes, uint64_t *waited_ns);

#endif
