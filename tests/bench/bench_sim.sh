#!/bin/sh
# bench_sim.sh STRATA — simulated node time per wall second of `strata sim`: 200 seeds of
# 1000 steps each in one process, the simulated seconds it reports against the wall
# time it took (target: an hour of simulated time in under 10 s).
set -u
strata=${1:?usage: bench_sim.sh STRATA}
seeds=${SIM_SEEDS:-200}
steps=${SIM_STEPS:-1000}
echo "# sim: $seeds seeds x $steps steps (strata sim --seed 1 --seeds $seeds --steps $steps)"
t0=$(date +%s.%N)
out=$("$strata" sim --seed 1 --seeds "$seeds" --steps "$steps" 2>&1)
rc=$?
t1=$(date +%s.%N)
echo "$out" | tail -3
# The simulated seconds: the sum of every seed's "N s simulated".
simulated=$(echo "$out" | grep -o '[0-9.]* s simulated' | awk '{s += $1} END {printf "%.0f", s}')
awk -v s="$simulated" -v a="$t0" -v b="$t1" 'BEGIN {
	w = b - a; if (w <= 0) w = 0.001;
	printf "sim: %s s simulated in %.2f s wall: %.0f simulated s per wall s; an hour takes %.2f s\n",
	       s, w, s / w, (s > 0 ? 3600 * w / s : 0) }'
exit $rc
