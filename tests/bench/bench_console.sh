#!/bin/sh
# tests/bench/bench_console.sh STRATA — what open consoles cost the clients: durable HTTP
# appends (wrk, tests/bench/wrk_append.lua: BENCH_THREADS connections, batches of
# BENCH_CONSOLE_BATCH rows of 16-byte keys and 200-byte values) against one node
# (--shards 4 --sync fsync, the default policy: its seals and merges run), in alternating
# phases of BENCH_CONSOLE_SECONDS each, in one run on one node:
#   none       no console open
#   consoles   TABS (3) headless Chromium tabs on GET /, each polling /v1/console/state
#              every second and drawing its charts (the browser runs on this machine too)
#   pollers    the same requests without a browser: TABS curl loops asking
#              /v1/console/state once a second (the node's share of the cost alone)
# each twice (none, consoles, pollers, none, consoles, pollers). Prints per phase rows/s,
# append p50/p99/p99.9/max, the console requests the node served in it, the node's CPU
# per second, and each phase's ratio to the mean of the two "none" phases. Asserts nothing
# about speed; exits 1 when a request failed. Environment: BENCH_THREADS (2),
# BENCH_CONSOLE_SECONDS (10), BENCH_CONSOLE_BATCH (10), BENCH_CONSOLE_TABS (3).
set -u
strata=${1:?usage: bench_console.sh STRATA}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/bench
threads=${BENCH_THREADS:-2}
seconds=${BENCH_CONSOLE_SECONDS:-10}
batch=${BENCH_CONSOLE_BATCH:-10}
TABS=${BENCH_CONSOLE_TABS:-3}
BUILD=$(cd "$(dirname "$strata")" && pwd)
echo "== bench_console: appends over HTTP with $TABS consoles open, next to none (same node, same run)"
say() { echo "bench_console: $1"; exit "$3"; }
command -v wrk >/dev/null 2>&1 || say "skipped: wrk is not installed (apt-get install wrk)" "" 0
. "$root/tests/console/playwright.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-console.XXXXXX") || exit 1
pid=""
bg=""
cleanup() {
	for p in $bg $pid; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$strata" serve --listen 127.0.0.1:0 --ready-file "$tmp/ready" --data "$tmp/data" --shards 4 --sync fsync \
	--log-level warn 2>"$tmp/server.log" &
pid=$!
i=0
while [ ! -s "$tmp/ready" ]; do
	kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ] || { cat "$tmp/server.log"; say "the node did not start" "" 1; }
	sleep 0.05
	i=$((i + 1))
done
url=http://$(cat "$tmp/ready")
echo "$("$strata" --version | head -n 1); $(getconf _NPROCESSORS_ONLN) cpus; wrk -t$threads -c$threads," \
	"batch $batch, $seconds s per phase; $TABS tabs of $("$CHROMIUM" --version 2>/dev/null | head -n 1)"
echo "the node: --shards 4 --sync fsync, default policy; every phase appends to the same node (its backlog grows)"

# cpu_ticks: the node's user+system CPU ticks so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# served: console state requests the node answered so far.
served() {
	curl -s "$url/metrics" | awk -F' ' '/^strata_http_requests_total\{handler="console_state"/ { n += $2 } END { print n + 0 }'
}
status=0
results=""
for phase in none consoles pollers none consoles pollers; do
	bg=""
	case $phase in
	consoles)
		PLAYWRIGHT=$pw CHROMIUM=$CHROMIUM URL=$url TABS=$TABS node "$here/console_tabs.js" >"$tmp/tabs.out" 2>&1 &
		bg=$!
		i=0
		until grep -q "open" "$tmp/tabs.out" 2>/dev/null; do
			if ! kill -0 "$bg" 2>/dev/null || [ $i -ge 600 ]; then cat "$tmp/tabs.out"; say "the browser did not start" "" 1; fi
			sleep 0.1
			i=$((i + 1))
		done ;;
	pollers)
		for t in $(seq "$TABS"); do
			(while :; do curl -s -o /dev/null "$url/v1/console/state"; sleep 1; done) &
			bg="$bg $!"
		done ;;
	esac
	c0=$(cpu_ticks)
	s0=$(served)
	WRK_APPEND_BATCH=$batch wrk -t"$threads" -c"$threads" -d"${seconds}s" --timeout 10s -s "$here/wrk_append.lua" \
		"$url/v1/shards/0/rows" >"$tmp/wrk.out" 2>&1
	c1=$(cpu_ticks)
	s1=$(served)
	for p in $bg; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ "$phase" = consoles ] && grep "polls=" "$tmp/tabs.out" | sed 's/^/  /'
	line=$(grep '^wrk_append:' "$tmp/wrk.out")
	[ -n "$line" ] || { cat "$tmp/wrk.out"; say "wrk reported no result" "" 1; }
	f() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	[ "$(f status_errors)" -eq 0 ] && [ "$(f socket_errors)" -eq 0 ] || { echo "bench_console: errors: $line"; status=1; }
	results="$results$phase $(f requests) $(f duration_us) $(f p50_us) $(f p99_us) $(f p999_us) $(f max_us) $((s1 - s0)) $((c1 - c0))
"
done
tick=$(getconf CLK_TCK)
echo "$results" | awk -v b="$batch" -v tick="$tick" '
	NF == 9 { n++; ph[n] = $1; rows[n] = $2 * b / ($3 / 1e6); p50[n] = $4; p99[n] = $5; p999[n] = $6; mx[n] = $7
		  srv[n] = $8; cpu[n] = $9 / tick / ($3 / 1e6)
		  if ($1 == "none") { nr += rows[n]; np += $6; nn++ } }
	END {
		printf "%-9s %10s %9s %9s %10s %9s %9s %9s %8s %8s\n", "phase", "rows/s", "p50_us", "p99_us", "p99.9_us",
		       "max_us", "consoleq", "node_cpu", "rows/s", "p99.9"
		printf "%-9s %10s %9s %9s %10s %9s %9s %9s %8s %8s\n", "", "", "", "", "", "", "served", "per s", "vs none", "vs none"
		for (i = 1; i <= n; i++)
			printf "%-9s %10.0f %9d %9d %10d %9d %9d %9.2f %7.2fx %7.2fx\n", ph[i], rows[i], p50[i], p99[i], p999[i],
			       mx[i], srv[i], cpu[i], rows[i] / (nr / nn), p999[i] / (np / nn)
	}'
echo "vs none: the phase against the mean of the two none phases; node_cpu: the node's CPU seconds per second"
exit $status
