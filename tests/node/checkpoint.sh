#!/bin/sh
# checkpoint.sh — POST /v1/checkpoint against a live `strata serve`: refused without
# --checkpoint-dir; with it, a checkpoint taken while a client appends holds every row
# acknowledged before the request and none written after it, opens as a node of its
# own, passes `strata inspect --verify`, and bad or reused names are refused.
# Prints "# node-checkpoint: N passed, N failed".
suite=node-checkpoint tag=ckpt
. "$(dirname "$0")/lib.sh"
# The client that appends while a checkpoint is taken.
bgpid=""
cleanup_extra() { if [ -n "$bgpid" ]; then kill "$bgpid" 2>/dev/null; fi; }
# start_node DATA READY [FLAGS...]: sets pid_started and the address in $READY.
start_node() {
	data=$1
	ready=$2
	shift 2
	rm -f "$ready"
	"$bin" serve --listen 127.0.0.1:0 --data "$data" --shards 2 --sync none --ready-file "$ready" --log-level warn \
		"$@" >>"$tmp/node.log" 2>&1 &
	pid_started=$!
	pids="$pids $pid_started"
	await_ready "$pid_started" "$ready" "$tmp/node.log"
}

# ckpt ARGS...: POST /v1/checkpoint; the status in $code, the body in $tmp/resp.
ckpt() { code=$(curl -s -o "$tmp/resp" -w '%{http_code}' -X POST "$@"); }
append() { curl -s -o /dev/null -w '%{http_code}' -X POST "http://$1/v1/shards/$2/rows" -d "{\"key\":\"$3\",\"value\":\"$4\"}"; }
get() { curl -s -o /dev/null -w '%{http_code}' "http://$1/v1/shards/$2/rows/$3"; }

# Without --checkpoint-dir the endpoint refuses.
if ! start_node "$tmp/data" "$tmp/ready" --policy "$root/policies/default.lua"; then
	echo "# node-checkpoint: 0 passed, 1 failed"
	exit 1
fi
pid=$pid_started
addr=$(cat "$tmp/ready")
ckpt "http://$addr/v1/checkpoint" -d '{"dir":"snap"}'
check "refused without --checkpoint-dir: 403" "$code" 403
grep -q 'checkpoint-dir' "$tmp/resp" && ok "the refusal names --checkpoint-dir" || bad "the refusal names --checkpoint-dir: $(cat "$tmp/resp")"
kill "$pid"
wait "$pid" 2>/dev/null
pid=""

"$bin" serve --data "$tmp/data2" --checkpoint-dir "$tmp/no-such-root" --listen 127.0.0.1:0 >"$tmp/noroot.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "checkpoint-dir" "$tmp/noroot.log"; then
	ok "a missing --checkpoint-dir root stops the node at start"
else
	bad "a missing --checkpoint-dir root stops the node at start (exit $rc)"
fi

mkdir -p "$tmp/backups"
croot=$(cd "$tmp/backups" && pwd -P)
start_node "$tmp/data" "$tmp/ready" --policy "$root/policies/default.lua" --checkpoint-dir "$tmp/backups" || exit 1
pid=$pid_started
addr=$(cat "$tmp/ready")
# batch SHARD FROM TO: one POST of rows k<FROM>..k<TO>; prints the status.
batch() {
	seq "$2" "$3" | awk '{ printf "{\"key\":\"k%d\",\"value\":\"v%d\"}\n", $1, $1 }' >"$tmp/rows"
	curl -s -o /dev/null -w '%{http_code}' -X POST "http://$addr/v1/shards/$1/rows" --data-binary @"$tmp/rows"
}
acked=""
acked="$acked$(batch 0 1 20)$(batch 1 21 40)"
curl -s -o /dev/null -X POST "http://$addr/v1/shards/0/seal"
acked="$acked$(batch 0 41 60)$(batch 1 61 80)"
check "80 rows acknowledged before the checkpoint" "$acked" 200200200200
# A client keeps appending while the checkpoint is taken.
(i=0; while :; do i=$((i + 1)); append "$addr" $((i % 2)) "bg$i" x >/dev/null; done) &
bgpid=$!
sleep 0.2
ckpt "http://$addr/v1/checkpoint" -H 'Content-Type: application/json' -d '{"dir":"snap1"}'
check "POST /v1/checkpoint {\"dir\":\"snap1\"}: 200" "$code" 200
grep -q "\"checkpoint\": *\"$croot/snap1\"" "$tmp/resp" && ok "the reply names the directory" || bad "the reply names the directory: $(cat "$tmp/resp")"
kill "$bgpid"
wait "$bgpid" 2>/dev/null
bgpid=""
for s in 0 1; do
	[ "$(append "$addr" $s later x)" = 200 ] || bad "append after the checkpoint"
done
ckpt "http://$addr/v1/checkpoint?dir=snap2"
check "POST /v1/checkpoint?dir=snap2: 200" "$code" 200
ckpt "http://$addr/v1/checkpoint" -d "{\"dir\":\"$croot/snap3\"}"
check "an absolute ROOT/NAME: 200" "$code" 200
ckpt "http://$addr/v1/checkpoint" -d '{"dir":"snap1"}'
check "a name that exists: 409" "$code" 409
grep -q "already exists" "$tmp/resp" && ok "the 409 says it exists" || bad "the 409 says it exists: $(cat "$tmp/resp")"
for d in '../escape' '/tmp/elsewhere' '.hidden' 'a/b' '' "$croot/../x" 'sp ace' 'x.partial'; do
	ckpt "http://$addr/v1/checkpoint" -d "{\"dir\":\"$d\"}"
	check "dir '$d' refused: 400" "$code" 400
done
ckpt "http://$addr/v1/checkpoint" -d 'not json'
check "no dir named: 400" "$code" 400
ckpt "http://$addr/v1/checkpoint?dir=..%2Fescape"
check "an escaped ../ in the query: 400" "$code" 400
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v1/checkpoint")
check "GET /v1/checkpoint: 405" "$code" 405
[ ! -e "$tmp/escape" ] && [ ! -e "$tmp/backups/snap1.partial" ] && ok "nothing written outside the root, no partial left" \
	|| bad "nothing written outside the root, no partial left"

"$bin" inspect "$tmp/backups/snap1" --verify >"$tmp/inspect.out" 2>&1
check "strata inspect --verify of the checkpoint exits 0" "$?" 0
[ ! -e "$tmp/backups/snap1/LOCK" ] && ok "the checkpoint holds no LOCK" || bad "the checkpoint holds no LOCK"

# The checkpoint opens as a node of its own.
start_node "$tmp/backups/snap1" "$tmp/ready2" || exit 1
pid2=$pid_started
addr2=$(cat "$tmp/ready2")
# count_k ADDR SHARD: rows k* of the shard.
count_k() { curl -s "http://$1/v1/shards/$2/rows?prefix=k" | grep -c '"key"'; }
missing=$((80 - $(count_k "$addr2" 0) - $(count_k "$addr2" 1)))
check "every row acknowledged before the checkpoint is in it" "$missing" 0
check "a row written after it is not (shard 0)" "$(get "$addr2" 0 later)" 404
check "a row written after it is not (shard 1)" "$(get "$addr2" 1 later)" 404
check "the original has it" "$(get "$addr" 0 later)" 200

finish
