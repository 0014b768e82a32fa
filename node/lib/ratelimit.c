/*
 * ratelimit.c — the shared byte budget of background writes.
 */
#include "ratelimit.h"

#include <pthread.h>
#include <time.h>

#include "diag.h"
#include "env.h"
#include "fiber.h"
#include "../strata_types.h"

/** Longest single sleep: a changed rate is seen at least this often. */
#define RATELIMIT_MAX_SLEEP_NS 50000000ull

struct ratelimit {
	/** Guards everything below. */
	pthread_mutex_t mu;
	/** Bytes per second (0 = unlimited). */
	uint64_t rate;
	/** Bytes that may go now (negative: the debt still to wait off). */
	double tokens;
	/** env.mono_ns() of the last refill. */
	uint64_t filled_ns;
	/** Bytes taken and nanoseconds waited since the start. */
	uint64_t bytes, waited_ns;
	/** Automatic mode (ratelimit_set_auto), its ceiling and floor, bytes/s. */
	int automatic;
	uint64_t ceiling, floor;
	/** Automatic mode: the baseline sync time and env.mono_ns() of the last
	 *  observation, ns; this window's syncs. */
	uint64_t base_ns, last_obs_ns;
	uint64_t win[RATELIMIT_AUTO_WINDOW];
	unsigned win_n;
	/** Automatic mode: halvings and raises so far. */
	uint64_t downs, ups;
	/** Automatic mode: bytes and env.mono_ns() when the current window began (what
	 *  the background actually wrote over it). */
	uint64_t win_bytes, win_ns;
	/** Automatic mode: what the background wrote over the last RATELIMIT_AUTO_METER_NS
	 *  or more, bytes/s, and the bytes and env.mono_ns() that span started at. */
	uint64_t meter_rate, meter_bytes, meter_ns;
	/** Automatic mode: env.mono_ns() of the last stall (0: none yet), the rate the
	 *  budget had then (0: forgotten), and stalls so far. */
	uint64_t stall_at, stall_rate, stalls;
};

/** mu held: a stall happened less than RATELIMIT_AUTO_HOLD_NS before now. */
static int
ratelimit_held(const struct ratelimit *r, uint64_t now)
{
	return r->stall_at != 0 && now - r->stall_at < RATELIMIT_AUTO_HOLD_NS;
}

/** Burst allowed: 50 ms of the rate, at least 256 KiB. */
static double
ratelimit_burst(uint64_t rate)
{
	double b = (double)rate * 0.05;
	return b < 262144.0 ? 262144.0 : b;
}

int
ratelimit_new(uint64_t bytes_per_s, struct ratelimit **out)
{
	struct ratelimit *r = env.calloc(1, sizeof(*r));
	if (r == NULL)
		return diag_set(STRATA_ENOMEM, "ratelimit: out of memory");
	pthread_mutex_init(&r->mu, NULL);
	r->rate = bytes_per_s;
	r->tokens = ratelimit_burst(bytes_per_s);
	r->filled_ns = env.mono_ns();
	*out = r;
	return 0;
}

void
ratelimit_delete(struct ratelimit *r)
{
	if (r == NULL)
		return;
	pthread_mutex_destroy(&r->mu);
	env.free(r);
}

void
ratelimit_set(struct ratelimit *r, uint64_t bytes_per_s)
{
	pthread_mutex_lock(&r->mu);
	r->rate = bytes_per_s;
	r->automatic = 0; /* a fixed rate ends the automatic mode */
	if (r->tokens > ratelimit_burst(bytes_per_s))
		r->tokens = ratelimit_burst(bytes_per_s);
	pthread_mutex_unlock(&r->mu);
}

void
ratelimit_set_auto(struct ratelimit *r, int on, uint64_t ceiling)
{
	pthread_mutex_lock(&r->mu);
	r->automatic = on;
	if (on) {
		r->ceiling = ceiling ? ceiling : RATELIMIT_AUTO_CEILING;
		r->floor = r->ceiling / 64 > (4u << 20) ? r->ceiling / 64 : (4u << 20);
		if (r->floor > r->ceiling)
			r->floor = r->ceiling;
		r->rate = r->ceiling;
		r->base_ns = 0;
		r->win_n = 0;
		r->last_obs_ns = env.mono_ns();
		r->win_bytes = r->bytes;
		r->win_ns = r->last_obs_ns;
		r->meter_rate = 0;
		r->meter_bytes = r->bytes;
		r->meter_ns = r->last_obs_ns;
		r->stall_at = 0;
		r->stall_rate = 0;
		if (r->tokens > ratelimit_burst(r->rate))
			r->tokens = ratelimit_burst(r->rate);
	}
	pthread_mutex_unlock(&r->mu);
}

