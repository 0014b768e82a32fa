-- policy_b.lua — tests/whatif/whatif.sh's policy B: A's seals, but a merge as soon as two
-- generations wait: a smaller backlog for more merging.
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 2,
	merge_max_generations = 2,
	memtable_max_bytes = 256 * 1024,
	base_max_runs = 8,
}
