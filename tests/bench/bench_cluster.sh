#!/bin/sh
# bench_cluster.sh — a cluster of 3 `strata serve --cluster` nodes (16 shards, lease TTL 3 s,
# etcd's smallest) on one Azurite container and one etcd, on this machine:
#   failover   BENCH_CLUSTER_KILLS (10) kill -9s of a member in turn under a client that
#              appends to every shard the victim held: the seconds from the kill to the first
#              acknowledged append of each of its shards on its new owner (p50 and max over
#              every shard, and the slowest shard of each kill); the victim restarts and
#              takes its share back: the handoff unavailability of each shard it takes
#              (old owner's release to the new owner's first served moment, from their logs)
#   appends/s  tests/bench/cluster_append.lua through `strata load` for BENCH_CLUSTER_SECONDS
#              (10) against one member of the cluster (it routes each request to the owner)
#              and against one node of the same kind on its own (wal = store on the same
#              Azurite, 16 shards, no cluster), in the same run.
# On a 2-core VM the three nodes, Azurite and etcd share two cores: the appends/s compare
# the routing and the cluster's overhead, not a scale-out. Prints figures; never fails on one.
BUILD=${BUILD:-build}
suite=bench-cluster
NODE_FLAGS="--sync fsync"
. "$(dirname "$0")/../cluster/common.sh"
kills=${BENCH_CLUSTER_KILLS:-10}
secs=${BENCH_CLUSTER_SECONDS:-10}
echo "== bench_cluster: 3 nodes, $SHARDS shards, lease TTL $TTL s, $kills kills; Azurite and etcd $("$ETCD" --version | head -1) on this machine ($(nproc) cores)"
node_start n1
node_start n2
node_start n3
settle n1 n2 n3 || { echo "bench_cluster: placement did not settle"; exit 1; }
: >"$loc/fail.all"
: >"$loc/fail.kill"
: >"$loc/handoff"
k=1
while [ $k -le "$kills" ]; do
	victim=n$(((k - 1) % 3 + 1))
	live=$(for n in n1 n2 n3; do [ $n = $victim ] || echo $n; done | tr '\n' ' ')
	first=${live%% *}
	vshards=$(map "$(addr_of "$first")" | awk -v v=$victim '$2 == v {print $1}' | tr '\n' ' ')
	rm -f "$loc"/probe.[0-9]*
	t_kill=$(date +%s.%N)
	kill -9 "$(pid_of $victim)"
	wait "$(pid_of $victim)" 2>/dev/null
	# probe goes through node a: here, the first live node.
	cp "$loc/$first.addr" "$loc/a.addr"
	probe "$loc/probe" $vshards &
	ppid=$!
	i=0
	while [ $i -lt 300 ] && [ "$(cat "$loc"/probe.[0-9]* 2>/dev/null | grep -c .)" -lt "$(echo $vshards | wc -w)" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill $ppid 2>/dev/null
	wait $ppid 2>/dev/null
	worst=0
	for s in $vshards; do
		t=$(cat "$loc/probe.$s" 2>/dev/null)
		[ -n "$t" ] || { echo "bench_cluster: kill $k: shard $s not acknowledged in 30 s"; continue; }
		d=$(awk -v a="$t" -v b="$t_kill" 'BEGIN { printf "%.3f", a - b }')
		echo "$d" >>"$loc/fail.all"
		worst=$(awk -v a="$d" -v w="$worst" 'BEGIN { print (a > w ? a : w) }')
	done
	echo "$worst" >>"$loc/fail.kill"
	# The victim comes back (an empty data directory: its WAL is on the store) and takes its share.
	rm -rf "$loc/$victim"
	node_start $victim
	settle n1 n2 n3 || echo "bench_cluster: kill $k: placement did not settle after the restart"
	for s in $(map "$(addr_of n1)" | awk -v v=$victim '$2 == v {print $1}'); do
		t1=$(grep -h "cluster: shard $s: handing it off to $victim" $(for n in $live; do echo "$loc/$n.log"; done) | tail -1 | secs)
		t2=$(grep -h "cluster: shard $s: serving it" "$loc/$victim.log" | tail -1 | secs)
		[ -n "$t1" ] && [ -n "$t2" ] && awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.3f\n", b - a }' >>"$loc/handoff"
	done
	printf 'kill %2d: %s held shards %s; all acknowledged again after %s s\n' "$k" "$victim" "$vshards" "$worst"
	k=$((k + 1))
done
# pct FILE P: the P-th percentile (nearest rank) of FILE's numbers.
pct() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } i = int((p / 100) * NR + 0.999999); if (i < 1) i = 1; print v[i] }'; }
echo "failover, kill -9 to first acknowledged append on the new owner (TTL $TTL s):"
echo "  every shard ($(grep -c . "$loc/fail.all")): p50 $(pct "$loc/fail.all" 50) s, max $(pct "$loc/fail.all" 100) s"
echo "  slowest shard of each kill ($(grep -c . "$loc/fail.kill")): p50 $(pct "$loc/fail.kill" 50) s, max $(pct "$loc/fail.kill" 100) s"
echo "handoff to a rejoining node, release to served ($(grep -c . "$loc/handoff") shards): p50 $(pct "$loc/handoff" 50) s, max $(pct "$loc/handoff" 100) s"

# Appends/s: the cluster through one member, then one node on its own, same script.
script=$(dirname "$0")/cluster_append.lua
"$BUILD/strata" load "$script" --target "http://$(addr_of n1)" -d "${secs}s" -q --json "$loc/c.json" >"$loc/c.out" 2>&1
crc=$?
for n in n1 n2 n3; do kill -TERM "$(pid_of $n)" 2>/dev/null; done
for n in n1 n2 n3; do wait "$(pid_of $n)" 2>/dev/null; done
server_node "$loc/solo.ready" "$loc/solo.log" "$BUILD/strata" serve --data "$loc/solo" \
	--store "azure://devstoreaccount1/solo-$$?endpoint=http://127.0.0.1:$port" --wal store --shards $SHARDS \
	--sync fsync --log-level warn
solo=$addr
spid_solo=$spid
"$BUILD/strata" load "$script" --target "http://$solo" -d "${secs}s" -q --json "$loc/s.json" >"$loc/s.out" 2>&1
src=$?
kill -TERM "$spid_solo"
wait "$spid_solo" 2>/dev/null
# field FILE NAME: the first number of "NAME": in a --json result.
field() { luajit -e "local s = io.read('a') print(s:match('\"$2\":%s*([%d.e+-]+)') or '?')" <"$1"; }
rate() { field "$1" rows_per_s; }
errs() { field "$1" errors; }
c=$(rate "$loc/c.json")
s=$(rate "$loc/s.json")
echo "appends, $secs s of tests/bench/cluster_append.lua (16 virtual users, batches of 10 rows of 100 B, fsync):"
echo "  3-node cluster through one member: $c rows/s, p99.9 $(field "$loc/c.json" appenders.p999_ms) ms (exit $crc, errors $(errs "$loc/c.json"))"
echo "  one node on its own, same store:   $s rows/s, p99.9 $(field "$loc/s.json" appenders.p999_ms) ms (exit $src, errors $(errs "$loc/s.json"))"
awk -v c="$c" -v s="$s" 'BEGIN { if (s + 0 > 0) printf "  cluster / one node: %.2fx\n", c / s }'
