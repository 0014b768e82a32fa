/*
 * s3_xml.c — S3's XML answers parsed with expat (memory through env). Each document
 * kind names the element paths it keeps; everything else is skipped.
 */
#include "s3_xml.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "xml.h"

/** Longest element path kept ("ListMultipartUploadsResult/Upload/UploadId" fits). */
#define S3XML_MAX_PATH 256

_Static_assert(S3XML_MAX_TEXT == OSXML_MAX_TEXT, "a continuation token holds any element text");

/** The documents. */
enum s3xml_kind {
	S3XML_LIST,      /**< ListObjectsV2 */
	S3XML_UPLOADS,   /**< ListMultipartUploads */
	S3XML_DELETE,    /**< DeleteObjects */
	S3XML_UPLOAD_ID, /**< InitiateMultipartUpload */
};

/** What a kept path is. */
enum s3xml_field {
	S3F_NONE,
	S3F_ENTRY,      /**< one entry (Contents, Upload, Error of a delete) */
	S3F_NAME,       /**< its Key */
	S3F_SIZE,       /**< its Size */
	S3F_UPLOAD,     /**< its UploadId, or the document's */
	S3F_INITIATED,  /**< its Initiated */
	S3F_CODE,       /**< its Code */
	S3F_TRUNCATED,  /**< IsTruncated */
	S3F_NEXT,       /**< NextContinuationToken, NextKeyMarker */
	S3F_NEXT_UPLOAD,/**< NextUploadIdMarker */
};

/** A kept path of a document. */
struct s3xml_path {
	/** The path below the root ("Contents/Key"). */
	const char *path;
	/** What it is. */
	enum s3xml_field field;
};

static const struct s3xml_path s3xml_list_paths[] = {
	{"Contents", S3F_ENTRY}, {"Contents/Key", S3F_NAME}, {"Contents/Size", S3F_SIZE},
	{"IsTruncated", S3F_TRUNCATED}, {"NextContinuationToken", S3F_NEXT}, {NULL, S3F_NONE},
};
static const struct s3xml_path s3xml_uploads_paths[] = {
	{"Upload", S3F_ENTRY}, {"Upload/Key", S3F_NAME}, {"Upload/UploadId", S3F_UPLOAD},
	{"Upload/Initiated", S3F_INITIATED}, {"IsTruncated", S3F_TRUNCATED}, {"NextKeyMarker", S3F_NEXT},
	{"NextUploadIdMarker", S3F_NEXT_UPLOAD}, {NULL, S3F_NONE},
};
static const struct s3xml_path s3xml_delete_paths[] = {
	{"Error", S3F_ENTRY}, {"Error/Key", S3F_NAME}, {"Error/Code", S3F_CODE}, {NULL, S3F_NONE},
};
static const struct s3xml_path s3xml_upload_id_paths[] = {
	{"UploadId", S3F_UPLOAD}, {NULL, S3F_NONE},
};

/** Parse state. */
struct s3xml_ctx {
	/** The shared parse state; must be first. */
	struct osxml x;
	/** The document kind. */
	enum s3xml_kind kind;
	/** Its root element. */
	const char *root;
	/** Its kept paths. */
	const struct s3xml_path *paths;
	/** The path below the root of the innermost element ("" at the root). */
	char path[S3XML_MAX_PATH + 1];
	/** Length of path at each depth (SIZE_MAX: the path is too long to be kept). */
	size_t plen[S3XML_MAX_DEPTH + 1];
	/** Element depth (1 = the root). */
	int depth;
	/** The page being filled (NULL: an upload id). */
	struct s3xml_list *list;
	/** Most entries accepted. */
	size_t max_entries;
	/** The entry being read. */
	struct s3xml_entry cur;
	/** Whether its size was seen. */
	int have_size;
	/** The upload id's destination. */
	char *id;
	/** Its room. */
	size_t id_cap;
};

/** The field of the innermost element. */
static enum s3xml_field
s3xml_field_of(const struct s3xml_ctx *c)
{
	if (c->depth < 2 || c->plen[c->depth - 1] == SIZE_MAX)
		return S3F_NONE;
	for (const struct s3xml_path *p = c->paths; p->path != NULL; p++)
		if (strcmp(p->path, c->path) == 0)
			return p->field;
	return S3F_NONE;
}

static void
s3xml_entry_clear(struct s3xml_entry *e)
{
	env.free(e->name);
	env.free(e->upload_id);
	memset(e, 0, sizeof(*e));
}

