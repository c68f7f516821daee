#!/usr/bin/env bash
# The test command: installs dependencies, builds kvsim with -Werror (the main job's build,
# tools/build.sh), and runs every ctest tier. Idempotent. Extra arguments go to ctest
# (e.g. -L unit, -R Calibration). The sanitizer and fuzz passes are tools/run-sanitizers.sh;
# .ci/run runs both.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh
ctest --test-dir build -j2 --output-on-failure "$@"
