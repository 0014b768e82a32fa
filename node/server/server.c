#include "server.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/pool.h"
#include "../policy/runtime.h"
#include "../strata.h"
#include "../strata_host.h"
#include "api.h"
#include "../lib/wtrace.h"
#include "http.h"
#include "reqstats.h"
#include "../cluster/cluster.h"

/** A running node. */
struct server {
	/** Its options. */
	const struct server_options *o;
	/** The loop. */
	struct ev_loop *loop;
	/** The store. */
	strata *db;
	/** The policy runtime (called on rt_host's loop thread only). */
	struct runtime *rt;
	/** The host of the loop above: HTTP, and client jobs on its foreground executor (owned). */
	struct host *host;
	/** The policy runtime's host: a loop thread of its own for the runtime's timers and
	 *  hooks, and the background executor for its seals and merges (owned). */
	struct host *rt_host;
	/** The endpoints. */
	struct api *api;
	/** The HTTP server. */
	struct http_server *http;
	/** The cluster membership (--cluster), or NULL. */
	struct cluster *cluster;
	/** SIGTERM watcher. */
	ev_signal sigterm;
	/** SIGINT watcher. */
	ev_signal sigint;
	/** SIGHUP watcher. */
	ev_signal sighup;
	/** Deadline of a graceful stop. */
	ev_timer shutdown_timer;
	/** Samples the loop's lag (api_loop_lag), and when it is due next (env.mono_ns). */
	ev_timer lag_timer;
	uint64_t lag_due;
	/** A graceful stop is under way. */
	int stopping;
	/** Connections were closed by force (second signal or deadline). */
	int forced;
};

void
server_options_init(struct server_options *o)
{
	memset(o, 0, sizeof(*o));
	/* The store's defaults are strata_options_init's. */
	strata_options_init(&o->store);
	o->listen = "127.0.0.1:7070";
	o->data_dir = "./data";
	o->max_body_bytes = 64ull << 20;
	o->max_header_bytes = 16u << 10;
	o->max_connections = 1024;
	o->idle_timeout_ms = 60000;
	o->header_timeout_ms = 10000;
	o->body_timeout_ms = 60000;
	o->send_timeout_ms = 60000;
	o->shutdown_timeout_ms = 30000;
	o->workers = 16;
	o->log_format = SERVER_LOG_LOGFMT;
	o->watch_policy = 1;
	o->policy_settle_ms = RUNTIME_WATCH_SETTLE_MS;
	o->policy_poll_ms = RUNTIME_WATCH_POLL_MS;
	o->slow_request_us = REQSTATS_SLOW_DEFAULT_NS / 1000;
	o->slow_requests = REQSTATS_SLOW_DEFAULT_LEN;
	o->cluster_lease_ttl_s = 5;
	o->cluster_poll_ms = 500;
}

/* ---------- logging ---------- */

static void
server_json_sink(int level, const char *msg)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	if (level < diag_log_level)
		return;
	uint64_t now = env.wall_ns();
	time_t sec = (time_t)(now / 1000000000ull);
	struct tm tm;
	gmtime_r(&sec, &tm);
	char when[48], date[32];
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when, sizeof(when), "%s.%03uZ", date, (unsigned)(now / 1000000ull % 1000));
	json_t *m = json_string(msg);
	if (m == NULL) {
		char clean[1024];
		size_t i = 0;
		for (; msg[i] && i < sizeof(clean) - 1; i++)
			clean[i] = (unsigned char)msg[i] < 0x80 ? msg[i] : '?';
		clean[i] = '\0';
		m = json_string(clean);
	}
	json_t *o = json_pack("{s:s, s:s, s:o*}", "ts", when, "level", names[level & 3], "msg", m);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (s != NULL)
		fprintf(stderr, "%s\n", s);
	free(s);
	json_decref(o);
}

/* ---------- lock file and token ---------- */

