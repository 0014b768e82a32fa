/*
 * cluster.h — a node as a member of a cluster: membership, shard placement and failover
 * through etcd (etcd.h), on the server's loop.
 *
 * etcd decides who should serve a shard; the object store's epoch fence decides who can
 * acknowledge. Each node holds an etcd lease (its TTL --cluster-lease-ttl-s), kept alive
 * from the loop every TTL/3, and under it the key PREFIX/nodes/ID (its advertise URL,
 * version, start time). The desired owner of shard N is the live member with the highest
 * rendezvous score xxh3(ID, seed N) (cluster_desired). A node takes a shard it should own
 * that nobody holds by creating PREFIX/shards/NNNNN in a transaction that succeeds only
 * when the key is absent, attached to its lease, then claims it through the store's
 * epoch claim (strata_shard_claim, on the host's background executor), and writes the
 * claimed epoch into the key. A node that holds a shard another member should own now
 * (one joined) hands it off: it stops serving it (strata_shard_release), then deletes
 * the key; the desired owner creates it and claims.
 *
 * A node serves a shard (reads and appends) only while it holds the key and its lease
 * can still be alive: until TTL - TTL/5 after it *sent* the last keep-alive etcd
 * confirmed. etcd counts the TTL from when it received that keep-alive, later, so the
 * node stops first; the fifth is the margin for the two clocks' rates and a slow
 * reply. A lease that lapses (a pause, a partition, etcd down) releases every shard
 * here; a zombie that never hears from etcd again stops on its own clock, and should it
 * write anyway, the new owner's epoch claim has fenced it.
 *
 * Everything here runs on the loop's thread, but cluster_serves_now.
 */
#ifndef STRATA_CLUSTER_H
#define STRATA_CLUSTER_H

#include <jansson.h>
#include <stdint.h>

#include "../strata.h"

struct host;
struct cluster;

/** Longest node id, bytes. */
#define CLUSTER_MAX_ID 64u
/** Longest advertise URL, bytes. */
#define CLUSTER_MAX_URL 256u
/** Longest key prefix in etcd, bytes. */
#define CLUSTER_MAX_PREFIX 128u
/** The prefix of a --cluster URL that names none. */
#define CLUSTER_DEFAULT_PREFIX "/strata"

/** How to join. */
struct cluster_options {
	/** etcd://HOST:PORT[,HOST:PORT...][/PREFIX]. */
	const char *url;
	/** This node's id: [A-Za-z0-9._-], 1..CLUSTER_MAX_ID bytes. */
	const char *node_id;
	/** The URL clients reach this node at (http://HOST:PORT). */
	const char *advertise;
	/** The lease's TTL, s (1..3600). */
	uint32_t lease_ttl_s;
	/** How often the node reads the cluster's keys besides each change its watch brings, ms. */
	uint32_t poll_ms;
};

/** Split a --cluster URL into its endpoints ("HOST:PORT,...") and prefix (no trailing
 *  '/'). 0 or STRATA_EINVAL with the words in diag. */
int cluster_parse_url(const char *url, char *endpoints, size_t elen, char *prefix, size_t plen);
/** Check a node id. 0 or STRATA_EINVAL with the words in diag. */
int cluster_check_id(const char *id);

/** Join: start the lease, the node key and the placement on host's loop (the server's).
 *  The store must have been opened with serve_first = STRATA_SERVE_NONE, a remote store
 *  and wal = store. 0 or a code with the words in diag. */
int cluster_new(const struct cluster_options *o, strata *db, struct host *host, struct cluster **out);
/** Stop taking shards, stop serving, and revoke the lease (a blocking call to etcd: the
 *  other members take the shards at once instead of after the TTL). Call it once the
 *  server no longer takes requests; the loop may have stopped. */
void cluster_leave(struct cluster *c);
/** Free (after the host's executors drained). Safe on NULL. */
void cluster_delete(struct cluster *c);

/** Whether this node serves shard now: 0, yes; 421, another node owns it or nobody does
 *  yet (*owner and *owner_url: the owner etcd names, "" when none); 503, this node holds
 *  it but cannot be sure its lease is alive. */
int cluster_serving(const struct cluster *c, uint32_t shard, const char **owner, const char **owner_url);
/** 1 when cluster_serving would answer 0 (from any thread: a worker checks the shards
 *  of a key-routed batch), else 0. */
int cluster_serves_now(const struct cluster *c, uint32_t shard);
/** The cluster as GET /v1/cluster shows it (a new reference). */
json_t *cluster_json(const struct cluster *c);
/** Nonzero while etcd cannot be reached or the lease is not confirmed; why says which. */
int cluster_degraded(const struct cluster *c, const char **why);

/** What the cluster counts (for /metrics). */
struct cluster_stats {
	/** Live members (node keys) at the last read. */
	uint32_t members;
	/** Shards this node serves now. */
	uint32_t owned;
	/** Shards this node took (key created and claimed), handed off, lost with its lease. */
	uint64_t acquired, handed_off, lost;
	/** Claims that failed. */
	uint64_t claim_failures;
	/** Leases granted (1 + the times one lapsed). */
	uint64_t leases;
	/** Keep-alives sent and failed. */
	uint64_t keepalives, keepalive_failures;
	/** The last keep-alive's round trip, ns. */
	uint64_t keepalive_rtt_ns;
	/** etcd calls that failed. */
	uint64_t etcd_errors;
	/** The last etcd revision read. */
	int64_t revision;
	/** Nonzero while degraded. */
	int degraded;
};
void cluster_stats(const struct cluster *c, struct cluster_stats *out);
struct hist;
/** Histograms (ns): from the read that found a shard without an owner to this node
 *  serving it (its claim included; the TTL a dead owner's lease took to expire is not in
 *  it, since no read sees that), and of the claims alone. */
void cluster_hists(const struct cluster *c, const struct hist **takeover_ns, const struct hist **claim_ns);

/** The member of ids[0..n) (NULL-free strings) that should own shard: the highest
 *  xxh3 score, ties to the smaller id. -1 when n == 0. Stable and minimal-movement: a
 *  member that joins takes about 1/(n+1) of the shards, from every other member. */
int cluster_desired(const char *const *ids, unsigned n, uint32_t shard);

#endif /* STRATA_CLUSTER_H */
