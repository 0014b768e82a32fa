#!/bin/sh
# serve_start.sh — a `strata serve` that cannot start leaves its data directory as it was:
# a bad --policy path, a policy that does not compile and a listen port in use each exit 1
# with a message naming what was wrong, and
#   - a data directory that did not exist is still absent;
#   - an existing store is unchanged: every path, type, size, mtime and sha256 the same;
# a ready file that cannot be written stops the start too, and removes the new store the
# start had created. Then the defaults every --help prints agree with each other and with
# what a new store gets: `strata compact --help` and `strata serve --help` show one
# --merge-max-inputs default, and a node started without --shards creates the shard count
# its --help names. Prints "# serve-start: N passed, N failed".
# A start that does not fail is stopped after 60 s (and counts as failed).
# usage: sh tests/node/serve_start.sh   (BUILD selects the build directory, default build)
suite=serve-start tag=start
. "$(dirname "$0")/lib.sh"
# The node that holds a port, so that a start on it fails.
busy_pid=""
cleanup_extra() { if [ -n "$busy_pid" ]; then kill "$busy_pid" 2>/dev/null; fi; }
start_node() {
	rm -f "$tmp/ready"
	"$bin" serve --listen 127.0.0.1:0 --data "$1" --ready-file "$tmp/ready" --log-level warn \
		>>"$tmp/node.log" 2>&1 &
	pid=$!
	if ! await_ready "$pid" "$tmp/ready" "$tmp/node.log" 400; then
		pid=""
		return 1
	fi
	addr=$(cat "$tmp/ready")
}
stop_node() {
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=""
}

# Every path under $1 with its type, size, mtime (ns) and sha256 (files), sorted.
listing() {
	(cd "$1" && find . -printf '%p %y %s %T@\n' | sort | while read -r p y s t; do
		if [ "$y" = f ]; then
			echo "$p $y $s $t $(sha256sum <"$p" | cut -c1-64)"
		else
			echo "$p $y $s $t"
		fi
	done)
}

# ---------------------------------------------------------------- the ways to fail
printf 'return {\n\tflush_interval_s = 5,\n' >"$tmp/broken.lua" # no closing brace
# A port in use: a node of its own holds it.
if ! start_node "$tmp/holder"; then
	echo "# serve-start: $passed passed, 1 failed"
	exit 1
fi
busy_pid=$pid
busy=$addr
pid=""
# An existing store, with rows, stopped.
if start_node "$tmp/store"; then
	curl -s -o /dev/null -X POST "http://$addr/v1/shards/0/rows" \
		--data-binary '{"key":"k1","value":"v1"}'
	curl -s -o /dev/null -X POST "http://$addr/v1/shards/0/seal"
	stop_node
else
	bad "an existing store was made"
fi
[ -s "$tmp/store/STORE" ] && ok "an existing store to start on" || bad "an existing store to start on"

# case name | flags | what the message must say
cases="policy-path|--policy $tmp/no-such-policy.lua|--policy $tmp/no-such-policy.lua: .*No such file
policy-broken|--policy $tmp/broken.lua|--policy $tmp/broken.lua: .*broken.lua:[0-9]*:
port-in-use|--listen $busy|--listen: cannot listen on $busy: Address already in use"
before=$(listing "$tmp/store")
echo "$cases" | while IFS='|' read -r name flags want; do
	# (a) a data directory that does not exist stays absent.
	# shellcheck disable=SC2086
	timeout 60 "$bin" serve --data "$tmp/new-$name" --listen 127.0.0.1:0 $flags --log-level warn \
		>"$tmp/out" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -q -- "$want" "$tmp/out" && grep -q "not started" "$tmp/out"; then
		ok "$name: exit 1 naming what was wrong: $(grep -- "$want" "$tmp/out" | head -1 | cut -c1-120)"
	else
		bad "$name: exit 1 naming what was wrong (exit $rc, want /$want/)" "$tmp/out"
	fi
	if [ ! -e "$tmp/new-$name" ]; then
		ok "$name: a data directory that did not exist is still absent"
	else
		bad "$name: a data directory that did not exist is still absent" "$tmp/out"
		find "$tmp/new-$name" | sed 's/^/#   left: /'
	fi
	# (b) an existing store is unchanged, byte for byte.
	# shellcheck disable=SC2086
	timeout 60 "$bin" serve --data "$tmp/store" --listen 127.0.0.1:0 $flags --log-level warn >"$tmp/out" 2>&1
	rc=$?
	after=$(listing "$tmp/store")
	if [ $rc -eq 1 ] && [ "$before" = "$after" ]; then
		ok "$name: an existing store is unchanged (paths, sizes, mtimes, sha256)"
	else
		echo "$before" >"$tmp/before"
		echo "$after" >"$tmp/after"
		diff "$tmp/before" "$tmp/after" >"$tmp/diff"
		cat "$tmp/out" >>"$tmp/diff"
		bad "$name: an existing store is unchanged (exit $rc)" "$tmp/diff"
	fi
