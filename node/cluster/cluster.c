/* cluster.c — membership, placement and failover through etcd leases (cluster.h). */
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "../host/host.h"
#include "../lib/buf.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/hist.h"
#include "../lib/pool.h"
#include "etcd.h"

/** Where a shard stands on this node. */
enum cl_state {
	/** Not held here. */
	CL_NONE,
	/** The create-if-absent transaction is in flight. */
	CL_ACQUIRING,
	/** The key is ours; the epoch claim runs on the background executor. */
	CL_CLAIMING,
	/** Held and claimed: served while the lease is alive. */
	CL_OWNED,
	/** Being handed off: not served; its memtable is sealed, then it is released and its
	 *  key deleted. */
	CL_HANDING,
};

static const char *const cl_state_names[] = {"none", "acquiring", "claiming", "owned", "handing_off"};

/** A member as its node key says. */
struct cl_member {
	char id[CLUSTER_MAX_ID + 1];
	char url[CLUSTER_MAX_URL + 1];
	char version[32];
	int64_t started;
	/** PREFIX/drain/ID exists: it is given no shard (unless a move names it). */
	int drained;
};

/** A shard: what etcd says and what this node does. */
struct cl_shard {
	/** The owner's id and URL in PREFIX/shards/N ("" when the key is absent). */
	char owner[CLUSTER_MAX_ID + 1];
	char owner_url[CLUSTER_MAX_URL + 1];
	/** The epoch the owner wrote (0: not yet). */
	uint64_t epoch;
	/** The key's lease and mod revision. */
	int64_t lease, mod_revision;
	/** This node's state (enum cl_state). */
	int state;
	/** The lease generation the state belongs to. */
	uint64_t gen;
	/** No acquisition before this time (after a failed claim), mono ns. */
	uint64_t retry_ns;
	/** PREFIX/move/NNNNN names this node as the shard's owner ("" when none). */
	char move_to[CLUSTER_MAX_ID + 1];
	/** When a read first found the shard without an owner (0: it has one), mono ns. */
	uint64_t unowned_since_ns;
};

struct cluster {
	struct cluster_options o;
	char node_id[CLUSTER_MAX_ID + 1];
	char advertise[CLUSTER_MAX_URL + 1];
	char prefix[CLUSTER_MAX_PREFIX + 1];
	char endpoints[ETCD_MAX_ENDPOINTS * 257];
	strata *db;
	struct host *host;
	struct ev_loop *loop;
	struct etcd *etcd;
	/** The TTL etcd granted, s (it may raise the one asked for). */
	uint32_t ttl_s;
	/** The lease (0: none), its generation, and until when it can be alive (mono ns). */
	int64_t lease_id;
	uint64_t lease_gen;
	uint64_t lease_valid_ns;
	/** A grant, keep-alive or read is in flight. */
	int granting, keeping, reading;
	/** A watch event came while a read was in flight: read again after it. */
	int reread;
	/** While etcd fails: no read before read_retry_ns; the wait doubles to 5 s. */
	uint64_t read_retry_ns, read_backoff_ns;
	/** The watch of PREFIX/ (NULL: none running). */
	struct etcd_xfer *watch;
	/** What a watch message asked for, done by kick_timer outside libcurl's callback (which
	 *  may not start or end a transfer): read again, end the watch. */
	int kick_read, kick_unwatch;
	ev_timer kick_timer;
	/** The node key was written under the current lease. */
	int joined;
	/** Reads done since the node key was written (placement waits for one). */
	unsigned reads_since_join;
	/** Leaving: no more calls. */
	int leaving;
	/** The last etcd call failed (words in why). */
	int etcd_down;
	char why[400];
	ev_timer keepalive_timer, read_timer;
	/** Members at the last read. */
	struct cl_member *members;
	unsigned nmembers;
	/** Shards of the store. */
	struct cl_shard *shards;
	uint32_t nshards;
	/** Claim jobs on the background executor. */
	unsigned claims;
	/** Seconds from a read that found a shard without an owner to this node serving it,
	 *  and the claims' own time (ns; recorded on the loop, read by /metrics there). */
	struct hist *takeover_ns, *claim_ns;
	struct cluster_stats st;
	/** When the process started (unix s). */
	int64_t started;
};

/* ---------- small helpers ---------- */

static uint64_t
now_ns(void)
{
	return env.mono_ns();
}

/** The lease can still be alive (any thread: the loop writes these with release). */
static int
lease_alive(const struct cluster *c)
{
	return __atomic_load_n(&c->lease_id, __ATOMIC_ACQUIRE) != 0 &&
	       now_ns() < __atomic_load_n(&c->lease_valid_ns, __ATOMIC_ACQUIRE);
}

/** "PREFIX/nodes/ID" or "PREFIX/shards/NNNNN" into k. */
static void
key_node(const struct cluster *c, const char *id, char *k, size_t n)
{
	snprintf(k, n, "%s/nodes/%s", c->prefix, id);
}

static void
key_shard(const struct cluster *c, uint32_t shard, char *k, size_t n)
{
	snprintf(k, n, "%s/shards/%05u", c->prefix, shard);
}

static json_t *
jkey(const char *k)
{
	return etcd_b64(k, strlen(k));
}

