#!/usr/bin/env bash
# Sets up and runs every test of phoenix: the release build's whole suite, the ASan+UBSan and TSan builds of
# the runtime tests, the libFuzzer harnesses for a fixed time, the installed package from outside, and a
# benchmark smoke run. Each stage prints a header; the first failure stops the run with a non-zero exit.
#
#   scripts/test.sh            everything
#   STAGES="release asan" scripts/test.sh     a subset (release asan tsan fuzz install)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
stages=${STAGES:-"release asan tsan fuzz install"}
fuzz_seconds=${PHOENIX_FUZZ_SECONDS:-20}

started=$SECONDS
# Tests that measure the process's memory (RSS, malloc's heap in use), where a sanitizer's allocator keeps
# memory of its own, and the test that runs the process out of descriptors, which UBSan needs for its own checks
# (it probes memory through a pipe): they run in the release stage only.
no_sanitizer='resources: 1,000 silent connections|resources: memory of 1,000 connections|resources: accept failing'
stage() { printf '\n==== %s (at %ds) ====\n' "$*" $((SECONDS - started)); }

stage "setup"
scripts/setup.sh

# Line tables only (-g1): sanitizer reports and backtraces keep their files and lines, while full debug
# information, which took a quarter to half of the compile time of the larger files, is left out.
lines_only=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
            -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1)

# Every stage builds as phoenix does by default, as unity sources (CMakeLists.txt, CMAKE_UNITY_BUILD): Asio,
# spdlog, toml11 and CLI11 are parsed and their inline code generated once per batch of files, not once per
# file. On 2 cores the ASan build of sanitizer_tests took 210 s instead of 304 s, and a clean release build 322 s
# instead of 434 s. The dev preset builds one object per file (missing includes show there).

configure() {  # dir, extra cmake args...
  local dir=$1; shift
  cmake -S "$root" -B "$dir" -G Ninja -DPHOENIX_WERROR=ON "${lines_only[@]}" "$@" >/dev/null
}

for s in $stages; do
  case $s in
    release)
      stage "release build and every test"
      # No debug information here: nothing in this stage reads it, and it costs compile time.
      configure build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG"
      cmake --build build/release -j "$jobs"
      ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 300
      ;;
    asan)
      stage "ASan+UBSan build of the runtime and application tests"
      configure build/asan -DCMAKE_BUILD_TYPE=Debug -DPHOENIX_SANITIZER=address -DPHOENIX_BUILD_BENCH=OFF
      cmake --build build/asan -j "$jobs" --target sanitizer_tests  # what the labels below run
      # The five longest application runs take 1-2 minutes each at -O0 under ASan: the release stage runs them;
      # here the apps' unit tests (pivoting, migration of records included) and their shorter cluster runs do.
      slow='raytrace: tiles rendered across|isort: a node joins|lu: a node joins|lu: three processes'
      slow+='|spawned raytrace'
      slow+="|$no_sanitizer"
      ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 600 -L 'unit|integration|apps' -E "$slow"
      ;;
    tsan)
      stage "TSan build of the runtime tests"
      configure build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPHOENIX_SANITIZER=thread -DPHOENIX_BUILD_BENCH=OFF
      # Only what the labels unit and integration run (tests/CMakeLists.txt): the applications' programs, the
      # shell and their tests are the release and ASan stages'.
      cmake --build build/tsan -j "$jobs" --target runtime_tests
      TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest --test-dir build/tsan --output-on-failure -j "$jobs" --timeout 600 -L 'unit|integration' \
        -E "$no_sanitizer"
      ;;
    fuzz)
      harnesses=(frame_decoder route_message handshake frame_auth)
      stage "libFuzzer: ${fuzz_seconds}s per harness, ${#harnesses[@]} harnesses"
      CC=clang CXX=clang++ configure build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPHOENIX_BUILD_FUZZ=ON \
        -DPHOENIX_BUILD_TESTS=OFF -DPHOENIX_BUILD_BENCH=OFF
      cmake --build build/fuzz -j "$jobs" --target "${harnesses[@]/#/fuzz_}"
      # The harnesses run side by side, one per core: each fuzzes on one thread.
      for ((first = 0; first < ${#harnesses[@]}; first += jobs)); do
        batch=("${harnesses[@]:first:jobs}")
        pids=()
        for h in "${batch[@]}"; do
          corpus=build/fuzz/corpus_$h
          rm -rf "$corpus" && mkdir -p "$corpus" && cp "tests/fuzz/corpus/$h"/* "$corpus"/
          build/fuzz/tests/fuzz/fuzz_$h -max_total_time="$fuzz_seconds" -print_final_stats=1 \
            -artifact_prefix=build/fuzz/ "$corpus" >"build/fuzz/fuzz_$h.log" 2>&1 &
          pids+=($!)
        done
        for i in "${!batch[@]}"; do
          h=${batch[$i]}
          log=build/fuzz/fuzz_$h.log
          if ! wait "${pids[$i]}"; then
            kill "${pids[@]}" 2>/dev/null || true
            tail -40 "$log"
            echo "fuzz_$h found a failure; the input is in build/fuzz (crash-*)" >&2
            exit 1
          fi
          echo "fuzz_$h: ${fuzz_seconds}s"
          grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done)' "$log" || true
          rm -rf "build/fuzz/corpus_$h"
        done
      done
      ;;
    install)
      stage "install, then use the package from outside: CMake find_package and a C program built with cc"
      prefix=$(mktemp -d)
      cmake --install build/release --prefix "$prefix" >/dev/null
      cmake -S tests/install -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
      cmake --build build/consumer
      export PHOENIX_LOG_LEVEL=error  # the consumers run without a cluster key: no warning about it here
      build/consumer/cxx_consumer
      cc -std=c11 -Wall -Wextra -Werror tests/install/c_consumer.c -I"$prefix/include" -L"$prefix/lib" -lphoenix \
        -Wl,-rpath,"$prefix/lib" -o build/consumer/c_consumer
      build/consumer/c_consumer
      rm -rf "$prefix"
      ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
  esac
done
stage "all stages passed: $stages"
