#!/bin/sh
# tests/fuzz/run_fuzz.sh TARGET... — run each libFuzzer target for $FUZZ_SECONDS on its
# corpus (tests/fuzz/corpus/<t>, read-only; new inputs go to $BUILD/fuzz/corpus-<t>) and
# print what was run, when, and the figures libFuzzer reported. Exit non-zero on a finding.
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-600}
here=$(cd "$(dirname "$0")" && pwd)
status=0
summary=$(mktemp)
echo "# fuzz: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $FUZZ_SECONDS s per target, clang $(${CLANG:-clang} --version | head -1 | sed 's/.*version \([0-9.]*\).*/\1/')"
for t in "$@"; do
	bin=$BUILD/fuzz/fuzz_$t
	out=$BUILD/fuzz/corpus-$t
	art=$BUILD/fuzz/artifacts/$t/
	log=$BUILD/fuzz/fuzz_$t.log
	mkdir -p "$out" "$art"
	echo "== fuzz_$t for $FUZZ_SECONDS s (log $log)"
	dict=
	[ -f "$here/$t.dict" ] && dict="-dict=$here/$t.dict"
	"$bin" -max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
		$dict -artifact_prefix="$art" "$out" "$here/corpus/$t" >"$log" 2>&1
	rc=$?
	execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
	rate=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}')
	cov=$(grep -E '#[0-9]+.*cov: ' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*/\1/')
	ft=$(grep -E '#[0-9]+.*ft: ' "$log" | tail -1 | sed -E 's/.*ft: ([0-9]+).*/\1/')
	corp=$(find "$out" "$here/corpus/$t" -type f | wc -l)
	finds=$(find "$art" -type f | wc -l)
	if [ $rc -ne 0 ] || [ "$finds" -ne 0 ]; then
		status=1
		grep -E 'ERROR|SUMMARY|fuzz oracle failed|Test unit written' "$log" | head -5
		res="FAILED: $finds finding(s) in $art"
	else
		res="no crash, leak or sanitizer report"
	fi
	echo "# fuzz: fuzz_$t: ${execs:-?} runs in $FUZZ_SECONDS s (${rate:-?}/s), coverage ${cov:-?} edges / ${ft:-?} features, corpus $corp inputs: $res" | tee -a "$summary"
done
echo "# fuzz: finished $(date -u +%Y-%m-%dT%H:%M:%SZ)"
cat "$summary"
rm -f "$summary"
exit $status
