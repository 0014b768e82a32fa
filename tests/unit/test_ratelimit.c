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
	/* The background wrote 10 MiB over a window of 5 ms syncs (25x the baseline): it
	 * halves what was written (250 MiB/s), not the ceiling it never reached. */
	(void)ratelimit_acquire(r, 10u << 20); /* the manual clock stands: its wait is forgiven */
	window(r, 5000000);
	CHECK_EQ(ratelimit_rate(r), (uint64_t)((10u << 20) * 1e9 / 40e6) / 2);
	uint64_t was = ratelimit_rate(r);
	window(r, 5000000); /* nothing written: the rate itself halves */
	CHECK_EQ(ratelimit_rate(r), was / 2);
	for (int i = 0; i < 20; i++)
		window(r, 5000000);
	CHECK_EQ(ratelimit_rate(r), floor); /* never below the floor: merges progress */
	/* Slower than the baseline but under 0.5 ms is no reason to back off: it climbs,
	 * at least a 64th of the ceiling per window. */
	window(r, 450000);
	CHECK_EQ(ratelimit_rate(r), floor + ceiling / 64);
	window(r, 200000);
	CHECK_EQ(ratelimit_rate(r), floor + 2 * (ceiling / 64));
	/* Fast windows a second apart: it doubles per second. */
	was = ratelimit_rate(r);
	for (unsigned i = 0; i < RATELIMIT_AUTO_WINDOW; i++) {
		now_ns += 1000000000ull / RATELIMIT_AUTO_WINDOW;
		ratelimit_observe(r, 200000);
	}
	CHECK_EQ(ratelimit_rate(r), 2 * was);
	for (int i = 0; i < 200; i++)
		window(r, 200000);
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
	 * 2000 of them. */
	for (int i = 0; i < 250; i++)
		window(r, 900000);
	uint64_t low = ratelimit_rate(r);
	CHECK_EQ(low, ceiling / 64); /* the floor */
	window(r, 400000);
	CHECK_EQ(ratelimit_rate(r), low + ceiling / 64); /* back at the baseline: it climbs */
	window(r, 900000);
	CHECK_EQ(ratelimit_rate(r), (low + ceiling / 64) / 2); /* and 900 us is still slow */
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
	RUN(auto_mode_without_a_ceiling_uses_one_gib);
	return HARNESS_END("test_ratelimit");
}
