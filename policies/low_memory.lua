-- low_memory.lua — a small merge cap and early seals.
--
-- When to use it: small machines, containers with a tight memory limit, or
-- many shards per node. Memtables are sealed at 4 MiB and every 2 s, so little
-- data waits in memory (and little WAL waits for replay after a crash). A
-- merge pass folds at most 2 generations, which bounds the memory of the k-way
-- merge to two input blocks and keeps every pass short; the count trigger and
-- the sweeper run often so the backlog stays small. The base is compacted
-- early (more than 4 runs) to keep reads from touching many files.
--
-- The cost is more, smaller merge passes: more write amplification than
-- default.lua.
return {
	flush_interval_s = 2,
	sweep_interval_s = 20,
	merge_after_generations = 4,
	merge_max_generations = 2,
	memtable_max_bytes = 4 * 1024 * 1024,
	base_max_runs = 4,
}
