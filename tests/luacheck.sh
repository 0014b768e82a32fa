#!/bin/sh
# luacheck over the shipped Lua (lua/, policies/, Lua tests) as one suite for tests/run.sh.
cd "$(dirname "$0")/.." || exit 1
dirs=""
for d in lua policies tests/spec tests/integration tests/load tests/bench; do
	[ -d "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086
if luacheck --std luajit --codes $dirs; then
	echo "# luacheck: 1 passed, 0 failed"
else
	echo "# luacheck: 0 passed, 1 failed"
	exit 1
fi
