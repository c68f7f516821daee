#!/usr/bin/env bash
# Serving replay speed: the whole Mooncake conversation trace (12,031 requests) on the 4P4D A2
# cluster of scenarios/serving/a2-4p4d-mooncake-full.yaml in the timing-faithful mode (1 % of the
# transfers verified byte for byte), and the first 1,000 requests with every transfer verified
# against the same slice at 1 %. Prints the median wall time of RUNS runs of each and requests
# per wall-second. Usage: bench/serving_bench.sh [BUILD_DIR] [RUNS]
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUNS=${2:-3}
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
SCENARIO=scenarios/serving/a2-4p4d-mooncake-full.yaml
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

median_wall() {  # median_wall ARGS...: runs `kvsim run ARGS` RUNS times, prints the median seconds
  local times=()
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$BUILD/sim/kvsim" run "$SCENARIO" -q --no-report --no-trace -o "$OUT/run" "$@"
    t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc)")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

report() {  # report NAME REQUESTS SECONDS
  printf '%-44s %6d requests  %8.2f s  %8.1f requests/s\n' "$1" "$2" "$3" "$(echo "$2 / $3" | bc -l)"
}

full=$(median_wall)
report "whole trace, verify 1 %" 12031 "$full"
slice_timing=$(median_wall --set workload.trace.limit=1000)
report "first 1,000 requests, verify 1 %" 1000 "$slice_timing"
slice_exact=$(median_wall --set workload.trace.limit=1000 --set serving.verify=1)
report "first 1,000 requests, verify every transfer" 1000 "$slice_exact"
printf 'verification cost on the slice: %.2fx the timing-faithful mode\n' \
  "$(echo "$slice_exact / $slice_timing" | bc -l)"
