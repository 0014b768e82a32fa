/*
 * hist.h — a log-linear (HdrHistogram-style) histogram of non-negative integers.
 *
 * Values from 0 to `highest` are tracked with `sigfigs` significant decimal digits:
 * a recorded value v is reported back as some value in [v, v + v / 10^sigfigs]
 * (exact below 2 * 10^sigfigs units). Values above `highest` are clamped to it and
 * counted in hist_clamped(). Recording is lock-free and thread-safe (relaxed
 * atomics), so many threads may record into one histogram while another reads
 * percentiles; two histograms with the same parameters merge exactly.
 *
 * Latencies use nanoseconds with HIST_LATENCY_LOWEST/HIGHEST: 3 significant digits
 * from 1 µs to 1 hour.
 */
#ifndef STRATA_HIST_H
#define STRATA_HIST_H

#include <stddef.h>
#include <stdint.h>

/** Smallest discernible latency, nanoseconds (values below 2048 ns are exact). */
#define HIST_LATENCY_LOWEST 1ull
/** Largest tracked latency: one hour in nanoseconds. */
#define HIST_LATENCY_HIGHEST (3600ull * 1000000000ull)
/** Significant digits of latency histograms. */
#define HIST_LATENCY_SIGFIGS 3

/** A histogram; created by hist_new. */
struct hist;

/** One bucket reported by hist_iter_next. */
struct hist_bucket {
	/** Smallest value counted in this bucket. */
	uint64_t lo;
	/** Largest value counted in this bucket. */
	uint64_t hi;
	/** Values recorded in [lo, hi]. */
	uint64_t count;
	/** Values recorded in this bucket and all buckets below it. */
	uint64_t cumulative;
};

/** Cursor over the non-empty buckets of a histogram, lowest first. */
struct hist_iter {
	/** The histogram walked. */
	const struct hist *h;
	/** Next counts index to look at. */
	size_t next;
	/** Running cumulative count. */
	uint64_t cumulative;
};

/** Create a histogram tracking [0, highest] with resolution `lowest` (>= 1) and
 *  sigfigs (1..5) significant digits. STRATA_EINVAL (with a message) on bad
 *  parameters, STRATA_ENOMEM. */
int hist_new(uint64_t lowest, uint64_t highest, int sigfigs, struct hist **out);
/** hist_new(HIST_LATENCY_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS). */
int hist_new_latency(struct hist **out);
/** Free. Safe on NULL. */
void hist_delete(struct hist *h);
/** Record one value. Thread-safe. */
void hist_record(struct hist *h, uint64_t v);
/** Record a value n times. Thread-safe. */
void hist_record_n(struct hist *h, uint64_t v, uint64_t n);
/** Add every count of src into dst. STRATA_EINVAL when their parameters differ.
 *  Safe while other threads record into either. */
int hist_merge(struct hist *dst, const struct hist *src);
/** Forget every recorded value (not atomic with concurrent recording). */
void hist_reset(struct hist *h);

/** Number of values recorded (including clamped ones). */
uint64_t hist_count(const struct hist *h);
/** Values recorded above the highest trackable value (recorded as that value). */
uint64_t hist_clamped(const struct hist *h);
/** Exact smallest recorded value (0 when empty). */
uint64_t hist_min(const struct hist *h);
/** Exact largest recorded value, before clamping (0 when empty). */
uint64_t hist_max(const struct hist *h);
/** Sum of the recorded values after clamping (modulo 2^64). */
uint64_t hist_sum(const struct hist *h);
/** Mean of the recorded values after clamping (0 when empty). */
double hist_mean(const struct hist *h);
/** Nearest-rank percentile, p in [0, 100]: the highest value equivalent to the
 *  recorded value of rank ceil(p/100 * count), kept within [min, max].
 *  0 when empty. */
uint64_t hist_percentile(const struct hist *h, double p);
/** Values recorded that are <= v, up to the resolution at v (a bucket that holds v
 *  counts whole). */
uint64_t hist_count_le(const struct hist *h, uint64_t v);
/** Highest trackable value. */
uint64_t hist_highest(const struct hist *h);
/** Smallest and largest value that share v's bucket. */
void hist_equivalent_range(const struct hist *h, uint64_t v, uint64_t *lo, uint64_t *hi);

/** Start walking the non-empty buckets. */
void hist_iter_init(struct hist_iter *it, const struct hist *h);
/** Next non-empty bucket into *b; 0 when there is none left. */
int hist_iter_next(struct hist_iter *it, struct hist_bucket *b);

#endif
