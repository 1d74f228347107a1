#!/usr/bin/env bash
# Runs the unit tests, the fuzz targets' regression inputs and the valgrind subset of the hostile
# corpus under valgrind memcheck, in a plain build with tests (the one .ci/test.sh makes):
# any memcheck error, and any leak (definite, indirect or possible), fails the script. Memory
# that HDF5, GSL or libyaml still hold at exit ("still reachable") is not a leak and is not
# reported. The one suppression, tests/hostile/hdf5.valgrind.supp, is a leak inside HDF5 itself
# on corrupt metadata. Add --track-origins=yes to $vg when chasing an uninitialised value.
#
# Usage: bash .ci/valgrind.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
vg="valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible --suppressions=tests/hostile/hdf5.valgrind.supp"
status=0

for t in "$dir"/tests/test_*; do
  [[ -f $t && -x $t ]] || continue
  echo "== valgrind $(basename "$t")"
  $vg "$t" >/dev/null || { echo "FAIL $(basename "$t") (exit $?)"; status=1; }
done

# The fuzz targets' inputs, fewer random ones than ctest runs: memcheck is 20-50x slower.
fz=$dir/tests/fuzz
echo "== valgrind fuzz targets"
$vg "$fz/fuzz_tolerance" tests/fuzz/corpus/tolerance tests/fuzz/reproducers/tolerance tolerances \
  --random 300:200 || status=1
$vg "$fz/fuzz_numerics" tests/fuzz/corpus/numerics tests/fuzz/reproducers/numerics \
  --random 20000:25 || status=1
$vg "$fz/fuzz_baseline" tests/fuzz/corpus/baseline tests/fuzz/reproducers/baseline \
  --random 300:512 || status=1
$vg "$fz/fuzz_loader" tests/fuzz/reproducers/loader "$dir/hostile/good.h5" \
  "$dir/hostile/base_latest.h5" "$dir/hostile/odd_a.h5" "$dir/hostile/data.h5" || status=1

echo "== valgrind hostile corpus (subset)"
/usr/bin/python3 tests/hostile/run_hostile.py "$dir/paritycheck" "$dir/hostile" --subset valgrind \
  --wrapper "$vg" || status=1
exit $status
