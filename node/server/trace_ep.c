/*
 * trace_ep.c — GET, POST and DELETE /v1/trace: a workload trace of this node
 * (node/lib/wtrace.h, strata_trace_start) on demand, into DATA/traces/NAME.swt, bounded
 * by a duration and a byte budget. The file is opened and, at a stop, synced on the
 * server host's background executor, never on the loop.
 */
#include <errno.h>
#include <http_parser.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../core/store.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/wtrace.h"
#include "../strata_host.h"
#include "api_int.h"

/** Default duration of a POSTed trace, s, and the longest one. */
#define TRACE_EP_DEFAULT_S 60.0
#define TRACE_EP_MAX_S 86400.0

/** The status of the trace recorded now or last, as JSON; NULL when none was started. */
static json_t *
trace_ep_status(struct api *a)
{
	struct wtrace_status st;
	char path[4200];
	if (strata_trace_status(a->db, &st, path, sizeof(path)) != 0)
		return NULL;
	return json_pack("{s:b, s:s, s:s?, s:I, s:I, s:I, s:I, s:I, s:f}", "active", st.active, "file", path, "why",
			 st.why[0] ? st.why : NULL, "records", (json_int_t)st.records, "dropped",
			 (json_int_t)st.dropped, "bytes", (json_int_t)st.bytes, "file_bytes",
			 (json_int_t)st.file_bytes, "rotations", (json_int_t)st.rotations, "elapsed_s",
			 api_round((double)st.elapsed_ns / 1e9, 3));
}

/** A start or a stop on the background executor. */
struct trace_job {
	struct api *a;
	struct http_req *r;
	/** Start (else stop). */
	int start;
	char path[4200];
	uint64_t max_bytes;
	double seconds;
	int rc;
	char err[4400];
};

static void
trace_work(void *arg)
{
	struct trace_job *j = arg;
	if (!j->start) {
		strata_trace_stop(j->a->db);
		return;
	}
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s", j->path);
	char *slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	if (env.mkdir(dir, 0755) != 0 && errno != EEXIST) {
		j->rc = STRATA_EIO;
		snprintf(j->err, sizeof(j->err), "cannot make %s: %s", dir, strerror(errno));
		return;
	}
	struct wtrace_options o = {.path = j->path, .max_bytes = j->max_bytes,
				   .max_ns = (uint64_t)(j->seconds * 1e9)};
	j->rc = strata_trace_start(j->a->db, &o);
	if (j->rc != 0)
		snprintf(j->err, sizeof(j->err), "%s", diag_last());
}

static void
trace_done(void *arg)
{
	struct trace_job *j = arg;
	struct api *a = j->a;
	a->jobs--;
	if (j->rc != 0) {
		api_error(a, j->r, api_status_of(j->rc), "trace not started", j->err);
	} else {
		json_t *o = trace_ep_status(a);
		if (o != NULL && j->start) {
			json_object_set_new(o, "max_bytes", json_integer((json_int_t)j->max_bytes));
			json_object_set_new(o, "seconds", json_real(j->seconds));
		}
		api_json(a, j->r, 200, o ? o : json_pack("{s:b}", "active", 0));
	}
	env.free(j);
}

/** The name of a POSTed trace is one path component of [A-Za-z0-9._-], not starting with '.'. */
static int
trace_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 1 && n <= 100 && s[0] != '.' &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

void
api_trace(struct api *a, struct http_req *r, const struct api_route *rt)
{
	if (r->method == HTTP_GET || r->method == HTTP_HEAD) {
		json_t *o = trace_ep_status(a);
		if (o == NULL)
			api_error(a, r, 404, "no trace", "no trace was recorded since the node started; POST /v1/trace "
				  "starts one");
		else
			api_json(a, r, 200, o);
		return;
	}
	struct wtrace_status st;
	char cur[4200];
	int have = strata_trace_status(a->db, &st, cur, sizeof(cur)) == 0;
	if (r->method == HTTP_DELETE && !(have && st.active)) {
		api_error(a, r, 404, "no trace", "no trace is being recorded");
		return;
	}
	struct trace_job *j = api_job_new(a, r, sizeof(*j));
	if (j == NULL)
		return;
	j->a = a;
	j->r = r;
	j->start = r->method == HTTP_POST;
	if (j->start) {
		if (have && st.active) {
			char d[4400];
			snprintf(d, sizeof(d), "a trace is being recorded into %s; DELETE /v1/trace stops it", cur);
			env.free(j);
			api_error(a, r, 409, "trace running", d);
			return;
		}
		json_error_t err;
		json_t *body = r->body.len ? json_loadb((const char *)r->body.data, r->body.len, 0, &err) : json_object();
		double seconds = TRACE_EP_DEFAULT_S;
		json_int_t max_bytes = (json_int_t)a->trace_max_bytes;
		const char *name = NULL;
		const char *bad = NULL;
		char d[400];
		if (body == NULL || !json_is_object(body)) {
			snprintf(d, sizeof(d), "the body must be a JSON object {\"seconds\", \"max_bytes\", \"name\"}%s%s",
				 body == NULL ? ": " : "", body == NULL ? err.text : "");
			bad = d;
		} else if (json_unpack_ex(body, &err, 0, "{s?F, s?I, s?s}", "seconds", &seconds, "max_bytes", &max_bytes,
					  "name", &name) != 0) {
			snprintf(d, sizeof(d), "%s", err.text);
			bad = d;
		} else if (!(seconds > 0 && seconds <= TRACE_EP_MAX_S)) {
			snprintf(d, sizeof(d), "seconds must be in (0, %.0f]", TRACE_EP_MAX_S);
			bad = d;
		} else if (max_bytes < (json_int_t)WTRACE_MIN_BYTES || (uint64_t)max_bytes > a->trace_max_bytes) {
			snprintf(d, sizeof(d), "max_bytes must be %u..%llu (strata serve --trace-max-bytes)",
				 WTRACE_MIN_BYTES, (unsigned long long)a->trace_max_bytes);
			bad = d;
		} else if (name != NULL && !trace_name_ok(name)) {
			snprintf(d, sizeof(d), "name must be 1..100 bytes of A-Za-z0-9._- not starting with '.'");
			bad = d;
		}
		if (bad != NULL) {
			json_decref(body);
			env.free(j);
			api_error(a, r, 400, "bad trace request", bad);
			return;
		}
		char gen[64];
		if (name == NULL) {
			time_t now = time(NULL);
			struct tm tm;
			gmtime_r(&now, &tm);
			strftime(gen, sizeof(gen), "trace-%Y%m%dT%H%M%SZ", &tm);
			name = gen;
		}
		snprintf(j->path, sizeof(j->path), "%s/traces/%s.swt", store_options(strata_store(a->db))->dir, name);
		json_decref(body);
		j->seconds = seconds;
		j->max_bytes = (uint64_t)max_bytes;
	}
	if (api_submit(a, r, HOST_BG, trace_work, trace_done, j) != 0)
		env.free(j);
}
