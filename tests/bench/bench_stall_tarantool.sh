#!/bin/sh
# tests/bench/bench_stall_tarantool.sh — the stall bench's workload on Tarantool's vinyl
# (tests/bench/stall_tarantool.lua), in a fresh directory under BENCH_DIR, TMPDIR or /tmp.
set -u
here=$(dirname "$0")
echo "== bench_stall (tarantool): sync appends while index:compact() folds a backlog of dumped runs"
if ! command -v tarantool >/dev/null 2>&1; then
  echo "tarantool: not installed (apt-get install tarantool): skipped"
  exit 0
fi
base=${BENCH_DIR:-${TMPDIR:-/tmp}}
gens=${BENCH_STALL_GENS:-32}
mb=${BENCH_STALL_GEN_MB:-32}
need_kb=$(( (gens + 1) * mb * 1024 * 25 / 10 + 1048576 ))
free_kb=$(df -Pk "$base" | awk 'NR == 2 { print $4 }')
if [ "$free_kb" -lt "$need_kb" ]; then
  echo "SKIPPED: needs ~$((need_kb / 1048576)) GiB free in $base"
  exit 0
fi
dir=$(mktemp -d "$base/strata-bench-tarantool-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM
tarantool "$here/stall_tarantool.lua" "$dir"
rc=$?
[ $rc -eq 0 ] || echo "bench_stall_tarantool: tarantool exited $rc (its log: $dir/tarantool.log)" >&2
[ $rc -eq 0 ] || tail -20 "$dir/tarantool.log" >&2
exit $rc