static json_t *
jint(int64_t v)
{
	char s[32];
	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

/** {"key", "range_end"} of every key under PREFIX/ (a new reference), or NULL. */
static json_t *
prefix_range(const struct cluster *c)
{
	char p[CLUSTER_MAX_PREFIX + 2];
	int n = snprintf(p, sizeof(p), "%s/", c->prefix);
	struct buf end = {0};
	json_t *o = etcd_prefix_end(p, (size_t)n, &end) == 0
			    ? json_pack("{s:o, s:o}", "key", etcd_b64(p, (size_t)n), "range_end",
					etcd_b64(end.data, end.len))
			    : NULL;
	buf_destroy(&end);
	return o;
}

/** The value of a shard key: {"node","url","epoch"}, base64. */
static json_t *
shard_value(const struct cluster *c, uint64_t epoch)
{
	json_t *v = json_pack("{s:s, s:s, s:I}", "node", c->node_id, "url", c->advertise, "epoch", (json_int_t)epoch);
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	json_t *b = s ? etcd_b64(s, strlen(s)) : NULL;
	free(s);
	return b;
}

static void
etcd_failed(struct cluster *c, const char *what, const char *err)
{
	c->st.etcd_errors++;
	if (!c->etcd_down)
		diag_log(LOG_LVL_WARN, "cluster: %s failed: %s", what, err);
	c->etcd_down = 1;
	snprintf(c->why, sizeof(c->why), "%s failed: %s", what, err);
}

static void
etcd_ok(struct cluster *c)
{
	if (c->etcd_down)
		diag_log(LOG_LVL_INFO, "cluster: etcd at %s answers again", etcd_endpoint(c->etcd));
	c->etcd_down = 0;
}

int
cluster_desired(const char *const *ids, unsigned n, uint32_t shard)
{
	int best = -1;
	uint64_t best_score = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t s = XXH3_64bits_withSeed(ids[i], strlen(ids[i]), shard);
		if (best < 0 || s > best_score || (s == best_score && strcmp(ids[i], ids[best]) < 0)) {
			best = (int)i;
			best_score = s;
		}
	}
	return best;
}

/** The id of the member that should own shard ("" when there is none): the live member a
 *  move names, else the rendezvous choice among the members not drained (among all of
 *  them when every one is drained). */
static const char *
desired_of(const struct cluster *c, uint32_t shard)
{
	const struct cl_shard *s = &c->shards[shard];
	const char *ids[256];
	unsigned n = 0, all = c->nmembers < 256 ? c->nmembers : 256;
	for (unsigned i = 0; i < all; i++) {
		if (s->move_to[0] != '\0' && strcmp(s->move_to, c->members[i].id) == 0)
			return c->members[i].id;
		if (!c->members[i].drained)
			ids[n++] = c->members[i].id;
	}
	if (n == 0)
		for (unsigned i = 0; i < all; i++)
			ids[n++] = c->members[i].id;
	int d = cluster_desired(ids, n, shard);
	return d < 0 ? "" : ids[d];
}

/* ---------- stopping to serve ---------- */

/** Stop serving shard here (the store refuses it from now on). */
static void
release_local(struct cluster *c, uint32_t shard, const char *why)
{
	if (strata_shard_release(c->db, shard, why) != 0)
		diag_log(LOG_LVL_WARN, "cluster: shard %u: release: %s", shard, strata_last_error());
}

/** The lease is gone or cannot be trusted: stop serving every shard held under it. */
static void
lose_all(struct cluster *c, const char *why)
{
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct cl_shard *s = &c->shards[i];
		if (s->state == CL_OWNED || s->state == CL_CLAIMING || s->state == CL_ACQUIRING) {
			if (s->state == CL_OWNED)
				c->st.lost++;
			release_local(c, i, why);
		}
		if (s->state == CL_CLAIMING)
			s->gen = 0; /* the claim in flight finishes into nothing (claim_done) */
		else
			__atomic_store_n(&s->state, CL_NONE, __ATOMIC_RELEASE);
	}
	c->st.owned = 0;
}

/* ---------- the lease ---------- */

static void start_grant(struct cluster *c);
static void start_read(struct cluster *c);
static void start_watch(struct cluster *c);
static void start_handoff(struct cluster *c, uint32_t shard);

static void
put_node_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cluster *c = ctx;
	if (rc) {
		etcd_failed(c, "writing the node key", err);
		return;
	}
	etcd_ok(c);
	if (!c->joined)
		diag_log(LOG_LVL_INFO, "cluster: joined as %s (%s), lease %llx, TTL %u s, etcd %s", c->node_id,
			 c->advertise, (unsigned long long)c->lease_id, c->o.lease_ttl_s, etcd_endpoint(c->etcd));
	c->joined = 1;
	c->reads_since_join = 0;
	start_read(c);
}

static void
put_node(struct cluster *c)
{
	char k[CLUSTER_MAX_PREFIX + CLUSTER_MAX_ID + 16];
	key_node(c, c->node_id, k, sizeof(k));
	json_t *v = json_pack("{s:s, s:s, s:s, s:I}", "id", c->node_id, "url", c->advertise, "version",
			      STRATA_VERSION, "started", (json_int_t)c->started);
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	json_t *body = s ? json_pack("{s:o, s:o, s:o}", "key", jkey(k), "value", etcd_b64(s, strlen(s)), "lease",
				     jint(c->lease_id))
			 : NULL;
	free(s);
	if (etcd_call(c->etcd, "kv/put", body, put_node_done, c) != 0)
		etcd_failed(c, "writing the node key", diag_last());
}

/** A grant in flight: when it was sent. */
struct cl_grant {
	struct cluster *c;
	uint64_t sent_ns;
};

static void
grant_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cl_grant *g = ctx;
	struct cluster *c = g->c;
	uint64_t sent = g->sent_ns;
	env.free(g);
	c->granting = 0;
	if (c->leaving)
		return;
	if (rc) {
		etcd_failed(c, "granting the lease", err);
		return;
	}
	int64_t id = etcd_int(reply, "ID", 0), ttl = etcd_int(reply, "TTL", 0);
	if (id == 0 || ttl <= 0) {
		etcd_failed(c, "granting the lease", "etcd answered no lease ID or TTL");
		return;
	}
	etcd_ok(c);
	if ((uint64_t)ttl != c->o.lease_ttl_s && (uint64_t)ttl != c->ttl_s)
		diag_log(LOG_LVL_WARN, "cluster: etcd granted a lease of %lld s for the %u s asked (its minimum is "
			 "3 heartbeats of an election timeout); the node keeps it alive and serves by %lld s",
			 (long long)ttl, c->o.lease_ttl_s, (long long)ttl);
	if ((uint64_t)ttl != c->ttl_s) {
		c->ttl_s = (uint32_t)ttl;
		ev_timer_stop(c->loop, &c->keepalive_timer);
		ev_timer_set(&c->keepalive_timer, ttl / 3.0, ttl / 3.0);
		ev_timer_start(c->loop, &c->keepalive_timer);
	}
	__atomic_store_n(&c->lease_id, id, __ATOMIC_RELEASE);
	c->lease_gen++;
	c->st.leases++;
	uint64_t ttl_ns = (uint64_t)ttl * 1000000000ull;
	__atomic_store_n(&c->lease_valid_ns, sent + ttl_ns - ttl_ns / 5, __ATOMIC_RELEASE);
	c->joined = 0;
	put_node(c);
}

