#!/usr/bin/env bash
# Builds the revision before the architecture work (json_identity.py's OLD_REV) in a worktree
# under BUILD_DIR and checks that every fixture's figures and verdicts are the same as NEW_BIN's.
# Usage: json_identity.sh NEW_BIN REPO BUILD_DIR. Exit 77 (skipped) when the clone lacks that
# revision (a shallow clone).
set -euo pipefail
new_bin=$1 repo=$2 work=$3/old-rev
rev=$(sed -n "s/^OLD_REV = '\([0-9a-f]*\)'.*/\1/p" "$repo/tests/arch/json_identity.py")
if ! git -C "$repo" cat-file -e "$rev^{commit}" 2>/dev/null; then
  echo "revision $rev is not in this clone: skipped"
  exit 77
fi
if [[ ! -x $work/build/paritycheck ]]; then
  rm -rf "$work"
  mkdir -p "$work"
  git -C "$repo" archive "$rev" | tar -x -C "$work"
  cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DPC_WERROR=OFF >/dev/null
  cmake --build "$work/build" --target paritycheck_cli -j "$(nproc)" >/dev/null
fi
exec /usr/bin/python3 "$repo/tests/arch/json_identity.py" "$work/build/paritycheck" "$new_bin" "$repo"
