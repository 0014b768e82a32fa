#!/bin/sh
# split_merge.sh — a split merge on a live `strata serve` (--merge-threads 4
# --merge-part-min-bytes 1 --index-partition-bytes 256): three generations appended over
# HTTP, one merge pass (POST /v1/shards/0/merge-wal) writes its key range as parts, and
#   - /metrics counts them (strata_merge_split_parts_total) and one sorted run
#     (strata_base_runs 1), promtool-clean;
#   - every acknowledged row reads back, by key and in a scan, before and after a restart;
#   - `strata inspect --json` lists the parts with the group of their first part.
# Prints "# split-merge: N passed, N failed".
suite=split-merge tag=split
. "$(dirname "$0")/lib.sh"

start() {
	rm -f "$tmp/ready"
	"$bin" serve --listen 127.0.0.1:0 --data "$tmp/data" --shards 1 --sync none \
		--merge-threads 4 --merge-part-min-bytes 1 --index-partition-bytes 256 --block-bytes 256 \
		--ready-file "$tmp/ready" --log-level warn >>"$tmp/node.log" 2>&1 &
	pid=$!
	await_ready "$pid" "$tmp/ready" "$tmp/node.log" || { bad "the node starts"; finish; exit 1; }
	addr=$(cat "$tmp/ready")
}
stop() {
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null
	pid=""
}
# value K G: the value generation G writes for key K (G 2 rewrites every third key).
rows() {
	awk -v g="$1" 'BEGIN { for (k = 0; k < 1500; k++) if (g < 2 || k % 3 == 0)
		printf "{\"key\":\"k%05d\",\"value\":\"g%d-%0180d\"}\n", k, g, k }'
}
# The newest value of every key, as a scan answers them (key<TAB>value, in key order).
awk 'BEGIN { for (k = 0; k < 1500; k++) printf "k%05d\tg%d-%0180d\n", k, k % 3 == 0 ? 2 : 1, k }' \
	>"$tmp/want"
scan() {
	curl -s "http://$addr/v1/shards/0/rows?limit=100000" |
		node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{for(const l of s.split('\n'))if(l){const r=JSON.parse(l);console.log(r.key+'\t'+r.value)}})"
}

start
for g in 0 1 2; do
	rows $g >"$tmp/g$g.ndjson"
	code=$(curl -s -o "$tmp/resp" -w '%{http_code}' -X POST --data-binary @"$tmp/g$g.ndjson" \
		"http://$addr/v1/shards/0/rows")
	n=$(jget "$tmp/resp" o.appended)
	curl -s -o /dev/null -X POST "http://$addr/v1/shards/0/seal"
	check "generation $g: its rows appended" "$code $n" "200 $(wc -l <"$tmp/g$g.ndjson" | tr -d ' ')"
done
code=$(curl -s -o "$tmp/merge" -w '%{http_code}' -X POST "http://$addr/v1/shards/0/merge-wal")
check "a merge pass answers 200" "$code" 200
curl -s "http://$addr/metrics" >"$tmp/metrics"
parts=$(sed -n 's/^strata_merge_split_parts_total{shard="0"} \([0-9]*\)$/\1/p' "$tmp/metrics")
runs=$(sed -n 's/^strata_base_runs{shard="0"} \([0-9]*\)$/\1/p' "$tmp/metrics")
gens=$(sed -n 's/^strata_pending_generations{shard="0"} \([0-9]*\)$/\1/p' "$tmp/metrics")
if [ "${parts:-0}" -ge 2 ] && [ "${parts:-0}" -le 4 ]; then
	ok "the merge wrote its key range as $parts parts (strata_merge_split_parts_total)"
else
	bad "strata_merge_split_parts_total: '$parts', want 2..4"
fi
check "they are one sorted run, and no generation is left" "$runs $gens" "1 0"
if command -v promtool >/dev/null 2>&1; then
	if promtool check metrics <"$tmp/metrics" >"$tmp/promtool" 2>&1; then
		ok "promtool check metrics: clean"
	else
		bad "promtool check metrics: $(head -5 "$tmp/promtool")"
	fi
fi
scan >"$tmp/got"
if cmp -s "$tmp/got" "$tmp/want"; then
	ok "a scan reads every key's newest row, in key order"
else
	bad "a scan: $(wc -l <"$tmp/got") rows, first difference: $(cmp "$tmp/got" "$tmp/want" 2>&1 | head -1)"
fi
misses=0
for k in 00000 00001 00299 00300 00750 01001 01498 01499; do
	want=$(grep "^k$k	" "$tmp/want" | cut -f2)
	got=$(curl -s "http://$addr/v1/shards/0/rows/k$k")
	[ "$got" = "$want" ] || misses=$((misses + 1))
done
check "gets across the parts' key ranges find their rows" "$misses" 0
stop

"$bin" inspect "$tmp/data" --json >"$tmp/inspect.json" 2>"$tmp/inspect.err"
check "strata inspect lists the parts, each with the first part's id as its group" \
	"$(jget "$tmp/inspect.json" "(()=>{const r=o.shards[0].manifest.base_runs;return [r.length, r.every(x=>x.group===r[0].id)].join(' ')})()")" \
	"$parts true"

start
scan >"$tmp/got2"
if cmp -s "$tmp/got2" "$tmp/want"; then
	ok "after a restart the grouped run reads back the same"
else
	bad "after a restart: $(wc -l <"$tmp/got2") rows"
fi
stop
finish