static void
start_grant(struct cluster *c)
{
	if (c->granting || c->leaving)
		return;
	struct cl_grant *g = env.calloc(1, sizeof(*g));
	if (g == NULL)
		return;
	g->c = c;
	g->sent_ns = now_ns();
	json_t *body = json_pack("{s:I}", "TTL", (json_int_t)c->o.lease_ttl_s);
	if (etcd_call(c->etcd, "lease/grant", body, grant_done, g) != 0) {
		etcd_failed(c, "granting the lease", diag_last());
		env.free(g);
		return;
	}
	c->granting = 1;
}

/** A keep-alive in flight. */
struct cl_keep {
	struct cluster *c;
	uint64_t sent_ns;
	int64_t lease_id;
};

static void
keepalive_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cl_keep *k = ctx;
	struct cluster *c = k->c;
	uint64_t sent = k->sent_ns;
	int64_t id = k->lease_id;
	env.free(k);
	c->keeping = 0;
	if (c->leaving || id != c->lease_id)
		return;
	if (rc) {
		c->st.keepalive_failures++;
		etcd_failed(c, "the lease keep-alive", err);
		return;
	}
	etcd_ok(c);
	json_t *res = json_object_get(reply, "result");
	int64_t ttl = etcd_int(res ? res : reply, "TTL", 0);
	c->st.keepalive_rtt_ns = now_ns() - sent;
	if (ttl <= 0) {
		/* etcd no longer has the lease: it expired (this node was paused or cut off) and
		 * its keys are gone; other members may own its shards by now. */
		diag_log(LOG_LVL_WARN, "cluster: lease %llx expired in etcd; this node serves no shard until it "
			 "rejoins", (unsigned long long)c->lease_id);
		lose_all(c, "this node's etcd lease expired");
		__atomic_store_n(&c->lease_id, 0, __ATOMIC_RELEASE);
		c->joined = 0;
		start_grant(c);
		return;
	}
	uint64_t ttl_ns = (uint64_t)ttl * 1000000000ull;
	uint64_t until = sent + ttl_ns - ttl_ns / 5;
	if (until > c->lease_valid_ns)
		__atomic_store_n(&c->lease_valid_ns, until, __ATOMIC_RELEASE);
}

static void
keepalive_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster *c = w->data;
	if (c->leaving)
		return;
	if (c->lease_id != 0 && !lease_alive(c)) {
		/* Not confirmed in time: it can have expired in etcd. Stop serving now. */
		if (c->st.owned > 0)
			diag_log(LOG_LVL_WARN, "cluster: lease %llx not confirmed within its TTL; this node stops "
				 "serving its %u shards", (unsigned long long)c->lease_id, c->st.owned);
		lose_all(c, "this node's etcd lease could not be confirmed in time");
	}
	if (c->lease_id == 0) {
		start_grant(c);
		return;
	}
	if (c->keeping)
		return;
	struct cl_keep *k = env.calloc(1, sizeof(*k));
	if (k == NULL)
		return;
	k->c = c;
	k->sent_ns = now_ns();
	k->lease_id = c->lease_id;
	c->st.keepalives++;
	if (etcd_call(c->etcd, "lease/keepalive", json_pack("{s:o}", "ID", jint(c->lease_id)), keepalive_done, k) !=
	    0) {
		c->st.keepalive_failures++;
		etcd_failed(c, "the lease keep-alive", diag_last());
		env.free(k);
		return;
	}
	c->keeping = 1;
}

/* ---------- placement ---------- */

static void reconcile(struct cluster *c);

/** A claim on the background executor. */
struct cl_claim {
	struct cluster *c;
	uint32_t shard;
	uint64_t gen;
	int rc;
	uint64_t epoch;
	/** When it was queued, started and done (mono ns). */
	uint64_t queued_ns, start_ns, end_ns;
	char msg[400];
};

static void
claim_work(void *arg)
{
	struct cl_claim *j = arg;
	j->start_ns = now_ns();
	j->rc = strata_shard_claim(j->c->db, j->shard);
	j->end_ns = now_ns();
	if (j->rc) {
		snprintf(j->msg, sizeof(j->msg), "%s", strata_last_error());
		return;
	}
	strata_stats st;
	if (strata_shard_stats(j->c->db, j->shard, &st) == 0)
		j->epoch = st.writer_epoch;
}

static void
delete_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cluster *c = ctx;
	if (rc) {
		etcd_failed(c, "deleting a shard key", err);
		return;
	}
	etcd_ok(c);
}

/** Delete shard's key if it still is under this node's lease. */
static void
delete_key(struct cluster *c, uint32_t shard)
{
	char k[CLUSTER_MAX_PREFIX + 32];
	key_shard(c, shard, k, sizeof(k));
	json_t *body = json_pack("{s:[{s:o, s:s, s:s, s:o}], s:[{s:{s:o}}]}", "compare", "key", jkey(k), "target",
				 "LEASE", "result", "EQUAL", "lease", jint(c->lease_id), "success",
				 "request_delete_range", "key", jkey(k));
	if (etcd_call(c->etcd, "kv/txn", body, delete_done, c) != 0)
		etcd_failed(c, "deleting a shard key", diag_last());
}