done >"$tmp/results"
cat "$tmp/results"
passed=$((passed + $(grep -c '^ok' "$tmp/results")))
failed=$((failed + $(grep -c '^not ok' "$tmp/results")))

# A ready file that cannot be written: exit 1, and the store this start created is gone.
timeout 60 "$bin" serve --data "$tmp/new-ready" --listen 127.0.0.1:0 --ready-file "$tmp/no-such-dir/ready" \
	--log-level warn >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot write the ready file $tmp/no-such-dir/ready" "$tmp/out" &&
   [ ! -e "$tmp/new-ready" ]; then
	ok "an unwritable ready file: exit 1, and the new store is removed again"
else
	bad "an unwritable ready file: exit 1, and the new store is removed again (exit $rc)" "$tmp/out"
	[ -e "$tmp/new-ready" ] && find "$tmp/new-ready" | sed 's/^/#   left: /'
fi
# The existing store still opens, with its rows.
if start_node "$tmp/store"; then
	got=$(curl -s "http://$addr/v1/shards/0/rows/k1")
	[ "$got" = v1 ] && ok "the existing store still opens with its rows" ||
		bad "the existing store still opens with its rows (got '$got')"
	stop_node
else
	bad "the existing store still opens with its rows"
fi
kill "$busy_pid" 2>/dev/null
wait "$busy_pid" 2>/dev/null

# ---------------------------------------------------------------- the defaults --help prints
serve_inputs=$("$bin" serve --help | grep -A2 -- '--merge-max-inputs' | tr '\n' ' ' |
	sed -n 's/.*(default \([0-9]*\)).*/\1/p')
compact_inputs=$("$bin" compact --help | grep -- '--merge-max-inputs' | sed -n 's/.*(default \([0-9]*\),.*/\1/p')
if [ -n "$serve_inputs" ] && [ "$serve_inputs" = "$compact_inputs" ]; then
	ok "strata serve and strata compact --help show one --merge-max-inputs default ($serve_inputs)"
else
	echo "serve: '$serve_inputs', compact: '$compact_inputs'" >"$tmp/out"
	bad "strata serve and strata compact --help show one --merge-max-inputs default" "$tmp/out"
fi
help_shards=$("$bin" serve --help | grep -A3 -- '--shards' | tr '\n' ' ' |
	sed -n 's/.*the store.s; \([0-9]*\) for a new one.*/\1/p')
load_shards=$("$bin" load --help | grep -A1 -- '--shards' | tr '\n' ' ' | sed -n 's/.* \([0-9]*\) for a new store.*/\1/p')
stored=$(sed -n 's/^shards //p' "$tmp/store/STORE")
if [ -n "$help_shards" ] && [ "$help_shards" = "$stored" ] && [ "$load_shards" = "$stored" ]; then
	ok "a new store gets the shard count serve --help and load --help name ($stored)"
else
	echo "serve --help: '$help_shards', load --help: '$load_shards', STORE: '$stored'" >"$tmp/out"
	bad "a new store gets the shard count serve --help and load --help name" "$tmp/out"
fi
finish
