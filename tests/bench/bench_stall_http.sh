#!/bin/sh
# tests/bench/bench_stall_http.sh BINDIR STRATA — the stall benchmark against a live node.
#
# `STRATA serve --sync fsync --shards 1` on a fresh directory, driven by `STRATA load
# tests/bench/stall_http.lua` over loopback (keep-alive, binary batches):
#   1. capacity: one connection's back-to-back durable 1-row appends for 3 s;
#   2. merge: a backlog of BENCH_STALL_GENS generations of BENCH_STALL_GEN_MB MiB
#      (incompressible), then one writer paced at BENCH_STALL_PCT % of the capacity (or
#      BENCH_STALL_RATE/s): 5 s idle, then while POST merge-wal folds the backlog in one
#      pass (--merge-max-inputs = the generation count), until nothing is pending and
#      the node's reaper has deleted the merged generations (paced, after the commits);
#   3. hook: the same writer and GET /healthz at 50/s, 5 s idle, then 10 s after PUT
#      /v1/policy of `on_seal = function() while true do end end` (flush_interval_s = 1).
# Latency is measured from each request's intended start (open model). Prints
# p50/p99/p99.9/max per phase and the during/idle ratios, then, from the node's
# slow-request log (GET /v1/slow-requests), where each append of BENCH_STALL_SLOW_US or
# more spent its time (node/server/README.md, "Where a request spends its time");
# asserts nothing about speed.
#
# The node's side: its HTTP loop's longest lag (how late a 10 ms timer fired) in the idle
# phase and during the merge, and the slow-request log of the merge phase. The machine's
# side: the hypervisor's steal of its CPUs in each phase (/proc/stat), as bench_stall
# prints it: on a shared VM a stall can be the host's.
#
# Environment: BENCH_STALL_GENS (32), BENCH_STALL_GEN_MB (32), BENCH_STALL_PCT (40),
# BENCH_STALL_RATE, BENCH_STALL_HTTP_MODES ("merge hook"), BENCH_STALL_SLOW_US (3000),
# BENCH_STALL_CONNECTIONS (16: the client's connections; too few for the pace, and the
# client's own queue is what the figures show), BENCH_DIR.
set -u
bindir=${1:?usage: bench_stall_http.sh BINDIR STRATA}
strata=${2:?usage: bench_stall_http.sh BINDIR STRATA}
here=$(dirname "$0")
gens=${BENCH_STALL_GENS:-32}
gen_mb=${BENCH_STALL_GEN_MB:-32}
pct=${BENCH_STALL_PCT:-40}
fixed_rate=${BENCH_STALL_RATE:-}
modes=${BENCH_STALL_HTTP_MODES:-merge hook}
slow_us=${BENCH_STALL_SLOW_US:-3000}
conns=${BENCH_STALL_CONNECTIONS:-16}
idle_s=5 # stall_http.lua's idle phase
base=${BENCH_DIR:-${TMPDIR:-/tmp}}

die() { echo "bench_stall_http: $*" >&2; exit 2; }
[ -x "$strata" ] || die "$strata is not an executable (build it with make all)"
[ -f "$here/stall_http.lua" ] || die "$here/stall_http.lua is missing"
case "$gens$gen_mb$pct${fixed_rate}$slow_us$conns" in *[!0-9]*) die "BENCH_STALL_* must be positive integers" ;; esac

echo "== bench_stall_http: append latency of a live node while it merges a backlog, and under a looping hook"
echo "$("$strata" --version 2>&1 | head -n 1); host: $(uname -sr), $(getconf _NPROCESSORS_ONLN) cpus"
echo "data dir: $base ($(df -T "$base" 2>/dev/null | awk 'NR==2 {print $2}'))"
echo "node    : strata serve --shards 1 --sync fsync (reply once durable), policy: no timers, no triggers"
echo "client  : strata load, one writer (1 row: 16-byte key, 200-byte value) paced at ${fixed_rate:-$pct% of capacity}${fixed_rate:+/s}, $conns connections,"
echo "          latency from the intended start; backlog ${gens} x ${gen_mb} MiB incompressible, merged in one pass"
echo

dir=""
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	pid=""
	[ -n "$dir" ] && rm -rf "$dir"
	dir=""
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# start_node: a fresh node in $dir; sets addr and pid.
start_node() {
	dir=$(mktemp -d "$base/strata-bench-stall-http-XXXXXX") || die "mktemp in $base failed"
	cat >"$dir/policy.lua" <<-'EOF'
	-- bench_stall_http: nothing seals or merges by itself; the client does both.
	return {
		flush_interval_s = 0,
		sweep_interval_s = 0,
		merge_after_generations = 0,
		merge_max_generations = 0,
		memtable_max_bytes = 1024 * 1024 * 1024,
		background_io_mib_per_s = 0,
	}
	EOF
	"$strata" serve --listen 127.0.0.1:0 --ready-file "$dir/ready" --data "$dir/data" --shards 1 \
		--sync fsync --merge-max-inputs "$gens" --policy "$dir/policy.lua" --no-watch-policy \
		--slow-request-us "$slow_us" --slow-requests 100000 --log-level error 2>"$dir/server.log" &
	pid=$!
	i=0
	while [ ! -s "$dir/ready" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 400 ]; then
			echo "bench_stall_http: the server did not become ready; its log:" >&2
			cat "$dir/server.log" >&2
			exit 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	addr=$(cat "$dir/ready")
}

stop_node() {
	kill -TERM "$pid"
	wait "$pid"
	src=$?
	pid=""
	if [ $src -ne 0 ]; then
		echo "bench_stall_http: the server exited with status $src; its log:" >&2
		tail -n 20 "$dir/server.log" >&2
		status=1
	fi
	rm -rf "$dir"
	dir=""
}

