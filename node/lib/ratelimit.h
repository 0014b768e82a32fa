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
/** Bytes taken, nanoseconds waited, and stalls the automatic mode halved at, since the
 *  start. Any pointer may be NULL. */
void ratelimit_stats(struct ratelimit *r, uint64_t *bytes, uint64_t *waited_ns, uint64_t *stalls);

/*
 * Automatic mode: the rate follows the foreground. The WAL reports how long each
 * fdatasync took (ratelimit_observe); the limiter keeps a baseline (the lowest window
 * median, creeping up 1/16384 per window) and, over each window of RATELIMIT_AUTO_WINDOW syncs, halves the rate
 * when the window's median sync took over RATELIMIT_AUTO_SLOW times the baseline and
 * over RATELIMIT_AUTO_SLOW_NS (background writeback is delaying the WAL) — halving what
 * the background actually wrote over the window when that is below the rate, so a
 * ceiling far above the device's speed bites at the first slow window; it holds between
 * 1.5x and that, and under 1.5x (or under RATELIMIT_AUTO_SLOW_NS) it climbs back,
 * doubling in a second and by at least a 64th of the ceiling per RATELIMIT_AUTO_METER_NS
 * (multiplicative decrease, gradual increase). A single sync over RATELIMIT_AUTO_STALL
 * baselines and RATELIMIT_AUTO_STALL_NS is a stall, which a window's median cannot see:
 * on a VM held over its host's CPU quota, every thread stops for milliseconds at the
 * end of each quota period while the syncs around it stay fast. A stall halves the rate
 * at once (from what the background wrote over the last RATELIMIT_AUTO_METER_NS), at
 * most once per RATELIMIT_AUTO_HOLD_NS, with no climbing in that time; the climb then
 * slows to a 16th of the rate per second within 3/4 of the rate the stall happened at,
 * which is forgotten after RATELIMIT_AUTO_FORGET_NS without another. It stays between a
 * floor (ceiling / 64, at least 4 MiB/s: merges always progress) and the ceiling, and
 * returns to the ceiling after a second without syncs (no foreground to protect).
 *
 * Why 2x: a writer paced at 40% of what one sync at a time allows keeps up while a sync
 * takes under 2.5x its idle time; past that its queue grows for as long as the merge
 * runs, which is the stall this mode exists to prevent.
 */
/** Median sync over this many baselines is slow. */
#define RATELIMIT_AUTO_SLOW 2u
/** ... and over this many ns (a fast device's syncs may double without harm). */
#define RATELIMIT_AUTO_SLOW_NS 500000u
/** One sync over this many baselines ... */
#define RATELIMIT_AUTO_STALL 16u
/** ... and over this many ns is a stall: the rate halves at once. */
#define RATELIMIT_AUTO_STALL_NS 4000000u
/** After a stall, no climbing and no second stall halving for this long (the period of
 *  a host's CPU quota, as Linux CFS bandwidth control sets it by default). */
#define RATELIMIT_AUTO_HOLD_NS 100000000ull
/** A stall's rate is forgotten after this long without another. */
#define RATELIMIT_AUTO_FORGET_NS 10000000000ull
/** The span over which what the background wrote is measured, ns. */
#define RATELIMIT_AUTO_METER_NS 100000000ull
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
