#!/bin/sh
# tests/fuzz/replay.sh [TARGET...] — run every file of each fuzz corpus once through its
# libFuzzer binary ($BUILD/fuzz/fuzz_<target>, built by tests/fuzz/fuzz.mk). One test per
# target; ends with "# fuzz-replay: N passed, N failed" for tests/run.sh.
BUILD=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
targets=${*:-wal run manifest azxml s3xml http batch policy}
passed=0
failed=0
log=$(mktemp)
for t in $targets; do
	corpus=$here/corpus/$t
	bin=$BUILD/fuzz/fuzz_$t
	[ -d "$corpus" ] || { [ "$t" = http ] || [ "$t" = policy ] || { echo "not ok - $t: no corpus $corpus"; failed=$((failed + 1)); }; continue; }
	if [ ! -x "$bin" ]; then
		echo "not ok - $t: $bin is not built (make -f tests/fuzz/fuzz.mk BUILD=$BUILD fuzz-build)"
		failed=$((failed + 1))
		continue
	fi
	n=$(find "$corpus" -type f | wc -l)
	if find "$corpus" -type f -print0 | sort -z | xargs -0 "$bin" -timeout=30 >"$log" 2>&1; then
		echo "ok - $t: $n corpus files replayed"
		passed=$((passed + 1))
	else
		tail -40 "$log"
		echo "not ok - $t: replay of $corpus failed (input named above)"
		failed=$((failed + 1))
	fi
done
rm -f "$log"
echo "# fuzz-replay: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
