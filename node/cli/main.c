/*
 * main.c — the `strata` command: --help, --version, inspect, and the dispatch to
 * serve, policy, load, repair, sim and compact.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/manifest.h"
#include "../core/run.h"
#include "../core/store.h"
#include "../core/wal.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../objstore/objstore.h"
#include "../strata.h"
#include "cli.h"


/** Most WAL segments of one shard that inspect lists. */
#define INSPECT_MAX_SEGS 256

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: strata COMMAND [ARGS]\n"
		"\n"
		"commands:\n"
		"  serve [FLAGS]                    run the node over HTTP (strata serve --help)\n"
		"  policy check [--run] FILE        validate a policy: resolved settings or every error;\n"
		"                                   --run also runs every hook on a simulated node\n"
		"  policy compare --trace FILE POLICY...\n"
		"                                   replay a workload trace under each policy in the\n"
		"                                   simulator; their costs side by side\n"
		"  calibrate [--dir DIR] [--buffered] [--store URL] [--out FILE]\n"
		"                                   measure the disk, CPU and store for compare's cost\n"
		"                                   model (strata calibrate --help)\n"
		"  load SCRIPT.lua [FLAGS]          run a scripted load test (strata load --help)\n"
		"  inspect (DIR | --store URL [DIR] | --trace FILE) [--json] [--verify]\n"
		"                                   print each shard's manifest, generations, base runs,\n"
		"                                   WAL segments and WAL objects (read-only; works on a live\n"
		"                                   node's DIR or store);\n"
		"                                   --verify also checks every run block and every WAL entry\n"
		"                                   the way an open does: exit 1 when an open would refuse DIR;\n"
		"                                   --trace FILE summarises a workload trace\n"
		"  repair DIR [--store URL] [--truncate-wal] [--json]\n"
		"                                   report what makes DIR unopenable and what repair would\n"
		"                                   do (changes nothing; exit 1 when a repair is needed);\n"
		"                                   --truncate-wal cuts each corrupt WAL segment at its first\n"
		"                                   bad entry, after copying it into DIR/repair-<UTC time>/\n"
		"                                   (refused while a node holds DIR; strata repair --help)\n"
		"  sim --seed N [--steps M]         a deterministic simulation with faults and a model\n"
		"                                   checker; prints a replay line (strata sim --help)\n"
		"  compact --shard N (--store URL | --data DIR) [--once | --interval S]\n"
		"                                   an external compactor next to a live node: merges\n"
		"                                   with the node's epoch, never fences it\n"
		"                                   (strata compact --help)\n"
		"  cluster status|drain NODE|move SHARD NODE --cluster etcd://HOST:PORT[/PREFIX]\n"
		"                                   show and steer a cluster's placement (strata cluster --help)\n"
		"  --help                           this text\n"
		"  --version                        print the version\n");
}



static json_t *
obj_json(const char *prefix, int kind, const struct manifest_obj *o)
{
	char key[256];
	manifest_obj_key(key, sizeof(key), prefix, kind, o);
	json_t *j = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I}", "id", (json_int_t)o->id, "epoch",
			      (json_int_t)o->epoch, "object", key, "bytes", (json_int_t)o->bytes, "rows",
			      (json_int_t)o->rows, "min_seq", (json_int_t)o->min_seq, "max_seq",
			      (json_int_t)o->max_seq);
	/* A part of a sorted run a split merge wrote: the id of its first part. */
	if (j != NULL && o->group != 0)
		json_object_set_new(j, "group", json_integer((json_int_t)o->group));
	return j;
}

/**
 * How an open treats segment i of a listing (the rules of the WAL's recovery, see
 * node/core/wal.h): "whole"; "void" (a newer epoch owns its positions, or those after
 * a point); "torn_tail" (an interrupted append an open truncates: the last segment
 * only, or a fenced writer's whose positions are all in generations); "invalid"
 * (an open refuses the directory).
 */
static const char *
seg_state(const struct wal_segment_info *in, int n, int i, uint64_t replay_after)
{
	const struct wal_segment_info *s = &in[i];
	int last = -1;
	for (int k = n; k-- > 0;)
		if (!(in[k].limit != UINT64_MAX && in[k].limit < in[k].first_seq)) {
			last = k;
			break;
		}
	if (s->limit != UINT64_MAX && s->limit < s->first_seq)
		return "void";
	if (s->valid_bytes >= s->bytes)
		return "whole";
	if (s->limit != UINT64_MAX && s->last_seq >= s->limit)
		return "void";
	if (s->torn && (i == last || (s->limit != UINT64_MAX && s->limit <= replay_after)))
		return "torn_tail";
	return "invalid";
}

