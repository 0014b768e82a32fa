/*
 * test_hist.c — the log-linear latency histogram: precision of percentiles against
 * known distributions, exact min/max, clamping, merging, concurrent recording.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "../../node/lib/diag.h"
#include "../../node/lib/hist.h"
#include "../../node/strata.h"
#include "harness.h"

/** A fixed-seed xorshift64* generator, so every run sees the same values. */
static uint64_t
rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static double
rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static const double percentiles[] = {0, 0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};

/** Every percentile is the exact nearest-rank value or above it by at most 1/1000. */
static int
check_percentiles(const struct hist *h, uint64_t *vals, size_t n)
{
	qsort(vals, n, sizeof(*vals), cmp_u64);
	int bad = 0;
	for (size_t i = 0; i < sizeof(percentiles) / sizeof(percentiles[0]); i++) {
		double p = percentiles[i];
		size_t rank = (size_t)ceil(p / 100.0 * (double)n);
		if (rank < 1)
			rank = 1;
		uint64_t exact = vals[rank - 1];
		uint64_t got = hist_percentile(h, p);
		if (got < exact || got - exact > exact / 1000) {
			fprintf(stderr, "  p%g: got %llu, exact %llu\n", p, (unsigned long long)got,
				(unsigned long long)exact);
			bad++;
		}
	}
	return bad;
}

enum { N_VALUES = 200000 };

TEST(uniform_percentiles_within_three_digits)
{
	struct hist *h;
	REQUIRE_EQ(hist_new_latency(&h), 0);
	uint64_t *vals = malloc(N_VALUES * sizeof(*vals));
	uint64_t seed = 42;
	for (size_t i = 0; i < N_VALUES; i++) {
		vals[i] = 1000 + rng_next(&seed) % 10000000000ull;
		hist_record(h, vals[i]);
	}
	CHECK_EQ(hist_count(h), N_VALUES);
	CHECK_EQ(check_percentiles(h, vals, N_VALUES), 0);
	free(vals);
	hist_delete(h);
}

TEST(exponential_percentiles_within_three_digits)
{
	struct hist *h;
	REQUIRE_EQ(hist_new_latency(&h), 0);
	uint64_t *vals = malloc(N_VALUES * sizeof(*vals));
	uint64_t seed = 7;
	for (size_t i = 0; i < N_VALUES; i++) {
		double u = rng_unit(&seed);
		vals[i] = 1000 + (uint64_t)(-log(1.0 - u) * 2e6);
		hist_record(h, vals[i]);
	}
	CHECK_EQ(check_percentiles(h, vals, N_VALUES), 0);
	uint64_t sum = 0;
	for (size_t i = 0; i < N_VALUES; i++)
		sum += vals[i];
	CHECK_EQ(hist_sum(h), sum);
	CHECK(fabs(hist_mean(h) - (double)sum / N_VALUES) < 1e-6 * hist_mean(h));
	free(vals);
	hist_delete(h);
}

TEST(small_values_are_exact)
{
	struct hist *h;
	REQUIRE_EQ(hist_new_latency(&h), 0);
	for (uint64_t v = 0; v < 2048; v++)
		hist_record(h, v);
	for (uint64_t v = 0; v < 2048; v += 97) {
		uint64_t lo, hi;
		hist_equivalent_range(h, v, &lo, &hi);
		CHECK_EQ(lo, v);
		CHECK_EQ(hi, v);
	}
	CHECK_EQ(hist_percentile(h, 50), 1023);
	CHECK_EQ(hist_count_le(h, 99), 100);
	hist_delete(h);
}

