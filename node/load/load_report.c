/*
 * load_report.c — what a load run leaves behind: the summary table, the JSON result
 * and a self-contained HTML report (inline SVG plots; no script, no network).
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/env.h"
#include "load_core.h"

/** Percentiles shown everywhere, with their JSON names. */
static const struct {
	const char *label;
	const char *json;
	double p;
} rep_pcts[] = { { "p50", "p50", 50 },	  { "p90", "p90", 90 },	       { "p99", "p99", 99 },
		 { "p99.9", "p999", 99.9 }, { "p99.99", "p9999", 99.99 } };
#define REP_NPCTS (sizeof(rep_pcts) / sizeof(rep_pcts[0]))

static double
rep_ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* ------------------------------------------------------------------------ */
/* Summary table                                                             */
/* ------------------------------------------------------------------------ */

static void
rep_lat_cells(FILE *f, const struct hist *h)
{
	for (size_t i = 0; i < REP_NPCTS; i++)
		fprintf(f, " %9.3f", rep_ms(hist_percentile(h, rep_pcts[i].p)));
	fprintf(f, " %9.3f", rep_ms(hist_max(h)));
}

static void
rep_lat_header(FILE *f)
{
	for (size_t i = 0; i < REP_NPCTS; i++)
		fprintf(f, " %9s", rep_pcts[i].label);
	fprintf(f, " %9s", "max");
}

/** The latency cells of s, corrected then uncorrected, ending both rows. */
static void
rep_lat_rows(FILE *f, const struct load_stat *s)
{
	rep_lat_cells(f, s->lat);
	fprintf(f, "  corrected\n%-20s %-18s %9s %9s %10s %6s %7s |", "", "", "", "", "", "", "");
	rep_lat_cells(f, s->raw);
	fprintf(f, "  uncorrected\n");
}

/** The kinds in e, each with its count and sample messages. */
static void
rep_kinds(FILE *f, const struct load_errors *e)
{
	for (unsigned i = 0; i < e->n; i++) {
		fprintf(f, "  %-18s %llu\n", e->kind[i], (unsigned long long)e->count[i]);
		for (int j = 0; j < LOAD_ERROR_SAMPLES && e->sample[i][j][0]; j++)
			fprintf(f, "      e.g. %s\n", e->sample[i][j]);
	}
}

