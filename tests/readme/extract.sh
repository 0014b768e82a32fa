#!/bin/sh
# extract.sh — print the first fenced code block of a language under a README section, so
# that make test runs the README's examples as they are written (tests/readme/run.sh).
#
#   tests/readme/extract.sh README.md "## Load tests" lua
#
# Exits 1, naming what is missing, when the section or the block is not there.
[ $# -eq 3 ] || { echo "usage: extract.sh README SECTION LANG" >&2; exit 2; }
awk -v sec="$2" -v lang="$3" '
	$0 == sec { s = 1; next }
	s && /^## / { exit }
	s && !c && $0 == "```" lang { c = 1; next }
	c && $0 == "```" { done = 1; exit }
	c { print }
	END { if (!done) exit 1 }
' "$1" || { echo "extract.sh: no \`\`\`$3 block under \"$2\" in $1" >&2; exit 1; }
