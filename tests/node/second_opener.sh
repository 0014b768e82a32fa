#!/bin/sh
# second_opener.sh — lua/README.md's module example, pointed at the data directory of a
# running node (as a user who mixes up the directories would): its strata.open must be
# refused with the lock message, the node keeps serving, and its next acknowledged append
# survives kill -9.
# Prints "# second-opener: N passed, N failed".
suite=second-opener tag=opener
. "$(dirname "$0")/lib.sh"
start_node() {
	rm -f "$tmp/ready"
	(cd "$tmp" && exec "$bin" serve --listen 127.0.0.1:0 --data ./data --policy "$root/policies/default.lua" \
		--ready-file "$tmp/ready" --log-level warn) >>"$tmp/node.log" 2>&1 &
	pid=$!
	await_ready "$pid" "$tmp/ready" "$tmp/node.log" || return 1
	addr=$(cat "$tmp/ready")
}

post() { curl -s -o /dev/null -w '%{http_code}' -X POST "http://$addr/v1/shards/0/rows" -d "$1"; }

if ! start_node; then
	echo "# second-opener: 0 passed, 1 failed"
	exit 1
fi
[ "$(post '{"key":"k1","value":"before"}')" = 200 ] && ok "the node appends" || bad "the node appends"

# lua/README.md's module example, with its directory replaced by the node's ("data").
awk '/^## The module/ {m = 1} m && /^```lua$/ {c = 1; next} c && /^```$/ {exit} c {print}' \
	"$root/lua/README.md" | sed 's/dir = "[^"]*"/dir = "data"/' >"$tmp/example.lua"
ln -s "$root/policies" "$tmp/policies"
if [ -s "$tmp/example.lua" ] && grep -q 'strata.open{dir = "data"' "$tmp/example.lua"; then
	ok "lua/README.md has a module example that opens a directory"
else
	bad "lua/README.md has a module example that opens a directory"
fi
(cd "$tmp" && LUA_PATH="$root/lua/?.lua;;" LUA_CPATH="$BUILD/?.so;;" luajit example.lua) \
	>"$tmp/example.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "is in use (pid $pid holds" "$tmp/example.out"; then
	ok "the example is refused with the lock message naming the node's pid"
else
	bad "the example is refused with the lock message naming the node's pid (exit $rc)"
	sed 's/^/  /' "$tmp/example.out"
fi

# The node was not fenced: its next append is acknowledged and survives kill -9.
[ "$(post '{"key":"k2","value":"after"}')" = 200 ] && ok "the node still appends" || bad "the node still appends"
epoch=$(curl -s "http://$addr/v1/stats" | grep -o '"writer_epoch": *[0-9]*' | head -1 | grep -o '[0-9]*$')
[ "$epoch" = 1 ] && ok "the node's epoch is unchanged" || bad "the node's epoch is unchanged (got '$epoch')"
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=""
if start_node; then
	for k in k1 k2; do
		got=$(curl -s "http://$addr/v1/shards/0/rows/$k")
		case "$got" in
		*before* | *after*) ok "$k is durable after kill -9 and restart" ;;
		*) bad "$k is durable after kill -9 and restart (got '$got')" ;;
		esac
	done
else
	bad "the store reopens after kill -9"
fi
finish
