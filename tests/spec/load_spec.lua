-- load_spec.lua — specs of `strata load` and its Lua half (strata.load):
-- generators, wrk hooks in order, thresholds that pass and fail, the open model
-- against a deliberately slow server (tests/load/slow_server.c, built here),
-- verification, and the reports. Run by tests/busted.sh with busted --lua=luajit;
-- STRATA_BIN names the binary (default build/strata), STRATA_ROOT the tree.

local load = require "strata.load"
local json = require "dkjson"

local root = os.getenv("STRATA_ROOT") or "."
local bin = os.getenv("STRATA_BIN") or (root .. "/build/strata")

local function q(s)
	return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

--- Run a shell command; its exit code and its output (stdout and stderr).
local function sh(cmd)
	local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"__exit=$?\""))
	local out = p:read("*a")
	p:close()
	local code = tonumber(out:match("__exit=(%d+)%s*$"))
	return code, (out:gsub("__exit=%d+%s*$", ""))
end

local tmp

local function path(name)
	return tmp .. "/" .. name
end

local function write(name, text)
	local f = assert(io.open(path(name), "w"))
	f:write(text)
	f:close()
	return path(name)
end

local function read(name)
	local f = io.open(path(name), "r")
	if not f then
		return nil
	end
	local s = f:read("*a")
	f:close()
	return s
end

--- strata load SCRIPT ARGS -> exit code, output
local function run_load(script, args)
	return sh(q(bin) .. " load " .. q(script) .. " --quiet " .. (args or ""))
end

local function read_json(name)
	local obj, _, err = json.decode(read(name) or "")
	assert(obj, "bad JSON in " .. name .. ": " .. tostring(err))
	return obj
end

local servers = {}

