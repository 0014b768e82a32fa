/*
 * metrics.h — the node's Prometheus text exposition (GET /metrics).
 */
#ifndef STRATA_METRICS_H
#define STRATA_METRICS_H

#include "../lib/buf.h"
#include "../policy/runtime.h"
#include "api.h"

/** Append the exposition (text format 0.0.4) of the node to out, with rs the policy
 *  runtime's counters as read on its loop thread. On the server's loop. 0 or STRATA_ENOMEM. */
int metrics_render(struct api *a, const struct runtime_stats *rs, struct buf *out);

#endif
