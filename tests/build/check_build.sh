#!/bin/sh
# check_build.sh — the build itself, as one suite for tests/run.sh
# ("# build: N passed, N failed"):
#   - `make -n all` runs no apt-get/dpkg (only run/test/... install packages);
#   - no object or unit test compiled with a warning (each kept its diagnostics in .warn);
#   - an up-to-date tree compiles nothing, and touching one header (or an embedded
#     .lua file) recompiles exactly the objects that include it (the compiler's own
#     -MM view, computed here independently of the .d files make uses);
#   - libstrata-core.a links and runs a small program (open, append, get, close) with
#     only -lzstd -lisal -lxxhash -lpthread -lm, and needs no LuaJIT or libev symbol;
#   - `make install DESTDIR=<tmp> PREFIX=/usr` installs every file, strata.pc works with
#     PKG_CONFIG_PATH pointing into it and links the same program against the
#     installed headers and library, and the installed Lua module loads.
# Everything that touches files runs in a copy of the tree (sources, Makefile and the
# built $BUILD with mtimes kept), so the working tree and its build are left alone.
# usage: tests/build/check_build.sh   (BUILD selects the build directory, default build;
# plain builds only: make test runs it without SAN, like the Lua suites)
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
CC=${CC:-cc}
# A make started from a recipe of the top-level make must not inherit its flags (-n,
# -j jobserver descriptors it no longer has).
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
passed=0
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-build.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

ok() {
	echo "ok - $1"
	passed=$((passed + 1))
}
not_ok() {
	echo "not ok - $1"
	if [ -n "${2:-}" ]; then printf '%s\n' "$2" | sed 's/^/#   /'; fi
	failed=$((failed + 1))
}
# The objects a `make -n` output would compile, sorted: the word after -o of each -c line.
compiled() {
	awk '/ -c / { for (i = 1; i < NF; i++) if ($i == "-o") print $(i + 1) }' "$1" | sort -u
}

# ---------------------------------------------------------------- make all installs nothing
if make --no-print-directory -n BUILD="$BUILD" all >"$tmp/n-all" 2>&1; then
	if grep -qE 'apt-get|dpkg' "$tmp/n-all"; then
		not_ok "make -n all runs no apt-get/dpkg" "$(grep -E 'apt-get|dpkg' "$tmp/n-all" | head -3)"
	else
		ok "make -n all runs no apt-get/dpkg"
	fi
else
	not_ok "make -n all runs no apt-get/dpkg" "$(tail -5 "$tmp/n-all")"
fi
# ... while the targets that run something still check the packages.
for goal in run test; do
	make --no-print-directory -n BUILD="$BUILD" $goal >"$tmp/n-$goal" 2>&1
	if grep -q 'dpkg -s' "$tmp/n-$goal"; then
		ok "make -n $goal still checks the packages (deps)"
	else
		not_ok "make -n $goal still checks the packages (deps)" "$(tail -5 "$tmp/n-$goal")"
	fi
done

# ---------------------------------------------------------------- the copy
# Bring the real build up to date first (a no-op under make test), then copy.
if ! make --no-print-directory -s BUILD="$BUILD" all >"$tmp/all.log" 2>&1; then
	not_ok "make all succeeds" "$(tail -10 "$tmp/all.log")"
	echo "# build: $passed passed, $failed failed"
	exit 1
fi
# ---------------------------------------------------------------- no warnings
# Every object and unit test the Makefile compiled kept its compiler diagnostics in
# TARGET.warn (the default CFLAGS: -O2 -Wall -Wextra ...): all must be empty.
make --no-print-directory -s BUILD="$BUILD" $(ls tests/unit/test_*.c | sed "s#tests/unit/\(.*\)\.c#$BUILD/tests/\1#") \
	>"$tmp/unit.log" 2>&1
