-- compact_live.lua — appends to one shard of a node while `strata compact` merges it from
-- another process (tests/objstore/compact_live.sh starts both): generations keep coming
-- (a seal every 150 ms) and the node merges too now and then, so the two race for the
-- same inputs. Correctness only: every acknowledged row reads back (lost_rows == 0), no
-- request fails, and a full scan at the end has strictly increasing keys, each with the
-- value appended (scan_disorder == 0, scan_bad_values == 0, scan_rows == tracked rows).
-- The append p99.9 is printed by the summary (a figure, not an assertion). shard=N picks
-- the shard (compact_live.sh runs it on shard 1 first, with no compactor: the baseline).
--
--   strata load tests/objstore/compact_live.lua --target http://127.0.0.1:7070 -- rate=200

local load = require "strata.load"

local opt = load.options({ ... }, { shard = 0, rate = 200, batch = 4, value_bytes = 64, merge_every_ms = 700 })

local keys = load.keys.sequential{ prefix = "live:", width = 10 }
-- Each value starts with its key, so the final scan can tell it belongs there.
local values = load.values{ size = opt.value_bytes, seed = 11 }

local function rows_of(n)
	local rows = {}
	for i = 1, n do
		local k = keys:next()
		rows[i] = { k, k .. "=" .. values:next() }
	end
	return rows
end

return {
	duration = "6s",
	verify = true,
	scenarios = {
		writers = {
			rate = opt.rate,
			exec = function(ctx)
				assert(ctx:append(opt.shard, rows_of(opt.batch)))
			end,
		},
		sealer = {
			every = "150ms",
			exec = function(ctx)
				local ok, err, kind = ctx:seal(opt.shard)
				assert(ok or kind == "busy", err)
			end,
		},
		-- The node's own merges, racing the compactor's.
		merger = {
			every = opt.merge_every_ms .. "ms",
			exec = function(ctx)
				local merged, err, kind = ctx:merge_wal(opt.shard)
				if kind == "busy" then
					ctx:add("merges_busy", 1)
				else
					ctx:add("node_generations_merged", assert(merged, err))
				end
			end,
		},
	},
	teardown = function(ctx)
		local n, disorder, bad, prev = 0, 0, 0, nil
		local start
		while true do
			local page = assert(ctx:scan_rows(opt.shard, { start = start, limit = 10000 }))
			local got = 0
			for _, r in ipairs(page) do
				if r.key ~= start then
					got = got + 1
					if prev ~= nil and not (prev < r.key) then
						disorder = disorder + 1
					end
					if r.value:sub(1, #r.key + 1) ~= r.key .. "=" then
						bad = bad + 1
					end
					prev = r.key
					n = n + 1
				end
			end
			if got == 0 then
				break
			end
			start = prev
		end
		ctx:metric("scan_rows", n)
		ctx:metric("scan_disorder", disorder)
		ctx:metric("scan_bad_values", bad)
	end,
	thresholds = {
		lost_rows = "== 0",
		errors = "== 0",
		verified_rows = "> 0",
		scan_disorder = "== 0",
		scan_bad_values = "== 0",
		["writers.iterations"] = "> 0",
	},
}
