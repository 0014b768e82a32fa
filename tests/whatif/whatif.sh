#!/bin/sh
# whatif.sh — the policy what-if against reality (make test): a live `strata serve` runs
# tests/whatif/appends.lua for 4 s under policy A while POST /v1/trace records it; `strata
# policy compare` replays the trace under A and B in the simulator. Checked: the same
# trace and policy give the same report, byte for byte, and another policy another one;
# the replay under A did what the real node did (seals within SEAL_TOL_PCT %, merges
# within MERGE_TOL of the node's counts: the triggers count bytes and generations);
# B beats A in the replay (a lower peak of pending generations); and a second live node
# under B and the same load beats A too, by the same measure (sampled every 50 ms),
# merging as often as the replay said. Prints "# whatif: N passed, N failed".
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
bin=${STRATA_BIN:-$BUILD/strata}
SEAL_TOL_PCT=${SEAL_TOL_PCT:-5}
MERGE_TOL=${MERGE_TOL:-1}
here=$root/tests/whatif
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-whatif.XXXXXX") || exit 1
pids=""
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
bad() { failed=$((failed + 1)); echo "not ok - $1"; }
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# js EXPR FILE...: evaluate EXPR with f[0], f[1]... the JSON files.
js() {
	e=$1
	shift
	node -e "const f=process.argv.slice(1).map(p=>JSON.parse(require('fs').readFileSync(p,'utf8')));console.log($e)" "$@"
}

# run_node NAME POLICY: a node under POLICY, the load, a 50 ms sampler of the backlog and
# (for A) a trace; leaves $tmp/NAME.stats (both shards) and $tmp/NAME.peak.
run_node() {
	name=$1
	"$bin" serve --listen 127.0.0.1:0 --ready-file "$tmp/$name.ready" --data "$tmp/$name" --shards 2 --sync none \
		--policy "$2" --no-watch-policy --log-level warn 2>"$tmp/$name.log" &
	npid=$!
	pids="$pids $npid"
	i=0
	while [ ! -s "$tmp/$name.ready" ]; do
		if ! kill -0 "$npid" 2>/dev/null || [ $i -ge 200 ]; then
			cat "$tmp/$name.log"
			echo "not ok - the node $name did not start"
			echo "# whatif: $passed passed, $((failed + 1)) failed"
			exit 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	url=http://$(cat "$tmp/$name.ready")
	[ "$name" = a ] && curl -s -o /dev/null -X POST "$url/v1/trace" -d '{"name": "a", "seconds": 120}'
	(while :; do
		curl -s "$url/v1/stats" | node -e 'let d="";process.stdin.on("data",c=>d+=c).on("end",()=>{try{console.log(JSON.parse(d).shards.reduce((a,s)=>a+s.generations,0))}catch(e){}})'
		sleep 0.05
	done) >"$tmp/$name.samples" 2>/dev/null &
	spid=$!
	"$bin" load "$here/appends.lua" --target "$url" -q >"$tmp/$name.load" 2>&1 || {
		bad "the load against node $name failed: $(tail -3 "$tmp/$name.load")"
	}
	sleep 1
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	[ "$name" = a ] && curl -s -o /dev/null -X DELETE "$url/v1/trace"
	curl -s "$url/v1/stats" >"$tmp/$name.stats"
	sort -n "$tmp/$name.samples" | tail -1 >"$tmp/$name.peak"
	kill "$npid"
	wait "$npid" 2>/dev/null
}

run_node a "$here/policy_a.lua"
trace=$tmp/a/traces/a.swt
if [ -s "$trace" ]; then ok "the live node under A recorded its trace"; else bad "no trace at $trace"; fi
"$bin" policy compare --trace "$trace" --json "$here/policy_a.lua" "$here/policy_b.lua" >"$tmp/cmp1.json" 2>"$tmp/cmp.err"
"$bin" policy compare --trace "$trace" --json "$here/policy_a.lua" "$here/policy_b.lua" >"$tmp/cmp2.json" 2>>"$tmp/cmp.err"
if [ -s "$tmp/cmp1.json" ] && cmp -s "$tmp/cmp1.json" "$tmp/cmp2.json"; then
	ok "two replays of the trace print the same report, byte for byte"