static void
epoch_put_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cluster *c = ctx;
	if (rc)
		etcd_failed(c, "writing a shard's epoch", err);
}

static void
claim_done(void *arg)
{
	struct cl_claim *j = arg;
	struct cluster *c = j->c;
	struct cl_shard *s = &c->shards[j->shard];
	c->claims--;
	if (c->leaving || j->gen != c->lease_gen || s->gen != j->gen || !lease_alive(c)) {
		/* The lease it was taken under lapsed (maybe only for a while): do not serve it;
		 * the next read decides again. */
		release_local(c, j->shard, "claimed under an etcd lease that has lapsed");
		__atomic_store_n(&s->state, CL_NONE, __ATOMIC_RELEASE);
		env.free(j);
		return;
	}
	if (j->rc) {
		c->st.claim_failures++;
		diag_log(LOG_LVL_WARN, "cluster: shard %u: claim failed, key given back: %s", j->shard, j->msg);
		release_local(c, j->shard, "its claim failed");
		__atomic_store_n(&s->state, CL_NONE, __ATOMIC_RELEASE);
		s->retry_ns = now_ns() + 2000000000ull;
		delete_key(c, j->shard);
		env.free(j);
		return;
	}
	__atomic_store_n(&s->state, CL_OWNED, __ATOMIC_RELEASE);
	s->epoch = j->epoch;
	hist_record(c->claim_ns, j->end_ns - j->start_ns);
	if (s->unowned_since_ns != 0)
		hist_record(c->takeover_ns, now_ns() - s->unowned_since_ns);
	s->unowned_since_ns = 0;
	snprintf(s->owner, sizeof(s->owner), "%s", c->node_id);
	snprintf(s->owner_url, sizeof(s->owner_url), "%s", c->advertise);
	c->st.acquired++;
	c->st.owned++;
	diag_log(LOG_LVL_INFO, "cluster: shard %u: serving it (epoch %llu; claimed in %.0f ms after %.0f ms queued)",
		 j->shard, (unsigned long long)j->epoch, (double)(j->end_ns - j->start_ns) / 1e6,
		 (double)(j->start_ns - j->queued_ns) / 1e6);
	char k[CLUSTER_MAX_PREFIX + 32];
	key_shard(c, j->shard, k, sizeof(k));
	json_t *body = json_pack("{s:[{s:o, s:s, s:s, s:o}], s:[{s:{s:o, s:o, s:o}}]}", "compare", "key", jkey(k),
				 "target", "LEASE", "result", "EQUAL", "lease", jint(c->lease_id), "success",
				 "request_put", "key", jkey(k), "value", shard_value(c, j->epoch), "lease",
				 jint(c->lease_id));
	if (etcd_call(c->etcd, "kv/txn", body, epoch_put_done, c) != 0)
		etcd_failed(c, "writing a shard's epoch", diag_last());
	env.free(j);
}

/** Claim shard, whose key this node holds under its lease, on the background executor. */
static void
start_claim(struct cluster *c, uint32_t shard)
{
	struct cl_shard *s = &c->shards[shard];
	struct cl_claim *j = env.calloc(1, sizeof(*j));
	if (j == NULL) {
		delete_key(c, shard);
		return;
	}
	j->c = c;
	j->shard = shard;
	j->gen = c->lease_gen;
	j->queued_ns = now_ns();
	if (pool_submit(host_exec(c->host, HOST_BG), claim_work, claim_done, j) != 0) {
		diag_log(LOG_LVL_WARN, "cluster: shard %u: claim not queued: %s", shard, diag_last());
		env.free(j);
		delete_key(c, shard);
		return;
	}
	c->claims++;
	__atomic_store_n(&s->state, CL_CLAIMING, __ATOMIC_RELEASE);
	s->gen = c->lease_gen;
}

/** A handoff on the background executor: seal (so the next owner replays little), then
 *  release; the key goes once it is done. */
struct cl_handoff {
	struct cluster *c;
	uint32_t shard;
	int seal_rc;
	char msg[400];
};

static void
handoff_work(void *arg)
{
	struct cl_handoff *h = arg;
	h->seal_rc = strata_seal(h->c->db, h->shard);
	if (h->seal_rc)
		snprintf(h->msg, sizeof(h->msg), "%s", strata_last_error());
	release_local(h->c, h->shard, "handed off to another node");
}

static void
handoff_done(void *arg)
{
	struct cl_handoff *h = arg;
	struct cluster *c = h->c;
	if (h->seal_rc)
		diag_log(LOG_LVL_WARN, "cluster: shard %u: the seal before its handoff failed (the next owner "
			 "replays its WAL instead): %s", h->shard, h->msg);
	if (c->shards[h->shard].state == CL_HANDING)
		__atomic_store_n(&c->shards[h->shard].state, CL_NONE, __ATOMIC_RELEASE);
	if (!c->leaving)
		delete_key(c, h->shard);
	env.free(h);
}

/** Stop serving shard at once (CL_HANDING), then seal and release it off the loop. */
static void
start_handoff(struct cluster *c, uint32_t shard)
{
	__atomic_store_n(&c->shards[shard].state, CL_HANDING, __ATOMIC_RELEASE);
	struct cl_handoff *h = env.calloc(1, sizeof(*h));
	if (h != NULL) {
		h->c = c;
		h->shard = shard;
		if (pool_submit(host_exec(c->host, HOST_BG), handoff_work, handoff_done, h) == 0)
			return;
		env.free(h);
	}
	/* No job: give it up unsealed (the WAL on the store holds what was acknowledged). */
	release_local(c, shard, "handed off to another node");
	__atomic_store_n(&c->shards[shard].state, CL_NONE, __ATOMIC_RELEASE);
	delete_key(c, shard);
}

/** A create-if-absent in flight. */
struct cl_acquire {
	struct cluster *c;
	uint32_t shard;
	uint64_t gen;
};

