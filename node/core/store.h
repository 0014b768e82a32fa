/*
 * store.h — what the layers above the core (policy runtime, server) need from an
 * open store beyond the public API: event listeners and an attached runtime.
 */
#ifndef STRATA_STORE_H
#define STRATA_STORE_H

#include <stdint.h>

#include "../strata_types.h"

/** Events a store reports, on the thread that caused them. Keep them short and
 *  non-blocking (e.g. ev_async_send). */
struct store_listener {
	/** A generation was published by a seal. */
	void (*on_seal)(void *ctx, uint32_t shard, uint64_t generation_id, uint64_t rows, uint64_t bytes);
	/** The active memtable of shard reached the memtable limit (once per memtable). */
	void (*on_memtable_full)(void *ctx, uint32_t shard, uint64_t bytes);
	/** Passed back to the callbacks. */
	void *ctx;
};

/** Open a store without any runtime (strata_open adds the policy runtime on top). */
int store_open(const strata_options *o, strata **out);
/** Stop the attached runtime, then close every shard and free the store. */
void store_close(strata *db);
/** Install (or with NULL remove) the listener and the memtable size limit (0 = none).
 *  Returns once no callback of the previous listener is running (never call it from one). */
void store_set_listener(strata *db, const struct store_listener *l, uint64_t memtable_max_bytes);
/** Change only the memtable size limit. */
void store_set_memtable_limit(strata *db, uint64_t memtable_max_bytes);
/** Narrow every shard's per-pass input cap (0 = options.merge_max_inputs; larger values
 *  are clamped to it): how a policy's merge_max_generations reaches the engine. */
void store_set_merge_cap(strata *db, uint32_t max_inputs);

/** A runtime attached to the store: stopped and freed first thing in strata_close. */
void store_attach_runtime(strata *db, void *rt, void (*stop)(void *rt));
/** The attached runtime, or NULL. */
void *store_runtime(strata *db);
/** The attached runtime if it was attached with that stop function, else NULL. */
void *store_runtime_of_kind(strata *db, void (*stop)(void *rt));
/** The options the store was opened with. */
const strata_options *store_options(const strata *db);

#endif