static void XMLCALL
s3xml_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct s3xml_ctx *c = ud;
	if (c->depth >= S3XML_MAX_DEPTH) {
		osxml_fail(&c->x, STRATA_EIO, "elements nested deeper than %s", "16");
		return;
	}
	if (c->depth == 0) {
		if (strcmp(name, c->root) != 0) {
			osxml_fail(&c->x, STRATA_EIO, "unexpected root element <%.64s>", name);
			return;
		}
		c->x.root_seen = 1;
		c->path[0] = '\0';
		c->plen[0] = 0;
		c->depth = 1;
		c->x.tlen = 0;
		return;
	}
	size_t at = c->plen[c->depth - 1], nl = strlen(name);
	if (at == SIZE_MAX || at + (at > 0) + nl > S3XML_MAX_PATH) {
		c->plen[c->depth++] = SIZE_MAX;
	} else {
		if (at > 0)
			c->path[at++] = '/';
		memcpy(c->path + at, name, nl + 1);
		c->plen[c->depth++] = at + nl;
	}
	c->x.tlen = 0;
	if (s3xml_field_of(c) == S3F_ENTRY) {
		s3xml_entry_clear(&c->cur);
		c->have_size = 0;
	}
}

/** Parse an ISO 8601 UTC time ("2026-12-02T02:10:11.000Z") to seconds. */
static int
s3xml_time(const char *s, int64_t *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	char tail = 0;
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
		   &tm.tm_min, &tm.tm_sec, &tail) < 6 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
	    tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = (int64_t)timegm(&tm);
	return 0;
}

