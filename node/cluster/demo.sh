#!/bin/sh
# demo.sh — what `make cluster` runs: etcd (Debian's etcd-server), Azurite (npm, installed
# into $BUILD/npm once) and CLUSTER_NODES `strata serve --cluster` nodes on 127.0.0.1, one
# service of CLUSTER_SHARDS shards on one container, until Ctrl-C (or SIGTERM), when
# everything it started is stopped by PID. Nothing listens beyond 127.0.0.1.
#
# Environment: BUILD (build), CLUSTER_PORT (the first node's port, the others follow;
# default 7071; 0: free ports), CLUSTER_NODES (3), CLUSTER_SHARDS (16), CLUSTER_DIR (where
# the data goes, default $BUILD/cluster: removed at each start), CLUSTER_READY (a file the
# nodes' URLs are written to, one per line, once they all answer), CLUSTER_TTL (the lease,
# s; 5).
BUILD=${BUILD:-build}
port0=${CLUSTER_PORT:-7071}
nodes=${CLUSTER_NODES:-3}
shards=${CLUSTER_SHARDS:-16}
dir=${CLUSTER_DIR:-$BUILD/cluster}
ttl=${CLUSTER_TTL:-5}
bin=$BUILD/strata
say() { echo "strata cluster: $*"; }
[ -x "$bin" ] || { say "$bin is not built (make)"; exit 1; }
etcd_bin=$(command -v etcd || echo /usr/bin/etcd)
[ -x "$etcd_bin" ] || { say "etcd is not installed: sudo apt-get install -y etcd-server"; exit 1; }
command -v npm >/dev/null 2>&1 || { say "npm is not installed: sudo apt-get install -y npm"; exit 1; }
azurite=$BUILD/npm/node_modules/.bin/azurite-blob
if [ ! -x "$azurite" ]; then
	say "installing Azurite into $BUILD/npm (npm, once)"
	mkdir -p "$BUILD/npm"
	npm install --prefix "$BUILD/npm" --no-audit --no-fund --loglevel=error azurite@3 >"$BUILD/npm/install.log" 2>&1 ||
		{ tail -20 "$BUILD/npm/install.log"; say "npm install azurite failed"; exit 1; }
fi
free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
rm -rf "$dir"
mkdir -p "$dir" || exit 1
echo $$ >"$dir/demo.pid" # what a test stops it by
pids=""
stop() {
	trap - INT TERM EXIT
	say "stopping"
	for p in $npids; do kill -TERM "$p" 2>/dev/null; done
	for p in $npids; do wait "$p" 2>/dev/null; done
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	exit 0
}
trap stop INT TERM EXIT
# wait_http URL: until it answers (15 s).
wait_http() {
	i=0
	until curl -s -o /dev/null -X POST -d '{}' "$1"; do
		i=$((i + 1))
		[ $i -gt 150 ] && { say "$1 did not answer"; exit 1; }
		sleep 0.1
	done
}
eport=$(free_port)
pport=$(free_port)
"$etcd_bin" --name strata --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
	--advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$pport" \
	--initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "strata=http://127.0.0.1:$pport" \
	>"$dir/etcd.log" 2>&1 &
pids="$pids $!"
wait_http "http://127.0.0.1:$eport/v3/maintenance/status"
aport=$(free_port)
"$azurite" --blobHost 127.0.0.1 --blobPort "$aport" --location "$dir/azurite" --silent --disableTelemetry \
	--skipApiVersionCheck >"$dir/azurite.log" 2>&1 &
pids="$pids $!"
wait_http "http://127.0.0.1:$aport/"
# Azurite's development account and its published key.
export AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
store="azure://devstoreaccount1/strata?endpoint=http://127.0.0.1:$aport"
cluster="etcd://127.0.0.1:$eport/strata"
npids=""
urls=""
i=1
while [ $i -le "$nodes" ]; do
	if [ "$port0" = 0 ]; then p=0; else p=$((port0 + i - 1)); fi
	"$bin" serve --data "$dir/n$i" --store "$store" --wal store --shards "$shards" --cluster "$cluster" \
		--node-id "n$i" --cluster-lease-ttl-s "$ttl" --listen "127.0.0.1:$p" --ready-file "$dir/n$i.ready" \
		--log-level warn >"$dir/n$i.log" 2>&1 &
	npids="$npids $!"
	j=0
	while [ ! -s "$dir/n$i.ready" ] && [ $j -lt 100 ]; do sleep 0.1; j=$((j + 1)); done
	[ -s "$dir/n$i.ready" ] || { tail -5 "$dir/n$i.log"; say "node n$i did not start"; exit 1; }
	urls="$urls http://$(cat "$dir/n$i.ready")"
	i=$((i + 1))
done
# Ready once placement settled: on every node, every shard owned by the member that should
# own it (the first start of each node hands shards to the next).
settled() {
	for u in $urls; do
		n=$(curl -s "$u/v1/cluster" | grep -o '"owner":"\([^"]*\)","owner_url":"[^"]*","epoch":[0-9]*,"desired":"\1"' |
			grep -c .)
		[ "$n" = "$shards" ] || return 1
	done
}
j=0
until settled; do
	j=$((j + 1))
	[ $j -gt 300 ] && { say "placement did not settle in 30 s; see $dir/*.log"; exit 1; }
	sleep 0.1
done
say "etcd at http://127.0.0.1:$eport, Azurite at http://127.0.0.1:$aport, data in $dir"
for u in $urls; do say "node $u"; done
say "every member answers GET /v1/cluster; strata cluster status --cluster $cluster"
say "Ctrl-C stops everything"
[ -n "${CLUSTER_READY:-}" ] && printf '%s\n' $urls >"$CLUSTER_READY"
# Until a signal, or until a process of ours is gone.
while :; do
	for p in $npids $pids; do
		kill -0 "$p" 2>/dev/null || { say "process $p exited; see $dir/*.log"; stop; }
	done
	sleep 1
done
