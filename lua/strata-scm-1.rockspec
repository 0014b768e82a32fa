-- LuaRocks build of the `strata` module for LuaJIT: the engine and its Lua binding
-- compiled into strata/core.so, and the pure-Lua half.
--   luarocks make lua/strata-scm-1.rockspec LUA_INCDIR=/usr/include/luajit-2.1 --local
-- Needs the Debian packages libzstd-dev libisal-dev libxxhash-dev libev-dev
-- (and luajit2 / libluajit2-5.1-dev). The install list below must name every Lua module
-- of lua/; tests/spec/module_spec.lua checks that it does, and that the C module is the
-- Makefile's build/strata.so.
rockspec_format = "3.0"
package = "strata"
version = "scm-1"
source = {
	url = "git+file:///work/main",
}
description = {
	summary = "strata: a log-structured storage engine with Lua merge policies, for LuaJIT",
	detailed = [[
		require "strata" opens a store of numbered shards (WAL, memtable, generations,
		base runs, manifest) and gives append/get/scan, seal, two-phase merges
		(prepare/commit) and per-shard statistics.
	]],
	license = "MIT",
}
dependencies = {
	"lua ~> 5.1",
}
build = {
	-- The Makefile is the one list of the engine's sources (and it generates the C of the
	-- built-in policy); luarocks runs it, then installs what it built.
	type = "command",
	build_command = "make BUILD=build build/strata.so",
	install = {
		lua = {
			strata = "lua/strata.lua",
			["strata.format"] = "lua/strata/format.lua",
			["strata.rows"] = "lua/strata/rows.lua",
			["strata.load"] = "lua/strata/load.lua",
		},
		lib = {
			["strata.core"] = "build/strata.so",
		},
	},
}
