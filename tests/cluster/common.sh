# tests/cluster/common.sh — sourced by tests/cluster/cluster.sh and
# tests/bench/bench_cluster.sh (which set BUILD, suite, and NODE_FLAGS for every node): a real
# Azurite (tests/objstore/server.sh installs and starts it) and a real etcd (Debian's
# etcd-server) on 127.0.0.1 on free ports, stopped by PID on exit (KEEP=1 keeps their
# directory), and the helpers that start `strata serve --cluster` nodes and read the map.
# Without etcd or npm the caller is skipped with one line.
. "$(dirname "$0")/../objstore/server.sh"
server_need_npm Azurite
ETCD=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
if [ ! -x "$ETCD" ]; then
	echo "skip - $suite: etcd is not installed (apt-get install etcd-server)"
	echo "# $suite: 0 passed, 0 failed"
	exit 0
fi
[ -x "$BUILD/strata" ] || server_fail "$BUILD/strata is not built"
server_install azurite@3 azurite azurite-blob install.log
server_place azurite
server_start azurite-blob "$server_cmd" --blobHost 127.0.0.1 --blobPort "$port" --location "$loc" --silent ${AZURITE_DEBUG:+--debug "$AZURITE_DEBUG"} \
	--disableTelemetry --skipApiVersionCheck
export AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
store="azure://devstoreaccount1/cluster-$$?endpoint=http://127.0.0.1:$port"
SHARDS=16
TTL=3 # etcd's smallest with its default timing (3 heartbeats of an election timeout)
passed=0
failed=0

free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
eport=$(free_port)
pport=$(free_port)
etcd_start() {
	"$ETCD" --name t --data-dir "$loc/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
		--advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$pport" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "t=http://127.0.0.1:$pport" \
		>>"$loc/etcd.log" 2>&1 &
	epid=$!
	i=0
	until curl -s -o /dev/null -X POST -d '{}' "http://127.0.0.1:$eport/v3/maintenance/status"; do
		i=$((i + 1))
		[ $i -gt 150 ] && { tail -20 "$loc/etcd.log"; server_fail "etcd did not listen on 127.0.0.1:$eport"; }
		sleep 0.1
	done
}
etcd_start
pids=""
trap 'for p in $pids $epid; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done; kill "$pid" 2>/dev/null; wait 2>/dev/null; [ -n "$KEEP" ] || rm -rf "$loc" "$loc.log"' EXIT INT TERM

# node_start NAME: start node NAME on the container and the cluster (lease TTL, NODE_FLAGS;
# reads every 5 s, so that what moves placement in time is the watch of the cluster's keys);
# its pid and address go to $loc/NAME.pid and $loc/NAME.addr.
node_start() {
	server_node "$loc/$1.ready" "$loc/$1.log" "$BUILD/strata" serve --data "$loc/$1" --store "$store" \
		--wal store --shards $SHARDS --cluster "etcd://127.0.0.1:$eport/t$$" --node-id "$1" \
		--cluster-lease-ttl-s $TTL --cluster-poll-ms 5000 $NODE_FLAGS --log-level info
	echo "$spid" >"$loc/$1.pid"
	echo "$addr" >"$loc/$1.addr"
	pids="$pids $spid"
}
addr_of() { cat "$loc/$1.addr"; }
pid_of() { cat "$loc/$1.pid"; }
# map ADDR: "shard owner desired epoch" lines of GET /v1/cluster on ADDR ("-" for no owner).
map() {
	curl -s "http://$1/v1/cluster" | luajit -e '
		local s = io.read("a")
		for o in s:gmatch("{\"shard\":[^}]*}") do
			print(o:match("\"shard\":(%d+)") .. " " .. (o:match("\"owner\":\"([^\"]*)\"") or "-") .. " " ..
				(o:match("\"desired\":\"([^\"]*)\"") or "-") .. " " .. (o:match("\"epoch\":(%d+)") or "0"))
		end'
}
# served NAME: shards NAME serves (by its own GET /v1/cluster).
served() {
	curl -s "http://$(addr_of "$1")/v1/cluster" | grep -o '"shard":[0-9]*[^}]*"serving_here":true' | grep -c .
}
# settle NAMES...: until each of NAMES shows all SHARDS shards owned by members of NAMES,
# each by its desired owner with its claimed epoch written, the same map on each, and the
# shards served add up to SHARDS (at most 20 s).
settle() {
	i=0
	while [ $i -lt 200 ]; do
		ok=1
		first=""
		total=0
		for n in "$@"; do
			m=$(map "$(addr_of "$n")")
			[ "$(printf '%s\n' "$m" | awk '$2 != "-" && $2 == $3 && $4 > 0' | grep -c .)" = $SHARDS ] || ok=0
			[ -z "$first" ] && first=$m
			[ "$m" = "$first" ] || ok=0
			total=$((total + $(served "$n")))
		done
		owners=$(printf '%s\n' "$first" | awk '{print $2}' | sort -u | tr '\n' ' ')
		for o in $owners; do
			case " $* " in *" $o "*) ;; *) ok=0 ;; esac
		done
		[ $total = $SHARDS ] || ok=0
		[ $ok = 1 ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# probe OUT SHARDS...: a client that appends to every shard of SHARDS not yet acknowledged
# at once (one curl process, --parallel: little load on a 2-core machine), through a and
# then to the owner each 421 names, every 50 ms, until each has acknowledged one; the time
# of each first acknowledgement goes to OUT.SHARD.
probe() {
	out=$1
	shift
	while :; do
		set -- $(for s in "$@"; do [ -s "$out.$s" ] || echo "$s"; done)
		[ $# = 0 ] && return
		args=""
		for s in "$@"; do
			args="$args -o $out-a.$s http://$(addr_of a)/v1/shards/$s/rows"
		done
		curl -s -m 2 --parallel --parallel-immediate -X POST -d '{"key":"probe","value":"p"}' \
			-w '%{http_code} %{url_effective}\n' $args >"$out-codes" 2>/dev/null
		args=""
		for s in "$@"; do
			if grep -q "^200 .*/v1/shards/$s/rows\$" "$out-codes"; then
				date +%s.%N >"$out.$s"
				continue
			fi
			u=$(sed -n 's/.*"owner_url":"\([^"]*\)".*/\1/p' "$out-a.$s" 2>/dev/null)
			[ -n "$u" ] && args="$args -o $out-o.$s $u/v1/shards/$s/rows"
		done
		if [ -n "$args" ]; then
			curl -s -m 2 --parallel --parallel-immediate -X POST -d '{"key":"probe","value":"p"}' \
				-w '%{http_code} %{url_effective}\n' $args >"$out-codes" 2>/dev/null
			t=$(date +%s.%N)
			for s in "$@"; do
				grep -q "^200 .*/v1/shards/$s/rows\$" "$out-codes" && [ ! -s "$out.$s" ] && echo "$t" >"$out.$s"
			done
		fi
		rm -f "$out"-a.* "$out"-o.*
		sleep 0.05
	done
}
# secs "ts=...THH:MM:SS.mmmZ ..." lines: seconds of the day of each line's time.
secs() { sed -n 's/^ts=[0-9-]*T\([0-9]*\):\([0-9]*\):\([0-9.]*\)Z.*/\1 \2 \3/p' | awk '{ printf "%.3f\n", $1 * 3600 + $2 * 60 + $3 }'; }

