#!/bin/sh
# live.sh — run load scripts against a live node: start `strata serve` on an
# ephemeral port in a temporary directory, run `strata load`, stop the node by PID.
#
#   tests/load/live.sh smoke   smoke.lua (correctness only), on a node with the default policy and on
#                              one that keeps merging (merging_policy.lua: merge_wal finds shards
#                              busy); prints "# load-smoke: N passed, N failed"
#   tests/load/live.sh bench   append_during_merge.lua and mixed.lua, each on a fresh node; prints
#                              their summaries and the ratio of append p99.9 during merges to idle
#
# Environment: STRATA_BIN (default build/strata), LOAD_DURATION (bench, default 30s),
# LOAD_SHARDS (default 4), LOAD_SYNC (node's --sync, default fsync), LOAD_ADM_ARGS and
# LOAD_MIXED_ARGS (script options, e.g. "gens=16 value_kib=4"), TMPDIR.
mode=${1:-smoke}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${STRATA_BIN:-$root/build/strata}
shards=${LOAD_SHARDS:-4}
sync=${LOAD_SYNC:-fsync}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-load-live.XXXXXX") || exit 1
pid=""

stop_node() {
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "live.sh: node $pid did not stop in 10 s; killing it" >&2
		kill -9 "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	pid=""
}

cleanup() {
	stop_node
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_node NAME [POLICY]: a fresh node with data in $tmp/NAME; sets $pid and $addr.
start_node() {
	rm -f "$tmp/$1.ready"
	"$bin" serve --listen 127.0.0.1:0 --data "$tmp/$1" --shards "$shards" --sync "$sync" \
		${2:+--policy "$2"} --ready-file "$tmp/$1.ready" --log-level warn >"$tmp/$1.log" 2>&1 &
	pid=$!
	i=0
	while [ ! -s "$tmp/$1.ready" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 200 ]; then
			echo "live.sh: the node did not start; its log:" >&2
			cat "$tmp/$1.log" >&2
			pid=""
			return 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	addr=$(cat "$tmp/$1.ready")
}

if [ ! -x "$bin" ]; then
	echo "live.sh: $bin is not built" >&2
	[ "$mode" = smoke ] && echo "# load-smoke: 0 passed, 1 failed"
	exit 1
fi

case "$mode" in
smoke)
	passed=0
	failed=0
	# smoke_on NAME [POLICY]: smoke.lua against a fresh node; counts a pass or a failure.
	smoke_on() {
		if start_node "$1" "$2"; then
			"$bin" load "$root/tests/load/smoke.lua" --target "http://$addr" --quiet
			rc=$?
			stop_node
			if [ $rc -eq 0 ]; then
				passed=$((passed + 1))
				return
			fi
			echo "live.sh: smoke.lua on node $1 exited $rc; node log:" >&2
			tail -20 "$tmp/$1.log" >&2
		fi
		failed=$((failed + 1))
	}
	smoke_on smoke
	smoke_on smoke-merging "$root/tests/load/merging_policy.lua"
	echo "# load-smoke: $passed passed, $failed failed"
	[ $failed -eq 0 ]
	;;
bench)
	duration=${LOAD_DURATION:-30s}
	status=0
	start_node adm || exit 1
	# shellcheck disable=SC2086
	"$bin" load "$root/tests/load/append_during_merge.lua" --target "http://$addr" --duration "$duration" \
		--quiet --json "$tmp/adm.json" -- $LOAD_ADM_ARGS || status=1
	stop_node
	start_node mixed || exit 1
	# shellcheck disable=SC2086
	"$bin" load "$root/tests/load/mixed.lua" --target "http://$addr" --duration "$duration" \
		--quiet --json "$tmp/mixed.json" -- $LOAD_MIXED_ARGS || status=1
	stop_node
	ratio=$(sed -n 's/^ *"p999_ratio": *\([0-9.eE+-]*\).*/\1/p' "$tmp/adm.json" 2>/dev/null | head -1)
	idle=$(sed -n 's/^ *"idle.append.p999_ms": *\([0-9.eE+-]*\).*/\1/p' "$tmp/adm.json" 2>/dev/null | head -1)
	busy=$(sed -n 's/^ *"merging.append.p999_ms": *\([0-9.eE+-]*\).*/\1/p' "$tmp/adm.json" 2>/dev/null | head -1)
	echo
	echo "bench-load: append p99.9 during merges / idle = ${ratio:-n/a} (merging ${busy:-n/a} ms, idle ${idle:-n/a} ms)"
	exit $status
	;;
*)
	echo "usage: tests/load/live.sh smoke|bench" >&2
	exit 2
	;;
esac