int
ratelimit_is_auto(struct ratelimit *r)
{
	pthread_mutex_lock(&r->mu);
	int on = r->automatic;
	pthread_mutex_unlock(&r->mu);
	return on;
}

void
ratelimit_observe(struct ratelimit *r, uint64_t sync_ns)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	if (!r->automatic) {
		pthread_mutex_unlock(&r->mu);
		return;
	}
	uint64_t at = env.mono_ns();
	r->last_obs_ns = at;
	if (at - r->meter_ns >= RATELIMIT_AUTO_METER_NS) {
		r->meter_rate = (uint64_t)((double)(r->bytes - r->meter_bytes) * 1e9 /
					   (double)(at - r->meter_ns));
		r->meter_bytes = r->bytes;
		r->meter_ns = at;
	}
	if (r->stall_at != 0 && at - r->stall_at > RATELIMIT_AUTO_FORGET_NS)
		r->stall_rate = 0; /* long enough without one: probe as fast as before */
	/* One sync far over the baseline is a stall (a VM frozen by its host's CPU quota,
	 * a device that stopped): the median of a window does not see it, since the
	 * syncs around it are fast. Halve at once, from what the background wrote, once
	 * per RATELIMIT_AUTO_HOLD_NS: a stall's neighbours are slow for the same cause. */
	if (r->base_ns != 0 && sync_ns > RATELIMIT_AUTO_STALL_NS &&
	    sync_ns / RATELIMIT_AUTO_STALL > r->base_ns && !ratelimit_held(r, at)) {
		uint64_t from = r->meter_rate > 0 && r->meter_rate < r->rate ? r->meter_rate : r->rate;
		if (from / 2 > r->floor) {
			r->rate = from / 2;
			r->stall_rate = from;
		} else {
			r->rate = r->floor; /* a stall at the floor is not the background's */
		}
		r->stall_at = at;
		r->stalls++;
		r->downs++;
		if (r->tokens > ratelimit_burst(r->rate))
			r->tokens = ratelimit_burst(r->rate);
	}
	r->win[r->win_n++] = sync_ns;
	if (r->win_n >= RATELIMIT_AUTO_WINDOW) {
		/* The window's median: one slow sync is the device's noise, most of them
		 * slow is writeback in the way. */
		uint64_t *w = r->win;
		for (unsigned i = 1; i < RATELIMIT_AUTO_WINDOW; i++)
			for (unsigned j = i; j > 0 && w[j - 1] > w[j]; j--) {
				uint64_t t = w[j];
				w[j] = w[j - 1];
				w[j - 1] = t;
			}
		uint64_t median = w[RATELIMIT_AUTO_WINDOW / 2];
		/* The baseline is the lowest window median, creeping up 1/16384 per window
		 * (2.7x in about 130 000 syncs), so it follows a device that got slower for
		 * good without taking a long merge's slow syncs for the norm, and one lucky
		 * sync does not set it. */
		if (r->base_ns == 0 || median < r->base_ns)
			r->base_ns = median ? median : 1;
		else
			r->base_ns += r->base_ns / 16384 + 1;
		uint64_t now = r->last_obs_ns, dt = now - r->win_ns;
		/* What the background wrote over the window: a rate far above it (the
		 * ceiling, at the start) would take several halvings to bite. */
		uint64_t seen = dt > 0 ? (uint64_t)((double)(r->bytes - r->win_bytes) * 1e9 / (double)dt) : 0;
		if (median > RATELIMIT_AUTO_SLOW * r->base_ns && median > RATELIMIT_AUTO_SLOW_NS) {
			uint64_t from = seen > 0 && seen < r->rate ? seen : r->rate;
			uint64_t next = from / 2;
			r->rate = next > r->floor ? next : r->floor;
			r->downs++;
			if (r->tokens > ratelimit_burst(r->rate))
				r->tokens = ratelimit_burst(r->rate);
		} else if (r->rate < r->ceiling && (2 * median <= 3 * r->base_ns ||
						    median <= RATELIMIT_AUTO_SLOW_NS) &&
			   !ratelimit_held(r, now)) {
			/* Fast again (under 1.5x the baseline), and no stall in the last hold:
			 * climb back by time, not by windows (a fast device closes a window of 8
			 * syncs every millisecond): by the rate itself per second (it doubles in a
			 * second), at least a 64th of the ceiling per RATELIMIT_AUTO_METER_NS;
			 * within 3/4 of the rate of the last stall, by a 16th of the rate per
			 * second, so that the budget creeps up to where it stalled instead of
			 * jumping past it. */
			double per_s = (double)r->rate;
			if (per_s < (double)(r->ceiling / 64) * 1e9 / RATELIMIT_AUTO_METER_NS)
				per_s = (double)(r->ceiling / 64) * 1e9 / RATELIMIT_AUTO_METER_NS;
			if (r->stall_rate != 0 && 4 * r->rate >= 3 * r->stall_rate)
				per_s = (double)r->rate / 16;
			uint64_t step = (uint64_t)(per_s * (double)dt / 1e9) + 1;
			uint64_t next = r->rate + step;
			r->rate = next < r->ceiling ? next : r->ceiling;
			r->ups++;
		}
		r->win_bytes = r->bytes;
		r->win_ns = now;
		r->win_n = 0;
	}
	pthread_mutex_unlock(&r->mu);
}

