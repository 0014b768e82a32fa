-- load_append.lua — the `strata load` half of bench_http.sh: closed-loop appends of
-- batches of rows to shard 0, as fast as each virtual user's acknowledgements come back.
-- The same script runs over HTTP (--target) and in-process (--embedded), so the two
-- figures differ only by the path between the script and the engine.
--
--   strata load tests/bench/load_append.lua --target http://127.0.0.1:7070 -c 4 -- batch=100 vus=4
--   strata load tests/bench/load_append.lua --embedded /tmp/d --shards 1 -c 4 -- batch=100 vus=4
--
-- Rows: a 16-byte key (sequential, so unique across the run) and a 200-byte value.
-- Options (after --): batch (rows per append, default 1), vus (virtual users, default 4).
-- No thresholds: the benchmark prints the figures and asserts nothing about speed.

local load = require "strata.load"

local opt = load.options({ ... }, { batch = 1, vus = 4 })
local keys = load.keys.sequential{ prefix = "b", width = 15 }
local values = load.values{ size = 200, seed = load.seed }

return {
	duration = "5s",
	scenarios = {
		appenders = {
			vus = opt.vus,
			exec = function(ctx)
				assert(ctx:append(0, load.batch(keys, values, opt.batch)))
			end,
		},
	},
}
