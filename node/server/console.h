/*
 * console.h — the operator's console the node serves at GET /: one page built into the
 * binary (node/server/console/console.html with uPlot inlined at build time, see the
 * Makefile), and the endpoints it reads and acts through:
 *
 *   GET  /                       the page (text/html; nothing in it but code)
 *   GET  /v1/console/state       one sample of the node's live figures (the page polls it
 *                                every second and keeps 15 minutes of them)
 *   POST /v1/policy/check        a candidate policy's trial, as `strata policy check
 *                                --run`, without applying it: errors at their lines, the
 *                                hook runs, the settings it would run with
 *   GET  /v1/policy/history      the policies this node put live, newest first (phist.h)
 *   POST /v1/policy/rollback     {"to": ID}: put history entry ID live again (the same
 *                                trial as PUT /v1/policy)
 *   POST /v1/policy/compare      the node's newest workload trace replayed in the simulator
 *                                under the running policy and the body's candidate
 *                                (node/sim/replay.h), within --policy-compare-ms
 *
 * With --token-file every one of these but the page needs the bearer token, reads
 * included: the page asks for it once and keeps it for the tab (sessionStorage).
 * Reference: node/server/README.md, "The console".
 */
#ifndef STRATA_CONSOLE_H
#define STRATA_CONSOLE_H

#include "api_int.h"
#include "views.h"

/** The page (generated from node/server/console/console.html). */
extern const char console_html[];
extern const size_t console_html_len;

/** The handlers of the console's rows of the endpoint table. */
api_handler_fn console_page, console_state, console_policy_check, console_policy_history,
	console_policy_rollback, console_policy_compare;
/** Answer GET /v1/console/state, with snap the runtime's side of it (server's loop). */
void console_state_reply(struct api *a, struct http_req *r, const struct views_policy_snap *snap);
/** Open the policy history in the store's data directory and, on the runtime's loop,
 *  start recording every policy put live (the running one first). 0 or a STRATA_E* code. */
int console_history_start(struct api *a, size_t cap);

#endif
