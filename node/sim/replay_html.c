/*
 * replay_html.c — `strata policy compare --html FILE`: the report over trace time as one
 * self-contained page (inline SVG and CSS; no script, nothing fetched from anywhere).
 */
#include <stdio.h>
#include <string.h>

#include "replay.h"

#define HTML_W 880
#define HTML_H 220
#define HTML_PAD 48

static const char *const html_colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
					    "#e377c2", "#17becf"};

/** Write s with &, <, > and " escaped. */
static void
html_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

/** A series' value at point i of a result, in the chart's unit. */
typedef double (*html_value_fn)(const struct replay_result *r, uint32_t i);

static double
v_pending(const struct replay_result *r, uint32_t i)
{
	return (double)r->points[i].pending;
}

static double
v_merged(const struct replay_result *r, uint32_t i)
{
	return (double)r->points[i].merged / 1048576.0 / ((double)r->step_ns / 1e9);
}

static double
v_written(const struct replay_result *r, uint32_t i)
{
	return (double)r->points[i].written / 1048576.0 / ((double)r->step_ns / 1e9);
}

static double
v_budget(const struct replay_result *r, uint32_t i)
{
	return (double)r->points[i].io_budget / 1048576.0;
}

/** One chart: each result's series (and the IO budget dashed, when budget). */
static void
html_chart(FILE *f, const char *title, const char *unit, const struct replay_result *res, int n,
	   html_value_fn fn, int budget)
{
	double tmax = 0, vmax = 0;
	for (int k = 0; k < n; k++) {
		const struct replay_result *r = &res[k];
		double end = (double)r->npoints * (double)r->step_ns / 1e9;
		if (end > tmax)
			tmax = end;
		for (uint32_t i = 0; i < r->npoints; i++) {
			double v = fn(r, i);
			if (v > vmax)
				vmax = v;
			if (budget && v_budget(r, i) > vmax)
				vmax = v_budget(r, i);
		}
	}
	if (tmax <= 0)
		tmax = 1;
	if (vmax <= 0)
		vmax = 1;
	double tend = (double)res[0].trace_ns / 1e9;
	fprintf(f, "<h2>");
	html_text(f, title);
	fprintf(f, "</h2>\n<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", HTML_W, HTML_H + 30,
		HTML_W, HTML_H + 30);
	int x0 = HTML_PAD, y0 = 10, w = HTML_W - HTML_PAD - 10, h = HTML_H - 20;
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#ccc\"/>\n", x0, y0, w, h);
	for (int g = 0; g <= 4; g++) {
		double v = vmax * g / 4;
		int y = y0 + h - (int)((double)h * g / 4);
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g</text>\n", x0 - 4, y + 4, v);
		double t = tmax * g / 4;
		int x = x0 + (int)((double)w * g / 4);
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"%s\">%.3g s</text>\n", x, y0 + h + 16,
			g == 4 ? "end" : g == 0 ? "start" : "middle", t);
	}
	if (tend > 0 && tend < tmax) {
		int x = x0 + (int)((double)w * tend / tmax);
		fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\" stroke-dasharray=\"2 3\"/>"
			   "<text x=\"%d\" y=\"%d\">trace ends</text>\n", x, y0, x, y0 + h, x + 3, y0 + 12);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", x0 + 4, y0 + h + 28, unit);
	for (int k = 0; k < n; k++) {
		const struct replay_result *r = &res[k];
		const char *col = html_colours[k % 8];
		double step = (double)r->step_ns / 1e9;
		for (int pass = 0; pass < (budget ? 2 : 1); pass++) {
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", col,
				pass ? "1" : "1.6", pass ? " stroke-dasharray=\"6 4\"" : "");
			for (uint32_t i = 0; i < r->npoints; i++) {
				double v = pass ? v_budget(r, i) : fn(r, i);
				if (pass && v == 0)
					v = vmax; /* no budget (0): along the top */
				double x = x0 + (double)w * ((double)i + 0.5) * step / tmax;
				double y = y0 + h - (double)h * v / vmax;
				fprintf(f, "%.1f,%.1f ", x, y);
			}
			fputs("\"/>\n", f);
		}
	}
	fputs("</svg>\n", f);
}

