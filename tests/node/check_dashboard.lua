-- check_dashboard.lua DASHBOARD.json METRICS.txt — the Grafana dashboard parses as JSON,
-- its panels have unique ids, and every strata_* or process_* name its queries use is a
-- sample name in METRICS.txt (a scrape of a live node's /metrics). It must also draw the
-- node's headline series. Prints one line per problem; exit 0 when there is none.
local json = require "dkjson"

local dash_path, metrics_path = arg[1], arg[2]
local function slurp(path)
	local f, err = io.open(path, "rb")
	if not f then
		io.stderr:write("check_dashboard: ", err, "\n")
		os.exit(2)
	end
	local s = f:read("*a")
	f:close()
	return s
end

local problems = 0
local function problem(fmt, ...)
	problems = problems + 1
	print(string.format(fmt, ...))
end

local dash, pos, err = json.decode(slurp(dash_path), 1, json.null)
if type(dash) ~= "table" then
	print(string.format("%s does not parse as JSON: %s (at byte %s)", dash_path, tostring(err), tostring(pos)))
	os.exit(1)
end

-- Sample names the node exports: the first token of every sample line.
local exported = {}
for line in slurp(metrics_path):gmatch("[^\n]+") do
	if line:sub(1, 1) ~= "#" then
		local name = line:match("^([%a_:][%w_:]*)")
		if name then exported[name] = true end
	end
end

-- Every query string of the dashboard: targets' expr, template variables' query/definition.
local queries = {}
local ids = {}
local function walk(node, key)
	if type(node) == "string" then
		if key == "expr" or key == "query" or key == "definition" then queries[#queries + 1] = node end
		return
	end
	if type(node) ~= "table" then return end
	if node.type and node.gridPos and node.id ~= nil then
		if ids[node.id] then problem("panel id %s is used twice (%q and %q)", tostring(node.id), ids[node.id], tostring(node.title)) end
		ids[node.id] = tostring(node.title)
	end
	for k, v in pairs(node) do walk(v, k) end
end
walk(dash)
if #queries == 0 then problem("%s has no queries", dash_path) end

local used = {}
for _, q in ipairs(queries) do
	for name in q:gmatch("[%a_:][%w_:]*") do
		if name:match("^strata_") or name:match("^process_") then
			used[name] = true
			if not exported[name] then problem("the dashboard queries %s, which /metrics does not export", name) end
		end
	end
end

-- What the dashboard is for: appends, merges, pending generations, stalls, policy reloads, HTTP.
local required = {
	"strata_appends_total", "strata_append_latency_seconds_bucket", "strata_merge_passes_total",
	"strata_pending_generations", "strata_exclusive_lock_hold_seconds_bucket",
	"strata_exclusive_lock_wait_seconds_bucket", "strata_policy_reloads_total",
	"strata_policy_reload_failures_total", "strata_http_requests_total",
	"strata_http_request_duration_seconds_bucket", "process_resident_memory_bytes",
}
for _, name in ipairs(required) do
	if not used[name] then problem("the dashboard draws no %s", name) end
end

local n = 0
for _ in pairs(used) do n = n + 1 end
print(string.format("# dashboard: %d queries, %d metric names, %d problems", #queries, n, problems))
os.exit(problems == 0 and 0 or 1)
