--- strata: the LuaJIT module of the strata storage engine.
--
--   local strata = require "strata"
--   local db = assert(strata.open{dir = "data", shards = 4, sync = "fsync"})
--   assert(db:append(0, {{key = "a", value = "1"}, {key = "b", value = "2"}}))
--   print(db:get(0, "a"))                       --> 1
--   for key, value in db:scan(0, {prefix = "a"}) do print(key, value) end
--   db:close()
--
-- The C half (strata.core) holds the store and plan objects. Errors follow the Lua
-- conventions: an operational failure returns nil, message, code (code is one of
-- strata.E*); a programming error (a wrong argument type, an unknown option, a
-- closed store) raises. db:get returns nil alone for an absent key.

-- The C half is built against LuaJIT 2.1's API (OpenResty's luajit2): another Lua cannot
-- load it, and its loader would only say "undefined symbol". Say what is needed instead.
local NEEDS = "strata needs LuaJIT 2.1 (OpenResty's luajit2, Debian package luajit2): "
	.. "run it with luajit"
if type(jit) ~= "table" or type(jit.version) ~= "string" then
	error(NEEDS .. "; this is " .. tostring(_VERSION) .. " (PUC)", 0)
elseif not jit.version:match("^LuaJIT 2%.1") then
	error(NEEDS .. "; this is " .. jit.version, 0)
end
local loaded, core = pcall(require, "strata.core")
if not loaded then
	error(tostring(core) .. "\n(strata.core, the C half of strata, did not load: it is "
		.. "build/strata.so after make (LUA_CPATH=\"build/?.so;;\") or strata/core.so after "
		.. "luarocks make, built for LuaJIT 2.1; package.cpath is " .. package.cpath .. ")", 0)
end
local format = require "strata.format"
local rowgen = require "strata.rows"

local fmt = string.format
local floor = math.floor

local M = {}

--- Version of the engine.
M.VERSION = core.VERSION
--- Largest key, in bytes.
M.MAX_KEY = core.MAX_KEY
--- Shards of a new store opened without shards (or shards = 0): 4, as `strata serve`.
M.DEFAULT_SHARDS = core.DEFAULT_SHARDS
--- True when db:policy and open{policy=} are built in.
M.HAVE_POLICY = core.HAVE_POLICY
--- Names of db:stats fields, in the order of strata_stats.
M.STATS_FIELDS = core.STATS_FIELDS
--- Result codes: strata.OK, strata.NOTFOUND, strata.EINVAL, ...
for name, v in pairs(core) do
	if type(v) == "number" and (name == "OK" or name == "NOTFOUND" or name:match("^E%u+$")) then
		M[name] = v
	end
end

--- strata.open{dir=, shards=, sync="fsync"|"none"|"interval", sync_interval_ms=,
-- max_value_bytes=, wal_segment_bytes=, block_bytes=, zstd_level=,
-- compress_max_bytes_per_kib=, compress_sample_every=,
-- bloom_bits_per_key=, generation_bloom_bits_per_key=, manifest_keep=, merge_max_inputs=,
-- policy=} (or strata.open(dir))
-- -> db | nil, message, code. The db owns dir until db:close(): a second open of it, here
-- or in another process, returns nil, message, strata.ELOCKED. shards = 0 (the default)
-- opens the count the store has (strata.DEFAULT_SHARDS, 4, for a new one); another count
-- is refused.
M.open = core.open
--- Words for a result code.
M.strerror = core.strerror
--- Methods of every store object; add to it to extend db.
M.db_methods = core.db_methods
--- Methods of plan objects.
M.plan_methods = core.plan_methods

--- Rows fetched per scan batch unless scan{batch=} says otherwise.
M.SCAN_BATCH = 1024

local SCAN_OPTIONS = {
	start = "string", stop = "string", ["end"] = "string", prefix = "string", limit = "number", batch = "number",
}
local SCAN_OPTION_NAMES = { "start", "stop", "prefix", "limit", "batch" }

