#!/bin/sh
# whatif.sh — the policy what-if against reality (make test): a live `strata serve` runs
# tests/whatif/appends.lua for 4 s under policy A while POST /v1/trace records it; `strata
# policy compare` replays the trace under A and B in the simulator. Checked: the same
# trace and policy give the same report, byte for byte, and another policy another one;
# the replay under A did what the real node did (seals within SEAL_TOL_PCT %, merges
# within MERGE_TOL of the node's counts: the triggers count bytes and generations);
# B beats A in the replay (a lower peak of pending generations); and a second live node
# under B and the same load beats A too, by the same measure (sampled every 50 ms),
# merging as often as the replay said. The replay runs on the cost model `strata calibrate
# --buffered` measured here (the nodes run with --sync none: they write to the page cache);
# a model of a slow disk makes the same policy fall behind; --store azure counts and prices
# requests at a prices file's figures; --html draws the report. Prints "# whatif: N passed, N
# failed".
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

"$bin" calibrate --dir "$tmp" --mib 16 --buffered --out "$tmp/model" 2>"$tmp/cal.err"
if grep -q "^cpu_mib_s *= *[1-9]" "$tmp/model" && grep -q "^disk_write_mib_s *= *[1-9]" "$tmp/model" &&
	[ -z "$(ls -A "$tmp" | grep calibrate)" ]; then
	ok "strata calibrate measured the page cache and the merge CPU ($(tr '\n' ' ' <"$tmp/cal.err"))"
else
	bad "strata calibrate: $(cat "$tmp/cal.err" "$tmp/model" 2>&1 | head -5)"
fi
run_node a "$here/policy_a.lua"
trace=$tmp/a/traces/a.swt
if [ -s "$trace" ]; then ok "the live node under A recorded its trace"; else bad "no trace at $trace"; fi
"$bin" policy compare --trace "$trace" --model "$tmp/model" --json "$here/policy_a.lua" "$here/policy_b.lua" >"$tmp/cmp1.json" 2>"$tmp/cmp.err"
"$bin" policy compare --trace "$trace" --model "$tmp/model" --json "$here/policy_a.lua" "$here/policy_b.lua" >"$tmp/cmp2.json" 2>>"$tmp/cmp.err"
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

gets=$(js 'f[0].policies.every(p => p.gets.tables_p99 >= 1 && p.gets.tables_max >= p.gets.tables_p99 && p.gets.searched_p99 <= p.gets.tables_p99)' "$tmp/cmp1.json")
if [ "$gets" = true ]; then
	ok "the replay counts the tables each get probes (p99 A $(js 'f[0].policies[0].gets.tables_p99' "$tmp/cmp1.json"), B $(js 'f[0].policies[1].gets.tables_p99' "$tmp/cmp1.json"))"
else
	bad "tables per get: $(js 'JSON.stringify([f[0].policies[0].gets, f[0].policies[1].gets])' "$tmp/cmp1.json")"
fi
if [ "$(js 'f[0].policies.every(p => p.merge.peak_inputs >= 2 && p.merge.peak_memory_bytes_estimated > 0 && p.background_io.busy_s > 0 && p.background_io.written_bytes >= p.sealed_bytes + p.merge_bytes_out && p.background_io.written_bytes <= 1.05 * (p.sealed_bytes + p.merge_bytes_out))' "$tmp/cmp1.json")" = true ] &&
	[ "$(js 'f[0].policies[0].merge.peak_inputs === 6' "$tmp/cmp1.json")" = true ]; then
	ok "merge inputs (A: 6, its cap), merge memory and background IO are reported (the bytes written: what seals and merges wrote, within 5%)"
else
	bad "merge and IO figures: $(js 'JSON.stringify(f[0].policies.map(p => [p.merge, p.background_io]))' "$tmp/cmp1.json")"
fi
if [ "$(js 'f[0].policies.every(p => p.end_pending_by_shard.length === 2 && p.end_pending_by_shard.reduce((a, b) => a + b) === p.end_pending_total && p.final_pending_by_shard.reduce((a, b) => a + b) === p.pending_when_quiet)' "$tmp/cmp1.json")" = true ]; then
	ok "pending generations per shard at the trace's end and when the replay ended add up to the totals"
else
	bad "pending per shard: $(js 'JSON.stringify(f[0].policies.map(p => [p.end_pending_by_shard, p.end_pending_total, p.final_pending_by_shard, p.pending_when_quiet]))' "$tmp/cmp1.json")"
