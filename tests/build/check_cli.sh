#!/bin/sh
# check_cli.sh — the `strata` command line, as one suite for tests/run.sh
# ("# cli: N passed, N failed"):
#   - every field of strata_options (node/strata_types.h) has a `strata serve` flag
#     (its --help names the field), the flag is parsed (a bad value is refused by name),
#     one reaches the engine (--wal-segment-bytes cuts WAL segments), and node/cli/README.md's
#     CLI section names every flag --help lists;
#   - every subcommand's --help prints its usage and exits 0; an unknown flag is named
#     as unknown (also when it is the last argument); `cannot open` says why (strerror);
#   - `strata policy check --run` reports a hook that loops forever, calls os.execute or
#     allocates without bound as broken with file:line (exit 1), and runs every hook of
#     every shipped policy successfully (exit 0).
# usage: tests/build/check_cli.sh   (BUILD selects the build directory, default build)
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
S="$BUILD/strata"
passed=0
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-cli.XXXXXX") || exit 1
node_pid=
cleanup() {
	if [ -n "$node_pid" ]; then kill "$node_pid" 2>/dev/null; wait "$node_pid" 2>/dev/null; fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

ok() {
	echo "ok - $1"
	passed=$((passed + 1))
}
not_ok() {
	echo "not ok - $1"
	if [ -n "${2:-}" ]; then printf '%s\n' "$2" | sed 's/^/#   /'; fi
	failed=$((failed + 1))
}

# ---------------------------------------------------------------- strata_options -> flags
# The fields of struct strata_options, from the header itself.
fields=$(awk '/^typedef struct strata_options \{/ { on = 1; next }
	on && /^\} strata_options;/ { exit }
	on && /^[ \t]+[a-z_0-9 ]+[ *]+[a-z_0-9]+;/ { f = $NF; sub(/;$/, "", f); sub(/^\*/, "", f); print f }' \
	node/strata_types.h)
"$S" serve --help >"$tmp/serve-help" 2>&1
if [ -z "$fields" ]; then
	not_ok "found the fields of strata_options in node/strata_types.h"
fi
# Each field has a flag (--help names it as [field]) or a line saying why not.
missing=""
nfields=0
noflag=""
for f in $fields; do
	nfields=$((nfields + 1))
	if grep -q "^  $f  *(no flag: " "$tmp/serve-help"; then
		noflag="$noflag $f"
	elif ! grep -q "\[$f\]" "$tmp/serve-help"; then
		missing="$missing $f"
	fi
done
if [ -z "$missing" ] && [ "$nfields" -gt 10 ]; then
	ok "every one of the $nfields strata_options fields has a strata serve flag (or --help says why not:$noflag)"
else
	not_ok "every strata_options field has a strata serve flag" "neither a flag nor a reason:$missing"
fi

# Each engine flag is parsed from the table: a bad value is refused naming the flag.
bad=""
n=0
for f in $fields; do
	case " $noflag " in *" $f "*) continue ;; esac
	# Paths and URLs are strings the open checks (and names in its message).
	case $f in dir | wal_dir | policy | store) continue ;; esac
	flag=$(awk -v f="[$f]" '/^  --/ { flag = $1 } index($0, f) { print flag; exit }' "$tmp/serve-help")
	n=$((n + 1))
	out=$("$S" serve "$flag" not-a-number 2>&1)
	rc=$?
	case "$out" in
	*"bad value 'not-a-number' for $flag"*) [ "$rc" -eq 2 ] || bad="$bad $flag(rc $rc)" ;;
	*) bad="$bad $flag($out)" ;;
	esac
done
if [ -z "$bad" ]; then
	ok "the $n engine flags refuse a bad value by name (exit 2)"
else
	not_ok "the engine flags refuse a bad value by name" "$bad"
fi

# One flag reaching the engine: 4 KiB WAL segments cut a few hundred rows into many segments.
"$S" serve --listen 127.0.0.1:0 --data "$tmp/data" --ready-file "$tmp/ready" --sync none \
	--wal-segment-bytes 4096 --shards 1 --log-level error >"$tmp/node.log" 2>&1 &
