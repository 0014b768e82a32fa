#!/bin/sh
# blocks.sh — split the fenced code blocks of a Markdown file into files, so that make test
# runs the documentation's examples as they are written (tests/readme/run.sh).
#
#   tests/readme/blocks.sh FILE OUTDIR [SECTION]
#
# Writes each block of FILE (or only those under the heading line SECTION, up to the next
# heading of the same or a higher level) to OUTDIR/NN (NN = 01, 02, ... in order), and prints
# one line per block: "NN LANG LINE", LANG being the fence's tag ("-" when it has none) and
# LINE the line of its opening fence. Exits 1 when SECTION is given and not found.
[ $# -ge 2 ] || { echo "usage: blocks.sh FILE OUTDIR [SECTION]" >&2; exit 2; }
mkdir -p "$2" || exit 1
awk -v out="$2" -v sec="${3-}" '
	function level(s) { match(s, /^#+/); return RLENGTH }
	BEGIN { on = (sec == ""); found = on }
	!fence && sec != "" && /^#/ {
		if ($0 == sec) { on = 1; found = 1; lvl = level($0); next }
		if (on && level($0) <= lvl) on = 0
	}
	!fence && /^```/ {
		fence = 1
		if (on) {
			n++
			lang = substr($0, 4)
			if (lang == "") lang = "-"
			f = sprintf("%s/%02d", out, n)
			printf "" >f
			printf "%02d %s %d\n", n, lang, NR
		}
		next
	}
	fence && /^```$/ { fence = 0; if (on) close(f); next }
	fence && on { print >>f }
	END { if (!found) { print "blocks.sh: no section \"" sec "\"" >"/dev/stderr"; exit 1 } }
' "$1"