--- Start slow_server with a delay; returns "127.0.0.1:PORT".
local function start_server(name, delay_ms)
	local port_file = path(name .. ".port")
	local code, out = sh(q(path("slow_server")) .. " " .. q(port_file) .. " " .. delay_ms ..
		" >/dev/null 2>&1 & echo $!")
	assert(code == 0, out)
	servers[#servers + 1] = tonumber(out:match("(%d+)"))
	for _ = 1, 200 do
		local addr = read(name .. ".port")
		if addr and addr:match("%d+:%d+") then
			return (addr:gsub("%s+$", ""))
		end
		os.execute("sleep 0.02")
	end
	error("slow_server did not start")
end

describe("strata load", function()
	local fast, slow

	setup(function()
		local code, out = sh("mktemp -d /tmp/strata-load-spec.XXXXXX")
		assert(code == 0, out)
		tmp = out:gsub("%s+$", "")
		code, out = sh("cc -O2 -pthread -o " .. q(path("slow_server")) .. " " .. q(root .. "/tests/load/slow_server.c"))
		assert(code == 0, "cannot build slow_server: " .. out)
		fast = start_server("fast", 0)
		slow = start_server("slow", 20)
	end)

	teardown(function()
		for _, pid in ipairs(servers) do
			os.execute("kill " .. pid .. " 2>/dev/null")
		end
		if tmp and tmp:match("^/tmp/strata%-load%-spec%.") then
			os.execute("rm -rf " .. q(tmp))
		end
	end)

	describe("generators (strata.load)", function()
		it("draw the same sequence from the same seed and another from another seed", function()
			local a, b, c = load.rng(7), load.rng(7), load.rng(8)
			local same, differ = true, false
			for _ = 1, 100 do
				local x, y, z = a:u32(), b:u32(), c:u32()
				same = same and x == y
				differ = differ or x ~= z
				assert.is_true(x >= 0 and x < 2 ^ 32 and x == math.floor(x))
			end
			assert.is_true(same)
			assert.is_true(differ)
			local u = load.keys.uniform{ n = 1000, seed = 3 }
			local v = load.keys.uniform{ n = 1000, seed = 3 }
			for _ = 1, 50 do
				assert.equal(u:next(), v:next())
			end
		end)

		it("make sequential keys that count up and sort by index", function()
			local k = load.keys.sequential{ prefix = "user:", width = 6, start = 98 }
			assert.equal("user:000098", k:next())
			assert.equal("user:000099", k:next())
			local i = k:next_index()
			assert.equal(100, i)
			assert.equal("user:000101", k:next())
			assert.equal("user:000100", k:key(i))
			assert.is_true(k:key(9) < k:key(10))
		end)

		it("return the key alone from next, so that it can be the last argument of a verb", function()
			for _, k in ipairs({ load.keys.sequential{}, load.keys.uniform{ n = 10 }, load.keys.zipfian{ n = 10 } }) do
				assert.equal(1, select("#", k:next()))
				assert.equal(1, select("#", k:next_index()))
			end
		end)

		it("make uniform keys that stay in the key space and cover it", function()
			local k = load.keys.uniform{ n = 50, seed = 1, start = 10 }
			local seen, count = {}, 0
			for _ = 1, 20000 do
				local i = k:next_index()
				assert.is_true(i >= 10 and i < 60)
				if not seen[i] then
					seen[i] = true
					count = count + 1
				end
			end
			assert.equal(50, count)
		end)

		it("make zipfian ranks with probability proportional to 1/(rank+1)^theta", function()
			local n, theta, draws = 100, 0.99, 200000
			local k = load.keys.zipfian{ n = n, theta = theta, seed = 5, scramble = false }
			local freq = {}
			for _ = 1, draws do
				local i = k:next_index()
				assert.is_true(i >= 0 and i < n)
				freq[i] = (freq[i] or 0) + 1
			end
			local zeta = load.zeta(n, theta)
			for _, r in ipairs({ 0, 1, 2, 9 }) do
				local want = draws / ((r + 1) ^ theta * zeta)
				local got = freq[r] or 0
				assert.is_true(math.abs(got - want) < 0.06 * want,
					string.format("rank %d: %d draws, expected about %.0f", r, got, want))
			end
			-- Scrambled, the hot ranks land on scattered indexes of the same key space.
			local s = load.keys.zipfian{ n = n, theta = theta, seed = 5 }
			local hot = {}
			for r = 0, 4 do
				local i = s:index_of_rank(r)
				assert.is_true(i >= 0 and i < n)
				hot[i] = true
			end
			local distinct = 0
			for _ in pairs(hot) do
				distinct = distinct + 1
			end
			assert.is_true(distinct >= 4)
		end)

		it("size values as asked: fixed, uniform, weighted, clamped normal", function()
			local fixed = load.values{ size = 100, seed = 1 }
			assert.equal(100, #fixed:next())
			local uni = load.values{ size = { min = 10, max = 20 }, seed = 1 }
			local lo, hi = math.huge, 0
			for _ = 1, 2000 do
				local n = #uni:next()
				lo, hi = math.min(lo, n), math.max(hi, n)
			end
			assert.equal(10, lo)
			assert.equal(20, hi)
			local w = load.values{ size = { { 8, 9 }, { 4096, 1 } }, seed = 2 }
			local big = 0
			for _ = 1, 5000 do
				local n = #w:next()
				assert.is_true(n == 8 or n == 4096)
				big = big + (n == 4096 and 1 or 0)
			end
			assert.is_true(big > 350 and big < 650, "about 10% should be large, got " .. big)
			local norm = load.values{ size = { mean = 100, stddev = 1000, min = 50, max = 150 }, seed = 3 }
			for _ = 1, 500 do
				local n = #norm:next()
				assert.is_true(n >= 50 and n <= 150)
			end
			local huge = load.values{ size = 300000, seed = 4 }
			assert.equal(300000, #huge:next())
		end)

		it("make distinct printable values", function()
			local v = load.values{ size = 64, seed = 9 }
			local seen = {}
			for _ = 1, 1000 do
				local s = v:next()
				assert.is_nil(seen[s])
				seen[s] = true
				assert.is_truthy(s:match("^[%w%-_]+$"))
			end
		end)

		it("parse script options by the defaults' types and refuse unknown ones", function()
			local o = load.options({ "rate=500", "name=x", "on=true" }, { rate = 1, name = "a", on = false, n = 3 })
			assert.same({ rate = 500, name = "x", on = true, n = 3 }, o)
			assert.has_error(function()
				load.options({ "rte=5" }, { rate = 1 })
			end)
			assert.has_error(function()
				load.options({ "rate=fast" }, { rate = 1 })
			end)
		end)
	end)

	describe("wrk-style scripts", function()
		it("call setup, init, then delay, request and response for each request, then done", function()
			local script = write("hooks.lua", [[
local log = assert(io.open(os.getenv("HOOK_LOG"), "w"))
local function note(s) log:write(s, "\n") log:flush() end
function setup(thread) note("setup " .. thread.id) thread:set("tid", thread.id) end
function init(args) note("init " .. table.concat(args, ",") .. " tid=" .. tostring(tid)) end
function delay() note("delay") return 5 end
function request() note("request") return wrk.format("GET", "/hello") end
function response(status, headers, body) note("response " .. status .. " " .. body) end
function done(summary, latency, requests)
	note(string.format("done %d %s %s", summary.requests, tostring(latency.max > 0),
		tostring(latency:percentile(50) <= latency.max)))
	log:close()
end
]])
			local code, out = sh("HOOK_LOG=" .. q(path("hooks.log")) .. " " .. q(bin) .. " load " .. q(script) ..
				" --quiet --target http://" .. fast .. " -c 1 -d 1s -- a b")
			assert.equal(0, code, out)
			local lines = {}
			for l in read("hooks.log"):gmatch("[^\n]+") do
				lines[#lines + 1] = l
			end
			assert.equal("setup 1", lines[1])
			assert.equal("init a,b tid=1", lines[2])
			local i, responses = 3, 0
			while lines[i] == "delay" and lines[i + 1] == "request" and lines[i + 2] == "response 200 ok" do
				i = i + 3
				responses = responses + 1
			end
			assert.is_true(responses >= 10, "only " .. responses .. " delay/request/response cycles")
			if lines[i] == "delay" then
				i = i + 1
			end
			assert.equal(string.format("done %d true true", responses), lines[i])
			assert.equal(i, #lines)
		end)

		it("send at a constant rate with -R, as wrk2", function()
			local script = write("rate.lua", "wrk.method = 'GET'\nwrk.path = '/r'\n")
			local code, out = run_load(script, "--target http://" .. fast .. " -R 200 -d 1s --json " ..
				q(path("rate.json")))
			assert.equal(0, code, out)
			local r = read_json("rate.json")
			local arrivals = r.scenarios.wrk.arrivals
			assert.is_true(arrivals >= 195 and arrivals <= 201, "arrivals " .. arrivals)
			assert.equal(0, r.errors)
		end)
	end)

	describe("thresholds", function()
		local function thr_script(name, thresholds)
			return write(name, [[
return {
	duration = "500ms",
	scenarios = { w = { rate = 40, exec = function(ctx) assert(ctx:http("GET", "/t")) end } },
	done = function(ctx, m) ctx:metric("answer", 42) end,
	thresholds = ]] .. thresholds .. [[,
}
]])
		end

		it("pass with exit 0 when every one holds", function()
			local s = thr_script("pass.lua", [[{ ["http.p99_ms"] = "< 60000", errors = "== 0",
				["w.iterations"] = { ">= 10", "<= 21" }, answer = "== 42" }]])
			local code, out = run_load(s, "--target http://" .. fast)
			assert.equal(0, code, out)
			assert.is_truthy(out:find("result: passed (5 thresholds)", 1, true), out)
		end)

		it("fail with exit 1 and name the threshold that failed", function()
			local s = thr_script("fail.lua", [[{ ["http.p99_ms"] = "< 0.000001", errors = "== 0" }]])
			local code, out = run_load(s, "--target http://" .. fast)
			assert.equal(1, code, out)
			assert.is_truthy(out:find("FAIL  http.p99_ms < 0.000001", 1, true), out)
			assert.is_truthy(out:find("ok    errors == 0", 1, true), out)
			assert.is_truthy(out:find("result: FAILED (1 of 2 thresholds)", 1, true), out)
		end)

		it("fail on a metric that does not exist, with the closest names", function()
			local s = thr_script("unknown.lua", [[{ ["htp.p99_ms"] = "< 5" }]])
			local code, out = run_load(s, "--target http://" .. fast)
			assert.equal(1, code, out)
			assert.is_truthy(out:find("no such metric; closest: http.p99_ms", 1, true), out)
		end)

		it("refuse a malformed condition before running (exit 2)", function()
			local s = thr_script("bad.lua", [[{ errors = "about zero" }]])
			local code, out = run_load(s, "--target http://" .. fast)
			assert.equal(2, code, out)
			assert.is_truthy(out:find("threshold errors", 1, true), out)
		end)
	end)

	describe("the open model against a slow server", function()
		-- One connection to a server that takes 20 ms per request serves 50 requests/s.
		local function run_against_slow(name, scenario, extra)
			local s = write(name .. ".lua", [[
return {
	duration = "2s",
	connections = 1,
	scenarios = { s = ]] .. scenario .. [[ },
}
]])
			local code, out = run_load(s, "--target http://" .. slow .. " --grace 0 --json " ..
				q(path(name .. ".json")) .. " " .. (extra or ""))
			assert.equal(0, code, out)
			return read_json(name .. ".json").scenarios.s
		end

		it("keeps its arrival rate, and the corrected latency includes the queueing", function()
			local s = run_against_slow("open100", [[{ rate = 100, exec = function(ctx) assert(ctx:http("GET", "/s")) end }]])
			-- Every arrival of 100/s over 2 s happened, although the server serves only about 50/s.
			assert.is_true(s.arrivals >= 195 and s.arrivals <= 201, "arrivals " .. s.arrivals)
			assert.is_true(s.iterations <= 130, "completed " .. s.iterations .. " at 50/s capacity")
			local corrected, raw = s.latency_us.p50 / 1000, s.latency_uncorrected_us.p50 / 1000
			-- Service time is about 20 ms; the queue grows by half a second per second.
			assert.is_true(raw >= 15 and raw < 80, "uncorrected p50 " .. raw .. " ms")
			assert.is_true(corrected > 250, "corrected p50 " .. corrected .. " ms")
			assert.is_true(corrected > 5 * raw, "corrected " .. corrected .. " vs uncorrected " .. raw)
			assert.is_true(s.latency_us.max / 1000 > 600, "corrected max " .. s.latency_us.max / 1000)
		end)

		it("counts the wait of arrivals queued behind max_inflight in the corrected latency", function()
			local s = run_against_slow("inflight1", [[{ rate = 100, max_inflight = 1,
				exec = function(ctx) assert(ctx:http("GET", "/s")) end }]], "-c 4")
			assert.is_true(s.arrivals >= 195 and s.arrivals <= 201, "arrivals " .. s.arrivals)
			assert.is_true(s.iterations <= 130, "completed " .. s.iterations)
			local corrected, raw = s.latency_us.p50 / 1000, s.latency_uncorrected_us.p50 / 1000
			assert.is_true(raw >= 15 and raw < 80, "uncorrected p50 " .. raw .. " ms")
			assert.is_true(corrected > 250 and corrected > 5 * raw, "corrected p50 " .. corrected .. " ms")
		end)

		it("below capacity measures the same corrected and uncorrected latency", function()
			local s = run_against_slow("open20", [[{ rate = 20, exec = function(ctx) assert(ctx:http("GET", "/s")) end }]])
			assert.is_true(s.arrivals >= 39 and s.arrivals <= 41, "arrivals " .. s.arrivals)
			local corrected, raw = s.latency_us.p50 / 1000, s.latency_uncorrected_us.p50 / 1000
			assert.is_true(corrected < raw + 15, "corrected " .. corrected .. " vs uncorrected " .. raw)
		end)

		it("unlike the closed model, whose rate follows the server and hides the queueing", function()
			local s = run_against_slow("closed", [[{ vus = 1, exec = function(ctx) assert(ctx:http("GET", "/s")) end }]])
			assert.is_true(s.iterations <= 110, "closed model ran " .. s.iterations .. " iterations")
			local corrected, raw = s.latency_us.p50 / 1000, s.latency_uncorrected_us.p50 / 1000
			assert.is_true(corrected < 80 and corrected < raw + 15, "closed corrected " .. corrected)
		end)
	end)

	describe("verification", function()
		it("counts rows the node acknowledged and then lost", function()
			-- slow_server acknowledges appends and keeps nothing.
			local s = write("lost.lua", [[
local n = 0
return {
	duration = "1s",
	verify = true,
	scenarios = { w = { rate = 10, iterations = 5, exec = function(ctx)
		local rows = {}
		for i = 1, 4 do n = n + 1; rows[i] = { "k" .. n, "v" .. n } end
		assert(ctx:append(0, rows))
	end } },
	thresholds = { lost_rows = "== 0" },
}
]])
			local code, out = run_load(s, "--target http://" .. fast .. " --json " .. q(path("lost.json")))
			assert.equal(1, code, out)
			local r = read_json("lost.json")
			assert.equal(20, r.lost_rows)
			assert.equal(20, r.verify.missing)
			assert.equal(20, r.verify.tracked)
			assert.is_truthy(out:find("lost: shard 0 key", 1, true), out)
		end)

		it("reads every acknowledged row back from an embedded store, newest value per key", function()
			local s = write("embedded.lua", [[
local load = require "strata.load"
local keys = load.keys.uniform{ n = 300, seed = 1, prefix = "e:" }
local values = load.values{ size = { min = 1, max = 300 }, seed = 1 }
return {
	duration = "1s",
	verify = true,
	shards = 2,
	scenarios = {
		w = { rate = 100, exec = function(ctx, n) assert(ctx:append(n % 2, load.batch(keys, values, 10))) end },
		s = { every = "300ms", exec = function(ctx) assert(ctx:seal(0)) assert(ctx:merge_wal(0)) end },
	},
	thresholds = { lost_rows = "== 0", errors = "== 0" },
}
]])
			local code, out = run_load(s, "--embedded " .. q(path("edb")) .. " --sync none --json " ..
				q(path("embedded.json")))
			assert.equal(0, code, out)
			local r = read_json("embedded.json")
			assert.equal(0, r.lost_rows)
			-- 1000 rows over 300 keys: each key is tracked once, with its newest value.
			assert.is_true(r.verify.tracked <= 600 and r.verify.tracked > 200, "tracked " .. r.verify.tracked)
			assert.equal(r.verify.tracked, r.verify.verified)
			assert.equal(1000, r.rows)
		end)
	end)

	describe("a busy shard", function()
		it("is counted as busy, apart from the errors, and handed to the script with Retry-After", function()
			-- slow_server answers merge-wal of shard 0 with 200, 1 with 429, 2 with 503 "busy",
			-- 3 with 409, 4 with 503 "out of memory"; an append to shard 9 with 409 (fenced).
			local s = write("busy.lua", [[
return {
	duration = "2s",
	scenarios = { m = { vus = 1, iterations = 1, exec = function(ctx)
		for shard = 0, 4 do
			local a, _, kind, retry = ctx:merge_wal(shard)
			ctx:metric("ok_" .. shard, a and 1 or 0)
			ctx:metric("busy_" .. shard, kind == "busy" and 1 or 0)
			ctx:metric("retry_" .. shard, retry or -1)
		end
		local _, _, kind = ctx:append(9, "k", "v")
		ctx:metric("append_busy", kind == "busy" and 1 or 0)
	end } },
	thresholds = { busy = "== 3", errors = "== 2" },
}
]])
			local code, out = run_load(s, "--target http://" .. fast .. " --json " .. q(path("busy.json")) ..
				" --report " .. q(path("busy.html")))
			assert.equal(0, code, out)
			local r = read_json("busy.json")
			assert.equal(3, r.busy)
			assert.equal(3, r.busy_by_verb.merge_wal.count)
			assert.equal(2, r.errors)
			assert.equal(1, r.errors_by_kind.http_5xx.count)
			assert.equal(1, r.errors_by_kind.http_4xx.count)
			assert.equal(3, r.verbs.merge_wal.busy)
			assert.equal(1, r.verbs.merge_wal.errors)
			assert.equal(3, r.metrics["merge_wal.busy"])
			local m = r.metrics
			assert.same({ 1, 0, 0, 0, 0 }, { m.ok_0, m.ok_1, m.ok_2, m.ok_3, m.ok_4 })
			assert.same({ 0, 1, 1, 1, 0 }, { m.busy_0, m.busy_1, m.busy_2, m.busy_3, m.busy_4 })
			assert.same({ -1, 2, 1, -1, -1 }, { m.retry_0, m.retry_1, m.retry_2, m.retry_3, m.retry_4 })
			assert.equal(0, m.append_busy)
			assert.is_truthy(out:find("busy: 3", 1, true), out)
			assert.is_truthy(read("busy.html"):find("Busy: 3", 1, true))
		end)

		it("is counted as busy on an embedded store too (STRATA_EBUSY)", function()
			-- A merge request whose hook prepares twice: the second prepare of the shard is busy.
			local pol = write("busy_policy.lua", [[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	on_merge_request = function(shard)
		local _ = shard:prepare{}
		return shard:prepare{}
	end,
}
]])
			local s = write("busy_embedded.lua", [[
return {
	duration = "2s",
	scenarios = { m = { vus = 1, iterations = 1, exec = function(ctx)
		assert(ctx:append(0, "k", "v"))
		local a, _, kind = ctx:merge_wal(0)
		ctx:metric("ok", a and 1 or 0)
		ctx:metric("busy_kind", kind == "busy" and 1 or 0)
	end } },
}
]])
			local code, out = run_load(s, "--embedded " .. q(path("busydb")) .. " --policy " .. q(pol) ..
				" --sync none --json " .. q(path("busy_embedded.json")))
			assert.equal(0, code, out)
			local r = read_json("busy_embedded.json")
			assert.equal(1, r.busy, out)
			assert.equal(0, r.errors, out)
			assert.same({ 0, 1 }, { r.metrics.ok, r.metrics.busy_kind })
		end)

		it("is asked again by load.retry, with the verb's results once it is not busy", function()
			local s = write("retry.lua", [[
local load = require "strata.load"
load.RETRY_TRIES, load.RETRY_PAUSE_S = 3, 0.01
return {
	duration = "2s",
	scenarios = { m = { vus = 1, iterations = 1, exec = function(ctx)
		for shard = 0, 3, 3 do
			local calls = 0
			local a, _, kind = load.retry(ctx, function(c, sh) calls = calls + 1; return c:merge_wal(sh) end, shard)
			ctx:metric("calls_" .. shard, calls)
			ctx:metric("ok_" .. shard, a and 1 or 0)
			ctx:metric("busy_" .. shard, kind == "busy" and 1 or 0)
		end
	end } },
}
]])
			local code, out = run_load(s, "--target http://" .. fast .. " --json " .. q(path("retry.json")))
			assert.equal(0, code, out)
			local m = read_json("retry.json").metrics
			assert.same({ 1, 1, 0 }, { m.calls_0, m.ok_0, m.busy_0 })
			assert.same({ 3, 0, 1 }, { m.calls_3, m.ok_3, m.busy_3 })
			assert.equal(3, m.busy)
		end)
	end)

	describe("ctx verbs and the db methods of the same name", function()
		it("take the same arguments and give the same results", function()
			local s = write("agree.lua", [[
local load = require "strata.load"
local out = assert(io.open(]] .. string.format("%q", path("agree.out")) .. [[, "w"))
local function put(...) out:write(table.concat({ ... }, "\t"), "\n") end
return {
	duration = "2s",
	shards = 1,
	scenarios = { a = { vus = 1, iterations = 1, exec = function(ctx)
		put("seq", assert(ctx:append(0, { { "a", "1" }, { key = "b", value = "2" } })))
		put("seq", assert(ctx:append(0, "c", "3")))
		put("seq", assert(ctx:append(0, { key = "d", value = "4" })))
		put("seq", assert(ctx:append(0, { "e", "5" })))
		local keys = load.keys.sequential{ prefix = "", width = 1 }
		put("get", tostring(ctx:get(0, keys:next())), tostring(ctx:get(0, "a")), tostring(ctx:get(0, "zz")))
		for k, v in assert(ctx:scan(0, { prefix = "" })) do put("scan", k, v) end
		for _, row in ipairs(assert(ctx:scan_rows(0, { start = "b", stop = "d" }))) do
			put("rows", row.key, row.value)
		end
		for k in assert(ctx:scan(0, { start = "b", ["end"] = "c" })) do put("end", k) end
		put("sealed", tostring(assert(ctx:seal(0))))
		local st = assert(ctx:stats(0))
		local names = {}
		for k in pairs(st) do names[#names + 1] = k end
		table.sort(names)
		put("stats", table.concat(names, ","))
		out:close()
	end } },
	thresholds = { errors = "== 0" },
}
]])
			local dir = path("agreedb")
			local code, out = run_load(s, "--embedded " .. q(dir) .. " --sync none")
			assert.equal(0, code, out)
			local strata = require "strata"
			local db = assert(strata.open{ dir = dir })
			local want = {}
			local function put(...) want[#want + 1] = table.concat({ ... }, "\t") end
			put("seq", "2")
			put("seq", "3")
			put("seq", "4")
			put("seq", "5")
			-- The same calls through db give what ctx gave (the rows are there from the run).
			local keys = load.keys.sequential{ prefix = "", width = 1 }
			assert.equal(nil, db:get(0, keys:next()))
			put("get", tostring(db:get(0, "0")), tostring(db:get(0, "a")), tostring(db:get(0, "zz")))
			for k, v in assert(db:scan(0, { prefix = "" })) do put("scan", k, v) end
			for _, row in ipairs(assert(db:scan_rows(0, { start = "b", stop = "d" }))) do
				put("rows", row.key, row.value)
			end
			for k in assert(db:scan(0, { start = "b", ["end"] = "c" })) do put("end", k) end
			put("sealed", tostring(assert(db:seal(0))))
			local names = { "shard" }
			for k in pairs(assert(db:stats(0))) do names[#names + 1] = k end
			table.sort(names)
			put("stats", table.concat(names, ","))
			-- db:append takes the row shapes ctx:append takes.
			assert(db:append(0, { { "f", "6" }, { key = "g", value = "7" } }))
			assert(db:append(0, { "h", "8" }))
			assert.same({ "6", "7", "8" }, { db:get(0, "f"), db:get(0, "g"), db:get(0, "h") })
			db:close()
			local got = {}
			for line in (read("agree.out") or ""):gmatch("[^\n]+") do got[#got + 1] = line end
			assert.same(want, got)
		end)
	end)

	describe("deletes", function()
		-- Puts 40 keys, deletes every third (single keys and arrays), then verify reads every
		-- tracked key back: a deleted one must be absent.
		local script = [[
return {
	duration = "5s",
	verify = true,
	append_format = "%s",
	scenarios = { w = { vus = 1, iterations = 1, exec = function(ctx)
		local rows = {}
		for i = 1, 40 do rows[i] = { "d" .. i, "v" .. i } end
		assert(ctx:append(0, rows))
		assert(ctx:seal(0))
		assert(ctx:delete(0, "d3"))
		local keys = {}
		for i = 6, 40, 3 do keys[#keys + 1] = "d" .. i end
		assert(ctx:delete(0, keys))
		assert(ctx:delete(0, "never-put"))
		assert(ctx:get(0, "d3") == nil, "d3 reads back after its delete")
		assert(ctx:get(0, "d4") == "v4")
		local seen = 0
		for _ in assert(ctx:scan(0, { prefix = "d" })) do seen = seen + 1 end
		assert(seen == 27, "scan saw " .. seen .. " rows, want 27")
	end } },
	thresholds = { lost_rows = "== 0", errors = "== 0" },
}
]]

		local function check(name, args)
			local code, out = run_load(write(name .. ".lua", script:format(name:match("batch") and "batch" or "ndjson")),
				args .. " --json " .. q(path(name .. ".json")))
			assert.equal(0, code, out)
			local r = read_json(name .. ".json")
			assert.equal(0, r.lost_rows)
			assert.equal(41, r.verify.tracked)
			assert.equal(41, r.verify.verified)
		end

		it("ctx:delete deletes in an embedded store and verify expects the keys absent", function()
			check("del-embedded", "--embedded " .. q(path("del-edb")) .. " --sync none")
		end)

		it("ctx:delete deletes on a live node, in NDJSON and in the binary batch format", function()
			for _, fmt in ipairs({ "del-ndjson", "del-batch" }) do
				local ready = path(fmt .. ".ready")
				local code, out = sh(q(bin) .. " serve --listen 127.0.0.1:0 --data " .. q(path(fmt .. "-data")) ..
					" --sync none --ready-file " .. q(ready) .. " --log-level warn >/dev/null 2>&1 & echo $!")
				assert(code == 0, out)
				local pid = tonumber(out:match("(%d+)"))
				servers[#servers + 1] = pid
				local addr
				for _ = 1, 200 do
					addr = read(fmt .. ".ready")
					if addr and addr:match("%d+:%d+") then break end
					os.execute("sleep 0.05")
				end
				assert(addr and addr:match("%d+:%d+"), "the node did not start")
				check(fmt, "--target http://" .. addr:gsub("%s+$", ""))
				os.execute("kill " .. pid .. " 2>/dev/null")
			end
		end)
	end)

	describe("scripts with errors", function()
		it("count a failing exec as a script error and show its message", function()
			local s = write("boom.lua", [[
return {
	duration = "300ms",
	scenarios = { b = { rate = 20, exec = function() error("boom at iteration") end } },
	thresholds = { errors = "== 0" },
}
]])
			local code, out = run_load(s, "--embedded " .. q(path("boomdb")) .. " --sync none")
			assert.equal(1, code, out)
			assert.is_truthy(out:find("script", 1, true))
			assert.is_truthy(out:find("boom at iteration", 1, true), out)
		end)

		it("refuse an unknown scenario field with the closest names (exit 2)", function()
			local s = write("typo.lua", [[
return { scenarios = { t = { rte = 5, exec = function() end } } }
]])
			local code, out = run_load(s, "--embedded " .. q(path("typodb")))
			assert.equal(2, code, out)
			assert.is_truthy(out:find("unknown field \"rte\"", 1, true), out)
			assert.is_truthy(out:find("rate", 1, true), out)
		end)

		it("refuse a script that does not compile (exit 2)", function()
			local s = write("syntax.lua", "return {\n")
			local code, out = run_load(s, "--embedded " .. q(path("syntaxdb")))
			assert.equal(2, code, out)
			assert.is_truthy(out:find("syntax.lua:2", 1, true), out)
		end)
	end)

	describe("reports", function()
		local json_report, html
		setup(function()
			local s = write("report.lua", [[
return {
	duration = "1200ms",
	verify = true,
	scenarios = {
		writers = { rate = 50, exec = function(ctx, n) assert(ctx:append(0, { { "r" .. n, "value" } })) end },
		readers = { vus = 1, pause = 0.02, exec = function(ctx) ctx:get(0, "r1") end },
	},
}
]])
			local code, out = run_load(s, "--embedded " .. q(path("reportdb")) .. " --sync none --json " ..
				q(path("report.json")) .. " --report " .. q(path("report.html")))
			assert(code == 0, out)
			json_report = read_json("report.json")
			html = read("report.html")
		end)

		it("write JSON with rates and latency per scenario, errors and lost_rows", function()
			local w = json_report.scenarios.writers
			assert.is_number(w.rows_per_s)
			assert.is_true(w.rows_per_s > 30 and w.rows_per_s < 70, "rows_per_s " .. w.rows_per_s)
			for _, k in ipairs({ "p50", "p99", "p999", "max" }) do
				assert.is_number(w.latency_us[k])
				assert.is_number(w.latency_uncorrected_us[k])
			end
			assert.is_true(w.latency_us.p50 <= w.latency_us.p99 and w.latency_us.p99 <= w.latency_us.max)
			assert.equal(0, json_report.errors)
			assert.equal(0, json_report.lost_rows)
			assert.is_table(json_report.scenarios.readers)
			assert.is_number(json_report.metrics["append.p999_ms"])
		end)

		it("write one self-contained HTML file with the plots", function()
			assert.is_truthy(html:find("<svg", 1, true))
			assert.is_truthy(html:find("Latency by percentile", 1, true))
			assert.is_truthy(html:find("Throughput over time", 1, true))
			assert.is_truthy(html:find("Latency over time", 1, true))
			assert.is_falsy(html:find("src=", 1, true))
			assert.is_falsy(html:find("<link", 1, true))
			assert.is_falsy(html:find("href=\"http", 1, true))
			assert.is_falsy(html:find("@import", 1, true))
		end)
	end)
end)
