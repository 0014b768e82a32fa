#!/bin/sh
# fresh_machine.sh — a new user's first command on a freshly installed Debian machine, as one
# suite for tests/run.sh ("# fresh-machine: N passed, N failed").
#
# Stand-ins first on PATH make this machine look fresh: `dpkg -s` says every package is
# missing and `pkg-config` finds nothing until `apt-get install` has run; `apt-get` only
# records its arguments (and then lets the real dpkg and pkg-config answer, since the
# packages are in fact here); `id -u` says what FAKE_UID says. In a copy of the tree (the
# files git tracks, or the working tree's when there is no git) with a build directory of
# its own:
#   - `make all` (which installs nothing) stops before compiling, naming the missing packages;
#   - `make run` as a user who is not root prints the exact `sudo apt-get install` line and
#     builds nothing;
#   - `make run` as root installs the missing packages first, reads pkg-config only after the
#     install, builds (CFLAGS=-O0, to keep it short), and starts a node that takes an append
#     and answers a get, with remote object stores compiled in and the policy the copy of
#     policies/default.lua it made in DATA;
#   - `make -n test`, `check`, `bench`, `soak`, `fuzz` install before they build, too.
# The first `make test` on a fresh machine used to fail with "lua.h: No such file or
# directory": the Makefile called pkg-config while make parsed it, before `deps` had run.
# usage: sh tests/build/fresh_machine.sh   (TMPDIR for the copy; FRESH_MAKEFILE below)
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
passed=0
failed=0
pid=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-fresh.XXXXXX") || exit 1
stop_node() {
	[ -n "$pid" ] || return 0
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL -- "-$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=""
}
trap 'stop_node; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

ok() {
	echo "ok - $1"
	passed=$((passed + 1))
}
not_ok() {
	echo "not ok - $1"
	if [ -n "${2:-}" ]; then printf '%s\n' "$2" | tail -25 | sed 's/^/#   /'; fi
	failed=$((failed + 1))
}

# ------------------------------------------------------------------------ the stand-ins
real_dpkg=$(command -v dpkg)
real_pkgconfig=$(command -v pkg-config)
real_id=$(command -v id)
if [ -z "$real_dpkg" ] || [ -z "$real_pkgconfig" ]; then
	echo "not ok - fresh-machine: needs dpkg and pkg-config (make deps installs pkg-config)"
	echo "# fresh-machine: 0 passed, 1 failed"
	exit 1
fi
stand=$tmp/bin
state=$tmp/state # apt-get writes "installed" here; every stand-in logs to calls
mkdir -p "$stand" "$state"
cat >"$stand/dpkg" <<EOF
#!/bin/sh
if [ "\$1" = "-s" ] && [ ! -e "$state/installed" ]; then
	echo "dpkg-query: package '\$2' is not installed" >&2
	exit 1
fi
exec "$real_dpkg" "\$@"
EOF
cat >"$stand/pkg-config" <<EOF
#!/bin/sh
if [ ! -e "$state/installed" ]; then
	echo "pkg-config before install: \$*" >>"$state/calls"
	exit 1
fi
exec "$real_pkgconfig" "\$@"
EOF
cat >"$stand/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>"$state/calls"
case " \$* " in *" install "*) : >"$state/installed" ;; esac
exit 0
EOF
cat >"$stand/id" <<EOF
#!/bin/sh
if [ "\$1" = "-u" ]; then echo "\${FAKE_UID:-0}"; exit 0; fi
exec "$real_id" "\$@"
EOF
chmod +x "$stand/dpkg" "$stand/pkg-config" "$stand/apt-get" "$stand/id"
fresh() { rm -f "$state/installed" "$state/calls"; }

# ------------------------------------------------------------------------ a copy of the tree
src=$tmp/src
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Tracked files as they are in the working tree (so an uncommitted Makefile is what runs).
	git ls-files -z | tar --null -T - -cf - 2>/dev/null | tar -x -C "$src" || exit 1
else
	tar -cf - --exclude='./build*' --exclude=./data . | tar -x -C "$src" || exit 1
fi
# FRESH_MAKEFILE=FILE runs another Makefile in the copy (to see this check fail on an old one).
if [ -n "${FRESH_MAKEFILE:-}" ]; then cp "$FRESH_MAKEFILE" "$src/Makefile" || exit 1; fi
fmake() { (cd "$src" && PATH="$stand:$PATH" make --no-print-directory "$@"); }

# ------------------------------------------------------------------------ make all
fresh
fmake BUILD=b-all all >"$tmp/all.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "pkg-config finds no libzstd libisal libxxhash luajit" "$tmp/all.log" &&
	grep -q "make deps" "$tmp/all.log" && ! grep -q -- ' -c ' "$tmp/all.log"; then
	ok "make all on a fresh machine names the missing packages and compiles nothing"
else
	not_ok "make all on a fresh machine names the missing packages and compiles nothing (exit $rc)" \
		"$(cat "$tmp/all.log")"
fi

