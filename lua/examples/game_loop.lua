-- game_loop.lua — a 60 fps frame loop that embeds strata as a simulation rig would:
-- the loop owns time (a manual clock ticked once per frame), appends a few hundred
-- rows of world state per frame, and gives the store a bounded slice of each frame
-- (strata_step); no thread of the store runs in between. It prints frame-time and
-- store-share percentiles while seals, merges and compactions run.
--
--   luajit lua/examples/game_loop.lua [--frames N] [--rows N] [--budget-us N]
--                                     [--backlog N] [--no-sleep] [--dir DIR] [--threaded]
--
-- (with build/strata.so on LUA_CPATH and lua/ on LUA_PATH: `make test` runs it that way).
-- --backlog N flushes N generations before the first frame, so a merge is due at once.
-- Without --no-sleep each frame sleeps until its 16.7 ms are up, as a real loop does.
-- --threaded is the comparison: the store runs its own threads on the real clock (the
-- frame makes no step; background work competes with the loop for the CPUs).
local strata = require "strata"
local ffi = require "ffi"

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } strata_ex_timespec;
int clock_gettime(int clk, strata_ex_timespec *ts);
int nanosleep(const strata_ex_timespec *req, strata_ex_timespec *rem);
]]
local ts = ffi.new("strata_ex_timespec")
local function now_us()
	ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
	return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end
local function sleep_us(us)
	if us <= 0 then return end
	local req = ffi.new("strata_ex_timespec", math.floor(us / 1e6), math.floor(us % 1e6) * 1000)
	ffi.C.nanosleep(req, nil)
end

local opts = { frames = 600, rows = 300, budget_us = 2000, backlog = 0, sleep = true, threaded = false }
local i = 1
while i <= #arg do
	local a = arg[i]
	if a == "--frames" then opts.frames = tonumber(arg[i + 1]); i = i + 1
	elseif a == "--rows" then opts.rows = tonumber(arg[i + 1]); i = i + 1
	elseif a == "--budget-us" then opts.budget_us = tonumber(arg[i + 1]); i = i + 1
	elseif a == "--backlog" then opts.backlog = tonumber(arg[i + 1]); i = i + 1
	elseif a == "--dir" then opts.dir = arg[i + 1]; i = i + 1
	elseif a == "--no-sleep" then opts.sleep = false
	elseif a == "--threaded" then opts.threaded = true
	else
		io.stderr:write("game_loop.lua: unknown argument ", a, "\n")
		os.exit(2)
	end
	i = i + 1
end

local dir = opts.dir or os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'") == 0 or true)
local policy = dir .. "/policy.lua"
local f = assert(io.open(policy, "w"))
-- Seal at 256 KiB or every simulated second; merge once 4 generations wait.
f:write([[return { flush_interval_s = 1, sweep_interval_s = 10, merge_after_generations = 4,
                  merge_max_generations = 8, memtable_max_bytes = 256 * 1024, base_max_runs = 4 }]])
f:close()

local db = assert(strata.open {
	dir = dir .. "/store", shards = 1, sync = "none", policy = policy, block_bytes = 16384,
	clock = opts.threaded and "real" or "manual", threads = opts.threaded and 2 or 0, seed = 1,
	step_meter = "time",
})

local FRAME_NS, FRAME_US = 16666667, 16666.667
local value = string.rep("w", 200)
local entities = 5000

-- A backlog: generations flushed before the loop starts.
for g = 1, opts.backlog do
	for r = 1, 2000 do
		assert(db:append(0, { { key = string.format("e%06d", (g * 2000 + r) % entities),
		                        value = value } }))
	end
	assert(db:seal(0))
end

local frame_us, store_us = {}, {}
local chunks, over = 0, 0
local t_start = now_us()
for frame = 1, opts.frames do
	local t0 = now_us()
	if not opts.threaded then assert(db:tick(frame * FRAME_NS)) end
	local rows = {}
	for r = 1, opts.rows do
		local e = (frame * 7919 + r * 104729) % entities
		rows[r] = { key = string.format("e%06d", e), value = value }
	end
	assert(db:append(0, rows))
	local v = db:get(0, rows[1].key)
	assert(v == value, "a row just written reads back")
	local s0 = now_us()
	local info = opts.threaded and { chunks = 0 } or assert(db:step(opts.budget_us))
	local t1 = now_us()
	chunks = chunks + info.chunks
	frame_us[frame] = t1 - t0
	store_us[frame] = t1 - s0
	if t1 - t0 > FRAME_US then over = over + 1 end
	if opts.sleep then sleep_us(FRAME_US - (now_us() - t0)) end
end
local wall_s = (now_us() - t_start) / 1e6

local function pct(t, p)
	local c = {}
	for k = 1, #t do c[k] = t[k] end
	table.sort(c)
	return c[math.max(1, math.ceil(#c * p))]
end
local st = db:stats(0)
print(string.format("game_loop: %d frames at 60 fps in %.1f s, %d rows per frame, %s",
	opts.frames, wall_s, opts.rows, opts.threaded and "store on its own threads (no step)"
		or string.format("store budget %d us (inline, manual clock)", opts.budget_us)))
print(string.format("game_loop: frame work   p50 %.2f ms  p99 %.2f ms  max %.2f ms  (frames over 16.7 ms: %d)",
	pct(frame_us, 0.5) / 1e3, pct(frame_us, 0.99) / 1e3, pct(frame_us, 1) / 1e3, over))
print(string.format("game_loop: store step   p50 %.2f ms  p99 %.2f ms  max %.2f ms  (budget %.2f ms)",
	pct(store_us, 0.5) / 1e3, pct(store_us, 0.99) / 1e3, pct(store_us, 1) / 1e3, opts.budget_us / 1e3))
print(string.format("game_loop: background   %d chunks, %d seals, %d merges, %d compactions, %d generations waiting",
	chunks, st.seals, st.merges, st.compactions, st.generations))
local hash, events = db:trace_hash()
print(string.format("game_loop: trace %s over %d events", hash, events))
db:close()
if not opts.dir then os.execute("rm -rf '" .. dir .. "'") end
