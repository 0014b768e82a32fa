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
/** Change the rate (0 = unlimited), ending the automatic mode; waiters see it at their
 *  next check. */
void ratelimit_set(struct ratelimit *r, uint64_t bytes_per_s);
/** The current rate (0 = unlimited). */
uint64_t ratelimit_rate(struct ratelimit *r);
/** Take bytes from the budget, sleeping while it is overdrawn. Returns the nanoseconds
 *  waited. NULL = no limit. */
uint64_t ratelimit_acquire(struct ratelimit *r, uint64_t bytes);
/** Bytes taken and nanoseconds waited since the start. */
void ratelimit_stats(struct ratelimit *r, uint64_t *bytes, uint64_t *waited_ns);

/*
 * Automatic mode: the rate follows the foreground. The WAL reports how long each
 * fdatasync took (ratelimit_observe); the limiter keeps a baseline (the low end of
 * recent syncs) and, over each window of RATELIMIT_AUTO_WINDOW syncs, halves the rate
 * when the window's median sync took over 4x the baseline and over 1 ms (background writeback
 * is delaying the WAL), and otherwise raises it by a sixteenth of the ceiling
 * (additive increase, multiplicative decrease). It stays between a floor (ceiling / 64, at least 4 MiB/s: merges
 * always progress) and the ceiling, and returns to the ceiling after a second without
 * syncs (no foreground to protect).
 */
/** Window of the automatic mode, in observed syncs. */
#define RATELIMIT_AUTO_WINDOW 8u
/** The ceiling of the automatic mode when none is given: 1 GiB/s. */
#define RATELIMIT_AUTO_CEILING (1ull << 30)
/** Turn the automatic mode on (ceiling bytes/s, 0: RATELIMIT_AUTO_CEILING) or off (the
 *  rate stays where ratelimit_set puts it). It starts at the ceiling. */
void ratelimit_set_auto(struct ratelimit *r, int on, uint64_t ceiling);
/** 1 in the automatic mode. */
int ratelimit_is_auto(struct ratelimit *r);
/** A foreground sync took sync_ns (automatic mode; otherwise ignored). Safe on NULL. */
void ratelimit_observe(struct ratelimit *r, uint64_t sync_ns);

#endif
