/*
 * load_verb.c — the ctx object of `strata load` scripts: the verbs (append, delete,
 * get, scan, scan_rows, seal, merge_wal, put_policy, get_policy, stats, http,
 * http_raw), sleep, custom metrics and histogram objects; how a request's outcome
 * is judged (a success, a busy shard, a failure) and handed back to Lua; and the
 * encodings the HTTP target needs (NDJSON rows, base64, JSON into Lua tables).
 * Loop thread only.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../lib/base64.h"
#include "../lib/env.h"
#include "../lib/text.h"
#include "load_core.h"

/* ------------------------------------------------------------------------ */
/* Encoding helpers                                                          */
/* ------------------------------------------------------------------------ */

/** Whether p[0..n) is valid UTF-8 without NUL bytes (jansson refuses NUL in strings). */
static int
load_utf8_ok(const uint8_t *p, size_t n)
{
	return memchr(p, 0, n) == NULL && text_utf8_valid(p, n);
}

/** Append a JSON string literal of valid UTF-8 p to b. */
static int
load_json_str(struct buf *b, const uint8_t *p, size_t n)
{
	if (buf_reserve(b, n + 2) != 0 || buf_append(b, "\"", 1) != 0)
		return -1;
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if (buf_append(b, p + run, i - run) != 0)
			return -1;
		char esc[8];
		int el;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			el = 2;
		} else if (c == '\n') {
			memcpy(esc, "\\n", 2);
			el = 2;
		} else {
			el = snprintf(esc, sizeof(esc), "\\u%04x", c);
		}
		if (buf_append(b, esc, (size_t)el) != 0)
			return -1;
		run = i + 1;
	}
	if (buf_append(b, p + run, n - run) != 0 || buf_append(b, "\"", 1) != 0)
		return -1;
	return 0;
}

/** Append one NDJSON row line: text fields when valid UTF-8, else *_b64. */
static int
load_ndjson_row(struct buf *b, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	int kt = load_utf8_ok(k, kl), vt = load_utf8_ok(v, vl);
	int rc = buf_append(b, kt ? "{\"key\":" : "{\"key_b64\":\"", kt ? 7 : 12);
	if (rc == 0)
		rc = kt ? load_json_str(b, k, kl) : b64_encode(b, k, kl);
	if (rc == 0 && !kt)
		rc = buf_append(b, "\"", 1);
	if (rc == 0)
		rc = buf_append(b, vt ? ",\"value\":" : ",\"value_b64\":\"", vt ? 9 : 14);
	if (rc == 0)
		rc = vt ? load_json_str(b, v, vl) : b64_encode(b, v, vl);
	if (rc == 0 && !vt)
		rc = buf_append(b, "\"", 1);
	if (rc == 0)
		rc = buf_append(b, "}\n", 2);
	return rc;
}

/** Push a JSON value as a Lua value (objects and arrays as tables, null as nil). */
static void
load_push_json(lua_State *L, json_t *j, int depth)
{
	luaL_checkstack(L, 4, "JSON too deep");
	if (depth > 64) {
		lua_pushnil(L);
		return;
	}
	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		lua_createtable(L, 0, (int)json_object_size(j));
		const char *k;
		json_t *v;
		json_object_foreach(j, k, v)
		{
			load_push_json(L, v, depth + 1);
			lua_setfield(L, -2, k);
		}
		break;
	}
	case JSON_ARRAY: {
		lua_createtable(L, (int)json_array_size(j), 0);
		size_t i;
		json_t *v;
		json_array_foreach(j, i, v)
		{
			load_push_json(L, v, depth + 1);
			lua_rawseti(L, -2, (int)i + 1);
		}
		break;
	}
	case JSON_STRING:
		lua_pushlstring(L, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		lua_pushnumber(L, (lua_Number)json_integer_value(j));
		break;
	case JSON_REAL:
		lua_pushnumber(L, json_real_value(j));
		break;
	case JSON_TRUE:
		lua_pushboolean(L, 1);
		break;
	case JSON_FALSE:
		lua_pushboolean(L, 0);
		break;
	default:
		lua_pushnil(L);
		break;
	}
}

/** Push string field name (or name_b64, decoded) of JSON object o; -1 when absent or bad. */
static int
load_push_json_bytes(lua_State *L, json_t *o, const char *name, struct buf *tmp)
{
	json_t *v = json_object_get(o, name);
	if (json_is_string(v)) {
		lua_pushlstring(L, json_string_value(v), json_string_length(v));
		return 0;
	}
	char b64name[32];
	snprintf(b64name, sizeof(b64name), "%s_b64", name);
	v = json_object_get(o, b64name);
	if (!json_is_string(v))
		return -1;
	buf_reset(tmp);
	size_t n = json_string_length(v), m;
	if (buf_reserve(tmp, b64_decoded_max(n) + 1) != 0 ||
	    b64_decode(json_string_value(v), n, B64_URLSAFE | B64_LENIENT, tmp->data, &m) != 0)
		return -1;
	tmp->len = m;
	lua_pushlstring(L, tmp->len ? (const char *)tmp->data : "", tmp->len);
	return 0;
}

/** Set the row n (from 1) of a scan result: rows[n] = {key=, value=} or, flat, [2n-1] = key,
 *  [2n] = value. The key and the value are on top of the stack (popped); the result below. */
static void
load_scan_set(lua_State *L, int flat, int n)
{
	if (flat) {
		lua_rawseti(L, -3, 2 * n);
		lua_rawseti(L, -2, 2 * n - 1);
		return;
	}
	lua_createtable(L, 0, 2);
	lua_insert(L, -3);
	lua_setfield(L, -3, "value");
	lua_setfield(L, -2, "key");
	lua_rawseti(L, -2, n);
}

/** Push the rows of a scan reply: an array of {key=, value=} (r->scan_rows), else the flat
 *  array {k1, v1, k2, v2, ...}; -1 (with r->errmsg) when malformed. */
