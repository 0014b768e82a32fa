--- strata.format: pretty-printing of statistics tables (pure Lua, no C half needed).
-- local format = require "strata.format"
-- print(format.stats(db:stats(0), {title = "shard 0", order = strata.STATS_FIELDS}))

local M = {}

local floor = math.floor
local fmt = string.format
local rep = string.rep

local BYTE_UNITS = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" }

--- "1.5 MiB" for 1572864; exact below 1 KiB.
function M.bytes(n)
	if type(n) ~= "number" then
		error(fmt("bad argument #1 to 'bytes' (number expected, got %s)", type(n)), 2)
	end
	local unit = 1
	while n >= 1024 and unit < #BYTE_UNITS do
		n = n / 1024
		unit = unit + 1
	end
	if unit == 1 then
		return fmt("%d B", n)
	end
	return fmt("%.1f %s", n, BYTE_UNITS[unit])
end

--- "1.234 ms" for 1234000 nanoseconds.
function M.duration_ns(n)
	if type(n) ~= "number" then
		error(fmt("bad argument #1 to 'duration_ns' (number expected, got %s)", type(n)), 2)
	end
	if n < 1e3 then
		return fmt("%d ns", n)
	elseif n < 1e6 then
		return fmt("%.3f us", n / 1e3)
	elseif n < 1e9 then
		return fmt("%.3f ms", n / 1e6)
	end
	return fmt("%.3f s", n / 1e9)
end

--- A number as text: integers without a fraction, others with up to 6 digits.
local function number_text(v)
	if v == floor(v) and v > -2 ^ 63 and v < 2 ^ 63 then
		return fmt("%.0f", v)
	end
	return fmt("%.6g", v)
end

--- The human reading of a field, judged by its name, or nil.
local function annotation(name, v)
	if type(v) ~= "number" or v < 0 then
		return nil
	end
	if name:find("bytes", 1, true) and v >= 1024 then
		return M.bytes(v)
	elseif name:find("_ns$") and v >= 1000 then
		return M.duration_ns(v)
	end
	return nil
end

--- Format a flat statistics table as aligned "name  value  (reading)" lines.
-- opts.order: list of field names shown first, in that order (the rest follow sorted);
-- opts.title: a first line; opts.indent: prefix of each field line (default "  " with a title).
function M.stats(t, opts)
	if type(t) ~= "table" then
		error(fmt("bad argument #1 to 'format_stats' (table expected, got %s)", type(t)), 2)
	end
	if opts ~= nil and type(opts) ~= "table" then
		error(fmt("bad argument #2 to 'format_stats' (table or nil expected, got %s)", type(opts)), 2)
	end
	opts = opts or {}
	local names, seen = {}, {}
	for _, name in ipairs(opts.order or {}) do
		if t[name] ~= nil and not seen[name] then
			names[#names + 1] = name
			seen[name] = true
		end
	end
	local rest = {}
	for key in pairs(t) do
		if not seen[key] then
			rest[#rest + 1] = key
		end
	end
	table.sort(rest, function(a, b)
		return tostring(a) < tostring(b)
	end)
	for _, key in ipairs(rest) do
		names[#names + 1] = key
	end

	local name_w, value_w = 0, 0
	local labels, values = {}, {}
	for i, key in ipairs(names) do
		local v = t[key]
		labels[i] = tostring(key)
		values[i] = type(v) == "number" and number_text(v) or tostring(v)
		name_w = math.max(name_w, #labels[i])
		value_w = math.max(value_w, #values[i])
	end
	local indent = opts.indent or (opts.title and "  " or "")
	local lines = {}
	if opts.title then
		lines[1] = tostring(opts.title)
	end
	for i, key in ipairs(names) do
		local line = indent .. labels[i] .. rep(" ", name_w - #labels[i] + 2)
			.. rep(" ", value_w - #values[i]) .. values[i]
		local reading = annotation(labels[i], t[key])
		if reading then
			line = line .. "  (" .. reading .. ")"
		end
		lines[#lines + 1] = line
	end
	return table.concat(lines, "\n")
end

return M
