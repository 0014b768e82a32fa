#!/bin/sh
# trace.sh — the workload trace on a live `strata serve`: POST /v1/trace records while
# `strata load` (smoke.lua, which reads every acknowledged row back) runs, changes no
# acknowledged row, stops at its byte budget and leaves a trace that `strata inspect
# --trace` reads whole; --trace-file records from the start and a SIGTERM ends the file
# cleanly; bad requests are refused naming what is wrong. Prints "# node-trace: N passed,
# N failed".
suite=node-trace tag=trace
. "$(dirname "$0")/lib.sh"

# start NAME [FLAGS...]: a node in $tmp/NAME; its address in $addr, its pid in $pid.
start() {
	name=$1
	shift
	"$bin" serve --listen 127.0.0.1:0 --data "$tmp/$name" --shards 2 --sync none --ready-file "$tmp/$name.ready" \
		--log-level warn "$@" >>"$tmp/$name.log" 2>&1 &
	pid=$!
	pids="$pids $pid"
	await_ready "$pid" "$tmp/$name.ready" "$tmp/$name.log" || { bad "node $name starts"; finish; exit 1; }
	addr=$(cat "$tmp/$name.ready")
}
post() { curl -s -o "$tmp/resp" -w '%{http_code}' -X "$1" "http://$addr/v1/trace" ${2:+-d "$2"}; }

# The what-if's cost model: a file of the node's (and a bad one refuses the start).
printf 'disk_write_mib_s = 7\ncpu_mib_s = 123\n' >"$tmp/model"
printf 'disk_write_mib_s = fast\n' >"$tmp/bad.model"
"$bin" serve --listen 127.0.0.1:0 --data "$tmp/badmodel" --policy-compare-model "$tmp/bad.model" >"$tmp/badmodel.log" 2>&1
brc=$?
if [ "$brc" -ne 0 ] && grep -q "policy-compare-model: model $tmp/bad.model:1: disk_write_mib_s needs a number" "$tmp/badmodel.log"; then
	ok "a bad --policy-compare-model refuses the start, naming its line"
else
	bad "a bad --policy-compare-model: exit $brc, $(head -2 "$tmp/badmodel.log")"
fi
start live --policy-compare-model "$tmp/model"
check "GET /v1/trace before any: 404" "$(post GET)" 404
cmpc() { curl -s -o "$tmp/cmp" -w '%{http_code}' -X POST --data-binary "$1" "http://$addr/v1/policy/compare"; }
check "POST /v1/policy/compare with no trace: 404" "$(cmpc 'return { merge_after_generations = 2 }')" 404
check "POST /v1/trace starts one" "$(post POST '{"seconds": 60, "max_bytes": 262144, "name": "live"}')" 200
check "it records into DATA/traces/live.swt" "$(jget "$tmp/resp" o.file)" "$tmp/live/traces/live.swt"
check "a second POST while it runs: 409" "$(post POST '{}')" 409
"$bin" load "$root/tests/load/smoke.lua" --target "http://$addr" -d 4s -q -- rate=1000 batch=10 \
	>"$tmp/load.out" 2>&1
lrc=$?
check "the load run during the recording passes: every acknowledged row reads back" "$lrc" 0
i=0
while [ $i -lt 100 ]; do
	post GET >/dev/null
	[ "$(jget "$tmp/resp" o.active)" = false ] && break
	sleep 0.1
	i=$((i + 1))
done
check "the trace stopped at its byte budget" "$(jget "$tmp/resp" o.why)" "byte budget"
size=$(wc -c <"$tmp/live/traces/live.swt")
if [ "$size" -le 262144 ] && [ "$size" -gt 131072 ]; then ok "the file holds at most its budget ($size bytes)"; else
	bad "the file is $size bytes, budget 262144"; fi
if "$bin" inspect --trace "$tmp/live/traces/live.swt" --json >"$tmp/inspect.json" 2>"$tmp/inspect.err"; then
	ok "strata inspect --trace reads it"
else
	bad "strata inspect --trace: $(cat "$tmp/inspect.err")"
