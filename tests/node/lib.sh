# tests/node/lib.sh — what the shell suites of tests/node share, sourced after setting
# `suite` (the name of the closing line "# SUITE: N passed, N failed") and `tag` (of the
# scratch directory):
#
#   suite=node-trace tag=trace
#   . "$(dirname "$0")/lib.sh"
#
# It sets root (the checkout), BUILD (absolute), bin (STRATA_BIN, else $BUILD/strata) and
# tmp (a fresh directory, removed at exit), and gives:
#   ok NAME / bad NAME [FILE]    a check passed / failed (FILE: its first lines shown)
#   check NAME GOT WANT          ok when GOT is WANT, else bad naming both
#   await_ready PID READY LOG [TRIES]
#                                wait (TRIES x 50 ms, 200 by default) until the node PID
#                                has written its address to READY; 1, with LOG shown on
#                                stderr, when it died or took longer
#   jget FILE EXPR               a member of a JSON file (a JavaScript expression over o)
#   finish                       the closing line; the suite's status
# At exit every node in $pid and $pids is killed (kill -9), the suite's own
# cleanup_extra runs when it defines one, and tmp is removed.
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
bin=${STRATA_BIN:-$BUILD/strata}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-$tag.XXXXXX") || exit 1
pid=""
pids=""
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok - $1"; }
bad() {
	failed=$((failed + 1))
	echo "not ok - $1"
	if [ -n "${2:-}" ] && [ -f "$2" ]; then sed 's/^/#   /' "$2" | head -20; fi
	return 0
}
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }

await_ready() {
	_i=0
	while [ ! -s "$2" ]; do
		if ! kill -0 "$1" 2>/dev/null || [ $_i -ge "${4:-200}" ]; then
			echo "$suite: the node did not start; its log:" >&2
			cat "$3" >&2
			return 1
		fi
		sleep 0.05
		_i=$((_i + 1))
	done
}

jget() { node -e "const o=JSON.parse(require('fs').readFileSync('$1','utf8'));console.log($2)"; }

finish() {
	echo "# $suite: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

lib_cleanup() {
	if command -v cleanup_extra >/dev/null 2>&1; then cleanup_extra; fi
	for _p in $pid $pids; do kill -9 "$_p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap lib_cleanup EXIT
trap "exit 130" INT TERM
