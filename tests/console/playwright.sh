# tests/console/playwright.sh — sourced by tests/console/console.sh and
# tests/bench/bench_console.sh: playwright-core (PLAYWRIGHT_VERSION, npm) into
# $BUILD/npm-browser once, to drive Debian's chromium. The sourcing script sets BUILD (an
# absolute path) and a function say MESSAGE SUMMARY STATUS that prints and exits.
# Sets pw (the module's directory) and CHROMIUM.
PLAYWRIGHT_VERSION=1.65.2
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || say "skip - $CHROMIUM is not installed (apt-get install chromium)" "0 passed, 0 failed" 0
command -v npm >/dev/null 2>&1 || say "skip - npm is not installed (apt-get install npm)" "0 passed, 0 failed" 0
npmdir=$BUILD/npm-browser
pw=$npmdir/node_modules/playwright-core
if ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$pw/package.json" 2>/dev/null; then
	mkdir -p "$npmdir"
	npm install --prefix "$npmdir" --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_VERSION" \
		>"$npmdir/install.log" 2>&1 ||
		say "not ok - npm install playwright-core failed (log: $npmdir/install.log)" "0 passed, 1 failed" 1
fi
