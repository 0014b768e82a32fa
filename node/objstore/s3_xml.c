/*
 * s3_xml.c — S3's XML answers parsed with expat (memory through env). Each document
 * kind names the element paths it keeps; everything else is skipped.
 */
#include "s3_xml.h"

#include <expat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/env.h"

/** Longest element path kept ("ListMultipartUploadsResult/Upload/UploadId" fits). */
#define S3XML_MAX_PATH 256

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
	/** The parser (to stop it). */
	XML_Parser p;
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
	/** Text of the innermost element. */
	char text[S3XML_MAX_TEXT + 1];
	/** Its length. */
	size_t tlen;
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
	/** What went wrong ("" while nothing did). */
	char err[256];
	/** STRATA_ENOMEM when that was it. */
	int err_rc;
	/** The root element was seen. */
	int root_seen;
};

static void *s3xml_malloc(size_t n) { return env.malloc(n); }
static void *s3xml_realloc(void *p, size_t n) { return env.realloc(p, n); }
static void s3xml_free(void *p) { env.free(p); }

static const XML_Memory_Handling_Suite s3xml_mem = {s3xml_malloc, s3xml_realloc, s3xml_free};

static void
s3xml_fail(struct s3xml_ctx *c, int rc, const char *fmt, const char *arg)
{
	if (c->err[0] == '\0') {
		snprintf(c->err, sizeof(c->err), fmt, arg);
		c->err_rc = rc;
	}
	XML_StopParser(c->p, XML_FALSE);
}

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
		s3xml_fail(c, STRATA_EIO, "elements nested deeper than %s", "16");
		return;
	}
	if (c->depth == 0) {
		if (strcmp(name, c->root) != 0) {
			s3xml_fail(c, STRATA_EIO, "unexpected root element <%.64s>", name);
			return;
		}
		c->root_seen = 1;
		c->path[0] = '\0';
		c->plen[0] = 0;
		c->depth = 1;
		c->tlen = 0;
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
	c->tlen = 0;
	if (s3xml_field_of(c) == S3F_ENTRY) {
		s3xml_entry_clear(&c->cur);
		c->have_size = 0;
	}
}

