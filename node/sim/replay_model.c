/*
 * replay_model.c — the replay's cost model and price tables (replay.h): defaults, and the
 * files `strata calibrate` writes and `strata policy compare --model/--prices` read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../strata_types.h"
#include "replay.h"

static const char *const replay_stores[] = {"local", "azure", "s3"};

const char *
replay_store_name(int store)
{
	return store >= 0 && store < 3 ? replay_stores[store] : "?";
}

int
replay_store_parse(const char *name)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(name, replay_stores[i]) == 0)
			return i;
	return -1;
}

int
replay_store_of_url(const char *url)
{
	for (int i = 1; url != NULL && i < 3; i++) {
		size_t n = strlen(replay_stores[i]);
		if (strncmp(url, replay_stores[i], n) == 0 && strncmp(url + n, "://", 3) == 0)
			return i;
	}
	return REPLAY_STORE_LOCAL;
}

void
replay_model_default(int store, struct sim_model *m)
{
	/* Round figures of a data-centre SSD and of a remote store reached from the same region;
	 * the CPU figure is strata's one-thread merge of incompressible rows on the project's
	 * 2-core VM (tests/bench/FIGURES.md: 290-378 MB/s). `strata calibrate` measures them. */
	*m = (struct sim_model){
		.disk_read_mib_s = 1000,
		.disk_write_mib_s = 500,
		.disk_op_ns = 20000,
		.disk_sync_ns = 2000000,
		.store_part_bytes = 8u << 20,
		.cpu_mib_s = 300,
	};
	if (store == REPLAY_STORE_AZURE) {
		m->store_commit_requests = 1;
		m->store_read_ns = 15000000;
		m->store_write_ns = 30000000;
		m->store_mib_s = 60;
	} else if (store == REPLAY_STORE_S3) {
		m->store_commit_requests = 2;
		m->store_read_ns = 20000000;
		m->store_write_ns = 30000000;
		m->store_mib_s = 80;
	}
	m->store_remote = store != REPLAY_STORE_LOCAL;
}

/** The model's keys: name, and where the value goes (a double or a u64 member). */
struct model_key {
	const char *name;
	size_t off;
	int is_double;
	const char *help;
};

#define MK_D(field, help) {#field, offsetof(struct sim_model, field), 1, help}
#define MK_U(field, help) {#field, offsetof(struct sim_model, field), 0, help}
static const struct model_key model_keys[] = {
	MK_D(disk_read_mib_s, "sequential read, MiB/s"),
	MK_D(disk_write_mib_s, "sequential write, MiB/s"),
	MK_U(disk_op_ns, "each pread or pwrite, ns"),
	MK_U(disk_sync_ns, "each fsync or fdatasync, ns"),
	MK_U(store_part_bytes, "a streamed write's part, bytes"),
	MK_U(store_read_ns, "first byte of a store read, ns"),
	MK_U(store_write_ns, "a store write's answer, ns"),
	MK_D(store_mib_s, "one store request's payload, MiB/s"),
	MK_D(cpu_mib_s, "background encoding (merge) CPU, MiB/s written"),
};
#define NMODEL_KEYS (sizeof(model_keys) / sizeof(model_keys[0]))

/** Trim s in place (leading and trailing blanks); returns its start. */
static char *
replay_trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/** Call fn for each line of path that holds something (comments from # and blanks cut),
 *  until it returns nonzero. what names the file's kind in messages. */
static int
replay_lines(const char *path, const char *what, int (*fn)(void *ctx, const char *path, int ln, char *t),
	     void *ctx)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return diag_set(STRATA_EINVAL, "%s %s: %s", what, path, strerror(errno));
	char line[512];
	int ln = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		ln++;
		char *h = strchr(line, '#');
		if (h != NULL)
			*h = '\0';
		char *t = replay_trim(line);
		if (*t != '\0')
			rc = fn(ctx, path, ln, t);
	}
	fclose(f);
	return rc;
}

/** v as a number in [0, max]; -1 when it is none. */
static double
replay_number(const char *v, double max)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	return *v == '\0' || *end != '\0' || errno != 0 || !(d >= 0) || d > max ? -1 : d;
}

static int
model_line(void *ctx, const char *path, int ln, char *t)
{
	struct sim_model *m = ctx;
	char *eq = strchr(t, '=');
	if (eq == NULL)
		return diag_set(STRATA_EINVAL, "model %s:%d: expected KEY = VALUE", path, ln);
	*eq = '\0';
	char *k = replay_trim(t), *v = replay_trim(eq + 1);
	size_t i = 0;
	while (i < NMODEL_KEYS && strcmp(model_keys[i].name, k) != 0)
		i++;
	if (i == NMODEL_KEYS)
		return diag_set(STRATA_EINVAL, "model %s:%d: unknown key '%s' (the keys: disk_read_mib_s, "
				"disk_write_mib_s, disk_op_ns, disk_sync_ns, store_part_bytes, store_read_ns, "
				"store_write_ns, store_mib_s, cpu_mib_s)", path, ln, k);
	double d = replay_number(v, 1e15);
	if (d < 0)
		return diag_set(STRATA_EINVAL, "model %s:%d: %s needs a number >= 0, not '%s'", path, ln, k, v);
	char *dst = (char *)m + model_keys[i].off;
	if (model_keys[i].is_double)
		*(double *)dst = d;
	else
		*(uint64_t *)dst = (uint64_t)d;
	return 0;
}

