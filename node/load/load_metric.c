/*
 * load_metric.c — what a load run measures: per-thing statistics (two latency
 * histograms, counters, a per-interval time series), errors by kind, the flat
 * metric map thresholds look into, and threshold expressions.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/text.h"
#include "load.h"

double
load_parse_duration(const char *s)
{
	if (s == NULL)
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno != 0 || !isfinite(v) || v < 0)
		return -1;
	double mul;
	if (*end == '\0' || strcmp(end, "s") == 0)
		mul = 1;
	else if (strcmp(end, "ms") == 0)
		mul = 1e-3;
	else if (strcmp(end, "us") == 0)
		mul = 1e-6;
	else if (strcmp(end, "m") == 0)
		mul = 60;
	else if (strcmp(end, "h") == 0)
		mul = 3600;
	else
		return -1;
	v *= mul;
	if (v > 366.0 * 86400.0)
		return -1;
	return v;
}

int
load_stat_new(const char *name, int with_series, struct load_stat **out)
{
	struct load_stat *s = env.calloc(1, sizeof(*s));
	if (s == NULL)
		return diag_set(STRATA_ENOMEM, "load: out of memory for statistics of %s", name);
	snprintf(s->name, sizeof(s->name), "%s", name);
	int rc = hist_new(LOAD_HIST_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS, &s->lat);
	if (rc == 0)
		rc = hist_new(LOAD_HIST_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS, &s->raw);
	if (rc == 0 && with_series)
		rc = hist_new(LOAD_HIST_LOWEST, HIST_LATENCY_HIGHEST, HIST_LATENCY_SIGFIGS, &s->ival);
	if (rc != 0) {
		load_stat_delete(s);
		return rc;
	}
	*out = s;
	return 0;
}

void
load_stat_delete(struct load_stat *s)
{
	if (s == NULL)
		return;
	hist_delete(s->lat);
	hist_delete(s->raw);
	hist_delete(s->ival);
	env.free(s->series);
	env.free(s);
}

void
load_stat_record(struct load_stat *s, uint64_t corrected_ns, uint64_t raw_ns, uint64_t rows, int failed)
{
	if (raw_ns > corrected_ns)
		corrected_ns = raw_ns;
	hist_record(s->lat, corrected_ns);
	hist_record(s->raw, raw_ns);
	if (s->ival != NULL)
		hist_record(s->ival, corrected_ns);
	s->count++;
	s->rows += rows;
	if (failed)
		s->errors++;
}

int
load_stat_tick(struct load_stat *s, double t)
{
	if (s->ival == NULL)
		return 0;
	if (s->nseries == s->cap_series) {
		size_t ncap = s->cap_series ? s->cap_series * 2 : 64;
		struct load_series_pt *n = env.realloc(s->series, ncap * sizeof(*n));
		if (n == NULL)
			return diag_set(STRATA_ENOMEM, "load: out of memory for the time series of %s", s->name);
		s->series = n;
		s->cap_series = ncap;
	}
	struct load_series_pt *p = &s->series[s->nseries++];
	p->t = t;
	p->count = s->count - s->ival_count;
	p->rows = s->rows - s->ival_rows;
	p->errors = s->errors - s->ival_errors;
	p->p50 = hist_percentile(s->ival, 50);
	p->p99 = hist_percentile(s->ival, 99);
	p->max = hist_max(s->ival);
	s->ival_count = s->count;
	s->ival_rows = s->rows;
	s->ival_errors = s->errors;
	hist_reset(s->ival);
	return 0;
}

void
load_errors_add(struct load_errors *e, const char *kind, const char *msg)
{
	unsigned i;
	for (i = 0; i < e->n; i++)
		if (strcmp(e->kind[i], kind) == 0)
			break;
	if (i == e->n) {
		if (e->n == LOAD_MAX_ERROR_KINDS) {
			i = e->n - 1;
			snprintf(e->kind[i], sizeof(e->kind[i]), "other");
		} else {
			e->n++;
			snprintf(e->kind[i], sizeof(e->kind[i]), "%s", kind);
		}
	}
	e->count[i]++;
	e->total++;
	if (msg == NULL || msg[0] == '\0')
		return;
	for (unsigned j = 0; j < LOAD_ERROR_SAMPLES; j++) {
		if (e->sample[i][j][0] == '\0') {
			snprintf(e->sample[i][j], sizeof(e->sample[i][j]), "%s", msg);
			return;
		}
		if (strncmp(e->sample[i][j], msg, sizeof(e->sample[i][j]) - 1) == 0)
			return;
	}
}

int
load_threshold_holds(int cmp, double got, double want)
{
	switch (cmp) {
	case LOAD_CMP_LT:
		return got < want;
	case LOAD_CMP_LE:
		return got <= want;
	case LOAD_CMP_GT:
		return got > want;
	case LOAD_CMP_GE:
		return got >= want;
	case LOAD_CMP_EQ:
		return got == want;
	case LOAD_CMP_NE:
		return got != want;
	}
	return 0;
}

int
load_threshold_parse(struct load_threshold *t, const char *expr, char *msg, size_t msglen)
{
	const char *p = expr;
	while (isspace((unsigned char)*p))
		p++;
	static const struct {
		const char *op;
		int cmp;
	} ops[] = { { "<=", LOAD_CMP_LE }, { ">=", LOAD_CMP_GE }, { "==", LOAD_CMP_EQ }, { "!=", LOAD_CMP_NE },
		    { "~=", LOAD_CMP_NE },  { "<", LOAD_CMP_LT },  { ">", LOAD_CMP_GT } };
	int cmp = -1;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		size_t n = strlen(ops[i].op);
		if (strncmp(p, ops[i].op, n) == 0) {
			cmp = ops[i].cmp;
			p += n;
			break;
		}
	}
	if (cmp < 0) {
		snprintf(msg, msglen, "threshold %s: \"%s\" must start with <, <=, >, >=, == or !=", t->metric,
			 expr);
		return -1;
	}
	char *end;
	double v = strtod(p, &end);
	if (end == p || !isfinite(v)) {
		snprintf(msg, msglen, "threshold %s: \"%s\" needs a number after the operator", t->metric, expr);
		return -1;
	}
	while (isspace((unsigned char)*end))
		end++;
	if (*end != '\0') {
		snprintf(msg, msglen, "threshold %s: trailing \"%s\" in \"%s\"", t->metric, end, expr);
		return -1;
	}
	t->cmp = cmp;
	t->value = v;
	snprintf(t->expr, sizeof(t->expr), "%s", expr);
	return 0;
}

int
load_metrics_set(struct load_metrics *m, const char *name, double v)
{
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->name[i], name) == 0) {
			m->value[i] = v;
			return 0;
		}
	}
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		char(*nn)[LOAD_NAME_MAX] = env.realloc(m->name, ncap * sizeof(*nn));
		if (nn == NULL)
			return diag_set(STRATA_ENOMEM, "load: out of memory for metric %s", name);
		m->name = nn;
		double *nv = env.realloc(m->value, ncap * sizeof(*nv));
		if (nv == NULL)
			return diag_set(STRATA_ENOMEM, "load: out of memory for metric %s", name);
		m->value = nv;
		m->cap = ncap;
	}
	snprintf(m->name[m->n], LOAD_NAME_MAX, "%s", name);
	m->value[m->n] = v;
	m->n++;
	return 0;
}

int
load_metrics_get(const struct load_metrics *m, const char *name, double *v)
{
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->name[i], name) == 0) {
			*v = m->value[i];
			return 1;
		}
	}
	return 0;
}

void
load_metrics_destroy(struct load_metrics *m)
{
	env.free(m->name);
	env.free(m->value);
	memset(m, 0, sizeof(*m));
}

int
load_metrics_add_hist(struct load_metrics *m, const char *prefix, const struct hist *h)
{
	static const struct {
		const char *name;
		double p;
	} pcts[] = { { "p50", 50 }, { "p90", 90 }, { "p99", 99 }, { "p999", 99.9 }, { "p9999", 99.99 } };
	char name[LOAD_NAME_MAX + 32];
	int rc = 0;
	if (hist_count(h) == 0)
		return 0;
	for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]) && rc == 0; i++) {
		double ns = (double)hist_percentile(h, pcts[i].p);
		snprintf(name, sizeof(name), "%s.%s_ms", prefix, pcts[i].name);
		rc = load_metrics_set(m, name, ns / 1e6);
		snprintf(name, sizeof(name), "%s.%s_us", prefix, pcts[i].name);
		if (rc == 0)
			rc = load_metrics_set(m, name, ns / 1e3);
	}
	snprintf(name, sizeof(name), "%s.max_ms", prefix);
	if (rc == 0)
		rc = load_metrics_set(m, name, (double)hist_max(h) / 1e6);
	snprintf(name, sizeof(name), "%s.max_us", prefix);
	if (rc == 0)
		rc = load_metrics_set(m, name, (double)hist_max(h) / 1e3);
	snprintf(name, sizeof(name), "%s.min_ms", prefix);
	if (rc == 0)
		rc = load_metrics_set(m, name, (double)hist_min(h) / 1e6);
	snprintf(name, sizeof(name), "%s.mean_ms", prefix);
	if (rc == 0)
		rc = load_metrics_set(m, name, hist_mean(h) / 1e6);
	snprintf(name, sizeof(name), "%s.mean_us", prefix);
	if (rc == 0)
		rc = load_metrics_set(m, name, hist_mean(h) / 1e3);
	return rc;
}


void
load_metrics_suggest(const struct load_metrics *m, const char *name, char *buf, size_t len)
{
	size_t best[3] = { SIZE_MAX, SIZE_MAX, SIZE_MAX };
	unsigned dist[3] = { ~0u, ~0u, ~0u };
	for (size_t i = 0; i < m->n; i++) {
		unsigned d = text_edit_distance(name, m->name[i]);
		for (int k = 0; k < 3; k++) {
			if (d < dist[k]) {
				for (int j = 2; j > k; j--) {
					dist[j] = dist[j - 1];
					best[j] = best[j - 1];
				}
				dist[k] = d;
				best[k] = i;
				break;
			}
		}
	}
	size_t off = 0;
	buf[0] = '\0';
	for (int k = 0; k < 3 && best[k] != SIZE_MAX && off < len; k++) {
		int n = snprintf(buf + off, len - off, "%s%s", k ? ", " : "", m->name[best[k]]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}
