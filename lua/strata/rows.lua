--- strata.rows: seeded, reproducible test rows (pure Lua, LuaJIT `bit`).
-- Row i of seed s is the same whatever n or first is, so a test can check a value
-- read back with rows.value(s, i, bytes) without keeping what it wrote.
-- local rows = require "strata.rows"
-- db:append(0, rows.rows(1000, {seed = 7, prefix = "user:", value_bytes = 100}))

local bit = require "bit"

local band, bxor = bit.band, bit.bxor
local lshift, rshift, tobit = bit.lshift, bit.rshift, bit.tobit
local char, fmt, concat = string.char, string.format, table.concat
local floor = math.floor

local M = {}

--- Largest value rows() builds, in bytes (the engine's default value limit).
M.MAX_VALUE_BYTES = 64 * 1024 * 1024
--- Most rows one call builds.
M.MAX_ROWS = 16 * 1024 * 1024
--- Largest row index (exact in a double).
M.MAX_INDEX = 2 ^ 53

local PRINTABLE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
local PRINTABLE_BYTES = { PRINTABLE:byte(1, -1) }

--- a * b mod 2^32 (a double cannot hold the full 64-bit product).
local function mul32(a, b)
	local alo, ahi = band(a, 0xffff), rshift(a, 16)
	local blo, bhi = band(b, 0xffff), rshift(b, 16)
	local mid = band(ahi * blo + alo * bhi, 0xffff)
	return tobit(alo * blo + lshift(mid, 16))
end

--- murmur3's 32-bit finaliser: spreads every input bit over the output.
local function mix32(x)
	x = bxor(x, rshift(x, 16))
	x = mul32(x, 0x85ebca6b)
	x = bxor(x, rshift(x, 13))
	x = mul32(x, 0xc2b2ae35)
	return bxor(x, rshift(x, 16))
end

--- The first generator state of a row (never 0, which xorshift cannot leave).
local function row_state(seed, index)
	local x = mix32(bxor(mix32(tobit(seed % 4294967296)), tobit(index % 4294967296)))
	x = mix32(bxor(x, tobit(floor(index / 4294967296))))
	if x == 0 then
		x = 0x6d2b79f5
	end
	return x
end

--- xorshift32 step.
local function step(x)
	x = bxor(x, lshift(x, 13))
	x = bxor(x, rshift(x, 17))
	return bxor(x, lshift(x, 5))
end

local function check_int(v, what, lo, hi, level)
	if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
		error(fmt("%s must be an integer in [%d, %d], got %s", what, lo, hi, tostring(v)), level + 1)
	end
	return v
end

--- The value of row index under seed: nbytes bytes, printable unless binary.
function M.value(seed, index, nbytes, binary)
	check_int(seed, "seed", 0, 2 ^ 53, 2)
	check_int(index, "index", 0, M.MAX_INDEX, 2)
	check_int(nbytes, "value_bytes", 0, M.MAX_VALUE_BYTES, 2)
	local x = row_state(seed, index)
	local chunks, buf, n = {}, {}, 0
	for _ = 1, nbytes do
		x = step(x)
		n = n + 1
		if binary then
			buf[n] = band(rshift(x, 8), 0xff)
		else
			buf[n] = PRINTABLE_BYTES[band(rshift(x, 8), 63) + 1]
		end
		if n == 4096 then
			chunks[#chunks + 1] = char(unpack(buf, 1, n))
			n = 0
		end
	end
	if n > 0 then
		chunks[#chunks + 1] = char(unpack(buf, 1, n))
	end
	return concat(chunks)
end

--- The key of row index: prefix .. index zero-padded to width digits (so keys sort
-- by index), or with random, prefix .. 16 hex digits drawn from (seed, index).
function M.key(prefix, index, width, random, seed)
	if random then
		local x = row_state((seed or 0) + 0x51ed, index)
		local y = step(x)
		return fmt("%s%08x%08x", prefix, x % 4294967296, y % 4294967296)
	end
	return fmt("%s%0" .. width .. ".0f", prefix, index)
end

local ROW_OPTIONS = {
	seed = "number", prefix = "string", first = "number", key_width = "number",
	value_bytes = "number", binary = "boolean", random_keys = "boolean",
}

--- n rows {key=, value=} of seed opts.seed (default 1), indexes opts.first (default 1)
-- to first + n - 1. opts: prefix ("k"), key_width (digits, default 10),
-- value_bytes (default 32), binary (values use every byte; default printable),
-- random_keys (keys from the generator instead of the index; they may repeat).
function M.rows(n, opts)
	check_int(n, "bad argument #1 to 'rows': n", 0, M.MAX_ROWS, 2)
	if opts ~= nil and type(opts) ~= "table" then
		error("bad argument #2 to 'rows' (table or nil expected, got " .. type(opts) .. ")", 2)
	end
	opts = opts or {}
	for k, v in pairs(opts) do
		if ROW_OPTIONS[k] == nil then
			error(fmt("bad argument #2 to 'rows' (unknown option '%s')", tostring(k)), 2)
		elseif type(v) ~= ROW_OPTIONS[k] then
			error(fmt("bad argument #2 to 'rows' (%s must be a %s, got %s)", k, ROW_OPTIONS[k], type(v)), 2)
		end
	end
	local seed = check_int(opts.seed or 1, "seed", 0, 2 ^ 53, 2)
	local first = check_int(opts.first or 1, "first", 0, M.MAX_INDEX - n, 2)
	local width = check_int(opts.key_width or 10, "key_width", 1, 16, 2)
	local vbytes = check_int(opts.value_bytes or 32, "value_bytes", 0, M.MAX_VALUE_BYTES, 2)
	local prefix = opts.prefix or "k"
	local out = {}
	for i = 1, n do
		local index = first + i - 1
		out[i] = {
			key = M.key(prefix, index, width, opts.random_keys, seed),
			value = M.value(seed, index, vbytes, opts.binary),
		}
	end
	return out
end

return M
