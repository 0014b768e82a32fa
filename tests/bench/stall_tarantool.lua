#!/usr/bin/env tarantool
-- tests/bench/stall_tarantool.lua DIR — the stall bench's workload on Tarantool's vinyl,
-- the closest peer (LuaJIT + libev + an LSM tree): one fiber appends one row per
-- transaction with wal_mode = fsync, paced at BENCH_STALL_PCT of its back-to-back rate,
-- idle for BENCH_STALL_IDLE_S, then while index:compact() folds BENCH_STALL_GENS dumped
-- runs of BENCH_STALL_GEN_MB MiB of incompressible rows into one. Latency counts from
-- the intended send time, as bench_stall's does. Prints bench_stall's columns.
local fiber = require('fiber')
local clock = require('clock')
local digest = require('digest')

local function env_num(name, default)
    local v = os.getenv(name)
    if v == nil or v == '' then
        return default
    end
    local n = tonumber(v)
    if n == nil then
        io.stderr:write(('stall_tarantool: %s=%s is not a number\n'):format(name, v))
        os.exit(2)
    end
    return n
end

local dir = arg[1]
if dir == nil then
    io.stderr:write('usage: tarantool stall_tarantool.lua DIR\n')
    os.exit(2)
end
local gens = env_num('BENCH_STALL_GENS', 32)
local gen_bytes = env_num('BENCH_STALL_GEN_MB', 32) * 1024 * 1024
local value_bytes = env_num('BENCH_STALL_VALUE', 1024)
local idle_s = env_num('BENCH_STALL_IDLE_S', 5)
local cap_s = env_num('BENCH_STALL_CAP_S', 2)
local pct = env_num('BENCH_STALL_PCT', 40)
local settle_s = env_num('BENCH_STALL_SETTLE_S', 3)
local fixed_rate = env_num('BENCH_STALL_RATE', 0)
local W_VALUE = 200 -- the writer's value, as bench_stall's

box.cfg {
    work_dir = dir,
    wal_mode = 'fsync',
    log = dir .. '/tarantool.log',
    -- a generation must fit in memory before its dump
    vinyl_memory = math.max(128 * 1024 * 1024, 3 * gen_bytes),
    vinyl_cache = 0,
    checkpoint_interval = 0, -- no automatic checkpoints inside the window
    readahead = 16320,
}

local s = box.schema.space.create('stall', { engine = 'vinyl' })
-- One range, and runs that stay separate until the explicit compaction. Vinyl compacts
-- the last level as soon as it holds two runs, and places a run by its size (levels
-- run_size_ratio apart): the oldest run is made 1.5x the others and alone on the last
-- level, the others share the level above it (up to run_count_per_level).
s:create_index('pk', {
    type = 'tree', parts = { 1, 'string' },
    run_count_per_level = 1000, run_size_ratio = 1.1,
    range_size = 4 * gens * gen_bytes, page_size = 64 * 1024,
})
local pk = s.index.pk

-- The backlog: gens dumps of gen_bytes (the first 1.5x) of 16-byte random keys and
-- random values.
local t0 = clock.monotonic()
local per_gen = math.max(1, math.floor(gen_bytes / (16 + value_bytes)))
local batch = 500
for g = 1, gens do
    local n = 0
    local rows = g == 1 and math.floor(per_gen * 3 / 2) or per_gen
    while n < rows do
        box.begin()
        for _ = 1, math.min(batch, rows - n) do
            s:replace { digest.urandom(16), digest.urandom(value_bytes) }
            n = n + 1
        end
        box.commit()
    end
    box.snapshot() -- dumps the in-memory level: one run per generation
end
local load_s = clock.monotonic() - t0
local runs = pk:stat().run_count
local disk_bytes = pk:stat().disk.bytes
os.execute('sync')
fiber.sleep(settle_s)

-- The writer: one row per transaction (one WAL fsync each).
local wval = string.rep('v', W_VALUE)
local seq = 0
local function put()
    seq = seq + 1
    s:replace { ('w%015d'):format(seq), wval }
end

local t = clock.monotonic()
local n = 0
while clock.monotonic() - t < cap_s do
    put()
    n = n + 1
end
local capacity = n / (clock.monotonic() - t)
local rate = fixed_rate > 0 and fixed_rate or capacity * pct / 100

local phase = 'idle'
local samples = { idle = {}, merge = {} }
local stop = false
local writer = fiber.create(function()
    local period = 1 / rate
    local next_at = clock.monotonic()
    while not stop do
        local now = clock.monotonic()
        if now < next_at then
            fiber.sleep(next_at - now)
        end
        local ph = phase
        put()
        local lat = clock.monotonic() - next_at
        local list = samples[ph]
        list[#list + 1] = lat * 1000
        next_at = next_at + period
    end
end)
writer:set_joinable(true)

fiber.sleep(idle_s)
phase = 'merge'
local m0 = clock.monotonic()
pk:compact()
-- compact() only schedules the work: the merge ends when one run is left.
while pk:stat().run_count > 1 do
    fiber.sleep(0.01)
end
local merge_s = clock.monotonic() - m0
stop = true
writer:join()
local in_bytes = pk:stat().disk.compaction.input.bytes

local function summary(list)
    table.sort(list)
    local function q(p)
        if #list == 0 then
            return 0
        end
        local i = math.min(#list, math.max(1, math.ceil(#list * p)))
        return list[i]
    end
    return { n = #list, p50 = q(0.50), p99 = q(0.99), p999 = q(0.999), max = q(1) }
end
local idle = summary(samples.idle)
local merge = summary(samples.merge)
print(('tarantool: %s, vinyl, wal_mode=fsync, one fiber, 1-row transactions (16-byte key, %d-byte '
    .. 'value); backlog of %d dumped runs (%.0f MB, the oldest 1.5x the others: vinyl compacts a '
    .. 'last level of two) built in %.1f s; capacity %.0f appends/s, paced at %.0f/s; '
    .. 'index:compact() read %.0f MB; obsolete runs are deleted at a later checkpoint, outside the '
    .. 'window'):format(_TARANTOOL, W_VALUE, runs, disk_bytes / 1e6, load_s, capacity, rate, in_bytes / 1e6))
local function row(name, p, secs, mbs)
    print(('%-8s %-9s %8d %9.2f %9.2f %9.2f %9.2f %7s %6s'):format('tarantool', name, p.n, p.p50,
        p.p99, p.p999, p.max, secs and ('%.1f'):format(secs) or '', mbs and ('%.0f'):format(mbs) or ''))
end
print(('%-8s %-9s %8s %9s %9s %9s %9s %7s %6s'):format('engine', 'phase', 'appends', 'p50_ms',
    'p99_ms', 'p99.9_ms', 'max_ms', 'secs', 'MB/s'))
row('idle', idle, idle_s)
row('merge', merge, merge_s, in_bytes / 1e6 / merge_s)
print(('during/idle p99.9: tarantool %.1fx'):format(idle.p999 > 0 and merge.p999 / idle.p999 or 0))
if runs < gens then
    print(('tarantool: only %d runs before the compaction (asked for %d)'):format(runs, gens))
end
os.exit(0)
