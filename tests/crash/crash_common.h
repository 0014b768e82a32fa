/*
 * crash_common.h — what the crash driver and its child agree on: the key and value
 * shapes, the seeded random generator and the pipe protocol.
 *
 * Keys are "t<thread %02u>-<index %07u>"; thread t owns every key with its number and
 * writes them to shard t % shards, one append in flight at a time, so the order of
 * acknowledged writes of a key is the order the driver reads them from the pipe.
 * A value is fully determined by (incarnation, thread, counter, row, extra): a
 * readable header followed by `extra` pseudo-random bytes, so the pipe carries
 * descriptors, never values. A row may be a delete instead: the key must then read
 * back absent.
 *
 * Protocol (child -> driver, one line per write(2), each shorter than PIPE_BUF):
 *   R <incarnation> <epoch of shard 0> <epoch of shard 1> ...  store open, workload starts
 *   I <thread> <counter> <n> <index> <extra> ...        append of n rows about to be called
 *                                                      (<extra> "d": the row deletes the key)
 *   A <thread> <counter>                               that append returned 0
 *   P <point>                                          a thread is paused at a test point
 *   M <op> <shard> <generations>                       a seal/merge/compaction committed
 *   E <message>                                        an unexpected error: the run fails
 */
#ifndef STRATA_CRASH_COMMON_H
#define STRATA_CRASH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/** Most writer threads of a child. */
#define CRASH_MAX_THREADS 16
/** Most shards of a crash store. */
#define CRASH_MAX_SHARDS 8
/** Most rows in one append. */
#define CRASH_MAX_BATCH 8
/** Share of rows that are deletes, in percent. */
#define CRASH_DELETE_PCT 12u
/** Largest number of pseudo-random bytes after a value's header. */
#define CRASH_MAX_EXTRA 16000u
/** Room for a value: header plus extra. */
#define CRASH_VALUE_CAP (CRASH_MAX_EXTRA + 96u)
/** Longest key. */
#define CRASH_KEY_CAP 32
/** Largest key index (per thread) a run may use. */
#define CRASH_MAX_KEYCAP 1000000u
/** Longest protocol line, including the newline. */
#define CRASH_LINE_MAX 1024
/** Block size of crash stores: small, so runs have many blocks ("prepare.block"). */
#define CRASH_BLOCK_BYTES 1024u
/** WAL segment size of crash stores: small, so segments roll and get released. */
#define CRASH_SEGMENT_BYTES (64u << 10)

/** A row as the driver remembers it. */
struct crash_desc {
	/** Child incarnation that wrote it (1, 2, ...). */
	uint32_t inc;
	/** Writer thread. */
	uint32_t thread;
	/** The thread's append counter in that incarnation. */
	uint64_t counter;
	/** Row number inside the append. */
	uint32_t row;
	/** Pseudo-random bytes after the header. */
	uint32_t extra;
	/** The row is a delete (no value): the key reads back absent. */
	uint32_t del;
};

/** splitmix64 step: a good 64-bit mix, also used as the generator. */
static inline uint64_t
crash_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/** A seeded generator (one per thread; not shared). */
struct crash_rng {
	/** State. */
	uint64_t s;
};

static inline uint64_t
crash_next(struct crash_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return crash_mix(r->s);
}

/** Uniform in [0, n); n > 0. */
static inline uint64_t
crash_below(struct crash_rng *r, uint64_t n)
{
	return crash_next(r) % n;
}

/** Write the key of (thread, index); returns its length. */
static inline size_t
crash_key(char *dst, uint32_t thread, uint32_t index)
{
	return (size_t)snprintf(dst, CRASH_KEY_CAP, "t%02u-%07u", thread, index);
}

/** Parse a key made by crash_key; 0 on success, -1 if it is not one. */
static inline int
crash_parse_key(const void *key, size_t len, uint32_t *thread, uint32_t *index)
{
	const char *k = key;
	if (len != 11 || k[0] != 't' || k[3] != '-')
		return -1;
	uint32_t t = 0, i = 0;
	for (int j = 1; j < 3; j++) {
		if (k[j] < '0' || k[j] > '9')
			return -1;
		t = t * 10 + (uint32_t)(k[j] - '0');
	}
	for (int j = 4; j < 11; j++) {
		if (k[j] < '0' || k[j] > '9')
			return -1;
		i = i * 10 + (uint32_t)(k[j] - '0');
	}
	*thread = t;
	*index = i;
	return 0;
}

/** Write the value of d into dst (CRASH_VALUE_CAP bytes); returns its length. */
static inline size_t
crash_value(char *dst, const struct crash_desc *d)
{
	int h = snprintf(dst, CRASH_VALUE_CAP, "i%u.t%u.c%llu.r%u.x%u:", d->inc, d->thread,
			 (unsigned long long)d->counter, d->row, d->extra);
	uint64_t s = crash_mix(((uint64_t)d->inc << 40) ^ ((uint64_t)d->thread << 32) ^
			       crash_mix(d->counter) ^ ((uint64_t)d->row << 20));
	size_t n = (size_t)h;
	for (uint32_t i = 0; i < d->extra; i += 8) {
		s = crash_mix(s);
		size_t take = d->extra - i < 8 ? d->extra - i : 8;
		memcpy(dst + n, &s, take);
		n += take;
	}
	return n;
}

/** 1 if (val, len) is exactly the value of d. */
static inline int
crash_value_is(const void *val, size_t len, const struct crash_desc *d, char *scratch)
{
	size_t n = crash_value(scratch, d);
	return n == len && memcmp(scratch, val, n) == 0;
}

/** The test points the driver may pause the child at. Seal, prepare and commit first. */
static const char *const crash_points[] = {
	"seal.swapped",     "seal.flushed",         "seal.published",
	"prepare.sealed",   "prepare.block",        "prepare.run_written",
	"commit.manifest_updated", "commit.swapped", "commit.before_delete",
	"manifest.before_append", "manifest.appended", "manifest.snapshot_written",
	"seal.waiting",     "wal.before_sync",      "append.durable",
	"append.inserted",
};
/** Number of crash_points. */
#define CRASH_NPOINTS (sizeof(crash_points) / sizeof(crash_points[0]))
/** crash_points[0 .. CRASH_INSIDE_POINTS) lie inside seal, prepare or commit. */
#define CRASH_INSIDE_POINTS 12
/** Manifest log entries between snapshots in the child: small, so that kills land
 *  between an entry and its snapshot and between a snapshot and its collection. */
#define CRASH_SNAPSHOT_EDITS 3

#endif
