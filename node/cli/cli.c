/*
 * cli.c — helpers shared by the subcommands of `strata`.
 */
#include "cli.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

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
		unsigned i = 0;
		while (i < sl->n && sl->ids[i] < id)
			i++;
		if (i < sl->n && sl->ids[i] == id)
			continue;
		memmove(sl->ids + i + 1, sl->ids + i, (sl->n - i) * sizeof(unsigned));
		sl->ids[i] = id;
		sl->n++;
	}
	closedir(d);
}