# ------------------------------------------------------------------------ not root
fresh
FAKE_UID=1000 fmake BUILD=b-user run >"$tmp/user.log" 2>&1
rc=$?
want="sudo apt-get install -y build-essential pkg-config libzstd-dev"
if [ $rc -ne 0 ] && grep -q "$want" "$tmp/user.log" && [ ! -e "$src/b-user" ] &&
	! grep -q '^apt-get' "$state/calls" 2>/dev/null; then
	ok "make run as a user prints the apt-get line to run, and builds nothing"
else
	not_ok "make run as a user prints the apt-get line to run, and builds nothing (exit $rc)" \
		"$(cat "$tmp/user.log")"
fi

# ------------------------------------------------------------------------ root: make run
fresh
data=$tmp/data
ready=$tmp/ready
# setsid: the make and the node it starts get a process group to stop by the make's PID.
(cd "$src" && FAKE_UID=0 PATH="$stand:$PATH" CFLAGS=-O0 exec setsid make --no-print-directory -j2 \
	BUILD=b-root run PORT=0 DATA="$data" ARGS="--ready-file $ready --log-level warn") >"$tmp/run.log" 2>&1 &
pid=$!
i=0
while [ ! -s "$ready" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 6000 ]; do
	sleep 0.1
	i=$((i + 1))
done
addr=$(cat "$ready" 2>/dev/null)
if [ -n "$addr" ]; then
	ok "make run as root on a fresh machine builds and starts a node"
else
	not_ok "make run as root on a fresh machine builds and starts a node" "$(cat "$tmp/run.log")"
fi

installs=$(grep -c '^apt-get .*install' "$state/calls" 2>/dev/null)
if [ "$installs" = 1 ] && grep '^apt-get .*install' "$state/calls" | grep -q 'libluajit2-5.1-dev' &&
	grep -q '^apt-get update' "$state/calls"; then
	ok "make run installed the missing packages once, LuaJIT's among them"
else
	not_ok "make run installed the missing packages once, LuaJIT's among them" "$(cat "$state/calls" 2>/dev/null)"
fi
if grep -q '^pkg-config before install' "$state/calls" 2>/dev/null; then
	not_ok "nothing reads pkg-config before the packages are installed" \
		"$(grep '^pkg-config before install' "$state/calls" | head -5)"
else
	ok "nothing reads pkg-config before the packages are installed"
fi

if [ -n "$addr" ]; then
	a=$(curl -s -X POST --data-binary '{"key": "k1", "value": "fresh"}' "http://$addr/v1/shards/0/rows")
	g=$(curl -s "http://$addr/v1/shards/0/rows/k1")
	if [ "$g" = "fresh" ]; then
		ok "the node of make run takes an append and answers a get"
	else
		not_ok "the node of make run takes an append and answers a get" "append: $a; get: $g"
	fi
	p=$(curl -s "http://$addr/v1/policy")
	if cmp -s "$data/policy.lua" "$src/policies/default.lua" && printf '%s' "$p" | grep -q "$data/policy.lua"; then
		ok "make run runs DATA/policy.lua, a copy of policies/default.lua"
	else
		not_ok "make run runs DATA/policy.lua, a copy of policies/default.lua" "$(printf '%s' "$p" | head -c 400)"
	fi
fi
stop_node
# The remote object stores are compiled in only when pkg-config found libcurl, libcrypto and
# expat when the Makefile was read: a binary built without them refuses azure:// by name.
bin=$src/b-root/strata
if [ -x "$bin" ]; then
	out=$("$bin" inspect --store 'azure://acct/c?endpoint=http://127.0.0.1:9&retries=0' "$tmp/none" 2>&1)
	if printf '%s' "$out" | grep -qi 'not built\|not compiled\|without'; then
		not_ok "the strata of make run has the remote object stores" "$out"
	else
		ok "the strata of make run has the remote object stores"
	fi
else
	not_ok "the strata of make run has the remote object stores" "$bin was not built"
fi

# ------------------------------------------------------------------------ the other goals
# make -n still runs the recursive makes of the first pass: deps prints its check, then the
# second pass (STRATA_DEPS=done) prints the build. With -n nothing is installed, so the
# packages count as present here; what is checked is the order: check, second pass, compile.
for goal in test check bench soak fuzz; do
	fresh
	: >"$state/installed"
	fmake -n BUILD=b-n "$goal" >"$tmp/n-$goal.log" 2>&1
	first=$(grep -n 'dpkg -s' "$tmp/n-$goal.log" | head -1 | cut -d: -f1)
	second=$(grep -n "STRATA_DEPS=done $goal" "$tmp/n-$goal.log" | head -1 | cut -d: -f1)
	cc=$(grep -n -- ' -c .* -o ' "$tmp/n-$goal.log" | head -1 | cut -d: -f1)
	if [ -n "$first" ] && [ -n "$second" ] && [ -n "$cc" ] && [ "$first" -lt "$second" ] &&
		[ "$second" -lt "$cc" ]; then
		ok "make $goal checks the packages, then builds in a second make"
	else
		not_ok "make $goal checks the packages, then builds in a second make" \
			"$(grep -n -m3 -e 'dpkg -s' -e STRATA_DEPS -e ' -c ' "$tmp/n-$goal.log")"
	fi
done

echo "# fresh-machine: $passed passed, $failed failed"
[ $failed -eq 0 ]
