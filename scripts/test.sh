#!/usr/bin/env bash
# Sets up and runs every test of phoenix: the release build's whole suite, the ASan+UBSan and TSan builds of
# the runtime tests, the libFuzzer harnesses for a fixed time, the installed package from outside, and a
# benchmark smoke run. Each stage prints a header; the first failure stops the run with a non-zero exit.
#
#   scripts/test.sh            everything
#   STAGES="release asan" scripts/test.sh     a subset (release asan tsan fuzz install; install also makes
#                                              and tries the Debian package)
#
# On two cores the test phases leave much of the machine idle (multi-process tests wait on timers and
# sockets), while the builds and the SPIN model checks keep both cores busy. So, with the release stage:
#   - the SPIN checks (spin.all) start at once, at the lowest priority (nice 19), and take what is left over;
#   - once the release build is done, the sanitizer and fuzz builds go on in the background (nice 10) while
#     the release tests run, and each later stage waits for its own build.
# Tests always run at normal priority. Logs of the background work are in build/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
stages=${STAGES:-"release asan tsan fuzz install"}
fuzz_seconds=${PHOENIX_FUZZ_SECONDS:-20}
logs=$root/build/logs

# Tests that measure the process's memory (RSS, malloc's heap in use), where a sanitizer's allocator keeps
# memory of its own, and the test that runs the process out of descriptors, which UBSan needs for its own checks
# (it probes memory through a pipe): they run in the release stage only.
no_sanitizer='resources: 1,000 silent connections|resources: memory of 1,000 connections|resources: accept failing'
fuzz_harnesses=(frame_decoder route_message handshake frame_auth)

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

# build STAGE: configures and builds what the stage's tests need. Returns non-zero on the first failure.
build() {
  case $1 in
    release)
      # No debug information here: nothing in this stage reads it, and it costs compile time.
      configure build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
          -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" &&
        cmake --build build/release -j "$jobs" ;;
    asan)
      configure build/asan -DCMAKE_BUILD_TYPE=Debug -DPHOENIX_SANITIZER=address -DPHOENIX_BUILD_BENCH=OFF &&
        cmake --build build/asan -j "$jobs" --target sanitizer_tests ;;  # what the labels of its stage run
    tsan)
      # -O1: TSan's own checks dominate the run time; -O2 took 1.5 times as long to compile. Only what the
      # labels unit and integration run (tests/CMakeLists.txt): not the pure cores, the applications or the shell.
      configure build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPHOENIX_SANITIZER=thread -DPHOENIX_BUILD_BENCH=OFF \
          -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" &&
        cmake --build build/tsan -j "$jobs" --target runtime_tests ;;
    fuzz)
      CC=clang CXX=clang++ configure build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPHOENIX_BUILD_FUZZ=ON \
          -DPHOENIX_BUILD_TESTS=OFF -DPHOENIX_BUILD_BENCH=OFF &&
        cmake --build build/fuzz -j "$jobs" --target "${fuzz_harnesses[@]/#/fuzz_}" ;;
    install) ;;
    *) echo "unknown stage $1" >&2; return 2 ;;
  esac
}

started=$SECONDS
stage() { printf '\n==== %s (at %ds) ====\n' "$*" $((SECONDS - started)); }
has_stage() { [[ " $stages " == *" $1 "* ]]; }
for s in $stages; do
  case $s in release|asan|tsan|fuzz|install) ;; *) echo "unknown stage $s" >&2; exit 2 ;; esac
done

