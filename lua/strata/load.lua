--- strata.load: the pure-Lua half of `strata load` scripts (LuaJIT `bit`, no C half).
-- Seeded generators of keys (sequential, uniform, zipfian) and values (fixed or
-- distributed sizes), a row-batch helper, and the wrk compatibility shim the
-- runner uses for wrk-style scripts.
--
--   local load = require "strata.load"
--   local keys = load.keys.zipfian{n = 100000, seed = 7, prefix = "user:"}
--   local values = load.values{size = {min = 64, max = 4096}, seed = 7}
--   local rows = load.batch(keys, values, 10)      --> {{key, value}, ... 10 rows}
--
-- Every generator draws from its own xoshiro128** state: the same seed gives the
-- same sequence on every run and every machine.

local bit = require "bit"

local band, bor, bxor = bit.band, bit.bor, bit.bxor
local lshift, rshift, tobit = bit.lshift, bit.rshift, bit.tobit
local fmt, char, concat = string.format, string.char, table.concat
local floor, log, sqrt, cos, exp, pi = math.floor, math.log, math.sqrt, math.cos, math.exp, math.pi
local unpack = unpack or table.unpack -- luacheck: ignore 143

local M = {}

--- Base seed of the run (`strata load --seed N`, default 1), set by the runner before
-- the script loads; scripts may derive their generators' seeds from it.
M.seed = 1
--- Largest value a generator builds, in bytes (the engine's default value limit).
M.MAX_VALUE_BYTES = 64 * 1024 * 1024
--- Largest key space of uniform and zipfian generators.
M.MAX_KEYS = 2 ^ 31
--- Terms of the zipfian normaliser summed exactly; the rest is integrated.
M.ZETA_EXACT_TERMS = 10000000

local function argerr(fname, what, got, level)
	error(fmt("%s: %s, got %s", fname, what, tostring(got)), level + 1)
end

local function check_int(fname, name, v, lo, hi, level)
	if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
		argerr(fname, fmt("%s must be an integer in [%.0f, %.0f]", name, lo, hi), v, level + 1)
	end
	return v
end

local function check_opts(fname, opts, known, level)
	if opts == nil then
		return {}
	end
	if type(opts) ~= "table" then
		argerr(fname, "options must be a table", type(opts), level + 1)
	end
	for k in pairs(opts) do
		if not known[k] then
			local names = {}
			for n in pairs(known) do
				names[#names + 1] = n
			end
			table.sort(names)
			error(fmt("%s: unknown option %q (known: %s)", fname, tostring(k), concat(names, ", ")), level + 1)
		end
	end
	return opts
end

-- ---------------------------------------------------------------------------
-- Random numbers
-- ---------------------------------------------------------------------------

--- a * b mod 2^32 (a double cannot hold the full 64-bit product).
local function mul32(a, b)
	local alo, ahi = band(a, 0xffff), rshift(a, 16)
	local blo, bhi = band(b, 0xffff), rshift(b, 16)
	local mid = band(ahi * blo + alo * bhi, 0xffff)
	return tobit(alo * blo + lshift(mid, 16))
end

--- murmur3's 32-bit finaliser.
local function mix32(x)
	x = bxor(x, rshift(x, 16))
	x = mul32(x, 0x85ebca6b)
	x = bxor(x, rshift(x, 13))
	x = mul32(x, 0xc2b2ae35)
	return bxor(x, rshift(x, 16))
end
M.mix32 = mix32

local function rotl(x, k)
	return bor(lshift(x, k), rshift(x, 32 - k))
end

local Rng = {}
Rng.__index = Rng

--- A xoshiro128** generator seeded from any integer 0..2^53.
function M.rng(seed)
	check_int("load.rng", "seed", seed or 0, 0, 2 ^ 53, 2)
	seed = seed or 0
	local lo, hi = tobit(seed % 4294967296), tobit(floor(seed / 4294967296))
	local s0 = mix32(bxor(lo, 0x9e3779b9))
	local s1 = mix32(bxor(hi, s0, 0x7f4a7c15))
	local s2 = mix32(bxor(s1, 0x85ebca6b))
	local s3 = mix32(bxor(s2, lo, 0xc2b2ae35))
	if bor(s0, s1, s2, s3) == 0 then
		s0 = 1
	end
	return setmetatable({ s0, s1, s2, s3 }, Rng)
end

--- Next 32 random bits as an integer 0..2^32-1.
function Rng:u32()
	local s0, s1, s2, s3 = self[1], self[2], self[3], self[4]
	local r = tobit(rotl(tobit(s1 * 5), 7) * 9)
	local t = lshift(s1, 9)
	s2 = bxor(s2, s0)
	s3 = bxor(s3, s1)
	s1 = bxor(s1, s2)
	s0 = bxor(s0, s3)
	s2 = bxor(s2, t)
	s3 = rotl(s3, 11)
	self[1], self[2], self[3], self[4] = s0, s1, s2, s3
	return r % 4294967296
end

--- A double uniform in [0, 1) with 53 random bits.
function Rng:random()
	local a = floor(self:u32() / 32) -- 27 bits
	local b = floor(self:u32() / 64) -- 26 bits
	return (a * 67108864 + b) / 9007199254740992
end

--- An integer uniform in [lo, hi].
function Rng:range(lo, hi)
	return lo + floor(self:random() * (hi - lo + 1))
end

--- A normal deviate (Box-Muller).
function Rng:normal(mean, stddev)
	local u = self:random()
	while u <= 0 do
		u = self:random()
	end
	return (mean or 0) + (stddev or 1) * sqrt(-2 * log(u)) * cos(2 * pi * self:random())
end

--- An exponential deviate of the given mean.
function Rng:exponential(mean)
	local u = self:random()
	while u <= 0 do
		u = self:random()
	end
	return -(mean or 1) * log(u)
end

-- ---------------------------------------------------------------------------
-- Keys
-- ---------------------------------------------------------------------------

local Keys = {}
Keys.__index = Keys

--- The key of index i: prefix .. i zero-padded to width digits (keys sort by index).
function Keys:key(i)
	return fmt(self.pattern, i)
end

--- The next key, alone (so that `ctx:get(shard, keys:next())` passes one argument).
-- For the key and its index: `local i = keys:next_index(); local key = keys:key(i)`.
function Keys:next()
	return fmt(self.pattern, self:next_index())
end

local KEY_OPTS = {
	prefix = true, width = true, seed = true, n = true, start = true, theta = true, scramble = true, step = true,
}

local function new_keys(fname, opts, level)
	opts = check_opts(fname, opts, KEY_OPTS, level + 1)
	local prefix = opts.prefix or "k"
	if type(prefix) ~= "string" then
		argerr(fname, "prefix must be a string", prefix, level + 1)
	end
	local width = check_int(fname, "width", opts.width or 12, 1, 20, level + 1)
	local self = setmetatable({ prefix = prefix, width = width }, Keys)
	self.pattern = prefix:gsub("%%", "%%%%") .. "%0" .. width .. ".0f"
	return self, opts
end

M.keys = {}

--- Keys start, start + step, ... in order (the append pattern of a log).
-- opts: prefix ("k"), width (digits, 12), start (0), step (1).
function M.keys.sequential(opts)
	local self, o = new_keys("load.keys.sequential", opts, 2)
	self.i = check_int("load.keys.sequential", "start", o.start or 0, 0, 2 ^ 53, 2)
	self.step = check_int("load.keys.sequential", "step", o.step or 1, 1, 2 ^ 32, 2)
	function self.next_index(s)
		local i = s.i
		s.i = i + s.step
		return i
	end
	return self
end

--- Keys drawn uniformly from start .. start + n - 1.
-- opts: n (required), seed (1), prefix, width, start (0).
function M.keys.uniform(opts)
	local self, o = new_keys("load.keys.uniform", opts, 2)
	self.n = check_int("load.keys.uniform", "n", o.n, 1, M.MAX_KEYS, 2)
	self.start = check_int("load.keys.uniform", "start", o.start or 0, 0, 2 ^ 52, 2)
	self.rng = M.rng(o.seed or 1)
	function self.next_index(s)
		return s.start + floor(s.rng:random() * s.n)
	end
	return self
end

local zeta_cache = {}

--- sum_{i=1..n} i^-theta (the zipfian normaliser): exact up to ZETA_EXACT_TERMS terms,
-- then the integral of the tail. Rank r is drawn with probability (r+1)^-theta / zeta(n).
function M.zeta(n, theta)
	local key = n .. "/" .. theta
	local z = zeta_cache[key]
	if z then
		return z
	end
	local m = n < M.ZETA_EXACT_TERMS and n or M.ZETA_EXACT_TERMS
	z = 0
	for i = 1, m do
		z = z + i ^ -theta
	end
	if n > m then
		local a, b = m + 0.5, n + 0.5
		z = z + (b ^ (1 - theta) - a ^ (1 - theta)) / (1 - theta)
	end
	zeta_cache[key] = z
	return z
end

local function expm1_over(x)
	if math.abs(x) > 1e-8 then
		return (exp(x) - 1) / x
	end
	return 1 + x / 2 * (1 + x / 3 * (1 + x / 4))
end

local function log1p_over(x)
	if math.abs(x) > 1e-8 then
		return log(1 + x) / x
	end
	return 1 - x * (0.5 - x * (1 / 3 - 0.25 * x))
end

--- Keys of start .. start + n - 1 with zipfian popularity: rank r (0 = the most
-- popular) is drawn with probability exactly proportional to 1 / (r + 1)^theta,
-- by rejection-inversion sampling (Hörmann and Derflinger), O(1) per draw for
-- any n. With scramble (the default) ranks are hashed over the key space, so the
-- hot keys are spread out instead of being the smallest indexes.
-- opts: n (required), theta (0.99, > 0), seed (1), scramble (true), prefix, width, start.
function M.keys.zipfian(opts)
	local self, o = new_keys("load.keys.zipfian", opts, 2)
	local n = check_int("load.keys.zipfian", "n", o.n, 1, M.MAX_KEYS, 2)
	local theta = o.theta or 0.99
	if type(theta) ~= "number" or not (theta > 0 and theta <= 10) then
		argerr("load.keys.zipfian", "theta must be a number in (0, 10]", theta, 2)
	end
	self.n = n
	self.start = check_int("load.keys.zipfian", "start", o.start or 0, 0, 2 ^ 52, 2)
	self.rng = M.rng(o.seed or 1)
	self.scramble = o.scramble ~= false
	local function h(x)
		return exp(-theta * log(x))
	end
	local function hint(x)
		local lx = log(x)
		return expm1_over((1 - theta) * lx) * lx
	end
	local function hint_inv(x)
		local t = x * (1 - theta)
		if t < -1 then
			t = -1
		end
		return exp(log1p_over(t) * x)
	end
	local hx1 = hint(1.5) - 1
	local hn = hint(n + 0.5)
	local sq = 2 - hint_inv(hint(2.5) - h(2))
	--- The rank (0 = most popular) of the next draw.
	function self.next_rank(me)
		while true do
			local u = hn + me.rng:random() * (hx1 - hn)
			local x = hint_inv(u)
			local k = floor(x + 0.5)
			if k < 1 then
				k = 1
			elseif k > n then
				k = n
			end
			if k - x <= sq or u >= hint(k + 0.5) - h(k) then
				return k - 1
			end
		end
	end
	function self.index_of_rank(me, r)
		if not me.scramble then
			return me.start + r
		end
		local hsh = mix32(bxor(mix32(tobit(r % 4294967296)), 0x2545f491)) % 4294967296
		return me.start + hsh % n
	end
	function self.next_index(me)
		return me:index_of_rank(me:next_rank())
	end
	return self
end

-- ---------------------------------------------------------------------------
-- Values
-- ---------------------------------------------------------------------------

local PRINTABLE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
local POOL_BYTES = 256 * 1024

local pools = {}

--- POOL_BYTES printable bytes drawn from seed (cached).
local function pool_of(seed)
	local p = pools[seed]
	if p then
		return p
	end
	local rng = M.rng(seed)
	local bytes = { PRINTABLE:byte(1, -1) }
	local chunks, buf = {}, {}
	for i = 1, POOL_BYTES do
		buf[(i - 1) % 4096 + 1] = bytes[band(rng:u32(), 63) + 1]
		if i % 4096 == 0 then
			chunks[#chunks + 1] = char(unpack(buf, 1, 4096))
		end
	end
	p = concat(chunks)
	pools[seed] = p
	return p
end

local Values = {}
Values.__index = Values

--- The size of the next value.
function Values:next_size()
	local s = self.sizer(self.rng)
	s = floor(s + 0.5)
	if s < self.min then
		s = self.min
	elseif s > self.max then
		s = self.max
	end
	return s
end

--- The next value: 8 hex digits of a counter (so values differ) then pool bytes.
function Values:next()
	local size = self:next_size()
	self.count = self.count + 1
	local head = fmt("%08x", self.count % 4294967296)
	if size <= 8 then
		return head:sub(1, size)
	end
	local want = size - 8
	local pool = self.pool
	if want <= POOL_BYTES / 2 then
		local off = self.rng:range(1, POOL_BYTES - want + 1)
		return head .. pool:sub(off, off + want - 1)
	end
	local parts, left = { head }, want
	while left > 0 do
		local take = left < POOL_BYTES / 2 and left or POOL_BYTES / 2
		local off = self.rng:range(1, POOL_BYTES - take + 1)
		parts[#parts + 1] = pool:sub(off, off + take - 1)
		left = left - take
	end
	return concat(parts)
end

local VALUE_OPTS = { size = true, seed = true }

--- A value generator. opts.size is one of:
--   a number (fixed size);
--   {min=, max=} (uniform);
--   {mean=, stddev= [, min=, max=]} (normal, clamped);
--   {mean=, distribution = "exponential" [, min=, max=]};
--   {{size, weight}, {size, weight}, ...} (weighted choice).
-- opts.seed (default 1) fixes the sizes and the bytes.
function M.values(opts)
	local fname = "load.values"
	opts = check_opts(fname, opts, VALUE_OPTS, 2)
	local size = opts.size or 100
	local self = setmetatable({ count = 0, min = 0, max = M.MAX_VALUE_BYTES }, Values)
	local seed = check_int(fname, "seed", opts.seed or 1, 0, 2 ^ 53, 2)
	self.rng = M.rng(seed + 0x5eed)
	self.pool = pool_of(seed)
	if type(size) == "number" then
		check_int(fname, "size", size, 0, M.MAX_VALUE_BYTES, 2)
		self.sizer = function()
			return size
		end
	elseif type(size) == "table" and size[1] ~= nil then
		local total, cum = 0, {}
		for i, e in ipairs(size) do
			if type(e) ~= "table" then
				argerr(fname, "weighted sizes must be {size, weight} pairs", e, 2)
			end
			check_int(fname, fmt("size[%d][1]", i), e[1], 0, M.MAX_VALUE_BYTES, 2)
			if type(e[2]) ~= "number" or e[2] < 0 then
				argerr(fname, fmt("size[%d][2] must be a weight >= 0", i), e[2], 2)
			end
			total = total + e[2]
			cum[i] = total
		end
		if total <= 0 then
			argerr(fname, "weights must add up to more than 0", total, 2)
		end
		self.sizer = function(rng)
			local u = rng:random() * total
			for i = 1, #cum do
				if u < cum[i] then
					return size[i][1]
				end
			end
			return size[#size][1]
		end
	elseif type(size) == "table" and size.mean ~= nil then
		local mean, sd = size.mean, size.stddev or 0
		if type(mean) ~= "number" or mean < 0 or type(sd) ~= "number" or sd < 0 then
			argerr(fname, "size.mean and size.stddev must be numbers >= 0", mean, 2)
		end
		self.min = check_int(fname, "size.min", size.min or 0, 0, M.MAX_VALUE_BYTES, 2)
		self.max = check_int(fname, "size.max", size.max or M.MAX_VALUE_BYTES, self.min, M.MAX_VALUE_BYTES, 2)
		if size.distribution == "exponential" then
			self.sizer = function(rng)
				return rng:exponential(mean)
			end
		elseif size.distribution == nil or size.distribution == "normal" then
			self.sizer = function(rng)
				return rng:normal(mean, sd)
			end
		else
			argerr(fname, "size.distribution must be \"normal\" or \"exponential\"", size.distribution, 2)
		end
	elseif type(size) == "table" and size.min ~= nil then
		local lo = check_int(fname, "size.min", size.min, 0, M.MAX_VALUE_BYTES, 2)
		local hi = check_int(fname, "size.max", size.max, lo, M.MAX_VALUE_BYTES, 2)
		self.sizer = function(rng)
			return rng:range(lo, hi)
		end
	else
		argerr(fname, "size must be a number, {min=, max=}, {mean=, stddev=} or {{size, weight}, ...}", size, 2)
	end
	return self
end

--- n rows {key, value} from a key generator and a value generator.
function M.batch(keys, values, n)
	check_int("load.batch", "n", n, 1, 1048576, 2)
	local rows = {}
	for i = 1, n do
		rows[i] = { keys:next(), values:next() }
	end
	return rows
end

--- Tries of load.retry before it hands back a busy answer.
M.RETRY_TRIES = 10
--- Seconds load.retry waits when a busy answer has no Retry-After.
M.RETRY_PAUSE_S = 0.1

--- verb(ctx, ...) again while the node answers busy (`nil, msg, "busy", retry_after`), after
-- ctx:sleep(retry_after or RETRY_PAUSE_S), at most RETRY_TRIES times; the verb's last results.
--   local merged = assert(load.retry(ctx, ctx.merge_wal, shard))
function M.retry(ctx, verb, ...)
	if type(verb) ~= "function" then
		argerr("load.retry", "verb must be a ctx verb (ctx.merge_wal, ...)", type(verb), 2)
	end
	for _ = 1, M.RETRY_TRIES - 1 do
		local r = { verb(ctx, ...) }
		if r[3] ~= "busy" then
			return unpack(r, 1, table.maxn(r))
		end
		ctx:sleep(r[4] or M.RETRY_PAUSE_S)
	end
	return verb(ctx, ...)
end

--- Script options from its arguments (`strata load s.lua -- rate=500 gens=8`, seen by the
-- script as `...`) over defaults: each argument is name=value, the name must be one
-- of the defaults, and the value takes the default's type (number, boolean or string).
function M.options(args, defaults)
	if type(defaults) ~= "table" then
		argerr("load.options", "defaults must be a table", defaults, 2)
	end
	local o = {}
	for k, v in pairs(defaults) do
		o[k] = v
	end
	for _, a in ipairs(args or {}) do
		local k, v = tostring(a):match("^([%w_]+)=(.*)$")
		if not k then
			error(fmt("script argument %q must be name=value", tostring(a)), 2)
		end
		local d = defaults[k]
		if d == nil then
			local names = {}
			for n in pairs(defaults) do
				names[#names + 1] = n
			end
			table.sort(names)
			error(fmt("unknown script argument %q (known: %s)", k, concat(names, ", ")), 2)
		end
		if type(d) == "number" then
			local n = tonumber(v)
			if n == nil then
				error(fmt("script argument %s=%s: a number is needed", k, v), 2)
			end
			o[k] = n
		elseif type(d) == "boolean" then
			if v ~= "true" and v ~= "false" then
				error(fmt("script argument %s=%s: true or false is needed", k, v), 2)
			end
			o[k] = v == "true"
		else
			o[k] = v
		end
	end
	return o
end

--- e^x, exported for scripts computing their own curves.
M.exp = exp

-- ---------------------------------------------------------------------------
-- wrk compatibility (used by the runner for scripts without a scenarios table)
-- ---------------------------------------------------------------------------

--- The global `wrk` table: scheme, host, port, path, method, headers, body, format().
function M.wrk_table(url)
	local wrk = {
		scheme = url.scheme,
		host = url.host,
		port = url.port,
		path = (url.path and url.path ~= "") and url.path or "/",
		method = "GET",
		headers = {},
		body = nil,
	}
	--- A raw HTTP/1.1 request, as wrk.format does.
	function wrk.format(method, path, headers, body)
		method = method or wrk.method
		path = path or wrk.path
		headers = headers or wrk.headers
		body = body or wrk.body
		local s = { method .. " " .. path .. " HTTP/1.1" }
		local has_host = false
		for name, value in pairs(headers) do
			s[#s + 1] = name .. ": " .. tostring(value)
			if type(name) == "string" and name:lower() == "host" then
				has_host = true
			end
		end
		if not has_host then
			local host = wrk.host:find(":", 1, true) and ("[" .. wrk.host .. "]") or wrk.host
			table.insert(s, 2, "Host: " .. host .. ":" .. wrk.port)
		end
		if body then
			s[#s + 1] = "Content-Length: " .. #body
		end
		s[#s + 1] = ""
		s[#s + 1] = body or ""
		return concat(s, "\r\n")
	end
	function wrk.lookup(host, service)
		return { host .. ":" .. tostring(service) }
	end
	function wrk.connect()
		return true
	end
	return wrk
end

--- The thread object handed to setup(thread).
function M.wrk_thread(ctx, id)
	local wrk = rawget(_G, "wrk")
	local t = { id = id, addr = wrk.host .. ":" .. wrk.port }
	function t.get(_, name)
		return rawget(_G, name)
	end
	function t.set(_, name, value)
		rawset(_G, name, value)
	end
	function t.stop()
		ctx:stop()
	end
	return t
end

local default_request

--- One wrk iteration: request() (or the static request), send, response().
function M.wrk_exec(ctx)
	local request = rawget(_G, "request")
	local req
	if request then
		req = request()
	else
		default_request = default_request or rawget(_G, "wrk").format()
		req = default_request
	end
	local status, body, headers = ctx:http_raw(req)
	local response = rawget(_G, "response")
	if status and response then
		response(status, headers, body)
	end
end

--- Seconds before the next request: wrk's delay() returns milliseconds.
function M.wrk_pause()
	return (tonumber(rawget(_G, "delay")()) or 0) / 1000
end

return M
