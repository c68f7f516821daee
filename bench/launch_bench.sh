#!/bin/sh
# Per-call cost of launched C++ programs: bench_launch_calls alone, then two copies at once (every
# barrier waits for both), under `kvsim launch --wall-clock`.
#   bench/launch_bench.sh BUILD_DIR [N [ROUNDS]]
set -eu
build=${1:-build}
n=${2:-2000}
rounds=${3:-5}
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cmake --build "$build" --target bench_launch_calls >/dev/null  # benchmarks are not in `all`
program="$build/bench/bench_launch_calls"
echo "one program:"
"$build/sim/kvsim" launch --wall-clock -- "$program" "$n" "$rounds"
echo "two programs:"
"$build/sim/kvsim" launch --wall-clock -- "$program" "$n" "$rounds" ::: "$program" "$n" "$rounds"
