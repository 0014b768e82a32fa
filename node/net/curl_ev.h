/*
 * curl_ev.h — libcurl's multi interface driven by a libev loop: the socket and timer
 * callbacks (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION) that strata's two HTTP
 * clients share, `strata load`'s target (node/load/load_http.c) and the cluster's etcd
 * client (node/cluster/etcd.c).
 *
 * The owner adds easy handles to c->multi (curl_multi_add_handle) and sets its own
 * CURLMOPT_* limits; each transfer that finishes is removed from the multi handle and
 * then handed to done, from the loop, never from inside a libcurl callback. One loop
 * thread only.
 */
#ifndef STRATA_CURL_EV_H
#define STRATA_CURL_EV_H

#include <curl/curl.h>
#include <ev.h>

/** A finished transfer: its easy handle (already removed from the multi handle) and
 *  libcurl's result. */
typedef void curl_ev_done_fn(void *ctx, CURL *easy, CURLcode res);

/** A multi handle on a loop. */
struct curl_ev {
	/** The loop. */
	struct ev_loop *loop;
	/** The multi handle (the owner adds its transfers to it). */
	CURLM *multi;
	/** libcurl's timeout. */
	ev_timer timer;
	/** Transfers libcurl runs. */
	int running;
	/** Who hears of each finished transfer. */
	curl_ev_done_fn *done;
	void *ctx;
};

/** Make c's multi handle and arm its callbacks on loop. 0, or STRATA_ENOMEM. */
int curl_ev_init(struct curl_ev *c, struct ev_loop *loop, curl_ev_done_fn *done, void *ctx);
/** Stop the timer and free the multi handle (its transfers removed first by the owner).
 *  Safe on a zeroed or failed one. */
void curl_ev_destroy(struct curl_ev *c);

#endif
