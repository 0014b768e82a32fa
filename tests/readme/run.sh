#!/bin/sh
# run.sh — the documentation's examples, run as they are written (make test):
#
#   tour            every command of README.md's "A five-minute tour", in order, in a directory
#                   laid out like a clone (symlinks to this tree and its build): `make run` in
#                   the background (PORT=0; the address it picked replaces localhost:7070 in
#                   the commands after it), each sh line as one command that must succeed, its
#                   `# -> TEXT` comment a text its output must contain (a curl without -X or
#                   --data is asked again for up to 10 s, as a user looks again), c and lua
#                   blocks saved under the name their first line gives
#   load-usage      lua/README.md's `strata load` lines against that node, 2 s each
#   lua-module      lua/README.md's module example, with the command its first line gives
#   load-embedded   lua/README.md's load script with `strata load --embedded`
#   load-live       the same script against a live `strata serve` (ephemeral port, stopped by PID)
#   policy-example  policies/README.md's policy table, through `strata policy check --run`
#   luarocks        `luarocks make lua/strata-scm-1.rockspec --tree DIR` in a copy of the tree,
#                   seeing through pkg-config only the packages the rockspec names (as on a fresh
#                   machine without libcurl or jansson), then `require "strata"` from that tree
#   rockspec        the rockspec's license is the LICENSE file's, and its source names no
#                   directory of one machine
#   docs            README.md is at most 300 lines; every fenced block of the docs has a tag;
#                   every c, lua and sh block was run by one of the checks above (or is named
#                   below as run elsewhere); every relative link points at a file that exists
#
# Prints "# readme: N passed, N failed". Environment: BUILD (default build), TMPDIR,
# README_LOAD_DURATION (default 3s: a script's own duration is for people).
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) build=$BUILD ;; *) build=$root/$BUILD ;; esac
bin=$build/strata
duration=${README_LOAD_DURATION:-3s}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-readme.XXXXXX") || exit 1
# The makes started here are not the test's make: no jobserver, no -n, no goals of its own.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
passed=0
failed=0
pid=""
DOCS="README.md node/README.md node/cli/README.md node/server/README.md node/core/DESIGN.md
policies/README.md lua/README.md tests/README.md tests/bench/FIGURES.md"

stop_node() {
	[ -n "$pid" ] || return 0
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=""
}
trap 'stop_node; [ -n "${README_KEEP:-}" ] || rm -rf "$tmp"' EXIT
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

# claim FILE LINE: the block of FILE that opens at LINE was run.
claim() { echo "$1:$2" >>"$tmp/claims"; }

# blocks FILE DIR [SECTION]: its blocks into DIR (tests/readme/blocks.sh), the listing in DIR/list.
blocks() {
	rm -rf "$2"
	sh "$root/tests/readme/blocks.sh" "$root/$1" "$2" ${3:+"$3"} >"$tmp/list.tmp" || return 1
	mkdir -p "$2" && mv "$tmp/list.tmp" "$2/list"
}

# The first line of a c or lua block names the file it is saved as: "/* NAME.c: ..." or
# "-- NAME.lua: ...".
block_file() { sed -n '1s#^\(/\*\|--\) *\([A-Za-z0-9_.-]*\.\(c\|lua\)\):.*#\2#p' "$1"; }

# A directory laid out like a clone of the repository, with this tree's build as its build.
clone_dir() {
	mkdir -p "$1" || return 1
	for f in Makefile node lua policies tests; do ln -s "$root/$f" "$1/$f" || return 1; done
	ln -s "$build" "$1/build"
}

# run_line DIR LINE: one command of a doc's sh block, in DIR, with the node's address in
# place of localhost:7070; LINE's "# -> TEXT" must be in what it prints.
run_line() {
	cmd=${2%%# -> *}
	want=""
	case "$2" in *"# -> "*) want=${2#*# -> } ;; esac
	cmd=$(printf '%s' "$cmd" | sed -e "s|localhost:7070|$addr|g" -e 's/ *$//')
	retry=0
	if [ -n "$want" ]; then
		case "$cmd" in curl*) case "$cmd" in *"-X "* | *--data*) ;; *) retry=100 ;; esac ;; esac
	fi
	echo "\$ $cmd"
	i=0
	while :; do
		out=$(cd "$1" && timeout 120 sh -ec "$cmd" 2>&1)
		rc=$?
		if [ $rc -eq 0 ] && { [ -z "$want" ] || printf '%s' "$out" | grep -qF -- "$want"; }; then
			printf '%s\n' "$out" | head -20
			return 0
		fi
		[ $i -ge $retry ] && break
		i=$((i + 1))
		sleep 0.1
	done
	printf '%s\n' "$out" | tail -20
	if [ $rc -ne 0 ]; then echo "exit $rc"; else echo "expected in the output: $want"; fi
	return 1
}

