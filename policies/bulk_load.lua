-- bulk_load.lua — defer merges while ingest is heavy.
--
-- When to use it: initial loads, backfills, WAL replays from another system: a
-- burst of appends during which merging would compete with ingest for IO and
-- fold the same key ranges again and again. While a shard's memtable fills fast
-- (at least FAST_ROWS_PER_S rows per second since its previous seal) its seals
-- do not merge; the sweeper drains the backlog instead, a few capped passes per
-- shard each sweep, so merges catch up as soon as ingest slows down. Big
-- memtables and a big cap mean fewer, larger generations and passes.
--
-- Not for a latency-sensitive read workload: reads see more generations while
-- a load is running.

local FAST_ROWS_PER_S = 20000 -- fill rate above which on_seal leaves merging to the sweeper
local PASSES_PER_SWEEP = 4    -- capped merge passes per shard and sweep

local last_seal = {}          -- shard id -> info.now of its previous seal

local function drain(shard)
	for _ = 1, PASSES_PER_SWEEP do
		if shard:stats().generations == 0 then
			break
		end
		local merged, err = shard:merge{}
		if not merged then
			if not err:find("^busy") then
				strata.log.warn("bulk_load: merge of " .. tostring(shard) .. " failed: " .. err)
			end
			break
		end
	end
	strata.default.compact_if_needed(shard)
end

return {
	flush_interval_s = 10,
	sweep_interval_s = 30,
	merge_after_generations = 200,
	merge_max_generations = 32,
	memtable_max_bytes = 256 * 1024 * 1024,
	base_max_runs = 16,

	on_seal = function(shard, info)
		local id = shard:id()
		local prev = last_seal[id]
		last_seal[id] = info.now
		if prev ~= nil and info.now > prev and info.rows / (info.now - prev) >= FAST_ROWS_PER_S then
			return -- heavy ingest: the sweeper merges later
		end
		strata.default.on_seal(shard, info)
	end,

	on_sweep = function(node)
		for _, shard in ipairs(node:shards()) do
			drain(shard)
		end
	end,
}
