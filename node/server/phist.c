/*
 * phist.c — the policy history (phist.h): a ring of the newest entries in memory and a
 * JSON-lines file that outlives the process.
 */
#include "phist.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "../lib/diag.h"
#include "../strata_types.h"

/** One policy put live. */
struct phist_entry {
	uint64_t id, version, wall_ms;
	char hash[17];
	char who[64];
	char name[256];
	char note[128];
	/** The source (malloc). */
	char *src;
	size_t len;
};

struct phist {
	pthread_mutex_t mu;
	/** Ring of cap entries; the oldest at head, len of them. */
	struct phist_entry *e;
	size_t cap, head, len;
	/** Number of the next entry. */
	uint64_t next_id;
	/** The file (malloc), and the lines it holds. */
	char *path;
	size_t file_lines;
	/** The file's last line has no newline (a torn append): the next append ends it first. */
	int torn;
};

void
phist_hash(const char *src, size_t len, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits(src, len));
}

static void
entry_clear(struct phist_entry *x)
{
	free(x->src);
	memset(x, 0, sizeof(*x));
}

/** The entry i places after the oldest. */
static struct phist_entry *
nth(struct phist *h, size_t i)
{
	return &h->e[(h->head + i) % h->cap];
}

/** Take x (its source moves) as the newest entry, dropping the oldest when full. */
static void
push(struct phist *h, struct phist_entry *x)
{
	struct phist_entry *slot;
	if (h->len == h->cap) {
		slot = nth(h, 0);
		entry_clear(slot);
		h->head = (h->head + 1) % h->cap;
		h->len--;
	}
	slot = nth(h, h->len++);
	*slot = *x;
	memset(x, 0, sizeof(*x));
	if (slot->id >= h->next_id)
		h->next_id = slot->id + 1;
}

static void
copy(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", s ? s : "");
}

static json_t *
entry_json(const struct phist_entry *x, int with_source)
{
	char when[40], date[32];
	time_t sec = (time_t)(x->wall_ms / 1000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when, sizeof(when), "%s.%03uZ", date, (unsigned)(x->wall_ms % 1000));
	json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:s, s:s, s:s, s:s?, s:I}", "id", (json_int_t)x->id, "time", when,
			      "time_ms", (json_int_t)x->wall_ms, "version", (json_int_t)x->version, "hash", x->hash,
			      "who", x->who, "name", x->name, "note", x->note[0] ? x->note : NULL, "bytes",
			      (json_int_t)x->len);
	if (o != NULL && with_source) {
		json_t *s = json_stringn(x->src ? x->src : "", x->len);
		json_object_set_new(o, "source", s ? s : json_null());
	}
	return o;
}

/** Append x as one line to the file (synced); rewrite the file first when it holds
 *  twice cap lines. Logs what fails. */
