/*
 * strata.c — the public API (strata.h), in one place: a handle is a core store, the
 * host it runs on and, with options.policy, the policy runtime on that host's loop (or
 * on a second host's). strata_open creates its own host (a loop thread and a background
 * executor when a policy runs, an inline host without threads otherwise); `strata
 * serve` and `strata load --embedded` make two hosts, one whose loop serves their
 * clients and one with a loop thread for the runtime, and use strata_open_on
 * (strata_host.h).
 *
 * Built with STRATA_CORE_ONLY (libstrata-core.a), it has neither host nor runtime and
 * needs neither libev nor LuaJIT; options.policy is then refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/store.h"
#include "lib/buf.h"
#include "lib/diag.h"
#include "lib/env.h"
#include "strata.h"
#ifndef STRATA_CORE_ONLY
#include "policy/runtime.h"
#include "strata_host.h"
#endif

struct strata {
	/** The engine. */
	struct store *store;
	/** The environment the handle was opened in (options.env_ops; NULL: default). */
	struct env_ops *env_ops;
#ifndef STRATA_CORE_ONLY
	/** The host the handle runs on. */
	struct host *host;
	/** The handle created host and deletes it at close. */
	int own_host;
	/** The host the policy runtime runs on (host, or strata_runtime_options.host). */
	struct host *rt_host;
	/** The policy runtime on rt_host's loop, or NULL. */
	struct runtime *rt;
#endif
};

void
strata_options_init(strata_options *o)
{
	memset(o, 0, sizeof(*o));
	o->shards = 0;
	o->sync = STRATA_SYNC_FSYNC;
	o->sync_interval_ms = 100;
	o->max_value_bytes = 64ull << 20;
	o->wal_segment_bytes = 64ull << 20;
	o->block_bytes = 64u << 10;
	o->zstd_level = 1;
	o->bloom_bits_per_key = 10;
	o->manifest_keep = 4;
	o->merge_max_inputs = 8;
	o->delete_bytes_per_s = 256ull << 20;
}

#ifndef STRATA_CORE_ONLY
/** Arguments of the runtime's start on the loop thread. */
struct rt_start {
	/** In. */
	const strata_options *o;
	const struct strata_runtime_options *ro;
	strata *db;
	/** Out. */
	int rc;
	char err[1024];
};

static void
rt_start_on_loop(void *arg)
{
	struct rt_start *c = arg;
	struct runtime_options ro;
	memset(&ro, 0, sizeof(ro));
	ro.db = c->db->store;
	ro.host = c->db->rt_host;
	ro.policy_path = c->o->policy[0] ? c->o->policy : NULL;
	ro.watch_file = c->ro != NULL ? c->ro->watch_file : c->o->policy[0] != '\0';
	c->rc = runtime_new(&ro, &c->db->rt, c->err, sizeof(c->err));
}

static void
rt_stop_on_loop(void *arg)
{
	strata *db = arg;
	runtime_delete(db->rt);
	db->rt = NULL;
}

int
strata_open_on(const strata_options *o, struct host *h, const struct strata_runtime_options *ro,
	       strata **out)
{
	if (out == NULL || h == NULL || o == NULL)
		return diag_set(STRATA_EINVAL, "strata_open: options, an output and a host are required");
	*out = NULL;
	struct env_ops *prev = env_enter((struct env_ops *)o->env_ops);
	strata *db = env.calloc(1, sizeof(*db));
	if (db == NULL) {
		env_leave(prev);
		return diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	}
	db->host = h;
	db->rt_host = ro != NULL && ro->host != NULL ? ro->host : h;
	db->env_ops = (struct env_ops *)o->env_ops;
	int rc = store_open(o, &db->store);
	if (rc == 0 && o->policy != NULL) {
		/* The runtime's watchers live on the loop: start it from the loop's thread. */
		struct rt_start c = {.o = o, .ro = ro, .db = db};
		host_invoke(db->rt_host, rt_start_on_loop, &c);
		rc = c.rc ? diag_set(c.rc < 0 ? c.rc : STRATA_EINVAL, "policy %s: %s",
				     o->policy[0] ? o->policy : "(built-in)", c.err)
			  : 0;
	}
	if (rc) {
		store_close(db->store);
		env.free(db);
		env_leave(prev);
		return rc;
	}
	env_leave(prev);
	*out = db;
	return 0;
}

