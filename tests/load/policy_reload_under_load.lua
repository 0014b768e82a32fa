-- policy_reload_under_load.lua — swap the merge policy every second under a
-- constant append rate, including broken policies the node must refuse (400)
-- while the running one stays. Appends must not notice: it reports the appends
-- delayed (corrected latency above `delayed_ms`) and the errors, which must be 0.
-- The policy running before the test is put back at the end.
--
--   strata load tests/load/policy_reload_under_load.lua --target http://127.0.0.1:7070
--   strata load tests/load/policy_reload_under_load.lua --embedded /tmp/reload -- rate=300

local load = require "strata.load"

local opt = load.options({ ... }, { rate = 300, batch = 5, delayed_ms = 50, value_bytes = 128 })

local keys = load.keys.sequential{ prefix = "reload:", width = 10 }
local values = load.values{ size = opt.value_bytes, seed = 3 }

-- Each reload takes the next of these; `ok = false` ones must be refused.
local POLICIES = {
	{ ok = true, name = "fast flush", src = [[
return { flush_interval_s = 1, sweep_interval_s = 5, merge_after_generations = 4, merge_max_generations = 4 }
]] },
	{ ok = false, name = "syntax error", src = [[
return { flush_interval_s = 1,
]] },
	{ ok = true, name = "hooks", src = [[
return {
	flush_interval_s = 2,
	merge_after_generations = 3,
	merge_max_generations = 2,
	on_seal = function(shard, info)
		if shard:stats().generations >= 3 then
			shard:merge{ max_generations = 2 }
		end
	end,
}
]] },
	{ ok = false, name = "bad setting", src = [[
return { flush_interval_s = "often" }
]] },
	{ ok = true, name = "default-like", src = [[
return { flush_interval_s = 5, sweep_interval_s = 60, merge_after_generations = 50, merge_max_generations = 8 }
]] },
	{ ok = false, name = "runtime error", src = [[
error("this policy refuses to load")
]] },
}

return {
	duration = "10s",
	verify = true,
	setup = function(ctx)
		local before = assert(ctx:get_policy())
		return { policy = before.source }
	end,
	scenarios = {
		appenders = {
			rate = opt.rate,
			exec = function(ctx, n)
				assert(ctx:append(n % ctx.shards, load.batch(keys, values, opt.batch)))
			end,
		},
		reloader = {
			every = "1s",
			start = "500ms",
			exec = function(ctx, n)
				local p = POLICIES[(n - 1) % #POLICIES + 1]
				if p.ok then
					assert(ctx:put_policy(p.src))
					ctx:add("reloads", 1)
				else
					-- A refusal is the expected outcome: any other status counts as an error.
					assert(ctx:put_policy(p.src, { expect = 400 }))
					ctx:add("refused_reloads", 1)
				end
			end,
		},
	},
	teardown = function(ctx, data)
		if data and data.policy then
			assert(ctx:put_policy(data.policy))
		end
	end,
	done = function(ctx, m)
		local h = ctx:hist("appenders.append")
		local delayed = h and h:count_over(opt.delayed_ms) or 0
		ctx:metric("appends_delayed", delayed)
		print(string.format("policy_reload_under_load: %d reloads, %d refused; %d of %d appends delayed over %g ms " ..
			"(p99.9 %.3f ms, max %.3f ms); errors %d",
			m.reloads or 0, m.refused_reloads or 0, delayed, m["appenders.iterations"] or 0, opt.delayed_ms,
			m["append.p999_ms"] or 0, m["append.max_ms"] or 0, m.errors or 0))
	end,
	thresholds = {
		errors = "== 0",
		lost_rows = "== 0",
		reloads = "> 0",
		refused_reloads = "> 0",
	},
}
