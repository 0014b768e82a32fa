-- Specs of the LuaJIT module `require "strata"` (lua/strata.lua over strata.core).
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" busted --lua=luajit tests/spec/module_spec.lua

local strata = require "strata"
local lfs = require "lfs"

local dirs = {}

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

local function count_entries(dir)
	if lfs.attributes(dir, "mode") ~= "directory" then
		return 0
	end
	local n = 0
	for f in lfs.dir(dir) do
		if f ~= "." and f ~= ".." then
			n = n + 1
		end
	end
	return n
end

local function run_objects(dir, shard)
	return count_entries(string.format("%s/objects/shard-%04d/run", dir, shard or 0))
end

local function open(opts)
	opts = opts or {}
	opts.dir = opts.dir or tmpdir()
	opts.sync = opts.sync or "none"
	local db, err = strata.open(opts)
	assert(db, err)
	return db, opts.dir
end

-- Keys and values of a scan; fails (instead of looping on) a scan that repeats keys.
local function collect(iter, max)
	max = max or 10000
	local keys, values = {}, {}
	for k, v in iter do
		if #keys >= max then
			error("scan returned more than " .. max .. " rows")
		end
		keys[#keys + 1] = k
		values[#values + 1] = v
	end
	return keys, values
end

-- Put each row in its own generation so that merges have several inputs.
local function generations(db, shard, n, prefix)
	for i = 1, n do
		assert(db:append(shard, { { key = (prefix or "g") .. i, value = "v" .. i } }))
		assert(db:seal(shard))
	end
end

local STATS_FIELDS = {
	"memtable_rows", "memtable_bytes", "sealed_memtables", "generations", "base_runs", "wal_bytes",
	"wal_segments", "writer_epoch", "manifest_version", "replay_after", "last_seq", "next_generation",
	"appends", "rows_appended", "wal_syncs", "seals", "merges", "merge_conflicts",
	"foreign_manifest_versions", "merged_generations", "merge_bytes_in", "merge_bytes_out",
	"compactions", "max_exclusive_ns", "max_exclusive_wait_ns", "background_io_bytes_per_s",
	"background_io_wait_ns", "background_io_stalls", "background_io_bytes", "blocks_compressed", "blocks_raw",
	"blocks_compress_untried", "compress_saved_bytes", "merge_threads", "merge_blocks_helped",
	"merge_split_parts", "merge_in_flight_bytes", "merge_in_flight_done_bytes",
	"generation_bytes", "base_bytes", "block_cache_hits", "block_cache_misses",
	"block_cache_evictions", "block_cache_bytes", "block_cache_capacity", "resident_filter_bytes",
}

describe("strata module", function()
	after_each(function()
		collectgarbage()
		collectgarbage()
		for _, d in ipairs(dirs) do
			rmrf(d)
		end
		dirs = {}
	end)

	describe("constants", function()
		it("exposes the version and the result codes", function()
			assert.matches("^%d+%.%d+%.%d+$", strata.VERSION)
			assert.equals(0, strata.OK)
			assert.equals(1, strata.NOTFOUND)
			assert.equals(-1, strata.EINVAL)
			assert.equals(-6, strata.ECONFLICT)
			assert.equals(-7, strata.ETOOBIG)
			assert.equals(-8, strata.ERANGE)
			assert.equals(-15, strata.EVERSION)
			assert.equals(4096, strata.MAX_KEY)
			assert.equals(4, strata.DEFAULT_SHARDS)
			assert.equals("shard out of range", strata.strerror(strata.ERANGE))
		end)
	end)

	describe("shard_of", function()
		it("routes a key to XXH3_64bits(key) % shards, as the node's key-routed endpoints", function()
			local db = assert(strata.open { dir = tmpdir(), shards = 16 })
			-- Golden values: XXH3_64bits("user:42") = 0x9fc1e605fa7174aa, "a" = 0xe6c632b61e964e1f.
			assert.equals(10, db:shard_of("user:42"))
			assert.equals(15, db:shard_of("a"))
			assert.equals(5, db:shard_of("k1"))
			db:close()
			local db4 = assert(strata.open { dir = tmpdir(), shards = 4 })
			assert.equals(2, db4:shard_of("user:42"))
			db4:close()
		end)
	end)

	describe("open", function()
		it("opens with a table or a directory string", function()
			local dir = tmpdir()
			-- A new store gets the one default shard count, as strata serve and strata_open.
			local db = assert(strata.open(dir))
			assert.equals(strata.DEFAULT_SHARDS, db:shards())
			db:close()
			local other = tmpdir()
			local db2 = assert(strata.open { dir = other, shards = 3, sync = "interval", sync_interval_ms = 5 })
			assert.equals(3, db2:shards())
			assert.matches("3 shards", tostring(db2))
			db2:close()
			-- The count is the store's: 0 (the default) opens it, another count is refused.
			local db3 = assert(strata.open(other))
			assert.equals(3, db3:shards())
			db3:close()
			local none, err, code = strata.open { dir = other, shards = 2 }
			assert.is_nil(none)
			assert.matches("holds a store of 3 shards, not 2", err)
			assert.equals(strata.EINVAL, code)
		end)

		it("raises on bad options, suggesting the nearest name", function()
			assert.has_error(function() strata.open() end)
			assert.has_error(function() strata.open { shards = 1 } end)
			assert.error_matches(function() strata.open { dri = "/tmp/x" } end, "did you mean 'dir'")
			assert.error_matches(function() strata.open { dir = tmpdir(), shard = 2 } end,
				"did you mean 'shards'")
			assert.error_matches(function() strata.open { dir = tmpdir(), sync = "sometimes" } end,
				"sync must be")
			assert.error_matches(function() strata.open { dir = tmpdir(), shards = 65537 } end, "shards")
			assert.error_matches(function() strata.open { dir = tmpdir(), merge_max_inputs = 1 } end,
				"merge_max_inputs")
			assert.error_matches(function() strata.open { dir = tmpdir(), shards = 1.5 } end, "integer")
			assert.error_matches(function() strata.open { dir = tmpdir(), max_value_bytes = "big" } end,
				"max_value_bytes must be an integer")
			assert.error_matches(function() strata.open { dir = tmpdir(), policy = 3 } end, "policy")
		end)

		it("returns nil, message, code when the directory cannot be made", function()
			local dir = tmpdir()
			local f = assert(io.open(dir .. "/file", "w"))
			f:close()
			local db, err, code = strata.open { dir = dir .. "/file/sub", sync = "none" }
			assert.is_nil(db)
			assert.matches("file/sub", err)
			assert.equals(strata.EIO, code)
		end)
	end)

	describe("append and get", function()
		it("appends a list, a single row and a key/value pair", function()
			local db = open()
			local s1 = db:append(0, { { key = "a", value = "1" }, { key = "b", value = "2" } })
			assert.equals(2, s1)
			assert.equals(3, db:append(0, { key = "c", value = "3" }))
			assert.equals(4, db:append(0, "d", "4"))
			assert.equals(4, db:append(0, {}))
			assert.equals("1", db:get(0, "a"))
			assert.equals("2", db:get(0, "b"))
			assert.equals("3", db:get(0, "c"))
			assert.equals("4", db:get(0, "d"))
			assert.equals("", (function()
				db:append(0, "empty", "")
				return db:get(0, "empty")
			end)())
			db:close()
		end)

		it("takes {key, value} rows as ctx:append and strata.load's batches make them", function()
			local db = open()
			assert.equals(2, db:append(0, { { "a", "1" }, { key = "b", value = "2" } }))
			assert.equals(3, db:append(0, { "c", "3" }))
			assert.same({ "1", "2", "3" }, { db:get(0, "a"), db:get(0, "b"), db:get(0, "c") })
			assert.error_matches(function() db:append(0, { { "d" } }) end, "row 1: value must be a string")
			db:close()
		end)

		it("returns a single nil for an absent key", function()
			local db = open()
			assert.equals(1, select("#", db:get(0, "nope")))
			assert.is_nil(db:get(0, "nope"))
			db:close()
		end)

		it("reads the newest value of a key across memtable, generations and base", function()
			local db = open()
			db:append(0, "k", "old")
			db:seal(0)
			db:merge(0)
			db:append(0, "k", "mid")
			db:seal(0)
			assert.equals("mid", db:get(0, "k"))
			db:append(0, "k", "new")
			assert.equals("new", db:get(0, "k"))
			db:close()
		end)

		it("reads through a block cache of block_cache_bytes, or none with 0", function()
			for _, bytes in ipairs({ 1024 * 1024, 0 }) do
				local db = open({ block_cache_bytes = bytes })
				db:append(0, "k", "v")
				db:seal(0)
				db:merge(0)
				assert.equals("v", db:get(0, "k"))
				assert.equals("v", db:get(0, "k"))
				local st = db:stats(0)
				assert.equals(bytes > 0 and 2 or 0, st.block_cache_hits)
				assert.equals(bytes > 0 and 3 * bytes / 4 or 0, st.block_cache_capacity)
				db:close()
			end
			assert.has_error(function() strata.open({ dir = tmpdir(), block_cache_bytes = -1 }) end)
		end)

		it("deletes a key, a list of keys, and delete rows mixed with puts", function()
			local db = open()
			db:append(0, { { key = "a", value = "1" }, { key = "b", value = "2" }, { key = "c", value = "3" } })
			db:seal(0)
			assert.equals(4, db:delete(0, "a"))
			assert.is_nil(db:get(0, "a"))
			assert.equals(6, db:delete(0, { "b", "absent" }))
			assert.is_nil(db:get(0, "b"))
			assert.equals(8, db:append(0, { { key = "c", delete = true }, { key = "d", value = "4" } }))
			db:merge(0)
			assert.is_nil(db:get(0, "c"))
			local keys = {}
			for k in db:scan(0) do
				keys[#keys + 1] = k
			end
			assert.same({ "d" }, keys)
			local ok, msg, code = db:delete(0, "")
			assert.is_nil(ok)
			assert.equals(strata.EINVAL, code)
			assert.truthy(msg:find("empty key", 1, true))
			assert.has_error(function() db:delete(0, { "x", 1 }) end)
			db:close()
		end)

		it("keeps binary keys and values intact", function()
			local db = open()
			local key, value = "a\0b\255", "\0\1\2\255\0"
			db:append(0, key, value)
			assert.equals(value, db:get(0, key))
			assert.is_nil(db:get(0, "a"))
			db:close()
		end)

		it("stores and returns a 1 MiB value", function()
			local db = open()
			local big = strata.row_value(3, 1, 1024 * 1024, true)
			assert.equals(1024 * 1024, #big)
			assert(db:append(0, { { key = "big", value = big } }))
			assert.equals(big, db:get(0, "big"))
			assert(db:seal(0))
			assert.equals(big, db:get(0, "big"))
			assert.equals(1, db:merge(0))
			assert.equals(big, db:get(0, "big"))
			local keys, values = collect(db:scan(0))
			assert.same({ "big" }, keys)
			assert.equals(big, values[1])
			db:close()
		end)

		it("keeps rows across a reopen", function()
			local db, dir = open { sync = "fsync", shards = 2 }
			db:append(0, strata.rows(50, { seed = 9 }))
			db:seal(0)
			db:append(0, "after-seal", "x")
			db:append(1, "other", "y")
			local seq = db:stats(0).last_seq
			db:close()
			db = assert(strata.open { dir = dir, shards = 2 })
			for i, row in ipairs(strata.rows(50, { seed = 9 })) do
				assert.equals(row.value, db:get(0, row.key), "row " .. i)
			end
			assert.equals("x", db:get(0, "after-seal"))
			assert.equals("y", db:get(1, "other"))
			assert.equals(seq, db:stats(0).last_seq)
			db:close()
		end)
	end)

	describe("operational errors", function()
		it("returns nil, message, code for a key over the limit", function()
			local db = open()
			local res, err, code = db:append(0, string.rep("k", strata.MAX_KEY + 1), "v")
			assert.is_nil(res)
			assert.matches("^key or value too large: ", err)
			assert.equals(strata.ETOOBIG, code)
			assert.truthy(db:append(0, string.rep("k", strata.MAX_KEY), "v"))
			res, err = db:get(0, string.rep("k", strata.MAX_KEY + 1))
			assert.is_nil(res)
			assert.matches("too large", err)
			db:close()
		end)

		it("returns nil, message for a value over max_value_bytes and writes nothing", function()
			local db = open { max_value_bytes = 100 }
			local res, err, code = db:append(0, {
				{ key = "ok", value = "small" },
				{ key = "big", value = string.rep("v", 101) },
			})
			assert.is_nil(res)
			assert.matches("row 1: value of 101 bytes", err)
			assert.equals(strata.ETOOBIG, code)
			assert.is_nil(db:get(0, "ok"))
			assert.equals(0, db:stats(0).rows_appended)
			db:close()
		end)

		it("returns nil, message for a shard out of range in every call", function()
			local db = open { shards = 2 }
			local calls = {
				function() return db:append(2, "k", "v") end,
				function() return db:get(2, "k") end,
				function() return db:scan(2) end,
				function() return db:seal(2) end,
				function() return db:merge(2) end,
				function() return db:prepare(2) end,
				function() return db:compact(2) end,
				function() return db:stats(2) end,
				function() return db:check(2) end,
			}
			for i, call in ipairs(calls) do
				local res, err, code = call()
				assert.is_nil(res, "call " .. i)
				assert.matches("^shard out of range: shard 2 out of range", err)
				assert.equals(strata.ERANGE, code)
			end
			db:close()
		end)

		it("returns nil, message for an empty key", function()
			local db = open()
			local res, err, code = db:append(0, "", "v")
			assert.is_nil(res)
			assert.matches("empty key", err)
			assert.equals(strata.EINVAL, code)
			db:close()
		end)
	end)

	describe("open options", function()
		it("puts the WAL in wal_dir, which the store remembers", function()
			local wal = tmpdir()
			local db, dir = open({ wal_dir = wal, sync = "fsync", group_commit_wait_us = 0,
				max_open_wal_files = 8, max_open_object_files = 4, background_io_auto = true,
				delete_bytes_per_s = 1048576, delete_chunk_bytes = 65536 })
			assert.truthy(db:append(0, "k", "v"))
			db:close()
			assert.is_true(count_entries(wal .. "/shard-0000") > 0)
			assert.equals(0, count_entries(dir .. "/wal"))
			db = open({ dir = dir })
			assert.equals("v", db:get(0, "k"))
			db:close()
			local other = tmpdir()
			local none, err, code = strata.open({ dir = dir, wal_dir = other })
			assert.is_nil(none)
			assert.truthy(err:find(wal, 1, true), err)
			assert.equals(strata.EINVAL, code)
			assert.error_matches(function() strata.open({ dir = dir, wal_dir = 7 }) end,
				"wal_dir must be a directory path")
			assert.error_matches(function() strata.open({ dir = dir, background_io_auto = 1 }) end,
				"background_io_auto must be a boolean")
		end)
	end)

	describe("argument errors raise", function()
		it("for wrong types and unknown options", function()
			local db = open()
			assert.error_matches(function() db:get("0", "k") end, "shard must be an integer")
			assert.error_matches(function() db:get(-1, "k") end, "shard must be an integer in")
			assert.error_matches(function() db:get(0.5, "k") end, "shard must be an integer in")
			assert.has_error(function() db:get(0) end)
			assert.has_error(function() db:get(0, {}) end)
			assert.error_matches(function() db:append(0, { { key = "a" } }) end, "row 1: value must be a string")
			assert.error_matches(function() db:append(0, { { key = 1, value = "v" } }) end,
				"row 1: key must be a string")
			assert.error_matches(function() db:append(0, { { key = "a", value = "b" }, "x" }) end,
				"row 2 must be a {key=, value=} or {key, value} table")
			assert.has_error(function() db:append(0, 42) end)
			assert.has_error(function() db:append(0, "k") end)
			assert.error_matches(function() db:scan(0, "a") end, "table or nil expected")
			assert.error_matches(function() db:scan(0, { prefx = "a" }) end, "did you mean 'prefix'")
			assert.error_matches(function() db:scan(0, { limit = -1 }) end, "limit")
			assert.error_matches(function() db:scan(0, { start = 1 }) end, "start must be a string")
			assert.error_matches(function() db:merge(0, { max_generations = -1 }) end, "max_generations")
			assert.error_matches(function() db:merge(0, { max_gens = 1 }) end, "unknown option 'max_gens'")
			assert.error_matches(function() db:prepare(0, { max_generations = 1.5 }) end, "integer")
			assert.error_matches(function() db:prepare(0, { max_generation = 1 }) end,
				"did you mean 'max_generations'")
			assert.has_error(function() db:commit("plan") end)
			assert.has_error(function() db:commit(nil) end)
			assert.has_error(function() db:abort({}) end)
			assert.has_error(function() db:policy(nil) end)
			assert.has_error(function() db.get({}, 0, "k") end)
			db:close()
		end)

		it("for every call on a closed store, while close stays idempotent", function()
			local db = open()
			assert.is_true(db:close())
			assert.is_true(db:close())
			assert.is_true(db:is_closed())
			assert.matches("closed", tostring(db))
			local calls = {
				function() db:append(0, "k", "v") end,
				function() db:get(0, "k") end,
				function() db:scan(0) end,
				function() db:seal(0) end,
				function() db:merge(0) end,
				function() db:prepare(0) end,
				function() db:stats(0) end,
				function() db:shards() end,
				function() db:policy("return {}") end,
			}
			for _, call in ipairs(calls) do
				assert.error_matches(call, "the store is closed")
			end
		end)
	end)

	describe("scan", function()
		local KEYS = { "a", "ab", "abc", "a\255", "a\255\255", "b", "ba", "c" }
		local db

		before_each(function()
			db = open()
			local rows = {}
			for i, k in ipairs(KEYS) do
				rows[i] = { key = k, value = "v:" .. k }
			end
			-- Spread the rows over base, a generation and the memtable.
			db:append(0, { rows[1], rows[5], rows[8] })
			db:seal(0)
			db:merge(0)
			db:append(0, { rows[2], rows[6] })
			db:seal(0)
			db:append(0, { rows[3], rows[4], rows[7] })
		end)

		after_each(function()
			db:close()
		end)

		it("visits every row in key order with its value", function()
			local keys, values = collect(db:scan(0))
			assert.same(KEYS, keys)
			for i, k in ipairs(keys) do
				assert.equals("v:" .. k, values[i])
			end
		end)

		it("honours prefix, also with a trailing \\255", function()
			assert.same({ "a", "ab", "abc", "a\255", "a\255\255" }, collect(db:scan(0, { prefix = "a" })))
			assert.same({ "ab", "abc" }, collect(db:scan(0, { prefix = "ab" })))
			assert.same({ "a\255", "a\255\255" }, collect(db:scan(0, { prefix = "a\255" })))
			assert.same({}, collect(db:scan(0, { prefix = "zz" })))
			assert.same(KEYS, collect(db:scan(0, { prefix = "" })))
		end)

		it("treats start as inclusive and stop as exclusive", function()
			assert.same({ "ab", "abc", "a\255", "a\255\255" }, collect(db:scan(0, { start = "ab", stop = "b" })))
			assert.same({ "b", "ba", "c" }, collect(db:scan(0, { start = "b" })))
			assert.same({ "a", "ab" }, collect(db:scan(0, { stop = "abc" })))
			assert.same({}, collect(db:scan(0, { start = "b", stop = "b" })))
			assert.same({}, collect(db:scan(0, { start = "c", stop = "a" })))
			assert.same({}, collect(db:scan(0, { stop = "" })))
		end)

		it("intersects prefix with start and stop", function()
			assert.same({ "abc", "a\255" }, collect(db:scan(0, { prefix = "a", start = "abc", stop = "a\255\255" })))
			assert.same({ "a", "ab", "abc", "a\255", "a\255\255" }, collect(db:scan(0, { prefix = "a", start = "" })))
			assert.same({}, collect(db:scan(0, { prefix = "b", stop = "ab" })))
			assert.same({ "b", "ba" }, collect(db:scan(0, { prefix = "b", start = "a" })))
			assert.same({ "ab", "abc" }, collect(db:scan(0, { prefix = "ab", start = "a", stop = "c" })))
		end)

		it("takes end as an alias of stop, as ctx:scan does, but not both", function()
			assert.same({ "ab", "abc", "a\255", "a\255\255" }, collect(db:scan(0, { start = "ab", ["end"] = "b" })))
			assert.error_matches(function() db:scan(0, { stop = "b", ["end"] = "b" }) end, "not both")
		end)

		it("collects the same rows as {key=, value=} with scan_rows", function()
			local rows = assert(db:scan_rows(0, { prefix = "a", limit = 3 }))
			assert.same({ { key = "a", value = "v:a" }, { key = "ab", value = "v:ab" },
				{ key = "abc", value = "v:abc" } }, rows)
			assert.same({}, db:scan_rows(0, { prefix = "zz" }))
			local none, err, code = db:scan_rows(7)
			assert.is_nil(none)
			assert.is_string(err)
			assert.is_number(code)
		end)

		it("stops after limit rows", function()
			assert.same({ "a", "ab", "abc" }, collect(db:scan(0, { limit = 3 })))
			assert.same({}, collect(db:scan(0, { limit = 0 })))
			assert.same({ "b", "ba" }, collect(db:scan(0, { prefix = "b", limit = 5 })))
			assert.same({ "ab" }, collect(db:scan(0, { prefix = "a", start = "aa", limit = 1 })))
		end)

		it("gives the same rows whatever the batch size", function()
			for batch = 1, 9 do
				assert.same(KEYS, collect(db:scan(0, { batch = batch })), "batch " .. batch)
				assert.same({ "ab", "abc", "a\255" },
					collect(db:scan(0, { start = "ab", limit = 3, batch = batch })), "batch " .. batch)
			end
		end)

		it("resumes after a key of the maximum length", function()
			local long = string.rep("m", strata.MAX_KEY)
			db:append(0, { { key = long, value = "L" }, { key = long:sub(1, -2) .. "n", value = "N" } })
			local keys = collect(db:scan(0, { start = "m", batch = 1 }))
			assert.same({ long, long:sub(1, -2) .. "n" }, keys)
		end)

		it("returns rows larger than a batch's byte budget across batches", function()
			local d2 = open()
			local rows = strata.rows(6, { seed = 4, value_bytes = 1024 * 1024 })
			d2:append(0, rows)
			local keys, values = collect(d2:scan(0))
			assert.equals(6, #keys)
			for i, row in ipairs(rows) do
				assert.equals(row.key, keys[i])
				assert.equals(row.value, values[i])
			end
			d2:close()
		end)

		it("never repeats or reorders keys while rows are appended during the loop", function()
			local prev, n, added = nil, 0, 0
			for k in db:scan(0, { batch = 2 }) do
				if prev then
					assert.is_true(prev < k, "order after " .. prev)
				end
				prev, n = k, n + 1
				assert.is_true(n <= #KEYS + 40, "the scan does not end")
				if added < 20 then
					added = added + 1
					-- before, at and after the cursor
					db:append(0, { { key = "a" .. added, value = "x" }, { key = k .. "+", value = "x" } })
				end
			end
			assert.is_true(n >= #KEYS)
		end)

		it("raises when the store is closed between two batches", function()
			local iter = db:scan(0, { batch = 2 })
			assert.equals("a", iter())
			assert.equals("ab", iter())
			db:close()
			assert.error_matches(function() iter() end, "the store is closed")
		end)

		it("is usable as a generic for over thousands of rows", function()
			local d2 = open()
			local rows = strata.rows(3000, { seed = 11, value_bytes = 8 })
			d2:append(0, rows)
			d2:seal(0)
			local n = 0
			for k, v in d2:scan(0, { batch = 1000 }) do
				n = n + 1
				assert.equals(rows[n].key, k)
				assert.equals(rows[n].value, v)
			end
			assert.equals(3000, n)
			d2:close()
		end)
	end)

	describe("seal, merge and compaction", function()
		it("seals into generations and merges them", function()
			local db = open()
			assert.is_true(db:seal(0)) -- empty: a no-op
			assert.equals(0, db:stats(0).generations)
			generations(db, 0, 3)
			assert.equals(3, db:stats(0).generations)
			assert.equals(1, db:merge(0, { max_generations = 1 }))
			local st = db:stats(0)
			assert.equals(2, st.generations)
			assert.equals(1, st.base_runs)
			assert.equals(2, db:merge(0))
			assert.equals(0, db:merge(0))
			st = db:stats(0)
			assert.equals(0, st.generations)
			assert.equals(2, st.base_runs)
			assert.equals(3, st.merged_generations)
			for i = 1, 3 do
				assert.equals("v" .. i, db:get(0, "g" .. i))
			end
			assert.equals(2, db:compact(0))
			assert.equals(1, db:stats(0).base_runs)
			assert.equals("v2", db:get(0, "g2"))
			assert.is_true(db:check(0))
			db:close()
		end)
	end)

	describe("plans", function()
		it("prepare then commit publishes the run", function()
			local db, dir = open()
			generations(db, 0, 3)
			local plan = assert(db:prepare(0, { max_generations = 2 }))
			assert.equals(2, plan:generations())
			assert.equals(0, plan:shard())
			assert.equals("merge", plan:kind())
			assert.is_false(plan:consumed())
			assert.equals(1, run_objects(dir))
			assert.equals(0, db:stats(0).base_runs)
			assert.equals(2, db:commit(plan))
			assert.is_true(plan:consumed())
			local st = db:stats(0)
			assert.equals(1, st.base_runs)
			assert.equals(1, st.generations)
			assert.equals(1, st.merges)
			assert.equals("v1", db:get(0, "g1"))
			db:close()
		end)

		it("abort deletes the run and leaves the generations", function()
			local db, dir = open()
			generations(db, 0, 2)
			local plan = assert(db:prepare(0))
			assert.equals(1, run_objects(dir))
			assert.is_true(db:abort(plan))
			assert.equals(0, run_objects(dir))
			local st = db:stats(0)
			assert.equals(0, st.base_runs)
			assert.equals(2, st.generations)
			db:close()
		end)

		it("refuses a plan used twice", function()
			local db = open()
			generations(db, 0, 2)
			local plan = assert(db:prepare(0))
			assert.equals(2, db:commit(plan))
			local res, err, code = db:commit(plan)
			assert.is_nil(res)
			assert.equals("plan already consumed", err)
			assert.equals(strata.EINVAL, code)
			res, err = db:abort(plan)
			assert.is_nil(res)
			assert.equals("plan already consumed", err)

			generations(db, 0, 1, "h")
			local p2 = assert(db:prepare(0))
			assert.is_true(db:abort(p2))
			res, err = db:commit(p2)
			assert.is_nil(res)
			assert.equals("plan already consumed", err)
			assert.equals(1, db:stats(0).base_runs)
			assert.equals(1, db:stats(0).generations)
			db:close()
		end)

		it("refuses a plan of another store and leaves it usable", function()
			local db1 = open()
			local db2 = open()
			generations(db1, 0, 2)
			local plan = assert(db1:prepare(0))
			local res, err, code = db2:commit(plan)
			assert.is_nil(res)
			assert.equals("plan belongs to another store", err)
			assert.equals(strata.EINVAL, code)
			res, err = db2:abort(plan)
			assert.is_nil(res)
			assert.equals("plan belongs to another store", err)
			assert.is_false(plan:consumed())
			assert.equals(2, db1:commit(plan))
			assert.equals(0, db2:stats(0).base_runs)
			db1:close()
			db2:close()
		end)

		it("refuses a second plan of a shard as busy, before writing anything", function()
			local db, dir = open()
			generations(db, 0, 2)
			local p1 = assert(db:prepare(0))
			local p2, err, code = db:prepare(0)
			assert.is_nil(p2)
			assert.matches("^resource busy: .*already in flight", err)
			assert.equals(strata.EBUSY, code)
			assert.is_nil((db:merge(0)))
			assert.equals(1, run_objects(dir))
			assert.equals(2, db:commit(p1))
			generations(db, 0, 1)
			assert.equals(1, db:merge(0))
			assert.equals(2, run_objects(dir))
			assert.equals(0, db:stats(0).merge_conflicts)
			db:close()
		end)

		it("binds the engine's cap: merge(0) folds at most merge_max_inputs", function()
			local db = open { merge_max_inputs = 2 }
			generations(db, 0, 5)
			assert.equals(2, db:merge(0))
			assert.equals(2, db:merge(0, { max_generations = 100 }))
			assert.equals(1, db:merge(0))
			assert.equals(3, db:stats(0).base_runs)
			assert.equals(2, db:compact(0))
			db:close()
		end)

		it("aborts a plan that is garbage collected uncommitted", function()
			local db, dir = open()
			generations(db, 0, 2)
			local runs_before = db:stats(0).base_runs
			local objects_before = run_objects(dir)
			do
				local plan = assert(db:prepare(0))
				assert.is_false(plan:consumed())
				assert.equals(objects_before + 1, run_objects(dir))
				plan = nil -- luacheck: ignore
			end
			collectgarbage()
			collectgarbage()
			assert.equals(objects_before, run_objects(dir))
			assert.equals(runs_before, db:stats(0).base_runs)
			assert.equals(2, db:stats(0).generations)
			assert.equals(2, db:merge(0))
			db:close()
		end)

		it("is aborted by close", function()
			local db, dir = open()
			generations(db, 0, 2)
			local plan = assert(db:prepare(0))
			assert.equals(1, run_objects(dir))
			db:close()
			assert.is_true(plan:consumed())
			assert.equals(0, run_objects(dir))
			assert.error_matches(function() db:commit(plan) end, "the store is closed")
			db = assert(strata.open { dir = dir, sync = "none" })
			assert.equals(0, db:stats(0).base_runs)
			assert.equals(2, db:stats(0).generations)
			db:close()
		end)

		it("prepares and commits a base compaction", function()
			local db = open()
			generations(db, 0, 2)
			db:merge(0, { max_generations = 1 })
			db:merge(0)
			local plan = assert(db:prepare_compact(0, { max_runs = 2 }))
			assert.equals("compact", plan:kind())
			assert.equals(2, plan:inputs())
			assert.equals(2, db:commit(plan))
			assert.equals(1, db:stats(0).base_runs)
			assert.equals(1, db:stats(0).compactions)
			db:close()
		end)
	end)

	describe("stats", function()
		it("has every strata_stats field as a number", function()
			local db = open()
			db:append(0, strata.rows(10))
			local st = db:stats(0)
			local n = 0
			for _ in pairs(st) do
				n = n + 1
			end
			assert.equals(#STATS_FIELDS, n)
			for _, f in ipairs(STATS_FIELDS) do
				assert.is_number(st[f], f)
			end
			assert.same(STATS_FIELDS, strata.STATS_FIELDS)
			assert.equals(10, st.memtable_rows)
			assert.equals(10, st.rows_appended)
			assert.equals(1, st.appends)
			assert.equals(10, st.last_seq)
			db:close()
		end)

		it("formats as aligned text with readable sizes", function()
			local db = open()
			db:append(0, strata.rows(100, { value_bytes = 100 }))
			local text = strata.format_stats(db:stats(0), "shard 0")
			local lines = {}
			for line in text:gmatch("[^\n]+") do
				lines[#lines + 1] = line
			end
			assert.equals("shard 0", lines[1])
			assert.equals(#STATS_FIELDS + 1, #lines)
			local column
			for i, f in ipairs(STATS_FIELDS) do
				local line = lines[i + 1]
				assert.equals("  " .. f, line:sub(1, #f + 2), "order at " .. f)
				local _, value_end = line:find("^%s+%S+%s+%d+")
				column = column or value_end
				assert.equals(column, value_end, "alignment of " .. f)
			end
			assert.matches("memtable_bytes%s+%d+  %(%d+%.%d KiB%)", text)
			assert.equals("0 B", require("strata.format").bytes(0))
			assert.equals("1.5 MiB", require("strata.format").bytes(1.5 * 1024 * 1024))
			assert.error_matches(function() strata.format_stats(nil) end, "table expected")
			db:close()
		end)
	end)

	describe("rows", function()
		it("are reproducible from their seed and index", function()
			local a = strata.rows(20, { seed = 5, value_bytes = 16 })
			local b = strata.rows(20, { seed = 5, value_bytes = 16 })
			local c = strata.rows(20, { seed = 6, value_bytes = 16 })
			assert.same(a, b)
			assert.are_not.same(a[1].value, c[1].value)
			local tail = strata.rows(5, { seed = 5, value_bytes = 16, first = 16 })
			assert.same(a[16], tail[1])
			assert.equals(a[7].value, strata.row_value(5, 7, 16))
			for i = 2, #a do
				assert.is_true(a[i - 1].key < a[i].key)
				assert.equals(16, #a[i].value)
			end
			assert.equals("user:0000000003", strata.rows(3, { prefix = "user:" })[3].key)
			local bin = strata.rows(1, { value_bytes = 4096, binary = true })[1].value
			assert.truthy(bin:find("[\128-\255]"))
			assert.has_error(function() strata.rows(-1) end)
			assert.has_error(function() strata.rows(1, { sed = 1 }) end)
			assert.has_error(function() strata.rows(1, { value_bytes = "x" }) end)
		end)
	end)

	describe("policy", function()
		it("installs a policy or says why it cannot", function()
			local db = open { policy = strata.HAVE_POLICY or nil }
			if strata.HAVE_POLICY then
				assert.is_true(db:policy("return { merge_max_generations = 3 }"))
				local res, err = db:policy("return { merge_max_generatoins = 3 }")
				assert.is_nil(res)
				assert.matches("merge_max_generations", err)
			else
				local res, err, code = db:policy("return {}")
				assert.is_nil(res)
				assert.matches("not supported", err)
				assert.equals(strata.EINVAL, code)
			end
			db:close()
		end)
	end)

	describe("loading from another Lua", function()
		-- Runs `interp -e 'prelude; package.path=...; package.cpath=...; require "strata"'` with
		-- this process's paths; returns its exit status and output.
		local function try_require(interp, prelude, cpath)
			local code = string.format('%s package.path = %q package.cpath = %q require "strata"',
				prelude or "", package.path, cpath or package.cpath)
			local p = assert(io.popen(interp .. " -e '" .. code:gsub("'", "'\\''") .. "' 2>&1; echo \"rc=$?\""))
			local out = p:read("*a")
			p:close()
			return tonumber(out:match("rc=(%d+)%s*$")), out
		end
		local function installed(cmd)
			local p = assert(io.popen("command -v " .. cmd .. " 2>/dev/null"))
			local path = p:read("*l")
			p:close()
			return path ~= nil and path ~= ""
		end

		it("says that strata needs LuaJIT 2.1 when the Lua is PUC Lua 5.1", function()
			-- The real interpreter when it is installed (nothing is installed here), else
			-- LuaJIT with its jit table gone, which is what the check looks at.
			local interp, prelude = "lua5.1", ""
			if not installed("lua5.1") then
				print("# lua5.1 is not installed: simulated with luajit and jit = nil")
				interp, prelude = "luajit", "jit = nil"
			end
			local rc, out = try_require(interp, prelude)
			assert.equals(1, rc)
			assert.truthy(out:find("strata needs LuaJIT 2.1 (OpenResty's luajit2, Debian package luajit2)", 1, true),
				out)
			assert.truthy(out:find("this is Lua 5.1 (PUC)", 1, true), out)
			assert.falsy(out:find("undefined symbol", 1, true), out)
		end)

		it("re-raises a C half that does not load with the loader's message and a hint", function()
			local rc, out = try_require("luajit", "", "/nonexistent/?.so;")
			assert.equals(1, rc)
			assert.truthy(out:find("module 'strata.core' not found", 1, true), out)
			assert.truthy(out:find("the C half of strata, did not load", 1, true), out)
			assert.truthy(out:find("package.cpath is /nonexistent/?.so;", 1, true), out)
		end)

		it("loads from LuaJIT 2.1", function()
			local rc, out = try_require("luajit", "")
			assert.equals(0, rc, out)
		end)
	end)

	describe("rockspec", function()
		it("installs every Lua module and builds the C module with the Makefile", function()
			local root = os.getenv("STRATA_ROOT") or "."
			local f = assert(io.open(root .. "/lua/strata-scm-1.rockspec"))
			local spec = f:read("*a")
			f:close()
			local missing = {}
			local function want(path)
				if not spec:find('"' .. path .. '"', 1, true) then
					missing[#missing + 1] = path
				end
			end
			want("lua/strata.lua")
			for name in lfs.dir(root .. "/lua/strata") do
				if name:match("%.lua$") then
					want("lua/strata/" .. name)
				end
			end
			want("build/rock/core.so")
			assert.same({}, missing)
			assert.truthy(spec:find("make BUILD=build build/strata.so && mkdir -p build/rock && " ..
				"cp build/strata.so build/rock/core.so", 1, true))
			-- The Makefile builds the C module from every C file of the engine library.
			local mk = assert(io.open(root .. "/Makefile")):read("*a")
			for _, sub in ipairs({ "lib", "objstore", "core", "policy", "host" }) do
				assert.truthy(mk:find("node/" .. sub .. "/*.c", 1, true), sub)
			end
		end)
	end)

	describe("garbage collection", function()
		it("closes a store that is no longer referenced", function()
			local dir = tmpdir()
			do
				local db = assert(strata.open { dir = dir, sync = "fsync" })
				db:append(0, "k", "v")
				db = nil -- luacheck: ignore
			end
			collectgarbage()
			collectgarbage()
			local db = assert(strata.open { dir = dir, sync = "none" })
			assert.equals("v", db:get(0, "k"))
			db:close()
		end)
	end)
end)
