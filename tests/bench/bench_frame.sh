#!/bin/sh
# bench_frame.sh BINDIR — the game loop (lua/examples/game_loop.lua) at 60 fps with a
# 2 ms store budget: no merge due, then a backlog of 16 generations merging; and the
# same loop with the store on its own threads (no step) as the comparison.
# FRAMES (default 600 = 10 s per run) sets the length.
set -u
bindir=${1:?usage: bench_frame.sh BINDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
frames=${FRAMES:-600}
export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;;"
export LUA_CPATH="$(cd "$bindir/.." && pwd)/?.so;;"
echo "# frame: game loop, $frames frames at 60 fps, 300 rows per frame, 2 ms store budget"
for args in "--backlog 0" "--backlog 16" "--backlog 16 --threaded"; do
	echo "## frame: $args"
	luajit "$root/lua/examples/game_loop.lua" --frames "$frames" $args || exit 1
done
