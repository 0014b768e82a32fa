#!/bin/sh
# Run test suites; each argument is a command line (a test binary, or a script with
# arguments) that prints "# name: N passed, N failed".
# Sum them and end with one line "N passed, N failed". Exit non-zero on any failure.
passed=0
failed=0
status=0
log=$(mktemp)
for t in "$@"; do
	echo "== $t"
	sh -c "$t" >"$log" 2>&1
	rc=$?
	cat "$log"
	line=$(grep -E '^# .*: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
	if [ -z "$line" ]; then
		echo "!! $t printed no summary (exit $rc): counted as 1 failure"
		failed=$((failed + 1)); status=1; continue
	fi
	p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
	f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
	passed=$((passed + p)); failed=$((failed + f))
	if [ "$rc" -ne 0 ]; then
		status=1
		[ "$f" -eq 0 ] && { echo "!! $t exited $rc with no failed test: counted as 1 failure"; failed=$((failed + 1)); }
	fi
done
rm -f "$log"
echo "$passed passed, $failed failed"
exit $status
