#!/bin/sh
# Installs kvsim into a scratch prefix and builds C++ programs against the installed package
# alone: examples/cpp and cpp/tests/programs with find_package(kvsim), and one example with
# include and library paths only, linked as the official samples link (llm_datadist, acl_rt,
# ascend_hal) and with their -D_GLIBCXX_USE_CXX11_ABI=0, as builds against the CANN toolkit do.
# usage: build_installed_programs.sh CMAKE BUILD_DIR PREFIX SOURCE_DIR OUT_DIR CXX
# CXXFLAGS and LDFLAGS in the environment reach every program (CMake reads them too).
set -eu
cmake=$1 build=$2 prefix=$3 source=$4 out=$5 cxx=$6
rm -rf "$prefix" "$out"
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
for project in examples/cpp cpp/tests/programs; do
  "$cmake" -S "$source/$project" -B "$out/$project" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release >/dev/null
  "$cmake" --build "$out/$project" -j2 >/dev/null
done
# shellcheck disable=SC2086 # CXXFLAGS and LDFLAGS are lists of flags (the TSan pass sets them)
"$cxx" -std=c++17 -O2 -Wall -Wextra -Werror -D_GLIBCXX_USE_CXX11_ABI=0 ${CXXFLAGS:-} \
  -I"$prefix/include" "$source/examples/cpp/prompt_pull.cpp" ${LDFLAGS:-} -L"$prefix/lib" \
  -lllm_datadist -lacl_rt -lascend_hal -lpthread -o "$out/prompt_pull_paths_only"
echo "built against $prefix: $out"