else
	bad "the two replays differ (or failed: $(cat "$tmp/cmp.err"))"
fi
if [ "$(js 'f[0].policies[0].hash !== f[0].policies[1].hash' "$tmp/cmp1.json")" = true ]; then
	ok "policy B's report is another one (its hash differs)"
else
	bad "A and B report the same hash"
fi
real_seals=$(js 'f[0].shards.reduce((a,s)=>a+s.seals,0)' "$tmp/a.stats")
real_merges=$(js 'f[0].shards.reduce((a,s)=>a+s.merges+s.compactions,0)' "$tmp/a.stats")
rep_seals=$(js 'f[0].policies[0].during_trace.seals' "$tmp/cmp1.json")
rep_merges=$(js 'f[0].policies[0].during_trace.merges' "$tmp/cmp1.json")
echo "# node A: $real_seals seals, $real_merges merges; its replay: $rep_seals seals, $rep_merges merges"
if [ "$(js "Math.abs($rep_seals - $real_seals) * 100 <= $SEAL_TOL_PCT * $real_seals && $real_seals > 10")" = true ]; then
	ok "the replay under A sealed as the node did ($rep_seals against $real_seals; tolerance $SEAL_TOL_PCT%)"
else
	bad "the replay under A sealed $rep_seals times, the node $real_seals"
fi
if [ "$(js "Math.abs($rep_merges - $real_merges) <= $MERGE_TOL && $real_merges > 0")" = true ]; then
	ok "the replay under A merged as the node did ($rep_merges against $real_merges; tolerance $MERGE_TOL)"
else
	bad "the replay under A merged $rep_merges times, the node $real_merges"
fi
rep_a=$(js 'f[0].policies[0].peak_pending_total' "$tmp/cmp1.json")
rep_b=$(js 'f[0].policies[1].peak_pending_total' "$tmp/cmp1.json")
if [ "$rep_b" -lt "$rep_a" ]; then
	ok "in the replay B beats A: a peak of $rep_b pending generations against $rep_a"
else
	bad "in the replay B does not beat A: $rep_b against $rep_a"
fi

run_node b "$here/policy_b.lua"
peak_a=$(cat "$tmp/a.peak")
peak_b=$(cat "$tmp/b.peak")
echo "# the live nodes' sampled peaks of pending generations: A $peak_a, B $peak_b"
if [ -n "$peak_a" ] && [ -n "$peak_b" ] && [ "$peak_b" -lt "$peak_a" ]; then
	ok "on a live node B beats A too: a peak of $peak_b pending generations against $peak_a"
else
	bad "on a live node B does not beat A: '$peak_b' against '$peak_a'"
fi
real_b=$(js 'f[0].shards.reduce((a,s)=>a+s.merges+s.compactions,0)' "$tmp/b.stats")
rep_bm=$(js 'f[0].policies[1].during_trace.merges' "$tmp/cmp1.json")
if [ "$(js "Math.abs($rep_bm - $real_b) <= $MERGE_TOL * 2")" = true ]; then
	ok "the live node under B merged as the replay said ($real_b against $rep_bm)"
else
	bad "the live node under B merged $real_b times, its replay $rep_bm"
fi
# A trace with its tail cut is replayed up to the cut, with a warning.
size=$(wc -c <"$trace")
head -c $((size - 100)) "$trace" >"$tmp/torn.swt"
"$bin" policy compare --trace "$tmp/torn.swt" "$here/policy_a.lua" >"$tmp/torn.out" 2>&1
if grep -q "warning: the trace is torn at offset" "$tmp/torn.out"; then ok "a torn trace is replayed up to its tear, with a warning"; else
	bad "a torn trace: $(head -3 "$tmp/torn.out")"; fi
echo "# whatif: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
