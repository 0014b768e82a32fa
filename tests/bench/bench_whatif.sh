#!/bin/sh
# tests/bench/bench_whatif.sh STRATA — how fast `strata policy compare` replays a busy
# node's trace: `strata load --embedded --record-trace` runs tests/whatif/appends.lua for
# BENCH_WHATIF_SECONDS (20) at BENCH_WHATIF_RATE (2000) batches of 20 rows a second on 4
# shards (sync none), then the trace is replayed under the built-in policy and
# tests/whatif/policy_b.lua, each timed: simulated trace seconds per wall second, and rows
# replayed per second. Asserts nothing about speed.
set -u
strata=${1:?usage: bench_whatif.sh STRATA}
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${BENCH_WHATIF_SECONDS:-20}
rate=${BENCH_WHATIF_RATE:-2000}
echo "== bench_whatif: replay speed of strata policy compare on a busy node's trace"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-whatif.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$strata" load "$root/tests/whatif/appends.lua" --embedded "$tmp/d" --shards 4 --sync none -d "${seconds}s" -q \
	--record-trace "$tmp/t.swt" -- rate="$rate" batch=20 >"$tmp/load.out" 2>&1 || {
	cat "$tmp/load.out"
	echo "bench_whatif: the load failed"
	exit 1
}
"$strata" inspect --trace "$tmp/t.swt" | sed -n '1,3p'
for p in default "$root/tests/whatif/policy_b.lua"; do
	t0=$(date +%s%N)
	"$strata" policy compare --trace "$tmp/t.swt" --json "$p" >"$tmp/c.json" || exit 1
	t1=$(date +%s%N)
	node -e '
		const o = JSON.parse(require("fs").readFileSync(process.argv[1]));
		const wall = (process.argv[2] - process.argv[3]) / 1e9, p = o.policies[0];
		console.log(`${process.argv[4].split("/").pop().padEnd(14)} replayed ${o.trace_s.toFixed(1)} s of trace (${p.rows} rows) in ${wall.toFixed(2)} s: ` +
			`${(o.trace_s / wall).toFixed(1)} trace s per wall s, ${Math.round(p.rows / wall)} rows/s; ` +
			`${p.merges} merges, drained ${p.drained ? p.drain_s.toFixed(1) + " s after" : "not within 1 h"}`);
	' "$tmp/c.json" "$t1" "$t0" "$p"
done