/** The tokens of --token-file: one bare token (named "default"), or lines "NAME TOKEN"
 *  (blank lines and lines starting with '#' skipped), NAME 1..63 bytes of
 *  [A-Za-z0-9._@-], at most API_MAX_TOKENS. The names are who applied a policy in its
 *  history. Strings live in a static buffer. 0, or -1 after printing why. */
static int
server_read_tokens(const char *path, struct api_token *out, size_t *n_out)
{
	static char buf[API_MAX_TOKENS * (SERVER_MAX_TOKEN + 80)];
	*n_out = 0;
	int fd = env.open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "strata serve: cannot read the token file %s: %s\n", path, strerror(errno));
		return -1;
	}
	ssize_t n = env.pread(fd, buf, sizeof(buf) - 1, 0);
	env.close(fd);
	if (n < 0) {
		fprintf(stderr, "strata serve: cannot read the token file %s: %s\n", path, strerror(errno));
		return -1;
	}
	buf[n] = '\0';
	size_t count = 0, lineno = 0;
	int bare = 0;
	for (char *line = buf, *next; line != NULL; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		lineno++;
		char *b = line, *e = line + strlen(line);
		while (b < e && (*b == ' ' || *b == '\t' || *b == '\r'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			e--;
		*e = '\0';
		if (b == e || *b == '#')
			continue;
		char *sp = b + strcspn(b, " \t");
		const char *name = "default", *tok = b;
		if (*sp != '\0') {
			*sp++ = '\0';
			while (*sp == ' ' || *sp == '\t')
				sp++;
			name = b;
			tok = sp;
			size_t nl = strlen(name);
			if (nl == 0 || nl > 63 || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
							"0123456789._@-") != nl) {
				fprintf(stderr, "strata serve: %s line %zu: the token's name '%s' must be 1..63 bytes of "
					"A-Za-z0-9._@-\n", path, lineno, name);
				return -1;
			}
		} else {
			bare++;
		}
		size_t len = strlen(tok);
		if (len == 0 || len > SERVER_MAX_TOKEN) {
			fprintf(stderr, "strata serve: the token in %s line %zu must be 1..%u bytes (got %zu)\n", path,
				lineno, SERVER_MAX_TOKEN, len);
			return -1;
		}
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)tok[i] <= ' ' || (unsigned char)tok[i] >= 0x7f) {
				fprintf(stderr, "strata serve: the token in %s line %zu must be printable ASCII "
					"without spaces\n", path, lineno);
				return -1;
			}
		if (count == API_MAX_TOKENS) {
			fprintf(stderr, "strata serve: %s holds more than %u tokens\n", path, API_MAX_TOKENS);
			return -1;
		}
		for (size_t k = 0; k < count; k++)
			if (strcmp(out[k].name, name) == 0) {
				fprintf(stderr, "strata serve: %s line %zu: the name '%s' is given twice\n", path, lineno,
					name);
				return -1;
			}
		out[count++] = (struct api_token){name, tok};
	}
	if (count == 0) {
		fprintf(stderr, "strata serve: the token in %s must be 1..%u bytes (got 0)\n", path, SERVER_MAX_TOKEN);
		return -1;
	}
	if (bare > 0 && count > 1) {
		fprintf(stderr, "strata serve: %s mixes a bare token with others; with several, write each as "
			"'NAME TOKEN' on its own line\n", path);
		return -1;
	}
	*n_out = count;
	return 0;
}

/** Write address into the ready file (through a temp file and a rename). 0, or -1 after
 *  printing why. */
static int
server_write_ready(const char *path, const char *address)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = env.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char line[160];
	int n = snprintf(line, sizeof(line), "%s\n", address);
	int ok = fd >= 0 && env.pwrite(fd, line, (size_t)n, 0) == n;
	if (fd >= 0 && env.close(fd) != 0)
		ok = 0;
	if (ok && env.rename(tmp, path) == 0)
		return 0;
	int err = errno;
	if (fd >= 0)
		env.unlink(tmp);
	fprintf(stderr, "strata serve: cannot write the ready file %s: %s; stopping\n", path, strerror(err));
	return -1;
}