/** Check what an open checks of shard id's WAL directory beyond its segments: the
 *  fence must not name an epoch newer than the one an open claims. 0, or -1 with a
 *  message in why. */
static int
fence_check(const char *wal_dir, int have_manifest, uint64_t writer_epoch, char *why, size_t cap)
{
	uint64_t fence = 0;
	if (wal_fence_read(wal_dir, &fence) != 0)
		return 0; /* an unreadable fence is rewritten by an open */
	uint64_t claim = have_manifest ? writer_epoch + 1 : 1;
	if (fence <= claim)
		return 0;
	snprintf(why, cap, "wal: the fence %s/epoch names epoch %" PRIu64 ", newer than the epoch "
		 "an open claims (%" PRIu64 "): the manifest is older than the WAL", wal_dir, fence, claim);
	return -1;
}

/** Ids of a list of ids as a JSON array. */
static json_t *
ids_json(const uint64_t *ids, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)ids[i]));
	return a;
}

/** Ids of added objects as a JSON array. */
static json_t *
adds_json(const struct manifest_edit_add *adds, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)adds[i].obj.id));
	return a;
}

/** manifest_walk callback: what the load read, as the "log" object. */
static int
inspect_log_cb(void *ctx, uint64_t version, int is_snapshot, const struct manifest_edit *e,
	       const struct manifest *m, size_t bytes)
{
	json_t *log = ctx;
	if (is_snapshot) {
		json_object_set_new(log, "snapshot", json_pack("{s:I, s:I, s:I, s:I}", "position",
							       (json_int_t)version, "bytes", (json_int_t)bytes,
							       "generations", (json_int_t)m->ngens, "runs",
							       (json_int_t)m->nruns));
		return 0;
	}
	json_t *en = json_pack("{s:I, s:s, s:I, s:I, s:I}", "position", (json_int_t)version, "kind",
			       e ? "edit" : "whole", "bytes", (json_int_t)bytes, "writer_epoch",
			       (json_int_t)m->writer_epoch, "replay_after", (json_int_t)m->replay_after);
	if (e != NULL) {
		json_object_set_new(en, "generations_in", adds_json(e->add_gens, e->nadd_gens));
		json_object_set_new(en, "generations_out", ids_json(e->del_gens, e->ndel_gens));
		json_object_set_new(en, "runs_in", adds_json(e->add_runs, e->nadd_runs));
		json_object_set_new(en, "runs_out", ids_json(e->del_runs, e->ndel_runs));
	}
	json_array_append_new(json_object_get(log, "entries"), en);
	return 0;
}

/** What inspect_wal_objects collects from wal_inspect_store. */
struct inspect_objs {
	/** The objects listed: the first INSPECT_MAX_SEGS, and every refused one after them. */
	json_t *arr;
	/** Objects seen, and the refused ones among them. */
	int n, refused;
};

static int
inspect_obj_cb(void *ctx, const struct wal_object_info *o)
{
	struct inspect_objs *io = ctx;
	io->n++;
	io->refused += o->refused;
	if (io->n > INSPECT_MAX_SEGS && !o->refused)
		return 0;
	const char *state = o->why[0] == '\0' ? (o->below ? "below_cursor" : "replayed")
			    : o->refused ? "invalid"
					 : "invalid_below_cursor";
	json_array_append_new(
		io->arr, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s}", "object", o->name, "kind",
				   o->kind, "epoch", (json_int_t)o->epoch, "first_seq", (json_int_t)o->first_seq,
				   "last_seq", (json_int_t)o->last_seq, "entries", (json_int_t)o->entries, "bytes",
				   (json_int_t)o->bytes, "state", state, "why", o->why));
	return 0;
}

/**
 * wal = store: the shard's WAL objects into js ("wal_objects", "wal_object_count",
 * "wal_epoch_object"; nothing when the store holds none). With verify every object is
 * read whole, and each one an open would refuse (wal_inspect_store's refused: a damaged
 * header anywhere, a damaged entry in an object it replays) is a failure.
 */