fi
# The model binds: a disk of 1 MiB/s cannot keep up with A's seals, so the memtables grow
# while each seal waits for the disk, and the background is busy far longer.
sed 's/^disk_write_mib_s .*/disk_write_mib_s = 1/' "$tmp/model" >"$tmp/slow.model"
"$bin" policy compare --trace "$trace" --model "$tmp/slow.model" --json "$here/policy_a.lua" >"$tmp/slow.json" 2>>"$tmp/cmp.err"
slow=$(js '(() => { const a = f[0].policies[0], s = f[1].policies[0]; return s.peak_memtable_bytes > 2 * a.peak_memtable_bytes && s.background_io.busy_s > 10 * a.background_io.busy_s })()' "$tmp/cmp1.json" "$tmp/slow.json")
if [ "$slow" = true ]; then
	ok "on a 1 MiB/s disk A falls behind: memtables peak at $(js 'f[1].policies[0].peak_memtable_bytes + " bytes against " + f[0].policies[0].peak_memtable_bytes + ", background busy " + f[1].policies[0].background_io.busy_s.toFixed(2) + " s against " + f[0].policies[0].background_io.busy_s.toFixed(3)' "$tmp/cmp1.json" "$tmp/slow.json")"
else
	bad "a slow disk: $(js 'JSON.stringify([f[0].policies[0].peak_memtable_bytes, f[1].policies[0].peak_memtable_bytes, f[0].policies[0].background_io, f[1].policies[0].background_io])' "$tmp/cmp1.json" "$tmp/slow.json")"
fi
# On a remote store: requests by kind, priced by a prices file.
printf 'name test prices\nput 1\npart 2\ncommit 3\nget 0.5\nhead 0.25\nlist 4\ndelete 0\n' >"$tmp/prices"
"$bin" policy compare --trace "$trace" --model "$tmp/model" --store azure --prices "$tmp/prices" --json "$here/policy_a.lua" >"$tmp/az.json" 2>>"$tmp/cmp.err"
usd=$(js '(() => { const r = f[0].policies[0].object_store, q = r.requests; return Math.abs(r.usd - (q.put * 1 + q.part * 2 + q.commit * 3 + q.get * 0.5 + q.head * 0.25 + q.list * 4) / 1000) < 1e-9 && q.put > 0 && q.get > 0 && r.usd > 0 && f[0].prices.name === "test prices" && f[0].store === "azure" })()' "$tmp/az.json")
if [ "$usd" = true ]; then
	ok "on Azure: $(js 'JSON.stringify(f[0].policies[0].object_store.requests)' "$tmp/az.json") requests, USD $(js 'f[0].policies[0].object_store.usd' "$tmp/az.json") at the prices file's figures"
else
	bad "object-store requests: $(head -c 600 "$tmp/az.json") $(tail -2 "$tmp/cmp.err")"
fi
# Parts: with 64 KiB parts, each larger write is parts and one Put Block List (Azure).
{ cat "$tmp/model"; echo "store_part_bytes = 65536"; } >"$tmp/parts.model"
"$bin" policy compare --trace "$trace" --model "$tmp/parts.model" --store azure --json "$here/policy_a.lua" >"$tmp/parts.json" 2>>"$tmp/cmp.err"
if [ "$(js '(() => { const q = f[0].policies[0].object_store.requests, p = f[1].policies[0].object_store.requests; return q.part > 0 && q.commit > 0 && q.part >= 2 * q.commit && q.put < p.put })()' "$tmp/parts.json" "$tmp/az.json")" = true ]; then
	ok "streamed writes over a part are parts and a commit: $(js 'JSON.stringify(f[0].policies[0].object_store.requests)' "$tmp/parts.json")"
else
	bad "parts: $(js 'JSON.stringify([f[0].policies[0].object_store.requests, f[1].policies[0].object_store.requests])' "$tmp/parts.json" "$tmp/az.json")"
fi
"$bin" policy compare --trace "$trace" --model "$tmp/model" --html "$tmp/report.html" "$here/policy_a.lua" "$here/policy_b.lua" >"$tmp/text.out" 2>>"$tmp/cmp.err"
if [ "$(grep -c '<svg' "$tmp/report.html")" -eq 3 ] && grep -q 'policy_b.lua' "$tmp/report.html" &&
	[ "$(grep -c '<polyline' "$tmp/report.html")" -eq 8 ] && ! grep -q 'src=\|href=' "$tmp/report.html" &&
	grep -q "tables per get, p99" "$tmp/text.out"; then
	ok "--html writes a self-contained page: 3 charts, both policies' series, nothing fetched"
else
	bad "--html: $(grep -c '<svg' "$tmp/report.html" 2>&1) charts, $(grep -c '<polyline' "$tmp/report.html" 2>&1) lines"
fi
"$bin" policy compare --trace "$trace" --model "$tmp/prices" "$here/policy_a.lua" >"$tmp/badmodel.out" 2>&1
if grep -q "model $tmp/prices:1: expected KEY = VALUE" "$tmp/badmodel.out"; then ok "a bad model file is refused, naming its line"; else
	bad "a bad model file: $(head -2 "$tmp/badmodel.out")"; fi

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