static void
acquire_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cl_acquire *a = ctx;
	struct cluster *c = a->c;
	uint32_t shard = a->shard;
	uint64_t gen = a->gen;
	env.free(a);
	struct cl_shard *s = &c->shards[shard];
	if (s->state != CL_ACQUIRING || s->gen != gen)
		return;
	__atomic_store_n(&s->state, CL_NONE, __ATOMIC_RELEASE);
	if (rc) {
		etcd_failed(c, "taking a shard key", err);
		return;
	}
	etcd_ok(c);
	if (!json_is_true(json_object_get(reply, "succeeded")))
		return; /* another node holds it: the next read shows whom */
	if (c->leaving || gen != c->lease_gen || !lease_alive(c)) {
		delete_key(c, shard);
		return;
	}
	start_claim(c, shard);
}

static void
acquire(struct cluster *c, uint32_t shard)
{
	struct cl_acquire *a = env.calloc(1, sizeof(*a));
	if (a == NULL)
		return;
	a->c = c;
	a->shard = shard;
	a->gen = c->lease_gen;
	char k[CLUSTER_MAX_PREFIX + 32];
	key_shard(c, shard, k, sizeof(k));
	json_t *body = json_pack("{s:[{s:o, s:s, s:s, s:s}], s:[{s:{s:o, s:o, s:o}}]}", "compare", "key", jkey(k),
				 "target", "CREATE", "result", "EQUAL", "create_revision", "0", "success",
				 "request_put", "key", jkey(k), "value", shard_value(c, 0), "lease", jint(c->lease_id));
	if (etcd_call(c->etcd, "kv/txn", body, acquire_done, a) != 0) {
		etcd_failed(c, "taking a shard key", diag_last());
		env.free(a);
		return;
	}
	__atomic_store_n(&c->shards[shard].state, CL_ACQUIRING, __ATOMIC_RELEASE);
	c->shards[shard].gen = c->lease_gen;
}

/** Act on the last read: take what this node should own and nobody holds, hand off what
 *  another member should own, stop serving what another holds. */
static void
reconcile(struct cluster *c)
{
	if (c->leaving || !c->joined)
		return;
	if (!lease_alive(c)) {
		lose_all(c, "this node's etcd lease could not be confirmed in time");
		return;
	}
	uint64_t t = now_ns();
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct cl_shard *s = &c->shards[i];
		const char *want = desired_of(c, i);
		int mine_key = s->owner[0] != '\0' && s->lease == c->lease_id;
		int held = s->owner[0] != '\0';
		switch (s->state) {
		case CL_NONE:
			if (mine_key) {
				/* Ours in etcd but not served (this node stopped serving while its
				 * lease went unconfirmed, and etcd kept it): claim it again, or let
				 * it go to the member that should own it. */
				if (strcmp(want, c->node_id) == 0 && t >= s->retry_ns)
					start_claim(c, i);
				else
					delete_key(c, i);
			} else if (!held && strcmp(want, c->node_id) == 0 && t >= s->retry_ns &&
				   c->reads_since_join > 0) {
				acquire(c, i);
			}
			break;
		case CL_OWNED:
			if (held && !mine_key) {
				/* The key is another's (it was taken after our lease lapsed). */
				diag_log(LOG_LVL_WARN, "cluster: shard %u is %s's now; this node stops serving it", i,
					 s->owner);
				release_local(c, i, "another node holds it in etcd");
				__atomic_store_n(&s->state, CL_NONE, __ATOMIC_RELEASE);
				c->st.owned--;
				c->st.lost++;
			} else if (want[0] != '\0' && strcmp(want, c->node_id) != 0) {
				/* Hand off to the member that should own it: stop, then let the key go. */
				diag_log(LOG_LVL_INFO, "cluster: shard %u: handing it off to %s", i, want);
				c->st.owned--;
				c->st.handed_off++;
				start_handoff(c, i);
			}
			break;
		default:
			break;
		}
	}
}

/* ---------- reading the cluster ---------- */

static int
member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cl_member *)a)->id, ((const struct cl_member *)b)->id);
}

