# tests/objstore/server.sh — sourced by azure.sh and s3.sh, the suites of the remote object
# stores against a real server: npm installs the server into $BUILD/npm (once; not
# globally), it starts on 127.0.0.1 on a free port with a fresh directory and is stopped
# by its PID on exit, the C suite runs against it, and the nodes of `strata serve` the
# scripts start next to it. The sourcing script sets BUILD and suite (its name in the
# last line, "# $suite: N passed, N failed"); passed and failed count its tests.

# server_need_npm WHAT: without npm the suite is skipped with one line (WHAT cannot run).
server_need_npm() {
	if ! command -v npm >/dev/null 2>&1; then
		echo "skip - $suite: npm is not installed (apt-get install npm), $1 cannot run"
		echo "# $suite: 0 passed, 0 failed"
		exit 0
	fi
}

# server_fail MESSAGE: the suite fails at once, with one line.
server_fail() {
	echo "not ok - $suite: $1"
	echo "# $suite: 0 passed, 1 failed"
	exit 1
}

# server_install PACKAGE NAME BIN LOG: npm installs PACKAGE (NAME in messages, its output in
# $BUILD/npm/LOG) unless its BIN is there already; server_cmd: that BIN.
server_install() {
	npmdir=$BUILD/npm
	server_cmd=$npmdir/node_modules/.bin/$3
	if [ ! -x "$server_cmd" ]; then
		mkdir -p "$npmdir"
		npm install --prefix "$npmdir" --no-audit --no-fund --loglevel=error "$1" >"$npmdir/$4" 2>&1 ||
			{ tail -20 "$npmdir/$4"; server_fail "npm install $2 failed (log: $npmdir/$4)"; }
	fi
}

# server_place NAME: loc, a fresh directory (strata-NAME.XXXXXX), and port, a free port.
server_place() {
	loc=$(mktemp -d "${TMPDIR:-/tmp}/strata-$1.XXXXXX") || server_fail "mktemp"
	# A free port: bind 0 in a throwaway Node process (Node is there: npm needs it).
	port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
	[ -n "$port" ] || server_fail "no free port"
}

# server_start NAME COMMAND...: the server, COMMAND, in the background (its output in
# $loc.log; pid: its PID), killed and loc removed on exit; fails the suite unless
# http://127.0.0.1:$port/ answers within 15 s (NAME in the message).
server_start() {
	server_name=$1
	shift
	"$@" >"$loc.log" 2>&1 &
	pid=$!
	trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$loc" "$loc.log"' EXIT INT TERM
	up=0
	i=0
	while [ $i -lt 150 ]; do
		if curl -s -o /dev/null "http://127.0.0.1:$port/"; then up=1; break; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	[ "$up" = 1 ] || { cat "$loc.log"; server_fail "$server_name did not listen on 127.0.0.1:$port"; }
}

# server_run_suite BIN HIDE [TEST...]: the C suite BIN against the server (only the TESTs
# named, when some are); its output (out) is printed but the lines grep pattern HIDE
# matches, and its summary ("# <BIN's name>: N passed, N failed") sets passed and failed
# (an exit status that is not 0 with none failed counts one). With TESTs named the script
# ends here, with the suite's last line.
server_run_suite() {
	bin=$1
	hide=$2
	shift 2
	out=$("$bin" "$@" 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep -v "$hide"
	line=$(printf '%s\n' "$out" | grep -E "^# ${bin##*/}: [0-9]+ passed, [0-9]+ failed" | tail -1)
	[ -n "$line" ] || server_fail "$bin printed no summary (exit $rc)"
	passed=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
	failed=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
	[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
	[ $# -gt 0 ] && { echo "# $suite: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
}

# check NAME RESULT [DETAIL]: test NAME passed when RESULT is 0; DETAIL is shown when not.
check() {
	if [ "$2" = 0 ]; then
		echo "ok - $1"
		passed=$((passed + 1))
	else
		echo "not ok - $1"
		[ -n "$3" ] && printf '%s\n' "$3" | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
}

# server_node READY LOG COMMAND...: COMMAND (strata serve and its options) listening on
# 127.0.0.1:0 and writing its address to READY, in the background, its output appended to
# LOG; spid: its PID; addr: that address, "" when READY was not written within 10 s.
server_node() {
	ready=$1
	log=$2
	shift 2
	rm -f "$ready"
	"$@" --listen 127.0.0.1:0 --ready-file "$ready" >>"$log" 2>&1 &
	spid=$!
	i=0
	while [ ! -s "$ready" ] && [ $i -lt 100 ] && kill -0 "$spid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	addr=$(cat "$ready" 2>/dev/null)
}