void
load_report_summary(struct load_run *run, void *fp)
{
	FILE *f = fp;
	double dur = run->t_end > run->t0 ? (double)(run->t_end - run->t0) / 1e9 : 0;
	fprintf(f, "\nstrata load: %s -> %s: %.2fs, %u %s%s\n", run->script, run->target->desc, dur,
		run->target->slots, strcmp(run->target->kind, "http") == 0 ? "connections" : "workers",
		run->stopped ? " (stopped early)" : "");
	fprintf(f, "requests %llu (%.1f/s), rows %llu (%.1f/s), errors %llu, busy %llu\n",
		(unsigned long long)run->requests, dur > 0 ? (double)run->requests / dur : 0,
		(unsigned long long)run->rows, dur > 0 ? (double)run->rows / dur : 0,
		(unsigned long long)run->errors.total, (unsigned long long)run->busy.total);

	fprintf(f, "\n%-20s %-18s %9s %9s %10s %6s %7s |", "scenario", "model", "iters", "iters/s", "rows/s",
		"errors", "dropped");
	rep_lat_header(f);
	fprintf(f, "  (ms)\n");
	for (unsigned i = 0; i < run->nscn; i++) {
		const struct load_scn *s = run->scn[i];
		double sd = load_scn_seconds(run, s);
		fprintf(f, "%-20s %-18s %9llu %9.1f %10.1f %6llu %7llu |", s->name, s->desc,
			(unsigned long long)s->stat->count, sd > 0 ? (double)s->stat->count / sd : 0,
			sd > 0 ? (double)s->stat->rows / sd : 0, (unsigned long long)s->stat->errors,
			(unsigned long long)s->dropped);
		rep_lat_rows(f, s->stat);
		for (unsigned j = 0; j < s->nstages; j++) {
			const struct load_stat *st = s->stages[j].stat;
			if (st == NULL)
				continue;
			fprintf(f, "  %-18s %-18s %9llu %9s %10s %6llu %7s |", st->name, "stage",
				(unsigned long long)st->count, "", "", (unsigned long long)st->errors, "");
			rep_lat_cells(f, st->lat);
			fprintf(f, "  corrected\n");
		}
	}

	int any_verb = 0;
	for (int v = 0; v < LOAD_VERB_COUNT; v++)
		any_verb |= run->verb[v] != NULL;
	if (any_verb) {
		fprintf(f, "\n%-20s %-18s %9s %9s %10s %6s %7s |", "verb", "", "requests", "req/s", "rows/s",
			"errors", "");
		rep_lat_header(f);
		fprintf(f, "  (ms)\n");
		for (int v = 0; v < LOAD_VERB_COUNT; v++) {
			const struct load_stat *s = run->verb[v];
			if (s == NULL)
				continue;
			fprintf(f, "%-20s %-18s %9llu %9.1f %10.1f %6llu %7s |", s->name, "",
				(unsigned long long)s->count, dur > 0 ? (double)s->count / dur : 0,
				dur > 0 ? (double)s->rows / dur : 0, (unsigned long long)s->errors, "");
			rep_lat_rows(f, s);
		}
	}

	fprintf(f, "\nerrors: %llu", (unsigned long long)run->errors.total);
	if (run->interrupted)
		fprintf(f, " (and %llu iterations interrupted at the end)", (unsigned long long)run->interrupted);
	fprintf(f, "\n");
	rep_kinds(f, &run->errors);
	fprintf(f, "busy: %llu (the node was busy with the shard: not errors)\n",
		(unsigned long long)run->busy.total);
	rep_kinds(f, &run->busy);
	if (run->track != NULL) {
		fprintf(f,
			"verify: %llu acknowledged keys, %llu read back: lost_rows %llu (missing %llu, different "
			"value %llu), uncertain %llu, unverified %llu, read errors %llu\n",
			(unsigned long long)load_track_count(run->track), (unsigned long long)run->verified,
			(unsigned long long)(run->lost + run->mismatched), (unsigned long long)run->lost,
			(unsigned long long)run->mismatched, (unsigned long long)run->uncertain,
			(unsigned long long)run->unverified, (unsigned long long)run->verify_errors);
		if (load_track_overflow(run->track))
			fprintf(f, "  %llu keys were not tracked (max_tracked reached)\n",
				(unsigned long long)load_track_overflow(run->track));
		for (int i = 0; i < 3 && run->lost_sample[i][0]; i++)
			fprintf(f, "  lost: %s\n", run->lost_sample[i]);
	}
	if (run->custom.n > 0) {
		fprintf(f, "metrics:");
		for (size_t i = 0; i < run->custom.n; i++) {
			double v = 0;
			load_metrics_get(&run->metrics, run->custom.name[i], &v);
			fprintf(f, "%s %s %.6g", i ? "," : "", run->custom.name[i], v);
		}
		fprintf(f, "\n");
	}
	if (run->nthr > 0) {
		unsigned failed = 0;
		fprintf(f, "thresholds:\n");
		for (unsigned i = 0; i < run->nthr; i++) {
			const struct load_threshold *t = &run->thr[i];
			if (t->found) {
				fprintf(f, "  %-4s  %s %s   (got %.6g)\n", t->ok ? "ok" : "FAIL", t->metric, t->expr,
					t->got);
			} else {
				char sug[300];
				load_metrics_suggest(&run->metrics, t->metric, sug, sizeof(sug));
				fprintf(f, "  FAIL  %s %s   (no such metric; closest: %s)\n", t->metric, t->expr, sug);
			}
			failed += !t->ok;
		}
		if (failed)
			fprintf(f, "result: FAILED (%u of %u thresholds)\n", failed, run->nthr);
		else
			fprintf(f, "result: passed (%u thresholds)\n", run->nthr);
	}
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */
/* ------------------------------------------------------------------------ */

static json_t *
rep_json_lat(const struct hist *h)
{
	json_t *o = json_object();
	for (size_t i = 0; i < REP_NPCTS; i++)
		json_object_set_new(o, rep_pcts[i].json, json_real((double)hist_percentile(h, rep_pcts[i].p) / 1e3));
	json_object_set_new(o, "max", json_real((double)hist_max(h) / 1e3));
	json_object_set_new(o, "min", json_real((double)hist_min(h) / 1e3));
	json_object_set_new(o, "mean", json_real(hist_mean(h) / 1e3));
	json_object_set_new(o, "count", json_integer((json_int_t)hist_count(h)));
	return o;
}

static json_t *
rep_json_stat(const struct load_stat *s, double dur, int is_scn)
{
	json_t *o = json_object();
	json_object_set_new(o, is_scn ? "iterations" : "requests", json_integer((json_int_t)s->count));
	json_object_set_new(o, "rows", json_integer((json_int_t)s->rows));
	json_object_set_new(o, "errors", json_integer((json_int_t)s->errors));
	if (!is_scn)
		json_object_set_new(o, "busy", json_integer((json_int_t)s->busy));
	json_object_set_new(o, is_scn ? "iterations_per_s" : "rps", json_real(dur > 0 ? (double)s->count / dur : 0));
	json_object_set_new(o, "rows_per_s", json_real(dur > 0 ? (double)s->rows / dur : 0));
	json_object_set_new(o, "latency_us", rep_json_lat(s->lat));
	json_object_set_new(o, "latency_uncorrected_us", rep_json_lat(s->raw));
	if (s->nseries > 0) {
		json_t *ser = json_object();
		json_t *t = json_array(), *cnt = json_array(), *rows = json_array(), *err = json_array(),
		       *p50 = json_array(), *p99 = json_array(), *mx = json_array();
		for (size_t i = 0; i < s->nseries; i++) {
			const struct load_series_pt *p = &s->series[i];
			json_array_append_new(t, json_real(p->t));
			json_array_append_new(cnt, json_integer((json_int_t)p->count));
			json_array_append_new(rows, json_integer((json_int_t)p->rows));
			json_array_append_new(err, json_integer((json_int_t)p->errors));
			json_array_append_new(p50, json_real((double)p->p50 / 1e3));
			json_array_append_new(p99, json_real((double)p->p99 / 1e3));
			json_array_append_new(mx, json_real((double)p->max / 1e3));
		}
		json_object_set_new(ser, "t_s", t);
		json_object_set_new(ser, "count", cnt);
		json_object_set_new(ser, "rows", rows);
		json_object_set_new(ser, "errors", err);
		json_object_set_new(ser, "p50_us", p50);
		json_object_set_new(ser, "p99_us", p99);
		json_object_set_new(ser, "max_us", mx);
		json_object_set_new(o, "series", ser);
	}
	return o;
}

/** {kind: {count, samples}} of e. */
static json_t *
rep_json_kinds(const struct load_errors *e)
{
	json_t *ek = json_object();
	for (unsigned i = 0; i < e->n; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "count", json_integer((json_int_t)e->count[i]));
		json_t *samples = json_array();
		for (int j = 0; j < LOAD_ERROR_SAMPLES && e->sample[i][j][0]; j++)
			json_array_append_new(samples, json_string(e->sample[i][j]));
		json_object_set_new(o, "samples", samples);
		json_object_set_new(ek, e->kind[i], o);
	}
	return ek;
}