static void
read_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cluster *c = ctx;
	c->reading = 0;
	if (c->leaving)
		return;
	if (rc) {
		etcd_failed(c, "reading the cluster", err);
		uint64_t poll = (uint64_t)(c->o.poll_ms ? c->o.poll_ms : 500) * 1000000ull;
		c->read_backoff_ns = c->read_backoff_ns ? c->read_backoff_ns * 2 : poll;
		if (c->read_backoff_ns > 5000000000ull)
			c->read_backoff_ns = 5000000000ull;
		c->read_retry_ns = now_ns() + c->read_backoff_ns;
		reconcile(c); /* only lets go of what the lease no longer covers */
		return;
	}
	etcd_ok(c);
	c->read_backoff_ns = 0;
	c->read_retry_ns = 0;
	c->st.revision = etcd_int(json_object_get(reply, "header"), "revision", c->st.revision);
	json_t *kvs = json_object_get(reply, "kvs");
	size_t n = json_array_size(kvs);
	struct cl_member *m = env.calloc(n ? n : 1, sizeof(*m));
	if (m == NULL)
		return;
	unsigned nm = 0;
	for (uint32_t i = 0; i < c->nshards; i++) {
		c->shards[i].owner[0] = c->shards[i].owner_url[0] = c->shards[i].move_to[0] = '\0';
		c->shards[i].lease = 0;
		c->shards[i].epoch = 0;
	}
	char nodes[CLUSTER_MAX_PREFIX + 16], shards[CLUSTER_MAX_PREFIX + 16], drains[CLUSTER_MAX_PREFIX + 16],
		moves[CLUSTER_MAX_PREFIX + 16];
	int nl = snprintf(nodes, sizeof(nodes), "%s/nodes/", c->prefix);
	int sl = snprintf(shards, sizeof(shards), "%s/shards/", c->prefix);
	int dl = snprintf(drains, sizeof(drains), "%s/drain/", c->prefix);
	int ml = snprintf(moves, sizeof(moves), "%s/move/", c->prefix);
	/* The drained ids, matched to the members once they are all read. */
	char (*drained)[CLUSTER_MAX_ID + 1] = env.calloc(n ? n : 1, sizeof(*drained));
	size_t ndrained = 0;
	if (drained == NULL) {
		env.free(m);
		return;
	}
	struct buf k = {0}, v = {0};
	int self = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *kv = json_array_get(kvs, i);
		if (etcd_unb64(kv, "key", &k) != 0 || etcd_unb64(kv, "value", &v) != 0)
			continue;
		json_t *val = json_loadb((const char *)v.data, v.len, 0, NULL);
		const char *ks = (const char *)k.data;
		if (strncmp(ks, nodes, (size_t)nl) == 0) {
			const char *id = json_string_value(json_object_get(val, "id"));
			const char *url = json_string_value(json_object_get(val, "url"));
			if (id != NULL && url != NULL && strcmp(id, ks + nl) == 0 && cluster_check_id(id) == 0) {
				struct cl_member *e = &m[nm++];
				snprintf(e->id, sizeof(e->id), "%s", id);
				snprintf(e->url, sizeof(e->url), "%s", url);
				const char *ver = json_string_value(json_object_get(val, "version"));
				snprintf(e->version, sizeof(e->version), "%s", ver ? ver : "");
				e->started = (int64_t)json_integer_value(json_object_get(val, "started"));
				if (strcmp(id, c->node_id) == 0)
					self = 1;
			}
		} else if (strncmp(ks, shards, (size_t)sl) == 0) {
			char *end;
			unsigned long sh = strtoul(ks + sl, &end, 10);
			const char *node = json_string_value(json_object_get(val, "node"));
			if (*end == '\0' && sh < c->nshards && node != NULL) {
				struct cl_shard *s = &c->shards[sh];
				snprintf(s->owner, sizeof(s->owner), "%s", node);
				const char *url = json_string_value(json_object_get(val, "url"));
				snprintf(s->owner_url, sizeof(s->owner_url), "%s", url ? url : "");
				s->epoch = (uint64_t)json_integer_value(json_object_get(val, "epoch"));
				s->lease = etcd_int(kv, "lease", 0);
				s->mod_revision = etcd_int(kv, "mod_revision", 0);
			}
		} else if (strncmp(ks, drains, (size_t)dl) == 0) {
			if (cluster_check_id(ks + dl) == 0)
				snprintf(drained[ndrained++], sizeof(drained[0]), "%s", ks + dl);
		} else if (strncmp(ks, moves, (size_t)ml) == 0) {
			char *end;
			unsigned long sh = strtoul(ks + ml, &end, 10);
			const char *node = json_string_value(json_object_get(val, "node"));
			if (*end == '\0' && sh < c->nshards && node != NULL && cluster_check_id(node) == 0)
				snprintf(c->shards[sh].move_to, sizeof(c->shards[sh].move_to), "%s", node);
		}
		json_decref(val);
	}
	uint64_t t = now_ns();
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct cl_shard *s = &c->shards[i];
		if (s->owner[0] == '\0' && s->unowned_since_ns == 0)
			s->unowned_since_ns = t;
		else if (s->owner[0] != '\0' && strcmp(s->owner, c->node_id) != 0)
			s->unowned_since_ns = 0; /* another took it */
	}
	for (unsigned i = 0; i < nm; i++)
		for (size_t j = 0; j < ndrained; j++)
			if (strcmp(m[i].id, drained[j]) == 0)
				m[i].drained = 1;
	env.free(drained);
	buf_destroy(&k);
	buf_destroy(&v);
	qsort(m, nm, sizeof(*m), member_cmp);
	for (unsigned i = 0, j = 0; c->joined && (i < c->nmembers || j < nm);) {
		int d = i == c->nmembers ? 1 : j == nm ? -1 : strcmp(c->members[i].id, m[j].id);
		if (d < 0)
			diag_log(LOG_LVL_INFO, "cluster: member %s left (its lease ended)", c->members[i].id);
		else if (d > 0)
			diag_log(LOG_LVL_INFO, "cluster: member %s joined (%s)", m[j].id, m[j].url);
		i += d <= 0;
		j += d >= 0;
	}
	env.free(c->members);
	c->members = m;
	c->nmembers = nm;
	c->st.members = nm;
	if (c->joined && !self && lease_alive(c)) {
		/* Our node key is gone though the lease lives (deleted by hand): write it again. */
		put_node(c);
		return;
	}
	if (c->joined)
		c->reads_since_join++;
	reconcile(c);
	if (c->reread) {
		c->reread = 0;
		start_read(c);
	}
	start_watch(c);
}

static void
start_read(struct cluster *c)
{
	if (c->reading || c->leaving)
		return;
	json_t *body = prefix_range(c);
	if (etcd_call(c->etcd, "kv/range", body, read_done, c) != 0) {
		etcd_failed(c, "reading the cluster", diag_last());
		return;
	}
	c->reading = 1;
}

/** A watch message: any change under PREFIX/ makes the node read it all again. This runs
 *  inside libcurl's write callback, so the work waits for kick_timer. */
static void
watch_line(void *ctx, json_t *m)
{
	struct cluster *c = ctx;
	json_t *res = json_object_get(m, "result");
	if (json_object_get(m, "error") != NULL || json_is_true(json_object_get(res, "canceled")))
		c->kick_unwatch = 1; /* refused (a compacted start revision, say): start another */
	else if (json_array_size(json_object_get(res, "events")) > 0)
		c->kick_read = 1; /* not "created", nor a progress notice */
	else
		return;
	if (!ev_is_active(&c->kick_timer)) {
		ev_timer_set(&c->kick_timer, 0., 0.);
		ev_timer_start(c->loop, &c->kick_timer);
	}
}

