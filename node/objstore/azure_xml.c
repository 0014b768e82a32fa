/*
 * azure_xml.c — List Blobs pages and error bodies, parsed with expat (memory through
 * env). Only the elements strata reads are kept; everything else is skipped.
 */
#include "azure_xml.h"

#include <expat.h>
#include <stdio.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"

/** The elements that matter. */
enum azxml_el {
	AZ_EL_OTHER,
	AZ_EL_RESULTS, /**< EnumerationResults (root of a listing) */
	AZ_EL_BLOBS,   /**< EnumerationResults/Blobs */
	AZ_EL_BLOB,    /**< .../Blobs/Blob */
	AZ_EL_NAME,    /**< .../Blob/Name */
	AZ_EL_PROPS,   /**< .../Blob/Properties */
	AZ_EL_LENGTH,  /**< .../Properties/Content-Length */
	AZ_EL_NEXT,    /**< EnumerationResults/NextMarker */
	AZ_EL_ERROR,   /**< Error (root of an error body) */
	AZ_EL_CODE,    /**< Error/Code */
	AZ_EL_MESSAGE, /**< Error/Message */
};

/** Parse state. */
struct azxml_ctx {
	/** The parser (to stop it). */
	XML_Parser p;
	/** The element stack. */
	enum azxml_el stack[AZXML_MAX_DEPTH];
	/** Its depth. */
	int depth;
	/** Text of the innermost kept element. */
	char text[AZXML_MAX_TEXT + 1];
	/** Its length. */
	size_t tlen;
	/** The listing being filled (NULL: an error body). */
	struct azxml_list *list;
	/** Most entries accepted. */
	size_t max_entries;
	/** The current blob's name and size, and whether they were seen. */
	char *name;
	uint64_t size;
	int have_size;
	/** The error body's code and message. */
	char *code, *msg;
	size_t code_cap, msg_cap;
	/** What went wrong ("" while nothing did). */
	char err[256];
	/** STRATA_ENOMEM when that was it. */
	int err_rc;
	/** The root element was seen. */
	int root_seen;
};

static void *azxml_malloc(size_t n) { return env.malloc(n); }
static void *azxml_realloc(void *p, size_t n) { return env.realloc(p, n); }
static void azxml_free(void *p) { env.free(p); }

static const XML_Memory_Handling_Suite azxml_mem = {azxml_malloc, azxml_realloc, azxml_free};

static void
azxml_fail(struct azxml_ctx *c, int rc, const char *fmt, const char *arg)
{
	if (c->err[0] == '\0') {
		snprintf(c->err, sizeof(c->err), fmt, arg);
		c->err_rc = rc;
	}
	XML_StopParser(c->p, XML_FALSE);
}

static enum azxml_el
azxml_classify(const struct azxml_ctx *c, const char *name)
{
	enum azxml_el parent = c->depth > 0 ? c->stack[c->depth - 1] : AZ_EL_OTHER;
	if (c->depth == 0)
		return strcmp(name, "EnumerationResults") == 0 ? AZ_EL_RESULTS
		       : strcmp(name, "Error") == 0	       ? AZ_EL_ERROR
							       : AZ_EL_OTHER;
	switch (parent) {
	case AZ_EL_RESULTS:
		return strcmp(name, "Blobs") == 0 ? AZ_EL_BLOBS
		       : strcmp(name, "NextMarker") == 0 ? AZ_EL_NEXT : AZ_EL_OTHER;
	case AZ_EL_BLOBS:
		return strcmp(name, "Blob") == 0 ? AZ_EL_BLOB : AZ_EL_OTHER;
	case AZ_EL_BLOB:
		return strcmp(name, "Name") == 0 ? AZ_EL_NAME
		       : strcmp(name, "Properties") == 0 ? AZ_EL_PROPS : AZ_EL_OTHER;
	case AZ_EL_PROPS:
		return strcmp(name, "Content-Length") == 0 ? AZ_EL_LENGTH : AZ_EL_OTHER;
	case AZ_EL_ERROR:
		return strcmp(name, "Code") == 0 ? AZ_EL_CODE
		       : strcmp(name, "Message") == 0 ? AZ_EL_MESSAGE : AZ_EL_OTHER;
	default:
		return AZ_EL_OTHER;
	}
}