uint64_t
ratelimit_rate(struct ratelimit *r)
{
	pthread_mutex_lock(&r->mu);
	uint64_t v = r->rate;
	pthread_mutex_unlock(&r->mu);
	return v;
}

/** mu held: add what the time since the last refill earned, up to the burst. */
static void
ratelimit_fill(struct ratelimit *r)
{
	uint64_t now = env.mono_ns();
	if (r->rate != 0) {
		r->tokens += (double)(now - r->filled_ns) * (double)r->rate / 1e9;
		double burst = ratelimit_burst(r->rate);
		if (r->tokens > burst)
			r->tokens = burst;
	}
	r->filled_ns = now;
}

uint64_t
ratelimit_acquire(struct ratelimit *r, uint64_t bytes)
{
	if (r == NULL)
		return 0;
	uint64_t waited = 0;
	pthread_mutex_lock(&r->mu);
	r->bytes += bytes;
	ratelimit_fill(r);
	if (r->automatic && r->rate < r->ceiling && r->filled_ns - r->last_obs_ns > 1000000000ull)
		r->rate = r->ceiling; /* no sync for a second: no foreground to protect */
	if (r->rate == 0) {
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	r->tokens -= (double)bytes;
	while (r->rate != 0 && r->tokens < 0) {
		uint64_t ns = (uint64_t)(-r->tokens * 1e9 / (double)r->rate) + 1;
		if (ns > RATELIMIT_MAX_SLEEP_NS)
			ns = RATELIMIT_MAX_SLEEP_NS;
		pthread_mutex_unlock(&r->mu);
		/* On a fiber (inline mode) the wait is a blocked chunk that a later tick
		 * resumes. Elsewhere sleep, unless the clock is a manual one that did not
		 * move: nobody else can tick it while this thread waits, so stop waiting. */
		int stuck;
		if (fiber_active()) {
			stuck = fiber_block() != 0;
		} else {
			uint64_t before = env.mono_ns();
			struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
			nanosleep(&ts, NULL);
			waited += ns;
			stuck = env.mono_ns() == before;
		}
		pthread_mutex_lock(&r->mu);
		ratelimit_fill(r);
		if (stuck && r->tokens < 0) {
			r->tokens = 0; /* the debt is forgiven: its time will not come */
			break;
		}
	}
	if (r->rate == 0 && r->tokens < 0)
		r->tokens = 0; /* unlimited now: the debt is forgiven */
	r->waited_ns += waited;
	pthread_mutex_unlock(&r->mu);
	return waited;
}

void
ratelimit_stats(struct ratelimit *r, uint64_t *bytes, uint64_t *waited_ns, uint64_t *stalls)
{
	pthread_mutex_lock(&r->mu);
	if (bytes)
		*bytes = r->bytes;
	if (waited_ns)
		*waited_ns = r->waited_ns;
	if (stalls)
		*stalls = r->stalls;
	pthread_mutex_unlock(&r->mu);
}
