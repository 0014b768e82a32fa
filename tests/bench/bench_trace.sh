#!/bin/sh
# tests/bench/bench_trace.sh STRATA — what recording a workload trace (POST /v1/trace)
# costs the appends: durable HTTP appends (wrk, tests/bench/wrk_append.lua, BENCH_THREADS
# connections) against one node (--shards 4 --sync fsync, seals at 64 MiB, no merges), in
# alternating phases of BENCH_TRACE_SECONDS, off, on, off, on, for batches of 1 and of
# 100 rows (BENCH_TRACE_BATCHES). Prints per phase rows/s and append p50/p99/p99.9/max,
# and for the traced ones the records, dropped records and bytes the trace took; then
# each phase's ratio to the mean of its batch's "off" phases. Asserts nothing about
# speed; exits 1 when a request failed or the trace dropped records.
set -u
strata=${1:?usage: bench_trace.sh STRATA}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/bench
threads=${BENCH_THREADS:-4}
seconds=${BENCH_TRACE_SECONDS:-8}
batches=${BENCH_TRACE_BATCHES:-1,100}
echo "== bench_trace: appends over HTTP with a workload trace recording, next to none (same node, same run)"
command -v wrk >/dev/null 2>&1 || { echo "bench_trace: skipped: wrk is not installed (apt-get install wrk)"; exit 0; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-trace.XXXXXX") || exit 1
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cat >"$tmp/policy.lua" <<'P'
return { flush_interval_s = 0, sweep_interval_s = 0, merge_after_generations = 0, memtable_max_bytes = 64 * 1024 * 1024 }
P
"$strata" serve --listen 127.0.0.1:0 --ready-file "$tmp/ready" --data "$tmp/data" --shards 4 --sync fsync \
	--policy "$tmp/policy.lua" --no-watch-policy --log-level warn 2>"$tmp/server.log" &
pid=$!
i=0
while [ ! -s "$tmp/ready" ]; do
	kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ] || { cat "$tmp/server.log"; echo "bench_trace: the node did not start"; exit 1; }
	sleep 0.05
	i=$((i + 1))
done
url=http://$(cat "$tmp/ready")
echo "$("$strata" --version | head -n 1); $(getconf _NPROCESSORS_ONLN) cpus; wrk -t$threads -c$threads, $seconds s per phase"
status=0
results=""
n=0
for b in $(echo "$batches" | tr ',' ' '); do
	for phase in off on off on; do
		n=$((n + 1))
		if [ $phase = on ]; then
			curl -s -o /dev/null -X POST "$url/v1/trace" -d "{\"seconds\": 3600, \"name\": \"bench-$n\"}"
		fi
		WRK_APPEND_BATCH=$b wrk -t"$threads" -c"$threads" -d"${seconds}s" --timeout 10s -s "$here/wrk_append.lua" \
			"$url/v1/shards/0/rows" >"$tmp/wrk.out" 2>&1
		tr="- - -"
		if [ $phase = on ]; then
			curl -s -X DELETE "$url/v1/trace" >"$tmp/trace.json"
			tr=$(node -e 'const o=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(o.records+" "+o.dropped+" "+o.bytes)' "$tmp/trace.json")
			[ "$(echo "$tr" | cut -d' ' -f2)" = 0 ] || { echo "bench_trace: the trace dropped records: $tr"; status=1; }
		fi
		line=$(grep '^wrk_append:' "$tmp/wrk.out")
		[ -n "$line" ] || { cat "$tmp/wrk.out"; echo "bench_trace: wrk reported no result"; exit 1; }
		f() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
		[ "$(f status_errors)" -eq 0 ] || { echo "bench_trace: errors: $line"; status=1; }
		results="$results$b $phase $(f requests) $(f duration_us) $(f p50_us) $(f p99_us) $(f p999_us) $(f max_us) $tr
"
	done
done
echo "$results" | awk '
	NF == 11 { n++; b[n] = $1; ph[n] = $2; rows[n] = $3 * $1 / ($4 / 1e6); p50[n] = $5; p99[n] = $6; p999[n] = $7
		   mx[n] = $8; rec[n] = $9; drop[n] = $10; by[n] = $11
		   if ($2 == "off") { nr[$1] += rows[n]; np[$1] += $7; nn[$1]++ } }
	END {
		printf "%-6s %-6s %10s %8s %8s %9s %8s %9s %8s %10s %8s %8s\n", "batch", "trace", "rows/s", "p50_us",
		       "p99_us", "p99.9_us", "max_us", "records", "dropped", "bytes", "rows/s", "p99.9"
		for (i = 1; i <= n; i++)
			printf "%-6s %-6s %10.0f %8d %8d %9d %8d %9s %8s %10s %7.2fx %7.2fx\n", b[i], ph[i], rows[i], p50[i],
			       p99[i], p999[i], mx[i], rec[i], drop[i], by[i], rows[i] / (nr[b[i]] / nn[b[i]]),
			       p999[i] / (np[b[i]] / nn[b[i]])
	}'
echo "the last two columns: the phase against the mean of its batch's off phases"
exit $status
