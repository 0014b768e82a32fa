/*
 * strata_host.h — for the programs that compose a node themselves (`strata serve`,
 * `strata load --embedded`): open a store on a host they created, and reach the
 * pieces the public API hides. Embedders use strata.h alone.
 */
#ifndef STRATA_STRATA_HOST_H
#define STRATA_STRATA_HOST_H

#include "host/host.h"
#include "strata.h"

struct runtime;
struct store;

/** Extra settings of the policy runtime for strata_open_on. */
struct strata_runtime_options {
	/** Watch the policy file and reload it when it changes. */
	int watch_file;
};

/** strata_open on the caller's host (it must outlive the handle; strata_close leaves it
 *  running). With o->policy set, the policy runtime runs on the host's loop and
 *  background executor; ro may be NULL for the defaults. */
int strata_open_on(const strata_options *o, struct host *h, const struct strata_runtime_options *ro,
		   strata **out);
/** The host a handle runs on. */
struct host *strata_host(strata *db);
/** The policy runtime of a handle, or NULL. */
struct runtime *strata_runtime(strata *db);
/** The core store of a handle. */
struct store *strata_store(strata *db);

#endif