static void XMLCALL
azxml_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct azxml_ctx *c = ud;
	if (c->depth >= AZXML_MAX_DEPTH) {
		azxml_fail(c, STRATA_EIO, "elements nested deeper than %s", "16");
		return;
	}
	enum azxml_el el = azxml_classify(c, name);
	if (c->depth == 0) {
		if (c->list != NULL ? el != AZ_EL_RESULTS : el != AZ_EL_ERROR) {
			azxml_fail(c, STRATA_EIO, "unexpected root element <%.64s>", name);
			return;
		}
		c->root_seen = 1;
	}
	if (el == AZ_EL_NAME) {
		for (int i = 0; attrs[i] != NULL; i += 2)
			if (strcmp(attrs[i], "Encoded") == 0 && strcmp(attrs[i + 1], "true") == 0) {
				azxml_fail(c, STRATA_EIO, "an encoded blob name (%s) is not supported",
					   "Encoded=\"true\"");
				return;
			}
	}
	if (el == AZ_EL_BLOB) {
		env.free(c->name);
		c->name = NULL;
		c->size = 0;
		c->have_size = 0;
	}
	c->stack[c->depth++] = el;
	c->tlen = 0;
}

/** Parse a decimal u64 (digits only). */
static int
azxml_u64(const char *s, uint64_t *out)
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

static void XMLCALL
azxml_end(void *ud, const XML_Char *name)
{
	struct azxml_ctx *c = ud;
	if (c->depth == 0)
		return;
	enum azxml_el el = c->stack[--c->depth];
	c->text[c->tlen] = '\0';
	switch (el) {
	case AZ_EL_NAME:
		env.free(c->name);
		c->name = env.malloc(c->tlen + 1);
		if (c->name == NULL) {
			azxml_fail(c, STRATA_ENOMEM, "out of memory%s", "");
			return;
		}
		memcpy(c->name, c->text, c->tlen + 1);
		if (c->tlen == 0 || strlen(c->name) != c->tlen)
			azxml_fail(c, STRATA_EIO, "an empty blob name%s", "");
		break;
	case AZ_EL_LENGTH:
		if (azxml_u64(c->text, &c->size) != 0)
			azxml_fail(c, STRATA_EIO, "Content-Length '%.64s' is not a number", c->text);
		c->have_size = 1;
		break;
	case AZ_EL_BLOB: {
		struct azxml_list *l = c->list;
		if (c->name == NULL) {
			azxml_fail(c, STRATA_EIO, "a <Blob> without a <Name>%s", "");
			return;
		}
		if (!c->have_size) {
			azxml_fail(c, STRATA_EIO, "blob '%.200s' has no Content-Length", c->name);
			return;
		}
		if (l->n >= c->max_entries) {
			azxml_fail(c, STRATA_EIO, "more blobs in one page than the %s asked for", "maxresults");
			return;
		}
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 64;
			struct azxml_entry *v = env.realloc(l->v, cap * sizeof(*v));
			if (v == NULL) {
				azxml_fail(c, STRATA_ENOMEM, "out of memory%s", "");
				return;
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n].name = c->name;
		l->v[l->n].size = c->size;
		l->n++;
		c->name = NULL;
		break;
	}
	case AZ_EL_NEXT:
		memcpy(c->list->next_marker, c->text, c->tlen + 1);
		break;
	case AZ_EL_CODE:
		snprintf(c->code, c->code_cap, "%s", c->text);
		break;
	case AZ_EL_MESSAGE:
		snprintf(c->msg, c->msg_cap, "%s", c->text);
		break;
	default:
		break;
	}
	c->tlen = 0;
}

