#!/bin/sh
# http_conventions.sh — the HTTP and Prometheus conventions of a live node, seen with curl
# as a user sees them: shard ids (400 malformed, 404 missing), Date and Connection: close
# on every response, 415 for a Content-Type an endpoint does not take, seal of an empty
# memtable, JSON number precision, 429 + Retry-After for a busy shard, /metrics clean under
# promtool with process_* and lock histograms, and the Grafana dashboard naming only
# metrics the node exports. Prints "# http-conventions: N passed, N failed".
suite=http-conventions tag=httpconv
. "$(dirname "$0")/lib.sh"
dashboard=$root/node/server/grafana-dashboard.json
# check GOT WANT NAME: this suite names its checks last.
check() { if [ "$1" = "$2" ]; then ok "$3"; else bad "$3 (got '$1', want '$2')"; fi; }
# start_node DATA_DIR [POLICY]
start_node() {
	rm -f "$tmp/ready"
	set -- "$1" ${2:+--policy "$2"}
	"$bin" serve --listen 127.0.0.1:0 --data "$@" --shards 2 --ready-file "$tmp/ready" --log-level warn \
		>>"$tmp/node.log" 2>&1 &
	pid=$!
	await_ready "$pid" "$tmp/ready" "$tmp/node.log" || exit 1
	base="http://$(cat "$tmp/ready")"
}
stop_node() { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""; }

code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
# Response headers of a request, CRs dropped.
heads() { curl -s -o /dev/null -D - "$@" | tr -d '\r'; }

start_node "$tmp/data"

# ---- shard ids: malformed is 400 with a JSON error, a well-formed missing one 404 ----
for id in abc -1 0x1 01 00 '' 4294967296 99999999999999999999999; do
	c=$(code "$base/v1/shards/$id/stats")
	if [ "$c" = 400 ] && grep -q '"error":"bad shard id"' "$tmp/body"; then
		ok "shard id '$id' is a 400 naming a bad shard id"
	else
		bad "shard id '$id': status $c, body $(cat "$tmp/body")"
	fi
done
check "$(code -X POST "$base/v1/shards/01/rows" -d '{"key":"z","value":"z"}')" 400 "POST rows to shard 01 is a 400"
check "$(code "$base/v1/shards/1/rows/z")" 404 "and shard 1 did not get the row"
c=$(code "$base/v1/shards/7/stats")
if [ "$c" = 404 ] && grep -q '"error":"unknown shard"' "$tmp/body"; then ok "well-formed shard 7 the node lacks is a 404"
else bad "shard 7: status $c, body $(cat "$tmp/body")"; fi
check "$(code "$base/v1/shards/0/stats")" 200 "shard 0 is served"
check "$(code "$base/v1/shards/1/stats")" 200 "shard 1 is served"

# ---- Date on every response (IMF-fixdate), Connection: close when the server closes ----
imf='^Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$'
for what in "/healthz" "/nope" "/v1/shards/abc/stats" "/v1/shards/0/rows?prefix=a" "/metrics"; do
	d=$(heads "$base$what" | grep '^Date: ')
	if echo "$d" | grep -Eq "$imf" && date -u -d "${d#Date: }" >/dev/null 2>&1; then ok "GET $what has an IMF-fixdate Date"
	else bad "GET $what: Date header '$d'"; fi
done
d=$(heads -X FOO "$base/healthz" | grep '^Date: ')
echo "$d" | grep -Eq "$imf" && ok "a malformed request's 400 has a Date" || bad "malformed request: Date '$d'"
for what in "/nope" "/healthz" "/v1/shards/9/stats" "/v1/shards/x/stats"; do
	h=$(heads -H 'Connection: close' "$base$what")
	if echo "$h" | grep -qi '^Connection: close$'; then ok "Connection: close echoed on $(echo "$h" | head -1 | cut -d' ' -f2) for $what"
	else bad "no Connection: close for $what: $(echo "$h" | tr '\n' '|')"; fi
