#!/usr/bin/env bash
# Builds paritycheck twice, plain and with ASan+UBSan, with warnings as errors, and runs every
# test (ctest) in both builds. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
for variant in build:OFF build-asan:ON; do
  dir=${variant%%:*}
  sanitize=${variant##*:}
  echo "== ${dir} (sanitizers ${sanitize})"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DPC_SANITIZE="$sanitize" -DPC_WERROR=ON >/dev/null
  cmake --build "$dir" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs"
done
