/*
 * xml.c — the expat plumbing the Azure and S3 XML parsers share, and the parser of the
 * error body both services write alike (xml.h).
 */
#include "xml.h"

#include <stdio.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"

static void *osxml_malloc(size_t n) { return env.malloc(n); }
static void *osxml_realloc(void *p, size_t n) { return env.realloc(p, n); }
static void osxml_free(void *p) { env.free(p); }

static const XML_Memory_Handling_Suite osxml_mem = {osxml_malloc, osxml_realloc, osxml_free};

void
osxml_fail(struct osxml *x, int rc, const char *fmt, const char *arg)
{
	if (x->err[0] == '\0') {
		snprintf(x->err, sizeof(x->err), fmt, arg);
		x->err_rc = rc;
	}
	XML_StopParser(x->p, XML_FALSE);
}

void
osxml_text(struct osxml *x, const char *s, int len, int cut)
{
	if ((size_t)len > OSXML_MAX_TEXT - x->tlen) {
		if (!cut) {
			osxml_fail(x, STRATA_EIO, "element text over %s bytes", "4096");
			return;
		}
		len = (int)(OSXML_MAX_TEXT - x->tlen);
	}
	memcpy(x->text + x->tlen, s, (size_t)len);
	x->tlen += (size_t)len;
}

char *
osxml_dup(struct osxml *x)
{
	char *s = env.malloc(x->tlen + 1);
	if (s == NULL) {
		osxml_fail(x, STRATA_ENOMEM, "out of memory%s", "");
		return NULL;
	}
	memcpy(s, x->text, x->tlen + 1);
	return s;
}

int
osxml_u64(const char *s, uint64_t *out)
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
osxml_doctype(void *ud, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
	      int has_internal)
{
	osxml_fail(ud, STRATA_EIO, "a document type declaration (<!DOCTYPE %.64s>) is refused", name);
}

static void XMLCALL
osxml_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value, int value_len,
	     const XML_Char *base, const XML_Char *sysid, const XML_Char *pubid, const XML_Char *notation)
{
	osxml_fail(ud, STRATA_EIO, "an entity declaration (%.64s) is refused", name);
}

int
osxml_run(struct osxml *x, const void *data, size_t len, const char *what, XML_StartElementHandler start,
	  XML_EndElementHandler end, XML_CharacterDataHandler chars)
{
	if (len > (size_t)INT32_MAX)
		return diag_set(STRATA_EIO, "%s: XML body of %zu bytes is too large", what, len);
	XML_Parser p = XML_ParserCreate_MM("UTF-8", &osxml_mem, NULL);
	if (p == NULL)
		return diag_set(STRATA_ENOMEM, "%s: out of memory creating the XML parser", what);
	x->p = p;
	XML_SetUserData(p, x);
	XML_SetElementHandler(p, start, end);
	XML_SetCharacterDataHandler(p, chars);
	XML_SetStartDoctypeDeclHandler(p, osxml_doctype);
	XML_SetEntityDeclHandler(p, osxml_entity);
	enum XML_Status st = XML_Parse(p, data, (int)len, XML_TRUE);
	int rc = 0;
	if (x->err[0] != '\0') {
		rc = diag_set(x->err_rc, "%s: XML line %lu: %s", what, (unsigned long)XML_GetCurrentLineNumber(p),
			      x->err);
	} else if (st != XML_STATUS_OK) {
		rc = diag_set(STRATA_EIO, "%s: malformed XML at line %lu column %lu: %s", what,
			      (unsigned long)XML_GetCurrentLineNumber(p),
			      (unsigned long)XML_GetCurrentColumnNumber(p), XML_ErrorString(XML_GetErrorCode(p)));
	} else if (!x->root_seen) {
		rc = diag_set(STRATA_EIO, "%s: XML without a root element", what);
	}
	XML_ParserFree(p);
	return rc;
}

/* ---------------------------------------------------------------- error bodies */

/** The elements of an error body that matter. */
enum osxml_err_el {
	OSXML_EL_OTHER,
	OSXML_EL_ERROR,   /**< Error (the root) */
	OSXML_EL_CODE,    /**< Error/Code */
	OSXML_EL_MESSAGE, /**< Error/Message */
};

/** Parse state of an error body. */
struct osxml_err {
	/** The shared parse state; must be first. */
	struct osxml x;
	/** The element stack. */
	enum osxml_err_el stack[OSXML_MAX_DEPTH];
	/** Its depth. */
	int depth;
	/** Where the code and the message go. */
	char *code, *msg;
	/** Their room. */
	size_t code_cap, msg_cap;
};

static void XMLCALL
osxml_err_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct osxml_err *c = ud;
	if (c->depth >= OSXML_MAX_DEPTH) {
		osxml_fail(&c->x, STRATA_EIO, "elements nested deeper than %s", "16");
		return;
	}
	enum osxml_err_el el = OSXML_EL_OTHER;
	if (c->depth == 0) {
		if (strcmp(name, "Error") != 0) {
			osxml_fail(&c->x, STRATA_EIO, "unexpected root element <%.64s>", name);
			return;
		}
		el = OSXML_EL_ERROR;
		c->x.root_seen = 1;
	} else if (c->stack[c->depth - 1] == OSXML_EL_ERROR) {
		el = strcmp(name, "Code") == 0 ? OSXML_EL_CODE
		     : strcmp(name, "Message") == 0 ? OSXML_EL_MESSAGE : OSXML_EL_OTHER;
	}
	c->stack[c->depth++] = el;
	c->x.tlen = 0;
}

static void XMLCALL
osxml_err_end(void *ud, const XML_Char *name)
{
	struct osxml_err *c = ud;
	if (c->depth == 0)
		return;
	enum osxml_err_el el = c->stack[--c->depth];
	c->x.text[c->x.tlen] = '\0';
	if (el == OSXML_EL_CODE)
		snprintf(c->code, c->code_cap, "%s", c->x.text);
	else if (el == OSXML_EL_MESSAGE)
		snprintf(c->msg, c->msg_cap, "%s", c->x.text);
	c->x.tlen = 0;
}

static void XMLCALL
osxml_err_chars(void *ud, const XML_Char *s, int len)
{
	struct osxml_err *c = ud;
	if (c->depth == 0)
		return;
	enum osxml_err_el el = c->stack[c->depth - 1];
	if (el != OSXML_EL_CODE && el != OSXML_EL_MESSAGE)
		return;
	osxml_text(&c->x, s, len, el == OSXML_EL_MESSAGE); /* a long message is cut, not refused */
}

int
osxml_parse_error(const void *data, size_t len, char *code, size_t code_cap, char *msg, size_t msg_cap)
{
	code[0] = '\0';
	msg[0] = '\0';
	struct osxml_err *c = env.calloc(1, sizeof(*c));
	if (c == NULL)
		return diag_set(STRATA_ENOMEM, "error body: out of memory");
	c->code = code;
	c->code_cap = code_cap;
	c->msg = msg;
	c->msg_cap = msg_cap;
	int rc = osxml_run(&c->x, data, len, "error body", osxml_err_start, osxml_err_end, osxml_err_chars);
	env.free(c);
	return rc;
}
