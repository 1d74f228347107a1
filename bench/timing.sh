# Shared by bench/bench and bench/bench_many (sourced): timing in rounds. These shared machines
# change speed by tens of percent from one minute to the next, so a benchmark runs every command
# once a round, for REPEAT rounds, and keeps each command's best: a ratio of two bests is fair
# only when both commands had the same chances (docs/performance.md).

# timed NAME CMD...: runs CMD once; keeps the fastest time of NAME in best_NAME (seconds) and
# the peak RSS of that run in rss_NAME (KiB). A non-zero exit still counts: h5diff exits 1 on
# differences.
timed() {
  local name=$1 t m prev
  shift
  /usr/bin/time -f '%e %M' -o /tmp/pc_bench_time "$@" >/dev/null 2>&1 || true
  read -r t m < <(tail -n 1 /tmp/pc_bench_time) # a non-zero exit adds a line before
  prev=best_$name
  if [ -z "${!prev:-}" ] || awk "BEGIN{exit !($t < ${!prev})}"; then
    printf -v "best_$name" '%s' "$t"
    printf -v "rss_$name" '%s' "$m"
  fi
}

# forget NAME...: starts NAME's best afresh (for the next case).
forget() {
  local name
  for name in "$@"; do
    printf -v "best_$name" '%s' ""
    printf -v "rss_$name" '%s' ""
  done
}