TEST(min_and_max_are_exact)
{
	struct hist *h;
	REQUIRE_EQ(hist_new_latency(&h), 0);
	CHECK_EQ(hist_min(h), 0);
	CHECK_EQ(hist_max(h), 0);
	CHECK_EQ(hist_percentile(h, 50), 0);
	hist_record(h, 123456789);
	hist_record(h, 987654321987ull);
	hist_record(h, 5555555);
	CHECK_EQ(hist_min(h), 123456789 > 5555555 ? 5555555 : 123456789);
	CHECK_EQ(hist_max(h), 987654321987ull);
	CHECK_EQ(hist_percentile(h, 0), 5555555);
	CHECK_EQ(hist_percentile(h, 100), 987654321987ull);
	uint64_t mid = hist_percentile(h, 50);
	CHECK(mid >= 123456789 && mid - 123456789 <= 123456789 / 1000);
	hist_delete(h);
}

TEST(values_above_range_clamp_and_are_counted)
{
	struct hist *h;
	REQUIRE_EQ(hist_new(1, 1000000, 3, &h), 0);
	hist_record(h, 10);
	hist_record(h, 5000000);
	hist_record_n(h, 2000000, 3);
	CHECK_EQ(hist_count(h), 5);
	CHECK_EQ(hist_clamped(h), 4);
	CHECK_EQ(hist_max(h), 5000000);
	CHECK_EQ(hist_sum(h), 10 + 4 * 1000000);
	CHECK_EQ(hist_count_le(h, 10), 1);
	CHECK_EQ(hist_count_le(h, 1000000), 5);
	uint64_t p50 = hist_percentile(h, 50);
	uint64_t lo, hi;
	hist_equivalent_range(h, 1000000, &lo, &hi);
	CHECK(p50 >= lo && p50 <= hi);
	hist_delete(h);
}

TEST(merge_equals_recording_in_one)
{
	struct hist *a, *b, *all;
	REQUIRE_EQ(hist_new_latency(&a), 0);
	REQUIRE_EQ(hist_new_latency(&b), 0);
	REQUIRE_EQ(hist_new_latency(&all), 0);
	uint64_t seed = 99;
	for (int i = 0; i < 50000; i++) {
		uint64_t v = rng_next(&seed) % (i & 1 ? 1000000ull : 50000000000ull);
		hist_record(i % 3 ? a : b, v);
		hist_record(all, v);
	}
	hist_record(b, HIST_LATENCY_HIGHEST + 5);
	hist_record(all, HIST_LATENCY_HIGHEST + 5);
	REQUIRE_EQ(hist_merge(a, b), 0);
	CHECK_EQ(hist_count(a), hist_count(all));
	CHECK_EQ(hist_min(a), hist_min(all));
	CHECK_EQ(hist_max(a), hist_max(all));
	CHECK_EQ(hist_sum(a), hist_sum(all));
	CHECK_EQ(hist_clamped(a), 1);
	struct hist_iter ia, ib;
	struct hist_bucket ba, bb;
	hist_iter_init(&ia, a);
	hist_iter_init(&ib, all);
	int buckets = 0, diff = 0;
	for (;;) {
		int ra = hist_iter_next(&ia, &ba), rb = hist_iter_next(&ib, &bb);
		if (ra != rb) {
			diff++;
			break;
		}
		if (!ra)
			break;
		buckets++;
		if (ba.lo != bb.lo || ba.hi != bb.hi || ba.count != bb.count || ba.cumulative != bb.cumulative)
			diff++;
	}
	CHECK(buckets > 1000);
	CHECK_EQ(diff, 0);
	for (size_t i = 0; i < sizeof(percentiles) / sizeof(percentiles[0]); i++)
		CHECK_EQ(hist_percentile(a, percentiles[i]), hist_percentile(all, percentiles[i]));
	hist_delete(a);
	hist_delete(b);
	hist_delete(all);
}

TEST(merge_of_different_shapes_is_refused)
{
	struct hist *a, *b;
	REQUIRE_EQ(hist_new(1, 1000000, 3, &a), 0);
	REQUIRE_EQ(hist_new(1, 1000000, 2, &b), 0);
	hist_record(b, 5);
	CHECK_EQ(hist_merge(a, b), STRATA_EINVAL);
	CHECK_EQ(hist_count(a), 0);
	hist_delete(a);
	hist_delete(b);
}

