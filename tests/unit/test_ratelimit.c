/*
 * test_ratelimit.c — the background IO budget's automatic mode: it halves while the
 * foreground's syncs are slow, climbs back while they are fast, stays within its floor
 * and ceiling, and a fixed rate ends it.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../node/lib/env.h"
#include "../../node/lib/ratelimit.h"
#include "../../node/strata_types.h"
#include "harness.h"

/** A window of syncs of ns each. */
static void
window(struct ratelimit *r, uint64_t ns)
{
	for (unsigned i = 0; i < RATELIMIT_AUTO_WINDOW; i++)
		ratelimit_observe(r, ns);
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
	window(r, 5000000); /* 5 ms: 25x the baseline, over 1 ms */
	CHECK_EQ(ratelimit_rate(r), ceiling / 2);
	window(r, 5000000);
	CHECK_EQ(ratelimit_rate(r), ceiling / 4);
	for (int i = 0; i < 20; i++)
		window(r, 5000000);
	CHECK_EQ(ratelimit_rate(r), floor); /* never below the floor: merges progress */
	/* Slower than the baseline but under 1 ms is no reason to back off: it climbs, a
	 * sixteenth of the ceiling per window. */
	window(r, 900000);
	CHECK_EQ(ratelimit_rate(r), floor + ceiling / 16);
	window(r, 200000);
	CHECK_EQ(ratelimit_rate(r), floor + 2 * (ceiling / 16));
	for (int i = 0; i < 40; i++)
		window(r, 200000);
	CHECK_EQ(ratelimit_rate(r), ceiling);
	/* A fixed rate ends the automatic mode: observations change nothing. */
	ratelimit_set(r, 64u << 20);
	CHECK(!ratelimit_is_auto(r));
	window(r, 9000000);
	CHECK_EQ(ratelimit_rate(r), 64u << 20);
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
	RUN(auto_mode_backs_off_while_syncs_slow_down_and_recovers);
	RUN(auto_mode_without_a_ceiling_uses_one_gib);
	return HARNESS_END("test_ratelimit");
}
