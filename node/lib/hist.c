#include "hist.h"

#include <assert.h>
#include <math.h>

#include "../strata_types.h"
#include "diag.h"
#include "env.h"

/** Largest supported significant digits. */
#define HIST_MAX_SIGFIGS 5

struct hist {
	/** Resolution asked for at creation. */
	uint64_t lowest;
	/** Highest trackable value; larger values are clamped to it. */
	uint64_t highest;
	/** Significant digits asked for at creation. */
	int sigfigs;
	/** log2 of the unit (largest power of two <= lowest). */
	int unit_magnitude;
	/** log2 of half the sub-buckets per bucket. */
	int sub_bucket_half_count_magnitude;
	/** Sub-buckets per bucket. */
	uint64_t sub_bucket_count;
	/** Half of sub_bucket_count. */
	uint64_t sub_bucket_half_count;
	/** Mask of the bits that select a sub-bucket in the first bucket. */
	uint64_t sub_bucket_mask;
	/** Number of counters. */
	size_t counts_len;
	/** Values recorded (atomic). */
	uint64_t total;
	/** Values clamped to highest (atomic). */
	uint64_t clamped;
	/** Sum of recorded values after clamping (atomic). */
	uint64_t sum;
	/** Smallest value recorded, UINT64_MAX when empty (atomic). */
	uint64_t min;
	/** Largest value recorded before clamping (atomic). */
	uint64_t max;
	/** The counters (atomic). */
	uint64_t counts[];
};

static int
hist_floor_log2(uint64_t v)
{
	return 63 - __builtin_clzll(v);
}

static int
hist_bucket_index(const struct hist *h, uint64_t v)
{
	int pow2ceiling = 64 - __builtin_clzll(v | h->sub_bucket_mask);
	return pow2ceiling - h->unit_magnitude - (h->sub_bucket_half_count_magnitude + 1);
}

static size_t
hist_index_of(const struct hist *h, uint64_t v)
{
	int b = hist_bucket_index(h, v);
	uint64_t sub = v >> (b + h->unit_magnitude);
	return ((size_t)(b + 1) << h->sub_bucket_half_count_magnitude) + (size_t)(sub - h->sub_bucket_half_count);
}

static uint64_t
hist_value_at_index(const struct hist *h, size_t idx)
{
	long b = (long)(idx >> h->sub_bucket_half_count_magnitude) - 1;
	uint64_t sub = (idx & (h->sub_bucket_half_count - 1)) + h->sub_bucket_half_count;
	if (b < 0) {
		sub -= h->sub_bucket_half_count;
		b = 0;
	}
	return sub << (b + h->unit_magnitude);
}

void
hist_equivalent_range(const struct hist *h, uint64_t v, uint64_t *lo, uint64_t *hi)
{
	int b = hist_bucket_index(h, v);
	uint64_t sub = v >> (b + h->unit_magnitude);
	int adjusted = sub >= h->sub_bucket_count ? b + 1 : b;
	uint64_t size = 1ull << (h->unit_magnitude + adjusted);
	uint64_t low = sub << (b + h->unit_magnitude);
	*lo = low;
	*hi = low + size - 1;
}

int
hist_new(uint64_t lowest, uint64_t highest, int sigfigs, struct hist **out)
{
	*out = NULL;
	if (lowest < 1 || sigfigs < 1 || sigfigs > HIST_MAX_SIGFIGS || highest < 2 * lowest ||
	    highest > (UINT64_MAX >> 2))
		return diag_set(STRATA_EINVAL,
				"histogram: bad parameters lowest=%llu highest=%llu sigfigs=%d "
				"(need lowest >= 1, highest >= 2*lowest, highest < 2^62, sigfigs 1..%d)",
				(unsigned long long)lowest, (unsigned long long)highest, sigfigs,
				HIST_MAX_SIGFIGS);
	uint64_t single_unit = 2;
	for (int i = 0; i < sigfigs; i++)
		single_unit *= 10;
	int sub_mag = hist_floor_log2(single_unit);
	if ((1ull << sub_mag) < single_unit)
		sub_mag++;
	int half_mag = sub_mag > 1 ? sub_mag - 1 : 0;
	int unit_mag = hist_floor_log2(lowest);
	if (unit_mag + half_mag + 1 > 61)
		return diag_set(STRATA_EINVAL, "histogram: lowest=%llu too large for %d significant digits",
				(unsigned long long)lowest, sigfigs);
	uint64_t sub_count = 1ull << (half_mag + 1);
	uint64_t smallest_untrackable = sub_count << unit_mag;
	size_t buckets = 1;
	while (smallest_untrackable <= highest) {
		if (smallest_untrackable > (UINT64_MAX >> 1)) {
			buckets++;
			break;
		}
		smallest_untrackable <<= 1;
		buckets++;
	}
	size_t counts_len = (buckets + 1) * (size_t)(sub_count / 2);
	struct hist *h = env.calloc(1, sizeof(*h) + counts_len * sizeof(uint64_t));
	if (h == NULL)
		return diag_set(STRATA_ENOMEM, "histogram: out of memory for %zu counters", counts_len);
	h->lowest = lowest;
	h->highest = highest;
	h->sigfigs = sigfigs;
	h->unit_magnitude = unit_mag;
	h->sub_bucket_half_count_magnitude = half_mag;
	h->sub_bucket_count = sub_count;
	h->sub_bucket_half_count = sub_count / 2;
	h->sub_bucket_mask = (sub_count - 1) << unit_mag;
	h->counts_len = counts_len;
	h->min = UINT64_MAX;
	assert(hist_index_of(h, highest) < counts_len);
	*out = h;
	return 0;
}

