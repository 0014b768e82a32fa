#!/bin/sh
# tests/objstore/azure.sh — the Azure Blob store against a real Azurite: installs azurite
# with npm into $BUILD/npm (once; not globally), starts azurite-blob on a free port with a
# fresh location, runs $BUILD/tests/objstore_azure against it and `strata serve --store` (rows
# read back from the container after a restart; with --wal store: kill -9 during appends
# and a restart on an empty data directory, and two nodes on one container where node B
# claims shard 0 while a client appends to node A, then shard 1 while A is idle), stops it
# by its PID.
# Without npm the suite is skipped with one line. Ends "# objstore-azure: N passed, N failed".
# The server's install, start and stop are tests/objstore/server.sh's, shared with s3.sh.
BUILD=${BUILD:-build}
suite=objstore-azure
. "$(dirname "$0")/server.sh"
bin=$BUILD/tests/objstore_azure
server_need_npm Azurite
[ -x "$bin" ] || server_fail "$bin is not built"
server_install azurite@3 azurite azurite-blob install.log
server_place azurite
server_start azurite-blob "$server_cmd" --blobHost 127.0.0.1 --blobPort "$port" --location "$loc" --silent \
	--disableTelemetry --skipApiVersionCheck
# The development account's published key (Azurite's devstoreaccount1).
export STRATA_TEST_AZURE_ENDPOINT=http://127.0.0.1:$port
export AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
server_run_suite "$bin" '^# objstore_azure: ' "$@"

