#!/usr/bin/env bash
# Wall time of the default study and of a 100-point sweep of the Llama-3-70B 4k scenario on this
# machine's cores (median of 3 runs each). Usage: bench/study_bench.sh [build dir]
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
bws=$(seq -s, 25 25 250 | sed 's/,/Gb\/s,/g')Gb/s
echo "100-point sweep (10 bandwidths x 10 block sizes, no report): $(time_it $kvsim sweep $scenario \
  --set hardware.scale_out.bandwidth=$bws --set cache.block_tokens=16,32,48,64,80,96,112,128,192,256 \
  --no-report -o $work/b) s on $(nproc) cores"