static void XMLCALL
azxml_chars(void *ud, const XML_Char *s, int len)
{
	struct azxml_ctx *c = ud;
	if (c->depth == 0)
		return;
	enum azxml_el el = c->stack[c->depth - 1];
	if (el != AZ_EL_NAME && el != AZ_EL_LENGTH && el != AZ_EL_NEXT && el != AZ_EL_CODE &&
	    el != AZ_EL_MESSAGE)
		return;
	if ((size_t)len > AZXML_MAX_TEXT - c->tlen) {
		if (el == AZ_EL_MESSAGE) { /* a long message is cut, not refused */
			len = (int)(AZXML_MAX_TEXT - c->tlen);
		} else {
			azxml_fail(c, STRATA_EIO, "element text over %s bytes", "4096");
			return;
		}
	}
	memcpy(c->text + c->tlen, s, (size_t)len);
	c->tlen += (size_t)len;
}

static void XMLCALL
azxml_doctype(void *ud, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
	      int has_internal)
{
	azxml_fail(ud, STRATA_EIO, "a document type declaration (<!DOCTYPE %.64s>) is refused", name);
}

static void XMLCALL
azxml_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value, int value_len,
	     const XML_Char *base, const XML_Char *sysid, const XML_Char *pubid, const XML_Char *notation)
{
	azxml_fail(ud, STRATA_EIO, "an entity declaration (%.64s) is refused", name);
}

/** Run expat over data with c; 0 or the error recorded with what. */
static int
azxml_run(struct azxml_ctx *c, const void *data, size_t len, const char *what)
{
	if (len > (size_t)INT32_MAX)
		return diag_set(STRATA_EIO, "%s: XML body of %zu bytes is too large", what, len);
	XML_Parser p = XML_ParserCreate_MM("UTF-8", &azxml_mem, NULL);
	if (p == NULL)
		return diag_set(STRATA_ENOMEM, "%s: out of memory creating the XML parser", what);
	c->p = p;
	XML_SetUserData(p, c);
	XML_SetElementHandler(p, azxml_start, azxml_end);
	XML_SetCharacterDataHandler(p, azxml_chars);
	XML_SetStartDoctypeDeclHandler(p, azxml_doctype);
	XML_SetEntityDeclHandler(p, azxml_entity);
	enum XML_Status st = XML_Parse(p, data, (int)len, XML_TRUE);
	int rc = 0;
	if (c->err[0] != '\0') {
		rc = diag_set(c->err_rc, "%s: XML line %lu: %s", what,
			      (unsigned long)XML_GetCurrentLineNumber(p), c->err);
	} else if (st != XML_STATUS_OK) {
		rc = diag_set(STRATA_EIO, "%s: malformed XML at line %lu column %lu: %s", what,
			      (unsigned long)XML_GetCurrentLineNumber(p),
			      (unsigned long)XML_GetCurrentColumnNumber(p),
			      XML_ErrorString(XML_GetErrorCode(p)));
	} else if (!c->root_seen) {
		rc = diag_set(STRATA_EIO, "%s: XML without a root element", what);
	}
	XML_ParserFree(p);
	env.free(c->name);
	c->name = NULL;
	return rc;
}

int
azxml_parse_list(const void *data, size_t len, size_t max_entries, const char *what, struct azxml_list *out)
{
	struct azxml_ctx *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "%s: out of memory", what);
	out->n = 0;
	out->next_marker[0] = '\0';
	c->list = out;
	c->max_entries = max_entries;
	int rc = azxml_run(c, data, len, what);
	env.free(c);
	if (rc != 0) {
		for (size_t i = 0; i < out->n; i++)
			env.free(out->v[i].name);
		out->n = 0;
	}
	return rc;
}

void
azxml_list_destroy(struct azxml_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		env.free(l->v[i].name);
	env.free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

int
azxml_parse_error(const void *data, size_t len, char *code, size_t code_cap, char *msg, size_t msg_cap)
{
	code[0] = '\0';
	msg[0] = '\0';
	struct azxml_ctx *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "error body: out of memory");
	c->code = code;
	c->code_cap = code_cap;
	c->msg = msg;
	c->msg_cap = msg_cap;
	int rc = azxml_run(c, data, len, "error body");
	env.free(c);
	return rc;
}