# strata serve --store: rows appended and sealed through HTTP read back after a restart.
data="$loc/node"
url="azure://devstoreaccount1/serve-$$?endpoint=http://127.0.0.1:$port"
serve() {
	server_node "$loc/ready" "$loc/serve.log" "$BUILD/strata" serve --data "$data" --store "$url" --shards 1 \
		--log-level warn
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
check serve_store_url_rows_read_back_from_the_container $((1 - serve_ok)) "$(tail -20 "$loc/serve.log")"
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

# ---- wal = store: two real nodes, kill -9 and takeover.
# start_node DATA ARGS...: a node on $wurl; sets spid and addr.
start_node() {
	d=$1
	shift
	server_node "$d.ready" "$d.log" "$BUILD/strata" serve --data "$d" --store "$wurl" --wal store \
		--log-level warn "$@"
}
# appender ADDR SHARD PREFIX OUT: one row per request until one is refused or OUT.halt
# exists; the keys acknowledged go to OUT, the refusal's status and body to OUT.stop/.body.
appender() {
	n=0
	while [ ! -e "$4.halt" ] && [ $n -lt 20000 ]; do
		code=$(curl -s -o "$4.resp" -w '%{http_code}' -X POST --data-binary \
			"{\"key\": \"$3$n\", \"value\": \"v$n\"}" "http://$1/v1/shards/$2/rows")
		if [ "$code" != 200 ]; then
			echo "$code" >"$4.stop"
			cp "$4.resp" "$4.body" 2>/dev/null
			break
		fi
		echo "$3$n" >>"$4"
		n=$((n + 1))
	done
}
# wait_lines FILE N: until FILE has N lines (at most 30 s).
wait_lines() {
	i=0
	while [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
}
# lost ADDR SHARD FILE: how many keys of FILE do not read back as v<n> through ADDR.
lost() {
	bad=0
	while read -r k; do
		[ "$(curl -s "http://$1/v1/shards/$2/rows/$k")" = "v${k##*[!0-9]}" ] || bad=$((bad + 1))
	done <"$3"
	echo $bad
}

# kill -9 of a node during appends, restart with an empty data directory: nothing lost.
wurl="azure://devstoreaccount1/walkill-$$?endpoint=http://127.0.0.1:$port"
start_node "$loc/k1" --shards 1
r=1
if [ -n "$addr" ]; then
	: >"$loc/kill.acked"
	appender "$addr" 0 kill- "$loc/kill.acked" &
	apid=$!
	wait_lines "$loc/kill.acked" 30
	kill -9 "$spid"; wait "$spid" 2>/dev/null
	wait "$apid"
	# strata inspect --store reads the dead node's WAL objects from the container: every
	# object whole (--verify), the unsealed rows' batches among them.
	"$BUILD/strata" inspect --store "$wurl" --verify --json >"$loc/inspect.json" 2>"$loc/inspect.err"
	irc=$?
	nbatch=$(grep -c '"kind": "batch"' "$loc/inspect.json")
	ri=1
	[ "$irc" = 0 ] && [ "$nbatch" -ge 1 ] && grep -q '"verify": "ok"' "$loc/inspect.json" &&
		grep -q '"state": "replayed"' "$loc/inspect.json" && ri=0
	check "inspect_store_lists_and_verifies_the_wal_objects" $ri \
		"exit $irc, $nbatch batches; $(head -c 600 "$loc/inspect.err")"
	# strata repair --store checks the same objects as an open would: nothing to repair.
	"$BUILD/strata" repair "$loc/k1" --store "$wurl" >"$loc/repair.out" 2>&1
	rrc=$?
	rr=1
	[ "$rrc" = 0 ] && grep -q ': 1 shard$' "$loc/repair.out" && grep -q 'nothing to repair' "$loc/repair.out" && rr=0
	check "repair_store_finds_nothing_to_repair_after_a_kill" $rr "exit $rrc: $(head -c 600 "$loc/repair.out")"
	start_node "$loc/k2" --shards 1
	if [ -n "$addr" ]; then
		nacked=$(wc -l <"$loc/kill.acked")
		nlost=$(lost "$addr" 0 "$loc/kill.acked")
		echo "# walstore: kill -9 after $nacked acknowledged rows; lost after a restart on an empty data directory: $nlost"
		[ "$nacked" -ge 30 ] && [ "$nlost" = 0 ] && r=0
	fi
	kill "$spid"; wait "$spid" 2>/dev/null
fi
check "wal_store_kill9_during_appends_loses_no_acked_row" $r "$(tail -5 "$loc/k1.log" "$loc/k2.log" 2>/dev/null)"

# Node B claims shard 0 while a client appends to node A: A answers 409 fenced from its
# next append on, B reads every row A acknowledged, A keeps serving shard 1.
wurl="azure://devstoreaccount1/walclaim-$$?endpoint=http://127.0.0.1:$port"
start_node "$loc/na" --shards 0-1
apid_node=$spid
aaddr=$addr
start_node "$loc/nb" --shards 2-3
bpid_node=$spid
baddr=$addr
r=1
detail=""
if [ -n "$aaddr" ] && [ -n "$baddr" ]; then
	notserved=$(curl -s -o /dev/null -w '%{http_code}' "http://$baddr/v1/shards/0/rows/x")
	: >"$loc/claim.acked"
	appender "$aaddr" 0 claim- "$loc/claim.acked" &
	apid=$!
	wait_lines "$loc/claim.acked" 30
	claim=$(curl -s -w ' %{http_code}' -X POST "http://$baddr/v1/shards/0/claim")
	before=$(wc -l <"$loc/claim.acked")
	# The appender stops at its first refusal; with the fencing broken it would not: halt
	# it after 30 more rows.
	wait_lines "$loc/claim.acked" $((before + 30))
	touch "$loc/claim.acked.halt"
	wait "$apid"
	stop=$(cat "$loc/claim.acked.stop" 2>/dev/null)
	body=$(cat "$loc/claim.acked.body" 2>/dev/null)
	again=$(curl -s -w ' %{http_code}' -X POST --data-binary '{"key": "late", "value": "x"}' \
		"http://$aaddr/v1/shards/0/rows")
	shard1=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary '{"key": "s1", "value": "x"}' \
		"http://$aaddr/v1/shards/1/rows")
	nacked=$(wc -l <"$loc/claim.acked")
	nlost=$(lost "$baddr" 0 "$loc/claim.acked")
	echo "# walstore: node A acknowledged $nacked rows on shard 0 ($before when B's claim answered); lost through B: $nlost"
	detail="not served: $notserved; claim: $claim; A stopped with $stop: $body; next append: $again; A shard 1: $shard1"
	case "$claim" in *' 200') ;; *) nlost=x ;; esac
	case "$body" in *'"fenced"'*) ;; *) nlost=x ;; esac
	case "$again" in *'"fenced"'*' 409') ;; *) nlost=x ;; esac
	[ "$notserved" = 421 ] && [ "$stop" = 409 ] && [ "$shard1" = 200 ] && [ "$nlost" = 0 ] && r=0