int
strata_open(const strata_options *o, strata **out)
{
	if (o == NULL || out == NULL)
		return diag_set(STRATA_EINVAL, "strata_open: options and an output are required");
	*out = NULL;
	/* Without a policy nothing runs in the background: a host without threads. */
	struct host_options ho;
	memset(&ho, 0, sizeof(ho));
	ho.mode = o->policy != NULL ? HOST_THREADED : HOST_INLINE;
	ho.loop_thread = o->policy != NULL;
	ho.threads[HOST_FG] = 1;
	struct host *h = NULL;
	/* The host's threads run in the store's environment. */
	struct env_ops *prev = env_enter((struct env_ops *)o->env_ops);
	int rc = host_new(&ho, &h);
	if (rc == 0)
		rc = strata_open_on(o, h, NULL, out);
	if (rc)
		host_delete(h);
	env_leave(prev);
	if (rc)
		return rc;
	(*out)->own_host = 1;
	return 0;
}

struct host *
strata_host(strata *db)
{
	return db->host;
}

struct host *
strata_runtime_host(strata *db)
{
	return db->rt_host;
}

struct runtime *
strata_runtime(strata *db)
{
	return db->rt;
}

void
strata_runtime_stop(strata *db)
{
	if (db == NULL || db->rt == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	host_invoke(db->rt_host, rt_stop_on_loop, db);
	env_leave(prev);
}

struct store *
strata_store(strata *db)
{
	return db->store;
}

void
strata_close(strata *db)
{
	if (db == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	if (db->rt != NULL)
		host_invoke(db->rt_host, rt_stop_on_loop, db);
	store_close(db->store);
	if (db->own_host)
		host_delete(db->host);
	env.free(db);
	env_leave(prev);
}

/** Arguments of a reload run on the loop thread. */
struct reload_call {
	/** In: the runtime, the source and its name, where the message goes. */
	struct runtime *rt;
	const char *src;
	size_t len;
	const char *name;
	char *err;
	size_t errlen;
	/** Out. */
	int rc;
};

static void
reload_on_loop(void *arg)
{
	struct reload_call *c = arg;
	c->rc = runtime_reload_source(c->rt, c->src, c->len, c->name, c->err, c->errlen);
}

int
strata_set_policy(strata *db, const char *path_or_source, size_t len, char *err, size_t errlen)
{
	if (db == NULL || path_or_source == NULL)
		return diag_set(STRATA_EINVAL, "set_policy: a store and a policy are required");
	if (db->rt == NULL)
		return diag_set(STRATA_EINVAL, "set_policy: the store was opened without a policy runtime "
				"(set options.policy, \"\" for the built-in default)");
	/* A path if it names a file, else source text. */
	struct buf b = {0};
	const char *name = "(source)";
	struct stat st;
	char path[4096];
	if (len < sizeof(path) && memchr(path_or_source, '\n', len) == NULL) {
		memcpy(path, path_or_source, len);
		path[len] = '\0';
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			FILE *f = fopen(path, "rb");
			if (f == NULL)
				return diag_sys(errno, "open", path);
			char chunk[8192];
			size_t n;
			while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
				buf_append(&b, chunk, n);
			fclose(f);
			name = path;
		}
	}
	struct reload_call c = {db->rt, b.data ? (const char *)b.data : path_or_source,
				b.data ? b.len : len, name, err, errlen, 0};
	host_invoke(db->rt_host, reload_on_loop, &c);
	buf_destroy(&b);
	if (c.rc)
		return diag_set(STRATA_EINVAL, "%s", err && errlen ? err : "policy refused");
	return 0;
}

/** Arguments of a stats read run on the loop thread. */
struct info_call {
	/** The runtime. */
	struct runtime *rt;
	/** Filled on the loop thread. */
	struct runtime_stats st;
};

static void
info_on_loop(void *arg)
{
	struct info_call *c = arg;
	runtime_stats(c->rt, &c->st);
}

int
strata_policy_info_get(strata *db, strata_policy_info *out)
{
	if (db == NULL || out == NULL)
		return diag_set(STRATA_EINVAL, "policy_info: a store and an output are required");
	if (db->rt == NULL)
		return diag_set(STRATA_EINVAL, "policy_info: the store was opened without a policy runtime");
	struct info_call c;
	memset(&c, 0, sizeof(c));
	c.rt = db->rt;
	host_invoke(db->rt_host, info_on_loop, &c);
	memset(out, 0, sizeof(*out));
	out->version = c.st.policy_version;
	out->reloads = c.st.reloads;
	out->reload_failures = c.st.reload_failures;
	out->hook_runs = c.st.hook_runs;
	out->hook_errors = c.st.hook_errors;
	out->policy_seals = c.st.policy_seals;
	out->policy_merges = c.st.policy_merges;
	out->policy_compactions = c.st.policy_compactions;
	out->flush_timer_fires = c.st.flush_timer_fires;
	out->sweeps = c.st.sweeps;
	snprintf(out->last_error, sizeof(out->last_error), "%s", c.st.last_error);
	snprintf(out->name, sizeof(out->name), "%s", c.st.policy_name);
	return 0;
}

#else /* STRATA_CORE_ONLY */

int
strata_open(const strata_options *o, strata **out)
{
	if (o == NULL || out == NULL)
		return diag_set(STRATA_EINVAL, "strata_open: options and an output are required");
	*out = NULL;
	if (o->policy != NULL)
		return diag_set(STRATA_EINVAL, "strata_open: this build (libstrata-core) has no policy "
				"runtime; link libstrata for options.policy");
	struct env_ops *prev = env_enter((struct env_ops *)o->env_ops);
	strata *db = env.calloc(1, sizeof(*db));
	int rc = db != NULL ? 0 : diag_set(STRATA_ENOMEM, "strata_open: out of memory");
	if (rc == 0) {
		db->env_ops = (struct env_ops *)o->env_ops;
		rc = store_open(o, &db->store);
		if (rc) {
			env.free(db);
			db = NULL;
		}
	}
	env_leave(prev);
	*out = db;
	return rc;
}

void
strata_close(strata *db)
{
	if (db == NULL)
		return;
	struct env_ops *prev = env_enter(db->env_ops);
	store_close(db->store);
	env.free(db);
	env_leave(prev);
}

int
strata_set_policy(strata *db, const char *path_or_source, size_t len, char *err, size_t errlen)
{
	(void)db, (void)path_or_source, (void)len;
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "this build (libstrata-core) has no policy runtime");
	return diag_set(STRATA_EINVAL, "set_policy: this build (libstrata-core) has no policy runtime");
}

