/*
 * test_ratelimit.c — the background IO budget's automatic mode: it halves while the
 * foreground's syncs are slow (from what the background wrote), holds near the threshold,
 * climbs back while they are fast, stays within its floor and ceiling, and a fixed rate
 * ends it.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../node/lib/env.h"
#include "../../node/lib/ratelimit.h"
#include "../../node/strata_types.h"
#include "harness.h"

/** The manual clock the limiter reads. */
static uint64_t now_ns = 1000000000ull;

static uint64_t
manual_mono_ns(void)
{
	return now_ns;
}

/** A window of back-to-back syncs of ns each: the clock moves by each one. */
static void
window(struct ratelimit *r, uint64_t ns)
{
	for (unsigned i = 0; i < RATELIMIT_AUTO_WINDOW; i++) {
		now_ns += ns;
		ratelimit_observe(r, ns);
	}
}

TEST(auto_mode_backs_off_while_syncs_slow_down_and_recovers)
{
	struct ratelimit *r = NULL;
	REQUIRE_EQ(ratelimit_new(0, &r), 0);
	const uint64_t ceiling = 512ull << 20, floor = ceiling / 64;
	ratelimit_set_auto(r, 1, ceiling);
	CHECK(ratelimit_is_auto(r));
	CHECK_EQ(ratelimit_rate(r), ceiling); /* it starts at the ceiling */
	window(r, 200000);                    /* idle syncs: 200 us, the baseline */
	CHECK_EQ(ratelimit_rate(r), ceiling);
	/* The background wrote 10 MiB over a window of 5 ms syncs (25x the baseline): the
	 * first is a stall and halves at once; the window's median then halves what was
	 * written (250 MiB/s), not the ceiling it never reached. */
	(void)ratelimit_acquire(r, 10u << 20); /* the manual clock stands: its wait is forgiven */
	now_ns += 5000000;
	ratelimit_observe(r, 5000000);
	CHECK_EQ(ratelimit_rate(r), ceiling / 2);
	for (unsigned i = 1; i < RATELIMIT_AUTO_WINDOW; i++) {
		now_ns += 5000000;
		ratelimit_observe(r, 5000000);
	}
	CHECK_EQ(ratelimit_rate(r), (uint64_t)((10u << 20) * 1e9 / 40e6) / 2);
	uint64_t was = ratelimit_rate(r);
	window(r, 5000000); /* nothing written: the rate itself halves */
	CHECK_EQ(ratelimit_rate(r), was / 2);
	for (int i = 0; i < 20; i++)
		window(r, 5000000);
	CHECK_EQ(ratelimit_rate(r), floor); /* never below the floor: merges progress */
	/* Fast again, but within the hold of the last stall: no climbing yet. */
	now_ns += 5000000;
	ratelimit_observe(r, 5000000); /* a stall, at the floor */
	window(r, 200000);
	CHECK_EQ(ratelimit_rate(r), floor);
	/* Past the hold. Slower than the baseline but under 0.5 ms is no reason to back off:
	 * it climbs, by time: a 64th of the ceiling per 100 ms at least. */
	now_ns += RATELIMIT_AUTO_HOLD_NS;
	window(r, 450000);
	uint64_t up = ratelimit_rate(r);
	CHECK(up > floor + floor / 2); /* about 100 ms since the last window: ~ceiling/64 */
	CHECK(up <= floor + floor + floor / 8);
	/* The stalls at the floor left no rate to creep up to: a second of fast windows
	 * doubles it at least (the rate itself per second, at least 10 x ceiling/64). */
	for (unsigned i = 0; i < RATELIMIT_AUTO_WINDOW; i++) {
		now_ns += 1000000000ull / RATELIMIT_AUTO_WINDOW;
		ratelimit_observe(r, 200000);
	}
	CHECK(ratelimit_rate(r) >= 2 * up);
	/* Near the rate of the last stall that bit it creeps; past ten seconds without a
	 * stall that rate is forgotten and it climbs to the ceiling. */
	for (int i = 0; i < 14; i++)
		for (unsigned j = 0; j < RATELIMIT_AUTO_WINDOW; j++) {
			now_ns += 1000000000ull / RATELIMIT_AUTO_WINDOW;
			ratelimit_observe(r, 200000);
		}
	CHECK_EQ(ratelimit_rate(r), ceiling);
	/* A fixed rate ends the automatic mode: observations change nothing. */
	ratelimit_set(r, 64u << 20);
	CHECK(!ratelimit_is_auto(r));
	window(r, 9000000);
	CHECK_EQ(ratelimit_rate(r), 64u << 20);
	ratelimit_delete(r);
}

