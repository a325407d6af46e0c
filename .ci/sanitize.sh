#!/usr/bin/env bash
# The sanitizer step of CI (docs/testing.md), called by `bash .ci/setup.sh
# test` after the Release suite; also runnable alone (after setup.sh has
# installed the packages):
#   bash .ci/sanitize.sh [asan] [tsan]     default: both
#   asan  the whole test suite built with GCC, AddressSanitizer +
#         UndefinedBehaviorSanitizer (CMake preset `asan`, build-asan/);
#   tsan  the OpenMP search tests (label `engine`: test_engine, in-process,
#         no MPI) built with clang and Debian's libomp under
#         ThreadSanitizer, with libomp's Archer tool loaded so TSan sees
#         OpenMP's synchronisation (preset `tsan`, build-tsan/).
# Each step prints its wall time. Fuzzing is not part of CI: fuzz/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=("$@")
((${#steps[@]})) || steps=(asan tsan)
jobs=$(nproc)

step_asan() {
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  # Leaks are checked (LeakSanitizer is on by default with ASan); the MPI
  # tests turn it off for MPICH's own allocations (tests/CMakeLists.txt).
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan -j "$jobs" --timeout 900 --no-tests=error
}

step_tsan() {
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$jobs"
  local archer
  archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | head -1)
  if [[ -z $archer ]]; then
    echo "tsan: libarcher.so (Debian's libomp-dev) not found" >&2
    return 1
  fi
  # Archer reports on stderr that it is active; check that it is, or a
  # clean run would prove nothing about OpenMP regions. libomp itself is
  # not instrumented: Archer asks for ignore_noninstrumented_modules=1, or
  # TSan reports libomp's own mutexes as races.
  local tsan_options="ignore_noninstrumented_modules=1 halt_on_error=1 second_deadlock_stack=1"
  local probe=build-tsan/archer-probe.log
  OMP_TOOL_LIBRARIES=$archer ARCHER_OPTIONS=verbose=1 OMP_NUM_THREADS=2 TSAN_OPTIONS=$tsan_options \
    build-tsan/tests/test_engine --gtest_filter='Parallel.BruteForceAcrossThreads' >"$probe" 2>&1 || true
  if ! grep -q "Archer detected OpenMP application with TSan" "$probe"; then
    echo "tsan: Archer did not attach to libomp (see $probe)" >&2
    return 1
  fi
  OMP_TOOL_LIBRARIES=$archer TSAN_OPTIONS=$tsan_options \
    ctest --preset tsan -j "$jobs" --timeout 900 --no-tests=error
}

for s in "${steps[@]}"; do
  start=$(date +%s)
  echo "== sanitizer step: $s"
  "step_$s"
  echo "== sanitizer step $s: passed in $(($(date +%s) - start)) s"
done
