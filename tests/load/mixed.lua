-- mixed.lua — appends, point reads and scans over a zipfian key set.
--
-- Setup loads `keys` rows (spread over the shards by key index); then, at
-- constant arrival rates, appenders overwrite keys drawn from a zipfian
-- distribution (hot keys are rewritten often, so reads must return the newest
-- value), readers get zipfian keys, and scanners read short ordered ranges
-- starting at zipfian keys. A sealer keeps generations coming; the node's policy
-- merges them. Every acknowledged row is read back at the end.
--
--   strata load tests/load/mixed.lua --target http://127.0.0.1:7070 --duration 30s
--   strata load tests/load/mixed.lua --embedded /tmp/mixed -- keys=20000 read_rate=2000

local load = require "strata.load"

local opt = load.options({ ... }, {
	keys = 100000, -- key space
	theta = 0.99, -- zipfian skew
	value_bytes = 200, -- mean value size (sizes are normal, stddev a quarter of it)
	append_rate = 500, -- append batches per second
	batch = 10, -- rows per append
	read_rate = 2000, -- point reads per second
	scan_rate = 50, -- scans per second
	scan_rows = 50, -- rows per scan
	seed = load.seed,
})

local writes = load.keys.zipfian{ n = opt.keys, theta = opt.theta, seed = opt.seed, prefix = "mixed:", width = 9 }
local reads = load.keys.zipfian{ n = opt.keys, theta = opt.theta, seed = opt.seed + 1, prefix = "mixed:", width = 9 }
local scans = load.keys.zipfian{ n = opt.keys, theta = opt.theta, seed = opt.seed + 2, prefix = "mixed:", width = 9 }
local values = load.values{
	size = { mean = opt.value_bytes, stddev = opt.value_bytes / 4, min = 1, max = opt.value_bytes * 4 },
	seed = opt.seed,
}

return {
	duration = "30s",
	verify = true,
	setup = function(ctx)
		-- Preload every key once, in batches per shard.
		local per = 1000
		local pending = {}
		for shard = 0, ctx.shards - 1 do
			pending[shard] = {}
		end
		for i = 0, opt.keys - 1 do
			local shard = i % ctx.shards
			local b = pending[shard]
			b[#b + 1] = { writes:key(i), values:next() }
			if #b == per then
				assert(ctx:append(shard, b))
				pending[shard] = {}
			end
		end
		for shard = 0, ctx.shards - 1 do
			if #pending[shard] > 0 then
				assert(ctx:append(shard, pending[shard]))
			end
			assert(ctx:seal(shard))
		end
		ctx:log(string.format("preloaded %d keys over %d shards", opt.keys, ctx.shards))
	end,
	scenarios = {
		appenders = {
			rate = opt.append_rate,
			exec = function(ctx, n)
				-- One batch goes to one shard: draw keys until the batch is full of that shard's keys.
				local shard = n % ctx.shards
				local rows = {}
				while #rows < opt.batch do
					local i = writes:next_index()
					if i % ctx.shards == shard then
						rows[#rows + 1] = { writes:key(i), values:next() }
					end
				end
				assert(ctx:append(shard, rows))
			end,
		},
		readers = {
			rate = opt.read_rate,
			exec = function(ctx)
				local i = reads:next_index()
				local key = reads:key(i)
				local v, err = ctx:get(i % ctx.shards, key)
				if v == nil and err == nil then
					error("preloaded key " .. key .. " is missing")
				end
			end,
		},
		scanners = {
			rate = opt.scan_rate,
			exec = function(ctx)
				local i = scans:next_index()
				local key = scans:key(i)
				local n = 0
				for _ in assert(ctx:scan(i % ctx.shards, { start = key, limit = opt.scan_rows })) do
					n = n + 1
				end
				if n == 0 then
					error("scan from preloaded key " .. key .. " returned nothing")
				end
				ctx:add("scanned_rows", n)
			end,
		},
		sealer = {
			every = "2s",
			exec = function(ctx)
				for shard = 0, ctx.shards - 1 do
					assert(ctx:seal(shard))
				end
			end,
		},
	},
	done = function(_, m)
		print(string.format("mixed: %.0f appended rows/s, %.0f reads/s, %.0f scans/s; get p99 %.3f ms, " ..
			"append p99 %.3f ms, scan p99 %.3f ms",
			m["appenders.rows_per_s"] or 0, m["readers.iterations_per_s"] or 0,
			m["scanners.iterations_per_s"] or 0, m["get.p99_ms"] or 0, m["append.p99_ms"] or 0,
			m["scan.p99_ms"] or 0))
	end,
	thresholds = {
		lost_rows = "== 0",
		errors = "== 0",
	},
}