void
replay_html(FILE *f, const struct replay_config *c, const char *const *names, const struct replay_result *res,
	    int n)
{
	fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>strata policy compare</title>\n"
	      "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}svg text{font-size:11px;fill:#444}"
	      "table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right}"
	      "td:first-child,th:first-child{text-align:left}.key span{display:inline-block;width:14px;height:4px;"
	      "margin:0 6px 3px 12px}</style>\n</head><body>\n<h1>strata policy compare</h1>\n<p>trace ",
	      f);
	html_text(f, c->trace);
	fprintf(f, ": %u shards, %.3f s, %llu requests, %llu rows; objects on %s; speed %g. The model and where it "
		   "is approximate: node/sim/replay.h.</p>\n<p class=\"key\">",
		res[0].shards, (double)res[0].trace_ns / 1e9, (unsigned long long)res[0].requests,
		(unsigned long long)res[0].rows, replay_store_name(c->store), c->speed > 0 ? c->speed : 1.0);
	for (int k = 0; k < n; k++) {
		fprintf(f, "<span style=\"background:%s\"></span>", html_colours[k % 8]);
		html_text(f, names[k]);
	}
	fputs("</p>\n", f);
	html_chart(f, "Pending generations (all shards)", "generations", res, n, v_pending, 0);
	html_chart(f, "Merged (read by merges)", "MiB/s", res, n, v_merged, 0);
	html_chart(f, "Background IO written, and the IO budget (dashed; along the top: none)", "MiB/s", res, n,
		   v_written, 1);
	fputs("<h2>Figures</h2>\n<table><tr><th></th>", f);
	for (int k = 0; k < n; k++) {
		fputs("<th>", f);
		html_text(f, names[k]);
		fputs("</th>", f);
	}
	fputs("</tr>\n", f);
#define HROW(label, fmt, expr)                                                                                 \
	do {                                                                                                   \
		fputs("<tr><td>" label "</td>", f);                                                            \
		for (int k = 0; k < n; k++) {                                                                  \
			const struct replay_result *r = &res[k];                                               \
			fprintf(f, "<td>%" fmt "</td>", expr);                                                 \
		}                                                                                              \
		fputs("</tr>\n", f);                                                                           \
	} while (0)
	HROW("seals", "llu", (unsigned long long)r->seals);
	HROW("merges", "llu", (unsigned long long)r->merges);
	HROW("bytes merged (in)", "llu", (unsigned long long)r->merge_bytes_in);
	HROW("write amplification", ".3f", r->write_amp);
	HROW("peak pending (all shards)", "llu", (unsigned long long)r->peak_pending_total);
	HROW("background quiet after the trace (s)", ".2f", (double)r->quiet_ns / 1e9);
	HROW("pending generations when quiet", "llu", (unsigned long long)r->quiet_pending);
	HROW("peak sealed memtables, not flushed", "llu", (unsigned long long)r->peak_sealed);
	HROW("peak memtables (MiB)", ".2f", (double)r->peak_memtable_bytes / 1048576.0);
	HROW("time to drain after the trace (s; -1: not within the limit)", ".2f", r->drained ? (double)r->drain_ns / 1e9 : -1.0);
	HROW("tables per get, p50", "u", r->get_tables_p50);
	HROW("tables per get, p99", "u", r->get_tables_p99);
	HROW("peak merge inputs", "llu", (unsigned long long)r->peak_merge_inputs);
	HROW("peak merge memory, estimated (MiB)", ".1f", (double)r->peak_merge_mem / 1048576.0);
	HROW("background written (MiB)", ".1f", (double)r->bg_written / 1048576.0);
	HROW("background IO busy (s)", ".3f", (double)r->bg_busy_ns / 1e9);
	HROW("store requests, USD", ".6f", r->os_usd);
	HROW("hook runs", "llu", (unsigned long long)r->hook_runs);
	HROW("hook errors", "llu", (unsigned long long)r->hook_errors);
	HROW("report hash", "016llx", (unsigned long long)r->hash);
#undef HROW
	fputs("</table>\n</body></html>\n", f);
}
