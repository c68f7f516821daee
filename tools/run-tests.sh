#!/usr/bin/env bash
# Installs dependencies, builds kvsim with -Werror, runs every test tier (ctest), then the
# sanitizer and fuzzing pass (tools/run-sanitizers.sh; KVSIM_SANITIZERS=0 skips it).
# Idempotent. Extra arguments go to ctest (e.g. -L unit, -R Calibration).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSIM_WERROR=ON >/dev/null
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure "$@"
if [ "${KVSIM_SANITIZERS:-1}" != 0 ]; then
  ./tools/run-sanitizers.sh
fi
