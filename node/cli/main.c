/*
 * main.c — the `strata` command: --help, --version, inspect.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/manifest.h"
#include "../core/run.h"
#include "../core/wal.h"
#include "../lib/diag.h"
#include "../objstore/objstore.h"
#include "../strata.h"

int cmd_policy(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_load(int argc, char **argv);

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: strata COMMAND [ARGS]\n"
		"\n"
		"commands:\n"
		"  serve [FLAGS]                    run the node over HTTP (strata serve --help)\n"
		"  policy check FILE                validate a policy: resolved settings or every error\n"
		"  load SCRIPT.lua [FLAGS]          run a scripted load test (strata load --help)\n"
		"  inspect DIR [--json] [--verify]  print each shard's manifest, generations, base runs\n"
		"                                   and WAL range (read-only; works on a live node's DIR)\n"
		"  --help                           this text\n"
		"  --version                        print the version\n");
}

/** Shard numbers found under DIR/wal and DIR/objects. */
struct shard_list {
	/** Sorted, distinct shard numbers. */
	unsigned ids[65536];
	unsigned n;
};

static void
scan_shard_dirs(const char *path, struct shard_list *sl)
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

static json_t *
obj_json(const char *prefix, int kind, const struct manifest_obj *o)
{
	char key[256];
	manifest_obj_key(key, sizeof(key), prefix, kind, o);
	return json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I}", "id", (json_int_t)o->id, "epoch",
			 (json_int_t)o->epoch, "object", key, "bytes", (json_int_t)o->bytes, "rows",
			 (json_int_t)o->rows, "min_seq", (json_int_t)o->min_seq, "max_seq",
			 (json_int_t)o->max_seq);
}

/** Inspect one shard into a JSON object; errors are reported inside it. */
static json_t *
inspect_shard(const char *dir, struct objstore *os, unsigned id, int verify, int *failures)
{
	char prefix[32], wal_dir[4096];
	snprintf(prefix, sizeof(prefix), "shard-%04u/", id);
	snprintf(wal_dir, sizeof(wal_dir), "%s/wal/shard-%04u", dir, id);
	json_t *js = json_pack("{s:I}", "shard", (json_int_t)id);
	struct manifest m;
	memset(&m, 0, sizeof(m));
	int rc = os ? manifest_load(os, prefix, &m) : STRATA_NOTFOUND;
	if (rc == 0) {
		json_t *gens = json_array(), *runs = json_array();
		for (uint32_t i = 0; i < m.ngens; i++)
			json_array_append_new(gens, obj_json(prefix, MANIFEST_GEN, &m.gens[i]));
		for (uint32_t i = 0; i < m.nruns; i++)
			json_array_append_new(runs, obj_json(prefix, MANIFEST_RUN, &m.runs[i]));
		json_object_set_new(js, "manifest",
				    json_pack("{s:I, s:I, s:I, s:I, s:o, s:o}", "version",
					      (json_int_t)m.version, "writer_epoch",
					      (json_int_t)m.writer_epoch,
					      "replay_after_wal_entry_position", (json_int_t)m.replay_after,
					      "next_generation", (json_int_t)m.next_generation,
					      "flushed_generations", gens, "base_runs", runs));
		if (verify) {
			json_t *bad = json_array();
			for (int k = 0; k < 2; k++) {
				uint32_t n = k ? m.nruns : m.ngens;
				for (uint32_t i = 0; i < n; i++) {
					char key[256];
					manifest_obj_key(key, sizeof(key), prefix, k ? MANIFEST_RUN : MANIFEST_GEN,
							 k ? &m.runs[i] : &m.gens[i]);
					struct run_meta meta;
					if (run_verify(os, key, &meta) != 0) {
						json_array_append_new(bad, json_string(diag_last()));
						(*failures)++;
					}
				}
			}
			json_object_set_new(js, "verify_errors", bad);
		}
		manifest_destroy(&m);
	} else if (rc == STRATA_NOTFOUND) {
		json_object_set_new(js, "manifest", json_null());
	} else {
		json_object_set_new(js, "manifest_error", json_string(diag_last()));
		(*failures)++;
	}
	struct wal_segment_info infos[256];
	int n = wal_inspect_dir(wal_dir, infos, 256);
	if (n < 0) {
		json_object_set_new(js, "wal_error", json_string(diag_last()));
		(*failures)++;
	} else {
		json_t *segs = json_array();
		for (int i = 0; i < n && i < 256; i++)
			json_array_append_new(segs, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "file",
							      infos[i].name, "first_seq",
							      (json_int_t)infos[i].first_seq, "last_seq",
							      (json_int_t)infos[i].last_seq, "entries",
							      (json_int_t)infos[i].entries, "bytes",
							      (json_int_t)infos[i].bytes, "valid_bytes",
							      (json_int_t)infos[i].valid_bytes));
		json_object_set_new(js, "wal_segments", segs);
		json_object_set_new(js, "wal_segment_count", json_integer(n));
	}
	return js;
}

