/*
 * objstore.c — what the object-store seam keeps besides its inline calls (objstore.h):
 * whether the last failed call of a remote store on this thread may have been applied.
 * The remote stores set it (node/objstore/http.c); the engine reads it where it must
 * tell a lost write from a lost answer (the manifest, the WAL on a store). It sits below
 * both, so that neither the stores nor the URL dispatcher (url.c) call each other for it.
 */
#include "objstore.h"

/** Whether the last failed remote call on this thread may have been applied. */
static __thread int objstore_indeterminate_tls;

int
objstore_last_indeterminate(void)
{
	return objstore_indeterminate_tls;
}

void
objstore_set_indeterminate(int on)
{
	objstore_indeterminate_tls = on;
}
