/*
 * policy_lua.h — the Lua compiled into the library. The build generates
 * $(BUILD)/gen/policy_lua.c from the .lua files with node/policy/gen_lua_c.sh; each
 * array holds the file's bytes, NUL-terminated, and NAME_len its byte count (without
 * the NUL). Edit the .lua files, never the generated C.
 */
#ifndef STRATA_POLICY_LUA_H
#define STRATA_POLICY_LUA_H

#include <stddef.h>

/** policies/default.lua: the built-in default policy (also declared in policy.h). */
extern const char policy_builtin_source[];
extern const size_t policy_builtin_source_len;
/** node/policy/prelude.lua: builds the sandbox environment (chunk "=strata.prelude"). */
extern const char policy_prelude_lua[];
extern const size_t policy_prelude_lua_len;
/** node/policy/defaults.lua: the built-in hooks, strata.default.* (chunk "=strata.default"). */
extern const char policy_defaults_lua[];
extern const size_t policy_defaults_lua_len;

#endif
