#!/usr/bin/env bash
# Builds paritycheck twice, plain (MPI-aware, -DPC_MPI=ON: every test then also checks that the
# MPI build behaves as the plain one without mpirun, and ctest mpi runs it under mpirun) and with
# ASan+UBSan, with warnings as errors, and runs every test (ctest) in both builds; then the unit tests and parts of the hostile corpus once more under
# valgrind memcheck, and a clang build with warnings as errors (docs/robustness.md). Its own build
# folders (build-test, build-asan, build-clang): a ./build of yours is left as it is.
# Usage: bash .ci/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
for variant in build-test:OFF:ON build-asan:ON:OFF; do
  IFS=: read -r dir sanitize mpi <<<"$variant"
  echo "== ${dir} (sanitizers ${sanitize}, MPI ${mpi})"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DPC_SANITIZE="$sanitize" -DPC_MPI="$mpi" \
    -DPC_WERROR=ON >/dev/null
  cmake --build "$dir" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs"
done
echo "== valgrind memcheck (build-test)"
bash .ci/valgrind.sh build-test
echo "== build-clang (clang, warnings as errors: it only builds, it runs no tests)"
CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Debug -DPC_WERROR=ON >/dev/null
cmake --build build-clang -j "$jobs"
