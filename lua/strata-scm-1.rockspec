-- LuaRocks build of the `strata` module for LuaJIT: the engine and its Lua binding
-- compiled into strata/core.so, and the pure-Lua half.
--   luarocks make lua/strata-scm-1.rockspec            (as root: into /usr/local)
--   luarocks make lua/strata-scm-1.rockspec --local    (or --tree DIR)
-- Needs the Debian packages build-essential pkg-config libzstd-dev libisal-dev
-- libxxhash-dev libev-dev libluajit2-5.1-dev luajit2: the Makefile finds LuaJIT's headers
-- and the libraries with pkg-config (no LUA_INCDIR needed). The install list below must name
-- every Lua module of lua/; tests/spec/module_spec.lua checks that it does, and that the C
-- module is the Makefile's build/strata.so; tests/readme/run.sh installs it with --tree and
-- requires it.
rockspec_format = "3.0"
package = "strata"
version = "scm-1"
-- strata has no public repository yet. `luarocks make` (the way to install it, above) builds
-- the tree it is run in and never fetches this URL; `luarocks install strata` cannot work
-- until there is one. The address below is a reserved name that resolves nowhere, on purpose.
source = {
	url = "git+https://strata.invalid/strata.git",
}
description = {
	summary = "strata: a log-structured storage engine with Lua merge policies, for LuaJIT",
	detailed = [[
		require "strata" opens a store of numbered shards (WAL, memtable, generations,
		base runs, manifest) and gives append/get/scan, seal, two-phase merges
		(prepare/commit) and per-shard statistics.
	]],
	license = "MIT", -- the LICENSE file at the top of the repository
}
dependencies = {
	"lua ~> 5.1",
}
build = {
	-- The Makefile is the one list of the engine's sources (and it generates the C of the
	-- built-in policy); luarocks runs it, then installs what it built. luarocks keeps a C
	-- module's file name, so the library is copied to core.so to land as strata/core.so.
	type = "command",
	build_command = [[
pkg-config --print-errors --exists luajit libzstd libisal libxxhash || {
	echo "strata: pkg-config cannot find the packages above; on Debian: apt-get install pkg-config libluajit2-5.1-dev libzstd-dev libisal-dev libxxhash-dev libev-dev" >&2
	exit 1
}
make BUILD=build build/strata.so && mkdir -p build/rock && cp build/strata.so build/rock/core.so
]],
	install = {
		lua = {
			strata = "lua/strata.lua",
			["strata.format"] = "lua/strata/format.lua",
			["strata.rows"] = "lua/strata/rows.lua",
			["strata.load"] = "lua/strata/load.lua",
		},
		lib = {
			["strata.core"] = "build/rock/core.so",
		},
	},
}