static int
load_push_scan(lua_State *L, struct load_req *r)
{
	int flat = !r->scan_rows;
	lua_newtable(L);
	int n = 0;
	if (r->resp.len == 0)
		return 0;
	if (r->packed) {
		struct rd rd;
		rd_init(&rd, r->resp.data, r->resp.len);
		while (rd_left(&rd) > 0) {
			uint32_t kl = rd_u32(&rd);
			const uint8_t *k = rd_bytes(&rd, kl);
			uint32_t vl = rd_u32(&rd);
			const uint8_t *v = rd_bytes(&rd, vl);
			if (rd.err)
				break;
			lua_pushlstring(L, (const char *)k, kl);
			lua_pushlstring(L, (const char *)v, vl);
			load_scan_set(L, flat, ++n);
		}
		return 0;
	}
	struct buf tmp = { 0 };
	const char *p = (const char *)r->resp.data, *end = p + r->resp.len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (le > p && !(le - p == 1 && *p == '\r')) {
			json_error_t jerr;
			json_t *o = json_loadb(p, (size_t)(le - p), 0, &jerr);
			if (o == NULL || !json_is_object(o)) {
				json_decref(o);
				buf_destroy(&tmp);
				snprintf(r->errmsg, sizeof(r->errmsg), "scan reply line %d is not a JSON object: %.*s",
					 n + 1, (int)(le - p > 120 ? 120 : le - p), p);
				return -1;
			}
			if (load_push_json_bytes(L, o, "key", &tmp) != 0) {
				json_decref(o);
				buf_destroy(&tmp);
				snprintf(r->errmsg, sizeof(r->errmsg), "scan reply line %d has no key", n + 1);
				return -1;
			}
			if (load_push_json_bytes(L, o, "value", &tmp) != 0) {
				json_decref(o);
				buf_destroy(&tmp);
				snprintf(r->errmsg, sizeof(r->errmsg), "scan reply line %d has no value", n + 1);
				return -1;
			}
			load_scan_set(L, flat, ++n);
			json_decref(o);
		}
		p = le + 1;
	}
	buf_destroy(&tmp);
	return 0;
}

/** The iterator ctx:scan returns: upvalues the flat rows and the index of the last key. */
static int
load_scan_next(lua_State *L)
{
	lua_Integer i = lua_tointeger(L, lua_upvalueindex(2)) + 2;
	lua_rawgeti(L, lua_upvalueindex(1), (int)i - 1);
	if (lua_isnil(L, -1))
		return 1;
	lua_rawgeti(L, lua_upvalueindex(1), (int)i);
	lua_pushinteger(L, i);
	lua_replace(L, lua_upvalueindex(2));
	return 2;
}

/** Push response headers "Name: value" lines as a table name -> value. */
static void
load_push_headers(lua_State *L, const struct buf *h)
{
	lua_newtable(L);
	if (h->len == 0)
		return;
	const char *p = (const char *)h->data, *end = p + h->len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *e = le;
		if (e > p && e[-1] == '\r')
			e--;
		const char *colon = memchr(p, ':', (size_t)(e - p));
		if (colon != NULL && colon > p) {
			const char *v = colon + 1;
			while (v < e && (*v == ' ' || *v == '\t'))
				v++;
			lua_pushlstring(L, p, (size_t)(colon - p));
			lua_pushlstring(L, v, (size_t)(e - v));
			lua_rawset(L, -3);
		}
		p = le + 1;
	}
}

/* ------------------------------------------------------------------------ */
/* Outcomes of requests                                                      */
/* ------------------------------------------------------------------------ */

/** Error kind of a failed request ("connect", "http_5xx", ...). */
const char *
load_fail_kind(const struct load_req *r)
{
	switch (r->fail) {
	case LOAD_FAIL_CONNECT:
		return "connect";
	case LOAD_FAIL_TIMEOUT:
		return "timeout";
	case LOAD_FAIL_WRITE:
		return "write";
	case LOAD_FAIL_READ:
		return "read";
	case LOAD_FAIL_TRANSPORT:
		return "transport";
	case LOAD_FAIL_STATUS:
		return r->status >= 500 ? "http_5xx" : "http_4xx";
	case LOAD_FAIL_RESPONSE:
		return "bad_response";
	case LOAD_FAIL_ENGINE:
		return "engine";
	case LOAD_FAIL_UNSUPPORTED:
		return "unsupported";
	case LOAD_FAIL_UNEXPECTED:
		return "unexpected_status";
	case LOAD_FAIL_BUSY:
		return "busy";
	case LOAD_FAIL_INTERRUPTED:
		return "interrupted";
	default:
		return "none";
	}
}

/** Whether b holds the text s. */
static int
load_mem_has(const struct buf *b, const char *s)
{
	return b->len > 0 && memmem(b->data, b->len, s, strlen(s)) != NULL;
}

/** Whether the node answered r "busy with the shard, try again": 429; 409 (a merge conflict: not
 *  for an append, where it means fenced); 503 whose body says busy. Raw HTTP is the script's. */
static int
load_busy(const struct load_req *r)
{
	if (r->verb == LOAD_VERB_HTTP || (r->fail != LOAD_FAIL_NONE && r->fail != LOAD_FAIL_ENGINE))
		return 0;
	if (r->status == 429)
		return 1;
	if (r->status == 409)
		return r->verb != LOAD_VERB_APPEND;
	if (r->status == 503)
		return load_mem_has(&r->resp, "busy") || strstr(r->errmsg, "busy") != NULL;
	return 0;
}

/** Decide whether r succeeded (1) under its verb's rules and expect; else set fail and errmsg. */
int
load_classify(struct load_req *r)
{
	int body_n = (int)(r->resp.len > 200 ? 200 : r->resp.len);
	if (r->expect != 0) {
		if (r->status == r->expect && (r->fail == LOAD_FAIL_NONE || r->fail == LOAD_FAIL_ENGINE ||
					       r->fail == LOAD_FAIL_RESPONSE)) {
			r->fail = LOAD_FAIL_NONE;
			return 1;
		}
		if (r->fail == LOAD_FAIL_NONE || r->fail == LOAD_FAIL_ENGINE) {
			char why[sizeof(r->errmsg)];
			snprintf(why, sizeof(why), "%.*s", r->errmsg[0] ? (int)strlen(r->errmsg) : body_n,
				 r->errmsg[0] ? r->errmsg : body_n ? (const char *)r->resp.data : "");
			load_req_fail(r, LOAD_FAIL_UNEXPECTED, "%s: expected status %d, got %d: %s",
				      load_verb_name(r->verb), r->expect, r->status, why);
		}
		return 0;
	}
	if (load_busy(r)) {
		/* The target's words (an embedded failure's message), else the node's reply. */
		char why[sizeof(r->errmsg)];
		snprintf(why, sizeof(why), "%.*s", r->errmsg[0] ? (int)strlen(r->errmsg) : body_n,
			 r->errmsg[0] ? r->errmsg : body_n ? (const char *)r->resp.data : "");
		load_req_fail(r, LOAD_FAIL_BUSY, "%s shard %u: busy (status %d%s): %s", load_verb_name(r->verb),
			      r->shard, r->status, r->has_retry_after ? ", Retry-After given" : "", why);
		return 0;
	}
	if (r->fail != LOAD_FAIL_NONE)
		return 0;
	if (r->status >= 200 && r->status < 300)
		return 1;
	/* A 404 of a read is an absent row, unless the node says the shard or route is unknown. */
	if (r->status == 404 && (r->verb == LOAD_VERB_GET || r->verb == LOAD_VERB_VERIFY) &&
	    !load_mem_has(&r->resp, "unknown shard") && !load_mem_has(&r->resp, "no endpoint"))
		return 1;
	if (r->verb == LOAD_VERB_HTTP)
		return 1;
	load_req_fail(r, LOAD_FAIL_STATUS, "%s shard %u: status %d: %.*s", load_verb_name(r->verb), r->shard,
		      r->status, body_n, body_n ? (const char *)r->resp.data : "");
	return 0;
}

