#!/usr/bin/env bash
# Writes every report (text, -v text, JSON, Markdown, HTML, JUnit, baseline, approval) of a
# fixed set of runs on the shipped fixtures into OUT_DIR, one file per run and format, so that
# two builds can be compared byte for byte (`diff -r`): a refactoring moves code, not output.
# Usage: scripts/report_snapshot.sh PARITYCHECK_BIN OUT_DIR. Paths in the reports are relative
# to the repository root, where the runs happen; the reports carry no timing.
set -uo pipefail
bin=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
cd "$(dirname "$0")/.."

snap() { # NAME ARGS...: one run, every format, and its exit status
  local name=$1
  shift
  "$bin" -j 1 --no-color --json "$out/$name.json" --markdown "$out/$name.md" \
    --html "$out/$name.html" --junit "$out/$name.xml" --save-baseline "$out/$name.baseline" \
    "$@" >"$out/$name.txt" 2>"$out/$name.err"
  echo "exit $?" >>"$out/$name.txt"
  "$bin" -j 1 --no-color -v "$@" >"$out/$name.verbose.txt" 2>&1
  "$bin" -j 1 --no-color --github "$@" >"$out/$name.github.txt" 2>&1
}

r=fixtures/real z=fixtures/zoo
for fam in attention mixer reductions rnn; do
  snap "$fam-tf32" --profile tf32 "$r/${fam}_cpu_fp32.h5" "$r/${fam}_cuda_tf32.h5"
  snap "$fam-bf16-3way" --profile bf16-autocast --reference "$r/${fam}_cpu_fp64.h5" \
    "$r/${fam}_cpu_fp32.h5" "$r/${fam}_cuda_bf16.h5"
  snap "$fam-fp16" --profile fp16-autocast --sort order "$r/${fam}_cpu_fp32.h5" \
    "$r/${fam}_cuda_fp16.h5"
  snap "$fam-default" "$r/${fam}_cpu_fp32.h5" "$r/${fam}_cuda_fp32.h5"
done
for a in "$z"/*_cpu_fp32.h5; do
  fam=$(basename "$a" _cpu_fp32.h5)
  snap "zoo-$fam-fp32" --profile cpu-vs-cuda-fp32 "$a" "$z/${fam}_cuda_fp32.h5"
  snap "zoo-$fam-bf16" --profile bf16-autocast --reference "$z/${fam}_cpu_fp64.h5" "$a" \
    "$z/${fam}_cuda_bf16.h5"
done
snap tolfile -t tests/cli/strict.yaml --max-rows 3 "$r/mixer_cpu_fp32.h5" "$r/mixer_cuda_bf16.h5"
"$bin" -j 1 --profile cpu-vs-cuda-fp32 --approve "$out/approval.json" --by snapshot \
  --reason "snapshot run" "$r/attention_cpu_fp32.h5" "$r/attention_cuda_bf16.h5" \
  >"$out/approve.txt" 2>&1
echo "exit $?" >>"$out/approve.txt"
"$bin" -j 1 --profile cpu-vs-cuda-fp32 --approved "$out/approval.json" \
  "$r/attention_cpu_fp32.h5" "$r/attention_cuda_bf16.h5" >"$out/approved.txt" 2>&1
echo "exit $?" >>"$out/approved.txt"
"$bin" -j 1 --profile tf32 --baseline "$out/attention-tf32.baseline" \
  "$r/attention_cpu_fp32.h5" "$r/attention_cuda_bf16.h5" >"$out/baseline.txt" 2>&1
echo "exit $?" >>"$out/baseline.txt"
"$bin" --help >"$out/help.txt" 2>&1
# The output folder's own path appears where a report names a file it read or wrote.
sed -i "s#$out/#OUT/#g" "$out"/*
