-- wrk_append.lua — wrk script for bench_http.sh: POST NDJSON batches of rows.
--
-- Every request carries WRK_APPEND_BATCH rows (environment, default 1) of a
-- 16-byte key and a 200-byte value: {"key":"<16>","value":"<200>"}, one per line.
-- Keys are unique across the whole run: 6 hex digits of randomness (so keys do
-- not arrive in order), 2 of the wrk thread number, 8 of that thread's counter.
-- Values are 200 characters taken at a random offset of a per-thread random pool.
-- done() prints one line that bench_http.sh parses:
--   wrk_append: batch=N requests=N duration_us=N status_errors=N socket_errors=N
--               p50_us=N p99_us=N p999_us=N max_us=N

local batch = tonumber(os.getenv("WRK_APPEND_BATCH") or "1")
if batch == nil or batch < 1 or batch ~= math.floor(batch) then
	error("WRK_APPEND_BATCH must be a positive integer")
end

local VALUE_BYTES, POOL_BYTES = 200, 8192
local alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

-- setup() runs in the main state once per thread: number the threads.
local threads = {}
function setup(thread)
	thread:set("tid", #threads)
	table.insert(threads, thread)
end

local pool, counter, headers

function init(args)
	if tid == nil or tid > 255 then
		error("wrk_append.lua: at most 256 threads")
	end
	math.randomseed(0x5eed + tid)
	local chars = {}
	for i = 1, POOL_BYTES + VALUE_BYTES do
		local c = math.random(1, #alphabet)
		chars[i] = alphabet:sub(c, c)
	end
	pool = table.concat(chars)
	counter = 0
	headers = { ["Content-Type"] = "application/x-ndjson" }
end

function request()
	local lines = {}
	for i = 1, batch do
		local key = string.format("%06x%02x%08x", math.random(0, 0xffffff), tid, counter)
		counter = counter + 1
		local off = math.random(1, POOL_BYTES)
		lines[i] = '{"key":"' .. key .. '","value":"' .. pool:sub(off, off + VALUE_BYTES - 1) .. '"}'
	end
	return wrk.format("POST", nil, headers, table.concat(lines, "\n") .. "\n")
end

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("wrk_append: batch=%d requests=%d duration_us=%d status_errors=%d " ..
		"socket_errors=%d p50_us=%d p99_us=%d p999_us=%d max_us=%d\n", batch, summary.requests,
		summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
		latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
