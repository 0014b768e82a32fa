/*
 * objstore.h — the object-store seam. All run and manifest IO goes through it.
 * Keys are '/'-separated relative names ("shard-0000/gen/...."). Implementations:
 * fs (a local directory, objstore_fs_new), azure (Azure Blob, objstore_azure_new) and s3
 * (objstore_s3_new), chosen by a store URL (objstore_url_new). Every call returns 0 or a
 * negative STRATA_E* code with a message recorded through diag_set naming the key. A remote
 * store's failure after its request was sent may or may not have been applied: it
 * returns STRATA_EIO and objstore_last_indeterminate() says so (a caller that must
 * know reads back, as the manifest path does).
 */
#ifndef STRATA_OBJSTORE_H
#define STRATA_OBJSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "../lib/diag.h"

struct objstore;
struct objstore_writer;

struct hist;

/** Requests of one operation kind of a remote store (objstore_request_stats). */
struct objstore_op_stats {
	/** Operation kind ("get", "get_range", "put", "put_if_absent", "list", "delete", ...). */
	const char *op;
	/** Attempts sent (a retry counts again). */
	uint64_t requests;
	/** Final answers 4xx (not found, exists, conflict, auth). */
	uint64_t client_errors;
	/** Attempts answered 500, 502 or 504. */
	uint64_t server_errors;
	/** Attempts answered 429 or 503 (throttled). */
	uint64_t throttled;
	/** Attempts that failed in transport (refused, reset, dropped), timeouts apart. */
	uint64_t transport_errors;
	/** Attempts that timed out. */
	uint64_t timeouts;
	/** Attempts that failed after they were sent (may have been applied). */
	uint64_t indeterminate;
	/** Attempts repeated after a retryable failure. */
	uint64_t retries;
	/** Request and response body bytes. */
	uint64_t bytes_sent, bytes_received;
	/** Request durations, ns, retries included (NULL: none kept). */
	const struct hist *latency_ns;
};

/** Called once per key by list; nonzero stops the listing and is returned. */
typedef int (*objstore_list_cb)(void *ctx, const char *key, uint64_t size);

/** The operations of one object-store implementation. */
struct objstore_ops {
	/** Read a whole object into out (appended). STRATA_NOTFOUND if absent. */
	int (*get)(struct objstore *os, const char *key, struct buf *out);
	/** Read len bytes at off into dst; *got receives the bytes read (short at the end). */
	int (*get_range)(struct objstore *os, const char *key, uint64_t off, size_t len, void *dst,
			 size_t *got);
	/** Size of an object. STRATA_NOTFOUND if absent. */
	int (*size)(struct objstore *os, const char *key, uint64_t *size);
	/** Write a whole object, durably, replacing any existing one. */
	int (*put)(struct objstore *os, const char *key, const void *data, size_t len);
	/** Write a whole object only if key does not exist; STRATA_EEXIST if it does. */
	int (*put_if_absent)(struct objstore *os, const char *key, const void *data, size_t len);
	/** Compare-and-swap: replace key only while its ETag is etag (as etag() gave it);
	 *  STRATA_ECONFLICT when it changed or is gone. NULL: not supported (fs). */
	int (*put_if_match)(struct objstore *os, const char *key, const void *data, size_t len,
			    const char *etag);
	/** The current ETag of key into etag (at most cap bytes with the NUL), an opaque
	 *  token that changes with every write; STRATA_NOTFOUND if absent. NULL: not
	 *  supported (fs). */
	int (*etag)(struct objstore *os, const char *key, char *etag, size_t cap);
	/** Start a streamed write of key; the object appears only at writer_commit. */
	int (*writer_open)(struct objstore *os, const char *key, struct objstore_writer **w);
	/** Append bytes to a streamed write. */
	int (*writer_write)(struct objstore_writer *w, const void *data, size_t len);
	/** Make the streamed object durable and visible under its key; frees w. */
	int (*writer_commit)(struct objstore_writer *w);
	/** Drop a streamed write; nothing becomes visible; frees w. */
	void (*writer_abort)(struct objstore_writer *w);
	/** Delete key. Deleting an absent key is not an error. */
	int (*del)(struct objstore *os, const char *key);
	/** Delete every key of keys (absent ones are fine), making the deletes durable once
	 *  per batch rather than once per key. NULL: del one by one. */
	int (*del_batch)(struct objstore *os, const char *const *keys, size_t n);
	/** Cut an object down to size bytes, so that a large one is freed in steps before
	 *  its delete. NULL: not supported (the delete frees it at once). */
	int (*shrink)(struct objstore *os, const char *key, uint64_t size);
	/** Call cb for every key starting with prefix, in byte order. */
	int (*list)(struct objstore *os, const char *prefix, objstore_list_cb cb, void *ctx);
	/** Remove what writes a crash interrupted left behind (never anything published);
	 *  *removed and *bytes count it. Only the store's one owner calls it, before it
	 *  writes. NULL = nothing to do. */
	int (*recover)(struct objstore *os, uint64_t *removed, uint64_t *bytes);
	/** Fill up to cap entries of out with the requests per operation kind; how many.
	 *  NULL: the store makes no requests (fs). */
	size_t (*request_stats)(struct objstore *os, struct objstore_op_stats *out, size_t cap);
	/** Release the store. */
	void (*destroy)(struct objstore *os);
};

