#!/usr/bin/env bash
# Builds kvsim under sanitizers and runs its tests and fuzzers there; fails on any report.
#
#   tools/run-sanitizers.sh            the CI pass: AddressSanitizer + UndefinedBehaviorSanitizer
#                                      (clang, -fno-sanitize-recover=all) over the unit, impl,
#                                      properties, scenarios and serving tiers, and every fuzz
#                                      target from its corpus for FUZZ_RUNS runs (default 20000)
#                                      or FUZZ_SECONDS (default 20), whichever ends first
#   tools/run-sanitizers.sh full       every C++ tier under ASan+UBSan: the CI pass plus the C++
#                                      front end, launched programs, cross-validation and mutants
#   tools/run-sanitizers.sh python     the Python tier with the sanitizer runtime preloaded (the
#                                      module, the CLI and the program-side libraries built
#                                      sanitized); CI runs it after the CI pass
#   tools/run-sanitizers.sh fuzz SECS  every fuzz target for SECS seconds each, or FUZZ_RUNS runs
#                                      if that ends first (the long run)
#   tools/run-sanitizers.sh tsan       ThreadSanitizer over the threads of launched C++ programs:
#                                      the program-side libraries and the test programs built with
#                                      TSan (tree build-tsan/), the cpp tier's launches run (those
#                                      of CPython programs are skipped: see the README)
#
# Why clang: the one sanitized tree also builds the libFuzzer targets (fuzz/), so CI builds once.
# Every run preloads tools/sanitizers/systemc_fibers.c (why: its header) before the shared ASan
# runtime (-shared-libasan, so that a Python interpreter can preload it too; hence
# verify_asan_link_order=0).
# Idempotent; the tree is build-san/.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-ci}"
./tools/install-deps.sh
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

if [[ "$mode" == tsan ]]; then
  # The world's processes are SystemC coroutines on one thread; the threads are the programs'
  # (their calls, each with its channel, and the preloaded thread calls), so those are what TSan
  # instruments. Any report fails the program, hence its launch and the test.
  CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKVSIM_TSAN_PROGRAMS=ON -DKVSIM_BUILD_BENCH=OFF >/dev/null
  # What the installed package holds: the launcher, the Python module and the libraries.
  cmake --build build-tsan -j2 --target kvsim kvsim_core kvsim_channel kvsim_client \
    kvsim_preload llm_datadist ascendcl acl_rt ascend_hal
  export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
  ctest --test-dir build-tsan -R '^cpp_(install_and_build|launch)_programs$' --output-on-failure
  echo "run-sanitizers: tsan: no report in the launched C++ programs' threads"
  exit 0
fi

rt_dir="$(dirname "$(clang -print-file-name=libclang_rt.asan-x86_64.so)")"
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
link="-fsanitize=address,undefined -shared-libasan -Wl,-rpath,${rt_dir}"
# Leaks are reported (LeakSanitizer) except in Python runs, where the interpreter's own
# allocations at exit are not ours. Third-party suppressions, each with its reason, are in
# tools/sanitizers/.
mkdir -p build-san
shim="$(pwd)/build-san/libkvsim_systemc_fibers.so"
cc -shared -fPIC -O1 -o "$shim" tools/sanitizers/systemc_fibers.c -ldl -lpthread
export ASAN_OPTIONS="verify_asan_link_order=0:abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:suppressions=$(pwd)/tools/sanitizers/asan.supp"
export LSAN_OPTIONS="suppressions=$(pwd)/tools/sanitizers/lsan.supp:print_suppressions=0"
# SystemC's own small-object pool (sc_mempool) hands out pieces of big blocks, which hides each
# object from ASan (no bounds, no use-after-free) and LeakSanitizer (the names of SystemC's
# events and processes, sc_name_gen's, were reported lost through it): SystemC's switch makes
# it use plain new and delete, so the sanitizers see every object.
export SYSTEMC_MEMPOOL_DONT_USE=1
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$(pwd)/tools/sanitizers/ubsan.supp"

CC=clang CXX=clang++ cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="$san -fsanitize=fuzzer-no-link" -DCMAKE_C_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" \
  -DCMAKE_MODULE_LINKER_FLAGS="$link" -DKVSIM_FUZZ=ON -DKVSIM_BUILD_BENCH=OFF >/dev/null

# fuzz/CMakeLists.txt writes the targets and each one's seed folders.
mapfile -t fuzz_targets <build-san/fuzz/targets
fuzz_bins=("${fuzz_targets[@]/#/fuzz_}")

run_fuzzers() {  # libFuzzer's bounds: -runs=N, -max_total_time=S
  local summary=()
  for t in "${fuzz_targets[@]}"; do
    local work="build-san/fuzz/work/$t" inputs
    mkdir -p "$work"
    mapfile -t inputs <"build-san/fuzz/$t.inputs"
    local log="build-san/fuzz/$t.log"
    if ! LD_PRELOAD="$shim" "build-san/fuzz/fuzz_$t" "$@" -max_len=4096 -timeout=20 -rss_limit_mb=2048 \
        -dict=fuzz/kvsim.dict -artifact_prefix="build-san/fuzz/crash-$t-" \
        "$work" "${inputs[@]}" >"$log" 2>&1; then
      tail -40 "$log"
      echo "kvsim: fuzz target $t found a failing input (saved as build-san/fuzz/crash-$t-*);" \
        "add it to fuzz/regressions/$t/ once fixed" >&2
      exit 1
    fi
    summary+=("$t: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)")
  done
  printf 'kvsim: fuzz %s\n' "${summary[@]}"
}

case "$mode" in
  ci)
    cmake --build build-san -j2 --target kvsim model_tests impl_tests platform_tests impl_world_tests \
      fault_matrix_tests \
      property_tests scenario_tests serving_tests "${fuzz_bins[@]}"
    LD_PRELOAD="$shim" ctest --test-dir build-san -j2 --output-on-failure \
      -L 'unit|impl|properties|scenarios|serving' -LE 'mutants|fuzz|cpp|python'
    run_fuzzers "-runs=${FUZZ_RUNS:-20000}" "-max_total_time=${FUZZ_SECONDS:-20}"
    ;;
  full)
    cmake --build build-san -j2
    LD_PRELOAD="$shim" ctest --test-dir build-san -j2 --output-on-failure -LE 'python|fuzz'
    run_fuzzers "-runs=${FUZZ_RUNS:-20000}" "-max_total_time=${FUZZ_SECONDS:-20}"
    ;;
  python)
    cmake --build build-san -j2 --target kvsim kvsim_core llm_datadist
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
      LD_PRELOAD="$shim:$rt_dir/libclang_rt.asan-x86_64.so" \
      ctest --test-dir build-san -j2 --output-on-failure -L python
    ;;
  fuzz)
    cmake --build build-san -j2 --target "${fuzz_bins[@]}"
    run_fuzzers "-max_total_time=${2:-600}" ${FUZZ_RUNS:+"-runs=$FUZZ_RUNS"}
    ;;
  *)
    echo "usage: tools/run-sanitizers.sh [ci|full|python|fuzz SECONDS]" >&2
    exit 2
    ;;
esac
echo "kvsim: sanitizers: no report ($mode)"