static json_t *
rep_json(struct load_run *run)
{
	double dur = run->t_end > run->t0 ? (double)(run->t_end - run->t0) / 1e9 : 0;
	json_t *root = json_object();
	json_object_set_new(root, "script", json_string(run->script));
	json_object_set_new(root, "target", json_string(run->target->desc));
	json_object_set_new(root, "target_kind", json_string(run->target->kind));
	json_object_set_new(root, "slots", json_integer(run->target->slots));
	json_object_set_new(root, "started_unix_ms", json_integer((json_int_t)(run->wall0 / 1000000)));
	json_object_set_new(root, "duration_s", json_real(dur));
	json_object_set_new(root, "stopped_early", json_boolean(run->stopped));
	json_object_set_new(root, "requests", json_integer((json_int_t)run->requests));
	json_object_set_new(root, "rows", json_integer((json_int_t)run->rows));
	json_object_set_new(root, "rps", json_real(dur > 0 ? (double)run->requests / dur : 0));
	json_object_set_new(root, "rows_per_s", json_real(dur > 0 ? (double)run->rows / dur : 0));
	json_object_set_new(root, "errors", json_integer((json_int_t)run->errors.total));
	json_object_set_new(root, "errors_by_kind", rep_json_kinds(&run->errors));
	json_object_set_new(root, "busy", json_integer((json_int_t)run->busy.total));
	json_object_set_new(root, "busy_by_verb", rep_json_kinds(&run->busy));
	json_object_set_new(root, "interrupted", json_integer((json_int_t)run->interrupted));
	if (run->track != NULL) {
		json_object_set_new(root, "lost_rows", json_integer((json_int_t)(run->lost + run->mismatched)));
		json_t *v = json_object();
		json_object_set_new(v, "tracked", json_integer((json_int_t)load_track_count(run->track)));
		json_object_set_new(v, "untracked", json_integer((json_int_t)load_track_overflow(run->track)));
		json_object_set_new(v, "verified", json_integer((json_int_t)run->verified));
		json_object_set_new(v, "missing", json_integer((json_int_t)run->lost));
		json_object_set_new(v, "mismatched", json_integer((json_int_t)run->mismatched));
		json_object_set_new(v, "uncertain", json_integer((json_int_t)run->uncertain));
		json_object_set_new(v, "unverified", json_integer((json_int_t)run->unverified));
		json_object_set_new(v, "read_errors", json_integer((json_int_t)run->verify_errors));
		json_t *ls = json_array();
		for (int i = 0; i < 3 && run->lost_sample[i][0]; i++)
			json_array_append_new(ls, json_string(run->lost_sample[i]));
		json_object_set_new(v, "lost_samples", ls);
		json_object_set_new(root, "verify", v);
	} else {
		json_object_set_new(root, "lost_rows", json_null());
	}
	json_t *scns = json_object();
	for (unsigned i = 0; i < run->nscn; i++) {
		const struct load_scn *s = run->scn[i];
		double sd = load_scn_seconds(run, s);
		json_t *o = rep_json_stat(s->stat, sd, 1);
		json_object_set_new(o, "model", json_string(s->model == LOAD_MODEL_OPEN ? "open" : "closed"));
		json_object_set_new(o, "description", json_string(s->desc));
		json_object_set_new(o, s->model == LOAD_MODEL_OPEN ? "rate" : "vus", json_real(s->initial));
		json_object_set_new(o, "start_s", json_real((double)s->start / 1e9));
		json_object_set_new(o, "end_s", json_real((double)s->end / 1e9));
		json_object_set_new(o, "requests", json_integer((json_int_t)s->requests));
		json_object_set_new(o, "rps", json_real(sd > 0 ? (double)s->requests / sd : 0));
		json_object_set_new(o, "dropped", json_integer((json_int_t)s->dropped));
		if (s->model == LOAD_MODEL_OPEN)
			json_object_set_new(o, "arrivals", json_integer((json_int_t)s->arrivals));
		json_t *verbs = json_object();
		for (int v = 0; v < LOAD_VERB_COUNT; v++)
			if (s->verb[v] != NULL)
				json_object_set_new(verbs, load_verb_name(v), rep_json_stat(s->verb[v], sd, 0));
		json_object_set_new(o, "verbs", verbs);
		json_t *stages = json_object();
		for (unsigned j = 0; j < s->nstages; j++)
			if (s->stages[j].stat != NULL)
				json_object_set_new(stages, s->stages[j].name,
						    rep_json_stat(s->stages[j].stat, (double)s->stages[j].dur / 1e9, 1));
		json_object_set_new(o, "stages", stages);
		json_object_set_new(scns, s->name, o);
	}
	json_object_set_new(root, "scenarios", scns);
	json_t *verbs = json_object();
	for (int v = 0; v < LOAD_VERB_COUNT; v++)
		if (run->verb[v] != NULL)
			json_object_set_new(verbs, load_verb_name(v), rep_json_stat(run->verb[v], dur, 0));
	json_object_set_new(root, "verbs", verbs);
	json_t *custom = json_object();
	for (size_t i = 0; i < run->custom.n; i++) {
		double v = 0;
		load_metrics_get(&run->metrics, run->custom.name[i], &v);
		json_object_set_new(custom, run->custom.name[i], json_real(v));
	}
	json_object_set_new(root, "custom", custom);
	json_t *metrics = json_object();
	for (size_t i = 0; i < run->metrics.n; i++)
		json_object_set_new(metrics, run->metrics.name[i],
				    isfinite(run->metrics.value[i]) ? json_real(run->metrics.value[i]) : json_null());
	json_object_set_new(root, "metrics", metrics);
	json_t *thr = json_array();
	for (unsigned i = 0; i < run->nthr; i++) {
		const struct load_threshold *t = &run->thr[i];
		json_t *o = json_object();
		json_object_set_new(o, "metric", json_string(t->metric));
		json_object_set_new(o, "condition", json_string(t->expr));
		json_object_set_new(o, "value", t->found ? json_real(t->got) : json_null());
		json_object_set_new(o, "ok", json_boolean(t->ok));
		json_array_append_new(thr, o);
	}
	json_object_set_new(root, "thresholds", thr);
	json_object_set_new(root, "passed", json_boolean(run->passed));
	return root;
}

