#!/bin/sh
# tests/objstore/s3.sh — the S3 store against a real s3rver: installs s3rver with npm into
# $BUILD/npm (once; not globally), starts it on 127.0.0.1 on a free port with a fresh
# directory, runs $BUILD/tests/objstore_s3 against it and `strata serve --store
# s3://...?single_writer=1` (rows read back from the bucket after a restart), checks that
# no credential reached a log, stops it by its PID. s3rver ignores If-None-Match and
# If-Match: the probe refuses it for shared use, which the suite checks too.
# Without npm the suite is skipped with one line. Ends "# objstore-s3: N passed, N failed".
BUILD=${BUILD:-build}
bin=$BUILD/tests/objstore_s3
if ! command -v npm >/dev/null 2>&1; then
	echo "skip - objstore-s3: npm is not installed (apt-get install npm), s3rver cannot run"
	echo "# objstore-s3: 0 passed, 0 failed"
	exit 0
fi
fail() {
	echo "not ok - objstore-s3: $1"
	echo "# objstore-s3: 0 passed, 1 failed"
	exit 1
}
[ -x "$bin" ] || fail "$bin is not built"
npmdir=$BUILD/npm
s3rver=$npmdir/node_modules/.bin/s3rver
if [ ! -x "$s3rver" ]; then
	mkdir -p "$npmdir"
	npm install --prefix "$npmdir" --no-audit --no-fund --loglevel=error s3rver@3 >"$npmdir/install-s3rver.log" 2>&1 ||
		{ tail -20 "$npmdir/install-s3rver.log"; fail "npm install s3rver failed (log: $npmdir/install-s3rver.log)"; }
fi
loc=$(mktemp -d "${TMPDIR:-/tmp}/strata-s3rver.XXXXXX") || fail "mktemp"
# A free port: bind 0 in a throwaway Node process (Node is there: npm needs it).
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
[ -n "$port" ] || fail "no free port"
mkdir -p "$loc/data"
# s3rver makes continuation tokens with DES, which Node 17+ has only in its legacy provider.
NODE_OPTIONS=--openssl-legacy-provider "$s3rver" -d "$loc/data" -a 127.0.0.1 -p "$port" --silent --no-vhost-buckets >"$loc.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$loc" "$loc.log"' EXIT INT TERM
up=0
i=0
while [ $i -lt 150 ]; do
	if curl -s -o /dev/null "http://127.0.0.1:$port/"; then up=1; break; fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
[ "$up" = 1 ] || { cat "$loc.log"; fail "s3rver did not listen on 127.0.0.1:$port"; }
# s3rver's built-in credentials; the secret must never reach a log.
export STRATA_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export AWS_ACCESS_KEY_ID=S3RVER
export AWS_SECRET_ACCESS_KEY=S3RVER
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_REGION AWS_DEFAULT_REGION
out=$("$bin" "$@" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^# '
line=$(printf '%s\n' "$out" | grep -E '^# objstore_s3: [0-9]+ passed, [0-9]+ failed' | tail -1)
[ -n "$line" ] || fail "$bin printed no summary (exit $rc)"
passed=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
failed=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
[ $# -gt 0 ] && { echo "# objstore-s3: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
if printf '%s\n' "$out" | grep -q 'fake-secret\|sEcReT-never'; then
	echo "not ok - objstore_s3_output_holds_no_secret"
	failed=$((failed + 1))
else
	echo "ok - objstore_s3_output_holds_no_secret"
	passed=$((passed + 1))
fi

# strata serve --store: rows appended, sealed and merged through HTTP read back after a restart,
# with the WAL gone (they must come from the bucket). A secret of its own, to look for in its log.
data="$loc/node"
url="s3://serve-$$/node?endpoint=http://127.0.0.1:$port&single_writer=1"
serve() {
	rm -f "$loc/ready"
	AWS_SECRET_ACCESS_KEY=serve-secret-$$ "$BUILD/strata" serve --listen 127.0.0.1:0 --data "$data" \
		--store "$url" --shards 1 --ready-file "$loc/ready" --log-level info >>"$loc/serve.log" 2>&1 &
	spid=$!
	i=0
	while [ ! -s "$loc/ready" ] && [ $i -lt 100 ] && kill -0 "$spid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	addr=$(cat "$loc/ready" 2>/dev/null)
}
serve_ok=0
serve
if [ -n "$addr" ] &&
	curl -sf -X POST --data-binary '{"key": "k1", "value": "on s3"}' "http://$addr/v1/shards/0/rows" >/dev/null &&
	curl -sf -X POST "http://$addr/v1/shards/0/seal" >/dev/null &&
	curl -sf -X POST --data-binary '{"key": "k2", "value": "merged"}' "http://$addr/v1/shards/0/rows" >/dev/null &&
	curl -sf -X POST "http://$addr/v1/shards/0/merge-wal" >/dev/null; then
	kill "$spid"; wait "$spid" 2>/dev/null
	mv "$data/wal" "$loc/wal-gone" # the rows must come from the bucket, not from the WAL
	serve
	[ -n "$addr" ] && [ "$(curl -sf "http://$addr/v1/shards/0/rows/k1")" = "on s3" ] &&
		[ "$(curl -sf "http://$addr/v1/shards/0/rows/k2")" = "merged" ] && serve_ok=1
	kill "$spid"; wait "$spid" 2>/dev/null
fi
if [ "$serve_ok" = 1 ]; then
	echo "ok - serve_store_url_rows_read_back_from_the_bucket"
	passed=$((passed + 1))
else
	tail -20 "$loc/serve.log"
	echo "not ok - serve_store_url_rows_read_back_from_the_bucket"
	failed=$((failed + 1))
fi
# strata inspect --store reads the bucket: the merged run, every block checked.
iout=$(AWS_SECRET_ACCESS_KEY=serve-secret-$$ "$BUILD/strata" inspect --store "$url" --verify 2>&1)
irc=$?
if [ "$irc" = 0 ] && printf '%s\n' "$iout" | grep -q '^  base_runs: 1$' &&
	printf '%s\n' "$iout" | grep -q '^verify: ok$'; then
	echo "ok - inspect_store_reads_the_bucket"
	passed=$((passed + 1))
else
	printf '%s\n' "$iout" | tail -20
	echo "not ok - inspect_store_reads_the_bucket (exit $irc)"
	failed=$((failed + 1))
fi
# Without single_writer the node refuses to start, with the probe's message.
shared="s3://serve-$$/node?endpoint=http://127.0.0.1:$port"
msg=$("$BUILD/strata" serve --listen 127.0.0.1:0 --data "$loc/node2" --store "$shared" --shards 1 2>&1)
src=$?
if [ "$src" -ne 0 ] && printf '%s' "$msg" | grep -q 'does not enforce If-None-Match.*single_writer=1'; then
	echo "ok - serve_refuses_a_store_without_conditional_writes"
	passed=$((passed + 1))
else
	printf '%s\n' "$msg" | tail -5
	echo "not ok - serve_refuses_a_store_without_conditional_writes (exit $src)"
	failed=$((failed + 1))
fi
if grep -q "serve-secret-$$" "$loc/serve.log"; then
	echo "not ok - serve_log_holds_no_secret"
	failed=$((failed + 1))
else
	echo "ok - serve_log_holds_no_secret"
	passed=$((passed + 1))
fi
echo "# objstore-s3: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
