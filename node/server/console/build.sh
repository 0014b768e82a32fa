#!/bin/sh
# build.sh — the console page as the node serves it: console.html with uPlot's script and
# style inlined at its two markers.
#
#   sh node/server/console/build.sh OUT.html NPM_DIR
#
# uPlot (UPLOT_VERSION, MIT) is fetched with npm into NPM_DIR once, not committed to the
# repository and not fetched by the browser: the page works with no network. Without npm
# the build stops and names the package to install. OUT.html is written through a
# temporary file.
set -eu
UPLOT_VERSION=1.6.32
if [ $# -ne 2 ]; then
	echo "usage: $0 OUT.html NPM_DIR" >&2
	exit 2
fi
out=$1
npm_dir=$2
here=$(dirname "$0")
dist=$npm_dir/node_modules/uplot/dist
if ! grep -q "(v$UPLOT_VERSION)" "$dist/uPlot.iife.min.js" 2>/dev/null; then
	if ! command -v npm >/dev/null 2>&1; then
		echo "strata: the console's charts need uPlot from npm, and npm is not installed:" >&2
		echo "  sudo apt-get install -y npm      (make deps does it as root)" >&2
		exit 1
	fi
	mkdir -p "$npm_dir"
	echo "strata: fetching uPlot $UPLOT_VERSION for the console into $npm_dir"
	npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "uplot@$UPLOT_VERSION" \
		>"$npm_dir/install.log" 2>&1 || {
		echo "strata: npm install uplot@$UPLOT_VERSION failed (log: $npm_dir/install.log)" >&2
		exit 1
	}
fi
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT INT TERM
awk -v css="$dist/uPlot.min.css" -v js="$dist/uPlot.iife.min.js" '
	function inline(head, file, tail,   line) {
		print head
		while ((getline line < file) > 0) print line
		close(file)
		print tail
	}
	/^<!--@UPLOT_CSS@-->$/ { inline("<style>", css, "</style>"); n++; next }
	/^<!--@UPLOT_JS@-->$/ { inline("<script>", js, "</script>"); n++; next }
	{ print }
	END { if (n != 2) { print "build.sh: the page lacks a marker" > "/dev/stderr"; exit 1 } }
' "$here/console.html" >"$tmp"
mv "$tmp" "$out"
trap - EXIT INT TERM