TEST(bad_parameters_are_refused)
{
	struct hist *h = (struct hist *)1;
	CHECK_EQ(hist_new(0, 100, 3, &h), STRATA_EINVAL);
	CHECK(h == NULL);
	CHECK_EQ(hist_new(1, 1, 3, &h), STRATA_EINVAL);
	CHECK_EQ(hist_new(1, 100, 0, &h), STRATA_EINVAL);
	CHECK_EQ(hist_new(1, 100, 6, &h), STRATA_EINVAL);
	CHECK_EQ(hist_new(1, UINT64_MAX, 3, &h), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "histogram") != NULL);
}

TEST(coarser_resolution_keeps_relative_precision)
{
	struct hist *h;
	REQUIRE_EQ(hist_new(1000, 3600000000ull, 2, &h), 0);
	uint64_t *vals = malloc(20000 * sizeof(*vals));
	uint64_t seed = 3;
	for (int i = 0; i < 20000; i++) {
		vals[i] = 1000000 + rng_next(&seed) % 1000000000ull;
		hist_record(h, vals[i]);
	}
	qsort(vals, 20000, sizeof(*vals), cmp_u64);
	uint64_t exact = vals[10000 - 1], got = hist_percentile(h, 50);
	CHECK(got >= exact && got - exact <= exact / 100);
	free(vals);
	hist_delete(h);
}

TEST(reset_forgets_everything)
{
	struct hist *h;
	REQUIRE_EQ(hist_new_latency(&h), 0);
	hist_record(h, 77);
	hist_record(h, HIST_LATENCY_HIGHEST * 2);
	hist_reset(h);
	CHECK_EQ(hist_count(h), 0);
	CHECK_EQ(hist_clamped(h), 0);
	CHECK_EQ(hist_min(h), 0);
	CHECK_EQ(hist_max(h), 0);
	CHECK_EQ(hist_count_le(h, HIST_LATENCY_HIGHEST), 0);
	hist_record(h, 500);
	CHECK_EQ(hist_min(h), 500);
	hist_delete(h);
}

/** One recording thread's share. */
struct rec_arg {
	struct hist *h;
	uint64_t seed;
	uint64_t sum;
};

static void *
recorder(void *p)
{
	struct rec_arg *a = p;
	for (int i = 0; i < 100000; i++) {
		uint64_t v = rng_next(&a->seed) % 100000000ull;
		a->sum += v;
		hist_record(a->h, v);
	}
	return NULL;
}

TEST(concurrent_recording_loses_nothing)
{
	struct hist *h;
	REQUIRE_EQ(hist_new_latency(&h), 0);
	pthread_t th[4];
	struct rec_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct rec_arg){.h = h, .seed = 1000 + (uint64_t)i};
		pthread_create(&th[i], NULL, recorder, &args[i]);
	}
	for (int k = 0; k < 20; k++)
		(void)hist_percentile(h, 99);
	uint64_t sum = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		sum += args[i].sum;
	}
	CHECK_EQ(hist_count(h), 400000);
	CHECK_EQ(hist_count_le(h, HIST_LATENCY_HIGHEST), 400000);
	CHECK_EQ(hist_sum(h), sum);
	hist_delete(h);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(uniform_percentiles_within_three_digits);
	RUN(exponential_percentiles_within_three_digits);
	RUN(small_values_are_exact);
	RUN(min_and_max_are_exact);
	RUN(values_above_range_clamp_and_are_counted);
	RUN(merge_equals_recording_in_one);
	RUN(merge_of_different_shapes_is_refused);
	RUN(bad_parameters_are_refused);
	RUN(coarser_resolution_keeps_relative_precision);
	RUN(reset_forgets_everything);
	RUN(concurrent_recording_loses_nothing);
	return HARNESS_END("test_hist");
}