done
h=$(heads -H 'Connection: close' -H 'Content-Type: text/csv' -X POST "$base/v1/shards/0/rows" -d 'a,b')
echo "$h" | grep -qi '^Connection: close$' && ok "Connection: close echoed on a 415" || bad "415 without Connection: close"
h=$(heads -0 "$base/nope")
echo "$h" | grep -qi '^Connection: close$' && ok "an HTTP/1.0 404 says Connection: close" || bad "HTTP/1.0 404: $(echo "$h" | tr '\n' '|')"

# ---- Content-Type: 415 for a type the endpoint does not take ----
c=$(code -X POST -H 'Content-Type: text/csv' "$base/v1/shards/0/rows" --data-binary '{"key":"csv","value":"1"}')
if [ "$c" = 415 ] && grep -q 'unsupported media type' "$tmp/body"; then ok "text/csv rows are a 415"; else bad "text/csv rows: $c $(cat "$tmp/body")"; fi
check "$(code "$base/v1/shards/0/rows/csv")" 404 "and the text/csv row was not applied"
check "$(code -X POST -H 'Content-Type: application/x-ndjson' "$base/v1/shards/0/rows" -d '{"key":"nd","value":"1"}')" 200 "application/x-ndjson rows are taken"
check "$(code -X POST -H 'Content-Type: application/x-ndjson; charset=utf-8' "$base/v1/shards/0/rows" -d '{"key":"nd2","value":"1"}')" 200 "a media type with parameters is taken"
check "$(code -X POST -H 'Content-Type:' "$base/v1/shards/0/rows" -d '{"key":"none","value":"1"}')" 200 "rows without a Content-Type are NDJSON"
check "$(code -X POST "$base/v1/shards/0/rows" --data-binary '{"key":"form","value":"1"}')" 200 "curl's default (form-urlencoded) is NDJSON"
check "$(code "$base/v1/shards/0/rows/form")" 200 "and its row is readable"
printf 'return { flush_interval_s = 0 }\n' >"$tmp/p.lua"
check "$(code -X PUT -H 'Content-Type: text/csv' "$base/v1/policy" --data-binary @"$tmp/p.lua")" 415 "PUT /v1/policy as text/csv is a 415"
check "$(code -X PUT -H 'Content-Type: text/x-lua' "$base/v1/policy" --data-binary @"$tmp/p.lua")" 200 "PUT /v1/policy as text/x-lua is taken"

# ---- seal of an empty memtable says so ----
c=$(code -X POST "$base/v1/shards/1/seal")
if [ "$c" = 200 ] && grep -q '"sealed":false' "$tmp/body" && grep -q '"reason":"the memtable was empty' "$tmp/body"; then
	ok "seal of an empty memtable says sealed: false and why"
else bad "empty seal: $c $(cat "$tmp/body")"; fi
code -X POST "$base/v1/shards/1/rows" -d '{"key":"s","value":"1"}' >/dev/null
c=$(code -X POST "$base/v1/shards/1/seal")
if [ "$c" = 200 ] && grep -q '"sealed":true' "$tmp/body" && ! grep -q reason "$tmp/body"; then ok "seal with a row says sealed: true"
else bad "seal with a row: $c $(cat "$tmp/body")"; fi

# ---- JSON numbers at a sensible precision ----
sleep 0.01
curl -s "$base/v1/stats" >"$tmp/stats.json"
up=$(grep -o '"uptime_s":[0-9.eE+-]*' "$tmp/stats.json" | cut -d: -f2)
echo "$up" | grep -Eq '^[0-9]+(\.[0-9]{1,3})?$' && ok "uptime_s prints as $up" || bad "uptime_s prints as '$up'"
long=$(grep -oE '[0-9]+\.[0-9]{4,}' "$tmp/stats.json" | head -3 | tr '\n' ' ')
[ -z "$long" ] && ok "no JSON number in /v1/stats has more than 3 decimals" || bad "long decimals in /v1/stats: $long"