# slow_report: where the node's slow appends spent their time (GET /v1/slow-requests:
# every request of the run that took $slow_us µs or more), by the stage that took
# longest, and the slowest few with every stage.
slow_report() {
	if ! command -v python3 >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
		echo "  (no python3 or curl here: the slow-request log is not summarised)"
		return
	fi
	curl -s "http://$addr/v1/slow-requests" >"$dir/slow.json" || return
	python3 - "$dir/slow.json" "$slow_us" "$(field loop_lag_idle_ms "$line")" <<-'PY'
	import json, sys
	o = json.load(open(sys.argv[1]))
	rows = [r for r in o["requests"] if r["handler"] == "rows"]
	print("  the node's HTTP loop during the merge: its timer fired at most %.3f ms late (the time the loop "
	      "could not read a socket; idle: %s ms)" % (o["loop_lag_max_us"] / 1e3, sys.argv[3]))
	print("  appends of %s us or more: %d (of %d slow requests logged)" % (sys.argv[2], len(rows), o["logged"]))
	if not rows:
	    sys.exit(0)
	by = {}
	for r in rows:
	    st = max(r["stages_us"], key=lambda k: r["stages_us"][k])
	    by[st] = by.get(st, 0) + 1
	print("  longest stage of each: " + ", ".join("%s %d" % kv for kv in sorted(by.items(), key=lambda kv: -kv[1])))
	names = list(rows[0]["stages_us"].keys())
	print("  %-24s %9s " % ("slowest appends (ms)", "total") + " ".join("%8s" % n for n in names))
	for r in sorted(rows, key=lambda r: -r["total_us"])[:5]:
	    print("  %-24s %9.3f " % (r["time"][11:], r["total_us"] / 1e3) +
	          " ".join("%8.3f" % (r["stages_us"][n] / 1e3) for n in names))
	PY
}

# run_load MODE RATE: the script's figures line, or exits.
run_load() {
	out=$("$strata" load "$here/stall_http.lua" --target "http://$addr" --batch -q -- "$1" "$2" \
		"$gens" "$gen_mb" "$conns" "$(getconf CLK_TCK)" 2>"$dir/load.err")
	lrc=$?
	line=$(echo "$out" | grep '^stall_http:')
	if [ -z "$line" ] || [ $lrc -ne 0 ]; then
		echo "bench_stall_http: strata load ($1) exited $lrc; its output:" >&2
		echo "$out" | tail -n 30 >&2
		tail -n 20 "$dir/load.err" >&2
		tail -n 20 "$dir/server.log" >&2
		exit 1
	fi
	echo "$line"
}

field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }'; }
row() { # NAME LINE PREFIX
	printf "  %-26s %9s %9s %9s %9s  n=%s\n" "$1" "$(field "${3}_p50" "$2")" "$(field "${3}_p99" "$2")" \
		"$(field "${3}_p999" "$2")" "$(field "${3}_max" "$2")" "$(field "${3}_n" "$2")"
}

status=0
rate=$fixed_rate
if [ -z "$rate" ]; then
	start_node
	cap=$(run_load capacity 0)
	stop_node
	n=$(field writer.iterations "$cap")
	rate=$(awk -v n="$n" -v p="$pct" 'BEGIN { r = int(n / 3 * p / 100); print r < 1 ? 1 : r }')
	echo "capacity: $(awk -v n="$n" 'BEGIN { printf "%.0f", n / 3 }') appends/s on one connection; pacing at $rate/s"
fi
printf "  %-26s %9s %9s %9s %9s\n" "phase (ms)" p50 p99 p99.9 max
for m in $modes; do
	case $m in
	merge)
		start_node
		t0=$(date +%s)
		line=$(run_load merge "$rate")
		slow=$(slow_report)
		stop_node
		row "writer, idle" "$line" writer_idle
		row "writer, during the merge" "$line" writer_during
		echo "  merge of ${gens} x ${gen_mb} MiB: $(field merge_s "$line") s after the idle phase," \
			"then its deletes $(field deletes_s "$line") s (both in \"during\");" \
			"during/idle p99.9 $(ratio "$(field writer_during_p999 "$line")" "$(field writer_idle_p999 "$line")")," \
			"max $(field writer_during_max "$line") ms"
		echo "  steal (CPU time the hypervisor took from this machine's CPUs): idle $(field steal_idle_ms "$line") ms" \
			"in ${idle_s} s, during the merge and its deletes $(field steal_during_ms "$line") ms in" \
			"$(awk -v a="$(field merge_s "$line")" -v b="$(field deletes_s "$line")" 'BEGIN { printf "%.1f", a + b }') s" \
			"(-1: no steal column in /proc/stat)"
		echo "$slow"
		;;
	hook)
		start_node
		line=$(run_load hook "$rate")
		stop_node
		row "writer, idle" "$line" writer_idle
		row "writer, looping hook" "$line" writer_hook
		row "GET /healthz, idle" "$line" health_idle
		row "GET /healthz, looping hook" "$line" health_hook
		echo "  looping hook: writer p99.9 $(ratio "$(field writer_hook_p999 "$line")" "$(field writer_idle_p999 "$line")")" \
			"of idle, /healthz p99.9 $(ratio "$(field health_hook_p999 "$line")" "$(field health_idle_p999 "$line")")"
		;;
	*) die "BENCH_STALL_HTTP_MODES: unknown mode $m (merge, hook)" ;;
	esac
done
exit $status
