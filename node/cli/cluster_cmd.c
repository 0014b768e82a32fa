/*
 * cluster_cmd.c — `strata cluster status|drain|move --cluster etcd://...`: show and steer
 * a cluster's placement through its keys in etcd (node/core/DESIGN.md, "Cluster"). A drain
 * (PREFIX/drain/ID) takes every shard off a node, for maintenance; a move
 * (PREFIX/move/NNNNN) gives one shard to the node named. Both are kept in etcd until
 * cleared (--clear), and the members obey them at their next read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cluster/cluster.h"
#include "../cluster/etcd.h"
#include "../lib/buf.h"
#include "../lib/diag.h"
#include "cli.h"

static void
cluster_usage(FILE *f)
{
	fprintf(f, "usage: strata cluster status --cluster etcd://HOST:PORT[,...][/PREFIX] [--json]\n"
		   "       strata cluster drain NODE --cluster URL [--clear]\n"
		   "       strata cluster move SHARD NODE --cluster URL\n"
		   "       strata cluster move SHARD --clear --cluster URL\n"
		   "\n"
		   "status: the members, the shard map and the overrides as etcd holds them.\n"
		   "drain:  give NODE no shard (its shards move to the others; --clear undoes it).\n"
		   "move:   give SHARD to NODE, a live member, whatever the hashing says (--clear undoes it).\n"
		   "Overrides stay in etcd until cleared; the members obey them at their next read.\n");
}

/** A key's value: the decoded JSON object, or NULL. */
static json_t *
kv_value(const json_t *kv, struct buf *tmp)
{
	if (etcd_unb64(kv, "value", tmp) != 0)
		return NULL;
	return json_loadb((const char *)tmp->data, tmp->len, 0, NULL);
}

static int
cluster_status(struct etcd *e, const char *prefix, int as_json)
{
	char p[CLUSTER_MAX_PREFIX + 2], err[512];
	int n = snprintf(p, sizeof(p), "%s/", prefix);
	struct buf end = {0}, k = {0}, v = {0};
	etcd_prefix_end(p, (size_t)n, &end);
	json_t *reply = NULL;
	int rc = etcd_call_sync(e, "kv/range",
				json_pack("{s:o, s:o}", "key", etcd_b64(p, (size_t)n), "range_end",
					  etcd_b64(end.data, end.len)),
				&reply, err, sizeof(err));
	buf_destroy(&end);
	if (rc) {
		fprintf(stderr, "strata cluster status: %s\n", err);
		return 1;
	}
	json_t *members = json_array(), *shards = json_array(), *drains = json_array(), *moves = json_array();
	json_t *kvs = json_object_get(reply, "kvs");
	size_t i;
	json_t *kv;
	json_array_foreach(kvs, i, kv) {
		if (etcd_unb64(kv, "key", &k) != 0)
			continue;
		const char *key = (const char *)k.data + n;
		json_t *val = kv_value(kv, &v);
		if (strncmp(key, "nodes/", 6) == 0 && val != NULL) {
			json_array_append(members, val);
		} else if (strncmp(key, "shards/", 7) == 0 && val != NULL) {
			json_object_set_new(val, "shard", json_integer(atoll(key + 7)));
			json_array_append(shards, val);
		} else if (strncmp(key, "drain/", 6) == 0) {
			json_array_append_new(drains, json_string(key + 6));
		} else if (strncmp(key, "move/", 5) == 0 && val != NULL) {
			json_array_append_new(moves, json_pack("{s:I, s:O}", "shard", (json_int_t)atoll(key + 5), "node",
							       json_object_get(val, "node")));
		}
		json_decref(val);
	}
	buf_destroy(&k);
	buf_destroy(&v);
	int64_t rev = etcd_int(json_object_get(reply, "header"), "revision", 0);
	json_decref(reply);
	if (as_json) {
		json_t *o = json_pack("{s:s, s:I, s:o, s:o, s:o, s:o}", "prefix", prefix, "revision", (json_int_t)rev,
				      "members", members, "shards", shards, "drained", drains, "moves", moves);
		char *s = json_dumps(o, JSON_INDENT(2));
		printf("%s\n", s);
		free(s);
		json_decref(o);
		return 0;
	}
	printf("cluster %s at etcd revision %lld: %zu member%s, %zu shard%s owned\n", prefix, (long long)rev,
	       json_array_size(members), json_array_size(members) == 1 ? "" : "s", json_array_size(shards),
	       json_array_size(shards) == 1 ? "" : "s");
	json_array_foreach(members, i, kv) {
		const char *id = json_string_value(json_object_get(kv, "id"));
		unsigned owned = 0, j2;
		json_t *sh;
		json_array_foreach(shards, j2, sh) owned += id && json_string_value(json_object_get(sh, "node")) &&
							   strcmp(id, json_string_value(json_object_get(sh, "node"))) == 0;
		int drained = 0;
		json_t *d;
		json_array_foreach(drains, j2, d) drained |= id && strcmp(id, json_string_value(d)) == 0;
		printf("  member %s %s version %s: %u shard%s%s\n", id ? id : "?",
		       json_string_value(json_object_get(kv, "url")) ?: "?",
		       json_string_value(json_object_get(kv, "version")) ?: "?", owned, owned == 1 ? "" : "s",
		       drained ? " (drained)" : "");
	}
	json_array_foreach(shards, i, kv) printf("  shard %lld: %s (epoch %lld)\n",
						  (long long)json_integer_value(json_object_get(kv, "shard")),
						  json_string_value(json_object_get(kv, "node")) ?: "?",
						  (long long)json_integer_value(json_object_get(kv, "epoch")));
	json_array_foreach(drains, i, kv) printf("  drain %s\n", json_string_value(kv));
	json_array_foreach(moves, i, kv) printf("  move shard %lld to %s\n",
						 (long long)json_integer_value(json_object_get(kv, "shard")),
						 json_string_value(json_object_get(kv, "node")) ?: "?");
	json_decref(members);
	json_decref(shards);
	json_decref(drains);
	json_decref(moves);
	return 0;
}