/** Parse a decimal u64 (digits only). */
static int
s3xml_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (*s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
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

static char *
s3xml_dup(struct s3xml_ctx *c)
{
	char *s = env.malloc(c->tlen + 1);
	if (s == NULL) {
		s3xml_fail(c, STRATA_ENOMEM, "out of memory%s", "");
		return NULL;
	}
	memcpy(s, c->text, c->tlen + 1);
	return s;
}

/** An entry ended: check it and add it to the page. */
static void
s3xml_entry_end(struct s3xml_ctx *c)
{
	struct s3xml_list *l = c->list;
	if (c->cur.name == NULL) {
		s3xml_fail(c, STRATA_EIO, "an entry without a <Key>%s", "");
		return;
	}
	if (c->kind == S3XML_LIST && !c->have_size) {
		s3xml_fail(c, STRATA_EIO, "object '%.200s' has no <Size>", c->cur.name);
		return;
	}
	if (c->kind == S3XML_UPLOADS && c->cur.upload_id == NULL) {
		s3xml_fail(c, STRATA_EIO, "upload of '%.200s' has no <UploadId>", c->cur.name);
		return;
	}
	if (l->n >= c->max_entries) {
		s3xml_fail(c, STRATA_EIO, "more entries in one page than the %s asked for", "request");
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct s3xml_entry *v = env.realloc(l->v, cap * sizeof(*v));
		if (v == NULL) {
			s3xml_fail(c, STRATA_ENOMEM, "out of memory%s", "");
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
	c->text[c->tlen] = '\0';
	switch (f) {
	case S3F_ENTRY:
		s3xml_entry_end(c);
		break;
	case S3F_NAME:
		if (c->tlen == 0 || strlen(c->text) != c->tlen) {
			s3xml_fail(c, STRATA_EIO, "an empty key%s", "");
			break;
		}
		env.free(c->cur.name);
		c->cur.name = s3xml_dup(c);
		break;
	case S3F_SIZE:
		if (s3xml_u64(c->text, &c->cur.size) != 0)
			s3xml_fail(c, STRATA_EIO, "Size '%.64s' is not a number", c->text);
		c->have_size = 1;
		break;
	case S3F_UPLOAD:
		if (c->tlen == 0 || strlen(c->text) != c->tlen) {
			s3xml_fail(c, STRATA_EIO, "an empty UploadId%s", "");
			break;
		}
		if (c->kind == S3XML_UPLOAD_ID) {
			if (c->tlen >= c->id_cap)
				s3xml_fail(c, STRATA_EIO, "an UploadId longer than %s bytes", "the room for it");
			else
				memcpy(c->id, c->text, c->tlen + 1);
			break;
		}
		env.free(c->cur.upload_id);
		c->cur.upload_id = s3xml_dup(c);
		break;
	case S3F_INITIATED:
		if (s3xml_time(c->text, &c->cur.initiated) != 0)
			s3xml_fail(c, STRATA_EIO, "Initiated '%.64s' is not an ISO 8601 time", c->text);
		break;
	case S3F_CODE:
		snprintf(c->cur.code, sizeof(c->cur.code), "%.*s", (int)sizeof(c->cur.code) - 1, c->text);
		break;
	case S3F_TRUNCATED:
		if (strcmp(c->text, "true") == 0)
			c->list->truncated = 1;
		else if (strcmp(c->text, "false") == 0)
			c->list->truncated = 0;
		else
			s3xml_fail(c, STRATA_EIO, "IsTruncated '%.64s' is neither true nor false", c->text);
		break;
	case S3F_NEXT:
		memcpy(c->list->next, c->text, c->tlen + 1);
		break;
	case S3F_NEXT_UPLOAD:
		memcpy(c->list->next_upload, c->text, c->tlen + 1);
		break;
	default:
		break;
	}
	c->depth--;
	if (c->depth > 0 && c->plen[c->depth - 1] != SIZE_MAX)
		c->path[c->plen[c->depth - 1]] = '\0';
	c->tlen = 0;
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
	if ((size_t)len > S3XML_MAX_TEXT - c->tlen) {
		s3xml_fail(c, STRATA_EIO, "element text over %s bytes", "4096");
		return;
	}
	memcpy(c->text + c->tlen, s, (size_t)len);
	c->tlen += (size_t)len;
}

static void XMLCALL
s3xml_doctype(void *ud, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
	      int has_internal)
{
	s3xml_fail(ud, STRATA_EIO, "a document type declaration (<!DOCTYPE %.64s>) is refused", name);
}

static void XMLCALL
s3xml_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value, int value_len,
	     const XML_Char *base, const XML_Char *sysid, const XML_Char *pubid, const XML_Char *notation)
{
	s3xml_fail(ud, STRATA_EIO, "an entity declaration (%.64s) is refused", name);
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
		for (size_t i = 0; i < list->n; i++) { /* a page parsed into before */
			env.free(list->v[i].name);
			env.free(list->v[i].upload_id);
		}
		list->n = 0;
		list->truncated = 0;
		list->next[0] = '\0';
		list->next_upload[0] = '\0';
	}
	if (id != NULL && id_cap > 0)
		id[0] = '\0';
	XML_Parser p = XML_ParserCreate_MM("UTF-8", &s3xml_mem, NULL);
	if (p == NULL) {
		env.free(c);
		return diag_set(STRATA_ENOMEM, "%s: out of memory creating the XML parser", what);
	}
	c->p = p;
	XML_SetUserData(p, c);
	XML_SetElementHandler(p, s3xml_start, s3xml_end);
	XML_SetCharacterDataHandler(p, s3xml_chars);
	XML_SetStartDoctypeDeclHandler(p, s3xml_doctype);
	XML_SetEntityDeclHandler(p, s3xml_entity);
	enum XML_Status st = XML_Parse(p, data, (int)len, XML_TRUE);
	int rc = 0;
	if (c->err[0] != '\0') {
		rc = diag_set(c->err_rc, "%s: XML line %lu: %s", what, (unsigned long)XML_GetCurrentLineNumber(p),
			      c->err);
	} else if (st != XML_STATUS_OK) {
		rc = diag_set(STRATA_EIO, "%s: malformed XML at line %lu column %lu: %s", what,
			      (unsigned long)XML_GetCurrentLineNumber(p),
			      (unsigned long)XML_GetCurrentColumnNumber(p), XML_ErrorString(XML_GetErrorCode(p)));
	} else if (!c->root_seen) {
		rc = diag_set(STRATA_EIO, "%s: XML without a root element", what);
	} else if (kind == S3XML_UPLOAD_ID && id[0] == '\0') {
		rc = diag_set(STRATA_EIO, "%s: no <UploadId> in the answer", what);
	}
	XML_ParserFree(p);
	s3xml_entry_clear(&c->cur);
	env.free(c);
	if (rc != 0 && list != NULL) {
		for (size_t i = 0; i < list->n; i++) {
			env.free(list->v[i].name);
			env.free(list->v[i].upload_id);
		}
		list->n = 0;
	}
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
	for (size_t i = 0; i < l->n; i++) {
		env.free(l->v[i].name);
		env.free(l->v[i].upload_id);
	}
	env.free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}
