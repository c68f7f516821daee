#!/usr/bin/env bash
# The simulation core's speed at scale, each figure a median of RUNS runs (wall seconds, peak RSS):
#  1. the 100-point sweep of issue 31: 50 RoCE bandwidths from 10 to 500 Gb/s x 16- and 128-token
#     blocks of scenarios/library/a2-llama70b-roce.yaml, --no-report; with the default block table
#     (a fresh engine's consecutive blocks) and with cache.block_table: scattered;
#  2. a 1P1D serving run of Qwen3-235B-A22B TP8 on two H20 servers: 6 requests of 32k tokens,
#     16-token blocks, cache.block_table: scattered (every block its own descriptor), pull_blocks,
#     every request verified byte for byte (about 18 M descriptors);
#  3. the SuperPoD replay, scenarios/serving/cm384-16p16d-mooncake.yaml: the whole Mooncake
#     conversation trace at its own rate on 16P16D DeepSeek-V3 on a CloudMatrix384 UB plane.
# Goals (issue 31): sweep < 10 s, then < 3 s; the 32k run < 3 s and < 200 MB; the replay < 60 s
# and < 4 GiB. Usage: bench/scale_bench.sh [BUILD_DIR] [RUNS] [--no-replay]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUNS=${2:-3}
REPLAY=${3:-}
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# measure NAME CMD...: runs CMD RUNS times; prints the median wall seconds and the largest peak RSS.
measure() {
  local name=$1
  shift
  /usr/bin/python3 - "$RUNS" "$name" "$@" <<'PY'
import resource, statistics, subprocess, sys, time
runs, name, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
walls = []
for _ in range(runs):
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    walls.append(time.monotonic() - t)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB
print(f"{name:58s} {statistics.median(walls):8.2f} s  {rss:8.0f} MiB peak RSS")
PY
}

bws=$(seq -s, 10 10 500 | sed 's/,/Gb\/s,/g')Gb/s
sweep=(sweep scenarios/library/a2-llama70b-roce.yaml --set "hardware.scale_out.bandwidth=$bws"
  --set cache.block_tokens=16,128 --no-report)
measure "100-point sweep (50 bandwidths x 16/128), default table" \
  "$BUILD/sim/kvsim" "${sweep[@]}" -o "$OUT/sweep"
measure "100-point sweep, block_table: scattered" \
  "$BUILD/sim/kvsim" "${sweep[@]}" --set cache.block_table=scattered -o "$OUT/sweep-scattered"
measure "Qwen3-235B 1P1D, 6 x 32k tokens, scattered, all verified" \
  "$BUILD/sim/kvsim" run scenarios/validation/sglang-mooncake-h20-qwen3-235b.yaml \
  --set workload.requests=6 --set cache.block_table=scattered -q --no-report --no-trace \
  -o "$OUT/qwen"
[[ "$REPLAY" == --no-replay ]] && exit 0
measure "SuperPoD replay: 12,031 requests, 16P16D DeepSeek-V3, cm384" \
  "$BUILD/sim/kvsim" run scenarios/serving/cm384-16p16d-mooncake.yaml -q --no-report --no-trace \
  -o "$OUT/superpod"
