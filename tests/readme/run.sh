#!/bin/sh
# run.sh — the README's examples and install line, run as they are written (make test):
#
#   c-example       the C block of "## Embedding API", compiled with the command of its first
#                   line against $BUILD/libstrata.a, and run on a fresh directory
#   load-embedded   the Lua block of "## Load tests" with `strata load --embedded`
#   load-live       the same script against a live `strata serve` (ephemeral port, stopped by PID)
#   luarocks        `luarocks make lua/strata-scm-1.rockspec --tree DIR` in a copy of the tree,
#                   seeing through pkg-config only the packages the rockspec names (as on a fresh
#                   machine without libcurl or jansson), then `require "strata"` from that tree
#
# Prints "# readme: N passed, N failed". Environment: BUILD (default build), TMPDIR,
# README_LOAD_DURATION (default 3s: the script's own duration is for people).
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) build=$BUILD ;; *) build=$root/$BUILD ;; esac
bin=$build/strata
duration=${README_LOAD_DURATION:-3s}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-readme.XXXXXX") || exit 1
passed=0
failed=0
pid=""

stop_node() {
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=""
}
trap 'stop_node; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# check NAME CMD...: run CMD with its output in $tmp/NAME.log; count it.
check() {
	name=$1
	shift
	if "$@" >"$tmp/$name.log" 2>&1; then
		echo "ok $name"
		passed=$((passed + 1))
	else
		echo "not ok $name; its output:"
		sed 's/^/  | /' "$tmp/$name.log" | tail -40
		failed=$((failed + 1))
	fi
}

c_example() {
	sh "$root/tests/readme/extract.sh" "$root/README.md" "## Embedding API" c >"$tmp/example.c" || return 1
	cmd=$(sed -n '1s|^/\* example\.c: \(cc .*\) \*/$|\1|p' "$tmp/example.c")
	[ -n "$cmd" ] || { echo "the C example's first line must be /* example.c: cc ... */"; return 1; }
	# The command as the README gives it, with this build's paths.
	cmd=$(echo "$cmd" | sed -e "s|-Inode|-I$root/node|" -e "s| example\.c| $tmp/example.c|" \
		-e "s| build/| $build/|")
	echo "$cmd -Wall -Wextra -Werror -o $tmp/example"
	# shellcheck disable=SC2086
	$cmd -Wall -Wextra -Werror -o "$tmp/example" || return 1
	out=$("$tmp/example" "$tmp/c-store") || { echo "$out"; return 1; }
	echo "$out"
	[ "$out" = "$(printf 'alice\ngenerations merged: 1')" ]
}

load_example() {
	sh "$root/tests/readme/extract.sh" "$root/README.md" "## Load tests" lua >"$tmp/example.lua" || return 1
	"$bin" load "$tmp/example.lua" --quiet --duration "$duration" "$@"
}

load_live() {
	"$bin" serve --listen 127.0.0.1:0 --data "$tmp/live" --shards 4 --sync none \
		--ready-file "$tmp/live.ready" --log-level warn >"$tmp/live-node.log" 2>&1 &
	pid=$!
	i=0
	while [ ! -s "$tmp/live.ready" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 200 ]; then
			echo "the node did not start:"
			cat "$tmp/live-node.log"
			pid=""
			return 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	load_example --target "http://$(cat "$tmp/live.ready")"
	rc=$?
	stop_node
	return $rc
}

luarocks_tree() {
	src=$tmp/rock-src
	mkdir -p "$src" "$tmp/pc"
	if [ -d "$root/.git" ] || [ -f "$root/.git" ]; then
		(cd "$root" && git ls-files -z | tar --null -T - -cf -) | tar -x -C "$src" || return 1
	else
		(cd "$root" && tar -cf - Makefile lua node policies) | tar -x -C "$src" || return 1
	fi
	# Only the .pc files of the packages the rockspec names: a machine without libcurl-dev
	# or libjansson-dev must build the module too.
	for p in luajit libzstd libisal libxxhash; do
		d=$(pkg-config --variable=pcfiledir "$p") || { echo "pkg-config finds no $p"; return 1; }
		ln -s "$d/$p.pc" "$tmp/pc/$p.pc"
	done
	(cd "$src" && PKG_CONFIG_LIBDIR=$tmp/pc MAKEFLAGS= CFLAGS=-O0 luarocks make lua/strata-scm-1.rockspec \
		--tree "$tmp/tree") || return 1
	(cd "$tmp" && LUA_PATH="$tmp/tree/share/lua/5.1/?.lua;$tmp/tree/share/lua/5.1/?/init.lua;;" \
		LUA_CPATH="$tmp/tree/lib/lua/5.1/?.so;;" TREE="$tmp/tree" luajit -e '
		local tree = assert(os.getenv("TREE"))
		local strata = require "strata"
		assert(package.searchpath("strata", package.path):sub(1, #tree) == tree, "strata.lua not from the tree")
		assert(package.searchpath("strata.core", package.cpath) == tree .. "/lib/lua/5.1/strata/core.so")
		local db = assert(strata.open{ dir = tree .. "/../rock-store", shards = 2 })
		assert(db:append(1, { { key = "a", value = "1" }, { "b", "2" } }))
		assert(db:get(1, "b") == "2")
		local n = 0
		for _ in db:scan(1) do n = n + 1 end
		assert(n == 2)
		db:close()
		print("require \"strata\" " .. strata.VERSION .. " from " .. tree .. ": ok")
	') || return 1
}

if [ ! -x "$bin" ] || [ ! -f "$build/libstrata.a" ]; then
	echo "run.sh: $bin or $build/libstrata.a is not built"
	echo "# readme: 0 passed, 1 failed"
	exit 1
fi
check c-example c_example
check load-embedded load_example --embedded "$tmp/embedded" --sync none
check load-live load_live
if command -v luarocks >/dev/null 2>&1; then
	check luarocks luarocks_tree
else
	echo "skip luarocks: luarocks is not installed and could not be (make deps installs it on Debian)"
fi
echo "# readme: $passed passed, $failed failed"
[ $failed -eq 0 ]