/** Let max_connections sockets fit under the open-file limit, raising it if allowed. */
static void
server_fd_limit(uint32_t conns)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rlim_t need = (rlim_t)conns + 256;
	if (rl.rlim_cur >= need)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < need)
		diag_log(LOG_LVL_WARN,
			 "the open-file limit (%llu) is below --max-connections + 256; connections over it are "
			 "refused when accept fails",
			 (unsigned long long)rl.rlim_cur);
}

/* ---------- signals and stop ---------- */

static void
server_drained(void *arg)
{
	struct server *s = arg;
	ev_break(s->loop, EVBREAK_ALL);
}

static void
server_force(struct server *s)
{
	s->forced = 1;
	diag_log(LOG_LVL_WARN, "closing the connections still open; requests in flight finish without a reply");
	http_server_close_all(s->http);
}

/** How late the lag timer fired: the time the loop could not look at its sockets. */
static void
on_lag_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct server *s = w->data;
	uint64_t now = env.mono_ns();
	api_loop_lag(s->api, now > s->lag_due ? now - s->lag_due : 0);
	s->lag_due = now + REQSTATS_LAG_TICK_NS;
	ev_timer_set(w, REQSTATS_LAG_TICK_NS / 1e9, 0.0);
	ev_timer_start(loop, w);
}

static void
on_shutdown_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct server *s = w->data;
	if (!s->forced) {
		server_force(s);
		ev_timer_set(w, s->o->shutdown_timeout_ms / 1000.0, 0.0);
		ev_timer_start(loop, w);
		return;
	}
	diag_log(LOG_LVL_WARN, "work still in flight after the shutdown timeout; stopping anyway");
	ev_break(loop, EVBREAK_ALL);
}

static void
on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct server *s = w->data;
	if (s->stopping) {
		if (!s->forced)
			server_force(s);
		return;
	}
	s->stopping = 1;
	diag_log(LOG_LVL_INFO, "%s: stopping; no new connections, finishing requests in flight",
		 w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
	ev_timer_set(&s->shutdown_timer, s->o->shutdown_timeout_ms / 1000.0, 0.0);
	ev_timer_start(loop, &s->shutdown_timer);
	http_server_drain(s->http, server_drained, s);
}

/** A SIGHUP reload on its way to the runtime's loop. */
struct server_hup {
	/** The crossing. */
	struct host_call call;
	/** The runtime to reload. */
	struct runtime *rt;
};

/** The runtime's loop: reload the policy file, log the outcome. */
static void
server_hup_on_rt(void *arg)
{
	struct server_hup *h = arg;
	if (runtime_reload_file(h->rt) != 0) {
		diag_log(LOG_LVL_WARN, "SIGHUP: policy reload refused, the running policy stays: %s", diag_last());
	} else {
		struct runtime_stats st;
		runtime_stats(h->rt, &st);
		diag_log(LOG_LVL_INFO, "SIGHUP: policy %s reloaded (version %llu)", st.policy_name,
			 (unsigned long long)st.policy_version);
	}
	env.free(h);
}

static void
on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct server *s = w->data;
	/* The reload runs on the runtime's loop; this one does not wait for it. */
	struct server_hup *h = env.malloc(sizeof(*h));
	if (h == NULL) {
		diag_log(LOG_LVL_WARN, "SIGHUP: out of memory; the policy is not reloaded");
		return;
	}
	h->rt = s->rt;
	host_post(s->rt_host, &h->call, server_hup_on_rt, h);
}

/** The HTTP server's callbacks, bound before the store opens: they reach the endpoints
 *  once they exist (no request is read before the loop runs). */
static void
server_on_headers(void *ctx, struct http_req *r)
{
	struct server *s = ctx;
	api_on_headers(s->api, r);
}

static void
server_on_request(void *ctx, struct http_req *r)
{
	struct server *s = ctx;
	api_on_request(s->api, r);
}

static void
server_on_sent(void *ctx, struct http_req *r)
{
	struct server *s = ctx;
	api_on_sent(s->api, r);
}

