#!/bin/sh
# tests/bench/bench_objstore.sh BINDIR STRATA — a node on Azurite next to the fs store.
#
# Installs Azurite into BINDIR/../npm (as tests/objstore/azure.sh does; skipped with one
# line without npm), starts it on 127.0.0.1, and for each store — fs (local WAL), Azure
# with the local WAL, Azure with `--wal store` — starts `STRATA serve --shards 1 --sync
# fsync` and runs tests/bench/stall_http.lua in its merge mode: a backlog of
# BENCH_OBJSTORE_GENS x BENCH_OBJSTORE_GEN_MB MiB, then one writer at
# BENCH_OBJSTORE_RATE appends/s (1 row of 200 bytes; latency from the intended start),
# 5 s idle, then while merge-wal folds the backlog. Prints append p50/p99/p99.9/max per
# phase, the merge's MB/s, and the object-store requests per acknowledged row (from
# /metrics and the shard's stats, backlog rows included). Asserts nothing about speed.
set -u
bindir=${1:?usage: bench_objstore.sh BINDIR STRATA}
strata=${2:?usage: bench_objstore.sh BINDIR STRATA}
here=$(dirname "$0")
gens=${BENCH_OBJSTORE_GENS:-8}
gen_mb=${BENCH_OBJSTORE_GEN_MB:-8}
rate=${BENCH_OBJSTORE_RATE:-100}
base=${BENCH_DIR:-${TMPDIR:-/tmp}}
die() { echo "bench_objstore: $*" >&2; exit 2; }
case "$gens$gen_mb$rate" in *[!0-9]*) die "BENCH_OBJSTORE_* must be positive integers" ;; esac
[ -x "$strata" ] || die "$strata is not an executable (build it with make all)"

echo "== bench_objstore: a node on Azurite (local WAL and wal = store) next to the fs store"
if ! command -v npm >/dev/null 2>&1; then
	echo "bench_objstore: skipped: npm is not installed (apt-get install npm), Azurite cannot run"
	exit 0
fi
npmdir=$bindir/../npm
azurite=$npmdir/node_modules/.bin/azurite-blob
if [ ! -x "$azurite" ]; then
	mkdir -p "$npmdir"
	npm install --prefix "$npmdir" --no-audit --no-fund --loglevel=error azurite@3 >"$npmdir/install.log" 2>&1 ||
		die "npm install azurite failed (log: $npmdir/install.log)"
fi
loc=$(mktemp -d "$base/strata-bench-objstore-XXXXXX") || die "mktemp in $base failed"
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
"$azurite" --blobHost 127.0.0.1 --blobPort "$port" --location "$loc/azurite" --silent --disableTelemetry \
	--skipApiVersionCheck >"$loc/azurite.log" 2>&1 &
apid=$!
spid=""
cleanup() {
	[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null
	kill "$apid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$loc"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
i=0
until curl -s -o /dev/null "http://127.0.0.1:$port/"; do
	i=$((i + 1))
	[ $i -lt 150 ] && kill -0 "$apid" 2>/dev/null || die "azurite-blob did not listen on 127.0.0.1:$port"
	sleep 0.1
done
export AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
echo "$("$strata" --version 2>&1 | head -n 1); Azurite $(cat "$npmdir/node_modules/azurite/package.json" 2>/dev/null | sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' | head -n 1) on 127.0.0.1; host: $(uname -sr), $(getconf _NPROCESSORS_ONLN) cpus"
echo "node: strata serve --shards 1 --sync fsync; backlog ${gens} x ${gen_mb} MiB, one writer at ${rate}/s, 5 s idle then during the merge"
echo

field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# metric_sum NAME TEXT: the sum of every sample of a metric family.
metric_sum() { echo "$2" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf "%.0f", s }'; }

printf "  %-22s %8s %8s %8s %8s   %8s %8s %8s %8s  %9s %12s\n" "store" "idle p50" "p99" "p99.9" "max" \
	"merge p50" "p99" "p99.9" "max" "merge MB/s" "requests/row"
status=0
n=0
for cfg in fs azure-local azure-store; do
	n=$((n + 1))
	d="$loc/node$n"
	case $cfg in
	fs) extra="" ;;
	azure-local) extra="--store azure://devstoreaccount1/bench-$n?endpoint=http://127.0.0.1:$port" ;;
	azure-store) extra="--store azure://devstoreaccount1/bench-$n?endpoint=http://127.0.0.1:$port --wal store" ;;
	esac
	mkdir -p "$d"
	cat >"$d/policy.lua" <<-'EOF'
	return { flush_interval_s = 0, sweep_interval_s = 0, merge_after_generations = 0,
		merge_max_generations = 0, memtable_max_bytes = 1024 * 1024 * 1024 }
	EOF
	# shellcheck disable=SC2086
	"$strata" serve --listen 127.0.0.1:0 --ready-file "$d/ready" --data "$d/data" --shards 1 --sync fsync \
		--merge-max-inputs "$gens" --policy "$d/policy.lua" --no-watch-policy --log-level error \
		$extra 2>"$d/server.log" &
	spid=$!
	i=0
	while [ ! -s "$d/ready" ]; do
		i=$((i + 1))
		if [ $i -ge 300 ] || ! kill -0 "$spid" 2>/dev/null; then
			echo "bench_objstore: the $cfg node did not start:" >&2
			tail -n 20 "$d/server.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	addr=$(cat "$d/ready")
	out=$("$strata" load "$here/stall_http.lua" --target "http://$addr" --batch -q -- merge "$rate" "$gens" \
		"$gen_mb" 2>"$d/load.err")
	line=$(echo "$out" | grep '^stall_http:')
	metrics=$(curl -s "http://$addr/metrics")
	stats=$(curl -s "http://$addr/v1/shards/0/stats")
	kill -TERM "$spid"
	wait "$spid"
	spid=""
	if [ -z "$line" ]; then
		echo "bench_objstore: $cfg: strata load printed no figures:" >&2
		echo "$out" | tail -n 20 >&2
		tail -n 10 "$d/load.err" "$d/server.log" >&2
		status=1
		continue
	fi
	rows=$(echo "$stats" | sed -n 's/.*"rows_appended":\([0-9]*\).*/\1/p')
	reqs=$(metric_sum strata_objstore_requests_total "$metrics")
	ms=$(field merge_s "$line")
	mbs=$(awk -v g="$gens" -v m="$gen_mb" -v s="$ms" 'BEGIN { if (s > 0) printf "%.0f", g * m * 1.048576 / s; else print "-" }')
	per=$(awk -v q="$reqs" -v r="$rows" 'BEGIN { if (r > 0 && q > 0) printf "%.4f", q / r; else print "-" }')
	printf "  %-22s %8s %8s %8s %8s   %8s %8s %8s %8s  %9s %12s\n" "$cfg" \
		"$(field writer_idle_p50 "$line")" "$(field writer_idle_p99 "$line")" "$(field writer_idle_p999 "$line")" \
		"$(field writer_idle_max "$line")" "$(field writer_during_p50 "$line")" \
		"$(field writer_during_p99 "$line")" "$(field writer_during_p999 "$line")" \
		"$(field writer_during_max "$line")" "$mbs" "$per (${reqs:-0}/${rows:-0})"
done
echo "  (ms; requests/row: object-store requests over rows acknowledged, the backlog's included; fs makes none)"
exit $status
