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

int
reqstats_create(struct reqstats *s, size_t handlers)
{
	memset(s, 0, sizeof(*s));
	s->start_ns = env.mono_ns();
	s->handler = env.calloc(handlers ? handlers : 1, sizeof(*s->handler));
	if (s->handler == NULL)
		return diag_set(STRATA_ENOMEM, "api: out of memory");
	s->handlers = handlers;
	int rc;
	if ((rc = hist_new_latency(&s->append_ns)) != 0 || (rc = hist_new_latency(&s->get_ns)) != 0 ||
	    (rc = hist_new_latency(&s->request_ns)) != 0)
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
	env.free(s->handler);
	memset(s, 0, sizeof(*s));
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
