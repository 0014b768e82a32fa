-- append_during_merge.lua — the regression that started strata, as a load test:
-- a merge must never stall the write path.
--
--   1. Setup builds a backlog of generations with large values on one shard,
--      under a policy that never merges on its own (so the idle phase is idle).
--   2. A constant append rate runs throughout; in the first phase nothing merges
--      ("idle"), in the second merge-wal is called back to back ("merging").
--   3. The done hook reports append p99.9 and max while merging against idle, the
--      merge passes completed and the generations they folded; verification
--      reports lost_rows, which must be 0.
-- Speed is reported, not asserted (thresholds here are correctness only).
--
--   strata load tests/load/append_during_merge.lua --target http://127.0.0.1:7070 --duration 30s
--   strata load tests/load/append_during_merge.lua --embedded /tmp/adm -- gens=16 value_kib=4

local load = require "strata.load"

local opt = load.options({ ... }, {
	shard = 0, -- the shard under test
	gens = 32, -- generations in the backlog
	rows_per_gen = 128, -- rows per backlog generation
	value_kib = 8, -- backlog value size
	rate = 200, -- append batches per second, both phases
	batch = 10, -- rows per append
	value_bytes = 256, -- size of appended values
	merge_max = 4, -- generations per merge pass
	split = 40, -- percent of the run that is idle
})

local backlog_keys = load.keys.sequential{ prefix = "backlog:", width = 10 }
local backlog_values = load.values{ size = opt.value_kib * 1024, seed = 7 }
local keys = load.keys.sequential{ prefix = "live:", width = 10 }
local values = load.values{ size = opt.value_bytes, seed = 8 }

-- Merges only when asked (merge-wal); no timers, no count trigger, no sweeper.
local QUIET_POLICY = string.format([[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 1000000,
	merge_max_generations = %d,
	memtable_max_bytes = 1024 * 1024 * 1024,
	base_max_runs = 1000000,
}
]], opt.merge_max)

local split = opt.split .. "%"

local function append_batch(ctx)
	assert(ctx:append(opt.shard, load.batch(keys, values, opt.batch)))
end

return {
	duration = "30s",
	verify = true,
	setup = function(ctx)
		local before = assert(ctx:get_policy())
		assert(ctx:put_policy(QUIET_POLICY))
		local per_append = math.max(1, math.floor(4 * 1024 / opt.value_kib)) -- about 4 MiB per request
		for _ = 1, opt.gens do
			local left = opt.rows_per_gen
			while left > 0 do
				local n = math.min(left, per_append)
				assert(ctx:append(opt.shard, load.batch(backlog_keys, backlog_values, n)))
				left = left - n
			end
			assert(ctx:seal(opt.shard))
		end
		local sh = assert(ctx:stats(opt.shard))
		ctx:log(string.format("backlog: %d generations, %.1f MiB waiting on shard %d", sh.generations,
			sh.generation_bytes / 1048576, opt.shard))
		ctx:metric("backlog_generations", sh.generations)
		return { policy = before.source }
	end,
	scenarios = {
		idle = { rate = opt.rate, duration = split, exec = append_batch },
		merging = { rate = opt.rate, start = split, exec = append_batch },
		merger = {
			vus = 1,
			start = split,
			exec = function(ctx)
				local reclaimed, pending, kind, retry_after = ctx:merge_wal(opt.shard)
				if kind == "busy" then
					-- The node's own policy is merging the shard: ask again when it says.
					ctx:sleep(retry_after or 0.05)
					return
				end
				assert(reclaimed, pending)
				if reclaimed > 0 then
					ctx:add("merge_passes", 1)
					ctx:add("generations_merged", reclaimed)
				else
					ctx:sleep(0.05)
				end
				ctx:metric("generations_pending", pending)
			end,
		},
		-- Sealing goes on in both phases, so the phases differ only by the merges.
		sealer = {
			every = "1s",
			exec = function(ctx)
				assert(ctx:seal(opt.shard))
			end,
		},
	},
	teardown = function(ctx, data)
		if data and data.policy then
			assert(ctx:put_policy(data.policy))
		end
	end,
	done = function(ctx, m)
		local idle, busy = m["idle.append.p999_ms"], m["merging.append.p999_ms"]
		if idle and busy and idle > 0 then
			ctx:metric("p999_ratio", busy / idle)
		end
		print(string.format(
			"append_during_merge: append p99.9 idle %.3f ms, merging %.3f ms (ratio %.2f); max idle %.3f ms, " ..
			"merging %.3f ms; %d merge passes folded %d generations (the backlog held %d)",
			idle or 0, busy or 0, (idle and busy and idle > 0) and busy / idle or 0, m["idle.append.max_ms"] or 0,
			m["merging.append.max_ms"] or 0, m.merge_passes or 0, m.generations_merged or 0,
			m.backlog_generations or 0))
	end,
	thresholds = {
		lost_rows = "== 0",
		errors = "== 0",
		merge_passes = "> 0",
	},
}