# logged NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log, then leaves its exit status in
# $logs/NAME.status (written whole: a reader never sees it half-written).
logged() {
  local name=$1 rc=0; shift
  "$@" >"$logs/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$logs/$name.new" && mv "$logs/$name.new" "$logs/$name.status"
}
# background NICENESS COMMAND...: runs COMMAND (a function too) at that niceness, in a process group of its own
# that any exit of this script ends. Not in a session of its own (setsid): Linux schedules each session as one
# group (autogroup), in which nice would weigh nothing against the tests. Sets $last to its process id.
group_ids=()
end_background() { for g in "${group_ids[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done; }
trap end_background EXIT
trap 'exit 130' INT TERM
background() {
  local niceness=$1; shift
  set -m  # job control: the next job gets a process group of its own
  ( renice -n "$niceness" -p "$BASHPID" >/dev/null; "$@" ) &
  last=$!
  set +m
  group_ids+=("$last")
}
# await NAME PID: waits for $logs/NAME.status, which the background job PID leaves; true if it is 0.
await() {
  while [ ! -f "$logs/$1.status" ]; do
    kill -0 "$2" 2>/dev/null || [ -f "$logs/$1.status" ] ||
      { echo "$1 ended in the background without a result" >&2; exit 1; }
    sleep 2
  done
  [ "$(cat "$logs/$1.status")" = 0 ]
}
build_in_turn() { for s in "$@"; do logged "build-$s" build "$s"; done; }
# dpkg_in ROOT ARGS...: dpkg on the package database and files under ROOT, its output in build/consumer/dpkg.log
# (shown if it fails).
dpkg_in() {
  local dir=$1
  shift
  dpkg --root="$dir" --log="$dir/var/log/dpkg.log" "$@" >>build/consumer/dpkg.log 2>&1 ||
    { cat build/consumer/dpkg.log >&2; exit 1; }
}
# installed_phsh_runs PREFIX: the shell installed under PREFIX runs an installed application by its name (from
# PREFIX/libexec/phoenix), with nothing else on its search path.
installed_phsh_runs() {
  env -u PHSH_APP_PATH -u LD_LIBRARY_PATH PATH=/usr/bin:/bin "$1/bin/phsh" --run-dir "$1/run" \
    -c "spawn -n 2 bintree --depth 16; wait" | tee build/consumer/phsh.log
  grep -q "result: leaves 65536" build/consumer/phsh.log
  rm -rf "$1/run"
}

stage "setup"
scripts/setup.sh
rm -rf "$logs" && mkdir -p "$logs"

if has_stage release; then
  background 19 logged spin spin-models/check.sh all
  spin=$last
fi
builder="" queued=""
# wait_for_build STAGE: the stage's background build if one was started, else the build in the foreground.
wait_for_build() {
  if [ -n "$builder" ] && [[ " $queued " == *" $1 "* ]]; then
    if ! await "build-$1" "$builder"; then
      tail -60 "$logs/build-$1.log"
      echo "the $1 build failed; its whole log is $logs/build-$1.log" >&2
      exit 1
    fi
    echo "(built in the background: $logs/build-$1.log)"
  else
    build "$1"
  fi
}

for s in $stages; do
  case $s in
    release)
      stage "release build"
      build release
      queued=""
      for later in asan tsan fuzz; do has_stage "$later" && queued+=" $later"; done
      if [ -n "$queued" ]; then
        background 10 build_in_turn $queued </dev/null
        builder=$last
        echo "(building in the background at nice 10:$queued)"
      fi
      stage "release tests (the SPIN checks run beside them, at nice 19)"
      ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 300 -LE spin
      ;;
    asan)
      stage "ASan+UBSan build of the runtime and application tests"
      wait_for_build asan
      stage "ASan+UBSan tests"
      # The five longest application runs take 1-2 minutes each at -O0 under ASan: the release stage runs them;
      # here the apps' unit tests (pivoting, migration of records included) and their shorter cluster runs do.
      slow='raytrace: tiles rendered across|isort: a node joins|lu: a node joins|lu: three processes'
      slow+='|spawned raytrace'
      slow+="|$no_sanitizer"
      ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 600 -L 'core|unit|integration|apps' \
        -E "$slow"
      ;;
    tsan)
      stage "TSan build of the runtime tests"
      wait_for_build tsan
      stage "TSan tests"
      TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest --test-dir build/tsan --output-on-failure -j "$jobs" --timeout 600 -L 'unit|integration' \
        -E "$no_sanitizer"
      ;;
    fuzz)
      stage "libFuzzer build"
      wait_for_build fuzz
      stage "libFuzzer: ${fuzz_seconds}s per harness, ${#fuzz_harnesses[@]} harnesses"
      # The harnesses run side by side, one per core: each fuzzes on one thread.
      for ((first = 0; first < ${#fuzz_harnesses[@]}; first += jobs)); do
        batch=("${fuzz_harnesses[@]:first:jobs}")
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
      stage "install, then use it from outside: find_package, a C program built with cc and pkg-config, phsh"
      prefix=$root/build/consumer/prefix
      rm -rf "$prefix"
      cmake --install build/release --prefix "$prefix" >/dev/null
      cmake -S tests/install -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
      cmake --build build/consumer
      export PHOENIX_LOG_LEVEL=error  # the consumers run without a cluster key: no warning about it here
      build/consumer/cxx_consumer
      # shellcheck disable=SC2046  # pkg-config's words are separate arguments
      cc -std=c11 -Wall -Wextra -Werror tests/install/c_consumer.c \
        $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs phoenix) \
        -Wl,-rpath,"$prefix/lib" -o build/consumer/c_consumer
      build/consumer/c_consumer
      installed_phsh_runs "$prefix"
      test -f "$prefix/share/man/man1/phsh.1" && test -f "$prefix/share/man/man3/phoenix.3"
      rm -rf "$prefix"
      stage "the Debian package (cpack -G DEB): its files, then installed and removed in a dpkg root of its own"
      rm -f build/release/phoenix_*.deb
      (cd build/release && cpack -G DEB >/dev/null)
      deb=$(ls build/release/phoenix_*.deb)
      dpkg-deb --info "$deb" | grep -E '^ (Package|Version|Depends):'
      dpkg-deb --contents "$deb" >build/consumer/deb-contents.txt
      for f in usr/bin/phsh usr/libexec/phoenix/lu usr/lib/pkgconfig/phoenix.pc usr/share/man/man1/phsh.1; do
        grep -qE " \./$f\$" build/consumer/deb-contents.txt || { echo "the package has no /$f" >&2; exit 1; }
      done
      if [ "$(id -u)" = 0 ]; then  # dpkg, even in a root of its own, runs as root only
        dpkg_root=$root/build/consumer/dpkg-root
        rm -rf "$dpkg_root"
        mkdir -p "$dpkg_root/var/lib/dpkg/info" "$dpkg_root/var/lib/dpkg/updates" "$dpkg_root/var/log"
        touch "$dpkg_root/var/lib/dpkg/status"
        rm -f build/consumer/dpkg.log
        # Its dependencies are this machine's, not the private root's: dpkg is told to go on without them. Its
        # maintainer scripts do nothing (the ldconfig trigger does their work), and run outside the root, which
        # has no shell.
        dpkg_in "$dpkg_root" --force-depends --force-script-chrootless -i "$deb"
        installed_phsh_runs "$dpkg_root/usr"
        dpkg_in "$dpkg_root" --force-script-chrootless -P phoenix
        left=$(find "$dpkg_root" -path "$dpkg_root/var" -prune -o -type f -print)
        [ -z "$left" ] || { echo "dpkg -P left files behind: $left" >&2; exit 1; }
        rm -rf "$dpkg_root" build/release/_CPack_Packages
      else
        echo "(not root: the package's install and removal are not tried)"
      fi
      ;;
  esac
done

if has_stage release; then
  stage "SPIN model checks (spin.all, run in the background since the start)"
  if await spin "$spin"; then spin_ok=yes; else spin_ok=no; fi
  cat "$logs/spin.log"
  if [ $spin_ok = no ]; then echo "the SPIN model checks failed" >&2; exit 1; fi
fi
stage "all stages passed: $stages"
