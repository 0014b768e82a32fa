-- inline_spec.lua — the Lua side of the simulation embedding: strata.open{clock =
-- "manual", threads = 0, seed = ...}, db:tick, db:step, db:trace_hash, and the shipped
-- lua/examples/game_loop.lua.
local strata = require "strata"

local function tmpdir()
	local d = os.tmpname()
	os.remove(d)
	assert(os.execute("mkdir -p '" .. d .. "'"))
	return d
end

local function run(dir, seed)
	local policy = dir .. "/p.lua"
	local f = assert(io.open(policy, "w"))
	f:write("return { flush_interval_s = 0.05, sweep_interval_s = 0, merge_after_generations = 3,"
		.. " memtable_max_bytes = 32768 }")
	f:close()
	local db = assert(strata.open { dir = dir .. "/s", shards = 1, sync = "none", policy = policy,
		clock = "manual", threads = 0, seed = seed, block_bytes = 4096 })
	local rng = seed
	for frame = 1, 40 do
		assert(db:tick(frame * 16666667))
		local rows = {}
		for r = 1, 30 do
			rng = (rng * 1103515245 + 12345) % 2147483648
			rows[r] = { key = string.format("k%04d", rng % 500), value = string.rep("v", 100) .. frame }
		end
		assert(db:append(0, rows))
		local info = assert(db:step(300))
		assert(info.spent_us <= 300 + info.max_chunk_us)
	end
	local hash, events = db:trace_hash()
	local st = db:stats(0)
	db:close()
	return hash, events, st
end

describe("inline mode with a manual clock", function()
	it("gives the same trace hash for the same seed, another for another", function()
		local d1, d2, d3 = tmpdir(), tmpdir(), tmpdir()
		local h1, e1, st = run(d1, 5)
		local h2, e2 = run(d2, 5)
		local h3 = run(d3, 6)
		assert.are.equal(h1, h2)
		assert.are.equal(e1, e2)
		assert.are_not.equal(h1, h3)
		assert.is_true(st.seals > 0 and st.merges > 0, "background work ran in the steps")
		assert.are.equal(16, #h1)
		for _, d in ipairs { d1, d2, d3 } do os.execute("rm -rf '" .. d .. "'") end
	end)

	it("refuses a backwards tick and bad options with clear messages", function()
		local d = tmpdir()
		local db = assert(strata.open { dir = d, clock = "manual", threads = 0, sync = "none" })
		assert(db:tick(1000))
		local ok, err = db:tick(10)
		assert.is_nil(ok)
		assert.matches("backwards", err)
		local info = assert(db:step(100))
		assert.are.equal(0, info.chunks)
		db:close()
		local okc, errc = pcall(strata.open, { dir = d, clock = "sundial" })
		assert.is_false(okc)
		assert.matches('clock must be "real" or "manual"', errc)
		local okt, errt = pcall(strata.open, { dir = d, threads = -2 })
		assert.is_false(okt)
		assert.matches("threads", errt)
		local rdb = assert(strata.open { dir = d, threads = 1, sync = "none" })
		local oks, errs = rdb:step(100)
		assert.is_nil(oks)
		assert.matches("threads", errs)
		rdb:close()
		os.execute("rm -rf '" .. d .. "'")
	end)

	it("runs the shipped game loop with merges and reports frame times", function()
		local root = os.getenv("STRATA_ROOT") or "."
		local p = io.popen("luajit '" .. root .. "/lua/examples/game_loop.lua' --frames 90 --backlog 6 --no-sleep 2>&1")
		local out = p:read("*a")
		p:close()
		assert.matches("game_loop: 90 frames", out)
		assert.matches("frame work%s+p50 [%d.]+ ms", out)
		local merges = tonumber(out:match("(%d+) merges"))
		assert.is_true(merges ~= nil and merges >= 1, out)
	end)
end)