static void
kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster *c = w->data;
	if (c->leaving)
		return;
	if (c->kick_unwatch && c->watch != NULL) {
		etcd_cancel(c->etcd, c->watch);
		c->watch = NULL;
	}
	c->kick_unwatch = 0;
	if (c->kick_read) {
		c->kick_read = 0;
		if (c->reading)
			c->reread = 1;
		else
			start_read(c);
	}
}

static void
watch_done(void *ctx, int rc, json_t *reply, const char *err)
{
	struct cluster *c = ctx;
	c->watch = NULL; /* the next read starts another */
	diag_log(LOG_LVL_DEBUG, "cluster: the watch ended: %s", err);
}

/** Watch PREFIX/ from the revision after the last read, unless a watch runs. */
static void
start_watch(struct cluster *c)
{
	if (c->watch != NULL || c->leaving || !c->joined || c->st.revision <= 0)
		return;
	json_t *range = prefix_range(c);
	if (range != NULL)
		json_object_set_new(range, "start_revision", jint(c->st.revision + 1));
	json_t *body = range != NULL ? json_pack("{s:o}", "create_request", range) : NULL;
	if (etcd_stream(c->etcd, "watch", body, watch_line, watch_done, c, &c->watch) != 0)
		c->watch = NULL;
}

static void
read_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster *c = w->data;
	if (!c->joined) {
		if (c->lease_id == 0)
			start_grant(c);
		else if (!c->granting)
			put_node(c);
		reconcile(c);
		return;
	}
	if (now_ns() < c->read_retry_ns) {
		reconcile(c); /* etcd is failing: back off, but let go of what the lease no longer covers */
		return;
	}
	start_read(c);
}

/* ---------- the interface ---------- */

int
cluster_check_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n > CLUSTER_MAX_ID)
		return diag_set(STRATA_EINVAL, "the node id must be 1..%u bytes", CLUSTER_MAX_ID);
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
		      ch == '_' || ch == '-'))
			return diag_set(STRATA_EINVAL, "the node id '%s' has '%c'; use letters, digits, '.', '_' "
					"and '-'", id, ch);
	}
	return 0;
}

int
cluster_parse_url(const char *url, char *endpoints, size_t elen, char *prefix, size_t plen)
{
	const char *scheme = "etcd://";
	if (url == NULL || strncmp(url, scheme, strlen(scheme)) != 0)
		return diag_set(STRATA_EINVAL, "--cluster '%s' is not etcd://HOST:PORT[,HOST:PORT...][/PREFIX]",
				url ? url : "");
	const char *h = url + strlen(scheme);
	size_t hn = strcspn(h, "/");
	if (hn == 0 || hn >= elen)
		return diag_set(STRATA_EINVAL, "--cluster '%s' names no etcd endpoint (HOST:PORT)", url);
	memcpy(endpoints, h, hn);
	endpoints[hn] = '\0';
	const char *p = h + hn;
	size_t pn = strlen(p);
	while (pn > 1 && p[pn - 1] == '/')
		pn--;
	if (pn <= 1) {
		snprintf(prefix, plen, "%s", CLUSTER_DEFAULT_PREFIX);
		return 0;
	}
	if (pn >= plen || pn > CLUSTER_MAX_PREFIX)
		return diag_set(STRATA_EINVAL, "--cluster '%s': the prefix is over %u bytes", url, CLUSTER_MAX_PREFIX);
	memcpy(prefix, p, pn);
	prefix[pn] = '\0';
	return 0;
}

int
cluster_new(const struct cluster_options *o, strata *db, struct host *host, struct cluster **out)
{
	*out = NULL;
	if (cluster_check_id(o->node_id) != 0)
		return STRATA_EINVAL;
	if (o->advertise == NULL || strlen(o->advertise) > CLUSTER_MAX_URL ||
	    strncmp(o->advertise, "http://", 7) != 0)
		return diag_set(STRATA_EINVAL, "--advertise must be the http:// URL clients reach this node at "
				"(at most %u bytes)", CLUSTER_MAX_URL);
	if (o->lease_ttl_s < 1 || o->lease_ttl_s > 3600)
		return diag_set(STRATA_EINVAL, "--cluster-lease-ttl-s must be 1..3600");
	struct cluster *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "cluster: out of memory");
	c->o = *o;
	snprintf(c->node_id, sizeof(c->node_id), "%s", o->node_id);
	snprintf(c->advertise, sizeof(c->advertise), "%s", o->advertise);
	int rc = cluster_parse_url(o->url, c->endpoints, sizeof(c->endpoints), c->prefix, sizeof(c->prefix));
	if (rc) {
		env.free(c);
		return rc;
	}
	c->db = db;
	c->host = host;
	c->loop = host_loop(host);
	c->nshards = strata_shards(db);
	c->started = (int64_t)time(NULL);
	c->ttl_s = o->lease_ttl_s;
	if ((c->shards = env.calloc(c->nshards ? c->nshards : 1, sizeof(*c->shards))) == NULL ||
	    hist_new_latency(&c->takeover_ns) != 0 || hist_new_latency(&c->claim_ns) != 0) {
		hist_delete(c->takeover_ns);
		hist_delete(c->claim_ns);
		env.free(c->shards);
		env.free(c);
		return diag_set(STRATA_ENOMEM, "cluster: out of memory");
	}
	struct etcd_options eo = {.loop = c->loop, .endpoints = c->endpoints,
				  .timeout_ms = (long)(o->lease_ttl_s * 1000 / 3 > 0 ? o->lease_ttl_s * 1000 / 3 : 1000)};
	if ((rc = etcd_new(&eo, &c->etcd)) != 0) {
		env.free(c->shards);
		env.free(c);
		return rc;
	}
	double ka = o->lease_ttl_s / 3.0;
	ev_timer_init(&c->keepalive_timer, keepalive_cb, ka, ka);
	c->keepalive_timer.data = c;
	double rd = (o->poll_ms ? o->poll_ms : 500) / 1000.0;
	ev_timer_init(&c->read_timer, read_cb, rd, rd);
	c->read_timer.data = c;
	ev_timer_init(&c->kick_timer, kick_cb, 0., 0.);
	c->kick_timer.data = c;
	ev_timer_start(c->loop, &c->keepalive_timer);
	ev_timer_start(c->loop, &c->read_timer);
	start_grant(c);
	*out = c;
	return 0;
}

