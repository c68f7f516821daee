#!/usr/bin/env bash
# Installs dependencies, builds kvsim with -Werror, and runs every test tier (ctest).
# Idempotent. Extra arguments go to ctest (e.g. -L unit, -R Calibration).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSIM_WERROR=ON >/dev/null
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure "$@"