int
load_report_json(struct load_run *run, const char *path)
{
	json_t *root = rep_json(run);
	int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
	json_decref(root);
	if (rc != 0) {
		fprintf(stderr, "strata load: cannot write %s\n", path);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* HTML                                                                      */
/* ------------------------------------------------------------------------ */

static const char *const rep_colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
					  "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f" };
#define REP_NCOLORS (sizeof(rep_colors) / sizeof(rep_colors[0]))

static void
hp(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
hp(struct buf *b, const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		buf_append(b, tmp, (size_t)n);
		return;
	}
	char *big = env.malloc((size_t)n + 1);
	if (big == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	buf_append(b, big, (size_t)n);
	env.free(big);
}

/** Append s HTML-escaped. */
static void
hesc(struct buf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			buf_append(b, "&lt;", 4);
			break;
		case '>':
			buf_append(b, "&gt;", 4);
			break;
		case '&':
			buf_append(b, "&amp;", 5);
			break;
		case '"':
			buf_append(b, "&quot;", 6);
			break;
		default:
			buf_append(b, s, 1);
		}
	}
}

/** One line of a chart. */
struct rep_line {
	/** Legend text. */
	char name[LOAD_NAME_MAX + 32];
	/** Colour. */
	const char *color;
	/** Dashed. */
	int dashed;
	/** Points. */
	double *x, *y;
	/** Number of points. */
	size_t n;
};

/** A chart's frame and scales. */
struct rep_chart {
	/** Output. */
	struct buf *b;
	/** Data ranges (already transformed for log axes). */
	double x0, x1, y0, y1;
	/** Logarithmic y axis (base 10). */
	int logy;
	/** x is the percentile axis: -log10(1 - p). */
	int pctx;
	/** Plot area in pixels. */
	double left, top, width, height;
};

static double
rep_tx(const struct rep_chart *c, double x)
{
	return c->left + (x - c->x0) / (c->x1 - c->x0) * c->width;
}

static double
rep_ty(const struct rep_chart *c, double y)
{
	double v = c->logy ? log10(y) : y;
	return c->top + c->height - (v - c->y0) / (c->y1 - c->y0) * c->height;
}

static void
rep_fmt_num(char *out, size_t len, double v)
{
	double a = fabs(v);
	if (a >= 1e6)
		snprintf(out, len, "%.3gM", v / 1e6);
	else if (a >= 1e4)
		snprintf(out, len, "%.3gk", v / 1e3);
	else
		snprintf(out, len, "%g", v);
}

