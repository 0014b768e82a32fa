#!/bin/sh
# tests/bench/device.sh pack|run — the figures issues 34 and 36 ask of a machine with idle
# cores and no CPU quota (the project's device machine, DEVELOPERS.md: no compiler and no
# Debian dev packages there).
#
#   sh tests/bench/device.sh pack   here, after `make all` and the bench build: copies
#                                   strata, the bench binaries and every shared library
#                                   `ldd` names into build/device/ (ignored by git), which
#                                   the device call carries
#   sh tests/bench/device.sh run    there, in the repository root: runs, with
#                                   LD_LIBRARY_PATH=build/device/lib,
#     1. the disk's sequential write speed: dd of DEVICE_DD_MIB MiB (2048) with
#        oflag=direct, the figure a merge on all threads is held to (>= 0.8x);
#     2. bench_merge: 8 generations of DEVICE_MERGE_GEN_MB MiB (64), random and
#        half-compressible values, strata on 1 thread and on every CPU (split passes),
#        RocksDB as configured as strata, with its defaults and with subcompactions;
#     3. bench_stall on every CPU's merge threads and on the default (half), strata and
#        RocksDB, 1 GiB (32 x 32 MiB);
#     4. bench_stall_http's merge phase with 16 connections (issue 36);
#     5. bench_http: appends over HTTP against embedded, batches of 1 and 100, with wrk
#        (packed where this machine has it) and with one strata load script run over
#        HTTP and --embedded (issue 36's throughput target: >= 0.8x).
#   Everything is printed and also written under $OUT (or build/device/out) as one file
#   per step. Asserts nothing; a step that fails says so and the next one runs.
# Environment: DEVICE_DD_MIB, DEVICE_MERGE_GEN_MB, DEVICE_STEPS ("dd merge stall http
# throughput"), DEVICE_HTTP_THREADS (bench_http's connections and writers, default 16),
# BENCH_DIR (data directory; default TMPDIR or /tmp).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
pack=$root/build/device
cmd=${1:-}

case $cmd in
pack)
	for b in strata bench/bench_merge bench/bench_stall bench/bench_append; do
		[ -x "$root/build/$b" ] || { echo "device.sh: build/$b is missing: make all, then make -f tests/bench/bench.mk bench-build" >&2; exit 2; }
	done
	rm -rf "$pack"
	mkdir -p "$pack/lib" "$pack/bench" "$pack/bin"
	cp "$root/build/strata" "$pack/"
	cp "$root/build/bench/bench_merge" "$root/build/bench/bench_stall" "$root/build/bench/bench_append" "$pack/bench/"
	# wrk, where this machine has it, for bench_http's wrk half (the device has no packages).
	if command -v wrk >/dev/null 2>&1; then
		cp "$(command -v wrk)" "$pack/bin/"
	fi
	# The libraries every binary needs, but the C library's own (the device has those).
	for b in "$pack/strata" "$pack"/bench/* "$pack"/bin/*; do
		[ -f "$b" ] && ldd "$b" | awk '/=> \// { print $3 }'
	done | sort -u | while read -r lib; do
		case $(basename "$lib") in
		libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|ld-linux*) ;;
		*) cp -L "$lib" "$pack/lib/" ;;
		esac
	done
	du -sh "$pack" | awk '{ print "device.sh: packed " $1 " into build/device (carry it: run carry [\"build/device\"])" }'
	;;
run)
	[ -x "$pack/strata" ] || { echo "device.sh: no build/device/strata: pack it here, and carry build/device" >&2; exit 2; }
	export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export PATH="$pack/bin:$PATH"
	out=${OUT:-$pack/out}
	mkdir -p "$out"
	base=${BENCH_DIR:-${TMPDIR:-/tmp}}
	cpus=$(nproc)
	steps=${DEVICE_STEPS:-dd merge stall http throughput}
	echo "device.sh: $(uname -srm), $cpus CPUs, $(free -g | awk '/^Mem:/ { print $2 }') GiB, data in $base ($(df -h "$base" | awk 'NR == 2 { print $4 }') free)"
	for step in $steps; do
		echo "== $step $(date -u +%H:%M:%S)"
		case $step in
		dd)
			f=$base/device-dd.$$
			dd if=/dev/zero of="$f" bs=1M count="${DEVICE_DD_MIB:-2048}" oflag=direct conv=fdatasync 2>&1 | tail -1 | tee "$out/dd.txt"
			rm -f "$f"
			;;
		merge)
			BENCH_MERGE_GEN_MB=${DEVICE_MERGE_GEN_MB:-64} BENCH_MERGE_GENS=8 BENCH_MERGE_THREADS=1,all \
				"$pack/bench/bench_merge" 2>&1 | tee "$out/merge.txt" | sed -n '/^engine/,$p'
			;;
		stall)
			for t in "$cpus" 0; do
				echo "-- merge threads $t (0: the default, half the CPUs)"
				BENCH_STALL_MERGE_THREADS=$t "$pack/bench/bench_stall" 2>&1 | tee "$out/stall-t$t.txt" |
					grep -E "^(engine|strata |rocksdb )|during/idle|merge runs on"
			done
			;;
		http)
			BENCH_STALL_HTTP_MODES=merge sh "$root/tests/bench/bench_stall_http.sh" "$pack/bench" "$pack/strata" 2>&1 |
				tee "$out/stall-http.txt" | tail -30
			;;
		throughput)
			BENCH_THREADS=${DEVICE_HTTP_THREADS:-16} sh "$root/tests/bench/bench_http.sh" "$pack/bench" "$pack/strata" 2>&1 |
				tee "$out/http.txt" | sed -n '/^batch/,$p'
			;;
		*) echo "device.sh: no step '$step' (dd merge stall http throughput)" ;;
		esac
	done
	;;
*)
	echo "usage: sh tests/bench/device.sh pack|run" >&2
	exit 2
	;;
esac