int
strata_policy_info_get(strata *db, strata_policy_info *out)
{
	(void)db, (void)out;
	return diag_set(STRATA_EINVAL, "policy_info: this build (libstrata-core) has no policy runtime");
}

#endif /* STRATA_CORE_ONLY */

/* ---------- the operations: argument checks and dispatch live in the core ---------- */

int
strata_stored_shards(const char *dir, uint32_t *shards)
{
	return store_stored_shards(dir, shards);
}

uint32_t
strata_shards(const strata *db)
{
	return db ? store_shards(db->store) : 0;
}

int
strata_append_seq(strata *db, uint32_t shard, const strata_row *rows, size_t n, uint64_t *last_seq)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_append(db->store, shard, rows, n, last_seq);
}

int
strata_check_row(const strata *db, size_t key_len, size_t value_len)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_check_row(store_options(db->store)->max_value_bytes, key_len, value_len);
}

int
strata_append(strata *db, uint32_t shard, const strata_row *rows, size_t n)
{
	return strata_append_seq(db, shard, rows, n, NULL);
}

int
strata_get(strata *db, uint32_t shard, const void *key, size_t key_len, void **value, size_t *value_len)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_get(db->store, shard, key, key_len, value, value_len);
}

int
strata_scan(strata *db, uint32_t shard, const void *start, size_t start_len, const void *end,
	    size_t end_len, int (*cb)(void *ctx, const strata_row *row), void *ctx)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_scan(db->store, shard, start, start_len, end, end_len, cb, ctx);
}

int
strata_seal(strata *db, uint32_t shard)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_seal(db->store, shard);
}

int
strata_prepare_merge(strata *db, uint32_t shard, uint32_t max_generations, strata_plan **plan)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_prepare_merge(db->store, shard, max_generations, plan);
}

int
strata_prepare_compact(strata *db, uint32_t shard, uint32_t max_runs, strata_plan **plan)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_prepare_compact(db->store, shard, max_runs, plan);
}

uint32_t
strata_plan_generations(const strata_plan *plan)
{
	return store_plan_inputs(plan);
}

uint32_t
strata_plan_shard(const strata_plan *plan)
{
	return store_plan_shard(plan);
}

int
strata_commit_merge(strata *db, strata_plan *plan)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_commit(db->store, plan);
}

void
strata_abort_merge(strata *db, strata_plan *plan)
{
	store_abort(db ? db->store : NULL, plan);
}

int
strata_merge(strata *db, uint32_t shard, uint32_t max_generations, uint32_t *merged)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_merge(db->store, shard, max_generations, merged);
}

int
strata_shard_stats(strata *db, uint32_t shard, strata_stats *out)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_shard_stats(db->store, shard, out);
}

int
strata_check(strata *db, uint32_t shard)
{
	if (db == NULL)
		return diag_set(STRATA_EINVAL, "no store given");
	return store_check(db->store, shard);
}

void
strata_free(void *p)
{
	env.free(p);
}

const char *
strata_strerror(int rc)
{
	return store_strerror(rc);
}

const char *
strata_last_error(void)
{
	return diag_last();
}