/** Draw an SVG line chart. */
static void
rep_chart(struct buf *b, const char *title, const char *xlabel, const char *ylabel, int logy, int pctx,
	  struct rep_line *lines, size_t nlines, const double *marks, size_t nmarks)
{
	const double W = 960, H = 320;
	struct rep_chart c = { .b = b, .logy = logy, .pctx = pctx, .left = 72, .top = 34, .width = W - 72 - 180,
			       .height = H - 34 - 46 };
	double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
	for (size_t i = 0; i < nlines; i++)
		for (size_t j = 0; j < lines[i].n; j++) {
			double x = lines[i].x[j], y = lines[i].y[j];
			if (!isfinite(x) || !isfinite(y) || (logy && y <= 0))
				continue;
			xmin = fmin(xmin, x);
			xmax = fmax(xmax, x);
			ymin = fmin(ymin, y);
			ymax = fmax(ymax, y);
		}
	hp(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	      "viewBox=\"0 0 %.0f %.0f\" role=\"img\" font-family=\"sans-serif\"><title>",
	   W, H, W, H);
	hesc(b, title);
	hp(b, "</title><rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>"
	      "<text x=\"%.0f\" y=\"20\" font-size=\"13\" font-weight=\"600\" fill=\"#222\">",
	   c.left);
	hesc(b, title);
	hp(b, "</text>");
	if (!isfinite(xmin)) {
		hp(b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#444\">no data</text></svg></figure>\n", c.left + 20,
		   c.top + c.height / 2);
		return;
	}
	if (pctx) {
		c.x0 = 0;
		c.x1 = fmax(2, ceil(xmax));
	} else {
		c.x0 = fmin(0, xmin);
		c.x1 = xmax > c.x0 ? xmax : c.x0 + 1;
	}
	if (logy) {
		c.y0 = floor(log10(ymin));
		c.y1 = ceil(log10(ymax));
		if (c.y1 <= c.y0)
			c.y1 = c.y0 + 1;
	} else {
		c.y0 = 0;
		c.y1 = ymax > 0 ? ymax * 1.08 : 1;
	}
	/* Grid and ticks. */
	hp(b, "<g stroke=\"#e5e5e5\">");
	if (logy) {
		for (double e = c.y0; e <= c.y1 + 1e-9; e += 1) {
			double y = rep_ty(&c, pow(10, e));
			char lab[32];
			rep_fmt_num(lab, sizeof(lab), pow(10, e));
			hp(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", c.left, c.left + c.width, y, y);
			hp(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444\" stroke=\"none\" text-anchor=\"end\">%s</text>", c.left - 6,
			   y + 4, lab);
		}
	} else {
		double step = pow(10, floor(log10((c.y1 - c.y0) / 4)));
		if ((c.y1 - c.y0) / step > 10)
			step *= (c.y1 - c.y0) / step > 25 ? 5 : 2;
		for (double v = 0; v <= c.y1 + 1e-9; v += step) {
			double y = rep_ty(&c, v);
			char lab[32];
			rep_fmt_num(lab, sizeof(lab), v);
			hp(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", c.left, c.left + c.width, y, y);
			hp(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444\" stroke=\"none\" text-anchor=\"end\">%s</text>", c.left - 6,
			   y + 4, lab);
		}
	}
	if (pctx) {
		static const char *const pl[] = { "0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%",
						   "99.99999%" };
		for (int i = 0; i <= (int)c.x1 && i < 8; i++) {
			double x = rep_tx(&c, i);
			hp(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", x, x, c.top, c.top + c.height);
			hp(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444\" stroke=\"none\" text-anchor=\"middle\">%s</text>", x,
			   c.top + c.height + 16, pl[i]);
		}
	} else {
		double span = c.x1 - c.x0;
		double step = pow(10, floor(log10(span / 5)));
		if (span / step > 12)
			step *= span / step > 30 ? 5 : 2;
		for (double v = ceil(c.x0 / step) * step; v <= c.x1 + 1e-9; v += step) {
			double x = rep_tx(&c, v);
			char lab[32];
			rep_fmt_num(lab, sizeof(lab), v);
			hp(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", x, x, c.top, c.top + c.height);
			hp(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444\" stroke=\"none\" text-anchor=\"middle\">%s</text>", x,
			   c.top + c.height + 16, lab);
		}
	}
	hp(b, "</g>");
	for (size_t i = 0; i < nmarks; i++) {
		if (marks[i] < c.x0 || marks[i] > c.x1)
			continue;
		double x = rep_tx(&c, marks[i]);
		hp(b, "<line stroke=\"#888\" stroke-dasharray=\"2 4\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", x, x, c.top,
		   c.top + c.height);
	}
	hp(b, "<rect fill=\"none\" stroke=\"#999\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", c.left, c.top, c.width,
	   c.height);
	hp(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444\" stroke=\"none\" text-anchor=\"middle\">", c.left + c.width / 2, H - 8);
	hesc(b, xlabel);
	hp(b, "</text><text font-size=\"11\" fill=\"#444\" stroke=\"none\" transform=\"translate(16,%.1f) rotate(-90)\" text-anchor=\"middle\">",
	   c.top + c.height / 2);
	hesc(b, ylabel);
	hp(b, "</text>");
	for (size_t i = 0; i < nlines; i++) {
		const struct rep_line *l = &lines[i];
		hp(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s points=\"", l->color,
		   l->dashed ? " stroke-dasharray=\"5 3\"" : "");
		for (size_t j = 0; j < l->n; j++) {
			double x = l->x[j], y = l->y[j];
			if (!isfinite(x) || !isfinite(y) || (logy && y <= 0) || x < c.x0 || x > c.x1)
				continue;
			hp(b, "%.1f,%.1f ", rep_tx(&c, x), rep_ty(&c, y));
		}
		hp(b, "\"/>");
		double ly = c.top + 8 + 16.0 * (double)i;
		hp(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>",
		   c.left + c.width + 12, c.left + c.width + 34, ly, ly, l->color,
		   l->dashed ? " stroke-dasharray=\"5 3\"" : "");
		hp(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444\" stroke=\"none\">", c.left + c.width + 40, ly + 4);
		hesc(b, l->name);
		hp(b, "</text>");
	}
	hp(b, "</svg></figure>\n");
}

static void
rep_lines_free(struct rep_line *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		env.free(l[i].x);
		env.free(l[i].y);
		l[i].x = l[i].y = NULL;
	}
}

/** Allocate n points for l; -1 on ENOMEM. */
static int
rep_line_alloc(struct rep_line *l, size_t n)
{
	l->x = env.calloc(n ? n : 1, sizeof(double));
	l->y = env.calloc(n ? n : 1, sizeof(double));
	l->n = 0;
	return l->x != NULL && l->y != NULL ? 0 : -1;
}

/** Percentile distribution of h (ms) into l: x = -log10(1 - p). */
static int
rep_line_pct(struct rep_line *l, const struct hist *h)
{
	struct hist_iter it;
	struct hist_bucket bk;
	size_t n = 0;
	hist_iter_init(&it, h);
	while (hist_iter_next(&it, &bk))
		n++;
	if (rep_line_alloc(l, n) != 0)
		return -1;
	uint64_t total = hist_count(h);
	double xcap = total > 0 ? ceil(log10((double)total)) : 2;
	if (xcap < 2)
		xcap = 2;
	hist_iter_init(&it, h);
	while (hist_iter_next(&it, &bk)) {
		double p = (double)bk.cumulative / (double)total;
		double x = p >= 1 ? xcap : -log10(1 - p);
		if (x > xcap)
			x = xcap;
		uint64_t hi = bk.hi < hist_max(h) ? bk.hi : hist_max(h);
		l->x[l->n] = x;
		l->y[l->n] = (double)hi / 1e6;
		l->n++;
	}
	return 0;
}

static void
rep_table_lat(struct buf *b, const struct hist *h)
{
	for (size_t i = 0; i < REP_NPCTS; i++)
		hp(b, "<td>%.3f</td>", rep_ms(hist_percentile(h, rep_pcts[i].p)));
	hp(b, "<td>%.3f</td>", rep_ms(hist_max(h)));
}

/** The percentile and max headers, ending the header row. */
static void
rep_table_lat_header(struct buf *b)
{
	for (size_t i = 0; i < REP_NPCTS; i++)
		hp(b, "<th>%s ms</th>", rep_pcts[i].label);
	hp(b, "<th>max ms</th></tr>\n");
}

/** The latency cells of s, corrected then uncorrected, ending both rows. */
static void
rep_table_lat_rows(struct buf *b, const struct load_stat *s)
{
	rep_table_lat(b, s->lat);
	hp(b, "</tr><tr class=\"u\"><td>uncorrected</td>");
	rep_table_lat(b, s->raw);
	hp(b, "</tr>\n");
}

/** A table of the kinds in e, what naming a kind in the header; nothing when e is empty. */
static void
rep_table_kinds(struct buf *b, const struct load_errors *e, const char *what)
{
	if (e->n == 0)
		return;
	hp(b, "<table><tr><th>%s</th><th>count</th><th>examples</th></tr>", what);
	for (unsigned i = 0; i < e->n; i++) {
		hp(b, "<tr><td>");
		hesc(b, e->kind[i]);
		hp(b, "</td><td>%llu</td><td>", (unsigned long long)e->count[i]);
		for (int j = 0; j < LOAD_ERROR_SAMPLES && e->sample[i][j][0]; j++) {
			hp(b, "<code>");
			hesc(b, e->sample[i][j]);
			hp(b, "</code><br>");
		}
		hp(b, "</td></tr>");
	}
	hp(b, "</table>\n");
}

static void
rep_html_tables(struct buf *b, struct load_run *run, double dur)
{
	hp(b, "<h2>Scenarios</h2><table><tr><th>scenario</th><th>model</th><th>window</th><th>iterations</th>"
	      "<th>iters/s</th><th>rows/s</th><th>errors</th><th>dropped</th><th></th>");
	rep_table_lat_header(b);
	for (unsigned i = 0; i < run->nscn; i++) {
		const struct load_scn *s = run->scn[i];
		double sd = load_scn_seconds(run, s);
		hp(b, "<tr><td rowspan=\"2\">");
		hesc(b, s->name);
		hp(b, "</td><td rowspan=\"2\">");
		hesc(b, s->desc);
		hp(b, "</td><td rowspan=\"2\">%.1f&ndash;%.1fs</td><td rowspan=\"2\">%llu</td>"
		      "<td rowspan=\"2\">%.1f</td><td rowspan=\"2\">%.1f</td><td rowspan=\"2\">%llu</td>"
		      "<td rowspan=\"2\">%llu</td><td>corrected</td>",
		   (double)s->start / 1e9, (double)s->end / 1e9, (unsigned long long)s->stat->count,
		   sd > 0 ? (double)s->stat->count / sd : 0, sd > 0 ? (double)s->stat->rows / sd : 0,
		   (unsigned long long)s->stat->errors, (unsigned long long)s->dropped);
		rep_table_lat_rows(b, s->stat);
	}
	hp(b, "</table>\n<h2>Verbs</h2><table><tr><th>verb</th><th>requests</th><th>req/s</th><th>rows/s</th>"
	      "<th>errors</th><th>busy</th><th></th>");
	rep_table_lat_header(b);
	for (int v = 0; v < LOAD_VERB_COUNT; v++) {
		const struct load_stat *s = run->verb[v];
		if (s == NULL)
			continue;
		hp(b, "<tr><td rowspan=\"2\">%s</td><td rowspan=\"2\">%llu</td><td rowspan=\"2\">%.1f</td>"
		      "<td rowspan=\"2\">%.1f</td><td rowspan=\"2\">%llu</td><td rowspan=\"2\">%llu</td>"
		      "<td>corrected</td>",
		   s->name, (unsigned long long)s->count, dur > 0 ? (double)s->count / dur : 0,
		   dur > 0 ? (double)s->rows / dur : 0, (unsigned long long)s->errors,
		   (unsigned long long)s->busy);
		rep_table_lat_rows(b, s);
	}
	hp(b, "</table>\n<h2>Errors: %llu</h2>", (unsigned long long)run->errors.total);
	rep_table_kinds(b, &run->errors, "kind");
	hp(b, "<h2>Busy: %llu</h2><p>Requests the node answered busy with the shard (429, 409, 503 "
	      "&ldquo;busy&rdquo;): not errors.</p>\n", (unsigned long long)run->busy.total);
	rep_table_kinds(b, &run->busy, "verb");
	if (run->track != NULL) {
		hp(b, "<h2>Verification</h2><p>%llu acknowledged keys, %llu read back: <b>lost_rows %llu</b> "
		      "(missing %llu, different value %llu), uncertain %llu, unverified %llu, read errors %llu.</p>\n",
		   (unsigned long long)load_track_count(run->track), (unsigned long long)run->verified,
		   (unsigned long long)(run->lost + run->mismatched), (unsigned long long)run->lost,
		   (unsigned long long)run->mismatched, (unsigned long long)run->uncertain,
		   (unsigned long long)run->unverified, (unsigned long long)run->verify_errors);
	}
	if (run->custom.n > 0) {
		hp(b, "<h2>Script metrics</h2><table>");
		for (size_t i = 0; i < run->custom.n; i++) {
			double v = 0;
			load_metrics_get(&run->metrics, run->custom.name[i], &v);
			hp(b, "<tr><td>");
			hesc(b, run->custom.name[i]);
			hp(b, "</td><td>%.6g</td></tr>", v);
		}
		hp(b, "</table>\n");
	}
	if (run->nthr > 0) {
		hp(b, "<h2>Thresholds: %s</h2><table><tr><th></th><th>metric</th><th>condition</th><th>value</th></tr>",
		   run->passed ? "passed" : "FAILED");
		for (unsigned i = 0; i < run->nthr; i++) {
			const struct load_threshold *t = &run->thr[i];
			hp(b, "<tr class=\"%s\"><td>%s</td><td>", t->ok ? "ok" : "bad", t->ok ? "ok" : "FAIL");
			hesc(b, t->metric);
			hp(b, "</td><td>");
			hesc(b, t->expr);
			if (t->found)
				hp(b, "</td><td>%.6g</td></tr>", t->got);
			else
				hp(b, "</td><td>no such metric</td></tr>");
		}
		hp(b, "</table>\n");
	}
}

/**
 * l as the rate per second of s's iterations or requests in each interval, or of its rows where rows
 * is set; -1 on ENOMEM.
 */
static int
rep_line_rate(struct rep_line *l, const struct load_stat *s, const char *color, int rows)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->name, sizeof(l->name), "%s", s->name);
	l->color = color;
	if (rep_line_alloc(l, s->nseries) != 0)
		return -1;
	for (size_t j = 0; j < s->nseries; j++) {
		double dt = j == 0 ? s->series[0].t : s->series[j].t - s->series[j - 1].t;
		uint64_t v = rows ? s->series[j].rows : s->series[j].count;
		l->x[l->n] = s->series[j].t;
		l->y[l->n] = dt > 0 ? (double)v / dt : 0;
		l->n++;
	}
	return 0;
}

/**
 * l[0] and l[1] as the corrected and the uncorrected (dashed) latency by percentile of s, both in
 * color; -1 on ENOMEM. Both lines are set up either way, so that both are freed.
 */
static int
rep_lines_pct(struct rep_line *l, const struct load_stat *s, const char *color)
{
	int oom = 0;
	memset(&l[0], 0, sizeof(l[0]));
	snprintf(l[0].name, sizeof(l[0].name), "%s", s->name);
	l[0].color = color;
	if (rep_line_pct(&l[0], s->lat) != 0)
		oom = 1;
	memset(&l[1], 0, sizeof(l[1]));
	snprintf(l[1].name, sizeof(l[1].name), "%s uncorrected", s->name);
	l[1].color = color;
	l[1].dashed = 1;
	if (!oom && rep_line_pct(&l[1], s->raw) != 0)
		oom = 1;
	return oom ? -1 : 0;
}

static int
rep_html(struct load_run *run, struct buf *b)
{
	double dur = run->t_end > run->t0 ? (double)(run->t_end - run->t0) / 1e9 : 0;
	char when[64] = "";
	time_t wt = (time_t)(run->wall0 / 1000000000ull);
	struct tm tmv;
	if (gmtime_r(&wt, &tmv) != NULL)
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tmv);
	hp(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>strata load: ");
	hesc(b, run->script);
	hp(b, "</title><style>"
	      "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
	      "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
	      "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;"
	      "text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}"
	      "tr.u td{color:#777}tr.bad td{background:#fde2e2}tr.ok td{background:#e6f5e6}"
	      "figure{margin:10px 0}svg .g line{stroke:#e5e5e5}svg .f{fill:none;stroke:#999}"
	      "svg .m{stroke:#888;stroke-dasharray:2 4}svg .a{font-size:11px;fill:#444}"
	      "svg .t{font-size:13px;font-weight:600;fill:#222}code{font-size:12px}"
	      "</style></head><body>\n<h1>strata load: ");
	hesc(b, run->script);
	hp(b, "</h1><p>Target ");
	hesc(b, run->target->desc);
	hp(b, ", %u %s, %.2f s from %s%s. %llu requests (%.1f/s), %llu rows (%.1f/s), %llu errors.",
	   run->target->slots, strcmp(run->target->kind, "http") == 0 ? "connections" : "workers", dur, when,
	   run->stopped ? " (stopped early)" : "", (unsigned long long)run->requests,
	   dur > 0 ? (double)run->requests / dur : 0, (unsigned long long)run->rows,
	   dur > 0 ? (double)run->rows / dur : 0, (unsigned long long)run->errors.total);
	if (run->nthr > 0)
		hp(b, " Thresholds: <b>%s</b>.", run->passed ? "passed" : "FAILED");
	hp(b, "</p><p>Corrected latency is measured from the intended start of each iteration (the arrival "
	      "time of the open model), so time spent waiting behind a slow request counts; uncorrected "
	      "latency is measured from the moment the request was sent.</p>\n");

	double marks[2 * LOAD_MAX_SCENARIOS];
	size_t nmarks = 0;
	for (unsigned i = 0; i < run->nscn; i++) {
		if (run->scn[i]->start > 0)
			marks[nmarks++] = (double)run->scn[i]->start / 1e9;
		if (run->scn[i]->end < run->duration)
			marks[nmarks++] = (double)run->scn[i]->end / 1e9;
	}
	struct rep_line lines[2 * LOAD_MAX_SCENARIOS];
	size_t nl = 0;
	int oom = 0;

	hp(b, "<h2>Throughput over time</h2>");
	for (unsigned i = 0; i < run->nscn && !oom; i++) {
		const struct load_stat *s = run->scn[i]->stat;
		if (rep_line_rate(&lines[nl++], s, rep_colors[i % REP_NCOLORS], 0) != 0) {
			oom = 1;
			break;
		}
	}
	if (!oom)
		rep_chart(b, "Iterations per second, by scenario", "seconds", "iterations/s", 0, 0, lines, nl, marks,
			  nmarks);
	rep_lines_free(lines, nl);
	nl = 0;
	int any_rows = 0;
	for (unsigned i = 0; i < run->nscn; i++)
		any_rows |= run->scn[i]->stat->rows > 0;
	for (unsigned i = 0; i < run->nscn && any_rows && !oom; i++) {
		const struct load_stat *s = run->scn[i]->stat;
		if (s->rows == 0)
			continue;
		if (rep_line_rate(&lines[nl++], s, rep_colors[i % REP_NCOLORS], 1) != 0) {
			oom = 1;
			break;
		}
	}
	if (any_rows && !oom)
		rep_chart(b, "Rows appended per second, by scenario", "seconds", "rows/s", 0, 0, lines, nl, marks,
			  nmarks);
	rep_lines_free(lines, nl);
	nl = 0;

	hp(b, "<h2>Latency over time (corrected, per interval)</h2>");
	for (unsigned i = 0; i < run->nscn && !oom; i++) {
		const struct load_stat *s = run->scn[i]->stat;
		static const char *const what[] = { "p50", "p99", "max" };
		for (int k = 0; k < 3; k++) {
			struct rep_line *l = &lines[k];
			memset(l, 0, sizeof(*l));
			snprintf(l->name, sizeof(l->name), "%s", what[k]);
			l->color = rep_colors[k == 0 ? 2 : k == 1 ? 0 : 1];
			l->dashed = k == 2;
			if (rep_line_alloc(l, s->nseries) != 0)
				oom = 1;
		}
		nl = 3;
		for (size_t j = 0; j < s->nseries && !oom; j++) {
			const struct load_series_pt *p = &s->series[j];
			if (p->count == 0)
				continue;
			uint64_t v[3] = { p->p50, p->p99, p->max };
			for (int k = 0; k < 3; k++) {
				lines[k].x[lines[k].n] = p->t;
				lines[k].y[lines[k].n] = (double)v[k] / 1e6;
				lines[k].n++;
			}
		}
		char title[LOAD_NAME_MAX + 64];
		snprintf(title, sizeof(title), "%s: latency per interval (ms, log scale)", s->name);
		if (!oom)
			rep_chart(b, title, "seconds", "ms", 1, 0, lines, nl, marks, nmarks);
		rep_lines_free(lines, nl);
		nl = 0;
	}

	hp(b, "<h2>Latency by percentile</h2>");
	for (unsigned i = 0; i < run->nscn && !oom; i++) {
		const struct load_stat *s = run->scn[i]->stat;
		if (rep_lines_pct(&lines[nl], s, rep_colors[i % REP_NCOLORS]) != 0)
			oom = 1;
		nl += 2;
	}
	if (!oom)
		rep_chart(b, "Iteration latency by percentile (ms, log scale)", "percentile", "ms", 1, 1, lines, nl,
			  NULL, 0);
	rep_lines_free(lines, nl);
	nl = 0;
	int vi = 0;
	for (int v = 0; v < LOAD_VERB_COUNT && !oom; v++) {
		const struct load_stat *s = run->verb[v];
		if (s == NULL)
			continue;
		if (rep_lines_pct(&lines[nl], s, rep_colors[vi % REP_NCOLORS]) != 0)
			oom = 1;
		nl += 2;
		vi++;
	}
	if (nl > 0 && !oom)
		rep_chart(b, "Request latency by percentile, by verb (ms, log scale)", "percentile", "ms", 1, 1, lines,
			  nl, NULL, 0);
	rep_lines_free(lines, nl);

	rep_html_tables(b, run, dur);

	json_t *root = rep_json(run);
	char *txt = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(10));
	json_decref(root);
	hp(b, "<h2>Raw result</h2><p>The JSON result of <code>--json</code> is embedded below as data.</p>"
	      "<script type=\"application/json\" id=\"strata-load-result\">");
	if (txt != NULL) {
		/* "</" cannot end the data block early once escaped. */
		for (const char *p = txt; *p; p++) {
			if (p[0] == '<' && p[1] == '/')
				buf_append(b, "<\\/", 3);
			else
				buf_append(b, p, 1);
		}
		free(txt);
	}
	hp(b, "</script>\n</body></html>\n");
	return oom ? -1 : 0;
}

int
load_report_html(struct load_run *run, const char *path)
{
	struct buf b = { 0 };
	int rc = rep_html(run, &b);
	if (rc != 0) {
		fprintf(stderr, "strata load: out of memory building the report\n");
		buf_destroy(&b);
		return -1;
	}
	FILE *f = fopen(path, "w");
	int bad = f == NULL;
	if (f != NULL) {
		bad = fwrite(b.data, 1, b.len, f) != b.len;
		bad |= fclose(f) != 0;
	}
	if (bad) {
		fprintf(stderr, "strata load: cannot write %s\n", path);
		buf_destroy(&b);
		return -1;
	}
	buf_destroy(&b);
	return 0;
}