# run_blocks FILE DIR WORKDIR: every block listed in DIR/list, in order, in WORKDIR.
run_blocks() {
	while read -r n lang line; do
		claim "$1" "$line"
		case "$lang" in
		c | lua)
			saved=$(block_file "$2/$n")
			[ -n "$saved" ] || { echo "$1:$line: the first line of a $lang block names its file"; return 1; }
			cp "$2/$n" "$3/$saved" ;;
		sh)
			if [ "$(cat "$2/$n")" = "make run" ]; then
				start_make_run "$3" || return 1
				continue
			fi
			while IFS= read -r l; do
				case "$l" in "" | "#"*) continue ;; esac
				run_line "$3" "$l" || { echo "$1:$line: failed"; return 1; }
			done <"$2/$n" ;;
		*) ;;
		esac
	done <"$2/list"
}

# `make run` in DIR as the README says, on a port of its own; sets addr.
start_make_run() {
	echo "\$ make run   (PORT=0, and --ready-file to learn the port)"
	(cd "$1" && exec setsid make --no-print-directory run PORT=0 \
		ARGS="--ready-file $tmp/tour.ready --log-level warn") >"$tmp/make-run.log" 2>&1 &
	pid=$!
	i=0
	while [ ! -s "$tmp/tour.ready" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 1200 ]; then
			echo "make run did not start a node:"
			cat "$tmp/make-run.log"
			pid=""
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	addr=$(cat "$tmp/tour.ready")
	echo "node at $addr"
}

tour() {
	w=$tmp/tour
	clone_dir "$w" || return 1
	blocks README.md "$tmp/b-tour" "## A five-minute tour" || return 1
	run_blocks README.md "$tmp/b-tour" "$w" || return 1
	# The load script lines of lua/README.md (its first sh block), against the same node.
	blocks lua/README.md "$tmp/b-lua" || return 1
	awk '$2 == "sh" { print; exit }' "$tmp/b-lua/list" >"$tmp/b-lua/list.sh"
	[ -s "$tmp/b-lua/list.sh" ] || { echo "lua/README.md has no sh block"; return 1; }
	mv "$tmp/b-lua/list.sh" "$tmp/b-lua/list"
	sed -i 's/--duration [0-9]*[a-z]*/--duration 2s/' "$tmp/b-lua/$(cut -d' ' -f1 "$tmp/b-lua/list")"
	echo "--- lua/README.md: strata load"
	run_blocks lua/README.md "$tmp/b-lua" "$w" || return 1
	[ -s "$w/out.html" ] || { echo "strata load --report out.html wrote nothing"; return 1; }
}

lua_module() {
	blocks lua/README.md "$tmp/b-mod" "## The module" || return 1
	n=$(awk '$2 == "lua" { print $1; exit }' "$tmp/b-mod/list")
	[ -n "$n" ] || { echo "no lua block under \"## The module\""; return 1; }
	claim lua/README.md "$(awk '$2 == "lua" { print $3; exit }' "$tmp/b-mod/list")"
	cmd=$(sed -n '1s/^-- module\.lua: //p' "$tmp/b-mod/$n")
	[ -n "$cmd" ] || { echo "the module example's first line must be -- module.lua: COMMAND"; return 1; }
	w=$tmp/mod
	clone_dir "$w" || return 1
	cp "$tmp/b-mod/$n" "$w/module.lua"
	echo "\$ $cmd"
	(cd "$w" && sh -ec "$cmd")
}

