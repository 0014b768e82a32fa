#!/bin/sh
# rows_by_key.sh — the key-routed endpoints against a live `strata serve` of 4 shards:
# POST /v1/rows spreads a batch over the keys' shards (strata_shard_of: XXH3_64bits(key) %
# shards, golden values), GET and DELETE /v1/rows/{key} read and delete through the same
# routing (the row is where GET /v1/shards/N/rows/{key} finds it), and a node serving only
# some shards refuses a batch with a row for another one whole, appending nothing.
# Prints "# node-rows-by-key: N passed, N failed".
suite=node-rows-by-key tag=keyed
. "$(dirname "$0")/lib.sh"

# start DATA [FLAGS...]: a node on DATA; sets pid and a (its address).
start() {
	d=$1
	shift
	rm -f "$tmp/ready"
	"$bin" serve --listen 127.0.0.1:0 --data "$d" --sync none --ready-file "$tmp/ready" --log-level warn "$@" \
		>>"$tmp/node.log" 2>&1 &
	pid=$!
	await_ready "$pid" "$tmp/ready" "$tmp/node.log"
	a=$(cat "$tmp/ready" 2>/dev/null)
}

start "$tmp/d" --shards 4
[ -n "$a" ] || { cat "$tmp/node.log"; echo "# node-rows-by-key: 0 passed, 1 failed"; exit 1; }
# XXH3_64bits: "user:42" % 4 = 2, "a" % 4 = 3, "k1" % 4 = 1.
body='{"key":"user:42","value":"v42"}
{"key":"a","value":"va"}
{"key":"k1","value":"vk1"}'
out=$(printf '%s\n' "$body" | curl -s -X POST --data-binary @- "http://$a/v1/rows")
check post_rows_spreads_a_batch_over_the_keys_shards "$out" \
	'{"appended":3,"shards":[{"shard":1,"appended":1,"last_seq":1},{"shard":2,"appended":1,"last_seq":1},{"shard":3,"appended":1,"last_seq":1}]}'
check get_rows_key_reads_through_the_same_routing "$(curl -s "http://$a/v1/rows/user:42")" v42
check the_row_is_in_the_shard_strata_shard_of_names "$(curl -s "http://$a/v1/shards/2/rows/user:42")" v42
check delete_rows_key_deletes_in_that_shard "$(curl -s -X DELETE "http://$a/v1/rows/a")" '{"deleted":1,"last_seq":2}'
check a_deleted_key_is_a_404 "$(curl -s -o /dev/null -w '%{http_code}' "http://$a/v1/shards/3/rows/a")" 404
check an_empty_key_is_a_400 "$(curl -s -o /dev/null -w '%{http_code}' "http://$a/v1/rows/")" 400
kill "$pid"
wait "$pid" 2>/dev/null

# A node serving shards 0..1 of the same store: a batch with a row for shard 2 is refused
# whole (421), and its row for shard 1 was not appended.
start "$tmp/d" --shards 0-1
code=$(printf '%s\n' '{"key":"k1","value":"new"}' '{"key":"user:42","value":"new"}' |
	curl -s -o "$tmp/421" -w '%{http_code}' -X POST --data-binary @- "http://$a/v1/rows")
check a_batch_with_a_row_for_an_unserved_shard_is_a_421 "$code" 421
check the_421_names_the_shard "$(grep -c 'shard 2' "$tmp/421")" 1
check nothing_of_it_was_appended "$(curl -s "http://$a/v1/rows/k1")" vk1
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$a/v1/rows/user:42")
check a_get_for_an_unserved_shard_is_a_421 "$code" 421
finish