/** An object store: ops plus whatever the implementation keeps after it. */
struct objstore {
	/** The implementation. */
	const struct objstore_ops *ops;
	/** Human-readable location for messages ("fs:/path/objects"). */
	char name[256];
};

/** Room for an ETag, with the NUL. */
#define OBJSTORE_ETAG_MAX 128

/** Open a local-directory store rooted at dir (created if missing). */
int objstore_fs_new(const char *dir, struct objstore **out);
/** Incremental writeback of a local-directory store's streamed writes (run files): the
 *  writeback of what a writer wrote is started every `bytes` bytes (default 1 MiB; 0 =
 *  never, the whole file is written back by its final fsync). Writers opened later use
 *  it. STRATA_EINVAL for another kind of store or 0 < bytes < 4096. */
int objstore_fs_set_bytes_per_sync(struct objstore *os, uint64_t bytes);
/** Whether a local-directory store fsyncs its files and directories (default 1). 0 is
 *  for a store whose WAL never syncs (STRATA_SYNC_NONE): its objects then survive a
 *  process crash (the page cache has them), not a power loss. STRATA_EINVAL for
 *  another kind of store. */
int objstore_fs_set_sync(struct objstore *os, int on);
/** Read descriptors a local-directory store keeps open for ranged reads (default 64; 0 =
 *  open and close the file on every read): the least recently used idle one closes to
 *  make room; a replaced or deleted object's is closed. STRATA_EINVAL for another kind
 *  of store, STRATA_EBUSY while reads are in flight. */
int objstore_fs_set_read_fds(struct objstore *os, unsigned n);
/** Read descriptors open now, and reads that found (hits) or opened (misses) one. Only
 *  for a local-directory store. */
void objstore_fs_read_fd_stats(struct objstore *os, unsigned *open, uint64_t *hits, uint64_t *misses);

/** Open an Azure Blob store: azure://ACCOUNT/CONTAINER[/PREFIX][?endpoint=URL&key_file=PATH&...]
 *  (node/objstore/azure.c lists the parameters). The container is created when missing;
 *  a refused key fails here, naming the account. */
int objstore_azure_new(const char *url, struct objstore **out);
/** Open an S3 store: s3://BUCKET[/PREFIX][?region=R&endpoint=URL&credentials_file=PATH&...]
 *  (node/objstore/s3.c lists the parameters). The bucket is created when missing; refused
 *  credentials fail here, naming the bucket; so does a server that does not enforce
 *  conditional writes (the probe), unless single_writer=1. */
int objstore_s3_new(const char *url, struct objstore **out);
/** A streamed write of an s3 store that publishes only if key does not exist yet
 *  (If-None-Match: * on the PutObject or CompleteMultipartUpload): STRATA_EEXIST at commit
 *  if it does. STRATA_EINVAL for another kind of store. */
int objstore_s3_writer_open_if_absent(struct objstore *os, const char *key, struct objstore_writer **w);
/** 1 when an s3 store's server enforces If-None-Match and If-Match (the probe at open),
 *  0 when they are checked by a HEAD first (single_writer=1), -1 for another kind of store. */
