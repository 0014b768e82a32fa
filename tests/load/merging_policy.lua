-- merging_policy.lua — a policy that keeps the node merging: seal every 50 ms, merge after
-- every seal, one generation per pass, and a sweep every 100 ms. tests/load/live.sh runs
-- smoke.lua against a node on it, where merge_wal and seal often find the shard busy (a
-- merge already in flight): the runner counts those apart from the errors.
return {
	flush_interval_s = 0.05,
	sweep_interval_s = 0.1,
	merge_after_generations = 1,
	merge_max_generations = 1,
}
