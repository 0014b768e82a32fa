/*
 * checkpoint.h — a consistent, openable copy of a running store (strata_checkpoint).
 *
 * Per shard, under its manifest mutex (appends never take it; a seal or a commit waits
 * for O(segments) opens): reconcile and copy the manifest, pin the view (so objects a
 * merge folds meanwhile outlive the copy) and open every WAL segment (so a seal that
 * releases segments meanwhile cannot take them away). Then, with no lock: hard-link
 * every generation and run the manifest names (a copy where the file system refuses
 * the link), copy the segments up to their size at the time (the last one cut back to
 * its last whole entry), write the manifest. Everything goes into "<dir>.partial",
 * fsynced file by file and directory by directory, and is renamed to dir at the end;
 * a failure removes the partial tree.
 */
#ifndef STRATA_CHECKPOINT_H
#define STRATA_CHECKPOINT_H

#include <stdint.h>

struct shard;

/** Suffix of the directory a checkpoint is written into before its rename. */
#define CHECKPOINT_PARTIAL_SUFFIX ".partial"

/** Write a checkpoint of the n shards of the store in src_dir into dst (which must not
 *  exist; its parent must). 0, or a negative code with a message naming the file. */
int checkpoint_write(const char *src_dir, struct shard *const *shards, uint32_t n, const char *dst);

#endif
