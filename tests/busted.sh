#!/bin/sh
# Run busted specs (LuaJIT) and report "# <name>: N passed, N failed" for tests/run.sh.
# usage: tests/busted.sh NAME SPEC_DIR   (BUILD selects the build directory, default build)
name=$1
dir=$2
BUILD=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;$root/tests/?.lua;;"
export LUA_CPATH="$root/$BUILD/?.so;;"
export STRATA_BIN="$root/$BUILD/strata"
export STRATA_ROOT="$root"
out=$(mktemp)
busted --lua=luajit -o TAP "$dir" >"$out" 2>&1
rc=$?
cat "$out"
pass=$(grep -c '^ok ' "$out")
fail=$(grep -c '^not ok ' "$out")
rm -f "$out"
if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
	echo "!! busted exited $rc with no failed spec (a load error?)"
	fail=1
fi
echo "# $name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