# ---- /metrics: promtool, process_*, lock histograms, request labels ----
curl -s "$base/metrics" >"$tmp/metrics.txt"
if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null 2>&1
fi
if command -v promtool >/dev/null 2>&1; then
	if promtool check metrics <"$tmp/metrics.txt" >"$tmp/promtool.out" 2>&1; then ok "promtool check metrics is clean"
	else bad "promtool check metrics: $(cat "$tmp/promtool.out")"; fi
else
	echo "# skip promtool check: promtool is not installed and apt-get install prometheus failed"
fi
for name in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
	process_open_fds process_max_fds process_start_time_seconds; do
	grep -Eq "^$name [0-9.e+]+$" "$tmp/metrics.txt" && ok "/metrics has $name" || bad "/metrics lacks $name"
done
st=$(grep '^process_start_time_seconds ' "$tmp/metrics.txt" | cut -d' ' -f2 | cut -d. -f1)
now=$(date +%s)
[ -n "$st" ] && [ "$st" -le "$now" ] && [ "$st" -gt $((now - 86400)) ] && ok "process_start_time_seconds is a recent epoch time" \
	|| bad "process_start_time_seconds $st (now $now)"
! grep -q 'percentile=' "$tmp/metrics.txt" && ok "no percentile= gauges" || bad "percentile= gauges remain"
! grep -q 'exclusive_lock_max\|exclusive_lock_wait_max' "$tmp/metrics.txt" && ok "no max-since-start lock gauges" \
	|| bad "lock max gauges remain"
for h in hold wait; do
	grep -q "^# TYPE strata_exclusive_lock_${h}_seconds histogram" "$tmp/metrics.txt" &&
		n=$(grep "^strata_exclusive_lock_${h}_seconds_count " "$tmp/metrics.txt" | cut -d' ' -f2) && [ "${n:-0}" -gt 0 ] &&
		ok "strata_exclusive_lock_${h}_seconds is a histogram with $n swaps" || bad "no exclusive-lock $h histogram with counts"
done
grep -q '^strata_http_requests_total{handler="seal",method="POST",code="200"} 2$' "$tmp/metrics.txt" &&
	ok "requests counted by handler, method and code" || bad "requests by handler: $(grep '^strata_http_requests_total' "$tmp/metrics.txt" | tr '\n' '|')"
grep -q '^strata_http_requests_total{handler="shard_stats",method="GET",code="400"} ' "$tmp/metrics.txt" &&
	grep -q '^strata_http_requests_total{handler="protocol",method="unknown",code="400"} 1$' "$tmp/metrics.txt" &&
	grep -q '^strata_http_requests_total{handler="not_found",method="GET",code="404"} ' "$tmp/metrics.txt" &&
	ok "400s, protocol errors and unknown paths are counted by handler" || bad "error responses by handler"
grep '^strata_http_requests_total' "$tmp/metrics.txt" | grep -q '/' && bad "a raw path leaked into a label" || ok "no raw path in a request label"
grep -q '^strata_http_request_duration_seconds_count{handler="rows"} ' "$tmp/metrics.txt" &&
	ok "request durations by handler" || bad "no request duration by handler"

# ---- the Grafana dashboard parses and names only exported metrics ----
if command -v luajit >/dev/null 2>&1 && luajit -e 'require "dkjson"' 2>/dev/null; then
	if luajit "$root/tests/node/check_dashboard.lua" "$dashboard" "$tmp/metrics.txt" >"$tmp/dash.out" 2>&1; then
		ok "grafana-dashboard.json parses and names only exported metrics ($(tail -1 "$tmp/dash.out" | sed 's/^# dashboard: //'))"
	else bad "grafana-dashboard.json: $(cat "$tmp/dash.out")"; fi