fi
check "claim_by_node_b_fences_node_a_which_keeps_its_other_shards" $r "$detail
$(tail -5 "$loc/na.log" "$loc/nb.log" 2>/dev/null)"

# Node A is idle on shard 1 when B claims it: A serves no stale read of it and no 404 for
# B's row once its last look at the epoch object is older than --owner-check-ms (1 s);
# A's own claim then looks too and takes the shard back, and B is fenced.
r=1
detail="the nodes did not start"
if [ -n "$aaddr" ] && [ -n "$baddr" ]; then
	bclaim=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$baddr/v1/shards/1/claim")
	bput=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary '{"key": "s1b", "value": "by-b"}' \
		"http://$baddr/v1/shards/1/rows")
	sleep 1.2
	stale=$(curl -s -w ' %{http_code}' "http://$aaddr/v1/shards/1/rows/s1")
	missing=$(curl -s -w ' %{http_code}' "http://$aaddr/v1/shards/1/rows/s1b")
	aclaim=$(curl -s -w ' %{http_code}' -X POST "http://$aaddr/v1/shards/1/claim")
	back=$(curl -s -w ' %{http_code}' "http://$aaddr/v1/shards/1/rows/s1b")
	bafter=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary '{"key": "s1c", "value": "x"}' \
		"http://$baddr/v1/shards/1/rows")
	detail="B claim $bclaim, B append $bput; A get s1: $stale; A get s1b: $missing; A claim: $aclaim; A get s1b: $back; B append: $bafter"
	case "$stale" in *'"fenced"'*' 409') ;; *) bclaim=x ;; esac
	case "$missing" in *'"fenced"'*' 409') ;; *) bclaim=x ;; esac
	case "$aclaim" in *' 200') ;; *) bclaim=x ;; esac
	[ "$bclaim" = 200 ] && [ "$bput" = 200 ] && [ "$back" = "by-b 200" ] && [ "$bafter" = 409 ] && r=0
fi
kill "$apid_node" "$bpid_node" 2>/dev/null; wait "$apid_node" "$bpid_node" 2>/dev/null
check "an_idle_node_fenced_by_a_claim_serves_no_stale_read_and_claims_back_for_real" $r "$detail
$(tail -5 "$loc/na.log" "$loc/nb.log" 2>/dev/null)"

# strata calibrate --store: the store's request times and bandwidth, measured on Azurite.
r=1
"$BUILD/strata" calibrate --dir "$loc" --mib 8 --store "azure://devstoreaccount1/cal-$$?endpoint=http://127.0.0.1:$port" \
	>"$loc/cal.model" 2>"$loc/cal.err" &&
	grep -q '^store_read_ns *= *[1-9]' "$loc/cal.model" && grep -q '^store_write_ns *= *[1-9]' "$loc/cal.model" &&
	grep -q '^store_mib_s *= *[1-9]' "$loc/cal.model" && r=0
check "calibrate_measures_the_store_requests" $r "$(cat "$loc/cal.err" "$loc/cal.model")"

echo "# objstore-azure: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
