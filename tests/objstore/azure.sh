#!/bin/sh
# tests/objstore/azure.sh — the Azure Blob store against a real Azurite: installs azurite
# with npm into $BUILD/npm (once; not globally), starts azurite-blob on a free port with a
# fresh location, runs $BUILD/tests/objstore_azure against it and `strata serve --store` (rows
# read back from the container after a restart), stops it by its PID.
# Without npm the suite is skipped with one line. Ends "# objstore-azure: N passed, N failed".
BUILD=${BUILD:-build}
bin=$BUILD/tests/objstore_azure
if ! command -v npm >/dev/null 2>&1; then
	echo "skip - objstore-azure: npm is not installed (apt-get install npm), Azurite cannot run"
	echo "# objstore-azure: 0 passed, 0 failed"
	exit 0
fi
fail() {
	echo "not ok - objstore-azure: $1"
	echo "# objstore-azure: 0 passed, 1 failed"
	exit 1
}
[ -x "$bin" ] || fail "$bin is not built"
npmdir=$BUILD/npm
azurite=$npmdir/node_modules/.bin/azurite-blob
if [ ! -x "$azurite" ]; then
	mkdir -p "$npmdir"
	npm install --prefix "$npmdir" --no-audit --no-fund --loglevel=error azurite@3 >"$npmdir/install.log" 2>&1 ||
		{ tail -20 "$npmdir/install.log"; fail "npm install azurite failed (log: $npmdir/install.log)"; }
fi
loc=$(mktemp -d "${TMPDIR:-/tmp}/strata-azurite.XXXXXX") || fail "mktemp"
# A free port: bind 0 in a throwaway Node process (Node is there: npm needs it).
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
[ -n "$port" ] || fail "no free port"
"$azurite" --blobHost 127.0.0.1 --blobPort "$port" --location "$loc" --silent --disableTelemetry \
	--skipApiVersionCheck >"$loc.log" 2>&1 &
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
[ "$up" = 1 ] || { cat "$loc.log"; fail "azurite-blob did not listen on 127.0.0.1:$port"; }
# The development account's published key (Azurite's devstoreaccount1).
export STRATA_TEST_AZURE_ENDPOINT=http://127.0.0.1:$port
export AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
out=$("$bin" "$@" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^# objstore_azure: '
line=$(printf '%s\n' "$out" | grep -E '^# objstore_azure: [0-9]+ passed, [0-9]+ failed' | tail -1)
[ -n "$line" ] || fail "$bin printed no summary (exit $rc)"
passed=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
failed=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
[ $# -gt 0 ] && { echo "# objstore-azure: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

# strata serve --store: rows appended and sealed through HTTP read back after a restart.
data="$loc/node"
url="azure://devstoreaccount1/serve-$$?endpoint=http://127.0.0.1:$port"
serve() {
	rm -f "$loc/ready"
	"$BUILD/strata" serve --listen 127.0.0.1:0 --data "$data" --store "$url" --shards 1 \
		--ready-file "$loc/ready" --log-level warn >>"$loc/serve.log" 2>&1 &
	spid=$!
	i=0
	while [ ! -s "$loc/ready" ] && [ $i -lt 100 ] && kill -0 "$spid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	addr=$(cat "$loc/ready" 2>/dev/null)
}
serve_ok=0
serve
if [ -n "$addr" ] &&
	curl -sf -X POST --data-binary '{"key": "k1", "value": "on azure"}' "http://$addr/v1/shards/0/rows" >/dev/null &&
	curl -sf -X POST "http://$addr/v1/shards/0/seal" >/dev/null; then
	kill "$spid"; wait "$spid" 2>/dev/null
	mv "$data/wal" "$loc/wal-gone" # the row must come from the container, not from the WAL
	serve
	[ -n "$addr" ] && [ "$(curl -sf "http://$addr/v1/shards/0/rows/k1")" = "on azure" ] && serve_ok=1
	kill "$spid"; wait "$spid" 2>/dev/null
fi
if [ "$serve_ok" = 1 ]; then
	echo "ok - serve_store_url_rows_read_back_from_the_container"
	passed=$((passed + 1))
else
	tail -20 "$loc/serve.log"
	echo "not ok - serve_store_url_rows_read_back_from_the_container"
	failed=$((failed + 1))
fi
# strata compact next to strata serve on the container (tests/objstore/compact_live.sh).
out=$(BUILD=$BUILD sh "$(dirname "$0")/compact_live.sh" azure \
	"azure://devstoreaccount1/compact-$$?endpoint=http://127.0.0.1:$port" "$bin" 2>&1)
printf '%s\n' "$out" | grep -v '^# compact-live-azure: [0-9]* passed'
line=$(printf '%s\n' "$out" | grep -E '^# compact-live-azure: [0-9]+ passed, [0-9]+ failed' | tail -1)
if [ -n "$line" ]; then
	passed=$((passed + $(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
	failed=$((failed + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
else
	echo "not ok - compact-live-azure: printed no summary"
	failed=$((failed + 1))
fi
echo "# objstore-azure: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
