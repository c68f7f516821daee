#!/usr/bin/env bash
# Configures build/ with kvsim's one set of options and builds the given targets (everything
# the tests need if none). The main job and the test command both call it, so they share one
# build: whichever runs second rebuilds nothing. Extra configure options: KVSIM_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
flags="-O2 -g1 -DNDEBUG"  # line tables only: file:line in backtraces and perf; full -g costs +50 %
linker=()
# lld links the ~60 test programs in under half of binutils ld's time.
command -v ld.lld >/dev/null && linker=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld
  -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSIM_WERROR=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
  "${linker[@]}" ${KVSIM_CMAKE_ARGS:-} >/dev/null
if [ "$#" -gt 0 ]; then
  cmake --build build -j2 --target "$@"
else
  cmake --build build -j2
fi
