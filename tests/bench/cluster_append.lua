-- cluster_append.lua — closed-loop appends over every shard, for tests/bench/bench_cluster.sh:
-- VUS virtual users, each appending BATCH rows of VALUE bytes to shard n % shards in turn,
-- as fast as the target acknowledges. No correctness checks beyond errors == 0: the
-- cluster suite (tests/cluster/cluster.sh) checks the rows.
--
--   strata load tests/bench/cluster_append.lua --target http://127.0.0.1:7071 -d 10s -- vus=16
local load = require "strata.load"

local opt = load.options({ ... }, { vus = 16, batch = 10, value = 100, seed = load.seed })

local keys = load.keys.sequential{ prefix = "bench:", width = 12 }
local values = load.values{ size = { min = opt.value, max = opt.value }, seed = opt.seed }

return {
	duration = "10s",
	scenarios = {
		appenders = {
			vus = opt.vus,
			exec = function(ctx, n)
				assert(ctx:append(n % ctx.shards, load.batch(keys, values, opt.batch)))
			end,
		},
	},
	thresholds = { errors = "== 0" },
}
