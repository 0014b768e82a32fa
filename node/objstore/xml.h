/*
 * xml.h — what the XML parsers of the remote object stores (azure_xml.c, s3_xml.c) share
 * over expat: memory through env, a refused document type declaration (and so any
 * entity), the first failure kept and the parse stopped, element text within a limit,
 * and one message for a body that fails, naming the document. And the one document both
 * services write alike: an error body, <Error><Code/><Message/></Error>.
 */
#ifndef STRATA_OSXML_H
#define STRATA_OSXML_H

#include <expat.h>
#include <stddef.h>
#include <stdint.h>

/** Longest text of one element, bytes (a key or a blob name is at most 1024). */
#define OSXML_MAX_TEXT 4096
/** Deepest element nesting of an error body accepted. */
#define OSXML_MAX_DEPTH 16

/** The parse state every document's context starts with. */
struct osxml {
	/** The parser (to stop it). */
	XML_Parser p;
	/** Text of the innermost kept element. */
	char text[OSXML_MAX_TEXT + 1];
	/** Its length. */
	size_t tlen;
	/** What went wrong ("" while nothing did). */
	char err[256];
	/** STRATA_ENOMEM when that was it. */
	int err_rc;
	/** The root element was seen. */
	int root_seen;
};

/** Record the first failure (fmt with one %s of arg) and stop the parser. */
void osxml_fail(struct osxml *x, int rc, const char *fmt, const char *arg);
/** Append len bytes of element text; over OSXML_MAX_TEXT the text is cut when cut, else
 *  the parse fails. */
void osxml_text(struct osxml *x, const char *s, int len, int cut);
/** A copy of the element text on the heap (env.malloc); NULL, failing the parse, when
 *  out of memory. */
char *osxml_dup(struct osxml *x);
/** Parse a decimal u64 (digits only); 0 or -1. */
int osxml_u64(const char *s, uint64_t *out);
/** Run expat over data with the handlers (their user data is x, the start of the
 *  document's context); 0, or the failure recorded with what. */
int osxml_run(struct osxml *x, const void *data, size_t len, const char *what, XML_StartElementHandler start,
	      XML_EndElementHandler end, XML_CharacterDataHandler chars);

/** The Code and Message of an error body of either service (each "" when absent; a long
 *  message is cut); 0, or STRATA_EIO when the body is not an error document. */
int osxml_parse_error(const void *data, size_t len, char *code, size_t code_cap, char *msg, size_t msg_cap);

#endif
