local settings, log = ... -- the built-in hooks (strata.default.*); compiled in as policy_defaults_lua
local D = {}
local function fail(shard, what, err)
	if not string.find(err, '^busy') then
		log.warn(string.format('shard %d: %s failed: %s', shard:id(), what, err))
	end
end
local function compact_if_needed(shard)
	local limit = settings.base_max_runs
	if limit > 0 and shard:stats().base_runs > limit then
		local n, err = shard:compact{}
		if not n then fail(shard, 'base compaction', err) end
	end
end
D.compact_if_needed = compact_if_needed
D.on_seal = function(shard, info)
	local n = settings.merge_after_generations
	if n > 0 and info.generations >= n then
		local merged, err = shard:merge{}
		if not merged then fail(shard, 'merge', err) end
	end
	compact_if_needed(shard)
end
D.on_sweep = function(node)
	for _, shard in ipairs(node:shards()) do
		if shard:stats().generations >= 1 then
			local merged, err = shard:merge{}
			if not merged then fail(shard, 'merge', err) end
		end
		compact_if_needed(shard)
	end
end
D.on_merge_request = function(shard, req)
	local merged, err = shard:merge{max_generations = req.max_generations}
	if not merged then return nil, err end
	compact_if_needed(shard)
	return merged
end
return D
