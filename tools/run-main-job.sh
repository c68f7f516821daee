#!/usr/bin/env bash
# Installs dependencies, builds kvsim, and runs the main job. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target kvsim
./build/sim/kvsim demo "$@"