/** Whether a failed append may still have been applied by the node. */
static int
load_append_uncertain(const struct load_req *r)
{
	if (r->fail == LOAD_FAIL_CONNECT)
		return 0;
	if (r->status >= 400 && r->status < 500)
		return 0;
	return 1;
}

/** Record the rows of a completed append in the tracker. */
void
load_track_append(struct load_run *run, struct load_req *r, int ok)
{
	if (run->track == NULL || !r->track)
		return;
	const struct load_rowmeta *m = (const struct load_rowmeta *)r->rowmeta.data;
	if (ok && r->last_seq + 1 < r->nrows)
		ok = 0;
	if (!ok && !load_append_uncertain(r))
		return;
	for (size_t i = 0; i < r->nrows; i++) {
		const void *k = r->keys.data + m[i].koff;
		if (ok)
			load_track_ack(run->track, r->shard, k, m[i].klen, r->last_seq - (r->nrows - 1) + i,
				       m[i].vhash, m[i].vlen);
		else
			load_track_uncertain(run->track, r->shard, k, m[i].klen);
	}
}

/** Push the results of a successful r on L; the count, or -1 (errmsg set) when the reply is malformed. */
int
load_push_ok(lua_State *L, struct load_req *r)
{
	int top = lua_gettop(L);
	if (r->expect != 0 && (r->status < 200 || r->status >= 300) && r->verb != LOAD_VERB_HTTP) {
		lua_pushboolean(L, 1);
		if (r->errmsg[0])
			lua_pushstring(L, r->errmsg);
		else
			lua_pushlstring(L, r->resp.len ? (const char *)r->resp.data : "", r->resp.len);
		return 2;
	}
	switch (r->verb) {
	case LOAD_VERB_APPEND:
		lua_pushnumber(L, (lua_Number)r->last_seq);
		return 1;
	case LOAD_VERB_GET:
		if (r->status == 404)
			lua_pushnil(L);
		else
			lua_pushlstring(L, r->resp.len ? (const char *)r->resp.data : "", r->resp.len);
		return 1;
	case LOAD_VERB_SCAN:
		if (load_push_scan(L, r) != 0) {
			lua_settop(L, top);
			return -1;
		}
		if (!r->scan_rows) {
			lua_pushinteger(L, 0);
			lua_pushcclosure(L, load_scan_next, 2);
		}
		return 1;
	case LOAD_VERB_MERGE:
		lua_pushnumber(L, (lua_Number)r->reclaimed);
		lua_pushnumber(L, (lua_Number)r->pending);
		return 2;
	case LOAD_VERB_STATS:
	case LOAD_VERB_GET_POLICY: {
		json_error_t jerr;
		json_t *j = json_loadb(r->resp.len ? (const char *)r->resp.data : "", r->resp.len, 0, &jerr);
		if (j == NULL) {
			snprintf(r->errmsg, sizeof(r->errmsg), "%s reply is not JSON: %s", load_verb_name(r->verb),
				 jerr.text);
			return -1;
		}
		load_push_json(L, j, 0);
		json_decref(j);
		return 1;
	}
	case LOAD_VERB_HTTP:
		lua_pushinteger(L, r->status);
		lua_pushlstring(L, r->resp.len ? (const char *)r->resp.data : "", r->resp.len);
		load_push_headers(L, &r->resp_headers);
		return 3;
	default:
		lua_pushboolean(L, 1);
		return 1;
	}
}

/* ------------------------------------------------------------------------ */
/* ctx: the verbs                                                            */
/* ------------------------------------------------------------------------ */

static struct load_run *
ctx_run(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

/** The coroutine calling a waiting verb; raises when called from anywhere else. */
static struct load_iter *
verb_iter(lua_State *L, struct load_run *run, const char *verb)
{
	struct load_iter *it = run->cur;
	if (it == NULL || it->co != L)
		luaL_error(L, "ctx:%s: call it from a scenario's exec, setup or teardown%s", verb,
			   it != NULL ? " (not from a coroutine of your own)" : "");
	if (run->phase == LOAD_PHASE_DONE)
		luaL_error(L, "ctx:%s: the run is over", verb);
	return it;
}

static uint32_t
verb_shard(lua_State *L, int idx, const char *verb)
{
	lua_Number n = luaL_checknumber(L, idx);
	if (!(n >= 0 && n <= (lua_Number)UINT32_MAX) || n != floor(n))
		luaL_error(L, "ctx:%s: shard must be an integer 0..%u, got %f", verb, UINT32_MAX, (double)n);
	return (uint32_t)n;
}

/** opts.expect of an options table at idx (0 when none). */
static int
verb_expect(lua_State *L, int idx, const char *verb)
{
	if (lua_isnoneornil(L, idx))
		return 0;
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_getfield(L, idx, "expect");
	int e = 0;
	if (!lua_isnil(L, -1)) {
		lua_Number n = lua_tonumber(L, -1);
		if (!lua_isnumber(L, -1) || n < 100 || n > 599 || n != floor(n))
			luaL_error(L, "ctx:%s: expect must be an HTTP status 100..599", verb);
		e = (int)n;
	}
	lua_pop(L, 1);
	return e;
}

/** Raise after giving r back. */
static int
verb_abort(lua_State *L, struct load_run *run, struct load_req *r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int
verb_abort(lua_State *L, struct load_run *run, struct load_req *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r != NULL)
		load_run_req_put(run, r);
	return luaL_error(L, "%s", msg);
}

static struct load_req *
verb_req(lua_State *L, struct load_run *run, int verb)
{
	struct load_req *r = load_run_req_get(run);
	if (r == NULL)
		luaL_error(L, "ctx:%s: out of memory", load_verb_name(verb));
	r->verb = verb;
	return r;
}

/** Submit r for it and yield until it completes. */
static int
verb_go(lua_State *L, struct load_iter *it, struct load_req *r)
{
	struct load_run *run = it->run;
	it->req = r;
	it->call_ns = load_now_ns();
	load_run_submit(run, r, run->verb_done, it);
	return lua_yield(L, 0);
}

/** Key and value of row table at idx: [1]/[2] or .key/.value; leaves 2 values pushed. */
static int
verb_row(lua_State *L, int idx, const char **k, size_t *kl, const char **v, size_t *vl)
{
	if (!lua_istable(L, idx))
		return -1;
	lua_rawgeti(L, idx, 1);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_getfield(L, idx, "key");
	}
	lua_rawgeti(L, idx, 2);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_getfield(L, idx, "value");
	}
	if (lua_type(L, -2) != LUA_TSTRING && lua_type(L, -2) != LUA_TNUMBER)
		return -1;
	if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
		return -1;
	*k = lua_tolstring(L, -2, kl);
	*v = lua_tolstring(L, -1, vl);
	return 0;
}

