-- default.lua — the built-in merge policy: what a node runs when it is given no
-- policy (the same text is compiled into the binary).
--
-- When to use it: a general-purpose node with a steady write rate. Each shard's
-- memtable is sealed every 5 s (and at 64 MiB); a shard is merged once 50
-- generations wait; every 60 s a sweep merges every shard that holds at least
-- one generation. A merge pass folds at most 8 generations, so a backlog drains
-- over several passes with bounded memory. A shard's base is compacted once it
-- holds more than 8 runs.
--
-- The hooks are left out, so the built-in defaults run (strata.default.*):
--   on_seal           one capped merge pass once merge_after_generations wait
--   on_sweep          one capped merge pass on every shard holding a generation
--   on_merge_request  one capped merge pass (HTTP merge-wal)
-- and each compacts the base when it holds more than base_max_runs runs.
return {
	flush_interval_s = 5,
	sweep_interval_s = 60,
	merge_after_generations = 50,
	merge_max_generations = 8,
	memtable_max_bytes = 64 * 1024 * 1024,
	base_max_runs = 8,
}
