local G, killed, textload, log = ... -- the sandbox, built by policy_setup (policy.c)
local env = {}
for _, k in G.ipairs{'pairs', 'ipairs', 'next', 'type', 'tostring', 'tonumber', 'select',
		'error', 'assert', 'unpack', 'setmetatable', 'getmetatable', 'rawget', 'rawequal'} do
	env[k] = G[k]
end
local function copy(t)
	local c = {}
	for k, v in G.pairs(t) do c[k] = v end
	return c
end
env.string, env.table, env.math = copy(G.string), copy(G.table), copy(G.math)
local rawpcall, rawxpcall, gerror, tostr = G.pcall, G.xpcall, G.error, G.tostring
local function pass(ok, ...)
	if not ok and killed() then gerror((...), 0) end
	return ok, ...
end
env.pcall = function(f, ...) return pass(rawpcall(f, ...)) end
env.xpcall = function(f, h, ...) return pass(rawxpcall(f, h, ...)) end
env.load = function(chunk, name) return textload(chunk, name, env) end
env.loadstring = env.load
local strata = {log = log, default = {}, settings = {}}
env.strata = strata
env.require = function(name)
	if name == 'strata' then return strata end
	gerror("require '" .. tostr(name) .. "' is not allowed in a policy (only require \"strata\")", 2)
end
G.setmetatable(env, {
	__index = function(_, k)
		gerror("undefined global '" .. tostr(k) .. "' (not available in the policy sandbox)", 2)
	end,
	__newindex = function(_, k)
		gerror("assignment to global '" .. tostr(k) .. "' (policies have no writable globals; use local)", 2)
	end,
	__metatable = false,
})
return env