/** Make the rows argument at 3 a list of rows: (key, value) at 3 and 4 becomes {{key, value}}
 *  (the options move from 5 to 4), and one row {key, value} or {key=, value=} becomes {row}. */
static void
verb_rows_arg(lua_State *L)
{
	int t = lua_type(L, 3);
	if (t == LUA_TSTRING || t == LUA_TNUMBER) {
		if (lua_type(L, 4) != LUA_TSTRING && lua_type(L, 4) != LUA_TNUMBER)
			luaL_error(L, "ctx:append(shard, key, value): value must be a string, got %s",
				   luaL_typename(L, 4));
		lua_settop(L, 5);
		lua_createtable(L, 1, 0);
		lua_createtable(L, 2, 0);
		lua_pushvalue(L, 3);
		lua_rawseti(L, -2, 1);
		lua_pushvalue(L, 4);
		lua_rawseti(L, -2, 2);
		lua_rawseti(L, -2, 1);
		lua_replace(L, 3);
		lua_remove(L, 4);
		return;
	}
	if (t != LUA_TTABLE)
		luaL_error(L, "ctx:append: rows must be a list of {key, value} rows, one row, or a key and a "
			      "value, got %s", luaL_typename(L, 3));
	lua_rawgeti(L, 3, 1);
	int one = lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER;
	lua_pop(L, 1);
	if (!one) {
		lua_getfield(L, 3, "key");
		one = !lua_isnil(L, -1);
		lua_pop(L, 1);
	}
	if (one) {
		lua_createtable(L, 1, 0);
		lua_pushvalue(L, 3);
		lua_rawseti(L, -2, 1);
		lua_replace(L, 3);
	}
}

/** opts.track of an options table at idx: whether the rows written are tracked (false turns it off). */
static int
verb_track(lua_State *L, int idx, struct load_run *run)
{
	int track = run->track != NULL;
	if (lua_istable(L, idx)) {
		lua_getfield(L, idx, "track");
		if (lua_isboolean(L, -1) && !lua_toboolean(L, -1))
			track = 0;
		lua_pop(L, 1);
	}
	return track;
}

/**
 * A request of the append verb for n rows to shard, with room for their row metadata and, in the batch
 * format, the row count at the head of its body; *rc is 0, or not when that ran out of memory.
 */
static struct load_req *
verb_append_req(lua_State *L, struct load_run *run, uint32_t shard, size_t n, int expect, int track,
		int embedded, int *rc)
{
	struct load_req *r = verb_req(L, run, LOAD_VERB_APPEND);
	r->shard = shard;
	r->nrows = n;
	r->expect = expect;
	r->track = track;
	r->batch = run->batch_format && !embedded;
	*rc = buf_reserve(&r->rowmeta, n * sizeof(struct load_rowmeta));
	if (*rc == 0 && r->batch)
		*rc = buf_put_u32(&r->body, (uint32_t)n);
	return r;
}

/* ctx:append(shard, rows | row | key, value [, {expect=, track=}]) -> last_seq | nil, msg, kind */
static int
l_append(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "append");
	uint32_t shard = verb_shard(L, 2, "append");
	verb_rows_arg(L);
	int expect = verb_expect(L, 4, "append");
	int track = verb_track(L, 4, run);
	size_t n = lua_objlen(L, 3);
	if (n == 0)
		return luaL_error(L, "ctx:append: no rows (rows must be an array of {key, value})");
	if (n > LOAD_MAX_BATCH_ROWS)
		return luaL_error(L, "ctx:append: %zu rows, more than %u in one append", n, LOAD_MAX_BATCH_ROWS);
	int embedded = strcmp(run->target->kind, "embedded") == 0;
	int rc;
	struct load_req *r = verb_append_req(L, run, shard, n, expect, track, embedded, &rc);
	for (size_t i = 1; i <= n && rc == 0; i++) {
		lua_rawgeti(L, 3, (int)i);
		const char *k, *v;
		size_t kl, vl;
		if (verb_row(L, lua_gettop(L), &k, &kl, &v, &vl) != 0)
			return verb_abort(L, run, r, "ctx:append: row %zu must be {key, value} or {key=, value=} "
						     "with string key and value", i);
		if (kl > STRATA_MAX_KEY)
			return verb_abort(L, run, r, "ctx:append: row %zu: key of %zu bytes, over %u", i, kl,
					  STRATA_MAX_KEY);
		if (vl > UINT32_MAX)
			return verb_abort(L, run, r, "ctx:append: row %zu: value of %zu bytes is too big", i, vl);
		struct load_rowmeta m = { .koff = r->keys.len, .klen = (uint32_t)kl, .vlen = (uint32_t)vl };
		if (track)
			m.vhash = load_track_hash(v, vl);
		rc = buf_append(&r->keys, k, kl);
		if (rc == 0 && embedded) {
			rc = buf_append(&r->body, k, kl);
			m.voff = r->body.len;
			if (rc == 0)
				rc = buf_append(&r->body, v, vl);
		} else if (rc == 0 && r->batch) {
			rc = buf_put_u32(&r->body, (uint32_t)kl);
			if (rc == 0)
				rc = buf_put_u32(&r->body, (uint32_t)vl);
			if (rc == 0)
				rc = buf_append(&r->body, k, kl);
			if (rc == 0)
				rc = buf_append(&r->body, v, vl);
		} else if (rc == 0) {
			rc = load_ndjson_row(&r->body, (const uint8_t *)k, kl, (const uint8_t *)v, vl);
		}
		if (rc == 0)
			rc = buf_append(&r->rowmeta, &m, sizeof(m));
		lua_pop(L, 3);
		if (r->body.len > LOAD_MAX_BODY_BYTES)
			return verb_abort(L, run, r, "ctx:append: batch over %llu bytes",
					  (unsigned long long)LOAD_MAX_BODY_BYTES);
	}
	if (rc != 0)
		return verb_abort(L, run, r, "ctx:append: out of memory building %zu rows", n);
	if (embedded) {
		r->rows = env.malloc(n * sizeof(*r->rows));
		if (r->rows == NULL)
			return verb_abort(L, run, r, "ctx:append: out of memory building %zu rows", n);
		const struct load_rowmeta *m = (const struct load_rowmeta *)r->rowmeta.data;
		for (size_t i = 0; i < n; i++) {
			r->rows[i].key = r->body.data + m[i].voff - m[i].klen;
			r->rows[i].key_len = m[i].klen;
			r->rows[i].value = r->body.data + m[i].voff;
			r->rows[i].value_len = m[i].vlen;
			r->rows[i].kind = STRATA_ROW_PUT;
		}
	}
	return verb_go(L, it, r);
}

