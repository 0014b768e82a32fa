/*
 * store_meta.h — the STORE file: the shape of the store in a data directory (its shard
 * count, and the WAL's directory when the WAL lies outside it). Every open reads it, the
 * first one writes it, and a checkpoint writes one into its copy: it sits below both
 * store.c and checkpoint.c.
 */
#ifndef STRATA_STORE_META_H
#define STRATA_STORE_META_H

#include <stddef.h>
#include <stdint.h>

/** File in the data directory that records the store's shape. */
#define STORE_META_FILE "STORE"
/** Longest WAL root, so that <root>/shard-NNNN/<segment> fits a path. */
#define STORE_WAL_ROOT_MAX 3800

/** The shard count recorded in <dir>/STORE and, with wal, the WAL directory it records
 *  ("" for none) in wal_cap bytes; *recorded (may be NULL) says whether the file exists.
 *  STRATA_NOTFOUND when there is no store. For a store from before the file existed,
 *  the count is that of its WAL directories. */
int store_meta_read(const char *dir, uint32_t *shards, char *wal, size_t wal_cap, int *recorded);
/** Record the shard count (and a WAL root outside dir, or NULL) in <dir>/STORE (a temp
 *  file renamed into place; with sync, the file and the directory fsynced). */
int store_meta_write(const char *dir, uint32_t shards, const char *wal_root, int sync);
/** The WAL root of the store in dir: the directory its STORE records, else <dir>/wal. */
int store_wal_root(const char *dir, char *out, size_t cap);

#endif
