/* reqstats.c — the HTTP endpoints' counters and timings, by handler (reqstats.h). */
#include "reqstats.h"

#include <assert.h>
#include <http_parser.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"

/** Label of each method index. */
static const char *const reqstats_method_names[REQSTATS_METHODS] = {"GET", "HEAD", "POST", "PUT", "DELETE",
								    "other"};
/** Name of each stage. */
static const char *const reqstats_stage_names[REQSTATS_STAGES] = {
	"read", "loop", "queue", "decode", "engine", "handoff", "respond", "reply"};

int
reqstats_create(struct reqstats *s, size_t handlers, uint64_t slow_threshold_ns, size_t slow_len)
{
	memset(s, 0, sizeof(*s));
	s->start_ns = env.mono_ns();
	s->slow_threshold_ns = slow_threshold_ns;
	s->slow_cap = slow_len ? slow_len : REQSTATS_SLOW_DEFAULT_LEN;
	if (s->slow_cap > REQSTATS_SLOW_MAX_LEN)
		return diag_set(STRATA_EINVAL, "api: a slow-request log of %zu entries is over %u", s->slow_cap,
				REQSTATS_SLOW_MAX_LEN);
	s->handler = env.calloc(handlers ? handlers : 1, sizeof(*s->handler));
	s->slow = env.calloc(s->slow_cap, sizeof(*s->slow));
	if (s->handler == NULL || s->slow == NULL) {
		reqstats_destroy(s);
		return diag_set(STRATA_ENOMEM, "api: out of memory");
	}
	s->handlers = handlers;
	int rc;
	if ((rc = hist_new_latency(&s->append_ns)) != 0 || (rc = hist_new_latency(&s->get_ns)) != 0 ||
	    (rc = hist_new_latency(&s->request_ns)) != 0)
		goto fail;
	for (int i = 0; i < REQSTATS_STAGES; i++)
		if ((rc = hist_new_latency(&s->stage_ns[i])) != 0)
			goto fail;
	if ((rc = hist_new_latency(&s->loop_lag_ns)) != 0)
		goto fail;
	for (size_t h = 0; h < handlers; h++)
		if ((rc = hist_new(1000, HIST_LATENCY_HIGHEST, 2, &s->handler[h].ns)) != 0)
			goto fail;
	return 0;
fail:
	reqstats_destroy(s);
	return rc;
}

void
reqstats_destroy(struct reqstats *s)
{
	hist_delete(s->append_ns);
	hist_delete(s->get_ns);
	hist_delete(s->request_ns);
	for (size_t h = 0; h < s->handlers; h++)
		hist_delete(s->handler[h].ns);
	for (int i = 0; i < REQSTATS_STAGES; i++)
		hist_delete(s->stage_ns[i]);
	hist_delete(s->loop_lag_ns);
	env.free(s->handler);
	env.free(s->slow);
	memset(s, 0, sizeof(*s));
}

void
reqstats_loop_lag(struct reqstats *s, uint64_t lag_ns)
{
	hist_record(s->loop_lag_ns, lag_ns);
	if (lag_ns > s->loop_lag_max_ns)
		s->loop_lag_max_ns = lag_ns;
}

int
reqstats_method(int http_method)
{
	switch (http_method) {
	case HTTP_GET:
		return 0;
	case HTTP_HEAD:
		return 1;
	case HTTP_POST:
		return 2;
	case HTTP_PUT:
		return 3;
	case HTTP_DELETE:
		return 4;
	default:
		return 5;
	}
}

const char *
reqstats_method_name(int m)
{
	return m >= 0 && m < REQSTATS_METHODS ? reqstats_method_names[m] : "?";
}

void
reqstats_count(struct reqstats *s, size_t h, int http_method, int status)
{
	assert(h < s->handlers);
	if (status < 0 || status >= HTTP_MAX_STATUS)
		return;
	s->handler[h].responses[reqstats_method(http_method)][status]++;
}