static const char *
sync_name(int sync)
{
	return sync == STRATA_SYNC_NONE ? "none" : sync == STRATA_SYNC_INTERVAL ? "interval" : "fsync";
}

int
server_run(const struct server_options *o)
{
	if (o->log_format == SERVER_LOG_JSON)
		diag_log_sink = server_json_sink;
	json_object_seed(0);
	signal(SIGPIPE, SIG_IGN);

	/* Everything that can refuse the start is checked before the data directory is
	 * touched: the flags (by the caller), the token, the checkpoint root, the listen
	 * address (bound here) and the policy (compiled and validated by the open before it
	 * creates anything). A failed start leaves the directory as it was, or absent. */
	static struct api_token tokens[API_MAX_TOKENS];
	size_t ntokens = 0;
	if (o->token_file != NULL && server_read_tokens(o->token_file, tokens, &ntokens) != 0)
		return 1;
	static char ckpt_root[PATH_MAX];
	if (o->checkpoint_dir != NULL) {
		struct stat st;
		errno = 0;
		if (realpath(o->checkpoint_dir, ckpt_root) == NULL || stat(ckpt_root, &st) != 0 ||
		    !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "strata serve: --checkpoint-dir %s: %s\n", o->checkpoint_dir,
				errno ? strerror(errno) : "not a directory");
			return 1;
		}
	}
	if (o->policy_path != NULL) {
		/* The open checks it again before it creates anything; here for a message that
		 * names the flag. */
		int prc = runtime_check_policy(o->policy_path, NULL, 0, NULL);
		if (prc != 0) {
			fprintf(stderr, "strata serve: --policy %s: %s\nstrata serve: not started (the policy "
				"is refused as a reload would refuse it), the data directory %s was not "
				"touched\n", o->policy_path, diag_last(), o->data_dir);
			return 1;
		}
	}
	static char cl_endpoints[2048], cl_prefix[CLUSTER_MAX_PREFIX + 1], node_id[256];
	if (o->cluster != NULL) {
		const char *why = NULL;
		if (o->store.store == NULL)
			why = "a cluster moves shards between nodes through a remote object store: give --store";
		else if (o->store.wal != STRATA_WAL_STORE)
			why = "a local WAL cannot move to another node: give --wal store";
		else if (o->store.serve_first != 0 || o->store.serve_count != 0)
			why = "in a cluster, placement decides which shards a node serves: drop --shards A-B, "
			      "--serve-first and --serve-count";
		if (why == NULL && cluster_parse_url(o->cluster, cl_endpoints, sizeof(cl_endpoints), cl_prefix,
						     sizeof(cl_prefix)) != 0)
			why = diag_last();
		if (why == NULL && o->node_id == NULL && gethostname(node_id, sizeof(node_id) - 1) != 0)
			why = "no --node-id given and the host name cannot be read";
		if (why == NULL && cluster_check_id(o->node_id ? o->node_id : node_id) != 0)
			why = diag_last();
		if (why != NULL) {
			fprintf(stderr, "strata serve: --cluster: %s; not started\n", why);
			return 1;
		}
	}
	server_fd_limit(o->max_connections);

	struct server s;
	memset(&s, 0, sizeof(s));
	s.o = o;
	int status = 1;
	strata_options so = o->store;
	so.dir = o->data_dir; /* shards = 0: the stored count, STRATA_DEFAULT_SHARDS for a new store */
	so.policy = o->policy_path != NULL ? o->policy_path : "";
	if (o->cluster != NULL)
		so.serve_first = STRATA_SERVE_NONE; /* placement gives it shards (cluster.h) */
	s.loop = ev_default_loop(0);
	if (s.loop == NULL) {
		fprintf(stderr, "strata serve: cannot start the event loop\n");
		goto out;
	}
	struct http_options ho = {
		.listen = o->listen,
		.max_connections = o->max_connections,
		.max_header_bytes = o->max_header_bytes,
		.max_body_bytes = o->max_body_bytes,
		.idle_timeout_ms = o->idle_timeout_ms,
		.header_timeout_ms = o->header_timeout_ms,
		.body_timeout_ms = o->body_timeout_ms,
		.send_timeout_ms = o->send_timeout_ms,
		.on_headers = server_on_headers,
		.on_request = server_on_request,
		.on_sent = server_on_sent,
		.ctx = &s,
		.bind_only = 1, /* connections are refused until the store is open */
	};
	if (http_server_new(s.loop, &ho, &s.http) != 0) {
		fprintf(stderr, "strata serve: --listen: %s; not started, the data directory %s was not "
			"touched\n", diag_last(), o->data_dir);
		goto out;
	}
	/* Two hosts. This loop (run below) serves HTTP and completes client work, which runs
	 * on its foreground executor (its background executor gets one thread, idle today).
	 * The policy runtime runs on a host of its own: its loop thread runs the timers and
	 * hooks, its background executor the policy's seals, merges and deletes, so a hook
	 * that runs for its whole budget never holds this loop. */
	struct host_options hopt = {.mode = HOST_THREADED, .loop = s.loop};
	hopt.threads[HOST_FG] = o->workers;
	/* A cluster member claims the shards placement gives it there: a few at once, as a
	 * failover hands it several (each claim waits on the object store). */
	hopt.threads[HOST_BG] = o->cluster != NULL ? 4 : 1;
	struct host_options ropt = {.mode = HOST_THREADED, .loop_thread = 1};
	ropt.threads[HOST_FG] = 1;
	if (host_new(&hopt, &s.host) != 0 || host_new(&ropt, &s.rt_host) != 0) {
		fprintf(stderr, "strata serve: %s\n", diag_last());
		goto out;
	}
	struct strata_runtime_options sro = {.watch_file = o->policy_path != NULL && o->watch_policy,
					     .watch_settle_ms = o->policy_settle_ms,
					     .watch_poll_ms = o->policy_poll_ms,
					     .host = s.rt_host};
	int orc = strata_open_on(&so, s.host, &sro, &s.db);
	if (orc == STRATA_ELOCKED) {
		fprintf(stderr, "strata serve: refusing to start: %s\n", strata_last_error());
		goto out;
	}
	if (orc != 0) {
		fprintf(stderr, "strata serve: cannot open the store in %s: %s\n", o->data_dir, strata_last_error());
		goto out;
	}
	s.rt = strata_runtime(s.db);
	struct api_options ao = {
		.db = s.db, .rt = s.rt, .host = s.host, .rt_host = s.rt_host, .tokens = tokens, .ntokens = ntokens,
		.policy_history = o->policy_history, .trace_max_bytes = o->trace_max_bytes,
		.compare_budget_ms = o->policy_compare_ms, .compare_model = o->policy_compare_model,
		.store_url = o->store.store,
		.checkpoint_root = o->checkpoint_dir ? ckpt_root : NULL,
		.slow_request_ns = o->slow_request_us * 1000, .slow_requests = o->slow_requests};
	if (api_new(&ao, &s.api) != 0) {
		fprintf(stderr, "strata serve: %s\n", diag_last());
		goto out;
	}
	s.api->http = s.http;
	if (o->trace_file != NULL) {
		struct wtrace_options wo = {.path = o->trace_file,
					    .max_bytes = o->trace_max_bytes ? o->trace_max_bytes : API_TRACE_MAX_BYTES,
					    .rotate = 1};
		if (strata_trace_start(s.db, &wo) != 0) {
			fprintf(stderr, "strata serve: --trace-file: %s\n", diag_last());
			goto out;
		}
	}
	if (http_server_start(s.http) != 0) {
		fprintf(stderr, "strata serve: --listen: %s\n", diag_last());
		goto out;
	}
	if (o->cluster != NULL) {
		static char advertise[CLUSTER_MAX_URL + 1];
		snprintf(advertise, sizeof(advertise), "%s", o->advertise ? o->advertise : "");
		if (o->advertise == NULL)
			snprintf(advertise, sizeof(advertise), "http://%s", http_server_address(s.http));
		struct cluster_options co = {.url = o->cluster, .node_id = o->node_id ? o->node_id : node_id,
					     .advertise = advertise, .lease_ttl_s = o->cluster_lease_ttl_s,
					     .poll_ms = o->cluster_poll_ms};
		if (cluster_new(&co, s.db, s.host, &s.cluster) != 0) {
			fprintf(stderr, "strata serve: --cluster: %s\n", diag_last());
			goto out;
		}
		s.api->cluster = s.cluster;
	}
	ev_signal_init(&s.sigterm, on_stop_signal, SIGTERM);
	ev_signal_init(&s.sigint, on_stop_signal, SIGINT);
	ev_signal_init(&s.sighup, on_hup, SIGHUP);
	s.sigterm.data = s.sigint.data = s.sighup.data = &s;
	ev_signal_start(s.loop, &s.sigterm);
	ev_signal_start(s.loop, &s.sigint);
	ev_signal_start(s.loop, &s.sighup);
	ev_init(&s.shutdown_timer, on_shutdown_timer);
	s.shutdown_timer.data = &s;
	ev_init(&s.lag_timer, on_lag_timer);
	s.lag_timer.data = &s;
	s.lag_due = env.mono_ns() + REQSTATS_LAG_TICK_NS;
	ev_timer_set(&s.lag_timer, REQSTATS_LAG_TICK_NS / 1e9, 0.0);
	ev_timer_start(s.loop, &s.lag_timer);

	strata_policy_info pi;
	memset(&pi, 0, sizeof(pi));
	strata_policy_info_get(s.db, &pi); /* waits for the runtime's loop: before serving only */
	diag_log(LOG_LVL_INFO,
		 "strata serve: listening on http://%s, data directory %s, policy %s, %u shards, sync %s%s",
		 http_server_address(s.http), o->data_dir, pi.name, strata_shards(s.db), sync_name(o->store.sync),
		 o->token_file ? ", bearer token required for writes" : "");
	if (o->ready_file != NULL && server_write_ready(o->ready_file, http_server_address(s.http)) != 0)
		goto out;

	ev_run(s.loop, 0);

	ev_timer_stop(s.loop, &s.shutdown_timer);
	ev_timer_stop(s.loop, &s.lag_timer);
	status = 0;