static void
inspect_wal_objects(json_t *js, struct objstore *os, const char *prefix, uint64_t replay_after,
		    int verify, int *failures)
{
	char wprefix[64];
	snprintf(wprefix, sizeof(wprefix), "%swal/", prefix);
	struct inspect_objs io = {.arr = json_array()};
	uint64_t epoch = 0;
	int n = wal_inspect_store(os, wprefix, replay_after, verify, inspect_obj_cb, &io, &epoch);
	if (n < 0) {
		json_decref(io.arr);
		json_object_set_new(js, "wal_objects_error", json_string(diag_last()));
		(*failures)++;
		return;
	}
	if (n == 0 && epoch == 0) {
		json_decref(io.arr);
		return;
	}
	if (verify)
		*failures += io.refused;
	json_object_set_new(js, "wal_objects", io.arr);
	json_object_set_new(js, "wal_object_count", json_integer(n));
	json_object_set_new(js, "wal_epoch_object", json_integer((json_int_t)epoch));
}

/** Inspect one shard into a JSON object; errors are reported inside it. */
static json_t *
inspect_shard(const char *wal_root, struct objstore *os, unsigned id, int verify, int *failures)
{
	char prefix[32], wal_dir[4096];
	snprintf(prefix, sizeof(prefix), "shard-%04u/", id);
	snprintf(wal_dir, sizeof(wal_dir), "%s/shard-%04u", wal_root, id);
	json_t *js = json_pack("{s:I}", "shard", (json_int_t)id);
	struct manifest m;
	memset(&m, 0, sizeof(m));
	uint64_t replay_after = 0, writer_epoch = 0;
	json_t *log = json_pack("{s:n, s:[]}", "snapshot", "entries");
	int rc = os ? manifest_walk(os, prefix, inspect_log_cb, log, &m) : STRATA_NOTFOUND;
	json_t *bad = verify ? json_array() : NULL;
	if (rc == 0) {
		replay_after = m.replay_after;
		writer_epoch = m.writer_epoch;
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
		json_object_set_new(json_object_get(js, "manifest"), "log", log);
		log = NULL;
		for (int k = 0; verify && k < 2; k++) {
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
		manifest_destroy(&m);
	} else if (rc == STRATA_NOTFOUND) {
		json_object_set_new(js, "manifest", json_null());
	} else {
		json_object_set_new(js, "manifest_error", json_string(diag_last()));
		(*failures)++;
	}
	json_decref(log);
	if (verify)
		json_object_set_new(js, "verify_errors", bad);

	DIR *d = wal_root[0] != '\0' ? opendir(wal_dir) : NULL; /* "": no DIR, only a store */
	int have_wal = d != NULL;
	if (d != NULL)
		closedir(d);
	static struct wal_segment_info infos[INSPECT_MAX_SEGS];
	int n = have_wal ? wal_inspect_dir(wal_dir, infos, INSPECT_MAX_SEGS) : 0;
	if (n < 0) {
		json_object_set_new(js, "wal_error", json_string(diag_last()));
		(*failures)++;
	} else {
		json_t *segs = json_array();
		for (int i = 0; i < n && i < INSPECT_MAX_SEGS; i++) {
			const struct wal_segment_info *in = &infos[i];
			json_t *lim = in->limit == UINT64_MAX ? json_null() : json_integer((json_int_t)in->limit);
			json_array_append_new(
				segs, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:s, s:b, s:s}", "file",
						in->name, "epoch", (json_int_t)in->epoch, "first_seq",
						(json_int_t)in->first_seq, "last_seq", (json_int_t)in->last_seq,
						"entries", (json_int_t)in->entries, "bytes", (json_int_t)in->bytes,
						"valid_bytes", (json_int_t)in->valid_bytes, "limit", lim, "state",
						seg_state(infos, n < INSPECT_MAX_SEGS ? n : INSPECT_MAX_SEGS, i,
							  replay_after),
						"torn", in->torn, "why", in->why));
		}
		json_object_set_new(js, "wal_segments", segs);
		json_object_set_new(js, "wal_segment_count", json_integer(n));
	}
	if (os != NULL)
		inspect_wal_objects(js, os, prefix, replay_after, verify, failures);
	if (verify) {
		/* Exactly what an open would refuse the WAL with (file and offset). */
		char why[4400];
		rc = have_wal ? wal_check_dir(wal_dir, replay_after, 0) : 0;
		if (rc != 0)
			snprintf(why, sizeof(why), "%s", diag_last());
		else if (have_wal && fence_check(wal_dir, json_is_object(json_object_get(js, "manifest")),
						 writer_epoch, why, sizeof(why)) != 0)
			rc = STRATA_EFENCED;
		json_object_set_new(js, "wal_verify", json_string(rc == 0 ? "ok" : why));
		if (rc != 0)
			(*failures)++;
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
		json_t *log = json_object_get(m, "log");
		json_t *snap = json_object_get(log, "snapshot");
		json_t *ents = json_object_get(log, "entries");
		if (snap != NULL && !json_is_null(snap))
			printf("  log: snapshot at %lld (%lld bytes, %lld generations, %lld runs), %zu entries after it\n",
			       (long long)json_integer_value(json_object_get(snap, "position")),
			       (long long)json_integer_value(json_object_get(snap, "bytes")),
			       (long long)json_integer_value(json_object_get(snap, "generations")),
			       (long long)json_integer_value(json_object_get(snap, "runs")),
			       json_array_size(ents));
		else
			printf("  log: no snapshot, %zu entries read\n", json_array_size(ents));
		size_t ei;
		json_t *en;
		json_array_foreach(ents, ei, en)
		{
			printf("    %lld %s %lld bytes  epoch %lld  replay_after %lld",
			       (long long)json_integer_value(json_object_get(en, "position")),
			       json_string_value(json_object_get(en, "kind")),
			       (long long)json_integer_value(json_object_get(en, "bytes")),
			       (long long)json_integer_value(json_object_get(en, "writer_epoch")),
			       (long long)json_integer_value(json_object_get(en, "replay_after")));
			const char *parts[4] = {"generations_in", "generations_out", "runs_in", "runs_out"};
			for (int k = 0; k < 4; k++) {
				json_t *ids = json_object_get(en, parts[k]);
				if (ids == NULL || json_array_size(ids) == 0)
					continue;
				printf("  %s", parts[k]);
				size_t ii;
				json_t *id;
				json_array_foreach(ids, ii, id)
					printf("%s%lld", ii ? "," : " ", (long long)json_integer_value(id));
			}
			printf("\n");
		}
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
	json_t *werr = json_object_get(shard, "wal_error");
	json_t *segs = json_object_get(shard, "wal_segments");
	if (werr) {
		printf("  wal: ERROR %s\n", json_string_value(werr));
	} else {
		printf("  wal: %lld segments\n",
		       (long long)json_integer_value(json_object_get(shard, "wal_segment_count")));
		size_t i;
		json_t *o;
		json_array_foreach(segs, i, o)
		{
			long long bytes = json_integer_value(json_object_get(o, "bytes"));
			long long valid = json_integer_value(json_object_get(o, "valid_bytes"));
			const char *state = json_string_value(json_object_get(o, "state"));
			const char *why = json_string_value(json_object_get(o, "why"));
			char note[512] = "";
			if (strcmp(state, "torn_tail") == 0)
				snprintf(note, sizeof(note), "  torn tail at offset %lld (%s): an open truncates "
					 "%lld bytes", valid, why, bytes - valid);
			else if (strcmp(state, "invalid") == 0)
				snprintf(note, sizeof(note), "  INVALID at offset %lld: %s", valid, why);
			else if (strcmp(state, "void") == 0)
				snprintf(note, sizeof(note), "  (%s)", why);
			printf("    %s  epoch %lld  seq %lld..%lld  entries %lld  bytes %lld%s\n",
			       json_string_value(json_object_get(o, "file")),
			       (long long)json_integer_value(json_object_get(o, "epoch")),
			       (long long)json_integer_value(json_object_get(o, "first_seq")),
			       (long long)json_integer_value(json_object_get(o, "last_seq")),
			       (long long)json_integer_value(json_object_get(o, "entries")), bytes, note);
		}
	}
	json_t *oerr = json_object_get(shard, "wal_objects_error");
	json_t *wobjs = json_object_get(shard, "wal_objects");
	if (oerr) {
		printf("  wal objects: ERROR %s\n", json_string_value(oerr));
	} else if (wobjs) {
		printf("  wal objects: %lld, the epoch object names epoch %lld\n",
		       (long long)json_integer_value(json_object_get(shard, "wal_object_count")),
		       (long long)json_integer_value(json_object_get(shard, "wal_epoch_object")));
		size_t i;
		json_t *o;
		json_array_foreach(wobjs, i, o)
		{
			const char *state = json_string_value(json_object_get(o, "state"));
			char note[512] = "";
			if (strcmp(state, "below_cursor") == 0)
				snprintf(note, sizeof(note), "  (below the cursor: %s)",
					 strcmp(json_string_value(json_object_get(o, "kind")), "batch") == 0
						 ? "the next open collects it"
						 : "a marker, kept");
			else if (strcmp(state, "invalid") == 0)
				snprintf(note, sizeof(note), "  INVALID: %s", json_string_value(json_object_get(o, "why")));
			else if (strcmp(state, "invalid_below_cursor") == 0)
				snprintf(note, sizeof(note), "  damaged, below the cursor (an open collects it unread): %s",
					 json_string_value(json_object_get(o, "why")));
			printf("    %s  %s  epoch %lld  seq %lld..%lld  entries %lld  bytes %lld%s\n",
			       json_string_value(json_object_get(o, "object")),
			       json_string_value(json_object_get(o, "kind")),
			       (long long)json_integer_value(json_object_get(o, "epoch")),
			       (long long)json_integer_value(json_object_get(o, "first_seq")),
			       (long long)json_integer_value(json_object_get(o, "last_seq")),
			       (long long)json_integer_value(json_object_get(o, "entries")),
			       (long long)json_integer_value(json_object_get(o, "bytes")), note);
		}
	}
	json_t *ve = json_object_get(shard, "verify_errors");
	json_t *wv = json_object_get(shard, "wal_verify");
	if (ve == NULL)
		return;
	int objs_ok = oerr == NULL;
	size_t oi;
	json_t *oo;
	json_array_foreach(wobjs, oi, oo) objs_ok &= strcmp(json_string_value(json_object_get(oo, "state")), "invalid") != 0;
	int ok = json_array_size(ve) == 0 && err == NULL && werr == NULL && wv != NULL &&
		 strcmp(json_string_value(wv), "ok") == 0 && objs_ok;
	printf("  verify: %s\n", ok ? "ok" : "FAILED");
	size_t i;
	json_t *o;
	if (err)
		printf("    %s\n", json_string_value(err));
	json_array_foreach(ve, i, o) printf("    %s\n", json_string_value(o));
	if (werr)
		printf("    %s\n", json_string_value(werr));
	if (wv && strcmp(json_string_value(wv), "ok") != 0)
		printf("    %s\n", json_string_value(wv));
	if (oerr)
		printf("    %s\n", json_string_value(oerr));
	json_array_foreach(wobjs, oi, oo)
	{
		if (strcmp(json_string_value(json_object_get(oo, "state")), "invalid") == 0)
			printf("    %s\n", json_string_value(json_object_get(oo, "why")));
	}
	json_array_foreach(segs, i, o)
	{
		if (strcmp(json_string_value(json_object_get(o, "state")), "torn_tail") == 0)
			printf("    note: %s has a torn tail at offset %lld, which an open truncates "
			       "(not a failure)\n",
			       json_string_value(json_object_get(o, "file")),
			       (long long)json_integer_value(json_object_get(o, "valid_bytes")));
	}
}