void
cluster_leave(struct cluster *c)
{
	if (c == NULL || c->leaving)
		return;
	c->leaving = 1;
	ev_timer_stop(c->loop, &c->keepalive_timer);
	ev_timer_stop(c->loop, &c->read_timer);
	ev_timer_stop(c->loop, &c->kick_timer);
	if (c->watch != NULL) {
		etcd_cancel(c->etcd, c->watch);
		c->watch = NULL;
	}
	for (uint32_t i = 0; i < c->nshards; i++)
		if (c->shards[i].state != CL_NONE)
			release_local(c, i, "this node is leaving the cluster");
	if (c->lease_id != 0) {
		char err[512];
		if (etcd_call_sync(c->etcd, "lease/revoke", json_pack("{s:o}", "ID", jint(c->lease_id)), NULL, err,
				   sizeof(err)) != 0)
			diag_log(LOG_LVL_WARN, "cluster: revoking the lease failed (its keys go after the TTL): %s",
				 err);
		else
			diag_log(LOG_LVL_INFO, "cluster: left; lease %llx revoked", (unsigned long long)c->lease_id);
	}
	__atomic_store_n(&c->lease_id, 0, __ATOMIC_RELEASE);
	c->st.owned = 0;
}

void
cluster_delete(struct cluster *c)
{
	if (c == NULL)
		return;
	cluster_leave(c);
	etcd_delete(c->etcd);
	hist_delete(c->takeover_ns);
	hist_delete(c->claim_ns);
	env.free(c->members);
	env.free(c->shards);
	env.free(c);
}

int
cluster_serving(const struct cluster *c, uint32_t shard, const char **owner, const char **owner_url)
{
	static const char none[] = "";
	*owner = *owner_url = none;
	if (shard >= c->nshards)
		return 421;
	const struct cl_shard *s = &c->shards[shard];
	if (s->state == CL_OWNED) {
		if (lease_alive(c))
			return 0;
		*owner = c->node_id;
		*owner_url = c->advertise;
		return 503;
	}
	if (s->owner[0] != '\0' && strcmp(s->owner, c->node_id) != 0) {
		*owner = s->owner;
		*owner_url = s->owner_url;
	}
	return 421;
}

int
cluster_serves_now(const struct cluster *c, uint32_t shard)
{
	return shard < c->nshards && __atomic_load_n(&c->shards[shard].state, __ATOMIC_ACQUIRE) == CL_OWNED &&
	       lease_alive(c);
}

int
cluster_degraded(const struct cluster *c, const char **why)
{
	if (c->etcd_down) {
		*why = c->why;
		return 1;
	}
	if (!lease_alive(c)) {
		*why = c->lease_id ? "the etcd lease is not confirmed" : "no etcd lease yet";
		return 1;
	}
	*why = "";
	return 0;
}

void
cluster_hists(const struct cluster *c, const struct hist **takeover_ns, const struct hist **claim_ns)
{
	*takeover_ns = c->takeover_ns;
	*claim_ns = c->claim_ns;
}

void
cluster_stats(const struct cluster *c, struct cluster_stats *out)
{
	*out = c->st;
	const char *why;
	out->degraded = cluster_degraded(c, &why);
}

json_t *
cluster_json(const struct cluster *c)
{
	const char *why;
	int degraded = cluster_degraded(c, &why);
	uint64_t t = now_ns();
	json_t *members = json_array();
	for (unsigned i = 0; i < c->nmembers; i++)
		json_array_append_new(members, json_pack("{s:s, s:s, s:s, s:I, s:b}", "id", c->members[i].id, "url",
							 c->members[i].url, "version", c->members[i].version,
							 "started", (json_int_t)c->members[i].started, "drained",
							 c->members[i].drained));
	json_t *shards = json_array();
	for (uint32_t i = 0; i < c->nshards; i++) {
		const struct cl_shard *s = &c->shards[i];
		const char *o, *u;
		int serving = cluster_serving(c, i, &o, &u) == 0;
		json_t *e = json_pack("{s:I, s:s?, s:s?, s:I, s:s, s:s?, s:b, s:s}", "shard", (json_int_t)i, "owner",
				      s->owner[0] ? s->owner : NULL, "owner_url", s->owner_url[0] ? s->owner_url : NULL,
				      "epoch", (json_int_t)s->epoch, "desired", desired_of(c, i), "moved_to",
				      s->move_to[0] ? s->move_to : NULL, "serving_here", serving, "state_here",
				      cl_state_names[s->state]);
		json_array_append_new(shards, e);
	}
	int64_t valid_ms = lease_alive(c) ? (int64_t)((c->lease_valid_ns - t) / 1000000ull) : 0;
	char lease[32];
	snprintf(lease, sizeof(lease), "%llx", (unsigned long long)c->lease_id);
	return json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:I, s:I}, s:b, s:s, s:I, s:I, s:o, s:o}", "node", c->node_id,
			 "advertise", c->advertise, "etcd", etcd_endpoint(c->etcd), "prefix", c->prefix, "lease",
			 "id", lease, "ttl_s", (json_int_t)(c->ttl_s ? c->ttl_s : c->o.lease_ttl_s), "valid_for_ms", (json_int_t)valid_ms,
			 "degraded", degraded, "why", why, "revision", (json_int_t)c->st.revision, "shards_served",
			 (json_int_t)c->st.owned, "members", members, "shards", shards);
}