int
hist_new_latency(struct hist **out)
{
	return hist_new(HIST_LATENCY_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS, out);
}

void
hist_delete(struct hist *h)
{
	env.free(h);
}

static void
hist_store_min(uint64_t *slot, uint64_t v)
{
	uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
	while (v < cur && !__atomic_compare_exchange_n(slot, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void
hist_store_max(uint64_t *slot, uint64_t v)
{
	uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
	while (v > cur && !__atomic_compare_exchange_n(slot, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void
hist_record_n(struct hist *h, uint64_t v, uint64_t n)
{
	if (n == 0)
		return;
	hist_store_min(&h->min, v);
	hist_store_max(&h->max, v);
	uint64_t tracked = v;
	if (v > h->highest) {
		tracked = h->highest;
		__atomic_fetch_add(&h->clamped, n, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&h->counts[hist_index_of(h, tracked)], n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum, tracked * n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->total, n, __ATOMIC_RELAXED);
}

void
hist_record(struct hist *h, uint64_t v)
{
	hist_record_n(h, v, 1);
}

int
hist_merge(struct hist *dst, const struct hist *src)
{
	if (dst->lowest != src->lowest || dst->highest != src->highest || dst->sigfigs != src->sigfigs)
		return diag_set(STRATA_EINVAL,
				"histogram merge: parameters differ (%llu..%llu/%d vs %llu..%llu/%d)",
				(unsigned long long)dst->lowest, (unsigned long long)dst->highest, dst->sigfigs,
				(unsigned long long)src->lowest, (unsigned long long)src->highest, src->sigfigs);
	uint64_t total = 0;
	for (size_t i = 0; i < src->counts_len; i++) {
		uint64_t c = __atomic_load_n(&src->counts[i], __ATOMIC_RELAXED);
		if (c == 0)
			continue;
		__atomic_fetch_add(&dst->counts[i], c, __ATOMIC_RELAXED);
		total += c;
	}
	if (total == 0)
		return 0;
	hist_store_min(&dst->min, __atomic_load_n(&src->min, __ATOMIC_RELAXED));
	hist_store_max(&dst->max, __atomic_load_n(&src->max, __ATOMIC_RELAXED));
	__atomic_fetch_add(&dst->clamped, __atomic_load_n(&src->clamped, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_fetch_add(&dst->sum, __atomic_load_n(&src->sum, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_fetch_add(&dst->total, total, __ATOMIC_RELAXED);
	return 0;
}

void
hist_reset(struct hist *h)
{
	for (size_t i = 0; i < h->counts_len; i++)
		__atomic_store_n(&h->counts[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->total, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->clamped, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->sum, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->min, UINT64_MAX, __ATOMIC_RELAXED);
	__atomic_store_n(&h->max, 0, __ATOMIC_RELAXED);
}

uint64_t
hist_count(const struct hist *h)
{
	return __atomic_load_n(&h->total, __ATOMIC_RELAXED);
}

uint64_t
hist_clamped(const struct hist *h)
{
	return __atomic_load_n(&h->clamped, __ATOMIC_RELAXED);
}

uint64_t
hist_min(const struct hist *h)
{
	uint64_t m = __atomic_load_n(&h->min, __ATOMIC_RELAXED);
	return m == UINT64_MAX && hist_count(h) == 0 ? 0 : m;
}

uint64_t
hist_max(const struct hist *h)
{
	return __atomic_load_n(&h->max, __ATOMIC_RELAXED);
}

uint64_t
hist_sum(const struct hist *h)
{
	return __atomic_load_n(&h->sum, __ATOMIC_RELAXED);
}

double
hist_mean(const struct hist *h)
{
	uint64_t n = hist_count(h);
	return n ? (double)hist_sum(h) / (double)n : 0.0;
}

uint64_t
hist_highest(const struct hist *h)
{
	return h->highest;
}

uint64_t
hist_percentile(const struct hist *h, double p)
{
	uint64_t total = 0;
	for (size_t i = 0; i < h->counts_len; i++)
		total += __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
	if (total == 0)
		return 0;
	if (!(p > 0))
		p = 0;
	if (p > 100)
		p = 100;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)total);
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	uint64_t mn = hist_min(h), mx = hist_max(h), v = mx;
	uint64_t seen = 0;
	for (size_t i = 0; i < h->counts_len; i++) {
		seen += __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
		if (seen >= rank) {
			uint64_t lo, hi;
			hist_equivalent_range(h, hist_value_at_index(h, i), &lo, &hi);
			v = hi;
			break;
		}
	}
	if (rank == total || v > mx)
		v = mx;
	if (rank == 1 || v < mn)
		v = mn;
	return v;
}

uint64_t
hist_count_le(const struct hist *h, uint64_t v)
{
	size_t last = v >= h->highest ? h->counts_len - 1 : hist_index_of(h, v);
	uint64_t n = 0;
	for (size_t i = 0; i <= last; i++)
		n += __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
	return n;
}

void
hist_iter_init(struct hist_iter *it, const struct hist *h)
{
	it->h = h;
	it->next = 0;
	it->cumulative = 0;
}

int
hist_iter_next(struct hist_iter *it, struct hist_bucket *b)
{
	const struct hist *h = it->h;
	while (it->next < h->counts_len) {
		size_t i = it->next++;
		uint64_t c = __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
		if (c == 0)
			continue;
		it->cumulative += c;
		hist_equivalent_range(h, hist_value_at_index(h, i), &b->lo, &b->hi);
		b->count = c;
		b->cumulative = it->cumulative;
		return 1;
	}
	return 0;
}