int
replay_model_load(const char *path, struct sim_model *m)
{
	int rc = replay_lines(path, "model", model_line, m);
	if (rc == 0 && m->store_part_bytes != 0 && m->store_part_bytes < 4096)
		rc = diag_set(STRATA_EINVAL, "model %s: store_part_bytes must be 0 or at least 4096", path);
	return rc;
}

void
replay_model_write(FILE *f, const struct sim_model *m)
{
	for (size_t i = 0; i < NMODEL_KEYS; i++) {
		const char *src = (const char *)m + model_keys[i].off;
		if (model_keys[i].is_double)
			fprintf(f, "%-17s = %.1f   # %s\n", model_keys[i].name, *(const double *)src, model_keys[i].help);
		else
			fprintf(f, "%-17s = %llu   # %s\n", model_keys[i].name,
				(unsigned long long)*(const uint64_t *)src, model_keys[i].help);
	}
}

void
replay_prices_default(int store, struct replay_prices *p)
{
	memset(p, 0, sizeof(*p));
	double *u = p->usd_per_1000;
	if (store == REPLAY_STORE_AZURE) {
		/* Azure Blob, Hot tier, LRS: write operations (Put Blob, Put Block, Put Block
		 * List) and List $0.065 per 10 000, reads and other operations $0.0044 per 10 000
		 * (Get Blob Properties among them), deletes free. */
		snprintf(p->name, sizeof(p->name), "Azure Blob, hot, LRS (list prices, unverified)");
		u[SIM_OS_PUT] = u[SIM_OS_PART] = u[SIM_OS_COMMIT] = u[SIM_OS_LIST] = 0.0065;
		u[SIM_OS_GET] = u[SIM_OS_HEAD] = 0.00044;
	} else if (store == REPLAY_STORE_S3) {
		/* S3 Standard: PUT, COPY, POST, LIST $0.005 per 1000 (an UploadPart is a PUT,
		 * create and complete are POSTs), GET and HEAD $0.0004 per 1000, DELETE free. */
		snprintf(p->name, sizeof(p->name), "S3 Standard (list prices, unverified)");
		u[SIM_OS_PUT] = u[SIM_OS_PART] = u[SIM_OS_COMMIT] = u[SIM_OS_LIST] = 0.005;
		u[SIM_OS_GET] = u[SIM_OS_HEAD] = 0.0004;
	} else {
		snprintf(p->name, sizeof(p->name), "local disk (no request charges)");
	}
}

static int
prices_line(void *ctx, const char *path, int ln, char *t)
{
	struct replay_prices *p = ctx;
	char *sp = strpbrk(t, " \t");
	if (sp == NULL)
		return diag_set(STRATA_EINVAL, "prices %s:%d: expected KIND USD_PER_1000", path, ln);
	*sp = '\0';
	char *v = replay_trim(sp + 1);
	if (strcmp(t, "name") == 0) {
		snprintf(p->name, sizeof(p->name), "%s", v);
		return 0;
	}
	int k = 0;
	while (k < SIM_OS_KINDS && strcmp(sim_os_kind_name(k), t) != 0)
		k++;
	if (k == SIM_OS_KINDS)
		return diag_set(STRATA_EINVAL, "prices %s:%d: unknown kind '%s' (get, head, put, part, commit, list, "
				"delete, or name)", path, ln, t);
	double d = replay_number(v, 1e6);
	if (d < 0)
		return diag_set(STRATA_EINVAL, "prices %s:%d: %s needs a price >= 0 in USD per 1000 requests, not '%s'",
				path, ln, t, v);
	p->usd_per_1000[k] = d;
	return 0;
}

int
replay_prices_load(const char *path, struct replay_prices *p)
{
	snprintf(p->name, sizeof(p->name), "%.63s", path);
	return replay_lines(path, "prices", prices_line, p);
}

void
replay_model_of(const struct replay_config *c, struct sim_model *m)
{
	if (c->model != NULL)
		*m = *c->model;
	else
		replay_model_default(c->store, m);
	m->store_remote = c->store != REPLAY_STORE_LOCAL;
}

void
replay_prices_of(const struct replay_config *c, struct replay_prices *p)
{
	if (c->prices != NULL)
		*p = *c->prices;
	else
		replay_prices_default(c->store, p);
}