/** An entry ended: check it and add it to the page. */
static void
s3xml_entry_end(struct s3xml_ctx *c)
{
	struct s3xml_list *l = c->list;
	if (c->cur.name == NULL) {
		osxml_fail(&c->x, STRATA_EIO, "an entry without a <Key>%s", "");
		return;
	}
	if (c->kind == S3XML_LIST && !c->have_size) {
		osxml_fail(&c->x, STRATA_EIO, "object '%.200s' has no <Size>", c->cur.name);
		return;
	}
	if (c->kind == S3XML_UPLOADS && c->cur.upload_id == NULL) {
		osxml_fail(&c->x, STRATA_EIO, "upload of '%.200s' has no <UploadId>", c->cur.name);
		return;
	}
	if (l->n >= c->max_entries) {
		osxml_fail(&c->x, STRATA_EIO, "more entries in one page than the %s asked for", "request");
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct s3xml_entry *v = env.realloc(l->v, cap * sizeof(*v));
		if (v == NULL) {
			osxml_fail(&c->x, STRATA_ENOMEM, "out of memory%s", "");
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = c->cur;
	memset(&c->cur, 0, sizeof(c->cur));
}

static void XMLCALL
s3xml_end(void *ud, const XML_Char *name)
{
	struct s3xml_ctx *c = ud;
	if (c->depth == 0)
		return;
	enum s3xml_field f = s3xml_field_of(c);
	c->x.text[c->x.tlen] = '\0';
	switch (f) {
	case S3F_ENTRY:
		s3xml_entry_end(c);
		break;
	case S3F_NAME:
		if (c->x.tlen == 0 || strlen(c->x.text) != c->x.tlen) {
			osxml_fail(&c->x, STRATA_EIO, "an empty key%s", "");
			break;
		}
		env.free(c->cur.name);
		c->cur.name = osxml_dup(&c->x);
		break;
	case S3F_SIZE:
		if (osxml_u64(c->x.text, &c->cur.size) != 0)
			osxml_fail(&c->x, STRATA_EIO, "Size '%.64s' is not a number", c->x.text);
		c->have_size = 1;
		break;
	case S3F_UPLOAD:
		if (c->x.tlen == 0 || strlen(c->x.text) != c->x.tlen) {
			osxml_fail(&c->x, STRATA_EIO, "an empty UploadId%s", "");
			break;
		}
		if (c->kind == S3XML_UPLOAD_ID) {
			if (c->x.tlen >= c->id_cap)
				osxml_fail(&c->x, STRATA_EIO, "an UploadId longer than %s bytes", "the room for it");
			else
				memcpy(c->id, c->x.text, c->x.tlen + 1);
			break;
		}
		env.free(c->cur.upload_id);
		c->cur.upload_id = osxml_dup(&c->x);
		break;
	case S3F_INITIATED:
		if (s3xml_time(c->x.text, &c->cur.initiated) != 0)
			osxml_fail(&c->x, STRATA_EIO, "Initiated '%.64s' is not an ISO 8601 time", c->x.text);
		break;
	case S3F_CODE:
		snprintf(c->cur.code, sizeof(c->cur.code), "%.*s", (int)sizeof(c->cur.code) - 1, c->x.text);
		break;
	case S3F_TRUNCATED:
		if (strcmp(c->x.text, "true") == 0)
			c->list->truncated = 1;
		else if (strcmp(c->x.text, "false") == 0)
			c->list->truncated = 0;
		else
			osxml_fail(&c->x, STRATA_EIO, "IsTruncated '%.64s' is neither true nor false", c->x.text);
		break;
	case S3F_NEXT:
		memcpy(c->list->next, c->x.text, c->x.tlen + 1);
		break;
	case S3F_NEXT_UPLOAD:
		memcpy(c->list->next_upload, c->x.text, c->x.tlen + 1);
		break;
	default:
		break;
	}
	c->depth--;
	if (c->depth > 0 && c->plen[c->depth - 1] != SIZE_MAX)
		c->path[c->plen[c->depth - 1]] = '\0';
	c->x.tlen = 0;
}

static void XMLCALL
s3xml_chars(void *ud, const XML_Char *s, int len)
{
	struct s3xml_ctx *c = ud;
	if (c->depth < 2)
		return;
	enum s3xml_field f = s3xml_field_of(c);
	if (f == S3F_NONE || f == S3F_ENTRY)
		return;
	osxml_text(&c->x, s, len, 0);
}

/** Free the entries of a page and empty it (its room kept). */
static void
s3xml_entries_free(struct s3xml_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		env.free(l->v[i].name);
		env.free(l->v[i].upload_id);
	}
	l->n = 0;
}

/** Run expat over data as a document of kind; 0 or the error recorded with what. */
static int
s3xml_run(enum s3xml_kind kind, const void *data, size_t len, const char *what, struct s3xml_list *list,
	  size_t max_entries, char *id, size_t id_cap)
{
	static const char *const roots[] = {"ListBucketResult", "ListMultipartUploadsResult", "DeleteResult",
					    "InitiateMultipartUploadResult"};
	static const struct s3xml_path *const paths[] = {s3xml_list_paths, s3xml_uploads_paths,
							 s3xml_delete_paths, s3xml_upload_id_paths};
	if (len > (size_t)INT32_MAX)
		return diag_set(STRATA_EIO, "%s: XML body of %zu bytes is too large", what, len);
	struct s3xml_ctx *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "%s: out of memory", what);
	c->kind = kind;
	c->root = roots[kind];
	c->paths = paths[kind];
	c->list = list;
	c->max_entries = max_entries;
	c->id = id;
	c->id_cap = id_cap;
	if (list != NULL) {
		s3xml_entries_free(list); /* a page parsed into before */
		list->truncated = 0;
		list->next[0] = '\0';
		list->next_upload[0] = '\0';
	}
	if (id != NULL && id_cap > 0)
		id[0] = '\0';
	int rc = osxml_run(&c->x, data, len, what, s3xml_start, s3xml_end, s3xml_chars);
	if (rc == 0 && kind == S3XML_UPLOAD_ID && id[0] == '\0')
		rc = diag_set(STRATA_EIO, "%s: no <UploadId> in the answer", what);
	s3xml_entry_clear(&c->cur);
	env.free(c);
	if (rc != 0 && list != NULL)
		s3xml_entries_free(list);
	return rc;
}

int
s3xml_parse_list(const void *data, size_t len, size_t max_entries, const char *what, struct s3xml_list *out)
{
	return s3xml_run(S3XML_LIST, data, len, what, out, max_entries, NULL, 0);
}

int
s3xml_parse_uploads(const void *data, size_t len, size_t max_entries, const char *what,
		    struct s3xml_list *out)
{
	return s3xml_run(S3XML_UPLOADS, data, len, what, out, max_entries, NULL, 0);
}

int
s3xml_parse_delete(const void *data, size_t len, size_t max_entries, const char *what,
		   struct s3xml_list *out)
{
	return s3xml_run(S3XML_DELETE, data, len, what, out, max_entries, NULL, 0);
}

int
s3xml_parse_upload_id(const void *data, size_t len, const char *what, char *id, size_t cap)
{
	return s3xml_run(S3XML_UPLOAD_ID, data, len, what, NULL, 0, id, cap);
}

void
s3xml_list_destroy(struct s3xml_list *l)
{
	s3xml_entries_free(l);
	env.free(l->v);
	l->v = NULL;
	l->cap = 0;
}
