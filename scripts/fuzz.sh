#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# and runs each for a fixed time from its seeds: the committed ones, the shipped tolerance
# profiles and the small files of the hostile corpus. A crash, a leak, an input slower than 10 s,
# a runaway allocation or a sanitizer report fails the script; libFuzzer leaves the input in
# BUILD_DIR/artifacts/. Keep it as a regression test: copy it into tests/fuzz/reproducers/TARGET/,
# where every build's ctest runs it (docs/robustness.md).
#
# Usage: bash scripts/fuzz.sh [BUILD_DIR]      (default build-fuzz; FUZZ_SECONDS per target, 30)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-30}
targets=(tolerance loader numerics)

CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPC_FUZZ=ON -DBUILD_TESTING=OFF \
  >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

seeds=$dir/seeds
rm -rf "$seeds" "$dir/artifacts"
mkdir -p "$dir/artifacts" "${targets[@]/#/$seeds/}" "${targets[@]/#/$dir/corpus/}"
/usr/bin/python3 scripts/make_hostile.py "$dir/hostile" >/dev/null
cp tests/fuzz/corpus/tolerance/* tolerances/*.yaml "$seeds/tolerance/"
find "$dir/hostile" -type f -name 'tol_*.yaml' -size -16k -exec cp -t "$seeds/tolerance/" {} +
find "$dir/hostile" -type f -name '*.h5' -size -16k -exec cp -t "$seeds/loader/" {} +
cp tests/fuzz/corpus/numerics/* "$seeds/numerics/"
for t in "${targets[@]}"; do
  find "tests/fuzz/reproducers/$t" -type f ! -name '.*' -exec cp -t "$seeds/$t/" {} +
done

declare -A max_len=([tolerance]=4096 [loader]=65536 [numerics]=25)
status=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${seconds}s"
  extra=()
  asan=allocator_may_return_null=1:detect_leaks=1
  [[ $t == tolerance ]] && extra=(-dict=tests/fuzz/tolerance.dict)
  # HDF5 1.10 leaks on many error paths that corrupt files reach: new ones turn up in any long
  # run, and they are HDF5's. The loader's own leaks are checked on fixed inputs instead: the
  # hostile corpus under ASan and valgrind, and these reproducers in every ctest run.
  [[ $t == loader ]] && extra=(-detect_leaks=0)
  # A malloc that fails is handled (the loader reports it); one that succeeds and is touched
  # beyond the RSS limit is a finding.
  if ! ASAN_OPTIONS=$asan \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -seed=1 -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=8192 -max_len="${max_len[$t]}" -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$t-" "${extra[@]}" "$dir/corpus/$t" "$seeds/$t" \
    2>"$dir/fuzz_$t.log"; then
    status=1
    tail -n 40 "$dir/fuzz_$t.log"
    echo "fuzz_$t FAILED: keep the input as a regression test:" \
      "cp $dir/artifacts/$t-* tests/fuzz/reproducers/$t/"
  fi
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE' "$dir/fuzz_$t.log" || true
done
exit $status