static int
cmd_inspect(int argc, char **argv)
{
	static const char usage_line[] = "usage: strata inspect (DIR | --store URL [DIR] | --trace FILE) [--json] [--verify]\n";
	const char *dir = NULL, *url = NULL, *trace = NULL;
	int as_json = 0, verify = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			as_json = 1;
		else if (strcmp(argv[i], "--verify") == 0)
			verify = 1;
		else if (strcmp(argv[i], "--trace") == 0) {
			if (i + 1 >= argc || argv[i + 1][0] == '\0') {
				fprintf(stderr, "strata inspect: --trace needs a trace file\n");
				return 2;
			}
			trace = argv[++i];
		} else if (strcmp(argv[i], "--store") == 0) {
			if (i + 1 >= argc || argv[i + 1][0] == '\0') {
				fprintf(stderr, "strata inspect: --store needs a store URL\n");
				return 2;
			}
			url = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("%s"
			       "  print each shard's manifest, generations, base runs, WAL segments and, with\n"
			       "  wal = store, WAL objects (read-only; works on a live node's DIR or store);\n"
			       "  --store URL reads the manifests, runs and WAL objects from that object store\n"
			       "  (azure://..., s3://...: the node's --store) instead of DIR/objects, and DIR,\n"
			       "  when given too, for the local WAL; --json as JSON; --verify also checks every\n"
			       "  run block and every WAL entry the way an open does: exit 1 when an open would\n"
			       "  refuse the store; --trace FILE summarises a workload trace instead (POST\n"
			       "  /v1/trace, strata serve --trace-file)\n",
			       usage_line);
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
	if (trace != NULL && (dir != NULL || url != NULL || verify)) {
		fprintf(stderr, "strata inspect: --trace reads a trace file alone (no DIR, --store or --verify)\n");
		return 2;
	}
	if (trace != NULL)
		return cli_inspect_trace(trace, as_json);
	if (dir == NULL && url == NULL) {
		fprintf(stderr, "%s", usage_line);
		return 2;
	}
	DIR *d = NULL;
	if (dir != NULL) {
		d = opendir(dir);
		if (d == NULL) {
			fprintf(stderr, "strata inspect: cannot open %s: %s\n", dir, strerror(errno));
			return 1;
		}
		closedir(d);
	}
	static struct cli_shards sl;
	sl.n = 0;
	char path[4096], wal_root[STORE_WAL_ROOT_MAX] = "";
	if (dir != NULL && store_wal_root(dir, wal_root, sizeof(wal_root)) != 0) {
		fprintf(stderr, "strata inspect: %s\n", diag_last());
		return 1;
	}
	if (dir != NULL)
		cli_scan_shard_dirs(wal_root, &sl);
	struct objstore *os = NULL;
	if (url != NULL) {
		if (objstore_url_new(url, &os) != 0 || cli_scan_shard_store(os, &sl) != 0) {
			fprintf(stderr, "strata inspect: %s\n", diag_last());
			objstore_destroy(os);
			return 1;
		}
	} else {
		snprintf(path, sizeof(path), "%s/objects", dir);
		cli_scan_shard_dirs(path, &sl);
		d = opendir(path); /* read-only: never create DIR/objects */
		if (d != NULL)
			closedir(d);
		if (d != NULL && sl.n > 0 && objstore_fs_new(path, &os) != 0) {
			fprintf(stderr, "strata inspect: %s\n", diag_last());
			return 1;
		}
	}
	const char *local = dir; /* NULL: a store only */
	if (dir == NULL)
		dir = url;
	int failures = 0;
	json_t *shards = json_array();
	for (unsigned i = 0; i < sl.n; i++)
		json_array_append_new(shards, inspect_shard(wal_root, os, sl.ids[i], verify, &failures));
	objstore_destroy(os);
	if (as_json) {
		json_t *root = json_pack("{s:s, s:o}", "dir", dir, "shards", shards);
		if (verify)
			json_object_set_new(root, "verify", json_string(failures ? "FAILED" : "ok"));
		json_dumpf(root, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(root);
	} else {
		printf("%s %s: %u shard%s\n", local != NULL ? "data directory" : "store", dir, sl.n,
		       sl.n == 1 ? "" : "s");
		size_t i;
		json_t *o;
		json_array_foreach(shards, i, o) print_text(o);
		json_decref(shards);
		if (verify && failures)
			printf("verify: FAILED: %d problem%s; an open of %s would fail (see `strata repair "
			       "%s%s%s`)\n", failures, failures == 1 ? "" : "s", dir,
			       local != NULL ? local : "DIR", url != NULL ? " --store " : "", url != NULL ? url : "");
		else if (verify)
			printf("verify: ok\n");
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
	if (strcmp(argv[1], "repair") == 0)
		return cmd_repair(argc - 2, argv + 2);
	if (strcmp(argv[1], "policy") == 0)
		return cmd_policy(argc - 2, argv + 2);
	if (strcmp(argv[1], "serve") == 0)
		return cmd_serve(argc - 2, argv + 2);
	if (strcmp(argv[1], "load") == 0)
		return cmd_load(argc - 2, argv + 2);
	if (strcmp(argv[1], "sim") == 0)
		return cmd_sim(argc - 2, argv + 2);
	if (strcmp(argv[1], "compact") == 0)
		return cmd_compact(argc - 2, argv + 2);
	if (strcmp(argv[1], "cluster") == 0)
		return cmd_cluster(argc - 2, argv + 2);
	if (strcmp(argv[1], "calibrate") == 0)
		return cmd_calibrate(argc - 2, argv + 2);
	fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
