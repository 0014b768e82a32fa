/*
 * url.c — the object store a URL names. Compiled twice: into libstrata with the remote
 * stores, and with -DSTRATA_CORE_ONLY into libstrata-core, which has the local
 * directory only (no libcurl, libcrypto or expat).
 */
#include "objstore.h"

#include <string.h>

#include "../lib/diag.h"

int
objstore_url_new(const char *url, struct objstore **out)
{
	*out = NULL;
	if (url == NULL || url[0] == '\0')
		return diag_set(STRATA_EINVAL, "store URL: empty");
#ifndef STRATA_CORE_ONLY
	if (strncmp(url, "azure://", 8) == 0)
		return objstore_azure_new(url, out);
#else
	if (strncmp(url, "azure://", 8) == 0)
		return diag_set(STRATA_EINVAL, "store URL %.64s: this build (libstrata-core) has no remote "
				"object stores; link libstrata", url);
#endif
	if (strncmp(url, "s3://", 5) == 0)
		return diag_set(STRATA_EINVAL, "store URL %.64s: s3:// is not supported yet (azure:// is)", url);
	const char *colon = strstr(url, "://");
	return diag_set(STRATA_EINVAL, "store URL %.64s: unknown scheme '%.*s' (azure://ACCOUNT/CONTAINER"
			"[/PREFIX]?endpoint=...)", url, colon ? (int)(colon - url) : 0, url);
}

#ifdef STRATA_CORE_ONLY
int
objstore_last_indeterminate(void)
{
	return 0;
}
#endif
