-- appends.lua — tests/whatif/whatif.sh's workload: batches of 20 rows of 200..600-byte
-- values, spread over the shards at a constant rate, and gets of the keys written first
-- (the replay counts the tables each probes).
local load = require "strata.load"

local opt = load.options({ ... }, { rate = 200, batch = 20 })
local keys = load.keys.sequential{ prefix = "w:", width = 10 }
local values = load.values{ size = { min = 200, max = 600 }, seed = 7 }
local read_keys = load.keys.sequential{ prefix = "w:", width = 10 }

return {
	duration = "4s",
	scenarios = {
		appenders = {
			rate = opt.rate,
			exec = function(ctx, n)
				assert(ctx:append(n % ctx.shards, load.batch(keys, values, opt.batch)))
			end,
		},
		readers = {
			rate = 50,
			exec = function(ctx, n)
				ctx:get(n % ctx.shards, read_keys:next())
			end,
		},
	},
}
