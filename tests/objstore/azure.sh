#!/bin/sh
# tests/objstore/azure.sh — the Azure Blob store against a real Azurite: installs azurite
# with npm into $BUILD/npm (once; not globally), starts azurite-blob on a free port with a
# fresh location, runs $BUILD/tests/objstore_azure against it, stops it by its PID.
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
STRATA_TEST_AZURE_ENDPOINT=http://127.0.0.1:$port \
AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==' \
	"$bin" "$@"