int objstore_s3_conditions_enforced(struct objstore *os);
/** Open the store a URL names (azure://..., s3://...). STRATA_EINVAL naming the URL for another
 *  scheme, or for a build without the remote stores (libstrata-core). */
int objstore_url_new(const char *url, struct objstore **out);
/** Whether the last failed call of a remote store on this thread may have been applied
 *  (a timeout or a dropped connection after the request was sent). */
int objstore_last_indeterminate(void);
/** Record it (the remote stores do, at the start of a call and on a failure). */
void objstore_set_indeterminate(int on);

static inline int objstore_get(struct objstore *os, const char *key, struct buf *out)
{ return os->ops->get(os, key, out); }
static inline int objstore_get_range(struct objstore *os, const char *key, uint64_t off, size_t len,
				     void *dst, size_t *got)
{ return os->ops->get_range(os, key, off, len, dst, got); }
static inline int objstore_size(struct objstore *os, const char *key, uint64_t *size)
{ return os->ops->size(os, key, size); }
static inline int objstore_put(struct objstore *os, const char *key, const void *d, size_t n)
{ return os->ops->put(os, key, d, n); }
static inline int objstore_put_if_absent(struct objstore *os, const char *key, const void *d, size_t n)
{ return os->ops->put_if_absent(os, key, d, n); }
static inline int objstore_put_if_match(struct objstore *os, const char *key, const void *d, size_t n,
					const char *etag)
{
	if (os->ops->put_if_match == NULL)
		return diag_set(STRATA_EINVAL, "%s: put_if_match %s: this store has no compare-and-swap",
				os->name, key);
	return os->ops->put_if_match(os, key, d, n, etag);
}
static inline int objstore_etag(struct objstore *os, const char *key, char *etag, size_t cap)
{
	if (os->ops->etag == NULL)
		return diag_set(STRATA_EINVAL, "%s: etag %s: this store has no ETags", os->name, key);
	return os->ops->etag(os, key, etag, cap);
}
static inline int objstore_writer_open(struct objstore *os, const char *key, struct objstore_writer **w)
{ return os->ops->writer_open(os, key, w); }
static inline int objstore_del(struct objstore *os, const char *key)
{ return os->ops->del(os, key); }
static inline int objstore_del_batch(struct objstore *os, const char *const *keys, size_t n)
{
	if (os->ops->del_batch != NULL)
		return os->ops->del_batch(os, keys, n);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		int r = os->ops->del(os, keys[i]);
		if (rc == 0)
			rc = r;
	}
	return rc;
}
static inline int objstore_list(struct objstore *os, const char *prefix, objstore_list_cb cb, void *ctx)
{ return os->ops->list(os, prefix, cb, ctx); }
static inline int objstore_recover(struct objstore *os, uint64_t *removed, uint64_t *bytes)
{
	uint64_t n = 0, b = 0;
	int rc = os->ops->recover != NULL ? os->ops->recover(os, &n, &b) : 0;
	if (removed)
		*removed = n;
	if (bytes)
		*bytes = b;
	return rc;
}
/** Most operation kinds objstore_request_stats reports. */
#define OBJSTORE_MAX_OP_KINDS 16
/** The store's requests per operation kind (0 kinds for a local store). */
static inline size_t objstore_request_stats(struct objstore *os, struct objstore_op_stats *out, size_t cap)
{ return os != NULL && os->ops->request_stats != NULL ? os->ops->request_stats(os, out, cap) : 0; }
static inline void objstore_destroy(struct objstore *os)
{ if (os) os->ops->destroy(os); }

/** Every writer starts with this header so the generic helpers below can reach its ops. */
struct objstore_writer {
	/** The store being written. */
	struct objstore *os;
};
static inline int objstore_writer_write(struct objstore_writer *w, const void *d, size_t n)
{ return w->os->ops->writer_write(w, d, n); }
static inline int objstore_writer_commit(struct objstore_writer *w)
{ return w->os->ops->writer_commit(w); }
static inline void objstore_writer_abort(struct objstore_writer *w)
{ w->os->ops->writer_abort(w); }

#endif
