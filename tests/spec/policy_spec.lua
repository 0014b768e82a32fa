-- Specs of merge policies driven through the LuaJIT module: the shipped policies,
-- validation with suggestions, the count and time triggers under the per-pass cap,
-- live reload under appends, hostile policies, and misuse of plans inside hooks.
-- Run from the repository root:  BUILD=build sh tests/busted.sh spec tests/spec
--
-- The policy runtime runs on a thread of its own, so a spec that waits for it polls
-- db:stats / db:policy_info until a condition holds (bounded by WAIT_MS); no spec
-- asserts a duration. A hook reports what it saw by raising an error whose text the
-- spec reads back from db:policy_info().last_error.

local strata = require "strata"
local lfs = require "lfs"
local ffi = require "ffi"

pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")

local fmt = string.format

--- Longest wait for a condition, in milliseconds.
local WAIT_MS = 5000
--- Longest wait for the file watcher: inotify reacts at once; libev's stat polling
-- fallback (no inotify) checks every 5 s.
local WATCH_MS = 12000
--- Milliseconds between two polls of a condition.
local POLL_MS = 5

local root = os.getenv("STRATA_ROOT") or "."
local dirs = {}
local stores = {}

local function tmpdir()
	local p = os.tmpname()
	os.remove(p)
	assert(lfs.mkdir(p))
	dirs[#dirs + 1] = p
	return p
end

local function rmrf(p)
	assert(p:match("^/tmp/"), "refusing to remove " .. p)
	os.execute("rm -rf '" .. p .. "'")
end

local function sleep_ms(ms)
	ffi.C.poll(nil, 0, ms)
end

--- Poll cond() until it returns a true value (returned); fail after ms (default WAIT_MS),
-- with the text of detail() (optional) in the message.
local function wait_until(what, cond, ms, detail)
	for _ = 1, (ms or WAIT_MS) / POLL_MS do
		local v = cond()
		if v then
			return v
		end
		sleep_ms(POLL_MS)
	end
	error("timed out waiting for " .. what .. (detail and ": " .. detail() or ""), 2)
end

--- Write text to path atomically (a rename), so a file watcher never sees it half written.
local function write(path, text)
	local tmp = path .. ".tmp"
	local f = assert(io.open(tmp, "w"))
	assert(f:write(text))
	assert(f:close())
	assert(os.rename(tmp, path))
	return path
end

local function exists(path)
	return lfs.attributes(path, "mode") ~= nil
end

local function run_objects(dir, shard)
	local p = fmt("%s/objects/shard-%04d/run", dir, shard)
	if lfs.attributes(p, "mode") ~= "directory" then
		return 0
	end
	local n = 0
	for f in lfs.dir(p) do
		if f ~= "." and f ~= ".." then
			n = n + 1
		end
	end
	return n
end

--- Open a store (closed by after_each if the spec fails first); nil, message on failure.
local function open_store(opts)
	local db, err, code = strata.open(opts)
	if db ~= nil then
		stores[#stores + 1] = db
	end
	return db, err, code
end

local function info(db)
	return assert(db:policy_info())
end

local function stats(db, shard)
	return assert(db:stats(shard or 0))
end

--- Open a store in a new temp dir running the policy text (written to dir/name).
local function open_policy(text, opts)
	opts = opts or {}
	local dir = tmpdir()
	local path = write(dir .. "/" .. (opts.name or "policy.lua"), text)
	local db, err = open_store { dir = dir, sync = "none", shards = opts.shards, policy = path }
	assert(db, err)
	return db, dir, path
end

--- One row in its own generation: append, seal.
local function generation(db, shard, key)
	assert(db:append(shard, key, "v-" .. key))
	assert(db:seal(shard))
end

--- A policy that never seals or merges by itself (the cap is still set).
local function quiet(cap)
	return fmt([[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 0,
	merge_max_generations = %d,
	base_max_runs = 0,
}
]], cap or 8)
end

--- Every key readable with its value.
local function assert_rows(db, shard, keys)
	for _, k in ipairs(keys) do
		assert.equals("v-" .. k, db:get(shard, k))
	end
end

describe("merge policies", function()
	after_each(function()
		for _, db in ipairs(stores) do
			db:close()
		end
		stores = {}
		collectgarbage()
		collectgarbage()
		for _, d in ipairs(dirs) do
			rmrf(d)
		end
		dirs = {}
	end)

	describe("shipped policies", function()
		it("every file in policies/ loads, validates and runs a store", function()
			local names = {}
			for f in lfs.dir(root .. "/policies") do
				if f:match("%.lua$") then
					names[#names + 1] = f
				end
			end
			table.sort(names)
			for _, want in ipairs({ "default.lua", "bulk_load.lua", "low_memory.lua", "off_peak.lua", "tiered.lua" }) do
				assert.truthy(("\0" .. table.concat(names, "\0") .. "\0"):find("\0" .. want .. "\0", 1, true),
					"policies/" .. want .. " is shipped")
			end
			for _, name in ipairs(names) do
				local path = root .. "/policies/" .. name
				local dir = tmpdir()
				local db, err = open_store { dir = dir, sync = "none", shards = 2, policy = path }
				assert(db, fmt("%s: %s", name, tostring(err)))
				local i = info(db)
				assert.equals(1, i.version, name)
				assert.equals(path, i.name)
				assert.equals("", i.last_error, name)
				assert.equals(0, i.reload_failures, name)
				generation(db, 1, "k")
				wait_until(name .. ": on_seal", function()
					return info(db).hook_runs >= 1
				end)
				assert.equals("v-k", db:get(1, "k"))
				local ok, rerr = db:policy(path)
				assert(ok, rerr)
				assert.equals(2, info(db).version, name)
				-- Its on_sweep as well: the same script with a short sweep interval.
				local f = assert(io.open(path))
				local text, subs = f:read("*a"):gsub("sweep_interval_s = [%d%.]+", "sweep_interval_s = 0.01")
				f:close()
				assert.equals(1, subs, name)
				assert(db:policy(text))
				local runs = info(db).hook_runs
				wait_until(name .. ": two sweeps", function()
					return info(db).hook_runs >= runs + 2
				end)
				i = info(db)
				assert.equals(0, i.hook_errors, name .. ": " .. i.last_error)
				assert.equals("", i.last_error, name)
				assert.equals("v-k", db:get(1, "k"))
				assert.is_true(db:check(0))
				assert.is_true(db:check(1))
				db:close()
			end
		end)

		it("reports nil, message for a store opened without a policy", function()
			local db = assert(open_store { dir = tmpdir(), sync = "none" })
			local res, err, code = db:policy_info()
			assert.is_nil(res)
			assert.matches("without a policy runtime", err)
			assert.equals(strata.EINVAL, code)
			db:close()
			assert.has_error(function() db:policy_info() end)
		end)

		it("names the built-in default policy and formats the info", function()
			local db = assert(open_store { dir = tmpdir(), sync = "none", policy = true })
			local i = info(db)
			assert.equals("policies/default.lua (built-in)", i.name)
			local text = strata.format_policy_info(i, "policy")
			assert.matches("\n  version +1\n", text)
			assert.matches("\n  last_error +%(none%)", text)
			assert.matches("\n  name +policies/default.lua %(built%-in%)", text)
			db:close()
		end)
	end)

	describe("validation", function()
		local TYPO = "-- a policy with a typo\nreturn {\n\tmerge_after_generations = 4,\n\tmerge_max_generatoins = 3,\n}\n"

		it("refuses a typo key at open with a suggestion and file:line", function()
			local dir = tmpdir()
			local path = write(dir .. "/typo.lua", TYPO)
			local db, err = open_store { dir = dir, sync = "none", policy = path }
			assert.is_nil(db)
			assert.truthy(err:find(path .. ":4: unknown key 'merge_max_generatoins'", 1, true), err)
			assert.truthy(err:find("did you mean merge_max_generations", 1, true), err)
			-- The refused open released the store.
			local db2 = assert(open_store { dir = dir, sync = "none" })
			db2:close()
		end)

		it("sets the background IO budget, and a reload changes it live", function()
			local db, dir = open_policy(quiet(8))
			assert.equals(0, stats(db).background_io_bytes_per_s) -- the store's option
			assert(db:policy(write(dir .. "/io.lua", "return { background_io_mib_per_s = 4 }")))
			assert.equals(4 * 1048576, stats(db).background_io_bytes_per_s)
			assert(db:policy("return { background_io_mib_per_s = 0.5 }"))
			assert.equals(524288, stats(db).background_io_bytes_per_s)
			local ok, err = db:policy("return { background_io_mib_per_s = -2 }")
			assert.is_nil(ok)
			assert.matches("background_io_mib_per_s", err)
			assert.equals(524288, stats(db).background_io_bytes_per_s) -- refused: it stays
			assert(db:policy("return {}"))
			assert.equals(0, stats(db).background_io_bytes_per_s) -- not set: the option again
			db:close()
		end)

		it("refuses a typo key on reload; the old policy stays and keeps merging", function()
			local db, dir = open_policy([[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 2,
	merge_max_generations = 8,
	base_max_runs = 0,
}
]], { name = "good.lua" })
			local good = dir .. "/good.lua"
			local bad = write(dir .. "/bad.lua", TYPO)
			local res, err = db:policy(bad)
			assert.is_nil(res)
			assert.truthy(err:find(bad .. ":4:", 1, true), err)
			assert.truthy(err:find("did you mean merge_max_generations", 1, true), err)
			local i = info(db)
			assert.equals(1, i.version)
			assert.equals(0, i.reloads)
			assert.equals(1, i.reload_failures)
			assert.equals(good, i.name)
			assert.truthy(i.last_error:find(bad .. ":4: unknown key 'merge_max_generatoins'", 1, true), i.last_error)
			-- The same typo as source text.
			res, err = db:policy("return { merge_max_generatoins = 3 }")
			assert.is_nil(res)
			assert.matches("did you mean merge_max_generations", err)
			assert.equals(2, info(db).reload_failures)
			assert.equals(1, info(db).version)
			-- Still the old policy: it merges at 2 generations (the refused one said 4).
			generation(db, 0, "a")
			generation(db, 0, "b")
			wait_until("the count trigger of the old policy", function()
				return stats(db).merges == 1
			end)
			assert.equals(0, stats(db).generations)
			assert_rows(db, 0, { "a", "b" })
			db:close()
		end)

		it("reports every error of a script with its line, and refuses wrong types and ranges", function()
			local db, dir = open_policy(quiet())
			local bad = write(dir .. "/bad.lua", table.concat({
				"return {",
				"\tflush_interval_s = 'often',",
				"\tmerge_max_generations = -1,",
				"\tmerge_after_generations = 2.5,",
				"\ton_seal = 3,",
				"\ton_sweeep = function() end,",
				"}",
			}, "\n"))
			local res, err = db:policy(bad)
			assert.is_nil(res)
			for line, what in pairs({ [2] = "flush_interval_s must be a number", [3] = "merge_max_generations must be",
				[4] = "merge_after_generations must be an integer", [5] = "on_seal must be a function",
				[6] = "did you mean on_sweep" }) do
				assert.truthy(err:find(fmt("%s:%d: ", bad, line), 1, true), fmt("line %d in %s", line, err))
				assert.truthy(err:find(what, 1, true), what .. " in " .. err)
			end
			assert.equals(1, info(db).version)
			db:close()
		end)
	end)

	describe("the per-pass cap", function()
		it("count trigger: fires at exactly N generations, then merges cap generations per pass", function()
			local db = open_policy([[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 10,
	merge_max_generations = 3,
	base_max_runs = 0,
}
]])
			local keys = {}
			local runs0 = info(db).hook_runs
			local function seal_one(i)
				keys[#keys + 1] = "k" .. i
				generation(db, 0, keys[#keys])
				-- on_seal ran for this seal: the count trigger has decided.
				wait_until("on_seal after seal " .. i, function()
					return info(db).hook_runs >= runs0 + i
				end)
			end
			for i = 1, 9 do
				seal_one(i)
			end
			local s = stats(db)
			assert.equals(9, s.generations)
			assert.equals(0, s.merges)
			assert.equals(0, info(db).policy_merges)
			seal_one(10)
			wait_until("the first merge pass", function()
				return stats(db).merges >= 1
			end)
			s = stats(db)
			assert.equals(1, s.merges)
			assert.equals(3, s.merged_generations)
			assert.equals(7, s.generations)
			assert.equals(1, s.base_runs)
			-- 8 and 9 waiting: no pass; 10 again: one more pass of 3.
			seal_one(11)
			seal_one(12)
			assert.equals(1, stats(db).merges)
			assert.equals(9, stats(db).generations)
			seal_one(13)
			wait_until("the second merge pass", function()
				return stats(db).merges >= 2
			end)
			s = stats(db)
			assert.equals(2, s.merges)
			assert.equals(6, s.merged_generations)
			assert.equals(7, s.generations)
			assert.equals(2, info(db).policy_merges)
			assert_rows(db, 0, keys)
			assert.is_true(db:check(0))
			db:close()
		end)

		it("time path: every sweeper pass merges at most the cap", function()
			local db, dir = open_policy(quiet(3))
			local keys = {}
			for i = 1, 10 do
				keys[i] = "t" .. i
				generation(db, 0, keys[i])
			end
			assert.equals(10, stats(db).generations)
			-- Arm the sweeper only now, so that all 10 generations wait for it.
			assert(db:policy(write(dir .. "/sweep.lua", [[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0.02,
	merge_after_generations = 0,
	merge_max_generations = 3,
	base_max_runs = 0,
}
]])))
			local worst = 0
			wait_until("the sweeper to drain 10 generations", function()
				local s = stats(db)
				assert.is_true(s.merged_generations <= 3 * s.merges,
					fmt("%d generations in %d passes", s.merged_generations, s.merges))
				worst = math.max(worst, s.merged_generations - 3 * (s.merges - 1))
				return s.generations == 0
			end)
			local s = stats(db)
			assert.equals(10, s.merged_generations)
			assert.equals(4, s.merges) -- 3 + 3 + 3 + 1
			assert.equals(4, s.base_runs)
			local i = info(db)
			assert.is_true(i.sweeps >= 4)
			assert.equals(4, i.policy_merges)
			assert_rows(db, 0, keys)
			db:close()
		end)

		it("a hook asking for more than the cap gets the cap", function()
			local db, dir = open_policy(quiet(2))
			for i = 1, 5 do
				generation(db, 0, "h" .. i)
			end
			assert(db:policy(write(dir .. "/greedy.lua", [[
local done = false
return {
	flush_interval_s = 0,
	sweep_interval_s = 0.02,
	merge_after_generations = 0,
	merge_max_generations = 2,
	base_max_runs = 0,
	on_sweep = function(node)
		if done then return end
		done = true
		local shard = node:shards()[1]
		local merged = shard:merge{max_generations = 100}
		local plan = shard:prepare{max_generations = 0}
		error("merged=" .. tostring(merged) .. ";planned=" .. tostring(plan.generations), 0)
	end,
}
]])))
			wait_until("the greedy hook", function()
				return info(db).hook_errors == 1
			end)
			-- error(e, 0) adds no position; the runtime names the line that raised it.
			assert.equals(fmt("on_sweep: %s/greedy.lua:14: merged=2;planned=2", dir), info(db).last_error)
			assert.equals(1, stats(db).merges)
			assert.equals(3, stats(db).generations)
			db:close()
		end)
	end)

	describe("live reload", function()
		it("reloads under a stream of appends, loses nothing, refuses broken scripts", function()
			-- Small caps: merges leave generations behind, and seals land during merges.
			local db, dir, first = open_policy([[
return {
	flush_interval_s = 0.02,
	sweep_interval_s = 0.03,
	merge_after_generations = 3,
	merge_max_generations = 1,
	base_max_runs = 4,
}
]], { shards = 2, name = "first.lua" })
			local good = {
				[[
return {
	flush_interval_s = 0.03,
	sweep_interval_s = 0.01,
	merge_after_generations = 3,
	merge_max_generations = 2,
	base_max_runs = 3,
}
]],
				[[
-- a custom on_seal around the default
return {
	flush_interval_s = 0.01,
	sweep_interval_s = 0.02,
	merge_after_generations = 4,
	merge_max_generations = 1,
	base_max_runs = 2,
	on_seal = function(shard, info)
		strata.default.on_seal(shard, info)
	end,
}
]],
			}
			local broken = {
				{ "return {\n\tmerge_max_generations = 2,\n\tflush_interval = 1,\n}\n", 3, "did you mean flush_interval_s" },
				{ "return {\n\tmerge_max_generations = 2,\n\tsweep_interval_s = 'often',\n}\n", 3, "must be a number" },
				{ "return {\n\tmerge_max_generations = 2\n\tbase_max_runs = 3,\n}\n", 3, "expected" },
				{ "local t = nil\nreturn t.settings\n", 2, "attempt to index" },
				{ "return {\n\ton_seal = function(shard)\n\t\treturn shard:merge{}\n\tend,\n\tmerge_every = 4,\n}\n", 5,
					"unknown key 'merge_every'" },
			}
			local keys = { [0] = {}, [1] = {} }
			local version, failures, running = 1, 0, first
			for round = 1, 30 do
				for j = 1, 20 do
					local shard = (round + j) % 2
					local k = fmt("r%02d-%02d", round, j)
					keys[shard][#keys[shard] + 1] = k
					assert(db:append(shard, k, "v-" .. k))
				end
				-- A seal every round, so hooks run (and yield in merges) across the reloads.
				assert(db:seal(round % 2))
				if round % 2 == 0 then
					local path = write(fmt("%s/good%d.lua", dir, round), good[round / 2 % #good + 1])
					local ok, err = db:policy(path)
					assert(ok, err)
					version, running = version + 1, path
				else
					local b = broken[(round - 1) / 2 % #broken + 1]
					local path = write(fmt("%s/broken%d.lua", dir, round), b[1])
					local res, err = db:policy(path)
					assert.is_nil(res, path)
					failures = failures + 1
					assert.truthy(err:find(fmt("%s:%d:", path, b[2]), 1, true), err)
					assert.truthy(err:find(b[3], 1, true), err)
					local i = info(db)
					assert.truthy(i.last_error:find(fmt("%s:%d:", path, b[2]), 1, true), i.last_error)
				end
				local i = info(db)
				assert.equals(version, i.version)
				assert.equals(failures, i.reload_failures)
				assert.equals(version - 1, i.reloads)
				assert.equals(running, i.name)
			end
			-- The last policy (good, count trigger, sweeper) is the one running: it drains both shards.
			assert(db:seal(0))
			assert(db:seal(1))
			wait_until("the running policy to merge every generation", function()
				return stats(db, 0).generations == 0 and stats(db, 1).generations == 0
			end, nil, function()
				return strata.format_stats(stats(db, 0), "shard 0") .. "\n" .. strata.format_stats(stats(db, 1), "shard 1")
					.. "\n" .. strata.format_policy_info(info(db), "policy")
			end)
			for shard = 0, 1 do
				assert_rows(db, shard, keys[shard])
				assert.is_true(db:check(shard))
				local n = 0
				for _ in db:scan(shard) do
					n = n + 1
				end
				assert.equals(#keys[shard], n)
			end
			db:close()
			-- Durable across a reopen as well.
			local db2 = assert(open_store { dir = dir, sync = "none", shards = 2 })
			for shard = 0, 1 do
				assert_rows(db2, shard, keys[shard])
			end
			db2:close()
		end)

		it("reloads a changed policy file and refuses a broken edit of it", function()
			local db, _, path = open_policy(quiet())
			write(path, quiet(5) .. "-- edited once\n")
			wait_until("the file watcher to reload", function()
				return info(db).version == 2
			end, WATCH_MS)
			write(path, "return {\n\tmerge_max_generations = 5,\n\tbase_max_run = 3,\n} -- broken edit\n")
			wait_until("the file watcher to refuse the broken edit", function()
				return info(db).reload_failures == 1
			end, WATCH_MS)
			local i = info(db)
			assert.equals(2, i.version)
			assert.truthy(i.last_error:find(path .. ":3: unknown key 'base_max_run'", 1, true), i.last_error)
			assert.truthy(i.last_error:find("did you mean base_max_runs", 1, true), i.last_error)
			write(path, quiet(6) .. "-- fixed, a third length\n")
			wait_until("the file watcher to reload the fix", function()
				return info(db).version == 3
			end, WATCH_MS)
			db:close()
		end)
	end)

	describe("hostile policies", function()
		--- Open a store whose on_seal is hook; trigger it once; return db, dir, info.
		local function trigger_hostile(hook)
			local db, dir, path = open_policy(fmt([[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 0,
	merge_max_generations = 4,
	base_max_runs = 0,
	on_seal = %s,
}
]], hook), { name = "hostile.lua" })
			generation(db, 0, "before")
			local i = wait_until("the hostile hook to be stopped", function()
				local i = info(db)
				return i.hook_errors >= 1 and i
			end)
			assert.equals(1, i.hook_errors)
			assert.truthy(i.last_error:find("on_seal (shard 0): " .. path, 1, true), i.last_error)
			return db, dir, i
		end

		--- The store still appends, reads and merges, directly and through a policy.
		local function assert_still_works(db, dir)
			local keys = { "before" }
			for i = 1, 3 do
				keys[#keys + 1] = "after" .. i
				generation(db, 0, keys[#keys])
			end
			-- A hostile on_seal may hold a plan of its own again: busy means "retry".
			local merged, err, code
			for _ = 1, 500 do
				merged, err, code = db:merge(0)
				if code ~= strata.EBUSY then break end
				sleep_ms(10)
			end
			assert.equals(1 + 3, merged, err)
			assert_rows(db, 0, keys)
			assert(db:policy(write(dir .. "/good.lua", [[
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 2,
	merge_max_generations = 4,
	base_max_runs = 0,
}
]])))
			-- A hostile run that started before the swap may still hold its plan (until its
			-- budget stops it and a worker aborts the plan): the good policy's merges would
			-- be busy. Wait until the shard is free.
			for _ = 1, 500 do
				local _, _, c = db:merge(0)
				if c ~= strata.EBUSY then break end
				sleep_ms(10)
			end
			local merges = stats(db).merges
			keys[#keys + 1] = "x1"
			generation(db, 0, "x1")
			keys[#keys + 1] = "x2"
			generation(db, 0, "x2")
			wait_until("a policy merge after the hostile hook", function()
				return stats(db).merges == merges + 1
			end)
			assert.equals(0, stats(db).generations)
			assert_rows(db, 0, keys)
			assert.is_true(db:check(0))
			wait_until("orphan runs to be deleted", function()
				return run_objects(dir, 0) == stats(db).base_runs
			end)
			db:close()
		end

		-- The "endless" loops run for seconds of CPU time, far over the 200 ms budget; they
		-- are finite only so that a broken budget fails these specs instead of hanging them.
		it("stops an endless loop in a hook by its time budget", function()
			local db, dir, i = trigger_hostile("function() local n = 0 while n < 3e8 do n = n + 1 end end")
			assert.matches("hostile%.lua:%d+: hook exceeded its time budget", i.last_error)
			assert_still_works(db, dir)
		end)

		it("stops an endless loop that pcall tries to swallow", function()
			local db, dir, i = trigger_hostile("function() for _ = 1, 3 do "
				.. "pcall(function() local n = 0 while n < 1e8 do n = n + 1 end end) end end")
			assert.matches("hostile%.lua:%d+: hook exceeded its time budget", i.last_error)
			assert_still_works(db, dir)
		end)

		it("stops os.execute in a hook (no os in the sandbox)", function()
			local marker = tmpdir() .. "/pwned"
			local db, dir, i = trigger_hostile(fmt("function() os.execute('touch %s') end", marker))
			assert.matches("hostile%.lua:%d+: undefined global 'os'", i.last_error)
			assert.is_false(exists(marker))
			assert_still_works(db, dir)
		end)

		it("stops a huge allocation in a hook by the memory limit", function()
			local db, dir, i = trigger_hostile(
				"function() local t = {} for n = 1, 128 do t[n] = string.rep(n .. ':', 2 ^ 19) end end")
			assert.matches("not enough memory %(the policy memory limit is %d+ KiB%)", i.last_error)
			assert_still_works(db, dir)
		end)

		it("stops a single huge allocation in a hook", function()
			local db, dir, i = trigger_hostile("function() return #string.rep('x', 2 ^ 28) end")
			assert.matches("not enough memory", i.last_error)
			assert_still_works(db, dir)
		end)

		it("counts an error raised in a hook, with file:line", function()
			local db, dir, i = trigger_hostile("function() error('boom') end")
			assert.matches("hostile%.lua:%d+: boom$", i.last_error)
			assert_still_works(db, dir)
		end)

		it("aborts the plan of a hook stopped while holding it", function()
			local db, dir, i = trigger_hostile(
				"function(shard) local p = assert(shard:prepare{}) assert(p.generations == 1) "
				.. "local n = 0 while n < 3e8 do n = n + 1 end end")
			assert.matches("hook exceeded its time budget", i.last_error)
			assert.equals(0, stats(db).merges)
			assert.equals(1, stats(db).generations)
			-- The plan is aborted on a worker: the shard is free once its run is gone.
			wait_until("the held plan's run to be deleted", function()
				return run_objects(dir, 0) == 0
			end)
			assert_still_works(db, dir)
		end)

		it("refuses an endless loop at top level, at open and on reload", function()
			local dir = tmpdir()
			local path = write(dir .. "/loop.lua", "local n = 0\nwhile n < 3e8 do n = n + 1 end\nreturn {}\n")
			local db, err = open_store { dir = dir, sync = "none", policy = path }
			assert.is_nil(db)
			assert.truthy(err:find(path .. ":2: policy exceeded its time budget", 1, true), err)
			local db2 = open_policy(quiet())
			local res, rerr = db2:policy(path)
			assert.is_nil(res)
			assert.matches("policy exceeded its time budget", rerr)
			assert.equals(1, info(db2).version)
			assert.equals(1, info(db2).reload_failures)
			db2:close()
		end)

		it("refuses os.execute and other escapes at top level", function()
			local marker = tmpdir() .. "/pwned"
			local db = open_policy(quiet())
			local escapes = {
				{ fmt("os.execute('touch %s')", marker), "undefined global 'os'" },
				{ fmt("io.open('%s', 'w')", marker), "undefined global 'io'" },
				{ "debug.sethook()", "undefined global 'debug'" },
				{ "require('os')", "require 'os' is not allowed" },
				{ "require('ffi')", "require 'ffi' is not allowed" },
				{ "jit.on()", "undefined global 'jit'" },
				{ "assert(load(string.dump(function() end)))", "attempt to load chunk with wrong mode" },
				{ "getfenv(1).x = 1", "undefined global 'getfenv'" },
				{ "counter = 1", "assignment to global 'counter'" },
				{ "string.rep('x', 2 ^ 28)", "not enough memory" },
			}
			for n, e in ipairs(escapes) do
				local dir = tmpdir()
				local path = write(dir .. "/escape.lua", "local x = 1\n" .. e[1] .. "\nreturn {}\n")
				local opened, err = open_store { dir = dir, sync = "none", policy = path }
				assert.is_nil(opened, e[1])
				assert.truthy(err:find(path, 1, true), err)
				assert.truthy(err:find(e[2], 1, true), err)
				local res, rerr = db:policy(path)
				assert.is_nil(res, e[1])
				assert.truthy(rerr:find(e[2], 1, true), rerr)
				assert.equals(n, info(db).reload_failures)
			end
			assert.equals(1, info(db).version)
			assert.is_false(exists(marker))
			db:close()
		end)
	end)

	describe("plan misuse inside hooks", function()
		it("gets consumed, busy and wrong shard errors, and Lua errors for bad arguments", function()
			local db, dir = open_policy(quiet(2), { shards = 2 })
			local keys = { [0] = {}, [1] = {} }
			for shard, n in pairs({ [0] = 6, [1] = 2 }) do
				for i = 1, n do
					keys[shard][i] = fmt("m%d-%d", shard, i)
					generation(db, shard, keys[shard][i])
				end
			end
			assert(db:policy(write(dir .. "/misuse.lua", [[
local done = false
local function word(err)
	return tostring(err):match("^([^:]*):") or tostring(err)
end
local function text(err)
	return (tostring(err):gsub("[;=]", " "):sub(1, 100))
end
return {
	flush_interval_s = 0,
	sweep_interval_s = 0.02,
	merge_after_generations = 0,
	merge_max_generations = 2,
	base_max_runs = 0,
	on_sweep = function(node)
		if done then return end
		done = true
		local r = {}
		local function put(k, v) r[#r + 1] = k .. "=" .. tostring(v) end
		local s0, s1 = node:shards()[1], node:shards()[2]
		local p = assert(s0:prepare{max_generations = 100})
		put("planned", p.generations)
		put("state", p.state)
		put("commit", s0:commit(p))
		put("state_after", p.state)
		put("commit_again", word(select(2, s0:commit(p))))
		put("abort_again", word(select(2, s0:abort(p))))
		local a = assert(s0:prepare{max_generations = 1})
		local b, berr = s0:prepare{max_generations = 1}
		put("second", b == nil and word(berr) or "a second plan")
		put("first", s0:commit(a))
		local c = assert(s0:prepare{max_generations = 1})
		put("after_commit", c.generations)
		put("aborted", s0:abort(c))
		local d = assert(s0:prepare{max_generations = 1})
		put("after_abort", d.generations)
		assert(s0:abort(d))
		local q = assert(s1:prepare{max_generations = 1})
		put("wrong_shard", word(select(2, s0:commit(q))))
		put("wrong_shard_abort", word(select(2, s0:abort(q))))
		put("own_shard", s1:commit(q))
		put("bad_option", text(select(2, pcall(s0.prepare, s0, {max_generations = -1}))))
		put("not_a_plan", text(select(2, pcall(s0.commit, s0, {}))))
		local outside
		string.gsub("x", "x", function()
			outside = select(2, pcall(s0.prepare, s0, {}))
		end)
		put("outside", text(outside))
		put("left_open", assert(s0:prepare{max_generations = 1}).generations)
		error(table.concat(r, ";"), 0)
	end,
}
]])))
			local i = wait_until("the misuse hook", function()
				local i = info(db)
				return i.hook_errors >= 1 and i
			end)
			local prefix = "on_sweep: "
			assert.equals(prefix, i.last_error:sub(1, #prefix))
			local got = {}
			for k, v in i.last_error:sub(#prefix + 1):gmatch("([%w_]+)=([^;]*)") do
				got[k] = v
			end
			assert.equals("2", got.planned) -- max_generations = 100 clamped to the cap
			assert.equals("ready", got.state)
			assert.equals("2", got.commit)
			assert.equals("done", got.state_after)
			assert.equals("consumed", got.commit_again)
			assert.equals("consumed", got.abort_again)
			assert.equals("1", got.first)
			assert.equals("busy", got.second)
			assert.equals("1", got.after_commit)
			assert.equals("true", got.aborted)
			assert.equals("1", got.after_abort)
			assert.equals("wrong shard", got.wrong_shard)
			assert.equals("wrong shard", got.wrong_shard_abort)
			assert.equals("1", got.own_shard)
			assert.matches("max_generations must be an integer", got.bad_option)
			assert.equals("bad argument #1 to 'shard:commit' (plan expected, got table)", got.not_a_plan)
			assert.matches("must be called from a policy hook", got.outside)
			assert.equals("1", got.left_open)
			-- The shards are consistent: what was committed is merged, nothing else.
			local s0, s1 = stats(db, 0), stats(db, 1)
			assert.equals(2, s0.merges)
			assert.equals(0, s0.merge_conflicts)
			assert.equals(3, s0.merged_generations)
			assert.equals(3, s0.generations)
			assert.equals(1, s1.merges)
			assert.equals(1, s1.generations)
			-- The runs of the aborted plan and of the plans left open are deleted.
			for shard = 0, 1 do
				wait_until("aborted runs to be deleted", function()
					return run_objects(dir, shard) == stats(db, shard).base_runs
				end)
				assert.is_true(db:check(shard))
				assert_rows(db, shard, keys[shard])
			end
			assert.equals(1, info(db).hook_errors)
			db:close()
		end)

		it("gets busy for a second prepare while one is in flight on the shard", function()
			local db, dir = open_policy(quiet(1))
			generation(db, 0, "a")
			generation(db, 0, "b")
			assert(db:policy(write(dir .. "/busy.lua", [[
local inflight, busy = false, nil
return {
	flush_interval_s = 0,
	sweep_interval_s = 0.01,
	merge_after_generations = 0,
	merge_max_generations = 1,
	base_max_runs = 0,
	-- Prepares again and again (parked on the pool each time) until the sweeper
	-- has tried a prepare of the same shard while one was in flight.
	on_seal = function(shard)
		local tries = 0
		while busy == nil and tries < 5000 do
			tries = tries + 1
			inflight = true
			local p, err = shard:prepare{}
			inflight = false
			if not p then
				error("on_seal's own prepare failed: " .. err, 0)
			end
			assert(shard:abort(p))
		end
		error("busy=" .. tostring(busy), 0)
	end,
	on_sweep = function(node)
		if inflight and busy == nil then
			local shard = node:shards()[1]
			local p, err = shard:prepare{}
			busy = p and "a second plan" or err
			if p then shard:abort(p) end
		end
	end,
}
]])))
			generation(db, 0, "c")
			local i = wait_until("the busy hook", function()
				local i = info(db)
				return i.hook_errors >= 1 and i
			end)
			assert.equals(fmt("on_seal (shard 0): %s/busy.lua:22: busy=busy: a prepare, merge or compaction is already "
				.. "in flight on shard 0", dir), i.last_error)
			assert.equals(0, stats(db).merges)
			assert.equals(3, stats(db).generations)
			wait_until("aborted runs to be deleted", function()
				return run_objects(dir, 0) == 0
			end)
			assert_rows(db, 0, { "a", "b", "c" })
			db:close()
		end)
	end)

	describe("error positions", function()
		-- LuaJIT drops the frame of a function that makes a tail call: `return error(...)`
		-- in a helper the hook tail-called leaves no frame of the script on the stack.
		it("a hook error raised in a tail call names its file and line", function()
			local db, dir, path = open_policy([[
local function check(ok)
	if not ok then
		return error("boom")
	end
end
return {
	flush_interval_s = 0,
	sweep_interval_s = 0,
	merge_after_generations = 0,
	on_seal = function(shard, info)
		return check(false)
	end,
}
]], { name = "tail.lua" })
			generation(db, 0, "a")
			local i = wait_until("the failing hook", function()
				local i = info(db)
				return i.hook_errors >= 1 and i
			end)
			assert.equals(fmt("on_seal (shard 0): %s:3: boom", path), i.last_error)
			assert.truthy(dir)
			db:close()
		end)
	end)

	describe("strata policy check", function()
		local bin = os.getenv("STRATA_BIN")

		-- LuaJIT's close of a popen gives no exit status: the shell prints it last.
		local function check(args)
			local p = assert(io.popen(bin .. " policy check " .. args .. " 2>&1; echo \"exit=$?\""))
			local out = p:read("*a")
			p:close()
			local code = tonumber(out:match("exit=(%d+)\n$"))
			return out:gsub("exit=%d+\n$", ""), code
		end

		it("shows a setting the engine clamps: what runs, what the policy asks and why", function()
			local out, code = check(root .. "/policies/bulk_load.lua")
			assert.equals(0, code, out)
			assert.truthy(out:find("merge_max_generations = 8 (the policy asks 32; clamped to the engine's "
				.. "merge_max_inputs = 8)", 1, true), out)
			out, code = check("--merge-max-inputs 64 " .. root .. "/policies/bulk_load.lua")
			assert.equals(0, code, out)
			assert.truthy(out:find("\n  merge_max_generations = 32\n", 1, true), out)
			out = check(root .. "/policies/default.lua")
			assert.falsy(out:find("clamped", 1, true), out)
		end)

		it("checks merge_threads against the engine's --merge-threads", function()
			local path = tmpdir() .. "/threads.lua"
			write(path, "return { merge_threads = 6 }\n")
			local out, code = check("--merge-threads 4 " .. path)
			assert.equals(0, code, out)
			assert.truthy(out:find("\n  merge_threads = 4 (the policy asks 6; clamped to the engine's "
				.. "merge_threads = 4)\n", 1, true), out)
			assert.falsy(out:find("merge_max_inputs = 8 is strata serve's default", 1, true), out)
			out, code = check(path)
			assert.equals(0, code, out)
			assert.truthy(out:find("\n  merge_threads = 6\n", 1, true), out)
			out = check(root .. "/policies/default.lua")
			assert.truthy(out:find("\n  merge_threads = 0 (the engine's)\n", 1, true), out)
			out, code = check("--merge-threads 0 " .. path)
			assert.equals(2, code, out)
			assert.truthy(out:find("--merge-threads needs a number 1..64", 1, true), out)
			write(path, "return { merge_threads = 65 }\n")
			out, code = check(path)
			assert.equals(1, code, out)
			assert.truthy(out:find("merge_threads must be 0 or between 1 and 64 (got 65)", 1, true), out)
		end)
	end)

	describe("argument errors", function()
		it("name the method called, even through a tail call or pcall", function()
			local db = assert(open_store { dir = tmpdir(), sync = "none" })
			local function tail() return db:merge(0, { max_gens = 8 }) end
			for _, f in ipairs {
				tail,
				function()
					local _, e = pcall(db.merge, db, 0, { max_gens = 8 })
					error(e, 0)
				end,
			} do
				local _, err = pcall(f)
				assert.truthy(tostring(err):find("bad argument #2 to 'db:merge' (unknown option 'max_gens'", 1, true), err)
				assert.falsy(tostring(err):find("'?'", 1, true), err)
			end
			local ok, err = pcall(db.get, 42, 0, "k")
			assert.falsy(ok)
			assert.truthy(err:find("calling 'db:get' on bad self", 1, true), err)
			db:close()
		end)
	end)
end)