TEST(auto_mode_holds_between_one_and_a_half_and_twice_the_baseline)
{
	struct ratelimit *r = NULL;
	REQUIRE_EQ(ratelimit_new(0, &r), 0);
	const uint64_t ceiling = 512ull << 20;
	ratelimit_set_auto(r, 1, ceiling);
	/* One lucky 10 us sync in a window of 400 us ones does not become the baseline. */
	for (unsigned i = 0; i < RATELIMIT_AUTO_WINDOW; i++) {
		uint64_t ns = i == 3 ? 10000 : 400000;
		now_ns += ns;
		ratelimit_observe(r, ns);
	}
	CHECK_EQ(ratelimit_rate(r), ceiling);
	window(r, 900000); /* 2.25x the 400 us baseline, over 0.5 ms: halve */
	CHECK_EQ(ratelimit_rate(r), ceiling / 2);
	window(r, 700000); /* 1.75x: neither down nor up */
	CHECK_EQ(ratelimit_rate(r), ceiling / 2);
	window(r, 780000);
	CHECK_EQ(ratelimit_rate(r), ceiling / 2);
	/* Seconds of slow syncs (a long merge) do not become the norm: still slow after
	 * 2000 of them. None is a stall (under 4 ms). */
	for (int i = 0; i < 250; i++)
		window(r, 900000);
	uint64_t low = ratelimit_rate(r);
	CHECK_EQ(low, ceiling / 64); /* the floor */
	window(r, 400000); /* back at the baseline: it climbs, by the window's 3.2 ms */
	uint64_t up = ratelimit_rate(r);
	CHECK(up > low);
	CHECK(up < low + ceiling / 64 / 16);
	window(r, 900000);
	CHECK_EQ(ratelimit_rate(r), up / 2 > low ? up / 2 : low); /* and 900 us is still slow */
	ratelimit_delete(r);
}

/** Background writes of bytes_per_ms every millisecond for ms, each with a fast sync. */
static void
busy(struct ratelimit *r, uint64_t bytes_per_ms, unsigned ms)
{
	for (unsigned i = 0; i < ms; i++) {
		now_ns += 1000000;
		(void)ratelimit_acquire(r, bytes_per_ms);
		ratelimit_observe(r, 100000);
	}
}

TEST(auto_mode_halves_at_once_on_one_stalled_sync_and_creeps_back_to_where_it_stalled)
{
	struct ratelimit *r = NULL;
	REQUIRE_EQ(ratelimit_new(0, &r), 0);
	const uint64_t ceiling = 1ull << 30;
	ratelimit_set_auto(r, 1, ceiling);
	/* 100 us syncs while the background writes 400 MB/s, for 200 ms. */
	busy(r, 400000, 200);
	CHECK_EQ(ratelimit_rate(r), ceiling); /* the medians are fast */
	/* One sync of 10 ms (a VM frozen by its host): halve what was written, at once. */
	now_ns += 10000000;
	ratelimit_observe(r, 10000000);
	uint64_t half = ratelimit_rate(r);
	CHECK(half >= 190000000 && half <= 210000000);
	/* Its neighbours, slow for the same cause, within the hold: no second halving, and
	 * fast syncs in the hold do not climb. */
	now_ns += 6000000;
	ratelimit_observe(r, 6000000);
	CHECK_EQ(ratelimit_rate(r), half);
	busy(r, 100000, 50);
	CHECK_EQ(ratelimit_rate(r), half);
	/* Past the hold it climbs fast to 3/4 of the rate it stalled at (~400 MB/s), then
	 * by a 16th per second: after 2 s of fast syncs it is between the two. */
	busy(r, 100000, 2000);
	uint64_t r2 = ratelimit_rate(r);
	CHECK(r2 >= 285000000);
	CHECK(r2 < 380000000);
	/* A stall that does not bite (a sync of 3.9 ms, under RATELIMIT_AUTO_STALL_NS) is
	 * noise. */
	now_ns += 3900000;
	ratelimit_observe(r, 3900000);
	CHECK(ratelimit_rate(r) >= r2);
	/* Ten seconds without a stall: the rate it stalled at is forgotten, and it climbs
	 * back to the ceiling as fast as ever. */
	busy(r, 100000, 14000);
	CHECK_EQ(ratelimit_rate(r), ceiling);
	ratelimit_delete(r);
}

TEST(auto_mode_without_a_ceiling_uses_one_gib)
{
	struct ratelimit *r = NULL;
	REQUIRE_EQ(ratelimit_new(0, &r), 0);
	ratelimit_set_auto(r, 1, 0);
	CHECK_EQ(ratelimit_rate(r), RATELIMIT_AUTO_CEILING);
	ratelimit_observe(NULL, 1); /* safe on NULL */
	ratelimit_delete(r);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	env.mono_ns = manual_mono_ns;
	RUN(auto_mode_backs_off_while_syncs_slow_down_and_recovers);
	RUN(auto_mode_holds_between_one_and_a_half_and_twice_the_baseline);
	RUN(auto_mode_halves_at_once_on_one_stalled_sync_and_creeps_back_to_where_it_stalled);
	RUN(auto_mode_without_a_ceiling_uses_one_gib);
	return HARNESS_END("test_ratelimit");
}
