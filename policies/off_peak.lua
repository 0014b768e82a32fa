-- off_peak.lua — merge only in a nightly time window.
--
-- When to use it: a node whose daytime traffic must not share IO with merges
-- (an interactive service with a quiet night). Seals go on as usual, so rows
-- are durable and visible; generations pile up during the day and the sweeper
-- merges them between WINDOW_START and WINDOW_END (UTC hours, from node:now()).
-- Outside the window a shard is merged only when its backlog passes
-- EMERGENCY_GENERATIONS, so reads never degrade without bound. Explicit merge
-- requests (HTTP merge-wal) are always served.
--
-- Size the window so the day's generations drain: every sweep runs up to
-- PASSES_PER_SWEEP capped passes per shard.

local WINDOW_START = 1             -- UTC hour the window opens
local WINDOW_END = 5               -- UTC hour the window closes (exclusive)
local EMERGENCY_GENERATIONS = 400  -- merge anyway above this backlog
local PASSES_PER_SWEEP = 8

local function in_window(now)
	local hour = math.floor(now / 3600) % 24
	if WINDOW_START <= WINDOW_END then
		return hour >= WINDOW_START and hour < WINDOW_END
	end
	return hour >= WINDOW_START or hour < WINDOW_END
end

local function drain(shard, passes)
	for _ = 1, passes do
		if shard:stats().generations == 0 then
			break
		end
		local merged, err = shard:merge{}
		if not merged then
			if not err:find("^busy") then
				strata.log.warn("off_peak: merge of " .. tostring(shard) .. " failed: " .. err)
			end
			break
		end
	end
end

return {
	flush_interval_s = 5,
	sweep_interval_s = 60,
	merge_after_generations = 0, -- no count trigger: seals never merge
	merge_max_generations = 16,
	memtable_max_bytes = 64 * 1024 * 1024,
	base_max_runs = 8,

	on_seal = function(shard, info)
		if info.generations >= EMERGENCY_GENERATIONS then
			drain(shard, 1)
		end
	end,

	on_sweep = function(node)
		local open = in_window(node:now())
		for _, shard in ipairs(node:shards()) do
			if open then
				drain(shard, PASSES_PER_SWEEP)
				strata.default.compact_if_needed(shard)
			elseif shard:stats().generations >= EMERGENCY_GENERATIONS then
				drain(shard, 1)
			end
		end
	end,
}