elif command -v python3 >/dev/null 2>&1; then
	python3 -m json.tool "$dashboard" >/dev/null && ok "grafana-dashboard.json parses (python3; names not checked: no luajit dkjson)" \
		|| bad "grafana-dashboard.json does not parse"
else
	echo "# skip dashboard check: neither luajit with dkjson (lua-dkjson) nor python3"
fi
stop_node

# ---- a busy shard is a 429 with Retry-After, not a failure ----
# A background write budget of 10 KiB/s keeps the first merge in flight for seconds: the
# budget's burst (256 KiB) lets the seal of ~200 KB through at once, and the merge that
# writes them again waits its debt off block by block.
printf 'return { flush_interval_s = 0, sweep_interval_s = 0, merge_after_generations = 1000,\n  background_io_mib_per_s = 0.01 }\n' >"$tmp/slow.lua"
start_node "$tmp/busy" "$tmp/slow.lua"
head -c 200000 /dev/urandom | base64 -w 3000 | awk '{ printf "{\"key\":\"b%04d\",\"value\":\"%s\"}\n", NR, $0 }' >"$tmp/rows.ndjson"
check "$(code -X POST "$base/v1/shards/0/rows" --data-binary @"$tmp/rows.ndjson")" 200 "200 KB of rows appended"
check "$(code -X POST "$base/v1/shards/0/seal")" 200 "and sealed into a generation"
# Two merge-wal requests at once: whichever comes second finds the first in flight.
curl -s -D "$tmp/m1.h" -o "$tmp/m1.body" -X POST "$base/v1/shards/0/merge-wal" >/dev/null 2>&1 &
m1=$!
curl -s -D "$tmp/m2.h" -o "$tmp/m2.body" -X POST "$base/v1/shards/0/merge-wal" >/dev/null 2>&1 &
m2=$!
got=""
i=0
while [ $i -lt 200 ] && [ -z "$got" ]; do
	for m in m1 m2; do
		[ -s "$tmp/$m.body" ] && [ "$(head -1 "$tmp/$m.h" 2>/dev/null | cut -d' ' -f2)" = 429 ] && got=$m
	done
	[ -n "$got" ] && break
	i=$((i + 1))
	sleep 0.05
done
if [ -n "$got" ]; then ok "merge-wal on a shard with a merge in flight is a 429"
else bad "no 429 for two merge-wal at once: $(head -1 "$tmp/m1.h" 2>/dev/null) / $(head -1 "$tmp/m2.h" 2>/dev/null)"; got=m1; fi
cp "$tmp/$got.h" "$tmp/busy.h" 2>/dev/null
cp "$tmp/$got.body" "$tmp/busy.body" 2>/dev/null
ra=$(tr -d '\r' <"$tmp/busy.h" | grep -i '^Retry-After:' | cut -d' ' -f2)
echo "$ra" | grep -Eq '^[0-9]+$' && ok "the 429 has Retry-After: $ra (integer seconds)" || bad "Retry-After '$ra'"
if grep -q '"error":"shard busy"' "$tmp/busy.body" && grep -q '"shard":0' "$tmp/busy.body" && grep -q '"busy":"' "$tmp/busy.body"; then
	ok "the 429 body names the shard and what is busy: $(cat "$tmp/busy.body")"
else bad "429 body: $(cat "$tmp/busy.body")"; fi
check "$(code "$base/healthz")" 200 "the node is healthy meanwhile"
check "$(code -X POST "$base/v1/shards/1/rows" -d '{"key":"other","value":"1"}')" 200 "and appends to another shard go through"
curl -s "$base/metrics" | grep -q '^strata_http_requests_total{handler="merge_wal",method="POST",code="429"} ' &&
	ok "the 429 is counted apart in /metrics" || bad "429 not in /metrics"
stop_node
wait "$m1" "$m2" 2>/dev/null

finish
