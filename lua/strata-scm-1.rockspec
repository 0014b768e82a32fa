-- LuaRocks build of the `strata` module for LuaJIT: the engine and its Lua binding
-- compiled into strata/core.so, and the pure-Lua half.
--   luarocks make lua/strata-scm-1.rockspec LUA_INCDIR=/usr/include/luajit-2.1 --local
-- Needs the Debian packages libzstd-dev libisal-dev libxxhash-dev libev-dev
-- (and luajit2 / libluajit2-5.1-dev). The lists below must name every Lua module of
-- lua/ and every C file of the engine library (node/strata.c node/lib node/objstore
-- node/core node/policy); tests/spec/module_spec.lua checks that they do.
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
	type = "builtin",
	modules = {
		strata = "lua/strata.lua",
		["strata.format"] = "lua/strata/format.lua",
		["strata.rows"] = "lua/strata/rows.lua",
		["strata.load"] = "lua/strata/load.lua",
		["strata.core"] = {
			sources = {
				"node/strata.c",
				"node/lib/buf.c",
				"node/lib/crc.c",
				"node/lib/diag.c",
				"node/lib/env.c",
				"node/lib/hist.c",
				"node/lib/pool.c",
				"node/lib/text.c",
				"node/objstore/fs.c",
				"node/core/manifest.c",
				"node/core/mem.c",
				"node/core/run.c",
				"node/core/shard.c",
				"node/core/store.c",
				"node/core/wal.c",
				"node/policy/policy.c",
				"node/policy/runtime.c",
				"node/luamod/strata_lua.c",
			},
			defines = { "_GNU_SOURCE" },
			libraries = { "zstd", "isal", "xxhash", "ev", "pthread", "m" },
		},
	},
}