node_pid=$!
i=0
while [ ! -s "$tmp/ready" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
segs=0
if [ -s "$tmp/ready" ]; then
	addr=$(cat "$tmp/ready")
	awk 'BEGIN { for (i = 0; i < 30; i++) printf("{\"key\":\"k%05d\",\"value\":\"%064d\"}\n", i, i) }' >"$tmp/rows"
	for b in 1 2 3 4 5 6 7 8 9 10; do
		curl -s -o /dev/null -X POST --data-binary @"$tmp/rows" "http://$addr/v1/shards/0/rows"
	done
	segs=$(find "$tmp/data/wal" -name '*.wal' | wc -l)
fi
kill "$node_pid" 2>/dev/null
wait "$node_pid" 2>/dev/null
node_pid=
if [ "$segs" -gt 3 ]; then
	ok "strata serve --wal-segment-bytes 4096 reaches the engine ($segs WAL segments for 10 appends of 3 KiB)"
else
	not_ok "strata serve --wal-segment-bytes 4096 reaches the engine" "$segs segments; $(tail -3 "$tmp/node.log")"
fi

# node/cli/README.md's "strata serve" section names every flag strata serve --help lists.
awk '/^## strata serve/ { on = 1; next } on && /^## / { exit } on' node/cli/README.md >"$tmp/readme-cli"
missing=""
for flag in $(grep -o -- '^  --[a-z0-9-]*' "$tmp/serve-help" | tr -d ' '); do
	[ "$flag" = --help ] && continue
	grep -q -- "\`$flag[\` =]" "$tmp/readme-cli" || missing="$missing $flag"
done
if [ -z "$missing" ]; then
	ok "node/cli/README.md names every strata serve flag"
else
	not_ok "node/cli/README.md names every strata serve flag" "missing:$missing"
fi

# ---------------------------------------------------------------- --help, unknown flags, errno
# The subcommands strata --help lists (two words for "policy check").
cmds=$("$S" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ {
	if ($2 ~ /^[a-z]+$/) print $1 "_" $2; else print $1 }')
bad=""
for c in $cmds; do
	c=$(echo "$c" | tr _ ' ')
	# shellcheck disable=SC2086
	out=$("$S" $c --help 2>&1)
	rc=$?
	case "$out" in
	usage:*) [ "$rc" -eq 0 ] || bad="$bad '$c'(rc $rc)" ;;
	*) bad="$bad '$c'($(echo "$out" | head -1))" ;;
	esac
done
if [ -n "$cmds" ] && [ -z "$bad" ]; then
	ok "every subcommand's --help prints its usage and exits 0: $(echo $cmds | tr _ ' ')"
else
	not_ok "every subcommand's --help prints its usage and exits 0" "$bad"
fi

for args in "serve --bogus" "serve --bogus=1" "serve --listen 127.0.0.1:0 --bogus" "load x.lua --bogus"; do
	# shellcheck disable=SC2086
	out=$("$S" $args 2>&1)
	rc=$?
	case "$out" in
	*"unknown "*"--bogus"*) [ "$rc" -ne 0 ] && ok "strata $args: $out" || not_ok "strata $args exits nonzero" ;;
	*) not_ok "strata $args names --bogus as unknown" "$out" ;;
	esac
done

for args in "policy check $tmp/missing.lua" "inspect $tmp/missing" "repair $tmp/missing" "load $tmp/missing.lua"; do
	# shellcheck disable=SC2086
	out=$("$S" $args 2>&1)
	case "$out" in
	*"cannot open"*"No such file or directory"*) ok "strata $args: cannot open says why" ;;
	*) not_ok "strata $args: cannot open says why (strerror)" "$out" ;;
	esac
done

# ---------------------------------------------------------------- policy check --run
cat >"$tmp/loop.lua" <<'EOF'
return {
	on_seal = function(shard, info)
		while true do end
	end,
}
EOF
cat >"$tmp/exec.lua" <<'EOF'
return {
	on_sweep = function(node)
		os.execute("touch /tmp/strata-policy-pwned")
	end,
}
EOF
cat >"$tmp/alloc.lua" <<'EOF'
return {
	on_merge_request = function(shard, req)
		local t = {}
		for i = 1, 1e9 do
			t[i] = string.rep("x", 1e7) .. i
		end
	end,
}
EOF
# run_broken FILE WANT: --run exits 1 and reports WANT on a FAILED line.
run_broken() {
	out=$("$S" policy check --run "$tmp/$1" 2>&1)
	rc=$?
	line=$(echo "$out" | grep "FAILED" | head -1)
	if [ "$rc" -eq 1 ] && echo "$line" | grep -qF -- "$2" && echo "$out" | grep -q "$1: broken"; then
		ok "policy check --run $1 is broken: $(echo "$line" | sed 's/  */ /g')"
	else
		not_ok "policy check --run $1 is reported broken with '$2' (exit 1)" "rc $rc; $out"
	fi
}
run_broken loop.lua "$tmp/loop.lua:3: hook exceeded its time budget of 200 ms"
run_broken exec.lua "$tmp/exec.lua:3: undefined global 'os'"
run_broken alloc.lua "$tmp/alloc.lua:5: not enough memory"
# Without --run each of them passes: the hooks are not called.
if "$S" policy check "$tmp/loop.lua" >/dev/null 2>&1; then
	ok "policy check without --run passes loop.lua (what --run is for)"
else
	not_ok "policy check without --run passes loop.lua"
fi
for f in policies/*.lua; do
	out=$("$S" policy check --run "$f" 2>&1)
	rc=$?
	if [ "$rc" -eq 0 ] && echo "$out" | grep -q "$f: ok: all 5 hook runs succeeded" &&
		! echo "$out" | grep -q FAILED; then
		ok "policy check --run $f: every hook runs"
	else
		not_ok "policy check --run $f: every hook runs" "rc $rc; $out"
	fi
done

echo "# cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
