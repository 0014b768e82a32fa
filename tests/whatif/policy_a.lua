-- policy_a.lua — tests/whatif/whatif.sh's policy A: seal at 256 KiB, merge once 6
-- generations wait, 6 at a time; no timers, so every trigger counts bytes or generations.
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 6,
	merge_max_generations = 6,
	memtable_max_bytes = 256 * 1024,
	base_max_runs = 8,
}
