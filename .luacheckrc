-- luacheck configuration: `luacheck --std luajit lua/ tests/spec/ policies/`
-- (a --std on the command line replaces every `std` here, so the busted globals are
-- listed as read_globals, which it leaves alone)
std = "luajit"
max_line_length = 120
exclude_files = { "build/**", "build-*/**" }

local busted = {
	"describe", "context", "insulate", "expose", "it", "spec", "test", "pending",
	"before_each", "after_each", "setup", "teardown", "lazy_setup", "lazy_teardown",
	"strict_setup", "strict_teardown", "finally", "randomize", "spy", "stub", "mock", "async", "match",
	assert = { other_fields = true },
}

-- busted specs and their helpers
files["tests/spec"] = { read_globals = busted }
files["tests/integration"] = { read_globals = busted }

-- policy scripts run in the node's sandbox, which provides the `strata` helpers
files["policies"] = { read_globals = { "strata" } }

-- wrk scripts: wrk calls these globals and provides `wrk` (and `tid` set in setup)
files["tests/bench/wrk_append.lua"] = {
	globals = { "setup", "init", "request", "done", "tid" },
	read_globals = { "wrk" },
	unused_args = false,
}

-- the stall bench's Tarantool workload runs in `tarantool`, which provides `box`
files["tests/bench/stall_tarantool.lua"] = { read_globals = { "box", "_TARANTOOL" } }
