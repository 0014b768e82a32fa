#!/bin/sh
# tests/bench/bench_http.sh BINDIR STRATA — durable appends over HTTP on loopback, beside
# the same workload embedded, in the same run, with two clients.
#
# wrk: for each batch size N, start `STRATA serve --listen 127.0.0.1:0 --sync fsync
# --shards 1` on a fresh data directory (policy: seal at 64 MiB, no timers, no merges: what
# bench_append's monitor does), drive it with wrk (BENCH_THREADS threads, one keep-alive
# connection each) POSTing NDJSON batches of N rows (16-byte keys, 200-byte values,
# unique keys) to /v1/shards/0/rows (tests/bench/wrk_append.lua), read the shard's
# stats, stop the server by its PID; then run BINDIR/bench_append with the same threads,
# batch and duration (strata only). Prints rows/s of both, the ratio HTTP/embedded, and
# the node's CPU time per row (from /proc/PID/stat: not the client's).
# strata load: the same rows from tests/bench/load_append.lua (BENCH_THREADS virtual
# users, closed loop) against a fresh node started the same way, then the same script
# --embedded in a fresh directory with the same shards, sync and policy: one Lua script,
# two paths to the engine. Prints rows/s of both, their ratio and the node's CPU per row.
# Asserts nothing about speed; exits 1 when the server or the engine reports an error.
#
# Environment: BENCH_THREADS (4), BENCH_HTTP_SECONDS (BENCH_SECONDS, else 5),
# BENCH_HTTP_BATCHES (BENCH_BATCHES, else "1,100"), BENCH_HTTP_CLIENTS ("wrk,load": either
# or both; wrk is skipped with a note where it is not installed), BENCH_DIR (data directory).
set -u
bindir=${1:?usage: bench_http.sh BINDIR STRATA}
strata=${2:?usage: bench_http.sh BINDIR STRATA}
here=$(dirname "$0")
threads=${BENCH_THREADS:-4}
seconds=${BENCH_HTTP_SECONDS:-${BENCH_SECONDS:-5}}
batches=${BENCH_HTTP_BATCHES:-${BENCH_BATCHES:-1,100}}
base=${BENCH_DIR:-${TMPDIR:-/tmp}}
clients=${BENCH_HTTP_CLIENTS:-wrk,load}

die() { echo "bench_http: $*" >&2; exit 2; }
posint() {
	case "$2" in ''|*[!0-9]*) die "$1=$2 is not a positive integer" ;; esac
	if [ "$2" -lt 1 ] || [ "$2" -gt "$3" ]; then die "$1 must be 1..$3, not $2"; fi
}
posint BENCH_THREADS "$threads" 256
posint BENCH_HTTP_SECONDS "$seconds" 3600
for b in $(echo "$batches" | tr ',' ' '); do posint BENCH_HTTP_BATCHES "$b" 100000; done

use_wrk=0
use_load=0
for c in $(echo "$clients" | tr ',' ' '); do
	case $c in
	wrk) use_wrk=1 ;;
	load) use_load=1 ;;
	*) die "BENCH_HTTP_CLIENTS: no client '$c' (wrk, load)" ;;
	esac
done
echo "== bench_http: appends over HTTP (loopback, keep-alive) vs the same workload embedded"
if [ $use_wrk -eq 1 ] && ! command -v wrk >/dev/null 2>&1; then
	echo "bench_http: wrk skipped: it is not installed (Debian: apt-get install wrk)"
	use_wrk=0
fi
[ $use_wrk -eq 1 ] || [ $use_load -eq 1 ] || exit 0
command -v curl >/dev/null 2>&1 || die "curl is not installed"
[ -x "$strata" ] || die "$strata is not an executable (build it with make all)"
[ -x "$bindir/bench_append" ] || die "$bindir/bench_append is missing"
[ -f "$here/wrk_append.lua" ] || die "$here/wrk_append.lua is missing"
[ -f "$here/load_append.lua" ] || die "$here/load_append.lua is missing"
wrkv=""
[ $use_wrk -eq 1 ] && wrkv=", $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2)"
echo "$("$strata" --version 2>&1 | head -n 1)$wrkv"
echo "host: $(uname -sr), $(getconf _NPROCESSORS_ONLN) cpus; data dir: $base"
echo "workload: $threads threads, one keep-alive connection each (wrk -t$threads -c$threads), 16-byte keys" \
	"(unique), 200-byte values, $seconds s per config, fresh directory per config"
echo "http    : strata serve --shards 1 --sync fsync (reply once the group commit's fdatasync is done)," \
	"NDJSON body, POST /v1/shards/0/rows;"
echo "          policy: seal at 64 MiB, no flush timer, no sweeps, no merges (as bench_append's monitor)"
echo "embedded: bench_append, strata only: strata_append from $threads threads, same batch, sync=fsync, seal at 64 MiB"
echo "latency : http = wrk's request latency (send to reply), embedded = one strata_append call"
echo "load    : strata load tests/bench/load_append.lua, $threads virtual users (closed loop), the same rows:" \
	"--target a fresh node as above, then --embedded a fresh directory (--shards 1 --sync fsync, the same policy)"
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

