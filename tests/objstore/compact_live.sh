#!/bin/sh
# tests/objstore/compact_live.sh — `strata compact --interval` against shard 0 of a live
# `strata serve` on the same store while tests/objstore/compact_live.lua appends, seals
# and merges through HTTP: no acknowledged row lost, none duplicated (a full scan has
# strictly increasing keys with their values), the compactor committed merges and lost
# races without stopping, the node still serves afterwards with its epoch unchanged, and
# after a restart of the node no object is left that its manifest does not name.
# Prints the node's append p99.9 during the compaction (a figure, not an assertion).
#
# usage: compact_live.sh fs                 the fs store, a --data DIR node and compactor share
#        compact_live.sh azure URL CHECKER  an azure:// store (tests/objstore/azure.sh runs it);
#                                           CHECKER lists the objects the manifest does not name
# Ends "# compact-live-MODE: N passed, N failed".
BUILD=${BUILD:-build}
mode=${1:-fs}
url=${2:-}
checker=${3:-}
S=$BUILD/strata
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-compact-live.XXXXXX") || exit 1
spid=
cpid=
passed=0
failed=0
cleanup() {
	[ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ok() { echo "ok - compact-live-$mode: $1"; passed=$((passed + 1)); }
not_ok() {
	echo "not ok - compact-live-$mode: $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | tail -20 | sed 's/^/#   /'
	failed=$((failed + 1))
}
finish() {
	echo "# compact-live-$mode: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}
data=$tmp/node
if [ "$mode" = azure ]; then
	store="--store $url"
	cstore="--store $url"
else
	store=
	cstore="--data $data"
fi
serve() {
	rm -f "$tmp/ready"
	# shellcheck disable=SC2086
	"$S" serve --listen 127.0.0.1:0 --data "$data" $store --shards 2 --sync fsync \
		--ready-file "$tmp/ready" --log-level warn >>"$tmp/serve.log" 2>&1 &
	spid=$!
	i=0
	while [ ! -s "$tmp/ready" ] && [ $i -lt 200 ] && kill -0 "$spid" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
	addr=$(cat "$tmp/ready" 2>/dev/null)
	[ -n "$addr" ]
}
stop_serve() {
	kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	spid=
	return $src
}
serve || { not_ok "the node starts" "$(cat "$tmp/serve.log")"; finish; }
# A first row, so the shard has a manifest for the compactor to open.
curl -sf -X POST --data-binary '{"key": "live:", "value": "live:=first"}' "http://$addr/v1/shards/0/rows" >/dev/null &&
	curl -sf -X POST "http://$addr/v1/shards/0/seal" >/dev/null || not_ok "the first append"
epoch0=$(curl -sf "http://$addr/v1/stats" | grep -o '"writer_epoch":[0-9]*' | head -1)
metric() { grep -o "\"$1\": *[0-9.e+-]*" "$2" | head -1 | sed 's/.*: *//'; }
# The baseline: the same load on shard 1, with no compactor running.
"$S" load "$root/tests/objstore/compact_live.lua" --target "http://$addr" --quiet -d 3s \
	--json "$tmp/base.json" -- shard=1 >"$tmp/base.out" 2>&1 || not_ok "the baseline load on shard 1" "$(cat "$tmp/base.out")"
# shellcheck disable=SC2086
"$S" compact --shard 0 $cstore --interval 0.2 --max-generations 4 --base-max-runs 3 --merge-threads 3 \
	>"$tmp/compact.out" 2>"$tmp/compact.err" &
cpid=$!
"$S" load "$root/tests/objstore/compact_live.lua" --target "http://$addr" --quiet \
	--json "$tmp/load.json" >"$tmp/load.out" 2>&1
lrc=$?
kill -0 "$cpid" 2>/dev/null && compactor_alive=1 || compactor_alive=0
kill "$cpid" 2>/dev/null
wait "$cpid"
crc=$?
cpid=
p999=$(metric "writers.append.p999_ms" "$tmp/load.json")
p99=$(metric "writers.append.p99_ms" "$tmp/load.json")
b999=$(metric "writers.append.p999_ms" "$tmp/base.json")
b99=$(metric "writers.append.p99_ms" "$tmp/base.json")
passes=$(grep -c '^compact: ' "$tmp/compact.out")
merged=$(grep -o 'merged [0-9]*' "$tmp/compact.out" | awk '{s += $2} END {print s + 0}')
folded=$(grep -o 'folded [0-9]*' "$tmp/compact.out" | awk '{s += $2} END {print s + 0}')
lost=$(grep -o '[0-9]* lost to' "$tmp/compact.out" | awk '{s += $1} END {print s + 0}')
echo "# compact-live-$mode: append p99 ${p99:-?} ms, p99.9 ${p999:-?} ms during $passes compactor passes" \
	"($merged generations merged, $folded runs folded, $lost lost to the node); with no compactor" \
	"(shard 1, 3 s): p99 ${b99:-?} ms, p99.9 ${b999:-?} ms"
if [ "$lrc" -eq 0 ]; then
	ok "no acknowledged row lost, none duplicated, a full scan in key order ($(metric verified_rows "$tmp/load.json" | awk '{printf "%d", $1}') rows verified)"
else
	not_ok "the load's thresholds (lost_rows, errors, scan order)" "$(cat "$tmp/load.out")"
fi
tracked=$(metric tracked_rows "$tmp/load.json" | awk '{printf "%d", $1}')
scanned=$(metric scan_rows "$tmp/load.json" | awk '{printf "%d", $1}')
# The scan also has the first row.
if [ -n "$tracked" ] && [ "$tracked" -gt 0 ] && [ "$scanned" = "$((tracked + 1))" ]; then
	ok "the scan has every tracked row once ($scanned rows)"
else
	not_ok "the scan has every tracked row once (scan_rows $scanned, tracked $tracked + 1)"
fi
if [ "$compactor_alive" = 1 ] && [ "$crc" -eq 0 ] && [ "$merged" -gt 0 ]; then
	ok "the compactor ran throughout and merged ($merged generations in $passes passes), exit 0 on SIGTERM"
else
	not_ok "the compactor ran throughout and merged (alive $compactor_alive, exit $crc, merged $merged)" \
		"$(cat "$tmp/compact.err")"
fi
epoch1=$(curl -sf "http://$addr/v1/stats" | grep -o '"writer_epoch":[0-9]*' | head -1)
if curl -sf -X POST --data-binary '{"key": "live:~", "value": "live:~=after"}' "http://$addr/v1/shards/0/rows" >/dev/null &&
	curl -sf -X POST "http://$addr/v1/shards/0/seal" >/dev/null && [ -n "$epoch0" ] && [ "$epoch0" = "$epoch1" ]; then
	ok "the node still serves, never fenced ($epoch1)"
else
	not_ok "the node still serves, never fenced ($epoch0 before, $epoch1 after)" "$(cat "$tmp/serve.log")"
fi
if [ "$mode" = azure ]; then
	# The node's object-store requests in /metrics, per operation kind.
	curl -sf "http://$addr/metrics" >"$tmp/metrics.txt"
	pia=$(grep '^strata_objstore_requests_total{op="put_if_absent"}' "$tmp/metrics.txt" | awk '{print $2}')
	gr=$(grep -c '^strata_objstore_request_duration_seconds_count{op="get_range"}' "$tmp/metrics.txt")
	if [ "${pia:-0}" -gt 0 ] && [ "$gr" = 1 ] && grep -q '^strata_objstore_errors_total{op="put_if_absent",class="4xx"}' "$tmp/metrics.txt"; then
		ok "/metrics has the object-store requests per operation kind ($pia put_if_absent)"
	else
		not_ok "/metrics has the object-store requests per operation kind" "$(grep objstore "$tmp/metrics.txt")"
	fi
	if command -v promtool >/dev/null 2>&1; then
		if promtool check metrics <"$tmp/metrics.txt" >"$tmp/promtool.out" 2>&1; then
			ok "promtool check metrics is clean on a node with an azure store"
		else
			not_ok "promtool check metrics on a node with an azure store" "$(cat "$tmp/promtool.out")"
		fi
	else
		echo "# skip promtool check: promtool is not installed"
	fi
fi
stop_serve || not_ok "the node stops cleanly"
# Restart: the open collects what the compactor merged and the node had not deleted yet.
if serve && [ "$(curl -sf "http://$addr/v1/shards/0/rows/live:~")" = "live:~=after" ]; then
	stop_serve
	if [ "$mode" = azure ]; then
		leaks=$("$checker" --leaks "$url" 0 2>&1)
	else
		"$S" inspect "$data" >"$tmp/inspect.out" 2>&1
		leaks=$(cd "$data/objects" && find shard-0000/gen shard-0000/run -type f 2>/dev/null | while read -r f; do
			grep -q " $f " "$tmp/inspect.out" || echo "leaked: $f"; done)
	fi
	if [ -z "$leaks" ]; then
		ok "no object is left that the manifest does not name after the next open"
	else
		not_ok "no object is left that the manifest does not name after the next open" "$leaks"
	fi
else
	not_ok "the node reopens on the store and has the last row" "$(cat "$tmp/serve.log")"
fi
finish