void
reqstats_time(struct reqstats *s, size_t h, uint64_t ns)
{
	assert(h < s->handlers);
	hist_record(s->request_ns, ns);
	hist_record(s->handler[h].ns, ns);
}

const char *
reqstats_stage_name(int i)
{
	return i >= 0 && i < REQSTATS_STAGES ? reqstats_stage_names[i] : "?";
}

uint64_t
reqstats_stages(const struct http_req *r, uint64_t stage_ns[REQSTATS_STAGES])
{
	for (int i = 0; i < REQSTATS_STAGES; i++)
		stage_ns[i] = UINT64_MAX;
	if (r->start_ns == 0 || r->sent_ns < r->start_ns)
		return 0;
	/* The points in order, and the stage that ends at each; 0 where unmarked. */
	const uint64_t *m = r->mark_ns;
	const struct {
		uint64_t ns;
		int stage;
	} pt[] = {
		{r->start_ns, -1},
		{r->complete_ns, REQSTATS_READ},
		{m[REQSTATS_MARK_SUBMIT], REQSTATS_LOOP},
		{m[REQSTATS_MARK_WORK], REQSTATS_QUEUE},
		{m[REQSTATS_MARK_ENGINE], REQSTATS_DECODE},
		{m[REQSTATS_MARK_ENGINE_END], REQSTATS_ENGINE},
		{m[REQSTATS_MARK_DONE], REQSTATS_HANDOFF},
		{r->respond_ns, m[REQSTATS_MARK_DONE] ? REQSTATS_RESPOND : REQSTATS_LOOP},
		{r->sent_ns, REQSTATS_REPLY},
	};
	/* A point not marked leaves its time to the next stage that is: a request answered
	 * on a loop (no job) spends complete..respond in "loop". */
	uint64_t prev = r->start_ns;
	for (size_t i = 1; i < sizeof(pt) / sizeof(pt[0]); i++) {
		if (pt[i].ns == 0 || pt[i].ns < prev)
			continue;
		uint64_t *st = &stage_ns[pt[i].stage];
		*st = (*st == UINT64_MAX ? 0 : *st) + (pt[i].ns - prev);
		prev = pt[i].ns;
	}
	return r->sent_ns - r->start_ns;
}

void
reqstats_sent(struct reqstats *s, size_t h, const struct http_req *r, int in_stages)
{
	uint64_t st[REQSTATS_STAGES];
	uint64_t total = reqstats_stages(r, st);
	if (total == 0)
		return;
	if (in_stages && r->mark_ns[REQSTATS_MARK_WORK] != 0)
		for (int i = 0; i < REQSTATS_STAGES; i++)
			if (st[i] != UINT64_MAX)
				hist_record(s->stage_ns[i], st[i]);
	if (s->slow_threshold_ns == 0 || total < s->slow_threshold_ns)
		return;
	struct reqstats_slow *e = &s->slow[s->slow_next];
	e->wall_ns = env.wall_ns();
	e->total_ns = total;
	memcpy(e->stage_ns, st, sizeof(st));
	e->handler = h;
	e->method = r->method;
	e->status = r->status;
	size_t n = r->path_len < REQSTATS_SLOW_PATH - 1 ? r->path_len : REQSTATS_SLOW_PATH - 1;
	if (n > 0)
		memcpy(e->path, r->path, n);
	e->path[n] = '\0';
	s->slow_next = (s->slow_next + 1) % s->slow_cap;
	if (s->slow_len < s->slow_cap)
		s->slow_len++;
	s->slow_total++;
}

const struct reqstats_slow *
reqstats_slow_get(const struct reqstats *s, size_t i)
{
	assert(i < s->slow_len);
	return &s->slow[(s->slow_next + s->slow_cap - 1 - i) % s->slow_cap];
}

void
reqstats_slow_reset(struct reqstats *s)
{
	s->slow_next = s->slow_len = 0;
	s->loop_lag_max_ns = 0;
}
