/*
 * url.c — the object store a URL names. The remote stores are optional at link time:
 * they need libcurl, libcrypto and expat, so a program that links libstrata.a without
 * them (libstrata-core.a, the README's example, a Lua module built without those
 * packages) gets the local directory only and a clear message for a remote URL. The
 * strata binary and the Lua module built with the packages link them in.
 */
#include "objstore.h"

#include <string.h>

#include "../lib/diag.h"

/* Weak: linked only when the program has the remote stores (node/objstore/azure.o). */
extern int objstore_azure_new(const char *url, struct objstore **out) __attribute__((weak));
/* Weak: linked only when the program has the remote stores (node/objstore/s3.o). */
extern int objstore_s3_new(const char *url, struct objstore **out) __attribute__((weak));

int
objstore_url_new(const char *url, struct objstore **out)
{
	*out = NULL;
	if (url == NULL || url[0] == '\0')
		return diag_set(STRATA_EINVAL, "store URL: empty");
	if (strncmp(url, "azure://", 8) == 0) {
		if (objstore_azure_new == NULL)
			return diag_set(STRATA_EINVAL, "store URL %.64s: this program is linked without the "
					"remote object stores (they need libcurl, libcrypto and expat; the strata "
					"binary has them)", url);
		return objstore_azure_new(url, out);
	}
	if (strncmp(url, "s3://", 5) == 0) {
		if (objstore_s3_new == NULL)
			return diag_set(STRATA_EINVAL, "store URL %.64s: this program is linked without the "
					"remote object stores (they need libcurl, libcrypto and expat; the strata "
					"binary has them)", url);
		return objstore_s3_new(url, out);
	}
	const char *colon = strstr(url, "://");
	return diag_set(STRATA_EINVAL, "store URL %.64s: unknown scheme '%.*s' (azure://ACCOUNT/CONTAINER"
			"[/PREFIX]?endpoint=... or s3://BUCKET[/PREFIX]?region=...)", url,
			colon ? (int)(colon - url) : 0, url);
}