objs=$(find "$BUILD/obj" "$BUILD/obj-core" -name '*.o' 2>/dev/null
	for t in tests/unit/test_*.c; do t=${t#tests/unit/}; echo "$BUILD/tests/${t%.c}"; done)
nobj=0
unkept=""
warned=""
for o in $objs; do
	# An object whose source is gone (a file renamed since) is a stale leftover of an
	# older tree in a reused build directory, not part of this build.
	case "$o" in
	"$BUILD"/obj/*.o | "$BUILD"/obj-core/*.o)
		src=${o#"$BUILD"/obj/}
		src=${src#"$BUILD"/obj-core/}
		src=${src%.o}.c
		[ -f "$src" ] || [ -f "$BUILD/$src" ] || continue ;;
	esac
	nobj=$((nobj + 1))
	if [ ! -f "$o.warn" ]; then
		unkept="$unkept $o"
	elif [ -s "$o.warn" ]; then
		warned="$warned $o"
	fi
done
if [ "$nobj" -eq 0 ]; then
	not_ok "the build compiles without a warning" "no objects under $BUILD"
elif [ -n "$warned" ] || [ -n "$unkept" ]; then
	detail=""
	for o in $warned; do detail="$detail$(head -5 "$o.warn")
"; done
	[ -n "$unkept" ] && detail="${detail}no diagnostics kept for:$unkept"
	not_ok "the build compiles without a warning" "$detail"
else
	ok "the build compiles without a warning ($nobj objects and unit tests, $(cc --version | head -1))"
fi

tree="$tmp/tree"
mkdir -p "$tree/$BUILD" "$tree/tests"
copied=1
cp -a Makefile node lua policies "$tree/" || copied=0
cp -a tests/unit "$tree/tests/" || copied=0
for f in obj obj-core gen libstrata.a libstrata-core.a strata strata.so strata.pc; do
	if [ -e "$BUILD/$f" ]; then cp -a "$BUILD/$f" "$tree/$BUILD/" || copied=0; fi
done
if [ "$copied" -ne 1 ]; then
	not_ok "copy the tree and its build to $tree"
	echo "# build: $passed passed, $failed failed"
	exit 1
fi
tmake() {
	make --no-print-directory -C "$tree" BUILD="$BUILD" "$@"
}

tmake -n all >"$tmp/n-uptodate" 2>&1
if [ -z "$(compiled "$tmp/n-uptodate")" ] && ! grep -q gen_lua_c "$tmp/n-uptodate"; then
	ok "an up-to-date tree compiles nothing"
else
	not_ok "an up-to-date tree compiles nothing" "$(compiled "$tmp/n-uptodate" | head -5)"
fi

# ---------------------------------------------------------------- install
dest="$tmp/root"
if tmake install DESTDIR="$dest" PREFIX=/usr >"$tmp/install.log" 2>&1; then
	missing=""
	want="bin/strata lib/libstrata.a lib/libstrata-core.a include/strata.h include/strata_types.h
	      lib/pkgconfig/strata.pc share/lua/5.1/strata.lua lib/lua/5.1/strata/core.so"
	for f in policies/*.lua; do want="$want share/strata/policies/$(basename "$f")"; done
	for f in lua/strata/*.lua; do want="$want share/lua/5.1/strata/$(basename "$f")"; done
	for f in $want; do
		[ -f "$dest/usr/$f" ] || missing="$missing $f"
	done
	[ -x "$dest/usr/bin/strata" ] || missing="$missing (bin/strata not executable)"
	if [ -z "$missing" ]; then
		ok "make install DESTDIR=... PREFIX=/usr installs every file"
	else
		not_ok "make install DESTDIR=... PREFIX=/usr installs every file" "missing:$missing"
	fi
	if grep -qx 'prefix=/usr' "$dest/usr/lib/pkgconfig/strata.pc"; then
		ok "strata.pc carries the PREFIX"
	else
		not_ok "strata.pc carries the PREFIX" "$(cat "$dest/usr/lib/pkgconfig/strata.pc")"
	fi
else
	not_ok "make install DESTDIR=... PREFIX=/usr" "$(tail -10 "$tmp/install.log")"
fi

# ---------------------------------------------------------------- a program on the libraries
mkdir -p "$tmp/prog"
cat >"$tmp/prog/prog.c" <<'EOF'
#include <stdio.h>
#include <string.h>

#include "strata.h"

int
main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	strata_options o;
	strata_options_init(&o);
	o.dir = argv[1];
	o.shards = 1;
	strata *db;
	if (strata_open(&o, &db) != 0) {
		fprintf(stderr, "open: %s\n", strata_last_error());
		return 1;
	}
	strata_row r = {"user:1", 6, "alice", 5};
	if (strata_append(db, 0, &r, 1) != 0) {
		fprintf(stderr, "append: %s\n", strata_last_error());
		return 1;
	}
	void *v;
	size_t n;
	if (strata_get(db, 0, "user:1", 6, &v, &n) != 0 || n != 5 || memcmp(v, "alice", 5) != 0) {
		fprintf(stderr, "get: wrong value\n");
		return 1;
	}
	strata_free(v);
	strata_close(db);
	puts("ok");
	return 0;
}
EOF
# run_prog NAME: run $tmp/prog/NAME on a new store, "ok" expected.
run_prog() {
	rm -rf "$tmp/prog/store"
	out=$("$tmp/prog/$1" "$tmp/prog/store" 2>&1)
	[ "$out" = ok ]
}

core_libs="-lzstd -lisal -lxxhash -lpthread -lm"
bad=$(nm -u "$BUILD/libstrata-core.a" 2>/dev/null | awk '{ print $NF }' |
	grep -E '^(lua_|luaL_|luaJIT_|luaopen_|ev_|json_|curl_)' | sort -u | head -5)
if [ -z "$bad" ]; then
	ok "libstrata-core.a needs no LuaJIT, libev, jansson or curl symbol"
else
	not_ok "libstrata-core.a needs no LuaJIT, libev, jansson or curl symbol" "undefined: $(echo "$bad" | tr "\n" " ")"
fi
# shellcheck disable=SC2086
if ! $CC -std=gnu11 -Wall -o "$tmp/prog/core" "$tmp/prog/prog.c" -I node "$BUILD/libstrata-core.a" \
	$core_libs >"$tmp/prog/core.log" 2>&1; then
	not_ok "libstrata-core.a links a program with only $core_libs" "$(head -8 "$tmp/prog/core.log")"
elif ! run_prog core; then
	not_ok "libstrata-core.a links a program with only $core_libs" "it ran: $out"
else
	ok "libstrata-core.a links a program with only $core_libs (open, append, get, close)"
fi

if [ -f "$dest/usr/lib/pkgconfig/strata.pc" ]; then
	if pc=$(PKG_CONFIG_PATH="$dest/usr/lib/pkgconfig" pkg-config --cflags --libs strata 2>&1) &&
		echo "$pc" | grep -q -- '-lstrata'; then
		ok "pkg-config --cflags --libs strata: $pc"
	else
		not_ok "pkg-config --cflags --libs strata" "$pc"
	fi
	# The installed headers and library alone (prefix moved into DESTDIR) build the program.
	pc=$(PKG_CONFIG_PATH="$dest/usr/lib/pkgconfig" pkg-config --define-variable=prefix="$dest/usr" \
		--cflags --libs strata 2>&1)
	# shellcheck disable=SC2086
	if ! $CC -std=gnu11 -Wall -o "$tmp/prog/installed" "$tmp/prog/prog.c" $pc \
		>"$tmp/prog/installed.log" 2>&1; then
		not_ok "the installed headers and libstrata.a link with pkg-config's flags" \
			"$(head -8 "$tmp/prog/installed.log")"
	elif ! run_prog installed; then
		not_ok "the installed headers and libstrata.a link with pkg-config's flags" "it ran: $out"
	else
		ok "the installed headers and libstrata.a link with pkg-config's flags (open, append, get, close)"
	fi
fi

if command -v luajit >/dev/null 2>&1 && [ -f "$dest/usr/share/lua/5.1/strata.lua" ]; then
	lout=$(cd "$tmp" && LUA_PATH="$dest/usr/share/lua/5.1/?.lua;;" LUA_CPATH="$dest/usr/lib/lua/5.1/?.so" \
		luajit -e 'local s = require "strata"; require "strata.format"; io.write(s.VERSION)' 2>&1)
	if [ -n "$lout" ] && [ "$lout" = "$(sed -n 's/^#define STRATA_VERSION "\(.*\)"/\1/p' node/strata_types.h)" ]; then
		ok "the installed Lua module loads (require \"strata\" -> strata/core.so, version $lout)"
	else
		not_ok "the installed Lua module loads" "$lout"
	fi
fi

# ---------------------------------------------------------------- header dependencies
# The objects of `all` and how each is compiled, from make itself.
tmake -n -B all >"$tmp/n-every" 2>&1
compiled "$tmp/n-every" >"$tmp/every-obj"
# normalize PATH...: a/b/../c -> a/c, ./a -> a
normalize() {
	sed -e 's#^\./##' -e ':a' -e 's#[^/.][^/]*/\.\./##' -e 'ta'
}
# Every file each object's source includes, by `cc -MM -MG` on each compile line of
# make -n -B (run in the copy, the line's own -D flags kept): lines "OBJ FILE".
luajit_cflags=$(pkg-config --cflags luajit 2>/dev/null)
awk '/ -c / { src = ""; obj = ""; defs = ""
	for (i = 1; i < NF; i++) {
		if ($i == "-c") src = $(i + 1)
		if ($i == "-o") obj = $(i + 1)
		if ($i ~ /^-D/) defs = defs " " $i
	}
	if (src != "" && obj != "") print obj, src, defs }' "$tmp/n-every" |
	while read -r obj src defs; do
		# shellcheck disable=SC2086,SC1003,SC2020
		(cd "$tree" && $CC -MM -MG $defs $luajit_cflags "$src" 2>/dev/null) |
			tr ' \\' '\n\n' | grep -v ':$' | grep -v '^$' | normalize | sed "s#^#$obj #"
	done >"$tmp/includes"
