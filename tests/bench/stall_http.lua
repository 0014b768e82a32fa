-- tests/bench/stall_http.lua — the stall benchmark over HTTP (run by bench_stall_http.sh).
--
--   strata load tests/bench/stall_http.lua --target URL --batch -- MODE RATE [GENS GEN_MB [CONNS [HZ]]]
--
-- MODE "capacity": one connection appends one 200-byte row after another for 3 s (the
-- summary's writer.iterations / 3 is its capacity).
-- MODE "merge": setup builds a backlog of GENS generations of GEN_MB MiB each
-- (incompressible 4 KiB values, a seal after each GEN_MB), then one writer appends one
-- 200-byte row at RATE per second (open model: latency from the intended start) for
-- 5 s idle, then while POST merge-wal folds the backlog; the run ends once no
-- generation is pending and the node's reaper has deleted the merged ones. Stages
-- "idle" and "during" get metrics of their own.
-- MODE "hook": the same writer, and GET /healthz 50 times a second; after 5 s a policy
-- whose on_seal never returns is PUT (flush_interval_s = 1: a seal, and a hook run
-- stopped by its budget, every second) and both go on for 10 s: stages "idle" and "hook".
-- The merge mode also reports the hypervisor's steal of the machine's CPUs, in ms, in the
-- idle phase and during the merge and its deletes (/proc/stat counts it in ticks of HZ a
-- second: getconf CLK_TCK, 100 by default).
-- CONNS (16): the connections of the merge and hook modes. The writer needs RATE x the
-- node's latency of them: with 4, one of them held by the merge request, a pace of
-- 1 100/s and the node's appends at 15 ms during the merge queued in this client for
-- 300 ms while the node's slowest append took 17 ms (2026-12-07, this VM).
local load = require "strata.load"

local args = { ... }
local mode = args[1] or "merge"
local rate = tonumber(args[2] or "500")
local gens = tonumber(args[3] or "32")
local gen_mb = tonumber(args[4] or "32")
local conns = tonumber(args[5] or "16")
local hz = tonumber(args[6] or "100") -- USER_HZ, the unit of /proc/stat (getconf CLK_TCK)
local idle_s = 5

-- The CPU time the hypervisor took from this machine's CPUs so far (the steal column of
-- /proc/stat's "cpu" line), ms; nil where there is none.
local function steal_ms()
	local f = io.open("/proc/stat", "r")
	if f == nil then
		return nil
	end
	local line = f:read("*l") or ""
	f:close()
	local v = {}
	for x in line:gmatch("%d+") do
		v[#v + 1] = tonumber(x)
	end
	return v[8] and v[8] * 1000 / hz or nil
end

-- Steal between two readings of steal_ms (-1 where either had none).
local function steal_between(a, b)
	return (a >= 0 and b >= 0) and b - a or -1
end

local keys = load.keys.sequential{ prefix = "w:", width = 14 }
local values = load.values{ size = 200, seed = 7 }

-- Incompressible bytes: a 1 MiB pool of random bytes, values cut at random offsets.
local pool
local function random_pool()
	local parts = {}
	math.randomseed(11)
	for i = 1, 4096 do
		local b = {}
		for j = 1, 256 do
			b[j] = string.char(math.random(0, 255))
		end
		parts[i] = table.concat(b)
	end
	return table.concat(parts)
end

local function backlog(ctx)
	pool = pool or random_pool()
	local vsize, per_batch = 4096, 64
	local rows_per_gen = math.floor(gen_mb * 1024 * 1024 / vsize)
	local t0 = os.clock()
	for g = 1, gens do
		local left = rows_per_gen
		while left > 0 do
			local n = math.min(per_batch, left)
			local rows = {}
			for i = 1, n do
				local off = math.random(0, #pool - vsize - 1)
				rows[i] = { string.format("b:%04d:%08d", g, left - i), pool:sub(off + 1, off + vsize) }
			end
			assert(ctx:append(0, rows, { track = false }))
			left = left - n
		end
		assert(load.retry(ctx, ctx.seal, 0))
	end
	local st = assert(ctx:stats(0))
	return { generations = st.generations, cpu_s = os.clock() - t0 }
end

-- One line of figures for bench_stall_http.sh: name=value for every phase of every scenario.
local function report(mode_name, phases, scenarios)
	return function(_, m)
		local out = { "stall_http: mode=" .. mode_name }
		for _, sc in ipairs(scenarios) do
			for _, ph in ipairs(phases) do
				local x = sc .. "/" .. ph
				for _, q in ipairs({ "p50", "p99", "p999", "max" }) do
					out[#out + 1] = string.format("%s_%s_%s=%.3f", sc, ph, q, m[x .. "." .. q .. "_ms"] or -1)
				end
				out[#out + 1] = string.format("%s_%s_n=%d", sc, ph, m[x .. ".iterations"] or m[x .. ".count"] or -1)
			end
		end
		for _, k in ipairs({ "merge_s", "deletes_s", "loop_lag_idle_ms", "steal_idle_ms", "steal_during_ms", "errors",
			"writer.iterations" }) do
			if m[k] ~= nil then
				out[#out + 1] = string.format("%s=%s", k, tostring(m[k]))
			end
		end
		print(table.concat(out, " "))
	end
end

-- Objects the node's reaper still has to delete (its /metrics gauge).
local function deletes_pending(ctx)
	local status, body = ctx:http("GET", "/metrics")
	assert(status == 200, "GET /metrics: " .. tostring(status))
	return assert(tonumber(body:match("\nstrata_deletes_pending_objects (%d+)")),
		"/metrics has no strata_deletes_pending_objects")
end

local merged_at
local lag_read
local steal_start, steal_merge

local function writer(ctx)
	assert(ctx:append(0, keys:next(), values:next()))
end

if mode == "capacity" then
	return {
		duration = "3s",
		connections = 2,
		scenarios = { writer = { vus = 1, exec = writer } },
		thresholds = { errors = "== 0" },
		done = report("capacity", {}, {}),
	}
end

if mode == "merge" then
	return {
		duration = "600s", -- the merger stops the run once nothing is pending
		connections = conns,
		setup = backlog,
		done = report("merge", { "idle", "during" }, { "writer" }),
		scenarios = {
			writer = {
				rate = rate,
				stages = {
					{ duration = idle_s, target = rate, name = "idle" },
					{ duration = 600 - idle_s, target = rate, name = "during" },
				},
				exec = writer,
			},
			merger = {
				-- From the start, to read the steal of the idle phase; it merges
				-- from idle_s on.
				every = "50ms",
				exec = function(ctx)
					steal_start = steal_start or steal_ms() or -1
					if ctx:now() < idle_s then
						return
					end
					if merged_at == nil and not lag_read then
						-- The node's longest loop lag of the idle phase; then the
						-- slow-request log starts again for the merge.
						lag_read = true
						steal_merge = steal_ms() or -1
						ctx:metric("steal_idle_ms", steal_between(steal_start, steal_merge))
						local _, body = ctx:http("GET", "/v1/slow-requests")
						local lag = body and body:match('"loop_lag_max_us":%s*([%d.]+)')
						ctx:metric("loop_lag_idle_ms", lag and tonumber(lag) / 1e3 or -1)
						ctx:http("DELETE", "/v1/slow-requests")
					end
					if merged_at == nil then
						local t0 = ctx:now()
						local _, pending = assert(load.retry(ctx, ctx.merge_wal, 0))
						ctx:metric("merge_pass_s", ctx:now() - t0)
						if pending ~= 0 then
							return
						end
						merged_at = ctx:now()
						ctx:metric("merge_s", merged_at - idle_s)
					end
					-- The background executor deletes the merged generations after the
					-- commits (paced): the run goes on until it is done.
					if deletes_pending(ctx) == 0 then
						ctx:metric("deletes_s", ctx:now() - merged_at)
						ctx:metric("steal_during_ms", steal_between(steal_merge, steal_ms() or -1))
						ctx:stop()
					end
				end,
			},
		},
		thresholds = { errors = "== 0" },
	}
end

if mode == "hook" then
	local looping = "return { flush_interval_s = 1, merge_after_generations = 0, " ..
		"on_seal = function() while true do end end }"
	return {
		duration = idle_s + 10,
		connections = conns,
		done = report("hook", { "idle", "hook" }, { "writer", "health" }),
		scenarios = {
			writer = {
				rate = rate,
				stages = {
					{ duration = idle_s, target = rate, name = "idle" },
					{ duration = 10, target = rate, name = "hook" },
				},
				exec = writer,
			},
			health = {
				rate = 50,
				stages = {
					{ duration = idle_s, target = 50, name = "idle" },
					{ duration = 10, target = 50, name = "hook" },
				},
				exec = function(ctx)
					local status = ctx:http("GET", "/healthz")
					assert(status == 200, status)
				end,
			},
			operator = {
				every = "1s",
				start = idle_s,
				iterations = 1,
				exec = function(ctx)
					assert(ctx:put_policy(looping))
				end,
			},
		},
		thresholds = { errors = "== 0" },
	}
end

error("stall_http.lua: mode must be capacity, merge or hook, not " .. tostring(mode))