fi
check "it ended cleanly" "$(jget "$tmp/inspect.json" o.ended)" true
rows=$(jget "$tmp/inspect.json" o.appends.rows)
if [ "$rows" -gt 1000 ]; then ok "it holds the load's appends ($rows rows)"; else bad "it holds $rows rows"; fi
check "and its reads" "$(jget "$tmp/inspect.json" 'o.gets.requests > 0')" true
check "POST /v1/policy/compare replays it under the running policy and the candidate" \
	"$(cmpc 'return { merge_after_generations = 2 }')" 200
check "the what-if names both, and the replay saw the load's rows" \
	"$(jget "$tmp/cmp" 'o.policies.map(p => p.policy).join(",") + " " + (o.policies[0].rows === '"$rows"')')" \
	"running,candidate true"
check "it replays on the node's model file, its objects local" \
	"$(jget "$tmp/cmp" 'o.model.disk_write_mib_s + " " + o.model.cpu_mib_s + " " + o.store')" "7 123 local"
check "a candidate that does not compile: 422" "$(cmpc 'return { = }')" 422
check "DELETE /v1/trace with none running: 404" "$(post DELETE)" 404
check "seconds out of range: 400" "$(post POST '{"seconds": -1}')" 400
check "a name that is a path: 400" "$(post POST '{"name": "../x"}')" 400
check "a budget over --trace-max-bytes: 400" "$(post POST '{"max_bytes": 1099511627776}')" 400
check "a body that is not JSON: 400" "$(post POST 'seconds=1')" 400
check "POST, then DELETE stops it" "$(post POST '{"name": "short"}')$(post DELETE)" 200200
check "and says so" "$(jget "$tmp/resp" o.why)" stopped

# --trace-file: from the start, ended by a SIGTERM.
start file --trace-file "$tmp/all.swt"
for k in 1 2 3 4 5; do
	curl -s -o /dev/null -X POST "http://$addr/v1/shards/1/rows" -d "{\"key\":\"k$k\",\"value\":\"v$k\"}"
done
curl -s -o /dev/null "http://$addr/v1/shards/1/rows/k1"
kill -TERM "$pid"
wait "$pid" 2>/dev/null
"$bin" inspect --trace "$tmp/all.swt" --json >"$tmp/all.json" 2>&1
check "--trace-file: a SIGTERM ends the file cleanly" "$(jget "$tmp/all.json" o.ended)" true
check "--trace-file: it holds the five appends on shard 1 and the get" \
	"$(jget "$tmp/all.json" '[o.appends.rows, o.shard_appends[1].rows, o.gets.found].join(" ")')" "5 5 1"
"$bin" serve --listen 127.0.0.1:0 --data "$tmp/bad" --trace-file "$tmp/no/such/dir/t.swt" >"$tmp/bad.out" 2>&1
brc=$?
if [ $brc -ne 0 ] && grep -q -- "--trace-file: trace $tmp/no/such/dir/t.swt" "$tmp/bad.out"; then
	ok "a --trace-file that cannot be created refuses the start, naming it"
else
	bad "a --trace-file that cannot be created: exit $brc, $(cat "$tmp/bad.out")"
fi
# strata load --record-trace: an embedded run's workload, read back as the load saw it.
"$bin" load "$root/tests/load/smoke.lua" --embedded "$tmp/emb" -d 2s -q --record-trace "$tmp/emb.swt" \
	--json "$tmp/emb-load.json" >"$tmp/emb.out" 2>&1
check "strata load --embedded --record-trace passes" "$?" 0
"$bin" inspect --trace "$tmp/emb.swt" --json >"$tmp/emb.json" 2>&1
check "its trace holds every row the load appended" "$(jget "$tmp/emb.json" o.appends.rows)" \
	"$(jget "$tmp/emb-load.json" 'o.verify.tracked')"
"$bin" load "$root/tests/load/smoke.lua" --target "http://127.0.0.1:1" --record-trace "$tmp/x.swt" -d 1s -q \
	>"$tmp/x.out" 2>&1
if grep -q "record-trace records an --embedded store" "$tmp/x.out" && [ ! -e "$tmp/x.swt" ]; then
	ok "--record-trace against a node is refused, pointing at POST /v1/trace"
else
	bad "--record-trace against a node: $(cat "$tmp/x.out")"
fi
finish