static void
print_text(json_t *shard)
{
	printf("shard %lld\n", (long long)json_integer_value(json_object_get(shard, "shard")));
	json_t *m = json_object_get(shard, "manifest");
	json_t *err = json_object_get(shard, "manifest_error");
	if (err) {
		printf("  manifest: ERROR %s\n", json_string_value(err));
	} else if (m == NULL || json_is_null(m)) {
		printf("  manifest: none\n");
	} else {
		printf("  manifest: version %lld, writer_epoch %lld, replay_after %lld, next_generation %lld\n",
		       (long long)json_integer_value(json_object_get(m, "version")),
		       (long long)json_integer_value(json_object_get(m, "writer_epoch")),
		       (long long)json_integer_value(json_object_get(m, "replay_after_wal_entry_position")),
		       (long long)json_integer_value(json_object_get(m, "next_generation")));
		const char *lists[2] = {"flushed_generations", "base_runs"};
		for (int k = 0; k < 2; k++) {
			json_t *arr = json_object_get(m, lists[k]);
			printf("  %s: %zu\n", lists[k], json_array_size(arr));
			size_t i;
			json_t *o;
			json_array_foreach(arr, i, o)
			{
				printf("    %s  rows %lld  bytes %lld  seq %lld..%lld\n",
				       json_string_value(json_object_get(o, "object")),
				       (long long)json_integer_value(json_object_get(o, "rows")),
				       (long long)json_integer_value(json_object_get(o, "bytes")),
				       (long long)json_integer_value(json_object_get(o, "min_seq")),
				       (long long)json_integer_value(json_object_get(o, "max_seq")));
			}
		}
	}
	json_t *ve = json_object_get(shard, "verify_errors");
	if (ve) {
		size_t i;
		json_t *o;
		printf("  verify: %s\n", json_array_size(ve) ? "FAILED" : "ok");
		json_array_foreach(ve, i, o) printf("    %s\n", json_string_value(o));
	}
	json_t *werr = json_object_get(shard, "wal_error");
	if (werr) {
		printf("  wal: ERROR %s\n", json_string_value(werr));
		return;
	}
	json_t *segs = json_object_get(shard, "wal_segments");
	printf("  wal: %lld segments\n", (long long)json_integer_value(json_object_get(shard, "wal_segment_count")));
	size_t i;
	json_t *o;
	json_array_foreach(segs, i, o)
	{
		long long bytes = json_integer_value(json_object_get(o, "bytes"));
		long long valid = json_integer_value(json_object_get(o, "valid_bytes"));
		printf("    %s  seq %lld..%lld  entries %lld  bytes %lld%s\n",
		       json_string_value(json_object_get(o, "file")),
		       (long long)json_integer_value(json_object_get(o, "first_seq")),
		       (long long)json_integer_value(json_object_get(o, "last_seq")),
		       (long long)json_integer_value(json_object_get(o, "entries")), bytes,
		       valid < bytes ? "  (invalid tail)" : "");
	}
}

static int
cmd_inspect(int argc, char **argv)
{
	const char *dir = NULL;
	int as_json = 0, verify = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			as_json = 1;
		else if (strcmp(argv[i], "--verify") == 0)
			verify = 1;
		else if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "strata inspect: unknown flag %s\n", argv[i]);
			return 2;
		} else if (dir == NULL)
			dir = argv[i];
		else {
			fprintf(stderr, "strata inspect: one directory only\n");
			return 2;
		}
	}
	if (dir == NULL) {
		fprintf(stderr, "usage: strata inspect DIR [--json] [--verify]\n");
		return 2;
	}
	DIR *d = opendir(dir);
	if (d == NULL) {
		fprintf(stderr, "strata inspect: cannot open %s: no such data directory\n", dir);
		return 1;
	}
	closedir(d);
	static struct shard_list sl;
	sl.n = 0;
	char path[4096];
	snprintf(path, sizeof(path), "%s/wal", dir);
	scan_shard_dirs(path, &sl);
	snprintf(path, sizeof(path), "%s/objects", dir);
	scan_shard_dirs(path, &sl);
	struct objstore *os = NULL;
	if (sl.n > 0 && objstore_fs_new(path, &os) != 0) {
		fprintf(stderr, "strata inspect: %s\n", diag_last());
		return 1;
	}
	int failures = 0;
	json_t *shards = json_array();
	for (unsigned i = 0; i < sl.n; i++)
		json_array_append_new(shards, inspect_shard(dir, os, sl.ids[i], verify, &failures));
	objstore_destroy(os);
	if (as_json) {
		json_t *root = json_pack("{s:s, s:o}", "dir", dir, "shards", shards);
		json_dumpf(root, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(root);
	} else {
		printf("data directory %s: %u shard%s\n", dir, sl.n, sl.n == 1 ? "" : "s");
		size_t i;
		json_t *o;
		json_array_foreach(shards, i, o) print_text(o);
		json_decref(shards);
	}
	return failures ? 1 : 0;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("strata %s\n", STRATA_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "inspect") == 0)
		return cmd_inspect(argc - 2, argv + 2);
	if (strcmp(argv[1], "policy") == 0)
		return cmd_policy(argc - 2, argv + 2);
	if (strcmp(argv[1], "serve") == 0)
		return cmd_serve(argc - 2, argv + 2);
	if (strcmp(argv[1], "load") == 0)
		return cmd_load(argc - 2, argv + 2);
	fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
