/*
 * make_store_v1.c — writes tests/unit/data/store-v1 with the build before deletes
 * (commit 38111e2: WAL segment version 2, run format 1). Kept to show how the fixture was
 * made; it builds against that commit's node/strata.h and libstrata.a, not this tree's:
 *   git archive 38111e2 | tar -x -C /tmp/old && make -C /tmp/old build/libstrata.a
 *   cc -I/tmp/old/node make_store_v1.c /tmp/old/build/libstrata.a $(pkg-config --libs
 *     libzstd libisal libxxhash luajit) -lev -lpthread -lm -o make_store_v1
 *   ./make_store_v1 tests/unit/data/store-v1
 * Rows: keys r00000..r00099 merged into a base run, g00000..g00049 in a generation,
 * w00000..w00019 only in the WAL; every value "<key>=old" padded with '.' to 40 bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

static void
put(strata *db, const char *prefix, int n)
{
	for (int i = 0; i < n; i++) {
		char k[16], v[64];
		snprintf(k, sizeof(k), "%s%05d", prefix, i);
		int len = snprintf(v, sizeof(v), "%s=old", k);
		while (len < 40)
			v[len++] = '.';
		strata_row r = {k, strlen(k), v, (size_t)len};
		if (strata_append(db, 0, &r, 1) != 0) {
			fprintf(stderr, "append: %s\n", strata_last_error());
			exit(1);
		}
	}
}

int
main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	strata_options o;
	strata_options_init(&o);
	o.dir = argv[1];
	o.shards = 1;
	strata *db;
	if (strata_open(&o, &db) != 0) {
		fprintf(stderr, "open: %s\n", strata_last_error());
		return 1;
	}
	put(db, "r", 100);
	if (strata_merge(db, 0, 0, NULL) != 0)
		return 1;
	put(db, "g", 50);
	if (strata_seal(db, 0) != 0)
		return 1;
	put(db, "w", 20);
	strata_close(db);
	return 0;
}