/** Append a delete row for key k to r's body in the target's format. */
static int
verb_delete_row(struct load_req *r, int embedded, const char *k, size_t kl)
{
	if (embedded)
		return buf_append(&r->body, k, kl);
	if (r->batch) {
		int rc = buf_put_u32(&r->body, (uint32_t)kl);
		if (rc == 0)
			rc = buf_put_u32(&r->body, UINT32_MAX); /* API_BATCH_DELETE */
		return rc == 0 ? buf_append(&r->body, k, kl) : rc;
	}
	int kt = load_utf8_ok((const uint8_t *)k, kl);
	int rc = buf_append(&r->body, kt ? "{\"key\":" : "{\"key_b64\":\"", kt ? 7 : 12);
	if (rc == 0)
		rc = kt ? load_json_str(&r->body, (const uint8_t *)k, kl) : b64_encode(&r->body, (const uint8_t *)k, kl);
	if (rc == 0 && !kt)
		rc = buf_append(&r->body, "\"", 1);
	return rc == 0 ? buf_append(&r->body, ",\"delete\":true}\n", 16) : rc;
}

/* ctx:delete(shard, key | keys [, {expect=, track=}]) -> last_seq | nil, msg, kind
 * One append of delete rows (all or nothing); reported under the append verb. */
static int
l_delete(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "delete");
	uint32_t shard = verb_shard(L, 2, "delete");
	int one = lua_type(L, 3) == LUA_TSTRING;
	if (!one)
		luaL_checktype(L, 3, LUA_TTABLE);
	int expect = verb_expect(L, 4, "delete");
	int track = verb_track(L, 4, run);
	size_t n = one ? 1 : lua_objlen(L, 3);
	if (n == 0)
		return luaL_error(L, "ctx:delete: no keys (give a key or an array of keys)");
	if (n > LOAD_MAX_BATCH_ROWS)
		return luaL_error(L, "ctx:delete: %zu keys, more than %u in one delete", n, LOAD_MAX_BATCH_ROWS);
	int embedded = strcmp(run->target->kind, "embedded") == 0;
	int rc;
	struct load_req *r = verb_append_req(L, run, shard, n, expect, track, embedded, &rc);
	for (size_t i = 1; i <= n && rc == 0; i++) {
		if (!one)
			lua_rawgeti(L, 3, (int)i);
		else
			lua_pushvalue(L, 3);
		if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
			return verb_abort(L, run, r, "ctx:delete: key %zu must be a string", i);
		size_t kl;
		const char *k = lua_tolstring(L, -1, &kl);
		if (kl > STRATA_MAX_KEY)
			return verb_abort(L, run, r, "ctx:delete: key %zu: %zu bytes, over %u", i, kl,
					  STRATA_MAX_KEY);
		struct load_rowmeta m = {.koff = r->keys.len, .klen = (uint32_t)kl, .vlen = LOAD_TRACK_DELETED};
		rc = buf_append(&r->keys, k, kl);
		if (rc == 0)
			rc = verb_delete_row(r, embedded, k, kl);
		m.voff = r->body.len;
		if (rc == 0)
			rc = buf_append(&r->rowmeta, &m, sizeof(m));
		lua_pop(L, 1);
		if (r->body.len > LOAD_MAX_BODY_BYTES)
			return verb_abort(L, run, r, "ctx:delete: batch over %llu bytes",
					  (unsigned long long)LOAD_MAX_BODY_BYTES);
	}
	if (rc != 0)
		return verb_abort(L, run, r, "ctx:delete: out of memory building %zu rows", n);
	if (embedded) {
		r->rows = env.calloc(n, sizeof(*r->rows));
		if (r->rows == NULL)
			return verb_abort(L, run, r, "ctx:delete: out of memory building %zu rows", n);
		const struct load_rowmeta *m = (const struct load_rowmeta *)r->rowmeta.data;
		for (size_t i = 0; i < n; i++)
			r->rows[i] = (strata_row){.key = r->body.data + m[i].voff - m[i].klen,
						  .key_len = m[i].klen, .kind = STRATA_ROW_DELETE};
	}
	return verb_go(L, it, r);
}

/* ctx:get(shard, key [, opts]) -> value | nil | nil, msg, kind */
static int
l_get(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "get");
	uint32_t shard = verb_shard(L, 2, "get");
	size_t kl;
	const char *k = luaL_checklstring(L, 3, &kl);
	int expect = verb_expect(L, 4, "get");
	if (kl > STRATA_MAX_KEY)
		return luaL_error(L, "ctx:get: key of %zu bytes, over %u", kl, STRATA_MAX_KEY);
	struct load_req *r = verb_req(L, run, LOAD_VERB_GET);
	r->shard = shard;
	r->expect = expect;
	if (buf_append(&r->key, k, kl) != 0)
		return verb_abort(L, run, r, "ctx:get: out of memory");
	return verb_go(L, it, r);
}

static int
scan_bound(lua_State *L, int idx, const char *name, struct buf *b, unsigned bit, unsigned *bounds)
{
	lua_getfield(L, idx, name);
	int rc = 0;
	if (!lua_isnil(L, -1)) {
		size_t n;
		const char *s = lua_tolstring(L, -1, &n);
		if (s == NULL || n > STRATA_MAX_KEY)
			rc = -1;
		else if (buf_append(b, s, n) != 0)
			rc = -2;
		else
			*bounds |= bit;
	}
	lua_pop(L, 1);
	return rc;
}

