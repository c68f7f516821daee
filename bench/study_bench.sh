#!/usr/bin/env bash
# Wall time of the default study on this machine's cores (median of 3 runs). The 100-point sweep
# issue 31 names is timed by bench/scale_bench.sh. Usage: bench/study_bench.sh [build dir]
set -euo pipefail
build=${1:-build}
kvsim=$build/sim/kvsim
src=$(cd "$(dirname "$0")/.." && pwd)
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -n | sed -n 2p; }
time_it() {
  for i in 1 2 3; do
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    echo "$e - $s" | bc
  done | median
}
scenario=$src/scenarios/library/a2-llama70b-roce.yaml
echo "default study (6 points + baseline run, with reports): $(time_it bash -c "
  $kvsim sweep $scenario --set hardware.scale_out.bandwidth=100Gb/s,200Gb/s,400Gb/s --set cache.block_tokens=16,128 -o $work/a &&
  $kvsim run $scenario -q -o $work/a/baseline") s"
