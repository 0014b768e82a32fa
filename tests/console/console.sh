#!/bin/sh
# console.sh — the operator's console (GET /) in headless Chromium against two live nodes:
# one without a token, one with --token-file (a token named "alice"). playwright-core
# (npm, into $BUILD/npm-browser once: playwright.sh) drives Debian's chromium; the
# checks are in console_test.js. The screenshot goes to $BUILD/console.png.
# Without chromium or npm the suite is skipped with one line. Ends
# "# console: N passed, N failed".
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
bin=${STRATA_BIN:-$BUILD/strata}
suite=console
say() { echo "$1"; echo "# $suite: $2"; exit "$3"; }
. "$root/tests/console/playwright.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-console.XXXXXX") || exit 1
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# The nodes run with --sync none, so their what-if replays on the page cache's model, as
# `strata calibrate --buffered` measures it here (the defaults model a slower disk).
"$bin" calibrate --dir "$tmp" --mib 16 --buffered --out "$tmp/model" 2>"$tmp/calibrate.log" || {
	cat "$tmp/calibrate.log"
	say "not ok - $suite: strata calibrate failed" "0 passed, 1 failed" 1
}
# start NAME [FLAGS...]: a node in $tmp/NAME; its URL in $url.
start() {
	name=$1
	shift
	"$bin" serve --listen 127.0.0.1:0 --data "$tmp/$name" --shards 3 --sync none --ready-file "$tmp/$name.ready" \
		--policy-compare-model "$tmp/model" --log-level warn "$@" >>"$tmp/$name.log" 2>&1 &
	pids="$pids $!"
	i=0
	while [ ! -s "$tmp/$name.ready" ]; do
		if [ $i -ge 200 ]; then
			cat "$tmp/$name.log"
			say "not ok - $suite: the node $name did not start" "0 passed, 1 failed" 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	url=http://$(cat "$tmp/$name.ready")
}

start plain
plain=$url
plain_pid=$!
token=console-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
printf '# the console test'"'"'s token\nalice %s\n' "$token" >"$tmp/tokens"
start auth --token-file "$tmp/tokens"

out=$tmp/out
PLAYWRIGHT=$pw CHROMIUM=$CHROMIUM NODE_URL=$plain AUTH_URL=$url AUTH_TOKEN=$token SHOT=$BUILD/console.png \
	timeout 300 node "$root/tests/console/console_test.js" >"$out" 2>&1
rc=$?
cat "$out"
passed=$(grep -c '^ok - ' "$out")
failed=$(grep -c '^not ok - ' "$out")
if [ $rc -ne 0 ] && [ "$failed" -eq 0 ]; then
	echo "not ok - $suite: the browser run exited $rc"
	failed=1
fi
# The history outlives a restart, and the restart adds no entry (it runs what it ran).
if [ -n "$plain_pid" ] && kill "$plain_pid" 2>/dev/null; then
	wait "$plain_pid" 2>/dev/null
	rm -f "$tmp/plain.ready"
	# A torn last line, as a crash in the middle of an append leaves it.
	printf '{"id":4,"time":"2026-' >>"$tmp/plain/policy-history.jsonl"
	start plain
	got=$(curl -s "$url/v1/policy/history" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const e=JSON.parse(s).entries;console.log(e.length+" "+e[0].note)})')
	if [ "$got" = "3 rollback to #1" ]; then
		echo "ok - the policy history outlives a restart, which adds no entry"
		passed=$((passed + 1))
		if grep -q "policy-history.jsonl line 4 is not an entry" "$tmp/plain.log"; then
			echo "ok - a torn line of the history file is skipped, and the log names it"
			passed=$((passed + 1))
		else
			echo "not ok - a torn line of the history file: no warning naming line 4 in the log"
			failed=$((failed + 1))
		fi
		# The next entry goes on a line of its own after the torn one.
		code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"to":2}' "$url/v1/policy/rollback")
		last=$(tail -1 "$tmp/plain/policy-history.jsonl" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const e=JSON.parse(s);console.log(e.id+" "+e.note)}catch(x){console.log("unparsable")}})')
		if [ "$code" = 200 ] && [ "$last" = "4 rollback to #2" ]; then
			echo "ok - after a torn line the next entry is written whole on its own line"
			passed=$((passed + 1))
		else
			echo "not ok - the entry after a torn line: HTTP $code, last line '$last'"
			failed=$((failed + 1))
		fi
	else
		echo "not ok - the policy history after a restart: got '$got', want '3 rollback to #1'"
		failed=$((failed + 1))
	fi
fi
if [ "$failed" -ne 0 ]; then
	echo "# the nodes' logs:"
	sed 's/^/#   /' "$tmp"/*.log
fi
echo "# $suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
