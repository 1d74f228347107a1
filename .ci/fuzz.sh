#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# and runs each for a fixed time from its seeds: the committed ones, the shipped tolerance
# profiles and the small files of the hostile corpus. Every finding (a crash, a leak, an input
# slower than 10 s, a runaway allocation, a sanitizer report) lands in BUILD_DIR/artifacts/ and
# tests/fuzz/triage.py sorts it: one in paritycheck's code fails the script; one inside HDF5
# 1.10 (its decoders have known faults on corrupt files) is listed. Keep a paritycheck finding as
# a regression test: copy it into tests/fuzz/reproducers/TARGET/, where every build's ctest runs
# it (docs/robustness.md).
#
# Usage: bash .ci/fuzz.sh [BUILD_DIR]      (default build-fuzz; FUZZ_SECONDS per target, 30)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-30}
targets=(tolerance loader numerics baseline approval)

CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPC_FUZZ=ON -DBUILD_TESTING=OFF \
  >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

seeds=$dir/seeds
rm -rf "$seeds" "$dir/artifacts"
mkdir -p "$dir/artifacts" "${targets[@]/#/$seeds/}" "${targets[@]/#/$dir/corpus/}"
/usr/bin/python3 tests/gen/make_hostile.py "$dir/hostile" >/dev/null
cp tests/fuzz/corpus/tolerance/* tolerances/*.yaml "$seeds/tolerance/"
find "$dir/hostile" -type f -name 'tol_*.yaml' -size -16k -exec cp -t "$seeds/tolerance/" {} +
find "$dir/hostile" -type f -name '*.h5' -size -16k -exec cp -t "$seeds/loader/" {} +
cp tests/fuzz/corpus/formats/* "$seeds/loader/" # safetensors, npy, npz
cp tests/fuzz/corpus/numerics/* "$seeds/numerics/"
cp tests/fuzz/corpus/baseline/* "$seeds/baseline/"
cp tests/fuzz/corpus/approval/* "$seeds/approval/"
for t in "${targets[@]}"; do
  find "tests/fuzz/reproducers/$t" -type f ! -name '.*' -exec cp -t "$seeds/$t/" {} +
done

declare -A max_len=([tolerance]=4096 [loader]=65536 [numerics]=25 [baseline]=65536
                    [approval]=65536)
status=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${seconds}s"
  extra=()
  asan=allocator_may_return_null=1:detect_leaks=1
  if [[ $t == tolerance || $t == baseline ]]; then
    extra=(-dict=tests/fuzz/$t.dict)
  fi
  # HDF5 1.10 leaks on many error paths that corrupt files reach: new ones turn up in any long
  # run, and they are HDF5's. The loader's own leaks are checked on fixed inputs instead: the
  # hostile corpus under ASan and valgrind, and these reproducers in every ctest run.
  # HDF5 1.10 also reads past corrupt metadata inside libc calls (hdf5.asan.supp says which).
  if [[ $t == loader ]]; then
    extra=(-detect_leaks=0)
    asan=allocator_may_return_null=1:detect_leaks=0:suppressions=$PWD/tests/hostile/hdf5.asan.supp
  fi
  # A malloc that fails is handled (the loader reports it); one that succeeds and is touched
  # beyond the RSS limit is a finding. Fork mode goes on after a finding, so that one HDF5 bug
  # cannot hide the rest of the run; tests/fuzz/triage.py then says whose each finding is.
  rc=0
  ASAN_OPTIONS=$asan UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$dir/tests/fuzz/fuzz_$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -seed=1 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=8192 \
    -max_len="${max_len[$t]}" -artifact_prefix="$dir/artifacts/$t-" "${extra[@]}" \
    "$dir/corpus/$t" "$seeds/$t" 2>"$dir/fuzz_$t.log" || rc=$?
  grep -E '^#[0-9]+: cov:' "$dir/fuzz_$t.log" | tail -n 1 || true
  # In fork mode the exit status is that of the last job: a finding there (an HDF5 timeout
  # as often as ours) makes it non-zero. Findings are judged by the triage below; a non-zero
  # status without any finding means the fuzzer itself failed.
  found=("$dir/artifacts/$t-"*)
  if [[ ! -e ${found[0]} ]]; then
    [[ $rc == 0 ]] || { echo "fuzz_$t exited with status $rc and no finding"; status=1; }
    continue
  fi
  if ! /usr/bin/python3 tests/fuzz/triage.py "$dir/tests/fuzz/fuzz_$t" "${found[@]}"; then
    status=1
    echo "fuzz_$t found a bug in paritycheck: keep its input as a regression test:" \
      "cp ARTIFACT tests/fuzz/reproducers/$t/"
  fi
done
exit $status