static void
persist(struct phist *h, const struct phist_entry *x)
{
	if (h->file_lines >= 2 * h->cap) {
		size_t n = strlen(h->path) + 8;
		char *tmp = malloc(n);
		FILE *f = tmp ? (snprintf(tmp, n, "%s.tmp", h->path), fopen(tmp, "w")) : NULL;
		int ok = f != NULL;
		for (size_t i = 0; ok && i + 1 < h->len; i++) { /* x, the newest, is written below */
			json_t *o = entry_json(nth(h, i), 1);
			ok = o != NULL && json_dumpf(o, f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF;
			json_decref(o);
		}
		ok = ok && fflush(f) == 0 && fdatasync(fileno(f)) == 0;
		if (f != NULL && fclose(f) != 0)
			ok = 0;
		if (ok && rename(tmp, h->path) == 0) {
			h->file_lines = h->len - 1;
		} else {
			diag_log(LOG_LVL_WARN, "policy history: cannot rewrite %s: %s", h->path, strerror(errno));
			if (tmp)
				unlink(tmp);
		}
		free(tmp);
	}
	FILE *f = fopen(h->path, "a");
	json_t *o = entry_json(x, 1);
	if (f != NULL && h->torn && fputc('\n', f) != EOF)
		h->torn = 0;
	int ok = f != NULL && o != NULL && json_dumpf(o, f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF &&
		 fflush(f) == 0 && fdatasync(fileno(f)) == 0;
	json_decref(o);
	if (f != NULL && fclose(f) != 0)
		ok = 0;
	if (ok)
		h->file_lines++;
	else
		diag_log(LOG_LVL_WARN, "policy history: cannot append to %s: %s (the entry is kept in memory only)",
			 h->path, strerror(errno ? errno : EIO));
}

/** Read the file's entries (the newest cap stay). */
static void
load(struct phist *h)
{
	FILE *f = fopen(h->path, "r");
	if (f == NULL) {
		if (errno != ENOENT)
			diag_log(LOG_LVL_WARN, "policy history: cannot read %s: %s; starting an empty one", h->path,
				 strerror(errno));
		return;
	}
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		lineno++;
		h->file_lines++;
		h->torn = line[n - 1] != '\n';
		json_error_t err;
		json_t *o = json_loadb(line, (size_t)n, 0, &err);
		json_int_t id = 0, version = 0, ms = 0;
		const char *who = NULL, *name = NULL, *note = NULL, *src = NULL;
		size_t len = 0;
		if (o == NULL || json_unpack_ex(o, &err, 0, "{s:I, s:I, s:I, s:s, s:s, s:s%}", "id", &id, "version",
						&version, "time_ms", &ms, "who", &who, "name", &name, "source", &src,
						&len) != 0 ||
		    id <= 0) {
			diag_log(LOG_LVL_WARN, "policy history: %s line %zu is not an entry (%s); skipped", h->path,
				 lineno, err.text);
			json_decref(o);
			continue;
		}
		note = json_string_value(json_object_get(o, "note")); /* null: none */
		struct phist_entry x = {.id = (uint64_t)id, .version = (uint64_t)version, .wall_ms = (uint64_t)ms,
					.len = len};
		x.src = malloc(len + 1);
		if (x.src != NULL) {
			memcpy(x.src, src, len);
			x.src[len] = '\0';
			phist_hash(src, len, x.hash);
			copy(x.who, sizeof(x.who), who);
			copy(x.name, sizeof(x.name), name);
			copy(x.note, sizeof(x.note), note);
			push(h, &x);
		}
		json_decref(o);
	}
	free(line);
	fclose(f);
}

int
phist_open(const char *path, size_t cap, struct phist **out)
{
	*out = NULL;
	if (cap < 1 || cap > PHIST_MAX_CAP)
		return diag_set(STRATA_EINVAL, "policy history: %zu entries asked; it keeps 1..%u", cap,
				PHIST_MAX_CAP);
	struct phist *h = calloc(1, sizeof(*h));
	if (h == NULL || (h->e = calloc(cap, sizeof(*h->e))) == NULL || (h->path = strdup(path)) == NULL) {
		phist_close(h);
		return diag_set(STRATA_ENOMEM, "policy history: out of memory");
	}
	pthread_mutex_init(&h->mu, NULL);
	h->cap = cap;
	h->next_id = 1;
	load(h);
	*out = h;
	return 0;
}

void
phist_close(struct phist *h)
{
	if (h == NULL)
		return;
	if (h->e != NULL) {
		for (size_t i = 0; i < h->cap; i++)
			entry_clear(&h->e[i]);
		pthread_mutex_destroy(&h->mu);
	}
	free(h->e);
	free(h->path);
	free(h);
}

uint64_t
phist_add(struct phist *h, uint64_t version, const char *who, const char *name, const char *note, const char *src,
	  size_t len, int force)
{
	struct phist_entry x = {.version = version, .len = len};
	phist_hash(src, len, x.hash);
	pthread_mutex_lock(&h->mu);
	if (!force && h->len > 0) {
		const struct phist_entry *last = nth(h, h->len - 1);
		if (last->len == len && memcmp(last->src, src, len) == 0) {
			pthread_mutex_unlock(&h->mu);
			return 0;
		}
	}
	x.src = malloc(len + 1);
	if (x.src == NULL) {
		pthread_mutex_unlock(&h->mu);
		diag_log(LOG_LVL_WARN, "policy history: out of memory; policy version %llu is not recorded",
			 (unsigned long long)version);
		return 0;
	}
	memcpy(x.src, src, len);
	x.src[len] = '\0';
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	x.wall_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	x.id = h->next_id;
	copy(x.who, sizeof(x.who), who);
	copy(x.name, sizeof(x.name), name);
	copy(x.note, sizeof(x.note), note);
	uint64_t id = x.id;
	push(h, &x);
	persist(h, nth(h, h->len - 1));
	pthread_mutex_unlock(&h->mu);
	return id;
}

json_t *
phist_json(struct phist *h, int with_source, uint64_t only_id)
{
	json_t *list = json_array();
	pthread_mutex_lock(&h->mu);
	for (size_t i = h->len; list != NULL && i-- > 0;) {
		const struct phist_entry *x = nth(h, i);
		json_array_append_new(list, entry_json(x, with_source && (only_id == 0 || only_id == x->id)));
	}
	json_t *o = json_pack("{s:I, s:s, s:o?}", "capacity", (json_int_t)h->cap, "file", h->path, "entries", list);
	pthread_mutex_unlock(&h->mu);
	return o;
}

int
phist_source(struct phist *h, uint64_t id, char **src, size_t *len)
{
	int rc = STRATA_NOTFOUND;
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < h->len; i++) {
		const struct phist_entry *x = nth(h, i);
		if (id == 0 ? i + 1 != h->len : x->id != id)
			continue;
		*src = malloc(x->len + 1);
		if (*src == NULL) {
			rc = diag_set(STRATA_ENOMEM, "policy history: out of memory");
			break;
		}
		memcpy(*src, x->src, x->len + 1);
		*len = x->len;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}