load_script() {
	blocks lua/README.md "$tmp/b-load" "### A script" || return 1
	n=$(awk '$2 == "lua" { print $1; exit }' "$tmp/b-load/list")
	[ -n "$n" ] || { echo "no lua block under \"### A script\""; return 1; }
	claim lua/README.md "$(awk '$2 == "lua" { print $3; exit }' "$tmp/b-load/list")"
	cp "$tmp/b-load/$n" "$tmp/example.lua"
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
	load_script --target "http://$(cat "$tmp/live.ready")"
	rc=$?
	stop_node
	return $rc
}

policy_example() {
	blocks policies/README.md "$tmp/b-pol" || return 1
	n=$(awk '$2 == "lua" { print $1; exit }' "$tmp/b-pol/list")
	[ -n "$n" ] || { echo "policies/README.md has no lua block"; return 1; }
	claim policies/README.md "$(awk '$2 == "lua" { print $3; exit }' "$tmp/b-pol/list")"
	[ "$(block_file "$tmp/b-pol/$n")" = example.lua ] || { echo "its first line must name example.lua"; return 1; }
	cp "$tmp/b-pol/$n" "$tmp/example-policy.lua"
	"$bin" policy check --run "$tmp/example-policy.lua"
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

rockspec() {
	spec=$root/lua/strata-scm-1.rockspec
	grep -q '^	license = "MIT"' "$spec" || { echo "the rockspec's license is not MIT"; return 1; }
	head -1 "$root/LICENSE" | grep -qx 'MIT License' || { echo "LICENSE is not the MIT license"; return 1; }
	if grep -q 'file://' "$spec"; then echo "the rockspec's source names a local directory"; return 1; fi
	luarocks lint "$spec"
}

docs() {
	bad=0
	lines=$(wc -l <"$root/README.md")
	[ "$lines" -le 300 ] || { echo "README.md has $lines lines (at most 300)"; bad=1; }
	# "## Two commands": make run is run by the tour and by tests/build/fresh_machine.sh, make
	# test is the run this suite belongs to.
	blocks README.md "$tmp/b-two" "## Two commands" || bad=1
	while read -r n lang line; do claim README.md "$line"; done <"$tmp/b-two/list"
	# "## A cluster on one machine" needs etcd and Azurite: tests/cluster/cluster.sh runs it.
	blocks README.md "$tmp/b-cluster" "## A cluster on one machine" || bad=1
	while read -r n lang line; do claim README.md "$line"; done <"$tmp/b-cluster/list"
	for f in $DOCS; do
		[ -f "$root/$f" ] || { echo "$f is missing"; bad=1; continue; }
		blocks "$f" "$tmp/b-all" || { bad=1; continue; }
		while read -r n lang line; do
			case "$lang" in
			-) echo "$f:$line: a block without a tag (text for output, or c, lua, sh to be run)"; bad=1 ;;
			c | lua | sh)
				grep -qx "$f:$line" "$tmp/claims" 2>/dev/null ||
					{ echo "$f:$line: a $lang block that make test does not run"; bad=1; } ;;
			esac
		done <"$tmp/b-all/list"
		# Relative links, [text](path) with no scheme: the file must exist.
		dir=$(dirname "$root/$f")
		for link in $(grep -o '](\([^)#: ]*\))' "$root/$f" | sed 's/^](\(.*\))$/\1/'); do
			[ -e "$dir/$link" ] || { echo "$f: link to $link, which does not exist"; bad=1; }
		done
	done
	[ $bad -eq 0 ]
}

if [ ! -x "$bin" ] || [ ! -f "$build/libstrata.a" ]; then
	echo "run.sh: $bin or $build/libstrata.a is not built"
	echo "# readme: 0 passed, 1 failed"
	exit 1
fi
: >"$tmp/claims"
check tour tour
stop_node
check lua-module lua_module
check load-embedded load_script --embedded "$tmp/embedded" --sync none
check load-live load_live
check policy-example policy_example
if command -v luarocks >/dev/null 2>&1; then
	check luarocks luarocks_tree
	check rockspec rockspec
else
	echo "not ok luarocks: luarocks is not installed (make test installs it on Debian)"
	failed=$((failed + 1))
fi
check docs docs
echo "# readme: $passed passed, $failed failed"
[ $failed -eq 0 ]
