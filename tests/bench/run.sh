#!/bin/sh
# tests/bench/run.sh BINDIR — run the benchmarks built into BINDIR and print figures.
# Never fails on speed; exits nonzero only when a benchmark reports an engine error.
# BENCH_ONLY=append|merge runs one of them.
set -u
bindir=${1:?usage: run.sh BINDIR}
status=0
case "${BENCH_ONLY:-}" in
  ""|append) "$bindir/bench_append" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|merge) "$bindir/bench_merge" || status=1 ;;
esac
exit $status