# field NAME LINE: the value of NAME=value in a line of words.
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# json_num NAME JSON: a numeric member of a flat JSON object.
json_num() { echo "$2" | sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p"; }

# load_num NAME FILE: a top-level number of strata load's --json output (one member a line).
load_num() { sed -n "s/^ \"$1\": \([0-9.e+-]*\),*$/\1/p" "$2" | head -n 1; }

# write_policy: the policy both sides run, in $dir.
write_policy() {
	cat >"$dir/policy.lua" <<-'EOF'
	-- bench_http: seal at 64 MiB, nothing else (the embedded side seals the same way).
	return {
		flush_interval_s = 0,
		sweep_interval_s = 0,
		merge_after_generations = 0,
		memtable_max_bytes = 64 * 1024 * 1024,
	}
	EOF
}

# start_node B: a fresh node on $dir for batch B; sets pid and addr.
start_node() {
	write_policy
	"$strata" serve --listen 127.0.0.1:0 --ready-file "$dir/ready" --data "$dir/data" --shards 1 \
		--sync fsync --policy "$dir/policy.lua" --no-watch-policy --log-level warn \
		2>"$dir/server.log" &
	pid=$!
	i=0
	while [ ! -s "$dir/ready" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 200 ]; then
			echo "bench_http: the server did not become ready (batch $1); its log:" >&2
			cat "$dir/server.log" >&2
			exit 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	addr=$(cat "$dir/ready")
}

# node_ticks: the node's CPU time since its start (user + system, every thread), in ticks.
node_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat" 2>/dev/null; }

# stop_node B: stop the node by its PID; a non-zero exit is an error of the run.
stop_node() {
	kill -TERM "$pid"
	wait "$pid"
	src=$?
	pid=""
	if [ $src -ne 0 ]; then
		echo "bench_http: the server exited with status $src (batch $1); its log:" >&2
		cat "$dir/server.log" >&2
		status=1
	fi
}

# us_per_row TICKS ROWS: CPU microseconds per row, or n/a.
us_per_row() {
	awk -v t="${1:-0}" -v hz="$(getconf CLK_TCK)" -v r="${2:-0}" \
		'BEGIN { if (r > 0 && t > 0) printf "%.2f", t / hz * 1e6 / r; else print "n/a" }'
}

# run_load B ARGS...: strata load of batch B with ARGS (its target); prints "rows/s rows
# errors" (a failed run: "0 0 1", and status 1).
run_load() {
	lb=$1
	shift
	"$strata" load "$here/load_append.lua" "$@" -c "$threads" -d "${seconds}s" -q \
		--json "$dir/load.json" -- batch="$lb" vus="$threads" >"$dir/load.out" 2>&1
	lrc=$?
	lrows=$(load_num rows_per_s "$dir/load.json" 2>/dev/null)
	if [ $lrc -ne 0 ] || [ -z "$lrows" ]; then
		echo "bench_http: strata load $* exited $lrc (batch $lb); its output:" >&2
		tail -n 20 "$dir/load.out" >&2
		status=1
		echo "0 0 1"
		return
	fi
	echo "$lrows $(load_num rows "$dir/load.json") $(load_num errors "$dir/load.json")"
}

status=0
results=""
loads=""
for b in $(echo "$batches" | tr ',' ' '); do
	if [ $use_wrk -eq 1 ]; then
		dir=$(mktemp -d "$base/strata-bench-http-XXXXXX") || die "mktemp in $base failed"
		start_node "$b"

		WRK_APPEND_BATCH=$b wrk -t"$threads" -c"$threads" -d"${seconds}s" --timeout 10s \
			-s "$here/wrk_append.lua" "http://$addr/v1/shards/0/rows" >"$dir/wrk.out" 2>&1
		line=$(grep '^wrk_append:' "$dir/wrk.out")
		# The node's CPU time (user + system, all threads, since its start), before anything else asks it.
		ticks=$(node_ticks)
		stats=$(curl -sS "http://$addr/v1/shards/0/stats")
		stop_node "$b"
		if [ -z "$line" ]; then
			echo "bench_http: wrk reported no result (batch $b):" >&2
			cat "$dir/wrk.out" >&2
			exit 1
		fi
		reqs=$(field requests "$line")
		dur=$(field duration_us "$line")
		serr=$(field status_errors "$line")
		kerr=$(field socket_errors "$line")
		hp50=$(field p50_us "$line")
		hp99=$(field p99_us "$line")
		rows_appended=$(json_num rows_appended "$stats")
		syncs=$(json_num wal_syncs "$stats")
		ok=$((reqs - serr))
		if [ "$serr" -ne 0 ]; then
			echo "bench_http: $serr requests got an error status (batch $b); server log:" >&2
			tail -n 20 "$dir/server.log" >&2
			status=1
		fi
		if [ -z "$rows_appended" ] || [ "$rows_appended" -lt $((ok * b)) ]; then
			echo "bench_http: the shard counted ${rows_appended:-no} rows, wrk $((ok * b)) acknowledged (batch $b)" >&2
			status=1
		fi
		[ "$kerr" -ne 0 ] && echo "bench_http: note: $kerr socket errors or timeouts (batch $b)" >&2
		rm -rf "$dir"
		dir=""

		eout=$(BENCH_ENGINES=strata BENCH_THREADS=$threads BENCH_BATCHES=$b BENCH_SECONDS=$seconds \
			BENCH_DIR=$base "$bindir/bench_append" 2>&1) || {
			echo "bench_http: bench_append failed (batch $b):" >&2
			echo "$eout" >&2
			status=1
		}
		erow=$(echo "$eout" | awk -v b="$b" -v t="$threads" '$1 == "strata" && $2 == t && $3 == b && NF >= 10 { print $4, $6, $7; exit }')
		if [ -z "$erow" ]; then
			echo "bench_http: no strata row in bench_append's output (batch $b):" >&2
			echo "$eout" >&2
			erow="0 0 0"
			status=1
		fi
		cpu_us_row=$(us_per_row "$ticks" "$rows_appended")
		results="$results$b $ok $dur $hp50 $hp99 $syncs $erow $cpu_us_row
	"
	fi
	[ $use_load -eq 1 ] || continue

	# strata load, one script: over HTTP to a fresh node, then in-process.
	dir=$(mktemp -d "$base/strata-bench-http-XXXXXX") || die "mktemp in $base failed"
	start_node "$b"
	lh=$(run_load "$b" --target "http://$addr")
	ticks=$(node_ticks)
	stats=$(curl -sS "http://$addr/v1/shards/0/stats")
	stop_node "$b"
	rows_appended=$(json_num rows_appended "$stats")
	set -- $lh
	if [ "$3" != 0 ] || [ -z "$rows_appended" ] || [ "$rows_appended" -lt "$2" ]; then
		echo "bench_http: strata load over HTTP: $3 errors, the shard counted ${rows_appended:-no}" \
			"rows, $2 acknowledged (batch $b)" >&2
		status=1
	fi
	lhrows=$1
	lcpu=$(us_per_row "$ticks" "$rows_appended")
	le=$(run_load "$b" --embedded "$dir/embedded" --shards 1 --sync fsync --policy "$dir/policy.lua")
	set -- $le
	if [ "$3" != 0 ]; then
		echo "bench_http: strata load --embedded: $3 errors (batch $b)" >&2
		status=1
	fi
	loads="$loads$b $lhrows $1 $lcpu
"
	rm -rf "$dir"
	dir=""
done

[ $use_wrk -eq 1 ] && echo "$results" | awk '
	BEGIN {
		printf "%-6s %12s %10s %11s %11s %10s %14s %11s %11s %14s %16s\n", "batch", "http_rows/s",
		       "http_req/s", "http_p50_us", "http_p99_us", "wal_syncs", "embedded_rows/s",
		       "emb_p50_us", "emb_p99_us", "http/embedded", "node_cpu_us/row"
	}
	NF == 10 {
		secs = $3 / 1e6
		hrows = (secs > 0) ? $2 * $1 / secs : 0
		hreqs = (secs > 0) ? $2 / secs : 0
		ratio = ($7 > 0) ? sprintf("%.2fx", hrows / $7) : "n/a"
		printf "%-6s %12.0f %10.0f %11.0f %11.0f %10s %14.0f %11.1f %11.1f %14s %16s\n", $1, hrows,
		       hreqs, $4, $5, $6, $7, $8, $9, ratio, $10
	}'
if [ $use_wrk -eq 1 ]; then
	echo "http/embedded: rows/s over HTTP divided by rows/s of strata_append with the same threads and batch" \
		"(1.00x = HTTP costs nothing)"
	echo "node_cpu_us/row: the node's CPU time (user + system, every thread, /proc/PID/stat) over the rows it" \
		"appended: what a row costs the node whatever the client's share of the machine"
fi
if [ $use_load -eq 1 ]; then
	echo
	echo "$loads" | awk '
		BEGIN {
			printf "%-6s %18s %22s %14s %16s\n", "batch", "load_http_rows/s", "load_embedded_rows/s",
			       "http/embedded", "node_cpu_us/row"
		}
		NF == 4 {
			ratio = ($3 > 0) ? sprintf("%.2fx", $2 / $3) : "n/a"
			printf "%-6s %18.0f %22.0f %14s %16s\n", $1, $2, $3, ratio, $4
		}'
	echo "load: strata load's rows/s of one script (load_append.lua) over HTTP and --embedded: the same" \
		"virtual users, batch, rows, shards, sync and policy"
fi
[ $status -ne 0 ] && echo "bench_http: an error was reported (see stderr); figures are partial"
exit $status
