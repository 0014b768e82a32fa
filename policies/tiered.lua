-- tiered.lua — base compaction by run count, a few runs at a time.
--
-- When to use it: write-heavy shards with a large base, where folding the whole
-- base into one run on every compaction (the default) rewrites too much data.
-- Merges add runs to the base as usual; once a shard holds more than
-- base_max_runs runs, the oldest FANOUT runs are folded into one, so each byte
-- is rewritten about log_FANOUT(base size) times instead of on every compaction.
-- Reads touch up to base_max_runs runs plus the waiting generations.

local FANOUT = 4 -- runs folded by one compaction

local function compact(shard)
	local limit = strata.settings.base_max_runs
	local runs = shard:stats().base_runs
	if limit > 0 and runs > limit then
		local n, err = shard:compact{max_runs = FANOUT}
		if not n and not err:find("^busy") then
			strata.log.warn("tiered: compaction of " .. tostring(shard) .. " failed: " .. err)
		end
	end
end

return {
	flush_interval_s = 5,
	sweep_interval_s = 60,
	merge_after_generations = 16,
	merge_max_generations = 8,
	memtable_max_bytes = 64 * 1024 * 1024,
	base_max_runs = 12,

	on_seal = function(shard, info)
		if info.generations >= strata.settings.merge_after_generations then
			local merged, err = shard:merge{}
			if not merged and not err:find("^busy") then
				strata.log.warn("tiered: merge of " .. tostring(shard) .. " failed: " .. err)
			end
		end
		compact(shard)
	end,

	on_sweep = function(node)
		for _, shard in ipairs(node:shards()) do
			if shard:stats().generations >= 1 then
				shard:merge{}
			end
			compact(shard)
		end
	end,
}
