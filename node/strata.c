/*
 * strata.c — the top of the library: strata_open/strata_close compose the core
 * store with the policy runtime. With options.policy set, the runtime runs on a
 * libev loop on a thread of its own (the server instead hosts it on its main loop).
 */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/store.h"
#include "lib/buf.h"
#include "lib/diag.h"
#include "lib/env.h"
#include "policy/runtime.h"
#include "strata.h"

/** A policy runtime on its own loop thread. */
struct embedded {
	/** The loop (owned). */
	struct ev_loop *loop;
	/** Wakes the loop to stop it. */
	ev_async stop;
	/** The runtime on that loop. */
	struct runtime *rt;
	/** The loop thread. */
	pthread_t thread;
	/** Guards bound. */
	pthread_mutex_t mu;
	/** Signalled once the loop thread is bound to the runtime. */
	pthread_cond_t cv;
	/** Set by the loop thread once runtime_invoke may be used. */
	int bound;
};

static void
embedded_stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *
embedded_main(void *arg)
{
	struct embedded *e = arg;
	runtime_bind_thread(e->rt, pthread_self());
	pthread_mutex_lock(&e->mu);
	e->bound = 1;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	ev_run(e->loop, 0);
	return NULL;
}

static void
embedded_stop(void *arg)
{
	struct embedded *e = arg;
	ev_async_send(e->loop, &e->stop);
	pthread_join(e->thread, NULL);
	runtime_delete(e->rt);
	ev_async_stop(e->loop, &e->stop);
	ev_loop_destroy(e->loop);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	env.free(e);
}

static int
embedded_start(strata *db, const char *policy)
{
	struct embedded *e = env.calloc(1, sizeof(*e));
	if (e == NULL)
		return diag_set(STRATA_ENOMEM, "out of memory starting the policy runtime");
	e->loop = ev_loop_new(EVFLAG_AUTO);
	if (e->loop == NULL) {
		env.free(e);
		return diag_set(STRATA_ENOMEM, "cannot create an event loop for the policy runtime");
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	ev_async_init(&e->stop, embedded_stop_cb);
	ev_async_start(e->loop, &e->stop);
	struct runtime_options ro;
	memset(&ro, 0, sizeof(ro));
	ro.db = db;
	ro.loop = e->loop;
	ro.policy_path = policy[0] ? policy : NULL;
	ro.watch_file = policy[0] != '\0';
	char err[1024] = "";
	int rc = runtime_new(&ro, &e->rt, err, sizeof(err));
	if (rc) {
		ev_async_stop(e->loop, &e->stop);
		ev_loop_destroy(e->loop);
		env.free(e);
		return diag_set(rc < 0 ? rc : STRATA_EINVAL, "policy %s: %s", policy, err);
	}
	if (pthread_create(&e->thread, NULL, embedded_main, e) != 0) {
		runtime_delete(e->rt);
		ev_async_stop(e->loop, &e->stop);
		ev_loop_destroy(e->loop);
		env.free(e);
		return diag_set(STRATA_ENOMEM, "cannot start the policy runtime thread");
	}
	/* Until the loop thread has bound itself, runtime_invoke would run callers inline. */
	pthread_mutex_lock(&e->mu);
	while (!e->bound)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	store_attach_runtime(db, e, embedded_stop);
	return 0;
}

int
strata_open(const strata_options *o, strata **out)
{
	int rc = store_open(o, out);
	if (rc || o->policy == NULL)
		return rc;
	rc = embedded_start(*out, o->policy);
	if (rc) {
		store_close(*out);
		*out = NULL;
	}
	return rc;
}

void
strata_close(strata *db)
{
	store_close(db);
}

/** Arguments of a reload run on the loop thread. */
struct reload_call {
	struct runtime *rt;
	const char *src;
	size_t len;
	const char *name;
	char *err;
	size_t errlen;
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
	struct embedded *e = store_runtime_of_kind(db, embedded_stop);
	if (e == NULL)
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
	struct reload_call c = {e->rt, b.data ? (const char *)b.data : path_or_source,
				b.data ? b.len : len, name, err, errlen, 0};
	runtime_invoke(e->rt, reload_on_loop, &c);
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
	struct embedded *e = store_runtime_of_kind(db, embedded_stop);
	if (e == NULL)
		return diag_set(STRATA_EINVAL, "policy_info: the store was opened without a policy runtime");
	struct info_call c;
	memset(&c, 0, sizeof(c));
	c.rt = e->rt;
	runtime_invoke(e->rt, info_on_loop, &c);
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
