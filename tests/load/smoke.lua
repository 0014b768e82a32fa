-- smoke.lua — five seconds of every verb against a node, asserting correctness
-- only (run by `make test` through tests/load/load.mk): every acknowledged row
-- reads back (lost_rows == 0) and no request fails (errors == 0). A shard the node
-- answers busy (its policy is merging it already) is counted apart (busy) and is
-- not a failure. No speed thresholds: those belong to the benchmarks.
--
--   strata load tests/load/smoke.lua --target http://127.0.0.1:7070
--   strata load tests/load/smoke.lua --embedded /tmp/smoke
--   strata load tests/load/smoke.lua -- rate=100 batch=5     (script options)

local load = require "strata.load"

local opt = load.options({ ... }, { rate = 100, batch = 10, value_min = 16, value_max = 2048, seed = load.seed })

local keys = load.keys.sequential{ prefix = "smoke:", width = 10 }
local values = load.values{ size = { min = opt.value_min, max = opt.value_max }, seed = opt.seed }
-- The newest key appended to each shard, for the readers.
local last = {}

return {
	duration = "5s",
	verify = true,
	scenarios = {
		-- Batches spread over the shards at a constant rate.
		appenders = {
			rate = opt.rate,
			exec = function(ctx, n)
				local shard = n % ctx.shards
				local rows = load.batch(keys, values, opt.batch)
				assert(ctx:append(shard, rows))
				last[shard] = rows[#rows][1]
			end,
		},
		-- Point reads of rows just written: each must be found.
		readers = {
			vus = 2,
			pause = "10ms",
			exec = function(ctx, n)
				local shard = n % ctx.shards
				local key = last[shard]
				if key == nil then
					return
				end
				local v, err = ctx:get(shard, key)
				if v == nil and err == nil then
					error("acknowledged key " .. key .. " of shard " .. shard .. " is missing")
				end
			end,
		},
		-- Ordered scans of a prefix.
		scanners = {
			every = "500ms",
			exec = function(ctx, n)
				local prev
				for key in assert(ctx:scan(n % ctx.shards, { prefix = "smoke:", limit = 200 })) do
					assert(prev == nil or prev < key, "scan out of order")
					prev = key
				end
			end,
		},
		-- Generations keep coming...
		sealer = {
			every = "1s",
			exec = function(ctx)
				for shard = 0, ctx.shards - 1 do
					local ok, err, kind = ctx:seal(shard)
					assert(ok or kind == "busy", err)
				end
			end,
		},
		-- ...and merges fold them while appends go on.
		merger = {
			every = "1500ms",
			start = "20%",
			exec = function(ctx)
				for shard = 0, ctx.shards - 1 do
					local merged, err, kind = ctx:merge_wal(shard)
					if kind == "busy" then
						ctx:add("merges_busy", 1) -- the policy is merging it: fine, it is not a failure
					else
						ctx:add("generations_merged", assert(merged, err))
					end
				end
			end,
		},
	},
	thresholds = {
		lost_rows = "== 0",
		errors = "== 0",
		["appenders.iterations"] = "> 0",
		verified_rows = "> 0",
	},
}
