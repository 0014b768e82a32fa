#!/bin/sh
# tests/objstore/s3.sh — the S3 store against a real s3rver: installs s3rver with npm into
# $BUILD/npm (once; not globally), starts it on 127.0.0.1 on a free port with a fresh
# directory, runs $BUILD/tests/objstore_s3 against it and `strata serve --store
# s3://...?single_writer=1` (rows read back from the bucket after a restart), checks that
# no credential reached a log, stops it by its PID. s3rver ignores If-None-Match and
# If-Match: the probe refuses it for shared use, which the suite checks too.
# Without npm the suite is skipped with one line. Ends "# objstore-s3: N passed, N failed".
# The server's install, start and stop are tests/objstore/server.sh's, shared with azure.sh.
BUILD=${BUILD:-build}
suite=objstore-s3
. "$(dirname "$0")/server.sh"
bin=$BUILD/tests/objstore_s3
server_need_npm s3rver
[ -x "$bin" ] || server_fail "$bin is not built"
server_install s3rver@3 s3rver s3rver install-s3rver.log
server_place s3rver
mkdir -p "$loc/data"
# s3rver makes continuation tokens with DES, which Node 17+ has only in its legacy provider.
server_start s3rver env NODE_OPTIONS=--openssl-legacy-provider "$server_cmd" -d "$loc/data" -a 127.0.0.1 \
	-p "$port" --silent --no-vhost-buckets
# s3rver's built-in credentials; the secret must never reach a log.
export STRATA_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export AWS_ACCESS_KEY_ID=S3RVER
export AWS_SECRET_ACCESS_KEY=S3RVER
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_REGION AWS_DEFAULT_REGION
server_run_suite "$bin" '^# ' "$@"
r=0
printf '%s\n' "$out" | grep -q 'fake-secret\|sEcReT-never' && r=1
check objstore_s3_output_holds_no_secret $r

# strata serve --store: rows appended, sealed and merged through HTTP read back after a restart,
# with the WAL gone (they must come from the bucket). A secret of its own, to look for in its log.
data="$loc/node"
url="s3://serve-$$/node?endpoint=http://127.0.0.1:$port&single_writer=1"
serve() {
	server_node "$loc/ready" "$loc/serve.log" env AWS_SECRET_ACCESS_KEY=serve-secret-$$ "$BUILD/strata" serve \
		--data "$data" --store "$url" --shards 1 --log-level info
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
check serve_store_url_rows_read_back_from_the_bucket $((1 - serve_ok)) "$(tail -20 "$loc/serve.log")"
# strata inspect --store reads the bucket: the merged run, every block checked.
iout=$(AWS_SECRET_ACCESS_KEY=serve-secret-$$ "$BUILD/strata" inspect --store "$url" --verify 2>&1)
irc=$?
r=1
[ "$irc" = 0 ] && printf '%s\n' "$iout" | grep -q '^  base_runs: 1$' &&
	printf '%s\n' "$iout" | grep -q '^verify: ok$' && r=0
check inspect_store_reads_the_bucket $r "exit $irc: $(printf '%s\n' "$iout" | tail -20)"
# Without single_writer the node refuses to start, with the probe's message.
shared="s3://serve-$$/node?endpoint=http://127.0.0.1:$port"
msg=$("$BUILD/strata" serve --listen 127.0.0.1:0 --data "$loc/node2" --store "$shared" --shards 1 2>&1)
src=$?
r=1
[ "$src" -ne 0 ] && printf '%s' "$msg" | grep -q 'does not enforce If-None-Match.*single_writer=1' && r=0
check serve_refuses_a_store_without_conditional_writes $r "exit $src: $(printf '%s\n' "$msg" | tail -5)"
r=0
grep -q "serve-secret-$$" "$loc/serve.log" && r=1
check serve_log_holds_no_secret $r
echo "# objstore-s3: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