/** Raise for a key of the options table at idx that is not one of known (NULL-terminated). */
static void
verb_check_opts(lua_State *L, int idx, const char *verb, const char *const *known)
{
	if (!lua_istable(L, idx))
		return;
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		lua_pop(L, 1);
		const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
		int ok = 0;
		for (const char *const *n = known; k != NULL && *n != NULL && !ok; n++)
			ok = strcmp(k, *n) == 0;
		if (!ok) {
			char names[256];
			size_t off = 0;
			names[0] = '\0';
			for (const char *const *n = known; *n != NULL; n++)
				off += (size_t)snprintf(names + off, off < sizeof(names) ? sizeof(names) - off : 0,
							"%s%s", n == known ? "" : ", ", *n);
			luaL_error(L, "ctx:%s: unknown option \"%s\" (known: %s)", verb,
				   k != NULL ? k : luaL_typename(L, -1), names);
		}
	}
}

/* ctx:scan(shard [, {prefix=, start=, stop=, limit=, expect=}]) -> iterator of key, value | nil, msg, kind
 * ctx:scan_rows(shard [, same]) -> array of {key=, value=} | nil, msg, kind */
static int
l_scan_kind(lua_State *L, int rows)
{
	static const char *const known[] = { "prefix", "start", "stop", "end", "limit", "expect", NULL };
	const char *verb = rows ? "scan_rows" : "scan";
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, verb);
	uint32_t shard = verb_shard(L, 2, verb);
	int expect = verb_expect(L, 3, verb);
	verb_check_opts(L, 3, verb, known);
	struct load_req *r = verb_req(L, run, LOAD_VERB_SCAN);
	r->shard = shard;
	r->expect = expect;
	r->scan_rows = rows;
	r->scan_limit = 1000;
	if (lua_istable(L, 3)) {
		lua_getfield(L, 3, "stop");
		lua_getfield(L, 3, "end");
		int has_stop = !lua_isnil(L, -2), has_end = !lua_isnil(L, -1);
		lua_pop(L, 2);
		if (has_stop && has_end)
			return verb_abort(L, run, r, "ctx:%s: give stop or its alias end, not both", verb);
		if (scan_bound(L, 3, "prefix", &r->scan_prefix, 1, &r->scan_bounds) != 0 ||
		    scan_bound(L, 3, "start", &r->scan_start, 2, &r->scan_bounds) != 0 ||
		    scan_bound(L, 3, has_stop ? "stop" : "end", &r->scan_end, 4, &r->scan_bounds) != 0)
			return verb_abort(L, run, r, "ctx:%s: prefix, start and stop must be strings of at most "
						     "%u bytes", verb, STRATA_MAX_KEY);
		lua_getfield(L, 3, "limit");
		if (!lua_isnil(L, -1)) {
			lua_Number lim = lua_tonumber(L, -1);
			if (!lua_isnumber(L, -1) || lim < 1 || lim != floor(lim))
				return verb_abort(L, run, r, "ctx:%s: limit must be a positive integer", verb);
			r->scan_limit = lim > LOAD_MAX_SCAN_ROWS ? LOAD_MAX_SCAN_ROWS : (uint32_t)lim;
		}
		lua_pop(L, 1);
	}
	return verb_go(L, it, r);
}

static int
l_scan(lua_State *L)
{
	return l_scan_kind(L, 0);
}

static int
l_scan_rows(lua_State *L)
{
	return l_scan_kind(L, 1);
}

static int
l_shard_verb(lua_State *L, int verb)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, load_verb_name(verb));
	uint32_t shard = verb_shard(L, 2, load_verb_name(verb));
	int expect = verb_expect(L, 3, load_verb_name(verb));
	struct load_req *r = verb_req(L, run, verb);
	r->shard = shard;
	r->expect = expect;
	return verb_go(L, it, r);
}

/* ctx:seal(shard [, opts]) -> true | nil, msg, kind */
static int
l_seal(lua_State *L)
{
	return l_shard_verb(L, LOAD_VERB_SEAL);
}

/* ctx:merge_wal(shard [, opts]) -> reclaimed, pending | nil, msg, kind */
static int
l_merge(lua_State *L)
{
	return l_shard_verb(L, LOAD_VERB_MERGE);
}

/* ctx:put_policy(source [, {expect=400}]) -> true | true, message (expected) | nil, msg, kind */
static int
l_policy(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "put_policy");
	size_t n;
	const char *src = luaL_checklstring(L, 2, &n);
	int expect = verb_expect(L, 3, "put_policy");
	struct load_req *r = verb_req(L, run, LOAD_VERB_POLICY);
	r->expect = expect;
	if (buf_append(&r->body, src, n) != 0)
		return verb_abort(L, run, r, "ctx:put_policy: out of memory");
	return verb_go(L, it, r);
}

static int
l_node_verb(lua_State *L, int verb)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, load_verb_name(verb));
	int expect = verb_expect(L, 2, load_verb_name(verb));
	struct load_req *r = verb_req(L, run, verb);
	r->expect = expect;
	return verb_go(L, it, r);
}

/* ctx:stats(shard [, opts]) -> the shard's counters, as db:stats(shard) | nil, msg, kind
 * ctx:stats([opts]) -> the node's (GET /v1/stats) | nil, msg, kind */
static int
l_stats(lua_State *L)
{
	if (lua_type(L, 2) != LUA_TNUMBER)
		return l_node_verb(L, LOAD_VERB_STATS);
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "stats");
	uint32_t shard = verb_shard(L, 2, "stats");
	int expect = verb_expect(L, 3, "stats");
	struct load_req *r = verb_req(L, run, LOAD_VERB_STATS);
	r->shard = shard;
	r->stats_shard = 1;
	r->expect = expect;
	return verb_go(L, it, r);
}

/* ctx:get_policy([opts]) -> table with name, version, source, settings | nil, msg, kind */
static int
l_get_policy(lua_State *L)
{
	return l_node_verb(L, LOAD_VERB_GET_POLICY);
}

static int
verb_add_header(struct load_req *r, const char *name, size_t nl, const char *value, size_t vl)
{
	if (memchr(name, '\r', nl) || memchr(name, '\n', nl) || memchr(value, '\r', vl) ||
	    memchr(value, '\n', vl) || memchr(name, '\0', nl) || memchr(value, '\0', vl))
		return -1;
	if (buf_append(&r->headers, name, nl) != 0 || buf_append(&r->headers, ": ", 2) != 0 ||
	    buf_append(&r->headers, value, vl) != 0 || buf_append(&r->headers, "", 1) != 0)
		return -2;
	r->nheaders++;
	return 0;
}

