/*
 * azure_xml.c — List Blobs pages, parsed with expat (memory through env). Only the
 * elements strata reads are kept; everything else is skipped. Error bodies are parsed by
 * osxml_parse_error (xml.c).
 */
#include "azure_xml.h"

#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "xml.h"

_Static_assert(AZXML_MAX_TEXT == OSXML_MAX_TEXT, "a NextMarker holds any element text");

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
};

/** Parse state. */
struct azxml_ctx {
	/** The shared parse state; must be first. */
	struct osxml x;
	/** The element stack. */
	enum azxml_el stack[AZXML_MAX_DEPTH];
	/** Its depth. */
	int depth;
	/** The listing being filled. */
	struct azxml_list *list;
	/** Most entries accepted. */
	size_t max_entries;
	/** The current blob's name and size, and whether they were seen. */
	char *name;
	uint64_t size;
	int have_size;
};

static enum azxml_el
azxml_classify(const struct azxml_ctx *c, const char *name)
{
	enum azxml_el parent = c->depth > 0 ? c->stack[c->depth - 1] : AZ_EL_OTHER;
	if (c->depth == 0)
		return strcmp(name, "EnumerationResults") == 0 ? AZ_EL_RESULTS : AZ_EL_OTHER;
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
	default:
		return AZ_EL_OTHER;
	}
}

static void XMLCALL
azxml_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct azxml_ctx *c = ud;
	if (c->depth >= AZXML_MAX_DEPTH) {
		osxml_fail(&c->x, STRATA_EIO, "elements nested deeper than %s", "16");
		return;
	}
	enum azxml_el el = azxml_classify(c, name);
	if (c->depth == 0) {
		if (el != AZ_EL_RESULTS) {
			osxml_fail(&c->x, STRATA_EIO, "unexpected root element <%.64s>", name);
			return;
		}
		c->x.root_seen = 1;
	}
	if (el == AZ_EL_NAME) {
		for (int i = 0; attrs[i] != NULL; i += 2)
			if (strcmp(attrs[i], "Encoded") == 0 && strcmp(attrs[i + 1], "true") == 0) {
				osxml_fail(&c->x, STRATA_EIO, "an encoded blob name (%s) is not supported",
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
	c->x.tlen = 0;
}

static void XMLCALL
azxml_end(void *ud, const XML_Char *name)
{
	struct azxml_ctx *c = ud;
	if (c->depth == 0)
		return;
	enum azxml_el el = c->stack[--c->depth];
	c->x.text[c->x.tlen] = '\0';
	switch (el) {
	case AZ_EL_NAME:
		env.free(c->name);
		c->name = osxml_dup(&c->x);
		if (c->name == NULL)
			return;
		if (c->x.tlen == 0 || strlen(c->name) != c->x.tlen)
			osxml_fail(&c->x, STRATA_EIO, "an empty blob name%s", "");
		break;
	case AZ_EL_LENGTH:
		if (osxml_u64(c->x.text, &c->size) != 0)
			osxml_fail(&c->x, STRATA_EIO, "Content-Length '%.64s' is not a number", c->x.text);
		c->have_size = 1;
		break;
	case AZ_EL_BLOB: {
		struct azxml_list *l = c->list;
		if (c->name == NULL) {
			osxml_fail(&c->x, STRATA_EIO, "a <Blob> without a <Name>%s", "");
			return;
		}
		if (!c->have_size) {
			osxml_fail(&c->x, STRATA_EIO, "blob '%.200s' has no Content-Length", c->name);
			return;
		}
		if (l->n >= c->max_entries) {
			osxml_fail(&c->x, STRATA_EIO, "more blobs in one page than the %s asked for", "maxresults");
			return;
		}
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 64;
			struct azxml_entry *v = env.realloc(l->v, cap * sizeof(*v));
			if (v == NULL) {
				osxml_fail(&c->x, STRATA_ENOMEM, "out of memory%s", "");
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
		memcpy(c->list->next_marker, c->x.text, c->x.tlen + 1);
		break;
	default:
		break;
	}
	c->x.tlen = 0;
}

static void XMLCALL
azxml_chars(void *ud, const XML_Char *s, int len)
{
	struct azxml_ctx *c = ud;
	if (c->depth == 0)
		return;
	enum azxml_el el = c->stack[c->depth - 1];
	if (el != AZ_EL_NAME && el != AZ_EL_LENGTH && el != AZ_EL_NEXT)
		return;
	osxml_text(&c->x, s, len, 0);
}

/** Run expat over data with c; 0 or the error recorded with what. */
static int
azxml_run(struct azxml_ctx *c, const void *data, size_t len, const char *what)
{
	int rc = osxml_run(&c->x, data, len, what, azxml_start, azxml_end, azxml_chars);
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
