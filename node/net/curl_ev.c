/* curl_ev.c — libcurl's multi interface on a libev loop (curl_ev.h). */
#include "curl_ev.h"

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../strata_types.h"

/** A socket libcurl asked the loop to watch. */
struct curl_ev_sock {
	/** Readiness watcher (first: the callback gets it). */
	ev_io io;
	/** Its multi handle. */
	struct curl_ev *c;
	/** The watcher is started. */
	int active;
};

/** Hand every finished transfer to the owner, each removed from the multi handle first. */
static void
curl_ev_finished(struct curl_ev *c)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		CURL *easy = m->easy_handle;
		CURLcode res = m->data.result;
		curl_multi_remove_handle(c->multi, easy);
		c->done(c->ctx, easy, res);
	}
}

static void
curl_ev_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct curl_ev_sock *sk = (struct curl_ev_sock *)w;
	struct curl_ev *c = sk->c;
	int action = (revents & EV_READ ? CURL_CSELECT_IN : 0) | (revents & EV_WRITE ? CURL_CSELECT_OUT : 0);
	curl_multi_socket_action(c->multi, w->fd, action, &c->running);
	curl_ev_finished(c);
}

static int
curl_ev_sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct curl_ev *c = userp;
	struct curl_ev_sock *sk = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (sk != NULL) {
			if (sk->active)
				ev_io_stop(c->loop, &sk->io);
			env.free(sk);
			curl_multi_assign(c->multi, s, NULL);
		}
		return 0;
	}
	if (sk == NULL) {
		if ((sk = env.calloc(1, sizeof(*sk))) == NULL)
			return -1;
		sk->c = c;
		curl_multi_assign(c->multi, s, sk);
	}
	int ev = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
	if (sk->active)
		ev_io_stop(c->loop, &sk->io);
	ev_io_init(&sk->io, curl_ev_io_cb, s, ev);
	ev_io_start(c->loop, &sk->io);
	sk->active = 1;
	return 0;
}

static void
curl_ev_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct curl_ev *c = w->data;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &c->running);
	curl_ev_finished(c);
}

/** CURLMOPT_TIMERFUNCTION: (re)arm the timer; libcurl acts on it from the loop. */
static int
curl_ev_curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct curl_ev *c = userp;
	ev_timer_stop(c->loop, &c->timer);
	if (timeout_ms >= 0) {
		ev_timer_set(&c->timer, (double)timeout_ms / 1000.0, 0.);
		ev_timer_start(c->loop, &c->timer);
	}
	return 0;
}

int
curl_ev_init(struct curl_ev *c, struct ev_loop *loop, curl_ev_done_fn *done, void *ctx)
{
	*c = (struct curl_ev){.loop = loop, .done = done, .ctx = ctx};
	ev_timer_init(&c->timer, curl_ev_timer_cb, 0., 0.);
	c->timer.data = c;
	c->multi = curl_multi_init();
	if (c->multi == NULL)
		return diag_set(STRATA_ENOMEM, "out of memory for libcurl's multi handle");
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, curl_ev_sock_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, curl_ev_curl_timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	return 0;
}

void
curl_ev_destroy(struct curl_ev *c)
{
	if (c->multi == NULL)
		return;
	ev_timer_stop(c->loop, &c->timer);
	curl_multi_cleanup(c->multi);
	c->multi = NULL;
}