# expected_for FILE: the objects whose source includes FILE.
expected_for() {
	awk -v f="$1" '$2 == f { print $1 }' "$tmp/includes" | sort -u
}
check_touch() {
	f=$1
	expected=$(expected_for "$f")
	# File times come from the kernel's coarse clock (one tick, up to 10 ms): a header
	# touched in the tick that re-stamped the objects would look no newer than them.
	sleep 0.05
	touch "$tree/$f"
	tmake -n all >"$tmp/n-touch" 2>&1
	got=$(compiled "$tmp/n-touch")
	total=$(wc -l <"$tmp/every-obj")
	n=$(printf '%s\n' "$expected" | grep -c .)
	if [ -z "$expected" ]; then
		not_ok "touch $f: no object includes it (nothing to check)"
	elif [ "$got" = "$expected" ]; then
		ok "touch $f recompiles exactly the $n of $total objects that include it"
	else
		not_ok "touch $f recompiles exactly the objects that include it" \
			"$(printf 'recompiled:\n%s\nexpected:\n%s' "$got" "$expected")"
	fi
	# Back to an up-to-date copy for the next header: stamp every object newer.
	find "$tree/$BUILD" -name '*.o' -exec touch {} +
	find "$tree/$BUILD" -name '*.a' -exec touch {} +
	touch "$tree/$BUILD/strata" "$tree/$BUILD/strata.so"
}
for h in node/lib/crc.h node/policy/policy_lua.h node/core/wal.h node/strata.h; do
	[ -f "$h" ] && check_touch "$h"
done

# An embedded Lua file regenerates the C and recompiles only its object.
sleep 0.05
touch "$tree/node/policy/prelude.lua"
tmake -n all >"$tmp/n-lua" 2>&1
got=$(compiled "$tmp/n-lua")
if grep -q 'gen_lua_c.sh' "$tmp/n-lua" && [ "$got" = "$BUILD/obj/gen/policy_lua.o" ]; then
	ok "touch node/policy/prelude.lua regenerates $BUILD/gen/policy_lua.c and recompiles only its object"
else
	not_ok "touch node/policy/prelude.lua regenerates only the embedded Lua" "recompiled: $(echo "$got" | tr "\n" " ")"
fi

echo "# build: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