/** Put key = value (NULL: delete it) with no lease: an override outlives every node. */
static int
cluster_set(struct etcd *e, const char *what, const char *key, const char *value)
{
	char err[512];
	json_t *body = value != NULL ? json_pack("{s:o, s:o}", "key", etcd_b64(key, strlen(key)), "value",
						 etcd_b64(value, strlen(value)))
				     : json_pack("{s:o}", "key", etcd_b64(key, strlen(key)));
	int rc = etcd_call_sync(e, value != NULL ? "kv/put" : "kv/deleterange", body, NULL, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "strata cluster %s: %s\n", what, err);
		return 1;
	}
	return 0;
}

int
cmd_cluster(int argc, char **argv)
{
	if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
		cluster_usage(argc < 1 ? stderr : stdout);
		return argc < 1 ? 2 : 0;
	}
	const char *verb = argv[0], *url = NULL, *pos[2] = {NULL, NULL};
	int clear = 0, as_json = 0, npos = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc)
			url = argv[++i];
		else if (strncmp(argv[i], "--cluster=", 10) == 0)
			url = argv[i] + 10;
		else if (strcmp(argv[i], "--clear") == 0)
			clear = 1;
		else if (strcmp(argv[i], "--json") == 0)
			as_json = 1;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			cluster_usage(stdout);
			return 0;
		} else if (argv[i][0] != '-' && npos < 2)
			pos[npos++] = argv[i];
		else {
			fprintf(stderr, "strata cluster: unexpected argument '%s'\n", argv[i]);
			cluster_usage(stderr);
			return 2;
		}
	}
	char endpoints[2048], prefix[CLUSTER_MAX_PREFIX + 1];
	if (url == NULL) {
		fprintf(stderr, "strata cluster %s: --cluster etcd://HOST:PORT[,...][/PREFIX] is needed\n", verb);
		return 2;
	}
	if (cluster_parse_url(url, endpoints, sizeof(endpoints), prefix, sizeof(prefix)) != 0) {
		fprintf(stderr, "strata cluster %s: %s\n", verb, diag_last());
		return 2;
	}
	struct etcd_options eo = {.endpoints = endpoints, .timeout_ms = 5000};
	struct etcd *e;
	if (etcd_new(&eo, &e) != 0) {
		fprintf(stderr, "strata cluster %s: %s\n", verb, diag_last());
		return 2;
	}
	int rc = 2;
	char key[CLUSTER_MAX_PREFIX + CLUSTER_MAX_ID + 16], val[256];
	if (strcmp(verb, "status") == 0 && npos == 0) {
		rc = cluster_status(e, prefix, as_json);
	} else if (strcmp(verb, "drain") == 0 && npos == 1) {
		if (cluster_check_id(pos[0]) != 0) {
			fprintf(stderr, "strata cluster drain: %s\n", diag_last());
		} else {
			snprintf(key, sizeof(key), "%s/drain/%s", prefix, pos[0]);
			snprintf(val, sizeof(val), "{\"since\":%lld}", (long long)time(NULL));
			rc = cluster_set(e, "drain", key, clear ? NULL : val);
			if (rc == 0)
				printf("%s %s\n", clear ? "undrained" : "draining", pos[0]);
		}
	} else if (strcmp(verb, "move") == 0 && (npos == 2 || (npos == 1 && clear))) {
		char *end;
		unsigned long sh = strtoul(pos[0], &end, 10);
		if (*pos[0] == '\0' || *end != '\0' || sh > 65535) {
			fprintf(stderr, "strata cluster move: '%s' is not a shard number\n", pos[0]);
		} else if (!clear && cluster_check_id(pos[1]) != 0) {
			fprintf(stderr, "strata cluster move: %s\n", diag_last());
		} else {
			snprintf(key, sizeof(key), "%s/move/%05lu", prefix, sh);
			snprintf(val, sizeof(val), "{\"node\":\"%s\"}", clear ? "" : pos[1]);
			rc = cluster_set(e, "move", key, clear ? NULL : val);
			if (rc == 0 && clear)
				printf("shard %lu: move cleared\n", sh);
			else if (rc == 0)
				printf("shard %lu: moving to %s\n", sh, pos[1]);
		}
	} else {
		fprintf(stderr, "strata cluster: unknown command or arguments\n");
		cluster_usage(stderr);
	}
	etcd_delete(e);
	return rc;
}