--- Edit distance of two short strings.
local function distance(a, b)
	local prev, cur = {}, {}
	for j = 0, #b do
		prev[j] = j
	end
	for i = 1, #a do
		cur[0] = i
		for j = 1, #b do
			local cost = a:byte(i) == b:byte(j) and 0 or 1
			cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
		end
		prev, cur = cur, prev
	end
	return prev[#b]
end

--- The known name nearest to name, when it is close enough to be a typo.
function M.suggest(name, known)
	local best, best_d = nil, math.huge
	for _, k in ipairs(known) do
		local d = distance(name, k)
		if d < best_d then
			best, best_d = k, d
		end
	end
	if best and best_d <= math.max(2, floor(#name / 3)) then
		return best
	end
	return nil
end

--- The smallest key above every key that starts with p, or nil when there is none.
function M.prefix_end(p)
	local i = #p
	while i > 0 and p:byte(i) == 255 do
		i = i - 1
	end
	if i == 0 then
		return nil
	end
	return p:sub(1, i - 1) .. string.char(p:byte(i) + 1)
end

local function argerror(n, fname, msg, level)
	error(fmt("bad argument #%d to '%s' (%s)", n, fname, msg), level + 1)
end

--- The scan options as (lo, hi, limit, batch): lo inclusive, hi exclusive, nil = unbounded.
local function scan_range(opts, level)
	if opts == nil then
		return nil, nil, nil, M.SCAN_BATCH
	end
	if type(opts) ~= "table" then
		argerror(2, "scan", "table or nil expected, got " .. type(opts), level + 1)
	end
	for k, v in pairs(opts) do
		local want = SCAN_OPTIONS[k]
		if want == nil then
			local near = type(k) == "string" and M.suggest(k, SCAN_OPTION_NAMES)
			argerror(2, "scan", fmt("unknown option '%s'%s", tostring(k),
				near and fmt(" (did you mean '%s'?)", near) or ""), level + 1)
		elseif type(v) ~= want then
			argerror(2, "scan", fmt("%s must be a %s, not %s", k, want, type(v)), level + 1)
		end
	end
	local limit = opts.limit
	if limit ~= nil and (limit ~= floor(limit) or limit < 0) then
		argerror(2, "scan", "limit must be a non-negative integer", level + 1)
	end
	local batch = opts.batch or M.SCAN_BATCH
	if batch ~= floor(batch) or batch < 1 or batch > core.SCAN_MAX_ROWS then
		argerror(2, "scan", fmt("batch must be an integer in [1, %d]", core.SCAN_MAX_ROWS), level + 1)
	end
	if opts.stop ~= nil and opts["end"] ~= nil then
		argerror(2, "scan", "give stop or its alias end, not both", level + 1)
	end
	local lo, hi = opts.start, opts.stop or opts["end"]
	if opts.prefix ~= nil and opts.prefix ~= "" then
		if lo == nil or lo < opts.prefix then
			lo = opts.prefix
		end
		local pe = M.prefix_end(opts.prefix)
		if pe ~= nil and (hi == nil or pe < hi) then
			hi = pe
		end
	end
	if lo == "" then
		lo = nil
	end
	return lo, hi, limit, batch
end

local scan_batch = core.scan_batch

--- db:scan(shard, {start=, stop=, prefix=, limit=, batch=}) -> iterator | nil, message, code
-- Rows with start <= key < stop whose key starts with prefix, in key order, at most
-- limit of them: `for key, value in db:scan(0, {prefix = "a"}) do ... end`.
-- Rows are fetched in batches of `batch`; each batch reads the shard's current view,
-- so rows appended during the loop may or may not be seen, but keys come strictly
-- increasing and none twice. A failure of the first batch is returned as nil,
-- message, code; a failure of a later batch raises.
function core.db_methods.scan(db, shard, opts)
	local lo, hi, limit, batch = scan_range(opts, 2)
	local function want(seen)
		if limit ~= nil and limit - seen < batch then
			return limit - seen
		end
		return batch
	end
	local rows, more, code = scan_batch(db, shard, lo, false, hi, want(0))
	if rows == nil then
		return nil, more, code
	end
	local i, n, seen = 0, #rows, 0
	return function()
		if i >= n then
			if not more or (limit ~= nil and seen >= limit) then
				return nil
			end
			local last = rows[n - 1]
			local next_rows, more_or_err = scan_batch(db, shard, last, true, hi, want(seen))
			if next_rows == nil then
				error(fmt("strata: scan of shard %s failed: %s", tostring(shard), more_or_err), 2)
			end
			rows, more = next_rows, more_or_err
			i, n = 0, #rows
			if n == 0 then
				return nil
			end
		end
		i = i + 2
		seen = seen + 1
		return rows[i - 1], rows[i]
	end
end

--- db:scan_rows(shard, {start=, stop=, prefix=, limit=, batch=}) -> an array of {key=, value=}
-- rows | nil, message, code: db:scan collected, the shape ctx:scan_rows of `strata load`
-- returns (ctx:scan and db:scan both return the iterator).
function core.db_methods.scan_rows(db, shard, opts)
	local it, err, code = core.db_methods.scan(db, shard, opts)
	if it == nil then
		return nil, err, code
	end
	local rows = {}
	for key, value in it do
		rows[#rows + 1] = { key = key, value = value }
	end
	return rows
end

--- Names of the db:policy_info() fields, in the order of strata_policy_info.
M.POLICY_INFO_FIELDS = {
	"version", "reloads", "reload_failures", "hook_runs", "hook_errors", "policy_seals",
	"policy_merges", "policy_compactions", "flush_timer_fires", "sweeps", "last_error", "name",
}

--- db:policy_info() -> {version=, reloads=, reload_failures=, hook_runs=, hook_errors=,
-- policy_seals=, policy_merges=, policy_compactions=, flush_timer_fires=, sweeps=,
-- last_error=, name=} | nil, message, code (a store opened without a policy runtime).
-- version is 1 for the first policy and +1 per successful reload; last_error is the
-- last refused reload or failed hook with its file:line ("" when none).

--- Format a db:policy_info() table as aligned text; title (optional) is the first line.
function M.format_policy_info(t, title)
	if type(t) ~= "table" then
		argerror(1, "format_policy_info", "table expected, got " .. type(t), 2)
	end
	local counters, texts = {}, {}
	for k, v in pairs(t) do
		if type(v) == "string" then
			texts[#texts + 1] = k
		else
			counters[k] = v
		end
	end
	table.sort(texts)
	local lines = { format.stats(counters, { order = M.POLICY_INFO_FIELDS, title = title }) }
	local indent, width = title and "  " or "", 0
	for k in pairs(t) do
		width = math.max(width, #tostring(k))
	end
	for _, k in ipairs(texts) do
		local v = t[k]
		lines[#lines + 1] = fmt("%s%-" .. width .. "s  %s", indent, k, v == "" and "(none)" or v)
	end
	return table.concat(lines, "\n")
end

--- Format a db:stats() table as aligned text; title (optional) is the first line.
function M.format_stats(t, title)
	if type(t) ~= "table" then
		argerror(1, "format_stats", "table expected, got " .. type(t), 2)
	end
	return format.stats(t, { order = core.STATS_FIELDS, title = title })
end

--- strata.rows(n, {seed=, prefix=, first=, key_width=, value_bytes=, binary=, random_keys=})
-- -> a list of n reproducible {key=, value=} rows (see strata.rows module).
M.rows = rowgen.rows
--- The value of row index under seed, as strata.rows builds it.
M.row_value = rowgen.value
--- The key of row index, as strata.rows builds it.
M.row_key = rowgen.key

return M