static int
verb_check_http_target(lua_State *L, struct load_run *run, const char *verb)
{
	if (strcmp(run->target->kind, "http") != 0)
		return luaL_error(L, "ctx:%s: raw HTTP needs an HTTP target (--target URL)", verb);
	return 0;
}

/* ctx:http(method, path [, body [, headers]]) -> status, body, headers | nil, msg, kind */
static int
l_http(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "http");
	verb_check_http_target(L, run, "http");
	size_t ml, pl, bl = 0;
	const char *m = luaL_checklstring(L, 2, &ml);
	const char *p = luaL_checklstring(L, 3, &pl);
	const char *b = luaL_optlstring(L, 4, NULL, &bl);
	if (ml == 0 || ml >= sizeof(((struct load_req *)0)->method))
		return luaL_error(L, "ctx:http: bad method \"%s\"", m);
	if (pl == 0 || p[0] != '/' || memchr(p, ' ', pl) || memchr(p, '\r', pl) || memchr(p, '\n', pl))
		return luaL_error(L, "ctx:http: path must start with / and hold no spaces or line breaks");
	struct load_req *r = verb_req(L, run, LOAD_VERB_HTTP);
	memcpy(r->method, m, ml);
	r->want_headers = 1;
	if (buf_append(&r->path, p, pl) != 0 || buf_append(&r->path, "", 1) != 0 ||
	    (b != NULL && buf_append(&r->body, b, bl) != 0))
		return verb_abort(L, run, r, "ctx:http: out of memory");
	r->path.len--;
	if (lua_istable(L, 5)) {
		lua_pushnil(L);
		while (lua_next(L, 5) != 0) {
			size_t nl, vl;
			const char *hn = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &nl) : NULL;
			const char *hv = lua_tolstring(L, -1, &vl);
			if (hn == NULL || hv == NULL || verb_add_header(r, hn, nl, hv, vl) != 0)
				return verb_abort(L, run, r, "ctx:http: headers must map names to values without "
							     "line breaks");
			lua_pop(L, 1);
		}
	}
	return verb_go(L, it, r);
}

/* ctx:http_raw(request) — a raw HTTP/1.1 request text (wrk.format) -> status, body, headers */
static int
l_http_raw(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "http_raw");
	verb_check_http_target(L, run, "http_raw");
	size_t n;
	const char *s = luaL_checklstring(L, 2, &n);
	const char *end = s + n;
	const char *eol = memchr(s, '\n', n);
	if (eol == NULL)
		return luaL_error(L, "ctx:http_raw: no request line");
	const char *le = eol > s && eol[-1] == '\r' ? eol - 1 : eol;
	const char *sp1 = memchr(s, ' ', (size_t)(le - s));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
	if (sp1 == NULL || sp2 == NULL || (size_t)(sp1 - s) >= sizeof(((struct load_req *)0)->method) ||
	    sp1 == s)
		return luaL_error(L, "ctx:http_raw: bad request line \"%.*s\"", (int)(le - s), s);
	const char *tgt = sp1 + 1;
	size_t tl = (size_t)(sp2 - tgt);
	if (tl > 7 && (strncmp(tgt, "http://", 7) == 0 || (tl > 8 && strncmp(tgt, "https://", 8) == 0))) {
		const char *slash = memchr(tgt + 8, '/', tl - 8);
		if (slash == NULL) {
			tgt = "/";
			tl = 1;
		} else {
			tl -= (size_t)(slash - tgt);
			tgt = slash;
		}
	}
	if (tl == 0 || tgt[0] != '/')
		return luaL_error(L, "ctx:http_raw: request target must start with /");
	struct load_req *r = verb_req(L, run, LOAD_VERB_HTTP);
	memcpy(r->method, s, (size_t)(sp1 - s));
	r->want_headers = 1;
	if (buf_append(&r->path, tgt, tl) != 0 || buf_append(&r->path, "", 1) != 0)
		return verb_abort(L, run, r, "ctx:http_raw: out of memory");
	r->path.len--;
	const char *p = eol + 1;
	long clen = -1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		const char *ee = e > p && e[-1] == '\r' ? e - 1 : e;
		const char *ls = p;
		p = nl ? nl + 1 : end;
		if (ee == ls)
			break;
		const char *colon = memchr(ls, ':', (size_t)(ee - ls));
		if (colon == NULL || colon == ls)
			return verb_abort(L, run, r, "ctx:http_raw: bad header line \"%.*s\"", (int)(ee - ls), ls);
		const char *v = colon + 1;
		while (v < ee && (*v == ' ' || *v == '\t'))
			v++;
		size_t hn = (size_t)(colon - ls);
		if (hn == 14 && strncasecmp(ls, "Content-Length", 14) == 0) {
			clen = strtol(v, NULL, 10);
			continue;
		}
		if (hn == 17 && strncasecmp(ls, "Transfer-Encoding", 17) == 0)
			continue;
		if (verb_add_header(r, ls, hn, v, (size_t)(ee - v)) != 0)
			return verb_abort(L, run, r, "ctx:http_raw: bad header line");
	}
	size_t bl = (size_t)(end - p);
	if (clen >= 0 && (size_t)clen < bl)
		bl = (size_t)clen;
	if (bl > 0 && buf_append(&r->body, p, bl) != 0)
		return verb_abort(L, run, r, "ctx:http_raw: out of memory");
	return verb_go(L, it, r);
}

/* ctx:sleep(seconds) */
static int
l_sleep(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = verb_iter(L, run, "sleep");
	lua_Number s = luaL_checknumber(L, 2);
	if (!(s >= 0 && s <= 86400))
		return luaL_error(L, "ctx:sleep: seconds must be 0..86400");
	ev_timer_set(&it->sleep, s, 0.);
	ev_timer_start(run->loop, &it->sleep);
	it->sleeping = 1;
	return lua_yield(L, 0);
}

/* ctx:now() -> seconds since the scenarios started (since the runner started, before) */
static int
l_now(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	uint64_t base = run->t0 ? run->t0 : run->t_init;
	lua_pushnumber(L, (lua_Number)((int64_t)(load_now_ns() - base)) / 1e9);
	return 1;
}

static const char *
metric_name(lua_State *L, int idx, const char *verb)
{
	size_t n;
	const char *name = luaL_checklstring(L, idx, &n);
	if (n == 0 || n >= LOAD_NAME_MAX)
		luaL_error(L, "ctx:%s: metric name must be 1..%d bytes", verb, LOAD_NAME_MAX - 1);
	return name;
}

