/*
 * cli.c — helpers shared by the subcommands of `strata`.
 */
#include "cli.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "../objstore/objstore.h"

/** Add id to sl, keeping it sorted and distinct. */
static void
cli_shards_add(struct cli_shards *sl, unsigned id)
{
	unsigned i = 0;
	while (i < sl->n && sl->ids[i] < id)
		i++;
	if (i < sl->n && sl->ids[i] == id)
		return;
	memmove(sl->ids + i + 1, sl->ids + i, (sl->n - i) * sizeof(unsigned));
	sl->ids[i] = id;
	sl->n++;
}

void
cli_scan_shard_dirs(const char *path, struct cli_shards *sl)
{
	DIR *d = opendir(path);
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		unsigned id;
		char tail;
		if (sscanf(e->d_name, "shard-%u%c", &id, &tail) != 1 || id > 65535)
			continue;
		cli_shards_add(sl, id);
	}
	closedir(d);
}

/** objstore_list callback of cli_scan_shard_store. */
static int
cli_shard_key_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	unsigned id;
	char slash;
	if (sscanf(key, "shard-%u%c", &id, &slash) == 2 && slash == '/' && id <= 65535)
		cli_shards_add(ctx, id);
	return 0;
}

int
cli_scan_shard_store(struct objstore *os, struct cli_shards *sl)
{
	return objstore_list(os, "shard-", cli_shard_key_cb, sl);
}
