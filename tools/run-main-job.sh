#!/usr/bin/env bash
# Installs dependencies, builds kvsim, and runs the main job: the default what-if study (A2,
# Llama-3-70B TP8, RoCE at 100/200/400 Gb/s, 16- and 128-token PA blocks) with its report, the
# same question on a 2P2D serving cluster under a slice of the Mooncake trace, and how the
# answer depends on the preset's inferred parameters.
# Idempotent. The report lands in out/default-study/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh kvsim kvsim_core  # the test command's build: tools/run-tests.sh reuses it
AXES=(--set hardware.scale_out.bandwidth=100Gb/s,200Gb/s,400Gb/s --set cache.block_tokens=16,128)
# How the study's answer depends on the preset's inferred parameters: the report's last panel.
./build/sim/kvsim sensitivity scenarios/library/a2-llama70b-roce.yaml "${AXES[@]}" \
  -o out/default-study/sensitivity
# The same question at cluster scale: a 2P2D A2 cluster on a slice of the Mooncake trace, whose
# vLLM block pools fragment as requests come and go (a single request gets a fresh engine's runs).
./build/sim/kvsim sweep scenarios/serving/a2-2p2d-mooncake.yaml "${AXES[@]}" \
  --set workload.trace.window.to=60s \
  -o out/default-study/serving
./build/sim/kvsim sweep scenarios/library/a2-llama70b-roce.yaml "${AXES[@]}" -o out/default-study "$@"
./build/sim/kvsim run scenarios/library/a2-llama70b-roce.yaml -q -o out/default-study/baseline
echo "kvsim: default study report: $(pwd)/out/default-study/index.html (timeline: out/default-study/baseline/index.html)"
