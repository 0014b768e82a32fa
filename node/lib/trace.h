/*
 * trace.h — the engine's event trace: an order-dependent 64-bit hash over every event
 * (appends, seals, merge plans, commits, policy decisions, ticks). Two runs that hash
 * the same did the same things in the same order: what a simulation compares to prove
 * it is deterministic. Values are numbers the engine chose (ids, sequence numbers,
 * counts, versions, result codes), never pointers or wall times.
 */
#ifndef STRATA_TRACE_H
#define STRATA_TRACE_H

#include <pthread.h>
#include <stdint.h>

/* TRACE_EVENTS(X) — X(ID, "name"), once. */
#define TRACE_EVENTS(X)                                                                            \
	X(APPEND, "append")       /* shard, first seq, last seq, rows */                           \
	X(SEAL, "seal")           /* shard, generation, rows, bytes, replay cursor, version */     \
	X(PLAN, "plan")           /* shard, kind, inputs, first input id, last input id */         \
	X(COMMIT, "commit")       /* shard, kind, run id, inputs, version */                       \
	X(ABORT, "abort")         /* shard, kind, inputs */                                        \
	X(DELETE, "delete")       /* objects deleted by the reaper in one batch */                 \
	X(POLICY, "policy")       /* what the runtime decided: decision, shard, result */          \
	X(TICK, "tick")           /* new manual-clock time */                                       \
	X(OPEN, "open")           /* shards, epoch of shard 0 */

/** Event kinds. */
enum trace_event {
#define TRACE_ENUM(id, name) TRACE_##id,
	TRACE_EVENTS(TRACE_ENUM)
#undef TRACE_ENUM
	TRACE_COUNT
};

/** What a TRACE_POLICY event records (its first value). */
enum {
	TRACE_POLICY_HOOK_START = 1, /**< hook, shard */
	TRACE_POLICY_HOOK_END = 2,   /**< hook, shard, failed */
	TRACE_POLICY_TRIGGER_SEAL = 3, /**< shard: the flush timer or the size trigger */
	TRACE_POLICY_PRIMITIVE = 4,  /**< job kind, shard, max: a hook called seal/prepare/merge/compact */
};

/** A trace. */
struct trace {
	/** Guards hash and events. */
	pthread_mutex_t mu;
	/** The running hash. */
	uint64_t hash;
	/** Events hashed. */
	uint64_t events;
	/** Also told of every event, under mu (trace_set_sink), or NULL. */
	void (*sink)(void *ctx, enum trace_event kind, const uint64_t *v, unsigned n);
	void *sink_ctx;
};

/** Start an empty trace. */
void trace_create(struct trace *t);
/** Free a trace's lock. */
void trace_destroy(struct trace *t);
/** Hash one event of kind with its n values. Safe on a NULL trace. */
void trace_event(struct trace *t, enum trace_event kind, const uint64_t *v, unsigned n);
/** Tell fn of every event from now on (NULL: nobody), under the trace's lock: fn must
 *  not call into the trace. */
void trace_set_sink(struct trace *t, void (*fn)(void *ctx, enum trace_event kind, const uint64_t *v, unsigned n),
		    void *ctx);
/** The hash and the event count now. */
uint64_t trace_hash(struct trace *t, uint64_t *events);
/** 64-bit mixer (splitmix64's finalizer): what the trace and the seeded random source use. */
uint64_t trace_mix(uint64_t x);

/** Hash an event from its values: TRACE(t, SEAL, shard, gen, ...). */
#define TRACE(t, kind, ...)                                                                         \
	do {                                                                                       \
		const uint64_t trace_v_[] = {__VA_ARGS__};                                           \
		trace_event((t), TRACE_##kind, trace_v_, sizeof(trace_v_) / sizeof(trace_v_[0]));    \
	} while (0)

#endif
