#!/bin/sh
# tests/bench/run.sh BINDIR — run the benchmarks built into BINDIR and print figures.
# Never fails on speed; exits nonzero only when a benchmark reports an engine error.
# BENCH_ONLY=append|merge|policy|http|stall|stall-http|walsync|growth|get|objstore|frame|sim|cluster|console|trace|whatif runs one of them. STRATA_BIN names the strata
# binary that bench_http serves with (default BINDIR/../strata).
set -u
bindir=${1:?usage: run.sh BINDIR}
strata=${STRATA_BIN:-$bindir/../strata}
here=$(dirname "$0")
status=0
case "${BENCH_ONLY:-}" in
  ""|append|merge|policy|http|stall|stall-http|walsync|growth|get|objstore|frame|sim|cluster|console|trace|whatif) ;;
  *) echo "run.sh: BENCH_ONLY=${BENCH_ONLY} is not one of append, merge, policy, http, stall, stall-http, walsync, growth, get, objstore, frame, sim, cluster, console, trace, whatif" >&2; exit 2 ;;
esac
case "${BENCH_ONLY:-}" in
  ""|append) "$bindir/bench_append" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|merge) "$bindir/bench_merge" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|policy) "$bindir/bench_policy" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|stall)
    case "${BENCH_STALL_ENGINES:-}" in
      ""|*strata*|*rocksdb*) "$bindir/bench_stall" || status=1; echo ;;
    esac
    case "${BENCH_STALL_ENGINES:-}" in
      ""|*tarantool*) sh "$here/bench_stall_tarantool.sh" || status=1; echo ;;
    esac ;;
esac
case "${BENCH_ONLY:-}" in
  ""|walsync) "$bindir/bench_walsync" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|growth) "$bindir/bench_growth" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|stall-http) sh "$here/bench_stall_http.sh" "$bindir" "$strata" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|get) "$bindir/bench_get" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|objstore) sh "$here/bench_objstore.sh" "$bindir" "$strata" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|frame) sh "$here/bench_frame.sh" "$bindir" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|sim) sh "$here/bench_sim.sh" "$strata" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|cluster) BUILD=$(dirname "$strata") sh "$here/bench_cluster.sh" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|console) sh "$here/bench_console.sh" "$strata" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|trace) sh "$here/bench_trace.sh" "$strata" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|whatif) sh "$here/bench_whatif.sh" "$strata" || status=1; echo ;;
esac
case "${BENCH_ONLY:-}" in
  ""|http) sh "$here/bench_http.sh" "$bindir" "$strata" || status=1 ;;
esac
exit $status