/* ctx:metric(name, value): set a custom metric (reported, usable in thresholds) */
static int
l_metric(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	const char *name = metric_name(L, 2, "metric");
	lua_Number v = luaL_checknumber(L, 3);
	if (run->custom.n >= LOAD_MAX_CUSTOM && !load_metrics_get(&run->custom, name, &(double){ 0 }))
		return luaL_error(L, "ctx:metric: more than %d custom metrics", LOAD_MAX_CUSTOM);
	if (load_metrics_set(&run->custom, name, v) != 0)
		return luaL_error(L, "ctx:metric: out of memory");
	return 0;
}

/* ctx:add(name [, delta]): add to a custom counter */
static int
l_add(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	const char *name = metric_name(L, 2, "add");
	lua_Number d = luaL_optnumber(L, 3, 1);
	double cur = 0;
	int have = load_metrics_get(&run->custom, name, &cur);
	if (!have && run->custom.n >= LOAD_MAX_CUSTOM)
		return luaL_error(L, "ctx:add: more than %d custom metrics", LOAD_MAX_CUSTOM);
	if (load_metrics_set(&run->custom, name, cur + d) != 0)
		return luaL_error(L, "ctx:add: out of memory");
	return 0;
}

/* ctx:get_metric(name) -> value | nil */
static int
l_get_metric(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	const char *name = metric_name(L, 2, "get_metric");
	double v;
	if (load_metrics_get(&run->custom, name, &v) || load_metrics_get(&run->metrics, name, &v))
		lua_pushnumber(L, v);
	else
		lua_pushnil(L);
	return 1;
}

/* ctx:log(...) */
static int
l_log(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	int n = lua_gettop(L);
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	for (int i = 2; i <= n; i++) {
		lua_getglobal(L, "tostring");
		lua_pushvalue(L, i);
		lua_call(L, 1, 1);
		if (i > 2)
			luaL_addchar(&b, ' ');
		luaL_addvalue(&b);
	}
	luaL_pushresult(&b);
	load_run_log(run, "%s", lua_tostring(L, -1));
	return 0;
}

/* ctx:stop() — end the scenarios now (teardown, verification and reports still run) */
static int
l_stop(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	run->stop(run, "ctx:stop()");
	return 0;
}

/* ctx:scenario() -> name, vu (or nil), iteration — of the calling coroutine */
static int
l_scenario(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	struct load_iter *it = run->cur;
	if (it == NULL || it->co != L || it->kind != LOAD_ITER_SCENARIO) {
		lua_pushstring(L, it == NULL ? "" : it->kind == LOAD_ITER_SETUP ? "setup" : "teardown");
		return 1;
	}
	lua_pushstring(L, it->scn->name);
	if (it->vu != NULL)
		lua_pushinteger(L, it->vu->id + 1);
	else
		lua_pushnil(L);
	lua_pushnumber(L, (lua_Number)it->n);
	return 3;
}

/* ------------------------------------------------------------------------ */
/* ctx:hist                                                                  */
/* ------------------------------------------------------------------------ */

/** The statistics called name: a scenario, a verb, "scenario.verb", "scenario/stage" or "verify". */
static struct load_stat *
lr_find_stat(struct load_run *run, const char *name)
{
	for (int v = 0; v < LOAD_VERB_COUNT; v++)
		if (run->verb[v] != NULL && strcmp(run->verb[v]->name, name) == 0)
			return run->verb[v];
	if (run->verify_stat != NULL && strcmp(name, "verify") == 0)
		return run->verify_stat;
	for (unsigned i = 0; i < run->nscn; i++) {
		struct load_scn *s = run->scn[i];
		if (strcmp(s->name, name) == 0)
			return s->stat;
		for (int v = 0; v < LOAD_VERB_COUNT; v++)
			if (s->verb[v] != NULL && strcmp(s->verb[v]->name, name) == 0)
				return s->verb[v];
		for (unsigned j = 0; j < s->nstages; j++)
			if (s->stages[j].stat != NULL && strcmp(s->stages[j].stat->name, name) == 0)
				return s->stages[j].stat;
	}
	return NULL;
}

/* ctx:hist(name [, "uncorrected"]) -> histogram in ms | nil (nothing recorded under name) */
static int
l_ctx_hist(lua_State *L)
{
	struct load_run *run = ctx_run(L);
	const char *name = luaL_checkstring(L, 2);
	const char *which = luaL_optstring(L, 3, "corrected");
	if (strcmp(which, "corrected") != 0 && strcmp(which, "uncorrected") != 0)
		return luaL_error(L, "ctx:hist: second argument must be \"corrected\" or \"uncorrected\"");
	struct load_stat *s = lr_find_stat(run, name);
	if (s == NULL) {
		lua_pushnil(L);
		return 1;
	}
	load_hist_push(L, which[0] == 'u' ? s->raw : s->lat, 1e6);
	return 1;
}

void
load_ctx_create(struct load_run *run)
{
	lua_State *L = run->L;
	load_hist_register(L);
	static const luaL_Reg fns[] = {
		{ "append", l_append },	 { "delete", l_delete },
		{ "get", l_get },
		{ "scan", l_scan },	 { "scan_rows", l_scan_rows },
		{ "seal", l_seal },
		{ "merge_wal", l_merge },   { "put_policy", l_policy },
		{ "get_policy", l_get_policy },
		{ "stats", l_stats },	 { "http", l_http },
		{ "http_raw", l_http_raw }, { "sleep", l_sleep },
		{ "now", l_now },		 { "metric", l_metric },
		{ "add", l_add },		 { "get_metric", l_get_metric },
		{ "log", l_log },		 { "stop", l_stop },
		{ "scenario", l_scenario }, { "hist", l_ctx_hist },
		{ NULL, NULL },
	};
	lua_newtable(L);
	for (const luaL_Reg *f = fns; f->name != NULL; f++) {
		lua_pushlightuserdata(L, run);
		lua_pushcclosure(L, f->func, 1);
		lua_setfield(L, -2, f->name);
	}
	lua_newtable(L);
	for (int i = 0; i < run->o->nargs; i++) {
		lua_pushstring(L, run->o->args[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "args");
	lua_pushnumber(L, (lua_Number)run->o->seed);
	lua_setfield(L, -2, "seed");
	lua_pushstring(L, run->target->kind);
	lua_setfield(L, -2, "target");
	lua_pushstring(L, run->target->desc);
	lua_setfield(L, -2, "target_desc");
	lua_pushvalue(L, -1);
	lua_setfield(L, LUA_REGISTRYINDEX, "strata.load.ctx");
	run->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