out:
	/* Client jobs finish (and answer) first. The runtime stops on its loop after the
	 * requests already handed to it ran there, and answers those still pending; their
	 * answers, handed back to this loop, reach the HTTP requests still held (and may read
	 * the store) before the store closes and the server goes; then the hosts. */
	/* A member stops serving and gives its lease back first: the others take its shards
	 * at once, and no request here is answered for a shard it no longer holds. */
	cluster_leave(s.cluster);
	while (s.host != NULL && pool_pending(host_exec(s.host, HOST_FG)) > 0)
		host_drain(s.host, HOST_FG);
	while (s.host != NULL && pool_pending(host_exec(s.host, HOST_BG)) > 0)
		host_drain(s.host, HOST_BG); /* a checkpoint in flight */
	strata_runtime_stop(s.db);
	if (s.host != NULL)
		host_run_posted(s.host);
	if (s.db != NULL && status != 0) {
		strata_close_discard(s.db); /* a failed start: a store this start created goes again */
	} else if (s.db != NULL) {
		strata_close(s.db);
		diag_log(LOG_LVL_INFO, "strata serve: stopped; the store is closed and its WAL synced");
	}
	/* The signal watchers stay until the store is closed: a signal that comes while the
	 * runtime finishes its hook and the store syncs is ignored (the loop no longer runs)
	 * rather than killing the process by the default action mid-close. */
	if (s.loop != NULL) {
		ev_signal_stop(s.loop, &s.sigterm);
		ev_signal_stop(s.loop, &s.sigint);
		ev_signal_stop(s.loop, &s.sighup);
	}
	http_server_delete(s.http);
	cluster_delete(s.cluster);
	api_delete(s.api);
	host_delete(s.rt_host);
	host_delete(s.host);
	return status;
}
