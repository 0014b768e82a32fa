-- Specs of db:checkpoint(dir) in the LuaJIT module (strata_checkpoint underneath).
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" busted --lua=luajit tests/spec/checkpoint_spec.lua

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

describe("db:checkpoint", function()
	after_each(function()
		for _, d in ipairs(dirs) do
			assert(d:match("^/tmp/"), "refusing to remove " .. d)
			os.execute("rm -rf '" .. d .. "'")
		end
		dirs = {}
	end)

	it("copies what was acknowledged, and nothing written after it", function()
		local db = assert(strata.open { dir = tmpdir(), shards = 2, sync = "none" })
		for shard = 0, 1 do
			for i = 1, 50 do
				assert(db:append(shard, "gen" .. i, "v" .. i))
			end
			assert(db:seal(shard))
			for i = 1, 20 do
				assert(db:append(shard, "wal" .. i, "w" .. i))
			end
		end
		local target = tmpdir() .. "/ckpt"
		assert.is_true(db:checkpoint(target))
		assert.equals("directory", lfs.attributes(target, "mode"))
		assert.is_nil(lfs.attributes(target .. ".partial"))
		assert.is_nil(lfs.attributes(target .. "/LOCK"))
		for shard = 0, 1 do
			assert(db:append(shard, "later", "x"))
			assert(db:append(shard, "gen1", "overwritten"))
			assert(db:merge(shard))
		end
		db:close()

		local ck = assert(strata.open { dir = target, sync = "none" })
		assert.equals(2, ck:shards())
		for shard = 0, 1 do
			assert.equals("v1", ck:get(shard, "gen1"))
			assert.equals("v50", ck:get(shard, "gen50"))
			assert.equals("w20", ck:get(shard, "wal20"))
			assert.is_nil(ck:get(shard, "later"))
			assert(ck:check(shard))
		end
		ck:close()
	end)

	it("returns nil, message, code for a target that exists or has no parent", function()
		local db = assert(strata.open { dir = tmpdir(), sync = "none" })
		assert(db:append(0, "k", "v"))
		local existing = tmpdir()
		local ok, err, code = db:checkpoint(existing)
		assert.is_nil(ok)
		assert.matches("already exists", err)
		assert.equals(strata.EEXIST, code)
		ok, err, code = db:checkpoint(existing .. "/no/such/dir")
		assert.is_nil(ok)
		assert.matches("parent directory", err)
		assert.equals(strata.NOTFOUND, code)
		ok, err = db:checkpoint("")
		assert.is_nil(ok)
		assert.matches("target directory is required", err)
		assert.has_error(function() db:checkpoint() end)
		assert.has_error(function() db:checkpoint({}) end)
		db:close()
		assert.error_matches(function() db:checkpoint(existing .. "/c") end, "closed")
	end)
end)
